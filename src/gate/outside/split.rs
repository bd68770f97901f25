//! Test helper for issue 31, section 3: a known secret put at every offset across a cut
//! point, so every split of it by the cut is tried, and a check that no piece of it
//! reaches what is shown.
//!
//! The check: no [`PIECE`] consecutive bytes of the secret (ASCII case ignored), anywhere
//! in the output. Four, because scrubbed before the cut, a secret that crosses the cut is
//! replaced whole, so nothing of it should remain at all; and the secret is chosen so that
//! none of its 4-byte pieces occurs in sp's words, the filler or a marker (each test also
//! checks its output without the secret, [`every_split`]), so any hit is a leak. Four is
//! also the shortest cut-off tail the redactor replaces at the end of a truncated stream
//! (`redact::MIN_TAIL_MATCH`). The old cut-first code leaked every prefix of 1 to
//! `min_run - 1` (here 16) bytes, so the check fails on it from the 4-byte prefix on.

use crate::gate::vault::Vault;

/// 32 bytes, letters and digits alternating in no word's order; `min_run` is 16.
pub(crate) const SECRET: &str = "Qz8Kp2Vx7Lm4Tn9Wb3Rc6Yd1Hf5Jg0Ss";
/// Its credential: the marker is `[REDACTED:cut-test]`.
pub(crate) const CREDENTIAL: &str = "cut-test";
/// The shortest piece of the secret that counts as a leak (module doc).
pub(crate) const PIECE: usize = 4;

/// A Vault that read [`SECRET`]; the process-wide copy (journal, logger, `Outside`)
/// remembers it too.
pub(crate) fn vault() -> Vault {
    let mut v = Vault::new();
    v.remember(CREDENTIAL, SECRET);
    v
}

/// Panics when `out` holds [`PIECE`] consecutive bytes of [`SECRET`] (case ignored).
pub(crate) fn assert_no_piece(out: &str, what: &str) {
    let low = out.to_ascii_lowercase();
    let secret = SECRET.to_ascii_lowercase();
    for i in 0..=secret.len() - PIECE {
        let piece = &secret[i..i + PIECE];
        assert!(!low.contains(piece), "{what}: {piece:?} (bytes {i}..{} of the secret) reached the output: {out:?}", i + PIECE);
    }
}

/// For every offset from `at - SECRET.len() - 2` to `at + 2` (every split of the secret
/// by a cut at `at` characters, and the secret just before and just after it): `filler`
/// repeated up to the offset, the secret, then `tail` fillers; `show` makes what reaches
/// the output, which must hold no piece of the secret. The same text without the secret
/// is checked first, so a chance piece of sp's own words would fail loudly, not hide.
pub(crate) fn every_split(at: usize, filler: char, tail: usize, what: &str, mut show: impl FnMut(&str) -> String) {
    let _ = vault();
    let plain: String = std::iter::repeat_n(filler, at + tail).collect();
    assert_no_piece(&show(&plain), &format!("{what}, without the secret"));
    for offset in at.saturating_sub(SECRET.len() + 2)..=at + 2 {
        let mut text: String = std::iter::repeat_n(filler, offset).collect();
        text.push_str(SECRET);
        text.extend(std::iter::repeat_n(filler, tail));
        let out = show(&text);
        assert_no_piece(&out, &format!("{what}, secret at offset {offset} (cut at {at})"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_sees_a_prefix_cut_before_scrubbing() {
        // The old way, cut then scrub: a prefix below the minimum run survives.
        let v = vault();
        let text = format!("{}{SECRET}", ".".repeat(190));
        let cut_first = v.scrub_text(crate::sys::short(&text, 200, crate::sys::Ellipsis::Marked)).into_inner();
        let caught = std::panic::catch_unwind(|| assert_no_piece(&cut_first, "cut first"));
        assert!(caught.is_err(), "the check must fail on a 10-byte prefix: {cut_first:?}");
        // The new way: nothing of it.
        assert_no_piece(v.scrub_then_cut(&text, 200).as_str(), "scrubbed first");
    }

    #[test]
    fn lines_keep_a_window_and_say_what_they_dropped() {
        let _ = vault();
        let window = crate::gate::vault::outside_window(8);
        let long = "x".repeat(window + 5);
        let input = format!("ab\n{long}\nlast");
        let mut seen = Vec::new();
        super::super::for_each_line(input.as_bytes(), 8, |l| seen.push((l.window.len(), l.window_cut, l.len, l.shown(8).0.into_inner())));
        assert_eq!(
            seen,
            vec![(2, false, 3, "ab".to_owned()), (window, true, window as u64 + 6, "x".repeat(8)), (4, false, 4, "last".to_owned())],
            "a last line without a newline is one too"
        );
        let (marked, cut) = crate::gate::vault::scrub_line_then_cut(format!("ab{SECRET}cd").as_bytes(), 5, false);
        assert_eq!((marked.as_str(), cut), ("ab[REDACTED:cut-test]", true), "an echo across the cut ends the line with its marker");
    }
}
