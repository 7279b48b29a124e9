#!/usr/bin/env python3
"""gpu_bench.py — issue 13's GPU benchmark: disc's cuda backend against
PyTorch eager and torch.compile(dynamic=True) on the same weights, with
disc's one-kernel-per-op build (--no-fuse) as the unfused baseline.

    here:   python3 bench/gpu_bench.py prepare DIR [--models bert_base,gpt2]
                [--dtypes f32,f16] [--arch sm_90] [--dcc build/dcc]
    there:  python3 bench/gpu_bench.py run DIR --rtlib libdisc_rt.a
                --stubs no_dnnl_stubs.c [--out OUT] [--runs N] [--no-compile]
                [--shapes 1x8,4x128,...]
            python3 bench/gpu_bench.py profile DIR --rtlib ... --stubs ...
                [--shapes 16x512] [--models ..] [--dtypes ..] [--no-torch]

The GPU machine has PyTorch but no LLVM, so `prepare` compiles each model
here, ahead of time (dcc compile --backend cuda, its weights in a separate
file), and `run` links each object with the runtime archive into a shared
object there and calls NAME_run_device through ctypes on tensors PyTorch
allocated on the device: one process, the same device buffers, the same
weights as the PyTorch modules it times.

The weights: BERT-base's and GPT-2's are 440 and 500 MB, more than travels
to the GPU machine (64 MiB). Both sides build the bench generator's module
(gen_bench.transformer) and set every parameter from a rule of its name and
shape (set_weights: Hankel matrices of random values, scaled as PyTorch's
default initialisation would), so the weights file disc's compile writes
is made of shifted repeats and xz shrinks it to well under a MB; `run` checks disc's
outputs against PyTorch eager's on the device at every shape it times (and
NAME_load_weights checks the file's checksum).

`run` writes OUT/gpu_bench.md (per model and dtype: time per run at each
shape for disc, disc --no-fuse, eager and torch.compile, the ratios and
their geomeans, the largest difference from eager, kernels per run) and
OUT/gpu_bench.json, each rewritten after every row, so a run cut short by
its time limit still brings back what it measured.
"""
import argparse
import ctypes
import json
import lzma
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
import zlib

import numpy as np

try:  # everything but the weights' rule and ncu's parsing needs PyTorch (tests/unit/test_gpu_bench.py does not)
    import torch
except ImportError:
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

SHAPES = [(1, 8), (1, 13), (2, 77), (4, 128), (8, 197), (16, 512)]
DTYPES = {"f32": "float32", "f16": "float16"}  # torch's names
HIDDEN = 768


def pattern(name, shape):
    """Values in [-1, 1) from a hash of name (integer arithmetic only, so every numpy gives the same): of a vector,
    the first n of a random sequence p; of a matrix, p[i + j] at [i, j], a Hankel matrix (full rank, as a random
    matrix is, and each row its predecessor shifted by one, so a weights file of such matrices or their transposes
    compresses to almost nothing)."""
    seed = np.uint64(zlib.crc32(name.encode()))
    n = sum(shape) if len(shape) == 2 else int(np.prod(shape))
    with np.errstate(over="ignore"):
        x = (np.arange(n, dtype=np.uint64) + seed) * np.uint64(0x9E3779B97F4A7C15)
        x ^= x >> np.uint64(29)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(32)
    u = (x >> np.uint64(11)).astype(np.float64) / float(1 << 52) - 1.0
    if len(shape) == 2:
        return u[np.arange(shape[0])[:, None] + np.arange(shape[1])[None, :]]
    return u.reshape(shape)


def set_weights(model):
    """Every parameter from its name and shape: linear weights U(-1, 1) / sqrt(fan_in), embeddings U(-0.5, 0.5),
    layer-norm scales 1 +- 0.1, biases +- 0.02."""
    with torch.no_grad():
        for mname, mod in model.named_modules():
            for pname, p in mod.named_parameters(recurse=False):
                full = f"{mname}.{pname}"
                u = pattern(full, tuple(p.shape))
                if isinstance(mod, torch.nn.LayerNorm) and pname == "weight":
                    v = 1.0 + 0.1 * u
                elif pname == "bias":
                    v = 0.02 * u
                elif isinstance(mod, torch.nn.Embedding):
                    v = 0.5 * u
                else:
                    v = u / math.sqrt(p.shape[-1])
                p.copy_(torch.from_numpy(v.astype(np.float32)))
    return model


