/*
 * Preemption wire types (k8s.io/kube-scheduler/extender/v1, types.go):
 * ExtenderPreemptionArgs in, ExtenderPreemptionResult out.
 *
 * With nodeCacheCapable the scheduler sends NodeNameToMetaVictims (victims by
 * UID); without it NodeNameToVictims (full Pods). The reply always uses
 * NodeNameToMetaVictims, which the scheduler reads in both modes
 * (pkg/scheduler/extender.go, ProcessPreemption).
 */
#include <flextopo/codec.h>
#include <flextopo/error.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const char *victim_uid(const cJSON *victim)
{
	const cJSON *meta = cJSON_GetObjectItem(victim, "metadata");
	const cJSON *uid = cJSON_GetObjectItem(meta ? meta : victim, "UID");

	return cJSON_IsString(uid) ? uid->valuestring : NULL;
}

/*
 * A count from a JSON number: 0 for anything but a positive number, UINT_MAX
 * for one too big for unsigned (converting it would be undefined).
 */
static unsigned count_of(const cJSON *n)
{
	if (!cJSON_IsNumber(n) || !(n->valuedouble > 0))
		return 0;
	return n->valuedouble < (double)UINT_MAX ? (unsigned)n->valuedouble
						 : UINT_MAX;
}

static int decode_node(ft_preempt_node_t *out, const cJSON *entry)
{
	const cJSON *pods = cJSON_GetObjectItem(entry, "Pods");
	const cJSON *pdb = cJSON_GetObjectItem(entry, "NumPDBViolations");
	const cJSON *v;
	unsigned n = (unsigned)cJSON_GetArraySize(pods);

	out->name = entry->string;
	out->pdb_violations = count_of(pdb);
	if (pods && !cJSON_IsArray(pods) && !cJSON_IsNull(pods))
		return ft_error_set(FT_EINVAL, "%s.Pods: expected an array",
				    out->name);
	out->victim_uids = calloc(n ? n : 1, sizeof(*out->victim_uids));
	if (!out->victim_uids)
		return ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach (v, pods) {
		const char *uid = victim_uid(v);
		if (!uid)
			return ft_error_set(
			    FT_EINVAL,
			    "%s.Pods[%u]: no UID (metadata.uid or UID)",
			    out->name, out->n_victims);
		out->victim_uids[out->n_victims++] = uid;
	}
	return 0;
}

static int decode_map(ft_preempt_args_t *out, const cJSON *map)
{
	const cJSON *entry;
	unsigned n = (unsigned)cJSON_GetArraySize(map);
	int rc;

	if (!cJSON_IsObject(map))
		return ft_error_set(
		    FT_EINVAL, "NodeNameToMetaVictims: expected an object");
	out->nodes = calloc(n ? n : 1, sizeof(*out->nodes));
	if (!out->nodes)
		return ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach (entry, map) {
		if ((rc = decode_node(&out->nodes[out->n_nodes++], entry)) < 0)
			return rc;
	}
	return 0;
}

int ft_codec_preempt_args_decode(ft_preempt_args_t *out, const char *body,
				 size_t len)
{
	const char *end = NULL;
	const cJSON *meta, *full;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->root = cJSON_ParseWithLengthOpts(body, len, &end, false);
	if (!cJSON_IsObject(out->root)) {
		rc =
		    ft_error_set(FT_EINVAL, out->root ? "expected a JSON object"
						      : "malformed JSON");
		goto cleanup;
	}
	out->pod = cJSON_GetObjectItem(out->root, "Pod");
	meta = cJSON_GetObjectItem(out->root, "NodeNameToMetaVictims");
	full = cJSON_GetObjectItem(out->root, "NodeNameToVictims");
	if (!cJSON_IsObject(out->pod))
		rc = ft_error_set(FT_EINVAL, "Pod: expected a Pod object");
	else if (meta && !cJSON_IsNull(meta))
		rc = decode_map(out, meta);
	else if (full && !cJSON_IsNull(full))
		rc = decode_map(out, full);
cleanup:
	if (rc < 0)
		ft_codec_preempt_args_dispose(out);
	return rc;
}

void ft_codec_preempt_args_dispose(ft_preempt_args_t *args)
{
	if (!args)
		return;
	for (unsigned i = 0; i < args->n_nodes; i++)
		free(args->nodes[i].victim_uids);
	free(args->nodes);
	cJSON_Delete(args->root);
	memset(args, 0, sizeof(*args));
}

struct ft_preempt_reply {
	cJSON *root;
	cJSON *map;
};

int ft_codec_preempt_reply_new(ft_preempt_reply_t **out)
{
	ft_preempt_reply_t *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r || !(r->root = cJSON_CreateObject()) ||
	    !(r->map =
		  cJSON_AddObjectToObject(r->root, "NodeNameToMetaVictims"))) {
		ft_codec_preempt_reply_free(r);
		return ft_error_set(FT_ENOMEM, "out of memory");
	}
	*out = r;
	return 0;
}

int ft_codec_preempt_reply_node(ft_preempt_reply_t *r, const char *node,
				const char *const *uids, unsigned n,
				unsigned pdb_violations)
{
	cJSON *entry = cJSON_AddObjectToObject(r->map, node);
	cJSON *pods = entry ? cJSON_AddArrayToObject(entry, "Pods") : NULL;

	for (unsigned i = 0; pods && i < n; i++) {
		cJSON *v = cJSON_CreateObject();
		if (!v || !cJSON_AddItemToArray(pods, v) ||
		    !cJSON_AddStringToObject(v, "UID", uids[i]))
			pods = NULL;
	}
	if (!pods ||
	    !cJSON_AddNumberToObject(entry, "NumPDBViolations", pdb_violations))
		return ft_error_set(FT_ENOMEM, "out of memory");
	return 0;
}

void ft_codec_preempt_reply_drop(ft_preempt_reply_t *r, const char *node)
{
	cJSON_DeleteItemFromObjectCaseSensitive(r->map, node);
}

int ft_codec_preempt_reply_finish(char **out, ft_preempt_reply_t *r)
{
	*out = cJSON_PrintUnformatted(r->root);
	ft_codec_preempt_reply_free(r);
	return *out ? 0 : ft_error_set(FT_ENOMEM, "out of memory");
}

void ft_codec_preempt_reply_free(ft_preempt_reply_t *r)
{
	if (!r)
		return;
	cJSON_Delete(r->root);
	free(r);
}
