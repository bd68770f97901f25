//! What the `cargo fuzz` targets in `fuzz/` use (issue #12), in one place: when modules
//! move, only this file changes. Hidden from the docs; not an API.
#![doc(hidden)]

pub use crate::authorize::{authorize, Action, Authorized};
pub use crate::http::authorize::HttpAction;
pub use crate::http::result::HttpOutcome;
pub use crate::ssh::result::{SshError, SshOutcome};
pub use crate::json::parse as parse_json;
pub use crate::exec::{Cancel, ExecError, Executor, Progress};
pub use crate::out::ProtocolWriter;
pub use crate::policy::{Policy, PolicyError};
pub use crate::redact::{min_run, Redactor, MIN_CORE_CHARS, MIN_PART_BYTES, MIN_RUN_BYTES};
pub use crate::secret::Vault;
pub use crate::server::{Exit, Options, Server};
pub use crate::policy::commands::{check as check_command, CommandPattern, Mismatch};
pub use crate::ssh::known_hosts::{blob_type, lookup_name, KnownHosts, Verdict};
pub use crate::ssh::authorize::SshAction;
pub use crate::http::args::HttpRequest;
pub use crate::tools::{call_request, ToolCall};
