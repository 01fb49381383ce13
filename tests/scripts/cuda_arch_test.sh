#!/usr/bin/env bash
# The CUDA architectures scripts/run.sh builds for, without a GPU and without a build: a fake
# nvidia-smi (the GPUs of $FAKE_GPUS, "CAP,NAME" entries separated by ';') and a fake nvcc
# (nvcc 13.0's --list-gpu-code, or $FAKE_NVCC_CODES) first on PATH, and for run.sh a fake cmake
# that records its arguments and keeps a CMakeCache.txt of the -D values, in a scratch copy of
# the scripts (scripts/bootstrap.sh a no-op, decodebench a stub).
#   scripts/cuda-arch.sh, per capability: 8.0 -> 80, 8.6 -> 86, 8.9 -> 89, 9.0 -> 90a,
#     10.0 -> 100a, 12.0 -> 120, 13.0 (newer than nvcc) -> 121 plus PTX, 10.0 with an nvcc that
#     knows up to sm_90 -> 90 plus PTX, --no-nvcc with nvcc 13.0's table, 7.5 refused (exit 1,
#     naming 7.5 and 8.0); --detect over
#     several GPUs: one entry per distinct capability, a 7.5 among them left out, the GPU's name
#     in the line;
#   scripts/run.sh: the configure's -DCMAKE_CUDA_ARCHITECTURES and the line saying why, for each
#     capability; 7.5 refused before any cmake; a build dir of another architecture
#     reconfigured (also one configured before run.sh recorded its choice); a hand-set one kept;
#     DECODEBENCH_CUDA_ARCH and CUDAARCHS win without asking nvidia-smi for the capability;
#     DECODEBENCH_CUDA_ARCH=none and no GPU build the cpu backend only.
# Planted faults, each caught: a mapping that answers 90a for everything, one that drops the
# "a" of sm_90a, and a run.sh that never passes the architecture it chose.
#   cuda_arch_test.sh RUN_SH CUDA_ARCH_SH WORKDIR
set -euo pipefail
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
run_sh="$(abs "$1")" cuda_arch="$(abs "$2")" work="$3"
rm -rf "$work"
mkdir -p "$work"
cd "$work"
work="$(pwd)"

# --- fake tools ------------------------------------------------------------------------------
mkdir -p tools
cat >tools/nvidia-smi <<'EOF'
#!/usr/bin/env bash
echo "nvidia-smi $*" >>"$FAKE_LOG"
[ -n "${FAKE_GPUS:-}" ] || { echo "NVIDIA-SMI has failed: no devices were found" >&2; exit 9; }
IFS=';' read -r -a gpus <<<"$FAKE_GPUS"
case "$*" in
  -L) i=0; for g in "${gpus[@]}"; do echo "GPU $i: ${g#*,} (UUID: GPU-fake-$i)"; i=$((i + 1)); done ;;
  *--query-gpu=compute_cap,name*--format=csv,noheader*)
    for g in "${gpus[@]}"; do echo "${g%%,*}, ${g#*,}"; done ;;
  *) echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 1 ;;
esac
EOF
cat >tools/nvcc <<'EOF'
#!/usr/bin/env bash
case "$*" in
  --list-gpu-code) printf 'sm_%s\n' ${FAKE_NVCC_CODES:-75 80 86 87 88 89 90 100 110 103 120 121} ;;
  --version) echo "Cuda compilation tools, release ${FAKE_NVCC_RELEASE:-13.0}, V${FAKE_NVCC_RELEASE:-13.0}.88" ;;
  *) echo "fake nvcc: unexpected arguments: $*" >&2; exit 1 ;;
esac
EOF
# cmake: logs each call; a configure (-B DIR) writes its -D values into DIR/CMakeCache.txt (a
# later -D of the same name replaces the line), a build makes a stub decodebench.
cat >tools/cmake <<'EOF'
#!/usr/bin/env bash
echo "cmake $*" >>"$FAKE_LOG"
if [ "$1" = --build ]; then
  mkdir -p "$2/src/cli"
  printf '#!/usr/bin/env bash\necho "decodebench $*" >>"%s"\n' "$FAKE_LOG" >"$2/src/cli/decodebench"
  chmod +x "$2/src/cli/decodebench"
  exit 0
