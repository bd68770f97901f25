use super::*;
use serde_json::json;
use std::time::Duration;

// Attacks tried on the one-pass row writer and the in-place cap, all held:
// - a row with no FIELDS member, only other keys, both, none at all, and `hash` alone
//   (the comma around the spliced `hash` member): the sealed bytes equal row_hash +
//   serialize_row, and the former two-pass form, over 256 chosen and 3,000 random rows;
// - keys that sort before and after FIELDS names, escapes and non-ASCII in keys and
//   values: same bytes;
// - the same members held as `Fields` (FIELDS by position, others apart; a key set
//   twice, a null value, `hash` among them): sealed to the same bytes and hash as the
//   map, over the 3,000 random rows;
// - the short way for strings that need no escape (`sys::json_escapes`): every BMP
//   character and a sample beyond, alone and between text, DEL, U+2028/9, quotes,
//   backslashes and controls mixed: serde_json's bytes each time;
// - a text exactly at MAX_TEXT, one byte over, and over by a multi-byte character cut
//   at the limit: unchanged, cut with "…[+N bytes]", cut at a character boundary;
// - timestamps at the epoch, on leap days, past year 9999: as `format!` wrote them.

/// The byte form as it was written before `write_row` (a lookup per field, then the
/// other keys sorted): rows written before and after must be the same bytes.
fn serialize_row_before(row: &Map<String, Value>, with_hash: bool) -> String {
    let mut out = b"{".to_vec();
    let push = |k: &str, v: &Value, out: &mut Vec<u8>| {
        if out.len() > 1 {
            out.push(b',');
        }
        put_json(out, &k);
        out.push(b':');
        write_canonical(v, out, None);
    };
    for k in FIELDS {
        if k == "hash" && !with_hash {
            continue;
        }
        if let Some(v) = row.get(k) {
            push(k, v, &mut out);
        }
    }
    let mut rest: Vec<&String> = row.keys().filter(|k| !FIELDS.contains(&k.as_str())).collect();
    rest.sort();
    for k in rest {
        push(k, &row[k], &mut out);
    }
    out.push(b'}');
    String::from_utf8(out).unwrap()
}

/// seal_row, serialize_row and row_hash against the form before: every subset of a
/// few fields (none, `hash` alone, `hash` with and without others), with and without
/// keys outside FIELDS (sorting before, between and after them), awkward values.
#[test]
fn one_serialisation_seals_rows_exactly_as_two_did() {
    let fields = ["seq", "kind", "reason", "prev", "hash", "bytes_in"];
    let extras: [&[&str]; 4] = [&[], &["aaa"], &["zzz", "hashx"], &["Z", "a\"b", "\u{1}"]];
    let mut n = 0;
    for mask in 0u32..(1 << fields.len()) {
        for extra in extras {
            let mut row = Map::new();
            for (i, f) in fields.iter().enumerate() {
                if mask & (1 << i) != 0 {
                    row.insert((*f).into(), json!(format!("{f} \"q\" \n é {mask}")));
                }
            }
            for (i, e) in extra.iter().enumerate() {
                row.insert((*e).into(), json!({"b": [i, null], "a": "\u{2028}"}));
            }
            let prev = format!("{mask:064x}");
            for with_hash in [false, true] {
                assert_eq!(serialize_row(&row, with_hash), serialize_row_before(&row, with_hash), "{row:?}");
            }
            let hash_before = sha256_hex(&[prev.as_bytes(), serialize_row_before(&row, false).as_bytes()]);
            assert_eq!(row_hash(&prev, &row), hash_before);
            let (hash, line) = seal_row(&prev, &row);
            row.insert("hash".into(), Value::String(hash_before.clone()));
            assert_eq!(hash, hash_before);
            assert_eq!(String::from_utf8(line).unwrap(), serialize_row_before(&row, true) + "\n");
            n += 1;
        }
    }
    assert_eq!(n, 256);
}

/// The same, over 3,000 random rows: keys drawn from FIELDS and from strings that sort
/// around them (prefixes, case, escapes, empty), values of every JSON kind nested.
#[test]
fn sealed_random_rows_equal_the_two_pass_form() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let odd = ["", "a", "hash", "hashx", "has", "Seq", "seq ", "zz", "\"", "\\", "\u{0}", "é", "\u{2028}", "~"];
    fn value(next: &mut dyn FnMut(usize) -> usize, depth: u32) -> Value {
        match next(if depth > 2 { 5 } else { 7 }) {
            0 => Value::Null,
            1 => json!(next(2) == 1),
            2 => json!(next(1_000_000) as i64 - 500_000),
            3 => json!(next(1000) as f64 / 7.0),
            4 => json!(["x", "\"q\"\n", "\u{1}é💥", ""][next(4)]),
            5 => Value::Array((0..next(3)).map(|_| value(next, depth + 1)).collect()),
            _ => Value::Object((0..next(3)).map(|i| (format!("k{}{i}", next(3)), value(next, depth + 1))).collect()),
        }
    }
    for _ in 0..3000 {
        let mut row = Map::new();
        // The same members as `sp` holds them while writing (FIELDS by position).
        let mut fields = Fields::default();
        for _ in 0..next(12) {
            let key = if next(2) == 0 { FIELDS[next(FIELDS.len())] } else { odd[next(odd.len())] };
            let v = value(&mut next, 0);
            row.insert(key.to_owned(), v.clone());
            fields.put(key, v);
        }
        let prev = format!("{:064x}", next(1 << 30));
        for key in row.keys() {
            assert_eq!(fields.get(key), row.get(key), "{key:?}");
        }
        assert_eq!(fields.line(), serialize_row(&row, false), "{row:?}");
        assert_eq!(seal_fields(&prev, &fields), seal_row(&prev, &row), "{row:?}");
        for with_hash in [false, true] {
            assert_eq!(serialize_row(&row, with_hash), serialize_row_before(&row, with_hash), "{row:?}");
        }
        let want_hash = sha256_hex(&[prev.as_bytes(), serialize_row_before(&row, false).as_bytes()]);
        assert_eq!(row_hash(&prev, &row), want_hash);
        let (hash, line) = seal_row(&prev, &row);
        assert_eq!(hash, want_hash);
        row.insert("hash".into(), Value::String(want_hash));
        assert_eq!(String::from_utf8(line).unwrap(), serialize_row_before(&row, true) + "\n", "{row:?}");
    }
}

