#!/usr/bin/env python3
"""The official MCP Python SDK sees the resources, templates and prompts `sp mcp`
relays from an upstream (issue 33).

    python tests/interop/python_resources.py target/release/sp

Run by `make interop`. The upstream is the stdlib fixture
tests/support/upstreams/resources.py; the policy relays its `fx://ok/*` resources and its
`greet` prompt. Checks: the capabilities, list_resources (URIs rewritten to
`up+fx://...`, which the SDK's URL type accepts), list_resource_templates, read_resource,
list_prompts, get_prompt, complete. One line per check, then `N passed, M failed`.
A watchdog ends the process after WATCHDOG_S seconds whatever the server does.
"""

import json
import os
import sys
import tempfile
import threading
import traceback

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

WATCHDOG_S = 60
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
results = []


def check(name, ok, detail=""):
    results.append(bool(ok))
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + str(detail)))


async def run(sp, policy):
    params = StdioServerParameters(command=sp, args=["mcp", "--config", policy])
    async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
        init = await session.initialize()
        caps = init.capabilities
        check("resources and prompts declared", caps.resources is not None and caps.prompts is not None, caps)
        res = await session.list_resources()
        uris = [str(x.uri) for x in res.resources]
        check("resources listed, rewritten", uris == ["up+fx://ok/readme", "up+fx://ok/dir"], uris)
        tmpl = await session.list_resource_templates()
        check("templates listed", [t.uri_template for t in tmpl.resource_templates] == ["up+fx://ok/{name}"], tmpl)
        read = await session.read_resource("up+fx://ok/readme")
        check("resource read", read.contents[0].text == "served by up: fx://ok/readme", read)
        prompts = await session.list_prompts()
        check("prompts listed", [p.name for p in prompts.prompts] == ["up_greet"], prompts)
        got = await session.get_prompt("up_greet", {"who": "sdk"})
        check("prompt got, secret scrubbed", got.messages[0].content.text == "hello sdk from up, key [REDACTED:tok]", got)
        try:
            await session.read_resource("up+fx://secret/token")
            check("a resource the policy does not relay is refused", False, "read succeeded")
        except Exception as e:  # the SDK raises its McpError
            check("a resource the policy does not relay is refused", "not found" in str(e), e)


def main():
    sp = sys.argv[1]
    threading.Timer(WATCHDOG_S, lambda: os._exit(2)).start()
    with tempfile.TemporaryDirectory() as d:
        token = os.path.join(d, "token")
        with open(token, "w") as f:
            f.write("interop-secret-4b1d9c2e7f")
        os.chmod(token, 0o600)
        fixture = os.path.join(ROOT, "tests/support/upstreams/resources.py")
        policy = {
            "credentials": {"tok": {"source": {"file": token}, "inject": {"bearer": {}}, "hosts": ["unused.example"]}},
            "upstreams": {"up": {"command": [sys.executable, fixture, "up"], "env": {"SECRET": {"credential": "tok"}},
                                 "sandbox": "none", "pin": "off", "tools": {"allow": ["*"]},
                                 "resources": {"allow": ["fx://ok/*"]}, "prompts": {"allow": ["greet"]}}},
        }
        path = os.path.join(d, "policy.json")
        with open(path, "w") as f:
            json.dump(policy, f)
        os.chmod(path, 0o600)
        try:
            anyio.run(run, sp, path)
        except Exception:
            traceback.print_exc()
            results.append(False)
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    os._exit(0 if results and all(results) else 1)


main()
