/*
 * The DRA arm (bench_dra.h). The cluster is built as JSON objects and
 * applied to a real ft_state_t, as the watch applies them; a timed event is
 * one ft_state_apply_* of an object the state already holds (a MODIFIED
 * event), which rebuilds that node and publishes a snapshot, as every
 * watch event does. The kinds are interleaved in a random order so that
 * none profits from a warm cache the others do not get.
 */
#include "bench_dra.h"

#include <flextopo/state.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#define GPUS	       8
#define CLAIMS_PER_DRA 4 /* each holds 2 GPUs */
#define PODS_PER_DP    4 /* each holds 2 GPUs */

enum {
	POD_DP = 0,
	POD_DRA = 1,
	CLAIM_RESERVE = 2,
	CLAIM_ALLOCATE = 3,
	SLICE_SAME = 4,
	SLICE_GENERATION = 5
};

static const char *const kind_names[DRA_KINDS] = {
    "Pod, device-plugin node", "Pod, DRA node",
    "Claim, reservedFor",      "Claim, (de)allocated",
    "Slice, no model change",  "Slice, new generation"};

typedef struct cluster {
	cJSON *topology; /* api/examples/a100-8x.json */
	cJSON *slice_root;
	cJSON *slice; /* its ResourceSlice, a template (borrowed) */
	unsigned n;
} cluster_t;

static cJSON *read_json(result_t *r, const char *dir, const char *rel)
{
	char path[1024];
	FILE *f;
	char *text = NULL;
	size_t len = 0;
	cJSON *out = NULL;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	if ((f = fopen(path, "r"))) {
		FILE *m = open_memstream(&text, &len);
		int c;
		while (m && (c = fgetc(f)) != EOF)
			fputc(c, m);
		if (m)
			fclose(m);
		fclose(f);
		out = text ? cJSON_Parse(text) : NULL;
	}
	free(text);
	if (!out)
		bench_fail(r, "%s: missing or not JSON", path);
	return out;
}

/* The first item of a List (or the object itself) of kind `kind`. */
static cJSON *first_of(cJSON *root, const char *kind)
{
	cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items"), *it;

	if (!items)
		return root;
	cJSON_ArrayForEach (it, items) {
		if (!strcmp(str_of(it, "kind"), kind))
			return it;
	}
	return NULL;
}

static void gpu_uuid(char *out, size_t size, unsigned node, unsigned g)
{
	snprintf(out, size, "GPU-bench-%u-%u", node, g);
}

static void node_name(char *out, size_t size, unsigned node)
{
	snprintf(out, size, "%s-%u", node % 2 ? "dp" : "dra", node);
}

/* The node's topology annotation: the A100 box with uuids of its own. */
static char *topology_of(const cluster_t *c, unsigned node)
{
	cJSON *t = cJSON_Duplicate(c->topology, true), *s, *n, *p, *g;
	char uuid[64], *out;

	cJSON_ArrayForEach (s, cJSON_GetObjectItem(t, "sockets"))
		cJSON_ArrayForEach (n, cJSON_GetObjectItem(s, "numaNodes"))
			cJSON_ArrayForEach (
			    p, cJSON_GetObjectItem(n, "pcieSwitches"))
				cJSON_ArrayForEach (
				    g, cJSON_GetObjectItem(p, "gpus")) {
					gpu_uuid(uuid, sizeof(uuid), node,
						 (unsigned)cJSON_GetObjectItem(
						     g, "index")
						     ->valueint);
					cJSON_ReplaceItemInObject(
					    g, "uuid",
					    cJSON_CreateString(uuid));
				}
	out = cJSON_PrintUnformatted(t);
	cJSON_Delete(t);
	return out;
}

static cJSON *node_object(const cluster_t *c, unsigned node)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
	cJSON *alloc = cJSON_CreateObject();
	char name[32], *topo = topology_of(c, node);

	node_name(name, sizeof(name), node);
	cJSON_AddStringToObject(meta, "name", name);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "annotations"),
				"flextopo.io/topology", topo);
	free(topo);
	cJSON_AddStringToObject(alloc, "cpu", "128");
	cJSON_AddStringToObject(alloc, "memory", "1Ti");
	if (node % 2)
		cJSON_AddStringToObject(alloc, "nvidia.com/gpu", "8");
	cJSON_AddItemToObject(cJSON_AddObjectToObject(o, "status"),
			      "allocatable", alloc);
	return o;
}

