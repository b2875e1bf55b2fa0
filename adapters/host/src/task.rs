//! Tool calls as tasks a harness holds (the 2026-07-28 tasks extension): start a call and get
//! its task back at once ([`SlotHandle::start_task`]), or name a task an earlier run started
//! ([`SlotHandle::task`]); then ask its status, wait for its result, or cancel it
//! ([`TaskHandle`]).
//!
//! Owns: the handle and its four operations. Does not own: polling, deadlines, redaction and
//! metering of a task, which are the core's (`Driver::start_task`, `Driver::attach_task`,
//! `Driver::task_request`).
//!
//! ```no_run
//! use serde_json::json;
//! use verifi_mcp_host::{HarnessContext, Options, TaskStart};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = HarnessContext::from_manifest_file("manifest.json", "run-7", Options::default())?;
//! let kali = ctx.mcp("kali")?;
//! smol::block_on(async {
//!     match kali.start_task("scan", json!({ "target": "10.0.0.0/24" })).await {
//!         TaskStart::Task(task) => {
//!             ctx.log(format!("scan runs as task {}", task.id())); // keep it to re-attach later
//!             let status = task.status().await?; // {"taskId":…,"status":"working",…}
//!             println!("{}", status["status"]);
//!             let r = task.wait().await; // the tool's result, as `call` gives it
//!             println!("{}", r.text);
//!         }
//!         TaskStart::Done(r) => println!("answered at once: {}", r.text),
//!     }
//!     // After a harness restart: the same task by its id (and the tool that made it).
//!     let again = kali.task("4b2c…").tool("scan");
//!     let _ = again.cancel().await;
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })?;
//! # Ok(())
//! # }
//! ```

use std::fmt;

use serde::Serialize;
use verifi_mcp_core::drive::{MAX_TASK_ID, ProgressObserver, ProgressUpdate};
use verifi_mcp_core::harness::failover::Target;
use verifi_mcp_core::wire::jsonrpc::Request;

use crate::protocol::ProtocolError;
use crate::result::ToolResult;
use crate::slot::{Ended, SlotHandle, Tasking};

/// The tool name a re-attached task goes by on the timeline when the caller does not name
/// the tool that made it.
pub const UNNAMED_TASK_TOOL: &str = "tasks/get";

/// How [`SlotHandle::start_task`] came back.
#[derive(Debug)]
pub enum TaskStart {
    /// The server made the call a task, which runs on: follow it with the handle.
    Task(TaskHandle),
    /// The server answered at once (a tool that is not a task, an old-era server), or the call
    /// failed: its result, as [`SlotHandle::call`] gives it.
    Done(ToolResult),
}

/// A task on one server of a slot: a tool call that runs on there (the tasks extension).
///
/// Cheap to clone; holds the slot (its session, failover state and ledger). A task lives on
/// its server, so every request of the handle goes to that server alone, never to the other.
#[derive(Clone)]
pub struct TaskHandle {
    slot: SlotHandle,
    target: Target,
    id: String,
    tool: String,
    /// Whether a dropped [`wait`](Self::wait) cancels the task (see [`Self::leave_running`]).
    cancel_on_drop: bool,
}

impl fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskHandle")
            .field("slot", &self.slot.slot())
            .field("id", &self.id)
            .field("tool", &self.tool)
            .field("on_fallback", &self.on_fallback())
            .finish()
    }
}

impl TaskHandle {
    /// The task's id, as its server gave it (keep it to re-attach with [`SlotHandle::task`]).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The tool whose call the task is ([`UNNAMED_TASK_TOOL`] when a re-attached task was not
    /// told, see [`tool`](Self::tool)); the name its result goes by on the timeline.
    pub fn tool_name(&self) -> &str {
        &self.tool
    }

    /// Whether the task runs on the slot's fallback (else on its primary).
    pub fn on_fallback(&self) -> bool {
        self.target == Target::Fallback
    }

    /// The same task, named as a call of `tool` on the timeline (and checked against the
    /// tool's `outputSchema`, if the slot listed one).
    pub fn tool(mut self, tool: &str) -> Self {
        tool.clone_into(&mut self.tool);
        self
    }

    /// The same task, on the slot's fallback server instead of its primary.
    pub fn fallback(mut self) -> Self {
        self.target = Target::Fallback;
        self
    }

    /// `tasks/get`: the task's status as its server says it (`taskId`, `status`,
    /// `statusMessage`, `pollIntervalMs`, … and `result` or `error` once it ended), redacted.
    /// Not metered (the result is metered by [`wait`](Self::wait)). Fails with the server's
    /// refusal (an unknown or expired task is `-32602`) or why no answer came.
    pub async fn status(&self) -> Result<serde_json::Value, ProtocolError> {
        self.request(Request::TaskGet { task: &self.id }).await
    }

    /// `tasks/cancel`: asks the server to cancel the task; its answer (often an empty result;
    /// [`status`](Self::status) then says `cancelled`), redacted. A task that already ended
    /// is the server's to refuse.
    pub async fn cancel(&self) -> Result<serde_json::Value, ProtocolError> {
        self.request(Request::TaskCancel { task: &self.id }).await
    }

