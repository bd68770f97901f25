//! An exclusive `flock` with a deadline (the journal, `known_hosts`, the grants file):
//! [`lock_exclusive`] retries while another process holds it, then gives up.

use std::fmt;
use std::fs::File;
use std::os::fd::AsFd;
use std::time::Duration;

/// An exclusive `flock` on a file, released on drop (and by the kernel when the process
/// dies or the file is closed).
#[derive(Debug)]
pub(crate) struct FileLock<'f>(&'f File);

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(self.0.as_fd(), rustix::fs::FlockOperation::Unlock);
    }
}

/// Why [`lock_exclusive`] gave up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LockError {
    /// Someone else held it for the whole wait.
    Busy { waited: Duration },
    /// `flock` itself failed.
    Failed { errno: i32 },
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Busy { waited } => write!(f, "still locked by another process after {} ms", waited.as_millis()),
            LockError::Failed { errno } => write!(f, "{}", rustix::io::Errno::from_raw_os_error(*errno)),
        }
    }
}

impl std::error::Error for LockError {}

/// Takes an exclusive lock on `file`, retrying (every few milliseconds) while another
/// process holds it, for at most `wait`.
pub(crate) fn lock_exclusive(file: &File, wait: Duration) -> Result<FileLock<'_>, LockError> {
    use rustix::{fs::FlockOperation, io::Errno};
    let deadline = std::time::Instant::now() + wait;
    loop {
        match rustix::fs::flock(file.as_fd(), FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(FileLock(file)),
            Err(Errno::WOULDBLOCK | Errno::INTR) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(Errno::WOULDBLOCK) => return Err(LockError::Busy { waited: wait }),
            Err(e) => return Err(LockError::Failed { errno: e.raw_os_error() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_held_lock_makes_another_wait_then_give_up_busy() {
        // Two open file descriptions of one file: `flock` is per open file.
        let f = tempfile::NamedTempFile::new().unwrap();
        let (a, b) = (f.reopen().unwrap(), f.reopen().unwrap());
        let held = lock_exclusive(&a, Duration::ZERO).unwrap();
        let started = Instant::now();
        let wait = Duration::from_millis(200);
        assert_eq!(lock_exclusive(&b, wait).unwrap_err(), LockError::Busy { waited: wait });
        assert!(started.elapsed() >= wait, "gave up before the deadline");
        drop(held);
        assert!(lock_exclusive(&b, Duration::ZERO).is_ok(), "dropping the guard releases the lock");
    }

    #[test]
    fn a_lock_error_is_a_std_error() {
        fn is_error<E: std::error::Error>(_: &E) {}
        is_error(&LockError::Busy { waited: Duration::ZERO });
    }
}
