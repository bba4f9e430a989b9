/*
 * Prometheus metrics: relaxed atomic counters fed by the verbs, written out
 * in the text exposition format 0.0.4 on each scrape.
 *
 * Latency buckets are stored per bucket (not cumulative) so that a request
 * adds to one counter; the writer sums them into the cumulative `le` series
 * the format requires and takes `_count` from that sum, so that a scrape
 * racing with requests still shows a +Inf bucket equal to its count.
 */
#include <flextopo/buf.h>
#include <flextopo/error.h>
#include <flextopo/metrics.h>
#include <flextopo/server.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bucket bounds, as written in `le` and in nanoseconds. */
static const char *const bucket_text[FT_METRICS_BUCKETS] = {
    "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
    "0.05",   "0.1",	 "0.25",   "0.5",   "1",      "2.5",   "5"};
static const uint64_t bucket_ns[FT_METRICS_BUCKETS] = {
    100000,    250000,	  500000,     1000000,	  2500000,
    5000000,   10000000,  25000000,   50000000,	  100000000,
    250000000, 500000000, 1000000000, 2500000000, 5000000000};

static const char *const mode_names[2] = {"guaranteed", "best-effort"};
static const char *const outcome_names[FT_PREEMPT_OUTCOMES] = {
    "victims", "passed", "dropped"};

typedef struct {
	atomic_ullong buckets[FT_METRICS_BUCKETS + 1]; /* last: above all */
	atomic_ullong sum_ns;
} histogram_t;

struct ft_metrics {
	histogram_t latency[FT_VERB_COUNT];
	atomic_ullong preempt_nodes[2][FT_PREEMPT_OUTCOMES];
	atomic_ullong preempt_victims[2];
	atomic_ullong victim_searches[FT_VICTIM_FALLBACKS];
	atomic_ullong dra_preemption_refused;
	atomic_ullong gang_pods_disrupted;
	atomic_ullong binds[FT_BIND_RESULTS];
	atomic_ullong bind_levels[FT_LEVEL_COUNT];
};

int ft_metrics_new(ft_metrics_t **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : ft_error_set(FT_ENOMEM, "metrics: out of memory");
}

void ft_metrics_free(ft_metrics_t *m)
{
	free(m);
}

static void add(atomic_ullong *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static uint64_t get(atomic_ullong *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

void ft_metrics_request(ft_metrics_t *m, ft_verb_t verb, uint64_t nanoseconds)
{
	unsigned b = 0;

	if (!m || (unsigned)verb >= FT_VERB_COUNT)
		return;
	while (b < FT_METRICS_BUCKETS && nanoseconds > bucket_ns[b])
		b++;
	add(&m->latency[verb].buckets[b], 1);
	add(&m->latency[verb].sum_ns, nanoseconds);
}

void ft_metrics_preempt(ft_metrics_t *m, ft_affinity_mode_t mode,
			const unsigned nodes[FT_PREEMPT_OUTCOMES],
			unsigned victims)
{
	unsigned k = mode == FT_MODE_BEST_EFFORT;

	if (!m)
		return;
	for (unsigned o = 0; o < FT_PREEMPT_OUTCOMES; o++)
		add(&m->preempt_nodes[k][o], nodes[o]);
	add(&m->preempt_victims[k], victims);
}

void ft_metrics_victim_search(ft_metrics_t *m, ft_victim_fallback_t fallback)
{
	if (m && (unsigned)fallback < FT_VICTIM_FALLBACKS)
		add(&m->victim_searches[fallback], 1);
}

void ft_metrics_dra_preemption_refused(ft_metrics_t *m)
{
	if (m)
		add(&m->dra_preemption_refused, 1);
}

void ft_metrics_gang_pods_disrupted(ft_metrics_t *m, unsigned pods)
{
	if (m)
		add(&m->gang_pods_disrupted, pods);
}

void ft_metrics_bind(ft_metrics_t *m, ft_bind_result_t result, ft_level_t level)
{
	if (!m || (unsigned)result >= FT_BIND_RESULTS)
		return;
	add(&m->binds[result], 1);
	if (result == FT_BIND_BOUND && (unsigned)level < FT_LEVEL_COUNT)
		add(&m->bind_levels[level], 1);
}

/* ---- the exposition text ---- */

static void family(ft_buf_t *b, const char *name, const char *type,
		   const char *help)
{
	ft_buf_puts(b, "# HELP flextopo_");
	ft_buf_puts(b, name);
	ft_buf_puts(b, " ");
	ft_buf_puts(b, help);
	ft_buf_puts(b, "\n# TYPE flextopo_");
	ft_buf_puts(b, name);
	ft_buf_puts(b, " ");
	ft_buf_puts(b, type);
	ft_buf_puts(b, "\n");
}

/* A label value: backslash, double quote and newline escaped. */
static void label_value(ft_buf_t *b, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '\\' || *s == '"')
			ft_buf_put(b, "\\", 1);
		if (*s == '\n')
			ft_buf_puts(b, "\\n");
		else
			ft_buf_put(b, s, 1);
	}
}

