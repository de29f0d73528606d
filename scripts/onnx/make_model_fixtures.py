#!/usr/bin/env python3
"""Builds tiny real-model ONNX fixtures in test/Import/Onnx/Inputs/models/.

Run through scripts/onnx/make-model-fixtures.sh, which installs the pinned
packages into .venv-compare/ (PyTorch 2.15.0 CPU, transformers, torchvision,
onnx, onnxruntime, onnxscript) and runs this file with that venv's Python.

Seven models, random-initialised from their own config classes with fixed
seeds, every dropout probability 0: gpt2, llama, bert, vit (transformers),
mobilenet_v2, resnet18 (torchvision, the latter at base width 8), and
transformer_encoder (torch.nn). For each <name>:
  <name>.onnx          TorchScript exporter (dynamo=False), opset 17, IR 8,
                       static shapes, without the exporter's constant folding
                       (it fuses BatchNorm and unties tied weights); then
                       value-merged parameters split again and subgraphs that
                       read no parameter folded here (see README.md)
  <name>.input_0.pb    the input TensorProto, named as the graph input
  <name>.output_0.pb   PyTorch's logits (eval mode, float32), named "logits"
  <name>.labels.pb     int64 labels, the logits' shape without its last dim
  <name>.losses.json   10 Adam steps on that batch: losses before each update,
                       in float32 and float64
  <name>.dynamo.onnx   the dynamo exporter's file, where it exports and is
                       small enough
and README.md, written by this script, describing all of them.

Every file is a function of the seeds and the package versions only; a rerun
with the same versions writes identical bytes (--check-determinism also runs
everything twice more into temporary folders and compares). With --checker
PATH (a program built against libonnx 1.12) README.md also lists its verdicts.
"""

import argparse
import contextlib
import copy
import filecmp
import hashlib
import io
import json
import os
import sys
import tempfile
import time
import warnings
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

import torch
import torch.nn.functional as F
from torch import nn
import torchvision
from torchvision.models.resnet import BasicBlock, ResNet

OPSET = 17
IR_VERSION = 8
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(ROOT, "test", "Import", "Onnx", "Inputs", "models")
STEPS = 10
ADAM = {"optimizer": "adam", "lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
        "weight_decay": 0.0}
REL_TOL = 1e-5          # onnxruntime vs PyTorch, relative to max |logits|
SIZE_LIMIT = 1 << 20    # bytes; a larger dynamo file is not kept
BATCH = 2
SEQ = 16
VOCAB = 96


def log(msg=""):
    print(msg, flush=True)


# --- models -------------------------------------------------------------------
#
# Each builder returns a dict: module (an nn.Module whose forward(x) returns the
# logits), x (the example input), input_name, classes, config (one line for the
# README), workaround (how it exports), batchnorm (True: trained in eval mode).

class HFLogits(nn.Module):
    """forward(ids) -> the transformers model's logits, nothing else.

    causal=True (gpt2, llama): an all-ones attention_mask built from the
    input's shape is passed. transformers 5.x computes, without a mask, whether
    the batch is "packed" from torch.diff of position ids, and the TorchScript
    exporter has no symbolic for aten::diff; with a mask it skips that, and the
    exported mask depends only on shapes and constants."""

    def __init__(self, hf, causal):
        super().__init__()
        self.hf = hf
        self.causal = causal

    def forward(self, ids):
        if self.causal:
            return self.hf(input_ids=ids, attention_mask=torch.ones_like(ids),
                           use_cache=False, return_dict=True).logits
        return self.hf(input_ids=ids, return_dict=True).logits


class ViTLogits(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, pixels):
        return self.hf(pixel_values=pixels, return_dict=True).logits


def ids_input(seed):
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(seed),
                         dtype=torch.int64)


def build_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=SEQ,
                     bos_token_id=None, eos_token_id=None, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, summary_first_dropout=0.0,
                     attn_implementation="eager")
    torch.manual_seed(10)
    hf = GPT2LMHeadModel(cfg)
    return dict(
        module=HFLogits(hf, causal=True), x=ids_input(110), input_name="input_ids", classes=VOCAB,
        config="GPT2LMHeadModel: n_layer 2, n_embd 32, n_head 4, vocab 96, n_positions 16, "
               "n_inner 128 (4*n_embd), gelu_new, all pdrop 0, tied wte/lm_head, eager attention",
        workaround="wrapper passes attention_mask=torch.ones_like(ids) (without it: aten::diff "
                   "unsupported), use_cache=False, attn_implementation=\"eager\"",
        batchnorm=False)


def build_llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=64, vocab_size=VOCAB,
                      max_position_embeddings=SEQ, tie_word_embeddings=True,
                      attention_dropout=0.0, attn_implementation="eager")
    torch.manual_seed(11)
    hf = LlamaForCausalLM(cfg)
    return dict(
        module=HFLogits(hf, causal=True), x=ids_input(111), input_name="input_ids", classes=VOCAB,
        config="LlamaForCausalLM: 2 layers, hidden 32, 4 heads (head_dim 8), 2 kv heads (GQA), "
               "intermediate 64 (SiLU gated), vocab 96, max_position_embeddings 16, RMSNorm eps "
               "1e-6, default rope (theta 10000), tied embed_tokens/lm_head, eager attention",
        workaround="wrapper passes attention_mask=torch.ones_like(ids) (without it: aten::diff "
                   "unsupported), use_cache=False, attn_implementation=\"eager\"",
        batchnorm=False)


