//! What signing needs besides the request: the credential's key pair (from its source),
//! and the payload rule of the policy section (`policy::schemes::SigV4Config`).

use std::fmt;

use zeroize::Zeroizing;

use super::{Payload, SigV4Error};
use crate::policy::schemes::SigV4Config;

/// An AWS key pair and optional STS session token. Debug shows the key id only.
pub(crate) struct Credentials {
    pub(super) access_key_id: String,
    pub(super) secret_access_key: Zeroizing<String>,
    pub(super) session_token: Option<Zeroizing<String>>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &format_args!("***"))
            .field("session_token", &format_args!("{}", if self.session_token.is_some() { "Some(***)" } else { "None" }))
            .finish()
    }
}

impl Credentials {
    /// Parses `{"access_key_id", "secret_access_key", "session_token"?}`. The AWS CLI's
    /// `credential_process` spelling (`AccessKeyId`, `SecretAccessKey`, `SessionToken`,
    /// as `aws configure export-credentials` prints it) is accepted too, so a `command`
    /// source can run the CLI. Other members (`Version`, `Expiration`) are ignored; a
    /// `null` session token means none.
    pub(crate) fn from_json(bytes: &[u8]) -> Result<Credentials, SigV4Error> {
        // serde_json's error text can quote the input: never shown, only NotJson.
        let value: Zeroizing<ValueBox> = Zeroizing::new(ValueBox(serde_json::from_slice(bytes).map_err(|_| SigV4Error::NotJson)?));
        let obj = value.0.as_object().ok_or(SigV4Error::NotAnObject)?;
        let field = |snake: &'static str, camel: &'static str| -> Result<Option<Zeroizing<String>>, SigV4Error> {
            match obj.get(snake).or_else(|| obj.get(camel)) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::String(s)) if s.is_empty() => Err(SigV4Error::EmptyField(snake)),
                Some(serde_json::Value::String(s)) => Ok(Some(Zeroizing::new(s.clone()))),
                Some(_) => Err(SigV4Error::FieldNotString(snake)),
            }
        };
        let id = field("access_key_id", "AccessKeyId")?.ok_or(SigV4Error::MissingField("access_key_id"))?;
        let secret = field("secret_access_key", "SecretAccessKey")?.ok_or(SigV4Error::MissingField("secret_access_key"))?;
        let token = field("session_token", "SessionToken")?;
        // The key id goes into `Credential=<id>/<scope>,`: no separators, no whitespace.
        if !id.bytes().all(|b| b.is_ascii_graphic() && b != b'/' && b != b',') {
            return Err(SigV4Error::BadCharacters("access_key_id"));
        }
        if !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(SigV4Error::BadCharacters("secret_access_key"));
        }
        if let Some(t) = &token
            && !t.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(SigV4Error::BadCharacters("session_token"));
        }
        Ok(Credentials { access_key_id: id.to_string(), secret_access_key: secret, session_token: token })
    }

    #[cfg(test)]
    pub(crate) fn access_key_id(&self) -> &str {
        &self.access_key_id
    }

    /// For registering with the redactor.
    pub(crate) fn secret_access_key(&self) -> &str {
        &self.secret_access_key
    }

    /// For registering with the redactor.
    pub(crate) fn session_token(&self) -> Option<&str> {
        self.session_token.as_deref().map(String::as_str)
    }
}

/// A parsed JSON document that wipes its strings when dropped (the source's secret
/// passes through it). Also used by `oauth2` for token responses.
pub(crate) struct ValueBox(pub(crate) serde_json::Value);

impl zeroize::Zeroize for ValueBox {
    fn zeroize(&mut self) {
        fn wipe(v: &mut serde_json::Value) {
            match v {
                serde_json::Value::String(s) => s.zeroize(),
                serde_json::Value::Array(a) => a.iter_mut().for_each(wipe),
                serde_json::Value::Object(o) => o.values_mut().for_each(wipe),
                _ => {}
            }
        }
        wipe(&mut self.0);
    }
}

/// What signing needs of the policy section.
impl SigV4Config {
    /// The payload to sign for `body` under this section.
    pub fn payload<'a>(&self, body: &'a [u8]) -> Payload<'a> {
        if self.unsigned_payload { Payload::Unsigned } else { Payload::Hash(body) }
    }
}
