#!/usr/bin/env python3
"""untuned.py — torchvision models that no bench of this repo uses, against
ONNX Runtime: the check that a gain is not tuned to the bench's models.

    python3 bench/untuned.py [--models resnet18,...] [--threads 1] [--runs 4] [--rounds 3]

Each model is exported by PyTorch (random weights, BatchNorm statistics
randomised as gen_bench.py does; dynamic batch, height and width, and time
for the video models) into bench/models/untuned/NAME/ (not committed),
then compiled once by disc in this process (bench/discpy.py) and timed at
two shapes against ONNX Runtime, the two taking turns as run_bench.py
--inproc does (CPU time per run with --threads 1). A shape whose outputs
differ from ONNX Runtime's says FAIL. Prints per model: the ratio ORT /
disc at each shape, the geomean, the compile time (a cache hit where the
model was compiled before) and the kernel count; a model PyTorch cannot
export with dynamic sizes says so and the run goes on. Not part of make
test.
"""
import argparse
import os
import statistics
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "models"))
import run_bench as rb  # noqa: E402
from cpuinfo import cpu_line  # noqa: E402

# name: (the two shapes, the axes that are dynamic besides the batch)
IMG = ["1x3x224x224", "2x3x197x231"]
VIDEO = ["1x3x8x112x112", "2x3x5x97x113"]
MODELS = {
    "resnet18": IMG, "mobilenet_v3_large": IMG, "inception_v3": ["1x3x299x299", "2x3x317x280"],
    "regnet_x_400mf": IMG, "efficientnet_b3": IMG, "wide_resnet50_2": IMG,
    "lraspp_mobilenet_v3_large": IMG, "deeplabv3_mobilenet_v3_large": IMG,
    "r3d_18": VIDEO, "r2plus1d_18": VIDEO, "maxvit_t": ["1x3x224x224", "3x3x224x224"], "swin_v2_t": IMG,
}
SEGMENT = {"lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large"}


def build(name):
    """The module, an example input and the dynamic axes of input x."""
    import torch
    import torchvision
    if MODELS[name] is VIDEO:
        m = getattr(torchvision.models.video, name)()
        return m, torch.randn(1, 3, 8, 112, 112), {0: "batch", 2: "t", 3: "height", 4: "width"}
    if name in SEGMENT:
        seg = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None)

        class Out(torch.nn.Module):  # the dict's "out": one tensor
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                return self.m(x)["out"]
        return Out(seg), torch.randn(1, 3, 224, 224), {0: "batch", 2: "height", 3: "width"}
    kw = {"aux_logits": False, "init_weights": True} if name == "inception_v3" else {}
    size = 299 if name == "inception_v3" else 224
    m = getattr(torchvision.models, name)(**kw)
    return m, torch.randn(1, 3, size, size), {0: "batch", 2: "height", 3: "width"}


def export(name):
    path = os.path.join(HERE, "models", "untuned", name, "model.onnx")
    if os.path.exists(path):
        return path
    import torch
    import gen_torch
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.manual_seed(0)
    m, example, dyn = build(name)
    gen_torch.randomize_bn(m)
    m.eval()
    with torch.no_grad():
        torch.onnx.export(m, (example,), path, input_names=["x"], output_names=["out"],
                          dynamic_axes={"x": dyn, "out": {0: "batch"}}, opset_version=17, dynamo=False)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated (default: all of %(default)s)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    rb.THREADS, rb.CPU_TIME = a.threads, a.threads == 1
    print(cpu_line())
    print(f"threads {a.threads}; ratio = ONNX Runtime time / disc time ({'CPU' if rb.CPU_TIME else 'wall'} time)")
    ratios = []
    for name in a.models.split(","):
        if name not in MODELS:
            sys.exit(f"untuned: unknown model {name} (models: {', '.join(MODELS)})")
        try:
            path = export(name)
        except Exception as e:  # PyTorch's exporter: a model it cannot export with dynamic sizes
            print(f"{name}: not exported: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
            continue
        sess = rb.ort_session(path)
        shapes = MODELS[name]
        feeds = [rb.make_inputs(path, tuple(int(v) for v in s.split("x")), np.random.default_rng(0)) for s in shapes]
        info, dt, ot = rb.inproc_times(name, path, sess, feeds, a.runs, a.rounds)
        cells, rs = [], []
        for k, s in enumerate(shapes):
            if not dt[k]:
                cells.append(f"{s} FAIL")
                continue
            r = statistics.median(ot[k]) / statistics.median(dt[k])
            rs.append(r)
            cells.append(f"{s} {r:.2f}")
        ratios += rs
        geo = float(np.exp(np.mean(np.log(rs)))) if rs else float("nan")
        print(f"{name:30s} {', '.join(cells)}; geomean {geo:.2f}; compiled in {info[0]:.0f} ms, "
              f"{info[1]} ops, {info[2]} kernels", flush=True)
    if ratios:
        print(f"all {len(ratios)} shapes: geomean {float(np.exp(np.mean(np.log(ratios)))):.2f}, "
              f"lowest {min(ratios):.2f}")


if __name__ == "__main__":
    main()
