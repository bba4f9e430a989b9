# flextopo container images: the extender (the default target), the node
# agent (target node: flextopo-node with flextopo-discover) and
# flextopo-scheduler (target scheduler: kube-scheduler with flextopo's
# framework plugins, scheduler/README.md; the chart's scheduler mode).
#
# Build (with a Docker/BuildKit engine, or without one by buildah):
#   docker build -t flextopo/extender:0.1.0 .
#   docker build --target node -t flextopo/node:0.1.0 .
#   docker build --target scheduler -t flextopo/scheduler:0.1.0 .
# CI has no engine. scripts/image-check.sh builds the build stage's files with its
# script (scripts/release-build.sh) under GCC and clang, then the extender image
# itself with Debian's buildah, and runs its entrypoint once; then the scheduler
# image, on a Go base of the machine's own Go toolchain (GO_BASE) with the Go
# modules from the machine's module cache (GOPROXY=file://...), and runs it once.
# Each runtime stage holds its binaries and the shared libraries they link,
# and works with a read-only root filesystem; the extender and the scheduler
# run as an unprivileged user. The extender's runtime stage stays last: it is
# the target a build without --target makes.

# The base is one Debian release for both stages; pin it by digest when publishing
# (docker build --build-arg BASE=debian:bookworm-slim@sha256:...).
ARG BASE=debian:bookworm-slim
# The scheduler's build stage: Go of the release scheduler/go.mod names, on the same
# Debian release.
ARG GO_BASE=golang:1.26-bookworm

FROM ${BASE} AS build
# Debian's own packages of the release are the pin; exact versions would break with every
# security update (hadolint DL3008).
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config git ca-certificates \
      libmicrohttpd-dev libcjson-dev libcurl4-openssl-dev libyaml-dev libhwloc-dev uthash-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY configs configs
COPY include include
COPY src src
COPY test test
COPY bench bench
# The build and its flags live in the script, which CI runs too.
COPY scripts/release-build.sh scripts/
RUN scripts/release-build.sh /build

# The node agent is Go (NRI and kubelet's PodResources API have maintained Go
# libraries); a static binary.
FROM golang:1.26-bookworm AS node-build
WORKDIR /src/node
COPY node/go.mod node/go.sum ./
# The annotation codec, a module of its own that go.mod replaces locally.
COPY node/alloc/go.mod ./alloc/
RUN go mod download
COPY node/ ./
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/flextopo-node ./cmd/flextopo-node

FROM ${BASE} AS node
# flextopo-discover's libraries; NVML comes from the NVIDIA runtime at run time.
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcjson1 libcurl4 libyaml-0-2 libhwloc15 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/flextopo-discover /usr/local/bin/
COPY --from=node-build /out/flextopo-node /usr/local/bin/
LABEL org.opencontainers.image.title="flextopo-node" \
      org.opencontainers.image.description="flextopo node agent: NRI plugin that applies GPU and CPU allocations, and reports what the node assigned" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"
# Root without capabilities, to open the root-owned NRI and kubelet sockets
# (the chart drops every capability and mounts the root filesystem read-only).
# hadolint ignore=DL3002
USER 0:0
EXPOSE 8095
ENTRYPOINT ["/usr/local/bin/flextopo-node"]

# flextopo-scheduler: the C core's static libraries and kube-scheduler's Go
# modules, linked by cgo. scripts/build-scheduler.sh is the build (CMake for
# the libraries, then go build with the flags it sets), as it is outside the
# image; a Release build of the libraries here.
FROM ${GO_BASE} AS scheduler-build
# Where go mod download fetches the modules (go.sum checks each).
ARG GOPROXY=https://proxy.golang.org,direct
# gcc and libc6-dev for cgo: the golang image has them, a plain Debian base does not.
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc libc6-dev cmake ninja-build pkg-config \
      libmicrohttpd-dev libcjson-dev libcurl4-openssl-dev libyaml-dev libhwloc-dev uthash-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src/scheduler
COPY scheduler/go.mod scheduler/go.sum ./
RUN go mod download
WORKDIR /src
COPY CMakeLists.txt ./
COPY configs configs
COPY include include
COPY src src
COPY bench bench
COPY scheduler scheduler
COPY scripts/build-scheduler.sh scripts/
COPY scripts/lib/cgo-core.sh scripts/lib/
RUN CMAKE_BUILD_TYPE=Release CMAKE_GENERATOR=Ninja FLEXTOPO_BUILD_DIR=/build \
      scripts/build-scheduler.sh /out/flextopo-scheduler

FROM ${BASE} AS scheduler
# What the binary links (ldd): libmicrohttpd (with gnutls), libcjson, libcurl,
# libyaml; no hwloc, which only discovery uses.
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libmicrohttpd12 libcjson1 libcurl4 libyaml-0-2 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 65532 --no-create-home --shell /usr/sbin/nologin flextopo
COPY --from=scheduler-build /out/flextopo-scheduler /usr/local/bin/
LABEL org.opencontainers.image.title="flextopo-scheduler" \
      org.opencontainers.image.description="kube-scheduler v1.36.3 with flextopo's topology-aware GPU placement as framework plugins" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 65532:65532
# 10259: kube-scheduler's secure port (/healthz, /readyz, /metrics). The
# debug API and /metrics of flextopo are on flextopo.yaml's debugListen.
EXPOSE 10259
ENTRYPOINT ["/usr/local/bin/flextopo-scheduler"]

FROM ${BASE} AS runtime
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libmicrohttpd12 libcjson1 libcurl4 libyaml-0-2 libhwloc15 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 65532 --no-create-home --shell /usr/sbin/nologin flextopo
COPY --from=build /build/flextopo-extender /build/flextopo-discover /usr/local/bin/
COPY configs/flextopo.yaml /etc/flextopo/flextopo.yaml
LABEL org.opencontainers.image.title="flextopo-extender" \
      org.opencontainers.image.description="Topology-aware kube-scheduler extender for GPU workloads" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 65532:65532
EXPOSE 8888
ENTRYPOINT ["/usr/local/bin/flextopo-extender"]
CMD ["--config", "/etc/flextopo/flextopo.yaml"]
