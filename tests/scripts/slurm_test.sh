#!/usr/bin/env bash
# scripts/slurm/ and scripts/multi-gpu.sh without a cluster or a GPU (CPU backend, a tiny sweep
# with the ceilings measured once): the array task script run by hand as tasks 0..2 of 3, one
# task SIGKILLed after its first checkpointed point and run again (it must resume: the finished
# points kept as they were), SIGTERM to a task (report kept as interrupted, exit 143), a complete
# task run again (nothing to do), the merge against an unsharded run of the same config (point
# identities and statuses), submit.sh against a fake sbatch (the array, then the merge after it
# with the array's job id), multi-gpu.sh with two CPU shards, BUNDLE=DIR. Planted faults, each
# caught: a merge of 2 of 3 shards, a re-queued task that restarts from scratch, decodebench not
# exec'd (SIGTERM misses it), a point missing from the merge, a failing shard in multi-gpu.sh, an
# sbatch that returns no job id. About 70 s on 2 busy cores.
#
#   tests/scripts/slurm_test.sh SCRIPTS_DIR DECODEBENCH WORKDIR
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 SCRIPTS_DIR DECODEBENCH WORKDIR" >&2; exit 2; }
scripts="$(cd "$1" && pwd)"
bin="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
work="$3"
[ -x "$bin" ] || { echo "slurm_test: no decodebench at '$bin'" >&2; exit 2; }
rm -rf "$work"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
cd "$work"
export DECODEBENCH_BIN="$bin"

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok (${SECONDS} s): $*"; }
# expect_fail WHAT CMD...: the planted fault must make CMD fail.
expect_fail() {
  local what="$1"
  shift
  if "$@" >"$work/expect_fail.log" 2>&1; then cat "$work/expect_fail.log" >&2; fail "not caught: $what"; fi
  pass "caught: $what"
}

# 6 points, 2 per shard; min_time_s makes each point take >= 1.5 s of samples, so a kill or a TERM
# sent once the first point is checkpointed lands in the second (cold by rotation, a 50 us step
# reaches 0.3 s in ~0.35 s of wall time, less than a loaded host's polling takes).
cat >tiny.json <<'JSON'
{"name": "slurm-test", "model": ["llama-3.1-8b"], "batch": [1, 2], "context": [64, 96, 128],
 "kv_dtype": ["f16"], "q_dtype": ["f16"], "block_size": [16], "kernel": ["auto"], "backend": "cpu",
 "measure": {"min_samples": 2, "min_time_s": 1.5, "max_noise": 1, "timeout_s": 3, "warm_l2": true}}
JSON
"$bin" ceilings --backend cpu --out ceil.json >/dev/null 2>&1
sweep_args=(--backend cpu --ceilings "$work/ceil.json" -q)

json() { python3 -c "$1" "${@:2}"; }
# same_points A B: the same point identities, each with the same status (merge vs unsharded).
same_points() {
  json '
import json, sys
key = ("index", "model", "kernel_requested", "kv_dtype", "q_dtype", "block_size", "batch",
       "context", "hit_rate", "prefix_groups", "seed", "backend")
def points(path):
    return {tuple(json.dumps(r.get(k)) for k in key): r["status"] for r in json.load(open(path))["results"]}
a, b = points(sys.argv[1]), points(sys.argv[2])
if a != b:
    print("points differ:", sorted(set(a.items()) ^ set(b.items())), file=sys.stderr)
    sys.exit(1)
print(len(a), "points, statuses", sorted(set(a.values())))
' "$1" "$2"
}
# kept CHECKPOINT FINAL: every point the checkpoint finished is in FINAL exactly as it was (its
# samples), so a resumed task did not measure it again; FINAL is complete.
kept() {
  json '
import json, sys
ck, fin = (json.load(open(p)) for p in sys.argv[1:3])
if fin["completion"]["state"] != "complete":
    sys.exit("not complete: %s" % fin["completion"])
done = {r["index"]: r for r in ck["results"] if r["status"] != "not_run"}
now = {r["index"]: r for r in fin["results"]}
if not done:
    sys.exit("the checkpoint has no finished point")
for i, r in done.items():
    if now[i].get("samples") != r.get("samples") or now[i].get("time_s") != r.get("time_s"):
        sys.exit("point %d was measured again (restarted, not resumed)" % i)
print(len(done), "finished points kept")
' "$1" "$2"
}
state() { json 'import json, sys; c = json.load(open(sys.argv[1]))["completion"]; print(c["state"], c["points_finished"], c["points_planned"])' "$1"; }
task() { # task I N OUTDIR [SCRIPT]: array task I of N, as Slurm would start it
  SLURM_ARRAY_TASK_ID="$1" SLURM_ARRAY_TASK_COUNT="$2" bash "${4:-$scripts/slurm/sweep.sbatch}" \
    "$work/tiny.json" "$3" "${sweep_args[@]}"
}