def build(name, dtype):
    import gen_bench  # torch, and tests/models/gen_torch
    m = set_weights(gen_bench.transformer(name)).eval()
    return m.to(getattr(torch, DTYPES[dtype]))


def is_bert(name):
    return name.startswith("bert")


def sh(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"gpu_bench: {' '.join(cmd)} failed:\n{p.stdout}")
    return p.stdout


# ---------------------------------------------------------------- prepare (here)
def export(model, name, path):
    ids = torch.randint(0, 100, (2, 16), dtype=torch.long)
    dyn = {0: "batch", 1: "seq"}
    if is_bert(name):
        ex, names, axes = (ids, torch.ones(2, 16, dtype=torch.long)), ["input_ids", "attention_mask"], \
            {"input_ids": dyn, "attention_mask": dyn, "out": dyn}
    else:
        ex, names, axes = (ids,), ["input_ids"], {"input_ids": dyn, "out": dyn}
    with torch.no_grad():
        torch.onnx.export(model, ex, path, input_names=names, output_names=["out"], dynamic_axes=axes,
                          opset_version=17, dynamo=False)


def compile_one(a, onnx_path, out, nofuse):
    os.makedirs(out, exist_ok=True)
    w = os.path.join(out, "m.weights")
    cmd = [a.dcc, "compile", onnx_path, "--backend", "cuda", "--gpu-arch", a.arch, "--cpu", "x86-64-v3",
           "--name", "m", "--weights", w, "-o", os.path.join(out, "m.o"), "--emit-header",
           os.path.join(out, "m.h"), "-v"] + (["--no-fuse"] if nofuse else [])
    t0 = time.perf_counter()
    log = sh(cmd)
    secs = time.perf_counter() - t0
    with open(w, "rb") as f, lzma.open(w + ".xz", "wb", preset=6) as g:
        shutil.copyfileobj(f, g, 1 << 24)
    raw = os.path.getsize(w)
    os.remove(w)
    # dcc -v's line "...; N kernel launches (...) and M library calls (...) for K ops; ...": its counts
    stats = next((l for l in log.splitlines() if "kernel launches" in l), "")
    stats = next((part for part in stats.split(";") if "kernel launches" in part), stats)
    return {"compile_s": round(secs, 2), "weights_bytes": raw, "weights_xz_bytes": os.path.getsize(w + ".xz"),
            "compile_v": stats.strip()}


def prepare(a):
    os.makedirs(a.dir, exist_ok=True)
    manifest = {"dcc": sh([a.dcc, "--version"]).strip(), "arch": a.arch, "cpu": cpu_name(), "models": []}
    for name in a.models.split(","):
        for dt in a.dtypes.split(","):
            tag = f"{name}_{dt}"
            d = os.path.join(a.dir, tag)
            os.makedirs(d, exist_ok=True)
            onnx_path = os.path.join(d, "model.onnx")
            export(build(name, dt), name, onnx_path)
            fused = compile_one(a, onnx_path, os.path.join(d, "fused"), False)
            nofuse = compile_one(a, onnx_path, os.path.join(d, "nofuse"), True)
            os.remove(onnx_path)
            manifest["models"].append({"tag": tag, "model": name, "dtype": dt, "fused": fused, "nofuse": nofuse})
            print(f"gpu_bench: {tag}: compiled in {fused['compile_s']} s (--no-fuse {nofuse['compile_s']} s), "
                  f"weights {fused['weights_bytes'] >> 20} MB, {fused['weights_xz_bytes'] >> 10} KB as xz; "
                  f"{fused['compile_v']}", flush=True)
            with open(os.path.join(a.dir, "manifest.json"), "w") as f:
                json.dump(manifest, f, indent=1)


def cpu_name():
    try:
        for l in open("/proc/cpuinfo"):
            if l.startswith("model name"):
                return l.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


