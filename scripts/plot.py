#!/usr/bin/env python3
"""Draws the figures of a decodebench report (docs/report-schema.md, schema_version 1).

Reads only the JSON report (it never re-runs kernels); only points with status "ok" that no
self-check flagged are drawn, and null values are missing values, never 0. Writes
<prefix>-<name>.png and .svg for each of:
  roofline         achieved FLOP/s vs arithmetic intensity (log-log) under the device's roofs:
                   measured read bandwidth, datasheet bandwidth, each compute peak
  tokens-vs-batch  attention-only tokens/s vs batch, one line per series, the knee marked
                   (scope attention points)
  layer-knee       scope layer: the model's tokens/s vs batch, one line per series, the knee
                   marked, with the same series' attention-only tokens/s dashed; below, the
                   share of the layer step's time in its weight GEMMs
  utilization      % busy (utilization.busy: what a dashboard shows) and % of the measured roof
                   vs batch, one colour per series, solid busy and dotted roof: busy far above
                   the roof is time spent waiting on memory
  ceiling-heatmap  fraction of the measured roof, batch x context, one panel per hit rate
  hit-rate         unique and logical bandwidth, and tokens/s, vs prefix-hit rate
  compare          change of each point against a baseline, with its interval and verdict
                   (from `decodebench compare --format json`; see --compare, --baseline)
  dtype-speedup    t_f16 / t_dtype for every non-f16 KV point that has an f16 twin
  replay           a `decodebench replay` report's operator table, one row per setting (KV
                   pool, policy, TTL, KV dtype): hit rate, blocks evicted and expired, prefill
                   saved (FLOPs), KV bytes per decode step (p10-p90), and tokens/s per kernel, measured
                   (bars) and modeled (marks), side by side
A figure with nothing to show (one hit rate only, no f16 twins, no baseline) is skipped with a
one-line message, not drawn empty.

Given the JSON of `decodebench cache-sim --out FILE` instead of a report (docs/report-schema.md
"cache_sim"), it draws one figure:
  cache-sim        hit rate and blocks evicted vs cache capacity (log x), one line per policy
                   (and ttl); an infinite capacity drawn apart at the right edge, the
                   infinite-capacity ceiling as a dashed line; ttl's expired blocks dotted

Given the JSON of `decodebench quant-error --format json` (docs/report-schema.md "quant-error"):
  quant-error      per KV format, the attention weights' mean KL and the attention output's
                   relative L2 error (log y) against the tokens/s it allows (the read
                   ceiling's bound, open markers; measured by the run's sweep, filled), the
                   Pareto front (no format both faster and more accurate) drawn through the
                   measured points when every format has one, else through the bounds

  scripts/plot.py results/latest.json                  # results/latest-*.png|svg
  scripts/plot.py new.json --baseline old.json         # runs decodebench compare
  scripts/plot.py results/latest.json --html results/latest.html   # the results page
  scripts/plot.py cache.json                           # cache.json from cache-sim --out

Importable: make_figures(report, compare) returns {name: matplotlib Figure}. Needs matplotlib
(scripts/bootstrap.sh installs it). Exit status: 0 written, 2 bad input, 3 a decodebench
command failed.
"""
import argparse
import collections
import json
import math
import os
import subprocess
import sys
import textwrap

try:
    import matplotlib

    matplotlib.use("Agg")  # no display needed; Figure.savefig then renders with Agg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator
except ImportError:
    sys.exit("plot.py needs matplotlib for this python3 (" + sys.executable + "): run "
             "scripts/bootstrap.sh, or python3 -m pip install matplotlib")

FIGURE_NAMES = ("roofline", "tokens-vs-batch", "layer-knee", "utilization", "ceiling-heatmap",
                "hit-rate", "compare", "dtype-speedup", "replay")
CACHE_SIM_FIGURES = ("cache-sim",)  # from a `decodebench cache-sim --out` file, not a report
QUANT_FIGURES = ("quant-error",)  # from `decodebench quant-error --format json`
SCHEMA_VERSION = 1
COMPARE_KIND, COMPARE_VERSION = "decodebench-compare", 1
VERDICT_COLORS = {"SAME": "tab:gray", "SLOWER": "tab:red", "FASTER": "tab:green",
                  "AMBIGUOUS": "tab:orange"}
BASE_DTYPE = "f16"
EXIT_BAD_INPUT, EXIT_COMMAND_FAILED = 2, 3
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DECODEBENCH = os.path.join(REPO_ROOT, "build", "src", "cli", "decodebench")

# A point's identity in a report (docs/report-schema.md, the knee series key plus batch). The
# kernel is the one requested: "auto" is one series even where its choice changes with batch.
IDENTITY = ("scope", "model", "kernel_requested", "kv_dtype", "q_dtype", "block_size", "prefix_groups",
            "context", "hit_rate", "batch")


class PlotError(Exception):
    """Bad input or a failed command: the message says what and what is valid."""

    def __init__(self, message, exit_code=EXIT_BAD_INPUT):
        super().__init__(message)
        self.exit_code = exit_code


# ---- reading ---------------------------------------------------------------------------------

def load_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise PlotError(f"{path}: no such file (expected {what})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PlotError(f"{path}: cannot read {what}: {e}") from None
    except json.JSONDecodeError as e:
        raise PlotError(f"{path}: not JSON ({e}); expected {what}") from None


def check_report(report, path="report"):
    """Raises PlotError unless `report` is a schema-1 decodebench report with an ok point."""
    if not isinstance(report, dict) or "schema_version" not in report:
        raise PlotError(f"{path}: not a decodebench report (no schema_version; expected the JSON "
                        "that `decodebench sweep --out` writes)")
    if report["schema_version"] != SCHEMA_VERSION:
        raise PlotError(f"{path}: schema_version {report['schema_version']!r} is not "
                        f"{SCHEMA_VERSION}, the only version plot.py reads")
    for key, kind in (("results", list), ("devices", list), ("knees", list)):
        if not isinstance(report.get(key), kind):
            raise PlotError(f"{path}: '{key}' missing or not a {kind.__name__}")
    if not report["devices"]:
        raise PlotError(f"{path}: 'devices' is empty; a report names the device it ran on")
    ok = ok_points(report)
    if not ok:
        statuses = collections.Counter(r.get("status") for r in report["results"])
        found = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) or "no points"
        raise PlotError(f"{path}: no points with status ok to plot ({found})")
    for i, r in enumerate(report["results"]):
        if r.get("status") != "ok":
            continue
        for key in ("model", "kernel", "kernel_requested", "kv_dtype", "batch", "context",
                    "hit_rate", "flops", "arithmetic_intensity", "time_s", "bandwidth",
                    "roofline"):
            if key not in r:
                raise PlotError(f"{path}: results[{i}].{key} missing")


def load_report(path):
    report = load_json(path, "a decodebench report")
    check_report(report, path)
    return report


def check_compare(compare, path="compare"):
    kind = compare.get("kind") if isinstance(compare, dict) else None
    if kind != COMPARE_KIND:
        raise PlotError(f"{path}: not a compare result (kind {kind!r}; expected {COMPARE_KIND!r} "
                        "from `decodebench compare BASE NEW --format json`)")
    if compare.get("version") != COMPARE_VERSION:
        raise PlotError(f"{path}: compare version {compare.get('version')!r} is not "
                        f"{COMPARE_VERSION}, the only version plot.py reads")
    if not isinstance(compare.get("points"), list):
        raise PlotError(f"{path}: 'points' missing or not a list")


def load_compare(path):
    compare = load_json(path, "a decodebench compare JSON")
    check_compare(compare, path)
    return compare


def ok_points(report):
    # A row a self-check flagged (results[].flags) is ok as measured but no result: not drawn.
    return [r for r in report["results"] if r.get("status") == "ok" and not r.get("flags")]


def num(value):
    """A report number, or NaN for null (missing, never 0)."""
    return float("nan") if value is None else float(value)


