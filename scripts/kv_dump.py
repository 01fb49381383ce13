#!/usr/bin/env python3
"""Runs a real Llama-architecture model (default SmolLM2-135M-Instruct, see smollm2_gguf.py) on a
text and writes each layer's query, K (after RoPE) and V in the layout of
`decodebench sweep --dump` (docs/report-schema.md), one directory per layer:

  OUT/layer_00/ ... OUT/layer_NN/   a decode step of B sequences that share the text's KV blocks
    q.npy             float32 [B, Hq, d]   queries (after RoPE) at B positions pos_b, evenly
                                           spaced over the text's second half, the last included
    k_cache.npy       float32 [num_blocks, Hkv, P, d]   K after RoPE of all T tokens
    v_cache.npy       float32 [num_blocks, Hkv, P, d]   V; block i holds tokens i*P .. i*P+P-1
    block_tables.npy  int32 [B, num_blocks]   0, 1, 2, ... (physical = logical), -1 past the
                                              blocks sequence b reads, as in decodebench's dumps
    context_lens.npy  int32 [B]            pos_b + 1
    ref.npy           float32 [B, Hq, d]   softmax(softmax_scale * K . q) @ V over each context,
                                           query head h reading KV head h // (Hq / Hkv)
    meta.json         written last: its presence means the directory is whole
  OUT/tokens.npy      int32 [T]            the token ids

T is the text's first --tokens tokens cut to a multiple of P (--block-size). K's channels are
in the checkpoint's order, RoPE rotating (x[i], x[i + d/2]) (llama_gguf.py says why).

  python3 scripts/kv_dump.py --out DIR [--model PATH.gguf] [--text FILE] [--tokens N]
                             [--queries B] [--block-size P]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_gguf  # noqa: E402
from llama_gguf import InputError, to_blocks  # noqa: E402


def query_positions(t: int, b: int) -> np.ndarray:
    """b positions evenly spaced over [t // 2, t - 1], the last one included."""
    if b < 1:
        raise InputError(f"--queries {b}: need at least 1")
    if b > t - t // 2:
        raise InputError(f"--queries {b}: the second half of the text has only {t - t // 2} "
                         "positions")
    if b == 1:
        return np.array([t - 1])
    return np.round(np.linspace(t // 2, t - 1, b)).astype(np.int64)


def reference(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray, tables: np.ndarray,
              lens: np.ndarray, scale: float) -> np.ndarray:
    """The attention output [B, Hq, d] of each query over its context, in double, read through
    the block tables as any reader of the dump would."""
    b, hq, d = q.shape
    hkv, p = k_cache.shape[1], k_cache.shape[2]
    out = np.empty((b, hq, d), dtype=np.float64)
    for s in range(b):
        n = int(lens[s])
        blocks = tables[s, :(n + p - 1) // p]
        k = k_cache[blocks].transpose(1, 0, 2, 3).reshape(hkv, -1, d)[:, :n].astype(np.float64)
        v = v_cache[blocks].transpose(1, 0, 2, 3).reshape(hkv, -1, d)[:, :n].astype(np.float64)
        for h in range(hq):
            kv = h // (hq // hkv)
            logits = scale * (k[kv] @ q[s, h].astype(np.float64))
            w = np.exp(logits - logits.max())
            out[s, h] = (w / w.sum()) @ v[kv]
    return out.astype(np.float32)


def write_json_atomic(path: str, value: dict) -> None:
    part = path + ".part"
    with open(part, "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")
    os.replace(part, path)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Writes a real model's per-layer Q, K (after RoPE) and V on a text in "
                    "decodebench's --dump layout (docs/design.md, \"Real activations\").")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="output directory (layer_00/ ... are written in it)")
    llama_gguf.add_model_args(parser)
    llama_gguf.add_text_args(parser, tokens=1024)
    parser.add_argument("--queries", type=int, default=16, metavar="B",
                        help="query positions (the batch), evenly spaced over the text's second "
                             "half, the last included (default: 16)")
    parser.add_argument("--block-size", type=int, default=16, metavar="P",
                        help="tokens per KV block (default: 16)")
    args = parser.parse_args(argv)
    try:
        if args.block_size < 1:
            raise InputError(f"--block-size {args.block_size}: need at least 1")
        start = time.time()
        model = llama_gguf.load_model(args.model, args.cache_dir)
        hp = model.hp
        text_path, tokens = llama_gguf.text_tokens(model, args.text, args.tokens,
                                                   multiple=args.block_size)
        t, p = len(tokens), args.block_size
        positions = query_positions(t, args.queries)
        print(f"kv_dump: {hp.name}: {hp.n_layers} layers, {hp.n_head} query / {hp.n_head_kv} "
              f"KV heads, head dim {hp.head_dim}; {t} tokens of {text_path}", file=sys.stderr)
        try:
            os.makedirs(args.out, exist_ok=True)
        except OSError as e:
            raise InputError(f"--out {args.out}: {e}") from e

        num_blocks = t // p
        lens = (positions + 1).astype(np.int32)
        tables = np.tile(np.arange(num_blocks, dtype=np.int32), (len(positions), 1))
        tables[np.arange(num_blocks)[None, :] >= ((lens + p - 1) // p)[:, None]] = -1
        np.save(os.path.join(args.out, "tokens.npy"), tokens.astype(np.int32))

        def dump_layer(i: int, q: np.ndarray, k: np.ndarray, v: np.ndarray):
            layer_dir = os.path.join(args.out, f"layer_{i:02d}")
            os.makedirs(layer_dir, exist_ok=True)
            meta_path = os.path.join(layer_dir, "meta.json")
            if os.path.exists(meta_path):
                os.remove(meta_path)  # a stale set is not whole until rewritten
            q_b = np.ascontiguousarray(q[:, positions].transpose(1, 0, 2), dtype=np.float32)
            k_cache, v_cache = to_blocks(k, p), to_blocks(v, p)
            files = {"q": q_b, "k_cache": k_cache, "v_cache": v_cache, "block_tables": tables,
                     "context_lens": lens,
                     "ref": reference(q_b, k_cache, v_cache, tables, lens, model.softmax_scale)}
            for name, array in files.items():
                np.save(os.path.join(layer_dir, name + ".npy"), array)
            write_json_atomic(meta_path, {
                "kernel": "none",
                "backend": "kv_dump",
                "model": hp.name,
                "num_q_heads": hp.n_head,
                "num_kv_heads": hp.n_head_kv,
                "head_dim": hp.head_dim,
                "block_size": p,
                "kv_dtype": "f32",
                "q_dtype": "f32",
                "softmax_scale": model.softmax_scale,
                "k_scale": 1.0,
                "v_scale": 1.0,
                "hit_rate": 0.0,
                "hit_rate_actual": 0.0,
                "prefix_groups": 0,
                "seed": 0,
                "batch": len(positions),
                "context": str(t),  # a label, as in decodebench's dumps
                "num_blocks": num_blocks,
                "max_blocks_per_seq": num_blocks,
                "layer": i,
                "num_layers": hp.n_layers,
                "tokens": t,
                "text": os.path.basename(text_path),
                "query_positions": [int(x) for x in positions],
                "rope": "rotate_half: pairs (x[i], x[i + d/2]), checkpoint channel order",
                "note": (f"Layer {i} of {hp.name} on the first {t} tokens of "
                         f"{os.path.basename(text_path)} (ids in ../tokens.npy). k_cache/v_cache: "
                         "K after RoPE and V of every token, block i holding tokens i*P..i*P+P-1; "
                         "q: the queries (after RoPE) at query_positions, sequence b's context "
                         "the first context_lens[b] tokens. ref[b,h] = softmax(softmax_scale * "
                         "K . q[b,h]) @ V over that context, found through block_tables[b]; "
                         "query head h reads KV head h // (num_q_heads / num_kv_heads)."),
            })
            return k, v

        model.forward(tokens, kv_hook=dump_layer, logits="none")
        print(f"kv_dump: wrote {args.out}/layer_00 .. layer_{hp.n_layers - 1:02d} (batch "
              f"{len(positions)}, {num_blocks} blocks of {p}) in {time.time() - start:.1f} s",
              file=sys.stderr)
    except InputError as e:
        print(f"kv_dump: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"kv_dump: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
