//! A list's pages and a request's whole result.

use super::*;

/// Handles one page of a list: each item (and its redacted JSON) to the callback, the next
/// cursor kept.
pub(crate) struct ListHandler<'x, F: FnMut(Option<(Value<'_>, &[u8])>), B: Buf, Sec: AsRef<[u8]>> {
    id: u64,
    pub(crate) list: ListMethod,
    pub(crate) on_item: F,
    /// Scratch for each tool's redacted JSON.
    pub(crate) text: &'x mut B,
    secrets: &'x [Sec],
    /// The cursor: the one sent, until a page brings its `nextCursor` (unescaped). Kept in a
    /// caller buffer (a list has no error text), so a list op is no larger than a call.
    pub(crate) cursor: &'x mut B,
    pub(crate) has_next: bool,
    pub(crate) answer: Option<Result<(), ListError>>,
    /// The least `ttlMs` of the pages read in this attempt, an absent one 0 (2026 era: the
    /// whole list is fresh only while each of its pages is), handed to the slot when the last
    /// page of a 2026-era list is read.
    pub(crate) ttl_ms: Option<u64>,
}

impl<'x, F: FnMut(Option<(Value<'_>, &[u8])>), B: Buf, Sec: AsRef<[u8]>>
    ListHandler<'x, F, B, Sec>
{
    pub(crate) fn new(
        list: ListMethod,
        on_item: F,
        text: &'x mut B,
        cursor: &'x mut B,
        secrets: &'x [Sec],
    ) -> Self {
        ListHandler {
            id: 0,
            list,
            on_item,
            text,
            secrets,
            cursor,
            has_next: false,
            answer: None,
            ttl_ms: None,
        }
    }
}
impl<F: FnMut(Option<(Value<'_>, &[u8])>), B: Buf, Sec: AsRef<[u8]>> OnMessage
    for ListHandler<'_, F, B, Sec>
{
    fn renumber(&mut self, id: u64) {
        self.id = id;
    }

    fn on_message(&mut self, msg: &[u8], last_chance: bool) -> Result<Verdict, Failure> {
        let outcome = match find(msg, self.id, last_chance)? {
            Lookup::Ours(o) => o,
            Lookup::OtherResponse => return Ok(Verdict::Hold),
            Lookup::Other(_) => return Ok(Verdict::Continue),
        };
        match outcome {
            Outcome::Result(result) => {
                let page = jsonrpc::parse_page(result, self.list.built())?;
                // A page without a `ttlMs` (or with one that is not a count) is stale at once:
                // the 2026 spec's default of 0. (A 2025-era list has none; the op hands none.)
                let ttl = result.get("ttlMs").and_then(|t| t.as_u64()).unwrap_or(0);
                self.ttl_ms = Some(self.ttl_ms.map_or(ttl, |t| t.min(ttl)));
                for item in page.items {
                    // Everything of an item is returned, so it is redacted.
                    self.text.clear();
                    redact_into(self.secrets, item.raw(), &mut *self.text)
                        .map_err(|o| Failure::TooLarge(BufferName::Text, o))?;
                    (self.on_item)(Some((item, self.text.bytes())));
                }
                self.has_next = false;
                if let Some(next) = page.next_cursor {
                    let mut s = StrSink::<MAX_CURSOR>::default();
                    next.unescape_into(&mut s)
                        .map_err(|o| Failure::TooLarge(BufferName::Cursor, o))?;
                    self.cursor.clear();
                    self.cursor
                        .put(s.as_str().as_bytes())
                        .map_err(|o| Failure::TooLarge(BufferName::Cursor, o))?;
                    self.has_next = true;
                }
                self.answer = Some(Ok(()));
            }
            Outcome::Error(err) => {
                self.answer = Some(Err(ListError::Refused {
                    code: err.code,
                    message: unescaped_detail(&err.message),
                }));
            }
        }
        Ok(Verdict::Done)
    }
}

// Used by the async pump (`drive`) to write results.
#[cfg_attr(not(feature = "drive"), allow(dead_code))]
pub(crate) fn redact_list_error<Sec: AsRef<[u8]>>(secrets: &[Sec], mut e: ListError) -> ListError {
    redact_list_error_in(secrets, &mut e);
    e
}

/// [`redact_list_error`] where the error lies (no copy of it in and out: a list's future
/// holds it).
#[cfg_attr(not(feature = "drive"), allow(dead_code))]
pub(crate) fn redact_list_error_in<Sec: AsRef<[u8]>>(secrets: &[Sec], e: &mut ListError) {
    if let ListError::Refused { message, .. } = e {
        let mut out = StrSink::<DETAIL_BYTES>::default();
        let _ = redact_into(secrets, message.as_bytes(), &mut out);
        *message = truncated(out.as_str());
    }
}

/// Handles the reply to a [`jsonrpc::Request`]: checks its shape and keeps it, redacted.
pub(crate) struct RequestHandler<'x, B: Buf, Sec: AsRef<[u8]>> {
    id: u64,
    pub(crate) req: jsonrpc::Request<'x>,
    secrets: &'x [Sec],
    pub(crate) text: &'x mut B,
    pub(crate) answer: Option<Result<(), ListError>>,
}

impl<'x, B: Buf, Sec: AsRef<[u8]>> RequestHandler<'x, B, Sec> {
    pub(crate) fn new(req: jsonrpc::Request<'x>, secrets: &'x [Sec], text: &'x mut B) -> Self {
        RequestHandler {
            id: 0,
            req,
            secrets,
            text,
            answer: None,
        }
    }
}

impl<B: Buf, Sec: AsRef<[u8]>> OnMessage for RequestHandler<'_, B, Sec> {
    fn renumber(&mut self, id: u64) {
        self.id = id;
    }

    fn on_message(&mut self, msg: &[u8], last_chance: bool) -> Result<Verdict, Failure> {
        let outcome = match find(msg, self.id, last_chance)? {
            Lookup::Ours(o) => o,
            Lookup::OtherResponse => return Ok(Verdict::Hold),
            Lookup::Other(_) => return Ok(Verdict::Continue),
        };
        self.answer = Some(match outcome {
            Outcome::Result(result) => {
                jsonrpc::check_request_result(&self.req, result)?;
                self.text.clear();
                redact_into(self.secrets, result.raw(), &mut *self.text)
                    .map_err(|o| Failure::TooLarge(BufferName::Text, o))?;
                Ok(())
            }
            Outcome::Error(err) => Err(ListError::Refused {
                code: err.code,
                message: unescaped_detail(&err.message),
            }),
        });
        Ok(Verdict::Done)
    }
}
