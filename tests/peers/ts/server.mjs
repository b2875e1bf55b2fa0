// Interop peer: a small MCP server on the official TypeScript SDK (`McpServer` +
// `StreamableHTTPServerTransport` on plain node http), for the verifi-mcp-tests interop suite.
// Plain ES module JavaScript, so it runs on node with no compile step.
//
// usage: node server.mjs MODE PORT | node server.mjs stdio
//   MODE  stateful (sessions, SSE replies) | json (sessions, application/json replies) |
//         stdio (newline-delimited JSON-RPC on stdin/stdout; no port)
//   PORT  a TCP port on 127.0.0.1; 0 picks a free one. The chosen port is printed on stdout
//         (one line) once the server listens.
//
// Tools: logs {secret} (log messages at info, warning, error on the call's stream), echo, run_command (formats a result, never runs anything), fail (isError), mixed
// (text + image), big {bytes}, slow {ms, steps} (progress per step when a progressToken is
// given; notices cancellation), peer_stats (what this process has seen, as JSON text), ports
// (structured output with an outputSchema), ask_aside (asks the client on the session's
// standalone GET stream: an elicitation, a ping, roots/list).
// Resources: test://notes/readme (text), test://notes/blob (base64), the template
// test://echo/{text} (reads `echo: <text>`). Prompts: review {topic}.

import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { EmptyResultSchema, isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const BIG_MAX_BYTES = 64 * 1024 * 1024;
const MAX_BODY_BYTES = 4 * 1024 * 1024;

const [mode, portArg] = process.argv.slice(2);
if (mode !== 'stdio' && (!['stateful', 'json'].includes(mode) || portArg === undefined || !/^\d+$/.test(portArg))) {
  process.stderr.write('usage: node server.mjs stateful|json PORT | node server.mjs stdio\n');
  process.exit(2);
}

const stats = {
  connections: 0,
  initializes: 0,
  tool_calls: 0,
  cancelled: 0,
  slow_interrupted: 0,
  slow_completed: 0,
  progress_sent: 0,
};

// The number after the last `exit ` in the command, else 0 (as the rmcp test server).
function exitCodeOf(command) {
  const re = /exit (-?\d+)/g;
  let code = 0;
  for (const m of command.matchAll(re)) code = Number(m[1]);
  return code;
}

const text = (t) => ({ content: [{ type: 'text', text: t }] });

function buildServer() {
  // `logging`: the `logs` tool sends log messages (notifications/message).
  const server = new McpServer({ name: 'verifi-peer-ts', version: '0.1.0' }, { capabilities: { logging: {} } });
  server.registerTool('logs', {
    description: 'Sends log messages at info, warning and error on the call\'s stream, then answers',
    inputSchema: { secret: z.string().optional() },
  }, async ({ secret = '' }, extra) => {
    stats.tool_calls++;
    const log = (level, data, logger) => extra.sendNotification({
      method: 'notifications/message', params: { level, data, ...(logger ? { logger } : {}) },
    });
    await log('info', 'peer info line');
    await log('warning', `peer warning with ${secret}`);
    await log('error', { code: 5, what: 'peer error' }, 'peer-db');
    return text('logged');
  });
  server.registerTool('echo', { description: 'Returns its text argument', inputSchema: { text: z.string() } },
    async ({ text: t }) => { stats.tool_calls++; return text(t); });
  server.registerTool('run_command', {
    description: 'Formats a command result as a Kali box would, without running anything',
    inputSchema: { command: z.string(), timeout: z.number().optional(), workspace: z.string().optional() },
  }, async ({ command, timeout, workspace }) => {
    stats.tool_calls++;
    return text(`$ ${command}\n(exit ${exitCodeOf(command)})\n` +
      `workspace=${workspace ?? ''} timeout=${JSON.stringify(timeout ?? null)}\nran: ${command}`);
  });
  server.registerTool('fail', { description: 'Always reports a tool-level error', inputSchema: {} },
    async () => { stats.tool_calls++; return { ...text('fail: this tool always fails'), isError: true }; });
  server.registerTool('mixed', { description: 'A text block and an image block', inputSchema: {} },
    async () => {
      stats.tool_calls++;
      return { content: [{ type: 'text', text: 'mixed: text part' }, { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' }] };
    });
  server.registerTool('big', { description: 'One text block of N bytes', inputSchema: { bytes: z.number().int() } },
    async ({ bytes }) => { stats.tool_calls++; return text('x'.repeat(Math.max(0, Math.min(bytes, BIG_MAX_BYTES)))); });
  server.registerTool('slow', {
    description: 'Sleeps ms in steps, sending progress when asked',
    inputSchema: { ms: z.number().int().optional(), steps: z.number().int().optional() },
  }, async ({ ms = 1000, steps = 1 }, extra) => {
    stats.tool_calls++;
    ms = Math.max(0, Math.min(ms, 600000));
    steps = Math.max(1, Math.min(steps, 10000));
    const token = extra._meta?.progressToken;
    for (let step = 1; step <= steps; step++) {
      const aborted = await new Promise((resolve) => {
        if (extra.signal.aborted) return resolve(true);
        const t = setTimeout(() => { extra.signal.removeEventListener('abort', onAbort); resolve(false); }, ms / steps);
        const onAbort = () => { clearTimeout(t); resolve(true); };
        extra.signal.addEventListener('abort', onAbort, { once: true });
      });
      if (aborted) {
        stats.cancelled++;
        stats.slow_interrupted++;
        throw new Error('slow: cancelled');
      }
      if (token !== undefined) {
        await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: step, total: steps } });
        stats.progress_sent++;
      }
    }
    stats.slow_completed++;
    return text(`slept ${ms} ms in ${steps} steps`);
  });
  server.registerTool('peer_stats', { description: 'What this server process has seen, as JSON', inputSchema: {} },
    async () => text(JSON.stringify(stats, Object.keys(stats).sort())));
  server.registerTool('ports', {
    description: 'Open ports, as structured output',
    inputSchema: {},
    outputSchema: { open: z.array(z.number().int()) },
  }, async () => {
    stats.tool_calls++;
    const out = { open: [22, 80] };
    return { content: [{ type: 'text', text: JSON.stringify(out) }], structuredContent: out };
  });
  // Asks the client on the session's standalone GET stream (a request with no related request
  // goes there, and is dropped when no GET stream is open): an elicitation, a ping, and
  // roots/list (which a client without roots refuses). Says what came back.
  server.registerTool('ask_aside', {
    description: 'Asks the client on the standalone GET stream: elicitation, ping, roots/list',
    inputSchema: {},
  }, async () => {
    stats.tool_calls++;
    const opts = { timeout: 30000 };
    const answer = await server.server.elicitInput({
      message: 'Scan which port?',
      requestedSchema: {
        type: 'object',
        properties: {
          port: { type: 'integer', default: 443 },
          ok: { type: 'boolean', default: true },
          note: { type: 'string' },
        },
        required: ['port'],
      },
    }, opts);
    await server.server.request({ method: 'ping' }, EmptyResultSchema, opts);
    let roots;
    try { await server.server.listRoots(undefined, opts); roots = 'answered'; } catch (e) { roots = `error ${e.code}`; }
    return text(`elicit=${JSON.stringify(answer)} ping=ok roots=${roots}`);
  });
  // Resources and prompts, the same as the rmcp test server's (one page each here).
  server.registerResource('readme', 'test://notes/readme',
    { mimeType: 'text/plain', description: 'A short text note' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'hello from the readme' }] }));
  server.registerResource('blob', 'test://notes/blob', { mimeType: 'application/octet-stream' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'application/octet-stream', blob: 'AAEC' }] }));
  server.registerResource('echo', new ResourceTemplate('test://echo/{text}', { list: undefined }),
    { mimeType: 'text/plain', description: 'Echoes the text of its URI' },
    async (uri, { text: t }) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: `echo: ${t}` }] }));
  server.registerPrompt('review', { description: 'Review a topic', argsSchema: { topic: z.string().describe('What to review') } },
    ({ topic }) => ({
      description: 'Review a topic',
      messages: [{ role: 'user', content: { type: 'text', text: `Review the ${topic} findings.` } }],
    }));
  return server;
}