def dig(r, *keys):
    for k in keys:
        if not isinstance(r, dict):
            return None
        r = r.get(k)
    return r


def context_key(ctx):
    return (ctx["kind"], tuple(ctx["values"]))


def context_label(ctx):
    values = ctx["values"]
    return f"{values[0]}:{values[1]}" if ctx["kind"] == "ragged" else str(values[0])


def context_sort(ctx):
    return (tuple(ctx["values"]), ctx["kind"])


def identity(r, without=()):
    """The point's identity as a hashable tuple, leaving out the fields in `without`."""
    out = []
    for f in IDENTITY:
        if f in without:
            continue
        out.append(identity_value(r, f))
    return tuple(out)


def kernel_label(rows):
    """The kernel as requested; for "auto" also what it chose."""
    requested = rows[0]["kernel_requested"]
    if requested != "auto":
        return requested
    return "auto→" + "/".join(sorted({r["kernel"] for r in rows}))


FIELD_LABELS = {
    "scope": lambda r: f"scope={scope_of(r)}",
    "model": lambda r: r["model"],
    "kernel_requested": lambda r: r["kernel_requested"] if r["kernel_requested"] != "auto"
    else f"auto→{r['kernel']}",
    "kv_dtype": lambda r: f"kv={r['kv_dtype']}",
    "q_dtype": lambda r: f"q={r['q_dtype']}",
    "block_size": lambda r: f"P={r['block_size']}",
    "prefix_groups": lambda r: f"G={r['prefix_groups']}",
    "context": lambda r: f"ctx={context_label(r['context'])}",
    "hit_rate": lambda r: f"h={r['hit_rate']:g}",
    "batch": lambda r: f"b={r['batch']}",
}


def varying(points, fields):
    """The fields (in IDENTITY order) that take more than one value over `points`."""
    return [f for f in IDENTITY if f in fields and len({identity_value(r, f) for r in points}) > 1]


def identity_value(r, f):
    if f == "scope":
        return scope_of(r)
    return context_key(r[f]) if f == "context" else r.get(f)


def scope_of(r):
    """A point's or knee's scope; reports from before scopes hold attention points only."""
    return r.get("scope") or "attention"


def label(r, fields):
    return " ".join(FIELD_LABELS[f](r) for f in fields) or "all points"


def describe(report, points):
    """'<device> (<backend>), <models>, KV <dtypes>': the subject of every title."""
    dev = report["devices"][0]
    models = ", ".join(sorted({r["model"] for r in points}))
    dtypes = ", ".join(sorted({r["kv_dtype"] for r in points}))
    device = f"{dev.get('name', 'unknown device')} ({dev.get('backend', '?')})"
    return f"{device} — {models} — KV {dtypes}"


def grouped(points, without):
    """Points grouped by identity less `without`, in a stable order (first appearance)."""
    groups = collections.OrderedDict()
    for r in points:
        groups.setdefault(identity(r, without), []).append(r)
    return groups


def si(value, unit):
    """4.3e12, "B/s" -> "4.3 TB/s": three significant digits, SI prefix."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def new_figure(width, height):
    return Figure(figsize=(width, height), layout="constrained")


# ---- roofline --------------------------------------------------------------------------------

def roofs(device):
    """(bandwidth roofs, compute roofs) of a device entry: [(label, value)], nulls left out."""
    bw = device.get("bandwidth") or {}
    memory = []
    read = dig(bw, "measured", "read")
    if read:
        memory.append(("measured read", read))
    if bw.get("datasheet"):
        memory.append(("datasheet", bw["datasheet"]))
    compute = []
    if device.get("flops_measured"):
        compute.append(("measured FMA peak", device["flops_measured"]))
    for key in sorted(k for k in device if k == "flops_peak" or k.startswith("flops_peak_")):
        # The CPU has no datasheet peak: its flops_peak is the measured rate, drawn once.
        if device[key] and device[key] != device.get("flops_measured"):
            unit = key[len("flops_peak_"):] if key != "flops_peak" else "fp32 FMA"
            compute.append((f"peak {unit.replace('_', ' ')}", device[key]))
    return memory, compute


def fig_roofline(report, points):
    device = report["devices"][0]
    memory, compute = roofs(device)
    fig = new_figure(8, 5.5)
    ax = fig.add_subplot()
    kernels = sorted({r["kernel"] for r in points})
    dtypes = sorted({r["kv_dtype"] for r in points})
    colors = {k: f"C{i % 10}" for i, k in enumerate(kernels)}
    markers = {d: "osD^v<>ph*"[i % 10] for i, d in enumerate(dtypes)}
    xs, ys = [], []
    for kernel in kernels:
        for dtype in dtypes:
            rows = [r for r in points if r["kernel"] == kernel and r["kv_dtype"] == dtype
                    and dig(r, "time_s", "median")]
            if not rows:
                continue
            x = [r["arithmetic_intensity"] for r in rows]
            y = [r["flops"] / r["time_s"]["median"] for r in rows]
            xs += x
            ys += y
            ax.scatter(x, y, color=colors[kernel], marker=markers[dtype], s=28, alpha=0.85,
                       edgecolors="black", linewidths=0.3, label=f"{kernel} kv={dtype}",
                       gid="points")
    if not xs:
        raise PlotError("roofline: no ok point has a median time")
    top_bw = max((v for _, v in memory), default=None)
    top_flops = max((v for _, v in compute), default=None)
    x_lo, x_hi = min(xs) / 2, max(xs) * 4
    if top_flops:  # show where each bandwidth roof meets the highest compute roof
        ridges = [top_flops / bw for _, bw in memory]
        x_lo, x_hi = min([x_lo] + [r / 2 for r in ridges]), max([x_hi] + [r * 2 for r in ridges])
    for i, (name, bw) in enumerate(memory):
        x0, x1 = x_lo, x_hi
        if top_flops:
            x1 = min(x1, top_flops / bw)  # the roof bends at the highest compute peak
        ax.plot([x0, x1], [bw * x0, bw * x1], linestyle=("--", ":")[i % 2], color="black",
                linewidth=1.2, label=f"{name} {si(bw, 'B/s')}", gid="roof")
    for i, (name, peak) in enumerate(compute):
        x0 = peak / top_bw if top_bw else x_lo
        ax.plot([max(x0, x_lo), x_hi], [peak, peak], linestyle="-.", color=f"C{(i + 5) % 10}",
                linewidth=1.2, label=f"{name} {si(peak, 'FLOP/s')}", gid="roof")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    y_all = ys + [bw * x_lo for _, bw in memory] + [peak for _, peak in compute]
    ax.set_ylim(min(y_all) / 2, max(ys + [peak for _, peak in compute]) * 2)
    ax.set_xlabel("arithmetic intensity (FLOP / byte of bytes.min)")
    ax.set_ylabel("achieved attention FLOP/s (flops / median step time)")
    ax.set_title(f"Roofline: {describe(report, points)}", fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="upper left")
    return fig


# ---- tokens vs batch -------------------------------------------------------------------------

def knee_matches(knee, r):
    return (scope_of(knee) == scope_of(r) and knee["model"] == r["model"] and knee["kernel"] == r["kernel_requested"]
            and knee["kv_dtype"] == r["kv_dtype"]
            and knee.get("q_dtype", r["q_dtype"]) == r["q_dtype"]
            and knee.get("block_size", r["block_size"]) == r["block_size"]
            and knee.get("prefix_groups", r["prefix_groups"]) == r["prefix_groups"]
            and context_key(knee["context"]) == context_key(r["context"])
            and math.isclose(knee["hit_rate"], r["hit_rate"], abs_tol=1e-9))


def style_maps(points):
    """Colour by context, line style by KV dtype, marker by hit rate: each readable alone."""
    contexts = sorted({context_key(r["context"]) for r in points}, key=lambda c: (c[1], c[0]))
    dtypes = sorted({r["kv_dtype"] for r in points})
    hits = sorted({r["hit_rate"] for r in points})
    return (lambda r: {"color": f"C{contexts.index(context_key(r['context'])) % 10}",
                       "linestyle": ("-", "--", ":", "-.")[dtypes.index(r["kv_dtype"]) % 4],
                       "marker": "osD^v<>p"[hits.index(r["hit_rate"]) % 8]})


def panels_by_kernel(points):
    kernels = list(collections.OrderedDict.fromkeys(r["kernel_requested"] for r in points))
    return [(k, [r for r in points if r["kernel_requested"] == k]) for k in kernels]


def mark_knee(ax, knees, first, batches, tokens, color):
    """A star at the knee of the series `first` belongs to, where the report lists one."""
    knee = next((k for k in knees if knee_matches(k, first)), None)
    if knee is None or knee["knee_batch"] not in batches:
        return
    y = tokens[batches.index(knee["knee_batch"])]
    if not math.isnan(y):
        ax.plot([knee["knee_batch"]], [y], marker="*", markersize=15, color=color,
                markeredgecolor="black", linestyle="none", label="_knee", gid="knee")


def fig_tokens_vs_batch(report, points):
    panels = panels_by_kernel(points)
    fig = new_figure(6.5 * len(panels), 5)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    series_fields = [f for f in IDENTITY if f not in ("batch", "kernel_requested")]
    shown = varying(points, series_fields)
    style = style_maps(points)
    knees = report.get("knees") or []
    for ax, (kernel, rows) in zip(axes, panels):
        for key, series in grouped(rows, ("batch",)).items():
            series.sort(key=lambda r: r["batch"])
            st = style(series[0])
            batches = [r["batch"] for r in series]
            tokens = [num(r.get("tokens_per_s")) for r in series]
            ax.plot(batches, tokens, label=label(series[0], shown), linewidth=1.3,
                    markersize=4, gid="series", **st)
            mark_knee(ax, knees, series[0], batches, tokens, st["color"])
        ax.set_xscale("log", base=2)
        batches = sorted({r["batch"] for r in rows})
        ax.set_xticks(batches, [str(b) for b in batches])
        ax.minorticks_off()
        ax.set_yscale("log")
        ax.set_xlabel("batch (sequences)")
        ax.set_ylabel("tokens/s (attention only, all layers)")
        ax.set_title(f"kernel {kernel_label(rows)}", fontsize=9)
        ax.grid(True, which="both", alpha=0.25)
        handles, labels = ax.get_legend_handles_labels()
        handles.append(Line2D([], [], marker="*", markersize=12, color="gray",
                              markeredgecolor="black", linestyle="none"))
        labels.append("knee: smallest batch ≥ 90 % of max bandwidth")
        ax.legend(handles, labels, fontsize=6.5, loc="best")
    fig.suptitle(f"Tokens/s vs batch: {describe(report, points)}", fontsize=9)
    return fig


def layer_time_share(r):
    """The share of a layer step's stage time spent in its weight GEMMs (NaN if not recorded)."""
    t = dig(r, "layer", "time_s") or {}
    w, kv = num(t.get("weights")), num(t.get("kv"))
    return w / (w + kv) if w + kv > 0 else float("nan")


