/* dist.c — scorch/dist.h on the table the host installs per thread
 * (scorch_host/dist.h); without one, a world of one whose collectives are
 * local copies. The arguments are checked here, and a bad one goes to the
 * host as this rank's status, so that every rank fails the call alike. */
#include "scorch/dist.h"

#include <string.h>

#include "host_only.h"
#include "scorch_host/dist.h"

/* Per thread: each replica's thread is a rank of its own (dist.h). */
static _Thread_local const sc_host_dist *current;
static _Thread_local bool loader_thread;

const sc_host_dist *sc_host_set_dist(const sc_host_dist *dist)
{
    const sc_host_dist *previous = current;
    if (sc_host_only(__func__) == SC_OK)
        current = dist;
    return previous;
}

const sc_host_dist *sc_host_dist_current(void) { return current; }

bool sc_host_set_loader_thread(bool loader)
{
    bool previous = loader_thread;
    if (sc_host_only(__func__) == SC_OK)
        loader_thread = loader;
    return previous;
}

int sc_dist_rank(void) { return current ? current->rank : 0; }
int sc_dist_world_size(void) { return current ? current->world : 1; }
int sc_dist_local_rank(void) { return current ? current->local_rank : 0; }
bool sc_dist_is_main(void) { return sc_dist_rank() == 0; }

size_t sc_dist_dtype_size(sc_dist_dtype dtype)
{
    switch (dtype) {
    case SC_DIST_F32:
    case SC_DIST_I32: return 4;
    case SC_DIST_F64:
    case SC_DIST_I64: return 8;
    default: return 0;
    }
}

/* What is wrong with the call's arguments, as this rank's status. */
static sc_status check_call(const sc_dist_call *c)
{
    if (c->kind == SC_DIST_ALLREDUCE) {
        if (c->count < 0)
            return sc_error_set(SC_ERR_INVALID, "%s: count %lld is negative", c->name,
                                (long long)c->count);
        if (sc_dist_dtype_size(c->dtype) == 0)
            return sc_error_set(SC_ERR_INVALID, "%s: %d is no sc_dist_dtype", c->name,
                                (int)c->dtype);
        if ((unsigned)c->op >= SC_DIST_OP_COUNT)
            return sc_error_set(SC_ERR_INVALID, "%s: %d is no sc_dist_op", c->name, (int)c->op);
    }
    if (c->kind == SC_DIST_BROADCAST && (c->root < 0 || c->root >= sc_dist_world_size()))
        return sc_error_set(SC_ERR_INVALID, "%s: root %d is not a rank (the world has %d)",
                            c->name, c->root, sc_dist_world_size());
    if (c->bytes > 0 && (!c->buf || (c->kind == SC_DIST_ALLGATHER && !c->send)))
        return sc_error_set(SC_ERR_INVALID, "%s: NULL buffer for %zu bytes", c->name, c->bytes);
    return SC_OK;
}

/* The call on every rank: refused on a loader thread, else through the
 * host's table, or done locally for a world of one. */
static sc_status run(const sc_dist_call *c)
{
    if (loader_thread)
        return sc_error_set(SC_ERR_STATE,
                            "%s: called from a data-loader thread (dataset_getitem): "
                            "collectives run on a rank's own thread only; compute what the "
                            "samples need in index_open or dataset_open", c->name);
    sc_status local = check_call(c);
    if (current)
        return current->collective(current->self, c, local);
    if (local == SC_OK && c->kind == SC_DIST_ALLGATHER && c->bytes > 0)
        memmove(c->buf, c->send, c->bytes);
    return local;
}

sc_status sc_dist_barrier(void)
{
    return run(&(sc_dist_call){.kind = SC_DIST_BARRIER, .name = "sc_dist_barrier"});
}

sc_status sc_dist_broadcast(void *buf, size_t bytes, int root)
{
    return run(&(sc_dist_call){.kind = SC_DIST_BROADCAST, .name = "sc_dist_broadcast",
                               .buf = buf, .bytes = bytes, .root = root});
}

sc_status sc_dist_allreduce(void *buf, int64_t count, sc_dist_dtype dtype, sc_dist_op op)
{
    size_t elem = sc_dist_dtype_size(dtype);
    return run(&(sc_dist_call){.kind = SC_DIST_ALLREDUCE, .name = "sc_dist_allreduce",
                               .buf = buf, .bytes = count > 0 ? (size_t)count * elem : 0,
                               .count = count, .dtype = dtype, .op = op});
}

sc_status sc_dist_allgather(const void *send, size_t bytes, void *recv)
{
    return run(&(sc_dist_call){.kind = SC_DIST_ALLGATHER, .name = "sc_dist_allgather",
                               .buf = recv, .send = send, .bytes = bytes});
}
