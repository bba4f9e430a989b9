/*
 * The openb replay's plain model: trace reading, the seeded pod sequence,
 * FGD's typical pods and fragmentation measure, and the baselines Random,
 * BestFit and FGD as the FGD paper's simulator defines them (openb_model.h
 * names the files). Written from those definitions; nothing here talks to
 * the extender.
 */
#include "openb_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

/* BestFit's normalisers (open-gpu-share utils/const.go: MaxSpecCpu,
 * MaxSpecGpu) and kube-scheduler's MaxNodeScore. */
#define MAX_SPEC_CPU   128000.0
#define MAX_SPEC_GPU   8000.0
#define MAX_NODE_SCORE 100
#define TYPICAL_SHARE  0.95 /* podPopularityThreshold 95 */

typedef ob_candidate_t candidate_t;

/* ---- CSV ---- */

/* Split `line` at commas in place; returns the number of fields. */
static unsigned split(char *line, char **fields, unsigned max)
{
	unsigned n = 0;
	char *p = line;

	line[strcspn(line, "\r\n")] = '\0';
	while (n < max) {
		fields[n++] = p;
		if (!(p = strchr(p, ',')))
			break;
		*p++ = '\0';
	}
	return n;
}

static int column(char **header, unsigned n, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(header[i], name) == 0)
			return (int)i;
	return -1;
}

typedef int (*row_fn)(void *out, char **f, const int *col);

/* Columns `names`, the first `n_required` of them required (-1 in `col`
 * for an absent optional one). */
static int read_csv(const char *path, const char *const *names,
		    unsigned n_names, unsigned n_required, row_fn fn, void *out)
{
	FILE *f = fopen(path, "r");
	char line[1024], head[1024], *hf[32], *rf[32];
	int col[16];
	unsigned nh;
	int rc = 0;

	if (!f) {
		fprintf(stderr, "%s: cannot open\n", path);
		return -1;
	}
	if (!fgets(head, sizeof(head), f)) {
		fclose(f);
		fprintf(stderr, "%s: empty\n", path);
		return -1;
	}
	nh = split(head, hf, 32);
	for (unsigned i = 0; i < n_names && rc == 0; i++)
		if ((col[i] = column(hf, nh, names[i])) < 0 && i < n_required) {
			fprintf(stderr, "%s: no column %s\n", path, names[i]);
			rc = -1;
		}
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		unsigned n = split(line, rf, 32);
		if (n < nh)
			continue;
		rc = fn(out, rf, col);
	}
	fclose(f);
	return rc;
}

/* The index of GPU model `name`, added when `add`; -1: unknown or full. */
static int model_id(ob_trace_t *t, const char *name, bool add)
{
	unsigned i = 0;

	while (i < t->n_models && strcmp(t->models[i], name) != 0)
		i++;
	if (i == t->n_models && (!add || i == OB_MODELS_MAX))
		return -1;
	if (i == t->n_models)
		snprintf(t->models[t->n_models++], OB_MODEL_MAX, "%s", name);
	return (int)i;
}

/*
 * gpu_spec ("V100M16|V100M32"; empty: any) as model bits. A model no GPU
 * node has adds no bit, so a pod asking only for such models fits nowhere,
 * as in the paper's simulator.
 */
static uint32_t spec_models(ob_trace_t *t, const char *spec, bool *none)
{
	char buf[256], *save = NULL;
	uint32_t bits = 0;

	*none = !spec || !*spec;
	snprintf(buf, sizeof(buf), "%s", spec ? spec : "");
	for (char *tok = strtok_r(buf, "|", &save); tok;
	     tok = strtok_r(NULL, "|", &save)) {
		int id = model_id(t, tok, false);
		if (id >= 0)
			bits |= UINT32_C(1) << id;
	}
	return bits;
}

