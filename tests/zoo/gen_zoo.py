#!/usr/bin/env python3
"""gen_zoo.py — the shape idioms of PyTorch's exporter, one small module each.

Every case is a few lines of PyTorch that make the exporter write one shape
idiom over dynamic axes (`cls_token.expand(B, -1, -1)`, `x.view(B, -1)`,
`F.pad` to a multiple, `arange(x.size(1))`, a top-k with a computed k...).
Each is exported three times: with the TorchScript exporter
(torch.onnx.export(..., dynamo=False), the exporter tests/models/gen_torch.py
uses) at opset 17 and at that exporter's newest opset, 20 (from 18 on,
ReduceMean's axes, Split's sizes and Resize's sizes arrive as inputs or
change form), and with torch.export's exporter (dynamo=True, the default
of torch.onnx since torch 2.9) at its opset, 18, every input axis
Dim.AUTO. A variant the exporter cannot write, or writes wrongly (ONNX
Runtime disagrees with PyTorch at some shape), is left out and said so.
ONNX Runtime (CPU, every graph optimisation) computes the references at
three input shapes, batch 1 and a length 13 among them, and the script
checks them against PyTorch's own outputs. The results are backend-test
directories:

    tests/zoo/<case>/op17/model.onnx, test_data_set_{0,1,2}/{input,output}_N.pb
    tests/zoo/<case>/op20/...
    tests/zoo/<case>/dynamo/...

tests/zoo.cmake runs each through `dcc check` on the interpreter and the
cpu backend (label `zoo`), held by tests/zoo/run.py to its line in
tests/zoo/expect.txt. The generated files are small and committed; CI does
not run this script (it needs torch and onnxruntime). Rerun after changing
a case:

    python3 tests/zoo/gen_zoo.py [CASE...]        # all cases if none named
    python3 tests/zoo/gen_zoo.py --list
"""
import contextlib
import io
import logging
import math
import os
import shutil
import sys
import warnings
import zlib

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
# (directory, opset, exporter): the TorchScript exporter at 17 and at its
# newest opset, 20; torch.export's (dynamo=True, torch.onnx's default since
# torch 2.9) at its default opset, 18, with every input axis Dim.AUTO
VARIANTS = (("op17", 17, "torchscript"), ("op20", 20, "torchscript"), ("dynamo", 18, "dynamo"))

# The three shapes of the symbols: an ordinary one (also the export
# example), batch 1 with an odd length 13, and a short one.
SIZES = [dict(B=2, S=6, H=6, W=10), dict(B=1, S=13, H=13, W=7), dict(B=3, S=4, H=4, W=5)]

CASES = []


def case(name, inputs, sizes=SIZES, rtol=1e-3, atol=1e-5):
    """Registers a module class as a case. inputs: [(name, kind, dims)] with
    dims of ints and symbol names; kind f32 (normal), pos (f32 > 0),
    ids:N (i64 in [0, N)), mask (i64 0/1, every row's first entry 1)."""
    def reg(cls):
        CASES.append(dict(name=name, cls=cls, inputs=inputs, sizes=sizes))
        return cls
    return reg


def F32(*dims):
    return [("x", "f32", dims)]


# ---------------------------------------------------------- expand, repeat
@case("expand_neg1", F32("B", "S", 8))
class ExpandNeg1(nn.Module):
    """ViT's class token: cls.expand(B, -1, -1), concatenated in front."""
    def __init__(self):
        super().__init__()
        self.cls = nn.Parameter(torch.randn(1, 1, 8))

    def forward(self, x):
        return torch.cat([self.cls.expand(x.size(0), -1, -1), x], dim=1)


@case("expand_as", F32("B", "S", 8))
class ExpandAs(nn.Module):
    """A per-feature vector broadcast to x's shape by expand_as."""
    def __init__(self):
        super().__init__()
        self.v = nn.Parameter(torch.randn(8))

    def forward(self, x):
        return x * self.v.expand_as(x)


@case("expand_sizes", F32("B", "S"))
class ExpandSizes(nn.Module):
    """x[:, :, None].expand(B, S, 4) with B and S read from x.size()."""
    def forward(self, x):
        b, s = x.size()
        return x.unsqueeze(-1).expand(b, s, 4) * torch.arange(4.0)


@case("repeat_static", F32("B", "S", 4))
class RepeatStatic(nn.Module):
    def forward(self, x):
        return x.repeat(1, 2, 3)


@case("repeat_batch", F32("B", 8))
class RepeatBatch(nn.Module):
    """A parameter tiled by the batch size: repeat(B, 1)."""
    def __init__(self):
        super().__init__()
        self.p = nn.Parameter(torch.randn(1, 8))

    def forward(self, x):
        return x + self.p.repeat(x.size(0), 1)


@case("repeat_interleave", F32("B", "S", 4))
class RepeatInterleave(nn.Module):
    """GQA's key/value heads repeated: repeat_interleave(2, dim=1)."""
    def forward(self, x):
        return torch.repeat_interleave(x, 2, dim=1)


# ------------------------------------------------------------ view, reshape
@case("view_neg1", F32("B", "S", 8))
class ViewNeg1(nn.Module):
    def forward(self, x):
        return x.view(x.size(0), -1)


