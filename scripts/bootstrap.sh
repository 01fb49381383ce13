#!/usr/bin/env bash
# Installs what decodebench needs to build and test, from Debian's packages.
# Idempotent: a package already present is not reinstalled; run it as often as you like.
# The CUDA toolkit is optional and is not installed here: when nvcc is on PATH (or in
# /usr/local/cuda/bin) the build adds the CUDA kernels and backend.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libcli11-dev nlohmann-json3-dev libfmt-dev
  libbenchmark-dev libgtest-dev libgmock-dev
  python3
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "bootstrap: all dependencies present" >&2
fi
