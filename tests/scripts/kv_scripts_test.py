#!/usr/bin/env python3
"""Tests of scripts/kv_dump.py and scripts/kv_quant_eval.py on a tiny random Llama that the test
writes as a GGUF (2 layers, hidden 64, 4 query / 2 KV heads, head dim 16, a byte-level vocabulary
with a few merges, f32 tensors; Q/K rows permuted as llama.cpp's converter does), checked against
a forward pass written here independently in double, in the checkpoint's convention.

kv_dump.py: the files' shapes, dtypes and meta.json; ref.npy against a recomputation through the
block tables; every layer's q, K (after RoPE) and V against the independent forward pass, with
two planted faults that must be caught (RoPE on adjacent pairs here; a GGUF written without the
permutation). kv_quant_eval.py with stand-in quantizers: an identity gives KL 0, top-1 1 and no
perplexity change, printed "n.s." with an interval of [0, 0] (an unpaired bootstrap is caught),
and the unquantized perplexity of each window equals the independent one; a rounding one gives
KL > 0 with intervals of some width around each figure (a bootstrap that ignores its resample is
caught), the same for the same seed; the bootstrap itself on synthetic positions against the
spread a mean has (paired: the quantizer's noise only); the BLAS named; what the quantizer is
called with; bad input (--windows among it) exits 2 naming what is wrong.
With --decodebench BIN, the real `BIN quantize` too: f16 exact against numpy, the other formats
within their step, and kv_quant_eval.py over every format.

  python3 tests/scripts/kv_scripts_test.py [--decodebench BIN] [-v]

Exit status: 0 pass, 1 a check failed, 77 numpy, gguf or tokenizers missing (CTest
SKIP_RETURN_CODE).
"""
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import unittest
from dataclasses import dataclass

try:
    import numpy as np
    import gguf  # noqa: F401
    import tokenizers  # noqa: F401
except ImportError as e:
    print(f"kv_scripts_test: SKIP: {e.name} missing (scripts/bootstrap.sh --tests installs numpy, "
          "gguf and tokenizers)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
KV_DUMP = os.path.join(REPO, "scripts", "kv_dump.py")
KV_EVAL = os.path.join(REPO, "scripts", "kv_quant_eval.py")
DECODEBENCH = None  # --decodebench BIN
sys.path.insert(0, os.path.join(REPO, "scripts"))
import kv_quant_eval  # noqa: E402
import llama_gguf  # noqa: E402


@dataclass(frozen=True)
class Shape:
    layers: int = 2
    embd: int = 64
    hq: int = 4
    hkv: int = 2
    d: int = 16
    ff: int = 96


TINY = Shape()
# decodebench's int4 formats scale groups of 32 channels: the real quantizer needs d >= 32.
WIDE = Shape(hq=2, hkv=1, d=32)
BASE, EPS = 10000.0, 1e-5
TOKENS, QUERIES, BLOCK = 100, 7, 16  # T = 96: 6 blocks; 7 queries with partial last blocks
T = TOKENS // BLOCK * BLOCK
MERGES = [("t", "h"), ("th", "e"), ("Ġ", "the"), ("i", "n"), ("e", "r"), ("Ġ", "a")]
TEXT = ("The licenses for most software and other practical works are designed to take away "
        "your freedom to share and change the works. By contrast, the General Public License "
        "is intended to guarantee your freedom to share and change all versions of a program, "
        "to make sure it remains free software for all its users. 1234 of them.\n")


def byte_chars():
    """GPT-2's byte -> printable character map (the byte-level BPE alphabet)."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    extra = [b for b in range(256) if b not in keep]
    table = {b: chr(b) for b in keep}
    table.update({b: chr(256 + i) for i, b in enumerate(extra)})
    return [table[b] for b in range(256)]


def vocabulary():
    tokens = ["<|endoftext|>"] + byte_chars() + [a + b for a, b in MERGES]
    return tokens, [3] + [1] * (len(tokens) - 1)


def permute_rows(w, n_head):
    """llama.cpp convert's permutation of a Q/K weight for its adjacent-pairs RoPE."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2)
            .reshape(w.shape))


def make_weights(shape, seed=0):
    """Random weights in the checkpoint's convention (Q/K rows not permuted)."""
    rng = np.random.default_rng(seed)
    vocab, e = len(vocabulary()[0]), shape.embd
    qd, kvd = shape.hq * shape.d, shape.hkv * shape.d

    def normal(*dims, std):
        return (rng.standard_normal(dims) * std).astype(np.float32)

    w = {"token_embd": normal(vocab, e, std=1.0), "output_norm": 1 + normal(e, std=0.1),
         "layers": []}
    for _ in range(shape.layers):
        w["layers"].append({
            "attn_norm": 1 + normal(e, std=0.1),
            # Sharp attention, so a wrong rotation moves the outputs, not only K.
            "wq": normal(qd, e, std=2.0 / e ** 0.5),
            "wk": normal(kvd, e, std=2.0 / e ** 0.5),
            "wv": normal(kvd, e, std=1.0 / e ** 0.5),
            "wo": normal(e, qd, std=1.0 / qd ** 0.5),
            "ffn_norm": 1 + normal(e, std=0.1),
            "w_gate": normal(shape.ff, e, std=1.0 / e ** 0.5),
            "w_up": normal(shape.ff, e, std=1.0 / e ** 0.5),
            "w_down": normal(e, shape.ff, std=1.0 / shape.ff ** 0.5),
        })
    return w


