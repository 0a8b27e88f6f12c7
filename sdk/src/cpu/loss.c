/* CPU kernels for softmax, log_softmax, cross-entropy, mse, sum and mean.
 * Row-wise ops run their rows in parallel; reductions to a scalar add
 * fixed chunks in a fixed order, so results do not depend on the thread
 * count. */
#include <math.h>

#include "cpu.h"

enum { CHUNK = 8192, MAX_CHUNKS = 64 };

/* ---------------------------------------------------------------------
 * Rows: x [R, C] with C the last dimension. */

typedef struct row_exp_sum {
    float max;
    float sum; /* of exp(x - max) */
} row_exp_sum;

/* e [C] = exp(x - max x); the max keeps every exponent <= 0. */
static row_exp_sum row_exp(const float *restrict x, float *restrict e, int64_t c)
{
    row_exp_sum r = {x[0], 0.0f};
    for (int64_t j = 1; j < c; j++)
        r.max = x[j] > r.max ? x[j] : r.max;
    for (int64_t j = 0; j < c; j++) {
        e[j] = expf(x[j] - r.max);
        r.sum += e[j];
    }
    return r;
}

static int64_t last_dim(const sc_tensor *t) { return t->shape[t->ndim - 1]; }

static int64_t row_count(const sc_tensor *t)
{
    int64_t c = last_dim(t);
    return c > 0 ? t->numel / c : 0;
}

/* y [R, C] = exp(x) / sum_C exp(x) */
static sc_status softmax_forward(sc_node *node)
{
    const float *x = sc_tensor_f32(node->in[0]);
    float *y = sc_tensor_f32(node->out);
    int64_t rows = row_count(node->out), c = last_dim(node->out);
#pragma omp parallel for schedule(static) if (rows * c > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        float *yi = y + i * c;
        float inv = 1.0f / row_exp(x + i * c, yi, c).sum;
        for (int64_t j = 0; j < c; j++)
            yi[j] *= inv;
    }
    return SC_OK;
}

/* gx = y (g - sum_C g y) */
static sc_status softmax_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    const float *y = sc_tensor_f32(node->out), *g = sc_tensor_f32(gy);
    float *gx = sc_tensor_f32(gin[0]);
    int64_t rows = row_count(gy), c = last_dim(gy);
#pragma omp parallel for schedule(static) if (rows * c > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const float *yi = y + i * c, *gi = g + i * c;
        float dot = 0.0f;
        for (int64_t j = 0; j < c; j++)
            dot += gi[j] * yi[j];
        for (int64_t j = 0; j < c; j++)
            gx[i * c + j] += yi[j] * (gi[j] - dot);
    }
    return SC_OK;
}

/* y [R, C] = (x - max) - log sum_C exp(x - max) */
static sc_status log_softmax_forward(sc_node *node)
{
    const float *x = sc_tensor_f32(node->in[0]);
    float *y = sc_tensor_f32(node->out);
    int64_t rows = row_count(node->out), c = last_dim(node->out);
#pragma omp parallel for schedule(static) if (rows * c > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const float *xi = x + i * c;
        float *yi = y + i * c;
        row_exp_sum r = row_exp(xi, yi, c); /* yi as scratch */
        float log_sum = logf(r.sum);
        for (int64_t j = 0; j < c; j++) /* (x - max) first: exact for large x */
            yi[j] = (xi[j] - r.max) - log_sum;
    }
    return SC_OK;
}

/* gx = g - exp(y) sum_C g */
static sc_status log_softmax_backward(sc_node *node, const sc_tensor *gy,
                                      sc_tensor *const *gin)
{
    const float *y = sc_tensor_f32(node->out), *g = sc_tensor_f32(gy);
    float *gx = sc_tensor_f32(gin[0]);
    int64_t rows = row_count(gy), c = last_dim(gy);
#pragma omp parallel for schedule(static) if (rows * c > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const float *yi = y + i * c, *gi = g + i * c;
        float gsum = 0.0f;
        for (int64_t j = 0; j < c; j++)
            gsum += gi[j];
        for (int64_t j = 0; j < c; j++)
            gx[i * c + j] += gi[j] - expf(yi[j]) * gsum;
    }
    return SC_OK;
}

