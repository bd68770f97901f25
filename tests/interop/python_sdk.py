#!/usr/bin/env python3
"""Smoke test of `sp mcp` with the official MCP Python SDK as the client.

    python tests/interop/python_sdk.py target/release/sp

Run by `make interop` inside a venv holding the SDK pinned in requirements.txt.
It starts a recording HTTP server on 127.0.0.1 (an ephemeral port), writes a policy
and an owner-only secret file into a temporary directory, and lets the SDK start
`sp mcp --config POLICY` exactly as an MCP client would: configuration comes only from
the arguments, and the environment is the SDK's filtered default (HOME, PATH, ...).

Through `mcp.ClientSession` over `mcp.client.stdio.stdio_client` it checks the
handshake, the tool list (names, schemas, and no SDK warning), an authorized
`http_request` (the credential reaches the upstream and never the result), refusals
(SP_DENIED, SP_BAD_ARGUMENTS) that reach nothing, and `sp_inventory`; then the SDK's
high-level `mcp.Client` in its default mode, which probes `server/discover` and settles
on the stateless 2026-07-28 revision, and pinned to that revision (`mode="2026-07-28"`,
no handshake at all). One line per check, then `N passed, M failed`; the exit
status is non-zero when anything failed. Every wait is bounded: a watchdog ends the
process after WATCHDOG_S seconds whatever the server does.
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import sys
import tempfile
import threading
import time
import traceback
import warnings
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

try:  # SDK 2.x
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS as ACCEPTED_VERSIONS
except ImportError:  # SDK 1.x
    from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS as ACCEPTED_VERSIONS

REQUEST_TIMEOUT_S = 15  # one JSON-RPC round trip
SESSION_TIMEOUT_S = 45  # the whole asyncio part, spawn and shutdown included
WATCHDOG_S = 60  # the whole script, whatever happens

SERVER_NAME = "sallyport"
STATELESS = "2026-07-28"  # the stateless revision (issue #10)
CREDENTIAL = "interop"


# ---------------------------------------------------------------- bookkeeping

class Report:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0
        self.lock = threading.Lock()

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        with self.lock:
            if ok:
                self.passed += 1
                print(f"ok    {name}", flush=True)
            else:
                self.failed += 1
                print(f"FAIL  {name}" + (f": {detail}" if detail else ""), flush=True)
        return ok

    def summary(self) -> str:
        return f"{self.passed} passed, {self.failed} failed"


REPORT = Report()


class SdkLogCapture(logging.Handler):
    """Every WARNING or worse that the SDK (or anything it uses) logs."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def lines(self, since: int = 0) -> list[str]:
        return [f"{r.name} {r.levelname}: {r.getMessage()}" for r in self.records[since:]]


# ---------------------------------------------------------------- the upstream

class Recorded:
    def __init__(self, method: str, path: str, headers: dict[str, str]) -> None:
        self.method = method
        self.path = path
        self.headers = headers  # lowercase names


