//! Whether a text an upstream wants shown in a form (a field's name, title or
//! description, an option, the message) looks like it asks for a secret (issue 33,
//! section 3: sp never relays a form that asks its user for a password, a token, a key).
//!
//! The class is closed over spelling, not over meaning: the text is folded (case,
//! full-width and look-alike letters, Latin accents, leetspeak digits and signs, zero
//! width characters), cut into words at every separator and camelCase boundary, and then
//! refused when a word is one of [`WORDS`] or the words run together hold one of
//! [`STEMS`] (`p_a_s_s-word`, `ApiKey`, `PASSW0RD`, `ｐａｓｓｗｏｒｄ`, `раssword` with
//! Cyrillic letters). A few words of other scripts and languages are searched in the
//! text as it is ([`FOREIGN`]). What it misses is a paraphrase ("the string you log in
//! with"): the form's message is checked the same way, and URL mode exists for secrets.
//! It refuses too much rather than too little (`secretary`, `tokenizer`, "the issue
//! key"): an upstream that needs such a field gets a clear error.

/// Refused anywhere in the words run together (after folding).
const STEMS: &[&str] = &[
    "passw",
    "passphrase",
    "passcode",
    "passkey",
    "kennwort",
    "motdepasse",
    "contrasen",
    "senha",
    "secret",
    "token",
    "credential",
    "apikey",
    "privatekey",
    "accesskey",
    "secretkey",
    "authkey",
    "signingkey",
    "sshkey",
    "pincode",
    "seedphrase",
    "recoveryphrase",
    "recoverycode",
    "backupcode",
    "mnemonic",
    "bearer",
    "cookie",
    "cvv",
    "onetime",
    "securitycode",
    "verificationcode",
    "authcode",
    "2fa",
    "mfa",
];

/// Refused as a whole word (too short to search inside others: `monkey`, `spin`).
const WORDS: &[&str] = &["key", "keys", "pin", "pins", "otp", "totp", "hotp", "pwd", "pw", "pass", "ssn", "cvc", "auth", "seed", "jwt", "pat", "psk"];

/// Searched in the lowercased text as it is.
const FOREIGN: &[&str] =
    &["пароль", "ключ", "токен", "密码", "密碼", "口令", "密钥", "パスワード", "暗証", "비밀번호", "암호", "κωδικ", "סיסמ", "كلمة المرور"];

/// The word of the lists a text spells, if any.
pub(crate) fn secret_word(text: &str) -> Option<&'static str> {
    let lower = text.to_lowercase();
    if let Some(w) = FOREIGN.iter().find(|w| lower.contains(*w)) {
        return Some(w);
    }
    let folded: Vec<char> = text.chars().filter_map(fold).collect();
    // Digits read as letters, both ways of reading a `1`; and digits kept (`2fa`).
    for leet in [Leet::Keep, Leet::AsI, Leet::AsL] {
        let chars: Vec<char> = folded.iter().map(|c| leet.map(*c)).collect();
        let words = split(&chars);
        if let Some(w) = words.iter().find_map(|w| WORDS.iter().find(|k| **k == w.as_str())) {
            return Some(w);
        }
        let squashed: String = words.concat();
        if let Some(s) = STEMS.iter().find(|s| squashed.contains(*s)) {
            return Some(s);
        }
    }
    None
}

#[derive(Clone, Copy)]
enum Leet {
    Keep,
    AsI,
    AsL,
}

impl Leet {
    fn map(self, c: char) -> char {
        let one = match self {
            Leet::Keep => return c,
            Leet::AsI => 'i',
            Leet::AsL => 'l',
        };
        match c {
            '0' => 'o',
            '1' | '!' | '|' => one,
            '3' => 'e',
            '4' | '@' => 'a',
            '5' | '$' => 's',
            '7' | '+' => 't',
            '8' => 'b',
            '9' => 'g',
            c => c,
        }
    }
}

