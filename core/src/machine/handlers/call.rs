//! A tool call's reply: its answer, the server's requests on its stream, its task, progress
//! and log lines.

use super::*;
use crate::machine::tools::ToolRecord;
use crate::wire::json::JsonOut;

/// What one server's attempt at a tool call came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The tool ran; `is_error`: it reported an error (`isError: true`).
    Result {
        /// The tool's `isError`.
        is_error: bool,
    },
    /// The server refused the call with a JSON-RPC error.
    Refused {
        /// The JSON-RPC error code.
        code: i64,
        /// The error says the tool is unknown.
        unknown_tool: bool,
    },
}

/// Why a tool call's result could not be taken. Small on purpose: the handler holding it
/// lives in the call future across every read (a whole [`Failure`] would be larger).
#[derive(Debug, Clone)]
pub(crate) enum Untaken {
    /// The flattened text did not fit the text buffer.
    TextTooLarge(crate::buf::Overflow),
    /// The result is not a tool result object.
    NotAnObject,
    /// `resultType: "input_required"` and no input handler: what the server asked for.
    InputRequired(crate::wire::failure::Detail),
    /// A `resultType` the call did not ask for.
    ResultType(String<32>),
}

impl Untaken {
    /// The failure this says: what `Failure::from` gives of a clone, without the clone.
    pub(crate) fn failure(&self) -> Failure {
        match self {
            Untaken::TextTooLarge(o) => Failure::TooLarge(BufferName::Text, *o),
            Untaken::NotAnObject => Failure::Rpc(jsonrpc::RpcDecodeError::NotAnObject),
            Untaken::InputRequired(asked) => Failure::InputRequired(asked.clone()),
            // A task the server started though this build has no tasks (feature `tasks`).
            Untaken::ResultType(t) if !cfg!(feature = "tasks") && t == "task" => {
                Failure::NotBuilt {
                    capability: "tasks",
                    need: "the tool requires a task",
                }
            }
            Untaken::ResultType(t) => Failure::UnexpectedResultType(t.clone()),
        }
    }
}

impl From<Untaken> for Failure {
    fn from(u: Untaken) -> Self {
        u.failure()
    }
}

/// Handles the reply to `tools/call`: flattens and redacts the text, or formats the refusal.
pub(crate) struct CallHandler<'x, B: Buf, Sec: AsRef<[u8]>> {
    id: u64,
    secrets: &'x [Sec],
    pub(crate) text: &'x mut B,
    pub(crate) error: &'x mut B,
    raw: Option<&'x mut B>,
    pub(crate) answer: Option<Result<Answer, Untaken>>,
    progress: u32,
    /// The slot's config: its progress and log observers.
    cfg: &'x SlotConfig<'x>,
    /// The call sends a progress token (its id): someone listens for progress.
    pub(crate) progress_token: bool,
    /// Reading `tools/list` pages for the tools' `x-mcp-header` annotations (2026 era): the
    /// records go to `error` ([`ToolRecord`](crate::machine::tools::ToolRecord)s), the cursor
    /// to `text`.
    pub(crate) listing: bool,
    /// The listed page came and has a next one.
    pub(crate) list_page: Option<bool>,
    /// The call declared the tasks extension (a `resultType: "task"` reply is then taken).
    pub(crate) tasks: bool,
    /// The task this call became, once the server answered with one.
    pub(crate) task: Option<TaskRef>,
    /// Reading `tasks/get` replies: what the last one said, when it was not the result.
    pub(crate) polling: bool,
    pub(crate) task_status: Option<TaskStatus>,
    /// A request from the server on the call's stream, not yet answered.
    pub(crate) server_request: Option<ServerRequest>,
    /// Follows a task an earlier call became (no `tools/call` of its own).
    attached: bool,
    /// The call is a 2025-11-25 task (`params.task` sent; the result comes by `tasks/result`).
    pub(crate) session_task: bool,
    /// How elicitations are answered (none: no handler).
    elicitation: Option<Elicitation>,
    /// The caller's own elicitation handler (before the policy).
    elicit_with: Option<ElicitHandler<'x>>,
    /// A 2026 `input_required` round was answered: `text` holds the next request's
    /// `,"inputResponses":{…},"requestState":…` members; the call is sent again with them.
    pub(crate) input_ready: bool,
    /// The server said `notifications/tools/list_changed` on the call's stream (2025 era):
    /// the slot's tool list is stale (see [`SlotState::take_tools_list_changed`]).
    ///
    /// [`SlotState::take_tools_list_changed`]: super::SlotState::take_tools_list_changed
    pub(crate) tools_list_changed: bool,
}

