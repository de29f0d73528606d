"""Reads the JSON lines of scripts/compare-pytorch.sh (gpipe-bench's, tagged
with framework/model/config, and the torch benchmarks') and prints, for each
model and batch, a Markdown table of step times and the ratios that compare
the configurations. A ratio whose runs are missing reads "n/a".

  report.py results.jsonl [more.jsonl ...]     (or the lines on stdin)
"""
import fileinput
import json

# (framework, config) -> label, in table order.
LABELS = {
    ("gpipe", "k1-m1-none-1t"): "gpipe K=1 M=1, 1 thread",
    ("gpipe", "k1-m1-none"): "gpipe K=1 M=1",
    ("gpipe", "k1-m8-none-1t"): "gpipe K=1 M=8, 1 thread",
    ("gpipe", "k1-m8-none"): "gpipe K=1 M=8",
    ("gpipe", "k2-m8-none"): "gpipe K=2 M=8",
    ("gpipe", "k2-m8-full"): "gpipe K=2 M=8 remat full",
    ("gpipe", "k2-m8-none-zb-h1"): "gpipe K=2 M=8 ZB-H1",
    ("torch", "eager-1t"): "torch eager, 1 thread",
    ("torch", "eager-2t"): "torch eager, 2 threads",
    ("torch", "pipeline-k2-m8"): "torch ScheduleGPipe K=2 M=8 (2 processes)",
}


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def best(runs, keys):
    """The fastest (median) of the given configurations: (ms, label)."""
    found = [(runs[k]["step_ms_median"], LABELS[k]) for k in keys if k in runs]
    return min(found) if found else (None, "none run")


def table(model, batch, runs):
    print(f"\n### {model}, batch {batch}\n")
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

    ms = {key: r["step_ms_median"] for key, r in runs.items()}
    g = lambda config: ms.get(("gpipe", config))
    t = lambda config: ms.get(("torch", config))
    g_best, g_best_label = best(runs, [k for k in LABELS if k[0] == "gpipe"])
    t_best, t_best_label = best(runs, [("torch", "eager-1t"), ("torch", "eager-2t")])
    rows = [
        ("gpipe K=1 M=1 / torch eager, both 1 thread", ratio(g("k1-m1-none-1t"), t("eager-1t"))),
        ("gpipe K=1 M=1 / torch eager, both 2 threads", ratio(g("k1-m1-none"), t("eager-2t"))),
        ("gpipe K=1 M=8 / K=1 M=1, 1 thread (micro-batching cost)", ratio(g("k1-m8-none-1t"), g("k1-m1-none-1t"))),
        ("gpipe K=1 M=8 / K=1 M=1, 2 threads (micro-batching cost)", ratio(g("k1-m8-none"), g("k1-m1-none"))),
        ("gpipe K=1 M=8 1 thread / K=2 M=8 (pipeline speed-up)", ratio(g("k1-m8-none-1t"), g("k2-m8-none"))),
        ("gpipe K=1 M=8 2 threads / K=2 M=8 (pipeline against intra-op threads)", ratio(g("k1-m8-none"), g("k2-m8-none"))),
        ("gpipe K=2 M=8 full / none (remat cost)", ratio(g("k2-m8-full"), g("k2-m8-none"))),
        (f"gpipe best ({g_best_label}) / torch best single-process ({t_best_label})", ratio(g_best, t_best)),
        (f"torch ScheduleGPipe / gpipe best ({g_best_label})", ratio(t("pipeline-k2-m8"), g_best)),
    ]
    print("\n| ratio (of median step times) | value |")
    print("|---|---:|")
    for name, value in rows:
        print(f"| {name} | {value} |")


def main():
    groups = {}  # (model, batch) -> {(framework, config): run}, in first-seen order
    for line in fileinput.input():
        line = line.strip()
        if not line.startswith("{"):
            continue
        run = json.loads(line)
        groups.setdefault((run["model"], int(run["batch"])), {})[(run["framework"], run["config"])] = run
    for (model, batch), runs in groups.items():
        table(model, batch, runs)


if __name__ == "__main__":
    main()
