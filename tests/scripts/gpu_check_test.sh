#!/usr/bin/env bash
# The GPU check (scripts/gpu-check.sh --bundle) on a fake GPU machine: a fake bundle (a
# decodebench that logs its arguments and writes plausible reports, fake test binaries, a
# manifest with the right sha256s) and fake nvidia-smi and ncu on PATH, plus package managers,
# cmake and network tools that record being called. It must
#   run the steps in order, call no package manager, build tool or network tool, leave every log
#   and report flat in OUTDIR and print the summary last, naming each step (exit 0; the last
#   sweep stopped by the budget is "partial");
# and catch, each planted alone:
#   a bundle file changed after the manifest (exit 2 before any GPU step, naming the file);
#   a bundle built for another architecture (exit 2, naming both);
#   a failing `check` (exit 1, the later steps still run);
#   ncu missing, or not allowed to read the counters (those steps FAIL with the reason, rest ok);
#   no cuBLASLt on the GPU machine (the layer points skipped: the check passes, the summary gives
#   the reason once), or too slow for the budget ("partial", its finished points kept);
#   eager timing far slower than the CUDA graph of the same point (the gap called large), and a
#   row a self-check flagged (listed with its reason, left out of the target figures).
# The layer step (a cut of configs/sweeps/knee.json) is checked for its flags, its outputs and its
# summary section: per kernel and hit rate the batch-1 step's % of copy roof and the knee.
# Then scripts/ncu-bytes.py on canned ncu CSVs and reports: the join and its ratio, and a clear
# error for a report without its point, kernels of another rung, a missing or empty CSV.
#   gpu_check_test.sh GPU_CHECK NCU_BYTES WORKDIR
set -euo pipefail
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
check="$(abs "$1")" ncu_bytes="$(abs "$2")" work="$3"
configs="$(cd "$(dirname "$check")/../configs" && pwd)"
rm -rf "$work"
mkdir -p "$work"
cd "$work"

failures=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*" >&2; failures=$((failures + 1)); }

# --- fake tools ------------------------------------------------------------------------------
mkdir -p tools ncu-tools
for t in apt apt-get pip pip3 cmake ctest nvcc curl wget; do
  cat >"tools/$t" <<'EOF'
#!/usr/bin/env bash
echo "$(basename "$0") $*" >>"$FAKE_FORBIDDEN"
exit 1
EOF
done
cat >tools/nvidia-smi <<'EOF'
#!/usr/bin/env bash
echo "nvidia-smi $*" >>"$FAKE_CALLS"
case "$*" in
  *--query-gpu=compute_cap*) echo "${FAKE_CAP:-9.0}" ;;
  *--query-gpu=name*) echo "NVIDIA H200" ;;
  *-q*) printf '==============NVSMI LOG==============\nProduct Name : NVIDIA H200\n' ;;
  *) exit 1 ;;
esac
EOF
# ncu: runs the application, then writes the CSV of --log-file from the point's report (the rung
# it ran, its bytes.min), as `--csv --page raw --print-units base` would.
cat >ncu-tools/ncu <<'EOF'
#!/usr/bin/env python3
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write("ncu " + " ".join(args) + "\n")
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.0.0 (fake)")
    sys.exit(0)
log = args[args.index("--log-file") + 1]
app = next(i for i, a in enumerate(args) if a.endswith("/bin/decodebench"))
if os.environ.get("FAKE_NCU_PERM"):
    subprocess.run(args[app:])
    with open(log, "w") as f:
        f.write("==PROF== Connected to process 4242\n==ERROR== ERR_NVGPUCTRPERM - The user does "
                "not have permission to access NVIDIA GPU Performance Counters on the target "
                "device 0.\n")
    sys.exit(1)
rc = subprocess.run(args[app:]).returncode
out = args[args.index("--out", app) + 1]
p = json.load(open(out))["results"][0]
ns = "void decodebench::kernels::cuda::paged_decode::"
if p["kernel"] == "split_kv":
    step = [(ns + "split_kv_detail::split_kernel<(decodebench::kernels::KvDtype)0, 128, 4>"
             "(decodebench::kernels::PagedDecodeParams)", 1.0),
            (ns + "split_kv_detail::merge_kernel<128>(decodebench::kernels::PagedDecodeParams)", 0.02)]
else:
    k = p["kernel"]
    step = [(ns + f"{k}_detail::{k}_kernel<(decodebench::kernels::KvDtype)0, 128, 4>"
             "(decodebench::kernels::PagedDecodeParams)", 1.02)]
launches = (step * 4)[:4]
cols = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
        "Block Size", "Grid Size", "Device", "CC", "dram__bytes_read.sum",
        "lts__t_sector_hit_rate.pct", "sm__inst_issued.avg.pct_of_peak_sustained_active"]
units = [""] * 11 + ["byte", "%", "%"]
q = lambda row: ",".join('"' + str(c) + '"' for c in row)
with open(log, "w") as f:
    f.write("==PROF== Connected to process 4242 (decodebench)\n")
    f.write(q(cols) + "\n" + q(units) + "\n")
    for i, (name, share) in enumerate(launches):
        f.write(q([i, 4242, "decodebench", "127.0.0.1", name, 1, 7, "(128, 1, 1)", "(8, 64, 1)",
                   0, "9.0", f"{p['bytes']['min'] * share:,.0f}", "3.25", "11.5"]) + "\n")
    f.write("==PROF== Disconnected from process 4242\n")
