#!/usr/bin/env bash
# scripts/fresh-machine.sh's arguments, without building a root: --help exits 0 with the usage;
# an unknown scenario, an unknown --steps, an unknown option, an option without its value and a
# commit not in the repository each exit 2 naming what is valid; --dry-run prints the plan for
# the HEAD of the repository the script is in and says that uncommitted changes stay out.
# The script runs from a copy in a scratch repository, with fake debootstrap, chroot, mount,
# apt-get and tar first on PATH that record their call and fail: a case that got as far as
# building a root fails here instead of building one.
#   fresh_machine_test.sh SCRIPT WORKDIR
set -euo pipefail
script="$1" work="$2"
rm -rf "$work"
mkdir -p "$work/repo/scripts" "$work/fake-bin"
cd "$work"

for tool in debootstrap chroot mount umount apt-get tar; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/called"\nexit 97\n' "$tool" "$work" >"fake-bin/$tool"
  chmod +x "fake-bin/$tool"
done
cp "$script" repo/scripts/fresh-machine.sh
chmod +x repo/scripts/fresh-machine.sh
(cd repo && git init -q && git config user.email t@example.com && git config user.name test &&
  git add . && git commit -qm "base")
head="$(git -C repo rev-parse HEAD)"
fm() { PATH="$work/fake-bin:$PATH" repo/scripts/fresh-machine.sh --root "$work/roots" "$@"; }

failures=0 cases=0
# expect NAME STATUS PATTERN ARGS...: the script's exit status with ARGS is STATUS and its output
# matches PATTERN (an extended regex).
expect() {
  local name="$1" want="$2" pattern="$3" rc=0
  shift 3
  cases=$((cases + 1))
  fm "$@" >"$name.out" 2>&1 || rc=$?
  if [[ "$rc" != "$want" ]] || ! grep -Eq -- "$pattern" "$name.out"; then
    echo "FAIL $name: exit $rc (want $want), output should match /$pattern/:" >&2
    sed 's/^/    /' "$name.out" >&2
    failures=$((failures + 1))
  else
    echo "ok   $name: exit $rc, /$pattern/"
  fi
}

valid='valid: --scenario run-first\|test-first\|both, --steps all\|bootstrap'
expect help 0 'usage: .*fresh-machine.sh' --help
expect help-scenarios 0 'run-first \| test-first \| both' --help
expect bad-scenario 2 "unknown scenario 'sideways' \(valid: run-first, test-first, both\)" \
  --scenario sideways
expect bad-scenario-list 2 "$valid" --scenario sideways
expect bad-steps 2 "unknown --steps 'build' \(valid: all, bootstrap\)" --steps build
expect unknown-option 2 "unknown argument '--frobnicate'" --frobnicate
expect unknown-option-list 2 "$valid" --frobnicate
expect no-value 2 '--scenario needs a value' --scenario
expect value-is-option 2 '--commit needs a value' --commit --dry-run
expect bad-commit 2 "--commit 'no-such-rev' is not a commit of" --commit no-such-rev --dry-run
expect dry-run 0 "commit:  $head \(from " --dry-run
expect dry-run-steps 0 '^  scripts/test.sh --quick$' --dry-run --scenario test-first
expect dry-run-bootstrap 0 '^  scripts/bootstrap.sh$' --dry-run --steps bootstrap --scenario test-first
printf 'changed\n' >>repo/scripts/fresh-machine.sh
expect dry-run-dirty 0 'uncommitted changes; they are not in the clone' --dry-run

if [ -e called ]; then
  echo "FAIL: a case went on to build a root:" >&2
  sed 's/^/    /' called >&2
  failures=$((failures + 1))
fi
if [ -e roots ]; then
  echo "FAIL: a case created the roots folder $work/roots" >&2
  failures=$((failures + 1))
fi
if ((failures > 0)); then
  echo "fresh_machine_test: $failures of $cases cases (and the no-root checks) went wrong" >&2
  exit 1
fi
echo "fresh_machine_test: all $cases cases as expected, no root built"
