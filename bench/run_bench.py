#!/usr/bin/env python3
"""run_bench.py — disc (cpu backend) against ONNX Runtime, in the same run.

    python3 bench/run_bench.py [--dcc build/dcc] [--runs N] [--rounds R] [--models NAME,...] [--quick]
                               [--threads N] [--cpu-time] [--broad | --extra | --trained] [--inproc]

--broad runs the broad bench of issue 18 instead: the twelve models of
bench/gen_bench.py's BROAD list (CNNs, a ViT, transformer encoders and
decoders of two sizes, a LLaMA block, an encoder-decoder, a recommender),
generated on first use, each at four shapes (BROAD_SHAPES).

For every model (the committed tests/models/*, the BERT-base and GPT-2
size models and two LSTM taggers that bench/gen_bench.py generates into
bench/models/, never committed) and every shape of its spread, it writes a data set (inputs,
and the outputs ONNX Runtime computes, so disc's results are checked
first), then times both: disc through `dcc bench` (the model compiled once
for all shapes) and ONNX Runtime (CPU, the same number of threads, every
graph optimisation). It prints per shape disc ms, ORT ms and the ratio
ORT/disc (above 1: disc is faster), the geometric mean per model, disc's one
compile time and its kernel count against the model's op count. Each
model is measured in R rounds (default 3) that alternate which runtime
goes first; the table has the medians across rounds, and the spread of the
per-round ratios.

--extra runs bench/gen_bench.py's EXTRA list the same way: ten more
torchvision models, each a family the broad bench lacks (DenseNet,
GoogLeNet, SqueezeNet, ShuffleNet, ResNeXt, RegNet, MnasNet,
EfficientNetV2, ConvNeXt, Swin), at the CNN shapes. --detect runs its
DETECT list: torchvision's detectors (SSDlite, Faster R-CNN, RetinaNet,
FCOS) on one image at three sizes (DETECT_SHAPES).

--inproc times disc in this process instead of through `dcc bench`
(build/public/libdisc.so through bench/discpy.py), the two runtimes taking
turns batch by batch within a fraction of a second (inproc_times).

Machines here are noisy: only ratios measured in the same run mean much.
Needs torch (for generating the large models), onnxruntime, numpy, onnx.
"""
import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's pool: no spinning threads beside the timed runs
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import numpy_helper  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from cpuinfo import cpu_line  # noqa: E402

# (batch, seq) spread for the transformer models; odd lengths included
SEQ_SPREAD = [(1, 8), (1, 13), (1, 197), (2, 64), (4, 128), (8, 33), (16, 32), (1, 512)]
SEQ_QUICK = [(1, 13), (2, 64), (4, 128)]
IMG_SPREAD = [(1, 32, 32), (2, 17, 29), (1, 64, 197), (4, 64, 64)]
# the broad bench: per model, the input shapes (dims the model leaves
# dynamic, in order; fixed dims are skipped over by position)
CNN_SHAPES = [(1, 3, 224, 224), (2, 3, 160, 200), (1, 3, 197, 231), (4, 3, 224, 224)]
# the extra set (gen_bench.py's EXTRA), at CNN_SHAPES
EXTRA = ["densenet121", "googlenet", "squeezenet1_1", "shufflenet_v2_x1_0", "resnext50_32x4d", "regnet_y_400mf",
         "mnasnet1_0", "efficientnet_v2_s", "convnext_tiny", "swin_t"]
ENC_SHAPES = [(1, 8), (1, 13), (4, 64), (8, 33)]
# the detectors (gen_bench.py's DETECT): one 3 x H x W image
DETECT = ["ssdlite320_mobilenet_v3_large", "fasterrcnn_mobilenet_v3_large_320_fpn", "retinanet_resnet50_fpn",
          "fcos_resnet50_fpn"]
DETECT_SHAPES = [(3, 320, 320), (3, 240, 353), (3, 401, 299)]
# the recurrent models make bench runs beside BERT-base and GPT-2 (gen_bench.py's RNN)
RNN_SHAPES = {"lstm_small": [(1, 13), (4, 64), (8, 33), (1, 197)],
              "lstm_bidir": [(1, 13), (4, 64), (8, 33), (1, 197)]}
