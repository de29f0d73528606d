"""Reads the JSON lines of scripts/compare-pytorch.sh (gpipe-bench's, tagged
with framework/model/config, and the torch benchmarks') and prints, for each
model and batch, a Markdown table of step times and the ratios that compare
the configurations. A ratio whose runs are missing reads "n/a". With several
rounds (--rounds: every configuration run once per round, in turn), a step
time is the median of the rounds' medians, the minimum the smallest, and each
ratio comes with its range over the rounds, taken round by round (for the best
configurations, those of the medians in every round).

  report.py results.jsonl [more.jsonl ...]     (or the lines on stdin)
"""
import fileinput
import json
import statistics

# (framework, config) -> label, in table order.
LABELS = {
    ("gpipe", "k1-m1-none-1t"): "gpipe K=1 M=1, 1 thread",
    ("gpipe", "k1-m1-none"): "gpipe K=1 M=1",
    ("gpipe", "k1-m8-none-1t"): "gpipe K=1 M=8, 1 thread",
    ("gpipe", "k1-m8-none"): "gpipe K=1 M=8",
    ("gpipe", "k2-m8-none"): "gpipe K=2 M=8",
    ("gpipe", "k2-m8-full"): "gpipe K=2 M=8 remat full",
    ("gpipe", "k2-m8-none-1f1b"): "gpipe K=2 M=8 1F1B",
    ("gpipe", "k2-m8-full-1f1b"): "gpipe K=2 M=8 1F1B remat full",
    ("gpipe", "k2-m8-selective-1f1b"): "gpipe K=2 M=8 1F1B remat selective",
    ("gpipe", "k2-m8-none-zb-h1"): "gpipe K=2 M=8 ZB-H1",
    ("gpipe", "k2-m8-full-zb-h1"): "gpipe K=2 M=8 ZB-H1 remat full",
    ("torch", "eager-1t"): "torch eager, 1 thread",
    ("torch", "eager-2t"): "torch eager, 2 threads",
    ("torch", "pipeline-k2-m8"): "torch ScheduleGPipe K=2 M=8 (2 processes)",
}


def best(runs, keys):
    """The fastest (median) of the given configurations' keys, or None."""
    found = [(runs[k]["step_ms_median"], k) for k in keys if k in runs]
    return min(found)[1] if found else None


def best_keys(runs):
    """The fastest gpipe configuration and the fastest single-process torch one."""
    return (best(runs, [k for k in LABELS if k[0] == "gpipe"]),
            best(runs, [("torch", "eager-1t"), ("torch", "eager-2t")]))


def combine(rounds):
    """One run from a configuration's rounds: the median of their medians
    (and of their bubbles), the smallest minimum."""
    run = dict(rounds[0])
    run["step_ms_median"] = statistics.median(r["step_ms_median"] for r in rounds)
    run["step_ms_min"] = min(r["step_ms_min"] for r in rounds)
    bubbles = [r["bubble"] for r in rounds if r.get("bubble") is not None]
    if bubbles:
        run["bubble"] = statistics.median(bubbles)
    return run


