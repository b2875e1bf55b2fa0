//! `mcp`: the everyday command line for MCP tools, through the same `HarnessContext` and slot
//! handle a harness uses (one session, one failover state, one ledger per invocation).
//!
//! stdout carries only results; diagnostics (the run timeline, hints, `-v`'s wire trace) go to
//! stderr. Exit status: 0 ok, 1 a result was `ok: false` (exec: the tool's own exit code),
//! 2 bad input.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, IsTerminal, Read};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use serde_json::{Map, Value, json};
use verifi_mcp_examples::common::{
    self, CLI_SLOT, CallStatus, UsageError, add_pairs, amend_manifest, args_from_source,
    config_server, endpoint_base, event_line, ledger_json, mcp_url, one_slot_manifest,
    only_config_server, parse_args, parse_header, render_json, result_json, run_secrets, scrub,
    string_pair_keys, timeline_json, type_pairs, url_secrets_in,
};
use verifi_mcp_examples::human;
use verifi_mcp_examples::protocol_cmds::{self, ProtoCmd};
use verifi_mcp_examples::{auth_cmd, child_env, out, signals};
use verifi_mcp_host::auth::loopback::LoopbackHook;
use verifi_mcp_host::auth::{AuthConfig, AuthFlow, AuthorizeHook, TokenStore};
use verifi_mcp_host::context::INSECURE_WARNING;
use verifi_mcp_host::proxy::EnvProxies;
use verifi_mcp_host::{
    Elicitation, EraSetting, LogLevel, OnToolChange, ProxyRule, RootCert, ServerLogObserver,
    ToolsLock,
};
use verifi_mcp_host::{
    Exec, HarnessContext, Kind, Options, ProgressUpdate, ProtocolVersion, SlotHandle, TaskStart,
    ToolResult, WireEvent, WireTrace,
};

/// Longest stdin line `batch` accepts.
const MAX_BATCH_LINE: usize = 4 * 1024 * 1024;
/// Most calls `bench` makes, and most in flight (also `batch`'s most in flight).
const MAX_BENCH_CALLS: u64 = 10_000_000;
const MAX_CONC: usize = 1024;
/// Longest `bench --duration`.
const MAX_BENCH_SECS: f64 = 3600.0;
/// Most distinct error texts `bench` counts apart (the rest are "other").
const MAX_ERROR_KINDS: usize = 16;
/// The variable an ENDPOINT is taken from when none is given.
const ENDPOINT_VAR: &str = "MCP_ENDPOINT";
/// Longest line of the `-v` trace (longer ones are cut, saying how much was left out).
const TRACE_LINE: usize = 2000;

/// `--version`: the three names this client goes by, and why they differ.
const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\nUser-Agent: verifi-mcp/",
    env!("CARGO_PKG_VERSION"),
    " (this crate's version, sent on every HTTP request)",
    "\nclientInfo: verifi-harness-sdk 1.0.0 (the seed SDK's handshake string, sent in initialize",
    "\n  so servers' logs read the same as for the TypeScript SDK; it is not bumped with the crate)"
);

const ABOUT: &str = "Call MCP tools over streamable HTTP or stdio, the way a harness does";

const LONG_ABOUT: &str = "\
Call MCP tools over streamable HTTP or stdio, the way a harness does: one session per run,
the run's secrets redacted from everything printed, failover to --fallback when the primary
is down.

Where the server is (the first that applies):
  ENDPOINT                      a URL: http://host:port (MCP at /mcp below it), or the full
                                MCP URL (http://host:port/mcp, or any path with --exact-url)
  --config FILE --server NAME   an entry of an mcpServers JSON file (the format MCP clients
                                share: a \"url\", or a \"command\" run over stdio)
  --stdio 'CMD ARGS…'           a local server, run as a process and spoken to over stdio
  --manifest FILE --slot NAME   a slot of a run manifest (slotFills / endpoints). A slot is
                                a named place for a tool server in a run, e.g. \"kali\".
  MCP_ENDPOINT                  an ENDPOINT from the environment

Results go to stdout, everything else to stderr. Exit status: 0 ok, 1 a result was
ok:false, 2 bad input; exec exits with the command's own exit code. A closed stdout ends
quietly (exit 0). SIGINT, SIGTERM, SIGHUP: what is in flight is cancelled, the session
ended, stdio servers closed; exit 130, 143, 129 (a second signal: at once).

OAuth tokens are kept (0600) in $XDG_DATA_HOME/verifi-mcp/tokens.json (else
~/.local/share/…): log in once with `mcp auth login ENDPOINT`; --token-store memory keeps none.";

const EXAMPLES: &str = "\
Examples:
  mcp tools http://127.0.0.1:8080
  mcp call http://127.0.0.1:8080/mcp echo text='hello world'
  mcp exec http://127.0.0.1:8080 'uname -a'
  mcp call --stdio 'uvx nmap-mcp' scan target=10.0.0.5
  mcp call --config ~/.cursor/mcp.json --server kali echo text=hi
  mcp call http://127.0.0.1:8080 scan target=10.0.0.5 --detach   # a long tool's task id
  mcp task wait http://127.0.0.1:8080 TASK_ID --tool scan
  MCP_ENDPOINT=http://127.0.0.1:8080 mcp call echo text=hi
  mcp completions bash > /etc/bash_completion.d/mcp";

const TOOLS_EXAMPLES: &str = "\
Examples:
  mcp tools http://127.0.0.1:8080
  mcp tools http://127.0.0.1:8080/mcp --format json
  mcp tools --manifest run.json --slot kali";

const CALL_EXAMPLES: &str = "\
Arguments: a JSON object, key=value pairs and key:=json pairs (any JSON), or --args with
JSON text, @FILE or - (stdin). Pairs win over --args. A key=value is a string, or a number,
integer or boolean where the tool's inputSchema says so (bad input, exit 2, if it is not one).

Output: on a terminal, the tool's text, with a status line on stderr; piped, one JSON object
{ok, text, isError, latencyMs, error, kind}. --format text|json chooses. A tool the server
does not have is bad input (exit 2), naming the tools it has.

Examples:
  mcp call http://127.0.0.1:8080 echo '{\"text\":\"hi\"}'
  mcp call http://127.0.0.1:8080 echo text=hi
  mcp call http://127.0.0.1:8080 run_command command='uname -a' timeout:=30
  mcp call http://127.0.0.1:8080 echo --args @big-args.json
  printf '{\"text\":\"from stdin\"}' | mcp call http://127.0.0.1:8080 echo --args -
  mcp call http://127.0.0.1:8080 echo text=hi --format text
  mcp call http://127.0.0.1:8080 scan target=10.0.0.0/24 --detach   # prints the task id
  mcp task wait http://127.0.0.1:8080 TASK_ID --tool scan";

const TASK_EXAMPLES: &str = "\
A long tool may run as a task on a 2026-07-28 server (the tasks extension): `mcp call` waits
for it by itself; `mcp call --detach` prints its id and leaves it running. The task lives on
the server that took the call: give that server's ENDPOINT.

Examples:
  mcp call http://127.0.0.1:8080 scan target=10.0.0.0/24 --detach
  mcp task get http://127.0.0.1:8080 TASK_ID                # its status, as JSON
  mcp task wait http://127.0.0.1:8080 TASK_ID --tool scan   # its result, like mcp call
  mcp task cancel http://127.0.0.1:8080 TASK_ID";

const EXEC_EXAMPLES: &str = "\
Runs COMMAND with the run_command tool of a Kali-style box (--tool NAME for a box that
calls it otherwise) and prints its output. The box's reply is
\"$ <cmd>\\n(exit N)\\n<output>\"; mcp prints the output and exits N. A box without that
tool is bad input (exit 2), naming the tools it has that look like a command runner.

Examples:
  mcp exec http://127.0.0.1:8080 'uname -a'
  mcp exec http://127.0.0.1:8080 'sleep 5' --timeout-ms 2000   # killed on the box: exit 124
  mcp exec http://127.0.0.1:8080 pwd --workspace tenant-a
  mcp exec http://127.0.0.1:8080 id --tool execute_command";

/// Where the server is, without an ENDPOINT: said in each protocol command's help.
macro_rules! endpointless {
    ($cmd:literal, $rest:literal) => {
        concat!(
            "ENDPOINT may be left out: the server then comes from --config FILE [--server NAME], ",
            "--stdio 'CMD ARGS…', --manifest FILE --slot NAME, or MCP_ENDPOINT.\n\nExamples:\n",
            "  mcp ",
            $cmd,
            " http://127.0.0.1:8080",
            $rest,
            "\n",
            "  mcp ",
            $cmd,
            " --stdio './my-server --stdio'",
            $rest,
            "\n",
            "  mcp ",
            $cmd,
            " --config ~/.cursor/mcp.json --server kali",
            $rest,
            "\n",
            "  MCP_ENDPOINT=http://127.0.0.1:8080 mcp ",
            $cmd,
            $rest
        )
    };
}

const RESOURCES_EXAMPLES: &str = endpointless!("resources", "");
const READ_EXAMPLES: &str = endpointless!("read", " test://notes/readme");
const PROMPTS_EXAMPLES: &str = endpointless!("prompts", "");
const PROMPT_EXAMPLES: &str = endpointless!("prompt", " review topic=TLS");
const PING_EXAMPLES: &str = endpointless!("ping", "");

const BATCH_EXAMPLES: &str = "\
Reads JSON lines {\"tool\": NAME, \"args\": {...}} (or MCP's own {\"name\": NAME,
\"arguments\": {...}}) from stdin and prints one result per line,
each with the input's \"line\" number and \"tool\", then a summary line with the ledger (the
run's metering: toolCalls and evidenceBytes, the bytes of redacted text received) and the
timeline (events such as tool_error and mcp.fallback_used). Blank lines are reported on
stderr. With --concurrency above 1, results come in the order they finish.

Examples:
  mcp batch http://127.0.0.1:8080 < calls.jsonl
  mcp batch http://127.0.0.1:8080 --concurrency 8 < calls.jsonl";

const BENCH_EXAMPLES: &str = "\
Checks that the tool exists, makes --warmup calls (not timed), then times --calls calls
(or calls for --duration) with --concurrency in flight, and prints a JSON summary: calls per
second, latency percentiles (p50, p90, p99, p99.9, max) and the errors by kind. On a
terminal, a latency histogram goes to stderr.

Examples:
  mcp bench http://127.0.0.1:8080
  mcp bench http://127.0.0.1:8080 --duration 10s --concurrency 16
  mcp bench http://127.0.0.1:8080 --tool run_command --args command=true --calls 200";

#[derive(Parser, Debug)]
#[command(
    name = "mcp",
    bin_name = "mcp",
    version,
    long_version = LONG_VERSION,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = EXAMPLES,
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// How output is printed (not given: text when stdout is a terminal, JSON otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// JSON: pretty and colored on a terminal, one compact line otherwise.
    Json,
    /// Text for a person: a tool's text, tools with their signatures, one item a line.
    Text,
}

/// The format a command prints in: `--format`, else text on a terminal and JSON when piped.
fn format_of(common: &Common) -> Format {
    common.format.unwrap_or(if std::io::stdout().is_terminal() {
        Format::Text
    } else {
        Format::Json
    })
}

