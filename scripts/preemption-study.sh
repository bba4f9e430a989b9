#!/usr/bin/env bash
# The paper's comparison at cluster scale (test/e2e/study): one
# compressed day of co-located LLM work on N kwok nodes (RTX 4090, A100,
# H100 with MIG), replayed under three arms with the same workload and seed:
# (a) kube-scheduler + flextopo with its preempt verb, (b) the same without
# the preempt verb, (c) kube-scheduler alone. Real etcd, kube-apiserver and
# kube-scheduler v1.36.3 (scripts/e2e.sh builds and caches them, and kwok).
#
#   scripts/preemption-study.sh [--nodes N] [--wall DURATION] [--seed S]
#                               [--source synthetic|openb|both]
#
# Defaults: 1000 nodes, 360s of wall time per arm, seed 1, source synthetic.
# openb reads ../shared/data/openb/csv/openb_pod_list_default.csv beside the
# repository (FLEXTOPO_OPENB overrides); nothing of it is copied here.
# Writes bench/study-<source>-<N>n-seed<S>.md and its two SVG plots, and
# rewrites the generated block of bench/README.md ("The preemption study") from
# every bench/study-*.md present.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

nodes=1000
wall=360s
seed=1
source=synthetic
while (($#)); do
	case $1 in
	--nodes) nodes=$2; shift 2 ;;
	--wall) wall=$2; shift 2 ;;
	--seed) seed=$2; shift 2 ;;
	--source) source=$2; shift 2 ;;
	*) echo "usage: $0 [--nodes N] [--wall DURATION] [--seed S] [--source synthetic|openb|both]" >&2; exit 2 ;;
	esac
done
case $source in
both) sources="synthetic openb" ;;
synthetic | openb) sources=$source ;;
*) echo "$0: --source synthetic, openb or both" >&2; exit 2 ;;
esac

start=$SECONDS
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target flextopo-extender
for src in $sources; do
	echo "== preemption study: $nodes nodes, $wall per arm, seed $seed, $src"
	FLEXTOPO_STUDY="nodes=$nodes,wall=$wall,seed=$seed,source=$src" FLEXTOPO_STUDY_OUT=$PWD/bench \
		FLEXTOPO_E2E_NO_CONTAINERD=1 FLEXTOPO_EXTENDER=build/flextopo-extender FLEXTOPO_E2E_PACKAGES=./study \
		scripts/e2e.sh -run '^TestPreemptionStudy$' -timeout 90m
done

# The generated block of bench/README.md: every study table present.
readme=bench/README.md
begin='<!-- preemption-study:begin (scripts/preemption-study.sh writes this block) -->'
end='<!-- preemption-study:end -->'
block=$(mktemp)
trap 'rm -f "$block"' EXIT
{
	echo "$begin"
	for md in bench/study-*.md; do
		[[ -f $md ]] || continue
		name=$(basename "$md" .md)
		echo
		echo "#### $name"
		echo
		cat "$md"
		echo
		echo "![aligned placement, $name]($name-aligned.svg)"
		echo "![GPU allocation, $name]($name-allocation.svg)"
	done
	echo
	echo "$end"
} >"$block"
if grep -qF "$begin" "$readme"; then
	python3 - "$readme" "$block" "$begin" "$end" <<'EOF'
import sys
readme, block, begin, end = sys.argv[1:]
text = open(readme).read()
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(readme, "w").write(head + open(block).read().rstrip("\n") + tail)
EOF
else
	{ echo; cat "$block"; } >>"$readme"
fi
echo "preemption-study.sh: tables and plots in bench/ (README.md block updated) in $((SECONDS - start))s"