def fig_layer_knee(report, points):
    layer = [r for r in points if scope_of(r) == "layer"]
    attention = {identity(r, ("scope",)): r for r in points if scope_of(r) == "attention"}
    panels = panels_by_kernel(layer)
    fig = new_figure(max(6.5 * len(panels), 8), 8)
    axes = fig.subplots(2, len(panels), squeeze=False, height_ratios=(2, 1))
    series_fields = [f for f in IDENTITY if f not in ("batch", "kernel_requested", "scope")]
    shown = varying(layer, series_fields)
    style = style_maps(layer)
    knees = report.get("knees") or []
    for col, (kernel, rows) in enumerate(panels):
        ax, share_ax = axes[0][col], axes[1][col]
        for key, series in grouped(rows, ("batch",)).items():
            series.sort(key=lambda r: r["batch"])
            st = style(series[0])
            batches = [r["batch"] for r in series]
            tokens = [num(r.get("tokens_per_s")) for r in series]
            ax.plot(batches, tokens, label=label(series[0], shown), linewidth=1.5,
                    markersize=4, gid="series", **st)
            twins = [attention.get(identity(r, ("scope",))) for r in series]
            if any(twins):
                xs = [b for b, t in zip(batches, twins) if t]
                ys = [num(t.get("tokens_per_s")) for t in twins if t]
                ax.plot(xs, ys, color=st["color"], linestyle=":", linewidth=1, marker=st["marker"],
                        markersize=3, alpha=0.6, label="_attention", gid="attention")
            share_ax.plot(batches, [layer_time_share(r) for r in series], linewidth=1.2,
                          markersize=4, **st)
            mark_knee(ax, knees, series[0], batches, tokens, st["color"])
        batches = sorted({r["batch"] for r in rows})
        for a in (ax, share_ax):
            a.set_xscale("log", base=2)
            a.set_xticks(batches, [str(b) for b in batches])
            a.minorticks_off()
            a.grid(True, which="both", alpha=0.25)
        ax.set_yscale("log")
        ax.set_ylabel("tokens/s of the model (all layers)")
        ax.set_title(f"kernel {kernel_label(rows)}", fontsize=9)
        share_ax.set_ylim(0, 1)
        share_ax.set_xlabel("batch (sequences)")
        share_ax.set_ylabel("share of step time\nin the weight GEMMs")
        handles, labels = ax.get_legend_handles_labels()
        handles += [Line2D([], [], color="gray", linestyle=":", linewidth=1),
                    Line2D([], [], marker="*", markersize=12, color="gray",
                           markeredgecolor="black", linestyle="none")]
        labels += ["attention only (same series)", "knee: smallest batch ≥ 90 % of max tokens/s"]
        ax.legend(handles, labels, fontsize=6.5, loc="best")
    fig.suptitle(textwrap.fill(f"One layer's step vs its attention alone, tokens/s vs batch: "
                               f"{describe(report, layer)}", 100), fontsize=9)
    return fig


# ---- busy beside the roof --------------------------------------------------------------------

def busy_of(r):
    """A point's busy fraction (utilization.busy), NaN where not measured or unavailable."""
    return num(dig(r, "utilization", "busy"))


def fig_utilization(report, points):
    panels = panels_by_kernel(points)
    fig = new_figure(6.5 * len(panels), 5)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    series_fields = [f for f in IDENTITY if f not in ("batch", "kernel_requested")]
    shown = varying(points, series_fields)
    style = style_maps(points)
    top = 105.0
    for ax, (kernel, rows) in zip(axes, panels):
        for key, series in grouped(rows, ("batch",)).items():
            series.sort(key=lambda r: r["batch"])
            st = style(series[0])
            batches = [r["batch"] for r in series]
            busy = [100 * busy_of(r) for r in series]
            roof = [100 * num(dig(r, "roofline", "fraction_measured")) for r in series]
            top = max([top] + [v + 5 for v in busy + roof if not math.isnan(v)])
            ax.plot(batches, busy, label=label(series[0], shown), linewidth=1.5, markersize=4,
                    gid="busy", **st)
            ax.plot(batches, roof, color=st["color"], marker=st["marker"], linestyle=":",
                    linewidth=1.2, markersize=3, label="_roof", gid="roof")
        ax.set_xscale("log", base=2)
        batches = sorted({r["batch"] for r in rows})
        ax.set_xticks(batches, [str(b) for b in batches])
        ax.minorticks_off()
        ax.axhline(100, color="black", linewidth=0.8, alpha=0.5)
        ax.set_xlabel("batch (sequences)")
        ax.set_ylabel("%")
        ax.set_title(f"kernel {kernel_label(rows)}", fontsize=9)
        ax.grid(True, which="both", alpha=0.25)
        handles, labels = ax.get_legend_handles_labels()
        handles += [Line2D([], [], color="gray", linewidth=1.5),
                    Line2D([], [], color="gray", linestyle=":", linewidth=1.2)]
        labels += ["% busy (what a utilization dashboard shows)",
                   "% of the measured roof (t_roof / median)"]
        ax.legend(handles, labels, fontsize=6.5, loc="best")
    for ax in axes:
        ax.set_ylim(0, top)
    fig.suptitle(textwrap.fill(f"Busy beside the roof vs batch (busy but far below the roof: "
                               f"waiting on memory): {describe(report, points)}", 110),
                 fontsize=9)
    return fig


