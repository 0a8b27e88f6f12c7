/* step_pipe.c — uploads into two buffer sets, results through a ring of
 * pinned slots (step_pipe.h). */
#include "run/step_pipe.h"
#include "scorch_host/device.h"

#include <stdlib.h>
#include <string.h>

/* A step's results on their way to the host, and the batch's targets. */
typedef struct result_slot {
    sc_fence *arrived; /* set behind the copies */
    host_step_info info;
    sc_tensor *loss;   /* pinned, one f32 */
    sc_tensor *guard;  /* pinned, one i32: the optimizer guard's flag */
    sc_tensor *grad_norm; /* pinned, one f32: the clipped gradients' norm */
    bool has_grad_norm;
    sc_tensor *outputs[SC_MAX_IO], *targets[SC_MAX_IO]; /* pinned; host */
    size_t output_bytes[SC_MAX_IO], target_bytes[SC_MAX_IO]; /* their capacities */
    sc_tensor_list output_list, target_list;
} result_slot;

/* One set of device buffers for a batch, [batch_size, ...] each. */
typedef struct buffer_set {
    sc_tensor *inputs[SC_MAX_IO], *targets[SC_MAX_IO];
    sc_fence *consumed; /* set after the last step that read this set */
} buffer_set;

struct host_step_pipe {
    sc_ctx *ctx;
    bool gpu;
    int64_t batch_size;
    host_step_fold_fn fold;
    void *user;
    /* uploads (GPU only) */
    sc_ctx *store; /* holds the buffer sets; its arena is never reset */
    buffer_set sets[2];
    int turn;      /* the set of the next upload */
    sc_tensor views[2][SC_MAX_IO]; /* the latest upload's inputs and targets */
    /* results (GPU only) */
    int depth;
    result_slot *slots;
    int64_t added, folded; /* steps; slot of step n: n % depth */
    host_step_pipe_stats stats;
};

/* ---- set-up ---- */

static sc_status pipe_init(host_step_pipe *p, int depth)
{
    sc_device dev = sc_ctx_device(p->ctx);
    if (!(p->store = sc_ctx_new(dev)))
        return sc_error_wrap(sc_error_code(), "the step's upload buffers");
    for (int k = 0; k < 2; k++)
        if (!(p->sets[k].consumed = sc_fence_new(dev)))
            return sc_error_code();
    p->depth = depth;
    if (!(p->slots = calloc((size_t)depth, sizeof *p->slots)))
        return sc_error_set(SC_ERR_NOMEM, "out of memory for %d result slots", depth);
    for (int i = 0; i < depth; i++) {
        result_slot *r = &p->slots[i];
        if (!(r->arrived = sc_fence_new(dev)) ||
            !(r->loss = sc_tensor_alloc_pinned(SC_F32, 0, NULL)) ||
            !(r->guard = sc_tensor_alloc_pinned(SC_I32, 0, NULL)) ||
            !(r->grad_norm = sc_tensor_alloc_pinned(SC_F32, 0, NULL)))
            return sc_error_code();
    }
    return SC_OK;
}

sc_status host_step_pipe_new(sc_ctx *ctx, int64_t batch_size, int depth, host_step_fold_fn fold,
                           void *user, host_step_pipe **out)
{
    *out = NULL;
    host_step_pipe *p = calloc(1, sizeof *p);
    if (!p)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the step pipe");
    *p = (host_step_pipe){.ctx = ctx, .batch_size = batch_size, .fold = fold, .user = user,
                        .gpu = sc_ctx_device(ctx).kind == SC_DEVICE_CUDA};
    sc_status st = p->gpu ? pipe_init(p, depth < 1 ? 1 : depth) : SC_OK;
    if (st != SC_OK) {
        host_step_pipe_free(p);
        return st;
    }
    *out = p;
    return SC_OK;
}

static void free_slot(result_slot *r)
{
    if (r->arrived) /* the copies may still write the buffers */
        sc_fence_wait(r->arrived);
    sc_fence_free(r->arrived);
    sc_tensor_free(r->loss);
    sc_tensor_free(r->guard);
    sc_tensor_free(r->grad_norm);
    for (int i = 0; i < SC_MAX_IO; i++) {
        sc_tensor_free(r->outputs[i]);
        sc_tensor_free(r->targets[i]);
    }
}

