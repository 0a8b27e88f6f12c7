/* Finite-difference gradient checker; see gradcheck.h. */
#include "gradcheck.h"
#include "scorch_host/context.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gc_state {
    sc_ctx *ctx;
    gradcheck_fn fn;
    void *user;
    int n;
    sc_tensor *const *in;
    sc_rng rng0;   /* the context's stream when the check began */
    uint64_t seed; /* of the weighting */
    float *w;      /* the weighting, out's shape */
    int64_t w_numel;
    gradcheck_report *rep;
} gc_state;

static bool gc_fail(gc_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool gc_fail(gc_state *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->rep->message, sizeof s->rep->message, fmt, ap);
    va_end(ap);
    return false;
}

static bool gc_checks(const sc_tensor *t) { return t->flags & SC_TENSOR_REQUIRES_GRAD; }

/* The function's output, computed from the same random stream every time. */
static sc_tensor *gc_output(gc_state *s)
{
    *sc_ctx_rng(s->ctx) = s->rng0;
    return s->fn(s->ctx, s->in, s->user);
}

/* loss = sum(out * w), accumulated in double, with grad mode off. */
static bool gc_loss(gc_state *s, double *loss)
{
    bool was = sc_ctx_set_grad_enabled(s->ctx, false);
    sc_tensor *out = gc_output(s);
    sc_ctx_set_grad_enabled(s->ctx, was);
    bool ok = out && out->dtype == SC_F32 && out->numel == s->w_numel;
    if (ok) {
        const float *y = sc_tensor_f32(out);
        double acc = 0.0;
        for (int64_t i = 0; i < out->numel; i++)
            acc += (double)y[i] * s->w[i];
        *loss = acc;
    } else if (out) {
        sc_error_set(SC_ERR_STATE, "the output changed shape or dtype between evaluations");
    }
    sc_ctx_reset(s->ctx);
    return ok;
}

static void gc_zero_grad(sc_tensor *t)
{
    if (t->flags & SC_TENSOR_PARAM)
        memset(t->grad->data, 0, sc_tensor_nbytes(t->grad));
    else
        t->grad = NULL; /* a step gradient dies with the arena */
}

/* Runs forward and sc_backward once; copies each checked input's gradient
 * into grads[i] (zeros when backward never reached it). */
static bool gc_analytic(gc_state *s, float **grads)
{
    sc_tensor *out = gc_output(s);
    if (!out)
        return gc_fail(s, "the function failed: %s", sc_error_message());
    if (out->dtype != SC_F32)
        return gc_fail(s, "the output is %s, not f32", sc_dtype_name(out->dtype));
    s->w_numel = out->numel;
    s->w = malloc((size_t)(out->numel + 1) * sizeof *s->w);
    sc_tensor *wt = sc_tensor_new(s->ctx, SC_F32, out->ndim, out->shape);
    if (!s->w || !wt)
        return gc_fail(s, "out of memory for the weighting");
    sc_rng rng;
    sc_rng_init(&rng, s->seed, 0x6772616463686bULL);
    for (int64_t i = 0; i < out->numel; i++)
        s->w[i] = 2.0f * sc_rng_uniform(&rng) - 1.0f;
    memcpy(wt->data, s->w, sc_tensor_nbytes(wt));

    for (int i = 0; i < s->n; i++)
        if (gc_checks(s->in[i]))
            gc_zero_grad(s->in[i]);
    sc_tensor *loss = sc_sum(s->ctx, sc_mul(s->ctx, out, wt));
    if (!loss || sc_backward(s->ctx, loss, NULL, NULL) != SC_OK)
        return gc_fail(s, "backward failed: %s", sc_error_message());
    for (int i = 0; i < s->n; i++) {
        sc_tensor *t = s->in[i];
        if (!gc_checks(t))
            continue;
        grads[i] = calloc((size_t)t->numel + 1, sizeof **grads);
        if (!grads[i])
            return gc_fail(s, "out of memory for gradients");
        if (t->grad)
            memcpy(grads[i], t->grad->data, (size_t)t->numel * sizeof **grads);
    }
    sc_ctx_reset(s->ctx);
    return true;
}

