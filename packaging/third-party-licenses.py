#!/usr/bin/env python3
"""Writes the license notices that must travel with a static `sp` (issue 11).

    python3 packaging/third-party-licenses.py TARGET OUT.txt

The static binary contains, besides sp itself (MIT, LICENSE): OpenSSL (Apache-2.0),
libssh2 (BSD-3-Clause) and zlib (Zlib), compiled from the sources that the openssl-src,
libssh2-sys and libz-sys crates bundle (their notices are in packaging/licenses/), and
the Rust crates it links. This script lists every crate that ends up in the binary for
TARGET with the `static` feature (`cargo metadata --locked`, normal dependencies only:
no build scripts', proc macros' or tests' dependencies), with its declared license and the text of
its LICENSE/COPYING/NOTICE files, after the three C libraries' notices.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
C_LIBRARIES = [
    ("OpenSSL", "Apache-2.0", "OpenSSL.txt", "openssl-src"),
    ("libssh2", "BSD-3-Clause", "libssh2.txt", "libssh2-sys"),
    ("zlib", "Zlib", "zlib.txt", "libz-sys"),
]


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    target, out_path = sys.argv[1], sys.argv[2]
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--locked", "--format-version", "1", "--features", "static", "--filter-platform", target],
        check=True, capture_output=True, text=True, cwd=os.path.dirname(HERE)).stdout)
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    root = meta["resolve"]["root"]

    def proc_macro(pkg_id: str) -> bool:  # runs in the compiler, not linked in
        return any("proc-macro" in t["kind"] for t in packages[pkg_id]["targets"])

    # Walk normal (not build, not dev) dependency edges from the root.
    seen, stack = set(), [root]
    while stack:
        node = nodes[stack.pop()]
        for dep in node["deps"]:
            if any(k["kind"] is None for k in dep["dep_kinds"]) and dep["pkg"] not in seen and not proc_macro(dep["pkg"]):
                seen.add(dep["pkg"])
                stack.append(dep["pkg"])
    crates = sorted((packages[i] for i in seen), key=lambda p: (p["name"], p["version"]))

    out = ["Third-party notices for the static sp binary", "=" * 44, ""]
    out.append("C libraries compiled into the binary:")
    for name, lic, _, crate in C_LIBRARIES:
        version = next((p["version"] for p in packages.values() if p["name"] == crate), "?")
        out.append(f"  {name:8} {lic:13} (built from the source bundled in the {crate} {version} crate)")
    out.append("")
    out.append(f"Rust crates linked into the binary ({len(crates)}):")
    for p in crates:
        out.append(f"  {p['name']} {p['version']}  {p.get('license') or p.get('license_file') or 'UNKNOWN'}")
    out.append("")
    for name, lic, file, _ in C_LIBRARIES:
        out += ["", "-" * 78, f"{name} ({lic})", "-" * 78, ""]
        with open(os.path.join(HERE, "licenses", file)) as f:
            out.append(f.read().rstrip())
    for p in crates:
        d = os.path.dirname(p["manifest_path"])
        files = sorted(f for f in os.listdir(d) if f.upper().startswith(("LICENSE", "LICENCE", "COPYING", "NOTICE")) and os.path.isfile(os.path.join(d, f)))
        out += ["", "-" * 78, f"{p['name']} {p['version']} ({p.get('license') or 'see below'})", "-" * 78]
        if not files:
            out.append("(no license file in the crate; license as declared above)")
        for f in files:
            with open(os.path.join(d, f), errors="replace") as fh:
                out += ["", f"{f}:", "", fh.read().rstrip()]
    with open(out_path, "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
