#!/usr/bin/env python3
"""Read GET /metrics of running listeners with Prometheus's own parser.

    test_metrics_format.py URL...

prometheus_client.parser.text_string_to_metric_families must accept the text
of every URL; each family flextopo documents (include/flextopo/metrics.h) must
be there with its type; every histogram series must have cumulative buckets
ending in +Inf equal to its _count; and the listeners must agree on the
counters that are process-wide. Exit status 1 on any failure.
"""
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

# Family names as the parser reports them (counters without _total).
FAMILIES = {
    "flextopo_build_info": "gauge",
    "flextopo_requests": "counter",
    "flextopo_request_duration_seconds": "histogram",
    "flextopo_http_errors": "counter",
    "flextopo_http_connections_closed": "counter",
    "flextopo_preemption_nodes": "counter",
    "flextopo_preemption_victims": "counter",
    "flextopo_binds": "counter",
    "flextopo_bind_affinity_level": "counter",
    "flextopo_ready": "gauge",
    "flextopo_nodes": "gauge",
    "flextopo_nodes_bad_topology": "gauge",
    "flextopo_pods": "gauge",
    "flextopo_assumed_pods": "gauge",
    "flextopo_binds_unsettled": "gauge",
    "flextopo_snapshot_generation": "gauge",
    "flextopo_cache_age_seconds": "gauge",
    "flextopo_informer_restarts": "counter",
    "flextopo_decision_log_records": "gauge",
    "flextopo_decision_log_capacity": "gauge",
    "flextopo_decision_log_bytes": "gauge",
    "flextopo_decisions": "counter",
    "flextopo_gpu_capacity_free": "gauge",
    "flextopo_gpu_fragmentation": "gauge",
    "flextopo_gpus_whole_free": "gauge",
    "flextopo_mig_slices_stranded": "gauge",
    "flextopo_workload_mix_pods": "gauge",
    "flextopo_drift_pods": "gauge",
    "flextopo_conflict_pods": "gauge",
    "flextopo_conflicts_found": "counter",
    "flextopo_victim_searches": "counter",
    "flextopo_dra_preemption_refused": "counter",
    "flextopo_preemption_gang_pods_disrupted": "counter",
    "flextopo_dra_nodes": "gauge",
    "flextopo_dra_node_errors": "gauge",
    "flextopo_dra_double_published_nodes": "gauge",
    "flextopo_resource_claims_allocated": "gauge",
}
VERBS = {"filter", "prioritize", "preempt", "bind"}


def fetch(url):
    with urllib.request.urlopen(url, timeout=10) as reply:
        ctype = reply.headers.get("Content-Type", "")
        if not ctype.startswith("text/plain") or "version=0.0.4" not in ctype:
            raise SystemExit("%s: Content-Type %r" % (url, ctype))
        return reply.read().decode("utf-8")


def check_histogram(family):
    series = {}
    for s in family.samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        series.setdefault(key, {"buckets": [], "count": None, "sum": None})
        if s.name.endswith("_bucket"):
            series[key]["buckets"].append((float(s.labels["le"]), s.value))
        elif s.name.endswith("_count"):
            series[key]["count"] = s.value
        elif s.name.endswith("_sum"):
            series[key]["sum"] = s.value
    verbs = {dict(k).get("verb") for k in series}
    if verbs != VERBS:
        raise SystemExit("%s: verbs %s" % (family.name, sorted(verbs)))
    for key, h in series.items():
        bounds = [b for b, _ in h["buckets"]]
        counts = [c for _, c in h["buckets"]]
        if bounds != sorted(bounds) or bounds[-1] != float("inf"):
            raise SystemExit("%s%s: bucket bounds %s" % (family.name, key, bounds))
        if counts != sorted(counts):
            raise SystemExit("%s%s: buckets not cumulative %s" % (family.name, key, counts))
        if h["count"] != counts[-1] or h["sum"] is None or h["sum"] < 0:
            raise SystemExit("%s%s: _count %s, +Inf %s" % (family.name, key, h["count"], counts[-1]))


def check(url):
    text = fetch(url)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name, kind in FAMILIES.items():
        if name not in families:
            raise SystemExit("%s: no family %s" % (url, name))
        if families[name].type != kind:
            raise SystemExit("%s: %s is %s, not %s" % (url, name, families[name].type, kind))
    for name in families:
        if name not in FAMILIES:
            raise SystemExit("%s: undocumented family %s" % (url, name))
    check_histogram(families["flextopo_request_duration_seconds"])
    requests = {s.labels["verb"]: s.value for s in families["flextopo_requests"].samples
                if s.name == "flextopo_requests_total"}
    print("%s: %d families parsed; requests %s" % (url, len(families), requests))
    return {s.name + repr(sorted(s.labels.items())): s.value
            for s in families["flextopo_requests"].samples}


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    seen = [check(url) for url in sys.argv[1:]]
    if any(s != seen[0] for s in seen):
        raise SystemExit("listeners disagree on flextopo_requests_total: %s" % seen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
