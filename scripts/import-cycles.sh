#!/usr/bin/env bash
# Import circles between the files of a crate (issue 26, item 4).
#
# Usage: scripts/import-cycles.sh SRC_DIR [SRC_DIR ...]
#   e.g. scripts/import-cycles.sh core/src adapters/host/src adapters/embassy/src
#
# For every .rs file under SRC_DIR it reads the paths the file names: `use crate::…`,
# `use super::…`, `use self::…` (brace groups expanded) and `crate::a::b` / `super::a::b`
# written in code. Each path goes to the file of the longest module prefix it names
# (`crate::wire::failure::StrSink` -> wire/failure.rs). Comments and string literals are skipped;
# `super` inside an inline `mod x { … }` counts from that inline module.
#
# An edge between a module and one of its own submodules (either way) is exempt: a module may
# re-export its parts and the parts may use what their parent declares. Every other edge
# counts, and the script prints each set of files that reach each other (a strongly connected
# component) with one circle through them. Exit status: 0 without a circle, 1 with one,
# 2 on a usage error.
#
# Options: -v prints every counted edge too.
set -euo pipefail

verbose=0
if [[ "${1:-}" == "-v" ]]; then
  verbose=1
  shift
fi
if [[ $# -eq 0 ]]; then
  echo "usage: $0 [-v] SRC_DIR [SRC_DIR ...]" >&2
  exit 2
fi

status=0
for src in "$@"; do
  if [[ ! -d "$src" ]]; then
    echo "$0: not a directory: $src" >&2
    exit 2
  fi
  VERBOSE=$verbose python3 - "$src" <<'PY' || status=1
import os
import re
import sys

src = sys.argv[1].rstrip("/")
verbose = os.environ.get("VERBOSE") == "1"


def module_of(rel):
    """Module path (tuple) of a file, relative to src."""
    parts = rel[:-3].split("/")
    if parts == ["lib"] or parts == ["main"]:
        return ()
    if parts[-1] == "mod":
        parts = parts[:-1]
    return tuple(parts)


files = {}
for root, _, names in os.walk(src):
    for n in names:
        if n.endswith(".rs"):
            rel = os.path.relpath(os.path.join(root, n), src)
            files[module_of(rel)] = rel

# Binaries under src/bin are crate roots of their own: leave them out.
files = {m: f for m, f in files.items() if not (m and m[0] == "bin")}


def strip(text):
    """The code without comments, string and char literals (their quotes kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if text[i] == "\n":
                        out.append("\n")
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append("' '")
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand(tree):
    """A use tree (`a::{b, c::{d, e}}`) as its list of paths."""
    tree = re.sub(r"\s+", "", tree)
    i = tree.find("{")
    if i < 0:
        return [re.sub(r"as\w+$", "", tree)] if tree else []
    prefix = tree[:i]
    depth, parts, start = 0, [], i + 1
    for j in range(i, len(tree)):
        ch = tree[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                parts.append(tree[start:j])
                break
        elif ch == "," and depth == 1:
            parts.append(tree[start:j])
            start = j + 1
    out = []
    for p in parts:
        for q in expand(p):
            out.append(prefix + q)
    return out


def resolve(path, here):
    """The module path a `crate::`/`super::`/`self::` path names, or None."""
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        base, segs = [], segs[1:]
    elif segs[0] in ("super", "self"):
        base = list(here)
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                if not base:
                    return None
                base.pop()
            segs = segs[1:]
    else:
        return None
    return tuple(base + segs)


def file_of(mod):
    """The file of the longest prefix of `mod` that is a file module."""
    for k in range(len(mod), -1, -1):
        if mod[:k] in files:
            return mod[:k]
    return None


edges = {}  # (from module, to module) -> first line
for mod, rel in sorted(files.items()):
    with open(os.path.join(src, rel), encoding="utf-8") as f:
        code = strip(f.read())
    lines = code.split("\n")
    # Inline modules by indentation (rustfmt's): (indent, name).
    stack = []
    here_at = []
    for ln in lines:
        ind = len(ln) - len(ln.lstrip(" "))
        s = ln.strip()
        while stack and s and ind <= stack[-1][0]:
            stack.pop()
        here_at.append(mod + tuple(name for _, name in stack))
        m = re.match(r"(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*\{", s)
        if m:
            stack.append((ind, m.group(3)))
    refs = []  # (line number, path, here)
    # `use` items, possibly over several lines.
    for m in re.finditer(r"(?<![\w:])use\s+([^;]*);", code):
        line = code.count("\n", 0, m.start())
        for p in expand(m.group(1)):
            refs.append((line, p, here_at[line]))
    # Paths written in code.
    for m in re.finditer(r"(?<![\w:$])((?:crate|super|self)(?:::\w+)+)", code):
        line = code.count("\n", 0, m.start())
        refs.append((line, m.group(1), here_at[line]))
    for line, p, here in refs:
        target = resolve(p, here)
        if target is None:
            continue
        t = file_of(target)
        if t is None or t == mod:
            continue
        # A module and its own submodules are exempt.
        if t[: len(mod)] == mod or mod[: len(t)] == t:
            continue
        edges.setdefault((mod, t), line + 1)

graph = {}
for (a, b) in edges:
    graph.setdefault(a, set()).add(b)


def name(m):
    return os.path.join(src, files[m])


if verbose:
    for (a, b), line in sorted(edges.items()):
        print(f"{name(a)}:{line} -> {name(b)}")

# Tarjan's strongly connected components (iterative).
index, low, on, st, comps, counter = {}, {}, set(), [], [], [0]
for root in sorted(files):
    if root in index:
        continue
    work = [(root, iter(sorted(graph.get(root, ()))))]
    index[root] = low[root] = counter[0]
    counter[0] += 1
    st.append(root)
    on.add(root)
    while work:
        v, it = work[-1]
        w = next(it, None)
        if w is not None:
            if w not in index:
                index[w] = low[w] = counter[0]
                counter[0] += 1
                st.append(w)
                on.add(w)
                work.append((w, iter(sorted(graph.get(w, ())))))
            elif w in on:
                low[v] = min(low[v], index[w])
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[v])
        if low[v] == index[v]:
            comp = []
            while True:
                w = st.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))


def circle(comp):
    """One circle through the component's first file (breadth first, inside it)."""
    inside = set(comp)
    start = comp[0]
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph.get(v, ())):
            if w not in inside:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


if not comps:
    print(f"{src}: no import circles ({len(files)} files, {len(edges)} edges between files)")
    sys.exit(0)
print(f"{src}: {len(comps)} import circle(s)")
for comp in comps:
    print(f"  files that reach each other: {', '.join(files[m] for m in comp)}")
    ring = circle(comp)
    steps = []
    for a, b in zip(ring, ring[1:]):
        steps.append(f"{files[a]}:{edges[(a, b)]}")
    print(f"    circle: {' -> '.join(steps)} -> {files[ring[-1]]}")
sys.exit(1)
PY
done
exit $status
