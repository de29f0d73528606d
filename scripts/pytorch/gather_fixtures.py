"""PyTorch autograd fixtures for gpipe.gather.

Each case is a small model over an input x of shape [4, 3, 5], a trained
parameter p, constant indices `idx` (1-D, a frozen parameter cast to i32
in the model) and per-example indices `ids` ([4, k], an i32 input):
z = f(x, p, idx, ids), loss = mean((z - y)^2), as
test/Integration/GatherGradientsTest.cpp writes it in the gpipe dialect.
Indices repeat and count from the end where negative (advanced indexing
reads them as the model does). For each: seeded float32 x, y and p, PyTorch's
loss and p's gradient (torch.autograd.grad), in float64 from the float32
values. Written as JSON to test/Integration/Inputs/gather-autograd.json
(scripts/pytorch/make-elementwise-fixtures.sh).
"""

import json
import sys

import torch

X_SHAPE = (4, 3, 5)
IDX = [2, 0, 2, -1]
IDS = [[4, 0, 4, -2, 1, 4], [0, 0, 1, 2, 3, -5], [3, 3, 3, 3, 3, 3], [-1, 2, 1, 0, 4, 2]]


def columns_batched(a, ids):
    rows = torch.arange(a.shape[0])[:, None, None]
    mid = torch.arange(a.shape[1])[None, :, None]
    return a[rows, mid, ids[:, None, :]]


def cases():
    # name: (f(x, p, idx, ids), p's shape)
    return {
        "rows_constant": (lambda x, p, idx, ids: (x * p)[:, idx], (3, 5)),
        "columns_batched": (lambda x, p, idx, ids: columns_batched(x * p, ids), (3, 5)),
        "table_rows": (lambda x, p, idx, ids: x + p[idx[:3]], (6, 5)),
        "gather_twice": (lambda x, p, idx, ids: columns_batched(
            torch.tanh((x * p)[:, idx]), ids), (3, 5)),
        "vector_table": (lambda x, p, idx, ids: x * p[idx[:3]].reshape(3, 1), (6,)),
    }


def main(out):
    gen = torch.Generator().manual_seed(2026)
    uniform = lambda shape: torch.rand(shape, generator=gen, dtype=torch.float32) * 2 - 1
    idx = torch.tensor(IDX)
    ids = torch.tensor(IDS)
    fixtures = {}
    for name, (fn, p_shape) in cases().items():
        x, p = uniform(X_SHAPE), uniform(p_shape)
        z_shape = fn(x.double(), p.double(), idx, ids).shape
        y = uniform(z_shape)
        pd = p.double().requires_grad_(True)
        z = fn(x.double(), pd, idx, ids)
        loss = ((z - y.double()) ** 2).mean()
        (gp,) = torch.autograd.grad(loss, [pd])
        fixtures[name] = {
            "x": x.view(-1).tolist(),
            "y": y.view(-1).tolist(),
            "y_shape": list(z_shape),
            "p": p.view(-1).tolist(),
            "loss": loss.item(),
            "grad_p": gp.view(-1).tolist(),
        }
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "x_shape": list(X_SHAPE), "idx": IDX,
                   "ids": IDS, "cases": fixtures}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
