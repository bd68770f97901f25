#!/usr/bin/env python3
"""A small MCP stdio server (stdlib only) that speaks only the stateless 2026-07-28
revision (no initialize), for tests/it/upstream_modern.rs (issue 33, section 4).

Usage: modern.py NAME

Env: RECORD, a file every line it reads is appended to; SECRET, echoed by `echo`;
LEGACY set: it is a handshake (2025-11-25) server instead, which refuses
server/discover like any method before initialize.

Every request must carry `_meta` with io.modelcontextprotocol/protocolVersion
"2026-07-28" and io.modelcontextprotocol/clientCapabilities (else -32602), as the
revision requires; `initialize` is -32601.

Tools:
  echo    "echo from NAME, token=SECRET"
  ask     MRTR: answered `input_required` with one form elicitation (field `who`) and
          requestState "st-1"; the retry must carry inputResponses.q.action "accept",
          content.who, and requestState "st-1": then "hello WHO"
  sample  answered `input_required` with a sampling request
"""
import json
import os
import sys

NAME = sys.argv[1] if len(sys.argv) > 1 else "fixture"
SECRET = os.environ.get("SECRET", "")
RECORD = os.environ.get("RECORD")
LEGACY = bool(os.environ.get("LEGACY"))
VERSION = "2026-07-28"
SCHEMA = {"type": "object", "properties": {}}


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def done(result):
    if not LEGACY:
        result["resultType"] = "complete"
        result.setdefault("_meta", {})["io.modelcontextprotocol/serverInfo"] = {"name": "modern", "version": "1"}
    return result


def text(t):
    return done({"content": [{"type": "text", "text": t}], "isError": False})


def answer(method, params):
    meta = params.get("_meta") or {}
    if LEGACY:
        if method == "initialize":
            return {"protocolVersion": "2025-11-25", "serverInfo": {"name": "legacy", "version": "1"}, "capabilities": {"tools": {}}}
        if method == "server/discover":
            return ("error", -32601, "Method not found")
    else:
        if method == "initialize":
            return ("error", -32601, "initialize does not exist in " + VERSION)
        if meta.get("io.modelcontextprotocol/protocolVersion") != VERSION or not isinstance(meta.get("io.modelcontextprotocol/clientCapabilities"), dict):
            return ("error", -32602, "missing _meta protocolVersion/clientCapabilities")
    if method == "server/discover":
        return done({"supportedVersions": [VERSION], "capabilities": {"tools": {"listChanged": True}}, "ttlMs": 1000, "cacheScope": "public"})
    if method == "tools/list":
        return done({"tools": [{"name": n, "inputSchema": SCHEMA} for n in ("echo", "ask", "sample")], "ttlMs": 1000})
    if method == "tools/call":
        name = params.get("name")
        if name == "echo":
            return text("echo from %s, token=%s" % (NAME, SECRET))
        if name == "ask":
            responses = params.get("inputResponses")
            if responses is None:
                return {"resultType": "input_required", "requestState": "st-1",
                        "inputRequests": {"q": {"method": "elicitation/create", "params": {
                            "mode": "form", "message": "who are you?",
                            "requestedSchema": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}}}}}
            q = responses.get("q", {})
            if params.get("requestState") != "st-1" or q.get("action") != "accept":
                return text("bad retry: " + json.dumps(params))
            return text("hello " + q["content"]["who"])
        if name == "sample":
            return {"resultType": "input_required", "inputRequests": {"s": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 1}}}}
        return ("error", -32602, "no tool " + str(name))
    if method == "ping" and LEGACY:
        return {}
    return ("error", -32601, "no " + method)


for line in sys.stdin:
    if RECORD:
        with open(RECORD, "a") as f:
            f.write(line)
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    result = answer(msg["method"], msg.get("params") or {})
    if isinstance(result, tuple):
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": result[1], "message": result[2]}})
    else:
        send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
