#!/usr/bin/env python3
"""op_table.py — per-op totals of ONNX node tests from a run's results.

    run_node_tests.py --dcc build/dcc --results /tmp/r.tsv
    op_table.py /tmp/r.tsv [--ops Add,Sub,...] [--failing]

Each test is counted under the op it tests: the op of its model's single
node, or for a multi-node model the node whose snake-case name the test's
name starts with; a `*_expanded*` test counts under the op of the test it
expands. Prints a markdown table `| op | passed / total |`, sorted by op
(with --ops, only those ops, in that order), and the totals. --failing
lists the tests that do not pass under each op instead.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_node_tests import node_test_dir  # noqa: E402


def snake(op):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", op).lower()


def op_of(root, name, cache):
    if name in cache:
        return cache[name]
    import onnx
    base = re.sub(r"_expanded(_ver\d+)?$", "", name)
    if base != name and os.path.isdir(os.path.join(root, base)):
        cache[name] = op_of(root, base, cache)
        return cache[name]
    m = onnx.load(os.path.join(root, name, "model.onnx"), load_external_data=False)
    types = [n.op_type for n in m.graph.node]
    op = types[0] if len(set(types)) == 1 else None
    if op is None:
        t = name[len("test_"):]
        cands = [o for o in set(types) if t.startswith(snake(o))]
        op = max(cands, key=len) if cands else (types[-1] if types else "?")
    cache[name] = op
    return op


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", help="the file written by run_node_tests.py --results")
    ap.add_argument("--ops", help="comma-separated ops to list, in this order")
    ap.add_argument("--failing", action="store_true", help="list the tests that do not pass")
    a = ap.parse_args()
    root = node_test_dir()
    rows = [l.rstrip("\n").split("\t") for l in open(a.results) if l.strip()]
    cache, per = {}, {}
    for r in rows:
        name, status, msg = r[0], r[1], r[2] if len(r) > 2 else ""
        per.setdefault(op_of(root, name, cache), []).append((name, status, msg))
    ops = a.ops.split(",") if a.ops else sorted(per, key=str.lower)
    if a.failing:
        for op in ops:
            for name, status, msg in per.get(op, []):
                if status != "passed":
                    print("%s %s %s: %s" % (op, status, name, msg))
        return 0
    print("| op | passed / total |")
    print("| --- | --- |")
    for op in ops:
        t = per.get(op, [])
        print("| %s | %d / %d |" % (op, sum(s == "passed" for _, s, _ in t), len(t)))
    n = {s: sum(r[1] == s for r in rows) for s in ("passed", "failed", "unsupported")}
    print("\n%d of %d node tests pass (%d fail, %d unsupported)"
          % (n["passed"], len(rows), n["failed"], n["unsupported"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
