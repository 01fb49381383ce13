#!/usr/bin/env bash
# scripts/check-bootstrap-deps.py must be able to fail: it passes bootstrap's own package list,
# and catches each planted gap: OpenCL's development files dropped (Debian's dnnl-config.cmake
# reads them; libdnnl-dev only recommends them) and fmt's package dropped. bootstrap.sh rejects
# a bad argument with exit 2. Skips (77) off Debian.
#   bootstrap_deps_test.sh SCRIPTS_DIR WORKDIR
set -euo pipefail
scripts="$1" work="$2"
rm -rf "$work"
mkdir -p "$work"
command -v dpkg >/dev/null && command -v apt-cache >/dev/null || { echo "not Debian: skip"; exit 77; }

failures=0
# expect NAME STATUS PATTERN CHECKER_ARGS...: the checker's exit status and output.
expect() {
  local name="$1" want="$2" pattern="$3" rc=0
  shift 3
  "$scripts/check-bootstrap-deps.py" --work "$work/$name" "$@" >"$work/$name.out" 2>&1 || rc=$?
  if [[ "$rc" != "$want" ]] || ! grep -Eq -- "$pattern" "$work/$name.out"; then
    echo "FAIL $name: exit $rc (want $want), output should match /$pattern/:" >&2
    sed 's/^/    /' "$work/$name.out" >&2
    failures=$((failures + 1))
  else
    echo "ok   $name: exit $rc, /$pattern/"
  fi
}

mapfile -t packages < <("$scripts/bootstrap.sh" --list-packages --tests)
without() { local drop="$1" p out=(); for p in "${packages[@]}"; do [ "$p" = "$drop" ] || out+=("$p"); done; echo "${out[*]}"; }

expect clean 0 'files the configure read belong to bootstrap'
if printf '%s\n' "${packages[@]}" | grep -qx ocl-icd-opencl-dev; then
  expect no-opencl 1 'libOpenCL\.so \(package ocl-icd-opencl-dev\)' --packages "$(without ocl-icd-opencl-dev)"
fi
expect no-fmt 1 'cmake/fmt/.*\(package libfmt-dev\)' --packages "$(without libfmt-dev)"

rc=0
"$scripts/bootstrap.sh" --no-such-flag >"$work/badarg.out" 2>&1 || rc=$?
if [[ "$rc" != 2 ]] || ! grep -q 'valid: --tests, --fuzz, --list-packages' "$work/badarg.out"; then
  echo "FAIL bootstrap bad argument: exit $rc" >&2; failures=$((failures + 1))
else
  echo "ok   bootstrap bad argument: exit 2"
fi

if ((failures)); then echo "$failures failed" >&2; exit 1; fi
echo "all passed"
