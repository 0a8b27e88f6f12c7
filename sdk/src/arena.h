/* arena.h — the step arena: a bump allocator reset after every step.
 *
 * It grows by chaining blocks; at reset, a chain of several blocks is
 * replaced by one block as large as the whole chain, so from the second
 * step on a repeated op sequence gets identical addresses (which is what a
 * captured CUDA graph needs). A context has one on the host for its
 * bookkeeping and, on a GPU, one there for tensor data. Private to
 * libscorch. */
#ifndef SCORCH_ARENA_H
#define SCORCH_ARENA_H

#include <stddef.h>

#include "scorch/tensor.h"

typedef struct sc_arena_block sc_arena_block;

typedef struct sc_arena {
    sc_device device;     /* where the blocks live */
    sc_arena_block *head; /* block being filled; older blocks chained behind */
    size_t used;          /* bytes handed out since reset, all blocks */
    size_t capacity;      /* bytes in all blocks */
    size_t peak;          /* largest `used` seen */
    uint64_t generation;  /* counts changes of the blocks */
} sc_arena;

enum { SC_ARENA_ALIGN = 64 };

void sc_arena_init(sc_arena *arena, sc_device device);
void sc_arena_release(sc_arena *arena);
void *sc_arena_alloc(sc_arena *arena, size_t bytes); /* NULL if out of memory */
void sc_arena_reset(sc_arena *arena);

#endif
