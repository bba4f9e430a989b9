/*
 * An SVG picture of one node's FlexTopo model, for people debugging a
 * placement in a browser (GET /debug/nodes/{name}?format=svg).
 *
 * The layout nests the hardware the way the model does: sockets side by
 * side, NUMA nodes stacked inside a socket, and inside a NUMA node its cores
 * as a grid followed by its PCIe switches, each holding its GPUs. GPUs on a
 * root port sit in a dashed "root port" box. GPUs whose NUMA node the
 * topology does not know (topology.h) sit in a dashed "NUMA node unknown"
 * box after the NUMA nodes of their socket, or, with the socket unknown too,
 * in a "GPU locality unknown" box below the sockets. A shared GPU carries a bar
 * of its replicas, so that a time-sliced GPU in partial use shows as such.
 * NVLinks are drawn last, as arcs between GPU centres, so that links between
 * GPUs in one row stay apart.
 *
 * Colours: a held unit takes its pod's colour. Hues are spread by the golden
 * angle over the pods in UID order, so neighbours differ and a pod keeps its
 * colour while the set of pods on the node stays the same; the lightness is
 * the rank of the pod's priority among the pods on this node, darker for
 * higher priority. Free units are white, reserved ones grey.
 * Colours are written as #rrggbb, and every user string is XML-escaped.
 *
 * The body is drawn first into one buffer while the extent is tracked; the
 * <svg> header with the final size is written in front of it at the end.
 */
#include <flextopo/buf.h>
#include <flextopo/debugview.h>
#include <flextopo/error.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MARGIN	  20
#define HEADER	  56 /* title and subtitle above the sockets */
#define PAD	  10
#define LABEL_H	  20
#define CELL	  12 /* core pitch */
#define CORE	  10
#define GRID_COLS 16
#define GPU_W	  124
#define GPU_H	  88
#define SLICE_W	  13
#define SLICE_H	  18
#define REPLICA_Y 66 /* the replica bar of a shared GPU, from its top */
#define REPLICA_H 12
#define LEGEND_H  18
#define ROW_MAX	  1160 /* NUMA nodes of a socket wrap past this width */
#define BUS_GAP	  34   /* between NVLink group bars */

#define FREE_FILL     "#ffffff"
#define RESERVED_FILL "#9e9e9e"
#define MIG_GPU_FILL  "#eceff1"
#define STROKE	      "#37474f"
#define NVLINK	      "#76b900"

typedef struct {
	ft_buf_t body;
	const ft_node_t *node;
	const ft_topology_t *t;
	char (*colour)[8]; /* per holding, "#rrggbb" */
	double gpu_x[FT_GPU_MAX], gpu_y[FT_GPU_MAX]; /* GPU centres */
	int width, height;			     /* extent so far */
} svg_t;

/* ---- output ---- */

static void out(svg_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Markup without user strings: those go through text(). */
static void out(svg_t *s, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0)
		ft_buf_put(&s->body, line,
			   (size_t)n < sizeof(line) ? (size_t)n
						    : sizeof(line) - 1);
}

/* `str` XML-escaped; control characters become spaces. */
static void text(svg_t *s, const char *str)
{
	for (; str && *str; str++) {
		unsigned char c = (unsigned char)*str;
		if (c == '&')
			ft_buf_puts(&s->body, "&amp;");
		else if (c == '<')
			ft_buf_puts(&s->body, "&lt;");
		else if (c == '>')
			ft_buf_puts(&s->body, "&gt;");
		else if (c == '"')
			ft_buf_puts(&s->body, "&quot;");
		else if (c == '\'')
			ft_buf_puts(&s->body, "&apos;");
		else
			ft_buf_put(&s->body, c < 0x20 ? " " : str, 1);
	}
}

static void extend(svg_t *s, int x, int y)
{
	if (x > s->width)
		s->width = x;
	if (y > s->height)
		s->height = y;
}

static void label(svg_t *s, int x, int y, int size, const char *weight,
		  const char *str)
{
	out(s,
	    "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"%d\" font-weight=\"%s\" fill=\"" STROKE
	    "\">",
	    x, y, size, weight);
	text(s, str);
	out(s, "</text>\n");
}

/* ---- colours ---- */

