#!/usr/bin/env python3
"""gen_control.py — control flow and recurrent layers, with ONNX Runtime's
outputs at several shapes (the layout and writer of gen_small.py).

  lstm_bidir_lens  x: f32[S, B, 5], sequence_lens: i32[B], initial h and c
            -> bidirectional LSTM (hidden 4) with peepholes, biases and
            clip 2.5; (S, B) = (13, 3) with lengths 13, 6, 1 (shorter than
            the sequence), (1, 1), (4, 2) with lengths 4, 2
  lstm_stack2  x: f32[S, B, 5] -> two bidirectional LSTM layers (hidden 4,
            then 3) as PyTorch exports a stacked LSTM (Transpose and
            Reshape between them); (S, B) = (13, 3), (1, 1), (4, 2), (7, 5),
            (2, 4)
  lstm_batchwise  x: f32[B, S, 3] -> reverse LSTM, layout 1, input_forget,
            activations HardSigmoid(0.3, 0.4), Softsign, ScaledTanh(1.5,
            0.5); (B, S) = (1, 13), (3, 1), (2, 6), (4, 9), (1, 2)
  gru_bidir  x: f32[B, S, 3] -> bidirectional GRU, layout 1,
            linear_before_reset, biases, no initial state; (B, S) =
            (1, 13), (3, 1), (2, 6), (4, 9), (1, 2)
  gru_lbr0  x: f32[S, B, 3], h0 -> forward GRU, linear_before_reset 0,
            sequence_lens; (S, B) = (13, 2), (1, 1), (5, 3)
  rnn_reverse  x: f32[S, B, 3], sequence_lens -> reverse RNN, Relu,
            biases; (S, B) = (13, 2), (1, 1), (5, 3)
  loop_decode  h: f32[B, 6], tok: i64[B, 1], m: i64[] -> a greedy-decode
            Loop: h' = tanh(h . W) (W captured from the outer graph), the
            argmax token appended to a growing i64[B, T] (a loop-carried
            value whose shape changes), the step's h', token and h . W
            stacked (five results), stopping
            early when the token of batch entry 0 is 2 (after 2 of 7 steps
            in the third data set); (B, m) = (2, 0), (1, 1), (3, 7),
            (2, 3), (1, 5)
  if_branch  c: bool[], x: f32[N] -> If whose branches give [2N] and
            [N - 1] (a fresh dim), and a second output of x's shape
  scan_rev  s: f32[2], a: f32[T, 2], b: f32[2, T] -> Scan with a running
            state, b scanned along axis 1, a in reverse, the output
            reversed and stacked along axis 1; T = 13, 1, 4

Rerun after changing a model (pip install onnx==1.17.0 onnxruntime numpy).
"""
import numpy as np
from onnx import TensorProto, helper

from gen_small import init, ort_reference, write

F = TensorProto.FLOAT


