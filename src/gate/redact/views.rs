//! The views of a text the redactor searches besides the text itself: escapes decoded
//! (repeatedly), line breaks dropped (the *joined* view), each byte mapped back to the
//! range of original bytes it came from (the module doc of `redact` says why each).

use super::DECODE_PASSES;

/// Calls `f` with each view of `text` and its [`Map`] back to `text` (text without
/// `%`, `&`, `\` or a line break has one view, itself). The views (the joined
/// ones are a fuzz finding, `fuzz/`):
///
/// - `text` itself, unless it has a line break and no pattern has one
///   (`breaks_in_patterns`): then every match in it is in the joined view too;
/// - the decoded views of `text` (escapes decoded, line breaks dropped), built only when
///   `text` holds `%`, `&` or `\` and one of them decodes (with only line breaks dropped
///   the view would be the joined view: it is searched once, as that);
/// - the *joined* view, `text` with only its line breaks dropped, built only when it
///   holds one: a wrapped echo is found here whatever escape-looking bytes the secret
///   holds or follows, since nothing is decoded;
/// - the decoded views of the joined view, where an escape split by a line break is
///   whole. They equal the decoded views of `text` (and are not built again) unless some
///   escape, or what looks like the start of one, reaches a line break (see
///   [`Decoded::reaches_break`]).
pub(super) fn for_each_view(text: &[u8], breaks_in_patterns: bool, mut f: impl FnMut(&[u8], Map<'_>)) {
    if !text.iter().any(|b| SPECIAL[*b as usize]) {
        return f(text, Map::Same);
    }
    let has_break = text.iter().any(|b| is_break(*b));
    if !has_break || breaks_in_patterns {
        f(text, Map::Same);
    }
    let has_escape = text.iter().any(|b| matches!(b, b'%' | b'&' | b'\\'));
    let mut reaches_break = false;
    if has_escape && let Some(d) = decode(text) {
        reaches_break = d.reaches_break;
        // Only line breaks dropped: this view is the joined view, searched below.
        if d.escapes || !has_break {
            decoded_views(text.len(), d.bytes, d.starts.ending_at(text.len()), &mut f);
        }
    }
    if !has_break {
        return;
    }
    let (joined, gaps) = drop_breaks(text);
    f(&joined, Map::Joined(&gaps));
    if reaches_break && let Some(d) = decode(&joined) {
        let starts = joined_starts(&gaps, &d.starts, text.len());
        decoded_views(text.len(), d.bytes, starts, &mut f);
    }
}

/// Where the bytes of a view came from in the text.
#[derive(Clone, Copy)]
pub(super) enum Map<'a> {
    /// The view is the text.
    Same,
    /// A decoded view: where each byte's unit begins in the text.
    Starts(&'a Starts),
    /// The joined view: per run of dropped line breaks, the view index after it and how
    /// many bytes were dropped up to there, ascending (no per-byte map: the joined view
    /// is built for most texts, and it is a copy but for its gaps).
    Joined(&'a [(u32, u32)]),
}

impl Map<'_> {
    /// Where view byte `i`'s unit begins in the text.
    pub(super) fn start(&self, i: usize) -> usize {
        match self {
            Map::Same => i,
            Map::Starts(starts) => starts.start(i),
            Map::Joined(gaps) => {
                let k = gaps.partition_point(|&(at, _)| at as usize <= i);
                i + k.checked_sub(1).map_or(0, |k| gaps[k].1 as usize)
            }
        }
    }

    /// The range in `text` of view bytes `start..end` (non-empty): from where the first
    /// one's unit begins to where the last one's ends.
    pub(super) fn range(&self, text: &[u8], start: usize, end: usize) -> (usize, usize) {
        match self {
            Map::Same => (start, end),
            Map::Joined(_) => (self.start(start), self.start(end - 1) + 1),
            Map::Starts(starts) => {
                let start = starts.start(start);
                let mut end = starts.unit_end(end - 1);
                // a dropped line break right after the match is not part of it
                while end > start && is_break(text[end - 1]) {
                    end -= 1;
                }
                (start, end)
            }
        }
    }
}

/// Calls `f` with a first decoded view and its map, then with each further decoding of
/// it, [`DECODE_PASSES`] views at most, while decoding changes it.
pub(super) fn decoded_views(total: usize, mut view: Vec<u8>, mut starts: Starts, f: &mut impl FnMut(&[u8], Map<'_>)) {
    for pass in 1..=DECODE_PASSES {
        f(&view, Map::Starts(&starts));
        if pass == DECODE_PASSES {
            break;
        }
        let Some(next) = decode(&view) else { break };
        let composed = starts.compose(&next.starts, total);
        view = next.bytes;
        starts = composed;
    }
}

/// `t` without its line breaks, and its gaps (see [`Map::Joined`]).
pub(super) fn drop_breaks(t: &[u8]) -> (Vec<u8>, Vec<(u32, u32)>) {
    let mut out = Vec::with_capacity(t.len());
    let mut gaps = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let next = t[i..].iter().position(|b| is_break(*b)).map_or(t.len(), |k| i + k);
        out.extend_from_slice(&t[i..next]);
        let after = t[next..].iter().position(|b| !is_break(*b)).map_or(t.len(), |k| next + k);
        if after > next {
            gaps.push((out.len() as u32, (after - out.len()) as u32));
        }
        i = after;
    }
    (out, gaps)
}

/// The starts in the text of a decoded view of the joined view with `gaps`, whose
/// starts in the joined view are `local`; the text is `total` bytes long.
pub(super) fn joined_starts(gaps: &[(u32, u32)], local: &Starts, total: usize) -> Starts {
    let mut out = Starts::default();
    let mut k = 0;
    for i in local.iter() {
        while k < gaps.len() && gaps[k].0 <= i {
            k += 1;
        }
        out.push(i + k.checked_sub(1).map_or(0, |k| gaps[k].1));
    }
    #[cfg(any(test, fuzzing))]
    {
        let mut per_byte = Vec::with_capacity(local.per_byte.len());
        let mut k = 0;
        for &i in &local.per_byte {
            while k < gaps.len() && gaps[k].0 <= i {
                k += 1;
            }
            per_byte.push(i + k.checked_sub(1).map_or(0, |k| gaps[k].1));
        }
        assert_eq!(out.per_byte, per_byte, "joined starts");
    }
    out.ending_at(total)
}

/// Where each byte of a decoded view begins in the text, kept as segments rather than
/// per byte (a per-byte map was 4 bytes per byte: 32 MiB for an 8 MiB answer). A segment
/// is a run of view bytes whose starts step by a fixed stride: 1 for bytes copied as
/// they are, 0 for the bytes of one decoded character, more for escapes of one length
/// in a row (`%41%42`). A new segment begins only where that progression breaks (an
/// escape, a dropped line break), and every segment but the last holds two bytes at
/// least, so there are at most half as many segments as bytes. Queries are answered by
/// binary search; the walks below (composition, the joined view) are linear.
///
/// Built for tests and under the fuzzer, it also keeps the per-byte map it replaces,
/// computed as before, and every query, walk and composition is checked against it.
#[derive(Clone, Default, Debug, PartialEq, Eq)]
pub(super) struct Starts {
    segs: Vec<Seg>,
    /// Bytes mapped.
    len: u32,
    /// Where the text ends: the start of the byte after the last.
    total: u32,
    #[cfg(any(test, fuzzing))]
    per_byte: Vec<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seg {
    /// The view index of its first byte.
    view: u32,
    /// Its first byte's start in the text.
    text: u32,
    stride: u32,
}

impl Starts {
    /// Maps the next byte of the view to text position `t` (positions never decrease).
    #[inline]
    pub(super) fn push(&mut self, t: u32) {
        #[cfg(any(test, fuzzing))]
        self.per_byte.push(t);
        let v = self.len;
        self.len += 1;
        if let Some(last) = self.segs.last_mut() {
            let n = v - last.view;
            if n == 1 && t >= last.text {
                last.stride = t - last.text;
                return;
            }
            if u64::from(t) == u64::from(last.text) + u64::from(n) * u64::from(last.stride) {
                return;
            }
        }
        self.segs.push(Seg { view: v, text: t, stride: 0 });
    }

    /// Maps the next bytes of the view to text positions `from..to`, one each.
    fn push_run(&mut self, from: u32, to: u32) {
        let mut t = from;
        while t < to {
            self.push(t);
            t += 1;
            // Once the last segment steps by 1 through `t - 1`, the rest of the run is in it.
            if let Some(last) = self.segs.last()
                && last.stride == 1
                && self.len - last.view >= 2
            {
                #[cfg(any(test, fuzzing))]
                self.per_byte.extend(t..to);
                self.len += to - t;
                return;
            }
        }
    }

    /// Sets where the text ends (the start of "the byte after the last").
    pub(super) fn ending_at(mut self, total: usize) -> Starts {
        self.total = total as u32;
        #[cfg(any(test, fuzzing))]
        assert!(self.iter().eq(self.per_byte.iter().copied()), "segments differ from the per-byte starts");
        self
    }

    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    /// Where view byte `i` begins in the text; the text's end for `i` = [`Self::len`].
    pub(super) fn start(&self, i: usize) -> usize {
        if i >= self.len() {
            return self.total as usize;
        }
        let k = self.segs.partition_point(|s| s.view as usize <= i) - 1;
        let s = self.segs[k];
        let at = (u64::from(s.text) + (i as u64 - u64::from(s.view)) * u64::from(s.stride)) as usize;
        #[cfg(any(test, fuzzing))]
        assert_eq!(at, self.per_byte[i] as usize, "start of view byte {i}");
        at
    }

    /// End (exclusive, in the text) of the unit that view byte `j` came from: where the
    /// next byte with another start begins.
    pub(super) fn unit_end(&self, j: usize) -> usize {
        let s = self.start(j);
        let mut k = j + 1;
        loop {
            let t = self.start(k);
            if t != s || k >= self.len() {
                return t;
            }
            k += 1;
        }
    }

    /// Each byte's start, in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.segs.iter().enumerate().flat_map(move |(k, s)| {
            let end = self.segs.get(k + 1).map_or(self.len, |n| n.view);
            (0..end - s.view).map(move |d| (u64::from(s.text) + u64::from(d) * u64::from(s.stride)) as u32)
        })
    }

    /// The starts in the text of a further decoding of this view whose starts in this
    /// view are `next`.
    fn compose(&self, next: &Starts, total: usize) -> Starts {
        let mut out = Starts::default();
        // `next`'s starts never decrease: this map's segments are walked forward once.
        let mut k = 0;
        for (n, seg) in next.segs.iter().enumerate() {
            let end = next.segs.get(n + 1).map_or(next.len, |s| s.view);
            for d in 0..end - seg.view {
                let i = u64::from(seg.text) + u64::from(d) * u64::from(seg.stride);
                while k + 1 < self.segs.len() && u64::from(self.segs[k + 1].view) <= i {
                    k += 1;
                }
                let at = match self.segs.get(k) {
                    Some(s) if i < u64::from(self.len) => u64::from(s.text) + (i - u64::from(s.view)) * u64::from(s.stride),
                    _ => u64::from(self.total),
                };
                out.push(at as u32);
            }
        }
        #[cfg(any(test, fuzzing))]
        {
            let per_byte: Vec<u32> = next.per_byte.iter().map(|&i| self.per_byte.get(i as usize).copied().unwrap_or(self.total)).collect();
            assert_eq!(out.per_byte, per_byte, "composed starts");
        }
        out.ending_at(total)
    }
}

