#!/usr/bin/env bash
# check-views.sh must be able to fail: with the committed expected outputs it passes; a copy with
# one byte changed in one view, and a copy missing one view, each fail naming that view.
#   check_views_test.sh CHECK_VIEWS BIN WORKDIR
set -euo pipefail
check="$1" bin="$2" work="$3"
here="$(cd "$(dirname "$check")" && pwd)"
rm -rf "$work"
mkdir -p "$work"
failures=0
expect() {  # expect NAME DIR STATUS PATTERN
  local rc=0
  "$check" "$bin" --expected "$2" >"$work/$1.out" 2>&1 || rc=$?
  if [[ "$rc" != "$3" ]] || ! grep -Eq -- "$4" "$work/$1.out"; then
    echo "FAIL $1: exit $rc (want $3), output should match /$4/:" >&2
    sed 's/^/    /' "$work/$1.out" | tail -20 >&2
    failures=$((failures + 1))
  else
    echo "ok   $1: exit $rc, /$4/"
  fi
}
expect committed "$here/expected" 0 'views equal'
cp -r "$here/expected" "$work/changed"
sed -i '3s/[0-9]/9/; 3s/ /  /' "$work/changed/model-layer-table"
expect changed "$work/changed" 1 'FAIL model-layer-table: .*differs'
cp -r "$here/expected" "$work/missing"
rm "$work/missing/compare-md"
expect missing "$work/missing" 1 'FAIL compare-md: no expected output'
exit $((failures > 0))