class Upstream(http.server.ThreadingHTTPServer):
    """A loopback API that records every request and echoes its Authorization header
    back in a response header and in the body, so the result scrubbing is exercised."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), UpstreamHandler)
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()

    @property
    def port(self) -> int:
        return self.server_address[1]

    def seen(self) -> list[Recorded]:
        with self.lock:
            return list(self.requests)


class UpstreamHandler(http.server.BaseHTTPRequestHandler):
    server: Upstream
    timeout = 10

    def _answer(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        with self.server.lock:
            self.server.requests.append(Recorded(self.command, self.path, headers))
        length = int(headers.get("content-length", "0") or 0)
        if length:
            self.rfile.read(min(length, 1 << 20))
        auth = headers.get("authorization", "")
        body = json.dumps({"ok": True, "method": self.command, "path": self.path, "echo_authorization": auth}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Echo-Authorization", auth)
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


# ---------------------------------------------------------------- a transcript

@asynccontextmanager
async def traced(transport, transcript: list[str]):
    """Sits between the SDK session and its stdio transport and writes down every
    message in both directions (as the SDK serialised or parsed it), for failure reports."""
    async with transport as (read, write):
        to_session, session_reads = anyio.create_memory_object_stream(0)
        session_writes, from_session = anyio.create_memory_object_stream(0)

        def show(item: Any) -> str:
            if isinstance(item, Exception):
                return f"<transport error {item!r}>"
            return item.message.model_dump_json(by_alias=True, exclude_unset=True)

        async def inbound() -> None:
            async with to_session:
                async for item in read:
                    transcript.append("sp -> client  " + show(item))
                    await to_session.send(item)

        async def outbound() -> None:
            async with from_session:
                async for item in from_session:
                    transcript.append("client -> sp  " + show(item))
                    await write.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(inbound)
            tg.start_soon(outbound)
            try:
                yield session_reads, session_writes
            finally:
                tg.cancel_scope.cancel()


# ---------------------------------------------------------------- helpers

def dump(result: Any) -> str:
    return result.model_dump_json(by_alias=True, exclude_none=True)


def structured(result: Any) -> dict[str, Any]:
    sc = getattr(result, "structured_content", None)
    if sc is None:
        sc = getattr(result, "structuredContent", None)
    return sc if isinstance(sc, dict) else {}


def is_error(result: Any) -> bool | None:
    v = getattr(result, "is_error", None)
    return v if v is not None else getattr(result, "isError", None)


def error_code(result: Any) -> Any:
    err = structured(result).get("error")
    return err.get("code") if isinstance(err, dict) else None


def names_credential(value: Any) -> bool:
    """Somewhere in the structured inventory, an object with `"name": CREDENTIAL`."""
    if isinstance(value, dict):
        return value.get("name") == CREDENTIAL or any(names_credential(v) for v in value.values())
    if isinstance(value, list):
        return any(names_credential(v) for v in value)
    return False


def short(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


# ---------------------------------------------------------------- the checks

async def session_checks(params: StdioServerParameters, errlog, up: Upstream, secret: str,
                         capture: SdkLogCapture, transcript: list[str]) -> None:
    base = f"http://127.0.0.1:{up.port}"
    async with traced(stdio_client(params, errlog=errlog), transcript) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=REQUEST_TIMEOUT_S) as session:
            init = await session.initialize()
            REPORT.check(
                "initialize: negotiated version accepted by the SDK, server is sallyport",
                init.protocol_version in ACCEPTED_VERSIONS and init.server_info.name == SERVER_NAME,
                f"protocolVersion={init.protocol_version!r} (SDK accepts {list(ACCEPTED_VERSIONS)}), "
                f"serverInfo.name={init.server_info.name!r}",
            )
            REPORT.check(
                "initialize: server declares the tools capability",
                init.capabilities is not None and init.capabilities.tools is not None,
                dump(init.capabilities),
            )

            listed = await session.list_tools()
            tools = {t.name: t for t in listed.tools}
            REPORT.check(
                "tools/list: http_request and sp_inventory listed",
                {"http_request", "sp_inventory"} <= set(tools),
                f"got {sorted(tools)}",
            )
            REPORT.check("tools/list: names and input schemas valid, no SDK warning", *tool_list_problems(listed.tools, capture))

            before = len(up.seen())
            ok = await session.call_tool("http_request", {"method": "GET", "url": f"{base}/v1/items?x=1"})
            seen = up.seen()[before:]
            sc = structured(ok)
            REPORT.check(
                "http_request GET: isError false, status 200",
                is_error(ok) is False and sc.get("status") == 200,
                short(dump(ok)),
            )
            auths = [r.headers.get("authorization") for r in seen]
            REPORT.check(
                "http_request GET: upstream saw exactly one request, with the injected bearer",
                len(seen) == 1 and auths == [f"Bearer {secret}"] and seen[0].method == "GET"
                and seen[0].path == "/v1/items?x=1",
                f"{len(seen)} request(s): "
                + "; ".join(f"{r.method} {r.path} authorization={'<the secret>' if secret in (r.headers.get('authorization') or '') else r.headers.get('authorization')!r}" for r in seen),
            )
            text = dump(ok)
            REPORT.check(
                "http_request GET: the secret appears nowhere in the result (the upstream echoed it)",
                secret not in text and "echo_authorization" in text,
                "the result contains the secret" if secret in text else "the upstream's echo is missing from the result",
            )

            before = len(up.seen())
            denied = await session.call_tool(
                "http_request", {"method": "POST", "url": f"{base}/v1/items", "body": "{}"})
            REPORT.check(
                "http_request POST outside the policy: isError, SP_DENIED, upstream saw nothing",
                is_error(denied) is True and error_code(denied) == "SP_DENIED" and len(up.seen()) == before,
                f"upstream requests +{len(up.seen()) - before}; result {short(dump(denied))}",
            )

            other_port = up.port + 1 if up.port < 65535 else up.port - 1
            denied_port = await session.call_tool(
                "http_request", {"method": "GET", "url": f"http://127.0.0.1:{other_port}/v1/items"})
            REPORT.check(
                "http_request GET to a port the policy does not name: isError, SP_DENIED",
                is_error(denied_port) is True and error_code(denied_port) == "SP_DENIED" and len(up.seen()) == before,
                f"upstream requests +{len(up.seen()) - before}; result {short(dump(denied_port))}",
            )

            smuggle = await session.call_tool(
                "http_request",
                {"method": "GET", "url": f"{base}/v1/items", "headers": {"Authorization": "Bearer agent-chosen"}})
            REPORT.check(
                "http_request with an agent Authorization header: isError, SP_BAD_ARGUMENTS, upstream saw nothing",
                is_error(smuggle) is True and error_code(smuggle) == "SP_BAD_ARGUMENTS" and len(up.seen()) == before,
                f"upstream requests +{len(up.seen()) - before}; result {short(dump(smuggle))}",
            )

            inv = await session.call_tool("sp_inventory", {})
            inv_text = dump(inv)
            REPORT.check(
                "sp_inventory: a result naming the credential, without its secret",
                is_error(inv) is False and names_credential(structured(inv)) and f"127.0.0.1:{up.port}" in inv_text
                and secret not in inv_text,
                short(inv_text),
            )

            pong = await session.send_ping()
            REPORT.check("ping after the tool calls: answered", pong is not None, repr(pong))


def tool_list_problems(tools: list[Any], capture: SdkLogCapture) -> tuple[bool, str]:
    problems: list[str] = []
    try:
        from mcp.shared.tool_name_validation import validate_tool_name
    except ImportError:  # older SDKs: nothing to ask
        validate_tool_name = None
    from jsonschema.validators import validator_for

    for t in tools:
        if validate_tool_name is not None:
            v = validate_tool_name(t.name)
            if not v.is_valid or v.warnings:
                problems.append(f"tool name {t.name!r}: {v.warnings}")
        schema = t.input_schema if hasattr(t, "input_schema") else t.inputSchema
        if not isinstance(schema, dict) or schema.get("type") != "object":
            problems.append(f"{t.name}: inputSchema is not an object schema: {schema!r}")
            continue
        try:
            validator_for(schema).check_schema(schema)
        except Exception as e:  # jsonschema.SchemaError
            problems.append(f"{t.name}: inputSchema is not valid JSON Schema: {e}")
    problems += [f"SDK log: {line}" for line in capture.lines()]
    return (not problems, "; ".join(problems))


async def client_auto_checks(params: StdioServerParameters, errlog, transcript: list[str]) -> None:
    """mcp.Client (SDK 2.x) in its default mode: `server/discover` first; sp answers it
    (issue #10), so the client settles on the stateless 2026-07-28 revision."""
    if not hasattr(mcp, "Client"):
        print("skip  mcp.Client (default mode): this SDK has no high-level Client", flush=True)
        return
    async with mcp.Client(traced(stdio_client(params, errlog=errlog), transcript),
                          read_timeout_seconds=REQUEST_TIMEOUT_S) as client:
        listed = await client.list_tools()
        inv = await client.call_tool("sp_inventory", {})
        REPORT.check(
            "mcp.Client (default mode): server/discover answered, 2026-07-28 chosen, tools listed and called",
            client.protocol_version == STATELESS
            and {"http_request", "sp_inventory"} <= {t.name for t in listed.tools}
            and is_error(inv) is False,
            f"protocol {client.protocol_version!r}, tools {[t.name for t in listed.tools]}, inventory {short(dump(inv))}",
        )


async def client_pinned_checks(params: StdioServerParameters, errlog, up: Upstream, secret: str,
                               transcript: list[str]) -> None:
    """mcp.Client pinned to 2026-07-28 (`mode=`): no handshake at all; every request
    carries its version in `_meta`. An authorized call, a denial, and the secret kept."""
    if not hasattr(mcp, "Client"):
        print("skip  mcp.Client (mode=2026-07-28): this SDK has no high-level Client", flush=True)
        return
    base = f"http://127.0.0.1:{up.port}"
    async with mcp.Client(traced(stdio_client(params, errlog=errlog), transcript), mode=STATELESS,
                          read_timeout_seconds=REQUEST_TIMEOUT_S) as client:
        listed = await client.list_tools()
        before = len(up.seen())
        ok = await client.call_tool("http_request", {"method": "GET", "url": f"{base}/v1/pinned"})
        seen = up.seen()[before:]
        denied = await client.call_tool("http_request", {"method": "DELETE", "url": f"{base}/v1/pinned"})
        REPORT.check(
            "mcp.Client (mode=2026-07-28): tools listed, GET ran once with the credential, DELETE denied",
            client.protocol_version == STATELESS
            and {"http_request", "sp_inventory"} <= {t.name for t in listed.tools}
            and is_error(ok) is False and structured(ok).get("status") == 200
            and len(seen) == 1 and seen[0].headers.get("authorization") == f"Bearer {secret}"
            and is_error(denied) is True and error_code(denied) == "SP_DENIED"
            and len(up.seen()) == before + 1,
            f"protocol {client.protocol_version!r}, upstream +{len(up.seen()) - before}, ok {short(dump(ok))}, "
            f"denied {short(dump(denied))}",
        )
        text = dump(ok) + dump(denied)
        REPORT.check("mcp.Client (mode=2026-07-28): the secret appears nowhere in the results",
                     secret not in text, "the result contains the secret")


async def upstream_checks(params: StdioServerParameters, errlog, secret: str, transcript: list[str]) -> None:
    """An upstream MCP server behind sp (the stdlib fixture misbehave.py in `echo` mode,
    which answers with its SECRET in many spellings, given to it through the policy's
    `env`): its tool is listed as `echo_act` beside sp's own, with listChanged declared;
    a call comes back as the upstream shaped it, scrubbed; a pinned argument with
    another value is SP_DENIED. Through ClientSession (handshake) and, when the SDK has
    it, mcp.Client pinned to 2026-07-28."""
    async with traced(stdio_client(params, errlog=errlog), transcript) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=REQUEST_TIMEOUT_S) as session:
            init = await session.initialize()
            listed = await session.list_tools()
            names = {t.name for t in listed.tools}
            echoed = await session.call_tool("echo_act", {"mode": "loud"})
            denied = await session.call_tool("echo_act", {"mode": "quiet"})
            text = dump(echoed)
            REPORT.check(
                "upstream (ClientSession): listChanged declared, echo_act listed, its answer scrubbed, a pin denies",
                any(getattr(init.capabilities.tools, k, None) for k in ("listChanged", "list_changed"))
                # Only what the policy makes possible: no http.allow rule, no SSH host.
                and {"sp_inventory", "echo_act"} <= names and not names & {"http_request", "http_get", "ssh_exec"}
                and is_error(echoed) is False and "[REDACTED:" in text and secret not in text
                and is_error(denied) is True and error_code(denied) == "SP_DENIED",
                f"tools {sorted(names)}, echoed {short(text)}, denied {short(dump(denied))}",
            )
    if not hasattr(mcp, "Client"):
        print("skip  upstream (mcp.Client, mode=2026-07-28): this SDK has no high-level Client", flush=True)
        return
    async with mcp.Client(traced(stdio_client(params, errlog=errlog), transcript), mode=STATELESS,
                          read_timeout_seconds=REQUEST_TIMEOUT_S) as client:
        listed = await client.list_tools()
        echoed = await client.call_tool("echo_act", {"mode": "loud"})
        text = dump(echoed)
        REPORT.check(
            "upstream (mcp.Client, mode=2026-07-28): echo_act listed and called, its answer scrubbed",
            "echo_act" in {t.name for t in listed.tools} and is_error(echoed) is False and secret not in text,
            f"tools {[t.name for t in listed.tools]}, echoed {short(text)}",
        )


