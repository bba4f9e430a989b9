/*
 * kube-scheduler extender wire types (k8s.io/kube-scheduler/extender/v1,
 * types.go): ExtenderArgs, ExtenderFilterResult, HostPriorityList,
 * ExtenderBindingArgs and ExtenderBindingResult.
 *
 * Keys are the Go field names. The scheduler decodes them case-insensitively,
 * and so do we (cJSON_GetObjectItem is case-insensitive). Lists in replies are
 * never null: a null node list would reject every node (extender.go, Filter).
 */
#include <flextopo/codec.h>
#include <flextopo/error.h>

#include <stdlib.h>
#include <string.h>

static int parse_object(cJSON **out, const char *body, size_t len)
{
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);

	*out = NULL;
	if (!root)
		return ft_error_set(FT_EINVAL, "malformed JSON at offset %ld",
				    end ? (long)(end - body) : 0L);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return ft_error_set(FT_EINVAL, "expected a JSON object");
	}
	*out = root;
	return 0;
}

static int decode_node_names(ft_extender_args_t *out, const cJSON *names)
{
	const cJSON *item;
	unsigned n = (unsigned)cJSON_GetArraySize(names);

	if (!cJSON_IsArray(names))
		return ft_error_set(FT_EINVAL, "NodeNames: expected an array");
	out->node_cache_capable = true;
	out->node_names = calloc(n ? n : 1, sizeof(*out->node_names));
	if (!out->node_names)
		return ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach(item, names)
	{
		if (!cJSON_IsString(item))
			return ft_error_set(FT_EINVAL,
					    "NodeNames[%u]: expected "
					    "a string",
					    out->n_nodes);
		out->node_names[out->n_nodes++] = item->valuestring;
	}
	return 0;
}

static const char *node_name(const cJSON *node)
{
	const cJSON *meta = cJSON_GetObjectItem(node, "metadata");
	const cJSON *name = cJSON_GetObjectItem(meta, "name");

	return cJSON_IsString(name) ? name->valuestring : NULL;
}

static int decode_nodes(ft_extender_args_t *out, const cJSON *nodes)
{
	const cJSON *items = cJSON_GetObjectItem(nodes, "items"), *item;
	unsigned n = (unsigned)cJSON_GetArraySize(items);

	if (!cJSON_IsObject(nodes) ||
	    (items && !cJSON_IsArray(items) && !cJSON_IsNull(items)))
		return ft_error_set(FT_EINVAL, "Nodes: expected a "
					       "NodeList");
	out->node_names = calloc(n ? n : 1, sizeof(*out->node_names));
	out->node_objects = calloc(n ? n : 1, sizeof(*out->node_objects));
	if (!out->node_names || !out->node_objects)
		return ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach(item, items)
	{
		const char *name = node_name(item);
		if (!name)
			return ft_error_set(FT_EINVAL,
					    "Nodes.items[%u]: "
					    "metadata.name missing",
					    out->n_nodes);
		out->node_objects[out->n_nodes] = item;
		out->node_names[out->n_nodes++] = name;
	}
	return 0;
}

int ft_codec_extender_args_decode(ft_extender_args_t *out, const char *body,
				  size_t len)
{
	const cJSON *names, *nodes;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = parse_object(&out->root, body, len)) < 0)
		return rc;
	out->pod = cJSON_GetObjectItem(out->root, "Pod");
	names = cJSON_GetObjectItem(out->root, "NodeNames");
	nodes = cJSON_GetObjectItem(out->root, "Nodes");
	if (!cJSON_IsObject(out->pod))
		rc = ft_error_set(FT_EINVAL, "Pod: expected a Pod "
					     "object");
	else if (names && !cJSON_IsNull(names))
		rc = decode_node_names(out, names);
	else if (nodes && !cJSON_IsNull(nodes))
		rc = decode_nodes(out, nodes);
	else
		out->node_cache_capable = true;
	if (rc < 0)
		ft_codec_extender_args_dispose(out);
	return rc;
}

void ft_codec_extender_args_dispose(ft_extender_args_t *args)
{
	if (!args)
		return;
	cJSON_Delete(args->root);
	free(args->node_names);
	free(args->node_objects);
	memset(args, 0, sizeof(*args));
}

static int dup_field(char **dst, const cJSON *root, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(root, key);

	if (!cJSON_IsString(v) || !v->valuestring[0])
		return ft_error_set(FT_EINVAL,
				    "%s: expected a non-empty string", key);
	if (!(*dst = strdup(v->valuestring)))
		return ft_error_set(FT_ENOMEM, "out of memory");
	return 0;
}

int ft_codec_bind_args_decode(ft_bind_args_t *out, const char *body, size_t len)
{
	cJSON *root = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = parse_object(&root, body, len)) < 0)
		goto cleanup;
	if ((rc = dup_field(&out->pod_name, root, "PodName")) < 0 ||
	    (rc = dup_field(&out->pod_namespace, root, "PodNamespace")) < 0 ||
	    (rc = dup_field(&out->pod_uid, root, "PodUID")) < 0 ||
	    (rc = dup_field(&out->node, root, "Node")) < 0)
		ft_codec_bind_args_dispose(out);