def write_gguf(path, shape, w, permute=True):
    tokens, types = vocabulary()
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("tiny-llama")
    writer.add_block_count(shape.layers)
    writer.add_context_length(512)
    writer.add_embedding_length(shape.embd)
    writer.add_feed_forward_length(shape.ff)
    writer.add_head_count(shape.hq)
    writer.add_head_count_kv(shape.hkv)
    if shape.hq * shape.d != shape.embd:
        writer.add_key_length(shape.d)
        writer.add_value_length(shape.d)
    writer.add_rope_dimension_count(shape.d)
    writer.add_rope_freq_base(BASE)
    writer.add_layer_norm_rms_eps(EPS)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([f"{a} {b}" for a, b in MERGES])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)
    writer.add_add_bos_token(False)
    writer.add_tensor("token_embd.weight", w["token_embd"])  # tied: no output.weight
    writer.add_tensor("output_norm.weight", w["output_norm"])
    for i, layer in enumerate(w["layers"]):
        p = f"blk.{i}."
        wq, wk = layer["wq"], layer["wk"]
        if permute:
            wq, wk = permute_rows(wq, shape.hq), permute_rows(wk, shape.hkv)
        for name, value in (("attn_norm", layer["attn_norm"]), ("attn_q", wq), ("attn_k", wk),
                            ("attn_v", layer["wv"]), ("attn_output", layer["wo"]),
                            ("ffn_norm", layer["ffn_norm"]), ("ffn_gate", layer["w_gate"]),
                            ("ffn_up", layer["w_up"]), ("ffn_down", layer["w_down"])):
            writer.add_tensor(p + name + ".weight", value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def rope_angles(positions, d):
    return np.outer(positions, 1.0 / BASE ** (np.arange(0, d, 2) / d))


def rope_rotate_half(x, positions):
    """The checkpoint's RoPE: x * cos + rotate_half(x) * sin, x [T, H, d]."""
    d = x.shape[-1]
    angles = rope_angles(positions, d)
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1)[:, None, :]
    rotated = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * cos + rotated * sin


