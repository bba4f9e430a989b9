/*
 * flextopo-policy-table: packed vs distributed, each with and without the
 * FGD fragmentation penalty, on one synthetic cluster (bench/README.md).
 *
 * For each of four runs (packed+FGD, packed, distributed+FGD, distributed)
 * it builds an empty cluster of N nodes cycling through the reference
 * servers of api/examples/ (8x RTX 4090, 8x A100 NVSwitch, 8x H100 with MIG
 * on three GPUs, and 4x H100 shared 10 ways when that example exists),
 * every uuid suffixed with the node index, loads it into a real ft_app_t
 * (snapshot mode, config "policy" set, "fragmentationWindow" left at its
 * default or set to 0), then feeds the same fixed pod sequence through the
 * route handlers as kube-scheduler would: filter over all node names,
 * prioritize over the survivors, the highest score (ties: the lowest name),
 * bind (confirmed in memory in snapshot mode).
 *
 * It prints, side by side, pods placed and not placed per shape; at the end
 * whole GPUs left free per node kind, nodes with a free NVLink pair or a
 * free NVLink group of 4, MIG instances and shared replicas left free; the
 * cluster's FGD fragmentation and stranded MIG slices (frag.h) under the mix
 * of the last pods placed; and the headroom: for each of a few big shapes,
 * how many more pods of that shape alone fit the final state. Each headroom
 * probe starts from a copy of the final state, rebuilt by binding every pod
 * of the sequence to the node the run chose, in order (bind is
 * deterministic for a given state), and checked equal to it.
 *
 * The counts are checked (placed + unplaced = pods, holdings = placed, the
 * scorer's mix = the pods placed, the copies equal the final state); no
 * figure is asserted.
 */
#include <flextopo/file.h>
#include <flextopo/app.h>
#include <flextopo/error.h>
#include <flextopo/frag.h>

#include <cjson/cJSON.h>

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

#ifndef FT_SOURCE_DIR
#define FT_SOURCE_DIR "."
#endif

#define KINDS_MAX    4
#define RUNS	     4
#define NAME_LEN     40
#define CELL_LEN     24
#define GROUP_NVLINK 4

typedef struct kind {
	const char *file;
	const char *label;
	bool optional;
} kind_t;

static const kind_t all_kinds[KINDS_MAX] = {
    {"rtx4090-8x.json", "rtx4090", false},
    {"a100-8x.json", "a100", false},
    {"h100-8x-mig.json", "h100mig", false},
    {"h100-4x-shared.json", "h100shared", true},
};

typedef struct shape {
	const char *name;
	unsigned weight; /* out of the sum of weights */
	unsigned gpus;
	bool shared;	       /* ask <gpu resource>.shared */
	const char *fraction;  /* flextopo.io/gpu-fraction, or NULL */
	const char *mig;       /* MIG profile, or NULL */
	const char *cpu, *mem; /* requests */
	const char *affinity;  /* or NULL */
	const char *mode;      /* or NULL */
	bool limits;	       /* limits = requests (Guaranteed QoS) */
} shape_t;

#define SHAPES 7
static const shape_t shapes[SHAPES] = {
    {"1gpu-best-effort", 30, 1, false, NULL, NULL, "2", "8Gi", "numa",
     "best-effort", false},
    {"2gpu-nvlink", 14, 2, false, NULL, NULL, "4", "32Gi", "nvlink",
     "guaranteed", true},
    {"4gpu-nvlink", 8, 4, false, NULL, NULL, "8", "64Gi", "nvlink",
     "guaranteed", true},
    {"8cpu-2gpu-numa", 12, 2, false, NULL, NULL, "8", "64Gi", "numa",
     "guaranteed", true},
    {"mig-1g.10gb", 16, 0, false, NULL, "1g.10gb", "1", "8Gi", "numa",
     "guaranteed", true},
    {"mig-3g.40gb", 10, 0, false, NULL, "3g.40gb", "2", "16Gi", "numa",
     "guaranteed", true},
    {"shared-0.5gpu", 10, 1, true, "0.5", NULL, "1", "4Gi", NULL, NULL, false},
};

/* Not in the sequence: a shared pod that needs 8 of a GPU's 10 replicas,
 * so it fits only GPUs that the 0.5 pods left (nearly) whole. */
static const shape_t shared_08 = {
    "shared-0.8gpu", 0, 1, true, "0.8", NULL, "1", "4Gi", NULL, NULL, false};

/* The headroom probes: the shapes that fragmentation can lock out. */
#define PROBES 5
static const shape_t *const probes[PROBES] = {
    &shapes[1], &shapes[2], &shapes[3], &shapes[5], &shared_08};

typedef struct run_config {
	const char *label; /* column heading */
	const char *policy;
	bool fgd; /* false: fragmentationWindow 0 */
} run_config_t;

static const run_config_t runs[RUNS] = {
    {"packed+FGD", "packed", true},
    {"packed", "packed", false},
    {"distributed+FGD", "distributed", true},
    {"distributed", "distributed", false},
};