def vi(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def lstm_bidir_lens(rng):
    i, h = 5, 4
    w = rng.standard_normal((2, 4 * h, i)).astype(np.float32) * 0.5
    r = rng.standard_normal((2, 4 * h, h)).astype(np.float32) * 0.5
    b = rng.standard_normal((2, 8 * h)).astype(np.float32) * 0.2
    p = rng.standard_normal((2, 3 * h)).astype(np.float32) * 0.3
    node = helper.make_node("LSTM", ["x", "w", "r", "b", "lens", "h0", "c0", "p"], ["y", "yh", "yc"],
                            direction="bidirectional", hidden_size=h, clip=2.5, name="lstm")
    graph = helper.make_graph(
        [node], "lstm_bidir_lens",
        [vi("x", F, ["S", "B", i]), vi("lens", TensorProto.INT32, ["B"]), vi("h0", F, [2, "B", h]),
         vi("c0", F, [2, "B", h])],
        [vi("y", F, ["S", 2, "B", h]), vi("yh", F, [2, "B", h]), vi("yc", F, [2, "B", h])],
        [init("w", w), init("r", r), init("b", b), init("p", p)])
    sets = []
    for s, bt, lens in [(13, 3, [13, 6, 1]), (1, 1, [1]), (4, 2, [4, 2])]:
        sets.append([rng.standard_normal((s, bt, i)).astype(np.float32), np.array(lens, np.int32),
                     rng.standard_normal((2, bt, h)).astype(np.float32),
                     rng.standard_normal((2, bt, h)).astype(np.float32)])
    return graph, sets


def lstm_stack2(rng):
    i, h1, h2 = 5, 4, 3
    w1 = rng.standard_normal((2, 4 * h1, i)).astype(np.float32) * 0.5
    r1 = rng.standard_normal((2, 4 * h1, h1)).astype(np.float32) * 0.5
    b1 = rng.standard_normal((2, 8 * h1)).astype(np.float32) * 0.2
    w2 = rng.standard_normal((2, 4 * h2, 2 * h1)).astype(np.float32) * 0.5
    r2 = rng.standard_normal((2, 4 * h2, h2)).astype(np.float32) * 0.5
    b2 = rng.standard_normal((2, 8 * h2)).astype(np.float32) * 0.2
    shape = np.array([0, 0, -1], np.int64)
    nodes = [helper.make_node("LSTM", ["x", "w1", "r1", "b1"], ["y1"], direction="bidirectional", hidden_size=h1,
                              name="lstm1"),
             helper.make_node("Transpose", ["y1"], ["y1t"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["y1t", "shape"], ["x2"]),
             helper.make_node("LSTM", ["x2", "w2", "r2", "b2"], ["y2", "yh2", "yc2"], direction="bidirectional",
                              hidden_size=h2, name="lstm2")]
    graph = helper.make_graph(
        nodes, "lstm_stack2", [vi("x", F, ["S", "B", i])],
        [vi("y2", F, ["S", 2, "B", h2]), vi("yh2", F, [2, "B", h2]), vi("yc2", F, [2, "B", h2])],
        [init("w1", w1), init("r1", r1), init("b1", b1), init("w2", w2), init("r2", r2), init("b2", b2),
         init("shape", shape)])
    return graph, [[rng.standard_normal((s, bt, i)).astype(np.float32)]
                   for s, bt in [(13, 3), (1, 1), (4, 2), (7, 5), (2, 4)]]


def lstm_batchwise(rng):
    i, h = 3, 5
    w = rng.standard_normal((1, 4 * h, i)).astype(np.float32) * 0.5
    r = rng.standard_normal((1, 4 * h, h)).astype(np.float32) * 0.5
    node = helper.make_node("LSTM", ["x", "w", "r"], ["y", "yh"], direction="reverse", hidden_size=h, layout=1,
                            input_forget=1, activations=["HardSigmoid", "Softsign", "ScaledTanh"],
                            activation_alpha=[0.3, 1.5], activation_beta=[0.4, 0.5], name="lstm")
    graph = helper.make_graph([node], "lstm_batchwise", [vi("x", F, ["B", "S", i])],
                              [vi("y", F, ["B", "S", 1, h]), vi("yh", F, ["B", 1, h])],
                              [init("w", w), init("r", r)])
    return graph, [[rng.standard_normal((bt, s, i)).astype(np.float32)]
                   for bt, s in [(1, 13), (3, 1), (2, 6), (4, 9), (1, 2)]]


def gru_bidir(rng):
    i, h = 3, 4
    w = rng.standard_normal((2, 3 * h, i)).astype(np.float32) * 0.5
    r = rng.standard_normal((2, 3 * h, h)).astype(np.float32) * 0.5
    b = rng.standard_normal((2, 6 * h)).astype(np.float32) * 0.2
    node = helper.make_node("GRU", ["x", "w", "r", "b"], ["y", "yh"], direction="bidirectional", hidden_size=h,
                            layout=1, linear_before_reset=1, name="gru")
    graph = helper.make_graph([node], "gru_bidir", [vi("x", F, ["B", "S", i])],
                              [vi("y", F, ["B", "S", 2, h]), vi("yh", F, ["B", 2, h])],
                              [init("w", w), init("r", r), init("b", b)])
    return graph, [[rng.standard_normal((bt, s, i)).astype(np.float32)]
                   for bt, s in [(1, 13), (3, 1), (2, 6), (4, 9), (1, 2)]]


def gru_lbr0(rng):
    i, h = 3, 4
    w = rng.standard_normal((1, 3 * h, i)).astype(np.float32) * 0.5
    r = rng.standard_normal((1, 3 * h, h)).astype(np.float32) * 0.5
    b = rng.standard_normal((1, 6 * h)).astype(np.float32) * 0.2
    node = helper.make_node("GRU", ["x", "w", "r", "b", "lens", "h0"], ["y", "yh"], hidden_size=h, name="gru")
    graph = helper.make_graph(
        [node], "gru_lbr0",
        [vi("x", F, ["S", "B", i]), vi("lens", TensorProto.INT32, ["B"]), vi("h0", F, [1, "B", h])],
        [vi("y", F, ["S", 1, "B", h]), vi("yh", F, [1, "B", h])], [init("w", w), init("r", r), init("b", b)])
    sets = []
    for s, bt, lens in [(13, 2, [13, 7]), (1, 1, [1]), (5, 3, [2, 5, 3])]:
        sets.append([rng.standard_normal((s, bt, i)).astype(np.float32), np.array(lens, np.int32),
                     rng.standard_normal((1, bt, h)).astype(np.float32)])
    return graph, sets


def rnn_reverse(rng):
    i, h = 3, 4
    w = rng.standard_normal((1, h, i)).astype(np.float32) * 0.5
    r = rng.standard_normal((1, h, h)).astype(np.float32) * 0.5
    b = rng.standard_normal((1, 2 * h)).astype(np.float32) * 0.2
    node = helper.make_node("RNN", ["x", "w", "r", "b", "lens"], ["y", "yh"], hidden_size=h, direction="reverse",
                            activations=["Relu"], name="rnn")
    graph = helper.make_graph(
        [node], "rnn_reverse", [vi("x", F, ["S", "B", i]), vi("lens", TensorProto.INT32, ["B"])],
        [vi("y", F, ["S", 1, "B", h]), vi("yh", F, [1, "B", h])], [init("w", w), init("r", r), init("b", b)])
    sets = []
    for s, bt, lens in [(13, 2, [13, 7]), (1, 1, [1]), (5, 3, [2, 5, 3])]:
        sets.append([rng.standard_normal((s, bt, i)).astype(np.float32), np.array(lens, np.int32)])
    return graph, sets


def loop_decode(rng):
    d = 6
    w = rng.standard_normal((d, d)).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "w"], ["hw"]),
         helper.make_node("Tanh", ["hw"], ["h_out"]),
         helper.make_node("ArgMax", ["h_out"], ["t"], axis=1, keepdims=1),
         helper.make_node("Concat", ["toks_in", "t"], ["toks_out"], axis=1),
         helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero", TensorProto.INT64, [2], [0, 0])),
         helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT64, [2], [1, 1])),
         helper.make_node("Slice", ["t", "zero", "one"], ["t0"]),
         helper.make_node("Constant", [], ["stop_tok"], value=helper.make_tensor("stop", TensorProto.INT64, [], [2])),
         helper.make_node("Equal", ["t0", "stop_tok"], ["stop"]),
         helper.make_node("Not", ["stop"], ["go"]),
         helper.make_node("Squeeze", ["go"], ["cond_out"])],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("h_in", F, None),
         vi("toks_in", TensorProto.INT64, None)],
        [vi("cond_out", TensorProto.BOOL, []), vi("h_out", F, None), vi("toks_out", TensorProto.INT64, None),
         vi("h_out", F, None), vi("t", TensorProto.INT64, None), vi("hw", F, None)])
    node = helper.make_node("Loop", ["m", "", "h", "tok"], ["hT", "toks", "hs", "ts", "hws"], body=body,
                            name="decode")
    graph = helper.make_graph(
        [node], "loop_decode",
        [vi("h", F, ["B", d]), vi("tok", TensorProto.INT64, ["B", 1]), vi("m", TensorProto.INT64, [])],
        [vi("hT", F, ["B", d]), vi("toks", TensorProto.INT64, ["B", "T"]), vi("hs", F, ["N", "B", d]),
         vi("ts", TensorProto.INT64, ["N", "B", 1]), vi("hws", F, ["N", "B", d])],
        [init("w", w)])
    sets = []
    for bt, m in [(2, 0), (1, 1), (3, 7), (2, 3), (1, 5)]:
        sets.append([rng.standard_normal((bt, d)).astype(np.float32), np.zeros((bt, 1), np.int64),
                     np.array(m, np.int64)])
    return graph, sets


