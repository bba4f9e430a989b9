/*
 * Where a pod may run (its nodeSelector, required node affinity and
 * tolerations) and what a node offers (its labels and taints), read from v1
 * Pod and Node objects into the hashed rules of noderules.h. What the rules
 * cannot hold widens them (noderules.h): nothing here fails.
 */
#include <flextopo/codec.h>
#include <flextopo/error.h>
#include <flextopo/noderules.h>

#include <string.h>

static const cJSON *at(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

static const char *str_at(const cJSON *obj, const char *key)
{
	const cJSON *v = at(obj, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* `v` when it is an object, else NULL: for cJSON_ArrayForEach, whose
 * argument must not be an expression. */
static const cJSON *object(const cJSON *v)
{
	return cJSON_IsObject(v) ? v : NULL;
}

/* `v` when it is an array, else NULL. */
static const cJSON *array(const cJSON *v)
{
	return cJSON_IsArray(v) ? v : NULL;
}

static ft_req_op_t parse_op(const char *op)
{
	static const char *const names[] = {"In", "NotIn", "Exists",
					    "DoesNotExist"};

	for (unsigned i = 0; op && i < 4; i++)
		if (strcmp(op, names[i]) == 0)
			return (ft_req_op_t)(i + 1);
	return 0; /* Gt, Lt and the unknown are not read */
}

/*
 * Append one requirement to `term`: the key's hash (Exists, DoesNotExist)
 * or a (key, value) hash per value (In, NotIn): the string `one`, else
 * each of `values`. False, with the rules unchanged, when it is not read
 * or does not fit.
 */
static bool add_req(ft_node_rules_t *r, uint8_t term, const char *key,
		    ft_req_op_t op, const cJSON *values, const char *one)
{
	bool listed = op == FT_REQ_IN || op == FT_REQ_NOT_IN;
	unsigned n = !listed || one ? 1 : (unsigned)cJSON_GetArraySize(values);
	ft_node_req_t *q = &r->reqs[r->n_reqs];
	const cJSON *v;

	if (!key || !op || !n || r->n_reqs == FT_RULE_REQS_MAX ||
	    r->n_hashes + n > FT_RULE_HASHES_MAX)
		return false;
	*q = (ft_node_req_t){.op = (uint8_t)op,
			     .term = term,
			     .first = r->n_hashes,
			     .n = (uint8_t)n};
	if (!listed || one)
		r->hashes[r->n_hashes++] =
		    listed ? ft_label_hash(key, one) : ft_label_key_hash(key);
	else
		cJSON_ArrayForEach (v, values) {
			if (!cJSON_IsString(v)) {
				r->n_hashes = q->first;
				return false;
			}
			r->hashes[r->n_hashes++] =
			    ft_label_hash(key, v->valuestring);
		}
	r->n_reqs++;
	return true;
}

/* spec.nodeSelector: an In requirement with one value per entry, in every
 * term. An entry that does not fit is left out (the selector widens). */
static void decode_selector(ft_node_rules_t *r, const cJSON *selector)
{
	const cJSON *e;

	cJSON_ArrayForEach (e, object(selector)) {
		if (cJSON_IsString(e))
			add_req(r, FT_RULE_ALL_TERMS, e->string, FT_REQ_IN,
				NULL, e->valuestring);
	}
}

/*
 * One nodeSelectorTerm as term `t`. False when the term holds every node:
 * it asks nothing that was kept (an empty term matches no node and is
 * skipped by the caller).
 */
static bool decode_term(ft_node_rules_t *r, uint8_t t, const cJSON *term)
{
	const cJSON *e;
	bool kept = false;

	cJSON_ArrayForEach (e, at(term, "matchExpressions")) {
		kept |= add_req(r, t, str_at(e, "key"),
				parse_op(str_at(e, "operator")),
				at(e, "values"), NULL);
	}
	return kept;
}

static bool empty_term(const cJSON *term)
{
	return !cJSON_GetArraySize(at(term, "matchExpressions")) &&
	       !cJSON_GetArraySize(at(term, "matchFields"));
}

/* The required terms, ORed; none kept when one of them holds every node. */
static void decode_terms(ft_node_rules_t *r, const cJSON *terms)
{
	uint8_t reqs = r->n_reqs, hashes = r->n_hashes, t = 0;
	const cJSON *term;
	bool every = false;

	cJSON_ArrayForEach (term, array(terms)) {
		if (every || !cJSON_IsObject(term) || empty_term(term))
			continue;
		every = t == UINT8_MAX - 1 || !decode_term(r, t++, term);
	}
	if (every || !t) {
		r->n_reqs = reqs; /* the selector's requirements come first */
		r->n_hashes = hashes;
		t = 0;
	}
	r->n_terms = t;
}

static uint8_t toleration_effects(const char *effect)
{
	return !effect || !*effect ? FT_TAINT_NO_SCHEDULE | FT_TAINT_NO_EXECUTE
				   : ft_taint_effect(effect);
}

/* spec.tolerations; more than the rules hold tolerate every taint. */
static void decode_tolerations(ft_node_rules_t *r, const cJSON *list)
{
	const cJSON *e;

	cJSON_ArrayForEach (e, array(list)) {
		const char *key = str_at(e, "key"), *op = str_at(e, "operator");
		bool exists = op && strcmp(op, "Exists") == 0;
		uint8_t effects = toleration_effects(str_at(e, "effect"));
		if (!effects || (!exists && (!key || !*key)))
			continue; /* PreferNoSchedule, or not valid */
		if (exists && (!key || !*key) &&
		    effects == (FT_TAINT_NO_SCHEDULE | FT_TAINT_NO_EXECUTE))
			r->tolerates_all = true;
		if (r->n_tolerations == FT_RULE_TOLERATIONS_MAX) {
			r->tolerates_all = true;
			continue;
		}
		r->tolerations[r->n_tolerations++] = (ft_toleration_t){
		    .hash = exists ? (key && *key ? ft_label_key_hash(key) : 0)
				   : ft_label_hash(key, str_at(e, "value")),
		    .exists = exists,
		    .effects = effects};
	}
}

void ft_codec_node_rules_decode(ft_node_rules_t *out, const cJSON *spec)
{
	memset(out, 0, sizeof(*out));
	decode_selector(out, at(spec, "nodeSelector"));
	decode_terms(out,
		     at(at(at(at(spec, "affinity"), "nodeAffinity"),
			   "requiredDuringSchedulingIgnoredDuringExecution"),
			"nodeSelectorTerms"));
	decode_tolerations(out, at(spec, "tolerations"));
}

static int add_labels(ft_node_labels_t *l, const cJSON *labels)
{
	const cJSON *e;
	int rc = 0;

	cJSON_ArrayForEach (e, object(labels)) {
		if (rc == 0 && cJSON_IsString(e))
			rc = ft_node_labels_add(l, e->string, e->valuestring);
	}
	return rc;
}

static int add_taints(ft_node_labels_t *l, const cJSON *taints)
{
	const cJSON *e;
	int rc = 0;

	cJSON_ArrayForEach (e, array(taints)) {
		const char *key = str_at(e, "key");
		if (rc == 0 && key)
			rc = ft_node_labels_add_taint(
			    l, key, str_at(e, "value"),
			    ft_taint_effect(str_at(e, "effect")));
	}
	return rc;
}

int ft_codec_node_labels_decode(ft_node_labels_t **out, const cJSON *node)
{
	ft_node_labels_t *l = ft_node_labels_new();
	int rc = l ? 0 : ft_error_set(FT_ENOMEM, "out of memory");

	if (rc == 0 &&
	    ((rc = add_labels(l, at(at(node, "metadata"), "labels"))) < 0 ||
	     (rc = add_taints(l, at(at(node, "spec"), "taints"))) < 0)) {
		ft_node_labels_unref(l);
		l = NULL;
	}
	if (l)
		ft_node_labels_seal(l);
	*out = l;
	return rc;
}
