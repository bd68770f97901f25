//! The redactor (issue 8 point 2): finds every spelling of a remembered secret that a
//! reflecting server plausibly produces, and replaces it with `[REDACTED:<credential>]`.
//!
//! A reflecting server is an encoder applied to the secret. Each encoding family is
//! covered as a class, not by listing examples:
//!
//! - **Letter case**: every pattern is matched ignoring ASCII letter case, so text that
//!   equals a secret (or one of its spellings) ignoring case is redacted. This may
//!   over-redact, which is the safe side. This covers upper/lower/mixed hex, percent
//!   escapes in either case, and a secret echoed upper- or lower-cased.
//! - **Escapes** (percent-encoding of any subset of bytes, `\uXXXX` and surrogate pairs,
//!   `\xHH`, `\"` `\\` `\/` `\'`, HTML references `&#NNN;` `&#xHH;` and `&amp;` `&lt;`
//!   `&gt;` `&quot;` `&apos;`): the text is decoded into a *view* in which every byte
//!   remembers the range of original bytes it came from; patterns are searched in the
//!   view and the match is mapped back to the original range. Decoding is repeated (at
//!   most [`DECODE_PASSES`] times, while it changes something), so double
//!   percent-encoding and mixtures (`&#37;41`) are decoded too. The decoder does not
//!   care whether the text is one JSON value: NDJSON, JSONP and cut JSON are decoded alike.
//! - **Line breaks** (an echo wrapped across lines: MIME base64 at 76 columns,
//!   hard-wrapped text): the *joined* view, the text with its line breaks alone dropped,
//!   is searched as is and decoded like the text. It is kept apart from the decoding
//!   (issue #12, fuzz finding): decoded, a wrapped secret that holds `\\`, `%%` or `&&`,
//!   or that follows a `%`, no longer spells the secret; joined, it does. The decoded
//!   views drop line breaks too, so an escape-looking byte just before a line break
//!   cannot swallow the first byte of an echo on the next line.
//! - **Fixed encodings** searched as literal patterns (in the text and in each view):
//!   hex of the secret's bytes, form encoding (`+` for space), and base64 / base64url
//!   with and without padding, plus, for base64 inside a longer encoded stream, the
//!   characters that depend on the secret alone at each of the three byte offsets of the
//!   stream (see [`base64_cores`]).
//!
//! - **UTF-16**: the secret's UTF-16LE and UTF-16BE bytes (a body in UTF-16, as
//!   Windows servers and some SOAP stacks send, or a NUL-interleaved dump), searched as
//!   literal patterns in the raw bytes (letter case ignored in the low byte of each
//!   ASCII unit). Searched on the raw bytes only: a UTF-16 body is not valid UTF-8, so
//!   it is scrubbed as bytes before it is base64-encoded for the result.
//! - **Long substrings** (an error that quotes the first 20 characters of a token, a
//!   log that cuts a key): any run of at least [`min_run`] consecutive bytes of a secret
//!   (`max(12, ceil(n / 2))` for a secret of `n` bytes) is redacted, in any ASCII letter
//!   case, in the text and in each decoded view (so a percent- or `\u`-escaped run is
//!   found too), not in the fixed encodings (hex, base64, UTF-16: a run of those does
//!   not start at a known offset of the secret's encoding). Half the secret keeps at
//!   least half of its entropy hidden from anyone who sees the rest, and 12 bytes keeps
//!   chance matches with ordinary text out (a secret of 12 bytes or fewer is only
//!   redacted whole). Found through windows of `floor(run / 2)` bytes at that stride,
//!   which every such run contains whole; each window hit is extended along the secret
//!   and kept only when the run reaches the minimum, so the automaton holds about the
//!   secret's own length in window bytes.
//!
//! Every pattern is searched with overlapping matches, so one echo cannot hide another
//! that overlaps it; overlapping and adjacent ranges are merged into one marker.
//!
//! Minimum lengths: the secret itself and its whole spellings are always searched,
//! whatever their length (a very short secret over-redacts; that is the safe side).
//! Derived fragments are searched only from a length that ordinary text does not hit by
//! chance: base64 cores at a shifted offset from [`MIN_CORE_CHARS`] characters (shorter
//! secrets are only caught whole at offset 0), and the password of a `user:password`
//! secret alone from [`MIN_PART_BYTES`] bytes (a `key:` secret, whose password is empty,
//! has the key alone searched instead).
//!
//! Cost: one Aho-Corasick pass over the text and one per view; decoded views are built
//! only when the text contains `%`, `&` or `\`, the joined view only when it contains a
//! line break, and the decoded views of the joined view only when they can differ from
//! the text's (an escape, or the start of one, reaches a line break). Linear in the size
//! of the text (`make bench` prints it).
//!
//! The automaton holds copies of the patterns that are not zeroed on drop (the secrets
//! themselves are held by the process for its lifetime anyway).

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use base64::Engine as _;
use zeroize::Zeroizing;

/// Shortest cut-off secret prefix that a truncated tail is checked against.
pub(crate) const MIN_TAIL_MATCH: usize = 4;

/// How many times a view is decoded again (double percent-encoding needs two).
pub(crate) const DECODE_PASSES: usize = 3;

/// Shortest base64 core (at a shifted offset) that is searched: at 8 characters a chance
/// match in random text is about one in 10^12 per position.
pub const MIN_CORE_CHARS: usize = 8;

/// Shortest part of a `user:password` secret that is searched on its own.
pub const MIN_PART_BYTES: usize = 4;

/// Shortest run of a secret's bytes that is redacted on its own (the substring rule's
/// floor; see the module docs and [`min_run`]).
pub const MIN_RUN_BYTES: usize = 12;

