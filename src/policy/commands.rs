//! The per-host command allow-list (`ssh.hosts.<name>.commands`).
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
//! - a word that holds a `*` never matches text containing a `..` path segment, however
//!   the segment was built: from the star alone (`cat /var/log/*` cannot become
//!   `/var/log/../../etc/shadow`), or across the seams between stars and the pattern's
//!   literal characters (`cat /srv/*.*` cannot become `/srv/../etc/passwd` with the first
//!   `*` matching `.` and the second `/etc/passwd`). The rule is checked on the finished
//!   word, not on each star's part, so no arrangement of stars, dots and slashes gets
//!   around it. A pattern whose starred word has a `..` segment of its own could never
//!   match and is refused when the policy loads; write such a word without a `*`.
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

use super::fields::PatternError;

/// Refused anywhere in a command when the host has an allow-list.
pub(crate) const FORBIDDEN: &[(&str, &str)] = &[
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
pub(crate) fn is_arg_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._+=:,@%/".contains(c)
}

/// One allow-list entry, parsed at policy load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandPattern {
    /// As the operator wrote it (for `sp_inventory`, messages and the log).
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

impl std::error::Error for Mismatch {}

impl CommandPattern {
    pub fn parse(text: &str) -> Result<CommandPattern, PatternError> {
        if text.is_empty() {
            return Err(PatternError::Empty);
        }
        if let Some((_, what)) = FORBIDDEN.iter().find(|(s, _)| text.contains(s)) {
            return Err(PatternError::Forbidden { what });
        }
        if text.chars().any(|c| c.is_control()) {
            return Err(PatternError::Control);
        }
        let mut words = Vec::new();
        for word in text.split(' ') {
            if word.is_empty() {
                return Err(PatternError::Spacing);
            }
            words.push(if word.contains('*') {
                if word.contains("**") {
                    return Err(PatternError::DoubleStar { word: word.to_owned() });
                }
                if has_dotdot_segment(&word.replace('*', "x")) {
                    return Err(PatternError::DotDotGlob { word: word.to_owned() });
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

/// Whether `word`, read as a path, has a `..` segment (`..`, `../x`, `x/..`, `x/../y`).
fn has_dotdot_segment(word: &str) -> bool {
    word.split('/').any(|seg| seg == "..")
}

/// `pieces` joined by `*`, each `*` matching one or more [`is_arg_char`] characters;
/// a `*` opening the word must not match a leading `-`. The finished word must not
/// contain a `..` segment (checked on the whole word: a segment can be built across
/// the seams between stars and literal dots or slashes).
fn glob(pieces: &[String], word: &str) -> bool {
    // Found while writing the fuzz target: the recursive matcher tried every
    // length for every `*`, time polynomial in the stars (3 s for `*/*.log` against a
    // 16 KiB word, hours with three stars), on the loop that answers `ping`. Now a
    // simulation of the pattern as an automaton: one pass over the word, the set of
    // reachable pattern positions carried along, O(word x pattern).
    #[derive(Clone, Copy)]
    enum Tok {
        Lit(char),
        /// The one character a `*` must match (`no_dash`: the `*` opens the word).
        Arg {
            no_dash: bool,
        },
        /// What a `*` matches beyond its first character: zero or more.
        More,
    }
    let mut toks = Vec::new();
    for (k, piece) in pieces.iter().enumerate() {
        if k > 0 {
            toks.push(Tok::Arg { no_dash: k == 1 && pieces[0].is_empty() });
            toks.push(Tok::More);
        }
        toks.extend(piece.chars().map(Tok::Lit));
    }
    let end = toks.len();
    // `More` may match nothing: reaching it reaches the position after it too.
    let close = |set: &mut Vec<bool>| {
        for s in 0..end {
            if set[s] && matches!(toks[s], Tok::More) {
                set[s + 1] = true;
            }
        }
    };
    let mut cur = vec![false; end + 1];
    cur[0] = true;
    close(&mut cur);
    let mut next = vec![false; end + 1];
    for c in word.chars() {
        next.fill(false);
        let mut any = false;
        for s in (0..end).filter(|s| cur[*s]) {
            let to = match toks[s] {
                Tok::Lit(l) if l == c => Some(s + 1),
                Tok::Arg { no_dash } if is_arg_char(c) && !(no_dash && c == '-') => Some(s + 1),
                Tok::More if is_arg_char(c) => Some(s),
                _ => None,
            };
            if let Some(t) = to {
                next[t] = true;
                any = true;
            }
        }
        if !any {
            return false;
        }
        close(&mut next);
        std::mem::swap(&mut cur, &mut next);
    }
    cur[end] && !has_dotdot_segment(word)
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

    /// The recursive matcher `glob` replaced, kept as the reference.
    fn glob_reference(pieces: &[String], word: &str) -> bool {
        fn go(pieces: &[String], rest: &str, first: bool) -> bool {
            let (head, tail) = (&pieces[0], &pieces[1..]);
            let Some(after) = rest.strip_prefix(head.as_str()) else {
                return false;
            };
            if tail.is_empty() {
                return after.is_empty();
            }
            let whole_word_star = first && head.is_empty();
            for (i, c) in after.char_indices() {
                if !is_arg_char(c) || (whole_word_star && i == 0 && c == '-') {
                    break;
                }
                if go(tail, &after[i + c.len_utf8()..], false) {
                    return true;
                }
            }
            false
        }
        !has_dotdot_segment(word) && go(pieces, word, true)
    }

    /// The automaton agrees with the reference on every pattern and word built from a
    /// small alphabet that hits the edges (`-` at a star's start, `.`, `/`, `..`, a
    /// character no star matches), and stays fast where the reference was not.
    #[test]
    fn glob_agrees_with_the_recursive_reference_and_is_linear() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n) as usize
        };
        let alphabet = ['a', 'b', '.', '/', '-', '=', ':'];
        for _ in 0..200_000 {
            let n_pieces = 1 + next(4);
            let pieces: Vec<String> = (0..n_pieces).map(|_| (0..next(3)).map(|_| alphabet[next(7) as u64 as usize]).collect()).collect();
            let word: String = (0..next(9)).map(|_| alphabet[next(7)]).collect();
            assert_eq!(glob(&pieces, &word), glob_reference(&pieces, &word), "pieces {pieces:?} word {word:?}");
        }
        let pieces: Vec<String> = ["/var/log/", "/", "/", ".log"].iter().map(|s| s.to_string()).collect();
        let word = format!("/var/log/{}x", "a/".repeat(16_000));
        let t = std::time::Instant::now();
        assert!(!glob(&pieces, &word));
        assert!(t.elapsed() < std::time::Duration::from_secs(2), "{:?}", t.elapsed());
    }

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
            assert!(matches!(check(&l, cmd), Err(Mismatch::NoPattern | Mismatch::Metacharacter(_))), "{cmd:?}: {:?}", check(&l, cmd));
        }
        for cmd in ["uptime ", " uptime", "systemctl  status x", "systemctl\tstatus x", ""] {
            assert_eq!(check(&l, cmd), Err(Mismatch::Spacing), "{cmd:?}");
        }
        // "..log" is a segment other than ".." and stays allowed in a file name
        assert_eq!(check(&l, "cat /var/log/app/a..b.log"), Ok(3));
    }

    // Attacks tried on the `..` rule, all refused now:
    // - `cat /srv/*.*` with `/srv/../etc/passwd`: first `*` = `.`, literal `.`, second
    //   `*` = `/etc/passwd` (accepted before: each star alone held no `..`);
    // - `cat /srv/.*` with `/srv/..` and `/srv/../etc`: a literal dot plus a star's dot;
    // - `cat /srv/*.` with `/srv/..`, `cat /srv/*/x` with `/srv/../x`-like words built
    //   from `.` pieces, a whole word `..` for `cat *`;
    // - `cat /srv/*..*` with `/srv//../etc`: a literal `..` turned into a segment by the
    //   slashes two stars supplied (lexically `/etc`);
    // - the property test below: every pattern built from `/`, `.`, `..` and name pieces
    //   around stars, every command built by filling the stars with such pieces.
    // Held before and still: a star alone matching `..` (`/var/log/app/../x.log`).
    #[test]
    fn dotdot_built_across_star_seams_is_refused() {
        let l = list(&["cat /srv/*.*", "cat /srv/.*", "cat /srv/*.", "cat /srv/*..*", "cat /srv/*/x", "cat *"]);
        for cmd in [
            "cat /srv/../etc/passwd",
            "cat /srv/..",
            "cat /srv/../etc",
            "cat /srv/../x",
            "cat /srv//../etc",
            "cat /srv/a/../../etc",
            "cat ..",
            "cat ../etc/passwd",
            "cat a/..",
        ] {
            assert_eq!(check(&l, cmd), Err(Mismatch::NoPattern), "{cmd:?}");
        }
        // What the patterns are for still matches.
        for (cmd, idx) in [("cat /srv/a.log", 0), ("cat /srv/.hidden", 1), ("cat /srv/name.", 2), ("cat /srv/a..b", 3), ("cat /srv/d/x", 4)] {
            assert!(l[idx].matches(cmd), "{cmd:?}");
        }
        // A `.` segment does not climb.
        assert!(l[4].matches("cat /srv/./x"));
    }

    #[test]
    fn pattern_with_its_own_dotdot_segment_in_a_starred_word_is_refused_at_load() {
        for p in ["cat /srv/*/../x", "cat ../*", "cat */..", "cat /srv/../*.log", "cat a/../*"] {
            let e = CommandPattern::parse(p).expect_err(p);
            assert!(matches!(e, PatternError::DotDotGlob { .. }), "{p}: {e}");
            assert!(e.to_string().contains("'..' path segment"), "{p}: {e}");
        }
        // A literal word without a star is the operator's business, and so are dots
        // that form no segment.
        for p in ["ls ..", "cat /srv/*..*", "cat /srv/..*", "cat /srv/*.."] {
            CommandPattern::parse(p).expect(p);
        }
    }

    /// Lexical normalisation: `None` when the path climbs above its start (relative).
    fn normalise(path: &str) -> Option<Vec<&str>> {
        let mut out: Vec<&str> = Vec::new();
        for seg in path.split('/') {
            match seg {
                "" | "." => {}
                ".." => {
                    if out.pop().is_none() && !path.starts_with('/') {
                        return None;
                    }
                }
                s => out.push(s),
            }
        }
        Some(out)
    }

    /// Deterministic generator (xorshift), no crate needed.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
        fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[self.below(from.len())]
        }
    }

    /// Property: whatever pattern is built from a literal directory, `/`, `.`, `..` and
    /// name pieces around stars, and whatever the stars are filled with, an accepted
    /// word stays inside the pattern's literal directory (the prefix up to the last `/`
    /// before the first `*`), lexically normalised.
    #[test]
    fn property_nothing_accepted_resolves_outside_the_literal_directory() {
        const DIRS: &[&str] = &["/srv/", "/srv/app/", "/", "app/", "./d/", "/srv/./"];
        const BODY: &[&str] = &["*", "*", "*", ".", "/", "..", "a", "b.", ".log", "x/", "./", "/.."];
        const FILL: &[&str] = &[".", "..", "/", "a", "etc", "passwd", "./", "../", "/..", "-", "x.y"];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut patterns, mut accepted, mut refused_at_load) = (0, 0, 0);
        for _ in 0..4000 {
            let mut word = rng.pick(DIRS).to_owned();
            for _ in 0..1 + rng.below(5) {
                let t = rng.pick(BODY);
                if !(t == "*" && word.ends_with('*')) {
                    word.push_str(t);
                }
            }
            if !word.contains('*') {
                word.push('*');
            }
            let Ok(pattern) = CommandPattern::parse(&format!("cat {word}")) else {
                refused_at_load += 1;
                continue;
            };
            patterns += 1;
            let first_star = word.find('*').unwrap();
            let dir = &word[..=word[..first_star].rfind('/').unwrap()];
            let inside = normalise(dir).expect(dir);
            let pieces: Vec<&str> = word.split('*').collect();
            for _ in 0..200 {
                let mut cmd = String::from(pieces[0]);
                for piece in &pieces[1..] {
                    for _ in 0..1 + rng.below(3) {
                        cmd.push_str(rng.pick(FILL));
                    }
                    cmd.push_str(piece);
                }
                if !pattern.matches(&format!("cat {cmd}")) {
                    continue;
                }
                accepted += 1;
                let resolved = normalise(&cmd);
                assert!(resolved.as_ref().is_some_and(|r| r.starts_with(&inside)), "pattern {word:?} accepted {cmd:?}, which resolves outside {dir:?}");
            }
        }
        // The property was exercised, not vacuous.
        assert!(patterns > 1000 && accepted > 10_000 && refused_at_load > 0, "{patterns} {accepted} {refused_at_load}");
    }

    #[test]
    fn bad_patterns() {
        let never = "such a command is always refused, so this pattern could never match";
        let spacing = "words must be separated by single spaces, without leading or trailing space";
        for (p, why) in [
            ("", "must not be empty".to_owned()),
            ("a;b", format!("contains ';': {never}")),
            ("a && b", format!("contains '&': {never}")),
            ("a | b", format!("contains '|': {never}")),
            ("a `b`", format!("contains a backtick: {never}")),
            ("a $(b)", format!("contains \"$(\": {never}")),
            ("a > b", format!("contains '>': {never}")),
            ("a\nb", format!("contains a newline: {never}")),
            (" a", spacing.to_owned()),
            ("a  b", spacing.to_owned()),
            ("a ", spacing.to_owned()),
            ("a **", "\"**\": two '*' in a row are ambiguous; one '*' already matches a whole argument".to_owned()),
            ("a\tb", "contains a control character".to_owned()),
        ] {
            assert_eq!(CommandPattern::parse(p).unwrap_err().to_string(), why, "{p:?}");
        }
    }
}
