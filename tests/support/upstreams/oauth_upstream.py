#!/usr/bin/env python3
"""A loopback OAuth authorization server and Streamable HTTP MCP server in one (stdlib
only) for tests/it/upstream_oauth.rs (issue 33 section 2).

Usage: oauth_upstream.py
Prints the port it listens on (127.0.0.1) as its first line, then serves until killed.
Base URL B = http://127.0.0.1:PORT; the MCP endpoint is B/mcp, the issuer is B.

MCP (POST /mcp): needs `Authorization: Bearer T` with T a live access token, else 401
with `WWW-Authenticate: Bearer resource_metadata="B/.well-known/oauth-protected-resource/mcp"`.
One tool, "whoami": answers "calls N" and, as a hostile server would, the token it got.
Discovery: B/.well-known/oauth-protected-resource/mcp (RFC 9728) and
B/.well-known/oauth-authorization-server (RFC 8414, S256 only).
GET /authorize: checks client_id, response_type, S256, resource, then 302 to
redirect_uri?code=C&state=S. POST /token: authorization_code (code once, redirect_uri,
client_id, resource, and SHA-256(code_verifier) == code_challenge, else invalid_grant)
or refresh_token (the live one only: rotated, the old one dies; else invalid_grant).
POST /register (RFC 7591, dynamic client registration, advertised as the metadata's
registration_endpoint): a new client id "dyn-HEX", accepted by /authorize and /token
from then on, answered 201 with the redirect_uris sent; each request is recorded.
Control: POST /control {"expires_in": N, "revoke_access": true, "revoke_refresh": true,
"register": "malformed" | "oversized" | "confidential" | "ok", "registration_endpoint":
URL (advertised instead; null: none advertised)};
GET /state: counters {"token": [grant types], "pkce_ok": n, "pkce_bad": n, "mcp_401": n,
"refresh_ok": n, "registered": n, "registrations": [request bodies]}.
"""
import base64
import hashlib
import json
import secrets
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CLIENT_ID = "sp-test-client"
lock = threading.Lock()
S = {"expires_in": 3600, "access": set(), "refresh": set(), "codes": {}, "calls": 0,
     "token": [], "pkce_ok": 0, "pkce_bad": 0, "mcp_401": 0, "refresh_ok": 0,
     "clients": {CLIENT_ID}, "register": "ok", "registered": 0, "registrations": [], "registration_endpoint": ""}