/// How to reach the slot, and the call options.
#[derive(Args, Debug, Clone)]
struct Common {
    /// Take ENDPOINT as the full MCP URL, whatever its path (without it, /mcp is appended
    /// unless the URL already ends in /mcp).
    #[arg(long)]
    exact_url: bool,
    /// A fallback endpoint, used when the primary is unreachable (same form as ENDPOINT).
    #[arg(long, value_name = "ENDPOINT")]
    fallback: Option<String>,
    /// Per-call timeout in ms: connect, handshake and reply (default 300000). For exec: the
    /// command's own timeout (clamped to 1..=285 s; the call keeps the 300 s ceiling).
    #[arg(long, value_name = "MS")]
    timeout_ms: Option<u64>,
    /// A reply that sends no byte for this long fails with `server stalled` (off by default:
    /// the timeout bounds a call; progress and keep-alive comments count; 0 turns it off).
    #[arg(long, value_name = "MS")]
    idle_timeout_ms: Option<u64>,
    /// The lowest level of a server's log messages to print on stderr as `log: …` (debug,
    /// info, notice, warning, error, critical, alert, emergency; default warning).
    #[arg(long, value_name = "LEVEL", default_value = "warning", value_parser = [
        "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
    ])]
    server_log_level: String,
    /// The MCP protocol version to offer: in `initialize` for an old-era server (default
    /// 2025-11-25; the server answers with its own); 2026-07-28 forces the 2026 era (no
    /// handshake).
    #[arg(long, value_name = "VERSION")]
    protocol_version: Option<String>,
    /// Which MCP era to speak: auto (probe each server once with server/discover, then speak
    /// 2026-07-28 or fall back to initialize), modern (2026-07-28 only, never initialize) or
    /// legacy (the handshake era only, never probe).
    #[arg(long, value_name = "ERA", default_value = "auto", value_parser = ["auto", "modern", "legacy"])]
    era: String,
    /// Declare the tasks extension (2026 era): a long tool may then run as a task, polled to
    /// its result; off: a server that answers with a task anyway is an error.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = ["on", "off"])]
    tasks: String,
    /// Answer a server that asks for input (elicitation) without a person: accept-defaults
    /// (the requested fields' defaults), decline or cancel; on the old era's stream and in the
    /// 2026 era's input_required rounds. Not given: none is declared, and a 2026 call that
    /// needs input fails saying what was asked.
    #[arg(long, value_name = "ANSWER", value_parser = ["accept-defaults", "decline", "cancel"])]
    elicitation: Option<String>,
    /// A header sent on every request, 'Name: value' (repeatable; values are redacted in all
    /// output).
    #[arg(long = "header", short = 'H', value_name = "'NAME: VALUE'")]
    headers: Vec<String>,
    /// Take the server from this run manifest (with --slot).
    #[arg(
        long,
        value_name = "FILE",
        requires = "slot",
        conflicts_with = "config"
    )]
    manifest: Option<String>,
    /// Run the server as a local process and speak to it over stdio: its command line, quoted
    /// as one argument ('uvx nmap-mcp --flag'; words split as a shell would, no expansion).
    /// It gets an allow-listed environment (PATH, HOME, LANG …) and is closed at the end.
    #[arg(
        long,
        value_name = "'CMD ARGS…'",
        conflicts_with_all = ["manifest", "config"]
    )]
    stdio: Option<String>,
    /// --stdio (or a config file's command server): a variable for the server process,
    /// NAME=VALUE, on top of the allow-list (repeatable).
    #[arg(short = 'e', long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// --stdio: pass this variable of mcp's own environment on to the server process
    /// (repeatable; an unset one is an error).
    #[arg(long = "env-pass", value_name = "NAME")]
    env_pass: Vec<String>,
    /// The manifest's slot to use: the name a run gives a tool server, e.g. kali.
    #[arg(long, value_name = "NAME", requires = "manifest")]
    slot: Option<String>,
    /// Take the server from this mcpServers JSON file (with --server, unless the file has
    /// only one server).
    #[arg(long, value_name = "FILE")]
    config: Option<String>,
    /// The mcpServers entry to use (with --config; not needed when the file has one).
    #[arg(long, value_name = "NAME", requires = "config")]
    server: Option<String>,
    /// Largest reply accepted, in bytes (a larger one is an ok:false result naming the cap).
    #[arg(long, value_name = "BYTES", default_value_t = 16 * 1024 * 1024)]
    max_reply_bytes: usize,
    /// Largest request sent, in bytes (larger arguments are an ok:false result naming the
    /// cap, before anything is sent).
    #[arg(long, value_name = "BYTES", default_value_t = 16 * 1024 * 1024)]
    max_request_bytes: usize,
    /// Print a wire trace on stderr: connections, requests, reply statuses, headers and
    /// events, with secrets and header values redacted.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// `--on-tool-change` (from [`Pins`], on the commands that call tools).
    #[arg(skip)]
    on_tool_change: Option<String>,
    /// `--tools-lock` (from [`Pins`]).
    #[arg(skip)]
    tools_lock: Option<String>,
    /// Output format (default: text when stdout is a terminal, JSON when it is piped).
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: Option<Format>,
    /// Forward proxy for every request, `http://[user:pass@]host:port` (or `none`). It wins
    /// over HTTPS_PROXY / HTTP_PROXY / NO_PROXY and applies to loopback targets too; its
    /// credentials are redacted in any output.
    #[arg(long, value_name = "URL")]
    proxy: Option<String>,
    /// Trust the CA certificate(s) in this PEM file, besides the system's and the bundled
    /// roots (repeatable).
    #[arg(long, value_name = "FILE")]
    cacert: Vec<String>,
    /// Accept ANY server certificate (lab boxes with self-signed certificates only): anyone
    /// on the path can then read and change the traffic. Says so on stderr.
    #[arg(long)]
    insecure: bool,
    /// OAuth flow: auto (default: client credentials when a secret or key is given, else the
    /// authorization code), client-credentials, or authorization-code.
    #[arg(long, value_name = "FLOW")]
    auth_flow: Option<String>,
    /// OAuth client id (or MCP_CLIENT_ID); without one, a client ID metadata document or
    /// dynamic registration is used where the server offers them.
    #[arg(long, value_name = "ID")]
    client_id: Option<String>,
    /// OAuth client secret (or MCP_CLIENT_SECRET), for client_secret_basic/post.
    // A secret may start with '-' (base64url): taken as the value, not as an option.
    #[arg(long, value_name = "SECRET", allow_hyphen_values = true)]
    client_secret: Option<String>,
    /// OAuth client private key, PKCS#8 PEM (P-256), for private_key_jwt (ES256).
    #[arg(long, value_name = "FILE")]
    client_private_key: Option<String>,
    /// A client ID metadata document URL, used as the client id where the server supports it.
    #[arg(long, value_name = "URL")]
    client_metadata_url: Option<String>,
    /// OAuth scopes to ask for (space-separated); default: what the server's challenge or
    /// metadata names.
    #[arg(long, value_name = "SCOPES")]
    scope: Option<String>,
    /// A bearer token to send as is (or MCP_BEARER_TOKEN); redacted in any output.
    // A token may start with '-' (base64url, as servers issue them): taken as the value.
    #[arg(long, value_name = "TOKEN", allow_hyphen_values = true)]
    bearer: Option<String>,
    /// Where OAuth tokens are kept: file (default: verifi-mcp/tokens.json in the data
    /// directory, $XDG_DATA_HOME or ~/.local/share; mode 0600), memory (this run only), or a
    /// file's PATH. With a stored login, a later run needs no OAuth flags and no browser.
    #[arg(long, value_name = "file|memory|PATH", env = auth_cmd::STORE_VAR)]
    token_store: Option<String>,
}

/// Tool pins and what a changed tool does: on the commands that call tools (call, batch,
/// exec).
#[derive(Args, Debug, Clone, Default)]
struct Pins {
    /// What a tool whose definition changed does to its call: warn (the call goes on, with a
    /// mcp.tool_changed line on stderr) or refuse (ok:false, exit 1, nothing sent). Default:
    /// warn for a change within the run, refuse for a mismatch with --tools-lock.
    #[arg(long, value_name = "warn|refuse", value_parser = ["warn", "refuse"])]
    on_tool_change: Option<String>,
    /// Check each called tool against this lock file (written by `mcp tools --lock FILE`)
    /// before the call is sent: a tool whose definition differs, or that is missing, is
    /// refused (ok:false, exit 1, naming the fields that differ) unless --on-tool-change warn.
    #[arg(long, value_name = "FILE")]
    tools_lock: Option<String>,
}

impl Pins {
    /// Moves the flags into `common`, which the run is built from.
    fn into_common(self, common: &mut Common) {
        common.on_tool_change = self.on_tool_change;
        common.tools_lock = self.tools_lock;
    }
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// List the server's tools: on a terminal (or --format text) each with its argument
    /// signature and description; piped, their names one a line; --format json: each tool
    /// whole, as the server sent it.
    #[command(after_help = TOOLS_EXAMPLES)]
    Tools {
        /// ENDPOINT (omit with --config, --manifest or MCP_ENDPOINT).
        #[arg(value_name = "ENDPOINT")]
        pos: Vec<String>,
        /// The same as --format json.
        #[arg(long)]
        json: bool,
        /// Also write the tools' fingerprints to this lock file (sorted JSON, one entry per
        /// tool), for --tools-lock FILE in later runs.
        #[arg(long, value_name = "FILE")]
        lock: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Call a tool and print its result (ok, text, isError, latencyMs, error).
    #[command(
        after_help = CALL_EXAMPLES,
        override_usage = "mcp call [OPTIONS] [ENDPOINT] <TOOL> [ARGS]..."
    )]
    Call {
        #[arg(
            value_name = "TOOL",
            required = true,
            help = "[ENDPOINT] TOOL [ARGS...]: ARGS is a JSON object or key=value / key:=json pairs"
        )]
        pos: Vec<String>,
        /// Tool arguments: JSON text, @FILE or - (stdin).
        #[arg(long, value_name = "JSON|@FILE|-")]
        args: Option<String>,
        /// Also print `result`, the whole CallToolResult (structured content, images,
        /// annotations), redacted (JSON output).
        #[arg(long)]
        raw: bool,
        /// List the tools first, so the tool's declared outputSchema is checked against its
        /// structuredContent (a mismatch is a tool error naming the failing path).
        #[arg(long)]
        check_output: bool,
        /// If the server makes the call a task (2026 tasks extension), print the task's id
        /// and exit 0 while it runs on (follow it with `mcp task`); a server that answers at
        /// once gets its result printed as usual. Refused (exit 2) for a task of a 2025-11-25
        /// session: it would end with the session when mcp exits.
        #[arg(long)]
        detach: bool,
        #[command(flatten)]
        pins: Pins,
        #[command(flatten)]
        common: Common,
    },
    /// Follow a task a call became (2026 tasks extension): get, wait, cancel.
    #[command(subcommand, after_help = TASK_EXAMPLES)]
    Task(TaskCmd),
    /// Run a command on a Kali-style box (its run_command tool, or --tool); exits with its
    /// exit code.
    #[command(
        after_help = EXEC_EXAMPLES,
        override_usage = "mcp exec [OPTIONS] [ENDPOINT] <COMMAND>"
    )]
    Exec {
        #[arg(
            value_name = "COMMAND",
            required = true,
            help = "[ENDPOINT] COMMAND (quote the command)"
        )]
        pos: Vec<String>,
        /// The workspace folder on the box (default: a run id made for this invocation).
        #[arg(long, value_name = "NAME")]
        workspace: Option<String>,
        /// The box's command tool, when it is not called run_command (e.g. command,
        /// execute_command); it takes {command, timeout, workspace}.
        #[arg(long, value_name = "NAME", default_value = "run_command")]
        tool: String,
        #[command(flatten)]
        pins: Pins,
        #[command(flatten)]
        common: Common,
    },
    /// Run JSON lines {"tool":…,"args":{…}} (or {"name":…,"arguments":{…}}) from stdin
    /// through one session.
    #[command(after_help = BATCH_EXAMPLES)]
    Batch {
        /// ENDPOINT (omit with --config, --manifest or MCP_ENDPOINT).
        #[arg(value_name = "ENDPOINT")]
        pos: Vec<String>,
        /// How many calls in flight at once.
        #[arg(long, default_value_t = 1, value_name = "N")]
        concurrency: usize,
        #[command(flatten)]
        pins: Pins,
        #[command(flatten)]
        common: Common,
    },
    /// Measure a tool's calls per second and latency.
    #[command(after_help = BENCH_EXAMPLES)]
    Bench {
        /// ENDPOINT (omit with --config, --manifest or MCP_ENDPOINT).
        #[arg(value_name = "ENDPOINT")]
        pos: Vec<String>,
        /// The tool to call.
        #[arg(long, default_value = "echo")]
        tool: String,
        /// Its arguments: JSON text, @FILE, - (stdin), or key=value / key:=json pairs.
        #[arg(long, value_name = "ARGS", num_args = 1.., default_values_t = ["{\"text\":\"bench\"}".to_owned()])]
        args: Vec<String>,
        /// How many timed calls (default 1000; not with --duration).
        #[arg(long, value_name = "N", conflicts_with = "duration")]
        calls: Option<u64>,
        /// Call for this long instead of a count: 10s, 500ms, 2m (at most 1 h and 10 000 000
        /// calls).
        #[arg(long, value_name = "TIME")]
        duration: Option<String>,
        /// Calls made first and not timed (connections and caches warm).
        #[arg(long, default_value_t = 20, value_name = "N")]
        warmup: u64,
        /// How many calls in flight at once.
        #[arg(long, default_value_t = 1, value_name = "N")]
        concurrency: usize,
        #[command(flatten)]
        common: Common,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Examples:\n  mcp completions bash > ~/.local/share/bash-completion/completions/mcp\n  mcp completions zsh > \"${fpath[1]}/_mcp\""
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    #[command(after_help = "Examples:\n  mcp man > mcp.1 && man ./mcp.1")]
    Man,
    /// List resources and resource templates: `mcp resources [ENDPOINT]`.
    #[command(
        override_usage = "mcp resources [OPTIONS] [ENDPOINT]",
        after_help = RESOURCES_EXAMPLES
    )]
    Resources(ProtoArgs),
    /// Read a resource: `mcp read [ENDPOINT] URI`.
    #[command(
        override_usage = "mcp read [OPTIONS] [ENDPOINT] <URI>",
        after_help = READ_EXAMPLES
    )]
    Read(ProtoArgs),
    /// List prompts: `mcp prompts [ENDPOINT]`.
    #[command(
        override_usage = "mcp prompts [OPTIONS] [ENDPOINT]",
        after_help = PROMPTS_EXAMPLES
    )]
    Prompts(ProtoArgs),
    /// Get a prompt: `mcp prompt [ENDPOINT] NAME [JSON_ARGS | key=value…]`.
    #[command(
        override_usage = "mcp prompt [OPTIONS] [ENDPOINT] <NAME> [JSON_ARGS | key=value…]",
        after_help = PROMPT_EXAMPLES
    )]
    Prompt(ProtoArgs),
    /// Ping the server: `mcp ping [ENDPOINT]`.
    #[command(override_usage = "mcp ping [OPTIONS] [ENDPOINT]", after_help = PING_EXAMPLES)]
    Ping(ProtoArgs),
    /// Log in to an OAuth-protected server once (the token is kept), see logins, log out.
    #[command(subcommand, after_help = AUTH_EXAMPLES)]
    Auth(AuthCmd),
}

