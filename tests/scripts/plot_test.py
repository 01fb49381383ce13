#!/usr/bin/env python3
"""Tests of scripts/plot.py: what each figure draws, read back from the matplotlib objects, on
the committed fixtures (tests/scripts/fixtures/README.md); the files the CLI writes; the
decodebench commands it runs (a fake binary records them); bad input. Planted faults (a point
turned wrong, a null fraction, a missing knee) must change what is drawn.

  python3 tests/scripts/plot_test.py [-v]
"""
import collections
import copy
import json
import math
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(HERE, "fixtures")
PLOT = os.path.join(REPO, "scripts", "plot.py")
sys.path.insert(0, os.path.join(REPO, "scripts"))
import plot  # noqa: E402
from matplotlib.container import BarContainer, ErrorbarContainer  # noqa: E402


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


CPU = fixture("cpu-sweep.json")
GPU = fixture("gpu-synthetic.json")
COMPARE = fixture("compare-synthetic.json")
CACHE_SIM = fixture("cache-sim.json")
REPLAY = fixture("replay-cpu.json")
REPLAY_TIERS = fixture("replay-tiers-cpu.json")


def ok(report):
    return [r for r in report["results"] if r["status"] == "ok"]


def lines(fig, gid):
    return [line for ax in fig.axes for line in ax.lines if line.get_gid() == gid]


def drawn(line):
    """The (x, y) of a line's points that are drawn (NaN: a missing value, left out)."""
    return [(x, y) for x, y in zip(line.get_xdata(), line.get_ydata()) if not math.isnan(y)]


def scatter_offsets(fig):
    return [tuple(o) for ax in fig.axes for c in ax.collections if c.get_gid() == "points"
            for o in c.get_offsets()]


def cells(fig):
    """(values, annotations) of every heatmap panel: values drawn (not NaN) and cell texts."""
    values = [v for ax in fig.axes for im in ax.images
              for v in im.get_array().filled(math.nan).ravel() if not math.isnan(v)]
    texts = [t for ax in fig.axes for t in ax.texts if t.get_gid() == "cell"]
    return values, texts


def bars(fig):
    return [p for ax in fig.axes for c in ax.containers if isinstance(c, BarContainer)
            for p in c.patches]


def bar_groups(fig):
    """(gid, BarContainer) of every bar call; a container's gid is its bars' (matplotlib sets the
    gid on each patch)."""
    return [(c.patches[0].get_gid(), c) for ax in fig.axes for c in ax.containers
            if isinstance(c, BarContainer) and c.patches]


def turned_wrong(report, index):
    """A copy of `report` with results[index] as a wrong point is written: times and rates null."""
    report = copy.deepcopy(report)
    r = report["results"][index]
    r["status"], r["reason"] = "wrong", "planted"
    for k in r["time_s"]:
        r["time_s"][k] = None if k != "samples" else 0
    r["samples"], r["tokens_per_s"] = [], None
    r["bandwidth"] = {"achieved": None, "logical": None}
    for k in ("t_roof_s", "fraction_measured", "fraction_datasheet"):
        r["roofline"][k] = None
    return report


class CpuReportFigures(unittest.TestCase):
    """The real CPU report: one kernel, two KV dtypes, 3 batches x 2 contexts x 2 hit rates."""

    @classmethod
    def setUpClass(cls):
        cls.notes = []
        cls.figs = plot.make_figures(CPU, notes=cls.notes)
        cls.ok = ok(CPU)

    def test_fixture_shape(self):
        self.assertEqual(len(self.ok), 24)
        self.assertEqual(CPU["devices"][0]["backend"], "cpu")

    def test_names_and_skipped_compare(self):
        self.assertEqual(list(self.figs), ["roofline", "tokens-vs-batch", "ceiling-heatmap",
                                           "hit-rate", "dtype-speedup"])
        self.assertTrue(any(n.startswith("compare: skipped") and "--baseline" in n
                            for n in self.notes), self.notes)

    def test_roofline(self):
        fig = self.figs["roofline"]
        groups = [c for ax in fig.axes for c in ax.collections if c.get_gid() == "points"]
        self.assertEqual(len(groups), 2)  # cpu x {f16, fp8_e4m3}
        offsets = scatter_offsets(fig)
        self.assertEqual(len(offsets), len(self.ok))
        expect = sorted((r["arithmetic_intensity"], r["flops"] / r["time_s"]["median"])
                        for r in self.ok)
        for got, want in zip(sorted(offsets), expect):
            self.assertAlmostEqual(got[0], want[0])
            self.assertAlmostEqual(got[1] / want[1], 1)
        roofs = [line.get_label() for line in lines(fig, "roof")]
        self.assertEqual(len(roofs), 2, roofs)  # no datasheet roof on the CPU (null)
        self.assertTrue(roofs[0].startswith("measured read"), roofs)
        self.assertTrue(roofs[1].startswith("measured FMA peak"), roofs)
        ax = fig.axes[0]
        self.assertEqual((ax.get_xscale(), ax.get_yscale()), ("log", "log"))
        self.assertIn("AMD EPYC", ax.get_title())
        self.assertIn("llama-3.1-8b", ax.get_title())
        self.assertIn("FLOP", ax.get_xlabel())

    def test_tokens_vs_batch_series_and_knees(self):
        fig = self.figs["tokens-vs-batch"]
        series = lines(fig, "series")
        self.assertEqual(len(series), 8)  # 2 contexts x 2 hit rates x 2 dtypes
        for line in series:
            self.assertEqual([x for x, _ in drawn(line)], [1, 2, 4])
        knees = lines(fig, "knee")
        self.assertEqual(len(knees), len(CPU["knees"]))
        self.assertEqual(len(knees), 8)
        tokens = {(r["kv_dtype"], r["context"]["values"][0], r["hit_rate"], r["batch"]):
                  r["tokens_per_s"] for r in self.ok}
        knee_points = sorted(drawn(k)[0] for k in knees)
        expect = sorted((k["knee_batch"], tokens[(k["kv_dtype"], k["context"]["values"][0],
                                                  k["hit_rate"], k["knee_batch"])])
                        for k in CPU["knees"])
        self.assertEqual(knee_points, expect)

    def test_heatmap(self):
        fig = self.figs["ceiling-heatmap"]
        images = [im for ax in fig.axes for im in ax.images]
        self.assertEqual(len(images), 4)  # 2 hit rates x 2 dtype rows
        for im in images:
            self.assertEqual(im.get_array().shape, (3, 2))  # batch x context
        values, texts = cells(fig)
        self.assertEqual(len(values), 24)
        self.assertEqual(len(texts), 24)
        self.assertEqual(sorted(values),
                         sorted(r["roofline"]["fraction_measured"] for r in self.ok))

    def test_hit_rate(self):
        fig = self.figs["hit-rate"]
        for gid in ("unique", "logical", "tokens"):
            found = lines(fig, gid)
            self.assertEqual(len(found), 12, gid)  # 2 dtypes x 3 batches x 2 contexts
            for line in found:
                self.assertEqual([x for x, _ in drawn(line)], [0.0, 0.5])
        self.assertEqual(len(lines(fig, "roof")), 1)

    def test_dtype_speedup(self):
        fig = self.figs["dtype-speedup"]
        heights = sorted(p.get_height() for p in bars(fig))
        self.assertEqual(len(heights), 12)
        f16 = {plot.identity(r, ("kv_dtype",)): r for r in self.ok if r["kv_dtype"] == "f16"}
        expect = sorted(f16[plot.identity(r, ("kv_dtype",))]["time_s"]["median"]
                        / r["time_s"]["median"] for r in self.ok if r["kv_dtype"] != "f16")
        for got, want in zip(heights, expect):
            self.assertAlmostEqual(got, want)


