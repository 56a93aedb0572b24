#!/usr/bin/env python3
"""Write a tiny LLMLingua-2-shaped ONNX token classifier (random weights, fixed seed) for tests.

Only numpy and onnx are needed (models/.venv after `node scripts/setup.mjs`). The graph is a
real BERT-style encoder, small enough to build and run in well under a second:

  x = LayerNorm(word[input_ids] + position[0..S-1])
  for each layer (2): multi-head self-attention (2 heads) with a real softmax over
      q k^T / sqrt(d) + (1 - attention_mask) * min_float, residual + LayerNorm,
      exact-erf GELU feed-forward, residual + LayerNorm
  logits = x W + b                                                 [batch, seq, 2]
  attentions = stack of every layer's softmax probabilities        [batch, layers, heads, seq, seq]

Inputs: input_ids, attention_mask (int64, [batch, sequence]); no token_type_ids (like an
XLM-RoBERTa export), so the loader's "feed token_type_ids only when the model has it" path is
exercised. The position table has MAX_LEN rows, so a longer input fails inside the graph:
callers must window.

The vocabulary is a small cased WordPiece one written as tokenizer.json (BertNormalizer without
lowercasing, BertPreTokenizer, WordPiece, [CLS] $A [SEP]): a few whole words, every single
letter and digit as a word start and as a "##" continuation, and punctuation, so any ASCII text
tokenises without [UNK] and words outside the list split into several sub-tokens.

Usage: make_tiny_token_classifier.py OUT_DIR [--seed 7] [--max-len 32]
         [--layers 2 --hidden 32 --heads 2 --ffn 64]   (sizes, for throughput proxies only)
Writes OUT_DIR/{model.onnx, tokenizer.json, tokenizer_config.json, manifest.json}.
"""

from __future__ import annotations

import argparse
import json
import math
import string
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
# Sizes (defaults: tiny). --layers/--hidden/--heads/--ffn give e.g. a bert-base-shaped random model
# (12/768/12/3072) for throughput measurements; its decisions mean nothing.
HIDDEN = 32
HEADS = 2
LAYERS = 2
FFN = 64
LABELS = 2
KEEP_LABEL = 1

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [
    "the", "a", "an", "and", "or", "to", "of", "in", "on", "at", "for", "with", "is", "was", "are",
    "i", "you", "we", "they", "he", "she", "it", "my", "your", "our", "that", "this", "so", "but",
    "went", "go", "going", "met", "see", "saw", "told", "said", "like", "love", "really", "very",
    "just", "about", "yesterday", "today", "tomorrow", "week", "month", "year", "last", "next",
    "dog", "cat", "park", "job", "work", "book", "music", "painting", "trip", "city", "friend",
    "family", "dance", "studio", "class", "game", "happy", "great", "new", "old", "time", "day",
    "Jon", "Gina", "Paris", "May", "Monday",
    "un", "##believ", "##able", "play", "##ing", "##ed", "##s",
]


def build_vocab() -> dict[str, int]:
    tokens: list[str] = list(SPECIALS)
    seen = set(tokens)

    def add(t: str) -> None:
        if t not in seen:
            seen.add(t)
            tokens.append(t)

    for w in WORDS:
        add(w)
    for c in string.ascii_letters + string.digits:
        add(c)
        add("##" + c)
    for c in string.punctuation:
        add(c)
    return {t: i for i, t in enumerate(tokens)}


def tokenizer_json(vocab: dict[str, int], max_len: int) -> dict[str, object]:
    def special(tok: str) -> dict[str, object]:
        return {
            "id": vocab[tok],
            "content": tok,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }

    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [special(t) for t in SPECIALS],
        "normalizer": {
            "type": "BertNormalizer",
            "clean_text": True,
            "handle_chinese_chars": True,
            "strip_accents": None,
            "lowercase": False,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 1}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 1}},
            ],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [vocab["[CLS]"]], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [vocab["[SEP]"]], "tokens": ["[SEP]"]},
            },
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": vocab,
        },
    }


