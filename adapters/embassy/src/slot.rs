//! One MCP slot on the edge: [`EdgeSlot`] holds the slot's configuration, its session and
//! failover state, its ledger counters and its timeline callback, and runs calls through the
//! core's driver. The caller makes one per slot at boot and keeps it (that is the memo: one
//! session per slot, failover state that lasts the run).
//!
//! Owns: counters, the callback, defmt logging of timeline events, the `exec` wrapper for
//! `run_command`, and [`CallStorage`] (fixed arrays for a call's buffers).
//! Does not own: any protocol or run rule; those are the core's `drive` and `harness`.

use core::cell::Cell;

use verifi_mcp_core::buf::{Buf, SliceBuf};
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

/// A timeline callback: sees every event of this slot as it is emitted.
pub type OnEvent<'a> = &'a dyn Fn(&TimelineEvent<'_>);

/// One slot of the run: primary and optional fallback endpoint, session, failover, counters.
pub struct EdgeSlot<'a> {
    config: SlotConfig<'a>,
    state: CellShared<SlotState>,
    run_id: &'a str,
    secrets: &'a [&'a [u8]],
    counters: Cell<Counters>,
    on_event: Option<OnEvent<'a>>,
}

impl<'a> EdgeSlot<'a> {
    /// A slot for `config`, in run `run_id` (the workspace of `exec`), redacting `secrets`
    /// (given at build or boot time; every occurrence becomes `[REDACTED]` before anything is
    /// metered, logged or returned).
    pub fn new(config: SlotConfig<'a>, run_id: &'a str, secrets: &'a [&'a [u8]]) -> Self {
        let has_fallback = config.fallback.is_some();
        EdgeSlot {
            config,
            state: CellShared::new(SlotState::new(config.version, has_fallback)),
            run_id,
            secrets,
            counters: Cell::new(Counters::default()),
            on_event: None,
        }
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
    pub async fn call<'b, N: Net, B: Buf>(
        &self,
        net: &N,
        tool: &str,
        args: Option<Value<'_>>,
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> ToolResult<'b> {
        let (mut ledger, mut timeline) = self.sinks();
        let result = drive::call(
            net,
            &self.config,
            &self.state,
            tool,
            args,
            self.secrets,
            &mut ledger,
            &mut timeline,
            bufs,
        )
        .await;
        if result.ok {
            crate::log::log_debug!("mcp {=str}/{=str}: ok in {=u64} ms", self.config.slot, tool, result.latency_ms);
        }
        result
    }

    /// Lists the tools of the slot (every page, failing over on a primary failure); each
    /// name goes to `on_tool`.
    pub async fn list_tools<N: Net, B: Buf>(
        &self,
        net: &N,
        bufs: &mut CallBuffers<'_, B>,
        on_tool: impl FnMut(&str),
    ) -> Result<(), ListError> {
        let (_, mut timeline) = self.sinks();
        drive::list_tools(
            net,
            &self.config,
            &self.state,
            self.secrets,
            &mut timeline,
            bufs,
            on_tool,
        )
        .await
    }

    /// Runs `command` on the slot's `run_command` tool: the timeout is clamped to the seed's
    /// 1..=285 s, the workspace is the run id, and the reply is unwrapped into the tool's own
    /// exit code and output. `args` is scratch for the request's arguments (the command plus
    /// about 64 bytes); too small is an `ok: false` result that says so.
    pub async fn exec<'b, N: Net, B: Buf>(
        &self,
        net: &N,
        command: &str,
        timeout_s: u32,
        args: &mut [u8],
        bufs: &'b mut CallBuffers<'_, B>,
    ) -> exec::ExecResult<'b> {
        let mut sink = SliceBuf::new(args);
        let timeout = exec::clamp_timeout(timeout_s);
        if let Err(over) = exec::encode_args(&mut sink, command, timeout, self.run_id) {
            return exec::ExecResult::arguments_overflow(over);
        }
        let len = sink.len();
        let Some(raw) = args.get(..len) else {
            return exec::ExecResult::arguments_overflow(verifi_mcp_core::buf::Overflow {
                limit: args.len(),
                needed: len,
            });
        };
        let value = match Value::parse(raw, JsonLimits::default()) {
            Ok(v) => v,
            Err(_) => return exec::ExecResult::arguments_overflow(verifi_mcp_core::buf::Overflow {
                limit: args.len(),
                needed: len,
            }),
        };
        let result = self.call(net, exec::RUN_COMMAND, Some(value), bufs).await;
        exec::ExecResult::from_tool_result(result)
    }

    /// Best-effort DELETE of the slot's open sessions (end of run).
    pub async fn close<N: Net, B: Buf>(&self, net: &N, bufs: &mut CallBuffers<'_, B>) {
        drive::close(net, &self.config, &self.state, bufs).await
    }

    fn sinks(&self) -> (SlotLedger<'_>, SlotTimeline<'_>) {
        (
            SlotLedger(&self.counters),
            SlotTimeline {
                counters: &self.counters,
                on_event: self.on_event,
            },
        )
    }
}

/// The ledger of one slot: adds each record to the counters.
struct SlotLedger<'x>(&'x Cell<Counters>);

impl Ledger for SlotLedger<'_> {
    fn record(&mut self, r: LedgerRecord) {
        let mut c = self.0.get();
        c.tool_calls = c.tool_calls.saturating_add(r.tool_calls);
        c.evidence_bytes = c.evidence_bytes.saturating_add(r.evidence_bytes.unwrap_or(0));
        self.0.set(c);
    }
}

/// The timeline of one slot: counts tool errors, logs through defmt, calls the callback.
struct SlotTimeline<'x> {
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
