//! Issue 34 §1 and §4 end to end: session recordings (`ssh.recordings`) and `sudo`
//! with the password on stdin (`ssh.hosts.X.sudo`), the built `sp mcp` against the real
//! OpenSSH `sshd` of `support/sshd.rs` (logging in as the user running the tests).
//!
//! **sudo here is a fake.** The test machine has no `sudo` installed (and the tests run
//! as root, who has no password), so a real `sudo -S` with a password cannot be run.
//! The test sshd puts a directory first in the sessions' `PATH` (`SetEnv`) holding a
//! `sudo` shell script ([`FAKE_SUDO`]) that: logs its argv and `/proc/self/cmdline` (so
//! the test can prove the password is not on the command line), checks it got exactly
//! `-k -S -p '' --`, reads the first line of stdin (the password), saves what it read
//! (proof it came on stdin), echoes it back in several spellings (plain, base64, hex,
//! upper case, percent-encoded), then runs the command. Everything is checked on the
//! remote side's files, not by trusting `sp`.
//!
//! Attacks tried, and how each held:
//! - a recording edited in place, truncated, extended, swapped with another call's,
//!   removed, replaced by a symbolic link: `sp audit verify` names the row (the unit test
//!   in `audit/verify.rs` covers each; here: changed, truncated, swapped, removed);
//! - a recordings directory that is missing, group/other-accessible, or a symbolic
//!   link: the call is refused with SP_UNAVAILABLE and the command never ran (its marker
//!   file is absent on the remote side);
//! - the sudo password echoed back plain, base64, hex, upper case, percent-encoded:
//!   redacted in the result, in the recording and in the journal;
//! - the password on the command line (argv or /proc/PID/cmdline of sudo): absent;
//! - transfers: a downloaded file holding the password in several spellings is recorded
//!   (an `"o"` event) exactly as the agent got it, scrubbed; an upload is recorded as
//!   an `"i"` event; both rows hold the recording's hash beside the transfer's own, and
//!   `sp audit verify` checks them as it checks a command's;
//! - a command off the sudo list (`echo restarted app; id`, `echo other`) on a host that
//!   otherwise allows any command: runs without sudo (the fake sudo's log has no line
//!   for it) and its stdin holds only the agent's text.
#![allow(clippy::disallowed_methods, reason = "tests start sp and sshd and read their files; the fence in clippy.toml is for src/")]

use crate::support;

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use support::process::{run_sp, tool_error_code, Launch, Session, TempDir};
use support::sshd::{self, Sshd};

const VERSION: &str = "2025-06-18";
const PASSWORD: &str = "Sudo-pa55word-for-web1";

/// The fake `sudo` (module docs); `@DIR@` is the fixture's directory.
const FAKE_SUDO: &str = r#"#!/bin/sh
log=@DIR@/sudo.log
printf 'argv: %s\n' "$*" >> "$log"
printf 'cmdline: %s\n' "$(tr '\0' ' ' < /proc/$$/cmdline)" >> "$log"
if [ "$1" != "-k" ] || [ "$2" != "-S" ] || [ "$3" != "-p" ] || [ "$4" != "" ] || [ "$5" != "--" ]; then
    echo "fake sudo: unexpected options: $*" >&2
    exit 97
fi
shift 5
IFS= read -r pw
printf '%s' "$pw" > @DIR@/sudo.saw
echo "plain: $pw"
echo "base64: $(printf '%s' "$pw" | base64)"
echo "hex: $(printf '%s' "$pw" | od -An -tx1 | tr -d ' \n')"
echo "upper: $(printf '%s' "$pw" | tr a-z A-Z)"
echo "percent: $(printf '%s' "$pw" | od -An -tx1 | tr -d '\n' | sed 's/ /%/g')"
exec "$@"
"#;

struct World {
    sshd: Sshd,
    dir: TempDir,
    /// The remote side's scratch directory (same machine): the fake sudo's files.
    remote: TempDir,
    journal: PathBuf,
    recordings: PathBuf,
}

