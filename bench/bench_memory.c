/*
 * Model memory of flextopo-bench (bench_memory.h): the synthetic cluster
 * loaded into the app the way ft_app_load_snapshot() loads a List, and
 * checked as built; the model's bytes per node (ft_node_footprint over the
 * snapshot), the growth of VmRSS per node while loading (heap returned with
 * malloc_trim before both readings), and VmRSS and VmHWM when
 * bench_memory_sample is called.
 */
#include "bench_memory.h"

#include <flextopo/app.h>
#include <flextopo/cpuset.h>
#include <flextopo/error.h>
#include <flextopo/state.h>
#include <flextopo/topology.h>

#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

/* The aim of bench/README.md: model bytes per 8-GPU node. */
#define TARGET_MODEL_BYTES 16384.0

/* A field of /proc/self/status in KiB ("VmRSS", "VmHWM"), or -1. */
static long status_kib(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	size_t klen = strlen(key);
	char line[256];
	long kib = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			kib = strtol(line + klen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return kib;
}

/* VmRSS after handing freed heap back, so that it counts live memory. */
static long live_rss_kib(void)
{
	malloc_trim(0);
	return status_kib("VmRSS");
}

/* Objects applied one by one between replace_begin and replace_end. */
static int load_direct(run_t *run, long *rss_before_kib)
{
	ft_state_t *state = run->app.state;
	sink_t sink = {state, NULL};
	int rc = 0;

	*rss_before_kib = live_rss_kib();
	ft_state_replace_begin(state, FT_KIND_NODE);
	ft_state_replace_begin(state, FT_KIND_POD);
	for (unsigned i = 0; i < run->n && rc == 0; i++)
		rc = synth_emit_node(&run->gen, &sink, run->r, i);
	ft_state_replace_end(state, FT_KIND_NODE);
	ft_state_replace_end(state, FT_KIND_POD);
	atomic_store(&run->app.snapshot_loaded, true);
	return rc;
}

static int write_text(char *path, const char *text)
{
	int fd = mkstemps(path, 5);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	size_t len = strlen(text);
	int rc = 0;

	if (!f) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (fwrite(text, 1, len, f) != len)
		rc = -1;
	if (fclose(f) != 0)
		rc = -1;
	return rc;
}

/* The whole List printed to a temporary file and read by load_snapshot. */
static int load_via_file(run_t *run, long *rss_before_kib)
{
	cJSON *list = cJSON_CreateObject();
	sink_t sink = {NULL, NULL};
	const char *tmp = getenv("TMPDIR");
	char path[4096], *text = NULL;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/flextopo-bench-XXXXXX.json",
		 tmp && *tmp ? tmp : "/tmp");
	cJSON_AddStringToObject(list, "apiVersion", "v1");
	cJSON_AddStringToObject(list, "kind", "List");
	sink.items = cJSON_AddArrayToObject(list, "items");
	for (unsigned i = 0; i < run->n && rc == 0; i++)
		rc = synth_emit_node(&run->gen, &sink, run->r, i);
	if (rc == 0 && !(text = cJSON_PrintUnformatted(list)))
		rc = bench_fail(run->r, "List: out of memory");
	cJSON_Delete(list);
	if (rc == 0 && write_text(path, text) < 0)
		rc = bench_fail(run->r, "%s: %s", path, strerror(errno));
	free(text);
	if (rc < 0)
		return rc;
	*rss_before_kib = live_rss_kib();
	if (ft_app_load_snapshot(&run->app, path) < 0)
		rc = bench_fail(run->r, "load_snapshot: %s", ft_error_last());
	unlink(path);
	return rc;
}

/* Every node and pod is in, every pod holds what it was given. */
static int check_loaded(run_t *run)
{
	ft_state_stats_t st;

	ft_state_stats(run->app.state, &st);
	if (st.nodes != run->n || st.nodes_bad_topology ||
	    st.pods != run->gen.pods)
		return bench_fail(
		    run->r,
		    "loaded %u nodes (%u without topology) and %u pods; built %u nodes and %u pods",
		    st.nodes, st.nodes_bad_topology, st.pods, run->n,
		    run->gen.pods);
	return 0;
}

