#!/usr/bin/env python3
"""`make lint`: the import graph of src/ (non-test code) against the layer rule.

An edge A -> B is every `crate::B...` or `super::...` path in A's code (comments and
`#[cfg(test)] mod tests` left out). Nodes are the top-level modules of src/ (a folder is
one node). The layers, top to bottom, are below; an edge must point down to a lower
layer. An edge between two nodes of the same layer, or one pointing up, fails the check
with the file and the path that made it. Inside a folder (policy/, audit/, cli/, tools/,
...), its files' imports among themselves must have no cycle.

Why this order (README, "Code map"): the loop (server) drives the tool table (tools) and
the wire (mcp), and names no tool. The tools sit above the wire because a tool's result
is an MCP CallToolResult and the upstream tool is itself an MCP client of the same
framing and JSON-RPC parsers; the wire never knows a tool. Below them the approval gate
(approve), the journal (audit: it takes only Scrubbed values, so it sits above the gate),
the gate (Authorized, the run context, the Vault and Scrubbed, the result codes), then
credentials and destinations (cred, net), the policy as a leaf of plain types, signals,
and the floor: escape, json (the strict parser the wire, the policy and the journal
share) and sys.

`--sizes` adds a second check: no file under src/ longer than MAX_LINES lines (as
`wc -l` counts them, inline unit tests included); each longer file is printed with its
length. A file that grows past it is split by concern (a folder with a file per helper
family, unit tests in a `tests.rs` beside it), its parent re-exporting what callers name.
"""
import os, re, sys, itertools

MAX_LINES = 600

LAYERS = [
    ['main', 'lib', 'fuzzing'],
    ['cli'],
    ['logging', 'server'],
    ['tools'],
    ['mcp'],
    ['approve'],
    ['audit'],
    ['gate'],
    ['cred', 'net'],
    ['policy'],
    ['signals'],
    ['escape', 'json', 'sys'],
]
layer = {m: i for i, group in enumerate(LAYERS) for m in group}

files = {}
for root, _, names in os.walk('src'):
    for n in names:
        if n.endswith('.rs'):
            p = os.path.join(root, n)[4:-3]
            files[p[:-4] if p.endswith('/mod') else p] = os.path.join(root, n)

def code(path):
    text = open(path).read()
    text = re.split(r'#\[cfg\(test\)\]\s*\n\s*mod tests', text)[0]
    return '\n'.join(l for l in text.splitlines() if not l.lstrip().startswith('//'))

def top(mod):
    return mod.split('/')[0]

problems, inner = [], {}
for mod, f in sorted(files.items()):
    me = top(mod)
    if me not in layer:
        problems.append(f'{f}: module {me!r} is in no layer of .ci/module-direction.py')
        continue
    text = code(f)
    targets = [(m.group(1), m.group(0)) for m in re.finditer(r'\bcrate::(\w+)', text)]
    parent = mod.rsplit('/', 1)[0] if '/' in mod else ''
    for m in re.finditer(r'\bsuper::(\w+)', text):
        if parent:
            targets.append((top(parent + '/' + m.group(1)), m.group(0)))
    for t, how in targets:
        if t == me:
            # inside one folder: remember the file-level edge for the cycle check
            sub = re.search(r'crate::' + re.escape(me) + r'::(\w+)', how)
            continue
        if t not in layer:
            continue  # an item of lib.rs (crate::Something)
        if layer[t] <= layer[me]:
            kind = 'the same layer' if layer[t] == layer[me] else 'a higher layer'
            problems.append(f'{f}: {me} -> {t} ({how}): {t} is in {kind}')

# cycles among the files of one folder
edges = {}
for mod, f in files.items():
    if '/' not in mod and not f.endswith('mod.rs'):
        continue
    folder = top(mod)
    text = code(f)
    for m in re.finditer(r'\bcrate::' + re.escape(folder) + r'::(\w+)', text):
        other = folder + '/' + m.group(1)
        if other in files and other != mod:
            edges.setdefault(mod, set()).add(other)
    parent = mod.rsplit('/', 1)[0] if '/' in mod else ''
    for m in re.finditer(r'\bsuper::(\w+)', text):
        other = parent + '/' + m.group(1)
        if other in files and other != mod and parent:
            edges.setdefault(mod, set()).add(other)

def cycle_from(start):
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in edges.get(node, ()):
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None

cycles = set()
for m in edges:
    c = cycle_from(m)
    if c:
        cycles.add(' -> '.join(c))
for c in sorted(cycles):
    problems.append(f'import cycle: {c}')

# --sizes: no source file over MAX_LINES lines
long_files = []
if '--sizes' in sys.argv:
    for f in sorted(files.values()):
        with open(f, 'rb') as fh:
            n = fh.read().count(b'\n')
        if n > MAX_LINES:
            long_files.append(f'{f}: {n} lines, more than {MAX_LINES} (split it by concern)')

if '-v' in sys.argv:
    for i, g in enumerate(LAYERS):
        print(f'layer {i}: {" ".join(g)}')
for p in problems + long_files:
    print(p)
if problems:
    print(f'{len(problems)} import(s) against the layers (.ci/module-direction.py)', file=sys.stderr)
if long_files:
    print(f'{len(long_files)} file(s) under src/ longer than {MAX_LINES} lines (.ci/module-direction.py --sizes)', file=sys.stderr)
if problems or long_files:
    sys.exit(1)
print('imports follow the layers: ' + ' > '.join('/'.join(g) for g in LAYERS))
if '--sizes' in sys.argv:
    print(f'no file under src/ is longer than {MAX_LINES} lines')