# ---- ceiling heatmap -------------------------------------------------------------------------

def fig_ceiling_heatmap(report, points):
    hits = sorted({r["hit_rate"] for r in points})
    rows_key = [f for f in IDENTITY if f not in ("batch", "context", "hit_rate")]
    row_groups = list(grouped(points, ("batch", "context", "hit_rate")).values())
    shown = varying(points, rows_key)
    batches = sorted({r["batch"] for r in points})
    contexts = sorted({context_key(r["context"]): r["context"] for r in points}.values(),
                      key=context_sort)
    values = [dig(r, "roofline", "fraction_measured") for r in points]
    vmax = max([1.0] + [v for v in values if v is not None])
    fig = new_figure(1.2 + 0.9 * len(contexts) * len(hits) + 1.2,
                     1.0 + (0.45 * len(batches) + 0.8) * len(row_groups))
    axes = fig.subplots(len(row_groups), len(hits), squeeze=False)
    image = None
    for i, group in enumerate(row_groups):
        for j, h in enumerate(hits):
            ax = axes[i][j]
            grid = [[float("nan")] * len(contexts) for _ in batches]
            for r in group:
                if r["hit_rate"] != h:
                    continue
                v = dig(r, "roofline", "fraction_measured")
                bi = batches.index(r["batch"])
                ci = [context_key(c) for c in contexts].index(context_key(r["context"]))
                grid[bi][ci] = num(v)
            image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=vmax, aspect="auto",
                              origin="lower")
            for bi, line in enumerate(grid):
                for ci, v in enumerate(line):
                    if not math.isnan(v):
                        ax.text(ci, bi, f"{100 * v:.0f}%", ha="center", va="center", fontsize=7,
                                color="white" if v < 0.6 * vmax else "black", gid="cell")
            ax.set_xticks(range(len(contexts)), [context_label(c) for c in contexts])
            ax.set_yticks(range(len(batches)), [str(b) for b in batches])
            ax.set_xlabel("context (tokens)", fontsize=8)
            ax.set_ylabel("batch", fontsize=8)
            name = label(group[0], shown)
            ax.set_title(f"h={h:g}" + (f" — {name}" if shown else ""), fontsize=8)
            ax.tick_params(labelsize=7)
    fig.colorbar(image, ax=axes, label="fraction of the measured roof (t_roof / median)",
                 shrink=min(0.9, 3.0 / len(row_groups)), aspect=15)
    fig.suptitle(f"Fraction of the measured roof (blank: no ok point or no roof)\n"
                 f"{describe(report, points)}", fontsize=8)
    return fig


# ---- hit rate --------------------------------------------------------------------------------

def fig_hit_rate(report, points):
    panels = panels_by_kernel(points)
    series_fields = [f for f in IDENTITY if f not in ("hit_rate", "kernel_requested")]
    shown = varying(points, series_fields)
    most = max(len(grouped(rows, ("hit_rate",))) for _, rows in panels)
    fig = new_figure(13 + (2.5 if most > 10 else 0), 4.2 * len(panels))
    axes = fig.subplots(len(panels), 2, squeeze=False)
    palette = matplotlib.colormaps["tab20" if most > 10 else "tab10"]
    read = dig(report["devices"][0], "bandwidth", "measured", "read")
    for (ax_bw, ax_tok), (kernel, rows) in zip(axes, panels):
        for n, series in enumerate(grouped(rows, ("hit_rate",)).values()):
            series.sort(key=lambda r: r["hit_rate"])
            h = [r["hit_rate"] for r in series]
            color = palette(n % palette.N)
            ax_bw.plot(h, [num(dig(r, "bandwidth", "achieved")) / 1e9 for r in series],
                       color=color, marker="o", markersize=3, label="_unique", gid="unique")
            ax_bw.plot(h, [num(dig(r, "bandwidth", "logical")) / 1e9 for r in series],
                       color=color, marker="x", markersize=4, linestyle="--",
                       label="_logical", gid="logical")
            ax_tok.plot(h, [num(r.get("tokens_per_s")) for r in series], color=color,
                        marker="o", markersize=3, label=label(series[0], shown), gid="tokens")
        keys = [Line2D([], [], color="gray", marker="o", markersize=3,
                       label="unique (bandwidth.achieved)"),
                Line2D([], [], color="gray", marker="x", linestyle="--",
                       label="logical (bandwidth.logical)")]
        if read:
            keys.append(ax_bw.axhline(read / 1e9, color="black", linestyle=":", linewidth=1,
                                      label=f"measured read {si(read, 'B/s')}", gid="roof"))
        ax_bw.legend(handles=keys, fontsize=7, loc="best")
        ax_bw.set_yscale("log")
        ax_bw.set_ylabel("bandwidth (GB/s)")
        ax_tok.set_yscale("log")
        ax_tok.set_ylabel("tokens/s (attention only, all layers)")
        ax_tok.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1),
                      title="series (colour)", title_fontsize=7)
        for ax in (ax_bw, ax_tok):
            ax.set_xlabel("prefix-hit rate (requested)")
            ax.set_title(f"kernel {kernel_label(rows)}", fontsize=9)
            ax.grid(True, which="both", alpha=0.25)
    fig.suptitle(f"Bandwidth and tokens/s vs hit rate: {describe(report, points)}", fontsize=9)
    return fig


# ---- compare ---------------------------------------------------------------------------------

def compare_space(p):
    """The (ratio, ci) that decided the point: normalized when it alone decided, else raw."""
    space = p.get("normalized") if p.get("decided_by") == "normalized" else None
    space = space or p.get("raw") or {}
    return space.get("ratio"), space.get("ci")


def fig_compare(compare, report=None):
    points = [p for p in compare["points"] if compare_space(p)[0] is not None]
    if not points:
        raise PlotError("compare: no compared point has a ratio")
    fig = new_figure(10, 1.6 + 0.28 * len(points))
    ax = fig.add_subplot()
    by_verdict = collections.OrderedDict((v, []) for v in VERDICT_COLORS)
    for y, p in enumerate(points):
        by_verdict.setdefault(p.get("verdict", "?"), []).append((y, p))
    for verdict, rows in by_verdict.items():
        if not rows:
            continue
        xs, lo, hi = [], [], []
        for _, p in rows:
            ratio, ci = compare_space(p)
            x = 100 * (ratio - 1)
            xs.append(x)
            ci = ci if ci and None not in ci else [ratio, ratio]
            lo.append(x - 100 * (ci[0] - 1))
            hi.append(100 * (ci[1] - 1) - x)
        ax.errorbar(xs, [y for y, _ in rows], xerr=[lo, hi], fmt="o", capsize=3, markersize=5,
                    color=VERDICT_COLORS.get(verdict, "tab:purple"),
                    label=f"{verdict} ({len(rows)})")
    ax.axvline(0, color="black", linewidth=0.8)
    threshold = compare.get("threshold")
    if threshold:
        ax.axvspan(-100 * threshold, 100 * threshold, color="tab:gray", alpha=0.12,
                   label=f"±{100 * threshold:g} % threshold")
    ax.set_yticks(range(len(points)), [p["key"] for p in points], fontsize=6.5)
    ax.invert_yaxis()
    ax.set_xlabel("change of the median step time (current / baseline − 1, %); > 0 is slower")
    base, cur = compare.get("baseline") or {}, compare.get("current") or {}
    devices = ", ".join(cur.get("devices") or []) or (
        describe(report, ok_points(report)) if report else "")
    ax.set_title(f"Compare {cur.get('git_sha', '?')} vs baseline {base.get('git_sha', '?')}: "
                 f"{devices}\n{textwrap.fill(compare.get('test', ''), 110)}", fontsize=8)
    ax.grid(True, axis="x", alpha=0.25)
    ax.legend(fontsize=7, loc="best")
    return fig


