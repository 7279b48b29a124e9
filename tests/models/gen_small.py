#!/usr/bin/env python3
"""gen_small.py — small models with reference outputs at several shapes.

Writes tests/models/<name>/model.onnx and test_data_set_K/{input,output}_N.pb
in the layout of ONNX's backend tests, one data set per input shape, with
the outputs computed by onnx.reference.ReferenceEvaluator (by numpy or ONNX
Runtime where a model says why). Each becomes the
ctest model/<name> (`dcc check DIR`). The files are committed; rerun this
after changing a model (pip install onnx==1.17.0 numpy).

  mlp_norm  x: f32[B, 8] -> MatMul, Add, Relu, MatMul, Add, then a
            LayerNorm-like normalization over the last axis (ReduceMean,
            Sub, Mul, ReduceMean, Add, Sqrt, Div); B = 1, 3, 5
  seq_heads x: f32[B, S, 8] -> MatMul, Softmax, and a reshape to
            [B, S, 2, 2] built from Shape/Slice/Concat, then Transpose
            to [B, 2, S, 2]; (B, S) = (1, 1), (2, 3), (3, 7)
  placeholder_dims  inputs declared with the names exporters write for
            "unknown": x: [-1, 3, "?", "?"] (paddle2onnx) -> Conv, Relu,
            GlobalAveragePool, Flatten, Gemm, Softmax; m: ["None", "None"],
            n: ["unk__3", "unk__3"], k: ["-1", "-1"] -> ReduceSum, Neg, Neg;
            every data set but the last has H != W and non-square m, n, k
            (issue 15: each placeholder is a fresh symbol)
  tied_names  a: ["N", 4] -> Relu and b: ["N", 3] -> Neg, unrelated;
            x: ["B", "S", 8] + Unsqueeze(m: ["B", "S"]), which broadcasts:
            the first data set keeps the names' ties, the others break
            them where the computation allows it (a and b of different
            lengths, m of shape [1, S] or [B, 1]); ONNX Runtime runs them
            all, so must disc (issue 15: a tie is an assumption, never a
            refusal; doc/onnx.md, "Dim names")
  declared_out  x: f32[T, 16] -> MatMul, Unsqueeze: computes [T, 1, 30]
            where the model declares its output [1, "seqlen"] and the
            MatMul's value_info ["seqlen", 5] (as a captcha OCR model
            does; issue 15: the computed shape wins); T = 1, 5, 9
  expand_shapes  x: f32[B, 1], s: i64[2] -> Expand(x, s), the shape from
            data: a 1 keeps x's dim, a 0 makes an empty result (not
            max(0, 1) = 1, as disc's lowering once computed); (B, s) =
            (1, [0, 3]), (2, [1, 4]), (1, [3, 1]), (3, [3, 5])
  many_inputs  x: f32[N, 2], y: f32[N, 2] -> Concat of 100 operands
            (x and y alternating) and Sum of 70 (past the 64 operands a
            node once could have); N = 1, 3, 6
  range_anchors  x: f32[B, C, H, W] -> YOLOv8's anchors, float Ranges
            whose limit is a dim cast to float, broadcast against x
  quant_integer  x: f32[B, 48, H, W], a: u8[4, K] -> DynamicQuantizeLinear,
            ConvInteger (K = 432: sums past 2^24; per-channel zero points),
            MatMulInteger (per-row and per-column zero points), QLinearConv
            (per-channel scales, i32 bias); references by numpy, exact
  ml_ops    x: f32[N, 5], xi: i64[N, 3] -> ai.onnx.ml Scaler, Binarizer,
            ArrayFeatureExtractor (on x, and on a class list at ArgMax's
            indices, as skl2onnx labels a classifier's output); N = 1, 4, 7;
            references by ONNX Runtime
  node_ops  the ops that ONNX's node tests reach only at static shapes,
            with symbolic dims (opset 20): LpPool, GlobalLpPool, LRN,
            Hardmax, MeanVarianceNormalization, CenterCropPad (cropping
            and padding as H, W vary), SoftmaxCrossEntropyLoss,
            NegativeLogLikelihoodLoss, NonMaxSuppression over S boxes,
            BitShift, DFT, Asinh, Cosh, Shrink, HannWindow of a computed
            length, Compress, ReverseSequence, EyeLike, AffineGrid of a
            computed size into GridSample, Unique (flat in order of
            occurrence, and rows sorted), RoiAlign (avg and max), Det; not
            MaxUnpool (random shapes give MaxPool indices past its inferred
            shape, which ONNX Runtime refuses too) nor Col2Im (random shapes
            give a column count the image does not have); references by
            ONNX Runtime (onnx.reference's LRN sums over the wrong axis)

Without arguments every model is written; with names, only those.
"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = 17
ONLY = set()


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def mlp_norm(rng):
    w1 = rng.standard_normal((8, 16)).astype(np.float32) * 0.5
    b1 = rng.standard_normal(16).astype(np.float32) * 0.1
    w2 = rng.standard_normal((16, 4)).astype(np.float32) * 0.5
    b2 = rng.standard_normal(4).astype(np.float32) * 0.1
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="bias1"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("MatMul", ["h2", "w2"], ["h3"], name="fc2"),
        helper.make_node("Add", ["h3", "b2"], ["h4"], name="bias2"),
        helper.make_node("ReduceMean", ["h4"], ["mu"], axes=[-1], keepdims=1, name="mean"),
        helper.make_node("Sub", ["h4", "mu"], ["c"], name="center"),
        helper.make_node("Mul", ["c", "c"], ["c2"], name="square"),
        helper.make_node("ReduceMean", ["c2"], ["var"], axes=[-1], keepdims=1, name="var"),
        helper.make_node("Add", ["var", "eps"], ["ve"], name="add_eps"),
        helper.make_node("Sqrt", ["ve"], ["sd"], name="sqrt"),
        helper.make_node("Div", ["c", "sd"], ["y"], name="norm"),
    ]
    g = helper.make_graph(
        nodes, "mlp_norm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 4])],
        [init("w1", w1), init("b1", b1), init("w2", w2), init("b2", b2),
         init("eps", np.float32(1e-5))])
    shapes = [(1, 8), (3, 8), (5, 8)]
    return g, [[rng.standard_normal(s).astype(np.float32)] for s in shapes]


def seq_heads(rng):
    w = rng.standard_normal((8, 4)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["s"], name="proj"),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1, name="softmax"),
        helper.make_node("Shape", ["x"], ["shp"], name="shape"),
        helper.make_node("Slice", ["shp", "zero", "two"], ["bs"], name="batch_seq"),
        helper.make_node("Concat", ["bs", "heads"], ["newshape"], axis=0, name="cat"),
        helper.make_node("Reshape", ["p", "newshape"], ["r"], name="split_heads"),
        helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 1, 3], name="tr"),
    ]
    g = helper.make_graph(
        nodes, "seq_heads",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 2, "S", 2])],
        [init("w", w), init("zero", np.array([0], np.int64)), init("two", np.array([2], np.int64)),
         init("heads", np.array([2, 2], np.int64))])
    shapes = [(1, 1, 8), (2, 3, 8), (3, 7, 8)]
    return g, [[rng.standard_normal(s).astype(np.float32)] for s in shapes]


def placeholder_dims(rng):
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.5
    b = rng.standard_normal(4).astype(np.float32) * 0.1
    fc = rng.standard_normal((2, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="gap"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc"], ["logits"], transB=1, name="fc"),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1, name="softmax"),
        helper.make_node("ReduceSum", ["m", "axis1"], ["ms"], keepdims=0, name="sum_m"),
        helper.make_node("Neg", ["n"], ["nn"], name="neg_n"),
        helper.make_node("Neg", ["k"], ["kn"], name="neg_k"),
    ]
    F = TensorProto.FLOAT
    g = helper.make_graph(
        nodes, "placeholder_dims",
        [helper.make_tensor_value_info("x", F, [-1, 3, "?", "?"]),
         helper.make_tensor_value_info("m", F, ["None", "None"]),
         helper.make_tensor_value_info("n", F, ["unk__3", "unk__3"]),
         helper.make_tensor_value_info("k", F, ["-1", "-1"])],
        [helper.make_tensor_value_info("y", F, ["?", 2]),
         helper.make_tensor_value_info("ms", F, ["None"]),
         helper.make_tensor_value_info("nn", F, ["unk__3", "unk__3"]),
         helper.make_tensor_value_info("kn", F, ["-1", "-1"])],
        [init("w", w), init("b", b), init("fc", fc), init("axis1", np.array([1], np.int64))])
    shapes = [[(1, 3, 8, 16), (2, 5), (3, 4), (1, 6)],
              [(2, 3, 13, 6), (4, 1), (2, 7), (5, 2)],
              [(1, 3, 5, 5), (3, 3), (2, 2), (4, 4)]]
    return g, [[rng.standard_normal(s).astype(np.float32) for s in set_] for set_ in shapes]


def tied_names(rng):
    nodes = [
        helper.make_node("Relu", ["a"], ["ya"], name="relu_a"),
        helper.make_node("Neg", ["b"], ["yb"], name="neg_b"),
        helper.make_node("Unsqueeze", ["m", "axis2"], ["m3"], name="unsqueeze_m"),
        helper.make_node("Add", ["x", "m3"], ["yx"], name="add_mask"),
    ]
    F = TensorProto.FLOAT
    g = helper.make_graph(
        nodes, "tied_names",
        [helper.make_tensor_value_info("a", F, ["N", 4]),
         helper.make_tensor_value_info("b", F, ["N", 3]),
         helper.make_tensor_value_info("x", F, ["B", "S", 8]),
         helper.make_tensor_value_info("m", F, ["B", "S"])],
        [helper.make_tensor_value_info("ya", F, ["N", 4]),
         helper.make_tensor_value_info("yb", F, ["N", 3]),
         helper.make_tensor_value_info("yx", F, ["B", "S", 8])],
        [init("axis2", np.array([2], np.int64))])
    shapes = [[(2, 4), (2, 3), (2, 5, 8), (2, 5)],
              [(3, 4), (5, 3), (2, 5, 8), (1, 5)],
              [(1, 4), (4, 3), (3, 13, 8), (3, 1)]]
    return g, [[rng.standard_normal(s).astype(np.float32) for s in set_] for set_ in shapes]


def expand_shapes(rng):
    I64, F = TensorProto.INT64, TensorProto.FLOAT
    g = helper.make_graph(
        [helper.make_node("Expand", ["x", "s"], ["y"], name="expand")], "expand_shapes",
        [helper.make_tensor_value_info("x", F, ["B", 1]), helper.make_tensor_value_info("s", I64, [2])],
        [helper.make_tensor_value_info("y", F, ["Y0", "Y1"])])
    sets = [(1, [0, 3]), (2, [1, 4]), (1, [3, 1]), (3, [3, 5])]
    return g, [[rng.standard_normal((b, 1)).astype(np.float32), np.array(s, np.int64)] for b, s in sets]


def many_inputs(rng):
    F = TensorProto.FLOAT
    g = helper.make_graph(
        [helper.make_node("Concat", ["x", "y"] * 50, ["c"], axis=0, name="concat100"),
         helper.make_node("Sum", ["x", "y"] * 35, ["s"], name="sum70")], "many_inputs",
        [helper.make_tensor_value_info("x", F, ["N", 2]), helper.make_tensor_value_info("y", F, ["N", 2])],
        [helper.make_tensor_value_info("c", F, ["C", 2]), helper.make_tensor_value_info("s", F, ["N", 2])])
    return g, [[rng.standard_normal((n, 2)).astype(np.float32) for _ in range(2)] for n in (1, 3, 6)]


def declared_out(rng):
    w = rng.standard_normal((16, 30)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
        helper.make_node("Unsqueeze", ["h", "axis1"], ["y"], name="unsqueeze"),
    ]
    F = TensorProto.FLOAT
    g = helper.make_graph(
        nodes, "declared_out",
        [helper.make_tensor_value_info("x", F, ["T", 16])],
        [helper.make_tensor_value_info("y", F, [1, "seqlen"])],
        [init("w", w), init("axis1", np.array([1], np.int64))],
        value_info=[helper.make_tensor_value_info("h", F, ["seqlen", 5])])
    shapes = [(1, 16), (5, 16), (9, 16)]
    return g, [[rng.standard_normal(s).astype(np.float32)] for s in shapes]


def range_anchors(rng):
    # YOLOv8's anchors (make_anchors): float Ranges whose limit is a dim
    # cast to float, Range(0, Cast(W), 1) + 0.5, broadcast against the
    # feature map; and a float Range with a fractional start and step
    F = TensorProto.FLOAT
    c = lambda name, v: init(name, np.array(v, np.float32))
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i2"], ["h"], axis=0),
        helper.make_node("Gather", ["s", "i3"], ["w"], axis=0),
        helper.make_node("Cast", ["h"], ["hf"], to=F),
        helper.make_node("Cast", ["w"], ["wf"], to=F),
        helper.make_node("Range", ["zero", "wf", "one"], ["rx"], name="range_x"),
        helper.make_node("Range", ["zero", "hf", "one"], ["ry"], name="range_y"),
        helper.make_node("Add", ["rx", "half"], ["sx"]),
        helper.make_node("Add", ["ry", "half"], ["sy"]),
        helper.make_node("Unsqueeze", ["sy", "axis1"], ["sy1"]),
        helper.make_node("Add", ["x", "sx"], ["a"]),
        helper.make_node("Add", ["a", "sy1"], ["y"]),
        helper.make_node("Range", ["quarter", "wf", "half"], ["z"], name="range_frac"),
    ]
    g = helper.make_graph(
        nodes, "range_anchors",
        [helper.make_tensor_value_info("x", F, ["B", "C", "H", "W"])],
        [helper.make_tensor_value_info("y", F, ["B", "C", "H", "W"]),
         helper.make_tensor_value_info("z", F, [None])],
        [init("i2", np.array(2, np.int64)), init("i3", np.array(3, np.int64)),
         init("axis1", np.array([1], np.int64)), c("zero", 0), c("one", 1), c("half", 0.5), c("quarter", 0.25)])
    shapes = [(1, 2, 3, 5), (2, 1, 4, 7), (1, 1, 1, 1)]
    return g, [[rng.standard_normal(s).astype(np.float32)] for s in shapes]


def quant_integer(rng):
    # the integer ops of quantized models, where ONNX's node tests do not
    # reach: ConvInteger with K = 48*3*3 = 432 > 258 (partial sums past 2^24,
    # the f64 path) and per-channel weight zero points; MatMulInteger with
    # per-row and per-column zero points; QLinearConv with per-channel
    # weight scales and an i32 bias
    F, U8, I8, I32 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32
    u8 = lambda *s: rng.integers(230, 256, s).astype(np.uint8)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xzp"]),
        helper.make_node("ConvInteger", ["xq", "w", "xzp", "wzp"], ["y1"], pads=[1, 1, 1, 1]),
        helper.make_node("MatMulInteger", ["a", "b", "azp", "bzp"], ["y2"]),
        helper.make_node("QLinearConv", ["xq", "xs", "xzp", "w2", "w2s", "w2zp", "ys", "yzp", "bias"], ["y3"],
                         strides=[2, 1]),
    ]
    g = helper.make_graph(
        nodes, "quant_integer",
        [helper.make_tensor_value_info("x", F, ["B", 48, "H", "W"]),
         helper.make_tensor_value_info("a", U8, [4, "K"])],
        [helper.make_tensor_value_info("y1", I32, ["B", 16, "H", "W"]), helper.make_tensor_value_info("y2", I32, [4, 7]),
         helper.make_tensor_value_info("y3", U8, ["B", 8, "H2", "W"]), helper.make_tensor_value_info("xs", F, []),
         helper.make_tensor_value_info("xzp", U8, [])],
        [init("w", u8(16, 48, 3, 3)), init("wzp", rng.integers(0, 4, 16).astype(np.uint8)),
         init("azp", np.array([0, 3, 128, 255], np.uint8)),
         init("b", rng.integers(-128, 128, (300, 7)).astype(np.int8)),
         init("bzp", rng.integers(-3, 4, 7).astype(np.int8)),
         init("w2", rng.integers(-128, 128, (8, 48, 1, 1)).astype(np.int8)),
         init("w2s", (0.001 + 0.002 * rng.random(8)).astype(np.float32)),
         init("w2zp", np.zeros(8, np.int8)),
         init("ys", np.array(0.01, np.float32)), init("yzp", np.array(100, np.uint8)),
         init("bias", rng.integers(-5000, 5000, 8).astype(np.int32))])
    # x > 0: a zero point of 0 and values near 255, so the sums pass 2^24
    xs = [(1, 48, 5, 7), (2, 48, 3, 3)]
    return g, [[(0.8 + 0.2 * rng.random(s)).astype(np.float32), rng.integers(0, 256, (4, 300)).astype(np.uint8)]
               for s in xs]


def quant_integer_ref(model, feeds):
    # numpy, exact in int64; onnx.reference's ConvInteger takes no
    # per-channel zero point. The float steps in ONNX Runtime's order.
    c = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    x, a = feeds["x"], feeds["a"]
    f32 = np.float32
    lo, hi = min(f32(x.min()), f32(0)), max(f32(x.max()), f32(0))
    xs = f32(1) if hi == lo else f32((hi - lo) / f32(255))
    xzp = np.uint8(np.round(np.clip(-(lo / xs), 0, 255)))
    xq = np.clip(np.round(x / xs) + f32(xzp), 0, 255).astype(np.uint8)

    def conv(xi, wi, pads, strides):  # int64, NCHW, groups 1
        xp = np.pad(xi, ((0, 0), (0, 0), (pads, pads), (pads, pads)))
        win = np.lib.stride_tricks.sliding_window_view(xp, wi.shape[2:], axis=(2, 3))[:, :, ::strides[0], ::strides[1]]
        return np.einsum("nchwij,mcij->nmhw", win, wi)

    xi = xq.astype(np.int64) - np.int64(xzp)
    y1 = conv(xi, c["w"].astype(np.int64) - c["wzp"].astype(np.int64)[:, None, None, None], 1, (1, 1))
    y2 = (a.astype(np.int64) - c["azp"].astype(np.int64)[:, None]) @ (c["b"].astype(np.int64) - c["bzp"].astype(np.int64))
    acc = conv(xi, c["w2"].astype(np.int64), 0, (2, 1)) + c["bias"].astype(np.int64)[None, :, None, None]
    scale = (xs * c["w2s"]) / c["ys"]
    y3 = np.clip(np.round(acc.astype(f32) * scale[None, :, None, None]) + f32(c["yzp"]), 0, 255).astype(np.uint8)
    return [y1.astype(np.int32), y2.astype(np.int32), y3, np.array(xs, f32), np.array(xzp, np.uint8)]


def ml_ops(rng):
    # the ai.onnx.ml ops skl2onnx writes around a network: Scaler with one
    # offset and scale per feature, Binarizer, ArrayFeatureExtractor over a
    # matrix's last axis and over a 1-D class list (as skl2onnx picks the
    # labels behind an ArgMax: [1, N] out)
    F, I64 = TensorProto.FLOAT, TensorProto.INT64
    ml = "ai.onnx.ml"
    nodes = [
        helper.make_node("Scaler", ["x"], ["s"], domain=ml, offset=[0.5, -1.0, 2.0, 0.0, 0.25],
                         scale=[2.0, 0.5, 1.0, 3.0, -1.0]),
        helper.make_node("Scaler", ["xi"], ["si"], domain=ml, offset=[1.0], scale=[0.5]),
        helper.make_node("Binarizer", ["x"], ["b"], domain=ml, threshold=0.3),
        helper.make_node("ArrayFeatureExtractor", ["x", "cols"], ["f"], domain=ml),
        helper.make_node("ArgMax", ["x"], ["am"], axis=1),
        helper.make_node("ArrayFeatureExtractor", ["classes", "am"], ["labels"], domain=ml),
    ]
    g = helper.make_graph(
        nodes, "ml_ops",
        [helper.make_tensor_value_info("x", F, ["N", 5]), helper.make_tensor_value_info("xi", I64, ["N", 3])],
        [helper.make_tensor_value_info("s", F, ["N", 5]), helper.make_tensor_value_info("si", F, ["N", 3]),
         helper.make_tensor_value_info("b", F, ["N", 5]), helper.make_tensor_value_info("f", F, ["N", 3]),
         helper.make_tensor_value_info("labels", I64, [1, "N"])],
        [init("cols", np.array([4, 0, 4], np.int64)), init("classes", np.array([3, 1, 4, 1, 5], np.int64))])
    return g, [[rng.standard_normal((n, 5)).astype(np.float32), rng.integers(-9, 9, (n, 3))] for n in (1, 4, 7)]


def node_ops(rng):
    F, I64, U8, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.UINT8, TensorProto.BOOL
    n = helper.make_node
    nodes = [
        n("LpPool", ["x"], ["lppool"], kernel_shape=[2, 2], p=3, pads=[1, 1, 0, 0]),
        n("GlobalLpPool", ["x"], ["glp"], p=2),
        n("LRN", ["x"], ["lrn"], size=3, alpha=0.01, beta=0.6, bias=1.5),
        n("Hardmax", ["x"], ["hardmax"], axis=1),
        n("MeanVarianceNormalization", ["x"], ["mvn"]),
        n("CenterCropPad", ["x", "crop"], ["crop_pad"], axes=[2, 3]),
        n("SoftmaxCrossEntropyLoss", ["x", "t", "cw"], ["sce", "logp"], ignore_index=1),
        n("NegativeLogLikelihoodLoss", ["logp", "t"], ["nll"], reduction="none"),
        n("NonMaxSuppression", ["boxes", "scores", "maxout", "iou", "sthr"], ["nms"]),
        n("BitShift", ["u", "sh"], ["shl"], direction="LEFT"),
        n("BitShift", ["u", "sh"], ["shr"], direction="RIGHT"),
        n("DFT", ["sig", "", "axis1"], ["dft"]),
        n("Asinh", ["x"], ["asinh"]),
        n("Cosh", ["x"], ["cosh"]),
        n("Shrink", ["x"], ["shrink"], lambd=0.5, bias=0.25),
        n("Shape", ["x"], ["xshape"]),
        n("Gather", ["xshape", "two"], ["h"]),
        n("HannWindow", ["h"], ["hann"], periodic=0),
        n("Compress", ["x", "m"], ["compress"], axis=2),
        n("ReverseSequence", ["rs", "lens"], ["revseq"], time_axis=0, batch_axis=1),
        n("EyeLike", ["e"], ["eye"], k=1),
        n("AffineGrid", ["theta", "xshape"], ["grid"], align_corners=0),
        n("GridSample", ["x", "grid"], ["sampled"]),
        n("RoiAlign", ["x", "rois", "bidx"], ["roi"], output_height=3, output_width=2, sampling_ratio=2,
          spatial_scale=0.5),
        n("RoiAlign", ["x", "rois", "bidx"], ["roimax"], mode="max", coordinate_transformation_mode="output_half_pixel",
          output_height=2, output_width=2, sampling_ratio=1),
        n("Det", ["dm"], ["det"]),
        n("Unique", ["q"], ["uy", "uix", "uinv", "ucnt"], sorted=0),
        n("Unique", ["q"], ["ry", "rix", "rinv", "rcnt"], axis=0),
    ]
    ints = {"nms", "uy", "uix", "uinv", "ucnt", "ry", "rix", "rinv", "rcnt"}
    # output: rank (the dims are left unnamed: "?" is a fresh symbol each)
    outs = {"lppool": 4, "glp": 4, "lrn": 4, "hardmax": 4, "mvn": 4, "crop_pad": 4, "sce": 0, "logp": 4,
            "nll": 3, "nms": 2, "shl": 2, "shr": 2, "dft": 3, "asinh": 4, "cosh": 4, "shrink": 4, "hann": 1,
            "compress": 4, "revseq": 2, "eye": 2, "grid": 4, "sampled": 4,
            "roi": 4, "roimax": 4, "det": 1, "uy": 1, "uix": 1, "uinv": 1, "ucnt": 1, "ry": 2, "rix": 1, "rinv": 1, "rcnt": 1}
    g = helper.make_graph(
        nodes, "node_ops",
        [helper.make_tensor_value_info("x", F, ["N", 3, "H", "W"]),
         helper.make_tensor_value_info("t", I64, ["N", "H", "W"]),
         helper.make_tensor_value_info("boxes", F, [1, "S", 4]),
         helper.make_tensor_value_info("scores", F, [1, 2, "S"]),
         helper.make_tensor_value_info("u", U8, ["N", 4]),
         helper.make_tensor_value_info("sh", U8, ["N", 4]),
         helper.make_tensor_value_info("sig", F, ["N", "T", 2]),
         helper.make_tensor_value_info("m", B, ["H"]),
         helper.make_tensor_value_info("rs", F, ["T", "N"]),
         helper.make_tensor_value_info("lens", I64, ["N"]),
         helper.make_tensor_value_info("e", F, ["H", "W"]),
         helper.make_tensor_value_info("theta", F, ["N", 2, 3]),
         helper.make_tensor_value_info("q", I64, ["Q", 2]),
         helper.make_tensor_value_info("rois", F, ["K", 4]),
         helper.make_tensor_value_info("bidx", I64, ["K"]),
         helper.make_tensor_value_info("dm", F, ["N", 4, 4])],
        [helper.make_tensor_value_info(o, I64 if o in ints else U8 if o in ("shl", "shr") else F, ["?"] * r)
         for o, r in outs.items()],
        [init("crop", np.array([4, 5], np.int64)), init("cw", np.array([0.5, 1.0, 2.0], np.float32)),
         init("maxout", np.array([3], np.int64)), init("iou", np.array([0.4], np.float32)),
         init("sthr", np.array([0.2], np.float32)), init("axis1", np.array(-2, np.int64)),
         init("two", np.array(2, np.int64))])
    sets = []
    for nn, h, w, s, t in [(1, 5, 6, 6, 7), (2, 8, 3, 11, 1), (3, 2, 2, 1, 4)]:
        xy = rng.uniform(0, 10, (1, s, 2)).astype(np.float32)
        wh = rng.uniform(1, 5, (1, s, 2)).astype(np.float32)
        boxes = np.concatenate([xy, xy + wh], axis=2)  # [y1, x1, y2, x2]
        scores = np.round(rng.uniform(0, 1, (1, 2, s)), 1).astype(np.float32)  # ties
        sets.append([
            rng.standard_normal((nn, 3, h, w)).astype(np.float32),
            rng.integers(0, 3, (nn, h, w)).astype(np.int64),
            boxes, scores,
            rng.integers(0, 256, (nn, 4)).astype(np.uint8),
            rng.integers(0, 8, (nn, 4)).astype(np.uint8),
            rng.standard_normal((nn, t, 2)).astype(np.float32),
            rng.integers(0, 2, (h,)).astype(bool),
            rng.standard_normal((t, nn)).astype(np.float32),
            rng.integers(0, t + 1, (nn,)).astype(np.int64),
            rng.standard_normal((h, w)).astype(np.float32),
            (np.eye(2, 3) + rng.uniform(-0.3, 0.3, (nn, 2, 3))).astype(np.float32),
            rng.integers(0, 3, (2 * s + 1, 2)).astype(np.int64),
            # the boxes as rois [x1, y1, x2, y2], spread over the feature map at scale 0.5
            np.concatenate([xy[0], xy[0] + wh[0]], axis=1)[:, [1, 0, 3, 2]]
            * np.float32([w / 5, h / 5, w / 5, h / 5]),
            rng.integers(0, nn, (s,)).astype(np.int64),
            rng.standard_normal((nn, 4, 4)).astype(np.float32)])
    return g, sets


def ort_reference(model, feeds):
    # onnx.reference's Scaler keeps an integer input's type; the spec (and
    # ONNX Runtime) give float
    import onnxruntime as ort
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def write(name, graph, data_sets, full_check=True, reference=None, ml=False, opset=OPSET):
    if ONLY and name not in ONLY:
        return
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("ai.onnx.ml", 3)] if ml else [])
    model = helper.make_model(graph, opset_imports=opsets, producer_name="disc gen_small.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=full_check)
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    onnx.save(model, os.path.join(d, "model.onnx"))
    ref = None if reference else ReferenceEvaluator(model)
    in_names = [i.name for i in graph.input]
    out_names = [o.name for o in graph.output]
    for k, inputs in enumerate(data_sets):
        feeds = dict(zip(in_names, inputs))
        outputs = reference(model, feeds) if reference else ref.run(None, feeds)
        sd = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(sd)
        for i, (n, a) in enumerate(zip(in_names, inputs)):
            onnx.save_tensor(numpy_helper.from_array(a, n), os.path.join(sd, "input_%d.pb" % i))
        for i, (n, a) in enumerate(zip(out_names, outputs)):
            onnx.save_tensor(numpy_helper.from_array(a, n), os.path.join(sd, "output_%d.pb" % i))


def main():
    rng = np.random.default_rng(2024)
    write("mlp_norm", *mlp_norm(rng))
    write("seq_heads", *seq_heads(rng))
    rng = np.random.default_rng(15)
    write("placeholder_dims", *placeholder_dims(rng))
    write("tied_names", *tied_names(np.random.default_rng(19)))
    # the declarations contradict the computed shapes: no strict check
    write("declared_out", *declared_out(rng), full_check=False)
    write("range_anchors", *range_anchors(np.random.default_rng(16)))
    write("expand_shapes", *expand_shapes(np.random.default_rng(21)))
    write("many_inputs", *many_inputs(np.random.default_rng(22)))
    write("quant_integer", *quant_integer(np.random.default_rng(17)), reference=quant_integer_ref)
    write("ml_ops", *ml_ops(np.random.default_rng(18)), ml=True, reference=ort_reference)
    # onnx 1.17's checker fails on MeanVarianceNormalization's function body: no full check
    write("node_ops", *node_ops(np.random.default_rng(20)), full_check=False, reference=ort_reference, opset=20)


if __name__ == "__main__":
    ONLY = set(sys.argv[1:])
    main()
