// Auth peer: `oidc-provider` (an OpenID-certified authorization server) in front of an MCP
// server on the official TypeScript SDK that requires bearer tokens through the SDK's own
// `requireBearerAuth` and serves its protected-resource metadata with `mcpAuthMetadataRouter`.
// Both listen on 127.0.0.1 in this one process; for verifi-mcp-tests (tests/tests/oauth.rs).
//
// usage: node server.mjs MODE KEY_FILE
//   MODE      header    the 401 challenge carries resource_metadata (the SDK's default)
//             wellknown the challenge has no resource_metadata: the client finds the metadata
//                       at the path-aware well-known URL
//             mismatch  the protected-resource metadata names another resource: a client must
//                       stop before sending any credential
//             person    as header, but GET /auth is oidc-provider's own (it wants a person:
//                       a redirect to its interaction page); /auto-auth approves at once
//             public    as header, but the token endpoint takes only `none` (public clients,
//                       PKCE: the only client is `code`), and dynamic registration hands out a
//                       `client_secret` anyway (PUBLIC_REG_SECRET), as some servers do: a
//                       client must not send it
//             migrate   as header, with a second oidc-provider (issuer2, dynamic registration
//                       only) on a port of its own: POST /debug/migrate makes the
//                       protected-resource metadata name issuer2, and from then on only
//                       issuer2's tokens are taken (the first issuer's get a 401), as when a
//                       server moves to another authorization server (SEP-2352)
// In every other mode GET /auth approves at once for the test user: it runs oidc-provider's
// login and consent interactions in-process and answers 302 to the client's redirect URI
// with the code, state and iss (an auto-approving server, as in labs).
//   KEY_FILE  where to write the PKCS#8 PEM private key of the `cc-jwt` client
// Prints one JSON line on stdout once all listen:
//   {"issuer": "http://127.0.0.1:A", "mcp": "http://127.0.0.1:B/mcp"} (and "issuer2" in
//   migrate mode)
//
// Clients: cc-basic (client_secret_basic), cc-post (client_secret_post), cc-jwt
// (private_key_jwt, ES256), cc-short (client_secret_basic, 3 s tokens), code (public native
// client, PKCE, authorization code, any loopback port of http://127.0.0.1/callback); and
// dynamic registration. Secrets are fixed test values (see SECRETS below).
// Tools: echo {text}; slow {ms}; whoami (returns the bearer token it was called with: a leaky tool, so a
// test can prove the client redacts it). GET /debug/stats on the MCP port: what was seen;
// POST /debug/revoke: every token seen so far is refused from then on (a 401).

import http from 'node:http';
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import express from 'express';
import Provider from 'oidc-provider';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { mcpAuthMetadataRouter, getOAuthProtectedResourceMetadataUrl } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { z } from 'zod';

const [mode, keyFile] = process.argv.slice(2);
if (!['header', 'wellknown', 'mismatch', 'person', 'public', 'migrate'].includes(mode) || !keyFile) {
  process.stderr.write('usage: node server.mjs header|wellknown|mismatch|person|public|migrate KEY_FILE\n');
  process.exit(2);
}

const SECRETS = {
  'cc-basic': 'cc-basic-secret-0123456789abcdef',
  'cc-post': 'cc-post-secret-0123456789abcdef',
  'cc-short': 'cc-short-secret-0123456789abcdef',
};

// What registration hands out in `public` mode, though the token endpoint takes no secret.
const PUBLIC_REG_SECRET = 'public-reg-secret-0123456789abcdef';

const stats = { methods: [], auto_approved: 0, token_requests: 0, token_paths: [], token_basic_auth: [], mcp_requests: 0, unauthorized: 0, tokens_seen: [], tool_calls: 0,
  // migrate mode: the requests the second issuer saw, the client ids each issuer's
  // authorization endpoint was given, and which issuer (1 or 2) issued each token taken.
  as2_paths: [], auth_client_ids: { 1: [], 2: [] }, tokens_taken_from: [] };
// Tokens the resource server refuses from now on (POST /debug/revoke: every token seen so far).
const revoked = new Set();

function listen(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
}

// Both ports first, so each side can name the other.
const asHttp = http.createServer();
const mcpHttp = http.createServer();
const as2Http = mode === 'migrate' ? http.createServer() : null;
const asPort = await listen(asHttp);
const mcpPort = await listen(mcpHttp);
const issuer = `http://127.0.0.1:${asPort}`;
const issuer2 = as2Http ? `http://127.0.0.1:${await listen(as2Http)}` : null;
// migrate mode: whether the protected resource has moved to issuer2.
let migrated = false;
const mcpUrl = `http://127.0.0.1:${mcpPort}/mcp`;
const resource = mode === 'mismatch' ? `http://127.0.0.1:${mcpPort}/elsewhere` : mcpUrl;

const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
writeFileSync(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }));
const publicJwk = { ...publicKey.export({ format: 'jwk' }), use: 'sig', alg: 'ES256' };