/* ---------------------------------------------------------------------
 * Cross-entropy of logits z [N, C] with label smoothing s against
 *  - class indices t [N]: the target distribution is
 *    q = (1 - s) onehot(t) + s / C, and
 *    loss_n = sum_c q_c (lse_n - z_nc) = lse_n - (1 - s) z_nt - s/C sum_c z_nc;
 *    gz = g / N (p - q);
 *  - class probabilities r [N, C] (soft targets): q = (1 - s) r + s / C and
 *    loss_n = sum_c q_c (lse_n - z_nc), whatever the rows sum to (as
 *    PyTorch); gz = g / N (p sum_c q_c - q), gr = g / N (1 - s) (lse - z).
 * Forward saves the probabilities p [N, C] for backward, and for soft
 * targets lse [N] and sum_c q_c [N]. */

static sc_status check_targets(const sc_tensor *t, int64_t c)
{
    for (int64_t i = 0; i < t->numel; i++) {
        int64_t k = sc_tensor_get_int(t, i);
        if (k < 0 || k >= c)
            return sc_error_set(SC_ERR_INVALID, "cross_entropy: target %lld of sample %lld "
                                "is outside 0..%lld (%lld classes)", (long long)k,
                                (long long)i, (long long)c - 1, (long long)c);
    }
    return SC_OK;
}

/* p [C] = softmax of z [C]; returns log sum exp z, in double. */
static double row_softmax(const float *restrict z, float *restrict p, int64_t c)
{
    row_exp_sum r = row_exp(z, p, c);
    float inv = 1.0f / r.sum;
    for (int64_t j = 0; j < c; j++)
        p[j] *= inv;
    return (double)r.max + log((double)r.sum);
}

/* Element j of a soft target row r with smoothing s over c classes: in
 * f32, as PyTorch's r * (1 - s) + s / C. */
static inline float smoothed(const float *r, int64_t j, float s, int64_t c)
{
    return r[j] * (1.0f - s) + s / (float)c;
}

/* node's output [] = mean of row_loss [n] (N = 0: NaN) */
static void set_mean_loss(sc_node *node, const double *row_loss, int64_t n)
{
    double total = 0.0;
    for (int64_t i = 0; i < n; i++)
        total += row_loss[i];
    sc_tensor_f32(node->out)[0] = (float)(total / (double)n);
}

/* row_loss [n] against class indices */
static void index_row_losses(sc_node *node, const float *z, float *p, double *row_loss)
{
    const sc_tensor *t = node->in[1];
    int64_t n = node->in[0]->shape[0], c = node->in[0]->shape[1];
    float s = node->params.cross_entropy.label_smoothing;
#pragma omp parallel for schedule(static) if (n * c > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float *zi = z + i * c;
        double lse = row_softmax(zi, p + i * c, c);
        float zsum = 0.0f;
        for (int64_t j = 0; j < c; j++)
            zsum += zi[j];
        row_loss[i] = lse - (1.0 - s) * zi[sc_tensor_get_int(t, i)] - (double)s / c * zsum;
    }
}

/* row_loss [n] against soft targets; saves lse [n] and sum_c q_c [n] */
static sc_status soft_row_losses(sc_node *node, const float *z, float *p, double *row_loss)
{
    int64_t n = node->in[0]->shape[0], c = node->in[0]->shape[1];
    float s = node->params.cross_entropy.label_smoothing;
    sc_tensor *lse_t = sc_tensor_new(node->ctx, SC_F32, 1, &n);
    sc_tensor *qsum_t = sc_tensor_new(node->ctx, SC_F32, 1, &n);
    if (!lse_t || !qsum_t)
        return SC_ERR_NOMEM;
    node->saved[1] = lse_t;
    node->saved[2] = qsum_t;
    const float *r = sc_tensor_f32(node->in[1]);
    float *lse_out = sc_tensor_f32(lse_t), *qsum = sc_tensor_f32(qsum_t);
#pragma omp parallel for schedule(static) if (n * c > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float *zi = z + i * c, *ri = r + i * c;
        double lse = row_softmax(zi, p + i * c, c), loss = 0.0;
        float qs = 0.0f;
        for (int64_t j = 0; j < c; j++) {
            float q = smoothed(ri, j, s, c);
            loss += q * (lse - zi[j]);
            qs += q;
        }
        row_loss[i] = loss;
        lse_out[i] = (float)lse;
        qsum[i] = qs;
    }
    return SC_OK;
}