# ------------------------------------------------------------------ run (there)
class Disc:
    """An AOT object linked into a shared object, its weights loaded, called through NAME_run_device."""

    def __init__(self, d, a, work):
        so = os.path.join(work, "m.so")
        w = os.path.join(work, "m.weights")
        sh([a.cc, "-shared", "-o", so, os.path.join(d, "m.o"), a.rtlib, a.stubs_o, "-lm", "-ldl", "-lpthread"])
        with lzma.open(os.path.join(d, "m.weights.xz"), "rb") as f, open(w, "wb") as g:
            shutil.copyfileobj(f, g, 1 << 24)
        self.lib = ctypes.CDLL(so)
        self.err = ctypes.create_string_buffer(2048)
        if self.lib.m_load_weights(w.encode(), self.err, ctypes.c_size_t(len(self.err))) != 0:
            raise RuntimeError(f"m_load_weights: {self.err.value.decode()}")
        self.lib.m_run_device.restype = ctypes.c_int
        self.weights = w

    def prepare(self, inputs, out):
        n = len(inputs)
        P64 = ctypes.POINTER(ctypes.c_int64)
        self.shapes = [(ctypes.c_int64 * 2)(*t.shape) for t in inputs]
        self.ins = (ctypes.c_void_p * n)(*[t.data_ptr() ^ XOR for t in inputs])
        self.ish = (P64 * n)(*[ctypes.cast(s, P64) for s in self.shapes])
        self.outs = (ctypes.c_void_p * 1)(out.data_ptr() ^ XOR)
        self.nbytes = (ctypes.c_int64 * 1)(out.numel() * out.element_size())
        self.oshape = (ctypes.c_int64 * 3)()
        self.osh = (P64 * 1)(ctypes.cast(self.oshape, P64))

    def __call__(self):
        rc = self.lib.m_run_device(self.ins, self.ish, self.outs, self.nbytes, self.osh, self.err,
                                   ctypes.c_size_t(len(self.err)))
        if rc != 0:
            raise RuntimeError(f"m_run_device: status {rc}: {self.err.value.decode()}")


DEV = "cuda"
XOR = 0  # the stand-in driver's device address of host memory: bit 46 flipped (tests/unit/fake_cuda.c)


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


WARMUP = 3


def timed(fn, runs):
    """Median wall time of a run, in ms, each run finished on the device before the clock stops."""
    for _ in range(WARMUP):
        fn()
    sync()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(ts)


def gpu_busy_ms(fn):
    """The GPU's time in one run of fn: its kernels' and copies' durations summed (PyTorch's profiler, CUPTI,
    which sees every stream of the process, disc's and cuBLASLt's too). Far below the wall time, the run is
    bound by the host's launches (what CUDA graphs would take away). None where no CUDA activity is seen."""
    from torch.profiler import profile, ProfilerActivity
    fn()
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        sync()
    t = sum(e.device_time for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    return t / 1e3 if t > 0 else None


def kernels_per_run(fn):
    """CUDA kernels one run of fn launches (PyTorch's profiler)."""
    from torch.profiler import profile, ProfilerActivity
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


UNITS = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "n": 1e-9, "u": 1e-6, "m": 1e-3}


def unit_scale(unit):
    """ncu's units, long (byte, Kbyte, nsecond, usecond, msecond, second) or short (B, KB, ns, us, ms, s,
    what --print-units base gave on the H200 of 2026-11-27). Another: ValueError, not a silent factor of 1
    (which made 18 us read 18 s)."""
    for base in ("byte", "second", "B", "s"):
        if unit.endswith(base) and unit[:-len(base)] in UNITS:
            return UNITS[unit[:-len(base)]]
    raise ValueError(f"ncu's unit {unit!r} is not one gpu_bench knows")


