//! When an upstream that keeps dying is started again (issue 35 section 5, `sp-policy(5)`
//! UPSTREAMS): the first restart at once (one crash costs the next call nothing), then
//! a wait that doubles from [`FIRST`] to [`MAX`] after each death in a row. Meanwhile its
//! listing and calls fail at once with `UpstreamError::CrashLoop` (`SP_UNAVAILABLE`,
//! with the seconds left), and nothing is started.
//!
//! ```text
//!  deaths in a row:   1     2     3     4    ...    8+
//!  next start after:  0 s   1 s   2 s   4 s  ...    60 s
//! ```
//!
//! A process that ran [`STABLE`] or longer before it died starts a new series; a start
//! that fails (it exits during its handshake, its program is missing) is a death.

use std::time::{Duration, Instant};

/// The wait after the second death in a row.
pub(crate) const FIRST: Duration = Duration::from_secs(1);
/// The longest wait.
pub(crate) const MAX: Duration = Duration::from_secs(60);
/// A process that lived this long before it died was not crash-looping.
pub(crate) const STABLE: Duration = Duration::from_secs(60);

/// One upstream's deaths in a row.
#[derive(Debug, Clone, Default)]
pub(crate) struct Streak {
    deaths: u32,
    last: Option<Instant>,
    up_since: Option<Instant>,
}

impl Streak {
    /// The process started at `now`.
    pub(crate) fn started(&mut self, now: Instant) {
        self.up_since = Some(now);
    }

    /// The process died (or failed to start) at `now`.
    pub(crate) fn died(&mut self, now: Instant) {
        if self.up_since.take().is_some_and(|t| now.saturating_duration_since(t) >= STABLE) {
            self.deaths = 0;
        }
        self.deaths = self.deaths.saturating_add(1);
        self.last = Some(now);
    }

    pub(crate) fn deaths(&self) -> u32 {
        self.deaths
    }

    /// How long until it may be started again; `None`: now.
    pub(crate) fn wait(&self, now: Instant) -> Option<Duration> {
        let until = self.last? + delay(self.deaths)?;
        (until > now).then(|| until - now)
    }
}

/// The wait after `deaths` deaths in a row (module docs).
fn delay(deaths: u32) -> Option<Duration> {
    let doublings = deaths.checked_sub(2)?;
    Some(FIRST.saturating_mul(1u32.checked_shl(doublings.min(16)).unwrap_or(u32::MAX)).min(MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_the_second_death_to_a_minute() {
        let waits: Vec<Option<u64>> = (0..=10).map(|d| delay(d).map(|w| w.as_secs())).collect();
        assert_eq!(waits, [None, None, Some(1), Some(2), Some(4), Some(8), Some(16), Some(32), Some(60), Some(60), Some(60)]);
        assert_eq!(delay(u32::MAX), Some(MAX));
    }

    #[test]
    fn a_streak_waits_after_its_last_death_and_a_stable_run_starts_a_new_one() {
        let t0 = Instant::now();
        let mut s = Streak::default();
        assert_eq!(s.wait(t0), None, "never died: start now");
        s.started(t0);
        s.died(t0);
        assert_eq!(s.wait(t0), None, "the first restart is at once");
        s.started(t0);
        s.died(t0 + Duration::from_secs(1));
        assert_eq!(s.wait(t0 + Duration::from_secs(1)), Some(FIRST));
        assert_eq!(s.wait(t0 + Duration::from_millis(1500)), Some(Duration::from_millis(500)));
        assert_eq!(s.wait(t0 + Duration::from_secs(2)), None);
        // A failed start (never `started`) is a death in the same series.
        s.died(t0 + Duration::from_secs(2));
        assert_eq!((s.deaths(), s.wait(t0 + Duration::from_secs(2))), (3, Some(Duration::from_secs(2))));
        // A process that ran a minute: the next death is the first of a new series.
        s.started(t0 + Duration::from_secs(10));
        s.died(t0 + Duration::from_secs(10) + STABLE);
        assert_eq!((s.deaths(), s.wait(t0 + Duration::from_secs(10) + STABLE)), (1, None));
    }
}
