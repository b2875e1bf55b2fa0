//! The one-shot [`redact`], the streaming [`Redactor`] and the [`RedactingSink`] built on it.

use super::rule::MIN_SECRET_LEN;
use super::search::{Anchors, Finders, Patterns, Run, Split, first_bytes, scan};
use crate::buf::{Overflow, Sink};

/// Bytes a [`Redactor`] made by [`Redactor::new`] can hold back between writes.
///
/// Secrets up to `DEFAULT_HOLD + 1` bytes (an RSA-4096 PEM key fits) are matched whole; longer
/// ones are matched as consecutive pieces of that length, which still removes every byte of
/// every whole occurrence (see [`Redactor::with_hold`]).
pub const DEFAULT_HOLD: usize = 4096;

/// Writes `text` to `out` with every secret removed (see the module docs for the exact rule).
///
/// One-shot; for text that arrives in pieces use [`Redactor`].
pub fn redact<S: AsRef<[u8]>>(
    text: &[u8],
    secrets: &[S],
    out: &mut impl Sink,
) -> Result<(), Overflow> {
    let pats = Patterns {
        secrets,
        piece: usize::MAX,
    };
    let (firsts, _) = first_bytes(&pats);
    let mut finders = Finders::new(&pats);
    finders.prepare(&pats, text.len());
    let whole = Split {
        head: &[],
        tail: text,
    };
    scan(
        &pats,
        &firsts,
        &finders,
        &whole,
        whole.len(),
        &mut Run::default(),
        out,
    )
}

/// A streaming redactor: feed text in any chunking with [`write`](Self::write), then
/// [`finish`](Self::finish); the output equals [`redact`] of the whole text.
///
/// It keeps back at most `longest secret - 1` bytes between writes (in its own `HOLD`-byte
/// array, no allocation). After an [`Overflow`] from the output sink it is poisoned: every later
/// call reports the same overflow, so a truncated text can never be stitched into one that
/// leaks a secret.
pub struct Redactor<'s, S, const HOLD: usize = DEFAULT_HOLD> {
    pub(super) pats: Patterns<'s, S>,
    firsts: Anchors,
    pub(super) finders: Finders<'s>,
    longest: usize,
    hold: heapless::Vec<u8, HOLD>,
    run: Run,
    failed: Option<Overflow>,
}

impl<'s, S: AsRef<[u8]>> Redactor<'s, S, DEFAULT_HOLD> {
    /// A redactor for `secrets` (those under [`MIN_SECRET_LEN`] bytes are ignored) with the
    /// default hold-back capacity [`DEFAULT_HOLD`].
    pub fn new(secrets: &'s [S]) -> Self {
        Self::with_hold(secrets)
    }
}

impl<'s, S: AsRef<[u8]>, const HOLD: usize> Redactor<'s, S, HOLD> {
    /// A redactor keeping back at most `HOLD` bytes (pick a small `HOLD` on the edge).
    ///
    /// A secret longer than `HOLD + 1` bytes is matched as consecutive pieces of `HOLD + 1`
    /// bytes: every byte of every whole occurrence is still removed, and a lone piece of such a
    /// secret (itself `HOLD + 1` bytes of secret material) is removed too.
    pub fn with_hold(secrets: &'s [S]) -> Self {
        let pats = Patterns {
            secrets,
            piece: HOLD.saturating_add(1).max(MIN_SECRET_LEN),
        };
        // Built per redactor: cheaper (about 650 instructions for ten secrets) than finding
        // the set in the thread's memo, which the finders and the packed searcher use.
        let (firsts, longest) = first_bytes(&pats);
        let finders = Finders::new(&pats);
        Redactor {
            pats,
            firsts,
            finders,
            longest,
            hold: heapless::Vec::new(),
            run: Run::default(),
            failed: None,
        }
    }

    /// Bytes currently held back (at most `longest secret - 1`).
    pub fn held(&self) -> usize {
        self.hold.len()
    }

    /// Forgets any held bytes and error, ready for the next text.
    pub fn reset(&mut self) {
        self.hold.clear();
        self.run = Run::default();
        self.failed = None;
    }

