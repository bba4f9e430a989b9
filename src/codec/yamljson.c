/*
 * YAML to cJSON: walks libyaml's parser events for the first document of a
 * stream and builds the equivalent JSON tree, so that the rest of the
 * extender reads kubectl snapshots and kubeconfig files with the same cJSON
 * code that reads the scheduler's wire requests.
 *
 * Plain scalars are typed by the YAML 1.2 core schema (yaml.org/spec/1.2.2,
 * section 10.3). Integers whose magnitude passes 2^53 stay strings because a
 * double cannot hold them exactly. An anchor points at its node in the tree
 * being built, and every alias is expanded into a fresh copy; the nodes
 * created by expansion are capped so that a "billion laughs" document fails
 * with FT_ETOOBIG instead of exhausting memory. Nodes that leave the tree
 * before the end (the loser of a duplicate key, an anchored key's scalar)
 * are parked in a graveyard until then, so an anchor never points at freed
 * memory. Nesting is capped too because the conversion recurses once per
 * level. Anchors and the members of wide mappings are found through hash
 * tables, so no input makes the conversion quadratic. The optional line
 * table is one more hash table, keyed by node address, filled as each node
 * is built from its event.
 */
#include <flextopo/error.h>
#include <flextopo/file.h>
#include <flextopo/yamljson.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

/* Nodes that alias expansion may create in one document. */
#define MAX_EXPANDED_NODES 1000000
/* Collections nested inside each other. */
#define MAX_DEPTH 512
/* 2^53: the largest integer range a double holds exactly. */
#define MAX_EXACT_INT 9007199254740992ULL

#define TAG_STR "tag:yaml.org,2002:str"

typedef struct anchor {
	char *name;
	const cJSON *node; /* borrowed from the tree or the graveyard */
	size_t nodes;	   /* nodes in the subtree, expansions included */
	char *scalar; /* text of a scalar node (for alias keys); else NULL */
} anchor_t;

typedef struct line_slot {
	const cJSON *node; /* NULL: an empty slot */
	unsigned line;
} line_slot_t;

struct ft_yaml_lines {
	line_slot_t *slots; /* cap slots (a power of 2), at most half full */
	size_t cap;
	size_t count;
};

typedef struct converter {
	yaml_parser_t parser;
	ft_yaml_lines_t *lines; /* NULL when the caller did not ask */
	const char *name;
	const char *text;
	size_t len;
	size_t last_line;  /* 1-based line of the input's last character */
	anchor_t *anchors; /* hash table of cap_anchors slots (a power of 2) */
	size_t n_anchors;  /* slots in use */
	size_t cap_anchors;
	cJSON *graveyard; /* nodes dropped from the tree, freed at the end */
	size_t nodes;	  /* nodes created so far, copies included */
	size_t expanded;  /* nodes created by alias expansion */
	unsigned depth;
} converter_t;

static int convert_node(cJSON **out, converter_t *conv, yaml_event_t *ev);

/* Error helpers */

__attribute__((format(printf, 4, 5))) static int
fail_at(const converter_t *conv, int code, const yaml_mark_t *mark,
	const char *fmt, ...)
{
	char where[320];
	va_list ap;
	int rc;

	snprintf(where, sizeof(where), "%s:%zu:%zu", conv->name, mark->line + 1,
		 mark->column + 1);
	va_start(ap, fmt);
	rc = ft_error_vset_at(code, where, fmt, ap);
	va_end(ap);
	return rc;
}

/*
 * libyaml's reader reports a byte offset rather than a mark (for bad UTF-8
 * or control characters); turn it into a line and column.
 */
static yaml_mark_t mark_from_offset(const converter_t *conv, size_t offset)
{
	yaml_mark_t mark = {0, 0, 0};
	size_t i;

	for (i = 0; i < offset && i < conv->len; i++) {
		if (conv->text[i] == '\n') {
			mark.line++;
			mark.column = 0;
		} else {
			mark.column++;
		}
	}
	mark.index = i;
	return mark;
}

