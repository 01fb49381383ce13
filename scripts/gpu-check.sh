#!/usr/bin/env bash
# The GPU check: run decodebench from a prebuilt bundle on a machine with an NVIDIA GPU and none of
# our dependencies. No build, no package manager, no network: build the bundle where the tools are
# (scripts/gpu-bundle.sh gpu-bundle), copy it over, then
#
#   scripts/gpu-check.sh --bundle DIR OUTDIR [--budget SECONDS] [--device N]
#
#   --bundle  the bundle: bin/ (decodebench, the gpu test binaries), lib/, configs/, manifest.json
#   --budget  wall-clock limit for everything (default 360 = 6 min). Steps run most valuable
#             first, each under what is left of it and its own cap; the last sweep is interrupted
#             (SIGINT) when time runs out and keeps every point it finished.
#   --device  CUDA device index (default 0; CUDA_DEVICE_ORDER=PCI_BUS_ID, so nvidia-smi's index)
#
# The steps in order, and the files each leaves in OUTDIR (flat; the caller packs OUTDIR):
#   bundle          manifest.json present, every file's sha256 as listed, built for this GPU
#                   (scripts/cuda-arch.sh: 9.0 -> 90a); exit 2 before any GPU step when not
#                                                     bundle.log, bundle-manifest.json (a copy)
#   nvidia-smi      read-only snapshot: clocks, power, ECC, other processes      nvidia-smi.log
#   devices         decodebench devices                                             devices.log
#   check           decodebench check --backend cuda: every kernel against the CPU reference on
#                   small odd shapes, the ceiling kernels' self-checks    check.log, check.json
#   ceilings        decodebench ceilings (read, copy, triad, FMA; the links: pinned host<->device
#                   copies by size, a kernel reading mapped host memory, peer copies)
#                                                                   ceilings.log, ceilings.json
#   targets         configs/sweeps/gpu-targets.json: the GPU target points, --kernel auto and
#                   every rung                                          targets.log, targets.json
#   timing-graph    one warm point of configs/sweeps/gpu-targets.json (llama-3.1-8b, batch 1 x
#   timing-eager    8192, f16, --kernel auto) timed with its steps replayed as a CUDA graph, then
#                   launched one by one (--warm --timing graph|eager); the summary prints the gap
#                   and calls one over 10 % large          timing-graph.log/.json, timing-eager.*
#   int-kv          configs/sweeps/gpu-targets.json cut to batch 64 x 8192, f16 and the integer
#                   KV formats (the bundle's kv_formats.json) on tc and cascade int-kv.log, int-kv.json
#   mla             MLA on the tensor-core mla rung: deepseek-v3 (128 heads) and deepseek-v2-lite
#                   (16) at batch 8 and 64 x 8192, bf16 and fp8_e4m3 KV, bf16 q   mla.log, mla.json
#   prefix          configs/sweeps/prefix.json cut to batch 16/64 x 8k x h 0/0.9, one group:
#                   split_kv and tc against cascade                       prefix.log, prefix.json
#   layer           configs/sweeps/knee.json cut to batch 1/4/16/64/256 x 8k x h 0/0.9: the
#                   decode step of one llama-3.1-8b layer (QKV, attention, output projection,
#                   MLP; bf16 weights), tc against cascade. Its GEMMs need the GPU machine's own
#                   cuBLASLt (not in the bundle): without it the points come back "skipped" with
#                   the reason, and the step still passes                 layer.log, layer.json
#   trace           configs/sweeps/trace.json cut to KV pools 60/120 GB x lru: the committed
#                   Mooncake slice served on this GPU's modeled schedule, KV bf16/fp8_e4m3, four
#                   sampled decode steps each validated and timed with tc and cascade (the
#                   operator's table, `decodebench replay`)                 trace.log, trace.json
#   tiers           configs/sweeps/tiers.json cut to the 16 GB pool x host tier 0/4M tokens,
#                   PCIe Gen5, reload always, bf16: hits by tier, link bytes and busy fraction,
#                   added time to first token, the sampled steps timed      tiers.log, tiers.json
#   ncu-b64-8k      Nsight Compute on one point each (llama-3.1-8b, f16, --kernel auto, batch 64
#   ncu-b1-32k      x 8192 / batch 1 x 32768): DRAM bytes read, L2 hit rate, issue-slot use of a
#                   few decode launches, clocks left alone
#                        ncu-POINT.log (the sweep's output), ncu-POINT.csv, ncu-POINT.json (report)
#   ncu-bytes       scripts/ncu-bytes.py: ncu's DRAM bytes per step against the byte model's
#                   bytes.min                                    ncu-bytes.md, ncu-bytes.json
#   NAME            each of manifest.json's gpu_tests (GoogleTest), run directly
#                                                                          NAME.log, NAME.xml
#   static-model    decodebench kernels --static: the SASS model of the bundle's own kernels
#                   (issue bounds, CTAs per SM) to compare with the measurements
#                                                        static-model.log, static-model.json
#   sweep           configs/sweeps/gpu-check.json with what is left of the budget (stopped by the
#                   budget it is "partial", not a failure)             sweep.log, gpu-check.json
#   nvidia-smi-end  the snapshot again, after the load                       nvidia-smi-end.log
# plus summary.txt (every progress line, then the summary) and steps.tsv (name, status, seconds,
# note per step). The summary (scripts/gpu-check-summary.py) is printed last: each step, its
# seconds and headline figures, the target points against docs/design.md "GPU targets", the gap
# between graph and eager timing, the layer step: its batch-1 time against the copy-ceiling roof
# of its bytes, and its knee; and every row a self-check flagged (docs/design.md "Rows that
# check themselves": above the device's peak, a cold flush under 2x the L2), with its reason.
#
# ncu: $NCU if set, else the first of PATH, /opt/nvidia/nsight-compute/*/ncu,
# /usr/local/cuda/bin/ncu. Without it (or without permission to read the counters) the ncu steps
# fail with the reason and the rest goes on.
#
# It never changes clocks, power limits, persistence or any other GPU setting: nvidia-smi is only
# queried and ncu runs with --clock-control none. Exit 0 when every step passed, 1 when one failed
# (every later step still runs, so partial results are kept), 2 for bad arguments, a damaged
# bundle, a bundle built for another GPU, or no GPU.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  echo "usage: $0 --bundle DIR OUTDIR [--budget SECONDS] [--device N]" >&2
  echo "  (make DIR with scripts/gpu-bundle.sh DIR on a machine with the build tools)" >&2
  exit 2
}
bundle=""
outdir=""
budget=360
device=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle="${2:?--bundle needs a directory}"; shift 2 ;;
    --budget) budget="${2:?--budget needs a value}"; shift 2 ;;
    --device) device="${2:?--device needs a value}"; shift 2 ;;
    -*) echo "gpu-check: unknown option '$1'" >&2; usage ;;
    *)
      [ -z "$outdir" ] || { echo "gpu-check: one OUTDIR only (got '$outdir' and '$1')" >&2; usage; }
      outdir="$1"; shift ;;
  esac
