#!/usr/bin/env python3
"""bench_skinny.py — matmuls of a few rows against constant weights, three ways.

    python3 bench/bench_skinny.py [--dcc build/dcc] [--cpu NAME] [--ms 1,2,4,...] [--layers L]
                                  [--threads N] [--cpu-time]

A transformer's feed-forward stack at batch 1 and a short sequence: L pairs
of MatMuls x[M, 768] @ W1[768, 3072] @ W2[3072, 768] (random weights,
generated here, 2 * L * 9.4 MB, so they stream from memory as in a model
run). For each M it times, in the same run and in alternating order:

  - disc's skinny kernel (codegen/skinny.c), at every M here (DISC_SKINNY
    set to the largest; by default the runtime takes it for M <= 16 only),
  - disc with DISC_SKINNY=0 (oneDNN for every M),
  - ONNX Runtime (MLAS), same thread count.

--cpu compiles disc's kernels for another CPU (x86-64-v3: AVX2) and caps
oneDNN to the matching ISA (ONEDNN_MAX_CPU_ISA), to see the AVX2 code
paths on an AVX-512 machine. --threads sets both runtimes' threads (default:
every core); --cpu-time (with --threads 1) compares the CPU time per run,
which a machine busy with other work disturbs much less than wall time. ONNX Runtime has no such cap, so its column
is only meaningful on a machine whose own ISA is the one measured. The
first line names the CPU and its vector ISA. Not part of make test.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from cpuinfo import cpu_line  # noqa: E402

ISA_CAP = {"x86-64": "SSE41", "x86-64-v2": "SSE41", "x86-64-v3": "AVX2", "haswell": "AVX2", "znver3": "AVX2"}


def make_model(path, layers, hidden=768, ffn=3072):
    rng = np.random.default_rng(0)
    inits, nodes, cur = [], [], "x"
    for i in range(layers):
        for j, (k, n) in enumerate(((hidden, ffn), (ffn, hidden))):
            w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
            name = f"w{i}_{j}"
            inits.append(numpy_helper.from_array(w, name))
            out = f"h{i}_{j}" if (i, j) != (layers - 1, 1) else "y"
            nodes.append(helper.make_node("MatMul", [cur, name], [out]))
            cur = out
    g = helper.make_graph(nodes, "ffn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", hidden])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", hidden])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dcc", default=os.path.join(ROOT, "build", "dcc"))
    ap.add_argument("--cpu", default=None, help="disc's target CPU (and oneDNN's ISA cap)")
    ap.add_argument("--ms", default="1,2,4,8,13,16,24,32")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--cpu-time", action="store_true", help="CPU time per run (needs --threads 1)")
    args = ap.parse_args()
    if args.cpu_time and args.threads != 1:
        ap.error("--cpu-time needs --threads 1 (idle threads that spin count as CPU time)")
    clock = time.process_time if args.cpu_time else time.perf_counter
    ms = [int(x) for x in args.ms.split(",")]
    work = tempfile.mkdtemp(prefix="disc-skinny-")
    try:
        path = os.path.join(work, "model.onnx")
        make_model(path, args.layers)
        hidden = 768
        rng = np.random.default_rng(1)
        feeds = []
        m = onnx.load(path)
        ws = [numpy_helper.to_array(t) for t in m.graph.initializer]
        for k, mm in enumerate(ms):
            x = rng.standard_normal((mm, hidden)).astype(np.float32)
            y = x
            for w in ws:
                y = y @ w
            d = os.path.join(work, f"test_data_set_{k}")
            os.makedirs(d)
            with open(os.path.join(d, "input_0.pb"), "wb") as f:
                f.write(numpy_helper.from_array(x, "x").SerializeToString())
            with open(os.path.join(d, "output_0.pb"), "wb") as f:
                f.write(numpy_helper.from_array(y.astype(np.float32), "y").SerializeToString())
            feeds.append({"x": x})
        sess = None
        if not args.no_ort:
            import onnxruntime as ort
            so = ort.SessionOptions()
            so.intra_op_num_threads = args.threads
            so.inter_op_num_threads = 1
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

        def run_disc(skinny):
            env = dict(os.environ)
            cmd = [args.dcc, "bench", work, "--runs", str(args.runs), "--threads", str(args.threads),
                   "--atol", "1e-3", "--rtol", "1e-2"]
            if args.cpu:
                cmd += ["--cpu", args.cpu]
                if args.cpu in ISA_CAP:
                    env["ONEDNN_MAX_CPU_ISA"] = ISA_CAP[args.cpu]
            # the skinny column runs disc's kernel at every M, to find the crossover
            env["DISC_SKINNY"] = str(max(ms)) if skinny else "0"
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
            times = {}
            for line in p.stdout.splitlines():
                mt = re.match(r"test_data_set_(\d+): .* median ([\d.]+) ms.*cpu time median ([\d.]+) ms", line)
                if mt:
                    times[int(mt.group(1))] = float(mt.group(3 if args.cpu_time else 2))
                elif "FAIL" in line or "error" in line:
                    print("  " + line.strip(), file=sys.stderr)
            return times

        def run_ort():
            out = {}
            for k, f in enumerate(feeds):
                sess.run(None, f)
                ts = []
                for _ in range(args.runs):
                    t0 = clock()
                    sess.run(None, f)
                    ts.append(clock() - t0)
                out[k] = statistics.median(ts) * 1e3
            return out

        ways = [("skinny", lambda: run_disc(True)), ("onednn", lambda: run_disc(False))]
        if sess:
            ways.append(("ort", run_ort))
        res = {w: {k: [] for k in range(len(ms))} for w, _ in ways}
        for r in range(args.rounds):
            order = ways if r % 2 == 0 else list(reversed(ways))
            for w, fn in order:
                for k, t in fn().items():
                    res[w][k].append(t)
        print(cpu_line())
        print(f"disc --cpu {args.cpu or 'native'}; {args.layers} x (768x3072, 3072x768) f32 weights "
              f"({args.layers * 2 * 768 * 3072 * 4 >> 20} MB); median of {args.runs} runs, {args.rounds} rounds; "
              f"{args.threads} threads; {'CPU' if args.cpu_time else 'wall'} ms")
        hdr = f"{'M':>4s} {'skinny':>9s} {'oneDNN':>9s}" + (f" {'ORT':>9s}" if sess else "") + "  faster"
        print(hdr)
        for k, mm in enumerate(ms):
            row = {w: statistics.median(res[w][k]) if res[w][k] else float("nan") for w, _ in ways}
            best = min(row, key=row.get)
            line = f"{mm:4d} {row['skinny']:9.3f} {row['onednn']:9.3f}"
            if sess:
                line += f" {row['ort']:9.3f}"
            print(line + f"  {best}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