def tokenizer_config(max_len: int) -> dict[str, object]:
    return {
        "do_lower_case": False,
        "unk_token": "[UNK]",
        "sep_token": "[SEP]",
        "pad_token": "[PAD]",
        "cls_token": "[CLS]",
        "mask_token": "[MASK]",
        "tokenize_chinese_chars": True,
        "strip_accents": None,
        "tokenizer_class": "BertTokenizer",
        "model_max_length": max_len,
    }


class Graph:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def const(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def rand(self, name: str, shape: tuple[int, ...], std: float) -> str:
        return self.const(name, (self.rng.standard_normal(shape) * std).astype(np.float32))

    def op(self, op_type: str, inputs: list[str], hint: str, out: str | None = None, **attrs: object) -> str:
        self.n += 1
        name = out if out is not None else f"{hint}_{self.n}"
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=f"{op_type}_{self.n}", **attrs))
        return name

    def linear(self, x: str, prefix: str, d_in: int, d_out: int, std: float) -> str:
        y = self.op("MatMul", [x, self.rand(prefix + ".weight", (d_in, d_out), std)], prefix + ".mm")
        return self.op("Add", [y, self.rand(prefix + ".bias", (d_out,), 0.02)], prefix + ".out")

    def layer_norm(self, x: str, prefix: str) -> str:
        w = self.const(prefix + ".weight", np.ones(HIDDEN, dtype=np.float32))
        b = self.const(prefix + ".bias", np.zeros(HIDDEN, dtype=np.float32))
        return self.op("LayerNormalization", [x, w, b], prefix + ".out", axis=-1, epsilon=1e-12)


