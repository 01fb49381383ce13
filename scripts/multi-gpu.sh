#!/usr/bin/env bash
# A sharded sweep over the GPUs of one machine, without Slurm (docs/design.md "Scale-out"): shard
# i of N on GPU i (CUDA_VISIBLE_DEVICES=i), all at once, then the merge. The same shard files and
# merge as scripts/slurm/sweep.sbatch, so a shard that failed or was stopped is resumed by
# running this again (complete shards are skipped).
#
#   scripts/multi-gpu.sh CONFIG OUTDIR [N] [SWEEP ARGS...]
#
#   N           shards, one per GPU (default: the GPUs nvidia-smi -L lists)
#   SWEEP ARGS  to `decodebench sweep` in every shard, e.g. --backend cuda; --backend cpu runs N
#               CPU shards side by side (for testing: they share the cores, so not for timing)
# The binary: BUNDLE=DIR or DECODEBENCH_BIN, as in sweep.sbatch. Writes OUTDIR/shard-I-of-N.json,
# OUTDIR/shard-I-of-N.log (the shard's output) and OUTDIR/merged.json. Exit 0 when every shard
# and the merge succeeded; else the first failure's code, naming the failed shards.
set -euo pipefail

usage() {
  echo "usage: $0 CONFIG OUTDIR [N] [SWEEP ARGS...]" >&2
  exit 2
}
[ $# -ge 2 ] || usage
config="$1"
outdir="$2"
shift 2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
  shards="$1"
  shift
  [ "$shards" -ge 1 ] || { echo "multi-gpu: N must be >= 1, got $shards" >&2; exit 2; }
else
  command -v nvidia-smi >/dev/null || { echo "multi-gpu: no nvidia-smi to count the GPUs: give N" >&2; exit 2; }
  shards="$(nvidia-smi -L | grep -c '^GPU ')" || true
  [ "$shards" -ge 1 ] || { echo "multi-gpu: nvidia-smi -L lists no GPU: give N" >&2; exit 2; }
fi
mkdir -p "$outdir"

# One background sweep.sbatch per shard, as Slurm's array would run it; CUDA_DEVICE_ORDER makes
# index i nvidia-smi's GPU i.
pids=()
for ((i = 0; i < shards; i++)); do
  SLURM_ARRAY_TASK_ID="$i" SLURM_ARRAY_TASK_COUNT="$shards" CUDA_VISIBLE_DEVICES="$i" \
    CUDA_DEVICE_ORDER=PCI_BUS_ID bash "$here/slurm/sweep.sbatch" "$config" "$outdir" "$@" \
    >"$outdir/shard-$i-of-$shards.log" 2>&1 &
  pids+=("$!")
done
# Ctrl-C or SIGTERM: pass it to every shard, so each writes its report as interrupted.
trap 'kill -TERM "${pids[@]}" 2>/dev/null || true' INT TERM

failed=()
first_rc=0
for ((i = 0; i < shards; i++)); do
  rc=0
  wait "${pids[$i]}" || rc=$?
  if [ "$rc" -ne 0 ]; then
    failed+=("shard $i/$shards (exit $rc, see $outdir/shard-$i-of-$shards.log)")
    [ "$first_rc" -ne 0 ] || first_rc="$rc"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  printf 'multi-gpu: failed: %s\n' "${failed[@]}" >&2
  echo "multi-gpu: no merge; run this again to resume the failed shards" >&2
  exit "$first_rc"
fi
bash "$here/slurm/merge.sh" "$outdir" "$shards"
