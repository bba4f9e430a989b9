#!/usr/bin/env bash
# Checks the Helm chart charts/flextopo without a cluster and without Docker.
#
#   scripts/chart-check.sh                    lint, render, schema checks
#   scripts/chart-check.sh --build-only       build (or find) helm, print its path
#   scripts/chart-check.sh --e2e [go test args]
#                                             the above, then the chart tests of
#                                             the e2e suite (TestChart*) with HELM
#                                             set, on scripts/e2e.sh's control plane
#
# 1. Builds helm ${HELM_VERSION:-v3.22.0} from its Go module
#    (go install helm.sh/helm/v3/cmd/helm@VERSION; the module has no replace
#    directives, so this works outside any module) unless it is cached in
#      ${FLEXTOPO_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flextopo-helm}/<version>/helm
#    Only the Go module proxy is needed. The Kubernetes version helm assumes
#    by default is set from the client-go its go.mod requires, as helm's own
#    Makefile does. The newest release: go list -m -versions helm.sh/helm/v3
# 2. helm lint --strict for both modes and with every option on.
# 3. helm template for each case into a directory (FLEXTOPO_CHART_OUT, or a
#    temporary one removed after a pass), checking the kinds each renders.
# 4. Wrong values that must fail, each with the message it must give:
#    values.schema.json for single values, the templates for combinations.
#
# Exits non-zero on any failure.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
chart=$repo_root/charts/flextopo
helm_version=${HELM_VERSION:-v3.22.0}
cache_root=${FLEXTOPO_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flextopo-helm}
helm=$cache_root/$helm_version/helm
# The Kubernetes release the e2e runs; Capabilities.KubeVersion when rendering.
kube_version=v1.36.3
release=flextopo
namespace=flextopo-system

mode=check
if [[ ${1:-} == --build-only ]]; then
	mode=build-only
	shift
elif [[ ${1:-} == --e2e ]]; then
	mode=e2e
	shift
fi

start=$SECONDS
phase_start=$SECONDS
timings=()
phase_done() {
	timings+=("$1 $((SECONDS - phase_start))s")
	phase_start=$SECONDS
}

# --- 1. helm -------------------------------------------------------------