pub(super) fn is_break(b: u8) -> bool {
    matches!(b, b'\n' | b'\r')
}

pub(super) fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

fn hex_val(b: u8) -> Option<u32> {
    (b as char).to_digit(16)
}

fn hex_at(t: &[u8], i: usize, n: usize) -> Option<u32> {
    let digits = t.get(i..i + n)?;
    digits.iter().try_fold(0u32, |acc, &b| Some(acc * 16 + hex_val(b)?))
}

/// Bytes that can begin a unit the decoder changes (a line break is dropped).
const SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    t[b'%' as usize] = true;
    t[b'&' as usize] = true;
    t[b'\\' as usize] = true;
    t[b'\n' as usize] = true;
    t[b'\r' as usize] = true;
    t
};

/// One decoding pass: the decoded bytes and, per decoded byte, the index in the input
/// where its unit begins.
pub(super) struct Decoded {
    pub(super) bytes: Vec<u8>,
    pub(super) starts: Starts,
    /// Whether an escape decoded (not only line breaks dropped).
    pub(super) escapes: bool,
    /// Whether the reading of some escape (or of bytes that begin like one) looked as far
    /// as a line break: only then can the input with its line breaks dropped decode
    /// differently (an escape split by the break, `%4` `\n` `1`, or joined with what
    /// follows it, `&#12` `\n` `3;`, `%` `\n` `ab`).
    pub(super) reaches_break: bool,
}