typedef struct options {
	unsigned nodes, pods;
	uint64_t seed;
	const char *source_dir;
} options_t;

/* Figures per node kind at the end of the sequence. */
enum {
	FIG_NODES,
	FIG_GPUS, /* whole GPUs: not MIG-enabled, not shared */
	FIG_GPUS_FREE,
	FIG_PAIR_FREE,	/* nodes with a free NVLink pair */
	FIG_GROUP_FREE, /* nodes with GROUP_NVLINK free GPUs in one domain */
	FIG_MIG,	/* MIG instances */
	FIG_MIG_FREE,
	FIG_REPLICAS, /* replicas of shared GPUs */
	FIG_REPLICAS_FREE,
	FIGURES
};

/* Sums over the nodes of a state: ft_frag_measure() under one mix. */
typedef struct measure {
	unsigned holdings;
	uint64_t free_milli, fragmentation_milli;
	unsigned mig_slices_free, mig_slices_stranded;
} measure_t;

typedef struct tally {
	unsigned asked[SHAPES], placed[SHAPES], unplaced[SHAPES];
	unsigned bind_failed; /* in the sequence and the probes */
	unsigned fig[FIGURES][KINDS_MAX];
	measure_t end;			      /* at the end of the sequence */
	unsigned headroom[PROBES][KINDS_MAX]; /* probe pods placed, per kind */
	double sequence_s, probes_s;
} tally_t;

typedef struct cluster {
	cJSON *templates[KINDS_MAX];
	unsigned kinds[KINDS_MAX]; /* positions in all_kinds */
	unsigned n_kinds;
	char (*names)[NAME_LEN];
	unsigned n;
} cluster_t;

/* What the runs share, and their scratch. */
typedef struct bench {
	options_t o;
	cluster_t c;
	unsigned *sequence; /* shape of each pod, drawn from the seed */
	unsigned window;    /* fragmentationWindow's default: the mix of the
			       FGD runs and the one every run is measured by */
	int32_t *node_of;   /* node of each pod in the run, -1 if none */
	ft_mix_t mix;	    /* the last `window` pods the run placed */
} bench_t;

static int cluster_init(cluster_t *c, const options_t *o)
{
	char path[4096];

	memset(c, 0, sizeof(*c));
	for (unsigned k = 0; k < KINDS_MAX; k++) {
		char *text;
		snprintf(path, sizeof(path), "%s/api/examples/%s",
			 o->source_dir, all_kinds[k].file);
		if (all_kinds[k].optional && access(path, R_OK) != 0)
			continue;
		if (ft_file_read(&text, NULL, path, (size_t)1 << 24) < 0) {
			fprintf(stderr, "policy-table: %s\n", ft_error_last());
			return -1;
		}
		c->templates[c->n_kinds] = cJSON_Parse(text);
		free(text);
		if (!c->templates[c->n_kinds]) {
			fprintf(stderr, "policy-table: %s: not JSON\n", path);
			return -1;
		}
		c->kinds[c->n_kinds++] = k;
	}
	c->n = o->nodes;
	if (!(c->names = calloc(c->n, sizeof(*c->names))))
		return -1;
	for (unsigned i = 0; i < c->n; i++)
		snprintf(c->names[i], NAME_LEN, "pt-%s-%05u",
			 all_kinds[c->kinds[i % c->n_kinds]].label, i);
	return 0;
}

static void cluster_dispose(cluster_t *c)
{
	for (unsigned k = 0; k < c->n_kinds; k++)
		cJSON_Delete(c->templates[k]);
	free(c->names);
}

static cJSON *node_object(const cluster_t *c, unsigned i,
			  const ft_codec_options_t *opts)
{
	cJSON *topo = cJSON_Duplicate(c->templates[i % c->n_kinds], true);
	cJSON *node = cJSON_CreateObject(), *meta, *labels, *ann;
	char key[256], suffix[16], *text;

	snprintf(suffix, sizeof(suffix), "-n%05u", i);
	suffix_uuids(topo, suffix);
	text = cJSON_PrintUnformatted(topo);
	cJSON_Delete(topo);
	cJSON_AddStringToObject(node, "apiVersion", "v1");
	cJSON_AddStringToObject(node, "kind", "Node");
	meta = cJSON_AddObjectToObject(node, "metadata");
	cJSON_AddStringToObject(meta, "name", c->names[i]);
	labels = cJSON_AddObjectToObject(meta, "labels");
	cJSON_AddStringToObject(labels, "kubernetes.io/hostname", c->names[i]);
	ann = cJSON_AddObjectToObject(meta, "annotations");
	snprintf(key, sizeof(key), "%s/topology", opts->annotation_prefix);
	cJSON_AddStringToObject(ann, key, text ? text : "");
	free(text);
	return node;
}

