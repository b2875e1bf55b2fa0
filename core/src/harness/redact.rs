//! Redaction: which environment values are secrets of the run, and scrubbing them out of every
//! text the harness sees (tool text, error, raw reply) before it is metered or returned.
//!
//! This module owns the *rule* ([`is_secret_var`]), the collection ([`collect_run_secrets`]),
//! the one-shot [`redact`] and the streaming [`Redactor`] / [`RedactingSink`]. It does not read
//! the environment (the host hands it the variables) and it never allocates.
//!
//! # Which variables are secrets
//!
//! A variable's name is split into tokens on `_` and `-`, compared ASCII case-insensitively.
//! Its value is a secret when all of these hold:
//!
//! 1. **A token looks like a secret**: it is exactly one of `KEY`, `SECRET`, `SECRETS`, `TOKEN`,
//!    `PASSWORD`, `PASSWD`, `PASS`, `PWD`, `PASSPHRASE`, `CREDENTIAL`, `CREDENTIALS`, `PRIVATE`,
//!    `AUTH`, `APIKEY`, `COOKIE`; or it *ends* with one of the unambiguous words `PASSWORD`,
//!    `PASSWD`, `PASSPHRASE`, `SECRET`, `TOKEN`, `APIKEY`, `CREDENTIALS` (so `PGPASSWORD` and
//!    `GITHUBTOKEN` count, while `MONKEY`, `BYPASS` and `TOKENIZERS` do not).
//! 2. **The name does not end in an identifier**: the last token is none of `ID`, `IDS`, `URL`,
//!    `URI`, `ENDPOINT`, `HOST`, `HOSTNAME`, `PORT`, `ADDR`, `ADDRESS`, `DOMAIN`, `NAME`,
//!    `USER`, `USERNAME`, `EMAIL`, `ACCOUNT`, `FILE`, `PATH`, `DIR`, `SOCK`, `SOCKET`,
//!    `REGION`, `ARN`, `TYPE`, `MODE`, `METHOD`, `ALGORITHM`, `VERSION`, `ENABLED`,
//!    `DISABLED`, `TIMEOUT`, `TTL`, `EXPIRY`, `LENGTH`, `SIZE`, `COUNT`, `LIMIT`, `SCOPE`,
//!    `ISSUER`, `AUDIENCE`, `PROFILE`, `PROVIDER`, `FINGERPRINT` (so `AWS_ACCESS_KEY_ID`,
//!    `KB_ENDPOINT_URL`, `KEY_ID`, `PASSWORD_FILE` and `SSH_AUTH_SOCK` are left alone).
//! 3. **It is not public**: no token is `PUBLIC` or `PUBLISHABLE` (`SSH_PUBLIC_KEY`).
//! 4. **It is not the shell's working directory**: the names `PWD` and `OLDPWD` hold paths.
//! 5. **The value is real**: trimmed, it has at least 4 characters and is not a placeholder
//!    (case-insensitive): `disabled`, `enabled`, `none`, `null`, `nil`, `undefined`, `unset`,
//!    `false`, `true`, `yes`, `no`, `on`, `off`, `0`, `1`, `empty`, `changeme`, `password`,
//!    `secret`, `token`, `placeholder`, `dummy`, `example`, `redacted`, `n/a`.
//!
//! `SESSION` is deliberately *not* a secret word: `XDG_SESSION_TYPE=wayland` or
//! `XDG_SESSION_DESKTOP=ubuntu` would otherwise turn ordinary words of tool output into
//! `[REDACTED]`. Real session secrets carry a secret word anyway (`SESSION_TOKEN`,
//! `SESSION_SECRET`, `SESSION_KEY`, `SESSION_COOKIE`). The same reasoning keeps common words
//! (`password`, `changeme`) out as values: redaction must never scrub evidence, and a default
//! credential showing up in a tool's output *is* evidence.
//!
//! # How text is redacted
//!
//! Every byte covered by any occurrence of any secret is removed, and each maximal run of
//! covered bytes becomes one `[REDACTED]`. This is at least as strong as replacing "longest
//! first": overlapping or adjacent occurrences (`abcd` and `cdef` in `abcdef`) merge into one
//! marker instead of leaving a tail behind. Secrets shorter than [`MIN_SECRET_LEN`] bytes are
//! skipped, as the seed says; redaction is a last-chance scrub, not a design.
//!
//! The streaming [`Redactor`] holds back only `longest - 1` bytes between writes, so a secret
//! split across any chunk boundary is still caught. Candidate positions are found with `memchr3`
//! on each secret's *anchor*, its rarest byte among the first 16 (so a secret starting with a
//! common letter does not make every word a candidate); every input position is examined at
//! most once.
//!
//! On x86-64 (SSE2) and AArch64 (NEON) a [`Redactor`] also builds one `memchr` packed-pair
//! finder per pattern (at most [`MAX_FINDERS`]) on its first write of [`FINDERS_FROM`] bytes:
//! each new chunk is searched by every finder (a vectorised scan for two of the pattern's rarest
//! bytes, then a compare), and the matches, merged in order of start, decide the covered runs.
//! With the `std` feature (the host) a write of [`PACKED_FROM`] bytes builds instead one
//! packed searcher for all the patterns (aho-corasick's Teddy, leftmost-longest), so a chunk is
//! searched once whatever the number of secrets. Only starts inside the held-back bytes (a
//! pattern may continue into the chunk there) still go through the anchor search, which is also
//! the whole search for short texts, larger pattern sets and on the edge (no extra code or RAM
//! there). Every search finds every occurrence, so the output is the same.

use crate::buf::{Overflow, Sink};
use core::fmt;

/// What replaces each maximal run of secret bytes.
pub const MARKER: &str = "[REDACTED]";

/// Secrets shorter than this many bytes are never redacted (the seed's rule).
pub const MIN_SECRET_LEN: usize = 4;

/// Bytes a [`Redactor`] made by [`Redactor::new`] can hold back between writes.
///
/// Secrets up to `DEFAULT_HOLD + 1` bytes (an RSA-4096 PEM key fits) are matched whole; longer
/// ones are matched as consecutive pieces of that length, which still removes every byte of
/// every whole occurrence (see [`Redactor::with_hold`]).
pub const DEFAULT_HOLD: usize = 4096;

const SECRET_WORDS: &[&str] = &[
    "KEY",
    "SECRET",
    "SECRETS",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "PRIVATE",
    "AUTH",
    "APIKEY",
    "COOKIE",
];

const SECRET_SUFFIXES: &[&str] = &[
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "SECRET",
    "TOKEN",
    "APIKEY",
    "CREDENTIALS",
];

const IDENTIFIER_SUFFIXES: &[&str] = &[
    "ID",
    "IDS",
    "URL",
    "URI",
    "ENDPOINT",
    "HOST",
    "HOSTNAME",
    "PORT",
    "ADDR",
    "ADDRESS",
    "DOMAIN",
    "NAME",
    "USER",
    "USERNAME",
    "EMAIL",
    "ACCOUNT",
    "FILE",
    "PATH",
    "DIR",
    "SOCK",
    "SOCKET",
    "REGION",
    "ARN",
    "TYPE",
    "MODE",
    "METHOD",
    "ALGORITHM",
    "VERSION",
    "ENABLED",
    "DISABLED",
    "TIMEOUT",
    "TTL",
    "EXPIRY",
    "LENGTH",
    "SIZE",
    "COUNT",
    "LIMIT",
    "SCOPE",
    "ISSUER",
    "AUDIENCE",
    "PROFILE",
    "PROVIDER",
    "FINGERPRINT",
];

const PUBLIC_WORDS: &[&str] = &["PUBLIC", "PUBLISHABLE"];

const PLACEHOLDERS: &[&str] = &[
    "disabled",
    "enabled",
    "none",
    "null",
    "nil",
    "undefined",
    "unset",
    "false",
    "true",
    "yes",
    "no",
    "on",
    "off",
    "0",
    "1",
    "empty",
    "changeme",
    "password",
    "secret",
    "token",
    "placeholder",
    "dummy",
    "example",
    "redacted",
    "n/a",
];

fn tokens(name: &[u8]) -> impl Iterator<Item = &[u8]> {
    name.split(|&b| b == b'_' || b == b'-')
        .filter(|t| !t.is_empty())
}

fn in_list(token: &[u8], list: &[&str]) -> bool {
    list.iter()
        .any(|w| w.as_bytes().eq_ignore_ascii_case(token))
}

fn ends_with_ci(t: &[u8], suffix: &str) -> bool {
    let s = suffix.as_bytes();
    t.len() >= s.len()
        && t.get(t.len() - s.len()..)
            .is_some_and(|tail| tail.eq_ignore_ascii_case(s))
}

fn is_secret_token(token: &[u8]) -> bool {
    in_list(token, SECRET_WORDS) || SECRET_SUFFIXES.iter().any(|s| ends_with_ci(token, s))
}