sys.exit(rc)
EOF
chmod +x tools/* ncu-tools/*

# --- a fake bundle ---------------------------------------------------------------------------
cat >fake-decodebench <<'EOF'
#!/usr/bin/env python3
import json, os, signal, sys, time
# Like the real binary, stop on SIGINT even when started with it ignored (a background job
# inherits SIG_IGN, and Python then never raises KeyboardInterrupt).
signal.signal(signal.SIGINT, signal.default_int_handler)
args = sys.argv[1:]
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write("decodebench " + " ".join(args) + "\n")
if not os.environ.get("DECODEBENCH_CONFIGS", "").endswith("/bundle/configs"):
    sys.exit("DECODEBENCH_CONFIGS is not the bundle's configs/: "
             + os.environ.get("DECODEBENCH_CONFIGS", "(unset)"))
cmd = args[0]
opt = lambda name, default=None: args[args.index(name) + 1] if name in args else default
copy = 4.0e12
device = {"backend": "cuda", "name": "NVIDIA H200", "sm_count": 132,
          "bandwidth": {"datasheet": 4.8e12, "theoretical": 4.9e12,
                        "measured": {"read": 4.3e12, "copy": copy, "triad": 4.1e12,
                                     "buffer_bytes": 1 << 31}}}
# ceilings' JSON alone carries the links: a datasheet row and a measured one.
ceilings_json = dict(device, links=[
    {"key": "pcie-gen5-x16", "name": "PCIe 5.0 x16", "to_device_Bps": 6.4e10,
     "to_host_Bps": 6.4e10, "kind": "datasheet", "source": "PCI-SIG"},
    {"name": "pinned host -> device, cudaMemcpyAsync", "direction": "to_device",
     "kind": "measured", "best_Bps": 5.5e10, "overhead_s": 9e-6,
     "by_size": [{"bytes": 65536, "Bps": 6.0e9}, {"bytes": 268435456, "Bps": 5.5e10}]}])

def point(model, kernel, requested, kv, batch, ctx, hq=32, hkv=8):
    bytes_min = batch * ctx * hkv * 128 * 2 * (2 if kv == "f16" else 1) + 1e6
    t = bytes_min / (0.93 * copy) * (4 if kernel == "naive" else 1)
    return {"kernel": kernel, "kernel_requested": requested, "backend": "cuda", "model": model,
            "model_shape": {"num_q_heads": hq, "num_kv_heads": hkv, "head_dim": 128,
                            "num_layers": 32},
            "kv_dtype": kv, "q_dtype": "f16", "block_size": 16, "batch": batch,
            "context": {"kind": "fixed", "values": [ctx]}, "hit_rate": 0, "status": "ok",
            "reason": "", "time_s": {"median": t},
            "bytes": {"kv_logical": bytes_min - 1e6, "kv_unique": bytes_min - 1e6,
                      "min": bytes_min},
            "bandwidth": {"achieved": bytes_min / t}, "tokens_per_s": batch / (t * 32)}

def report(results, planned=None, state="complete", knees=(), dev=device):
    return {"schema_version": 1, "devices": [dev], "results": results, "knees": list(knees),
            "completion": {"state": state, "reason": "",
                           "points_planned": planned or len(results)}}

# A layer point of llama-3.1-8b (bf16 weights and KV): every stage memory-bound at 85 % of the
# copy ceiling unless its FLOPs at 70 % of the tensor peak take longer, attention reading the
# logical KV bytes (tc) or only the unique ones (cascade). So an ok batch-1 point is at 85.0 %
# of its copy roof.
gemm_peak = 989e12
no_cublaslt = ("cuBLASLt not found (libcublasLt.so.12: not in CUDA_HOME, /usr/local/cuda/lib64 "
               "or python3's nvidia-cublas package); the layer scope needs it, the attention scope "
               "runs without")
def layer_point(kernel, batch, ctx, h):
    per_seq = ctx * 8 * 128 * 2 * 2
    shared = per_seq * h if batch > 1 else 0
    kv_logical, kv_unique = batch * per_seq, batch * per_seq - (batch - 1) * shared
    r = point("llama-3.1-8b", kernel, kernel, "bf16", batch, ctx)
    r.update(scope="layer", q_dtype="bf16", hit_rate=h, prefix_groups=1)
    if os.environ.get("FAKE_NO_CUBLASLT"):
        r.update(status="skipped", reason=no_cublaslt, time_s={"median": None},
                 bandwidth={"achieved": None}, tokens_per_s=None, layer=None,
                 roofline={"fraction_measured": None})
        return r
    shapes = [("qkv_proj", 6144, 4096), ("attention", 0, 0), ("o_proj", 4096, 4096),
              ("gate_up_proj", 28672, 4096), ("down_proj", 4096, 14336),
              ("lm_head", 128256, 4096)]
    stages, wbytes, abytes, wflops, roof = [], 0, 0, 0, 0
    for name, n, k in shapes:
        if name == "attention":
            b, fl = kv_unique, 4 * batch * 32 * ctx * 128
            t = (kv_unique if kernel == "cascade" else kv_logical) / (0.85 * copy)
        else:
            b, fl = 2 * (n * k + batch * (n + k)), 2 * batch * n * k
            t = max(b / (0.85 * copy), fl / (0.7 * gemm_peak))
        t_roof = max(b / device["bandwidth"]["measured"]["read"], fl / gemm_peak)
        stages.append({"name": name, "m": batch, "n": n, "k": k, "bytes": b, "flops": fl,
                       "time_s": {"median": t, "min": t, "max": t, "p10": t, "p90": t,
                                  "mean": t, "rel_noise": 0.002, "samples": 10},
                       "t_roof_s": t_roof, "max_rel_error": 1e-3})
        if name not in ("attention", "lm_head"):
            wbytes, abytes, wflops = wbytes + 2 * n * k, abytes + b - 2 * n * k, wflops + fl
        if name != "lm_head":
            roof += t_roof
    t_w = sum(st["time_s"]["median"] for st in stages if st["name"] not in ("attention", "lm_head"))
    t_kv, t_lm = stages[1]["time_s"]["median"], stages[-1]["time_s"]["median"]
    t = t_w + t_kv
    b_min = wbytes + abytes + kv_unique
    r.update(time_s={"median": t, "min": t, "max": t, "p10": t, "p90": t, "mean": t,
                     "rel_noise": 0.002, "samples": 10},
             bytes={"kv_logical": kv_logical, "kv_unique": kv_unique, "min": b_min},
             flops=wflops + stages[1]["flops"], bandwidth={"achieved": b_min / t},
             roofline={"bound": "memory", "t_roof_s": roof, "fraction_measured": roof / t},
             tokens_per_s=batch / (t * 32),
             tokens_per_s_scope="the model's layers: batch / (median layer step time * "
                                "num_layers), LM head not included")
    r["layer"] = {
        "weights_dtype": "bf16",
        "gemm_library": "cuBLASLt 12.4.5 (/usr/local/cuda/lib64/libcublasLt.so.12)",
        "left_out": ["rms_norm", "rotary", "residual_add"], "stages": stages,
        "bytes": {"weights": wbytes, "kv": kv_unique, "activations": abytes},
        "flops": {"weights": wflops, "attention": stages[1]["flops"]},
        "time_s": {"weights": t_w, "kv": t_kv},
        "gemm_ceiling": {"unit": "tensor_core", "name": "tensor-core bf16 (datasheet)",
                         "flops": gemm_peak},
        "tokens_per_s_with_lm_head": batch / (t * 32 + t_lm)}
    return r

def layer_knees(res):
    """The report's knees of the ok layer points: the smallest batch at >= 90 % of the series'
    largest tokens/s."""
    series = {}
    for r in res:
        if r["status"] == "ok":
            series.setdefault((r["kernel"], r["hit_rate"]), []).append(r)
    knees = []
    for (kernel, h), rs in sorted(series.items()):
        rs.sort(key=lambda r: r["batch"])
        tps = [r["tokens_per_s"] for r in rs]
        if len(rs) < 2:
            continue
        i = next(i for i, v in enumerate(tps) if v >= 0.9 * max(tps))
        top = max(range(len(rs)), key=lambda j: rs[j]["bandwidth"]["achieved"])
        lb = rs[i]["layer"]["bytes"]
        knees.append({
            "scope": "layer", "metric": "tokens_per_s", "model": "llama-3.1-8b", "kernel": kernel,
            "weights_dtype": "bf16", "kv_dtype": "bf16", "q_dtype": "bf16", "block_size": 16,
            "context": rs[i]["context"], "hit_rate": h, "prefix_groups": 1,
            "knee_batch": rs[i]["batch"], "knee_bandwidth": rs[i]["bandwidth"]["achieved"],
            "max_bandwidth": rs[top]["bandwidth"]["achieved"], "max_batch": rs[top]["batch"],
            "batches": [r["batch"] for r in rs],
            "bandwidth": [r["bandwidth"]["achieved"] for r in rs],
            "plateau_tokens_per_s": max(tps), "knee_tokens_per_s": tps[i], "tokens_per_s": tps,
            "weight_bytes_share_at_knee": lb["weights"] / (lb["weights"] + lb["kv"]),
            "kv_bytes_share_at_knee": lb["kv"] / (lb["weights"] + lb["kv"])})
    return knees

def write(path, obj):
    if path:
        with open(path, "w") as f:
            json.dump(obj, f, indent=1)

rungs = ["naive", "gqa", "pipelined", "split_kv"]
if cmd == "devices":
    print("Backends in this build:\n  cuda   usable     NVIDIA H200")
elif cmd == "check":
    bad = bool(os.environ.get("FAKE_FAIL_CHECK"))
    res = [dict(point("llama-3.1-8b", k, k, "f16", 7, 97), status="wrong" if bad else "ok")
           for k in rungs]
    write(opt("--out"), report(res))
    print("check: " + ("1 wrong" if bad else "all ok"))
    sys.exit(1 if bad else 0)
elif cmd == "ceilings":
    write(opt("--out"), ceilings_json)
    print(json.dumps(ceilings_json))
elif cmd == "kernels" and "--static" in args:
    write(opt("--out"), {"instances": [
        {"rung": "pipelined", "kernel": "pipelined_kernel", "kv_dtype": "f16", "head_dim": 128,
         "group_cap": 4, "main_loop": {"issue_bound_bandwidth": {"h200": 4.7e12}}},
        {"rung": "pipelined", "kernel": "pipelined_kernel", "kv_dtype": "f16", "head_dim": 128,
         "group_cap": 8, "main_loop": {"issue_bound_bandwidth": {"h200": 3.0e12}}}]})
    print("static model: 0 instances")
elif cmd == "sweep":
    config = os.path.basename(opt("--config", ""))
    print(f"kernel model ... (the results table of {config})", flush=True)
    if config == "prefix.json":  # the cut: batch 16/64 x 8k x h 0/0.9, unaware rungs + cascade
        res = []
        for b in (16, 64):
            for h in (0, 0.9):
                for k in ("split_kv", "tc", "cascade"):
                    r = point("llama-3.1-8b", k, k, "f16", b, 8192)
                    r["hit_rate"], r["prefix_groups"] = h, 1
                    if k == "cascade" and h:  # reads a tenth of the private bytes
                        r["tokens_per_s"] *= 4
                    res.append(r)
        write(opt("--out"), report(res))
    elif config == "knee.json":  # the cut: the axes as given, tc and cascade
        res = [layer_point(k, int(b), int(opt("--context")), float(h))
               for b in opt("--batch").split(",") for h in opt("--hit-rate").split(",")
               for k in ("tc", "cascade")]
        dev = dict(device, gemm_ceiling=None if os.environ.get("FAKE_NO_CUBLASLT") else
                   {"flops": gemm_peak, "name": "tensor-core bf16 (datasheet)"})
        write(opt("--out"), report(res, knees=layer_knees(res), dev=dev))
        try:  # a slow machine: the budget stops it, the finished points stay
            time.sleep(float(os.environ.get("FAKE_LAYER_SLEEP", "0")))
        except KeyboardInterrupt:
            write(opt("--out"), report(res, planned=40, state="interrupted",
                                       knees=layer_knees(res), dev=dev))
            sys.exit(130)
    elif "int4" in opt("--kv-dtype", ""):  # the int-kv cut: f16 and the integer formats at b64 x 8k
        res = []
        for k in opt("--kernel").split(","):
            for kv in opt("--kv-dtype").split(","):
                r = point("llama-3.1-8b", k, k, "f16", 64, 8192)
                r["kv_dtype"] = kv
                r["tokens_per_s"] *= {"f16": 1, "int8": 1.9, "int4": 2.5}.get(kv, 2.0)
                res.append(r)
        write(opt("--out"), report(res))
    elif opt("--timing"):  # graph against eager: one warm point, eager FAKE_EAGER_GAP slower
        r = point("llama-3.1-8b", "split_kv", "auto", "f16", int(opt("--batch")),
                  int(opt("--context")))
        eager = opt("--timing") == "eager"
        t = r["time_s"]["median"] * (float(os.environ.get("FAKE_EAGER_GAP", "1.03")) if eager
                                     else 1)
        r.update(time_s={"median": t}, bandwidth={"achieved": r["bytes"]["min"] / t},
                 timing={"method": "events_back_to_back" if eager else "graph_replay",
                         "steps_per_sample": 100, "l2": "warm"})
        write(opt("--out"), report([r]))
    elif opt("--kernel") == "mla":  # the mla step: its models, batches and formats as given
        res = []
        for m in opt("--model").split(","):
            for b in opt("--batch").split(","):
                for kv in opt("--kv-dtype").split(","):
                    r = point(m, "mla", "mla", kv, int(b), int(opt("--context")),
                              hq=128 if m == "deepseek-v3" else 16, hkv=1)
                    r["roofline"] = {"bound": "tc" if m == "deepseek-v3" else "mem"}
                    res.append(r)
        write(opt("--out"), report(res))
    elif opt("--batch"):  # one point, as the ncu steps ask
        b, ctx = int(opt("--batch")), int(opt("--context"))
        k = "split_kv" if b == 1 else "pipelined"
        write(opt("--out"), report([point("llama-3.1-8b", k, "auto", "f16", b, ctx)]))
    elif config == "gpu-targets.json":
        res = []
        for b in (1, 64):
            for ctx in (8192, 32768):
                for kv in ("f16", "fp8_e4m3"):
                    auto = "split_kv" if b == 1 else "pipelined"
                    res.append(point("llama-3.1-8b", auto, "auto", kv, b, ctx))
                    res += [point("llama-3.1-8b", k, k, kv, b, ctx) for k in rungs]
        if os.environ.get("FAKE_FLAGGED"):  # the b=64 x 8k f16 auto point claims 6 TB/s
            r = next(r for r in res if r["batch"] == 64 and r["context"]["values"] == [8192]
                     and r["kv_dtype"] == "f16" and r["kernel_requested"] == "auto")
            r["bandwidth"]["achieved"] = 6.0e12
            r["flags"] = [{"name": "above_datasheet",
                           "reason": "achieved 6.00 TB/s exceeds the NVIDIA H200 datasheet "
                                     "4.80 TB/s (by more than 5 %): not a result"}]
        write(opt("--out"), report(res))
    elif config == "gpu-check.json":
        res = [point("llama-3.1-70b", k, k, "f16", 8, 8192, hq=64) for k in ("naive", "gqa")]
        write(opt("--out"), report(res, planned=192))
        try:  # the long tail: runs until the budget interrupts it, keeping what it finished
            time.sleep(float(os.environ.get("FAKE_SWEEP_SLEEP", "0")))
        except KeyboardInterrupt:
            write(opt("--out"), report(res, planned=192, state="interrupted"))
            print("interrupted: 2 finished points kept", file=sys.stderr)
            sys.exit(130)
    else:
        sys.exit(f"fake decodebench: unexpected sweep config '{config}'")
elif cmd == "replay":  # the trace and tiers cuts: a report with its replay section, one setting
    # per pool and host capacity
    res = [dict(layer_point(k, 8, 8192, 0), context={"kind": "ragged", "values": [512, 8192]})
           for k in ("tc", "cascade")]
    out = report(res)
    def schedule(host):
        if not host:
            return {"hit_rate": 0.039}
        return {"hit_rate": 0.178, "tiers": {
            "host_capacity_tokens": host, "hit_rate_by_tier": {"hbm": 0.039, "host": 0.139},
            "link_busy_fraction": {"to_hbm": 0.021, "to_host": 0.19}}}
    out["replay"] = {"trace": {"source": opt("--config", "")}, "settings": [
        {"setting": {"kv_pool_bytes": float(p)}, "schedule": schedule(float(h)), "kernels": []}
        for p in opt("--kv-pool", "").split(",")
        for h in opt("--host-capacity", "0").split(",")]}
    write(opt("--out"), out)
    print("replay: the operator's table")
else:
    sys.exit(f"fake decodebench: unexpected command {cmd}")
EOF
cat >fake-test <<'EOF'
#!/usr/bin/env bash
echo "$(basename "$0") $* CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}" >>"$FAKE_CALLS"
for a in "$@"; do
  case "$a" in --gtest_output=xml:*)
    echo '<testsuites tests="5" failures="0" disabled="0" errors="0" name="AllTests"/>' \
      >"${a#--gtest_output=xml:}" ;;
  esac
done
echo "[  PASSED  ] 5 tests."
EOF

# make_bundle DIR [ARCH]: a bundle in the layout of scripts/gpu-bundle.sh, for ARCH (default 90a).
make_bundle() {
  local dir="$1" arch="${2:-90a}"
  rm -rf "$dir"
  mkdir -p "$dir/bin" "$dir/lib"
  install -m 755 fake-decodebench "$dir/bin/decodebench"
  install -m 755 fake-test "$dir/bin/cuda_backend_tests"
  install -m 755 fake-test "$dir/bin/cuda_plan_tests"
  printf '#!/usr/bin/env bash\nexit 0\n' >"$dir/bin/decodebench_bench"
  chmod +x "$dir/bin/decodebench_bench"
  printf 'not really a shared object\n' >"$dir/lib/libfmt.so.9"
  cp -r "$configs" "$dir/configs"
  cp "${DECODEBENCH_KV_FORMATS:?set to the kv_formats.json of the build}" "$dir/kv_formats.json"
  # knee.json as the repository has it; a stand-in of its axes where this checkout has none yet.
  [ -f "$dir/configs/sweeps/knee.json" ] || cat >"$dir/configs/sweeps/knee.json" <<'JSON'
{"name": "knee", "model": ["llama-3.1-8b"], "scope": ["layer"],
 "batch": [1, 2, 4, 8, 16, 32, 64, 128, 256], "context": [1024, 4096, 16384, 32768],
 "hit_rate": [0, 0.9], "prefix_groups": [1], "kv_dtype": ["bf16"], "q_dtype": ["bf16"],
 "block_size": [16], "kernel": ["tc", "cascade"], "backend": "cuda", "weights_dtype": "bf16"}
JSON
  python3 - "$dir" "$arch" <<'PY'
import hashlib, json, os, sys
root, arch = sys.argv[1], sys.argv[2]
files = []
for d, _, names in sorted(os.walk(root)):
    for n in sorted(names):
        p = os.path.join(d, n)
        data = open(p, "rb").read()
        files.append({"path": os.path.relpath(p, root), "bytes": len(data),
                      "sha256": hashlib.sha256(data).hexdigest()})
m = {"git_sha": "abc1234", "git_dirty": False, "built_at": "2026-12-02T10:00:00Z",
     "nvcc_version": "13.0", "cuda_architectures": [arch], "head_dims": [64, 128, 256],
     "kv_dtypes": ["f16", "bf16", "fp8_e4m3", "fp8_e5m2"],
     "kernels": ["naive", "gqa", "pipelined", "split_kv"],
     "gpu_tests": ["cuda_backend_tests", "cuda_plan_tests"], "files": files}
json.dump(m, open(os.path.join(root, "manifest.json"), "w"), indent=1)
PY
}

# run NAME [ENV=VALUE ...] -- ARGS...: runs gpu-check in scratch dir NAME with the fakes on PATH;
# leaves NAME/out.txt (stdout and stderr), NAME/calls.log, NAME/forbidden.log, NAME/rc.
run() {
  local name="$1"
  shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  mkdir -p "$name"
  : >"$name/calls.log"
  : >"$name/forbidden.log"
  local rc=0
  # Started with SIGINT ignored, as a background job or a CI runner may start it: the budget's
  # SIGINT must still stop a step, so the verdict does not depend on how this test was started.
  (trap '' INT; exec env -u NCU PATH="$work/tools:$work/ncu-tools:$PATH" \
    FAKE_CALLS="$work/$name/calls.log" FAKE_FORBIDDEN="$work/$name/forbidden.log" "${envs[@]}" \
    bash "$check" "$@") >"$name/out.txt" 2>&1 || rc=$?
  echo "$rc" >"$name/rc"
}
rc_is() {  # rc_is NAME WANT
  local got
  got="$(cat "$1/rc")"
  if [ "$got" = "$2" ]; then ok "$1: exit $got"; else
    bad "$1: exit $got, want $2; output:"; sed 's/^/    /' "$1/out.txt" >&2
  fi
}
has() {  # has NAME FILE PATTERN WHAT
  if grep -Eq -- "$3" "$1/$2"; then ok "$1: $4"; else
    bad "$1: $4: $2 should match /$3/:"; sed 's/^/    /' "$1/$2" >&2
  fi
}
lacks() {  # lacks NAME FILE PATTERN WHAT
  if grep -Eq -- "$3" "$1/$2"; then
    bad "$1: $4: $2 matches /$3/:"; grep -E -- "$3" "$1/$2" | sed 's/^/    /' >&2
  else ok "$1: $4"; fi
}
# step_is NAME STEP STATUS: the summary's line for STEP has STATUS.
step_is() { has "$1" out.txt "^$2 +$3 " "summary: $2 $3"; }

# --- the whole run, clean --------------------------------------------------------------------
make_bundle bundle
t0=$SECONDS
run clean FAKE_SWEEP_SLEEP=300 -- --bundle bundle clean/out --budget 50
took=$((SECONDS - t0))
rc_is clean 0
# The long tail runs until the budget stops it; the whole run stays within the budget.
if [ "$took" -le 50 ]; then ok "clean: done in ${took}s, within the 50s budget"; else
  bad "clean: took ${took}s, over the 50s budget"
fi
# The order of the steps, from what the fakes were asked (the nvidia-smi queries left out).
order="$(sed -E -n \
  -e 's/^nvidia-smi -q.*/smi/p' \
  -e 's/^decodebench (devices|check|ceilings).*/\1/p' \
  -e 's/^decodebench kernels --static.*/static-model/p' \
  -e 's/^decodebench sweep .*prefix.json.*/prefix/p' \
  -e 's/^decodebench sweep .*knee.json.*/layer/p' \
  -e 's/^decodebench replay .*trace.json.*/trace/p' \
  -e 's/^decodebench replay .*tiers.json.*/tiers/p' \
  -e 's/^decodebench sweep .*gpu-targets.json .*--kv-dtype f16,int.*/int-kv/p' \
  -e 's/^decodebench sweep .*gpu-targets.json .*--kernel mla.*/mla/p' \
  -e 's/^decodebench sweep .*--timing (graph|eager).*/timing-\1/p' \
  -e 's/^decodebench sweep .*--batch ([0-9]+).*/ncu-run-\1/p' \
  -e 's/^decodebench sweep .*gpu-targets.json.*/targets/p' \
  -e 's/^decodebench sweep .*gpu-check.json.*/sweep/p' \
  -e 's/^ncu --version.*/ncu-version/p' \
  -e 's/^ncu .*--batch ([0-9]+).*/ncu-\1/p' \
  -e 's/^(cuda_[a-z_]+tests) .*CUDA_VISIBLE_DEVICES=0$/\1/p' clean/calls.log | tr '\n' ' ')"