def if_branch(rng):
    then = helper.make_graph(
        [helper.make_node("Concat", ["x", "x"], ["a"], axis=0), helper.make_node("Neg", ["x"], ["b"])],
        "then", [], [vi("a", F, None), vi("b", F, None)])
    st = helper.make_tensor("st", TensorProto.INT64, [1], [1])
    en = helper.make_tensor("en", TensorProto.INT64, [1], [2 ** 62])
    els = helper.make_graph(
        [helper.make_node("Constant", [], ["st"], value=st), helper.make_node("Constant", [], ["en"], value=en),
         helper.make_node("Slice", ["x", "st", "en"], ["a2"]), helper.make_node("Exp", ["x"], ["b2"])],
        "else", [], [vi("a2", F, None), vi("b2", F, None)])
    node = helper.make_node("If", ["c"], ["a", "b"], then_branch=then, else_branch=els, name="branch")
    graph = helper.make_graph([node], "if_branch", [vi("c", TensorProto.BOOL, []), vi("x", F, ["N"])],
                              [vi("a", F, ["M"]), vi("b", F, ["N"])])
    return graph, [[np.array(c), rng.standard_normal(n).astype(np.float32)] for c, n in [(True, 3), (False, 5),
                                                                                        (False, 1)]]


def scan_rev(rng):
    body = helper.make_graph(
        [helper.make_node("Mul", ["ai", "bi"], ["ab"]), helper.make_node("Add", ["s_in", "ab"], ["s_out"]),
         helper.make_node("Sub", ["s_out", "ai"], ["o"])],
        "body", [vi("s_in", F, [2]), vi("ai", F, [2]), vi("bi", F, [2])],
        [vi("s_out", F, [2]), vi("o", F, [2])])
    node = helper.make_node("Scan", ["s", "a", "b"], ["sT", "os"], body=body, num_scan_inputs=2,
                            scan_input_axes=[0, 1], scan_input_directions=[1, 0], scan_output_axes=[1],
                            scan_output_directions=[1], name="scan")
    graph = helper.make_graph([node], "scan_rev", [vi("s", F, [2]), vi("a", F, ["T", 2]), vi("b", F, [2, "T"])],
                              [vi("sT", F, [2]), vi("os", F, [2, "T"])])
    sets = []
    for t in [13, 1, 4]:
        sets.append([rng.standard_normal(2).astype(np.float32), rng.standard_normal((t, 2)).astype(np.float32),
                     rng.standard_normal((2, t)).astype(np.float32)])
    return graph, sets


