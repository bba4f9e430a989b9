/*
 * Kubernetes v1 Pod and Node objects -> ft_pod_t and ft_node_source_t.
 *
 * Pod requests follow kube-scheduler's NodeResourcesFit
 * (pkg/scheduler/framework/plugins/noderesources/fit.go,
 * computePodResourceRequest): the sum over app containers and restartable
 * (sidecar) init containers, or the largest regular init container plus the
 * sidecars started before it, whichever is larger, plus spec.overhead. The QoS
 * class follows pkg/apis/core/v1/helper/qos: Guaranteed when every container
 * sets CPU and memory limits equal to its requests.
 */
#include <flextopo/codec.h>
#include <flextopo/error.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *str_at(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *annotation(const cJSON *obj, const char *prefix,
			      const char *name)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *ann =
	    cJSON_GetObjectItemCaseSensitive(meta, "annotations");
	char key[256];

	snprintf(key, sizeof(key), "%s/%s", prefix, name);
	return str_at(ann, key);
}

/* Requests of one container, as the scheduler counts them. */
typedef struct {
	int64_t cpu_milli;
	uint64_t memory_mib;
	uint64_t gpus;
	uint64_t mig;
	bool guaranteed;
	int64_t pinned; /* integer CPUs of containers (static CPU manager) */
} requests_t;

typedef struct {
	const ft_codec_options_t *opts;
	char mig_profile[FT_PROFILE_MAX];
	char error[256];
} decode_ctx_t;

static void note_error(decode_ctx_t *ctx, const char *fmt, const char *a,
		       const char *b)
{
	if (!ctx->error[0])
		snprintf(ctx->error, sizeof(ctx->error), fmt, a, b);
}

/*
 * The GPU resource itself, or its shared name "<gpu resource>.shared" (the
 * device plugin's renameByDefault for time-sliced and MPS replicas).
 */
static bool is_gpu_resource(const ft_codec_options_t *opts, const char *name)
{
	size_t n = strlen(opts->gpu_resource);

	return strncmp(name, opts->gpu_resource, n) == 0 &&
	       (name[n] == '\0' || strcmp(name + n, ".shared") == 0);
}

/* Sums that stop at the type's limit: a request list may name a resource
 * twice, and quantities reach 9e18 milli. */
static void add_i64(int64_t *acc, int64_t v)
{
	if (__builtin_add_overflow(*acc, v, acc))
		*acc = v > 0 ? INT64_MAX : INT64_MIN;
}

static void add_u64(uint64_t *acc, uint64_t v)
{
	if (__builtin_add_overflow(*acc, v, acc))
		*acc = UINT64_MAX;
}

static void add_resource(requests_t *r, decode_ctx_t *ctx, const char *name,
			 const char *value)
{
	size_t plen = strlen(ctx->opts->mig_resource_prefix);
	int64_t milli = 0;
	uint64_t mib = 0;

	if (strcmp(name, "cpu") == 0) {
		if (ft_quantity_milli(&milli, value) == 0)
			add_i64(&r->cpu_milli, milli);
		else
			note_error(ctx, "resource %s: bad quantity \"%s\"",
				   name, value);
	} else if (strcmp(name, "memory") == 0) {
		if (ft_quantity_mib(&mib, value) == 0)
			add_u64(&r->memory_mib, mib);
		else
			note_error(ctx, "resource %s: bad quantity \"%s\"",
				   name, value);
	} else if (is_gpu_resource(ctx->opts, name) ||
		   strncmp(name, ctx->opts->mig_resource_prefix, plen) == 0) {
		if (ft_quantity_milli(&milli, value) < 0 || milli % 1000) {
			note_error(ctx,
				   "resource %s: \"%s\" is not a whole number",
				   name, value);
			return;
		}
		if (is_gpu_resource(ctx->opts, name)) {
			add_u64(&r->gpus, (uint64_t)milli / 1000);
			return;
		}
		if (!name[plen]) {
			note_error(ctx, "resource %s: no MIG profile after %s",
				   name, ctx->opts->mig_resource_prefix);
			return;
		}
		if (ctx->mig_profile[0] &&
		    strcmp(ctx->mig_profile, name + plen) != 0)
			note_error(
			    ctx,
			    "resources: MIG profiles %s and %s in one pod; one profile per pod",
			    ctx->mig_profile, name + plen);
		snprintf(ctx->mig_profile, sizeof(ctx->mig_profile), "%s",
			 name + plen);
		add_u64(&r->mig, (uint64_t)milli / 1000);
	}
}

static bool same_quantity(const cJSON *a, const cJSON *b, const char *key)
{
	const char *x = str_at(a, key), *y = str_at(b, key);
	int64_t mx, my;

	if (!x || !y || ft_quantity_milli(&mx, x) || ft_quantity_milli(&my, y))
		return false;
	return mx == my;
}

