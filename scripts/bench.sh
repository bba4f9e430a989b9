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
# root. When it is not configured yet it is configured for Release; an
# existing build keeps its own build type, printed before the run (the
# project's default is RelWithDebInfo, -O2 -g). The figures are meant to be
# read, never asserted: run on an otherwise idle machine, since other load
# shows up in p99 first.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${FLEXTOPO_BUILD_DIR:-$repo_root/build}
case $build_dir in
/*) ;;
*) build_dir=$repo_root/$build_dir ;;
esac

if [[ ! -f $build_dir/CMakeCache.txt ]]; then
	generator=()
	if command -v ninja >/dev/null 2>&1; then
		generator=(-G Ninja)
	fi
	cmake -S "$repo_root" -B "$build_dir" "${generator[@]}" \
		-DCMAKE_BUILD_TYPE=Release -DFLEXTOPO_BENCH=ON
fi
cmake --build "$build_dir" --target flextopo-bench

build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
echo "bench.sh: $build_dir (build type: ${build_type:-RelWithDebInfo, the project default})," \
	"load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec "$build_dir/bench/flextopo-bench" "$@"
