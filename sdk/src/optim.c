#include "scorch_host/optim.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cuda_api.h"
#include "device_impl.h"
#include "optim_impl.h"

/* Below this many elements a range is updated by one thread: waking the
 * OpenMP team costs more than the loop. */
enum { OPTIM_PARALLEL_MIN = 32768, OPTIM_STATE_MAX = 3 };

/* One parameter's options (sc_optim_set_param). */
typedef struct param_options {
    double lr_scale, weight_decay;
} param_options;

struct sc_optim {
    sc_optim_config config;
    sc_params *params;
    int64_t steps;
    bool stepped;                    /* options are refused from the first step on */
    int nstate;
    sc_tensor state[OPTIM_STATE_MAX]; /* 1-D [numel] views of buffers below */
    float *buffers[OPTIM_STATE_MAX]; /* on the parameters' device */
    param_options *options;          /* one per parameter of the store */
    sc_optim_range *ranges;          /* scratch: one per parameter at most */
    float *partials;                 /* LAMB on a GPU: sc_optim_update.partials */
    int32_t *nonfinite;              /* the guard's flag, on a GPU only */
    sc_tensor guard_flag;            /* a view of it */
};

sc_optim_config sc_optim_defaults(sc_optim_kind kind)
{
    sc_optim_config c = {
        .kind = kind,
        .momentum = 0.0,
        .nesterov = false,
        .weight_decay = 0.0,
        .beta1 = 0.9,
        .beta2 = 0.999,
        .eps = 1e-8,
        .alpha = 0.99,
        .centered = false,
    };
    if (kind == SC_OPTIM_ADAMW || kind == SC_OPTIM_LAMB)
        c.weight_decay = 0.01;
    if (kind == SC_OPTIM_LAMB)
        c.eps = 1e-6;
    if (kind == SC_OPTIM_LION)
        c.beta2 = 0.99;
    return c;
}

static const char *const kind_names[] = {
    [SC_OPTIM_SGD] = "sgd",         [SC_OPTIM_ADAM] = "adam", [SC_OPTIM_ADAMW] = "adamw",
    [SC_OPTIM_RMSPROP] = "rmsprop", [SC_OPTIM_LAMB] = "lamb", [SC_OPTIM_LION] = "lion",
};
enum { KIND_COUNT = sizeof kind_names / sizeof *kind_names };

sc_status sc_optim_kind_parse(const char *name, sc_optim_kind *out)
{
    for (size_t k = 0; k < KIND_COUNT; k++) {
        if (strcmp(name, kind_names[k]) == 0) {
            *out = (sc_optim_kind)k;
            return SC_OK;
        }
    }
    return sc_error_set(SC_ERR_INVALID,
                        "unknown optimizer '%s' (known: sgd, adam, adamw, rmsprop, lamb, lion)",
                        name);
}

const char *sc_optim_kind_name(sc_optim_kind kind)
{
    if ((size_t)kind >= KIND_COUNT)
        return "?";
    return kind_names[kind];
}

/* `!(x >= lo)` rather than `x < lo` so that NaN is refused too. */
static bool finite_nonneg(double x) { return x >= 0.0 && !isinf(x); }

/* The options SGD and RMSprop read. */
static sc_status check_momentum(const sc_optim_config *c, const char *name)
{
    if (!finite_nonneg(c->momentum))
        return sc_error_set(SC_ERR_INVALID, "%s: momentum %g must be finite and >= 0", name,
                            c->momentum);
    if (c->kind == SC_OPTIM_SGD && c->nesterov && c->momentum == 0.0)
        return sc_error_set(SC_ERR_INVALID, "sgd: nesterov needs momentum > 0");
    if (c->kind == SC_OPTIM_RMSPROP && !(c->alpha >= 0.0 && c->alpha < 1.0))
        return sc_error_set(SC_ERR_INVALID, "rmsprop: alpha %g must lie in [0, 1)", c->alpha);
    return SC_OK;
}

