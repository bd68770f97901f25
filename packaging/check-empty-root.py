#!/usr/bin/env python3
"""The static `sp` in an empty root (issue 11): `make static-check`, run as root by CI.

    sudo python3 packaging/check-empty-root.py target/x86_64-unknown-linux-musl/release/sp

Builds a directory holding only `sp`, a policy, a CA file and the journal, then, with
`chroot --userspec=65534:65534` and an empty environment (no /etc, no /etc/hosts, no
resolver, no HOME), drives a scripted `sp mcp` session: an HTTP request to
`http://localhost:PORT/` and an HTTPS one to `https://localhost:PORT/` trusted through
the policy's `http.ca_file`, both answered by loopback servers this script starts. Then
`sp audit verify` on the journal, inside the same root. `localhost` must resolve without
a resolver (RFC 6761): each call must be answered within 2 s (a DNS wait takes 5 s).

Needs: root (chroot), python3, the `openssl` command (to make the test CA). One line per
check, then `N passed, M failed`; exit status 1 when anything failed.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time

NOBODY = 65534
CALL_BUDGET_S = 2.0


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = json.dumps({"path": self.path, "tls": isinstance(self.connection, ssl.SSLSocket)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def serve(tls: ssl.SSLContext | None) -> int:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def make_ca(work: str) -> tuple[str, str, str]:
    """A CA and a leaf for localhost signed by it, with the `openssl` command."""
    ca_key, ca_pem = f"{work}/ca.key", f"{work}/ca.pem"
    key, csr, pem = f"{work}/leaf.key", f"{work}/leaf.csr", f"{work}/leaf.pem"
    ext = f"{work}/leaf.ext"
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    q = {"check": True, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", ca_key, "-out", ca_pem, "-days", "2", "-subj", "/CN=sp empty-root CA",
                    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"], **q)
    subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", csr, "-subj", "/CN=localhost"], **q)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca_pem, "-CAkey", ca_key, "-CAcreateserial",
                    "-out", pem, "-days", "2", "-extfile", ext], **q)
    return ca_pem, pem, key


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    sp = os.path.abspath(sys.argv[1])
    passed = failed = 0

    def check(ok: bool, what: str, detail: str = "") -> None:
        nonlocal passed, failed
        passed, failed = passed + ok, failed + (not ok)
        print(f"{'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail and not ok else ""), flush=True)

    work = tempfile.mkdtemp(prefix="sp-empty-root-")
    try:
        ca_pem, leaf, key = make_ca(work)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(leaf, key)
        http_port, https_port = serve(None), serve(tls)

        root = f"{work}/root"
        os.mkdir(root, 0o755)
        shutil.copy(sp, f"{root}/sp")
        shutil.copy(ca_pem, f"{root}/ca.pem")
        policy = {
            "http": {"allow": [{"hosts": [f"localhost:{http_port}", f"localhost:{https_port}"]}],
                     "ca_file": "/ca.pem", "timeout_s": 10},
            "audit": {"path": "/state/audit.jsonl"},
        }
        with open(f"{root}/policy.json", "w") as f:
            json.dump(policy, f)
        os.mkdir(f"{root}/state", 0o700)
        os.chown(f"{root}/state", NOBODY, NOBODY)
        check(sorted(os.listdir(root)) == ["ca.pem", "policy.json", "sp", "state"], "the root holds only sp, a policy, a CA file and the journal's directory")

        chroot = [shutil.which("chroot") or "/usr/sbin/chroot", f"--userspec={NOBODY}:{NOBODY}", root]
        out = subprocess.run(chroot + ["/sp", "--version"], env={}, capture_output=True, text=True)
        check(out.returncode == 0 and out.stdout.startswith("sp "), "sp --version in the empty root", out.stderr.strip())

        proc = subprocess.Popen(chroot + ["/sp", "mcp", "--config", "/policy.json"], env={},
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdin and proc.stdout

        def rpc(msg: dict) -> dict:
            proc.stdin.write(json.dumps(msg) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            return json.loads(line) if line else {}

        r = rpc({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "empty-root", "version": "1"}}})
        check("result" in r, "initialize", json.dumps(r))
        proc.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        proc.stdin.flush()
        for i, url in enumerate([f"http://localhost:{http_port}/plain", f"https://localhost:{https_port}/tls"], start=2):
            started = time.monotonic()
            r = rpc({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                     "params": {"name": "http_request", "arguments": {"method": "GET", "url": url}}})
            took = time.monotonic() - started
            sc = r.get("result", {}).get("structuredContent", {})
            check(sc.get("status") == 200 and not r["result"].get("isError"), f"GET {url}", json.dumps(r))
            check(took < CALL_BUDGET_S, f"GET {url} answered in {took:.2f} s (< {CALL_BUDGET_S} s: no DNS wait)")
        proc.stdin.close()
        status = proc.wait(timeout=20)
        stderr = proc.stderr.read() if proc.stderr else ""
        check(status == 0, "sp mcp exits 0 on end of input", stderr.strip())

        out = subprocess.run(chroot + ["/sp", "audit", "verify", "/state/audit.jsonl"], env={}, capture_output=True, text=True)
        check(out.returncode == 0, "sp audit verify in the empty root", (out.stdout + out.stderr).strip())
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
