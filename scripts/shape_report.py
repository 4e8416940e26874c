#!/usr/bin/env python3
"""Prints the shape of the source tree: the longest function per top-level folder, the functions
over a line limit, and the include arrows between top-level folders (A -> B: files in A include
headers from B), marking arrows that go against the layer order.

    scripts/shape_report.py [--limit 80] [--root .]

Needs Universal Ctags (Debian's universal-ctags) on PATH for the function lengths; only the
standard library of any Python 3.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys

# The layers, lowest first. An arrow from a folder to one later in this list (a higher layer) is
# a layering violation. Folders on one rank may not include each other either way.
LAYERS = [
    ["core"],
    ["collectives", "optim"],
    ["offload", "device", "sharding", "unit"],
    ["nn", "runtime"],
    ["models"],
    ["planner", "checkpoint"],
    ["interop"],
    ["apps", "examples", "bench", "fuzz"],
    ["tests"],
]
# The branches the engine's step still takes on the stage or the placement (a sharding policy and
# the device ops should decide them): if/while/?: lines of these files that test one of these.
ENGINE_FILES = ["runtime/engine.cc"]
BRANCH = re.compile(r"\b(if|while)\b.*(stage|policy\.|offload|placement|replica|host_accessible)"
                    r"|(stage|policy\.|offload|placement|replica|host_accessible)[^;]*\?")
RANK = {folder: i for i, rank in enumerate(LAYERS) for folder in rank}
SOURCE = re.compile(r"\.(cc|h|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](?:zeroshard/)?([a-z_]+)/')


def source_files(root):
    for top in sorted(os.listdir(root)):
        path = os.path.join(root, top)
        if not os.path.isdir(path) or top.startswith(".") or top.startswith("build"):
            continue
        for dirpath, _, files in os.walk(path):
            for name in sorted(files):
                if SOURCE.search(name):
                    yield top, os.path.join(dirpath, name)


def functions(root, files):
    """(folder, file, name, lines) for every function definition ctags finds."""
    out = subprocess.run(
        ["ctags", "--output-format=json", "--fields=+ne", "--kinds-C++=f", "--language-force=C++",
         "-f", "-"] + [f for _, f in files],
        capture_output=True, text=True, check=True).stdout
    folder_of = {f: top for top, f in files}
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get("kind") != "function" or "end" not in tag:
            continue
        path = tag["path"]
        scope = tag.get("scope", "")
        name = f"{scope}::{tag['name']}" if scope else tag["name"]
        yield folder_of[path], os.path.relpath(path, root), name, tag["end"] - tag["line"] + 1


def arrows(root, files):
    counts = collections.Counter()
    for top, path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = INCLUDE.match(line)
                if m and m.group(1) != top and os.path.isdir(os.path.join(root, m.group(1))):
                    counts[(top, m.group(1))] += 1
    return counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=".")
    ap.add_argument("--limit", type=int, default=80)
    args = ap.parse_args()
    files = list(source_files(args.root))
    by_folder = collections.defaultdict(list)
    for folder, path, name, lines in functions(args.root, files):
        by_folder[folder].append((lines, name, path))

    print(f"## Longest function per folder (functions over {args.limit} lines)")
    print("| folder | longest | lines | over |")
    print("|---|---|---|---|")
    for folder in sorted(by_folder):
        fns = sorted(by_folder[folder], reverse=True)
        lines, name, path = fns[0]
        over = sum(1 for f in fns if f[0] > args.limit)
        print(f"| {folder} | `{name}` ({path}) | {lines} | {over} |")
    print()
    print(f"## Functions over {args.limit} lines outside tests/ and bench/")
    for folder in sorted(by_folder):
        if folder in ("tests", "bench"):
            continue
        for lines, name, path in sorted(by_folder[folder], reverse=True):
            if lines > args.limit:
                print(f"- {lines:4d} `{name}` ({path})")
    print()
    print("## Include arrows between folders (count of #include lines)")
    bad = 0
    for (a, b), n in sorted(arrows(args.root, files).items()):
        ra, rb = RANK.get(a), RANK.get(b)
        mark = ""
        if ra is not None and rb is not None and rb >= ra and a != "tests":
            mark = "  <-- against the layers" if rb > ra else "  <-- same rank"
            bad += 1
        print(f"- {a} -> {b}: {n}{mark}")
    print()
    print(f"arrows against the layer order: {bad}")
    print()
    print("## Stage/placement branches in the engine")
    for path in ENGINE_FILES:
        full = os.path.join(args.root, path)
        if not os.path.exists(full):
            continue
        with open(full, encoding="utf-8") as f:
            hits = [(i + 1, l.strip()) for i, l in enumerate(f) if BRANCH.search(l)]
        print(f"- {path}: {len(hits)}")
        for line, text in hits:
            print(f"  - {line}: `{text}`")


if __name__ == "__main__":
    sys.exit(main())
