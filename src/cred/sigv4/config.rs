//! What signing needs besides the request: the credential's key pair (from its source)
//! and the policy section (`inject: {"aws_sigv4": {...}}`): region, service, payload.

use std::fmt;

use zeroize::Zeroizing;

use super::{Payload, SigV4Error};

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
            .field(
                "session_token",
                &format_args!(
                    "{}",
                    if self.session_token.is_some() {
                        "Some(***)"
                    } else {
                        "None"
                    }
                ),
            )
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
        let value: Zeroizing<ValueBox> = Zeroizing::new(ValueBox(
            serde_json::from_slice(bytes).map_err(|_| SigV4Error::NotJson)?,
        ));
        let obj = value.0.as_object().ok_or(SigV4Error::NotAnObject)?;
        let field = |snake: &'static str,
                     camel: &'static str|
         -> Result<Option<Zeroizing<String>>, SigV4Error> {
            match obj.get(snake).or_else(|| obj.get(camel)) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::String(s)) if s.is_empty() => {
                    Err(SigV4Error::EmptyField(snake))
                }
                Some(serde_json::Value::String(s)) => Ok(Some(Zeroizing::new(s.clone()))),
                Some(_) => Err(SigV4Error::FieldNotString(snake)),
            }
        };
        let id = field("access_key_id", "AccessKeyId")?
            .ok_or(SigV4Error::MissingField("access_key_id"))?;
        let secret = field("secret_access_key", "SecretAccessKey")?
            .ok_or(SigV4Error::MissingField("secret_access_key"))?;
        let token = field("session_token", "SessionToken")?;
        // The key id goes into `Credential=<id>/<scope>,`: no separators, no whitespace.
        if !id
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'/' && b != b',')
        {
            return Err(SigV4Error::BadCharacters("access_key_id"));
        }
        if !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(SigV4Error::BadCharacters("secret_access_key"));
        }
        if let Some(t) = &token
            && !t.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(SigV4Error::BadCharacters("session_token"));
            }
        Ok(Credentials {
            access_key_id: id.to_string(),
            secret_access_key: secret,
            session_token: token,
        })
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

/// Region and service of the credential scope (`<date>/<region>/<service>/aws4_request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub(super) region: String,
    pub(super) service: String,
    /// Send and sign `x-amz-content-sha256` (S3 requires it, other services accept it).
    /// Always sent with [`Payload::Unsigned`]. Off only to reproduce AWS's test suite,
    /// whose vectors predate the header.
    pub(super) content_sha256_header: bool,
}

impl Scope {
    pub fn new(region: &str, service: &str) -> Result<Scope, SigV4Error> {
        let ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 64
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        };
        if !ok(region) {
            return Err(SigV4Error::BadRegion);
        }
        if !ok(service) {
            return Err(SigV4Error::BadService);
        }
        Ok(Scope {
            region: region.to_owned(),
            service: service.to_owned(),
            content_sha256_header: true,
        })
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    pub fn service(&self) -> &str {
        &self.service
    }

    /// S3 and its variants encode the path once and never normalise it.
    pub(super) fn is_s3(&self) -> bool {
        self.service == "s3" || self.service == "s3express" || self.service.starts_with("s3-")
    }
}

/// A policy section that does not parse: `field` is the member inside the section
/// (empty for the section itself), for `PolicyError`'s `credentials.<name>.inject.<kind>.<field>`.
#[derive(Debug, PartialEq, Eq)]
pub struct SectionError {
    pub field: String,
    pub message: &'static str,
}

impl fmt::Display for SectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for SectionError {}

impl SectionError {
    /// As a policy `(field, message)` under `section` (`credentials.<name>.inject.aws_sigv4`).
    pub fn at(self, section: &str) -> (String, String) {
        let field = if self.field.is_empty() {
            section.to_owned()
        } else {
            format!("{section}.{}", self.field)
        };
        (field, self.message.to_owned())
    }
}

pub(crate) fn section_err<T>(
    field: impl Into<String>,
    message: &'static str,
) -> Result<T, SectionError> {
    Err(SectionError {
        field: field.into(),
        message,
    })
}

/// The policy's `inject: {"aws_sigv4": {...}}` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigV4Config {
    pub scope: Scope,
    /// `"unsigned_payload": true`: send `UNSIGNED-PAYLOAD` instead of the body's hash.
    pub unsigned_payload: bool,
}

impl SigV4Config {
    /// `{"region": "eu-west-1", "service": "s3", "unsigned_payload"?: bool}`; other
    /// members are refused.
    pub fn from_policy(v: &serde_json::Value) -> Result<SigV4Config, SectionError> {
        let Some(map) = v.as_object() else {
            return section_err("", "must be an object {\"region\": ..., \"service\": ...}");
        };
        if let Some(k) = map
            .keys()
            .find(|k| !["region", "service", "unsigned_payload"].contains(&k.as_str()))
        {
            return section_err(
                k.as_str(),
                "is not a member (region, service, unsigned_payload)",
            );
        }
        let region = match map.get("region") {
            Some(serde_json::Value::String(r)) => r,
            _ => return section_err("region", "must be a string such as \"eu-west-1\""),
        };
        let service = match map.get("service") {
            Some(serde_json::Value::String(s)) => s,
            _ => return section_err("service", "must be a string such as \"s3\""),
        };
        let unsigned_payload = match map.get("unsigned_payload") {
            None => false,
            Some(serde_json::Value::Bool(b)) => *b,
            Some(_) => return section_err("unsigned_payload", "must be true or false"),
        };
        let scope = match Scope::new(region, service) {
            Ok(s) => s,
            Err(SigV4Error::BadRegion) => {
                return section_err("region", "must be 1-64 of [a-z0-9-]")
            }
            Err(_) => return section_err("service", "must be 1-64 of [a-z0-9-]"),
        };
        Ok(SigV4Config {
            scope,
            unsigned_payload,
        })
    }

    /// For `sp check`: the scope and the payload rule.
    pub fn describe(&self) -> String {
        format!(
            "aws_sigv4 region {} service {}{}",
            self.scope.region,
            self.scope.service,
            if self.unsigned_payload {
                ", UNSIGNED-PAYLOAD"
            } else {
                ", body hashed"
            }
        )
    }

    /// The payload to sign for `body` under this section.
    pub fn payload<'a>(&self, body: &'a [u8]) -> Payload<'a> {
        if self.unsigned_payload {
            Payload::Unsigned
        } else {
            Payload::Hash(body)
        }
    }
}