/// A request a server sent on a call's stream (old era): `ping`, `elicitation/create`,
/// `sampling/createMessage`, `roots/list` … Without a handler for it the client still answers,
/// so the server does not hold the call waiting: `ping` with an empty result, an elicitation
/// with `decline`, anything else with JSON-RPC `-32601`.
#[derive(Debug, Clone)]
pub(crate) struct ServerRequest {
    /// The request's id as JSON text (a number, or a quoted string as written): bytes of
    /// the validated message, so UTF-8 already (kept as bytes: no check again).
    id: heapless::Vec<u8, 72>,
    kind: ServerAsks,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServerAsks {
    Ping,
    Elicitation,
    Other,
}

/// Writes the answer to an elicitation whose `params` are given, as a result object
/// (`{"action":"accept","content":{…}}`, `decline`, `cancel`): the caller's handler's when
/// there is one, else under `policy`: `decline`, `cancel`, or `accept` with the requested
/// schema's defaults (SEP-1034). Accept-defaults fills every field whose `default` fits the
/// field (`usable_default`: a string, integer, number, enum or boolean, or a multi-select
/// enum's strings); a request it cannot answer (a required field without such a default, no
/// requested schema, a URL-mode elicitation) is declined.
pub fn write_elicit_answer(
    out: &mut dyn Sink,
    params: Option<Value<'_>>,
    policy: (Option<Elicitation>, Option<ElicitHandler<'_>>),
) -> Result<(), Overflow> {
    let mut w = JsonOut::new(out);
    elicit_answer_to(&mut w, params, policy);
    w.done()
}

/// [`write_elicit_answer`] through the request writer (the one `answer_input` writes a round's
/// answers with): an overflow is kept there, and nothing after it is written.
fn elicit_answer_to(
    out: &mut JsonOut<&mut dyn Sink>,
    params: Option<Value<'_>>,
    (policy, handler): (Option<Elicitation>, Option<ElicitHandler<'_>>),
) {
    // A build without input (feature `input`) declines, as a client without a handler.
    if !cfg!(feature = "input") {
        return out.lit(b"{\"action\":\"decline\"}");
    }
    if let (Some(handler), Some(params)) = (handler, params) {
        return out.run(|out| (handler.0)(params, &mut **out));
    }
    match policy.unwrap_or(Elicitation::Decline) {
        Elicitation::Cancel => return out.lit(b"{\"action\":\"cancel\"}"),
        // The schema is read only to accept with its defaults.
        Elicitation::AcceptDefaults => {}
        Elicitation::Decline => return out.lit(b"{\"action\":\"decline\"}"),
    }
    let schema = params.and_then(|p| p.get("requestedSchema"));
    let properties = schema.and_then(|s| s.get("properties"));
    let url_mode = params
        .and_then(|p| p.get_str("mode"))
        .is_some_and(|m| m.eq_str("url"));
    let answerable = !url_mode
        && schema.is_some()
        && schema
            .and_then(|s| s.get("required"))
            .map(|r| r.elements())
            .unwrap_or_default()
            .all(|name| {
                let name = name.as_str();
                properties
                    .map(|p| p.members())
                    .unwrap_or_default()
                    .any(|(k, v)| {
                        name.is_some_and(|n| n.raw() == k.raw()) && usable_default(v).is_some()
                    })
            });
    if !answerable {
        return out.lit(b"{\"action\":\"decline\"}");
    }
    out.lit(b"{\"action\":\"accept\",\"content\":{");
    // The lead of the next member: no comma before the first.
    let mut lead: &[u8] = b"\"";
    for (name, prop) in properties.map(|p| p.members()).unwrap_or_default() {
        let Some(default) = usable_default(prop) else {
            continue;
        };
        out.lit(lead);
        lead = b",\"";
        out.lit(name.raw());
        out.lit(b"\":");
        out.json(default);
    }
    out.lit(b"}}")
}

/// A requested field's `default`, when it is one accept-defaults may send: a value of the
/// field's primitive type (`string`, and so an enum's; `integer`; `number`; `boolean`), or for
/// a multi-select enum (`array`) an array of strings; with no `type`, any string, number or
/// boolean. Anything else (an object, `null`, a value of another type) is no default.
pub(crate) fn usable_default<'v>(prop: Value<'v>) -> Option<Value<'v>> {
    use crate::wire::json::Kind;
    let default = prop.get("default")?;
    let ty = prop.get_str("type");
    let is = |name: &str| ty.is_some_and(|t| t.eq_str(name));
    let fits = match default.kind() {
        Kind::String => ty.is_none() || is("string"),
        Kind::Number if is("integer") => default.as_i64().is_some(),
        Kind::Number => ty.is_none() || is("number"),
        Kind::Bool => ty.is_none() || is("boolean"),
        Kind::Array => is("array") && default.elements().all(|e| e.kind() == Kind::String),
        Kind::Null | Kind::Object => false,
    };
    fits.then_some(default)
}

impl ServerRequest {
    pub(crate) fn new(
        id: jsonrpc::Id<'_>,
        method: &crate::wire::json::JsonStr<'_>,
    ) -> Option<Self> {
        let mut text = heapless::Vec::<u8, 72>::new();
        match id {
            jsonrpc::Id::Number(n) => text.extend_from_slice(n.raw()).ok()?,
            jsonrpc::Id::String(s) => {
                text.push(b'"').ok()?;
                text.extend_from_slice(s.raw()).ok()?;
                text.push(b'"').ok()?;
            }
            jsonrpc::Id::Null => return None,
        }
        let kind = match method.as_plain() {
            Some("ping") => ServerAsks::Ping,
            Some("elicitation/create") => ServerAsks::Elicitation,
            _ => ServerAsks::Other,
        };
        Some(ServerRequest { id: text, kind })
    }

