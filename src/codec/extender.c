/*
 * kube-scheduler extender wire types (k8s.io/kube-scheduler/extender/v1,
 * types.go): ExtenderArgs, ExtenderFilterResult, HostPriorityList,
 * ExtenderBindingArgs and ExtenderBindingResult.
 *
 * Keys are the Go field names. The scheduler decodes them case-insensitively,
 * and so do we (cJSON_GetObjectItem is case-insensitive). Lists in replies are
 * never null: a null node list would reject every node (extender.go, Filter).
 */
#include <flextopo/buf.h>
#include <flextopo/codec.h>
#include <flextopo/error.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/*
 * Arrays and objects open before `offset`, outside strings: cJSON stops at
 * CJSON_NESTING_LIMIT levels and reports only where, which this tells apart
 * from a syntax error.
 */
static long nesting_at(const char *body, size_t offset)
{
	long depth = 0;
	bool in_string = false;

	for (size_t i = 0; i < offset; i++) {
		char c = body[i];

		if (in_string && c == '\\')
			i++;
		else if (c == '"')
			in_string = !in_string;
		else if (!in_string && (c == '[' || c == '{'))
			depth++;
		else if (!in_string && (c == ']' || c == '}'))
			depth--;
	}
	return depth;
}

static int parse_object(cJSON **out, const char *body, size_t len)
{
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
	size_t offset = end ? (size_t)(end - body) : 0;

	*out = NULL;
	if (!root && nesting_at(body, offset) >= CJSON_NESTING_LIMIT)
		return ft_error_set(
		    FT_EINVAL,
		    "JSON nested deeper than %d levels at offset %zu",
		    CJSON_NESTING_LIMIT, offset);
	if (!root)
		return ft_error_set(FT_EINVAL, "malformed JSON at offset %zu",
				    offset);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return ft_error_set(FT_EINVAL, "expected a JSON object");
	}
	*out = root;
	return 0;
}

static int decode_node_names(ft_extender_args_t *out, const cJSON *names)
{
	const cJSON *item;
	unsigned n = (unsigned)cJSON_GetArraySize(names);

	if (!cJSON_IsArray(names))
		return ft_error_set(FT_EINVAL, "NodeNames: expected an array");
	out->node_cache_capable = true;
	out->node_names = calloc(n ? n : 1, sizeof(*out->node_names));
	if (!out->node_names)
		return ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach (item, names) {
		if (!cJSON_IsString(item))
			return ft_error_set(FT_EINVAL,
					    "NodeNames[%u]: expected a string",
					    out->n_nodes);
		out->node_names[out->n_nodes++] = item->valuestring;
	}
	return 0;
}

static const char *node_name(const cJSON *node)
{
	const cJSON *meta = cJSON_GetObjectItem(node, "metadata");
	const cJSON *name = cJSON_GetObjectItem(meta, "name");

	return cJSON_IsString(name) ? name->valuestring : NULL;
}

static int decode_nodes(ft_extender_args_t *out, const cJSON *nodes)
{
	const cJSON *items = cJSON_GetObjectItem(nodes, "items"), *item;
	unsigned n = (unsigned)cJSON_GetArraySize(items);

	if (!cJSON_IsObject(nodes) ||
	    (items && !cJSON_IsArray(items) && !cJSON_IsNull(items)))
		return ft_error_set(FT_EINVAL, "Nodes: expected a NodeList");
	out->node_names = calloc(n ? n : 1, sizeof(*out->node_names));
	out->node_objects = calloc(n ? n : 1, sizeof(*out->node_objects));
	if (!out->node_names || !out->node_objects)
		return ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach (item, items) {
		const char *name = node_name(item);
		if (!name)
			return ft_error_set(
			    FT_EINVAL, "Nodes.items[%u]: metadata.name missing",
			    out->n_nodes);
		out->node_objects[out->n_nodes] = item;
		out->node_names[out->n_nodes++] = name;
	}
	return 0;
}

