#!/usr/bin/env python3
"""run_node_tests.py — ONNX's own backend node tests through `dcc check`.

The `onnx` pip package ships one directory per node test
(onnx/backend/test/data/node/test_*/ with model.onnx and test_data_set_*).
Each is run as `dcc check DIR --backend interp` (in parallel, with a time
limit per test) and sorted into

  passed       dcc check exited 0
  unsupported  the importer rejected an op it does not handle
               ("error: unsupported op ...")
  failed       anything else: a wrong result, a crash, a time-out, an import
               or shape-analysis error on an op the importer claims

tests/conformance/expected_pass.txt lists the tests that must pass (sorted,
one per line). A listed test that does not pass fails the run (exit 1); a
test that passes but is not listed is reported as newly passing. --update
rewrites the list with every test that passes now, for review in the diff.

The last line of the output is always `N passed, N failed`, counted over
the expected-pass list (a listed test that fails is a failure).
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def node_test_dir():
    import onnx
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")


def first_line(text):
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def run_one(dcc, path, timeout, extra):
    """Returns (status, message) for one test directory."""
    cmd = [dcc, "check", path, "--backend", "interp"] + extra
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, text=True, errors="replace")
    except subprocess.TimeoutExpired:
        return "failed", "timed out after %d s" % timeout
    for line in p.stderr.splitlines():  # a sanitizer report fails any test
        if "Sanitizer" in line or "runtime error:" in line:
            return "failed", line.strip()
    if p.returncode == 0:
        return "passed", ""
    if "error: the model imports no opset of the default ONNX domain" in p.stderr:
        return "unsupported", "only ops of other domains"
    if "error: unsupported op " in p.stderr:
        ops = sorted({l.split("unsupported op ", 1)[1].split(" ", 1)[0]
                      for l in p.stderr.splitlines() if "unsupported op " in l})
        return "unsupported", ", ".join(ops)
    if p.returncode < 0:
        return "failed", "killed by signal %d: %s" % (-p.returncode, first_line(p.stderr))
    msg = first_line(p.stderr)
    for line in p.stdout.splitlines():
        if ": FAIL" in line:
            msg = line.strip()
            break
    base = os.path.dirname(path) + os.sep
    return "failed", (msg or "exit status %d" % p.returncode).replace(base, "")


def read_list(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [l.strip() for l in f if l.strip() and not l.startswith("#")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dcc", required=True, help="path to the dcc binary")
    ap.add_argument("--expected", default=os.path.join(HERE, "expected_pass.txt"))
    ap.add_argument("--update", action="store_true", help="rewrite the expected-pass list")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=60, help="seconds per test")
    ap.add_argument("--dcc-arg", action="append", default=[],
                    help="an extra argument for dcc check, e.g. --dcc-arg=--no-shape (repeatable)")
    ap.add_argument("--results", metavar="FILE",
                    help="also write one line per test, 'name<TAB>status<TAB>message' (for op_table.py)")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every failure and unsupported test")
    ap.add_argument("--match", metavar="REGEX", help="only the tests whose names REGEX finds (judged alone)")
    ap.add_argument("tests", nargs="*", help="only these test names (default: all)")
    a = ap.parse_args()

    try:
        root = node_test_dir()
    except ImportError:
        print("SKIP: the onnx python package is not installed (scripts/setup.sh installs it)")
        return 77
    names = sorted(n for n in os.listdir(root)
                   if os.path.isfile(os.path.join(root, n, "model.onnx")))
    if a.tests:
        names = [n for n in names if n in set(a.tests)]
    if a.match:
        names = [n for n in names if re.search(a.match, n)]

    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        futs = {ex.submit(run_one, a.dcc, os.path.join(root, n), a.timeout, a.dcc_arg): n
                for n in names}
        for f in concurrent.futures.as_completed(futs):
            results[futs[f]] = f.result()

    by = {"passed": [], "failed": [], "unsupported": []}
    for n in names:
        by[results[n][0]].append(n)

    if a.results:
        with open(a.results, "w") as f:
            for n in names:
                f.write("%s\t%s\t%s\n" % (n, results[n][0], results[n][1].replace("\n", " ")))

    if a.verbose:
        for n in by["unsupported"]:
            print("unsupported %s: %s" % (n, results[n][1]))
    for n in by["failed"]:
        print("FAIL %s: %s" % (n, results[n][1]))

    expected = read_list(a.expected)
    passing = set(by["passed"])
    # With a list of tests on the command line, only those are judged.
    judged = set(names) if a.tests or a.match else None
    regressions = [n for n in expected if n not in passing and (judged is None or n in judged)]
    newly = [n for n in by["passed"] if n not in set(expected)]

    for n in newly:
        print("newly passing: %s" % n)
    for n in regressions:
        print("REGRESSION %s: listed in %s but %s%s" % (
            n, os.path.basename(a.expected),
            results[n][0] if n in results else "not found",
            (": " + results[n][1]) if n in results and results[n][1] else ""))

    if a.update:
        if a.tests:
            sys.exit("--update needs the full run (no test names)")
        with open(a.expected, "w") as f:
            for n in sorted(passing):
                f.write(n + "\n")
        print("updated %s: %d tests" % (a.expected, len(passing)))
        regressions = []

    print("node tests (onnx %s): %d passed / %d failed / %d unsupported; %d expected to pass, %d newly passing"
          % (onnx_version(), len(by["passed"]), len(by["failed"]), len(by["unsupported"]),
             len(expected), len(newly)))
    # the closing line judges the expected-pass list: known failures of
    # unsupported features are reported above, not counted here
    judged_expected = [n for n in expected if judged is None or n in judged]
    print("%d passed, %d failed" % (len(judged_expected) - len(regressions), len(regressions)))
    return 1 if regressions else 0


def onnx_version():
    import onnx
    return onnx.__version__


if __name__ == "__main__":
    sys.exit(main())