# --- unsharded reference
"$bin" sweep --config tiny.json "${sweep_args[@]}" --out full.json --format table >full.log 2>&1
[ "$(state full.json)" = "complete 6 6" ] || fail "unsharded run: $(state full.json)"

# --- argument checks
expect_fail "sweep.sbatch without SLURM_ARRAY_TASK_ID" bash "$scripts/slurm/sweep.sbatch" tiny.json out
expect_fail "task 3 of 3" task 3 3 "$work/out"

# --- array tasks 0 and 2 by hand; task 1 killed after its first point, then re-queued
out="$work/out"
task 0 3 "$out" >task0.log 2>&1 || fail "task 0 (see $work/task0.log)"
task 2 3 "$out" >task2.log 2>&1 || fail "task 2 (see $work/task2.log)"
# Started directly (not through task, a subshell): the pid is the one decodebench is exec'd in.
SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=3 bash "$scripts/slurm/sweep.sbatch" "$work/tiny.json" \
  "$out" "${sweep_args[@]}" >task1-killed.log 2>&1 &
pid=$!
shard1="$out/shard-1-of-3.json"
for _ in $(seq 600); do
  s="$(state "$shard1" 2>/dev/null || true)"
  case "$s" in running\ [1-9]*) break ;; esac
  sleep 0.02
done
kill -KILL "$pid"
wait "$pid" || true
read -r st fin planned <<<"$(state "$shard1")"
if [ "$st" != running ] || [ "$fin" -lt 1 ] || [ "$fin" -ge "$planned" ]; then
  fail "task 1 not killed mid-way: $st $fin/$planned"
fi
cp "$shard1" checkpoint-1.json
pass "task 1 killed at $fin/$planned points"
task 1 3 "$out" >task1.log 2>&1 || fail "re-queued task 1 (see $work/task1.log)"
grep -q "resuming" task1.log || fail "re-queued task 1 did not say it resumes"
kept checkpoint-1.json "$shard1" || fail "re-queued task 1 did not keep its finished points"
pass "re-queued task 1 resumed"

# planted: a task script whose re-queue restarts the shard from scratch
# shellcheck disable=SC2016 # $report is the script's, not ours
sed 's|sweep --resume "\$report" --config|sweep --out "$report" --config|' \
  "$scripts/slurm/sweep.sbatch" >restarts.sbatch
! cmp -s restarts.sbatch "$scripts/slurm/sweep.sbatch" || fail "could not plant the restart"
mkdir -p out-restart
cp checkpoint-1.json out-restart/shard-1-of-3.json
task 1 3 "$work/out-restart" "$work/restarts.sbatch" >restart.log 2>&1 || fail "planted restart run failed"
expect_fail "a re-queued task restarting from scratch" kept checkpoint-1.json out-restart/shard-1-of-3.json