/// The shortest run of consecutive bytes of an `n`-byte secret that is redacted:
/// `max(12, ceil(n / 2))`. A secret of at most that many bytes is only redacted whole.
pub fn min_run(n: usize) -> usize {
    MIN_RUN_BYTES.max(n.div_ceil(2))
}

/// The patterns of every remembered secret and one automaton over all of them.
#[derive(Default)]
pub struct Redactor {
    /// (credential name, pattern), the first pattern ids of the automaton.
    patterns: Vec<(String, Zeroizing<Vec<u8>>)>,
    /// The secrets the substring rule covers, each with its minimum run.
    runs: Vec<Run>,
    /// Windows of those secrets (see the module docs), the automaton's pattern ids after
    /// `patterns`.
    windows: Vec<Window>,
    ac: Option<AhoCorasick>,
    /// Whether some pattern holds a line break (an SSH key file, whole): only then is
    /// text that has line breaks searched as is besides its joined view.
    breaks_in_patterns: bool,
}

/// One found echo: original byte range and the pattern's index (an automaton id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hit {
    start: usize,
    end: usize,
    pattern: usize,
}

/// A secret under the substring rule.
struct Run {
    credential: String,
    raw: Zeroizing<Vec<u8>>,
    /// [`min_run`] of its length.
    min: usize,
}

/// `len` bytes of `runs[run]` from `offset`.
#[derive(Clone, Copy)]
struct Window {
    run: usize,
    offset: usize,
    len: usize,
}

impl Redactor {
    /// Adds the spellings of `raw` under `credential` and rebuilds the automaton.
    pub fn add(&mut self, credential: &str, raw: &str) {
        self.add_parts(credential, raw, MIN_PART_BYTES);
    }

    /// Like [`Redactor::add`] for a redactor that must never match anything shorter than
    /// `min` bytes of a secret (the logger's, `logging.rs`): `raw` is skipped when it is
    /// shorter, and the password of a `user:password` secret is searched alone only from
    /// `min` bytes.
    pub fn add_min(&mut self, credential: &str, raw: &str, min: usize) {
        if raw.len() >= min {
            self.add_parts(credential, raw, min.max(MIN_PART_BYTES));
        }
    }

    fn add_parts(&mut self, credential: &str, raw: &str, min_part: usize) {
        // A spelling shared by two credentials is kept for each, so each is told apart
        // (`on_echo` is per credential).
        for p in spellings_from(raw, min_part) {
            if !self.patterns.iter().any(|(n, q)| n == credential && q.eq_ignore_ascii_case(&p)) {
                self.breaks_in_patterns |= p.iter().copied().any(is_break);
                self.patterns.push((credential.to_owned(), p));
            }
        }
        for base in bases(raw, min_part) {
            let (n, min) = (base.len(), min_run(base.len()));
            if n <= min || self.runs.iter().any(|r| r.credential == credential && r.raw.eq_ignore_ascii_case(base.as_bytes())) {
                continue;
            }
            let run = self.runs.len();
            self.runs.push(Run { credential: credential.to_owned(), raw: Zeroizing::new(base.as_bytes().to_vec()), min });
            // Every run of `min` bytes holds one of these windows whole (module docs).
            let len = min / 2;
            self.windows.extend((0..=n - len).step_by(len).map(|offset| Window { run, offset, len }));
        }
        let windows = self.windows.iter().map(|w| &self.runs[w.run].raw[w.offset..w.offset + w.len]);
        // Fails only past u32 automaton states (gigabytes of patterns; secrets are at
        // most 64 KiB each): fail closed rather than pass results unscrubbed.
        self.ac = Some(
            AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .match_kind(MatchKind::Standard)
                .build(self.patterns.iter().map(|(_, p)| p.as_slice()).chain(windows))
                .expect("the redaction automaton could not be built"),
        );
    }

