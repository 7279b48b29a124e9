#!/usr/bin/env python3
"""gen_control_errors.py — malformed Loop, If, Scan and LSTM models for
tests/onnx/models/ (err_loop_*, err_if_*, err_scan_*, err_lstm_*): each must
be refused with a located error naming the node (tests/onnx.cmake). The
files are committed; rerun after changing one (pip install onnx==1.17.0).
"""
import numpy as np
from onnx import TensorProto, helper

from gen_models import F, I64, init, save, vi

B = TensorProto.BOOL


def main():
    # a body that takes two inputs for three (iteration, condition, one carried)
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c2"])], "body",
                             [vi("i", I64, []), vi("c", B, [])], [vi("c2", B, []), vi("c", B, [])])
    save("err_loop_body", [helper.make_node("Loop", ["m", "", "x"], ["o"], body=body, name="loop")],
         [vi("m", I64, []), vi("x", F, ["N"])], [vi("o", F, None)], check=False)
    # a carried value that leaves the body with another dtype
    body = helper.make_graph([helper.make_node("Cast", ["xi"], ["y"], to=I64)], "body",
                             [vi("i", I64, []), vi("c", B, []), vi("xi", F, None)],
                             [vi("c", B, []), vi("y", I64, None)])
    save("err_loop_dtype", [helper.make_node("Loop", ["m", "", "x"], ["o"], body=body, name="loop")],
         [vi("m", I64, []), vi("x", F, ["N"])], [vi("o", F, None)], check=False)
    # branches of different ranks on a run-time condition
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["a"])], "then", [], [vi("a", F, None)])
    other = helper.make_graph([helper.make_node("Unsqueeze", ["x", "ax"], ["b"])], "else", [], [vi("b", F, None)])
    save("err_if_rank", [helper.make_node("If", ["c"], ["o"], then_branch=then, else_branch=other, name="branch")],
         [vi("c", B, []), vi("x", F, ["N"])], [vi("o", F, None)], [init("ax", np.array([0], np.int64))], check=False)
    w = np.zeros((1, 8, 3), np.float32)
    r = np.zeros((1, 8, 2), np.float32)
    save("err_lstm_direction",
         [helper.make_node("LSTM", ["x", "w", "r"], ["y"], direction="sideways", hidden_size=2, name="lstm")],
         [vi("x", F, ["S", "B", 3])], [vi("y", F, None)], [init("w", w), init("r", r)], check=False)
    body = helper.make_graph([helper.make_node("Identity", ["a"], ["b"])], "body", [vi("a", F, None)],
                             [vi("b", F, None)])
    save("err_scan_inputs", [helper.make_node("Scan", ["x"], ["o"], body=body, num_scan_inputs=3, name="scan")],
         [vi("x", F, ["T", 2])], [vi("o", F, None)], check=False)


if __name__ == "__main__":
    main()