/* `name{key="value"}` or `name` when key is NULL, then a space. */
static void series(ft_buf_t *b, const char *name, const char *key,
		   const char *value)
{
	ft_buf_puts(b, "flextopo_");
	ft_buf_puts(b, name);
	if (key) {
		ft_buf_puts(b, "{");
		ft_buf_puts(b, key);
		ft_buf_puts(b, "=\"");
		label_value(b, value);
		ft_buf_puts(b, "\"}");
	}
	ft_buf_puts(b, " ");
}

static void sample_uint(ft_buf_t *b, const char *name, const char *key,
			const char *value, uint64_t v)
{
	series(b, name, key, value);
	ft_buf_put_uint(b, v);
	ft_buf_puts(b, "\n");
}

static void sample_double(ft_buf_t *b, const char *name, double v)
{
	char text[64];

	series(b, name, NULL, NULL);
	snprintf(text, sizeof(text), "%.9g\n", v);
	ft_buf_puts(b, text);
}

static void histogram_write(ft_buf_t *b, ft_metrics_t *m, ft_verb_t verb)
{
	const char *v = ft_verb_name(verb);
	histogram_t *h = &m->latency[verb];
	uint64_t cumulative = 0;
	char text[64];

	for (unsigned i = 0; i <= FT_METRICS_BUCKETS; i++) {
		cumulative += get(&h->buckets[i]);
		ft_buf_puts(b,
			    "flextopo_request_duration_seconds_bucket{verb=\"");
		ft_buf_puts(b, v);
		ft_buf_puts(b, "\",le=\"");
		ft_buf_puts(b,
			    i < FT_METRICS_BUCKETS ? bucket_text[i] : "+Inf");
		ft_buf_puts(b, "\"} ");
		ft_buf_put_uint(b, cumulative);
		ft_buf_puts(b, "\n");
	}
	snprintf(text, sizeof(text), "%.9f\n", (double)get(&h->sum_ns) / 1e9);
	series(b, "request_duration_seconds_sum", "verb", v);
	ft_buf_puts(b, text);
	sample_uint(b, "request_duration_seconds_count", "verb", v, cumulative);
}

static uint64_t requests_of(ft_metrics_t *m, ft_verb_t verb)
{
	uint64_t n = 0;

	for (unsigned i = 0; i <= FT_METRICS_BUCKETS; i++)
		n += get(&m->latency[verb].buckets[i]);
	return n;
}

static void write_requests(ft_buf_t *b, ft_metrics_t *m)
{
	const char *const *kinds = NULL;
	size_t n_kinds;

	family(b, "requests_total", "counter",
	       "Requests answered per extender verb.");
	for (unsigned v = 0; v < FT_VERB_COUNT; v++)
		sample_uint(b, "requests_total", "verb", ft_verb_name(v),
			    requests_of(m, v));
	family(
	    b, "request_duration_seconds", "histogram",
	    "Time from a verb's complete request body to its reply, in seconds.");
	for (unsigned v = 0; v < FT_VERB_COUNT; v++)
		histogram_write(b, m, v);
	family(b, "http_errors_total", "counter",
	       "HTTP error replies by kind, over both listeners.");
	n_kinds = ft_http_error_kinds(&kinds);
	for (size_t k = 0; k < n_kinds; k++)
		sample_uint(b, "http_errors_total", "kind", kinds[k],
			    ft_http_error_count(kinds[k]));
}

static void write_connections(ft_buf_t *b, const ft_metrics_gauges_t *g)
{
	family(
	    b, "http_connections_closed_total", "counter",
	    "Connections the extender listener closed at maxConnectionsPerClient: idle_at_cap, the client's connection idle the longest, for a new one; refused_at_cap, the new one, when all of its client's were in the middle of a request.");
	sample_uint(b, "http_connections_closed_total", "reason", "idle_at_cap",
		    g->conns_closed_idle);
	sample_uint(b, "http_connections_closed_total", "reason",
		    "refused_at_cap", g->conns_refused);
}

