#!/usr/bin/env bash
# scripts/perf-gate.sh on saved reports (no sweep, no timing decides anything here): a later
# real run of configs/sweeps/ci.json on the baseline's machine passes against the committed
# baseline, found by machine class; the same run with its samples made 20 % slower fails with
# exit 1; a machine class without a baseline and bad arguments exit 2.
#   perf_gate_test.sh PERF_GATE DECODEBENCH BASELINE CURRENT WORKDIR
set -euo pipefail
gate="$1" bin="$2" baseline="$3" current="$4" work="$5"
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

expect() {  # expect RC NAME -- command...
  local want="$1" name="$2"; shift 3
  local rc=0
  "$@" >"$work/$name.out" 2>&1 || rc=$?
  if [ "$rc" -ne "$want" ]; then
    cat "$work/$name.out" >&2
    fail "$name: exit $rc, expected $want"
  fi
  echo "ok: $name (exit $rc)"
}

# 1. The committed baseline is found from the report's own device and host class.
expect 0 pass -- "$gate" --bin "$bin" --current "$current" --out-dir "$work/pass"
grep -q "$(basename "$baseline")" "$work/pass.out" || fail "pass: did not name the baseline $baseline"
for f in compare.md compare.json; do
  [ -s "$work/pass/$f" ] || fail "pass: no $f in --out-dir"
done
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); assert c["result"]=="pass", c["counts"]' \
  "$work/pass/compare.json" || fail "pass: compare.json does not say pass"

# 2. Planted: every sample (and its summary) 20 % slower.
python3 - "$current" "$work/slower.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for p in r["results"]:
    p["samples"] = [s * 1.2 for s in p["samples"]]
    for k in ("median", "min", "max", "p10", "p90", "mean"):
        if p["time_s"][k] is not None:
            p["time_s"][k] *= 1.2
json.dump(r, open(sys.argv[2], "w"))
EOF
expect 1 slower -- "$gate" --bin "$bin" --current "$work/slower.json" --baseline "$baseline" \
  --out-dir "$work/slower"
grep -q SLOWER "$work/slower.out" || fail "slower: no SLOWER point in the output"

# 3. Another machine class has no baseline: exit 2 with the command that makes one.
python3 - "$current" "$work/other.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["devices"][0]["name"] = "Some Other CPU"
json.dump(r, open(sys.argv[2], "w"))
EOF
expect 2 no-baseline -- "$gate" --bin "$bin" --current "$work/other.json" --out-dir "$work/o"
grep -q -- "--refresh" "$work/no-baseline.out" || fail "no-baseline: does not say how to make one"

# 4. Bad arguments.
expect 2 bad-option -- "$gate" --bin "$bin" --no-such-option
expect 2 bad-backend -- "$gate" --bin "$bin" --backend tpu
expect 2 missing-current -- "$gate" --bin "$bin" --current "$work/none.json"
echo "perf_gate_test: all passed"
