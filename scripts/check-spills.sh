#!/usr/bin/env bash
# check-spills.sh: the "no spills" gate for the decode kernels, read from the built library.
#
# Reads the resource usage of every kernel in a built CUDA kernel library (cuobjdump
# --dump-resource-usage: registers, stack frame, local and shared memory per function and GPU
# architecture, from the cubins in the library itself, so it needs no build log and works on an
# up-to-date build that compiled nothing), and
#   - prints a markdown table, one row per (kernel, arch): demangled short name, registers,
#     stack frame, local memory, static shared memory, class;
#   - classifies every kernel (entry function) of the library by namespace:
#       decodebench::kernels::<target>::paged_decode::...      decode: the ladder, any rung
#       decodebench::kernels::<target>::bandwidth_detail::...  ceiling: bandwidth ceilings
#       decodebench::kernels::<target>::fill_detail::...       fill: device workload fill
#       decodebench::kernels::<target>::quantize_detail::...   quantize: the layer's fp8 casts
#     and fails on any kernel in none of them, so a new kernel cannot escape the gate;
#   - fails if a decode kernel has a stack frame or local memory (ptxas puts register spills
#     and local arrays there: STACK > 0 or LOCAL > 0; an entry's STACK includes its callees');
#   - fails if the library holds no decode kernel.
# Shared memory is what cuobjdump reports: static shared memory plus, on sm_80 and later, the
# 1 KiB per block the system reserves; dynamic shared memory is chosen at launch and is not in
# the cubin (the kernel headers, kernels/paged_decode/*.cuh, document it).
#
# Usage:
#   scripts/check-spills.sh [LIBRARY] [--markdown FILE]
#       LIBRARY: a static library, object or cubin with device code (default
#       build/kernels/libdecodebench_kernels_cuda.a); FILE gets the table too.
#   scripts/check-spills.sh --find-cuobjdump    prints the cuobjdump it uses; exit 1 if none
# cuobjdump comes from $CUOBJDUMP, else PATH, else next to nvcc ($CUDA_HOME/bin,
# /usr/local/cuda/bin), else the PyPI wheel nvidia-cuda-cuobjdump (scripts/bootstrap.sh installs
# it when nvcc has no cuobjdump beside it), located through python3.
# Exit codes: 0 clean; 1 a decode kernel spills or uses local memory, an unclassified kernel, or
# no decode kernel; 2 bad usage, no cuobjdump, or a library cuobjdump cannot read.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp=""
NS='decodebench::kernels::[a-z_]+::'
DECODE_NS='paged_decode'
CEILING_NS='bandwidth_detail'
FILL_NS='fill_detail'
QUANTIZE_NS='quantize_detail'

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Prints the path of a working cuobjdump, or returns 1.
find_cuobjdump() {
  local c
  for c in "${CUOBJDUMP:-}" "$(command -v cuobjdump 2>/dev/null || true)" \
           "${CUDA_HOME:+$CUDA_HOME/bin/cuobjdump}" \
           "$(dirname "$(command -v nvcc 2>/dev/null || echo /nonexistent/nvcc)")/cuobjdump" \
           /usr/local/cuda/bin/cuobjdump; do
    if [[ -n "$c" && -x "$c" ]]; then echo "$c"; return 0; fi
  done
  # The wheel puts it under site-packages (nvidia/cu13/bin/cuobjdump for CUDA 13); ask the
  # package's own file list rather than guessing the layout.
  if command -v python3 >/dev/null 2>&1; then
    c="$(python3 - <<'EOF' 2>/dev/null || true
import importlib.metadata as md
try:
    dist = md.distribution("nvidia-cuda-cuobjdump")
except md.PackageNotFoundError:
    raise SystemExit(1)
for f in dist.files or []:
    if f.name == "cuobjdump":
        print(dist.locate_file(f))
        break
EOF
)"
    if [[ -n "$c" && -x "$c" ]]; then echo "$c"; return 0; fi
  fi
  return 1
}