static int node_row(void *payload, char **f, const int *col)
{
	ob_trace_t *t = payload;
	ob_node_t *n, *grown;
	int rc;

	if (!(grown = realloc(t->nodes, (t->n_nodes + 1) * sizeof(*grown))))
		return -1;
	t->nodes = grown;
	n = &t->nodes[t->n_nodes];
	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", f[col[0]]);
	n->cpu_milli = (uint32_t)strtoul(f[col[1]], NULL, 10);
	n->memory_mib = strtoull(f[col[2]], NULL, 10);
	n->n_gpus = (unsigned)strtoul(f[col[3]], NULL, 10);
	snprintf(n->model, sizeof(n->model), "%s", f[col[4]]);
	if (n->n_gpus > OB_GPU_MAX || n->n_gpus == 0)
		return 0; /* CPU-only nodes are not in the paper's cluster */
	if ((rc = model_id(t, n->model, true)) < 0) {
		fprintf(stderr, "more than %d GPU models\n", OB_MODELS_MAX);
		return -1;
	}
	n->model_id = (unsigned)rc;
	n->nvlink = n->n_gpus == 8 && strncmp(n->model, "V100", 4) == 0;
	t->gpu_capacity_milli += (uint64_t)n->n_gpus * OB_MILLI;
	t->n_nodes++;
	return 0;
}

static int pod_row(void *payload, char **f, const int *col)
{
	ob_trace_t *t = payload;
	ob_pod_t *p, *grown;

	if (!(grown = realloc(t->pods, (t->n_pods + 1) * sizeof(*grown))))
		return -1;
	t->pods = grown;
	p = &t->pods[t->n_pods++];
	p->cpu_milli = (uint32_t)strtoul(f[col[0]], NULL, 10);
	p->memory_mib = strtoull(f[col[1]], NULL, 10);
	p->n_gpus = (unsigned)strtoul(f[col[2]], NULL, 10);
	p->gpu_milli = (uint32_t)strtoul(f[col[3]], NULL, 10);
	p->models = 0;
	if (col[4] >= 0) {
		bool any = true;
		p->models = spec_models(t, f[col[4]], &any);
		if (!any && !p->models)
			p->models = OB_MODELS_NONE;
	}
	if (p->n_gpus == 0)
		p->gpu_milli = 0;
	else if (p->gpu_milli == 0 || p->gpu_milli > OB_MILLI)
		p->gpu_milli = OB_MILLI;
	if (p->n_gpus > OB_GPU_MAX)
		return -1;
	return 0;
}

int ob_trace_load(ob_trace_t *out, const char *node_csv, const char *pod_csv)
{
	static const char *const nodes[] = {"sn", "cpu_milli", "memory_mib",
					    "gpu", "model"};
	static const char *const pods[] = {"cpu_milli", "memory_mib", "num_gpu",
					   "gpu_milli", "gpu_spec"};

	memset(out, 0, sizeof(*out));
	if (read_csv(node_csv, nodes, 5, 5, node_row, out) < 0 ||
	    read_csv(pod_csv, pods, 5, 4, pod_row, out) < 0) {
		ob_trace_dispose(out);
		return -1;
	}
	if (!out->n_nodes || !out->n_pods) {
		fprintf(stderr, "%s, %s: no GPU nodes or no pods\n", node_csv,
			pod_csv);
		ob_trace_dispose(out);
		return -1;
	}
	return 0;
}

void ob_trace_dispose(ob_trace_t *t)
{
	free(t->nodes);
	free(t->pods);
	memset(t, 0, sizeof(*t));
}

/* ---- NVLink ---- */

bool ob_nvlinked(unsigned a, unsigned b)
{
	if (a == b || a >= 8 || b >= 8)
		return false;
	return a / 4 == b / 4 || (a > b ? a - b : b - a) == 4;
}

bool ob_nvlink_aligned(uint32_t mask)
{
	for (unsigned a = 0; a < 8; a++)
		for (unsigned b = a + 1; b < 8; b++)
			if ((mask >> a & 1) && (mask >> b & 1) &&
			    !ob_nvlinked(a, b))
				return false;
	return true;
}

