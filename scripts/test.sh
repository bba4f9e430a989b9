#!/usr/bin/env bash
# The whole test suite: format check, Markdown links, warnings-as-errors build, unit tests,
# fuzz-corpus replays, the same under AddressSanitizer/UBSan, a short libFuzzer
# run of every fuzz target, the core tests under valgrind, the node agent's Go
# tests, the container image's build (its Release flags under GCC and clang,
# then the image itself), and the end-to-end suite against a real kube-apiserver and
# kube-scheduler (and a real kubelet, containerd and runc for the node agent).
#
#   scripts/test.sh            everything
#   SKIP_E2E=1 scripts/test.sh everything but the e2e
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$SECONDS
# shellcheck source=lib/sections.sh
. scripts/lib/sections.sh

# The background preparation (scripts/prepare.sh): its pid, and where its
# steps leave their markers and logs.
prepare_pid=""
prepare_dir=$PWD/build/prepare
finish() {
	local rc=$?
	if [[ -n $prepare_pid ]] && kill -0 "$prepare_pid" 2>/dev/null; then
		kill -TERM -- "-$prepare_pid" 2>/dev/null || kill -TERM "$prepare_pid" 2>/dev/null || true
	fi
	((rc == 0)) || { sections_report; echo "== FAILED after $((SECONDS - start))s"; }
}
trap finish EXIT

# prepare_wait STEP: returns once scripts/prepare.sh has finished STEP; fails
# with the step's log when the step failed or the preparation died without it.
prepare_wait() {
	local name=$1
	while [[ ! -f $prepare_dir/$name.ok ]]; do
		if [[ -f $prepare_dir/$name.failed ]] || ! kill -0 "$prepare_pid" 2>/dev/null; then
			[[ -f $prepare_dir/$name.ok ]] && break
			echo "prepare: step $name failed ($(cat "$prepare_dir/$name.failed" 2>/dev/null || echo "no result"))" >&2
			cat "$prepare_dir/$name.log" >&2 2>/dev/null || true
			return 1
		fi
		sleep 1
	done
	echo "prepare: $name was ready after $(cat "$prepare_dir/$name.ok") s of its own"
}

section "install-deps"
scripts/install-deps.sh

# Every Go build and test of the suite compiles with -trimpath, as
# scripts/build-scheduler.sh, the image and the e2e's binaries do: Go's build
# cache keys a package by its flags, so one set of flags compiles Kubernetes'
# packages once for go vet, the tests, flextopo-scheduler, its image and
# k8s-testenv (a cold run compiled them three times).
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"

section "clang-format"
git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror

section "Markdown: every relative link and #heading resolves, every code fence closes"
scripts/check-doc-links.py

section "layers (no stage includes a header of a stage above it)"
scripts/check-layers.sh

section "build (warnings are errors)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build

# From here the Go modules, Kubernetes' packages, the e2e's binaries, helm, the
# images' root filesystem and the API check's venv are fetched and compiled in
# the background (scripts/prepare.sh), beside the C steps below.
mkdir -p "$prepare_dir"
setsid scripts/prepare.sh "$prepare_dir" >"$prepare_dir/prepare.out" 2>&1 &
prepare_pid=$!
echo "prepare: started (pid $prepare_pid; logs in $prepare_dir)"

section "unit tests and fuzz corpora"
ctest --test-dir build --output-on-failure

section "AddressSanitizer + UBSan"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFLEXTOPO_SANITIZE=ON -DFLEXTOPO_BENCH=OFF >/dev/null
cmake --build build-asan
ctest --test-dir build-asan --output-on-failure -E bench

section "fuzzing: every target under libFuzzer with ASan/UBSan, 10 s each"
scripts/fuzz.sh --seconds 10

section "ThreadSanitizer (the per-node fragmentation cache, the state, the core through the scheduler's cgo glue)"
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFLEXTOPO_TSAN=ON -DFLEXTOPO_BENCH=OFF >/dev/null
cmake --build build-tsan --target test_frag test_state test_state_dra test_place test_embed \
	ft_app ft_server ft_kube ft_config ft_codec ft_core ft_base
