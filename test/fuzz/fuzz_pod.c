/*
 * Fuzz target for the v1 Pod decoder (watch events, snapshot files and the
 * Pod of extender requests): resource requests, QoS, our annotations, the
 * allocation annotation and the observed one that flextopo-node writes. The
 * input is parsed as JSON and decoded as a pod; the raw text is also decoded
 * as an allocation annotation, as an observed annotation and as a
 * capability annotation (flextopo.io/requires), and its labels and taints
 * are read as a Node's, for the pod's node rules to be tried on. Any input
 * must decode into a consistent pod or fail with FT_EINVAL (FT_ENOMEM under
 * memory pressure) and nothing held; never crash or leak. Where
 * kube-scheduler would let the pod run on that node, the node rules must
 * too: they may widen, never narrow (noderules.h).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include <flextopo/codec.h>
#include <flextopo/cpuset.h>
#include <flextopo/error.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The defaults of configs/flextopo.yaml. */
static const ft_codec_options_t opts = {.annotation_prefix = "flextopo.io",
					.gpu_resource = "nvidia.com/gpu",
					.mig_resource_prefix =
					    "nvidia.com/mig-",
					.default_mode = FT_MODE_GUARANTEED};

static void check_allocation(const ft_allocation_t *a)
{
	if (a->n_gpus > FT_GPU_MAX || a->n_mig > FT_ALLOC_MIG_MAX ||
	    a->level >= FT_LEVEL_COUNT)
		abort();
	for (unsigned i = 0; i < a->n_gpus; i++)
		if (!a->gpu_uuids[i])
			abort();
	for (unsigned i = 0; i < a->n_mig; i++)
		if (!a->mig_uuids[i])
			abort();
}

static void check_observed(const ft_observed_t *o)
{
	if (!o->node || !o->node[0] ||
	    (o->source != FT_OBSERVED_NRI &&
	     o->source != FT_OBSERVED_PODRESOURCES) ||
	    o->units.n_replicas > FT_GPU_MAX)
		abort();
	check_allocation(&o->units);
	for (unsigned i = 0; i < o->units.n_replicas; i++)
		if (!o->units.replica_gpus[i] || !o->units.replica_counts[i] ||
		    o->units.replica_counts[i] > FT_REPLICAS_MAX)
			abort();
}

/* Node rules within their bounds, each requirement in a kept term. */
static void check_rules(const ft_node_rules_t *r)
{
	if (r->n_reqs > FT_RULE_REQS_MAX || r->n_hashes > FT_RULE_HASHES_MAX ||
	    r->n_tolerations > FT_RULE_TOLERATIONS_MAX)
		abort();
	for (unsigned i = 0; i < r->n_reqs; i++) {
		const ft_node_req_t *q = &r->reqs[i];
		if (q->op < FT_REQ_IN || q->op > FT_REQ_DOES_NOT_EXIST ||
		    !q->n || q->first + q->n > r->n_hashes ||
		    (q->term != FT_RULE_ALL_TERMS && q->term >= r->n_terms))
			abort();
	}
	for (unsigned i = 0; i < r->n_tolerations; i++)
		if (!r->tolerations[i].effects ||
		    r->tolerations[i].effects >
			(FT_TAINT_NO_SCHEDULE | FT_TAINT_NO_EXECUTE))
			abort();
}

/*
 * kube-scheduler's NodeAffinity and TaintToleration filters on the input as
 * both the Pod and the Node, read as strings: nodeSelector and required
 * node affinity as k8s.io/component-helpers/scheduling/corev1/nodeaffinity
 * matches them, taints as k8s.io/api/core/v1 Toleration.ToleratesTaint
 * tolerates them. What an API server would refuse fails, and so do Gt, Lt
 * and matchFields, which are not written here, so that this never admits
 * more than kube-scheduler. The node rules may admit more, never less.
 */
