/* mix.c — Mixup and CutMix of train batches (mix.h). */
#include "run/mix.h"
#include "scorch_host/context.h"
#include "scorch_host/device.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The mixer's stream id, apart from the step's and the loader's. */
enum { MIX_STREAM = 0x6d1c };

/* Soft-target buffers used in turn. On a GPU the upload of one is queued
 * behind the steps in flight; it is refilled only after the step that
 * read it has finished (its fence). */
enum { MIX_BUFFERS = 4 };

struct host_mix {
    host_mix_settings set;
    uint64_t seed;
    int rank;
    int64_t height, width; /* of image inputs; 0 otherwise */
    sc_ctx *ctx;
    bool gpu;
    sc_tensor *soft[MIX_BUFFERS]; /* [batch_size, classes] */
    sc_fence *read[MIX_BUFFERS];  /* GPU: set after the step that read soft[k] */
    int turn;                     /* the buffer of the latest batch */
    int64_t batches;              /* mixed so far */
};

/* ---- draws ---- */

/* [0, 1) with 53 bits; (0, 1] for open. */
static double uniform(sc_rng *rng, bool open)
{
    double u = (double)(sc_rng_u64(rng) >> 11) * 0x1p-53;
    return open ? 1.0 - u : u;
}

/* Box-Muller */
static double normal(sc_rng *rng)
{
    const double two_pi = 6.283185307179586;
    double r = sqrt(-2.0 * log(uniform(rng, true)));
    return r * cos(two_pi * uniform(rng, false));
}

/* Gamma(a, 1), a > 0: Marsaglia and Tsang's method; a < 1 through
 * Gamma(a + 1) U^(1/a). */
static double gamma_draw(sc_rng *rng, double a)
{
    if (a < 1.0)
        return gamma_draw(rng, a + 1.0) * pow(uniform(rng, true), 1.0 / a);
    double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = normal(rng);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = uniform(rng, true);
        if (u < 1.0 - 0.0331 * x * x * x * x ||
            log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return d * v;
    }
}

double host_mix_beta(sc_rng *rng, double a)
{
    double x = gamma_draw(rng, a), y = gamma_draw(rng, a);
    /* Both can underflow to 0 for a tiny alpha, where Beta is near 0 or 1. */
    return x + y > 0.0 ? x / (x + y) : (double)(uniform(rng, false) < 0.5);
}

static int64_t clip(int64_t v, int64_t hi) { return v < 0 ? 0 : v > hi ? hi : v; }

void host_mix_cut_box(host_mix_draw *d, int64_t cy, int64_t cx, int64_t h, int64_t w)
{
    double ratio = sqrt(1.0 - d->lam);
    int64_t cut_h = (int64_t)((double)h * ratio), cut_w = (int64_t)((double)w * ratio);
    d->y0 = clip(cy - cut_h / 2, h);
    d->y1 = clip(cy + cut_h / 2, h);
    d->x0 = clip(cx - cut_w / 2, w);
    d->x1 = clip(cx + cut_w / 2, w);
    d->lam = 1.0 - (double)((d->y1 - d->y0) * (d->x1 - d->x0)) / (double)(h * w);
}

host_mix_draw host_mix_draw_batch(const host_mix_settings *set, sc_rng *rng, int64_t h, int64_t w)
{
    host_mix_draw d = {.lam = 1.0};
    if (!(uniform(rng, false) < set->prob))
        return d;
    bool both = set->mixup_alpha > 0.0 && set->cutmix_alpha > 0.0;
    d.cutmix = both ? uniform(rng, false) < set->switch_prob : set->cutmix_alpha > 0.0;
    d.lam = host_mix_beta(rng, d.cutmix ? set->cutmix_alpha : set->mixup_alpha);
    if (d.lam == 1.0) /* timm leaves the batch as it is */
        d.cutmix = false;
    else if (d.cutmix) { /* the centre uniform over the image, as timm */
        int64_t cy = (int64_t)sc_rng_below(rng, (uint64_t)h);
        host_mix_cut_box(&d, cy, (int64_t)sc_rng_below(rng, (uint64_t)w), h, w);
    }
    return d;
}