# cuobjdump --dump-resource-usage -> "mangled<TAB>arch<TAB>regs<TAB>stack<TAB>shared<TAB>local",
# one row per function and architecture (the SASS sections only, not the PTX).
parse_resource_usage() {
  awk '
    /^Fatbin elf code/ { elf = 1; arch = ""; next }
    /^Fatbin ptx code/ { elf = 0; next }
    elf && /^arch = / { arch = $3; next }
    elf && /^ Function / { name = $2; sub(/:$/, "", name); next }
    elf && name != "" && /REG:/ {
      regs = stack = shared = local = 0
      for (i = 1; i <= NF; ++i) {
        split($i, kv, ":")
        if (kv[1] == "REG") regs = kv[2]
        else if (kv[1] == "STACK") stack = kv[2]
        else if (kv[1] == "SHARED") shared = kv[2]
        else if (kv[1] == "LOCAL") local = kv[2]
      }
      printf "%s\t%s\t%d\t%d\t%d\t%d\n", name, arch, regs, stack, shared, local
      name = ""
    }'
}

# cuobjdump -symbols -> the mangled names of the entry functions (kernels).
parse_entries() {
  awk '$1 == "FUNC" && / ENTRY / { print $NF }' | sort -u
}

# void decodebench::kernels::cuda::paged_decode::gqa_detail::gqa_kernel<(decodebench::DType)1,
# 128, 8>(decodebench::kernels::PagedDecodeParams) -> gqa_kernel<f16, 128, 8>
# The KV formats' names by enum ordinal come from the build's export of kernels/kv_formats.h
# (scripts/kv_formats.py: the kv_formats.json of the library's build, else the table itself),
# read once into $tmp/dtype.sed by check_library.
shorten() {
  sed -E 's/^void //; s/\([^()]*\)$//;
          s/decodebench::kernels::[a-z_]+:://g; s/paged_decode:://g; s/[a-z_]+_detail:://g;
          s/\(anonymous namespace\):://g' | sed -E -f "$tmp/dtype.sed"
}

# decode / ceiling / fill / quantize from the demangled name's own qualification (not its
# arguments), or "unclassified".
classify() {
  local name="${1#void }"
  name="${name%%<*}"
  name="${name%%(*}"
  if [[ "$name" =~ ^${NS}${DECODE_NS}:: ]]; then echo decode
  elif [[ "$name" =~ ^${NS}${CEILING_NS}:: ]]; then echo ceiling
  elif [[ "$name" =~ ^${NS}${FILL_NS}:: ]]; then echo fill
  elif [[ "$name" =~ ^${NS}${QUANTIZE_NS}:: ]]; then echo quantize
  else echo unclassified
  fi
}

