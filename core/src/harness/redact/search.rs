//! The multi-pattern search engine: the anchors of every pattern, the per-pattern vector
//! finders and (host) the packed searcher, and the scan that decides which bytes are covered.

#[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
extern crate std;

use super::MARKER;
use super::rule::MIN_SECRET_LEN;
use crate::buf::{Overflow, Sink};

/// Offsets within a pattern that an anchor byte may have (bits of a `u16`).
pub(super) const ANCHOR_WINDOW: usize = 16;
/// `memchr3` groups of anchor values; more distinct values fall back to a table scan.
pub(super) const GROUPS: usize = 4;
/// Distinct leading byte pairs searched a block at a time; more patterns use the anchors.
pub(super) const PAIRS: usize = 16;
/// Positions tested at once for a leading pair (the compare loop vectorises).
pub(super) const BLOCK: usize = 32;

/// The host's search (`std`): leading pairs a block at a time, and over [`PAIRS`] of them the
/// anchors. The edge has one search, less code: each position's leading pair, and over
/// [`PAIRS`] of them each position whose byte starts a pattern (every start is examined at
/// most once either way, and the same matches are found).
const HOST_SEARCH: bool = cfg!(feature = "std");

/// The sizes of the tables only the host's search reads (the edge keeps them empty: less RAM
/// per redactor, nothing to clear).
const HOST_TABLE: usize = if HOST_SEARCH { 256 } else { 0 };
const HOST_GROUPS: usize = if HOST_SEARCH { GROUPS } else { 0 };
const HOST_PAIRS: usize = if HOST_SEARCH { PAIRS } else { 0 };

