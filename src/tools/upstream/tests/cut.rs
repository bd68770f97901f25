//! Issue 31, section 3: every text from outside is scrubbed whole, then cut. Each place
//! where sp shortens outside text gets a known secret at every offset across its cut
//! point (`gate::outside::split::every_split`: every split of the secret by the cut, and
//! the secret just before and after it), and the test asserts that no 4 consecutive bytes
//! of it reach what is shown: the agent's answer (`Vault::scrub_text` of the error the
//! upstream layer made, after `UpstreamError::scrubbed`), the journal's text
//! (`scrub_journal_text`) and the log line (`scrub_log_line`, the logger's own scrub).
//! `split.rs` says why 4. Before the fix, each of these kept the prefix the cut left,
//! below the redactor's minimum run (16 bytes for this 32-byte secret), and failed here.
//!
//! Attacks tried (all held after the fix; the first ten leaked before it):
//! - an upstream's JSON-RPC error message (cut at 200 characters) -> the agent, journal, log;
//! - its progress message (200) -> the agent's progress notification;
//! - a member name it added to a response (32), an id of its own as a string (32), a
//!   member name inside a result it gave (32, `ShapeError.at`), the protocol revision it
//!   offered (32);
//! - a method name it asked sp for or notified (64) -> the log;
//! - a duplicate key in its line (was 64; now quoted whole or named by its length);
//! - a line of its stderr (1024 bytes) -> the log;
//! - a line of an approver's output (was cut at 258 bytes, and split into 4096-byte
//!   pieces, each its own log line) -> the log;
//! - a remote's words after `sp-stop:` in an SSH kill report (80);
//! - a server's unknown `Content-Encoding` token (40, lower-cased: the redactor ignores
//!   case);
//! - a tool name that holds the secret, cut into its exposed name (`names.rs`): not
//!   exposed at all;
//! - a stderr line holding the secret 60 times, so the markers (19 bytes for 32) pull
//!   text from past the cut forward, with one copy across the cut and one across the
//!   end of the window sp keeps of the line: the cut is made in the line's own positions;
//! - a stderr line far longer than the window, the secret across the window's end.
//!
//! Not tried here: a secret shorter than the redactor's minimum run spread in pieces (the
//! redactor's own rule, `gate/redact`), and agent-chosen names (route.rs, args.rs): the
//! agent's own words, which hold no secret of sp's.

use std::collections::VecDeque;

use super::super::client::{shown_method, Client, ClientError};
use super::super::transport::{Recv, Transport, TransportError};
use super::super::{client_error, name_spells_secret, names, wire, UpstreamError};
use super::*;
use crate::gate::exec::Cancel;
use crate::gate::outside::split::{self, assert_no_piece, every_split, SECRET};
use crate::gate::vault::{scrub_journal_text, scrub_log_line, Vault};

/// An upstream that writes these messages (or a line that does not parse) in order.
struct Scripted(VecDeque<Result<Value, TransportError>>);

impl Transport for Scripted {
    fn send(&mut self, _: &Value, _: Instant, _: &Cancel) -> Result<(), TransportError> {
        Ok(())
    }

    fn recv(&mut self, _: Instant, _: &Cancel) -> Result<Recv, TransportError> {
        self.0.pop_front().unwrap_or(Err(TransportError::Closed { status: None })).map(Recv::Message)
    }

    fn close(&mut self) {}
}

const LONG: Duration = Duration::from_secs(3600);

fn ready() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "x", "version": "1"}}})
}

/// The handshake, then one `tools/call` (id 2) answered by `lines`; its progress messages
/// as the relay passes them on (`tool.rs`).
fn call(lines: Vec<Result<Value, TransportError>>) -> (Result<Value, ClientError>, Vec<String>) {
    let mut script = VecDeque::from([Ok(ready())]);
    script.extend(lines);
    let mut client = Client::initialize("cut", Scripted(script), LONG, &Cancel::new()).expect("the handshake");
    let mut notes = Vec::new();
    let answer = client.call_tool("act", Map::new(), LONG, &Cancel::new(), &mut |n| {
        notes.extend(n.message.map(|m| m.cut(wire::MAX_MESSAGE_CHARS).into_inner()));
    });
    (answer, notes)
}

/// Where an upstream error's text goes: the agent's answer, the journal, the log.
fn everywhere(e: UpstreamError, vault: &Vault) -> String {
    let text = e.scrubbed(vault).to_string();
    let agent = vault.scrub_text(text.clone()).into_inner();
    let journal = scrub_journal_text(text.clone()).into_inner();
    let log = scrub_log_line(&text).into_inner();
    format!("agent: {agent}\njournal: {journal}\nlog: {log}")
}