    /// The answer, as a JSON-RPC response (`answer`: an elicitation's result object), through
    /// the request writer (an overflow is kept there: no branch per piece).
    pub(crate) fn write<S: Sink>(&self, out: &mut crate::wire::json::JsonOut<S>, answer: &[u8]) {
        out.lit(b"{\"jsonrpc\":\"2.0\",\"id\":");
        out.lit(&self.id);
        match self.kind {
            ServerAsks::Ping => out.lit(b",\"result\":{}}"),
            ServerAsks::Elicitation => {
                out.lit(b",\"result\":");
                out.lit(answer);
                out.lit(b"}");
            }
            ServerAsks::Other => out.lit(
                b",\"error\":{\"code\":-32601,\"message\":\"this client has no handler for it\"}}",
            ),
        }
    }
}

pub(crate) use crate::machine::config::MAX_TASK_ID;

/// A task a call became: its id and the server's poll interval.
#[derive(Debug, Clone)]
pub(crate) struct TaskRef {
    pub(crate) id: String<MAX_TASK_ID>,
    pub(crate) interval_ms: u64,
}

/// What a `tasks/get` said, when it was not the result.
#[derive(Debug, Clone)]
pub(crate) enum TaskStatus {
    /// Not done yet (`working`, or any other status that is not an end).
    Working,
    /// `cancelled`.
    Cancelled,
    /// `input_required`: what the server asked for.
    InputRequired(crate::wire::failure::Detail),
    /// `input_required`, answered under the slot's policy (`text` holds the
    /// `inputResponses` for `tasks/update`).
    InputAnswered,
    /// Ended, its result to be fetched with `tasks/result` (the 2025-11-25 form).
    ResultReady,
    /// A JSON-RPC error: the task is unknown or expired.
    Gone,
}

impl<'x, B: Buf, Sec: AsRef<[u8]>> CallHandler<'x, B, Sec> {
    /// The task this call became: always `None` in a build without tasks (feature `tasks`),
    /// which the compiler sees, so a task's branches fold away there.
    pub(crate) fn task(&self) -> Option<&TaskRef> {
        self.task.as_ref().filter(|_| cfg!(feature = "tasks"))
    }

    pub(crate) fn new(
        secrets: &'x [Sec],
        text: &'x mut B,
        error: &'x mut B,
        raw: Option<&'x mut B>,
        cfg: &'x SlotConfig<'x>,
    ) -> Self {
        CallHandler {
            id: 0,
            secrets,
            text,
            error,
            raw,
            answer: None,
            progress: 0,
            cfg,
            progress_token: cfg.progress_extends_to_ms.is_some()
                || cfg.progress_observer().is_some(),
            listing: false,
            list_page: None,
            tasks: cfg.capabilities.tasks_on(),
            task: None,
            polling: false,
            task_status: None,
            server_request: None,
            attached: false,
            session_task: false,
            elicitation: cfg.elicitation.filter(|_| cfg!(feature = "input")),
            elicit_with: cfg.elicit_with.filter(|_| cfg!(feature = "input")),
            input_ready: false,
            tools_list_changed: false,
        }
    }

    /// Answers a 2026 `input_required` result under the slot's policy: the next request's
    /// `inputResponses` (one answer per key of `inputRequests`) and the echoed `requestState`
    /// go to `text`. `false` (and `text` empty) when the call cannot answer: no handler, a
    /// request that is not an elicitation, requests not keyed by name, or no room.
    fn answer_input(&mut self, result: Value<'_>) -> bool {
        self.text.clear();
        if !cfg!(feature = "input") || (self.elicitation.is_none() && self.elicit_with.is_none()) {
            return false;
        }
        let policy = (self.elicitation, self.elicit_with);
        let requests = result.get("inputRequests");
        let state = result.get("requestState");
        let keyed = requests.is_some_and(|r| r.kind() == crate::wire::json::Kind::Object);
        let all_elicitations = requests
            .map(|r| r.members())
            .unwrap_or_default()
            .all(|(_, r)| {
                r.get_str("method")
                    .is_some_and(|m| m.eq_str("elicitation/create"))
            });
        if !(keyed || requests.is_none() && state.is_some()) || !all_elicitations {
            return false;
        }
        let mut out = JsonOut::new(&mut *self.text as &mut dyn Sink);
        out.lit(b",\"inputResponses\":{");
        // The lead of the next member: no comma before the first.
        let mut lead: &[u8] = b"\"";
        for (key, request) in requests.map(|r| r.members()).unwrap_or_default() {
            out.lit(lead);
            lead = b",\"";
            out.lit(key.raw());
            out.lit(b"\":");
            elicit_answer_to(&mut out, request.get("params"), policy);
        }
        out.lit(b"}");
        if let Some(state) = state {
            out.lit(b",\"requestState\":");
            out.json(state);
        }
        if out.done().is_err() {
            self.text.clear();
            return false;
        }
        self.input_ready = true;
        true
    }

    /// A task's poll interval from a task object (`pollIntervalMs`, absent: none given).
    fn interval_of(task: Value<'_>) -> u64 {
        task.get("pollIntervalMs")
            // The 2025-11-25 form's name for it.
            .or_else(|| task.get("pollInterval"))
            .and_then(|v| v.as_u64())
            .unwrap_or(1_000)
    }

    /// The tool's result (inline in a task's `result`, or the reply itself): flattened and
    /// redacted into `text`. Out of the reply's frame on the edge (less code there).
    #[cfg_attr(not(feature = "std"), inline(never))]
    fn take_result(&mut self, result: Value<'_>) -> Result<Answer, Untaken> {
        self.text.clear();
        let mut redactor = Redactor::new(self.secrets);
        let mut sink = redactor.sink(&mut *self.text);
        let f = content::flatten(result, &mut sink).map_err(|e| match e {
            content::ContentError::Overflow(o) => Untaken::TextTooLarge(o),
            _ => Untaken::NotAnObject,
        })?;
        sink.finish().map_err(Untaken::TextTooLarge)?;
        Ok(Answer::Result {
            is_error: f.is_error,
        })
    }

