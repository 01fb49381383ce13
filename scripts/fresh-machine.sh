#!/usr/bin/env bash
# fresh-machine.sh: the README's two commands on a Debian 12 machine that has never seen the
# project. A minimal bookworm root (debootstrap --variant=minbase) gets a fresh `git clone` of one
# commit in /root/decodebench, and its root user runs, in a chroot, the scenario's steps:
#   run-first   scripts/bootstrap.sh, scripts/run.sh, scripts/test.sh --quick
#   test-first  scripts/test.sh --quick, scripts/run.sh
# each scenario in a fresh copy of the root. The CPU path only: nothing of the host's CUDA is
# visible inside. Why not a container: this workplace has no container runtime, and debootstrap
# needs only root (docs/decisions.md "Build and tests").
#
#   scripts/fresh-machine.sh [--scenario run-first|test-first|both] [--steps all|bootstrap]
#                            [--commit REV] [--root DIR] [--cache FILE] [--out DIR]
#                            [--keep-roots] [--dry-run] [--help]
#
# --scenario  which scenario(s) to run (default both, run-first first; the first failing step
#             ends the script).
# --steps     all (default) or bootstrap: only clone + scripts/bootstrap.sh in each root, a check
#             of the Debian packages in minutes rather than the whole build.
# --commit    the commit to clone (default HEAD of the repository this script is in). The clone
#             is made from that repository, so uncommitted changes are NOT in it.
# --root      the folder for the roots (DIR/run-first, DIR/test-first; default
#             /tmp/decodebench-fresh-machine). A scenario's root is removed when it passes
#             (--keep-roots keeps it) and kept when it fails, for a look inside.
# --cache     the pristine debootstrap result as a tarball (default
#             DIR/debootstrap-bookworm-ARCH.tar.gz): made on the first run, unpacked after; delete
#             it to debootstrap again.
# --out       the folder for the logs (default DIR/logs): debootstrap.log, SCENARIO/N-STEP.log,
#             summary.txt.
# --dry-run   print the plan (commit, package sources, cache, steps) and exit; needs no root.
#
# The package sources are the host's: the Debian 12 entries of /etc/apt/sources.list and
# /etc/apt/sources.list.d/ (the suite bookworm's URI is debootstrap's mirror), and its apt
# Acquire settings for proxies and Release dates; with no bookworm entry there, debootstrap's
# default mirror and sources.list. The root needs a network path to them, as a new machine would.
# Exit: 0 every step passed, 1 a step failed (named, with the tail of its log), 2 bad usage,
# 130 interrupted. Mounts (/proc, /sys, /dev, /dev/pts, /dev/shm) are undone on any exit. Ctrl-C
# takes effect when the running command returns: apt-get, which bootstrap.sh runs under timeout
# (a process group of its own), finishes its install first.
set -euo pipefail

suite=bookworm
scenario=both steps=all commit=HEAD keep_roots=0 dry_run=0
root_dir=/tmp/decodebench-fresh-machine cache="" out=""
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  cat <<'EOF'
usage: scripts/fresh-machine.sh [options]
Runs the README's scripts/run.sh and scripts/test.sh --quick as root in a fresh Debian 12 chroot
(debootstrap), on a clone of one commit (uncommitted changes are not in it). Needs root.
  --scenario S   run-first | test-first | both (default both)
                   run-first:  scripts/bootstrap.sh, scripts/run.sh, scripts/test.sh --quick
                   test-first: scripts/test.sh --quick, scripts/run.sh
  --steps S      all | bootstrap (default all; bootstrap: only scripts/bootstrap.sh)
  --commit REV   commit to clone (default HEAD of this script's repository)
  --root DIR     folder for the roots (default /tmp/decodebench-fresh-machine)
  --cache FILE   pristine debootstrap tarball, made once, reused after
                 (default DIR/debootstrap-bookworm-ARCH.tar.gz)
  --out DIR      logs (default DIR/logs)
  --keep-roots   keep a scenario's root when it passes (a failing one is always kept)
  --dry-run      print the plan and exit (no root needed)
  --help         this text
EOF
}
valid_options="--scenario run-first|test-first|both, --steps all|bootstrap, --commit REV,"
valid_options+=" --root DIR, --cache FILE, --out DIR, --keep-roots, --dry-run, --help"
usage_error() {
  echo "fresh-machine: $*" >&2
  echo "fresh-machine: valid: $valid_options" >&2
  exit 2
}
need_value() {  # need_value OPTION [VALUE...]
  if (($# < 2)) || [ -z "$2" ] || [[ "$2" == --* ]]; then usage_error "$1 needs a value"; fi
}

while (($#)); do
  case "$1" in
    --scenario)
      need_value "$@"
      case "$2" in run-first | test-first | both) scenario="$2" ;;
        *) usage_error "unknown scenario '$2' (valid: run-first, test-first, both)" ;;
      esac
      shift 2 ;;
    --steps)
      need_value "$@"
      case "$2" in all | bootstrap) steps="$2" ;;
        *) usage_error "unknown --steps '$2' (valid: all, bootstrap)" ;;
      esac
      shift 2 ;;
    --commit) need_value "$@"; commit="$2"; shift 2 ;;
    --root) need_value "$@"; root_dir="$2"; shift 2 ;;
    --cache) need_value "$@"; cache="$2"; shift 2 ;;
    --out) need_value "$@"; out="$2"; shift 2 ;;
    --keep-roots) keep_roots=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done