BASE = ""


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=None, headers=()):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def raw(self, status, data):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def register(self, body):
        with lock:
            S["registered"] += 1
            try:
                req = json.loads(body)
            except ValueError:
                req = None
            S["registrations"].append(req)
            mode = S["register"]
            if mode == "malformed":
                return self.raw(201, b'{"client_id": "dyn-broken", ')
            if mode == "oversized":
                return self.raw(201, json.dumps({"client_id": "dyn-big", "pad": "x" * 70000}).encode())
            if mode == "confidential":
                return self.reply(201, {"client_id": "dyn-conf", "client_secret": "sec-" + secrets.token_hex(16),
                                        "token_endpoint_auth_method": "client_secret_basic"})
            cid = "dyn-" + secrets.token_hex(8)
            S["clients"].add(cid)
            return self.reply(201, {"client_id": cid, "redirect_uris": (req or {}).get("redirect_uris"),
                                    "token_endpoint_auth_method": "none", "client_id_issued_at": 0})

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        if u.path == "/.well-known/oauth-protected-resource/mcp":
            return self.reply(200, {"resource": BASE + "/mcp", "authorization_servers": [BASE], "scopes_supported": ["mcp"]})
        if u.path == "/.well-known/oauth-authorization-server":
            md = {"issuer": BASE, "authorization_endpoint": BASE + "/authorize", "token_endpoint": BASE + "/token",
                  "code_challenge_methods_supported": ["S256"], "response_types_supported": ["code"]}
            with lock:
                reg = S["registration_endpoint"]
            if reg is not None:
                md["registration_endpoint"] = reg or BASE + "/register"
            return self.reply(200, md)
        if u.path == "/authorize":
            ok = (q.get("client_id") in S["clients"] and q.get("response_type") == "code" and q.get("code_challenge_method") == "S256"
                  and q.get("resource") == BASE + "/mcp" and q.get("code_challenge") and q.get("state") and q.get("redirect_uri"))
            if not ok:
                return self.reply(400, {"error": "invalid_request", "got": q})
            code = secrets.token_urlsafe(16)
            with lock:
                S["codes"][code] = q
            loc = q["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": q["state"]})
            return self.reply(302, headers=[("Location", loc)])
        if u.path == "/state":
            with lock:
                keys = ("token", "pkce_ok", "pkce_bad", "mcp_401", "refresh_ok", "calls", "registered", "registrations")
                return self.reply(200, {k: S[k] for k in keys})
        return self.reply(404, {"error": "not found"})

    def issue(self):
        at, rt = "at-" + secrets.token_urlsafe(24), "rt-" + secrets.token_urlsafe(24)
        S["access"].add(at)
        S["refresh"].add(rt)
        return {"access_token": at, "token_type": "Bearer", "expires_in": S["expires_in"], "refresh_token": rt}

    def token(self, form):
        grant = form.get("grant_type")
        with lock:
            S["token"].append(grant)
            if form.get("client_id") not in S["clients"] or form.get("resource") != BASE + "/mcp":
                return self.reply(400, {"error": "invalid_client"})
            if grant == "authorization_code":
                req = S["codes"].pop(form.get("code"), None)
                if req is None or req["redirect_uri"] != form.get("redirect_uri"):
                    return self.reply(400, {"error": "invalid_grant"})
                want = b64url(hashlib.sha256(form.get("code_verifier", "").encode()).digest())
                if want != req["code_challenge"]:
                    S["pkce_bad"] += 1
                    return self.reply(400, {"error": "invalid_grant", "error_description": "PKCE verifier mismatch"})
                S["pkce_ok"] += 1
                return self.reply(200, self.issue())
            if grant == "refresh_token":
                rt = form.get("refresh_token")
                if rt not in S["refresh"]:
                    return self.reply(400, {"error": "invalid_grant", "error_description": "refresh token " + str(rt) + " is dead"})
                S["refresh"].discard(rt)
                S["refresh_ok"] += 1
                return self.reply(200, self.issue())
            return self.reply(400, {"error": "unsupported_grant_type"})

    def do_DELETE(self):
        return self.reply(200)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        u = urllib.parse.urlparse(self.path)
        if u.path == "/token":
            return self.token(dict(urllib.parse.parse_qsl(body.decode())))
        if u.path == "/register":
            return self.register(body)
        if u.path == "/control":
            c = json.loads(body)
            with lock:
                if "register" in c:
                    S["register"] = c["register"]
                if "registration_endpoint" in c:
                    S["registration_endpoint"] = c["registration_endpoint"]
                if "expires_in" in c:
                    S["expires_in"] = c["expires_in"]
                if c.get("revoke_access"):
                    S["access"].clear()
                if c.get("revoke_refresh"):
                    S["refresh"].clear()
            return self.reply(200, {})
        if u.path != "/mcp":
            return self.reply(404, {"error": "not found"})
        auth = self.headers.get("Authorization", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        with lock:
            live = token in S["access"]
            if not live:
                S["mcp_401"] += 1
        if not live:
            md = BASE + "/.well-known/oauth-protected-resource/mcp"
            return self.reply(401, {"error": "invalid_token"}, headers=[("WWW-Authenticate", 'Bearer error="invalid_token", resource_metadata="%s"' % md)])
        msg = json.loads(body)
        method, rid = msg.get("method"), msg.get("id")
        if rid is None or method is None:
            return self.reply(202)
        if method == "initialize":
            result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "oauth-upstream", "version": "1"}}
            return self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": result})
        if method == "tools/list":
            tools = [{"name": "whoami", "inputSchema": {"type": "object"}}]
            return self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        if method == "tools/call":
            with lock:
                S["calls"] += 1
                n = S["calls"]
            text = "calls %d; you sent %s" % (n, token)
            return self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
        return self.reply(200, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}})


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # sp closes its kept connections when it exits: a reset is not a failure.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def main():
    global BASE
    server = Server(("127.0.0.1", 0), Handler)
    BASE = "http://127.0.0.1:%d" % server.server_address[1]
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
