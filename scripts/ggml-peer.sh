#!/usr/bin/env bash
# The CPU decode against ggml's flash attention at the same decode shapes, interleaved.
#
# ggml is not part of this repository: build it yourself, CPU only, with its tests, after
# applying results/cpu-amd-epyc-zen4-2vcpu/ggml-peer/test-backend-ops-shapes.patch to
# tests/test-backend-ops.cpp (the decode shapes below, a mask with no hidden positions, and a
# cold-cache perf mode that empties the caches before every timed graph compute as decodebench's
# cpu backend does: clflush of the test's buffers, then a read of 2x the L3 split over the
# threads, untimed):
#
#   git -C ggml apply .../test-backend-ops-shapes.patch
#   cmake -S ggml -B ggml/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
#     -DGGML_BUILD_TESTS=ON && ninja -C ggml/build test-backend-ops
#
# Then, per round, for each shape: ggml cold (stock 4 KiB pages), ggml cold with its tensor
# buffer on transparent huge pages (decodebench advises them on its KV cache), each decodebench
# binary given (cold, its sweep's own method), in an order reversed every round so that neither
# side always runs first; then ggml's stock perf mode (the op back to back, warm as far as the
# L3 holds). KV formats paired: ggml f16 / decodebench f16, q8_0 / int8, q4_0 / int4.
#
# Measuring etiquette of the shared machine: before each round (and again before a shape if the
# round has held it for 7 minutes) the script waits up to --max-wait seconds for the 1-minute
# load average to drop below --max-load, records it, and holds /tmp/decodebench-measuring while
# it measures (another user's builds wait while it exists).
#
# Outputs in OUTDIR: the raw outputs per (round, shape, runner) (ggml stdout, decodebench JSON
# and table), rounds.tsv (start, load, wait), and tables.md written by
# scripts/ggml_peer_table.py from those files.
#
#   scripts/ggml-peer.sh GGML_BUILD_DIR OUTDIR [--decodebench LABEL=BIN]... [--rounds N]
#                        [--shapes LIST] [--threads N] [--max-load X] [--max-wait S]
# Shapes (all d = 128): mha-b1-4k (llama-2-7b B1 x 4096), mha-b16-4k (llama-2-7b B16 x 4096),
# gqa-b1-8k (llama-3.1-8b B1 x 8192), gqa-b8-8k (llama-3.1-8b B8 x 8192).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  echo "usage: $0 GGML_BUILD_DIR OUTDIR [--decodebench LABEL=BIN]... [--rounds N] [--shapes LIST]" \
    "[--threads N] [--max-load X] [--max-wait S]" >&2
  exit 2
}
[ $# -ge 2 ] || usage
ggml_build="$1"
out_dir="$2"
shift 2
runners=()
rounds=2
shapes="mha-b1-4k,gqa-b8-8k,gqa-b1-8k"
threads=2
max_load=1.5
max_wait=300
while [ $# -gt 0 ]; do
  case "$1" in
    --decodebench) runners+=("${2:?--decodebench needs LABEL=BIN}"); shift 2 ;;
    --rounds) rounds="${2:?--rounds needs a value}"; shift 2 ;;
    --shapes) shapes="${2:?--shapes needs a value}"; shift 2 ;;
    --threads) threads="${2:?--threads needs a value}"; shift 2 ;;
    --max-load) max_load="${2:?--max-load needs a value}"; shift 2 ;;
    --max-wait) max_wait="${2:?--max-wait needs a value}"; shift 2 ;;
    *) echo "ggml-peer: unknown argument '$1'" >&2; usage ;;
  esac
