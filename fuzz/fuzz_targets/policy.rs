//! bytes -> the policy parser (`Policy::from_text`). Never panics; every refusal names a
//! field (shown escaped, as every policy text in a message is): either a field path
//! that starts at a top-level key the document has (an unknown key is named itself),
//! or, with no field, the JSON problem (the parser's own message) or the top level that
//! is not an object.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sallyport::fuzzing::{escape, parse_json, Policy};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Err(e) = Policy::from_text(text, std::path::Path::new("fuzz-policy.json")) else { return };
    // The message and the field are shown escaped (control and bidi characters from the
    // policy never reach a terminal raw).
    let shown = e.to_string();
    assert!(shown.contains(&*escape(&e.message)), "{shown}");
    if e.field.is_empty() {
        match parse_json(text) {
            Err(json) => assert_eq!(e.message, json.to_string(), "a JSON refusal must say what is wrong"),
            Ok(Value::Object(_)) => panic!("refusal without a field for a JSON object: {shown}"),
            Ok(_) => assert_eq!(e.message, "must be an object", "{shown}"),
        }
        return;
    }
    assert!(shown.contains(&*escape(&e.field)), "{shown}");
    let root = parse_json(text).unwrap_or_else(|j| panic!("field {:?} named for text that is not JSON ({j})", e.field));
    let Value::Object(top) = root else { panic!("field {:?} named for a top level that is not an object", e.field) };
    let f = e.field.as_str();
    assert!(
        // A key that is empty or not plain is named quoted (`"": unknown field`).
        top.keys().any(|k| {
            let q = format!("{k:?}");
            [k.as_str(), q.as_str()].iter().any(|k| f == *k || f.starts_with(&format!("{k}.")) || f.starts_with(&format!("{k}[")))
        }),
        "field {f:?} does not start at a key of the document: {shown}"
    );
});
