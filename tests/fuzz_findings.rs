//! What the fuzz targets (`fuzz/`, issue #12) found, minimised, one test each. The
//! ignored ones are open: they fail today and are reported to the owners of the files
//! concerned; remove the `#[ignore]` (and the matching exception in the fuzz target)
//! with the fix.
//!
//! Attacks tried (through the targets, `make fuzz`; see README.md, "Fuzzing"):
//! - pipeline: bytes through `Server::serve` with a recording executor: nothing
//!   executed without a line this harness itself judges allowed; only JSON-RPC lines
//!   out; an echoed secret never out (held);
//! - policy: arbitrary text to `Policy::from_text`: no panic; each refusal names a field
//!   of the document or the JSON problem (held, except an empty top-level key: below);
//! - known_hosts: verdicts cite the lines that justify them; an appended entry, plain
//!   or hashed, makes its key known (held);
//! - ssh_command: nothing accepted has a `..` segment or leaves the pattern word's
//!   literal directory (held); time (below);
//! - url_path: the matched path is the decoded wire path; `/ok/*` authorizes exactly
//!   what decodes under `/ok/` (held);
//! - redactor: every promised spelling planted anywhere in a body is gone (held,
//!   except a wrapped echo whose decoded view differs: below).
#![allow(clippy::disallowed_methods, reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/")]

use sallyport::fuzzing::{check_command, CommandPattern, Policy, Redactor};

/// policy target: `{"": 0}` is refused as an unknown field, but the field it names is
/// the empty key, so the message names none ("fuzz-policy.json: unknown field ...").
/// Fixed: src/policy/fields.rs `object` quotes a key that is empty or not plain.
#[test]
fn empty_top_level_key_is_named_in_the_refusal() {
    let e = Policy::from_text(r#"{"": 0}"#, std::path::Path::new("p.json")).unwrap_err();
    assert!(e.message.starts_with("unknown field"), "{e}");
    assert!(!e.field.is_empty(), "the refusal names no field: {e}");
}

/// A policy key that is not empty is named (the same path, for contrast).
#[test]
fn unknown_top_level_key_is_named_in_the_refusal() {
    let e = Policy::from_text(r#"{"x": 0}"#, std::path::Path::new("p.json")).unwrap_err();
    assert_eq!(e.field, "x", "{e}");
}

fn redacted(secret: &str, text: &str) -> String {
    let mut r = Redactor::default();
    r.add("c", secret);
    String::from_utf8(r.redact(text.as_bytes()).unwrap_or_else(|| text.as_bytes().to_vec())).unwrap()
}

/// redactor target: a secret echoed wrapped across lines is found in the decoded view,
/// where the secret's own escapes (`\\`, `%%`, `&&`) are decoded too, so the wrapped
/// echo of such a secret survives. Open: src/redact.rs (also search the wrapped echo
/// with line breaks alone dropped).
#[test]
#[ignore = "open (src/redact.rs): wrapped echo of a secret holding escapes survives"]
fn wrapped_echo_of_a_secret_with_escapes_is_redacted() {
    let secret = r"dddd1!2 %% \\ && tex";
    let out = redacted(secret, "x dddd1!2 %% \\\\ \r\n&& tex y");
    assert!(out.contains("[REDACTED:c]"), "survived: {out:?}");
}

/// redactor target: a `%` just before a wrapped echo pairs with the secret's first two
/// hex digits in the decoded view (`%dd`), so the echo survives. Open: src/redact.rs.
#[test]
#[ignore = "open (src/redact.rs): a % before a wrapped echo hides it"]
fn wrapped_echo_after_a_percent_is_redacted() {
    let out = redacted("dddd1!234", "%dddd\r\n1!234");
    assert!(out.contains("[REDACTED:c]"), "survived: {out:?}");
}

/// The same echo without the `%` is found (contrast).
#[test]
fn wrapped_echo_is_redacted() {
    let out = redacted("dddd1!234", " dddd\r\n1!234 ");
    assert_eq!(out, " [REDACTED:c] ");
}

/// Found while writing the ssh_command target: the glob backtracks over every way to
/// split a word between its stars, so time grows as the word's length to the power of
/// the stars before a literal that fails. `cat /var/log/*/*.log` with a 16 KiB word of
/// `a/a/...` (no `.log`) takes about 3 s on the 2-core dev machine (32 KiB, the
/// command limit: about 12 s), during which the session answers nothing; three stars
/// in a word make it hours. Open: src/ssh/commands.rs `glob` (match with a table of
/// reachable positions per piece: linear in the word for each piece).
#[test]
fn command_glob_time_is_linear_in_the_word() {
    let patterns = vec![CommandPattern::parse("cat /var/log/*/*.log").unwrap()];
    let command = format!("cat /var/log/{}x", "a/".repeat(8000));
    let t = std::time::Instant::now();
    assert!(check_command(&patterns, &command).is_err());
    let took = t.elapsed();
    assert!(took < std::time::Duration::from_secs(2), "took {took:?} (was ~3 s before the fix; generous for a loaded machine)");
}