/// Characters in `v`, counted leniently: every byte that does not continue a UTF-8 sequence
/// (so a value that is not UTF-8 still has a length).
fn char_count(v: &[u8]) -> usize {
    v.iter().filter(|&&b| b & 0xC0 != 0x80).count()
}

/// True when the variable `name=value` holds a secret of the run, by the rule in the module
/// docs: a secret-like name token, no identifier suffix, not public, and a real value of at
/// least 4 characters that is not a placeholder.
///
/// Names and values are bytes: an environment is not always UTF-8, and a value that is not
/// is still a secret to redact (as bytes).
pub fn is_secret_var(name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> bool {
    let (name, value) = (name.as_ref(), value.as_ref());
    if name.eq_ignore_ascii_case(b"PWD") || name.eq_ignore_ascii_case(b"OLDPWD") {
        return false;
    }
    if !tokens(name).any(is_secret_token) {
        return false;
    }
    if tokens(name).any(|t| in_list(t, PUBLIC_WORDS)) {
        return false;
    }
    if tokens(name)
        .last()
        .is_some_and(|t| in_list(t, IDENTIFIER_SUFFIXES))
    {
        return false;
    }
    let v = value.trim_ascii();
    if char_count(v) < MIN_SECRET_LEN {
        return false;
    }
    !in_list(v, PLACEHOLDERS)
}

/// The values among `(name, value)` pairs that are secrets of the run ([`is_secret_var`]).
///
/// An iterator adaptor, so the core allocates nothing. A host reads its environment as bytes
/// (`std::env::vars()` panics on a value that is not UTF-8):
/// `collect_run_secrets(std::env::vars_os().map(|(k, v)| (k.into_encoded_bytes(),
/// v.into_encoded_bytes())))`. Values are yielded as given (not trimmed).
pub fn collect_run_secrets<I, K, V>(vars: I) -> RunSecrets<I::IntoIter>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    RunSecrets {
        inner: vars.into_iter(),
    }
}

/// Iterator returned by [`collect_run_secrets`]: yields each secret value.
#[derive(Debug, Clone)]
pub struct RunSecrets<I> {
    inner: I,
}

impl<I, K, V> Iterator for RunSecrets<I>
where
    I: Iterator<Item = (K, V)>,
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    type Item = V;
    fn next(&mut self) -> Option<V> {
        self.inner
            .by_ref()
            .find(|(k, v)| is_secret_var(k.as_ref(), v.as_ref()))
            .map(|(_, v)| v)
    }
}

/// Prints `[REDACTED]` in `Debug` and `Display`: wrap header values and session ids in it
/// wherever a type holding them derives or implements `Debug`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Redacted<'a>(pub &'a str);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MARKER)
    }
}

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MARKER)
    }
}

/// Offsets within a pattern that an anchor byte may have (bits of a `u16`).
const ANCHOR_WINDOW: usize = 16;
/// `memchr3` groups of anchor values; more distinct values fall back to a table scan.
const GROUPS: usize = 4;
/// Distinct leading byte pairs searched a block at a time; more patterns use the anchors.
const PAIRS: usize = 16;
/// Positions tested at once for a leading pair (the compare loop vectorises).
const BLOCK: usize = 32;

/// How common a byte is in tool output (lower is rarer): anchors are the rarest bytes.
fn commonness(b: u8) -> u8 {
    match b {
        b'a'..=b'z' | b' ' | b'\n' => 9,
        b'0'..=b'9' => 8,
        b'-' | b'.' | b',' | b':' | b'/' | b'(' | b')' | b'"' | b'=' | b'\t' | b'\r' => 6,
        b'A'..=b'Z' => 5,
        0x80.. => 4,
        _ => 3,
    }
}

/// The anchor of a pattern: its rarest byte among the first [`ANCHOR_WINDOW`] (earliest on a
/// tie), as (offset, byte).
fn anchor_of(p: &[u8]) -> Option<(usize, u8)> {
    p.iter()
        .take(ANCHOR_WINDOW)
        .copied()
        .enumerate()
        .min_by_key(|&(i, b)| (commonness(b), i))
}

/// Where patterns can start: each pattern has one anchor (a rare byte at a small offset); a
/// position `s` is a candidate start when `s + o` holds an anchor byte `b` of offset `o`.
/// Anchor bytes are found with `memchr3` (one pass per group of three values).
#[derive(Clone)]
struct Anchors {
    /// Bit `o` of `offsets[b]`: some pattern has anchor byte `b` at offset `o`.
    offsets: [u16; 256],
    groups: [[u8; 3]; GROUPS],
    /// Distinct anchor values.
    count: usize,
    /// The distinct first two bytes of the patterns (unused slots repeat the first).
    pairs: [[u8; 2]; PAIRS],
    /// Distinct pairs seen; over [`PAIRS`] the anchors are used instead.
    npairs: usize,
    /// Bit `b % 64` of word `b / 64`: some pattern starts with byte `b`.
    first: [u64; 4],
}

impl Anchors {
    fn new() -> Self {
        Anchors {
            offsets: [0; 256],
            groups: [[0; 3]; GROUPS],
            count: 0,
            pairs: [[0; 2]; PAIRS],
            npairs: 0,
            first: [0; 4],
        }
    }

    fn add(&mut self, pattern: &[u8]) {
        if let [x, y, ..] = *pattern {
            if let Some(w) = self.first.get_mut(usize::from(x >> 6)) {
                *w |= 1 << (x & 63);
            }
            let known = self.pairs.iter().take(self.npairs).any(|&p| p == [x, y]);
            if !known {
                if self.npairs == 0 {
                    self.pairs = [[x, y]; PAIRS];
                } else if let Some(slot) = self.pairs.get_mut(self.npairs) {
                    *slot = [x, y];
                }
                self.npairs += 1;
            }
        }
    }

    /// Adds the pattern's anchor (only needed when there are too many leading pairs).
    fn add_anchor(&mut self, pattern: &[u8]) {
        let Some((o, b)) = anchor_of(pattern) else {
            return;
        };
        if let Some(bits) = self.offsets.get_mut(usize::from(b)) {
            if *bits == 0 {
                if let Some(group) = self.groups.get_mut(self.count / 3) {
                    // Unused slots repeat the group's first value.
                    if self.count.is_multiple_of(3) {
                        *group = [b; 3];
                    } else if let Some(slot) = group.get_mut(self.count % 3) {
                        *slot = b;
                    }
                }
                self.count += 1;
            }
            *bits |= 1 << o;
        }
    }

    /// True when the leading pairs are few enough to search by blocks.
    fn by_pairs(&self) -> bool {
        self.npairs <= PAIRS
    }

    /// True when some position `j < BLOCK` of `win` starts a leading pair.
    #[inline]
    fn block_has_pair(&self, win: &[u8; BLOCK + 1]) -> bool {
        let (l, r) = (win.split_at(BLOCK).0, win.split_at(1).1);
        // One lane per position, OR-ed over the pairs: the compares vectorise.
        let mut acc = [0u8; BLOCK];
        for &[x, y] in self.pairs.iter().take(self.npairs) {
            for ((a, &p), &q) in acc.iter_mut().zip(l).zip(r) {
                *a |= u8::from(p == x) & u8::from(q == y);
            }
        }
        acc.iter().fold(0, |h, &a| h | a) != 0
    }

    fn pair_at(&self, text: &Split<'_>, at: usize) -> bool {
        let Some(a) = text.byte(at) else {
            return false;
        };
        let starts = self
            .first
            .get(usize::from(a >> 6))
            .is_some_and(|w| w & (1 << (a & 63)) != 0);
        if !starts {
            return false;
        }
        match (Some(a), text.byte(at + 1)) {
            (Some(a), Some(b)) => self.pairs.iter().take(self.npairs).any(|&p| p == [a, b]),
            _ => false,
        }
    }

    fn offsets_of(&self, b: u8) -> u16 {
        self.offsets.get(usize::from(b)).copied().unwrap_or(0)
    }

    fn groups(&self) -> usize {
        if self.count > 3 * GROUPS {
            0
        } else {
            self.count.div_ceil(3)
        }
    }

    /// The first index of `hay` holding an anchor byte of group `g` (every anchor byte when
    /// there are too many values for the groups).
    fn find(&self, g: usize, hay: &[u8]) -> Option<usize> {
        if self.count > 3 * GROUPS {
            return hay.iter().position(|&x| self.offsets_of(x) != 0);
        }
        let [a, b, c] = self.groups.get(g).copied()?;
        memchr::memchr3(a, b, c, hay)
    }
}

/// A group's next anchor hit, cached so every group scans the text once.
#[derive(Clone, Copy)]
enum Next {
    Unknown,
    At(usize),
    Never,
}

/// The candidate starts of one scan, in increasing order, each once.
struct Candidates {
    /// Bit `i`: `base + i` is a candidate not yet handed out.
    pending: u32,
    base: usize,
    /// Anchor hits below this were found.
    scanned: usize,
    /// The next hit, found but not yet turned into starts.
    ahead: Option<usize>,
    groups: [Next; GROUPS],
    /// Hits are searched below this.
    hit_end: usize,
    /// Starts are below this.
    limit: usize,
}