/* ---- mixing ---- */

/* Rows a and b of f32 [n, len] mixed with each other: x lam + flip (1 - lam). */
static void mix_rows(float *a, float *b, int64_t len, float lam, float rest)
{
    for (int64_t e = 0; e < len; e++) {
        float u = a[e], v = b[e];
        a[e] = u * lam + v * rest;
        if (a != b)
            b[e] = v * lam + u * rest;
    }
}

/* The boxes of images a and b [C, H, W] swapped. */
static void swap_boxes(float *a, float *b, const sc_tensor *x, const host_mix_draw *d)
{
    int64_t channels = x->shape[1], h = x->shape[2], w = x->shape[3];
    for (int64_t c = 0; c < channels; c++)
        for (int64_t y = d->y0; y < d->y1; y++)
            for (int64_t i = (c * h + y) * w + d->x0; i < (c * h + y) * w + d->x1; i++) {
                float t = a[i];
                a[i] = b[i];
                b[i] = t;
            }
}

void host_mix_inputs(sc_tensor *x, const host_mix_draw *d)
{
    if (d->lam == 1.0 || x->ndim < 1)
        return;
    int64_t n = x->shape[0], len = n > 0 ? x->numel / n : 0;
    float *v = sc_tensor_f32(x), lam = (float)d->lam, rest = (float)(1.0 - d->lam);
    for (int64_t i = 0; i < n / 2; i++) { /* sample i pairs with n - 1 - i */
        float *a = v + i * len, *b = v + (n - 1 - i) * len;
        if (d->cutmix)
            swap_boxes(a, b, x, d);
        else
            mix_rows(a, b, len, lam, rest);
    }
    if (n % 2 && !d->cutmix) /* the middle sample, mixed with itself as in timm */
        mix_rows(v + n / 2 * len, v + n / 2 * len, len, lam, rest);
}

sc_status host_mix_targets(const sc_tensor *labels, const int64_t *samples, double lam,
                         sc_tensor *soft)
{
    int64_t n = labels->numel, classes = soft->shape[1];
    for (int64_t i = 0; i < n; i++) {
        int64_t t = sc_tensor_get_int(labels, i);
        if (t < 0 || t >= classes)
            return sc_error_set(SC_ERR_INVALID, "--mixup/--cutmix: train sample %lld has "
                                "class %lld, outside the model's 0..%lld",
                                (long long)(samples ? samples[i] : i), (long long)t,
                                (long long)classes - 1);
    }
    float *q = sc_tensor_f32(soft), on = (float)lam, rest = (float)(1.0 - lam);
    for (int64_t i = 0; i < n; i++) {
        int64_t t = sc_tensor_get_int(labels, i), u = sc_tensor_get_int(labels, n - 1 - i);
        for (int64_t c = 0; c < classes; c++) /* as timm: y1 lam + y2 (1 - lam) */
            q[i * classes + c] = (c == t ? on : 0.0f) + (c == u ? rest : 0.0f);
    }
    return SC_OK;
}

/* ---- set-up ---- */

/* The defaults of --mix-prob and --mix-switch-prob (config.c, timm's). */
#define DEFAULT_PROB 1.0
#define DEFAULT_SWITCH_PROB 0.5

/* A probability that nothing reads is refused when it is not the default
 * (whether the user set it cannot tell: a resumed run's options all come
 * from its checkpoint's config.ini). */
