//! The checks of an upstream's elicitation (pure) and one relay through a recording
//! client. Attacks tried (all held): secret words in a field's name, title,
//! description, enum value, enumNames, oneOf title, default and in the message, in any
//! case, separator, full-width, Cyrillic or leet spelling; `format: password`; a nested
//! object field; a URL with userinfo, `http` to a public host, a port the policy does not
//! list, a Unicode host, a host spelled with a trailing dot, a backslash, a space; an
//! answer with a field not asked for, of the wrong type, out of its options, over its
//! bound, with content on a decline, or spelling a secret sp holds.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;
use crate::gate::exec::{ElicitModes, Recorded};

fn rules(form: bool, hosts: &[(&str, Option<u16>)]) -> ElicitRules {
    ElicitRules { form, url_hosts: hosts.iter().map(|(h, p)| crate::policy::upstreams::elicitation::UrlHost { host: (*h).to_owned(), port: *p }).collect() }
}

fn form_of(props: Value) -> Value {
    json!({"message": "Pick one", "requestedSchema": {"type": "object", "properties": props}})
}

#[test]
fn a_plain_form_is_relayed_with_the_upstream_named() {
    let params = json!({"message": "Which colour?", "requestedSchema": {"type": "object", "properties": {
        "colour": {"type": "string", "enum": ["red", "blue"], "enumNames": ["Red", "Blue"]},
        "count": {"type": "integer", "minimum": 1, "title": "How many"},
        "notify": {"type": "boolean", "default": true},
        "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]}},
        "when": {"type": "string", "format": "date"}
    }, "required": ["colour"]}, "_meta": {"x": 1}});
    let c = check("files", &rules(true, &[]), &params).unwrap();
    assert_eq!(c.params["message"], "[sp: the upstream MCP server \"files\" asks] Which colour?");
    assert_eq!(c.params["mode"], "form");
    assert!(c.params.get("_meta").is_none());
    let Asks::Form(fields) = &c.asks else { panic!("form") };
    assert_eq!(fields.len(), 5);
    let vault = Vault::new();
    let ok = answer(&c.asks, &json!({"action": "accept", "content": {"colour": "red", "count": 2, "tags": ["a"]}, "_meta": {}}), &vault).unwrap();
    assert_eq!(ok, json!({"action": "accept", "content": {"colour": "red", "count": 2, "tags": ["a"]}}));
    assert_eq!(answer(&c.asks, &json!({"action": "decline"}), &vault).unwrap(), json!({"action": "decline"}));
}

#[test]
fn secret_looking_forms_are_refused_wherever_the_word_is() {
    let r = rules(true, &[]);
    let cases = [
        (form_of(json!({"password": {"type": "string"}})), "field \"password\""),
        (form_of(json!({"PASS_WORD": {"type": "string"}})), "field \"PASS_WORD\""),
        (form_of(json!({"apiKey": {"type": "string"}})), "field \"apiKey\""),
        (form_of(json!({"ｔｏｋｅｎ": {"type": "string"}})), "field \"ｔｏｋｅｎ\""),
        (form_of(json!({"v": {"type": "string", "title": "Your S3cr3t"}})), "field \"v\".title"),
        (form_of(json!({"v": {"type": "string", "description": "the one-time code we sent"}})), "field \"v\".description"),
        (form_of(json!({"v": {"type": "string", "enum": ["ok", "my pin"]}})), "field \"v\".enum[1]"),
        (form_of(json!({"v": {"type": "string", "enum": ["a"], "enumNames": ["Credentials"]}})), "field \"v\".enumNames[0]"),
        (form_of(json!({"v": {"type": "string", "oneOf": [{"const": "a", "title": "API token"}]}})), "field \"v\".oneOf[0].title"),
        (form_of(json!({"v": {"type": "string", "default": "passwd"}})), "field \"v\".default"),
        (json!({"message": "Enter your GitHub токен", "requestedSchema": {"type": "object", "properties": {"v": {"type": "string"}}}}), "the message"),
        (json!({"message": "Your p@ssw0rd please", "requestedSchema": {"type": "object", "properties": {"v": {"type": "string"}}}}), "the message"),
    ];
    for (params, at) in cases {
        match check("up", &r, &params) {
            Err(Refusal::Secret { at: got, .. }) => assert_eq!(got, at, "{params}"),
            other => panic!("{params}: {other:?}"),
        }
    }
    let pw = check("up", &r, &form_of(json!({"v": {"type": "string", "format": "password"}})));
    assert_eq!(pw, Err(Refusal::PasswordFormat { at: "field \"v\"".into() }));
    let e = pw.unwrap_err().to_error();
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(e.message.contains("never asks its user for secrets"), "{}", e.message);
}

