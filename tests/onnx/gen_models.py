#!/usr/bin/env python3
"""gen_models.py — writes the small ONNX models of tests/onnx/models/.

The generated files are committed, so `make test` needs no Python onnx;
rerun this after changing a model (pip install onnx==1.17.0 numpy).
Each model is built with the onnx helper API; the malformed ones are
written byte by byte or skip the checker on purpose.
"""
import os
import random

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def vi(name, ty, shape):
    return helper.make_tensor_value_info(name, ty, shape)


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def rnd(*shape):
    return np.random.default_rng(len(shape) * 7 + sum(shape)).standard_normal(shape).astype(np.float32)


def save(name, nodes, inputs, outputs, inits=(), opset=17, check=True, value_info=()):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits), value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="disc-tests")
    m.ir_version = 8
    if check:
        onnx.checker.check_model(m)
    onnx.save(m, os.path.join(HERE, name + ".onnx"))
    return m


def node(op, ins, outs, name=None, **attrs):
    return helper.make_node(op, ins, outs, name=name or outs[0], **attrs)


def mlp():
    return save("mlp", [
        node("MatMul", ["x", "w1"], ["h"], "fc1"),
        node("Add", ["h", "b1"], ["hb"]),
        node("Relu", ["hb"], ["r"]),
        node("Gemm", ["r", "w2", "b2"], ["logits"], "fc2", transB=1),
        node("Softmax", ["logits"], ["y"], axis=-1),
    ], [vi("x", F, ["batch", 16])], [vi("y", F, ["batch", 4])],
        [init("w1", rnd(16, 32)), init("b1", rnd(32)), init("w2", rnd(4, 32)), init("b2", rnd(4))])


def reshape_shape():
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as PyTorch exports view(B, -1, 8, 8)
    return save("reshape_shape", [
        node("Shape", ["x"], ["s"]),
        node("Gather", ["s", "i0"], ["b"], axis=0),
        node("Unsqueeze", ["b", "ax0"], ["b1"]),
        node("Concat", ["b1", "rest"], ["shape"], axis=0),
        node("Reshape", ["x", "shape"], ["y"]),
        node("Reshape", ["x", "static_shape"], ["z"]),
    ], [vi("x", F, ["B", "S", 64])], [vi("y", F, None), vi("z", F, None)],
        [init("i0", np.array(0, np.int64)), init("ax0", np.array([0], np.int64)),
         init("rest", np.array([-1, 8, 8], np.int64)),
         init("static_shape", np.array([0, 0, 8, -1], np.int64))], check=False)


