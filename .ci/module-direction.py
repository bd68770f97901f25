#!/usr/bin/env python3
"""`make lint`: the import graph of src/ (non-test code) against the layer rule.

An edge A -> B is every `crate::...`, `super::...` or `self::...` path in A's code
(comments and `#[cfg(test)] mod tests`, inline or in files of their own, left out; `use`
groups `{...}` expanded), B being the longest prefix of the path that is a file under
src/: `crate::tools::ssh::exec::Conn` and, from tools/ssh/connect.rs, `super::exec::Conn`
both name tools/ssh/exec. Nodes are the top-level modules of src/ (a folder is one node).
The layers, top to bottom, are below; an edge must point down to a lower layer. An edge
between two nodes of the same layer, or one pointing up, fails the check with the file
and the path that made it. Inside a folder (policy/, audit/, cli/, tools/, ...), its
files' imports among themselves, at any depth, must have no cycle; an edge between a
module and one it contains (tools/ssh and tools/ssh/exec) does not count there: a
folder's mod.rs re-exports its files' items and they name its own. The checker's own
test is .ci/test_module_direction.py (fixture trees: `make lint` runs it).

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

def is_test(mod):
    """A `#[cfg(test)] mod tests` in a file of its own (`tests.rs`, `tests/`)."""
    return 'tests' in mod.split('/')

def code(path):
    text = open(path).read()
    text = re.split(r'#\[cfg\(test\)\]\s*\n\s*mod tests', text)[0]
    return '\n'.join(l for l in text.splitlines() if not l.lstrip().startswith('//'))

def top(mod):
    return mod.split('/')[0]

def paths(text):
    """Every path that starts with `crate::`, `super::` or `self::`, as a list of its
    segments, with `use` groups expanded: `crate::a::{b::C, d}` gives [crate, a, b, C]
    and [crate, a, d]."""
    out = []
    for m in re.finditer(r'\b(?:crate|super|self)\b(?=\s*::)', text):
        if m.start() > 1 and text[m.start() - 2:m.start()] == '::':
            continue  # the tail of a longer path (`super::super::x`)
        out.extend(_expand(text, m.start(), []))
    return out

def _expand(text, i, prefix):
    """Reads one path at text[i:]; returns its expansions (prefix + segments)."""
    segs = list(prefix)
    while True:
        m = re.compile(r'\s*(\w+)').match(text, i)
        if not m:
            return [segs] if segs else []
        segs.append(m.group(1))
        i = m.end()
        sep = re.compile(r'\s*::\s*').match(text, i)
        if not sep:
            return [segs]
        i = sep.end()
        if text.startswith('{', i):
            return _group(text, i + 1, segs)

def _group(text, i, prefix):
    """The items of a `{...}` group at text[i:] (just after the brace)."""
    out, depth, start = [], 0, i
    while i < len(text):
        c = text[i]
        if c == '{':
            depth += 1
        elif c == '}' and depth > 0:
            depth -= 1
        elif c in ',}' and depth == 0:
            item = text[start:i].strip()
            if item and item != 'self':
                out.extend(_expand(item, 0, prefix))
            elif item == 'self':
                out.append(list(prefix))
            if c == '}':
                return out
            start = i + 1
        i += 1
    return out

def resolve(mod, segs):
    """The module (a key of `files`) that the path `segs`, written in `mod`, names: the
    longest prefix of its absolute form that is a file under src/. '' for lib.rs."""
    here = '' if mod in ('lib', 'main') else mod
    if segs[0] == 'crate':
        base, rest = [], segs[1:]
    else:
        base, rest = here.split('/') if here else [], segs
        while rest and rest[0] in ('super', 'self'):
            if rest[0] == 'super':
                base = base[:-1]
            rest = rest[1:]
    full = base + rest
    for n in range(len(full), 0, -1):
        cand = '/'.join(full[:n])
        if cand in files:
            return cand
    return ''

def related(a, b):
    """One module contains the other (a folder's mod.rs and its files re-export each
    other's items by design; only edges between modules neither of which holds the
    other count)."""
    return a == b or a.startswith(b + '/') or b.startswith(a + '/')

problems = []
for mod, f in sorted(files.items()):
    if is_test(mod):
        continue
    me = top(mod)
    if me not in layer:
        problems.append(f'{f}: module {me!r} is in no layer of .ci/module-direction.py')
        continue
    text = code(f)
    for segs in paths(text):
        target = resolve(mod, segs)
        t = top(target) if target else ''
        how = '::'.join(segs)
        if t == me:
            continue  # inside one folder: the cycle check below
        if t not in layer:
            continue  # an item of lib.rs (crate::Something)
        if layer[t] <= layer[me]:
            kind = 'the same layer' if layer[t] == layer[me] else 'a higher layer'
            problems.append(f'{f}: {me} -> {t} ({how}): {t} is in {kind}')

# cycles among the files of one folder, at any depth (tools/ssh/connect -> tools/ssh/exec)
edges = {}
for mod, f in files.items():
    if '/' not in mod and not f.endswith('mod.rs') or is_test(mod):
        continue
    for segs in paths(code(f)):
        other = resolve(mod, segs)
        if other and top(other) == top(mod) and not related(mod, other):
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
        # one report per cycle, whichever file it was found from: start at its least name
        ring = c[:-1]
        k = ring.index(min(ring))
        ring = ring[k:] + ring[:k]
        cycles.add(' -> '.join(ring + ring[:1]))
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