want="smi devices check ceilings targets timing-graph timing-eager int-kv mla prefix layer trace tiers ncu-version ncu-64 ncu-run-64 ncu-1 ncu-run-1"
want+=" cuda_backend_tests cuda_plan_tests static-model sweep smi "
if [ "$order" = "$want" ]; then ok "clean: steps in order"; else
  bad "clean: steps ran as '$order', want '$want'"
fi
if [ -s clean/forbidden.log ]; then
  bad "clean: called a package manager, build or network tool:"; sed 's/^/    /' clean/forbidden.log >&2
else ok "clean: no package manager, cmake, nvcc, curl or wget called"; fi
has clean calls.log '^decodebench sweep .*gpu-targets.json --ceilings .*/ceilings.json' \
  "the target sweep reuses the measured ceilings"
# The int-kv step: the target sweep cut to b64 x 8k, f16 and the integer formats, tc and cascade.
want='^decodebench sweep --backend cuda --device 0 --config [^ ]*/bundle/configs/sweeps/gpu-targets\.json'
want+=' --batch 64 --context 8192 --kv-dtype f16,int8,int4,int4_token --kernel tc,cascade'
want+=' --ceilings [^ ]*/clean/out/ceilings\.json --out [^ ]*/clean/out/int-kv\.json$'
has clean calls.log "$want" "the int-kv step runs the target point with the integer formats"
# The layer step: the cut of knee.json (its own axes otherwise), the same ceilings, layer.json.
want='^decodebench sweep --backend cuda --device 0 --config [^ ]*/bundle/configs/sweeps/knee\.json'
want+=' --batch 1,4,16,64,256 --context 8192 --hit-rate 0,0\.9'
want+=' --ceilings [^ ]*/clean/out/ceilings\.json --out [^ ]*/clean/out/layer\.json$'
has clean calls.log "$want" \
  "the layer step runs knee.json cut to batch 1-256 x 8k x h 0/0.9, with the ceilings"