# Absolute paths: the steps run from other directories. Whitespace would break the mount table
# lookups below (/proc/self/mountinfo escapes it).
abs() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
root_dir="$(abs "$root_dir")"
arch="$(dpkg --print-architecture 2>/dev/null || echo amd64)"
cache="$(abs "${cache:-$root_dir/debootstrap-$suite-$arch.tar.gz}")"
out="$(abs "${out:-$root_dir/logs}")"
for p in "$root_dir" "$cache" "$out"; do
  [[ "$p" != *[[:space:]]* ]] || usage_error "no whitespace in paths, please: '$p'"
done
[ "$root_dir" != / ] || usage_error "--root / would replace the host"

git -C "$repo" rev-parse --git-dir >/dev/null 2>&1 ||
  usage_error "$repo is not a git repository: nothing to clone"
sha="$(git -C "$repo" rev-parse --verify -q "$commit^{commit}")" ||
  usage_error "--commit '$commit' is not a commit of $repo"
dirty=""
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  dirty="note: $repo has uncommitted changes; they are not in the clone"
fi

case "$scenario" in
  both) scenarios=(run-first test-first) ;;
  *) scenarios=("$scenario") ;;
esac
# scenario_steps SCENARIO: the scenario's in-root commands, one a line.
scenario_steps() {
  if [ "$steps" = bootstrap ]; then
    echo scripts/bootstrap.sh
  elif [ "$1" = run-first ]; then
    printf '%s\n' scripts/bootstrap.sh scripts/run.sh "scripts/test.sh --quick"
  else
    printf '%s\n' "scripts/test.sh --quick" scripts/run.sh
  fi
}

# --- the host's package sources ---
# host_debian_entries: "URI SUITE COMPONENTS..." for each enabled deb entry of the host's apt
# sources, one-line (.list) and deb822 (.sources) alike. Continuation lines (an inline key) are
# skipped; the fields read here are one line each in practice.
host_debian_entries() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && NF >= 4 { $1 = ""; print substr($0, 2) }'
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '
      function flush(  i, j, nu, ns, u, s) {
        if (types ~ /(^|[ \t])deb([ \t]|$)/ && tolower(enabled) != "no") {
          nu = split(uris, u); ns = split(suites, s)
          for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) print u[i], s[j], comps
        }
        types = uris = suites = comps = ""; enabled = "yes"
      }
      BEGIN { enabled = "yes" }
      /^#/ { next }
      /^[ \t]*$/ { flush(); next }
      /^[ \t]/ { next }
      {
        key = tolower(substr($0, 1, index($0, ":") - 1)); value = substr($0, index($0, ":") + 1)
        gsub(/^[ \t]+|[ \t]+$/, "", value)
        if (key == "types") types = value; else if (key == "uris") uris = value
        else if (key == "suites") suites = value; else if (key == "components") comps = value
        else if (key == "enabled") { enabled = value; gsub(/[ \t]/, "", enabled) }
      }
      END { flush() }' "$f"
  done
}
# What a Debian 12 install lists: the release, its updates and its security suite.
mapfile -t root_entries < <(host_debian_entries |
  awk -v s="$suite" '$2 == s || $2 == s "-updates" || $2 == s "-security"' | sort -u)
