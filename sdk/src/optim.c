#include "scorch/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_api.h"
#include "device_impl.h"
#include "optim_impl.h"

/* Below this many elements a range is updated by one thread: waking the
 * OpenMP team costs more than the loop. */
enum { OPTIM_PARALLEL_MIN = 32768, OPTIM_STATE_MAX = 2 };

struct sc_optim {
    sc_optim_config config;
    sc_params *params;
    int64_t steps;
    int nstate;
    sc_tensor state[OPTIM_STATE_MAX]; /* 1-D [numel] views of buffers below */
    float *buffers[OPTIM_STATE_MAX]; /* on the parameters' device */
    sc_optim_range *ranges;          /* scratch: one per parameter at most */
    int32_t *nonfinite;              /* the guard's flag, on a GPU only */
    sc_tensor guard_flag;            /* a view of it */
};


sc_optim_config sc_optim_defaults(sc_optim_kind kind)
{
    return (sc_optim_config){
        .kind = kind,
        .momentum = 0.0,
        .nesterov = false,
        .weight_decay = kind == SC_OPTIM_ADAMW ? 0.01 : 0.0,
        .beta1 = 0.9,
        .beta2 = 0.999,
        .eps = 1e-8,
    };
}

static const char *const kind_names[] = {
    [SC_OPTIM_SGD] = "sgd", [SC_OPTIM_ADAM] = "adam", [SC_OPTIM_ADAMW] = "adamw"};

sc_status sc_optim_kind_parse(const char *name, sc_optim_kind *out)
{
    for (size_t k = 0; k < sizeof kind_names / sizeof *kind_names; k++) {
        if (strcmp(name, kind_names[k]) == 0) {
            *out = (sc_optim_kind)k;
            return SC_OK;
        }
    }
    return sc_error_set(SC_ERR_INVALID, "unknown optimizer '%s' (known: sgd, adam, adamw)",
                        name);
}

const char *sc_optim_kind_name(sc_optim_kind kind)
{
    if ((size_t)kind >= sizeof kind_names / sizeof *kind_names)
        return "?";
    return kind_names[kind];
}

/* `!(x >= lo)` rather than `x < lo` so that NaN is refused too. */
static sc_status check_config(const sc_optim_config *c)
{
    if ((size_t)c->kind >= sizeof kind_names / sizeof *kind_names)
        return sc_error_set(SC_ERR_INVALID, "optimizer: unknown kind %d", (int)c->kind);
    const char *name = kind_names[c->kind];
    if (!(c->weight_decay >= 0.0) || isinf(c->weight_decay))
        return sc_error_set(SC_ERR_INVALID, "%s: weight decay %g must be finite and >= 0",
                            name, c->weight_decay);
    if (c->kind == SC_OPTIM_SGD) {
        if (!(c->momentum >= 0.0) || isinf(c->momentum))
            return sc_error_set(SC_ERR_INVALID, "sgd: momentum %g must be finite and >= 0",
                                c->momentum);
        if (c->nesterov && c->momentum == 0.0)
            return sc_error_set(SC_ERR_INVALID, "sgd: nesterov needs momentum > 0");
        return SC_OK;
    }
    if (!(c->beta1 >= 0.0 && c->beta1 < 1.0) || !(c->beta2 >= 0.0 && c->beta2 < 1.0))
        return sc_error_set(SC_ERR_INVALID, "%s: betas (%g, %g) must lie in [0, 1)", name,
                            c->beta1, c->beta2);
    if (!(c->eps > 0.0) || isinf(c->eps))
        return sc_error_set(SC_ERR_INVALID, "%s: eps %g must be finite and > 0", name, c->eps);
    return SC_OK;
}

/* The state buffers a kind keeps: SGD a momentum buffer only when it has
 * momentum, Adam and AdamW both moments. */