@case("view_heads", F32("B", "S", 8))
class ViewHeads(nn.Module):
    """Attention heads: view(B, S, 2, -1).transpose(1, 2), then merged back."""
    def forward(self, x):
        b, s, _ = x.shape
        h = x.view(b, s, 2, -1).transpose(1, 2)
        h = torch.softmax(h, dim=-1)
        return h.transpose(1, 2).reshape(b, s, -1)


@case("reshape_size_arith", F32("B", "S", 8))
class ReshapeSizeArith(nn.Module):
    """reshape(B * S, D) and back: x.size(i) products."""
    def forward(self, x):
        b, s, d = x.size(0), x.size(1), x.size(2)
        y = x.reshape(b * s, d) @ torch.ones(8, 8)
        return y.reshape(b, s, d)


@case("reshape_shape_slice", F32("B", "S", 8))
class ReshapeShapeSlice(nn.Module):
    """x.reshape(*x.shape[:-1], 2, 4): a shape sliced and extended."""
    def forward(self, x):
        return x.reshape(*x.shape[:-1], 2, 4).sum(-1)


@case("flatten_mid", F32("B", 3, "H", "W"))
class FlattenMid(nn.Module):
    def forward(self, x):
        return torch.flatten(x, 1, 2)


@case("flatten_1", F32("B", 3, "H", "W"))
class Flatten1(nn.Module):
    def forward(self, x):
        return torch.flatten(x, 1)


@case("unflatten", F32("B", "S", 8))
class Unflatten(nn.Module):
    def forward(self, x):
        return x.unflatten(-1, (2, -1)).mean(-1)


@case("squeeze_unsqueeze", F32("B", 1, "S"))
class SqueezeUnsqueeze(nn.Module):
    def forward(self, x):
        return x.squeeze(1).unsqueeze(-1) * 2.0


@case("permute_view", F32("B", "S", 8))
class PermuteView(nn.Module):
    def forward(self, x):
        return x.permute(2, 0, 1).contiguous().view(8, -1)


# ------------------------------------------------------------ chunk, split
@case("chunk_static", F32("B", "S", 8))
class ChunkStatic(nn.Module):
    """GLU-style: chunk(2, dim=-1) over a static dim."""
    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        return a * torch.sigmoid(b)


@case("chunk_dynamic", F32("B", "S", 4))
class ChunkDynamic(nn.Module):
    """chunk(2, dim=1) over the dynamic length (13 splits 7 + 6)."""
    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        return a.sum(1) - b.sum(1)


@case("halves_computed", F32("B", "S", 4))
class HalvesComputed(nn.Module):
    """Two parts at a computed point: x[:, :n], x[:, n:] with n = S // 2 + 1
    (x.split(n) would not do: the tracer bakes the sizes of its parts)."""
    def forward(self, x):
        n = x.size(1) // 2 + 1
        return x[:, :n].mean(1) + x[:, n:].sum(1)


@case("split_sizes", F32("B", "S", 8))
class SplitSizes(nn.Module):
    """GPT-2's fused QKV: split([2, 2, 4], dim=-1)."""
    def forward(self, x):
        q, k, v = x.split([2, 2, 4], dim=-1)
        return torch.cat([q * k, v], dim=-1)


@case("unbind", F32("B", 3, "S"))
class Unbind(nn.Module):
    def forward(self, x):
        a, b, c = x.unbind(1)
        return a * b + c


# ----------------------------------------------------------- size arithmetic
@case("size_scale", F32("B", "S", 8))
class SizeScale(nn.Module):
    """Attention scaling by sqrt of a size and a mean by the length."""
    def forward(self, x):
        s = x @ x.transpose(1, 2) / math.sqrt(x.size(-1))
        return s.sum(-1) / x.size(1)


@case("size_tensor_div", F32("B", "S", 8))
class SizeTensorDiv(nn.Module):
    """x.shape[1] as a tensor: sum over the length divided by it."""
    def forward(self, x):
        n = torch.tensor(x.shape[1], dtype=torch.float32)
        return x.sum(1) / n


@case("new_zeros", F32("B", "S", 8))
class NewZeros(nn.Module):
    """Padding tokens: x.new_zeros(B, 2, D) concatenated after x."""
    def forward(self, x):
        z = x.new_zeros(x.size(0), 2, x.size(2))
        return torch.cat([x, z + 1.0], dim=1)


@case("zeros_like_full", F32("B", "S"))
class ZerosLikeFull(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x) + torch.full((x.size(0), 1), 3.0) + torch.ones(x.shape)


# ------------------------------------------------------------ masks, where
@case("masked_fill_computed", F32("B", "S", 4))
class MaskedFillComputed(nn.Module):
    """A mask computed from the data (rows whose sum is negative) filled."""
    def forward(self, x):
        mask = x.sum(-1, keepdim=True) < 0
        return x.masked_fill(mask, 0.0)


@case("causal_mask", F32("B", "S", "S"))
class CausalMask(nn.Module):
    """A causal mask from the run-time length: triu(ones(S, S), 1)."""
    def forward(self, x):
        s = x.size(-1)
        m = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        return torch.softmax(x.masked_fill(m, float("-inf")), dim=-1)


