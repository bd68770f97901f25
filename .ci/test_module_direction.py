#!/usr/bin/env python3
"""`make lint`: the test of .ci/module-direction.py itself, on tiny fixture trees.

Each case writes a src/ tree into a temporary directory, runs the checker there and
asserts its exit status and the lines it printed. The first case is the one the checker
used to miss (issue 32, "The fences"): two files of a nested folder naming each other
(tools/ssh/connect.rs <-> tools/ssh/exec.rs), once with `super::` and once with a full
`crate::` path, which it read only one segment deep (`crate::tools::ssh`).
"""
import os, subprocess, sys, tempfile

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'module-direction.py')

def run(tree, *args):
    with tempfile.TemporaryDirectory() as d:
        for path, text in tree.items():
            p = os.path.join(d, 'src', path)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, 'w') as f:
                f.write(text)
        r = subprocess.run([sys.executable, CHECKER, *args], cwd=d, capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout.splitlines()

SSH = {
    'lib.rs': 'pub mod tools;\npub mod sys;\n',
    'sys.rs': 'pub fn now() {}\n',
    'tools/mod.rs': 'pub mod ssh;\n',
    'tools/ssh/mod.rs': 'pub mod connect;\npub mod exec;\npub use exec::run;\n',
}

def case(name, tree, want_rc, want_lines, *args):
    rc, lines = run(tree, *args)
    ok = rc == want_rc and all(w in lines for w in want_lines)
    print(f'{"ok" if ok else "FAIL"}: {name}')
    if not ok:
        print(f'  exit {rc}, wanted {want_rc}; printed:')
        for l in lines:
            print(f'    {l}')
        print(f'  wanted lines: {want_lines}')
    return ok

CYCLE = 'import cycle: tools/ssh/connect -> tools/ssh/exec -> tools/ssh/connect'
results = [
    case('a nested cycle through super:: is found (the one the checker missed)', {
        **SSH,
        'tools/ssh/connect.rs': 'use super::exec::{is_code, Conn};\npub fn connect() -> Conn { todo!() }\n',
        'tools/ssh/exec.rs': 'use crate::tools::ssh::connect::connect;\npub struct Conn;\npub fn run() { connect(); }\n',
    }, 1, [CYCLE]),
    case('a nested cycle through crate:: paths in a use group is found', {
        **SSH,
        'tools/ssh/connect.rs': 'use crate::tools::{ssh::exec::Conn, ssh::exec};\n',
        'tools/ssh/exec.rs': 'use crate::tools::ssh::{connect::{self}, mod_items};\n',
    }, 1, [CYCLE]),
    case('a nested cycle written inline (no use) is found', {
        **SSH,
        'tools/ssh/connect.rs': 'pub fn c() { crate::tools::ssh::exec::run() }\n',
        'tools/ssh/exec.rs': 'pub fn run() { super::super::ssh::connect::c() }\n',
    }, 1, [CYCLE]),
    case('the cut circle passes: both files name a third one', {
        **SSH,
        'tools/ssh/libssh2.rs': 'pub const TIMEOUT: i32 = -9;\n',
        'tools/ssh/connect.rs': 'use super::libssh2::TIMEOUT;\npub struct Conn;\n',
        'tools/ssh/exec.rs': 'use crate::tools::ssh::connect::Conn;\nuse super::libssh2;\npub fn run() {}\n',
    }, 0, ['imports follow the layers: ' + ' > '.join([
        'main/lib/fuzzing', 'cli', 'logging/server', 'tools', 'mcp', 'approve', 'audit', 'gate', 'cred/net', 'policy',
        'signals', 'escape/json/sys'])]),
    case('a folder and its own files may name each other (re-exports)', {
        **SSH,
        'tools/ssh/connect.rs': 'use crate::tools::ssh::run;\n',
        'tools/ssh/exec.rs': 'pub fn run() {}\n',
    }, 0, []),
    case('test code is left out, inline and in files of its own', {
        **SSH,
        'tools/ssh/connect.rs': 'pub fn c() {}\n#[cfg(test)]\nmod tests {\n    use super::super::exec::run;\n}\n',
        'tools/ssh/exec.rs': 'pub fn run() {}\n#[cfg(test)]\nmod tests;\n',
        'tools/ssh/exec/tests.rs': 'use crate::tools::ssh::connect::c;\nuse crate::tools::ssh::exec::run;\n',
    }, 0, []),
    case('an edge up the layers is named with its file and path', {
        **SSH,
        'sys.rs': 'use crate::tools::ssh::exec::run;\n',
        'tools/ssh/connect.rs': '', 'tools/ssh/exec.rs': 'pub fn run() {}\n',
    }, 1, ["src/sys.rs: sys -> tools (crate::tools::ssh::exec::run): tools is in a higher layer"]),
    case('an edge up the layers through a use group is named too', {
        **SSH,
        'sys.rs': 'use crate::{json, tools::ssh};\n',
        'json.rs': '', 'tools/ssh/connect.rs': '', 'tools/ssh/exec.rs': '',
    }, 1, ["src/sys.rs: sys -> tools (crate::tools::ssh): tools is in a higher layer",
           "src/sys.rs: sys -> json (crate::json): json is in the same layer"]),
    case('a module in no layer fails', {**SSH, 'extra.rs': '', 'tools/ssh/connect.rs': '', 'tools/ssh/exec.rs': ''},
         1, ["src/extra.rs: module 'extra' is in no layer of .ci/module-direction.py"]),
    case('--sizes names a file over 600 lines', {
        **SSH, 'tools/ssh/connect.rs': '//\n' * 601, 'tools/ssh/exec.rs': '',
    }, 1, ['src/tools/ssh/connect.rs: 601 lines, more than 600 (split it by concern)'], '--sizes'),
]
if not all(results):
    sys.exit(f'{results.count(False)} case(s) of .ci/test_module_direction.py failed')
print(f'.ci/module-direction.py: {len(results)} fixture cases pass')