# ---- dtype speedup ---------------------------------------------------------------------------

def dtype_twins(points):
    """[(f16 point, other point)] for every timed non-f16 point with a timed f16 twin."""
    timed = [r for r in points if dig(r, "time_s", "median")]
    base = {identity(r, ("kv_dtype",)): r for r in timed if r["kv_dtype"] == BASE_DTYPE}
    return [(base[identity(r, ("kv_dtype",))], r) for r in timed
            if r["kv_dtype"] != BASE_DTYPE and identity(r, ("kv_dtype",)) in base]


def fig_dtype_speedup(report, points):
    pairs = dtype_twins(points)
    dtypes = sorted({r["kv_dtype"] for _, r in pairs})
    groups = list(collections.OrderedDict.fromkeys(identity(r, ("kv_dtype",)) for _, r in pairs))
    shown = varying([r for _, r in pairs], [f for f in IDENTITY if f != "kv_dtype"])
    group_label = {identity(r, ("kv_dtype",)): label(r, shown) for _, r in pairs}
    fig = new_figure(max(7, 0.35 * len(groups) * len(dtypes) + 2), 5.5)
    ax = fig.add_subplot()
    width = 0.8 / len(dtypes)
    for i, dtype in enumerate(dtypes):
        xs, ys = [], []
        for f16, r in pairs:
            if r["kv_dtype"] == dtype:
                xs.append(groups.index(identity(r, ("kv_dtype",))) + (i - (len(dtypes) - 1) / 2)
                          * width)
                ys.append(f16["time_s"]["median"] / r["time_s"]["median"])
        ax.bar(xs, ys, width=width, color=f"C{i % 10}", label=f"kv={dtype}")
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_xticks(range(len(groups)), [group_label[g] for g in groups], rotation=60, ha="right",
                  fontsize=6.5)
    ax.set_ylabel(f"speedup over kv={BASE_DTYPE} (t_{BASE_DTYPE} / t_dtype, median step time)")
    ax.set_title(f"KV dtype speedup: {describe(report, points)}", fontsize=9)
    ax.grid(True, axis="y", alpha=0.25)
    ax.legend(fontsize=7)
    return fig


# ---- replay ----------------------------------------------------------------------------------

def replay_setting_label(setting):
    policy = setting.get("policy", "?")
    if policy == "ttl" and setting.get("ttl_s") is not None:
        policy = f"ttl {setting['ttl_s']:g} s"
    pool = setting.get("kv_pool_bytes")
    pool = f"{pool / 1e9:.3g} GB" if isinstance(pool, (int, float)) else "?"
    label = f"{pool} {policy} {setting.get('kv_dtype', '?')}"
    host = setting.get("host_capacity_tokens")
    if isinstance(host, (int, float)) and host > 0:
        label += f" + host {host:.3g} tok"
        if setting.get("link"):
            label += f" {setting['link']} {setting.get('reload_policy', '?')}"
    return label


def fig_replay(report):
    replay = report["replay"]
    cells = replay.get("settings") or []
    labels = [replay_setting_label(c.get("setting", {})) for c in cells]
    fig = new_figure(15, 2.6 + 0.42 * max(len(cells), 2))
    axes = fig.subplots(1, 5, sharey=True)
    y = list(range(len(cells)))
    sched = [c.get("schedule", {}) for c in cells]
    # A missing value draws no bar (width 0), never a NaN bar.
    nums = lambda rows, *keys: [num(dig(r, *keys)) for r in rows]  # noqa: E731
    bar = lambda v: 0 if v is None or math.isnan(v) else v  # noqa: E731
    tiered = any(isinstance(r.get("tiers"), dict) or isinstance(r.get("prefill_link"), dict)
                 for r in sched)
    if tiered:
        draw_tier_panels(axes, y, sched, nums, bar)
    else:
        draw_cache_panels(axes, y, sched, nums, bar)
    draw_tokens_panel(axes[4], y, cells, bar)
    axes[0].set_yticks(y, labels, fontsize=8)
    axes[0].invert_yaxis()
    for ax in axes:
        ax.grid(True, axis="x", alpha=0.25)
        ax.set_xlim(left=0)
        # Five panels side by side: few, small tick labels, or the long ones run together.
        ax.xaxis.set_major_locator(MaxNLocator(3))
        ax.tick_params(axis="x", labelsize=7)
        ax.xaxis.label.set_size(8)
    trace = replay.get("trace", {})
    device = dig(replay, "schedule_model", "device") or "?"
    title = (f"Trace replay: {os.path.basename(str(trace.get('source', '?')))}, "
             f"{trace.get('requests', '?')} requests, {replay.get('model', '?')}, scope "
             f"{replay.get('scope', '?')}; schedule modeled for {device}; steps measured on "
             f"{describe(report, ok_points(report))}")
    fig.suptitle(textwrap.fill(title, 180), fontsize=8)
    return fig


def draw_cache_panels(axes, y, sched, nums, bar):
    """One KV pool: hit rate, evictions, prefill saved, KV bytes per step."""
    hit = [100 * bar(h) for h in nums(sched, "hit_rate")]
    axes[0].barh(y, hit, color="C0", gid="hit-rate")
    axes[0].set_xlabel("hit rate (% of prompt tokens)")
    evicted, expired = nums(sched, "blocks", "evicted"), nums(sched, "blocks", "expired")
    axes[1].barh(y, [bar(e) for e in evicted], color="C1", label="evicted", gid="evicted")
    axes[1].barh(y, [bar(e) for e in expired], left=[bar(e) for e in evicted], color="C1",
                 alpha=0.4, label="expired (ttl)", gid="expired")
    axes[1].set_xlabel("prefix blocks evicted + expired")
    axes[1].legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1), ncol=2, frameon=False)
    saved = [bar(v) / 1e15 for v in nums(sched, "prefill_flops_saved")]
    axes[2].barh(y, saved, color="C2", gid="prefill-saved")
    axes[2].set_xlabel("prefill PFLOP saved")
    p10, p50, p90 = (nums(sched, "kv_bytes_per_step", q) for q in ("p10", "p50", "p90"))
    mb = [bar(v) / 1e6 for v in p50]
    err = [[max(0.0, bar(m) - bar(lo)) / 1e6 for m, lo in zip(p50, p10)],
           [max(0.0, bar(hi) - bar(m)) / 1e6 for m, hi in zip(p50, p90)]]
    axes[3].barh(y, mb, xerr=err, color="C4", capsize=2, gid="kv-bytes")
    axes[3].set_xlabel("KV MB per decode step (p50, p10-p90)")


