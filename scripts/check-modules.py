#!/usr/bin/env python3
"""Checks the module structure of every crate of the workspace.

1. No import cycle between the modules of one crate (the suite runs this):
   module A uses module B
   (a `crate::b::...`, `super::b::...` or `self::b::...` path in A's file)
   and B, directly or through others, uses A. A submodule using its own
   ancestors (`use super::*` in `a/b.rs`) is how Rust modules nest and is
   not counted; everything else is.
2. No kind compared as a string in the apiserver's generic code (the suite
   runs this too): a kind's rules belong in its strategy
   (crates/apiserver/src/strategy/), not in `if kind == "Pod"` branches
   elsewhere; where generic code must tell a kind, it names the type
   (`info.is::<Namespace>()`, `Pod::KIND`), which the compiler checks.
   Kinds and plurals compared with `==`/`!=` or as match arms, alone or
   in a tuple pattern (`("", "Pod") =>`, `("apps", _) | ("batch", "Job") =>`;
   kinds only there: the authorizers match request attributes, plurals
   included, in tuples as Kubernetes does), are found.

3. No function over 100 lines without a reason written at its top (the
   suite runs this as well): a function that long says why in the
   comment above it or on its first line, with the word "long" (a
   dispatcher over every subcommand, a port that follows Kubernetes'
   function step by step); otherwise it is split where its logic divides.
   Tests are not counted.

  scripts/check-modules.py            check all three, exit 1 on a problem
  scripts/check-modules.py --graph C  print crate C's module graph (module: the modules it uses)
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PATH_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
# `use crate::{a, b::c}` and `use super::{x, y}`: a group after `::`.
GROUP_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")
COMMENT_RE = re.compile(r"//[^\n]*")


def modules_of(src):
    """Module path (tuple) -> file, for every .rs file under src."""
    mods = {}
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] in ("lib", "main", "mod"):
            parts = parts[:-1]
        if parts and parts[0] == "bin":
            continue  # each bin is a crate of its own
        mods[tuple(parts)] = f
    return mods


def strip_tests(text):
    """The file without its `#[cfg(test)]` items (tests may use anything)."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def resolve(module, head, rest, mods):
    """The module a path `head::rest...` written in `module` lands in."""
    if head == "crate":
        base = ()
    elif head == "self":
        base = module
    else:
        base = module[:-1]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    path = base + tuple(rest)
    # The longest prefix that is a module of the crate.
    for n in range(len(path), -1, -1):
        if path[:n] in mods:
            return path[:n]
    return None


def graph_of(src):
    mods = modules_of(src)
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        text = strip_tests(COMMENT_RE.sub("", f.read_text()))
        paths = []
        for g in GROUP_RE.finditer(text):
            prefix = [p for p in g.group(2).split("::") if p]
            for item in re.split(r"\s*,\s*", g.group(3)):
                item = item.strip().split(" as ")[0]
                if not item or item == "self" or item == "*":
                    paths.append((g.group(1), prefix))
                    continue
                head = item.split("::{")[0]
                paths.append((g.group(1), prefix + [p for p in head.split("::") if p and p != "*"]))
        for p in PATH_RE.finditer(text):
            paths.append((p.group(1), [x for x in p.group(2).split("::") if x]))
        for head, rest in paths:
            target = resolve(m, head, rest, mods)
            if target is None or target == m:
                continue
            # A submodule using an ancestor: the nesting itself, not a cycle.
            if m[: len(target)] == target:
                continue
            edges[m].add(target)
    return mods, edges


def cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def name(m):
    return "::".join(m) or "(crate root)"


def crates():
    for manifest in sorted(ROOT.glob("crates/*/Cargo.toml")):
        src = manifest.parent / "src"
        if src.is_dir():
            yield manifest.parent.name, src


KIND_CMP = re.compile(r"""(==|!=)\s*"([A-Za-z]+)"|"([A-Za-z]+)"\s*(==|!=)|Some\("([A-Za-z]+)"\)\s*=>|^\s*"([A-Za-z]+)"(\s*\|\s*"[A-Za-z]+")*\s*=>""", re.M)