static void write_preemption(ft_buf_t *b, ft_metrics_t *m)
{
	family(
	    b, "preemption_nodes_total", "counter",
	    "Candidate nodes of preempt requests by the preemptor's affinity mode and outcome: victims (flextopo chose them), passed (the scheduler's kept), dropped (no set works).");
	for (unsigned k = 0; k < 2; k++)
		for (unsigned o = 0; o < FT_PREEMPT_OUTCOMES; o++) {
			ft_buf_puts(b,
				    "flextopo_preemption_nodes_total{mode=\"");
			ft_buf_puts(b, mode_names[k]);
			ft_buf_puts(b, "\",outcome=\"");
			ft_buf_puts(b, outcome_names[o]);
			ft_buf_puts(b, "\"} ");
			ft_buf_put_uint(b, get(&m->preempt_nodes[k][o]));
			ft_buf_puts(b, "\n");
		}
	family(
	    b, "preemption_victims_total", "counter",
	    "Victims named in preempt replies, by the preemptor's affinity mode.");
	for (unsigned k = 0; k < 2; k++)
		sample_uint(b, "preemption_victims_total", "mode",
			    mode_names[k], get(&m->preempt_victims[k]));
	family(
	    b, "victim_searches_total", "counter",
	    "Victim searches of preempt requests, one per candidate node searched, by result: exact (the cheapest set), or why the set found may not be the cheapest (too-many-pods, visit-limit, pdb-limit, gang-limit, out-of-memory).");
	for (unsigned f = 0; f < FT_VICTIM_FALLBACKS; f++)
		sample_uint(b, "victim_searches_total", "result",
			    ft_victim_fallback_name((ft_victim_fallback_t)f),
			    get(&m->victim_searches[f]));
	family(
	    b, "dra_preemption_refused_total", "counter",
	    "Candidate DRA nodes preempt dropped for a GPU shortage: ResourceClaims hold their GPUs, and kube-scheduler v1.36 cannot preempt for DRA devices (KEP-5690).");
	sample_uint(b, "dra_preemption_refused_total", NULL, NULL,
		    get(&m->dra_preemption_refused));
	family(
	    b, "preemption_gang_pods_disrupted_total", "counter",
	    "Pods of the gangs that the victims answered by preempt break: every running member of each broken gang, on any node, once per candidate node answered (victims.h).");
	sample_uint(b, "preemption_gang_pods_disrupted_total", NULL, NULL,
		    get(&m->gang_pods_disrupted));
}

static void write_binds(ft_buf_t *b, ft_metrics_t *m)
{
	static const char *const results[FT_BIND_RESULTS] = {"bound", "failed",
							     "unknown"};

	family(
	    b, "binds_total", "counter",
	    "Bind requests by result: bound, failed, or unknown (the Binding's answer never came; its units stay held).");
	for (unsigned r = 0; r < FT_BIND_RESULTS; r++)
		sample_uint(b, "binds_total", "result", results[r],
			    get(&m->binds[r]));
	family(
	    b, "bind_affinity_level_total", "counter",
	    "Pods bound with devices, by the tightest affinity level their placement reached.");
	for (unsigned l = 0; l < FT_LEVEL_COUNT; l++)
		sample_uint(b, "bind_affinity_level_total", "level",
			    ft_level_name(l), get(&m->bind_levels[l]));
}

static void gauge(ft_buf_t *b, const char *name, const char *help, uint64_t v)
{
	family(b, name, "gauge", help);
	sample_uint(b, name, NULL, NULL, v);
}

static void write_cache(ft_buf_t *b, const ft_metrics_gauges_t *g)
{
	gauge(
	    b, "ready",
	    "1 while the model is in sync with the API server (the verbs answer only then).",
	    g->ready);
	gauge(b, "nodes", "Nodes in the cluster state.", g->nodes);
	gauge(b, "nodes_bad_topology",
	      "Nodes whose topology annotation is missing or invalid.",
	      g->nodes_bad_topology);
	gauge(b, "pods", "Pods in the cluster state.", g->pods);
	gauge(b, "assumed_pods",
	      "Pods bound by the extender that the watch has not shown yet.",
	      g->assumed);
	gauge(
	    b, "binds_unsettled",
	    "Assumed pods whose Binding's outcome is unknown; their units stay held until the API server shows whether it landed.",
	    g->unsettled);
	gauge(b, "snapshot_generation",
	      "Generation of the published cluster snapshot.", g->generation);
	family(b, "cache_age_seconds", "gauge",
	       "Seconds since the cluster snapshot was last published.");
	sample_double(b, "cache_age_seconds", g->cache_age_seconds);
	family(
	    b, "informer_restarts_total", "counter",
	    "Times a list+watch of the API server was re-established after an error or 410 Gone.");
	sample_uint(b, "informer_restarts_total", "resource", "nodes",
		    g->node_restarts);
	sample_uint(b, "informer_restarts_total", "resource", "pods",
		    g->pod_restarts);
	sample_uint(b, "informer_restarts_total", "resource",
		    "poddisruptionbudgets", g->pdb_restarts);
	sample_uint(b, "informer_restarts_total", "resource", "resourceslices",
		    g->slice_restarts);
	sample_uint(b, "informer_restarts_total", "resource", "resourceclaims",
		    g->claim_restarts);
	sample_uint(b, "informer_restarts_total", "resource", "deviceclasses",
		    g->class_restarts);
}