/// One decoding pass over `t`: `None` if nothing in it decodes.
pub(super) fn decode(t: &[u8]) -> Option<Decoded> {
    // Nothing is built before the first unit that decodes (a second pass over a view
    // usually finds none).
    let first = first_decoding(t)?;
    let mut out = Vec::with_capacity(t.len());
    let mut starts = Starts::default();
    out.extend_from_slice(&t[..first]);
    starts.push_run(0, first as u32);
    let mut changed = false;
    let mut escapes = false;
    // What the bytes before `first` looked at, as the loop below would have seen it.
    let mut reaches_break = t[..first]
        .iter()
        .enumerate()
        .any(|(i, &b)| SPECIAL[b as usize] && !is_break(b) && t[i + 1..looked_at(t, i, None).min(t.len())].iter().copied().any(is_break));
    let mut i = first;
    let mut utf8 = [0u8; 4];
    while i < t.len() {
        // Plain runs are copied whole, up to the next byte that can start an escape.
        let next = t[i..].iter().position(|b| SPECIAL[*b as usize]).map_or(t.len(), |k| i + k);
        if next > i {
            out.extend_from_slice(&t[i..next]);
            starts.push_run(i as u32, next as u32);
            i = next;
            continue;
        }
        let decoded: Option<(usize, DecodedUnit)> = match t[i] {
            // Line breaks are dropped: an echo wrapped across lines (MIME base64 at 76
            // columns, hard-wrapped text) is read joined.
            b'\n' | b'\r' => Some((1, DecodedUnit::Nothing)),
            b'%' => hex_at(t, i + 1, 2).map(|v| (3, DecodedUnit::Byte(v as u8))),
            b'&' => html_ref(t, i),
            b'\\' => backslash(t, i),
            _ => None,
        };
        if !reaches_break && !matches!(t[i], b'\n' | b'\r') {
            let looked = looked_at(t, i, decoded.as_ref().map(|(len, _)| *len));
            reaches_break = t[i + 1..looked.min(t.len())].iter().any(|b| matches!(b, b'\n' | b'\r'));
        }
        match decoded {
            Some((len, unit)) => {
                changed = true;
                escapes |= !matches!(unit, DecodedUnit::Nothing);
                let bytes: &[u8] = match unit {
                    DecodedUnit::Nothing => &[],
                    DecodedUnit::Byte(ref b) => std::slice::from_ref(b),
                    DecodedUnit::Char(c) => c.encode_utf8(&mut utf8).as_bytes(),
                };
                for &b in bytes {
                    out.push(b);
                    starts.push(i as u32);
                }
                i += len;
            }
            None => {
                out.push(t[i]);
                starts.push(i as u32);
                i += 1;
            }
        }
    }
    changed.then_some(Decoded { bytes: out, starts: starts.ending_at(t.len()), escapes, reaches_break })
}

