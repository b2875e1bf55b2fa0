//! Reading a validated [`Value`]: its kind, field lookup, members and elements, numbers,
//! and its compact re-emission.

use super::*;

pub(super) fn value_at<'a>(
    input: &'a [u8],
    pos: usize,
    hint: Hint<'a>,
) -> Option<(Value<'a>, usize)> {
    let first = *input.get(pos)?;
    let end = skip_value(input, pos, hint);
    let raw = input.get(pos..end)?;
    Some((
        Value {
            raw,
            kind: kind_of(first),
            hint,
        },
        end,
    ))
}

impl<'a> Value<'a> {
    /// Parses `input` as exactly one JSON value (whitespace around it allowed), strictly per
    /// RFC 8259, iteratively, with at most `limits.max_depth` containers open at once.
    pub fn parse(input: &'a [u8], limits: JsonLimits) -> Result<Value<'a>, JsonError> {
        let start = skip_ws(input, 0);
        let end = validate(input, start, limits)?;
        Value::spanning(input, start, end)
    }

    /// The value validated between `start` and `end` of `input`, with nothing but whitespace
    /// after it (the end of [`Value::parse`] and [`Value::parse_noting`]).
    fn spanning(input: &'a [u8], start: usize, end: usize) -> Result<Value<'a>, JsonError> {
        let after = skip_ws(input, end);
        if after != input.len() {
            return Err(err(JsonErrorKind::TrailingData, after));
        }
        let raw = input
            .get(start..end)
            .ok_or(err(JsonErrorKind::UnexpectedEnd, start))?;
        let first = raw
            .first()
            .copied()
            .ok_or(err(JsonErrorKind::UnexpectedEnd, start))?;
        Ok(Value {
            raw,
            kind: kind_of(first),
            hint: Hint::NONE,
        })
    }

    /// [`Value::parse`] (the same value, the same errors), also noting where the shallow
    /// containers end ([`Ends`]): give them to the value with [`Value::knowing`] and a walk
    /// that passes over the result (the id lookup, `resultType`) crosses it at once. Host only.
    #[cfg(feature = "std")]
    pub fn parse_noting(
        input: &'a [u8],
        limits: JsonLimits,
    ) -> Result<(Value<'a>, Ends), JsonError> {
        let mut ends = Ends::of(input);
        let mut noting = Noting {
            ends: &mut ends,
            starts: [0; ENDS_DEPTH],
            defer: false,
        };
        let start = skip_ws(input, 0);
        let end = validate_with(input, start, limits, &mut noting)?;
        Ok((Value::spanning(input, start, end)?, ends))
    }

    /// This value, knowing `ends` (noted by the parse of its message: [`Value::parse_noting`],
    /// [`Deferred::ends`]), as is every value read from it. `ends` of another message are
    /// not taken (the value is returned as it is).
    #[cfg(feature = "std")]
    pub fn knowing<'b>(self, ends: &'b Ends) -> Value<'b>
    where
        'a: 'b,
    {
        let at = (self.raw.as_ptr() as usize).wrapping_sub(ends.base);
        let inside = at
            .checked_add(self.raw.len())
            .is_some_and(|e| e <= ends.len);
        Value {
            raw: self.raw,
            kind: self.kind,
            hint: if inside {
                Hint(Some(ends), PhantomData)
            } else {
                self.hint
            },
        }
    }

    /// [`Value::parse`], except that up to [`MAX_DEFERRED`] value strings longer than
    /// [`DEFER_FROM`] bytes are only crossed (their closing quote found), not checked: their
    /// contents are returned to be checked later, by whoever reads them next (the host's
    /// in-place text writer checks them as it unescapes). Any error is exactly
    /// [`Value::parse`]'s (a failed parse is redone by it). Host only.
    ///
    /// The returned value must not be read into a deferred string before that string is
    /// checked ([`check_deferred`] checks one as `parse` would have).
    #[cfg(feature = "std")]
    pub fn parse_deferring(
        input: &'a [u8],
        limits: JsonLimits,
    ) -> Result<(Value<'a>, Deferred), JsonError> {
        let mut deferred = Deferred {
            ends: Ends::of(input),
        };
        let mut noting = Noting {
            ends: &mut deferred.ends,
            starts: [0; ENDS_DEPTH],
            defer: true,
        };
        let start = skip_ws(input, 0);
        let ok = validate_with(input, start, limits, &mut noting)
            .ok()
            .filter(|&end| skip_ws(input, end) == input.len())
            .and_then(|end| input.get(start..end))
            .and_then(|raw| {
                let first = *raw.first()?;
                Some(Value {
                    raw,
                    kind: kind_of(first),
                    hint: Hint::NONE,
                })
            });
        match ok {
            Some(v) => Ok((v, deferred)),
            // The exact error, as `parse` says it (deferred strings come first if invalid).
            None => Value::parse(input, limits).map(|v| (v, Deferred::default())),
        }
    }

    /// The value's type.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The exact bytes of the value in the input (no surrounding whitespace).
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// The first member named `key` (compared after unescaping), if this is an object.
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        self.members().find(|(k, _)| k.eq_str(key)).map(|(_, v)| v)
    }