def draw_tier_panels(axes, y, sched, nums, bar):
    """A host tier or a prefill link: hits by tier, link traffic, recomputation, time to first
    token."""
    hbm = [100 * bar(h) for h in nums(sched, "tiers", "hit_rate_by_tier", "hbm")]
    # A setting without a host tier has all its hits in HBM.
    hbm = [h if isinstance(r.get("tiers"), dict) else 100 * bar(num(r.get("hit_rate")))
           for h, r in zip(hbm, sched)]
    host = [100 * bar(h) for h in nums(sched, "tiers", "hit_rate_by_tier", "host")]
    axes[0].barh(y, hbm, color="C0", label="in HBM", gid="hit-rate-hbm")
    axes[0].barh(y, host, left=hbm, color="C0", alpha=0.45, label="in the host tier",
                 gid="hit-rate-host")
    axes[0].set_xlabel("hit rate (% of prompt tokens)")
    axes[0].legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1), ncol=2, frameon=False)
    h = 0.4
    to_hbm = [bar(v) / 1e9 for v in nums(sched, "tiers", "link_bytes", "to_hbm")]
    to_host = [bar(v) / 1e9 for v in nums(sched, "tiers", "link_bytes", "to_host")]
    prefill = [bar(v) / 1e9 for v in nums(sched, "prefill_link", "bytes")]
    axes[1].barh([v - h / 2 for v in y], to_hbm, height=h / 2, color="C2",
                 label="host -> HBM", gid="link-to-hbm")
    axes[1].barh(y, to_host, height=h / 2, color="C1", label="HBM -> host", gid="link-to-host")
    axes[1].barh([v + h / 2 for v in y], prefill, height=h / 2, color="C5",
                 label="prefill node -> HBM", gid="link-prefill")
    busy = zip(nums(sched, "tiers", "link_busy_fraction", "to_hbm"),
               nums(sched, "tiers", "link_busy_fraction", "to_host"),
               nums(sched, "prefill_link", "busy_fraction"))
    for v, (a, b, c) in zip(y, busy):
        parts = (("in", a), ("out", b), ("prefill", c))
        text = "  ".join(f"{name} {100 * x:.1f}%" for name, x in parts
                         if x is not None and not math.isnan(x))
        if text:
            axes[1].annotate(f"busy {text}", (0, v), xytext=(2, 7), textcoords="offset points",
                             fontsize=6)
    axes[1].set_xlabel("GB over the links")
    axes[1].legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1), ncol=2, frameon=False)
    host_re = [bar(v) for v in nums(sched, "tiers", "recomputed_tokens")]
    preempt_re = [bar(v) for v in nums(sched, "recomputed_tokens")]
    axes[2].barh(y, host_re, color="C3", label="host hits recomputed", gid="recomputed-host")
    axes[2].barh(y, preempt_re, left=host_re, color="C3", alpha=0.45,
                 label="after preemption", gid="recomputed-preempted")
    axes[2].set_xlabel("tokens prefilled again")
    axes[2].legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1), ncol=1, frameon=False)
    ttft = [bar(v) for v in nums(sched, "ttft_s", "p50")]
    wait = [bar(v) for v in nums(sched, "link_wait_s", "p99")]
    axes[3].barh(y, ttft, color="C4", label="time to first token p50", gid="ttft")
    axes[3].plot(wait, y, linestyle="none", marker="|", markersize=12, color="black",
                 label="link wait p99", gid="link-wait")
    axes[3].set_xlabel("seconds (modeled)")
    axes[3].legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1), ncol=1, frameon=False)


def draw_tokens_panel(ax, y, cells, bar):
    """Measured decode tokens/s per kernel, the schedule's modeled rate as a tick."""
    kernels = []
    for c in cells:
        for k in c.get("kernels", []):
            if k.get("kernel") not in kernels:
                kernels.append(k.get("kernel"))
    height = 0.8 / max(len(kernels), 1)
    for n, kernel in enumerate(kernels):
        measured, modeled = [], []
        for c in cells:
            k = next((k for k in c.get("kernels", []) if k.get("kernel") == kernel), {})
            measured.append(num(dig(k, "measured", "tokens_per_s")))
            modeled.append(num(dig(c, "schedule", "modeled", "decode_tokens_per_s")))
        offs = [v - 0.4 + height * (n + 0.5) for v in y]
        ax.barh(offs, [bar(m) for m in measured], height=height, color=f"C{n % 10}",
                label=f"{kernel} (measured)", gid=f"tokens-{kernel}")
        if n == 0:
            first_measured, first_modeled = measured, modeled
    ax.set_xlabel("decode tokens/s over the trace")
    if kernels:
        # Steps measured on another device than the modeled one (a CPU under an H200's
        # schedule) are on another scale: the modeled rate gets its own axis, on top.
        top = max((bar(m) for m in first_measured), default=0)
        model_top = max((bar(m) for m in first_modeled), default=0)
        own = top > 0 and model_top > 0 and max(top / model_top, model_top / top) > 3
        mx = ax.twiny() if own else ax
        mx.plot(first_modeled, y, linestyle="none", marker="|", markersize=12,
                color="black", label="modeled (the schedule's clock)", gid="modeled")
        if own:  # below the panel's own axis, where the legend above cannot cover it
            mx.xaxis.set_ticks_position("bottom")
            mx.xaxis.set_label_position("bottom")
            mx.spines["bottom"].set_position(("outward", 44))
            mx.set_xlim(left=0)
            mx.set_xlabel("modeled decode tokens/s\n(the schedule's device)", fontsize=8)
            mx.xaxis.set_major_locator(MaxNLocator(3))
            mx.tick_params(axis="x", labelsize=7)
            ax.set_xlabel("measured decode tokens/s\n(this machine)")
        handles = [h for a in (ax, mx) if a is ax or own for h in a.get_legend_handles_labels()[0]]
        ax.legend(handles=handles, fontsize=7, loc="lower left", bbox_to_anchor=(0, 1), ncol=1,
                  frameon=False)


# ---- cache-sim -------------------------------------------------------------------------------

def is_cache_sim(doc):
    return isinstance(doc, dict) and "cache_sim" in doc


def check_cache_sim(doc, path="cache-sim"):
    """Raises PlotError unless `doc` is a schema-1 `decodebench cache-sim --out` file."""
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise PlotError(f"{path}: schema_version {doc.get('schema_version')!r} is not "
                        f"{SCHEMA_VERSION}, the only version plot.py reads")
    settings = dig(doc, "cache_sim", "settings")
    if not isinstance(settings, list) or not settings:
        raise PlotError(f"{path}: 'cache_sim.settings' missing, not a list or empty")
    for i, s in enumerate(settings):
        if not isinstance(s, dict) or "ttl_s" not in s:  # ttl_s may be null (lru, lfu)
            raise PlotError(f"{path}: cache_sim.settings[{i}].ttl_s missing")
        for keys in (("policy",), ("capacity_tokens",), ("hit_rate",), ("hit_rate_ceiling",),
                     ("blocks", "evicted"), ("blocks", "expired")):
            if dig(s, *keys) is None:
                raise PlotError(f"{path}: cache_sim.settings[{i}].{'.'.join(keys)} missing")
        capacity = s["capacity_tokens"]
        if capacity != "inf" and not (isinstance(capacity, (int, float)) and capacity > 0):
            raise PlotError(f"{path}: cache_sim.settings[{i}].capacity_tokens is {capacity!r}; "
                            "expected a number > 0 or \"inf\"")


def cache_sim_series(settings):
    """{label: [setting]} per policy (and ttl), in file order; each series by capacity."""
    series = collections.OrderedDict()
    for s in settings:
        name = s["policy"] if s["ttl_s"] is None else f"{s['policy']} {s['ttl_s']:g} s"
        series.setdefault(name, []).append(s)
    for rows in series.values():
        rows.sort(key=lambda s: math.inf if s["capacity_tokens"] == "inf" else s["capacity_tokens"])
    return series