static int parser_error(const converter_t *conv)
{
	const yaml_parser_t *p = &conv->parser;
	yaml_mark_t mark = p->problem_mark;
	const char *problem = p->problem ? p->problem : "syntax error";

	if (p->error == YAML_MEMORY_ERROR)
		return ft_error_set(FT_ENOMEM, "%s: out of memory parsing YAML",
				    conv->name);
	if (p->error == YAML_READER_ERROR)
		mark = mark_from_offset(conv, p->problem_offset);
	if (p->context)
		return fail_at(conv, FT_EINVAL, &mark, "%s (%s at line %zu)",
			       problem, p->context, p->context_mark.line + 1);
	return fail_at(conv, FT_EINVAL, &mark, "%s", problem);
}

static int next_event(converter_t *conv, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&conv->parser, ev))
		return parser_error(conv);
	return 0;
}

/* Scalar typing (YAML 1.2 core schema) */

static size_t skip_digits(const char **p, int base)
{
	const char *s = *p;
	size_t n = 0;

	while ((base == 8 && s[n] >= '0' && s[n] <= '7') ||
	       (base == 10 && s[n] >= '0' && s[n] <= '9') ||
	       (base == 16 &&
		((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f') ||
		 (s[n] >= 'A' && s[n] <= 'F'))))
		n++;
	*p = s + n;
	return n;
}

static bool is_null(const char *s)
{
	return !strcmp(s, "") || !strcmp(s, "~") || !strcmp(s, "null") ||
	       !strcmp(s, "Null") || !strcmp(s, "NULL");
}

/* 1 true, 0 false, -1 not a boolean */
static int parse_bool(const char *s)
{
	if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
		return 1;
	if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
		return 0;
	return -1;
}

/*
 * Match [-+]?[0-9]+, 0o[0-7]+ or 0x[0-9a-fA-F]+. Returns false when `s` is
 * no integer; otherwise *exact says whether |value| <= 2^53.
 */
static bool parse_int(const char *s, double *value, bool *exact)
{
	const char *p = s;
	int base = 10;
	bool negative = false;
	unsigned long long magnitude;

	if (s[0] == '0' && (s[1] == 'o' || s[1] == 'x')) {
		base = s[1] == 'o' ? 8 : 16;
		p += 2;
	} else if (*p == '-' || *p == '+') {
		negative = *p == '-';
		p++;
	}
	if (skip_digits(&p, base) == 0 || *p != '\0')
		return false;
	errno = 0;
	magnitude = strtoull(
	    s + (base == 10 ? (s[0] == '-' || s[0] == '+') : 2), NULL, base);
	*exact = errno != ERANGE && magnitude <= MAX_EXACT_INT;
	*value = negative ? -(double)magnitude : (double)magnitude;
	return true;
}

static bool is_decimal_float(const char *s)
{
	const char *p = s;

	if (*p == '-' || *p == '+')
		p++;
	if (*p == '.') {
		p++;
		if (skip_digits(&p, 10) == 0)
			return false;
	} else {
		if (skip_digits(&p, 10) == 0)
			return false;
		if (*p == '.') {
			p++;
			skip_digits(&p, 10);
		}
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '-' || *p == '+')
			p++;
		if (skip_digits(&p, 10) == 0)
			return false;
	}
	return *p == '\0';
}

static bool parse_float(const char *s, double *value)
{
	const char *p = s + (s[0] == '-' || s[0] == '+');

	if (!strcmp(p, ".inf") || !strcmp(p, ".Inf") || !strcmp(p, ".INF")) {
		*value = s[0] == '-' ? -INFINITY : INFINITY;
		return true;
	}
	if (!strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN")) {
		*value = NAN;
		return true;
	}
	if (!is_decimal_float(s))
		return false;
	*value = strtod(s, NULL);
	return true;
}

static cJSON *resolve_plain(const char *s)
{
	double number;
	bool exact;
	int boolean;

	if (is_null(s))
		return cJSON_CreateNull();
	if ((boolean = parse_bool(s)) >= 0)
		return cJSON_CreateBool(boolean);
	if (parse_int(s, &number, &exact))
		return exact ? cJSON_CreateNumber(number)
			     : cJSON_CreateString(s);
	if (parse_float(s, &number))
		return cJSON_CreateNumber(number);
	return cJSON_CreateString(s);
}

