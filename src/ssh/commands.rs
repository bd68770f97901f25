//! The per-host command allow-list (`ssh.hosts.<name>.commands`, issue #4).
//!
//! A pattern is a command line written by the operator: words separated by single
//! spaces. A word is matched literally, except that `*` inside it stands for one
//! argument's worth of characters: one or more of `A-Z a-z 0-9 - . _ + = : , @ % /`.
//! Those are characters no POSIX shell treats specially, so what `*` matched reaches the
//! remote program as exactly one argument, unchanged: no quoting, no expansion, no word
//! splitting, no globbing.
//!
//! Beyond that set, two rules close the obvious escapes through what remains:
//! - a `*` that stands for a whole word (`systemctl status *`) never matches text that
//!   starts with `-`, so the agent cannot turn an operand into an option
//!   (`tail -n 5 *` must not become `tail -n 5 --follow=name`); write the option in the
//!   pattern to allow it (`journalctl --since=*`);
//! - a `*` never matches text containing a `..` path segment, so `cat /var/log/*` cannot
//!   climb to `/var/log/../../etc/shadow`.
//!
//! When a host has a list, a command containing `;`, `&`, `|`, a backtick, `$(`, `>`,
//! `<`, a newline, a carriage return or NUL is refused before any pattern is tried (the
//! issue's list, plus CR), and so are tabs and runs of spaces: the words must be
//! separated exactly as in the pattern. Patterns containing those characters can never
//! match and are refused when the policy loads.
//!
//! **A host without `commands` runs any command the agent sends**, through the remote
//! user's login shell: that is full shell access as that user. `sp-policy(5)` says so.

use std::fmt;

/// Refused anywhere in a command when the host has an allow-list.
pub const FORBIDDEN: &[(&str, &str)] = &[
    (";", "';'"),
    ("&", "'&'"),
    ("|", "'|'"),
    ("`", "a backtick"),
    ("$(", "\"$(\""),
    (">", "'>'"),
    ("<", "'<'"),
    ("\n", "a newline"),
    ("\r", "a carriage return"),
    ("\0", "NUL"),
];

/// What a `*` may stand for: characters no shell interprets.
pub fn is_arg_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._+=:,@%/".contains(c)
}

/// One allow-list entry, parsed at policy load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandPattern {
    /// As the operator wrote it (for `sp.inventory`, messages and the log).
    pub text: String,
    words: Vec<Word>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Word {
    Literal(String),
    /// Literal pieces around the `*`s: `a*b*c` is `["a", "b", "c"]`.
    Glob(Vec<String>),
}

/// Why a command matched no pattern (returned by [`check`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// The command contains a forbidden character or sequence (named).
    Metacharacter(&'static str),
    /// Tabs, leading, trailing or repeated spaces.
    Spacing,
    /// Well-formed, but no pattern matches.
    NoPattern,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::Metacharacter(what) => write!(f, "the command contains {what}, which is never allowed with a command list"),
            Mismatch::Spacing => f.write_str("words must be separated by single spaces (no tabs, no leading or trailing space)"),
            Mismatch::NoPattern => f.write_str("the command matches none of the host's allowed commands"),
        }
    }
}

impl CommandPattern {
    pub fn parse(text: &str) -> Result<CommandPattern, String> {
        if text.is_empty() {
            return Err("must not be empty".into());
        }
        if let Some((_, what)) = FORBIDDEN.iter().find(|(s, _)| text.contains(s)) {
            return Err(format!("contains {what}: such a command is always refused, so this pattern could never match"));
        }
        if text.chars().any(|c| c.is_control()) {
            return Err("contains a control character".into());
        }
        let mut words = Vec::new();
        for word in text.split(' ') {
            if word.is_empty() {
                return Err("words must be separated by single spaces, without leading or trailing space".into());
            }
            words.push(if word.contains('*') {
                if word.contains("**") {
                    return Err(format!("{word:?}: two '*' in a row are ambiguous; one '*' already matches a whole argument"));
                }
                Word::Glob(word.split('*').map(str::to_owned).collect())
            } else {
                Word::Literal(word.to_owned())
            });
        }
        Ok(CommandPattern { text: text.to_owned(), words })
    }

    pub fn matches(&self, command: &str) -> bool {
        let given: Vec<&str> = command.split(' ').collect();
        given.len() == self.words.len()
            && self.words.iter().zip(&given).all(|(w, g)| match w {
                Word::Literal(l) => l == g,
                Word::Glob(pieces) => glob(pieces, g),
            })
    }
}