class PlantedFaults(unittest.TestCase):
    """The counts above must move when the report changes."""

    def test_a_wrong_point_is_not_drawn(self):
        index = next(i for i, r in enumerate(CPU["results"])
                     if r["kv_dtype"] == "fp8_e4m3" and r["batch"] == 2)
        figs = plot.make_figures(turned_wrong(CPU, index), names=(
            "roofline", "ceiling-heatmap", "dtype-speedup", "tokens-vs-batch"))
        self.assertEqual(len(scatter_offsets(figs["roofline"])), 23)
        values, texts = cells(figs["ceiling-heatmap"])
        self.assertEqual((len(values), len(texts)), (23, 23))
        self.assertEqual(len(bars(figs["dtype-speedup"])), 11)
        points = sorted(len(drawn(line)) for line in lines(figs["tokens-vs-batch"], "series"))
        self.assertEqual(points, [2] + [3] * 7)

    def test_only_ok_points_even_when_a_wrong_one_has_numbers(self):
        report = copy.deepcopy(CPU)
        report["results"][5]["status"] = "wrong"  # times and rates left in place
        figs = plot.make_figures(report, names=("roofline", "ceiling-heatmap", "hit-rate",
                                                "dtype-speedup"))
        self.assertEqual(len(scatter_offsets(figs["roofline"])), 23)
        self.assertEqual(len(cells(figs["ceiling-heatmap"])[0]), 23)
        self.assertEqual(sum(len(drawn(line)) for line in lines(figs["hit-rate"], "tokens")), 23)
        self.assertEqual(len(bars(figs["dtype-speedup"])), 11)

    def test_a_null_fraction_is_missing_not_zero(self):
        report = copy.deepcopy(CPU)
        report["results"][0]["roofline"]["fraction_measured"] = None
        values, texts = cells(plot.make_figures(report, names=("ceiling-heatmap",))
                              ["ceiling-heatmap"])
        self.assertEqual((len(values), len(texts)), (23, 23))
        self.assertNotIn(0.0, values)

    def test_a_series_without_its_knee_has_no_marker(self):
        report = copy.deepcopy(CPU)
        del report["knees"][0]
        fig = plot.make_figures(report, names=("tokens-vs-batch",))["tokens-vs-batch"]
        self.assertEqual(len(lines(fig, "knee")), 7)

    def test_a_comparison_without_points_is_skipped(self):
        compare = dict(COMPARE, points=[])
        notes = []
        self.assertEqual(plot.make_figures(CPU, compare, notes, names=("compare",)), {})
        self.assertTrue(any(n.startswith("compare: skipped, the comparison matched no")
                            for n in notes), notes)

    def test_utilization_of_cpu_points(self):
        # The committed CPU report predates the busy figure (skipped above); with the figure a
        # CPU point carries (busy only, no power), one busy and one roof line per series.
        notes = []
        self.assertEqual(plot.make_figures(CPU, notes=notes, names=("utilization",)), {})
        self.assertTrue(any(n.startswith("utilization: skipped") for n in notes), notes)
        report = copy.deepcopy(CPU)
        for r in ok(report):
            r["utilization"] = {"source": "cpu_threads", "busy": 1.0, "threads": 2,
                                "cpu_time_s": 0.2, "window_s": 0.1, "energy_J": None,
                                "power_W": None, "power_reading_W": None,
                                "energy_J_per_step": None, "energy_J_per_token": None,
                                "note": ""}
        fig = plot.make_figures(report, names=("utilization",))["utilization"]
        self.assertEqual(len(lines(fig, "busy")), 8)  # 2 contexts x 2 hit rates x 2 dtypes
        self.assertEqual(len(lines(fig, "roof")), 8)
        ys = [y for line in lines(fig, "busy") for _, y in drawn(line)]
        self.assertEqual(ys, [100.0] * 24)

    def test_no_f16_twin_skips_the_speedup(self):
        report = copy.deepcopy(CPU)
        report["results"] = [r for r in report["results"] if r["kv_dtype"] != "f16"]
        notes = []
        figs = plot.make_figures(report, notes=notes, names=("dtype-speedup",))
        self.assertEqual(figs, {})
        self.assertTrue(any(n.startswith("dtype-speedup: skipped") for n in notes), notes)