has clean out.txt 'run  layer \(up to [0-9]+s\)' "the layer step is announced"
# The trace step: the replay of trace.json cut to two pools and lru, its report in OUTDIR.
want='^decodebench replay --backend cuda --device 0 --config [^ ]*/bundle/configs/sweeps/trace\.json'
want+=' --kv-pool 60e9,120e9 --policy lru --sample-steps 4 --out [^ ]*/clean/out/trace\.json$'
has clean calls.log "$want" "the trace step replays trace.json cut to two pools, lru"
has clean out/steps.tsv '^trace'$'\t''ok'$'\t' "steps.tsv: the trace step"
# The tiers step: tiers.json cut to the 16 GB pool with and without the host tier, PCIe Gen5.
want='^decodebench replay --backend cuda --device 0 --config [^ ]*/bundle/configs/sweeps/tiers\.json'
want+=' --kv-pool 16e9 --host-capacity 0,4e6 --link pcie-gen5-x16 --reload-policy always'
want+=' --kv-dtype bf16 --out [^ ]*/clean/out/tiers\.json$'
has clean calls.log "$want" "the tiers step replays tiers.json cut to one pool, host 0/4M"
has clean out/steps.tsv '^layer'$'\t''ok'$'\t' "steps.tsv: the layer step"
has clean calls.log '^ncu --clock-control none .*--kernel-name regex:paged_decode:: .*--launch-count' \
  "ncu leaves the clocks alone and profiles a few decode launches"
