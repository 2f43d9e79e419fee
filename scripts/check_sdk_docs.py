#!/usr/bin/env python3
"""Lists the public symbols of a module's symbol graph that have no documentation comment.

    scripts/check_sdk_docs.py SYMBOLGRAPH_DIR MODULE

Exits 1 when one is found. Synthesized members (no source location) and default implementations
of documented protocol requirements are not counted: DocC shows the requirement's comment there.
"""
import json
import pathlib
import sys


def undocumented(graph_dir: pathlib.Path, module: str) -> list[str]:
    missing = []
    for path in sorted(graph_dir.glob(f"{module}*.symbols.json")):
        graph = json.loads(path.read_text())
        defaults = {r["source"] for r in graph.get("relationships", []) if r["kind"] == "defaultImplementationOf"}
        for symbol in graph["symbols"]:
            if symbol["accessLevel"] not in ("public", "open") or symbol.get("docComment"):
                continue
            if "location" not in symbol or symbol["identifier"]["precise"] in defaults:
                continue
            where = symbol["location"]["uri"].rsplit("/", 1)[-1] + ":" + str(symbol["location"]["position"]["line"] + 1)
            missing.append(f"{where}: {'.'.join(symbol['pathComponents'])}")
    return missing


if __name__ == "__main__":
    directory, module = pathlib.Path(sys.argv[1]), sys.argv[2]
    if not list(directory.glob(f"{module}*.symbols.json")):
        sys.exit(f"no symbol graph of {module} in {directory}")
    found = undocumented(directory, module)
    for line in found:
        print(f"undocumented public symbol: {line}")
    sys.exit(1 if found else 0)
