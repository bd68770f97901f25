//! Approval: a human's yes for each call that uses an approve-flagged credential or SSH
//! host, or that an approve-flagged `http.allow` rule permits, asked through the channels the operator lists in `approval.via`: a program the
//! operator chose (the approver command), and MCP elicitation (`elicit.rs`).
//!
//! ```text
//!  Ask (or none) ─── flagged? ──no──────────────────────────────> intent "allow" (enforce) / "observe"
//!                      │yes
//!                      ├─ mode observe ─> approval row "observed" ─> intent "observe"   (nothing asked)
//!                      └─ mode enforce ─> a live grant (grants.rs)? ─yes─> approval "granted" ─> run
//!                           │ no: each channel of via in turn (only "command" when the
//!                           │     subject's approve is "command")
//!                           ├─ elicitation: no capability / error answer / no answer in time ─> next channel
//!                           │    accept+approve ─> "approved"     decline ─> "declined"
//!                           │    cancel ─> "dismissed"            2026-07-28 first call ─> "asked" (input_required)
//!                           └─ command: approver(argv, stdin = description)
//!                                exit 0 ─> "approved" (+ a grant from its last stdout line)
//!                                exit ≠ 0 ─> "refused"   timeout ─> "timeout"   signal / no start ─> "failed"
//!  "approved" ─> intent "approved" ─> execute; the rest: SP_NOT_APPROVED (or SP_CANCELLED), nothing runs
//! ```
//!
//! Before it runs, `argv[0]` must be a regular file (links followed) owned by root or
//! the user `sp` runs as and not writable by group or others (`sys::check_program`):
//! whoever can write it approves everything, and a FIFO or device is refused
//! without anything waiting on it. Otherwise the answer is "failed".
//!
//! The approver runs with argv (no shell) in its own process group; its stdin is one
//! JSON line describing the exact action (tool, target, credential or host name, rule,
//! `request_fp`, and the request itself: method, URL with the agent's query, host, agent
//! headers and body, or SSH host, user, address, port, command and stdin). It never
//! holds a secret: credentials are injected after this point, and variables that are
//! `env` credential sources are removed from its environment. The same facts are in
//! `SP_APPROVAL_TOOL`, `SP_APPROVAL_TARGET`, `SP_APPROVAL_SUBJECT`, `SP_APPROVAL_HOST`,
//! `SP_APPROVAL_REQUEST` (the request as JSON), `SP_APPROVAL_SESSION`, `SP_APPROVAL_FP`
//! and `SP_APPROVAL_VERSION` for scripts that do not parse JSON.
//!
//! What the approver shows is what will run: every one of those fields is escaped the
//! way the log and `sp audit` are (`escape.rs`: controls, bidi, zero-width, separators),
//! cut visibly when long (`...[cut: N bytes, sha256 HEX]`, [`MAX_SHOWN_LINE`],
//! [`MAX_SHOWN_TEXT`]), hosts are given as punycode with their Unicode form beside it,
//! and the whole stdin line carries no raw member of the class (`escape::json_safe`).
//! The exact values are in the description's `raw` member only (bodies and stdin cut
//! at 64 KiB there, with a `_truncated` flag).
//!
//! Its stdout and stderr are its own pipes, read by `sp` and logged on stderr (at most
//! 16 KiB each; stdout at info level, stderr at warn, the default, since that is where an
//! approver says why it refuses); they never reach the protocol stream. A decision other
//! than yes is logged at warn with its reason.
//! Exit 0 is yes; any other exit, death by a signal, failure to start, or no answer
//! within `approval.timeout_s` (the whole process group is then killed) is no. A yes
//! covers one call unless it asks for a grant the policy allows (`grants.rs`). The
//! decision, the channel, the approver's exit status, the grant and the time taken are
//! journaled before anything runs. While it waits the call sends progress (when the
//! client gave a token), so a client that resets its timeout on progress keeps waiting.
//!
//! An elicitation is answered by the MCP client, which runs the model: the operator
//! opts in per policy (`via`) and keeps chosen subjects on the command
//! (`"approve": "command"`); a grant an elicitation made never covers those.
//!
//! Policy (parsed in `policy/approval.rs`): `"mode": "enforce" | "observe"`,
//! `"approval": {"via": [...], "command": [ABSOLUTE_PATH, ARGS...], "timeout_s": 120,
//! "grants": {...}}`, and `"approve": true | "command"`, an ordinary field of a
//! credential or an SSH host.

