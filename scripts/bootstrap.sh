#!/usr/bin/env bash
# Checks that what decodebench needs to build and test is here, and installs from Debian's
# packages only what is missing. What is checked is what the build uses, not package names: the
# commands (cmake, ninja, g++, python3, git, clang-format) on PATH and the CMake packages (fmt,
# nlohmann_json, CLI11, GTest, benchmark) as find_package sees them, in a scratch configure
# (about a second). So a machine that has them some other way (pip's cmake and ninja, a toolkit
# of its own) is left alone. Idempotent: run it as often as you like.
# When something is missing and cannot be installed (no apt-get, not root and no sudo, apt-get
# fails or the machine is offline) it fails within seconds, naming what is missing.
# The CUDA toolkit is optional and is not installed here: when nvcc is on PATH (or in
# /usr/local/cuda/bin) the build adds the CUDA kernels and backend, and the spill gate
# (scripts/check-spills.sh) and the static model (`decodebench kernels --static`) need cuobjdump
# and nvdisasm: when they are not found, the PyPI wheels nvidia-cuda-cuobjdump and
# nvidia-cuda-nvdisasm of nvcc's major version are installed with pip (once; both tools find
# them through python3, no PATH change needed).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# What is needed -> the Debian package that provides it.
declare -A command_package=(
  [cmake]=cmake [ninja]=ninja-build [g++]=g++ [python3]=python3 [git]=git
  [clang-format]=clang-format
)
declare -A cmake_package=(
  [fmt]=libfmt-dev [nlohmann_json]=nlohmann-json3-dev [CLI11]=libcli11-dev
  [GTest]="libgtest-dev libgmock-dev" [benchmark]=libbenchmark-dev
)
command_order=(cmake ninja g++ python3 git clang-format)
cmake_order=(fmt nlohmann_json CLI11 GTest benchmark)

# Prints the missing commands and CMake packages, one a line; CMake packages are all reported
# missing when the scratch configure cannot run (no cmake, no compiler, no build tool).
find_missing() {
  local c
  for c in "${command_order[@]}"; do
    command -v "$c" >/dev/null 2>&1 || echo "$c"
  done
  local scratch
  scratch="$(mktemp -d)"
  # shellcheck disable=SC2064  # expand now: the trap runs after the local is gone
  trap "rm -rf '$scratch'" RETURN
  cat >"$scratch/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(decodebench_bootstrap_probe LANGUAGES CXX)
foreach(p ${cmake_order[*]})
  find_package(\${p} QUIET)
  if(NOT \${p}_FOUND)
    message("missing: \${p}")
  endif()
endforeach()
EOF
  local generator=() out
  if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
  if command -v cmake >/dev/null 2>&1 &&
    out="$(cmake -S "$scratch" -B "$scratch/build" "${generator[@]}" 2>&1)"; then
    sed -n 's/^missing: //p' <<<"$out"
  else
    printf '%s\n' "${cmake_order[@]}"
  fi
}

mapfile -t missing < <(find_missing)
if ((${#missing[@]})); then
  debs=()
  for m in "${missing[@]}"; do
    # shellcheck disable=SC2206  # a CMake package may need two Debian packages
    debs+=(${command_package[$m]:-${cmake_package[$m]}})
  done
  what="missing: ${missing[*]} (Debian packages: ${debs[*]})"
  command -v apt-get >/dev/null 2>&1 ||
    { echo "bootstrap: $what; no apt-get here: install them by other means" >&2; exit 1; }
  SUDO=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo -n true 2>/dev/null ||
      { echo "bootstrap: $what; not root and no password-less sudo to install them" >&2; exit 1; }
    SUDO=(sudo -n)
  fi
  echo "bootstrap: $what; installing" >&2
  # No retries and short timeouts: an offline machine fails in seconds, not minutes.
  apt_opts=(-o Acquire::Retries=0 -o Acquire::http::Timeout=10 -o Acquire::https::Timeout=10)
  export DEBIAN_FRONTEND=noninteractive
  timeout 60 "${SUDO[@]}" apt-get update -qq "${apt_opts[@]}" ||
    { echo "bootstrap: $what; apt-get update failed (offline?)" >&2; exit 1; }
  timeout 900 "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${apt_opts[@]}" \
    "${debs[@]}" || { echo "bootstrap: $what; apt-get install failed" >&2; exit 1; }
  mapfile -t still < <(find_missing)
  if ((${#still[@]})); then
    echo "bootstrap: still missing after installing ${debs[*]}: ${still[*]}" >&2
    exit 1
  fi
else
  echo "bootstrap: all dependencies present" >&2
fi

nvcc="$(command -v nvcc 2>/dev/null || true)"
if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
# cuobjdump (the spill gate, the static model) and nvdisasm, which `cuobjdump -sass` runs from
# beside itself (the static model): both from the CUDA toolkit, else from their PyPI wheels.
have_binary_tools() {
  local c
  c="$("$here/check-spills.sh" --find-cuobjdump 2>/dev/null)" || return 1
  [ -x "$(dirname "$c")/nvdisasm" ] || command -v nvdisasm >/dev/null 2>&1 || return 1
  echo "$c"
}
if [ -n "$nvcc" ]; then
  if cuobjdump="$(have_binary_tools)"; then
    echo "bootstrap: cuobjdump and nvdisasm: $(dirname "$cuobjdump")" >&2
  else
    # "release 13.0, V13.0.88" -> any 13.x from 13.0 on: a newer cuobjdump of the same major
    # version reads this nvcc's cubins (the index has no wheel for every minor version).
    version="$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')"
    read -r major minor <<<"$version"
    range=">=${major}.${minor},<$((major + 1))"
    specs=("nvidia-cuda-cuobjdump$range" "nvidia-cuda-nvdisasm$range")
    echo "bootstrap: $nvcc has no cuobjdump/nvdisasm beside it; installing ${specs[*]} from PyPI" >&2
    # One try with a short timeout: offline, pip gives up in seconds.
    export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_RETRIES=0 PIP_TIMEOUT=10
    python3 -m pip install -q "${specs[@]}" ||
      python3 -m pip install -q --break-system-packages "${specs[@]}" ||
      echo "bootstrap: WARNING: could not install ${specs[*]}; the spill gate and the static model will fail" >&2
    if cuobjdump="$(have_binary_tools)"; then
      echo "bootstrap: cuobjdump and nvdisasm: $(dirname "$cuobjdump")" >&2
    else
      echo "bootstrap: WARNING: no cuobjdump with nvdisasm found after installing ${specs[*]}" >&2
    fi
  fi
fi