mirror=""
for e in "${root_entries[@]}"; do
  read -r u s _ <<<"$e"
  if [ "$s" = "$suite" ] && [[ "$u" =~ ^(https?|file): ]]; then mirror="${u%/}"; break; fi
done
[ -n "$mirror" ] || root_entries=()
# The Acquire settings the root needs to reach the same mirror the same way (proxies; Release
# files of a dated mirror whose Valid-Until has passed).
acquire_conf="$(apt-config dump 2>/dev/null |
  grep -E '^Acquire::((https?|ftp)::Proxy|Check-Valid-Until|Check-Date) ' || true)"
proxy_env=()
for v in http_proxy https_proxy ftp_proxy no_proxy HTTP_PROXY HTTPS_PROXY FTP_PROXY NO_PROXY; do
  [ -z "${!v:-}" ] || proxy_env+=("$v=${!v}")
done

if ((dry_run)); then
  echo "commit:  $sha (from $repo)"
  [ -z "$dirty" ] || echo "$dirty"
  if [ -n "$mirror" ]; then echo "mirror:  $mirror"
  else echo "mirror:  debootstrap's default (no $suite entry in the host's apt sources)"; fi
  for e in "${root_entries[@]}"; do echo "  root apt source: $e"; done
  if [ -f "$cache" ]; then echo "cache:   $cache (present: unpacked, no debootstrap)"
  else echo "cache:   $cache (absent: debootstrap, then saved)"; fi
  for sc in "${scenarios[@]}"; do
    echo "$sc: root $root_dir/$sc, logs $out/$sc"
    scenario_steps "$sc" | sed 's/^/  /'
  done
  exit 0
fi

[ "$(id -u)" -eq 0 ] || usage_error "needs root (debootstrap, chroot, mount); try sudo"
for c in tar gzip chroot mount umount flock; do
  command -v "$c" >/dev/null || usage_error "'$c' not found on this machine"
done
mkdir -p "$root_dir" "$out" "$(dirname "$cache")"
# One run per root folder: two would unpack into and unmount each other's roots.
exec 9>"$root_dir/.lock"
flock -n 9 || { echo "fresh-machine: another run holds $root_dir/.lock" >&2; exit 2; }