mod command;
pub(crate) mod elicit;
pub(crate) mod grants;

use std::time::Instant;

use serde_json::{json, Value};

use crate::audit::{Context, Journal};
use crate::escape;
use crate::gate::exec::{Cancel, Progress};
use crate::gate::outcome::{Reason, Rejection, ToolCode};
use crate::policy::approval::Via;
use crate::policy::{Policy, SecretSource};
#[cfg(test)]
use command::ask;
pub(crate) use command::ask_waiting;
use elicit::{Elicited, Elicitor};
use grants::{ActionKey, Channel, GrantRequest, Grants};

pub(crate) use crate::policy::approval::Mode;

/// Bodies and stdin in the description's `raw` member are cut here (with a `_truncated` flag).
pub(crate) const MAX_SHOWN_BYTES: usize = 64 * 1024;
/// The escaped form of a one-line field (target, URL, command, header value, names) is
/// cut visibly after this many bytes (`escape::shown`): the length and SHA-256 of the
/// whole value follow the cut.
pub(crate) const MAX_SHOWN_LINE: usize = 1024;
/// The same for the escaped form of a body or stdin.
pub(crate) const MAX_SHOWN_TEXT: usize = 16 * 1024;
/// `SP_APPROVAL_REQUEST` is cut visibly after this many bytes (then it is no longer
/// whole JSON): 100 headers of 1 KiB shown, each JSON-escaped, would pass Linux's
/// 128 KiB limit on one environment string.
pub(crate) const MAX_SHOWN_ENV: usize = 64 * 1024;
/// `version` of the description and `SP_APPROVAL_VERSION`: 2 since the fields are
/// escaped and cut and the exact values moved under `raw`.
pub(crate) const DESCRIPTION_VERSION: u32 = 2;
const MAX_LOGGED_BYTES: u64 = 16 * 1024;
/// Bytes of one line of the approver's output logged (scrubbed whole first).
pub(crate) const MAX_LOGGED_LINE: usize = 1024;

/// `sp check`'s lines.
pub(crate) fn check_summary(policy: &Policy) -> String {
    let p = &policy.approval;
    let list = |names: Vec<String>| if names.is_empty() { "none".to_owned() } else { names.join(",") };
    // A subject that requires the command says so: `name (command only)`.
    let named = |name: &String, a: crate::policy::approval::Approve| match a {
        crate::policy::approval::Approve::Command => format!("{name} (command only)"),
        _ => name.clone(),
    };
    let credentials: Vec<String> = policy.credentials.values().filter(|c| c.approve.needed()).map(|c| named(&c.name, c.approve)).collect();
    let ssh_hosts: Vec<String> = policy.ssh.hosts.values().filter(|h| h.approve.needed()).map(|h| named(&h.name, h.approve)).collect();
    let via = match p.via.as_slice() {
        [Via::Command] => String::new(),
        list => format!(", via {}", list.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(" then ")),
    };
    let command = p.command.as_ref().map_or("none".to_owned(), |c| match crate::sys::check_program(std::path::Path::new(&c[0])) {
        Ok(()) => c[0].clone(),
        // Every approve-flagged call would be refused (SP_NOT_APPROVED) until fixed.
        Err(e) => format!("{} (REFUSED when asked: {e})", c[0]),
    });
    // Allow rules that ask (issue 32), named only when there are some.
    let rules: Vec<String> = policy.http.allow.iter().filter(|r| r.approve.needed()).map(|r| named(&format!("http.allow[{}]", r.index), r.approve)).collect();
    let rules = if rules.is_empty() { String::new() } else { format!("; allow rules: {}", rules.join(",")) };
    format!(
        "mode: {}\napproval: command {command}, timeout {}s{via}; credentials: {}; ssh hosts: {}{rules}\n",
        p.mode.as_str(),
        p.timeout.as_secs(),
        list(credentials),
        list(ssh_hosts)
    )
}

// ---------------------------------------------------------------------------------------
// The gate