impl Candidates {
    fn new(text_len: usize, limit: usize) -> Self {
        Candidates {
            pending: 0,
            base: 0,
            scanned: 0,
            ahead: None,
            groups: [Next::Unknown; GROUPS],
            hit_end: text_len.min(limit.saturating_add(ANCHOR_WINDOW - 1)),
            limit,
        }
    }

    /// The next anchor hit at or after `self.scanned`.
    fn find_hit(&mut self, anchors: &Anchors, text: &Split<'_>) -> Option<usize> {
        let from = self.scanned;
        if from >= self.hit_end {
            return None;
        }
        let n = anchors.groups();
        if n == 0 {
            return text.find(from, self.hit_end, |hay| anchors.find(0, hay));
        }
        let mut best: Option<usize> = None;
        for (g, next) in self.groups.iter_mut().enumerate().take(n) {
            let stale = match *next {
                Next::At(p) => p < from,
                Next::Unknown => true,
                Next::Never => false,
            };
            if stale {
                *next = match text.find(from, self.hit_end, |hay| anchors.find(g, hay)) {
                    Some(p) => Next::At(p),
                    None => Next::Never,
                };
            }
            if let Next::At(p) = *next {
                best = Some(best.map_or(p, |b| b.min(p)));
            }
        }
        best
    }

    /// The next start holding a leading pair: whole blocks of the tail without one are skipped.
    fn next_by_pairs(&mut self, anchors: &Anchors, text: &Split<'_>) -> Option<usize> {
        let h = text.head.len();
        let mut s = self.scanned;
        while s < self.limit {
            if s >= h && s + BLOCK <= self.limit {
                let win = text
                    .tail
                    .get(s - h..s - h + BLOCK + 1)
                    .and_then(|w| <&[u8; BLOCK + 1]>::try_from(w).ok());
                if let Some(win) = win
                    && !anchors.block_has_pair(win)
                {
                    s += BLOCK;
                    continue;
                }
            }
            if anchors.pair_at(text, s) {
                self.scanned = s + 1;
                return Some(s);
            }
            s += 1;
        }
        self.scanned = s;
        None
    }

    fn next(&mut self, anchors: &Anchors, text: &Split<'_>) -> Option<usize> {
        if anchors.by_pairs() {
            return self.next_by_pairs(anchors, text);
        }
        loop {
            if self.ahead.is_none()
                && let Some(h) = self.find_hit(anchors, text)
            {
                self.ahead = Some(h);
                self.scanned = h + 1;
            }
            let low =
                (self.pending != 0).then(|| self.base + self.pending.trailing_zeros() as usize);
            match (low, self.ahead) {
                // No later hit can give a start at or before `s`.
                (Some(s), ahead) if ahead.is_none_or(|h| s + ANCHOR_WINDOW <= h) => {
                    self.pending &= self.pending - 1;
                    return Some(s);
                }
                (_, Some(h)) => {
                    self.ahead = None;
                    // Every pending start is at least `h - (ANCHOR_WINDOW - 1)`.
                    let base = h.saturating_sub(ANCHOR_WINDOW - 1);
                    let shift = base - self.base;
                    self.pending = self.pending.checked_shr(shift as u32).unwrap_or(0);
                    self.base = base;
                    let offsets = text.byte(h).map_or(0, |b| anchors.offsets_of(b));
                    for o in 0..ANCHOR_WINDOW {
                        if offsets & (1 << o) != 0
                            && let Some(s) = h.checked_sub(o)
                            && s < self.limit
                        {
                            self.pending |= 1 << (s - base);
                        }
                    }
                }
                // (None, None); (Some, None) is taken by the first arm.
                _ => return None,
            }
        }
    }
}

/// The text as two parts: held-back bytes then the new chunk.
#[derive(Clone, Copy)]
struct Split<'a> {
    head: &'a [u8],
    tail: &'a [u8],
}

impl<'a> Split<'a> {
    fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    fn byte(&self, i: usize) -> Option<u8> {
        match i.checked_sub(self.head.len()) {
            None => self.head.get(i).copied(),
            Some(j) => self.tail.get(j).copied(),
        }
    }

    /// True when `pat` occurs at `at`.
    fn eq_at(&self, at: usize, pat: &[u8]) -> bool {
        let end = at.saturating_add(pat.len());
        if end > self.len() {
            return false;
        }
        let h = self.head.len();
        let in_head = self.head.get(at.min(h)..end.min(h)).unwrap_or(&[]);
        let in_tail = self
            .tail
            .get(at.saturating_sub(h)..end.saturating_sub(h))
            .unwrap_or(&[]);
        match pat.split_at_checked(in_head.len()) {
            Some((p1, p2)) => p1 == in_head && p2 == in_tail,
            None => false,
        }
    }

    /// Puts bytes `a..b` (possibly spanning both parts).
    fn put(&self, a: usize, b: usize, out: &mut impl Sink) -> Result<(), Overflow> {
        if a >= b {
            return Ok(());
        }
        let h = self.head.len();
        let p1 = self.head.get(a.min(h)..b.min(h)).unwrap_or(&[]);
        let p2 = self
            .tail
            .get(a.saturating_sub(h)..b.saturating_sub(h))
            .unwrap_or(&[]);
        if !p1.is_empty() {
            out.put(p1)?;
        }
        if !p2.is_empty() {
            out.put(p2)?;
        }
        Ok(())
    }

    /// The first index in `from..end` where `find` finds something in a part.
    fn find(
        &self,
        from: usize,
        end: usize,
        find: impl Fn(&[u8]) -> Option<usize>,
    ) -> Option<usize> {
        let h = self.head.len();
        if from < h {
            let part = self.head.get(from..end.min(h)).unwrap_or(&[]);
            if let Some(i) = find(part) {
                return Some(from + i);
            }
        }
        let start = from.max(h);
        if start >= end {
            return None;
        }
        let part = self.tail.get(start - h..end - h).unwrap_or(&[]);
        find(part).map(|i| start + i)
    }
}

/// The patterns of a secret set: each secret of at least [`MIN_SECRET_LEN`] bytes, and a secret
/// longer than `piece` as consecutive `piece`-byte pieces (the last one aligned to its end).
#[derive(Clone, Copy)]
struct Patterns<'s, S> {
    secrets: &'s [S],
    piece: usize,
}

impl<'s, S: AsRef<[u8]>> Patterns<'s, S> {
    fn for_each(&self, mut f: impl FnMut(&'s [u8])) {
        for s in self.secrets {
            let s = s.as_ref();
            if s.len() < MIN_SECRET_LEN {
                continue;
            }
            if s.len() <= self.piece {
                f(s);
                continue;
            }
            let mut i = 0;
            while i < s.len() {
                let start = i.min(s.len() - self.piece);
                if let Some(p) = s.get(start..start + self.piece) {
                    f(p);
                }
                i += self.piece;
            }
        }
    }

    /// The longest pattern occurring at `at`, 0 when none.
    fn longest_at(&self, text: &Split<'_>, at: usize) -> usize {
        #[cfg(test)]
        tests::EXAMINED.with(|c| c.set(c.get() + 1));
        // Patterns have at least MIN_SECRET_LEN bytes: compare the first two bytes and the
        // last one before the whole pattern, which rejects most candidates cheaply.
        let first = text.byte(at);
        let second = text.byte(at + 1);
        let mut best = 0;
        self.for_each(|p| {
            if p.len() > best
                && p.first().copied() == first
                && p.get(1).copied() == second
                && p.last().copied() == text.byte(at + p.len() - 1)
                && text.eq_at(at, p)
            {
                best = p.len();
            }
        });
        best
    }
}

/// The vector substring search of the target (a rare pair of the pattern's bytes, verified):
/// AVX2 when the CPU has it (memchr detects it when its `std` feature is on), else SSE2.
#[cfg(target_arch = "x86_64")]
enum PairFinder {
    Avx2(memchr::arch::x86_64::avx2::packedpair::Finder),
    Sse2(memchr::arch::x86_64::sse2::packedpair::Finder),
}

#[cfg(target_arch = "x86_64")]
impl PairFinder {
    fn new(p: &[u8]) -> Option<Self> {
        use memchr::arch::x86_64::{avx2, sse2};
        avx2::packedpair::Finder::new(p)
            .map(PairFinder::Avx2)
            .or_else(|| sse2::packedpair::Finder::new(p).map(PairFinder::Sse2))
    }

    fn min_haystack_len(&self) -> usize {
        match self {
            PairFinder::Avx2(f) => f.min_haystack_len(),
            PairFinder::Sse2(f) => f.min_haystack_len(),
        }
    }