/* The rank of holding i's UID among the node's pods (0 = first). */
static unsigned uid_rank(const ft_node_t *node, unsigned i)
{
	unsigned rank = 0;

	for (unsigned j = 0; j < node->n_holdings; j++)
		rank +=
		    strcmp(node->holdings[j].uid, node->holdings[i].uid) < 0;
	return rank;
}

static double hue_part(double p, double q, double t)
{
	if (t < 0)
		t += 1;
	if (t > 1)
		t -= 1;
	if (t < 1.0 / 6)
		return p + (q - p) * 6 * t;
	if (t < 0.5)
		return q;
	if (t < 2.0 / 3)
		return p + (q - p) * (2.0 / 3 - t) * 6;
	return p;
}

/* HSL (h in 0..360, s and l in 0..1) as "#rrggbb". */
static void hsl_hex(char out_hex[8], double h, double sat, double l)
{
	double q = l < 0.5 ? l * (1 + sat) : l + sat - l * sat;
	double p = 2 * l - q;
	double rgb[3] = {hue_part(p, q, h / 360 + 1.0 / 3),
			 hue_part(p, q, h / 360),
			 hue_part(p, q, h / 360 - 1.0 / 3)};

	snprintf(out_hex, 8, "#%02x%02x%02x", (unsigned)(rgb[0] * 255 + 0.5),
		 (unsigned)(rgb[1] * 255 + 0.5),
		 (unsigned)(rgb[2] * 255 + 0.5));
}

/* Distinct priorities below `p` and in all, among the node's pods. */
static void priority_rank(const ft_node_t *node, int32_t p, unsigned *below,
			  unsigned *distinct)
{
	*below = *distinct = 0;
	for (unsigned i = 0; i < node->n_holdings; i++) {
		bool first = true;
		int32_t q = node->holdings[i].priority;
		for (unsigned j = 0; j < i && first; j++)
			first = node->holdings[j].priority != q;
		*distinct += first;
		*below += first && q < p;
	}
}

static int colours_init(svg_t *s)
{
	const ft_node_t *node = s->node;

	s->colour =
	    calloc(node->n_holdings ? node->n_holdings : 1, sizeof(*s->colour));
	if (!s->colour)
		return ft_error_set(FT_ENOMEM, "svg: out of memory");
	for (unsigned i = 0; i < node->n_holdings; i++) {
		const ft_holding_t *h = &node->holdings[i];
		unsigned below, distinct;
		double l;
		priority_rank(node, h->priority, &below, &distinct);
		l = distinct > 1 ? 0.78 - 0.33 * below / (distinct - 1) : 0.6;
		hsl_hex(s->colour[i],
			fmod(25 + uid_rank(node, i) * 137.508, 360), 0.65, l);
	}
	return 0;
}

static int holder_of_gpu(const ft_node_t *node, unsigned g)
{
	for (unsigned i = 0; i < node->n_holdings; i++)
		if (node->holdings[i].gpus & (1u << g))
			return (int)i;
	return -1;
}

static int holder_of_mig(const ft_node_t *node, unsigned m)
{
	for (unsigned i = 0; i < node->n_holdings; i++)
		if (ft_mig_mask_has(node->holdings[i].mig, m))
			return (int)i;
	return -1;
}

static int holder_of_cpu(const ft_node_t *node, unsigned cpu)
{
	for (unsigned i = 0; i < node->n_holdings; i++)
		if (ft_cpuset_has(&node->holdings[i].cpus, cpu))
			return (int)i;
	return -1;
}

static void holder_title(svg_t *s, int holder)
{
	const ft_holding_t *h;
	char prio[32];

	if (holder < 0)
		return;
	h = &s->node->holdings[holder];
	snprintf(prio, sizeof(prio), " (priority %d)", (int)h->priority);
	text(s, " held by ");
	text(s, h->ns);
	text(s, "/");
	text(s, h->name);
	text(s, prio);
}

/* ---- sizes ---- */

static int grid_w(unsigned n)
{
	return (int)(n < GRID_COLS ? n : GRID_COLS) * CELL;
}

static int grid_h(unsigned n)
{
	return (int)((n + GRID_COLS - 1) / GRID_COLS) * CELL;
}

static unsigned gpus_under(const ft_topology_t *t, unsigned numa, unsigned sw)
{
	unsigned n = 0;

	for (unsigned g = 0; g < t->n_gpus; g++)
		n += t->gpus[g].numa == numa && t->gpus[g].pcie_switch == sw;
	return n;
}

