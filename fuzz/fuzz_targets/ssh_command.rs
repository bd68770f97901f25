//! bytes -> the SSH command matcher (`ssh/commands.rs`). Input: one pattern per line,
//! the last line is the command. If `check` accepts the command, for the pattern it
//! names: the words line up; literal words are equal; every word a `*` contributed to
//! has no `..` path segment and, lexically normalised, stays inside the pattern word's
//! literal directory (the prefix up to the last `/` before its first `*`); it holds only
//! the pattern's literal characters and what a `*` may stand for; a whole-word `*` does
//! not start with `-`; and the command has no shell metacharacter.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sallyport::fuzzing::{check_command, CommandPattern};

/// Lexical normalisation: `None` when the path climbs above its start.
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

fn star_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._+=:,@%/".contains(c)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines: Vec<&str> = text.split('\n').collect();
    let command = lines.pop().unwrap_or_default();
    let texts: Vec<&str> = lines.into_iter().filter(|t| CommandPattern::parse(t).is_ok()).take(8).collect();
    let patterns: Vec<CommandPattern> = texts.iter().map(|t| CommandPattern::parse(t).unwrap()).collect();
    let Ok(i) = check_command(&patterns, command) else { return };
    let pattern = texts[i];
    assert!(patterns[i].matches(command));
    for bad in [";", "&", "|", "`", "$(", ">", "<", "\n", "\r", "\0", "\t"] {
        assert!(!command.contains(bad), "{pattern:?} accepted {command:?} with {bad:?}");
    }
    let (pw, cw): (Vec<&str>, Vec<&str>) = (pattern.split(' ').collect(), command.split(' ').collect());
    assert_eq!(pw.len(), cw.len(), "{pattern:?} accepted {command:?}");
    for (p, c) in pw.iter().zip(&cw) {
        if !p.contains('*') {
            assert_eq!(p, c, "{pattern:?} accepted {command:?}");
            continue;
        }
        assert!(!c.split('/').any(|s| s == ".."), "{pattern:?} accepted {c:?}: a '..' segment");
        let star = p.find('*').unwrap();
        let dir = p[..star].rfind('/').map_or("", |j| &p[..=j]);
        let inside = normalise(dir).unwrap_or_else(|| panic!("literal directory {dir:?} climbs"));
        let resolved = normalise(c);
        assert!(
            resolved.as_ref().is_some_and(|r| r.starts_with(&inside)) && c.starts_with(dir),
            "{pattern:?} accepted {c:?}, which resolves outside {dir:?}"
        );
        assert!(c.chars().all(|ch| star_char(ch) || p.contains(ch)), "{pattern:?} accepted {c:?}: a character no '*' may stand for");
        assert!(!(p.starts_with('*') && c.starts_with('-')), "{pattern:?} accepted {c:?}: an option for a whole-word '*'");
    }
});
