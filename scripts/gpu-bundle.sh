#!/usr/bin/env bash
# Builds, on this machine, everything the GPU check runs, as a folder to carry to a machine with
# an H200 that reaches no package registry (docs/design.md, "GPU bundle"):
#   OUTDIR/bin/decodebench, OUTDIR/bin/<each CUDA test suite>, with --bench
#                      OUTDIR/bin/decodebench_bench
#   OUTDIR/lib/        the shared objects that travel (libgomp, libfmt; Google Benchmark with
#                      --bench),
#                      found through the binaries' run path $ORIGIN/../lib
#   OUTDIR/configs/    a copy of configs/ (decodebench finds it beside bin/)
#   OUTDIR/manifest.json
# Kernels for sm_90a (or --arch), host code for any x86-64-v3 CPU, the CUDA runtime static: `ldd` of every binary shows glibc, libstdc++, libgcc_s, libgomp and the
# bundle's lib/ only.
#
#   scripts/gpu-bundle.sh [OUTDIR] [--quick | --smoke] [--bench] [--build-dir DIR] [--jobs N]
#                         [--arch LIST] [--print-config]
#       OUTDIR defaults to gpu-bundle/ at the repo root (ignored by git); --quick builds head_dim
#       128 with f16 and fp8_e4m3 only; --smoke one rung (naive), head_dim 128, f16, the CUDA
#       host code at -O1: a bundle to check the packaging with, not to measure (its own test;
#       the C++ keeps the normal build's flags, so ccache reuses most of its objects); --bench adds
#       the microbenchmark binary, which the GPU check does not run (16 MB more: with every
#       kernel over the limit, so with --quick); the build dir defaults to build-bundle/.
#       --arch: the CMAKE_CUDA_ARCHITECTURES to build for, ';'- or ','-separated (default 90a:
#       the bundle is built where there is no GPU to ask, and the H200 is what it is for); each
#       must be one scripts/cuda-arch.sh maps a GPU to (80 86 87 89 90a 100a 103a 110a 120 121
#       with nvcc 13), so that scripts/gpu-check.sh, which asks cuda-arch.sh for the GPU it runs
#       on, finds it in the manifest's cuda_architectures. --print-config: print the checked
#       architectures and the CMake flags, build nothing (exit 0; a bad value exits 1 first).
#   scripts/gpu-bundle.sh --check-ldd FILE...
#       only the ldd rule: exit 1 naming every library outside the allowed set.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
max_bytes=$((48 * 1024 * 1024))  # what the device tool carries is 64 MiB in all
# What a bundled binary may load from the target machine: glibc, the C++ runtime, OpenMP, and
# the CUDA driver (which cudart_static dlopens, so ldd does not even list it).
allowed_libs=(linux-vdso.so.1 ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libpthread.so.0
  libdl.so.2 librt.so.1 libstdc++.so.6 libgcc_s.so.1 libgomp.so.1 libcuda.so.1)

die() {
  echo "gpu-bundle: $*" >&2
  exit 1
}

# check_ldd FILE...: every library ldd lists for FILE is in allowed_libs or resolves into the
# lib/ beside FILE's bin/ (the bundle's own); "not found" always fails.
check_ldd() {
  local file bad=0 line name path own
  for file in "$@"; do
    [ -f "$file" ] || die "--check-ldd: $file is not a file"
    own="$(cd "$(dirname "$file")/.." && pwd -P)/lib/"
    local out
    # The environment's LD_LIBRARY_PATH must not hide a library the target machine lacks.
    if ! out="$(env -u LD_LIBRARY_PATH ldd "$file" 2>&1)"; then
      echo "gpu-bundle: ldd $file failed: $out" >&2
      bad=1
      continue
    fi
    while IFS= read -r line; do
      line="${line#"${line%%[![:space:]]*}"}"
      [ -n "$line" ] || continue
      case "$line" in statically\ linked*) continue ;; esac
      name="${line%% *}"
      path=""
      if [[ "$line" == *" => "* ]]; then
        path="${line#* => }"
        path="${path%% (*}"
      fi
      if [ "$path" = "not found" ]; then
        echo "gpu-bundle: $file: $name not found" >&2
        bad=1
        continue
      fi
      local base="${name##*/}" ok=0 allowed
      for allowed in "${allowed_libs[@]}"; do
        [ "$base" = "$allowed" ] && ok=1
      done
      if [ "$ok" -eq 0 ] && [ -n "$path" ] && [ -e "$path" ]; then
        [[ "$(cd "$(dirname "$path")" && pwd -P)/" == "$own" ]] && ok=1
      fi
      if [ "$ok" -eq 0 ]; then
        echo "gpu-bundle: $file needs $name (${path:-no path}), which is neither allowed" \
          "(${allowed_libs[*]}) nor in the bundle's lib/" >&2
        bad=1
      fi
    done <<<"$out"
  done
  return "$bad"
}