    /// The first occurrence of `p` (the finder's pattern) in `hay`, at least
    /// [`min_haystack_len`](Self::min_haystack_len) bytes.
    fn find(&self, hay: &[u8], p: &[u8]) -> Option<usize> {
        match self {
            PairFinder::Avx2(f) => f.find(hay, p),
            PairFinder::Sse2(f) => f.find(hay, p),
        }
    }
}

#[cfg(target_arch = "aarch64")]
use memchr::arch::aarch64::neon::packedpair::Finder as PairFinder;

/// Patterns searched with the vector finders at most: a pattern set with more (many secrets, or long
/// secrets cut into many pieces) uses the anchor search alone.
pub const MAX_FINDERS: usize = 16;

/// One vector searcher per pattern (memchr's packed-pair finder, the core of its `memmem`,
/// which is cheap to build: a [`Redactor`] is made per reply), built once per redactor; `None`
/// when the set has more than [`MAX_FINDERS`] patterns. On targets without one (the edge) it is
/// empty and the anchor search does all the work.
///
/// With the `std` feature (the host) a big text is searched instead by one packed searcher for
/// all patterns ([`Packed`]), built on the first write of at least [`PACKED_FROM`] bytes.
struct Finders<'s> {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    list: Option<heapless::Vec<(PairFinder, &'s [u8]), MAX_FINDERS>>,
    /// The list was built (or found too big) once.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    tried: bool,
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    _none: core::marker::PhantomData<&'s [u8]>,
    #[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
    packed: Packed,
}

/// Writes at least this long make a redactor build its packed searcher (`std` feature): below
/// it, building (a few microseconds, a few allocations) would cost more than it saves.
pub const PACKED_FROM: usize = 1024;

/// The most held-back plus chunk bytes the packed searcher looks at for starts in the held-back
/// bytes (a stack copy); longer secrets leave those starts to the anchor search.
#[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
const HEAD_WINDOW: usize = 512;

/// Writes at least this long make a redactor build its per-pattern vector finders; shorter
/// texts are searched by the anchors alone.
pub const FINDERS_FROM: usize = 256;

/// aho-corasick's packed searcher (Teddy: SIMD over the first bytes of every pattern at once,
/// then a verify), leftmost-longest: one pass over a chunk for all the secrets instead of one
/// pass per pattern. Host only: it allocates, and picks SSSE3/AVX2 at run time through `std`.
#[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
enum Packed {
    /// Not built yet (no write was big enough).
    Untried,
    /// Built: the searcher and the longest pattern's length.
    Built(aho_corasick::packed::Searcher, usize),
    /// The set is not supported (too many patterns, no SIMD on this CPU): the finders run.
    Unavailable,
}

#[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
impl Packed {
    fn build<S: AsRef<[u8]>>(pats: &Patterns<'_, S>) -> Self {
        use aho_corasick::packed::{Config, MatchKind};
        let mut builder = Config::new()
            .match_kind(MatchKind::LeftmostLongest)
            .builder();
        let mut longest = 0;
        pats.for_each(|p| {
            builder.add(p);
            longest = longest.max(p.len());
        });
        match builder.build() {
            Some(searcher) if longest > 0 => Packed::Built(searcher, longest),
            _ => Packed::Unavailable,
        }
    }
}

impl<'s> Finders<'s> {
    /// No searcher yet: they are built by [`Finders::prepare`] when a write is big enough.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn new<S: AsRef<[u8]>>(_pats: &Patterns<'s, S>) -> Self {
        Finders {
            list: None,
            tried: false,
            #[cfg(feature = "std")]
            packed: Packed::Untried,
        }
    }

    /// Builds the searchers a write of `len` bytes is worth: the per-pattern finders from
    /// [`FINDERS_FROM`] bytes, the packed searcher (host) from [`PACKED_FROM`]. A short text
    /// (a small reply, an error line) is left to the anchor search, which costs nothing to
    /// set up.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn prepare<S: AsRef<[u8]>>(&mut self, pats: &Patterns<'s, S>, len: usize) {
        #[cfg(feature = "std")]
        {
            if len >= PACKED_FROM && matches!(self.packed, Packed::Untried) {
                self.packed = Packed::build(pats);
            }
            if matches!(self.packed, Packed::Built(..)) {
                return;
            }
        }
        if self.tried || len < FINDERS_FROM {
            return;
        }
        self.tried = true;
        let mut list = heapless::Vec::new();
        let mut fits = true;
        pats.for_each(|p| {
            fits &= PairFinder::new(p).is_some_and(|f| list.push((f, p)).is_ok());
        });
        self.list = fits.then_some(list);
    }

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fn prepare<S: AsRef<[u8]>>(&mut self, _pats: &Patterns<'s, S>, _len: usize) {}

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fn new<S: AsRef<[u8]>>(_pats: &Patterns<'s, S>) -> Self {
        Finders {
            _none: core::marker::PhantomData,
        }
    }

    /// True when the chunk is searched with the finders (starts in the hold use the anchors).
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn active(&self) -> bool {
        #[cfg(feature = "std")]
        if matches!(self.packed, Packed::Built(..)) {
            return true;
        }
        self.list.is_some()
    }

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fn active(&self) -> bool {
        false
    }

    /// Drops the finders, so that only the anchor search runs (tests compare both).
    #[cfg(test)]
    fn disable(&mut self) {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        {
            self.list = None;
            self.tried = true;
        }
        #[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            self.packed = Packed::Unavailable;
        }
    }

    /// Keeps the per-pattern finders but never builds the packed searcher (tests compare).
    #[cfg(test)]
    fn without_packed(&mut self) {
        #[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            self.packed = Packed::Unavailable;
        }
    }

    /// With the packed searcher (host), covers every match starting in the held-back bytes
    /// before `limit`, searching a copy of them and the first bytes of the chunk (when that
    /// fits the 512-byte window), and returns true; false leaves them to the anchor search.
    fn scan_head(
        &self,
        text: &Split<'_>,
        limit: usize,
        pos: &mut usize,
        run: &mut Run,
        out: &mut impl Sink,
    ) -> Result<bool, Overflow> {
        #[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
        if let Packed::Built(searcher, longest) = &self.packed {
            let h = text.head.len();
            let starts = limit.min(h);
            // Every match starting before `starts` lies in the first `starts + longest - 1`.
            let len = starts
                .saturating_add(longest.saturating_sub(1))
                .min(text.len());
            let mut window = [0u8; HEAD_WINDOW];
            let (Some(w), Some(from_tail)) = (
                window.get_mut(..len),
                text.tail.get(..len.saturating_sub(h)),
            ) else {
                return Ok(false);
            };
            let (a, b) = w.split_at_mut(h.min(len));
            a.copy_from_slice(text.head.get(..a.len()).unwrap_or(&[]));
            b.copy_from_slice(from_tail);
            let mut from = 0;
            while from < starts {
                // `from < starts <= len == w.len()`: the span is inside the window.
                let Some(m) = searcher.find_in(&*w, aho_corasick::Span::from(from..len)) else {
                    break;
                };
                if m.start() >= starts {
                    break;
                }
                cover(text, m.start(), m.len(), pos, run, out)?;
                from = m.start() + 1;
            }
            return Ok(true);
        }
        let _ = (text, limit, pos, run, out);
        Ok(false)
    }

    /// Covers every match starting in the chunk (`text.tail`) before `limit`, in order of start.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn scan_tail(
        &self,
        text: &Split<'_>,
        limit: usize,
        pos: &mut usize,
        run: &mut Run,
        out: &mut impl Sink,
    ) -> Result<(), Overflow> {
        #[cfg(feature = "std")]
        if let Packed::Built(searcher, longest) = &self.packed {
            return scan_packed(searcher, *longest, text, limit, pos, run, out);
        }
        let Some(list) = self.list.as_ref() else {
            return Ok(());
        };
        let h = text.head.len();
        let end = limit.saturating_sub(h);
        if end == 0 {
            return Ok(());
        }
        let tail = text.tail;
        // The first start at or after `from` and before `end` (the match may run past `end`).
        let find = |&(ref f, p): &(PairFinder, &[u8]), from: usize| -> Option<usize> {
            let stop = end
                .saturating_add(p.len().saturating_sub(1))
                .min(tail.len());
            let hay = tail.get(from..stop)?;
            let at = if hay.len() >= f.min_haystack_len() {
                f.find(hay, p)
            } else {
                // Fewer than a vector's width of starts: compare them directly.
                hay.windows(p.len()).position(|w| w == p)
            };
            at.map(|i| from + i)
        };
        // The next start of each finder's pattern not yet covered.
        let mut next = [None; MAX_FINDERS];
        for (slot, f) in next.iter_mut().zip(list) {
            *slot = find(f, 0);
        }
        loop {
            let mut best: Option<(usize, usize)> = None;
            for (slot, (_, p)) in next.iter().zip(list) {
                if let Some(s) = *slot {
                    let m = p.len();
                    if best.is_none_or(|(bs, bm)| s < bs || (s == bs && m > bm)) {
                        best = Some((s, m));
                    }
                }
            }
            let Some((s, m)) = best else {
                return Ok(());
            };
            cover(text, h + s, m, pos, run, out)?;
            for (slot, f) in next.iter_mut().zip(list) {
                if *slot == Some(s) {
                    *slot = find(f, s + 1);
                }
            }
        }
    }

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fn scan_tail(
        &self,
        _text: &Split<'_>,
        _limit: usize,
        _pos: &mut usize,
        _run: &mut Run,
        _out: &mut impl Sink,
    ) -> Result<(), Overflow> {
        Ok(())
    }
}

