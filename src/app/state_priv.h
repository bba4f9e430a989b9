/*
 * The state's records, shared by the files that implement state.h:
 * state.c (nodes, pods, budgets, assumptions, publishing), state_dra.c
 * (ResourceSlices and ResourceClaims) and state_gang.c (PodGroups and the
 * pods of each gang). Private to src/app.
 */
#ifndef FLEXTOPO_APP_STATE_PRIV_H
#define FLEXTOPO_APP_STATE_PRIV_H

#include <flextopo/state.h>

#include <pthread.h>
#include <stdatomic.h>

#include <uthash.h>

typedef struct pod_rec {
	char *uid;
	ft_pod_t pod;
	bool assumed;
	bool assumed_units;    /* the assumption holds devices or CPUs, not
				  only the pod's requests */
	bool bind_in_flight;   /* assumed, Binding not yet answered */
	bool bind_unknown;     /* a Binding's answer never came: it may land */
	uint64_t bind_sent_ns; /* when that Binding was sent (monotonic) */
	bool observed_only;    /* seen in a filter request, not the watch */
	bool in_mix;	       /* counted in the workload mix */
	char *assumed_node;
	ft_allocation_t assumed_allocation;
	char *linked_node; /* node whose list holds this pod */
	uint64_t mark;
	struct pod_rec *prev, *next;
	/* Its gang's record, and its place on the gang's list of pods. */
	struct gang_rec *gang;
	struct pod_rec *gang_prev, *gang_next;
	UT_hash_handle hh;
} pod_rec_t;

/*
 * A gang (gang.h), by "<source>:<namespace>/<name>": its PodGroup when one
 * is known, and every pod that names it (utlist through pod_rec_t's
 * gang_prev and gang_next). Dropped when it has neither.
 */
typedef struct gang_rec {
	char *key;
	ft_gang_source_t source;
	bool has_group;
	ft_pod_group_t group;
	/* A PodGroup of this name did not decode: its pods are their own
	 * units until a good one replaces it. */
	bool bad_group;
	uint64_t mark;
	struct pod_rec *pods;
	UT_hash_handle hh;
} gang_rec_t;

typedef struct pdb_rec {
	char *key; /* "namespace/name" */
	ft_pdb_t pdb;
	uint64_t mark;
	UT_hash_handle hh;
} pdb_rec_t;

/* A conflict pair reported once, while both pods stay (conflict_note). */
typedef struct conflict_rec {
	char *key; /* "node uid uid" */
	char *uids[2];
	UT_hash_handle hh;
} conflict_rec_t;

/* Conflict notes queued for ft_state_take_conflicts(), at most. */
#define FT_STATE_NOTES_MAX 256

/* A ResourceSlice (resource.k8s.io/v1), by name; linked to its node. */
typedef struct slice_rec {
	char *name;
	ft_dra_slice_t slice;
	char *linked_node;
	uint64_t mark;
	struct slice_rec *prev, *next;
	UT_hash_handle hh;
} slice_rec_t;

/*
 * A ResourceClaim, by uid and by "namespace/name" (`key`; the newest of a
 * name when a deleted claim's event comes after its successor's: `named`);
 * linked to the node of its allocation.
 */
typedef struct claim_rec {
	char *uid;
	char *key;
	bool named;
	ft_dra_claim_t claim;
	/* What the claim holds on its node, as a holding (a claim holder,
	 * ft_pod_t.claim_holder), kept between builds until the claim or the
	 * node's view changes. */
	ft_pod_t holder;
	bool has_holder;
	char *linked_node;
	uint64_t mark;
	struct claim_rec *prev, *next;
	UT_hash_handle hh;
	UT_hash_handle hh_name;
} claim_rec_t;

/* A DeviceClass, by name. */
typedef struct class_rec {
	ft_dra_class_t dc;
	uint64_t mark;
	UT_hash_handle hh;
} class_rec_t;

typedef struct node_rec {
	char *name;
	ft_node_source_t src;
	bool present; /* a Node object exists */
	bool dirty;   /* on the state's dirty list; built at the next publish */
	struct node_rec *dirty_prev, *dirty_next;
	uint64_t mark;
	ft_node_t *built;
	pod_rec_t *pods;     /* utlist of linked pods */
	claim_rec_t *claims; /* utlist of claims allocated on the node */
	slice_rec_t *slices; /* utlist of the node's ResourceSlices */
	/* The DRA view of its slices (dra.h), kept between builds until a
	 * slice, a claim's link or the Node changes (view_stale); NULL with
	 * neither slice nor claim. */
	ft_dra_view_t *view;
	bool view_stale;
	uint64_t view_fingerprint; /* ft_dra_view_fingerprint of `view` */
	UT_hash_handle hh;
} node_rec_t;