    /// A JSON-RPC error as the call's refusal: its line, redacted, into `error`. A `-32042`
    /// (URL elicitation required) gives its `data` as `urls`: the line then names each URL the
    /// server wants a person to open (`data.elicitations[].url`).
    fn take_refusal(
        &mut self,
        code: i64,
        message: &crate::wire::json::JsonStr<'_>,
        unknown_tool: bool,
        urls: Option<Value<'_>>,
    ) -> Answer {
        self.error.clear();
        let mut line = StrSink::<ERROR_LINE_BYTES>::default();
        // A message longer than the line is cut, and the cut marked; the code fits.
        let mut cut = crate::harness::result::write_rpc_error(&mut line, code, message).is_err();
        // (A build without input, feature `input`, names none: the loop folds away there.)
        if cfg!(feature = "input")
            && let Some(list) = urls.and_then(|d| d.get("elicitations"))
        {
            let urls = list.elements().filter_map(|e| e.get_str("url"));
            let mut first = true;
            for url in urls {
                let lead: &[u8] = if first {
                    b" (URL elicitation required: a person must open "
                } else {
                    b", "
                };
                first = false;
                cut |= line.put(lead).is_err() || url.unescape_into(&mut line).is_err();
            }
            if !first {
                cut |= line.put(b")").is_err();
            }
        }
        if cut {
            mark_cut(&mut line);
        }
        let _ = redact_into(self.secrets, line.as_str().as_bytes(), self.error);
        Answer::Refused { code, unknown_tool }
    }

    /// The task the call became (its task object): its id and poll interval, or (no usable
    /// id) a malformed answer.
    fn take_task(&mut self, result: Value<'_>) {
        let id = result
            .get_str("taskId")
            .and_then(|t| t.as_plain())
            .filter(|t| !t.is_empty() && MAX_TASK_ID.checked_sub(t.len()).is_some());
        match id {
            Some(id) => {
                self.task = Some(TaskRef {
                    id: truncated(id),
                    interval_ms: Self::interval_of(result),
                });
            }
            None => self.answer = Some(Err(Untaken::NotAnObject)),
        }
    }

    /// One `tasks/get` reply. Out of the reply's frame on the edge (less code there).
    #[cfg_attr(not(feature = "std"), inline(never))]
    fn on_task_poll(&mut self, outcome: Outcome<'_>) {
        let result = match outcome {
            Outcome::Error(_) => {
                self.task_status = Some(TaskStatus::Gone);
                return;
            }
            Outcome::Result(r) => r,
        };
        let status = result.get_str("status");
        let status = status.and_then(|s| s.as_plain()).unwrap_or("");
        if let Some(task) = self.task.as_mut() {
            task.interval_ms = Self::interval_of(result);
        }
        // The task's own words on how it goes (`statusMessage`) go to whoever watches
        // progress, redacted, as a progress update without a number.
        if let (Some(observer), Some(m)) = (
            self.cfg.progress_observer(),
            result.get_str("statusMessage"),
        ) {
            tell_status(observer, &m, self.secrets);
        }
        let inner = result.get("result");
        match status {
            // The 2025-11-25 form: the result (or the tool's error) comes by `tasks/result`.
            "completed" | "failed" if self.session_task && inner.is_none() => {
                self.task_status = Some(TaskStatus::ResultReady);
            }
            "completed" => {
                self.answer = Some(match inner {
                    Some(inner) => self.take_result(inner),
                    None => Err(Untaken::NotAnObject),
                });
            }
            "failed" => {
                let error = result.get("error");
                let code = error
                    .and_then(|e| e.get("code"))
                    .and_then(|c| c.as_i64())
                    .unwrap_or(-32603);
                let message = error.and_then(|e| e.get_str("message"));
                self.answer = Some(match message {
                    Some(m) => Ok(self.take_refusal(code, &m, false, None)),
                    None => Err(Untaken::NotAnObject),
                });
            }
            "cancelled" => self.task_status = Some(TaskStatus::Cancelled),
            "input_required" if self.answer_input(result) => {
                self.task_status = Some(TaskStatus::InputAnswered);
            }
            "input_required" => {
                self.task_status = Some(TaskStatus::InputRequired(input_asked(result)));
            }
            _ => self.task_status = Some(TaskStatus::Working),
        }
    }

