#!/usr/bin/env python3
"""How much each KV-cache format of decodebench changes a real model's predictions. The model
(default SmolLM2-135M-Instruct, see smollm2_gguf.py) reads a text teacher-forced twice: once with
float32 K/V, once per format with every layer's K and V round-tripped through decodebench's own
quantizer (`decodebench quantize --kv-dtype X --tensor k|v IN.npy OUT.npy`, on the layer's whole
K or V in the paged layout [num_blocks, Hkv, P, d]) before the layer attends over them. The
perturbation carries through the later layers, as it would in a served model.

The formats are decodebench's (--kv-dtype; f32 is a lossless round trip, a check of the path).
Per format, over the T positions of the text:
  kl_mean, kl_p99, kl_max  KL(unquantized || quantized) of the next-token distribution, nats
  top1_agreement           fraction of positions whose most likely next token is unchanged
  ppl, ppl_change(_pct)    perplexity of the text (tokens 1..T-1) quantized, and minus the
                           unquantized one (absolute, and in percent of it)

A table goes to stdout; --out OUT writes {"kind": "decodebench-kv-quant-eval", "version": 1,
"model", "model_file", "text", "tokens", "block_size", "decodebench", "unquantized": {"kv_dtype":
"f32", "ppl"}, "formats": [{"kv_dtype", "kl_mean", "kl_p99", "kl_max", "top1_agreement", "ppl",
"ppl_change", "ppl_change_pct"}]} (docs/report-schema.md); --figure OUT.svg|png draws KL and top-1
per format.

  python3 scripts/kv_quant_eval.py [--kv-dtype f16,int8,...] [--decodebench PATH] [--out OUT]
                                   [--figure OUT.svg] [--model PATH.gguf] [--text FILE]
                                   [--tokens N] [--block-size P]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
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


def compare(ref: np.ndarray, test: np.ndarray, tokens: np.ndarray) -> dict:
    """KL(ref || test) per position, top-1 agreement and test's perplexity, from logits [T, V]."""
    t = len(tokens)
    kl = np.empty(t)
    for s in range(0, t, 128):
        e = min(t, s + 128)
        lp_r = llama_gguf.log_softmax64(ref[s:e])
        lp_t = llama_gguf.log_softmax64(test[s:e])
        kl[s:e] = np.sum(np.exp(lp_r) * (lp_r - lp_t), axis=-1)
    return {"kl_mean": float(kl.mean()), "kl_p99": float(np.percentile(kl, 99)),
            "kl_max": float(kl.max()),
            "top1_agreement": float(np.mean(ref.argmax(-1) == test.argmax(-1))),
            "ppl": llama_gguf.perplexity(test, tokens)}


def print_table(result: dict) -> None:
    print(f"KV-cache formats on {result['model']}, the first {result['tokens']} tokens of "
          f"{result['text']} (blocks of {result['block_size']}); KL(unquantized || quantized) "
          "per position, nats")
    print(f"{'kv_dtype':<12}{'KL mean':>10}{'KL p99':>10}{'KL max':>10}{'top-1':>9}"
          f"{'ppl':>10}{'ppl change':>20}")
    print(f"{'f32 (ref)':<12}{'-':>10}{'-':>10}{'-':>10}{'-':>9}"
          f"{result['unquantized']['ppl']:>10.4f}{'-':>20}")
    for f in result["formats"]:
        change = f"{f['ppl_change']:+.4f} ({f['ppl_change_pct']:+.2f}%)"
        print(f"{f['kv_dtype']:<12}{f['kl_mean']:>10.2e}{f['kl_p99']:>10.2e}{f['kl_max']:>10.2e}"
              f"{f['top1_agreement']:>9.4f}{f['ppl']:>10.4f}{change:>20}")


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
    bars = ax_kl.bar(x, [max(f["kl_mean"], floor) for f in result["formats"]], label="mean",
                     gid="kl")
    ax_kl.bar_label(bars, [f"{f['kl_mean']:.1e}" if f["kl_mean"] else "0"
                           for f in result["formats"]])
    ax_kl.plot(x, [max(f["kl_p99"], floor) for f in result["formats"]], "k_", markersize=20,
               label="p99", gid="kl_p99")
    ax_kl.set_yscale("log")
    ax_kl.set_ylabel("KL(unquantized || quantized), nats")
    ax_kl.legend()
    bars = ax_top1.bar(x, [f["top1_agreement"] for f in result["formats"]], gid="top1")
    ax_top1.bar_label(bars, [f"{f['top1_agreement']:.3f}" for f in result["formats"]])
    ax_top1.set_ylim(min(0.9, min(f["top1_agreement"] for f in result["formats"]) - 0.02), 1.01)
    ax_top1.set_ylabel("top-1 agreement")
    for ax in (ax_kl, ax_top1):
        ax.set_xticks(x)
        ax.set_xticklabels(names)
        ax.set_xlabel("KV dtype")
    fig.suptitle(f"{result['model']}: {result['tokens']} tokens of {result['text']}, "
                 f"quantized K/V against float32")
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
                    "round-tripped through `decodebench quantize`, against float32 K/V.")
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
    llama_gguf.add_text_args(parser, tokens=1024)
    parser.add_argument("--block-size", type=int, default=16, metavar="P",
                        help="tokens per KV block, the quantizer's layout (default: 16)")
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
        for opt, path in (("--out", args.out), ("--figure", args.figure)):
            if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
                raise InputError(f"{opt} {path}: its directory does not exist")
        if args.figure:
            check_figure_path(args.figure)
        with tempfile.TemporaryDirectory(prefix="kv_quant_eval.") as workdir:
            quantizer = Quantizer(args.decodebench, workdir)
            start = time.time()
            model = llama_gguf.load_model(args.model, args.cache_dir)
            text_path, tokens = llama_gguf.text_tokens(model, args.text, args.tokens,
                                                       multiple=args.block_size)
            p = args.block_size
            print(f"kv_quant_eval: {model.hp.name}, {len(tokens)} tokens of {text_path}; "
                  f"float32 K/V", file=sys.stderr)
            ref = model.forward(tokens)
            result = {
                "kind": "decodebench-kv-quant-eval", "version": 1,
                "model": model.hp.name, "model_file": model.path,
                "text": os.path.basename(text_path), "tokens": int(len(tokens)),
                "block_size": p, "decodebench": args.decodebench,
                "unquantized": {"kv_dtype": "f32",
                                "ppl": llama_gguf.perplexity(ref, tokens)},
                "formats": [],
            }
            for kv_dtype in formats:
                print(f"kv_quant_eval: {kv_dtype} ({time.time() - start:.0f} s)", file=sys.stderr)

                def round_trip(_layer, _q, k, v, kv_dtype=kv_dtype):
                    return tuple(
                        from_blocks(quantizer.round_trip(kv_dtype, name, to_blocks(x, p)))
                        for name, x in (("k", k), ("v", v)))

                stats = compare(ref, model.forward(tokens, kv_hook=round_trip), tokens)
                base = result["unquantized"]["ppl"]
                stats["ppl_change"] = stats["ppl"] - base
                stats["ppl_change_pct"] = 100.0 * (stats["ppl"] - base) / base
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