static int state_names(const sc_optim_config *c, const char *names[OPTIM_STATE_MAX])
{
    if (c->kind == SC_OPTIM_SGD) {
        names[0] = "momentum";
        return c->momentum != 0.0;
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
    const char *names[OPTIM_STATE_MAX];
    opt->nstate = state_names(config, names);
    int64_t numel = sc_params_numel(params);
    sc_device dev = sc_params_device(params);
    size_t bytes = (size_t)numel * sizeof(float);
    opt->ranges = malloc((size_t)(sc_params_count(params) + 1) * sizeof *opt->ranges);
    if (!opt->ranges) {
        sc_error_set(SC_ERR_NOMEM, "out of memory for an optimizer");
        sc_optim_free(opt);
        return NULL;
    }
    for (int i = 0; i < opt->nstate; i++) {
        /* Zeroed state is PyTorch's first step exactly: momentum * 0 + g = g. */
        opt->buffers[i] = sc_device_alloc(dev, bytes);
        if (!opt->buffers[i] || sc_device_zero(dev, opt->buffers[i], bytes) != SC_OK) {
            sc_error_wrap(SC_ERR_NOMEM, "%s: %lld floats of '%s'",
                          sc_optim_kind_name(config->kind), (long long)numel, names[i]);
            sc_optim_free(opt);
            return NULL;
        }
        sc_tensor_init(&opt->state[i], SC_F32, 1, &numel);
        opt->state[i].data = opt->buffers[i];
        opt->state[i].device = dev;
        opt->state[i].name = names[i];
    }
    if (guard_init(opt, dev) != SC_OK) {
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
    sc_device_free(dev, opt->nonfinite, sizeof *opt->nonfinite);
    free(opt->ranges);
    free(opt);
}

/* p, g: [n]; d = g + wd * p; p -= lr * d */
static void sgd_update(float *restrict p, const float *restrict g, int64_t n,
                       const sc_optim_scalars *s)
{
    const float lr = s->lr, wd = s->weight_decay;
#pragma omp parallel for simd schedule(static) if (n >= OPTIM_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++)
        p[i] -= lr * (g[i] + wd * p[i]);
}

/* p, g, buf: [n]; d = g + wd * p; buf = mu * buf + d;
 * p -= lr * (nesterov ? d + mu * buf : buf) */
static void sgd_momentum_update(float *restrict p, const float *restrict g,
                                float *restrict buf, int64_t n, const sc_optim_scalars *s)
{
    const float lr = s->lr, wd = s->weight_decay, mu = s->momentum;
    const bool nesterov = s->nesterov;
#pragma omp parallel for simd schedule(static) if (n >= OPTIM_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        float d = g[i] + wd * p[i];
        buf[i] = mu * buf[i] + d;
        p[i] -= lr * (nesterov ? d + mu * buf[i] : buf[i]);
    }
}

/* p, g, m, v: [n]; d = g + l2 * p; m, v = moving averages of d, d^2;
 * p = p * decay - step_size * m / (sqrt(v) / bc2_sqrt + eps) */
static void adam_update(float *restrict p, const float *restrict g, float *restrict m,
                        float *restrict v, int64_t n, const sc_optim_scalars *s)
{
    const float b1 = s->beta1, b2 = s->beta2, eps = s->eps, l2 = s->l2;
    const float step_size = s->step_size, bc2_sqrt = s->bc2_sqrt, decay = s->decay;
#pragma omp parallel for simd schedule(static) if (n >= OPTIM_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        float d = g[i] + l2 * p[i];
        m[i] = b1 * m[i] + (1.0f - b1) * d;
        v[i] = b2 * v[i] + (1.0f - b2) * d * d;
        p[i] = p[i] * decay - step_size * m[i] / (sqrtf(v[i]) / bc2_sqrt + eps);
    }
}