def with_layer_points(report):
    """`report` plus a scope-layer twin of each ok point: a step 4 ms longer (the weights' time,
    the same at every batch) with its stage times, and the layer knees computed here."""
    report = copy.deepcopy(report)
    twins = []
    for r in ok(report):
        t = copy.deepcopy(r)
        t["scope"] = "layer"
        att = r["time_s"]["median"]
        t["time_s"]["median"] = att + 4e-3
        t["tokens_per_s"] = r["batch"] / ((att + 4e-3) * r["model_shape"]["num_layers"])
        t["layer"] = {"weights_dtype": "bf16", "time_s": {"weights": 4e-3, "kv": att},
                      "bytes": {"weights": 4.4e8, "kv": r["bytes"]["kv_unique"],
                                "activations": 1e5}}
        twins.append(t)
    report["results"] += twins
    series = {}
    for t in twins:
        series.setdefault(plot.identity(t, ("batch",)), []).append(t)
    for rows in series.values():
        rows.sort(key=lambda r: r["batch"])
        tok = [r["tokens_per_s"] for r in rows]
        knee = rows[next(i for i, v in enumerate(tok) if v >= 0.9 * max(tok))]
        report["knees"].append({"scope": "layer", "model": knee["model"],
                                "kernel": knee["kernel_requested"], "kv_dtype": knee["kv_dtype"],
                                "q_dtype": knee["q_dtype"], "block_size": knee["block_size"],
                                "prefix_groups": knee["prefix_groups"],
                                "context": knee["context"], "hit_rate": knee["hit_rate"],
                                "knee_batch": knee["batch"]})
    return report


class LayerFigure(unittest.TestCase):
    """Scope layer: the model's tokens/s with the attention-only twins, the knees, the share."""

    @classmethod
    def setUpClass(cls):
        cls.report = with_layer_points(CPU)
        cls.figs = plot.make_figures(cls.report, names=("tokens-vs-batch", "layer-knee"))

    def test_layer_series_twins_knees_and_shares(self):
        fig = self.figs["layer-knee"]
        layer_knees = [k for k in self.report["knees"] if k.get("scope") == "layer"]
        self.assertEqual(len(lines(fig, "series")), 8)  # 2 dtypes x 2 contexts x 2 hit rates
        self.assertEqual(len(lines(fig, "attention")), 8)
        self.assertEqual(len(lines(fig, "knee")), len(layer_knees))
        # Below each tokens/s line, its share of the step in the weight GEMMs: 4 ms of 4 + t_kv.
        shares = [line for ax in fig.axes for line in ax.lines if line.get_gid() is None]
        self.assertEqual(len(shares), 8)
        want = sorted(round(4e-3 / (4e-3 + r["layer"]["time_s"]["kv"]), 9)
                      for r in ok(self.report) if r.get("scope") == "layer")
        self.assertEqual(sorted(round(y, 9) for line in shares for _, y in drawn(line)), want)
        # The layer's tokens/s stay under the attention-only ones of the same points.
        for layer, att in zip(lines(fig, "series"), lines(fig, "attention")):
            self.assertTrue(all(a > b for (_, b), (_, a) in zip(drawn(layer), drawn(att))))

    def test_tokens_vs_batch_keeps_attention_points_only(self):
        self.assertEqual(len(lines(self.figs["tokens-vs-batch"], "series")), 8)

    def test_a_layer_knee_not_matching_is_not_drawn(self):
        report = copy.deepcopy(self.report)
        for k in report["knees"]:
            if k.get("scope") == "layer":
                k["scope"] = "attention"  # planted: the knees no longer name the layer scope
        fig = plot.make_figures(report, names=("layer-knee",))["layer-knee"]
        self.assertEqual(len(lines(fig, "knee")), 0)

    def test_no_layer_point_skips_the_figure(self):
        notes = []
        figs = plot.make_figures(CPU, notes=notes, names=("layer-knee",))
        self.assertEqual(figs, {})
        self.assertTrue(any(n.startswith("layer-knee: skipped") for n in notes), notes)