# SIGTERM (Slurm's time limit) to the task's process reaches decodebench: the report is kept
# as interrupted, exit 143. Planted: a task script that runs decodebench as a child instead.
# term_task SCRIPT OUTDIR: prints the state after the TERM; setsid, so the planted script's
# orphaned child is cleaned up with its process group.
term_task() {
  local pid rc=0 s
  SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=3 setsid bash "$1" "$work/tiny.json" "$2" \
    "${sweep_args[@]}" >"$2.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    s="$(state "$2/shard-1-of-3.json" 2>/dev/null || true)"
    case "$s" in running\ [1-9]*) break ;; esac
    sleep 0.02
  done
  kill -TERM "$pid"
  wait "$pid" || rc=$?
  sleep 0.2
  echo "$rc $(state "$2/shard-1-of-3.json" | cut -d' ' -f1)"
  kill -KILL -- "-$pid" 2>/dev/null || true
}
[ "$(term_task "$scripts/slurm/sweep.sbatch" "$work/out-term")" = "143 interrupted" ] ||
  fail "SIGTERM to a task: $(cat "$work/out-term.log")"
pass "SIGTERM to a task: report interrupted, exit 143"
# shellcheck disable=SC2016 # $bin is the script's, not ours
sed 's|^exec "\$bin" sweep --config|"$bin" sweep --config|' "$scripts/slurm/sweep.sbatch" >child.sbatch
! cmp -s child.sbatch "$scripts/slurm/sweep.sbatch" || fail "could not plant the child process"
expect_fail "SIGTERM not reaching decodebench" test "$(term_task "$work/child.sbatch" "$work/out-child")" = "143 interrupted"

# a complete task is not run again
sum0="$(sha256sum <"$out/shard-0-of-3.json")"
task 0 3 "$out" >task0-again.log 2>&1 || fail "task 0 again"
grep -q "nothing to do" task0-again.log || fail "complete task 0 ran again"
[ "$(sha256sum <"$out/shard-0-of-3.json")" = "$sum0" ] || fail "complete task 0 rewrote its report"
pass "complete task 0: nothing to do"

# --- merge: 2 of 3 shards refused, then the whole set against the unsharded run
mv "$out/shard-2-of-3.json" shard-2-aside.json
expect_fail "merge.sh with shard 2 of 3 missing" bash "$scripts/slurm/merge.sh" "$out" 3
grep -q "shard-2-of-3.json" expect_fail.log || fail "merge.sh did not name the missing shard"
expect_fail "decodebench merge of 2 of 3 shards" "$bin" merge --out "$work/m2.json" "$out/shard-0-of-3.json" "$shard1"
mv shard-2-aside.json "$out/shard-2-of-3.json"
bash "$scripts/slurm/merge.sh" "$out" 3 >merge.log 2>&1 || fail "merge.sh (see $work/merge.log)"
same_points "$out/merged.json" full.json || fail "merged shards differ from the unsharded run"
pass "merged 3 shards = unsharded run"
json 'import json, sys; d = json.load(open(sys.argv[1])); d["results"].pop(4); json.dump(d, open(sys.argv[2], "w"))' \
  "$out/merged.json" dropped.json
expect_fail "a point missing from the merge" same_points dropped.json full.json

# --- submit.sh against a fake sbatch: the array, then the merge after it
mkdir -p fakebin
cat >fakebin/sbatch <<'SH'
#!/usr/bin/env bash
# Fake sbatch: one line per call (arguments NUL-free, tab-separated), a job id per call.
n=$(($(wc -l <"$SBATCH_LOG" 2>/dev/null || echo 0) + 1))
(IFS=$'\t'; echo "$*") >>"$SBATCH_LOG"
case "${SBATCH_REPLY:-id}" in id) echo "$((4100 + n));cluster1" ;; none) echo "error: no" ;; esac
SH
chmod +x fakebin/sbatch
export SBATCH_LOG="$work/sbatch.log"
PATH="$work/fakebin:$PATH" bash "$scripts/slurm/submit.sh" tiny.json sub 3 --partition=gpu -- \
  --backend cuda >submit.log 2>&1 || fail "submit.sh (see $work/submit.log)"
json '
import sys
calls = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
work, scripts = sys.argv[2], sys.argv[3]
assert len(calls) == 2, calls
a, m = calls
def has(call, *want):
    for w in want:
        assert w in call, (w, call)
has(a, "--parsable", "--array=0-2", "--partition=gpu", scripts + "/slurm/sweep.sbatch",
    work + "/tiny.json", work + "/sub", "--backend", "cuda")