/* Only untagged plain scalars are typed; "!" and "!!str" force a string. */
static bool is_typed_scalar(const yaml_event_t *ev)
{
	const char *tag = (const char *)ev->data.scalar.tag;

	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	return !tag || (strcmp(tag, "!") && strcmp(tag, TAG_STR));
}

/* Anchors and aliases */

/* FNV-1a, for the anchor table and the member index of wide mappings. */
static size_t hash_name(const char *name)
{
	size_t h = 14695981039346656037ULL;

	while (*name)
		h = (h ^ (unsigned char)*name++) * 1099511628211ULL;
	return h;
}

/* The slot holding `name`, or the empty slot where it would go. */
static anchor_t *anchor_slot(anchor_t *table, size_t cap, const char *name)
{
	size_t i = hash_name(name) & (cap - 1);

	while (table[i].name && strcmp(table[i].name, name))
		i = (i + 1) & (cap - 1);
	return &table[i];
}

static anchor_t *find_anchor(const converter_t *conv, const char *name)
{
	anchor_t *slot = NULL;

	if (conv->cap_anchors == 0)
		return NULL;
	slot = anchor_slot(conv->anchors, conv->cap_anchors, name);
	return slot->name ? slot : NULL;
}

/* Keep the table at most half full so that probes stay short. */
static int grow_anchors(converter_t *conv)
{
	size_t cap = conv->cap_anchors ? conv->cap_anchors * 2 : 16;
	anchor_t *table = NULL;
	size_t i;

	if ((conv->n_anchors + 1) * 2 <= conv->cap_anchors)
		return 0;
	if (!(table = calloc(cap, sizeof(*table))))
		return ft_error_set(FT_ENOMEM, "%s: out of memory", conv->name);
	for (i = 0; i < conv->cap_anchors; i++) {
		if (conv->anchors[i].name)
			*anchor_slot(table, cap, conv->anchors[i].name) =
			    conv->anchors[i];
	}
	free(conv->anchors);
	conv->anchors = table;
	conv->cap_anchors = cap;
	return 0;
}

static void anchor_dispose(anchor_t *a)
{
	free(a->name);
	free(a->scalar);
}

/*
 * Remember `node` under `name`; a redefined anchor replaces the earlier one
 * for later aliases. `nodes` counts its subtree; `scalar` is the scalar's
 * text or NULL.
 */
static int remember_anchor(converter_t *conv, const char *name,
			   const cJSON *node, size_t nodes, const char *scalar)
{
	anchor_t *slot = NULL;
	char *copy = NULL;

	if (grow_anchors(conv) < 0)
		return FT_ENOMEM;
	if (scalar && !(copy = strdup(scalar)))
		return ft_error_set(FT_ENOMEM, "%s: out of memory", conv->name);
	slot = anchor_slot(conv->anchors, conv->cap_anchors, name);
	if (!slot->name) {
		if (!(slot->name = strdup(name))) {
			free(copy);
			return ft_error_set(FT_ENOMEM, "%s: out of memory",
					    conv->name);
		}
		conv->n_anchors++;
	}
	free(slot->scalar);
	slot->scalar = copy;
	slot->node = node;
	slot->nodes = nodes;
	return 0;
}

static int lookup_alias(anchor_t **out, converter_t *conv,
			const yaml_event_t *ev)
{
	const char *name = (const char *)ev->data.alias.anchor;

	*out = find_anchor(conv, name);
	if (!*out)
		return fail_at(conv, FT_EINVAL, &ev->start_mark,
			       "undefined alias \"%s\"", name);
	return 0;
}

static int expand_alias(cJSON **out, converter_t *conv, const yaml_event_t *ev)
{
	anchor_t *a = NULL;
	int error = 0;

	if ((error = lookup_alias(&a, conv, ev)) < 0)
		return error;
	if (a->nodes > MAX_EXPANDED_NODES - conv->expanded)
		return fail_at(conv, FT_ETOOBIG, &ev->start_mark,
			       "aliases expand to more than %d nodes",
			       MAX_EXPANDED_NODES);
	*out = cJSON_Duplicate(a->node, 1);
	if (!*out)
		return ft_error_set(FT_ENOMEM, "%s: out of memory", conv->name);
	conv->expanded += a->nodes;
	conv->nodes += a->nodes;
	return 0;
}