class GpuShapedFigures(unittest.TestCase):
    """The synthetic cuda report: three kernels, a datasheet roof, a skipped and a wrong point."""

    @classmethod
    def setUpClass(cls):
        cls.figs = plot.make_figures(GPU, COMPARE)
        cls.ok = ok(GPU)

    def test_fixture_shape(self):
        self.assertEqual(len(GPU["results"]), 60)
        self.assertEqual(len(self.ok), 58)
        self.assertIn("SYNTHETIC", GPU["devices"][0]["name"])
        self.assertIn("synthetic", GPU["host"]["hostname"])

    def test_all_but_the_layer_figure(self):
        self.assertEqual(list(self.figs),
                         [n for n in plot.FIGURE_NAMES if n not in ("layer-knee", "replay")])

    def test_roofline_every_roof(self):
        fig = self.figs["roofline"]
        groups = [c for ax in fig.axes for c in ax.collections if c.get_gid() == "points"]
        self.assertEqual(len(groups), 5)  # gqa x2, pipelined f16, split_kv x2
        self.assertEqual(len(scatter_offsets(fig)), 58)
        roofs = sorted(line.get_label().split(" ")[0] + " " + line.get_label().split(" ")[1]
                       for line in lines(fig, "roof"))
        # measured read, datasheet, flops_peak and the later unit's flops_peak_tensor_f16
        self.assertEqual(roofs, ["datasheet 4.8", "measured read", "peak fp32", "peak tensor"])

    def test_tokens_vs_batch_panels_and_knees(self):
        fig = self.figs["tokens-vs-batch"]
        per_panel = [len([line for line in ax.lines if line.get_gid() == "series"])
                     for ax in fig.axes]
        self.assertEqual(per_panel, [8, 4, 8])  # gqa, pipelined (f16 only), split_kv
        self.assertEqual(len(lines(fig, "knee")), len(GPU["knees"]))
        short = sorted(len(drawn(line)) for line in lines(fig, "series"))
        self.assertEqual(short[:3], [2, 2, 3])  # the series of the skipped and the wrong point

    def test_utilization_busy_beside_the_roof(self):
        fig = self.figs["utilization"]
        per_panel = [len([line for line in ax.lines if line.get_gid() == "busy"])
                     for ax in fig.axes]
        self.assertEqual(per_panel, [8, 4, 8])  # gqa, pipelined (f16 only), split_kv
        self.assertEqual(len(lines(fig, "roof")), 20)  # one dotted roof line per series
        # Every ok point once in each, at its own figures in percent.
        busy = sorted(p for line in lines(fig, "busy") for p in drawn(line))
        want = sorted((r["batch"], 100 * r["utilization"]["busy"]) for r in self.ok)
        self.assertEqual(len(busy), 58)
        for (bx, by), (wx, wy) in zip(busy, want):
            self.assertEqual(bx, wx)
            self.assertAlmostEqual(by, wy, places=9)
        roof = sorted(p for line in lines(fig, "roof") for p in drawn(line))
        want = sorted((r["batch"], 100 * r["roofline"]["fraction_measured"]) for r in self.ok)
        self.assertEqual(len(roof), 58)
        for (bx, by), (wx, wy) in zip(roof, want):
            self.assertEqual(bx, wx)
            self.assertAlmostEqual(by, wy, places=9)
        # The article's picture in the synthetic numbers: busy above the roof at every point.
        self.assertTrue(all(r["utilization"]["busy"] > r["roofline"]["fraction_measured"]
                            for r in self.ok))

    def test_utilization_a_null_busy_is_missing_not_zero(self):
        report = copy.deepcopy(GPU)
        planted = next(r for r in report["results"] if r["status"] == "ok")
        planted["utilization"]["busy"] = None
        planted["utilization"]["note"] = "busy unavailable: planted"
        fig = plot.make_figures(report, names=("utilization",))["utilization"]
        self.assertEqual(sum(len(drawn(line)) for line in lines(fig, "busy")), 57)
        self.assertNotIn(0.0, [y for line in lines(fig, "busy") for _, y in drawn(line)])

    def test_utilization_a_wrong_point_is_not_drawn_even_with_its_figures(self):
        report = copy.deepcopy(GPU)
        wrong = next(r for r in report["results"] if r["status"] == "wrong")
        wrong["utilization"] = copy.deepcopy(self.ok[0]["utilization"])
        wrong["roofline"]["fraction_measured"] = 0.5
        fig = plot.make_figures(report, names=("utilization",))["utilization"]
        self.assertEqual(sum(len(drawn(line)) for line in lines(fig, "busy")), 58)

    def test_utilization_without_busy_figures_is_skipped(self):
        report = copy.deepcopy(GPU)
        for r in report["results"]:
            r.pop("utilization", None)  # a report from before the field
        notes = []
        self.assertEqual(plot.make_figures(report, notes=notes, names=("utilization",)), {})
        self.assertTrue(any(n.startswith("utilization: skipped, no ok point has a busy figure")
                            for n in notes), notes)

    def test_heatmap_rows(self):
        fig = self.figs["ceiling-heatmap"]
        self.assertEqual(len([im for ax in fig.axes for im in ax.images]), 10)  # 5 rows x 2 h
        values, texts = cells(fig)
        self.assertEqual((len(values), len(texts)), (58, 58))

    def test_hit_rate_per_kernel(self):
        fig = self.figs["hit-rate"]
        self.assertEqual(len(lines(fig, "unique")), 12 + 6 + 12)
        self.assertEqual(len(lines(fig, "logical")), 30)
        self.assertEqual(len(lines(fig, "roof")), 3)  # one per kernel row

    def test_compare(self):
        fig = self.figs["compare"]
        ax = fig.axes[0]
        containers = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        counts = {c.get_label().split(" ")[0]: len(c.lines[0].get_xdata()) for c in containers}
        self.assertEqual(counts, {k: v for k, v in COMPARE["counts"].items() if v})
        colors = {c.get_label().split(" ")[0]: c.lines[0].get_color() for c in containers}
        self.assertEqual(len(set(colors.values())), len(colors))
        for c in containers:
            verdict = c.get_label().split(" ")[0]
            xs, ys = c.lines[0].get_xdata(), c.lines[0].get_ydata()
            segments = c.lines[2][0].get_segments()  # the x error bars
            for x, y, seg in zip(xs, ys, segments):
                p = COMPARE["points"][int(y)]
                self.assertEqual(p["verdict"], verdict)
                space = p["normalized"] if p["decided_by"] == "normalized" else p["raw"]
                self.assertAlmostEqual(x, 100 * (space["ratio"] - 1))
                self.assertAlmostEqual(seg[0][0], 100 * (space["ci"][0] - 1))
                self.assertAlmostEqual(seg[1][0], 100 * (space["ci"][1] - 1))
        self.assertEqual(len(ax.get_yticklabels()), len(COMPARE["points"]))

    def test_dtype_speedup(self):
        # fp8 points of gqa and split_kv, less the wrong one and the skipped one.
        self.assertEqual(len(bars(self.figs["dtype-speedup"])), 22)