@case("length_mask", [("x", "f32", ("B", "S", 4)), ("lens", "len:S", ("B",))])
class LengthMask(nn.Module):
    """A padding mask arange(S) < lens[:, None] and a masked mean."""
    def forward(self, x, lens):
        m = torch.arange(x.size(1))[None, :] < lens[:, None]
        y = x * m.unsqueeze(-1).float()
        return y.sum(1) / lens[:, None].float()


@case("where_positions", F32("B", "S"))
class WherePositions(nn.Module):
    """torch.where over a condition on positions: the first half negated."""
    def forward(self, x):
        pos = torch.arange(x.size(1))
        return torch.where(pos[None, :] < x.size(1) // 2, -x, x)


@case("attention_mask_bias", [("x", "f32", ("B", "S", 8)), ("mask", "mask", ("B", "S"))])
class AttentionMaskBias(nn.Module):
    """BERT's extended mask: (1 - mask[:, None, None, :]) * -1e4."""
    def forward(self, x, mask):
        scores = (x @ x.transpose(1, 2)).unsqueeze(1)
        bias = (1.0 - mask[:, None, None, :].to(torch.float32)) * -10000.0
        return torch.softmax(scores + bias, dim=-1)


# ------------------------------------------------------------ arange, cumsum
@case("arange_len", F32("B", "S", 4))
class ArangeLen(nn.Module):
    def forward(self, x):
        pos = torch.arange(x.size(1), dtype=torch.float32)
        return x + pos[None, :, None]


@case("arange_step", F32("B", "S"))
class ArangeStep(nn.Module):
    """Every other position: arange(0, S, 2) as gather indices."""
    def forward(self, x):
        idx = torch.arange(0, x.size(1), 2)
        return x[:, idx]


@case("arange_float", F32("B", "S"))
class ArangeFloat(nn.Module):
    """Sinusoidal positions: arange(S) * freq, sin and cos."""
    def forward(self, x):
        pos = torch.arange(x.size(1)).float()
        return x + torch.sin(pos * 0.5) + torch.cos(pos[None, :] / x.size(1))


@case("position_embedding", [("ids", "ids:50", ("B", "S"))])
class PositionEmbedding(nn.Module):
    """Token + position embeddings, positions from arange(S)."""
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(50, 8)
        self.pos = nn.Embedding(32, 8)

    def forward(self, ids):
        pos = torch.arange(ids.size(1)).unsqueeze(0).expand_as(ids)
        return self.tok(ids) + self.pos(pos)


@case("cumsum_positions", [("ids", "ids:5", ("B", "S"))])
class CumsumPositions(nn.Module):
    """RoBERTa's position ids: cumsum of the non-padding mask (pad id 0)."""
    def forward(self, ids):
        m = ids.ne(0).int()
        return (torch.cumsum(m, dim=1).type_as(m) * m).long() + 1


# --------------------------------------------------------------------- pad
@case("pad_multiple", F32("B", "S", 4))
class PadMultiple(nn.Module):
    """Pad the length up to a multiple of 4, computed from x.size(1)."""
    def forward(self, x):
        p = (4 - x.size(1) % 4) % 4
        return F.pad(x, (0, 0, 0, p))


@case("pad_static", F32("B", 2, "H", "W"))
class PadStatic(nn.Module):
    def forward(self, x):
        return F.pad(x, (1, 2, 0, 1), value=-1.0)


@case("pad_reflect", F32("B", 2, "H", "W"))
class PadReflect(nn.Module):
    def forward(self, x):
        return F.pad(x, (1, 1, 1, 1), mode="reflect")


# -------------------------------------------------------------- interpolate
@case("interp_scale_nearest", F32("B", 2, "H", "W"))
class InterpScaleNearest(nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=2.0, mode="nearest")


@case("interp_scale_bilinear", F32("B", 2, "H", "W"))
class InterpScaleBilinear(nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)


@case("interp_size_computed", F32("B", 2, "H", "W"))
class InterpSizeComputed(nn.Module):
    """FPN-style: resized to another tensor's size."""
    def forward(self, x):
        y = F.avg_pool2d(x, 2, ceil_mode=True)
        return x + F.interpolate(y, size=x.shape[-2:], mode="nearest")


@case("interp_size_fixed", F32("B", 2, "H", "W"))
class InterpSizeFixed(nn.Module):
    def forward(self, x):
        return F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True)


# ---------------------------------------------------------- gather, indexing
@case("gather_argmax", F32("B", "S", 6))
class GatherArgmax(nn.Module):
    """gather with indices computed by argmax."""
    def forward(self, x):
        idx = x.argmax(-1, keepdim=True)
        return x.gather(-1, idx) + idx.float()


@case("index_last_token", F32("B", "S", 8))
class IndexLastToken(nn.Module):
    def forward(self, x):
        return x[:, -1] + x[:, 0]


@case("index_lengths", [("x", "f32", ("B", "S", 4)), ("lens", "len:S", ("B",))])
class IndexLengths(nn.Module):
    """The last valid step of each row: x[arange(B), lens - 1]."""
    def forward(self, x, lens):
        return x[torch.arange(x.size(0)), lens - 1]


