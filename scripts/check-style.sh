#!/usr/bin/env bash
# check-style.sh: the habits a reviewer would otherwise repeat, checked on the tracked files.
#   format    every C++/CUDA file is as clang-format (.clang-format) writes it
#   subjects  every commit subject after BASE is at most 72 characters
#   length    a C++ file under src/ over 500 lines says why in its header: a line starting
#             "// Long" in its first 20 lines (else split it by concern)
#   words     no tracked file speaks of the project's own bookkeeping, its ticket numbers or its
#             work periods (say what the thing is instead: "the CPU target point", a date, a commit)
#
#   scripts/check-style.sh [--root DIR] [--base REV]
# --root: the repository (default: this script's); --base: the last commit before the subject
# rule (default below; the check is skipped with a message where BASE is not in the history, as
# in a shallow clone). Exit 0 clean, 1 a problem found (each one printed), 2 bad usage.
set -uo pipefail

# History before this commit is left as it was written.
default_base=bace23aab8688c06523ea658ca3e1f8d96daa37a
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
base="$default_base"
while (($#)); do
  case "$1" in
    --root) root="${2:?--root needs a directory}"; shift 2 ;;
    --base) base="${2:?--base needs a commit}"; shift 2 ;;
    *) echo "check-style: unknown argument '$1' (valid: --root DIR, --base REV)" >&2; exit 2 ;;
  esac
done
cd "$root" || { echo "check-style: cannot enter '$root'" >&2; exit 2; }
git rev-parse --git-dir >/dev/null 2>&1 || { echo "check-style: '$root' is not a git work tree" >&2; exit 2; }
command -v clang-format >/dev/null || { echo "check-style: clang-format not found (scripts/bootstrap.sh installs it)" >&2; exit 2; }

problems=0
fail() { echo "check-style: $*" >&2; problems=$((problems + 1)); }

# --- format ---
mapfile -t sources < <(git ls-files -- '*.cpp' '*.h' '*.cu' '*.cuh')
for f in "${sources[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 ||
    fail "$f is not clang-format clean (run: clang-format -i $f)"
done

# --- length ---
mapfile -t long_sources < <(git ls-files -- 'src/*.cpp' 'src/*.h')
for f in "${long_sources[@]}"; do
  lines=$(wc -l <"$f")
  if ((lines > 500)) && ! head -20 "$f" | grep -Eq '^// Long|^// .*Long (on purpose|by design)'; then
    fail "$f has $lines lines (over 500) and no reason in its header (a '// Long ...' line in its first 20 lines), or split it by concern"
  fi
done

# --- subjects ---
if git cat-file -e "$base^{commit}" 2>/dev/null; then
  while IFS= read -r line; do
    sha="${line%% *}" subject="${line#* }"
    ((${#subject} <= 72)) || fail "commit $sha: subject has ${#subject} characters (at most 72): $subject"
  done < <(git log --format='%h %s' "$base..HEAD")
else
  echo "check-style: commit $base is not in this history; commit subjects not checked" >&2
fi

# --- words ---
pattern='issue #?[0-9]+|\bsessions?\b'
while IFS= read -r hit; do
  fail "speaks of tickets or work periods: $hit"
done < <(git grep -I -n -i -E "$pattern" -- .)

if ((problems > 0)); then
  echo "check-style: $problems problem(s)" >&2
  exit 1
fi
echo "check-style: ${#sources[@]} C++/CUDA files formatted, subjects and wording clean" >&2