static int box_w(unsigned gpus)
{
	return PAD + (int)gpus * (GPU_W + PAD);
}

static int box_h(void)
{
	return LABEL_H + GPU_H + PAD;
}

static int numa_w(const ft_topology_t *t, unsigned n)
{
	int w = PAD + grid_w(t->numa[n].n_cpus) + PAD;

	for (unsigned sw = 0; sw < t->n_switches; sw++)
		if (t->switches[sw].numa == n)
			w += box_w(gpus_under(t, n, sw)) + PAD;
	if (gpus_under(t, n, FT_NONE))
		w += box_w(gpus_under(t, n, FT_NONE)) + PAD;
	return w;
}

static bool numa_has_boxes(const ft_topology_t *t, unsigned n)
{
	for (unsigned g = 0; g < t->n_gpus; g++)
		if (t->gpus[g].numa == n)
			return true;
	for (unsigned sw = 0; sw < t->n_switches; sw++)
		if (t->switches[sw].numa == n)
			return true;
	return false;
}

static int numa_h(const ft_topology_t *t, unsigned n)
{
	int inner = grid_h(t->numa[n].n_cpus);

	if (numa_has_boxes(t, n) && box_h() > inner)
		inner = box_h();
	return LABEL_H + inner + PAD;
}

/* GPUs of unknown NUMA node in socket position `so` (FT_NONE: socket
 * unknown too). */
static uint16_t unplaced_in(const ft_topology_t *t, unsigned so)
{
	uint16_t gpus = 0;

	for (unsigned g = 0; g < t->n_gpus; g++)
		if (((t->unplaced_gpus >> g) & 1) && t->gpus[g].socket == so)
			gpus |= (uint16_t)(1u << g);
	return gpus;
}

/*
 * Where the NUMA nodes of one socket go, and its box of GPUs of unknown NUMA
 * node (x[FT_NUMA_MAX]) after them: left to right, wrapping.
 */
typedef struct {
	int x[FT_NUMA_MAX + 1], y[FT_NUMA_MAX + 1]; /* relative to the socket */
	int w, h;
} flow_t;

/* Item `i` of width `w` and height `h` at the flow's next place. */
static void flow_place(flow_t *f, int *x, int *y, int *row_h, unsigned i, int w,
		       int h)
{
	if (*x > PAD && *x + w > ROW_MAX) {
		*x = PAD;
		*y += *row_h + PAD;
		*row_h = 0;
	}
	f->x[i] = *x;
	f->y[i] = *y;
	*x += w + PAD;
	*row_h = h > *row_h ? h : *row_h;
	f->w = *x > f->w ? *x : f->w;
}

static void socket_flow(flow_t *f, const ft_topology_t *t, unsigned so)
{
	int x = PAD, y = LABEL_H + 4, row_h = 0;
	uint16_t unplaced = unplaced_in(t, so);

	f->w = 240;
	for (unsigned n = 0; n < t->n_numa; n++)
		if (t->numa[n].socket == so)
			flow_place(f, &x, &y, &row_h, n, numa_w(t, n),
				   numa_h(t, n));
	if (unplaced)
		flow_place(f, &x, &y, &row_h, FT_NUMA_MAX,
			   box_w((unsigned)__builtin_popcount(unplaced)),
			   box_h());
	f->h = y + row_h + PAD;
}

/* ---- drawing ---- */

static void draw_cores(svg_t *s, unsigned n, int x, int y)
{
	const ft_topology_t *t = s->t;
	unsigned k = 0;

	for (unsigned cpu = 0; cpu < FT_CPU_MAX; cpu++) {
		int holder;
		const char *fill = FREE_FILL;
		if (!ft_cpuset_has(&t->numa[n].cpus, cpu))
			continue;
		holder = holder_of_cpu(s->node, cpu);
		if (holder >= 0)
			fill = s->colour[holder];
		else if (ft_cpuset_has(&t->reserved_cpus, cpu))
			fill = RESERVED_FILL;
		out(s,
		    "<rect class=\"core\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#90a4ae\" stroke-width=\"0.5\"><title>CPU %u",
		    x + (int)(k % GRID_COLS) * CELL,
		    y + (int)(k / GRID_COLS) * CELL, CORE, CORE, fill, cpu);
		holder_title(s, holder);
		out(s, "</title></rect>\n");
		k++;
	}
}