@case("slice_computed", F32("B", "S", 4))
class SliceComputed(nn.Module):
    """x[:, 1:-1], x[:, ::2] and x[:, :S // 2]."""
    def forward(self, x):
        return x[:, 1:-1].sum(1) + x[:, ::2].sum(1) + x[:, : x.size(1) // 2].sum(1)


@case("flip", F32("B", "S", 4))
class Flip(nn.Module):
    def forward(self, x):
        return x.flip(1) - x


@case("roll", F32("B", "S", 4))
class Roll(nn.Module):
    def forward(self, x):
        return torch.roll(x, 1, dims=1)


@case("bool_index", F32("B", "S"))
class BoolIndex(nn.Module):
    """x[x > 0]: a data-dependent length."""
    def forward(self, x):
        return x[x > 0] * 2.0


@case("index_put", F32("B", "S", 4))
class IndexPut(nn.Module):
    def forward(self, x):
        y = x.clone()
        y[:, 0] = 1.0
        return y


@case("one_hot", [("ids", "ids:7", ("B", "S"))])
class OneHot(nn.Module):
    def forward(self, ids):
        return F.one_hot(ids, 7).float().sum(1)


# ---------------------------------------------------------- einsum, top-k
@case("einsum_attention", F32("B", 2, "S", 4))
class EinsumAttention(nn.Module):
    def forward(self, x):
        s = torch.einsum("bhqd,bhkd->bhqk", x, x)
        return torch.einsum("bhqk,bhkd->bhqd", torch.softmax(s, -1), x)


@case("einsum_proj", F32("B", "S", 8))
class EinsumProj(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 3))

    def forward(self, x):
        return torch.einsum("bsd,de->bse", x, self.w)


@case("topk_computed", F32("B", "S"))
class TopkComputed(nn.Module):
    """top-k with k = S // 2 + 1 from the run-time length."""
    def forward(self, x):
        v, i = x.topk(x.size(1) // 2 + 1, dim=1)
        return v, i


@case("topk_static", F32("B", "S"))
class TopkStatic(nn.Module):
    def forward(self, x):
        v, i = x.topk(3, dim=1, largest=False)
        return v, i


@case("sort", F32("B", "S"))
class Sort(nn.Module):
    """sort along the dynamic axis: TopK with k = S."""
    def forward(self, x):
        v, i = torch.sort(x, dim=1, descending=True)
        return v, i


# ------------------------------------------------------ reductions, norms
@case("mean_dims", F32("B", 3, "H", "W"))
class MeanDims(nn.Module):
    """mean over (2, 3) keepdim, and a sum over -1 (ReduceMean's axes are
    an input from opset 18)."""
    def forward(self, x):
        return x - x.mean(dim=(2, 3), keepdim=True) + x.sum(-1, keepdim=True)


@case("max_dim", F32("B", "S", 4))
class MaxDim(nn.Module):
    def forward(self, x):
        v, i = x.max(dim=1)
        return v, i


@case("group_norm", F32("B", 4, "H", "W"))
class GroupNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(2, 4)

    def forward(self, x):
        return self.gn(x)


@case("layer_norm", F32("B", "S", 8))
class LayerNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(8)

    def forward(self, x):
        return self.ln(x)


@case("std_var", F32("B", "S", 4))
class StdVar(nn.Module):
    def forward(self, x):
        return x.std(dim=1) + x.var(dim=-1, keepdim=True).sum(1)


# ------------------------------------------------------------ stack, layout
@case("stack_cat", F32("B", "S"))
class StackCat(nn.Module):
    def forward(self, x):
        return torch.stack([x, x * 2.0], dim=1).flatten(1)


@case("pixel_shuffle", F32("B", 8, "H", "W"))
class PixelShuffle(nn.Module):
    def forward(self, x):
        return F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2) + F.pixel_shuffle(x, 2).mean()


@case("adaptive_pool", F32("B", 2, "H", "W"))
class AdaptivePool(nn.Module):
    def forward(self, x):
        return F.adaptive_avg_pool2d(x, 1).flatten(1) + F.adaptive_max_pool2d(x, 1).flatten(1)


