#!/usr/bin/env python3
"""How much each KV-cache format of decodebench changes a real model's predictions. The model
(default SmolLM2-135M-Instruct, see smollm2_gguf.py) reads a text teacher-forced twice: once with
float32 K/V, once per format with every layer's K and V round-tripped through decodebench's own
quantizer (`decodebench quantize --kv-dtype X --tensor k|v IN.npy OUT.npy`, on the layer's whole
K or V in the paged layout [num_blocks, Hkv, P, d]) before the layer attends over them. The
perturbation carries through the later layers, as it would in a served model.

The text is read in --windows windows of --tokens tokens one after another from its start, each
a separate teacher-forced read from position 0; the figures pool the windows' positions.
The formats are decodebench's (--kv-dtype; f32 is a lossless round trip, a check of the path).
Per format, over the T positions of each window:
  kl_mean, kl_p99, kl_max  KL(unquantized || quantized) of the next-token distribution, nats
  top1_agreement           fraction of positions whose most likely next token is unchanged
  ppl, ppl_change(_pct)    perplexity of the text (tokens 1..T-1 of each window) quantized, and
                           minus the unquantized one (absolute, and in percent of it)
KL mean, top-1 agreement and the perplexity change each come with a 95 % interval: a paired
bootstrap over the scored positions (the same positions weigh the unquantized and the quantized
run; stretches of --stretch positions drawn with replacement within each window, a fixed
--seed). A change whose interval holds no change is printed "n.s." (not measurable) with its
interval only. A float32 forward pass rounds differently under another BLAS kernel (numpy's
BLAS, its core and threads are printed and stored), which moves values across quantization
boundaries: the intervals are what a figure means, not its last digits.

A table goes to stdout; --out OUT writes {"kind": "decodebench-kv-quant-eval", "version": 1,
"model", "model_file", "text", "tokens", "block_size", "decodebench", "windows",
"window_offsets", "scored_positions", "scored_tokens", "interval", "blas", "unquantized":
{"kv_dtype": "f32", "ppl", "per_window"}, "formats": [{"kv_dtype", "kl_mean", "kl_p99",
"kl_max", "top1_agreement", "ppl", "ppl_change", "ppl_change_pct", the intervals, "per_window"}]}
(docs/report-schema.md); --figure OUT.svg|png draws KL and top-1 per format.

  python3 scripts/kv_quant_eval.py [--kv-dtype f16,int8,...] [--decodebench PATH] [--out OUT]
                                   [--figure OUT.svg] [--model PATH.gguf] [--text FILE]
                                   [--tokens N] [--windows W] [--block-size P]
                                   [--stretch L] [--resamples B] [--seed S]
"""
from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from typing import Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kv_formats  # noqa: E402
import llama_gguf  # noqa: E402
from llama_gguf import InputError, from_blocks, to_blocks  # noqa: E402

DEFAULT_BINARY = os.path.join(os.path.dirname(HERE), "build", "src", "cli", "decodebench")
# A window costs one read per format plus the float32 one: four windows of the default formats
# took 109 s on a quiet 2-vCPU Sapphire Rapids VM (seven formats: 163 s, and 331 s beside a
# compiler), so the default run stays within a few minutes on 2 cores.
# One window is little: int4's perplexity change on SmolLM2 was +1.2 % in GPL-3's first window
# and +2.6 % in the next, in one run; more windows narrow the intervals and cover more of the
# text. --windows reads more where time allows.
DEFAULT_WINDOWS = 4
DEFAULT_RESAMPLES = 1000
# KL at neighbouring positions moves together (SmolLM2 on GPL-3, int4: autocorrelation 0.16 at
# a distance of 1, still 0.07 at 32; the NLL differences' is near 0): stretches of 64 widen the
# KL interval by about 70 % over single positions and leave 16 stretches to a 1024-token window.
# Shorter windows get shorter stretches, 16 to a window: a bootstrap of a few stretches has
# only a few distinct resamples and understates the spread.
DEFAULT_STRETCH = 64
STRETCHES_PER_WINDOW = 16
LEVEL = 0.95
# Environment variables that choose numpy's BLAS kernel or its threads: stored with the result.
BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
            "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR")