static int app_start(ft_app_t *app, const cluster_t *c, const run_config_t *run)
{
	memset(app, 0, sizeof(*app));
	if (ft_config_init(&app->cfg) < 0 ||
	    ft_config_set(&app->cfg, "logLevel", "error") < 0 ||
	    ft_config_set(&app->cfg, "policy", run->policy) < 0 ||
	    (!run->fgd &&
	     ft_config_set(&app->cfg, "fragmentationWindow", "0") < 0) ||
	    ft_app_init(app) < 0) {
		fprintf(stderr, "policy-table: app: %s\n", ft_error_last());
		return -1;
	}
	ft_state_replace_begin(app->state, FT_KIND_NODE);
	ft_state_replace_begin(app->state, FT_KIND_POD);
	for (unsigned i = 0; i < c->n; i++) {
		cJSON *node = node_object(c, i, &app->opts);
		ft_state_apply_node(app->state, node);
		cJSON_Delete(node);
	}
	ft_state_replace_end(app->state, FT_KIND_NODE);
	ft_state_replace_end(app->state, FT_KIND_POD);
	atomic_store(&app->snapshot_loaded, true);
	return 0;
}

static void add_annotation(cJSON *ann, const ft_codec_options_t *opts,
			   const char *what, const char *value)
{
	char key[256];

	if (!value)
		return;
	snprintf(key, sizeof(key), "%s/%s", opts->annotation_prefix, what);
	cJSON_AddStringToObject(ann, key, value);
}

static cJSON *pod_object(const shape_t *s, unsigned id,
			 const ft_codec_options_t *opts)
{
	cJSON *pod = cJSON_CreateObject(), *meta, *ann, *spec, *list, *ctr;
	cJSON *res, *req = cJSON_CreateObject();
	char name[64], uid[64], q[16], key[256];

	snprintf(name, sizeof(name), "pt-%s-%06u", s->name, id);
	snprintf(uid, sizeof(uid), "pt-uid-%06u", id);
	cJSON_AddStringToObject(pod, "apiVersion", "v1");
	cJSON_AddStringToObject(pod, "kind", "Pod");
	meta = cJSON_AddObjectToObject(pod, "metadata");
	cJSON_AddStringToObject(meta, "name", name);
	cJSON_AddStringToObject(meta, "namespace", "default");
	cJSON_AddStringToObject(meta, "uid", uid);
	ann = cJSON_AddObjectToObject(meta, "annotations");
	add_annotation(ann, opts, "affinity", s->affinity);
	add_annotation(ann, opts, "affinity-mode", s->mode);
	add_annotation(ann, opts, "gpu-fraction", s->fraction);
	cJSON_AddStringToObject(req, "cpu", s->cpu);
	cJSON_AddStringToObject(req, "memory", s->mem);
	snprintf(q, sizeof(q), "%u", s->gpus);
	if (s->gpus) {
		snprintf(key, sizeof(key), "%s%s", opts->gpu_resource,
			 s->shared ? ".shared" : "");
		cJSON_AddStringToObject(req, key, q);
	}
	if (s->mig) {
		snprintf(key, sizeof(key), "%s%s", opts->mig_resource_prefix,
			 s->mig);
		cJSON_AddStringToObject(req, key, "1");
	}
	spec = cJSON_AddObjectToObject(pod, "spec");
	cJSON_AddStringToObject(spec, "schedulerName", "default-scheduler");
	cJSON_AddNumberToObject(spec, "priority", 0);
	list = cJSON_AddArrayToObject(spec, "containers");
	ctr = cJSON_CreateObject();
	cJSON_AddStringToObject(ctr, "name", "main");
	cJSON_AddStringToObject(ctr, "image", "registry.example/llm:1");
	res = cJSON_AddObjectToObject(ctr, "resources");
	if (s->limits)
		cJSON_AddItemToObject(res, "limits",
				      cJSON_Duplicate(req, true));
	cJSON_AddItemToObject(res, "requests", req);
	cJSON_AddItemToArray(list, ctr);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(pod, "status"), "phase",
				"Pending");
	return pod;
}

/* Call a route handler with `root` as the body (freed); the reply parsed. */
static cJSON *call(ft_app_t *app, ft_http_handler_fn fn, const char *path,
		   cJSON *root)
{
	char *body = cJSON_PrintUnformatted(root);
	ft_http_request_t req = {.method = "POST",
				 .path = path,
				 .content_type = "application/json",
				 .body = body,
				 .body_len = body ? strlen(body) : 0};
	ft_http_response_t res = {.status = 200};
	cJSON *reply = NULL;

	cJSON_Delete(root);
	if (!body)
		return NULL;
	fn(&res, &req, app);
	if (res.status == 200 && res.body)
		reply = cJSON_ParseWithLength(
		    res.body, res.body_len ? res.body_len : strlen(res.body));
	else
		fprintf(stderr, "policy-table: %s: HTTP %d: %.300s\n", path,
			res.status, res.body ? res.body : "");
	free(res.body);
	free(body);
	return reply;
}