static void draw_mig_slices(svg_t *s, unsigned g, int x, int y)
{
	const ft_topology_t *t = s->t;
	int x0 = x + (GPU_W - FT_MIG_SLICES * SLICE_W) / 2;
	int y0 = y + GPU_H - SLICE_H - 6;

	for (unsigned k = 0; k < FT_MIG_SLICES; k++)
		out(s,
		    "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#cfd8dc\" stroke=\"#b0bec5\" stroke-width=\"0.5\"/>\n",
		    x0 + (int)k * SLICE_W, y0, SLICE_W, SLICE_H);
	for (unsigned i = 0; i < t->n_mig; i++) {
		const ft_mig_instance_t *m = &t->mig[i];
		int holder = holder_of_mig(s->node, i);
		if (m->gpu != g)
			continue;
		out(s,
		    "<rect class=\"mig\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"2\" fill=\"%s\" stroke=\"" STROKE
		    "\"><title>MIG ",
		    x0 + m->start * SLICE_W + 1, y0 + 1, m->size * SLICE_W - 2,
		    SLICE_H - 2, holder >= 0 ? s->colour[holder] : FREE_FILL);
		text(s, m->profile);
		text(s, " ");
		text(s, m->uuid);
		holder_title(s, holder);
		out(s, "</title></rect>\n");
		if (m->size >= 4)
			label(s, x0 + m->start * SLICE_W + 4, y0 + 13, 9,
			      "normal", m->profile);
	}
}

/*
 * A shared GPU's replicas as a bar: each pod's replicas in its colour, in
 * holding order, the free rest white; "7/10 replicas" above it.
 */
static void draw_replicas(svg_t *s, unsigned g, int x, int y)
{
	const ft_node_t *node = s->node;
	unsigned n = s->t->gpus[g].replicas, at = 0;
	double unit = (GPU_W - 16.0) / n;
	char line[64];

	snprintf(line, sizeof(line), "%u/%u replicas", node->replicas_used[g],
		 n);
	label(s, x + 8, y + 60, 9, "normal", line);
	out(s,
	    "<rect class=\"replica-bar\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"" FREE_FILL
	    "\" stroke=\"" STROKE "\" stroke-width=\"0.5\"/>\n",
	    x + 8, y + REPLICA_Y, GPU_W - 16, REPLICA_H);
	for (unsigned i = 0; i < node->n_holdings && at < n; i++) {
		unsigned count = node->holdings[i].replicas[g];
		if (!count)
			continue;
		count = count < n - at ? count : n - at;
		out(s,
		    "<rect class=\"replicas\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" stroke=\"" STROKE
		    "\" stroke-width=\"0.5\"><title>%u of %u replicas",
		    x + 8 + at * unit, y + REPLICA_Y, count * unit, REPLICA_H,
		    s->colour[i], node->holdings[i].replicas[g], n);
		holder_title(s, (int)i);
		out(s, "</title></rect>\n");
		at += count;
	}
}

/* "NVIDIA A100-SXM4-80GB" -> "A100-SXM4-80GB". */
static const char *short_model(const char *model)
{
	static const char vendor[] = "NVIDIA ";

	if (model && strncmp(model, vendor, sizeof(vendor) - 1) == 0)
		return model + sizeof(vendor) - 1;
	return model ? model : "";
}

