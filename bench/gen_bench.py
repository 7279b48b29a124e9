#!/usr/bin/env python3
"""gen_bench.py — the large benchmark models, with random weights.

Writes bench/models/bert_base/model.onnx (12 layers, hidden 768, 12 heads,
FFN 3072, vocab 30522) and bench/models/gpt2/model.onnx (12 layers, hidden
768, 12 heads, vocab 50257), using the model classes of
tests/models/gen_torch.py at full size, exported with dynamic batch and
sequence. Skips a model that exists. The files are large and never
committed (bench/models/ is ignored by git).
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "models"))
import gen_torch  # noqa: E402


def export(name, model, inputs, dynamic, example):
    out = os.path.join(HERE, "models", name, "model.onnx")
    if os.path.exists(out):
        return
    os.makedirs(os.path.dirname(out), exist_ok=True)
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, example, out, input_names=inputs, output_names=["out"],
                          dynamic_axes=dynamic, opset_version=17, dynamo=False)
    print(f"gen_bench: wrote {out} ({os.path.getsize(out) >> 20} MB)")


def main():
    torch.manual_seed(0)
    ids = torch.randint(0, 100, (2, 16), dtype=torch.long)
    mask = torch.ones(2, 16, dtype=torch.long)
    export("bert_base", gen_torch.BertEncoder(vocab=30522, hidden=768, heads=12, ffn=3072, layers=12, max_pos=512),
           ["input_ids", "attention_mask"],
           {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
            "out": {0: "batch", 1: "seq"}}, (ids, mask))
    export("gpt2", gen_torch.GptDecoder(vocab=50257, hidden=768, heads=12, layers=12, max_pos=1024),
           ["input_ids"], {"input_ids": {0: "batch", 1: "seq"}, "out": {0: "batch", 1: "seq"}}, (ids,))


if __name__ == "__main__":
    main()