int ft_codec_extender_args_decode_tree(ft_extender_args_t *out,
				       const char *body, size_t len)
{
	const cJSON *names, *nodes;
	int rc;

	memset(out, 0, sizeof(*out));
	ft_arena_init(&out->arena);
	ft_arena_install_json_hooks();
	ft_arena_enter(&out->arena);
	rc = parse_object(&out->root, body, len);
	ft_arena_leave();
	if (rc == 0 && out->arena.failed)
		rc = ft_error_set(FT_ENOMEM, "out of memory");
	if (rc < 0) {
		ft_arena_dispose(&out->arena);
		return rc;
	}
	out->pod = cJSON_GetObjectItem(out->root, "Pod");
	names = cJSON_GetObjectItem(out->root, "NodeNames");
	nodes = cJSON_GetObjectItem(out->root, "Nodes");
	if (!cJSON_IsObject(out->pod))
		rc = ft_error_set(FT_EINVAL, "Pod: expected a Pod object");
	else if (names && !cJSON_IsNull(names))
		rc = decode_node_names(out, names);
	else if (nodes && !cJSON_IsNull(nodes))
		rc = decode_nodes(out, nodes);
	else
		out->node_cache_capable = true;
	if (rc < 0)
		ft_codec_extender_args_dispose(out);
	return rc;
}

/* The fast path gives up: parse the whole body instead. */
#define GIVE_UP 1

/*
 * The fast path of ExtenderArgs. kube-scheduler names every node in
 * NodeNames, and cJSON made a node and a copy for each (about 700
 * instructions per name, the largest part of a filter after the memo);
 * this scans the top-level object itself, copies the names in one block
 * and hands every other value to cJSON. It takes only bodies whose answer
 * it can give exactly as the whole-body parse would (the tree decoder
 * above): anything else (an escape in a key or a name, a value that does
 * not start as JSON, nesting near cJSON's limit, no NodeNames array, a
 * syntax error) returns GIVE_UP, and the caller parses the body whole,
 * which gives the same arguments or the same error.
 */
typedef struct {
	const char *p, *end;
} scan_t;

/* cJSON skips every byte up to the space as whitespace. */
static void skip_space(scan_t *s)
{
	while (s->p < s->end && (unsigned char)*s->p <= 32)
		s->p++;
}

static bool take(scan_t *s, char c)
{
	skip_space(s);
	if (s->p >= s->end || *s->p != c)
		return false;
	s->p++;
	return true;
}

/* A string without escapes: its bytes, between the quotes. */
static bool plain_string(scan_t *s, const char **out, size_t *len)
{
	const char *close;

	if (!take(s, '"'))
		return false;
	close = memchr(s->p, '"', (size_t)(s->end - s->p));
	if (!close || memchr(s->p, '\\', (size_t)(close - s->p)))
		return false;
	*out = s->p;
	*len = (size_t)(close - s->p);
	s->p = close + 1;
	return true;
}

/* cJSON_GetObjectItem's key comparison: tolower() on each byte. */
static bool key_is(const char *key, size_t len, const char *name)
{
	if (len != strlen(name))
		return false;
	for (size_t i = 0; i < len; i++)
		if (tolower((unsigned char)key[i]) !=
		    tolower((unsigned char)name[i]))
			return false;
	return true;
}

/* Containers below `item`, counting it: cJSON's nesting of the value. */
static int nesting(const cJSON *item)
{
	int most = 0;

	if (!cJSON_IsArray(item) && !cJSON_IsObject(item))
		return 0;
	for (const cJSON *c = item->child; c; c = c->next) {
		int n = nesting(c);
		if (n > most)
			most = n;
	}
	return most + 1;
}

/*
 * One value that is not NodeNames, parsed by cJSON in the args' arena.
 * Inside the body's object it sits one level deeper than alone, so a
 * value as deep as cJSON allows alone is left to the whole parse.
 */
static int scan_value(cJSON **out, scan_t *s, ft_arena_t *arena)
{
	const char *end = NULL;
	cJSON *v;

	skip_space(s);
	if (s->p >= s->end || !strchr("{[\"-0123456789tfn", *s->p) || !*s->p)
		return GIVE_UP;
	ft_arena_enter(arena);
	v = cJSON_ParseWithLengthOpts(s->p, (size_t)(s->end - s->p), &end,
				      false);
	ft_arena_leave();
	if (!v || nesting(v) >= CJSON_NESTING_LIMIT - 1)
		return GIVE_UP;
	s->p = end;
	*out = v;
	return 0;
}