impl World {
    fn new() -> Option<World> {
        if !sshd::available() {
            return None;
        }
        let remote = TempDir::new("ssh-rec-remote");
        let bin = remote.path.join("bin");
        std::fs::create_dir(&bin).unwrap();
        let script = FAKE_SUDO.replace("@DIR@", &remote.path.display().to_string());
        std::fs::write(bin.join("sudo"), script).unwrap();
        std::fs::set_permissions(bin.join("sudo"), std::fs::Permissions::from_mode(0o755)).unwrap();
        // SFTP for the transfers' recordings.
        let sshd = Sshd::start_full("Subsystem sftp internal-sftp\n", &format!("PATH={}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", bin.display()));
        let dir = TempDir::new("ssh-rec");
        let recordings = dir.path.join("rec");
        std::fs::DirBuilder::new().mode(0o700).create(&recordings).unwrap();
        Some(World { journal: dir.path.join("audit.jsonl"), recordings, sshd, dir, remote })
    }

    /// Host `web1` (any command, a pty), `sudo` for `echo restarted *`, recordings in
    /// `recordings` (a path: it may be made unusable), `extra` merged into `ssh`.
    fn policy(&self, recordings: &Path, extra: Value) -> PathBuf {
        let kh = self.dir.file("known_hosts", format!("{}\n", self.sshd.known_hosts_line()).as_bytes(), 0o600);
        let pw = self.dir.file("sudo-password", format!("{PASSWORD}\n").as_bytes(), 0o600);
        let host = json!({
            "address": "127.0.0.1", "port": self.sshd.port, "user": self.sshd.user,
            "auth": {"key_file": self.sshd.client_key},
            "sudo": {"password": {"credential": "web1-sudo"}, "commands": ["echo restarted *"]}
        });
        let mut ssh = json!({"known_hosts": kh, "connect_timeout_s": 5, "hosts": {"web1": host}, "recordings": {"dir": recordings}});
        if let Value::Object(m) = extra {
            ssh.as_object_mut().unwrap().extend(m);
        }
        let policy = json!({
            "credentials": {"web1-sudo": {"source": {"file": pw}, "inject": {"bearer": {}}, "hosts": ["sudo.invalid"]}},
            "ssh": ssh,
            "audit": {"path": self.journal},
        });
        self.dir.file("policy.json", policy.to_string().as_bytes(), 0o600)
    }

    fn session(&self, policy: &Path) -> Session {
        let mut s = Session::start(Launch::mcp(policy, &["-v"]));
        s.ready(VERSION);
        s
    }

    fn rows(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.journal).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    fn results(&self) -> Vec<Value> {
        self.rows().into_iter().filter(|r| r["kind"] == "result").collect()
    }

    fn verify(&self) -> support::process::Run {
        run_sp(&["audit", "verify", &self.journal.display().to_string()], &[], b"")
    }

    fn remote_file(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.remote.path.join(name)).ok()
    }
}