static cJSON *args_with(const cJSON *pod, cJSON *names)
{
	cJSON *root = cJSON_CreateObject();

	cJSON_AddItemToObject(root, "Pod", cJSON_Duplicate(pod, true));
	cJSON_AddItemToObject(root, "NodeNames", names);
	cJSON_AddNullToObject(root, "Nodes");
	return root;
}

static const char *pod_string(const cJSON *pod, const char *what)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");

	return cJSON_GetObjectItemCaseSensitive(meta, what)->valuestring;
}

/* The names of `names` that pass filter for `pod` (NULL on error). */
static cJSON *filter(ft_app_t *app, const cJSON *pod, cJSON *names)
{
	cJSON *reply =
	    call(app, ft_app_filter, "/filter", args_with(pod, names));
	cJSON *passed =
	    cJSON_DetachItemFromObjectCaseSensitive(reply, "NodeNames");

	cJSON_Delete(reply);
	return passed;
}

static int node_index(const cluster_t *c, const char *name)
{
	for (unsigned i = 0; i < c->n; i++)
		if (strcmp(c->names[i], name) == 0)
			return (int)i;
	return -1;
}

/* The node kube-scheduler would pick, as an index into c->names; -1 when
 * none. */
static int schedule(ft_app_t *app, const cluster_t *c, const cJSON *pod)
{
	cJSON *names = cJSON_CreateArray(), *reply, *passed, *host;
	const char *best = NULL;
	double best_score = -1;
	int index;

	for (unsigned i = 0; i < c->n; i++)
		cJSON_AddItemToArray(names, cJSON_CreateString(c->names[i]));
	passed = filter(app, pod, names);
	if (!cJSON_IsArray(passed) || cJSON_GetArraySize(passed) == 0) {
		cJSON_Delete(passed);
		return -1;
	}
	reply =
	    call(app, ft_app_prioritize, "/prioritize", args_with(pod, passed));
	cJSON_ArrayForEach (host, reply) {
		const cJSON *h = cJSON_GetObjectItemCaseSensitive(host, "Host");
		const cJSON *s =
		    cJSON_GetObjectItemCaseSensitive(host, "Score");
		if (!cJSON_IsString(h) || !cJSON_IsNumber(s))
			continue;
		if (!best || s->valuedouble > best_score ||
		    (s->valuedouble == best_score &&
		     strcmp(h->valuestring, best) < 0)) {
			best = h->valuestring;
			best_score = s->valuedouble;
		}
	}
	index = best ? node_index(c, best) : -1;
	cJSON_Delete(reply);
	return index;
}

static bool bind_to(ft_app_t *app, const cJSON *pod, const char *node)
{
	cJSON *root = cJSON_CreateObject(), *reply;
	const cJSON *err;
	bool ok;

	cJSON_AddStringToObject(root, "PodName", pod_string(pod, "name"));
	cJSON_AddStringToObject(root, "PodNamespace", "default");
	cJSON_AddStringToObject(root, "PodUID", pod_string(pod, "uid"));
	cJSON_AddStringToObject(root, "Node", node);
	reply = call(app, ft_app_bind, "/bind", root);
	err = cJSON_GetObjectItemCaseSensitive(reply, "Error");
	ok = reply && (!cJSON_IsString(err) || !err->valuestring[0]);
	if (!ok)
		fprintf(stderr, "policy-table: bind to %s: %s\n", node,
			cJSON_IsString(err) ? err->valuestring : "no reply");
	cJSON_Delete(reply);
	return ok;
}

/* Schedule and bind `pod`: its node's index, or -1 when filter passes no
 * node or bind refuses (counted in *bind_failed). */
static int place(ft_app_t *app, const cluster_t *c, const cJSON *pod,
		 unsigned *bind_failed)
{
	int node = schedule(app, c, pod);

	if (node >= 0 && !bind_to(app, pod, c->names[node])) {
		(*bind_failed)++;
		node = -1;
	}
	return node;
}

static unsigned pick_shape(uint64_t *rng)
{
	unsigned total = 0, r;

	for (unsigned s = 0; s < SHAPES; s++)
		total += shapes[s].weight;
	r = (unsigned)(rng_next(rng) % total);
	for (unsigned s = 0; s < SHAPES; s++) {
		if (r < shapes[s].weight)
			return s;
		r -= shapes[s].weight;
	}
	return 0;
}