@case("conv_flatten_linear", F32("B", 3, "H", "W"))
class ConvFlattenLinear(nn.Module):
    """A CNN head: conv, global pool, x.view(x.size(0), -1), linear."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        y = F.relu(self.conv(x)).mean((2, 3), keepdim=True)
        return self.fc(y.view(y.size(0), -1))


@case("window_partition", F32("B", "H", "W", 2), sizes=[dict(B=2, H=8, W=4), dict(B=1, H=4, W=12),
                                                        dict(B=3, H=12, W=8)])
class WindowPartition(nn.Module):
    """Swin's window partition: view(B, H/4, 4, W/4, 4, C), permute, view."""
    def forward(self, x):
        b, h, w, c = x.shape
        x = x.view(b, h // 4, 4, w // 4, 4, c).permute(0, 1, 3, 2, 4, 5)
        return x.reshape(-1, 16, c).mean(1)


# ------------------------------------------------ more from real models
@case("repeat_kv", F32("B", 2, "S", 4))
class RepeatKv(nn.Module):
    """Hugging Face's repeat_kv for grouped-query attention:
    x[:, :, None].expand(B, H, 2, S, D).reshape(B, 2 * H, S, D)."""
    def forward(self, x):
        b, h, s, d = x.shape
        return x[:, :, None, :, :].expand(b, h, 2, s, d).reshape(b, h * 2, s, d)


@case("mask_expand", [("x", "f32", ("B", "S", 4)), ("mask", "mask", ("B", "S"))])
class MaskExpand(nn.Module):
    """mask[:, None, None, :].expand(B, 1, S, S): the 4-D attention mask."""
    def forward(self, x, mask):
        b, s = mask.shape
        m = mask[:, None, None, :].expand(b, 1, s, s).to(torch.bool)
        scores = (x @ x.transpose(1, 2)).unsqueeze(1)
        return torch.softmax(scores.masked_fill(~m, -1e4), dim=-1)


@case("gather_expand_index", F32("B", "S", 4))
class GatherExpandIndex(nn.Module):
    """Token selection: the k = S // 2 + 1 highest-scoring rows gathered by
    idx.unsqueeze(-1).expand(-1, -1, D)."""
    def forward(self, x):
        k = x.size(1) // 2 + 1
        idx = x.sum(-1).topk(k, dim=1).indices
        return x.gather(1, idx.unsqueeze(-1).expand(-1, -1, x.size(-1)))


@case("argsort", F32("B", "S"))
class Argsort(nn.Module):
    def forward(self, x):
        return torch.argsort(x, dim=-1)


@case("meshgrid", F32("B", 2, "H", "W"))
class Meshgrid(nn.Module):
    """A detector's grid: meshgrid(arange(H), arange(W)) stacked."""
    def forward(self, x):
        h, w = x.shape[-2:]
        ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        grid = torch.stack([xs, ys], dim=0).float()
        return x + grid.unsqueeze(0)


@case("sdpa_causal", F32("B", 2, "S", 4))
class SdpaCausal(nn.Module):
    def forward(self, x):
        return F.scaled_dot_product_attention(x, x * 0.5, x, is_causal=True)


@case("multihead_attention", F32("B", "S", 8))
class MultiheadAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]


@case("reverse_arange", F32("B", "S", 4))
class ReverseArange(nn.Module):
    """index_select with arange(S - 1, -1, -1): a reversal by indices."""
    def forward(self, x):
        return x.index_select(1, torch.arange(x.size(1) - 1, -1, -1))


@case("nonzero", F32("B", "S"))
class Nonzero(nn.Module):
    def forward(self, x):
        return torch.nonzero(x > 0.5)


@case("full_like", F32("B", "S"))
class FullLike(nn.Module):
    def forward(self, x):
        return torch.full_like(x, 2.0) * x + x.new_ones(x.shape) + x.new_full((x.size(0), 1), 0.5)


@case("linspace", F32("B", "S"))
class Linspace(nn.Module):
    def forward(self, x):
        return x * torch.linspace(0.0, 1.0, x.size(1))


@case("unfold_windows", F32("B", "S", 2))
class UnfoldWindows(nn.Module):
    """Sliding windows along the length: x.unfold(1, 2, 2)."""
    def forward(self, x):
        return x.unfold(1, 2, 2).sum(-1)


@case("maxpool_ceil", F32("B", 2, "H", "W"))
class MaxpoolCeil(nn.Module):
    def forward(self, x):
        return F.max_pool2d(x, 3, 2, ceil_mode=True)


@case("interp_bicubic", F32("B", 2, "H", "W"))
class InterpBicubic(nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=0.5, mode="bicubic", align_corners=False)


@case("conv_same_pad", F32("B", 3, "H", "W"))
class ConvSamePad(nn.Module):
    """timm's Conv2dSame (TensorFlow's SAME for a strided conv): pads
    max((ceil(H / s) - 1) * s + k - H, 0), split before and after, computed
    from x.size()."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2)

    def forward(self, x):
        # with tensor ops: Python's max and math.ceil would be baked in by the tracer
        h, w = torch.tensor(x.size(2)), torch.tensor(x.size(3))
        ph = torch.clamp((torch.div(h + 1, 2, rounding_mode="floor") - 1) * 2 + 3 - h, min=0)
        pw = torch.clamp((torch.div(w + 1, 2, rounding_mode="floor") - 1) * 2 + 3 - w, min=0)
        x = F.pad(x, [pw // 2, pw - pw // 2, ph // 2, ph - ph // 2])
        return self.conv(x)


@case("scatter_add", [("x", "f32", ("B", "S")), ("ids", "ids:5", ("B", "S"))])
class ScatterAdd(nn.Module):
    """Per-row histograms: zeros(B, 5).scatter_add(1, ids, x)."""
    def forward(self, x, ids):
        return torch.zeros(x.size(0), 5).scatter_add(1, ids, x)


@case("any_all", F32("B", "S", 4))
class AnyAll(nn.Module):
    """Boolean reductions: rows with any positive and with all positive."""
    def forward(self, x):
        p = x > 0
        return p.any(dim=-1).float() + p.all(dim=-1).float()


@case("narrow_computed", F32("B", "S", 4))
class NarrowComputed(nn.Module):
    """narrow(1, 1, S - 1) and the difference of neighbours."""
    def forward(self, x):
        return x.narrow(1, 1, x.size(1) - 1) * (x[:, 1:] - x[:, :-1])


@case("normalize_norm", F32("B", "S", 4))
class NormalizeNorm(nn.Module):
    def forward(self, x):
        return F.normalize(x, dim=-1) + x.norm(p=2, dim=1, keepdim=True) + x.logsumexp(dim=-1, keepdim=True)


@case("bmm_baddbmm", F32("B", "S", 4))
class BmmBaddbmm(nn.Module):
    def forward(self, x):
        a = torch.bmm(x, x.transpose(1, 2))
        return torch.baddbmm(a, x, x.transpose(1, 2), beta=0.5, alpha=2.0)


@case("conv1d_same", F32("B", 3, "S"))
class Conv1dSame(nn.Module):
    """conv1d with padding='same' over the dynamic length, then avg_pool1d."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 4, 4, padding="same")

    def forward(self, x):
        return F.avg_pool1d(self.conv(x), 2, ceil_mode=True)