static requests_t container_requests(const cJSON *c, decode_ctx_t *ctx)
{
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(c, "resources");
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(res, "requests");
	const cJSON *lim = cJSON_GetObjectItemCaseSensitive(res, "limits");
	const cJSON *item, *counted = req ? req : lim;
	requests_t r = {0, 0, 0, 0, false, 0};

	/* The API server defaults requests to limits; a bare object may not. */
	cJSON_ArrayForEach (item, counted) {
		if (cJSON_IsString(item) && item->string)
			add_resource(&r, ctx, item->string, item->valuestring);
	}
	if (!req && lim)
		req = lim;
	r.guaranteed =
	    same_quantity(req, lim, "cpu") && same_quantity(req, lim, "memory");
	r.pinned = r.cpu_milli % 1000 == 0 ? r.cpu_milli / 1000 : 0;
	return r;
}

static void sum_into(requests_t *total, const requests_t *r)
{
	add_i64(&total->cpu_milli, r->cpu_milli);
	add_u64(&total->memory_mib, r->memory_mib);
	add_i64(&total->pinned, r->pinned);
	add_u64(&total->gpus, r->gpus);
	add_u64(&total->mig, r->mig);
	total->guaranteed = total->guaranteed && r->guaranteed;
}

static void max_into(requests_t *total, const requests_t *r)
{
	if (r->cpu_milli > total->cpu_milli)
		total->cpu_milli = r->cpu_milli;
	if (r->memory_mib > total->memory_mib)
		total->memory_mib = r->memory_mib;
	if (r->pinned > total->pinned)
		total->pinned = r->pinned;
	if (r->gpus > total->gpus)
		total->gpus = r->gpus;
	if (r->mig > total->mig)
		total->mig = r->mig;
	total->guaranteed = total->guaranteed && r->guaranteed;
}

static bool is_sidecar(const cJSON *c)
{
	const char *policy = str_at(c, "restartPolicy");

	return policy && strcmp(policy, "Always") == 0;
}

static requests_t pod_requests(const cJSON *spec, decode_ctx_t *ctx)
{
	requests_t apps = {0, 0, 0, 0, true, 0}, inits = {0, 0, 0, 0, true, 0};
	requests_t sidecars = {0, 0, 0, 0, true, 0}, r;
	const cJSON *c;
	int n = 0;

	cJSON_ArrayForEach (
	    c, cJSON_GetObjectItemCaseSensitive(spec, "initContainers")) {
		r = container_requests(c, ctx);
		if (is_sidecar(c)) {
			sum_into(&sidecars, &r);
			continue;
		}
		sum_into(&r, &sidecars);
		r.guaranteed = r.guaranteed && sidecars.guaranteed;
		max_into(&inits, &r);
	}
	cJSON_ArrayForEach (
	    c, cJSON_GetObjectItemCaseSensitive(spec, "containers")) {
		r = container_requests(c, ctx);
		sum_into(&apps, &r);
		n++;
	}
	sum_into(&apps, &sidecars);
	max_into(&apps, &inits);
	apps.guaranteed = apps.guaranteed && n > 0;
	return apps;
}

static void add_overhead(requests_t *r, const cJSON *spec, decode_ctx_t *ctx)
{
	const cJSON *item;
	requests_t o = {0, 0, 0, 0, true, 0};

	cJSON_ArrayForEach (
	    item, cJSON_GetObjectItemCaseSensitive(spec, "overhead")) {
		if (cJSON_IsString(item) && item->string)
			add_resource(&o, ctx, item->string, item->valuestring);
	}
	add_i64(&r->cpu_milli, o.cpu_milli);
	add_u64(&r->memory_mib, o.memory_mib);
}

