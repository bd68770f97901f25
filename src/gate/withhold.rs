//! Withholding: the one check of a whole answer, after its pieces were scrubbed one by
//! one (`Scrubbed`). The wire carries outside strings as JSON text, where a string's
//! escapes (`\"`, `\\`, `\n`, `\u0001`) can spell a secret that no value shows; such a
//! secret cannot be cut out of the middle of the JSON without breaking it, so the whole
//! answer is withheld. The loop asks [`withholds`] of every tool result it sends; an
//! upstream server's result is scrubbed and checked by [`scrub_result`]. What a withheld
//! answer looks like on the wire is the wire's (`mcp::model`).

use serde_json::{Map, Value};

use crate::gate::scrubbed::Scrubbed;
use crate::gate::vault::Vault;

/// What a tool result carries from outside: its error message and its fields (whose
/// top-level keys are the tool's own names). `mcp::model::ToolResult` implements it.
pub(crate) trait Outside {
    fn outside(&self) -> (Option<&str>, &Map<String, Value>);
}

/// What a withheld result says (and its journal row's reason).
pub(crate) const WITHHELD: &str = "the answer is withheld: its JSON text spells a secret of this session in a form that no single value shows";

/// Whether a tool result must be withheld. Its outside pieces (the error message and the
/// field values) were scrubbed value by value; the wire carries them as JSON text (twice:
/// `structuredContent` and the text block), where a string's escapes (`\"`, `\\`, `\n`,
/// `\u0001`) can spell a secret that no value shows. Such a secret cannot be cut out of
/// the middle of the JSON without breaking it, so it withholds the whole result. Each
/// outside string (object keys included) that JSON escapes is searched in its escaped
/// form, without its quotes and without building it ([`EchoScan`]); sp's own keys and
/// codes, and the JSON punctuation around the strings, are not searched, so no short
/// secret can make sp withhold every answer.
pub(crate) fn withholds(vault: &Vault, result: &impl Outside) -> bool {
    if vault.is_empty() {
        return false;
    }
    let (message, fields) = result.outside();
    let found = message.is_some_and(|m| EchoScan::spells_a_secret(vault, m)) || fields.values().any(|v| escaped_echo(vault, v));
    if found {
        log::warn!("a result's JSON text spelled a secret that no single value showed: the result is withheld");
    }
    found
}

/// An upstream MCP server's `CallToolResult` as a `Value` (`upstream/`), scrubbed in
/// place: everything the upstream wrote is outside text (each content block's text and
/// data, `structuredContent` with its own keys), except the members sp re-emits as MCP
/// vocabulary (`content`, `structuredContent`, `isError`, each block's keys and its
/// `type`), which no secret may rewrite. True when, as for a tool's result
/// ([`withholds`]), a string's JSON escapes alone spell a secret: then the whole result
/// must be withheld, and the tool answers its `SP_UPSTREAM` error instead
/// ([`scrub_upstream`]).
#[must_use = "a result whose JSON text spells a secret must be withheld"]
pub(crate) fn scrub_result(vault: &Vault, result: &mut Value) -> bool {
    if vault.is_empty() {
        return false;
    }
    let Value::Object(members) = result else {
        vault.scrub(result);
        return false;
    };
    let mut found = false;
    for (key, v) in members.iter_mut() {
        match (key.as_str(), v) {
            ("isError", Value::Bool(_)) => {}
            ("content", Value::Array(blocks)) => {
                for block in blocks {
                    match block {
                        Value::Object(b) => {
                            for (k, v) in b.iter_mut().filter(|(k, _)| *k != "type") {
                                vault.scrub(v);
                                found = found || EchoScan::spells_a_secret(vault, k) || escaped_echo(vault, v);
                            }
                        }
                        other => {
                            vault.scrub(other);
                            found = found || escaped_echo(vault, other);
                        }
                    }
                }
            }
            (_, v) => {
                vault.scrub(v);
                found = found || escaped_echo(vault, v);
            }
        }
    }
    if found {
        log::warn!("an upstream result's JSON text spelled a secret that no single value showed: the result is withheld");
    }
    found
}

/// An upstream's result scrubbed ([`scrub_result`]) as the one door lets it out, or
/// `None` when it must be withheld.
pub(crate) fn scrub_upstream(vault: &Vault, mut result: Value) -> Option<Scrubbed<Value>> {
    (!scrub_result(vault, &mut result)).then_some(Scrubbed(result))
}

fn escaped_echo(vault: &Vault, value: &Value) -> bool {
    match value {
        Value::String(s) => EchoScan::spells_a_secret(vault, s),
        Value::Array(items) => items.iter().any(|v| escaped_echo(vault, v)),
        Value::Object(m) => m.iter().any(|(k, v)| EchoScan::spells_a_secret(vault, k) || escaped_echo(vault, v)),
        _ => false,
    }
}

/// A sink for a string's JSON text that searches it for secrets in overlapping windows,
/// so memory stays at one window however long the string is. The overlap is longer than
/// any spelling the redactor looks for, so every spelling lies whole inside some window.
/// The string's opening and closing quotes are left out.
struct EchoScan<'v> {
    vault: &'v Vault,
    window: Vec<u8>,
    overlap: usize,
    found: bool,
    /// The opening quote is still to come.
    opening: bool,
}

impl EchoScan<'_> {
    const WINDOW: usize = 1024 * 1024;

    fn spells_a_secret(vault: &Vault, s: &str) -> bool {
        // Only a string that JSON escapes can read differently as JSON text.
        if !crate::sys::json_escapes(s) {
            return false;
        }
        let overlap = vault.longest_spelling().saturating_add(64).min(Self::WINDOW / 2);
        let capacity = (Self::WINDOW + overlap).min(2 * s.len() + 16);
        let mut scan = EchoScan { vault, window: Vec::with_capacity(capacity), overlap, found: false, opening: true };
        let _ = serde_json::to_writer(&mut scan, s);
        // The closing quote.
        scan.window.pop();
        scan.check();
        scan.found
    }

    fn check(&mut self) {
        self.found = self.found || self.vault.found_in(&self.window);
    }
}

impl std::io::Write for EchoScan<'_> {
    fn write(&mut self, mut buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len();
        if self.found {
            return Ok(n);
        }
        if self.opening && !buf.is_empty() {
            self.opening = false;
            buf = &buf[1..];
        }
        self.window.extend_from_slice(buf);
        // Keeps one byte more than the overlap: it may be the closing quote.
        if self.window.len() > Self::WINDOW + self.overlap {
            let last = self.window.pop();
            self.check();
            let keep = self.window.len() - self.overlap;
            self.window.drain(..keep);
            self.window.extend(last);
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
