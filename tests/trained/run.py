#!/usr/bin/env python3
"""run.py — one trained model on one backend, against what expect.txt says.

    run.py --dcc DCC --models DIR --backend interp|cpu NAME

Runs `dcc check DIR/NAME --backend B [options]` and holds the result to
NAME's line in tests/trained/expect.txt:

  pass                    every data set passes (exit 0)
  refused "TEXT"          the import fails (exit 1) with one located error,
                          `model.onnx: node N ...`, that contains TEXT
  unsupported OP[,OP...]  the import fails (exit 1) with one located error
                          per unsupported node, `model.onnx: node N (OP
                          "name"): error: unsupported op OP (opset K)`, and
                          the ops named are exactly the listed ones: a crash,
                          a wrong result or any other error fails the test

A sanitizer report fails either. When DIR/NAME has not been collected
(tests/trained/collect.py has not run, or could not get that model) the
test prints why and exits 77, which ctest shows as skipped.
"""
import argparse
import os
import re
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from dcc_run import expect_pass, run_check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77
LOCATED = re.compile(r'^(.*model\.onnx): node (\d+) \(([\w.]+)(?: "[^"]*")?\): error: '
                     r'unsupported op ([\w.]+) \((opset \d+[^)]*)\)$')
MORE = re.compile(r'^.*model\.onnx: error: \.\.\. and (\d+) more unsupported ops \((.*)\)$')


def expectations(path):
    """{name: (kind, [ops], [dcc options])} from expect.txt."""
    table = {}
    for lineno, line in enumerate(open(path), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        f = shlex.split(line)
        if len(f) < 2 or f[1] not in ("pass", "unsupported", "refused") or (f[1] != "pass" and len(f) < 3):
            sys.exit("%s:%d: error: want 'NAME pass [OPTIONS]', 'NAME unsupported OP[,OP...]' or "
                     "'NAME refused \"TEXT\"'" % (path, lineno))
        if f[1] == "pass":
            table[f[0]] = ("pass", [], f[2:])
        elif f[1] == "refused":
            table[f[0]] = ("refused", [f[2]], f[3:])
        else:
            table[f[0]] = ("unsupported", f[2].split(","), f[3:])
    return table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dcc", required=True)
    ap.add_argument("--models", required=True, help="the directory collect.py wrote")
    ap.add_argument("--backend", required=True)
    ap.add_argument("--expect", default=os.path.join(HERE, "expect.txt"))
    ap.add_argument("--timeout", type=int, default=1200)
    ap.add_argument("name")
    a = ap.parse_args()
    table = expectations(a.expect)
    if a.name not in table:
        print("error: %s has no line in %s" % (a.name, a.expect))
        return 1
    kind, ops, opts = table[a.name]
    d = os.path.join(a.models, a.name)
    if not os.path.isfile(os.path.join(d, "model.onnx")):
        print("SKIP: %s was not collected (no %s/model.onnx): run make trained (python3 tests/trained/collect.py)"
              % (a.name, d))
        return SKIP
    cmd = [a.dcc, "check", d, "--backend", a.backend] + opts
    r = run_check(cmd, a.timeout)
    if r is None:
        return 1
    rc, out = r
    if kind == "pass":
        return expect_pass(rc)
    if kind == "refused":  # exit 1 with one located error holding the text
        errors = [line for line in out.splitlines() if "error:" in line]
        if rc != 1 or len(errors) != 1 or not re.match(r'^.*model\.onnx: node \d+ ', errors[0]) \
                or ops[0] not in errors[0]:
            print("FAIL: expected exit 1 with one located error containing \"%s\"; dcc exited %d: %s"
                  % (ops[0], rc, out.strip()))
            return 1
        print("ok: refused with a located error: " + errors[0])
        return 0
    # unsupported: exit 1, every error line a located unsupported-op error,
    # naming exactly the expected ops
    if rc != 1:
        print("FAIL: expected exit 1 (unsupported %s), dcc exited %d" % (",".join(ops), rc))
        return 1
    seen, more = set(), 0
    for line in out.splitlines():
        if "error:" not in line:
            continue
        m = LOCATED.match(line)
        if m:
            if m.group(3) != m.group(4):
                print("FAIL: the error names op %s at a node of type %s: %s" % (m.group(4), m.group(3), line))
                return 1
            seen.add(m.group(4))
        elif MORE.match(line):  # the nodes not listed, their ops named once
            more += int(MORE.match(line).group(1))
            seen.update(op for op in MORE.match(line).group(2).split(", ") if op != "...")
        else:
            print("FAIL: expected only located unsupported-op errors, got: " + line)
            return 1
    if seen != set(ops):
        print("FAIL: unsupported ops named: %s; expected: %s%s" % (
            ",".join(sorted(seen)) or "none", ",".join(sorted(ops)),
            " (and %d more not shown)" % more if more else ""))
        return 1
    print("ok: refused with located errors naming the unsupported op%s %s" % ("s" if len(ops) > 1 else "", ",".join(ops)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
