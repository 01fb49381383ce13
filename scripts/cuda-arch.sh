#!/usr/bin/env bash
# The one mapping from an NVIDIA GPU's compute capability to the CMAKE_CUDA_ARCHITECTURES the
# decode kernels are built for (scripts/run.sh calls it; tests/scripts/cuda_arch_test.sh checks
# it against a fake nvidia-smi and nvcc).
#   scripts/cuda-arch.sh [--nvcc NVCC | --no-nvcc] CAP...      e.g. 8.0 9.0
#   scripts/cuda-arch.sh [--nvcc NVCC | --no-nvcc] --detect    every GPU nvidia-smi lists
# Prints the architectures on the first line (CMake's list, ascending: "80;90a"), then one line
# per distinct GPU (or capability) saying what is built for it and why. Each distinct
# capability gets its own entry:
#   8.0 8.6 8.7 8.9 (A100, A10/RTX 30xx, Orin, L4/L40S/RTX 40xx) -> 80 86 87 89
#   9.0 (H100, H200, H20)                                          -> 90a
#   10.0 10.3 11.0 (B200/GB200, B300/GB300, Thor)                  -> 100a 103a 110a
#   12.0 12.1 (RTX 50xx, RTX PRO 6000 Blackwell, DGX Spark)        -> 120 121
# The datacenter parts (9.x to 11.x) get the arch-specific target (sm_90a: what the kernels
# have been built and measured with), whose code runs on exactly that capability; the others the
# portable one. A capability this nvcc does not know gets the newest architecture it knows that
# is not newer than the GPU, as CMake's plain "NNN": SASS plus PTX, which the driver compiles
# for the GPU at load time (a GPU newer than the toolkit). Plain numbers embed PTX too, as
# CMake's default "90a" always has.
# Below 8.0 there is nothing to build: the kernels use cp.async, ldmatrix and mma.sync
# (sm_80). Such a GPU is left out with a line saying so; when every GPU is, the script exits 1
# with the reason on stderr. The architectures nvcc knows come from `NVCC --list-gpu-code`
# (NVCC: --nvcc, else $CUDACXX, /usr/local/cuda/bin/nvcc, nvcc on PATH, as CMakeLists.txt
# looks); without one, or with --no-nvcc (scripts/gpu-check.sh, on a machine without the
# toolkit), those of nvcc 13.0. Exit 2: bad arguments or an unreadable capability.
set -euo pipefail

usage() {
  echo "usage: cuda-arch.sh [--nvcc NVCC | --no-nvcc] CAP... | [--nvcc NVCC | --no-nvcc] --detect" >&2
  exit 2
}

nvcc="" no_nvcc=0 detect=0 caps=()
while [ $# -gt 0 ]; do
  case "$1" in
    --nvcc) [ $# -ge 2 ] || usage; nvcc="$2"; shift 2 ;;
    --no-nvcc) no_nvcc=1; shift ;;
    --detect) detect=1; shift ;;
    -*) usage ;;
    *) caps+=("$1"); shift ;;
  esac
done
if ((detect)) && ((${#caps[@]})); then usage; fi
if ((!detect)) && ((!${#caps[@]})); then usage; fi

# The architectures this nvcc compiles SASS for, as numbers (80 86 ... 121).
if ((no_nvcc)); then
  nvcc=""
elif [ -z "$nvcc" ]; then
  if [ -n "${CUDACXX:-}" ]; then
    nvcc="$CUDACXX"
  elif [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc=/usr/local/cuda/bin/nvcc
  else
    nvcc="$(command -v nvcc || true)"
  fi
fi
known=() toolkit="nvcc 13.0 (assumed)"
if [ -n "$nvcc" ] && list="$("$nvcc" --list-gpu-code 2>/dev/null)"; then
  while read -r code; do
    [[ "$code" =~ ^sm_([0-9]+)$ ]] && known+=("${BASH_REMATCH[1]}")
  done <<<"$list"
  release="$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p;T;q')" || true
  toolkit="nvcc ${release:-($nvcc)}"
fi
if ((!${#known[@]})); then known=(75 80 86 87 88 89 90 100 103 110 120 121); fi
mapfile -t known < <(printf '%s\n' "${known[@]}" | sort -n -u)
newest="${known[${#known[@]} - 1]}"

# map CAP: sets `arch` (CMake form) and `why` (what is built), or returns 1 with `why` saying
# why nothing can be built.
map() {
  local cap="$1" major minor n k best=""
  major="${cap%%.*}" minor="${cap#*.}"
  n=$((10 * major + minor))
  if ((n < 80)); then
    why=" is older than 8.0: the decode kernels use cp.async and mma.sync, which need compute"
    why+=" capability 8.0 or newer (A100, A10, L4, L40S, RTX 30xx/40xx/50xx, H100/H200/H20,"
    why+=" B200/GB200 and later)"
    return 1
  fi
  for k in "${known[@]}"; do
    if ((k == n)); then
      arch="$n"
      if ((major >= 9 && major <= 11)); then arch="${n}a"; fi
      why=": building CUDA kernels for sm_$arch"
      return 0
    fi
    if ((k < n)); then best="$k"; fi
  done
  if [ -z "$best" ] || ((best < 80)); then
    why=" is not known to $toolkit, which knows no architecture from 8.0 up to it"
    return 1
  fi
  arch="$best"
  if ((n > newest)); then
    why=" is newer than any architecture $toolkit knows (newest: sm_$newest):"
  else
    why=" is not an architecture $toolkit knows:"
  fi
  why+=" building CUDA kernels for sm_$best plus its PTX (compute_$best), which the driver"
  why+=" compiles for this GPU when it loads them"
}

# The GPUs: "CAP<TAB>label" lines.
gpus=()
if ((detect)); then
  if ! out="$(nvidia-smi --query-gpu=compute_cap,name --format=csv,noheader 2>&1)"; then
    echo "cannot read the GPUs' compute capability (nvidia-smi --query-gpu=compute_cap: $out)" >&2
    exit 2
  fi
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    cap="${line%%,*}" name="${line#*,}"
    cap="${cap// /}" name="${name# }"
    gpus+=("$cap"$'\t'"GPU '$name' compute capability $cap")
  done <<<"$out"
  ((${#gpus[@]})) || { echo "nvidia-smi lists no GPU" >&2; exit 2; }
else
  for cap in "${caps[@]}"; do gpus+=("$cap"$'\t'"compute capability $cap"); done
fi

archs=() notes=() refused=()
declare -A seen=()
for gpu in "${gpus[@]}"; do
  cap="${gpu%%$'\t'*}" label="${gpu#*$'\t'}"
  if [[ ! "$cap" =~ ^[0-9]+\.[0-9]$ ]]; then
    echo "$label: not a compute capability MAJOR.MINOR" >&2
    exit 2
  fi
  [ -z "${seen[$label]:-}" ] || continue
  seen[$label]=1
  if map "$cap"; then
    notes+=("$label$why")
    [[ " ${archs[*]} " == *" $arch "* ]] || archs+=("$arch")
  else
    refused+=("$label$why")
  fi
done
if ((!${#archs[@]})); then
  printf '%s\n' "${refused[@]}" >&2
  exit 1
fi
mapfile -t archs < <(printf '%s\n' "${archs[@]}" | sort -n)
(
  IFS=';'
  echo "${archs[*]}"
)
printf '%s\n' "${notes[@]}"
for r in "${refused[@]}"; do echo "$r; nothing is built for it"; done