def fig_cache_sim(doc):
    c = doc["cache_sim"]
    settings = c["settings"]
    finite = [s["capacity_tokens"] for s in settings if s["capacity_tokens"] != "inf"]
    # An infinite capacity has no place on a log axis: it is drawn at a column of its own, a
    # factor of 4 right of the largest finite capacity.
    inf_x = (max(finite) if finite else 1e6) * 4
    x_of = lambda s: inf_x if s["capacity_tokens"] == "inf" else s["capacity_tokens"]  # noqa: E731
    fig = new_figure(12, 4.6)
    ax_hit, ax_ev = fig.subplots(1, 2)
    # Policies by marker as well as colour: lru and a long ttl often coincide.
    markers = {"lru": "o", "lfu": "s", "ttl": "^"}
    for n, (name, rows) in enumerate(cache_sim_series(settings).items()):
        color, marker = f"C{n % 10}", markers.get(rows[0]["policy"], "o")
        fin = [s for s in rows if s["capacity_tokens"] != "inf"]
        inf = [s for s in rows if s["capacity_tokens"] == "inf"]
        ax_hit.plot([x_of(s) for s in fin], [100 * s["hit_rate"] for s in fin], color=color,
                    marker=marker, markersize=4, label=name, gid="hit-rate")
        ax_ev.plot([x_of(s) for s in fin], [s["blocks"]["evicted"] for s in fin], color=color,
                   marker=marker, markersize=4, label=f"{name} evicted", gid="evicted")
        if any(s["blocks"]["expired"] for s in rows):
            ax_ev.plot([x_of(s) for s in rows], [s["blocks"]["expired"] for s in rows],
                       color=color, marker="x", markersize=4, linestyle=":",
                       label=f"{name} expired", gid="expired")
        for s in inf:
            ax_hit.plot([inf_x], [100 * s["hit_rate"]], color=color, marker=marker,
                        markersize=6, fillstyle="none", linestyle="none", label="_inf", gid="inf")
            ax_ev.plot([inf_x], [s["blocks"]["evicted"]], color=color, marker=marker,
                       markersize=6, fillstyle="none", linestyle="none", label="_inf", gid="inf")
    ceiling = settings[0]["hit_rate_ceiling"]
    ax_hit.axhline(100 * ceiling, color="black", linestyle="--", linewidth=1,
                   label=f"ceiling (infinite capacity) {100 * ceiling:.1f}%", gid="ceiling")
    trace, model = c.get("trace", {}), c.get("model", {})
    for ax in (ax_hit, ax_ev):
        ax.set_xscale("log")
        ax.set_xlabel("cache capacity (tokens; open markers: inf)")
        ax.grid(True, which="both", alpha=0.25)
        ticks = sorted(set(finite)) + ([inf_x] if len(finite) < len(settings) else [])
        ax.set_xticks(ticks, [si(t, "").strip() if t != inf_x else "inf" for t in ticks])
        ax.minorticks_off()
    ax_hit.set_ylabel("prefix-cache hit rate (% of prompt tokens)")
    ax_hit.set_ylim(bottom=0)
    ax_hit.legend(fontsize=7, loc="upper left")
    ax_ev.set_ylabel("blocks evicted (dotted: expired, ttl)")
    ax_ev.set_ylim(bottom=0)
    ax_ev.legend(fontsize=7, loc="best")
    note = "" if trace.get("has_prefix_info", True) else " (no prefix information: all misses)"
    fig.suptitle(f"Prefix cache vs capacity: {os.path.basename(str(trace.get('source', '?')))}, "
                 f"{trace.get('requests', '?')} requests, {trace.get('block_tokens', '?')}-token "
                 f"blocks{note}; {model.get('name', '?')}, KV {c.get('kv_dtype', '?')}",
                 fontsize=9)
    return fig


def is_quant_error(doc):
    return isinstance(doc, dict) and doc.get("kind") == "quant-error"


def check_quant_error(doc, path="quant-error"):
    """Raises PlotError unless `doc` is quant-error JSON with its speed half."""
    formats = doc.get("formats")
    if not isinstance(formats, list) or not formats:
        raise PlotError(f"{path}: 'formats' missing, not a list or empty")
    if doc.get("speed") is None:
        raise PlotError(f"{path}: no speed half (run quant-error without --no-speed): the "
                        "figure plots error against tokens/s")
    for i, f in enumerate(formats):
        for keys in (("format",), ("tokens_per_s_roof",), ("overall", "attn_kl_mean"),
                     ("overall", "out_rel_l2")):
            if dig(f, *keys) is None:
                raise PlotError(f"{path}: formats[{i}].{'.'.join(keys)} missing")


def pareto_front(points):
    """The (x, y) points no other point beats on both higher x and lower y, by x."""
    front = [p for p in points
             if not any(q[0] >= p[0] and q[1] <= p[1] and q != p for q in points)]
    return sorted(front)