/// How common a byte is in tool output (lower is rarer): anchors are the rarest bytes.
pub(super) fn commonness(b: u8) -> u8 {
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
pub(super) fn anchor_of(p: &[u8]) -> Option<(usize, u8)> {
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
pub(super) struct Anchors {
    /// Bit `o` of `offsets[b]`: some pattern has anchor byte `b` at offset `o`.
    offsets: [u16; HOST_TABLE],
    groups: [[u8; 3]; HOST_GROUPS],
    /// Distinct anchor values.
    count: usize,
    /// The distinct first two bytes of the patterns (unused slots repeat the first).
    pairs: [[u8; 2]; HOST_PAIRS],
    /// Distinct pairs seen; over [`PAIRS`] the anchors are used instead.
    npairs: usize,
    /// Bit `b % 32` of word `b / 32`: some pattern starts with byte `b` (32-bit words: no
    /// 64-bit shift on the edge).
    first: [u32; 8],
}

impl Anchors {
    fn new() -> Self {
        Anchors {
            offsets: [0; HOST_TABLE],
            groups: [[0; 3]; HOST_GROUPS],
            count: 0,
            pairs: [[0; 2]; HOST_PAIRS],
            npairs: 0,
            first: [0; 8],
        }
    }

    fn add(&mut self, pattern: &[u8]) {
        if let [x, y, ..] = *pattern {
            if let Some(w) = self.first.get_mut(usize::from(x >> 5)) {
                *w |= 1 << (x & 31);
            }
            // The edge's one search looks at first bytes only (see [`Anchors::pair_at`]).
            if !HOST_SEARCH {
                return;
            }
            // Every slot compared (unused ones repeat the first pair): a loop without early
            // exit over a fixed 16 pairs, which vectorises.
            let key = u16::from_ne_bytes([x, y]);
            let known = self.npairs > 0
                && self
                    .pairs
                    .iter()
                    .fold(false, |k, &p| k | (u16::from_ne_bytes(p) == key));
            if !known {
                if self.npairs == 0 {
                    self.pairs = [[x, y]; HOST_PAIRS];
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
    pub(super) fn by_pairs(&self) -> bool {
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
            .get(usize::from(a >> 5))
            .is_some_and(|w| w & (1 << (a & 31)) != 0);
        if !starts {
            return false;
        }
        // The edge's one search (less code, no pair or anchor tables): the first byte decides,
        // for a position a second byte follows (every pattern has two).
        if !HOST_SEARCH {
            return text.byte(at + 1).is_some();
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
pub(super) enum Next {
    Unknown,
    At(usize),
    Never,
}

/// The candidate starts of one scan, in increasing order, each once.
pub(super) struct Candidates {
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
        // Whole blocks are skipped on the host (the compares vectorise); the edge looks at
        // each position's first byte (less code).
        let blocks = HOST_SEARCH && anchors.by_pairs();
        while s < self.limit {
            if blocks && s >= h && s + BLOCK <= self.limit {
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
        if anchors.by_pairs() || !HOST_SEARCH {
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
pub(super) struct Split<'a> {
    pub(super) head: &'a [u8],
    pub(super) tail: &'a [u8],
}

impl<'a> Split<'a> {
    pub(super) fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    fn byte(&self, i: usize) -> Option<u8> {
        match i.checked_sub(self.head.len()) {
            None => self.head.get(i).copied(),
            Some(j) => self.tail.get(j).copied(),
        }
    }

    /// Bytes `a..b` of the text, as the part in the held-back bytes and the part in the chunk
    /// (either may be empty).
    fn range(&self, a: usize, b: usize) -> (&'a [u8], &'a [u8]) {
        let h = self.head.len();
        let in_head = self.head.get(a.min(h)..b.min(h)).unwrap_or(&[]);
        let in_tail = self
            .tail
            .get(a.saturating_sub(h)..b.saturating_sub(h))
            .unwrap_or(&[]);
        (in_head, in_tail)
    }

    /// True when `pat` occurs at `at`.
    fn eq_at(&self, at: usize, pat: &[u8]) -> bool {
        let end = at.saturating_add(pat.len());
        if end > self.len() {
            return false;
        }
        let (in_head, in_tail) = self.range(at, end);
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
        let (p1, p2) = self.range(a, b);
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
pub(super) struct Patterns<'s, S> {
    pub(super) secrets: &'s [S],
    pub(super) piece: usize,
}

impl<'s, S: AsRef<[u8]>> Patterns<'s, S> {
    /// Calls `f` with every pattern, in order (the edge walks the set in one copy of the loop,
    /// the host in one per caller).
    fn for_each(&self, mut f: impl FnMut(&'s [u8])) {
        #[cfg(feature = "std")]
        self.walk(&mut f);
        #[cfg(not(feature = "std"))]
        self.walk_dyn(&mut f);
    }

    #[cfg(not(feature = "std"))]
    #[inline(never)]
    fn walk_dyn(&self, f: &mut dyn FnMut(&'s [u8])) {
        self.walk(f)
    }

    #[inline(always)]
    fn walk<F: FnMut(&'s [u8]) + ?Sized>(&self, f: &mut F) {
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
        super::tests::EXAMINED.with(|c| c.set(c.get() + 1));
        // Patterns have at least MIN_SECRET_LEN bytes: compare the first two bytes and the
        // last one before the whole pattern, which rejects most candidates cheaply.
        // (The edge compares at once: less code.)
        let (first, second) = if HOST_SEARCH {
            (text.byte(at), text.byte(at + 1))
        } else {
            (None, None)
        };
        let mut best = 0;
        self.for_each(|p| {
            let cheap_reject = HOST_SEARCH
                && (p.first().copied() != first
                    || p.get(1).copied() != second
                    || p.last().copied() != text.byte(at + p.len() - 1));
            if p.len() > best && !cheap_reject && text.eq_at(at, p) {
                best = p.len();
            }
        });
        best
    }
}

/// The vector substring search of the target (a rare pair of the pattern's bytes, verified):
/// AVX2 when the CPU has it (memchr detects it when its `std` feature is on), else SSE2.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) enum PairFinder {
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
pub(super) struct Finders<'s> {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    list: Option<heapless::Vec<(PairFinder, &'s [u8]), MAX_FINDERS>>,
    /// The list was built (or found too big) once.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    tried: bool,
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    _none: core::marker::PhantomData<&'s [u8]>,
    #[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
    pub(super) packed: Packed,
}

/// Writes at least this long make a redactor build its packed searcher (`std` feature): below
/// it, building (a few microseconds, a few allocations) would cost more than it saves.
pub const PACKED_FROM: usize = 1024;

/// The most held-back plus chunk bytes the packed searcher looks at for starts in the held-back
/// bytes (a stack copy); longer secrets leave those starts to the anchor search.
#[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) const HEAD_WINDOW: usize = 512;

/// Writes at least this long make a redactor build its per-pattern vector finders; shorter
/// texts are searched by the anchors alone.
pub const FINDERS_FROM: usize = 256;

/// aho-corasick's packed searcher (Teddy: SIMD over the first bytes of every pattern at once,
/// then a verify), leftmost-longest: one pass over a chunk for all the secrets instead of one
/// pass per pattern. Host only: it allocates, and picks SSSE3/AVX2 at run time through `std`.
#[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
#[derive(Clone)]
pub(super) enum Packed {
    /// Not built yet (no write was big enough).
    Untried,
    /// Built: the searcher (shared with the thread's [`memo`]) and the longest pattern's length.
    Built(std::sync::Arc<aho_corasick::packed::Searcher>, usize),
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
            Some(searcher) if longest > 0 => Packed::Built(std::sync::Arc::new(searcher), longest),
            _ => Packed::Unavailable,
        }
    }
}

impl<'s> Finders<'s> {
    /// No searcher yet: they are built by [`Finders::prepare`] when a write is big enough.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    pub(super) fn new<S: AsRef<[u8]>>(_pats: &Patterns<'s, S>) -> Self {
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
    pub(super) fn prepare<S: AsRef<[u8]>>(&mut self, pats: &Patterns<'s, S>, len: usize) {
        #[cfg(feature = "std")]
        {
            if len >= PACKED_FROM && matches!(self.packed, Packed::Untried) {
                self.packed = memo::packed(pats);
            }
            if matches!(self.packed, Packed::Built(..)) {
                return;
            }
        }
        if self.tried || len < FINDERS_FROM {
            return;
        }
        self.tried = true;
        #[cfg(feature = "std")]
        let built = memo::finders(pats);
        #[cfg(not(feature = "std"))]
        let built = build_finders(pats);
        // The finders in the patterns' order, each with its pattern.
        self.list = built.map(|finders| {
            let mut list = heapless::Vec::new();
            let mut each = finders.iter();
            pats.for_each(|p| {
                if let Some(&f) = each.next() {
                    let _ = list.push((f, p));
                }
            });
            list
        });
    }

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    pub(super) fn prepare<S: AsRef<[u8]>>(&mut self, _pats: &Patterns<'s, S>, _len: usize) {}

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    pub(super) fn new<S: AsRef<[u8]>>(_pats: &Patterns<'s, S>) -> Self {
        Finders {
            _none: core::marker::PhantomData,
        }
    }

    /// True when the chunk is searched with the finders (starts in the hold use the anchors).
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    pub(super) fn active(&self) -> bool {
        #[cfg(feature = "std")]
        if matches!(self.packed, Packed::Built(..)) {
            return true;
        }
        self.list.is_some()
    }

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    pub(super) fn active(&self) -> bool {
        false
    }

    /// Drops the finders, so that only the anchor search runs (tests compare both).
    #[cfg(test)]
    pub(super) fn disable(&mut self) {
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
    pub(super) fn without_packed(&mut self) {
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
pub(super) fn scan_packed(
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
pub(super) fn cover(
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
pub(super) struct Run {
    /// A marker was written and covered bytes may still continue it.
    pub(super) open: bool,
    /// End of the run, in the coordinates of the current text.
    pub(super) end: usize,
}

/// Decides positions `0..limit` of `text`: writes uncovered bytes and markers, leaves the run
/// state for what follows. Matches may extend past `limit` (into bytes kept back).
pub(super) fn scan<S: AsRef<[u8]>>(
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

/// One vector finder per pattern, in the patterns' order; `None` when a pattern has none or
/// there are more than [`MAX_FINDERS`].
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn build_finders<S: AsRef<[u8]>>(
    pats: &Patterns<'_, S>,
) -> Option<heapless::Vec<PairFinder, MAX_FINDERS>> {
    let mut list = heapless::Vec::new();
    let mut fits = true;
    pats.for_each(|p| {
        fits &= PairFinder::new(p).is_some_and(|f| list.push(f).is_ok());
    });
    fits.then_some(list)
}

/// The searchers of the last pattern set seen on this thread (host): a run redacts every reply
/// with the same secrets, so the per-pattern finders and the packed searcher are built once
/// per thread and set instead of once per reply (the finders cost about 1.2k
/// instructions a pattern, the packed searcher tens of thousands). Keyed by the patterns
/// themselves, compared byte for byte on every use, so a set never gets another set's
/// searchers. It holds a copy of the patterns, as the packed searcher it keeps does; both are
/// dropped when another set is used on the thread, or with the thread.
#[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
mod memo {
    extern crate std;

    use std::cell::RefCell;
    use std::vec::Vec;

    use super::{MAX_FINDERS, Packed, PairFinder, Patterns};

    /// The last set's patterns and what was built for it so far.
    #[derive(Default)]
    struct Last {
        /// Each pattern as its length (8 bytes, little-endian) then its bytes.
        key: Vec<u8>,
        finders: Option<Option<heapless::Vec<PairFinder, MAX_FINDERS>>>,
        packed: Option<Packed>,
    }

    std::thread_local! {
        static LAST: RefCell<Last> = RefCell::new(Last::default());
    }

    /// True when `key` holds exactly `pats`' patterns, in order.
    fn holds<S: AsRef<[u8]>>(key: &[u8], pats: &Patterns<'_, S>) -> bool {
        let mut rest = key;
        let mut same = true;
        pats.for_each(|p| {
            let len = (p.len() as u64).to_le_bytes();
            let here = rest
                .strip_prefix(&len[..])
                .and_then(|r| r.strip_prefix(p))
                .filter(|_| same);
            match here {
                Some(r) => rest = r,
                None => same = false,
            }
        });
        same && rest.is_empty()
    }

    /// `f` of this thread's entry for `pats` (made afresh when the set differs from the
    /// last); `None` when the entry cannot be reached (the thread is ending, or it is in use).
    fn with<S: AsRef<[u8]>, R>(
        pats: &Patterns<'_, S>,
        f: impl FnOnce(&mut Last) -> R,
    ) -> Option<R> {
        LAST.try_with(|last| {
            let mut last = last.try_borrow_mut().ok()?;
            if !holds(&last.key, pats) {
                let mut key = Vec::new();
                pats.for_each(|p| {
                    key.extend_from_slice(&(p.len() as u64).to_le_bytes());
                    key.extend_from_slice(p);
                });
                *last = Last {
                    key,
                    ..Last::default()
                };
            }
            Some(f(&mut last))
        })
        .ok()
        .flatten()
    }

    /// [`super::build_finders`] of `pats`, built once per set.
    pub(super) fn finders<S: AsRef<[u8]>>(
        pats: &Patterns<'_, S>,
    ) -> Option<heapless::Vec<PairFinder, MAX_FINDERS>> {
        with(pats, |l| {
            l.finders
                .get_or_insert_with(|| super::build_finders(pats))
                .clone()
        })
        .unwrap_or_else(|| super::build_finders(pats))
    }

    /// [`Packed::build`] of `pats`, built once per set (the searcher is shared).
    pub(super) fn packed<S: AsRef<[u8]>>(pats: &Patterns<'_, S>) -> Packed {
        with(pats, |l| {
            l.packed.get_or_insert_with(|| Packed::build(pats)).clone()
        })
        .unwrap_or_else(|| Packed::build(pats))
    }
}

pub(super) fn first_bytes<S: AsRef<[u8]>>(pats: &Patterns<'_, S>) -> (Anchors, usize) {
    let mut anchors = Anchors::new();
    let mut longest = 0;
    pats.for_each(|p| {
        anchors.add(p);
        longest = longest.max(p.len());
    });
    if HOST_SEARCH && !anchors.by_pairs() {
        pats.for_each(|p| anchors.add_anchor(p));
    }
    (anchors, longest)
}
