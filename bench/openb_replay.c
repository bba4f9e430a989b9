/*
 * flextopo-openb-replay: the FGD paper's openb trace replay (Weng et al.,
 * USENIX ATC '23) with the real extender in the loop, next to the paper's
 * baselines (bench/README.md, "The openb trace replay").
 *
 * For each trace variant and seed it builds one pod sequence (the trace
 * shuffled, then sampled with replacement until the arrived GPU request
 * reaches 130 % of the cluster's GPUs; arrival only) and schedules it:
 *
 *   - through flextopo, driven over HTTP as kube-scheduler drives a
 *     nodeCacheCapable extender: the in-tree NodeResourcesFit filter (CPU
 *     and memory) and, for a pod with a gpu_spec, NodeAffinity (a required
 *     term on the node label nvidia.com/gpu.product, which every node
 *     carries with its GPU model; --model-label KEY names another label,
 *     such as a cloud's node pool label, which flextopo does not read as a
 *     GPU model; --model-labels says how the label's values spell the
 *     model: GPU feature discovery's NVML name with dashes, the default,
 *     or the trace's site codes) here, then POST /filter with the
 *     fitting NodeNames, POST
 *     /prioritize with the nodes that passed, the highest total score with
 *     a seeded random choice among ties (kube-scheduler's selectHost), and
 *     POST /bind. The extender's bind POSTs the Binding to a fake API server
 *     in this process (answers 201), and the pod, now carrying the
 *     allocation annotation from that Binding, is applied to the extender's
 *     state as its watch would. With --intree-scores (the arm
 *     "flextopo+in-tree") kube-scheduler's default NodeResourcesFit
 *     LeastAllocated and NodeResourcesBalancedAllocation scores (weight 1
 *     each, 0..100) are added to the extender's score x weight 10 x 10 (the
 *     shipped weight; the shipped profile turns these two scores off).
 *     kube-scheduler filters every node (percentageOfNodesToScore 100, the
 *     shipped setting); --nodes-to-score P stops it, as kube-scheduler does,
 *     once it has found P % of the nodes (0: its adaptive default), from
 *     where the last pod's search stopped, and counts the pods filter then
 *     refuses while a node it did not look at had room;
 *   - through Random, BestFit and FGD on the plain model (openb_model.h),
 *     with the same sequence, node list and random tie-break.
 *
 * After every pod it records, per arrived-workload percent, unallocated GPU
 * % (100 - GPU milli requested by placed pods / capacity) and fragmented GPU
 * % (FGD's measure over the typical pods / capacity), and prints mean +- sd
 * over the seeds at 50..130 %, the pods that failed, and the share of 2- and
 * 4-GPU pods on NVLink nodes whose GPUs are pairwise NVLinked. The paper's
 * published figures (fgd-expected/) are printed next to them.
 *
 * The extender's GPU model: every GPU is shared into 100 replicas (10 milli
 * each, FT_REPLICAS_MAX) and a pod asks nvidia.com/gpu: N with
 * flextopo.io/gpu-fraction (its gpu_milli, 1 for whole GPUs), so that one
 * node serves whole and fractional pods as the paper's GPU-sharing cluster
 * does. The trace's fractions are multiples of 10 milli, so none rounds; the
 * measures count what the pod asked, the free capacity what the replicas
 * leave. The topology's GPU model is always the GPU's NVML name, as
 * flextopo-discover writes it, whatever the labels spell.
 */
#include <flextopo/app.h>
#include <flextopo/codec.h>
#include <flextopo/error.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "bench_client.h"
#include "bench_util.h"
#include "openb_model.h"

#define REPLICAS       100
#define REPLICA_MILLI  (OB_MILLI / REPLICAS)
#define ARRIVAL_TARGET 1.3
#define ARMS	       5
#define VARIANTS_MAX   8
#define SEEDS_MAX      64
#define TOOL	       "flextopo-openb-replay"
#define SETTINGS_MAX   16
#define SEED_BASE      42
/* The extender's score counts score x weight x MaxNodeScore /
 * MaxExtenderPriority (10) in kube-scheduler's total; the weight is the
 * shipped one (configs/scheduler-config.yaml, the chart's
 * registration.weight). */
#define EXT_WEIGHT    10
#define EXT_SCORE_MUL (EXT_WEIGHT * 10)
#define NAMESPACE     "openb"

typedef enum {
	ARM_FLEXTOPO = 0,
	ARM_INTREE = 1,
	ARM_RANDOM = 2,
	ARM_BESTFIT = 3,
	ARM_FGD = 4,
} arm_t;

static const char *const arm_names[ARMS] = {"flextopo", "flextopo+in-tree",
					    "Random", "BestFit", "FGD"};
/* fgd-expected sc_policy of the baselines. */
static const char *const paper_names[ARMS] = {NULL, NULL, "01-Random",
					      "05-BestFit", "06-FGD"};

/* How the GPU model label's values, and the pods' affinity on it, spell a
 * GPU model. */
typedef enum {
	MODEL_LABELS_GFD = 0,  /* NVML's name with dashes: Tesla-T4 */
	MODEL_LABELS_SITE = 1, /* the trace's code: T4, V100M16 */
} model_labels_t;

typedef struct options {
	const char *data;
	const char *report;
	const char *svg;
	const char *variants[VARIANTS_MAX];
	unsigned n_variants;
	char *settings[SETTINGS_MAX]; /* KEY=VALUE over the shipped config */
	unsigned n_settings;
	unsigned seeds;
	unsigned max_pods;
	bool arms[ARMS];
	bool quiet;
	bool name_ties;
	unsigned nodes_to_score; /* percentageOfNodesToScore; 0: adaptive */
	const char *model_label; /* the node label of the trace's GPU model */
	model_labels_t model_labels; /* how its values spell the model */
} options_t;

/* One arm's measures for one seed. */
typedef struct outcome {
	double unalloc[OB_LEVELS], frag[OB_LEVELS];
	unsigned arrived, placed, failed, multi, aligned, bind_errors;
	unsigned refused_with_room; /* refused_with_room of replay_t */
	unsigned failed_kind[OB_KINDS];
	double partial100, whole100, whole_short100; /* ob_cluster_t's */
	double seconds;
	bool ok;
} outcome_t;

/* ---- the fake API server ---- */

typedef struct api {
	ft_server_t *server;
	pthread_mutex_t lock;
	char *node;	  /* target.name of the last Binding */
	char *allocation; /* its allocation annotation, or NULL */
	char key[256];
	unsigned bindings;
} api_t;

static void api_binding(ft_http_response_t *out, const ft_http_request_t *req,
			void *payload)
{
	api_t *api = payload;
	cJSON *b = cJSON_ParseWithLength(req->body, req->body_len);
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(b, "metadata"), "annotations");
	const cJSON *alloc = cJSON_GetObjectItemCaseSensitive(ann, api->key);
	const cJSON *target = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(b, "target"), "name");

	if (!cJSON_IsString(target) || !strstr(req->path, "/binding")) {
		cJSON_Delete(b);
		ft_http_reply_text(out, 400, "application/json",
				   "{\"kind\":\"Status\",\"code\":400}");
		return;
	}
	pthread_mutex_lock(&api->lock);
	free(api->node);
	free(api->allocation);
	api->node = strdup(target->valuestring);
	api->allocation =
	    cJSON_IsString(alloc) ? strdup(alloc->valuestring) : NULL;
	api->bindings++;
	pthread_mutex_unlock(&api->lock);
	cJSON_Delete(b);
	ft_http_reply_text(
	    out, 201, "application/json",
	    "{\"kind\":\"Status\",\"status\":\"Success\",\"code\":201}");
}

static int api_start(api_t *api, const char *prefix, unsigned *port)
{
	ft_server_options_t so = {
	    .listen = "127.0.0.1:0", .max_body_bytes = 1 << 20, .threads = 1};

	memset(api, 0, sizeof(*api));
	pthread_mutex_init(&api->lock, NULL);
	snprintf(api->key, sizeof(api->key), "%s/allocation", prefix);
	if (ft_server_new(&api->server, &so) < 0 ||
	    ft_server_route(api->server, "POST", "/api/v1/namespaces/*",
			    api_binding, api) < 0 ||
	    ft_server_start(api->server) < 0)
		return -1;
	*port = ft_server_port(api->server);
	return 0;
}