/* The slice of a DRA node: the fixture's, renamed, its uuids the node's,
 * of pool generation `generation`. */
static cJSON *slice_object(const cluster_t *c, unsigned node,
			   unsigned generation)
{
	cJSON *s = cJSON_Duplicate(c->slice, true), *spec, *d;
	char name[32], uuid[64], slice_name[64];

	node_name(name, sizeof(name), node);
	snprintf(slice_name, sizeof(slice_name), "%s-gpu.nvidia.com", name);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(s, "metadata"), "name",
				  cJSON_CreateString(slice_name));
	spec = cJSON_GetObjectItem(s, "spec");
	cJSON_ReplaceItemInObject(spec, "nodeName", cJSON_CreateString(name));
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(spec, "pool"), "name",
				  cJSON_CreateString(name));
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(spec, "pool"),
				  "generation", cJSON_CreateNumber(generation));
	cJSON_ArrayForEach (d, cJSON_GetObjectItem(spec, "devices")) {
		cJSON *attrs = cJSON_GetObjectItem(d, "attributes");
		unsigned minor = (unsigned)atoi(str_of(d, "name") + 4);
		gpu_uuid(uuid, sizeof(uuid), node, minor);
		cJSON_ReplaceItemInObject(cJSON_GetObjectItem(attrs, "uuid"),
					  "string", cJSON_CreateString(uuid));
	}
	return s;
}

/* Claim k of a DRA node: GPUs 2k and 2k+1, reserved for pod k there; the
 * shape of the template claim of test/fixtures/dra/claim-template-pod.json.
 * Not `allocated`: no status; not `reserved`: reservedFor empty. */
static cJSON *claim_object(unsigned node, unsigned k, unsigned version,
			   bool allocated, bool reserved)
{
	char name[32], text[2048];
	cJSON *o, *status;

	node_name(name, sizeof(name), node);
	snprintf(
	    text, sizeof(text),
	    "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
	    "\"metadata\":{\"name\":\"claim-%u-%u\",\"namespace\":\"bench\","
	    "\"uid\":\"claim-%u-%u\",\"resourceVersion\":\"%u\","
	    "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\","
	    "\"name\":\"pod-%u-%u\",\"uid\":\"pod-%u-%u\",\"controller\":true,"
	    "\"blockOwnerDeletion\":true}]},"
	    "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpus\","
	    "\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\","
	    "\"allocationMode\":\"ExactCount\",\"count\":2}}]}},"
	    "\"status\":{\"allocation\":{\"devices\":{\"results\":["
	    "{\"request\":\"gpus\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"%s\","
	    "\"device\":\"gpu-%u\"},{\"request\":\"gpus\",\"driver\":"
	    "\"gpu.nvidia.com\",\"pool\":\"%s\",\"device\":\"gpu-%u\"}]},"
	    "\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{"
	    "\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":"
	    "[\"%s\"]}]}]}},\"reservedFor\":[{\"resource\":\"pods\","
	    "\"name\":\"pod-%u-%u\",\"uid\":\"pod-%u-%u\"}]}}",
	    node, k, node, k, version, node, k, node, k, name, 2 * k, name,
	    2 * k + 1, name, node, k, node, k);
	o = cJSON_Parse(text);
	status = cJSON_GetObjectItem(o, "status");
	if (!allocated)
		cJSON_DeleteItemFromObject(o, "status");
	else if (!reserved)
		cJSON_ReplaceItemInObject(status, "reservedFor",
					  cJSON_CreateArray());
	return o;
}

/* Pod k of a node: 16 CPUs and 2 GPUs, bound; on a device-plugin node
 * through nvidia.com/gpu and its allocation, on a DRA node through claim
 * k. */
