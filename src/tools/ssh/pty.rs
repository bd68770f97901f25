//! The pseudo-terminal a command runs on (`exec.rs` module docs): its type and size, the
//! terminal modes that change no byte, and how stdin is written to it.

/// The terminal a command runs on (module docs): a type no program draws on.
pub(crate) const PTY_TERM: &str = "dumb";
/// Wide and tall, so that programs which fit their output to the terminal cut little
/// and pagers that quit on a short text (`less -F`) quit.
pub(crate) const PTY_COLUMNS: u32 = 1000;
pub(crate) const PTY_ROWS: u32 = 1000;
/// Linux keeps at most 4095 bytes of an unfinished line (the rest is dropped): a
/// longer line is flushed to the reader in parts (`^D` after a non-empty part).
pub(crate) const PTY_FLUSH_EVERY: usize = 4000;
pub(crate) const CTRL_D: u8 = 0x04;
pub(crate) const CTRL_V: u8 = 0x16;

/// Terminal modes for the pty: a line discipline that changes no byte. Canonical mode
/// stays on, since its `^D` is the only way to give a terminal reader end of input;
/// `^V` (literal next, needs `IEXTEN`) escapes `^D` and itself in the data. Every
/// other special character is disabled (255 = `_POSIX_VDISABLE` for sshd).
pub(crate) fn pty_modes() -> ssh2::PtyModes {
    use ssh2::PtyModeOpcode as O;
    let mut m = ssh2::PtyModes::new();
    for (op, on) in [
        (O::ICANON, true),
        (O::IEXTEN, true),
        (O::ECHO, false),
        (O::ECHOE, false),
        (O::ECHOK, false),
        (O::ECHONL, false),
        (O::ISIG, false),
        (O::IXON, false),
        (O::ICRNL, false),
        (O::INLCR, false),
        (O::IGNCR, false),
        (O::ISTRIP, false),
        (O::IMAXBEL, false),
        (O::OPOST, false),
        (O::ONLCR, false),
        (O::CS8, true),
    ] {
        m.set_boolean(op, on);
    }
    // IXOFF is opcode 40 in RFC 4254 (the crate's `IXOFF` constant says 49).
    m.set_boolean(40u8, false);
    for op in [O::VINTR, O::VQUIT, O::VERASE, O::VKILL, O::VEOL, O::VEOL2, O::VSTART, O::VSTOP, O::VSUSP, O::VREPRINT, O::VWERASE, O::VDISCARD] {
        m.set_character(op, None);
    }
    m.set_character(O::VEOF, Some(char::from(CTRL_D)));
    m.set_character(O::VLNEXT, Some(char::from(CTRL_V)));
    m
}

/// What to write to the pty so that the command reads exactly `stdin`, then end of
/// input (with [`pty_modes`]): `^D` and `^V` are escaped with `^V`; a line is flushed
/// with `^D` every [`PTY_FLUSH_EVERY`] bytes (never on an empty line, where `^D`
/// would mean end of input); at the end one `^D` on an empty line, two after a
/// partial one (the first hands it over, the second is the end).
pub(crate) fn pty_input(stdin: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(stdin.len() + stdin.len() / PTY_FLUSH_EVERY + 2);
    let mut pending = 0;
    for &b in stdin {
        if b == CTRL_D || b == CTRL_V {
            out.push(CTRL_V);
        }
        out.push(b);
        pending += 1;
        if b == b'\n' {
            pending = 0;
        } else if pending >= PTY_FLUSH_EVERY {
            out.push(CTRL_D);
            pending = 0;
        }
    }
    out.push(CTRL_D);
    if pending > 0 {
        out.push(CTRL_D);
    }
    out
}
