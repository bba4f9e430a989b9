#!/usr/bin/env bash
# Scheduler throughput with and without flextopo, scheduler_perf style
# (test/e2e/schedperf_test.go): the e2e's real kube-apiserver, etcd and
# kube-scheduler, N A100-like nodes, M GPU pods, the two arms alternating.
#
#   scripts/schedperf.sh [NODESxPODS,...]     default 500x1000,5000x10000
#
# Environment: FLEXTOPO_SCHEDPERF_PAIRS (arm pairs per size, default 2),
# FLEXTOPO_SCHEDPERF_QPS (the schedulers' client QPS and burst, default
# 5000), FLEXTOPO_SCHEDPERF_TIMEOUT_S (per arm, default 600),
# FLEXTOPO_SCHEDPERF_THREADS (the extender's HTTP worker threads; default:
# its own default), FLEXTOPO_SCHEDPERF_BASELINE (another flextopo-extender
# binary, e.g. an older build, run as a third arm in the same run) and
# FLEXTOPO_SCHEDPERF_BASELINE_THREADS (its threads),
# FLEXTOPO_SCHEDPERF_NODES_TO_SCORE (the schedulers'
# percentageOfNodesToScore; default 0, kube-scheduler's adaptive share; the
# shipped configuration sets 100), FLEXTOPO_SCHEDPERF_PERF (a folder: each
# arm's scheduler and extender are profiled with perf record into
# <folder>/<arm>-<pair>.perf.data), FLEXTOPO_SCHEDPERF_ARMS (the arms to
# run besides alone, e.g. "plugin"; default all), FLEXTOPO_SCHEDPERF_ALONE
# ("flextopo-scheduler": the alone arm runs that binary without FlexTopo
# enabled, the same build as the plugin arm), FLEXTOPO_SCHEDPERF_CPU_ONLY
# (the percentage of pods that ask for no GPU; default 0). The table
# goes to the log and to build/schedperf.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
sizes=${1:-500x1000,5000x10000}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target flextopo-extender
FLEXTOPO_SCHEDPERF=$sizes FLEXTOPO_SCHEDPERF_REPORT=$PWD/build/schedperf.md \
	FLEXTOPO_EXTENDER=build/flextopo-extender scripts/e2e.sh -run '^TestSchedulerThroughput$' -timeout 120m
echo "schedperf.sh: table in build/schedperf.md"
cat build/schedperf.md