BROAD_SHAPES = {
    "resnet50": CNN_SHAPES, "mobilenet_v2": CNN_SHAPES, "mobilenet_v3_small": CNN_SHAPES,
    "efficientnet_b0": CNN_SHAPES, "vit_b_16": [(1,), (2,), (3,), (8,)],
    "bert_small": ENC_SHAPES, "bert_base": [(1, 13), (2, 64), (4, 128), (8, 33)],
    "gpt_small": [(1, 1), (1, 13), (4, 64), (8, 33)], "gpt2": [(1, 1), (1, 13), (2, 64), (4, 128)],
    "llama_block": [(1, 1), (1, 13), (4, 64), (2, 197)], "encdec": [(1, 13), (2, 32), (4, 64), (8, 7)],
    "recommender": [(1, 1), (4, 50), (16, 100), (64, 20)],
}


THREADS = os.cpu_count() or 1
CPU_TIME = False  # --cpu-time: compare the processes' CPU time per run, not wall time
INPROC = False  # --inproc: disc through libdisc.so in this process (inproc_times)
ATOL = 1e-4  # the outputs' check (close); --trained takes each model's from tests/trained/expect.txt
# --detect: at random weights a detector's scores are equal, or equal to
# within a few ulps (SSDlite: thousands of boxes near 1/91), and the order
# of equal scores is the implementation's (disc: the lower index first, as
# ONNX's reference; ONNX Runtime: its heap's), so the boxes come in another
# order and the greedy NMS keeps some others: SSDlite's 300 scores differ
# from ONNX Runtime's in 37-40 places by 0.1%, every other detector's in
# at most 1. The check compares the counts, and each 1-D float output (the
# scores) sorted, at 1e-3 relative in all but a fifth of its places
# (exact semantics: the ONNX node tests and tests/interp/nms.disc).
DETECT_CHECK = False


def threads():
    return THREADS


def ort_session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads()
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3  # not a warning per run where a model declares an output's shape wrongly (ddddocr)
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def make_inputs(model_path, shape, rng):
    """Inputs for a model at a shape: ids for int64 inputs, floats else."""
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    feeds = {}
    for inp in m.graph.input:
        if inp.name in inits:
            continue
        t = inp.type.tensor_type
        rank = len(t.shape.dim)
        dims = []
        for k, d in enumerate(t.shape.dim):
            if d.dim_value:
                dims.append(d.dim_value)
            else:
                dims.append(shape[k] if k < len(shape) else 1)
        if t.elem_type == onnx.TensorProto.INT64:
            hi = 100
            if "mask" in inp.name:
                feeds[inp.name] = np.ones(dims, np.int64)
            else:
                feeds[inp.name] = rng.integers(0, hi, size=dims).astype(np.int64)
        else:
            feeds[inp.name] = rng.standard_normal(dims).astype(np.float32)
        assert rank == len(dims)
    return feeds


def write_set(d, sess, feeds):
    os.makedirs(d, exist_ok=True)
    for k, (name, v) in enumerate(feeds.items()):
        with open(os.path.join(d, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, name).SerializeToString())
    outs = sess.run(None, feeds)
    for k, (o, v) in enumerate(zip(sess.get_outputs(), outs)):
        with open(os.path.join(d, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, o.name).SerializeToString())


def time_ort(sess, feeds, runs):
    clock = time.process_time if CPU_TIME else time.perf_counter
    sess.run(None, feeds)
    ts = []
    for _ in range(runs):
        t0 = clock()
        sess.run(None, feeds)
        ts.append(clock() - t0)
    return statistics.median(ts) * 1e3