class QuantErrorFigure(unittest.TestCase):
    """A real `quant-error --format json` (outliers, six formats, a CPU sweep of the float ones)."""

    def setUp(self):
        self.doc = fixture("quant-error.json")

    def test_every_format_has_its_bound_and_the_measured_ones_a_mark(self):
        fig = plot.make_quant_figures(self.doc)["quant-error"]
        measured = [f["format"] for f in self.doc["formats"] if f.get("tokens_per_s")]
        self.assertEqual(len(measured), 3)  # f16, bf16, fp8_e4m3: the kernels' formats
        for ax in fig.axes:
            self.assertEqual(len(lines_of(ax, "roof")), len(self.doc["formats"]))
            self.assertEqual(len(lines_of(ax, "measured")), len(measured))
            self.assertEqual(len(lines_of(ax, "pareto")), 1)

    def test_pareto_front(self):
        # (tokens/s, error): (2, 5) is beaten by (3, 1) on both, so it is not on the front.
        self.assertEqual(plot.pareto_front([(1, 0.1), (2, 5), (3, 1), (4, 2)]),
                         [(1, 0.1), (3, 1), (4, 2)])
        self.assertEqual(plot.pareto_front([(1, 1)]), [(1, 1)])

    def test_bad_input(self):
        doc = copy.deepcopy(self.doc)
        doc["speed"] = None
        with self.assertRaisesRegex(plot.PlotError, "no speed half"):
            plot.make_quant_figures(doc)
        doc = copy.deepcopy(self.doc)
        del doc["formats"][2]["overall"]["attn_kl_mean"]
        with self.assertRaisesRegex(plot.PlotError, r"formats\[2\].overall.attn_kl_mean"):
            plot.make_quant_figures(doc)
        with self.assertRaisesRegex(plot.PlotError, "unknown figure roofline"):
            plot.make_quant_figures(self.doc, names=["roofline"])


def lines_of(ax, gid):
    return [line for line in ax.get_lines() if line.get_gid() == gid]


class CacheSimFigure(unittest.TestCase):
    """The real cache-sim file: 5 capacities (inf last) x lru, lfu, ttl 60 s and 300 s."""

    @classmethod
    def setUpClass(cls):
        cls.fig = plot.make_cache_sim_figures(CACHE_SIM)["cache-sim"]

    def test_fixture_shape(self):
        self.assertEqual(len(CACHE_SIM["cache_sim"]["settings"]), 20)

    def test_one_line_per_policy_and_ttl(self):
        hit = lines(self.fig, "hit-rate")
        self.assertEqual([line.get_label() for line in hit],
                         ["lru", "lfu", "ttl 60 s", "ttl 300 s"])
        settings = CACHE_SIM["cache_sim"]["settings"]
        for line in hit:
            xs = list(line.get_xdata())
            self.assertEqual(xs, [1e5, 1e6, 3e6, 1e7])  # the finite capacities, ascending
            self.assertTrue(all(0 <= y <= 100 for y in line.get_ydata()))
        lru = [100 * s["hit_rate"] for s in settings
               if s["policy"] == "lru" and s["capacity_tokens"] != "inf"]
        self.assertEqual(list(hit[0].get_ydata()), lru)
        self.assertEqual(len(lines(self.fig, "evicted")), 4)
        self.assertEqual([line.get_label() for line in lines(self.fig, "expired")],
                         ["ttl 60 s expired", "ttl 300 s expired"])
        self.assertEqual(self.fig.axes[0].get_xscale(), "log")

    def test_infinite_capacity_apart_and_the_ceiling_dashed(self):
        inf = lines(self.fig, "inf")
        self.assertEqual(len(inf), 8)  # one per series, on both panels
        self.assertEqual({x for line in inf for x in line.get_xdata()}, {4e7})
        (ceiling,) = lines(self.fig, "ceiling")
        self.assertEqual(ceiling.get_linestyle(), "--")
        expected = 100 * CACHE_SIM["cache_sim"]["settings"][0]["hit_rate_ceiling"]
        self.assertAlmostEqual(ceiling.get_ydata()[0], expected)
        for line in lines(self.fig, "hit-rate") + inf[::2]:
            self.assertTrue(all(y <= expected + 1e-9 for y in line.get_ydata()), line)

    def test_planted_faults(self):
        doc = copy.deepcopy(CACHE_SIM)
        doc["cache_sim"]["settings"] = [s for s in doc["cache_sim"]["settings"]
                                        if s["capacity_tokens"] != "inf"]
        fig = plot.make_cache_sim_figures(doc)["cache-sim"]
        self.assertEqual(lines(fig, "inf"), [])
        doc = copy.deepcopy(CACHE_SIM)
        doc["cache_sim"]["settings"][3]["capacity_tokens"] = 0
        with self.assertRaisesRegex(plot.PlotError, r"settings\[3\].capacity_tokens is 0"):
            plot.make_cache_sim_figures(doc)
        del doc["cache_sim"]["settings"][2]["blocks"]
        with self.assertRaisesRegex(plot.PlotError, r"settings\[2\].blocks.evicted missing"):
            plot.make_cache_sim_figures(doc)
        with self.assertRaisesRegex(plot.PlotError, "not a sweep report"):
            plot.make_figures(CPU, names=["roofline", "cache-sim"])