fn exec(s: &mut Session, id: i64, args: Value) -> Value {
    s.tool(id, "ssh_exec", args)
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Every spelling the fake sudo echoes, and a few more the redactor knows.
fn spellings() -> Vec<String> {
    use base64::Engine as _;
    let hex: String = PASSWORD.bytes().map(|b| format!("{b:02x}")).collect();
    let percent: String = PASSWORD.bytes().map(|b| format!("%{b:02x}")).collect();
    vec![PASSWORD.to_owned(), base64::engine::general_purpose::STANDARD.encode(PASSWORD), hex, PASSWORD.to_uppercase(), percent]
}

fn assert_no_password(what: &str, text: &str) {
    for s in spellings() {
        assert!(!text.contains(&s), "{what} holds the password as {s:?}:\n{text}");
    }
}

/// A call is recorded: the result row names the file and holds its SHA-256 and size;
/// the file is 0600 asciicast v2 with the command, host and host-key fingerprint in its
/// header and the output as timed events; `sp audit verify` checks it, and `sp audit
/// show FILE SEQ --recording` prints it.
#[test]
fn a_call_is_recorded_and_its_hash_is_in_the_row() {
    let Some(w) = World::new() else { return };
    let mut s = w.session(&w.policy(&w.recordings, json!({})));
    let r = exec(&mut s, 1, json!({"host": "web1", "command": "echo hello; sleep 0.3; echo world"}));
    assert_eq!(r["isError"], false, "{r}");
    let fp = r["structuredContent"]["host_key_fingerprint"].as_str().unwrap().to_owned();
    s.finish().assert_exit(0);

    let results = w.results();
    assert_eq!(results.len(), 1, "{results:?}");
    let row = &results[0];
    let path = PathBuf::from(row["recording"].as_str().unwrap_or_else(|| panic!("no recording in {row}")));
    assert_eq!(path.parent(), Some(w.recordings.as_path()));
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(row["recording_sha256"].as_str(), Some(sha256(&bytes).as_str()), "{row}");
    assert_eq!(row["recording_bytes"].as_u64(), Some(bytes.len() as u64));
    assert!(row.get("recording_cut").is_none(), "{row}");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o600);

    let text = String::from_utf8(bytes).unwrap();
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!((header["version"].as_u64(), header["command"].as_str()), (Some(2), Some("echo hello; sleep 0.3; echo world")), "{header}");
    assert_eq!((header["sp"]["host"].as_str(), header["sp"]["host_key_fp"].as_str()), (Some("web1"), Some(fp.as_str())), "{header}");
    assert_eq!(header["sp"]["exit_status"], 0);
    let events: Vec<Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
    let out: String = events.iter().map(|e| e[2].as_str().unwrap()).collect();
    assert_eq!(out, "hello\nworld\n", "{events:?}");
    assert!(events.iter().all(|e| e[1] == "o"), "with a pty every event is stdout: {events:?}");
    // Timed: "world" came after the sleep.
    let last = events.last().unwrap()[0].as_f64().unwrap();
    assert!(events.len() >= 2 && last >= 0.25, "{events:?}");

    let v = w.verify();
    v.assert_exit(0);
    let said = String::from_utf8_lossy(&v.stdout).into_owned();
    assert!(said.contains("1 session recording(s) match"), "{said}");

    let seq = row["seq"].as_u64().unwrap().to_string();
    let shown = run_sp(&["audit", "show", &w.journal.display().to_string(), &seq, "--recording"], &[], b"");
    shown.assert_exit(0);
    assert_eq!(String::from_utf8_lossy(&shown.stdout), text);
}

/// `sp audit verify` fails at the row whose recording was changed, truncated, swapped
/// with another call's, or removed, and says which; `show --recording` refuses it too.
#[test]
fn verify_finds_a_recording_changed_truncated_swapped_or_removed() {
    let Some(w) = World::new() else { return };
    let mut s = w.session(&w.policy(&w.recordings, json!({})));
    for (id, word) in [(1, "first"), (2, "second")] {
        let r = exec(&mut s, id, json!({"host": "web1", "command": format!("echo {word}")}));
        assert_eq!(r["isError"], false, "{r}");
    }
    s.finish().assert_exit(0);
    let results = w.results();
    let path = |i: usize| PathBuf::from(results[i]["recording"].as_str().unwrap());
    let line_of = |i: usize| {
        let seq = results[i]["seq"].as_u64().unwrap();
        w.rows().iter().position(|r| r["seq"].as_u64() == Some(seq)).unwrap() + 1
    };
    w.verify().assert_exit(0);
    let (a, b) = (path(0), path(1));
    let good = std::fs::read(&a).unwrap();
    let broken = |why: &str, at: usize| {
        let v = w.verify();
        v.assert_exit(1);
        let said = String::from_utf8_lossy(&v.stdout).into_owned();
        assert!(said.contains(&format!("row {at} names the recording ")) && said.contains(why), "want row {at} {why:?}:\n{said}");
    };

    // changed, same length
    std::fs::write(&a, String::from_utf8(good.clone()).unwrap().replace("first", "fir5t")).unwrap();
    broken("which was changed or replaced", line_of(0));
    let seq = results[0]["seq"].as_u64().unwrap().to_string();
    let shown = run_sp(&["audit", "show", &w.journal.display().to_string(), &seq, "--recording"], &[], b"");
    shown.assert_exit(1);
    assert!(shown.stdout.is_empty() && shown.stderr.contains("which was changed or replaced"), "{}", shown.context());
    // truncated
    std::fs::write(&a, &good[..good.len() - 5]).unwrap();
    broken("where", line_of(0));
    broken("were recorded (truncated, extended or replaced)", line_of(0));
    // swapped with the other call's recording
    std::fs::write(&a, &good).unwrap();
    w.verify().assert_exit(0);
    let tmp = w.recordings.join("swap");
    std::fs::rename(&a, &tmp).unwrap();
    std::fs::rename(&b, &a).unwrap();
    std::fs::rename(&tmp, &b).unwrap();
    broken("", line_of(0));
    // removed (the other one restored: the first break is the removed one)
    std::fs::rename(&a, &tmp).unwrap();
    std::fs::rename(&b, &a).unwrap();
    std::fs::rename(&tmp, &b).unwrap();
    w.verify().assert_exit(0);
    std::fs::remove_file(&b).unwrap();
    broken("which is missing (removed or moved)", line_of(1));
}

