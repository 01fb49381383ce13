#!/usr/bin/env python3
"""Plots a decodebench report (schema_version 1): the roofline and throughput figures.

Reads only the JSON report (it never re-runs kernels) and writes PNGs next to --out-prefix:
  <prefix>-roofline.png     achieved bandwidth vs arithmetic intensity, with the device's
                            measured and datasheet roofs
  <prefix>-bandwidth.png    achieved bandwidth vs batch, one line per (kernel, kv dtype, context, h)
  <prefix>-tokens.png       attention-only tokens/s vs batch, same series

  scripts/plot.py results/latest.json --out-prefix results/latest
Needs matplotlib (pip install matplotlib).
"""
import argparse
import collections
import json
import sys


def load(path):
    with open(path) as f:
        report = json.load(f)
    if report.get("schema_version") != 1:
        sys.exit(f"{path}: schema_version {report.get('schema_version')!r} is not 1")
    return report


def series_key(r):
    ctx = r["context"]
    ctx_label = "-".join(str(v) for v in ctx["values"]) if ctx["kind"] == "ragged" else str(ctx["values"][0])
    return f'{r["model"]} {r["kernel"]} {r["kv_dtype"]} L={ctx_label} h={r["hit_rate"]:g}'


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report")
    ap.add_argument("--out-prefix", default=None, help="default: the report path without .json")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot.py needs matplotlib: pip install matplotlib")

    report = load(args.report)
    prefix = args.out_prefix or args.report.removesuffix(".json")
    ok = [r for r in report["results"] if r["status"] == "ok"]
    if not ok:
        sys.exit(f"{args.report}: no points with status ok to plot")
    device = report["devices"][0] if report.get("devices") else {}
    dev_name = device.get("name", "unknown device")
    # Unknown ceilings are null in a report: treat them as absent.
    bw = device.get("bandwidth") or {}
    measured = bw.get("measured") or {}
    roofs = [("measured read", measured.get("read") or 0), ("measured copy", measured.get("copy") or 0),
             ("datasheet", bw.get("datasheet") or 0)]
    flops_peak = device.get("flops_peak") or 0

    # Roofline: achieved bandwidth * intensity = achieved FLOP/s vs intensity.
    fig, ax = plt.subplots(figsize=(7, 5))
    ai = [r["arithmetic_intensity"] for r in ok]
    perf = [r["flops"] / r["time_s"]["median"] for r in ok]
    ax.scatter(ai, perf, s=14, label="points")
    lo, hi = min(ai) / 2, max(ai) * 4
    for name, roof in roofs:
        if roof:
            top = [min(roof * x, flops_peak) if flops_peak else roof * x for x in (lo, hi)]
            ax.plot([lo, hi], top, "--", label=f"{name} {roof / 1e9:.0f} GB/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte, bytes_min)")
    ax.set_ylabel("attention FLOP/s")
    ax.set_title(f"decode roofline — {dev_name}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(f"{prefix}-roofline.png", dpi=120)

    groups = collections.defaultdict(list)
    for r in ok:
        groups[series_key(r)].append(r)
    for metric, ylabel, fname, scale in (
        (lambda r: r["bandwidth"]["achieved"], "achieved bandwidth (GB/s)", "bandwidth", 1e9),
        (lambda r: r["tokens_per_s"], "tokens/s (attention only, all layers)", "tokens", 1.0),
    ):
        fig, ax = plt.subplots(figsize=(7, 5))
        for key, rows in sorted(groups.items()):
            rows.sort(key=lambda r: r["batch"])
            ax.plot([r["batch"] for r in rows], [metric(r) / scale for r in rows], marker="o", label=key)
        if fname == "bandwidth":
            for name, roof in roofs:
                if roof:
                    ax.axhline(roof / 1e9, linestyle="--", linewidth=0.8, color="gray")
                    ax.text(1, roof / 1e9, f" {name}", fontsize=7, va="bottom")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch")
        ax.set_ylabel(ylabel)
        ax.set_title(dev_name)
        ax.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(f"{prefix}-{fname}.png", dpi=120)
    print(f"wrote {prefix}-roofline.png, {prefix}-bandwidth.png, {prefix}-tokens.png")


if __name__ == "__main__":
    main()
