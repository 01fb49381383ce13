#!/usr/bin/env bash
# Merge the N shard reports of scripts/slurm/sweep.sbatch (or scripts/multi-gpu.sh) into
# OUTDIR/merged.json; submit.sh runs it as the job after the array. Every shard must be there
# and complete: `decodebench merge` refuses a set that is not whole (exit 2, naming what is
# missing); resume the shard (re-run its task) first.
#
#   scripts/slurm/merge.sh OUTDIR N
#
# The binary: BUNDLE=DIR (DIR/bin/decodebench) or DECODEBENCH_BIN (default
# build/src/cli/decodebench), as in sweep.sbatch.
#
#SBATCH --job-name=decodebench-merge
#SBATCH --time=00:10:00
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 OUTDIR N" >&2; exit 2; }
outdir="$1"
shards="$2"
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || { echo "merge.sh: N must be a shard count >= 1, got '$shards'" >&2; exit 2; }
root="${SLURM_SUBMIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
if [ -n "${BUNDLE:-}" ]; then
  bin="$BUNDLE/bin/decodebench"
  export DECODEBENCH_CONFIGS="$BUNDLE/configs"
else
  bin="${DECODEBENCH_BIN:-$root/build/src/cli/decodebench}"
fi
[ -x "$bin" ] || { echo "merge.sh: no decodebench at '$bin' (set BUNDLE=DIR or DECODEBENCH_BIN)" >&2; exit 2; }

inputs=()
missing=()
for ((i = 0; i < shards; i++)); do
  f="$outdir/shard-$i-of-$shards.json"
  if [ -e "$f" ]; then inputs+=("$f"); else missing+=("$f"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "merge.sh: missing shard reports: ${missing[*]} (re-run those array tasks)" >&2
  exit 2
fi
exec "$bin" merge --out "$outdir/merged.json" "${inputs[@]}"
