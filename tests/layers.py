#!/usr/bin/env python3
"""layers.py — the tree's layering, checked on the built objects.

    python3 tests/layers.py BUILD_DIR

disc's source is in layers, each using only those below it:

    ir  <-  runtime (the interpreter, the oracle)  <-  passes  <-  codegen  <-  api, dcc
    ir, runtime  <-  frontends (folding constants on the interpreter)       <-  api, dcc

Reads every object of libdisc (BUILD_DIR/CMakeFiles/disc.dir) and dcc with
`nm`: a file that calls a function or reads a variable defined in a file of
a higher layer (or of a sibling layer it may not use) is reported, as is a
circle of calls among the files of codegen/ (the JIT and the AOT target
must not call back into each other's files through the driver). Includes
are checked the same way from the sources: a lower layer's file that
includes a higher layer's header. Exit 0 when all holds, 1 with the list
of violations otherwise.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# layer -> the layers it may use (besides itself)
USES = {
    "ir": set(),
    "runtime": {"ir"},
    "passes": {"ir", "runtime"},
    "frontends": {"ir", "runtime"},
    "codegen": {"ir", "runtime", "passes"},
    "api": {"ir", "runtime", "passes", "frontends", "codegen"},
    "dcc": {"ir", "runtime", "passes", "frontends", "codegen", "api"},
}
# headers outside the layer directories: include/disc.h is the api layer's
HEADER_LAYER = {"disc.h": "api"}
# files that are one module (one header, host.h: the host flow, whose
# library calls and kernel launches call each other), one node in the
# circle check
MODULE = {"codegen/hostlib.c": "codegen/host.c"}


def layer_of(path):
    top = path.split("/")[0]
    if top == "onnx-gen":  # protobuf-c's generated code for the ONNX frontend
        return "frontends"
    return top if top in USES else None


def objects(build):
    out = []
    for sub in ("CMakeFiles/disc.dir", "CMakeFiles/dcc.dir"):
        base = os.path.join(build, sub)
        for dirpath, _, files in os.walk(base):
            for f in files:
                if f.endswith(".c.o"):
                    full = os.path.join(dirpath, f)
                    src = os.path.relpath(full, base)[: -len(".o")]
                    out.append((src, full))
    return sorted(out)


def symbols(obj):
    p = subprocess.run(["nm", "-P", obj], stdout=subprocess.PIPE, text=True, check=True)
    defined, used = set(), set()
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            used.add(name)
        elif kind in "TDBRCVW":  # lower case: local to the file
            defined.add(name)
    return defined, used


def circles(nodes, edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def check_includes(bad):
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for top in USES:
        d = os.path.join(ROOT, top)
        for dirpath, _, files in os.walk(d):
            for f in files:
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), ROOT)
                with open(os.path.join(ROOT, path), errors="replace") as fh:
                    text = fh.read()
                for h in inc.findall(text):
                    target = HEADER_LAYER.get(h) or layer_of(h)
                    if target and target != top and target not in USES[top]:
                        bad.append(f"{path} includes {h} (layer {target}; {top} may use "
                                   f"{', '.join(sorted(USES[top])) or 'nothing'})")


def check_version(bad):
    """include/disc.h's DISC_VERSION is the project's (CMakeLists.txt), which
    the compiler's own files get as DISC_PROJECT_VERSION."""
    with open(os.path.join(ROOT, "include", "disc.h")) as f:
        h = re.search(r'#define DISC_VERSION "([^"]+)"', f.read())
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        c = re.search(r"project\(disc VERSION ([\d.]+)", f.read())
    if not h or not c or h.group(1) != c.group(1):
        bad.append(f"include/disc.h's DISC_VERSION ({h and h.group(1)}) is not CMakeLists.txt's project "
                   f"version ({c and c.group(1)})")


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    objs = objects(sys.argv[1])
    if not objs:
        print(f"layers: no objects under {sys.argv[1]}/CMakeFiles/disc.dir; build first", file=sys.stderr)
        return 2
    owner, uses = {}, {}
    for src, obj in objs:
        defined, used = symbols(obj)
        for s in defined:
            owner.setdefault(s, src)
        uses[src] = used
    bad, cg_edges = [], {}
    for src, used in uses.items():
        me = layer_of(src)
        for s in sorted(used):
            dst = owner.get(s)
            if not dst or dst == src:
                continue
            them = layer_of(dst)
            if me and them and them != me and them not in USES[me]:
                bad.append(f"{src} uses {s} from {dst} (layer {them}; {me} may use "
                           f"{', '.join(sorted(USES[me])) or 'nothing'})")
            a, b = MODULE.get(src, src), MODULE.get(dst, dst)
            if me == "codegen" and them == "codegen" and a != b:
                cg_edges.setdefault(a, set()).add(b)
    for comp in circles({MODULE.get(s, s) for s, _ in objs if layer_of(s) == "codegen"}, cg_edges):
        bad.append("a circle of calls in codegen/: " + " -> ".join(comp))
    check_includes(bad)
    check_version(bad)
    for b in bad:
        print("layers: " + b)
    print(f"layers: {len(objs)} objects, {len(owner)} symbols, {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
