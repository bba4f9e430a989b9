#!/usr/bin/env bash
# Checks that the sources and headers obey the pipeline's dependency order
# (CMakeLists.txt, ft_stage):
#
#   base <- core <- codec <- {config, kube, discover} <- server <- app
#
# A file of one stage may include the headers of its own stage and of the
# stages below it, never of a stage above or beside it. A public header's
# stage is the stage of the folder that implements it (the table below); a
# private header's (src/<stage>/*.h) is its folder's. src/main.c and
# src/discover_main.c are programs above every stage.
#
#   scripts/check-layers.sh      exits 1 naming each include that breaks it
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

declare -A rank=([base]=0 [core]=1 [codec]=2 [config]=3 [kube]=3 [discover]=3 [server]=4 [app]=5)
declare -A stage_of=(
	[buf]=base [clock]=base [error]=base [file]=base [latch]=base [log]=base
	[cluster]=core [cpuset]=core [dra]=core [frag]=core [mig]=core
	[noderules]=core [pdb]=core [place]=core [policy]=core [selector]=core
	[topology]=core [victims]=core [gang]=core
	[arena]=codec [codec]=codec [debugview]=codec [decision]=codec
	[sharing]=codec [yamljson]=codec
	[config]=config [kube]=kube [discover]=discover [server]=server
	[access]=app [app]=app [debug]=app [decisions]=app [embed]=app [metrics]=app
	[state]=app [upkeep]=app [webhook]=app
)

failures=0
for h in include/flextopo/*.h; do
	name=$(basename "$h" .h)
	if [[ -z ${stage_of[$name]:-} ]]; then
		echo "check-layers: $h has no stage in scripts/check-layers.sh" >&2
		failures=$((failures + 1))
	fi
done

# check FILE STAGE: every flextopo include of FILE against STAGE.
check() {
	local file=$1 stage=$2 inc target tstage
	while IFS= read -r inc; do
		if [[ $inc =~ ^#include\ \<flextopo/([a-z_]+)\.h\> ]]; then
			target=${BASH_REMATCH[1]}
			tstage=${stage_of[$target]:-}
		elif [[ $inc =~ ^#include\ \"([a-z_]+)\.h\" ]]; then
			target=${BASH_REMATCH[1]}
			if [[ -f $(dirname "$file")/$target.h && $(dirname "$file") == src/* ]]; then
				tstage=$(basename "$(dirname "$file")")
			else
				tstage=${stage_of[$target]:-}
			fi
		else
			continue
		fi
		[[ -n $tstage ]] || continue
		if [[ $tstage != "$stage" && ${rank[$tstage]} -ge ${rank[$stage]} ]]; then
			echo "check-layers: $file ($stage) includes $target.h ($tstage)" >&2
			failures=$((failures + 1))
		fi
	done < <(grep -E '^#include ' "$file")
}

for h in include/flextopo/*.h; do
	name=$(basename "$h" .h)
	[[ -n ${stage_of[$name]:-} ]] && check "$h" "${stage_of[$name]}"
done
for stage in "${!rank[@]}"; do
	for f in src/"$stage"/*.c src/"$stage"/*.h; do
		[[ -f $f ]] && check "$f" "$stage"
	done
done

if ((failures)); then
	echo "check-layers: $failures includes against the dependency order" >&2
	exit 1
fi
echo "check-layers: every include follows base <- core <- codec <- {config, kube, discover} <- server <- app"
