#!/usr/bin/env python3
"""conv_rates.py — every convolution of the bench's CNNs at the rate it
reaches, against this machine's GEMM rate (issue 18: "check every conv of
the bench at the GFLOP/s it reaches against the machine's GEMM rate, and
list the outliers").

    python3 bench/conv_rates.py [--models resnet50,...] [--shape 1x3x224x224]
                                [--threads 1] [--runs 20] [--below 0.5]
                                [--cpu x86-64-v3]

--cpu compiles the kernels for that CPU and caps oneDNN to its ISA
(ONEDNN_MAX_CPU_ISA: AVX2 for x86-64-v3, SSE41 for x86-64), as make
test's capped copies do: a view of the AVX2 path on an AVX-512 machine
(disc and oneDNN only; no peer in this table, so a capped run is fair).

Each model runs in a process of its own (DISC_PROFILE's table is
process-wide and printed at exit) through bench/discpy.py: compiled once,
two untimed runs with the profile paused (oneDNN's primitives, packed
weights), then --runs runs profiled. Every library call's line in the
profile carries its floating-point operations' rate (runtime/rtcall.c);
the GEMM rate is that of a 1024 x 1024 x 1024 matmul run the same way.
A convolution below --below of it is listed as an outlier, except
depthwise ones (two FLOPs an element read: bound by memory, not by the
FMA units), which are listed apart.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cpuinfo import cpu_line  # noqa: E402

CNNS = ["resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0"]

# One model's runs, in a child process: argv = model path, shape, threads, runs.
CHILD = r"""
import sys, ctypes, numpy as np
sys.path.insert(0, %(here)r)
import discpy, run_bench
path, shape, threads, runs, cpu = sys.argv[1], tuple(int(x) for x in sys.argv[2].split('x') if x), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] or None
ins = run_bench.make_inputs(path, shape, np.random.default_rng(0)) if shape else [np.ones((1024, 1024), np.float32)]
ins = list(ins.values()) if isinstance(ins, dict) else ins
L = discpy.lib()
L.disc_rt_prof_pause.argtypes = [ctypes.c_int]
c = discpy.Model(path).compile(threads=threads, cpu=cpu)
L.disc_rt_prof_pause(1)
for _ in range(2):
    c.run(ins)
L.disc_rt_prof_pause(0)
for _ in range(runs):
    c.run(ins)
"""

LINE = re.compile(r"^\s+([\d.]+) ms\s+[\d.]+%\s+(\d+) calls  (.*?)  ([\d.]+) GFLOP/s$")


CAPS = {"x86-64-v3": "AVX2", "x86-64-v2": "SSE41", "x86-64": "SSE41"}


def profile(path, shape, threads, runs, cpu):
    """[(ms a call, calls a run, what, GFLOP/s)] of the library calls."""
    env = dict(os.environ, DISC_PROFILE="1", DISC_PROFILE_TOP="1000")
    if cpu in CAPS:
        env["ONEDNN_MAX_CPU_ISA"] = CAPS[cpu]
    p = subprocess.run([sys.executable, "-c", CHILD % {"here": HERE}, path, shape, str(threads), str(runs),
                        cpu or ""],
                       env=env, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"conv_rates: {path}: {p.stderr.strip()[-2000:]}")
    rows = []
    for line in p.stderr.splitlines():
        m = LINE.match(line)
        if m:
            ms, calls, what, rate = float(m[1]), int(m[2]), m[3], float(m[4])
            rows.append((ms / calls, calls / runs, what, rate))
    return rows


def gemm_model(dirname):
    """An ONNX MatMul of [M, 1024] by constant [1024, 1024] weights."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "gemm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", 1024])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", 1024])], [w])
    path = os.path.join(dirname, "gemm.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(CNNS))
    ap.add_argument("--shape", default="1x3x224x224")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--below", type=float, default=0.5, help="an outlier below this share of the GEMM rate")
    ap.add_argument("--cpu", default=None, help="compile for this CPU (x86-64-v3: oneDNN capped to AVX2 too)")
    a = ap.parse_args()
    print(cpu_line() + (f"; kernels for {a.cpu}, oneDNN capped to {CAPS.get(a.cpu, 'its own ISA')}" if a.cpu else ""))
    with tempfile.TemporaryDirectory() as tmp:
        g = [r for r in profile(gemm_model(tmp), "", a.threads, a.runs, a.cpu) if r[2].startswith("matmul")]
    if not g:
        sys.exit("conv_rates: the GEMM's profile has no matmul line")
    peak = max(r[3] for r in g)
    print(f"GEMM rate: {peak:.1f} GFLOP/s ({g[0][2]}, {a.threads} thread(s))")
    out, dw = [], []
    for name in a.models.split(","):
        path = os.path.join(HERE, "models", name, "model.onnx")
        if not os.path.exists(path):
            sys.exit(f"conv_rates: {path}: no such model (python3 bench/run_bench.py --broad makes them)")
        rows = [r for r in profile(path, a.shape, a.threads, a.runs, a.cpu) if r[2].startswith("conv")]
        total = sum(r[0] * r[1] for r in rows)
        print(f"\n{name} at {a.shape}: {len(rows)} distinct convolutions, {total:.2f} ms a run")
        print(f"  {'ms/call':>8} {'calls':>5} {'GFLOP/s':>8} {'of GEMM':>7}  convolution")
        for ms, calls, what, rate in sorted(rows, key=lambda r: r[3]):
            share = rate / peak
            mark = " dw" if " dw " in what else " <" if share < a.below else ""
            print(f"  {ms:8.3f} {calls:5.0f} {rate:8.1f} {100 * share:6.0f}%{mark} {what}")
            (dw if " dw " in what else out if share < a.below else []).append((name, ms * calls, share, what))
    print(f"\nOutliers (below {100 * a.below:.0f}% of the GEMM rate, depthwise apart), by time a run:")
    for name, ms, share, what in sorted(out, key=lambda r: -r[1]):
        print(f"  {name}: {ms:.3f} ms a run at {100 * share:.0f}%: {what}")
    print(f"Depthwise: {len(dw)} convolutions, {sum(r[1] for r in dw):.2f} ms a run in all")


if __name__ == "__main__":
    main()
