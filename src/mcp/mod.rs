//! The wire: MCP over stdio, from bytes to typed messages and back. One line is one
//! frame (`frame`), one JSON value (`crate::json`, the strict parser the policy and the
//! journal share), one JSON-RPC message (`jsonrpc`), checked
//! against the MCP lifecycle (`session`); while a call runs, the control thread reads
//! stdin (`control`); `out` is the only writer of the protocol stream and `model` the
//! typed answers it writes.

pub(crate) mod control;
pub(crate) mod frame;
pub(crate) mod jsonrpc;
pub(crate) mod model;
pub(crate) mod out;
pub(crate) mod session;