build_helm() {
	if ! command -v go >/dev/null 2>&1; then
		echo "chart-check.sh: go is not on PATH (needed to build helm $helm_version)" >&2
		exit 1
	fi
	local bin_dir=$cache_root/$helm_version tmp gomod client_go minor
	mkdir -p "$bin_dir"
	tmp=$(mktemp -d "$bin_dir/.build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	# helm's Makefile sets the default Kubernetes version (used by lint and
	# template without --kube-version) to 1.<minor of client-go>.
	gomod=$(cd "$tmp" && GOWORK=off go mod download -json "helm.sh/helm/v3@$helm_version" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	client_go=$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod" | head -n1)
	minor=${client_go:-30}
	local ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version -X helm.sh/helm/v3/internal/version.metadata="
	for pkg in pkg/lint/rules pkg/chartutil; do
		ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$minor"
	done
	echo "chart-check.sh: building helm $helm_version into $helm (a cold build takes a minute or two)"
	(cd "$tmp" && GOWORK=off GOBIN="$tmp" CGO_ENABLED=0 \
		go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$helm_version")
	mv -f "$tmp/helm" "$helm" # atomic: concurrent runs see a whole binary or none
	rm -rf "$tmp"
	trap - EXIT
}

if [[ -x $helm ]] && [[ $("$helm" version --template '{{.Version}}' 2>/dev/null || true) == "$helm_version" ]]; then
	echo "chart-check.sh: using cached $helm"
	touch "$helm"
else
	build_helm
	# Drop helm builds unused for 60 days.
	find "$cache_root" -mindepth 2 -maxdepth 2 -name helm -mtime +60 -print 2>/dev/null |
		while IFS= read -r old; do rm -rf "$(dirname "$old")"; done
fi
echo "chart-check.sh: $("$helm" version --short)"
phase_done "helm"

if [[ $mode == build-only ]]; then
	echo "chart-check.sh: helm ready in ${timings[0]#helm }"
	echo "$helm"
	exit 0
fi

if [[ -n ${FLEXTOPO_CHART_OUT:-} ]]; then
	out=$FLEXTOPO_CHART_OUT
	mkdir -p "$out"
	keep_out=1
else
	out=$(mktemp -d "${TMPDIR:-/tmp}/flextopo-chart.XXXXXX")
	keep_out=0
fi
failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}

# Option sets, one per line: name, then --set arguments.
cases=(
	"scheduler --set mode=scheduler"
	"extender --set mode=extender"
	"scheduler-all-pods --set mode=scheduler --set registration.pods=all"
	"scheduler-full --set mode=scheduler --set registration.pods=devices --set replicaCount=2 --set serviceMonitor.enabled=true --set scheduler.debugListenHost=0.0.0.0 --set registration.weight=5 --set registration.managedResources[0].name=nvidia.com/gpu --set registration.ignorable=true --set scheduler.extraArgs[0]=--kube-api-qps=50 --set priorityClassName=system-cluster-critical --set extender.config.policy=distributed --set extender.config.logLevel=debug"
	"extender-full --set mode=extender --set serviceMonitor.enabled=true --set podDisruptionBudget.enabled=true --set registration.managedResources[0].name=nvidia.com/gpu --set service.type=NodePort --set extender.config.maxRequestBytes=128Mi --set extender.config.defaultAffinityMode=best-effort"
	"extender-tls --set mode=extender --set tls.enabled=true --set tls.secretName=flextopo-tls --set tls.clientAuth.enabled=true --set tls.clientAuth.caSecretName=scheduler-client-ca --set tls.serverName=flextopo.example.com"
	"node-observe --set nodeAgent.mode=observe --set nodeAgent.runtimeClassName=nvidia --set nodeAgent.discoverArgs[0]=--sharing-config --set nodeAgent.discoverArgs[1]=/etc/dp/config.yaml --set nodeAgent.restrictToOwnNode=false"
	"node-off --set nodeAgent.enabled=false"
	"scheduler-dra --set mode=scheduler --set gpuMode=dra"
	"extender-mixed --set mode=extender --set gpuMode=mixed"
	"extender-webhook --set mode=extender --set gpuMode=dra --set webhook.enabled=true --set webhook.secretName=flextopo-webhook --set webhook.certManagerCertificate=flextopo-system/flextopo-webhook"
	"scheduler-webhook --set mode=scheduler --set gpuMode=dra --set replicaCount=2 --set webhook.enabled=true --set webhook.secretName=flextopo-webhook --set webhook.certManagerCertificate=flextopo-system/flextopo-webhook"
	"scheduler-no-metrics --set mode=scheduler --set extender.metricsPort=0 --set serviceMonitor.enabled=true --set scheduler.debugListenHost=0.0.0.0"
)

# --- 2. lint -------------------------------------------------------------

echo "== helm lint --strict"
for c in "${cases[@]}"; do
	read -r -a args <<<"$c"
	name=${args[0]}
	if ! "$helm" lint --strict --quiet --kube-version "$kube_version" "$chart" "${args[@]:1}" >"$out/lint-$name.log" 2>&1; then
		fail "helm lint ($name):"
		cat "$out/lint-$name.log" >&2
	else
		echo "lint $name: ok"
	fi
done
phase_done "lint"

# --- 3. template ---------------------------------------------------------

# kinds NAME: the "Kind name" list of a rendered file.
kinds() {
	awk '/^---/{k=""} /^kind: /{k=$2} /^  name: /{if(k!=""){print k" "$2; k=""}}' "$1"
}
# expect FILE KIND COUNT
expect() {
	local n
	n=$(kinds "$1" | awk -v k="$2" '$1==k' | wc -l)
	[[ $n -eq $3 ]] || fail "$(basename "$1"): $n objects of kind $2, want $3"
}

echo "== helm template"
for c in "${cases[@]}"; do
	read -r -a args <<<"$c"
	name=${args[0]}
	file=$out/$name.yaml
	if ! "$helm" template "$release" "$chart" --namespace "$namespace" --kube-version "$kube_version" \
		"${args[@]:1}" >"$file" 2>"$out/template-$name.log"; then
		fail "helm template ($name):"
		cat "$out/template-$name.log" >&2
		continue
	fi
	echo "template $name: $(kinds "$file" | wc -l) objects -> $file"
done
# What each mode must render. Scheduler mode: one container, flextopo-
# scheduler, whose KubeSchedulerConfiguration enables FlexTopo and points it
# at the mounted flextopo.yaml (scheduler_config_check, below).
for f in scheduler scheduler-full scheduler-dra scheduler-webhook scheduler-no-metrics; do
	[[ -s $out/$f.yaml ]] || continue
	expect "$out/$f.yaml" Deployment 1
	expect "$out/$f.yaml" ConfigMap 2
	expect "$out/$f.yaml" ServiceAccount 2
	expect "$out/$f.yaml" ClusterRole 3
	# system:auth-delegator for flextopo's /metrics unless metricsPort is 0.
	bindings=6
	[[ $f != scheduler-no-metrics ]] || bindings=5
	expect "$out/$f.yaml" ClusterRoleBinding $bindings
	expect "$out/$f.yaml" Role 1
	expect "$out/$f.yaml" RoleBinding 2
	grep -q 'kind: KubeSchedulerConfiguration' "$out/$f.yaml" || fail "$f: no KubeSchedulerConfiguration"
	! grep -qE 'name: (extender|kube-scheduler)$|registry.k8s.io/kube-scheduler|flextopo/extender' "$out/$f.yaml" ||
		fail "$f: scheduler mode still renders the extender sidecar or the upstream kube-scheduler"
	! grep -qE '^    (listen|snapshot|tlsCertFile|tlsClientCAFile):' "$out/$f.yaml" ||
		fail "$f: flextopo.yaml has keys only the extender reads"
	weight=5
	[[ $f == scheduler-full ]] || weight=10
	metrics=10262
	[[ $f != scheduler-no-metrics ]] || metrics=0
	webhook=0
	[[ $f != scheduler-webhook ]] || webhook=9443
	python3 - "$out/$f.yaml" "$weight" "$metrics" "$webhook" <<'PY' || fail "$f: the scheduler's configuration is wrong (above)"
import sys, posixpath, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
want_weight = int(sys.argv[2])
want_metrics, want_webhook = int(sys.argv[3]), int(sys.argv[4])
dep = next(d for d in docs if d["kind"] == "Deployment")
spec = dep["spec"]["template"]["spec"]
errs = []
if [c["name"] for c in spec["containers"]] != ["flextopo-scheduler"]:
    errs.append("containers %s, want flextopo-scheduler alone" % [c["name"] for c in spec["containers"]])
c = spec["containers"][0]
if c["image"] != "flextopo/scheduler:0.1.0":
    errs.append("image %s, want flextopo/scheduler:0.1.0" % c["image"])
cms = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
vols = {v["name"]: v.get("configMap", {}).get("name") for v in spec["volumes"]}
def mounted(path):
    for m in c["volumeMounts"]:
        if m["mountPath"] == posixpath.dirname(path):
            return cms[vols[m["name"]]][posixpath.basename(path)]
    raise SystemExit("%s: nothing mounted at %s" % (sys.argv[1], posixpath.dirname(path)))
cfgs = [a.split("=", 1)[1] for a in c["command"] if a.startswith("--config=")]
cfg = yaml.safe_load(mounted(cfgs[0]))
if cfg["kind"] != "KubeSchedulerConfiguration":
    errs.append("--config is a %s" % cfg["kind"])
le = cfg["leaderElection"]
if not (le["leaderElect"] and le["resourceName"] == dep["metadata"]["name"]
        and le["resourceNamespace"] == dep["metadata"]["namespace"]):
    errs.append("leaderElection %s" % le)
if cfg.get("percentageOfNodesToScore") != 100:
    errs.append("percentageOfNodesToScore %s" % cfg.get("percentageOfNodesToScore"))
if "extenders" in cfg:
    errs.append("extenders in scheduler mode")
(p,) = cfg["profiles"]
pl = p["plugins"]
if pl["multiPoint"]["enabled"] != [{"name": "FlexTopo", "weight": want_weight}]:
    errs.append("multiPoint.enabled %s" % pl["multiPoint"]["enabled"])
if {"name": "DefaultPreemption"} not in pl["multiPoint"]["disabled"]:
    errs.append("DefaultPreemption not disabled")
if pl["bind"]["enabled"] != [{"name": "FlexTopo"}]:
    errs.append("bind.enabled %s" % pl["bind"]["enabled"])
if [x["name"] for x in pl["score"]["disabled"]] != ["NodeResourcesFit", "NodeResourcesBalancedAllocation"]:
    errs.append("score.disabled %s" % pl["score"]["disabled"])
(pc,) = p["pluginConfig"]
args = pc["args"]
if pc["name"] != "FlexTopo" or args["minCandidateNodesPercentage"] != 10 or args["minCandidateNodesAbsolute"] != 100:
    errs.append("pluginConfig %s" % pc)
ft = yaml.safe_load(mounted(args["configFile"]))
if not ft.get("debugListen"):
    errs.append("configFile %s has no debugListen" % args["configFile"])
ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
secrets = {v["name"]: v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
# extender.metricsPort: flextopo's /metrics over HTTPS to reviewed tokens,
# the reviews through the pod's service account, and its RBAC.
delegator = [d for d in docs if d["kind"] == "ClusterRoleBinding"
             and d["roleRef"]["name"] == "system:auth-delegator"]
if want_metrics:
    if ft.get("metricsListen") != "0.0.0.0:%d" % want_metrics or ft.get("kubeconfig") != "":
        errs.append("metricsListen %r, kubeconfig %r; want 0.0.0.0:%d and the in-cluster account"
                    % (ft.get("metricsListen"), ft.get("kubeconfig"), want_metrics))
    if ports.get("metrics") != want_metrics:
        errs.append("container ports %s lack metrics: %d" % (ports, want_metrics))
    sa = spec["serviceAccountName"]
    if len(delegator) != 1 or delegator[0]["subjects"] != [
            {"kind": "ServiceAccount", "name": sa, "namespace": dep["metadata"]["namespace"]}]:
        errs.append("system:auth-delegator bindings %s, want one for ServiceAccount %s" % (delegator, sa))
else:
    if "metricsListen" in ft or "kubeconfig" in ft or "metrics" in ports or delegator:
        errs.append("extender.metricsPort 0: metricsListen %r, kubeconfig %r, ports %s, %d auth-delegator bindings"
                    % (ft.get("metricsListen"), ft.get("kubeconfig"), ports, len(delegator)))
# webhook.enabled: the webhook's key pair mounted where flextopo.yaml reads it.
if want_webhook:
    if ft.get("webhookListen") != "0.0.0.0:%d" % want_webhook or ports.get("webhook") != want_webhook:
        errs.append("webhookListen %r, container ports %s; want 0.0.0.0:%d served"
                    % (ft.get("webhookListen"), ports, want_webhook))
    for key in ("webhookCertFile", "webhookKeyFile"):
        d, base = posixpath.split(ft.get(key) or "")
        if mounts.get("webhook-tls") != d or secrets.get("webhook-tls") != "flextopo-webhook" or base not in ("tls.crt", "tls.key"):
            errs.append("%s %r is not in the mounted webhook Secret (mounts %s)" % (key, ft.get(key), mounts))
else:
    if any(k.startswith("webhook") for k in ft) or "webhook" in ports or "webhook-tls" in mounts:
        errs.append("webhook off, yet flextopo.yaml %s, ports %s, mounts %s" % (sorted(ft), ports, mounts))
for e in errs:
    print("%s: %s" % (sys.argv[1], e), file=sys.stderr)
sys.exit(1 if errs else 0)
PY
done
for f in extender extender-full extender-tls; do
	[[ -s $out/$f.yaml ]] || continue
	expect "$out/$f.yaml" Deployment 1
	expect "$out/$f.yaml" ConfigMap 1
	expect "$out/$f.yaml" ClusterRole 2
	expect "$out/$f.yaml" ClusterRoleBinding 3
	expect "$out/$f.yaml" Role 0
	! grep -q 'kind: KubeSchedulerConfiguration' "$out/$f.yaml" || fail "$f: renders a KubeSchedulerConfiguration"
	grep -q 'listen: "0.0.0.0:8888"' "$out/$f.yaml" || fail "$f: the extender does not listen on all addresses"
done
# The extender serves its /metrics to Prometheus on every address.
[[ ! -s $out/extender.yaml ]] ||
	grep -q 'metricsListen: "0.0.0.0:10262"' "$out/extender.yaml" || fail "extender: no metrics listener"
# Scheduler mode: flextopo's debug API on loopback by default, where the
# readiness probe reaches it from inside the container; on the pod's
# addresses, for the ServiceMonitor, with scheduler.debugListenHost.
if [[ -s $out/scheduler.yaml ]]; then
	f=$out/scheduler.yaml
	expect "$f" PodDisruptionBudget 0
	expect "$f" Service 0
	grep -q 'debugListen: "127.0.0.1:8889"' "$f" || fail "scheduler: the debug API is not on loopback"
	[[ $(grep -c '/dev/tcp/127.0.0.1/8889' "$f") -eq 1 ]] || fail "scheduler: the readiness probe does not call the debug port"
	grep -q 'containerPort: 8889' "$f" && fail "scheduler: the loopback debug port is declared as a container port"
fi
if [[ -s $out/scheduler-full.yaml ]]; then
	f=$out/scheduler-full.yaml
	expect "$f" PodDisruptionBudget 1
	expect "$f" ServiceMonitor 1
	expect "$f" Service 1
	grep -q 'debugListen: "0.0.0.0:8889"' "$f" || fail "scheduler-full: the debug API is not on the pod's addresses"
	grep -q 'https-extender-metrics' "$f" && fail "scheduler-full: scrapes an extender that scheduler mode does not run"
	grep -q 'http-flextopo-metrics' "$f" && fail "scheduler-full: scrapes the unauthenticated debug port while extender.metricsPort serves /metrics"
	python3 - "$f" <<'PY' || fail "scheduler-full: the ServiceMonitor does not scrape flextopo's and kube-scheduler's /metrics as extender mode does (above)"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
svc = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"].endswith("-metrics"))
ports = {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]}
want = {"https-metrics": (10259, "https"), "https-flextopo-metrics": (10262, "metrics")}
(sm,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
eps = {e["port"]: e for e in sm["spec"]["endpoints"]}
errs = []
if ports != want:
    errs.append("metrics Service ports %s, want %s" % (ports, want))
if sorted(eps) != sorted(want):
    errs.append("ServiceMonitor endpoints %s, want %s" % (sorted(eps), sorted(want)))
for name, e in eps.items():
    if e.get("scheme") != "https" or e.get("bearerTokenFile") != "/var/run/secrets/kubernetes.io/serviceaccount/token" \
            or e.get("tlsConfig") != {"insecureSkipVerify": True}:
        errs.append("endpoint %s: %s, want HTTPS with the service account's token" % (name, e))
for e in errs:
    print("%s: %s" % (sys.argv[1], e), file=sys.stderr)
sys.exit(1 if errs else 0)
PY
fi
# extender.metricsPort 0 in scheduler mode: flextopo's metrics are scraped
# from the debug listener when that is on the pod's addresses.
if [[ -s $out/scheduler-no-metrics.yaml ]]; then
	f=$out/scheduler-no-metrics.yaml
	grep -q 'name: http-flextopo-metrics' "$f" || fail "scheduler-no-metrics: the metrics Service has no port for the debug listener"
	grep -q 'port: http-flextopo-metrics' "$f" || fail "scheduler-no-metrics: the ServiceMonitor does not scrape the debug listener"
	grep -q 'https-flextopo-metrics' "$f" && fail "scheduler-no-metrics: scrapes a metrics port that extender.metricsPort: 0 turns off"
fi
for f in extender extender-tls; do
	[[ ! -s $out/$f.yaml ]] || expect "$out/$f.yaml" Service 1
done
if [[ -s $out/extender-full.yaml ]]; then
	expect "$out/extender-full.yaml" PodDisruptionBudget 1
	expect "$out/extender-full.yaml" ServiceMonitor 1
	expect "$out/extender-full.yaml" Service 2
fi
# TLS: the extender serves HTTPS with the Secret's key, which only its own
# container mounts; kube-scheduler gets ca.crt alone and verifies serverName.
# Without TLS nothing of it is rendered.
for f in scheduler extender; do
	[[ -s $out/$f.yaml ]] || continue
	! grep -qE 'enableHTTPS: true|tlsConfig:|secretName:|flextopo-tls' "$out/$f.yaml" || fail "$f: TLS rendered while tls.enabled=false"
done
[[ ! -s $out/extender.yaml ]] || grep -q 'tlsCertFile: ""' "$out/extender.yaml" || fail "extender: tlsCertFile is not off"
if [[ -s $out/extender-tls.yaml ]]; then
	f=$out/extender-tls.yaml
	grep -q 'tlsClientCAFile: "/etc/flextopo-client-ca/ca.crt"' "$f" || fail "extender-tls: no client CA"
	grep -q 'secretName: scheduler-client-ca' "$f" || fail "extender-tls: the client CA Secret is not mounted"
	[[ $(grep -c 'scheme: HTTPS$' "$f") -eq 2 ]] || fail "extender-tls: the extender's probes do not use HTTPS"
	grep -q 'targetPort: https' "$f" || fail "extender-tls: the Service does not target the https port"
fi
# The node agent: a DaemonSet in every mode unless turned off; the NRI
# socket's directory and kubelet's pod-resources directory are its only host
# paths, and observe mode drops the NRI one.
for f in scheduler extender; do
	[[ -s $out/$f.yaml ]] || continue
	expect "$out/$f.yaml" DaemonSet 1
	expect "$out/$f.yaml" ValidatingAdmissionPolicy 1
	expect "$out/$f.yaml" ValidatingAdmissionPolicyBinding 1
	d=$(awk '/^kind: DaemonSet/,0' "$out/$f.yaml")
	[[ $(grep -c 'hostPath:' <<<"$d") -eq 2 ]] || fail "$f: the node agent mounts other than two host paths"
	grep -q 'path: /var/run/nri$' <<<"$d" || fail "$f: the node agent does not mount the NRI socket's directory"
	grep -q 'path: /var/lib/kubelet/pod-resources$' <<<"$d" || fail "$f: the node agent does not mount kubelet's pod-resources"
	grep -q -- '- --mode=enforce' <<<"$d" || fail "$f: the node agent is not in enforce mode by default"
	grep -q 'privileged: true' <<<"$d" && fail "$f: the node agent is privileged"
	grep -q 'path: /readyz' <<<"$d" || fail "$f: the node agent has no readiness probe"
done
if [[ -s $out/node-observe.yaml ]]; then
	d=$(awk '/^kind: DaemonSet/,0' "$out/node-observe.yaml")
	[[ $(grep -c 'hostPath:' <<<"$d") -eq 1 ]] || fail "node-observe: observe mode mounts the NRI socket"
	grep -q -- '- --mode=observe' <<<"$d" || fail "node-observe: the agent is not in observe mode"
	grep -q -- '- --discover-command=flextopo-discover --sharing-config /etc/dp/config.yaml' <<<"$d" ||
		fail "node-observe: discoverArgs are not passed to flextopo-discover"
	grep -q 'runtimeClassName: nvidia' <<<"$d" || fail "node-observe: runtimeClassName is not set"
	expect "$out/node-observe.yaml" ValidatingAdmissionPolicy 0
fi
if [[ -s $out/node-off.yaml ]]; then
	expect "$out/node-off.yaml" DaemonSet 0
	expect "$out/node-off.yaml" ClusterRole 2
fi
# GPU mode: the device plugin's needs no resource.k8s.io access and keeps
# managedResources in extender mode; DRA and mixed watch the DRA objects and
# send every pod (an empty managedResources).
if [[ -s $out/extender.yaml ]]; then
	grep -q '^    dra: off$' "$out/extender.yaml" || fail "extender: dra is not off with gpuMode devicePlugin"
	! grep -q 'resource.k8s.io' "$out/extender.yaml" || fail "extender: resource.k8s.io access with gpuMode devicePlugin"
fi
for f in scheduler-dra extender-mixed; do
	[[ -s $out/$f.yaml ]] || continue
	grep -q '^    dra: on$' "$out/$f.yaml" || fail "$f: dra is not on"
	grep -q 'resources: \["resourceclaims"\]' "$out/$f.yaml" || fail "$f: no access to resourceclaims"
	! grep -q 'managedResources:' "$out/$f.yaml" || fail "$f: managedResources would keep claim-only pods from flextopo"
done
# The admission webhook: off by default; on, a Service to the extender's
# webhook port, the MutatingWebhookConfiguration for claims and templates,
# and the key pair mounted where webhookCertFile points.
for f in scheduler extender scheduler-dra; do
	[[ ! -s $out/$f.yaml ]] || expect "$out/$f.yaml" MutatingWebhookConfiguration 0
done
if [[ -s $out/extender-webhook.yaml ]]; then
	f=$out/extender-webhook.yaml
	expect "$f" MutatingWebhookConfiguration 1
	grep -q 'name: flextopo-webhook$' "$f" || fail "extender-webhook: no webhook Service"
	grep -q 'resources: \["resourceclaims", "resourceclaimtemplates"\]' "$f" || fail "extender-webhook: the webhook does not see claims and templates"
	grep -q 'cert-manager.io/inject-ca-from: "flextopo-system/flextopo-webhook"' "$f" || fail "extender-webhook: no CA injection"
	grep -q 'webhookListen: "0.0.0.0:9443"' "$f" || fail "extender-webhook: the extender does not serve the webhook"
	grep -q 'mountPath: /etc/flextopo-webhook' "$f" || fail "extender-webhook: the webhook's key pair is not mounted"
fi
# Scheduler mode: flextopo-scheduler serves it, on every replica (the
# Service selects them all); the check of each scheduler case above follows
# its files to the mounted Secret.
if [[ -s $out/scheduler-webhook.yaml ]]; then
	f=$out/scheduler-webhook.yaml
	expect "$f" MutatingWebhookConfiguration 1
	expect "$f" PodDisruptionBudget 1
	grep -q 'name: flextopo-webhook$' "$f" || fail "scheduler-webhook: no webhook Service"
	grep -q 'targetPort: webhook$' "$f" || fail "scheduler-webhook: the webhook Service does not target the container's webhook port"
	grep -q 'cert-manager.io/inject-ca-from: "flextopo-system/flextopo-webhook"' "$f" || fail "scheduler-webhook: no CA injection"
fi
"$helm" package "$chart" --destination "$out" >"$out/package.log" 2>&1 || {
	fail "helm package:"
	cat "$out/package.log" >&2
}
phase_done "template"

# --- 4. wrong values -----------------------------------------------------

# Each line: --set arguments (space-separated) | text the error must contain.
bad=(
	"mode=bogus|at '/mode': value must be one of 'scheduler', 'extender'"
	"extender.config.policy=spread|at '/extender/config/policy': value must be one of 'packed', 'distributed'"
	"extender.config.defaultAffinityMode=strict|at '/extender/config/defaultAffinityMode': value must be one of"
	"extender.config.logLevel=verbose|at '/extender/config/logLevel': value must be one of"
	"extender.config.threads=257|at '/extender/config/threads': maximum"
	"extender.config.apiTimeoutMs=0|at '/extender/config/apiTimeoutMs': minimum"
	"extender.config.maxRequestBytes=2Gi|at '/extender/config/maxRequestBytes'"
	"extender.config.gpuResource=gpu|at '/extender/config/gpuResource'"
	"extender.config.polcy=packed|additional properties 'polcy' not allowed"
	"replicaCount=0|at '/replicaCount': minimum"
	"registration.weight=0|at '/registration/weight': minimum"
	"registration.httpTimeout=0s|at '/registration/httpTimeout'"
	"registration.pods=gpu|at '/registration/pods': value must be one of 'auto', 'devices', 'all'"
	"mode=extender registration.pods=all registration.managedResources[0].name=x|registration.managedResources must be empty with registration.pods: all"
	"scheduler.percentageOfNodesToScore=101|at '/scheduler/percentageOfNodesToScore': maximum"
	"extender.port=70000|at '/extender/port': maximum"
	"tls.enabled=true|tls.secretName: tls.enabled needs a kubernetes.io/tls Secret"
	"tls.clientAuth.enabled=true|tls.clientAuth.enabled: client certificates are asked for over TLS only"
	"tls.enabled=true tls.secretName=x tls.clientAuth.enabled=true|client certificates are for mode=extender"
	"tls.enabled=true tls.secretName=x|tls.enabled: in scheduler mode flextopo runs inside kube-scheduler"
	"extender.metricsPort=10259|extender.metricsPort: flextopo's /metrics needs a port other than scheduler.securePort"
	"extender.metricsPort=8889|extender.metricsPort: flextopo's /metrics needs a port other than scheduler.securePort and scheduler.debugPort"
	"gpuMode=dra webhook.enabled=true webhook.secretName=w webhook.caBundle=Zm9v webhook.port=10262|webhook.port: the admission webhook needs a port other than"
	"scheduler.debugPort=10259|scheduler.debugPort: flextopo's debug listener needs a port other than scheduler.securePort"
	"scheduler.debugListenHost=10.0.0.1|at '/scheduler/debugListenHost': value must be one of"
	"scheduler.preemption.minCandidateNodesPercentage=101|at '/scheduler/preemption/minCandidateNodesPercentage': maximum"
	"tls.serverName=Flextopo_Scheduler|at '/tls/serverName'"
	"tls.secretName=My_Secret|at '/tls/secretName'"
	"tls.enabled=yes|at '/tls/enabled'"
	"scheduler.name=default-scheduler|scheduler.name: default-scheduler is the name of the cluster's own scheduler"
	"mode=extender replicaCount=2|extender mode runs exactly 1 replica"
	"mode=extender serviceMonitor.enabled=true extender.metricsPort=0|which extender.metricsPort: 0 turns off"
	"extender.config.watchBackoffInitialMs=60000|may not exceed extender.config.watchBackoffMaxMs"
	"nodeAgent.mode=strict|at '/nodeAgent/mode': value must be one of 'enforce', 'observe'"
	"nodeAgent.observeInterval=0s|at '/nodeAgent/observeInterval'"
	"nodeAgent.nriSocket=nri.sock|at '/nodeAgent/nriSocket'"
	"nodeAgent.port=0|at '/nodeAgent/port': minimum"
	"nodeAgent.logLevel=trace|at '/nodeAgent/logLevel'"
	"nodeAgent.enabeld=true|additional properties 'enabeld' not allowed"
	"gpuMode=plugin|at '/gpuMode': value must be one of 'devicePlugin', 'dra', 'mixed'"
	"mode=extender gpuMode=dra registration.pods=devices|registration.pods: devices cannot send pods with only ResourceClaims"
	"webhook.enabled=true|webhook.enabled: the webhook adds DRA constraints; it needs gpuMode dra or mixed"
	"gpuMode=dra webhook.enabled=true|webhook.secretName: the webhook needs a kubernetes.io/tls Secret"
	"gpuMode=dra webhook.enabled=true webhook.secretName=w|webhook: set webhook.caBundle or webhook.certManagerCertificate"
	"webhook.failurePolicy=Sometimes|at '/webhook/failurePolicy': value must be one of 'Ignore', 'Fail'"
)
echo "== wrong values must fail"
for b in "${bad[@]}"; do
	sets=${b%%|*}
	want=${b#*|}
	args=()
	for s in $sets; do args+=(--set "$s"); done
	if "$helm" template "$release" "$chart" --namespace "$namespace" --kube-version "$kube_version" \
		"${args[@]}" >/dev/null 2>"$out/bad.log"; then
		fail "--set $sets was accepted; want an error containing: $want"
	elif ! grep -qF -- "$want" "$out/bad.log"; then
		fail "--set $sets failed with the wrong message; want: $want; got:"
		cat "$out/bad.log" >&2
	else
		echo "refused $sets: $(grep -m1 -F -- "$want" "$out/bad.log" | sed 's/^[[:space:]-]*//')"
	fi
done
# Version skew: flextopo-scheduler is kube-scheduler $kube_version, which may
# not be newer than the cluster; extender mode, the fix the message names,
# works there.
if "$helm" template "$release" "$chart" --namespace "$namespace" --kube-version v1.35.0 >/dev/null 2>"$out/bad.log"; then
	fail "flextopo-scheduler ($kube_version) was accepted on a v1.35.0 cluster"
elif ! grep -qF "is kube-scheduler $kube_version, newer than the cluster's Kubernetes v1.35.0" "$out/bad.log"; then
	fail "kube-scheduler newer than the cluster refused with the wrong message:"
	cat "$out/bad.log" >&2
else
	echo "refused flextopo-scheduler ($kube_version) on a v1.35.0 cluster: ok"
fi
if ! "$helm" template "$release" "$chart" --namespace "$namespace" --kube-version v1.35.0 \
	--set mode=extender >/dev/null 2>"$out/bad.log"; then
	fail "mode=extender on a v1.35.0 cluster was refused:"
	cat "$out/bad.log" >&2
fi
# lint refuses a wrong value too (the schema is checked against values files).
printf 'extender:\n  config:\n    policy: spread\n' >"$out/bad-values.yaml"
if "$helm" lint --strict --kube-version "$kube_version" "$chart" -f "$out/bad-values.yaml" >"$out/bad.log" 2>&1; then
	fail "helm lint accepted extender.config.policy=spread"
elif ! grep -qF "value must be one of 'packed', 'distributed'" "$out/bad.log"; then
	fail "helm lint refused extender.config.policy=spread with the wrong message:"
	cat "$out/bad.log" >&2
else
	echo "lint refuses a values file with extender.config.policy=spread: ok"
fi
rm -f "$out/bad.log"
phase_done "schema"

# --- 5. e2e (optional) ---------------------------------------------------

rc=0
if [[ $mode == e2e ]]; then
	if ((failures == 0)); then
		echo "== e2e chart tests (HELM=$helm)"
		HELM=$helm "$repo_root/scripts/e2e.sh" -run '^TestChart' "$@" || rc=$?
	else
		echo "== e2e chart tests skipped: the checks above failed"
	fi
	phase_done "e2e"
fi

echo "chart-check.sh: timings: ${timings[*]}; total $((SECONDS - start))s"
if ((failures > 0 || rc != 0)); then
	echo "chart-check.sh: FAILED ($failures check(s) failed, e2e exit $rc); output kept in $out" >&2
	exit 1
fi
if ((keep_out)); then
	echo "chart-check.sh: all checks passed; rendered manifests in $out"
else
	echo "chart-check.sh: all checks passed"
	rm -rf "$out"
fi
