//! bytes -> what an upstream MCP server writes on its stdout, as sp's upstream client
//! reads it (`tools/upstream/replay.rs`): frames, JSON, JSON-RPC, the handshake, a
//! listing (tool definitions, exposed names and the table back), a call with progress
//! notes and its result. Nothing may panic; exposed names fit the hosts' alphabet and
//! length and map back to their tools; progress passed on increases; an accepted result
//! holds only MCP's content kinds.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sallyport::fuzzing::upstream_replay;

fuzz_target!(|data: &[u8]| {
    upstream_replay(data);
});
