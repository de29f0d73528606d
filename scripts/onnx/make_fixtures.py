#!/usr/bin/env python3
"""Regenerates the ONNX importer's test fixtures in test/Import/Onnx/Inputs/.

Run through scripts/onnx/make-fixtures.sh, which provides a Python that has
onnx, onnxruntime and numpy (pinned, in .venv-onnx/) and can import torch
2.15.0 (from .venv-compare/).

Every file is made from fixed seeds. The fixtures are read by libonnx 1.12
(Debian's), so each valid model is written with IR version 8 and opset 17 and
checked with onnx.checker (full_check) here; pass --checker PATH to also run a
program built against libonnx 1.12 on each file and print what it says.

Valid models (exported with PyTorch's TorchScript exporter, opset 17):
  mlp.onnx          x [8, 784] -> fc1 relu1 fc2 relu2 fc3 -> logits [8, 10]
  cnn.onnx          x [4, 1, 28, 28] -> conv/bn/relu/maxpool/conv/bn/relu/
                    global avg pool/flatten/fc -> logits [4, 10]
  transformer.onnx  ids [2, 16] int64 -> 2 pre-LayerNorm blocks -> logits
                    [2, 16, 96]: a causal language model on the character
                    vocabulary of gpipe's text training, so that gpipe-run
                    trains it on a corpus
  gelu-tanh.onnx    x [4, 16] -> fc1, GELU (tanh formula), fc2 -> logits [4, 10]
  encoder-attention.onnx  x [2, 16, 32] -> one unmasked 4-head self-attention
  gemm-trans.onnx   one Gemm (transB=1, alpha=0.5, beta=2), built by hand
With, for each, <name>.input_0.pb and <name>.output_0.pb (TensorProto; the
output computed by onnxruntime, or by numpy for gemm-trans, and compared with
PyTorch's own forward) and <name>.initializers.txt.

Error fixtures: not-onnx.onnx, truncated.onnx, unknown-op.onnx, unknown-ops.onnx,
dynamic-shape.onnx, opset22.onnx, stray-mul.onnx, gelu-unhalved.onnx,
attention-scale.onnx, ir-version11.onnx, constant-outputs.onnx,
constant-outputs-opset17.onnx, sequence-at-identity.onnx,
sequence-at-computed.onnx, split-num-outputs.onnx, batch-moved.onnx,
output-batch-moved.onnx, reshape-splits-batch.onnx, reshape-cuts-across.onnx,
dense-over-batch.onnx (see README.md beside them).
"""

import argparse
import hashlib
import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import torch
from torch import nn

OPSET = 17
IR_VERSION = 8
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(ROOT, "test", "Import", "Onnx", "Inputs")
PRODUCER = "gpipe scripts/onnx/make_fixtures.py"


# --- PyTorch models ----------------------------------------------------------

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 64)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(64, 64)
        self.relu2 = nn.ReLU()
        self.fc3 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc3(self.relu2(self.fc2(self.relu1(self.fc1(x)))))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.relu2 = nn.ReLU()
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(self.relu1(self.bn1(self.conv1(x))))
        x = self.relu2(self.bn2(self.conv2(x)))
        return self.fc(self.flatten(self.gap(x)))


