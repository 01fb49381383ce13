#!/usr/bin/env bash
# scripts/gpu-bundle.sh: builds a narrowed bundle (--smoke: one rung; --bench: the microbenchmark
# binary too, so its library travels and the ldd rule sees it), copies it elsewhere and
# runs its host-side commands from the copy in an empty environment (no GPU needed); checks the
# manifest (keys, sizes, sha256s), the size limit, the ldd rule and that nothing was compiled with
# -march=native. Each checker also gets a planted fault it must catch.
#   gpu_bundle_test.sh GPU_BUNDLE_SH WORKDIR
# WORKDIR/build is the bundle's build dir, kept between runs so a rerun is incremental.
set -euo pipefail
bundle_sh="$1"
work="$2"
max_bytes=$((48 * 1024 * 1024))

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

mkdir -p "$work"
rm -rf "$work/bundle" "$work/copy" "$work/planted"
"$bundle_sh" "$work/bundle" --smoke --bench --build-dir "$work/build"

# --- the host-side commands, from a copy, with nothing of this machine's environment ---------
copy="$work/copy"
cp -a "$work/bundle" "$copy"
run() {
  echo "+ $*" >&2
  env -i PATH="$copy/bin:/usr/bin:/bin" LD_LIBRARY_PATH="$copy/lib" HOME="$work" "$@"
}
run decodebench --help >/dev/null || fail "decodebench --help"
run decodebench devices || fail "decodebench devices"
run decodebench kernels || fail "decodebench kernels"
run decodebench check --backend cpu || fail "decodebench check --backend cpu"
run decodebench_bench --benchmark_list_tests >/dev/null || fail "decodebench_bench --benchmark_list_tests"
mapfile -t gpu_tests < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["gpu_tests"]))' "$copy/manifest.json")
((${#gpu_tests[@]})) || fail "manifest lists no gpu_tests"
for t in "${gpu_tests[@]}"; do
  run "$t" --gtest_list_tests >/dev/null || fail "$t --gtest_list_tests"
done

# decodebench reads the copy's configs/ (beside bin/), not the source tree compiled in: a model
# preset that exists only in the copy must load.
probe="$copy/configs/models/zz-bundle-probe.json"
# A dense model's preset: `decodebench model` defaults to the layer scope, which refuses MoE.
sed 's/"name": *"[^"]*"/"name": "zz-bundle-probe"/' "$copy/configs/models/llama-3.1-8b.json" >"$probe"
run decodebench model --model zz-bundle-probe >/dev/null ||
  fail "decodebench in the copy does not read the copy's configs/ ($probe)"
rm "$probe"

# --- the manifest ------------------------------------------------------------------------------
check_manifest() {  # BUNDLE: keys, and every file listed with its size and sha256 (and no other)
  python3 - "$1" <<'EOF'
import hashlib, json, os, sys
b = sys.argv[1]
m = json.load(open(os.path.join(b, "manifest.json")))
keys = ["git_sha", "git_dirty", "built_at", "host", "nvcc_version", "cxx_compiler",
        "cuda_architectures", "cpu_arch", "cmake_flags", "head_dims", "kv_dtypes", "kernels",
        "gpu_tests", "requires", "files"]
missing = [k for k in keys if k not in m]
assert not missing, f"manifest lacks {missing}"
assert m["cpu_arch"] == "x86-64-v3", m["cpu_arch"]
assert m["head_dims"] == [128] and m["kv_dtypes"] == ["f16"], (m["head_dims"], m["kv_dtypes"])
assert set(m["requires"]) == {"glibc", "glibcxx"}, m["requires"]
assert m["requires"]["glibc"].startswith("GLIBC_2."), m["requires"]
listed = {f["path"]: f for f in m["files"]}
on_disk = {os.path.relpath(os.path.join(d, n), b) for d, _, ns in os.walk(b) for n in ns} - {"manifest.json"}
assert set(listed) == on_disk, f"listed but absent: {set(listed) - on_disk}; present but unlisted: {on_disk - set(listed)}"
for p, f in listed.items():
    data = open(os.path.join(b, p), "rb").read()
    assert len(data) == f["bytes"], f"{p}: {len(data)} bytes, manifest says {f['bytes']}"
    assert hashlib.sha256(data).hexdigest() == f["sha256"], f"{p}: sha256 differs from the manifest"
for t in ["decodebench", "decodebench_bench"] + m["gpu_tests"]:
    assert f"bin/{t}" in listed, f"bin/{t} missing"
assert any(p.startswith("lib/libbenchmark.so") for p in listed), "no lib/libbenchmark.so.*"
EOF
}
check_manifest "$copy" || fail "manifest of $copy"

check_size() {  # BUNDLE LIMIT
  local bytes
  bytes="$(find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')"
  echo "bundle: $bytes bytes" >&2
  [ "$bytes" -le "$2" ]
}
check_size "$copy" "$max_bytes" || fail "bundle over 48 MiB"

no_march_native() {  # COMPILE_COMMANDS_JSON
  [ -s "$1" ] || { echo "no $1" >&2; return 1; }
  ! grep -q -- '-march=native' "$1"
}
no_march_native "$work/build/compile_commands.json" || fail "-march=native in the bundle's build"

"$bundle_sh" --check-ldd "$copy"/bin/* "$copy"/lib/* || fail "ldd rule on the bundle"

# cuBLASLt is loaded at run time from the GPU machine's toolkit or PyTorch wheel, never linked:
# no bundled binary names it in DT_NEEDED (the ldd rule would also refuse it, as not allowed).
for f in "$copy"/bin/*; do
  if readelf -d "$f" | grep -qE '\(NEEDED\).*\[libcublas'; then fail "$f links libcublas*"; fi
done

# --- planted faults: each checker must catch its own ---------------------------------------------
planted="$work/planted"
mkdir -p "$planted/bundle/bin" "$planted/bundle/lib"

# A binary that needs libfmt.so (not allowed, not in the bundle's lib/).
echo 'int main() { return 0; }' >"$planted/main.cpp"
g++ "$planted/main.cpp" -o "$planted/bundle/bin/needs_fmt" -Wl,--no-as-needed -lfmt
if out="$("$bundle_sh" --check-ldd "$planted/bundle/bin/needs_fmt" 2>&1)"; then
  fail "ldd rule passed a binary that needs libfmt.so"
fi
grep -q 'libfmt' <<<"$out" || fail "ldd rule did not name libfmt: $out"

# The bench binary without the bundle's lib/: libbenchmark is then the build machine's (or none).
cp "$copy/bin/decodebench_bench" "$planted/bundle/bin/"
if out="$("$bundle_sh" --check-ldd "$planted/bundle/bin/decodebench_bench" 2>&1)"; then
  fail "ldd rule passed decodebench_bench without lib/"
fi
grep -q 'libbenchmark' <<<"$out" || fail "ldd rule did not name libbenchmark: $out"

# A library that ldd cannot find.
echo 'int zz_probe() { return 1; }' >"$planted/zz.cpp"
g++ -shared -fPIC "$planted/zz.cpp" -o "$planted/libzzprobe.so"
g++ "$planted/main.cpp" -o "$planted/bundle/bin/needs_gone" -Wl,--no-as-needed \
  -L"$planted" -lzzprobe
rm "$planted/libzzprobe.so"
if out="$("$bundle_sh" --check-ldd "$planted/bundle/bin/needs_gone" 2>&1)"; then
  fail "ldd rule passed a binary whose library is not found"
fi
grep -q 'libzzprobe.so not found' <<<"$out" || fail "ldd rule did not report libzzprobe.so: $out"

# A file changed after the manifest was written.
echo >>"$copy/configs/devices.json"
if check_manifest "$copy" 2>/dev/null; then fail "manifest check passed a changed file"; fi

check_size "$copy" 1024 2>/dev/null && fail "size check passed a bundle over its limit"

echo '[{"command": "c++ -O2 -march=native -c x.cpp"}]' >"$planted/compile_commands.json"
no_march_native "$planted/compile_commands.json" && fail "-march=native check passed -march=native"

echo "gpu_bundle_test: ok"
