#include "arena.h"

#include <stdint.h>
#include <stdlib.h>

#include "device_impl.h"

struct sc_arena_block {
    sc_arena_block *next;
    size_t size;
    size_t used;
    unsigned char *base; /* SC_ARENA_ALIGN-aligned, on the arena's device */
};

enum { MIN_BLOCK = 1 << 20 };

static size_t align_up(size_t n) { return (n + SC_ARENA_ALIGN - 1) & ~(size_t)(SC_ARENA_ALIGN - 1); }

void sc_arena_init(sc_arena *arena, sc_device device) { *arena = (sc_arena){.device = device}; }

static void free_chain(sc_device device, sc_arena_block *b)
{
    while (b) {
        sc_arena_block *next = b->next;
        sc_device_free(device, b->base, b->size);
        free(b);
        b = next;
    }
}

void sc_arena_release(sc_arena *arena)
{
    uint64_t generation = arena->generation;
    free_chain(arena->device, arena->first);
    sc_arena_init(arena, arena->device);
    arena->generation = generation + 1;
}

static sc_arena_block *block_new(sc_device device, size_t size)
{
    sc_arena_block *b = malloc(sizeof *b);
    if (!b)
        return NULL;
    b->base = sc_device_alloc(device, size);
    if (!b->base) {
        free(b);
        return NULL;
    }
    b->next = NULL;
    b->size = size;
    b->used = 0;
    return b;
}

/* The block from arena->head on that has room for bytes, or a new one
 * chained last; NULL if out of memory. */
static sc_arena_block *block_with_room(sc_arena *arena, size_t bytes)
{
    for (sc_arena_block *b = arena->head; b; b = b->next)
        if (b->size - b->used >= bytes)
            return b;
    size_t size = bytes > MIN_BLOCK ? bytes : MIN_BLOCK;
    if (size < arena->capacity)
        size = arena->capacity; /* grow geometrically */
    sc_arena_block *b = block_new(arena->device, align_up(size));
    if (!b)
        return NULL;
    if (arena->last)
        arena->last->next = b;
    else
        arena->first = b;
    arena->last = b;
    arena->capacity += b->size;
    arena->generation++;
    return b;
}

void *sc_arena_alloc(sc_arena *arena, size_t bytes)
{
    bytes = align_up(bytes ? bytes : 1);
    sc_arena_block *b = block_with_room(arena, bytes);
    if (!b)
        return NULL;
    arena->head = b;
    void *p = b->base + b->used;
    b->used += bytes;
    arena->used += bytes;
    if (arena->used > arena->peak)
        arena->peak = arena->used;
    return p;
}

void sc_arena_reset(sc_arena *arena)
{
    for (sc_arena_block *b = arena->first; b; b = b->next)
        b->used = 0;
    arena->head = arena->first;
    arena->used = 0;
}

sc_arena_mark sc_arena_mark_now(const sc_arena *arena)
{
    return (sc_arena_mark){arena->head, arena->head ? arena->head->used : 0, arena->used};
}

/* The blocks after the mark's are unused since it: allocation only moves
 * on to later blocks. */
void sc_arena_rewind(sc_arena *arena, sc_arena_mark mark)
{
    arena->head = mark.head ? mark.head : arena->first;
    for (sc_arena_block *b = arena->head; b; b = b->next)
        b->used = b == mark.head ? mark.head_used : 0;
    arena->used = mark.used;
}