class SelfAttention(nn.Module):
    def __init__(self, dim, heads, seq=16, causal=False):
        super().__init__()
        self.causal = causal
        if causal:  # GPT-style: a lower-triangular buffer, masked_fill with -inf
            self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))
        self.heads = heads
        self.head_dim = dim // heads
        self.scale = 1.0 / float(self.head_dim) ** 0.5
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        # [b, t, c] -> [b, heads, t, head_dim]
        q = self.q(x).reshape(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).reshape(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = self.v(x).reshape(b, t, self.heads, self.head_dim).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        if self.causal:
            att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, c)
        return self.proj(y)


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads, causal=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = FeedForward(dim, hidden)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Transformer(nn.Module):
    def __init__(self, vocab=96, seq=16, dim=32, heads=4, hidden=64, layers=2):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, dim)
        self.pos_emb = nn.Parameter(0.1 * torch.randn(seq, dim))
        self.blocks = nn.ModuleList(Block(dim, heads, hidden) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.tok_emb(tokens) + self.pos_emb
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def randomize_norms(model, gen):
    """Non-trivial LayerNorm/BatchNorm affine parameters and running stats."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
                m.weight.copy_(1.0 + 0.2 * torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=gen))
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(0.5 * torch.randn(m.running_mean.shape, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=gen))


# --- helpers -----------------------------------------------------------------

def log(msg):
    print(msg, flush=True)


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def save_tensor(path, array, name):
    write_bytes(path, numpy_helper.from_array(np.ascontiguousarray(array), name).SerializeToString())


def check_valid(path):
    model = onnx.load(path)
    assert model.ir_version <= IR_VERSION, (path, model.ir_version)
    for o in model.opset_import:
        assert o.domain in ("", "ai.onnx") and o.version <= OPSET, (path, o)
    onnx.checker.check_model(model, full_check=True)
    return model


def write_initializers_txt(model, path):
    users = {}
    for node in model.graph.node:
        for i in node.input:
            users.setdefault(i, []).append(node.name)
    lines = []
    for init in model.graph.initializer:
        a = numpy_helper.to_array(init)
        dtype = TensorProto.DataType.Name(init.data_type).lower()
        dims = "[" + ", ".join(str(d) for d in init.dims) + "]"
        flat = a.reshape(-1)[:4]
        if a.dtype.kind == "f":
            vals = " ".join("%.9g" % float(v) for v in flat)
        else:
            vals = " ".join(str(int(v)) for v in flat)
        used = ",".join(users.get(init.name, [])) or "-"
        lines.append(f"{init.name} {dtype} {dims} {vals}  # used by {used}")
    with open(path, "w") as f:
        f.write("# name dtype [dims] first 4 values (%.9g, row-major)  # used by node(s)\n")
        f.write("\n".join(lines) + "\n")


def run_ort(path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    # The reference is the plain graph, op by op: no fused kernels.
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def export_torch(name, model, example, out_dir, input_name, do_constant_folding=True):
    """Exports with the TorchScript exporter, writes the reference tensors and
    returns max |onnxruntime - PyTorch|."""
    path = os.path.join(out_dir, f"{name}.onnx")
    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (example,), path,
            dynamo=False,
            opset_version=OPSET,
            input_names=[input_name],
            output_names=["logits"],
            do_constant_folding=do_constant_folding,
        )
    proto = onnx.load(path)
    if proto.ir_version > IR_VERSION:  # not the case with torch 2.15's exporter
        proto.ir_version = IR_VERSION
        onnx.save(proto, path)
    proto = check_valid(path)
    with torch.no_grad():
        expected = model(example).numpy()
    x = example.numpy()
    (got,) = run_ort(path, {input_name: x})
    assert got.shape == expected.shape and got.dtype == np.float32, (got.shape, got.dtype)
    diff = float(np.max(np.abs(got - expected)))
    save_tensor(os.path.join(out_dir, f"{name}.input_0.pb"), x, input_name)
    save_tensor(os.path.join(out_dir, f"{name}.output_0.pb"), got, proto.graph.output[0].name)
    write_initializers_txt(proto, os.path.join(out_dir, f"{name}.initializers.txt"))
    log(f"{name}.onnx: {len(proto.graph.node)} nodes, {len(proto.graph.initializer)} initializers, "
        f"output {list(got.shape)}; max |onnxruntime - pytorch| = {diff:.3g}")
    return diff


def tiny_model(nodes, inputs, outputs, initializers=(), opset=OPSET, name="g"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name=PRODUCER)
    model.ir_version = IR_VERSION
    return model


def save_model(model, path, valid=True):
    write_bytes(path, model.SerializeToString())
    if valid:
        check_valid(path)


# --- fixtures ----------------------------------------------------------------

def make_mlp(out_dir):
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(8, 784, generator=torch.Generator().manual_seed(100))
    return export_torch("mlp", model, x, out_dir, "x")


def make_cnn(out_dir):
    torch.manual_seed(1)
    model = CNN()
    randomize_norms(model, torch.Generator().manual_seed(201))
    x = torch.randn(4, 1, 28, 28, generator=torch.Generator().manual_seed(101))
    # No constant folding: in eval mode it would fold BatchNormalization into Conv.
    return export_torch("cnn", model, x, out_dir, "x", do_constant_folding=False)


def make_transformer(out_dir):
    torch.manual_seed(2)
    model = Transformer()
    randomize_norms(model, torch.Generator().manual_seed(202))
    ids = torch.randint(0, 96, (2, 16), generator=torch.Generator().manual_seed(102),
                        dtype=torch.int64)
    return export_torch("transformer", model, ids, out_dir, "ids")


def make_encoder_attention(out_dir):
    torch.manual_seed(6)
    model = SelfAttention(32, 4)
    x = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(106))
    return export_torch("encoder-attention", model, x, out_dir, "x")


def make_gelu_tanh(out_dir):
    torch.manual_seed(4)
    model = nn.Sequential()
    model.add_module("fc1", nn.Linear(16, 32))
    model.add_module("act", nn.GELU(approximate="tanh"))
    model.add_module("fc2", nn.Linear(32, 10))
    x = 2.0 * torch.randn(4, 16, generator=torch.Generator().manual_seed(104))
    return export_torch("gelu-tanh", model, x, out_dir, "x")


def make_gemm_trans(out_dir):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    c = rng.standard_normal((4,)).astype(np.float32)
    alpha, beta = np.float32(0.5), np.float32(2.0)
    node = helper.make_node("Gemm", ["A", "B", "C"], ["Y"], name="/fc/Gemm",
                            alpha=float(alpha), beta=float(beta), transA=0, transB=1)
    model = tiny_model(
        [node],
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, [3, 5])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(b, "B"), numpy_helper.from_array(c, "C")],
        name="gemm_trans")
    path = os.path.join(out_dir, "gemm-trans.onnx")
    save_model(model, path)
    y = (alpha * (a @ b.T) + beta * c).astype(np.float32)
    (got,) = run_ort(path, {"A": a})
    diff = float(np.max(np.abs(got - y)))
    save_tensor(os.path.join(out_dir, "gemm-trans.input_0.pb"), a, "A")
    save_tensor(os.path.join(out_dir, "gemm-trans.output_0.pb"), y, "Y")
    write_initializers_txt(model, os.path.join(out_dir, "gemm-trans.initializers.txt"))
    log(f"gemm-trans.onnx: Y = 0.5 * A @ B.T + 2 * C by numpy; max |onnxruntime - numpy| = {diff:.3g}")
    return diff


def make_residual(out_dir):
    """A residual connection across layers: /res/Add adds fc1's output, two
    layers back, to fc2's. Reference: numpy, checked against onnxruntime."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w = {
        "fc1.weight": rng.standard_normal((16, 8)).astype(np.float32) * 0.3,
        "fc1.bias": rng.standard_normal((16,)).astype(np.float32) * 0.1,
        "fc2.weight": rng.standard_normal((16, 16)).astype(np.float32) * 0.3,
        "fc2.bias": rng.standard_normal((16,)).astype(np.float32) * 0.1,
        "head.weight": rng.standard_normal((4, 16)).astype(np.float32) * 0.3,
        "head.bias": rng.standard_normal((4,)).astype(np.float32) * 0.1,
    }
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h1"],
                         name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h1"], ["a"], name="/act/Relu"),
        helper.make_node("Gemm", ["a", "fc2.weight", "fc2.bias"], ["h2"],
                         name="/fc2/Gemm", transB=1),
        helper.make_node("Add", ["h1", "h2"], ["r"], name="/res/Add"),
        helper.make_node("Gemm", ["r", "head.weight", "head.bias"], ["y"],
                         name="/head/Gemm", transB=1),
    ]
    model = tiny_model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
        [numpy_helper.from_array(v, k) for k, v in w.items()],
        name="residual")
    path = os.path.join(out_dir, "residual.onnx")
    save_model(model, path)
    h1 = x @ w["fc1.weight"].T + w["fc1.bias"]
    h2 = np.maximum(h1, 0) @ w["fc2.weight"].T + w["fc2.bias"]
    y = ((h1 + h2) @ w["head.weight"].T + w["head.bias"]).astype(np.float32)
    (got,) = run_ort(path, {"x": x})
    diff = float(np.max(np.abs(got - y)))
    save_tensor(os.path.join(out_dir, "residual.input_0.pb"), x, "x")
    save_tensor(os.path.join(out_dir, "residual.output_0.pb"), y, "y")
    write_initializers_txt(model, os.path.join(out_dir, "residual.initializers.txt"))
    log(f"residual.onnx: a skip connection over two layers; max |onnxruntime - numpy| = {diff:.3g}")
    return diff