static void api_stop(api_t *api)
{
	ft_server_free(api->server);
	free(api->node);
	free(api->allocation);
	pthread_mutex_destroy(&api->lock);
	memset(api, 0, sizeof(*api));
}

/* ---- the HTTP client (one keep-alive connection) ---- */

typedef bench_client_t client_t;

/* POST `body` (freed) to `path`; the parsed reply, or NULL on failure. */
static cJSON *client_post(client_t *c, const char *path, char *body)
{
	char err[512];
	int rc;

	if (!body)
		return NULL;
	rc = bench_client_request(c, path, body, strlen(body), NULL, err,
				  sizeof(err));
	free(body);
	if (rc < 0) {
		fprintf(stderr, "%s\n", err);
		return NULL;
	}
	return cJSON_Parse(c->reply);
}

/* ---- the cluster as the extender sees it ---- */

static void gpu_uuid(char *buf, size_t size, unsigned node, unsigned g)
{
	snprintf(buf, size, "GPU-0b000000-0000-4000-8000-%06u%06u", node, g);
}

/* GPU index from a uuid gpu_uuid() wrote; -1 otherwise. */
static int uuid_gpu(const char *uuid)
{
	size_t n = uuid ? strlen(uuid) : 0;

	return n > 6 ? atoi(uuid + n - 6) : -1;
}

/*
 * The NVML name (nvmlDeviceGetName) of trace model `code`, which
 * flextopo-discover writes as the topology's GPU model. The trace names its
 * models by site codes (DATA-README.md of the openb data); the 8-GPU V100
 * boxes are DGX-1-like SXM2 servers (NVLink, "Topology built for each
 * node" in bench/README.md). G1-G3 are undisclosed: "NVIDIA <code>".
 */
static void nvml_name(char *buf, size_t size, const char *code)
{
	static const char *const names[][2] = {
	    {"V100M16", "Tesla V100-SXM2-16GB"},
	    {"V100M32", "Tesla V100-SXM2-32GB"},
	    {"P100", "Tesla P100-PCIE-16GB"},
	    {"T4", "Tesla T4"},
	    {"A10", "NVIDIA A10"},
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(code, names[i][0]) == 0) {
			snprintf(buf, size, "%s", names[i][1]);
			return;
		}
	snprintf(buf, size, "NVIDIA %s", code);
}

/*
 * The GPU model label's value for trace model `code`: GPU feature
 * discovery's (nvidia.com/gpu.product: the NVML name with its spaces as
 * dashes) or the site code itself.
 */
static void model_label_value(char *buf, size_t size, const char *code,
			      model_labels_t spelling)
{
	if (spelling == MODEL_LABELS_SITE) {
		snprintf(buf, size, "%s", code);
		return;
	}
	nvml_name(buf, size, code);
	for (char *p = buf; *p; p++)
		if (*p == ' ')
			*p = '-';
}

static cJSON *gpu_json(const ob_node_t *n, unsigned node, unsigned g)
{
	cJSON *gpu = cJSON_CreateObject(), *links;
	char uuid[64], model[OB_MODEL_MAX + 32];

	gpu_uuid(uuid, sizeof(uuid), node, g);
	nvml_name(model, sizeof(model), n->model);
	cJSON_AddNumberToObject(gpu, "index", g);
	cJSON_AddStringToObject(gpu, "uuid", uuid);
	cJSON_AddStringToObject(gpu, "model", model);
	cJSON_AddNumberToObject(gpu, "memoryMiB",
				strstr(n->model, "32") ? 32768 : 16384);
	cJSON_AddNumberToObject(gpu, "replicas", REPLICAS);
	if (!n->nvlink)
		return gpu;
	links = cJSON_AddArrayToObject(gpu, "nvlinks");
	for (unsigned p = 0; p < n->n_gpus; p++) {
		cJSON *l;
		if (!ob_nvlinked(g, p))
			continue;
		l = cJSON_CreateObject();
		cJSON_AddNumberToObject(l, "peer", p);
		cJSON_AddNumberToObject(l, "links", 1);
		cJSON_AddItemToArray(links, l);
	}
	return gpu;
}

/*
 * One NUMA node per socket: two sockets from 64 CPUs up, else one; CPUs
 * and memory split evenly, GPUs split evenly in index order, a PCIe switch
 * per two GPUs.
 */
static char *topology_json(const ob_node_t *n, unsigned node)
{
	unsigned cpus = n->cpu_milli / 1000, sockets = cpus >= 64 ? 2 : 1;
	unsigned per_cpu = cpus / sockets, switch_id = 0, g = 0;
	cJSON *root = cJSON_CreateObject(), *list;
	char *text;

	cJSON_AddNumberToObject(root, "version", 1);
	list = cJSON_AddArrayToObject(root, "sockets");
	for (unsigned s = 0; s < sockets; s++) {
		cJSON *sock = cJSON_CreateObject(), *numas, *numa, *sws;
		unsigned last = s + 1 == sockets
				    ? n->n_gpus
				    : (s + 1) * n->n_gpus / sockets;
		char cpulist[32];
		cJSON_AddNumberToObject(sock, "id", s);
		numas = cJSON_AddArrayToObject(sock, "numaNodes");
		numa = cJSON_CreateObject();
		cJSON_AddNumberToObject(numa, "id", s);
		snprintf(cpulist, sizeof(cpulist), "%u-%u", s * per_cpu,
			 (s + 1) * per_cpu - 1);
		cJSON_AddStringToObject(numa, "cpus", cpulist);
		cJSON_AddNumberToObject(numa, "memoryMiB",
					(double)(n->memory_mib / sockets));
		sws = cJSON_AddArrayToObject(numa, "pcieSwitches");
		while (g < last) {
			cJSON *sw = cJSON_CreateObject(), *gpus;
			cJSON_AddNumberToObject(sw, "id", switch_id++);
			gpus = cJSON_AddArrayToObject(sw, "gpus");
			for (unsigned k = 0; k < 2 && g < last; k++, g++)
				cJSON_AddItemToArray(gpus,
						     gpu_json(n, node, g));
			cJSON_AddItemToArray(sws, sw);
		}
		cJSON_AddItemToArray(numas, numa);
		cJSON_AddItemToArray(list, sock);
	}
	text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	return text;
}

static cJSON *node_json(const ob_node_t *n, unsigned node,
			const ft_codec_options_t *opts, const options_t *o)
{
	cJSON *obj = cJSON_CreateObject(), *meta, *ann, *status, *alloc;
	char key[256], q[64], model[OB_MODEL_MAX + 32],
	    *topo = topology_json(n, node);

	cJSON_AddStringToObject(obj, "apiVersion", "v1");
	cJSON_AddStringToObject(obj, "kind", "Node");
	meta = cJSON_AddObjectToObject(obj, "metadata");
	cJSON_AddStringToObject(meta, "name", n->name);
	model_label_value(model, sizeof(model), n->model, o->model_labels);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "labels"),
				o->model_label, model);
	ann = cJSON_AddObjectToObject(meta, "annotations");
	snprintf(key, sizeof(key), "%s/topology", opts->annotation_prefix);
	cJSON_AddStringToObject(ann, key, topo ? topo : "");
	free(topo);
	status = cJSON_AddObjectToObject(obj, "status");
	alloc = cJSON_AddObjectToObject(status, "allocatable");
	snprintf(q, sizeof(q), "%um", n->cpu_milli);
	cJSON_AddStringToObject(alloc, "cpu", q);
	snprintf(q, sizeof(q), "%lluMi", (unsigned long long)n->memory_mib);
	cJSON_AddStringToObject(alloc, "memory", q);
	snprintf(q, sizeof(q), "%u", n->n_gpus * REPLICAS);
	cJSON_AddStringToObject(alloc, opts->gpu_resource, q);
	return obj;
}

