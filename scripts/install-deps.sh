#!/usr/bin/env bash
# Install what building and testing flextopo needs, on Debian (bookworm or
# later), skipping what is already there. Runs as root or through sudo.
#
#   scripts/install-deps.sh          build + unit test dependencies, and Go for the e2e
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config git ca-certificates
	libmicrohttpd-dev libcjson-dev libcurl4-openssl-dev libyaml-dev libhwloc-dev hwloc
	libcmocka-dev uthash-dev clang-format valgrind python3 python3-venv curl
	runc busybox-static clang libclang-rt-dev buildah mmdebstrap)
# runc and busybox-static: the e2e's real node (containerd runs its containers
# with runc; its one image is built from the static busybox).
# clang and libclang-rt-dev: scripts/fuzz.sh. Debian's clang package leaves out
# the sanitizer and libFuzzer runtimes (libclang_rt.fuzzer, .asan, .ubsan);
# libclang-rt-dev brings them for the default clang (libclang-rt-14-dev on
# bookworm).
# buildah and mmdebstrap: scripts/image-check.sh builds the container image without
# a Docker engine, on a Debian root filesystem of its own making.

sudo=""
if [[ $(id -u) -ne 0 ]]; then
	sudo=sudo
fi

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		missing+=("$p")
	fi
done
if ((${#missing[@]})); then
	echo "install-deps: installing ${missing[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The e2e builds Kubernetes from its Go modules and needs the Go release named
# in test/e2e/go.mod. Debian's own Go is older; a newer toolchain is itself a
# module (golang.org/toolchain) on the Go module proxy, so an old go can fetch it.
if [[ ${SKIP_GO:-0} == 1 ]]; then
	exit 0
fi
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
want=$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$repo_root/test/e2e/go.mod")
have=$(go env GOVERSION 2>/dev/null | sed 's/^go//' || true)
if [[ -z $have ]] || [[ $(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1) != "$want" ]]; then
	if ! command -v go >/dev/null 2>&1; then
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends golang-go
	fi
	toolchain="golang.org/toolchain@v0.0.1-go${want}.linux-$(dpkg --print-architecture)"
	echo "install-deps: fetching Go $want as module $toolchain"
	dir=$(cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "$toolchain" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	$sudo ln -sf "$dir/bin/go" /usr/local/bin/go
	$sudo ln -sf "$dir/bin/gofmt" /usr/local/bin/gofmt
	hash -r
fi
echo "install-deps: ready ($(cmake --version | head -1), $(go version))"