static sc_status check_config(const sc_optim_config *c)
{
    if ((size_t)c->kind >= KIND_COUNT)
        return sc_error_set(SC_ERR_INVALID, "optimizer: unknown kind %d", (int)c->kind);
    const char *name = kind_names[c->kind];
    if (!finite_nonneg(c->weight_decay))
        return sc_error_set(SC_ERR_INVALID, "%s: weight decay %g must be finite and >= 0",
                            name, c->weight_decay);
    if (c->kind == SC_OPTIM_SGD)
        return check_momentum(c, name);
    if (c->kind == SC_OPTIM_RMSPROP && check_momentum(c, name) != SC_OK)
        return sc_error_code();
    if (c->kind != SC_OPTIM_RMSPROP &&
        (!(c->beta1 >= 0.0 && c->beta1 < 1.0) || !(c->beta2 >= 0.0 && c->beta2 < 1.0)))
        return sc_error_set(SC_ERR_INVALID, "%s: betas (%g, %g) must lie in [0, 1)", name,
                            c->beta1, c->beta2);
    if (c->kind != SC_OPTIM_LION && (!(c->eps > 0.0) || isinf(c->eps)))
        return sc_error_set(SC_ERR_INVALID, "%s: eps %g must be finite and > 0", name, c->eps);
    return SC_OK;
}

/* The state buffers a kind keeps, in checkpoint order: SGD a momentum
 * buffer only when it has momentum; Adam, AdamW and LAMB both moments;
 * RMSprop the squared average, then the momentum buffer and the gradient
 * average when asked for; Lion its one moving average. */
static int state_names(const sc_optim_config *c, const char *names[OPTIM_STATE_MAX])
{
    int n = 0;
    switch (c->kind) {
    case SC_OPTIM_SGD:
        names[0] = "momentum";
        return c->momentum != 0.0;
    case SC_OPTIM_RMSPROP:
        names[n++] = "square_avg";
        if (c->momentum > 0.0)
            names[n++] = "momentum";
        if (c->centered)
            names[n++] = "grad_avg";
        return n;
    case SC_OPTIM_LION:
        names[0] = "exp_avg";
        return 1;
    case SC_OPTIM_ADAM:
    case SC_OPTIM_ADAMW:
    case SC_OPTIM_LAMB:
        break;
    }
    names[0] = "exp_avg";
    names[1] = "exp_avg_sq";
    return 2;
}

/* The guard's flag on a GPU, zeroed. */
static sc_status guard_init(sc_optim *opt, sc_device dev)
{
    if (dev.kind != SC_DEVICE_CUDA)
        return SC_OK;
    opt->nonfinite = sc_device_alloc(dev, sizeof *opt->nonfinite);
    if (!opt->nonfinite || sc_device_zero(dev, opt->nonfinite, sizeof *opt->nonfinite) != SC_OK)
        return sc_error_wrap(sc_error_code(), "%s: the non-finite step guard",
                             sc_optim_kind_name(opt->config.kind));
    sc_tensor_init(&opt->guard_flag, SC_I32, 0, NULL);
    opt->guard_flag.data = opt->nonfinite;
    opt->guard_flag.device = dev;
    opt->guard_flag.name = "nonfinite";
    return SC_OK;
}

/* The state buffers, zeroed: zeroed state is PyTorch's first step exactly
 * (momentum * 0 + g = g). */
static sc_status state_init(sc_optim *opt, sc_device dev)
{
    const char *names[OPTIM_STATE_MAX];
    opt->nstate = state_names(&opt->config, names);
    int64_t numel = sc_params_numel(opt->params);
    size_t bytes = (size_t)numel * sizeof(float);
    for (int i = 0; i < opt->nstate; i++) {
        opt->buffers[i] = sc_device_alloc(dev, bytes);
        if (!opt->buffers[i] || sc_device_zero(dev, opt->buffers[i], bytes) != SC_OK)
            return sc_error_wrap(SC_ERR_NOMEM, "%s: %lld floats of '%s'",
                                 sc_optim_kind_name(opt->config.kind), (long long)numel,
                                 names[i]);
        sc_tensor_init(&opt->state[i], SC_F32, 1, &numel);
        opt->state[i].data = opt->buffers[i];
        opt->state[i].device = dev;
        opt->state[i].name = names[i];
    }
    return SC_OK;
}

