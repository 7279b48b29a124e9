#!/usr/bin/env python3
"""test_discpy.py BUILD — build/public/libdisc.so through bench/discpy.py
(ctypes), as run_bench.py --inproc uses it:

- tests/models/mlp_norm compiled once and run on each of its data sets
  (three shapes): outputs within 1e-4 of the committed ones, and
  time_runs gives one positive time per run;
- a wrong input's run raises DiscError naming the input and the dim, and
  a model file that does not exist names the file;
- the shared library exports only disc_* functions (as libdisc.a keeps
  only them global).
"""
import glob
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import discpy  # noqa: E402

fails = 0


def check(cond, what):
    global fails
    if not cond:
        fails += 1
        print(f"FAIL: {what}")


build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
so = os.path.join(build, "public", "libdisc.so")
discpy.lib(so)
d = os.path.join(ROOT, "tests", "models", "mlp_norm")
m = discpy.Model(os.path.join(d, "model.onnx"))
c = m.compile(threads=2)
check(m.ops > 0 and c.kernels > 0, f"mlp_norm: {m.ops} ops, {c.kernels} kernels")
sets = sorted(glob.glob(os.path.join(d, "test_data_set_*")))
check(len(sets) >= 2, "mlp_norm's data sets")
for s in sets:
    ins = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(os.path.join(s, "input_*.pb")))]
    want = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(os.path.join(s, "output_*.pb")))]
    got = c.run(ins)
    check(len(got) == len(want), f"{s}: {len(got)} outputs, expected {len(want)}")
    for g, w in zip(got, want):
        check(g.shape == w.shape and np.allclose(g, w, atol=1e-4, rtol=1e-4),
              f"{s}: output {g.shape} differs from {w.shape} by {np.abs(g - w).max() if g.shape == w.shape else '?'}")
    ts = c.time_runs(ins, 3)
    check(len(ts) == 3 and all(t > 0 for t in ts), f"time_runs: {ts}")
bad = [np.zeros([2] * a.ndim, a.dtype) for a in ins]
try:
    c.run(bad)
    check(False, "a wrong shape ran")
except discpy.DiscError as e:
    check("input" in str(e) and "dim" in str(e), f"wrong shape's message: {e}")
try:
    discpy.Model(os.path.join(d, "no_such_model.onnx"))
    check(False, "a missing file loaded")
except discpy.DiscError as e:
    check("no_such_model.onnx" in str(e), f"missing file's message: {e}")
syms = subprocess.run(["nm", "-D", "--defined-only", so], stdout=subprocess.PIPE, text=True, check=True).stdout
funcs = [l.split()[2] for l in syms.splitlines() if len(l.split()) == 3 and l.split()[1] == "T"]
check(funcs and all(f.startswith("disc_") for f in funcs),
      f"exported functions not disc_*: {[f for f in funcs if not f.startswith('disc_')][:5]}")
print("test_discpy: FAIL" if fails else "test_discpy: PASS")
sys.exit(1 if fails else 0)