/// [`Finders::scan_tail`] with the packed searcher: every start in the chunk before `limit`
/// that begins an occurrence, in order, each with its longest pattern (leftmost-longest, then
/// searching again one byte on, so overlapping occurrences are all covered).
#[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
fn scan_packed(
    searcher: &aho_corasick::packed::Searcher,
    longest: usize,
    text: &Split<'_>,
    limit: usize,
    pos: &mut usize,
    run: &mut Run,
    out: &mut impl Sink,
) -> Result<(), Overflow> {
    let h = text.head.len();
    let tail = text.tail;
    let end = limit.saturating_sub(h).min(tail.len());
    // A match starting before `end` may run on up to `longest - 1` bytes past it.
    let stop = end
        .saturating_add(longest.saturating_sub(1))
        .min(tail.len());
    let Some(hay) = tail.get(..stop) else {
        return Ok(());
    };
    let mut from = 0;
    while from < end {
        // `from < end <= stop == hay.len()`: the span is inside the haystack.
        let Some(m) = searcher.find_in(hay, aho_corasick::Span::from(from..stop)) else {
            break;
        };
        if m.start() >= end {
            break;
        }
        cover(text, h + m.start(), m.len(), pos, run, out)?;
        from = m.start() + 1;
    }
    Ok(())
}

/// Records an occurrence of `m` bytes at `c` (starts come in increasing order): extends the
/// open run, or writes the uncovered bytes before it and a marker.
fn cover(
    text: &Split<'_>,
    c: usize,
    m: usize,
    pos: &mut usize,
    run: &mut Run,
    out: &mut impl Sink,
) -> Result<(), Overflow> {
    if run.open && c <= run.end {
        run.end = run.end.max(c + m);
        return Ok(());
    }
    let uncovered_from = if run.open { run.end.max(*pos) } else { *pos };
    text.put(uncovered_from, c, out)?;
    out.put(MARKER.as_bytes())?;
    *run = Run {
        open: true,
        end: c + m,
    };
    *pos = c;
    Ok(())
}

/// The covered run reaching the end of what was decided so far.
#[derive(Clone, Copy, Default)]
struct Run {
    /// A marker was written and covered bytes may still continue it.
    open: bool,
    /// End of the run, in the coordinates of the current text.
    end: usize,
}

/// Decides positions `0..limit` of `text`: writes uncovered bytes and markers, leaves the run
/// state for what follows. Matches may extend past `limit` (into bytes kept back).
fn scan<S: AsRef<[u8]>>(
    pats: &Patterns<'_, S>,
    anchors: &Anchors,
    finders: &Finders<'_>,
    text: &Split<'_>,
    limit: usize,
    run: &mut Run,
    out: &mut impl Sink,
) -> Result<(), Overflow> {
    // All bytes before `pos` are written or known covered.
    let mut pos = 0;
    // With finders, the anchors only look for starts in the held-back bytes.
    let anchor_limit = if finders.active() {
        limit.min(text.head.len())
    } else {
        limit
    };
    if !finders.scan_head(text, anchor_limit, &mut pos, run, out)? {
        let mut candidates = Candidates::new(text.len(), anchor_limit);
        while let Some(c) = candidates.next(anchors, text) {
            let m = pats.longest_at(text, c);
            if m == 0 {
                continue;
            }
            cover(text, c, m, &mut pos, run, out)?;
        }
    }
    if finders.active() {
        finders.scan_tail(text, limit, &mut pos, run, out)?;
    }
    if run.open {
        if run.end < limit {
            text.put(run.end.max(pos), limit, out)?;
            run.open = false;
        }
    } else {
        text.put(pos, limit, out)?;
    }
    Ok(())
}

fn first_bytes<S: AsRef<[u8]>>(pats: &Patterns<'_, S>) -> (Anchors, usize) {
    let mut anchors = Anchors::new();
    let mut longest = 0;
    pats.for_each(|p| {
        anchors.add(p);
        longest = longest.max(p.len());
    });
    if !anchors.by_pairs() {
        pats.for_each(|p| anchors.add_anchor(p));
    }
    (anchors, longest)
}

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
    pats: Patterns<'s, S>,
    firsts: Anchors,
    finders: Finders<'s>,
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

/// A form a secret takes inside JSON text, for [`write_json_form`].
///
/// A tool that returns JSON inside its text (a Kali-style `{"stdout": "…"}`) shows a secret
/// with a `"` or `\` (or a control character, or, for an encoder that writes ASCII only, a
/// non-ASCII character) escaped; the raw JSON-RPC reply around that text escapes it once more.
/// Each such form is one more pattern for the redactor when it differs from the secret: the
/// host adds them to the secret set ([`json_form_differs`]), so no form needs storage here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonForm {
    /// Escaped once, as most encoders write it: `"` `\` and the control characters only.
    Once,
    /// Escaped once, every non-ASCII character as `\uXXXX` (lower-case hex, surrogate pairs
    /// above U+FFFF), as Python's `json.dumps` writes by default.
    OnceAscii,
    /// [`JsonForm::Once`] escaped again (the JSON text inside a JSON string).
    Twice,
    /// [`JsonForm::OnceAscii`] escaped again.
    TwiceAscii,
}

impl JsonForm {
    /// Every form.
    pub const ALL: [JsonForm; 4] = [
        JsonForm::Once,
        JsonForm::OnceAscii,
        JsonForm::Twice,
        JsonForm::TwiceAscii,
    ];

    fn ascii(self) -> bool {
        matches!(self, JsonForm::OnceAscii | JsonForm::TwiceAscii)
    }
}

/// Whether `secret`'s `form` differs from the secret itself (else it is no new pattern).
pub fn json_form_differs(secret: &[u8], form: JsonForm) -> bool {
    secret
        .iter()
        .any(|&b| b == b'"' || b == b'\\' || b < 0x20 || (form.ascii() && b >= 0x80))
}

/// Writes `secret` in `form` to `out` (a byte that is not UTF-8 stays as it is).
pub fn write_json_form(secret: &[u8], form: JsonForm, out: &mut impl Sink) -> Result<(), Overflow> {
    let ascii = form.ascii();
    match form {
        JsonForm::Once | JsonForm::OnceAscii => escape_json(secret, ascii, out),
        JsonForm::Twice | JsonForm::TwiceAscii => {
            escape_json(secret, ascii, &mut Escaping { out, ascii })
        }
    }
}

/// A sink that JSON-escapes what is put into it on its way to `out`.
struct Escaping<'o, O> {
    out: &'o mut O,
    ascii: bool,
}

impl<O: Sink> Sink for Escaping<'_, O> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        escape_json(bytes, self.ascii, self.out)
    }
}