    /// One `tools/list` page read for its `x-mcp-header` annotations. Out of line beside the
    /// task and input arms of the reply's handler (less code there); inline in a build without
    /// them, where the handler is small.
    #[cfg_attr(any(feature = "tasks", feature = "input"), inline(never))]
    fn on_list_page(&mut self, outcome: Outcome<'_>) -> Result<(), jsonrpc::RpcDecodeError> {
        let Outcome::Result(result) = outcome else {
            // A server that cannot list: the call goes on without annotations.
            self.list_page = Some(false);
            return Ok(());
        };
        let page = jsonrpc::parse_page(result, ListMethod::Tools)?;
        for tool in page.items {
            let Some(name) = jsonrpc::tool_name(tool) else {
                continue;
            };
            let schema = tool.get("inputSchema");
            let headers =
                schema.is_some_and(|s| crate::buf::find(s.raw(), b"\"x-mcp-header\"").is_some());
            // `annotations.idempotentHint`: a call of it may be sent again after a broken
            // stream (it does no harm twice).
            let idempotent = tool
                .get("annotations")
                .and_then(|a| a.get("idempotentHint"))
                .is_some_and(|v| v.raw() == b"true");
            // `execution.taskSupport: "required"` (2025-11-25): callable only as a task. Read
            // only for an old-era call (feature `era-2025`): a build without it never asks.
            let task_required = cfg!(feature = "era-2025")
                && tool
                    .get("execution")
                    .and_then(|e| e.get_str("taskSupport"))
                    .is_some_and(|t| t.eq_str("required"));
            if !headers && !idempotent && !task_required {
                continue;
            }
            // A record that does not fit is left out whole (the arena is capped).
            let mark = self.error.len();
            let written = (|| -> Result<(), Overflow> {
                ToolRecord::write_head(&mut *self.error, name.raw())?;
                let mut invalid = false;
                if let Some(schema) = schema.filter(|_| headers) {
                    let pairs = self.error.len();
                    // The pairs through the request writer: the first overflow is kept, and
                    // nothing is written after it.
                    let mut out = JsonOut::new(&mut *self.error as &mut dyn Sink);
                    // One walk: the pairs go as they are found, and are undone if the
                    // annotations are invalid (whatever overflow they met is then moot).
                    let found = crate::wire::era::header_params_to(
                        schema,
                        Some(&mut |p: crate::wire::era::HeaderParam<'_, '_>| {
                            out.run(|o| p.write_path(o));
                            out.lit(b"\0");
                            out.lit(p.header);
                            out.lit(b"\0");
                        }),
                    );
                    let written = out.done();
                    if found.is_err() {
                        self.error.truncate(pairs);
                        invalid = true;
                    } else {
                        written?;
                    }
                }
                ToolRecord::write_tail(&mut *self.error, idempotent, task_required, invalid)
            })();
            if written.is_err() {
                self.error.truncate(mark);
            }
        }
        let mut next = false;
        if let Some(cursor) = page.next_cursor {
            self.text.clear();
            next = cursor.unescape_into(&mut *self.text).is_ok();
        }
        self.list_page = Some(next);
        Ok(())
    }

    /// The call follows a task an earlier call became (an attached call).
    pub(crate) fn attach(&mut self, id: &str) {
        self.attached = true;
        self.task = Some(TaskRef {
            id: truncated(id),
            interval_ms: 1_000,
        });
    }

    /// A new attempt: nothing of the last one is kept.
    pub(crate) fn begin_attempt(&mut self) {
        // (Each of these only in a build that can set it: the others never read it either;
        // a task is read through `task`, only with tasks.)
        if cfg!(feature = "tasks") && !self.attached {
            self.task = None;
        }
        if cfg!(feature = "input") {
            self.input_ready = false;
        }
        if cfg!(feature = "era-2025") {
            self.session_task = false;
        }
        if cfg!(feature = "tasks") {
            self.task_status = None;
        }
        self.text.clear();
        self.error.clear();
        if let Some(raw) = self.raw.as_deref_mut() {
            raw.clear();
        }
        self.answer = None;
    }
}

impl<B: Buf, Sec: AsRef<[u8]>> OnMessage for CallHandler<'_, B, Sec> {
    fn progress_seen(&self) -> u32 {
        self.progress
    }

    fn renumber(&mut self, id: u64) {
        self.id = id;
    }

    fn on_message(&mut self, msg: &[u8], last_chance: bool) -> Result<Verdict, Failure> {
        self.handle(msg, last_chance, None)
    }

    /// On the host, a result is flattened where its message lies and the text takes the
    /// reply's storage (one copy of a big reply in memory, not two).
    #[cfg(feature = "std")]
    fn on_reply(
        &mut self,
        reply: &mut dyn Buf,
        len: usize,
        last_chance: bool,
    ) -> Result<Verdict, Failure> {
        let text_limit = self.text.limit();
        let in_place = len >= content::IN_PLACE_FROM
            && self.text.vec_buf().is_some()
            && reply.vec_buf().is_some_and(|r| r.limit() >= text_limit);
        let msg = reply.bytes().get(..len).unwrap_or(&[]);
        if !in_place {
            return self.handle(msg, last_chance, None);
        }
        let mut slot = Deferral::default();
        let limits = JsonLimits::default();
        // A big text is checked as it is written (`Value::parse_deferring`), when the result
        // is ours and its plan writes every string left unchecked; otherwise parsed whole.
        let (verdict, deferred) = if self.listing || self.polling || self.raw.is_some() {
            (self.handle(msg, last_chance, Some(&mut slot))?, None)
        } else {
            let (value, deferred) = Value::parse_deferring(msg, limits)?;
            // The lookups below cross the result and the big text at once.
            let value = value.knowing(deferred.ends());
            if deferred.is_empty() {
                (
                    self.handle_in(msg, value, last_chance, Some(&mut slot))?,
                    None,
                )
            } else {
                // Looked up once: the lookup reads no deferred string (ids, method names
                // and member names are short), and is used only if the plan covers them.
                let found = find_in(value, self.id, last_chance);
                slot.prebuilt = match found {
                    Ok(Lookup::Ours(Outcome::Result(r))) => content::InPlacePlan::new(msg, r)
                        .ok()
                        .flatten()
                        .filter(|p| p.covers(&deferred)),
                    _ => None,
                };
                if let (Some(_), Ok(found)) = (&slot.prebuilt, found) {
                    let verdict = self.handle_found(msg, found, Some(&mut slot))?;
                    if slot.prebuilt.is_some() {
                        // Not flattened (a task, an input round …): checked now, as `parse`.
                        for &(a, b) in deferred.spans() {
                            json::check_deferred(msg, a, b)?;
                        }
                    }
                    (verdict, Some(deferred))
                } else {
                    let value = Value::parse(msg, limits)?;
                    (
                        self.handle_in(msg, value, last_chance, Some(&mut slot))?,
                        None,
                    )
                }
            }
        };
        if let Some(plan) = slot.plan {
            self.answer = Some(self.take_in_place(plan, reply, deferred.as_ref())?);
        }
        Ok(verdict)
    }
}

