/* ema.c — the EMA of a parameter store's weights (scorch/ema.h): its flat
 * buffer, laid out as the store's, and the CPU loops of its passes. */
#include "scorch_host/ema.h"

#include <math.h>
#include <stdlib.h>

#include "cuda_api.h"
#include "device_impl.h"
#include "ema_impl.h"

/* Below this many elements a range is one thread's: waking the OpenMP
 * team costs more than the loop. */
enum { EMA_PARALLEL_MIN = 32768 };

struct sc_ema {
    sc_params *params;
    float *buffer;          /* [numel], on the parameters' device; buffers' slots unused */
    sc_tensor *views;       /* [count]: parameter i's EMA (numel 0 for a buffer) */
    sc_ema_range *ranges; /* the parameters' maximal runs */
    int n_ranges;
};

static bool is_param(const sc_tensor *t) { return !(t->flags & SC_TENSOR_BUFFER); }

/* Adjacent parameters are contiguous in the flat buffers: each maximal
 * run of them (between buffers) is one range. */
static int param_ranges(const sc_params *ps, sc_ema_range *ranges)
{
    int count = sc_params_count(ps), n = 0;
    for (int i = 0; i < count;) {
        if (!is_param(sc_params_at(ps, i))) {
            i++;
            continue;
        }
        ranges[n] = (sc_ema_range){sc_params_offset(ps, i), 0};
        for (; i < count && is_param(sc_params_at(ps, i)); i++)
            ranges[n].numel += sc_params_at(ps, i)->numel;
        n++;
    }
    return n;
}

static void make_views(sc_ema *ema)
{
    sc_device dev = sc_params_device(ema->params);
    for (int i = 0; i < sc_params_count(ema->params); i++) {
        const sc_tensor *p = sc_params_at(ema->params, i);
        sc_tensor *v = &ema->views[i];
        sc_tensor_init(v, SC_F32, p->ndim, p->shape);
        v->data = ema->buffer + sc_params_offset(ema->params, i);
        v->device = dev;
        v->name = p->name;
    }
}

sc_ema *sc_ema_new(sc_params *params)
{
    sc_ema *ema = calloc(1, sizeof *ema);
    int count = sc_params_count(params);
    int64_t numel = sc_params_numel(params);
    sc_device dev = sc_params_device(params);
    if (ema) {
        ema->params = params;
        ema->views = calloc((size_t)count + 1, sizeof *ema->views);
        ema->ranges = malloc(((size_t)count + 1) * sizeof *ema->ranges);
        ema->buffer = sc_device_alloc(dev, (size_t)(numel ? numel : 1) * sizeof(float));
    }
    if (!ema || !ema->views || !ema->ranges || !ema->buffer) {
        sc_error_set(SC_ERR_NOMEM, "out of memory for the EMA of %lld weights",
                     (long long)numel);
        sc_ema_free(ema);
        return NULL;
    }
    ema->n_ranges = param_ranges(params, ema->ranges);
    make_views(ema);
    /* Zeroed first: a lerp of weight 1 copies p exactly only from a finite e. */
    size_t bytes = (size_t)(numel ? numel : 1) * sizeof(float);
    if (sc_device_zero(dev, ema->buffer, bytes) != SC_OK || sc_ema_update(ema, 0.0) != SC_OK) {
        sc_ema_free(ema);
        return NULL;
    }
    return ema;
}

void sc_ema_free(sc_ema *ema)
{
    if (!ema)
        return;
    if (ema->buffer) {
        int64_t numel = sc_params_numel(ema->params);
        sc_device_free(sc_params_device(ema->params), ema->buffer,
                       (size_t)(numel ? numel : 1) * sizeof(float));
    }
    free(ema->views);
    free(ema->ranges);
    free(ema);
}

double sc_ema_decay_at(double decay, bool warmup, int64_t step)
{
    int64_t since = step - 1; /* timm: max(0, step - update_after_step - 1) */
    if (since <= 0)
        return 0.0;
    if (!warmup)
        return decay;
    double ramp = 1.0 - pow(1.0 + (double)since, -2.0 / 3.0);
    return ramp < decay ? (ramp > 0.0 ? ramp : 0.0) : decay;
}

/* e, p: [n]; e = lerp(e, p, w) */
static void lerp_loop(float *restrict e, const float *restrict p, int64_t n, float w)
{
#pragma omp parallel for simd schedule(static) if (n >= EMA_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++)
        e[i] = sc_ema_lerp(e[i], p[i], w);
}

/* e, p: [n]; exchanged */
static void swap_loop(float *restrict e, float *restrict p, int64_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= EMA_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        float t = e[i];
        e[i] = p[i];
        p[i] = t;
    }
}

static void cpu_pass(const sc_ema_pass *u)
{
    for (int r = 0; r < u->n_ranges; r++) {
        int64_t off = u->ranges[r].offset, n = u->ranges[r].numel;
        if (u->op == SC_EMA_LERP)
            lerp_loop(u->ema + off, u->values + off, n, u->weight);
        else
            swap_loop(u->ema + off, u->values + off, n);
    }
}

static sc_status run_pass(sc_ema *ema, sc_ema_op op, float weight)
{
    sc_ema_pass u = {
        .op = op,
        .ema = ema->buffer,
        .values = sc_params_values(ema->params),
        .ranges = ema->ranges,
        .n_ranges = ema->n_ranges,
        .weight = weight,
    };
    sc_device dev = sc_params_device(ema->params);
    if (dev.kind == SC_DEVICE_CUDA)
        return sc_cuda_ema_pass(dev.index, &u);
    cpu_pass(&u);
    return SC_OK;
}

sc_status sc_ema_update(sc_ema *ema, double decay)
{
    if (!(decay >= 0.0 && decay <= 1.0))
        return sc_error_set(SC_ERR_INVALID, "EMA update: decay %g must lie in [0, 1]", decay);
    /* 1 - decay in double, rounded once, as PyTorch passes its Python float */
    return run_pass(ema, SC_EMA_LERP, (float)(1.0 - decay));
}

sc_status sc_ema_swap(sc_ema *ema) { return run_pass(ema, SC_EMA_SWAP, 0.0f); }

sc_tensor *sc_ema_at(sc_ema *ema, int i)
{
    if (i < 0 || i >= sc_params_count(ema->params) || !is_param(sc_params_at(ema->params, i)))
        return NULL;
    return &ema->views[i];
}