    /// The credential of automaton pattern `id`, and the length of what it stands for
    /// (a spelling, or the secret a window is part of).
    fn pattern_info(&self, id: usize) -> (&str, usize) {
        match self.patterns.get(id) {
            Some((name, p)) => (name, p.len()),
            None => {
                let run = &self.runs[self.windows[id - self.patterns.len()].run];
                (&run.credential, run.raw.len())
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    pub fn len(&self) -> usize {
        self.patterns.len()
    }

    /// Every spelling with its credential (for the cut-tail check).
    pub fn patterns(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.patterns.iter().map(|(n, p)| (n.as_str(), p.as_slice()))
    }

    /// The credentials whose secret appears in `text` in any spelling.
    pub fn echoed(&self, text: &[u8]) -> Vec<&str> {
        let mut names: Vec<&str> = self.hits(text).iter().map(|h| self.pattern_info(h.pattern).0).collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// `text` with every echo replaced; `None` when there is none (no copy made).
    pub fn redact(&self, text: &[u8]) -> Option<Vec<u8>> {
        let ranges = self.ranges(text, false);
        if ranges.is_empty() {
            return None;
        }
        Some(self.apply(text, &ranges))
    }

    /// The same for a string; ranges are widened to character boundaries.
    pub fn redact_str(&self, text: &str) -> Option<String> {
        let ranges = self.ranges(text.as_bytes(), true);
        if ranges.is_empty() {
            return None;
        }
        String::from_utf8(self.apply(text.as_bytes(), &ranges)).ok()
    }

    /// Redacts strings read as one text (header names and values in order): an echo split
    /// across two of them is found, and each piece is replaced in its own string.
    pub fn redact_segments(&self, segments: &mut [String]) {
        if self.is_empty() {
            return;
        }
        let refs: Vec<&str> = segments.iter().map(String::as_str).collect();
        let local = self.segment_ranges(&refs);
        for (seg, ranges) in segments.iter_mut().zip(local) {
            self.apply_str(seg, ranges);
        }
    }

    /// Per segment, the ranges (local to it) of the echoes found when `segments` are read
    /// as one text.
    fn segment_ranges(&self, segments: &[&str]) -> Vec<Vec<(usize, usize, usize)>> {
        let joined: String = segments.concat();
        let ranges = self.ranges(joined.as_bytes(), true);
        let mut base = 0;
        segments
            .iter()
            .map(|seg| {
                let (lo, hi) = (base, base + seg.len());
                base = hi;
                ranges.iter().filter(|(s, e, _)| *s < hi && *e > lo).map(|(s, e, p)| ((*s).max(lo) - lo, (*e).min(hi) - lo, *p)).collect()
            })
            .collect()
    }

    /// Replaces these ranges (any order, overlapping allowed) of `s`.
    fn apply_str(&self, s: &mut String, mut ranges: Vec<(usize, usize, usize)>) {
        if ranges.is_empty() {
            return;
        }
        ranges.sort_unstable_by_key(|(s, e, _)| (*s, std::cmp::Reverse(*e)));
        let mut merged: Vec<(usize, usize, usize)> = Vec::new();
        for (start, end, p) in ranges {
            match merged.last_mut() {
                Some((_, e, q)) if start <= *e => {
                    *e = (*e).max(end);
                    if self.pattern_info(p).1 > self.pattern_info(*q).1 {
                        *q = p;
                    }
                }
                _ => merged.push((start, end, p)),
            }
        }
        if let Ok(out) = String::from_utf8(self.apply(s.as_bytes(), &merged)) {
            *s = out;
        }
    }

    /// Header lines as a server sent them: read as one text with names and values in
    /// order (an echo in a name, or split between a value and the next name), then the
    /// values alone and the names alone, each in order (an echo split across two
    /// consecutive header lines). Every reading is of the headers as they came, and all
    /// that any of them finds is replaced at once: a reading that replaced part of an
    /// echo first could leave the rest too short to be found by the next.
    pub fn redact_headers(&self, headers: &mut [(String, String)]) {
        if self.is_empty() {
            return;
        }
        let all: Vec<&str> = headers.iter().flat_map(|(n, v)| [n.as_str(), v.as_str()]).collect();
        let values: Vec<&str> = headers.iter().map(|(_, v)| v.as_str()).collect();
        let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
        let (mut in_names, mut in_values): (Vec<Vec<_>>, Vec<Vec<_>>) = (Vec::new(), Vec::new());
        for (i, r) in self.segment_ranges(&all).into_iter().enumerate() {
            if i % 2 == 0 { in_names.push(r) } else { in_values.push(r) }
        }
        for (mine, more) in in_values.iter_mut().zip(self.segment_ranges(&values)) {
            mine.extend(more);
        }
        for (mine, more) in in_names.iter_mut().zip(self.segment_ranges(&names)) {
            mine.extend(more);
        }
        for ((n, v), (rn, rv)) in headers.iter_mut().zip(in_names.into_iter().zip(in_values)) {
            self.apply_str(n, rn);
            self.apply_str(v, rv);
        }
    }

    fn apply(&self, text: &[u8], ranges: &[(usize, usize, usize)]) -> Vec<u8> {
        let mut out = Vec::with_capacity(text.len());
        let mut at = 0;
        for &(s, e, p) in ranges {
            out.extend_from_slice(&text[at..s]);
            out.extend_from_slice(b"[REDACTED:");
            out.extend_from_slice(self.pattern_info(p).0.as_bytes());
            out.push(b']');
            at = e;
        }
        out.extend_from_slice(&text[at..]);
        out
    }

    /// Merged, sorted ranges `(start, end, pattern of the longest hit)`.
    fn ranges(&self, text: &[u8], char_boundaries: bool) -> Vec<(usize, usize, usize)> {
        let mut hits = self.hits(text);
        if hits.is_empty() {
            return Vec::new();
        }
        if char_boundaries {
            for h in &mut hits {
                while h.start > 0 && is_continuation(text[h.start]) {
                    h.start -= 1;
                }
                while h.end < text.len() && is_continuation(text[h.end]) {
                    h.end += 1;
                }
            }
        }
        hits.sort_unstable_by_key(|h| (h.start, std::cmp::Reverse(h.end)));
        let mut out: Vec<(usize, usize, usize)> = Vec::new();
        for h in hits {
            match out.last_mut() {
                Some((_, e, p)) if h.start <= *e => {
                    if h.end > *e {
                        *e = h.end;
                    }
                    if self.pattern_info(h.pattern).1 > self.pattern_info(*p).1 {
                        *p = h.pattern;
                    }
                }
                _ => out.push((h.start, h.end, h.pattern)),
            }
        }
        out
    }

    fn hits(&self, text: &[u8]) -> Vec<Hit> {
        let Some(ac) = &self.ac else { return Vec::new() };
        let mut hits = Vec::new();
        let spellings = self.patterns.len();
        for_each_view(text, self.breaks_in_patterns, |view, map| {
            for m in ac.find_overlapping_iter(view) {
                let id = m.pattern().as_usize();
                let (start, end) = match id.checked_sub(spellings) {
                    None => (m.start(), m.end()),
                    Some(w) => match self.extend_window(self.windows[w], view, m.start()) {
                        Some(run) => run,
                        None => continue,
                    },
                };
                let (start, end) = map.range(text, start, end);
                hits.push(Hit { start, end, pattern: id });
            }
        });
        hits
    }

    /// A window of a secret found at `at` in `view`: the run of the secret's bytes
    /// around it (same alignment, ASCII case ignored), if it is at least the secret's
    /// minimum run long.
    fn extend_window(&self, w: Window, view: &[u8], at: usize) -> Option<(usize, usize)> {
        let run = &self.runs[w.run];
        let raw = &run.raw[..];
        let back = (1..=w.offset.min(at)).take_while(|i| view[at - i].eq_ignore_ascii_case(&raw[w.offset - i])).count();
        let (end_view, end_raw) = (at + w.len, w.offset + w.len);
        let ahead = (0..(view.len() - end_view).min(raw.len() - end_raw))
            .take_while(|i| view[end_view + i].eq_ignore_ascii_case(&raw[end_raw + i]))
            .count();
        (back + w.len + ahead >= run.min).then_some((at - back, end_view + ahead))
    }

    /// For text cut at a limit: where a tail that begins some spelling starts (the
    /// earliest such start), in the text or in a decoded view of it, and the credential.
    /// A tail counts from [`MIN_TAIL_MATCH`] bytes of the spelling (or
    /// all but its last byte, if it is shorter). An escape cut in the middle at the very
    /// end (`%4`, `&#11`, `\u00`) is set aside, so what precedes it is still read
    /// decoded, and it is replaced along with the tail.
    pub fn tail_match(&self, text: &[u8]) -> Option<(usize, &str)> {
        let longest = self.patterns.iter().map(|(_, p)| p.len()).max()?;
        // Only the end matters: at most 12 encoded bytes per byte of a spelling.
        let from = text.len().saturating_sub(12 * longest + 16);
        let window = &text[from..];
        let mut ends = vec![window.len()];
        let near = window.len().saturating_sub(12);
        if let Some(p) = window[near..].iter().rposition(|b| matches!(b, b'%' | b'&' | b'\\')) {
            ends.push(near + p);
        }
        let mut best: Option<(usize, usize)> = None;
        for end in ends {
            for_each_view(&window[..end], self.breaks_in_patterns, |view, map| {
                for (idx, (_, pattern)) in self.patterns.iter().enumerate() {
                    let needle = pattern.as_slice();
                    let shortest = MIN_TAIL_MATCH.min(needle.len().saturating_sub(1)).max(1);
                    let most = needle.len().saturating_sub(1).min(view.len());
                    let found = (shortest..=most).rev().find(|k| {
                        let tail = &view[view.len() - k..];
                        tail[0].eq_ignore_ascii_case(&needle[0]) && tail.eq_ignore_ascii_case(&needle[..*k])
                    });
                    if let Some(k) = found {
                        let at = view.len() - k;
                        let start = from + map.start(at);
                        if best.is_none_or(|(b, _)| start < b) {
                            best = Some((start, idx));
                        }
                    }
                }
            });
        }
        best.map(|(start, idx)| (start, self.patterns[idx].0.as_str()))
    }
}

/// Calls `f` with each view of `text` and its [`Map`] back to `text` (text without
/// `%`, `&`, `\` or a line break has one view, itself). The views (issue #12, fuzz
/// finding):
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
fn for_each_view(text: &[u8], breaks_in_patterns: bool, mut f: impl FnMut(&[u8], Map<'_>)) {
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
enum Map<'a> {
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
    fn start(&self, i: usize) -> usize {
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
    fn range(&self, text: &[u8], start: usize, end: usize) -> (usize, usize) {
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
fn decoded_views(total: usize, mut view: Vec<u8>, mut starts: Vec<u32>, f: &mut impl FnMut(&[u8], Map<'_>)) {
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
fn drop_breaks(t: &[u8]) -> (Vec<u8>, Vec<(u32, u32)>) {
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
fn joined_starts(gaps: &[(u32, u32)], local: &[u32], total: usize) -> Vec<u32> {
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

fn is_break(b: u8) -> bool {
    matches!(b, b'\n' | b'\r')
}

fn is_continuation(b: u8) -> bool {
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
struct Decoded {
    bytes: Vec<u8>,
    starts: Vec<u32>,
    /// Whether the reading of some escape (or of bytes that begin like one) looked as far
    /// as a line break: only then can the input with its line breaks dropped decode
    /// differently (an escape split by the break, `%4` `\n` `1`, or joined with what
    /// follows it, `&#12` `\n` `3;`, `%` `\n` `ab`).
    reaches_break: bool,
}

/// One decoding pass over `t`: `None` if nothing in it decodes.
fn decode(t: &[u8]) -> Option<Decoded> {
    let mut out = Vec::with_capacity(t.len());
    let mut starts: Vec<u32> = Vec::with_capacity(t.len() + 1);
    let mut changed = false;
    let mut reaches_break = false;
    let mut i = 0;
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

/// The literal patterns for one secret: the secret, its form, hex, JSON, base64 and
/// UTF-16 spellings, and the base64 cores; for `user:password`, the password's too,
/// when it is at least `min_part` bytes. Every intermediate buffer that holds a
/// spelling is zeroed when dropped.
fn spellings_from(raw: &str, min_part: usize) -> Vec<Zeroizing<Vec<u8>>> {
    let mut out: Vec<Zeroizing<Vec<u8>>> = bases(raw, min_part).into_iter().flat_map(one_secret).collect();
    out.retain(|v| !v.is_empty());
    out.sort_by(|a, b| a.as_slice().cmp(b.as_slice()));
    out.dedup_by(|a, b| a.as_slice() == b.as_slice());
    out
}

/// The values searched for on their own: the secret, and for `user:password` the
/// password (from `min_part` bytes), or for `key:` the key.
fn bases(raw: &str, min_part: usize) -> Vec<&str> {
    let mut out = vec![raw];
    if let Some((user, password)) = raw.split_once(':') {
        if password.len() >= min_part {
            out.push(password);
        } else if password.is_empty() && !user.is_empty() {
            // `key:` (an API key as the user name, no password, as some APIs do).
            out.push(user);
        }
    }
    out
}

fn one_secret(raw: &str) -> Vec<Zeroizing<Vec<u8>>> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    use std::fmt::Write as _;
    let pct = |all: bool| -> Zeroizing<String> {
        let mut s = Zeroizing::new(String::with_capacity(raw.len() * 3));
        for b in raw.bytes() {
            if !all && (b.is_ascii_alphanumeric() || b"-._~".contains(&b)) {
                s.push(b as char);
            } else {
                let _ = write!(s, "%{b:02X}");
            }
        }
        s
    };
    let mut hex = Zeroizing::new(String::with_capacity(raw.len() * 2));
    for b in raw.bytes() {
        let _ = write!(hex, "{b:02x}");
    }
    let json = Zeroizing::new(serde_json::to_string(raw).unwrap_or_default());
    let mut out = vec![
        Zeroizing::new(raw.to_owned()),
        pct(false),
        pct(true),
        Zeroizing::new(url::form_urlencoded::byte_serialize(raw.as_bytes()).collect()),
        Zeroizing::new(json.get(1..json.len().saturating_sub(1)).unwrap_or_default().to_owned()),
        hex,
        Zeroizing::new(STANDARD.encode(raw)),
        Zeroizing::new(STANDARD_NO_PAD.encode(raw)),
        Zeroizing::new(URL_SAFE.encode(raw)),
        Zeroizing::new(URL_SAFE_NO_PAD.encode(raw)),
    ];
    for core in base64_cores(raw.as_bytes()) {
        out.push(Zeroizing::new(core.replace('+', "-").replace('/', "_")));
        out.push(core);
    }
    let mut out: Vec<Zeroizing<Vec<u8>>> = out.into_iter().map(|s| Zeroizing::new(s.as_bytes().to_vec())).collect();
    let (mut le, mut be) = (Zeroizing::new(Vec::with_capacity(2 * raw.len())), Zeroizing::new(Vec::with_capacity(2 * raw.len())));
    for unit in raw.encode_utf16() {
        le.extend_from_slice(&unit.to_le_bytes());
        be.extend_from_slice(&unit.to_be_bytes());
    }
    out.push(le);
    out.push(be);
    out
}

/// For a secret at byte offset k (0, 1, 2) of a base64-encoded stream, the encoded
/// characters whose six bits all come from the secret: they are the same whatever
/// precedes or follows it. Characters that mix the secret's bits with its neighbours'
/// (at most one at each end) cannot be predicted and are not part of the pattern.
pub(crate) fn base64_cores(secret: &[u8]) -> Vec<Zeroizing<String>> {
    use base64::engine::general_purpose::STANDARD_NO_PAD;
    let n = secret.len();
    let mut out = Vec::new();
    for k in 0..3usize {
        let mut buf = Zeroizing::new(vec![0u8; k]);
        buf.extend_from_slice(secret);
        let enc = Zeroizing::new(STANDARD_NO_PAD.encode(&*buf));
        let first = (8 * k).div_ceil(6);
        let last = 8 * (k + n) / 6;
        if last > first && last - first >= MIN_CORE_CHARS {
            out.push(Zeroizing::new(enc[first..last].to_owned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};

    const SECRET: &str = "Tk9-s3cr3t/Val+ue_é!\"<&>";
    const CANARY: &str = "CANARY-8f2Zq";

    fn redactor() -> Redactor {
        let mut r = Redactor::default();
        r.add("c", SECRET);
        r
    }

    /// Plants `echo` at several offsets in several contexts; each time no byte of the
    /// echo may survive and the surroundings must.
    fn assert_all_redacted(r: &Redactor, family: &str, echoes: &[String]) {
        let contexts = ["{}", "x{}y", "{\"k\":\"{}\"}\n{\"k\":2}", "cb({\"v\":\"{}\"", "<p>{}</p>", "a=1&b={}&c=2", "{}{}"];
        for echo in echoes {
            for ctx in contexts {
                for pad in ["", "a", "ab", "abc"] {
                    let text = format!("{pad}{}", ctx.replace("{}", echo));
                    let out = r.redact(text.as_bytes()).unwrap_or_else(|| panic!("{family}: not found: {text:?}"));
                    let out = String::from_utf8_lossy(&out).into_owned();
                    assert!(out.contains("[REDACTED:c]"), "{family}: {text:?} -> {out:?}");
                    assert!(!out.contains(echo.as_str()), "{family}: echo survived: {text:?} -> {out:?}");
                    assert!(out.starts_with(pad), "{family}: prefix eaten: {text:?} -> {out:?}");
                }
            }
        }
    }

    #[test]
    fn family_letter_case() {
        let r = redactor();
        // ASCII letters only: "é" is not folded (documented)
        assert_all_redacted(&r, "case", &[SECRET.to_ascii_uppercase(), SECRET.to_ascii_lowercase(), SECRET.to_owned()]);
    }

    #[test]
    fn family_hex_either_case() {
        let r = redactor();
        let lower: String = SECRET.bytes().map(|b| format!("{b:02x}")).collect();
        let mixed: String = lower.chars().enumerate().map(|(i, c)| if i % 3 == 0 { c.to_ascii_uppercase() } else { c }).collect();
        assert_all_redacted(&r, "hex", &[lower.clone(), lower.to_uppercase(), mixed]);
    }

    #[test]
    fn family_percent_every_byte_either_case_and_double() {
        let r = redactor();
        let all_upper: String = SECRET.bytes().map(|b| format!("%{b:02X}")).collect();
        let all_lower: String = SECRET.bytes().map(|b| format!("%{b:02x}")).collect();
        let minimal: String = url::form_urlencoded::byte_serialize(SECRET.as_bytes()).collect();
        let double: String = all_upper.replace('%', "%25");
        let double_lower: String = all_lower.replace('%', "%25");
        let some: String = SECRET.bytes().enumerate().map(|(i, b)| if i % 2 == 0 { format!("%{b:02x}") } else { (b as char).to_string() }).collect::<String>();
        // `some` above is only well-formed for ASCII bytes; keep the UTF-8 ones encoded.
        let some: String = if some.is_ascii() { some } else { all_upper.clone() };
        assert_all_redacted(&r, "percent", &[all_upper, all_lower, minimal, double, double_lower, some]);
    }

    #[test]
    fn family_html_references_decimal_and_hex() {
        let r = redactor();
        let dec: String = SECRET.chars().map(|c| format!("&#{};", c as u32)).collect();
        let hex: String = SECRET.chars().map(|c| format!("&#x{:X};", c as u32)).collect();
        let hex_lower: String = SECRET.chars().map(|c| format!("&#x{:x}", c as u32)).collect();
        let named = SECRET.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
        assert_all_redacted(&r, "html", &[dec, hex, hex_lower, named]);
    }

    #[test]
    fn family_unicode_escapes_outside_one_json_value() {
        let r = redactor();
        let every: String = SECRET.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
        let json = serde_json::to_string(SECRET).unwrap();
        let json = json[1..json.len() - 1].to_owned();
        let ascii_json: String = SECRET
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c.to_string() } else { format!("\\u{:04X}", c as u32) })
            .collect();
        let slash = SECRET.replace('/', "\\/");
        assert_all_redacted(&r, "unicode", &[every, json, ascii_json, slash]);
        // astral characters as a surrogate pair
        let mut r2 = Redactor::default();
        r2.add("c", "key-😀-secret");
        assert_all_redacted(&r2, "surrogates", &["key-\\ud83d\\ude00-secret".to_owned()]);
    }

    #[test]
    fn family_base64_at_every_byte_offset() {
        let r = redactor();
        let mut echoes = Vec::new();
        for lead in ["", "a", "ab", "abc", "abcd"] {
            for trail in ["", "z", "zz", "zzz"] {
                let stream = format!("{lead}{SECRET}{trail}");
                for e in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
                    let enc = e.encode(&stream);
                    // the echo that must not survive: the core part
                    echoes.push(enc);
                }
            }
        }
        let contexts = ["{}", "x {} y", "{\"t\":\"{}\"}"];
        for echo in &echoes {
            for ctx in contexts {
                let text = ctx.replace("{}", echo);
                let out = String::from_utf8(r.redact(text.as_bytes()).unwrap_or_else(|| panic!("not found: {text}"))).unwrap();
                // what is left of the encoded stream decodes to no more than 2 bytes of the secret
                assert!(out.contains("[REDACTED:c]"), "{text} -> {out}");
                let core_left = base64_cores(SECRET.as_bytes()).iter().any(|c| out.contains(c.as_str()));
                assert!(!core_left, "{text} -> {out}");
            }
        }
    }

    #[test]
    fn basic_password_alone_and_user_password() {
        let mut r = Redactor::default();
        r.add("b", "alice:pw-Zx81!q");
        for text in ["pw-Zx81!q", "PW-ZX81!Q", "alice:pw-Zx81!q", "pw-Zx81%21q", "cHctWng4MSFx"] {
            let out = String::from_utf8(r.redact(format!("[{text}]").as_bytes()).unwrap_or_else(|| panic!("{text}"))).unwrap();
            assert_eq!(out, "[[REDACTED:b]]", "{text}");
        }
        // the user name alone is not a secret
        assert_eq!(r.redact(b"alice"), None);
        // ... unless the password is empty: then the user name is the key
        let mut r = Redactor::default();
        r.add("k", "sk_live_Zx81q9:");
        let out = String::from_utf8(r.redact(b"[SK_LIVE_ZX81Q9]").expect("the key alone")).unwrap();
        assert_eq!(out, "[[REDACTED:k]]");
    }

    #[test]
    fn header_names_and_split_values() {
        let r = redactor();
        let half = SECRET.len() / 2;
        let mut headers = vec![
            ("x-echo".to_owned(), SECRET[..half].to_owned()),
            ("x-echo".to_owned(), SECRET[half..].to_owned()),
            (SECRET.to_ascii_uppercase(), "v".to_owned()),
            ("x-a".to_owned(), format!("1{}", &SECRET[..3])),
            (SECRET[3..].to_owned(), "2".to_owned()),
        ];
        r.redact_headers(&mut headers);
        let want = [
            ("x-echo", "[REDACTED:c]"),
            ("x-echo", "[REDACTED:c]"),
            ("[REDACTED:c]", "v"),
            ("x-a", "1[REDACTED:c]"),
            ("[REDACTED:c]", "2"),
        ];
        let got: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn cut_tail_of_an_encoded_secret_is_found_in_the_decoded_view() {
        let r = redactor();
        let html: Vec<String> = SECRET.chars().map(|c| format!("&#{};", c as u32)).collect();
        let pct: Vec<String> = SECRET.bytes().map(|b| format!("%{b:02x}")).collect();
        let double: Vec<String> = pct.iter().map(|u| u.replace('%', "%25")).collect();
        let uesc: Vec<String> = SECRET.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
        let hex: Vec<String> = SECRET.bytes().map(|b| format!("{b:02X}")).collect();
        for (family, units) in [("html", &html), ("percent", &pct), ("double percent", &double), ("unicode", &uesc), ("hex", &hex)] {
            let enc = units.concat();
            // every cut from 4 whole units (the minimum) to one byte before the end,
            // including cuts inside an escape
            let first = units[..4].concat().len();
            for cut in first..enc.len() - 1 {
                let text = format!("head {}", &enc[..cut]);
                let (start, name) = r.tail_match(text.as_bytes()).unwrap_or_else(|| panic!("{family}: cut {cut} not found: {text}"));
                assert_eq!((start, name), (5, "c"), "{family}: cut {cut}: {text}");
            }
        }
        assert_eq!(r.tail_match(b"head &#84;&#107;"), None, "two decoded bytes are below the minimum");
        assert_eq!(r.tail_match(b"nothing %41 &amp; here"), None);
    }

    #[test]
    fn family_line_wrapped_echoes() {
        let r = redactor();
        let b64 = STANDARD.encode(format!("x{SECRET}yz"));
        let mime: String = b64.as_bytes().chunks(7).map(|c| format!("{}\r\n", std::str::from_utf8(c).unwrap())).collect();
        let wrapped = format!("{}\n{}", &SECRET[..5], &SECRET[5..]);
        for text in [mime, wrapped] {
            let out = String::from_utf8(r.redact(text.as_bytes()).unwrap_or_else(|| panic!("{text:?}"))).unwrap();
            assert!(out.contains("[REDACTED:c]"), "{text:?} -> {out:?}");
            assert!(!out.contains("s3cr3t") && !out.contains("3t/V"), "{text:?} -> {out:?}");
        }
        // a match right before a line break keeps the line break
        let out = r.redact(format!("a {SECRET}\nb").as_bytes()).unwrap();
        assert_eq!(out, b"a [REDACTED:c]\nb");
        let out = r.redact(format!("a {}\nb", SECRET.replace('/', "%2F")).as_bytes()).unwrap();
        assert_eq!(out, b"a [REDACTED:c]\nb");
    }

    /// The decoded views of the joined view are skipped when no escape reaches a line
    /// break, on the claim that they equal the decoded views of the text then: checked
    /// on texts dense in escapes, escape fragments and line breaks.
    #[test]
    fn joined_view_decodes_alike_unless_an_escape_reaches_a_break() {
        const ALPHABET: &[u8] = b"\n\n\r%%&&\\\\#;xXuU0123456789aAfFdD8gq ";
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let (mut same, mut differ) = (0, 0);
        for _ in 0..20_000 {
            let len = 1 + (state % 40) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    ALPHABET[(state % ALPHABET.len() as u64) as usize]
                })
                .collect();
            let Some(d) = decode(&text) else { continue };
            let (joined, gaps) = drop_breaks(&text);
            let identity: Vec<u32> = (0..joined.len() as u32).collect();
            let j = decode(&joined).map(|j| (j.bytes, joined_starts(&gaps, &j.starts, text.len())));
            let mut d_starts = d.starts.clone();
            d_starts.push(text.len() as u32);
            let alike = j.as_ref() == Some(&(d.bytes.clone(), d_starts.clone()))
                || (j.is_none() && d.bytes == joined && d_starts == joined_starts(&gaps, &identity, text.len()));
            if d.reaches_break {
                differ += usize::from(!alike);
            } else {
                assert!(alike, "{:?}: {:?} vs {:?}", String::from_utf8_lossy(&text), String::from_utf8_lossy(&d.bytes), j);
                same += 1;
            }
        }
        // both sides of the claim were exercised
        assert!(same > 1000 && differ > 100, "same {same}, differ {differ}");
    }

    #[test]
    fn a_secret_shared_by_two_credentials_is_reported_for_both() {
        let mut r = Redactor::default();
        r.add("a", "shared-secret-value");
        r.add("b", "shared-secret-value");
        assert_eq!(r.echoed(b"x SHARED-secret-value y"), ["a", "b"]);
    }

    #[test]
    fn overlapping_secrets_are_both_removed() {
        let mut r = Redactor::default();
        r.add("a", "xxABCsecret1");
        r.add("b", "secret1DEFyy");
        let out = String::from_utf8(r.redact(b"<xxABCsecret1DEFyy>").unwrap()).unwrap();
        assert!(!out.contains("DEF") && !out.contains("ABC"), "{out}");
    }

    #[test]
    fn clean_text_is_not_copied_and_canary_free_text_is_unchanged() {
        let r = redactor();
        assert_eq!(r.redact(format!("{CANARY} %41 &amp; \\u0041 plain").as_bytes()), None);
        assert_eq!(r.redact_str("caf\u{e9} %C3%A9"), None);
    }

    #[test]
    fn string_redaction_keeps_utf8() {
        let mut r = Redactor::default();
        r.add("c", "sécret-value");
        // %C3 decodes to the first byte of é: the range widens to whole characters
        let out = r.redact_str("é%C3%A9 s%C3%A9cret-value é").unwrap();
        assert_eq!(out, "é%C3%A9 [REDACTED:c] é");
    }

    /// Issue #20: UTF-16LE and UTF-16BE spellings, in the raw bytes, any ASCII case, with
    /// or without a BOM, at odd and even offsets.
    #[test]
    fn family_utf16_either_byte_order() {
        let r = redactor();
        for (order, units) in [("le", SECRET.encode_utf16().flat_map(u16::to_le_bytes).collect::<Vec<u8>>()), ("be", SECRET.encode_utf16().flat_map(u16::to_be_bytes).collect())] {
            let upper: Vec<u8> = units.iter().map(u8::to_ascii_uppercase).collect();
            for echo in [&units, &upper] {
                // (A NUL right before or after the echo may be taken with it: both byte
                // orders read the same bytes shifted by one. Not tested here.)
                for lead in [&b""[..], b"\xff\xfe", b"\xfe\xff", b"x", b"\x00a"] {
                    let text = [lead, &echo[..], b"tail"].concat();
                    let out = r.redact(&text).unwrap_or_else(|| panic!("{order}: not found after {lead:?}"));
                    assert_eq!(out, [lead, &b"[REDACTED:c]"[..], b"tail"].concat(), "{order}");
                }
            }
        }
        // ordinary UTF-16 text is left alone
        let plain: Vec<u8> = "nothing to see here".encode_utf16().flat_map(u16::to_le_bytes).collect();
        assert_eq!(r.redact(&plain), None);
    }

    /// Issue #20: any run of at least max(12, ceil(n / 2)) bytes of a secret is redacted,
    /// wherever it starts in the secret, in any ASCII case and in a decoded view; shorter
    /// runs, and text that only shares scattered bytes with it, are not.
    #[test]
    fn long_substrings_of_a_secret_are_redacted() {
        let token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"; // 40 bytes: runs of 20
        let mut r = Redactor::default();
        r.add("t", token);
        assert_eq!(min_run(token.len()), 20);
        for start in 0..=token.len() - 20 {
            for len in [20, 21, 27, token.len() - start] {
                let Some(run) = token.get(start..start + len) else { continue };
                for echo in [run.to_owned(), run.to_ascii_uppercase(), run.bytes().map(|b| format!("%{b:02X}")).collect()] {
                    let text = format!("error: bad token '{echo}' (truncated)");
                    let out = String::from_utf8(r.redact(text.as_bytes()).unwrap_or_else(|| panic!("{start}+{len}: {text}"))).unwrap();
                    assert_eq!(out, "error: bad token '[REDACTED:t]' (truncated)", "{start}+{len}");
                }
            }
            // 19 bytes are below the rule: left as they are
            let short = format!("x {} y", &token[start..start + 19]);
            assert_eq!(r.redact(short.as_bytes()), None, "{short}");
        }
        // A run that extends past a window on both sides is taken whole, as one marker.
        let out = r.redact(format!("<{}|{}>", &token[..25], &token[15..]).as_bytes()).unwrap();
        assert_eq!(out, b"<[REDACTED:t]|[REDACTED:t]>");
        // Short secrets: only whole (12 bytes and below have no shorter run).
        let mut r = Redactor::default();
        r.add("s", "Zq81-xk2-Pw0");
        assert_eq!(r.redact(b"Zq81-xk2-Pw"), None);
        assert_eq!(r.redact(b"<Zq81-xk2-Pw0>").unwrap(), b"<[REDACTED:s]>");
        // A long secret's run of exactly half.
        let long = "abcdefghijklmnopqrstuvwxyz0123456789-_.~+/=!#$%^*()[]{}<>?;:"; // 60 bytes: runs of 30
        let mut r = Redactor::default();
        r.add("l", long);
        assert_eq!(r.redact(&long.as_bytes()[10..40]).unwrap(), b"[REDACTED:l]");
        assert_eq!(r.redact(&long.as_bytes()[10..39]), None);
    }

    /// The logger's redactor (`add_min`) never holds a spelling of anything shorter than
    /// its minimum.
    #[test]
    fn add_min_skips_what_is_shorter() {
        let mut r = Redactor::default();
        r.add_min("a", "abc", 8);
        r.add_min("b", "alice:pw12", 8);
        assert!(r.patterns().all(|(n, _)| n == "b"));
        assert_eq!(r.redact(b"pw12 and abc"), None);
        assert_eq!(r.redact(b"[alice:pw12]").unwrap(), b"[[REDACTED:b]]");
    }

    /// The new checks of `fuzz/fuzz_targets/redactor.rs` (UTF-16 both orders, a run of
    /// `min_run` bytes as is and upper-cased), run here over pseudo-random secrets and
    /// bodies dense in escapes, line breaks and NULs, so they hold without a fuzzer too.
    #[test]
    fn the_fuzz_targets_new_spellings_hold_on_random_inputs() {
        const SECRET_BYTES: &[u8] = b"abcXYZ019-_.~%&\\\"'/+=:;#xu \xc3\xa9";
        const BODY_BYTES: &[u8] = b"ab \n\r\0%&\\#;xu0123456789AF\"";
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let strip = |out: &[u8]| {
            let marker = b"[REDACTED:c]";
            let (mut v, mut i) = (Vec::new(), 0);
            while i < out.len() {
                if out[i..].starts_with(marker) {
                    v.push(1);
                    i += marker.len();
                } else {
                    v.push(out[i]);
                    i += 1;
                }
            }
            v
        };
        let contains_ci = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle));
        for _ in 0..3000 {
            let len = 1 + next(48);
            let raw: Vec<u8> = (0..len).map(|_| SECRET_BYTES[next(SECRET_BYTES.len())]).collect();
            let Ok(secret) = String::from_utf8(raw) else { continue };
            let mut r = Redactor::default();
            r.add("c", &secret);
            let body: Vec<u8> = (0..next(40)).map(|_| BODY_BYTES[next(BODY_BYTES.len())]).collect();
            let at = next(body.len() + 1);
            let plant = |spelling: &[u8]| {
                let mut text = body[..at].to_vec();
                let before = body[..at].iter().rev().filter(|b| !matches!(b, b'\n' | b'\r'));
                if spelling.starts_with(b"\\") && before.take_while(|b| **b == b'\\').count() % 2 == 1 {
                    text.push(b' ');
                }
                text.extend_from_slice(spelling);
                text.extend_from_slice(&body[at..]);
                text
            };
            let le: Vec<u8> = secret.encode_utf16().flat_map(u16::to_le_bytes).collect();
            let be: Vec<u8> = secret.encode_utf16().flat_map(u16::to_be_bytes).collect();
            let mut cases = vec![("le", le.clone(), le), ("be", be.clone(), be)];
            let (n, run) = (secret.len(), min_run(secret.len()));
            if n > run {
                let from = next(n - run + 1);
                let part = secret.as_bytes()[from..from + run].to_vec();
                cases.push(("run", part.clone(), part.clone()));
                cases.push(("run-upper", part.to_ascii_uppercase(), part));
            }
            for (what, planted, needle) in cases {
                let text = plant(&planted);
                let out = r.redact(&text).unwrap_or_else(|| text.clone());
                assert!(
                    !contains_ci(&strip(&out), &needle),
                    "{what} of {secret:?} survived: {:?} -> {:?}",
                    String::from_utf8_lossy(&text),
                    String::from_utf8_lossy(&out)
                );
            }
        }
    }
}
