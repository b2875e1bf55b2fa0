//! The replies of the opening: a notification's 2xx, the era probe and `initialize`.

use super::*;

/// Accepts any 2xx (a notification's reply).
pub(crate) struct Accept;
impl OnMessage for Accept {
    fn on_message(&mut self, _msg: &[u8], _last: bool) -> Result<Verdict, Failure> {
        Ok(Verdict::Done)
    }
}

/// Handles the answer to the `server/discover` probe: a result naming a version we speak in
/// `supportedVersions` says modern; any other result, or a JSON-RPC error in a 2xx, says an
/// old-era server.
#[derive(Default)]
pub(crate) struct ProbeHandler {
    pub(crate) id: u64,
    /// `Some(true)`: modern; `Some(false)`: old era.
    pub(crate) modern: Option<bool>,
}

impl OnMessage for ProbeHandler {
    fn renumber(&mut self, id: u64) {
        self.id = id;
    }

    fn on_message(&mut self, msg: &[u8], last_chance: bool) -> Result<Verdict, Failure> {
        match find(msg, self.id, last_chance)? {
            Lookup::Ours(Outcome::Result(r)) => {
                self.modern = Some(crate::wire::era::discover_result_is_modern(r));
                Ok(Verdict::Done)
            }
            Lookup::Ours(Outcome::Error(_)) => {
                self.modern = Some(false);
                Ok(Verdict::Done)
            }
            Lookup::OtherResponse => Ok(Verdict::Hold),
            Lookup::Other(_) => Ok(Verdict::Continue),
        }
    }
}

pub(crate) use jsonrpc::FindError;

impl From<FindError> for Failure {
    fn from(e: FindError) -> Self {
        match e {
            FindError::Json(e) => Failure::Json(e),
            FindError::Rpc(e) => Failure::Rpc(e),
        }
    }
}

/// Parses one message and looks for the response to `id`; `last_chance` also takes a
/// response whose id is `null`.
pub(crate) fn find<'m>(msg: &'m [u8], id: u64, last_chance: bool) -> Result<Lookup<'m>, FindError> {
    find_in(Value::parse(msg, JsonLimits::default())?, id, last_chance)
}

/// [`find`] in a message already parsed.
pub(crate) fn find_in(
    value: Value<'_>,
    id: u64,
    last_chance: bool,
) -> Result<Lookup<'_>, FindError> {
    jsonrpc::look_up(value, id, last_chance)
}

pub(crate) use jsonrpc::Lookup;

/// Handles the reply to `initialize`.
#[derive(Default)]
pub(crate) struct InitHandler {
    pub(crate) id: u64,
    pub(crate) version: Option<Result<ProtocolVersion, Failure>>,
}
impl OnMessage for InitHandler {
    fn renumber(&mut self, id: u64) {
        self.id = id;
    }

    fn on_message(&mut self, msg: &[u8], last_chance: bool) -> Result<Verdict, Failure> {
        match find(msg, self.id, last_chance)? {
            Lookup::Ours(Outcome::Result(result)) => {
                // Only `protocolVersion` is read (as `parse_initialize_result` requires it:
                // a result that is no object has none); `serverInfo` is not looked up.
                let parsed = result
                    .get_str("protocolVersion")
                    .ok_or(Failure::Handshake(HandshakeError::BadResult))
                    .and_then(|version| {
                        let raw = version.raw();
                        ProtocolVersion::parse(raw).ok_or_else(|| {
                            let shown = core::str::from_utf8(raw).unwrap_or("?");
                            Failure::Handshake(HandshakeError::UnsupportedVersion(truncated(shown)))
                        })
                    });
                self.version = Some(parsed);
                Ok(Verdict::Done)
            }
            Lookup::Ours(Outcome::Error(err)) => {
                self.version = Some(Err(Failure::Handshake(HandshakeError::Refused {
                    code: err.code,
                    message: unescaped_detail(&err.message),
                })));
                Ok(Verdict::Done)
            }
            Lookup::OtherResponse => Ok(Verdict::Hold),
            Lookup::Other(_) => Ok(Verdict::Continue),
        }
    }
}

/// A server's message, unescaped, cut to [`DETAIL_BYTES`] with a marked cut.
pub(crate) fn unescaped_detail<const N: usize>(
    message: &crate::wire::json::JsonStr<'_>,
) -> String<N> {
    let mut out = StrSink::<N>::default();
    if message.unescape_into(&mut out).is_err() {
        // Cut: the whole characters that leave room for the mark, and the mark.
        mark_cut(&mut out);
    }
    truncated(out.as_str())
}
