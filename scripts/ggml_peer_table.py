#!/usr/bin/env python3
"""Tables of a scripts/ggml-peer.sh run, read from its output folder (it runs nothing).

ggml's times become tokens/s (batch / (step x 32 layers), attention only, as decodebench's
`tokens_per_s`) and GB/s of the KV bytes its op reads for the same shape (K and V rows of every
context token and KV head: f16 256 B per row, q8_0 136 B, q4_0 72 B at d = 128). decodebench's
come from its reports: `tokens_per_s`, `bytes.kv_unique` over the median, `% paired`.

    scripts/ggml_peer_table.py OUTDIR
"""
import glob
import json
import os
import re
import statistics
import sys

LAYERS = 32  # llama-2-7b and llama-3.1-8b
SHAPES = {  # name: (label, batch, context, KV heads)
    "mha-b1-4k": ("llama-2-7b B1 x 4096", 1, 4096, 32),
    "mha-b16-4k": ("llama-2-7b B16 x 4096", 16, 4096, 32),
    "gqa-b1-8k": ("llama-3.1-8b B1 x 8192", 1, 8192, 8),
    "gqa-b8-8k": ("llama-3.1-8b B8 x 8192", 8, 8192, 8),
}
PAIRS = [("f16", "f16"), ("q8_0", "int8"), ("q4_0", "int4")]  # ggml type, decodebench dtype
ROW_BYTES = {"f16": 256, "q8_0": 4 * 34, "q4_0": 4 * 18}  # d = 128: 4 blocks of 32


def ggml_cold(path):
    """type_K -> median seconds, from the cold perf mode's lines."""
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path):
        m = re.search(r"^ggml-peer-cold: .*type_K=(\w+),.* median_us=([\d.]+)", line)
        if m:
            out[m.group(1)] = float(m.group(2)) * 1e-6
    return out


def ggml_warm(path):
    """type_K -> seconds per run, from the stock perf mode's lines."""
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path):
        m = re.search(r"FLASH_ATTN_EXT\(.*type_K=(\w+),.*\):\s+\d+ runs -\s+([\d.]+) us/run", line)
        if m:
            out[m.group(1)] = float(m.group(2)) * 1e-6
    return out


SHAS = {}  # decodebench label -> the commits its reports name


def decodebench(path, label):
    """kv_dtype -> result record, and the read ceiling of the sweep's start."""
    d = json.load(open(path))
    SHAS.setdefault(label, set()).add(d["tool"]["git_sha"])
    read = d["devices"][0]["bandwidth"]["measured"]["read"]
    return {r["kv_dtype"]: r for r in d["results"]}, read


def fmt(x, digits=3):
    return "n/a" if x is None else f"{x:.{digits}g}"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ggml_peer_table.py OUTDIR")
    out_dir = sys.argv[1]
    files = sorted(glob.glob(os.path.join(out_dir, "r[0-9][0-9]-*-ggml-cold.txt")))
    if not files:
        sys.exit(f"ggml_peer_table: no r??-<shape>-ggml-cold.txt in {out_dir}")
    runs = {}  # (shape) -> list of (round, {runner: data})
    labels = []
    for f in files:
        m = re.match(r"r(\d\d)-(.+)-ggml-cold\.txt$", os.path.basename(f))
        rnd, shape = int(m.group(1)), m.group(2)
        prefix = os.path.join(out_dir, f"r{rnd:02d}-{shape}-")
        row = {"ggml": ggml_cold(prefix + "ggml-cold.txt"),
               "ggml-huge": ggml_cold(prefix + "ggml-cold-huge.txt"),
               "ggml-warm": ggml_warm(prefix + "ggml-warm.txt"), "db": {}}
        for j in sorted(glob.glob(prefix + "*.json")):
            label = os.path.basename(j)[len(os.path.basename(prefix)):-len(".json")]
            row["db"][label] = decodebench(j, label)
            if label not in labels:
                labels.append(label)
        runs.setdefault(shape, []).append((rnd, row))

    print("decodebench binaries (the commit each report names): " +
          ", ".join(f"{lab} {' '.join(sorted(SHAS[lab]))}" for lab in labels) + "\n")
    print("Per round: step median (ms) and tokens/s (attention only, 32 layers); GB/s = KV bytes"
          " read / median; `% paired` = decodebench's bytes.min / median over the read bandwidth"
          " measured just before each sample. ggml cold: 4 KiB pages (stock); +huge: its buffer on"
          " transparent huge pages; warm: stock perf mode (the op back to back). ggml % paired:"
          " its KV GB/s over the paired read of the first decodebench report's point of the"
          " same format in the same round.\n")
    for shape in [s for s in SHAPES if s in runs]:
        label, batch, context, hkv = SHAPES[shape]
        print(f"### {label} (d 128, {hkv} KV heads)\n")
        head = ["round", "KV (ggml / decodebench)", "ggml cold ms", "ggml tok/s", "ggml GB/s",
                "ggml % paired", "ggml+huge ms", "ggml warm ms"]
        for lab in labels:
            head += [f"{lab} ms", f"{lab} tok/s", f"{lab} GB/s", f"{lab} % paired",
                     f"{lab} / ggml"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        ratios = {}
        for rnd, row in sorted(runs[shape]):
            for gt, dt in PAIRS:
                kv_bytes = batch * context * hkv * 2 * ROW_BYTES[gt]
                t = row["ggml"].get(gt)
                th = row["ggml-huge"].get(gt)
                tw = row["ggml-warm"].get(gt)
                ggml_tps = batch / (t * LAYERS) if t else None
                # ggml has no paired read of its own: the first decodebench report's for the
                # same format in the same round, measured a minute apart at most.
                paired = None
                for res, _ in row["db"].values():
                    if res.get(dt, {}).get("status") == "ok":
                        paired = res[dt]["roofline"]["paired_read_Bps"]
                        break
                cells = [str(rnd), f"{gt} / {dt}", fmt(t and t * 1e3), fmt(ggml_tps),
                         fmt(t and kv_bytes / t / 1e9),
                         f"{100 * kv_bytes / t / paired:.1f}" if t and paired else "n/a",
                         fmt(th and th * 1e3), fmt(tw and tw * 1e3)]
                for lab in labels:
                    res, _ = row["db"].get(lab, ({}, None))
                    r = res.get(dt)
                    if not r or r.get("status") != "ok":
                        cells += ["n/a"] * 4 + [r.get("status", "missing") if r else "missing"]
                        continue
                    med = r["time_s"]["median"]
                    tps = r["tokens_per_s"]
                    ratio = tps / ggml_tps if ggml_tps else None
                    if ratio:
                        ratios.setdefault((gt, lab), []).append(ratio)
                    cells += [fmt(med * 1e3), fmt(tps), fmt(r["bytes"]["kv_unique"] / med / 1e9),
                              f"{100 * r['roofline']['fraction_paired']:.1f}",
                              f"**{ratio:.2f}**" if ratio else "n/a"]
                print("| " + " | ".join(cells) + " |")
        print()
        reads = [f"{lab} r{rnd}: {read / 1e9:.1f}"
                 for rnd, row in sorted(runs[shape]) for lab, (_, read) in row["db"].items()]
        print("decodebench read ceiling at each sweep's start (GB/s): " + ", ".join(reads) + "\n")
        for (gt, lab), rs in ratios.items():
            print(f"- {gt}: {lab} / ggml cold tokens/s over {len(rs)} rounds: "
                  f"median {statistics.median(rs):.2f}, range {min(rs):.2f}-{max(rs):.2f}")
        print()


if __name__ == "__main__":
    main()