/* The host-side tables (every parameter's options: the config's until
 * set) and LAMB's partial sums on a GPU. */
static sc_status tables_init(sc_optim *opt, sc_device dev)
{
    int count = sc_params_count(opt->params);
    opt->ranges = malloc((size_t)(count + 1) * sizeof *opt->ranges);
    opt->options = malloc((size_t)(count + 1) * sizeof *opt->options);
    if (!opt->ranges || !opt->options)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for an optimizer");
    for (int i = 0; i < count; i++)
        opt->options[i] = (param_options){1.0, opt->config.weight_decay};
    if (opt->config.kind == SC_OPTIM_LAMB && dev.kind == SC_DEVICE_CUDA) {
        opt->partials = sc_device_alloc(dev, 2 * SC_OPTIM_LAMB_BLOCKS * sizeof(float));
        if (!opt->partials)
            return sc_error_wrap(SC_ERR_NOMEM, "lamb: the norms' partial sums");
    }
    return SC_OK;
}

sc_optim *sc_optim_new(sc_params *params, const sc_optim_config *config)
{
    if (check_config(config) != SC_OK)
        return NULL;
    sc_optim *opt = calloc(1, sizeof *opt);
    if (!opt) {
        sc_error_set(SC_ERR_NOMEM, "out of memory for an optimizer");
        return NULL;
    }
    opt->config = *config;
    opt->params = params;
    sc_device dev = sc_params_device(params);
    if (tables_init(opt, dev) != SC_OK || state_init(opt, dev) != SC_OK ||
        guard_init(opt, dev) != SC_OK) {
        sc_optim_free(opt);
        return NULL;
    }
    return opt;
}

void sc_optim_free(sc_optim *opt)
{
    if (!opt)
        return;
    sc_device dev = sc_params_device(opt->params);
    size_t bytes = (size_t)sc_params_numel(opt->params) * sizeof(float);
    for (int i = 0; i < OPTIM_STATE_MAX; i++)
        sc_device_free(dev, opt->buffers[i], bytes);
    sc_device_free(dev, opt->partials, 2 * SC_OPTIM_LAMB_BLOCKS * sizeof(float));
    sc_device_free(dev, opt->nonfinite, sizeof *opt->nonfinite);
    free(opt->options);
    free(opt->ranges);
    free(opt);
}

static int param_index(const sc_params *ps, const sc_tensor *param)
{
    for (int i = 0; i < sc_params_count(ps); i++) {
        if (sc_params_at(ps, i) == param)
            return i;
    }
    return -1;
}

sc_status sc_optim_set_param(sc_optim *opt, const sc_tensor *param, double lr_scale,
                             double weight_decay)
{
    const char *kind = sc_optim_kind_name(opt->config.kind);
    const char *name = param && param->name ? param->name : "(unnamed)";
    int i = param ? param_index(opt->params, param) : -1;
    if (i < 0)
        return sc_error_set(SC_ERR_INVALID, "%s: parameter '%s' is not in the optimizer's store",
                            kind, name);
    if (opt->stepped)
        return sc_error_set(SC_ERR_INVALID,
                            "%s: options of parameter '%s' set after the first step", kind, name);
    if (!finite_nonneg(lr_scale))
        return sc_error_set(SC_ERR_INVALID,
                            "%s: lr scale %g of parameter '%s' must be finite and >= 0", kind,
                            lr_scale, name);
    if (!finite_nonneg(weight_decay))
        return sc_error_set(SC_ERR_INVALID,
                            "%s: weight decay %g of parameter '%s' must be finite and >= 0",
                            kind, weight_decay, name);
    opt->options[i] = (param_options){lr_scale, weight_decay};
    return SC_OK;
}

/* The element-wise rules update one thread's share of a range each
 * (cpu_update), 8 elements at a time where the CPU has AVX2 (cpu.h). */

