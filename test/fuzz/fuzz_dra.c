/*
 * Fuzz target for the DRA decoders (resource.k8s.io/v1 ResourceSlice,
 * ResourceClaim and DeviceClass, from the watch): the input is parsed as
 * JSON and decoded as each; what decodes is matched to a fixed two-GPU topology
 * and the claim's units worked out. Any input must decode into a consistent
 * object or fail with FT_EINVAL (FT_ENOMEM under memory pressure) and nothing
 * held; never crash or leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include <flextopo/codec.h>
#include <flextopo/dra.h>
#include <flextopo/error.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Two NUMA nodes, a GPU each, "GPU-a" and "GPU-b". */
static const char topology_text[] =
    "{\"version\":1,\"sockets\":[{\"id\":0,\"numaNodes\":[{\"id\":0,\"cpus\":\"0-3\",\"memoryMiB\":1024,\"gpus\":[{\"index\":0,\"uuid\":\"GPU-a\"}]},{\"id\":1,\"cpus\":\"4-7\",\"memoryMiB\":1024,\"gpus\":[{\"index\":1,\"uuid\":\"GPU-b\"}]}]}]}";

static void check_slice(const ft_dra_slice_t *s)
{
	if (!s->name || !s->driver || !s->pool || s->slice_count < 1)
		abort();
	for (unsigned i = 0; i < s->n_devices; i++) {
		const ft_dra_device_t *d = &s->devices[i];
		if (!d->name || d->slice_start > 7 ||
		    d->numa_node < FT_DRA_NO_NUMA || d->numa_node > 255)
			abort();
	}
}

static void check_claim(const ft_dra_claim_t *c)
{
	if (!c->uid || !c->name || !c->ns || (!c->allocated && c->n_results))
		abort();
	for (unsigned i = 0; i < c->n_results; i++)
		if (!c->results[i].driver || !c->results[i].pool ||
		    !c->results[i].device)
			abort();
	for (unsigned i = 0; i < c->n_consumers; i++)
		if (!c->consumers[i].uid)
			abort();
}

/* Match what decoded as a slice, then hold what decoded as a claim. */
static void exercise(const ft_dra_slice_t *s, const ft_dra_claim_t *c)
{
	ft_topology_t *t = NULL;
	const ft_dra_slice_t *list[1] = {s};
	ft_dra_view_t *view = malloc(sizeof(*view));
	ft_allocation_t units;

	if (!view || ft_codec_topology_parse(&t, topology_text,
					     strlen(topology_text)) < 0)
		abort();
	ft_dra_view_build(view, s ? s->node : "n", t, list, s ? 1 : 0,
			  s ? s->driver : FT_DRA_DRIVER_NVIDIA, 0);
	if (view->n_units > FT_DRA_UNITS_MAX)
		abort();
	if (c && ft_dra_claim_units(&units, NULL, c, view,
				    FT_DRA_DRIVER_NVIDIA) == 0) {
		ft_allocation_dispose(&units);
	}
	free(view);
	ft_topology_unref(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *root = cJSON_ParseWithLength((const char *)data, size);
	ft_dra_slice_t s;
	ft_dra_claim_t c;
	ft_dra_class_t dc;
	bool slice_ok, claim_ok;

	if (!root)
		return 0;
	slice_ok = ft_codec_dra_slice_decode(&s, root) == 0;
	claim_ok = ft_codec_dra_claim_decode(&c, root) == 0;
	if (slice_ok)
		check_slice(&s);
	if (claim_ok)
		check_claim(&c);
	exercise(slice_ok ? &s : NULL, claim_ok ? &c : NULL);
	if (slice_ok)
		ft_dra_slice_dispose(&s);
	if (claim_ok)
		ft_dra_claim_dispose(&c);
	if (ft_codec_dra_class_decode(&dc, root, FT_DRA_DRIVER_NVIDIA) == 0) {
		if (!dc.name || dc.kind > FT_DRA_MIG)
			abort();
		ft_dra_class_dispose(&dc);
	}
	cJSON_Delete(root);
	return 0;
}
