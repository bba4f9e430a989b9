#!/usr/bin/env bash
# The API checks on a running extender:
#   - api/openapi.yaml is valid OpenAPI 3.0 and its annotation schemas match
#     api/topology.schema.json and api/allocation.schema.json;
#   - headless Chromium draws the SVG of a demo node (DOM and screenshot), and
#     that SVG is the one committed as docs/demo-node.svg;
#   - schemathesis drives both listeners from api/openapi.yaml: no 5xx, every
#     status, Content-Type, header and body as documented;
#   - Prometheus's own parser reads GET /metrics of both listeners;
#   - nothing was logged at info per request, and the extender is still up.
#
#   scripts/api-check.sh                   uses build/flextopo-extender
#   FLEXTOPO_EXTENDER=path scripts/api-check.sh
#   UPDATE_DOCS=1 scripts/api-check.sh     rewrite docs/demo-node.svg
#   API_CHECK_SEED=N, API_CHECK_EXAMPLES=N (default 30 per operation)
#   scripts/api-check.sh --prepare         only the venv and Chromium below
#                                          (scripts/prepare.sh), no checks
#
# Python packages (test/api/requirements.txt) go into a venv outside the
# clone, ${XDG_CACHE_HOME:-$HOME/.cache}/flextopo-api-venv. Chromium is taken
# from the system or installed with apt-get; without it the render check is
# skipped, except under CI=true where that fails. Everything listens and
# connects on 127.0.0.1 only; each schemathesis run is cut at 300 s.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

prepare=0
[[ ${1:-} == --prepare ]] && prepare=1
ext=${FLEXTOPO_EXTENDER:-build/flextopo-extender}
venv=${XDG_CACHE_HOME:-$HOME/.cache}/flextopo-api-venv
seed=${API_CHECK_SEED:-20261121}
examples=${API_CHECK_EXAMPLES:-30}
demo_node=demo-h100-0
checks=not_a_server_error,status_code_conformance,content_type_conformance
checks+=,response_headers_conformance,response_schema_conformance
checks+=,positive_data_acceptance,missing_required_header,unsupported_method
checks+=,allow_header_conformance

# Loopback only: no proxy may see these requests.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost

sudo=""
[[ $(id -u) -ne 0 ]] && sudo=sudo
apt_install() { # PACKAGE: quietly, refreshing the lists once if needed
	$sudo apt-get install -y -qq "$1" >/dev/null 2>&1 ||
		{ $sudo apt-get update -qq && $sudo apt-get install -y -qq "$1" >/dev/null; }
}

echo "== api-check: Python venv $venv"
stamp=$(sha256sum test/api/requirements.txt | cut -d' ' -f1)
if [[ ! -x $venv/bin/schemathesis || $(cat "$venv/.flextopo-stamp" 2>/dev/null) != "$stamp" ]]; then
	if ! python3 -m venv "$venv" >/dev/null 2>&1; then
		echo "installing python3-venv (apt-get)"
		apt_install python3-venv
		python3 -m venv "$venv"
	fi
	"$venv/bin/pip" install -q --disable-pip-version-check -r test/api/requirements.txt
	echo "$stamp" >"$venv/.flextopo-stamp"
fi
py=$venv/bin/python

# Sets chromium to the browser's path, installing Debian's when it is missing;
# empty when it cannot be had.
find_chromium() {
	chromium=$(command -v chromium || command -v chromium-browser || true)
	if [[ -z $chromium ]]; then
		echo "installing chromium (apt-get)"
		if apt_install chromium; then
			chromium=$(command -v chromium || true)
		fi
	fi
}

if ((prepare)); then
	find_chromium
	echo "api-check: venv ready, chromium ${chromium:-missing}"
	exit 0
fi

if [[ ! -x $ext ]]; then
	echo "== api-check: building $ext"
	cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build --target flextopo-extender
fi