const AUTH_EXAMPLES: &str = "\
Tokens are kept in verifi-mcp/tokens.json in the data directory ($XDG_DATA_HOME, else
~/.local/share; mode 0600), per authorization server and MCP server. A run against a server
with a stored login uses its token (renewed with its refresh token when it expired) without
the OAuth flags and without a browser. --token-store memory (or MCP_TOKEN_STORE=memory)
keeps nothing; --token-store PATH uses another file. No command prints a token.

Examples:
  mcp auth login https://mcp.example.com/mcp --client-id my-app   # opens the browser once
  mcp call https://mcp.example.com/mcp whoami                      # the stored token
  mcp auth status                                                  # every stored login
  mcp auth status https://mcp.example.com/mcp --format json
  mcp auth logout https://mcp.example.com/mcp";

/// `mcp auth …`: stored OAuth logins.
#[derive(Subcommand, Debug)]
enum AuthCmd {
    /// Authorize with the server's authorization server (the OAuth flags as for `call`; by
    /// default the authorization code flow, through the browser) and keep the token.
    #[command(override_usage = "mcp auth login [OPTIONS] <ENDPOINT>")]
    Login(ProtoArgs),
    /// The stored logins (of ENDPOINT, or all): server, authorization server, expiry, whether
    /// renewable, scopes. Never a token. Exit 1 when ENDPOINT has none.
    #[command(override_usage = "mcp auth status [OPTIONS] [ENDPOINT]")]
    Status(ProtoArgs),
    /// Forget the stored tokens of ENDPOINT.
    #[command(override_usage = "mcp auth logout [OPTIONS] <ENDPOINT>")]
    Logout(ProtoArgs),
}

/// `mcp auth login|status|logout`.
async fn auth(cmd: AuthCmd) -> Result<ExitCode, Fail> {
    let (mut a, login) = match cmd {
        AuthCmd::Login(a) => (a, true),
        AuthCmd::Status(a) | AuthCmd::Logout(a) if !a.common.env.is_empty() => {
            return Err(UsageError("--env is for a --stdio server".into()).into());
        }
        AuthCmd::Status(a) => {
            let choice = auth_cmd::choose(a.common.token_store.as_deref());
            let url = auth_cmd::target_url(&a.pos, a.common.exact_url)?;
            let json = a.common.format == Some(Format::Json);
            let p = Printer::new(Vec::new());
            let code =
                auth_cmd::status(&choice, url.as_deref(), json, &|l| p.text(l), &|l| p.err(l));
            return Ok(ExitCode::from(code));
        }
        AuthCmd::Logout(a) => {
            let choice = auth_cmd::choose(a.common.token_store.as_deref());
            let Some(url) = auth_cmd::target_url(&a.pos, a.common.exact_url)? else {
                return Err(UsageError("missing ENDPOINT".into()).into());
            };
            let p = Printer::new(Vec::new());
            let code = auth_cmd::logout(&choice, &url, &|l| p.text(l), &|l| p.err(l));
            return Ok(ExitCode::from(code));
        }
    };
    let run = build_with(&a.common, &mut a.pos, &run_id(), false, login)?;
    no_extra(&a.pos)?;
    let pinged = with_elapsed("login", None, run.slot.ping()).await;
    let choice = auth_cmd::choose(a.common.token_store.as_deref());
    let code = auth_cmd::after_login(
        pinged.map(drop).map_err(|e| e.to_string()),
        &choice,
        &run.url,
        &|l| run.p.text(l),
        &|l| run.p.err(l),
    );
    Ok(finish(&run, code).await)
}

/// `mcp task …`: a task a call became.
#[derive(Subcommand, Debug)]
enum TaskCmd {
    /// Print the task's status (tasks/get) as JSON: status, statusMessage, and its result
    /// or error once it ended.
    #[command(
        override_usage = "mcp task get [OPTIONS] [ENDPOINT] <TASK_ID>",
        after_help = TASK_EXAMPLES
    )]
    Get(TaskArgs),
    /// Wait for the task's end and print its result like `mcp call` (--timeout-ms from now;
    /// at it, the task is cancelled).
    #[command(
        override_usage = "mcp task wait [OPTIONS] [ENDPOINT] <TASK_ID>",
        after_help = TASK_EXAMPLES
    )]
    Wait {
        #[command(flatten)]
        task: TaskArgs,
        /// The tool whose call the task is (its name on the timeline).
        #[arg(long, value_name = "NAME")]
        tool: Option<String>,
        /// Also print `result`, the whole CallToolResult, redacted (JSON output).
        #[arg(long)]
        raw: bool,
    },
    /// Cancel the task (tasks/cancel) and print the server's answer as JSON.
    #[command(
        override_usage = "mcp task cancel [OPTIONS] [ENDPOINT] <TASK_ID>",
        after_help = TASK_EXAMPLES
    )]
    Cancel(TaskArgs),
}

/// The arguments of `mcp task …`.
#[derive(Args, Debug)]
struct TaskArgs {
    /// ENDPOINT, or TASK_ID when the server comes from --manifest, --config or MCP_ENDPOINT.
    #[arg(value_name = "ENDPOINT", allow_hyphen_values = true)]
    first: String,
    /// TASK_ID: the id `mcp call --detach` printed (one that starts with `-` is fine).
    #[arg(value_name = "TASK_ID", allow_hyphen_values = true)]
    second: Option<String>,
    #[command(flatten)]
    common: Common,
}

/// `mcp call --detach`: the task's id (JSON: `taskId`, `tool`, `endpoint`; text: the id) when
/// the call became a task, else the result as `mcp call` prints it.
async fn detached(
    run: &Run,
    tool: &str,
    args: &Value,
    format: Format,
    raw: bool,
) -> Result<ExitCode, Fail> {
    if let Some(code) = refuse_session_task(run, tool).await? {
        return Ok(code);
    }
    let started = with_elapsed(tool, None, run.slot.start_task(tool, args)).await;
    let task = match started {
        TaskStart::Task(t) => t,
        TaskStart::Done(mut r) => {
            run.reword(tool, &mut r);
            print_result(run, tool, &r, format, raw);
            return Ok(finish(run, if r.ok() { 0 } else { 1 }).await);
        }
    };
    let endpoint = match task.on_fallback() {
        true => run.slot.fallback().unwrap_or_default(),
        false => run.slot.endpoint(),
    };
    match format {
        Format::Json => run.p.json(&json!({
            "taskId": task.id(),
            "tool": tool,
            "endpoint": endpoint,
        })),
        Format::Text => run.p.text(task.id()),
    }
    if std::io::stderr().is_terminal() {
        run.p.err(&format!(
            "mcp: {tool} runs on as task {}; follow it with: mcp task wait {endpoint} {} --tool {tool}",
            task.id(),
            task.id()
        ));
    }
    Ok(finish(run, 0).await)
}

/// Before a `--detach` call: a tool that would run as a task of a 2025-11-25 session (its
/// `execution.taskSupport` is `required`) is refused before the call is sent, since the
/// session, and the task with it, ends when this command exits. Lists the tools (which also
/// opens the session); a list that fails ends the command as `tools` does (`Some(exit 1)`).
async fn refuse_session_task(run: &Run, tool: &str) -> Result<Option<ExitCode>, Fail> {
    let tools = match run.slot.list_tools_described().await {
        Ok(t) => t,
        Err(e) => {
            run.p.err(&format!("mcp: {e}"));
            run.hint(&e.message);
            return Ok(Some(finish(run, 1).await));
        }
    };
    let required = tools
        .iter()
        .any(|t| t["name"] == tool && t["execution"]["taskSupport"] == "required");
    if !required
        || !run.ctx.options().tasks
        || run.slot.protocol_version() != Some(ProtocolVersion::V2025_11_25)
    {
        return Ok(None);
    }
    run.ctx.close().await;
    Err(UsageError(format!(
        "--detach: {tool} runs only as a task, and on this 2025-11-25 server a task belongs to \
         the session, which ends when this command exits: the task would die with it, and its \
         id could not be followed. `mcp task` needs a 2026-07-28 server; here, call without \
         --detach (mcp waits for the task), or use the library's task handle \
         (SlotHandle::start_task) within one run"
    ))
    .into())
}

/// `mcp task get|wait|cancel`.
async fn task(cmd: TaskCmd) -> Result<ExitCode, Fail> {
    let (a, wait, cancel, raw) = match cmd {
        TaskCmd::Get(a) => (a, None, false, false),
        TaskCmd::Cancel(a) => (a, None, true, false),
        TaskCmd::Wait { task, tool, raw } => (task, Some(tool), false, raw),
    };
    let mut pos: Vec<String> = std::iter::once(a.first).chain(a.second).collect();
    let run = build(&a.common, &mut pos, &run_id(), raw)?;
    let id = match pos.as_slice() {
        [id] if !id.trim().is_empty() => id.clone(),
        [] | [_] => return Err(UsageError("missing TASK_ID".into()).into()),
        [_, x, ..] => return Err(UsageError(format!("unexpected argument {x:?}")).into()),
    };
    // A detached task is the user's: a signal ends the wait, never the task.
    let mut handle = run.slot.task(&id).leave_running();
    let Some(tool) = wait else {
        let answer = match cancel {
            true => handle.cancel().await,
            false => handle.status().await,
        };
        return Ok(match answer {
            Ok(v) => {
                match format_of(&a.common) {
                    Format::Json => run.p.json(&v),
                    Format::Text => {
                        let s = |k: &str| v[k].as_str().unwrap_or("").to_owned();
                        let mut line = format!("{} {}", s("taskId"), s("status"));
                        if !s("statusMessage").is_empty() {
                            line.push_str(&format!(": {}", s("statusMessage")));
                        }
                        run.p.text(line.trim());
                    }
                }
                finish(&run, 0).await
            }
            Err(e) => {
                run.p.err(&format!("mcp: {}", run.words(&e.message)));
                run.hint(&e.message);
                finish(&run, 1).await
            }
        });
    };
    if let Some(tool) = &tool {
        handle = handle.tool(tool);
    }
    let status = Mutex::new(CallStatus::default());
    let label = format!("task {id}");
    let busy = format!("the wait for task {id} (the task runs on)");
    let mut r = with_elapsed_marked(
        &label,
        &busy,
        Some(&status),
        handle.wait_with_progress(status_observer(&status)),
    )
    .await;
    run.reword(handle.tool_name(), &mut r);
    print_result(&run, handle.tool_name(), &r, format_of(&a.common), raw);
    Ok(finish(&run, if r.ok() { 0 } else { 1 }).await)
}