@case("upsample_1d", F32("B", 2, "S"))
class Upsample1d(nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=2.0, mode="linear", align_corners=False) + \
            F.interpolate(x, scale_factor=2.0, mode="nearest")


@case("grid_sample", [("x", "f32", ("B", 2, "H", "W")), ("grid", "f32", ("B", 3, 5, 2))])
class GridSample(nn.Module):
    """Spatial-transformer sampling at computed points."""
    def forward(self, x, grid):
        return F.grid_sample(x, torch.tanh(grid), mode="bilinear", align_corners=False)


@case("grid_sample_modes", [("x", "f32", ("B", 2, "H", "W")), ("grid", "f32", ("B", 4, 3, 2))])
class GridSampleModes(nn.Module):
    """grid_sample's other modes at points up to 2.5 times outside the
    image: nearest with reflection, bilinear with border and
    align_corners."""
    def forward(self, x, grid):
        g = grid * 2.5
        return F.grid_sample(x, g, mode="nearest", padding_mode="reflection", align_corners=False) + \
            F.grid_sample(x, g, mode="bilinear", padding_mode="border", align_corners=True) + \
            F.grid_sample(x, g, mode="bilinear", padding_mode="reflection", align_corners=True)


@case("grid_sample_bicubic", [("x", "f32", ("B", 2, "H", "W")), ("grid", "f32", ("B", 4, 3, 2))])
class GridSampleBicubic(nn.Module):
    """grid_sample bicubic with each padding mode, points up to 1.5 times
    outside the image."""
    def forward(self, x, grid):
        g = grid * 1.5
        return F.grid_sample(x, g, mode="bicubic", padding_mode="zeros", align_corners=False) + \
            F.grid_sample(x, g, mode="bicubic", padding_mode="border", align_corners=False) + \
            F.grid_sample(x, g, mode="bicubic", padding_mode="reflection", align_corners=True)


@case("unique", [("ids", "ids:5", ("B", "S"))])
class Unique(nn.Module):
    def forward(self, ids):
        return torch.unique(ids, sorted=True)


@case("index_fill", F32("B", "S", 4))
class IndexFill(nn.Module):
    def forward(self, x):
        return x.index_fill(2, torch.tensor([0, 2]), -1.0)


@case("masked_scatter", F32("B", "S"))
class MaskedScatter(nn.Module):
    def forward(self, x):
        return x.masked_scatter(x > 0, torch.zeros_like(x) + 5.0)


@case("floor_divide_shapes", F32("B", "S", 4))
class FloorDivideShapes(nn.Module):
    """Sizes through floor_divide and remainder as tensors."""
    def forward(self, x):
        s = torch.tensor(x.size(1))
        q = torch.floor_divide(s, 4)
        r = torch.remainder(s, 4)
        return x * q.float() + r.float()


@case("layer_norm_2d", F32("B", "S", 2, 4))
class LayerNorm2d(nn.Module):
    """layer_norm over the last two axes."""
    def forward(self, x):
        return F.layer_norm(x, (2, 4))


@case("clamp_tensor", F32("B", "S"))
class ClampTensor(nn.Module):
    def forward(self, x):
        lo = x.mean(dim=1, keepdim=True)
        return torch.clamp(x, min=lo, max=lo + 0.5)


@case("tril_positions", F32("B", "S", "S"))
class TrilPositions(nn.Module):
    """Relative positions i - j from two aranges, masked below the diagonal."""
    def forward(self, x):
        s = x.size(1)
        i = torch.arange(s)
        rel = (i[:, None] - i[None, :]).float()
        return torch.tril(x) + rel.clamp(min=0)


# ------------------------------------------------- data-dependent lengths
@case("bool_index_reduce", F32("B", "S"))
class BoolIndexReduce(nn.Module):
    """x[x > 0] then reductions over the data-dependent length."""
    def forward(self, x):
        v = x[x > 0]
        return v.sum() + v.max() * 0.0 + (v * v).mean()


@case("bool_index_assign", F32("B", "S"))
class BoolIndexAssign(nn.Module):
    """y[y < 0] = 0 (index_put with a boolean mask)."""
    def forward(self, x):
        y = x.clone()
        y[y < 0] = 0.0
        return y


