#!/usr/bin/env bash
# End-to-end test of the flextopo extender against a real control plane.
#
#   scripts/e2e.sh [--build-only | --prepare] [extra go test arguments, e.g. -run TestNVLink]
#
# 1. Builds test/e2e/cmd/k8s-testenv (etcd, kube-apiserver,
#    kube-controller-manager, kube-scheduler and kubelet in one binary) unless
#    a binary for the same sources is cached in
#      ${FLEXTOPO_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flextopo-e2e}/<key>/k8s-testenv
#    The key hashes test/e2e/go.mod, go.sum, every file under
#    test/e2e/cmd/, the Go version and target, and the build flags below.
#    Go's module and build caches stay at their defaults (outside the clone).
#    A cold build (empty build cache, modules downloaded) took 7m13s on a
#    2-core machine.
# 2. Runs `go test -v -count=1 -timeout 30m -p 1 ./...` in test/e2e (the
#    scenarios, then the preemption study in test/e2e/study, one test binary
#    at a time as they share the machine) with FLEXTOPO_EXTENDER (default
#    build/flextopo-extender; relative paths are taken from the repository
#    root) and K8S_TESTENV (the cached binary). FLEXTOPO_E2E_PACKAGES
#    replaces ./... (scripts/preemption-study.sh runs ./study alone). A
#    -timeout among the arguments replaces the 30 minutes.
#
# 2a. For the real-node scenario (realnode_test.go): builds containerd, its runc
#    shim and ctr from containerd's Go module (Debian 12 ships containerd 1.6,
#    without NRI) into <cache>/containerd-<version>-<go version>/ unless they
#    are there, and flextopo-node from node/ into build/e2e/ (Go's build cache
#    makes that quick). runc and busybox-static come from Debian
#    (scripts/install-deps.sh). The scenario needs root.
#
#    FLEXTOPO_E2E_NO_CONTAINERD=1 skips that build (for runs that leave the
#    real node out, such as scripts/preemption-study.sh).
# 2b. For the preemption study (test/e2e/study): builds kwok (sigs.k8s.io/kwok)
#    from its Go module into <cache>/kwok-<version>-<go version>/ unless it is
#    there, and passes it as KWOK.
# 2c. For the real node with DRA (realnode_dra_test.go): builds the DRA kubelet
#    plugin stand-in (test/e2e/draplugin, on k8s.io/dynamic-resource-allocation
#    /kubeletplugin from test/e2e's go.mod) into <cache>/draplugin-<key>/
#    unless it is there, and passes it as DRA_PLUGIN. The key hashes its
#    sources, go.mod, go.sum and the Go version; it lives outside cmd/, so
#    the k8s-testenv key above does not move with it.
# 2d. The DRA scenario (dra_test.go, go test -run TestDRA) needs nothing more:
#    its control plane of its own runs kube-controller-manager from
#    k8s-testenv. FLEXTOPO_E2E_DRA_PODS (default 300) sets how many random
#    pods it creates, schedules and deletes, FLEXTOPO_E2E_DRA_SEED (default
#    1) their seed; 1000 pods take about 3.5 minutes on a 2-core machine.
#
# 2e. gotestsum (gotest.tools/gotestsum) runs the tests, printing what go
#    test -v prints and then the output of every failed test again at the end,
#    where a CI log's tail shows it. Built from its Go module into
#    <cache>/gotestsum-<version>-<go version>/ unless it is there.
# 2f. For the framework-plugin scenarios (plugin_test.go): flextopo-scheduler,
#    FLEXTOPO_SCHEDULER or built by scripts/build-scheduler.sh (below).
#
# With CI=true a missing extender binary fails the run; otherwise the
# placement scenarios are skipped and only the control plane is checked.
# FLEXTOPO_E2E_REPORT=FILE writes the preemption comparison tables (flextopo's
# preempt verb against kube-scheduler's own victims) to FILE as well; a
# relative FILE is taken from the repository root.
# --build-only builds (or finds) the binary, prints its path and stops.
# --prepare builds (or finds) every binary above, compiles the test packages
# (go test -exec /bin/true: compiled and linked, not run) and stops; the suite
# runs it in the background beside the C tests (scripts/prepare.sh).
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
e2e_dir=$repo_root/test/e2e
cache_root=${FLEXTOPO_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flextopo-e2e}

