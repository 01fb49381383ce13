#!/usr/bin/env bash
# The printed views, byte for byte: every command in views.txt runs on committed inputs (reports
# under results/, the committed trace slice, the presets and datasheets), nothing measured, and
# its stdout (plus any file it writes, named by @OUT@) must equal tests/golden/expected/NAME.
# What a refactor of the printers, the results model or the calculator must leave unchanged.
#   check-views.sh BIN [--expected DIR] [--update]
# --expected  the folder of expected outputs (default: expected/ beside this script; a test plants
#             a fault in a copy)
# --update    write the outputs into the expected folder instead of comparing (after a change that
#             is meant to change a view: review `git diff tests/golden` before committing)
# A report's own build stamp (tool.git_sha, tool.version, tool.build_type) is whatever its
# producer wrote; a command that stamps this build (cache-sim's JSON) has those fields masked.
# Exit: 0 all equal, 1 a view differs (named, with a diff), 2 bad usage.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="" expected="$here/expected" update=0
while (($#)); do
  case "$1" in
    --expected) expected="$2"; shift 2 ;;
    --update) update=1; shift ;;
    -*) echo "check-views: unknown option '$1' (valid: --expected DIR, --update)" >&2; exit 2 ;;
    *) bin="$1"; shift ;;
  esac
done
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "check-views: usage: check-views.sh BIN [--expected DIR] [--update] (BIN: decodebench)" >&2
  exit 2
fi
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$root"
mkdir -p "$expected"

# Stamps of this build, this host and the clock, where a command writes them: not a view.
# cache-sim times its own replay (the last column of its table and CSV, elapsed_s in JSON); a
# report's host facts and a plan's machine, ETA and cold methods (its cache flush is this host's
# last-level cache, and rotation fits its cache and memory) are this machine's; the temporary folder a command was told to write to is @WORK@.
mask() {
  sed -E -e 's/("(git_sha|version|build_type|created)": )"[^"]*"/\1"MASKED"/' \
    -e 's/("elapsed_s": )[0-9.e+-]+/\1"MASKED"/' -e "s|$work/|@WORK@/|g" \
    -e 's/^( *"(compiler|cpu|cpu_threads|hostname|os)": )[^,]*(,?)$/\1"MASKED"\3/' \
    -e 's/^(plan: [0-9]+ points on cpu )"[^"]*"/\1"MASKED"/' \
    -e 's/^(ETA: about )[0-9.]+ (m?s|min|h) /\1MASKED /' -e 's/^(cold samples: ).*/\1MASKED/'
}
mask_clock() {  # the last column of cache-sim's table and CSV rows
  sed -E -e '/replay s$/,/^$/ s/  [0-9.]+$/  MASKED/' -e '/,elapsed_s$/,$ s/,[0-9.e+-]+$/,MASKED/'
}

failures=0 count=0
while IFS='|' read -r name args; do
  name="${name#"${name%%[![:space:]]*}"}"
  [[ -z "$name" || "$name" == \#* ]] && continue
  name="${name%"${name##*[![:space:]]}"}"
  count=$((count + 1))
  out="$work/$name.file"
  args="${args//@OUT@/$out}"
  rc=0
  # shellcheck disable=SC2086  # the arguments are words, as written in views.txt
  "$bin" $args >"$work/$name.stdout" 2>"$work/$name.stderr" || rc=$?
  {
    cat "$work/$name.stdout"
    if [ -s "$work/$name.stderr" ]; then
      printf -- '--- stderr\n'
      cat "$work/$name.stderr"
    fi
    printf -- '--- exit %s\n' "$rc"
    if [ -f "$out" ]; then
      printf -- '--- file\n'
      cat "$out"
    fi
  } | mask | if [[ "$name" == cache-sim* ]]; then mask_clock; else cat; fi >"$work/$name"
  if ((update)); then
    cp "$work/$name" "$expected/$name"
  elif [ ! -f "$expected/$name" ]; then
    echo "FAIL $name: no expected output $expected/$name (run with --update and review)" >&2
    failures=$((failures + 1))
  elif ! cmp -s "$work/$name" "$expected/$name"; then
    echo "FAIL $name: decodebench $args differs from $expected/$name:" >&2
    diff -u "$expected/$name" "$work/$name" | head -40 >&2 || true
    failures=$((failures + 1))
  fi
done <"$here/views.txt"

if ((update)); then
  echo "check-views: wrote $count expected outputs to $expected"
  exit 0
fi
if ((failures)); then
  echo "check-views: $failures of $count views differ" >&2
  exit 1
fi
echo "check-views: $count views equal"