def fig_quant_error(doc):
    speed = doc["speed"]
    layers = len(doc.get("layers", []))
    fig = new_figure(12, 4.6)
    axes = fig.subplots(1, 2)
    floor = 1e-12  # a lossless format's zero error on a log axis
    for ax, key, label in ((axes[0], "attn_kl_mean", "attention weights: mean KL (nats)"),
                           (axes[1], "out_rel_l2", "attention output: relative L2 error")):
        # The front goes through the measured tokens/s when every format has one (what the
        # kernels buy), else through the bounds (what the bytes allow).
        measured = all(f.get("tokens_per_s") for f in doc["formats"])
        points = []
        for n, f in enumerate(doc["formats"]):
            color = f"C{n % 10}"
            y = max(f["overall"][key], floor)
            x = f["tokens_per_s_roof"]
            ax.plot([x], [y], marker="o", fillstyle="none", color=color, linestyle="none",
                    label=f"{f['format']} (bound)", gid="roof")
            if f.get("tokens_per_s"):
                ax.plot([f["tokens_per_s"]], [y], marker="o", color=color, linestyle="none",
                        label=f"{f['format']} measured", gid="measured")
            if measured:
                x = f["tokens_per_s"]
            points.append((x, y))
            ax.annotate(f["format"], (x, y), textcoords="offset points", xytext=(5, 4),
                        fontsize=8)
        front = pareto_front(points)
        ax.plot([p[0] for p in front], [p[1] for p in front], color="black", linestyle="--",
                linewidth=1, label=f"Pareto front ({'measured' if measured else 'bound'})",
                gid="pareto")
        ax.set_yscale("log")
        ax.set_xlabel("tokens/s (attention only, every layer)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.25)
    axes[0].legend(fontsize=7, loc="best")
    plural = "" if layers == 1 else "s"
    fig.suptitle(f"KV formats on {doc.get('data', '?')} ({layers} layer{plural}): "
                 f"accuracy vs speed; {speed.get('model', '?')} batch {speed.get('batch', '?')}, "
                 f"context {speed.get('context', '?')} on {speed.get('device', '?')}", fontsize=9)
    return fig


def make_quant_figures(doc, names=QUANT_FIGURES):
    """{name: Figure} of a loaded quant-error JSON (checked here)."""
    check_quant_error(doc)
    unknown = sorted(set(names) - set(QUANT_FIGURES))
    if unknown:
        raise PlotError(f"unknown figure {', '.join(unknown)} for quant-error JSON; valid: "
                        f"{', '.join(QUANT_FIGURES)}")
    return {"quant-error": fig_quant_error(doc)} if "quant-error" in names else {}


def plot_quant_error(doc, args, prefix):
    """main() for quant-error JSON: its one figure; the report-only options are refused."""
    for flag, given in (("--compare", args.compare), ("--baseline", args.baseline),
                        ("--html", args.html)):
        if given:
            raise PlotError(f"{flag} needs a sweep report; {args.report} is quant-error JSON")
    check_quant_error(doc, args.report)
    names = [n for n in args.only.split(",") if n] if args.only else list(QUANT_FIGURES)
    figures = make_quant_figures(doc, names=names)
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    write_figures(figures, prefix)
    print(f"wrote {prefix}-{{{','.join(figures)}}}.{{png,svg}}")
    return 0


def make_cache_sim_figures(doc, notes=None, names=CACHE_SIM_FIGURES):
    """{name: Figure} of a loaded `decodebench cache-sim --out` file (checked here)."""
    check_cache_sim(doc)
    unknown = sorted(set(names) - set(CACHE_SIM_FIGURES))
    if unknown:
        raise PlotError(f"unknown figure {', '.join(unknown)} for a cache-sim file; valid: "
                        f"{', '.join(CACHE_SIM_FIGURES)}")
    return {"cache-sim": fig_cache_sim(doc)} if "cache-sim" in names else {}


# ---- all figures -----------------------------------------------------------------------------

def make_figures(report, compare=None, notes=None, names=FIGURE_NAMES):
    """{name: Figure} for each of `names` with something to show, in FIGURE_NAMES order.

    `report` is a loaded report dict (checked here), `compare` a loaded compare JSON or None.
    Each figure left out appends a one-line reason to `notes` when a list is given.
    """
    check_report(report)
    if compare is not None:
        check_compare(compare)
    if set(names) & set(CACHE_SIM_FIGURES):
        raise PlotError(f"{', '.join(sorted(set(names) & set(CACHE_SIM_FIGURES)))}: drawn from a "
                        "`decodebench cache-sim --out` file, not a sweep report")
    unknown = sorted(set(names) - set(FIGURE_NAMES))
    if unknown:
        raise PlotError(f"unknown figure {', '.join(unknown)}; valid: {', '.join(FIGURE_NAMES)}")
    notes = notes if notes is not None else []
    points = ok_points(report)
    attention = [r for r in points if scope_of(r) == "attention"]
    skip_reasons = {
        "tokens-vs-batch": "no ok point at scope attention" if not attention else None,
        "layer-knee": "no ok point at scope layer"
        if not any(scope_of(r) == "layer" for r in points) else None,
        "utilization": "no ok point has a busy figure (utilization.busy)"
        if all(math.isnan(busy_of(r)) for r in points) else None,
        "hit-rate": "the ok points have a single hit rate"
        if len({r["hit_rate"] for r in points}) < 2 else None,
        "compare": "no baseline (give --compare FILE.json or --baseline BASE.json, or keep "
        "previous.json next to the report)" if compare is None else
        "the comparison matched no timed point of both reports"
        if not any(compare_space(p)[0] is not None for p in compare["points"]) else None,
        "dtype-speedup": f"no non-{BASE_DTYPE} KV point has a {BASE_DTYPE} twin"
        if not dtype_twins(points) else None,
        "replay": "not a replay report (no 'replay' section)"
        if not isinstance(report.get("replay"), dict) or not report["replay"].get("settings")
        else None,
    }
    makers = {
        "roofline": lambda: fig_roofline(report, points),
        "tokens-vs-batch": lambda: fig_tokens_vs_batch(report, attention),
        "layer-knee": lambda: fig_layer_knee(report, points),
        "utilization": lambda: fig_utilization(
            report, [r for r in points if not math.isnan(busy_of(r))]),
        "ceiling-heatmap": lambda: fig_ceiling_heatmap(report, points),
        "hit-rate": lambda: fig_hit_rate(report, points),
        "compare": lambda: fig_compare(compare, report),
        "dtype-speedup": lambda: fig_dtype_speedup(report, points),
        "replay": lambda: fig_replay(report),
    }
    figures = {}
    for name in FIGURE_NAMES:
        if name not in names:
            continue
        if skip_reasons.get(name):
            notes.append(f"{name}: skipped, {skip_reasons[name]}")
        else:
            figures[name] = makers[name]()
    return figures


def write_figures(figures, prefix):
    """Writes <prefix>-<name>.png and .svg; returns {name: svg path}."""
    svgs = {}
    for name, fig in figures.items():
        fig.savefig(f"{prefix}-{name}.png", dpi=120)
        fig.savefig(f"{prefix}-{name}.svg")
        svgs[name] = f"{prefix}-{name}.svg"
    return svgs


# ---- the decodebench binary ------------------------------------------------------------------

def decodebench_binary(given):
    path = given or os.environ.get("DECODEBENCH_BIN") or DEFAULT_DECODEBENCH
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise PlotError(f"decodebench binary not found at {path} (give --decodebench PATH or "
                        "set DECODEBENCH_BIN, or build it: cmake --build build --target "
                        "decodebench)", EXIT_COMMAND_FAILED)
    return path


def run_compare(binary, baseline, report_path):
    """`decodebench compare BASE REPORT --format json`; exit 1 (slower points) still counts."""
    cmd = [binary, "compare", baseline, report_path, "--format", "json"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise PlotError(f"{' '.join(cmd)} failed with exit status {done.returncode}: "
                        f"{done.stderr.strip() or done.stdout.strip()}", EXIT_COMMAND_FAILED)
    try:
        compare = json.loads(done.stdout)
    except json.JSONDecodeError as e:
        raise PlotError(f"{' '.join(cmd)} did not print JSON ({e})", EXIT_COMMAND_FAILED) from None
    check_compare(compare, " ".join(cmd))
    return compare


def write_html(binary, report_path, svgs, out):
    cmd = [binary, "report", report_path, "--format", "html"]
    for path in svgs.values():
        cmd += ["--figure", path]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise PlotError(f"{' '.join(cmd)} failed with exit status {done.returncode}: "
                        f"{done.stderr.strip() or done.stdout.strip()}", EXIT_COMMAND_FAILED)
    # Written whole or not at all: a failed run leaves no half page.
    tmp = f"{out}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(done.stdout)
    os.replace(tmp, out)


def plot_cache_sim(doc, args, prefix):
    """main() for a cache-sim file: its one figure; the report-only options are refused."""
    for flag, given in (("--compare", args.compare), ("--baseline", args.baseline),
                        ("--html", args.html)):
        if given:
            raise PlotError(f"{flag} needs a sweep report; {args.report} is a cache-sim file")
    check_cache_sim(doc, args.report)
    names = [n for n in args.only.split(",") if n] if args.only else list(CACHE_SIM_FIGURES)
    figures = make_cache_sim_figures(doc, names=names)
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    write_figures(figures, prefix)
    print(f"wrote {prefix}-{{{','.join(figures)}}}.{{png,svg}}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", help="decodebench report (JSON, schema_version 1), or the JSON "
                    "of `decodebench cache-sim --out`")
    ap.add_argument("--out-prefix", help="write <prefix>-<name>.png|svg (default: the report "
                    "path without .json)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--compare", metavar="FILE.json",
                     help="compare figure from this `decodebench compare --format json` output")
    src.add_argument("--baseline", metavar="BASE.json",
                     help="compare figure: run `decodebench compare BASE REPORT --format json` "
                     "(default: previous.json next to the report, when there is one)")
    ap.add_argument("--decodebench", metavar="PATH",
                    help="the decodebench binary for --baseline and --html (default: "
                    "$DECODEBENCH_BIN, else build/src/cli/decodebench in the repository)")
    ap.add_argument("--only", metavar="NAME,...", help="draw only these figures, of: "
                    + ", ".join(FIGURE_NAMES) + " (a report); " + ", ".join(CACHE_SIM_FIGURES)
                    + " (a cache-sim file)")
    ap.add_argument("--html", metavar="OUT.html",
                    help="also write the results page: `decodebench report REPORT --format html` "
                    "with the figures inlined")
    args = ap.parse_args(argv)
    try:
        prefix = args.out_prefix or args.report.removesuffix(".json")
        doc = load_json(args.report, "a decodebench report or cache-sim JSON")
        if is_cache_sim(doc):
            return plot_cache_sim(doc, args, prefix)
        if is_quant_error(doc):
            return plot_quant_error(doc, args, prefix)
        report = load_report(args.report)
        notes = []
        names = [n for n in args.only.split(",") if n] if args.only else list(FIGURE_NAMES)
        compare = None
        if "compare" not in names:
            pass
        elif args.compare:
            compare = load_compare(args.compare)
        elif args.baseline:
            compare = run_compare(decodebench_binary(args.decodebench), args.baseline,
                                  args.report)
        else:
            previous = os.path.join(os.path.dirname(os.path.abspath(args.report)),
                                    "previous.json")
            if os.path.isfile(previous) and os.path.abspath(args.report) != previous:
                try:
                    compare = run_compare(decodebench_binary(args.decodebench), previous,
                                          args.report)
                except PlotError as e:
                    # Only a default: a failed comparison leaves the other figures to draw.
                    notes.append(f"compare: skipped, comparing with {previous} failed: {e}")
                    names.remove("compare")
        figures = make_figures(report, compare, notes, names)
        os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
        svgs = write_figures(figures, prefix)
        for note in notes:
            print(f"plot.py: {note}", file=sys.stderr)
        print(f"wrote {prefix}-{{{','.join(figures)}}}.{{png,svg}}")
        if args.html:
            write_html(decodebench_binary(args.decodebench), args.report, svgs, args.html)
            print(f"wrote {args.html}")
    except PlotError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
