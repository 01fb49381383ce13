#!/usr/bin/env bash
# Checks that what decodebench needs is here, and installs only what is missing, printing one line
# per install with what it is for. Two sets:
#   (default)  what building decodebench and running a sweep need (scripts/run.sh): cmake, ninja,
#              g++, git; fmt, nlohmann_json, CLI11; oneDNN for the cpu backend's layer GEMMs;
#   --tests    also what the test suite needs (scripts/test.sh): GoogleTest, Google Benchmark,
#              clang-format, python3 with matplotlib and Pillow (scripts/plot.py) and numpy, gguf
#              and tokenizers (scripts/kv_dump.py, kv_quant_eval.py), cuobjdump and
#              nvdisasm when nvcc is present (the spill gate, the static model); optional:
#              OpenBLAS (the GEMM bench's comparison), Chromium (the results-page test);
#   --fuzz     also the fuzz stage's clang++, libFuzzer, sanitizer runtimes and OpenMP.
# What is checked is what the build uses, not package names: the commands on PATH and the CMake
# packages as find_package sees them in a scratch configure (about a second), so a machine that
# has them some other way is left alone. Idempotent.
# oneDNN: Debian's libdnnl-dev (2.x) has bf16 kernels from AVX-512 with the bf16 instructions
# on; on any other x86-64 CPU the layer GEMMs need oneDNN 3.x, which PyPI's `onednn` has (a
# 2 GB SYCL build, installed with pip under $DECODEBENCH_ONEDNN_PYPI_ROOT, default
# ~/.cache/decodebench/onednn, where CMake looks). DECODEBENCH_ONEDNN=debian|pypi forces one
# (docs/decisions.md "Layer GEMMs on the CPU"). Debian's dnnl-config.cmake calls
# find_package(OpenCL), fatal without OpenCL's development files (only a recommendation of
# libdnnl-dev), so those come with it; tests/scripts/bootstrap_deps_test.sh checks that every
# file the configure reads belongs to a package listed here or to their dependencies.
# --list-packages prints the Debian packages of the chosen sets, one a line, and exits.
# When something is missing and cannot be installed (no apt-get, not root and no sudo, apt-get
# fails or the machine is offline) it fails within seconds, naming what is missing.
# The CUDA toolkit is optional and never installed here: with nvcc on PATH (or in
# /usr/local/cuda/bin) the build adds the CUDA kernels and backend.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tests=0 fuzz=0 list=0
for arg in "$@"; do
  case "$arg" in
    --tests) tests=1 ;;
    --fuzz) fuzz=1 tests=1 ;;
    --list-packages) list=1 ;;
    *) echo "bootstrap: unknown argument '$arg' (valid: --tests, --fuzz, --list-packages)" >&2; exit 2 ;;
  esac
done

# Which oneDNN this CPU needs (see above).
onednn="${DECODEBENCH_ONEDNN:-auto}"
case "$onednn" in
  auto) if grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null; then onednn=debian; else onednn=pypi; fi ;;
  debian | pypi) ;;
  *) echo "bootstrap: DECODEBENCH_ONEDNN='$onednn' is not valid (valid: auto, debian, pypi)" >&2; exit 2 ;;
esac
onednn_root="${DECODEBENCH_ONEDNN_PYPI_ROOT:-$HOME/.cache/decodebench/onednn}"

# What is needed -> the Debian package that provides it, and what it is for.
declare -A command_package=(
  [cmake]=cmake [ninja]=ninja-build [g++]=g++ [python3]=python3 [git]=git
  [clang-format]=clang-format [ccache]=ccache
)
declare -A cmake_package=(
  [fmt]=libfmt-dev [nlohmann_json]=nlohmann-json3-dev [CLI11]=libcli11-dev
  [GTest]="libgtest-dev libgmock-dev" [benchmark]=libbenchmark-dev
  [dnnl]="libdnnl-dev ocl-icd-opencl-dev"
)
declare -A purpose=(
  [cmake]="the build" [ninja]="the build" [g++]="the build"
  [git]="the build stamps each report with the checkout's commit"
  [python3]="scripts/plot.py and the script tests" [clang-format]="the style check"
  [ccache]="the GPU-bundle test, whose build reuses the normal build's objects"
  [fmt]="the build" [nlohmann_json]="the build" [CLI11]="the build"
  [GTest]="the test suites" [benchmark]="the microbenchmarks (bench/)"
  [dnnl]="the cpu backend's layer GEMMs (oneDNN; its CMake config needs OpenCL's dev files)"
)
command_order=(cmake ninja g++ git)
cmake_order=(fmt nlohmann_json CLI11)
if [ "$onednn" = debian ]; then cmake_order+=(dnnl); fi
if ((tests)); then
  command_order+=(python3 clang-format ccache)
  cmake_order+=(GTest benchmark)
fi

if ((list)); then
  for c in "${command_order[@]}"; do printf '%s\n' ${command_package[$c]}; done
  for c in "${cmake_order[@]}"; do printf '%s\n' ${cmake_package[$c]}; done
  # The optional one the configure also looks for (found where CMake looks, below).
  if ((tests)); then echo libopenblas-openmp-dev; fi
  exit 0
