//! One MCP slot on the edge: [`EdgeSlot`] holds the slot's configuration, its session and
//! failover state, its ledger counters and its timeline callback, and runs calls through the
//! core's driver. The caller makes one per slot at boot and keeps it (that is the memo: one
//! session per slot, failover state that lasts the run).
//!
//! Owns: counters, the callback, defmt logging of timeline events, the `exec` wrapper for
//! `run_command`, and [`CallStorage`] (fixed arrays for a call's buffers).
//! Does not own: any protocol or run rule; those are the core's `drive` and `harness`.

use core::cell::Cell;
use core::future::Future;

use heapless::Vec;

use verifi_mcp_core::buf::{Buf, Overflow, Sink, SliceBuf, put_u64, trim};
use verifi_mcp_core::drive::{self, CallBuffers, ListError, Net, SlotConfig, SlotState};
use verifi_mcp_core::harness::events::{Timeline, TimelineEvent};
use verifi_mcp_core::harness::exec;
use verifi_mcp_core::harness::meter::{Ledger, LedgerRecord};
use verifi_mcp_core::harness::result::ToolResult;
use verifi_mcp_core::wire::json::{JsonLimits, Value};

use crate::shared::CellShared;

/// What a slot has spent so far in this run (the ledger's counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Counters {
    /// Tool calls paid for, one per attempt (a failed-over call counts both round trips).
    pub tool_calls: u32,
    /// Bytes of redacted tool text metered as evidence.
    pub evidence_bytes: u64,
    /// `tool_error` events emitted (every `ok: false`).
    pub tool_errors: u32,
}

/// Most secrets (given ones plus static header values) one slot redacts.
pub const MAX_SECRETS: usize = 16;

/// More secrets than [`MAX_SECRETS`] were given to one slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TooManySecrets {
    /// [`MAX_SECRETS`].
    pub limit: usize,
    /// Secrets plus static headers given.
    pub given: usize,
}

impl core::fmt::Display for TooManySecrets {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} secrets and header values for one slot, more than the {} it can redact",
            self.given, self.limit
        )
    }
}

/// A timeline callback: sees every event of this slot as it is emitted.
pub type OnEvent<'a> = &'a dyn Fn(&TimelineEvent<'_>);

/// One slot of the run: primary and optional fallback endpoint, session, failover, counters.
///
/// `LISTS` says whether the firmware lists the slot's tools as well as calling them: then
/// its calls run on the op type of its lists, so the two share one copy of the core's op
/// and pump ([`EdgeSlot::listing`]); a slot that only calls ([`EdgeSlot::new`]) carries no
/// list arms in its calls. Either can do both; only the flash differs.
pub struct EdgeSlot<'a, const LISTS: bool = false> {
    config: SlotConfig<'a>,
    state: CellShared<SlotState>,
    run_id: &'a str,
    secrets: Vec<&'a [u8], MAX_SECRETS>,
    counters: Cell<Counters>,
    on_event: Option<OnEvent<'a>>,
}

impl<'a> EdgeSlot<'a> {
    /// A slot for `config`, in run `run_id` (the workspace of `exec`), redacting `secrets`
    /// (given at build or boot time) and the values of the slot's static headers (and the
    /// credential of an `authorization: Bearer …` value on its own): every
    /// occurrence becomes `[REDACTED]` before anything is metered, logged or returned.
    /// More than [`MAX_SECRETS`] in all is an error, not a secret silently left out.
    pub fn new(
        config: SlotConfig<'a>,
        run_id: &'a str,
        secrets: &'a [&'a [u8]],
    ) -> Result<Self, TooManySecrets> {
        Self::made(config, run_id, secrets)
    }
}

impl<'a> EdgeSlot<'a, true> {
    /// [`new`](EdgeSlot::new), for a firmware that lists the slot's tools as well as calling
    /// them: its calls then run on the op type of its lists, one copy of the core's op and
    /// pump for both (a few KiB less flash than two), at the cost of the list's arms in each
    /// call's code. A firmware that only calls keeps `new`'s slot: no list arms at all.
    pub fn listing(
        config: SlotConfig<'a>,
        run_id: &'a str,
        secrets: &'a [&'a [u8]],
    ) -> Result<Self, TooManySecrets> {
        Self::made(config, run_id, secrets)
    }
}

