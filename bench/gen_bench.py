#!/usr/bin/env python3
"""gen_bench.py — the benchmark models, with random weights.

    python3 bench/gen_bench.py [NAME...]      (default: bert_base gpt2)

Writes bench/models/NAME/model.onnx, exported by PyTorch's TorchScript
exporter (opset 17) with every batch, sequence and image dim dynamic.
Skips a model that exists. The files are large and never committed
(bench/models/ is ignored by git). BROAD lists the broad bench of issue 18
(`run_bench.py --broad`): models from several families that no one tuned
disc for.

  bert_base     12 layers, hidden 768, 12 heads, FFN 3072, vocab 30522
  bert_small    4 layers, hidden 256, 4 heads, FFN 1024
  gpt2          12 layers, hidden 768, 12 heads, vocab 50257
  gpt_small     4 layers, hidden 256, 4 heads, vocab 8000
  llama_block   2 LLaMA layers: RMSNorm, rotary embeddings, SwiGLU
                (hidden 512, 8 heads, FFN 1376), causal
  encdec        a post-norm transformer encoder-decoder as nn.Transformer
                lays it out, 3 + 3 layers, d_model 256, 8 heads, token
                embeddings for source and target, causal target
  recommender   DIN-style attention pooling over a behaviour sequence,
                100k items x 64 (tests/models/gen_torch.py's class)
  resnet50, mobilenet_v2, mobilenet_v3_small, efficientnet_b0
                torchvision's, batch, height and width dynamic
  vit_b_16      torchvision's, 224 x 224 (its position embeddings fix the
                image size), batch dynamic

EXTRA lists a second set of torchvision models (`run_bench.py --extra`),
each a family the broad bench lacks, found by trying models disc had not
seen: densenet121 (concatenations of every earlier layer), googlenet and
squeezenet1_1 (inception and fire modules, ceil-mode pools),
shufflenet_v2_x1_0 (channel shuffles), resnext50_32x4d (grouped
convolutions), regnet_y_400mf, mnasnet1_0, efficientnet_v2_s,
convnext_tiny (7 x 7 depthwise convolutions, LayerNorm over channels) and
swin_t (shifted windows: rolls, padding to the window, masks); batch,
height and width dynamic.

DETECT lists torchvision's detectors (`run_bench.py --detect`): SSDlite
with MobileNetV3, Faster R-CNN with MobileNetV3-320-FPN (boxes kept over a
score of 0.005), RetinaNet and FCOS with ResNet-50-FPN; one 3 x H x W
image, H and W dynamic; per-class selections, top-k, batched_nms (an If
around NonMaxSuppression), RoiAlign.

RNN lists the recurrent models `make bench` runs beside BERT-base and
GPT-2 (the LSTM of issue 14, which ONNX exports as its LSTM op):

  lstm_small    token tagger: embedding 128, one LSTM layer of 128, a
                linear head per step
  lstm_bidir    the same with two bidirectional LSTM layers of 256
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

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


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate(x, cos, sin):
    x1, x2 = x[..., : x.size(-1) // 2], x[..., x.size(-1) // 2:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class LlamaLayer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads, self.dh = heads, hidden // heads
        self.n1, self.n2 = RMSNorm(hidden), RMSNorm(hidden)
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(hidden, ffn, bias=False), nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, s, h = x.size(0), x.size(1), x.size(2)
        y = self.n1(x)
        q, k, v = (t(y).view(b, s, self.heads, self.dh).transpose(1, 2) for t in (self.q, self.k, self.v))
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
        causal = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        att = torch.softmax(att.masked_fill(causal, float("-inf")), dim=-1)
        x = x + self.o(torch.matmul(att, v).transpose(1, 2).reshape(b, s, h))
        y = self.n2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class LlamaBlock(nn.Module):
    def __init__(self, vocab=8000, hidden=512, heads=8, ffn=1376, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LlamaLayer(hidden, heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        dh = hidden // heads
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dh, 2).float() / dh)))

    def forward(self, input_ids):
        pos = torch.arange(input_ids.size(1), dtype=torch.float32)
        f = torch.outer(pos, self.inv_freq)
        f = torch.cat([f, f], dim=-1)
        cos, sin = f.cos(), f.sin()
        x = self.emb(input_ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


class Attention(nn.Module):
    """Multi-head attention of x over mem; written out (nn.MultiheadAttention's
    export keeps the example's lengths in its reshapes)."""

    def __init__(self, d, heads):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x, mem, causal=False):
        b, s, t = x.size(0), x.size(1), mem.size(1)
        q = self.q(x).view(b, s, self.h, self.dh).transpose(1, 2)
        k = self.k(mem).view(b, t, self.h, self.dh).transpose(1, 2)
        v = self.v(mem).view(b, t, self.h, self.dh).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
        if causal:
            att = att.masked_fill(torch.triu(torch.ones(s, t, dtype=torch.bool), diagonal=1), float("-inf"))
        y = torch.matmul(torch.softmax(att, dim=-1), v).transpose(1, 2).reshape(b, s, -1)
        return self.o(y)


