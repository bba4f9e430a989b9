#!/usr/bin/env bash
# Build and run flextopo-bench (bench/README.md): filter, prioritize and
# preempt latency over HTTP and the model's memory, on a synthetic cluster of
# 500 and 5,000 nodes by default, then the victim search alone on packed
# 8-GPU nodes of 60 pods.
#
#   scripts/bench.sh [flextopo-bench flags, e.g. --nodes 500 --iterations 4000]
#   scripts/bench.sh --nodes 500 --packed --preempt-iterations 40
#
# The build directory is ${FLEXTOPO_BUILD_DIR:-build} under the repository
# root (scripts/lib/bench-build.sh). When it is not configured yet it is
# configured RelWithDebInfo (-O2 -g, the project's default); an existing
# build keeps its own build type, printed before the run. The figures are
# meant to be read, never asserted: run on an otherwise idle machine, since
# other load shows up in p99 first.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/bench-build.sh
. "$repo_root/scripts/lib/bench-build.sh"
bench_build flextopo-bench
exec "$build_dir/bench/flextopo-bench" "$@"