    /// The first member named `key`, if it is a string ([`Value::get`], then
    /// [`Value::as_str`]). One call on the edge, where the string check is not repeated at
    /// every lookup of a string member.
    #[cfg_attr(not(feature = "std"), inline(never))]
    pub(crate) fn get_str(&self, key: &str) -> Option<JsonStr<'a>> {
        self.get(key)?.as_str()
    }

    /// The members of an object, in order (duplicates included); empty for other kinds.
    pub fn members(&self) -> Members<'a> {
        Members {
            raw: if self.kind == Kind::Object {
                self.raw
            } else {
                &[]
            },
            pos: 1,
            hint: self.hint,
        }
    }

    /// The elements of an array, in order; empty for other kinds.
    pub fn elements(&self) -> Elements<'a> {
        Elements {
            raw: if self.kind == Kind::Array {
                self.raw
            } else {
                &[]
            },
            pos: 1,
            hint: self.hint,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<JsonStr<'a>> {
        if self.kind != Kind::String {
            return None;
        }
        let inner = self.raw.get(1..self.raw.len().checked_sub(1)?)?;
        Some(JsonStr { raw: inner })
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self.raw {
            b"true" => Some(true),
            b"false" => Some(false),
            _ => None,
        }
    }

    /// The number as an `i64`, if it is written as an integer (no fraction, no exponent) that
    /// fits. `-0` gives `0`.
    pub fn as_i64(&self) -> Option<i64> {
        if self.kind != Kind::Number {
            return None;
        }
        let (neg, digits) = match self.raw.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, self.raw),
        };
        let m = magnitude(digits)?;
        // Two's complement: the result fits when its sign is the one written (down to
        // i64::MIN, whose magnitude is 2^63), or it is 0.
        let v = if neg { 0u64.wrapping_sub(m) } else { m } as i64;
        ((v < 0) == neg || m == 0).then_some(v)
    }

    /// The number as a `u64`, if it is written as a non-negative integer (no sign, fraction or
    /// exponent) that fits.
    pub fn as_u64(&self) -> Option<u64> {
        if self.kind != Kind::Number || self.raw.is_empty() {
            return None;
        }
        magnitude(self.raw)
    }

    /// True for `null`.
    pub fn is_null(&self) -> bool {
        self.kind == Kind::Null
    }

    /// Writes the value compactly, as `JSON.stringify(JSON.parse(raw))` would print it: no
    /// insignificant whitespace, member order and duplicates kept, strings re-escaped
    /// canonically (only `"`, `\` and control characters escaped, with the `\b \f \n \r \t`
    /// short forms and lowercase `\u00xx` otherwise; `\/` and other escapes become the raw
    /// character; non-ASCII written raw; a lone surrogate, which has no UTF-8 form, stays a
    /// lowercase `\udxxx` escape as well-formed `JSON.stringify` prints it).
    ///
    /// Numbers are copied as written: `JSON.stringify` would normalise `1.0` to `1` or `1e2` to
    /// `100`; we deliberately do not, since that needs float formatting and loses nothing a
    /// reader cares about.
    pub fn write_compact(&self, out: &mut impl Sink) -> Result<(), Overflow> {
        // The edge writes through one copy, whatever the sink (the host keeps one per sink).
        #[cfg(not(feature = "std"))]
        return write_compact_raw(self.raw, &mut (out as &mut dyn Sink));
        #[cfg(feature = "std")]
        write_compact_raw(self.raw, out)
    }
}

