# Sourced by the benchmark scripts (bench.sh, openb-replay.sh): the build
# directory they share and the one way it is configured.
#
#   bench_build TARGET   sets build_dir (${FLEXTOPO_BUILD_DIR:-build} under the
#                        repository root, or that absolute path), configures
#                        it when it is not yet (RelWithDebInfo, -O2 -g, the
#                        project's default and what scripts/test.sh builds,
#                        with the benchmarks on), builds TARGET and prints the
#                        build type an existing build kept.
#
# Needs repo_root set by the caller.

bench_build() {
	local target=$1 generator=() build_type
	build_dir=${FLEXTOPO_BUILD_DIR:-$repo_root/build}
	case $build_dir in
	/*) ;;
	*) build_dir=$repo_root/$build_dir ;;
	esac
	if [[ ! -f $build_dir/CMakeCache.txt ]]; then
		if command -v ninja >/dev/null 2>&1; then
			generator=(-G Ninja)
		fi
		cmake -S "$repo_root" -B "$build_dir" "${generator[@]}" \
			-DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLEXTOPO_BENCH=ON
	fi
	cmake --build "$build_dir" --target "$target"
	build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' \
		"$build_dir/CMakeCache.txt")
	echo "$(basename "$0"): $build_dir (build type:" \
		"${build_type:-RelWithDebInfo, the project default})," \
		"load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
}
