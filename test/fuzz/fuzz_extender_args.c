/*
 * Fuzz target for the ExtenderArgs decoder (the body of every filter and
 * prioritize request) and, when it succeeds, the Pod decoder over its "Pod"
 * and the reply encoders over its node list. Any input must either decode
 * into consistent arguments or fail with FT_EINVAL (FT_ENOMEM under memory
 * pressure) and nothing held; never crash or leak. The decoder's fast path
 * must agree with one cJSON parse of the whole body
 * (ft_codec_extender_args_decode_tree): the same code and message, names,
 * Pod and Node objects.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <flextopo/codec.h>
#include <flextopo/error.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The defaults of configs/flextopo.yaml. */
static const ft_codec_options_t opts = {.annotation_prefix = "flextopo.io",
					.gpu_resource = "nvidia.com/gpu",
					.mig_resource_prefix =
					    "nvidia.com/mig-",
					.default_mode = FT_MODE_GUARANTEED};

static void check_args(const ft_extender_args_t *a)
{
	if (!a->root || !cJSON_IsObject(a->pod))
		abort();
	if (a->n_nodes && !a->node_names)
		abort();
	if (a->node_cache_capable != (a->node_objects == NULL))
		abort();
	for (unsigned i = 0; i < a->n_nodes; i++)
		if (!a->node_names[i] ||
		    (a->node_objects && !cJSON_IsObject(a->node_objects[i]) &&
		     !a->node_objects[i]))
			abort();
}

static void check_pod(const ft_pod_t *pod)
{
	if (!pod->uid || !pod->name || !pod->ns)
		abort();
	if (pod->node && !pod->node[0])
		abort();
	if (pod->demand.mig_count && !pod->demand.mig_profile[0])
		abort();
	if (pod->demand.exclusive_cpus * 1000ull > pod->demand.cpu_millis)
		abort();
	if (pod->has_allocation && pod->allocation_error)
		abort();
	if (pod->allocation.n_gpus > FT_GPU_MAX ||
	    pod->allocation.n_mig > FT_ALLOC_MIG_MAX)
		abort();
}

/* Every other node passes; the reply must print. */
static void encode_replies(const ft_extender_args_t *a)
{
	ft_filter_reply_t *r = NULL;
	char *out = NULL;
	int *scores;

	if (ft_codec_filter_reply_new(&r, a) < 0)
		return;
	for (unsigned i = 0; i < a->n_nodes; i++) {
		if (i % 2 == 0)
			ft_codec_filter_reply_pass(r, i);
		else
			ft_codec_filter_reply_fail(r, i, "fuzz", i % 4 == 1);
	}
	if (ft_codec_filter_reply_finish(&out, r) == 0 && !out)
		abort();
	free(out);
	out = NULL;
	scores = calloc(a->n_nodes ? a->n_nodes : 1, sizeof(*scores));
	if (scores && ft_codec_priorities_encode(&out, a, scores) == 0 && !out)
		abort();
	free(out);
	free(scores);
}

static bool same_json(const cJSON *a, const cJSON *b)
{
	char *x = cJSON_PrintUnformatted(a), *y = cJSON_PrintUnformatted(b);
	bool same = x && y && strcmp(x, y) == 0;

	free(x);
	free(y);
	return same;
}

static void agree(const ft_extender_args_t *fast, int fast_rc,
		  const char *fast_error, const char *data, size_t size)
{
	ft_extender_args_t tree;
	int rc = ft_codec_extender_args_decode_tree(&tree, data, size);

	if (rc != fast_rc || (rc < 0 && strcmp(ft_error_last(), fast_error)))
		abort();
	if (rc < 0)
		return;
	if (tree.n_nodes != fast->n_nodes ||
	    tree.node_cache_capable != fast->node_cache_capable ||
	    !same_json(tree.pod, fast->pod) ||
	    !tree.node_objects != !fast->node_objects)
		abort();
	for (unsigned i = 0; i < tree.n_nodes; i++)
		if (strcmp(tree.node_names[i], fast->node_names[i]) ||
		    (tree.node_objects &&
		     !same_json(tree.node_objects[i], fast->node_objects[i])))
			abort();
	ft_codec_extender_args_dispose(&tree);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char error[4096];
	ft_extender_args_t args;
	ft_pod_t pod;
	int rc = ft_codec_extender_args_decode(&args, (const char *)data, size);

	snprintf(error, sizeof(error), "%s", rc < 0 ? ft_error_last() : "");
	agree(&args, rc, error, (const char *)data, size);
	if (rc < 0) {
		if (args.root || args.node_names || args.node_objects ||
		    (rc != FT_EINVAL && rc != FT_ENOMEM))
			abort();
		return 0;
	}
	check_args(&args);
	rc = ft_codec_pod_decode(&pod, args.pod, &opts);
	if (rc == 0) {
		check_pod(&pod);
		ft_pod_dispose(&pod);
	} else if (pod.uid || (rc != FT_EINVAL && rc != FT_ENOMEM)) {
		abort();
	}
	encode_replies(&args);
	ft_codec_extender_args_dispose(&args);
	return 0;
}