/*
 * gpu_spec as kube-scheduler's NodeAffinity reads it: a required term on
 * the GPU model label o->model_label, its values spelt as the nodes' labels
 * are (the replay's in-tree filter, ob_fits_in_tree).
 */
static void add_model_affinity(cJSON *spec, const ob_pod_t *p,
			       const ob_trace_t *t, const options_t *o)
{
	cJSON *term = cJSON_CreateObject(), *expr = cJSON_CreateObject(),
	      *values;
	char model[OB_MODEL_MAX + 32];

	cJSON_AddItemToArray(
	    cJSON_AddArrayToObject(
		cJSON_AddObjectToObject(
		    cJSON_AddObjectToObject(
			cJSON_AddObjectToObject(spec, "affinity"),
			"nodeAffinity"),
		    "requiredDuringSchedulingIgnoredDuringExecution"),
		"nodeSelectorTerms"),
	    term);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(term, "matchExpressions"),
			     expr);
	cJSON_AddStringToObject(expr, "key", o->model_label);
	cJSON_AddStringToObject(expr, "operator", "In");
	values = cJSON_AddArrayToObject(expr, "values");
	for (unsigned m = 0; m < t->n_models; m++) {
		if (!(p->models & (UINT32_C(1) << m)))
			continue;
		model_label_value(model, sizeof(model), t->models[m],
				  o->model_labels);
		cJSON_AddItemToArray(values, cJSON_CreateString(model));
	}
	if (!cJSON_GetArraySize(values))
		cJSON_AddItemToArray(values,
				     cJSON_CreateString("no-such-model"));
}

/* The pod as kube-scheduler has it (Burstable: requests, no limits). */
static cJSON *pod_json(const ob_pod_t *p, const ob_trace_t *t, const char *name,
		       const ft_codec_options_t *opts, const options_t *o)
{
	cJSON *pod = cJSON_CreateObject(), *meta, *ann, *spec, *c, *req;
	char key[256], q[64];

	cJSON_AddStringToObject(pod, "apiVersion", "v1");
	cJSON_AddStringToObject(pod, "kind", "Pod");
	meta = cJSON_AddObjectToObject(pod, "metadata");
	cJSON_AddStringToObject(meta, "name", name);
	cJSON_AddStringToObject(meta, "namespace", NAMESPACE);
	cJSON_AddStringToObject(meta, "uid", name);
	ann = cJSON_AddObjectToObject(meta, "annotations");
	if (p->n_gpus) {
		snprintf(key, sizeof(key), "%s/gpu-fraction",
			 opts->annotation_prefix);
		snprintf(q, sizeof(q), "%u.%03u", p->gpu_milli / 1000,
			 p->gpu_milli % 1000);
		cJSON_AddStringToObject(ann, key, q);
	}
	if (p->n_gpus > 1) {
		snprintf(key, sizeof(key), "%s/affinity",
			 opts->annotation_prefix);
		cJSON_AddStringToObject(ann, key, "nvlink");
		snprintf(key, sizeof(key), "%s/affinity-mode",
			 opts->annotation_prefix);
		cJSON_AddStringToObject(ann, key, "best-effort");
	}
	spec = cJSON_AddObjectToObject(pod, "spec");
	cJSON_AddStringToObject(spec, "schedulerName", "default-scheduler");
	if (p->models)
		add_model_affinity(spec, p, t, o);
	c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "name", "main");
	req = cJSON_AddObjectToObject(cJSON_AddObjectToObject(c, "resources"),
				      "requests");
	snprintf(q, sizeof(q), "%um", p->cpu_milli);
	cJSON_AddStringToObject(req, "cpu", q);
	snprintf(q, sizeof(q), "%lluMi", (unsigned long long)p->memory_mib);
	cJSON_AddStringToObject(req, "memory", q);
	if (p->n_gpus) {
		snprintf(q, sizeof(q), "%u", p->n_gpus);
		cJSON_AddStringToObject(req, opts->gpu_resource, q);
	}
	cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), c);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(pod, "status"), "phase",
				"Pending");
	return pod;
}

/* ---- the flextopo arm ---- */

typedef struct replay {
	const options_t *o;
	const ob_trace_t *trace;
	ft_app_t app;
	api_t api;
	client_t client;
	const ob_node_t **by_name; /* the trace's nodes sorted by name */
	unsigned *fit;		   /* scratch: node indexes */
	int64_t *total;		   /* scratch: per node, total score */
	ob_candidate_t *cand;	   /* scratch: the fitting nodes, scored */
	bool intree;
	uint64_t rng;
	unsigned bind_errors;
	unsigned next_start; /* kube-scheduler's nextStartNodeIndex */
	/* Pods filter refused on the nodes kube-scheduler looked at while a
	 * node it did not look at would have passed (percentageOfNodesToScore
	 * below 100): kube-scheduler would try preemption, then again later. */
	unsigned refused_with_room;
} replay_t;

static int by_name_cmp(const void *a, const void *b)
{
	return strcmp((*(const ob_node_t *const *)a)->name,
		      (*(const ob_node_t *const *)b)->name);
}