static void draw_gpu(svg_t *s, unsigned g, int x, int y)
{
	const ft_gpu_t *gpu = &s->t->gpus[g];
	int holder = holder_of_gpu(s->node, g);
	const char *fill = gpu->mig_enabled ? MIG_GPU_FILL : FREE_FILL;
	char line[64];

	if (holder >= 0)
		fill = s->colour[holder];
	else if ((s->t->reserved_gpus >> g) & 1)
		fill = RESERVED_FILL;
	out(s,
	    "<rect class=\"gpu\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"6\" fill=\"%s\" stroke=\"" STROKE
	    "\" stroke-width=\"1.5\"><title>GPU %d ",
	    x, y, GPU_W, GPU_H, fill, gpu->index);
	text(s, gpu->uuid);
	holder_title(s, holder);
	out(s, "</title></rect>\n");
	snprintf(line, sizeof(line), "GPU %d", gpu->index);
	label(s, x + 8, y + 18, 13, "bold", line);
	label(s, x + 8, y + 33, 9, "normal", short_model(gpu->model));
	snprintf(line, sizeof(line), "%llu MiB%s",
		 (unsigned long long)gpu->memory_mib,
		 gpu->mig_enabled ? ", MIG"
		 : gpu->replicas  ? ", shared"
				  : "");
	label(s, x + 8, y + 46, 9, "normal", line);
	if (gpu->mig_enabled)
		draw_mig_slices(s, g, x, y);
	if (gpu->replicas)
		draw_replicas(s, g, x, y);
	s->gpu_x[g] = x + GPU_W / 2.0;
	s->gpu_y[g] = y + GPU_H / 2.0;
}

/* A PCIe switch (or the root port when sw is FT_NONE) with its GPUs. */
static int draw_box(svg_t *s, unsigned n, unsigned sw, int x, int y)
{
	const ft_topology_t *t = s->t;
	int w = box_w(gpus_under(t, n, sw));
	int gx = x + PAD;
	char name[48];

	out(s,
	    "<rect class=\"pcie-switch\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"4\" fill=\"#e3f2fd\" stroke=\"#1e88e5\"%s/>\n",
	    x, y, w, box_h(), sw == FT_NONE ? " stroke-dasharray=\"4 3\"" : "");
	if (sw == FT_NONE)
		snprintf(name, sizeof(name), "root port");
	else
		snprintf(name, sizeof(name), "PCIe switch %d",
			 t->switches[sw].id);
	label(s, x + 6, y + 14, 10, "normal", name);
	for (unsigned g = 0; g < t->n_gpus; g++) {
		if (t->gpus[g].numa != n || t->gpus[g].pcie_switch != sw)
			continue;
		draw_gpu(s, g, gx, y + LABEL_H);
		gx += GPU_W + PAD;
	}
	return w;
}

/* A dashed box of the GPUs in `gpus`, whose NUMA node is unknown. */
static int draw_unplaced(svg_t *s, uint16_t gpus, const char *name, int x,
			 int y)
{
	int w = box_w((unsigned)__builtin_popcount(gpus));
	int gx = x + PAD;

	out(s,
	    "<rect class=\"unplaced\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"4\" fill=\"#fbe9e7\" stroke=\"#e64a19\" stroke-dasharray=\"4 3\"/>\n",
	    x, y, w, box_h());
	label(s, x + 6, y + 14, 10, "normal", name);
	for (unsigned g = 0; g < s->t->n_gpus; g++) {
		if (!((gpus >> g) & 1))
			continue;
		draw_gpu(s, g, gx, y + LABEL_H);
		gx += GPU_W + PAD;
	}
	extend(s, x + w, y + box_h());
	return w;
}

static void draw_numa(svg_t *s, unsigned n, int x, int y)
{
	const ft_topology_t *t = s->t;
	const ft_numa_node_t *numa = &t->numa[n];
	int w = numa_w(t, n), h = numa_h(t, n);
	int bx = x + PAD + grid_w(numa->n_cpus) + PAD;
	char cpus[256], head[400], memory[32] = "memory unknown";

	ft_cpuset_format(cpus, sizeof(cpus), &numa->cpus);
	if (!((t->numa_memory_unknown >> n) & 1))
		snprintf(memory, sizeof(memory), "%llu GiB",
			 (unsigned long long)(numa->memory_mib / 1024));
	snprintf(head, sizeof(head), "NUMA %d: CPUs %s, %s, %u free CPUs",
		 numa->id, cpus, memory, s->node->numa_free_cpus[n]);
	out(s,
	    "<rect class=\"numa\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"6\" fill=\"#fff8e1\" stroke=\"#f9a825\"/>\n",
	    x, y, w, h);
	label(s, x + 8, y + 14, 11, "bold", head);
	draw_cores(s, n, x + PAD, y + LABEL_H);
	for (unsigned sw = 0; sw < t->n_switches; sw++)
		if (t->switches[sw].numa == n)
			bx += draw_box(s, n, sw, bx, y + LABEL_H) + PAD;
	if (gpus_under(t, n, FT_NONE))
		draw_box(s, n, FT_NONE, bx, y + LABEL_H);
}