static sc_status cross_entropy_forward(sc_node *node)
{
    const sc_tensor *zt = node->in[0], *t = node->in[1];
    int64_t n = zt->shape[0], c = zt->shape[1];
    bool soft = t->dtype == SC_F32;
    if (!soft)
        SC_TRY(check_targets(t, c));
    sc_tensor *pt = sc_tensor_new(node->ctx, SC_F32, 2, zt->shape);
    double *row_loss = sc_ctx_alloc(node->ctx, (size_t)n * sizeof *row_loss);
    if (!pt || !row_loss)
        return SC_ERR_NOMEM;
    node->saved[0] = pt;
    const float *z = sc_tensor_f32(zt);
    if (soft)
        SC_TRY(soft_row_losses(node, z, sc_tensor_f32(pt), row_loss));
    else
        index_row_losses(node, z, sc_tensor_f32(pt), row_loss);
    set_mean_loss(node, row_loss, n);
    return SC_OK;
}

/* gz += k (p - q) against class indices */
static void index_backward(const sc_node *node, float k, float *gz)
{
    const sc_tensor *t = node->in[1];
    const float *p = sc_tensor_f32(node->saved[0]);
    int64_t n = node->in[0]->shape[0], c = node->in[0]->shape[1];
    float s = node->params.cross_entropy.label_smoothing, off = s / (float)c;
#pragma omp parallel for schedule(static) if (n * c > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float *pi = p + i * c;
        float *gi = gz + i * c;
        for (int64_t j = 0; j < c; j++)
            gi[j] += k * (pi[j] - off);
        gi[sc_tensor_get_int(t, i)] -= k * (1.0f - s);
    }
}

/* gz += k (p sum_c q - q) and gr += k (1 - s) (lse - z), either NULL */
static void soft_backward(const sc_node *node, float k, float *gz, float *gr)
{
    const float *p = sc_tensor_f32(node->saved[0]), *lse = sc_tensor_f32(node->saved[1]);
    const float *qsum = sc_tensor_f32(node->saved[2]);
    const float *z = sc_tensor_f32(node->in[0]), *r = sc_tensor_f32(node->in[1]);
    int64_t n = node->in[0]->shape[0], c = node->in[0]->shape[1];
    float s = node->params.cross_entropy.label_smoothing;
#pragma omp parallel for schedule(static) if (n * c > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = i * c; j < (i + 1) * c; j++) {
            if (gz)
                gz[j] += k * (p[j] * qsum[i] - smoothed(r, j, s, c));
            if (gr)
                gr[j] += k * (1.0f - s) * (lse[i] - z[j]);
        }
    }
}

static sc_status cross_entropy_backward(sc_node *node, const sc_tensor *gl,
                                        sc_tensor *const *gin)
{
    float k = sc_tensor_f32(gl)[0] / (float)node->in[0]->shape[0];
    float *gz = gin[0] ? sc_tensor_f32(gin[0]) : NULL;
    if (node->in[1]->dtype == SC_F32)
        soft_backward(node, k, gz, gin[1] ? sc_tensor_f32(gin[1]) : NULL);
    else if (gz)
        index_backward(node, k, gz);
    return SC_OK;
}

/* ---------------------------------------------------------------------
 * Reductions to a scalar. */

/* The sum over [lo, hi) of x, or of (x - t)^2 when t is given. Eight
 * double lanes keep the loop vectorisable, accurate and in a fixed order. */
ALWAYS_INLINE double lane_sum(const float *x, const float *t, int64_t lo, int64_t hi)
{
    double lane[8] = {0};
    int64_t i = lo;
    for (; i + 8 <= hi; i += 8)
        for (int l = 0; l < 8; l++) {
            double d = t ? (double)x[i + l] - t[i + l] : x[i + l];
            lane[l] += t ? d * d : d;
        }
    double sum = 0.0;
    for (; i < hi; i++) {
        double d = t ? (double)x[i] - t[i] : x[i];
        sum += t ? d * d : d;
    }
    for (int l = 0; l < 8; l++)
        sum += lane[l];
    return sum;
}