static int node_index(const replay_t *r, const char *name)
{
	unsigned lo = 0, hi = r->trace->n_nodes;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		int c = strcmp(r->by_name[mid]->name, name);
		if (c == 0)
			return (int)(r->by_name[mid] - r->trace->nodes);
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static int replay_load(replay_t *r)
{
	ft_state_t *state = r->app.state;
	ft_state_stats_t st;

	ft_state_replace_begin(state, FT_KIND_NODE);
	ft_state_replace_begin(state, FT_KIND_POD);
	for (unsigned i = 0; i < r->trace->n_nodes; i++) {
		cJSON *n =
		    node_json(&r->trace->nodes[i], i, &r->app.opts, r->o);
		ft_state_apply_node(state, n);
		cJSON_Delete(n);
	}
	ft_state_replace_end(state, FT_KIND_NODE);
	ft_state_replace_end(state, FT_KIND_POD);
	atomic_store(&r->app.snapshot_loaded, true);
	ft_state_stats(state, &st);
	if (st.nodes != r->trace->n_nodes || st.nodes_bad_topology) {
		fprintf(
		    stderr,
		    "extender: %u nodes loaded, %u without topology, of %u\n",
		    st.nodes, st.nodes_bad_topology, r->trace->n_nodes);
		return -1;
	}
	return 0;
}

/* The --set overrides, each KEY=VALUE as in the config file. */
static int apply_settings(ft_config_t *cfg, const options_t *o)
{
	int rc = 0;

	for (unsigned i = 0; i < o->n_settings && rc == 0; i++) {
		char key[128];
		const char *eq = strchr(o->settings[i], '=');
		size_t len = eq ? (size_t)(eq - o->settings[i]) : 0;
		if (!len || len >= sizeof(key))
			rc = ft_error_set(FT_EINVAL, "--set %s: not KEY=VALUE",
					  o->settings[i]);
		else {
			memcpy(key, o->settings[i], len);
			key[len] = '\0';
			rc = ft_config_set(cfg, key, eq + 1);
		}
	}
	return rc;
}

static int replay_start(replay_t *r)
{
	ft_kube_credentials_t creds = {0};
	ft_server_options_t so = {.listen = "127.0.0.1:0"};
	unsigned api_port, port;
	char url[64];

	if (ft_config_init(&r->app.cfg) < 0 ||
	    ft_config_set(&r->app.cfg, "logLevel", "error") < 0 ||
	    apply_settings(&r->app.cfg, r->o) < 0 || ft_app_init(&r->app) < 0 ||
	    api_start(&r->api, r->app.opts.annotation_prefix, &api_port) < 0)
		goto fail;
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", api_port);
	creds.server = url;
	creds.token = "openb-replay";
	so.max_body_bytes = r->app.cfg.max_request_bytes;
	so.threads = r->app.cfg.threads;
	if (ft_kube_client_new(&r->app.kube, &creds,
			       (long)r->app.cfg.api_timeout_ms) < 0 ||
	    replay_load(r) < 0 || ft_server_new(&r->app.server, &so) < 0 ||
	    ft_app_routes(&r->app, r->app.server) < 0 ||
	    ft_server_start(r->app.server) < 0)
		goto fail;
	port = ft_server_port(r->app.server);
	return bench_client_open(&r->client, port);
fail:
	fprintf(stderr, "extender: %s\n", ft_error_last());
	return -1;
}

static void replay_stop(replay_t *r)
{
	bench_client_close(&r->client);
	ft_app_dispose(&r->app);
	api_stop(&r->api);
}

/* ExtenderArgs: the pod and NodeNames (nodeCacheCapable). */
static char *extender_args(const cJSON *pod, const replay_t *r,
			   const unsigned *nodes, unsigned n)
{
	cJSON *root = cJSON_CreateObject(), *names;
	char *text;

	cJSON_AddItemToObject(root, "Pod", cJSON_Duplicate(pod, true));
	cJSON_AddNullToObject(root, "Nodes");
	names = cJSON_AddArrayToObject(root, "NodeNames");
	for (unsigned i = 0; i < n; i++)
		cJSON_AddItemToArray(
		    names, cJSON_CreateString(r->trace->nodes[nodes[i]].name));
	text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	return text;
}

/* POST /filter; r->fit keeps the nodes that passed. -1: request failed. */
static int do_filter(replay_t *r, const cJSON *pod, unsigned *n)
{
	cJSON *reply = client_post(&r->client, "/filter",
				   extender_args(pod, r, r->fit, *n));
	const cJSON *names =
	    cJSON_GetObjectItemCaseSensitive(reply, "NodeNames");
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(reply, "Error");
	const cJSON *it;
	unsigned k = 0;

	if (!reply || (cJSON_IsString(err) && *err->valuestring)) {
		fprintf(stderr, "filter: %s\n",
			reply ? err->valuestring : "no reply");
		cJSON_Delete(reply);
		return -1;
	}
	cJSON_ArrayForEach (it, names) {
		int i =
		    cJSON_IsString(it) ? node_index(r, it->valuestring) : -1;
		if (i >= 0 && k < *n)
			r->fit[k++] = (unsigned)i;
	}
	cJSON_Delete(reply);
	*n = k;
	return 0;
}

/* kube-scheduler's default in-tree scores: LeastAllocated and
 * BalancedAllocation over CPU and memory (pods' non-zero defaults:
 * 100m, 200 MiB). */
static int64_t intree_score(const ob_cluster_t *c, unsigned node,
			    const ob_pod_t *p)
{
	const ob_node_t *n = &c->trace->nodes[node];
	double cap[2] = {n->cpu_milli, (double)n->memory_mib};
	double pod[2] = {p->cpu_milli ? p->cpu_milli : 100,
			 p->memory_mib ? (double)p->memory_mib : 200};
	double left[2] = {c->left[node].cpu_milli,
			  (double)c->left[node].memory_mib};
	int64_t least = 0;
	double frac[2];

	for (unsigned k = 0; k < 2; k++) {
		double req = cap[k] - left[k] + pod[k];
		least +=
		    req > cap[k] ? 0 : (int64_t)((cap[k] - req) * 100 / cap[k]);
		frac[k] = req / cap[k] > 1 ? 1 : req / cap[k];
	}
	return least / 2 + (int64_t)((1 - fabs(frac[0] - frac[1]) / 2) * 100);
}

/* POST /prioritize; the chosen node, or -1. */
static int do_prioritize(replay_t *r, const ob_cluster_t *c, const cJSON *pod,
			 const ob_pod_t *p, unsigned n)
{
	cJSON *reply = client_post(&r->client, "/prioritize",
				   extender_args(pod, r, r->fit, n));
	const cJSON *it;
	int pick;

	if (!cJSON_IsArray(reply)) {
		cJSON_Delete(reply);
		return -1;
	}
	for (unsigned i = 0; i < n; i++)
		r->total[r->fit[i]] =
		    r->intree ? intree_score(c, r->fit[i], p) : 0;
	cJSON_ArrayForEach (it, reply) {
		const cJSON *h = cJSON_GetObjectItemCaseSensitive(it, "Host");
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(it, "Score");
		int i = cJSON_IsString(h) ? node_index(r, h->valuestring) : -1;
		if (i >= 0 && cJSON_IsNumber(s))
			r->total[i] += (int64_t)s->valuedouble * EXT_SCORE_MUL;
	}
	cJSON_Delete(reply);
	for (unsigned i = 0; i < n; i++)
		r->cand[i] =
		    (ob_candidate_t){r->fit[i], r->total[r->fit[i]], -1};
	pick = ob_select_host(c, r->cand, n, &r->rng);
	return pick < 0 ? -1 : (int)r->cand[pick].node;
}

/* GPU milli per GPU from the Binding's allocation annotation. */
static int allocation_milli(uint32_t *milli, const char *text)
{
	ft_allocation_t a;

	if (!text)
		return 0;
	if (ft_codec_allocation_decode(&a, text) < 0)
		return -1;
	for (unsigned i = 0; i < a.n_replicas; i++) {
		int k = uuid_gpu(a.replica_gpus[i]);
		if (k >= 0 && k < OB_GPU_MAX)
			milli[k] += a.replica_counts[i] * REPLICA_MILLI;
	}
	for (unsigned i = 0; i < a.n_gpus; i++) {
		int k = uuid_gpu(a.gpu_uuids[i]);
		if (k >= 0 && k < OB_GPU_MAX)
			milli[k] += OB_MILLI;
	}
	ft_allocation_dispose(&a);
	return 0;
}

/* POST /bind, then apply the bound pod as the watch would. */
static int do_bind(replay_t *r, cJSON *pod, const char *name, unsigned node,
		   uint32_t *milli)
{
	cJSON *b = cJSON_CreateObject(), *reply, *meta, *ann, *bound;
	const cJSON *err;
	char *allocation = NULL;
	int rc = -1;

	cJSON_AddStringToObject(b, "PodName", name);
	cJSON_AddStringToObject(b, "PodNamespace", NAMESPACE);
	cJSON_AddStringToObject(b, "PodUID", name);
	cJSON_AddStringToObject(b, "Node", r->trace->nodes[node].name);
	reply = client_post(&r->client, "/bind", cJSON_PrintUnformatted(b));
	cJSON_Delete(b);
	err = cJSON_GetObjectItemCaseSensitive(reply, "Error");
	if (!reply || (cJSON_IsString(err) && *err->valuestring)) {
		if (!r->o->quiet)
			fprintf(stderr, "bind %s: %s\n", name,
				reply && cJSON_IsString(err) ? err->valuestring
							     : "no reply");
		cJSON_Delete(reply);
		return -1;
	}
	cJSON_Delete(reply);
	pthread_mutex_lock(&r->api.lock);
	if (r->api.node &&
	    strcmp(r->api.node, r->trace->nodes[node].name) == 0) {
		allocation = r->api.allocation;
		r->api.allocation = NULL;
		rc = 0;
	}
	pthread_mutex_unlock(&r->api.lock);
	if (rc < 0 || allocation_milli(milli, allocation) < 0) {
		free(allocation);
		return -1;
	}
	bound = cJSON_Duplicate(pod, true);
	meta = cJSON_GetObjectItemCaseSensitive(bound, "metadata");
	ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
	if (allocation)
		cJSON_AddStringToObject(ann, r->api.key, allocation);
	cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(bound, "spec"),
				"nodeName", r->trace->nodes[node].name);
	cJSON_SetValuestring(
	    cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(bound, "status"), "phase"),
	    "Running");
	ft_state_apply_pod(r->app.state, bound);
	cJSON_Delete(bound);
	free(allocation);
	return 0;
}

/*
 * How many feasible nodes kube-scheduler looks for before it stops filtering:
 * numFeasibleNodesToFind, pkg/scheduler/schedule_one.go (v1.36). All of them
 * under 100 nodes; else `percent` of them (0: 50 - nodes / 125, at least 5),
 * at least 100.
 */