/// The arguments of the protocol subcommands (see `protocol_cmds`).
#[derive(Args, Debug)]
struct ProtoArgs {
    /// ENDPOINT and the command's own arguments (ENDPOINT omitted with --config, --stdio,
    /// --manifest or MCP_ENDPOINT).
    #[arg(value_name = "ENDPOINT ARGS")]
    pos: Vec<String>,
    #[command(flatten)]
    common: Common,
}

/// Runs one protocol subcommand.
async fn proto(cmd: ProtoCmd, mut a: ProtoArgs) -> Result<ExitCode, Fail> {
    let run = build(&a.common, &mut a.pos, &run_id(), false)?;
    let format = format_of(&a.common);
    let out = |v: &Value| match format {
        Format::Json => run.p.json(v),
        Format::Text => run.p.text(&protocol_cmds::text_of(cmd, v)),
    };
    let code = protocol_cmds::run(
        cmd,
        &run.slot,
        &a.pos,
        &out,
        &|l| match l.strip_prefix("mcp: ") {
            Some(rest) => run.p.err(&format!("mcp: {}", run.words(rest))),
            None => run.p.err(l),
        },
    )
    .await?;
    Ok(finish(&run, code).await)
}

/// What a command ended with.
enum Fail {
    Usage(UsageError),
}

impl From<UsageError> for Fail {
    fn from(e: UsageError) -> Self {
        Fail::Usage(e)
    }
}

/// Where and how results are printed.
#[derive(Clone)]
struct Printer {
    secrets: Arc<Vec<Vec<u8>>>,
    pretty: bool,
    color: bool,
}

impl Printer {
    fn new(secrets: Vec<Vec<u8>>) -> Self {
        let tty = std::io::stdout().is_terminal();
        Printer {
            secrets: Arc::new(secrets),
            pretty: tty,
            color: tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    /// A JSON result on stdout (one line off a terminal).
    fn json(&self, v: &Value) {
        self.text(&render_json(v, self.pretty, self.color));
    }

    /// A line of text on stdout, scrubbed.
    fn text(&self, line: &str) {
        out::stdout_line(&scrub(line, &self.secrets));
    }

    /// A diagnostic line on stderr, scrubbed.
    fn err(&self, line: &str) {
        out::stderr_line(&scrub(line, &self.secrets));
    }
}

/// A built run: the context, its one slot, the printer, and the URL tried first.
struct Run {
    ctx: HarnessContext,
    slot: SlotHandle,
    p: Printer,
    url: String,
    /// `-v`: the era verdict (`mcp.era`) is printed with the other events.
    verbose: bool,
    /// What a failure's words need (the handshake's state is read when they are made).
    setting: human::Setting,
    /// The words of each tool's last failure: the reason on its `mcp.no_healthy_tool` line.
    failures: Mutex<HashMap<String, String>>,
    /// The timeline is printed counted by kind, tool and reason (bench), not a line each.
    counted_events: bool,
}

impl Run {
    /// The words settings, with the handshake's state now.
    fn setting(&self) -> human::Setting {
        human::Setting {
            handshake_done: self.slot.protocol_version().is_some(),
            ..self.setting.clone()
        }
    }

    /// `r`'s error told in the command line's words (see `human::failure`), remembered as
    /// `tool`'s last failure.
    fn reword(&self, tool: &str, r: &mut ToolResult) {
        let kind = r.kind();
        r.reword(|e| {
            let w = human::failure(e, &kind, &self.setting());
            if let Ok(mut f) = self.failures.lock() {
                f.insert(tool.to_owned(), w.clone());
            }
            w
        });
    }

    /// A failure known only by its text (a request's, a timeline event's) in the command
    /// line's words.
    fn words(&self, error: &str) -> String {
        human::failure_text(error, &self.setting())
    }

    /// A method's failure of a known kind (a list's) in the command line's words.
    fn words_of(&self, error: &str, kind: &Kind) -> String {
        human::method_failure(error, kind, &self.setting())
    }

    /// One timeline event for a person: as `event_line`, with a failure's words, and the
    /// reason on an `mcp.no_healthy_tool` line instead of a claim that no server could serve
    /// the tool.
    fn event_text(&self, e: &verifi_mcp_host::TimelineEntry) -> String {
        let v = e.value();
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        match e.kind.as_str() {
            "tool_error" => format!(
                "{:<20} {}/{}  {}",
                e.kind,
                s("slot"),
                s("tool"),
                self.words(&s("error"))
            ),
            "mcp.no_healthy_tool" => {
                let why = self
                    .failures
                    .lock()
                    .ok()
                    .and_then(|f| f.get(&s("tool")).cloned())
                    .unwrap_or_else(|| "the call failed".to_owned());
                let tried = if self.slot.fallback().is_some() {
                    "the primary and the fallback"
                } else {
                    "the server (no --fallback)"
                };
                format!(
                    "{:<20} {}/{}  {tried} could not serve it: {why}",
                    e.kind,
                    s("slot"),
                    s("tool")
                )
            }
            "mcp.tool_changed" => {
                let fields: Vec<&str> = v["fields"]
                    .as_array()
                    .map(|f| f.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let what = match s("server").as_str() {
                    "lock" => "differs from the tools lock".to_owned(),
                    server => format!("changed on the {server} since it was first listed"),
                };
                format!(
                    "{:<20} {}/{}  its {} {what}",
                    e.kind,
                    s("slot"),
                    s("tool"),
                    fields.join(", ")
                )
            }
            _ => event_line(e),
        }
    }

    /// The timeline on stderr: one line per event, or (bench) one per kind, tool and reason
    /// with its count. Which era a server speaks is printed only with `-v`: it is how the
    /// call went, not something that went wrong.
    fn timeline_to_stderr(&self) {
        let mut counted: Vec<(String, u64)> = Vec::new();
        for e in self.ctx.timeline() {
            if e.kind == "mcp.era" && !self.verbose {
                continue;
            }
            let line = self.event_text(&e);
            if !self.counted_events {
                self.p.err(&format!("event: {line}"));
                continue;
            }
            let full = counted.len() >= MAX_ERROR_KINDS;
            let key = match counted.iter().any(|(l, _)| *l == line) {
                false if full => "other events".to_owned(),
                _ => line,
            };
            match counted.iter_mut().find(|(l, _)| *l == key) {
                Some((_, n)) => *n += 1,
                None => counted.push((key, 1)),
            }
        }
        for (line, n) in counted {
            match n {
                1 => self.p.err(&format!("event: {line}")),
                n => self.p.err(&format!("event: {line}  (x{n})")),
            }
        }
    }

    /// After a failure: a 404 names the URL tried and the flag that takes a URL as given.
    fn hint(&self, error: &str) {
        if error.contains("HTTP 404 Not Found") && !error.contains("no longer knows this session") {
            self.p.err(&format!(
                "mcp: HTTP 404 from {}: no MCP endpoint there. If the server's MCP URL has \
                 another path, give the whole URL with --exact-url",
                self.url
            ));
        }
    }
}

/// Where the server comes from.
enum Source {
    Url(String),
    Stdio(String),
    Manifest {
        file: String,
        slot: String,
    },
    Config {
        file: String,
        server: Option<String>,
    },
}

/// Takes the server's source from the first positional (a URL), the flags, or
/// `MCP_ENDPOINT`, removing the URL from `pos`.
fn source(common: &Common, pos: &mut Vec<String>) -> Result<Source, UsageError> {
    // Only an http(s) URL is an ENDPOINT: `mcp read --manifest F --slot S test://notes/x`
    // reads a resource whose URI has another scheme.
    let first_is_url = pos
        .first()
        .is_some_and(|p| p.starts_with("http://") || p.starts_with("https://"));
    let flagged = match (
        &common.manifest,
        &common.slot,
        &common.config,
        &common.server,
    ) {
        (Some(file), Some(slot), _, _) => Some(Source::Manifest {
            file: file.clone(),
            slot: slot.clone(),
        }),
        (_, _, Some(file), server) => Some(Source::Config {
            file: file.clone(),
            server: server.clone(),
        }),
        _ => common.stdio.clone().map(Source::Stdio),
    };
    match (first_is_url, flagged) {
        (true, Some(_)) => Err(UsageError(format!(
            "both ENDPOINT {:?} and --manifest/--config/--stdio were given; use one",
            pos[0]
        ))),
        (true, None) => Ok(Source::Url(pos.remove(0))),
        (false, Some(s)) => Ok(s),
        (false, None) => match std::env::var(ENDPOINT_VAR) {
            Ok(url) if !url.trim().is_empty() => Ok(Source::Url(url.trim().to_owned())),
            _ => Err(UsageError(match pos.first() {
                Some(p) if !p.starts_with('{') && !p.contains('=') => format!(
                    "missing ENDPOINT: {p:?} is not a URL (http://host:port); give a URL, \
                     --config FILE [--server NAME], --stdio 'CMD ARGS…', --manifest FILE \
                     --slot NAME, or set {ENDPOINT_VAR}"
                ),
                _ => format!(
                    "missing ENDPOINT: give a URL, --config FILE [--server NAME], --stdio 'CMD \
                     ARGS…', --manifest FILE --slot NAME, or set {ENDPOINT_VAR}"
                ),
            })),
        },
    }
}

/// Builds the context and the slot from the source, the flags and the environment.
fn build(
    common: &Common,
    pos: &mut Vec<String>,
    run_id: &str,
    keep_raw: bool,
) -> Result<Run, Fail> {
    build_with(common, pos, run_id, keep_raw, false)
}

/// [`build`]; `login`: OAuth on even without OAuth flags (`mcp auth login`).
fn build_with(
    common: &Common,
    pos: &mut Vec<String>,
    run_id: &str,
    keep_raw: bool,
    login: bool,
) -> Result<Run, Fail> {
    let mut headers = common
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>, _>>()?;
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let Some(token) = common.bearer.clone().or_else(|| env("MCP_BEARER_TOKEN")) {
        headers.push(("authorization".into(), format!("Bearer {token}")));
    }
    let store_choice = auth_cmd::choose(common.token_store.as_deref());
    let token_store = auth_cmd::store(&store_choice);
    let stdio_env =
        child_env::child_env(&common.env, &common.env_pass, &|k| std::env::var(k).ok())?;
    // The MCP URL a stored login would be for (an HTTP server's).
    let mut login_url = None;
    let mut era = match common.era.as_str() {
        "modern" => EraSetting::Modern,
        "legacy" => EraSetting::Legacy,
        _ => EraSetting::Auto,
    };
    let protocol_version = match &common.protocol_version {
        None => ProtocolVersion::DEFAULT,
        Some(v) if v == ProtocolVersion::V2026_07_28.as_str() => {
            if era == EraSetting::Legacy {
                return Err(UsageError(
                    "--protocol-version 2026-07-28 is the 2026 era; it cannot go with --era legacy"
                        .into(),
                )
                .into());
            }
            era = EraSetting::Modern;
            ProtocolVersion::DEFAULT
        }
        Some(v) => ProtocolVersion::parse(v.as_bytes()).ok_or_else(|| {
            let known: Vec<&str> = ProtocolVersion::ALL
                .iter()
                .chain([ProtocolVersion::V2026_07_28].iter())
                .map(|p| p.as_str())
                .collect();
            UsageError(format!(
                "--protocol-version {v:?} is not one of {}",
                known.join(", ")
            ))
        })?,
    };
    if common.timeout_ms == Some(0) {
        return Err(UsageError("--timeout-ms must be at least 1".into()).into());
    }
    if common.max_reply_bytes < 1024 {
        return Err(UsageError("--max-reply-bytes must be at least 1024".into()).into());
    }
    if common.max_request_bytes < 1024 {
        return Err(UsageError("--max-request-bytes must be at least 1024".into()).into());
    }
    let src = source(common, pos)?;
    // A config file's url is the full MCP URL, as the clients that share the format use it.
    let exact = common.exact_url || matches!(src, Source::Config { .. });
    let fallback = match &common.fallback {
        Some(f) => Some(endpoint_base(f, exact)?),
        None => None,
    };
    let (manifest, slot_name) = match src {
        Source::Manifest { file, slot } => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| UsageError(format!("cannot read manifest {file}: {e}")))?;
            let mut m: Value = serde_json::from_str(&text)
                .map_err(|e| UsageError(format!("manifest {file} is not JSON: {e}")))?;
            amend_manifest(&mut m, &slot, fallback.as_deref(), &headers);
            (m, slot)
        }
        Source::Config { file, server } => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| UsageError(format!("cannot read config {file}: {e}")))?;
            let server = match server {
                Some(s) => s,
                None => only_config_server(&text, &file)?,
            };
            let s = config_server(&text, &file, &server)?;
            if let Some(Value::Object(mut fill)) = s.stdio {
                // A local server (`command`): run it and speak to it over stdio.
                child_env::add_to_fill(&mut fill, &stdio_env);
                if let Some(f) = &fallback {
                    fill.insert("fallback".into(), json!(f));
                }
                (
                    json!({ "slotFills": { server.as_str(): Value::Object(fill) } }),
                    server,
                )
            } else {
                let url = endpoint_base(&s.url, true)?;
                login_url = mcp_url(&url, true).ok();
                // The file's headers first; a --header of the same name wins.
                let mut all = s.headers;
                for (k, v) in headers.drain(..) {
                    all.retain(|(n, _)| !n.eq_ignore_ascii_case(&k));
                    all.push((k, v));
                }
                headers = all;
                (
                    one_slot_manifest(&server, &url, fallback.as_deref(), &headers),
                    server,
                )
            }
        }
        Source::Stdio(line) => {
            let spec = verifi_mcp_host::stdio::StdioSpec::parse_command_line(&line)
                .map_err(|e| UsageError(format!("--stdio: {e}")))?;
            let mut fill = serde_json::Map::new();
            fill.insert("command".into(), json!(spec.argv));
            child_env::add_to_fill(&mut fill, &stdio_env);
            if let Some(f) = &fallback {
                fill.insert("fallback".into(), json!(f));
            }
            (
                json!({ "slotFills": { CLI_SLOT: Value::Object(fill) } }),
                CLI_SLOT.to_owned(),
            )
        }
        Source::Url(ep) => {
            let base = endpoint_base(&ep, exact)?;
            login_url = mcp_url(&base, exact).ok();
            (
                one_slot_manifest(CLI_SLOT, &base, fallback.as_deref(), &headers),
                CLI_SLOT.to_owned(),
            )
        }
    };
    if login_url.is_some() && !stdio_env.is_empty() {
        return Err(UsageError(
            "--env and --env-pass are for a --stdio server (or a config file's command)".into(),
        )
        .into());
    }
    // A stored login for this server turns OAuth on (unless a bearer token is given).
    let has_login = !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        && login_url
            .as_deref()
            .zip(token_store.as_deref())
            .is_some_and(|(u, s)| !auth_cmd::logins_for(s, u).is_empty());
    let store: Option<Arc<dyn TokenStore>> = token_store.map(|s| s as Arc<dyn TokenStore>);
    let auth = auth_config(common, &env, login || has_login, store)?;
    let mut root_certs = Vec::new();
    for file in &common.cacert {
        root_certs.push(RootCert::pem_file(file).map_err(|e| UsageError(e.to_string()))?);
    }
    // Proxy credentials (from --proxy or the environment) are secrets of every output.
    let mut proxy_secrets = Vec::new();
    if let Some(p) = &common.proxy {
        let rule = ProxyRule::explicit(p).map_err(|e| UsageError(format!("--proxy: {}", e.0)))?;
        proxy_secrets.extend(rule.secrets());
    }
    let env_vars = std::env::vars_os().map(|(k, v)| {
        (
            k.to_string_lossy().into_owned(),
            v.to_string_lossy().into_owned(),
        )
    });
    if let Ok(env) = EnvProxies::from_vars(env_vars) {
        proxy_secrets.extend(ProxyRule::Env(Arc::new(env)).secrets());
    }
    let auth_secrets = auth.as_ref().map(|a| a.secrets()).unwrap_or_default();
    let bearer_token = headers
        .iter()
        .filter_map(|(_, v)| v.strip_prefix("Bearer ").map(str::to_owned))
        .collect::<Vec<_>>();
    let secrets = run_secrets(
        headers
            .iter()
            .map(|(_, v)| v.clone())
            .chain(proxy_secrets)
            .chain(auth_secrets)
            .chain(bearer_token)
            .chain(url_secrets_in(&manifest)),
    );
    if common.insecure {
        out::stderr_line(INSECURE_WARNING);
    }
    let p = Printer::new(secrets.clone());
    let mut options = Options::default()
        .reply_cap(common.max_reply_bytes)
        .request_cap(common.max_request_bytes)
        .protocol_version(protocol_version)
        .era(era)
        .tasks(common.tasks == "on")
        .elicitation(match common.elicitation.as_deref() {
            Some("accept-defaults") => Some(Elicitation::AcceptDefaults),
            Some("decline") => Some(Elicitation::Decline),
            Some("cancel") => Some(Elicitation::Cancel),
            _ => None,
        })
        .exact_mcp_urls(exact)
        .root_certs(root_certs)
        .insecure(common.insecure)
        .proxy(common.proxy.clone())
        .auth(auth)
        .keep_raw(keep_raw);
    match common.on_tool_change.as_deref() {
        Some("refuse") => {
            options = options
                .on_tool_change(OnToolChange::Refuse)
                .on_lock_mismatch(OnToolChange::Refuse);
        }
        Some(_) => {
            options = options
                .on_tool_change(OnToolChange::Warn)
                .on_lock_mismatch(OnToolChange::Warn);
        }
        None => {}
    }
    if let Some(file) = &common.tools_lock {
        let lock = ToolsLock::read(file).map_err(UsageError)?;
        options = options.tools_lock(Some(lock));
    }
    if let Some(ms) = common.timeout_ms {
        options = options.timeout_ms(ms);
    }
    match common.idle_timeout_ms {
        Some(0) => options = options.idle_timeout_ms(None),
        Some(ms) => options = options.idle_timeout_ms(Some(ms)),
        None => {}
    }
    if common.verbose {
        options = options.wire_trace(Some(wire_trace(secrets.clone())));
    }
    // The server's log messages, as they come, on stderr (redacted by the run, scrubbed of
    // this run's values too).
    let log_secrets = secrets.clone();
    options = options
        .server_log_level(LogLevel::parse(&common.server_log_level).unwrap_or_default())
        .on_server_log(Some(ServerLogObserver::new(move |line| {
            out::stderr_line(&scrub(line, &log_secrets))
        })));
    // W3C trace context from the environment, the OpenTelemetry convention for processes.
    options = options
        .trace_parent(std::env::var("TRACEPARENT").ok())
        .trace_state(std::env::var("TRACESTATE").ok());
    let ctx = HarnessContext::from_manifest_value(manifest, run_id, options)
        .map_err(|e| UsageError(scrub(&e.to_string(), &secrets)))?;
    // A TRACEPARENT / TRACESTATE that is not well formed is said (a new trace is used).
    for line in ctx.log_lines() {
        if line.starts_with("the given trace") {
            out::stderr_line(&format!("warning: {line}"));
        }
    }
    let slot = ctx
        .mcp(&slot_name)
        .map_err(|e| UsageError(scrub(&e.to_string(), &secrets)))?;
    signals::watch(&ctx, &slot);
    let url = mcp_url(slot.endpoint(), exact).unwrap_or_else(|_| slot.endpoint().to_owned());
    let authority = |u: &str| {
        let rest = u.split_once("://").map_or(u, |(_, r)| r);
        rest[..rest.find(['/', '?']).unwrap_or(rest.len())].to_owned()
    };
    let last = slot.fallback().unwrap_or(&url).to_owned();
    let setting = human::Setting {
        timeout_ms: ctx.options().timeout_ms,
        last_server: authority(&last),
        era: common.era.clone(),
        handshake_done: false,
    };
    Ok(Run {
        ctx,
        slot,
        p,
        url,
        verbose: common.verbose,
        setting,
        failures: Mutex::new(HashMap::new()),
        counted_events: false,
    })
}

