/*
 * Request arenas, and cJSON allocation hooks that use the calling thread's
 * current arena.
 *
 * Parsing a request with thousands of node names made one malloc and one free
 * per name and per string; with an arena the parse is a few bump allocations
 * and the request ends with a few frees. Trees parsed into an arena are never
 * cJSON_Delete'd piecemeal: the arena goes as a whole.
 */
#include <flextopo/arena.h>

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define CHUNK_MIN (64 * 1024)

struct ft_arena_chunk {
	ft_arena_chunk_t *next;
	max_align_t data[];
};

static _Thread_local ft_arena_t *current;

void ft_arena_init(ft_arena_t *a)
{
	a->chunks = NULL;
	a->used = a->size = 0;
	a->failed = 0;
}

static int grow(ft_arena_t *a, size_t n)
{
	size_t size = n > CHUNK_MIN ? n : CHUNK_MIN;
	ft_arena_chunk_t *c;

	if (a->size > size / 2 && a->size < SIZE_MAX / 4)
		size = a->size * 2 > size ? a->size * 2 : size;
	c = malloc(sizeof(*c) + size);
	if (!c) {
		a->failed = 1;
		return -1;
	}
	c->next = a->chunks;
	a->chunks = c;
	a->size = size;
	a->used = 0;
	return 0;
}

void *ft_arena_alloc(ft_arena_t *a, size_t n)
{
	size_t need = (n + 15) & ~(size_t)15;
	char *p;

	if (need < n)
		return NULL;
	if ((!a->chunks || a->size - a->used < need) && grow(a, need) < 0)
		return NULL;
	p = (char *)a->chunks->data + a->used;
	a->used += need;
	return p;
}

void ft_arena_dispose(ft_arena_t *a)
{
	while (a->chunks) {
		ft_arena_chunk_t *next = a->chunks->next;
		free(a->chunks);
		a->chunks = next;
	}
	ft_arena_init(a);
}

void ft_arena_enter(ft_arena_t *a)
{
	current = a;
}

void ft_arena_leave(void)
{
	current = NULL;
}

static void *hook_malloc(size_t n)
{
	return current ? ft_arena_alloc(current, n) : malloc(n);
}

static void hook_free(void *p)
{
	if (!current)
		free(p);
}

static void install(void)
{
	cJSON_Hooks hooks = {hook_malloc, hook_free};

	cJSON_InitHooks(&hooks);
}

void ft_arena_install_json_hooks(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, install);
}