/* Whole GPUs, NVLink pairs and groups of `node`, for kind `k`. */
static void count_gpus(tally_t *t, unsigned k, const ft_node_t *node)
{
	const ft_topology_t *topo = node->topology;
	uint16_t free_gpus = ft_node_free_gpus(node) & ~topo->shared_gpus;
	bool pair = false, group = false;

	t->fig[FIG_GPUS][k] +=
	    (unsigned)__builtin_popcount(topo->whole_gpus & ~topo->shared_gpus);
	t->fig[FIG_GPUS_FREE][k] += (unsigned)__builtin_popcount(free_gpus);
	for (unsigned g = 0; g < topo->n_gpus; g++)
		if ((free_gpus >> g & 1) &&
		    (topo->gpus[g].nvlink_peers & free_gpus & ~(1u << g)))
			pair = true;
	for (unsigned d = topo->level_first[FT_LEVEL_NVLINK];
	     d < topo->level_first[FT_LEVEL_NVLINK + 1]; d++)
		if (__builtin_popcount(topo->domains[d].gpus & free_gpus) >=
		    GROUP_NVLINK)
			group = true;
	t->fig[FIG_PAIR_FREE][k] += pair;
	t->fig[FIG_GROUP_FREE][k] += group;
}

/* MIG instances and shared replicas of `node`, for kind `k`. */
static void count_units(tally_t *t, unsigned k, const ft_node_t *node)
{
	const ft_topology_t *topo = node->topology;

	for (unsigned g = 0; g < topo->n_gpus; g++) {
		if (!(topo->shared_gpus >> g & 1))
			continue;
		t->fig[FIG_REPLICAS][k] += topo->gpus[g].replicas;
		t->fig[FIG_REPLICAS_FREE][k] +=
		    topo->gpus[g].replicas - node->replicas_used[g];
	}
	t->fig[FIG_MIG][k] += topo->n_mig;
	for (unsigned m = 0; m < topo->n_mig; m++)
		t->fig[FIG_MIG_FREE][k] += !ft_node_mig_used(node, m);
}

static void count_free(tally_t *t, ft_app_t *app, const cluster_t *c)
{
	ft_snapshot_t *snap = ft_state_snapshot(app->state);

	for (unsigned i = 0; i < snap->n_nodes; i++) {
		const ft_node_t *node = snap->nodes[i];
		int index = node_index(c, node->name);
		unsigned k = index < 0 ? 0 : (unsigned)index % c->n_kinds;
		t->fig[FIG_NODES][k]++;
		if (!node->topology)
			continue;
		count_gpus(t, k, node);
		count_units(t, k, node);
	}
	ft_snapshot_unref(snap);
}

static void measure(measure_t *out, ft_app_t *app, const ft_mix_t *mix)
{
	ft_snapshot_t *snap = ft_state_snapshot(app->state);

	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < snap->n_nodes; i++) {
		ft_frag_t f;
		ft_frag_measure(&f, snap->nodes[i], mix);
		out->holdings += snap->nodes[i]->n_holdings;
		out->free_milli += f.free_milli;
		out->fragmentation_milli += f.fragmentation_milli;
		out->mig_slices_free += f.mig_slices_free;
		out->mig_slices_stranded += f.mig_slices_stranded;
	}
	ft_snapshot_unref(snap);
}

static bool measure_equal(const measure_t *a, const measure_t *b)
{
	return a->holdings == b->holdings && a->free_milli == b->free_milli &&
	       a->fragmentation_milli == b->fragmentation_milli &&
	       a->mig_slices_free == b->mig_slices_free &&
	       a->mig_slices_stranded == b->mig_slices_stranded;
}

/* Count the placed `pod` in `mix` with the demand the state decoded. */
static int mix_add_pod(ft_mix_t *mix, ft_app_t *app, const cJSON *pod)
{
	ft_pod_t p;

	if (ft_state_find_pod(app->state, pod_string(pod, "uid"), &p) < 0) {
		fprintf(stderr, "policy-table: placed pod %s: %s\n",
			pod_string(pod, "name"), ft_error_last());
		return -1;
	}
	ft_mix_add(mix, &p.demand, &p.rules);
	ft_pod_dispose(&p);
	return 0;
}

/* The ring and counts decide every figure of a mix; classes follow from
 * the same pods added in the same order. */
static bool mix_equal(const ft_mix_t *a, const ft_mix_t *b)
{
	return a->window == b->window && a->n_classes == b->n_classes &&
	       a->total == b->total && a->head == b->head &&
	       memcmp(a->counts, b->counts, sizeof(a->counts)) == 0 &&
	       memcmp(a->ring, b->ring, sizeof(a->ring)) == 0;
}

/* A run's scorer must have counted exactly the pods it placed. */
static int check_mix(ft_app_t *app, const bench_t *b, const run_config_t *run)
{
	static ft_mix_t scored;

	ft_state_mix(app->state, &scored);
	if (mix_equal(&scored, &b->mix))
		return 0;
	fprintf(
	    stderr,
	    "policy-table: %s: the scorer's mix holds %u pods, %u placed in the window\n",
	    run->label, scored.total, b->mix.total);
	return -1;
}