class ReplayFigure(unittest.TestCase):
    """The real replay report: 2 settings (lru, ttl 120 s) x kernels cpu, cascade x 2 steps."""

    @classmethod
    def setUpClass(cls):
        cls.notes = []
        cls.figs = plot.make_figures(REPLAY, notes=cls.notes)

    def test_fixture_shape(self):
        settings = REPLAY["replay"]["settings"]
        self.assertEqual([s["setting"]["policy"] for s in settings], ["lru", "ttl"])
        self.assertEqual(len(REPLAY["results"]), 8)
        self.assertTrue(all(r["status"] == "ok" for r in REPLAY["results"]))

    def test_one_bar_per_setting_and_kernel(self):
        fig = self.figs["replay"]
        # Five panels and, the CPU's measured rate being far below the modeled device's, the
        # modeled rate's own axis on top of the last.
        self.assertEqual(len(fig.axes), 6)
        by_gid = collections.Counter(gid for gid, _ in bar_groups(fig))
        for gid in ("hit-rate", "evicted", "expired", "prefill-saved", "kv-bytes",
                    "tokens-cpu", "tokens-cascade"):
            self.assertEqual(by_gid[gid], 1, gid)
        hit = dict(bar_groups(fig))["hit-rate"]
        expected = [100 * s["schedule"]["hit_rate"] for s in REPLAY["replay"]["settings"]]
        self.assertEqual([p.get_width() for p in hit.patches], expected)
        for kernel in ("cpu", "cascade"):
            bars_ = dict(bar_groups(fig))[f"tokens-{kernel}"]
            measured = [next(k for k in s["kernels"] if k["kernel"] == kernel)["measured"]
                        ["tokens_per_s"] for s in REPLAY["replay"]["settings"]]
            self.assertEqual([p.get_width() for p in bars_.patches], measured)
        (modeled,) = lines(fig, "modeled")
        self.assertEqual(len(modeled.get_xdata()), 2)
        labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
        self.assertEqual(labels, ["2 GB lru bf16", "2 GB ttl 120 s bf16"])

    def test_the_modeled_rate_shares_the_axis_on_the_same_scale(self):
        doc = copy.deepcopy(REPLAY)
        for s in doc["replay"]["settings"]:
            k = s["kernels"][0]["measured"]["tokens_per_s"]
            s["schedule"]["modeled"]["decode_tokens_per_s"] = 1.5 * k
        fig = plot.make_figures(doc, names=["replay"])["replay"]
        self.assertEqual(len(fig.axes), 5)
        (modeled,) = lines(fig, "modeled")
        self.assertIs(modeled.axes, fig.axes[4])
        (far,) = lines(self.figs["replay"], "modeled")
        self.assertIsNot(far.axes, self.figs["replay"].axes[4])

    def test_a_failed_step_draws_no_tokens_bar(self):
        doc = copy.deepcopy(REPLAY)
        doc["replay"]["settings"][1]["kernels"][0]["measured"] = {"reason": "planted"}
        fig = plot.make_figures(doc, names=["replay"])["replay"]
        cpu = dict(bar_groups(fig))["tokens-cpu"]
        self.assertEqual(cpu.patches[1].get_width(), 0)
        self.assertGreater(cpu.patches[0].get_width(), 0)

    def test_a_sweep_report_has_no_replay_figure(self):
        notes = []
        figs = plot.make_figures(CPU, notes=notes, names=["replay"])
        self.assertEqual(figs, {})
        self.assertTrue(any(n.startswith("replay: skipped, not a replay report") for n in notes))