static const cJSON *at(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* `v` when it is an array, else NULL: for cJSON_ArrayForEach, whose
 * argument must not be an expression. */
static const cJSON *array(const cJSON *v)
{
	return cJSON_IsArray(v) ? v : NULL;
}

static const cJSON *object(const cJSON *v)
{
	return cJSON_IsObject(v) ? v : NULL;
}

/* A string member's value; "" when absent or not a string. */
static const char *text(const cJSON *obj, const char *key)
{
	const cJSON *v = at(obj, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

/* A node label's value; NULL when the node has no such label. */
static const char *label(const cJSON *labels, const char *key)
{
	const cJSON *v = at(labels, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Is `have` (NULL: no label) one of `values`, all strings? -1 when one is
 * not a string or there are none. */
static int listed(const char *have, const cJSON *values)
{
	const cJSON *v;
	int in = 0;

	if (!cJSON_GetArraySize(array(values)))
		return -1;
	cJSON_ArrayForEach (v, array(values)) {
		if (!cJSON_IsString(v))
			return -1;
		in |= have && strcmp(have, v->valuestring) == 0;
	}
	return in;
}

/* One matchExpression: In, NotIn, Exists or DoesNotExist. */
static bool ref_requirement(const cJSON *e, const cJSON *labels)
{
	const char *op = text(e, "operator");
	const char *have = label(labels, text(e, "key"));
	bool exists = strcmp(op, "Exists") == 0;
	int in;

	if (!cJSON_IsString(at(e, "key")))
		return false;
	if (exists || strcmp(op, "DoesNotExist") == 0)
		return !cJSON_GetArraySize(at(e, "values")) &&
		       (have != NULL) == exists;
	in = listed(have, at(e, "values"));
	return in >= 0 && (strcmp(op, "In") == 0      ? in
			   : strcmp(op, "NotIn") == 0 ? !in
						      : false);
}

/* One nodeSelectorTerm: all its requirements; an empty term matches no
 * node. */
static bool ref_term(const cJSON *term, const cJSON *labels)
{
	const cJSON *e;
	bool ok = cJSON_GetArraySize(array(at(term, "matchExpressions"))) &&
		  !cJSON_GetArraySize(at(term, "matchFields"));

	cJSON_ArrayForEach (e, array(at(term, "matchExpressions"))) {
		ok = ok && ref_requirement(e, labels);
	}
	return ok;
}

static const cJSON *required_terms(const cJSON *spec)
{
	return at(at(at(at(spec, "affinity"), "nodeAffinity"),
		     "requiredDuringSchedulingIgnoredDuringExecution"),
		  "nodeSelectorTerms");
}

static bool ref_affinity(const cJSON *spec, const cJSON *labels)
{
	const cJSON *selector = at(spec, "nodeSelector"), *e;
	bool ok = !selector || cJSON_IsObject(selector);
	bool any = !at(at(at(spec, "affinity"), "nodeAffinity"),
		       "requiredDuringSchedulingIgnoredDuringExecution");

	cJSON_ArrayForEach (e, object(selector)) {
		const char *have = label(labels, e->string);
		ok = ok && cJSON_IsString(e) && have &&
		     strcmp(have, e->valuestring) == 0;
	}
	cJSON_ArrayForEach (e, array(required_terms(spec))) {
		any = any || ref_term(e, labels);
	}
	return ok && any;
}

static bool ref_tolerates(const cJSON *t, const cJSON *taint)
{
	const char *op = text(t, "operator"), *key = text(t, "key");
	const char *effect = text(t, "effect");

	if (*effect && strcmp(effect, text(taint, "effect")) != 0)
		return false;
	if (*key && strcmp(key, text(taint, "key")) != 0)
		return false;
	if (strcmp(op, "Exists") == 0)
		return true;
	/* Equal (the default) without a key is refused by the API server. */
	return (!*op || strcmp(op, "Equal") == 0) && *key &&
	       strcmp(text(t, "value"), text(taint, "value")) == 0;
}

static bool ref_tolerated(const cJSON *spec)
{
	const cJSON *taint, *t;
	bool ok = true;

	cJSON_ArrayForEach (taint, array(at(spec, "taints"))) {
		const char *effect = text(taint, "effect");
		bool tolerated = false;
		if (!cJSON_IsString(at(taint, "key")) ||
		    (strcmp(effect, "NoSchedule") != 0 &&
		     strcmp(effect, "NoExecute") != 0))
			continue; /* PreferNoSchedule does not filter */
		cJSON_ArrayForEach (t, array(at(spec, "tolerations"))) {
			tolerated = tolerated || ref_tolerates(t, taint);
		}
		ok = ok && tolerated;
	}
	return ok;
}

/*
 * Keys that the rules' hashes cannot tell apart as kube-scheduler does: a
 * key repeated in an object (Go keeps the last, cJSON finds the first) or
 * holding '=' (a pair hashes as "key=value"). The API server refuses both.
 */
static bool odd_keys(const cJSON *obj)
{
	const cJSON *e;
	bool odd = false;

	cJSON_ArrayForEach (e, object(obj)) {
		odd = odd || strchr(e->string, '=') || at(obj, e->string) != e;
	}
	return odd;
}

static bool odd_requirement_keys(const cJSON *spec)
{
	const cJSON *term, *e;
	bool odd = false;

	cJSON_ArrayForEach (term, array(required_terms(spec))) {
		cJSON_ArrayForEach (e, array(at(term, "matchExpressions"))) {
			odd = odd || strchr(text(e, "key"), '=');
		}
	}
	return odd;
}

/* Where kube-scheduler lets the input's pod run on the input's node, the
 * node rules do too. */
static void check_admit(const cJSON *root, const ft_node_rules_t *rules,
			const ft_node_labels_t *l)
{
	const cJSON *spec = at(root, "spec");
	const cJSON *labels = at(at(root, "metadata"), "labels");

	if (odd_keys(labels) || odd_keys(at(spec, "nodeSelector")) ||
	    odd_requirement_keys(spec))
		return;
	if (ref_affinity(spec, labels) && ref_tolerated(spec) &&
	    !ft_node_rules_admit(rules, l))
		abort();
}

/* The input's labels and taints as a Node's: sorted, with filtering
 * effects only; the pod's rules tried on them. */
static void check_labels(const cJSON *root, const ft_node_rules_t *rules)
{
	ft_node_labels_t *l = NULL;

	if (ft_codec_node_labels_decode(&l, root) < 0)
		return;
	for (unsigned i = 1; i < l->n_hashes; i++)
		if (l->hashes[i - 1] > l->hashes[i])
			abort();
	for (unsigned i = 0; i < l->n_taints; i++)
		if (l->taints[i].effect != FT_TAINT_NO_SCHEDULE &&
		    l->taints[i].effect != FT_TAINT_NO_EXECUTE)
			abort();
	if (!ft_node_rules_admit(rules, NULL))
		abort(); /* unknown labels admit anything */
	check_admit(root, rules, l);
	ft_node_labels_unref(l);
}

static void check_pod(const ft_pod_t *pod)
{
	ft_pod_t copy;

	if (!pod->uid || !pod->name || !pod->ns)
		abort();
	if (pod->node && !pod->node[0])
		abort();
	if (pod->demand.level >= FT_LEVEL_COUNT ||
	    (pod->demand.mig_count && !pod->demand.mig_profile[0]) ||
	    memchr(pod->demand.mig_profile, 0, FT_PROFILE_MAX) == NULL)
		abort();
	if (pod->demand.exclusive_cpus * 1000ull > pod->demand.cpu_millis)
		abort();
	if (pod->has_allocation && pod->allocation_error)
		abort();
	if (pod->observed && pod->observed_error)
		abort();
	if (pod->observed)
		check_observed(pod->observed);
	/*
	 * Drift needs a valid observation on the pod's node: units that differ
	 * from a valid allocation, or units held without one.
	 */
	if (ft_pod_drifted(pod) && !ft_pod_holds_observed(pod))
		abort();
	if (ft_pod_drifted(pod) && !pod->has_allocation &&
	    !(pod->observed->units.n_gpus || pod->observed->units.n_mig ||
	      pod->observed->units.n_replicas ||
	      !ft_cpuset_empty(&pod->observed->units.cpus)))
		abort();
	/* A capability annotation that did not decode asks nothing. */
	if (pod->demand.caps.interconnect > FT_INTERCONNECT_NVLINK ||
	    (!pod->demand.has_caps &&
	     (pod->demand.caps.memory_mib || pod->demand.caps.precisions ||
	      pod->demand.caps.nvlink_domain)))
		abort();
	check_allocation(&pod->allocation);
	check_rules(&pod->rules);
	if (ft_pod_copy(&copy, pod) == 0)
		ft_pod_dispose(&copy);
}

static void decode_as_allocation(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	ft_allocation_t a;

	if (!text)
		return;
	memcpy(text, data, size);
	text[size] = '\0';
	if (ft_codec_allocation_decode(&a, text) == 0) {
		check_allocation(&a);
		ft_allocation_dispose(&a);
	} else if (a.n_gpus || a.n_mig) {
		abort();
	}
	free(text);
}

static void decode_as_observed(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	ft_observed_t o;

	if (!text)
		return;
	memcpy(text, data, size);
	text[size] = '\0';
	if (ft_codec_observed_decode(&o, text) == 0) {
		check_observed(&o);
		ft_observed_dispose(&o);
	} else if (o.node || o.units.n_gpus || o.units.n_mig ||
		   o.units.n_replicas) {
		abort();
	}
	free(text);
}

static void decode_as_requires(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	ft_caps_t caps;

	if (!text)
		return;
	memcpy(text, data, size);
	text[size] = '\0';
	if (ft_codec_requires_decode(&caps, text) == 0) {
		if (caps.interconnect > FT_INTERCONNECT_NVLINK)
			abort();
	} else if (caps.memory_mib || caps.precisions || caps.interconnect ||
		   caps.nvlink_domain) {
		abort();
	}
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *root = cJSON_ParseWithLength((const char *)data, size);
	ft_pod_t pod;
	int rc;

	decode_as_allocation(data, size);
	decode_as_observed(data, size);
	decode_as_requires(data, size);
	if (!root)
		return 0;
	rc = ft_codec_pod_decode(&pod, root, &opts);
	if (rc == 0) {
		check_pod(&pod);
		check_labels(root, &pod.rules);
		ft_pod_dispose(&pod);
	} else if (pod.uid || pod.name ||
		   (rc != FT_EINVAL && rc != FT_ENOMEM)) {
		abort();
	}
	cJSON_Delete(root);
	return 0;
}