check_library() {
  local lib="$1" markdown="$2"
  [[ -r "$lib" ]] || { echo "check-spills: cannot read '$lib' (build the CUDA kernel library first)" >&2; exit 2; }
  command -v c++filt >/dev/null 2>&1 || { echo "check-spills: c++filt (binutils) is needed to demangle kernel names" >&2; exit 2; }
  local cuobjdump
  cuobjdump="$(find_cuobjdump)" || {
    echo "check-spills: no cuobjdump (not in \$CUOBJDUMP, on PATH, beside nvcc, nor from the" \
         "nvidia-cuda-cuobjdump wheel); run scripts/bootstrap.sh" >&2
    exit 2
  }
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  if ! "$cuobjdump" --dump-resource-usage "$lib" >"$tmp/res" 2>"$tmp/err" ||
     ! "$cuobjdump" -symbols "$lib" >"$tmp/sym" 2>>"$tmp/err"; then
    echo "check-spills: $cuobjdump cannot read '$lib':" >&2
    sed 's/^/  /' "$tmp/err" >&2
    exit 2
  fi
  if ! python3 "$root/scripts/kv_formats.py" --near "$lib" sed-ordinals >"$tmp/dtype.sed"; then
    echo "check-spills: cannot read the KV formats (scripts/kv_formats.py)" >&2
    exit 2
  fi
  parse_resource_usage <"$tmp/res" | sort -u >"$tmp/rows"
  parse_entries <"$tmp/sym" >"$tmp/entries"

  # One row per (kernel, arch), keyed by the full name (two kernels may share a short one), the
  # worst numbers when an instance sits in several objects:
  # "short<TAB>arch<TAB>regs<TAB>stack<TAB>local<TAB>shared<TAB>class<TAB>demangled".
  local mangled arch regs stack shared lmem
  : >"$tmp/table_rows"
  cut -f1 "$tmp/rows" | sort -u | c++filt >"$tmp/demangled" || true
  cut -f1 "$tmp/rows" | sort -u | paste - "$tmp/demangled" >"$tmp/names"
  while IFS=$'\t' read -r mangled arch regs stack shared lmem; do
    grep -qxF -- "$mangled" "$tmp/entries" || continue  # a device function, not a kernel
    local name short kind
    name="$(awk -F'\t' -v m="$mangled" '$1 == m { print $2; exit }' "$tmp/names")"
    short="$(printf '%s\n' "$name" | shorten)"
    kind="$(classify "$name")"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$short" "$arch" "$regs" "$stack" "$lmem" \
      "$shared" "$kind" "$name" >>"$tmp/table_rows"
  done <"$tmp/rows"
  awk -F'\t' -v OFS='\t' '
    { key = $8 SUBSEP $2
      if (!(key in seen)) { seen[key] = 1; order[++n] = key; row[key] = $0; next }
      split(row[key], old, "\t")
      for (i = 3; i <= 6; ++i) if ($i + 0 < old[i] + 0) $i = old[i]
      row[key] = $0 }
    END { for (i = 1; i <= n; ++i) print row[order[i]] }' "$tmp/table_rows" |
    awk -F'\t' -v OFS='\t' '{ r = $7 == "decode" ? 1 : $7 == "ceiling" ? 2 : $7 == "fill" ? 3 : $7 == "quantize" ? 4 : 0
                              print r, $0 }' |
    sort -t$'\t' -k1,1n -k2,2V -k3,3 | cut -f2- >"$tmp/merged"

  local table="" decode_count=0 bad=0 unclassified=0 kernels=0
  table+="| kernel | arch | registers | stack frame (B) | local memory (B) | static smem (B) | class |"$'\n'
  table+="|---|---|---:|---:|---:|---:|---|"$'\n'
  local kind name
  while IFS=$'\t' read -r short arch regs stack lmem shared kind name; do
    [[ -z "$short" ]] && continue
    kernels=$((kernels + 1))
    table+="| \`$short\` | $arch | $regs | $stack | $lmem | $shared | $kind |"$'\n'
    case "$kind" in
      decode)
        decode_count=$((decode_count + 1))
        if ((stack > 0 || lmem > 0)); then
          echo "check-spills: FAIL $short ($arch): ${stack} B stack frame, ${lmem} B local memory" \
               "(register spills or a local array): $name" >&2
          bad=$((bad + 1))
        fi ;;
      unclassified)
        echo "check-spills: FAIL unclassified kernel $name: put decode kernels in namespace" \
             "decodebench::kernels::<target>::${DECODE_NS} (a sub-namespace per rung is fine)," \
             "bandwidth ceilings in ::${CEILING_NS}, the fill in ::${FILL_NS}, the layer's" \
             "casts in ::${QUANTIZE_NS}" >&2
        unclassified=$((unclassified + 1)) ;;
    esac
  done <"$tmp/merged"
  table+=$'\n'"static smem: as cuobjdump reports it, with the 1 KiB per block that sm_80 and later"
  table+=" reserve for the system; dynamic shared memory is set at launch."$'\n'
  printf '%s' "$table"
  if [[ -n "$markdown" ]]; then printf '%s' "$table" >"$markdown"; fi
  local rc=0
  if ((decode_count == 0)); then
    echo "check-spills: FAIL no decode kernel (namespace ...::${DECODE_NS}) in '$lib'" \
         "($kernels kernels in all)" >&2
    rc=1
  fi
  if ((bad > 0)); then
    echo "check-spills: $bad of $decode_count decode kernel instances spill or use local memory" >&2
    rc=1
  fi
  if ((unclassified > 0)); then
    echo "check-spills: $unclassified unclassified kernels" >&2
    rc=1
  fi
  if ((rc == 0)); then
    echo "check-spills: $decode_count decode kernel instances, no stack frame, no local memory" \
         "($kernels kernels in '$lib', read by $cuobjdump)" >&2
  fi
  return "$rc"
}

main() {
  local lib="" markdown=""
  while (($#)); do
    case "$1" in
      --find-cuobjdump) find_cuobjdump; exit $? ;;
      --markdown) markdown="${2:?--markdown needs a file}"; shift 2 ;;
      -h|--help) usage ;;
      -*) echo "check-spills: unknown option '$1'" >&2; usage ;;
      *) [[ -z "$lib" ]] || { echo "check-spills: one library only" >&2; usage; }; lib="$1"; shift ;;
    esac
  done
  [[ -n "$lib" ]] || lib="$root/build/kernels/libdecodebench_kernels_cuda.a"
  check_library "$lib" "$markdown"
}

main "$@"