class EncDecLayer(nn.Module):
    def __init__(self, d, heads, cross):
        super().__init__()
        self.self_attn = Attention(d, heads)
        self.cross = Attention(d, heads) if cross else None
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(3 if cross else 2))

    def forward(self, x, mem=None):
        x = self.norms[0](x + self.self_attn(x, x, causal=mem is not None))
        if self.cross is not None:
            x = self.norms[1](x + self.cross(x, mem))
        return self.norms[-1](x + self.ff(x))


class EncDec(nn.Module):
    """A post-norm transformer encoder-decoder (nn.Transformer's layout):
    source and target lengths independent, causal self-attention in the
    decoder, cross-attention to the encoder's output."""

    def __init__(self, vocab=8000, d=256, heads=8, layers=3):
        super().__init__()
        self.src, self.tgt = nn.Embedding(vocab, d), nn.Embedding(vocab, d)
        self.enc = nn.ModuleList(EncDecLayer(d, heads, False) for _ in range(layers))
        self.dec = nn.ModuleList(EncDecLayer(d, heads, True) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, src_ids, tgt_ids):
        mem = self.src(src_ids)
        for layer in self.enc:
            mem = layer(mem)
        x = self.tgt(tgt_ids)
        for layer in self.dec:
            x = layer(x, mem)
        return self.head(x)


class LstmTagger(nn.Module):
    def __init__(self, vocab=8000, emb=128, hidden=128, layers=1, bidir=False, tags=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, num_layers=layers, bidirectional=bidir, batch_first=True)
        self.head = nn.Linear(hidden * (2 if bidir else 1), tags)

    def forward(self, ids):
        y, _ = self.rnn(self.emb(ids))
        return self.head(y)


SEQ = {0: "batch", 1: "seq"}
IMG = {0: "batch", 2: "height", 3: "width"}


def transformer(name):
    """The module of a BERT or GPT bench model (also bench/gpu_bench.py's)."""
    if name in ("bert_base", "bert_small"):
        big = name == "bert_base"
        return gen_torch.BertEncoder(vocab=30522, hidden=768 if big else 256, heads=12 if big else 4,
                                     ffn=3072 if big else 1024, layers=12 if big else 4, max_pos=512)
    big = name == "gpt2"
    return gen_torch.GptDecoder(vocab=50257 if big else 8000, hidden=768 if big else 256, heads=12 if big else 4,
                                layers=12 if big else 4, max_pos=1024)