/* Position of `name` in a NULL-terminated list of names, or -1. */
static int name_index(const char *const *names, const char *name)
{
	for (int i = 0; names[i]; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

static void decode_affinity(ft_demand_t *d, const cJSON *pod, decode_ctx_t *ctx)
{
	const char *prefix = ctx->opts->annotation_prefix;
	const char *level = annotation(pod, prefix, "affinity");
	const char *mode = annotation(pod, prefix, "affinity-mode");
	int i;

	d->level = FT_LEVEL_NODE;
	d->mode = ctx->opts->default_mode;
	if (level && ft_level_parse(&d->level, level) == 0)
		d->has_affinity = true;
	else if (level)
		note_error(
		    ctx,
		    "annotation %s/affinity: \"%s\" is not one of nvlink, pcie-switch, numa, socket, node",
		    prefix, level);
	if (!mode)
		return;
	if ((i = name_index(ft_affinity_mode_names, mode)) >= 0)
		d->mode = (ft_affinity_mode_t)i;
	else
		note_error(
		    ctx,
		    "annotation %s/affinity-mode: \"%s\" is not guaranteed or best-effort",
		    prefix, mode);
}

/* flextopo.io/allocation-policy: the pod's own packed | distributed. */
static void decode_policy(ft_demand_t *d, const cJSON *pod, decode_ctx_t *ctx)
{
	const char *prefix = ctx->opts->annotation_prefix;
	const char *policy = annotation(pod, prefix, "allocation-policy");
	int i;

	if (!policy)
		return;
	i = name_index(ft_policy_names, policy);
	d->has_policy = i >= 0;
	d->policy = i > 0 ? (ft_policy_t)i : FT_POLICY_PACKED;
	if (!d->has_policy)
		note_error(
		    ctx,
		    "annotation %s/allocation-policy: \"%s\" is not packed or distributed",
		    prefix, policy);
}

/* flextopo.io/requires: the capabilities every unit must have. */
static void decode_requires(ft_demand_t *d, const cJSON *pod, decode_ctx_t *ctx)
{
	const char *prefix = ctx->opts->annotation_prefix;
	const char *text = annotation(pod, prefix, "requires");
	char msg[200];

	if (!text)
		return;
	if (ft_codec_requires_decode(&d->caps, text) == 0) {
		d->has_caps = true;
		return;
	}
	snprintf(msg, sizeof(msg), "%s", ft_error_last());
	note_error(ctx, "annotation %s/requires: %s", prefix, msg);
}

/* flextopo.io/gpu-fraction: the share of one GPU each rank needs. */
static void decode_fraction(ft_demand_t *d, const cJSON *pod, decode_ctx_t *ctx)
{
	const char *prefix = ctx->opts->annotation_prefix;
	const char *text = annotation(pod, prefix, "gpu-fraction");
	int64_t milli = 0;

	if (!text)
		return;
	if (ft_quantity_milli(&milli, text) == 0 && milli > 0 &&
	    milli <= 1000) {
		d->gpu_fraction_milli = (uint32_t)milli;
		return;
	}
	note_error(
	    ctx,
	    "annotation %s/gpu-fraction: \"%.32s\" is not a number in (0, 1]",
	    prefix, text);
}

/* A set of GPU model hashes; `any` when nothing constrains the model. */
typedef struct {
	bool any;
	bool too_many; /* more than FT_GPU_PRODUCTS_MAX: left free */
	unsigned n;
	uint64_t h[FT_GPU_PRODUCTS_MAX];
} products_t;

static bool products_has(const products_t *p, uint64_t h)
{
	for (unsigned i = 0; i < p->n; i++)
		if (p->h[i] == h)
			return true;
	return false;
}

static void products_add(products_t *p, uint64_t h)
{
	if (products_has(p, h))
		return;
	if (p->n == FT_GPU_PRODUCTS_MAX)
		p->too_many = true;
	else
		p->h[p->n++] = h;
}

/* Requirement `e` on the model label with operator In: its values. */
static bool product_requirement(products_t *out, const cJSON *e)
{
	const char *key = str_at(e, "key"), *op = str_at(e, "operator");
	const cJSON *v;

	if (!key || !op || strcmp(key, FT_GPU_PRODUCT_LABEL) != 0 ||
	    strcmp(op, "In") != 0)
		return false;
	*out = (products_t){.any = false};
	cJSON_ArrayForEach (v, cJSON_GetObjectItemCaseSensitive(e, "values")) {
		if (cJSON_IsString(v))
			products_add(out, ft_gpu_product_hash(v->valuestring));
	}
	return true;
}

/* `a` and `b` both hold: the intersection (`any` is the whole set). */
static products_t products_and(const products_t *a, const products_t *b)
{
	products_t out = {.any = false, .too_many = a->too_many && b->too_many};

	if (a->any || a->too_many)
		return *b;
	if (b->any || b->too_many)
		return *a;
	for (unsigned i = 0; i < a->n; i++)
		if (products_has(b, a->h[i]))
			products_add(&out, a->h[i]);
	return out;
}

/* One of `a` or `b` holds: the union. */
static products_t products_or(const products_t *a, const products_t *b)
{
	products_t out = *a;

	out.any = a->any || b->any;
	out.too_many = a->too_many || b->too_many;
	for (unsigned i = 0; i < b->n; i++)
		products_add(&out, b->h[i]);
	return out;
}

/*
 * The models one nodeSelectorTerm allows: its `In` requirements on the
 * label, ANDed; `any` when it has none. Other operators (NotIn, Exists,
 * ...) leave the model free here: kube-scheduler still applies them,
 * flextopo only does not weigh them.
 */
static products_t term_products(const cJSON *term)
{
	const cJSON *e;
	products_t p = {.any = true};

	cJSON_ArrayForEach (
	    e, cJSON_GetObjectItemCaseSensitive(term, "matchExpressions")) {
		products_t req;
		if (cJSON_IsObject(e) && product_requirement(&req, e))
			p = products_and(&p, &req);
	}
	return p;
}

static int by_hash(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/*
 * What a pod's nodeSelector and required node affinity (its terms ORed)
 * allow of the GPU model label, as kube-scheduler's NodeAffinity plugin
 * reads them (pkg/scheduler/framework/plugins/nodeaffinity).
 */
static void decode_products(ft_demand_t *d, const cJSON *spec)
{
	const cJSON *terms = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(spec, "affinity"),
		    "nodeAffinity"),
		"requiredDuringSchedulingIgnoredDuringExecution"),
	    "nodeSelectorTerms");
	const char *selected =
	    str_at(cJSON_GetObjectItemCaseSensitive(spec, "nodeSelector"),
		   FT_GPU_PRODUCT_LABEL);
	const cJSON *term;
	products_t p = {.any = true},
		   terms_p = {.any = !cJSON_IsArray(terms) ||
				     !cJSON_GetArraySize(terms)};

	if (selected) {
		p = (products_t){.any = false};
		products_add(&p, ft_gpu_product_hash(selected));
	}
	if (!cJSON_IsArray(terms))
		terms = NULL;
	cJSON_ArrayForEach (term, terms) {
		products_t t = term_products(term);
		terms_p = products_or(&terms_p, &t);
	}
	p = products_and(&p, &terms_p);
	if (p.any || p.too_many || !p.n)
		return;
	qsort(p.h, p.n, sizeof(p.h[0]), by_hash); /* a canonical key */
	d->n_gpu_products = (uint8_t)p.n;
	memcpy(d->gpu_products, p.h, p.n * sizeof(p.h[0]));
}

