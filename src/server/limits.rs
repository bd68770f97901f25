//! The rate limit stage of a `tools/call` (issue 35): after authorization, before
//! approval, the intent row and the run. A call over a `limits` rule is refused with
//! `SP_RATE_LIMITED` and `retry_after_s`, journaled as a rejection (`rate_limited`), and
//! never reaches the executor; a state file that cannot be used refuses the call
//! (`SP_UNAVAILABLE`, fail closed). The counting is `gate/limits.rs`.

use super::{Outgoing, Server};
use crate::gate::limits::{self, Limiter};
use crate::gate::outcome::ToolCode;
use crate::mcp::jsonrpc::Id;
use crate::mcp::model::{Answer, CallToolResult};
use crate::tools::{Action, Executor};

impl<E: Executor> Server<'_, E> {
    /// Counts the calls of the policy's `limits` rules in the file of `limiter`
    /// (`None`: a policy without rules).
    pub(crate) fn with_limiter(mut self, limiter: Option<Limiter>) -> Self {
        self.limiter = limiter;
        self
    }

    /// `Some(refusal)` when the call may not go on: a rule is at its max, or its count
    /// could not be kept. A call no rule applies to costs nothing here.
    pub(super) fn rate_limit(&mut self, id: &Id, action: &Action) -> Option<(Outgoing, bool)> {
        let rules = &self.policy.limits.rules;
        if rules.is_empty() {
            return None;
        }
        let subject = crate::tools::subject::subject(action);
        let applying = limits::applying(rules, &subject);
        if applying.is_empty() {
            return None;
        }
        let Some(limiter) = &self.limiter else {
            // `sp mcp` refuses to start without one; an in-process server without it
            // fails closed.
            let r = crate::gate::outcome::Rejection {
                reason: crate::gate::outcome::Reason::LimitsUnavailable,
                code: ToolCode::Unavailable,
                message: "rate limit state: none configured; the call was not run".into(),
            };
            return Some(self.refuse_tool(id, r));
        };
        match limiter.admit(&applying, limits::now_ms) {
            Ok(Ok(())) => None,
            Ok(Err(limited)) => {
                let message = limited.to_string();
                log::info!("refused ({}): {message}", ToolCode::RateLimited);
                self.reject(crate::gate::outcome::Reason::RateLimited);
                self.journal_reject(crate::gate::outcome::Reason::RateLimited, Some(ToolCode::RateLimited.as_str()), &message);
                Some((Outgoing::Answer(Answer::Call(CallToolResult::rate_limited(message, limited.retry_after_s))), true))
            }
            Err(e) => {
                log::error!("{e}");
                let r = crate::gate::outcome::Rejection {
                    reason: crate::gate::outcome::Reason::LimitsUnavailable,
                    code: ToolCode::Unavailable,
                    message: format!("{e}; the call was not run"),
                };
                Some(self.refuse_tool(id, r))
            }
        }
    }
}

#[cfg(test)]
mod tests;
