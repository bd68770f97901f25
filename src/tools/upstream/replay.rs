//! An upstream whose output is given bytes: the fuzz target `upstream_wire` (and its
//! seeds) drive the client state machine (`client.rs`) with them through the same frame
//! and JSON stages as the stdio transport, then the result checks (`wire.rs`) and the
//! listing's names (`names.rs`). What sp writes is discarded; an upstream that would
//! wait for more is at its end.
//!
//! What must hold for any bytes: no panic; a listing only of exposed names that fit
//! the hosts' alphabet and length and map back to their tools; an accepted call result
//! whose content items are of the five MCP kinds.

use std::io::BufRead;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::client::Client;
use super::names::{self, NameTable};
use super::transport::{Recv, Transport, TransportError};
use super::wire;
use crate::gate::exec::Cancel;
use crate::mcp::frame::{FrameReader, Read};

/// The longest line the replayed upstream may write (as `max_output_bytes` would cap it).
const MAX_LINE: usize = 64 * 1024;

struct Replay {
    reader: FrameReader<Box<dyn BufRead + Send>>,
}

impl Transport for Replay {
    fn send(&mut self, _: &Value, _: Instant, _: &Cancel) -> Result<(), TransportError> {
        Ok(())
    }

    fn recv(&mut self, _: Instant, _: &Cancel) -> Result<Recv, TransportError> {
        match self.reader.read() {
            Read::Frame(Ok(frame)) => crate::json::parse_limited(&frame.text, 2 * MAX_LINE).map(Recv::Message).map_err(TransportError::Json),
            Read::Frame(Err(e)) => Err(TransportError::Frame(e)),
            Read::Eof | Read::Parked => Err(TransportError::Closed { status: None }),
        }
    }

    fn close(&mut self) {}
}

/// Runs the handshake, a listing and a call against `output` (module docs), checking
/// what must hold. Answers are matched by id: the client numbers its requests 1, 2, ...
pub fn replay(output: &[u8]) {
    let input: Box<dyn BufRead + Send> = Box::new(std::io::Cursor::new(output.to_vec()));
    let transport = Replay { reader: FrameReader::new(input, MAX_LINE) };
    let cancel = Cancel::new();
    let long = Duration::from_secs(3600);
    let Ok(mut client) = Client::initialize("fuzz", transport, long, &cancel) else { return };
    if let Ok(page) = client.request("tools/list", json!({}), long, &cancel, &mut |_| {}) {
        let Ok((tools, _next)) = wire::tools_page(page) else { return };
        let defs: Vec<wire::ToolDef> = tools.into_iter().enumerate().filter_map(|(i, t)| wire::tool(t, &format!("tools[{i}]")).ok()).collect();
        if let Ok(table) = NameTable::build("fuzz", defs.iter().map(|d| d.name.as_str())) {
            for d in &defs {
                let exposed = names::exposed_name("fuzz", &d.name);
                assert!(exposed.len() <= names::MAX_EXPOSED_LEN, "{exposed}");
                assert!(exposed.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'), "{exposed}");
                assert_eq!(table.tool(&exposed), Some(d.name.as_str()));
                assert_eq!(names::upstream_of(&exposed), Some("fuzz"));
            }
        }
    }
    let mut last = f64::NEG_INFINITY;
    let answer = client.call_tool("act", serde_json::Map::new(), long, &cancel, &mut |note| {
        assert!(note.progress > last, "progress must increase");
        last = note.progress;
    });
    if let Ok(result) = answer
        && let Ok(r) = wire::call_result(result)
    {
        for item in &r.content {
            assert!(matches!(item["type"].as_str(), Some("text" | "image" | "audio" | "resource" | "resource_link")), "{item}");
        }
    }
    let _ = client.poll();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A well-behaved transcript goes all the way; every prefix of it (a cut line
    /// included) and a few hostile ones end cleanly.
    #[test]
    fn replays_end_cleanly_on_every_prefix() {
        let good = concat!(
            r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"f","version":"1"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a.b","inputSchema":{"type":"object"}},{"name":"a-b","inputSchema":{"type":"object"}}]}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":3,"progress":1}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"x"}],"isError":false}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
            "\n",
        );
        for cut in 0..=good.len() {
            replay(&good.as_bytes()[..cut]);
        }
        for hostile in ["\u{0}\n", "{\"a\":1,\"a\":2}\n", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n", "\r\n\n"]
        {
            replay(hostile.as_bytes());
        }
    }
}