static void decode_demand(ft_demand_t *d, const cJSON *pod, decode_ctx_t *ctx)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
	requests_t r = pod_requests(spec, ctx);

	add_overhead(&r, spec, ctx);
	d->gpus = (uint32_t)(r.gpus > UINT32_MAX ? UINT32_MAX : r.gpus);
	d->mig_count = (uint32_t)(r.mig > UINT32_MAX ? UINT32_MAX : r.mig);
	memcpy(d->mig_profile, ctx->mig_profile, FT_PROFILE_MAX);
	d->cpu_millis =
	    (uint32_t)(r.cpu_milli > UINT32_MAX ? UINT32_MAX : r.cpu_milli);
	d->memory_mib = r.memory_mib;
	if (r.guaranteed && r.pinned > 0)
		d->exclusive_cpus =
		    (uint32_t)(r.pinned > UINT32_MAX / 1000 ? UINT32_MAX / 1000
							    : r.pinned);
	decode_affinity(d, pod, ctx);
	decode_policy(d, pod, ctx);
	decode_requires(d, pod, ctx);
	decode_fraction(d, pod, ctx);
	decode_products(d, spec);
}

/* RFC 3339 "2026-11-21T04:32:00Z" -> Unix seconds; 0 when absent or bad. */
static int64_t parse_time(const char *text)
{
	struct tm tm;
	const char *end;

	if (!text)
		return 0;
	memset(&tm, 0, sizeof(tm));
	end = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
	return end ? (int64_t)timegm(&tm) : 0;
}

static int dup_str(char **dst, const char *src)
{
	*dst = src ? strdup(src) : NULL;
	return src && !*dst ? ft_error_set(FT_ENOMEM, "out of memory") : 0;
}

static int decode_status(ft_pod_t *out, const cJSON *pod)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(pod, "status");
	const cJSON *prio = cJSON_GetObjectItemCaseSensitive(spec, "priority");
	const char *phase = str_at(status, "phase");
	const char *node = str_at(spec, "nodeName");

	double p = cJSON_IsNumber(prio) ? prio->valuedouble : 0;

	out->priority = p >= (double)INT32_MAX	 ? INT32_MAX
			: p <= (double)INT32_MIN ? INT32_MIN
						 : (int32_t)p;
	out->start_time = parse_time(str_at(status, "startTime"));
	if (!out->start_time)
		out->start_time = parse_time(str_at(meta, "creationTimestamp"));
	out->terminal = phase && (strcmp(phase, "Succeeded") == 0 ||
				  strcmp(phase, "Failed") == 0);
	return dup_str(&out->node, node && *node ? node : NULL);
}

