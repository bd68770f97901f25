//! What the `cargo fuzz` targets in `fuzz/` use, in one place: when modules
//! move, only this file changes. Hidden from the docs; not an API.
#![doc(hidden)]

pub use crate::gate::authorize::Authorized;
pub use crate::tools::{authorize, Action};
pub use crate::tools::http::authorize::HttpAction;
pub use crate::tools::http::result::HttpOutcome;
pub use crate::tools::ssh::result::{SshError, SshOutcome};
pub use crate::json::parse as parse_json;
pub use crate::gate::exec::{Cancel, ExecError, Progress, RunContext};
pub use crate::tools::Executor;
pub use crate::mcp::out::ProtocolWriter;
pub use crate::policy::{Policy, PolicyError};
pub use crate::gate::redact::{min_run, Redactor, MIN_CORE_CHARS, MIN_PART_BYTES, MIN_RUN_BYTES};
pub use crate::gate::vault::Vault;
pub use crate::server::{Exit, Options, Server};
pub use crate::policy::commands::{check as check_command, CommandPattern, Mismatch};
pub use crate::tools::ssh::known_hosts::{blob_type, lookup_name, KnownHosts, Verdict};
pub use crate::tools::ssh::authorize::SshAction;
pub use crate::tools::http::args::HttpRequest;
pub use crate::tools::{call_request, ToolCall};
pub use crate::escape::{escape, host as shown_host, is_unsafe, json_safe, shown};
pub use crate::tools::http::coding::{inspect as inspect_compressed, Finder, Withhold, MAX_LAYERS};
pub use crate::tools::upstream::replay::replay as upstream_replay;
