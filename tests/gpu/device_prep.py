#!/usr/bin/env python3
"""device_prep.py — the model tests as raw tensors for the device check
(run_on_device.sh --prepare): per tests/models/<name>, every data set's
inputs as input_K.bin / input_K.shape (what tests/aot/aot_check.c reads)
and its expected outputs as expect_K.npy, so the GPU machine, which has
numpy but maybe not onnx, compares without the protobuf files.

    device_prep.py MODEL_DIR OUT_DIR
"""
import os
import sys

import numpy as np
from onnx import numpy_helper, TensorProto


def read_pb(path):
    """The tensor; bf16 as its 16-bit patterns (uint16)."""
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    if t.data_type == TensorProto.BFLOAT16: # numpy_helper (onnx 1.17) misreads raw bf16
        bits = np.frombuffer(t.raw_data, "<u2") if t.raw_data else np.array(t.int32_data, np.uint32).astype("<u2")
        return bits.reshape(tuple(t.dims))
    return numpy_helper.to_array(t)


def main():
    src, out = sys.argv[1], sys.argv[2]
    import numpy as np
    n = 0
    for d in sorted(x for x in os.listdir(src) if x.startswith("test_data_set_")):
        dd, od = os.path.join(src, d), os.path.join(out, d)
        os.makedirs(od, exist_ok=True)
        k = 0
        while os.path.exists(os.path.join(dd, f"input_{k}.pb")):
            v = read_pb(os.path.join(dd, f"input_{k}.pb"))
            v.tofile(os.path.join(od, f"input_{k}.bin"))
            with open(os.path.join(od, f"input_{k}.shape"), "w") as f:
                f.write(" ".join(map(str, v.shape)))
            k += 1
        k = 0
        while os.path.exists(os.path.join(dd, f"output_{k}.pb")):
            v = read_pb(os.path.join(dd, f"output_{k}.pb"))
            np.save(os.path.join(od, f"expect_{k}.npy"), v)
            k += 1
        n += 1
    print(f"{src}: {n} data sets")


if __name__ == "__main__":
    main()
