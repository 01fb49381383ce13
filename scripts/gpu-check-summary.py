#!/usr/bin/env python3
"""The summary scripts/gpu-check.sh prints last: each step (ok / partial / FAIL, seconds, why)
with its headline figures, read from the reports in OUTDIR (it never runs anything).

  scripts/gpu-check-summary.py OUTDIR [TITLE]

Reads OUTDIR/steps.tsv (name, status, seconds, note; written by gpu-check.sh) and, where present,
bundle-manifest.json, check.json, ceilings.json, targets.json, int-kv.json, prefix.json,
layer.json, tiers.json, ncu-bytes.json, timing-graph.json and timing-eager.json, the GoogleTest
XML files and gpu-check.json. The
attention target thresholds are docs/design.md "GPU targets"; the layer step's is the layer
scope's GPU target. Standard library only.
"""
import json
import os
import statistics
import sys
import xml.etree.ElementTree as ET

# docs/design.md "GPU targets": (batch, context) -> fraction of the measured copy ceiling.
TARGET_POINTS = [((64, 8192), 0.90), ((1, 32768), 0.75)]
FP8_SPEEDUP = 1.8
# int4 over f16 tokens/s at batch 64 x 8192, block size 16 (the integer KV target): at P = 16 the
# per-channel key scales leave int4 2.91x fewer bytes than f16, so 3x needs P >= 32.
INT4_SPEEDUP = 2.7
GQA_OVER_NAIVE = 3.0
# The layer scope's GPU target: the batch-1 layer step at >= 80 % of the roofline time of its
# bytes at the measured copy ceiling.
LAYER_COPY_ROOF = 0.80
LAYER_MODEL, LAYER_CONTEXT = "llama-3.1-8b", 8192
# Eager launches over a CUDA graph of the same warm steps: above this the host's launch path
# shows in the eager figure (docs/design.md "Graph against eager").
LARGE_TIMING_GAP = 0.10


def is_result(r):
    """An ok point that no self-check flagged (docs/design.md "Rows that check themselves")."""
    return r.get("status") == "ok" and not r.get("flags")