#[test]
fn shapes_outside_the_schema_are_refused() {
    let r = rules(true, &[]);
    for (params, at) in [
        (form_of(json!({"v": {"type": "object", "properties": {}}})), "field \"v\".type"),
        (form_of(json!({"v": {"type": "string", "format": "hostname"}})), "field \"v\".format"),
        (form_of(json!({"v": {"type": "string", "pattern": ".*"}})), "field \"v\".pattern"),
        (form_of(json!({})), "requestedSchema.properties"),
        (json!({"message": "m"}), "requestedSchema"),
        (json!({"message": "m", "requestedSchema": {"type": "object", "properties": {"v": {"type": "string"}}}, "extra": 1}), "extra"),
        (json!({"mode": "telepathy", "message": "m"}), "mode"),
    ] {
        match check("up", &r, &params) {
            Err(Refusal::Shape { at: got, .. }) => assert_eq!(got, at, "{params}"),
            other => panic!("{params}: {other:?}"),
        }
    }
    assert_eq!(check("up", &rules(false, &[("a.example", None)]), &form_of(json!({"v": {"type": "string"}}))), Err(Refusal::NotAllowed { mode: "form" }));
}

fn url_params(url: &str) -> Value {
    json!({"mode": "url", "message": "Sign in", "elicitationId": "e-1", "url": url})
}

#[test]
fn url_mode_goes_only_to_listed_hosts_over_https() {
    let r = rules(false, &[("login.example.com", None), ("127.0.0.1", Some(8443))]);
    let c = check("up", &r, &url_params("https://login.example.com/authorize?x=1")).unwrap();
    assert_eq!(c.params["url"], "https://login.example.com/authorize?x=1");
    assert_eq!(c.params["elicitationId"], "e-1");
    assert_eq!(c.asks, Asks::Url);
    assert!(check("up", &r, &url_params("http://127.0.0.1:8443/cb")).is_ok(), "http to loopback");
    assert!(check("up", &r, &url_params("https://LOGIN.example.com/")).is_ok(), "a host's case is not its identity");
    for (url, want) in [
        ("http://login.example.com/", "the url must be https (http only to a loopback address)"),
        ("https://user:pw@login.example.com/", "the url must hold no user or password"),
        ("https://login.example.com@evil.example/", "the url must hold no user or password"),
        ("https://login.example.com:8443/", "the url's host login.example.com:8443 is not in upstreams.NAME.elicitation.url_hosts"),
        ("https://evil.example/", "the url's host evil.example is not in upstreams.NAME.elicitation.url_hosts"),
        ("https://login.example.com./", "the url's host login.example.com. is not in upstreams.NAME.elicitation.url_hosts"),
        ("https://lоgin.example.com/", "the url must be printable ASCII without spaces or backslashes (an IDN in its xn-- form)"),
        ("https://login.example.com\\@evil.example/", "the url must be printable ASCII without spaces or backslashes (an IDN in its xn-- form)"),
        ("https://login.example.com /", "the url must be printable ASCII without spaces or backslashes (an IDN in its xn-- form)"),
        ("javascript:alert(1)", "the url must have a host"),
        ("https://127.0.0.1/", "the url's host 127.0.0.1 is not in upstreams.NAME.elicitation.url_hosts"),
    ] {
        let got = check("up", &r, &url_params(url)).map(|_| ()).unwrap_err().to_string();
        assert_eq!(got, want, "{url}");
    }
    // The https loopback entry was listed with a port, and http://127.0.0.1:8443 passes
    // only because it is loopback; a form is not allowed by these rules.
    assert_eq!(check("up", &r, &form_of(json!({"v": {"type": "string"}}))), Err(Refusal::NotAllowed { mode: "form" }));
    let c = check("up", &r, &url_params("https://login.example.com/")).unwrap();
    let vault = Vault::new();
    assert_eq!(answer(&c.asks, &json!({"action": "accept"}), &vault).unwrap(), json!({"action": "accept"}));
    assert!(answer(&c.asks, &json!({"action": "accept", "content": {"a": "b"}}), &vault).is_err());
}