/* Lines */

/* Heap addresses share their low (alignment) bits; mix the rest down. */
static size_t hash_node(const cJSON *node)
{
	uint64_t h = (uint64_t)(uintptr_t)node;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return (size_t)h;
}

static line_slot_t *line_slot(line_slot_t *slots, size_t cap, const cJSON *node)
{
	size_t i = hash_node(node) & (cap - 1);

	while (slots[i].node && slots[i].node != node)
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

static int grow_lines(converter_t *conv)
{
	ft_yaml_lines_t *l = conv->lines;
	size_t cap = l->cap ? l->cap * 2 : 64;
	line_slot_t *slots = NULL;

	if ((l->count + 1) * 2 <= l->cap)
		return 0;
	if (!(slots = calloc(cap, sizeof(*slots))))
		return ft_error_set(FT_ENOMEM, "%s: out of memory", conv->name);
	for (size_t i = 0; i < l->cap; i++)
		if (l->slots[i].node)
			*line_slot(slots, cap, l->slots[i].node) = l->slots[i];
	free(l->slots);
	l->slots = slots;
	l->cap = cap;
	return 0;
}

/*
 * Lines as libyaml counts them: breaks are LF, CR, CR LF, and the UTF-8
 * NEL, LS and PS (yaml_parser_scan's IS_BREAK).
 */
static size_t count_lines(const char *text, size_t len)
{
	const unsigned char *t = (const unsigned char *)text;
	size_t lines = 1;

	for (size_t i = 0; i < len; i++) {
		size_t width = 0; /* bytes of a break starting at i */
		if (t[i] == '\r' && i + 1 < len && t[i + 1] == '\n')
			width = 2;
		else if (t[i] == '\r' || t[i] == '\n')
			width = 1;
		else if (t[i] == 0xc2 && i + 1 < len && t[i + 1] == 0x85)
			width = 2;
		else if (t[i] == 0xe2 && i + 2 < len && t[i + 1] == 0x80 &&
			 (t[i + 2] == 0xa8 || t[i + 2] == 0xa9))
			width = 3;
		if (width) {
			lines++;
			i += width - 1;
		}
	}
	return lines;
}

/*
 * Alias copies are left out: their text is elsewhere. A node at the end of
 * a stream whose last line has no break (an empty document after a
 * comment) is marked by libyaml on the line after it, which the input does
 * not have: it gets the last line.
 */
static int remember_line(converter_t *conv, const cJSON *node,
			 const yaml_event_t *ev)
{
	line_slot_t *slot = NULL;

	if (!conv->lines || ev->type == YAML_ALIAS_EVENT)
		return 0;
	if (grow_lines(conv) < 0)
		return FT_ENOMEM;
	slot = line_slot(conv->lines->slots, conv->lines->cap, node);
	if (!slot->node) {
		slot->node = node;
		conv->lines->count++;
	}
	slot->line = (unsigned)(ev->start_mark.line + 1 < conv->last_line
				    ? ev->start_mark.line + 1
				    : conv->last_line);
	return 0;
}

unsigned ft_yaml_line(const ft_yaml_lines_t *lines, const cJSON *node)
{
	if (!lines || !lines->cap || !node)
		return 0;
	return line_slot(lines->slots, lines->cap, node)->line;
}

void ft_yaml_lines_free(ft_yaml_lines_t *lines)
{
	if (!lines)
		return;
	free(lines->slots);
	free(lines);
}

/* Nodes */

static int convert_scalar(cJSON **out, converter_t *conv,
			  const yaml_event_t *ev)
{
	const char *text = (const char *)ev->data.scalar.value;

	*out = is_typed_scalar(ev) ? resolve_plain(text)
				   : cJSON_CreateString(text);
	if (!*out)
		return ft_error_set(FT_ENOMEM, "%s: out of memory", conv->name);
	conv->nodes++;
	return 0;
}

static int enter(converter_t *conv, const yaml_event_t *ev)
{
	if (conv->depth >= MAX_DEPTH)
		return fail_at(conv, FT_ETOOBIG, &ev->start_mark,
			       "nesting deeper than %d levels", MAX_DEPTH);
	conv->depth++;
	conv->nodes++;
	return 0;
}

static int convert_sequence(cJSON **out, converter_t *conv,
			    const yaml_event_t *start)
{
	yaml_event_t ev = {0};
	cJSON *seq = NULL;
	cJSON *item = NULL;
	int error = 0;

	if ((error = enter(conv, start)) < 0)
		return error;
	if (!(seq = cJSON_CreateArray()))
		goto oom;
	while ((error = next_event(conv, &ev)) == 0 &&
	       ev.type != YAML_SEQUENCE_END_EVENT) {
		if ((error = convert_node(&item, conv, &ev)) < 0)
			goto cleanup;
		if (!cJSON_AddItemToArray(seq, item))
			goto oom;
		item = NULL;
		yaml_event_delete(&ev);
	}
	if (error == 0) {
		*out = seq;
		seq = NULL;
	}
	goto cleanup;

oom:
	error = ft_error_set(FT_ENOMEM, "%s: out of memory", conv->name);
cleanup:
	conv->depth--;
	yaml_event_delete(&ev);
	cJSON_Delete(item);
	cJSON_Delete(seq);
	return error;
}

/* A mapping key must be a scalar, or an alias of one; it keeps its text. */
static int convert_key(char **out, converter_t *conv, yaml_event_t *ev)
{
	const char *text = NULL;
	anchor_t *a = NULL;
	cJSON *scalar = NULL;
	int error = 0;

	if (ev->type == YAML_ALIAS_EVENT) {
		if ((error = lookup_alias(&a, conv, ev)) < 0)
			return error;
		if (!(text = a->scalar))
			return fail_at(
			    conv, FT_EINVAL, &ev->start_mark,
			    "alias \"%s\" of a collection used as a mapping key",
			    a->name);
	} else if (ev->type == YAML_SCALAR_EVENT) {
		text = (const char *)ev->data.scalar.value;
		/* An anchored key is converted so that aliases can find it. */
		if (ev->data.scalar.anchor &&
		    (error = convert_node(&scalar, conv, ev)) < 0)
			return error;
		if (scalar)
			cJSON_AddItemToArray(conv->graveyard, scalar);
	} else {
		return fail_at(conv, FT_EINVAL, &ev->start_mark,
			       "mapping keys must be scalars");
	}
	if (!(*out = strdup(text)))
		return ft_error_set(FT_ENOMEM, "%s: out of memory", conv->name);
	return 0;
}

/*
 * A mapping under construction. Small mappings find an earlier duplicate
 * key by walking cJSON's member list; past INDEX_AFTER members a hash index
 * keeps a wide mapping from turning quadratic.
 */
#define INDEX_AFTER 32

typedef struct mapping {
	cJSON *object;
	cJSON **index; /* open addressing over the members; NULL while small */
	size_t cap;    /* slots in index, a power of 2 */
	size_t count;  /* members */
} mapping_t;

/* The slot holding the member named `key`, or the empty slot for it. */
static cJSON **member_slot(cJSON **index, size_t cap, const char *key)
{
	size_t i = hash_name(key) & (cap - 1);

	while (index[i] && strcmp(index[i]->string, key))
		i = (i + 1) & (cap - 1);
	return &index[i];
}

static int reindex(converter_t *conv, mapping_t *m)
{
	size_t cap = m->cap ? m->cap * 2 : 4 * INDEX_AFTER;
	cJSON **index = calloc(cap, sizeof(*index));
	cJSON *member = NULL;

	if (!index)
		return ft_error_set(FT_ENOMEM, "%s: out of memory", conv->name);
	cJSON_ArrayForEach (member, m->object)
		*member_slot(index, cap, member->string) = member;
	free(m->index);
	m->index = index;
	m->cap = cap;
	return 0;
}

static cJSON *find_member(const mapping_t *m, const char *key)
{
	if (m->index)
		return *member_slot(m->index, m->cap, key);
	return cJSON_GetObjectItemCaseSensitive(m->object, key);
}

/*
 * Add `value` under `key`, taking ownership of it even on error; the last
 * key wins and the earlier value goes to the graveyard.
 */
static int set_member(converter_t *conv, mapping_t *m, const char *key,
		      cJSON *value)
{
	cJSON *earlier = find_member(m, key);

	if (earlier)
		cJSON_AddItemToArray(
		    conv->graveyard,
		    cJSON_DetachItemViaPointer(m->object, earlier));
	if (!cJSON_AddItemToObject(m->object, key, value)) {
		cJSON_Delete(value);
		return ft_error_set(FT_ENOMEM, "%s: out of memory", conv->name);
	}
	if (!earlier)
		m->count++;
	if (m->index)
		*member_slot(m->index, m->cap, key) = value;
	if (m->count > INDEX_AFTER && m->count * 2 > m->cap)
		return reindex(conv, m);
	return 0;
}

static int convert_member(mapping_t *m, converter_t *conv, yaml_event_t *key_ev)
{
	yaml_event_t ev = {0};
	char *key = NULL;
	cJSON *value = NULL;
	int error = 0;

	if ((error = convert_key(&key, conv, key_ev)) < 0 ||
	    (error = next_event(conv, &ev)) < 0 ||
	    (error = convert_node(&value, conv, &ev)) < 0)
		goto cleanup;
	error = set_member(conv, m, key, value);
	value = NULL;

cleanup:
	cJSON_Delete(value);
	yaml_event_delete(&ev);
	free(key);
	return error;
}

static int convert_mapping(cJSON **out, converter_t *conv,
			   const yaml_event_t *start)
{
	yaml_event_t ev = {0};
	mapping_t m = {NULL, NULL, 0, 0};
	int error = 0;

	if ((error = enter(conv, start)) < 0)
		return error;
	if (!(m.object = cJSON_CreateObject())) {
		error =
		    ft_error_set(FT_ENOMEM, "%s: out of memory", conv->name);
		goto cleanup;
	}
	while ((error = next_event(conv, &ev)) == 0 &&
	       ev.type != YAML_MAPPING_END_EVENT) {
		if ((error = convert_member(&m, conv, &ev)) < 0)
			goto cleanup;
		yaml_event_delete(&ev);
	}
	if (error == 0) {
		*out = m.object;
		m.object = NULL;
	}

cleanup:
	conv->depth--;
	yaml_event_delete(&ev);
	free(m.index);
	cJSON_Delete(m.object);
	return error;
}

static const char *event_anchor(const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		return (const char *)ev->data.scalar.anchor;
	case YAML_SEQUENCE_START_EVENT:
		return (const char *)ev->data.sequence_start.anchor;
	case YAML_MAPPING_START_EVENT:
		return (const char *)ev->data.mapping_start.anchor;
	default:
		return NULL;
	}
}