/// Decimal digits as a `u64` (0 for none), `None` for any other byte or past `u64::MAX`: the
/// one integer reader of [`Value::as_i64`] and [`Value::as_u64`].
fn magnitude(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |n, &b| match b {
        b'0'..=b'9' => n.checked_mul(10)?.checked_add(u64::from(b - b'0')),
        _ => None,
    })
}

/// [`Value::write_compact`] of the validated bytes `raw`.
fn write_compact_raw(raw: &[u8], out: &mut impl Sink) -> Result<(), Overflow> {
    // The part that is compact already (all of it for what a serializer wrote) goes in
    // one put; the rest from there on, piece by piece.
    let mut p = compact_prefix(raw);
    if p > 0 {
        out.put(raw.get(..p).unwrap_or(&[]))?;
    }
    while p < raw.len() {
        // Copy the run up to the next whitespace or string start in one put.
        let run_end = raw
            .get(p..)
            .and_then(|r| r.iter().position(|&b| b == b'"' || is_ws(b)))
            .map_or(raw.len(), |i| p + i);
        if run_end > p {
            out.put(raw.get(p..run_end).unwrap_or(&[]))?;
        }
        p = run_end;
        match raw.get(p) {
            Some(b'"') => {
                let end = skip_string(raw, p);
                let inner = raw.get(p + 1..end.saturating_sub(1)).unwrap_or(&[]);
                write_json_str(out, JsonStr { raw: inner })?;
                p = end;
            }
            Some(_) => p = skip_ws(raw, p),
            None => {}
        }
    }
    Ok(())
}

/// How many leading bytes of a validated value are written as they are by
/// [`Value::write_compact`]: up to the first whitespace outside a string, or to the opening
/// quote of the first string with an escape (a string without one is canonical as it is, and
/// without escapes every quote opens or closes a string).
fn compact_prefix(raw: &[u8]) -> usize {
    let mut open = None;
    for (i, &b) in raw.iter().enumerate() {
        match b {
            b'"' => open = if open.is_some() { None } else { Some(i) },
            b'\\' => return open.unwrap_or(i),
            _ if open.is_none() && is_ws(b) => return i,
            _ => {}
        }
    }
    raw.len()
}

/// Walks a validated container by offsets, one member or element at a time, so that a caller
/// looking for several members (and into them) crosses each value once: [`Value::get`] skips
/// every value before the one it finds, each time it is called. Crate-internal (for
/// `content::flatten`); like the accessors it returns `None` rather than panic on odd input.
pub(crate) struct Walk<'a> {
    raw: &'a [u8],
    pos: usize,
    hint: Hint<'a>,
}

impl<'a> Walk<'a> {
    /// The members or elements of `v` (an object or an array).
    pub(crate) fn of(v: Value<'a>) -> Self {
        Walk {
            raw: v.raw,
            pos: 1,
            hint: v.hint,
        }
    }

    /// The container whose opening bracket is at `pos` of the walked bytes of `outer`, walked
    /// in the same bytes (so offsets carry over).
    pub(crate) fn inner(&self, pos: usize) -> Self {
        Walk {
            raw: self.raw,
            pos: pos + 1,
            hint: self.hint,
        }
    }

    /// The byte at `pos` (where a value starts: `{`, `[`, `"` …).
    pub(crate) fn byte(&self, pos: usize) -> Option<u8> {
        self.raw.get(pos).copied()
    }

    fn after_comma(&self) -> usize {
        let p = skip_ws(self.raw, self.pos);
        if self.raw.get(p) == Some(&b',') {
            skip_ws(self.raw, p + 1)
        } else {
            p
        }
    }

    /// The next member's key and where its value starts; then call [`Walk::take`] or walk
    /// into the value and [`Walk::resume`] after it. `None` at the closing brace.
    pub(crate) fn next_key(&mut self) -> Option<(JsonStr<'a>, usize)> {
        let raw = self.raw;
        let p = self.after_comma();
        if raw.get(p) != Some(&b'"') {
            self.pos = p;
            return None;
        }
        let key_end = skip_string(raw, p);
        let key = JsonStr {
            raw: raw.get(p + 1..key_end.saturating_sub(1))?,
        };
        let colon = skip_ws(raw, key_end);
        if raw.get(colon) != Some(&b':') {
            return None;
        }
        self.pos = skip_ws(raw, colon + 1);
        Some((key, self.pos))
    }