/* "annotation <prefix>/<name>: <the decoder's message>" into *dst. */
static int annotation_error(char **dst, const ft_codec_options_t *opts,
			    const char *name)
{
	char msg[320];

	snprintf(msg, sizeof(msg), "annotation %s/%s: %s",
		 opts->annotation_prefix, name, ft_error_last());
	return dup_str(dst, msg);
}

static int decode_allocation(ft_pod_t *out, const cJSON *pod,
			     const ft_codec_options_t *opts)
{
	const char *text =
	    annotation(pod, opts->annotation_prefix, "allocation");

	if (!text)
		return 0;
	if (ft_codec_allocation_decode(&out->allocation, text) == 0) {
		out->has_allocation = true;
		return 0;
	}
	return annotation_error(&out->allocation_error, opts, "allocation");
}

/* flextopo.io/observed: what flextopo-node saw the node give the pod. */
static int decode_observed(ft_pod_t *out, const cJSON *pod,
			   const ft_codec_options_t *opts)
{
	const char *text = annotation(pod, opts->annotation_prefix, "observed");
	ft_observed_t observed;

	if (!text)
		return 0;
	if (ft_codec_observed_decode(&observed, text) < 0)
		return annotation_error(&out->observed_error, opts, "observed");
	if (!(out->observed = malloc(sizeof(*out->observed)))) {
		ft_observed_dispose(&observed);
		return ft_error_set(FT_ENOMEM, "out of memory");
	}
	*out->observed = observed;
	return 0;
}

static int decode_labels(ft_pod_t *out, const cJSON *meta)
{
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(meta, "labels");
	const cJSON *item;
	unsigned n = (unsigned)cJSON_GetArraySize(labels);

	if (!cJSON_IsObject(labels) || !n)
		return 0;
	if (!(out->labels = calloc(n, sizeof(*out->labels))))
		return ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach (item, labels) {
		char *kv;
		if (!cJSON_IsString(item))
			continue;
		if (asprintf(&kv, "%s=%s", item->string, item->valuestring) < 0)
			return ft_error_set(FT_ENOMEM, "out of memory");
		out->labels[out->n_labels++] = kv;
	}
	return 0;
}

static bool listed(char *const *list, unsigned n, const char *s)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

static int add_claim(ft_pod_t *out, unsigned cap, const char *name)
{
	if (!name || !name[0] || out->n_claims == cap ||
	    listed(out->claims, out->n_claims, name))
		return 0;
	if (!(out->claims[out->n_claims] = strdup(name)))
		return ft_error_set(FT_ENOMEM, "out of memory");
	out->n_claims++;
	return 0;
}

/*
 * The pod's ResourceClaims (cluster.h, ft_pod_t.claims): named in the spec,
 * made from its templates (status.resourceClaimStatuses), and made by
 * kube-scheduler for its extended resources
 * (status.extendedResourceClaimStatus).
 */
static int decode_claims(ft_pod_t *out, const cJSON *pod)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(pod, "status");
	const cJSON *refs =
	    cJSON_GetObjectItemCaseSensitive(spec, "resourceClaims");
	const cJSON *made =
	    cJSON_GetObjectItemCaseSensitive(status, "resourceClaimStatuses");
	const cJSON *ext = cJSON_GetObjectItemCaseSensitive(
	    status, "extendedResourceClaimStatus");
	unsigned cap =
	    (unsigned)(cJSON_GetArraySize(refs) + cJSON_GetArraySize(made) + 1);
	const cJSON *item;
	int rc = 0;

	if (cap == 1 && !ext)
		return 0;
	if (!(out->claims = calloc(cap, sizeof(*out->claims))))
		return ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach (item, refs) {
		if ((rc = add_claim(out, cap,
				    str_at(item, "resourceClaimName"))) < 0)
			return rc;
	}
	cJSON_ArrayForEach (item, made) {
		if ((rc = add_claim(out, cap,
				    str_at(item, "resourceClaimName"))) < 0)
			return rc;
	}
	return add_claim(out, cap, str_at(ext, "resourceClaimName"));
}

/* Set the pod's gang, `name` of `source`, or say in gang_error why not. */
static int set_gang(ft_pod_t *out, ft_gang_source_t source, const char *field,
		    const char *name, bool valid)
{
	char *text = NULL;

	if (valid) {
		out->gang_source = source;
		return dup_str(&out->gang, name);
	}
	if (asprintf(
		&text,
		"%s: \"%s\" is not a DNS subdomain; the pod is its own unit",
		field, name) < 0)
		return ft_error_set(FT_ENOMEM, "out of memory");
	out->gang_error = text;
	return 0;
}

