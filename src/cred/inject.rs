//! How a credential's secret goes into a request (`inject` in `sp-policy(5)`): a header
//! (`bearer`, `basic`, `header` with its format) or a query parameter; `aws_sigv4` and
//! `oauth2` are the executor's (it signs, or fetches a token).

use base64::Engine as _;
use zeroize::Zeroizing;

use crate::policy::Injection;
use crate::cred::source::Secret;

/// Where an injected secret goes. Values are zeroed on drop.
pub(crate) enum Placement {
    Header {
        name: String,
        value: Zeroizing<String>,
    },
    Query {
        name: String,
        value: Zeroizing<String>,
    },
    /// `aws_sigv4`, `oauth2`: nothing to place from the source as is; the
    /// HTTP executor signs the final request or fetches a token (`http/exec.rs`).
    Executor,
}

/// Renders the secret the way the credential's injection says.
pub(crate) fn place(inject: &Injection, secret: &Secret) -> Placement {
    let s = secret.expose();
    match inject {
        Injection::Bearer => Placement::Header { name: "authorization".into(), value: Zeroizing::new(format!("Bearer {s}")) },
        Injection::Basic => Placement::Header {
            name: "authorization".into(),
            value: Zeroizing::new(format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(s))),
        },
        Injection::Header { name, format } => Placement::Header { name: name.clone(), value: Zeroizing::new(format.replace("{secret}", s)) },
        Injection::Query { name } => Placement::Query { name: name.clone(), value: Zeroizing::new(s.to_owned()) },
        Injection::AwsSigV4(_) | Injection::OAuth2(_) => Placement::Executor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placements() {
        let s = Secret::from_literal("user:pa ss");
        let header = |p: Placement| match p {
            Placement::Header { name, value } => (name, value.to_string()),
            Placement::Query { .. } | Placement::Executor => panic!(),
        };
        assert_eq!(header(place(&Injection::Bearer, &s)), ("authorization".into(), "Bearer user:pa ss".into()));
        assert_eq!(header(place(&Injection::Basic, &s)), ("authorization".into(), "Basic dXNlcjpwYSBzcw==".into()));
        let h = Injection::Header { name: "X-Key".into(), format: "Token {secret}!".into() };
        assert_eq!(header(place(&h, &s)), ("X-Key".into(), "Token user:pa ss!".into()));
        assert!(matches!(place(&Injection::Query { name: "k".into() }, &s), Placement::Query { name, value } if name == "k" && *value == "user:pa ss"));
    }
}
