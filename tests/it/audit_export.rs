//! Issue 35 §4, audit where the security team looks: `sp audit export` (ndjson, CEF,
//! OCSF; `--since`; `--follow`; the chain checked as rows stream), the syslog copy by
//! journald's native protocol (a stand-in datagram socket, and the real journald where
//! the machine has one), and the OTLP copy (a loopback collector stand-in: rows arrive
//! as log records; a collector that is down or hangs costs the calls nothing).
//!
//! Attacks tried through the real binary (all held): an agent-chosen SSH command with
//! `|`, `=`, `\`, a newline, ESC and U+202E (bidi override) lands in the journal's
//! `target`; exported as CEF it stays one line whose header has seven fields and whose
//! extension has only sp's keys; as NDJSON and OCSF one JSON value per line with no raw
//! control or bidi character; as journald fields one `SP_TARGET` field (length-prefixed)
//! that no `SP_DECISION=...` inside it can add to. An edited row stops the export at
//! that row with the rows before it printed, and exit status 1.
#![allow(clippy::disallowed_methods, reason = "tests start sp and read their environment; the fence in clippy.toml is for src/")]

use crate::support;

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::http_server::{Reply, TestServer};
use support::process::{deadline, initialize, initialized, lines, run_sp, tool_call, wait_deadline, Launch, Run, TempDir};

/// The command the agent sends: every character a SIEM form has to escape.
const HOSTILE: &str = "echo a|b=c\\d\u{1b}[2J\u{202e}gnp.exe\nSP_DECISION=allow";

struct Fixture {
    dir: TempDir,
    policy: PathBuf,
    journal: PathBuf,
}

/// A deny-everything policy whose journal is `dir/audit.jsonl`, `audit` merged in.
fn fixture(audit: Value) -> Fixture {
    let dir = TempDir::new("export");
    let journal = dir.path.join("audit.jsonl");
    let mut section = json!({"path": journal.display().to_string(), "fsync": false});
    for (k, v) in audit.as_object().expect("an object") {
        section[k] = v.clone();
    }
    let policy = dir.file("policy.json", json!({"audit": section}).to_string().as_bytes(), 0o600);
    Fixture { dir, policy, journal }
}

/// One session: `n` refused calls (one with the hostile command), then EOF.
fn session(f: &Fixture, n: usize) -> Run {
    let mut msgs = vec![initialize(json!(1), "2025-06-18"), initialized()];
    for i in 0..n {
        let command = if i == 0 { HOSTILE.to_owned() } else { format!("uptime {i}") };
        msgs.push(tool_call(10 + i as i64, "ssh_exec", json!({"host": "web1", "command": command})));
    }
    let run = Launch::mcp(&f.policy, &[]).run(&lines(&msgs));
    run.assert_exit(0);
    run
}

fn journal_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display())).lines().map(str::to_owned).collect()
}

fn export(f: &Fixture, extra: &[&str]) -> Run {
    let mut args = vec!["audit", "export"];
    let journal = f.journal.display().to_string();
    args.push(&journal);
    args.extend_from_slice(extra);
    run_sp(&args, &[], b"")
}

fn stdout_lines(run: &Run) -> Vec<String> {
    String::from_utf8(run.stdout.clone()).unwrap_or_else(|e| panic!("stdout is not UTF-8: {e}\n{}", run.context())).lines().map(str::to_owned).collect()
}

fn no_raw_controls(line: &str) -> bool {
    !line.chars().any(|c| c.is_control() || ('\u{2000}'..='\u{206f}').contains(&c))
}

