#!/usr/bin/env bash
# Submit a sharded sweep to Slurm: an array of N tasks (scripts/slurm/sweep.sbatch, one shard
# each), then a merge job that starts only when every task succeeded (afterok) and writes
# OUTDIR/merged.json (scripts/slurm/merge.sh). Prints both job ids.
#
#   scripts/slurm/submit.sh CONFIG OUTDIR N [SBATCH ARGS...] [-- SWEEP ARGS...]
#
#   scripts/slurm/submit.sh configs/sweeps/gpu-check.json results/run1 8 --partition=gpu -- --backend cuda
#
# SBATCH ARGS go to both sbatch calls (partition, account, ...); SWEEP ARGS after `--` go to
# `decodebench sweep` in each task. BUNDLE / DECODEBENCH_BIN are exported to the jobs (sbatch
# passes the environment). A failed task keeps the merge pending (DependencyNeverSatisfied):
# resume it with `sbatch --array=I ... sweep.sbatch` (it picks up its report), then run merge.sh.
set -euo pipefail

usage() {
  echo "usage: $0 CONFIG OUTDIR N [SBATCH ARGS...] [-- SWEEP ARGS...]" >&2
  exit 2
}
[ $# -ge 3 ] || usage
config="$1"
outdir="$2"
shards="$3"
shift 3
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || { echo "submit.sh: N must be a shard count >= 1, got '$shards'" >&2; exit 2; }
[ -f "$config" ] || { echo "submit.sh: no config file '$config'" >&2; exit 2; }
sbatch_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do sbatch_args+=("$1"); shift; done
[ $# -eq 0 ] || shift
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
mkdir -p "$outdir"
# Absolute paths, then submit from the repository root: the jobs run there (SLURM_SUBMIT_DIR),
# wherever this was called from.
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
config="$(abs "$config")"
outdir="$(cd "$outdir" && pwd)"
if [ -n "${BUNDLE:-}" ]; then BUNDLE="$(cd "$BUNDLE" && pwd)"; export BUNDLE; fi
if [ -n "${DECODEBENCH_BIN:-}" ]; then DECODEBENCH_BIN="$(abs "$DECODEBENCH_BIN")"; export DECODEBENCH_BIN; fi
cd "$root"

array_id="$(sbatch --parsable --array="0-$((shards - 1))" \
  --output="$outdir/slurm-%A_%a.log" "${sbatch_args[@]}" \
  "$here/sweep.sbatch" "$config" "$outdir" "$@")"
array_id="${array_id%%;*}" # --parsable prints "jobid[;cluster]"
[[ "$array_id" =~ ^[0-9]+$ ]] || { echo "submit.sh: sbatch returned no job id ('$array_id')" >&2; exit 1; }
merge_id="$(sbatch --parsable --dependency="afterok:$array_id" \
  --output="$outdir/slurm-merge-%j.log" "${sbatch_args[@]}" \
  "$here/merge.sh" "$outdir" "$shards")"
merge_id="${merge_id%%;*}"
echo "array job $array_id ($shards tasks), merge job $merge_id -> $outdir/merged.json"
