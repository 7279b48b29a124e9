#!/usr/bin/env python3
"""run.py — the golden test runner.

A golden file tests/golden/<area>/<name>.disc holds, in this order:

    # RUN: <command>          one or more; run through the shell
    # EXIT: N                 optional: expected exit status of the last
                              RUN command (default 0; earlier ones must exit 0)
    <input>                   the IR text
    #--- expect
    # <expected stdout+stderr, each line behind "# " ("#" if empty)>

Every line after "#--- expect" is a comment, so a golden file is itself a
valid IR file (`dcc emit tests/golden/ir/dot.disc` works). The header
"#--- expect (no newline at end)" marks output whose last line has no
newline. Everything before the "#--- expect" line (headers included: to
the IR parser they are comments) is written to <tmp>/<area>/<name>.disc. In a
command, %s stands for that path and the word dcc for the binary given by
--dcc. Commands run with the golden file's directory as the working
directory; their combined output, with the temporary path replaced by %s,
is compared with the expectation.

    run.py --dcc PATH --tmp DIR [--update] FILES...

Exit status 0 if every file matches, 1 otherwise (a unified diff is
printed). --update rewrites the expectation of each file in place.
"""
import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys

EXPECT = "#--- expect\n"
EXPECT_NOEOL = "#--- expect (no newline at end)\n"


def encode(out):
    """The expectation as comment lines."""
    head = EXPECT if out.endswith("\n") or not out else EXPECT_NOEOL
    lines = out.split("\n")
    if out.endswith("\n"):
        lines.pop()
    return head + "".join(("# " + l if l else "#") + "\n" for l in lines)


def decode(body, noeol):
    """The expectation from its comment lines; None if a line is not one."""
    out = []
    for line in body.splitlines():
        if line.startswith("# "):
            out.append(line[2:])
        elif line == "#":
            out.append("")
        else:
            return None
    text = "\n".join(out)
    return text if noeol else text + "\n" if out else ""
DCC_WORD = re.compile(r"(?<![\w/.-])dcc(?![\w/.-])")


def parse_golden(text):
    """Splits a golden file into (input, expected, runs, exit)."""
    m = re.search(r"^#--- expect( \(no newline at end\))?\n", text, re.M)
    if m:
        inp = text[:m.start()]
        expected = decode(text[m.end():], m.group(1) is not None)
        if expected is None:
            expected = "<every line after '#--- expect' must be a '# ' comment>\n"
    else:
        inp, expected = text, None
    runs, status = [], 0
    for line in inp.splitlines():
        m = re.match(r"#\s*RUN:\s*(.*)$", line)
        if m:
            runs.append(m.group(1).strip())
        m = re.match(r"#\s*EXIT:\s*(-?\d+)\s*$", line)
        if m:
            status = int(m.group(1))
    return inp, expected, runs, status


def run_one(path, dcc, tmp, update):
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    inp, expected, runs, want = parse_golden(text)
    name = os.path.basename(path)
    if not runs:
        print(f"{path}: no '# RUN:' line")
        return False
    if expected is None and not update:
        print(f"{path}: no '#--- expect' line")
        return False

    area = os.path.basename(os.path.dirname(os.path.abspath(path)))
    tdir = os.path.join(os.path.abspath(tmp), area)
    os.makedirs(tdir, exist_ok=True)
    tpath = os.path.join(tdir, name)
    with open(tpath, "w", encoding="utf-8", newline="") as f:
        f.write(inp)

    out, ok = [], True
    cwd = os.path.dirname(os.path.abspath(path))
    for k, cmd in enumerate(runs):
        full = DCC_WORD.sub(lambda m: shlex.quote(os.path.abspath(dcc)), cmd)
        full = full.replace("%s", shlex.quote(tpath))
        p = subprocess.run(full, shell=True, cwd=cwd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        out.append(p.stdout.decode("utf-8", errors="replace"))
        expect_rc = want if k == len(runs) - 1 else 0
        if p.returncode != expect_rc:
            print(f"{path}: RUN line {k + 1} exited with {p.returncode}, expected {expect_rc}: {cmd}")
            ok = False
    actual = "".join(out).replace(tpath, "%s")

    if update:
        if actual != expected:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(inp + encode(actual))
            print(f"{path}: updated")
        return ok
    if actual != expected:
        diff = difflib.unified_diff(expected.splitlines(keepends=True),
                                    actual.splitlines(keepends=True),
                                    fromfile=f"{path} (expected)", tofile=f"{path} (actual)")
        sys.stdout.writelines(diff)
        print()
        ok = False
    return ok


def main():
    ap = argparse.ArgumentParser(description="Run golden tests.")
    ap.add_argument("--dcc", required=True, help="path of the dcc binary")
    ap.add_argument("--tmp", required=True, help="directory for temporary files")
    ap.add_argument("--update", action="store_true", help="rewrite the expectations")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    failed = [f for f in args.files if not run_one(f, args.dcc, args.tmp, args.update)]
    if len(args.files) > 1:
        print(f"{len(args.files) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