missing=""
for f in summary.txt steps.tsv bundle.log bundle-manifest.json nvidia-smi.log devices.log \
  check.log check.json ceilings.log ceilings.json targets.log targets.json timing-graph.log \
  timing-graph.json timing-eager.log timing-eager.json int-kv.log int-kv.json mla.log mla.json \
  prefix.log prefix.json \
  layer.log layer.json trace.log trace.json tiers.log tiers.json \
  ncu-b64-8k.log ncu-b64-8k.csv ncu-b64-8k.json ncu-b1-32k.log ncu-b1-32k.csv ncu-b1-32k.json \
  ncu-bytes.log ncu-bytes.md ncu-bytes.json cuda_backend_tests.log cuda_backend_tests.xml \
  cuda_plan_tests.log cuda_plan_tests.xml static-model.log static-model.json sweep.log \
  gpu-check.json nvidia-smi-end.log; do
  [ -s "clean/out/$f" ] || missing+=" $f"
done
if [ -z "$missing" ]; then ok "clean: every log and report is in OUTDIR"; else
  bad "clean: missing from OUTDIR:$missing"; ls -la clean/out >&2 || true
fi
if [ -z "$(find clean/out -mindepth 1 -type d)" ]; then ok "clean: OUTDIR is flat"; else
  bad "clean: OUTDIR has folders: $(find clean/out -mindepth 1 -type d)"