fi

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

# apt_install WHAT DEB...: installs the Debian packages, or says on stderr why it cannot
# ("bootstrap: WHAT; why") and returns 1. apt-get update runs once per bootstrap.
apt_updated=0
apt_install() {
  local what="$1"
  shift
  command -v apt-get >/dev/null 2>&1 ||
    { echo "bootstrap: $what; no apt-get here: install them by other means" >&2; return 1; }
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo -n true 2>/dev/null ||
      { echo "bootstrap: $what; not root and no password-less sudo to install them" >&2; return 1; }
    sudo=(sudo -n)
  fi
  echo "bootstrap: $what; installing" >&2
  # No retries and short timeouts: an offline machine fails in seconds, not minutes.
  local apt_opts=(-o Acquire::Retries=0 -o Acquire::http::Timeout=10 -o Acquire::https::Timeout=10)
  export DEBIAN_FRONTEND=noninteractive
  if ((!apt_updated)); then
    timeout 60 "${sudo[@]}" apt-get update -qq "${apt_opts[@]}" ||
      { echo "bootstrap: $what; apt-get update failed (offline?)" >&2; return 1; }
    apt_updated=1
  fi
  timeout 900 "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${apt_opts[@]}" "$@" ||
    { echo "bootstrap: $what; apt-get install failed" >&2; return 1; }
}

# pip_install SPEC...: one try with a short timeout (offline, pip gives up in seconds), then the
# same with --break-system-packages for a python3 whose site-packages Debian manages.
# A fresh Debian has python3 without pip: Debian's python3-pip first.
pip_install() {
  if ! python3 -m pip --version >/dev/null 2>&1; then
    echo "bootstrap: installing python3-pip: to install $* from PyPI" >&2
    apt_install "pip missing (to install $* from PyPI)" python3 python3-pip || return 1
  fi
  export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_RETRIES=0 PIP_TIMEOUT=10
  python3 -m pip install -q "$@" || python3 -m pip install -q --break-system-packages "$@"
}

