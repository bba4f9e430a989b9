/*
 * The MIG catalog: for each MIG-capable GPU product, the GPU Instance
 * profiles it offers (compute and memory slices, valid start slots, how many
 * fit, memory) and the precisions it supports. The facts and their sources
 * are in configs/mig-catalog.yaml, which is built into the binary
 * (NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles").
 *
 * Geometry: 7 compute slices and 8 memory slices per GPU; an instance sits at
 * {start}:{memory slices} on the memory-slice axis. Pure; owns its strings.
 */
#ifndef FLEXTOPO_MIG_H
#define FLEXTOPO_MIG_H

#include <stddef.h>
#include <stdint.h>

#include "topology.h"

#define FT_MIG_PROFILES_MAX 16
#define FT_MIG_MODELS_MAX   8

typedef enum {
	FT_PRECISION_FP64 = 1u << 0,
	FT_PRECISION_TF32 = 1u << 1,
	FT_PRECISION_BF16 = 1u << 2,
	FT_PRECISION_FP16 = 1u << 3,
	FT_PRECISION_FP8 = 1u << 4,
	FT_PRECISION_INT8 = 1u << 5,
	FT_PRECISION_FP4 = 1u << 6,
} ft_precision_t;

/* "fp8" -> FT_PRECISION_FP8; 0 when unknown. */
unsigned ft_precision_parse(const char *name);
/* FT_PRECISION_FP8 -> "fp8"; the lowest bit set counts; "?" for none. */
const char *ft_precision_name(unsigned bits);

typedef struct ft_mig_profile {
	char *name; /* "3g.40gb" */
	uint8_t compute_slices;
	uint8_t memory_slices;
	uint8_t starts; /* bit s: start slot s is valid */
	uint8_t max_instances;
	uint64_t memory_mib; /* nominal, from the profile name */
} ft_mig_profile_t;

typedef struct ft_mig_gpu {
	char *name; /* "H100-80GB" */
	unsigned n_models;
	char *models[FT_MIG_MODELS_MAX]; /* substrings of the GPU model name */
	uint64_t memory_mib;
	unsigned precisions; /* ft_precision_t bits */
	unsigned n_profiles;
	ft_mig_profile_t profiles[FT_MIG_PROFILES_MAX];
} ft_mig_gpu_t;

typedef struct ft_mig_catalog {
	unsigned n_gpus;
	ft_mig_gpu_t *gpus;
} ft_mig_catalog_t;

void ft_mig_catalog_dispose(ft_mig_catalog_t *c);

/* The catalog entry whose model substrings match `model`, or NULL. */
const ft_mig_gpu_t *ft_mig_catalog_find(const ft_mig_catalog_t *c,
					const char *model);

/* A profile of `gpu` by name, or NULL. */
const ft_mig_profile_t *ft_mig_gpu_profile(const ft_mig_gpu_t *gpu,
					   const char *name);

/*
 * Check every MIG instance of `t` against the catalog: the profile exists
 * for the GPU's product, the start slot is valid for it, the size is its
 * memory-slice count, and no profile has more instances than allowed.
 * GPUs whose product the catalog does not know are left to the generic
 * checks of ft_topology_finish(). FT_EINVAL naming the GPU and instance.
 */
int ft_mig_catalog_check(const ft_mig_catalog_t *c, const ft_topology_t *t);

/*
 * Record on `t` what the catalog knows, for capability matching: each GPU's
 * precisions and each MIG instance's memory. A GPU whose product the catalog
 * does not know keeps precisions 0 (it then meets no precision requirement)
 * and its instances keep the nominal memory of their profile names. Call
 * before `t` is shared: it writes into a finished topology. `c` may be NULL.
 */
void ft_mig_catalog_apply(const ft_mig_catalog_t *c, ft_topology_t *t);

#endif
