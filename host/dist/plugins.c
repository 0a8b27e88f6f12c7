/* plugins.c — the collectives plugins make (scorch/dist.h) on this rank's
 * transport, under the layer's rules (dist.h): each begins with a check
 * that carries a digest of the call, so ranks that are not in the same
 * call (a plugin calling on some ranks only, or with other sizes) stop
 * together with a message instead of exchanging the wrong bytes; a bad
 * argument on one rank fails the call on all; every wait has the
 * --collective-timeout deadline. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "dist/dist_impl.h"

/* Elements of an allreduce gathered per round: its scratch is world x
 * this many bytes at most. */
enum { REDUCE_CHUNK_BYTES = 1 << 16 };

/* 31 bits of FNV-1a over what every rank must pass alike, in 1..INT_MAX-1
 * (0 is the host's own checks). */
static int call_digest(const sc_dist_call *c)
{
    const uint64_t fields[] = {(uint64_t)c->kind, c->bytes, (uint64_t)c->root,
                               (uint64_t)c->count, (uint64_t)c->dtype, (uint64_t)c->op};
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        h = (h ^ fields[i]) * 0x100000001b3ULL;
    return (int)((h >> 33) % (INT_MAX - 1)) + 1;
}

/* acc[i] = acc[i] op x[i] for n elements of one type. */
#define COMBINE(T, acc, x, n, op)                                              \
    do {                                                                       \
        T *a_ = (T *)(acc);                                                    \
        const T *x_ = (const T *)(x);                                          \
        for (size_t i_ = 0; i_ < (n); i_++)                                    \
            a_[i_] = (op) == SC_DIST_SUM ? a_[i_] + x_[i_]                     \
                     : (op) == SC_DIST_MAX ? (x_[i_] > a_[i_] ? x_[i_] : a_[i_]) \
                                           : (x_[i_] < a_[i_] ? x_[i_] : a_[i_]); \
    } while (0)

static void combine(void *acc, const void *x, size_t n, sc_dist_dtype dtype, sc_dist_op op)
{
    switch (dtype) {
    case SC_DIST_F32: COMBINE(float, acc, x, n, op); break;
    case SC_DIST_F64: COMBINE(double, acc, x, n, op); break;
    case SC_DIST_I32: COMBINE(int32_t, acc, x, n, op); break;
    case SC_DIST_I64: COMBINE(int64_t, acc, x, n, op); break;
    default: break; /* refused by libscorch */
    }
}

/* Gathers every rank's chunk and combines them in rank order, so every
 * rank computes the same bits. */
static void allreduce(host_dist *d, const sc_dist_call *c, char *scratch, size_t chunk)
{
    size_t elem = sc_dist_dtype_size(c->dtype);
    for (size_t done = 0; done < c->bytes; done += chunk) {
        size_t n = c->bytes - done < chunk ? c->bytes - done : chunk;
        char *mine = (char *)c->buf + done;
        d->ops->allgather(d->comm, mine, n, scratch, c->name);
        memcpy(mine, scratch, n);
        for (int r = 1; r < d->world; r++)
            combine(mine, scratch + (size_t)r * n, n / elem, c->dtype, c->op);
    }
}

/* The call's data, once the ranks agreed on it. */
static void move_data(host_dist *d, const sc_dist_call *c, char *scratch, size_t chunk)
{
    switch (c->kind) {
    case SC_DIST_BARRIER: break; /* the check was the barrier */
    case SC_DIST_BROADCAST:
        d->ops->broadcast(d->comm, c->buf, c->bytes, c->root, c->name);
        break;
    case SC_DIST_ALLGATHER:
        d->ops->allgather(d->comm, c->send, c->bytes, c->buf, c->name);
        break;
    case SC_DIST_ALLREDUCE: allreduce(d, c, scratch, chunk); break;
    }
}

/* What this rank needs before the check: room for an allreduce's
 * gathered chunks, a size the transport can send. */
static sc_status prepare(const host_dist *d, const sc_dist_call *c, char **scratch,
                         size_t *chunk)
{
    size_t elem = sc_dist_dtype_size(c->dtype);
    *chunk = elem ? REDUCE_CHUNK_BYTES / elem * elem : 0;
    if (c->kind == SC_DIST_ALLGATHER && c->bytes > INT_MAX / (size_t)d->world)
        return sc_error_set(SC_ERR_UNSUPPORTED, "%s: %zu bytes per rank, more than %d ranks "
                            "can gather at once", c->name, c->bytes, d->world);
    if (c->kind != SC_DIST_ALLREDUCE || !d->ops || c->bytes == 0)
        return SC_OK;
    *scratch = malloc((size_t)d->world * *chunk);
    return *scratch ? SC_OK : sc_error_set(SC_ERR_NOMEM, "%s: out of memory", c->name);
}

static sc_status plugin_collective(void *self, const sc_dist_call *c, sc_status local)
{
    host_dist *d = self;
    char *scratch = NULL;
    size_t chunk = 0;
    if (local == SC_OK)
        local = prepare(d, c, &scratch, &chunk);
    d->call_digest = call_digest(c);
    d->call_what = c->name;
    int v[HOST_V_COUNT] = {0};
    sc_status st = host_dist_exchange(d, local, v);
    if (st == SC_OK && d->ops) {
        double t0 = host_now();
        move_data(d, c, scratch, chunk);
        d->comm_s += host_now() - t0;
    } else if (st == SC_OK && c->kind == SC_DIST_ALLGATHER && c->bytes > 0) {
        memmove(c->buf, c->send, c->bytes); /* a world of one */
    }
    d->call_digest = 0;
    d->call_what = NULL;
    free(scratch);
    return st;
}

void host_dist_serve_plugins(host_dist *d)
{
    d->plugin_view = (sc_host_dist){.rank = d->rank, .world = d->world,
                                    .local_rank = d->local_rank, .self = d,
                                    .collective = plugin_collective};
    d->plugin_view_was = sc_host_set_dist(&d->plugin_view);
    d->serving = true;
}

void host_dist_stop_serving(host_dist *d)
{
    if (d->serving && sc_host_dist_current() == &d->plugin_view)
        sc_host_set_dist(d->plugin_view_was);
    d->serving = false;
}