static cJSON *pod_object(unsigned node, unsigned k, unsigned version)
{
	char name[32], text[2048], alloc[512], u0[64], u1[64], statuses[160];
	bool dra = node % 2 == 0;

	node_name(name, sizeof(name), node);
	snprintf(statuses, sizeof(statuses),
		 ",\"resourceClaimStatuses\":[{\"name\":\"gpus\","
		 "\"resourceClaimName\":\"claim-%u-%u\"}]",
		 node, k);
	gpu_uuid(u0, sizeof(u0), node, 2 * k);
	gpu_uuid(u1, sizeof(u1), node, 2 * k + 1);
	snprintf(alloc, sizeof(alloc),
		 "{\\\"version\\\":1,\\\"node\\\":\\\"%s\\\",\\\"level\\\":"
		 "\\\"nvlink\\\",\\\"mode\\\":\\\"guaranteed\\\",\\\"gpus\\\":"
		 "[\\\"%s\\\",\\\"%s\\\"],\\\"cpuset\\\":\\\"\\\"}",
		 name, u0, u1);
	snprintf(
	    text, sizeof(text),
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
	    "\"pod-%u-%u\",\"namespace\":\"bench\",\"uid\":\"pod-%u-%u\","
	    "\"resourceVersion\":\"%u\"%s%s%s},\"spec\":{\"nodeName\":\"%s\","
	    "\"containers\":[{\"name\":\"main\",\"resources\":{\"requests\":"
	    "{\"cpu\":\"16\",\"memory\":\"64Gi\"%s},\"limits\":{%s}%s}}]%s},"
	    "\"status\":{\"phase\":\"Running\"%s}}",
	    node, k, node, k, version,
	    dra ? "" : ",\"annotations\":{\"flextopo.io/allocation\":\"",
	    dra ? "" : alloc, dra ? "" : "\"}", name,
	    dra ? "" : ",\"nvidia.com/gpu\":\"2\"",
	    dra ? "" : "\"nvidia.com/gpu\":\"2\"",
	    dra ? ",\"claims\":[{\"name\":\"gpus\"}]" : "",
	    dra ? ",\"resourceClaims\":[{\"name\":\"gpus\","
		  "\"resourceClaimTemplateName\":\"two\"}]"
		: "",
	    dra ? statuses : "");
	return cJSON_Parse(text);
}

/* ---- the cluster ----------------------------------------------------------
 */

typedef void (*apply_fn)(ft_state_t *, const cJSON *);

static void apply_owned(ft_state_t *st, apply_fn fn, cJSON *obj)
{
	fn(st, obj);
	cJSON_Delete(obj);
}

static int load(ft_state_t *st, const cluster_t *c, result_t *r)
{
	for (unsigned node = 0; node < c->n; node++) {
		apply_owned(st, ft_state_apply_node, node_object(c, node));
		if (node % 2 == 0)
			apply_owned(st, ft_state_apply_slice,
				    slice_object(c, node, 1));
		for (unsigned k = 0; k < CLAIMS_PER_DRA; k++) {
			if (node % 2 == 0)
				apply_owned(
				    st, ft_state_apply_claim,
				    claim_object(node, k, 1, true, true));
			apply_owned(st, ft_state_apply_pod,
				    pod_object(node, k, 1));
		}
	}
	return 0;
}

/* Every DRA node's GPUs are all held by its claims, every device-plugin
 * node's by its pods: the cluster loaded as built. */
static int check(ft_state_t *st, const cluster_t *c, result_t *r)
{
	ft_snapshot_t *snap = ft_state_snapshot(st);
	int rc = 0;

	for (unsigned node = 0; node < c->n && rc == 0; node++) {
		char name[32];
		const ft_node_t *n;
		node_name(name, sizeof(name), node);
		n = ft_snapshot_find(snap, name);
		if (!n || n->gpus_used != 0xff || n->dra != (node % 2 == 0) ||
		    n->conflicts || n->dra_error)
			rc = bench_fail(
			    r,
			    "DRA arm: node %s did not load as built (gpus 0x%x, dra %d, conflicts %u, %s)",
			    name, n ? n->gpus_used : 0, n ? n->dra : -1,
			    n ? n->conflicts : 0,
			    n && n->dra_error ? n->dra_error : "");
	}
	ft_snapshot_unref(snap);
	return rc;
}

/* The state of what the events toggle, per DRA node and claim. */
typedef struct toggles {
	bool *unreserved, *deallocated; /* per node x claim */
	unsigned *generation;		/* per node */
} toggles_t;