impl<'a, const LISTS: bool> EdgeSlot<'a, LISTS> {
    /// [`new`](EdgeSlot::new)'s body, for either kind of slot (not inlined: made once, the
    /// slot written where its caller keeps it).
    #[inline(never)]
    fn made(
        config: SlotConfig<'a>,
        run_id: &'a str,
        secrets: &'a [&'a [u8]],
    ) -> Result<Self, TooManySecrets> {
        let mut all: Vec<&'a [u8], MAX_SECRETS> = Vec::new();
        let mut given = 0;
        let mut add = |s: &'a [u8]| {
            given += 1;
            // Past the cap it is only counted, and refused below.
            let _ = all.push(s);
        };
        secrets.iter().for_each(|s| add(s));
        for v in config.header_values() {
            add(v.as_bytes());
            // `<scheme> <credential>` (`Bearer …`): the credential alone too, so a tool that
            // echoes the bare token does not show it either; under 4 bytes it is no secret
            // (the run's rule) and would scrub evidence.
            // (A byte search for the space: no pattern searcher for it in the firmware.)
            if let Some(c) = v
                .bytes()
                .position(|b| b == b' ')
                .and_then(|i| v.get(i + 1..))
                && trim(c).len() >= 4
            {
                add(trim(c).as_bytes());
            }
        }
        if given > MAX_SECRETS {
            return Err(TooManySecrets {
                limit: MAX_SECRETS,
                given,
            });
        }
        let state = CellShared::new(SlotState::new(config.version, config.fallback.is_some()));
        Ok(EdgeSlot {
            config,
            state,
            run_id,
            secrets: all,
            counters: Cell::new(Counters::default()),
            on_event: None,
        })
    }

    /// Calls `f` with every timeline event of this slot (after defmt logging, when enabled).
    pub fn with_timeline(mut self, f: OnEvent<'a>) -> Self {
        self.on_event = Some(f);
        self
    }

    /// The slot's name.
    pub fn name(&self) -> &'a str {
        self.config.slot
    }

    /// The counters so far.
    pub fn counters(&self) -> Counters {
        self.counters.get()
    }

    /// Calls `tool` with `args` (`None` sends `{}`). Never fails: every failure is an
    /// `ok: false` result, whose text and error live in `bufs`. A buffer that is too small is
    /// reported by name with its cap and the size it needed at least.
    pub async fn call<'b, N: Net, B: Buf + Send>(
        &self,
        net: &N,
        tool: &str,
        args: Option<Value<'_>>,
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> ToolResult<'b> {
        let (mut ledger, mut timeline) = self.sinks();
        let result = self
            .driver(net)
            .tool_call_on::<LISTS, _, _, _, _, _>(
                (tool, args),
                (drive::Waits, &self.secrets[..]),
                (&mut ledger, &mut timeline),
                bufs,
            )
            .await
            .0;
        if result.ok() {
            crate::log::log_debug!(
                "mcp {=str}/{=str}: ok in {=u64} ms",
                self.config.slot,
                tool,
                result.latency_ms
            );
        }
        result
    }

    /// Lists the tools of the slot (every page, failing over on a primary failure); each
    /// name goes to `on_tool`.
    // The driver's future itself, not one around it (one state machine less).
    pub fn list_tools<'s, N: Net, B: Buf + Send>(
        &'s self,
        net: &'s N,
        bufs: &'s mut CallBuffers<'_, B>,
        on_tool: impl FnMut(&str) + Send + 's,
    ) -> impl Future<Output = Result<(), ListError>> {
        // On the op type of a listing slot's calls (one copy of the op for both).
        self.driver(net)
            .list_tools_shared(&self.secrets, bufs, on_tool)
    }

    /// Runs `command` on the slot's `run_command` tool: `timeout_ms` becomes the tool's
    /// `timeout` in seconds, clamped to 1..=285; the workspace is the run id; the reply is
    /// unwrapped into the tool's own exit code and output (`harness::exec`). `args` is scratch
    /// for the arguments (the command plus about 64 bytes); too small gives `ok: false` with
    /// an error that names the buffer and says by how much.
    pub async fn exec<'b, N: Net, B: Buf + Send>(
        &self,
        net: &N,
        command: &str,
        timeout_ms: u64,
        args: &mut [u8],
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> ExecResult<'b> {
        let call = match self.exec_args(command, timeout_ms, args, bufs) {
            // The driver's future itself, not `call`'s around it (one state machine less).
            Ok((value, bufs)) => {
                let (mut ledger, mut timeline) = self.sinks();
                self.driver(net)
                    .tool_call_on::<LISTS, _, _, _, _, _>(
                        (exec::RUN_COMMAND, Some(value)),
                        (drive::Waits, &self.secrets[..]),
                        (&mut ledger, &mut timeline),
                        bufs,
                    )
                    .await
                    .0
            }
            Err(failed) => failed,
        };
        ExecResult::of(call)
    }

    /// `exec`'s arguments for `command`, written into `args` and parsed back, with `bufs`
    /// handed back for the call; or, when they do not fit, the call's `ok: false` (not async,
    /// not inlined: one function out of the call's future for both).
    #[inline(never)]
    #[allow(clippy::type_complexity)]
    fn exec_args<'x, 'b, 'c, B: Buf>(
        &self,
        command: &str,
        timeout_ms: u64,
        args: &'x mut [u8],
        bufs: &'b mut CallBuffers<'c, B>,
    ) -> Result<(Value<'x>, &'b mut CallBuffers<'c, B>), ToolResult<'b>> {
        let limit = args.len();
        let mut sink = SliceBuf::new(args);
        let timeout_s = exec::clamp_timeout_s(timeout_ms);
        // Through `dyn Sink`: the core's own copies of the JSON string and number writers.
        let mut out: &mut dyn Sink = &mut sink;
        let over = match exec::encode_run_command_args(&mut out, command, timeout_s, self.run_id) {
            Ok(()) => {
                let len = sink.len();
                // Cannot fail for what encode_run_command_args writes; reported, not assumed.
                match Value::parse(args.get(..len).unwrap_or(&[]), JsonLimits::default()) {
                    Ok(value) => return Ok((value, bufs)),
                    Err(_) => Overflow {
                        limit,
                        needed: limit,
                    },
                }
            }
            Err(over) => over,
        };
        Err(self.args_overflow(over, limit, bufs))
    }

    /// The `ok: false` of an `exec` whose arguments did not fit `limit` bytes (no `core::fmt`:
    /// the words and numbers are put one by one, cut at the error buffer's cap).
    fn args_overflow<'b, B: Buf>(
        &self,
        over: Overflow,
        limit: usize,
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> ToolResult<'b> {
        bufs.error.clear();
        let more = over.needed.saturating_sub(limit);
        // Words and digits straight into the error buffer, cut at its cap.
        let mut error = Capped(&mut bufs.error);
        let out: &mut dyn Sink = &mut error;
        for (words, n) in [
            (TOO_SMALL, limit),
            (" bytes, needs at least ", over.needed),
            (" (", more),
        ] {
            let _ = out.put(words.as_bytes());
            let _ = put_u64(out, n as u64);
        }
        let _ = out.put(b" more)");
        // ASCII only, so always UTF-8 (the fallback is never used).
        let error = core::str::from_utf8(bufs.error.bytes()).unwrap_or(TOO_SMALL);
        // The core's one rule for a call that failed before sending: metered, a tool_error
        // event, no failover (the host adapter does the same).
        let (mut ledger, mut timeline) = self.sinks();
        drive::local_failure(
            self.config.slot,
            exec::RUN_COMMAND,
            error,
            &mut ledger,
            &mut timeline,
        )
    }

    /// Best-effort DELETE of the slot's open sessions (end of run).
    // The driver's future itself, not one around it (one state machine less).
    pub fn close<'s, N: Net, B: Buf>(
        &'s self,
        net: &'s N,
        bufs: &'s mut CallBuffers<'_, B>,
    ) -> impl Future<Output = ()> {
        self.driver(net).close_on::<LISTS, B>(bufs)
    }

    /// The core's driver of this slot over `net`: one closure type for every op of the slot,
    /// so `call` and `exec` share one copy of the driver's code.
    // The type is the driver's own bound on its state closure, spelled out once here.
    #[allow(clippy::type_complexity)]
    fn driver<'d, N: Net>(
        &'d self,
        net: &'d N,
    ) -> drive::Driver<'d, N, impl Fn(&mut dyn FnMut(&mut SlotState)) + Copy + 'd> {
        drive::Driver::new(net, &self.config, move |f| self.state.try_with(f))
    }

    pub(crate) fn sinks(&self) -> (SlotLedger<'_>, SlotTimeline<'_>) {
        (
            SlotLedger(&self.counters),
            SlotTimeline {
                counters: &self.counters,
                on_event: self.on_event,
            },
        )
    }
}