build_only=0
prepare=0
if [[ ${1:-} == --build-only ]]; then
	build_only=1
	shift
elif [[ ${1:-} == --prepare ]]; then
	prepare=1
	shift
fi

if ! command -v go >/dev/null 2>&1; then
	echo "e2e.sh: go is not on PATH (needs Go >= $(sed -n 's/^go //p' "$e2e_dir/go.mod"))" >&2
	exit 1
fi

# Bump when the way the binary is built changes in a way the hashed files do
# not show.
recipe=1
k8s_version=v1.36.3
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36"

cache_key() {
	(
		cd "$e2e_dir"
		echo "recipe=$recipe"
		echo "go=$(go env GOVERSION) $(go env GOOS)/$(go env GOARCH) cgo=$(go env CGO_ENABLED)"
		echo "goflags=$(go env GOFLAGS)"
		echo "ldflags=$ldflags"
		find cmd -type f -print | LC_ALL=C sort | while IFS= read -r f; do
			echo "file=$f"
		done
		for f in go.mod go.sum $(find cmd -type f -print | LC_ALL=C sort); do
			echo "== $f"
			cat "$f"
		done
	) | sha256sum | cut -c1-20
}

key=$(cache_key)
bin_dir=$cache_root/$key
testenv=$bin_dir/k8s-testenv

build_start=$SECONDS
if [[ -x $testenv ]]; then
	echo "e2e.sh: using cached $testenv"
	touch "$testenv"
else
	echo "e2e.sh: building k8s-testenv ($k8s_version) into $testenv (a cold build takes a while)"
	mkdir -p "$bin_dir"
	tmp=$(mktemp "$bin_dir/.k8s-testenv.XXXXXX")
	trap 'rm -f "$tmp"' EXIT
	(cd "$e2e_dir" && go build -buildvcs=false -ldflags "$ldflags" -o "$tmp" ./cmd/k8s-testenv)
	chmod 0755 "$tmp"
	mv -f "$tmp" "$testenv" # atomic: concurrent runs see a whole binary or none
	trap - EXIT
	# Drop binaries of other keys unused for 30 days.
	find "$cache_root" -mindepth 2 -maxdepth 2 -name k8s-testenv -mtime +30 -print 2>/dev/null |
		while IFS= read -r old; do rm -rf "$(dirname "$old")"; done
fi
build_secs=$((SECONDS - build_start))
echo "e2e.sh: k8s-testenv ready in ${build_secs}s"

if ((build_only)); then
	echo "$testenv"
	exit 0
fi

# containerd for the real node: a release with NRI 0.8+ (containerd 2.x).
containerd_version=v2.2.9
containerd_dir=$cache_root/containerd-$containerd_version-$(go env GOVERSION)
containerd_start=$SECONDS
if [[ ${FLEXTOPO_E2E_NO_CONTAINERD:-0} == 1 ]]; then
	echo "e2e.sh: FLEXTOPO_E2E_NO_CONTAINERD=1: containerd not built (the real-node scenario will skip or fail)"