def format_names(binary: str) -> tuple[list[str], str]:
    """The KV formats (every one, and the default --kv-dtype: f16, fp8_e4m3 and the integer ones)
    from the export of kernels/kv_formats.h beside `binary`'s build (scripts/kv_formats.py)."""
    try:
        table = kv_formats.load(near=binary)
    except (OSError, kv_formats.KvFormatsError) as e:
        raise InputError(f"cannot read decodebench's KV formats: {e}") from e
    default = ["f16", "fp8_e4m3"] + kv_formats.names(table, is_float=False)
    return kv_formats.names(table), ",".join(default)


def parse_formats(text: str, valid: list[str]) -> list[str]:
    formats = [f.strip() for f in text.split(",") if f.strip()]
    bad = [f for f in formats if f not in valid]
    if bad or not formats:
        raise InputError(f"--kv-dtype {text!r}: unknown {', '.join(bad) or '(empty)'} "
                         f"(valid: {', '.join(valid)})")
    if len(set(formats)) != len(formats):
        raise InputError(f"--kv-dtype {text!r}: a format appears twice")
    return formats


class Quantizer:
    """decodebench's quantizer as a subprocess: float32 [num_blocks, Hkv, P, d] in, the values
    a kernel would attend over (dequantized, float32, same shape) out."""

    def __init__(self, binary: str, workdir: str):
        self.binary, self.workdir = binary, workdir
        self.calls = 0
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            raise InputError(f"--decodebench {binary}: not an executable; build decodebench "
                             "(scripts/run.sh builds it into build/) or pass its path")
        try:
            done = subprocess.run([binary, "quantize", "--help"], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise InputError(f"--decodebench {binary}: cannot run it: {e}") from e
        if done.returncode != 0:
            raise InputError(f"--decodebench {binary} has no `quantize` command "
                             f"(`quantize --help` exited {done.returncode}: "
                             f"{done.stdout.strip()[:300]}); a newer build has it")

    def round_trip(self, kv_dtype: str, tensor: str, x: np.ndarray) -> np.ndarray:
        src = os.path.join(self.workdir, f"{tensor}.npy")
        dst = os.path.join(self.workdir, f"{tensor}.{kv_dtype}.npy")
        np.save(src, np.ascontiguousarray(x, dtype=np.float32))
        cmd = [self.binary, "quantize", "--kv-dtype", kv_dtype, "--tensor", tensor, src, dst]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.calls += 1
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` exited {done.returncode}: "
                               f"{done.stdout.strip()}")
        y = np.load(dst)
        if y.shape != x.shape or y.dtype != np.float32:
            raise RuntimeError(f"`{' '.join(cmd)}` wrote {y.dtype} {y.shape}, expected float32 "
                               f"{x.shape}")
        if not np.all(np.isfinite(y)):
            raise RuntimeError(f"`{' '.join(cmd)}` wrote non-finite values")
        os.remove(dst)
        return y


def token_nll(logits: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """-log p(tokens[t + 1]) at positions 0..T-2, float64, from logits [T, V]."""
    nll = np.empty(len(tokens) - 1)
    for s in range(0, len(tokens) - 1, 128):
        e = min(len(tokens) - 1, s + 128)
        lp = llama_gguf.log_softmax64(logits[s:e])
        nll[s:e] = -lp[np.arange(e - s), tokens[s + 1:e + 1]]
    return nll


def compare(ref: np.ndarray, test: np.ndarray, tokens: np.ndarray) -> dict:
    """Per position of one window (logits [T, V]): KL(ref || test), whether the top-1 token is
    the same, and test's NLL of the next token (T - 1 of them)."""
    t = len(tokens)
    kl = np.empty(t)
    for s in range(0, t, 128):
        e = min(t, s + 128)
        lp_r = llama_gguf.log_softmax64(ref[s:e])
        lp_t = llama_gguf.log_softmax64(test[s:e])
        kl[s:e] = np.sum(np.exp(lp_r) * (lp_r - lp_t), axis=-1)
    return {"kl": kl, "agree": (ref.argmax(-1) == test.argmax(-1)).astype(np.float64),
            "nll": token_nll(test, tokens)}


def resample_counts(lengths: list[int], stretch: int, resamples: int, seed: int) -> np.ndarray:
    """How often each position is drawn in each resample, [resamples, sum(lengths)]: within each
    window (lengths[w] positions, in order) its stretches of `stretch` positions (the last may be
    shorter) are drawn with replacement, as many as it has. Stretches, not single positions:
    neighbours attend over much the same quantized K/V and their errors move together."""
    rng = np.random.default_rng(seed)
    parts = []
    for n in lengths:
        sizes = np.full(-(-n // stretch), stretch)
        sizes[-1] = n - stretch * (len(sizes) - 1)
        draws = rng.integers(0, len(sizes), size=(resamples, len(sizes)))
        per_stretch = np.zeros((resamples, len(sizes)))
        np.add.at(per_stretch, (np.arange(resamples)[:, None], draws), 1.0)
        parts.append(np.repeat(per_stretch, sizes, axis=1))
    return np.concatenate(parts, axis=1)


def percentile_interval(values: np.ndarray) -> list[float]:
    lo, hi = np.percentile(values, [50 * (1 - LEVEL), 50 * (1 + LEVEL)])
    return [float(lo), float(hi)]


def excludes(interval: list[float], value: float) -> bool:
    return interval[0] > value or interval[1] < value


def summarize(kl: np.ndarray, agree: np.ndarray, nll_ref: np.ndarray, nll_test: np.ndarray,
              scored: np.ndarray, counts: np.ndarray) -> dict:
    """The figures of one format over the pooled positions [N] of every window, and their
    intervals from `counts` [resamples, N] (resample_counts). scored: the positions with a next
    token (all but each window's last), where nll_ref and nll_test hold its NLL (0 elsewhere).
    Every resample weighs the two runs' NLLs by the same counts (paired): their difference is
    the quantizer's, without the spread of the text's own difficulty."""
    base = math.exp(nll_ref[scored].mean())
    ppl = math.exp(nll_test[scored].mean())
    stats = {"kl_mean": float(kl.mean()), "kl_p99": float(np.percentile(kl, 99)),
             "kl_max": float(kl.max()), "top1_agreement": float(agree.mean()),
             "ppl": ppl, "ppl_change": ppl - base, "ppl_change_pct": 100.0 * (ppl - base) / base}
    n = counts.sum(axis=1)
    w = counts * scored
    # A resample with no scored position (a window of 2 tokens, drawn badly) counts as no change.
    n_scored = np.maximum(w.sum(axis=1), 1.0)
    base_b = np.exp(w @ nll_ref / n_scored)
    ppl_b = np.exp(w @ nll_test / n_scored)
    stats["kl_mean_interval"] = percentile_interval(counts @ kl / n)
    stats["top1_agreement_interval"] = percentile_interval(counts @ agree / n)
    stats["ppl_change_interval"] = percentile_interval(ppl_b - base_b)
    stats["ppl_change_pct_interval"] = percentile_interval(100.0 * (ppl_b - base_b) / base_b)
    stats["kl_mean_measurable"] = excludes(stats["kl_mean_interval"], 0.0)
    stats["top1_agreement_measurable"] = excludes(stats["top1_agreement_interval"], 1.0)
    stats["ppl_change_measurable"] = excludes(stats["ppl_change_pct_interval"], 0.0)
    return stats


def _openblas_asked() -> Optional[dict]:
    """The OpenBLAS loaded into this process (Linux: found in /proc/self/maps), asked its core,
    configuration and threads through its own functions; None where there is none."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split(None, 5)[5].strip() for line in f
                            if len(line.split(None, 5)) == 6
                            and "openblas" in os.path.basename(line.split(None, 5)[5]).lower()})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        # Builds rename the symbols: scipy-openblas (numpy's wheels) adds a prefix and, with
        # 64-bit integers, a suffix.
        for prefix in ("", "scipy_"):
            for suffix in ("", "64_", "_64"):
                fn = getattr(lib, f"{prefix}openblas_get_corename{suffix}", None)
                if fn is None:
                    continue
                fn.restype = ctypes.c_char_p
                config = getattr(lib, f"{prefix}openblas_get_config{suffix}")
                config.restype = ctypes.c_char_p
                threads = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}")
                threads.restype = ctypes.c_int
                words = config().decode(errors="replace").split()
                return {"name": "openblas",
                        "version": words[1] if len(words) > 1 else None,
                        "core": fn().decode(errors="replace"), "threads": int(threads()),
                        "source": "openblas"}
    return None


def blas_info() -> dict:
    """The BLAS numpy runs its matmuls on, which decides the float32 rounding of the forward
    pass: {name, version, core (the kernel chosen at run time), threads, source, numpy, env}.
    threadpoolctl's answer where it is installed, else the loaded OpenBLAS asked itself, else
    numpy's build configuration (no core or threads: null)."""
    np.ones((2, 2), dtype=np.float32) @ np.ones((2, 2), dtype=np.float32)  # BLAS loaded
    info = None
    try:
        from threadpoolctl import threadpool_info
        libs = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
        libs.sort(key=lambda lib: "numpy" not in lib.get("filepath", ""))
        if libs:
            lib = libs[0]
            info = {"name": lib.get("internal_api"), "version": lib.get("version"),
                    "core": lib.get("architecture"), "threads": lib.get("num_threads"),
                    "source": "threadpoolctl"}
    except Exception:  # absent, or a version with another API: the next way
        info = None
    if info is None:
        info = _openblas_asked()
    if info is None:
        info = {"name": None, "version": None, "core": None, "threads": None,
                "source": "numpy build configuration"}
        try:
            blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
            info.update(name=blas.get("name"), version=blas.get("version"))
        except Exception:  # numpy before 1.26 prints only
            pass
    info["numpy"] = np.__version__
    info["env"] = {k: os.environ[k] for k in BLAS_ENV if k in os.environ}
    return info


def blas_words(blas: dict) -> str:
    words = " ".join(str(blas[k]) for k in ("name", "version") if blas.get(k)) or "unknown"
    if blas.get("core"):
        words += f", core {blas['core']}"
    if blas.get("threads"):
        words += f", {blas['threads']} threads"
    env = " ".join(f"{k}={v}" for k, v in blas.get("env", {}).items())
    return words + f" (numpy {blas['numpy']}{'; ' + env if env else ''})"


def shown(value: float, interval: list[float], measurable: bool, fmt: str,
          unit: str = "") -> str:
    """A figure with its interval; one whose interval holds no change: "n.s." and the interval."""
    bounds = f"[{interval[0]:{fmt}}{unit}, {interval[1]:{fmt}}{unit}]"
    return f"{value:{fmt}}{unit} {bounds}" if measurable else f"n.s. {bounds}"


def pct_decimals(interval: list[float]) -> int:
    """Decimals that show an interval's width, and the bound nearer 0 of one that excludes 0, to
    about two digits (else [-0.02 %, -0.00 %]): 2 for 0.1 % and more, at most 4."""
    scale = interval[1] - interval[0]
    if excludes(interval, 0.0):
        scale = min(scale, abs(interval[0]), abs(interval[1]))
    return 2 if scale <= 0 else min(4, max(2, 1 - math.floor(math.log10(scale))))


def print_table(result: dict) -> None:
    offsets = ", ".join(str(o) for o in result["window_offsets"])
    n = result["windows"]
    print(f"KV-cache formats on {result['model']}, {n} window{'s' if n > 1 else ''} of "
          f"{result['tokens']} tokens of {result['text']} (at token{'s' if n > 1 else ''} "
          f"{offsets}; blocks of {result['block_size']}); KL(unquantized || quantized) per "
          "position, nats")
    iv = result["interval"]
    print(f"BLAS: {blas_words(result['blas'])}")
    print(f"[lo, hi]: {100 * iv['level']:.0f} % interval, paired bootstrap of the "
          f"{result['scored_positions']} positions in stretches of {iv['stretch_tokens']} "
          f"({iv['resamples']} resamples, seed {iv['seed']}); n.s.: not measurable, the interval "
          "holds no change")
    print(f"{'kv_dtype':<12}{'KL mean':<31}{'KL p99':>9}{'KL max':>10}  {'top-1':<27}"
          f"{'ppl':>9}  ppl change")
    print(f"{'f32 (ref)':<12}{'-':<31}{'-':>9}{'-':>10}  {'-':<27}"
          f"{result['unquantized']['ppl']:>9.4f}  -")
    for f in result["formats"]:
        kl = shown(f["kl_mean"], f["kl_mean_interval"], f["kl_mean_measurable"], ".2e")
        top1 = shown(f["top1_agreement"], f["top1_agreement_interval"],
                     f["top1_agreement_measurable"], ".4f")
        decimals = pct_decimals(f["ppl_change_pct_interval"])
        change = shown(f["ppl_change_pct"], f["ppl_change_pct_interval"],
                       f["ppl_change_measurable"], f"+.{decimals}f", " %")
        print(f"{f['kv_dtype']:<12}{kl:<31}{f['kl_p99']:>9.2e}{f['kl_max']:>10.2e}  {top1:<27}"
              f"{f['ppl']:>9.4f}  {change}")


def check_figure_path(path: str) -> None:
    if os.path.splitext(path)[1].lower() not in (".svg", ".png"):
        raise InputError(f"--figure {path}: the name must end in .svg or .png")
    if importlib.util.find_spec("matplotlib") is None:
        raise InputError("--figure needs matplotlib (scripts/bootstrap.sh --tests installs it)")


def draw_figure(result: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [f["kv_dtype"] for f in result["formats"]]
    x = np.arange(len(names))
    fig, (ax_kl, ax_top1) = plt.subplots(1, 2, figsize=(10, 4))
    # KL can be exactly 0 (an exact format); a log axis needs a floor.
    floor = 1e-12
    means = [max(f["kl_mean"], floor) for f in result["formats"]]
    # The bootstrap intervals as error bars, floored like the bars for the log axis; matplotlib
    # refuses a negative extent (a percentile interval need not hold its figure to the last bit).
    kl_err = [[max(0.0, m - max(f["kl_mean_interval"][0], floor))
               for m, f in zip(means, result["formats"])],
              [max(0.0, max(f["kl_mean_interval"][1], floor) - m)
               for m, f in zip(means, result["formats"])]]
    bars = ax_kl.bar(x, means, yerr=kl_err, capsize=4, label="mean", gid="kl")
    ax_kl.bar_label(bars, [f"{f['kl_mean']:.1e}" if f["kl_mean"] else "0"
                           for f in result["formats"]])
    ax_kl.plot(x, [max(f["kl_p99"], floor) for f in result["formats"]], "k_", markersize=20,
               label="p99", gid="kl_p99")
    ax_kl.set_yscale("log")
    ax_kl.set_ylabel("KL(unquantized || quantized), nats")
    ax_kl.legend()
    top1 = [f["top1_agreement"] for f in result["formats"]]
    top1_err = [[max(0.0, t - f["top1_agreement_interval"][0])
                 for t, f in zip(top1, result["formats"])],
                [max(0.0, f["top1_agreement_interval"][1] - t)
                 for t, f in zip(top1, result["formats"])]]
    bars = ax_top1.bar(x, top1, yerr=top1_err, capsize=4, gid="top1")
    ax_top1.bar_label(bars, [f"{f['top1_agreement']:.3f}" for f in result["formats"]])
    ax_top1.set_ylim(min(0.9, min(f["top1_agreement_interval"][0]
                                  for f in result["formats"]) - 0.02), 1.01)
    ax_top1.set_ylabel("top-1 agreement")
    for ax in (ax_kl, ax_top1):
        ax.set_xticks(x)
        ax.set_xticklabels(names)
        ax.set_xlabel("KV dtype")
    fig.suptitle(f"{result['model']}: {result['windows']} x {result['tokens']} tokens of "
                 f"{result['text']}, quantized K/V against float32 "
                 f"({100 * result['interval']['level']:.0f} % intervals)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: Optional[list[str]] = None) -> int:
    # The formats are the build's: read beside the binary given (or the default one).
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--decodebench", default=DEFAULT_BINARY)
    try:
        valid, default_formats = format_names(pre.parse_known_args(argv)[0].decodebench)
    except InputError as e:
        print(f"kv_quant_eval: error: {e}", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(
        description="KL divergence, top-1 agreement and perplexity of a real model with its K/V "
                    "round-tripped through `decodebench quantize`, against float32 K/V, each "
                    "with a 95 % paired bootstrap interval.")
    parser.add_argument("--kv-dtype", default=default_formats, metavar="LIST",
                        help=f"comma-separated KV dtypes (default: {default_formats}; valid: "
                             f"{', '.join(valid)})")
    parser.add_argument("--decodebench", default=DEFAULT_BINARY, metavar="PATH",
                        help="the decodebench binary with the quantize command (default: "
                             "build/src/cli/decodebench in this checkout)")
    parser.add_argument("--out", metavar="OUT", help="the JSON document: the results")
    # The old spellings, answered with the new names for one release (decodebench's language).
    parser.add_argument("--formats", help=argparse.SUPPRESS)
    parser.add_argument("--json", help=argparse.SUPPRESS)
    parser.add_argument("--figure", metavar="OUT.svg|png", help="draw KL and top-1 per format")
    llama_gguf.add_model_args(parser)
    llama_gguf.add_text_args(parser, tokens=1024,
                             tokens_help="tokens per window: each window reads N tokens of the "
                                         "text")
    parser.add_argument("--windows", type=int, metavar="W",
                        help="read W windows of --tokens tokens one after another from the "
                             "text's start, each a separate teacher-forced read; the figures "
                             "and intervals pool their positions (valid: 1 to the text's tokens "
                             f"/ --tokens; default: {DEFAULT_WINDOWS}, or as many as the text "
                             "holds if fewer)")
    parser.add_argument("--block-size", type=int, default=16, metavar="P",
                        help="tokens per KV block, the quantizer's layout (default: 16)")
    parser.add_argument("--stretch", type=int, metavar="L",
                        help="consecutive positions the bootstrap draws together, as neighbours' "
                             "errors move together (valid: 1 to the tokens of a window; default: "
                             f"{DEFAULT_STRETCH}, or a window's tokens / {STRETCHES_PER_WINDOW} "
                             "if less)")
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES, metavar="B",
                        help="bootstrap resamples for the intervals (valid: 100 to 100000; "
                             f"default: {DEFAULT_RESAMPLES})")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="the bootstrap's random seed: the same seed, the same intervals "
                             "(valid: 0 or more; default: 0)")
    args = parser.parse_args(argv)
    for old, new in (("formats", "kv_dtype"), ("json", "out")):
        if getattr(args, old) is not None:
            print(f"kv_quant_eval: note: --{old} is now --{new.replace('_', '-')} (the old name "
                  "goes in a later release)", file=sys.stderr)
            setattr(args, new, getattr(args, old))
    try:
        formats = parse_formats(args.kv_dtype, valid)
        if args.block_size < 1:
            raise InputError(f"--block-size {args.block_size}: need at least 1")
        if args.windows is not None and args.windows < 1:
            raise InputError(f"--windows {args.windows}: need 1 to the text's tokens / --tokens")
        if args.stretch is not None and args.stretch < 1:
            raise InputError(f"--stretch {args.stretch}: need 1 to the tokens of a window")
        if not 100 <= args.resamples <= 100000:
            raise InputError(f"--resamples {args.resamples}: need 100 to 100000")
        if args.seed < 0:
            raise InputError(f"--seed {args.seed}: need 0 or more")
        for opt, path in (("--out", args.out), ("--figure", args.figure)):
            if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
                raise InputError(f"{opt} {path}: its directory does not exist")
        if args.figure:
            check_figure_path(args.figure)
        with tempfile.TemporaryDirectory(prefix="kv_quant_eval.") as workdir:
            quantizer = Quantizer(args.decodebench, workdir)
            start = time.time()
            model = llama_gguf.load_model(args.model, args.cache_dir)
            text_path, text_len, windows = llama_gguf.text_windows(
                model, args.text, args.tokens, args.windows, multiple=args.block_size,
                default_windows=DEFAULT_WINDOWS)
            if args.windows is None and len(windows) < DEFAULT_WINDOWS:
                print(f"kv_quant_eval: note: {text_path} ({text_len} tokens) holds "
                      f"{len(windows)} window(s) of {len(windows[0][1])} tokens, fewer than "
                      f"the default {DEFAULT_WINDOWS}", file=sys.stderr)
            p, t = args.block_size, len(windows[0][1])
            if args.stretch is None:
                args.stretch = min(DEFAULT_STRETCH, max(1, t // STRETCHES_PER_WINDOW))
            elif args.stretch > t:
                raise InputError(f"--stretch {args.stretch}: need 1 to {t}, the tokens of a "
                                 "window")
            blas = blas_info()
            print(f"kv_quant_eval: {model.hp.name}, {len(windows)} x {t} tokens of {text_path}; "
                  f"BLAS {blas_words(blas)}", file=sys.stderr)
            nll_ref, scored, ref_ppl = [], [], []
            runs = {f: [] for f in formats}  # per format, compare() of each window
            for w, (offset, tokens) in enumerate(windows):
                print(f"kv_quant_eval: window {w + 1}/{len(windows)} (token {offset}): float32 "
                      f"K/V ({time.time() - start:.0f} s)", file=sys.stderr)
                ref = model.forward(tokens)
                nll_ref.append(np.append(token_nll(ref, tokens), 0.0))
                scored.append(np.arange(t) < t - 1)
                ref_ppl.append(math.exp(nll_ref[-1][:-1].mean()))
                for kv_dtype in formats:
                    print(f"kv_quant_eval: window {w + 1}/{len(windows)}: {kv_dtype} "
                          f"({time.time() - start:.0f} s)", file=sys.stderr)

                    def round_trip(_layer, _q, k, v, kv_dtype=kv_dtype):
                        return tuple(
                            from_blocks(quantizer.round_trip(kv_dtype, name, to_blocks(x, p)))
                            for name, x in (("k", k), ("v", v)))

                    runs[kv_dtype].append(
                        compare(ref, model.forward(tokens, kv_hook=round_trip), tokens))
                del ref
            offsets = [o for o, _ in windows]
            counts = resample_counts([t] * len(windows), args.stretch, args.resamples,
                                     args.seed)
            pooled_ref, pooled_scored = np.concatenate(nll_ref), np.concatenate(scored)
            result = {
                "kind": "decodebench-kv-quant-eval", "version": 1,
                "model": model.hp.name, "model_file": model.path,
                "text": os.path.basename(text_path), "tokens": t,
                "block_size": p, "decodebench": args.decodebench,
                "windows": len(windows), "window_offsets": offsets,
                "scored_positions": t * len(windows), "scored_tokens": (t - 1) * len(windows),
                "interval": {"method": "paired stretch bootstrap", "level": LEVEL,
                             "resamples": args.resamples, "seed": args.seed,
                             "stretch_tokens": args.stretch},
                "blas": blas,
                "unquantized": {"kv_dtype": "f32",
                                "ppl": math.exp(pooled_ref[pooled_scored].mean()),
                                "per_window": [{"offset": o, "ppl": v}
                                               for o, v in zip(offsets, ref_ppl)]},
                "formats": [],
            }
            for kv_dtype in formats:
                per = runs[kv_dtype]
                nll_test = np.concatenate([np.append(r["nll"], 0.0) for r in per])
                stats = summarize(np.concatenate([r["kl"] for r in per]),
                                  np.concatenate([r["agree"] for r in per]),
                                  pooled_ref, nll_test, pooled_scored, counts)
                stats["per_window"] = [
                    {"offset": o, "kl_mean": float(r["kl"].mean()),
                     "top1_agreement": float(r["agree"].mean()),
                     "ppl": math.exp(r["nll"].mean()),
                     "ppl_change_pct": 100.0 * math.expm1(r["nll"].mean() - nr[:-1].mean())}
                    for o, r, nr in zip(offsets, per, nll_ref)]
                result["formats"].append({"kv_dtype": kv_dtype, **stats})
            print(f"kv_quant_eval: done in {time.time() - start:.0f} s ({quantizer.calls} "
                  "quantizer calls)", file=sys.stderr)
        print_table(result)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(result, f, indent=2)
                f.write("\n")
        if args.figure:
            draw_figure(result, args.figure)
    except InputError as e:
        print(f"kv_quant_eval: error: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as e:
        print(f"kv_quant_eval: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
