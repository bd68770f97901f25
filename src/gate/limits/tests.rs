use super::*;
use crate::policy::limits::LimitRule;

fn rule(index: usize, max: u64, per_s: u64) -> LimitRule {
    LimitRule {
        index,
        tool: None,
        target: None,
        credential: None,
        upstream: None,
        max,
        per_s,
        text: format!("{{\"max\":{max},\"per_s\":{per_s},\"i\":{index}}}"),
    }
}

#[test]
fn a_window_admits_max_then_refuses_until_it_closes() {
    let r = rule(0, 3, 60);
    let mut s = State::default();
    let t0 = 1_000_000;
    for i in 0..3 {
        assert_eq!(s.admit(&[&r], t0 + i), Ok(()), "call {i}");
    }
    let refused = s.admit(&[&r], t0 + 10_500).unwrap_err();
    // The window opened at t0 and closes at t0 + 60 s: 49.5 s left, rounded up.
    assert_eq!(refused, Limited { index: 0, rule: r.text.clone(), max: 3, per_s: 60, retry_after_s: 50 });
    assert_eq!(s.used(&r, t0 + 10_500), 3, "a refused call counts nothing");
    assert_eq!(s.check(&[&r], t0 + 59_999).map(|l| l.retry_after_s), Some(1), "at least one second");
    // Closed: a new window opens at the next call.
    assert_eq!(s.admit(&[&r], t0 + 60_000), Ok(()));
    assert_eq!(s.used(&r, t0 + 60_000), 1);
}

#[test]
fn a_call_is_counted_in_every_rule_or_in_none() {
    let (tight, loose) = (rule(0, 1, 60), rule(1, 10, 60));
    let mut s = State::default();
    assert_eq!(s.admit(&[&tight, &loose], 0), Ok(()));
    assert_eq!(s.admit(&[&tight, &loose], 1).unwrap_err().index, 0);
    assert_eq!((s.used(&tight, 1), s.used(&loose, 1)), (1, 1), "the refused call was not counted in the loose rule");
}

#[test]
fn the_state_round_trips_and_prunes_closed_windows() {
    let (a, b) = (rule(0, 5, 1), rule(1, 5, 100));
    let mut s = State::default();
    s.admit(&[&a, &b], 5_000).unwrap();
    let back = State::parse(&s.render()).unwrap();
    assert_eq!(back, s);
    // A stale tail after the first line (a writer killed before it truncated) is ignored.
    assert_eq!(State::parse(&format!("{}{{\"v\":1,garbage", s.render())).unwrap(), s);
    let mut later = back;
    later.admit(&[&b], 7_000).unwrap();
    assert!(!later.render().contains("\"i\":0"), "a's window closed at 6000 and was dropped: {}", later.render());
    // A window that starts after now (the clock was set back) is dropped too.
    let mut back_in_time = s.clone();
    back_in_time.admit(&[&b], 1_000).unwrap();
    assert_eq!(back_in_time.used(&b, 1_000), 1);
}

#[test]
fn a_corrupt_state_names_what_is_wrong() {
    assert_eq!(State::parse("").unwrap(), State::default());
    assert!(State::parse("{\"v\":2,\"windows\":{}}").unwrap_err().contains("version"));
    assert_eq!(State::parse("{\"v\":1,\"windows\":{\"k\":[1,2]}}").unwrap_err(), "window \"k\" is not [start_ms, count, per_s]");
    assert!(State::parse("not json").is_err());
}

#[test]
fn windows_are_bounded() {
    let mut s = State::default();
    let rules: Vec<LimitRule> = (0..MAX_WINDOWS + 10).map(|i| rule(i, 5, 600)).collect();
    for (i, r) in rules.iter().enumerate() {
        s.admit(&[r], i as u64).unwrap();
    }
    assert_eq!(s.windows.len(), MAX_WINDOWS);
    assert_eq!(s.used(&rules[0], 2_000), 0, "the oldest went first");
    assert_eq!(s.used(&rules[MAX_WINDOWS + 9], 2_000), 1);
}

#[test]
fn the_file_keeps_counts_across_handles_and_refuses_what_is_not_ours() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/limits.json");
    let r = rule(0, 2, 60);
    let now = now_ms();
    assert_eq!(Limiter::new(path.clone()).admit(&[&r], || now), Ok(Ok(())));
    assert_eq!(Limiter::new(path.clone()).admit(&[&r], || now), Ok(Ok(())), "a second process's handle sees the first count");
    assert_eq!(Limiter::new(path.clone()).admit(&[&r], || now).unwrap().unwrap_err().index, 0);
    assert_eq!(Limiter::new(path.clone()).peek().unwrap().used(&r, now), 2);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let e = Limiter::new(path.clone()).admit(&[&r], || now).unwrap_err();
    assert!(matches!(e, LimitError::File { why: SysError::TooOpen { .. }, .. }), "{e}");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&path, "{\"v\":1,\"windows\":[]}\n").unwrap();
    let e = Limiter::new(path.clone()).admit(&[&r], || now).unwrap_err();
    assert_eq!(e.to_string(), format!("rate limit state {} is corrupt (no windows object); remove it to start the counts afresh", path.display()));
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let e = Limiter::new(link).admit(&[&r], || now).unwrap_err();
    assert!(matches!(e, LimitError::File { why: SysError::Symlink, .. }), "{e}");
}

/// The clock is read with the lock held: a time taken before the wait could be older
/// than the window a racing process opened meanwhile, which `prune` takes for a clock
/// set back (its count dropped; `a_tight_race_loses_no_count` in tests/it saw it under
/// CI load). The clock here checks that another open file cannot take the lock.
#[test]
fn the_clock_is_read_under_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.json");
    let r = rule(0, 5, 60);
    let mut held = false;
    let clock = || {
        let other = std::fs::File::open(&path).unwrap();
        held = crate::sys::lock_exclusive(&other, std::time::Duration::ZERO).is_err();
        now_ms()
    };
    assert_eq!(Limiter::new(path.clone()).admit(&[&r], clock), Ok(Ok(())));
    assert!(held, "the clock was read while the state file was not locked");
}