static int convert_unanchored(cJSON **out, converter_t *conv, yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		return convert_scalar(out, conv, ev);
	case YAML_SEQUENCE_START_EVENT:
		return convert_sequence(out, conv, ev);
	case YAML_MAPPING_START_EVENT:
		return convert_mapping(out, conv, ev);
	case YAML_ALIAS_EVENT:
		return expand_alias(out, conv, ev);
	default:
		return fail_at(conv, FT_EINVAL, &ev->start_mark,
			       "unexpected YAML event %d", (int)ev->type);
	}
}

/*
 * Convert the node that starts with `ev` (still owned by the caller) into a
 * new tree in *out. An anchor is recorded after its node is complete, so an
 * alias inside its own anchored node is undefined and cannot recurse.
 */
static int convert_node(cJSON **out, converter_t *conv, yaml_event_t *ev)
{
	const char *anchor = event_anchor(ev);
	const char *scalar = NULL;
	size_t before = conv->nodes;
	cJSON *node = NULL;
	int error = 0;

	if ((error = convert_unanchored(&node, conv, ev)) < 0 ||
	    (error = remember_line(conv, node, ev)) < 0)
		goto cleanup;
	if (ev->type == YAML_SCALAR_EVENT)
		scalar = (const char *)ev->data.scalar.value;
	if (anchor &&
	    (error = remember_anchor(conv, anchor, node, conv->nodes - before,
				     scalar)) < 0)
		goto cleanup;
	*out = node;
	node = NULL;

cleanup:
	cJSON_Delete(node);
	return error;
}

