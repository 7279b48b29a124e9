#!/usr/bin/env python3
"""test_gpu_bench.py — the parts of bench/gpu_bench.py that must hold
before a GPU is lent, with numpy only:

- the weights' rule: both machines (this one compiles disc's objects,
  the GPU machine sets PyTorch's parameters) must compute the same
  values, so the first values are pinned here (a numpy that changed its
  integer arithmetic would fail this, not the benchmark's outputs); a
  matrix is Hankel (each row its predecessor shifted, what lets the
  weights file compress) and full rank (a rank-deficient network made
  the outputs 1e-3 from f64, bench/NOTES.md);
- ncu's CSV (`--csv --print-units base`, one row per launch and metric,
  thousands separators) read into per-kernel launches, time, bytes and
  bandwidth.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import gpu_bench  # noqa: E402

fails = 0


def check(cond, what):
    global fails
    if not cond:
        fails += 1
        print("FAIL:", what)


m = gpu_bench.pattern("layers.0.q.weight", (2, 3))
check(np.allclose(m, [[-0.29087225210209944, -0.6725846110866007, 0.7638457326182788],
                      [-0.6725846110866007, 0.7638457326182788, 0.2585981865936371]], rtol=0, atol=1e-15),
      f"pinned values of a matrix: {m.tolist()}")
v = gpu_bench.pattern("ln.bias", (4,))
check(np.allclose(v, [-0.49909968467745447, -0.5974712802640811, 0.0048934507405795635, -0.06948666914818724],
                  rtol=0, atol=1e-15), f"pinned values of a vector: {v.tolist()}")
w = gpu_bench.pattern("head.weight", (96, 64))
check(np.array_equal(w[1:, :-1], w[:-1, 1:]), "a matrix is Hankel")
check(np.linalg.matrix_rank(w) == 64, f"full rank: {np.linalg.matrix_rank(w)} of 64")
check(w.min() >= -1 and w.max() < 1 and abs(w.mean()) < 0.2, "values in [-1, 1), centred")
check(not np.array_equal(gpu_bench.pattern("a", (8,)), gpu_bench.pattern("b", (8,))), "names give other values")
check(np.array_equal(gpu_bench.pattern("x", (5, 7)), gpu_bench.pattern("x", (5, 7))), "deterministic")

csv = '''==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","a","h","disc_k3","1","7","(256, 1, 1)","(10, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","1,000,000"
"0","1","a","h","disc_k3","1","7","(256, 1, 1)","(10, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","Mbyte","1"
"0","1","a","h","disc_k3","1","7","(256, 1, 1)","(10, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","1,000"
"1","1","a","h","disc_k3","1","7","(256, 1, 1)","(10, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","1"
"2","1","a","h","disc_k5","1","7","(256, 1, 1)","(10, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","msecond","0.5"
"2","1","a","h","disc_k5","1","7","(256, 1, 1)","(10, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","Gbyte","1"
==PROF== Disconnected
'''
got = {e["kernel"]: e for e in gpu_bench.parse_ncu(csv)}
check(got.get("disc_k3") == {"kernel": "disc_k3", "launches": 2, "us": 2.0, "MB": 2.0, "GB/s": 1000.0},
      f"disc_k3: {got.get('disc_k3')}")
check(got.get("disc_k5", {}).get("GB/s") == 2000.0 and got["disc_k5"]["launches"] == 1, f"disc_k5: {got.get('disc_k5')}")
check(gpu_bench.parse_ncu("==PROF== No kernels were profiled.\n") is None, "no CSV: None")
# what ncu 2025.3 printed on the H200 (2026-11-27) with --print-units base: time in "ns", bytes in "byte"
short = csv.replace('"nsecond","1,000"', '"ns","1,000"').replace('"usecond","1"', '"us","1"').replace(
    '"msecond","0.5"', '"ms","0.5"').replace('"Mbyte","1"', '"MB","1"')
got = {e["kernel"]: e for e in gpu_bench.parse_ncu(short)}
check(got.get("disc_k3") == {"kernel": "disc_k3", "launches": 2, "us": 2.0, "MB": 2.0, "GB/s": 1000.0},
      f"short units, disc_k3: {got.get('disc_k3')}")
try:
    gpu_bench.parse_ncu(csv.replace('"nsecond"', '"cycle"'))
    check(False, "an unknown unit read as a factor of 1")
except ValueError as e:
    check("cycle" in str(e), f"the unknown unit named: {e}")

print("test_gpu_bench: %s" % ("PASS" if not fails else f"{fails} failed"))
sys.exit(1 if fails else 0)