/* A configured gang label of the pod: "<key>=<value>", or NULL. */
static int label_gang(ft_pod_t *out, const cJSON *labels,
		      const ft_codec_options_t *opts)
{
	char *text = NULL;

	for (unsigned k = 0; opts && k < opts->n_gang_label_keys; k++) {
		const char *key = opts->gang_label_keys[k];
		const char *value = str_at(labels, key);
		if (!value || !value[0])
			continue;
		if (asprintf(&text, "%s=%s", key, value) < 0)
			return ft_error_set(FT_ENOMEM, "out of memory");
		out->gang_source = FT_GANG_LABEL;
		out->gang = text;
		break;
	}
	return 0;
}

/*
 * The pod's gang (gang.h): its Workload API PodGroup, its coscheduling
 * label, or the first configured gang label it carries.
 */
static int decode_gang(ft_pod_t *out, const cJSON *pod,
		       const ft_codec_options_t *opts)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(meta, "labels");
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
	const char *group =
	    str_at(cJSON_GetObjectItemCaseSensitive(spec, "schedulingGroup"),
		   "podGroupName");
	const char *cosched = str_at(labels, FT_GANG_COSCHEDULING_LABEL);

	if (group)
		return set_gang(out, FT_GANG_WORKLOAD,
				"spec.schedulingGroup.podGroupName", group,
				ft_gang_valid_name(group));
	if (cosched)
		return set_gang(out, FT_GANG_COSCHEDULING,
				"label " FT_GANG_COSCHEDULING_LABEL, cosched,
				ft_gang_valid_name(cosched));
	return label_gang(out, labels, opts);
}

int ft_codec_pod_decode(ft_pod_t *out, const cJSON *pod,
			const ft_codec_options_t *opts)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	decode_ctx_t ctx = {.opts = opts};
	int rc;

	memset(out, 0, sizeof(*out));
	if (!str_at(meta, "name") || !str_at(meta, "uid"))
		return ft_error_set(
		    FT_EINVAL,
		    "pod: metadata.name and metadata.uid are required");
	decode_demand(&out->demand, pod, &ctx);
	ft_codec_node_rules_decode(
	    &out->rules, cJSON_GetObjectItemCaseSensitive(pod, "spec"));
	if ((rc = dup_str(&out->uid, str_at(meta, "uid"))) < 0 ||
	    (rc = dup_str(&out->name, str_at(meta, "name"))) < 0 ||
	    (rc = dup_str(&out->ns, str_at(meta, "namespace")
					? str_at(meta, "namespace")
					: "default")) < 0 ||
	    (rc = dup_str(&out->demand_error,
			  ctx.error[0] ? ctx.error : NULL)) < 0 ||
	    (rc = decode_status(out, pod)) < 0 ||
	    (rc = decode_labels(out, meta)) < 0 ||
	    (rc = decode_claims(out, pod)) < 0 ||
	    (rc = decode_gang(out, pod, opts)) < 0 ||
	    (rc = decode_allocation(out, pod, opts)) < 0 ||
	    (rc = decode_observed(out, pod, opts)) < 0)
		ft_pod_dispose(out);
	return rc;
}

void ft_node_source_dispose(ft_node_source_t *src)
{
	if (!src)
		return;
	free(src->name);
	free(src->topology_text);
	free(src->topology_error);
	ft_topology_unref(src->topology);
	ft_node_labels_unref(src->labels);
	memset(src, 0, sizeof(*src));
}

static int parse_node_topology(ft_node_source_t *out,
			       const ft_codec_options_t *opts,
			       const ft_node_source_t *previous)
{
	char msg[512];

	if (!out->topology_text) {
		snprintf(msg, sizeof(msg), "annotation %s/topology is missing",
			 opts->annotation_prefix);
		return dup_str(&out->topology_error, msg);
	}
	if (previous && previous->topology_text &&
	    strcmp(previous->topology_text, out->topology_text) == 0) {
		out->topology = ft_topology_ref(previous->topology);
		return dup_str(&out->topology_error, previous->topology_error);
	}
	if (ft_codec_topology_parse(&out->topology, out->topology_text,
				    strlen(out->topology_text)) == 0 &&
	    ft_mig_catalog_check(opts->mig_catalog, out->topology) == 0) {
		/* Not shared yet: the catalog's facts may still be added. */
		ft_mig_catalog_apply(opts->mig_catalog, out->topology);
		return 0;
	}
	ft_topology_unref(out->topology);
	out->topology = NULL;
	snprintf(msg, sizeof(msg), "annotation %s/topology: %s",
		 opts->annotation_prefix, ft_error_last());
	return dup_str(&out->topology_error, msg);
}

/* The node's status.allocatable of `resource`, whole units; 0 if absent. */
static uint64_t allocatable(const cJSON *node, const char *resource)
{
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(node, "status");
	const char *v = str_at(
	    cJSON_GetObjectItemCaseSensitive(status, "allocatable"), resource);
	int64_t milli;

	if (!v || ft_quantity_milli(&milli, v) < 0 || milli < 1000)
		return 0;
	return (uint64_t)milli / 1000;
}

