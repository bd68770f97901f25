//! The limit stage through the loop, with a recording executor behind it.

use crate::gate::authorize::Authorized;
use crate::gate::exec::{ExecError, RunContext};
use crate::gate::limits::Limiter;
use crate::policy::Policy;
use crate::server::{Exit, Options, Server};
use crate::tools::http::authorize::HttpAction;
use crate::tools::http::result::HttpOutcome;
use crate::tools::Executor;

/// Records every HTTP request that reaches it, and runs none.
#[derive(Default)]
struct Recording {
    calls: Vec<String>,
}

impl Executor for Recording {
    fn http(&mut self, action: &Authorized<HttpAction>, _: &mut RunContext<'_, '_>) -> Result<HttpOutcome, ExecError> {
        self.calls.push(action.action().url.to_string());
        Err(ExecError::Unavailable("recorded, not sent".into()))
    }
}

fn serve(policy: &Policy, limiter: Option<Limiter>, calls: &[&str]) -> (Vec<serde_json::Value>, Vec<String>, Vec<(&'static str, u64)>) {
    let mut server = Server::new(policy, Recording::default(), Options { cancel_on_eof: false, ..Options::default() }).with_limiter(limiter);
    let mut input = vec![
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t"}}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
    ];
    for (i, url) in calls.iter().enumerate() {
        input.push(format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"http_request","arguments":{{"method":"GET","url":"{url}"}}}}}}"#,
            i + 1
        ));
    }
    let mut out = crate::mcp::out::ProtocolWriter::new(Vec::new());
    let exit = server.serve(std::io::Cursor::new((input.join("\n") + "\n").into_bytes()), &mut out);
    assert_eq!(exit, Exit::Eof);
    let answers = String::from_utf8(out.into_inner()).unwrap().lines().skip(1).map(|l| serde_json::from_str(l).unwrap()).collect();
    let rejections = server.stats.rejections.iter().map(|(k, v)| (*k, *v)).collect();
    (answers, server.executor().calls.clone(), rejections)
}

fn policy() -> Policy {
    let text = serde_json::json!({
        "http": {"allow": [{"hosts": ["a.test", "b.test"], "methods": ["GET"]}]},
        "limits": [{"tool": "http_request", "target": "a.test", "max": 2, "per_s": 3600}]
    });
    Policy::from_text(&text.to_string(), std::path::Path::new("t.json")).unwrap()
}

/// The call over the limit is answered `SP_RATE_LIMITED` with `retry_after_s` and never
/// reaches the executor; a call the rule does not select is not counted or refused.
#[test]
fn the_call_over_the_limit_never_reaches_the_executor() {
    let dir = tempfile::tempdir().unwrap();
    let limiter = Limiter::new(dir.path().join("limits.json"));
    let (answers, calls, rejections) = serve(&policy(), Some(limiter), &["http://a.test/1", "http://a.test/2", "http://a.test/3", "http://b.test/4"]);
    assert_eq!(calls, ["http://a.test/1", "http://a.test/2", "http://b.test/4"]);
    let error = &answers[2]["result"]["structuredContent"]["error"];
    assert_eq!(error["code"], "SP_RATE_LIMITED");
    let after = error["retry_after_s"].as_u64().expect("retry_after_s");
    assert!((3590..=3600).contains(&after), "{after}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.starts_with(r#"rate limit limits[0] reached: at most 2 call(s) per 3600 s ({"tool":"http_request","target":"a.test","max":2,"per_s":3600})"#),
        "{message}"
    );
    assert_eq!(answers[2]["result"]["isError"], true);
    assert_eq!(rejections, [("rate_limited", 1)]);
    // The state outlives this server: a new one (another session) is refused at once.
    let (answers, calls, _) = serve(&policy(), Some(Limiter::new(dir.path().join("limits.json"))), &["http://a.test/5"]);
    assert_eq!((calls.len(), &answers[0]["result"]["structuredContent"]["error"]["code"]), (0, &serde_json::json!("SP_RATE_LIMITED")));
}

/// No place to count (an in-process server built without one; `sp mcp` refuses to start
/// then) or a state file that cannot be used: the call fails closed.
#[test]
fn no_usable_state_fails_closed() {
    let (answers, calls, rejections) = serve(&policy(), None, &["http://a.test/1", "http://b.test/2"]);
    assert_eq!(answers[0]["result"]["structuredContent"]["error"]["code"], "SP_UNAVAILABLE");
    assert_eq!(calls, ["http://b.test/2"], "a call no rule selects needs no state");
    assert_eq!(rejections, [("limits_unavailable", 1)]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.json");
    std::fs::write(&path, "garbage\n").unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let (answers, calls, _) = serve(&policy(), Some(Limiter::new(path.clone())), &["http://a.test/1"]);
    let message = answers[0]["result"]["structuredContent"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("is corrupt") && message.ends_with("remove it to start the counts afresh; the call was not run"), "{message}");
    assert!(calls.is_empty());
}