/* ---- the sequence ---- */

unsigned *ob_sequence(const ob_trace_t *t, uint64_t seed, double ratio,
		      unsigned max_pods, unsigned *n)
{
	double target = ratio * (double)t->gpu_capacity_milli;
	size_t cap = (size_t)t->n_pods * 2 + 16;
	unsigned *seq = malloc(cap * sizeof(*seq)), count = t->n_pods;
	uint64_t rng = seed, total = 0;

	if (!seq)
		return NULL;
	for (unsigned i = 0; i < t->n_pods; i++)
		total += ob_pod_gpu_milli(&t->pods[i]);
	shuffle(seq, t->n_pods, &rng);
	/* Tune up: draw with replacement until the next pod would pass the
	 * target (simulator.go tuneUpPods). */
	for (;;) {
		unsigned k = rng_below(&rng, t->n_pods);
		uint64_t m = ob_pod_gpu_milli(&t->pods[k]);
		if ((double)(total + m) > target)
			break;
		if (count == cap) {
			unsigned *grown;
			cap *= 2;
			if (!(grown = realloc(seq, cap * sizeof(*seq)))) {
				free(seq);
				return NULL;
			}
			seq = grown;
		}
		seq[count++] = k;
		total += m;
	}
	*n = max_pods && max_pods < count ? max_pods : count;
	return seq;
}

/* ---- typical pods ---- */

static bool same_shape(const ob_pod_t *a, const ob_pod_t *b)
{
	return a->cpu_milli == b->cpu_milli && a->gpu_milli == b->gpu_milli &&
	       a->n_gpus == b->n_gpus && a->models == b->models;
}

/* PodResource.Less: CPU, then GPU milli, then GPU count. */
static int shape_cmp(const ob_pod_t *a, const ob_pod_t *b)
{
	if (a->cpu_milli != b->cpu_milli)
		return a->cpu_milli < b->cpu_milli ? -1 : 1;
	if (a->gpu_milli != b->gpu_milli)
		return a->gpu_milli < b->gpu_milli ? -1 : 1;
	if (a->n_gpus != b->n_gpus)
		return a->n_gpus < b->n_gpus ? -1 : 1;
	if (a->models != b->models) /* GpuType, last */
		return a->models < b->models ? -1 : 1;
	return 0;
}

typedef struct counted {
	ob_pod_t shape;
	unsigned count;
} counted_t;

/* Most frequent first; ties by the larger shape (sort.Reverse of Less). */
static int counted_cmp(const void *pa, const void *pb)
{
	const counted_t *a = pa, *b = pb;

	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	return -shape_cmp(&a->shape, &b->shape);
}

void ob_typical_init(ob_typical_t *out, const ob_trace_t *t)
{
	counted_t *c = calloc(t->n_pods, sizeof(*c));
	unsigned n = 0, cum = 0;

	memset(out, 0, sizeof(*out));
	if (!c)
		return;
	for (unsigned i = 0; i < t->n_pods; i++) {
		unsigned k = 0;
		while (k < n && !same_shape(&c[k].shape, &t->pods[i]))
			k++;
		if (k == n) {
			c[n].shape = t->pods[i];
			c[n].shape.memory_mib = 0;
			n++;
		}
		c[k].count++;
	}
	qsort(c, n, sizeof(*c), counted_cmp);
	for (unsigned i = 0; i < n && out->n < OB_TYPICAL_MAX &&
			     cum < TYPICAL_SHARE * t->n_pods;
	     i++) {
		out->shapes[out->n] = c[i].shape;
		out->freq[out->n++] = c[i].count;
		cum += c[i].count;
	}
	for (unsigned i = 0; i < out->n; i++)
		out->freq[i] /= cum;
	free(c);
}