static int draw_socket(svg_t *s, unsigned so, int y, int w)
{
	const ft_topology_t *t = s->t;
	flow_t f;
	char name[32];

	socket_flow(&f, t, so);
	out(s,
	    "<rect class=\"socket\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"8\" fill=\"#fafafa\" stroke=\"" STROKE
	    "\" stroke-width=\"2\"/>\n",
	    MARGIN, y, w, f.h);
	snprintf(name, sizeof(name), "Socket %d", t->sockets[so].id);
	label(s, MARGIN + 8, y + 16, 13, "bold", name);
	for (unsigned n = 0; n < t->n_numa; n++)
		if (t->numa[n].socket == so)
			draw_numa(s, n, MARGIN + f.x[n], y + f.y[n]);
	if (unplaced_in(t, so))
		draw_unplaced(s, unplaced_in(t, so), "NUMA node unknown",
			      MARGIN + f.x[FT_NUMA_MAX], y + f.y[FT_NUMA_MAX]);
	extend(s, MARGIN + w, y + f.h);
	return f.h;
}

static bool linked(const ft_topology_t *t, unsigned a, unsigned b)
{
	return (t->gpus[a].nvlink_peers >> b) & 1;
}

/*
 * Groups of three or more GPUs linked pairwise (an NVSwitch board, a
 * quad): greedy cliques in GPU order, each GPU in at most one group.
 */
static unsigned nvlink_groups(uint16_t *groups, const ft_topology_t *t)
{
	uint16_t taken = 0;
	unsigned n = 0;

	for (unsigned a = 0; a < t->n_gpus; a++) {
		uint16_t g = (uint16_t)(1u << a);
		if (taken & g)
			continue;
		for (unsigned b = a + 1; b < t->n_gpus; b++) {
			bool all = !(taken & (1u << b));
			for (unsigned c = 0; all && c < t->n_gpus; c++)
				all = !((g >> c) & 1) || linked(t, b, c);
			if (all)
				g |= (uint16_t)(1u << b);
		}
		if (__builtin_popcount(g) >= 3) {
			groups[n++] = g;
			taken |= g;
		}
	}
	return n;
}

static unsigned min_links(const ft_topology_t *t, uint16_t g)
{
	unsigned m = 0;

	for (unsigned a = 0; a < t->n_gpus; a++)
		for (unsigned b = a + 1; b < t->n_gpus; b++)
			if (((g >> a) & 1) && ((g >> b) & 1) &&
			    (!m || t->gpus[a].nvlink_links[b] < m))
				m = t->gpus[a].nvlink_links[b];
	return m;
}

/*
 * One NVLink group as a bar below the sockets, wired to each of its GPUs.
 * Written into `under`, which goes beneath the boxes: a wire shows where it
 * leaves its socket, offset per GPU so that GPUs in one column stay apart.
 */
static void draw_bus(svg_t *s, ft_buf_t *under, uint16_t g, int y)
{
	const ft_topology_t *t = s->t;
	double lo = 1e9, hi = 0;
	unsigned rank = 0, size = (unsigned)__builtin_popcount(g);
	char line[400], list[96] = "";

	for (unsigned a = 0; a < t->n_gpus; a++) {
		double x;
		if (!((g >> a) & 1))
			continue;
		x = s->gpu_x[a] + (rank++ * 5.0) - size * 2.5;
		lo = x < lo ? x : lo;
		hi = x > hi ? x : hi;
		snprintf(
		    line, sizeof(line),
		    "<line class=\"nvlink\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%d\" stroke=\"" NVLINK
		    "\" stroke-width=\"2\"/>\n",
		    x, s->gpu_y[a], x, y);
		ft_buf_puts(under, line);
		snprintf(list + strlen(list), sizeof(list) - strlen(list),
			 "%s%d", rank > 1 ? ", " : "", t->gpus[a].index);
	}
	snprintf(
	    line, sizeof(line),
	    "<rect class=\"nvlink-group\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"8\" rx=\"3\" fill=\"" NVLINK
	    "\"/>\n",
	    lo - 6, y, hi - lo + 12);
	ft_buf_puts(under, line);
	snprintf(line, sizeof(line),
		 "NVLink group (all pairs linked, NV%u): GPUs %s",
		 min_links(t, g), list);
	label(s, (int)lo - 6, y + 22, 11, "normal", line);
	extend(s, (int)hi + 6, y + 30);
}