int ft_codec_node_decode(ft_node_source_t *out, const cJSON *node,
			 const ft_codec_options_t *opts,
			 const ft_node_source_t *previous)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(node, "metadata");
	int rc;

	memset(out, 0, sizeof(*out));
	if (!str_at(meta, "name"))
		return ft_error_set(FT_EINVAL,
				    "node: metadata.name is required");
	out->gpu_allocatable = allocatable(node, opts->gpu_resource);
	if ((rc = dup_str(&out->name, str_at(meta, "name"))) < 0 ||
	    (rc = dup_str(
		 &out->topology_text,
		 annotation(node, opts->annotation_prefix, "topology"))) < 0 ||
	    (rc = parse_node_topology(out, opts, previous)) < 0 ||
	    (rc = ft_codec_node_labels_decode(&out->labels, node)) < 0)
		ft_node_source_dispose(out);
	return rc;
}

static int add_requirement(ft_selector_t *s, const char *key,
			   ft_selector_op_t op, const cJSON *values)
{
	ft_selector_req_t *grown, *r;
	const cJSON *v;
	unsigned n = (unsigned)cJSON_GetArraySize(values);

	grown = realloc(s->reqs, (s->n_reqs + 1) * sizeof(*s->reqs));
	if (!grown)
		return ft_error_set(FT_ENOMEM, "out of memory");
	s->reqs = grown;
	r = &s->reqs[s->n_reqs++];
	memset(r, 0, sizeof(*r));
	r->op = op;
	if (!(r->key = strdup(key)) ||
	    (n && !(r->values = calloc(n, sizeof(*r->values)))))
		return ft_error_set(FT_ENOMEM, "out of memory");
	if (cJSON_IsString(values)) /* matchLabels: one value */
		return (r->values = calloc(1, sizeof(*r->values))) &&
			       (r->values[r->n_values++] =
				    strdup(values->valuestring))
			   ? 0
			   : ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach (v, values) {
		if (!cJSON_IsString(v))
			return ft_error_set(
			    FT_EINVAL, "selector %s: values must be strings",
			    key);
		if (!(r->values[r->n_values++] = strdup(v->valuestring)))
			return ft_error_set(FT_ENOMEM, "out of memory");
	}
	return 0;
}

static int parse_operator(ft_selector_op_t *out, const char *op)
{
	static const char *const names[] = {"In", "NotIn", "Exists",
					    "DoesNotExist"};

	for (int i = 0; op && i < 4; i++) {
		if (strcmp(op, names[i]) == 0) {
			*out = (ft_selector_op_t)i;
			return 0;
		}
	}
	return ft_error_set(
	    FT_EINVAL,
	    "spec.selector.matchExpressions: operator \"%s\" is not In, NotIn, Exists or DoesNotExist",
	    op ? op : "");
}

static int decode_selector(ft_selector_t *out, const cJSON *sel)
{
	const cJSON *item;
	ft_selector_op_t op = FT_SEL_IN;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(sel)) {
		out->nothing = true;
		return 0;
	}
	cJSON_ArrayForEach (
	    item, cJSON_GetObjectItemCaseSensitive(sel, "matchLabels")) {
		if (!item->string || !cJSON_IsString(item))
			return ft_error_set(
			    FT_EINVAL,
			    "spec.selector.matchLabels: expected a map of strings");
		if ((rc = add_requirement(out, item->string, FT_SEL_IN, item)) <
		    0)
			return rc;
	}
	cJSON_ArrayForEach (
	    item, cJSON_GetObjectItemCaseSensitive(sel, "matchExpressions")) {
		const char *key = str_at(item, "key");
		if (!key)
			return ft_error_set(
			    FT_EINVAL,
			    "spec.selector.matchExpressions: key is required");
		if ((rc = parse_operator(&op, str_at(item, "operator"))) < 0 ||
		    (rc = add_requirement(
			 out, key, op,
			 cJSON_GetObjectItemCaseSensitive(item, "values"))) < 0)
			return rc;
	}
	return 0;
}

static int decode_disrupted(ft_pdb_t *out, const cJSON *status)
{
	const cJSON *map =
	    cJSON_GetObjectItemCaseSensitive(status, "disruptedPods");
	const cJSON *item;
	unsigned n = (unsigned)cJSON_GetArraySize(map);

	if (!cJSON_IsObject(map) || !n)
		return 0;
	if (!(out->disrupted = calloc(n, sizeof(*out->disrupted))))
		return ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach (item, map) {
		if (!(out->disrupted[out->n_disrupted++] =
			  strdup(item->string)))
			return ft_error_set(FT_ENOMEM, "out of memory");
	}
	return 0;
}