static unsigned feasible_to_find(unsigned percent, unsigned nodes)
{
	unsigned n;

	if (nodes < 100)
		return nodes;
	if (!percent)
		percent = 50 - nodes / 125 < 5 ? 5 : 50 - nodes / 125;
	n = nodes * percent / 100;
	return n < 100 ? 100 : n;
}

/*
 * The nodes the in-tree filters pass (CPU and memory, the GPU model's node
 * affinity) into r->fit, as kube-scheduler's findNodesThatPassFilters finds
 * them: from where the last pod's search stopped (nextStartNodeIndex),
 * until it has feasible_to_find() of them; the next search starts after the
 * nodes this one looked at. kube-scheduler filters in parallel and may look
 * at a few more nodes before it stops; this looks at them in turn. With
 * percentageOfNodesToScore 100 (the shipped setting) every feasible node.
 */
static unsigned feasible_nodes(replay_t *r, const ob_cluster_t *c,
			       const ob_pod_t *p, unsigned want)
{
	unsigned all = r->trace->n_nodes, n = 0, looked = 0;

	for (; looked < all && n < want; looked++) {
		unsigned i = (r->next_start + looked) % all;
		if (ob_fits_in_tree(c, i, p))
			r->fit[n++] = i;
	}
	r->next_start = (r->next_start + looked) % all;
	return n;
}

/* Whether filter passes a node among all that fit `p` in-tree, when it
 * passed none of the `want` kube-scheduler looked at; r->fit is scratch. */
static bool room_elsewhere(replay_t *r, const ob_cluster_t *c,
			   const ob_pod_t *p, const cJSON *pod, unsigned want)
{
	unsigned n, start = r->next_start;

	if (want >= r->trace->n_nodes)
		return false;
	n = feasible_nodes(r, c, p, r->trace->n_nodes);
	r->next_start = start;
	return n > want && do_filter(r, pod, &n) == 0 && n;
}

/* One pod through in-tree fit, filter, prioritize and bind. */
static int replay_pod(replay_t *r, ob_cluster_t *c, const ob_pod_t *p,
		      unsigned seq)
{
	uint32_t milli[OB_GPU_MAX] = {0};
	unsigned n = 0;
	char name[48];
	cJSON *pod;
	unsigned fitting = 0, want = feasible_to_find(r->o->nodes_to_score,
						      r->trace->n_nodes);
	bool refused = false;
	int node = -1, rc = 0;

	n = feasible_nodes(r, c, p, want);
	fitting = n;
	snprintf(name, sizeof(name), "openb-pod-%06u", seq);
	pod = pod_json(p, r->trace, name, &r->app.opts, r->o);
	if (n && (rc = do_filter(r, pod, &n)) == 0 && n)
		node = do_prioritize(r, c, pod, p, n);
	else if (rc == 0 && fitting == want &&
		 room_elsewhere(r, c, p, pod, want))
		refused = true;
	r->refused_with_room += refused;
	if (node >= 0 && do_bind(r, pod, name, (unsigned)node, milli) < 0) {
		r->bind_errors++;
		node = -1;
	}
	cJSON_Delete(pod);
	if (node < 0 && getenv("OPENB_DEBUG"))
		fprintf(
		    stderr,
		    "%s (%u GPUs x %u milli, %u m CPU) at %.1f %% arrived: %u nodes fit CPU and memory, %u passed filter%s\n",
		    name, p->n_gpus, p->gpu_milli, p->cpu_milli,
		    100.0 * (double)c->arrived_milli /
			(double)r->trace->gpu_capacity_milli,
		    fitting, n,
		    refused ? "; a node not looked at had room" : "");
	if (node < 0)
		ob_cluster_fail(c, p);
	else
		ob_cluster_place(c, p, node, milli);
	return rc;
}

/* The extender's own model agrees with the mirror: replicas held per GPU,
 * no allocation conflicts. */
static int check_state(replay_t *r, const ob_cluster_t *c)
{
	ft_snapshot_t *snap = ft_state_snapshot(r->app.state);
	int rc = 0;

	for (unsigned i = 0; i < r->trace->n_nodes && rc == 0; i++) {
		const ft_node_t *node =
		    ft_snapshot_find(snap, r->trace->nodes[i].name);
		if (!node || node->conflicts) {
			rc = -1;
			break;
		}
		for (unsigned g = 0; g < r->trace->nodes[i].n_gpus; g++)
			if (OB_MILLI - (uint32_t)node->replicas_used[g] *
					   REPLICA_MILLI !=
			    c->left[i].gpu[g]) {
				fprintf(
				    stderr,
				    "%s GPU %u: extender holds %u replicas, the replay %u milli free\n",
				    node->name, g, node->replicas_used[g],
				    c->left[i].gpu[g]);
				rc = -1;
			}
	}
	ft_snapshot_unref(snap);
	return rc;
}

static int run_flextopo(ob_cluster_t *c, const options_t *o,
			const ob_trace_t *t, const unsigned *seq, unsigned n,
			uint64_t seed, bool intree, outcome_t *out)
{
	replay_t r = {.o = o, .trace = t, .intree = intree, .rng = seed};
	int rc = -1;

	r.by_name = malloc(t->n_nodes * sizeof(*r.by_name));
	r.fit = malloc(t->n_nodes * sizeof(*r.fit));
	r.total = calloc(t->n_nodes, sizeof(*r.total));
	r.cand = malloc(t->n_nodes * sizeof(*r.cand));
	if (!r.by_name || !r.fit || !r.total || !r.cand)
		goto cleanup;
	for (unsigned i = 0; i < t->n_nodes; i++)
		r.by_name[i] = &t->nodes[i];
	qsort(r.by_name, t->n_nodes, sizeof(*r.by_name), by_name_cmp);
	if (replay_start(&r) < 0)
		goto cleanup;
	rc = 0;
	for (unsigned i = 0; i < n && rc == 0; i++)
		rc = replay_pod(&r, c, &t->pods[seq[i]], i);
	if (rc == 0 && check_state(&r, c) < 0)
		c->overcommitted = true;
	out->bind_errors = r.bind_errors;
	out->refused_with_room = r.refused_with_room;
cleanup:
	replay_stop(&r);
	free(r.by_name);
	free(r.fit);
	free(r.cand);
	free(r.total);
	return rc;
}

/* ---- one seed ---- */

static void outcome_fill(outcome_t *out, const ob_cluster_t *c, double s)
{
	for (unsigned k = 0; k < OB_LEVELS; k++) {
		out->unalloc[k] = ob_unalloc_at(c, k);
		out->frag[k] = ob_frag_at(c, k);
	}
	out->arrived = c->arrived;
	out->placed = c->placed;
	out->failed = c->failed;
	memcpy(out->failed_kind, c->failed_kind, sizeof(out->failed_kind));
	out->partial100 = c->partial_at_100;
	out->whole100 = c->whole_at_100;
	out->whole_short100 = c->whole_cpu_short_at_100;
	out->multi = c->multi_nvlink;
	out->aligned = c->multi_aligned;
	out->seconds = s;
	out->ok = !c->overcommitted && c->placed + c->failed == c->arrived;
}

static int run_arm(outcome_t *out, arm_t arm, const options_t *o,
		   const ob_trace_t *t, const ob_typical_t *tp,
		   const unsigned *seq, unsigned n, uint64_t seed)
{
	uint64_t rng = seed * 0x9e3779b97f4a7c15ULL + arm;
	double t0 = now_us();
	ob_cluster_t c;
	int rc = 0;

	if (ob_cluster_init(&c, t, tp) < 0)
		return -1;
	c.name_ties = o->name_ties;
	if (arm == ARM_FLEXTOPO || arm == ARM_INTREE)
		rc =
		    run_flextopo(&c, o, t, seq, n, rng, arm == ARM_INTREE, out);
	else
		for (unsigned i = 0; i < n; i++)
			ob_schedule(&c,
				    arm == ARM_RANDOM	 ? OB_RANDOM
				    : arm == ARM_BESTFIT ? OB_BESTFIT
							 : OB_FGD,
				    &t->pods[seq[i]], &rng);
	outcome_fill(out, &c, (now_us() - t0) / 1e6);
	if (out->bind_errors)
		out->ok = false;
	ob_cluster_dispose(&c);
	return rc;
}