/// What the server does next.
#[derive(Debug, PartialEq)]
pub(crate) enum Gate {
    /// Run it; the intent row's `decision`.
    Run { intent: &'static str },
    /// Do not run it.
    Refuse(Rejection),
    /// 2026-07-28: answer the call `input_required` with this `elicitation/create`
    /// params; the retry carries the user's answer (`elicit.rs`).
    InputRequired(Value),
}

/// What the approver is asked about one call: plain data the tool table builds
/// (`tools/`) for an action the policy flags. `subject` is the flagged credential or
/// SSH host; `host` where the call goes (shown as punycode, Unicode beside it);
/// `request` the call as a person reads it, each string escaped and cut ([`line()`],
/// [`text`]); `raw` the exact values (bodies and stdin cut at [`MAX_SHOWN_BYTES`], [`cut`]);
/// `only_command`: the subject's `approve` is `"command"` (never an elicitation).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ask {
    pub subject: String,
    pub host: String,
    pub request: Value,
    pub raw: Value,
    pub only_command: bool,
}

/// A one-line field as the approver is shown it: escaped, cut visibly.
pub(crate) fn line(s: &str) -> Value {
    Value::String(escape::shown(s, MAX_SHOWN_LINE))
}

/// A body or stdin as the approver is shown it: escaped, cut visibly.
pub(crate) fn text(s: &str) -> Value {
    Value::String(escape::shown(s, MAX_SHOWN_TEXT))
}

/// A body or stdin as it goes under `raw`: at most [`MAX_SHOWN_BYTES`], and whether it
/// was cut.
pub(crate) fn cut(s: &str) -> (String, bool) {
    let kept = crate::sys::cut(s, MAX_SHOWN_BYTES);
    (kept.to_owned(), kept.len() < s.len())
}

/// One line of the approver's output as the log shows it: its first [`MAX_LOGGED_LINE`]
/// bytes, scrubbed as if the line were whole before the cut (`gate::outside`), escaped,
/// ` [cut]` when something was.
pub(crate) fn logged_line(line: &crate::gate::outside::Line<'_>) -> String {
    let (text, cut) = line.shown(MAX_LOGGED_LINE);
    format!("{}{}", text.as_str().escape_debug(), if cut { " [cut]" } else { "" })
}

/// What the gate is lent besides the policy and the journal: the call's cancel, its
/// progress (sent while it waits), the client to elicit from, and the grants store
/// (`None`: the operator allows no grant, or its file has no location).
pub(crate) struct Asking<'a, 'p> {
    pub cancel: &'a Cancel,
    pub progress: &'a mut Progress<'p>,
    pub elicitor: &'a mut dyn Elicitor,
    pub grants: Option<&'a Grants>,
}

/// The channels a subject may be approved through, in the operator's order.
fn channels(policy: &Policy, ask: &Ask) -> Vec<Channel> {
    if ask.only_command {
        return vec![Channel::Command];
    }
    policy
        .approval
        .via
        .iter()
        .map(|v| match v {
            Via::Command => Channel::Command,
            Via::Elicitation => Channel::Elicitation,
        })
        .collect()
}

