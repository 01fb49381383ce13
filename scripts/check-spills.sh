#!/usr/bin/env bash
# check-spills.sh: the "no spills" gate for the decode kernels.
#
# Reads the log of a CUDA build of decodebench_kernels_cuda (compiled with -Xptxas=-v, as
# kernels/CMakeLists.txt does), and
#   - prints a table per kernel entry: registers, stack frame, spill stores/loads, static smem;
#   - fails (exit 1) if any decode kernel spills, has a stack frame, or uses local memory
#     (ptxas -warn-spills / -warn-lmem-usage warnings), or if the log holds no decode kernel at
#     all (an incremental build that compiled nothing must not pass silently).
# Dynamic shared memory is chosen at launch and is not in ptxas output; the kernel headers
# (kernels/paged_decode/*.cuh) document it.
#
# Usage:
#   cmake --build BUILD --target decodebench_kernels_cuda --clean-first 2>&1 | tee build.log
#   scripts/check-spills.sh build.log [--markdown table.md] [--pattern REGEX]
#   scripts/check-spills.sh --self-test      # plants a spill in a synthetic log, checks it fails
# --pattern: which demangled kernel names count as decode kernels (default: the paged-decode
# ladder, i.e. names under paged-decode namespaces). Exit codes: 0 clean, 1 spill/lmem found or
# no decode kernel in the log, 2 bad usage.
set -euo pipefail

DEFAULT_PATTERN='naive|gqa_detail|pipelined_detail|split_kv_detail|paged_decode'

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

demangle() {
  if command -v c++filt >/dev/null 2>&1; then c++filt; else cat; fi
}

# Turns ptxas -v output into "name<TAB>regs<TAB>stack<TAB>spill_st<TAB>spill_ld<TAB>smem<TAB>lmem"
# rows, one per (mangled) entry, keeping the worst numbers when an entry appears in several
# translation units.
parse_log() {
  awk '
    /ptxas info *: Compiling entry function/ {
      match($0, /function .[^ ]+/); name = substr($0, RSTART + 10, RLENGTH - 10);
      gsub(/[\047`]/, "", name); current = name; seen[name] = 1; next
    }
    /ptxas info *: Function properties for/ {
      props = $NF; next
    }
    /bytes stack frame/ && current != "" && props == current {
      split($0, f, ","); 
      stack = f[1]; gsub(/[^0-9]/, "", stack);
      st = f[2]; gsub(/[^0-9]/, "", st);
      ld = f[3]; gsub(/[^0-9]/, "", ld);
      if (stack + 0 > S[current] + 0) S[current] = stack;
      if (st + 0 > ST[current] + 0) ST[current] = st;
      if (ld + 0 > LD[current] + 0) LD[current] = ld;
      next
    }
    /ptxas info *: Used [0-9]+ registers/ && current != "" {
      r = $0; sub(/.*Used /, "", r); sub(/ registers.*/, "", r);
      if (r + 0 > R[current] + 0) R[current] = r;
      sm = 0; if (match($0, /[0-9]+ bytes smem/)) { sm = substr($0, RSTART, RLENGTH); sub(/ .*/, "", sm) }
      if (sm + 0 > SM[current] + 0) SM[current] = sm;
      next
    }
    /ptxas warning *:.*(spilled|Local memory)/ {
      if (match($0, /function .[^ ,]+/)) {
        n = substr($0, RSTART + 10, RLENGTH - 10); gsub(/[\047`]/, "", n); LM[n] = 1
      }
    }
    END {
      for (n in seen) {
        printf "%s\t%d\t%d\t%d\t%d\t%d\t%d\n", n, R[n], S[n], ST[n], LD[n], SM[n], (n in LM) ? 1 : 0
      }
    }'
}

# void decodebench::kernels::cuda::gqa_detail::gqa_kernel<(decodebench::DType)1, 128, 8>(...)
#   -> gqa_kernel<f16, 128, 8>
shorten() {
  sed -E 's/^void //; s/\(decodebench::kernels::[A-Za-z]+Params\)$//;
          s/decodebench::kernels::(cuda|emu):://g; s/[a-z_]+_detail:://g;
          s/\(anonymous namespace\):://g;
          s/\(decodebench::DType\)0/f32/g; s/\(decodebench::DType\)1/f16/g;
          s/\(decodebench::DType\)2/bf16/g; s/\(decodebench::DType\)3/fp8_e4m3/g;
          s/\(decodebench::DType\)4/fp8_e5m2/g'
}