@case("row_select_linear", F32("B", 4))
class RowSelectLinear(nn.Module):
    """Rows whose sum is positive, selected by a boolean mask and fed to a
    linear layer (a data-dependent batch into a matmul)."""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        rows = x[x.sum(-1) > -10.0]
        return self.fc(rows)


@case("nonzero_mean", F32("B", "S"))
class NonzeroMean(nn.Module):
    def forward(self, x):
        return torch.nonzero(x > 0).float().mean(0, keepdim=True) + x.sum()


@case("where_indices", F32("B", "S"))
class WhereIndices(nn.Module):
    """torch.where(cond) as index tuples, then advanced indexing."""
    def forward(self, x):
        i, j = torch.where(x > 0)
        return x[i, j] * (i + j).float()


@case("masked_select_view", F32("B", "S", 2))
class MaskedSelectView(nn.Module):
    """Pairs of a row kept together: masked_select then view(-1, 2)."""
    def forward(self, x):
        keep = (x.sum(-1, keepdim=True) > 0).expand_as(x)
        return torch.masked_select(x, keep).view(-1, 2) * 2.0


@case("bool_columns_softmax", F32("B", "S"))
class BoolColumnsSoftmax(nn.Module):
    """Columns kept by a mask computed from row 0, a softmax over them."""
    def forward(self, x):
        return torch.softmax(x[:, x[0] > -0.5], dim=-1)


@case("cat_selected", F32("B", "S"))
class CatSelected(nn.Module):
    """The positive and the other elements, concatenated and sorted."""
    def forward(self, x):
        v = torch.cat([x[x > 0], x[x <= 0] * 2.0])
        return torch.sort(v).values


@case("selected_matmul_pad", F32("B", "S"))
class SelectedMatmulPad(nn.Module):
    """Selected elements as a column times a row (a matmul with a
    data-dependent M), padded by 3 at the end."""
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(1, 5))

    def forward(self, x):
        v = x[x > 0].view(-1, 1) @ self.w
        return F.pad(v, (0, 0, 0, 3))


@case("arange_count", F32("B", "S"))
class ArangeCount(nn.Module):
    """arange over a count taken from the data: (x > 0).sum()."""
    def forward(self, x):
        n = (x > 0).sum()
        return torch.arange(n).float() * 0.5 + x.mean()


@case("batched_nms", F32("S", 6))
class BatchedNms(nn.Module):
    """A detector's post-processing (torchvision's SSD): per class the boxes
    whose score passes a threshold, concatenated (a length that is a sum of
    data-dependent counts), then torchvision's batched_nms, which the
    exporter writes as an If on the count around a NonMaxSuppression."""
    def forward(self, x):
        import torchvision
        # the boxes as torchvision's box coder decodes them and clips them to
        # the image: stacked, flattened and reshaped to their own shape
        ctr, size = x[:, None, :2] * 4.0, x[:, None, 2:4].abs() + 1.0
        lo, hi = ctr - 0.5 * size, ctr + 0.5 * size
        boxes = torch.stack((lo[..., 0], lo[..., 1], hi[..., 0], hi[..., 1]), dim=2).flatten(1)
        bx, by = boxes[..., 0::2].clamp(min=-2.0, max=6.0), boxes[..., 1::2].clamp(min=-2.0, max=6.0)
        boxes = torch.stack((bx, by), dim=boxes.dim()).reshape(boxes.shape)
        bs, ss, ls = [], [], []
        for c in range(2):
            s = torch.sigmoid(x[:, 4 + c])
            keep = s > 0.4
            bs.append(boxes[keep])
            ss.append(s[keep])
            ls.append(torch.full_like(s[keep], c, dtype=torch.int64))
        b, s, lab = torch.cat(bs), torch.cat(ss), torch.cat(ls)
        k = torchvision.ops.batched_nms(b, s, lab, 0.5)
        return b[k], s[k]


@case("batched_nms_empty", F32("S", 6))
class BatchedNmsEmpty(nn.Module):
    """RetinaNet's post-processing of one level: the scores over a threshold
    that no input here passes, their top k (torchvision's _topk_min: k =
    min(5, count)), then batched_nms: every result is empty, and the If's
    branch takes inputs whose length the exporter's TopK left unknown."""
    def forward(self, x):
        import torchvision
        from torchvision.models.detection._utils import _topk_min
        boxes = torch.cat([x[:, :2], x[:, :2] + x[:, 2:4].abs() + 1.0], 1)
        s = torch.sigmoid(x[:, 4]) * 0.5
        keep = s > 0.6
        s, b = s[keep], boxes[keep]
        s, idx = s.topk(_topk_min(s, 5, 0))
        b = b[idx]
        k = torchvision.ops.batched_nms(b, s, torch.zeros_like(idx), 0.5)
        return b[k], s[k]