/* p, g: [n]; d = g + wd * p; p -= lr * d */
SC_CPU_CLONES
static void sgd_update(float *restrict p, const float *restrict g, int64_t n,
                       const sc_optim_scalars *s)
{
    const float lr = s->lr, wd = s->weight_decay;
    for (int64_t i = 0; i < n; i++)
        p[i] -= lr * (g[i] + wd * p[i]);
}

/* p, g, buf: [n]; d = g + wd * p; buf = mu * buf + d;
 * p -= lr * (nesterov ? d + mu * buf : buf) */
SC_CPU_CLONES
static void sgd_momentum_update(float *restrict p, const float *restrict g,
                                float *restrict buf, int64_t n, const sc_optim_scalars *s)
{
    const float lr = s->lr, wd = s->weight_decay, mu = s->momentum;
    const bool nesterov = s->nesterov;
    for (int64_t i = 0; i < n; i++) {
        float d = g[i] + wd * p[i];
        buf[i] = mu * buf[i] + d;
        p[i] -= lr * (nesterov ? d + mu * buf[i] : buf[i]);
    }
}

/* p, g, m, v: [n]; d = g + l2 * p; m, v = moving averages of d, d^2;
 * p = p * decay - step_size * m / (sqrt(v) / bc2_sqrt + eps) */
SC_CPU_CLONES
static void adam_update(float *restrict p, const float *restrict g, float *restrict m,
                        float *restrict v, int64_t n, const sc_optim_scalars *s)
{
    const float b1 = s->beta1, b2 = s->beta2, eps = s->eps, l2 = s->l2;
    const float one_minus_b1 = s->one_minus_beta1, one_minus_b2 = s->one_minus_beta2;
    const float step_size = s->step_size, bc2_sqrt = s->bc2_sqrt, decay = s->decay;
    for (int64_t i = 0; i < n; i++) {
        float d = g[i] + l2 * p[i];
        m[i] = b1 * m[i] + one_minus_b1 * d;
        v[i] = b2 * v[i] + one_minus_b2 * d * d;
        p[i] = p[i] * decay - step_size * m[i] / (sqrtf(v[i]) / bc2_sqrt + eps);
    }
}

/* p, g, sq: [n], buf and ga [n] or NULL; d = g + l2 * p; sq, ga = moving
 * averages of d^2, d; avg = sqrt(ga ? sq - ga^2 : sq) + eps;
 * buf ? (buf = mu * buf + d / avg, p -= lr * buf) : p -= lr * d / avg.
 * The operations in torch.optim.RMSprop's order. */
SC_CPU_CLONES
static void rmsprop_update(float *restrict p, const float *restrict g, float *restrict sq,
                           float *restrict buf, float *restrict ga, int64_t n,
                           const sc_optim_scalars *s)
{
    const float lr = s->lr, l2 = s->l2, a = s->alpha, one_minus_a = s->one_minus_alpha;
    const float eps = s->eps, mu = s->momentum;
    for (int64_t i = 0; i < n; i++) {
        float d = g[i] + l2 * p[i];
        sq[i] = a * sq[i] + one_minus_a * d * d;
        float var = sq[i];
        if (ga) {
            ga[i] = a * ga[i] + one_minus_a * d;
            var = sq[i] - ga[i] * ga[i];
        }
        float avg = sqrtf(var) + eps;
        if (buf) {
            buf[i] = mu * buf[i] + d / avg;
            p[i] -= lr * buf[i];
        } else {
            p[i] -= lr * (d / avg);
        }
    }
}

/* LAMB's direction for one element: m / bc1 / (sqrt(v) / bc2_sqrt + eps) + wd * p */
static inline float lamb_direction(float p, float m, float v, const sc_optim_scalars *s)
{
    return m / s->bc1 / (sqrtf(v) / s->bc2_sqrt + s->eps) + s->weight_decay * p;
}

/* ||p|| / ||u|| from their squares; 1 when either is 0 or the parameter
 * has no weight decay (it does not adapt). */
