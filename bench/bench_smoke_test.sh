#!/usr/bin/env bash
# decodebench_bench cannot rot: runs it once at small shapes (DECODEBENCH_BENCH_SMALL=1) over
# every family with a minimal time, and checks its JSON: each family present (the CUDA rungs
# exactly when the context names a CUDA device), the prefix points with both byte rates, no
# benchmark failed (an unsupported combination, "skipped: ...", is allowed), and the context keys.
# Each check also gets a planted fault it must catch, and a bad DECODEBENCH_BENCH_SMALL must be
# refused.
#   bench_smoke_test.sh DECODEBENCH_BENCH WORKDIR
set -euo pipefail
bench="$1"
work="$2"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

mkdir -p "$work"
out="$work/bench.json"
# Google Benchmark 1.7.1 (Debian 12) takes --benchmark_min_time as a plain number of seconds only
# (no "s" or "x" suffix, which 1.8 added); a plain number is also valid on 1.8.
DECODEBENCH_BENCH_SMALL=1 "$bench" --benchmark_min_time=0.001 --benchmark_format=json \
  >"$out" 2>"$work/bench.stderr" || {
  cat "$work/bench.stderr" >&2
  fail "decodebench_bench exited non-zero"
}

check() {  # JSON: exit 0 when the run has everything, else 1 with what is missing
  python3 - "$1" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1]))
ctx, benches = run["context"], run["benchmarks"]
problems = []
keys = ["decodebench.version", "decodebench.git_sha", "decodebench.shapes", "decodebench.cpu",
        "decodebench.cpu.read_GBps", "decodebench.cpu.copy_GBps", "decodebench.cuda",
        "decodebench.gemm"]
problems += [f"context lacks {k}" for k in keys if not ctx.get(k)]
families = {b["name"].split("/")[0] for b in benches}
wanted = ["decode", "paged_read", "layout_read", "convert", "ceiling"]
if not ctx.get("decodebench.gemm", "none").startswith("none"):
    wanted += ["gemm", "gemm_step", "gemm_square"]  # the build found a GEMM library
cuda = ctx.get("decodebench.cuda")
if cuda in ("no device", "not built"):
    if "cuda" in families:
        problems.append(f"cuda benchmarks ran although the context says cuda: {cuda}")
else:
    wanted.append("cuda")  # the context names a device (or why it is unusable: then none ran)
    problems += [f"context lacks {k}" for k in ("decodebench.cuda.read_GBps",
                                                 "decodebench.cuda.copy_GBps") if not ctx.get(k)]
problems += [f"no {f}/ benchmark" + (f" (decodebench.cuda: {cuda})" if f == "cuda" else "")
             for f in wanted if f not in families]
for b in benches:
    if b.get("error_occurred") and not b.get("error_message", "").startswith("skipped:"):
        problems.append(f"{b['name']} failed: {b.get('error_message')}")
# Every decode-like benchmark reports both byte rates; a prefix point's logical rate is above
# its unique one (shared blocks counted once per sequence).
timed = [b for b in benches if b["name"].split("/")[0] in ("decode", "cuda")
         and not b.get("error_occurred")]
for b in timed:
    missing = [c for c in ("bytes_min_GBps", "bytes_logical_GBps") if c not in b]
    if missing:
        problems.append(f"{b['name']} lacks {missing}")
prefix = [b for b in timed if b["name"].startswith("decode/") and "/h:" in b["name"]]
if not prefix:
    problems.append("no decode prefix point (decode/.../h:...)")
for b in prefix:
    if not b.get("bytes_logical_GBps", 0) > b.get("bytes_min_GBps", 0) > 0:
        problems.append(f"{b['name']}: bytes_logical_GBps {b.get('bytes_logical_GBps')} not above "
                        f"bytes_min_GBps {b.get('bytes_min_GBps')}")
for p in problems:
    print(p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
}

check "$out" || fail "the bench's JSON ($out)"
echo "ok: every family and context key in $out"

# --- planted faults: each edit of the real JSON must fail the check ----------------------------
plant() {  # NAME PYTHON-STATEMENT(run): the edited JSON must fail
  python3 - "$out" "$work/planted.json" "$2" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(run, open(sys.argv[2], "w"))
EOF
  if check "$work/planted.json" 2>"$work/planted.stderr"; then
    fail "planted fault not caught: $1"
  fi
  echo "ok: caught $1: $(head -1 "$work/planted.stderr")"
}
plant "a family missing" \
  'run["benchmarks"] = [b for b in run["benchmarks"] if not b["name"].startswith("convert/")]'
if python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["context"]["decodebench.gemm"].startswith("none"))' "$out"; then
  plant "a GEMM library named but no gemm benchmark" \
    'run["benchmarks"] = [b for b in run["benchmarks"] if not b["name"].startswith("gemm/")]'
fi
plant "no prefix points" \
  'run["benchmarks"] = [b for b in run["benchmarks"] if "/h:" not in b["name"]]'
plant "a prefix point whose logical rate is its unique one" \
  'p = next(b for b in run["benchmarks"] if "/h:" in b["name"]); p["bytes_logical_GBps"] = p["bytes_min_GBps"]'
plant "a decode without bytes_logical_GBps" \
  'next(b for b in run["benchmarks"] if b["name"].startswith("decode/")).pop("bytes_logical_GBps")'
plant "a failed benchmark" \
  'b = run["benchmarks"][0]; b["error_occurred"] = True; b["error_message"] = "wrong: 3 of 8 elements"'
plant "no git sha in the context" 'run["context"].pop("decodebench.git_sha")'
plant "no read ceiling in the context" 'run["context"].pop("decodebench.cpu.read_GBps")'
plant "a CUDA device named but no cuda benchmark" \
  'run["context"].update({"decodebench.cuda": "NVIDIA H200", "decodebench.cuda.read_GBps": "4300.0", "decodebench.cuda.copy_GBps": "4100.0"}); run["benchmarks"] = [b for b in run["benchmarks"] if not b["name"].startswith("cuda/")]'

# --- bad input -----------------------------------------------------------------------------------
if msg="$(DECODEBENCH_BENCH_SMALL=yes "$bench" --benchmark_list_tests 2>&1)"; then
  fail "DECODEBENCH_BENCH_SMALL=yes was accepted"
fi
grep -q "DECODEBENCH_BENCH_SMALL='yes' is not valid" <<<"$msg" ||
  fail "DECODEBENCH_BENCH_SMALL=yes: the message does not name the value: $msg"
echo "ok: DECODEBENCH_BENCH_SMALL=yes refused"
