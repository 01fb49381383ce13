#!/usr/bin/env bash
# Installs what decodebench needs to build and test, from Debian's packages.
# Idempotent: a package already present is not reinstalled; run it as often as you like.
# The CUDA toolkit is optional and is not installed here: when nvcc is on PATH (or in
# /usr/local/cuda/bin) the build adds the CUDA kernels and backend, and the spill gate
# (scripts/check-spills.sh) needs cuobjdump: when the toolkit has none, the PyPI wheel
# nvidia-cuda-cuobjdump of nvcc's major version is installed with pip (once; the gate finds it
# through python3, no PATH change needed).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

packages=(
  build-essential cmake ninja-build pkg-config
  libcli11-dev nlohmann-json3-dev libfmt-dev
  libbenchmark-dev libgtest-dev libgmock-dev
  python3 clang-format git
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

nvcc="$(command -v nvcc 2>/dev/null || true)"
if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
if [ -n "$nvcc" ]; then
  if cuobjdump="$("$here/check-spills.sh" --find-cuobjdump 2>/dev/null)"; then
    echo "bootstrap: cuobjdump: $cuobjdump" >&2
  else
    # "release 13.0, V13.0.88" -> any 13.x from 13.0 on: a newer cuobjdump of the same major
    # version reads this nvcc's cubins (the index has no wheel for every minor version).
    version="$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')"
    read -r major minor <<<"$version"
    spec="nvidia-cuda-cuobjdump>=${major}.${minor},<$((major + 1))"
    echo "bootstrap: $nvcc has no cuobjdump beside it; installing $spec from PyPI" >&2
    export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
    python3 -m pip install -q "$spec" ||
      python3 -m pip install -q --break-system-packages "$spec" ||
      echo "bootstrap: WARNING: could not install $spec; the spill gate will fail" >&2
    if cuobjdump="$("$here/check-spills.sh" --find-cuobjdump 2>/dev/null)"; then
      echo "bootstrap: cuobjdump: $cuobjdump" >&2
    else
      echo "bootstrap: WARNING: no cuobjdump found after installing $spec" >&2
    fi
  fi
fi