/*
 * One timed MODIFIED event of `kind` on a random node of its kind: the
 * same pod again; a claim losing or getting its reservedFor, or its
 * allocation; the same slice again; the slice with its pool's generation
 * bumped. A claim toggled back and forth ends the run as it began.
 */
static double one_event(ft_state_t *st, const cluster_t *c, unsigned kind,
			uint64_t *rng, unsigned version, toggles_t *t)
{
	unsigned half = c->n / 2, node = 2 * rng_below(rng, half);
	unsigned k = rng_below(rng, CLAIMS_PER_DRA),
		 at = node * CLAIMS_PER_DRA + k;
	cJSON *obj;
	apply_fn fn = ft_state_apply_claim;
	double t0;

	if (kind == POD_DP)
		node++;
	if (kind == CLAIM_RESERVE) {
		t->unreserved[at] = !t->unreserved[at];
		obj = claim_object(node, k, version, !t->deallocated[at],
				   !t->unreserved[at]);
	} else if (kind == CLAIM_ALLOCATE) {
		t->deallocated[at] = !t->deallocated[at];
		obj = claim_object(node, k, version, !t->deallocated[at],
				   !t->unreserved[at]);
	} else if (kind == SLICE_SAME || kind == SLICE_GENERATION) {
		t->generation[node] += kind == SLICE_GENERATION;
		obj = slice_object(c, node, t->generation[node]);
		fn = ft_state_apply_slice;
	} else {
		obj = pod_object(node, k, version);
		fn = ft_state_apply_pod;
	}
	t0 = now_us();
	fn(st, obj);
	t0 = now_us() - t0;
	cJSON_Delete(obj);
	return t0;
}

/* Every claim allocated and reserved again, as loaded. */
static void restore(ft_state_t *st, const cluster_t *c, toggles_t *t)
{
	for (unsigned node = 0; node < c->n; node += 2)
		for (unsigned k = 0; k < CLAIMS_PER_DRA; k++) {
			unsigned at = node * CLAIMS_PER_DRA + k;
			if (t->unreserved[at] || t->deallocated[at])
				apply_owned(
				    st, ft_state_apply_claim,
				    claim_object(node, k, 1, true, true));
			t->unreserved[at] = t->deallocated[at] = false;
		}
}

static int timed_rounds(dra_result_t *out, ft_state_t *st, const cluster_t *c,
			uint64_t seed)
{
	toggles_t t = {calloc(c->n * CLAIMS_PER_DRA, sizeof(bool)),
		       calloc(c->n * CLAIMS_PER_DRA, sizeof(bool)),
		       calloc(c->n, sizeof(unsigned))};
	unsigned n = out->events * DRA_KINDS,
		 *order = malloc(n * sizeof(*order));
	double *all[DRA_KINDS];
	uint64_t rng = seed;
	int rc = 0;

	for (unsigned k = 0; k < DRA_KINDS; k++)
		all[k] = malloc(out->events * DRA_ROUNDS * sizeof(double));
	for (unsigned k = 0; k < DRA_KINDS; k++)
		if (!all[k] || !order || !t.unreserved || !t.deallocated ||
		    !t.generation)
			rc = bench_fail(&out->r, "DRA arm: out of memory");
	for (unsigned i = 0; rc == 0 && i < c->n; i++)
		t.generation[i] = 1;
	for (unsigned round = 0; rc == 0 && round < DRA_ROUNDS; round++) {
		unsigned done[DRA_KINDS] = {0};
		double sum[DRA_KINDS] = {0};
		shuffle(order, n, &rng);
		for (unsigned i = 0; i < n; i++) {
			unsigned kind = order[i] % DRA_KINDS;
			double us = one_event(st, c, kind, &rng, 2 + round, &t);
			all[kind][round * out->events + done[kind]++] = us;
			sum[kind] += us;
		}
		for (unsigned k = 0; k < DRA_KINDS; k++)
			out->round_mean[k][round] = sum[k] / out->events;
	}
	for (unsigned k = 0; rc == 0 && k < DRA_KINDS; k++) {
		bench_row_fill(&out->t[k], all[k], out->events * DRA_ROUNDS);
		snprintf(out->t[k].verb, sizeof(out->t[k].verb), "%s",
			 kind_names[k]);
	}
	if (rc == 0)
		restore(st, c, &t);
	for (unsigned k = 0; k < DRA_KINDS; k++)
		free(all[k]);
	free(order);
	free(t.unreserved);
	free(t.deallocated);
	free(t.generation);
	return rc;
}

