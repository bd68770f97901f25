//! The optional syslog copy: one datagram per row to `/dev/log` (module docs of
//! `audit`), best effort.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::Duration;

use crate::policy::audit::SyslogConfig;

const SYSLOG_MAX: usize = 8 * 1024;

pub(super) struct Syslog {
    socket: Option<UnixDatagram>,
    path: PathBuf,
    facility: u8,
    warned: bool,
}

impl Syslog {
    pub(super) fn new(c: &SyslogConfig) -> Syslog {
        let mut s = Syslog { socket: None, path: c.socket.clone(), facility: c.facility, warned: false };
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
        let severity = if notice { 5 } else { 6 };
        let body = crate::sys::cut(line, SYSLOG_MAX);
        let msg = format!("<{}>sp[{}]: {body}", u32::from(self.facility) * 8 + severity, std::process::id());
        let mut result = Err(std::io::Error::other("not connected"));
        for _ in 0..2 {
            if self.socket.is_none() && self.connect().is_err() {
                continue;
            }
            if let Some(s) = &self.socket {
                result = s.send(msg.as_bytes()).map(|_| ());
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