fi
# The summary is last: from its header to the end no progress line, and it names every step.
summary_at="$(grep -n '^== gpu-check summary' clean/out.txt | cut -d: -f1 | tail -n 1)"
if [ -n "$summary_at" ] && ! tail -n "+$summary_at" clean/out.txt | grep -q '^\[gpu-check' &&
  tail -n 1 clean/out.txt | grep -q '^RESULT: all 22 steps passed'; then
  ok "clean: the summary is printed last"
else
  bad "clean: the summary is not last (header at line '${summary_at:-none}'):"
  tail -n 30 clean/out.txt | sed 's/^/    /' >&2
fi
for s in bundle nvidia-smi devices check ceilings targets timing-graph timing-eager int-kv mla prefix layer trace tiers ncu-b64-8k ncu-b1-32k \
  ncu-bytes cuda_backend_tests cuda_plan_tests nvidia-smi-end; do
  step_is clean "$s" ok
done
step_is clean sweep partial
has clean out.txt '^ceilings +ok .*copy 4000 GB/s \(83.3 % of datasheet\)' "summary: ceilings"
has clean out.txt '^ceilings +ok .*pinned host -> device 55\.0 GB/s \+9 us/transfer' \
  "summary: the measured link row"
has clean out.txt '^tiers +ok .*host 4e\+06 tokens: hits 3\.9 % hbm \+ 13\.9 % host, link to HBM 2\.1 % busy' \
  "summary: the tiers step's hits by tier"
has clean out.txt 'b=64 ctx=8192 f16 +auto=pipelined [0-9]+ GB/s 93.0 % copy, [0-9]+ tok/s' \
  "summary: the target point"
has clean out.txt 'fp8/f16 tokens/s at b=64 ctx=8192 \(auto\): 2\.00x' "summary: fp8 over f16"
# The mla step: both models at both batches, bf16 and fp8, on the mla rung; the summary's lines.
want='^decodebench sweep --backend cuda --device 0 --config [^ ]*/bundle/configs/sweeps/gpu-targets\.json'
want+=' --model deepseek-v3,deepseek-v2-lite --batch 8,64 --context 8192 --kv-dtype bf16,fp8_e4m3'
want+=' --q-dtype bf16 --kernel mla --ceilings [^ ]*/clean/out/ceilings\.json --out [^ ]*/clean/out/mla\.json$'
has clean calls.log "$want" "the mla step runs both MLA models on the mla rung"
has clean out.txt '^  deepseek-v3 b=64 ctx=8192 bf16: .* GB/s \([0-9.]+ % copy\), [0-9]+ tok/s, bound tc$' \
  "summary: the MLA target point"
# Graph against eager: the same warm point both ways, the fake's eager 3 % slower.
for how in graph eager; do
  want="^decodebench sweep --backend cuda --device 0 --config [^ ]*/bundle/configs/sweeps/gpu-targets\\.json"
  want+=" --model llama-3\\.1-8b --batch 1 --context 8192 --kv-dtype f16 --kernel auto --warm"
  want+=" --timing $how .*--out [^ ]*/clean/out/timing-$how\\.json\$"
  has clean calls.log "$want" "the timing-$how step times the b=1 x 8k point warm, --timing $how"
done
has clean out.txt '^  graph [0-9.]+ us \(graph_replay\), eager [0-9.]+ us \(events_back_to_back\): eager \+3\.0 % over graph$' \
  "summary: the gap between graph and eager, small"
lacks clean out.txt 'LARGE GAP|^flagged rows' "summary: no large gap, no flagged row"
has clean out.txt 'gqa over naive at GQA 8 .*4\.00x' "summary: gqa over naive"
has clean out.txt 'b=64 ctx=8192 f16 h=0.9 G=1: cascade [0-9]+ tok/s = 4\.00x (split_kv|tc)' \
  "summary: cascade over the best prefix-unaware rung"
lacks clean out.txt 'h=0 G=1: cascade' "summary: no cascade ratio at h = 0"
has clean out.txt '^ncu-bytes +ok .*split_kv: DRAM/bytes_min 1\.020' "summary: ncu bytes"
# The integer KV section: the fake's int4 runs at 2.5x f16's tokens/s, short of the 2.7x target.
has clean out.txt '^  tc +f16 [0-9]+ tok/s, int8 1\.90x, int4 2\.50x, int4_token 2\.00x \| int4 target >= 2\.7x at P = 16 \(3x needs P >= 32\): NOT met' \
  "summary: the integer formats over f16, the int4 target judged"