def load(outdir, name):
    try:
        with open(os.path.join(outdir, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def gbps(v):
    return f"{v / 1e9:.0f} GB/s"


def statuses(report):
    """'40 points: 38 ok, 2 skipped' (of N planned when the run stopped early)."""
    results = report.get("results") or []
    counts = {}
    for r in results:
        # A flagged row is ok as measured, but no result: counted apart.
        status = "flagged" if r.get("status") == "ok" and r.get("flags") else r.get("status", "?")
        counts[status] = counts.get(status, 0) + 1
    planned = (report.get("completion") or {}).get("points_planned")
    noun = "point" if (planned or len(results)) == 1 else "points"
    head = f"{len(results)} of {planned} {noun}" if planned and planned != len(results) else \
        f"{len(results)} {noun}"
    return head + ": " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def ceilings_figures(dev):
    bw = (dev or {}).get("bandwidth") or {}
    m = bw.get("measured") or {}
    sheet = bw.get("datasheet")
    parts = []
    for k in ("read", "copy", "triad"):
        v = m.get(k)
        if not v:
            parts.append(f"{k} n/a")
            continue
        pct = f" ({100 * v / sheet:.1f} % of datasheet)" if sheet else ""
        parts.append(f"{k} {gbps(v)}{pct}")
    if sheet:
        parts.append(f"datasheet {gbps(sheet)}")
    # The measured links (kind "measured"; the datasheet rows are the same on every machine).
    for link in (dev or {}).get("links") or []:
        if link.get("kind") == "measured" and link.get("best_Bps"):
            what = link.get("name", "?").split(",")[0]
            parts.append(f"{what} {link['best_Bps'] / 1e9:.1f} GB/s "
                         f"+{1e6 * link.get('overhead_s', 0):.0f} us/transfer")
    return ", ".join(parts)


def tier_figures(report):
    """Per setting of the tiers step: the host tier's capacity, hits by tier, link busy."""
    parts = []
    for cell in (report.get("replay") or {}).get("settings") or []:
        sched = cell.get("schedule") or {}
        tiers = sched.get("tiers")
        if not tiers:
            if "hit_rate" in sched:
                parts.append(f"no host tier: hits {100 * sched['hit_rate']:.1f} %")
            continue
        by = tiers.get("hit_rate_by_tier") or {}
        busy = (tiers.get("link_busy_fraction") or {}).get("to_hbm", 0)
        parts.append(f"host {tiers.get('host_capacity_tokens', 0):.3g} tokens: hits "
                     f"{100 * by.get('hbm', 0):.1f} % hbm + {100 * by.get('host', 0):.1f} % host, "
                     f"link to HBM {100 * busy:.1f} % busy")
    return "; ".join(parts)


def copy_ceiling(*reports):
    for rep in reports:
        if not rep:
            continue
        dev = rep if "bandwidth" in rep else (rep.get("devices") or [{}])[0]
        v = ((dev.get("bandwidth") or {}).get("measured") or {}).get("copy")
        if v:
            return v
    return None


def shape(r):
    return (r.get("batch"), (r.get("context") or {}).get("values", [None])[0])


def static_bound(static, r, device_name):
    """The static model's issue-bound bandwidth on this device (an H200 or H100 SXM: the two it
    models) for the instance that ran r: its rung, KV dtype and head_dim, at the smallest
    compiled group cap serving its group."""
    key = "h200" if "H200" in device_name else "h100-sxm" if "H100" in device_name else None
    if not static or not r or not key:
        return None
    m = r.get("model_shape") or {}
    group = (m.get("num_q_heads") or 0) // max(m.get("num_kv_heads") or 1, 1)
    found = [i for i in static.get("instances") or []
             if i.get("rung") == r.get("kernel") and i.get("kv_dtype") == r.get("kv_dtype")
             and i.get("head_dim") == m.get("head_dim") and i.get("main_loop")
             and (i.get("group_cap") or 0) in (0,) + tuple(c for c in (2, 4, 8) if c >= group)]
    if not found:
        return None
    inst = min(found, key=lambda i: i.get("group_cap") or 0)
    return (inst["main_loop"].get("issue_bound_bandwidth") or {}).get(key)


def target_lines(targets, copy, static=None):
    lines = []
    device_name = ((targets.get("devices") or [{}])[0]).get("name") or ""
    ok = [r for r in targets.get("results") or [] if is_result(r)
          and r.get("bandwidth", {}).get("achieved")]
    auto_tps = {}
    for (b, ctx), goal in TARGET_POINTS:
        for kv in ("f16", "fp8_e4m3"):
            here = [r for r in ok if shape(r) == (b, ctx) and r.get("kv_dtype") == kv]
            label = f"b={b} ctx={ctx} {kv}"
            auto = next((r for r in here if r.get("kernel_requested") == "auto"), None)
            rungs = [r for r in here if r.get("kernel_requested") != "auto"]
            best = max(rungs, key=lambda r: r["bandwidth"]["achieved"], default=None)

            def fig(r):
                bw = r["bandwidth"]["achieved"]
                pct = f" {100 * bw / copy:.1f} % copy" if copy else ""
                tps = r.get("tokens_per_s")
                return f"{gbps(bw)}{pct}" + (f", {tps:.0f} tok/s" if tps else "")

            text = f"auto={auto['kernel']} {fig(auto)}" if auto else "auto: no ok point"
            bound = static_bound(static, auto, device_name)
            if bound:
                text += f" (static issue bound {gbps(bound)})"
            if best:
                text += f" | best {best['kernel']} {fig(best)}"
            if kv == "f16" and copy and here:
                top = max((r["bandwidth"]["achieved"] for r in here), default=0)
                verdict = "met" if top >= goal * copy else "NOT met"
                text += f" | target >= {100 * goal:.0f} % copy: {verdict}"
            if auto and auto.get("tokens_per_s"):
                auto_tps[(b, ctx, kv)] = auto["tokens_per_s"]
            lines.append(f"  {label:<24} {text}")
    f16, fp8 = auto_tps.get((64, 8192, "f16")), auto_tps.get((64, 8192, "fp8_e4m3"))
    if f16 and fp8:
        verdict = "met" if fp8 / f16 >= FP8_SPEEDUP else "NOT met"
        lines.append(f"  fp8/f16 tokens/s at b=64 ctx=8192 (auto): {fp8 / f16:.2f}x "
                     f"(target >= {FP8_SPEEDUP}x: {verdict})")
    return lines


def gqa_line(sweep):
    """gqa over naive at GQA 8, matched point by point (same workload, both ok)."""
    by_point = {}
    for r in sweep.get("results") or []:
        s = r.get("model_shape") or {}
        if not is_result(r) or not s.get("num_kv_heads"):
            continue
        if s["num_q_heads"] // s["num_kv_heads"] != 8 or r.get("kernel") not in ("gqa", "naive"):
            continue
        key = (r.get("model"), r.get("kv_dtype"), shape(r), r.get("hit_rate"))
        by_point.setdefault(key, {})[r["kernel"]] = r["time_s"]["median"]
    ratios = [p["naive"] / p["gqa"] for p in by_point.values() if "naive" in p and "gqa" in p]
    if not ratios:
        return None
    med = statistics.median(ratios)
    verdict = "met" if med >= GQA_OVER_NAIVE else "NOT met"
    return (f"  gqa over naive at GQA 8 (gpu-check.json): median {med:.2f}x over {len(ratios)} "
            f"points (target >= {GQA_OVER_NAIVE:.0f}x: {verdict})")


def prefix_lines(prefix):
    """cascade against the best prefix-unaware rung at each shared point (same workload)."""
    by_point = {}
    for r in prefix.get("results") or []:
        if not is_result(r) or not r.get("hit_rate") or not r.get("tokens_per_s"):
            continue
        key = (shape(r), r.get("kv_dtype"), r.get("hit_rate"), r.get("prefix_groups"))
        by_point.setdefault(key, {})[r.get("kernel")] = r
    lines = []
    for (sh, kv, h, groups), rungs in sorted(by_point.items(), key=lambda kv_: str(kv_[0])):
        cascade = rungs.get("cascade")
        unaware = [r for k, r in rungs.items() if k != "cascade"]
        if not cascade or not unaware:
            continue
        best = max(unaware, key=lambda r: r["tokens_per_s"])
        bw = cascade.get("bandwidth") or {}
        lines.append(
            f"  b={sh[0]} ctx={sh[1]} {kv} h={h:g} G={groups}: cascade "
            f"{cascade['tokens_per_s']:.0f} tok/s = {cascade['tokens_per_s'] / best['tokens_per_s']:.2f}x "
            f"{best['kernel']} ({best['tokens_per_s']:.0f}); cascade GB/s unique "
            f"{(bw.get('achieved') or 0) / 1e9:.0f}, logical {(bw.get('logical') or 0) / 1e9:.0f}")
    return lines


def int_kv_lines(report):
    """Per rung, each integer format's tokens/s over f16's at batch 64 x 8192; int4 on tc against
    INT4_SPEEDUP. The formats are the report's own (gpu-check.sh sweeps f16 and the integer
    formats of the bundle's kv_formats.json), in the order the sweep ran them."""
    tps = {}
    formats = []
    for r in report.get("results") or []:
        if is_result(r) and r.get("tokens_per_s"):
            tps[(r.get("kernel"), r.get("kv_dtype"))] = r["tokens_per_s"]
        if r.get("kv_dtype") not in formats and r.get("kv_dtype") != "f16":
            formats.append(r.get("kv_dtype"))
    lines = []
    for kernel in sorted({k for k, _ in tps}):
        f16 = tps.get((kernel, "f16"))
        if not f16:
            continue
        parts = [f"f16 {f16:.0f} tok/s"]
        for kv in formats:
            if (kernel, kv) in tps:
                parts.append(f"{kv} {tps[(kernel, kv)] / f16:.2f}x")
        line = f"  {kernel:<8} " + ", ".join(parts)
        if kernel == "tc" and (kernel, "int4") in tps:
            met = tps[(kernel, "int4")] / f16 >= INT4_SPEEDUP
            line += (f" | int4 target >= {INT4_SPEEDUP:.1f}x at P = 16 (3x needs P >= 32):"
                     f" {'met' if met else 'NOT met'}")
        lines.append(line)
    return lines


def mla_lines(report, copy):
    """Each ok MLA point: its time, bandwidth (and share of the copy ceiling), tokens/s and the
    roof that binds, as the report's roofline says."""
    lines = []
    for r in report.get("results") or []:
        if not is_result(r):
            continue
        median = (r.get("time_s") or {}).get("median")
        bw = (r.get("bandwidth") or {}).get("achieved")
        if not median or not bw:
            continue
        ctx = ((r.get("context") or {}).get("values") or ["?"])[-1]
        share = f" ({bw / copy * 100:.1f} % copy)" if copy else ""
        bound = (r.get("roofline") or {}).get("bound")
        lines.append(f"  {r.get('model')} b={r.get('batch')} ctx={ctx} {r.get('kv_dtype')}: "
                     f"{seconds(median)}, {bw / 1e9:.0f} GB/s{share}, "
                     f"{r.get('tokens_per_s') or 0:.0f} tok/s" + (f", bound {bound}" if bound
                                                                  else ""))
    return lines


def seconds(t):
    return f"{t * 1e6:.1f} us" if t < 1e-3 else f"{t * 1e3:.3f} ms"


def layer_lines(layer, copy):
    """The layer step (scope "layer" points of layer.json) at LAYER_MODEL, LAYER_CONTEXT: per
    kernel and hit rate the batch-1 step against its copy-ceiling roof, and the series' knee from
    the report's knees[]; the GEMM library, and each reason a point was not measured, once."""
    points = [r for r in layer.get("results") or [] if r.get("scope") == "layer"]
    lines = []
    libs = sorted({(r.get("layer") or {}).get("gemm_library") for r in points} - {None, ""})
    for lib in libs:
        lines.append(f"  gemm library: {lib}")
    reasons = {}
    for r in points:
        if r.get("status") != "ok":
            key = (r.get("status", "?"), r.get("reason") or "no reason given")
            reasons[key] = reasons.get(key, 0) + 1
    for (status, reason), n in sorted(reasons.items()):
        lines.append(f"  {n} of {len(points)} layer points {status}: {reason}")

    def here(x):
        return x.get("model") == LAYER_MODEL and \
            (x.get("context") or {}).get("values") == [LAYER_CONTEXT]

    knees = {(str(k.get("kernel")), round(k.get("hit_rate") or 0, 6)): k
             for k in layer.get("knees") or [] if k.get("scope") == "layer" and here(k)}
    ok = [r for r in points if is_result(r) and here(r)]

    def series_of(r):
        return str(r.get("kernel_requested") or r.get("kernel")), round(r.get("hit_rate") or 0, 6)

    series = sorted({series_of(r) for r in ok} | set(knees))
    width = max((len(str(k)) for k, _ in series), default=0)
    for kernel, h in series:
        b1 = next((r for r in ok if r.get("batch") == 1 and series_of(r) == (kernel, h)), None)
        t = ((b1 or {}).get("time_s") or {}).get("median")
        if t:
            text = f"b=1 step {seconds(t)}"
            bytes_min = (b1.get("bytes") or {}).get("min")
            if not copy or not bytes_min:
                text += ", % of copy roof n/a (no copy ceiling or bytes.min)"
            else:
                frac = bytes_min / copy / t
                text += f", {100 * frac:.1f} % of copy roof"
                if not h:
                    verdict = "met" if frac >= LAYER_COPY_ROOF else "NOT met"
                    text += f" (target >= {100 * LAYER_COPY_ROOF:.0f} %: {verdict})"
            fm = (b1.get("roofline") or {}).get("fraction_measured")
            if fm is not None:
                text += f", roofline.fraction_measured {fm:.3f}"
        else:
            text = "b=1: no ok point"
        k = knees.get((kernel, h))
        if k:
            text += (f"; knee b={k.get('knee_batch')}: {k.get('knee_tokens_per_s', 0):.0f} tok/s, "
                     f"plateau {k.get('plateau_tokens_per_s', 0):.0f} tok/s; at the knee weights "
                     f"{100 * k.get('weight_bytes_share_at_knee', 0):.0f} % / KV "
                     f"{100 * k.get('kv_bytes_share_at_knee', 0):.0f} % of the bytes")
        else:
            text += "; no knee in knees[] (it needs 2 ok batches)"
        lines.append(f"  {kernel:<{width}} h={h:<4g} {text}")
    if not series:
        lines.append(f"  no ok layer point at {LAYER_MODEL} ctx={LAYER_CONTEXT}")
    return lines


def gtest_figures(outdir, name):
    try:
        root = ET.parse(os.path.join(outdir, name + ".xml")).getroot()
    except (OSError, ET.ParseError):
        return ""
    get = lambda k: int(root.get(k, "0") or 0)  # noqa: E731
    return f"{get('tests')} tests, {get('failures')} failures, {get('errors')} errors, " \
           f"{get('skipped') + get('disabled')} skipped"


def ncu_figures(ncu):
    parts = []
    for p in (ncu or {}).get("points") or []:
        k = p["kernels"]
        l2 = [x["l2_hit_pct"] for x in k if x.get("l2_hit_pct") is not None]
        issue = [x["issue_pct"] for x in k if x.get("issue_pct") is not None]
        extra = ""
        if l2:
            extra += f", L2 hit {max(l2):.1f} %"
        if issue:
            extra += f", issue {max(issue):.1f} %"
        ctx = "-".join(str(c) for c in p.get("context") or [])
        parts.append(f"b={p.get('batch')} ctx={ctx} {p['kernel']}: DRAM/bytes_min "
                     f"{p['ratio_to_min']:.3f}{extra}")
    return "; ".join(parts)


def flag_lines(outdir):
    """Every flagged row of the reports, with its reasons: kept as measured, no result."""
    lines = []
    for name in ("check.json", "targets.json", "int-kv.json", "mla.json", "prefix.json", "layer.json",
                 "timing-graph.json", "timing-eager.json", "gpu-check.json"):
        for r in (load(outdir, name) or {}).get("results") or []:
            for f in r.get("flags") or []:
                ctx = ((r.get("context") or {}).get("values") or ["?"])[-1]
                lines.append(f"  {name}: {r.get('kernel')} b={r.get('batch')} ctx={ctx} "
                             f"{r.get('kv_dtype')}: {f.get('name')}: {f.get('reason')}")
    return lines


def timing_point(report):
    """(median s, timing method) of the one ok point of a timing-*.json, or None."""
    for r in (report or {}).get("results") or []:
        median = (r.get("time_s") or {}).get("median")
        if r.get("status") == "ok" and median:
            return median, (r.get("timing") or {}).get("method") or "?"
    return None


def timing_lines(graph_report, eager_report):
    """The same warm point timed with its steps in a CUDA graph and launched eagerly: the gap."""
    graph, eager = timing_point(graph_report), timing_point(eager_report)
    if not graph or not eager:
        missing = [n for n, v in (("timing-graph.json", graph), ("timing-eager.json", eager))
                   if not v]
        return [f"  no gap: no ok point in {' or '.join(missing)}"]
    gap = eager[0] / graph[0] - 1
    line = (f"  graph {graph[0] * 1e6:.2f} us ({graph[1]}), eager {eager[0] * 1e6:.2f} us "
            f"({eager[1]}): eager {gap * 100:+.1f} % over graph")
    if graph[1] != "graph_replay":
        line += "; the graph run fell back to plain launches (capture failed), so no gap to read"
    elif abs(gap) > LARGE_TIMING_GAP:
        line += (f"; LARGE GAP (over {LARGE_TIMING_GAP * 100:.0f} %): launched one by one the "
                 "step waits on the host's launch path, the graph figure is the GPU's")
    return [line]


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: gpu-check-summary.py OUTDIR [TITLE]")
    outdir = sys.argv[1]
    title = sys.argv[2] if len(sys.argv) == 3 else ""
    steps = []
    with open(os.path.join(outdir, "steps.tsv")) as f:
        for line in f:
            name, status, secs, note = (line.rstrip("\n").split("\t") + ["", "", ""])[:4]
            steps.append((name, status, secs, note))
    manifest = load(outdir, "bundle-manifest.json") or {}
    ceilings = load(outdir, "ceilings.json")
    targets = load(outdir, "targets.json")
    sweep = load(outdir, "gpu-check.json")
    figures = {
        "check": statuses(load(outdir, "check.json") or {}) if load(outdir, "check.json") else "",
        "ceilings": ceilings_figures(ceilings) if ceilings else "",
        "targets": statuses(targets) if targets else "",
        "int-kv": statuses(load(outdir, "int-kv.json") or {}) if load(outdir, "int-kv.json")
        else "",
        "mla": statuses(load(outdir, "mla.json") or {}) if load(outdir, "mla.json") else "",
        "prefix": statuses(load(outdir, "prefix.json") or {}) if load(outdir, "prefix.json") else "",
        "layer": statuses(load(outdir, "layer.json") or {}) if load(outdir, "layer.json") else "",
        "tiers": tier_figures(load(outdir, "tiers.json") or {}),
        "ncu-bytes": ncu_figures(load(outdir, "ncu-bytes.json")),
        "sweep": statuses(sweep) if sweep else "",
        "timing-graph": statuses(load(outdir, "timing-graph.json") or {})
        if load(outdir, "timing-graph.json") else "",
        "timing-eager": statuses(load(outdir, "timing-eager.json") or {})
        if load(outdir, "timing-eager.json") else "",
    }
    for name in manifest.get("gpu_tests") or []:
        base = os.path.basename(name)
        figures[base] = gtest_figures(outdir, base)

    dirty = " dirty" if manifest.get("git_dirty") else ""
    title = f"{title}; " if title else ""
    print(f"== gpu-check summary: {title}bundle {manifest.get('git_sha', '?')}{dirty}, built "
          f"{manifest.get('built_at', '?')} ==")
    width = max(len(s[0]) for s in steps) if steps else 10
    for name, status, secs, note in steps:
        text = "; ".join(t for t in (note, figures.get(name, "")) if t)
        print(f"{name:<{width}}  {status:<7} {secs:>4}s  {text}".rstrip())
    if targets:
        print("target points (llama-3.1-8b, h=0; % of the measured copy ceiling; tokens/s is "
              "attention only):")
        for line in target_lines(targets, copy_ceiling(targets, ceilings),
                                 load(outdir, "static-model.json")):
            print(line)
    graph, eager = load(outdir, "timing-graph.json"), load(outdir, "timing-eager.json")
    if graph or eager:
        print("graph vs eager (timing-graph.json, timing-eager.json: llama-3.1-8b b=1 ctx=8192 "
              "f16, warm L2, the same point):")
        for line in timing_lines(graph, eager):
            print(line)
    int_kv = load(outdir, "int-kv.json")
    lines = int_kv_lines(int_kv) if int_kv else []
    if lines:
        print("integer KV (int-kv.json: llama-3.1-8b b=64 ctx=8192; tokens/s over f16, attention "
              "only):")
        for line in lines:
            print(line)
    mla = load(outdir, "mla.json")
    lines = mla_lines(mla, copy_ceiling(mla, ceilings)) if mla else []
    if lines:
        print("MLA (mla.json: kernel mla, bf16 q; tokens/s is attention only):")
        for line in lines:
            print(line)
    prefix = load(outdir, "prefix.json")
    lines = prefix_lines(prefix) if prefix else []
    if lines:
        print("prefix reuse (prefix.json cut; tokens/s is attention only):")
        for line in lines:
            print(line)
    line = gqa_line(sweep) if sweep else None
    if line:
        print(line)
    layer = load(outdir, "layer.json")
    if layer:
        print(f"layer step (layer.json, knee.json cut: {LAYER_MODEL} ctx={LAYER_CONTEXT}; step "
              "time of one layer, tok/s of the model without the LM head; % of copy roof = "
              "bytes.min / copy ceiling / median):")
        for line in layer_lines(layer, copy_ceiling(layer, ceilings)):
            print(line)
    lines = flag_lines(outdir)
    if lines:
        print(f"flagged rows ({len(lines)}; kept as measured, no result, left out above):")
        for line in lines:
            print(line)
    failed = [s[0] for s in steps if s[1] == "FAIL"]
    if failed:
        print(f"RESULT: FAILED {len(failed)} of {len(steps)} steps: {', '.join(failed)}")
    else:
        print(f"RESULT: all {len(steps)} steps passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