/* ---- fragmentation (pkg/utils/frag.go NodeGpuShareFragAmountScore) ---- */

/* `p`'s gpu_spec allows `node`'s GPU model (any, without one). */
static bool model_allowed(const ob_pod_t *p, const ob_node_t *node)
{
	return !p->models || (p->models >> node->model_id) & 1u;
}

static uint32_t gpu_left_total(const ob_left_t *l, unsigned n)
{
	uint32_t s = 0;

	for (unsigned g = 0; g < n; g++)
		s += l->gpu[g];
	return s;
}

double ob_frag(const ob_left_t *l, const ob_node_t *node,
	       const ob_typical_t *tp)
{
	unsigned n_gpus = node->n_gpus;
	uint32_t total = gpu_left_total(l, n_gpus);
	double frag = 0;

	if (!total)
		return 0;
	for (unsigned i = 0; i < tp->n; i++) {
		const ob_pod_t *m = &tp->shapes[i];
		unsigned fit = 0;
		uint32_t small = 0;
		if (m->gpu_milli == 0 ||       /* a CPU pod uses no GPU */
		    !model_allowed(m, node)) { /* NoAccess */
			frag += tp->freq[i] * total;
			continue;
		}
		for (unsigned g = 0; g < n_gpus; g++) {
			if (l->gpu[g] >= m->gpu_milli)
				fit++;
			else
				small += l->gpu[g];
		}
		if (fit >= m->n_gpus && l->cpu_milli >= m->cpu_milli)
			frag +=
			    tp->freq[i] * small; /* Q3: the GPUs too small */
		else
			frag += tp->freq[i] * total;
	}
	return frag;
}

/* ---- the cluster ---- */

int ob_cluster_init(ob_cluster_t *c, const ob_trace_t *t,
		    const ob_typical_t *tp)
{
	memset(c, 0, sizeof(*c));
	c->trace = t;
	c->typical = tp;
	c->left = calloc(t->n_nodes, sizeof(*c->left));
	c->frag = calloc(t->n_nodes, sizeof(*c->frag));
	c->cand = calloc(t->n_nodes, sizeof(*c->cand));
	if (!c->left || !c->frag || !c->cand) {
		ob_cluster_dispose(c);
		return -1;
	}
	for (unsigned i = 0; i < t->n_nodes; i++) {
		const ob_node_t *n = &t->nodes[i];
		c->left[i].cpu_milli = n->cpu_milli;
		c->left[i].memory_mib = n->memory_mib;
		for (unsigned g = 0; g < n->n_gpus; g++)
			c->left[i].gpu[g] = OB_MILLI;
		c->frag[i] = ob_frag(&c->left[i], n, tp);
		c->frag_sum += c->frag[i];
	}
	return 0;
}

void ob_cluster_dispose(ob_cluster_t *c)
{
	free(c->left);
	free(c->frag);
	free(c->cand);
	c->left = NULL;
	c->frag = NULL;
	c->cand = NULL;
}

bool ob_fits_in_tree(const ob_cluster_t *c, unsigned node, const ob_pod_t *p)
{
	return c->left[node].cpu_milli >= p->cpu_milli &&
	       c->left[node].memory_mib >= p->memory_mib &&
	       model_allowed(p, &c->trace->nodes[node]);
}

/* ob_cluster_t's partial_at_100 and whole_at_100. */
static void where_unallocated(ob_cluster_t *c, double cap)
{
	for (unsigned i = 0; i < c->trace->n_nodes; i++) {
		const ob_left_t *l = &c->left[i];
		for (unsigned g = 0; g < c->trace->nodes[i].n_gpus; g++) {
			double pct = 100.0 * l->gpu[g] / cap;
			if (l->gpu[g] == OB_MILLI)
				c->whole_at_100 += pct;
			else
				c->partial_at_100 += pct;
			if (l->gpu[g] == OB_MILLI &&
			    l->cpu_milli < OB_CPU_SHORT)
				c->whole_cpu_short_at_100 += pct;
		}
	}
}

