#!/usr/bin/env python3
"""disc_cases.py — an IR-text test with random inputs (tests/gpu/*.disc:
`# input random : dtype[shape]` lines, `# case` between cases) as ONNX
backend-test data sets, the expected outputs from disc's reference
interpreter (`dcc run --backend interp`), so that run_on_device.sh can
check the file's kernels on a GPU as it checks the model tests.

    disc_cases.py DCC FILE.disc OUT_DIR

OUT_DIR/test_data_set_K/input_J.pb and output_J.pb per case. Inputs are
uniform in [-1, 1] in multiples of 1/64 (exact in f16 and bf16).
"""
import os
import re
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

TYPES = {"f32": (TensorProto.FLOAT, np.float32), "f16": (TensorProto.FLOAT16, np.float16),
         "bf16": (TensorProto.BFLOAT16, None), "f64": (TensorProto.DOUBLE, np.float64)}


def tensor(name, dtype, shape, rng):
    v = rng.integers(-64, 65, size=shape).astype(np.float32) / 64
    code, np_type = TYPES[dtype]
    if np_type is not None:
        return numpy_helper.from_array(v.astype(np_type), name)
    bits = (v.view(np.uint32) >> 16).astype(np.uint16)  # exact: a few bits of mantissa
    return helper.make_tensor(name, code, list(shape), bits.tobytes(), raw=True)


def main():
    dcc, src, out = sys.argv[1:4]
    text = open(src).read()
    head = text[text.index("graph"):text.index("{")]
    names = re.findall(r"%(\w+)\s*:", head)
    cases, cur = [], []
    for line in text.splitlines():
        if line.startswith("# case"):
            cases.append(cur)
            cur = []
        m = re.match(r"# input random : (\w+)\[([\d, ]*)\]", line)
        if m:
            cur.append((m.group(1), tuple(int(x) for x in m.group(2).split(",") if x.strip())))
    cases.append(cur)
    rng = np.random.default_rng(7)
    for k, case in enumerate(c for c in cases if c):
        if len(case) != len(names):
            sys.exit(f"{src}: case {k}: {len(case)} inputs, the graph has {len(names)}")
        d = os.path.join(out, f"test_data_set_{k}")
        os.makedirs(d, exist_ok=True)
        args = []
        for j, (name, (dtype, shape)) in enumerate(zip(names, case)):
            p = os.path.join(d, f"input_{j}.pb")
            with open(p, "wb") as f:
                f.write(tensor(name, dtype, shape, rng).SerializeToString())
            args += ["--input", f"{name}={p}"]
        subprocess.run([dcc, "run", src, *args, "--output-dir", d, "--backend", "interp"], check=True,
                       stdout=subprocess.DEVNULL)
    print(f"{src}: {k + 1} data sets in {out}")


if __name__ == "__main__":
    main()
