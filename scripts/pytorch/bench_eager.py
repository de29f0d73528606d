"""Times eager PyTorch training steps of one model in this process and prints
one JSON line. A step is what a gpipe-bench step is: forward and backward over
the whole mini-batch, then one Adam (lr 1e-3) update.

  bench_eager.py --model mlp --batch 64 --threads 1 --steps 20 --warmup 3
"""
import argparse
import json
import statistics
import time

import torch

import models


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(models.MODELS), required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    model, inputs, target = models.build(args.model, args.batch)
    model.train()  # dropout on, as in gpipe's training steps
    # fused=True: PyTorch's fastest CPU Adam (one kernel over all parameters),
    # so the peer is PyTorch at its best, not its default loop over tensors.
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)

    def step():
        opt.zero_grad(set_to_none=True)
        model.loss(model(inputs), target).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    print(json.dumps({
        "framework": "torch", "model": args.model, "batch": args.batch,
        "config": f"eager-{args.threads}t",
        "step_ms_median": round(statistics.median(times), 3), "step_ms_min": round(min(times), 3),
        "steps": args.steps, "torch": torch.__version__,
    }), flush=True)


if __name__ == "__main__":
    main()