def build_bert():
    from transformers import BertConfig, BertForSequenceClassification
    cfg = BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                     intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=SEQ,
                     num_labels=10, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     classifier_dropout=0.0, pad_token_id=None, attn_implementation="eager")
    torch.manual_seed(12)
    hf = BertForSequenceClassification(cfg)
    return dict(
        module=HFLogits(hf, causal=False), x=ids_input(112), input_name="input_ids", classes=10,
        config="BertForSequenceClassification: 2 layers, hidden 32, 4 heads, intermediate 64 "
               "(exact GELU), vocab 96, max_position_embeddings 16, type_vocab 2, 10 labels, "
               "pooler (tanh) on token 0, pad_token_id=None, eager attention",
        workaround="none needed (no attention_mask passed: the model builds none); "
                   "attn_implementation=\"eager\"; pad_token_id=None so the word embedding has "
                   "no padding_idx (its row 0 would otherwise get no gradient in PyTorch, which "
                   "the ONNX Gather cannot say)",
        batchnorm=False)


def build_vit():
    from transformers import ViTConfig, ViTForImageClassification
    cfg = ViTConfig(image_size=28, num_channels=1, patch_size=7, hidden_size=32,
                    num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                    num_labels=10, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                    attn_implementation="eager")
    torch.manual_seed(13)
    hf = ViTForImageClassification(cfg)
    x = torch.randn(BATCH, 1, 28, 28, generator=torch.Generator().manual_seed(113))
    return dict(
        module=ViTLogits(hf), x=x, input_name="pixel_values", classes=10,
        config="ViTForImageClassification: image 28, 1 channel, patch 7 (16 patches + CLS), "
               "hidden 32, 2 layers, 4 heads, intermediate 64 (exact GELU), 10 labels, "
               "no pooler, classifier on CLS, eager attention",
        workaround="none needed; attn_implementation=\"eager\"",
        batchnorm=False)


def calibrate_batchnorm(model, shape, seed, batches=4):
    """Sets every BatchNorm's running statistics to the exact mean/variance
    over a few random batches (train-mode forwards with momentum=None), so the
    inference-form BatchNormalization does more than x / sqrt(1 + eps)."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    gen = torch.Generator().manual_seed(seed)
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(*shape, generator=gen))
    for bn in bns:
        bn.momentum = 0.1
    model.eval()


def build_mobilenet_v2():
    torch.manual_seed(14)
    model = torchvision.models.mobilenet_v2(num_classes=10, width_mult=0.1, dropout=0.0)
    calibrate_batchnorm(model, (8, 3, 32, 32), 214)
    x = torch.randn(BATCH, 3, 32, 32, generator=torch.Generator().manual_seed(114))
    return dict(
        module=model, x=x, input_name="x", classes=10,
        config="torchvision.models.mobilenet_v2(num_classes=10, width_mult=0.1, dropout=0.0): "
               "17 inverted-residual blocks (channels 4..32), ReLU6, last conv 32->1280 (torchvision "
               "keeps 1280 for width_mult < 1), BatchNorm running stats calibrated on 4 random "
               "batches",
        workaround="none needed; width_mult 0.1 rather than 0.25 (0.25 is 1.1 MB); eval "
                   "mode, no constant folding (so BatchNormalization is not fused into Conv)",
        batchnorm=True)


class ResNet18Narrow(ResNet):
    """torchvision's ResNet-18 (its ResNet class, BasicBlock, [2, 2, 2, 2],
    _make_layer, forward and initialisation) with stage widths width, 2*width,
    4*width, 8*width instead of 64, 128, 256, 512, which ResNet.__init__
    fixes; the parameter names are resnet18's."""

    def __init__(self, width=8, num_classes=10):
        nn.Module.__init__(self)
        self._norm_layer = nn.BatchNorm2d
        self.inplanes = width
        self.dilation = 1
        self.groups = 1
        self.base_width = 64
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(BasicBlock, width, 2)
        self.layer2 = self._make_layer(BasicBlock, 2 * width, 2, stride=2)
        self.layer3 = self._make_layer(BasicBlock, 4 * width, 2, stride=2)
        self.layer4 = self._make_layer(BasicBlock, 8 * width, 2, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8 * width * BasicBlock.expansion, num_classes)
        for m in self.modules():  # as ResNet.__init__
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)


def build_resnet18():
    torch.manual_seed(15)
    model = ResNet18Narrow(width=8, num_classes=10)
    calibrate_batchnorm(model, (8, 3, 64, 64), 215)
    # 64x64: the last stage's BatchNorm then sees 2x2 pixels of each example,
    # and PyTorch's own training losses in float32 and float64 agree over all
    # 10 steps (at 32x32, over 1 pixel, they part after 2).
    x = torch.randn(BATCH, 3, 64, 64, generator=torch.Generator().manual_seed(115))
    return dict(
        module=model, x=x, input_name="x", classes=10,
        config="torchvision ResNet (BasicBlock, [2,2,2,2]) = ResNet-18 at stage widths "
               "8/16/32/64 (torchvision's are 64..512: 44 MB), 7x7/2 stem + maxpool, "
               "10 classes, torchvision's init, BatchNorm running stats calibrated on 4 random "
               "batches",
        workaround="none needed; the torchvision ResNet class with its stem and stage widths "
                   "divided by 8 (full width is 44 MB); eval mode, no constant folding (so "
                   "BatchNormalization is not fused into Conv)",
        batchnorm=True)


class TransformerEncoderClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(32, 10)

    def forward(self, ids):
        return self.head(self.encoder(self.embed(ids)))


def build_transformer_encoder():
    torch.manual_seed(16)
    model = TransformerEncoderClassifier()
    return dict(
        module=model, x=ids_input(116), input_name="ids", classes=10,
        config="nn.Embedding(96, 32) -> nn.TransformerEncoder(TransformerEncoderLayer(d_model 32, "
               "nhead 4, dim_feedforward 64, dropout 0, relu, post-norm, batch_first), 2 layers, "
               "enable_nested_tensor=False) -> nn.Linear(32, 10) per position; no mask",
        workaround="none needed (the reference and the training never take the fused fast "
                   "path: they run with gradients enabled)",
        batchnorm=False)


BUILDERS = {
    "gpt2": build_gpt2,
    "llama": build_llama,
    "bert": build_bert,
    "vit": build_vit,
    "mobilenet_v2": build_mobilenet_v2,
    "resnet18": build_resnet18,
    "transformer_encoder": build_transformer_encoder,
}


# --- helpers ------------------------------------------------------------------

def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def save_tensor(path, array, name):
    write_bytes(path, numpy_helper.from_array(np.ascontiguousarray(array), name).SerializeToString())


def op_counts(model):
    return sorted(Counter(n.op_type for n in model.graph.node).items())


def undo_value_dedup(model):
    """The TorchScript exporter in eval mode merges initializers with equal
    values (every LayerNorm weight is all ones at init) into one and feeds the
    others through Identity nodes named after the merged parameters. Those
    are distinct parameters for training: give each its own initializer back,
    under its own name, and drop the Identity. Returns the names restored."""
    inits = {i.name: i for i in model.graph.initializer}
    keep, restored = [], []
    for node in model.graph.node:
        if node.op_type == "Identity" and node.input[0] in inits and node.output[0] not in inits:
            t = onnx.TensorProto()
            t.CopyFrom(inits[node.input[0]])
            t.name = node.output[0]
            model.graph.initializer.append(t)
            restored.append(t.name)
        else:
            keep.append(node)
    del model.graph.node[:]
    model.graph.node.extend(keep)
    return restored


def fold_constants(model, frozen):
    """fold_constants_once until nothing more folds (a folded Reshape target
    makes more shapes static). Returns the number of nodes folded."""
    total = 0
    while True:
        n = fold_constants_once(model, frozen)
        if n == 0:
            return total
        total += n


