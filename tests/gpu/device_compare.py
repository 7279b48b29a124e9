#!/usr/bin/env python3
"""device_compare.py — on the GPU machine: an AOT program's outputs
(output_K.bin / .shape, dtypes from its header) against the expected ones
(expect_K.npy, device_prep.py), to the model tests' tolerance
(|got - want| <= 1e-5 + 1e-3 |want|; f16 and bf16, whose fused epilogues
round once where the interpreter rounds after each op, to two units in
their last place of max(1, |want|), as test_interp's tol is relative, and
absolute below 1; integers and booleans exactly). bf16 travels as its
16-bit patterns.

    device_compare.py HEADER NAME SET_DIR
"""
import os
import re
import sys

import numpy as np

NP = {"f32": np.float32, "f64": np.float64, "i8": np.int8, "u8": np.uint8, "bool": np.bool_, "i16": np.int16,
      "u16": np.uint16, "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64, "f16": np.float16,
      "bf16": np.uint16}
RTOL = {"f16": 2.0 ** -9, "bf16": 2.0 ** -6}


def bf16(u):
    return (u.astype(np.uint32) << 16).view(np.float32)


def main():
    header, name, d = sys.argv[1:4]
    m = re.search(rf"{name}_output_dtype\[\d+\] = \{{([^}}]*)\}}", open(header).read())
    dtypes = [x.strip().strip('"') for x in m.group(1).split(",") if x.strip()]
    worst = 0.0
    for k, dt in enumerate(dtypes):
        want = np.load(os.path.join(d, f"expect_{k}.npy"))
        shape = tuple(int(x) for x in open(os.path.join(d, f"output_{k}.shape")).read().split())
        got = np.fromfile(os.path.join(d, f"output_{k}.bin"), dtype=NP[dt]).reshape(shape)
        if got.shape != want.shape:
            sys.exit(f"FAIL {d}: output {k}: shape {got.shape}, expected {want.shape}")
        if dt == "bf16":
            got, want = bf16(got), bf16(want)
        if got.dtype.kind in "fc":
            g, w = got.astype(np.float64), want.astype(np.float64)
            tol = 1e-5 + (RTOL[dt] * np.maximum(1, np.abs(w)) if dt in RTOL else 1e-3 * np.abs(w))
            bad = ~((np.abs(g - w) <= tol) | (np.isnan(g) & np.isnan(w)) | (g == w))
            if bad.any():
                i = np.argwhere(bad)[0]
                sys.exit(f"FAIL {d}: output {k} at {tuple(i)}: {g[tuple(i)]}, expected {w[tuple(i)]}")
            fin = np.isfinite(w)
            if fin.any():
                worst = max(worst, float(np.max(np.abs(g - w)[fin])))
        elif not np.array_equal(got, want):
            sys.exit(f"FAIL {d}: output {k} differs")
    print(f"PASS {d}: {len(dtypes)} outputs, max abs error {worst:.3g}")


if __name__ == "__main__":
    main()