# ---------------------------------------------------------------- main

def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python_sdk.py PATH-TO-SP", file=sys.stderr)
        return 2
    sp = os.path.abspath(sys.argv[1])
    if not (os.path.isfile(sp) and os.access(sp, os.X_OK)):
        print(f"python_sdk.py: {sp} is not an executable file (run `make build` first)", file=sys.stderr)
        return 2

    def watchdog() -> None:
        print(f"FAIL  watchdog: the smoke test did not finish within {WATCHDOG_S} s", flush=True)
        print(f"{REPORT.passed} passed, {REPORT.failed + 1} failed", flush=True)
        os._exit(1)

    timer = threading.Timer(WATCHDOG_S, watchdog)
    timer.daemon = True
    timer.start()

    capture = SdkLogCapture()
    logging.getLogger().addHandler(capture)
    logging.getLogger().setLevel(logging.WARNING)
    warnings.simplefilter("always")
    logging.captureWarnings(True)  # Python warnings (e.g. deprecations) land in the capture too

    version = getattr(mcp, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version
        version = dist_version("mcp")
    print(f"# official MCP Python SDK {version}, server {sp}", flush=True)

    up = Upstream()
    threading.Thread(target=up.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    transcript: list[str] = []
    started = time.monotonic()

    with tempfile.TemporaryDirectory(prefix="sp-interop-") as tmp:
        secret = "sp-interop-secret-" + os.urandom(12).hex()
        secret_path = os.path.join(tmp, "token")
        fd = os.open(secret_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secret + "\n")
        host = f"127.0.0.1:{up.port}"
        policy = {
            "credentials": {
                CREDENTIAL: {
                    "source": {"file": secret_path},
                    "inject": {"bearer": {}},
                    "hosts": [host],
                    "paths": ["/v1/*"],
                }
            },
            "http": {
                "allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/v1/*"]}],
                "timeout_s": 10,
            },
        }
        policy_path = os.path.join(tmp, "policy.json")
        with open(policy_path, "w") as f:
            json.dump(policy, f, indent=2)

        # The same secret, given to an upstream MCP server through `env` (upstream_checks).
        fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "upstreams", "misbehave.py")
        up_policy = {
            "credentials": {CREDENTIAL: dict(policy["credentials"][CREDENTIAL])},
            "upstreams": {"echo": {
                "command": [sys.executable, os.path.abspath(fixture), "echo"],
                # Confined by default: it reads the fixture and its interpreter's prefix.
                "sandbox": {"read": [os.path.abspath(os.path.join(os.path.dirname(fixture), "..", "..", "..")),
                                     sys.prefix, sys.base_prefix]},
                "env": {"SECRET": {"credential": CREDENTIAL}},
                "tools": {"allow": ["*"]},
                "arguments": {"act": {"mode": ["loud"]}},
            }},
        }
        up_policy_path = os.path.join(tmp, "policy-upstream.json")
        with open(up_policy_path, "w") as f:
            json.dump(up_policy, f, indent=2)
        up_params = StdioServerParameters(command=sp, args=["mcp", "--config", up_policy_path], cwd=tmp)

        # env=None: the SDK passes only its filtered default environment, as real clients do.
        params = StdioServerParameters(command=sp, args=["mcp", "--config", policy_path], cwd=tmp)
        stderr_path = os.path.join(tmp, "sp.stderr")

        async def run_all() -> None:
            with open(stderr_path, "w") as errlog:
                with anyio.fail_after(SESSION_TIMEOUT_S):
                    await session_checks(params, errlog, up, secret, capture, transcript)
                    await client_auto_checks(params, errlog, transcript)
                    await client_pinned_checks(params, errlog, up, secret, transcript)
                    await upstream_checks(up_params, errlog, secret, transcript)

        try:
            anyio.run(run_all)
        except BaseException as e:  # noqa: BLE001 - report whatever stopped the session
            if isinstance(e, KeyboardInterrupt):
                raise
            inner = e
            while len(getattr(inner, "exceptions", ())) == 1:  # anyio task groups wrap errors
                inner = inner.exceptions[0]
            REPORT.check("the SDK session ran to the end", False,
                         "".join(traceback.format_exception_only(type(inner), inner)).strip())
            traceback.print_exception(e, file=sys.stderr)

        with open(stderr_path, errors="replace") as f:
            sp_stderr = f.read()
        REPORT.check("sp stderr never shows the secret", secret not in sp_stderr,
                     "the secret is in sp's stderr")
        REPORT.check("no SDK warning or error logged during the whole run", not capture.records,
                     "; ".join(capture.lines()))

        if REPORT.failed:
            print(f"--- messages on the wire ({len(transcript)}), as the SDK saw them:", file=sys.stderr)
            for line in transcript:  # a leaked secret is a failure to report, not to repeat
                print(short(line.replace(secret, "<SECRET>"), 2000), file=sys.stderr)
            print("--- sp stderr:", file=sys.stderr)
            print(sp_stderr.replace(secret, "<SECRET>"), file=sys.stderr)
    up.shutdown()
    timer.cancel()
    print(f"# {time.monotonic() - started:.1f} s", flush=True)
    print(REPORT.summary(), flush=True)
    return 1 if REPORT.failed else 0


if __name__ == "__main__":
    sys.exit(main())