def make_error_fixtures(out_dir):
    write_bytes(os.path.join(out_dir, "not-onnx.onnx"), b"this is not an ONNX model\n")

    with open(os.path.join(out_dir, "mlp.onnx"), "rb") as f:
        mlp = f.read()
    write_bytes(os.path.join(out_dir, "truncated.onnx"), mlp[: len(mlp) // 2])

    save_model(tiny_model(
        [helper.make_node("Relu", ["x"], ["/relu/Relu_output_0"], name="/relu/Relu"),
         helper.make_node("Hardmax", ["/relu/Relu_output_0"], ["y"], name="/head/Hardmax", axis=-1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        name="unknown_op"), os.path.join(out_dir, "unknown-op.onnx"))

    save_model(tiny_model(  # four nodes of three op types gpipe does not map
        [helper.make_node("Relu", ["x"], ["r"], name="/relu/Relu"),
         helper.make_node("Hardmax", ["r"], ["h"], name="/head/Hardmax", axis=-1),
         helper.make_node("LpNormalization", ["h"], ["n"], name="/norm/LpNormalization"),
         helper.make_node("Round", ["n"], ["o"], name="/round/Round"),
         helper.make_node("Hardmax", ["o"], ["y"], name="/head2/Hardmax", axis=-1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        name="unknown_ops"), os.path.join(out_dir, "unknown-ops.onnx"))

    save_model(tiny_model(
        [helper.make_node("Relu", ["x"], ["/relu/Relu_output_0"], name="/relu/Relu"),
         helper.make_node("Softmax", ["/relu/Relu_output_0"], ["y"], name="/head/Softmax",
                          axis=-1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])],
        name="dynamic_shape"), os.path.join(out_dir, "dynamic-shape.onnx"))

    # Opset 22 is newer than the importer reads (up to 21); onnx's own (newer)
    # checker accepts it.
    save_model(tiny_model(
        [helper.make_node("Relu", ["x"], ["y"], name="/relu/Relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        opset=22, name="opset22"), os.path.join(out_dir, "opset22.onnx"), valid=False)
    onnx.checker.check_model(onnx.load(os.path.join(out_dir, "opset22.onnx")), full_check=True)
    # General ops outside the subgraphs the importer recognises (they were
    # errors before the general ops; now they import as such).
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    save_model(tiny_model(
        [helper.make_node("Mul", ["x", "two"], ["y"], name="/scale/Mul")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [two], name="stray_mul"), os.path.join(out_dir, "stray-mul.onnx"))
    consts = [helper.make_tensor("sqrt2", TensorProto.FLOAT, [], [2.0 ** 0.5]),
              helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])]
    save_model(tiny_model(  # GELU's Erf formula without its final halving
        [helper.make_node("Div", ["x", "sqrt2"], ["d"], name="/act/Div"),
         helper.make_node("Erf", ["d"], ["e"], name="/act/Erf"),
         helper.make_node("Add", ["e", "one"], ["a"], name="/act/Add"),
         helper.make_node("Mul", ["x", "a"], ["y"], name="/act/Mul")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        consts, name="gelu_unhalved"), os.path.join(out_dir, "gelu-unhalved.onnx"))

    # A constant expanded to 2^50 elements: the folder refuses it by its size
    # before it allocates anything (found by FuzzOnnxImport).
    huge = helper.make_tensor("huge", TensorProto.INT64, [2], [1 << 30, 1 << 20])
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    save_model(tiny_model(
        [helper.make_node("Expand", ["one", "huge"], ["e"], name="/mask/Expand"),
         helper.make_node("Add", ["x", "x"], ["y"], name="/out/Add")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [huge, one], name="expand_huge"), os.path.join(out_dir, "expand-huge.onnx"))

    # A Range of about 1e30 elements and one from infinite bounds: refused
    # before the count is converted to int64 (FuzzOnnxImport found UBSan's
    # float-cast-overflow there).
    for name, start, limit in (("range-huge", 0.0, 1e30),
                               ("range-infinite", float("inf"), float("inf"))):
        bounds = [helper.make_tensor("start", TensorProto.FLOAT, [], [start]),
                  helper.make_tensor("limit", TensorProto.FLOAT, [], [limit]),
                  helper.make_tensor("delta", TensorProto.FLOAT, [], [1.0])]
        save_model(tiny_model(
            [helper.make_node("Range", ["start", "limit", "delta"], ["r"], name="/pos/Range"),
             helper.make_node("Add", ["x", "x"], ["y"], name="/out/Add")],
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
            bounds, name=name.replace("-", "_")), os.path.join(out_dir, name + ".onnx"))

    # Errors of the general ops: a weight two layers read in different
    # layouts (a Gemm's transposed B, a MatMul's B), a Slice with a negative
    # step, a Reshape to a shape computed from an input.
    wt = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [float(i) for i in range(16)])
    save_model(tiny_model(
        [helper.make_node("Gemm", ["x", "w"], ["h"], name="/a/Gemm", transB=1),
         helper.make_node("MatMul", ["h", "w"], ["y"], name="/b/MatMul")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [wt], name="tied_layouts"), os.path.join(out_dir, "tied-layouts.onnx"))
    slice_consts = [helper.make_tensor(name, TensorProto.INT64, [1], [v])
                    for name, v in (("starts", -1), ("ends", -5), ("axes", 1), ("steps", -1))]
    save_model(tiny_model(
        [helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"],
                          name="/flip/Slice")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        slice_consts, name="slice_backwards"), os.path.join(out_dir, "slice-backwards.onnx"))
    save_model(tiny_model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="/view/Reshape")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        name="reshape_computed"), os.path.join(out_dir, "reshape-computed.onnx"))

    # A Softmax over a value whose batch a Transpose moved to dimension 1:
    # Transposes, Reshapes, element-wise ops and dense layers read such a
    # value as gpipe holds it, a Softmax needs the batch in front.
    save_model(tiny_model(
        [helper.make_node("Transpose", ["x"], ["/attn/Transpose_output_0"],
                          name="/attn/Transpose", perm=[1, 0, 2]),
         helper.make_node("Softmax", ["/attn/Transpose_output_0"], ["/attn/Softmax_output_0"],
                          name="/attn/Softmax", axis=-1),
         helper.make_node("Transpose", ["/attn/Softmax_output_0"], ["y"],
                          name="/attn/Transpose_1", perm=[1, 0, 2])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 8])],
        name="batch_moved"), os.path.join(out_dir, "batch-moved.onnx"))

    # More refusals of a moved batch: a graph output with the batch in
    # dimension 1, a Reshape that splits the batch, one that cuts across the
    # held dimensions, and a dense layer over a last dimension that is the
    # batch.
    def moved(name, x_shape, nodes, y_shape, initializers=()):
        save_model(tiny_model(
            nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
            initializers, name=name.replace("-", "_")), os.path.join(out_dir, name + ".onnx"))

    def shape(name, dims):
        return helper.make_tensor(name, TensorProto.INT64, [len(dims)], dims)

    moved("output-batch-moved", [2, 4, 8],
          [helper.make_node("Transpose", ["x"], ["y"], name="/t/Transpose", perm=[1, 0, 2])],
          [4, 2, 8])
    moved("reshape-splits-batch", [4, 3, 8],
          [helper.make_node("Transpose", ["x"], ["t"], name="/t/Transpose", perm=[1, 0, 2]),
           helper.make_node("Reshape", ["t", "s"], ["r"], name="/t/Reshape"),
           helper.make_node("Reshape", ["r", "back"], ["b"], name="/t/Reshape_1"),
           helper.make_node("Transpose", ["b"], ["y"], name="/t/Transpose_1", perm=[1, 0, 2])],
          [4, 3, 8], [shape("s", [3, 2, 2, 8]), shape("back", [3, 4, 8])])
    moved("reshape-cuts-across", [2, 6, 4],
          [helper.make_node("Transpose", ["x"], ["t"], name="/t/Transpose", perm=[1, 0, 2]),
           helper.make_node("Reshape", ["t", "s"], ["r"], name="/t/Reshape"),
           helper.make_node("Reshape", ["r", "back"], ["b"], name="/t/Reshape_1"),
           helper.make_node("Transpose", ["b"], ["y"], name="/t/Transpose_1", perm=[1, 0, 2])],
          [2, 6, 4], [shape("s", [4, 3, 4]), shape("back", [6, 2, 4])])
    moved("dense-over-batch", [2, 4, 8],
          [helper.make_node("Transpose", ["x"], ["t"], name="/t/Transpose", perm=[1, 2, 0]),
           helper.make_node("MatMul", ["t", "w"], ["m"], name="/t/MatMul"),
           helper.make_node("Transpose", ["m"], ["y"], name="/t/Transpose_1", perm=[2, 0, 1])],
          [3, 4, 8], [numpy_helper.from_array(
              np.arange(6, dtype=np.float32).reshape(2, 3) / 8, "w")])

    # Refusals of the importer's own checks. IR version 11 is newer than the
    # importer reads (up to 10); onnx's own (newer) checker accepts it. The
    # others are opset 18, which libonnx 1.12 does not check (at opset 17 its
    # checker refuses a Constant of two outputs first, with its own message).
    ir11 = tiny_model(
        [helper.make_node("Relu", ["x"], ["y"], name="/relu/Relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        name="ir_version11")
    ir11.ir_version = 11
    save_model(ir11, os.path.join(out_dir, "ir-version11.onnx"), valid=False)
    onnx.checker.check_model(onnx.load(os.path.join(out_dir, "ir-version11.onnx")), full_check=True)
    for opset, name in ((18, "constant-outputs.onnx"), (17, "constant-outputs-opset17.onnx")):
        # A Constant of two outputs (onnx's checker refuses it: not checked here).
        save_model(tiny_model(
            [helper.make_node("Constant", [], ["two", "two_again"], name="/scale/Constant",
                              value=helper.make_tensor("value", TensorProto.FLOAT, [], [2.0])),
             helper.make_node("Mul", ["x", "two"], ["y"], name="/scale/Mul")],
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
            opset=opset, name="constant_outputs"), os.path.join(out_dir, name), valid=False)
    chunk = helper.make_tensor("chunk", TensorProto.INT64, [], [2])
    first = helper.make_tensor("first", TensorProto.INT64, [], [0])
    save_model(tiny_model(  # SequenceAt of an Identity of a SplitToSequence's sequence
        [helper.make_node("SplitToSequence", ["x", "chunk"], ["parts"],
                          name="/chunk/SplitToSequence", axis=1),
         helper.make_node("Identity", ["parts"], ["parts_copy"], name="/chunk/Identity"),
         helper.make_node("SequenceAt", ["parts_copy", "first"], ["y"],
                          name="/chunk/SequenceAt")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        [chunk, first], opset=18, name="sequence_at_identity"),
        os.path.join(out_dir, "sequence-at-identity.onnx"), valid=False)
    save_model(tiny_model(  # SequenceAt at a position computed from the input p
        [helper.make_node("SplitToSequence", ["x", "chunk"], ["parts"],
                          name="/chunk/SplitToSequence", axis=1),
         helper.make_node("ReduceMax", ["p"], ["at"], name="/pick/ReduceMax", keepdims=0),
         helper.make_node("SequenceAt", ["parts", "at"], ["y"], name="/chunk/SequenceAt")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("p", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        [chunk], opset=18, name="sequence_at_computed"),
        os.path.join(out_dir, "sequence-at-computed.onnx"), valid=False)
    save_model(tiny_model(  # num_outputs = 3 on a Split of two outputs
        [helper.make_node("Split", ["x"], ["left", "right"], name="/halves/Split",
                          axis=1, num_outputs=3),
         helper.make_node("Add", ["left", "right"], ["y"], name="/halves/Add")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        opset=18, name="split_num_outputs"),
        os.path.join(out_dir, "split-num-outputs.onnx"), valid=False)
    halves = helper.make_tensor("halves", TensorProto.INT64, [2], [2, 2])
    save_model(tiny_model(  # a split input and num_outputs both (ONNX allows one)
        [helper.make_node("Split", ["x", "halves"], ["left", "right"], name="/halves/Split",
                          axis=1, num_outputs=2),
         helper.make_node("Add", ["left", "right"], ["y"], name="/halves/Add")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        [halves], opset=18, name="split_sizes_and_num_outputs"),
        os.path.join(out_dir, "split-sizes-and-num-outputs.onnx"), valid=False)
    huge = helper.make_tensor("huge", TensorProto.INT64, [4], [2**62, 2**62, 2**62, 2**62 + 4])
    save_model(tiny_model(  # sizes whose int64 sum wraps around to 4, the extent
        [helper.make_node("SplitToSequence", ["x", "huge"], ["parts"],
                          name="/chunk/SplitToSequence", axis=1),
         helper.make_node("SequenceAt", ["parts", "first"], ["y"], name="/chunk/SequenceAt")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        [huge, first], opset=18, name="sequence_sizes_wrap"),
        os.path.join(out_dir, "sequence-sizes-wrap.onnx"), valid=False)
    for name in ("sequence-at-identity.onnx", "sequence-at-computed.onnx",
                 "split-num-outputs.onnx"):  # onnx's own checker accepts them
        onnx.checker.check_model(onnx.load(os.path.join(out_dir, name)), full_check=True)
    no_version = tiny_model(  # IR version -1: a damaged header
        [helper.make_node("Relu", ["x"], ["y"], name="/relu/Relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        name="ir_version_negative")
    no_version.ir_version = -1
    save_model(no_version, os.path.join(out_dir, "ir-version-negative.onnx"), valid=False)

    # Two parameters PyTorch's exporter merged (eval mode, equal values): the
    # second layer reads the first's initializer through an Identity named
    # after its own parameter.
    w = helper.make_tensor("a.weight", TensorProto.FLOAT, [4], [1.0, 1.0, 1.0, 1.0])
    save_model(tiny_model(
        [helper.make_node("Identity", ["a.weight"], ["b.weight"], name="/b/Identity"),
         helper.make_node("Mul", ["x", "a.weight"], ["h"], name="/a/Mul"),
         helper.make_node("Mul", ["h", "b.weight"], ["y"], name="/b/Mul")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [w], name="merged_parameters"), os.path.join(out_dir, "merged-parameters.onnx"))

    # Attention whose scores are scaled by 1 instead of 1/sqrt(head_dim).
    torch.manual_seed(5)
    attention = SelfAttention(32, 4)
    attention.scale = 1.0
    x = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(105))
    export_torch("attention-scale", attention, x, out_dir, "x")
    for suffix in (".input_0.pb", ".output_0.pb", ".initializers.txt"):
        os.remove(os.path.join(out_dir, "attention-scale" + suffix))
    log("error fixtures: not-onnx, truncated, unknown-op, dynamic-shape, opset22, stray-mul, "
        "gelu-unhalved, attention-scale, ir-version11, constant-outputs(-opset17), "
        "sequence-at-identity, sequence-at-computed, split-num-outputs, batch-moved, "
        "output-batch-moved, reshape-splits-batch, reshape-cuts-across, dense-over-batch")


FIXTURES = [
    "mlp.onnx", "mlp.input_0.pb", "mlp.output_0.pb", "mlp.initializers.txt",
    "cnn.onnx", "cnn.input_0.pb", "cnn.output_0.pb", "cnn.initializers.txt",
    "transformer.onnx", "transformer.input_0.pb", "transformer.output_0.pb",
    "transformer.initializers.txt",
    "encoder-attention.onnx", "encoder-attention.input_0.pb", "encoder-attention.output_0.pb",
    "encoder-attention.initializers.txt",
    "gelu-tanh.onnx", "gelu-tanh.input_0.pb", "gelu-tanh.output_0.pb",
    "gelu-tanh.initializers.txt",
    "gemm-trans.onnx", "gemm-trans.input_0.pb", "gemm-trans.output_0.pb",
    "gemm-trans.initializers.txt",
    "residual.onnx", "residual.input_0.pb", "residual.output_0.pb",
    "residual.initializers.txt",
    "not-onnx.onnx", "truncated.onnx", "unknown-op.onnx", "unknown-ops.onnx",
    "dynamic-shape.onnx", "opset22.onnx", "stray-mul.onnx", "gelu-unhalved.onnx", "attention-scale.onnx",
    "merged-parameters.onnx", "expand-huge.onnx", "range-huge.onnx", "range-infinite.onnx",
    "tied-layouts.onnx",
    "slice-backwards.onnx", "reshape-computed.onnx", "batch-moved.onnx",
    "output-batch-moved.onnx", "reshape-splits-batch.onnx", "reshape-cuts-across.onnx",
    "dense-over-batch.onnx",
    "ir-version11.onnx", "constant-outputs.onnx", "constant-outputs-opset17.onnx",
    "sequence-at-identity.onnx", "sequence-at-computed.onnx", "split-num-outputs.onnx",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    ap.add_argument("--checker", default=os.environ.get("GPIPE_ONNX_CHECKER", ""),
                    help="a program built against libonnx 1.12 to run on every .onnx file")
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="largest |onnxruntime - pytorch| accepted (default: %(default)s)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)
    log(f"torch {torch.__version__}, onnx {onnx.__version__}, onnxruntime {ort.__version__}, "
        f"numpy {np.__version__}")

    diffs = {
        "mlp": make_mlp(args.out),
        "cnn": make_cnn(args.out),
        "transformer": make_transformer(args.out),
        "gelu-tanh": make_gelu_tanh(args.out),
        "encoder-attention": make_encoder_attention(args.out),
        "gemm-trans": make_gemm_trans(args.out),
        "residual": make_residual(args.out),
    }
    make_error_fixtures(args.out)

    total = 0
    for f in FIXTURES:
        p = os.path.join(args.out, f)
        with open(p, "rb") as fh:
            data = fh.read()
        total += len(data)
        log(f"  {len(data):8d}  {hashlib.sha256(data).hexdigest()[:16]}  {f}")
    log(f"  {total:8d}  total")

    if args.checker:
        for f in FIXTURES:
            if f.endswith(".onnx"):
                r = subprocess.run([args.checker, os.path.join(args.out, f)],
                                   capture_output=True, text=True)
                log(f"--- {args.checker} {f} (exit {r.returncode})")
                sys.stdout.write(r.stderr + r.stdout)

    bad = {k: v for k, v in diffs.items() if not v <= args.tolerance}
    if bad:
        sys.exit(f"make_fixtures.py: onnxruntime and the reference differ by more than "
                 f"{args.tolerance}: {bad}")


if __name__ == "__main__":
    main()
