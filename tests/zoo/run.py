#!/usr/bin/env python3
"""run.py — one case of the shape-idiom zoo on one backend, against expect.txt.

    run.py --dcc DCC --backend interp|cpu CASE/VARIANT

Runs `dcc check tests/zoo/CASE/VARIANT --backend B [options]` (VARIANT:
op17, op20, dynamo: see gen_zoo.py; tf2onnx: gen_tf.py) and holds the result to the line of
CASE/VARIANT in tests/zoo/expect.txt:

  pass [OPTIONS]   every data set passes (exit 0), at atol 1e-5 unless
                   OPTIONS give another
  error 'WHERE: error: MESSAGE'
                   the model is refused (exit 1) with exactly this located
                   error after the model's path (`node 16 (Expand
                   "/Expand"): error: ...`); any other outcome (a pass, a
                   crash, a wrong result, another message) fails the test,
                   so that a fix shows up as a failing test until its line
                   says pass

A sanitizer report fails either. A case not generated (no model.onnx:
tests/zoo/gen_zoo.py has not written it) fails: the cases are committed.
"""
import argparse
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from dcc_run import expect_pass, run_check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def expectations(path):
    """{key: (kind, arg)}: ("pass", [options]) or ("error", message)."""
    table = {}
    for lineno, line in enumerate(open(path), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            f = shlex.split(line, comments=True)
        except ValueError as e:
            sys.exit("%s:%d: error: %s" % (path, lineno, e))
        if len(f) < 2 or f[1] not in ("pass", "error") or (f[1] == "error" and len(f) != 3):
            sys.exit("%s:%d: error: want 'CASE/VARIANT pass [OPTIONS]' or "
                     "'CASE/VARIANT error \\'MESSAGE\\''" % (path, lineno))
        if f[0] in table:
            sys.exit("%s:%d: error: %s has two lines" % (path, lineno, f[0]))
        table[f[0]] = (f[1], f[2:] if f[1] == "pass" else f[2])
    return table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dcc", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--expect", default=os.path.join(HERE, "expect.txt"))
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("key", help="CASE/VARIANT")
    a = ap.parse_args()
    table = expectations(a.expect)
    if a.key not in table:
        print("FAIL: %s has no line in %s" % (a.key, a.expect))
        return 1
    kind, arg = table[a.key]
    name, variant = a.key.rsplit("/", 1)
    d = os.path.join(HERE, name, variant)
    model = os.path.join(d, "model.onnx")
    if not os.path.isfile(model):
        print("FAIL: no %s: run python3 tests/zoo/gen_zoo.py %s" % (model, name))
        return 1
    # float32 against ONNX Runtime's float32: atol 1e-5 unless the line says otherwise
    cmd = [a.dcc, "check", d, "--backend", a.backend, "--atol", "1e-5"] + (arg if kind == "pass" else [])
    r = run_check(cmd, a.timeout)
    if r is None:
        return 1
    rc, out = r
    if kind == "pass":
        return expect_pass(rc)
    want = model + ": " + arg
    errors = [l for l in out.splitlines() if "error:" in l]
    if rc == 1 and errors == [want]:
        print("ok: refused as expect.txt says (the idiom is not supported yet)")
        return 0
    if rc == 0:
        print("FAIL: every data set passes now: make its line in %s say pass" % a.expect)
    else:
        print("FAIL: expected exit 1 with the one error\n  %s\ngot exit %d with %d error lines"
              % (want, rc, len(errors)))
    return 1


if __name__ == "__main__":
    sys.exit(main())
