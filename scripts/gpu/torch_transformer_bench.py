#!/usr/bin/env python3
"""PyTorch eager reference for gpipe-cuda-bench's BM_TransformerStep.

The same model and step, so that their times compare side by side on one GPU
(scripts/gpu-check.sh runs both): token embedding (vocabulary 256), L pre-norm
blocks -- layer norm, causal multi-head attention (d_model 1024 or --width,
heads of 64 features, a fused qkv projection without bias, an output
projection without bias), a
residual, layer norm, dense 4d + bias, tanh-approximated GELU, dense d + bias,
a residual -- then a projection to the vocabulary with bias and the softmax
cross-entropy; sequence 1024, M micro-batches of R sequences whose gradients
accumulate before one Adam step (gpipe's remat full has no eager analogue:
PyTorch keeps activations, which only makes it faster).

Attention is written out (matmul, mask, softmax, matmul) as gpipe computes it;
--sdpa uses torch's fused scaled_dot_product_attention instead, the faster
baseline a user would reach for; --compile runs the model through
torch.compile (its first steps compile, outside the timing). GEMM precision:
f32, tf32 (f32 tensors,
TF32 tensor cores) or bf16 (autocast to bf16, f32 master weights and
accumulation).

Prints one line per configuration: ms per step (median of --steps timed steps
after 2 warm-ups, CUDA events), tokens/s, model TFLOP/s with gpipe-cuda-bench's
formula 6 T (12 L d^2 + d V) + 12 L B s^2 d, and MFU against --peak-tflops.
"""

import argparse
import math
import statistics

import torch
import torch.nn.functional as F

HEAD_WIDTH, SEQ, VOCAB = 64, 1024, 256


class Block(torch.nn.Module):
    def __init__(self, width, sdpa):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width, bias=False)
        self.out = torch.nn.Linear(width, width, bias=False)
        self.ln2 = torch.nn.LayerNorm(width)
        self.fc1 = torch.nn.Linear(width, 4 * width)
        self.fc2 = torch.nn.Linear(4 * width, width)
        self.sdpa = sdpa

    def attention(self, x):
        b, s, d = x.shape
        heads, dh = d // HEAD_WIDTH, HEAD_WIDTH
        q, k, v = self.qkv(x).view(b, s, 3, heads, dh).permute(2, 0, 3, 1, 4)
        if self.sdpa:
            ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
            mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
            ctx = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
        return self.out(ctx.transpose(1, 2).reshape(b, s, d))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Stack(torch.nn.Module):
    def __init__(self, layers, width, sdpa):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, width)
        self.blocks = torch.nn.ModuleList(
            Block(width, sdpa) for _ in range(layers))
        self.head = torch.nn.Linear(width, VOCAB)

    def forward(self, ids, labels):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        logits = self.head(x)
        return F.cross_entropy(logits.view(-1, VOCAB).float(), labels.view(-1))


def model_flops(rows, layers, width):
    tokens, d = rows * SEQ, width
    return 6.0 * tokens * (12.0 * layers * d * d + d * VOCAB) + \
        12.0 * layers * rows * SEQ * SEQ * d


def run(layers, width, precision, microbatches, rows, steps, sdpa, compiled,
        peak, device):
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.manual_seed(1)
    model = Stack(layers, width, sdpa).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    forward = torch.compile(model) if compiled else model
    ids = torch.randint(0, VOCAB, (microbatches, rows, SEQ), device=device)
    labels = torch.randint(0, VOCAB, (microbatches, rows, SEQ), device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        for m in range(microbatches):
            with torch.autocast(device.type, dtype=torch.bfloat16,
                                enabled=precision == "bf16"):
                loss = forward(ids[m], labels[m]) / microbatches
            loss.backward()
        optimizer.step()

    timings = []
    for i in range(2 + steps):
        if device.type == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            torch.cuda.synchronize()
            ms = start.elapsed_time(end)
        else:
            import time
            t = time.perf_counter()
            step()
            ms = 1e3 * (time.perf_counter() - t)
        if i >= 2:
            timings.append(ms)
    ms = statistics.median(timings)
    total_rows = microbatches * rows
    tflops = model_flops(total_rows, layers, width) / (ms * 1e-3) / 1e12
    mode = "torch.compile" if compiled else "torch eager"
    print(f"{mode}{' sdpa' if sdpa else ''} L={layers} d={width} "
          f"M={microbatches} "
          f"rows/mb={rows} {precision}: {ms:.1f} ms/step, "
          f"{total_rows * SEQ / (ms * 1e-3):.0f} tokens/s, "
          f"{tflops:.1f} TFLOP/s, MFU {tflops / peak:.3f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[8, 24])
    parser.add_argument("--precision", nargs="+", default=["bf16"],
                        choices=["f32", "tf32", "bf16"])
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--rows", type=int, default=2,
                        help="sequences per micro-batch")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--width", type=int, nargs="+", default=[1024],
                        help="d_model (heads of 64 features)")
    parser.add_argument("--sdpa", action="store_true")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the model")
    parser.add_argument("--peak-tflops", type=float, default=989.4)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.exit(2, "torch_transformer_bench: no CUDA device\n")
    for precision in args.precision:
        for width in args.width:
            for layers in args.layers:
                run(layers, width, precision, args.microbatches, args.rows,
                    args.steps, args.sdpa, args.compile, args.peak_tflops,
                    device)


if __name__ == "__main__":
    main()
