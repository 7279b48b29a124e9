#!/usr/bin/env python3
"""run_aot.py — an AOT-compiled model against the JIT, at every data set.

    run_aot.py --dcc DCC --rtlib libdisc_rt.a --tmp DIR [--mode obj|weights|so]
               [--cflags "..."] MODEL_DIR | MODEL.disc

For a tests/models/<name> directory: `dcc compile` writes the model as an
object (mode obj), as an object plus a weights file (weights) or as a shared
object (so), with its header; tests/aot/aot_check.c is built against the
header and linked with the object and the runtime archive only (or with the
.so). Then, for every test_data_set_*, the AOT program's outputs must match
`dcc run --backend cpu` (the JIT: the same generated code, so to 1e-6) and
the data set's expected outputs (to the model tests' tolerance).

For an IR text model (.disc, e.g. one with host ops): inputs come from the
`# aot-input NAME DTYPE SHAPE...` lines of the file (one shape per data
set), random, and the oracle is `dcc run --backend interp`; `# aot-expect-v
REGEX` lines must match what `dcc compile -v` reports.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
from onnx import numpy_helper, TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
NP = {"f32": np.float32, "f64": np.float64, "i8": np.int8, "u8": np.uint8, "bool": np.bool_, "i16": np.int16,
      "u16": np.uint16, "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64, "f16": np.float16}


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(map(shlex.quote, cmd))}\n{p.stdout}")
    return p.stdout


def header_types(header, name):
    text = open(header).read()
    def arr(kind, what):
        m = re.search(rf"{name}_{kind}_{what}\[\d+\] = \{{([^}}]*)\}}", text)
        return [x.strip().strip('"') for x in m.group(1).split(",") if x.strip()]
    return arr("input", "dtype"), arr("output", "dtype")


def read_pb(path):
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def compare(got, want, rtol, atol, what):
    if got.shape != want.shape:
        sys.exit(f"FAIL: {what}: shape {got.shape}, expected {want.shape}")
    if got.dtype.kind in "fc":
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        if bad.any():
            i = np.argwhere(bad)[0]
            sys.exit(f"FAIL: {what}: {bad.sum()} elements differ, first at {tuple(i)}: {got[tuple(i)]} vs "
                     f"{want[tuple(i)]}")
    elif not np.array_equal(got, want):
        sys.exit(f"FAIL: {what}: values differ")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dcc", required=True)
    ap.add_argument("--rtlib", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--mode", default="obj", choices=["obj", "weights", "so"])
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--cflags", default="")
    ap.add_argument("--cpu", help="dcc compile --cpu")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"],
                    help="dcc compile --backend (cuda: on a GPU, or on the stand-in driver with "
                         "DISC_CUDA_EMU_MODULES=1 and its LD_LIBRARY_PATH)")
    ap.add_argument("model")
    a = ap.parse_args()
    is_dir = os.path.isdir(a.model)
    model = os.path.join(a.model, "model.onnx") if is_dir else a.model
    base = os.path.basename(a.model.rstrip("/")).split(".")[0]
    name = re.sub(r"\W", "_", base) + "_" + a.mode + ("_" + re.sub(r"\W", "_", a.cpu) if a.cpu else "")
    cuda = a.backend == "cuda"
    if cuda:
        name += "_cuda"
    tmp = os.path.join(a.tmp, name)
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)

    header = os.path.join(tmp, name + ".h")
    libs = ["-ldnnl", "-lmvec", "-lm", "-lpthread", "-ldl"]
    flags = shlex.split(a.cflags)
    cmd = [a.dcc, "compile", model, "--emit-header", header, "--name", name] + (["--cpu", a.cpu] if a.cpu else [])
    cmd += ["--backend", "cuda"] if cuda else []
    if a.mode == "so":
        out = os.path.join(tmp, f"lib{name}.so")
        link = [f"-L{tmp}", f"-l{name}", f"-Wl,-rpath,{tmp}"]
    else:
        out = os.path.join(tmp, name + ".o")
        link = [out, a.rtlib]
    if a.mode == "weights":
        weights = os.path.join(tmp, name + ".weights")
        cmd += ["--weights", weights]
        flags.append("-DAOT_WEIGHTS")
    if cuda and a.mode != "so":  # a second run through NAME_run_device, on device memory
        flags += ["-DAOT_DEVICE", f"-I{os.path.dirname(os.path.dirname(HERE))}"]
    log = run(cmd + ["-o", out, "-v"], env=dict(os.environ, DISC_RT_LIB=os.path.abspath(a.rtlib)))
    for want in ([] if is_dir else re.findall(r"^# aot-expect-v (.*)$", open(model).read(), re.M)):
        if not re.search(want, log):  # what the compile must report (dcc compile -v)
            sys.exit(f"FAIL: dcc compile -v does not say /{want}/:\n{log}")
    exe = os.path.join(tmp, "aot_check")
    run([a.cc, "-O1", *flags, f"-I{tmp}", f"-DAOT_NAME={name}", f"-DAOT_UPPER={name.upper()}",
         f'-DAOT_HEADER="{name}.h"', os.path.join(HERE, "aot_check.c"), *link, *libs, "-o", exe])
    if a.mode == "so":  # the shared object carries the runtime: nothing of the compiler in it
        syms = run(["nm", "-D", "--defined-only", out])
        exported = [l.split()[-1] for l in syms.splitlines() if " T " in l]
        assert f"{name}_run" in exported, exported
    in_types, out_types = header_types(header, name)

    # data sets: (inputs as (name, array), expected outputs or None)
    sets = []
    if is_dir:
        for d in sorted(x for x in os.listdir(a.model) if x.startswith("test_data_set_")):
            dd = os.path.join(a.model, d)
            ins = [read_pb(os.path.join(dd, f"input_{k}.pb")) for k in range(len(in_types))]
            outs = [read_pb(os.path.join(dd, f"output_{k}.pb"))[1] for k in range(len(out_types))]
            sets.append((ins, outs))
        backend = "cpu"
    else:
        rng = np.random.default_rng(0)
        decl = re.findall(r"^# aot-input (\S+) (\S+) (.*)$", open(model).read(), re.M)
        for shapes in zip(*[[tuple(map(int, s.split("x"))) for s in sh.split()] for _, _, sh in decl]):
            ins = []
            for (iname, dt, _), shape in zip(decl, shapes):
                v = rng.standard_normal(shape).round(1)
                v[v < -0.5] = 0  # zeros, for nonzero and friends
                ins.append((iname, v.astype(NP[dt])))
            sets.append((ins, None))
        backend = "interp"
    if not sets:
        sys.exit(f"FAIL: no data sets for {a.model}")

    for k, (ins, expected) in enumerate(sets):
        d = os.path.join(tmp, f"set_{k}")
        os.makedirs(d)
        args = []
        for i, (iname, v) in enumerate(ins):
            v.tofile(os.path.join(d, f"input_{i}.bin"))
            with open(os.path.join(d, f"input_{i}.shape"), "w") as f:
                f.write(" ".join(map(str, v.shape)))
            pb = os.path.join(d, f"input_{i}.pb")
            with open(pb, "wb") as f:
                f.write(numpy_helper.from_array(v, iname).SerializeToString())
            args += ["--input", f"{iname}={pb}"]
        extra = ["--weights", weights] if a.mode == "weights" else []
        print(run([exe, d, *extra]).strip())
        jit = os.path.join(d, "jit")
        run([a.dcc, "run", model, "--backend", backend, *args, "--output-dir", jit])
        for i, dt in enumerate(out_types):
            shape = tuple(int(x) for x in open(os.path.join(d, f"output_{i}.shape")).read().split())
            got = np.fromfile(os.path.join(d, f"output_{i}.bin"), dtype=NP[dt]).reshape(shape)
            # the JIT runs the same code; the interpreter computes in double;
            # the GPU's kernels sum in another order
            tol = (1e-3, 1e-5) if cuda else (1e-6, 1e-6) if backend == "cpu" else (1e-5, 1e-5)
            if dt == "f16":  # and a library's fused epilogue rounds once where the graph rounds every op
                tol = (4e-3, 1e-3)
            compare(got, read_pb(os.path.join(jit, f"output_{i}.pb"))[1], *tol,
                    f"set {k} output {i} against dcc run --backend {backend}")
            if expected is not None:
                compare(got, expected[i], 1e-3, 1e-5, f"set {k} output {i} against the data set")
        print(f"set {k}: {len(out_types)} outputs match")
    if a.mode == "weights":  # a damaged or foreign weights file is refused with a message
        raw = bytearray(open(weights, "rb").read())
        for what, data, msg in [("truncated", raw[:len(raw) // 2], "shorter than its header"),
                                ("corrupt", raw[:-1] + bytes([raw[-1] ^ 1]), "checksum"),
                                ("foreign", b"\0" * len(raw), "not this model's")]:
            bad = os.path.join(tmp, f"{what}.weights")
            open(bad, "wb").write(data)
            p = subprocess.run([exe, os.path.join(tmp, "set_0"), "--weights", bad], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            if p.returncode != 1 or msg not in p.stdout:
                sys.exit(f"FAIL: a {what} weights file: exit {p.returncode}, {p.stdout!r}")
            print(f"{what} weights file refused: {p.stdout.strip()}")
    print(f"PASS: {a.model} ({a.mode}), {len(sets)} data sets")


if __name__ == "__main__":
    main()
