#!/usr/bin/env bash
# Scale out: one shard of a sweep per GPU as a Slurm array job (docs/design.md "Scale-out"), then
# merge the shard reports. No home-made scheduler: Slurm schedules, `--shard i/n` picks a
# deterministic subset of the points, `decodebench merge` combines the reports.
#
#   N=8 sbatch --array=0-7 scripts/slurm-sweep.sh configs/sweeps/gpu-check.json results/run1
#   # when all tasks are done:
#   build/src/cli/decodebench merge results/run1/merged.json results/run1/shard-*.json
#
#SBATCH --job-name=decodebench
#SBATCH --gres=gpu:1
#SBATCH --time=01:00:00
set -euo pipefail
config="${1:?usage: sbatch --array=0-(N-1) $0 CONFIG OUTDIR}"
outdir="${2:?usage: sbatch --array=0-(N-1) $0 CONFIG OUTDIR}"
shards="${N:-${SLURM_ARRAY_TASK_COUNT:?set N or run as an array job}}"
index="${SLURM_ARRAY_TASK_ID:?run as an array job (sbatch --array=0-$((shards - 1)))}"
root="${SLURM_SUBMIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$root"
mkdir -p "$outdir"
build/src/cli/decodebench sweep --backend cuda --config "$config" --shard "$index/$shards" \
  --out "$outdir/shard-$index.json" --format table
