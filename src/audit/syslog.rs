//! The optional syslog copy: one datagram per row, best effort (module docs of
//! `audit`). Two wires: the traditional `<PRI>sp[PID]: ROW` to `/dev/log` (or the
//! policy's socket), and journald's native protocol when journald is the receiver
//! (`journald.rs`: the row's fields as `SP_*` journal fields, so `journalctl
//! SP_DECISION=denied` works).

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::policy::audit::{Journald, SyslogConfig, JOURNALD_SOCKET};

const SYSLOG_MAX: usize = 8 * 1024;

/// Which wire the copy speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Syslog,
    Journald,
}

pub(super) struct Syslog {
    socket: Option<UnixDatagram>,
    path: PathBuf,
    wire: Wire,
    facility: u8,
    warned: bool,
}

/// The wire and socket for a configuration: journald's native socket when the policy
/// names one, or (`auto`) when the syslog socket is `/dev/log` and `journald_socket`
/// exists; the syslog socket otherwise.
fn choose(c: &SyslogConfig, journald_socket: &Path) -> (Wire, PathBuf) {
    match &c.journald {
        Journald::Socket(p) => (Wire::Journald, p.clone()),
        Journald::Auto if c.socket == Path::new("/dev/log") && journald_socket.exists() => (Wire::Journald, journald_socket.to_owned()),
        Journald::Auto | Journald::Off => (Wire::Syslog, c.socket.clone()),
    }
}

impl Syslog {
    pub(super) fn new(c: &SyslogConfig) -> Syslog {
        let (wire, path) = choose(c, Path::new(JOURNALD_SOCKET));
        let mut s = Syslog { socket: None, path, wire, facility: c.facility, warned: false };
        if wire == Wire::Journald {
            log::info!("syslog copy: journald's native protocol to {}", s.path.display());
        }
        if let Err(e) = s.connect() {
            log::warn!("syslog copy: cannot connect to {}: {e}; will retry with each row", s.path.display());
            s.warned = true;
        }
        s
    }

    fn connect(&mut self) -> std::io::Result<()> {
        let sock = UnixDatagram::unbound()?;
        sock.set_write_timeout(Some(Duration::from_secs(1)))?;
        sock.connect(&self.path)?;
        self.socket = Some(sock);
        Ok(())
    }

    pub(super) fn send(&mut self, line: &str, notice: bool) {
        let severity: u8 = if notice { 5 } else { 6 };
        let msg = match self.wire {
            Wire::Syslog => {
                let body = crate::sys::cut(line, SYSLOG_MAX);
                format!("<{}>sp[{}]: {body}", u32::from(self.facility) * 8 + u32::from(severity), std::process::id()).into_bytes()
            }
            Wire::Journald => super::journald::entry(line, severity, self.facility),
        };
        let mut result = Err(std::io::Error::other("not connected"));
        for _ in 0..2 {
            if self.socket.is_none() && self.connect().is_err() {
                continue;
            }
            if let Some(s) = &self.socket {
                result = s.send(&msg).map(|_| ());
                if result.is_ok() {
                    return;
                }
            }
            // The daemon restarted (ECONNREFUSED) or went away: reconnect once.
            self.socket = None;
        }
        if !self.warned {
            self.warned = true;
            if let Err(e) = result {
                log::warn!("syslog copy to {} failed: {e} (the journal file has every row)", self.path.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journald_is_chosen_only_when_it_is_the_receiver() {
        let dir = tempfile::tempdir().unwrap();
        let present = dir.path().join("socket");
        std::fs::write(&present, b"").unwrap();
        let absent = dir.path().join("none");
        let c = |socket: &str, journald: Journald| SyslogConfig { socket: socket.into(), facility: 10, facility_name: "authpriv".into(), journald };
        assert_eq!(choose(&c("/dev/log", Journald::Auto), &present), (Wire::Journald, present.clone()));
        assert_eq!(choose(&c("/dev/log", Journald::Auto), &absent), (Wire::Syslog, PathBuf::from("/dev/log")));
        // Another syslog socket is the receiver the operator chose.
        assert_eq!(choose(&c("/run/rsyslog.sock", Journald::Auto), &present), (Wire::Syslog, PathBuf::from("/run/rsyslog.sock")));
        assert_eq!(choose(&c("/dev/log", Journald::Off), &present), (Wire::Syslog, PathBuf::from("/dev/log")));
        assert_eq!(choose(&c("/dev/log", Journald::Socket("/j".into())), &absent), (Wire::Journald, PathBuf::from("/j")));
    }
}