    /// Where the next element starts. `None` at the closing bracket.
    pub(crate) fn next_element(&mut self) -> Option<usize> {
        let p = self.after_comma();
        self.pos = p;
        match self.raw.get(p) {
            None | Some(b']' | b'}') => None,
            Some(_) => Some(p),
        }
    }

    /// The value that starts where the walk stands, whole; the walk goes on after it.
    pub(crate) fn take(&mut self) -> Option<Value<'a>> {
        let (v, end) = value_at(self.raw, self.pos, self.hint)?;
        self.pos = end;
        Some(v)
    }

    /// The value where the walk stands is a string: writes it unescaped to `out` (the hint
    /// given to [`Sink::reserve`] is the rest of the walked bytes, an upper bound) and goes on
    /// after it, crossing it once. On the edge: skipped, then unescaped (less code).
    pub(crate) fn unescape_string(&mut self, out: &mut impl Sink) -> Result<(), Overflow> {
        let raw = self.raw;
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
            && raw.get(self.pos) == Some(&b'"')
        {
            let body = raw.get(self.pos + 1..).unwrap_or(&[]);
            out.reserve(body.len());
            let end = unescape_run::<true>(body, out)?;
            self.pos = end.map_or(raw.len(), |q| self.pos + 1 + q + 1);
            return Ok(());
        }
        match self.take().and_then(|v| v.as_str()) {
            Some(s) => {
                out.reserve(s.raw().len());
                s.unescape_into(out)
            }
            None => Ok(()),
        }
    }

    /// Goes on after a value that ended at `end` (walked by an inner walk).
    pub(crate) fn resume(&mut self, end: usize) {
        self.pos = end;
    }

    /// After `next_key`/`next_element` said `None`: the offset after the closing bracket.
    pub(crate) fn end(&self) -> usize {
        self.pos + 1
    }

    /// The object `start..end` of the walked bytes, as a value.
    pub(crate) fn object(&self, start: usize, end: usize) -> Option<Value<'a>> {
        Some(Value {
            raw: self.raw.get(start..end)?,
            kind: Kind::Object,
            hint: self.hint,
        })
    }
}

/// Iterator over an object's members: `(key, value)` in input order. See [`Value::members`].
#[derive(Debug, Clone, Default)]
pub struct Members<'a> {
    raw: &'a [u8],
    pos: usize,
    hint: Hint<'a>,
}

impl<'a> Iterator for Members<'a> {
    type Item = (JsonStr<'a>, Value<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let raw = self.raw;
        let mut p = skip_ws(raw, self.pos);
        if raw.get(p) == Some(&b',') {
            p = skip_ws(raw, p + 1);
        }
        if raw.get(p) != Some(&b'"') {
            self.pos = raw.len();
            return None;
        }
        let key_end = skip_string(raw, p);
        let key = JsonStr {
            raw: raw.get(p + 1..key_end.saturating_sub(1))?,
        };
        p = skip_ws(raw, key_end);
        if raw.get(p) != Some(&b':') {
            self.pos = raw.len();
            return None;
        }
        p = skip_ws(raw, p + 1);
        let Some((value, end)) = value_at(raw, p, self.hint) else {
            self.pos = raw.len();
            return None;
        };
        self.pos = end;
        Some((key, value))
    }
}

/// Iterator over an array's elements in order. See [`Value::elements`].
#[derive(Debug, Clone, Default)]
pub struct Elements<'a> {
    raw: &'a [u8],
    pos: usize,
    hint: Hint<'a>,
}

impl<'a> Iterator for Elements<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let raw = self.raw;
        let mut p = skip_ws(raw, self.pos);
        if raw.get(p) == Some(&b',') {
            p = skip_ws(raw, p + 1);
        }
        match raw.get(p) {
            None | Some(b']') => {
                self.pos = raw.len();
                return None;
            }
            Some(_) => {}
        }
        let Some((value, end)) = value_at(raw, p, self.hint) else {
            self.pos = raw.len();
            return None;
        };
        self.pos = end;
        Some(value)
    }
}