static bool in_group(const uint16_t *groups, unsigned n, unsigned a, unsigned b)
{
	for (unsigned k = 0; k < n; k++)
		if (((groups[k] >> a) & 1) && ((groups[k] >> b) & 1))
			return true;
	return false;
}

/* A link outside the groups: an arc between the two GPUs, above them. */
static void draw_arc(svg_t *s, unsigned a, unsigned b)
{
	const ft_topology_t *t = s->t;
	double dx = s->gpu_x[b] - s->gpu_x[a], dy = s->gpu_y[b] - s->gpu_y[a];
	double cx = s->gpu_x[a] + dx / 2 + dy * 0.25;
	double cy = s->gpu_y[a] + dy / 2 - (dx < 0 ? -dx : dx) * 0.25 - 30;
	unsigned links = t->gpus[a].nvlink_links[b];

	out(s,
	    "<path class=\"nvlink\" d=\"M%.1f %.1f Q%.1f %.1f %.1f %.1f\" fill=\"none\" stroke=\"" NVLINK
	    "\" stroke-opacity=\"0.8\" stroke-width=\"%.1f\"><title>NVLink GPU %d - GPU %d: %u links</title></path>\n",
	    s->gpu_x[a], s->gpu_y[a] - GPU_H / 2.0, cx, cy < 0 ? 0 : cy,
	    s->gpu_x[b], s->gpu_y[b] - GPU_H / 2.0, 1.5 + links / 4.0,
	    t->gpus[a].index, t->gpus[b].index, links);
}

static void draw_nvlinks(svg_t *s, ft_buf_t *under)
{
	const ft_topology_t *t = s->t;
	uint16_t groups[FT_GPU_MAX];
	unsigned n = nvlink_groups(groups, t);
	int y = s->height + 24;

	for (unsigned k = 0; k < n; k++)
		draw_bus(s, under, groups[k], y + (int)k * BUS_GAP);
	for (unsigned a = 0; a < t->n_gpus; a++)
		for (unsigned b = a + 1; b < t->n_gpus; b++)
			if (linked(t, a, b) && !in_group(groups, n, a, b))
				draw_arc(s, a, b);
}

static void swatch(svg_t *s, int x, int y, const char *fill)
{
	out(s,
	    "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\" stroke=\"" STROKE
	    "\" stroke-width=\"0.5\"/>\n",
	    x, y - 10, fill);
}

static void draw_legend(svg_t *s, int y)
{
	const ft_node_t *node = s->node;
	char line[128];

	label(s, MARGIN, y, 12, "bold", "Pods on this node");
	y += LEGEND_H;
	swatch(s, MARGIN, y, FREE_FILL);
	label(s, MARGIN + 18, y, 11, "normal", "free");
	swatch(s, MARGIN + 70, y, RESERVED_FILL);
	label(s, MARGIN + 88, y, 11, "normal", "reserved");
	out(s,
	    "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"" NVLINK
	    "\" stroke-width=\"3\"/>\n",
	    MARGIN + 160, y - 4, MARGIN + 190, y - 4);
	label(s, MARGIN + 196, y, 11, "normal", "NVLink");
	for (unsigned i = 0; i < node->n_holdings; i++) {
		const ft_holding_t *h = &node->holdings[i];
		char replicas[32] = "";
		unsigned n = 0;
		for (unsigned g = 0; g < FT_GPU_MAX; g++)
			n += h->replicas[g];
		if (n)
			snprintf(replicas, sizeof(replicas), ", %u replicas",
				 n);
		y += LEGEND_H;
		swatch(s, MARGIN, y, s->colour[i]);
		out(s,
		    "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"11\" fill=\"" STROKE
		    "\">",
		    MARGIN + 18, y);
		text(s, h->ns);
		text(s, "/");
		text(s, h->name);
		snprintf(line, sizeof(line),
			 ": priority %d, %d GPUs, %d MIG, %u CPUs%s%s%s",
			 (int)h->priority, __builtin_popcount(h->gpus),
			 __builtin_popcountll(h->mig[0]) +
			     __builtin_popcountll(h->mig[1]),
			 ft_cpuset_count(&h->cpus), replicas,
			 h->level < FT_LEVEL_COUNT ? ", level " : "",
			 h->level < FT_LEVEL_COUNT ? ft_level_name(h->level)
						   : "");
		text(s, line);
		text(s, h->assumed ? " (assumed)" : "");
		out(s, "</text>\n");
	}
	if (node->unknown_gpus || node->unknown_cpus ||
	    node->unknown_replicas) {
		y += LEGEND_H;
		snprintf(
		    line, sizeof(line),
		    "held at unknown places: %u GPUs, %u CPUs, %u replicas",
		    node->unknown_gpus, node->unknown_cpus,
		    node->unknown_replicas);
		label(s, MARGIN, y, 11, "normal", line);
	}
	extend(s, MARGIN + 520, y + MARGIN);
}