fi
dir=""
for ((i = 1; i <= $#; i++)); do [ "${!i}" = -B ] && { j=$((i + 1)); dir="${!j}"; }; done
[ -n "$dir" ] || { echo "fake cmake: no -B" >&2; exit 1; }
mkdir -p "$dir"
touch "$dir/CMakeCache.txt"
for arg in "$@"; do
  [[ "$arg" == -D*=* ]] || continue
  kv="${arg#-D}" name="${kv%%=*}" value="${kv#*=}"
  name="${name%%:*}"
  grep -v "^$name:" "$dir/CMakeCache.txt" >"$dir/CMakeCache.new" || true
  echo "$name:STRING=$value" >>"$dir/CMakeCache.new"
  mv "$dir/CMakeCache.new" "$dir/CMakeCache.txt"
done
EOF
chmod +x tools/*
export PATH="$work/tools:/usr/bin:/bin" FAKE_LOG="$work/calls.log" CUDACXX="$work/tools/nvcc"
unset DECODEBENCH_CUDA_ARCH CUDAARCHS DECODEBENCH_BUILD_DIR FAKE_GPUS FAKE_NVCC_CODES || true

failures=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*" >&2; failures=$((failures + 1)); }

# --- the mapping -----------------------------------------------------------------------------
# check_mapping SCRIPT: the mapping cases against SCRIPT; prints its verdicts, returns how many
# went wrong.
check_mapping() {
  local script="$1" wrong=0 cap want out rc
  say_bad() { echo "  wrong: $*"; wrong=$((wrong + 1)); }
  for case in 8.0:80 8.6:86 8.9:89 9.0:90a 10.0:100a 12.0:120 13.0:121; do
    cap="${case%%:*}" want="${case#*:}"
    rc=0
    out="$(FAKE_GPUS="$cap,NVIDIA Fake $cap" bash "$script" --nvcc "$CUDACXX" --detect 2>&1)" || rc=$?
    if [ "$rc" -ne 0 ] || [ "$(head -n 1 <<<"$out")" != "$want" ]; then
      say_bad "$cap: got exit $rc, '$(head -n 1 <<<"$out")', want '$want'"
      continue
    fi
    if ! grep -qF "GPU 'NVIDIA Fake $cap' compute capability $cap" <<<"$out" ||
      ! grep -qF "building CUDA kernels for sm_$want" <<<"$out"; then
      say_bad "$cap: the line does not name the GPU, $cap and sm_$want: $(sed -n 2p <<<"$out")"
    fi
    if [ "$cap" = 13.0 ] && ! grep -q "newer than any architecture nvcc 13.0 knows.*PTX" <<<"$out"; then
      say_bad "13.0: does not say it is newer than nvcc and gets PTX: $(sed -n 2p <<<"$out")"
    fi
    # The same by capability, without nvidia-smi.
    out="$(bash "$script" --nvcc "$CUDACXX" "$cap" 2>&1 | head -n 1)" || true
    [ "$out" = "$want" ] || say_bad "$cap as an argument: got '$out', want '$want'"
  done
  # An older nvcc, which knows nothing past sm_90: a 10.0 GPU gets sm_90 plus its PTX.
  out="$(FAKE_NVCC_CODES="52 60 70 75 80 86 87 89 90" FAKE_NVCC_RELEASE=12.4 \
    bash "$script" --nvcc "$CUDACXX" 10.0 2>&1)" || true
  if [ "$(head -n 1 <<<"$out")" != 90 ] || ! grep -q "nvcc 12.4 knows (newest: sm_90).*PTX (compute_90)" <<<"$out"; then
    say_bad "10.0 with nvcc 12.4: want 90 plus PTX, got: $(tr '\n' '|' <<<"$out")"
  fi
  # --no-nvcc (scripts/gpu-check.sh on the GPU machine): nvcc 13.0's table, nvcc never run.
  out="$(FAKE_NVCC_CODES="80 86 89 90" bash "$script" --no-nvcc 9.0 13.0 2>&1)" || true
  [ "$(head -n 1 <<<"$out")" = "90a;121" ] ||
    say_bad "--no-nvcc 9.0 13.0: want 90a;121 from nvcc 13.0's table, got: $(tr '\n' '|' <<<"$out")"
  # Too old: refused, naming the capability and what is supported.
  rc=0
  out="$(FAKE_GPUS="7.5,Tesla T4" bash "$script" --nvcc "$CUDACXX" --detect 2>&1)" || rc=$?
  if [ "$rc" -ne 1 ] || ! grep -q "GPU 'Tesla T4' compute capability 7.5 is older than 8.0" <<<"$out" ||
    ! grep -q "8.0 or newer" <<<"$out"; then
    say_bad "7.5: want exit 1 naming 7.5 and 8.0 or newer, got exit $rc: $(tr '\n' '|' <<<"$out")"
  fi
  # Several GPUs: each distinct capability once, in order; a 7.5 left out with a line.
  out="$(FAKE_GPUS="8.0,NVIDIA A100-SXM4-80GB;9.0,NVIDIA H100 80GB HBM3;8.0,NVIDIA A100-SXM4-80GB;7.5,Tesla T4" \
    bash "$script" --nvcc "$CUDACXX" --detect 2>&1)" || true
  if [ "$(head -n 1 <<<"$out")" != "80;90a" ] ||
    [ "$(grep -c "building CUDA kernels" <<<"$out")" -ne 2 ] ||
    ! grep -q "Tesla T4' compute capability 7.5 is older than 8.0.*nothing is built for it" <<<"$out"; then
    say_bad "A100, H100, A100, T4: want 80;90a, one line each and T4 left out, got: $(tr '\n' '|' <<<"$out")"
  fi
  return "$wrong"
}

if wrongs="$(check_mapping "$cuda_arch")"; then
  ok "cuda-arch.sh: 8.0 8.6 8.9 9.0 10.0 12.0 13.0, an older nvcc, 7.5 refused, several GPUs"
else
  bad "cuda-arch.sh:"$'\n'"$wrongs"
fi

# Planted: a mapping that answers 90a for everything; one that drops the a of sm_90a.
cat >planted-90a.sh <<'EOF'
#!/usr/bin/env bash
echo 90a
echo "GPU 'whatever' compute capability 9.0: building CUDA kernels for sm_90a"
EOF
sed 's/arch="${n}a"/arch="$n"/' "$cuda_arch" >planted-no-a.sh
cmp -s "$cuda_arch" planted-no-a.sh && bad "the planted mapping without the 'a' is not planted"
for planted in planted-90a.sh planted-no-a.sh; do
  if wrongs="$(check_mapping "$planted")"; then
    bad "planted $planted: the checker passed it"
  else
    ok "planted $planted caught: $(grep -c 'wrong:' <<<"$wrongs") case(s), first:$(head -n 1 <<<"$wrongs" | sed 's/^  wrong://')"
  fi
done

# --- run.sh ----------------------------------------------------------------------------------
# A scratch checkout: run.sh and cuda-arch.sh as given, bootstrap a no-op.
make_repo() {
  local dir="$1" run="$2"
  rm -rf "$dir"
  mkdir -p "$dir/scripts"
  cp "$run" "$dir/scripts/run.sh"
  cp "$cuda_arch" "$dir/scripts/cuda-arch.sh"
  printf '#!/usr/bin/env bash\nexit 0\n' >"$dir/scripts/bootstrap.sh"
  chmod +x "$dir/scripts/"*.sh
}
# run REPO NAME: scripts/run.sh in REPO with build dir NAME (kept between calls of one case);
# sets rc, err (stderr) and conf (the configure's arguments, "" if none).
run() {
  local repo="$1"
  : >"$FAKE_LOG"
  rc=0
  (cd "$repo" && DECODEBENCH_BUILD_DIR="$2" bash scripts/run.sh --batch 1) >run.out 2>run.err || rc=$?
  err="$(cat run.err)"
  conf="$(grep '^cmake -S' "$FAKE_LOG" || true)"
}
has_arg() { [[ " $conf " == *" $1 "* ]]; }
no_arch() { [[ "$conf" != *CMAKE_CUDA_ARCHITECTURES* ]]; }

# check_run REPO: the run.sh cases; prints verdicts, returns how many went wrong.
check_run() {
  local repo="$1" wrong=0 cap want name
  say_bad() { echo "  wrong: $*"; wrong=$((wrong + 1)); }
  for case in 8.0:80 8.6:86 8.9:89 9.0:90a 10.0:100a 12.0:120 13.0:121; do
    cap="${case%%:*}" want="${case#*:}" name="NVIDIA Fake GPU $cap"
    rm -rf "$repo/build-$cap"
    FAKE_GPUS="$cap,$name" run "$repo" "build-$cap"
    if [ "$rc" -ne 0 ] || ! has_arg "-DCMAKE_CUDA_ARCHITECTURES=$want"; then
      say_bad "$cap: exit $rc, configure '$conf', want -DCMAKE_CUDA_ARCHITECTURES=$want"
    elif ! grep -qF "run.sh: GPU '$name' compute capability $cap" <<<"$err" ||
      ! grep -qF "building CUDA kernels for sm_$want" <<<"$err"; then
      say_bad "$cap: no line naming the GPU and sm_$want: $err"
    elif ! grep -q '^decodebench sweep' "$FAKE_LOG"; then
      say_bad "$cap: the sweep did not run"
    fi
  done

  rm -rf "$repo/build-old"
  FAKE_GPUS="7.5,Tesla T4" run "$repo" build-old
  if [ "$rc" -ne 1 ] || [ -n "$conf" ] || ! grep -q "run.sh: GPU 'Tesla T4' compute capability 7.5 is older than 8.0" <<<"$err" ||
    ! grep -q "DECODEBENCH_CUDA_ARCH=none" <<<"$err"; then
    say_bad "7.5: want exit 1 before any cmake, naming 7.5 and the way out; exit $rc, conf '$conf': $err"
  fi

  # Reconfigure: build-8.0 was configured for 80 by run.sh; now the GPU is a 9.0.
  FAKE_GPUS="9.0,NVIDIA H200" run "$repo" build-8.0
  if ! has_arg -DCMAKE_CUDA_ARCHITECTURES=90a || ! grep -q "configured for CUDA architectures 80: reconfiguring" <<<"$err"; then
    say_bad "80 -> 9.0: want reconfigure for 90a, conf '$conf': $err"
  fi
  FAKE_GPUS="9.0,NVIDIA H200" run "$repo" build-8.0
  if ! has_arg -DCMAKE_CUDA_ARCHITECTURES=90a || grep -q reconfiguring <<<"$err"; then
    say_bad "90a again: want the same 90a and no reconfigure line, conf '$conf': $err"
  fi
  # A build dir configured before run.sh chose (the CMakeLists default, in build_facts.json).
  rm -rf "$repo/build-facts" && mkdir -p "$repo/build-facts"
  echo "DECODEBENCH_CUDA:BOOL=ON" >"$repo/build-facts/CMakeCache.txt"
  printf '{\n  "cuda_architectures": ["90a"],\n  "cpu_arch": "native"\n}\n' >"$repo/build-facts/build_facts.json"
  FAKE_GPUS="8.0,NVIDIA A100-SXM4-80GB" run "$repo" build-facts
  if ! has_arg -DCMAKE_CUDA_ARCHITECTURES=80 || ! grep -q "configured for CUDA architectures 90a: reconfiguring" <<<"$err"; then
    say_bad "default 90a -> 8.0: want reconfigure for 80, conf '$conf': $err"
  fi
  # Set by hand (cmake -D, no record of run.sh's choice): kept.
  rm -rf "$repo/build-hand" && mkdir -p "$repo/build-hand"
  echo "CMAKE_CUDA_ARCHITECTURES:STRING=86" >"$repo/build-hand/CMakeCache.txt"
  FAKE_GPUS="9.0,NVIDIA H200" run "$repo" build-hand
  if ! no_arch || ! grep -q "CMAKE_CUDA_ARCHITECTURES=86, set by hand: kept" <<<"$err"; then
    say_bad "hand-set 86: want it kept, conf '$conf': $err"
  fi
  # The caller's choice wins, without asking for the capability.
  rm -rf "$repo/build-env"
  FAKE_GPUS="12.0,NVIDIA GeForce RTX 5090" DECODEBENCH_CUDA_ARCH="80;90a" run "$repo" build-env
  if ! has_arg "-DCMAKE_CUDA_ARCHITECTURES=80;90a" || grep -q compute_cap "$FAKE_LOG" ||
    ! grep -q "DECODEBENCH_CUDA_ARCH=80;90a" <<<"$err"; then
    say_bad "DECODEBENCH_CUDA_ARCH=80;90a: want it passed as is, conf '$conf': $err"
  fi
  FAKE_GPUS="12.0,NVIDIA GeForce RTX 5090" run "$repo" build-env
  if ! no_arch || ! grep -q "set by hand: kept" <<<"$err"; then
    say_bad "after DECODEBENCH_CUDA_ARCH: want the caller's choice kept, conf '$conf': $err"
  fi
  rm -rf "$repo/build-cudaarchs"
  FAKE_GPUS="8.0,NVIDIA A100" CUDAARCHS=89 run "$repo" build-cudaarchs
  has_arg -DCMAKE_CUDA_ARCHITECTURES=89 || say_bad "CUDAARCHS=89: want it passed, conf '$conf'"
  rm -rf "$repo/build-none"
  FAKE_GPUS="9.0,NVIDIA H200" DECODEBENCH_CUDA_ARCH=none run "$repo" build-none
  if ! has_arg -DDECODEBENCH_CUDA=OFF || ! no_arch; then
    say_bad "DECODEBENCH_CUDA_ARCH=none: want -DDECODEBENCH_CUDA=OFF and no architecture, conf '$conf'"
  fi
  rm -rf "$repo/build-nogpu"
  run "$repo" build-nogpu
  if [ "$rc" -ne 0 ] || ! has_arg -DDECODEBENCH_CUDA=OFF || ! no_arch || ! grep -q "no GPU" <<<"$err"; then
    say_bad "no GPU: want the cpu backend only, exit $rc, conf '$conf': $err"
  fi
  return "$wrong"
}

make_repo repo "$run_sh"
if wrongs="$(check_run "$work/repo")"; then
  ok "run.sh: each capability, 7.5 refused, reconfigure, hand-set kept, DECODEBENCH_CUDA_ARCH, CUDAARCHS, none, no GPU"
else
  bad "run.sh:"$'\n'"$wrongs"
fi

# Planted: a run.sh that chooses but never passes the architecture.
grep -v 'arch+=(-DCMAKE_CUDA_ARCHITECTURES=' "$run_sh" >planted-run.sh
cmp -s "$run_sh" planted-run.sh && bad "the planted run.sh is not planted"
make_repo planted-repo planted-run.sh
if wrongs="$(check_run "$work/planted-repo")"; then
  bad "planted run.sh without the architecture: the checker passed it"
else
  ok "planted run.sh without the architecture caught: $(grep -c 'wrong:' <<<"$wrongs") case(s)"
fi

if ((failures > 0)); then
  echo "cuda_arch_test: $failures check(s) failed" >&2
  exit 1
fi
echo "cuda_arch_test: all checks passed"
