"""Times PyTorch's own GPipe, torch.distributed.pipelining.ScheduleGPipe, on one
model split into 2 stages at a layer boundary (models.halves): two processes
on this machine, gloo over loopback, 1 intra-op thread each. Every step runs
all micro-batches' forwards, then their backwards, then each stage's Adam
(lr 1e-3) update; rank 0 times it between two barriers and prints one JSON line.

  bench_pipeline.py --model mlp --batch 64 --microbatches 8 --steps 20 --warmup 3
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

import models

STAGES = 2


def worker(rank, args, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=STAGES, timeout=datetime.timedelta(minutes=5))
    # Both ranks build the whole model from one seed and keep their half, so
    # the weights are the eager run's.
    model, inputs, target = models.build(args.model, args.batch)
    part = models.halves(model)[rank].train()
    stage = PipelineStage(part, rank, STAGES, torch.device("cpu"))
    # loss_fn is the mean over a micro-batch; scale_grads divides the summed
    # gradients by the micro-batch count, giving the mini-batch mean's.
    schedule = ScheduleGPipe(stage, n_microbatches=args.microbatches, loss_fn=model.loss,
                             scale_grads=True)
    opt = torch.optim.Adam(part.parameters(), lr=1e-3, fused=True)

    def step():
        opt.zero_grad(set_to_none=True)
        if rank == 0:
            schedule.step(inputs)
        else:
            schedule.step(target=target)
        opt.step()

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        dist.barrier()
        start = time.perf_counter()
        step()
        dist.barrier()
        times.append((time.perf_counter() - start) * 1e3)
    if rank == 0:
        print(json.dumps({
            "framework": "torch", "model": args.model, "batch": args.batch,
            "config": f"pipeline-k{STAGES}-m{args.microbatches}",
            "step_ms_median": round(statistics.median(times), 3), "step_ms_min": round(min(times), 3),
            "steps": args.steps, "stages": STAGES, "microbatches": args.microbatches,
            "torch": torch.__version__,
        }), flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(models.MODELS), required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    if args.batch % args.microbatches:
        ap.error(f"--batch {args.batch} is not a multiple of --microbatches {args.microbatches}")
    # Gloo must pick the loopback device: the machine may have no other.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(worker, args=(args, free_port()), nprocs=STAGES, join=True)


if __name__ == "__main__":
    main()