/* The fixed sequence: fills b->node_of and b->mix, the tally's counts. */
static int run_sequence(tally_t *t, bench_t *b, const run_config_t *run)
{
	double start = now_us();
	ft_app_t app;
	int rc = 0;

	if (app_start(&app, &b->c, run) < 0)
		return -1;
	ft_mix_init(&b->mix, b->window);
	for (unsigned id = 0; id < b->o.pods && rc == 0; id++) {
		unsigned s = b->sequence[id];
		cJSON *pod = pod_object(&shapes[s], id, &app.opts);
		int node = place(&app, &b->c, pod, &t->bind_failed);
		t->asked[s]++;
		b->node_of[id] = node;
		if (node < 0)
			t->unplaced[s]++;
		else {
			t->placed[s]++;
			rc = mix_add_pod(&b->mix, &app, pod);
		}
		cJSON_Delete(pod);
	}
	count_free(t, &app, &b->c);
	measure(&t->end, &app, &b->mix);
	if (rc == 0 && run->fgd)
		rc = check_mix(&app, b, run);
	ft_app_dispose(&app);
	t->sequence_s = (now_us() - start) / 1e6;
	return rc;
}

/* Bind every pod of the sequence to the node the run chose, in order;
 * filter on that node alone first, so the state knows the pod. */
static int replay(ft_app_t *app, const bench_t *b)
{
	int rc = 0;

	for (unsigned id = 0; id < b->o.pods && rc == 0; id++) {
		const char *node;
		cJSON *pod, *names, *passed;
		if (b->node_of[id] < 0)
			continue;
		node = b->c.names[b->node_of[id]];
		pod = pod_object(&shapes[b->sequence[id]], id, &app->opts);
		names = cJSON_CreateArray();
		cJSON_AddItemToArray(names, cJSON_CreateString(node));
		passed = filter(app, pod, names);
		if (cJSON_GetArraySize(passed) != 1 ||
		    !bind_to(app, pod, node)) {
			fprintf(
			    stderr,
			    "policy-table: replay: pod %u no longer fits %s\n",
			    id, node);
			rc = -1;
		}
		cJSON_Delete(passed);
		cJSON_Delete(pod);
	}
	return rc;
}

/* Pods of shape `s` placed one after another until one is not, counted
 * per node kind into `out`. */
static int probe(unsigned *out, ft_app_t *app, const bench_t *b,
		 const shape_t *s, unsigned *bind_failed)
{
	/* Every pod holds a GPU, a MIG instance or a replica at least. */
	unsigned limit = b->c.n * FT_GPU_MAX * FT_REPLICAS_MAX, n = 0;
	int node = 0;

	while (node >= 0 && n <= limit) {
		cJSON *pod = pod_object(s, b->o.pods + n, &app->opts);
		node = place(app, &b->c, pod, bind_failed);
		if (node >= 0) {
			out[(unsigned)node % b->c.n_kinds]++;
			n++;
		}
		cJSON_Delete(pod);
	}
	if (n <= limit)
		return 0;
	fprintf(stderr, "policy-table: probe %s: over %u pods placed\n",
		s->name, limit);
	return -1;
}

/* Each probe from its own copy of the final state of the sequence. */
static int run_probes(tally_t *t, const bench_t *b, const run_config_t *run)
{
	double start = now_us();
	int rc = 0;

	for (unsigned p = 0; p < PROBES && rc == 0; p++) {
		ft_app_t app;
		measure_t copy;
		if (app_start(&app, &b->c, run) < 0)
			return -1;
		if ((rc = replay(&app, b)) == 0) {
			measure(&copy, &app, &b->mix);
			if (!measure_equal(&copy, &t->end)) {
				fprintf(
				    stderr,
				    "policy-table: %s: the copy for probe %s differs from the final state\n",
				    run->label, probes[p]->name);
				rc = -1;
			}
		}
		if (rc == 0)
			rc = probe(t->headroom[p], &app, b, probes[p],
				   &t->bind_failed);
		ft_app_dispose(&app);
	}
	t->probes_s = (now_us() - start) / 1e6;
	return rc;
}

/* placed + unplaced = asked per shape, the asked sum to the pods, every
 * placed pod is a holding. */
static int check(const tally_t *t, const options_t *o, const char *label)
{
	unsigned asked = 0, placed = 0;
	int rc = 0;

	for (unsigned s = 0; s < SHAPES; s++) {
		asked += t->asked[s];
		placed += t->placed[s];
		if (t->placed[s] + t->unplaced[s] != t->asked[s]) {
			fprintf(
			    stderr,
			    "policy-table: %s: %s: %u placed + %u unplaced != %u\n",
			    label, shapes[s].name, t->placed[s], t->unplaced[s],
			    t->asked[s]);
			rc = -1;
		}
	}
	if (asked != o->pods || placed != t->end.holdings) {
		fprintf(
		    stderr,
		    "policy-table: %s: %u pods asked of %u, %u placed but %u holdings\n",
		    label, asked, o->pods, placed, t->end.holdings);
		rc = -1;
	}
	return rc;
}

static void print_row(const char *label, char cells[RUNS][CELL_LEN])
{
	printf("| %-40s |", label);
	for (unsigned r = 0; r < RUNS; r++)
		printf(" %15s |", cells[r]);
	printf("\n");
}

