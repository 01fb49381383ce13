#!/usr/bin/env python3
"""The hardware check of the byte model: Nsight Compute's DRAM bytes of a decode step against the
bytes.min the report says that step must move.

Each pair is one point profiled by scripts/gpu-check.sh: the CSV ncu wrote
(`--csv --page raw --print-units base --print-kernel-base demangled`, paged_decode kernels only)
and the JSON report of the same `decodebench sweep` run (one point, docs/report-schema.md). A
step is the kernels one decode launches in order (split_kv: split + merge); launches are cut
into steps where a kernel repeats. Per kernel the median over the steps profiled; the step's
DRAM bytes are the sum over its kernels.

  scripts/ncu-bytes.py --out OUTDIR/ncu-bytes CSV REPORT [CSV REPORT ...]

writes OUTDIR/ncu-bytes.md (a table: point, kernel, DRAM bytes read, bytes_min, ratio, L2 hit %,
issue %) and OUTDIR/ncu-bytes.json, and prints the table. A ratio near 1 says the kernel reads
what the model counts; well above 1, it re-reads (or the model misses a tensor). Standard
library only. Exit 0, or 1 with a message naming the file when a pair does not join (a file
missing, no profiled kernel, a report without exactly one point, kernels of another rung).
"""
import argparse
import csv
import json
import statistics
import sys

DRAM = "dram__bytes_read.sum"
L2_HIT = "lts__t_sector_hit_rate.pct"
ISSUE = "sm__inst_issued.avg.pct_of_peak_sustained_active"
# Every decode kernel lives in this namespace (the spill gate relies on it too); a rung's
# kernels in its `<rung>_detail` namespace inside it.
NAMESPACE = "paged_decode::"


class JoinError(Exception):
    pass