/// `-v`: every connection, request and reply line on stderr as `* #N`, `> #N`, `< #N` (and a
/// stdio server's skipped stdout line as `! stdio: …`), with sensitive header values and the
/// run's secrets redacted. Reply bytes are cut into whole lines (per connection) before they
/// are scrubbed, so a secret split across reads is still caught.
fn wire_trace(secrets: Vec<Vec<u8>>) -> WireTrace {
    let pending: Mutex<HashMap<u64, Vec<u8>>> = Mutex::new(HashMap::new());
    // A stdio server's messages each come as a connection of their own; the trace shows its
    // child as one connection, "connected" once: label -> its first number, and each later
    // number -> that one.
    let children: Mutex<HashMap<String, u64>> = Mutex::new(HashMap::new());
    let alias: Arc<Mutex<HashMap<u64, u64>>> = Arc::new(Mutex::new(HashMap::new()));
    let aliases = alias.clone();
    let shown = move |conn: u64| {
        let alias = &aliases;
        alias
            .lock()
            .ok()
            .and_then(|a| a.get(&conn).copied())
            .unwrap_or(conn)
    };
    WireTrace::new(move |e| {
        let mut out = String::new();
        match e {
            WireEvent::Connected {
                conn,
                host,
                port: 0,
                ..
            } => {
                let mut c = children.lock().unwrap_or_else(|e| e.into_inner());
                match c.get(*host) {
                    Some(first) => {
                        if let Ok(mut a) = alias.lock() {
                            a.insert(*conn, *first);
                        }
                    }
                    None => {
                        c.insert((*host).to_owned(), *conn);
                        // A stdio server: its label, `stdio:<command line>`.
                        out.push_str(&format!("* #{conn} connected to {host}\n"));
                    }
                }
            }
            WireEvent::Connected {
                conn,
                host,
                port,
                tls,
            } => {
                let t = if *tls { " (TLS)" } else { "" };
                out.push_str(&format!("* #{conn} connected to {host}:{port}{t}\n"));
            }
            WireEvent::Sent { conn, bytes } => {
                let conn = &shown(*conn);
                let text = String::from_utf8_lossy(bytes);
                let (head, body) = match text.split_once("\r\n\r\n") {
                    Some((h, b)) if h.contains(" HTTP/1.1") => (h, b),
                    _ => ("", &*text),
                };
                for l in head.lines() {
                    out.push_str(&format!("> #{conn} {}\n", trace_line(l)));
                }
                // A stdio request is one line that ends in its newline.
                let body = body.trim_end_matches(['\r', '\n']);
                if !body.is_empty() {
                    out.push_str(&format!("> #{conn} {}\n", trace_line(body)));
                }
            }
            WireEvent::Received { conn, bytes } => {
                let mut map = pending.lock().unwrap_or_else(|e| e.into_inner());
                let buf = map.entry(*conn).or_default();
                let conn = &shown(*conn);
                buf.extend_from_slice(bytes);
                while let Some(i) = buf.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=i).collect();
                    let l = String::from_utf8_lossy(&line);
                    let l = l.trim_end_matches(['\r', '\n']);
                    // Blank lines and chunked-encoding size lines are framing, not content.
                    let framing =
                        l.is_empty() || (l.len() <= 8 && l.bytes().all(|b| b.is_ascii_hexdigit()));
                    if !framing {
                        out.push_str(&format!("< #{conn} {}\n", trace_line(l)));
                    }
                }
                // A line longer than the cap is shown cut, and the rest of it dropped.
                if buf.len() > 64 * 1024 {
                    let l = String::from_utf8_lossy(buf);
                    out.push_str(&format!("< #{conn} {}\n", trace_line(&l)));
                    buf.clear();
                }
            }
            WireEvent::Skipped { bytes } => {
                let l = String::from_utf8_lossy(bytes);
                out.push_str(&format!(
                    "! stdio: skipped a line that is not JSON-RPC: {}\n",
                    trace_line(&l)
                ));
            }
            _ => {}
        }
        if !out.is_empty() {
            out::stderr(&scrub(&out, &secrets));
        }
    })
}