    /// Follows the task to its end, as [`SlotHandle::call`] does a call: the tool's result
    /// flattened, redacted, metered (its evidence bytes; the tool call was counted when the
    /// call started) and on the timeline; never panics, never fails. The slot's timeout runs
    /// from now: at it, or if this future is dropped, the task is cancelled (`tasks/cancel`).
    /// The server must speak the 2026-07-28 protocol.
    pub async fn wait(&self) -> ToolResult {
        self.wait_as(None).await
    }

    /// This handle with a [`wait`](Self::wait) that, when its future is dropped (the caller
    /// gave up, a person pressed Ctrl-C), leaves the task running on its server instead of
    /// cancelling it: for a task someone detached on purpose and only looks in on. The slot's
    /// timeout still cancels it, as it bounds every wait.
    pub fn leave_running(mut self) -> Self {
        self.cancel_on_drop = false;
        self
    }

    /// [`wait`](Self::wait), telling `on_progress` of the task's progress and status messages
    /// (a status message comes with an empty `progress`).
    pub async fn wait_with_progress(
        &self,
        on_progress: impl Fn(&ProgressUpdate<'_>) + Sync,
    ) -> ToolResult {
        self.wait_as(Some(ProgressObserver(&on_progress))).await
    }

    async fn wait_as(&self, on_progress: Option<ProgressObserver<'_>>) -> ToolResult {
        if self.id.is_empty() || self.id.len() > MAX_TASK_ID {
            return ToolResult::local_failure(format!(
                "task id must be 1 to {MAX_TASK_ID} bytes long, not {}",
                self.id.len()
            ));
        }
        let how = (
            Tasking::Attach {
                target: self.target,
                task: &self.id,
            },
            self.cancel_on_drop,
        );
        match call_task(&self.slot, &self.tool, b"null", on_progress, how).await {
            Ended::Done(r) => r,
            // An attached call polls to the end; it is never handed back running.
            Ended::Task { id, .. } => {
                ToolResult::local_failure(format!("task {id} came back still running"))
            }
        }
    }

    async fn request(&self, req: Request<'_>) -> Result<serde_json::Value, ProtocolError> {
        let method = req.method();
        let json = self.slot.task_request(self.target, req).await?;
        serde_json::from_slice(&json).map_err(|e| ProtocolError {
            method,
            code: None,
            message: format!("{method} failed: the result is not JSON: {e}"),
            not_found: false,
        })
    }
}

impl SlotHandle {
    /// Calls `tool` with `args` as [`call`](Self::call) does, but when the server makes the
    /// call a task (the 2026-07-28 tasks extension) it comes back at once as
    /// [`TaskStart::Task`], running on; a server that answers at once gives
    /// [`TaskStart::Done`]. Metered as one tool call either way. A task is never started
    /// twice: failover happens only before the server took the call.
    pub async fn start_task(&self, tool: &str, args: impl Serialize) -> TaskStart {
        let json = serde_json::to_vec(&args).unwrap_or_else(|_| b"false".to_vec());
        match call_task(self, tool, &json, None, (Tasking::Detach, true)).await {
            Ended::Done(r) => TaskStart::Done(r),
            Ended::Task { target, id } => TaskStart::Task(TaskHandle {
                slot: self.clone(),
                target,
                id,
                tool: tool.to_owned(),
                cancel_on_drop: true,
            }),
        }
    }

    /// The task `id` on the slot's primary (e.g. one a [`start_task`](Self::start_task) of an
    /// earlier run handed back): nothing is sent until the handle is used. Name the tool that
    /// made it with [`TaskHandle::tool`], and its server with [`TaskHandle::fallback`] when it
    /// runs on the fallback.
    pub fn task(&self, id: &str) -> TaskHandle {
        TaskHandle {
            slot: self.clone(),
            target: Target::Primary,
            id: id.to_owned(),
            tool: UNNAMED_TASK_TOOL.to_owned(),
            cancel_on_drop: true,
        }
    }
}

/// A detached or attached call, with the slot's bearer token on an OAuth slot (fetched, or
/// renewed near its expiry, before the call); without OAuth, a 401 says what the server wants.
async fn call_task(
    slot: &SlotHandle,
    tool: &str,
    json: &[u8],
    on_progress: Option<ProgressObserver<'_>>,
    how: (Tasking<'_>, bool),
) -> Ended {
    if slot.inner.auth.is_none() {
        return match slot.call_as(tool, json, on_progress, None, how).await {
            (Ended::Done(r), challenge) => Ended::Done(slot.explain_401(r, challenge).await),
            (task, _) => task,
        };
    }
    let bearer = match crate::auth::slot::bearer_for(slot).await {
        Ok(b) => b,
        Err(e) => {
            return Ended::Done(match how.0 {
                // Following a task is not a second tool call: not metered as one.
                Tasking::Attach { .. } => {
                    ToolResult::local_failure(crate::run::redact_string(&e, &slot.secrets_now()))
                }
                _ => slot.failure(tool, &e),
            });
        }
    };
    slot.call_as(tool, json, on_progress, bearer.as_deref(), how)
        .await
        .0
}
