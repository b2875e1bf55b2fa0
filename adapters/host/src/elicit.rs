//! A harness's own answers to a server that asks the user for input (elicitation): the
//! library's input handler. The core asks it for each elicitation (old era: `elicitation/create`
//! on a call's stream; 2026 era: each request of an `input_required` round, or of a task's)
//! and sends its answer; set with [`Options::on_elicit`](crate::Options::on_elicit). It goes
//! before [`Options::elicitation`](crate::Options::elicitation)'s fixed policy.

use std::fmt;
use std::sync::Arc;

use serde_json::{Value, json};
use verifi_mcp_core::buf::{Overflow, Sink};
use verifi_mcp_core::machine::ElicitHandler;

/// What the harness answers to one elicitation.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitAnswer {
    /// `accept`, with the content (an object whose members follow the requested schema).
    Accept(Value),
    /// `decline`.
    Decline,
    /// `cancel`.
    Cancel,
}

/// The core's form of a handler: the request's params in, the result object out.
type CoreFn = dyn Fn(verifi_mcp_core::wire::json::Value<'_>, &mut dyn Sink) -> Result<(), Overflow>
    + Send
    + Sync;

/// A harness's elicitation handler (cheap to clone).
///
/// ```
/// use verifi_mcp_host::{ElicitAnswer, OnElicit, Options};
/// use serde_json::json;
///
/// // Every question gets port 8443, whatever its message.
/// let o = Options::default().on_elicit(Some(OnElicit::new(|params| {
///     assert!(params.get("requestedSchema").is_some());
///     ElicitAnswer::Accept(json!({ "port": 8443, "ok": true }))
/// })));
/// assert!(o.on_elicit.is_some());
/// ```
#[derive(Clone)]
pub struct OnElicit(Arc<CoreFn>, bool);

impl OnElicit {
    /// A handler calling `f` with each elicitation's `params` (`message`, `requestedSchema`,
    /// `mode` …, as the server sent them).
    pub fn new(f: impl Fn(&Value) -> ElicitAnswer + Send + Sync + 'static) -> Self {
        OnElicit(
            Arc::new(move |params, out: &mut dyn Sink| {
                let params: Value = serde_json::from_slice(params.raw()).unwrap_or(Value::Null);
                let result = match f(&params) {
                    // URL mode: the person agreed to open the URL; there is no content.
                    ElicitAnswer::Accept(Value::Null) => json!({ "action": "accept" }),
                    ElicitAnswer::Accept(content) => {
                        json!({ "action": "accept", "content": content })
                    }
                    ElicitAnswer::Decline => json!({ "action": "decline" }),
                    ElicitAnswer::Cancel => json!({ "action": "cancel" }),
                };
                // A `Value` always serializes.
                out.put(&serde_json::to_vec(&result).unwrap_or_default())
            }),
            false,
        )
    }

    /// A handler that also takes URL-mode elicitations (`elicitation: {form: {}, url: {}}` is
    /// declared): for those, `params` has `mode: "url"`, the `url` a person must open, its
    /// `elicitationId` and `message`; answer `Accept(Value::Null)` once the person agreed to
    /// open it (the server goes on when they are done), or `Decline` / `Cancel`.
    pub fn with_urls(f: impl Fn(&Value) -> ElicitAnswer + Send + Sync + 'static) -> Self {
        OnElicit(OnElicit::new(f).0, true)
    }

    /// True when the handler takes URL-mode elicitations.
    pub fn takes_urls(&self) -> bool {
        self.1
    }

    /// The core's view of it, for a call's config.
    pub(crate) fn core(&self) -> ElicitHandler<'_> {
        ElicitHandler(&*self.0)
    }
}

impl fmt::Debug for OnElicit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnElicit(..)")
    }
}