if (mode === 'stdio') {
  // Newline-delimited JSON-RPC on stdin/stdout (the SDK's stdio transport); ends with stdin.
  const { StdioServerTransport } = await import('@modelcontextprotocol/sdk/server/stdio.js');
  stats.connections++;
  await buildServer().connect(new StdioServerTransport());
  process.stdin.on('end', () => process.exit(0));
}

const sessions = new Map();

function reply(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) { reject(new Error('body too large')); req.destroy(); return; }
      parts.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });
}

async function handle(req, res) {
  const url = new URL(req.url, 'http://127.0.0.1');
  if (url.pathname !== '/mcp') return reply(res, 404, { error: 'not found' });
  const sid = req.headers['mcp-session-id'];
  let parsed;
  if (req.method === 'POST') {
    const raw = await readBody(req);
    try { parsed = JSON.parse(raw.toString('utf8')); } catch {
      return reply(res, 400, { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null });
    }
  }
  if (sid !== undefined) {
    const transport = sessions.get(sid);
    if (!transport) return reply(res, 404, { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
    return transport.handleRequest(req, res, parsed);
  }
  if (req.method === 'POST' && isInitializeRequest(parsed)) {
    stats.initializes++;
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: mode === 'json',
      onsessioninitialized: (id) => { sessions.set(id, transport); },
    });
    transport.onclose = () => { if (transport.sessionId) sessions.delete(transport.sessionId); };
    await buildServer().connect(transport);
    return transport.handleRequest(req, res, parsed);
  }
  return reply(res, 400, { jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null });
}

const httpServer = http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    if (!res.headersSent) reply(res, 500, { jsonrpc: '2.0', error: { code: -32603, message: String(e) }, id: null });
    else res.destroy();
  });
});
httpServer.keepAliveTimeout = 30000;
httpServer.on('connection', (sock) => { stats.connections++; sock.setNoDelay(true); });
if (mode !== 'stdio') {
  httpServer.listen(Number(portArg), '127.0.0.1', () => {
    process.stdout.write(`${httpServer.address().port}\n`);
  });
}
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