done
[ ${#runners[@]} -gt 0 ] || runners=("decodebench=$root/build/src/cli/decodebench")

tbo="$ggml_build/bin/test-backend-ops"
if [ ! -x "$tbo" ]; then
  echo "ggml-peer: no ggml test-backend-ops at '$tbo': GGML_BUILD_DIR must be a ggml build with" \
    "tests (-DGGML_BUILD_TESTS=ON, target test-backend-ops) and the peer patch applied (see the" \
    "header of $0)" >&2
  exit 2
fi
if ! grep -q "ggml-peer-cold" "$tbo"; then
  echo "ggml-peer: '$tbo' was built without the peer patch (no cold perf mode in it): apply" \
    "results/cpu-amd-epyc-zen4-2vcpu/ggml-peer/test-backend-ops-shapes.patch and rebuild" >&2
  exit 2
fi
for r in "${runners[@]}"; do
  [[ "$r" =~ ^[a-z0-9_-]+=.+$ ]] ||
    { echo "ggml-peer: --decodebench wants LABEL=BIN (label: a-z 0-9 _ -), got '$r'" >&2; exit 2; }
  [ -x "${r#*=}" ] || { echo "ggml-peer: decodebench binary '${r#*=}' not found" >&2; exit 2; }
done
[[ "$rounds" =~ ^[1-9][0-9]?$ ]] || { echo "ggml-peer: --rounds must be 1-99, got '$rounds'" >&2; exit 2; }
[[ "$threads" =~ ^[1-9][0-9]?$ ]] || { echo "ggml-peer: --threads must be 1-99, got '$threads'" >&2; exit 2; }

# shape -> "model batch context ggml_regex"; ggml's vars: nh = KV heads, nr23 = [group, batch].
declare -A shape_def=(
  [mha-b1-4k]="llama-2-7b 1 4096 nh=32,nr23=\\[1,1\\],kv=4096,nb=1,"
  [mha-b16-4k]="llama-2-7b 16 4096 nh=32,nr23=\\[1,16\\],kv=4096,nb=1,"
  [gqa-b1-8k]="llama-3.1-8b 1 8192 nh=8,nr23=\\[4,1\\],kv=8192,nb=1,"
  [gqa-b8-8k]="llama-3.1-8b 8 8192 nh=8,nr23=\\[4,8\\],kv=8192,nb=1,"
)
IFS=, read -r -a shape_list <<<"$shapes"
for s in "${shape_list[@]}"; do
  [ -n "${shape_def[$s]+x}" ] ||
    { echo "ggml-peer: unknown shape '$s' (valid: ${!shape_def[*]})" >&2; exit 2; }
done

mkdir -p "$out_dir"
lock=/tmp/decodebench-measuring
lock_since=0
release() { rm -f "$lock"; lock_since=0; }
trap release EXIT INT TERM

# Waits for the load to drop (or max_wait), then takes the lock; one rounds.tsv line each time.
acquire() {
  local round="$1" waited=0 load
  release
  while :; do
    load="$(cut -d' ' -f1 /proc/loadavg)"
    awk -v l="$load" -v m="$max_load" 'BEGIN { exit !(l < m) }' && break
    [ "$waited" -ge "$max_wait" ] && break
    sleep 10
    waited=$((waited + 10))
  done
  touch "$lock"
  lock_since=$SECONDS
  printf '%s\t%s\t%s\t%s\n' "$round" "$(date -u +%FT%TZ)" "$load" "$waited" >>"$out_dir/rounds.tsv"
  echo "ggml-peer: round $round: load $load after ${waited}s of waiting" >&2
}

ggml_run() {  # name regex cold huge
  local name="$1" regex="$2" cold="$3" huge="$4"
  GGML_PERF_COLD="$cold" GGML_PERF_HUGE="$huge" GGML_PERF_THREADS="$threads" \
    "$tbo" perf -b CPU -o FLASH_ATTN_EXT -p "hsk=128,hsv=128,$regex" >"$name.txt" 2>&1
}

db_run() {  # name bin model batch context
  local name="$1" bin="$2"
  OMP_NUM_THREADS="$threads" "$bin" sweep --backend cpu --kernel cpu --model "$3" --batch "$4" \
    --context "$5" --kv-dtype f16,int8,int4 --block-size 16 --min-samples 15 --min-time 1.5 \
    --max-noise 0.01 --timeout 12 --validate-rows 16 --format json --out "$name.json" \
    >/dev/null 2>"$name.log"
  "$bin" report "$name.json" >"$name.txt"
}

printf 'round\tstart_utc\tload1\twaited_s\n' >"$out_dir/rounds.tsv"
for ((round = 1; round <= rounds; ++round)); do
  acquire "$round"
  for s in "${shape_list[@]}"; do
    if [ $((SECONDS - lock_since)) -ge 420 ]; then acquire "$round"; fi
    read -r model batch context regex <<<"${shape_def[$s]}"
    base="$out_dir/$(printf 'r%02d' "$round")-$s"
    jobs=("ggml-cold" "ggml-cold-huge")
    for r in "${runners[@]}"; do jobs+=("db:$r"); done
    if ((round % 2 == 0)); then  # reversed order on even rounds
      rev=()
      for ((i = ${#jobs[@]} - 1; i >= 0; --i)); do rev+=("${jobs[i]}"); done
      jobs=("${rev[@]}")
    fi
    for j in "${jobs[@]}"; do
      case "$j" in
        ggml-cold) ggml_run "$base-ggml-cold" "$regex" 1 0 ;;
        ggml-cold-huge) ggml_run "$base-ggml-cold-huge" "$regex" 1 1 ;;
        db:*) r="${j#db:}"; db_run "$base-${r%%=*}" "${r#*=}" "$model" "$batch" "$context" ;;
      esac
      echo "ggml-peer: round $round $s $j done" >&2
    done
    ggml_run "$base-ggml-warm" "$regex" 0 0
  done
  release
done

{
  echo "# ggml-peer: $(date -u +'%F %H:%M') UTC, scripts at $(git -C "$root" rev-parse --short HEAD)," \
    "ggml $(git -C "$ggml_build/.." rev-parse --short HEAD 2>/dev/null || echo unknown), $threads threads"
  echo
  python3 "$root/scripts/ggml_peer_table.py" "$out_dir"
} >"$out_dir/tables.md"
cat "$out_dir/tables.md"