    /// Redacts the next `chunk` of text into `out`, keeping back only what a secret split at
    /// the end of `chunk` needs.
    pub fn write(&mut self, chunk: &[u8], out: &mut impl Sink) -> Result<(), Overflow> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        // The edge steps through one copy, whatever the sink (the host keeps its own per sink).
        #[cfg(not(feature = "std"))]
        let out = &mut (out as &mut dyn Sink);
        let r = self.step(chunk, out, false);
        if let Err(e) = r {
            self.failed = Some(e);
        }
        r
    }

    /// Ends the text: writes what was held back, redacted.
    pub fn finish(&mut self, out: &mut impl Sink) -> Result<(), Overflow> {
        self.finish_with(&[], out)
    }

    /// `write(last)` then `finish()` in one step: the held-back bytes and `last` are searched
    /// together, with nothing kept back.
    fn finish_with(&mut self, last: &[u8], out: &mut impl Sink) -> Result<(), Overflow> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        #[cfg(not(feature = "std"))]
        let out = &mut (out as &mut dyn Sink);
        let r = self.step(last, out, true);
        match r {
            Ok(()) => self.reset(),
            Err(e) => self.failed = Some(e),
        }
        r
    }

    /// Wraps `out` so that everything put into the wrapper is redacted on its way to `out`
    /// (e.g. for `content::flatten`). Call [`RedactingSink::finish`] at the end.
    pub fn sink<O: Sink>(&mut self, out: O) -> RedactingSink<'_, 's, S, O, HOLD> {
        RedactingSink {
            redactor: self,
            out,
            stage: heapless::Vec::new(),
        }
    }

    fn step(&mut self, chunk: &[u8], out: &mut impl Sink, end: bool) -> Result<(), Overflow> {
        self.finders.prepare(&self.pats, chunk.len());
        let text = Split {
            head: &self.hold,
            tail: chunk,
        };
        let total = text.len();
        let keep = if end {
            0
        } else {
            self.longest.saturating_sub(1).min(total)
        };
        let limit = total - keep;
        scan(
            &self.pats,
            &self.firsts,
            &self.finders,
            &text,
            limit,
            &mut self.run,
            out,
        )?;
        self.run.end = self.run.end.saturating_sub(limit);
        // Keep bytes limit..total: the tail of the hold (moved to its front), then of the chunk.
        let h = self.hold.len();
        let chunk_from = limit.saturating_sub(h);
        if limit >= h {
            self.hold.clear();
        } else if limit > 0 {
            self.hold.copy_within(limit..h, 0);
            self.hold.truncate(h - limit);
        }
        self.hold
            .extend_from_slice(chunk.get(chunk_from..).unwrap_or(&[]))
            .map_err(|_| Overflow {
                limit: HOLD,
                needed: keep,
            })?;
        Ok(())
    }
}

/// The redactor as the filter of a text flattened where its message lies.
#[cfg(feature = "std")]
impl<S: AsRef<[u8]>, const HOLD: usize> crate::wire::content::TextFilter for Redactor<'_, S, HOLD> {
    fn write(&mut self, bytes: &[u8], out: &mut impl Sink) -> Result<(), Overflow> {
        Redactor::write(self, bytes, out)
    }
    fn finish(&mut self, out: &mut impl Sink) -> Result<(), Overflow> {
        Redactor::finish(self, out)
    }
}

/// Bytes a [`RedactingSink`] gathers from small puts before redacting them in one write.
pub const STAGE: usize = 2048;

/// Puts at least this long skip a [`RedactingSink`]'s stage (on the host, whose unescaper
/// gathers its own 2 KiB blocks; on the edge only puts too big for the stage do).
const DIRECT_FROM: usize = if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
    STAGE / 2
} else {
    STAGE
};

/// A [`Sink`] that redacts everything put into it on the way to the wrapped sink.
///
/// Small puts (an unescaper's pieces between escapes) are gathered into a [`STAGE`]-byte
/// array and redacted together, so the per-write cost is paid per stage, not per piece. An
/// overflow of the wrapped sink may therefore surface on a later put or on
/// [`finish`](Self::finish).
pub struct RedactingSink<'r, 's, S, O, const HOLD: usize = DEFAULT_HOLD> {
    redactor: &'r mut Redactor<'s, S, HOLD>,
    out: O,
    stage: heapless::Vec<u8, STAGE>,
}

impl<S: AsRef<[u8]>, O: Sink, const HOLD: usize> RedactingSink<'_, '_, S, O, HOLD> {
    /// Flushes the staged and held-back bytes (redacted) and gives the wrapped sink back.
    pub fn finish(mut self) -> Result<O, Overflow> {
        // The last stage and the held-back bytes in one step (a small text is one step).
        let r = self.redactor.finish_with(&self.stage, &mut self.out);
        self.stage.clear();
        r?;
        Ok(self.out)
    }

    fn flush(&mut self) -> Result<(), Overflow> {
        if self.stage.is_empty() {
            return Ok(());
        }
        let r = self.redactor.write(&self.stage, &mut self.out);
        self.stage.clear();
        r
    }
}

impl<S: AsRef<[u8]>, O: Sink, const HOLD: usize> Sink for RedactingSink<'_, '_, S, O, HOLD> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
            && self.stage.is_empty()
            && bytes.len() >= DIRECT_FROM
        {
            // Already gathered (the host's unescaper): redact it as it is, no second copy.
            return self.redactor.write(bytes, &mut self.out);
        }
        if self.stage.len() + bytes.len() <= STAGE {
            // Cannot fail: it fits.
            let _ = self.stage.extend_from_slice(bytes);
            return Ok(());
        }
        self.flush()?;
        if bytes.len() < DIRECT_FROM {
            let _ = self.stage.extend_from_slice(bytes);
            return Ok(());
        }
        self.redactor.write(bytes, &mut self.out)
    }
    fn reserve(&mut self, additional: usize) {
        // Redaction changes the length little: pass the hint on.
        self.out.reserve(additional)
    }
}