def ratio_rows(runs, chosen):
    """(name, value or None) of each ratio, from one set of runs; `chosen`:
    the keys of the best gpipe and torch configurations (best_keys), the same
    for every round so that a range is that of one ratio."""
    ms = {key: r["step_ms_median"] for key, r in runs.items()}
    g = lambda config: ms.get(("gpipe", config))
    t = lambda config: ms.get(("torch", config))
    q = lambda a, b: a / b if a is not None and b else None
    g_best, t_best = (ms.get(k) for k in chosen)
    g_best_label, t_best_label = (LABELS[k] if k else "none run" for k in chosen)
    return [
        ("gpipe K=1 M=1 / torch eager, both 1 thread", q(g("k1-m1-none-1t"), t("eager-1t"))),
        ("gpipe K=1 M=1 / torch eager, both 2 threads", q(g("k1-m1-none"), t("eager-2t"))),
        ("gpipe K=1 M=8 / K=1 M=1, 1 thread (micro-batching cost)", q(g("k1-m8-none-1t"), g("k1-m1-none-1t"))),
        ("gpipe K=1 M=8 / K=1 M=1, 2 threads (micro-batching cost)", q(g("k1-m8-none"), g("k1-m1-none"))),
        ("gpipe K=1 M=8 1 thread / K=2 M=8 (pipeline speed-up)", q(g("k1-m8-none-1t"), g("k2-m8-none"))),
        ("gpipe K=1 M=8 2 threads / K=2 M=8 (pipeline against intra-op threads)", q(g("k1-m8-none"), g("k2-m8-none"))),
        ("gpipe K=1 M=8 1 thread / K=2 M=8 ZB-H1 (pipeline speed-up, ZB-H1)", q(g("k1-m8-none-1t"), g("k2-m8-none-zb-h1"))),
        ("gpipe K=2 M=8 full / none (remat cost)", q(g("k2-m8-full"), g("k2-m8-none"))),
        ("gpipe K=2 M=8 1F1B full / none (remat cost, 1F1B)", q(g("k2-m8-full-1f1b"), g("k2-m8-none-1f1b"))),
        ("gpipe K=2 M=8 ZB-H1 full / none (remat cost, ZB-H1)", q(g("k2-m8-full-zb-h1"), g("k2-m8-none-zb-h1"))),
        ("gpipe K=2 M=8 1F1B selective / none (selective remat cost, 1F1B)",
         q(g("k2-m8-selective-1f1b"), g("k2-m8-none-1f1b"))),
        (f"gpipe best ({g_best_label}) / torch best single-process ({t_best_label})", q(g_best, t_best)),
        (f"torch ScheduleGPipe / gpipe best ({g_best_label})", q(t("pipeline-k2-m8"), g_best)),
    ]


def table(model, batch, rounds):
    """rounds: {(framework, config): [the run of each round]}."""
    runs = {key: combine(rs) for key, rs in rounds.items()}
    count = max(len(rs) for rs in rounds.values())
    print(f"\n### {model}, batch {batch}" + (f" ({count} rounds)" if count > 1 else "") + "\n")
    print("| configuration | median ms/step | min ms/step | samples/s | bubble (ideal) |")
    print("|---|---:|---:|---:|---:|")
    for key, label in LABELS.items():
        if key not in runs:
            continue
        r = runs[key]
        bubble = ""
        if r.get("bubble") is not None:  # gpipe only; ideal_bubble is null off fill-drain schedules
            ideal = r.get("ideal_bubble")
            bubble = f"{r['bubble']:.3f} ({'n/a' if ideal is None else f'{ideal:.3f}'})"
        if r.get("device"):  # gpipe-bench says how many devices and threads ran
            label += f" ({r['device']}" + (f", {r['blas']}" if r.get("blas") else "") + ")"
        print(f"| {label} | {r['step_ms_median']:.2f} | {r['step_ms_min']:.2f} "
              f"| {batch * 1e3 / r['step_ms_median']:.0f} | {bubble} |")

    # Each round's ratios too, by position, the best configurations being
    # those of the medians: how far one run moves them.
    chosen = best_keys(runs)
    per_round = [ratio_rows({key: rs[i] for key, rs in rounds.items() if i < len(rs)}, chosen)
                 for i in range(count)] if count > 1 else []
    print("\n| ratio (of median step times) | value |" + (" range over the rounds |" if per_round else ""))
    print("|---|---:|" + ("---:|" if per_round else ""))
    for i, (name, value) in enumerate(ratio_rows(runs, chosen)):
        row = f"| {name} | {'n/a' if value is None else f'{value:.2f}'} |"
        if per_round:
            values = [r[i][1] for r in per_round if r[i][1] is not None]
            row += f" {min(values):.2f}–{max(values):.2f} |" if values else " n/a |"
        print(row)


def main():
    groups = {}  # (model, batch) -> {(framework, config): [runs]}, in first-seen order
    for line in fileinput.input():
        line = line.strip()
        if not line.startswith("{"):
            continue
        run = json.loads(line)
        group = groups.setdefault((run["model"], int(run["batch"])), {})
        group.setdefault((run["framework"], run["config"]), []).append(run)
    for (model, batch), runs in groups.items():
        table(model, batch, runs)


if __name__ == "__main__":
    main()