/* Name `i` of a NodeNames array: its comma, then a plain string. */
static bool next_name(scan_t *s, unsigned i, const char **out, size_t *len)
{
	return (!i || take(s, ',')) && plain_string(s, out, len);
}

/*
 * NodeNames: count and measure, then copy in one block. The copy scans the
 * same bytes again, and checks each name as the count did, so that it never
 * reads a name the scan did not find.
 */
static int scan_names(ft_extender_args_t *out, scan_t *s)
{
	scan_t again = *s;
	size_t bytes = 0, len;
	const char *name;
	char *at;

	if (!take(s, '['))
		return GIVE_UP;
	for (bool more = !take(s, ']'); more; more = !take(s, ']')) {
		if (!next_name(s, out->n_nodes, &name, &len))
			return GIVE_UP;
		out->n_nodes++;
		bytes += len + 1;
	}
	out->node_names =
	    calloc(out->n_nodes ? out->n_nodes : 1, sizeof(*out->node_names));
	at = bytes ? ft_arena_alloc(&out->arena, bytes) : NULL;
	if (!out->node_names || (bytes && !at))
		return ft_error_set(FT_ENOMEM, "out of memory");
	take(&again, '[');
	for (unsigned i = 0; i < out->n_nodes; i++) {
		if (!next_name(&again, i, &name, &len))
			return GIVE_UP;
		out->node_names[i] = memcpy(at, name, len);
		at[len] = '\0';
		at += len + 1;
	}
	out->node_cache_capable = true;
	return 0;
}

/* The members the scan reads, by their bit in `seen`. */
enum { KEY_NODE_NAMES = 0, KEY_POD = 1, KEYS = 2 };
#define ALL_KEYS ((1u << KEYS) - 1)

/* One "key": value of the body's object. */
static int scan_member(ft_extender_args_t *out, scan_t *s, unsigned *seen)
{
	static const char *const keys[KEYS] = {"NodeNames", "Pod"};
	const char *key;
	size_t len;
	cJSON *v = NULL;
	unsigned k = 0;
	int rc;

	/* cJSON compares keys as C strings: leave a NUL in one to it. */
	if (!plain_string(s, &key, &len) || memchr(key, '\0', len) ||
	    !take(s, ':'))
		return GIVE_UP;
	while (k < KEYS && !key_is(key, len, keys[k]))
		k++;
	/* cJSON_GetObjectItem finds the first of a repeated key. */
	if (k < KEYS && (*seen & (1u << k)))
		k = KEYS;
	if (k < KEYS)
		*seen |= 1u << k;
	if (k == KEY_NODE_NAMES)
		return scan_names(out, s);
	if ((rc = scan_value(&v, s, &out->arena)) != 0)
		return rc;
	if (k == KEY_POD)
		out->root = v;
	return 0;
}

static int decode_scan(ft_extender_args_t *out, const char *body, size_t len)
{
	scan_t s = {body, body + len};
	unsigned seen = 0;
	int rc;

	if (!take(&s, '{'))
		return GIVE_UP;
	do {
		if ((rc = scan_member(out, &s, &seen)) != 0)
			return rc;
	} while (take(&s, ','));
	if (!take(&s, '}') || seen != ALL_KEYS || !cJSON_IsObject(out->root))
		return GIVE_UP;
	out->pod = out->root;
	return out->arena.failed ? ft_error_set(FT_ENOMEM, "out of memory") : 0;
}

int ft_codec_extender_args_decode(ft_extender_args_t *out, const char *body,
				  size_t len)
{
	int rc;

	memset(out, 0, sizeof(*out));
	ft_arena_init(&out->arena);
	ft_arena_install_json_hooks();
	rc = decode_scan(out, body, len);
	if (rc == 0)
		return 0;
	ft_codec_extender_args_dispose(out);
	if (rc < 0)
		return rc;
	return ft_codec_extender_args_decode_tree(out, body, len);
}

