/* share.c — rank 0's state to every rank (dist.h): bytes, the parameters
 * and optimizer state at start-up, tensors, and the buffers (running
 * statistics) before an eval pass or a checkpoint. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "dist/dist_impl.h"
#include "scorch/device.h"
#include "scorch_host/params.h"

float *host_dist_pull_values(host_dist *d)
{
    if (sc_params_device(d->params).kind == SC_DEVICE_CPU)
        return sc_params_values(d->params);
    if (!d->staging)
        d->staging = malloc((size_t)sc_params_numel(d->params) * sizeof(float) + 1);
    if (!d->staging) {
        sc_error_set(SC_ERR_NOMEM, "out of memory for a host copy of the parameters");
        return NULL;
    }
    return sc_params_read(d->params, d->staging, NULL) == SC_OK ? d->staging : NULL;
}

sc_status host_dist_push_values(host_dist *d)
{
    if (sc_params_device(d->params).kind == SC_DEVICE_CPU)
        return SC_OK;
    return sc_params_write(d->params, d->staging);
}

sc_status host_dist_share(host_dist *d, void *data, size_t bytes, const char *what)
{
    int v[HOST_V_COUNT] = {0};
    SC_TRY(host_dist_exchange(d, SC_OK, v));
    if (d->ops)
        d->ops->broadcast(d->comm, data, bytes, 0, what);
    return SC_OK;
}

/* The size goes first, in a check, so that every rank has its buffer
 * before the bytes come. */
sc_status host_dist_share_bytes(host_dist *d, sc_status local, const void *mine, size_t size,
                                char **copy, size_t *copy_size, const char *what)
{
    *copy = NULL;
    if (local == SC_OK && size > INT_MAX)
        local = sc_error_set(SC_ERR_UNSUPPORTED, "%s: %zu bytes, more than a rank can send",
                             what, size);
    int v[HOST_V_COUNT] = {[HOST_V_SIZE] = local == SC_OK && d->rank == 0 ? (int)size : 0};
    SC_TRY(host_dist_exchange(d, local, v));
    *copy_size = (size_t)v[HOST_V_SIZE];
    *copy = malloc(*copy_size + 1);
    if (*copy && d->rank == 0)
        memcpy(*copy, mine, *copy_size);
    int w[HOST_V_COUNT] = {0};
    SC_TRY(host_dist_exchange(d, *copy ? SC_OK : sc_error_set(SC_ERR_NOMEM, "out of memory"),
                              w));
    if (d->ops)
        d->ops->broadcast(d->comm, *copy, *copy_size, 0, what);
    (*copy)[*copy_size] = '\0';
    return SC_OK;
}

/* A host tensor's worth of rank 0's t broadcast into every rank's t. */
static sc_status share_tensor(host_dist *d, sc_tensor *t, const char *what)
{
    if (t->device.kind == SC_DEVICE_CPU) {
        d->ops->broadcast(d->comm, t->data, sc_tensor_nbytes(t), 0, what);
        return SC_OK;
    }
    sc_tensor *host = sc_tensor_alloc(t->dtype, t->ndim, t->shape);
    sc_status st = host ? sc_tensor_copy(host, t) : SC_ERR_NOMEM;
    if (st == SC_OK) {
        d->ops->broadcast(d->comm, host->data, sc_tensor_nbytes(host), 0, what);
        st = sc_tensor_copy(t, host);
    }
    sc_tensor_free(host);
    return st;
}

sc_status host_dist_share_tensor(host_dist *d, sc_tensor *t, const char *what)
{
    return d->ops ? host_dist_check(d, share_tensor(d, t, what)) : SC_OK;
}

/* Rank 0's values and optimizer state to every rank. */
static sc_status share_params(host_dist *d, sc_optim *opt)
{
    float *values = host_dist_pull_values(d);
    if (!values)
        return sc_error_code();
    d->ops->broadcast(d->comm, values, (size_t)sc_params_numel(d->params) * sizeof(float), 0,
                      "the broadcast of rank 0's parameters");
    SC_TRY(host_dist_push_values(d));
    for (int i = 0; opt && i < sc_optim_state_count(opt); i++)
        SC_TRY(share_tensor(d, sc_optim_state_at(opt, i),
                            "the broadcast of rank 0's optimizer state"));
    return SC_OK;
}

/* GPU ranks sum their gradients with NCCL (its own stream), keeping their
 * transport for the control plane. */
static sc_status use_gpu_transport(host_dist *d, sc_ctx *ctx)
{
    sc_device dev = sc_ctx_device(ctx);
    if (dev.kind == SC_DEVICE_CPU)
        return SC_OK;
#if SC_HAVE_NCCL
    host_comm_info info = {.rank = d->rank, .world = d->world};
    host_comm *wrapped;
    SC_TRY(host_comm_nccl_wrap(d->ops, d->comm, &info, d->timeout_s, dev.index,
                               sc_ctx_cuda_stream(ctx), &wrapped));
    d->comm = wrapped;
    d->ops = &host_comm_nccl;
    return SC_OK;
#else
    return sc_error_set(SC_ERR_UNSUPPORTED,
                        "data parallelism over GPU ranks needs NCCL, which this build lacks "
                        "(meson option nccl); run CPU ranks (--device cpu) or one GPU process");
#endif
}

/* The runs of buffers in the flat value buffer, which
 * host_dist_sync_buffers sends. */
static sc_status layout_buffers(host_dist *d)
{
    d->buffers = calloc((size_t)d->n_params, sizeof *d->buffers);
    if (!d->buffers)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for buffer ranges");
    for (int i = 0; i < d->n_params; i++) {
        const sc_tensor *p = sc_params_at(d->params, i);
        int64_t off = sc_params_offset(d->params, i);
        if (!(p->flags & SC_TENSOR_BUFFER))
            continue;
        host_range *last = d->n_buffers ? &d->buffers[d->n_buffers - 1] : NULL;
        if (last && last->end == off)
            last->end += p->numel;
        else
            d->buffers[d->n_buffers++] = (host_range){off, off + p->numel};
    }
    return SC_OK;
}

sc_status host_dist_start(host_dist *d, sc_ctx *ctx, sc_params *params, sc_optim *opt)
{
    d->params = params;
    d->n_params = sc_params_count(params);
    if (!d->ops)
        return SC_OK;
    sc_status st = use_gpu_transport(d, ctx);
    if (st == SC_OK)
        st = host_dist_layout_buckets(d);
    if (st == SC_OK)
        st = layout_buffers(d);
    int v[HOST_V_COUNT] = {0};
    SC_TRY(host_dist_exchange(d, st, v)); /* also rank 0's run directory and resume */
    SC_TRY(host_dist_check(d, share_params(d, opt)));
    d->comm_s = 0; /* the phases count theirs */
    return SC_OK;
}

sc_status host_dist_sync_buffers(host_dist *d)
{
    int v[HOST_V_COUNT] = {0};
    if (!d->ops || d->n_buffers == 0)
        return host_dist_exchange(d, SC_OK, v);
    float *values = host_dist_pull_values(d);
    SC_TRY(host_dist_exchange(d, values ? SC_OK : sc_error_code(), v));
    double t0 = host_now();
    for (int i = 0; i < d->n_buffers; i++)
        d->ops->broadcast(d->comm, values + d->buffers[i].begin,
                          (size_t)(d->buffers[i].end - d->buffers[i].begin) * sizeof(float), 0,
                          "the broadcast of rank 0's buffers");
    d->comm_s += host_now() - t0;
    return host_dist_check(d, host_dist_push_values(d));
}