# The layer section: the fake's stages run at 85 % of the copy ceiling (ceilings.json: 4000 GB/s),
# so every batch-1 step is at 85.0 % of its copy roof; the knees are the report's.
has clean out.txt '^layer +ok .*20 points: 20 ok' "summary: the layer step's points"
has clean out.txt '^layer step \(layer\.json.*llama-3\.1-8b ctx=8192' "summary: the layer section"
n="$(grep -c '^  gemm library: cuBLASLt 12\.4\.5 (/usr/local/cuda/lib64/libcublasLt\.so\.12)$' \
  clean/out.txt || true)"
if [ "$n" = 1 ]; then ok "clean: summary: the GEMM library, once"; else
  bad "clean: the GEMM library line printed $n times, want 1"
fi
want='^  tc +h=0 +b=1 step [0-9.]+ us, 85\.0 % of copy roof \(target >= 80 %: met\), '
want+='roofline\.fraction_measured 0\.791; knee b=256: [0-9]+ tok/s, plateau [0-9]+ tok/s; '
want+='at the knee weights 5 % / KV 95 % of the bytes$'
has clean out.txt "$want" "summary: tc at h=0: batch-1 % of copy roof, fraction_measured, knee"
want='^  cascade +h=0\.9 +b=1 step [0-9.]+ us, 85\.0 % of copy roof, roofline\.fraction_measured '
want+='0\.791; knee b=256: 18920 tok/s, plateau 18920 tok/s; at the knee weights 33 % / KV 67 %'
has clean out.txt "$want" "summary: cascade at h=0.9: its own knee (no target verdict off h=0)"
n="$(grep -c '^  \(tc\|cascade\) \+h=' clean/out.txt || true)"
if [ "$n" = 4 ]; then ok "clean: a layer line per kernel and hit rate"; else
  bad "clean: $n layer lines, want 4 (tc, cascade x h 0, 0.9)"
fi
lacks clean out.txt 'layer points skipped' "summary: no skip reason when every layer point is ok"
has clean out.txt '^sweep +partial .*2 of 192 points' "summary: the partial sweep's points"
has clean out/ncu-bytes.md '\| \*\*step\*\* \(pipelined, 4 profiled\) \| .* \| 1\.020 \|' \
  "ncu-bytes.md: one kernel a step"
has clean out/ncu-bytes.md '\| \*\*step\*\* \(split_kv, 2 profiled\) \| .* \| 1\.020 \|' \
  "ncu-bytes.md: split + merge a step"

# --- planted: no cuBLASLt on the GPU machine --------------------------------------------------
# The layer points come back skipped with the reason: the step and the check still pass, and the
# summary gives the reason once.
run no-blas FAKE_NO_CUBLASLT=1 -- --bundle bundle no-blas/out --budget 60
rc_is no-blas 0
step_is no-blas layer ok
has no-blas out.txt '^layer +ok .*20 points: 20 skipped' "summary: the layer points skipped"
has no-blas out.txt '^RESULT: all 22 steps passed' "summary: the check passes"
n="$(grep -c 'cuBLASLt not found' no-blas/out.txt || true)"
if [ "$n" = 1 ]; then ok "no-blas: the reason printed once"; else
  bad "no-blas: the reason printed $n times, want 1:"; sed 's/^/    /' no-blas/out.txt >&2
fi
has no-blas out.txt '^  20 of 20 layer points skipped: cuBLASLt not found \(' \
  "summary: the count and the reason naming cuBLASLt"
has no-blas out.txt '^  no ok layer point at llama-3\.1-8b ctx=8192$' "summary: no layer figures"
lacks no-blas out.txt 'figures unavailable|gemm library' "summary: no traceback, no GEMM library"
step_is no-blas prefix ok

# --- the layer step stopped by the budget: "partial", its finished points summarized ------------
run layer-slow FAKE_LAYER_SLEEP=300 -- --bundle bundle layer-slow/out --budget 30
step_is layer-slow layer partial
has layer-slow out.txt '^layer +partial .*stopped by the budget.*20 of 40 points: 20 ok' \
  "summary: the partial layer step's points"
has layer-slow out.txt '^  tc +h=0 +b=1 step .*85\.0 % of copy roof' \
  "summary: the layer section from the points kept"

# --- planted: a bundle file changed after the manifest was written -----------------------------
make_bundle tampered
printf '# changed\n' >>tampered/bin/decodebench
run tamper -- --bundle tampered tamper/out
rc_is tamper 2
has tamper out.txt 'FAIL bundle: .*bin/decodebench: FAILED' "names the changed file"
lacks tamper calls.log '.' "no GPU step ran (nothing called)"

# --- planted: a bundle for another GPU -------------------------------------------------------
make_bundle bundle-80 80
run arch -- --bundle bundle-80 arch/out
rc_is arch 2
has arch out.txt "built for CUDA architectures '80'.*compute capability 9\.0, which needs 90a" \
  "names the bundle's and the device's architectures"
lacks arch calls.log '^decodebench' "decodebench never ran"

# --- planted: a failing check ----------------------------------------------------------------
run check FAKE_FAIL_CHECK=1 -- --bundle bundle check/out --budget 60
rc_is check 1
step_is check check FAIL
for s in ceilings targets ncu-b64-8k ncu-b1-32k ncu-bytes cuda_backend_tests sweep; do
  step_is check "$s" ok
done
has check out.txt '^RESULT: FAILED 1 of 22 steps: check' "summary: only check failed"
has clean out.txt 'b=64 ctx=8192 f16 .*auto=pipelined .*(static issue bound 4700 GB/s)' \
  "summary: the static model's bound of the instance that ran (group 4: cap 4, not 8)"

# --- planted: no ncu -------------------------------------------------------------------------
# Where this machine has no ncu of its own, take the fake off PATH; else point NCU elsewhere.
if ! command -v ncu >/dev/null && ! compgen -G '/opt/nvidia/nsight-compute/*/ncu' >/dev/null &&
  [ ! -x /usr/local/cuda/bin/ncu ]; then
  mkdir -p no-ncu
  rc=0
  env -u NCU PATH="$work/tools:$PATH" FAKE_CALLS="$work/no-ncu/calls.log" \
    FAKE_FORBIDDEN="$work/no-ncu/forbidden.log" \
    bash "$check" --bundle bundle no-ncu/out --budget 60 >no-ncu/out.txt 2>&1 || rc=$?
  echo "$rc" >no-ncu/rc
  reason='ncu not found'
else
  run no-ncu NCU="$work/no/such/ncu" -- --bundle bundle no-ncu/out --budget 60
  reason='NCU=.* is not an executable'
