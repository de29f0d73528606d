"""Writes models of PyTorch's attention modules (nn.MultiheadAttention in
nn.TransformerEncoder pre- and post-norm, causal, without biases, and
nn.Transformer's encoder-decoder with cross-attention) as ONNX test cases
(model.onnx, test_data_set_0/input_0.pb, output_0.pb: PyTorch's logits), for
gpipe-onnx-conformance (test/Import/Onnx/import-attention.test).

Run with the Python of .venv-compare (PyTorch 2.15):
  .venv-compare/bin/python scripts/onnx/make_attention_suite.py \
      --out test/Import/Onnx/Inputs/attention-suite/node
"""
import argparse, os, torch, torch.nn as nn, numpy as np, onnx
from onnx import numpy_helper
torch.manual_seed(0)
FOLD = False
def save(out, name, model, args, dynamo=False, names=("ids",)):
    d = os.path.join(out, name); os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    model.eval()
    with torch.no_grad():
        y = model(*args)
    kw = dict(dynamo=True, optimize=False, external_data=False) if dynamo else dict(dynamo=False, opset_version=17, do_constant_folding=FOLD)
    torch.onnx.export(model, args, os.path.join(d, "model.onnx"), input_names=list(names), output_names=["logits"], **kw)
    if dynamo:  # node metadata cut to the layer scopes the importer reads
        path = os.path.join(d, "model.onnx")
        m = onnx.load(path)
        for n in m.graph.node:
            kept = [p for p in n.metadata_props if p.key == "pkg.torch.onnx.name_scopes"]
            del n.metadata_props[:]
            n.metadata_props.extend(kept)
            n.doc_string = ""
        onnx.save(m, path)
    for i, a in enumerate(args):
        t = numpy_helper.from_array(a.numpy(), names[i])
        open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb").write(t.SerializeToString())
    t = numpy_helper.from_array(y.numpy(), "logits")
    open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb").write(t.SerializeToString())

class Enc(nn.Module):
    def __init__(self, d=32, h=4, norm_first=False, act="relu", causal=False, layers=1):
        super().__init__()
        self.emb = nn.Embedding(50, d)
        layer = nn.TransformerEncoderLayer(d, h, 4*d, dropout=0.0, activation=act, batch_first=True, norm_first=norm_first)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, 7)
        self.causal = causal
        self.seq = 12
        if causal:
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(12))
    def forward(self, ids):
        x = self.emb(ids)
        x = self.enc(x, mask=self.mask, is_causal=True) if self.causal else self.enc(x)
        return self.head(x)

class Dec(nn.Module):
    def __init__(self, d=32, h=4):
        super().__init__()
        self.emb = nn.Embedding(50, d)
        self.tr = nn.Transformer(d, h, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d, 7)
    def forward(self, ids):
        x = self.emb(ids)
        return self.head(self.tr(x, x))

class Mha(nn.Module):  # MHA alone with kdim != embed
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        self.mha = nn.MultiheadAttention(32, 4, batch_first=True, bias=False)
        self.head = nn.Linear(32, 7)
    def forward(self, ids):
        x = self.emb(ids)
        y, _ = self.mha(x, x, x, need_weights=False)
        return self.head(y)

def main():
    global FOLD
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the suite's node/ folder")
    out = ap.parse_args().out
    ids = torch.randint(0, 50, (4, 12), generator=torch.Generator().manual_seed(7))
    # TorchScript as docs/Onnx.md says (no constant folding), TorchScript's
    # default (the weight transposes and slices folded into constants) and
    # dynamo (opset 20).
    for dyn, fold, suffix in ((False, False, ""), (False, True, "_folded"), (True, False, "_dynamo")):
        FOLD = fold
        for name, build in [("enc_prenorm_gelu", lambda: Enc(norm_first=True, act="gelu")),
                            ("enc_causal", lambda: Enc(causal=True)),
                            ("mha_nobias", Mha),
                            ("transformer_encdec", Dec)]:
            torch.manual_seed(0)
            save(out, name + suffix, build(), (ids,), dynamo=dyn)


if __name__ == "__main__":
    main()