/// One character folded toward ASCII: `None` drops it (zero-width characters, soft
/// hyphens, combining marks: they would hide a word without showing).
fn fold(c: char) -> Option<char> {
    let c = match c {
        '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{00AD}' | '\u{034F}' | '\u{0300}'..='\u{036F}' | '\u{180E}' => return None,
        // Full-width ASCII.
        '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        // Cyrillic and Greek letters that look Latin (the common confusables).
        'а' | 'А' | 'α' | 'Α' => 'a',
        'в' | 'В' | 'β' | 'Β' => 'b',
        'с' | 'С' | 'ϲ' => 'c',
        'е' | 'Е' | 'ё' | 'Ё' | 'ε' | 'Ε' => 'e',
        'н' | 'Н' | 'η' | 'Η' => 'h',
        'і' | 'І' | 'ї' | 'ι' | 'Ι' => 'i',
        'ј' | 'Ј' => 'j',
        'к' | 'К' | 'κ' | 'Κ' => 'k',
        'м' | 'М' | 'μ' | 'Μ' => 'm',
        'о' | 'О' | 'ο' | 'Ο' | 'σ' => 'o',
        'р' | 'Р' | 'ρ' | 'Ρ' => 'p',
        'ѕ' | 'Ѕ' => 's',
        'т' | 'Т' | 'τ' | 'Τ' => 't',
        'у' | 'У' | 'υ' | 'Υ' => 'y',
        'х' | 'Х' | 'χ' | 'Χ' => 'x',
        'ԁ' => 'd',
        'ν' | 'Ν' => 'v',
        'ω' => 'w',
        'ζ' | 'Ζ' => 'z',
        // Latin with accents.
        'à'..='å' | 'À'..='Å' | 'ā' | 'ă' | 'ą' => 'a',
        'ç' | 'Ç' | 'ć' | 'č' => 'c',
        'è'..='ë' | 'È'..='Ë' | 'ē' | 'ę' | 'ě' => 'e',
        'ì'..='ï' | 'Ì'..='Ï' | 'ı' => 'i',
        'ñ' | 'Ñ' | 'ń' | 'ň' => 'n',
        'ò'..='ö' | 'Ò'..='Ö' | 'ø' | 'Ø' | 'ő' => 'o',
        'ù'..='ü' | 'Ù'..='Ü' | 'ů' | 'ű' => 'u',
        'ś' | 'š' | 'ş' => 's',
        'ý' | 'ÿ' => 'y',
        'ž' | 'ź' | 'ż' => 'z',
        'ß' => 's',
        c => c,
    };
    Some(c)
}

/// Words: runs of letters and digits, cut at every other character and where camelCase
/// starts a word (`apiKey`, `APIKey`), lowercased.
fn split(chars: &[char]) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            continue;
        }
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1).copied();
        let starts =
            c.is_uppercase() && prev.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit() || (p.is_uppercase() && next.is_some_and(char::is_lowercase)));
        if starts && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_spellings_are_found() {
        for (text, word) in [
            ("password", "passw"),
            ("Password", "passw"),
            ("PASSWORD", "passw"),
            ("p_a_s_s_w_o_r_d", "passw"),
            ("pass-word", "passw"),
            ("pass word", "passw"),
            ("p.a.s.s.w.o.r.d", "passw"),
            ("passWord", "passw"),
            ("P@ssw0rd", "passw"),
            ("pa55word", "passw"),
            ("ｐａｓｓｗｏｒｄ", "passw"),
            ("раssword", "passw"),
            ("pass\u{200B}word", "passw"),
            ("pass\u{00AD}word", "passw"),
            ("Passwort", "passw"),
            ("mot de passe", "motdepasse"),
            ("contraseña", "contrasen"),
            ("пароль", "пароль"),
            ("apiKey", "apikey"),
            ("API_KEY", "apikey"),
            ("APIKey", "apikey"),
            ("x-api-key", "apikey"),
            ("sshKey", "sshkey"),
            ("key", "key"),
            ("Your key", "key"),
            ("github_token", "token"),
            ("accessToken", "token"),
            ("t0k3n", "token"),
            ("s3cr3t", "secret"),
            ("clientSecret", "secret"),
            ("PIN", "pin"),
            ("pin_code", "pincode"),
            ("OTP", "otp"),
            ("totp", "totp"),
            ("2FA code", "2fa"),
            ("credentials", "credential"),
            ("cred-ential", "credential"),
            ("SSN", "ssn"),
            ("Enter the one-time code", "onetime"),
            ("session cookie", "cookie"),
            ("seed phrase", "seedphrase"),
        ] {
            // The word named is the first list entry that matches: a stem, or a
            // shorter whole word found first (`pass` in `pass-word`, `key` in `apiKey`).
            let found = secret_word(text);
            assert!(found == Some(word) || found.is_some_and(|f| WORDS.contains(&f) && word.contains(f)), "{text:?}: {found:?}");
        }
    }

    #[test]
    fn ordinary_fields_pass() {
        for text in [
            "name",
            "email",
            "Your full name",
            "monkey",
            "keyboard layout",
            "spin speed",
            "Compass heading",
            "passenger count",
            "classname",
            "repository",
            "issue title",
            "date of birth",
            "Favourite colour",
            "bypass the cache",
        ] {
            assert_eq!(secret_word(text), None, "{text:?}");
        }
    }
}