static sc_status check_settings(const host_mix_settings *set)
{
    bool any = set->mixup_alpha > 0.0 || set->cutmix_alpha > 0.0;
    bool both = set->mixup_alpha > 0.0 && set->cutmix_alpha > 0.0;
    if (!any && set->prob != DEFAULT_PROB)
        return sc_error_set(SC_ERR_INVALID, "--mix-prob %g is read only with --mixup or "
                            "--cutmix", set->prob);
    if (!both && set->switch_prob != DEFAULT_SWITCH_PROB)
        return sc_error_set(SC_ERR_INVALID, "--mix-switch-prob %g picks between Mixup and "
                            "CutMix: it needs both --mixup and --cutmix", set->switch_prob);
    if (!(set->prob <= 1.0))
        return sc_error_set(SC_ERR_INVALID, "--mix-prob %g is outside [0, 1]", set->prob);
    if (!(set->switch_prob <= 1.0))
        return sc_error_set(SC_ERR_INVALID, "--mix-switch-prob %g is outside [0, 1]",
                            set->switch_prob);
    return SC_OK;
}

/* One f32 input (CutMix: [C, H, W]) and one integer class index. */
static sc_status check_spec(const sc_sample_spec *spec, bool cutmix)
{
    const sc_tensor_spec *x = &spec->inputs[0], *t = &spec->targets[0];
    char shape[96];
    if (spec->n_inputs != 1 || x->dtype != SC_F32)
        return sc_error_set(SC_ERR_INVALID, "--mixup/--cutmix mix one f32 input; the dataset "
                            "gives %d inputs, the first %s", spec->n_inputs,
                            spec->n_inputs ? sc_dtype_name(x->dtype) : "absent");
    if (cutmix && x->ndim != 3)
        return sc_error_set(SC_ERR_INVALID, "--cutmix cuts boxes from images [C, H, W]; the "
                            "dataset's input is %s",
                            sc_shape_str(x->ndim, x->shape, shape, sizeof shape));
    bool index = t->dtype == SC_I32 || t->dtype == SC_I64 || t->dtype == SC_U8;
    if (spec->n_targets != 1 || !index || t->ndim != 0)
        return sc_error_set(SC_ERR_INVALID, "--mixup/--cutmix mix class labels: they need one "
                            "integer class index [] as target; the dataset gives %d targets",
                            spec->n_targets);
    return SC_OK;
}

/* The model's first output for one sample must be logits [1, C]. */
static sc_status read_classes(const host_session *s, const sc_tensor *out, int64_t *classes)
{
    char shape[96];
    if (out->dtype != SC_F32 || out->ndim != 2 || out->shape[0] != 1 || out->shape[1] < 1)
        return sc_error_set(SC_ERR_INVALID, "--mixup/--cutmix need a classifier's logits "
                            "[N, C] as the first output; %s gives %s for one sample",
                            s->model.lib.path,
                            sc_shape_str(out->ndim, out->shape, shape, sizeof shape));
    *classes = out->shape[1];
    return SC_OK;
}

/* The number of classes: the width of the logits for one zero sample, in
 * eval mode without grad (nothing the run computes changes). */
static sc_status probe_classes(host_session *s, int64_t *classes)
{
    bool training = sc_ctx_training(s->ctx);
    bool grad = sc_ctx_set_grad_enabled(s->ctx, false);
    sc_ctx_set_training(s->ctx, false);
    const sc_tensor_spec *x = &s->spec.inputs[0];
    int64_t shape[SC_MAX_DIMS] = {1};
    memcpy(shape + 1, x->shape, (size_t)x->ndim * sizeof *shape);
    sc_tensor_list inputs = {.n = 1}, outputs;
    inputs.t[0] = sc_tensor_zeros(s->ctx, x->dtype, x->ndim + 1, shape);
    sc_status st = inputs.t[0] ? host_session_forward(s, &inputs, &outputs) : sc_error_code();
    if (st == SC_OK)
        st = read_classes(s, outputs.t[0], classes);
    sc_ctx_reset(s->ctx);
    sc_ctx_set_training(s->ctx, training);
    sc_ctx_set_grad_enabled(s->ctx, grad);
    return st;
}