done
bad_arg() { echo "gpu-check: $*" >&2; exit 2; }
[ -n "$bundle" ] || bad_arg "--bundle DIR is required (scripts/gpu-bundle.sh DIR builds one)"
[ -n "$outdir" ] || usage
[[ "$budget" =~ ^[0-9]+$ ]] || bad_arg "--budget must be whole seconds, got '$budget'"
[[ "$device" =~ ^[0-9]+$ ]] || bad_arg "--device must be an index, got '$device'"
[ -d "$bundle" ] || bad_arg "bundle '$bundle' is not a directory"
bundle="$(cd "$bundle" && pwd)"
command -v python3 >/dev/null 2>&1 || bad_arg "python3 not found (it reads manifest.json)"

mkdir -p "$outdir" || exit 2
outdir="$(cd "$outdir" && pwd)"
summary="$outdir/summary.txt"
start=$SECONDS
: >"$summary"
steps_tsv="$outdir/steps.tsv"
: >"$steps_tsv"
step_names=() step_status=() step_secs=() step_notes=()
# Seconds kept back from every step: SIGKILL comes this long after SIGINT, and the closing
# snapshot and summary need a few.
kill_after=10
reserve=$((kill_after + 5))

say() { printf '[gpu-check %3ds] %s\n' $((SECONDS - start)) "$*" | tee -a "$summary" >&2; }
left() { echo $((budget - (SECONDS - start))); }
record() {  # record NAME STATUS SECONDS NOTE
  step_names+=("$1") step_status+=("$2") step_secs+=("$3") step_notes+=("$4")
}
# Turns the last recorded step into a failure (a check after its command exited 0).
fail_last() {
  local i=$((${#step_names[@]} - 1))
  step_status[i]=FAIL
  step_notes[i]="$1"
  say "FAIL ${step_names[i]}: $1"
}
fail_unrun() { record "$1" FAIL 0 "$2"; say "FAIL $1: $2"; }

# step [--partial-ok] NAME LOG CAP CMD...: runs CMD for at most CAP seconds and what is left of
# the budget, output to LOG. SIGINT first (a sweep stops cleanly and keeps its finished points),
# SIGKILL kill_after seconds later. --partial-ok: stopped by the budget is "partial", not a fail.
step() {
  local partial_ok=0
  if [ "$1" = --partial-ok ]; then partial_ok=1; shift; fi
  local name="$1" log="$2" cap="$3"
  shift 3
  local limit=$(($(left) - reserve))
  [ "$limit" -le "$cap" ] || limit="$cap"
  if [ "$limit" -lt 5 ]; then
    fail_unrun "$name" "not started: the ${budget}s budget is spent"
    return 1
  fi
  say "run  $name (up to ${limit}s): $*"
  local t0=$SECONDS rc=0
  timeout --signal=INT --kill-after="$kill_after" "$limit" "$@" >"$log" 2>&1 || rc=$?
  local took=$((SECONDS - t0)) base
  base="$(basename "$log")"
  if [ "$rc" -eq 0 ]; then
    record "$name" ok "$took" ""
    say "ok   $name (${took}s)"
    return 0
  fi
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    if [ "$partial_ok" -eq 1 ]; then
      record "$name" partial "$took" "stopped by the budget after ${took}s"
      say "partial $name: stopped by the budget after ${took}s; finished points kept"
      return 0
    fi
    record "$name" FAIL "$took" "out of time after ${took}s; see $base"
    say "FAIL $name: out of time after ${took}s (limit ${limit}s); see $log"
  else
    record "$name" FAIL "$took" "exit $rc; see $base"
    say "FAIL $name: exit $rc after ${took}s; last lines of $log:"
    tail -n 15 "$log" | sed 's/^/      /' | tee -a "$summary" >&2
  fi
  return 1
}

# manifest KEY: the manifest's value, a list one item a line; "files" as sha256sum check lines.
manifest() {
  python3 - "$bundle/manifest.json" "$1" <<'EOF'
import json, sys
path, key = sys.argv[1], sys.argv[2]
m = json.load(open(path))
v = m.get(key)
if key == "files":
    for f in v or []:
        p = f["path"]
        if p.startswith("/") or ".." in p.split("/"):
            sys.exit(f"manifest.json: file path '{p}' leaves the bundle")
        print(f"{f['sha256']}  {p}")
elif isinstance(v, list):
    print("\n".join(str(x) for x in v))
elif isinstance(v, str):
    print("\n".join(x for x in v.replace(",", ";").split(";") if x))
elif v is not None:
    print(json.dumps(v))
EOF
}

say "decodebench GPU check: bundle $bundle, outdir $outdir, budget ${budget}s, device $device"

# --- the bundle (no GPU touched yet) ---------------------------------------------------------
blog="$outdir/bundle.log"
bundle_bad() {
  say "FAIL bundle: $*"
  say "rebuild the bundle with scripts/gpu-bundle.sh and copy it whole; nothing was run"
  exit 2
}
[ -f "$bundle/manifest.json" ] || bundle_bad "$bundle/manifest.json is missing (not a bundle?)"
t0=$SECONDS
if ! sums="$(manifest files 2>>"$blog")"; then
  bundle_bad "manifest.json cannot be read: $(tail -n 1 "$blog")"
fi
[ -n "$sums" ] || bundle_bad "manifest.json lists no files"
nfiles="$(printf '%s\n' "$sums" | wc -l)"
if ! (cd "$bundle" && printf '%s\n' "$sums" | sha256sum --check --strict -) >>"$blog" 2>&1; then
  bad="$(grep -v ': OK$' "$blog" | grep -E 'FAILED|No such file' | head -n 5 | tr '\n' ' ')"
  bundle_bad "files differ from manifest.json (sha256): ${bad:-see $blog}"
fi
cp "$bundle/manifest.json" "$outdir/bundle-manifest.json"
bin="$bundle/bin/decodebench"
[ -x "$bin" ] || bundle_bad "$bin is missing or not executable"
# What runs must be among what was verified.
grep -q '  bin/decodebench$' <<<"$sums" || bundle_bad "manifest.json does not list bin/decodebench"

export CUDA_DEVICE_ORDER=PCI_BUS_ID
if ! command -v nvidia-smi >/dev/null 2>&1; then
  say "FAIL: nvidia-smi not found; this script needs a machine with an NVIDIA GPU and driver"
  exit 2
fi
query() { nvidia-smi -i "$device" --query-gpu="$1" --format=csv,noheader 2>/dev/null | head -n 1; }
cap="$(query compute_cap | tr -d ' ')"
gpu_name="$(query name)"
if [[ ! "$cap" =~ ^[0-9]+\.[0-9]+$ ]]; then
  say "FAIL: cannot read the compute capability of device $device (got '$cap')"
  exit 2
fi
# The architecture scripts/cuda-arch.sh builds for this GPU (9.0 -> 90a: the arch-specific target
# of exactly this GPU, not a portable PTX fallback), from its own table: no nvcc here.
if ! arch="$("$root/scripts/cuda-arch.sh" --no-nvcc "$cap" 2>&1)" ||
  [[ ! "${arch%%$'\n'*}" =~ ^[0-9]+a?$ ]]; then
  bundle_bad "device $device ($gpu_name) has compute capability $cap: ${arch//$'\n'/; }"
fi
arch="${arch%%$'\n'*}"
archs=()
while IFS= read -r a; do
  a="${a#sm_}" a="${a#compute_}" a="${a%-real}" a="${a%-virtual}"
  [ -n "$a" ] && archs+=("$a")
done < <(manifest cuda_architectures 2>>"$blog")
found=0
for a in "${archs[@]}"; do [ "$a" = "$arch" ] && found=1; done
if [ "$found" -eq 0 ]; then
  bundle_bad "built for CUDA architectures '${archs[*]:-none listed}', but device $device" \
    "($gpu_name) has compute capability $cap, which needs $arch" \
    "(scripts/gpu-bundle.sh with CMAKE_CUDA_ARCHITECTURES=$arch)"
fi
record bundle ok $((SECONDS - t0)) "$nfiles files match manifest.json, built for $arch"
say "ok   bundle: $nfiles files match manifest.json; device $device: $gpu_name, compute" \
  "capability $cap, bundle built for ${archs[*]}"

configs="$bundle/configs"
export DECODEBENCH_CONFIGS="$configs"
have_ceilings() { [ -s "$outdir/ceilings.json" ]; }
ceilings_arg=()

# --- the figures, most valuable first --------------------------------------------------------
step nvidia-smi "$outdir/nvidia-smi.log" 30 nvidia-smi -q -i "$device"
step devices "$outdir/devices.log" 30 "$bin" devices --device "$device"
step check "$outdir/check.log" 120 "$bin" check --backend cuda --device "$device" \
  --out "$outdir/check.json"
step ceilings "$outdir/ceilings.log" 90 "$bin" ceilings --backend cuda --device "$device" \
  --format json --out "$outdir/ceilings.json"
# Every later sweep reuses these ceilings instead of measuring them again.
if have_ceilings; then ceilings_arg=(--ceilings "$outdir/ceilings.json"); fi

sweep_step() {  # sweep_step [--partial-ok] NAME CONFIG OUT CAP [AXIS FLAGS...]
  local opt=()
  if [ "$1" = --partial-ok ]; then opt=(--partial-ok); shift; fi
  local name="$1" config="$configs/sweeps/$2" out="$3" cap="$4"
  shift 4
  if [ ! -f "$config" ]; then
    fail_unrun "$name" "$config is not in the bundle (rebuild it with scripts/gpu-bundle.sh)"
    return
  fi
  step "${opt[@]}" "$name" "$outdir/$name.log" "$cap" "$bin" sweep --backend cuda \
    --device "$device" --config "$config" "$@" "${ceilings_arg[@]}" --out "$outdir/$out"
}
sweep_step targets gpu-targets.json targets.json 150
# Graph against eager: one short warm point (batch 1 x 8k, a step of some us, where the host's
# launch path can show) timed both ways; the summary prints the gap. Few samples: two figures
# to set side by side, not a target.
for how in graph eager; do
  sweep_step "timing-$how" gpu-targets.json "timing-$how.json" 30 --model llama-3.1-8b \
    --batch 1 --context 8192 --kv-dtype f16 --kernel auto --warm --timing "$how" \
    --min-samples 10 --min-time 0.2 --timeout 10 --quiet
done
# The integer KV formats against f16 at the batch-64 target point, on the two rungs that read
# them (the CUDA-core rungs refuse them).
int_kv_formats="$(python3 "$root/scripts/kv_formats.py" --near "$bin" names --ladder int_kv)" ||
  int_kv_formats=""
sweep_step int-kv gpu-targets.json int-kv.json 60 --batch 64 --context 8192 \
  --kv-dtype "f16${int_kv_formats:+,$int_kv_formats}" --kernel tc,cascade
# MLA on its rung: DeepSeek-V3's 128 heads (at the ridge of HBM and the tensor cores) and
# DeepSeek-V2-Lite's 16 (memory-bound), the target point deepseek-v3 b=64 x 8k bf16 among them.
sweep_step mla gpu-targets.json mla.json 60 --model deepseek-v3,deepseek-v2-lite --batch 8,64 \
  --context 8192 --kv-dtype bf16,fp8_e4m3 --q-dtype bf16 --kernel mla
# Prefix reuse, a cut of configs/sweeps/prefix.json: batch 16 and 64 at 8k, no and 90 % sharing,
# the prefix-unaware rungs against cascade; what the budget leaves of it is kept.
sweep_step --partial-ok prefix prefix.json prefix.json 90 --batch 16,64 --context 8192 \
  --hit-rate 0,0.9 --prefix-groups 1
# The whole decode step, a cut of configs/sweeps/knee.json: one llama-3.1-8b layer at 8k from
# batch 1 to 256 (the knee of tokens/s), no and 90 % sharing; what the budget leaves of it is kept.
# A sweep whose points are skipped (no cuBLASLt on this machine) exits 0, so the step passes and
# the summary gives the reason.
sweep_step --partial-ok layer knee.json layer.json 90 --batch 1,4,16,64,256 --context 8192 \
  --hit-rate 0,0.9
# Real traffic, a cut of configs/sweeps/trace.json (its trace, rate and kernels): two KV pools,
# lru, both KV dtypes; the replay measures its own ceilings. What the budget leaves is kept.
if [ -f "$configs/sweeps/trace.json" ]; then
  step --partial-ok trace "$outdir/trace.log" 120 "$bin" replay --backend cuda --device "$device" \
    --config "$configs/sweeps/trace.json" --kv-pool 60e9,120e9 --policy lru --sample-steps 4 \
    --out "$outdir/trace.json"
else
  fail_unrun trace \
    "$configs/sweeps/trace.json is not in the bundle (rebuild it with scripts/gpu-bundle.sh)"
fi
# The host tier, a cut of configs/sweeps/tiers.json: the 16 GB pool with and without a 4M-token
# host tier behind PCIe Gen5, reload always, bf16; the link rows of ceilings.json above are the
# measured rates to set beside its datasheet link. What the budget leaves is kept.
if [ -f "$configs/sweeps/tiers.json" ]; then
  step --partial-ok tiers "$outdir/tiers.log" 90 "$bin" replay --backend cuda --device "$device" \
    --config "$configs/sweeps/tiers.json" --kv-pool 16e9 --host-capacity 0,4e6 \
    --link pcie-gen5-x16 --reload-policy always --kv-dtype bf16 --out "$outdir/tiers.json"
else
  fail_unrun tiers \
    "$configs/sweeps/tiers.json is not in the bundle (rebuild it with scripts/gpu-bundle.sh)"
fi

# --- Nsight Compute: the byte model against the hardware's DRAM counters ---------------------
find_ncu() {
  if [ -n "${NCU+set}" ]; then
    [ -x "$NCU" ] && echo "$NCU"
    return
  fi
  local c
  for c in "$(command -v ncu 2>/dev/null)" /opt/nvidia/nsight-compute/*/ncu \
    /usr/local/cuda/bin/ncu; do
    if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return; fi
  done
}
ncu="$(find_ncu)"
ncu_points=(b64-8k:64:8192 b1-32k:1:32768)
ncu_pairs=()
if [ -z "$ncu" ]; then
  why="ncu not found (looked at \$NCU, PATH, /opt/nvidia/nsight-compute/*/ncu,"
  why+=" /usr/local/cuda/bin/ncu)"
  [ -n "${NCU+set}" ] && why="NCU=$NCU is not an executable"
  for p in "${ncu_points[@]}"; do fail_unrun "ncu-${p%%:*}" "$why"; done
  fail_unrun ncu-bytes "not run: no ncu data"
elif [ ! -f "$configs/sweeps/gpu-targets.json" ]; then
  for p in "${ncu_points[@]}"; do
    fail_unrun "ncu-${p%%:*}" "$configs/sweeps/gpu-targets.json is not in the bundle"
  done
  fail_unrun ncu-bytes "not run: no ncu data"
else
  say "ncu: $ncu ($("$ncu" --version 2>/dev/null | tail -n 1))"
  no_counters=""
  for p in "${ncu_points[@]}"; do
    IFS=: read -r label batch context <<<"$p"
    name="ncu-$label"
    if [ -n "$no_counters" ]; then fail_unrun "$name" "not started: $no_counters"; continue; fi
    csv="$outdir/$name.csv" report="$outdir/$name.json"
    # One point of the target sweep; the decode kernels only (namespace ...::paged_decode), a
    # few launches after the first two (validation), caches flushed before each (cold bytes,
    # as bytes.min counts them), clocks as they are. Enough samples for the launches asked for
    # even at two kernels a step; --max-noise 1 stops sampling there.
    if step "$name" "$outdir/$name.log" 90 "$ncu" --clock-control none --cache-control all \
      --target-processes application-only --kernel-name-base demangled \
      --kernel-name regex:paged_decode:: --launch-skip 2 --launch-count 4 \
      --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__inst_issued.avg.pct_of_peak_sustained_active \
      --csv --page raw --print-units base --print-kernel-base demangled --log-file "$csv" \
      "$bin" sweep --backend cuda --device "$device" --config "$configs/sweeps/gpu-targets.json" \
      --model llama-3.1-8b --batch "$batch" --context "$context" --kv-dtype f16 --kernel auto \
      "${ceilings_arg[@]}" --min-samples 8 --min-time 0 --max-noise 1 --timeout 30 \
      --out "$report" --quiet; then
      err="$(grep -h '==ERROR==' "$csv" "$outdir/$name.log" 2>/dev/null | head -n 1)"
      if [ -n "$err" ]; then fail_last "ncu reported: $err"; else ncu_pairs+=("$csv" "$report"); fi
    fi
    if grep -qs 'ERR_NVGPUCTRPERM' "$csv" "$outdir/$name.log"; then
      no_counters="ncu may not read the GPU counters here (ERR_NVGPUCTRPERM: needs root or"
      no_counters+=" NVreg_RestrictProfilingToAdminUsers=0)"
      [ "${step_status[-1]}" = FAIL ] && step_notes[-1]="$no_counters"
    fi
  done
  if [ "${#ncu_pairs[@]}" -gt 0 ]; then
    step ncu-bytes "$outdir/ncu-bytes.log" 30 python3 "$root/scripts/ncu-bytes.py" \
      --out "$outdir/ncu-bytes" "${ncu_pairs[@]}"
  else
    fail_unrun ncu-bytes "not run: no ncu point profiled"
  fi
fi

# --- the GPU tests, run directly (there is no ctest tree in a bundle) ------------------------
mapfile -t gpu_tests < <(manifest gpu_tests 2>>"$blog")
if [ "${#gpu_tests[@]}" -eq 0 ]; then
  fail_unrun gpu-tests "manifest.json lists no gpu_tests"
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for t in "${gpu_tests[@]}"; do
  case "$t" in */*) exe="$bundle/$t" ;; *) exe="$bundle/bin/$t" ;; esac
  name="$(basename "$t")"
  if [ ! -x "$exe" ]; then fail_unrun "$name" "$exe is missing or not executable"; continue; fi
  # Its own scratch directory: a test may write files where it runs.
  mkdir -p "$scratch/$name"
  step "$name" "$outdir/$name.log" 120 env -C "$scratch/$name" CUDA_VISIBLE_DEVICES="$device" \
    "$exe" --gtest_output="xml:$outdir/$name.xml"
done

# --- the static model of this very binary, to set beside what was measured -------------------
# GPU-free (cuobjdump reads the kernels linked into decodebench), so it goes after the figures
# that need the GPU; cuobjdump and nvdisasm come with the toolkit on the GPU machine.
step static-model "$outdir/static-model.log" 60 "$bin" kernels --static --format json \
  --out "$outdir/static-model.json"

# --- the long tail ---------------------------------------------------------------------------
sweep_step --partial-ok sweep gpu-check.json gpu-check.json 100000

# --- summary ---------------------------------------------------------------------------------
# The closing snapshot is not budgeted (a query, well under a second).
record nvidia-smi-end ok 0 ""
nvidia-smi -q -i "$device" >"$outdir/nvidia-smi-end.log" 2>&1 ||
  fail_last "nvidia-smi -q failed after the run; see nvidia-smi-end.log"
for i in "${!step_names[@]}"; do
  printf '%s\t%s\t%s\t%s\n' "${step_names[i]}" "${step_status[i]}" "${step_secs[i]}" \
    "${step_notes[i]}" >>"$steps_tsv"
done
title="$gpu_name (device $device, compute capability $cap), $((SECONDS - start)) s of ${budget} s"
if ! python3 "$root/scripts/gpu-check-summary.py" "$outdir" "$title" >"$outdir/summary.tmp" \
  2>&1; then
  # The figures are a convenience; the steps themselves are in steps.tsv.
  { cat "$outdir/summary.tmp"; echo "== gpu-check summary (figures unavailable) =="
    cat "$steps_tsv"; } >"$outdir/summary.tmp2"
  mv "$outdir/summary.tmp2" "$outdir/summary.tmp"
fi
cat "$outdir/summary.tmp" >>"$summary"
cat "$outdir/summary.tmp"
rm -f "$outdir/summary.tmp"
for s in "${step_status[@]}"; do [ "$s" = FAIL ] && exit 1; done
exit 0