/* sum_[0, n) of x (t NULL) or of (x - t)^2, over at most MAX_CHUNKS
 * chunks computed in parallel and added in order. */
static double reduce_sum(const float *x, const float *t, int64_t n)
{
    int64_t chunk = (n + MAX_CHUNKS - 1) / MAX_CHUNKS;
    chunk = chunk > CHUNK ? chunk : CHUNK;
    int64_t chunks = (n + chunk - 1) / chunk;
    double part[MAX_CHUNKS];
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t k = 0; k < chunks; k++) {
        int64_t lo = k * chunk, hi = lo + chunk < n ? lo + chunk : n;
        /* two inlined copies: the plain sum has no t branches */
        part[k] = t ? lane_sum(x, t, lo, hi) : lane_sum(x, NULL, lo, hi);
    }
    double sum = 0.0;
    for (int64_t k = 0; k < chunks; k++)
        sum += part[k];
    return sum;
}

/* gx [n] += k */
static void add_scalar(float *gx, float k, int64_t n)
{
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        gx[i] += k;
}

/* loss = mean (pred - target)^2 */
static sc_status mse_forward(sc_node *node)
{
    const sc_tensor *p = node->in[0];
    double sse = reduce_sum(sc_tensor_f32(p), sc_tensor_f32(node->in[1]), p->numel);
    sc_tensor_f32(node->out)[0] = (float)(sse / (double)p->numel);
    return SC_OK;
}

/* gpred += 2 g / n (pred - target);  gtarget -= the same */
static sc_status mse_backward(sc_node *node, const sc_tensor *gl, sc_tensor *const *gin)
{
    const float *p = sc_tensor_f32(node->in[0]), *t = sc_tensor_f32(node->in[1]);
    int64_t n = node->in[0]->numel;
    float k = 2.0f * sc_tensor_f32(gl)[0] / (float)n;
    float *gp = gin[0] ? sc_tensor_f32(gin[0]) : NULL;
    float *gt = gin[1] ? sc_tensor_f32(gin[1]) : NULL;
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float d = k * (p[i] - t[i]);
        if (gp)
            gp[i] += d;
        if (gt)
            gt[i] -= d;
    }
    return SC_OK;
}

static sc_status sum_forward(sc_node *node)
{
    const sc_tensor *x = node->in[0];
    sc_tensor_f32(node->out)[0] = (float)reduce_sum(sc_tensor_f32(x), NULL, x->numel);
    return SC_OK;
}

static sc_status sum_backward(sc_node *node, const sc_tensor *gl, sc_tensor *const *gin)
{
    add_scalar(sc_tensor_f32(gin[0]), sc_tensor_f32(gl)[0], gin[0]->numel);
    return SC_OK;
}

static sc_status mean_forward(sc_node *node)
{
    const sc_tensor *x = node->in[0];
    double sum = reduce_sum(sc_tensor_f32(x), NULL, x->numel);
    sc_tensor_f32(node->out)[0] = (float)(sum / (double)x->numel); /* empty: NaN */
    return SC_OK;
}

static sc_status mean_backward(sc_node *node, const sc_tensor *gl, sc_tensor *const *gin)
{
    int64_t n = gin[0]->numel;
    add_scalar(sc_tensor_f32(gin[0]), sc_tensor_f32(gl)[0] / (float)n, n);
    return SC_OK;
}

const sc_kernel sc_cpu_kernel_softmax = {.forward = softmax_forward, .backward = softmax_backward};
const sc_kernel sc_cpu_kernel_log_softmax = {.forward = log_softmax_forward,
                                             .backward = log_softmax_backward};
const sc_kernel sc_cpu_kernel_cross_entropy = {.forward = cross_entropy_forward,
                                               .backward = cross_entropy_backward};
const sc_kernel sc_cpu_kernel_mse = {.forward = mse_forward, .backward = mse_backward};
const sc_kernel sc_cpu_kernel_sum = {.forward = sum_forward, .backward = sum_backward};
const sc_kernel sc_cpu_kernel_mean = {.forward = mean_forward, .backward = mean_backward};