const publicOnly = mode === 'public';
const allClients = [
    { client_id: 'cc-basic', client_secret: SECRETS['cc-basic'], grant_types: ['client_credentials'], redirect_uris: [], response_types: [], token_endpoint_auth_method: 'client_secret_basic' },
    { client_id: 'cc-post', client_secret: SECRETS['cc-post'], grant_types: ['client_credentials'], redirect_uris: [], response_types: [], token_endpoint_auth_method: 'client_secret_post' },
    { client_id: 'cc-short', client_secret: SECRETS['cc-short'], grant_types: ['client_credentials'], redirect_uris: [], response_types: [], token_endpoint_auth_method: 'client_secret_basic' },
    { client_id: 'code', application_type: 'native', token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], redirect_uris: ['http://127.0.0.1/callback'] },
    { client_id: 'cc-jwt', grant_types: ['client_credentials'], redirect_uris: [], response_types: [], token_endpoint_auth_method: 'private_key_jwt', token_endpoint_auth_signing_alg: 'ES256', jwks: { keys: [publicJwk] } },
];
const providerConfig = (clients) => ({
  clients,
  scopes: ['mcp:tools', 'mcp:admin', 'offline_access'],
  clientAuthMethods: publicOnly ? ['none'] : ['client_secret_basic', 'client_secret_post', 'private_key_jwt', 'none'],
  enabledJWA: { clientAuthSigningAlgValues: ['ES256'] },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  // A refresh token for every code-flow client allowed the grant (as most servers do for
  // native clients), so a client's renewal without a person can be tested.
  issueRefreshToken: async (_ctx, client, code) =>
    client.grantTypeAllowed('refresh_token') && code.kind === 'AuthorizationCode',
  findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => mcpUrl,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator, client) => {
        if (indicator !== mcpUrl && indicator !== resource) throw new Provider.errors.InvalidTarget();
        return {
          scope: 'mcp:tools mcp:admin',
          audience: indicator,
          accessTokenTTL: client?.clientId === 'cc-short' ? 3 : 3600,
          accessTokenFormat: 'opaque',
        };
      },
    },
  },
});
const provider = new Provider(issuer, providerConfig(publicOnly ? allClients.filter((c) => c.token_endpoint_auth_method === 'none') : allClients));
// The second issuer (migrate mode) knows no client: a client registers there.
const provider2 = issuer2 ? new Provider(issuer2, providerConfig([])) : null;
provider2?.use(async (ctx, next) => {
  stats.as2_paths.push(`${ctx.method} ${ctx.path}`);
  await next();
});
provider.use(async (ctx, next) => {
  if (ctx.path === '/token') {
    stats.token_requests++;
    stats.token_basic_auth.push(Boolean(ctx.get('authorization')));
  }
  stats.token_paths.push(`${ctx.method} ${ctx.path}`);
  await next();
});
// The interactions, approved at once for the test user: login, then consent to what was asked.
async function interaction(provider, req, res) {
  const details = await provider.interactionDetails(req, res);
  if (details.prompt.name === 'login') {
    return provider.interactionFinished(req, res, { login: { accountId: 'test-user' } }, { mergeWithLastSubmission: false });
  }
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
  const missing = details.prompt.details;
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  const grantId = await grant.save();
  return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

// GET /auth (or /auto-auth) for a client that follows no redirect: the whole dance runs here,
// with a cookie jar, and the client gets the final 302 to its redirect URI.
async function autoApprove(issuer, req, res) {
  const jar = new Map();
  let target = `${issuer}${req.url.replace(/^\/auto-auth/, '/auth')}`;
  for (let hop = 0; hop < 10; hop++) {
    const r = await fetch(target, {
      redirect: 'manual',
      headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '), 'x-verifi-internal': '1' },
    });
    for (const c of r.headers.getSetCookie()) {
      const [kv] = c.split(';');
      const eq = kv.indexOf('=');
      jar.set(kv.slice(0, eq).trim(), kv.slice(eq + 1));
    }
    const loc = r.headers.get('location');
    if (!loc) {
      res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'text/plain' });
      return res.end(Buffer.from(await r.arrayBuffer()));
    }
    const next = new URL(loc, issuer);
    if (next.origin !== issuer) {
      stats.auto_approved++;
      res.writeHead(302, { location: next.href, 'content-length': '0' });
      return res.end();
    }
    target = next.href;
  }
  res.writeHead(508, { 'content-type': 'text/plain' });
  res.end('too many redirects');
}

