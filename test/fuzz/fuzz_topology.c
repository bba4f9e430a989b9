/*
 * Fuzz target for the topology annotation parser (our schema and the
 * authors' FlexTopo graph). Any input must either give a finished topology
 * whose positions and masks stay inside the model's bounds, or fail with
 * FT_EINVAL (FT_ENOMEM under memory pressure) and no topology; never crash
 * or leak.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <flextopo/codec.h>
#include <flextopo/error.h>
#include <flextopo/topology.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A GPU's NUMA node and socket: positions, or FT_NONE when unknown. */
static bool placed_ok(const ft_topology_t *t, unsigned g)
{
	const ft_gpu_t *gpu = &t->gpus[g];

	if (!((t->unplaced_gpus >> g) & 1))
		return gpu->numa < t->n_numa && gpu->socket < t->n_sockets;
	return gpu->numa == FT_NONE && gpu->pcie_switch == FT_NONE &&
	       (gpu->socket == FT_NONE || gpu->socket < t->n_sockets);
}

static void check_gpus(const ft_topology_t *t)
{
	uint16_t all = (uint16_t)((1u << t->n_gpus) - 1);

	if ((t->whole_gpus | t->reserved_gpus | t->unplaced_gpus) & ~all ||
	    (t->numa_memory_unknown & ~((1u << t->n_numa) - 1)))
		abort();
	for (unsigned g = 0; g < t->n_gpus; g++) {
		const ft_gpu_t *gpu = &t->gpus[g];
		if (!placed_ok(t, g) ||
		    (gpu->pcie_switch != FT_NONE &&
		     gpu->pcie_switch >= t->n_switches) ||
		    (gpu->nvlink_peers & ~all) ||
		    (gpu->nvlink_peers & (1u << g)))
			abort();
	}
	for (unsigned i = 0; i < t->n_mig; i++)
		if (t->mig[i].gpu >= t->n_gpus ||
		    t->mig[i].start + t->mig[i].size > FT_MIG_SLICES)
			abort();
}

static void check_domains(const ft_topology_t *t)
{
	if (t->level_first[0] != 0 ||
	    t->level_first[FT_LEVEL_COUNT] != t->n_domains ||
	    t->level_first[FT_LEVEL_NODE + 1] - t->level_first[FT_LEVEL_NODE] !=
		1)
		abort();
	for (unsigned l = 0; l < FT_LEVEL_COUNT; l++)
		if (t->level_first[l] > t->level_first[l + 1])
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ft_topology_t *t = NULL;
	int rc = ft_codec_topology_parse(&t, (const char *)data, size);

	if (rc == 0) {
		if (!t || t->n_numa == 0)
			abort();
		check_gpus(t);
		check_domains(t);
	} else if (t || (rc != FT_EINVAL && rc != FT_ENOMEM)) {
		abort();
	}
	ft_topology_unref(t);
	return 0;
}
