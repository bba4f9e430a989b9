#!/usr/bin/env bash
# Real fuzzing: every target test/fuzz/fuzz_<name>.c built with
# clang's libFuzzer, AddressSanitizer and UBSan (FLEXTOPO_FUZZ, in
# build-fuzz/), run for a fixed time from its corpus test/fuzz/corpus/<name>/
# with the dictionary test/fuzz/dict/<name>.dict when there is one. ctest
# replays the same corpora without libFuzzer (fuzz_<name>_replay).
#
# New inputs go to a scratch corpus, $FUZZ_OUT/<name>/new; the checkout's
# corpora are only read, unless --merge minimises the new inputs into them
# (libFuzzer -merge=1: only inputs that add coverage). A crash, leak,
# sanitizer report, timeout or out-of-memory fails the run: the input is
# kept in $FUZZ_OUT/<name>/crashes/ (until that target runs again) and named
# in the report; once fixed, add it to the corpus as a regression case. The
# report gives, per target, the executions, new inputs and crashes; the exit
# status is 1 if any target crashed.
#
#   scripts/fuzz.sh                         every target, FUZZ_SECONDS (10) each
#   scripts/fuzz.sh --seconds 120 http pod  those targets, two minutes each
#   scripts/fuzz.sh --merge                 and keep what is new in the corpora
#   FUZZ_OUT=DIR scripts/fuzz.sh            scratch corpora and crashes
#                                           (default build-fuzz/fuzz-out)
#
# Needs clang and its runtime libraries (scripts/install-deps.sh installs
# Debian's clang and libclang-rt-dev).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=${FUZZ_SECONDS:-10}
merge=0
targets=()
while (($#)); do
	case $1 in
	--seconds)
		seconds=${2:?--seconds needs a number}
		shift 2
		;;
	--merge)
		merge=1
		shift
		;;
	-h | --help)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	-*)
		echo "fuzz.sh: unknown option $1 (see --help)" >&2
		exit 2
		;;
	*)
		targets+=("$1")
		shift
		;;
	esac
done
[[ $seconds =~ ^[1-9][0-9]*$ ]] || {
	echo "fuzz.sh: --seconds wants a whole number above 0, got '$seconds'" >&2
	exit 2
}
if ((${#targets[@]} == 0)); then
	for src in test/fuzz/fuzz_*.c; do
		name=${src#test/fuzz/fuzz_}
		targets+=("${name%.c}")
	done
fi
for t in "${targets[@]}"; do
	[[ -f test/fuzz/fuzz_$t.c ]] || {
		echo "fuzz.sh: no target test/fuzz/fuzz_$t.c" >&2
		exit 2
	}
done

command -v clang >/dev/null || {
	echo "fuzz.sh: clang is missing; run scripts/install-deps.sh" >&2
	exit 1
}
out=${FUZZ_OUT:-build-fuzz/fuzz-out}

echo "== fuzz: building ${targets[*]} with libFuzzer, ASan and UBSan (build-fuzz)"
CC=clang cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DFLEXTOPO_SANITIZE=ON -DFLEXTOPO_FUZZ=ON -DFLEXTOPO_BENCH=OFF >/dev/null
cmake --build build-fuzz --target "${targets[@]/#/fuzz_}"

# Leaks count as crashes; UBSan stops at the first report (the build uses
# -fno-sanitize-recover) and prints where.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# The final stats line `stat::NAME: VALUE` of a libFuzzer log.
final_stat() { sed -n "s/^stat::$1: *//p" "$2" | tail -n1; }

failed=()
report=()
for t in "${targets[@]}"; do
	corpus=test/fuzz/corpus/$t
	dir=$out/$t
	rm -rf "$dir/crashes"
	mkdir -p "$dir/new" "$dir/crashes" "$corpus"
	args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048
		-print_final_stats=1 -artifact_prefix="$dir/crashes/")
	[[ -f test/fuzz/dict/$t.dict ]] && args+=(-dict="test/fuzz/dict/$t.dict")
	echo "== fuzz: $t for ${seconds}s (log $dir/fuzz.log)"
	status=0
	build-fuzz/test/fuzz_"$t" "${args[@]}" "$dir/new" "$corpus" >"$dir/fuzz.log" 2>&1 || status=$?
	crashes=$(find "$dir/crashes" -type f | wc -l)
	execs=$(final_stat number_of_executed_units "$dir/fuzz.log")
	new=$(final_stat new_units_added "$dir/fuzz.log")
	line="$t: ${execs:-?} executions, ${new:-?} new inputs, $crashes crashes"
	if ((status != 0 || crashes > 0)); then
		grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' \
			"$dir/fuzz.log" >&2 || tail -n 20 "$dir/fuzz.log" >&2
		line+=" (exit $status; kept: $(find "$dir/crashes" -type f | tr '\n' ' '))"
		failed+=("$t")
	elif ((merge)); then
		before=$(find "$corpus" -type f | wc -l)
		build-fuzz/test/fuzz_"$t" -merge=1 "$corpus" "$dir/new" >"$dir/merge.log" 2>&1
		line+=", $(($(find "$corpus" -type f | wc -l) - before)) merged into $corpus"
	fi
	report+=("$line")
	echo "$line"
done

echo "== fuzz: report (${seconds}s per target)"
printf '%s\n' "${report[@]}"
if ((${#failed[@]})); then
	echo "fuzz.sh: crashes in ${failed[*]}; inputs kept under $out/<target>/crashes/" >&2
	exit 1
fi