/* A PodGroup's minimum: a non-negative integer of `obj` at `key`. */
static int group_min(uint32_t *out, const cJSON *obj, const char *key,
		     const char *what, const char *field)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!cJSON_IsNumber(v))
		return ft_error_set(FT_EINVAL, "%s: %s is required", what,
				    field);
	if (v->valuedouble < 0 || v->valuedouble > INT32_MAX ||
	    v->valuedouble != (double)(int64_t)v->valuedouble)
		return ft_error_set(FT_EINVAL,
				    "%s: %s: %g is not a non-negative integer",
				    what, field, v->valuedouble);
	*out = (uint32_t)v->valuedouble;
	return 0;
}

/* spec of a scheduling.k8s.io PodGroup: its policy and disruption mode. */
static int workload_spec(ft_pod_group_t *out, const cJSON *spec,
			 const char *what)
{
	const cJSON *policy =
	    cJSON_GetObjectItemCaseSensitive(spec, "schedulingPolicy");
	const cJSON *gang = cJSON_GetObjectItemCaseSensitive(policy, "gang");
	const char *mode = str_at(spec, "disruptionMode");
	int rc = 0;

	if (gang)
		rc = group_min(&out->min, gang, "minCount", what,
			       "spec.schedulingPolicy.gang.minCount");
	else if (!cJSON_GetObjectItemCaseSensitive(policy, "basic"))
		rc = ft_error_set(
		    FT_EINVAL,
		    "%s: spec.schedulingPolicy needs gang (with minCount) or basic",
		    what);
	if (rc == 0 && mode && strcmp(mode, "Pod") != 0 &&
	    strcmp(mode, "PodGroup") != 0)
		rc = ft_error_set(
		    FT_EINVAL,
		    "%s: spec.disruptionMode: \"%s\" is neither Pod nor PodGroup",
		    what, mode);
	out->whole = mode && strcmp(mode, "PodGroup") == 0;
	return rc;
}

int ft_codec_pod_group_decode(ft_pod_group_t *out, const cJSON *group)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(group, "metadata");
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(group, "spec");
	const char *version = str_at(group, "apiVersion");
	const char *ns = str_at(meta, "namespace");
	char what[320];
	int rc;

	memset(out, 0, sizeof(*out));
	if (!str_at(meta, "name"))
		return ft_error_set(FT_EINVAL,
				    "podgroup: metadata.name is required");
	snprintf(what, sizeof(what), "podgroup %s/%s (%s)", ns ? ns : "default",
		 str_at(meta, "name"), version ? version : "no apiVersion");
	if (version && !strncmp(version, "scheduling.k8s.io/", 18)) {
		out->source = FT_GANG_WORKLOAD;
		rc = workload_spec(out, spec, what);
	} else if (version && !strncmp(version, "scheduling.x-k8s.io/", 20)) {
		out->source = FT_GANG_COSCHEDULING;
		rc = group_min(&out->min, spec, "minMember", what,
			       "spec.minMember");
	} else {
		rc = ft_error_set(
		    FT_EINVAL,
		    "%s: apiVersion is neither scheduling.k8s.io nor scheduling.x-k8s.io",
		    what);
	}
	if (rc == 0 && (rc = dup_str(&out->name, str_at(meta, "name"))) == 0)
		rc = dup_str(&out->ns, ns ? ns : "default");
	if (rc < 0)
		ft_pod_group_dispose(out);
	return rc;
}

int ft_codec_pdb_decode(ft_pdb_t *out, const cJSON *pdb)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pdb, "metadata");
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pdb, "spec");
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(pdb, "status");
	const cJSON *allowed =
	    cJSON_GetObjectItemCaseSensitive(status, "disruptionsAllowed");
	const char *ns = str_at(meta, "namespace");
	int rc;

	memset(out, 0, sizeof(*out));
	if (!str_at(meta, "name"))
		return ft_error_set(
		    FT_EINVAL,
		    "poddisruptionbudget: metadata.name is required");
	out->disruptions_allowed = cJSON_IsNumber(allowed) &&
					   allowed->valuedouble > 0 &&
					   allowed->valuedouble < INT32_MAX
				       ? (int32_t)allowed->valuedouble
				       : 0;
	if ((rc = dup_str(&out->name, str_at(meta, "name"))) < 0 ||
	    (rc = dup_str(&out->ns, ns ? ns : "default")) < 0 ||
	    (rc = decode_selector(
		 &out->selector,
		 cJSON_GetObjectItemCaseSensitive(spec, "selector"))) < 0 ||
	    (rc = decode_disrupted(out, status)) < 0)
		ft_pdb_dispose(out);
	return rc;
}