static void record(ob_cluster_t *c)
{
	double cap = (double)c->trace->gpu_capacity_milli;
	unsigned pct = (unsigned)lround(100.0 * c->arrived_milli / cap);
	double alloc = round(10000.0 * c->used_milli / cap) / 100.0;

	if (pct >= OB_LEVELS)
		return;
	if (pct == 100 && !c->n_level[pct])
		where_unallocated(c, cap);
	c->sum_unalloc[pct] += 100.0 - alloc;
	c->sum_frag[pct] += 100.0 * c->frag_sum / cap;
	c->n_level[pct]++;
}

void ob_cluster_place(ob_cluster_t *c, const ob_pod_t *p, int node,
		      const uint32_t *milli)
{
	ob_left_t *l = &c->left[node];
	const ob_node_t *n = &c->trace->nodes[node];
	uint32_t mask = 0;

	c->arrived++;
	c->arrived_milli += ob_pod_gpu_milli(p);
	if (l->cpu_milli < p->cpu_milli || l->memory_mib < p->memory_mib)
		c->overcommitted = true;
	l->cpu_milli -=
	    l->cpu_milli < p->cpu_milli ? l->cpu_milli : p->cpu_milli;
	l->memory_mib -=
	    l->memory_mib < p->memory_mib ? l->memory_mib : p->memory_mib;
	for (unsigned g = 0; g < n->n_gpus; g++) {
		if (!milli[g])
			continue;
		mask |= 1u << g;
		if (l->gpu[g] < milli[g]) {
			c->overcommitted = true;
			l->gpu[g] = 0;
		} else {
			l->gpu[g] -= milli[g];
		}
	}
	if (n->nvlink && (p->n_gpus == 2 || p->n_gpus == 4)) {
		c->multi_nvlink++;
		c->multi_aligned += ob_nvlink_aligned(mask);
	}
	c->placed++;
	c->used_milli += ob_pod_gpu_milli(p);
	c->frag_sum -= c->frag[node];
	c->frag[node] = ob_frag(l, n, c->typical);
	c->frag_sum += c->frag[node];
	record(c);
}

void ob_cluster_fail(ob_cluster_t *c, const ob_pod_t *p)
{
	c->arrived++;
	c->arrived_milli += ob_pod_gpu_milli(p);
	c->failed++;
	c->failed_kind[ob_pod_kind(p)]++;
	record(c);
}

static double level_mean(const ob_cluster_t *c, const double *sum, unsigned pct)
{
	double s = 0;
	unsigned n = 0;

	if (pct < OB_LEVELS && c->n_level[pct])
		return sum[pct] / c->n_level[pct];
	for (unsigned k = pct ? pct - 1 : 0; k <= pct + 1 && k < OB_LEVELS;
	     k++) {
		s += sum[k];
		n += c->n_level[k];
	}
	return n ? s / n : NAN;
}

double ob_unalloc_at(const ob_cluster_t *c, unsigned pct)
{
	return level_mean(c, c->sum_unalloc, pct);
}

double ob_frag_at(const ob_cluster_t *c, unsigned pct)
{
	return level_mean(c, c->sum_frag, pct);
}

/* ---- baselines ---- */

/* Open-Gpu-Share's Filter: enough GPUs with room for the per-GPU share. */
static bool gpu_fits(const ob_left_t *l, unsigned n, const ob_pod_t *p)
{
	unsigned fit = 0;

	if (!p->n_gpus)
		return true;
	for (unsigned g = 0; g < n; g++)
		fit += l->gpu[g] >= p->gpu_milli;
	return fit >= p->n_gpus;
}