/* ---- the paper's figures ---- */

typedef struct paper {
	double unalloc[ARMS][OB_LEVELS][2]; /* mean, sd; NAN when absent */
	double frag[ARMS][OB_LEVELS][2];
} paper_t;

static void paper_file(double (*out)[OB_LEVELS][2], const char *path,
		       const char *workload, bool invert)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	double sum[ARMS][OB_LEVELS] = {{0}}, sq[ARMS][OB_LEVELS] = {{0}};
	unsigned cnt[ARMS][OB_LEVELS] = {{0}};
	int first = -1;

	for (unsigned a = 0; a < ARMS; a++)
		for (unsigned k = 0; k < OB_LEVELS; k++)
			out[a][k][0] = out[a][k][1] = NAN;
	if (!f)
		return;
	while (getline(&line, &cap, f) > 0) {
		char *save = NULL, *tok = strtok_r(line, ",\r\n", &save);
		unsigned col = 0;
		int arm = -1;
		if (first < 0) { /* header: the column of "0" */
			for (; tok; tok = strtok_r(NULL, ",\r\n", &save), col++)
				if (strcmp(tok, "0") == 0 && first < 0)
					first = (int)col;
			continue;
		}
		if (!tok || strcmp(tok, workload) != 0)
			continue;
		tok = strtok_r(NULL, ",\r\n", &save);
		for (unsigned a = 0; a < ARMS && tok; a++)
			if (paper_names[a] && strcmp(tok, paper_names[a]) == 0)
				arm = (int)a;
		if (arm < 0)
			continue;
		/* strtok skips empty fields; the rows have none in range. */
		for (col = 2; (tok = strtok_r(NULL, ",\r\n", &save)); col++) {
			int k = (int)col - first;
			double v;
			if (k < 0 || k >= OB_LEVELS)
				continue;
			v = invert ? 100.0 - atof(tok) : atof(tok);
			sum[arm][k] += v;
			sq[arm][k] += v * v;
			cnt[arm][k]++;
		}
	}
	free(line);
	fclose(f);
	for (unsigned a = 0; a < ARMS; a++)
		for (unsigned k = 0; k < OB_LEVELS; k++) {
			unsigned m = cnt[a][k];
			if (!m)
				continue;
			out[a][k][0] = sum[a][k] / m;
			out[a][k][1] =
			    m > 1 ? sqrt(fmax(0, (sq[a][k] -
						  sum[a][k] * sum[a][k] / m) /
						     (m - 1)))
				  : 0;
		}
}

static void paper_load(paper_t *p, const char *data, const char *variant)
{
	char path[4096], workload[128];

	snprintf(workload, sizeof(workload), "openb_pod_list_%s", variant);
	snprintf(path, sizeof(path),
		 "%s/fgd-expected/analysis_allo_discrete.csv", data);
	paper_file(p->unalloc, path, workload, true);
	snprintf(path, sizeof(path),
		 "%s/fgd-expected/analysis_frag_discrete.csv", data);
	paper_file(p->frag, path, workload, false);
}

/* ---- statistics and the report ---- */

typedef struct mstat {
	double mean, sd;
} stat_t;

static stat_t stat_of(const double *v, unsigned n)
{
	stat_t s = {NAN, NAN};
	double sum = 0, sq = 0;
	unsigned m = 0;

	for (unsigned i = 0; i < n; i++)
		if (!isnan(v[i])) {
			sum += v[i];
			m++;
		}
	if (!m)
		return s;
	s.mean = sum / m;
	for (unsigned i = 0; i < n; i++)
		if (!isnan(v[i]))
			sq += (v[i] - s.mean) * (v[i] - s.mean);
	s.sd = m > 1 ? sqrt(sq / (m - 1)) : 0;
	return s;
}

typedef struct variant_result {
	const char *name;
	outcome_t runs[ARMS][SEEDS_MAX];
	unsigned n_seeds;
	unsigned pods; /* sequence length of the first seed */
	paper_t paper;
} variant_result_t;

static stat_t arm_stat(const variant_result_t *v, unsigned a, unsigned k,
		       bool frag)
{
	double x[SEEDS_MAX];

	for (unsigned s = 0; s < v->n_seeds; s++)
		x[s] = frag ? v->runs[a][s].frag[k] : v->runs[a][s].unalloc[k];
	return stat_of(x, v->n_seeds);
}

static void cell(FILE *f, stat_t s)
{
	if (isnan(s.mean))
		fprintf(f, " - |");
	else
		fprintf(f, " %.2f ± %.2f |", s.mean, s.sd);
}

static void table(FILE *f, const variant_result_t *v, const options_t *o,
		  bool frag)
{
	fprintf(f, "\n%s GPU %% (mean ± sd over %u seeds; paper: 10 seeds)\n\n",
		frag ? "Fragmented" : "Unallocated", v->n_seeds);
	fprintf(f, "| arrived |");
	for (unsigned a = 0; a < ARMS; a++)
		if (o->arms[a])
			fprintf(f, " %s |", arm_names[a]);
	for (unsigned a = 0; a < ARMS; a++)
		if (paper_names[a])
			fprintf(f, " %s (paper) |", arm_names[a]);
	fprintf(f, "\n|---:|");
	for (unsigned a = 0; a < ARMS; a++)
		fprintf(f, "%s", o->arms[a] ? "---:|" : "");
	for (unsigned a = 0; a < ARMS; a++)
		fprintf(f, "%s", paper_names[a] ? "---:|" : "");
	fprintf(f, "\n");
	for (unsigned k = 50; k <= 130; k += 10) {
		fprintf(f, "| %u %% |", k);
		for (unsigned a = 0; a < ARMS; a++)
			if (o->arms[a])
				cell(f, arm_stat(v, a, k, frag));
		for (unsigned a = 0; a < ARMS; a++) {
			const double *p =
			    frag ? v->paper.frag[a][k] : v->paper.unalloc[a][k];
			if (paper_names[a])
				cell(f, (stat_t){p[0], p[1]});
		}
		fprintf(f, "\n");
	}
}

/* Mean failures per pod kind, "a / b / c / d". */
static void fail_kinds(FILE *f, const variant_result_t *v, unsigned a)
{
	for (unsigned k = 0; k < OB_KINDS; k++) {
		double x[SEEDS_MAX];
		for (unsigned s = 0; s < v->n_seeds; s++)
			x[s] = v->runs[a][s].failed_kind[k];
		fprintf(f, "%s%.1f", k ? " / " : " ",
			stat_of(x, v->n_seeds).mean);
	}
	fprintf(f, " |");
}

static void summary(FILE *f, const variant_result_t *v, const options_t *o)
{
	fprintf(
	    f,
	    "\n| policy | pods arrived | pods failed | of which no GPU / shared / 1 GPU / multi-GPU | 2-/4-GPU pods on NVLink nodes | NVLink-aligned | unallocated at 100 %%: in GPUs partly taken / whole GPUs (of those on nodes with < %u m CPU left) | s per seed |\n",
	    OB_CPU_SHORT);
	fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|\n");
	for (unsigned a = 0; a < ARMS; a++) {
		double arr[SEEDS_MAX], fail[SEEDS_MAX], multi[SEEDS_MAX],
		    share[SEEDS_MAX], secs[SEEDS_MAX], part[SEEDS_MAX],
		    whole[SEEDS_MAX], shortcpu[SEEDS_MAX];
		stat_t s;
		if (!o->arms[a])
			continue;
		for (unsigned k = 0; k < v->n_seeds; k++) {
			const outcome_t *r = &v->runs[a][k];
			arr[k] = r->arrived;
			fail[k] = r->failed;
			multi[k] = r->multi;
			share[k] =
			    r->multi ? 100.0 * r->aligned / r->multi : NAN;
			secs[k] = r->seconds;
			part[k] = r->partial100;
			whole[k] = r->whole100;
			shortcpu[k] = r->whole_short100;
		}
		fprintf(f, "| %s | %.0f | %.1f ± %.1f |", arm_names[a],
			stat_of(arr, v->n_seeds).mean,
			stat_of(fail, v->n_seeds).mean,
			stat_of(fail, v->n_seeds).sd);
		fail_kinds(f, v, a);
		fprintf(f, " %.1f |", stat_of(multi, v->n_seeds).mean);
		s = stat_of(share, v->n_seeds);
		if (isnan(s.mean))
			fprintf(f, " - |");
		else
			fprintf(f, " %.1f ± %.1f %% |", s.mean, s.sd);
		fprintf(f, " %.2f / %.2f (%.2f) |",
			stat_of(part, v->n_seeds).mean,
			stat_of(whole, v->n_seeds).mean,
			stat_of(shortcpu, v->n_seeds).mean);
		fprintf(f, " %.1f |\n", stat_of(secs, v->n_seeds).mean);
	}
}