tmp=$(mktemp -d)
pid=""
cleanup() {
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid"
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

echo "== api-check: OpenAPI document"
"$py" - <<'PY'
from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename
spec, _ = read_from_filename("api/openapi.yaml")
validate(spec)
print("api/openapi.yaml: valid OpenAPI %s, %d paths" % (spec["openapi"], len(spec["paths"])))
PY
"$py" test/api/annotation_schemas.py

echo "== api-check: extender on configs/demo-cluster.yaml"
printf 'logLevel: info\ndebugListen: "127.0.0.1:0"\n' >"$tmp/flextopo.yaml"
"$ext" --config "$tmp/flextopo.yaml" --snapshot configs/demo-cluster.yaml \
	--listen 127.0.0.1:0 2>"$tmp/extender.log" &
pid=$!
port_of() { sed -n "s/.*serving the $1 API on 127.0.0.1:0 (port \([0-9]*\)).*/\1/p" "$tmp/extender.log"; }
main_port="" debug_port=""
for _ in $(seq 100); do
	main_port=$(port_of extender) debug_port=$(port_of debug)
	[[ -n $main_port && -n $debug_port ]] && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
if [[ -z $main_port || -z $debug_port ]]; then
	cat "$tmp/extender.log" >&2
	echo "api-check: the extender did not start" >&2
	exit 1
fi
main=http://127.0.0.1:$main_port debug=http://127.0.0.1:$debug_port
curl -sf "$main/readyz" >/dev/null
echo "extender $main, debug API $debug"
startup_info=$(grep -c '"level":"info"' "$tmp/extender.log" || true)

echo "== api-check: SVG of $demo_node in headless Chromium"
curl -sf "$debug/debug/nodes/$demo_node?format=svg" -o "$tmp/demo-node.svg"
if [[ ${UPDATE_DOCS:-0} == 1 ]]; then
	cp "$tmp/demo-node.svg" docs/demo-node.svg
	echo "docs/demo-node.svg rewritten"
elif ! cmp -s "$tmp/demo-node.svg" docs/demo-node.svg; then
	echo "api-check: docs/demo-node.svg is not what the demo draws now; run UPDATE_DOCS=1 scripts/api-check.sh" >&2
	exit 1
fi
find_chromium
if [[ -n $chromium ]]; then
	DBUS_SESSION_BUS_ADDRESS=disabled: "$py" test/api/svg_render_check.py "$chromium" \
		"$tmp/demo-node.svg" "$tmp/render"
elif [[ ${CI:-} == true ]]; then
	echo "api-check: chromium is not installable; the SVG render check cannot run" >&2
	exit 1
else
	echo "SKIPPED: chromium is not installed and could not be installed"
fi

echo "== api-check: schemathesis, seed $seed, $examples examples per operation"
run_schemathesis() { # URL TAGS; from $tmp, so that its cache stays out of the clone
	(cd "$tmp" && timeout 300 "$venv/bin/schemathesis" run "$root/api/openapi.yaml" --url "$1" \
		--include-tag-regex "^($2)\$" --checks "$checks" --phases examples,coverage,fuzzing \
		--max-examples "$examples" --seed "$seed" --workers 1 --request-timeout 10 --no-color)
}
run_schemathesis "$main" 'extender|common'
run_schemathesis "$debug" 'debug|common'

echo "== api-check: /metrics through prometheus_client's parser"
"$py" test/api/test_metrics_format.py "$main/metrics" "$debug/metrics"

echo "== api-check: logs"
if ! kill -0 "$pid" 2>/dev/null; then
	tail -20 "$tmp/extender.log" >&2
	echo "api-check: the extender died" >&2
	exit 1
fi
info=$(grep -c '"level":"info"' "$tmp/extender.log" || true)
if ((info != startup_info)); then
	grep '"level":"info"' "$tmp/extender.log" | tail -5 >&2
	echo "api-check: $((info - startup_info)) info lines were logged after start; requests log at debug" >&2
	exit 1
fi
echo "$(wc -l <"$tmp/extender.log") log lines: $startup_info info at start, none per request; $(grep -c '"level":"warn"' "$tmp/extender.log" || true) warn (refused requests)"
kill "$pid"
wait "$pid" && status=0 || status=$?
pid=""
if ((status != 0)); then
	echo "api-check: the extender exited with $status on SIGTERM" >&2
	exit 1
fi
echo "== api-check: passed"