static void draw_title(svg_t *s)
{
	const ft_topology_t *t = s->t;
	char line[160];

	label(s, MARGIN, MARGIN + 12, 16, "bold", s->node->name);
	if (!t) {
		label(s, MARGIN, MARGIN + 32, 12, "normal", "no topology: ");
		out(s,
		    "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"11\" fill=\"#c62828\">",
		    MARGIN, MARGIN + 50);
		text(s, s->node->topology_error ? s->node->topology_error
						: "annotation missing");
		out(s, "</text>\n");
		extend(s, MARGIN + 720, MARGIN + 60);
		return;
	}
	snprintf(
	    line, sizeof(line),
	    "%u sockets, %u NUMA nodes, %u CPUs, %u PCIe switches, %u GPUs, %u MIG instances; pods holding units: %u",
	    t->n_sockets, t->n_numa, t->n_cpus, t->n_switches, t->n_gpus,
	    t->n_mig, s->node->n_holdings);
	label(s, MARGIN, MARGIN + 32, 12, "normal", line);
	extend(s, MARGIN + 600, MARGIN + 40);
}

static int sockets_width(const ft_topology_t *t)
{
	int w = 0;
	flow_t f;

	for (unsigned so = 0; so < t->n_sockets; so++) {
		socket_flow(&f, t, so);
		w = f.w > w ? f.w : w;
	}
	return w;
}

static void draw(svg_t *s, ft_buf_t *under)
{
	int y = HEADER, w;

	draw_title(s);
	if (!s->t)
		return;
	w = sockets_width(s->t);
	for (unsigned so = 0; so < s->t->n_sockets; so++)
		y += draw_socket(s, so, y, w) + PAD;
	if (unplaced_in(s->t, FT_NONE))
		draw_unplaced(s, unplaced_in(s->t, FT_NONE),
			      "GPU locality unknown (no socket or NUMA node)",
			      MARGIN, y);
	draw_nvlinks(s, under);
	draw_legend(s, s->height + 30);
}

/* The document: header, then the wires under the boxes, then the boxes. */
static int assemble(char **out_svg, svg_t *s, const ft_buf_t *under)
{
	ft_buf_t doc;
	char head[400];
	int w = s->width + MARGIN, h = s->height + MARGIN;

	snprintf(
	    head, sizeof(head),
	    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	    "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n"
	    "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
	    w, h, w, h);
	ft_buf_init(&doc, s->body.len + under->len + sizeof(head) + 16);
	ft_buf_puts(&doc, head);
	ft_buf_put(&doc, under->data ? under->data : "", under->len);
	ft_buf_put(&doc, s->body.data ? s->body.data : "", s->body.len);
	ft_buf_puts(&doc, "</svg>\n");
	if (s->body.failed || under->failed)
		doc.failed = true;
	return ft_buf_detach(out_svg, &doc);
}

int ft_codec_node_svg(char **out_svg, const ft_node_t *node)
{
	ft_buf_t under;
	svg_t s;
	int rc;

	*out_svg = NULL;
	memset(&s, 0, sizeof(s));
	s.node = node;
	s.t = node->topology;
	ft_buf_init(&s.body, 32768);
	ft_buf_init(&under, 4096);
	if ((rc = colours_init(&s)) < 0)
		goto cleanup;
	draw(&s, &under);
	rc = assemble(out_svg, &s, &under);
cleanup:
	free(s.colour);
	ft_buf_dispose(&s.body);
	ft_buf_dispose(&under);
	return rc;
}