#[test]
fn rfc3339_known_values() {
    let at = |s: u64, ms: u64| rfc3339(UNIX_EPOCH + Duration::from_millis(s * 1000 + ms));
    assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
    assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
    assert_eq!(at(1_709_251_199, 999), "2024-02-29T23:59:59.999Z");
    assert_eq!(at(4_102_444_800, 0), "2100-01-01T00:00:00.000Z");
    assert_eq!(at(1_234_567_890, 0), "2009-02-13T23:31:30.000Z");
    // Past year 9999 the year takes the digits it needs, as `{year:04}` did.
    assert_eq!(at(253_402_300_800, 1), "10000-01-01T00:00:00.001Z");
}

#[test]
fn padded_digits_match_format() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut values = vec![0, 1, 9, 10, 99, 100, 999, 1000, 9999, 10_000, u64::MAX];
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        values.push(x >> (x % 64));
    }
    for v in values {
        for width in [0, 1, 2, 3, 4, 19, 20] {
            let mut s = String::new();
            push_padded(&mut s, v, width);
            assert_eq!(s, format!("{v:0width$}"), "{v} width {width}");
        }
    }
}

#[test]
fn canonical_json_sorts_keys_at_every_depth() {
    let v = json!({"b": [1, {"z": 1, "a": "x\n"}], "a": null});
    assert_eq!(canonical_json(&v), r#"{"a":null,"b":[1,{"a":"x\n","z":1}]}"#);
}

#[test]
fn request_fp_hashed_as_written_equals_the_hash_of_the_built_document() {
    let cases = [
        None,
        Some(json!(null)),
        Some(json!([1, "two", {"b": 1, "a": 2}])),
        Some(json!({"name": "x", "arguments": {"z\"q": "é\n\u{0}", "a": [1.5, -2, true]}, "_meta": {"progressToken": 7}})),
        Some(json!({"nested": {"_meta": "kept: only the top-level _meta is left out"}})),
        Some(json!("a string")),
    ];
    for params in cases {
        let mut stripped = params.clone().unwrap_or(Value::Null);
        if let Value::Object(m) = &mut stripped {
            m.remove("_meta");
        }
        let built = sha256_hex(&[canonical_json(&json!({"method": "tools/call", "params": stripped})).as_bytes()]);
        assert_eq!(request_fp("tools/call", params.as_ref()), built, "{params:?}");
    }
}

#[test]
fn request_fp_ignores_meta_and_key_order() {
    let a = request_fp("tools/call", Some(&json!({"name": "x", "arguments": {"a": 1, "b": 2}, "_meta": {"progressToken": 7}})));
    let b = request_fp("tools/call", Some(&json!({"arguments": {"b": 2, "a": 1}, "name": "x"})));
    assert_eq!(a, b);
    assert_ne!(a, request_fp("tools/call", Some(&json!({"name": "y"}))));
    assert_eq!(raw_fp(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

#[test]
fn cap_cuts_at_a_char_boundary() {
    let mut c = "é".repeat(MAX_TEXT);
    cap(&mut c);
    assert!(c.starts_with("éé") && c.ends_with(&format!("…[+{} bytes]", MAX_TEXT)), "{}", &c[c.len() - 20..]);
    assert!(c.len() <= MAX_TEXT + 20);
    for n in [0, 1, MAX_TEXT - 1, MAX_TEXT] {
        let mut s = "a".repeat(n);
        cap(&mut s);
        assert_eq!(s, "a".repeat(n), "within the cap: unchanged");
    }
    let mut s = "a".repeat(MAX_TEXT + 1);
    cap(&mut s);
    assert_eq!(s, format!("{}…[+1 bytes]", "a".repeat(MAX_TEXT)));
}

/// `put_str`'s short way (no escaping needed) and its fallback write what serde_json
/// writes: every character of the Basic Multilingual Plane and some beyond it, alone
/// and between plain text, and strings mixing quotes, backslashes, controls, DEL,
/// U+2028 and non-ASCII.
#[test]
fn put_str_writes_what_serde_json_writes() {
    let same = |s: &str| {
        let mut out = Vec::new();
        put_str(&mut out, s);
        assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(s).unwrap(), "{s:?}");
    };
    for c in (0..0x11_0000u32).step_by(1).filter(|c| *c < 0x1_0000 || c % 251 == 0).filter_map(char::from_u32) {
        same(&c.to_string());
        same(&format!("ab{c}cd"));
    }
    for s in ["", "plain", "a\"b", "a\\b", "\u{7f}", "\u{0}", "\t\n\r", "\u{1f}x", "é\u{2028}\u{2029}💥", "\\\"", "x\u{1b}[0m"] {
        same(s);
    }
}