check_log() {
  local log="$1" markdown="$2" pattern="$3"
  [[ -r "$log" ]] || { echo "check-spills: cannot read build log '$log'" >&2; exit 2; }
  # One line per entry: short name, numbers, and whether it is a decode kernel; sorted by name.
  local rows
  rows="$(parse_log <"$log" | while IFS=$'\t' read -r mangled regs stack st ld smem lmem; do
    [[ -z "$mangled" ]] && continue
    local name short is_decode=0
    name="$(printf '%s\n' "$mangled" | demangle)"
    short="$(printf '%s\n' "$name" | shorten)"
    [[ "$name" =~ $pattern ]] && is_decode=1
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$short" "$regs" "$stack" "$st" "$ld" "$smem" "$lmem" "$is_decode"
  done | sort -t$'\t' -k1,1V)"
  local table="" decode_count=0 bad=0
  table+="| kernel | registers | stack frame (B) | spill stores (B) | spill loads (B) | static smem (B) |"$'\n'
  table+="|---|---:|---:|---:|---:|---:|"$'\n'
  while IFS=$'\t' read -r short regs stack st ld smem lmem is_decode; do
    [[ -z "$short" ]] && continue
    table+="| \`$short\` | $regs | $stack | $st | $ld | $smem |"$'\n'
    if ((is_decode)); then
      decode_count=$((decode_count + 1))
      if ((st > 0 || ld > 0 || stack > 0 || lmem > 0)); then
        echo "check-spills: FAIL $short: ${st} B spill stores, ${ld} B spill loads, ${stack} B stack frame$( ((lmem)) && echo ', local memory warning')" >&2
        bad=$((bad + 1))
      fi
    fi
  done <<<"$rows"
  printf '%s' "$table"
  if [[ -n "$markdown" ]]; then printf '%s' "$table" >"$markdown"; fi
  if ((decode_count == 0)); then
    echo "check-spills: FAIL no decode kernel (pattern '$pattern') in '$log'; was it a fresh build with -Xptxas=-v?" >&2
    return 1
  fi
  if ((bad > 0)); then
    echo "check-spills: $bad of $decode_count decode kernels spill or use local memory" >&2
    return 1
  fi
  echo "check-spills: $decode_count decode kernels, no spills, no local memory" >&2
}

self_test() {
  local dir
  dir="$(mktemp -d)"
  trap 'rm -rf "$dir"' RETURN
  local clean_entry="_ZN11decodebench7kernels4cuda10gqa_detail10gqa_kernelILNS_5DTypeE1ELi128ELi8EEEvNS0_17PagedDecodeParamsE"
  local other_entry="_ZN11decodebench7kernels4cuda16bandwidth_detail11copy_kernelENS0_15BandwidthParamsE"
  cat >"$dir/clean.log" <<EOF
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '$clean_entry' for 'sm_90a'
ptxas info    : Function properties for $clean_entry
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 211 registers, used 1 barriers
ptxas info    : Compiling entry function '$other_entry' for 'sm_90a'
ptxas info    : Function properties for $other_entry
    8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 14 registers, used 0 barriers, 128 bytes smem
EOF
  sed -e 's/    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads/    16 bytes stack frame, 16 bytes spill stores, 12 bytes spill loads/' \
      "$dir/clean.log" >"$dir/spill.log"
  { cat "$dir/clean.log"
    echo "ptxas warning : Local memory used for function '$clean_entry'"; } >"$dir/lmem.log"
  : >"$dir/empty.log"
  local failures=0
  check_log "$dir/clean.log" "" "$DEFAULT_PATTERN" >/dev/null 2>&1 ||
    { echo "self-test: a clean log (spill only in a non-decode kernel) was rejected" >&2; failures=1; }
  ! check_log "$dir/spill.log" "" "$DEFAULT_PATTERN" >/dev/null 2>&1 ||
    { echo "self-test: a planted spill was not caught" >&2; failures=1; }
  ! check_log "$dir/lmem.log" "" "$DEFAULT_PATTERN" >/dev/null 2>&1 ||
    { echo "self-test: a planted local-memory warning was not caught" >&2; failures=1; }
  ! check_log "$dir/empty.log" "" "$DEFAULT_PATTERN" >/dev/null 2>&1 ||
    { echo "self-test: an empty log passed" >&2; failures=1; }
  local table
  table="$(check_log "$dir/clean.log" "" "$DEFAULT_PATTERN" 2>/dev/null)"
  if command -v c++filt >/dev/null 2>&1 && [[ "$table" != *'`gqa_kernel<f16, 128, 8>` | 211 |'* ]]; then
    echo "self-test: table row for gqa_kernel<f16, 128, 8> missing or wrong:" >&2
    echo "$table" >&2
    failures=1
  fi
  ((failures == 0)) && echo "check-spills self-test: ok" >&2
  return "$failures"
}

main() {
  local log="" markdown="" pattern="$DEFAULT_PATTERN"
  while (($#)); do
    case "$1" in
      --self-test) self_test; exit $? ;;
      --markdown) markdown="${2:?--markdown needs a file}"; shift 2 ;;
      --pattern) pattern="${2:?--pattern needs a regex}"; shift 2 ;;
      -h|--help) usage ;;
      -*) echo "check-spills: unknown option '$1'" >&2; usage ;;
      *) [[ -z "$log" ]] || { echo "check-spills: one build log only" >&2; usage; }; log="$1"; shift ;;
    esac
  done
  [[ -n "$log" ]] || usage
  check_log "$log" "$markdown" "$pattern"
}

main "$@"