def generate(name):
    ids = torch.randint(0, 100, (2, 16), dtype=torch.long)
    mask = torch.ones(2, 16, dtype=torch.long)
    img = torch.randn(1, 3, 224, 224)
    if name in ("bert_base", "bert_small"):
        export(name, transformer(name), ["input_ids", "attention_mask"],
               {"input_ids": SEQ, "attention_mask": SEQ, "out": SEQ}, (ids, mask))
    elif name in ("gpt2", "gpt_small"):
        export(name, transformer(name), ["input_ids"], {"input_ids": SEQ, "out": SEQ}, (ids,))
    elif name == "llama_block":
        export(name, LlamaBlock(), ["input_ids"], {"input_ids": SEQ, "out": SEQ}, (ids,))
    elif name == "encdec":
        export(name, EncDec(), ["src_ids", "tgt_ids"],
               {"src_ids": SEQ, "tgt_ids": {0: "batch", 1: "tgt"}, "out": {0: "batch", 1: "tgt"}}, (ids, ids[:, :5]))
    elif name == "recommender":
        ex = (torch.randint(1, 1000, (2, 16)), torch.randint(1, 1000, (2,)), torch.randn(2, 8))
        export(name, gen_torch.Recommender(items=100000, dim=64), ["hist_ids", "target_id", "dense"],
               {"hist_ids": {0: "batch", 1: "len"}, "target_id": {0: "batch"}, "dense": {0: "batch"},
                "out": {0: "batch"}}, ex)
    elif name in ("lstm_small", "lstm_bidir"):
        big = name == "lstm_bidir"
        m = LstmTagger(hidden=256 if big else 128, layers=2 if big else 1, bidir=big)
        export(name, m, ["input_ids"], {"input_ids": SEQ, "out": SEQ}, (ids,))
    elif name == "vit_b_16":
        import torchvision
        export(name, torchvision.models.vit_b_16(), ["x"], {"x": {0: "batch"}, "out": {0: "batch"}}, (img,))
    elif name in DETECT:
        import torchvision
        # random weights; a 3 x H x W image, H and W dynamic. Faster R-CNN
        # keeps boxes over 0.005 (at random weights none passes its 0.05)
        kw = {"box_score_thresh": 0.005} if name.startswith("fasterrcnn") else {}
        m = getattr(torchvision.models.detection, name)(weights=None, weights_backbone=None, **kw)
        gen_torch.randomize_bn(m)
        m.eval()
        out = os.path.join(HERE, "models", name, "model.onnx")
        if os.path.exists(out):
            return
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with torch.no_grad():
            # the outputs (boxes, scores and labels, in each model's order) keep the exporter's names
            torch.onnx.export(m, ([torch.rand(3, 320, 320)],), out, input_names=["image"],
                              dynamic_axes={"image": {1: "height", 2: "width"}}, opset_version=17, dynamo=False)
        print(f"gen_bench: wrote {out} ({os.path.getsize(out) >> 20} MB)")
    else:
        import torchvision
        m = getattr(torchvision.models, name)()
        gen_torch.randomize_bn(m)
        export(name, m, ["x"], {"x": IMG, "out": {0: "batch"}}, (img,))


BROAD = ["resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "vit_b_16", "bert_small",
         "bert_base", "gpt_small", "gpt2", "llama_block", "encdec", "recommender"]
EXTRA = ["densenet121", "googlenet", "squeezenet1_1", "shufflenet_v2_x1_0", "resnext50_32x4d", "regnet_y_400mf",
         "mnasnet1_0", "efficientnet_v2_s", "convnext_tiny", "swin_t"]
RNN = ["lstm_small", "lstm_bidir"]
DETECT = ["ssdlite320_mobilenet_v3_large", "fasterrcnn_mobilenet_v3_large_320_fpn", "retinanet_resnet50_fpn",
          "fcos_resnet50_fpn"]


def main():
    torch.manual_seed(0)
    torch.backends.mha.set_fastpath_enabled(False)  # the fused attention op has no ONNX export
    for name in sys.argv[1:] or ["bert_base", "gpt2"]:
        if name not in BROAD + EXTRA + RNN + DETECT:
            sys.exit(f"gen_bench: unknown model {name} (models: {', '.join(BROAD + EXTRA + RNN + DETECT)})")
        generate(name)


if __name__ == "__main__":
    main()
