"""PyTorch autograd fixtures for broadcasting and the reductions.

Each case is a small model over an input x of shape [4, 3, 5] and
parameters p and q: z = f(x, p, q), loss = mean((z - y)^2), as
test/Integration/BroadcastGradientsTest.cpp writes it in the gpipe dialect.
For each: seeded float32 x, y, p and q, PyTorch's loss and the parameters'
gradients (torch.autograd.grad), computed in float64 from the float32
values. `ties` sets q so that a maximum is reached twice (torch.amax shares
its gradient among ties). Written as JSON to
test/Integration/Inputs/broadcast-autograd.json
(scripts/pytorch/make-elementwise-fixtures.sh).
"""

import json
import sys

import torch

X_SHAPE = (4, 3, 5)


def amax(t, dims, keep):
    return torch.amax(t, dim=dims, keepdim=keep)


def cases():
    # name: (f(x, p, q), p's shape, q's shape)
    return {
        "bias_add": (lambda x, p, q: x + p, (5,), (1,)),
        "scale_rows": (lambda x, p, q: x * q, (1,), (3, 1)),
        "outer_sub": (lambda x, p, q: x + (q - p), (5,), (3, 1)),
        "div_broadcast": (lambda x, p, q: x / torch.exp(q), (1,), (3, 1)),
        "pow_broadcast": (lambda x, p, q: torch.pow(torch.sigmoid(x), q), (1,), (3, 1)),
        "max_min": (lambda x, p, q: torch.maximum(x, p) + torch.minimum(x, q), (5,), (3, 1)),
        "rmsnorm": (lambda x, p, q: x * torch.rsqrt((x * x).mean(dim=2, keepdim=True)) * p,
                    (5,), (1,)),
        "softmax": (lambda x, p, q: (lambda e: e / e.sum(dim=2, keepdim=True))(
            torch.exp(x * p - amax(x * p, 2, True))), (5,), (1,)),
        "sum_middle": (lambda x, p, q: (x * p).sum(dim=1), (5,), (1,)),
        "sum_to": (lambda x, p, q: (x * q).sum(dim=1, keepdim=True), (1,), (3, 1)),
        "mean_rows": (lambda x, p, q: (x + p).mean(dim=(1, 2)), (5,), (1,)),
        "broadcast_to": (lambda x, p, q: x * q.expand(3, 5), (1,), (3, 1)),
        "max_drop": (lambda x, p, q: amax(x * p, 1, False), (5,), (1,)),
        "heads": (lambda x, p, q: (x.reshape(4, 3, 5, 1).permute(0, 2, 1, 3) * q)
                  .permute(0, 2, 1, 3).reshape(4, 3, 5), (5,), (3, 1)),
        "unit_axes": (lambda x, p, q: amax((x * p).reshape(4, 3, 1, 5), 2, True)
                      .mean(dim=2), (5,), (1,)),
        "unit_axes_in_place": (lambda x, p, q: x.reshape(4, 3, 5, 1).permute(0, 1, 3, 2)
                               .mean(dim=2, keepdim=True).reshape(4, 3, 5) * p, (5,), (1,)),
        "ties": (lambda x, p, q: amax(torch.minimum(x, q), (1, 2), True), (1,), (3, 1)),
        "rotate_half": (lambda x, p, q: (lambda a: torch.cat([-a[..., 2:], a[..., :2]], dim=2))(
            x * p), (5,), (1,)),
        "strided_slices": (lambda x, p, q: (lambda s: torch.cat([s, s * s], dim=1))(
            (x * q)[:, 1:, ::2]), (1,), (3, 1)),
        "split_parts": (lambda x, p, q: (lambda a: torch.cat(
            [a[..., 3:5] * a[..., 1:3], a[..., 0:1]], dim=2))(x + p), (5,), (1,)),
        "matmul_param": (lambda x, p, q: x @ p, (5, 5), (1,)),
        "matmul_transposed": (lambda x, p, q: x.transpose(-1, -2) @ q, (1,), (3, 5)),
        "matmul_param_transposed": (lambda x, p, q: x @ p.transpose(-1, -2), (2, 5), (1,)),
        "attention": (lambda x, p, q: (lambda a: torch.softmax(
            a @ a.transpose(-1, -2), dim=-1) @ a)(x * p), (5,), (1,)),
        "where_mask": (lambda x, p, q: torch.where(x > p, x * q, p), (5,), (3, 1)),
        "cast_mask": (lambda x, p, q: x * (x > q).to(x.dtype) + p, (5,), (3, 1)),
    }


def main(out):
    gen = torch.Generator().manual_seed(2026)
    uniform = lambda shape: torch.rand(shape, generator=gen, dtype=torch.float32) * 2 - 1
    fixtures = {}
    for name, (fn, p_shape, q_shape) in cases().items():
        x, p, q = uniform(X_SHAPE), uniform(p_shape), uniform(q_shape)
        if name == "ties":
            # Rows 0 and 1 of min(x, q) are all -5, row 2 all -7: the
            # maximum -5 is reached 10 times per example.
            q = torch.tensor([[-5.0], [-5.0], [-7.0]])
        z_shape = fn(x.double(), p.double(), q.double()).shape
        y = uniform(z_shape)
        pd = p.double().requires_grad_(True)
        qd = q.double().requires_grad_(True)
        z = fn(x.double(), pd, qd)
        loss = ((z - y.double()) ** 2).mean()
        gp, gq = torch.autograd.grad(loss, [pd, qd], allow_unused=True)
        zero = lambda t, g: torch.zeros_like(t) if g is None else g
        fixtures[name] = {
            "x": x.view(-1).tolist(),
            "y": y.view(-1).tolist(),
            "y_shape": list(z_shape),
            "p": p.view(-1).tolist(),
            "q": q.view(-1).tolist(),
            "loss": loss.item(),
            "grad_p": zero(pd, gp).view(-1).tolist(),
            "grad_q": zero(qd, gq).view(-1).tolist(),
        }
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "x_shape": list(X_SHAPE), "cases": fixtures},
                  f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