static sc_status alloc_buffers(host_mix *m, int64_t batch_size, int64_t classes)
{
    int64_t shape[2] = {batch_size, classes};
    sc_device dev = sc_ctx_device(m->ctx);
    for (int k = 0; k < MIX_BUFFERS; k++) {
        m->soft[k] = m->gpu ? sc_tensor_alloc_pinned(SC_F32, 2, shape)
                            : sc_tensor_alloc(SC_F32, 2, shape);
        if (!m->soft[k] || (m->gpu && !(m->read[k] = sc_fence_new(dev))))
            return sc_error_wrap(sc_error_code(), "--mixup/--cutmix: the soft targets");
    }
    return SC_OK;
}

static sc_status mix_init(host_mix *m, const host_config *cfg, host_session *s)
{
    SC_TRY(check_spec(&s->spec, m->set.cutmix_alpha > 0.0));
    const sc_tensor_spec *x = &s->spec.inputs[0];
    if (x->ndim == 3) {
        m->height = x->shape[1];
        m->width = x->shape[2];
    }
    int64_t classes = 0;
    SC_TRY(probe_classes(s, &classes));
    return alloc_buffers(m, cfg->batch_size, classes);
}

sc_status host_mix_new(const host_config *cfg, host_session *s, int rank, host_mix **out)
{
    *out = NULL;
    host_mix_settings set = {cfg->mixup, cfg->cutmix, cfg->mix_prob, cfg->mix_switch_prob};
    SC_TRY(check_settings(&set));
    if (!(set.mixup_alpha > 0.0 || set.cutmix_alpha > 0.0))
        return SC_OK;
    host_mix *m = calloc(1, sizeof *m);
    if (!m)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the mixer");
    *m = (host_mix){.set = set, .seed = cfg->seed, .rank = rank, .ctx = s->ctx,
                  .gpu = sc_ctx_device(s->ctx).kind == SC_DEVICE_CUDA};
    sc_status st = mix_init(m, cfg, s);
    if (st != SC_OK) {
        host_mix_free(m);
        return st;
    }
    *out = m;
    return SC_OK;
}

void host_mix_free(host_mix *m)
{
    if (!m)
        return;
    for (int k = 0; k < MIX_BUFFERS; k++) {
        if (m->read[k]) /* an upload may still read the buffer */
            sc_fence_wait(m->read[k]);
        sc_fence_free(m->read[k]);
        sc_tensor_free(m->soft[k]);
    }
    free(m);
}

/* The next soft-target buffer, for n samples, free for writing: on a GPU
 * the step before this one has been queued, so its fence is set now, and
 * the buffer's last reader, MIX_BUFFERS steps back, is waited for. */
static sc_status next_buffer(host_mix *m, int64_t n, sc_tensor **soft)
{
    if (m->gpu && m->batches > 0)
        SC_TRY(sc_ctx_set_fence(m->ctx, m->read[m->turn]));
    m->turn = (m->turn + 1) % MIX_BUFFERS;
    if (m->gpu)
        SC_TRY(sc_fence_wait(m->read[m->turn]));
    m->batches++;
    *soft = m->soft[m->turn];
    (*soft)->shape[0] = n;
    (*soft)->numel = n * (*soft)->shape[1];
    return SC_OK;
}

sc_status host_mix_batch(host_mix *m, int epoch, const host_batch *b, host_batch *out)
{
    *out = *b;
    if (!m)
        return SC_OK;
    sc_rng rng;
    sc_rng_init(&rng, m->seed, sc_rng_mix(sc_rng_mix(MIX_STREAM, (uint64_t)epoch),
                                          sc_rng_mix((uint64_t)b->index, (uint64_t)m->rank)));
    host_mix_draw d = host_mix_draw_batch(&m->set, &rng, m->height, m->width);
    sc_tensor *soft;
    SC_TRY(next_buffer(m, b->size, &soft));
    SC_TRY(host_mix_targets(b->targets.t[0], b->samples, d.lam, soft));
    host_mix_inputs(b->inputs.t[0], &d);
    out->targets.t[0] = soft;
    return SC_OK;
}