/* AllocateExclusiveGpuId: the lowest-numbered free GPUs. */
static void take_whole(uint32_t *milli, const ob_left_t *l, unsigned n,
		       const ob_pod_t *p)
{
	unsigned need = p->n_gpus;

	for (unsigned g = 0; g < n && need; g++)
		if (l->gpu[g] == OB_MILLI) {
			milli[g] = OB_MILLI;
			need--;
		}
}

static bool shared(const ob_pod_t *p)
{
	return p->n_gpus == 1 && p->gpu_milli < OB_MILLI;
}

/* The GPU a shared pod gets: random (Random), the fullest that fits
 * (BestFit) or the best FGD score (FGD, computed by the caller). */
static int pick_random_gpu(const ob_left_t *l, unsigned n, const ob_pod_t *p,
			   uint64_t *rng)
{
	unsigned seen = 0;
	int gpu = -1;

	for (unsigned g = 0; g < n; g++)
		if (l->gpu[g] >= p->gpu_milli && rng_below(rng, ++seen) == 0)
			gpu = (int)g;
	return gpu;
}

static int pick_best_gpu(const ob_left_t *l, unsigned n, const ob_pod_t *p)
{
	int gpu = -1;

	for (unsigned g = 0; g < n; g++)
		if (l->gpu[g] >= p->gpu_milli &&
		    (gpu < 0 || l->gpu[g] < l->gpu[gpu]))
			gpu = (int)g;
	return gpu;
}

static int64_t bestfit_score(const ob_left_t *l, unsigned n, const ob_pod_t *p)
{
	double s = (l->cpu_milli - (double)p->cpu_milli) / MAX_SPEC_CPU * 0.5 +
		   (gpu_left_total(l, n) - (double)ob_pod_gpu_milli(p)) /
		       MAX_SPEC_GPU * 0.5;

	return (int64_t)((1.0 - s) * MAX_NODE_SCORE);
}

static int64_t fgd_points(double before, double after)
{
	double x = (before - after) / 1000.0;

	return (int64_t)(1.0 / (1.0 + exp(-x)) * MAX_NODE_SCORE);
}

/*
 * An earlier GPU of the node has as much left as GPU `g`: the measure, which
 * does not depend on the GPUs' order, came out the same there, and the first
 * of equal scores is kept.
 */
static bool tried_alike(const ob_left_t *l, unsigned g)
{
	for (unsigned k = 0; k < g; k++)
		if (l->gpu[k] == l->gpu[g])
			return true;
	return false;
}

/* FGD's score of a node and, for a shared pod, the GPU it would take. */
static int64_t fgd_score(const ob_cluster_t *c, unsigned node,
			 const ob_pod_t *p, int *gpu)
{
	const ob_left_t *l = &c->left[node];
	const ob_node_t *nd = &c->trace->nodes[node];
	unsigned n = nd->n_gpus;
	ob_left_t after = *l;
	uint32_t milli[OB_GPU_MAX] = {0};
	int64_t best = 0;

	after.cpu_milli -= p->cpu_milli;
	*gpu = -1;
	if (shared(p)) {
		for (unsigned g = 0; g < n; g++) {
			int64_t s;
			if (l->gpu[g] < p->gpu_milli || tried_alike(l, g))
				continue;
			after.gpu[g] -= p->gpu_milli;
			s = fgd_points(c->frag[node],
				       ob_frag(&after, nd, c->typical));
			after.gpu[g] += p->gpu_milli;
			if (*gpu < 0 || s > best) {
				best = s;
				*gpu = (int)g;
			}
		}
		return best;
	}
	/* Whole GPUs: which free ones does not change the measure. */
	take_whole(milli, l, n, p);
	for (unsigned g = 0; g < n; g++)
		after.gpu[g] -= milli[g];
	return fgd_points(c->frag[node], ob_frag(&after, nd, c->typical));
}