void host_step_pipe_free(host_step_pipe *p)
{
    if (!p)
        return;
    for (int i = 0; p->slots && i < p->depth; i++)
        free_slot(&p->slots[i]);
    free(p->slots);
    for (int k = 0; k < 2; k++)
        sc_fence_free(p->sets[k].consumed);
    sc_ctx_free(p->store); /* waits for the GPU before it frees the buffers */
    free(p);
}

/* ---- uploads ---- */

/* Device buffers shaped like the batch tensors, for batch_size samples. */
static sc_status alloc_buffers(host_step_pipe *p, const sc_tensor_list *like, sc_tensor **bufs)
{
    for (int i = 0; i < like->n; i++) {
        const sc_tensor *t = like->t[i];
        int64_t shape[SC_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        shape[0] = p->batch_size;
        if (!(bufs[i] = sc_tensor_new(p->store, t->dtype, t->ndim, shape)))
            return sc_error_wrap(sc_error_code(), "the step's upload buffers");
    }
    return SC_OK;
}

/* Queues the copy of src into the first rows of buf; *view is those rows. */
static sc_status upload_rows(host_step_pipe *p, const sc_tensor *src, sc_tensor *buf,
                             sc_fence *after, sc_fence *done, sc_tensor *view)
{
    if (src->ndim != buf->ndim || src->shape[0] > buf->shape[0])
        return sc_error_set(SC_ERR_INVALID, "batch tensor of %lld rows, for at most %lld",
                            (long long)src->shape[0], (long long)buf->shape[0]);
    *view = *buf;
    memcpy(view->shape, src->shape, sizeof view->shape);
    view->numel = src->numel;
    return sc_tensor_upload_async(p->ctx, view, src, after, done);
}

/* The copies start once the set's buffers are free: `after`. */
static sc_status upload_list(host_step_pipe *p, const sc_tensor_list *src, sc_tensor **bufs,
                             sc_fence *after, sc_fence *done, sc_tensor *views,
                             sc_tensor_list *out)
{
    if (src->n > 0 && !bufs[0])
        SC_TRY(alloc_buffers(p, src, bufs));
    out->n = src->n;
    for (int i = 0; i < src->n; i++) {
        SC_TRY(upload_rows(p, src->t[i], bufs[i], after, done, &views[i]));
        out->t[i] = &views[i];
    }
    return SC_OK;
}

sc_status host_step_pipe_upload(host_step_pipe *p, const host_batch *b, sc_tensor_list *inputs,
                              sc_tensor_list *targets)
{
    if (!p->gpu) {
        *inputs = b->inputs;
        *targets = b->targets;
        return SC_OK;
    }
    buffer_set *set = &p->sets[p->turn];
    SC_TRY(upload_list(p, &b->inputs, set->inputs, set->consumed, b->uploaded, p->views[0],
                       inputs));
    return upload_list(p, &b->targets, set->targets, set->consumed, b->uploaded, p->views[1],
                       targets);
}

sc_status host_step_pipe_consumed(host_step_pipe *p)
{
    if (!p->gpu)
        return SC_OK;
    SC_TRY(sc_ctx_set_fence(p->ctx, p->sets[p->turn].consumed));
    p->turn ^= 1;
    return SC_OK;
}

/* ---- results ---- */

/* *buf reshaped like `like`, reallocated when it holds fewer bytes. */
static sc_status fit(sc_tensor **buf, size_t *capacity, const sc_tensor *like, bool pinned)
{
    size_t bytes = sc_tensor_nbytes(like);
    if (!*buf || *capacity < bytes) {
        sc_tensor_free(*buf);
        *buf = pinned ? sc_tensor_alloc_pinned(like->dtype, like->ndim, like->shape)
                      : sc_tensor_alloc(like->dtype, like->ndim, like->shape);
        if (!*buf)
            return sc_error_wrap(sc_error_code(), "a step's results on the host");
        *capacity = bytes;
    }
    sc_tensor *t = *buf;
    t->dtype = like->dtype;
    t->ndim = like->ndim;
    memcpy(t->shape, like->shape, sizeof t->shape);
    t->numel = like->numel;
    return SC_OK;
}

static sc_status fold_slot(host_step_pipe *p, result_slot *r)
{
    host_step_result step = {.info = r->info,
                           .loss = sc_tensor_f32(r->loss)[0],
                           .skipped = *(const int32_t *)r->guard->data != 0,
                           .has_grad_norm = r->has_grad_norm,
                           .grad_norm = r->has_grad_norm ? sc_tensor_f32(r->grad_norm)[0] : 0,
                           .outputs = &r->output_list,
                           .targets = &r->target_list};
    p->folded++;
    return p->fold(p->user, &step);
}

static result_slot *oldest(host_step_pipe *p) { return &p->slots[p->folded % p->depth]; }

/* Queues the copies of the step's results into slot r. */
static sc_status fill_slot(host_step_pipe *p, result_slot *r, const sc_tensor *loss,
                           const sc_tensor *guard, const sc_tensor *grad_norm,
                           const sc_tensor_list *outputs, const host_batch *b)
{
    SC_TRY(sc_tensor_copy_async(p->ctx, r->loss, loss));
    SC_TRY(sc_tensor_copy_async(p->ctx, r->guard, guard));
    r->has_grad_norm = grad_norm != NULL;
    if (grad_norm)
        SC_TRY(sc_tensor_copy_async(p->ctx, r->grad_norm, grad_norm));
    r->output_list.n = outputs->n;
    for (int i = 0; i < outputs->n; i++) {
        SC_TRY(fit(&r->outputs[i], &r->output_bytes[i], outputs->t[i], true));
        SC_TRY(sc_tensor_copy_async(p->ctx, r->outputs[i], outputs->t[i]));
        r->output_list.t[i] = r->outputs[i];
    }
    /* The loader reuses the batch's buffers once it is released. */
    r->target_list.n = b->targets.n;
    for (int i = 0; i < b->targets.n; i++) {
        SC_TRY(fit(&r->targets[i], &r->target_bytes[i], b->targets.t[i], false));
        SC_TRY(sc_tensor_copy(r->targets[i], b->targets.t[i]));
        r->target_list.t[i] = r->targets[i];
    }
    return sc_ctx_set_fence(p->ctx, r->arrived);
}

/* The CPU's step, read where it is. */
static sc_status fold_now(host_step_pipe *p, const sc_tensor *loss, const sc_tensor *grad_norm,
                          const sc_tensor_list *outputs, const host_batch *b,
                          const host_step_info *info)
{
    float value, norm = 0;
    SC_TRY(sc_tensor_item(loss, &value));
    if (grad_norm)
        SC_TRY(sc_tensor_item(grad_norm, &norm));
    host_step_result step = {.info = *info, .loss = value, .has_grad_norm = grad_norm != NULL,
                           .grad_norm = norm, .outputs = outputs, .targets = &b->targets};
    return p->fold(p->user, &step);
}

sc_status host_step_pipe_add(host_step_pipe *p, const sc_tensor *loss, const sc_tensor *guard,
                           const sc_tensor *grad_norm, const sc_tensor_list *outputs,
                           const host_batch *b, const host_step_info *info)
{
    p->stats.steps++;
    if (!p->gpu)
        return fold_now(p, loss, grad_norm, outputs, b, info);
    if (p->added - p->folded == p->depth) { /* every slot in flight */
        p->stats.full_waits++;
        SC_TRY(sc_fence_wait(oldest(p)->arrived));
        SC_TRY(fold_slot(p, oldest(p)));
    }
    result_slot *r = &p->slots[p->added % p->depth];
    r->info = *info;
    SC_TRY(fill_slot(p, r, loss, guard, grad_norm, outputs, b));
    p->added++;
    return SC_OK;
}

sc_status host_step_pipe_poll(host_step_pipe *p)
{
    while (p->gpu && p->folded < p->added) {
        bool arrived;
        SC_TRY(sc_fence_passed(oldest(p)->arrived, &arrived));
        if (!arrived)
            return SC_OK;
        SC_TRY(fold_slot(p, oldest(p)));
    }
    return SC_OK;
}

sc_status host_step_pipe_drain(host_step_pipe *p)
{
    p->stats.drains += p->folded < p->added;
    while (p->gpu && p->folded < p->added) {
        SC_TRY(sc_fence_wait(oldest(p)->arrived));
        SC_TRY(fold_slot(p, oldest(p)));
    }
    return SC_OK;
}

host_step_pipe_stats host_step_pipe_stats_of(const host_step_pipe *p) { return p->stats; }
