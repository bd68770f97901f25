#!/usr/bin/env python3
"""Approval through MCP elicitation with the official MCP Python SDK as the client.

    python tests/interop/python_elicit.py target/release/sp

Run by `make interop` inside the venv of requirements.txt. A loopback API, a policy
whose credential is approve-flagged with `"approval": {"via": ["elicitation"]}`, and
the SDK configured to answer elicitations (`elicitation_callback`):

- `ClientSession` (the handshake: sp sends `elicitation/create` while the call waits):
  an approved call runs once with the credential, a declined one is SP_NOT_APPROVED
  and reaches nothing, a dismissed one (cancel) too; the form names the tool, the
  target and the credential;
- `mcp.Client` pinned to 2026-07-28 (sp answers `input_required` and the SDK retries
  with `inputResponses` and `requestState` by itself): approve and decline the same way.

One line per check, then `N passed, M failed`; non-zero exit when anything failed.
Every wait is bounded by a watchdog.
"""

from __future__ import annotations

import http.server
import json
import os
import sys
import tempfile
import threading
import traceback
from typing import Any

import anyio
import mcp
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REQUEST_TIMEOUT_S = 15
WATCHDOG_S = 90
STATELESS = "2026-07-28"

passed = 0
failed = 0


def check(name: str, ok: bool, detail: str = "") -> None:
    global passed, failed
    if ok:
        passed += 1
        print(f"ok    {name}", flush=True)
    else:
        failed += 1
        print(f"FAIL  {name}" + (f": {detail}" if detail else ""), flush=True)


class Upstream(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.seen: list[str] = []


class Handler(http.server.BaseHTTPRequestHandler):
    server: Upstream

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self.server.seen.append(self.path)
        body = b'{"ok":true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def code(result: Any) -> Any:
    sc = getattr(result, "structured_content", None) or {}
    err = sc.get("error") if isinstance(sc, dict) else None
    return err.get("code") if isinstance(err, dict) else None


class Answers:
    """The user, scripted: the next answer to give, and every form shown."""

    def __init__(self) -> None:
        self.next = "accept"
        self.forms: list[Any] = []

    async def __call__(self, context: Any, params: Any) -> Any:
        self.forms.append(params)
        if self.next == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action=self.next)


async def handshake(params: StdioServerParameters, errlog: Any, up: Upstream, base: str) -> None:
    user = Answers()
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=REQUEST_TIMEOUT_S, elicitation_callback=user) as s:
            await s.initialize()
            before = len(up.seen)
            ok = await s.call_tool("http_request", {"method": "GET", "url": f"{base}/v1/approved"})
            form = user.forms[-1] if user.forms else None
            message = getattr(form, "message", "") or ""
            check("ClientSession: the form names the tool, target and credential",
                  "tool: http_request" in message and "/v1/approved" in message and "for: interop" in message, repr(message))
            check("ClientSession: approved through elicitation, the call ran once",
                  ok.is_error is False and up.seen[before:] == ["/v1/approved"], f"{ok!r} seen {up.seen[before:]}")
            for answer in ("decline", "cancel"):
                user.next = answer
                before = len(up.seen)
                no = await s.call_tool("http_request", {"method": "GET", "url": f"{base}/v1/{answer}"})
                check(f"ClientSession: {answer} refuses with SP_NOT_APPROVED, nothing sent",
                      no.is_error is True and code(no) == "SP_NOT_APPROVED" and len(up.seen) == before, repr(no))


async def stateless(params: StdioServerParameters, errlog: Any, up: Upstream, base: str) -> None:
    if not hasattr(mcp, "Client"):
        print("skip  mcp.Client: this SDK has no high-level Client", flush=True)
        return
    user = Answers()
    async with mcp.Client(stdio_client(params, errlog=errlog), mode=STATELESS, read_timeout_seconds=REQUEST_TIMEOUT_S,
                          elicitation_callback=user) as client:
        before = len(up.seen)
        ok = await client.call_tool("http_request", {"method": "GET", "url": f"{base}/v1/mrtr"})
        check("mcp.Client (2026-07-28): input_required answered by the SDK, the retry ran once",
              client.protocol_version == STATELESS and ok.is_error is False and up.seen[before:] == ["/v1/mrtr"]
              and len(user.forms) == 1, f"{ok!r} seen {up.seen[before:]} forms {len(user.forms)}")
        user.next = "decline"
        before = len(up.seen)
        no = await client.call_tool("http_request", {"method": "GET", "url": f"{base}/v1/mrtr-no"})
        check("mcp.Client (2026-07-28): a decline refuses with SP_NOT_APPROVED, nothing sent",
              no.is_error is True and code(no) == "SP_NOT_APPROVED" and len(up.seen) == before, repr(no))


def main() -> int:
    sp = os.path.abspath(sys.argv[1]) if len(sys.argv) == 2 else ""
    if not (os.path.isfile(sp) and os.access(sp, os.X_OK)):
        print("usage: python_elicit.py PATH-TO-SP", file=sys.stderr)
        return 2

    def watchdog() -> None:
        print(f"FAIL  watchdog: not finished within {WATCHDOG_S} s", flush=True)
        print(f"{passed} passed, {failed + 1} failed", flush=True)
        os._exit(1)

    timer = threading.Timer(WATCHDOG_S, watchdog)
    timer.daemon = True
    timer.start()
    up = Upstream()
    threading.Thread(target=up.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    base = f"http://127.0.0.1:{up.server_address[1]}"
    host = f"127.0.0.1:{up.server_address[1]}"
    with tempfile.TemporaryDirectory(prefix="sp-elicit-") as tmp:
        token = os.path.join(tmp, "token")
        fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("sp-interop-elicit-" + os.urandom(8).hex() + "\n")
        policy = {
            "credentials": {"interop": {"source": {"file": token}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"], "approve": True}},
            "http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/v1/*"]}]},
            "approval": {"via": ["elicitation"], "timeout_s": 20},
            "audit": {"path": os.path.join(tmp, "audit.jsonl")},
        }
        policy_path = os.path.join(tmp, "policy.json")
        with open(policy_path, "w") as f:
            json.dump(policy, f)
        params = StdioServerParameters(command=sp, args=["mcp", "--config", policy_path], cwd=tmp)
        stderr_path = os.path.join(tmp, "sp.stderr")

        async def run_all() -> None:
            with open(stderr_path, "w") as errlog:
                await handshake(params, errlog, up, base)
                await stateless(params, errlog, up, base)

        try:
            anyio.run(run_all)
        except BaseException as e:  # noqa: BLE001 - report whatever stopped the session
            if isinstance(e, KeyboardInterrupt):
                raise
            check("the SDK sessions ran to the end", False, "".join(traceback.format_exception_only(type(e), e)).strip())
            traceback.print_exception(e, file=sys.stderr)
        if failed:
            with open(stderr_path, errors="replace") as f:
                print("--- sp stderr:\n" + f.read(), file=sys.stderr)
        with open(os.path.join(tmp, "audit.jsonl")) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        channels = {r.get("channel") for r in rows if r.get("kind") == "approval"}
        check("the journal's approval rows name the elicitation channel", channels == {"elicitation"}, repr(channels))
    up.shutdown()
    timer.cancel()
    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
