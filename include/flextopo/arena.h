/*
 * A bump arena for one request's short-lived allocations, freed in one go
 * when the request completes (the h2o memory pool habit).
 *
 * The codecs parse request bodies into an arena: cJSON's allocation hooks
 * send a thread's allocations to the arena made current with
 * ft_arena_enter(), and frees there are no-ops. Outside an arena cJSON uses
 * malloc and free as usual.
 */
#ifndef FLEXTOPO_ARENA_H
#define FLEXTOPO_ARENA_H

#include <stddef.h>

typedef struct ft_arena_chunk ft_arena_chunk_t;

typedef struct ft_arena {
	ft_arena_chunk_t *chunks;
	size_t used; /* bytes used in the newest chunk */
	size_t size; /* capacity of the newest chunk */
	int failed;  /* an allocation failed */
} ft_arena_t;

/* Caller storage; nothing is allocated until the first ft_arena_alloc(). */
void ft_arena_init(ft_arena_t *a);
/* 16-byte aligned memory, NULL when out of memory. */
void *ft_arena_alloc(ft_arena_t *a, size_t n);
/* Free every chunk; the arena is empty and usable again. */
void ft_arena_dispose(ft_arena_t *a);

/*
 * Route this thread's cJSON allocations to `a` until ft_arena_leave().
 * Install the cJSON hooks once per process with ft_arena_install_json_hooks().
 */
void ft_arena_enter(ft_arena_t *a);
void ft_arena_leave(void);
void ft_arena_install_json_hooks(void);

#endif
