#!/usr/bin/env bash
# Downloads and compiles what the suite's Go, API, image, chart and end-to-end
# steps need, and runs none of their tests. scripts/test.sh starts it in the
# background once the C build is done, so that a cold machine fetches modules,
# packages and a Debian root filesystem, and compiles Kubernetes, while the C
# tests, the fuzzers and valgrind (one core each) run in the foreground.
#
#   scripts/prepare.sh DIR     DIR: where each step leaves its marker
#
# The steps, in the order the suite needs them. Each writes DIR/STEP.ok when it
# is done, or DIR/STEP.failed, and its output goes to DIR/STEP.log:
#   modules   go mod download in every Go module (node, node/alloc, scheduler,
#             test/e2e), all at once: the downloads wait on the network, not
#             on a core;
#   node      the node agent's go vet, and its tests compiled under -race
#             (go test -exec /bin/true: compiled and linked, not run);
#   scheduler flextopo-scheduler (scripts/build-scheduler.sh), go vet, and its
#             tests compiled as scripts/test.sh runs them;
#   api       scripts/api-check.sh --prepare: the Python venv and Chromium;
#   image     IMAGE_CHECK=base scripts/image-check.sh: the Debian root
#             filesystem both images start from;
#   helm      scripts/chart-check.sh --build-only;
#   e2e       scripts/e2e.sh --prepare: k8s-testenv, containerd, kwok,
#             gotestsum, the DRA plugin stand-in, flextopo-node, and the e2e
#             packages compiled (not with SKIP_E2E=1).
# api and image fetch from Debian and PyPI beside the Go steps; the Go steps run
# one after the other, each on every core.
#
# Needs build/ built (the C libraries flextopo-scheduler links) and GOFLAGS as
# scripts/test.sh sets it, so that what is compiled here is what the tests use.
# Exits non-zero when a step failed; the other steps still run.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo_root=$PWD
marks=${1:?usage: scripts/prepare.sh DIR}
mkdir -p "$marks"
rm -f "$marks"/*.ok "$marks"/*.failed "$marks"/*.log

# step NAME COMMAND...: runs COMMAND, its output to NAME.log, then leaves
# NAME.ok or NAME.failed with the wall time.
step() {
	local name=$1 start=$SECONDS rc=0
	shift
	"$@" >"$marks/$name.log" 2>&1 || rc=$?
	if ((rc == 0)); then
		echo "$((SECONDS - start))" >"$marks/$name.ok"
	else
		echo "exit $rc after $((SECONDS - start)) s" >"$marks/$name.failed"
	fi
	return "$rc"
}

go_modules() {
	local m pids=() rc=0
	for m in node node/alloc scheduler test/e2e; do
		(cd "$m" && go mod download) &
		pids+=($!)
	done
	for pid in "${pids[@]}"; do
		wait "$pid" || rc=1
	done
	return "$rc"
}

# The Go steps run in subshells of their own: they change directory.
go_node() (
	set -e
	cd node
	go vet ./...
	go test -race -count=1 -run '^$' -exec /bin/true ./...
	cd alloc
	go vet ./...
	go test -race -count=1 -run '^$' -exec /bin/true ./...
)

go_scheduler() (
	set -e
	scripts/build-scheduler.sh
	# shellcheck source=lib/cgo-core.sh
	. scripts/lib/cgo-core.sh
	cgo_core_env "$repo_root/build"
	cd scheduler
	go vet ./...
	go test -race -count=1 -run '^$' -exec /bin/true ./internal/...
	go test -count=1 -run '^$' -exec /bin/true ./pkg/...
)

rc=0
step api scripts/api-check.sh --prepare &
api_pid=$!
step image env IMAGE_CHECK=base scripts/image-check.sh &
image_pid=$!
step modules go_modules || rc=1
step node go_node || rc=1
step scheduler go_scheduler || rc=1
step helm scripts/chart-check.sh --build-only || rc=1
if [[ ${SKIP_E2E:-0} != 1 ]]; then
	step e2e scripts/e2e.sh --prepare || rc=1
fi
wait "$api_pid" || rc=1
wait "$image_pid" || rc=1
exit "$rc"