fi
rc_is no-ncu 1
has no-ncu out.txt "^ncu-b64-8k +FAIL +0s +$reason" "ncu step fails with the reason"
step_is no-ncu ncu-b1-32k FAIL
step_is no-ncu ncu-bytes FAIL
for s in check ceilings targets cuda_backend_tests cuda_plan_tests sweep; do
  step_is no-ncu "$s" ok
done

# --- planted: ncu without permission to read the counters ------------------------------------
run perm FAKE_NCU_PERM=1 -- --bundle bundle perm/out --budget 60
rc_is perm 1
has perm out.txt '^ncu-b64-8k +FAIL .*ERR_NVGPUCTRPERM' "ncu step fails naming the permission"
has perm out.txt '^ncu-b1-32k +FAIL .*not started: ncu may not read the GPU counters' \
  "the second point is not tried"
for s in targets cuda_backend_tests sweep; do step_is perm "$s" ok; done

# --- planted: eager 40 % slower than the graph, and a flagged target row ------------------------
run gap FAKE_EAGER_GAP=1.4 FAKE_FLAGGED=1 -- --bundle bundle gap/out --budget 60
rc_is gap 0
has gap out.txt 'eager \+40\.0 % over graph; LARGE GAP \(over 10 %\)' "summary: the large gap called so"
has gap out.txt '^targets +ok .*40 points: 1 flagged, 39 ok' "summary: the flagged row counted apart"
has gap out.txt '^flagged rows \(1;' "summary: the flagged rows section"
has gap out.txt '^  targets\.json: pipelined b=64 ctx=8192 f16: above_datasheet: achieved 6\.00 TB/s exceeds the NVIDIA H200 datasheet 4\.80 TB/s' \
  "summary: the flagged row with both figures"
# The target line of that point takes no figure from the flagged row.
lacks gap out.txt 'b=64 ctx=8192 f16 +auto=pipelined' "summary: the flagged auto point is no target figure"

# --- bad arguments ---------------------------------------------------------------------------
run noargs -- noargs/out
rc_is noargs 2
has noargs out.txt '--bundle DIR is required' "names the missing --bundle"

# --- ncu-bytes.py on canned files ------------------------------------------------------------
mkdir -p nb
cat >nb/split.csv <<'EOF'
==PROF== Connected to process 1 (decodebench)
"ID","Process ID","Process Name","Host Name","Kernel Name","dram__bytes_read.sum","lts__t_sector_hit_rate.pct","sm__inst_issued.avg.pct_of_peak_sustained_active"
"","","","","","byte","%","%"
"0","1","decodebench","h","void decodebench::kernels::cuda::paged_decode::split_kv_detail::split_kernel<(KvDtype)0, 128, 4>(PagedDecodeParams)","1,000,000","2.5","10"
"1","1","decodebench","h","void decodebench::kernels::cuda::paged_decode::split_kv_detail::merge_kernel<128>(PagedDecodeParams)","50,000","40","5"
"2","1","decodebench","h","void decodebench::kernels::cuda::paged_decode::split_kv_detail::split_kernel<(KvDtype)0, 128, 4>(PagedDecodeParams)","1,100,000","3.5","12"
"3","1","decodebench","h","void decodebench::kernels::cuda::paged_decode::split_kv_detail::merge_kernel<128>(PagedDecodeParams)","50,000","40","5"
"4","1","decodebench","h","void decodebench::kernels::cuda::paged_decode::split_kv_detail::split_kernel<(KvDtype)0, 128, 4>(PagedDecodeParams)","1,000,000","2.5","10"
==PROF== Disconnected from process 1
EOF
point_json() {  # point_json KERNEL: a one-point report
  printf '{"schema_version": 1, "results": [{"kernel": "%s", "kernel_requested": "auto",
    "model": "llama-3.1-8b", "batch": 1, "context": {"kind": "fixed", "values": [32768]},
    "kv_dtype": "f16", "hit_rate": 0, "status": "ok",
    "bytes": {"kv_logical": 900000, "kv_unique": 900000, "min": 1000000}}]}\n' "$1"
}
point_json split_kv >nb/split.json
point_json gqa >nb/gqa.json
printf '{"schema_version": 1, "results": []}\n' >nb/empty.json
printf '==ERROR== ERR_NVGPUCTRPERM - no permission\n' >nb/perm.csv
# nb NAME WANT_RC PATTERN WHAT ARGS...: ncu-bytes.py's exit status and output.
nb() {
  local name="$1" want="$2" pattern="$3" what="$4" rc=0
  shift 4
  python3 "$ncu_bytes" --out "nb/$name" "$@" >"nb/$name.out" 2>&1 || rc=$?
  if [ "$rc" = "$want" ] && grep -Eq -- "$pattern" "nb/$name.out"; then ok "ncu-bytes $name: $what"
  else
    bad "ncu-bytes $name: $what: exit $rc (want $want), output should match /$pattern/:"
    sed 's/^/    /' "nb/$name.out" >&2
  fi
}
# Two whole steps (the fifth launch, a split without its merge, dropped): medians 1.05 MB + 50 kB.
nb good 0 '\| \*\*step\*\* \(split_kv, 2 profiled\) \| 1\.10 MB \| 1\.00 MB \| 1\.100 \|' \
  "joins split + merge into a step, ratio to bytes_min" nb/split.csv nb/split.json
has nb good.md '\| split_kv_detail::merge_kernel \| 50\.0 kB \| \| \| 40\.0 \| 5\.0 \|' \
  "ncu-bytes.md: the merge kernel's row"
has nb good.json '"ratio_to_logical": 1\.1' "ncu-bytes.json: the ratio to logical bytes"
nb no-point 1 'empty.json: holds 0 points' "a report without its point" nb/split.csv nb/empty.json
nb other-rung 1 "does not join .*ran kernel 'gqa', but ncu profiled split_kv_detail::merge_kernel" \
  "kernels of another rung" nb/split.csv nb/gqa.json
nb no-csv 1 'nb/none.csv: cannot read the ncu CSV' "a missing CSV" nb/none.csv nb/split.json
nb no-rows 1 'perm.csv: no ncu CSV header' "a CSV without profiled launches" \
  nb/perm.csv nb/split.json
nb odd 2 'give CSV REPORT pairs' "a path without its partner" nb/split.csv

if [ "$failures" -gt 0 ]; then
  echo "gpu_check_test: $failures check(s) failed" >&2
  exit 1
fi
echo "gpu_check_test: all checks passed"
