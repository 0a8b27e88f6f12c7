/* arena.h — the step arena: a bump allocator reset after every step.
 *
 * It grows by chaining blocks, each at least as large as all before it,
 * and keeps them: a reset starts again at the oldest block. An allocation
 * that does not fit the rest of its block goes on to the next block that
 * has room, so a repeated op sequence gets identical addresses in every
 * step (which is what a captured CUDA graph needs), and from the second
 * step on it touches no new memory: on the host, no page faults. A context
 * has one on the host for its bookkeeping and, on a GPU, one there for
 * tensor data. Private to libscorch. */
#ifndef SCORCH_ARENA_H
#define SCORCH_ARENA_H

#include <stddef.h>

#include "scorch/tensor.h"

typedef struct sc_arena_block sc_arena_block;

typedef struct sc_arena {
    sc_device device;      /* where the blocks live */
    sc_arena_block *first; /* the oldest block; the others chained behind */
    sc_arena_block *last;  /* the newest */
    sc_arena_block *head;  /* the block being filled */
    size_t used;           /* bytes handed out since reset, all blocks */
    size_t capacity;       /* bytes in all blocks */
    size_t peak;           /* largest `used` seen */
    uint64_t generation;   /* counts changes of the blocks */
} sc_arena;

enum { SC_ARENA_ALIGN = 64 };

void sc_arena_init(sc_arena *arena, sc_device device);
void sc_arena_release(sc_arena *arena);
void *sc_arena_alloc(sc_arena *arena, size_t bytes); /* NULL if out of memory */
void sc_arena_reset(sc_arena *arena);

/* A point in an arena's allocations to go back to: sc_arena_rewind frees
 * what was allocated after it, the addresses to be handed out again. */
typedef struct sc_arena_mark {
    sc_arena_block *head; /* NULL: the arena had no block yet */
    size_t head_used, used;
} sc_arena_mark;

sc_arena_mark sc_arena_mark_now(const sc_arena *arena);
void sc_arena_rewind(sc_arena *arena, sc_arena_mark mark);

#endif
