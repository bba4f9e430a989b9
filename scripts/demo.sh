#!/usr/bin/env bash
# Install what is missing, build, and run the extender on the embedded demo
# cluster (configs/demo-cluster.yaml); show one real filter request
# (configs/demo-filter.json) and its
# reply, then keep serving on 127.0.0.1:8888 until Ctrl-C.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SKIP_GO=1 scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target flextopo-extender

listen=${LISTEN:-127.0.0.1:8888}
debug=${DEBUG_LISTEN:-127.0.0.1:8889}
config=$(mktemp)
printf 'debugListen: "%s"\n' "$debug" >"$config"
build/flextopo-extender --config "$config" --snapshot configs/demo-cluster.yaml --listen "$listen" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$config"' EXIT INT TERM
for _ in $(seq 50); do
	curl -sf "http://$listen/readyz" >/dev/null && break
	sleep 0.1
done

request=$(cat configs/demo-filter.json)
echo "== POST /filter: a numa-guaranteed pod with 8 CPUs and 2 GPUs"
echo "$request"
echo "== reply"
curl -s -H 'Content-Type: application/json' -d "$request" "http://$listen/filter"
echo
echo "== POST /bind to demo-a100-0"
curl -s -H 'Content-Type: application/json' \
	-d '{"PodName":"llm-0","PodNamespace":"online","PodUID":"demo-uid-1","Node":"demo-a100-0"}' \
	"http://$listen/bind"
echo
echo "== GET /debug/pods/online/llm-0 on the debug listener: the allocation bind chose"
curl -s "http://$debug/debug/pods/online/llm-0"
echo
echo "== the node as a picture: http://$debug/debug/nodes/demo-a100-0?format=svg"
echo "== serving the demo cluster on http://$listen (Ctrl-C stops)"
wait $pid
