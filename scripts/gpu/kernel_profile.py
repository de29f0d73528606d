#!/usr/bin/env python3
"""Summarises an Nsight Compute CSV of kernel durations, by kernel and by kind.

Input: `ncu --csv --page raw --metrics gpu__time_duration.sum ...` output
(scripts/gpu-check.sh's `profile` step writes it). Output: where the GPU time
goes, grouped into kinds (GEMMs, bf16 conversion, attention, row reductions,
element-wise, copies), and the kernels that take the most of it. When the
launch sequence repeats (one training step after another), it also gives the
launches and GPU time of one step, to lay beside the measured step time: the
difference is time the GPU sits idle between launches.
"""
import argparse
import collections
import csv
import sys

KINDS = [  # (kind, substrings of the kernel's name), first match wins
    ("GEMM (cuBLAS)", ("gemm", "cutlass", "sm90_xmma", "xmma", "nvjet", "splitK")),
    ("bf16 conversion", ("Bf16", "bf16", "convert")),
    ("column reductions (bias, layer-norm parameter gradients)", ("ColumnSums", "LayerNormGradParams")),
    ("row reductions (softmax, norm, loss)", ("softmax", "Softmax", "Norm", "norm", "Row", "row", "Loss", "loss", "mean", "Mean")),
    ("embedding", ("mbedding",)),
    ("optimizer", ("adam", "Adam", "sgd", "Sgd", "optim")),
    ("element-wise", ("elementwise", "Elementwise", "fused", "Fused", "gelu", "Gelu", "relu", "dropout", "Dropout", "add", "Add", "scale", "Scale", "fill", "Fill", "copy", "Copy")),
]


def kind_of(name):
    for kind, keys in KINDS:
        if any(k in name for k in keys):
            return kind
    return "other"


def read(path):
    names, times = [], []
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(line for line in f if line.startswith('"'))]
    if not rows:
        sys.exit(f"{path}: no CSV rows (did ncu profile any kernel?)")
    header = rows[0]
    try:
        name_col = header.index("Kernel Name")
        time_col = header.index("gpu__time_duration.sum")
    except ValueError:
        sys.exit(f"{path}: expected columns 'Kernel Name' and "
                 f"'gpu__time_duration.sum', found {header[:12]}...")
    unit = "ns"
    for r in rows[1:]:
        value = r[time_col].replace(",", "")
        try:
            t = float(value)
        except ValueError:
            unit = value or unit  # the units row
            continue
        names.append(r[name_col])
        times.append(t)
    scale = {"ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0,
             "nsecond": 1e-6}.get(unit, 1e-6)
    return names, [t * scale for t in times]  # milliseconds


def step_period(names, min_period=16):
    """The shortest P with names[i] == names[i + P] over the last two thirds.

    Comparing over that long a stretch crosses step boundaries, so a period of
    one layer (which repeats within a step) does not pass for a step's.
    """
    n = len(names)
    start = n // 3
    for p in range(min_period, (n - start) // 2 + 1):
        if names[start:n - p] == names[start + p:n]:
            return p
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--step-ms", type=float, help="measured step time, for the idle share")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    names, times = read(args.csv)
    period = step_period(names)
    if period:
        names, times = names[-period:], times[-period:]
        print(f"one step: {period} kernel launches, {sum(times):.1f} ms of kernel time")
        if args.step_ms:
            busy = sum(times) / args.step_ms
            print(f"measured step {args.step_ms:.1f} ms: the GPU runs kernels "
                  f"{100 * busy:.0f}% of it, idle {100 * (1 - busy):.0f}%")
    else:
        print(f"{len(names)} kernel launches (no repeating step found), "
              f"{sum(times):.1f} ms of kernel time")
    total = sum(times) or 1.0
    by_kind, by_name = collections.Counter(), collections.Counter()
    count = collections.Counter()
    for n, t in zip(names, times):
        by_kind[kind_of(n)] += t
        by_name[n] += t
        count[n] += 1
    print("\nby kind:")
    for kind, t in by_kind.most_common():
        print(f"  {100 * t / total:5.1f}%  {t:9.2f} ms  {kind}")
    print(f"\ntop {args.top} kernels:")
    for n, t in by_name.most_common(args.top):
        print(f"  {100 * t / total:5.1f}%  {t:9.2f} ms  {count[n]:5d}x  {n[:110]}")


if __name__ == "__main__":
    main()