def ncu_bandwidth(a, d, work, shape, is_bert_model, top=6, raw=None):
    """Nsight Compute's DRAM bytes and time of disc's own kernels (not cuBLASLt's) in one run at shape: the
    kernels that take most of the time, with their achieved bandwidth. A list of dicts, or a string saying why
    not."""
    ncu = shutil.which("ncu") or ("/usr/local/cuda/bin/ncu" if os.path.exists("/usr/local/cuda/bin/ncu") else None)
    if not ncu:
        return "no ncu on this machine"
    exe, data = os.path.join(work, "aot_check"), os.path.join(work, "ncu_in")
    os.makedirs(data, exist_ok=True)
    b, s = shape
    ins = [np.random.default_rng(0).integers(0, 1000, size=(b, s), dtype=np.int64)]
    if is_bert_model:
        ins.append(np.ones((b, s), np.int64))
    for k, t in enumerate(ins):
        t.tofile(os.path.join(data, f"input_{k}.bin"))
        with open(os.path.join(data, f"input_{k}.shape"), "w") as f:
            f.write(f"{b} {s}")
    sh([a.cc, "-O1", f"-I{d}", "-DAOT_NAME=m", "-DAOT_UPPER=M", '-DAOT_HEADER="m.h"', "-DAOT_WEIGHTS",
        os.path.join(ROOT, "tests", "aot", "aot_check.c"), os.path.join(d, "m.o"), a.rtlib, a.stubs_o,
        "-lm", "-lpthread", "-ldl", "-o", exe])
    p = subprocess.run([ncu, "--csv", "--print-units", "base", "--kernel-name", "regex:^disc_",
                        "--metrics", "gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum",
                        exe, data, "--weights", os.path.join(work, "m.weights")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if raw:  # ncu's own CSV beside the report, to read its units and rows again
        with open(raw, "w") as f:
            f.write(p.stdout)
    try:
        out = parse_ncu(p.stdout) if p.returncode == 0 else None
    except ValueError as e:
        return f"ncu's CSV not read: {e}"
    if not out:
        return f"ncu failed (status {p.returncode}): {(p.stderr or p.stdout).strip()[-300:]}"
    return sorted(out, key=lambda e: -e["us"])[:top]


def parse_ncu(text):
    """Per kernel name, from `ncu --csv --print-units base`'s rows (one per launch and metric): launches, time,
    DRAM bytes read and written, and their ratio."""
    import csv
    import io
    rows = list(csv.reader(io.StringIO(text[text.find('"ID"'):]))) if '"ID"' in text else []
    if not rows:
        return None
    h = rows[0]
    ki, mi, ui, vi, ii = (h.index(c) for c in ("Kernel Name", "Metric Name", "Metric Unit", "Metric Value", "ID"))
    per = {}  # kernel name -> [seconds, bytes, launches]
    seen = set()
    for r in rows[1:]:
        if len(r) <= vi:
            continue
        v = float(r[vi].replace(",", "") or 0) * unit_scale(r[ui])
        e = per.setdefault(r[ki], [0.0, 0.0, 0])
        if r[mi].startswith("gpu__time"):
            e[0] += v
        else:
            e[1] += v
        if (r[ii], r[ki]) not in seen:
            seen.add((r[ii], r[ki]))
            e[2] += 1
    out = [{"kernel": k, "launches": n, "us": round(1e6 * t, 1), "MB": round(by / 1e6, 2),
            "GB/s": round(by / t / 1e9, 1) if t > 0 else 0} for k, (t, by, n) in per.items()]
    return out


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def write_report(out, meta, rows):
    with open(os.path.join(out, "gpu_bench.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    lines = [f"# disc cuda vs PyTorch on {meta['gpu']}", "",
             f"{meta['dcc']}, objects for {meta['arch']} compiled on {meta['cpu']}; torch {meta['torch']}; "
             f"median of {meta['runs']} runs after {WARMUP}, ms a run (disc: replays of the CUDA graph its second run "
             f"at the shape captured; disc, no graphs: DISC_CUDA_GRAPHS=0, the host flow's launches each run; "
             f"disc's GPU time: its kernels' and copies' durations in one run, PyTorch's profiler); ratio = peer / disc (above 1: disc faster); error: "
             f"the largest difference from PyTorch's f32 result on the same weights. "
             f"Device-to-device copy: {meta['copy_gbs']:.0f} GB/s.", ""]
    for tag in dict.fromkeys(r["tag"] for r in rows):
        rs = [r for r in rows if r["tag"] == tag]
        lines += [f"## {tag}", "", "| shape | disc | disc's GPU time | disc, no graphs | disc --no-fuse | eager | "
                  "compile | vs eager | vs compile | vs no-fuse | error: disc | eager |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rs:
            f = lambda v: "-" if v is None else f"{v:.3f}"
            lines.append(f"| {r['shape']} | {f(r['disc'])} | {f(r.get('disc_gpu'))} | {f(r.get('disc_nograph'))} | "
                         f"{f(r['nofuse'])} | "
                         f"{f(r['eager'])} | "
                         f"{f(r['compiled'])} | {f(r.get('vs_eager'))} | {f(r.get('vs_compiled'))} | "
                         f"{f(r.get('vs_nofuse'))} | {r['err_disc']:.1e}{'' if r['correct'] else ' WRONG'} | "
                         f"{r['err_eager']:.1e} |")
        g = lambda k: geomean([r.get(k) for r in rs])
        lines += ["", f"geomean: vs eager {g('vs_eager'):.2f}, vs torch.compile {g('vs_compiled'):.2f}, "
                  f"vs --no-fuse {g('vs_nofuse'):.2f}", ""]
        info = meta["models"].get(tag, {})
        for k, v in info.items():
            lines.append(f"- {k}: {v}")
        lines.append("")
    with open(os.path.join(out, "gpu_bench.md"), "w") as f:
        f.write("\n".join(lines))


def run(a):
    global DEV, XOR, WARMUP
    if a.rehearse:  # the stand-in driver: its device memory is host memory
        DEV, XOR, WARMUP = "cpu", 1 << 46, 0
        a.no_compile = True
    elif not torch.cuda.is_available():
        sys.exit("gpu_bench: no CUDA device for PyTorch")
    man = json.load(open(os.path.join(a.dir, "manifest.json")))
    os.makedirs(a.out, exist_ok=True)
    work = a.work or os.path.join(a.out, "work")
    os.makedirs(work, exist_ok=True)
    a.stubs_o = os.path.join(work, "no_dnnl_stubs.o")
    sh([a.cc, "-c", "-fPIC", "-O1", "-o", a.stubs_o, a.stubs])
    x = torch.empty(1 << 28, dtype=torch.uint8, device=DEV)
    copy_ms = timed(lambda: x.clone(), 10)
    meta = {"gpu": torch.cuda.get_device_name() if DEV == "cuda" else "the stand-in driver (a rehearsal)", "torch": torch.__version__, "dcc": man["dcc"], "arch": man["arch"],
            "cpu": man["cpu"], "runs": a.runs, "copy_gbs": 2 * x.numel() / copy_ms / 1e6, "models": {}}
    del x
    shapes = [tuple(map(int, s.split("x"))) for s in a.shapes.split(",")] if a.shapes else SHAPES
    rows = []
    torch.backends.cuda.matmul.allow_tf32 = False  # as disc without DISC_TF32
    for ent in man["models"]:
        if (a.models and ent["model"] not in a.models.split(",")) or (a.dtypes and ent["dtype"] not in a.dtypes.split(",")):
            continue
        t_model = time.perf_counter()
        tag, name, dt = ent["tag"], ent["model"], ent["dtype"]
        d = os.path.join(a.dir, tag)
        info = meta["models"][tag] = {
            "disc compile (here, NVRTC included)": f"{ent['fused']['compile_s']} s",
            "disc kernels": ent["fused"]["compile_v"],
            "disc --no-fuse kernels": ent["nofuse"]["compile_v"]}
        wd = os.path.join(work, tag)
        os.makedirs(os.path.join(wd, "fused"), exist_ok=True)
        os.makedirs(os.path.join(wd, "nofuse"), exist_ok=True)
        fused = Disc(os.path.join(d, "fused"), a, os.path.join(wd, "fused"))
        nofuse = Disc(os.path.join(d, "nofuse"), a, os.path.join(wd, "nofuse"))
        model = build(name, dt).to(DEV)
        # the oracle: the same (rounded) weights computed in f32
        model32 = build(name, dt).float().to(DEV) if dt != "f32" else model
        comp = None
        if not a.no_compile:
            comp = torch.compile(model, dynamic=True)
        vocab = model.head.out_features if hasattr(model, "head") else HIDDEN
        for b, s in shapes:
            g = torch.Generator(device="cpu").manual_seed(b * 1000 + s)
            ids = torch.randint(0, 1000, (b, s), generator=g).to(DEV)
            ins = [ids, torch.ones(b, s, dtype=torch.long, device=DEV)] if is_bert(name) else [ids]
            out = torch.empty(b, s, vocab if not is_bert(name) else HIDDEN, dtype=getattr(torch, DTYPES[dt]),
                              device=DEV)
            out2 = torch.empty_like(out)
            fused.prepare(ins, out)
            nofuse.prepare(ins, out2)
            sync()
            with torch.inference_mode():
                ref = model(*ins)
                ref32 = model32(*ins).float()
                sync()
                fused()
                nofuse()
                err = lambda t: (t.float() - ref32).abs().max().item()
                scale = ref32.abs().max().item()
                r = {"tag": tag, "shape": f"{b}x{s}", "err_disc": err(out), "err_nofuse": err(out2),
                     "err_eager": err(ref), "ref_max": scale}
                # f32: as close to eager as another order of the sums; f16: no further from the f32 result
                # than eager's own f16 run is, or 1% of the largest output
                tol = 2e-4 * max(1.0, scale) if dt == "f32" else max(2 * r["err_eager"], 1e-2 * max(1.0, scale))
                r["correct"] = r["err_disc"] <= tol and r["err_nofuse"] <= tol
                r["disc"] = timed(fused, a.runs)
                # the runs timed were CUDA graphs' replays (a run at shapes seen before): checked again
                r["err_disc_graph"] = err(out)
                r["correct"] = r["correct"] and r["err_disc_graph"] <= tol
                os.environ["DISC_CUDA_GRAPHS"] = "0"  # the flow's own launches, run after run
                r["disc_nograph"] = timed(fused, a.runs)
                del os.environ["DISC_CUDA_GRAPHS"]
                try:
                    r["disc_gpu"] = gpu_busy_ms(fused) if DEV == "cuda" else None
                except Exception as e:  # noqa: BLE001  (the profiler's failures are many kinds)
                    r["disc_gpu"], info["disc's GPU time"] = None, f"PyTorch's profiler failed: {str(e)[:200]}"
                r["nofuse"] = timed(nofuse, a.runs)
                r["eager"] = timed(lambda: model(*ins), a.runs)
                r["compiled"] = None
                if comp is not None:
                    try:
                        t0 = time.perf_counter()
                        comp(*ins)
                        sync()
                        r["compile_first_call_s"] = round(time.perf_counter() - t0, 2)
                        r["compiled"] = timed(lambda: comp(*ins), a.runs)
                    except Exception as e:  # noqa: BLE001  (Inductor's failures are many kinds; the rest goes on)
                        info["torch.compile"] = f"failed at {b}x{s}: {type(e).__name__}: {str(e)[:300]}"
                        comp = None
                if (b, s) == shapes[len(shapes) // 2] and DEV == "cuda":
                    try:
                        info["eager kernels a run at " + r["shape"]] = kernels_per_run(lambda: model(*ins))
                        if comp is not None:
                            info["torch.compile kernels a run at " + r["shape"]] = kernels_per_run(
                                lambda: comp(*ins))
                    except Exception as e:  # noqa: BLE001
                        info["kernels a run"] = f"PyTorch's profiler failed: {str(e)[:200]}"
            for k, v in (("vs_eager", "eager"), ("vs_compiled", "compiled"), ("vs_nofuse", "nofuse")):
                r[k] = r[v] / r["disc"] if r[v] else None
            rows.append(r)
            print(f"{tag} {b}x{s}: disc {r['disc']:.3f} ms, no-fuse {r['nofuse']:.3f}, eager {r['eager']:.3f}, "
                  f"compile {r['compiled'] or 0:.3f}; error {r['err_disc']:.2e} (eager {r['err_eager']:.2e}, of "
                  f"{r['ref_max']:.2g})"
                  f"{'' if r['correct'] else ' WRONG'}", flush=True)
            write_report(a.out, meta, rows)
            del out, out2, ref, ref32
        if dt == "f32" and DEV == "cuda" and not a.no_ncu:  # the fused kernels' bandwidth, at the largest
            shape = max(shapes, key=lambda t: t[0] * t[1])  # shape (the smaller ones fit the 50 MB L2)
            try:
                bw = ncu_bandwidth(a, os.path.join(d, "fused"), os.path.join(wd, "fused"), shape, is_bert(name),
                                   raw=os.path.join(a.out, f"ncu_{tag}.csv"))
            except (OSError, subprocess.SubprocessError, ValueError) as e:
                bw = f"ncu failed: {e}"
            info[f"disc's kernels taking most time at {shape[0]}x{shape[1]} (ncu: DRAM bytes / time; copy "
                 f"{meta['copy_gbs']:.0f} GB/s)"] = bw if isinstance(bw, str) else "; ".join(
                     f"{e['kernel']} x{e['launches']} {e['us']} us {e['MB']} MB {e['GB/s']} GB/s" for e in bw)
            write_report(a.out, meta, rows)
        for x in (fused, nofuse):
            os.remove(x.weights)
        info["this model's part of the benchmark took"] = f"{time.perf_counter() - t_model:.0f} s"
        write_report(a.out, meta, rows)
        del fused, nofuse, model, model32, comp
        if DEV == "cuda":
            torch.cuda.empty_cache()
    bad = [f"{r['tag']} {r['shape']}" for r in rows if not r["correct"]]
    if bad:
        print("gpu_bench: outputs differ from PyTorch eager's at: " + ", ".join(bad))
        return 1
    return 0


# -------------------------------------------------------------- profile (there)
def profile_child(a):
    """One model at one shape in a process of its own with DISC_PROFILE=1: the warm-up runs paused, then
    a.runs runs timed per kernel and library call; the runtime's report goes to stderr at exit."""
    global DEV, XOR
    if a.rehearse:
        DEV, XOR = "cpu", 1 << 46
    tag, (b, s) = a.tag, tuple(map(int, a.shape.split("x")))
    ent = next(e for e in json.load(open(os.path.join(a.dir, "manifest.json")))["models"] if e["tag"] == tag)
    wd = os.path.join(a.work, tag)
    os.makedirs(wd, exist_ok=True)
    a.stubs_o = os.path.join(a.work, "no_dnnl_stubs.o")
    disc = Disc(os.path.join(a.dir, tag, "fused"), a, wd)
    g = torch.Generator(device="cpu").manual_seed(b * 1000 + s)
    ids = torch.randint(0, 1000, (b, s), generator=g).to(DEV)
    ins = [ids, torch.ones(b, s, dtype=torch.long, device=DEV)] if is_bert(ent["model"]) else [ids]
    import gen_bench
    m = gen_bench.transformer(ent["model"])  # (PyTorch's initialisation: only its output's width is read)
    width = m.head.out_features if hasattr(m, "head") else HIDDEN
    del m
    out = torch.empty(b, s, width, dtype=getattr(torch, DTYPES[ent["dtype"]]), device=DEV)
    disc.prepare(ins, out)
    pause = getattr(disc.lib, "disc_rt_prof_pause", None)
    if pause:
        pause(1)
    for _ in range(3):
        disc()
    sync()
    if pause:
        pause(0)
    for _ in range(a.runs):
        disc()
    sync()
    os.remove(disc.weights)
    return 0


def torch_top(fn, top):
    """PyTorch's profiler over one run of fn: the CUDA kernels taking most time, as text lines."""
    from torch.profiler import profile, ProfilerActivity
    fn()
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        sync()
    per = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            t = per.setdefault(e.name, [0.0, 0])
            t[0] += e.device_time
            t[1] += 1
    total = sum(t for t, _ in per.values()) or 1
    rows = sorted(per.items(), key=lambda kv: -kv[1][0])[:top]
    return [f"{t / 1e3:8.3f} ms {100 * t / total:5.1f}% x{n:<4} {k[:110]}" for k, (t, n) in rows] + \
        [f"{total / 1e3:8.3f} ms in {sum(n for _, n in per.values())} kernels"]


def profile(a):
    """Where the time goes, per kernel, at the given shapes: disc (DISC_PROFILE, CUDA events around each
    launch and library call, in a child process), then PyTorch eager and torch.compile(dynamic=True)
    (PyTorch's profiler, one run). Writes OUT/gpu_profile.md."""
    man = json.load(open(os.path.join(a.dir, "manifest.json")))
    os.makedirs(a.out, exist_ok=True)
    work = a.work or os.path.join(a.out, "work")
    os.makedirs(work, exist_ok=True)
    sh([a.cc, "-c", "-fPIC", "-O1", "-o", os.path.join(work, "no_dnnl_stubs.o"), a.stubs])
    shapes = a.shapes.split(",")
    tags = [e for e in man["models"] if (not a.models or e["model"] in a.models.split(","))
            and (not a.dtypes or e["dtype"] in a.dtypes.split(","))]
    md = os.path.join(a.out, "gpu_profile.md")
    gpu = "the stand-in driver (a rehearsal)" if a.rehearse else torch.cuda.get_device_name()
    lines = [f"# Where the time goes: disc cuda and PyTorch on {gpu}", ""]

    def flush():
        with open(md, "w") as f:
            f.write("\n".join(lines) + "\n")
    for ent in tags if not a.no_disc else []:
        for shape in shapes:
            env = dict(os.environ, DISC_PROFILE="1", DISC_PROFILE_TOP=str(a.top))
            cmd = [sys.executable, os.path.abspath(__file__), "profile-child", a.dir, "--tag", ent["tag"], "--shape",
                   shape, "--runs", str(a.runs), "--work", work, "--rtlib", a.rtlib, "--stubs", a.stubs, "--cc", a.cc]
            p = subprocess.run(cmd + (["--rehearse"] if a.rehearse else []), env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=600)
            lines += [f"## disc {ent['tag']} {shape}: {a.runs} runs (DISC_PROFILE)", "", "```",
                      p.stdout.strip() + ("" if p.returncode == 0 else f"\n(status {p.returncode})"), "```", ""]
            print(lines[-3], flush=True)
            flush()
    if a.no_torch or a.rehearse:
        return 0
    for ent in tags:
        model = build(ent["model"], ent["dtype"]).to(DEV)
        comp = torch.compile(model, dynamic=True)
        for shape in shapes:
            b, s = map(int, shape.split("x"))
            g = torch.Generator(device="cpu").manual_seed(b * 1000 + s)
            ids = torch.randint(0, 1000, (b, s), generator=g).to(DEV)
            ins = [ids, torch.ones(b, s, dtype=torch.long, device=DEV)] if is_bert(ent["model"]) else [ids]
            with torch.inference_mode():
                for what, fn in (("eager", model), ("torch.compile(dynamic=True)", comp)):
                    try:
                        got = torch_top(lambda: fn(*ins), a.top)
                    except Exception as e:  # noqa: BLE001  (Inductor's failures are many kinds)
                        got = [f"failed: {type(e).__name__}: {str(e)[:300]}"]
                    lines += [f"## {what} {ent['tag']} {shape}: one run (PyTorch's profiler)", "", "```"] + got + \
                        ["```", ""]
                    print("\n".join(got[-1:]), flush=True)
                    flush()
        del model, comp
        torch.cuda.empty_cache()
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("dir")
    p.add_argument("--models", default="bert_base,gpt2")
    p.add_argument("--dtypes", default="f32,f16")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--dcc", default=os.path.join(ROOT, "build", "dcc"))
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--rtlib", required=True)
    r.add_argument("--stubs", required=True, help="C source of the oneDNN stubs (run_on_device.sh --prepare)")
    r.add_argument("--out", default=os.environ.get("OUT", "/tmp/disc-gpu-bench"))
    r.add_argument("--work", help="where the shared objects and weights go (OUT/work)")
    r.add_argument("--runs", type=int, default=20)
    r.add_argument("--models", help="a subset, e.g. bert_base")
    r.add_argument("--dtypes", help="a subset, e.g. f32")
    r.add_argument("--shapes", help="BxS,... (default " + ",".join(f"{b}x{s}" for b, s in SHAPES) + ")")
    r.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    r.add_argument("--no-ncu", action="store_true", help="leave out Nsight Compute's bandwidth of the kernels")
    r.add_argument("--cc", default=os.environ.get("CC", "cc"))
    r.add_argument("--rehearse", action="store_true",
                   help="on the stand-in driver (build/fakecuda on LD_LIBRARY_PATH, objects prepared with "
                   "DISC_CUDA_EMU_MODULES=1): PyTorch on the CPU, no torch.compile; checks the plumbing, "
                   "not the speed"),
    for name in ("profile", "profile-child"):
        q = sub.add_parser(name, help="where the time goes, per kernel (DISC_PROFILE and PyTorch's profiler)"
                           if name == "profile" else argparse.SUPPRESS)
        q.add_argument("dir")
        q.add_argument("--rtlib", required=True)
        q.add_argument("--stubs", required=True)
        q.add_argument("--cc", default=os.environ.get("CC", "cc"))
        q.add_argument("--runs", type=int, default=10)
        q.add_argument("--rehearse", action="store_true", help="on the stand-in driver, as run's")
        if name == "profile":
            q.add_argument("--out", default=os.environ.get("OUT", "/tmp/disc-gpu-bench"))
            q.add_argument("--work", help="where the shared objects and weights go (OUT/work)")
            q.add_argument("--models", help="a subset, e.g. bert_base")
            q.add_argument("--dtypes", help="a subset, e.g. f16")
            q.add_argument("--shapes", default="16x512", help="BxS,... (16x512)")
            q.add_argument("--top", type=int, default=15, help="kernels listed per run (15)")
            q.add_argument("--no-torch", action="store_true", help="disc's profile only")
            q.add_argument("--no-disc", action="store_true", help="PyTorch's profiles only")
        else:
            q.add_argument("--tag", required=True)
            q.add_argument("--shape", required=True)
            q.add_argument("--work", required=True)
    a = ap.parse_args()
    if a.cmd == "prepare":
        prepare(a)
        return 0
    if a.cmd == "profile-child":
        return profile_child(a)
    if a.cmd == "profile":
        if not a.rehearse and not torch.cuda.is_available():
            sys.exit("gpu_bench: no CUDA device for PyTorch")
        return profile(a)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
