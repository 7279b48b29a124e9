#!/usr/bin/env python3
"""device_compare.py — on the GPU machine: an AOT program's outputs
(output_K.bin / .shape, dtypes from its header) against the expected ones
(expect_K.npy, device_prep.py), to the model tests' tolerance
(|got - want| <= 1e-5 + 1e-3 |want|; integers and booleans exactly).

    device_compare.py HEADER NAME SET_DIR
"""
import os
import re
import sys

import numpy as np

NP = {"f32": np.float32, "f64": np.float64, "i8": np.int8, "u8": np.uint8, "bool": np.bool_, "i16": np.int16,
      "u16": np.uint16, "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64, "f16": np.float16}


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
        if got.dtype.kind in "fc":
            g, w = got.astype(np.float64), want.astype(np.float64)
            bad = ~((np.abs(g - w) <= 1e-5 + 1e-3 * np.abs(w)) | (np.isnan(g) & np.isnan(w)) | (g == w))
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
