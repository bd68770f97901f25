#!/usr/bin/env python3
"""`make lint` (issue #9): the import graph of src/ (non-test code), an edge A -> B for
every `crate::B` or `super::B` path in A. Nodes are top-level modules, and submodules
of the directories in `deep`. Prints the graph and its cycles; exits 1 if there is one."""
import os, re, sys, itertools
deep = {'policy', 'audit', 'cli', 'http', 'ssh'}
files = {}
for root, _, names in os.walk('src'):
    for n in names:
        if n.endswith('.rs'):
            p = os.path.join(root, n)[4:-3]            # policy/http, policy/mod, sys
            files[p[:-4] if p.endswith('/mod') else p] = os.path.join(root, n)
def node(path):                                      # module path -> graph node
    parts = path.split('/')
    if parts[0] in deep and len(parts) > 1 and '/'.join(parts[:2]) in files:
        return '/'.join(parts[:2])
    return parts[0]
edges = set()
for mod, f in files.items():
    text = open(f).read().split('#[cfg(test)]\nmod tests')[0]
    text = '\n'.join(l for l in text.splitlines() if not l.lstrip().startswith('//'))
    me = node(mod)
    parent = mod.rsplit('/', 1)[0] if '/' in mod else ''
    for m in re.finditer(r'\bcrate::(\w+)(?:::(\w+))?', text):
        t = node('/'.join(x for x in m.groups() if x))
        if t != me: edges.add((me, t))
    if parent:
        for m in re.finditer(r'\bsuper::(?:(\w+)|\{([^}]*)\})', text):
            for name in ([m.group(1)] if m.group(1) else re.findall(r'\w+', m.group(2))):
                t = node(parent + '/' + name) if parent + '/' + name in files else node(parent)
                if t != me: edges.add((me, t))
    # a dir module's mod.rs naming its children (`use x::...`, `x::parse(...)`)
    if f.endswith('mod.rs'):
        for m in re.finditer(r'\b(\w+)::', text):
            t = node(mod + '/' + m.group(1))
            if t != me and t in files: edges.add((me, t))
only = set(sys.argv[1:])
g = {}
for a, b in edges:
    if not only or (a.split('/')[0] in only and b.split('/')[0] in only):
        g.setdefault(a, set()).add(b)
# cycles: strongly connected components (Tarjan)
index, low, stack, on, sccs, c = {}, {}, [], set(), [], itertools.count()
def visit(v):
    index[v] = low[v] = next(c); stack.append(v); on.add(v)
    for w in g.get(v, ()):
        if w not in index: visit(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(sorted(comp))
for v in list(g): 
    if v not in index: visit(v)
for a in sorted(g): print(a, '->', ' '.join(sorted(g[a])))
print('cycles:', sccs or 'none')
sys.exit(1 if sccs else 0)