if [ "${1:-}" = "--check-ldd" ]; then
  shift
  [ "$#" -gt 0 ] || die "--check-ldd needs at least one FILE"
  check_ldd "$@"
  exit
fi

out=""
quick=0
smoke=0
bench=0
build_dir="$root/build-bundle"
jobs="$(nproc)"
arch_list="90a"
print_config=0
while [ "$#" -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --print-config) print_config=1 ;;
    --arch)
      [ "$#" -ge 2 ] && [ -n "$2" ] || die "--arch needs a list of architectures (e.g. 90a)"
      arch_list="$2"
      shift
      ;;
    --smoke) smoke=1 ;;
    --bench) bench=1 ;;
    --build-dir)
      [ "$#" -ge 2 ] || die "--build-dir needs a directory"
      build_dir="$2"
      shift
      ;;
    --jobs)
      [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a positive number"
      jobs="$2"
      shift
      ;;
    -*) die "unknown option '$1' (valid: --quick, --smoke, --bench, --build-dir DIR, --jobs N, --arch LIST, --print-config, --check-ldd FILE...)" ;;
    *)
      [ -z "$out" ] || die "one OUTDIR only (got '$out' and '$1')"
      out="$1"
      ;;
  esac
  shift
done
nvcc="$(command -v nvcc 2>/dev/null || true)"
if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi

# --arch against cuda-arch.sh's own table: the architectures it maps the capabilities it knows
# to (with this nvcc; its nvcc 13.0 table without one). Checked before anything is written.
arch_caps=(8.0 8.6 8.7 8.9 9.0 10.0 10.3 11.0 12.0 12.1)
arch_nvcc=(--no-nvcc)
[ -z "$nvcc" ] || arch_nvcc=(--nvcc "$nvcc")
# Its first line is the list; read whole (a pipe into head could SIGPIPE it under pipefail).
valid_archs="$("$root/scripts/cuda-arch.sh" "${arch_nvcc[@]}" "${arch_caps[@]}")" ||
  die "scripts/cuda-arch.sh failed; cannot check --arch"
valid_archs="${valid_archs%%$'\n'*}"
cuda_archs=()
IFS=';,' read -r -a requested <<<"$arch_list"
for a in "${requested[@]}"; do
  a="${a// /}"
  [ -n "$a" ] || continue
  if [[ ";$valid_archs;" != *";$a;"* ]]; then
    die "--arch '$a' is not an architecture scripts/cuda-arch.sh builds for a GPU; valid:" \
      "${valid_archs//;/ } (e.g. --arch 90a, or --arch '90a;100a' for several)"
  fi
  [[ " ${cuda_archs[*]} " == *" $a "* ]] || cuda_archs+=("$a")
