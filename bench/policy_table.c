/*
 * flextopo-policy-table: packed vs distributed on one synthetic cluster
 * (issue 4, "Done when"; bench/README.md).
 *
 * For each policy it builds an empty cluster of N nodes cycling through the
 * reference servers of api/examples/ (8x RTX 4090, 8x A100 NVSwitch, 8x H100
 * with MIG on three GPUs, and 4x H100 shared 10 ways when that example
 * exists), every uuid suffixed with the node index, loads it into a real
 * ft_app_t (snapshot mode, config "policy" set), then feeds the same fixed
 * pod sequence through the route handlers as kube-scheduler would: filter
 * over all node names, prioritize over the survivors, the highest score
 * (ties: the lowest name), bind (confirmed in memory in snapshot mode).
 * It prints, side by side, pods placed and not placed per shape, and at the
 * end whole GPUs left free per node kind, nodes with a free NVLink pair or
 * a free NVLink group of 4, MIG instances and shared replicas left free.
 * The counts are checked (placed + unplaced = pods, holdings = placed); no
 * figure is asserted.
 */
#include <flextopo/file.h>
#include <flextopo/app.h>
#include <flextopo/error.h>

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
#define POLICIES     2
#define NAME_LEN     40
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

static const char *const policies[POLICIES] = {"packed", "distributed"};

typedef struct options {
	unsigned nodes, pods;
	uint64_t seed;
	const char *source_dir;
} options_t;

typedef struct tally {
	unsigned asked[SHAPES], placed[SHAPES], unplaced[SHAPES];
	unsigned bind_failed;
	unsigned holdings;
	unsigned nodes[KINDS_MAX];
	unsigned gpus[KINDS_MAX], gpus_free[KINDS_MAX];
	unsigned pair_free[KINDS_MAX], group_free[KINDS_MAX];
	unsigned mig[KINDS_MAX], mig_free[KINDS_MAX];
	unsigned replicas[KINDS_MAX], replicas_free[KINDS_MAX];
} tally_t;

typedef struct cluster {
	cJSON *templates[KINDS_MAX];
	unsigned kinds[KINDS_MAX]; /* positions in all_kinds */
	unsigned n_kinds;
	char (*names)[NAME_LEN];
	unsigned n;
} cluster_t;

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