/// One trace line: sensitive header values replaced, long lines cut.
fn trace_line(l: &str) -> String {
    if let Some((name, _)) = l.split_once(':') {
        let n = name.trim().to_ascii_lowercase();
        if matches!(
            n.as_str(),
            "authorization" | "proxy-authorization" | "cookie" | "set-cookie" | "x-api-key"
        ) {
            return format!("{name}: [REDACTED]");
        }
    }
    if l.len() > TRACE_LINE {
        let mut end = TRACE_LINE;
        while !l.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}… ({} more bytes)", &l[..end], l.len() - end)
    } else {
        l.to_owned()
    }
}

/// The OAuth settings of the flags and their environment spellings, if any is given.
fn auth_config(
    common: &Common,
    env: &dyn Fn(&str) -> Option<String>,
    force: bool,
    store: Option<Arc<dyn TokenStore>>,
) -> Result<Option<AuthConfig>, UsageError> {
    let flow = match common.auth_flow.as_deref() {
        None => AuthFlow::Auto,
        Some(f) => AuthFlow::parse(f).ok_or_else(|| {
            UsageError(format!(
                "--auth-flow {f:?} is not auto, client-credentials or authorization-code"
            ))
        })?,
    };
    let client_private_key = match &common.client_private_key {
        Some(f) => Some(
            std::fs::read(f)
                .map_err(|e| UsageError(format!("cannot read --client-private-key {f}: {e}")))?,
        ),
        None => None,
    };
    let has_credential = common.client_secret.is_some()
        || env("MCP_CLIENT_SECRET").is_some()
        || client_private_key.is_some();
    // The authorization code's step: the flow first GETs the URL itself (an auto-approving
    // server redirects at once); else a person opens it and the browser comes back here.
    let authorize: Option<Arc<dyn AuthorizeHook>> = match flow {
        AuthFlow::ClientCredentials => None,
        AuthFlow::Auto if has_credential => None,
        _ => Some(Arc::new(
            LoopbackHook::bind(|url| {
                out::stderr_line(&format!(
                    "Open this URL to authorize (waiting for the redirect):\n  {url}"
                ))
            })
            .map_err(|e| UsageError(format!("cannot listen for the OAuth redirect: {e}")))?,
        )),
    };
    let cfg = AuthConfig {
        flow,
        authorize,
        client_id: common.client_id.clone().or_else(|| env("MCP_CLIENT_ID")),
        client_secret: common
            .client_secret
            .clone()
            .or_else(|| env("MCP_CLIENT_SECRET")),
        client_private_key,
        client_metadata_url: common.client_metadata_url.clone(),
        scope: common.scope.clone(),
        store,
    };
    let wanted = force
        || cfg.client_id.is_some()
        || cfg.client_secret.is_some()
        || cfg.client_private_key.is_some()
        || cfg.client_metadata_url.is_some()
        || common.auth_flow.is_some();
    Ok(wanted.then_some(cfg))
}

fn run_id() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("mcp-cli-{}-{t}", std::process::id())
}

/// Runs `fut`; on a terminal, shows a live status line on stderr while it runs (from its
/// first second): the label, the elapsed time and `status` (the latest progress, with a bar
/// when it has a total, and the latest status message). The line is cleared before `fut`'s
/// output is returned, so nothing of it is left above the result. Off a terminal: nothing.
async fn with_elapsed<T>(
    label: &str,
    status: Option<&Mutex<CallStatus>>,
    fut: impl std::future::Future<Output = T>,
) -> T {
    with_elapsed_marked(label, label, status, fut).await
}

/// [`with_elapsed`], saying `busy` (instead of the label) of what a signal ends.
async fn with_elapsed_marked<T>(
    label: &str,
    busy: &str,
    status: Option<&Mutex<CallStatus>>,
    fut: impl std::future::Future<Output = T>,
) -> T {
    let _busy = signals::in_flight(busy);
    if !std::io::stderr().is_terminal() {
        return fut.await;
    }
    let start = Instant::now();
    let shown = std::sync::atomic::AtomicBool::new(false);
    let ticker = async {
        loop {
            smol::Timer::after(Duration::from_millis(250)).await;
            let s = start.elapsed().as_secs();
            if s >= 1 {
                shown.store(true, Ordering::Relaxed);
                let line = status
                    .and_then(|m| m.lock().ok().map(|st| st.line(label, s)))
                    .unwrap_or_else(|| CallStatus::default().line(label, s));
                out::stderr(&format!("\r\x1b[K{line}"));
            }
        }
    };
    let out = futures_lite::future::or(fut, async {
        ticker.await;
        futures_lite::future::pending().await
    })
    .await;
    if shown.load(Ordering::Relaxed) {
        out::stderr("\r\x1b[K");
    }
    out
}

/// A progress observer that keeps the latest progress and message in `status`.
fn status_observer(status: &Mutex<CallStatus>) -> impl Fn(&ProgressUpdate<'_>) + Sync + '_ {
    move |u: &ProgressUpdate<'_>| {
        if let Ok(mut st) = status.lock() {
            st.update(u.progress, u.total, u.message);
        }
    }
}

/// Prints a call's result (or a task's, which is the same) as `format` says. Text: the
/// tool's text on stdout, and on stderr the error (always) or, for a person (stderr a
/// terminal), a one-line status: `mcp: echo: ok in 12 ms`.
fn print_result(run: &Run, tool: &str, r: &ToolResult, format: Format, raw: bool) {
    match format {
        Format::Json if raw => run
            .p
            .json(&protocol_cmds::with_call_result(result_json(r), r)),
        Format::Json => run.p.json(&result_json(r)),
        Format::Text => {
            if !r.text.is_empty() || r.ok() {
                run.p.text(r.text.trim_end_matches('\n'));
            }
            let ms = r.latency_ms;
            match r.error() {
                Some(e) if r.is_error() => run
                    .p
                    .err(&format!("mcp: {tool}: tool error in {ms} ms: {e}")),
                Some(e) => run.p.err(&format!("mcp: {tool}: failed in {ms} ms: {e}")),
                None if std::io::stderr().is_terminal() => {
                    run.p.err(&format!("mcp: {tool}: ok in {ms} ms"))
                }
                None => {}
            }
        }
    }
    if let Some(e) = r.error() {
        run.hint(e);
    }
}

/// clap's error as one line that still names what is wrong (the missing argument, the bad
/// value), and where to look.
fn clap_error_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let mut parts = Vec::new();
    for l in text.lines() {
        let l = l.trim();
        if l.starts_with("Usage:") || l.starts_with("For more information") {
            break;
        }
        if !l.is_empty() && !l.starts_with("tip:") {
            parts.push(l.to_owned());
        }
    }
    let mut line = parts.join(" ");
    if line.is_empty() {
        line = "error: bad arguments".into();
    }
    format!("{line} (see mcp --help)")
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    ExitCode::from(2)
                }
                _ => {
                    out::stderr_line(&clap_error_line(&e));
                    ExitCode::from(2)
                }
            };
        }
    };
    signals::install();
    match smol::block_on(signals::run(dispatch(cli.cmd))) {
        Ok(Ok(code)) => code,
        Ok(Err(Fail::Usage(e))) => {
            out::stderr_line(&format!("mcp: {e}"));
            ExitCode::from(2)
        }
        // Stopped by a signal or a closed stdout, after the wind-down.
        Err(code) => ExitCode::from(code),
    }
}

/// The tool arguments of `call`: the JSON object or pairs after TOOL, and `--args`; with the
/// keys set by `key=value` pairs (the tool's schema may type them).
fn call_args(rest: &[String], args: Option<&str>) -> Result<(Value, Vec<String>), UsageError> {
    let mut value = match args {
        Some(src) => args_from_source(src, std::io::stdin().lock())?,
        None => Value::Object(Map::new()),
    };
    let mut pairs = Vec::new();
    for (i, a) in rest.iter().enumerate() {
        if a.trim_start().starts_with('{') || a.trim_start().starts_with('[') {
            if i != 0 || args.is_some() {
                return Err(UsageError(
                    "give the JSON arguments once, right after TOOL (or with --args)".into(),
                ));
            }
            value = parse_args(Some(a))?;
        } else if a == "-" || a.starts_with('@') {
            if i != 0 || args.is_some() {
                return Err(UsageError(format!(
                    "{a:?}: give the arguments' source once, right after TOOL (or with --args)"
                )));
            }
            value = args_from_source(a, std::io::stdin().lock())?;
        } else {
            pairs.push(a.clone());
        }
    }
    add_pairs(&mut value, &pairs)?;
    Ok((value, string_pair_keys(&pairs)))
}

/// The tools of a server that look like a command runner (their names have command, exec,
/// run, shell or cmd in them), sorted.
fn command_like(names: &[String]) -> Vec<String> {
    let mut v: Vec<String> = names
        .iter()
        .filter(|n| {
            let l = n.to_ascii_lowercase();
            ["command", "exec", "run", "shell", "cmd"]
                .iter()
                .any(|w| l.contains(w))
        })
        .cloned()
        .collect();
    v.sort();
    v
}

/// `tool` is not among `names`: the usage error that says so and lists what there is.
fn not_on_server(tool: &str, names: &[String]) -> UsageError {
    let mut names = names.to_vec();
    names.sort();
    UsageError(format!(
        "tool {tool:?} is not on this server; it has: {}",
        if names.is_empty() {
            "no tools".to_owned()
        } else {
            names.join(", ")
        }
    ))
}

