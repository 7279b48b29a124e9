#!/usr/bin/env python3
"""bench_matmul.py — one f32 matmul C[m,n] = A[m,k] B[k,n] through every
library path on this machine, in the same run, shape by shape:

  disc plain    disc_rt_matmul with B as it is (oneDNN brgemm on row-major B)
  disc packed   disc_rt_matmul with weights_const (B reordered once into the
                layout oneDNN picks; what compiled models do for constant B)
  dnnl_sgemm    oneDNN's BLAS-style sgemm (packs B internally on every call)
  numpy         numpy.matmul (its OpenBLAS)
  ORT           ONNX Runtime (MLAS): a model of one MatMul with B a constant
                initializer, which ORT pre-packs at session creation

    make && cc -O2 -I. -Iinclude bench/bench_rt.c build/libdisc_internal.a -ldnnl -lm -lpthread \\
        -o build/bench_rt
    python3 bench/bench_matmul.py [--threads N] [--quick]

disc's three ways come from `build/bench_rt mm M N K THREADS` (medians of
calls interleaved with each other); numpy and ORT are timed here right
after it, the same way (median of calls, after warm-up). Every library gets
the same thread count (default: every core). The machine is shared and
noisy, so the table shows times and ratios to disc packed measured within
seconds of each other; compare ratios, not absolute times across runs.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MS = [1, 13, 128, 512, 2048]
NKS = [(768, 768), (3072, 768), (768, 3072)]


def median_us(fn, flop):
    """Median microseconds per call of fn, after warm-up: about 0.3 s at 200 GFLOPS."""
    reps = int(min(200, max(5, 0.3 * 200e9 / flop)))
    for _ in range(2):
        fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6


def ort_session(n, k, b, threads):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "mm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["m", k])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, ["m", n])],
        [numpy_helper.from_array(b, "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench-rt", default=os.path.join(ROOT, "build", "bench_rt"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--quick", action="store_true", help="m in 13, 512 only")
    args = ap.parse_args()
    if not os.path.exists(args.bench_rt):
        sys.exit(f"bench_matmul: {args.bench_rt} not found; build it (see the top of this file)")
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    try:
        import onnxruntime  # noqa: F401
        have_ort = True
    except ImportError:
        have_ort = False
    rng = np.random.default_rng(0)
    ms = [13, 512] if args.quick else MS
    print(f"threads {args.threads}; times in ms (median); ratio = time / disc packed (above 1: slower)")
    print(f"{'m':>5} {'n':>5} {'k':>5} | {'packed':>8} {'GF/s':>5} | {'plain':>13} | {'dnnl_sgemm':>13} | "
          f"{'numpy':>13} | {'ORT':>13}")
    ratios = {w: [] for w in ("plain", "sgemm", "numpy", "ort")}
    for n, k in NKS:
        b = (rng.random((k, n), dtype=np.float32) - 0.5)
        sess = ort_session(n, k, b, args.threads) if have_ort else None
        for m in ms:
            a = (rng.random((m, k), dtype=np.float32) - 0.5)
            flop = 2.0 * m * n * k
            out = subprocess.run([args.bench_rt, "mm", str(m), str(n), str(k), str(args.threads)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            line = [ln for ln in out.stdout.splitlines() if ln.startswith("mm ")]
            if out.returncode != 0 or not line:
                sys.exit(f"bench_matmul: bench_rt failed:\n{out.stdout}")
            plain, packed, sgemm = (float(x) for x in line[0].split()[4:7])
            t_np = median_us(lambda: np.matmul(a, b), flop)
            t_ort = median_us(lambda: sess.run(None, {"a": a}), flop) if sess else float("nan")
            row = {"plain": plain, "sgemm": sgemm, "numpy": t_np, "ort": t_ort}
            for w, t in row.items():
                ratios[w].append(t / packed)
            cell = " | ".join(f"{row[w] / 1e3:7.3f} {row[w] / packed:4.2f}x" for w in ("plain", "sgemm", "numpy", "ort"))
            print(f"{m:5d} {n:5d} {k:5d} | {packed / 1e3:8.3f} {flop / packed * 1e-3:5.0f} | {cell}", flush=True)
    geo = " ".join(f"{w} {np.exp(np.mean(np.log(r))):.2f}x" for w, r in ratios.items() if r and not np.isnan(r[0]))
    print(f"geometric mean of time / disc packed: {geo}")


if __name__ == "__main__":
    main()