/* Documents */

static int expect_event(converter_t *conv, yaml_event_type_t type,
			const char *what)
{
	yaml_event_t ev = {0};
	int error = 0;

	if ((error = next_event(conv, &ev)) < 0)
		return error;
	if (ev.type != type)
		error = fail_at(conv, FT_EINVAL, &ev.start_mark, "expected %s",
				what);
	yaml_event_delete(&ev);
	return error;
}

/* The root of the first document; an empty stream converts to null. */
static int convert_document(cJSON **out, converter_t *conv)
{
	yaml_event_t ev = {0};
	int error = 0;

	if ((error = expect_event(conv, YAML_STREAM_START_EVENT,
				  "the start of a stream")) < 0 ||
	    (error = next_event(conv, &ev)) < 0)
		goto cleanup;
	if (ev.type == YAML_STREAM_END_EVENT) {
		if (!(*out = cJSON_CreateNull()))
			error = ft_error_set(FT_ENOMEM, "%s: out of memory",
					     conv->name);
		goto cleanup;
	}
	yaml_event_delete(&ev);
	if ((error = next_event(conv, &ev)) < 0 ||
	    (error = convert_node(out, conv, &ev)) < 0)
		goto cleanup;
	/* Reading the end of the document reports trailing garbage. */
	if ((error = expect_event(conv, YAML_DOCUMENT_END_EVENT,
				  "the end of the document")) < 0) {
		cJSON_Delete(*out);
		*out = NULL;
	}

cleanup:
	yaml_event_delete(&ev);
	return error;
}