/// Where the host's handler leaves a result to flatten in place (see `on_reply`): `prebuilt`
/// is the plan `on_reply` made for the message (taken, not made again), `plan` the one to run.
#[cfg(feature = "std")]
#[derive(Default)]
pub(crate) struct Deferral {
    prebuilt: Option<content::InPlacePlan>,
    plan: Option<content::InPlacePlan>,
}

#[cfg(feature = "std")]
pub(crate) type Defer<'d> = Option<&'d mut Deferral>;
#[cfg(not(feature = "std"))]
pub(crate) type Defer<'d> = Option<&'d mut core::convert::Infallible>;

impl<B: Buf, Sec: AsRef<[u8]>> CallHandler<'_, B, Sec> {
    /// [`InPlacePlan::run`](content::InPlacePlan::run) through the redactor.
    #[cfg(feature = "std")]
    /// `deferred`: the strings `Value::parse_deferring` left for the run to check; a bad one
    /// is the `Failure` the parse would have been.
    fn take_in_place(
        &mut self,
        plan: content::InPlacePlan,
        reply: &mut dyn Buf,
        deferred: Option<&json::Deferred>,
    ) -> Result<Result<Answer, Untaken>, Failure> {
        let mut redactor = Redactor::new(self.secrets);
        let (Some(text), Some(reply)) = (self.text.vec_buf(), reply.vec_buf()) else {
            return Ok(Err(Untaken::NotAnObject));
        };
        let none = json::Deferred::default();
        let run = plan.run_checking(reply, &mut redactor, text, deferred.unwrap_or(&none));
        Ok(match run.inspect_err(|_| text.clear())? {
            Ok(f) => Ok(Answer::Result {
                is_error: f.is_error,
            }),
            Err(content::ContentError::Overflow(o)) => Err(Untaken::TextTooLarge(o)),
            Err(_) => Err(Untaken::NotAnObject),
        })
    }

    /// The result, or (`defer` given) its in-place plan left in `defer`.
    #[cfg(feature = "std")]
    fn take_or_defer(
        &mut self,
        msg: &[u8],
        result: Value<'_>,
        defer: Defer<'_>,
    ) -> Option<Result<Answer, Untaken>> {
        if let Some(slot) = defer {
            self.text.clear();
            if let Some(plan) = slot.prebuilt.take() {
                slot.plan = Some(plan);
                return None;
            }
            match content::InPlacePlan::new(msg, result) {
                Ok(Some(plan)) => {
                    slot.plan = Some(plan);
                    return None;
                }
                Ok(None) => {}
                Err(_) => return Some(Err(Untaken::NotAnObject)),
            }
        }
        Some(self.take_result(result))
    }

    /// `on_message`, and on the host `on_reply` with somewhere to leave an in-place plan.
    #[inline(always)]
    fn handle(
        &mut self,
        msg: &[u8],
        last_chance: bool,
        defer: Defer<'_>,
    ) -> Result<Verdict, Failure> {
        // On the host the parse notes where the result ends: the id lookup and `resultType`
        // then cross it at once, not by walking it again.
        #[cfg(feature = "std")]
        {
            let (value, ends) = Value::parse_noting(msg, JsonLimits::default())?;
            self.handle_in(msg, value.knowing(&ends), last_chance, defer)
        }
        // The edge parses and looks up in the list handlers' one copy.
        #[cfg(not(feature = "std"))]
        self.handle_found(msg, find(msg, self.id, last_chance)?, defer)
    }

    /// [`handle`](Self::handle) of a message already parsed (`value`, from `msg`).
    #[cfg(feature = "std")]
    #[inline(always)]
    fn handle_in(
        &mut self,
        msg: &[u8],
        value: Value<'_>,
        last_chance: bool,
        defer: Defer<'_>,
    ) -> Result<Verdict, Failure> {
        self.handle_found(msg, find_in(value, self.id, last_chance)?, defer)
    }

    /// [`handle_in`](Self::handle_in) of a message already looked up. (Left to the compiler:
    /// minimal 16 B, full 8 B less than forced inline.)
    fn handle_found(
        &mut self,
        msg: &[u8],
        found: Lookup<'_>,
        defer: Defer<'_>,
    ) -> Result<Verdict, Failure> {
        let outcome = match found {
            Lookup::Ours(outcome) if self.listing => {
                self.on_list_page(outcome)?;
                return Ok(Verdict::Done);
            }
            Lookup::Ours(outcome) if cfg!(feature = "tasks") && self.polling => {
                self.on_task_poll(outcome);
                return Ok(Verdict::Done);
            }
            Lookup::Ours(outcome) => {
                // The round's answers were sent with the request this answers, and a server
                // that answered no longer waits for a request's answer (`text` is the result's
                // from here). (Only a build with input rounds has answers, only one with the
                // old era a server's request.)
                if cfg!(feature = "input") {
                    self.input_ready = false;
                }
                if cfg!(feature = "era-2025") {
                    self.server_request = None;
                }
                outcome
            }
            Lookup::OtherResponse => return Ok(Verdict::Hold),
            Lookup::Other(_) if self.listing => return Ok(Verdict::Continue),
            Lookup::Other(value) => {
                if let Ok(m) = jsonrpc::decode_message(value) {
                    self.hear_other(m);
                }
                return Ok(Verdict::Continue);
            }
        };
        // The annotation pairs the request was written with are done with.
        self.error.clear();
        if let Some(raw) = self.raw.as_deref_mut() {
            raw.clear();
            redact_into(self.secrets, msg, raw)
                .map_err(|o| Failure::TooLarge(BufferName::Raw, o))?;
        }
        // A task (the tasks extension): taken only when this call declared it; in the
        // 2025-11-25 form (`params.task` sent), the task object is wrapped in `task`.
        // `resultType` is looked up once (each lookup walks the result's members).
        let rtype = match outcome {
            Outcome::Result(result) => result_type(result),
            Outcome::Error(_) => None,
        };
        let task_object = match outcome {
            // Tasks only with their capability (feature `tasks`).
            Outcome::Result(result)
                if cfg!(feature = "tasks") && self.tasks && rtype == Some("task") =>
            {
                Some(result)
            }
            Outcome::Result(result) if cfg!(feature = "tasks") && self.session_task => {
                result.get("task")
            }
            _ => None,
        };
        if let Some(result) = task_object {
            self.take_task(result);
            return Ok(Verdict::Done);
        }
        // A round of input (2026 era): answered under the slot's policy, the call goes again.
        if let Outcome::Result(result) = outcome
            && rtype == Some("input_required")
            && self.answer_input(result)
        {
            return Ok(Verdict::Done);
        }
        self.answer = Some(match outcome {
            Outcome::Result(result) if let Some(t) = rtype.filter(|&t| t != "complete") => {
                Err(untaken_result_type(result, t))
            }
            #[cfg(feature = "std")]
            Outcome::Result(result) => match self.take_or_defer(msg, result, defer) {
                Some(answer) => answer,
                // Taken by `on_reply` once the message may be written over.
                None => return Ok(Verdict::Done),
            },
            #[cfg(not(feature = "std"))]
            Outcome::Result(result) => {
                let _ = defer;
                self.take_result(result)
            }
            Outcome::Error(err) => {
                // A URL elicitation's URLs are named (without input, feature `input`, it is a
                // refusal as any other error); `-32042` is no unknown tool.
                let urls = err
                    .data
                    .filter(|_| err.code == jsonrpc::URL_ELICITATION_REQUIRED);
                let unknown = jsonrpc::is_unknown_tool(&err);
                Ok(self.take_refusal(err.code, &err.message, unknown, urls))
            }
        });
        Ok(Verdict::Done)
    }
}