static void row_ratio(const char *label, const unsigned *a, const unsigned *b)
{
	char cells[RUNS][CELL_LEN];

	for (unsigned r = 0; r < RUNS; r++)
		snprintf(cells[r], CELL_LEN, "%u / %u", a[r], b[r]);
	print_row(label, cells);
}

/* A row per node kind with whole GPUs: figure `num` of figure `den`. */
static void kind_rows(const tally_t *t, const cluster_t *c, const char *what,
		      unsigned num, unsigned den)
{
	unsigned a[RUNS], b[RUNS];
	char label[64];

	for (unsigned k = 0; k < c->n_kinds; k++) {
		if (!t[0].fig[FIG_GPUS][k])
			continue;
		for (unsigned r = 0; r < RUNS; r++) {
			a[r] = t[r].fig[num][k];
			b[r] = t[r].fig[den][k];
		}
		snprintf(label, sizeof(label), "%s: %s", what,
			 all_kinds[c->kinds[k]].label);
		row_ratio(label, a, b);
	}
}

/* Figure `num` of figure `den`, summed over all node kinds. */
static void sum_row(const tally_t *t, const cluster_t *c, const char *label,
		    unsigned num, unsigned den)
{
	unsigned a[RUNS] = {0}, b[RUNS] = {0};

	for (unsigned r = 0; r < RUNS; r++)
		for (unsigned k = 0; k < c->n_kinds; k++) {
			a[r] += t[r].fig[num][k];
			b[r] += t[r].fig[den][k];
		}
	row_ratio(label, a, b);
}

static void print_header(const tally_t *t, const bench_t *b)
{
	printf("policy table: %u nodes (", b->c.n);
	for (unsigned k = 0; k < b->c.n_kinds; k++)
		printf("%s%u x %s", k ? ", " : "", t[0].fig[FIG_NODES][k],
		       all_kinds[b->c.kinds[k]].label);
	printf("), %u pods, seed %llu; +FGD: fragmentationWindow %u\n",
	       b->o.pods, (unsigned long long)b->o.seed, b->window);
	printf("seconds per run, sequence + headroom probes:");
	for (unsigned r = 0; r < RUNS; r++)
		printf("%s %s %.2f + %.2f", r ? "," : "", runs[r].label,
		       t[r].sequence_s, t[r].probes_s);
	printf("\n\n| %-40s |", "");
	for (unsigned r = 0; r < RUNS; r++)
		printf(" %15s |", runs[r].label);
	printf("\n|------------------------------------------|");
	for (unsigned r = 0; r < RUNS; r++)
		printf("----------------:|");
	printf("\n");
}

static void print_placed(const tally_t *t)
{
	unsigned a[RUNS], b[RUNS], sa[RUNS] = {0}, sb[RUNS] = {0};
	char label[64];

	for (unsigned s = 0; s < SHAPES; s++) {
		for (unsigned r = 0; r < RUNS; r++) {
			a[r] = t[r].placed[s];
			b[r] = t[r].asked[s];
			sa[r] += a[r];
			sb[r] += b[r];
		}
		snprintf(label, sizeof(label), "placed / asked: %s",
			 shapes[s].name);
		row_ratio(label, a, b);
	}
	row_ratio("placed / asked: all", sa, sb);
}

/* Probe `p`'s pods per node kind that took any, then all. */
static void headroom_rows(const tally_t *t, const cluster_t *c, unsigned p)
{
	char cells[RUNS][CELL_LEN], label[64];
	unsigned all[RUNS] = {0};

	for (unsigned k = 0; k < c->n_kinds; k++) {
		bool any = false;
		for (unsigned r = 0; r < RUNS; r++) {
			snprintf(cells[r], CELL_LEN, "%u", t[r].headroom[p][k]);
			all[r] += t[r].headroom[p][k];
			any = any || t[r].headroom[p][k];
		}
		snprintf(label, sizeof(label), "headroom: %s: %s",
			 probes[p]->name, all_kinds[c->kinds[k]].label);
		if (any)
			print_row(label, cells);
	}
	for (unsigned r = 0; r < RUNS; r++)
		snprintf(cells[r], CELL_LEN, "%u", all[r]);
	snprintf(label, sizeof(label), "headroom: %s: all", probes[p]->name);
	print_row(label, cells);
}

static void print_fragmentation(const tally_t *t)
{
	char cells[RUNS][CELL_LEN];
	unsigned a[RUNS], b[RUNS];

	for (unsigned r = 0; r < RUNS; r++)
		snprintf(cells[r], CELL_LEN, "%.1f / %.1f",
			 (double)t[r].end.fragmentation_milli / FT_MILLI_GPU,
			 (double)t[r].end.free_milli / FT_MILLI_GPU);
	print_row("FGD fragmentation / free, GPUs", cells);
	for (unsigned r = 0; r < RUNS; r++) {
		a[r] = t[r].end.mig_slices_stranded;
		b[r] = t[r].end.mig_slices_free;
	}
	row_ratio("MIG slices stranded / free", a, b);
}

