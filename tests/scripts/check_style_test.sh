#!/usr/bin/env bash
# The style check (scripts/check-style.sh) must be able to fail: in a scratch repository with the
# project's .clang-format it passes a clean tree, and fails, naming the fault, on
#   a C++ file clang-format would change;  a commit subject over 72 characters;
#   a file that names a ticket number;  one that names a work period;
#   a src/ file over 500 lines without a reason in its header (and with one: clean).
# (The planted words are written in pieces so that this file itself stays clean.)
#   check_style_test.sh CHECK CLANG_FORMAT_FILE WORKDIR
set -euo pipefail
check="$1" style="$2" work="$3"
rm -rf "$work"
mkdir -p "$work"
cd "$work"

new_repo() {  # new_repo DIR: a clean repository with one formatted file, one commit after base
  rm -rf "$1"
  mkdir -p "$1"
  (cd "$1" && git init -q && git config user.email t@example.com && git config user.name test &&
    cp "$style" .clang-format && printf 'int f(int x) { return x + 1; }\n' >f.cpp &&
    git add . && git commit -qm "base" && printf 'ok\n' >notes.md && git add . &&
    git commit -qm "notes: a short subject")
}

failures=0
# expect DIR STATUS PATTERN: check-style's exit status in DIR is STATUS and its output matches
# PATTERN (an extended regex).
expect() {
  local dir="$1" want="$2" pattern="$3" rc=0
  "$check" --root "$dir" --base "$(git -C "$dir" rev-list --max-parents=0 HEAD)" \
    >"$dir.out" 2>&1 || rc=$?
  if [[ "$rc" != "$want" ]] || ! grep -Eq -- "$pattern" "$dir.out"; then
    echo "FAIL $dir: exit $rc (want $want), output should match /$pattern/:" >&2
    sed 's/^/    /' "$dir.out" >&2
    failures=$((failures + 1))
  else
    echo "ok   $dir: exit $rc, /$pattern/"
  fi
}

new_repo clean
expect clean 0 'formatted, subjects and wording clean'

new_repo format
printf 'int   g(int x){return x;}\n' >format/g.cpp
git -C format add g.cpp
expect format 1 'g.cpp is not clang-format clean'

new_repo subject
git -C subject commit -q --allow-empty \
  -m "a subject that goes on and on well past the seventy-two characters a log line allows"
expect subject 1 'subject has 8[0-9] characters'

new_repo ticket
printf 'Fixes the target of %s #7.\n' "iss""ue" >ticket/notes.md
expect ticket 1 'speaks of tickets or work periods: notes.md:1'

new_repo period
printf '// measured in the third %s\nint h();\n' "sess""ion" >period/h.h
git -C period add h.h
expect period 1 'speaks of tickets or work periods: h.h:1'

new_repo long
mkdir -p long/src
for i in $(seq 501); do printf 'int v%d();\n' "$i"; done >long/src/big.h
git -C long add src/big.h
expect long 1 'src/big.h has 501 lines \(over 500\) and no reason'

new_repo long_ok
mkdir -p long_ok/src
{ printf '// Long by design: one declaration per value.\n'; for i in $(seq 501); do printf 'int v%d();\n' "$i"; done; } >long_ok/src/big.h
git -C long_ok add src/big.h
expect long_ok 0 'formatted, subjects and wording clean'

if ((failures > 0)); then
  echo "check_style_test: $failures of 7 planted cases went wrong" >&2
  exit 1
fi
echo "check_style_test: all 7 cases as expected"