static int app_start(ft_app_t *app, const cluster_t *c, const char *policy)
{
	memset(app, 0, sizeof(*app));
	if (ft_config_init(&app->cfg) < 0 ||
	    ft_config_set(&app->cfg, "logLevel", "error") < 0 ||
	    ft_config_set(&app->cfg, "policy", policy) < 0 ||
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

/* The node kube-scheduler would pick, into `out`; false when none. */
static bool schedule(ft_app_t *app, const cluster_t *c, const cJSON *pod,
		     char *out, size_t size)
{
	cJSON *names = cJSON_CreateArray(), *reply, *passed, *host;
	const char *best = NULL;
	double best_score = -1;

	for (unsigned i = 0; i < c->n; i++)
		cJSON_AddItemToArray(names, cJSON_CreateString(c->names[i]));
	reply = call(app, ft_app_filter, "/filter", args_with(pod, names));
	passed = cJSON_DetachItemFromObjectCaseSensitive(reply, "NodeNames");
	cJSON_Delete(reply);
	if (!cJSON_IsArray(passed) || cJSON_GetArraySize(passed) == 0) {
		cJSON_Delete(passed);
		return false;
	}
	reply =
	    call(app, ft_app_prioritize, "/prioritize", args_with(pod, passed));
	cJSON_ArrayForEach(host, reply)
	{
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
	if (best)
		snprintf(out, size, "%s", best);
	cJSON_Delete(reply);
	return best != NULL;
}

static bool bind_to(ft_app_t *app, const cJSON *pod, const char *node)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	cJSON *root = cJSON_CreateObject(), *reply;
	const cJSON *err;
	bool ok;

	cJSON_AddStringToObject(
	    root, "PodName",
	    cJSON_GetObjectItemCaseSensitive(meta, "name")->valuestring);
	cJSON_AddStringToObject(root, "PodNamespace", "default");
	cJSON_AddStringToObject(
	    root, "PodUID",
	    cJSON_GetObjectItemCaseSensitive(meta, "uid")->valuestring);
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

static unsigned kind_of(const cluster_t *c, const char *name)
{
	for (unsigned i = 0; i < c->n; i++)
		if (strcmp(c->names[i], name) == 0)
			return i % c->n_kinds;
	return 0;
}

/* Whole GPUs, NVLink pairs and groups, MIG and replicas left free. */
static void count_free(tally_t *t, ft_app_t *app, const cluster_t *c)
{
	ft_snapshot_t *snap = ft_state_snapshot(app->state);

	for (unsigned i = 0; snap && i < snap->n_nodes; i++) {
		const ft_node_t *node = snap->nodes[i];
		const ft_topology_t *topo = node->topology;
		unsigned k = kind_of(c, node->name);
		uint16_t free_gpus = ft_node_free_gpus(node);
		bool pair = false, group = false;

		t->holdings += node->n_holdings;
		t->nodes[k]++;
		if (!topo)
			continue;
		t->gpus[k] += (unsigned)__builtin_popcount(topo->whole_gpus &
							   ~topo->shared_gpus);
		t->gpus_free[k] += (unsigned)__builtin_popcount(
		    free_gpus & ~topo->shared_gpus);
		for (unsigned g = 0; g < topo->n_gpus; g++) {
			if ((free_gpus >> g & 1) &&
			    (topo->gpus[g].nvlink_peers & free_gpus &
			     ~topo->shared_gpus & ~(1u << g)) &&
			    !(topo->shared_gpus >> g & 1))
				pair = true;
			if (topo->shared_gpus >> g & 1) {
				t->replicas[k] += topo->gpus[g].replicas;
				t->replicas_free[k] += topo->gpus[g].replicas -
						       node->replicas_used[g];
			}
		}
		for (unsigned d = topo->level_first[FT_LEVEL_NVLINK];
		     d < topo->level_first[FT_LEVEL_NVLINK + 1]; d++)
			if (__builtin_popcount(
				topo->domains[d].gpus & free_gpus &
				~topo->shared_gpus) >= GROUP_NVLINK)
				group = true;
		t->pair_free[k] += pair;
		t->group_free[k] += group;
		t->mig[k] += topo->n_mig;
		for (unsigned m = 0; m < topo->n_mig; m++)
			t->mig_free[k] += !ft_node_mig_used(node, m);
	}
	if (snap)
		ft_snapshot_unref(snap);
}

static int run_policy(tally_t *t, const cluster_t *c, const options_t *o,
		      const char *policy)
{
	ft_app_t app;
	uint64_t rng = o->seed;
	char node[NAME_LEN];

	memset(t, 0, sizeof(*t));
	if (app_start(&app, c, policy) < 0)
		return -1;
	for (unsigned id = 0; id < o->pods; id++) {
		unsigned s = pick_shape(&rng);
		cJSON *pod = pod_object(&shapes[s], id, &app.opts);
		t->asked[s]++;
		if (!schedule(&app, c, pod, node, sizeof(node)))
			t->unplaced[s]++;
		else if (!bind_to(&app, pod, node)) {
			t->unplaced[s]++;
			t->bind_failed++;
		} else
			t->placed[s]++;
		cJSON_Delete(pod);
	}
	count_free(t, &app, c);
	ft_app_dispose(&app);
	return 0;
}

/* placed + unplaced = asked per shape, the asked sum to the pods, every
 * placed pod is a holding. */
static int check(const tally_t *t, const options_t *o, const char *policy)
{
	unsigned asked = 0, placed = 0;
	int rc = 0;

	for (unsigned s = 0; s < SHAPES; s++) {
		asked += t->asked[s];
		placed += t->placed[s];
		if (t->placed[s] + t->unplaced[s] != t->asked[s]) {
			fprintf(stderr,
				"policy-table: %s: %s: %u placed + %u "
				"unplaced != %u\n",
				policy, shapes[s].name, t->placed[s],
				t->unplaced[s], t->asked[s]);
			rc = -1;
		}
	}
	if (asked != o->pods || placed != t->holdings) {
		fprintf(stderr,
			"policy-table: %s: %u pods asked of %u, %u placed "
			"but %u holdings\n",
			policy, asked, o->pods, placed, t->holdings);
		rc = -1;
	}
	return rc;
}

static void row(const char *label, const unsigned *a, const unsigned *b)
{
	char x[32], y[32];

	snprintf(x, sizeof(x), "%u / %u", a[0], a[1]);
	snprintf(y, sizeof(y), "%u / %u", b[0], b[1]);
	printf("| %-40s | %14s | %14s |\n", label, x, y);
}

static void print_table(const tally_t *t, const cluster_t *c,
			const options_t *o)
{
	const tally_t *p = &t[0], *d = &t[1];
	unsigned a[2], b[2], sum[4][2][2] = {{{0}}};
	char label[64];

	printf("policy table: %u nodes (", c->n);
	for (unsigned k = 0; k < c->n_kinds; k++)
		printf("%s%u x %s", k ? ", " : "", p->nodes[k],
		       all_kinds[c->kinds[k]].label);
	printf("), %u pods, seed %llu\n\n", o->pods,
	       (unsigned long long)o->seed);
	printf("| %-40s | %14s | %14s |\n", "", "packed", "distributed");
	printf("|%.42s|%.16s|%.16s|\n",
	       "------------------------------------------",
	       "---------------:", "---------------:");
	for (unsigned s = 0; s < SHAPES; s++) {
		snprintf(label, sizeof(label), "placed / asked: %s",
			 shapes[s].name);
		a[0] = p->placed[s], a[1] = p->asked[s];
		b[0] = d->placed[s], b[1] = d->asked[s];
		row(label, a, b);
		for (unsigned i = 0; i < 2; i++) {
			sum[0][0][i] += a[i];
			sum[0][1][i] += b[i];
		}
	}
	row("placed / asked: all", sum[0][0], sum[0][1]);
	for (unsigned k = 0; k < c->n_kinds; k++) {
		const char *l = all_kinds[c->kinds[k]].label;
		if (!p->gpus[k])
			continue;
		snprintf(label, sizeof(label), "whole GPUs free: %s", l);
		a[0] = p->gpus_free[k], a[1] = p->gpus[k];
		b[0] = d->gpus_free[k], b[1] = d->gpus[k];
		row(label, a, b);
		for (unsigned i = 0; i < 2; i++) {
			sum[1][0][i] += a[i];
			sum[1][1][i] += b[i];
		}
	}
	row("whole GPUs free: all", sum[1][0], sum[1][1]);
	for (unsigned k = 0; k < c->n_kinds; k++) {
		if (!p->gpus[k])
			continue;
		snprintf(label, sizeof(label),
			 "nodes with free NVLink pair: %s",
			 all_kinds[c->kinds[k]].label);
		a[0] = p->pair_free[k], a[1] = p->nodes[k];
		b[0] = d->pair_free[k], b[1] = d->nodes[k];
		row(label, a, b);
	}
	for (unsigned k = 0; k < c->n_kinds; k++) {
		if (!p->gpus[k])
			continue;
		snprintf(label, sizeof(label), "nodes with free NVLink 4: %s",
			 all_kinds[c->kinds[k]].label);
		a[0] = p->group_free[k], a[1] = p->nodes[k];
		b[0] = d->group_free[k], b[1] = d->nodes[k];
		row(label, a, b);
	}
	for (unsigned k = 0; k < c->n_kinds; k++) {
		for (unsigned i = 0; i < 2; i++) {
			sum[2][i][0] += i ? d->mig_free[k] : p->mig_free[k];
			sum[2][i][1] += i ? d->mig[k] : p->mig[k];
			sum[3][i][0] +=
			    i ? d->replicas_free[k] : p->replicas_free[k];
			sum[3][i][1] += i ? d->replicas[k] : p->replicas[k];
		}
	}
	row("MIG instances free", sum[2][0], sum[2][1]);
	row("shared replicas free", sum[3][0], sum[3][1]);
	if (p->bind_failed || d->bind_failed)
		printf("\nbinds refused: packed %u, distributed %u\n",
		       p->bind_failed, d->bind_failed);
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
	fprintf(to,
		"usage: flextopo-policy-table [--nodes N] [--pods P] "
		"[--seed S] [--source-dir DIR]\n"
		"  --nodes N         cluster size (default 200)\n"
		"  --pods P          pods in the sequence (default 1000)\n"
		"  --seed S          seed of the pod sequence (default 1)\n"
		"  --source-dir DIR  the tree holding api/examples/ "
		"(default %s)\n",
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

int main(int argc, char **argv)
{
	static tally_t t[POLICIES];
	options_t o;
	cluster_t c;
	int rc = parse_options(&o, argc, argv);

	if (rc != 0)
		return rc > 0 ? 0 : 2;
	if (cluster_init(&c, &o) < 0) {
		cluster_dispose(&c);
		return 1;
	}
	for (unsigned p = 0; p < POLICIES && rc == 0; p++)
		if (run_policy(&t[p], &c, &o, policies[p]) < 0 ||
		    check(&t[p], &o, policies[p]) < 0)
			rc = 1;
	if (rc == 0)
		print_table(t, &c, &o);
	cluster_dispose(&c);
	return rc;
}
