#!/usr/bin/env python3
"""gen_small.py — small models with reference outputs at several shapes.

Writes tests/models/<name>/model.onnx and test_data_set_K/{input,output}_N.pb
in the layout of ONNX's backend tests, one data set per input shape, with
the outputs computed by onnx.reference.ReferenceEvaluator. Each becomes the
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
  declared_out  x: f32[T, 16] -> MatMul, Unsqueeze: computes [T, 1, 30]
            where the model declares its output [1, "seqlen"] and the
            MatMul's value_info ["seqlen", 5] (as a captcha OCR model
            does; issue 15: the computed shape wins); T = 1, 5, 9
"""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = 17


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


def write(name, graph, data_sets, full_check=True):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="disc gen_small.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=full_check)
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    onnx.save(model, os.path.join(d, "model.onnx"))
    ref = ReferenceEvaluator(model)
    in_names = [i.name for i in graph.input]
    out_names = [o.name for o in graph.output]
    for k, inputs in enumerate(data_sets):
        outputs = ref.run(None, dict(zip(in_names, inputs)))
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
    # the declarations contradict the computed shapes: no strict check
    write("declared_out", *declared_out(rng), full_check=False)


if __name__ == "__main__":
    main()