static float lamb_trust_ratio(double p_sq, double u_sq, bool adapt)
{
    return adapt && p_sq > 0.0 && u_sq > 0.0 ? (float)sqrt(p_sq / u_sq) : 1.0f;
}

/* One parameter: p, g, m, v: [n]; m, v = Adam's moving averages of g, g^2;
 * u = lamb_direction; p -= lr * trust ratio * u. */
static void lamb_update(float *restrict p, const float *restrict g, float *restrict m,
                        float *restrict v, int64_t n, const sc_optim_scalars *s)
{
    const float b1 = s->beta1, b2 = s->beta2;
    const float one_minus_b1 = s->one_minus_beta1, one_minus_b2 = s->one_minus_beta2;
    double p_sq = 0.0, u_sq = 0.0;
#pragma omp parallel for simd schedule(static) reduction(+ : p_sq, u_sq) \
    if (n >= OPTIM_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        m[i] = b1 * m[i] + one_minus_b1 * g[i];
        v[i] = b2 * v[i] + one_minus_b2 * g[i] * g[i];
        float u = lamb_direction(p[i], m[i], v[i], s);
        p_sq += (double)p[i] * p[i];
        u_sq += (double)u * u;
    }
    const float step = s->lr * lamb_trust_ratio(p_sq, u_sq, s->adapt);
#pragma omp parallel for simd schedule(static) if (n >= OPTIM_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++)
        p[i] -= step * lamb_direction(p[i], m[i], v[i], s);
}

/* p, g, m: [n]; c = beta1 * m + (1 - beta1) * g; p = p * decay - lr * sign(c);
 * m = beta2 * m + (1 - beta2) * g */
SC_CPU_CLONES
static void lion_update(float *restrict p, const float *restrict g, float *restrict m,
                        int64_t n, const sc_optim_scalars *s)
{
    const float lr = s->lr, decay = s->decay, b1 = s->beta1, b2 = s->beta2;
    const float one_minus_b1 = s->one_minus_beta1, one_minus_b2 = s->one_minus_beta2;
    for (int64_t i = 0; i < n; i++) {
        float c = b1 * m[i] + one_minus_b1 * g[i];
        p[i] = p[i] * decay - lr * (float)((c > 0.0f) - (c < 0.0f));
        m[i] = b2 * m[i] + one_minus_b2 * g[i];
    }
}

/* Scalars in double, as PyTorch computes them in Python, then rounded
 * once; lr and wd are the parameter's own. */
static sc_optim_scalars make_scalars(const sc_optim_config *c, double lr, double wd, int64_t t)
{
    bool decoupled = c->kind == SC_OPTIM_ADAMW || c->kind == SC_OPTIM_LION;
    bool l2 = c->kind == SC_OPTIM_ADAM || c->kind == SC_OPTIM_RMSPROP;
    double bc1 = 1.0 - pow(c->beta1, (double)t);
    sc_optim_scalars s = {
        .lr = (float)lr,
        .weight_decay = (float)wd,
        .momentum = (float)c->momentum,
        .nesterov = c->nesterov,
        .centered = c->centered,
        .adapt = wd != 0.0,
        .beta1 = (float)c->beta1,
        .beta2 = (float)c->beta2,
        .one_minus_beta1 = (float)(1.0 - c->beta1),
        .one_minus_beta2 = (float)(1.0 - c->beta2),
        .alpha = (float)c->alpha,
        .one_minus_alpha = (float)(1.0 - c->alpha),
        .eps = (float)c->eps,
        .step_size = (float)(lr / bc1),
        .bc1 = (float)bc1,
        .bc2_sqrt = (float)sqrt(1.0 - pow(c->beta2, (double)t)),
        .decay = decoupled ? (float)(1.0 - lr * wd) : 1.0f,
        .l2 = l2 ? (float)wd : 0.0f,
    };
    return s;
}

/* buf + off, or NULL for a state the rule does not keep. */
static float *state_at(float *buf, int64_t off) { return buf ? buf + off : NULL; }

