#!/usr/bin/env python3
"""A loopback Streamable HTTP MCP server (stdlib only) for src/upstream/tests.rs.

Usage: http_upstream.py MODE SECRET
Prints the port it listens on (127.0.0.1) as its first line, then serves until killed.

Every request must carry `Authorization: Bearer SECRET` (else 401). `initialize` is
answered with a new `Mcp-Session-Id`; every later POST must carry it and the
`MCP-Protocol-Version` the handshake settled on (else 400). Notifications and responses
from the client get 202. One tool, "act", answers with what it got.
Modes:
  json          every answer is one application/json body
  sse           tools/call is answered with a text/event-stream: a ping request to the
                client, a progress notification, then the answer
  unauthorized  every POST gets 401
  oversize      tools/call is answered with a 100000-byte JSON body
  sse-endless   tools/call is answered in a text/event-stream that goes on after the
                answer with a notification every 5 ms, until the client leaves
"""
import json
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE, SECRET = sys.argv[1], sys.argv[2]
sessions = {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=None, kind="application/json", headers=()):
        data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_DELETE(self):
        sessions.pop(self.headers.get("Mcp-Session-Id"), None)
        self.reply(200)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if MODE == "unauthorized" or self.headers.get("Authorization") != "Bearer " + SECRET:
            return self.reply(401, {"error": "unauthorized"})
        msg = json.loads(body)
        method, rid = msg.get("method"), msg.get("id")
        if method == "initialize":
            sid = uuid.uuid4().hex
            sessions[sid] = msg["params"]["protocolVersion"]
            result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "http-upstream", "version": "1"}}
            return self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": result}, headers=[("Mcp-Session-Id", sid)])
        sid = self.headers.get("Mcp-Session-Id")
        if sid not in sessions or self.headers.get("MCP-Protocol-Version") != sessions[sid]:
            return self.reply(400, {"error": "session or protocol version missing"})
        if rid is None or method is None:
            return self.reply(202)
        if method == "tools/list":
            tools = [{"name": "act", "inputSchema": {"type": "object"}}]
            return self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        if method == "tools/call":
            got = {"tool": msg["params"]["name"], "arguments": msg["params"].get("arguments"), "session": True}
            answer = {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": json.dumps(got, sort_keys=True)}]}}
            if MODE == "oversize":
                answer["result"]["content"][0]["text"] = "x" * 100000
            if MODE == "sse-endless":
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    self.wfile.write(f"data: {json.dumps(answer)}\n\n".encode())
                    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "more"}}
                    while True:
                        self.wfile.write(f"data: {json.dumps(note)}\n\n".encode())
                        self.wfile.flush()
                        time.sleep(0.005)
                except (BrokenPipeError, ConnectionResetError):
                    return
            if MODE == "sse":
                token = msg["params"].get("_meta", {}).get("progressToken")
                events = [
                    {"jsonrpc": "2.0", "id": "srv-1", "method": "ping"},
                    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1, "total": 1}},
                    answer,
                ]
                stream = "".join(f"event: message\nid: {i}\ndata: {json.dumps(e)}\n\n" for i, e in enumerate(events))
                return self.reply(200, stream.encode(), kind="text/event-stream")
            return self.reply(200, answer)
        return self.reply(200, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}})


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client that leaves mid-stream is expected (sse-endless)


server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