/// A recordings directory that is missing, too open, or a symbolic link refuses the
/// call before the command starts: SP_UNAVAILABLE, and the command's marker file is
/// absent on the remote side.
#[test]
fn an_unwritable_recordings_dir_refuses_the_call_before_the_command_runs() {
    let Some(w) = World::new() else { return };
    let open = w.dir.path.join("open");
    std::fs::DirBuilder::new().mode(0o755).create(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let link = w.dir.path.join("link");
    std::os::unix::fs::symlink(&w.recordings, &link).unwrap();
    let cases = [(w.dir.path.join("missing"), "no such file"), (open.clone(), "permissions 0755 are too open"), (link, "symbolic link")];
    for (i, (dir, why)) in cases.iter().enumerate() {
        let mut s = w.session(&w.policy(dir, json!({})));
        let marker = w.remote.path.join(format!("ran-{i}"));
        let r = exec(&mut s, 1, json!({"host": "web1", "command": format!("touch {}", marker.display())}));
        assert_eq!(tool_error_code(&r), Some("SP_UNAVAILABLE"), "{r}");
        let text = r["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("the session recording cannot be written") && text.contains(why) && text.contains("the command was not run"), "{text}");
        s.finish().assert_exit(0);
        assert!(!marker.exists(), "the command ran although its recording could not be written ({})", dir.display());
        assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0, "nothing is created in a directory that is refused");
    }
    // No login happened for a refused call: the command never reached the server.
    assert_eq!(w.sshd.logins(), 0, "{}", w.sshd.log());
}

/// sudo: a listed command gets `sudo -k -S -p '' -- ...` with the password on stdin
/// (the fake sudo saw it there, and not in its argv or cmdline); every spelling it
/// echoes is redacted in the result, the recording and the journal; commands off the
/// list never get sudo, and their stdin holds only the agent's text.
#[test]
fn sudo_gets_the_password_on_stdin_and_it_is_redacted_everywhere() {
    let Some(w) = World::new() else { return };
    let mut s = w.session(&w.policy(&w.recordings, json!({})));
    let r = exec(&mut s, 1, json!({"host": "web1", "command": "echo restarted app"}));
    assert_eq!(r["isError"], false, "{r}");
    let out = r["structuredContent"]["stdout"].as_str().unwrap().to_owned();
    assert_no_password("the result", &r.to_string());
    assert_eq!(out.matches("[REDACTED:web1-sudo]").count(), 5, "{out}");
    assert!(out.ends_with("restarted app\n"), "{out}");
    // What the remote side saw: the password on stdin, never on the command line.
    assert_eq!(w.remote_file("sudo.saw").as_deref(), Some(PASSWORD));
    let log = w.remote_file("sudo.log").unwrap();
    assert!(log.contains("argv: -k -S -p  -- echo restarted app\n"), "{log}");
    assert!(!log.contains(PASSWORD), "{log}");

    // Off the list: no sudo (the fake sudo's log does not grow), and the command's
    // stdin holds only what the agent sent.
    let r = exec(&mut s, 2, json!({"host": "web1", "command": "echo restarted app; cat", "stdin": "agent text\n"}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["stdout"].as_str(), Some("restarted app\nagent text\n"), "{r}");
    let r = exec(&mut s, 3, json!({"host": "web1", "command": "echo other"}));
    assert_eq!(r["structuredContent"]["stdout"].as_str(), Some("other\n"), "{r}");
    assert_eq!(w.remote_file("sudo.log").unwrap(), log, "a command off the sudo list ran under sudo");
    s.finish().assert_exit(0);

    let journal = std::fs::read_to_string(&w.journal).unwrap();
    assert_no_password("the journal", &journal);
    assert_eq!(w.results().len(), 3);
    let intents: Vec<Value> = w.rows().into_iter().filter(|r| r["kind"] == "intent").collect();
    assert_eq!(intents[0]["rule"], "ssh.hosts.web1.sudo.commands[0]", "{intents:?}");
    assert_eq!(intents[1]["rule"], "ssh.hosts.web1 (any command)", "{intents:?}");
    let recording = std::fs::read_to_string(w.results()[0]["recording"].as_str().unwrap()).unwrap();
    assert_no_password("the recording", &recording);
    assert_eq!(recording.matches("[REDACTED:web1-sudo]").count(), 5, "{recording}");
    w.verify().assert_exit(0);
}

/// Without a pty stderr is recorded as "e" events; `max_bytes` cuts a long recording at
/// a whole line, the row says `recording_cut`, and the cut file still verifies.
#[test]
fn stderr_events_and_a_cut_recording() {
    let Some(w) = World::new() else { return };
    let policy = w.policy(&w.recordings, json!({"recordings": {"dir": w.recordings, "max_bytes": 4096}}));
    let mut text: Value = serde_json::from_str(&std::fs::read_to_string(&policy).unwrap()).unwrap();
    text["ssh"]["hosts"]["web1"]["pty"] = json!(false);
    let policy = w.dir.file("policy-nopty.json", text.to_string().as_bytes(), 0o600);
    let mut s = w.session(&policy);
    let r = exec(&mut s, 1, json!({"host": "web1", "command": "echo out; echo err >&2"}));
    assert_eq!(r["isError"], false, "{r}");
    let r = exec(&mut s, 2, json!({"host": "web1", "command": "for i in $(seq 1 300); do echo line-$i-padding-padding; sleep 0.002; done"}));
    assert_eq!(r["isError"], false, "{r}");
    s.finish().assert_exit(0);
    let results = w.results();
    let first = std::fs::read_to_string(results[0]["recording"].as_str().unwrap()).unwrap();
    let events: Vec<Value> = first.lines().skip(1).map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<(&str, &str)> = events.iter().map(|e| (e[1].as_str().unwrap(), e[2].as_str().unwrap())).collect();
    assert!(kinds.contains(&("o", "out\n")) && kinds.contains(&("e", "err\n")), "{kinds:?}");
    assert!(results[0].get("recording_cut").is_none(), "{}", results[0]);
    let cut = &results[1];
    assert_eq!(cut["recording_cut"], true, "{cut}");
    let bytes = std::fs::read(cut["recording"].as_str().unwrap()).unwrap();
    assert!(bytes.len() <= 4096 && bytes.ends_with(b"\n"), "{} bytes", bytes.len());
    assert_eq!(cut["recording_bytes"].as_u64(), Some(bytes.len() as u64));
    w.verify().assert_exit(0);
}

/// A sudo password that cannot be read stops the call before anything is sent: no
/// login, no sudo; a command off the list still runs.
#[test]
fn an_unreadable_sudo_password_stops_the_call_before_the_connection() {
    let Some(w) = World::new() else { return };
    let policy = w.policy(&w.recordings, json!({}));
    std::fs::remove_file(w.dir.path.join("sudo-password")).unwrap();
    let mut s = w.session(&policy);
    let r = exec(&mut s, 1, json!({"host": "web1", "command": "echo restarted app"}));
    assert_eq!(tool_error_code(&r), Some("SP_UNAVAILABLE"), "{r}");
    assert!(r["content"][0]["text"].as_str().unwrap_or_default().contains("web1-sudo"), "{r}");
    assert_eq!((w.sshd.logins(), w.remote_file("sudo.log")), (0, None), "{}", w.sshd.log());
    let r = exec(&mut s, 2, json!({"host": "web1", "command": "echo other"}));
    assert_eq!(r["structuredContent"]["stdout"].as_str(), Some("other\n"), "{r}");
    s.finish().assert_exit(0);
}

/// Transfers are recorded as commands are (issue 34 §1, "every ssh_exec (and transfer)"):
/// `ssh_get`'s recording holds the content as the agent got it (scrubbed: the remote file
/// holds the sudo password in several spellings), `ssh_put`'s what was written, each row
/// the recording's hash beside the SHA-256 of the bytes that moved; verify checks both.
#[test]
fn transfers_are_recorded_scrubbed_and_verified() {
    let Some(w) = World::new() else { return };
    let mut spelled = spellings().join("\n");
    spelled.push('\n');
    std::fs::write(w.remote.path.join("app.log"), format!("line one\n{spelled}")).unwrap();
    std::fs::create_dir(w.remote.path.join("up")).unwrap();
    let base = w.remote.path.display().to_string();
    let policy = w.policy(&w.recordings, json!({}));
    let mut p: Value = serde_json::from_slice(&std::fs::read(&policy).unwrap()).unwrap();
    p["ssh"]["hosts"]["web1"]["files"] = json!({"read": [format!("{base}/*.log")], "write": [format!("{base}/up/*")]});
    std::fs::write(&policy, p.to_string()).unwrap();
    let mut s = w.session(&policy);
    let got = s.tool(1, "ssh_get", json!({"host": "web1", "path": format!("{base}/app.log")}));
    assert_eq!(got["isError"], false, "{got}");
    let content = got["structuredContent"]["content"].as_str().unwrap().to_owned();
    assert!(content.starts_with("line one\n"), "{content}");
    assert_no_password("ssh_get's content", &content);
    let put = s.tool(2, "ssh_put", json!({"host": "web1", "path": format!("{base}/up/new.txt"), "content": "uploaded text\n"}));
    assert_eq!(put["isError"], false, "{put}");
    s.finish().assert_exit(0);

    let results = w.results();
    assert_eq!(results.len(), 2, "{results:?}");
    let mut casts = Vec::new();
    for (row, tool) in results.iter().zip(["ssh_get", "ssh_put"]) {
        assert_eq!(row["tool"], tool, "{row}");
        let path = PathBuf::from(row["recording"].as_str().unwrap_or_else(|| panic!("no recording in {row}")));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(row["recording_sha256"].as_str(), Some(sha256(&bytes).as_str()), "{row}");
        let text = String::from_utf8(bytes).unwrap();
        assert_no_password("a transfer's recording", &text);
        let mut lines = text.lines();
        let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        assert!(header["command"].as_str().is_some_and(|c| c.starts_with(&format!("{tool} {base}"))), "{header}");
        assert_eq!(header["sp"]["sha256"], row["sha256"], "the header names the bytes that moved: {header} {row}");
        let events: Vec<Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
        casts.push(events);
    }
    assert_eq!(casts[0].len(), 1, "{:?}", casts[0]);
    assert_eq!((casts[0][0][1].as_str(), casts[0][0][2].as_str()), (Some("o"), Some(content.as_str())), "the get's event is what the agent got");
    assert_eq!((casts[1][0][1].as_str(), casts[1][0][2].as_str()), (Some("i"), Some("uploaded text\n")), "the put's event is what was written");
    let v = w.verify();
    v.assert_exit(0);
    let said = String::from_utf8_lossy(&v.stdout).into_owned();
    assert!(said.contains("2 session recording(s) match"), "{said}");
}
