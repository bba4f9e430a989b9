/*
 * flextopo-bench's synthetic cluster (synth.c): v1 Node and Pod objects for
 * nodes cycling through the three reference servers of api/examples/, the
 * pods that fill them, and the pending pods kube-scheduler asks about.
 *
 * A node's GPU and MIG uuids get a suffix of its own, so that no two nodes
 * share one. Fill pods carry a flextopo.io/allocation annotation, a
 * priority and a status.startTime; the priorities and start times come
 * from a random stream of their own, so the fill does not depend on them.
 * One seed builds the same cluster every time.
 */
#ifndef FLEXTOPO_BENCH_SYNTH_H
#define FLEXTOPO_BENCH_SYNTH_H

#include <flextopo/codec.h>
#include <flextopo/state.h>

#include <cjson/cJSON.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bench_options bench_options_t;
typedef struct result result_t;

#define KINDS	     3
#define SHAPES	     4
#define PSHAPES	     4
#define NAME_MAX_LEN 32
/* The name and uid of a pod asked about; bench_request_set_pod patches its
 * last TOKEN_DIGITS digits. */
#define POD_TOKEN    "bench-pod-00000000"
#define TOKEN_DIGITS 8

/* Pods of the cluster have priorities 0..FILL_PRIORITY_MAX (their own random
 * stream), the preemptor PREEMPTOR_PRIORITY: every pod is a candidate. */
#define FILL_PRIORITY_MAX  100
#define PREEMPTOR_PRIORITY 1000
/* Tiered priorities: pods holding GPUs or MIG instances get this much more
 * (inference above batch), still below the preemptor. */
#define TIERED_PRIORITY 500
/* Pods per node with --packed, as the victim search alone packs them. */
#define PACKED_PODS 60

/* A server of api/examples/. */
typedef struct kind {
	const char *file;  /* under api/examples/ */
	const char *label; /* in node names */
} kind_t;

extern const kind_t kinds[KINDS];

/* A pod kube-scheduler asks about. */
typedef struct shape {
	const char *name;
	const char *affinity; /* flextopo.io/affinity */
	const char *mode;     /* flextopo.io/affinity-mode */
	const char *cpu;
	const char *memory;
	unsigned gpus;		 /* whole GPUs */
	const char *mig_profile; /* one instance of it, or NULL */
	bool limits;		 /* limits = requests: Guaranteed QoS, so an
				    integer CPU request is pinned */
} shape_t;

/* The pods of filter and prioritize; the iterations rotate through them. */
extern const shape_t shapes[SHAPES];
/* Preemptors, of priority PREEMPTOR_PRIORITY. */
extern const shape_t pshapes[PSHAPES];

typedef struct generator {
	cJSON *templates[KINDS];
	uint64_t rng;
	uint64_t prio_rng; /* priorities and start times: a stream of their
			      own, so that the fill does not depend on them */
	const ft_codec_options_t *opts;
	unsigned pods;
	unsigned memory_pct;	 /* memory of a pinned pod: this share of its
				    CPUs' part of the NUMA node's memory */
	int32_t device_priority; /* added to pods holding GPUs or MIG */
	bool equal_priority;	 /* every pod of priority 0 */
	bool packed;		 /* packed nodes instead of half-filled ones */
	unsigned packed_pods;	 /* pods per packed node */
} generator_t;

/* Where generated objects go: the state directly, or a List's items. */
typedef struct sink {
	ft_state_t *state;
	cJSON *items;
} sink_t;

/*
 * Read the server templates under o->source_dir and seed the streams with
 * o->seed; --packed and --tiered set how nodes are filled. -1 with the
 * failure recorded in `r`.
 */
int synth_generator_init(generator_t *g, result_t *r, const bench_options_t *o,
			 const ft_codec_options_t *opts);
void synth_generator_dispose(generator_t *g);

/*
 * A node `name` of server kind `kind` (a position in kinds[], uuids suffixed
 * with `suffix`) and its pods into `s`: about half of every GPU, MIG
 * instance and NUMA node's CPUs held, or, with g->packed, one pod per whole
 * GPU and per MIG instance and CPU-only pods up to g->packed_pods, with
 * nearly every CPU pinned. -1 with the failure recorded in `r`.
 */
int synth_emit_host(generator_t *g, sink_t *s, result_t *r, unsigned kind,
		    const char *name, const char *suffix);

/* Node `i` of the cluster (synth_node_name) and its pods. */
int synth_emit_node(generator_t *g, sink_t *s, result_t *r, unsigned i);

/* The name of node `i` of the cluster. */
void synth_node_name(char *buf, size_t size, unsigned i);

/*
 * A pending pod of shape `s` and `priority`, named POD_TOKEN, with one
 * container (heap; the caller frees it with cJSON_Delete).
 */
cJSON *synth_request_pod(const shape_t *s, const ft_codec_options_t *opts,
			 int32_t priority);

#endif
