/*
 * One decision record (decision.h): built by a verb in its own storage,
 * with every string copied and cut to its field, so that a record points
 * nowhere else.
 */
#include <flextopo/decision.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(ft_decision_t) == FT_DECISION_BYTES,
	       "update FT_DECISION_BYTES and the bound in decisions.h");
#endif

static const char *const verb_names[FT_VERB_COUNT] = {"filter", "prioritize",
						      "preempt", "bind"};

static const char *const verdict_names[FT_VERDICT_COUNT] = {
    "pass", "fail",	     "unresolvable", "scored",
    "kept", "kept-proposed", "dropped"};

const char *ft_verb_name(ft_verb_t verb)
{
	return (unsigned)verb < FT_VERB_COUNT ? verb_names[verb] : "unknown";
}

const char *ft_verdict_name(ft_verdict_kind_t verdict)
{
	return (unsigned)verdict < FT_VERDICT_COUNT ? verdict_names[verdict]
						    : "unknown";
}

/*
 * Copy `src` into `dst` of `size` bytes; a cut copy ends in "..." and is cut
 * before a UTF-8 sequence, never inside one, so that it stays valid text.
 */
static void copy_cut(char *dst, size_t size, const char *src)
{
	size_t n = src ? strlen(src) : 0;

	if (n < size) {
		memcpy(dst, src ? src : "", n + 1);
		return;
	}
	n = size - 4;
	while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
		n--;
	memcpy(dst, src, n);
	memcpy(dst + n, "...", 4);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ft_decision_init(ft_decision_t *d, ft_verb_t verb, const char *ns,
		      const char *name, const char *uid, int32_t priority)
{
	memset(d, 0, sizeof(*d));
	d->verb = (uint8_t)verb;
	d->time_ms = now_ms();
	d->priority = priority;
	d->placement.level = FT_LEVEL_COUNT;
	copy_cut(d->ns, sizeof(d->ns), ns);
	copy_cut(d->name, sizeof(d->name), name);
	copy_cut(d->uid, sizeof(d->uid), uid);
}

ft_decision_node_t *ft_decision_add_node(ft_decision_t *d, const char *node,
					 ft_verdict_kind_t verdict,
					 const char *reason)
{
	ft_decision_node_t *row;

	if ((unsigned)verdict < FT_VERDICT_COUNT)
		d->counts[verdict]++;
	d->n_nodes_total++;
	if (d->n_nodes >= FT_DECISION_NODES)
		return NULL;
	row = &d->nodes[d->n_nodes++];
	copy_cut(row->name, sizeof(row->name), node);
	copy_cut(row->reason, sizeof(row->reason), reason);
	row->verdict = (uint8_t)verdict;
	row->level = FT_LEVEL_COUNT;
	row->score = -1;
	return row;
}

void ft_decision_add_verdict(ft_decision_t *d, const char *node,
			     const ft_verdict_t *v)
{
	ft_verdict_kind_t kind = v->fit == FT_FIT     ? FT_VERDICT_PASS
				 : v->fit == FT_UNFIT ? FT_VERDICT_FAIL
						      : FT_VERDICT_UNRESOLVABLE;
	ft_decision_node_t *row =
	    ft_decision_add_node(d, node, kind, v->reason);

	if (row)
		row->level = (uint8_t)v->level;
}

void ft_decision_add_score(ft_decision_t *d, const char *node, int score)
{
	ft_decision_node_t *row =
	    ft_decision_add_node(d, node, FT_VERDICT_SCORED, NULL);

	if (row)
		row->score = (int8_t)score;
	if (d->counts[FT_VERDICT_SCORED] == 1 || score > d->best_score) {
		copy_cut(d->node, sizeof(d->node), node);
		d->best_score = (int16_t)score;
	}
}

void ft_decision_add_victim(ft_decision_t *d, const ft_decision_node_t *row,
			    const char *ns, const char *name, const char *uid,
			    int32_t priority)
{
	ft_decision_victim_t *v;
	char pod[FT_DECISION_POD + FT_DECISION_NS + 2];

	d->n_victims_total++;
	if (!row || d->n_victims >= FT_DECISION_VICTIMS)
		return;
	v = &d->victims[d->n_victims++];
	if (ns && name)
		snprintf(pod, sizeof(pod), "%s/%s", ns, name);
	else
		pod[0] = '\0';
	copy_cut(v->pod, sizeof(v->pod), pod);
	copy_cut(v->uid, sizeof(v->uid), uid);
	v->priority = priority;
	v->row = (uint8_t)(row - d->nodes);
}

/* Append `text` to d->gangs, after "; " when it holds some already. */
static void append_gangs(ft_decision_t *d, const char *text)
{
	size_t used = strlen(d->gangs);
	char joined[2 * FT_DECISION_MESSAGE + 4];

	if (!text[0])
		return;
	snprintf(joined, sizeof(joined), "%s%s%s", d->gangs, used ? "; " : "",
		 text);
	copy_cut(d->gangs, sizeof(d->gangs), joined);
}

void ft_decision_add_gangs(ft_decision_t *d, const char *node,
			   const char *gangs)
{
	char text[FT_DECISION_MESSAGE];

	snprintf(text, sizeof(text), "%s: %s", node, gangs);
	append_gangs(d, text);
}

void ft_decision_merge(ft_decision_t *d, const ft_decision_t *from)
{
	uint8_t rows[FT_DECISION_NODES]; /* FT_DECISION_NODES: no room */

	for (unsigned v = 0; v < FT_VERDICT_COUNT; v++)
		d->counts[v] += from->counts[v];
	d->n_nodes_total += from->n_nodes_total;
	d->n_victims_total += from->n_victims_total;
	append_gangs(d, from->gangs);
	memset(rows, FT_DECISION_NODES, sizeof(rows));
	for (unsigned i = 0;
	     i < from->n_nodes && d->n_nodes < FT_DECISION_NODES; i++) {
		rows[i] = (uint8_t)d->n_nodes;
		d->nodes[d->n_nodes++] = from->nodes[i];
	}
	/* A victim whose row found no room is counted, not listed. */
	for (unsigned i = 0; i < from->n_victims; i++) {
		if (rows[from->victims[i].row] >= FT_DECISION_NODES ||
		    d->n_victims >= FT_DECISION_VICTIMS)
			continue;
		d->victims[d->n_victims] = from->victims[i];
		d->victims[d->n_victims++].row = rows[from->victims[i].row];
	}
}

static void put_gpus(ft_decision_placement_t *out, const ft_topology_t *t,
		     uint16_t gpus)
{
	for (unsigned g = 0; g < t->n_gpus && out->n_gpus < FT_GPU_MAX; g++)
		if (gpus & (1u << g))
			out->gpus[out->n_gpus++] = (int16_t)t->gpus[g].index;
}

static void put_mig(ft_decision_placement_t *out, const ft_topology_t *t,
		    const uint64_t *mig)
{
	for (unsigned i = 0; i < t->n_mig && out->n_mig < FT_ALLOC_MIG_MAX;
	     i++) {
		if (!ft_mig_mask_has(mig, i))
			continue;
		if (!out->n_mig)
			copy_cut(out->mig_profile, sizeof(out->mig_profile),
				 t->mig[i].profile);
		out->mig[out->n_mig].gpu =
		    (int16_t)t->gpus[t->mig[i].gpu].index;
		out->mig[out->n_mig].start = t->mig[i].start;
		out->mig[out->n_mig].size = t->mig[i].size;
		out->n_mig++;
	}
}

static void put_numa(ft_decision_placement_t *out, const ft_topology_t *t,
		     uint16_t numa_nodes)
{
	for (unsigned n = 0; n < t->n_numa && out->n_numa < FT_NUMA_MAX; n++)
		if (numa_nodes & (1u << n))
			out->numa[out->n_numa++] = (int16_t)t->numa[n].id;
}

/* The chosen node and placement (positions resolved against `node`). */
static void set_placement(ft_decision_t *d, const ft_node_t *node,
			  const ft_placement_t *p)
{
	ft_decision_placement_t *out = &d->placement;

	memset(out, 0, sizeof(*out));
	copy_cut(d->node, sizeof(d->node), node->name);
	d->has_placement = true;
	out->level = (uint8_t)p->level;
	out->levels = p->levels;
	out->cpus = p->cpus;
	out->memory_mib = p->memory_mib;
	if (!node->topology)
		return;
	put_gpus(out, node->topology, p->gpus);
	put_mig(out, node->topology, p->mig);
	put_numa(out, node->topology, p->numa_nodes);
}

void ft_decision_set_holding(ft_decision_t *d, const ft_node_t *node,
			     const ft_holding_t *h)
{
	ft_placement_t p;

	memset(&p, 0, sizeof(p));
	p.level = h->level;
	p.levels = h->levels;
	p.gpus = h->gpus;
	p.mig[0] = h->mig[0];
	p.mig[1] = h->mig[1];
	p.cpus = h->cpus;
	p.numa_nodes = h->numa_nodes;
	p.memory_mib = h->memory_mib;
	set_placement(d, node, &p);
}

void ft_decision_message(ft_decision_t *d, bool failed, const char *fmt, ...)
{
	char text[FT_DECISION_MESSAGE + 4];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	copy_cut(d->message, sizeof(d->message), text);
	d->failed = failed;
}