cleanup:
	cJSON_Delete(root);
	return rc;
}

void ft_codec_bind_args_dispose(ft_bind_args_t *args)
{
	if (!args)
		return;
	free(args->pod_name);
	free(args->pod_namespace);
	free(args->pod_uid);
	free(args->node);
	memset(args, 0, sizeof(*args));
}

struct ft_filter_reply {
	const ft_extender_args_t *args;
	cJSON *root;
	cJSON *names; /* NodeNames (cache mode) */
	cJSON *items; /* Nodes.items (full-object mode) */
	cJSON *failed;
	cJSON *unresolvable;
	cJSON *error;
};

static bool build_lists(ft_filter_reply_t *r)
{
	cJSON *nodes;

	if (r->args->node_cache_capable) {
		r->names = cJSON_AddArrayToObject(r->root, "NodeNames");
		return r->names && cJSON_AddNullToObject(r->root, "Nodes");
	}
	nodes = cJSON_AddObjectToObject(r->root, "Nodes");
	r->items = nodes ? cJSON_AddArrayToObject(nodes, "items") : NULL;
	return r->items && cJSON_AddNullToObject(r->root, "NodeNames");
}

int ft_codec_filter_reply_new(ft_filter_reply_t **out,
			      const ft_extender_args_t *args)
{
	ft_filter_reply_t *r = calloc(1, sizeof(*r));
	int rc = 0;

	*out = NULL;
	if (!r || !(r->root = cJSON_CreateObject())) {
		rc = ft_error_set(FT_ENOMEM, "out of memory");
		goto cleanup;
	}
	r->args = args;
	if (!build_lists(r) ||
	    !(r->failed = cJSON_AddObjectToObject(r->root, "FailedNodes")) ||
	    !(r->unresolvable = cJSON_AddObjectToObject(
		  r->root, "FailedAndUnresolvableNodes")) ||
	    !(r->error = cJSON_AddStringToObject(r->root, "Error", ""))) {
		rc = ft_error_set(FT_ENOMEM, "out of memory");
		goto cleanup;
	}
	*out = r;
	r = NULL;
cleanup:
	ft_codec_filter_reply_free(r);
	return rc;
}

int ft_codec_filter_reply_pass(ft_filter_reply_t *r, unsigned i)
{
	cJSON *item;

	if (r->names)
		item = cJSON_CreateString(r->args->node_names[i]);
	else
		item = cJSON_Duplicate(r->args->node_objects[i], true);
	if (!item ||
	    !cJSON_AddItemToArray(r->names ? r->names : r->items, item)) {
		cJSON_Delete(item);
		return ft_error_set(FT_ENOMEM, "out of memory");
	}
	return 0;
}

int ft_codec_filter_reply_fail(ft_filter_reply_t *r, unsigned i,
			       const char *reason, bool unresolvable)
{
	if (!cJSON_AddStringToObject(unresolvable ? r->unresolvable : r->failed,
				     r->args->node_names[i], reason))
		return ft_error_set(FT_ENOMEM, "out of memory");
	return 0;
}

int ft_codec_filter_reply_error(ft_filter_reply_t *r, const char *error)
{
	cJSON *v = cJSON_CreateString(error);

	if (!v || !cJSON_ReplaceItemInObjectCaseSensitive(r->root, "Error", v)) {
		cJSON_Delete(v);
		return ft_error_set(FT_ENOMEM, "out of memory");
	}
	r->error = v;
	return 0;
}

int ft_codec_filter_reply_finish(char **out, ft_filter_reply_t *r)
{
	*out = cJSON_PrintUnformatted(r->root);
	ft_codec_filter_reply_free(r);
	return *out ? 0 : ft_error_set(FT_ENOMEM, "out of memory");
}

void ft_codec_filter_reply_free(ft_filter_reply_t *r)
{
	if (!r)
		return;
	cJSON_Delete(r->root);
	free(r);
}

int ft_codec_priorities_encode(char **out, const ft_extender_args_t *args,
			       const int *scores)
{
	cJSON *list = cJSON_CreateArray();
	int rc = 0;

	*out = NULL;
	for (unsigned i = 0; list && i < args->n_nodes; i++) {
		cJSON *host = cJSON_CreateObject();
		if (!host || !cJSON_AddItemToArray(list, host) ||
		    !cJSON_AddStringToObject(host, "Host",
					     args->node_names[i]) ||
		    !cJSON_AddNumberToObject(host, "Score", scores[i])) {
			rc = ft_error_set(FT_ENOMEM, "out of memory");
			goto cleanup;
		}
	}
	if (!list || !(*out = cJSON_PrintUnformatted(list)))
		rc = ft_error_set(FT_ENOMEM, "out of memory");
cleanup:
	cJSON_Delete(list);
	return rc;
}

int ft_codec_bind_result_encode(char **out, const char *error)
{
	cJSON *root = cJSON_CreateObject();
	int rc = 0;

	*out = NULL;
	if (!root ||
	    !cJSON_AddStringToObject(root, "Error", error ? error : "") ||
	    !(*out = cJSON_PrintUnformatted(root)))
		rc = ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_Delete(root);
	return rc;
}