/* The element-wise rules on [off, off + n) of the flat buffers. */
static void elementwise_update(const sc_optim_update *u, const sc_optim_scalars *s, int64_t off,
                               int64_t n)
{
    float *p = u->values + off;
    const float *g = u->grads + off;
    float *s0 = state_at(u->state[0], off), *s1 = state_at(u->state[1], off);
    switch (u->rule) {
    case SC_OPTIM_RULE_ADAM: adam_update(p, g, s0, s1, n, s); break;
    case SC_OPTIM_RULE_SGD_MOMENTUM: sgd_momentum_update(p, g, s0, n, s); break;
    case SC_OPTIM_RULE_SGD: sgd_update(p, g, n, s); break;
    case SC_OPTIM_RULE_RMSPROP:
        rmsprop_update(p, g, s0, s1, state_at(u->state[2], off), n, s);
        break;
    case SC_OPTIM_RULE_LION: lion_update(p, g, s0, n, s); break;
    case SC_OPTIM_RULE_LAMB:
    case SC_OPTIM_RULE_GUARD: break; /* not element-wise; the guard is GPU only */
    }
}

/* Thread t of `threads`' share [lo, hi) of [0, n): equal runs of whole
 * cache lines (16 floats), the last thread taking what is left. */
static void thread_share(int64_t n, int64_t t, int64_t threads, int64_t *lo, int64_t *hi)
{
    int64_t share = (n / threads + 15) / 16 * 16;
    *lo = t * share < n ? t * share : n;
    *hi = t == threads - 1 || *lo + share > n ? n : *lo + share;
}

/* p, g and the state are flat buffers; one range at a time, each thread
 * updating its share of it (whole cache lines of 16 floats). */
