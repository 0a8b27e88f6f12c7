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
    free_chain(arena->device, arena->head);
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

void *sc_arena_alloc(sc_arena *arena, size_t bytes)
{
    bytes = align_up(bytes ? bytes : 1);
    sc_arena_block *b = arena->head;
    if (!b || b->size - b->used < bytes) {
        size_t size = align_up(bytes > MIN_BLOCK ? bytes : MIN_BLOCK);
        if (size < arena->capacity)
            size = align_up(arena->capacity); /* grow geometrically */
        sc_arena_block *nb = block_new(arena->device, size);
        if (!nb)
            return NULL;
        nb->next = b;
        arena->head = b = nb;
        arena->capacity += size;
        arena->generation++;
    }
    void *p = b->base + b->used;
    b->used += bytes;
    arena->used += bytes;
    if (arena->used > arena->peak)
        arena->peak = arena->used;
    return p;
}

void sc_arena_reset(sc_arena *arena)
{
    sc_arena_block *b = arena->head;
    if (b && b->next) {
        /* Coalesce the chain into one block so later steps are stable. */
        size_t total = arena->capacity;
        free_chain(arena->device, b);
        arena->head = block_new(arena->device, total);
        arena->capacity = arena->head ? total : 0;
        arena->generation++;
    } else if (b) {
        b->used = 0;
    }
    arena->used = 0;
}