def attention():
    d, h = 32, 4
    nodes = [
        node("LayerNormalization", ["x", "ln_g", "ln_b"], ["xn"], axis=-1, epsilon=1e-5),
        node("MatMul", ["xn", "wqkv"], ["qkv"]),
        node("Split", ["qkv", "split"], ["q", "k", "v"], axis=2),
        node("Reshape", ["q", "heads"], ["q4"]),
        node("Reshape", ["k", "heads"], ["k4"]),
        node("Reshape", ["v", "heads"], ["v4"]),
        node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
        node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        node("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
        node("MatMul", ["qt", "kt"], ["scores"]),
        node("Div", ["scores", "scale"], ["scaled"]),
        node("Where", ["mask", "scaled", "neg"], ["masked"]),
        node("Softmax", ["masked"], ["p"], axis=-1),
        node("MatMul", ["p", "vt"], ["ctx"]),
        node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        node("Reshape", ["ctx_t", "merge"], ["ctx2"]),
        node("MatMul", ["ctx2", "wo"], ["o"]),
        node("Gelu", ["o"], ["g"]),
        node("Pow", ["g", "two"], ["g2"]),
        node("ReduceMean", ["g2", "axes_last"], ["ms"], keepdims=1),
        node("Sqrt", ["ms"], ["rms"]),
        node("Div", ["g", "rms"], ["y"]),
    ]
    return save("attention", nodes,
                [vi("x", F, ["B", "S", d]), vi("mask", TensorProto.BOOL, ["B", 1, "S", "S"])],
                [vi("y", F, ["B", "S", d])],
                [init("ln_g", rnd(d)), init("ln_b", rnd(d)), init("wqkv", rnd(d, 3 * d)),
                 init("split", np.array([d, d, d], np.int64)),
                 init("heads", np.array([0, 0, h, d // h], np.int64)),
                 init("merge", np.array([0, 0, d], np.int64)),
                 init("scale", np.array(np.sqrt(d // h), np.float32)),
                 init("neg", np.array(-1e9, np.float32)), init("wo", rnd(d, d)),
                 init("two", np.array(2.0, np.float32)), init("axes_last", np.array([-1], np.int64))],
                opset=20)


def cnn():
    return save("cnn", [
        node("Conv", ["x", "w", "b"], ["c"], "conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
        node("BatchNormalization", ["c", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"]),
        node("Relu", ["bn"], ["r"]),
        node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["p", "w2"], ["c2"], "conv2", kernel_shape=[3, 3], auto_pad="SAME_UPPER", strides=[2, 2]),
        node("AveragePool", ["c2"], ["ap"], kernel_shape=[2, 2], ceil_mode=1),
        node("GlobalAveragePool", ["ap"], ["gap"]),
        node("Flatten", ["gap"], ["f"]),
        node("Gemm", ["f", "fc_w", "fc_b"], ["y"], "fc", transB=1),
    ], [vi("x", F, ["N", 3, "H", "W"])], [vi("y", F, ["N", 10])],
        [init("w", rnd(8, 3, 3, 3)), init("b", rnd(8)), init("bn_s", rnd(8)), init("bn_b", rnd(8)),
         init("bn_m", rnd(8)), init("bn_v", np.abs(rnd(8))), init("w2", rnd(16, 8, 3, 3)),
         init("fc_w", rnd(10, 16)), init("fc_b", rnd(10))])


def ops_misc():
    nodes = [
        node("Slice", ["x", "st", "en", "ax", "sp"], ["sl"]),
        node("Slice", ["x", "st2", "en2", "", "sp2"], ["rev"]),
        node("Expand", ["row", "eshape"], ["ex"]),
        node("Tile", ["x", "reps"], ["ti"]),
        node("Pad", ["x", "pads", "pval"], ["pd"], mode="constant"),
        node("ConstantOfShape", ["cshape"], ["cs"], value=helper.make_tensor("v", F, [1], [1.5])),
        node("Range", ["r0", "r1", "r2"], ["rg"]),
        node("Trilu", ["sq"], ["tri"], upper=0),
        node("OneHot", ["ids", "depth", "onoff"], ["oh"], axis=-1),
        node("CumSum", ["x", "cax"], ["cum"]),
        node("TopK", ["x", "k"], ["tv", "ti2"], axis=-1),
        node("Cast", ["x"], ["xi"], to=TensorProto.INT32),
        node("Clip", ["x", "lo", "hi"], ["cl"]),
        node("Squeeze", ["sq1", "ax0"], ["sqz"]),
        node("Unsqueeze", ["x", "ax0"], ["usq"]),
        node("Resize", ["img", "", "scales"], ["rs"], mode="nearest"),
        node("DepthToSpace", ["img4"], ["d2s"], blocksize=2),
        node("SpaceToDepth", ["img"], ["s2d"], blocksize=2),
        node("Einsum", ["x", "m"], ["es"], equation="bi,ij->bj"),
        node("Einsum", ["bt", "bt"], ["es2"], equation="bij,bkj->bik"),
        node("GatherElements", ["sq", "gidx"], ["ge"], axis=1),
        node("ArgMax", ["x"], ["am"], axis=1, keepdims=0),
        node("ReduceMax", ["x", "ax1"], ["rmax"], keepdims=0),
        node("ReduceL2", ["x", "ax1"], ["rl2"]),
        node("ReduceSumSquare", ["x"], ["rss"], keepdims=0),
        node("HardSwish", ["x"], ["hs"]),
        node("LeakyRelu", ["x"], ["lr"], alpha=0.1),
        node("Mish", ["x"], ["mi"]),
        node("Sigmoid", ["x"], ["sg"]),
        node("Not", ["bx"], ["nb"]),
        node("Equal", ["ids", "ids"], ["eqq"]),
        node("Mod", ["ids", "depth"], ["md"]),
        node("Sum", ["x", "x", "x"], ["s3"]),
        node("Mean", ["x", "x"], ["mn"]),
        node("NonZero", ["bx"], ["nz"]),
        node("ScatterND", ["x", "sidx", "supd"], ["snd"]),
        node("InstanceNormalization", ["img", "in_s", "in_b"], ["inn"]),
        node("Size", ["x"], ["sz"]),
        node("Identity", ["x"], ["idn"]),
    ]
    outs = ["sl", "rev", "ex", "ti", "pd", "cs", "rg", "tri", "oh", "cum", "tv", "ti2", "xi", "cl", "sqz",
            "usq", "rs", "d2s", "s2d", "es", "es2", "ge", "am", "rmax", "rl2", "rss", "hs", "lr", "mi", "sg",
            "nb", "eqq", "md", "s3", "mn", "nz", "snd", "inn", "sz", "idn"]
    return save("ops_misc", nodes,
                [vi("x", F, ["B", 8]), vi("row", F, [1, 8]), vi("sq", F, [5, 5]), vi("ids", I64, ["B"]),
                 vi("sq1", F, [1, "T"]), vi("img", F, [1, 4, "H", "W"]), vi("img4", F, [1, 8, 3, 3]),
                 vi("bt", F, ["B", 3, 4]), vi("bx", TensorProto.BOOL, ["B", 8])],
                [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs],
                [init("st", np.array([1], np.int64)), init("en", np.array([-1], np.int64)),
                 init("ax", np.array([1], np.int64)), init("sp", np.array([2], np.int64)),
                 init("st2", np.array([0, -1], np.int64)),
                 init("en2", np.array([9223372036854775807, -9223372036854775808], np.int64)),
                 init("sp2", np.array([1, -1], np.int64)),
                 init("eshape", np.array([4, 1, 8], np.int64)), init("reps", np.array([2, 3], np.int64)),
                 init("pads", np.array([0, 1, 0, 2], np.int64)), init("pval", np.array(0.5, np.float32)),
                 init("cshape", np.array([2, 3], np.int64)),
                 init("r0", np.array(0, np.int64)), init("r1", np.array(10, np.int64)),
                 init("r2", np.array(3, np.int64)), init("depth", np.array(10, np.int64)),
                 init("onoff", np.array([0, 1], np.float32)), init("cax", np.array(1, np.int64)),
                 init("k", np.array([3], np.int64)), init("lo", np.array(-1, np.float32)),
                 init("hi", np.array(1, np.float32)), init("ax0", np.array([0], np.int64)),
                 init("scales", np.array([1, 1, 2, 2], np.float32)), init("m", rnd(8, 5)),
                 init("gidx", np.array([[0, 4], [1, 1], [2, 0], [3, 3], [4, 2]], np.int64)), init("ax1", np.array([1], np.int64)),
                 init("sidx", np.array([[0]], np.int64)), init("supd", rnd(1, 8)),
                 init("in_s", rnd(4)), init("in_b", rnd(4))],
                opset=18, check=False)


def opset11():
    # attribute forms that later opsets moved to inputs
    return save("opset11", [
        node("ReduceSum", ["x"], ["rs"], axes=[1], keepdims=1),
        node("Squeeze", ["rs"], ["sq"], axes=[1]),
        node("Unsqueeze", ["sq"], ["us"], axes=[0]),
        node("Split", ["x"], ["a", "b"], axis=1, split=[2, 6]),
        node("Softmax", ["x3"], ["sm"], axis=1),
        node("Clip", ["x", "lo", ""], ["cl"]),
        node("ReduceMean", ["x"], ["mean"], axes=[-1], keepdims=0),
    ], [vi("x", F, ["B", 8]), vi("x3", F, ["B", 4, 5])],
        [vi("us", F, None), vi("a", F, None), vi("b", F, None), vi("sm", F, None), vi("cl", F, None),
         vi("mean", F, None)],
        [init("lo", np.array(0, np.float32))], opset=11, check=False)


def softmax_default():
    # Softmax with no axis: before opset 13 the default axis is 1, over
    # the dims from it on flattened (from 13 on it is -1, the last dim)
    return save("softmax_default", [
        node("Softmax", ["x3"], ["sm"]),
        node("LogSoftmax", ["x3"], ["lsm"]),
    ], [vi("x3", F, ["B", 4, 5])], [vi("sm", F, None), vi("lsm", F, None)], opset=11, check=False)


def typed_and_external():
    # initializers in typed fields (float_data, int64_data, f16 bits in int32_data) and external data
    w = helper.make_tensor("w", F, [2, 3], [1, 2, 3, 4, 5, 6])
    s = helper.make_tensor("s", I64, [2], [3, 2])
    h = helper.make_tensor("h", TensorProto.FLOAT16, [3], [1.0, 2.0, 3.0])
    big = init("big", np.arange(64 * 3, dtype=np.float32).reshape(64, 3))
    onnx.external_data_helper.set_external_data(big, "typed_ext.bin", offset=0, length=64 * 3 * 4)
    big.data_location = TensorProto.EXTERNAL
    with open(os.path.join(HERE, "typed_ext.bin"), "wb") as f:
        f.write(np.arange(64 * 3, dtype=np.float32).tobytes())
    big.ClearField("raw_data")
    return save("typed_ext", [
        node("MatMul", ["x", "w"], ["xw"]),
        node("Reshape", ["xw", "s"], ["r"]),
        node("Cast", ["h"], ["h32"], to=F),
        node("MatMul", ["z", "big"], ["zb"]),
        node("Add", ["zb", "h32"], ["y"]),
    ], [vi("x", F, ["N", 2]), vi("z", F, ["N", 64])], [vi("r", F, None), vi("y", F, None)],
        [w, s, h, big], check=False)


def out_of_order():
    return save("out_of_order", [
        node("Relu", ["a"], ["y"]),
        node("Neg", ["x"], ["a"]),
    ], [vi("x", F, [None, 4])], [vi("y", F, [None, 4])], check=False)


# ---- malformed models --------------------------------------------------

def dim_names():
    """dim_param names that are not identifiers become valid symbol names;
    equal names stay one symbol."""
    return save("dim_names", [node("Add", ["x", "y"], ["z"])],
                [vi("x", F, ["batch size", "seq-len"]), vi("y", F, ["batch size", "seq-len"])],
                [vi("z", F, ["batch size", "seq-len"])])


def errors(good):
    data = good.SerializeToString()
    with open(os.path.join(HERE, "err_truncated.onnx"), "wb") as f:
        f.write(data[: len(data) // 2])
    rng = random.Random(1234)
    with open(os.path.join(HERE, "err_random.onnx"), "wb") as f:
        f.write(bytes(rng.randrange(256) for _ in range(777)))
    open(os.path.join(HERE, "err_empty.onnx"), "wb").close()
    save("err_bad_attr", [node("Transpose", ["x"], ["y"], "tr", perm=[1.0, 0.0])],
         [vi("x", F, [2, 3])], [vi("y", F, [3, 2])], check=False)
    save("err_unsupported", [
        node("Relu", ["x"], ["a"]),
        node("LSTM", ["a", "w", "r"], ["b"], "lstm1"),
        node("ImageDecoder", ["b"], ["c"], "dec"),
        helper.make_node("FusedMatMul", ["c", "c"], ["d"], name="fmm", domain="com.microsoft"),
    ], [vi("x", F, [2, 3]), vi("w", F, [1, 4, 3]), vi("r", F, [1, 4, 1])], [vi("d", F, None)], check=False)
    # more unsupported nodes than one message lists: the last line counts
    # the rest and names their ops
    save("err_unsupported_many",
         [node("Relu", ["x"], ["u0"])]
         + [node("ImageDecoder", ["u%d" % k], ["u%d" % (k + 1)], "dec%d" % k) for k in range(40)]
         + [helper.make_node("FusedMatMul", ["u40", "u40"], ["d"], name="fmm", domain="com.microsoft")],
         [vi("x", F, [2, 3])], [vi("d", F, None)], check=False)
    save("err_missing_init", [node("MatMul", ["x", "w_missing"], ["y"], "fc1")],
         [vi("x", F, ["B", 4])], [vi("y", F, None)], check=False)
    save("err_cycle", [
        node("Add", ["x", "b"], ["a"], "add_a"),
        node("Relu", ["a"], ["b"], "relu_b"),
    ], [vi("x", F, [4])], [vi("b", F, [4])], check=False)
    save("err_types", [node("MatMul", ["x", "w"], ["y"], "fc1")],
         [vi("x", F, ["B", 4])], [vi("y", F, None)], [init("w", np.ones((4, 2), np.int64))], check=False)
    save("err_shape", [node("MatMul", ["x", "w"], ["y"], "fc1")],
         [vi("x", F, ["B", 4])], [vi("y", F, None)], [init("w", rnd(5, 2))], check=False)
    save("err_opset", [node("Gelu", ["x"], ["y"])],
         [vi("x", F, [4])], [vi("y", F, [4])], opset=17, check=False)
    err_scalar_axis()


def err_scalar_axis():
    # an axis of a scalar: there is none (Gather read past the scalar's
    # dims; a Squeeze of one, found by fuzz_onnx, did too)
    save("err_scalar_axis", [node("Gather", ["x", "i"], ["y"], "g")],
         [vi("x", F, []), vi("i", TensorProto.INT64, [2])], [vi("y", F, None)], check=False)


def fold_idioms():
    """Shape vectors computed from constants, as torch's exporter writes
    them: cls.expand(B, -1, -1) (Where(Equal(s, ConstantOfShape(Shape(s)) *
    -1), ...) over s = Reshape(Concat(...), [-1])) and a Slice of Shape(x)
    up to Mod(2, 3), as unflatten writes it. The importer folds the
    constant parts (ConstantOfShape's length, the Slice's end)."""
    c = lambda name, v: node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.int64)))
    return save("fold_idioms", [
        node("Shape", ["x"], ["s"]),
        c("i0", 0), node("Gather", ["s", "i0"], ["b"], axis=0),
        c("ax0", [0]), node("Unsqueeze", ["b", "ax0"], ["b1"]),
        c("m1", [-1]), node("Concat", ["b1", "m1", "m1"], ["cat"], axis=0),
        node("Reshape", ["cat", "m1"], ["sizes"]),
        node("Shape", ["sizes"], ["len"]),
        node("ConstantOfShape", ["len"], ["ones"], value=numpy_helper.from_array(np.array([1], np.int64))),
        node("Mul", ["ones", "m1"], ["neg"]),
        node("Equal", ["sizes", "neg"], ["is_neg"]),
        node("Where", ["is_neg", "ones", "sizes"], ["target"]),
        node("Expand", ["cls", "target"], ["y"]),
        c("two", 2), c("three", 3), node("Mod", ["two", "three"], ["k"], fmod=0),
        node("Reshape", ["k", "ax1"], ["k1"]),
        node("Slice", ["s", "ax0", "k1"], ["head"]),
        c("tail", [2, 4]), node("Concat", ["head", "tail"], ["shape2"], axis=0),
        node("Reshape", ["x", "shape2"], ["z"]),
    ], [vi("x", F, ["B", "S", 8])], [vi("y", F, None), vi("z", F, None)],
        [init("cls", rnd(1, 1, 8)), init("ax1", np.array([1], np.int64))], check=False)


if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    good = mlp()
    reshape_shape()
    attention()
    cnn()
    ops_misc()
    opset11()
    softmax_default()
    typed_and_external()
    out_of_order()
    dim_names()
    fold_idioms()
    errors(good)
    print("wrote", HERE)


# ---- reference data: inputs and outputs by onnx.reference ----------------

def write_data(name, feeds_list, ref_model=None, fix=None):
    """Writes data/<name>/test_data_set_K/{input,output}_N.pb for each feed.

    onnx.reference has bugs the lowerings must not copy: ref_model(model,
    feeds) may return an equivalent model for the reference to run, and
    fix(feeds, outputs) may replace outputs with a numpy computation."""
    from onnx.reference import ReferenceEvaluator
    path = os.path.join(HERE, name + ".onnx")
    m = onnx.load(path)
    outs_names = [o.name for o in m.graph.output]
    for k, feeds in enumerate(feeds_list):
        ref = ReferenceEvaluator(ref_model(m, feeds) if ref_model else m)
        d = os.path.join(os.path.dirname(HERE), "data", name, "test_data_set_%d" % k)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
        ins = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
        for i, n in enumerate(ins):
            t = numpy_helper.from_array(feeds[n], n)
            open(os.path.join(d, "input_%d.pb" % i), "wb").write(t.SerializeToString())
        res = ref.run(None, feeds)
        if fix:
            res = fix(feeds, res)
        for i, (n, r) in enumerate(zip(outs_names, res)):
            t = numpy_helper.from_array(np.asarray(r), n)
            open(os.path.join(d, "output_%d.pb" % i), "wb").write(t.SerializeToString())


def data():
    rng = np.random.default_rng(5)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    write_data("mlp", [{"x": f(3, 16)}, {"x": f(1, 16)}])
    write_data("reshape_shape", [{"x": f(2, 3, 64)}, {"x": f(1, 5, 64)}])
    write_data("attention", [{"x": f(2, 5, 32), "mask": rng.random((2, 1, 5, 5)) > 0.3},
                             {"x": f(1, 3, 32), "mask": np.ones((1, 1, 3, 3), bool)}])
    write_data("cnn", [{"x": f(2, 3, 16, 16)}, {"x": f(1, 3, 13, 10)}], ref_model=cnn_explicit_pads)
    write_data("opset11", [{"x": f(3, 8), "x3": f(3, 4, 5)}], fix=softmax_coerced)
    r11 = np.random.default_rng(11)  # its own stream: the sets after it stay as they were
    f11 = lambda *s: r11.standard_normal(s).astype(np.float32)
    write_data("softmax_default", [{"x3": f11(3, 4, 5)}, {"x3": f11(1, 4, 5)}], fix=softmax_default_axis)


def cnn_explicit_pads(m, feeds):
    # onnx.reference's Conv reads the batch and channel dims for auto_pad
    # (X.shape[i] for X.shape[i + 2]): give it conv2's pads explicitly.
    m = onnx.ModelProto.FromString(m.SerializeToString())
    h, w = (d // 2 for d in feeds["x"].shape[2:])
    pads = []
    for d in (h, w):
        total = max(0, (-(-d // 2) - 1) * 2 + 3 - d)
        pads.append((total // 2, total - total // 2))
    for n in m.graph.node:
        if n.name == "conv2":
            del n.attribute[:]
            n.attribute.extend([helper.make_attribute("kernel_shape", [3, 3]),
                                helper.make_attribute("strides", [2, 2]),
                                helper.make_attribute("pads", [pads[0][0], pads[1][0], pads[0][1], pads[1][1]])])
    return m


def softmax_default_axis(feeds, outs):
    # both over axis 1 and 2 flattened (opset 11's default axis 1), by numpy
    x = feeds["x3"]
    flat = x.reshape(x.shape[0], -1).astype(np.float64)
    z = flat - flat.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=1, keepdims=True))
    return [np.exp(z - lse).reshape(x.shape).astype(np.float32), (z - lse).reshape(x.shape).astype(np.float32)]


def softmax_coerced(feeds, outs):
    # Softmax before opset 13 normalizes over the dims from `axis` on,
    # flattened; onnx.reference uses the opset-13 rule for every opset.
    x = feeds["x3"]
    flat = x.reshape(x.shape[0], -1)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    outs = list(outs)
    outs[3] = (e / e.sum(axis=1, keepdims=True)).reshape(x.shape).astype(np.float32)
    return outs
    write_data("typed_ext", [{"x": f(2, 2), "z": f(2, 64)}])
    write_data("ops_misc", [{
        "x": f(3, 8), "row": f(1, 8), "sq": f(5, 5), "ids": np.array([1, -2, 7], np.int64),
        "sq1": f(1, 4), "img": f(1, 4, 4, 6), "img4": f(1, 8, 3, 3), "bt": f(3, 3, 4),
        "bx": rng.random((3, 8)) > 0.5}])


if __name__ == "__main__":
    data()