/* kube-scheduler's selectHost: the highest score, uniform among ties. */
int ob_select_host(const ob_cluster_t *c, const ob_candidate_t *cand,
		   unsigned n, uint64_t *rng)
{
	const ob_node_t *nodes = c->trace->nodes;
	unsigned ties = 0;
	int best = -1;

	for (unsigned i = 0; i < n; i++) {
		if (best >= 0 && cand[i].score < cand[best].score)
			continue;
		if (best < 0 || cand[i].score > cand[best].score) {
			best = (int)i;
			ties = 1;
		} else if (c->name_ties
			       ? strcmp(nodes[cand[i].node].name,
					nodes[cand[best].node].name) < 0
			       : rng_below(rng, ++ties) == 0) {
			best = (int)i;
		}
	}
	return best;
}

/* PluginUtils NormalizeScore: min-max onto 0..100 (BestFit only). */
static void normalize(candidate_t *cand, unsigned n)
{
	int64_t lo = INT64_MAX, hi = INT64_MIN;

	for (unsigned i = 0; i < n; i++) {
		lo = cand[i].score < lo ? cand[i].score : lo;
		hi = cand[i].score > hi ? cand[i].score : hi;
	}
	for (unsigned i = 0; i < n; i++)
		cand[i].score = hi == lo ? 0
					 : (cand[i].score - lo) *
					       MAX_NODE_SCORE / (hi - lo);
}

static unsigned filter(candidate_t *cand, const ob_cluster_t *c,
		       const ob_pod_t *p)
{
	unsigned n = 0;

	for (unsigned i = 0; i < c->trace->n_nodes; i++)
		if (ob_fits_in_tree(c, i, p) &&
		    gpu_fits(&c->left[i], c->trace->nodes[i].n_gpus, p))
			cand[n++] = (candidate_t){i, 0, -1};
	return n;
}

static void score(candidate_t *cand, unsigned n, const ob_cluster_t *c,
		  ob_policy_t policy, const ob_pod_t *p)
{
	for (unsigned i = 0; i < n; i++) {
		unsigned node = cand[i].node;
		unsigned g = c->trace->nodes[node].n_gpus;
		if (policy == OB_BESTFIT)
			cand[i].score = bestfit_score(&c->left[node], g, p);
		else if (policy == OB_FGD)
			cand[i].score = fgd_score(c, node, p, &cand[i].gpu);
	}
	if (policy == OB_BESTFIT)
		normalize(cand, n);
}

void ob_schedule(ob_cluster_t *c, ob_policy_t policy, const ob_pod_t *p,
		 uint64_t *rng)
{
	candidate_t *cand = c->cand;
	uint32_t milli[OB_GPU_MAX] = {0};
	unsigned n, node, gpus;
	const ob_left_t *l;
	int pick, gpu;

	if (!(n = filter(cand, c, p))) {
		if (getenv("OPENB_DEBUG"))
			fprintf(
			    stderr,
			    "policy %d: pod %u x %u milli, %u m CPU, %llu MiB failed at %.1f %%\n",
			    (int)policy, p->n_gpus, p->gpu_milli, p->cpu_milli,
			    (unsigned long long)p->memory_mib,
			    100.0 * c->arrived_milli /
				c->trace->gpu_capacity_milli);
		ob_cluster_fail(c, p);
		return;
	}
	if (policy == OB_RANDOM)
		pick = (int)rng_below(rng, n);
	else {
		score(cand, n, c, policy, p);
		pick = ob_select_host(c, cand, n, rng);
	}
	node = cand[pick].node;
	l = &c->left[node];
	gpus = c->trace->nodes[node].n_gpus;
	if (shared(p)) {
		gpu = policy == OB_RANDOM    ? pick_random_gpu(l, gpus, p, rng)
		      : policy == OB_BESTFIT ? pick_best_gpu(l, gpus, p)
					     : cand[pick].gpu;
		if (gpu >= 0)
			milli[gpu] = p->gpu_milli;
	} else if (p->n_gpus) {
		take_whole(milli, l, gpus, p);
	}
	ob_cluster_place(c, p, (int)node, milli);
}