fn failed(e: ClientError, vault: &Vault) -> String {
    everywhere(client_error("cut", e, Duration::from_secs(1)), vault)
}

#[test]
fn an_upstream_error_message_is_scrubbed_before_it_is_cut() {
    let vault = split::vault();
    every_split(wire::MAX_MESSAGE_CHARS, '.', 40, "error message", |text| {
        let (answer, _) = call(vec![Ok(json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -1, "message": text}}))]);
        let e = answer.expect_err("an error answer");
        assert!(matches!(e, ClientError::Rpc(_)), "{e:?}");
        failed(e, &vault)
    });
}

#[test]
fn a_progress_message_is_scrubbed_before_it_is_cut() {
    let _vault = split::vault();
    every_split(wire::MAX_MESSAGE_CHARS, '.', 40, "progress message", |text| {
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 2, "progress": 1, "message": text}});
        let (answer, notes) = call(vec![Ok(progress), Ok(json!({"jsonrpc": "2.0", "id": 2, "result": {"content": []}}))]);
        assert!(answer.is_ok(), "{answer:?}");
        assert_eq!(notes.len(), 1, "the note was relayed");
        notes.concat()
    });
}

#[test]
fn member_names_ids_and_versions_are_scrubbed_before_they_are_cut() {
    let vault = split::vault();
    every_split(wire::MAX_NAME_CHARS, '.', 20, "unexpected member", |text| {
        let mut m = json!({"jsonrpc": "2.0", "id": 2, "result": {}});
        m[text] = json!(1);
        let (answer, _) = call(vec![Ok(m)]);
        let e = answer.expect_err("a broken protocol");
        assert!(matches!(e, ClientError::Wire(wire::WireError::UnexpectedMember { .. })), "{e:?}");
        failed(e, &vault)
    });
    // Quoted: the id's text begins one character later.
    every_split(wire::MAX_NAME_CHARS + 1, '.', 20, "string id", |text| {
        let (answer, _) = call(vec![Ok(json!({"jsonrpc": "2.0", "id": text, "result": {}}))]);
        let e = answer.expect_err("an unknown id");
        assert!(matches!(e, ClientError::Wire(wire::WireError::UnknownId { .. })), "{e:?}");
        failed(e, &vault)
    });
    // `content[0].` comes first: the key's own cut is at 32 characters of it.
    every_split(wire::MAX_NAME_CHARS, '.', 20, "member of a result", |text| {
        let mut item = json!({"type": "text", "text": "x"});
        item[text] = json!(1);
        let e = wire::call_result(json!({"content": [item]})).expect_err("a shape error");
        everywhere(UpstreamError::BadAnswer { upstream: "cut".into(), why: e.to_string() }, &vault)
    });
    every_split(wire::MAX_NAME_CHARS, '.', 20, "protocol revision", |text| {
        let offer = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": text, "capabilities": {}, "serverInfo": {}}});
        let e = Client::initialize("cut", Scripted(VecDeque::from([Ok(offer)])), LONG, &Cancel::new()).err().expect("refused");
        assert!(matches!(e, ClientError::Init(wire::InitError::Version { .. })), "{e:?}");
        failed(e, &vault)
    });
}

#[test]
fn a_method_name_is_scrubbed_before_it_is_cut() {
    let _vault = split::vault();
    every_split(64, '.', 20, "method name", |text| scrub_log_line(&format!("upstream cut: asked sp for {}", shown_method(text))).into_inner());
}

#[test]
fn a_duplicate_key_is_quoted_whole_or_not_at_all() {
    let vault = split::vault();
    every_split(64, '.', 20, "duplicate key", |text| {
        let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{{{k}:1,{k}:2}}}}", k = json!(text));
        let (answer, _) = call(vec![crate::json::parse(&line).map_err(TransportError::Json)]);
        let e = answer.expect_err("a bad line");
        assert!(matches!(e, ClientError::Transport(TransportError::Json(crate::json::JsonError::DuplicateKey { .. }))), "{e:?}");
        failed(e, &vault)
    });
}

/// The log lines `stderr_lines` makes of `bytes` (before the logger's own scrub).
fn stderr_of(bytes: &[u8]) -> Vec<String> {
    let mut lines = Vec::new();
    super::super::stdio::stderr_lines(bytes, |l| lines.push(scrub_log_line(l).into_inner()));
    lines
}