class ReplayTiersFigure(unittest.TestCase):
    """The real replay report with a host tier and a prefill link: no host tier, then a 1e6-token
    host tier on PCIe 5 reloading (always) and recomputing (never) its hits."""

    @classmethod
    def setUpClass(cls):
        cls.fig = plot.make_figures(REPLAY_TIERS, names=["replay"])["replay"]
        cls.sched = [c["schedule"] for c in REPLAY_TIERS["replay"]["settings"]]

    def test_fixture_shape(self):
        settings = [c["setting"] for c in REPLAY_TIERS["replay"]["settings"]]
        self.assertEqual([s.get("reload_policy") for s in settings], [None, "always", "never"])
        self.assertNotIn("tiers", self.sched[0])
        self.assertGreater(self.sched[1]["tiers"]["hit_rate_by_tier"]["host"], 0)
        self.assertTrue(all("prefill_link" in s for s in self.sched))

    def test_hits_stacked_by_tier(self):
        groups = dict(bar_groups(self.fig))
        hbm = [p.get_width() for p in groups["hit-rate-hbm"].patches]
        host = [p.get_width() for p in groups["hit-rate-host"].patches]
        # No host tier: every hit is in HBM.
        self.assertAlmostEqual(hbm[0], 100 * self.sched[0]["hit_rate"])
        self.assertEqual(host[0], 0)
        for i in (1, 2):
            by_tier = self.sched[i]["tiers"]["hit_rate_by_tier"]
            self.assertAlmostEqual(hbm[i], 100 * by_tier["hbm"])
            self.assertAlmostEqual(host[i], 100 * by_tier["host"])
            self.assertAlmostEqual(hbm[i] + host[i], 100 * self.sched[i]["hit_rate"])
        self.assertEqual([p.get_x() for p in groups["hit-rate-host"].patches], hbm)

    def test_link_traffic_and_recomputation(self):
        groups = dict(bar_groups(self.fig))
        to_hbm = [p.get_width() for p in groups["link-to-hbm"].patches]
        self.assertEqual(to_hbm[0], 0)
        self.assertAlmostEqual(to_hbm[1], self.sched[1]["tiers"]["link_bytes"]["to_hbm"] / 1e9)
        self.assertEqual(to_hbm[2], 0)  # never reloads
        prefill = [p.get_width() for p in groups["link-prefill"].patches]
        self.assertEqual(prefill, [s["prefill_link"]["bytes"] / 1e9 for s in self.sched])
        host_re = [p.get_width() for p in groups["recomputed-host"].patches]
        self.assertEqual(host_re[1], 0)
        self.assertEqual(host_re[2], self.sched[2]["tiers"]["recomputed_tokens"])
        self.assertGreater(host_re[2], 0)
        ttft = [p.get_width() for p in groups["ttft"].patches]
        self.assertEqual(ttft, [s["ttft_s"]["p50"] for s in self.sched])
        self.assertEqual(len(lines(self.fig, "link-wait")), 1)
        labels = [t.get_text() for t in self.fig.axes[0].get_yticklabels()]
        self.assertEqual(labels[2], "4 GB lru bf16 + host 1e+06 tok pcie-gen5-x16 never")

    def test_without_tiers_the_cache_panels_stay(self):
        by_gid = collections.Counter(gid for gid, _ in bar_groups(plot.make_figures(
            REPLAY, names=["replay"])["replay"]))
        self.assertEqual(by_gid["hit-rate-hbm"], 0)
        self.assertEqual(by_gid["evicted"], 1)


class Fixtures(unittest.TestCase):
    def test_small(self):
        for name in os.listdir(FIXTURES):
            self.assertLess(os.path.getsize(os.path.join(FIXTURES, name)), 100_000, name)

    def test_synthetic_fixtures_are_what_the_script_writes(self):
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, os.path.join(FIXTURES, "make_synthetic.py"), tmp],
                           check=True)
            for name in ("gpu-synthetic.json", "compare-synthetic.json"):
                with open(os.path.join(tmp, name)) as a, open(os.path.join(FIXTURES, name)) as b:
                    self.assertEqual(a.read(), b.read(), f"{name}: rerun make_synthetic.py")


def run_plot(*args, env=None):
    full_env = {k: v for k, v in os.environ.items() if k != "DECODEBENCH_BIN"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, PLOT, *args], capture_output=True, text=True,
                          env=full_env)


def fake_decodebench(directory, compare_exit=1):
    """A stand-in binary: `compare` prints the synthetic compare JSON and exits compare_exit;
    `report` prints a stub page; each call's arguments are appended to calls.txt."""
    path = os.path.join(directory, "fake-decodebench")
    with open(path, "w") as f:
        f.write(textwrap.dedent(f"""\
            #!{sys.executable}
            import json, sys
            with open({os.path.join(directory, "calls.txt")!r}, "a") as log:
                log.write(json.dumps(sys.argv[1:]) + "\\n")
            if sys.argv[1] == "compare":
                print(open({os.path.join(FIXTURES, "compare-synthetic.json")!r}).read())
                sys.exit({compare_exit})
            if sys.argv[1] == "report":
                print("<html></html>")
                sys.exit(0)
            sys.exit(2)
            """))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def calls(directory):
    with open(os.path.join(directory, "calls.txt")) as f:
        return [json.loads(line) for line in f]


