#!/usr/bin/env python3
"""Checks that the room's wire names are spelled only in Sources/RoomProtocol: mode names and their
aliases (SEND_AND_RECV, RECV_ONLY, SIGNALLING_ONLY, CONFERENCE, VIEWER), track kinds (mic, webcam,
screen, screenAudio, shareAudio), error names (ERROR_INVALID_PARAMETER, INVALID_TOKEN, ...) and leave
reasons (MANUAL_LEAVE_CALLED, ...). Elsewhere in Sources/ a Swift string literal that is exactly one of
these names is an error: use RoomProtocol's types (`ParticipantMode.recvOnly.rawValue`,
`TrackKind(wireName:)`, `RoomError.canonicalName(code)`, `RoomLeaveCode.name`).

The names are read from RoomProtocol's own source, so a name added there is checked at once. Only
whole literals count: a message that mentions a name ("needs SEND_AND_RECV mode"), comments and
multi-line help text are fine. Not checked: the track-kind aliases `audio`, `video` and `share` (they
are also SDP media types and metric labels), Tests/ (they speak the wire as a client does) and the
browser page's JavaScript. Before scanning, the checker proves itself on a planted sample.
Reads files only; exits 1 with one line per literal.

Usage: scripts/check-wire-strings.py [REPO_DIR]
"""
import os
import re
import sys

HOME = "Sources/RoomProtocol"
# Also SDP media types and metric labels: too common to reserve.
UNCHECKED_ALIASES = {"audio", "video", "share"}


def wire_names(root):
    """The reserved names, read from RoomProtocol's declarations."""
    text = {f: open(os.path.join(root, HOME, f)).read() for f in ("RoomVocabulary.swift", "RoomError.swift")}
    vocab, errors = text["RoomVocabulary.swift"], text["RoomError.swift"]
    names = set()

    def enum_body(src, name):
        m = re.search(r"enum " + name + r"\b[^{]*\{(.*?)\n\}", src, re.S)
        if not m:
            sys.exit(f"check-wire-strings: enum {name} not found in {HOME}")
        return m.group(1)

    mode = enum_body(vocab, "ParticipantMode")
    names |= set(re.findall(r'case \w+ = "([^"]+)"', mode))
    names |= set(re.findall(r'"([A-Z_]+)": \.', mode))  # aliases
    kind = enum_body(vocab, "TrackKind")
    for line in re.findall(r"^\s*case ([\w, ]+)$", kind, re.M):
        names |= {c.strip() for c in line.split(",")}
    names |= set(re.findall(r'"(\w+)": \.', kind)) - UNCHECKED_ALIASES
    names |= set(re.findall(r'\d{4}: "([A-Z_]+)"', errors))
    names |= set(re.findall(r"^\s*case ([A-Z_]+) = \d+", enum_body(errors, "RoomLeaveCode"), re.M))
    for expected in ("SEND_AND_RECV", "VIEWER", "mic", "screenAudio", "ERROR_INVALID_PARAMETER", "MANUAL_LEAVE_CALLED"):
        if expected not in names:
            sys.exit(f"check-wire-strings: could not read '{expected}' from {HOME}; update this script")
    return names


LITERAL = re.compile(r'(#*)"((?:[^"\\\n]|\\.)*)"\1')


def literals(text):
    """(line, content) of every single-line string literal outside comments and multi-line strings."""
    out = []
    in_block = in_multiline = False
    for number, line in enumerate(text.splitlines(), 1):
        i = 0
        while i < len(line):
            if in_block:
                end = line.find("*/", i)
                if end < 0:
                    break
                in_block, i = False, end + 2
                continue
            if in_multiline:
                end = line.find('"""', i)
                if end < 0:
                    break
                in_multiline, i = False, end + 3
                continue
            if line.startswith("//", i):
                break
            if line.startswith("/*", i):
                in_block, i = True, i + 2
                continue
            if line.startswith('"""', i) or re.match(r'#+"""', line[i:]):
                in_multiline, i = True, line.index('"""', i) + 3
                continue
            m = LITERAL.match(line, i) if line[i] in '#"' else None
            if m:
                out.append((number, m.group(2)))
                i = m.end()
                continue
            i += 1
    return out


def problems_in(path, text, names):
    return [f'{path}:{n}: "{s}" is a room wire name; spell it through RoomProtocol'
            for n, s in literals(text) if s in names]


def self_test(names):
    planted = '\n'.join([
        'let a = "RECV_ONLY"  // planted: must be found',
        '// "SEND_AND_RECV" in a comment is fine',
        'let b = "needs SEND_AND_RECV mode", c = "\\(x) mic"',
        'let help = """', '  --mode SEND_AND_RECV', '  """',
        'let d = ["kind": "webcam"]  /* "mic" */',
    ])
    found = [p.split(": ")[1] for p in problems_in("planted", planted, names)]
    if found != ['"RECV_ONLY" is a room wire name; spell it through RoomProtocol',
                 '"webcam" is a room wire name; spell it through RoomProtocol']:
        sys.exit(f"check-wire-strings: the scanner failed its self-test: {found}")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    names = wire_names(root)
    self_test(names)
    problems = []
    for dirpath, _, files in os.walk(os.path.join(root, "Sources")):
        rel = os.path.relpath(dirpath, root)
        if rel == HOME or rel.startswith(HOME + os.sep):
            continue
        for f in sorted(files):
            if f.endswith(".swift"):
                path = os.path.join(rel, f)
                problems += problems_in(path, open(os.path.join(root, path), errors="replace").read(), names)
    for p in sorted(problems):
        print(p)
    print(f"wire strings: {len(problems)} literal(s) outside {HOME} ({len(names)} names checked)")
    return 1 if problems else 0


sys.exit(main())
