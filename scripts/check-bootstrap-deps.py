#!/usr/bin/env python3
"""Checks that scripts/bootstrap.sh installs everything the project's configure reads.

Configures the project in a scratch build dir with CMake's JSON trace, then takes every file the
configure used: each CMake file it ran (the trace) and each file a find_* call chose (the cache's
FILEPATH entries). Every such file that a Debian package owns (dpkg -S) must belong to one of
bootstrap's packages (scripts/bootstrap.sh --list-packages --tests) or to their Depends closure
(apt-cache depends --recurse, no recommendations): a file reached only through a Recommends is
what a fresh machine installed with --no-install-recommends lacks. Files no package owns (pip's,
nvcc's, the checkout's) are not bootstrap's Debian business and are skipped.

    check-bootstrap-deps.py [--packages "p1 p2 ..."] [--work DIR] [-- CMAKE_ARGS...]

--packages replaces bootstrap's list (a test plants a missing package this way). Exit 0 when
every owned file is covered, 1 naming each file that is not and its package, 2 on bad use, 77
when this is not a Debian machine (no dpkg or apt-cache).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bootstrap_packages():
    out = subprocess.run([os.path.join(ROOT, "scripts", "bootstrap.sh"), "--list-packages",
                          "--tests"], check=True, capture_output=True, text=True).stdout
    return out.split()


def depends_closure(packages):
    """The packages and everything they depend on (pre-depends included), names only."""
    out = subprocess.run(
        ["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
         "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"] + packages,
        check=True, capture_output=True, text=True).stdout
    closure = set()
    for line in out.splitlines():
        line = line.strip()
        if not line:
            continue
        m = re.match(r"^(?:\|?(?:Pre)?Depends:\s*)?<?([^\s<>:]+)(?::\S+)?>?$", line)
        if m:
            closure.add(m.group(1))
    return closure


def configure(work, cmake_args):
    trace = os.path.join(work, "trace.json")
    build = os.path.join(work, "build")
    cmd = ["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "--trace-format=json-v1",
           "--trace-expand",
           f"--trace-redirect={trace}", "-DDECODEBENCH_CUDA=OFF"] + cmake_args
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:] + r.stderr[-4000:])
        raise SystemExit("check-bootstrap-deps: the configure failed (above); a missing package "
                         "makes it fail the same way on a fresh machine")
    files = set()
    with open(trace) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "file" in rec:
                files.add(rec["file"])
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            m = re.match(r"^[^#/][^:]*:FILEPATH=(/.+)$", line.strip())
            if m:
                files.add(m.group(1))
    return sorted(p for p in files if os.path.isfile(p))


def owners(paths):
    """path -> owning package names (empty when no package owns it)."""
    result = {p: set() for p in paths}
    # dpkg -S takes many paths at once; unowned ones only go to stderr.
    out = subprocess.run(["dpkg", "-S"] + list(paths), capture_output=True, text=True).stdout
    for line in out.splitlines():
        if ": " not in line:
            continue
        pkgs, path = line.split(": ", 1)
        if path in result:
            result[path].update(p.split(":")[0].strip() for p in pkgs.split(","))
    # A file reached through a symlinked directory (/lib -> usr/lib) is owned under its real path.
    for p in paths:
        if not result[p]:
            real = os.path.realpath(p)
            if real != p:
                out = subprocess.run(["dpkg", "-S", real], capture_output=True, text=True).stdout
                for line in out.splitlines():
                    if ": " in line:
                        result[p].update(x.split(":")[0].strip() for x in line.split(": ")[0].split(","))
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packages", help="replace bootstrap's package list (space-separated)")
    ap.add_argument("--work", help="scratch directory (default: a temporary one)")
    ap.add_argument("cmake_args", nargs="*", help="extra configure arguments (after --)")
    a = ap.parse_args()
    if not shutil.which("dpkg") or not shutil.which("apt-cache"):
        print("check-bootstrap-deps: no dpkg/apt-cache: not a Debian machine, nothing to check")
        return 77
    packages = a.packages.split() if a.packages is not None else bootstrap_packages()
    if not packages:
        print("check-bootstrap-deps: --packages is empty", file=sys.stderr)
        return 2
    work = a.work or tempfile.mkdtemp(prefix="bootstrap-deps-")
    os.makedirs(work, exist_ok=True)
    try:
        files = configure(work, a.cmake_args)
        files = [p for p in files if not p.startswith(ROOT + os.sep) and not p.startswith(work)]
        closure = depends_closure(packages)
        owned = owners(files)
        missing = [(p, sorted(o)) for p, o in owned.items() if o and not (o & closure)]
        checked = sum(1 for o in owned.values() if o)
        if missing:
            for path, pkgs in missing:
                print(f"check-bootstrap-deps: {path} (package {', '.join(pkgs)}) is read by the "
                      f"configure but no bootstrap package depends on it", file=sys.stderr)
            print(f"check-bootstrap-deps: FAIL: {len(missing)} of {checked} owned files are not "
                  f"covered by bootstrap's {len(packages)} packages; add the package to "
                  f"scripts/bootstrap.sh", file=sys.stderr)
            return 1
        print(f"check-bootstrap-deps: {checked} files the configure read belong to bootstrap's "
              f"{len(packages)} packages or their {len(closure)}-package Depends closure")
        return 0
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