/// Asks for approval when the policy flags the action (`ask` is `Some`) and journals the
/// answer (module docs). A live grant answers first; then each channel of
/// `approval.via` in turn, an elicitation falling back to the next when the client
/// cannot be asked, could not show the form or did not answer in time. A journal that
/// cannot take the approval row refuses the action (`SP_UNAVAILABLE`). A cancel (issue
/// #10) kills the approver's process group or stops waiting for the client; the call is
/// then refused with `SP_CANCELLED` and never answered.
pub(crate) fn gate(policy: &Policy, journal: &mut Journal, ctx: &Context, ask: Option<&Ask>, asking: &mut Asking<'_, '_>) -> Gate {
    let p = &policy.approval;
    let plain = if p.mode == Mode::Observe { "observe" } else { "allow" };
    let Some(ask) = ask else {
        return Gate::Run { intent: plain };
    };
    if p.mode == Mode::Observe {
        let answer = Answer::new("observed", None, "approval would be asked (mode observe): not asked".into(), 0);
        return record(journal, ctx, &answer, None).unwrap_or(Gate::Run { intent: "observe" });
    }
    let accept = channels(policy, ask);
    let key = ActionKey::new(
        ctx.tool.as_deref().unwrap_or_default(),
        ctx.target.as_deref().unwrap_or_default(),
        &ask.subject,
        ctx.request_fp.as_deref().unwrap_or_default(),
    );
    let store = asking.grants.zip(policy.hash());
    if let Some((store, hash)) = store {
        let found = store.find(hash, &key, &accept, grants::now());
        journal_forged(journal, ctx, store);
        match found {
            Ok(Some(g)) => {
                let left = g.expires.saturating_sub(grants::now());
                let why = format!("{} grant {} (given through {}), {left} s left", g.scope.as_str(), g.id, g.channel.as_str());
                log::info!("approval: granted ({why})");
                let mut answer = Answer::new("granted", None, why, 0);
                answer.channel = Some(g.channel);
                return record(journal, ctx, &answer, Some(&g.id)).unwrap_or(Gate::Run { intent: "approved" });
            }
            Ok(None) => {}
            Err(e) => log::warn!("approval grants not consulted: {e}"),
        }
    }
    let mut answer = None;
    let mut skipped = Vec::new();
    for channel in &accept {
        match channel {
            Channel::Elicitation => match elicit(policy, ask, ctx, journal.session(), asking) {
                Ok(a) => {
                    answer = Some(a);
                    break;
                }
                Err(Elsewhere::Deferred(params)) => {
                    let asked = Answer::new("asked", None, "the client is asked (input_required); its retry carries the answer".into(), 0);
                    let asked = Answer { channel: Some(Channel::Elicitation), ..asked };
                    return record(journal, ctx, &asked, None).unwrap_or(Gate::InputRequired(params));
                }
                Err(Elsewhere::Fallback(why)) => {
                    log::info!("approval: elicitation not possible ({why})");
                    skipped.push(why);
                }
            },
            Channel::Command => {
                let Some(argv) = &p.command else {
                    skipped.push("no approval.command".into());
                    continue;
                };
                answer = Some(command(policy, argv, ask, ctx, journal.session(), asking));
                break;
            }
        }
    }
    let mut answer = answer.unwrap_or_else(|| Answer::new("unavailable", None, format!("nobody could be asked: {}", skipped.join("; ")), 0));
    if !skipped.is_empty() && answer.decision != "unavailable" {
        answer.why = format!("{} (after: {})", answer.why, skipped.join("; "));
    }
    // A yes that asks for a lasting grant: stored, and the row names it.
    let mut grant_id = None;
    if let (true, Some(GrantRequest::Lasting { scope, ttl_s }), Some(channel)) = (answer.decision == "approved", answer.grant, answer.channel) {
        match store {
            Some((store, hash)) => match store.add(scope, ttl_s, hash, &key, channel, grants::now()).inspect(|_| journal_forged(journal, ctx, store)) {
                Ok(g) => {
                    answer.why = format!("{}; {} grant {} for {} s", answer.why, g.scope.as_str(), g.id, g.ttl_s);
                    grant_id = Some(g.id);
                }
                Err(e) => {
                    log::warn!("approval grant not stored (this approval covers one call): {e}");
                    answer.why = format!("{}; no grant: {e}", answer.why);
                }
            },
            None => answer.why = format!("{}; no grant: the policy allows none", answer.why),
        }
    }
    // A refusal says why at the default verbosity (warn): headless, an approver that
    // finds nowhere to ask refuses every call, and the operator must see that without -v
    // (issue 32, section 1).
    if answer.decision == "approved" {
        log::info!("approval: {} ({})", answer.decision, answer.why);
    } else {
        log::warn!("approval: {} for {} ({}): {}", answer.decision, ctx.target.as_deref().unwrap_or("an action"), ask.subject, answer.why);
    }
    if let Some(refused) = record(journal, ctx, &answer, grant_id.as_deref()) {
        return refused;
    }
    let refuse = |reason, code, message| Gate::Refuse(Rejection { reason, code, message });
    match answer.decision {
        "approved" => Gate::Run { intent: "approved" },
        "cancelled" => refuse(Reason::Cancelled, ToolCode::Cancelled, "cancelled by the client while approval was asked".into()),
        "declined" => refuse(Reason::Declined, ToolCode::NotApproved, format!("the user declined this call: {}", answer.why)),
        "dismissed" => refuse(Reason::Dismissed, ToolCode::NotApproved, format!("the user dismissed the approval form: {}", answer.why)),
        _ => refuse(Reason::NotApproved, ToolCode::NotApproved, format!("this call was not approved: {}", answer.why)),
    }
}