impl<B: Buf, Sec: AsRef<[u8]>> CallHandler<'_, B, Sec> {
    /// A server's request or notification on the call's stream.
    fn hear_other(&mut self, m: Message<'_>) {
        match m {
            // Only an old-era stream's requests are answered (feature `era-2025`): a 2026
            // server asks in an `input_required` result instead.
            Message::Request { .. } if !cfg!(feature = "era-2025") => {}
            Message::Request { id, method, params } => {
                // The server asks the client something on the call's stream: it must get an
                // answer or it may hold the call (`Op` sends it on the side).
                self.server_request = ServerRequest::new(id, &method);
                if self
                    .server_request
                    .as_ref()
                    .is_some_and(|r| r.kind == ServerAsks::Elicitation)
                {
                    // The answer waits in `text` (empty until the call's result) for `Op`
                    // to send; one that does not fit is a decline.
                    self.text.clear();
                    let policy = (self.elicitation, self.elicit_with);
                    if write_elicit_answer(&mut *self.text, params, policy).is_err() {
                        self.text.clear();
                        let _ = self.text.put(b"{\"action\":\"decline\"}");
                    }
                }
            }
            ref m => {
                self.hear(m);
            }
        }
    }

    /// A notification on the call's stream: progress (ours counted and told), a log line,
    /// the tool list changed.
    #[inline(never)]
    fn hear(&mut self, m: &Message<'_>) {
        let Message::Notification { method, params } = m else {
            return;
        };
        // A 2025-era signal (README: lists stay fresh): a build without that era keeps to a
        // list's `ttlMs`.
        if cfg!(feature = "era-2025") && method.eq_str("notifications/tools/list_changed") {
            self.tools_list_changed = true;
        }
        // The method is matched once; a progress notification (ours or another request's) is
        // no log line.
        let Some(params) = *params else {
            return;
        };
        if method.eq_str(jsonrpc::PROGRESS) {
            if let Some(p) = jsonrpc::progress_in(params)
                && p.token.as_u64() == Some(self.id)
            {
                self.progress = self.progress.wrapping_add(1);
                if let Some(observer) = self.cfg.progress_observer() {
                    tell_progress(observer, &p, self.secrets);
                }
            }
        } else if let Some((observer, lowest)) = self.cfg.log_observer()
            && method.eq_str(jsonrpc::LOG_MESSAGE)
            && let Some(note) = jsonrpc::log_in(params)
        {
            tell_log(observer, lowest, &note, self.secrets);
        }
    }
}