const providerCallback = provider.callback();
// An issuer's own requests: the interactions, auto-approval, then oidc-provider.
function authServer(which, provider, issuer, callback) {
  return (req, res) => {
    const url = new URL(req.url, issuer);
    const path = url.pathname;
    const internal = req.headers['x-verifi-internal'] === '1';
    const fail = (e) => { res.writeHead(500, { 'content-type': 'text/plain' }); res.end(String(e?.message ?? e)); };
    if (path === '/auth' && !internal) stats.auth_client_ids[which].push(url.searchParams.get('client_id'));
    if (path.startsWith('/interaction/')) return interaction(provider, req, res).catch(fail);
    if (!internal && (path === '/auto-auth' || (path === '/auth' && mode !== 'person'))) {
      return autoApprove(issuer, req, res).catch(fail);
    }
    return callback(req, res);
  };
}
if (as2Http) as2Http.on('request', authServer(2, provider2, issuer2, provider2.callback()));
const asServer = authServer(1, provider, issuer, providerCallback);
asHttp.on('request', (req, res) => {
  const path = new URL(req.url, issuer).pathname;
  if (publicOnly && path === '/reg' && req.method === 'POST') {
    // The registration reply, with a client_secret the token endpoint will never take.
    const { end, setHeader } = res;
    res.setHeader = (k, v) => (String(k).toLowerCase() === 'content-length' ? res : setHeader.call(res, k, v));
    res.end = (chunk, ...rest) => {
      try {
        const body = JSON.parse(String(chunk));
        if (body.client_id) chunk = JSON.stringify({ ...body, client_secret: PUBLIC_REG_SECRET });
      } catch { /* not JSON: as it is */ }
      return end.call(res, chunk, ...rest);
    };
  }
  return asServer(req, res);
});

// The resource server: the SDK's bearer auth, verifying tokens with the provider in-process.
const verifier = {
  async verifyAccessToken(token) {
    stats.tokens_seen.push(token);
    let t = (await provider.ClientCredentials.find(token)) ?? (await provider.AccessToken.find(token));
    let from = t ? 1 : null;
    if (!t && provider2) {
      t = await provider2.AccessToken.find(token);
      from = t ? 2 : null;
    }
    // Once moved, only the new issuer's tokens are taken.
    if (!t || t.isExpired || revoked.has(token) || (migrated && from !== 2)) {
      const { InvalidTokenError } = await import('@modelcontextprotocol/sdk/server/auth/errors.js');
      throw new InvalidTokenError('Token is unknown or expired');
    }
    stats.tokens_taken_from.push(from);
    return { token, clientId: t.clientId, scopes: (t.scope ?? '').split(' ').filter(Boolean), expiresAt: t.exp, resource: new URL(t.aud ?? mcpUrl) };
  },
};

const app = express();
app.use(express.json({ limit: '1mb' }));
app.get('/debug/stats', (_req, res) => res.json(stats));
app.post('/debug/revoke', (_req, res) => { for (const t of stats.tokens_seen) revoked.add(t); res.json({ revoked: revoked.size }); });
if (mode === 'migrate') {
  // The move: the metadata names issuer2 from now on.
  app.post('/debug/migrate', (_req, res) => { migrated = true; res.json({ migrated }); });
  app.get('/.well-known/oauth-protected-resource/mcp', (_req, res) =>
    res.json({ resource, authorization_servers: [migrated ? issuer2 : issuer], scopes_supported: ['mcp:tools'] }));
}
if (mode === 'mismatch') {
  // Where the challenge points, metadata that names another resource.
  app.get('/.well-known/oauth-protected-resource/mcp', (_req, res) =>
    res.json({ resource, authorization_servers: [issuer], scopes_supported: ['mcp:tools'] }));
}
app.use(mcpAuthMetadataRouter({
  oauthMetadata: { issuer, authorization_endpoint: `${issuer}/auth`, token_endpoint: `${issuer}/token`, response_types_supported: ['code'] },
  resourceServerUrl: new URL(resource),
  scopesSupported: ['mcp:tools'],
}));
app.use('/mcp', (req, _res, next) => { stats.mcp_requests++; next(); });
app.use('/mcp', requireBearerAuth({
  verifier,
  requiredScopes: ['mcp:tools'],
  resourceMetadataUrl: mode === 'wellknown' ? undefined : getOAuthProtectedResourceMetadataUrl(new URL(mcpUrl)),
}));
app.use('/mcp', (req, res, next) => { if (res.statusCode === 401) stats.unauthorized++; next(); });
app.post('/mcp', async (req, res) => {
  // Every JSON-RPC method that passed the bearer check, in order.
  for (const m of Array.isArray(req.body) ? req.body : [req.body]) stats.methods.push(m?.method ?? null);
  const server = new McpServer({ name: 'verifi-peer-auth', version: '0.1.0' });
  server.registerTool('echo', { description: 'Returns its text argument', inputSchema: { text: z.string() } },
    async ({ text }) => { stats.tool_calls++; return { content: [{ type: 'text', text }] }; });
  server.registerTool('slow', { description: 'Sleeps ms (default 5000)', inputSchema: { ms: z.number().int().optional() } },
    async ({ ms = 5000 }) => { await new Promise((r) => setTimeout(r, Math.min(ms, 60000))); return { content: [{ type: 'text', text: 'slept' }] }; });
  server.registerTool('whoami', { description: 'Returns the bearer token it was called with', inputSchema: {} },
    async (_args, extra) => { stats.tool_calls++; return { content: [{ type: 'text', text: `token=${extra.authInfo?.token}` }] }; });
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on('close', () => { transport.close(); server.close(); });
  await server.connect(transport);
  await transport.handleRequest(req, res, req.body);
});
mcpHttp.on('request', app);

process.stdout.write(`${JSON.stringify({ issuer, mcp: mcpUrl, ...(issuer2 ? { issuer2 } : {}) })}\n`);