/// What [`EdgeSlot::exec`] gives: the tool's verdict and the call under it.
#[derive(Debug, Clone, Copy)]
pub struct ExecResult<'b> {
    /// The tool's exit code was 0 (without an exit code: the MCP call's own success).
    pub ok: bool,
    /// The tool's exit code, when the reply had the `run_command` form.
    pub exit_code: Option<i64>,
    /// The tool's output (unwrapped), or the raw text or error when it did not unwrap.
    pub output: &'b str,
    /// The MCP call itself: its shape, error, latency and raw reply.
    pub call: ToolResult<'b>,
}

impl<'b> ExecResult<'b> {
    // Not inlined: out of the exec future's poll (minimal -60 B).
    #[inline(never)]
    fn of(call: ToolResult<'b>) -> Self {
        let o = exec::exec_outcome(call.ok(), call.text, call.error());
        ExecResult {
            ok: o.ok,
            exit_code: o.exit_code,
            output: o.output,
            call,
        }
    }
}

/// The start of an `exec` whose arguments did not fit.
const TOO_SMALL: &str = "the exec arguments buffer is too small: ";

/// A sink over a buffer that appends as much of each write as fits under its cap (the text
/// cut there; it is ASCII) and never fails.
struct Capped<'x, B>(&'x mut B);