mapfile -t missing < <(find_missing)
if ((${#missing[@]})); then
  debs=()
  for m in "${missing[@]}"; do
    # shellcheck disable=SC2206  # a CMake package may need two Debian packages
    pkgs=(${command_package[$m]:-${cmake_package[$m]}})
    echo "bootstrap: installing ${pkgs[*]}: $m, for ${purpose[$m]}" >&2
    debs+=("${pkgs[@]}")
  done
  what="missing: ${missing[*]} (Debian packages: ${debs[*]})"
  apt_install "$what" "${debs[@]}" || exit 1
  mapfile -t still < <(find_missing)
  if ((${#still[@]})); then
    echo "bootstrap: still missing after installing ${debs[*]}: ${still[*]}" >&2
    exit 1
  fi
else
  echo "bootstrap: all dependencies present" >&2
fi

# The fuzz stage: each missing piece -> its Debian package, found by what fails to build.
# fuzz_probe FLAGS...: compiles and links an empty fuzz target with clang++ and FLAGS.
fuzz_probe() {
  local scratch rc=0
  scratch="$(mktemp -d)"
  printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
    'extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }' \
    >"$scratch/probe.cpp"
  clang++ "$@" "$scratch/probe.cpp" -o "$scratch/probe" >/dev/null 2>&1 || rc=1
  rm -rf "$scratch"
  return "$rc"
}
fuzz_missing() {
  if ! command -v clang++ >/dev/null 2>&1; then
    echo clang
    return
  fi
  fuzz_probe -fsanitize=fuzzer,address,undefined || echo libclang-rt-dev
  fuzz_probe -fsanitize=fuzzer -fopenmp || echo libomp-dev
}
if ((fuzz)); then
  mapfile -t fuzz_debs < <(fuzz_missing)
  if ((${#fuzz_debs[@]})); then
    # Without clang++ the other two cannot be probed: install them with it when they are absent.
    if [ "${fuzz_debs[0]}" = clang ]; then fuzz_debs=(clang libclang-rt-dev libomp-dev); fi
    apt_install "fuzz stage: missing ${fuzz_debs[*]}" "${fuzz_debs[@]}" || exit 1
    mapfile -t still < <(fuzz_missing)
    if ((${#still[@]})); then
      echo "bootstrap: fuzz stage: clang++ still cannot link a fuzz target (${still[*]})" >&2
      exit 1
    fi
  fi
  echo "bootstrap: fuzz stage: $(clang++ --version | head -n 1)" >&2
fi

# oneDNN from PyPI for a CPU whose layer GEMMs Debian's oneDNN cannot run (see the top).
onednn_pypi_present() {
  [ -f "$onednn_root/include/oneapi/dnnl/dnnl.hpp" ] && compgen -G "$onednn_root/lib/libdnnl.so*" >/dev/null
}
if [ "$onednn" = pypi ]; then
  if onednn_pypi_present; then
    echo "bootstrap: oneDNN (PyPI): $onednn_root" >&2
  else
    echo "bootstrap: installing onednn onednn-devel from PyPI into $onednn_root (2 GB): the cpu" \
      "backend's layer GEMMs on a CPU without AVX512-BF16" >&2
    pip_install --ignore-installed --no-warn-script-location --prefix "$onednn_root" onednn onednn-devel ||
      { echo "bootstrap: could not install onednn from PyPI; the layer scope will skip on this CPU" >&2; exit 1; }
    onednn_pypi_present ||
      { echo "bootstrap: onednn installed but $onednn_root has no include/oneapi/dnnl/dnnl.hpp or lib/libdnnl.so" >&2; exit 1; }
  fi
fi

if ((!tests)); then exit 0; fi

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
    pip_install "${specs[@]}" ||
      echo "bootstrap: WARNING: could not install ${specs[*]}; the spill gate and the static model will fail" >&2
    if cuobjdump="$(have_binary_tools)"; then
      echo "bootstrap: cuobjdump and nvdisasm: $(dirname "$cuobjdump")" >&2
    else
      echo "bootstrap: WARNING: no cuobjdump with nvdisasm found after installing ${specs[*]}" >&2
    fi
  fi
fi

# The figures: matplotlib and Pillow for the python3 that runs scripts/plot.py.
has_plot_modules() { python3 -c 'import matplotlib, PIL' >/dev/null 2>&1; }
if ! has_plot_modules; then
  python_exe="$(python3 -c 'import sys; print(sys.executable)')"
  # Debian's package serves only Debian's interpreter (not pyenv's, a venv's or conda's).
  if [ "$python_exe" = /usr/bin/python3 ] || [[ "$python_exe" == /usr/bin/python3.* ]]; then
    apt_install "matplotlib missing for $python_exe" python3-matplotlib python3-pil || true
  fi
  if ! has_plot_modules; then
    echo "bootstrap: matplotlib missing for $python_exe; installing matplotlib from PyPI" >&2
    pip_install matplotlib pillow || true
  fi
  has_plot_modules || {
    echo "bootstrap: could not install matplotlib (and Pillow) for $python_exe;" \
      "scripts/plot.py and its tests need them" >&2
    exit 1
  }
fi
echo "bootstrap: matplotlib $(python3 -c 'import matplotlib; print(matplotlib.__version__)')" >&2

# The KV scripts (scripts/kv_dump.py, kv_quant_eval.py) and their test: numpy, gguf and tokenizers
# for the same python3, from PyPI (Debian 12 has neither gguf nor tokenizers).
declare -A kv_purpose=(
  [numpy]="the KV scripts' forward pass" [gguf]="the KV scripts' model file"
  [tokenizers]="the KV scripts' tokenizer"
)
kv_missing=()
for m in numpy gguf tokenizers; do
  if ! python3 -c "import $m" >/dev/null 2>&1; then
    echo "bootstrap: installing $m from PyPI: for ${kv_purpose[$m]}" >&2
    kv_missing+=("$m")
  fi
done
if ((${#kv_missing[@]})); then
  pip_install "${kv_missing[@]}" || true
  python3 -c 'import numpy, gguf, tokenizers' >/dev/null 2>&1 || {
    echo "bootstrap: could not install ${kv_missing[*]} for python3;" \
      "scripts/kv_dump.py, kv_quant_eval.py and their test need them" >&2
    exit 1
  }
fi
echo "bootstrap: $(python3 -c 'from importlib.metadata import version as v
print(", ".join(f"{p} {v(p)}" for p in ("numpy", "gguf", "tokenizers")))')" >&2

# Optional: OpenBLAS's OpenMP variant for the GEMM comparison of bench/bench_gemm.cpp, found where
# src/backends/cpu/CMakeLists.txt looks for it.
if ! compgen -G "/usr/lib/*/openblas-openmp/cmake/openblas/OpenBLASConfig.cmake" >/dev/null; then
  apt_install "OpenBLAS (OpenMP) missing (optional: the GEMM bench compares it)" \
    libopenblas-openmp-dev ||
    echo "bootstrap: WARNING: no OpenBLAS; bench/bench_gemm.cpp times oneDNN alone" >&2
fi

# Optional: a headless Chromium for the results-page test (which skips without one).
chromium_names=(chromium chromium-browser google-chrome google-chrome-stable)
find_chromium() {
  local c
  for c in "${chromium_names[@]}"; do
    command -v "$c" 2>/dev/null && return 0
  done
  return 1
}
if ! find_chromium >/dev/null; then
  # A font with it: without recommends, a bare machine may have none to draw the table's text.
  apt_install "chromium missing (optional: the results-page test skips without it)" chromium \
    fonts-dejavu-core || true
fi
if chromium="$(find_chromium)"; then
  echo "bootstrap: chromium: $chromium" >&2
else
  echo "bootstrap: WARNING: no chromium; tests/scripts/results_page_test.py will skip" >&2
fi

