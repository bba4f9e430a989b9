#!/usr/bin/env bash
# The container image's build of flextopo-extender and flextopo-discover, and the one
# place that says how it is done: a Release build (-O3) with the project's defaults,
# warnings as errors among them, stripped. The Dockerfile's build stage runs this
# script, and scripts/image-check.sh runs the same script on the same files under GCC
# and clang, so that CI builds what the image builds, with its flags.
#
#   scripts/release-build.sh BUILD_DIR    builds the tree this script sits in
#
# CC chooses the compiler, CMAKE_BUILD_PARALLEL_LEVEL the number of jobs.
set -euo pipefail
if [[ $# -ne 1 ]]; then
	echo "usage: scripts/release-build.sh BUILD_DIR" >&2
	exit 2
fi
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$1
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
	-DFLEXTOPO_TESTS=OFF -DFLEXTOPO_BENCH=OFF
cmake --build "$build" --target flextopo-extender flextopo-discover
strip "$build/flextopo-extender" "$build/flextopo-discover"
