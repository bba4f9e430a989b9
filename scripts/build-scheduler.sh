#!/usr/bin/env bash
# Builds flextopo-scheduler: kube-scheduler v1.36.3 with flextopo's
# framework plugins (scheduler/, module flextopo.dev/scheduler), linked
# through cgo against the C core's static libraries.
#
#   scripts/build-scheduler.sh [OUT]     default OUT: build/flextopo-scheduler
#
# 1. cmake configures and builds the C stages (ft_base ... ft_app) in
#    ${FLEXTOPO_BUILD_DIR:-build} (with Ninja, tests and fuzzers off, when it
#    configures a new tree).
# 2. go build in scheduler/ with CGO_CFLAGS=-I include and
#    CGO_LDFLAGS=-L <build dir>; the libraries the C build links
#    (libmicrohttpd, gnutls, libcjson, libcurl, yaml-0.1) come from
#    pkg-config, as CMakeLists.txt finds them. The version flags are
#    k8s-testenv's (scripts/e2e.sh), so /version and the scheduler's metrics
#    say v1.36.3.
# FLEXTOPO_SCHEDULER_SYMBOLS=1 keeps the symbol tables (Go's and the C
# core's) that a release build strips, for perf and pprof.
# Go's module and build caches stay at their defaults.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${FLEXTOPO_BUILD_DIR:-$repo_root/build}
[[ $build_dir == /* ]] || build_dir=$repo_root/$build_dir
out=${1:-$build_dir/flextopo-scheduler}
[[ $out == /* ]] || out=$PWD/$out
k8s_version=v1.36.3
ldflags="-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36"
[[ ${FLEXTOPO_SCHEDULER_SYMBOLS:-0} == 1 ]] || ldflags="-s -w $ldflags"

# Ninja, as scripts/test.sh, schedperf.sh and bench.sh configure build/: a
# folder configured with another generator makes their cmake stop.
if [[ ! -f $build_dir/CMakeCache.txt ]]; then
	cmake -S "$repo_root" -B "$build_dir" -G Ninja -DFLEXTOPO_TESTS=OFF >/dev/null
fi
cmake --build "$build_dir" --target ft_app -j"$(nproc)"

# The cgo flags, with the libraries' digest that makes go relink a changed
# core (scripts/lib/cgo-core.sh).
# shellcheck source=lib/cgo-core.sh
. "$repo_root/scripts/lib/cgo-core.sh"
cgo_core_env "$build_dir"
cd "$repo_root/scheduler"
go build -trimpath -ldflags "$ldflags" -o "$out" ./cmd/flextopo-scheduler
echo "$out"