static void cpu_update(const sc_optim_update *u)
{
    for (int r = 0; r < u->n_ranges; r++) {
        const sc_optim_range *range = &u->ranges[r];
        int64_t off = range->offset, n = range->numel;
        if (u->rule == SC_OPTIM_RULE_LAMB) {
            lamb_update(u->values + off, u->grads + off, u->state[0] + off, u->state[1] + off, n,
                        &range->s);
            continue;
        }
#pragma omp parallel if (n >= OPTIM_PARALLEL_MIN)
        {
            int64_t lo, hi;
            thread_share(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
            elementwise_update(u, &range->s, off + lo, hi - lo);
        }
    }
}

static bool trainable(const sc_params *ps, int i)
{
    return sc_params_at(ps, i)->flags & SC_TENSOR_REQUIRES_GRAD;
}

/* Adjacent trainable parameters are contiguous in the flat buffers: each
 * maximal run of them with the same options is one range (for LAMB each
 * parameter is one), with the scalars of step t at learning rate lr.
 * Returns the number of ranges. */
static int trainable_ranges(const sc_optim *opt, double lr, int64_t t)
{
    const sc_params *ps = opt->params;
    bool per_param = opt->config.kind == SC_OPTIM_LAMB;
    int n = 0;
    for (int i = 0; i < sc_params_count(ps); i++) {
        if (!trainable(ps, i))
            continue;
        const param_options *o = &opt->options[i], *before = &opt->options[i - (i > 0)];
        bool joins = !per_param && i > 0 && trainable(ps, i - 1) &&
                     o->lr_scale == before->lr_scale && o->weight_decay == before->weight_decay;
        if (joins) {
            opt->ranges[n - 1].numel += sc_params_at(ps, i)->numel;
            continue;
        }
        opt->ranges[n++] = (sc_optim_range){
            .offset = sc_params_offset(ps, i),
            .numel = sc_params_at(ps, i)->numel,
            .s = make_scalars(&opt->config, lr * o->lr_scale, o->weight_decay, t),
        };
    }
    return n;
}

static sc_optim_rule rule_of(const sc_optim *opt)
{
    switch (opt->config.kind) {
    case SC_OPTIM_SGD: return opt->nstate ? SC_OPTIM_RULE_SGD_MOMENTUM : SC_OPTIM_RULE_SGD;
    case SC_OPTIM_RMSPROP: return SC_OPTIM_RULE_RMSPROP;
    case SC_OPTIM_LAMB: return SC_OPTIM_RULE_LAMB;
    case SC_OPTIM_LION: return SC_OPTIM_RULE_LION;
    case SC_OPTIM_ADAM:
    case SC_OPTIM_ADAMW: break;
    }
    return SC_OPTIM_RULE_ADAM;
}

/* The state buffers in the slots the rule reads (optim_impl.h): RMSprop's
 * gradient average goes to slot 2 whether or not there is momentum. */
static void rule_state(const sc_optim *opt, float *state[OPTIM_STATE_MAX])
{
    memcpy(state, opt->buffers, sizeof opt->buffers);
    if (opt->config.kind == SC_OPTIM_RMSPROP && opt->config.momentum == 0.0) {
        state[2] = state[1];
        state[1] = NULL;
    }
}

sc_status sc_optim_step(sc_optim *opt, double lr)
{
    if (!isfinite(lr))
        return sc_error_set(SC_ERR_NUMERIC, "%s step: learning rate %g is not finite",
                            sc_optim_kind_name(opt->config.kind), lr);
    opt->steps++;
    opt->stepped = true;
    sc_optim_update u = {
        .rule = rule_of(opt),
        .values = sc_params_values(opt->params),
        .grads = sc_params_grads(opt->params),
        .ranges = opt->ranges,
        .n_ranges = trainable_ranges(opt, lr, opt->steps),
        .partials = opt->partials,
        .nonfinite = opt->nonfinite,
    };
    rule_state(opt, u.state);
    sc_device dev = sc_params_device(opt->params);
    if (dev.kind == SC_DEVICE_CUDA)
        return sc_cuda_optim_update(dev.index, &u);
    cpu_update(&u);
    return SC_OK;
}

/* The gradients from the first trainable parameter to the end of the
 * last, for one check (one launch, not one per range): the frozen
 * parameters' between them stay zero (zeroed with the rest, never
 * written). */
static sc_optim_range trainable_span(const sc_params *ps)
{
    int first = -1, last = -1;
    for (int i = 0; i < sc_params_count(ps); i++) {
        if (trainable(ps, i)) {
            first = first < 0 ? i : first;
            last = i;
        }
    }
    if (first < 0)
        return (sc_optim_range){.offset = 0, .numel = 0};
    int64_t begin = sc_params_offset(ps, first);
    int64_t end = sc_params_offset(ps, last) + sc_params_at(ps, last)->numel;
    return (sc_optim_range){.offset = begin, .numel = end - begin};
}

sc_status sc_optim_guard(sc_optim *opt, const sc_tensor *loss)
{
    sc_device dev = sc_params_device(opt->params);
    if (dev.kind != SC_DEVICE_CUDA)
        return SC_OK;
    if (loss->dtype != SC_F32 || loss->numel != 1 || loss->device.kind != dev.kind ||
        loss->device.index != dev.index)
        return sc_error_set(SC_ERR_INVALID, "optimizer guard: the loss must be one f32 on the "
                            "parameters' device");
    sc_optim_range span = trainable_span(opt->params);
    sc_optim_update u = {
        .rule = SC_OPTIM_RULE_GUARD,
        .grads = sc_params_grads(opt->params),
        .ranges = &span,
        .n_ranges = 1,
        .nonfinite = opt->nonfinite,
        .loss = sc_tensor_f32(loss),
    };
    return sc_cuda_optim_update(dev.index, &u);
}

const sc_tensor *sc_optim_guard_flag(const sc_optim *opt)
{
    return opt->nonfinite ? &opt->guard_flag : NULL;
}

int64_t sc_optim_steps(const sc_optim *opt) { return opt->steps; }

void sc_optim_set_steps(sc_optim *opt, int64_t steps) { opt->steps = steps; }

int sc_optim_state_count(const sc_optim *opt) { return opt->nstate; }

sc_tensor *sc_optim_state_at(sc_optim *opt, int i)
{
    if (i < 0 || i >= opt->nstate)
        return NULL;
    return &opt->state[i];
}