# ------------------------------------------------------------------ writing
def make_inputs(spec, sizes, rng):
    arrays = []
    for name, kind, dims in spec["inputs"]:
        shape = tuple(sizes[d] if isinstance(d, str) else d for d in dims)
        if kind == "f32":
            a = rng.standard_normal(shape).astype(np.float32)
        elif kind.startswith("ids:"):
            a = rng.integers(0, int(kind[4:]), size=shape).astype(np.int64)
        elif kind.startswith("len:"):  # lengths in [1, symbol]
            a = rng.integers(1, sizes[kind[4:]] + 1, size=shape).astype(np.int64)
            a[0] = sizes[kind[4:]]
        elif kind == "mask":
            a = (rng.random(shape) < 0.7).astype(np.int64)
            a[..., 0] = 1
        else:
            raise ValueError(kind)
        arrays.append(a)
    return arrays


def dynamic_axes(spec, outputs):
    dyn = {}
    for name, _, dims in spec["inputs"]:
        dyn[name] = {i: d for i, d in enumerate(dims) if isinstance(d, str)}
    for k, o in enumerate(outputs):  # every output dim dynamic: the rules decide
        dyn["y%d" % k] = {i: "y%d_%d" % (k, i) for i in range(o.dim())}
    return dyn


def export(spec, model, example, opset, exporter):
    with torch.no_grad():
        out = model(*(torch.from_numpy(a) for a in example))
    outs = [out] if isinstance(out, torch.Tensor) else list(out)
    names = [i[0] for i in spec["inputs"]]
    args = tuple(torch.from_numpy(a) for a in example)
    out_names = ["y%d" % k for k in range(len(outs))]
    buf = io.BytesIO()
    logging.disable(logging.WARNING)  # torch.export's notes on torchvision and the like
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            auto = torch.export.Dim.AUTO
            dyn = {n: {i: auto for i, d in enumerate(dims) if isinstance(d, str)}
                   for n, _, dims in spec["inputs"]}
            prog = torch.onnx.export(model, args, dynamo=True, opset_version=opset, input_names=names,
                                     output_names=out_names, dynamic_shapes=dyn, verbose=False)
            prog.save(buf)
        else:
            torch.onnx.export(model, args, buf, dynamo=False, opset_version=opset, input_names=names,
                              output_names=out_names, dynamic_axes=dynamic_axes(spec, outs),
                              do_constant_folding=True)
    m = onnx.load_from_string(buf.getvalue())
    m.producer_name = "disc gen_zoo.py (torch %s, %s)" % (torch.__version__.split("+")[0], exporter)
    m.doc_string = ""
    for n in m.graph.node:
        n.doc_string = ""
    onnx.checker.check_model(m, full_check=True)
    return m


def write_variant(spec, model, sets, sub, m, d):
    """model.onnx and a data set per shape in d; raises if ONNX Runtime
    fails or disagrees with PyTorch."""
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    in_names = [i.name for i in sess.get_inputs()]
    out_names = [o.name for o in sess.get_outputs()]
    for k, inputs in enumerate(sets):
        outputs = sess.run(None, dict(zip(in_names, inputs)))
        with torch.no_grad():
            want = model(*(torch.from_numpy(a) for a in inputs))
        want = [want] if isinstance(want, torch.Tensor) else list(want)
        for o, w in zip(outputs, want):  # ONNX Runtime against PyTorch itself
            np.testing.assert_allclose(o, w.numpy(), rtol=1e-4, atol=1e-5,
                                       err_msg="%s %s set %d" % (spec["name"], sub, k))
        sd = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(sd)
        for i, (n, a) in enumerate(zip(in_names, inputs)):
            onnx.save_tensor(numpy_helper.from_array(a, n), os.path.join(sd, "input_%d.pb" % i))
        for i, (n, a) in enumerate(zip(out_names, outputs)):
            onnx.save_tensor(numpy_helper.from_array(np.asarray(a), n),
                             os.path.join(sd, "output_%d.pb" % i))


def write(spec):
    seed = zlib.crc32(spec["name"].encode())  # a case's data does not move when others are added
    torch.manual_seed(seed)
    model = spec["cls"]().eval()
    sets = []
    for k, sizes in enumerate(spec["sizes"]):
        rng = np.random.default_rng(seed + k)
        sets.append(make_inputs(spec, sizes, rng))
    for sub, opset, exporter in VARIANTS:
        d = os.path.join(HERE, spec["name"], sub)
        shutil.rmtree(d, ignore_errors=True)
        try:
            m = export(spec, model, sets[0], opset, exporter)
        except Exception as e:  # the exporter cannot: no directory, said here
            print("%-22s %-6s the exporter fails: %s" % (spec["name"], sub, str(e).splitlines()[0][:100]))
            continue
        try:
            write_variant(spec, model, sets, sub, m, d)
        except Exception as e:  # the export is wrong at another shape: no directory, said here
            shutil.rmtree(d, ignore_errors=True)
            print("%-22s %-6s the export is wrong: %s" % (spec["name"], sub, str(e).strip().splitlines()[0][:100]))
            continue
        ops = sorted({n.op_type for n in m.graph.node})
        print("%-22s %-6s %3d nodes  %s" % (spec["name"], sub, len(m.graph.node), " ".join(ops)))


def main(argv):
    if argv[:1] == ["--list"]:
        for c in CASES:
            print(c["name"])
        return 0
    names = {c["name"] for c in CASES}
    for a in argv:
        if a not in names:
            sys.exit("gen_zoo.py: no case %s (--list lists them)" % a)
    for spec in CASES:
        if not argv or spec["name"] in argv:
            write(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