/// One `grant` row (decision `forged`) per record of the grants file that is no grant
/// (no `mac`, a wrong one, no key: `grants/mac.rs`), each once per process, with the
/// call that found it. Issue 31: something else wrote into the file.
fn journal_forged(journal: &mut Journal, ctx: &Context, store: &Grants) {
    for f in store.take_forged() {
        let why = format!(
            "a {} grant for {} {} in {} is ignored: {} (sp did not write it)",
            f.scope.as_str(),
            escape::shown(&f.tool, grants::MAX_SHOWN_NAME),
            escape::shown(&f.subject, grants::MAX_SHOWN_NAME),
            store.path().display(),
            f.why.as_str()
        );
        journal.record(ctx.row("grant").set("decision", "forged").set("grant", f.id).set("reason", why));
    }
}

/// The approval row; `Some(refusal)` when the journal cannot take it (nothing runs).
fn record(journal: &mut Journal, ctx: &Context, answer: &Answer, grant: Option<&str>) -> Option<Gate> {
    let row = ctx
        .row("approval")
        .set("decision", answer.decision)
        .set("reason", answer.why.clone())
        .set("approver_exit", answer.exit)
        .set("duration_ms", answer.duration_ms)
        .set("channel", answer.channel.map(Channel::as_str))
        .set("grant", grant.map(str::to_owned));
    match journal.write(row) {
        Ok(_) => None,
        Err(e) => {
            log::error!("{e}");
            Some(Gate::Refuse(Rejection { reason: Reason::AuditUnavailable, code: ToolCode::Unavailable, message: format!("the action was not run: {e}") }))
        }
    }
}

/// Why an elicitation gave no answer here.
enum Elsewhere {
    /// 2026-07-28: answer `input_required` with these params.
    Deferred(Value),
    /// The client cannot be asked, could not show the form, or did not answer in time:
    /// the next channel, if any.
    Fallback(String),
}

/// Asks the client through its elicitor (`elicit.rs`).
fn elicit(policy: &Policy, ask: &Ask, ctx: &Context, session: &str, asking: &mut Asking<'_, '_>) -> Result<Answer, Elsewhere> {
    if !asking.elicitor.can_ask() {
        return Err(Elsewhere::Fallback("the client did not declare form elicitation".into()));
    }
    let offers = if asking.grants.is_some() { elicit::offers(&policy.approval.grants) } else { Vec::new() };
    let params = elicit::form(&describe(ask, ctx, session), &ask.subject, &offers);
    let started = Instant::now();
    log::info!("asking the client's user about {} ({})", ctx.target.as_deref().unwrap_or("an action"), ask.subject);
    let asked = asking.elicitor.ask(&params, started + policy.approval.timeout, asking.cancel, asking.progress);
    let answer = |decision, why: String, grant| Answer {
        channel: Some(Channel::Elicitation),
        grant,
        ..Answer::new(decision, None, why, started.elapsed().as_millis() as u64)
    };
    let result = match asked {
        Elicited::Result(v) => v,
        Elicited::Deferred => return Err(Elsewhere::Deferred(params)),
        Elicited::Error(why) => return Err(Elsewhere::Fallback(format!("the client did not show the form: {why}"))),
        Elicited::TimedOut => {
            return Err(Elsewhere::Fallback(format!("the client did not answer within {}s", policy.approval.timeout.as_secs())));
        }
        Elicited::Cancelled => return Ok(answer("cancelled", "the client cancelled the call while its user was asked".into(), None)),
        Elicited::BadState(e) => return Ok(answer("refused", e.to_string(), None)),
    };
    Ok(match elicit::read_answer(&result, &offers) {
        elicit::Reply::Approved(grant) => answer("approved", "the user approved it (elicitation)".into(), grant),
        elicit::Reply::Declined => answer("declined", "the user declined it (elicitation)".into(), None),
        elicit::Reply::Dismissed => answer("dismissed", "the user dismissed the form (elicitation cancel)".into(), None),
        elicit::Reply::Malformed(why) => answer("refused", format!("the client's answer is malformed: {why}"), None),
    })
}

