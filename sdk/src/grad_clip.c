/* grad_clip.c — gradient clipping over a store's trainable gradients, as
 * torch.nn.utils.clip_grad_norm_ and clip_grad_value_ (scorch/optim.h).
 *
 * Both work on the span of the flat gradient buffer from the first
 * trainable parameter to the end of the last, in one pass (one launch on
 * a GPU): the frozen parameters' gradients inside it are zeros (zeroed
 * with the rest, never written by backward), which add nothing to the norm
 * and stay zeros when scaled or clamped. sc_optim_guard relies on the same.
 *
 * The norm is a sum of squares in double, in a fixed order whatever the
 * thread count (chunks of CLIP_CHUNK summed each on its own, then the
 * chunks in order; on a GPU a fixed grid, then its blocks in order): every
 * data-parallel rank, holding the same averaged gradients, gets the same
 * norm bit for bit, and a run gives the same result on every resume. */
#include "scorch_host/optim.h"

#include <math.h>
#include <stdlib.h>

#include "cuda_api.h"
#include "device_impl.h"

/* Elements per chunk of the CPU's sum; the GPU's partial sums. */
enum { CLIP_CHUNK = 1 << 16 };

struct sc_grad_clip {
    sc_params *params;
    sc_tensor norm;   /* one f32 on the parameters' device: the norm before the last clip */
    float *norm_data; /* its storage */
    float *coef;      /* GPU: the scale factor, beside the norm */
    double *partials; /* CPU: one sum per chunk; GPU: SC_CUDA_CLIP_BLOCKS, on the device */
    size_t partials_bytes;
};

/* The span of the flat buffers from the first trainable parameter to the
 * end of the last, in floats; numel 0 when nothing trains. */
static void trainable_span(const sc_params *ps, int64_t *offset, int64_t *numel)
{
    int first = -1, last = -1;
    for (int i = 0; i < sc_params_count(ps); i++)
        if (sc_params_at(ps, i)->flags & SC_TENSOR_REQUIRES_GRAD) {
            first = first < 0 ? i : first;
            last = i;
        }
    *offset = first < 0 ? 0 : sc_params_offset(ps, first);
    *numel = first < 0 ? 0
                       : sc_params_offset(ps, last) + sc_params_at(ps, last)->numel - *offset;
}

static bool on_gpu(const sc_grad_clip *c) { return c->norm.device.kind == SC_DEVICE_CUDA; }

sc_grad_clip *sc_grad_clip_new(sc_params *params)
{
    sc_grad_clip *c = calloc(1, sizeof *c);
    if (!c) {
        sc_error_set(SC_ERR_NOMEM, "out of memory for gradient clipping");
        return NULL;
    }
    c->params = params;
    sc_device dev = sc_params_device(params);
    bool gpu = dev.kind == SC_DEVICE_CUDA;
    int64_t chunks = sc_params_numel(params) / CLIP_CHUNK + 1;
    c->partials_bytes = (size_t)(gpu ? SC_CUDA_CLIP_BLOCKS : chunks) * sizeof(double);
    c->norm_data = sc_device_alloc(dev, 2 * sizeof(float)); /* the norm, then coef */
    c->partials = gpu ? sc_device_alloc(dev, c->partials_bytes) : malloc(c->partials_bytes);
    if (!c->norm_data || !c->partials ||
        sc_device_zero(dev, c->norm_data, 2 * sizeof(float)) != SC_OK) {
        sc_error_wrap(SC_ERR_NOMEM, "gradient clipping: %zu bytes of scratch",
                      c->partials_bytes);
        sc_grad_clip_free(c);
        return NULL;
    }
    c->coef = c->norm_data + 1;
    sc_tensor_init(&c->norm, SC_F32, 0, NULL);
    c->norm.data = c->norm_data;
    c->norm.device = dev;
    c->norm.name = "grad_norm";
    return c;
}

