//! The redactor: finds every spelling of a remembered secret that a
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
//!   (a fuzz finding, `fuzz/`): decoded, a wrapped secret that holds `\\`, `%%` or `&&`,
//!   or that follows a `%`, no longer spells the secret; joined, it does. The decoded
//!   views drop line breaks too, so an escape-looking byte just before a line break
//!   cannot swallow the first byte of an echo on the next line.
//! - **Fixed encodings** searched as literal patterns (in the text and in each view):
//!   hex of the secret's bytes, form encoding (`+` for space), and base64 / base64url
//!   with and without padding, plus, for base64 inside a longer encoded stream, the
//!   characters that depend on the secret alone at each of the three byte offsets of the
//!   stream (see [`base64_cores`](spellings::base64_cores)).
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
//! only when the text contains `%`, `&` or `\` and an escape decodes, the joined view
//! only when it contains a line break, and the decoded views of the joined view only
//! when they can differ from the text's (an escape, or the start of one, reaches a line
//! break). Linear in the size of the text (`make bench` prints it). A view costs its
//! bytes and a map back to the text that grows with its escapes and line breaks, not
//! with its length (`views::Starts`): an 8 MiB answer of log lines peaks at 24 MiB, one
//! with an escape every few bytes at 44 MiB (`bench_memory`).
//!
//! The automaton holds copies of the patterns that are not zeroed on drop (the secrets
//! themselves are held by the process for its lifetime anyway).

mod spellings;
mod views;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use zeroize::Zeroizing;

use spellings::{bases, spellings_from};
use views::{for_each_view, is_break, is_continuation};

/// Pattern bytes up to which the automaton is a DFA (see [`Redactor::add`]).
const DFA_MAX_PATTERN_BYTES: usize = 4096;

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
        // A DFA searches about twice as fast as the contiguous NFA aho-corasick picks past
        // 100 patterns, at a table of states x byte classes: only while the
        // patterns are small enough for that table to stay within about a MiB.
        let pattern_bytes: usize = self.patterns.iter().map(|(_, p)| p.len()).sum::<usize>() + self.windows.iter().map(|w| w.len).sum::<usize>();
        let kind = if cfg!(fuzzing) {
            // Under cargo-fuzz every comparison is instrumented, and the DFA's
            // construction was 70 % of a fuzz run (a Redactor per input): the contiguous
            // NFA finds exactly the same matches (aho-corasick's contract) and is built
            // in a fraction of the time, so the fuzzer reaches depth.
            Some(aho_corasick::AhoCorasickKind::ContiguousNFA)
        } else {
            (pattern_bytes <= DFA_MAX_PATTERN_BYTES).then_some(aho_corasick::AhoCorasickKind::DFA)
        };
        // Fails only past u32 automaton states (gigabytes of patterns; secrets are at
        // most 64 KiB each): fail closed rather than pass results unscrubbed.
        #[expect(
            clippy::expect_used,
            reason = "fail closed: a result is never passed on unscrubbed, and the build fails only past u32 automaton states, which 64 KiB secrets cannot reach"
        )]
        let ac = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(kind)
            .build(self.patterns.iter().map(|(_, p)| p.as_slice()).chain(windows))
            .expect("the redaction automaton could not be built");
        self.ac = Some(ac);
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
        let ahead = (0..(view.len() - end_view).min(raw.len() - end_raw)).take_while(|i| view[end_view + i].eq_ignore_ascii_case(&raw[end_raw + i])).count();
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

// ---------------------------------------------------------------------------------------
// Scrub first, then cut (issue 31, section 3): a cut made before the search can split a
// secret and leave a prefix too short to be recognised, so the cut is made here, after it.

impl Redactor {
    /// The first `keep` bytes of `text`, redacted as the whole of `text` reads: every echo
    /// that begins before `keep` is replaced whole (one that crosses `keep` ends the output
    /// with its marker), and when `text` is itself a window cut from a longer line
    /// (`window_cut`), a tail that begins a spelling ([`Redactor::tail_match`]) is an echo up
    /// to its end. The cut is made at `keep` in the text's own positions, never in the
    /// redacted output's: a marker shorter than what it replaced would otherwise pull in
    /// bytes past `keep`, up to bytes past what was searched. The flag: something was cut.
    pub fn redact_prefix(&self, text: &[u8], keep: usize, window_cut: bool) -> (Vec<u8>, bool) {
        let mut marks: Vec<(usize, usize, &str)> = self.ranges(text, false).into_iter().map(|(s, e, p)| (s, e, self.pattern_info(p).0)).collect();
        if window_cut && let Some((start, name)) = self.tail_match(text) {
            marks.push((start, text.len(), name));
            marks.sort_by_key(|m| m.0);
        }
        let keep = keep.min(text.len());
        let mut out = Vec::with_capacity(keep + 32);
        let mut at = 0;
        for (start, end, name) in marks {
            if start >= keep.max(at) {
                break;
            }
            if start < at {
                // Overlaps the echo before it (the tail): one marker covers both.
                at = at.max(end);
                continue;
            }
            out.extend_from_slice(&text[at..start]);
            out.extend_from_slice(b"[REDACTED:");
            out.extend_from_slice(name.as_bytes());
            out.push(b']');
            at = end;
        }
        if at < keep {
            out.extend_from_slice(&text[at..keep]);
        }
        (out, window_cut || keep < text.len())
    }
}

#[cfg(test)]
mod tests;
