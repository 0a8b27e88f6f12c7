#include "classifier.h"

#include <stdio.h>
#include <string.h>

#include <scorch/ops.h>

#include "classes.h"
#include "spec.h"

/* A probability-like arg in [0, 1). */
static sc_status parse_fraction(const sc_args *args, const char *key, float *out)
{
    double v;
    SC_TRY(sc_args_float(args, key, 0.0, &v));
    if (!(v >= 0.0 && v < 1.0))
        return sc_error_set(SC_ERR_INVALID, "model arg '%s': %g is outside [0, 1)", key, v);
    *out = (float)v;
    return SC_OK;
}

sc_status classifier_parse(classifier *c, const char *model, const sc_args *args)
{
    c->model = model;
    SC_TRY(parse_fraction(args, "dropout", &c->dropout));
    SC_TRY(parse_fraction(args, "label_smoothing", &c->label_smoothing));
    SC_TRY(sc_args_int(args, "classes", 0, &c->classes)); /* 0: not given */
    if (sc_args_get(args, "classes") && c->classes < 2)
        return sc_error_set(SC_ERR_INVALID, "model arg 'classes': %lld is below 2",
                            (long long)c->classes);
    return SC_OK;
}

sc_status classifier_positive_ints(const sc_args *args, const char *key,
                                   const int64_t *def, int n_def, int64_t *out, int max,
                                   int *n)
{
    if (!sc_args_get(args, key)) {
        memcpy(out, def, (size_t)n_def * sizeof *out);
        *n = n_def;
        return SC_OK;
    }
    SC_TRY(sc_args_ints(args, key, out, max, n));
    for (int i = 0; i < *n; i++)
        if (out[i] < 1)
            return sc_error_set(SC_ERR_INVALID, "model arg '%s': %lld is not positive", key,
                                (long long)out[i]);
    return SC_OK;
}

sc_status classifier_check_spec(classifier *c, const sc_sample_spec *data,
                                classifier_image *image)
{
    char s[128];
    const sc_tensor_spec *x = data->n_inputs > 0 ? &data->inputs[0] : NULL;
    const sc_tensor_spec *t = data->n_targets > 0 ? &data->targets[0] : NULL;
    if (!x || x->dtype != SC_F32 || x->ndim != 3 || x->shape[0] < 1 || x->shape[1] < 1 ||
        x->shape[2] < 1)
        return sc_error_set(SC_ERR_INVALID, "%s needs an f32 image [C, H, W] as input, the "
                            "dataset gives %s", c->model, x ? spec_str(x, s, sizeof s) : "none");
    if (!t || t->dtype == SC_F32 || t->ndim != 0)
        return sc_error_set(SC_ERR_INVALID, "%s needs an integer class index (shape []) as "
                            "target, the dataset gives %s", c->model,
                            t ? spec_str(t, s, sizeof s) : "none");
    *image = (classifier_image){x->shape[0], x->shape[1], x->shape[2]};
    return classes_choose(c->model, c->classes, data, &c->classes);
}

sc_status classifier_check_input(const classifier *c, const classifier_image *image,
                                 const sc_tensor_list *inputs)
{
    const sc_tensor *x = inputs->n > 0 ? inputs->t[0] : NULL;
    if (x && x->ndim == 4 && x->shape[1] == image->channels && x->shape[2] == image->height &&
        x->shape[3] == image->width)
        return SC_OK;
    char s[96] = "nothing";
    if (x)
        sc_shape_str(x->ndim, x->shape, s, sizeof s);
    return sc_error_set(SC_ERR_INVALID, "%s: forward got %s, not [N, %lld, %lld, %lld]",
                        c->model, s, (long long)image->channels, (long long)image->height,
                        (long long)image->width);
}

sc_status classifier_output(sc_tensor *logits, sc_tensor_list *outputs)
{
    if (!logits)
        return sc_error_code();
    outputs->n = 1;
    outputs->t[0] = logits;
    return SC_OK;
}

sc_status classifier_criterion(void *net, sc_ctx *ctx, const sc_tensor_list *outputs,
                               const sc_tensor_list *targets, sc_tensor **loss)
{
    const classifier *c = net;
    *loss = sc_cross_entropy(ctx, outputs->t[0], targets->t[0], c->label_smoothing); /* [] */
    return *loss ? SC_OK : sc_error_code();
}

sc_status classifier_metrics(void *net, const sc_tensor_list *outputs,
                             const sc_tensor_list *targets, sc_metrics *metrics)
{
    return sc_metrics_add_classification(metrics, outputs->t[0], targets->t[0]);
}

const char *classifier_main_metric(void *net, sc_metric_mode *mode)
{
    *mode = SC_METRIC_MAX;
    return "accuracy";
}