elif [[ ! -x $containerd_dir/containerd || ! -x $containerd_dir/containerd-shim-runc-v2 || ! -x $containerd_dir/ctr ]]; then
	echo "e2e.sh: building containerd $containerd_version into $containerd_dir"
	tmp_bin=$(mktemp -d "$cache_root/.containerd.XXXXXX")
	trap 'rm -rf "$tmp_bin"' EXIT
	(cd "$e2e_dir" && GOBIN=$tmp_bin CGO_ENABLED=0 GOFLAGS=-modcacherw go install -trimpath \
		-tags "no_btrfs no_devmapper no_zfs" \
		-ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version" \
		"github.com/containerd/containerd/v2/cmd/containerd@$containerd_version" \
		"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$containerd_version" \
		"github.com/containerd/containerd/v2/cmd/ctr@$containerd_version")
	rm -rf "$containerd_dir"
	mv "$tmp_bin" "$containerd_dir"
	trap - EXIT
fi
containerd_secs=$((SECONDS - containerd_start))
# kwok for the preemption study (test/e2e/study): fake kubelets for hundreds
# of nodes, built from its own Go module (not test/e2e's go.mod, so the
# k8s-testenv cache key above does not move) into <cache>/kwok-<version>-<go>/.
kwok_version=v0.8.0
kwok_dir=$cache_root/kwok-$kwok_version-$(go env GOVERSION)
kwok_start=$SECONDS
if [[ ! -x $kwok_dir/kwok ]]; then
	echo "e2e.sh: building kwok $kwok_version into $kwok_dir"
	mkdir -p "$cache_root"
	tmp_kwok=$(mktemp -d "$cache_root/.kwok.XXXXXX")
	trap 'rm -rf "$tmp_kwok"' EXIT
	(cd "$tmp_kwok" && GOBIN=$tmp_kwok CGO_ENABLED=0 GOFLAGS=-modcacherw go install -trimpath \
		-ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$kwok_version")
	rm -rf "$kwok_dir"
	mv "$tmp_kwok" "$kwok_dir"
	trap - EXIT
fi
kwok_secs=$((SECONDS - kwok_start))
echo "e2e.sh: kwok $kwok_version ready in ${kwok_secs}s"

# gotestsum runs go test and repeats, after everything else, the output of
# each test that failed: the component logs the e2e package prints on a
# failure and the study's tables come later and would push it out of a CI
# log's tail. Built from its Go module into <cache>/gotestsum-<version>-<go>/.
# Without it (the build failed) the tests run under plain go test -v.
gotestsum_version=v1.13.0
gotestsum_dir=$cache_root/gotestsum-$gotestsum_version-$(go env GOVERSION)
if [[ ! -x $gotestsum_dir/gotestsum ]]; then
	echo "e2e.sh: building gotestsum $gotestsum_version into $gotestsum_dir"
	mkdir -p "$cache_root"
	tmp_gts=$(mktemp -d "$cache_root/.gotestsum.XXXXXX")
	trap 'rm -rf "$tmp_gts"' EXIT
	if (cd "$tmp_gts" && GOBIN=$tmp_gts CGO_ENABLED=0 GOFLAGS=-modcacherw go install -trimpath \
		-ldflags "-s -w" "gotest.tools/gotestsum@$gotestsum_version"); then
		rm -rf "$gotestsum_dir"
		mv "$tmp_gts" "$gotestsum_dir"
	else
		echo "e2e.sh: note: gotestsum did not build; failed tests are not repeated at the end"
		rm -rf "$tmp_gts"
	fi
	trap - EXIT
fi
go_test=(go test -v)
if [[ -x $gotestsum_dir/gotestsum ]]; then
	go_test=("$gotestsum_dir/gotestsum" --format standard-verbose --hide-summary skipped --)
fi

# The DRA kubelet plugin stand-in: a small binary, cached by its sources.
draplugin_key=$(
	cd "$e2e_dir"
	{
		echo "go=$(go env GOVERSION) $(go env GOOS)/$(go env GOARCH) cgo=$(go env CGO_ENABLED)"
		for f in go.mod go.sum $(find draplugin -type f -name '*.go' ! -name '*_test.go' -print | LC_ALL=C sort); do
			echo "== $f"
			cat "$f"
		done
	} | sha256sum | cut -c1-20
)
draplugin=$cache_root/draplugin-$draplugin_key/draplugin
if [[ ! -x $draplugin ]]; then
	echo "e2e.sh: building the DRA kubelet plugin stand-in into $draplugin"
	mkdir -p "$(dirname "$draplugin")"
	tmp_dra=$(mktemp "$(dirname "$draplugin")/.draplugin.XXXXXX")
	trap 'rm -f "$tmp_dra"' EXIT
	(cd "$e2e_dir" && go build -buildvcs=false -trimpath -ldflags "-s -w" -o "$tmp_dra" ./draplugin)
	chmod 0755 "$tmp_dra"
	mv -f "$tmp_dra" "$draplugin"
	trap - EXIT
	find "$cache_root" -mindepth 2 -maxdepth 2 -path '*/draplugin-*/draplugin' -mtime +30 -print 2>/dev/null |
		while IFS= read -r old; do rm -rf "$(dirname "$old")"; done
fi
touch "$draplugin"

node_agent=$repo_root/build/e2e/flextopo-node
(cd "$repo_root/node" && go build -buildvcs=false -o "$node_agent" ./cmd/flextopo-node)
echo "e2e.sh: containerd $containerd_version ready in ${containerd_secs}s; flextopo-node built"

extender=${FLEXTOPO_EXTENDER:-build/flextopo-extender}
[[ $extender == /* ]] || extender=$repo_root/$extender
if [[ ! -x $extender ]]; then
	ci=${CI:-}
	case ${ci,,} in
	true | 1 | yes) consequence="CI=$CI: the test will fail" ;;
	*) consequence="the placement scenarios will be skipped" ;;
	esac
	echo "e2e.sh: note: extender $extender not found (build it first); $consequence"
fi

# flextopo-scheduler for plugin_test.go: FLEXTOPO_SCHEDULER when set (taken
# as is), else built by scripts/build-scheduler.sh into build/ from the C
# libraries beside the extender (Go's build cache makes a rebuild quick).
# FLEXTOPO_E2E_NO_PLUGIN=1 skips the build (the plugin tests then skip, or
# fail with CI=true).
scheduler=${FLEXTOPO_SCHEDULER:-}
if [[ -z $scheduler && ${FLEXTOPO_E2E_NO_PLUGIN:-0} != 1 ]]; then
	scheduler_start=$SECONDS
	scheduler=$("$repo_root/scripts/build-scheduler.sh" | tail -n 1)
	echo "e2e.sh: flextopo-scheduler built in $((SECONDS - scheduler_start))s"
fi
scheduler=${scheduler:-build/flextopo-scheduler}
[[ $scheduler == /* ]] || scheduler=$repo_root/$scheduler

if ((prepare)); then
	compile_start=$SECONDS
	(cd "$e2e_dir" && go test -count=1 -run '^$' -exec /bin/true ./...)
	echo "e2e.sh: every binary ready; test packages compiled in $((SECONDS - compile_start))s"
	exit 0
fi

report=${FLEXTOPO_E2E_REPORT:-}
if [[ -n $report && $report != /* ]]; then
	report=$repo_root/$report
fi

# The packages to test, split on spaces (FLEXTOPO_E2E_PACKAGES, default all).
read -ra packages <<<"${FLEXTOPO_E2E_PACKAGES:-./...}"

# 30 minutes unless the caller passes its own -timeout (go test keeps the
# first of two).
timeout=(-timeout 30m)
for arg in "$@"; do
	[[ $arg == -timeout || $arg == -timeout=* || $arg == --timeout* ]] && timeout=()
done

test_start=$SECONDS
rc=0
(
	cd "$e2e_dir"
	FLEXTOPO_EXTENDER=$extender FLEXTOPO_SCHEDULER=$scheduler K8S_TESTENV=$testenv FLEXTOPO_E2E_REPORT=$report \
		CONTAINERD_DIR=$containerd_dir FLEXTOPO_NODE=$node_agent KWOK=$kwok_dir/kwok DRA_PLUGIN=$draplugin \
		"${go_test[@]}" -count=1 "${timeout[@]}" -p 1 "${packages[@]}" "$@"
) || rc=$?
test_secs=$((SECONDS - test_start))

if [[ -n $report && -f $report ]]; then
	echo "e2e.sh: preemption tables in $report"
fi
echo "e2e.sh: build ${build_secs}s, containerd ${containerd_secs}s, tests ${test_secs}s (exit $rc)"
exit $rc