#[test]
fn answers_are_checked_and_bounded() {
    let r = rules(true, &[]);
    let c = check("up", &r, &form_of(json!({"name": {"type": "string"}, "n": {"type": "integer"}, "pick": {"type": "string", "enum": ["x", "y"]}}))).unwrap();
    let vault = Vault::new();
    for (result, why) in [
        (json!({"action": "accept", "content": {"other": "x"}}), "holds a field that was not asked for"),
        (json!({"action": "accept", "content": {"n": "3"}}), "gives field \"n\" a value of the wrong type or out of its options"),
        (json!({"action": "accept", "content": {"n": 1.5}}), "gives field \"n\" a value of the wrong type or out of its options"),
        (json!({"action": "accept", "content": {"pick": "z"}}), "gives field \"pick\" a value of the wrong type or out of its options"),
        (json!({"action": "accept", "content": {"name": "x".repeat(5000)}}), "gives field \"name\" a value of the wrong type or out of its options"),
        (json!({"action": "decline", "content": {"name": "x"}}), "has content where none may be (only an accepted form's)"),
        (json!({"action": "maybe"}), "has no action accept, decline or cancel"),
        (json!({"action": "accept", "content": {"name": "x".repeat(17000)}}), "is over 16384 bytes"),
        (json!({"action": "accept", "extra": 1}), "holds a member MCP does not define"),
    ] {
        assert_eq!(answer(&c.asks, &result, &vault), Err(Refusal::Answer { why: why.into() }), "{why}");
    }
    let mut vault = Vault::new();
    vault.remember("tok", "s3kr1t-value-abcdef");
    assert_eq!(answer(&c.asks, &json!({"action": "accept", "content": {"name": "s3kr1t-value-abcdef"}}), &vault), Err(Refusal::AnswerSecret));
}

/// A client that records what it was asked and answers `reply`.
struct Client {
    modes: ElicitModes,
    asked: Vec<Value>,
    reply: Asked,
}

impl AskClient for Client {
    fn modes(&self) -> ElicitModes {
        self.modes
    }
    fn elicit(&mut self, params: Value, _: Instant, _: &Cancel) -> Asked {
        self.asked.push(params);
        self.reply.clone()
    }
}

#[test]
fn a_relay_asks_only_a_client_that_declared_the_mode_and_journals_each() {
    let r = rules(true, &[]);
    let vault = Vault::new();
    let cancel = Cancel::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    let params = form_of(json!({"name": {"type": "string"}}));
    let mut out = Recorded::default();
    let mut client = Client { modes: ElicitModes { form: false, url: true }, asked: Vec::new(), reply: Asked::Result(json!({"action": "decline"})) };
    let got = Relay { upstream: "up", rules: &r, vault: &vault, client: Some(&mut client), output: &mut out, cancel: &cancel }
        .handle(Some(params.clone()), deadline);
    assert_eq!(got.unwrap_err().code, ErrorCode::METHOD_NOT_FOUND);
    assert!(client.asked.is_empty(), "a client without form mode is not asked");
    client.modes.form = true;
    let got = Relay { upstream: "up", rules: &r, vault: &vault, client: Some(&mut client), output: &mut out, cancel: &cancel }
        .handle(Some(params.clone()), deadline);
    assert_eq!(got.unwrap(), json!({"action": "decline"}));
    assert_eq!(client.asked.len(), 1);
    client.reply = Asked::TimedOut;
    let got = Relay { upstream: "up", rules: &r, vault: &vault, client: Some(&mut client), output: &mut out, cancel: &cancel }.handle(Some(params), deadline);
    assert_eq!(got.unwrap_err().code, ErrorCode::INTERNAL_ERROR);
    let rows: Vec<(&str, String)> = out
        .0
        .iter()
        .map(|e| match e {
            Event::Elicitation { decision, reason } => (*decision, reason.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("refused", "the agent's client cannot be asked for form elicitation in this session".to_owned()),
            ("decline", "form elicitation from upstream up relayed".to_owned()),
            ("failed", "the client gave no answer: none before the call's timeout".to_owned()),
        ]
    );
}
