"""PyTorch autograd fixtures for the general element-wise ops.

For each op of GPipeElementwiseOps.td (clip: min -1, max 1.5, the bounds
NativeKernelsTest uses): seeded float32 inputs of shape [3, 7]
in the op's domain (plus the edges PyTorch defines: ties for max and min, a
zero for abs and pow), a random upstream gradient dy, PyTorch's forward y and
its input gradients from torch.autograd.grad, all in float64 from the float32
inputs. Written as JSON to test/Kernels/Inputs/elementwise-autograd.json,
which NativeKernelsTest reads (scripts/pytorch/make-elementwise-fixtures.sh).
"""

import json
import sys

import torch

SHAPE = (3, 7)


def uniform(gen, low, high):
    return (torch.rand(SHAPE, generator=gen, dtype=torch.float32) * (high - low) + low)


def cases(gen):
    u = lambda lo, hi: uniform(gen, lo, hi)
    any_ = lambda: u(-3, 3)
    positive = lambda: u(0.1, 3)
    a, b = any_(), any_()
    b.view(-1)[:4] = a.view(-1)[:4]  # ties
    z = any_()
    z.view(-1)[0] = 0.0
    base = positive()
    base.view(-1)[1] = 0.0
    exponent = u(-2, 2)
    exponent.view(-1)[1] = 2.0  # 0^2: the exponent's gradient is 0
    exponent.view(-1)[2] = 0.0  # b = 0: the base's gradient is 0
    clipped = any_()
    clipped.view(-1)[0] = -1.0  # at the bounds the gradient is 0
    clipped.view(-1)[1] = 1.5
    return {
        "neg": (torch.neg, [any_()]),
        "clip": (lambda x: torch.clamp(x, -1.0, 1.5), [clipped]),
        "abs": (torch.abs, [z]),
        "exp": (torch.exp, [any_()]),
        "log": (torch.log, [positive()]),
        "sqrt": (torch.sqrt, [positive()]),
        "rsqrt": (torch.rsqrt, [positive()]),
        "reciprocal": (torch.reciprocal, [positive()]),
        "sigmoid": (torch.sigmoid, [any_()]),
        "silu": (torch.nn.functional.silu, [any_()]),
        "erf": (torch.erf, [any_()]),
        "sin": (torch.sin, [u(-10, 10)]),
        "cos": (torch.cos, [u(-10, 10)]),
        "sub": (torch.sub, [any_(), any_()]),
        "mul": (torch.mul, [any_(), any_()]),
        "div": (torch.div, [any_(), positive()]),
        "pow": (torch.pow, [base, exponent]),
        "max": (torch.maximum, [a, b]),
        "min": (torch.minimum, [a.clone(), b.clone()]),
    }


def main(out):
    gen = torch.Generator().manual_seed(2026)
    fixtures = {}
    for name, (fn, inputs) in cases(gen).items():
        xs = [x.double().requires_grad_(True) for x in inputs]
        y = fn(*xs)
        dy = uniform(gen, -1, 1).double()
        grads = torch.autograd.grad(y, xs, dy)
        fixtures[name] = {
            "inputs": [x.detach().view(-1).tolist() for x in inputs],
            "dy": dy.view(-1).tolist(),
            "y": y.detach().view(-1).tolist(),
            "grads": [g.view(-1).tolist() for g in grads],
        }
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "shape": list(SHAPE), "ops": fixtures},
                  f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
