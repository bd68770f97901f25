//! The SSH executor's unit tests: the output budget, the start marker, the remote kill
//! script and the pty input encoding.

use super::*;
use crate::tools::ssh::kill::*;
use crate::tools::ssh::pty::*;

#[test]
fn one_budget_for_both_streams() {
    let mut c = Collector { budget: 10, out: SshOutcome::default(), gate: Gate::Missing, sent: std::time::Instant::now() };
    c.push(false, b"123456");
    c.push(true, b"abcdef");
    c.push(false, b"zz");
    assert_eq!((c.out.stdout.as_slice(), c.out.stderr.as_slice()), (&b"123456"[..], &b"abcd"[..]));
    assert_eq!((c.out.stdout_bytes, c.out.stderr_bytes, c.out.truncated), (8, 6, true));
}

#[test]
fn the_marker_is_stripped_wherever_the_reads_split_it() {
    let m = Marker("0123456789abcdef".into());
    assert_eq!(m.wrap("uptime; w"), "printf '\\036sp:0123456789abcdef\\036'; uptime; w");
    let marker = m.bytes();
    let stream = [b"rc says hi\n".as_slice(), &marker, b"out\n"].concat();
    for split in 0..=stream.len() {
        let mut c = Collector {
            budget: 100,
            out: SshOutcome::default(),
            gate: Gate::Awaiting { marker: marker.clone(), held: Vec::new() },
            sent: std::time::Instant::now(),
        };
        c.push(false, &stream[..split]);
        c.push(true, b"e");
        c.push(false, &stream[split..]);
        c.release();
        assert_eq!((c.out.stdout.as_slice(), c.out.stdout_bytes, c.out.stderr.as_slice()), (&b"rc says hi\nout\n"[..], 15, &b"e"[..]), "{split}");
        assert!(c.marker_seen(), "{split}");
    }
    // Never seen: everything is output, once, and nothing is killed.
    let mut c = Collector {
        budget: 100,
        out: SshOutcome::default(),
        gate: Gate::Awaiting { marker: marker.clone(), held: Vec::new() },
        sent: std::time::Instant::now(),
    };
    c.push(false, b"forced\n");
    c.release();
    c.push(false, &marker);
    assert_eq!((c.out.stdout_bytes, c.marker_seen()), (7 + marker.len() as u64, false));
    // A window's worth of output without it: given up, the output passes.
    let mut c = Collector { budget: 100, out: SshOutcome::default(), gate: Gate::Awaiting { marker, held: Vec::new() }, sent: std::time::Instant::now() };
    c.push(false, &vec![b'x'; MARKER_WINDOW + 1]);
    assert_eq!((c.out.stdout_bytes, c.out.truncated, c.marker_seen()), (MARKER_WINDOW as u64 + 1, true, false));
}

#[test]
fn the_kill_passes_through_any_login_shell_and_reports_exactly() {
    // One line, one single-quoted argument, no history character (csh).
    let inner = KILL_COMMAND.strip_prefix("exec /bin/sh -c '").and_then(|s| s.strip_suffix('\'')).unwrap();
    assert!(!inner.contains(['\'', '\n', '!']), "{inner}");
    let cases = [
        ("sp-stop: killed 12 left 0", Ok(12)),
        ("sp-stop: killed 3 left 1", Err("1 process(es) were still there after SIGKILL".to_owned())),
        ("sp-stop: no /proc", Err("the kill did not run (no /proc)".to_owned())),
        ("sp-stop: the parent is \u{1b}[2Jbash, not sshd", Err("the kill did not run (the parent is [2Jbash, not sshd)".to_owned())),
        ("sp-stop: killed x left 0", Err("the kill's report was garbled".to_owned())),
        ("", Err("the kill did not report (is the remote system Linux with /proc?)".to_owned())),
    ];
    for (line, want) in cases {
        assert_eq!(parse_kill_report(line).map_err(|e| e.0), want, "{line:?}");
    }
}

#[test]
fn pty_input_escapes_controls_flushes_long_lines_and_ends_with_ctrl_d() {
    assert_eq!(pty_input(b""), b"\x04");
    assert_eq!(pty_input(b"a\n"), b"a\n\x04");
    // a partial last line: one ^D hands it over, the second is the end
    assert_eq!(pty_input(b"a"), b"a\x04\x04");
    assert_eq!(pty_input(b"\x04\x16\x03"), b"\x16\x04\x16\x16\x03\x04\x04");
    // a long line is flushed every PTY_FLUSH_EVERY bytes, never on an empty line
    let long = vec![b'x'; 2 * PTY_FLUSH_EVERY];
    let mut want = vec![b'x'; PTY_FLUSH_EVERY];
    want.push(CTRL_D);
    want.extend(vec![b'x'; PTY_FLUSH_EVERY]);
    want.extend([CTRL_D, CTRL_D]);
    assert_eq!(pty_input(&long), want);
    let mut line = vec![b'y'; PTY_FLUSH_EVERY - 1];
    line.push(b'\n');
    assert_eq!(pty_input(&line), [line.as_slice(), b"\x04"].concat());
}