void ft_codec_extender_args_dispose(ft_extender_args_t *args)
{
	if (!args)
		return;
	ft_arena_dispose(&args->arena); /* the whole parsed tree */
	free(args->node_names);
	free(args->node_objects);
	memset(args, 0, sizeof(*args));
}

static int dup_field(char **dst, const cJSON *root, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(root, key);

	if (!cJSON_IsString(v) || !v->valuestring[0])
		return ft_error_set(FT_EINVAL,
				    "%s: expected a non-empty string", key);
	if (!(*dst = strdup(v->valuestring)))
		return ft_error_set(FT_ENOMEM, "out of memory");
	return 0;
}

int ft_codec_bind_args_decode(ft_bind_args_t *out, const char *body, size_t len)
{
	cJSON *root = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = parse_object(&root, body, len)) < 0)
		goto cleanup;
	if ((rc = dup_field(&out->pod_name, root, "PodName")) < 0 ||
	    (rc = dup_field(&out->pod_namespace, root, "PodNamespace")) < 0 ||
	    (rc = dup_field(&out->pod_uid, root, "PodUID")) < 0 ||
	    (rc = dup_field(&out->node, root, "Node")) < 0)
		ft_codec_bind_args_dispose(out);
cleanup:
	cJSON_Delete(root);
	return rc;
}

void ft_codec_bind_args_dispose(ft_bind_args_t *args)
{
	if (!args)
		return;
	free(args->pod_name);
	free(args->pod_namespace);
	free(args->pod_uid);
	free(args->node);
	memset(args, 0, sizeof(*args));
}

/*
 * The filter and prioritize replies are written straight into a buffer: with
 * thousands of nodes per request, building and printing a cJSON tree cost
 * more than the placement itself (docs/bench-history.md, "Where filter and
 * prioritize spend their time").
 */
/* A string literal without strlen: a reply writes some per node. */
#define PUT_LITERAL(b, literal) ft_buf_put((b), (literal), sizeof(literal) - 1)

struct ft_filter_reply {
	const ft_extender_args_t *args;
	ft_buf_t passed; /* "name","name" (NodeNames mode) */
	cJSON *items;	 /* Node objects (full-object mode) */
	ft_buf_t failed; /* "name":"reason", ... */
	ft_buf_t unresolvable;
	char *error;
};

int ft_codec_filter_reply_new(ft_filter_reply_t **out,
			      const ft_extender_args_t *args)
{
	ft_filter_reply_t *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r ||
	    (!args->node_cache_capable && !(r->items = cJSON_CreateArray()))) {
		free(r);
		return ft_error_set(FT_ENOMEM, "out of memory");
	}
	r->args = args;
	ft_buf_init(&r->passed, args->node_cache_capable
				    ? 16 + (size_t)args->n_nodes * 24
				    : 0);
	*out = r;
	return 0;
}

int ft_codec_filter_reply_pass(ft_filter_reply_t *r, unsigned i)
{
	cJSON *item;

	if (!r->items) {
		if (r->passed.len)
			ft_buf_put(&r->passed, ",", 1);
		ft_buf_put_json_string(&r->passed, r->args->node_names[i]);
		return r->passed.failed
			   ? ft_error_set(FT_ENOMEM, "out of memory")
			   : 0;
	}
	item = cJSON_Duplicate(r->args->node_objects[i], true);
	if (!item || !cJSON_AddItemToArray(r->items, item)) {
		cJSON_Delete(item);
		return ft_error_set(FT_ENOMEM, "out of memory");
	}
	return 0;
}

int ft_codec_filter_reply_fail(ft_filter_reply_t *r, unsigned i,
			       const char *reason, bool unresolvable)
{
	ft_buf_t *b = unresolvable ? &r->unresolvable : &r->failed;

	if (b->len)
		ft_buf_put(b, ",", 1);
	ft_buf_put_json_string(b, r->args->node_names[i]);
	ft_buf_put(b, ":", 1);
	ft_buf_put_json_string(b, reason);
	return b->failed ? ft_error_set(FT_ENOMEM, "out of memory") : 0;
}

