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
///   `text` holds `%`, `&` or `\`;
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
    if has_escape
        && let Some(d) = decode(text) {
            reaches_break = d.reaches_break;
            let mut starts = d.starts;
            starts.push(text.len() as u32);
            decoded_views(text.len(), d.bytes, starts, &mut f);
        }
    if !has_break {
        return;
    }
    let (joined, gaps) = drop_breaks(text);
    f(&joined, Map::Joined(&gaps));
    if reaches_break
        && let Some(d) = decode(&joined) {
            let starts = joined_starts(&gaps, &d.starts, text.len());
            decoded_views(text.len(), d.bytes, starts, &mut f);
        }
}

/// Where the bytes of a view came from in the text.
#[derive(Clone, Copy)]
pub(super) enum Map<'a> {
    /// The view is the text.
    Same,
    /// A decoded view: where each byte's unit begins in the text, and a sentinel
    /// `text.len()` at the end.
    Starts(&'a [u32]),
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
            Map::Starts(starts) => starts[i] as usize,
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
                let start = starts[start] as usize;
                let mut end = unit_end(starts, end - 1);
                // a dropped line break right after the match is not part of it
                while end > start && is_break(text[end - 1]) {
                    end -= 1;
                }
                (start, end)
            }
        }
    }
}

/// Calls `f` with a first decoded view and its map (sentinel included), then with each
/// further decoding of it, [`DECODE_PASSES`] views at most, while decoding changes it.
pub(super) fn decoded_views(total: usize, mut view: Vec<u8>, mut starts: Vec<u32>, f: &mut impl FnMut(&[u8], Map<'_>)) {
    for pass in 1..=DECODE_PASSES {
        f(&view, Map::Starts(&starts));
        if pass == DECODE_PASSES {
            break;
        }
        let Some(next) = decode(&view) else { break };
        let mut composed: Vec<u32> = next.starts.iter().map(|&i| starts[i as usize]).collect();
        composed.push(total as u32);
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

/// Per-byte starts in the text of positions `local` (ascending) in the joined view with
/// `gaps`, and the sentinel `total`.
pub(super) fn joined_starts(gaps: &[(u32, u32)], local: &[u32], total: usize) -> Vec<u32> {
    let mut out = Vec::with_capacity(local.len() + 1);
    let mut k = 0;
    for &i in local {
        while k < gaps.len() && gaps[k].0 <= i {
            k += 1;
        }
        out.push(i + k.checked_sub(1).map_or(0, |k| gaps[k].1));
    }
    out.push(total as u32);
    out
}

pub(super) fn is_break(b: u8) -> bool {
    matches!(b, b'\n' | b'\r')
}

pub(super) fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// End (exclusive, in the original text) of the unit that decoded byte `j` came from.
fn unit_end(starts: &[u32], j: usize) -> usize {
    let s = starts[j];
    let mut k = j + 1;
    while starts[k] == s {
        k += 1;
    }
    starts[k] as usize
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
    pub(super) starts: Vec<u32>,
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
    let mut starts: Vec<u32> = Vec::with_capacity(t.len() + 1);
    out.extend_from_slice(&t[..first]);
    starts.extend(0..first as u32);
    let mut changed = false;
    // What the bytes before `first` looked at, as the loop below would have seen it.
    let mut reaches_break = t[..first].iter().enumerate().any(|(i, &b)| {
        SPECIAL[b as usize] && !is_break(b) && t[i + 1..looked_at(t, i, None).min(t.len())].iter().copied().any(is_break)
    });
    let mut i = first;
    let mut utf8 = [0u8; 4];
    while i < t.len() {
        // Plain runs are copied whole, up to the next byte that can start an escape.
        let next = t[i..].iter().position(|b| SPECIAL[*b as usize]).map_or(t.len(), |k| i + k);
        if next > i {
            out.extend_from_slice(&t[i..next]);
            starts.extend(i as u32..next as u32);
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
    changed.then_some(Decoded { bytes: out, starts, reaches_break })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `decode` builds nothing before the first unit that decodes; what it returns is what
    /// a pass from the first byte gives: the bytes, each byte's start, and whether an
    /// escape-looking byte before that unit reached a line break.
    #[test]
    fn decoding_from_the_first_unit_that_changes_is_decoding_from_the_start() {
        assert!(decode(b"100% &zz; \\q %4").is_none());
        let d = decode(b"a%z\nb%41").unwrap();
        assert_eq!((d.bytes.as_slice(), d.starts.as_slice(), d.reaches_break), (&b"a%zbA"[..], &[0, 1, 2, 4, 5][..], true));
        let d = decode(b"a%zz b%41").unwrap();
        assert_eq!((d.bytes.as_slice(), d.starts.as_slice(), d.reaches_break), (&b"a%zz bA"[..], &[0, 1, 2, 3, 4, 5, 6][..], false));
        let d = decode(b"&#x\n41;&amp;").unwrap();
        assert_eq!((d.bytes.as_slice(), d.reaches_break), (&b"&#x41;&"[..], true));
    }
}