/// Where the first unit of `t` that the decoder changes begins (an escape that decodes,
/// or a line break), if any.
fn first_decoding(t: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < t.len() {
        i += t[i..].iter().position(|b| SPECIAL[*b as usize])?;
        let decodes = match t[i] {
            b'\n' | b'\r' => true,
            b'%' => hex_at(t, i + 1, 2).is_some(),
            b'&' => html_ref(t, i).is_some(),
            b'\\' => backslash(t, i).is_some(),
            _ => false,
        };
        if decodes {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// End (exclusive) of the bytes whose being a line break could change how the escape
/// at `i` reads, given that it decoded to a unit of `len` bytes (or to none); at least
/// what the decoder examined, bounded from above.
fn looked_at(t: &[u8], i: usize, len: Option<usize>) -> usize {
    match (t[i], len) {
        // `&#NNN` without `;` and under 8 digits reads one byte past its end: a `;` or
        // more digits after a break would change it. Every other unit is closed.
        (b'&', Some(len)) if t.get(i + 1) == Some(&b'#') && t[i + len - 1] != b';' => i + len + 1,
        (_, Some(len)) => i + len,
        (b'%', None) => i + 3,
        // `&#`, `&#x` and a digit; a name of at most 7 bytes (`equals;`).
        (b'&', None) => i + 8,
        (b'\\', None) => match t.get(i + 1) {
            Some(b'u' | b'U') => i + 12,
            Some(b'x' | b'X') => i + 4,
            _ => i + 2,
        },
        _ => i + 1,
    }
}

enum DecodedUnit {
    Nothing,
    Byte(u8),
    Char(char),
}

fn html_ref(t: &[u8], i: usize) -> Option<(usize, DecodedUnit)> {
    let rest = &t[i + 1..];
    if rest.first() == Some(&b'#') {
        let (radix, from) = if matches!(rest.get(1), Some(b'x' | b'X')) { (16, 2) } else { (10, 1) };
        let digits = rest[from..].iter().take(8).take_while(|b| (**b as char).is_digit(radix)).count();
        if digits == 0 {
            return None;
        }
        let s = std::str::from_utf8(&rest[from..from + digits]).ok()?;
        let c = char::from_u32(u32::from_str_radix(s, radix).ok()?)?;
        let semi = usize::from(rest.get(from + digits) == Some(&b';'));
        return Some((1 + from + digits + semi, DecodedUnit::Char(c)));
    }
    for (name, c) in [("amp;", '&'), ("lt;", '<'), ("gt;", '>'), ("quot;", '"'), ("apos;", '\''), ("sol;", '/'), ("plus;", '+'), ("equals;", '=')] {
        if rest.len() >= name.len() && rest[..name.len()].eq_ignore_ascii_case(name.as_bytes()) {
            return Some((1 + name.len(), DecodedUnit::Char(c)));
        }
    }
    None
}

fn backslash(t: &[u8], i: usize) -> Option<(usize, DecodedUnit)> {
    match t.get(i + 1)? {
        b'u' | b'U' => {
            let hi = hex_at(t, i + 2, 4)?;
            if (0xD800..0xDC00).contains(&hi) {
                if t.get(i + 6) == Some(&b'\\') && matches!(t.get(i + 7), Some(b'u' | b'U')) {
                    let lo = hex_at(t, i + 8, 4)?;
                    if (0xDC00..0xE000).contains(&lo) {
                        let c = char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?;
                        return Some((12, DecodedUnit::Char(c)));
                    }
                }
                return None;
            }
            Some((6, DecodedUnit::Char(char::from_u32(hi)?)))
        }
        b'x' | b'X' => hex_at(t, i + 2, 2).map(|v| (4, DecodedUnit::Byte(v as u8))),
        b @ (b'"' | b'\\' | b'/' | b'\'') => Some((2, DecodedUnit::Byte(*b))),
        _ => None,
    }
}

// Attacks tried on the segment map (`Starts`), and whether they held:
// - an answer built to make a segment per byte (an escape after every copied byte, line
//   breaks between single bytes): at most one segment per two bytes, held
//   (`segments_answer_as_the_per_byte_map_and_stay_small`), so the map stays within the
//   per-byte map's 4 bytes per byte at worst (12 bytes per segment of 2);
// - strides no small integer holds (thousands of line breaks between two escapes): the
//   stride is a u32 and the arithmetic is in u64, held;
// - a character decoded in one pass and copied in the next, or an escape decoded from
//   bytes that were escapes themselves (`%2541`): composed and checked against the
//   per-byte composition, held;
// - an escape split by a line break (`%4` `\n` `1`), and texts whose only decoding is
//   dropping line breaks: the views searched are a superset of the former ones, held
//   (redact/tests.rs, `every_view_searched_before_is_searched_still`).
#[cfg(test)]
mod tests {
    use super::*;

    fn per_byte(s: &Starts) -> Vec<u32> {
        s.iter().collect()
    }

    /// The segments answer as the per-byte map did (each query is checked against it in
    /// test builds, `Starts::start`), through every decoding pass and the joined view's,
    /// and hold at most one segment per two bytes: on texts dense in escapes, escape
    /// fragments, multi-byte characters and line breaks.
    #[test]
    fn segments_answer_as_the_per_byte_map_and_stay_small() {
        const ALPHABET: &[&[u8]] = &[
            b"\n",
            b"\r",
            b"%",
            b"%41",
            b"%2541",
            b"&",
            b"&amp;",
            b"&#x41;",
            b"&#65",
            b"\\",
            b"\\u00e9",
            b"\\ud83d\\ude00",
            b"\\x41",
            b"\\\"",
            "\u{e9}".as_bytes(),
            b"a",
            b"bc",
            b"4",
            b"1;",
            b"#",
        ];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || super::super::tests::xorshift(&mut state);
        let mut views = 0;
        for _ in 0..5_000 {
            let n = 1 + (next() % 60) as usize;
            let text: Vec<u8> = (0..n).flat_map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize].iter().copied()).collect();
            for_each_view(&text, false, |view, map| {
                let Map::Starts(starts) = map else { return };
                views += 1;
                let dense: Vec<u32> = starts.per_byte.iter().copied().chain([starts.total]).collect();
                assert_eq!(starts.len(), view.len());
                assert!(starts.segs.len() <= view.len() / 2 + 1, "{} segments for {} bytes", starts.segs.len(), view.len());
                for j in 0..view.len() {
                    let mut k = j + 1;
                    while dense[k] == dense[j] {
                        k += 1;
                    }
                    assert_eq!(starts.unit_end(j), dense[k] as usize, "unit end of {j} in {:?}", String::from_utf8_lossy(&text));
                    let _ = starts.start(j);
                }
            });
        }
        assert!(views > 5_000, "{views} decoded views");
    }

    /// A long text of lines with a few escapes: segments per escape and per line, not per
    /// byte.
    #[test]
    fn a_text_of_lines_maps_in_few_segments() {
        let text = "GET /items?q=a%20b 200 &quot;ok&quot; <a&b>\n".repeat(10_000);
        let d = decode(text.as_bytes()).unwrap();
        assert!(d.escapes);
        // 3 escapes and one line break per line, two segments each at most
        assert!(d.starts.segs.len() <= 8 * 10_000 + 1, "{} segments", d.starts.segs.len());
        assert_eq!(d.starts.len(), d.bytes.len());
    }

    /// `decode` builds nothing before the first unit that decodes; what it returns is what
    /// a pass from the first byte gives: the bytes, each byte's start, and whether an
    /// escape-looking byte before that unit reached a line break.
    #[test]
    fn decoding_from_the_first_unit_that_changes_is_decoding_from_the_start() {
        assert!(decode(b"100% &zz; \\q %4").is_none());
        let d = decode(b"a%z\nb%41").unwrap();
        assert_eq!((d.bytes.as_slice(), per_byte(&d.starts).as_slice(), d.reaches_break), (&b"a%zbA"[..], &[0, 1, 2, 4, 5][..], true));
        let d = decode(b"a%zz b%41").unwrap();
        assert_eq!((d.bytes.as_slice(), per_byte(&d.starts).as_slice(), d.reaches_break), (&b"a%zz bA"[..], &[0, 1, 2, 3, 4, 5, 6][..], false));
        let d = decode(b"&#x\n41;&amp;").unwrap();
        assert_eq!((d.bytes.as_slice(), d.reaches_break), (&b"&#x41;&"[..], true));
    }
}
