#!/usr/bin/env bash
# Build and run flextopo-openb-replay (bench/README.md, "The openb trace
# replay"): the FGD paper's openb trace through the extender over HTTP and
# through Random, BestFit and FGD, 5 seeds of the variants default,
# multigpu50, gpushare100 and gpuspec33, with a markdown report and an SVG
# plot.
#
#   scripts/openb-replay.sh                         # everything, about 14 min
#   scripts/openb-replay.sh --variants default --seeds 2
#   scripts/openb-replay.sh --policies random,bestfit,fgd --ties name
#
# The trace is read from ../shared/data/openb next to the repository (or
# $OPENB_DATA); it is never copied into the repository. Without it the
# script says so and exits 0. The report goes to
# ${OPENB_REPORT:-$build_dir/openb-replay.md} and the plot of the first
# variant to ${OPENB_SVG:-$build_dir/openb-unallocated.svg}; flags given
# here are passed on and win over these.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/bench-build.sh
. "$repo_root/scripts/lib/bench-build.sh"
data=${OPENB_DATA:-$repo_root/../shared/data/openb}

if [[ ! -d $data/csv ]]; then
	echo "openb-replay.sh: no openb trace at $data (set OPENB_DATA):" \
		"skipped" >&2
	exit 0
fi

bench_build flextopo-openb-replay
echo "openb-replay.sh: trace $data" >&2
exec "$build_dir/bench/flextopo-openb-replay" --data "$data" \
	--report "${OPENB_REPORT:-$build_dir/openb-replay.md}" \
	--svg "${OPENB_SVG:-$build_dir/openb-unallocated.svg}" "$@"
