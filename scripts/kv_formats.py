#!/usr/bin/env python3
"""decodebench's KV formats as the build exports them: the one table (kernels/kv_formats.h),
written at configure time to <build>/kv_formats.json by cmake/kv_formats.cmake
("decodebench-kv-formats", version 1). Scripts read a format's facts (names, enum ordinals,
which kernels are built for it, scale axes, bytes) here instead of repeating them.

Which file: the first of
  1. --file FILE (or load(path=...)),
  2. $DECODEBENCH_KV_FORMATS,
  3. kv_formats.json in the folder of --near PATH or a folder above it (a build's binary or
     library, a GPU bundle's bin/decodebench: gpu-bundle.sh copies it into the bundle),
  4. build/kv_formats.json at the repository root,
  5. the table itself (--source, or when none of the above exists): kernels/kv_formats_export.cpp
     compiled with $CXX (else c++) and run.

  python3 scripts/kv_formats.py [--file F | --near PATH | --source] names
          [--ladder all|int_kv|none] [--float | --integer] [--sep SEP]
      the names, in enum order, joined by SEP (default ",")
  python3 scripts/kv_formats.py [...] sed-ordinals
      sed expressions rewriting "(decodebench::DType)N" into the name of ordinal N
  python3 scripts/kv_formats.py [...] path
      the file it reads (or "source")
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
FILE_NAME = "kv_formats.json"
KIND = "decodebench-kv-formats"


class KvFormatsError(Exception):
    pass


def find(near: Optional[str] = None) -> Optional[str]:
    """The export to read (steps 2 to 4 above), or None."""
    env = os.environ.get("DECODEBENCH_KV_FORMATS")
    if env:
        if not os.path.isfile(env):
            raise KvFormatsError(f"DECODEBENCH_KV_FORMATS={env}: no such file")
        return env
    if near:
        d = os.path.abspath(near)
        if not os.path.isdir(d):
            d = os.path.dirname(d)
        while True:
            candidate = os.path.join(d, FILE_NAME)
            if os.path.isfile(candidate):
                return candidate
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    candidate = os.path.join(REPO, "build", FILE_NAME)
    return candidate if os.path.isfile(candidate) else None


def from_source() -> dict:
    """The table itself: kernels/kv_formats_export.cpp compiled and run (step 5 above)."""
    src = os.path.join(REPO, "kernels", "kv_formats_export.cpp")
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not os.path.isfile(src) or not cxx:
        raise KvFormatsError(
            f"no {FILE_NAME} (configure a build: cmake -S . -B build, or set "
            "DECODEBENCH_KV_FORMATS) and no C++ compiler to read kernels/kv_formats.h with")
    with tempfile.TemporaryDirectory(prefix="kv-formats-") as d:
        exe = os.path.join(d, "kv_formats_export")
        done = subprocess.run([cxx, "-std=c++17", "-I", os.path.join(REPO, "kernels"), src, "-o",
                               exe], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise KvFormatsError(f"{cxx} {src} failed:\n{done.stdout[-2000:]}")
        out = subprocess.run([exe], stdout=subprocess.PIPE, text=True, check=True).stdout
    return parse(out, "kernels/kv_formats_export.cpp")


def parse(text: str, where: str) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise KvFormatsError(f"{where}: not JSON: {e}") from e
    if data.get("kind") != KIND or data.get("version") != 1 or not data.get("formats"):
        raise KvFormatsError(f"{where}: not a {KIND} version 1 file with formats")
    return data


def load(path: Optional[str] = None, near: Optional[str] = None, source: bool = False) -> dict:
    """The export as a dict: {"formats": [{"name", "ordinal", "aliases", "float", "code_bits",
    "signed_codes", "ladder", "k", "v"}, ...], ...}."""
    if not source:
        path = path or find(near)
    if not path:
        return from_source()
    with open(path, encoding="utf-8") as f:
        return parse(f.read(), path)


def names(data: dict, ladder: Optional[str] = None, is_float: Optional[bool] = None) -> list[str]:
    """The formats' names in enum order, those built for `ladder` ("all", "int_kv", "none") and
    of the kind `is_float` only, when given."""
    return [f["name"] for f in data["formats"]
            if (ladder is None or f["ladder"] == ladder)
            and (is_float is None or f["float"] == is_float)]


def bytes_per_token_head(fmt: dict, tensor: str, head_dim: int, block_size: int) -> float:
    """Bytes the cache holds per token and KV head for tensor "k" or "v" (the byte model)."""
    m = fmt[tensor]["bytes_per_token_head"]
    per_block = m["per_d_over_block"] * head_dim / block_size if m["per_d_over_block"] else 0.0
    return m["per_d"] * head_dim + per_block + m["per_row"]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--file", help="the kv_formats.json to read")
    where.add_argument("--near", help="a file or folder of a build or bundle to look from")
    where.add_argument("--source", action="store_true", help="read kernels/kv_formats.h itself")
    sub = ap.add_subparsers(dest="command", required=True)
    n = sub.add_parser("names")
    n.add_argument("--ladder", choices=("all", "int_kv", "none"))
    kind = n.add_mutually_exclusive_group()
    kind.add_argument("--float", dest="is_float", action="store_const", const=True)
    kind.add_argument("--integer", dest="is_float", action="store_const", const=False)
    n.add_argument("--sep", default=",")
    sub.add_parser("sed-ordinals")
    sub.add_parser("path")
    a = ap.parse_args(argv)
    try:
        if a.command == "path":
            print("source" if a.source else (a.file or find(a.near) or "source"))
            return 0
        data = load(a.file, a.near, a.source)
    except (OSError, KvFormatsError) as e:
        print(f"kv_formats: {e}", file=sys.stderr)
        return 2
    if a.command == "names":
        print(a.sep.join(names(data, a.ladder, a.is_float)))
    else:
        for f in data["formats"]:
            print(f"s/\\(decodebench::DType\\){f['ordinal']}\\b/{f['name']}/g")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
