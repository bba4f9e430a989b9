/*
 * What place.c (filter, score, choose) and place_reason.c (the refusal
 * texts) share. Private to src/core.
 */
#ifndef FLEXTOPO_CORE_PLACE_PRIV_H
#define FLEXTOPO_CORE_PLACE_PRIV_H

#include <flextopo/place.h>

typedef ft_room_t room_t;

/* One request on one node: the adapted demand, its units and the policy. */
typedef struct {
	const ft_node_t *node;
	const ft_topology_t *t;
	ft_units_t u; /* u.demand is the demand used throughout */
	ft_policy_t policy;
} ask_t;

/* The units of one kind on a node, and those meeting the capabilities. */
typedef struct {
	bool mig;	/* MIG instances of the demand's profile, else GPUs */
	unsigned total; /* units of the kind */
	unsigned matching;	/* of them, those meeting the capabilities */
	unsigned need;		/* units the demand asks */
	int unit[FT_CAP_COUNT]; /* per capability, the first unit failing it */
} caps_count_t;

/* place.c: the units, capabilities and room of a request. */
uint64_t place_cap_asked(const ft_caps_t *c, unsigned k);
room_t place_domain_room(const ask_t *a, const ft_domain_t *dom,
			 bool ignore_usage);
bool place_of_kind(const ft_topology_t *t, const ft_demand_t *d, bool mig,
		   unsigned i);
bool place_room_fits_memory(room_t r, const ft_demand_t *d);
bool place_room_fits_units(room_t r, const ft_demand_t *d);
unsigned place_unit_faults(const ft_topology_t *t, const ft_caps_t *c, bool mig,
			   unsigned i);
uint64_t place_unit_has(const ft_topology_t *t, bool mig, unsigned i,
			unsigned k);

/* place_reason.c: why a request does not fit, as filter's reason. */
bool place_caps_short(caps_count_t *out, const ask_t *a);
void place_describe_caps(char *buf, size_t size, const ask_t *a,
			 const caps_count_t *c);
void place_describe_shortfall(char *buf, size_t size, const ask_t *a,
			      ft_level_t level, bool ignore_usage);

#endif