def rope_adjacent_pairs(x, positions):
    """A planted fault: RoPE on (x[2i], x[2i+1]), right for the GGUF's row order, wrong here."""
    angles = rope_angles(positions, x.shape[-1])[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * np.cos(angles) - x[..., 1::2] * np.sin(angles)
    out[..., 1::2] = x[..., 1::2] * np.cos(angles) + x[..., 0::2] * np.sin(angles)
    return out


def reference_forward(shape, w, tokens, rope=rope_rotate_half):
    """Plain double-precision Llama forward: (logits [T, V], per layer (q [T, Hq, d],
    k [T, Hkv, d], v [T, Hkv, d]) after RoPE)."""
    t, hq, hkv, d = len(tokens), shape.hq, shape.hkv, shape.d
    pos = np.arange(t)

    def norm(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * g

    x = w["token_embd"].astype(np.float64)[tokens]
    per_layer = []
    mask = np.triu(np.full((t, t), -np.inf), k=1)
    for layer in w["layers"]:
        h = norm(x, layer["attn_norm"])
        q = rope((h @ layer["wq"].T).reshape(t, hq, d), pos)
        k = rope((h @ layer["wk"].T).reshape(t, hkv, d), pos)
        v = (h @ layer["wv"].T).reshape(t, hkv, d)
        per_layer.append((q, k, v))
        k_rep, v_rep = np.repeat(k, hq // hkv, axis=1), np.repeat(v, hq // hkv, axis=1)
        scores = np.einsum("thd,shd->hts", q, k_rep) / np.sqrt(d) + mask
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        x = x + np.einsum("hts,shd->thd", probs, v_rep).reshape(t, hq * d) @ layer["wo"].T
        h = norm(x, layer["ffn_norm"])
        g = h @ layer["w_gate"].T
        x = x + (g / (1 + np.exp(-g)) * (h @ layer["w_up"].T)) @ layer["w_down"].T
    return norm(x, w["output_norm"]) @ w["token_embd"].T, per_layer


def perplexity(logits, tokens):
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return float(np.exp(-np.mean(logp[np.arange(len(tokens) - 1), tokens[1:]])))


def mismatch(got, want, atol=2e-4, rtol=2e-4):
    """None when every element is within atol + rtol * |want|, else the first few misses."""
    bad = np.argwhere(~(np.abs(got - want) <= atol + rtol * np.abs(want)))
    if not len(bad):
        return None
    shown = ", ".join(f"{tuple(i)}: {got[tuple(i)]:.6g} vs {want[tuple(i)]:.6g}" for i in bad[:4])
    return f"{len(bad)} of {want.size} differ ({shown})"


def run(args, **kw):
    return subprocess.run([sys.executable] + args, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, **kw)


def write_standin(path, mode, log):
    """A stand-in for `decodebench quantize` (the contract: float32 [num_blocks, Hkv, P, d] in,
    the values to attend over out): identity, round (to multiples of 1/8), no-quantize (a
    binary without the command), bad-shape (writes the wrong shape)."""
    with open(path, "w") as f:
        f.write(f"""#!{sys.executable}
import json, sys
import numpy as np
mode, log = {mode!r}, {log!r}
args = sys.argv[1:]
if args[:1] == ["quantize"] and mode == "no-quantize":
    print("decodebench: error: unknown command 'quantize'", file=sys.stderr)
    sys.exit(2)
if args == ["quantize", "--help"]:
    print("usage: decodebench quantize --kv-dtype X --tensor k|v IN.npy OUT.npy")
    sys.exit(0)
assert args[0] == "quantize" and args[1] == "--kv-dtype" and args[3] == "--tensor", args
x = np.load(args[5])
with open(log, "a") as f:
    f.write(json.dumps({{"kv_dtype": args[2], "tensor": args[4], "shape": list(x.shape),
                        "dtype": str(x.dtype)}}) + "\\n")
y = {{"identity": x, "round": np.round(x * 8) / 8, "bad-shape": x[:1]}}[mode]
np.save(args[6], y.astype(np.float32))
""")
    os.chmod(path, 0o755)


class Fixture:
    """A tiny model of one shape: its GGUF, kv_dump.py's output on the text, the independent
    forward pass. Made once per shape, in one scratch directory for the whole run."""
    tmp = None
    made = {}

    @classmethod
    def scratch(cls):
        if cls.tmp is None:
            cls.tmp = tempfile.TemporaryDirectory(prefix="kv_scripts_test.")
            cls.text = os.path.join(cls.tmp.name, "text.txt")
            with open(cls.text, "w") as f:
                f.write(TEXT)
        return cls.tmp.name

    @classmethod
    def get(cls, shape):
        if shape not in cls.made:
            cls.made[shape] = cls(shape)
        return cls.made[shape]

    def __init__(self, shape):
        self.shape = shape
        self.dir = tempfile.mkdtemp(dir=Fixture.scratch())
        self.weights = make_weights(shape)
        self.model = os.path.join(self.dir, "tiny.gguf")
        write_gguf(self.model, shape, self.weights)
        self.dump = os.path.join(self.dir, "dump")
        done = kv_dump(self.model, self.dump)
        assert done.returncode == 0, done.stderr
        self.tokens = np.load(os.path.join(self.dump, "tokens.npy"))
        self.logits, self.per_layer = reference_forward(shape, self.weights, self.tokens)

    def dumped(self, layer, name, dump=None):
        return np.load(os.path.join(dump or self.dump, f"layer_{layer:02d}", name + ".npy"))


def kv_dump(model, out, *extra):
    return run([KV_DUMP, "--model", model, "--text", Fixture.text, "--tokens", str(TOKENS),
                "--queries", str(QUERIES), "--block-size", str(BLOCK), "--out", out] + list(extra))


def kv_eval(model, formats, binary, *extra, env=None):
    """(the run, the --json result or None)."""
    out = os.path.join(tempfile.mkdtemp(dir=Fixture.scratch()), "eval.json")
    done = run([KV_EVAL, "--model", model, "--text", Fixture.text, "--tokens", str(TOKENS),
                "--block-size", str(BLOCK), "--kv-dtype", formats, "--decodebench", binary,
                "--out", out] + list(extra), env=env)
    result = None
    if done.returncode == 0:
        with open(out) as f:
            result = json.load(f)
    return done, result


def unpage(cache):
    """[num_blocks, Hkv, P, d] (physical = logical) -> [T, Hkv, d]."""
    return cache.transpose(0, 2, 1, 3).reshape(-1, cache.shape[1], cache.shape[3])


class KvDumpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = Fixture.get(TINY)

    def test_tokens_are_the_text(self):
        chars = {c: b for b, c in enumerate(byte_chars())}
        vocab = vocabulary()[0]
        self.assertEqual(len(self.m.tokens), T)
        raw = bytes(chars[c] for i in self.m.tokens for c in vocab[i])
        self.assertTrue(TEXT.encode().startswith(raw), raw)
        self.assertIn(vocab.index("the"), self.m.tokens)  # the merges applied ("other")
        self.assertIn(vocab.index("Ġa"), self.m.tokens)
        # Digits one by one (the smollm pre-tokenizer), a control token whole.
        done = run(["-c", "import json, sys; sys.path.insert(0, sys.argv[1]); import llama_gguf;"
                    "print(json.dumps(llama_gguf.Llama(sys.argv[2]).encode(sys.argv[3]).tolist()))",
                    os.path.join(REPO, "scripts"), self.m.model, "1234<|endoftext|>"])
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(json.loads(done.stdout), [vocab.index(c) for c in "1234"] + [0])

    def test_files_shapes_and_meta(self):
        nb, s = T // BLOCK, self.m.shape
        for layer in range(s.layers):
            expect = {"q": (QUERIES, s.hq, s.d), "ref": (QUERIES, s.hq, s.d),
                      "k_cache": (nb, s.hkv, BLOCK, s.d), "v_cache": (nb, s.hkv, BLOCK, s.d),
                      "block_tables": (QUERIES, nb), "context_lens": (QUERIES,)}
            for name, shape in expect.items():
                a = self.m.dumped(layer, name)
                dtype = np.int32 if name in ("block_tables", "context_lens") else np.float32
                self.assertEqual((a.shape, a.dtype), (shape, dtype), name)
            with open(os.path.join(self.m.dump, f"layer_{layer:02d}", "meta.json")) as f:
                meta = json.load(f)
            for key in ("kernel", "backend", "model", "num_q_heads", "num_kv_heads", "head_dim",
                        "block_size", "kv_dtype", "q_dtype", "softmax_scale", "k_scale",
                        "v_scale", "hit_rate", "hit_rate_actual", "prefix_groups", "seed",
                        "batch", "context", "layer", "tokens", "text", "note"):
                self.assertIn(key, meta)
            self.assertEqual((meta["kernel"], meta["backend"], meta["kv_dtype"], meta["q_dtype"]),
                             ("none", "kv_dump", "f32", "f32"))
            self.assertEqual((meta["num_q_heads"], meta["num_kv_heads"], meta["head_dim"],
                              meta["block_size"], meta["batch"], meta["context"], meta["layer"],
                              meta["tokens"], meta["text"]),
                             (s.hq, s.hkv, s.d, BLOCK, QUERIES, str(T), layer, T, "text.txt"))
            self.assertAlmostEqual(meta["softmax_scale"], s.d ** -0.5)
            self.assertEqual((meta["k_scale"], meta["v_scale"], meta["hit_rate"],
                              meta["prefix_groups"]), (1.0, 1.0, 0.0, 0))
            lens = self.m.dumped(layer, "context_lens")
            self.assertEqual(lens[-1], T)  # the last position is a query
            self.assertTrue(np.all(np.diff(lens) > 0) and lens[0] - 1 >= T // 2, lens)
            self.assertEqual(meta["query_positions"], [int(n) - 1 for n in lens])
            tables = self.m.dumped(layer, "block_tables")
            for b, n in enumerate(lens):
                used = (n + BLOCK - 1) // BLOCK
                self.assertEqual(list(tables[b]), list(range(used)) + [-1] * (nb - used))

    def test_ref_is_the_attention_over_the_files(self):
        s = self.m.shape
        for layer in range(s.layers):
            q, kc, vc = (self.m.dumped(layer, n) for n in ("q", "k_cache", "v_cache"))
            tables = self.m.dumped(layer, "block_tables")
            lens = self.m.dumped(layer, "context_lens")
            want = np.empty(q.shape)
            for b in range(q.shape[0]):
                # Token j of sequence b: block tables[b][j // P], slot j % P.
                idx = [(tables[b][j // BLOCK], j % BLOCK) for j in range(lens[b])]
                for h in range(s.hq):
                    kvh = h * s.hkv // s.hq
                    k = np.array([kc[blk, kvh, j] for blk, j in idx], dtype=np.float64)
                    v = np.array([vc[blk, kvh, j] for blk, j in idx], dtype=np.float64)
                    logits = k @ q[b, h] / np.sqrt(s.d)
                    p = np.exp(logits - logits.max())
                    want[b, h] = p @ v / p.sum()
            self.assertIsNone(mismatch(self.m.dumped(layer, "ref"), want, atol=1e-5, rtol=1e-5))

    def test_qkv_equal_an_independent_forward_pass(self):
        positions = self.m.dumped(0, "context_lens") - 1
        for layer, (q, k, v) in enumerate(self.m.per_layer):
            with self.subTest(layer=layer):
                self.assertIsNone(mismatch(unpage(self.m.dumped(layer, "k_cache")), k[:T]))
                self.assertIsNone(mismatch(unpage(self.m.dumped(layer, "v_cache")), v[:T]))
                self.assertIsNone(mismatch(self.m.dumped(layer, "q"), q[positions]))

    def test_a_wrong_rope_is_caught(self):
        """The check above must fail when the rotation is the GGUF's (adjacent pairs) instead of
        the checkpoint's, and when the GGUF's rows are not permuted as the converter does."""
        m = self.m
        _, wrong = reference_forward(m.shape, m.weights, m.tokens, rope=rope_adjacent_pairs)
        self.assertIsNotNone(mismatch(unpage(m.dumped(0, "k_cache")), wrong[0][1][:T]))
        self.assertIsNotNone(mismatch(m.dumped(0, "q"),
                                      wrong[0][0][m.dumped(0, "context_lens") - 1]))
        d = os.path.join(m.dir, "unpermuted")
        os.makedirs(d)
        model = os.path.join(d, "tiny.gguf")
        write_gguf(model, m.shape, m.weights, permute=False)
        done = kv_dump(model, d)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIsNotNone(mismatch(unpage(m.dumped(0, "k_cache", d)), m.per_layer[0][1][:T]))
        # V has no RoPE: the same either way.
        self.assertIsNone(mismatch(unpage(m.dumped(0, "v_cache", d)), m.per_layer[0][2][:T]))

    def test_bad_input(self):
        out = os.path.join(self.m.dir, "bad")
        cases = [
            (["--model", out + "/none.gguf"], "no such file"),
            (["--model", Fixture.text], "not a readable GGUF"),
            (["--queries", "99"], "--queries 99"),
            (["--block-size", "0"], "--block-size 0"),
            (["--text", out + "/none.txt"], "--text"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                done = kv_dump(self.m.model, out, *args)
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertIn(message, done.stderr)
        self.assertEqual(run([KV_DUMP]).returncode, 2)  # --out is required


class KvQuantEvalTest(unittest.TestCase):
    """kv_quant_eval.py with stand-ins for `decodebench quantize`."""

    @classmethod
    def setUpClass(cls):
        cls.m = Fixture.get(TINY)

    def evaluate(self, mode, formats="f16,int4", extra=()):
        """(the run, its --json result or None, the stand-in's calls). The bootstrap draws
        stretches of one KV block: 6 to a window of T tokens."""
        d = tempfile.mkdtemp(dir=self.m.dir)
        binary, log = os.path.join(d, "decodebench"), os.path.join(d, "calls.jsonl")
        write_standin(binary, mode, log)
        done, result = kv_eval(self.m.model, formats, binary, "--stretch", str(BLOCK), *extra)
        calls = []
        if os.path.exists(log):
            with open(log) as f:
                calls = [json.loads(line) for line in f]
        return done, result, calls

    def test_identity_changes_nothing(self):
        done, result, calls = self.evaluate("identity")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual([f["kv_dtype"] for f in result["formats"]], ["f16", "int4"])
        for f in result["formats"]:
            self.assertEqual((f["kl_mean"], f["kl_p99"], f["kl_max"]), (0.0, 0.0, 0.0))
            self.assertEqual(f["top1_agreement"], 1.0)
            self.assertEqual((f["ppl_change"], f["ppl_change_pct"]), (0.0, 0.0))
        self.assertEqual((result["kind"], result["version"], result["tokens"],
                          result["block_size"]), ("decodebench-kv-quant-eval", 1, T, BLOCK))
        # The text holds 3 windows of T tokens, fewer than the default: all 3 are read.
        self.assertGreater(kv_quant_eval.DEFAULT_WINDOWS, 3)
        self.assertEqual((result["windows"], result["window_offsets"],
                          result["scored_positions"], result["scored_tokens"]),
                         (3, [0, T, 2 * T], 3 * T, 3 * (T - 1)))
        self.assertIn(f"holds 3 window(s) of {T} tokens, fewer than the default", done.stderr)
        # The first window's unquantized model is the independent one.
        want = perplexity(self.m.logits, self.m.tokens)
        first = result["unquantized"]["per_window"][0]
        self.assertEqual(first["offset"], 0)
        self.assertAlmostEqual(first["ppl"] / want, 1.0, delta=1e-4)
        # Each window, each format: each layer's K then V, in the paged layout.
        s = self.m.shape
        expect = [{"kv_dtype": f, "tensor": t, "shape": [T // BLOCK, s.hkv, BLOCK, s.d],
                   "dtype": "float32"} for _ in range(3) for f in ("f16", "int4")
                  for _ in range(s.layers) for t in ("k", "v")]
        self.assertEqual(calls, expect)
        table = done.stdout.splitlines()
        self.assertTrue(any(line.startswith("f16 ") for line in table), done.stdout)
        self.assertTrue(any(line.startswith("int4 ") for line in table), done.stdout)

    def test_identity_is_not_measurable(self):
        """Identical runs: every interval is exactly no change, so nothing is measurable and the
        table prints "n.s." with the interval instead of a figure. A bootstrap that weighs the
        two runs by different resamples (unpaired) gives the perplexity change a width here."""
        done, result, _ = self.evaluate("identity", formats="int8")
        self.assertEqual(done.returncode, 0, done.stderr)
        f = result["formats"][0]
        self.assertEqual(f["ppl_change_interval"], [0.0, 0.0])
        self.assertEqual(f["ppl_change_pct_interval"], [0.0, 0.0])
        self.assertEqual(f["kl_mean_interval"], [0.0, 0.0])
        self.assertEqual(f["top1_agreement_interval"], [1.0, 1.0])
        self.assertFalse(f["ppl_change_measurable"])
        self.assertFalse(f["kl_mean_measurable"])
        self.assertFalse(f["top1_agreement_measurable"])
        line = next(line for line in done.stdout.splitlines() if line.startswith("int8 "))
        self.assertTrue(line.endswith("n.s. [+0.00 %, +0.00 %]"), line)
        self.assertIn("n.s. [0.00e+00, 0.00e+00]", line)
        self.assertIn("n.s. [1.0000, 1.0000]", line)

    def test_a_perturbing_quantizer_shows(self):
        figure = os.path.join(self.m.dir, "kv.svg")
        done, result, _ = self.evaluate("round", formats="int8", extra=["--figure", figure])
        self.assertEqual(done.returncode, 0, done.stderr)
        f = result["formats"][0]
        self.assertGreater(f["kl_mean"], 0)
        self.assertGreaterEqual(f["kl_max"], f["kl_p99"])
        self.assertGreaterEqual(f["kl_p99"], 0.5 * f["kl_mean"])
        self.assertLessEqual(f["top1_agreement"], 1.0)
        self.assertNotEqual(f["ppl_change"], 0.0)
        with open(figure) as svg:
            self.assertIn("<svg", svg.read())

    def test_intervals_bracket_the_figures(self):
        """A perturbing quantizer: each interval holds its figure and has a width (a bootstrap
        that ignores its resample gives [x, x]); the same seed gives the same intervals, another
        seed others; measurable changes print their figure with the interval."""
        done, result, _ = self.evaluate("round", formats="int8")
        self.assertEqual(done.returncode, 0, done.stderr)
        f = result["formats"][0]
        for key in ("kl_mean", "top1_agreement", "ppl_change", "ppl_change_pct"):
            with self.subTest(key=key):
                lo, hi = f[key + "_interval"]
                self.assertLessEqual(lo, f[key])
                self.assertLessEqual(f[key], hi)
                if key != "top1_agreement":  # top-1 may be unchanged everywhere
                    self.assertLess(lo, hi)
        self.assertTrue(f["kl_mean_measurable"])
        lo, hi = f["ppl_change_pct_interval"]
        self.assertEqual(f["ppl_change_measurable"], not lo <= 0 <= hi)
        self.assertEqual(result["interval"], {"method": "paired stretch bootstrap", "level": 0.95,
                                              "resamples": 1000, "seed": 0,
                                              "stretch_tokens": BLOCK})
        line = next(line for line in done.stdout.splitlines() if line.startswith("int8 "))
        # The change with its interval, or "n.s." and the interval alone; as many decimals as
        # show the interval's width.
        printed = re.search(r"  (n\.s\.|[-+]\d+\.\d+ %) \[([-+]\d+\.(\d+)) %, ([-+]\d+\.\d+) %\]$",
                            line)
        self.assertIsNotNone(printed, line)
        step = 10.0 ** -len(printed.group(3))
        if hi - lo >= 1e-4:  # the bounds print apart, and a change's as nonzero
            self.assertNotEqual(printed.group(2), printed.group(4), line)
            if f["ppl_change_measurable"]:
                self.assertNotIn(0.0, (float(printed.group(2)), float(printed.group(4))), line)
        self.assertAlmostEqual(float(printed.group(2)), lo, delta=step / 2 + 1e-12)
        self.assertAlmostEqual(float(printed.group(4)), hi, delta=step / 2 + 1e-12)
        if f["ppl_change_measurable"]:
            self.assertAlmostEqual(float(printed.group(1)[:-2]), f["ppl_change_pct"],
                                   delta=step / 2 + 1e-12)
        else:
            self.assertEqual(printed.group(1), "n.s.")
        lo, hi = f["kl_mean_interval"]
        self.assertIn(f"{f['kl_mean']:.2e} [{lo:.2e}, {hi:.2e}]", line)
        # Pooled figures are the windows' own, weighed by their positions (equal here).
        per = f["per_window"]
        self.assertEqual([w["offset"] for w in per], [0, T, 2 * T])
        self.assertAlmostEqual(f["kl_mean"], np.mean([w["kl_mean"] for w in per]))
        self.assertAlmostEqual(f["top1_agreement"], np.mean([w["top1_agreement"] for w in per]))
        _, again, _ = self.evaluate("round", formats="int8")
        other_done, other, _ = self.evaluate("round", formats="int8", extra=["--seed", "7"])
        self.assertEqual(other_done.returncode, 0, other_done.stderr)
        keys = ("kl_mean_interval", "top1_agreement_interval", "ppl_change_pct_interval")
        self.assertEqual([again["formats"][0][k] for k in keys], [f[k] for k in keys])
        self.assertNotEqual(other["formats"][0]["kl_mean_interval"], f["kl_mean_interval"])
        self.assertEqual(other["formats"][0]["kl_mean"], f["kl_mean"])

    def test_windows(self):
        """--windows 1 reads the text's first T tokens only; --windows 2 the next T as well,
        from position 0 again: its unquantized perplexity is the independent forward pass's on
        those tokens."""
        done, one, calls = self.evaluate("identity", formats="f16", extra=["--windows", "1"])
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual((one["windows"], one["window_offsets"], len(calls)),
                         (1, [0], 2 * self.m.shape.layers))
        want = perplexity(self.m.logits, self.m.tokens)
        self.assertAlmostEqual(one["unquantized"]["ppl"] / want, 1.0, delta=1e-4)
        done, two, calls = self.evaluate("identity", formats="f16", extra=["--windows", "2"])
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual((two["windows"], two["window_offsets"], len(calls)),
                         (2, [0, T], 4 * self.m.shape.layers))
        ids = llama_gguf.Llama(self.m.model).encode(TEXT)[T:2 * T]
        logits, _ = reference_forward(self.m.shape, self.m.weights, ids)
        second = two["unquantized"]["per_window"][1]
        self.assertEqual(second["offset"], T)
        self.assertAlmostEqual(second["ppl"] / perplexity(logits, ids), 1.0, delta=1e-4)
        # The pooled perplexity: exp of the mean NLL over both windows' T - 1 scored tokens.
        pooled = np.exp(np.mean([np.log(one["unquantized"]["ppl"]), np.log(second["ppl"])]))
        self.assertAlmostEqual(two["unquantized"]["ppl"] / pooled, 1.0, delta=1e-9)

    def test_blas_is_named(self):
        """The BLAS numpy ran on, in the table and the JSON, with the variables that steer it;
        for OpenBLAS on x86-64 with AVX2, OPENBLAS_CORETYPE=Haswell shows as the core."""
        env = dict(os.environ, OPENBLAS_CORETYPE="Haswell")
        d = tempfile.mkdtemp(dir=self.m.dir)
        binary = os.path.join(d, "decodebench")
        write_standin(binary, "identity", os.path.join(d, "calls.jsonl"))
        done, result = kv_eval(self.m.model, "f16", binary, env=env)
        self.assertEqual(done.returncode, 0, done.stderr)
        blas = result["blas"]
        self.assertEqual(set(blas), {"name", "version", "core", "threads", "source", "numpy",
                                     "env"})
        self.assertTrue(blas["name"], blas)
        self.assertEqual(blas["numpy"], np.__version__)
        self.assertEqual(blas["env"].get("OPENBLAS_CORETYPE"), "Haswell")
        self.assertIn(f"BLAS: {blas['name']}", done.stdout)
        self.assertIn("OPENBLAS_CORETYPE=Haswell", done.stdout)
        # No --stretch: 16 stretches to a window this short.
        self.assertEqual(result["interval"]["stretch_tokens"], T // 16)
        if "openblas" in blas["name"].lower() and blas["source"] != "numpy build configuration":
            self.assertTrue(blas["core"], blas)
            self.assertIn(f"core {blas['core']}", done.stdout)
            # OpenBLAS builds for x86-64 choose their kernel at run time (DYNAMIC_ARCH).
            avx2 = platform.machine() == "x86_64" and os.path.isfile("/proc/cpuinfo")
            if avx2:
                with open("/proc/cpuinfo") as f:
                    avx2 = " avx2" in f.read()
            if avx2:
                self.assertEqual(blas["core"].lower(), "haswell")

    def test_bad_input(self):
        cases = [
            ("identity", "f16,int3", 2, "(valid: f32, f16, bf16, fp8_e4m3, fp8_e5m2, int8, int4, "
                                        "int4_token)"),
            ("identity", "f16,f16", 2, "twice"),
            ("no-quantize", "f16", 2, "has no `quantize` command"),
            ("bad-shape", "f16", 1, "expected float32"),
        ]
        for mode, formats, code, message in cases:
            with self.subTest(mode=mode, formats=formats):
                done, _, _ = self.evaluate(mode, formats)
                self.assertEqual(done.returncode, code, done.stderr)
                self.assertIn(message, done.stderr)
        for extra, message in ((["--figure", "x.pdf"], ".svg or .png"),
                               (["--decodebench", "/nonexistent"], "not an executable"),
                               (["--model", "/nonexistent.gguf"], "no such file"),
                               (["--windows", "0"], "--windows 0: need 1 to the text's tokens / "
                                                    "--tokens"),
                               (["--windows", "-2"], "--windows -2: need 1 to"),
                               (["--windows", "two"], "--windows: invalid int value: 'two'"),
                               (["--resamples", "10"], "--resamples 10: need 100 to 100000"),
                               (["--stretch", "0"], "--stretch 0: need 1 to the tokens of a "
                                                    "window"),
                               (["--stretch", str(T + 1)], f"--stretch {T + 1}: need 1 to {T}, "
                                                           "the tokens of a window"),
                               (["--seed", "-1"], "--seed -1: need 0 or more")):
            with self.subTest(extra=extra):
                done, _, _ = self.evaluate("identity", "f16", extra)
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertIn(message, done.stderr)
        # More windows than the text holds: the valid range is named.
        n = len(llama_gguf.Llama(self.m.model).encode(TEXT))
        done, _, _ = self.evaluate("identity", "f16", ["--windows", str(n // T + 1)])
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"--windows {n // T + 1}: text.txt has {n} tokens, room for 1 to {n // T} "
                      f"windows of {T} tokens (--tokens)", done.stderr)


class BootstrapTest(unittest.TestCase):
    """kv_quant_eval's intervals on synthetic positions whose spread is known: a percentile
    interval of a mean over n positions is about 2 * 1.96 sd / sqrt(n) wide."""

    N, RESAMPLES = 8192, 1000

    def data(self, seed=1):
        rng = np.random.default_rng(seed)
        n = self.N
        nll_ref = rng.exponential(3.0, n)  # the text's own spread: sd 3 nats
        noise = rng.normal(0.01, 0.05, n)  # the quantizer's: sd 0.05 nats
        kl = rng.exponential(0.02, n)
        agree = (rng.random(n) < 0.9).astype(np.float64)
        return kl, agree, nll_ref, nll_ref + noise, noise

    def intervals(self, stretch, windows=1):
        kl, agree, nll_ref, nll_test, noise = self.data()
        scored = np.ones(self.N, dtype=bool)
        counts = kv_quant_eval.resample_counts([self.N // windows] * windows, stretch,
                                               self.RESAMPLES, seed=0)
        return kv_quant_eval.summarize(kl, agree, nll_ref, nll_test, scored, counts), \
            (kl, agree, noise)

    def test_widths_are_the_spread_of_a_mean(self):
        for stretch, windows in ((1, 1), (16, 1), (64, 4)):
            with self.subTest(stretch=stretch, windows=windows):
                stats, (kl, agree, noise) = self.intervals(stretch, windows)
                root_n = np.sqrt(self.N)
                for key, sd, scale in (("kl_mean", kl.std(), 1.0),
                                       ("top1_agreement", agree.std(), 1.0),
                                       # paired: the noise's spread, not the text's (sd 3)
                                       ("ppl_change_pct", noise.std(), 100.0)):
                    lo, hi = stats[key + "_interval"]
                    want = 2 * 1.96 * scale * sd / root_n
                    self.assertLessEqual(lo, stats[key])
                    self.assertLessEqual(stats[key], hi)
                    self.assertGreater(hi - lo, 0.75 * want, (key, lo, hi, want))
                    self.assertLess(hi - lo, 1.33 * want, (key, lo, hi, want))
                self.assertTrue(stats["ppl_change_measurable"])  # +1 % against +-0.15 %

    def test_resample_counts_draw_stretches_within_windows(self):
        lengths, stretch = [96, 80], 16
        counts = kv_quant_eval.resample_counts(lengths, stretch, 200, seed=3)
        self.assertEqual(counts.shape, (200, 176))
        # Each window draws as many positions as it has; a stretch's positions go together.
        self.assertTrue(np.all(counts[:, :96].sum(axis=1) == 96))
        self.assertTrue(np.all(counts[:, 96:].sum(axis=1) == 80))
        stretches = counts.reshape(200, -1, stretch)
        self.assertTrue(np.all(stretches == stretches[:, :, :1]))
        self.assertGreater(len({tuple(row) for row in counts}), 190)  # the resamples differ
        self.assertTrue(np.array_equal(counts,
                                       kv_quant_eval.resample_counts(lengths, stretch, 200, 3)))


class RealQuantizerTest(unittest.TestCase):
    """`decodebench quantize` itself (with --decodebench BIN), on a model with head dim 32."""

    @classmethod
    def setUpClass(cls):
        if DECODEBENCH is None:
            raise unittest.SkipTest("no --decodebench BIN")
        try:
            done = subprocess.run([DECODEBENCH, "quantize", "--help"], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        except OSError as e:
            raise AssertionError(f"cannot run {DECODEBENCH}: {e}") from e
        if done.returncode != 0:
            raise AssertionError(f"{DECODEBENCH} has no `quantize` command, which "
                                 f"scripts/kv_quant_eval.py needs: {done.stdout.strip()[:300]}")
        cls.m = Fixture.get(WIDE)

    def round_trip(self, kv_dtype, tensor, x):
        d = tempfile.mkdtemp(dir=self.m.dir)
        src, dst = os.path.join(d, "in.npy"), os.path.join(d, "out.npy")
        np.save(src, x)
        done = subprocess.run([DECODEBENCH, "quantize", "--kv-dtype", kv_dtype, "--tensor",
                               tensor, src, dst], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        self.assertEqual(done.returncode, 0, done.stdout)
        y = np.load(dst)
        self.assertEqual((y.shape, y.dtype), (x.shape, np.float32))
        return y

    def test_formats_round_trip(self):
        x = self.m.dumped(1, "k_cache")
        for tensor in ("k", "v"):
            self.assertIsNone(mismatch(self.round_trip("f32", tensor, x), x, atol=0, rtol=0))
            self.assertIsNone(mismatch(self.round_trip("f16", tensor, x),
                                       x.astype(np.float16).astype(np.float32), atol=0, rtol=0))
        # int8: symmetric per (token, KV head): within half a step max|x| / 127 of x.
        step = np.abs(x).max(-1, keepdims=True) / 127
        err = np.abs(self.round_trip("int8", "v", x) - x)
        self.assertTrue(np.all(err <= 0.5 * step * 1.01 + 1e-6), err.max())
        for kv_dtype in ("bf16", "fp8_e4m3", "fp8_e5m2", "int4", "int4_token"):
            for tensor in ("k", "v"):
                y = self.round_trip(kv_dtype, tensor, x)
                rel = np.abs(y - x).max() / np.abs(x).max()
                self.assertTrue(0 < rel < 0.25, (kv_dtype, tensor, rel))

    def test_every_format_through_kv_quant_eval(self):
        formats = "f32,f16,bf16,fp8_e4m3,fp8_e5m2,int8,int4,int4_token"
        done, result = kv_eval(self.m.model, formats, DECODEBENCH)
        self.assertEqual(done.returncode, 0, done.stderr)
        kl = {r["kv_dtype"]: r["kl_mean"] for r in result["formats"]}
        self.assertEqual(list(kl), formats.split(","))
        self.assertEqual(kl["f32"], 0.0)  # the lossless round trip changes nothing
        self.assertGreater(kl["f16"], 0)
        self.assertLess(kl["f16"], kl["int8"])
        self.assertLess(kl["int8"], kl["int4"])


def main():
    global DECODEBENCH
    argv = list(sys.argv)
    if "--decodebench" in argv:
        i = argv.index("--decodebench")
        if i + 1 >= len(argv):
            print("kv_scripts_test: --decodebench needs a path", file=sys.stderr)
            sys.exit(2)
        DECODEBENCH = argv[i + 1]
        del argv[i:i + 2]
    try:
        unittest.main(argv=argv)
    finally:
        if Fixture.tmp is not None:
            Fixture.tmp.cleanup()


if __name__ == "__main__":
    main()
