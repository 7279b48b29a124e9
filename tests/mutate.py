#!/usr/bin/env python3
"""mutate.py — does the test suite catch small bugs? (issue 17, "tests that can fail")

    python3 tests/mutate.py [--build DIR] [--labels REGEX] [--only N,...] [--list] [--jobs N]

Each mutant is one small change of the kind real bugs look like (an
off-by-one, a dropped check, a wrong default, a lost lane, a swapped
permutation), made to one source file. For each, in turn: the change is
applied, the compiler and the tests are rebuilt in a build directory of
their own (default build-mutate, so build/ is left alone), ctest runs the
labels given (default: the fast ones, a few minutes a mutant on 2 cores),
and the file is restored, whatever happens. A mutant is killed when a test
fails, survives when every test passes; one that does not compile is
stillborn and not counted. The kill rate is printed at the end; exit
status 1 if a mutant survived.

Not part of make test (`make mutate` runs it). A surviving mutant names a
bug the tests would let through: add the test that kills it.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (file, text, replacement, what the bug is)
MUTANTS = [
    ("codegen/host.c",
     "in = LLVMBuildAnd(B, in, LLVMBuildICmp(B, LLVMIntSLE, v, cg_i64(cg, y->hi), \"\"), \"\");",
     "(void)y;",
     "the generated host flow accepts input dims above a symbol's upper bound"),
    ("frontends/onnx/lower_reduce.c",
     "attr_int(im, \"axis\", old ? 1 : -1, &axis)",
     "attr_int(im, \"axis\", -1, &axis)",
     "Softmax before opset 13 defaults to the last axis, not 1"),
    ("ir/infer.c",
     "return dim_addc(cx, dim_floordiv(cx, num, dim_const(cx, s)), 1);",
     "return dim_floordiv(cx, num, dim_const(cx, s));",
     "a conv's or pool's output size is one short"),
    ("runtime/dnnl.c",
     "return (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;",
     "return (span >= 0 ? span / stride : -((-span + stride - 1) / stride));",
     "the runtime's window count of a convolution is one short"),
    ("codegen/hostlib.c",
     "bool xl = m == 1, yl = m != 0;",
     "bool xl = m != 0, yl = m != 0;",
     "a conv that reads NCHW and writes channels-last is called as reading channels-last"),
    ("passes/canon.c",
     "q[i] = p1->ints[p2->ints[i]];",
     "q[i] = p2->ints[p1->ints[i]];",
     "canon composes two transposes in the wrong order"),
    ("codegen/kernel.c",
     "same = LLVMBuildAnd(B, same, LLVMBuildICmp(B, LLVMIntEQ, cg_dim(cg, x[i]), cg_dim(cg, r[i]), \"\"), \"\");",
     "(void)x; (void)r;",
     "loop kernels take the no-broadcast variant when a dim broadcasts at run time"),
    ("codegen/kernel.c",
     "    LLVMValueRef r = LLVMBuildLoad2(B, t, acc[0], \"\");\n    for (int l = 1; l < LANES; l++)",
     "    LLVMValueRef r = LLVMBuildLoad2(B, t, acc[0], \"\");\n    for (int l = 2; l < LANES; l++)",
     "a row reduction drops one of its interleaved accumulators"),
    ("passes/layout.c",
     "red[TO_FIRST[axes->ints[i]]] = true;",
     "red[TO_LAST[axes->ints[i]]] = true;",
     "the layout pass maps a reduction's axes the wrong way through the transpose"),
    ("passes/fuse.c",
     "fits = n == g->space && !feeds_root && !starts_epilogue(p, o, g->root);",
     "fits = n == g->space && ((void)feeds_root, 1) && !starts_epilogue(p, o, g->root);",
     "an op that computes a library call's operand is put in the call's epilogue"),
    ("runtime/place.c",
     "if (live[2 * o] > last || live[2 * o + 1] < first)",
     "if (live[2 * o] > last || live[2 * o + 1] <= first)",
     "the memory plan's layout gives a value the bytes of one the same group still reads"),
    ("runtime/interp_elem.c",
     "case UN_SIGMOID: *r = x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); return true;",
     "case UN_SIGMOID: *r = x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(-x)); return true;",
     "the reference interpreter's sigmoid is wrong for negative x"),
    ("codegen/skinny.c",
     "v = LLVMBuildSelect(B, s->first, zero, LLVMBuildCall2(B, lty, s->mload, args, 4, \"\"), \"\");",
     "v = LLVMBuildSelect(B, LLVMConstInt(cg->t_i1, 1, 0), zero, LLVMBuildCall2(B, lty, s->mload, args, 4, \"\"), \"\");",
     "the AVX2 skinny kernel starts every block of k from zero instead of from C (the kernel of AVX2 and SSE2: on an AVX-512 machine only the ISA copies, which --exclude leaves out by default, run it)"),
    ("codegen/host.c",
     "Dim *d = back ? dim_subst(&cg->g->dims, ks->sym[i], back) : ks->sym[i];",
     "Dim *d = ks->sym[i];",
     "a kernel shared up to constants gets the class's symbols in its slots, not the group's constants"),
    ("codegen/ksig.c",
     "sym[k] = dim_mulc(cx, sym[j], c);",
     "(void)c;",
     "constants shared by slot lose their multiples (a resize's 2 H becomes a symbol of its own)"),
    ("passes/shapeval.c",
     "if (vanishes_with(x, s))",
     "if (false && vanishes_with(x, s))",
     "Reshape's 0 rule is speculated (with a run-time requirement) where the input's dim decides it exactly"),
    ("ir/dim.c",
     "divmod(cx, sign > 0 ? DIM_CEILDIV : DIM_FLOORDIV, rest, k)",
     "divmod(cx, DIM_CEILDIV, rest, k)",
     "W - mod(W, k) is rounded up to k * ceildiv(W, k), not down"),
    ("passes/layout.c",
     "L->rec[view->id] = (Blocked){b, known && isfinite(pad), known && isfinite(pad) ? pad : 0};",
     "L->rec[view->id] = (Blocked){b, true, known && isfinite(pad) ? pad : 0};",
     "the layout pass takes a blocked value's padding lanes as known where a division left them infinite"),
    ("runtime/interp_move.c",
     "blocked = ((i * cb + k / b) * sp + s) * b + k % b;",
     "blocked = ((i * cb + k % b) * sp + s) * b + k / b;",
     "the reference interpreter swaps a channel's block and lane in the blocked layout"),
    ("runtime/dnnl.c",
     "tags[blk == 16][nd - 3]",
     "tags[blk != 16][nd - 3]",
     "blocked operands are described to oneDNN with the other block size"),
]

FAST_LABELS = "unit|golden|cpu|model|aot|interp|onnx"
SLOW_TESTS = "node_tests|fuzz-shapes"  # by name: the long ones among those labels


def run(cmd, timeout, **kw):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, **kw)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-mutate"))
    ap.add_argument("--labels", default=FAST_LABELS, help="ctest -L regex (default: %(default)s)")
    # the ISA copies (labels cpu@avx2, aot@x86-64, ...) but not the tests
    # at the machine's own ISA (label @avx512f or @avx2 alone)
    ap.add_argument("--exclude", default="zoo|trained|gpu|[a-z]@", help="ctest -LE regex (default: %(default)s)")
    ap.add_argument("--exclude-tests", default=SLOW_TESTS, help="ctest -E regex (default: %(default)s)")
    ap.add_argument("--only", default="", help="comma-separated mutant numbers (1-based)")
    ap.add_argument("--list", action="store_true", help="list the mutants and stop")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=int, default=1200, help="seconds per mutant's tests")
    args = ap.parse_args()
    # a kill (SIGTERM, SIGHUP) unwinds through the finally that restores
    # the mutated file, as Ctrl-C does
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(130))
    if args.list:
        for i, (f, _, _, what) in enumerate(MUTANTS, 1):
            print(f"{i:2d}  {f}: {what}")
        return 0
    pick = [int(x) for x in args.only.split(",") if x] or list(range(1, len(MUTANTS) + 1))
    for i in pick:
        if not 1 <= i <= len(MUTANTS):
            sys.exit(f"mutate: no mutant {i} (1 to {len(MUTANTS)})")
    # every mutant's text must still be in its file exactly once: a stale
    # list is an error, not a silent survivor
    for i in pick:
        f, old, _, _ = MUTANTS[i - 1]
        n = open(os.path.join(ROOT, f)).read().count(old)
        if n != 1:
            sys.exit(f"mutate: mutant {i}: its text occurs {n} times in {f} (update tests/mutate.py)")
    rc, out = run(["cmake", "-S", ROOT, "-B", args.build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], 600)
    if rc != 0:
        sys.exit(f"mutate: cmake failed:\n{out[-2000:]}")
    rc, out = run(["cmake", "--build", args.build, "-j", str(args.jobs)], 3600)
    if rc != 0:
        sys.exit(f"mutate: the unmutated build fails:\n{out[-2000:]}")
    results = []
    for i in pick:
        f, old, new, what = MUTANTS[i - 1]
        path = os.path.join(ROOT, f)
        orig = open(path).read()
        t0 = time.time()
        try:
            open(path, "w").write(orig.replace(old, new, 1))
            rc, out = run(["cmake", "--build", args.build, "-j", str(args.jobs)], 3600)
            if rc != 0:
                # the C compiler refusing the mutant: stillborn; a build step
                # that runs the mutated compiler (the AOT example compiles a
                # model) failing: the build caught the bug
                cerr = [l for l in out.splitlines() if re.search(r"\.[ch]:\d+:\d+: error", l)]
                if cerr:
                    verdict, detail = "stillborn", "does not compile: " + cerr[0].strip()
                else:
                    steps = [l for l in out.splitlines() if l.startswith(("codegen:", "dcc:", "error:"))]
                    verdict = "killed"
                    detail = "the build failed: " + (steps[0].strip() if steps else out.strip()[-200:])
            else:
                rc, out = run(["ctest", "-j", str(args.jobs), "-L", args.labels, "-LE", args.exclude, "-E",
                               args.exclude_tests, "--timeout", "300"], args.timeout, cwd=args.build)
                failed = [ln.split(" - ", 1)[1].split(" (")[0].strip() for ln in out.splitlines()
                          if " - " in ln and ("(Failed)" in ln or "(Timeout)" in ln or "(SEGFAULT)" in ln
                                              or "Exception" in ln or "(Subprocess" in ln)]
                if rc == 124:
                    verdict, detail = "killed", "the tests ran out of time"
                elif rc != 0:
                    verdict, detail = "killed", f"{len(failed)} tests failed: " + ", ".join(failed[:4])
                else:
                    verdict, detail = "SURVIVED", "every test passed"
        finally:
            open(path, "w").write(orig)
        results.append((i, verdict))
        print(f"{i:2d} {verdict:9s} {f}: {what} ({detail}; {time.time() - t0:.0f} s)", flush=True)
    # leave the build as the sources are
    run(["cmake", "--build", args.build, "-j", str(args.jobs)], 3600)
    counted = [v for _, v in results if v != "stillborn"]
    killed = sum(v == "killed" for v in counted)
    print(f"mutate: {killed} of {len(counted)} mutants killed"
          + (f" ({len(results) - len(counted)} stillborn)" if len(counted) < len(results) else ""))
    return 0 if killed == len(counted) else 1


if __name__ == "__main__":
    sys.exit(main())