impl<B: Buf> Sink for Capped<'_, B> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        let room = self.0.limit().saturating_sub(self.0.len());
        let _ = self.0.put(bytes.get(..room).unwrap_or(bytes));
        Ok(())
    }
}

/// The ledger of one slot: adds each record to the counters.
pub(crate) struct SlotLedger<'x>(&'x Cell<Counters>);

impl Ledger for SlotLedger<'_> {
    // Not inlined: one copy of the counters' update for every place a record is made (the
    // attempts, the result, a dropped call, a local failure).
    #[inline(never)]
    fn record(&mut self, r: LedgerRecord) {
        let mut c = self.0.get();
        c.tool_calls = c.tool_calls.saturating_add(r.tool_calls);
        c.evidence_bytes = c
            .evidence_bytes
            .saturating_add(r.evidence_bytes.unwrap_or(0));
        self.0.set(c);
    }
}

/// The timeline of one slot: counts tool errors, logs through defmt, calls the callback.
pub(crate) struct SlotTimeline<'x> {
    counters: &'x Cell<Counters>,
    on_event: Option<OnEvent<'x>>,
}

impl Timeline for SlotTimeline<'_> {
    fn emit(&mut self, event: &TimelineEvent<'_>) {
        if let TimelineEvent::ToolError { .. } = event {
            let mut c = self.counters.get();
            c.tool_errors = c.tool_errors.saturating_add(1);
            self.counters.set(c);
        }
        log_event(event);
        if let Some(f) = self.on_event {
            f(event);
        }
    }
}