static int load_cluster(run_t *run)
{
	result_t *r = run->r;
	double t0 = now_us();
	long before = 0;
	int rc = run->o->via_file ? load_via_file(run, &before)
				  : load_direct(run, &before);

	r->load_s = (now_us() - t0) / 1e6;
	r->pods = run->gen.pods;
	if (rc < 0 || check_loaded(run) < 0)
		return -1;
	r->rss_bytes = (double)(live_rss_kib() - before) * 1024.0 / run->n;
	return 0;
}

static void count_node(result_t *r, const ft_node_t *node)
{
	const ft_topology_t *t = node->topology;

	r->gpus_total += (unsigned)__builtin_popcount(t->whole_gpus);
	r->gpus_used +=
	    (unsigned)__builtin_popcount(node->gpus_used & t->whole_gpus);
	r->cpus_total += t->n_cpus;
	r->cpus_used += ft_cpuset_count(&node->cpus_used);
	r->mig_total += t->n_mig;
	r->mig_used += (unsigned)(__builtin_popcountll(node->mig_used[0]) +
				  __builtin_popcountll(node->mig_used[1]));
	r->holdings += node->n_holdings;
}

/* Model bytes and fill, from the published snapshot. */
static int measure_model(run_t *run)
{
	ft_snapshot_t *snap = ft_state_snapshot(run->app.state);
	result_t *r = run->r;
	size_t bytes = 0;
	int rc = 0;

	for (unsigned i = 0; i < snap->n_nodes && rc == 0; i++) {
		const ft_node_t *node = snap->nodes[i];
		bytes += ft_node_footprint(node);
		if (!node->topology || node->conflicts || node->unknown_gpus ||
		    node->unknown_cpus)
			rc = bench_fail(
			    r,
			    "node %s: %s, %u conflicts, %u GPUs and %u CPUs of unknown placement",
			    node->name,
			    node->topology ? "topology" : "no topology",
			    node->conflicts, node->unknown_gpus,
			    node->unknown_cpus);
		else
			count_node(r, node);
	}
	r->model_bytes = snap->n_nodes ? (double)bytes / snap->n_nodes : 0;
	if (rc == 0 && r->holdings != r->pods)
		rc = bench_fail(r, "%u of %u pods hold something on their node",
				r->holdings, r->pods);
	ft_snapshot_unref(snap);
	return rc;
}

int bench_memory_load(run_t *run)
{
	if (load_cluster(run) < 0)
		return -1;
	return measure_model(run);
}

void bench_memory_sample(result_t *r)
{
	r->rss_kib = status_kib("VmRSS");
	r->hwm_kib = status_kib("VmHWM");
}

void bench_memory_print(const result_t *res, unsigned n)
{
	printf(
	    "nodes   pods  fill%%:gpu  cpu  mig  model_B/node  rss_B/node  VmRSS_MiB  VmHWM_MiB  load_s\n");
	for (unsigned k = 0; k < n; k++) {
		const result_t *r = &res[k];
		if (!r->ok)
			continue;
		printf(
		    "%5u %6u  %9.0f %4.0f %4.0f  %12.0f  %10.0f  %9.1f  %9.1f  %6.2f\n",
		    r->nodes, r->pods, bench_pct(r->gpus_used, r->gpus_total),
		    bench_pct(r->cpus_used, r->cpus_total),
		    bench_pct(r->mig_used, r->mig_total), r->model_bytes,
		    r->rss_bytes, r->rss_kib / 1024.0, r->hwm_kib / 1024.0,
		    r->load_s);
	}
	printf("\n");
}

void bench_memory_print_aim(const result_t *r)
{
	if (!r->ok)
		return;
	printf("aim: %u nodes, model %.0f B/node <= %.0f B/node: %s\n",
	       r->nodes, r->model_bytes, TARGET_MODEL_BYTES,
	       r->model_bytes <= TARGET_MODEL_BYTES ? "met" : "MISSED");
}
