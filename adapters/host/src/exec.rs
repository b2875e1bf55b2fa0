//! `Exec`: the usage pattern of the TypeScript harness SDK this project replaces (its
//! `exec(command, timeoutMs)`; see `docs/design.md`) for a shared Kali-style box, on one slot
//! of the context:
//! `run_command { command, timeout, workspace: run id }` with the timeout clamped under the
//! client's ceiling, and the TOOL's exit code reported, not the MCP call's success.
//!
//! Owns: nothing but the glue; the clamp, the argument encoding and the unwrapping are the
//! core's `harness::exec`.

use verifi_mcp_core::buf::Buf;
use verifi_mcp_core::harness::exec::{
    RUN_COMMAND, clamp_timeout_s, encode_run_command_args, exec_outcome,
};

use crate::buf::VecBuf;
use crate::context::{HarnessContext, SlotNotFilledError};
use crate::result::ToolResult;
use crate::slot::SlotHandle;

/// What one `exec` gives the harness.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecResult {
    /// The tool's output (unwrapped), or the raw text / error when it had no exit line.
    pub output: String,
    /// The tool's exit code was 0 (without one: the MCP call's success).
    pub ok: bool,
    /// The tool's exit code, when the reply had the `run_command` form.
    pub exit_code: Option<i64>,
    /// The whole call result, for metering-aware harnesses.
    #[serde(skip)]
    pub call: ToolResult,
}

/// `run_command` (or another tool of that form, see [`Exec::tool`]) on one slot, with the run
/// id as the workspace.
#[derive(Debug, Clone)]
pub struct Exec {
    slot: SlotHandle,
    run_id: String,
    tool: String,
}

impl Exec {
    /// Exec on `slot` of `ctx` (the slot's memoized handle).
    pub fn new(ctx: &HarnessContext, slot: &str) -> Result<Exec, SlotNotFilledError> {
        Ok(Exec {
            slot: ctx.mcp(slot)?,
            run_id: ctx.run_id().to_owned(),
            tool: RUN_COMMAND.to_owned(),
        })
    }

    /// The same, calling the tool `name` instead of `run_command` (a box whose command tool
    /// is called `command` or `execute_command`; it takes the same arguments).
    pub fn tool(mut self, name: &str) -> Exec {
        self.tool = name.to_owned();
        self
    }

    /// The tool it calls (`run_command` unless [`tool`](Self::tool) named another).
    pub fn tool_name(&self) -> &str {
        &self.tool
    }

    /// The slot it runs on.
    pub fn slot(&self) -> &SlotHandle {
        &self.slot
    }

    /// Runs `command` with `timeout_ms` (sent as whole seconds, clamped to 1..=285).
    pub async fn exec(&self, command: &str, timeout_ms: u64) -> ExecResult {
        let mut args = VecBuf::with_limit(
            command
                .len()
                .saturating_add(self.run_id.len())
                .saturating_mul(6)
                .saturating_add(64),
        );
        let call = match encode_run_command_args(
            &mut args,
            command,
            clamp_timeout_s(timeout_ms),
            &self.run_id,
        ) {
            Ok(()) => self.slot.call_json(&self.tool, args.bytes(), None).await,
            Err(e) => self
                .slot
                .local_failure(&self.tool, &format!("{} arguments: {e}", self.tool)),
        };
        let outcome = exec_outcome(call.ok(), &call.text, call.error());
        ExecResult {
            output: outcome.output.to_owned(),
            ok: outcome.ok,
            exit_code: outcome.exit_code,
            call: call.clone(),
        }
    }
}