def ort_layout0(model, feeds):
    """ONNX Runtime refuses layout 1: the reference runs the same node at
    layout 0 between transposes (X and the initial states in, Y, Y_h and
    Y_c out)."""
    import copy
    m = copy.deepcopy(model)
    g = m.graph
    node = g.node[0]
    for a in node.attribute:
        if a.name == "layout":
            a.i = 0
    pre, post = [], []
    for k, name in enumerate(node.input):
        if name and k in (0, 5, 6) and name not in [x.name for x in g.initializer]:
            pre.append(helper.make_node("Transpose", [name], [name + "_t"], perm=[1, 0, 2]))
            node.input[k] = name + "_t"
    for k, name in enumerate(node.output):
        if name:
            post.append(helper.make_node("Transpose", [name + "_t"], [name], perm=[2, 0, 1, 3] if k == 0 else [1, 0, 2]))
            node.output[k] = name + "_t"
    nodes = pre + [node] + post
    del g.node[:]
    g.node.extend(nodes)
    return ort_reference(m, feeds)


def loop_reference(model, feeds):
    """ONNX Runtime gives a loop that ran no iteration a stacked output of
    shape [0] (it warns that it does not know the rank); the spec's is
    [0, B, 6], the body's shape with no entries."""
    if feeds["m"] == 0:
        h = feeds["h"]
        return [h, feeds["tok"], np.zeros((0,) + h.shape, np.float32), np.zeros((0, h.shape[0], 1), np.int64),
                np.zeros((0,) + h.shape, np.float32)]
    return ort_reference(model, feeds)


def main():
    for k, fn in enumerate([lstm_bidir_lens, lstm_batchwise, gru_bidir, gru_lbr0, rnn_reverse, loop_decode,
                            if_branch, scan_rev, lstm_stack2]):
        ref = ort_layout0 if fn in (lstm_batchwise, gru_bidir) else loop_reference if fn == loop_decode \
            else ort_reference
        write(fn.__name__, *fn(np.random.default_rng(140 + k)), full_check=False, reference=ref)


if __name__ == "__main__":
    main()