#[test]
fn ndjson_is_the_rows_and_cef_and_ocsf_one_event_per_row() {
    let f = fixture(json!({}));
    session(&f, 3);
    let rows = journal_lines(&f.journal);
    assert_eq!(rows.len(), 5, "start, 3 rejects, end: {rows:#?}");
    assert!(rows[1].contains("\\u001b[2J") || rows[1].contains("\\u202e") || rows[1].contains('\u{202e}'), "the hostile target is journaled: {}", rows[1]);

    let nd = export(&f, &[]);
    nd.assert_exit(0);
    let nd = stdout_lines(&nd);
    assert_eq!(nd.len(), rows.len());
    for (out, row) in nd.iter().zip(&rows) {
        assert!(no_raw_controls(out), "{out:?}");
        assert_eq!(serde_json::from_str::<Value>(out).unwrap(), serde_json::from_str::<Value>(row).unwrap());
    }

    let cef = export(&f, &["--format", "cef"]);
    cef.assert_exit(0);
    let cef = stdout_lines(&cef);
    assert_eq!(cef.len(), rows.len(), "one CEF line per row: {cef:#?}");
    let hostile = &cef[1];
    assert!(no_raw_controls(hostile), "{hostile:?}");
    // Seven header fields, then the extension: unescaped pipes only in the header.
    let unescaped_pipes = hostile.match_indices('|').filter(|(i, _)| !hostile[..*i].ends_with('\\')).count();
    assert!(hostile.starts_with("CEF:0|Sallyport|sp|"), "{hostile}");
    assert!(hostile.contains("|reject:denied|reject denied|3|"), "{hostile}");
    assert!(
        hostile.contains(" cs1Label=target cs1=web1 echo a|b\\=c\\\\d\\\\u{1b}[2J\\\\u{202e}gnp.exe\\nSP_DECISION\\=allow "),
        "the target escaped as CEF says: {hostile}"
    );
    // The pipe inside the extension value is legal there; the header has exactly 7.
    let header_end = hostile.match_indices('|').nth(6).map(|(i, _)| i).unwrap();
    assert_eq!(hostile[..header_end].matches('|').count(), 6, "{hostile}");
    assert_eq!(unescaped_pipes, 8, "7 header separators + the one in the target's value: {hostile}");
    assert!(hostile.contains(" act=denied ") && !hostile.contains(" act=allow"), "{hostile}");

    let ocsf = export(&f, &["--format", "ocsf"]);
    ocsf.assert_exit(0);
    let ocsf = stdout_lines(&ocsf);
    assert_eq!(ocsf.len(), rows.len());
    for (out, row) in ocsf.iter().zip(&rows) {
        assert!(no_raw_controls(out), "{out:?}");
        let ev: Value = serde_json::from_str(out).unwrap();
        assert_eq!(ev["class_uid"], 6003);
        assert_eq!(ev["raw_data"].as_str(), Some(row.as_str()), "raw_data is the row as stored");
    }
    let ev: Value = serde_json::from_str(&ocsf[1]).unwrap();
    assert_eq!((ev["action_id"].as_u64(), ev["status"].as_str(), ev["api"]["operation"].as_str()), (Some(2), Some("Failure"), Some("ssh_exec")));
    assert_eq!(ev["unmapped"]["target"].as_str(), Some(format!("web1 {HOSTILE}").as_str()));
}

#[test]
fn an_edited_row_stops_the_export_after_the_rows_before_it() {
    let f = fixture(json!({}));
    session(&f, 3);
    let mut rows = journal_lines(&f.journal);
    rows[2] = rows[2].replacen("uptime 1", "uptime 9", 1);
    std::fs::write(&f.journal, rows.iter().map(|r| format!("{r}\n")).collect::<String>()).unwrap();
    for format in ["ndjson", "cef", "ocsf"] {
        let run = export(&f, &["--format", format]);
        run.assert_exit(1);
        assert_eq!(stdout_lines(&run).len(), 2, "rows 1 and 2 exported ({format})\n{}", run.context());
        assert!(
            run.stderr.contains("row 3 is edited: its hash does not match its content (the journal is not whole; the rows before it were exported)"),
            "{}",
            run.context()
        );
    }
    // A torn last row: exported up to it, then exit 1 (after the 1 s grace).
    let f = fixture(json!({}));
    session(&f, 1);
    let mut bytes = std::fs::read(&f.journal).unwrap();
    bytes.truncate(bytes.len() - 20);
    std::fs::write(&f.journal, &bytes).unwrap();
    let run = export(&f, &[]);
    run.assert_exit(1);
    assert_eq!(stdout_lines(&run).len(), 2, "{}", run.context());
    assert!(run.stderr.contains("row 3 is torn"), "{}", run.context());
}