#[cfg(feature = "defmt")]
fn log_event(event: &TimelineEvent<'_>) {
    match event {
        TimelineEvent::ToolError { slot, tool, error } => {
            defmt::warn!("mcp.tool_error {=str}/{=str}: {=str}", slot, tool, error)
        }
        TimelineEvent::FallbackUsed { slot, tool, .. } => {
            defmt::warn!("mcp.fallback_used {=str}/{=str}", slot, tool)
        }
        TimelineEvent::NoHealthyTool { slot, tool } => {
            defmt::error!("mcp.no_healthy_tool {=str}/{=str}", slot, tool)
        }
        // Only a build with the era probe tells eras, only one with tasks tells tasks.
        TimelineEvent::Era {
            slot, server, era, ..
        } if cfg!(feature = "probe") => {
            defmt::info!("mcp.era {=str} {=str} {=str}", slot, server, era)
        }
        TimelineEvent::Task {
            slot, task, status, ..
        } if cfg!(feature = "tasks") => {
            defmt::info!("mcp.task {=str} {=str} {=str}", slot, task, status)
        }
        TimelineEvent::Era { .. } | TimelineEvent::Task { .. } => {}
    }
}

#[cfg(not(feature = "defmt"))]
fn log_event(_: &TimelineEvent<'_>) {}

/// Fixed storage for one call's buffers, sized by const generics: `REQUEST` (request head and
/// body), `HEAD` (a response head), `READ` (socket reads), `REPLY` (one JSON-RPC reply or SSE
/// event), `TEXT` (the flattened, redacted tool text), `ERROR` (the error message), `RAW` (the
/// redacted raw reply, kept only with `SlotConfig::keep_raw`; may be 0).
/// Place it in a `static` (e.g. `static_cell::ConstStaticCell`) and lend it to each call.
pub struct CallStorage<
    const REQUEST: usize,
    const HEAD: usize,
    const READ: usize,
    const REPLY: usize,
    const TEXT: usize,
    const ERROR: usize,
    const RAW: usize,
> {
    request: [u8; REQUEST],
    head: [u8; HEAD],
    read: [u8; READ],
    reply: [u8; REPLY],
    text: [u8; TEXT],
    error: [u8; ERROR],
    raw: [u8; RAW],
}

impl<
    const REQUEST: usize,
    const HEAD: usize,
    const READ: usize,
    const REPLY: usize,
    const TEXT: usize,
    const ERROR: usize,
    const RAW: usize,
> CallStorage<REQUEST, HEAD, READ, REPLY, TEXT, ERROR, RAW>
{
    /// Zeroed storage (const, so it can live in `.bss`).
    pub const fn new() -> Self {
        CallStorage {
            request: [0; REQUEST],
            head: [0; HEAD],
            read: [0; READ],
            reply: [0; REPLY],
            text: [0; TEXT],
            error: [0; ERROR],
            raw: [0; RAW],
        }
    }

    /// The driver's view of this storage, for one call.
    pub fn buffers(&mut self) -> CallBuffers<'_, SliceBuf<'_>> {
        CallBuffers {
            request: SliceBuf::new(&mut self.request),
            head: &mut self.head,
            read: &mut self.read,
            reply: SliceBuf::new(&mut self.reply),
            text: SliceBuf::new(&mut self.text),
            error: SliceBuf::new(&mut self.error),
            raw: SliceBuf::new(&mut self.raw),
        }
    }
}

impl<
    const REQUEST: usize,
    const HEAD: usize,
    const READ: usize,
    const REPLY: usize,
    const TEXT: usize,
    const ERROR: usize,
    const RAW: usize,
> Default for CallStorage<REQUEST, HEAD, READ, REPLY, TEXT, ERROR, RAW>
{
    fn default() -> Self {
        Self::new()
    }
}

/// Storage that fits the probe's calls: 1 KiB request, 1 KiB head, 1 KiB reads, 8 KiB reply,
/// 4 KiB text, 256 B error, no raw copy (15.25 KiB).
pub type ProbeCallStorage = CallStorage<1024, 1024, 1024, 8192, 4096, 256, 0>;