/* Scalars in double, as PyTorch computes them in Python, then rounded once. */
static sc_optim_scalars make_scalars(const sc_optim_config *c, double lr, int64_t t)
{
    sc_optim_scalars s = {
        .lr = (float)lr,
        .weight_decay = (float)c->weight_decay,
        .momentum = (float)c->momentum,
        .nesterov = c->nesterov,
        .beta1 = (float)c->beta1,
        .beta2 = (float)c->beta2,
        .eps = (float)c->eps,
        .step_size = (float)(lr / (1.0 - pow(c->beta1, (double)t))),
        .bc2_sqrt = (float)sqrt(1.0 - pow(c->beta2, (double)t)),
        .decay = c->kind == SC_OPTIM_ADAMW ? (float)(1.0 - lr * c->weight_decay) : 1.0f,
        .l2 = c->kind == SC_OPTIM_ADAM ? (float)c->weight_decay : 0.0f,
    };
    return s;
}

/* p, g and the state are flat buffers; one range at a time. */
static void cpu_update(const sc_optim_update *u)
{
    for (int r = 0; r < u->n_ranges; r++) {
        int64_t off = u->ranges[r].offset, n = u->ranges[r].numel;
        float *p = u->values + off;
        const float *g = u->grads + off;
        switch (u->rule) {
        case SC_OPTIM_RULE_ADAM: adam_update(p, g, u->state[0] + off, u->state[1] + off, n, &u->s); break;
        case SC_OPTIM_RULE_SGD_MOMENTUM: sgd_momentum_update(p, g, u->state[0] + off, n, &u->s); break;
        case SC_OPTIM_RULE_SGD: sgd_update(p, g, n, &u->s); break;
        case SC_OPTIM_RULE_GUARD: break; /* GPU only */
        }
    }
}

/* Adjacent trainable parameters are contiguous in the flat buffers: each
 * maximal run of them is one range. Returns the number of ranges. */
static int trainable_ranges(const sc_params *ps, sc_optim_range *ranges)
{
    int count = sc_params_count(ps), n = 0;
    for (int i = 0; i < count;) {
        if (!(sc_params_at(ps, i)->flags & SC_TENSOR_REQUIRES_GRAD)) {
            i++;
            continue;
        }
        ranges[n] = (sc_optim_range){sc_params_offset(ps, i), 0};
        for (; i < count && (sc_params_at(ps, i)->flags & SC_TENSOR_REQUIRES_GRAD); i++)
            ranges[n].numel += sc_params_at(ps, i)->numel;
        n++;
    }
    return n;
}

static sc_optim_rule rule_of(const sc_optim *opt)
{
    if (opt->config.kind != SC_OPTIM_SGD)
        return SC_OPTIM_RULE_ADAM;
    return opt->nstate ? SC_OPTIM_RULE_SGD_MOMENTUM : SC_OPTIM_RULE_SGD;
}

sc_status sc_optim_step(sc_optim *opt, double lr)
{
    if (!isfinite(lr))
        return sc_error_set(SC_ERR_NUMERIC, "%s step: learning rate %g is not finite",
                            sc_optim_kind_name(opt->config.kind), lr);
    opt->steps++;
    sc_optim_update u = {
        .rule = rule_of(opt),
        .values = sc_params_values(opt->params),
        .grads = sc_params_grads(opt->params),
        .state = {opt->buffers[0], opt->buffers[1]},
        .ranges = opt->ranges,
        .n_ranges = trainable_ranges(opt->params, opt->ranges),
        .s = make_scalars(&opt->config, lr, opt->steps),
        .nonfinite = opt->nonfinite,
    };
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
static sc_optim_range trainable_span(sc_optim *opt)
{
    int n = trainable_ranges(opt->params, opt->ranges);
    if (n == 0)
        return (sc_optim_range){0, 0};
    int64_t begin = opt->ranges[0].offset;
    return (sc_optim_range){begin, opt->ranges[n - 1].offset + opt->ranges[n - 1].numel - begin};
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
    sc_optim_range span = trainable_span(opt);
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