def number(text):
    """ncu's numbers may carry thousands separators; 'n/a' and '' are None."""
    t = text.strip().replace(",", "")
    if t in ("", "n/a", "N/A"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


def short_name(demangled):
    """'void a::paged_decode::split_kv_detail::split_kernel<...>(...)' -> 'split_kv_detail::split_kernel'."""
    at = demangled.find(NAMESPACE)
    if at < 0:
        return None
    rest = demangled[at + len(NAMESPACE):]
    for stop in "<( ":
        cut = rest.find(stop)
        if cut >= 0:
            rest = rest[:cut]
    return rest


def read_ncu_csv(path):
    """The profiled launches in order: [{id, name, kernel, dram, l2_hit, issue}]."""
    try:
        with open(path, newline="") as f:
            # ncu's own messages (==PROF==, ==WARNING==, ==ERROR==) share the file with the CSV.
            lines = [ln for ln in f if ln.strip() and not ln.startswith("==")]
    except OSError as e:
        raise JoinError(f"{path}: cannot read the ncu CSV: {e.strerror}")
    rows = list(csv.reader(lines))
    header = next((i for i, r in enumerate(rows) if "ID" in r and "Kernel Name" in r), None)
    if header is None:
        raise JoinError(f"{path}: no ncu CSV header (a row with \"ID\" and \"Kernel Name\"); "
                        "did ncu profile anything?")
    cols = rows[header]
    if DRAM not in cols:
        raise JoinError(f"{path}: no column {DRAM} (columns: {', '.join(cols)})")
    at = {name: cols.index(name) for name in (DRAM, L2_HIT, ISSUE) if name in cols}
    launches = []
    for r in rows[header + 1:]:
        if len(r) != len(cols):
            continue
        row_id = r[cols.index("ID")].strip()
        if not row_id.isdigit():
            continue  # the units row
        name = r[cols.index("Kernel Name")]
        kernel = short_name(name)
        if kernel is None:
            raise JoinError(f"{path}: launch {row_id} ({name[:80]}) is not a {NAMESPACE} kernel; "
                            "profile with --kernel-name-base demangled -k regex:paged_decode::")
        dram = number(r[at[DRAM]])
        if dram is None:
            raise JoinError(f"{path}: launch {row_id} ({kernel}) has no {DRAM} value")
        launches.append({
            "id": int(row_id), "name": name, "kernel": kernel, "dram": dram,
            "l2_hit": number(r[at[L2_HIT]]) if L2_HIT in at else None,
            "issue": number(r[at[ISSUE]]) if ISSUE in at else None,
        })
    if not launches:
        raise JoinError(f"{path}: the CSV has a header but no profiled launch")
    return sorted(launches, key=lambda x: x["id"])


def split_steps(launches):
    """Consecutive launches, a new step where a kernel repeats; incomplete last step dropped."""
    steps, current = [], []
    for launch in launches:
        if any(x["kernel"] == launch["kernel"] for x in current):
            steps.append(current)
            current = []
        current.append(launch)
    steps.append(current)
    first = [x["kernel"] for x in steps[0]]
    if len(steps) > 1 and [x["kernel"] for x in steps[-1]] != first:
        steps.pop()
    for s in steps:
        if [x["kernel"] for x in s] != first:
            raise JoinError("launches do not form repeated steps: "
                            + " | ".join(",".join(x["kernel"] for x in s) for s in steps))
    return steps


def read_point(path):
    try:
        with open(path) as f:
            report = json.load(f)
    except OSError as e:
        raise JoinError(f"{path}: cannot read the report: {e.strerror}")
    except json.JSONDecodeError as e:
        raise JoinError(f"{path}: not JSON: {e}")
    if report.get("schema_version") != 1:
        raise JoinError(f"{path}: schema_version {report.get('schema_version')!r} is not 1")
    results = report.get("results") or []
    if len(results) != 1:
        raise JoinError(f"{path}: holds {len(results)} points; the profiled sweep must have exactly "
                        "one (did it finish?)")
    p = results[0]
    b = p.get("bytes") or {}
    if not isinstance(b.get("min"), (int, float)) or b["min"] <= 0:
        raise JoinError(f"{path}: the point has no bytes.min (status {p.get('status')}: "
                        f"{p.get('reason', '')})")
    return p


def join(csv_path, report_path):
    p = read_point(report_path)
    launches = read_ncu_csv(csv_path)
    rung = p.get("kernel", "")
    expected = f"{rung}_detail::"
    strangers = sorted({x["kernel"] for x in launches if not x["kernel"].startswith(expected)})
    if strangers:
        raise JoinError(f"{csv_path} does not join {report_path}: the report's point ran kernel "
                        f"'{rung}', but ncu profiled {', '.join(strangers)} (expected kernels in "
                        f"namespace {NAMESPACE}{expected})")
    try:
        steps = split_steps(launches)
    except JoinError as e:
        raise JoinError(f"{csv_path}: {e}")

    def median(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    kernels = []
    for i, first in enumerate(steps[0]):
        kernels.append({
            "kernel": first["kernel"],
            "name": first["name"],
            "dram_bytes_read": median(s[i]["dram"] for s in steps),
            "l2_hit_pct": median(s[i]["l2_hit"] for s in steps),
            "issue_pct": median(s[i]["issue"] for s in steps),
        })
    b = p["bytes"]
    step_dram = sum(k["dram_bytes_read"] for k in kernels)
    logical = None
    if isinstance(b.get("kv_logical"), (int, float)) and isinstance(b.get("kv_unique"), (int, float)):
        logical = b["min"] - b["kv_unique"] + b["kv_logical"]
    ctx = p.get("context", {}).get("values", ["?"])
    return {
        "point": f"{p.get('model')} b={p.get('batch')} ctx={'-'.join(str(v) for v in ctx)} "
                 f"{p.get('kv_dtype')} h={p.get('hit_rate', 0):g}",
        "model": p.get("model"),
        "batch": p.get("batch"),
        "context": ctx,
        "kv_dtype": p.get("kv_dtype"),
        "kernel": rung,
        "kernel_requested": p.get("kernel_requested"),
        "status": p.get("status"),
        "csv": csv_path,
        "report": report_path,
        "steps_profiled": len(steps),
        "step_dram_bytes_read": [sum(x["dram"] for x in s) for s in steps],
        "dram_bytes_read": step_dram,
        "bytes_min": b["min"],
        "bytes_kv_unique": b.get("kv_unique"),
        "bytes_logical": logical,
        "ratio_to_min": step_dram / b["min"],
        "ratio_to_logical": step_dram / logical if logical else None,
        "kernels": kernels,
    }


def fmt_bytes(v):
    if v is None:
        return ""
    if v >= 1e9:
        return f"{v / 1e9:.3f} GB"
    return f"{v / 1e6:.2f} MB" if v >= 1e6 else f"{v / 1e3:.1f} kB"


def fmt_pct(v):
    return "" if v is None else f"{v:.1f}"


def markdown(points):
    out = ["| point | kernel | DRAM bytes read | bytes_min | ratio | L2 hit % | issue % |",
           "|---|---|---|---|---|---|---|"]
    for pt in points:
        for k in pt["kernels"]:
            out.append(f"| {pt['point']} | {k['kernel']} | {fmt_bytes(k['dram_bytes_read'])} | | | "
                       f"{fmt_pct(k['l2_hit_pct'])} | {fmt_pct(k['issue_pct'])} |")
        out.append(f"| {pt['point']} | **step** ({pt['kernel']}, {pt['steps_profiled']} profiled) | "
                   f"{fmt_bytes(pt['dram_bytes_read'])} | {fmt_bytes(pt['bytes_min'])} | "
                   f"{pt['ratio_to_min']:.3f} | | |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output prefix: writes PREFIX.md and PREFIX.json")
    ap.add_argument("pairs", nargs="+", metavar="CSV REPORT")
    args = ap.parse_args()
    if len(args.pairs) % 2:
        ap.error(f"give CSV REPORT pairs; got {len(args.pairs)} paths (the last has no partner)")
    try:
        points = [join(args.pairs[i], args.pairs[i + 1]) for i in range(0, len(args.pairs), 2)]
    except JoinError as e:
        print(f"ncu-bytes: {e}", file=sys.stderr)
        return 1
    table = markdown(points)
    note = ("DRAM bytes read (ncu dram__bytes_read.sum, caches flushed before each kernel, clocks "
            "not locked) per decode step against the byte model's bytes.min (docs/report-schema.md)")
    with open(args.out + ".md", "w") as f:
        f.write(f"# ncu DRAM bytes against the byte model\n\n{note}.\n\n{table}")
    with open(args.out + ".json", "w") as f:
        json.dump({"metrics": [DRAM, L2_HIT, ISSUE], "note": note, "points": points}, f, indent=2)
        f.write("\n")
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