class Cli(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def assert_written(self, prefix, names):
        for name in names:
            with open(f"{prefix}-{name}.png", "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", name)
            with open(f"{prefix}-{name}.svg") as f:
                self.assertIn("<svg", f.read(), name)

    def test_writes_png_and_svg_of_every_figure(self):
        prefix = os.path.join(self.dir, "out", "cpu")
        done = run_plot(os.path.join(FIXTURES, "cpu-sweep.json"), "--out-prefix", prefix)
        self.assertEqual(done.returncode, 0, done.stderr)
        names = ["roofline", "tokens-vs-batch", "ceiling-heatmap", "hit-rate", "dtype-speedup"]
        self.assert_written(prefix, names)
        self.assertFalse(os.path.exists(f"{prefix}-compare.png"))  # skipped, not drawn empty
        self.assertIn("compare: skipped", done.stderr)
        self.assertIn("--compare", done.stderr)

    def test_default_prefix_and_compare_file(self):
        report = os.path.join(self.dir, "gpu.json")
        with open(report, "w") as f:
            json.dump(GPU, f)
        done = run_plot(report, "--compare", os.path.join(FIXTURES, "compare-synthetic.json"),
                        "--only", "compare,roofline")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assert_written(os.path.join(self.dir, "gpu"), ["compare", "roofline"])

    def test_baseline_runs_compare_and_keeps_its_json_on_exit_1(self):
        fake = fake_decodebench(self.dir, compare_exit=1)
        report = os.path.join(FIXTURES, "gpu-synthetic.json")
        prefix = os.path.join(self.dir, "g")
        done = run_plot(report, "--baseline", "base.json", "--decodebench", fake, "--out-prefix",
                        prefix, "--only", "compare")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assert_written(prefix, ["compare"])
        self.assertEqual(calls(self.dir), [["compare", "base.json", report, "--format", "json"]])

    def test_previous_json_is_the_default_baseline(self):
        fake = fake_decodebench(self.dir, compare_exit=0)
        report = os.path.join(self.dir, "latest.json")
        for name in ("latest.json", "previous.json"):
            with open(os.path.join(self.dir, name), "w") as f:
                json.dump(GPU, f)
        done = run_plot(report, "--only", "compare", env={"DECODEBENCH_BIN": fake})
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assert_written(os.path.join(self.dir, "latest"), ["compare"])
        self.assertEqual(calls(self.dir)[0][:2],
                         ["compare", os.path.join(self.dir, "previous.json")])

    def test_previous_json_without_a_binary_skips_compare(self):
        report = os.path.join(self.dir, "latest.json")
        for name in ("latest.json", "previous.json"):
            with open(os.path.join(self.dir, name), "w") as f:
                json.dump(GPU, f)
        done = run_plot(report, "--only", "compare,roofline",
                        env={"DECODEBENCH_BIN": os.path.join(self.dir, "none")})
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("compare: skipped", done.stderr)
        self.assertEqual(done.stderr.count("compare: skipped"), 1, done.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "latest-compare.svg")))

    def test_html_runs_decodebench_report_with_every_svg(self):
        fake = fake_decodebench(self.dir)
        prefix = os.path.join(self.dir, "c")
        page = os.path.join(self.dir, "page.html")
        report = os.path.join(FIXTURES, "cpu-sweep.json")
        done = run_plot(report, "--out-prefix", prefix, "--decodebench", fake, "--html", page,
                        "--only", "roofline,hit-rate")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(os.path.isfile(page))
        self.assertEqual(calls(self.dir), [[
            "report", report, "--format", "html", "--figure", f"{prefix}-roofline.svg",
            "--figure", f"{prefix}-hit-rate.svg"]])
        with open(page) as f:
            self.assertEqual(f.read(), "<html></html>\n", "the page is what report printed")

    def test_cache_sim_file(self):
        prefix = os.path.join(self.dir, "cs")
        path = os.path.join(FIXTURES, "cache-sim.json")
        done = run_plot(path, "--out-prefix", prefix)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assert_written(prefix, ["cache-sim"])
        self.assertEqual(sorted(n for n in os.listdir(self.dir) if n.startswith("cs-")),
                         ["cs-cache-sim.png", "cs-cache-sim.svg"])  # that figure only
        for args, message in ((["--html", "p.html"], "--html needs a sweep report"),
                              (["--only", "roofline"], "unknown figure roofline for a cache-sim")):
            done = run_plot(path, *args, "--out-prefix", os.path.join(self.dir, "bad"))
            self.assertEqual(done.returncode, 2, (args, done.stderr))
            self.assertIn(message, done.stderr, args)
            self.assertNotIn("Traceback", done.stderr, args)

    def test_bad_input(self):
        def write(name, content):
            path = os.path.join(self.dir, name)
            with open(path, "w") as f:
                f.write(content if isinstance(content, str) else json.dumps(content))
            return path

        v2 = dict(CPU, schema_version=2)
        none_ok = copy.deepcopy(CPU)
        for r in none_ok["results"]:
            r["status"] = "skipped"
        cases = [
            ([os.path.join(self.dir, "missing.json")], 2, "no such file"),
            ([write("text.json", "not json")], 2, "not JSON"),
            ([write("other.json", {"kind": "x"})], 2, "not a decodebench report"),
            ([write("v2.json", v2)], 2, "schema_version 2 is not 1"),
            ([write("none-ok.json", none_ok)], 2, "no points with status ok to plot (24 skipped)"),
            ([os.path.join(FIXTURES, "cpu-sweep.json"), "--compare",
              os.path.join(FIXTURES, "cpu-sweep.json")], 2, "not a compare result"),
            ([os.path.join(FIXTURES, "cpu-sweep.json"), "--only", "roofline,pie"], 2,
             "unknown figure pie; valid: roofline"),
            ([os.path.join(FIXTURES, "cpu-sweep.json"), "--baseline", "b.json",
              "--decodebench", os.path.join(self.dir, "nope")], 3, "--decodebench PATH"),
        ]
        for args, code, message in cases:
            done = run_plot(*args, "--out-prefix", os.path.join(self.dir, "bad"))
            self.assertEqual(done.returncode, code, (args, done.stderr))
            self.assertIn(message, done.stderr, args)
            self.assertNotIn("Traceback", done.stderr, args)
        self.assertFalse([n for n in os.listdir(self.dir) if n.startswith("bad-")])


if __name__ == "__main__":
    unittest.main()
