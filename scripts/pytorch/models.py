"""The MLP and Transformer of python-free-examples/ rewritten in PyTorch, op for
op, so scripts/compare-pytorch.sh times the same arithmetic in both frameworks.

Each model is an nn.Sequential whose children are the .mlir's gpipe.layer
blocks (its "loss" layer is model.loss), so splitting at a child index is a
cut at a layer boundary, as gpipe's partitioner makes. Weights are kept as
nn.Linear ([out, in]); glorot-uniform's bound is symmetric in fan-in and
fan-out, so the initial distribution is the .mlir's [in, out] one.

`python3 models.py` counts both models' parameters here and in the .mlir
(every gpipe.param's tensor type) and exits 1 if they differ.
"""
import math
import re
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
MLIR = {
    "mlp": ROOT / "python-free-examples/mlp/mlp.mlir",
    "transformer": ROOT / "python-free-examples/transformer/transformer.mlir",
}


def dense(n_in, n_out, bias=True):
    """gpipe.dense with glorot_uniform weights and zero bias."""
    layer = nn.Linear(n_in, n_out, bias=bias)
    nn.init.xavier_uniform_(layer.weight)
    if bias:
        nn.init.zeros_(layer.bias)
    return layer


# --- MLP: 784 -> 8 x (dense 512 + relu) -> dense 10, mean softmax CE -------
class MLP(nn.Sequential):
    cut = 4  # 2 stages: fc1-fc4 | fc5-fc9 (fc1 is 784 wide: ~1.19 : 1.05 MFLOP a row)

    def __init__(self, n_in=784, width=512, hidden=8, classes=10):
        widths = [n_in] + [width] * hidden
        layers = [nn.Sequential(dense(a, b), nn.ReLU()) for a, b in zip(widths, widths[1:])]
        super().__init__(*layers, dense(width, classes))

    @staticmethod
    def loss(logits, labels):
        return F.cross_entropy(logits, labels)

    @staticmethod
    def batch(size, gen):
        return torch.randn(size, 784, generator=gen), torch.randint(0, 10, (size,), generator=gen)


# --- Transformer: decoder-only, pre-norm, 4 blocks of attention + GELU MLP ---
class Embed(nn.Module):
    """Token plus position embeddings, both normal(0, 0.02). The .mlir gathers
    positions from an input holding 0..S-1; adding the first S rows is the same."""

    def __init__(self, vocab, seq, width):
        super().__init__()
        self.tokens = nn.Parameter(torch.randn(vocab, width) * 0.02)
        self.positions = nn.Parameter(torch.randn(seq, width) * 0.02)

    def forward(self, ids):
        return F.embedding(ids, self.tokens) + self.positions[: ids.shape[1]]


class Attention(nn.Module):
    """x + dropout(attention(layer_norm(x))) as gpipe.attention computes it: one
    bias-free [D, 3D] projection to q|k|v (head h owns columns h*dh..), scores
    q.k / sqrt(dh) with a causal mask, softmax, bias-free [D, D] output
    projection. Written out rather than F.scaled_dot_product_attention so the
    work is the .mlir's."""

    def __init__(self, width, heads, seq, dropout):
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(width, eps=1e-5)
        self.qkv = dense(width, 3 * width, bias=False)
        self.out = dense(width, width, bias=False)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("future", torch.ones(seq, seq, dtype=torch.bool).triu(1), persistent=False)

    def forward(self, x):
        b, s, d = x.shape
        dh = d // self.heads
        q, k, v = (t.view(b, s, self.heads, dh).transpose(1, 2)
                   for t in self.qkv(self.ln(x)).split(d, dim=-1))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))
        probs = scores.masked_fill(self.future[:s, :s], float("-inf")).softmax(dim=-1)
        context = (probs @ v).transpose(1, 2).reshape(b, s, d)
        return x + self.drop(self.out(context))


class FeedForward(nn.Module):
    """x + dropout(fc2(gelu_tanh(fc1(layer_norm(x))))), 4x wide, with biases."""

    def __init__(self, width, dropout):
        super().__init__()
        self.ln = nn.LayerNorm(width, eps=1e-5)
        self.fc1 = dense(width, 4 * width)
        self.fc2 = dense(4 * width, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln(x)), approximate="tanh")))


class Transformer(nn.Sequential):
    cut = 5  # 2 stages: embed + blocks 0-1 | blocks 2-3 + head
    SEQ, VOCAB = 32, 96

    def __init__(self, width=64, heads=4, blocks=4, dropout=0.1):
        layers = [Embed(self.VOCAB, self.SEQ, width)]
        for _ in range(blocks):
            layers += [Attention(width, heads, self.SEQ, dropout), FeedForward(width, dropout)]
        # "head": final layer norm and a bias-free, untied projection to the vocabulary.
        layers.append(nn.Sequential(nn.LayerNorm(width, eps=1e-5), dense(width, self.VOCAB, bias=False)))
        super().__init__(*layers)

    @staticmethod
    def loss(logits, targets):
        # Mean over every (sequence, position), as gpipe.softmax_cross_entropy.
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    @classmethod
    def batch(cls, size, gen):
        # Fixed random characters; a real next-char target changes no timing.
        ids = torch.randint(0, cls.VOCAB, (size, cls.SEQ), generator=gen)
        return ids, torch.randint(0, cls.VOCAB, (size, cls.SEQ), generator=gen)


MODELS = {"mlp": MLP, "transformer": Transformer}


def build(name, batch_size, seed=0):
    """The model (same weights on every process for a seed) and one fixed batch."""
    torch.manual_seed(seed)
    model = MODELS[name]()
    inputs, target = model.batch(batch_size, torch.Generator().manual_seed(seed + 1))
    return model, inputs, target


def halves(model):
    """The two pipeline stages: children before and after model.cut."""
    children = list(model.children())
    return nn.Sequential(*children[: model.cut]), nn.Sequential(*children[model.cut:])


def mlir_param_count(path):
    """Sums the element counts of every gpipe.param's tensor type."""
    total = 0
    for dims in re.findall(r"gpipe\.param .*: tensor<([0-9x]+)x?f32>", path.read_text()):
        total += math.prod(int(d) for d in dims.split("x") if d)
    return total


if __name__ == "__main__":
    ok = True
    for name, cls in MODELS.items():
        ours, theirs = sum(p.numel() for p in cls().parameters()), mlir_param_count(MLIR[name])
        print(f"{name}: {ours} parameters in PyTorch, {theirs} in {MLIR[name].relative_to(ROOT)}",
              file=sys.stderr)
        ok &= ours == theirs
    sys.exit(0 if ok else 1)
