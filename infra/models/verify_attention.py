#!/usr/bin/env python3
"""Verify the attention graph (convert_bert_to_onnx.py attention) against a numpy forward pass.

Checks (exit status 1 when a hard check fails):
  1. ONNX (onnxruntime, fp32) `attention` vs a float64 numpy BertModel forward computed
     straight from model.safetensors (the same reference as verify_onnx.py, here keeping the
     softmax probabilities): the mean over the chosen upper layers and all heads, on a padded
     batch of turn pairs of different lengths, max abs diff < 1e-5 on every real
     (query, key) position.
  2. Every real query row sums to 1 over the real keys (a softmax over the unpadded keys).
  3. Reported, not checked (a signal, not a law): on pairs "[CLS] previous turn current
     turn [SEP]", the share of the current turn's attention that goes to the previous turn,
     for a pair that continues a topic and a pair that changes it.

Writes a JSON report with all numbers (--report).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from safetensors import safe_open
from tokenizers import Tokenizer

# Turn pairs as the segmenter builds them: previous turn, then the current one, in one sequence.
PAIRS = [
    ("I adopted a puppy last week, a golden retriever.", "What did you name the puppy? Is it house trained yet?"),
    ("I adopted a puppy last week, a golden retriever.", "My quarterly tax return is due on Friday and I have not started."),
    ("Caroline: I went to the LGBTQ support group yesterday and it was so powerful.", "Melanie: That sounds amazing, what did they talk about?"),
    ("Short.", " ".join(["A much longer turn that goes on about the weather and the garden."] * 6)),
]


def load_tokenizer(model_dir: Path, max_len: int) -> Tokenizer:
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=max_len)
    return tok


def encode_pairs(tok: Tokenizer, pairs: list[tuple[str, str]]) -> tuple[dict[str, np.ndarray], list[tuple[int, int, int]]]:
    """[CLS] prev cur [SEP] per pair (as the TypeScript adapter builds it); spans (prev start, cur start, cur end)."""
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    seqs: list[list[int]] = []
    spans: list[tuple[int, int, int]] = []
    for prev, cur in pairs:
        p = tok.encode(prev, add_special_tokens=False).ids
        c = tok.encode(cur, add_special_tokens=False).ids
        seqs.append([cls, *p, *c, sep])
        spans.append((1, 1 + len(p), 1 + len(p) + len(c)))
    seq = max(len(s) for s in seqs)
    ids = np.zeros((len(seqs), seq), dtype=np.int64)
    mask = np.zeros((len(seqs), seq), dtype=np.int64)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
        mask[i, : len(s)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}, spans


def numpy_attention(weights_path: Path, config: dict, feeds: dict[str, np.ndarray], layers: list[int]) -> np.ndarray:
    """Reference: float64 BertModel forward, mean of the softmax probabilities over `layers` and heads."""
    with safe_open(str(weights_path), framework="np") as f:
        w = {k.removeprefix("bert."): f.get_tensor(k).astype(np.float64) for k in f.keys() if not k.endswith("position_ids")}
    eps = config["layer_norm_eps"]
    n_heads = config["num_attention_heads"]
    hidden = config["hidden_size"]
    hd = hidden // n_heads

    def ln(x: np.ndarray, p: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[p + ".weight"] + w[p + ".bias"]

    def dense(x: np.ndarray, p: str) -> np.ndarray:
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    erf = np.vectorize(math.erf)
    ids, mask, tt = feeds["input_ids"], feeds["attention_mask"], feeds["token_type_ids"]
    b, s = ids.shape
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][np.arange(s)][None] + w["embeddings.token_type_embeddings.weight"][tt]
    x = ln(x, "embeddings.LayerNorm")
    ext = (1.0 - mask[:, None, None, :].astype(np.float64)) * np.finfo(np.float32).min
    acc = np.zeros((b, s, s))
    for i in range(max(layers) + 1):
        p = f"encoder.layer.{i}"

        def split(t: np.ndarray) -> np.ndarray:
            return t.reshape(b, s, n_heads, hd).transpose(0, 2, 1, 3)

        q = split(dense(x, p + ".attention.self.query"))
        k = split(dense(x, p + ".attention.self.key"))
        v = split(dense(x, p + ".attention.self.value"))
        sc = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + ext
        sc = sc - sc.max(-1, keepdims=True)
        pr = np.exp(sc)
        pr = pr / pr.sum(-1, keepdims=True)
        if i in layers:
            acc += pr.mean(1)
        ctx = (pr @ v).transpose(0, 2, 1, 3).reshape(b, s, hidden)
        x = ln(dense(ctx, p + ".attention.output.dense") + x, p + ".attention.output.LayerNorm")
        h = dense(x, p + ".intermediate.dense")
        h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))
        x = ln(dense(h, p + ".output.dense") + x, p + ".output.LayerNorm")
    return acc / len(layers)


def share_on_previous(att: np.ndarray, spans: tuple[int, int, int], size: int) -> float:
    """Mean over the current turn's tokens of the share of attention on the previous turn (specials masked)."""
    p0, c0, c1 = spans
    att = att[:size, :size]
    keys = np.arange(size)
    real = (keys > 0) & (keys < size - 1)
    rows = att[c0:c1][:, real]
    to_prev = att[c0:c1][:, (keys >= p0) & (keys < c0)]
    return float((to_prev.sum(1) / rows.sum(1)).mean())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", required=True, type=Path, help="folder with tokenizer.json and config.json")
    ap.add_argument("--attention", required=True, type=Path, help="the attention ONNX graph")
    ap.add_argument("--weights", required=True, type=Path, help="model.safetensors the graph was built from")
    ap.add_argument("--layers", required=True, help="comma-separated layer indices the graph averages")
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--report", type=Path)
    args = ap.parse_args()

    config = json.loads((args.model_dir / "config.json").read_text())
    layers = [int(x) for x in args.layers.split(",")]
    tok = load_tokenizer(args.model_dir, args.max_len)
    ort.set_default_logger_severity(3)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(args.attention), opts, providers=["CPUExecutionProvider"])

    feeds, spans = encode_pairs(tok, PAIRS)
    (got,) = sess.run(["attention"], feeds)
    ref = numpy_attention(args.weights, config, feeds, layers)
    mask = feeds["attention_mask"].astype(bool)
    valid = mask[:, :, None] & mask[:, None, :]
    diff = float(np.abs(got - ref)[valid].max())
    row_sums = (got * mask[:, None, :]).sum(-1)[mask]
    row_err = float(np.abs(row_sums - 1.0).max())
    ok = diff < 1e-5 and row_err < 1e-4
    print(f"[verify-attention] numpy(float64) vs ONNX: max|diff| over real positions = {diff:.3e}; max|row sum - 1| = {row_err:.3e}")
    shares = [share_on_previous(got[i], spans[i], int(mask[i].sum())) for i in range(len(PAIRS))]
    for (prev, cur), sh in zip(PAIRS, shares):
        print(f"[verify-attention]   share on previous turn {sh:.4f}: {prev[:40]!r} -> {cur[:40]!r}")
    report = {
        "layers": layers,
        "pairs": len(PAIRS),
        "seq_len": int(feeds["input_ids"].shape[1]),
        "max_abs_diff_valid_positions": diff,
        "max_abs_row_sum_error": row_err,
        "share_on_previous": {"same_topic": shares[0], "topic_change": shares[1], "locomo_like": shares[2], "short_then_long": shares[3]},
        "ok": ok,
    }
    if not ok:
        print("[verify-attention] FAIL: the attention graph differs from the numpy reference", file=sys.stderr)
    if args.report:
        args.report.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
