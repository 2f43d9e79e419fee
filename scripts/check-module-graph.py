#!/usr/bin/env python3
"""Checks that the module graph in docs/architecture.md is Package.swift's, edge for edge, and that
Package.swift declares exactly the project modules each target imports (no unused dependency, no
cycle). Reads files only; exits 1 with one line per difference.

Usage: scripts/check-module-graph.py [REPO_DIR]
"""
import os
import re
import sys


def package_targets(text):
    """name -> (kind, path, [dependencies]) for every target in Package.swift."""
    out = {}
    for m in re.finditer(r"\.(target|executableTarget|testTarget|systemLibrary)\s*\(", text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        body = text[m.end():i - 1]
        name = re.search(r'name:\s*"([^"]+)"', body)
        if not name:
            continue
        path = re.search(r'path:\s*"([^"]+)"', body)
        deps = re.search(r"dependencies:\s*\[([^\]]*)\]", body)
        kind = m.group(1)
        default = ("Tests/" if kind == "testTarget" else "Sources/") + name.group(1)
        out[name.group(1)] = (kind, path.group(1) if path else default,
                              re.findall(r'"([^"]+)"', deps.group(1)) if deps else [])
    return out


IMPORT = re.compile(r"\s*(?:@testable\s+|@_exported\s+|@preconcurrency\s+|public\s+|package\s+|internal\s+)*"
                    r"import\s+(?:struct |class |enum |func )?([A-Za-z_][A-Za-z0-9_]*)")


def imported(root, path, known):
    found = set()
    for dirpath, _, files in os.walk(os.path.join(root, path)):
        for f in files:
            if f.endswith(".swift"):
                for line in open(os.path.join(dirpath, f), errors="replace"):
                    m = IMPORT.match(line)
                    if m and m.group(1) in known:
                        found.add(m.group(1))
    return found


def documented(text):
    """name -> set of dependencies, from the block between the module-graph markers."""
    m = re.search(r"<!-- module-graph:begin -->\s*```[a-z]*\n(.*?)```\s*<!-- module-graph:end -->", text, re.S)
    if not m:
        return None
    out, current = {}, None
    for line in m.group(1).splitlines():
        if not line.strip():
            continue
        if line[0].isspace() and current:
            out[current] |= {d.strip() for d in line.split(",") if d.strip()}
            continue
        name, _, rest = line.strip().partition(" ")
        current = name
        rest = rest.strip()
        out[name] = set() if rest in ("", "-") else {d.strip() for d in rest.split(",") if d.strip()}
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    targets = package_targets(open(os.path.join(root, "Package.swift")).read())
    problems = []
    # Swift modules of the project (C modules are leaves and are documented as dependencies only).
    modules = {n: t for n, t in targets.items() if t[0] != "systemLibrary" and not t[1].startswith("CModules/")}
    for name, (kind, path, deps) in sorted(modules.items()):
        uses = imported(root, path, set(targets) - {name})
        for d in deps:
            if d in targets and targets[d][0] != "systemLibrary" and not targets[d][1].startswith("CModules/") \
                    and d not in uses:
                problems.append(f"{name}: declares {d} but imports it nowhere")
        # An undeclared import compiles only when another target happened to build the module first.
        for d in sorted(uses - set(deps)):
            if d in modules:
                problems.append(f"{name}: imports {d} but does not declare it")
    # Cycles among the declared edges of the non-test modules.
    graph = {n: [d for d in t[2] if d in modules] for n, t in modules.items() if t[0] != "testTarget"}
    state = {}

    def visit(n, stack):
        if state.get(n) == 1:
            problems.append("cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            return
        if state.get(n) == 2:
            return
        state[n] = 1
        for d in graph.get(n, []):
            visit(d, stack + [n])
        state[n] = 2

    for n in graph:
        visit(n, [])
    # The documented graph: every non-test Swift module, with exactly its Package.swift edges.
    doc = documented(open(os.path.join(root, "docs/architecture.md")).read())
    if doc is None:
        problems.append("docs/architecture.md: no module-graph block")
        doc = {}
    for name, (kind, path, deps) in sorted(modules.items()):
        if kind == "testTarget":
            continue
        if name not in doc:
            problems.append(f"docs/architecture.md: {name} is missing from the module graph")
            continue
        for d in sorted(set(deps) - doc[name]):
            problems.append(f"docs/architecture.md: {name} -> {d} is in Package.swift but not in the graph")
        for d in sorted(doc[name] - set(deps)):
            problems.append(f"docs/architecture.md: {name} -> {d} is in the graph but not in Package.swift")
    for name in sorted(set(doc) - {n for n, t in modules.items() if t[0] != "testTarget"}):
        problems.append(f"docs/architecture.md: {name} is in the graph but is no module of Package.swift")
    for p in problems:
        print(p)
    print(f"module graph: {len(problems)} problem(s)")
    return 1 if problems else 0


sys.exit(main())