fn escape_json(s: &[u8], ascii: bool, out: &mut impl Sink) -> Result<(), Overflow> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let unit = |u: u16, out: &mut dyn FnMut(&[u8]) -> Result<(), Overflow>| {
        let h = |n: u16| HEX.get(usize::from(n & 0xf)).copied().unwrap_or(b'0');
        out(&[b'\\', b'u', h(u >> 12), h(u >> 8), h(u >> 4), h(u)])
    };
    let mut put = |b: &[u8]| out.put(b);
    for chunk in s.utf8_chunks() {
        for c in chunk.valid().chars() {
            let mut buf = [0u8; 4];
            match c {
                '"' => put(b"\\\""),
                '\\' => put(b"\\\\"),
                '\n' => put(b"\\n"),
                '\r' => put(b"\\r"),
                '\t' => put(b"\\t"),
                '\u{8}' => put(b"\\b"),
                '\u{c}' => put(b"\\f"),
                c if (c as u32) < 0x20 => unit(c as u16, &mut put),
                c if ascii && !c.is_ascii() => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units).iter() {
                        unit(*u, &mut put)?;
                    }
                    Ok(())
                }
                c => put(c.encode_utf8(&mut buf).as_bytes()),
            }?;
        }
        put(chunk.invalid())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Buf, SliceBuf};
    use proptest::prelude::*;
    use std::string::String;
    use std::vec::Vec;

    /// An uncapped sink for tests.
    #[derive(Default)]
    struct Out(Vec<u8>);
    impl Sink for Out {
        fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
            self.0.extend_from_slice(bytes);
            Ok(())
        }
    }

    fn once(text: &str, secrets: &[&str]) -> String {
        let mut out = Out::default();
        redact(text.as_bytes(), secrets, &mut out).unwrap();
        String::from_utf8(out.0).unwrap()
    }

    /// The reference: mark covered bytes, then collapse runs.
    fn reference(text: &[u8], secrets: &[Vec<u8>]) -> Vec<u8> {
        let mut covered = std::vec![false; text.len()];
        for s in secrets.iter().filter(|s| s.len() >= MIN_SECRET_LEN) {
            for i in 0..text.len() {
                if text[i..].starts_with(s) {
                    for c in &mut covered[i..i + s.len()] {
                        *c = true;
                    }
                }
            }
        }
        let mut out = Vec::new();
        for i in 0..text.len() {
            if !covered[i] {
                out.push(text[i]);
            } else if i == 0 || !covered[i - 1] {
                out.extend_from_slice(MARKER.as_bytes());
            }
        }
        out
    }

    fn streamed<const H: usize>(text: &[u8], secrets: &[Vec<u8>], cuts: &[usize]) -> Vec<u8> {
        streamed_by::<H>(text, secrets, cuts, true)
    }

    /// Streams with every searcher the target has; also says whether the packed one was built.
    fn streamed_packed<const H: usize>(
        text: &[u8],
        secrets: &[Vec<u8>],
        cuts: &[usize],
    ) -> (Vec<u8>, bool) {
        let mut r: Redactor<'_, Vec<u8>, H> = Redactor::with_hold(secrets);
        let mut out = Out::default();
        let mut at = 0;
        #[cfg_attr(not(feature = "std"), allow(unused_mut))]
        let mut built = false;
        for &c in cuts.iter().chain([&text.len()]) {
            let c = c.min(text.len()).max(at);
            r.write(&text[at..c], &mut out).unwrap();
            #[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
            {
                built |= matches!(r.finders.packed, Packed::Built(..));
            }
            at = c;
        }
        r.finish(&mut out).unwrap();
        (out.0, built)
    }

    /// Streams with or without the `memmem` finders (without: the anchor search alone).
    fn streamed_by<const H: usize>(
        text: &[u8],
        secrets: &[Vec<u8>],
        cuts: &[usize],
        finders: bool,
    ) -> Vec<u8> {
        let mut r: Redactor<'_, Vec<u8>, H> = Redactor::with_hold(secrets);
        if finders {
            // Build the per-pattern finders now, so that small writes use them too.
            let pats = Patterns {
                secrets,
                piece: r.pats.piece,
            };
            r.finders.prepare(&pats, FINDERS_FROM);
        } else {
            r.finders.disable();
            assert!(!r.finders.active());
        }
        let mut out = Out::default();
        let mut at = 0;
        for &c in cuts {
            let c = c.min(text.len()).max(at);
            r.write(&text[at..c], &mut out).unwrap();
            at = c;
        }
        r.write(&text[at..], &mut out).unwrap();
        r.finish(&mut out).unwrap();
        out.0
    }

    #[test]
    fn seed_cases_exactly_as_written() {
        let env = [
            ("MY_API_KEY", "sk-live-9f8e7d6c5b4a"),
            ("DB_PASSWORD", "hunter2-correct-horse"),
            ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE"),
            ("KB_ENDPOINT_URL", "https://kb.internal.example/api"),
            ("SHORT_TOKEN", "abc"),
            ("NVIDIA_API_KEY", "disabled"),
        ];
        let got: Vec<&str> = collect_run_secrets(env).collect();
        assert_eq!(got, ["sk-live-9f8e7d6c5b4a", "hunter2-correct-horse"]);
    }

    #[test]
    fn real_environment_cases() {
        let collected = [
            ("GITHUB_TOKEN", "ghp_abcdefghijklmnop"),
            ("OPENAI_API_KEY", "sk-proj-abcdef123456"),
            ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG"),
            ("PGPASSWORD", "pg-secret-value"),
            ("SSH_PRIVATE_KEY", "-----BEGIN OPENSSH PRIVATE KEY-----"),
            ("SESSION_TOKEN", "st-1234567890"),
            ("github-token", "lowercase-dashes"),
            ("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEBAaDH"),
            ("DOCKER_AUTH_CONFIG", "{\"auths\":{}}"),
            ("SLACK_WEBHOOK_SECRET", "whsec_abcdef"),
        ];
        for (k, v) in collected {
            assert!(is_secret_var(k, v), "{k} should be collected");
        }
        let left = [
            ("PATH", "/usr/local/bin:/usr/bin"),
            ("HOME", "/root"),
            ("TOKENIZERS_PARALLELISM", "false"),
            ("KEY_ID", "key-1234567"),
            ("PASSWORD_FILE", "/run/secrets/db"),
            ("PWD", "/work/wt/harness"),
            ("OLDPWD", "/work"),
            ("SSH_AUTH_SOCK", "/tmp/ssh-XXXX/agent.1"),
            ("SSH_PUBLIC_KEY", "ssh-ed25519 AAAAC3Nz"),
            ("XDG_SESSION_DESKTOP", "ubuntu"),
            ("MONKEY", "banana-bread"),
            ("DB_PASSWORD", "  NULL  "),
            ("DB_PASSWORD", "changeme"),
            ("API_TOKEN", ""),
            ("GIT_ASKPASS", "/usr/lib/git-core/git-gui--askpass"),
            ("KEYBOARD_LAYOUT", "us-intl"),
            ("SSH_PRIVATE_KEY_PATH", "/root/.ssh/id_ed25519"),
            ("AUTH_TOKEN_URL", "https://auth.example/token"),
            ("LANG", "C.UTF-8"),
        ];
        for (k, v) in left {
            assert!(!is_secret_var(k, v), "{k}={v} should be left alone");
        }
        let mut all: Vec<(&str, &str)> = collected.to_vec();
        all.extend(left);
        assert_eq!(collect_run_secrets(all).count(), collected.len());
    }

    #[test]
    fn a_value_that_is_not_utf8_is_still_a_secret() {
        // `FOO=$'caf\xe9'` panicked `std::env::vars()`; as bytes it is read, and a secret-named
        // one is collected and redacted as bytes.
        let env: Vec<(Vec<u8>, Vec<u8>)> = std::vec![
            (b"FOO".to_vec(), b"caf\xe9".to_vec()),
            (b"DB_PASSWORD".to_vec(), b"hunter\xff\xfe-2".to_vec()),
            (b"API_\xffTOKEN".to_vec(), b"\xe9\xe9\xe9".to_vec()),
        ];
        let got: Vec<Vec<u8>> = collect_run_secrets(env).collect();
        assert_eq!(got, [b"hunter\xff\xfe-2".to_vec()]);
        let mut out = Out::default();
        redact(b"pw=hunter\xff\xfe-2!", &got, &mut out).unwrap();
        assert_eq!(out.0, b"pw=[REDACTED]!");
    }

    #[test]
    fn collects_owned_strings() {
        let env: Vec<(String, String)> = std::vec![
            ("A_SECRET".into(), "s3cr3t-value".into()),
            ("LANG".into(), "C.UTF-8".into()),
        ];
        let got: Vec<String> = collect_run_secrets(env).collect();
        assert_eq!(got, ["s3cr3t-value"]);
    }

    #[test]
    fn ordinary_words_in_output_stay() {
        let env = [
            ("XDG_SESSION_TYPE", "wayland"),
            ("NVIDIA_API_KEY", "disabled"),
            ("DB_PASSWORD", "password"),
            ("USER", "root"),
        ];
        let secrets: Vec<&str> = collect_run_secrets(env).collect();
        let text = "22/tcp open ssh root login: password disabled on wayland";
        assert_eq!(once(text, &secrets), text);
    }

    #[test]
    fn replaces_and_merges() {
        assert_eq!(once("x=hunter22;", &["hunter22"]), "x=[REDACTED];");
        assert_eq!(once("hunter22hunter22", &["hunter22"]), "[REDACTED]");
        assert_eq!(once("abcdef!", &["abcd", "cdef"]), "[REDACTED]!");
        assert_eq!(once("abcdXabcd", &["abcd"]), "[REDACTED]X[REDACTED]");
        assert_eq!(once("key abc here", &["abc"]), "key abc here");
        assert_eq!(once("", &["abcd"]), "");
        assert_eq!(once("abcd", &[] as &[&str]), "abcd");
        // Longest first: the shorter secret inside a longer one leaves no tail.
        assert_eq!(
            once("tok-ABCDEFGH.", &["ABCD", "ABCDEFGH"]),
            "tok-[REDACTED]."
        );
    }

    #[test]
    fn split_across_every_boundary() {
        let secrets = [b"s3cr3t-v4lue".to_vec(), b"zz99".to_vec()];
        let text = b"before s3cr3t-v4lue mid zz99zz99 after s3cr3t-v4l";
        let want = reference(text, &secrets);
        for i in 0..=text.len() {
            for j in i..=text.len() {
                assert_eq!(
                    streamed::<64>(text, &secrets, &[i, j]),
                    want,
                    "cuts {i},{j}"
                );
            }
        }
        // Byte by byte.
        let cuts: Vec<usize> = (0..text.len()).collect();
        assert_eq!(streamed::<64>(text, &secrets, &cuts), want);
    }

    #[test]
    fn holds_back_only_longest_minus_one() {
        let secrets = ["0123456789"];
        let mut r = Redactor::new(&secrets);
        let mut out = Out::default();
        r.write(b"hello world, a long line of text", &mut out)
            .unwrap();
        assert_eq!(r.held(), 9);
        r.finish(&mut out).unwrap();
        assert_eq!(r.held(), 0);
        assert_eq!(out.0, b"hello world, a long line of text");
    }

    #[test]
    fn oversized_secret_is_matched_in_pieces() {
        let secret = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ".to_vec(); // 26 > HOLD + 1 = 9
        let secrets = [secret.clone()];
        let mut text = b"pre ".to_vec();
        text.extend_from_slice(&secret);
        text.extend_from_slice(b" post");
        for cut in 0..=text.len() {
            let got = streamed::<8>(&text, &secrets, &[cut]);
            assert_eq!(got, b"pre [REDACTED] post", "cut {cut}");
        }
        let cuts: Vec<usize> = (0..text.len()).collect();
        assert_eq!(
            streamed::<8>(&text, &secrets, &cuts),
            b"pre [REDACTED] post"
        );
    }

    #[test]
    fn redacting_sink_writes_through() {
        let secrets = ["tok_ABCDEFGH"];
        let mut r = Redactor::new(&secrets);
        let mut storage = [0u8; 64];
        let mut buf = SliceBuf::new(&mut storage);
        {
            let mut s = r.sink(&mut buf);
            s.put(b"auth: tok_AB").unwrap();
            s.put(b"CDEFGH done").unwrap();
            s.finish().unwrap();
        }
        assert_eq!(buf.bytes(), b"auth: [REDACTED] done");
    }

    #[test]
    fn overflow_poisons() {
        let secrets = ["abcd"];
        let mut r = Redactor::new(&secrets);
        let mut storage = [0u8; 4];
        let mut buf = SliceBuf::new(&mut storage);
        assert!(r.write(b"0123456789", &mut buf).is_err());
        assert!(r.write(b"x", &mut buf).is_err());
        assert!(r.finish(&mut buf).is_err());
        r.reset();
        let mut out = Out::default();
        r.write(b"ok", &mut out).unwrap();
        r.finish(&mut out).unwrap();
        assert_eq!(out.0, b"ok");
    }

    #[test]
    fn redacted_debug_and_display() {
        let v = Redacted("Bearer abc.def");
        assert_eq!(std::format!("{v:?} {v}"), "[REDACTED] [REDACTED]");
    }

    #[test]
    fn many_first_bytes_use_the_table() {
        let secrets = ["aaaa1", "bbbb2", "cccc3", "dddd4", "eeee5"];
        assert_eq!(
            once("x aaaa1 bbbb2 cccc3 dddd4 eeee5 y", &secrets),
            "x [REDACTED] [REDACTED] [REDACTED] [REDACTED] [REDACTED] y"
        );
    }

    #[test]
    fn sink_stages_small_puts_and_passes_large_ones() {
        // Puts of 1, 7, STAGE - 1, STAGE and 3 * STAGE bytes, in turn, with secrets across
        // every kind of boundary: the output equals the one-shot rule.
        let secrets = [b"ghp_secretTOKEN1".to_vec(), b"pass-word-22".to_vec()];
        let mut text = Vec::new();
        for i in 0..400 {
            text.extend_from_slice(format!("line {i} of output ").as_bytes());
            if i % 9 == 0 {
                text.extend_from_slice(&secrets[i % 2]);
            }
        }
        let mut want = Out::default();
        redact(&text, &secrets, &mut want).unwrap();
        let mut r = Redactor::new(&secrets);
        let mut sink = r.sink(Out::default());
        let sizes = [1, 7, STAGE - 1, STAGE, 3 * STAGE];
        let mut at = 0;
        for n in sizes.iter().cycle() {
            if at >= text.len() {
                break;
            }
            let end = (at + n).min(text.len());
            sink.put(&text[at..end]).unwrap();
            at = end;
        }
        assert_eq!(sink.finish().unwrap().0, want.0);
        // An overflow behind staged bytes is reported at the latest by `finish`.
        let mut storage = [0u8; 16];
        let mut r = Redactor::new(&secrets);
        let mut sink = r.sink(SliceBuf::new(&mut storage));
        let _ = sink.put(&text[..100]);
        assert!(sink.finish().is_err());
    }

    #[test]
    fn anchors_deep_in_the_secret_and_many_anchor_values() {
        // Anchors at offsets 0..15 (the rare byte is placed at each), and then more distinct
        // anchor values than the memchr3 groups hold (the table scan): whole, streamed byte by
        // byte, and cut every 7 bytes, the output equals the one-shot naive rule.
        let many = b"#!@$%^&*~|;?<>[]{}";
        // 1..=16 leading pairs take the pair search; 17 and 18 the anchors: 17 or 18 distinct
        // anchor values (the table scan), or two (memchr3 groups).
        for (count, rare) in [
            (1usize, &many[..]),
            (4, many),
            (13, many),
            (16, many),
            (17, many),
            (18, many),
            (18, b"#!"),
        ] {
            let secrets: Vec<Vec<u8>> = (0..count)
                .map(|i| {
                    let mut s = b"aKcretvalue_xyz0".to_vec();
                    s[0] = b'a' + i as u8;
                    s[i % ANCHOR_WINDOW] = rare[i % rare.len()];
                    s.extend_from_slice(format!("{i:02}").as_bytes());
                    s
                })
                .collect();
            let a = first_bytes(&Patterns {
                secrets: &secrets,
                piece: usize::MAX,
            })
            .0;
            assert_eq!(a.by_pairs(), count <= PAIRS, "{count} secrets");
            // Over MAX_FINDERS patterns the anchor search does all the work.
            let pats = Patterns {
                secrets: &secrets,
                piece: usize::MAX,
            };
            let mut f = Finders::new(&pats);
            assert!(!f.active(), "nothing is built before a big write");
            f.prepare(&pats, FINDERS_FROM);
            let simd = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));
            assert_eq!(f.active(), simd && count <= MAX_FINDERS, "{count} secrets");
            let mut text = b"lead ".to_vec();
            for (i, s) in secrets.iter().enumerate() {
                text.extend_from_slice(b"words ");
                text.extend_from_slice(s);
                if i % 2 == 0 {
                    // Adjacent occurrences merge into one marker.
                    text.extend_from_slice(s);
                }
                text.extend_from_slice(&s[..s.len() - 1]);
            }
            let whole = {
                let mut out = Out::default();
                redact(&text, &secrets, &mut out).unwrap();
                out.0
            };
            let mut want = String::from_utf8(text.clone()).unwrap();
            for s in &secrets {
                let s = String::from_utf8(s.clone()).unwrap();
                want = want.replace(&format!("{s}{s}"), MARKER).replace(&s, MARKER);
            }
            assert_eq!(String::from_utf8(whole).unwrap(), want, "{count} secrets");
            let bytewise: Vec<usize> = (0..text.len()).collect();
            let sevens: Vec<usize> = (0..text.len()).step_by(7).collect();
            assert_eq!(streamed::<64>(&text, &secrets, &bytewise), want.as_bytes());
            assert_eq!(streamed::<64>(&text, &secrets, &sevens), want.as_bytes());
        }
    }

    std::thread_local! {
        pub(super) static EXAMINED: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
    }

    #[test]
    fn every_position_is_examined_once() {
        // Every byte is a candidate (first byte of the secret); fed byte by byte, each position
        // must still be matched exactly once, not once per write.
        let secrets = [b"aaaaaaab".to_vec()];
        let text = std::vec![b'a'; 5_000];
        EXAMINED.with(|c| c.set(0));
        let cuts: Vec<usize> = (0..text.len()).collect();
        assert_eq!(streamed::<16>(&text, &secrets, &cuts), text);
        // The last byte has no second byte after it, so it cannot start a secret: every other
        // position is examined, once.
        assert_eq!(EXAMINED.with(|c| c.get()), text.len() - 1);
        // No first byte occurs: memchr skips everything, nothing is examined.
        EXAMINED.with(|c| c.set(0));
        let plain = "b".repeat(100_000);
        assert_eq!(once(&plain, &["zzzzzz", "yyyyyy"]), plain);
        assert_eq!(EXAMINED.with(|c| c.get()), 0);
    }

    // Alphabet disjoint from the marker's characters `[REDACT]`.
    fn text_strategy() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(proptest::sample::select(b"abcxyz01 \n".to_vec()), 0..200)
    }
    fn secret_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
        proptest::collection::vec(
            proptest::collection::vec(proptest::sample::select(b"abcxyz01".to_vec()), 1..9),
            0..5,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn streaming_equals_reference(
            text in text_strategy(),
            secrets in secret_strategy(),
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            // Plant secrets so matches are common.
            let mut text = text;
            for (i, s) in secrets.iter().enumerate() {
                let at = (i * 37) % (text.len() + 1);
                text.splice(at..at, s.iter().copied());
            }
            let mut cuts = cuts;
            cuts.sort_unstable();
            let want = reference(&text, &secrets);
            let mut whole = Out::default();
            redact(&text, &secrets, &mut whole).unwrap();
            prop_assert_eq!(&whole.0, &want);
            let got = streamed::<16>(&text, &secrets, &cuts);
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(&streamed_by::<16>(&text, &secrets, &cuts, false), &want);
            for s in secrets.iter().filter(|s| s.len() >= MIN_SECRET_LEN) {
                prop_assert!(!got.windows(s.len()).any(|w| w == s.as_slice()));
            }
        }

        #[test]
        fn text_without_secrets_is_unchanged(
            text in proptest::collection::vec(proptest::sample::select(b"abc \n".to_vec()), 0..300),
            secrets in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(b"xyz01".to_vec()), 4..9), 0..4),
            cuts in proptest::collection::vec(0usize..300, 0..8),
        ) {
            let mut cuts = cuts;
            cuts.sort_unstable();
            prop_assert_eq!(streamed::<16>(&text, &secrets, &cuts), text);
        }

        #[test]
        fn oversized_secrets_never_survive(
            text in text_strategy(),
            secrets in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(b"abcxyz01".to_vec()), 4..14), 1..4),
            cuts in proptest::collection::vec(0usize..250, 0..8),
        ) {
            // HOLD = 4: every secret over 5 bytes is matched in pieces.
            let mut text = text;
            for (i, s) in secrets.iter().enumerate() {
                let at = (i * 53) % (text.len() + 1);
                text.splice(at..at, s.iter().copied());
            }
            let mut cuts = cuts;
            cuts.sort_unstable();
            let got = streamed::<4>(&text, &secrets, &cuts);
            for s in &secrets {
                prop_assert!(!got.windows(s.len()).any(|w| w == s.as_slice()));
            }
        }

        /// Texts of a few KiB in big writes: the packed searcher (host) is built and finds
        /// exactly what the per-pattern finders and the reference find.
        #[test]
        fn packed_searcher_equals_finders_and_reference(
            text in text_strategy(),
            repeat in 4usize..24,
            secrets in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(b"abcxyz01".to_vec()), 4..12), 1..6),
            cuts in proptest::collection::vec(0usize..8000, 0..4),
        ) {
            let mut big = Vec::new();
            for i in 0..repeat {
                big.extend_from_slice(&text);
                let s = &secrets[i % secrets.len()];
                // Whole, and cut short: the tail must stay.
                big.extend_from_slice(if i % 3 == 2 { &s[..s.len() - 1] } else { s });
            }
            let mut cuts = cuts;
            cuts.sort_unstable();
            let want = reference(&big, &secrets);
            let (got, built) = streamed_packed::<64>(&big, &secrets, &cuts);
            prop_assert_eq!(&got, &want);
            let mut r: Redactor<'_, Vec<u8>, 64> = Redactor::with_hold(&secrets);
            r.finders.without_packed();
            let mut out = Out::default();
            r.write(&big, &mut out).unwrap();
            r.finish(&mut out).unwrap();
            prop_assert_eq!(&out.0, &want);
            let mut whole = Out::default();
            redact(&big, &secrets, &mut whole).unwrap();
            prop_assert_eq!(&whole.0, &want);
            // On the host the big writes did go through the packed searcher.
            let host = cfg!(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")));
            let big_write = cuts.iter().chain([&big.len()]).fold((0, false), |(at, seen), &c| {
                let c = c.min(big.len()).max(at);
                (c, seen || c - at >= PACKED_FROM)
            }).1;
            prop_assert_eq!(built, host && big_write);
        }

        #[test]
        fn byte_by_byte_equals_reference(text in text_strategy(), secrets in secret_strategy()) {
            let cuts: Vec<usize> = (0..text.len()).collect();
            prop_assert_eq!(streamed::<16>(&text, &secrets, &cuts), reference(&text, &secrets));
            prop_assert_eq!(
                streamed_by::<16>(&text, &secrets, &cuts, false),
                reference(&text, &secrets)
            );
        }
    }

    fn form(secret: &[u8], f: JsonForm) -> Vec<u8> {
        let mut out = Out::default();
        write_json_form(secret, f, &mut out).unwrap();
        out.0
    }

    /// A secret and every JSON form of it that differs (what the host hands the redactor).
    fn with_forms(secret: &[u8]) -> Vec<Vec<u8>> {
        let mut all = std::vec![secret.to_vec()];
        for f in JsonForm::ALL {
            let v = form(secret, f);
            if json_form_differs(secret, f) && !all.contains(&v) {
                all.push(v);
            }
        }
        all
    }

    #[test]
    fn json_forms_are_what_encoders_write() {
        let s = "pa\"ss\\word-12345";
        assert_eq!(form(s.as_bytes(), JsonForm::Once), br#"pa\"ss\\word-12345"#);
        assert_eq!(
            form(s.as_bytes(), JsonForm::Twice),
            br#"pa\\\"ss\\\\word-12345"#
        );
        assert_eq!(
            form("ä\n\u{1}😀".as_bytes(), JsonForm::OnceAscii),
            br"\u00e4\n\u0001\ud83d\ude00"
        );
        assert_eq!(
            form("ä\u{1}".as_bytes(), JsonForm::TwiceAscii),
            br"\\u00e4\\u0001"
        );
        assert_eq!(form("ä".as_bytes(), JsonForm::Once), "ä".as_bytes());
        assert!(!json_form_differs(b"plain-secret", JsonForm::TwiceAscii));
        assert!(!json_form_differs("pässword".as_bytes(), JsonForm::Once));
        assert!(json_form_differs(
            "pässword".as_bytes(),
            JsonForm::OnceAscii
        ));
        // Not UTF-8: the byte as it is, the rest escaped.
        assert_eq!(form(b"a\xff\"b", JsonForm::Once), b"a\xff\\\"b");
    }

    #[test]
    fn a_secret_in_tool_json_and_in_the_reply_around_it_is_redacted_at_every_split() {
        let secret = "pa\"ss\\word-12345";
        let secrets = with_forms(secret.as_bytes());
        // The tool's text (Kali style), then that text inside a JSON-RPC reply (a -v body).
        let tool_text = serde_json::json!({ "stdout": format!("x {secret} y") }).to_string();
        let reply = serde_json::json!({ "result": { "content": [{ "text": tool_text }],
            "structuredContent": { "stdout": secret } } })
        .to_string();
        for text in [tool_text.as_bytes(), reply.as_bytes()] {
            let whole = {
                let mut out = Out::default();
                redact(text, &secrets, &mut out).unwrap();
                out.0
            };
            for s in &secrets {
                assert!(
                    !whole.windows(s.len()).any(|w| w == &s[..]),
                    "{:?} left in {}",
                    String::from_utf8_lossy(s),
                    String::from_utf8_lossy(&whole)
                );
            }
            assert_eq!(whole, reference(text, &secrets));
            for cut in 0..=text.len() {
                let mut r = Redactor::new(&secrets);
                let mut out = Out::default();
                r.write(&text[..cut], &mut out).unwrap();
                r.write(&text[cut..], &mut out).unwrap();
                r.finish(&mut out).unwrap();
                assert_eq!(out.0, whole, "split at {cut}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// The `Once` form is what serde_json writes inside a string; every form of a secret
        /// is redacted in any chunking.
        #[test]
        fn json_forms_match_an_encoder_and_redact_in_any_chunking(
            secret in "[a\"\\\\\n\u{1}ä😀]{2,6}[a-z]{2}",
            lead in "[ a\"\\\\]{0,6}",
            cuts in proptest::collection::vec(0usize..80, 0..4),
        ) {
            let enc = serde_json::to_string(&secret).unwrap();
            prop_assert_eq!(form(secret.as_bytes(), JsonForm::Once), &enc.as_bytes()[1..enc.len() - 1]);
            let secrets = with_forms(secret.as_bytes());
            let mut text = lead.clone().into_bytes();
            for s in &secrets {
                text.extend_from_slice(s);
                text.extend_from_slice(b" | ");
            }
            let want = reference(&text, &secrets);
            let mut cuts = cuts;
            cuts.push(text.len());
            cuts.iter_mut().for_each(|c| *c = (*c).min(text.len()));
            cuts.sort_unstable();
            let mut r = Redactor::new(&secrets);
            let mut out = Out::default();
            let mut at = 0;
            for c in cuts {
                r.write(&text[at..c], &mut out).unwrap();
                at = c;
            }
            r.finish(&mut out).unwrap();
            prop_assert_eq!(&out.0, &want);
            for s in &secrets {
                prop_assert!(!out.0.windows(s.len()).any(|w| w == &s[..]));
            }
        }
    }
}