int ft_codec_filter_reply_error(ft_filter_reply_t *r, const char *error)
{
	char *copy = strdup(error);

	if (!copy)
		return ft_error_set(FT_ENOMEM, "out of memory");
	free(r->error);
	r->error = copy;
	return 0;
}

static void put_map(ft_buf_t *out, const char *key, const ft_buf_t *body)
{
	ft_buf_puts(out, key);
	ft_buf_put(out, "{", 1);
	ft_buf_put(out, body->data, body->len);
	ft_buf_put(out, "}", 1);
}

static int put_nodes(ft_buf_t *out, const ft_filter_reply_t *r)
{
	char *items;

	if (!r->items) {
		ft_buf_puts(out, "{\"NodeNames\":[");
		ft_buf_put(out, r->passed.data, r->passed.len);
		ft_buf_puts(out, "],\"Nodes\":null");
		return 0;
	}
	if (!(items = cJSON_PrintUnformatted(r->items)))
		return ft_error_set(FT_ENOMEM, "out of memory");
	ft_buf_puts(out, "{\"NodeNames\":null,\"Nodes\":{\"items\":");
	ft_buf_puts(out, items);
	ft_buf_puts(out, "}");
	free(items);
	return 0;
}

int ft_codec_filter_reply_finish(char **out, ft_filter_reply_t *r)
{
	ft_buf_t b;
	int rc;

	*out = NULL;
	ft_buf_init(&b,
		    r->passed.len + r->failed.len + r->unresolvable.len + 128);
	if ((rc = put_nodes(&b, r)) == 0) {
		put_map(&b, ",\"FailedNodes\":", &r->failed);
		put_map(&b,
			",\"FailedAndUnresolvableNodes\":", &r->unresolvable);
		ft_buf_puts(&b, ",\"Error\":");
		ft_buf_put_json_string(&b, r->error ? r->error : "");
		ft_buf_put(&b, "}", 1);
		rc = ft_buf_detach(out, &b);
	}
	ft_buf_dispose(&b);
	ft_codec_filter_reply_free(r);
	return rc;
}

void ft_codec_filter_reply_free(ft_filter_reply_t *r)
{
	if (!r)
		return;
	ft_buf_dispose(&r->passed);
	ft_buf_dispose(&r->failed);
	ft_buf_dispose(&r->unresolvable);
	cJSON_Delete(r->items);
	free(r->error);
	free(r);
}

/* `,"Score":N}` in one append: a reply writes one per host. */
static void put_score(ft_buf_t *b, int score)
{
	char text[32] = ",\"Score\":";
	size_t n = sizeof(",\"Score\":") - 1, digits = 0;
	unsigned v = score < 0 ? 0 : (unsigned)score;
	char rev[12];

	do {
		rev[digits++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (digits)
		text[n++] = rev[--digits];
	text[n++] = '}';
	ft_buf_put(b, text, n);
}

int ft_codec_priorities_encode(char **out, const ft_extender_args_t *args,
			       const int *scores)
{
	ft_buf_t b;

	ft_buf_init(&b, 2 + (size_t)args->n_nodes * 48);
	ft_buf_put(&b, "[", 1);
	for (unsigned i = 0; i < args->n_nodes; i++) {
		if (i)
			PUT_LITERAL(&b, ",{\"Host\":");
		else
			PUT_LITERAL(&b, "{\"Host\":");
		ft_buf_put_json_string(&b, args->node_names[i]);
		put_score(&b, scores[i]);
	}
	ft_buf_put(&b, "]", 1);
	return ft_buf_detach(out, &b);
}

int ft_codec_bind_result_encode(char **out, const char *error)
{
	cJSON *root = cJSON_CreateObject();
	int rc = 0;

	*out = NULL;
	if (!root ||
	    !cJSON_AddStringToObject(root, "Error", error ? error : "") ||
	    !(*out = cJSON_PrintUnformatted(root)))
		rc = ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_Delete(root);
	return rc;
}