struct ft_state {
	const ft_codec_options_t *opts;
	ft_demand_keys_t *demand_keys; /* ft_state_settle_demand() */
	pthread_mutex_t mu;
	pthread_mutex_t snap_mu;
	node_rec_t *nodes;
	pod_rec_t *pods;
	ft_snapshot_t *snapshot;
	uint64_t generation;
	bool membership_changed;
	bool in_replace[FT_KIND_COUNT];
	uint64_t replace_mark[FT_KIND_COUNT];
	slice_rec_t *slices;
	claim_rec_t *claims;
	claim_rec_t *claims_by_name;
	class_rec_t *classes;
	pdb_rec_t *pdbs;
	gang_rec_t *gangs;
	uint64_t next_mark;
	unsigned observed; /* records with observed_only set */
	bool dirty;	   /* some node record is dirty */
	/* The dirty node records (utlist, dirty_prev/dirty_next), so that a
	 * publish visits those alone: a walk of every record cost more than
	 * anything else a watch event did at 5,000 nodes. */
	node_rec_t *dirty_nodes;
	unsigned n_dirty;
	ft_mix_t mix; /* pods as they were first placed on a node */
	conflict_rec_t *conflicts; /* pairs reported */
	ft_conflict_note_t *notes; /* found, not yet taken */
	unsigned n_notes;
	uint64_t conflicts_found;
	/* CLOCK_MONOTONIC nanoseconds of the last snapshot swap. */
	atomic_ullong published_ns;
};

/* Pods remembered from filter requests alone, at most. */

/* Called with state->mu held, as their state.c definitions say. */
node_rec_t *ft_state_node_rec(ft_state_t *state, const char *name, bool create);
void ft_state_node_rec_gc(ft_state_t *state, node_rec_t *r);
/*
 * A record's link to a node's list: ft_state_link() makes the node's
 * record (when new) and sets *linked to a copy of `name` (NULL: out of
 * memory); ft_state_unlink() clears *linked and returns the node's record,
 * if any, for the caller to take the record off its list. After either,
 * ft_state_node_changed() marks the node for a build and drops its record
 * when nothing refers to it any more.
 */
node_rec_t *ft_state_link(ft_state_t *state, const char *name, char **linked);
node_rec_t *ft_state_unlink(ft_state_t *state, char **linked);
void ft_state_node_changed(ft_state_t *state, node_rec_t *n);
/* Put node `n` on, or take it off, the list of those the next publish
 * builds. */
void ft_state_mark_dirty(ft_state_t *state, node_rec_t *n);
void ft_state_clear_dirty(ft_state_t *state, node_rec_t *n);
void ft_state_maybe_publish(ft_state_t *state);

/* state_gang.c: put pod record `r` on its gang's list, after its pod
 * changed (off the one it was on, when that differs). */
void ft_state_gang_link(ft_state_t *state, pod_rec_t *r);
/* state_gang.c: take `r` off its gang's list (the pod is going). */
void ft_state_gang_unlink(ft_state_t *state, pod_rec_t *r);
/* state_gang.c: free every gang record. */
void ft_state_gang_free(ft_state_t *state);
/* state_gang.c: forget the PodGroups of `kind` a relist did not show. */
void ft_state_gang_sweep(ft_state_t *state, ft_kind_t kind, uint64_t mark);
/*
 * state_gang.c: gang `g` of a holding of `node`, added to `gv` with its
 * rules and its running members elsewhere (their budgets, of `budgets`,
 * matched into `pdb`): its 1-based index, or 0 when its pods are their own
 * units (or the view is full, which sets gv->truncated).
 */
uint16_t ft_state_gang_view_add(ft_gang_view_t *gv, ft_pdb_view_t *pdb,
				const ft_pdb_t *const *budgets,
				unsigned n_budgets, const gang_rec_t *g,
				const ft_node_t *node);

/* state_dra.c: free every slice and claim record. */
void ft_state_dra_free(ft_state_t *state);
/* state_dra.c: sweep the slices or claims a relist did not show. */
void ft_state_dra_sweep(ft_state_t *state, ft_kind_t kind, uint64_t mark);
/*
 * state_dra.c: the DRA side of node `n` for its build: the view of its
 * slices (*view, borrowed from the node's record; NULL when it has neither
 * slice nor claim) and the claims allocated there as claim holders
 * (`*holders`, a heap array the caller frees, of `*n_holders` holders
 * borrowed from the claims' records). FT_ENOMEM.
 */
int ft_state_dra_gather(ft_state_t *state, node_rec_t *n,
			const ft_dra_view_t **view, const ft_pod_t ***holders,
			unsigned *n_holders);
/* state_dra.c: claims linked to a node (allocated there). */
unsigned ft_state_dra_claims_linked(ft_state_t *state);
/* state_dra.c: forget node `n`'s cached view (its Node changed). */
void ft_state_dra_stale(node_rec_t *n);
/* state_dra.c: the view alone, borrowed as above. */
int ft_state_dra_view(ft_state_t *state, node_rec_t *n,
		      const ft_dra_view_t **view);
/*
 * state_dra.c: the claims allocated on node `n` that `pod` uses (by name in
 * its namespace, ft_pod_t.claims), at most `cap`, borrowed until the state
 * lock is released.
 */
unsigned ft_state_dra_pod_claims(node_rec_t *n, const ft_pod_t *pod,
				 const ft_dra_claim_t **out, unsigned cap);

#endif