/// The names of a list of described tools.
fn names_of(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// After a call the server refused or answered with a tool error: whether `tool` is missing
/// from the server's list (listed now unless `listed` has it). `None`: the list failed.
async fn missing_tool(run: &Run, tool: &str, listed: Option<&[Value]>) -> Option<Vec<String>> {
    let names = match listed {
        Some(t) => names_of(t),
        None => names_of(&run.slot.list_tools_described().await.ok()?),
    };
    (!names.iter().any(|n| n == tool)).then_some(names)
}

/// Parses `10s`, `500ms`, `2m`, `1.5` (seconds).
fn parse_duration(s: &str) -> Result<Duration, UsageError> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| UsageError(format!("--duration {s:?}: write it as 10s, 500ms or 2m")))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => {
            return Err(UsageError(format!(
                "--duration {s:?}: the unit must be ms, s or m"
            )));
        }
    };
    if !(secs > 0.0 && secs <= MAX_BENCH_SECS) {
        return Err(UsageError(format!(
            "--duration must be more than 0 and at most {MAX_BENCH_SECS} s"
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

async fn dispatch(cmd: Cmd) -> Result<ExitCode, Fail> {
    match cmd {
        Cmd::Completions { shell } => {
            // Rendered whole, then written: a reader that goes away (`| head`) ends it quietly.
            let mut cmd = Cli::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd, "mcp", &mut script);
            out::stdout(&script);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Resources(a) => proto(ProtoCmd::Resources, a).await,
        Cmd::Read(a) => proto(ProtoCmd::Read, a).await,
        Cmd::Prompts(a) => proto(ProtoCmd::Prompts, a).await,
        Cmd::Prompt(a) => proto(ProtoCmd::Prompt, a).await,
        Cmd::Ping(a) => proto(ProtoCmd::Ping, a).await,
        Cmd::Auth(cmd) => auth(cmd).await,
        Cmd::Man => {
            let man = clap_mangen::Man::new(Cli::command());
            let mut page = Vec::new();
            if let Err(e) = man.render(&mut page) {
                out::stderr_line(&format!("mcp: cannot render the man page: {e}"));
                return Ok(ExitCode::from(1));
            }
            out::stdout(&page);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Tools {
            mut pos,
            json,
            lock,
            common,
        } => {
            let run = build(&common, &mut pos, &run_id(), false)?;
            no_extra(&pos)?;
            let listing = match (json, common.format) {
                (true, _) | (false, Some(Format::Json)) => Listing::Json,
                (false, Some(Format::Text)) => Listing::Human,
                (false, None) if std::io::stdout().is_terminal() => Listing::Human,
                (false, None) => Listing::Names,
            };
            let code = tools(&run, listing, lock.as_deref()).await;
            Ok(finish(&run, code).await)
        }
        Cmd::Call {
            mut pos,
            args,
            raw,
            check_output,
            detach,
            pins,
            mut common,
        } => {
            pins.into_common(&mut common);
            let run = build(&common, &mut pos, &run_id(), raw)?;
            let Some((tool, rest)) = pos.split_first() else {
                return Err(UsageError("missing TOOL".into()).into());
            };
            let (mut args, string_keys) = call_args(rest, args.as_deref())?;
            // One list, when the tool's schema types key=value pairs or its outputSchema is
            // to be checked: a tool the server does not have is then bad input before any call.
            let mut listed = None;
            let format = format_of(&common);
            if check_output || !string_keys.is_empty() {
                let t0 = Instant::now();
                match run.slot.list_tools_described().await {
                    Ok(t) => listed = Some(t),
                    Err(e) => {
                        // Printed as the call's result would be: the call was not made,
                        // and the server could not be reached for its tools.
                        let mut r = ToolResult::not_called(&e);
                        r.reword(|m| {
                            let why = m.strip_prefix("tools/list failed: ").unwrap_or(m);
                            run.words_of(why, &e.kind)
                        });
                        r.latency_ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
                        print_result(&run, tool, &r, format, raw);
                        return Ok(finish(&run, 1).await);
                    }
                }
            }
            if let Some(tools) = &listed {
                let Some(t) = tools.iter().find(|t| t["name"] == tool.as_str()) else {
                    run.ctx.close().await;
                    return Err(not_on_server(tool, &names_of(tools)).into());
                };
                if let Err(e) = type_pairs(&mut args, &string_keys, &t["inputSchema"]) {
                    run.ctx.close().await;
                    return Err(e.into());
                }
            }
            if detach {
                return detached(&run, tool, &args, format, raw).await;
            }
            // On a terminal, the status line shows the call's progress notifications and its
            // task's status messages too.
            let status = Mutex::new(CallStatus::default());
            let mut r = with_elapsed(
                tool,
                Some(&status),
                run.slot
                    .call_with_progress(tool, &args, status_observer(&status)),
            )
            .await;
            if matches!(r.kind(), Kind::Refused { .. } | Kind::ToolError)
                && let Some(names) = missing_tool(&run, tool, listed.as_deref()).await
            {
                run.ctx.close().await;
                return Err(not_on_server(tool, &names).into());
            }
            run.reword(tool, &mut r);
            print_result(&run, tool, &r, format, raw);
            Ok(finish(&run, if r.ok() { 0 } else { 1 }).await)
        }
        Cmd::Task(cmd) => task(cmd).await,
        Cmd::Exec {
            mut pos,
            workspace,
            tool,
            pins,
            mut common,
        } => {
            pins.into_common(&mut common);
            // For exec, --timeout-ms is the command's own timeout (sent in whole seconds,
            // clamped to 1..=285 s); the call keeps the
            // default 300 s call timeout as its ceiling above it.
            let cmd_timeout_ms = common.timeout_ms.take();
            let id = match &workspace {
                Some(w) if w.is_empty() => {
                    return Err(UsageError("--workspace must not be empty".into()).into());
                }
                Some(w) => w.clone(),
                None => run_id(),
            };
            let run = build(&common, &mut pos, &id, false)?;
            let command = match pos.as_slice() {
                [c] => c.clone(),
                [] => return Err(UsageError("missing COMMAND".into()).into()),
                _ => {
                    return Err(UsageError(
                        "too many arguments: [ENDPOINT] COMMAND (quote the command)".into(),
                    )
                    .into());
                }
            };
            let exec = Exec::new(&run.ctx, run.slot.slot())
                .map_err(|e| UsageError(e.to_string()))?
                .tool(&tool);
            let mut r = with_elapsed(
                &tool,
                None,
                exec.exec(&command, cmd_timeout_ms.unwrap_or(285_000)),
            )
            .await;
            // A box without the tool: bad input, said on stderr (stdout is the command's
            // output), naming the tools that look like a command runner.
            if r.exit_code.is_none()
                && matches!(r.call.kind(), Kind::Refused { .. } | Kind::ToolError)
                && let Some(names) = missing_tool(&run, &tool, None).await
            {
                run.ctx.close().await;
                let like = command_like(&names);
                return Err(UsageError(format!(
                    "this server has no tool {tool:?}; {}",
                    if like.is_empty() {
                        format!(
                            "none of its tools looks like a command runner (it has: {})",
                            if names.is_empty() {
                                "no tools".to_owned()
                            } else {
                                names.join(", ")
                            }
                        )
                    } else {
                        format!(
                            "its tools that look like a command runner: {} (pick one with \
                             --tool NAME)",
                            like.join(", ")
                        )
                    }
                ))
                .into());
            }
            run.reword(&tool, &mut r.call);
            if common.format == Some(Format::Json) {
                run.p.json(&json!({
                    "ok": r.ok,
                    "exitCode": r.exit_code,
                    "output": r.output,
                    "latencyMs": r.call.latency_ms,
                    "error": r.call.error(),
                }));
            } else {
                let mut text = scrub(&r.output, &run.p.secrets);
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                out::stdout(text.as_bytes());
            }
            let code = match r.exit_code {
                Some(c) => u8::try_from(c).unwrap_or(1),
                None => {
                    if !r.call.ok() {
                        let e = r.call.error().unwrap_or("no exit line in the reply");
                        run.p.err(&format!("mcp: {tool} failed: {e}"));
                        run.hint(e);
                    }
                    if r.ok { 0 } else { 1 }
                }
            };
            Ok(finish(&run, code).await)
        }
        Cmd::Batch {
            mut pos,
            concurrency,
            pins,
            mut common,
        } => {
            pins.into_common(&mut common);
            let run = build(&common, &mut pos, &run_id(), false)?;
            no_extra(&pos)?;
            if concurrency == 0 || concurrency > MAX_CONC {
                return Err(UsageError(format!("--concurrency must be 1..={MAX_CONC}")).into());
            }
            let text = format_of(&common) == Format::Text;
            let code = batch(&run, concurrency, text).await;
            Ok(finish(&run, code).await)
        }
        Cmd::Bench {
            mut pos,
            tool,
            args,
            calls,
            duration,
            warmup,
            concurrency,
            common,
        } => {
            let mut run = build(&common, &mut pos, &run_id(), false)?;
            // Thousands of failed calls are counted by reason, not printed a line each.
            run.counted_events = true;
            no_extra(&pos)?;
            let (args, string_keys) = match args.split_first() {
                Some((first, rest))
                    if first.trim_start().starts_with('{')
                        || first == "-"
                        || first.starts_with('@') =>
                {
                    let mut v = args_from_source(first, std::io::stdin().lock())?;
                    add_pairs(&mut v, rest)?;
                    (v, string_pair_keys(rest))
                }
                _ => {
                    let mut v = Value::Object(Map::new());
                    add_pairs(&mut v, &args)?;
                    (v, string_pair_keys(&args))
                }
            };
            let until = match (&duration, calls) {
                (Some(d), _) => Until::Elapsed(parse_duration(d)?),
                (None, Some(n)) if n == 0 || n > MAX_BENCH_CALLS => {
                    return Err(UsageError(format!("--calls must be 1..={MAX_BENCH_CALLS}")).into());
                }
                (None, n) => Until::Count(n.unwrap_or(1000)),
            };
            if warmup > 100_000 {
                return Err(UsageError("--warmup must be at most 100000".into()).into());
            }
            if concurrency == 0 || concurrency > MAX_CONC {
                return Err(UsageError(format!("--concurrency must be 1..={MAX_CONC}")).into());
            }
            let text = format_of(&common) == Format::Text;
            let spec = BenchSpec {
                tool,
                args,
                string_keys,
                until,
                warmup,
                conc: concurrency,
                text,
            };
            let code = bench(&run, spec).await?;
            Ok(finish(&run, code).await)
        }
    }
}

fn no_extra(pos: &[String]) -> Result<(), UsageError> {
    match pos {
        [] => Ok(()),
        [x, ..] => Err(UsageError(format!("unexpected argument {x:?}"))),
    }
}

/// Prints the timeline to stderr, closes the sessions and gives the exit status.
async fn finish(run: &Run, code: u8) -> ExitCode {
    run.timeline_to_stderr();
    auth_cmd::report_error(&|l| run.p.err(l));
    run.ctx.close().await;
    ExitCode::from(code)
}

/// How `tools` prints the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    /// `{"tools": […]}`, each tool whole.
    Json,
    /// Each tool's signature and description (a terminal, or --format text).
    Human,
    /// Names, one a line (piped without --format).
    Names,
}

async fn tools(run: &Run, listing: Listing, lock: Option<&str>) -> u8 {
    // Each tool as the server sent it (redacted): every field, `execution` and fields this
    // client does not know included.
    let listed = with_elapsed("tools/list", None, run.slot.list_tools_described()).await;
    match listed {
        Ok(tools) => {
            if let Some(file) = lock
                && let Err(e) = ToolsLock::of_tools(&tools).write(file)
            {
                run.p
                    .err(&format!("mcp: cannot write the lock file {file}: {e}"));
                return 1;
            }
            match listing {
                Listing::Json => run.p.json(&json!({ "tools": tools })),
                Listing::Human => {
                    for t in &tools {
                        run.p.text(&human::tool_line(t));
                    }
                    if tools.is_empty() {
                        run.p.err("mcp: this server lists no tools");
                    }
                }
                Listing::Names => {
                    for name in tools.iter().filter_map(|t| t["name"].as_str()) {
                        run.p.text(name);
                    }
                }
            }
            0
        }
        Err(e) => {
            run.p
                .err(&format!("mcp: {}", run.words_of(&e.message, &e.kind)));
            run.hint(&e.message);
            1
        }
    }
}

/// One batch result: the input's line and tool, then the ToolResult's fields.
fn batch_result(line: u64, tool: Option<&str>, r: &Value) -> Value {
    let mut m = Map::new();
    m.insert("line".into(), json!(line));
    m.insert("tool".into(), json!(tool));
    if let Value::Object(fields) = r {
        for (k, v) in fields {
            m.insert(k.clone(), v.clone());
        }
    }
    Value::Object(m)
}

fn print_batch_result(p: &Printer, v: &Value, text: bool) {
    if text {
        let line = v["line"].as_u64().unwrap_or(0);
        let tool = v["tool"].as_str().unwrap_or("-");
        let body = if v["ok"] == json!(true) {
            format!("ok: {}", v["text"].as_str().unwrap_or(""))
        } else {
            format!(
                "failed: {}",
                v["error"]
                    .as_str()
                    .or(v["text"].as_str())
                    .unwrap_or("no reason given")
            )
        };
        p.text(&format!("{line} {tool} {}", body.replace('\n', " ")));
    } else {
        p.json(v);
    }
}

async fn batch(run: &Run, conc: usize, text: bool) -> u8 {
    let _busy = signals::in_flight("batch");
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let worst = Arc::new(AtomicU8::new(0));
    let permits = Arc::new(smol::lock::Semaphore::new(conc));
    let mut line_no = 0u64;
    let mut blank = 0u64;
    let mut code = None;
    loop {
        let mut buf = Vec::new();
        let n = match (&mut input)
            .take(MAX_BATCH_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
        {
            Ok(n) => n,
            Err(e) => {
                run.p.err(&format!("mcp: reading stdin: {e}"));
                code = Some(2);
                break;
            }
        };
        if n == 0 {
            break;
        }
        line_no += 1;
        if buf.len() > MAX_BATCH_LINE {
            run.p.err(&format!(
                "mcp: line {line_no}: longer than {MAX_BATCH_LINE} bytes; stopping"
            ));
            code = Some(2);
            break;
        }
        let text_line = String::from_utf8_lossy(&buf);
        let text_line = text_line.trim();
        if text_line.is_empty() {
            blank += 1;
            run.p
                .err(&format!("mcp: line {line_no} is blank; skipped (no call)"));
            continue;
        }
        let parsed = parse_batch_line(text_line);
        let permit = permits.acquire_arc().await;
        let (slot, p, worst) = (run.slot.clone(), run.p.clone(), worst.clone());
        let setting = run.setting();
        smol::spawn(async move {
            let v = match parsed {
                Ok((tool, args)) => {
                    let mut r = slot.call(&tool, &args).await;
                    let kind = r.kind();
                    r.reword(|e| human::failure(e, &kind, &setting));
                    batch_result(line_no, Some(&tool), &result_json(&r))
                }
                Err((tool, e)) => {
                    let r = ToolResult::local_failure(format!("line {line_no}: {e}"));
                    batch_result(line_no, tool.as_deref(), &result_json(&r))
                }
            };
            if v["ok"] != json!(true) {
                worst.fetch_max(1, Ordering::Relaxed);
            }
            print_batch_result(&p, &v, text);
            drop(permit);
        })
        .detach();
    }
    // Every call has ended once every permit is back.
    let mut held = Vec::with_capacity(conc);
    for _ in 0..conc {
        held.push(permits.acquire().await);
    }
    drop(held);
    let summary = json!({
        "lines": line_no,
        "blankLines": blank,
        "ledger": ledger_json(&run.ctx.ledger()),
        "timeline": timeline_json(&run.ctx.timeline()),
    });
    if text {
        let l = run.ctx.ledger();
        run.p.text(&format!(
            "{line_no} lines ({blank} blank), {} tool calls metered, {} evidence bytes, {} events",
            l.tool_calls,
            l.evidence_bytes,
            run.ctx.timeline().len()
        ));
    } else {
        run.p.json(&summary);
    }
    code.unwrap_or_else(|| worst.load(Ordering::Relaxed))
}

/// A batch line: `(tool, args)`, or the tool (when it could be read) and why the line is bad.
/// `{"tool": NAME, "args": {…}}`, or MCP's own spelling `{"name": NAME, "arguments": {…}}`
/// (either key of each; both of one pair is a bad line).
fn parse_batch_line(text: &str) -> Result<(String, Value), (Option<String>, String)> {
    let v: Value = serde_json::from_str(text).map_err(|e| (None, format!("not JSON: {e}")))?;
    let shape = "expected {\"tool\": NAME, \"args\": {…}} or {\"name\": NAME, \"arguments\": {…}}";
    let tool = match (v.get("tool"), v.get("name")) {
        (Some(_), Some(_)) => {
            return Err((None, "give \"tool\" or \"name\", not both".to_owned()));
        }
        (Some(t), None) | (None, Some(t)) => t.as_str().ok_or((None, shape.to_owned()))?.to_owned(),
        (None, None) => return Err((None, shape.to_owned())),
    };
    let (key, args) = match (v.get("args"), v.get("arguments")) {
        (Some(_), Some(_)) => {
            return Err((
                Some(tool),
                "give \"args\" or \"arguments\", not both".into(),
            ));
        }
        (Some(a), None) => ("args", a),
        (None, Some(a)) => ("arguments", a),
        (None, None) => ("args", &Value::Null),
    };
    let args = match args {
        Value::Null => json!({}),
        a @ Value::Object(_) => a.clone(),
        _ => return Err((Some(tool), format!("\"{key}\" must be an object"))),
    };
    Ok((tool, args))
}

/// When a bench stops.
#[derive(Debug, Clone, Copy)]
enum Until {
    Count(u64),
    Elapsed(Duration),
}

struct BenchSpec {
    tool: String,
    args: Value,
    /// The keys of `key=value` pairs, typed by the tool's schema.
    string_keys: Vec<String>,
    until: Until,
    warmup: u64,
    conc: usize,
    text: bool,
}

/// How an error is counted in the breakdown: its reason, not the ids or numbers in it (a
/// tool error by the first line of the tool's own text).
fn error_kind(r: &ToolResult) -> String {
    let tool_said;
    let e = if r.is_error() {
        let first = r
            .text
            .lines()
            .find(|l| !l.trim().is_empty())
            .or(r.error())
            .unwrap_or("no text");
        tool_said = format!("tool error: {first}");
        tool_said.as_str()
    } else {
        r.error().unwrap_or("no reason given")
    };
    let mut k: String = e
        .chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .take(80)
        .collect();
    if e.chars().count() > 80 {
        k.push('…');
    }
    k
}

async fn bench(run: &Run, spec: BenchSpec) -> Result<u8, Fail> {
    let _busy = signals::in_flight("bench");
    let BenchSpec {
        tool,
        mut args,
        string_keys,
        until,
        warmup,
        conc,
        text,
    } = spec;
    // The handshake, and the tool must exist: timing calls to a missing tool measures errors.
    let tools = match run.slot.list_tools_described().await {
        Ok(t) => t,
        Err(e) => {
            run.p
                .err(&format!("mcp: {}", run.words_of(&e.message, &e.kind)));
            run.hint(&e.message);
            return Ok(1);
        }
    };
    let Some(described) = tools.iter().find(|t| t["name"] == tool.as_str()) else {
        return Err(not_on_server(&tool, &names_of(&tools)).into());
    };
    type_pairs(&mut args, &string_keys, &described["inputSchema"])?;
    // A warm-up call that fails stops the bench with its error: timing calls that all fail
    // the same way measures the error, not the tool.
    for i in 0..warmup {
        let mut r = run.slot.call(&tool, &args).await;
        if !r.ok() {
            run.reword(&tool, &mut r);
            let why = r.error().unwrap_or("no reason given").to_owned();
            run.p.err(&format!(
                "mcp: bench stopped: warm-up call {} of {warmup} to {tool} failed: {why}",
                i + 1
            ));
            run.hint(r.error().unwrap_or(""));
            return Ok(1);
        }
    }
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let args = Arc::new(args);
    let start = Instant::now();
    let mut tasks = Vec::new();
    let workers = match until {
        Until::Count(n) => conc.min(usize::try_from(n).unwrap_or(conc)),
        Until::Elapsed(_) => conc,
    };
    for _ in 0..workers {
        let slot = run.slot.clone();
        let (next, done, args) = (next.clone(), done.clone(), args.clone());
        let tool = tool.clone();
        let setting = run.setting();
        tasks.push(smol::spawn(async move {
            let mut lat = Vec::new();
            let mut errors: BTreeMap<String, u64> = BTreeMap::new();
            loop {
                // A duration run is still capped in calls, so its latencies fit in memory.
                let go = match until {
                    Until::Count(n) => next.fetch_add(1, Ordering::Relaxed) < n,
                    Until::Elapsed(d) => {
                        start.elapsed() < d
                            && next.fetch_add(1, Ordering::Relaxed) < MAX_BENCH_CALLS
                    }
                };
                if !go {
                    break;
                }
                let t0 = Instant::now();
                let mut r = slot.call(&tool, &*args).await;
                lat.push(t0.elapsed().as_secs_f64() * 1000.0);
                if !r.ok() {
                    let kind = r.kind();
                    r.reword(|e| human::failure(e, &kind, &setting));
                    let k = error_kind(&r);
                    if errors.len() < MAX_ERROR_KINDS || errors.contains_key(&k) {
                        *errors.entry(k).or_default() += 1;
                    } else {
                        *errors.entry("other".into()).or_default() += 1;
                    }
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
            (lat, errors)
        }));
    }
    let progress = std::io::stderr().is_terminal();
    let (all, errors) = futures_lite::future::or(
        async {
            let mut all = Vec::new();
            let mut errors: BTreeMap<String, u64> = BTreeMap::new();
            for t in tasks {
                let (l, e) = t.await;
                all.extend(l);
                for (k, n) in e {
                    *errors.entry(k).or_default() += n;
                }
            }
            (all, errors)
        },
        async {
            loop {
                smol::Timer::after(Duration::from_millis(250)).await;
                if progress {
                    eprint!(
                        "\r{} calls, {:.1} s",
                        done.load(Ordering::Relaxed),
                        start.elapsed().as_secs_f64()
                    );
                }
            }
        },
    )
    .await;
    let secs = start.elapsed().as_secs_f64();
    // The reason on the timeline's mcp.no_healthy_tool line: the most frequent one.
    if let Some((k, _)) = errors.iter().max_by_key(|(_, n)| **n)
        && let Ok(mut f) = run.failures.lock()
    {
        f.insert(tool.clone(), k.clone());
    }
    if progress {
        out::stderr("\r\x1b[K");
    }
    let mut sorted = all;
    sorted.sort_by(f64::total_cmp);
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    let q = |p: f64| round(common::quantile(&sorted, p));
    let n_errors: u64 = errors.values().sum();
    let mean = if sorted.is_empty() {
        0.0
    } else {
        sorted.iter().sum::<f64>() / sorted.len() as f64
    };
    let summary = json!({
        "tool": tool,
        "calls": sorted.len(),
        "errors": n_errors,
        "errorKinds": errors,
        "concurrency": conc,
        "warmup": warmup,
        "durationMs": round(secs * 1000.0),
        "callsPerSec": round(sorted.len() as f64 / secs.max(1e-9)),
        "latencyMs": {
            "min": round(sorted.first().copied().unwrap_or(0.0)),
            "mean": round(mean),
            "p50": q(0.50),
            "p90": q(0.90),
            "p99": q(0.99),
            "p999": q(0.999),
            "max": round(sorted.last().copied().unwrap_or(0.0)),
        },
    });
    if std::io::stderr().is_terminal() {
        out::stderr(&histogram(&sorted));
    }
    if text {
        let l = &summary["latencyMs"];
        run.p.text(&format!(
            "{} calls to {tool} in {:.2} s, {} in flight: {} calls/s, {} errors\n\
             latency ms: p50 {} p90 {} p99 {} p99.9 {} max {}",
            sorted.len(),
            secs,
            conc,
            summary["callsPerSec"],
            n_errors,
            l["p50"],
            l["p90"],
            l["p99"],
            l["p999"],
            l["max"]
        ));
        for (k, n) in &errors {
            run.p.text(&format!("  {n} x {k}"));
        }
    } else {
        run.p.json(&summary);
    }
    Ok(if n_errors == 0 { 0 } else { 1 })
}

/// A latency histogram for a person: buckets doubling from 0.0625 ms, a bar per bucket.
fn histogram(sorted: &[f64]) -> String {
    if sorted.is_empty() {
        return String::new();
    }
    let mut buckets: BTreeMap<i32, usize> = BTreeMap::new();
    for &ms in sorted {
        let b = (ms.max(0.0625) / 0.0625).log2().floor() as i32;
        *buckets.entry(b).or_default() += 1;
    }
    let most = buckets.values().copied().max().unwrap_or(1);
    let mut out = String::from("latency histogram (ms):\n");
    for (b, n) in buckets {
        let lo = 0.0625 * 2f64.powi(b);
        let bar = "#".repeat((n * 40).div_ceil(most));
        out.push_str(&format!("  {:>9.3} - {:>9.3}  {bar} {n}\n", lo, lo * 2.0));
    }
    out
}