static void write_dra(ft_buf_t *b, const ft_metrics_gauges_t *g)
{
	gauge(
	    b, "dra_nodes",
	    "Nodes whose GPUs a ResourceSlice of the DRA driver publishes: DRA's allocator picks their GPUs.",
	    g->dra_nodes);
	gauge(
	    b, "dra_node_errors",
	    "DRA nodes whose ResourceSlices disagree with the topology annotation (uuid, PCI bus id, NUMA node or PCIe root); /debug/nodes says which device and fact.",
	    g->dra_node_errors);
	gauge(
	    b, "dra_double_published_nodes",
	    "DRA nodes that also advertise device-plugin GPUs: both allocators could hand out one GPU.",
	    g->dra_double_published);
	gauge(b, "resource_claims_allocated",
	      "ResourceClaims allocated on a node, each holding its devices.",
	      g->claims_allocated);
}

static void write_decisions(ft_buf_t *b, const ft_metrics_gauges_t *g)
{
	gauge(b, "decision_log_records", "Decisions held in the decision log.",
	      g->decisions);
	gauge(b, "decision_log_capacity",
	      "Decisions the log holds at most (decisionLogSize).",
	      g->decisions_capacity);
	gauge(b, "decision_log_bytes",
	      "Heap bytes of the decision log, fixed at start.",
	      g->decisions_bytes);
	family(b, "decisions_total", "counter", "Decisions recorded.");
	sample_uint(b, "decisions_total", NULL, NULL, g->decisions_total);
}

static void write_gpus(ft_buf_t *b, const ft_metrics_gauges_t *g)
{
	family(
	    b, "gpu_capacity_free", "gauge",
	    "Free GPU capacity over all nodes, in GPUs: whole GPUs, MIG slices (1/8 each) and shared replicas (1/replicas each).");
	sample_double(b, "gpu_capacity_free", (double)g->gpu_free_milli / 1e3);
	family(
	    b, "gpu_fragmentation", "gauge",
	    "Free GPU capacity that the pods of the workload mix could not use, summed over nodes, in GPUs (FGD, USENIX ATC '23).");
	sample_double(b, "gpu_fragmentation",
		      (double)g->gpu_fragmentation_milli / 1e3);
	gauge(b, "gpus_whole_free", "Whole GPUs free over all nodes.",
	      g->gpus_whole_free);
	gauge(
	    b, "mig_slices_stranded",
	    "Free MIG memory slices no instance covers or no pod of the workload mix could take, over all nodes.",
	    g->mig_slices_stranded);
	gauge(b, "workload_mix_pods",
	      "Recent pods making the workload mix (fragmentationWindow).",
	      g->mix_pods);
}

static void write_conflicts(ft_buf_t *b, const ft_metrics_gauges_t *g)
{
	gauge(
	    b, "conflict_pods",
	    "Pods whose allocation annotations claim a GPU, MIG instance or CPU that another pod's annotations claim too (an allocation conflict); the units stay held.",
	    g->conflict_pods);
	family(b, "conflicts_found_total", "counter",
	       "Allocation conflicts found, each pair of pods once.");
	sample_uint(b, "conflicts_found_total", NULL, NULL, g->conflicts_found);
}

static void write_drift(ft_buf_t *b, const ft_metrics_gauges_t *g)
{
	gauge(
	    b, "drift_pods",
	    "Pods whose units as observed on the node (flextopo.io/observed, written by flextopo-node) differ from their allocation; they hold the observed units.",
	    g->drift_pods);
}

static void write_build(ft_buf_t *b, const ft_metrics_gauges_t *g)
{
	family(b, "build_info", "gauge",
	       "Always 1; the labels name the running build.");
	ft_buf_puts(b, "flextopo_build_info{version=\"");
	label_value(b, g->version);
	ft_buf_puts(b, "\",commit=\"");
	label_value(b, g->commit);
	ft_buf_puts(b, "\"} 1\n");
}

int ft_metrics_render(char **out, ft_metrics_t *m, const ft_metrics_gauges_t *g)
{
	ft_metrics_t none;
	ft_buf_t b;

	if (!m) {
		memset(&none, 0, sizeof(none));
		m = &none;
	}
	ft_buf_init(&b, 16384);
	write_build(&b, g);
	write_requests(&b, m);
	write_connections(&b, g);
	write_preemption(&b, m);
	write_binds(&b, m);
	write_cache(&b, g);
	write_dra(&b, g);
	write_decisions(&b, g);
	write_gpus(&b, g);
	write_drift(&b, g);
	write_conflicts(&b, g);
	return ft_buf_detach(out, &b);
}