ctest --test-dir build-tsan --output-on-failure -R '^test_(frag|state|state_dra|place|embed)$'
# The C core under ThreadSanitizer through the scheduler's cgo glue
# (TestConcurrentCycles: parallel Filter, the Binding and informer events at
# once). Go's -race instruments Go only, so this build links the TSan C
# libraries into a test binary without it. halt_on_error: Go's os.Exit
# skips TSan's exit code, so a race must stop the binary itself.
(
	repo_root=$PWD
	# shellcheck source=lib/cgo-core.sh
	. scripts/lib/cgo-core.sh
	CGO_CFLAGS=-fsanitize=thread
	CGO_LDFLAGS=-fsanitize=thread
	cgo_core_env "$repo_root/build-tsan"
	cd scheduler
	TSAN_OPTIONS=halt_on_error=1 go test -count=3 ./internal/core
)

section "valgrind (core and verbs)"
for t in test_place test_victims test_frag test_extender test_state test_decisions test_debug test_embed; do
	if [[ -x build/test/$t ]]; then
		valgrind -q --leak-check=full --error-exitcode=1 build/test/$t >/dev/null
		echo "valgrind $t: clean"
	fi
done

section "waiting for the background preparation: Go modules, the node agent compiled"
prepare_wait modules
prepare_wait node

section "node agent (gofmt, go vet, go test -race: the mapping, golden fixtures, the plugin over NRI's socket)"
(
	cd node
	unformatted=$(gofmt -l .)
	[[ -z $unformatted ]] || { echo "gofmt: not formatted: $unformatted" >&2; exit 1; }
	go vet ./...
	go test -race -count=1 ./...
	# The annotation codec is a module of its own (the e2e reads through it).
	cd alloc && go vet ./... && go test -race -count=1 ./...
)

section "waiting for the background preparation: flextopo-scheduler compiled"
prepare_wait scheduler

section "flextopo-scheduler (gofmt, go vet, the cgo glue under -race, the plugin's arguments; builds the binary)"
scripts/build-scheduler.sh >/dev/null
(
	cd scheduler
	unformatted=$(gofmt -l .)
	[[ -z $unformatted ]] || { echo "gofmt: not formatted: $unformatted" >&2; exit 1; }
	repo_root=$(cd .. && pwd)
	# shellcheck source=lib/cgo-core.sh
	. ../scripts/lib/cgo-core.sh
	cgo_core_env "$repo_root/build"
	go vet ./...
	go test -race -count=1 ./internal/...
	go test -count=1 ./pkg/...
)

section "waiting for the background preparation: the API check's venv"
prepare_wait api

section "API: schemathesis on both listeners, /metrics through prometheus_client, a demo node's SVG in headless Chromium"
FLEXTOPO_EXTENDER=build/flextopo-extender scripts/api-check.sh

section "waiting for the background preparation: the images' root filesystem"
prepare_wait image

section "Dockerfile: hadolint, the image's build under GCC and clang, the image built by buildah and run"
scripts/docker-lint.sh
scripts/image-check.sh

section "waiting for the background preparation: helm"
prepare_wait helm

section "Helm chart (lint, template, values schema; helm built from its Go module)"
scripts/chart-check.sh
helm_bin=$(scripts/chart-check.sh --build-only | tail -n1)

section "waiting for the background preparation: the e2e's binaries and test packages"
[[ ${SKIP_E2E:-0} == 1 ]] || prepare_wait e2e
wait "$prepare_pid"
prepare_pid=""
for f in "$prepare_dir"/*.ok; do
	echo "prepare: $(basename "$f" .ok) $(cat "$f") s"
done

if [[ ${SKIP_E2E:-0} != 1 ]]; then
	section "end-to-end (real kube-apiserver, etcd, kube-scheduler; the chart applied with server-side dry run)"
	FLEXTOPO_EXTENDER=build/flextopo-extender HELM=$helm_bin scripts/e2e.sh
fi
sections_report
echo "== all tests passed in $((SECONDS - start))s"