static void print_table(const tally_t *t, const bench_t *b)
{
	const cluster_t *c = &b->c;
	bool refused = false;

	print_header(t, b);
	print_placed(t);
	kind_rows(t, c, "whole GPUs free", FIG_GPUS_FREE, FIG_GPUS);
	sum_row(t, c, "whole GPUs free: all", FIG_GPUS_FREE, FIG_GPUS);
	kind_rows(t, c, "nodes with free NVLink pair", FIG_PAIR_FREE,
		  FIG_NODES);
	kind_rows(t, c, "nodes with free NVLink 4", FIG_GROUP_FREE, FIG_NODES);
	sum_row(t, c, "MIG instances free", FIG_MIG_FREE, FIG_MIG);
	sum_row(t, c, "shared replicas free", FIG_REPLICAS_FREE, FIG_REPLICAS);
	print_fragmentation(t);
	for (unsigned p = 0; p < PROBES; p++)
		headroom_rows(t, c, p);
	for (unsigned r = 0; r < RUNS; r++) {
		if (!t[r].bind_failed)
			continue;
		printf("%s %s %u",
		       refused ? "," : "\nbinds refused:", runs[r].label,
		       t[r].bind_failed);
		refused = true;
	}
	if (refused)
		printf("\n");
}

static int parse_unsigned(unsigned *out, const char *text, unsigned max)
{
	char *end = NULL;
	unsigned long v;

	errno = 0;
	v = strtoul(text, &end, 10);
	if (text[0] < '0' || text[0] > '9' || *end || errno || v < 1 ||
	    v > max) {
		fprintf(stderr, "policy-table: \"%s\": expected 1..%u\n", text,
			max);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

static void usage(FILE *to)
{
	fprintf(
	    to,
	    "usage: flextopo-policy-table [--nodes N] [--pods P] [--seed S] [--source-dir DIR]\n"
	    "  --nodes N         cluster size (default 200)\n"
	    "  --pods P          pods in the sequence (default 1000)\n"
	    "  --seed S          seed of the pod sequence (default 1)\n"
	    "  --source-dir DIR  the tree holding api/examples/ (default %s)\n",
	    FT_SOURCE_DIR);
}

static int parse_options(options_t *o, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"nodes", required_argument, NULL, 'n'},
	    {"pods", required_argument, NULL, 'p'},
	    {"seed", required_argument, NULL, 's'},
	    {"source-dir", required_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	unsigned seed;
	int ch;

	*o = (options_t){200, 1000, 1, FT_SOURCE_DIR};
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		int rc = 0;
		switch (ch) {
		case 'n':
			rc = parse_unsigned(&o->nodes, optarg, 100000);
			break;
		case 'p':
			rc = parse_unsigned(&o->pods, optarg, 10000000);
			break;
		case 's':
			rc = parse_unsigned(&seed, optarg, 0xffffffffu);
			o->seed = seed;
			break;
		case 'd':
			o->source_dir = optarg;
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			rc = -1;
		}
		if (rc < 0) {
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return -1;
	}
	return 0;
}

/* The shapes of the pods, the scratch of the runs, the default window. */
static int bench_init(bench_t *b)
{
	ft_config_t cfg;
	uint64_t rng = b->o.seed;

	if (ft_config_init(&cfg) < 0) {
		fprintf(stderr, "policy-table: config: %s\n", ft_error_last());
		return -1;
	}
	b->window = cfg.fragmentation_window;
	ft_config_dispose(&cfg);
	b->sequence = calloc(b->o.pods, sizeof(*b->sequence));
	b->node_of = calloc(b->o.pods, sizeof(*b->node_of));
	if (!b->sequence || !b->node_of) {
		fprintf(stderr, "policy-table: out of memory\n");
		return -1;
	}
	for (unsigned id = 0; id < b->o.pods; id++)
		b->sequence[id] = pick_shape(&rng);
	return cluster_init(&b->c, &b->o);
}

static void bench_dispose(bench_t *b)
{
	cluster_dispose(&b->c);
	free(b->sequence);
	free(b->node_of);
}

int main(int argc, char **argv)
{
	static tally_t t[RUNS];
	static bench_t b;
	int rc = parse_options(&b.o, argc, argv);

	if (rc != 0)
		return rc > 0 ? 0 : 2;
	if (bench_init(&b) < 0) {
		bench_dispose(&b);
		return 1;
	}
	for (unsigned r = 0; r < RUNS && rc == 0; r++)
		if (run_sequence(&t[r], &b, &runs[r]) < 0 ||
		    check(&t[r], &b.o, runs[r].label) < 0 ||
		    run_probes(&t[r], &b, &runs[r]) < 0)
			rc = 1;
	if (rc == 0)
		print_table(t, &b);
	bench_dispose(&b);
	return rc;
}