static void cluster_dispose(cluster_t *c)
{
	cJSON_Delete(c->topology);
	cJSON_Delete(c->slice_root);
	memset(c, 0, sizeof(*c));
}

int bench_dra_run(dra_result_t *out, const bench_options_t *o, unsigned nodes)
{
	static const ft_codec_options_t opts = {
	    .annotation_prefix = "flextopo.io",
	    .gpu_resource = "nvidia.com/gpu",
	    .mig_resource_prefix = "nvidia.com/mig-",
	    .default_mode = FT_MODE_GUARANTEED,
	    .dra_driver = "gpu.nvidia.com"};
	cluster_t c = {0};
	ft_state_t *st = NULL;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->nodes = nodes < 2 ? 2 : nodes;
	out->events = (unsigned)o->dra_events;
	c.n = out->nodes;
	if (!(c.topology = read_json(&out->r, o->source_dir,
				     "api/examples/a100-8x.json")) ||
	    !(c.slice_root =
		  read_json(&out->r, o->source_dir,
			    "test/fixtures/dra/resourceslice-a100-8x.json")) ||
	    !(c.slice = first_of(c.slice_root, "ResourceSlice")) ||
	    ft_state_new(&st, &opts) < 0) {
		rc = bench_fail(&out->r, "DRA arm: setup failed");
		goto cleanup;
	}
	if ((rc = load(st, &c, &out->r)) < 0 ||
	    (rc = check(st, &c, &out->r)) < 0 ||
	    (rc = timed_rounds(out, st, &c, o->seed)) < 0 ||
	    (rc = check(st, &c, &out->r)) < 0)
		goto cleanup;
	out->r.ok = true;
cleanup:
	ft_state_free(st);
	cluster_dispose(&c);
	out->r.done = true;
	return rc;
}

/* ---- report ---------------------------------------------------------------
 */

static void mean_sd(const double *v, unsigned n, double *mean, double *sd)
{
	double s = 0, q = 0;

	for (unsigned i = 0; i < n; i++)
		s += v[i];
	*mean = s / n;
	for (unsigned i = 0; i < n; i++)
		q += (v[i] - *mean) * (v[i] - *mean);
	*sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

void bench_dra_print(const dra_result_t *res, unsigned n)
{
	bool any = false;

	for (unsigned i = 0; i < n; i++)
		any |= res[i].r.ok;
	if (!any)
		return;
	printf("DRA arm: one watch event, apply to published snapshot, half "
	       "of the nodes DRA nodes (8x A100, 4 claims of 2 GPUs each),\n"
	       "%d rounds; mean +- sd of the round means, p50 and p99 of all "
	       "events, and the mean against a Pod event on a\n"
	       "device-plugin node (the cost of an event before DRA)\n\n",
	       DRA_ROUNDS);
	printf("%7s  %-24s %8s %14s %9s %9s %8s\n", "nodes", "event", "events",
	       "mean_us", "p50_us", "p99_us", "x pod");
	for (unsigned i = 0; i < n; i++) {
		double base, base_sd;
		if (!res[i].r.ok)
			continue;
		mean_sd(res[i].round_mean[POD_DP], DRA_ROUNDS, &base, &base_sd);
		for (unsigned k = 0; k < DRA_KINDS; k++) {
			double m, sd;
			char cell[32];
			mean_sd(res[i].round_mean[k], DRA_ROUNDS, &m, &sd);
			snprintf(cell, sizeof(cell), "%.1f +- %.1f", m, sd);
			printf("%7u  %-24s %8u %14s %9.1f %9.1f %8.2f\n",
			       res[i].nodes, kind_names[k],
			       res[i].events * DRA_ROUNDS, cell,
			       res[i].t[k].p50, res[i].t[k].p99, m / base);
		}
	}
	printf("\n");
}