/// Asks the operator's approver command; its yes may ask for a grant on its last line
/// of stdout (`grants::parse_answer`).
fn command(policy: &Policy, argv: &[String], ask: &Ask, ctx: &Context, session: &str, asking: &mut Asking<'_, '_>) -> Answer {
    let Input { line, env } = input(ask, ctx, session);
    let hidden: Vec<&str> = policy
        .credentials
        .values()
        .filter_map(|c| match &c.source {
            SecretSource::Env(v) => Some(v.as_str()),
            _ => None,
        })
        .collect();
    log::info!("asking the approver about {} ({})", ctx.target.as_deref().unwrap_or("an action"), ask.subject);
    let progress = &mut *asking.progress;
    let mut waiting = || progress.waiting("waiting for approval from the operator's approver");
    let mut answer = ask_waiting(argv, policy.approval.timeout, &line, &env, &hidden, asking.cancel, &mut waiting);
    answer.channel = Some(Channel::Command);
    if answer.decision == "approved" {
        match grants::parse_answer(&answer.stdout) {
            Ok(g) => answer.grant = g,
            Err(e) => log::warn!("{e}"),
        }
    }
    answer
}

/// What the approver is given: its stdin line and its `SP_APPROVAL_*` variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Input {
    /// One line of JSON, every unsafe character `\uXXXX`-escaped (`escape::json_safe`).
    pub line: String,
    pub env: Vec<(&'static str, String)>,
}

/// The approver's input for `ask`: the description ([`describe`]) as its stdin line,
/// and the same facts, shown form only, in its environment.
pub(crate) fn input(ask: &Ask, ctx: &Context, session: &str) -> Input {
    let d = describe(ask, ctx, session);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let env = vec![
        ("SP_APPROVAL_VERSION", DESCRIPTION_VERSION.to_string()),
        ("SP_APPROVAL_TOOL", text(&d["tool"])),
        ("SP_APPROVAL_TARGET", text(&d["target"])),
        ("SP_APPROVAL_SUBJECT", escape::shown(&ask.subject, MAX_SHOWN_LINE)),
        ("SP_APPROVAL_HOST", escape::host_line(&ask.host)),
        // A variable over 128 KiB would fail the approver's exec (E2BIG): cut visibly.
        ("SP_APPROVAL_REQUEST", escape::shown(&escape::json_safe(&d["request"].to_string()), MAX_SHOWN_ENV)),
        ("SP_APPROVAL_SESSION", text(&d["session"])),
        ("SP_APPROVAL_FP", text(&d["request_fp"])),
    ];
    Input { line: escape::json_safe(&d.to_string()), env }
}

/// The approver's stdin: the exact action, no secret. Every string a person may read is
/// escaped and cut visibly (`escape::shown`); the exact values are under `raw` only.
pub(crate) fn describe(ask: &Ask, ctx: &Context, session: &str) -> Value {
    let opt = |s: &Option<String>| s.as_deref().map_or(Value::Null, line);
    json!({
        "version": DESCRIPTION_VERSION,
        "session": line(session),
        "tool": opt(&ctx.tool),
        "target": opt(&ctx.target),
        "credential": opt(&ctx.credential),
        "rule": opt(&ctx.rule),
        "request_fp": opt(&ctx.request_fp),
        "request": ask.request,
        "raw": {"target": ctx.target, "request": ask.raw},
    })
}

/// The answer of a channel (or of a grant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    /// `approved`, `refused`, `timeout`, `failed`, `cancelled`; an elicitation's
    /// `declined` and `dismissed`; `granted` (a live grant), `asked` (2026-07-28
    /// `input_required`), `unavailable` (no channel could ask), `observed` (never asked).
    pub decision: &'static str,
    pub exit: Option<i32>,
    pub why: String,
    pub duration_ms: u64,
    /// Who answered.
    pub channel: Option<Channel>,
    /// The grant asked for with a yes.
    pub grant: Option<GrantRequest>,
    /// The approver's standard output, its last line kept (for a grant request).
    pub stdout: Vec<u8>,
}

impl Answer {
    fn new(decision: &'static str, exit: Option<i32>, why: String, duration_ms: u64) -> Answer {
        Answer { decision, exit, why, duration_ms, channel: None, grant: None, stdout: Vec::new() }
    }
}

/// Runs the approver once. Never panics, never blocks past `timeout` (plus the kill).
#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests make FIFOs and read the environment to hide a variable")]
mod tests;