assert a.index("--backend") > a.index(scripts + "/slurm/sweep.sbatch"), "sweep args before the script"
assert not any(x.startswith("--dependency") for x in a), a
has(m, "--parsable", "--dependency=afterok:4101", "--partition=gpu", scripts + "/slurm/merge.sh",
    work + "/sub", "3")
print("sbatch calls ok")
' "$SBATCH_LOG" "$work" "$scripts" || fail "submit.sh's sbatch calls (see $SBATCH_LOG)"
pass "submit.sh: array, then merge afterok:<array id>"
rm -f "$SBATCH_LOG"
SBATCH_REPLY=none expect_fail "sbatch returning no job id" \
  env PATH="$work/fakebin:$PATH" bash "$scripts/slurm/submit.sh" tiny.json sub 3
[ "$(wc -l <"$SBATCH_LOG")" -eq 1 ] || fail "submit.sh submitted the merge without an array id"

# --- multi-gpu.sh: two CPU shards side by side, each on its own device index, then the merge
cat >fakebin/decodebench <<SH
#!/usr/bin/env bash
echo "\${SLURM_ARRAY_TASK_ID:-} \${CUDA_VISIBLE_DEVICES:-}" >>"$work/devices.log"
# FAIL_SHARD=I: shard I fails, the others end at once without a report (so a script that missed
# the failure would go on to the merge, and fail there with another code).
if [ -n "\${FAIL_SHARD:-}" ]; then [ "\$FAIL_SHARD" != "\${SLURM_ARRAY_TASK_ID:-}" ] || exit 3; exit 0; fi
exec "$bin" "\$@"
SH
chmod +x fakebin/decodebench
DECODEBENCH_BIN="$work/fakebin/decodebench" bash "$scripts/multi-gpu.sh" tiny.json mg 2 \
  "${sweep_args[@]}" >mg.log 2>&1 || fail "multi-gpu.sh (see $work/mg.log)"
same_points mg/merged.json full.json || fail "multi-gpu.sh's merge differs from the unsharded run"
[ "$(grep -v '^ *$' devices.log | sort | tr '\n' ,)" = "0 0,1 1," ] ||
  fail "multi-gpu.sh shards and devices: $(tr '\n' , <devices.log)"
pass "multi-gpu.sh: 2 shards on devices 0 and 1, merged = unsharded run"
FAIL_SHARD=1 DECODEBENCH_BIN="$work/fakebin/decodebench" expect_fail "multi-gpu.sh with shard 1 failing" \
  bash "$scripts/multi-gpu.sh" tiny.json mg-fail 2 "${sweep_args[@]}"
grep -q "shard 1/2 (exit 3" expect_fail.log || fail "multi-gpu.sh did not name the failed shard"
[ ! -e mg-fail/merged.json ] || fail "multi-gpu.sh merged despite a failed shard"

# --- BUNDLE=DIR: the bundle's binary with DECODEBENCH_CONFIGS=DIR/configs
mkdir -p bundle/bin
ln -s "$(cd "$scripts/.." && pwd)/configs" bundle/configs
# shellcheck disable=SC2016 # the fake's own variables
printf '#!/usr/bin/env bash\necho "$DECODEBENCH_CONFIGS" >%q\nexec %q "$@"\n' "$work/bundle.log" "$bin" \
  >bundle/bin/decodebench
chmod +x bundle/bin/decodebench
BUNDLE="$work/bundle" DECODEBENCH_BIN=/nonexistent task 0 6 "$work/out-bundle" >bundle-task.log 2>&1 ||
  fail "task with BUNDLE (see $work/bundle-task.log)"
[ "$(cat bundle.log)" = "$work/bundle/configs" ] || fail "BUNDLE: DECODEBENCH_CONFIGS was '$(cat bundle.log)'"
[ "$(state out-bundle/shard-0-of-6.json)" = "complete 1 1" ] || fail "BUNDLE task: $(state out-bundle/shard-0-of-6.json)"
pass "BUNDLE=DIR"
echo "slurm_test: all passed"