done
((${#cuda_archs[@]})) || die "--arch '$arch_list' names no architecture; valid: ${valid_archs//;/ }"
cuda_architectures="$(IFS=';'; echo "${cuda_archs[*]}")"

out="${out:-$root/gpu-bundle}"
if [ "$print_config" -eq 0 ]; then
mkdir -p "$build_dir"
build_dir="$(cd "$build_dir" && pwd)"
mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
# Replace only an earlier bundle or an empty folder, never a folder someone gave by mistake.
if [ -e "$out" ]; then
  if [ -f "$out/manifest.json" ] || [ -z "$(ls -A "$out" 2>/dev/null)" ]; then
    rm -rf "$out"
  else
    die "$out exists and is not a bundle (no manifest.json); give a new or empty folder"
  fi
fi
[ -n "$nvcc" ] || die "no nvcc on PATH or in /usr/local/cuda/bin: the bundle's kernels need it"
fi

head_dims="64;128;256"
# Every KV format the ladder is built for, from the table (kernels/kv_formats.h): the float ones
# for every rung, the integer ones for tc and cascade only (ladder.json "int_kv").
kv_dtypes="$(python3 "$root/scripts/kv_formats.py" --source names --ladder all --sep ';')" ||
  die "cannot read the KV formats (scripts/kv_formats.py)"
int_kv_dtypes="$(python3 "$root/scripts/kv_formats.py" --source names --ladder int_kv --sep ';')" ||
  die "cannot read the KV formats (scripts/kv_formats.py)"
rungs="all"
if [ "$quick" -eq 1 ]; then
  head_dims="128"
  kv_dtypes="f16;fp8_e4m3"
  int_kv_dtypes="int8;int4"
fi
opt_flags=()
if [ "$smoke" -eq 1 ]; then
  rungs="naive"
  head_dims="128"
  kv_dtypes="f16"
  int_kv_dtypes=""
  # A packaging check, never measured: -O1 compiles the .cu files' host code in half the time.
  # The C++ keeps Release's -O3: with ccache (scripts/bootstrap.sh --tests installs it) two
  # thirds of its units are then the normal build's objects, byte for byte the same command.
  opt_flags=(-DCMAKE_CUDA_FLAGS_RELEASE="-O1 -DNDEBUG")
fi
cmake_flags=(
  -G Ninja
  -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_CUDA_COMPILER="$nvcc"
  "-DCMAKE_CUDA_ARCHITECTURES=$cuda_architectures"
  # Each of the binaries carries every kernel: compressed for size the fat binary is about a
  # fifth of nvcc's default (a CUDA 13 driver, which cudart 13 needs anyway, reads it).
  -DCMAKE_CUDA_FLAGS=--compress-mode=size
  -DDECODEBENCH_CUDA=ON
  -DDECODEBENCH_CPU_ARCH=x86-64-v3
  # No CPU layer GEMMs: oneDNN (~30 MB) neither fits the bundle nor is on the GPU machine; the
  # cpu backend there skips layer points with the reason.
  -DDECODEBENCH_CPU_GEMM=none
  # fmt as the shared library that travels in lib/: header-only fmt compiles its formatting
  # code into every unit, which made each one 2.6x slower to build (cmd_sweep.cpp: 31 s vs 12 s).
  -DDECODEBENCH_FMT_HEADER_ONLY=OFF
  -DDECODEBENCH_CUDART_STATIC=ON
  -DDECODEBENCH_BUILD_TESTS=ON
  -DDECODEBENCH_BUILD_BENCH=ON
  -DDECODEBENCH_SANITIZE=none
  "-DDECODEBENCH_KERNELS=$rungs"
  "-DDECODEBENCH_HEAD_DIMS=$head_dims"
  "-DDECODEBENCH_KV_DTYPES=$kv_dtypes"
  "-DDECODEBENCH_INT_KV_DTYPES=$int_kv_dtypes"
  # bin/X finds lib/ wherever the bundle is copied.
  "-DCMAKE_BUILD_RPATH=\$ORIGIN/../lib"
  "${opt_flags[@]}"
)
if [ "$print_config" -eq 1 ]; then
  echo "cuda_architectures=$cuda_architectures"
  printf 'cmake_flag=%s\n' "${cmake_flags[@]}"
  exit 0
fi
echo "gpu-bundle: configuring $build_dir" >&2
cmake -S "$root" -B "$build_dir" "${cmake_flags[@]}" || die "configure failed"
grep -q '^CMAKE_CUDA_COMPILER:' "$build_dir/CMakeCache.txt" || die "CMake did not enable CUDA"
if grep -q -- '-march=native' "$build_dir/compile_commands.json"; then
  die "-march=native in $build_dir/compile_commands.json: the bundle must run on any x86-64-v3 CPU"
fi

# The CUDA test suites: every gpu-labelled one (tests/CMakeLists.txt writes each suite's labels
# into <suite>_properties.cmake at configure time) and cuda_plan_tests, which needs no device
# but is worth running against a real driver.
mapfile -t labelled < <(
  grep -rlE --include='*_properties.cmake' 'LABELS "([^"]*;)?gpu(;[^"]*)?"' "$build_dir/tests" |
    sed 's|.*/||; s|_properties\.cmake$||'
)
[ "${#labelled[@]}" -ge 1 ] || die "found no gpu-labelled test suite in $build_dir/tests"
mapfile -t gpu_tests < <(printf '%s\n' "${labelled[@]}" cuda_plan_tests | sort -u)
targets=(decodebench "${gpu_tests[@]}")
travelling_libs=(libgomp libfmt)
if [ "$bench" -eq 1 ]; then
  targets+=(decodebench_bench)
  travelling_libs+=(libbenchmark)
fi
echo "gpu-bundle: building ${targets[*]} (-j$jobs)" >&2
cmake --build "$build_dir" -j"$jobs" --target "${targets[@]}"

mkdir -p "$out/bin" "$out/lib"
for t in "${targets[@]}"; do
  exe="$(find "$build_dir" -type f -name "$t" -perm -u+x -not -path '*/CMakeFiles/*' | head -1)"
  [ -n "$exe" ] || die "built target $t, but found no executable $t under $build_dir"
  cp "$exe" "$out/bin/$t"
  strip --strip-unneeded "$out/bin/$t"
done
# The shared objects the target machine may lack: Google Benchmark and fmt (Debian ships them
# shared only) and libgomp (small; the binaries then depend on the target's libc and libstdc++
# only).
for lib in "${travelling_libs[@]}"; do
  so="$(env -u LD_LIBRARY_PATH ldd "$out"/bin/* |
    awk -v l="$lib" '$1 ~ "^" l "\\.so" && $3 ~ /^\// { print $1 " " $3; exit }')"
  [ -n "$so" ] || die "no $lib in ldd of the bundle's binaries"
  cp -L "${so#* }" "$out/lib/${so%% *}"
done
cp -r "$root/configs" "$out/configs"
# The KV formats' table as this build exported it, for the scripts run beside the bundle
# (scripts/kv_formats.py finds it above bin/decodebench).
cp "$build_dir/kv_formats.json" "$out/kv_formats.json"

echo "gpu-bundle: checking ldd" >&2
check_ldd "$out"/bin/* "$out"/lib/* || die "a bundled binary needs a library the target may lack"

# The highest symbol versions the target's glibc and libstdc++ must provide.
max_version() {
  local prefix="$1"
  objdump -p "$out"/bin/* "$out"/lib/* | grep -oE "\b${prefix}_[0-9]+(\.[0-9]+)*\b" |
    sed "s/^${prefix}_//" | sort -uV | tail -1
}
glibc_max="$(max_version GLIBC)"
glibcxx_max="$(max_version GLIBCXX)"
nvcc_version="$("$nvcc" --version | sed -n 's/.*release [0-9.]*, V\([0-9.]*\).*/\1/p')"
git_sha="$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
git_dirty=false
[ -z "$(git -C "$root" status --porcelain 2>/dev/null)" ] || git_dirty=true

BUNDLE="$out" FACTS="$build_dir/build_facts.json" GIT_SHA="$git_sha" GIT_DIRTY="$git_dirty" \
  HOST="$(uname -srm)" NVCC_VERSION="$nvcc_version" GLIBC_MAX="GLIBC_$glibc_max" \
  GLIBCXX_MAX="GLIBCXX_$glibcxx_max" GPU_TESTS="${gpu_tests[*]}" ARCHS="$cuda_architectures" \
  python3 - "${cmake_flags[@]}" <<'EOF'
import datetime, hashlib, json, os, sys

bundle = os.environ["BUNDLE"]
facts = json.load(open(os.environ["FACTS"]))
files = []
for d, _, names in os.walk(bundle):
    for n in names:
        p = os.path.join(d, n)
        rel = os.path.relpath(p, bundle)
        if rel == "manifest.json":
            continue
        with open(p, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        files.append({"path": rel, "bytes": os.path.getsize(p), "sha256": digest})
files.sort(key=lambda f: f["path"])
# What the build was configured with must be what --arch asked: gpu-check.sh trusts this field.
built = facts["cuda_architectures"]
built = built if isinstance(built, list) else str(built).replace(",", ";").split(";")
if sorted(str(a) for a in built) != sorted(os.environ["ARCHS"].split(";")):
    sys.exit(f"gpu-bundle: the build has CUDA architectures {built}, --arch asked "
             f"{os.environ['ARCHS']}")
manifest = {
    "git_sha": os.environ["GIT_SHA"],
    "git_dirty": os.environ["GIT_DIRTY"] == "true",
    "built_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "host": os.environ["HOST"],
    "nvcc_version": os.environ["NVCC_VERSION"],
    "cxx_compiler": facts["cxx_compiler"],
    "cuda_architectures": facts["cuda_architectures"],
    "cpu_arch": facts["cpu_arch"],
    "cmake_flags": sys.argv[1:],
    "head_dims": facts["head_dims"],
    "kv_dtypes": facts["kv_dtypes"],
    "int_kv_dtypes": facts["int_kv_dtypes"],
    "kernels": facts["kernels"],
    "gpu_tests": os.environ["GPU_TESTS"].split(),
    "requires": {"glibc": os.environ["GLIBC_MAX"], "glibcxx": os.environ["GLIBCXX_MAX"]},
    "files": files,
}
with open(os.path.join(bundle, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=2)
    f.write("\n")
EOF

bytes="$(find "$out" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')"
if [ "$bytes" -gt "$max_bytes" ]; then
  find "$out" -type f -printf '%s %P\n' | sort -rn | head -5 >&2
  die "$out is $((bytes / 1024 / 1024)) MiB ($bytes bytes), over the limit of 48 MiB"
fi
echo "gpu-bundle: $out: $bytes bytes ($((bytes / 1024)) KiB), needs glibc $glibc_max," \
  "libstdc++ GLIBCXX_$glibcxx_max" >&2
