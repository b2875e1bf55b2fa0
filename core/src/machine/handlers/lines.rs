//! Error lines and the redacted texts of the machine: failures, refusals, progress.

use super::*;
use crate::buf::Words;

/// Ends a cut line with `…` (dropping what it takes to make room).
pub(crate) fn mark_cut<const N: usize>(line: &mut StrSink<N>) {
    line.mark_cut();
}

/// Hands one progress notification to the observer: numbers as written, the message
/// unescaped and redacted (cut to fit).
pub(crate) fn tell_progress<Sec: AsRef<[u8]>>(
    observer: ProgressObserver<'_>,
    p: &jsonrpc::Progress<'_>,
    secrets: &[Sec],
) {
    // A number's text is ASCII: the shared prefix reader, not a `from_utf8` of its own.
    fn number<'v>(v: &Value<'v>) -> &'v str {
        crate::buf::utf8_prefix(v.raw())
    }
    let total = p.total.as_ref().map(number);
    tell_update(
        observer,
        (number(&p.progress), total),
        p.message.as_ref(),
        secrets,
    );
}

/// What [`tell_progress`] and [`tell_status`] hand on: `progress` and `total` as written,
/// `message` unescaped and redacted. One copy for both in a build with tasks (its only
/// second caller); inlined into the one caller otherwise.
#[cfg_attr(feature = "tasks", inline(never))]
fn tell_update<Sec: AsRef<[u8]>>(
    observer: ProgressObserver<'_>,
    (progress, total): (&str, Option<&str>),
    message: Option<&crate::wire::json::JsonStr<'_>>,
    secrets: &[Sec],
) {
    let mut raw = StrSink::<MAX_PROGRESS_MESSAGE>::default();
    let mut clean = StrSink::<MAX_PROGRESS_MESSAGE>::default();
    if let Some(m) = message {
        // A longer message is cut; what fits is still redacted whole.
        let _ = m.unescape_into(&mut raw);
        let _ = redact_into(secrets, raw.as_str().as_bytes(), &mut clean);
    }
    (observer.0)(&ProgressUpdate {
        progress,
        total,
        message: message.is_some().then(|| clean.as_str()),
    });
}

/// Hands one server log message at or above `lowest` to the observer: data and logger
/// unescaped and redacted (cut to fit). Its buffers are on the stack only while a
/// notification is heard (the call handler's `hear`, itself out of the reply's frame).
pub(crate) fn tell_log<Sec: AsRef<[u8]>>(
    observer: LogObserver<'_>,
    lowest: LogLevel,
    note: &jsonrpc::LogNote<'_>,
    secrets: &[Sec],
) {
    // A level MCP does not name is taken as the lowest: kept only when everything is.
    let level = LogLevel::parse(note.level).unwrap_or(LogLevel::Debug);
    if level < lowest {
        return;
    }
    let mut data = StrSink::<MAX_LOG_MESSAGE>::default();
    let _ = match note.data.as_str() {
        Some(s) => s.unescape_into(&mut data),
        None => data.put(note.data.raw()),
    };
    let mut clean = StrSink::<MAX_LOG_MESSAGE>::default();
    let _ = redact_into(secrets, data.as_str().as_bytes(), &mut clean);
    let mut logger = StrSink::<64>::default();
    let mut clean_logger = StrSink::<64>::default();
    if let Some(l) = &note.logger {
        let _ = l.unescape_into(&mut logger);
        let _ = redact_into(secrets, logger.as_str().as_bytes(), &mut clean_logger);
    }
    (observer.0)(&LogMessage {
        level,
        logger: note.logger.is_some().then(|| clean_logger.as_str()),
        data: clean.as_str(),
    });
}

/// A task's `statusMessage` to a progress observer: `progress` is empty (no number).
pub(crate) fn tell_status<Sec: AsRef<[u8]>>(
    observer: ProgressObserver<'_>,
    m: &crate::wire::json::JsonStr<'_>,
    secrets: &[Sec],
) {
    tell_update(observer, ("", None), Some(m), secrets);
}

/// Redacts `text` whole into `out`.
pub(crate) fn redact_into<Sec: AsRef<[u8]>>(
    secrets: &[Sec],
    text: &[u8],
    out: &mut impl Sink,
) -> Result<(), crate::buf::Overflow> {
    // The edge redacts through one out-of-line copy, whatever the sink (the host keeps its
    // own per sink).
    #[cfg(not(feature = "std"))]
    let out = &mut (out as &mut dyn Sink);
    redact_whole(secrets, text, out)
}

/// [`redact_into`]'s body.
#[cfg_attr(not(feature = "std"), inline(never))]
fn redact_whole<Sec: AsRef<[u8]>>(
    secrets: &[Sec],
    text: &[u8],
    out: &mut impl Sink,
) -> Result<(), crate::buf::Overflow> {
    let mut r = Redactor::new(secrets);
    r.write(text, out)?;
    r.finish(out)
}

// Used by the async pump (`drive`) to write results.
#[cfg_attr(not(feature = "drive"), allow(dead_code))]
/// Writes a failure's message, redacted, into `out` (a cut ends in `…`).
pub(crate) fn write_failure<Sec: AsRef<[u8]>, B: Buf>(
    secrets: &[Sec],
    failure: &Failure,
    out: &mut B,
) {
    write_words(secrets, failure, out);
}

// Used by the async pump (`drive`) to write results.
#[cfg_attr(not(feature = "drive"), allow(dead_code))]
/// Writes a message said by its [`Words`] (no `core::fmt`), redacted, into `out`; a line
/// longer than `out` (or than [`ERROR_LINE_BYTES`]) is cut at a character boundary and ends
/// in `…`.
pub(crate) fn write_words<Sec: AsRef<[u8]>, B: Buf>(
    secrets: &[Sec],
    words: &dyn Words,
    out: &mut B,
) {
    let mut line = StrSink::<ERROR_LINE_BYTES>::default();
    if words.words(&mut line).is_err() {
        mark_cut(&mut line);
    }
    finish_line(secrets, &line, out);
}

/// The end of [`write_words`]: `line` redacted into `out`, cut to fit.
fn finish_line<Sec: AsRef<[u8]>, B: Buf>(
    secrets: &[Sec],
    line: &StrSink<ERROR_LINE_BYTES>,
    out: &mut B,
) {
    out.clear();
    if redact_into(secrets, line.as_str().as_bytes(), out).is_ok() {
        return;
    }
    out.clear();
    let mark = "…";
    let s = line.as_str();
    // The buffers' own cut to a character boundary (one copy).
    let end = crate::buf::char_floor(s.as_bytes(), out.limit().saturating_sub(mark.len()));
    // Redact what fits; a secret cut in half by the end is gone with the cut.
    let _ = redact_into(secrets, s.get(..end).unwrap_or("").as_bytes(), out);
    let _ = out.put(mark.as_bytes());
}

// Used by the async pump (`drive`) to write results.
#[cfg_attr(not(feature = "drive"), allow(dead_code))]
/// The buffer's text: its longest valid UTF-8 prefix (`StrSink`'s reading, one copy).
pub(crate) fn as_text<B: Buf>(b: &B) -> &str {
    crate::buf::utf8_prefix(b.bytes())
}