def build_model(vocab_size: int, max_len: int, seed: int) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    g = Graph(rng)
    head_dim = HIDDEN // HEADS
    zero = g.const("c.zero_1d", np.array([0], dtype=np.int64))
    one_f = g.const("c.one", np.array(1.0, dtype=np.float32))
    neg = g.const("c.mask_min", np.array(np.finfo(np.float32).min, dtype=np.float32))
    scale = g.const("c.scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    sqrt2 = g.const("c.sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    half = g.const("c.half", np.array(0.5, dtype=np.float32))
    split = g.const("c.split", np.array([0, 0, HEADS, head_dim], dtype=np.int64))
    merge = g.const("c.merge", np.array([0, 0, HIDDEN], dtype=np.int64))
    axes12 = g.const("c.axes12", np.array([1, 2], dtype=np.int64))
    axis1 = g.const("c.axis1", np.array([1], dtype=np.int64))

    word = g.op("Gather", [g.rand("emb.word", (vocab_size, HIDDEN), 1.0), "input_ids"], "emb.word", axis=0)
    seq = g.op("Shape", ["input_ids"], "emb.seq", start=1, end=2)
    pos = g.op("Slice", [g.rand("emb.pos", (max_len, HIDDEN), 0.5), zero, seq, zero], "emb.pos")
    x = g.layer_norm(g.op("Add", [word, pos], "emb.sum"), "emb.ln")

    mask_f = g.op("Cast", ["attention_mask"], "mask.f", to=TensorProto.FLOAT)
    add_mask = g.op("Mul", [g.op("Sub", [one_f, mask_f], "mask.inv"), neg], "mask.add")
    add_mask = g.op("Unsqueeze", [add_mask, axes12], "mask.ext")

    layer_probs: list[str] = []
    std = 1.0 / math.sqrt(HIDDEN)
    for i in range(LAYERS):
        p = f"layer{i}"

        def heads(t: str, perm: list[int], tag: str, p: str = p) -> str:
            return g.op("Transpose", [g.op("Reshape", [t, split], f"{p}.{tag}.split")], f"{p}.{tag}.h", perm=perm)

        q = heads(g.linear(x, f"{p}.q", HIDDEN, HIDDEN, std * 2), [0, 2, 1, 3], "q")
        k = heads(g.linear(x, f"{p}.k", HIDDEN, HIDDEN, std * 2), [0, 2, 3, 1], "k")
        v = heads(g.linear(x, f"{p}.v", HIDDEN, HIDDEN, std), [0, 2, 1, 3], "v")
        s = g.op("Mul", [g.op("MatMul", [q, k], f"{p}.qk"), scale], f"{p}.scaled")
        probs = g.op("Softmax", [g.op("Add", [s, add_mask], f"{p}.masked")], f"{p}.probs", axis=-1)
        layer_probs.append(g.op("Unsqueeze", [probs, axis1], f"{p}.probs5"))
        ctx = g.op("MatMul", [probs, v], f"{p}.ctx")
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], f"{p}.ctx.t", perm=[0, 2, 1, 3]), merge], f"{p}.ctx.m")
        a = g.linear(ctx, f"{p}.o", HIDDEN, HIDDEN, std)
        x = g.layer_norm(g.op("Add", [a, x], f"{p}.res1"), f"{p}.ln1")
        h = g.linear(x, f"{p}.ffn1", HIDDEN, FFN, std)
        e = g.op("Add", [g.op("Erf", [g.op("Div", [h, sqrt2], f"{p}.g.div")], f"{p}.g.erf"), one_f], f"{p}.g.add")
        h = g.op("Mul", [g.op("Mul", [h, e], f"{p}.g.mul"), half], f"{p}.g.out")
        o = g.linear(h, f"{p}.ffn2", FFN, HIDDEN, 1.0 / math.sqrt(FFN))
        x = g.layer_norm(g.op("Add", [o, x], f"{p}.res2"), f"{p}.ln2")

    logits = g.linear(x, "classifier", HIDDEN, LABELS, 2.0 / math.sqrt(HIDDEN))
    g.op("Identity", [logits], "logits", out="logits")
    g.op("Concat", layer_probs, "attentions", out="attentions", axis=1)

    dims = ["batch", "sequence"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in ("input_ids", "attention_mask")]
    outputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", LABELS]),
        helper.make_tensor_value_info(
            "attentions", TensorProto.FLOAT, ["batch", LAYERS, HEADS, "sequence", "sequence"]
        ),
    ]
    graph = helper.make_graph(g.nodes, "tiny_token_classifier", inputs, outputs, initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="make_tiny_token_classifier.py")
    model.ir_version = 8
    model.doc_string = f"tiny token classifier for tests: {LAYERS} layers, {HEADS} heads, hidden {HIDDEN}, seed {seed}"
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> None:
    global HIDDEN, HEADS, LAYERS, FFN
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-len", type=int, default=32)
    ap.add_argument("--layers", type=int, default=LAYERS)
    ap.add_argument("--hidden", type=int, default=HIDDEN)
    ap.add_argument("--heads", type=int, default=HEADS)
    ap.add_argument("--ffn", type=int, default=FFN)
    args = ap.parse_args()
    HIDDEN, HEADS, LAYERS, FFN = args.hidden, args.heads, args.layers, args.ffn
    if HIDDEN % HEADS:
        raise SystemExit("--hidden must be divisible by --heads")
    if args.max_len < 4:
        raise SystemExit("--max-len must be at least 4")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    vocab = build_vocab()
    onnx.save(build_model(len(vocab), args.max_len, args.seed), str(out / "model.onnx"))
    (out / "tokenizer.json").write_text(json.dumps(tokenizer_json(vocab, args.max_len), indent=1))
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(args.max_len), indent=1))
    manifest = {
        "name": "tiny-token-classifier",
        "kind": "token-classifier",
        "model": "model.onnx",
        "tokenizer": "tokenizer.json",
        "tokenizer_config": "tokenizer_config.json",
        "max_seq_length": args.max_len,
        "num_labels": LABELS,
        "keep_label": KEEP_LABEL,
        "logits_output": "logits",
        "output_attentions": True,
        "attention_outputs": ["attentions"],
        "word_aggregation": "mean",
        "layers": LAYERS,
        "heads": HEADS,
        "source": {"kind": "generated", "script": "infra/models/make_tiny_token_classifier.py", "seed": args.seed},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(json.dumps({"out": str(out), "vocab": len(vocab), "max_seq_length": args.max_len}))


if __name__ == "__main__":
    main()