# A match arm of tuple patterns: `("", "Pod") =>`, `(a, "Job") | (b, _) =>`.
TUPLE_ARM = re.compile(r"^\s*(\([^()\n]*\)(?:\s*\|\s*\([^()\n]*\))*)\s*(?:if [^\n]*)?=>", re.M)
STRING = re.compile(r'"([A-Za-z]+)"')


def kind_names():
    """The built-in kinds and their plurals (`"Pod"`, `"pods"`)."""
    text = (ROOT / "crates/api/src/registry.rs").read_text()
    kinds = set(re.findall(r'kind:\s*"([A-Z][A-Za-z]+)"', text))
    return kinds | set(re.findall(r'plural:\s*"([a-z]+)"', text))


def kind_branches():
    """`== "Pod"` and `"Pod" =>` in the apiserver outside the strategies."""
    kinds = kind_names()
    src = ROOT / "crates/apiserver/src"
    found = []
    for f in sorted(src.rglob("*.rs")):
        rel = f.relative_to(src)
        if rel.parts[0] == "strategy":
            continue
        text = strip_tests(COMMENT_RE.sub("", f.read_text()))
        for m in KIND_CMP.finditer(text):
            kind = next((g for g in m.groups() if g and g in kinds), None)
            if kind:
                line = text[: m.start()].count("\n") + 1
                found.append(f"crates/apiserver/src/{rel}:{line}: compares the kind {kind!r} ({m.group(0).strip()})")
        for m in TUPLE_ARM.finditer(text):
            # Kinds only: plurals in tuples are the authorizers' resource
            # attributes (`("", "pods", "")`), matched as Kubernetes does.
            kind = next((k for k in STRING.findall(m.group(1)) if k in kinds and k[0].isupper()), None)
            if kind:
                line = text[: m.start()].count("\n") + 1
                found.append(f"crates/apiserver/src/{rel}:{line}: matches the kind {kind!r} in a tuple ({m.group(1).strip()})")
    return found


LONG_FUNCTION = 100
FN_START = re.compile(r"^(\s*)(?:pub(?:\([a-z:]+\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)")


def long_functions():
    """Functions of more than LONG_FUNCTION lines with no reason above them."""
    found = []
    for f in sorted(ROOT.glob("crates/**/*.rs")):
        rel = f.relative_to(ROOT)
        if "tests" in rel.parts or f.name.endswith("tests.rs") or "target" in rel.parts:
            continue
        lines = strip_tests(f.read_text()).split("\n")
        i = 0
        while i < len(lines):
            m = FN_START.match(lines[i])
            if not m:
                i += 1
                continue
            indent, fn = m.group(1), m.group(2)
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith(("{", ";")):
                j += 1
            if j >= len(lines) or lines[j].rstrip().endswith(";"):
                i = j + 1
                continue
            k = j + 1
            while k < len(lines) and lines[k].rstrip() != indent + "}":
                k += 1
            length = k - i + 1
            if length > LONG_FUNCTION:
                above, a = [], i - 1
                while a >= 0 and lines[a].strip().startswith(("//", "#[")):
                    above.append(lines[a])
                    a -= 1
                first = lines[j + 1] if j + 1 < len(lines) else ""
                said = " ".join(above) + (first if first.strip().startswith("//") else "")
                if not re.search(r"\blong\b", said, re.I):
                    found.append(f"{rel}:{i + 1}: fn {fn} is {length} lines with no reason at its top")
            i = k + 1
    return found


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--graph":
        _, edges = graph_of(ROOT / "crates" / sys.argv[2] / "src")
        for m in sorted(edges):
            print(f"{name(m)}: {', '.join(name(t) for t in sorted(edges[m]))}")
        return 0
    problems = []
    for crate, src in crates():
        _, edges = graph_of(src)
        for comp in cycles(edges):
            problems.append(f"crates/{crate}: import cycle between {', '.join(name(m) for m in comp)}")
    problems += kind_branches()
    problems += long_functions()
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s): see scripts/check-modules.py's header for what is checked")
        return 1
    print("modules: no import cycle in any crate, no kind compared as a string in generic apiserver code,"
          f" no function over {LONG_FUNCTION} lines without a reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