/* Central difference for element j of input t: d loss / d t[j]. */
static bool gc_numeric(gc_state *s, sc_tensor *t, int64_t j, double eps, double *out)
{
    float *x = sc_tensor_f32(t), v = x[j];
    float hi = (float)(v + eps), lo = (float)(v - eps);
    double lp, lm;
    x[j] = hi;
    bool ok = gc_loss(s, &lp);
    x[j] = lo;
    ok = ok && gc_loss(s, &lm);
    x[j] = v;
    if (!ok)
        return gc_fail(s, "the function failed on a perturbed input: %s",
                       sc_error_message());
    *out = (lp - lm) / ((double)hi - (double)lo); /* the step actually taken */
    return true;
}

static bool gc_compare(gc_state *s, float *const *grads, const gradcheck_opts *o)
{
    gradcheck_report *r = s->rep;
    r->ratio = -1.0;
    for (int i = 0; i < s->n; i++) {
        sc_tensor *t = s->in[i];
        if (!gc_checks(t))
            continue;
        if (t->dtype != SC_F32)
            return gc_fail(s, "input %d requires grad but is %s", i, sc_dtype_name(t->dtype));
        for (int64_t j = 0; j < t->numel; j++) {
            double num = 0.0, ana = grads[i][j];
            if (!gc_numeric(s, t, j, o->eps, &num))
                return false;
            double tol = o->atol + o->rtol * fmax(fabs(ana), fabs(num));
            double ratio = fabs(ana - num) / tol;
            r->checked++;
            if (ratio > r->ratio || isnan(ratio)) {
                *r = (gradcheck_report){r->checked, i, j, ana, num, ratio, ""};
                if (isnan(ratio))
                    break;
            }
        }
    }
    if (r->checked == 0)
        return gc_fail(s, "no input requires grad: nothing was checked");
    if (!(r->ratio <= 1.0))
        return gc_fail(s, "input %d element %lld: analytic %.7g vs numeric %.7g "
                       "(error %.2f x tolerance; worst of %lld elements)",
                       r->input, (long long)r->index, r->analytic, r->numeric, r->ratio,
                       (long long)r->checked);
    return true;
}

bool gradcheck_run(sc_ctx *ctx, gradcheck_fn fn, void *user, int n_inputs,
                   sc_tensor *const *inputs, const gradcheck_opts *opts,
                   gradcheck_report *report)
{
    gradcheck_report local;
    gradcheck_opts o = opts ? *opts : (gradcheck_opts){0};
    o.eps = o.eps > 0 ? o.eps : 1e-3;
    o.atol = o.atol > 0 ? o.atol : 1e-3;
    o.rtol = o.rtol > 0 ? o.rtol : 1e-2;
    gc_state s = {ctx, fn, user, n_inputs, inputs, *sc_ctx_rng(ctx), o.seed, NULL, 0,
                  report ? report : &local};
    *s.rep = (gradcheck_report){0};
    float **grads = calloc((size_t)n_inputs + 1, sizeof *grads);
    sc_ctx_reset(ctx);
    bool ok = grads ? gc_analytic(&s, grads) && gc_compare(&s, grads, &o)
                    : gc_fail(&s, "out of memory");
    sc_ctx_reset(ctx);
    /* Leave no step gradient pointing into the recycled arena. */
    for (int i = 0; i < n_inputs; i++)
        if (gc_checks(inputs[i]))
            gc_zero_grad(inputs[i]);
    for (int i = 0; grads && i < n_inputs; i++)
        free(grads[i]);
    free(grads);
    free(s.w);
    *sc_ctx_rng(ctx) = s.rng0;
    return ok;
}

sc_tensor *gradcheck_param(sc_params *ps, const char *name, int ndim,
                           const int64_t *shape, float lo, float hi, sc_rng *rng)
{
    sc_tensor *t = sc_params_add(ps, name, ndim, shape);
    for (int64_t i = 0; t && i < t->numel; i++)
        sc_tensor_f32(t)[i] = lo + (hi - lo) * sc_rng_uniform(rng);
    return t;
}