# --- mounts and cleanup ---
start=$SECONDS
current_root="" summary=()
mounted=()  # in mount order; undone in reverse
# mounts_below DIR: mount points at or under DIR, deepest first.
mounts_below() {
  awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
# Processes still running inside the root (a build server, a forked helper) keep it busy; they
# are this script's own descendants.
kill_inside() {
  local r="$1" p sig found
  for sig in TERM KILL; do
    found=0
    for p in /proc/[0-9]*; do
      if [ "$(readlink "$p/root" 2>/dev/null)" = "$r" ]; then
        kill "-$sig" "${p#/proc/}" 2>/dev/null && found=1
      fi
    done
    ((found)) || return 0
    sleep 1
  done
}
unmount_root() {
  local r="$1" m i
  [ -n "$r" ] || return 0
  kill_inside "$r"
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" 2>/dev/null || true
  done
  mounted=()
  # Anything mounted from inside, or left by a run that was killed.
  while IFS= read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done < <(mounts_below "$r")
}
# remove_root DIR: only once nothing is mounted below it (a bind-mounted /dev would be emptied).
remove_root() {
  local r="$1"
  [ -e "$r" ] || return 0
  unmount_root "$r"
  if [ -n "$(mounts_below "$r")" ]; then
    echo "fresh-machine: still mounted under $r, not removing it:" >&2
    mounts_below "$r" >&2
    return 1
  fi
  rm -rf --one-file-system "$r"
}
mount_into() {  # mount_into TARGET MOUNT-ARGS...: mounts, made private so nothing propagates back
  local target="$1"
  shift
  mkdir -p "$target" && mount "$@" "$target" || return 1
  mounted+=("$target")
  mount --make-private "$target"
}
mount_root() {
  local r="$1"
  mount_into "$r/proc" -t proc proc &&
    mount_into "$r/sys" --bind /sys &&  # OpenMP and nproc read the CPU topology here
    mount_into "$r/dev" --bind /dev &&
    mount_into "$r/dev/pts" --bind /dev/pts &&
    mount_into "$r/dev/shm" -t tmpfs -o mode=1777,nosuid,nodev tmpfs &&  # python's semaphores
    mounts_below "$r"
}

print_summary() {
  {
    echo "fresh-machine: commit $sha, $((SECONDS - start)) s in all"
    printf '  %s\n' "${summary[@]}"
  } | tee "$out/summary.txt"
}
# The terminal's stdout and stderr: a trap can run while a step's output goes to its log.
exec 7>&1 8>&2
on_exit() {
  local rc=$?
  trap - EXIT INT TERM
  exec 1>&7 2>&8
  if [ -n "$current_root" ]; then
    unmount_root "$current_root"
    echo "fresh-machine: kept $current_root (steps did not all pass)" >&2
  fi
  # Also what a killed debootstrap left mounted in its scratch root.
  unmount_root "$root_dir"
  if [ -n "$(mounts_below "$root_dir")" ]; then
    echo "fresh-machine: WARNING: still mounted under $root_dir:" >&2
    mounts_below "$root_dir" >&2
  fi
  exit "$rc"
}
trap on_exit EXIT
trap 'echo "fresh-machine: interrupted" >&8; exit 130' INT
trap 'echo "fresh-machine: terminated" >&8; exit 143' TERM

# run_step SCENARIO NAME LOG CMD...: runs CMD with its output in LOG and prints its time; a
# failure prints the tail of LOG and ends the script.
declare -A step_seconds=()
run_step() {
  local sc="$1" name="$2" log="$3" t0=$SECONDS rc=0 dt
  shift 3
  echo "fresh-machine: [$((SECONDS - start)) s] $sc: $name ... (log: $log)"
  "$@" >"$log" 2>&1 </dev/null || rc=$?
  dt=$((SECONDS - t0))
  step_seconds["$sc/$name"]=$dt
  if ((rc)); then
    summary+=("$(printf '%-10s %-24s %5d s  FAILED (exit %d)' "$sc" "$name" "$dt" "$rc")")
    echo "fresh-machine: FAILED: $sc: step '$name' exited $rc after $dt s; last 40 lines of $log:" >&2
    if [ -s "$log" ]; then tail -n 40 "$log" | sed 's/^/    /' >&2; else echo "    (empty)" >&2; fi
    print_summary >&2
    exit 1
  fi
  summary+=("$(printf '%-10s %-24s %5d s  ok' "$sc" "$name" "$dt")")
  echo "fresh-machine: [$((SECONDS - start)) s] $sc: $name: ok in $dt s"
}

ensure_debootstrap() {
  command -v debootstrap >/dev/null && return 0
  echo "debootstrap not found; installing it with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q && apt-get install -y -q --no-install-recommends debootstrap
}
make_cache() {  # debootstrap into a scratch folder, then save it; the tarball appears whole or not
  local scratch="$root_dir/debootstrap.partial"
  remove_root "$scratch" || return 1
  echo "debootstrap $suite ($arch, minbase) from ${mirror:-the default mirror}"
  debootstrap --variant=minbase --arch="$arch" "$suite" "$scratch" ${mirror:+"$mirror"} || return 1
  tar --numeric-owner -C "$scratch" -czf "$cache.partial" . || return 1
  mv "$cache.partial" "$cache" && rm -rf --one-file-system "$scratch"
}
# prepare_root DIR: the pristine root plus what any machine has: the host's package sources and
# name resolution, and no service started by a package (a chroot has no init to stop it).
prepare_root() {
  local r="$1" e u s comps
  mkdir -p "$r" && tar --numeric-owner -C "$r" -xzf "$cache" || return 1
  rm -f "$r/etc/resolv.conf" && cp -L /etc/resolv.conf "$r/etc/resolv.conf" || return 1
  if ((${#root_entries[@]})); then
    rm -f "$r/etc/apt/sources.list"
    for e in "${root_entries[@]}"; do
      read -r u s comps <<<"$e"
      printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: %s\n' "$u" "$s" "${comps:-main}"
      printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n'
    done >"$r/etc/apt/sources.list.d/debian.sources" || return 1
  fi
  [ -z "$acquire_conf" ] || printf '%s\n' "$acquire_conf" >"$r/etc/apt/apt.conf.d/90host-acquire"
  # The host's own certificate authorities (a TLS-inspecting proxy's, say), which any machine on
  # its network trusts: ca-certificates adds them to the bundle pip reads when bootstrap.sh
  # installs it.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$r/usr/local/share/ca-certificates" &&
      cp /usr/local/share/ca-certificates/*.crt "$r/usr/local/share/ca-certificates/" || return 1
  fi
  printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d" && chmod 755 "$r/usr/sbin/policy-rc.d"
  echo "root unpacked from $cache; apt sources:"
  cat "$r/etc/apt/sources.list" "$r"/etc/apt/sources.list.d/*.sources 2>/dev/null || true
}
# clone DIR: the host's git writes the clone, so the root has no git until bootstrap.sh.
clone() {
  local dest="$1/root/decodebench"
  git clone --no-hardlinks --no-checkout "$repo" "$dest" &&
    git -C "$dest" checkout --detach "$sha" && git -C "$dest" log -1 --format='%H %s'
}
# in_root DIR COMMAND: runs COMMAND in the clone as the root's root user, with a login's
# environment and nothing of the host's (no CUDA on PATH, no build variables).
in_root() {
  local r="$1" cmd="$2"
  chroot "$r" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb \
    LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    "${proxy_env[@]}" /bin/bash -c "cd /root/decodebench && $cmd"
}
step_log_name() { # "scripts/test.sh --quick" -> test-quick
  local n="${1#scripts/}"
  n="${n%.sh}"
  n="${n/.sh --/-}"
  echo "$n"
}

echo "fresh-machine: commit $sha; logs in $out"
[ -z "$dirty" ] || echo "fresh-machine: $dirty"
if [ ! -f "$cache" ]; then
  command -v debootstrap >/dev/null ||
    run_step host "install debootstrap" "$out/install-debootstrap.log" ensure_debootstrap
  run_step host debootstrap "$out/debootstrap.log" make_cache
else
  echo "fresh-machine: debootstrap result cached: $cache"
fi

for sc in "${scenarios[@]}"; do
  r="$root_dir/$sc"
  [ ! -e "$r" ] || run_step "$sc" "remove the last root" "$out/remove-$sc.log" remove_root "$r"
  rm -rf "${out:?}/$sc"
  mkdir -p "$out/$sc"
  current_root="$r"
  run_step "$sc" "unpack root" "$out/$sc/0-root.log" prepare_root "$r"
  run_step "$sc" "mount" "$out/$sc/1-mount.log" mount_root "$r"
  run_step "$sc" "clone" "$out/$sc/2-clone.log" clone "$r"
  n=3
  while IFS= read -r cmd; do
    run_step "$sc" "$cmd" "$out/$sc/$n-$(step_log_name "$cmd").log" in_root "$r" "$cmd"
    n=$((n + 1))
  done < <(scenario_steps "$sc")
  unmount_root "$r"
  current_root=""
  if ((keep_roots)); then
    echo "fresh-machine: kept $r"
  else
    run_step "$sc" "remove root" "$out/remove-$sc.log" remove_root "$r"
  fi
  if [ "$sc" = run-first ] && [ "$steps" = all ]; then
    # The sweep prints its table as it ends, so run.sh's end is when the table appears.
    a="${step_seconds[$sc/clone]}" b="${step_seconds[$sc/scripts/bootstrap.sh]}"
    c="${step_seconds[$sc/scripts/run.sh]}"
    first="first sweep table $((a + b + c)) s after the clone (clone $a s + bootstrap.sh $b s"
    first+=" + run.sh $c s)"
    summary+=("$first")
    echo "fresh-machine: run-first: $first"
  fi
done
print_summary