#[test]
fn since_filters_what_is_printed_not_what_is_checked() {
    let f = fixture(json!({}));
    session(&f, 2);
    let all = journal_lines(&f.journal).len();
    let recent = export(&f, &["--since", "1h"]);
    recent.assert_exit(0);
    assert_eq!(stdout_lines(&recent).len(), all);
    let future = export(&f, &["--since", "2999-01-01T00:00:00Z", "--format", "cef"]);
    future.assert_exit(0);
    assert!(future.stdout.is_empty(), "{}", future.context());
    // An edit before --since still fails the export.
    let mut rows = journal_lines(&f.journal);
    rows[1] = rows[1].replacen("\"denied\"", "\"allowed\"", 1);
    std::fs::write(&f.journal, rows.iter().map(|r| format!("{r}\n")).collect::<String>()).unwrap();
    let run = export(&f, &["--since", "2999-01-01T00:00:00Z"]);
    run.assert_exit(1);
    assert!(run.stdout.is_empty() && run.stderr.contains("row 2 is edited"), "{}", run.context());
    let bad = export(&f, &["--since", "yesterday"]);
    bad.assert_exit(2);
    assert!(bad.stderr.contains("--since takes an RFC 3339 time"), "{}", bad.context());
}

/// `--follow`: rows of a later session come out as they are written; a file cut back
/// under it ends the export with status 1.
#[test]
fn follow_prints_new_rows_and_stops_when_the_file_shrinks() {
    let f = fixture(json!({}));
    session(&f, 1);
    let mut child = Launch::new(&["audit", "export", &f.journal.display().to_string(), "--follow"])
        .command()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sp audit export --follow");
    let stderr = support::process::read_all_in_thread(child.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let take = |n: usize, what: &str| -> Vec<String> {
        let end = Instant::now() + deadline();
        (0..n)
            .map(|i| {
                rx.recv_timeout(end.saturating_duration_since(Instant::now()))
                    .unwrap_or_else(|_| panic!("waited {:?} for exported line {} of {n} ({what})", deadline(), i + 1))
            })
            .collect()
    };
    let first = take(3, "the first session's rows");
    session(&f, 2);
    let second = take(4, "the second session's rows, appended while following");
    let rows = journal_lines(&f.journal);
    let got: Vec<Value> = first.iter().chain(&second).map(|l| serde_json::from_str(l).unwrap()).collect();
    let want: Vec<Value> = rows.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(got, want);
    assert!(rx.try_recv().is_err(), "nothing more");
    // Cut the file back: the export must notice and fail.
    let keep: usize = rows[..2].iter().map(|r| r.len() + 1).sum();
    let file = std::fs::OpenOptions::new().write(true).open(&f.journal).unwrap();
    file.set_len(keep as u64).unwrap();
    let status = wait_deadline(&mut child, "sp audit export --follow to exit after the journal shrank");
    let stderr = String::from_utf8_lossy(&support::process::collect(&stderr, "export's stderr")).into_owned();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the file shrank under export --follow"), "{stderr}");
}

/// `--follow` across a rotation: the journal moved away and a new one started at the
/// path (a new chain from genesis) is followed from its first row.
#[test]
fn follow_goes_on_with_the_new_file_after_a_rotation() {
    let f = fixture(json!({}));
    session(&f, 1);
    let mut child = Launch::new(&["audit", "export", &f.journal.display().to_string(), "--follow", "--format", "cef"])
        .command()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sp audit export --follow");
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let take = |n: usize, what: &str| -> Vec<String> {
        let end = Instant::now() + deadline();
        (0..n)
            .map(|i| {
                rx.recv_timeout(end.saturating_duration_since(Instant::now()))
                    .unwrap_or_else(|_| panic!("waited {:?} for exported line {} of {n} ({what})", deadline(), i + 1))
            })
            .collect()
    };
    let old = take(3, "the first journal's rows");
    assert!(old[0].contains(" externalId=1 "), "{}", old[0]);
    std::fs::rename(&f.journal, f.dir.path.join("audit.jsonl.1")).unwrap();
    session(&f, 1);
    let new = take(3, "the new journal's rows, after the rotation");
    assert!(new[0].contains("|start:enforce|") && new[0].contains(" externalId=1 "), "the new file from its first row: {}", new[0]);
    assert!(new[2].contains("|end:eof|"), "{}", new[2]);
    let _ = child.kill();
    let _ = child.wait();
}

/// journald's native protocol, as a journald would parse it.
fn native_fields(mut d: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    while !d.is_empty() {
        let nl = d.iter().position(|b| *b == b'\n').expect("a field ends in a newline");
        let head = &d[..nl];
        if let Some(eq) = head.iter().position(|b| *b == b'=') {
            out.push((String::from_utf8(head[..eq].to_vec()).unwrap(), head[eq + 1..].to_vec()));
            d = &d[nl + 1..];
        } else {
            let rest = &d[nl + 1..];
            let len = u64::from_le_bytes(rest[..8].try_into().unwrap()) as usize;
            assert_eq!(rest[8 + len], b'\n', "a binary field ends in a newline");
            out.push((String::from_utf8(head.to_vec()).unwrap(), rest[8..8 + len].to_vec()));
            d = &rest[9 + len..];
        }
    }
    out
}

#[test]
fn journald_gets_one_entry_per_row_with_sp_fields() {
    let dir = TempDir::new("journald");
    let socket = dir.path.join("journal.sock");
    let stand_in = UnixDatagram::bind(&socket).expect("bind the stand-in journald socket");
    stand_in.set_read_timeout(Some(deadline())).unwrap();
    let f = fixture(json!({"syslog": {"journald": socket.display().to_string()}}));
    session(&f, 2);
    let rows = journal_lines(&f.journal);
    let mut buf = vec![0u8; 256 * 1024];
    for (i, row) in rows.iter().enumerate() {
        let n = stand_in.recv(&mut buf).unwrap_or_else(|e| panic!("waited {:?} for journald entry {} of {}: {e}", deadline(), i + 1, rows.len()));
        let fields = native_fields(&buf[..n]);
        let get = |k: &str| -> Vec<String> { fields.iter().filter(|(n, _)| n == k).map(|(_, v)| String::from_utf8_lossy(v).into_owned()).collect() };
        assert_eq!(get("MESSAGE"), vec![row.clone()]);
        assert_eq!(get("SYSLOG_IDENTIFIER"), vec!["sp"]);
        let parsed: Value = serde_json::from_str(row).unwrap();
        assert_eq!(get("SP_KIND"), vec![parsed["kind"].as_str().unwrap().to_owned()]);
        assert_eq!(get("SP_SEQ"), vec![parsed["seq"].to_string()]);
        assert_eq!(get("SP_HASH"), vec![parsed["hash"].as_str().unwrap().to_owned()]);
        if parsed["kind"] == "reject" {
            assert_eq!(get("SP_DECISION"), vec!["denied"], "one decision field, whatever the target says");
            assert_eq!(get("PRIORITY"), vec!["5"]);
        }
        if i == 1 {
            assert_eq!(get("SP_TARGET"), vec![format!("web1 {HOSTILE}")], "the target with its newline is one field");
        }
    }
}

/// The real journald, where this machine has one: `journalctl SP_SESSION=...` finds the
/// rows by their fields.
#[test]
fn real_journald_finds_rows_by_field() {
    let socket = Path::new("/run/systemd/journal/socket");
    let journalctl = std::process::Command::new("journalctl").arg("--version").output().is_ok_and(|o| o.status.success());
    if !socket.exists() || !journalctl {
        eprintln!("skipped: no journald on this machine (/run/systemd/journal/socket or journalctl missing); the stand-in socket test covers the protocol");
        return;
    }
    let f = fixture(json!({"syslog": true}));
    session(&f, 1);
    let rows = journal_lines(&f.journal);
    let session_id = serde_json::from_str::<Value>(&rows[0]).unwrap()["session"].as_str().unwrap().to_owned();
    let end = Instant::now() + deadline();
    loop {
        let out = std::process::Command::new("journalctl").args(["--no-pager", "-o", "json", &format!("SP_SESSION={session_id}")]).output().unwrap();
        let found: Vec<Value> = String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        if found.len() == rows.len() {
            assert!(found.iter().any(|e| e["SP_DECISION"] == "denied" && e["SP_TOOL"] == "ssh_exec"), "{found:#?}");
            break;
        }
        if Instant::now() > end {
            // journald may not let this user read the entries (no systemd-journal group).
            eprintln!("skipped: journalctl shows {} of {} rows for session {session_id} (no read access to the journal?)", found.len(), rows.len());
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn otlp_collector_gets_every_row_as_a_log_record() {
    let collector = TestServer::start();
    collector.route("/v1/logs", Reply::json(200, "{}"));
    let f = fixture(json!({"otlp": {"url": collector.base()}}));
    session(&f, 3);
    let rows = journal_lines(&f.journal);
    // sp waits (2 s at most) at exit for the queue to empty, so all were sent by now.
    let mut bodies = Vec::new();
    for r in collector.requests() {
        assert_eq!((r.method.as_str(), r.target.as_str()), ("POST", "/v1/logs"));
        assert_eq!(r.header("content-type"), Some("application/json"));
        let req: Value = serde_json::from_slice(&r.body).expect("an OTLP/JSON request");
        let scope = &req["resourceLogs"][0]["scopeLogs"][0];
        assert_eq!(scope["scope"]["name"], "sallyport.audit");
        for rec in scope["logRecords"].as_array().unwrap() {
            bodies.push(rec["body"]["stringValue"].as_str().unwrap().to_owned());
            let kind = rec["attributes"].as_array().unwrap().iter().find(|a| a["key"] == "sp.kind").unwrap()["value"]["stringValue"].clone();
            assert_eq!(rec["eventName"], format!("sp.audit.{}", kind.as_str().unwrap()));
        }
    }
    assert_eq!(bodies, rows, "every row, in order, as written");
}

/// Collector down (connection refused) or hanging (accepts, never answers): each call
/// is answered at once, the rows are dropped and counted, and the session ends within
/// the exit drain (2 s) plus slack.
#[test]
fn otlp_never_blocks_a_call() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let hanging = TestServer::start();
    hanging.route("/v1/logs", Reply { delay_ms: 30_000, ..Reply::json(200, "{}") });
    for (url, what) in [(format!("http://127.0.0.1:{closed}"), "down"), (hanging.base(), "hanging")] {
        let f = fixture(json!({"otlp": {"url": url}}));
        let mut s = support::process::Session::start(Launch::mcp(&f.policy, &["-v"]));
        s.ready("2025-06-18");
        for i in 0..5 {
            let started = Instant::now();
            let answer = s.tool(100 + i, "ssh_exec", json!({"host": "web1", "command": format!("uptime {i}")}));
            assert_eq!(support::process::tool_error_code(&answer), Some("SP_DENIED"), "{answer}");
            assert!(started.elapsed() < Duration::from_millis(500), "collector {what}: call {i} took {:?}", started.elapsed());
        }
        let started = Instant::now();
        let run = s.finish();
        run.assert_exit(0);
        assert!(started.elapsed() < Duration::from_secs(5), "collector {what}: the exit took {:?}\n{}", started.elapsed(), run.context());
        assert!(
            run.stderr.contains("OTLP copy to") && (run.stderr.contains("dropped") || run.stderr.contains("undelivered")),
            "collector {what}\n{}",
            run.context()
        );
        assert_eq!(journal_lines(&f.journal).len(), 7, "the file has every row");
    }
}

#[test]
fn check_names_the_copies() {
    let collector = "http://127.0.0.1:4318";
    let f = fixture(json!({"otlp": {"url": collector}, "syslog": {"journald": "/run/j.sock"}}));
    let run = run_sp(&["check", "--config", &f.policy.display().to_string()], &[], b"");
    run.assert_exit(0);
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(
        out.contains("syslog copy /dev/log facility authpriv (journald's native protocol to /run/j.sock), OTLP copy http://127.0.0.1:4318/v1/logs"),
        "{out}"
    );
    let bad = fixture(json!({"otlp": {"url": "http://user:pw@127.0.0.1:4318"}}));
    let run = run_sp(&["check", "--config", &bad.policy.display().to_string()], &[], b"");
    run.assert_exit(1);
    assert!(run.stderr.contains("audit.otlp.url") && run.stderr.contains("must have no user, password, query or fragment"), "{}", run.context());
    drop(f.dir);
}