static void converter_dispose(converter_t *conv)
{
	size_t i;

	for (i = 0; i < conv->cap_anchors; i++)
		anchor_dispose(&conv->anchors[i]);
	free(conv->anchors);
	cJSON_Delete(conv->graveyard);
	yaml_parser_delete(&conv->parser);
}

int ft_yaml_to_json_lines(cJSON **out, ft_yaml_lines_t **lines,
			  const char *text, size_t len, const char *name)
{
	converter_t conv;
	cJSON *root = NULL;
	int error = 0;

	memset(&conv, 0, sizeof(conv));
	conv.name = name ? name : "<input>";
	conv.text = text;
	conv.len = len;
	*out = NULL;
	if (lines)
		*lines = NULL;
	/* Created first: adding to it cannot fail, so burying never fails. */
	conv.graveyard = cJSON_CreateArray();
	if (lines) {
		conv.lines = calloc(1, sizeof(*conv.lines));
		conv.last_line = count_lines(text, text ? len : 0);
	}
	if (!conv.graveyard || (lines && !conv.lines) ||
	    !yaml_parser_initialize(&conv.parser)) {
		cJSON_Delete(conv.graveyard);
		ft_yaml_lines_free(conv.lines);
		return ft_error_set(FT_ENOMEM, "%s: out of memory", conv.name);
	}
	yaml_parser_set_input_string(&conv.parser,
				     (const unsigned char *)(text ? text : ""),
				     text ? len : 0);
	if ((error = convert_document(&root, &conv)) < 0)
		goto cleanup;
	*out = root;
	root = NULL;
	if (lines) {
		*lines = conv.lines;
		conv.lines = NULL;
	}

cleanup:
	cJSON_Delete(root);
	ft_yaml_lines_free(conv.lines);
	converter_dispose(&conv);
	return error;
}

int ft_yaml_to_json(cJSON **out, const char *text, size_t len, const char *name)
{
	return ft_yaml_to_json_lines(out, NULL, text, len, name);
}

/* Files */

int ft_yaml_file_to_json(cJSON **out, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	int error = 0;

	*out = NULL;
	if ((error = ft_file_read(&text, &len, path, (size_t)1 << 30)) < 0)
		goto cleanup;
	error = ft_yaml_to_json(out, text, len, path);

cleanup:
	free(text);
	return error;
}