def fold_constants_once(model, frozen):
    """Folds what depends on no trained parameter into Constant nodes.

    Without constant folding the TorchScript exporter leaves all of its shape
    arithmetic in the graph (Shape, Gather, Unsqueeze, Concat on Constants),
    and the attention masks, position ids and rotary tables as subgraphs; with
    PyTorch's own folding it would also fold parameters (see the README). Here
    a node is evaluated (onnx.reference) and replaced by a Constant node with
    the same output name when each of its inputs is a Constant, a folded
    value or a buffer (an initializer in `frozen`), or when it is a Shape of a
    value whose shape is static. Nodes that read a parameter are never folded.
    Initializers and Constants that are no longer used are dropped. Returns
    the number of nodes folded (Constant nodes are not counted)."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + \
            list(inferred.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if vi.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = [d.dim_value for d in dims]
    known = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer if i.name in frozen}
    opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")][0]

    folded = {}   # index of a folded node -> its outputs' values
    for idx, node in enumerate(model.graph.node):
        if node.op_type == "Constant":
            known[node.output[0]] = numpy_helper.to_array(node.attribute[0].t) \
                if node.attribute[0].name == "value" else None
            if known[node.output[0]] is None:
                del known[node.output[0]]
            continue
        values = None
        if node.op_type == "Shape" and node.input[0] in shapes:
            attrs = {a.name: a.i for a in node.attribute}
            shape = shapes[node.input[0]]
            start, end = attrs.get("start", 0), attrs.get("end", len(shape))
            values = [np.array(shape[start:end], dtype=np.int64)]
        elif all(i == "" or i in known for i in node.input) and node.input:
            ins = [i for i in node.input if i]
            graph = helper.make_graph(
                [node], "fold",
                [helper.make_tensor_value_info(
                    i, helper.np_dtype_to_tensor_dtype(known[i].dtype), known[i].shape)
                 for i in ins],
                [helper.make_empty_tensor_value_info(o) for o in node.output])
            single = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
            single.ir_version = model.ir_version
            values = ReferenceEvaluator(single).run(None, {i: known[i] for i in ins})
            values = [np.asarray(v) for v in values]
        if values is not None:
            for o, v in zip(node.output, values):
                known[o] = v
            folded[idx] = values

    # Rebuild: a folded node becomes Constant nodes for those of its outputs
    # that something still reads; then unused Constants and initializers go.
    nodes = []
    for idx, node in enumerate(model.graph.node):
        if idx in folded:
            for k, (o, v) in enumerate(zip(node.output, folded[idx])):
                nodes.append(helper.make_node(
                    "Constant", [], [o], name=node.name + ("_folded" if k == 0 else f"_folded{k}"),
                    value=numpy_helper.from_array(v, o)))
        else:
            nodes.append(node)
    graph_outputs = {o.name for o in model.graph.output}
    while True:
        used = set(graph_outputs)
        for node in nodes:
            used.update(i for i in node.input if i)
        keep = [n for n in nodes if any(o in used for o in n.output)]
        if len(keep) == len(nodes):
            break
        nodes = keep
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    inits = [i for i in model.graph.initializer if i.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(inits)
    names = {o for n in nodes for o in n.output} | {i.name for i in inits} | \
        {i.name for i in model.graph.input}
    vis = [vi for vi in model.graph.value_info if vi.name in names]
    del model.graph.value_info[:]
    model.graph.value_info.extend(vis)
    return len(folded)


def order_initializers(model, module):
    """Initializers in the module's state_dict order (parameters and buffers
    as PyTorch lists them), any others after, by name."""
    order = {n: i for i, n in enumerate(module.state_dict(keep_vars=True))}
    inits = sorted(model.graph.initializer, key=lambda t: (order.get(t.name, len(order)), t.name))
    inits = [copy.deepcopy(t) for t in inits]
    del model.graph.initializer[:]
    model.graph.initializer.extend(inits)


def ort_run(path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def rel_diff(got, ref):
    return float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64)))
                 / np.max(np.abs(ref.astype(np.float64))))


def cross_entropy(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def train_losses(module, x, labels, batchnorm, dtype):
    """Losses before each of STEPS Adam updates on one batch."""
    m = copy.deepcopy(module).to(dtype)
    x = x.to(dtype) if x.is_floating_point() else x
    # No dropout anywhere. BatchNorm normalizes by the batch's statistics and
    # updates its running ones, as gpipe's batch_norm trains (over the whole
    # batch at M = 1).
    m.train()
    opt = torch.optim.Adam(m.parameters(), lr=ADAM["lr"], betas=(ADAM["beta1"], ADAM["beta2"]),
                           eps=ADAM["eps"], weight_decay=ADAM["weight_decay"], foreach=False)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = cross_entropy(m(x), labels)
        losses.append(float(loss.item()))
        loss.backward()
        opt.step()
    return losses


def initializer_roles(module, model):
    """Which initializers are trained parameters and which are buffers
    (checked against the module's own names)."""
    # A tied parameter has several names (remove_duplicate=False lists them
    # all); an exporter names its initializer after one of them.
    params = dict(module.named_parameters(remove_duplicate=False))
    buffers = dict(module.named_buffers())
    trainable, frozen, other = [], [], []
    for init in model.graph.initializer:
        if init.name in params:
            trainable.append(init.name)
        elif init.name in buffers:
            frozen.append(init.name)
        else:
            other.append(init.name)
    covered = {id(params[n]) for n in trainable}
    missing = sorted(n for n, p in module.named_parameters() if id(p) not in covered)
    return trainable, frozen, other, missing


# --- one model ----------------------------------------------------------------

def make_model(name, out_dir, with_dynamo, info, fold=True):
    spec = BUILDERS[name]()
    module, x, input_name, classes = spec["module"], spec["x"], spec["input_name"], spec["classes"]
    module.eval()
    initial = copy.deepcopy(module)

    # Reference logits: eval mode, gradients enabled (as in the first training
    # step; nn.TransformerEncoder would take its fused fast path under no_grad).
    ref = module(x).detach()
    out_shape = list(ref.shape)
    ref_np = ref.numpy().astype(np.float32)

    labels = torch.randint(0, classes, tuple(out_shape[:-1]),
                           generator=torch.Generator().manual_seed(
                               300 + list(BUILDERS).index(name)), dtype=torch.int64)

    # ONNX (TorchScript exporter).
    path = os.path.join(out_dir, f"{name}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), path, dynamo=False, opset_version=OPSET,
                          input_names=[input_name], output_names=["logits"],
                          do_constant_folding=False)
    model = onnx.load(path)
    restored = undo_value_dedup(model)
    raw_nodes = len(model.graph.node)
    n_folded = fold_constants(model, {n for n, _ in initial.named_buffers()}) if fold else 0
    order_initializers(model, initial)
    if model.ir_version > IR_VERSION:
        model.ir_version = IR_VERSION
    write_bytes(path, model.SerializeToString())
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [OPSET]
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == out_shape

    # PyTorch's own float32 rounding: its logits against float64's.
    x64 = x.double() if x.is_floating_point() else x
    ref64 = copy.deepcopy(initial).double()(x64).detach().numpy()
    f32_err = rel_diff(ref_np, ref64)
    (got,) = ort_run(path, {input_name: x.numpy()})
    diff = rel_diff(got, ref_np)
    diff64 = rel_diff(got, ref64)
    tol = max(REL_TOL, 2 * f32_err)
    log(f"{name}: onnxruntime vs PyTorch: max |diff| / max |logits| = {diff:.3g} "
        f"(max |logits| {float(np.max(np.abs(ref_np))):.4g}; PyTorch f32 vs f64 {f32_err:.3g}, "
        f"onnxruntime vs f64 {diff64:.3g}; accepted up to {tol:.3g})")
    assert diff <= tol, (name, diff, tol)

    save_tensor(os.path.join(out_dir, f"{name}.input_0.pb"), x.numpy(), input_name)
    save_tensor(os.path.join(out_dir, f"{name}.output_0.pb"), ref_np, "logits")
    save_tensor(os.path.join(out_dir, f"{name}.labels.pb"), labels.numpy(), "labels")

    # The module after export and the reference forward must still be the initial one.
    for (a, pa), (b, pb) in zip(module.state_dict().items(), initial.state_dict().items()):
        assert a == b and torch.equal(pa, pb), (name, a)

    trainable, frozen, other, missing = initializer_roles(initial, model)
    assert not other and not missing, (name, other, missing)

    losses = train_losses(initial, x, labels, spec["batchnorm"], torch.float32)
    losses64 = train_losses(initial, x, labels, spec["batchnorm"], torch.float64)
    if not spec["batchnorm"]:  # train mode is eval mode without BatchNorm
        assert abs(losses[0] - float(cross_entropy(ref, labels))) <= 1e-6 * max(1.0, losses[0]), name
    record = dict(ADAM)
    record.update({
        "steps": STEPS,
        "loss": "F.cross_entropy(logits.reshape(-1, C), labels.reshape(-1)), mean; "
                "losses[i] is the loss before update i+1",
        "mode": "train (no dropout: same as eval)",
    })
    if spec["batchnorm"]:
        record["mode"] = "train"
        record["batchnorm"] = "batch statistics over the whole batch (gpipe: M = 1)"
    record.update({
        "input": f"{name}.input_0.pb",
        "labels": f"{name}.labels.pb",
        "trainable": trainable,
        "frozen": frozen,
        "losses": losses,
        "losses_f64": losses64,
    })
    dynamo = make_dynamo(name, module, x, input_name, ref_np, out_dir) if with_dynamo else None
    if dynamo and "error" not in dynamo:
        # The dynamo exporter names a tied parameter after its last use.
        record["trainable_dynamo"] = dynamo.pop("trainable")
    write_bytes(os.path.join(out_dir, f"{name}.losses.json"),
                (json.dumps(record, indent=1) + "\n").encode())
    log(f"{name}: losses f32 {losses[0]:.6f} .. {losses[-1]:.6f}; "
        f"max |f32 - f64| = {max(abs(a - b) for a, b in zip(losses, losses64)):.3g}")

    info[name] = {
        "spec": spec, "input_shape": list(x.shape),
        "input_dtype": "int64" if not x.is_floating_point() else "float32",
        "output_shape": out_shape, "diff": diff, "diff64": diff64, "f32_err": f32_err,
        "ops": op_counts(model),
        "nodes": len(model.graph.node), "initializers": len(model.graph.initializer),
        "restored": restored, "raw_nodes": raw_nodes, "folded": n_folded, "trainable": len(trainable), "frozen": len(frozen),
        "params": sum(p.numel() for p in initial.parameters()),
        "losses": losses, "losses_f64": losses64,
    }
    if with_dynamo:
        info[name]["dynamo"] = dynamo


def make_dynamo(name, module, x, input_name, ref_np, out_dir):
    """Tries the dynamo exporter at its default opset; keeps the file only if
    it exports, runs in onnxruntime and stays under SIZE_LIMIT."""
    path = os.path.join(out_dir, f"{name}.dynamo.onnx")
    if os.path.exists(path):
        os.remove(path)
    t0 = time.time()
    try:
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(), quiet():
            warnings.simplefilter("ignore")
            tmp_path = os.path.join(tmp, f"{name}.onnx")
            # optimize=False: the exporter's optimizer folds parameters into
            # new constants (BatchNorm into Conv, weight transposes, embedding
            # lookups), which then no longer train as the module's.
            torch.onnx.export(module, (x,), tmp_path, dynamo=True, optimize=False,
                              input_names=[input_name], output_names=["logits"],
                              verbose=False)
            model = onnx.load(tmp_path, load_external_data=True)
        # Of each node's metadata only its module path (what gpipe groups
        # layers by) is kept: the stack traces would triple the file.
        for node in model.graph.node:
            keep = [p for p in node.metadata_props if p.key == "pkg.torch.onnx.name_scopes"]
            del node.metadata_props[:]
            node.metadata_props.extend(keep)
        data = model.SerializeToString()
        if len(data) > SIZE_LIMIT:
            return {"error": f"exported, but {len(data)} bytes (over {SIZE_LIMIT}); not kept"}
        onnx.save(model, path, save_as_external_data=False)
        model = onnx.load(path)
        try:
            onnx.checker.check_model(model, full_check=True)
            checker = "passes"
        except Exception as e:  # recorded, not fatal
            checker = "fails: " + str(e).strip().splitlines()[0][:200]
        (got,) = ort_run(path, {input_name: x.numpy()})
        diff = rel_diff(got, ref_np)
        opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
        domains = sorted({o.domain for o in model.opset_import if o.domain not in ("", "ai.onnx")})
        log(f"{name}: dynamo export: opset {opset}, IR {model.ir_version}, "
            f"{len(model.graph.node)} nodes, onnxruntime rel diff {diff:.3g} "
            f"({time.time() - t0:.1f} s)")
        names = set(module.state_dict())
        named = sum(1 for t in model.graph.initializer if t.name in names)
        trainable, _, other, missing = initializer_roles(module, model)
        assert not other and not missing, (name, other, missing)
        bn = sum(1 for n in model.graph.node if n.op_type == "BatchNormalization")
        return {"trainable": trainable,
                "opset": opset[0] if opset else None, "ir": model.ir_version, "ops": op_counts(model),
                "inits": len(model.graph.initializer), "named": named, "bn": bn,
                "nodes": len(model.graph.node), "diff": diff, "checker": checker,
                "domains": domains, "functions": len(model.functions)}
    except Exception as e:
        if os.path.exists(path):
            os.remove(path)
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        log(f"{name}: dynamo export failed: {type(e).__name__}: {first}")
        return {"error": f"{type(e).__name__}: {first[:300]}"}


def quiet():
    """Silences stdout and stderr (the dynamo exporter's progress prints)."""
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
    return stack


# --- README ---------------------------------------------------------------------

def versions():
    import importlib.metadata as md
    out = {"torch": torch.__version__.split("+")[0]}
    for pkg in ("transformers", "torchvision", "onnx", "onnxruntime", "onnxscript", "numpy"):
        out[pkg] = md.version(pkg).split("+")[0]
    return out


def fmt_ops(ops):
    return ", ".join(f"{op} {n}" for op, n in ops)


def write_readme(out_dir, info, with_dynamo, verdicts):
    v = versions()
    lines = [
        "# Tiny real-model ONNX fixtures",
        "",
        "Written, with this README, by `scripts/onnx/make-model-fixtures.sh` (which runs",
        "`scripts/onnx/make_model_fixtures.py`) from fixed seeds. Versions: "
        + ", ".join(f"{k} {val}" for k, val in v.items()) + " (CPU).",
        "A rerun with these versions writes identical bytes.",
        "",
        "Each model is random-initialised from its own config class with a fixed",
        "`torch.manual_seed`, every dropout probability 0, and exported with the",
        "TorchScript exporter: `torch.onnx.export(model, (x,), path, dynamo=False,",
        "opset_version=17, input_names=[...], output_names=['logits'],",
        "do_constant_folding=False)`, static shapes (no `dynamic_axes`), IR version 8,",
        "checked with `onnx.checker.check_model(full_check=True)`.",
        "",
        "Why no constant folding: with it, the exporter fuses eval-mode BatchNorm into",
        "Conv (mobilenet_v2, resnet18) and writes a tied weight's transpose as a second",
        "initializer (gpt2, llama: `lm_head` = `wte`ᵀ), which computes the same logits",
        "but trains differently from PyTorch. Without it, every initializer is a",
        "PyTorch parameter or buffer under its `state_dict` name (the transformers models",
        "sit in a wrapper, so theirs start with `hf.`; `losses.json` lists which are",
        "trained), and a tied weight is one initializer used by both its Gather and",
        "(through a Transpose) its MatMul; a Linear on 3-D input is",
        "`MatMul(x, Transpose(weight))` + `Add(bias, ...)`.",
        "",
        "Two rewrites after export, both checked by the onnxruntime comparison below:",
        "",
        "1. In eval mode the TorchScript exporter merges initializers with equal values",
        "   (all LayerNorm weights are ones at init, most biases zeros) into one and feeds",
        "   the others through `Identity` nodes named after them. Each such `Identity`",
        "   becomes its own initializer again (a copy, under the parameter's name), so",
        "   every parameter stays separate as in PyTorch (count in the table).",
        "2. Without folding, the exporter leaves its shape arithmetic (Shape, Gather,",
        "   Unsqueeze, Concat on Constants) and the subgraphs that",
        "   build the attention masks, position ids and rotary cos/sin tables in the",
        "   graph. Every node whose inputs are all Constants, already-folded values or",
        "   buffers (never a trained parameter), and every Shape of a statically shaped",
        "   value, is evaluated with `onnx.reference` and replaced by a `Constant` with",
        "   the same output name, repeatedly; unused Constants and initializers are then",
        "   dropped (so buffers such as llama's `inv_freq` and BERT's `position_ids`",
        "   disappear into Constants; BatchNorm running statistics stay initializers).",
        "   This step runs only with `--prefold`: by default the fixtures keep the",
        "   exporter's shape arithmetic and mask builders, which the importer folds.",
        "",
        "Per model `<name>`:",
        "",
        "- `<name>.onnx`: the model; graph input as in the table, output `logits` (float32).",
        "- `<name>.input_0.pb`: `onnx.TensorProto` of the input, named as the graph input",
        "  (int64 ids uniform in [0, 96) from `torch.Generator().manual_seed(...)`, or",
        "  float32 pixels from `torch.randn`).",
        "- `<name>.output_0.pb`: PyTorch's logits in eval mode (float32, named `logits`).",
        "  onnxruntime (CPU, one thread, graph optimizations off) on `<name>.onnx` agrees to",
        "  the relative difference in the table (max |ort - torch| / max |torch|), required to",
        f"  be <= {REL_TOL:g} or, where PyTorch's own float32 logits are farther than that from",
        "  its float64 ones (column \"PyTorch f32 vs f64\"), <= twice that distance."]
    loose = [(n, d) for n, d in info.items() if d["diff"] > REL_TOL]
    for n, d in loose:
        lines.append(f"  `{n}` needs that: onnxruntime vs PyTorch {d['diff']:.2g}, onnxruntime vs "
                     f"float64 {d['diff64']:.2g}, PyTorch float32 vs float64 {d['f32_err']:.2g}.")
    if any(n == "mobilenet_v2" for n, _ in loose):
        lines += [
        "  At 32x32 input mobilenet_v2's last blocks run at 1x1 spatial size and some",
        "  depthwise channels after ReLU6 are almost always 0, so their calibrated running",
        "  variance is below 1e-6 and BatchNorm scales them by up to 1/sqrt(eps) = 316,",
        "  which magnifies float32 rounding. Compare an implementation's float32 logits",
        "  with the \"PyTorch f32 vs f64\" column in mind."]
    lines += [
        "- `<name>.labels.pb`: int64 labels named `labels`, shape of the logits without their",
        "  last dimension, uniform in [0, classes).",
        "- `<name>.losses.json`: `losses` = mean softmax cross-entropy",
        "  `F.cross_entropy(logits.reshape(-1, C), labels.reshape(-1))` before each of 10",
        "  steps of `torch.optim.Adam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8,",
        "  weight_decay=0, foreach=False)` on that one batch (losses[0] is the initial",
        "  model's), in float32; `losses_f64` the same with `model.double()` (and float64",
        "  pixels), to show how much is float32 rounding. `trainable` / `frozen` name the",
        "  initializers that are parameters / buffers. Every model is trained in train",
        "  mode. Without BatchNorm (and with no dropout) that is eval mode's function; in",
        "  mobilenet_v2 and resnet18 BatchNorm normalizes by the batch's statistics and",
        "  updates its running ones, as gpipe's batch_norm trains when one micro-batch",
        "  holds the whole batch (M = 1). Adam is dense: a row of an embedding table that",
        "  got no gradient in a step still moves by its momentum.",
    ]
    if with_dynamo:
        lines += [
            "- `<name>.dynamo.onnx` (where listed): `torch.onnx.export(..., dynamo=True,",
            "  optimize=False)` at its default opset, weights inlined (`onnx.save(...,",
            "  save_as_external_data=False)`), each node's metadata cut to its",
            "  `pkg.torch.onnx.name_scopes` (the module path gpipe groups layers by; the stack",
            "  traces would triple the file), kept only if it exports and is under 1 MiB.",
            "  `optimize=False` because the exporter's optimizer folds parameters into new",
            "  constants (BatchNorm into Conv; weight transposes, BERT's position and",
            "  token-type embedding lookups into initializers named `val_<n>`,",
            "  `embedding_<n>`): that file computes the same logits but no longer trains the",
            "  module's parameters.",
        ]
    lines += ["", "## Models", "",
              "| model | config | input → output | bytes (.onnx) | params (trainable / frozen initializers) | export workaround | onnxruntime vs PyTorch | PyTorch f32 vs f64 |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, d in info.items():
        size = os.path.getsize(os.path.join(out_dir, f"{name}.onnx"))
        io_ = (f"`{d['spec']['input_name']}` {d['input_dtype']}{d['input_shape']} → "
               f"`logits` float32{d['output_shape']}")
        params = f"{d['params']} ({d['trainable']} / {d['frozen']})"
        work = d["spec"]["workaround"]
        if d["restored"]:
            work += f"; {len(d['restored'])} value-merged initializers restored"
        lines.append(f"| `{name}` | {d['spec']['config']} | {io_} | {size} | {params} | {work} | "
                     f"{d['diff']:.2g} | {d['f32_err']:.2g} |")
    lines += ["", "## ONNX op types (`<name>.onnx`, opset 17)", ""]
    for name, d in info.items():
        lines.append(f"- `{name}` ({d['nodes']} nodes, {d['raw_nodes']} before folding; "
                     f"{d['initializers']} initializers): {fmt_ops(d['ops'])}")
    all_ops = Counter()
    for d in info.values():
        for op, n in d["ops"]:
            all_ops[op] += n
    lines += ["", "All seven together: " + ", ".join(f"{op} {n}" for op, n in sorted(all_ops.items())),
              "", "## Training losses (float32; float64 in `losses_f64`)", "",
              "| model | step 1 | step 10 | max \\|f32 - f64\\| |", "| --- | --- | --- | --- |"]
    for name, d in info.items():
        mx = max(abs(a - b) for a, b in zip(d["losses"], d["losses_f64"]))
        lines.append(f"| `{name}` | {d['losses'][0]:.6f} | {d['losses'][-1]:.6f} | {mx:.2g} |")
    if with_dynamo:
        lines += ["", "## Dynamo exporter (`<name>.dynamo.onnx`)", ""]
        for name, d in info.items():
            dy = d.get("dynamo", {})
            if "error" in dy:
                lines.append(f"- `{name}`: not kept: {dy['error']}")
            else:
                size = os.path.getsize(os.path.join(out_dir, f"{name}.dynamo.onnx"))
                extra = ""
                if dy["domains"]:
                    extra += f", other domains {dy['domains']}"
                if dy["functions"]:
                    extra += f", {dy['functions']} functions"
                lines.append(f"- `{name}.dynamo.onnx`: {size} bytes, opset {dy['opset']}, IR "
                             f"{dy['ir']}{extra}, {dy['inits']} initializers ({dy['named']} under "
                             f"a PyTorch state_dict name), checker (full_check) {dy['checker']}, "
                             f"onnxruntime rel. diff {dy['diff']:.2g}, {dy['nodes']} nodes: "
                             f"{fmt_ops(dy['ops'])}")
    if verdicts:
        lines += ["", "## libonnx 1.12", "",
                  "A program built against Debian's libonnx 1.12 (`onnx::checker::check_model`, then",
                  "`onnx::shape_inference::InferShapes`; `--checker PATH`) said, per file (exit 0: accepted):",
                  ""]
        lines += [f"- `{f}`: {v}" for f, v in verdicts.items()]
    lines.append("")
    write_bytes(os.path.join(out_dir, "README.md"), "\n".join(lines).encode())


# --- main -----------------------------------------------------------------------

def run_checker(checker, out_dir, names):
    """{file: the checker's first output line (or 'exit N')}"""
    import subprocess
    verdicts = {}
    for name in names:
        for suffix in (".onnx", ".dynamo.onnx"):
            path = os.path.join(out_dir, name + suffix)
            if os.path.exists(path):
                r = subprocess.run([checker, path], capture_output=True, text=True)
                text = (r.stdout + r.stderr).strip().replace(path + ": ", "")
                first = text.splitlines()[0] if text else ""
                verdicts[name + suffix] = f"exit {r.returncode}" + (f": {first}" if first else "")
    return verdicts


def run_all(out_dir, names, with_dynamo, fold=True, checker=""):
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(out_dir, exist_ok=True)
    info = {}
    for name in names:
        make_model(name, out_dir, with_dynamo, info, fold)
    verdicts = run_checker(checker, out_dir, names) if checker else {}
    for f, v in verdicts.items():
        log(f"libonnx 1.12 checker on {f}: {v}")
    if list(info) == list(BUILDERS):
        write_readme(out_dir, info, with_dynamo, verdicts)
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    ap.add_argument("--models", default=",".join(BUILDERS),
                    help="comma-separated subset (README.md is written only for all)")
    ap.add_argument("--prefold", action="store_true",
                    help="fold constant subgraphs here (by default the exporter's graph keeps "
                         "them: the importer's own folding is what the fixtures test)")
    ap.add_argument("--no-dynamo", action="store_true", help="skip the dynamo exporter")
    ap.add_argument("--checker", default=os.environ.get("GPIPE_ONNX_CHECKER", ""),
                    help="a program built against libonnx 1.12 (check_model + InferShapes) to "
                         "run on every .onnx file; its verdicts go into README.md")
    ap.add_argument("--check-determinism", action="store_true",
                    help="also run twice into temporary folders and compare the bytes")
    args = ap.parse_args()
    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n not in BUILDERS:
            sys.exit(f"make_model_fixtures.py: unknown model {n!r}; known: {', '.join(BUILDERS)}")
    log("versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()))

    info = run_all(args.out, names, not args.no_dynamo, args.prefold, args.checker)

    log("")
    for name in names:
        for suffix in (".onnx", ".input_0.pb", ".output_0.pb", ".labels.pb", ".losses.json",
                       ".dynamo.onnx"):
            p = os.path.join(args.out, name + suffix)
            if os.path.exists(p):
                with open(p, "rb") as f:
                    data = f.read()
                log(f"  {len(data):8d}  {hashlib.sha256(data).hexdigest()[:16]}  {name}{suffix}")
    log("")
    for name, d in info.items():
        log(f"{name}.onnx ops: {fmt_ops(d['ops'])}")
        dy = d.get("dynamo")
        if dy and "ops" in dy:
            log(f"{name}.dynamo.onnx (opset {dy['opset']}) ops: {fmt_ops(dy['ops'])}")

    if args.check_determinism:
        dirs = []
        for _ in range(2):
            dirs.append(tempfile.mkdtemp(prefix="model-fixtures-"))
        log("")
        for d in dirs:
            with quiet():
                run_all(d, names, not args.no_dynamo, args.prefold, args.checker)
        same = True
        for f in sorted(os.listdir(args.out)):
            for d in dirs:
                p = os.path.join(d, f)
                if not os.path.exists(p) or not filecmp.cmp(os.path.join(args.out, f), p,
                                                            shallow=False):
                    log(f"determinism: {f} differs in {d}")
                    same = False
        log(f"determinism: {'all files identical in 3 runs' if same else 'DIFFERENCES (above)'}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