/* Pods the flextopo arms failed on kube-scheduler's window of nodes while a
 * node outside it had room (replay_t's refused_with_room). */
static void refused(FILE *f, const variant_result_t *v, const options_t *o)
{
	double n[SEEDS_MAX];

	for (unsigned a = ARM_FLEXTOPO; a <= ARM_INTREE; a++) {
		stat_t s;
		if (!o->arms[a])
			continue;
		for (unsigned k = 0; k < v->n_seeds; k++)
			n[k] = v->runs[a][k].refused_with_room;
		s = stat_of(n, v->n_seeds);
		fprintf(
		    f,
		    "\n%s: %.1f ± %.1f pods per seed refused on the nodes kube-scheduler looked at while a node it did not look at had room\n",
		    arm_names[a], s.mean, s.sd);
	}
}

static void report(FILE *f, const variant_result_t *v, unsigned n,
		   const options_t *o)
{
	if (o->n_settings)
		fprintf(f, "\nflextopo's configuration: the shipped one with");
	for (unsigned i = 0; i < o->n_settings; i++)
		fprintf(f, "%s `%s`", i ? "," : "", o->settings[i]);
	if (o->n_settings)
		fprintf(f, "\n");
	if (strcmp(o->model_label, FT_GPU_PRODUCT_LABEL) != 0)
		fprintf(
		    f,
		    "\nThe GPU model is the node label `%s`, not `" FT_GPU_PRODUCT_LABEL
		    "`\n",
		    o->model_label);
	if (o->model_labels == MODEL_LABELS_SITE)
		fprintf(
		    f,
		    "\nThe GPU model label's values are the trace's site codes (V100M16), not GPU feature discovery's spelling of the NVML name (Tesla-V100-SXM2-16GB)\n");
	if (o->nodes_to_score != 100)
		fprintf(
		    f,
		    "\nkube-scheduler's percentageOfNodesToScore: %u%s (the shipped 100 elsewhere)\n",
		    o->nodes_to_score, o->nodes_to_score ? "" : " (adaptive)");
	for (unsigned i = 0; i < n; i++) {
		fprintf(f, "\n### openb_pod_list_%s: %u pods per seed\n",
			v[i].name, v[i].pods);
		table(f, &v[i], o, false);
		table(f, &v[i], o, true);
		summary(f, &v[i], o);
		if (o->nodes_to_score != 100)
			refused(f, &v[i], o);
	}
}

/* ---- the plot ---- */

/* One panel per variant: arrived 80..130 %, where the policies part (below
 * 80 % every policy places nearly everything and the curves are the line
 * 100 - arrived). */
#define PLOT_FROM  80
#define PLOT_TO	   130
#define PANEL_W	   330
#define PANEL_H	   260
#define PANEL_X0   50
#define PANEL_Y0   40
#define PANEL_GAP  60
#define PLOT_Y_MAX 40.0

static const char *const colours[ARMS] = {"#d62728", "#ff7f0e", "#7f7f7f",
					  "#1f77b4", "#2ca02c"};

typedef struct panel {
	double x0, y0;
} panel_t;

static double px(const panel_t *p, double arrived)
{
	return p->x0 + (arrived - PLOT_FROM) * PANEL_W / (PLOT_TO - PLOT_FROM);
}

static double py(const panel_t *p, double pct)
{
	pct = pct > PLOT_Y_MAX ? PLOT_Y_MAX : pct;
	return p->y0 + (PLOT_Y_MAX - pct) * PANEL_H / PLOT_Y_MAX;
}

static void svg_series(FILE *f, const panel_t *pn, const variant_result_t *v,
		       unsigned a, bool paper)
{
	bool open = false;

	for (unsigned k = PLOT_FROM; k <= PLOT_TO; k++) {
		double y = paper ? v->paper.unalloc[a][k][0]
				 : arm_stat(v, a, k, false).mean;
		if (isnan(y))
			continue;
		fprintf(f, "%s%.1f,%.1f", open ? " " : "<polyline points=\"",
			px(pn, k), py(pn, y));
		open = true;
	}
	if (open)
		fprintf(
		    f,
		    "\" fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s/>\n",
		    colours[a], paper ? "1.2" : "2",
		    paper ? " stroke-dasharray=\"5 3\"" : "");
}

static void svg_axes(FILE *f, const panel_t *p, const char *title)
{
	fprintf(f,
		"<text x=\"%.0f\" y=\"%.0f\" font-weight=\"bold\">%s</text>\n",
		p->x0, p->y0 - 10, title);
	for (unsigned k = PLOT_FROM; k <= PLOT_TO; k += 10)
		fprintf(
		    f,
		    "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%u</text>\n",
		    px(p, k), p->y0, px(p, k), p->y0 + PANEL_H, px(p, k),
		    p->y0 + PANEL_H + 16, k);
	for (unsigned y = 0; y <= PLOT_Y_MAX; y += 5)
		fprintf(
		    f,
		    "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%u</text>\n",
		    p->x0, py(p, y), p->x0 + PANEL_W, py(p, y), p->x0 - 6,
		    py(p, y) + 4, y);
}

static void svg_legend(FILE *f, const options_t *o, double y)
{
	double x = PANEL_X0;

	for (unsigned a = 0; a < ARMS; a++) {
		if (!o->arms[a])
			continue;
		fprintf(
		    f,
		    "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"/><text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
		    x, y, x + 24, y, colours[a], x + 30, y + 4, arm_names[a]);
		x += 40 + 8 * strlen(arm_names[a]);
	}
	fprintf(
	    f,
	    "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#000\" stroke-dasharray=\"5 3\"/><text x=\"%.0f\" y=\"%.0f\">the paper's published figures (10 seeds), same colour</text>\n",
	    x, y, x + 24, y, x + 30, y + 4);
}

static int write_svg(const char *path, const variant_result_t *v, unsigned n,
		     const options_t *o)
{
	double width = PANEL_X0 + n * (PANEL_W + PANEL_GAP);
	double height = PANEL_Y0 + PANEL_H + 90;
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fprintf(
	    f,
	    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n",
	    width, height, width, height);
	fprintf(
	    f,
	    "<text x=\"%d\" y=\"%.0f\">x: arrived GPU workload, %% of capacity; y: unallocated GPU %%, mean of %u seeds (lower is better)</text>\n",
	    PANEL_X0, height - 40, v->n_seeds);
	for (unsigned i = 0; i < n; i++) {
		panel_t p = {PANEL_X0 + i * (PANEL_W + PANEL_GAP), PANEL_Y0};
		char title[128];
		snprintf(title, sizeof(title), "openb_pod_list_%s", v[i].name);
		svg_axes(f, &p, title);
		for (unsigned a = 0; a < ARMS; a++) {
			if (paper_names[a])
				svg_series(f, &p, &v[i], a, true);
			if (o->arms[a])
				svg_series(f, &p, &v[i], a, false);
		}
	}
	svg_legend(f, o, height - 16);
	fprintf(f, "</svg>\n");
	return fclose(f) == 0 ? 0 : -1;
}