/// `pieces` joined by `*`, each `*` matching one or more [`is_arg_char`] characters
/// without a `..` segment; a `*` opening the word must not match a leading `-`.
fn glob(pieces: &[String], word: &str) -> bool {
    fn go(pieces: &[String], rest: &str, first: bool) -> bool {
        let (head, tail) = (&pieces[0], &pieces[1..]);
        let Some(after) = rest.strip_prefix(head.as_str()) else {
            return false;
        };
        if tail.is_empty() {
            return after.is_empty();
        }
        // `after` starts with what the next `*` matches: try every non-empty length.
        let whole_word_star = first && head.is_empty();
        for (i, c) in after.char_indices() {
            if !is_arg_char(c) || (whole_word_star && i == 0 && c == '-') {
                break;
            }
            let end = i + c.len_utf8();
            let matched = &after[..end];
            if matched.split('/').any(|seg| seg == "..") {
                continue;
            }
            if go(tail, &after[end..], false) {
                return true;
            }
        }
        false
    }
    go(pieces, word, true)
}

/// The check `authorize` runs when a host has a list: `Ok(index)` of the first
/// matching pattern.
pub fn check(patterns: &[CommandPattern], command: &str) -> Result<usize, Mismatch> {
    if let Some((_, what)) = FORBIDDEN.iter().find(|(s, _)| command.contains(s)) {
        return Err(Mismatch::Metacharacter(what));
    }
    if command.is_empty() || command.contains('\t') || command.split(' ').any(str::is_empty) {
        return Err(Mismatch::Spacing);
    }
    patterns.iter().position(|p| p.matches(command)).ok_or(Mismatch::NoPattern)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(ps: &[&str]) -> Vec<CommandPattern> {
        ps.iter().map(|p| CommandPattern::parse(p).unwrap()).collect()
    }

    #[test]
    fn allowed() {
        let l = list(&["systemctl status *", "journalctl -u app -n *", "uptime", "journalctl --since=*", "cat /var/log/app/*.log"]);
        for (cmd, idx) in [
            ("uptime", 2),
            ("systemctl status nginx", 0),
            ("systemctl status nginx.service", 0),
            ("systemctl status user@1000.service", 0),
            ("journalctl -u app -n 50", 1),
            ("journalctl --since=2024-01-01", 3),
            ("journalctl --since=-1h", 3),
            ("cat /var/log/app/x.log", 4),
            ("cat /var/log/app/a/b.log", 4),
        ] {
            assert_eq!(check(&l, cmd), Ok(idx), "{cmd}");
        }
    }

    #[test]
    fn bypass_attempts_refused() {
        let l = list(&["systemctl status *", "journalctl -u app -n *", "uptime", "cat /var/log/app/*.log", "echo *"]);
        let meta = [
            "uptime; rm -rf /",
            "uptime;rm -rf /",
            "uptime && rm -rf /",
            "uptime & rm -rf /",
            "uptime || rm -rf /",
            "uptime | sh",
            "systemctl status `id`",
            "systemctl status $(id)",
            "uptime\nid",
            "uptime\rid",
            "uptime\0id",
            "echo x > /etc/passwd",
            "echo x >> /etc/passwd",
            "cat < /etc/shadow",
        ];
        for cmd in meta {
            assert!(matches!(check(&l, cmd), Err(Mismatch::Metacharacter(_))), "{cmd:?}");
        }
        let other = [
            "systemctl status",
            "systemctl status a b",
            "systemctl status ${IFS}id",
            "systemctl status $HOME",
            "systemctl status 'a b'",
            "systemctl status \"a\"",
            "systemctl status a\\ b",
            "systemctl status ~root",
            "systemctl status *",
            "systemctl status ?",
            "systemctl status [a]",
            "systemctl status {a,b}",
            "systemctl status --help",
            "systemctl status -H",
            "systemctl status é",
            "journalctl -u app -n --file=/etc/shadow",
            "journalctl -u other -n 5",
            "uptime -p",
            "UPTIME",
            "cat /var/log/app/../../../etc/shadow.log",
            "cat /var/log/app/x.txt",
            "echo #",
            "echo !!",
            "echo (x)",
        ];
        for cmd in other {
            assert!(check(&l, cmd).is_err(), "{cmd:?}");
        }
        for cmd in ["uptime ", " uptime", "systemctl  status x", "systemctl\tstatus x", ""] {
            assert_eq!(check(&l, cmd), Err(Mismatch::Spacing), "{cmd:?}");
        }
        // "..log" is a segment other than ".." and stays allowed in a file name
        assert_eq!(check(&l, "cat /var/log/app/a..b.log"), Ok(3));
    }

    #[test]
    fn bad_patterns() {
        for p in ["", "a;b", "a && b", "a | b", "a `b`", "a $(b)", "a > b", "a\nb", " a", "a  b", "a ", "a **", "a\tb"] {
            assert!(CommandPattern::parse(p).is_err(), "{p:?}");
        }
    }
}