def profile(dcc, work, runs):
    """Library-call and kernel ms summed by DISC_PROFILE over a dcc bench of
    `runs` runs a data set, and the runs' median ms summed over the sets."""
    env = dict(os.environ, DISC_PROFILE="1", DISC_PROFILE_TOP="100000")
    # the same check as the timed runs: with dcc bench's own default
    # tolerance (ONNX's 1e-3, 1e-7) a transformer's outputs near 0 fail, the
    # bench exits 1, and the split was left off every such model's line
    p = subprocess.run([dcc, "bench", work, "--runs", str(runs), "--threads", str(threads()),
                        "--atol", str(ATOL), "--rtol", "1e-2"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lib = kern = med = 0.0
    for line in p.stdout.splitlines():
        m = re.match(r"\s+([\d.]+) ms\s+[\d.]+%\s+\d+ calls\s+(.*)", line)
        if m:
            if m.group(2).startswith(("disc_k", "kernel")):
                kern += float(m.group(1))
            else:
                lib += float(m.group(1))
        m = re.match(r"test_data_set_\d+: .* median ([\d.]+) ms", line)
        if m:
            med += float(m.group(1))
    return p.returncode == 0, lib, kern, med


def where_time_goes(dcc, work, runs):
    """"; time: L% library calls, K% generated kernels, H% host flow": a
    profiled dcc bench of `runs` runs a data set (its profile leaves out each
    set's first run, which creates oneDNN's primitives and packs weights)
    against the runs' median time. The profile's timers add to every call,
    so where calls take a few microseconds (an LSTM's steps) the host flow's
    share reads low."""
    ok, lib, kern, med = profile(dcc, work, runs)
    wall = med * runs
    if not ok or wall <= 0 or lib + kern <= 0:
        return ""
    total = max(wall, lib + kern)
    host = max(0.0, total - lib - kern)  # not -0 from rounding
    return (f"; time: {100 * lib / total:.0f}% library calls, {100 * kern / total:.0f}% generated kernels, "
            f"{100 * host / total:.0f}% host flow and runtime")


def close(got, want, atol=None, rtol=1e-2):
    """The check dcc bench runs with run_bench's tolerances: "" or what differs."""
    atol = ATOL if atol is None else atol
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if DETECT_CHECK:
        if got.dtype.kind != "f" or got.ndim != 1:
            return ""
        got, want, atol, rtol = np.sort(got), np.sort(want), 0, 1e-3
    if got.dtype.kind == "f":
        g, w = got.astype(np.float64), want.astype(np.float64)
        bad = ~(np.abs(g - w) <= atol + rtol * np.abs(w)) & ~(np.isnan(g) & np.isnan(w))
    else:
        bad = got != want
    if DETECT_CHECK and bad.sum() * 5 <= bad.size:
        return ""
    if bad.any():
        i = np.unravel_index(np.argmax(bad), bad.shape)
        return f"{int(bad.sum())} of {bad.size} elements differ, first at {list(i)}: {got[i]} against {want[i]}"
    return ""


def inproc_times(name, path, sess, feeds, runs, rounds):
    """--inproc: disc through libdisc.so (bench/discpy.py) in this process,
    shape by shape, the two runtimes alternating batch by batch: a batch is
    an untimed run and then one timed run where a run takes 50 ms or more,
    else as many as take about 50 ms; each round (`rounds` of them) times
    `runs` runs of each, the order flipping batch to batch. So both are
    timed within a fraction of a second of each other (a shared VM's speed
    drifts over seconds: rounds of whole batches a few seconds apart read
    GPT-2 at 0.79-0.90 where run-by-run pairs read 0.95). The untimed run
    makes every timed run a warm one, as in a steady stream of requests
    (whole broad-bench runs with and without it read the CNNs alike: 0.95,
    0.96, 0.99, 0.94 and 0.91, 0.96, 0.98, 0.97). Returns ((compile ms, ops,
    kernels, load ms), disc ms, ORT ms) with the per-round medians per shape; a shape
    whose outputs differ from ONNX Runtime's gets no disc times."""
    import discpy
    model = discpy.Model(path)
    comp = model.compile(threads=threads())
    # the load apart from the compile: a first start of a model copies its
    # weights into the cache directory (GPT-2's 652 MB: most of 2 s on a
    # slow VM), which is not the compile the 1 s is about
    info = (1e3 * comp.compile_s, model.ops, comp.kernels, 1e3 * model.load_s)
    clock = time.process_time if CPU_TIME else time.perf_counter
    disc_t = {k: [] for k in range(len(feeds))}
    ort_t = {k: [] for k in range(len(feeds))}
    names = [i.name for i in sess.get_inputs()]

    def ort_runs(f, n):
        ts = []
        for _ in range(n):
            t0 = clock()
            sess.run(None, f)
            ts.append(clock() - t0)
        return ts

    for k, f in enumerate(feeds):
        arrays = [f[n] for n in names]
        want = sess.run(None, f)
        try:
            got = comp.run(arrays)
            bad = next((f"output {i}: {e}" for i, (g, w) in enumerate(zip(got, want)) if (e := close(g, w))), "")
        except discpy.DiscError as e:
            bad = str(e)
        if bad:
            print(f"  {name}: shape {k}: FAIL {bad}", file=sys.stderr)
            ort_t[k] = [time_ort(sess, f, runs)]
            continue
        warm = min(comp.time_runs(arrays, 2, time.perf_counter) + ort_runs(f, 2))
        batch = max(1, min(runs, int(0.05 / max(warm, 1e-6))))
        for r in range(rounds):
            dt, ot = [], []
            flip = r % 2
            while len(dt) < runs:
                n = min(batch, runs - len(dt))
                for who in ((0, 1) if flip == 0 else (1, 0)):
                    if threads() > 1:  # neither runtime's workers still spinning while the other runs
                        time.sleep(0.005)
                    # a batch starts with an untimed run: the other runtime
                    # has just filled the caches with its own weights
                    if who == 0:
                        dt += comp.time_runs(arrays, n + 1, clock)[1:]
                    else:
                        ot += ort_runs(f, n + 1)[1:]
                flip ^= 1
            disc_t[k].append(statistics.median(dt) * 1e3)
            ort_t[k].append(statistics.median(ot) * 1e3)
    return info, disc_t, ort_t


def trained_models(want):
    """--trained: the float and quantized models of the trained collection
    (tests/trained/collect.py, `make trained`) that tests/trained/expect.txt
    says disc runs, each with its data sets' inputs and its tolerance:
    [(name, path, None, feeds, atol)]."""
    base = os.path.join(ROOT, "tests", "trained")
    out = []
    with open(os.path.join(base, "expect.txt")) as f:
        for line in f:
            w = line.split("#")[0].split()
            if len(w) < 2 or w[1] != "pass" or (want and w[0] not in want):
                continue
            d = os.path.join(base, "models", w[0])
            if not os.path.isdir(d):
                continue
            atol = float(w[w.index("--atol") + 1]) if "--atol" in w else 1e-4
            g = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False).graph
            inits = {i.name for i in g.initializer}
            names = [i.name for i in g.input if i.name not in inits]  # the data sets' order
            feeds = []
            for s in sorted(x for x in os.listdir(d) if x.startswith("test_data_set_")):
                f = {}
                for k in range(len(names)):
                    t = onnx.TensorProto()
                    with open(os.path.join(d, s, f"input_{k}.pb"), "rb") as fh:
                        t.ParseFromString(fh.read())
                    f[names[k]] = numpy_helper.to_array(t)
                feeds.append(f)
            out.append((w[0], os.path.join(d, "model.onnx"), None, feeds, max(atol, 1e-4)))
    return out


def bench_model(name, path, shapes, dcc, runs, rounds, rows, given=None):
    """Times one model at each of `shapes` (inputs made by make_inputs), or
    at the feeds `given` (--trained: the data sets' own inputs)."""
    global ATOL
    sess = ort_session(path)
    rng = np.random.default_rng(0)
    work = tempfile.mkdtemp(prefix=f"disc-bench-{name}-")
    try:
        os.symlink(os.path.abspath(path), os.path.join(work, "model.onnx"))
        data = os.path.join(os.path.dirname(os.path.abspath(path)), "model.onnx.data")
        if os.path.exists(data):
            os.symlink(data, os.path.join(work, "model.onnx.data"))
        feeds = list(given) if given else [make_inputs(path, shape, rng) for shape in shapes]
        if given:
            shapes = [tuple(next(iter(f.values())).shape) for f in given]
        for k, f in enumerate(feeds):
            write_set(os.path.join(work, f"test_data_set_{k}"), sess, f)
        def run_disc():
            p = subprocess.run([dcc, "bench", work, "--runs", str(runs), "--threads", str(threads()),
                                "--atol", str(ATOL), "--rtol", "1e-2", "-v"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            out = p.stdout
            m = re.search(r"compiled once in ([\d.]+) ms \(backend \w+; (\d+) ops, (\d+) kernels\)", out)
            info = (float(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (float("nan"), 0, 0)
            times = {}
            for line in out.splitlines():
                m2 = re.match(r"test_data_set_(\d+): .* median ([\d.]+) ms.*cpu time median ([\d.]+) ms", line)
                if m2:
                    times[int(m2.group(1))] = float(m2.group(3 if CPU_TIME else 2))
                elif "FAIL" in line:
                    print(f"  {name}: {line.strip()}", file=sys.stderr)
            if p.returncode != 0 and not times:
                print(f"  {name}: dcc bench failed:\n{out}", file=sys.stderr)
            return info, times

        # rounds alternate which runtime goes first, so a drift of the
        # machine's speed during a round does not favour either
        disc_t = {k: [] for k in range(len(shapes))}
        ort_t = {k: [] for k in range(len(shapes))}
        compile_ms, nops, nkern, load = float("inf"), 0, 0, ""
        if INPROC:
            (compile_ms, nops, nkern, load_ms), disc_t, ort_t = inproc_times(name, path, sess, feeds, runs, rounds)
            load = f" (after a load of {load_ms:.0f} ms)"
        for r in range(0 if INPROC else rounds):
            for who in (("disc", "ort") if r % 2 == 0 else ("ort", "disc")):
                if who == "disc":
                    (c, nops, nkern), times = run_disc()
                    compile_ms = min(compile_ms, c)
                    for k, t in times.items():
                        disc_t[k].append(t)
                else:
                    for k in range(len(shapes)):
                        ort_t[k].append(time_ort(sess, feeds[k], runs))
        split = where_time_goes(dcc, work, runs)
        onnx_nodes = len(onnx.load(path, load_external_data=False).graph.node)
        ratios = []
        for k, shape in enumerate(shapes):
            ort_ms = statistics.median(ort_t[k])
            disc_ms = statistics.median(disc_t[k]) if disc_t[k] else None
            ratio = ort_ms / disc_ms if disc_ms else float("nan")
            if disc_ms:
                ratios.append(ratio)
            per = [o / d for o, d in zip(ort_t[k], disc_t[k])]
            spread = f"  (rounds {min(per):.2f}-{max(per):.2f})" if len(per) > 1 else ""
            rows.append((name, "x".join(map(str, shape)), disc_ms, ort_ms, ratio))
            print(f"{name:14s} {'x'.join(map(str, shape)):>10s} disc {disc_ms if disc_ms else float('nan'):9.3f} ms"
                  f"  ort {ort_ms:9.3f} ms  ratio {ratio:6.2f}{spread}", flush=True)
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
        print(f"{name:14s} geomean ratio {geo:.2f}; compiled once in {compile_ms:.0f} ms{load}; "
              f"{nkern} kernels for {nops} core ops ({onnx_nodes} ONNX nodes){split}\n", flush=True)
        return geo
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    global THREADS, CPU_TIME, INPROC, ATOL, DETECT_CHECK
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dcc", default=os.path.join(ROOT, "build", "dcc"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--models", default="", help="comma-separated names (default: all)")
    ap.add_argument("--quick", action="store_true", help="fewer shapes")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of both runtimes, alternating which goes first; medians across rounds")
    ap.add_argument("--threads", type=int, default=THREADS, help="threads of each runtime (default: every core)")
    ap.add_argument("--broad", action="store_true", help="the broad bench: twelve models of several families")
    ap.add_argument("--extra", action="store_true",
                    help="ten more torchvision models, each a family the broad bench lacks (gen_bench.py's EXTRA)")
    ap.add_argument("--detect", action="store_true",
                    help="torchvision's detectors (gen_bench.py's DETECT) on one image at three sizes")
    ap.add_argument("--trained", action="store_true",
                    help="the trained collection (make trained) at its data sets' inputs, instead of the bench's "
                         "generated models")
    ap.add_argument("--cpu-time", action="store_true",
                    help="compare CPU time per run instead of wall time (with --threads 1: figures that load "
                         "from other processes disturbs much less; a busy machine's wall times are not comparable)")
    ap.add_argument("--inproc", action="store_true",
                    help="run disc in this process (build/public/libdisc.so through bench/discpy.py), shape by "
                         "shape alternating with ONNX Runtime within seconds, instead of dcc bench processes")
    args = ap.parse_args()
    THREADS, CPU_TIME, INPROC = args.threads, args.cpu_time, args.inproc
    if CPU_TIME and THREADS != 1:
        ap.error("--cpu-time needs --threads 1 (idle threads that spin count as CPU time)")
    want = set(filter(None, args.models.split(",")))
    seq = SEQ_QUICK if args.quick else SEQ_SPREAD
    models = []
    big = os.path.join(HERE, "models")
    if args.broad + args.trained + args.extra + args.detect > 1:
        ap.error("--broad, --extra, --detect and --trained are different benches: take one")
    if args.trained:
        models += trained_models(want)
        if not models:
            ap.error("no trained models: run make trained first (tests/trained/collect.py)")
    elif args.broad or args.extra or args.detect:
        if args.detect and not INPROC:
            ap.error("--detect needs --inproc (its outputs' check is run_bench's, not dcc bench's)")
        DETECT_CHECK = args.detect
        table = (BROAD_SHAPES if args.broad else {n: CNN_SHAPES for n in EXTRA} if args.extra
                 else {n: DETECT_SHAPES for n in DETECT})
        names = [n for n in table if not want or n in want]
        subprocess.run([sys.executable, os.path.join(HERE, "gen_bench.py")] + names, check=True)
        models += [(n, os.path.join(big, n, "model.onnx"), table[n]) for n in names]
    else:
        if not want or want & {"bert_base", "gpt2"}:
            subprocess.run([sys.executable, os.path.join(HERE, "gen_bench.py")], check=True)
            models += [("bert_base", os.path.join(big, "bert_base", "model.onnx"), seq),
                       ("gpt2", os.path.join(big, "gpt2", "model.onnx"), seq)]
        rnn = [n for n in RNN_SHAPES if not want or n in want]
        if rnn:
            subprocess.run([sys.executable, os.path.join(HERE, "gen_bench.py")] + rnn, check=True)
            models += [(n, os.path.join(big, n, "model.onnx"), RNN_SHAPES[n]) for n in rnn]
    for name in [] if args.broad or args.trained or args.extra or args.detect else ["bert_encoder", "gpt_decoder", "resnet_cnn", "mobilenet_cnn", "recommender"]:
        path = os.path.join(ROOT, "tests", "models", name, "model.onnx")
        if os.path.exists(path):
            # the small test transformers have 256 positions
            small_seq = [sh for sh in seq if sh[1] <= 256]
            shapes = IMG_SPREAD if "cnn" in name else ([(1, 1), (4, 5), (16, 50)] if name == "recommender" else small_seq)
            models.append((name, path, shapes))
    print(cpu_line())
    print(f"disc vs ONNX Runtime {ort.__version__}, {threads()} threads each, median of {args.runs} runs, "
          f"median of {args.rounds} rounds" + (", CPU time per run" if CPU_TIME else "") + "\n")
    rows, geos = [], {}
    for name, path, shapes, *given in models:
        if want and name not in want:
            continue
        try:
            ATOL = given[1] if given else 1e-4
            geos[name] = bench_model(name, path, shapes, args.dcc, args.runs, args.rounds, rows,
                                     given[0] if given else None)
        except Exception as e:  # noqa: BLE001 (a model ONNX Runtime cannot run: say so, go on)
            print(f"{name}: not measured: {type(e).__name__}: {str(e).splitlines()[0][:300]}\n", flush=True)
    print("geometric mean of ORT/disc per model (above 1: disc faster):")
    for k, v in geos.items():
        print(f"  {k:14s} {v:.2f}")
    ok = [r for r in rows if r[2] and not math.isnan(r[4])]
    if ok:
        low = min(ok, key=lambda r: r[4])
        geo = math.exp(sum(math.log(r[4]) for r in ok) / len(ok))
        print(f"  all shapes: geomean {geo:.2f} over {len(ok)} shapes, lowest {low[4]:.2f} ({low[0]} {low[1]})"
              + (f"; {len(rows) - len(ok)} shapes failed on disc" if len(ok) < len(rows) else ""))


if __name__ == "__main__":
    main()