/* One seed's line on stderr; the refusals only where they can happen. */
static void seed_line(const char *variant, uint64_t seed, arm_t a,
		      const outcome_t *out, const options_t *o)
{
	char refused[64] = "";

	if (o->nodes_to_score != 100 && a <= ARM_INTREE)
		snprintf(refused, sizeof(refused),
			 "%u refused with room elsewhere, ",
			 out->refused_with_room);
	fprintf(
	    stderr,
	    "%s seed %llu %s: %u pods, %u failed, %sunallocated at 100 %% %.2f, %.1f s%s\n",
	    variant, (unsigned long long)seed, arm_names[a], out->arrived,
	    out->failed, refused, out->unalloc[100], out->seconds,
	    out->ok ? "" : " INVARIANT BROKEN");
}

/* ---- main ---- */

static int run_variant(variant_result_t *v, const options_t *o)
{
	char nodes[4096], pods[4096];
	ob_typical_t *tp = malloc(sizeof(*tp));
	ob_trace_t t;
	int rc = 0;

	snprintf(nodes, sizeof(nodes), "%s/csv/openb_node_list_gpu_node.csv",
		 o->data);
	snprintf(pods, sizeof(pods), "%s/csv/openb_pod_list_%s.csv", o->data,
		 v->name);
	if (!tp || ob_trace_load(&t, nodes, pods) < 0) {
		free(tp);
		return -1;
	}
	ob_typical_init(tp, &t);
	paper_load(&v->paper, o->data, v->name);
	v->n_seeds = o->seeds;
	for (unsigned s = 0; s < o->seeds && rc == 0; s++) {
		uint64_t seed = SEED_BASE + s;
		unsigned n = 0, *seq = ob_sequence(&t, seed, ARRIVAL_TARGET,
						   o->max_pods, &n);
		if (!seq) {
			rc = -1;
			break;
		}
		if (s == 0)
			v->pods = n;
		for (unsigned a = 0; a < ARMS && rc == 0; a++) {
			outcome_t *out = &v->runs[a][s];
			if (!o->arms[a])
				continue;
			rc = run_arm(out, (arm_t)a, o, &t, tp, seq, n, seed);
			if (!o->quiet)
				seed_line(v->name, seed, (arm_t)a, out, o);
			if (rc == 0 && !out->ok)
				rc = -2;
		}
		free(seq);
	}
	ob_trace_dispose(&t);
	free(tp);
	return rc;
}

static bool parse_arms(options_t *o, const char *list)
{
	char buf[256], *save = NULL;

	memset(o->arms, 0, sizeof(o->arms));
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		unsigned a = 0;
		while (a < ARMS && strcasecmp(tok, arm_names[a]) != 0)
			a++;
		if (a == ARMS)
			return false;
		o->arms[a] = true;
	}
	return true;
}

/* --model-labels: "gfd" or "site-codes". */
static bool parse_model_labels(options_t *o, const char *arg)
{
	if (strcmp(arg, "gfd") == 0)
		o->model_labels = MODEL_LABELS_GFD;
	else if (strcmp(arg, "site-codes") == 0)
		o->model_labels = MODEL_LABELS_SITE;
	else
		return false;
	return true;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: flextopo-openb-replay [--data DIR] [--variants default,multigpu50,gpushare100,gpuspec33]\n"
	    "  [--seeds N] [--max-pods N] [--policies flextopo,flextopo+in-tree,random,bestfit,fgd]\n"
	    "  [--ties random|name] [--set KEY=VALUE]... [--report FILE.md]\n"
	    "  [--svg FILE.svg] [--nodes-to-score PERCENT] [--model-label KEY]\n"
	    "  [--model-labels gfd|site-codes] [--quiet]\n");
}

static int parse(options_t *o, int argc, char **argv)
{
	static const struct option longs[] = {
	    {"data", required_argument, NULL, 'd'},
	    {"variants", required_argument, NULL, 'v'},
	    {"seeds", required_argument, NULL, 's'},
	    {"max-pods", required_argument, NULL, 'm'},
	    {"policies", required_argument, NULL, 'p'},
	    {"report", required_argument, NULL, 'r'},
	    {"svg", required_argument, NULL, 'g'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"ties", required_argument, NULL, 't'},
	    {"set", required_argument, NULL, 'c'},
	    {"nodes-to-score", required_argument, NULL, 'n'},
	    {"model-label", required_argument, NULL, 'l'},
	    {"model-labels", required_argument, NULL, 'L'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	static char variants[512];
	char *save = NULL;
	unsigned long v;
	int c;

	*o = (options_t){.data = "../shared/data/openb",
			 .seeds = 5,
			 .nodes_to_score = 100,
			 .model_label = FT_GPU_PRODUCT_LABEL};
	for (unsigned a = 0; a < ARMS; a++)
		o->arms[a] = true;
	snprintf(variants, sizeof(variants),
		 "default,multigpu50,gpushare100,gpuspec33");
	while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (c) {
		case 'd':
			o->data = optarg;
			break;
		case 'v':
			snprintf(variants, sizeof(variants), "%s", optarg);
			break;
		case 's':
			if (bench_parse_ulong(TOOL, &v, optarg, 1, SEEDS_MAX) <
			    0)
				return -1;
			o->seeds = (unsigned)v;
			break;
		case 'm':
			if (bench_parse_ulong(TOOL, &v, optarg, 0, UINT_MAX) <
			    0)
				return -1;
			o->max_pods = (unsigned)v;
			break;
		case 'p':
			if (!parse_arms(o, optarg))
				return -1;
			break;
		case 'r':
			o->report = optarg;
			break;
		case 'g':
			o->svg = optarg;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 't':
			if (strcmp(optarg, "name") != 0 &&
			    strcmp(optarg, "random") != 0)
				return -1;
			o->name_ties = strcmp(optarg, "name") == 0;
			break;
		case 'n':
			if (bench_parse_ulong(TOOL, &v, optarg, 0, 100) < 0)
				return -1;
			o->nodes_to_score = (unsigned)v;
			break;
		case 'l':
			o->model_label = optarg;
			break;
		case 'L':
			if (!parse_model_labels(o, optarg))
				return -1;
			break;
		case 'c':
			if (o->n_settings == SETTINGS_MAX)
				return -1;
			o->settings[o->n_settings++] = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -1;
		}
	}
	for (char *tok = strtok_r(variants, ",", &save);
	     tok && o->n_variants < VARIANTS_MAX;
	     tok = strtok_r(NULL, ",", &save))
		o->variants[o->n_variants++] = tok;
	if (o->seeds < 1 || o->seeds > SEEDS_MAX || !o->n_variants)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	variant_result_t *v = NULL;
	options_t o;
	struct stat st;
	char path[4096];
	int rc = 0;

	if (parse(&o, argc, argv) < 0) {
		usage(stderr);
		return 2;
	}
	snprintf(path, sizeof(path), "%s/csv", o.data);
	if (stat(path, &st) != 0) {
		printf("openb data not found at %s: skipped\n", o.data);
		return 77; /* ctest SKIP_RETURN_CODE */
	}
	if (!(v = calloc(o.n_variants, sizeof(*v))))
		return 1;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	for (unsigned i = 0; i < o.n_variants && rc == 0; i++) {
		v[i].name = o.variants[i];
		rc = run_variant(&v[i], &o);
	}
	if (rc == 0) {
		report(stdout, v, o.n_variants, &o);
		if (o.report) {
			FILE *f = fopen(o.report, "w");
			if (!f)
				rc = -1;
			else {
				report(f, v, o.n_variants, &o);
				fclose(f);
			}
		}
		if (o.svg && write_svg(o.svg, v, o.n_variants, &o) < 0)
			rc = -1;
	}
	curl_global_cleanup();
	free(v);
	if (rc == -2)
		fprintf(
		    stderr,
		    "an invariant broke: placed + failed != arrived, a GPU over-allocated or a bind failed\n");
	return rc == 0 ? 0 : 1;
}