/// A 2026 result's `resultType` (missing means complete).
pub(crate) fn result_type<'v>(result: Value<'v>) -> Option<&'v str> {
    let t = result.get_str("resultType")?;
    Some(t.as_plain().unwrap_or("?"))
}

/// Why a result of another `resultType` (`rtype`, its [`result_type`]) than `complete` is
/// not the call's answer.
pub(crate) fn untaken_result_type(result: Value<'_>, rtype: &str) -> Untaken {
    match rtype {
        "input_required" => Untaken::InputRequired(input_asked(result)),
        other => Untaken::ResultType(truncated(other)),
    }
}

/// What a server asked for in `inputRequests`: each request's method (and message), cut to
/// fit.
pub(crate) fn input_asked(result: Value<'_>) -> crate::wire::failure::Detail {
    let mut asked = StrSink::<DETAIL_BYTES>::default();
    let mut first = true;
    if let Some(r) = result.get("inputRequests") {
        // An object of named requests, or an array of them (the other walk is empty).
        for (_, request) in r.members() {
            say_asked(&mut asked, &mut first, request);
        }
        for request in r.elements() {
            say_asked(&mut asked, &mut first, request);
        }
    }
    if first {
        let _ = asked.put(b"input");
    }
    truncated(asked.as_str())
}

/// One request of [`input_asked`]: its method (and message), after a `; ` but for the first.
#[inline(never)]
fn say_asked(asked: &mut StrSink<DETAIL_BYTES>, first: &mut bool, request: Value<'_>) {
    if !core::mem::take(first) {
        let _ = asked.put(b"; ");
    }
    if let Some(m) = request.get_str("method") {
        let _ = m.unescape_into(asked);
    }
    if let Some(msg) = request.get("params").and_then(|p| p.get_str("message")) {
        let _ = asked.put(b": ");
        let _ = msg.unescape_into(asked);
    }
}

#[cfg(all(test, feature = "std", not(feature = "input")))]
mod elicit_without_input_tests {
    use super::*;
    use crate::buf::VecBuf;
    use crate::wire::json::JsonLimits;

    #[test]
    fn a_build_without_input_declines_even_with_defaults_asked() {
        let params = br#"{"message":"m","requestedSchema":{"type":"object","properties":{"name":{"type":"string","default":"x"}}}}"#;
        let params = Value::parse(params, JsonLimits::default()).unwrap();
        let mut out = VecBuf::with_limit(256);
        write_elicit_answer(
            &mut out,
            Some(params),
            (Some(Elicitation::AcceptDefaults), None),
        )
        .unwrap();
        assert_eq!(out.bytes(), br#"{"action":"decline"}"#);
    }
}

#[cfg(all(test, feature = "std", feature = "input"))]
mod elicit_default_tests {
    use super::*;
    use crate::buf::VecBuf;
    use crate::wire::json::JsonLimits;

    /// The answer accept-defaults gives to an elicitation with `schema` as its requested one.
    fn accept_defaults(schema: &str) -> std::string::String {
        let params = std::format!(r#"{{"message":"m","requestedSchema":{schema}}}"#);
        let params = Value::parse(params.as_bytes(), JsonLimits::default()).unwrap();
        let mut out = VecBuf::with_limit(4096);
        write_elicit_answer(
            &mut out,
            Some(params),
            (Some(Elicitation::AcceptDefaults), None),
        )
        .unwrap();
        std::string::String::from_utf8(out.bytes().to_vec()).unwrap()
    }

    #[test]
    fn every_primitive_default_is_filled_and_accepted() {
        // The official SEP-1034 scenario's schema: string, integer, number, enum, boolean.
        let got = accept_defaults(
            r#"{"type":"object","properties":{
                "name":{"type":"string","default":"John Doe"},
                "age":{"type":"integer","default":30},
                "score":{"type":"number","default":95.5},
                "status":{"type":"string","enum":["active","inactive"],"default":"active"},
                "verified":{"type":"boolean","default":true},
                "tags":{"type":"array","items":{"enum":["a","b"]},"default":["a"]},
                "note":{"type":"string"}},"required":[]}"#,
        );
        assert_eq!(
            got,
            r#"{"action":"accept","content":{"name":"John Doe","age":30,"score":95.5,"status":"active","verified":true,"tags":["a"]}}"#
        );
    }

    #[test]
    fn a_default_that_does_not_fit_its_field_is_no_default() {
        // Not sent: an object, a null, a value of another type than the field's.
        let got = accept_defaults(
            r#"{"type":"object","properties":{
                "o":{"type":"object","default":{"x":1}},
                "n":{"type":"string","default":null},
                "i":{"type":"integer","default":2.5},
                "b":{"type":"boolean","default":"yes"},
                "ok":{"type":"boolean","default":false}}}"#,
        );
        assert_eq!(got, r#"{"action":"accept","content":{"ok":false}}"#);
        // A required field whose only default does not fit is a required field without one.
        let got = accept_defaults(
            r#"{"type":"object","properties":{"port":{"type":"integer","default":"443"}},
                "required":["port"]}"#,
        );
        assert_eq!(got, r#"{"action":"decline"}"#);
        let got = accept_defaults(
            r#"{"type":"object","properties":{"who":{"type":"string","default":null}},
                "required":["who"]}"#,
        );
        assert_eq!(got, r#"{"action":"decline"}"#);
    }
}