#[test]
fn a_stderr_line_is_scrubbed_before_it_is_cut() {
    let _vault = split::vault();
    every_split(stdio::MAX_STDERR_LINE, '.', 40, "stderr line", |text| {
        let lines = stderr_of(format!("{text}\nnext\n").as_bytes());
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].ends_with(" [cut]"), "{lines:?}");
        lines.concat()
    });
    // Markers shorter than the secret pull later text forward: the cut is made in the
    // line's own positions (`Redactor::redact_prefix`), whatever the shift.
    for shift in 0..SECRET.len() {
        let line = format!("{}{}\n", ".".repeat(shift), SECRET.repeat(60));
        let lines = stderr_of(line.as_bytes());
        assert_no_piece(&lines.concat(), &format!("60 copies after {shift} bytes"));
    }
    // The same with a long secret, whose markers (19 bytes for 1000) pull text from
    // past the end of the window into the first 1024 bytes of a line scrubbed whole and
    // then cut: only a cut in the line's own positions keeps out the piece of the copy
    // that crosses the window's end (checked to fail with the cut made after the marks).
    let long: String = (0..1000u32).map(|i| char::from(b"ABCDEFGHJKMNPQRSTUVWXYZ23456789"[(i * 7 + i * i / 3) as usize % 31])).collect();
    let mut v = Vault::new();
    v.remember("cut-long", &long);
    let window = crate::gate::vault::outside_window(stdio::MAX_STDERR_LINE);
    for shift in (0..1000).step_by(7) {
        let line = format!("{}{}\n", ".".repeat(shift), long.repeat(window / 1000 + 3));
        let shown = stderr_of(line.as_bytes()).concat();
        let stripped = shown.replace("[REDACTED:cut-long]", "");
        assert!(stripped.trim_end_matches(" [cut]").chars().all(|c| c == '.'), "a piece of the long secret after {shift} bytes: {shown:?}");
    }
    // Far longer than the window kept, the secret across the window's end.
    let window = crate::gate::vault::outside_window(stdio::MAX_STDERR_LINE);
    for at in window - SECRET.len()..=window {
        let line = format!("{}{SECRET}{}\n", ".".repeat(at), ".".repeat(5000));
        let lines = stderr_of(line.as_bytes());
        assert_no_piece(&lines.concat(), &format!("across the window's end at {at}"));
        assert_eq!(lines[0], format!("{} [cut]", ".".repeat(stdio::MAX_STDERR_LINE)));
    }
}

#[test]
fn an_approver_output_line_is_scrubbed_before_it_is_cut() {
    let _vault = split::vault();
    every_split(crate::approve::MAX_LOGGED_LINE, '.', 40, "approver line", |text| {
        let mut lines = Vec::new();
        crate::gate::outside::for_each_line(format!("{text}\n").as_bytes(), crate::approve::MAX_LOGGED_LINE, |l| {
            lines.push(scrub_log_line(&crate::approve::logged_line(&l)).into_inner());
        });
        assert_eq!(lines.len(), 1, "one line, one log line (not pieces of 4096 bytes): {lines:?}");
        lines.concat()
    });
}

#[test]
fn a_remote_kill_report_and_a_server_coding_are_scrubbed_before_they_are_cut() {
    let vault = split::vault();
    every_split(80, '.', 20, "kill report", |text| {
        let e = crate::tools::ssh::kill::parse_kill_report(&format!("sp-stop: {text}")).expect_err("a failed kill");
        let why = e.0;
        format!("{}\n{}", vault.scrub_text(why.clone()).into_inner(), scrub_journal_text(why).into_inner())
    });
    every_split(40, '.', 20, "content coding", |text| {
        let codings = crate::tools::http::coding::declared(&[("content-encoding".to_owned(), text.to_owned())]);
        let names: Vec<String> = codings.iter().map(ToString::to_string).collect();
        vault.scrub_text(names.concat()).into_inner()
    });
}

#[test]
fn a_tool_name_that_spells_a_secret_is_not_cut_into_an_exposed_name() {
    let vault = split::vault();
    let room = names::MAX_EXPOSED_LEN - "up".len() - 2 - names::HASH_HEX;
    every_split(room, '.', 10, "tool name", |text| if name_spells_secret(&vault, "up", text) { String::new() } else { names::exposed_name("up", text) });
    assert!(!name_spells_secret(&vault, "up", "read_file"), "an ordinary name is exposed");
}