void sc_grad_clip_free(sc_grad_clip *c)
{
    if (!c)
        return;
    sc_device dev = sc_params_device(c->params);
    sc_device_free(dev, c->norm_data, 2 * sizeof(float));
    if (dev.kind == SC_DEVICE_CUDA)
        sc_device_free(dev, c->partials, c->partials_bytes);
    else
        free(c->partials);
    free(c);
}

/* g: [n]; the L2 norm, summed in double chunk by chunk, then over the
 * chunks in order. */
static float cpu_norm(const float *g, int64_t n, double *chunk_sums)
{
    int64_t chunks = (n + CLIP_CHUNK - 1) / CLIP_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t k = 0; k < chunks; k++) {
        int64_t end = (k + 1) * CLIP_CHUNK < n ? (k + 1) * CLIP_CHUNK : n;
        double s = 0;
        for (int64_t i = k * CLIP_CHUNK; i < end; i++)
            s += (double)g[i] * (double)g[i];
        chunk_sums[k] = s;
    }
    double total = 0;
    for (int64_t k = 0; k < chunks; k++)
        total += chunk_sums[k];
    return (float)sqrt(total);
}

/* g: [n]; g *= coef, skipped when coef is 1 (which changes nothing). */
static void cpu_scale(float *g, int64_t n, float coef)
{
    if (coef == 1.0f)
        return;
#pragma omp parallel for simd schedule(static) if (n >= CLIP_CHUNK)
    for (int64_t i = 0; i < n; i++)
        g[i] *= coef;
}

/* g: [n]; each clamped to [-v, v]; a NaN stays NaN, as with torch.clamp. */
static void cpu_clamp(float *g, int64_t n, float v)
{
#pragma omp parallel for simd schedule(static) if (n >= CLIP_CHUNK)
    for (int64_t i = 0; i < n; i++)
        g[i] = g[i] < -v ? -v : g[i] > v ? v : g[i];
}

static float clip_coef(double max_norm, float norm)
{
    /* As PyTorch in float32 (clip.cu's clip_coef is the same): max_norm / (norm + 1e-6) is
     * (norm + 1e-6).reciprocal() * max_norm, then clamped to 1. */
    float coef = (1.0f / (norm + 1e-6f)) * (float)max_norm;
    return coef > 1.0f ? 1.0f : coef; /* NaN stays NaN: the gradients become NaN too */
}

/* The norm into c->norm and, when scale, the gradients scaled to at most
 * max_norm. */
static sc_status norm_and_scale(sc_grad_clip *c, double max_norm, bool scale)
{
    int64_t off, n;
    trainable_span(c->params, &off, &n);
    float *g = sc_params_grads(c->params) + off;
    if (on_gpu(c))
        return sc_cuda_grad_clip_norm(c->norm.device.index, g, n, max_norm, scale,
                                      c->partials, c->norm_data, c->coef);
    float norm = cpu_norm(g, n, c->partials);
    *c->norm_data = norm;
    if (scale)
        cpu_scale(g, n, clip_coef(max_norm, norm));
    return SC_OK;
}

sc_status sc_grad_clip_norm(sc_grad_clip *c, double max_norm)
{
    if (!(max_norm > 0) || isinf(max_norm))
        return sc_error_set(SC_ERR_INVALID, "clip_grad_norm: max norm %g must be finite and > 0",
                            max_norm);
    return norm_and_scale(c, max_norm, true);
}

sc_status sc_grad_clip_value(sc_grad_clip *c, double value)
{
    if (!(value > 0) || isinf(value))
        return sc_error_set(SC_ERR_INVALID, "clip_grad_value: value %g must be finite and > 0",
                            value);
    SC_TRY(norm_and_scale(c, 0, false));
    int64_t off, n;
    trainable_span(c->params, &off, &n);
    float *g = sc_params_grads(c->params) + off;
    if (on_gpu(c))
        return sc_cuda_grad_clamp(c->norm.device.index, g, n, (float)value);
    cpu_clamp(g, n, (float)value);
    return SC_OK;
}

const sc_tensor *sc_grad_clip_last_norm(const sc_grad_clip *c) { return &c->norm; }
