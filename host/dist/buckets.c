/* buckets.c — a train step's gradients over ranks (dist.h): averaged
 * bucket by bucket, each bucket summed as soon as backward is done with
 * its parameters, so that communication overlaps the rest of backward. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "dist/dist_impl.h"
#include "scorch/autograd.h"
#include "scorch_host/params.h"

/* Non-trainable tensors up to this many floats ride inside a bucket
 * (their gradients are zeros on every rank, so their average is too);
 * larger ones end the bucket, so a frozen backbone costs no traffic. */
enum { RIDE_ALONG_MAX = 64 * 1024 };

/* Buckets fill from the end of the flat buffer, the order in which
 * backward usually finishes parameters (the reverse of their creation). */
sc_status host_dist_layout_buckets(host_dist *d)
{
    int n = d->n_params;
    int64_t cap = (int64_t)(d->bucket_mb * 1024 * 1024 / sizeof(float));
    cap = cap < 1 ? 1 : cap > INT_MAX ? INT_MAX : cap;
    d->bucket_of = malloc((size_t)n * sizeof *d->bucket_of);
    d->buckets = calloc((size_t)n, sizeof *d->buckets);
    if (!d->bucket_of || !d->buckets)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for gradient buckets");
    host_bucket *cur = NULL;
    for (int i = n - 1; i >= 0; i--) {
        const sc_tensor *p = sc_params_at(d->params, i);
        int64_t off = sc_params_offset(d->params, i);
        d->bucket_of[i] = -1;
        if (!(p->flags & SC_TENSOR_REQUIRES_GRAD)) {
            if (p->numel > RIDE_ALONG_MAX)
                cur = NULL;
            continue;
        }
        if (p->numel > INT_MAX)
            return sc_error_set(SC_ERR_UNSUPPORTED,
                                "parameter %s has %lld elements, more than one allreduce "
                                "carries", p->name, (long long)p->numel);
        if (cur && cur->end - off > cap)
            cur = NULL;
        if (!cur) {
            cur = &d->buckets[d->n_buckets++];
            cur->end = off + p->numel;
        }
        cur->begin = off;
        cur->params++;
        d->bucket_of[i] = (int)(cur - d->buckets);
    }
    return d->ops->buckets(d->comm, d->n_buckets);
}

static void open_round(host_dist *d)
{
    for (int b = 0; b < d->n_buckets; b++)
        d->buckets[b].pending = d->buckets[b].params;
    d->next_start = d->next_done = 0;
    d->round_open = true;
}

sc_status host_dist_step_begin(host_dist *d, bool *stop, bool *interrupted)
{
    int v[HOST_V_COUNT] = {0};
    SC_TRY(host_dist_agree_flags(d, stop, interrupted, v));
    if (d->ops && !*stop && !*interrupted)
        open_round(d);
    return SC_OK;
}

/* Sum to mean: over ranks, and over the micro-batches accumulated. */
static void average(host_dist *d, int b)
{
    const host_bucket *k = &d->buckets[b];
    /* In range by construction: cannot fail. */
    sc_params_scale_grads(d->params, k->begin, k->end - k->begin,
                          1.0f / (float)(d->world * d->accumulate));
}

static void start_bucket(host_dist *d, int b)
{
    const host_bucket *k = &d->buckets[b];
    d->ops->sum_start(d->comm, b, sc_params_grads(d->params) + k->begin, k->end - k->begin);
}

/* Starts, in index order (the same on every rank, as collectives must
 * be), the buckets whose parameters are all final. */
static void start_ready(host_dist *d)
{
    while (d->next_start < d->n_buckets && d->buckets[d->next_start].pending == 0)
        start_bucket(d, d->next_start++);
}

/* The index of a parameter of the store, from its place in the flat
 * buffer (parameters are laid out in creation order). */
static int param_index(const host_dist *d, const sc_tensor *param)
{
    int64_t off = (const float *)param->data - sc_params_values(d->params);
    int lo = 0, hi = d->n_params - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (sc_params_offset(d->params, mid) <= off)
            lo = mid;
        else
            hi = mid - 1;
    }
    while (lo > 0 && sc_params_at(d->params, lo) != param) /* empty tensors share offsets */
        lo--;
    return lo;
}

/* sc_backward's grad-ready callback: backward is done with `param`. */
static void on_grad_ready(void *user, sc_tensor *param)
{
    host_dist *d = user;
    double t0 = host_now();
    int b = d->bucket_of[param_index(d, param)];
    if (b >= 0 && --d->buckets[b].pending == 0)
        start_ready(d);
    /* MPI moves a non-blocking collective along only inside MPI calls. */
    while (d->next_done < d->next_start && d->ops->sum_test(d->comm, d->next_done))
        average(d, d->next_done++);
    d->comm_s += host_now() - t0;
}

/* Parameters backward never reached are zeros: their buckets start here. */
void host_dist_finish_round(host_dist *d)
{
    if (!d->round_open)
        return;
    double t0 = host_now();
    while (d->next_start < d->n_buckets)
        start_bucket(d, d->next_start++);
    for (; d->next_done < d->n_buckets; d->next_done++) {
        char what[80];
        snprintf(what, sizeof what, "the gradient allreduce (bucket %d of %d)",
                 d->next_done + 1, d->n_buckets);
        d->ops->sum_wait(d->comm, d->next_done, what);
        average(d, d->next_done);
    }
    d->round_open = false;
    d->comm_s += host_now() - t0;
}

sc_status host_dist_backward(host_dist *d, sc_ctx *ctx, sc_tensor *loss, bool sync)
{
    if (!d->ops || !sync) {
        SC_TRY(sc_backward(ctx, loss, NULL, NULL));
        if (sync && d->accumulate > 1)
            return sc_params_scale_grads(d->params, 0, sc_params_numel(d->params),
                                         1.0f / (float)d->accumulate);
        return SC_OK;
    }
    sc_status st = sc_backward(ctx, loss, on_grad_ready, d);
    host_dist_finish_round(d); /* also after a failure: the other ranks wait for it */
    return st;
}
