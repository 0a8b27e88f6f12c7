/* synthetic — a tiny dataset generated in memory, for tests and demos.
 *
 * Every sample is a pure function of the dataset args and its (split,
 * index), never of the epoch or of which thread asks: sample i of a split
 * draws from its own random stream (seed, split, i). --dataset-path is
 * ignored.
 *
 * task=classification (default): `classes` Gaussian blobs in `features`
 * dimensions; the blob centres are drawn from N(0, 1) per feature and a
 * sample is its class's centre plus N(0, noise^2) per feature.
 *   input f32 [features], target i64 [] (class 0..classes-1)
 * task=regression: x ~ N(0, 1) per feature, y = W x + N(0, noise^2) with
 * W [outputs, features] drawn from N(0, 1 / features), so y has unit
 * variance before the noise.
 *   input f32 [features], target f32 [outputs]
 *
 * Dataset args: task, classes (4; classification), outputs (1;
 * regression), features (16), train_size (2048), valid_size (512),
 * test_size (512), seed (1), noise (1.0 for classification, 0.1 for
 * regression), nan_sample (-1: none; else the sample whose input is NaN
 * — fault injection, for testing how a trainer handles a NaN loss) and
 * nan_split (train: the split whose sample that is; or valid, test).
 *
 * Raw inputs (index_decode): one CSV row of `features` numbers
 * (scorch/csv.h), taken as the input as it is, like getitem's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <scorch/csv.h>
#include <scorch/plugin.h>

typedef enum syn_task { TASK_CLASSIFICATION, TASK_REGRESSION } syn_task;

/* A split. A view into the index. */
typedef struct syn_dataset {
    const struct syn_index *index;
    sc_split split;
    int64_t len;
} syn_dataset;

typedef struct syn_index {
    syn_task task;
    int64_t classes, outputs, features;
    uint64_t seed;
    float noise;
    int64_t nan_sample;
    sc_split nan_split;
    /* classification: blob centres [classes, features];
     * regression: weights [outputs, features] */
    float *table;
    syn_dataset splits[SC_SPLIT_COUNT];
} syn_index;

static sc_status parse_task(const sc_args *args, syn_task *task)
{
    const char *v = sc_args_get(args, "task");
    if (!v || strcmp(v, "classification") == 0)
        *task = TASK_CLASSIFICATION;
    else if (strcmp(v, "regression") == 0)
        *task = TASK_REGRESSION;
    else
        return sc_error_set(SC_ERR_INVALID, "dataset arg 'task': '%s' is not "
                            "classification or regression", v);
    return SC_OK;
}

/* Reads an integer arg that must be at least `min`. */
static sc_status arg_at_least(const sc_args *args, const char *key, int64_t def, int64_t min,
                              int64_t *out)
{
    SC_TRY(sc_args_int(args, key, def, out));
    if (*out < min)
        return sc_error_set(SC_ERR_INVALID, "dataset arg '%s': %lld is below %lld", key,
                            (long long)*out, (long long)min);
    return SC_OK;
}

static sc_status parse_nan_split(const sc_args *args, sc_split *split)
{
    const char *v = sc_args_get(args, "nan_split");
    for (int s = 0; s < SC_SPLIT_COUNT; s++)
        if (v ? strcmp(v, sc_split_name((sc_split)s)) == 0 : s == SC_SPLIT_TRAIN) {
            *split = (sc_split)s;
            return SC_OK;
        }
    return sc_error_set(SC_ERR_INVALID, "dataset arg 'nan_split': '%s' is not train, valid "
                        "or test", v);
}

/* The arg that belongs to the other task is refused, not ignored. */
static sc_status check_task_args(const sc_args *args, syn_task task)
{
    const char *foreign = task == TASK_CLASSIFICATION ? "outputs" : "classes";
    if (sc_args_get(args, foreign))
        return sc_error_set(SC_ERR_INVALID, "dataset arg '%s' does not apply to task=%s",
                            foreign, task == TASK_CLASSIFICATION ? "classification"
                                                                 : "regression");
    return SC_OK;
}

static sc_status parse_options(const sc_args *args, syn_index *ix)
{
    static const char *const known[] = {"task", "classes", "outputs", "features",
                                        "train_size", "valid_size", "test_size",
                                        "seed", "noise", "nan_sample", "nan_split", NULL};
    static const char *const size_keys[SC_SPLIT_COUNT] = {"train_size", "valid_size",
                                                          "test_size"};
    static const int64_t size_defaults[SC_SPLIT_COUNT] = {2048, 512, 512};
    SC_TRY(sc_args_check_known(args, known));
    SC_TRY(parse_task(args, &ix->task));
    SC_TRY(check_task_args(args, ix->task));
    SC_TRY(arg_at_least(args, "classes", 4, 2, &ix->classes));
    SC_TRY(arg_at_least(args, "outputs", 1, 1, &ix->outputs));
    SC_TRY(arg_at_least(args, "features", 16, 1, &ix->features));
    for (int s = 0; s < SC_SPLIT_COUNT; s++)
        SC_TRY(arg_at_least(args, size_keys[s], size_defaults[s], 0, &ix->splits[s].len));
    int64_t seed;
    SC_TRY(sc_args_int(args, "seed", 1, &seed));
    ix->seed = (uint64_t)seed;
    double noise;
    SC_TRY(sc_args_float(args, "noise", ix->task == TASK_CLASSIFICATION ? 1.0 : 0.1, &noise));
    if (!(noise >= 0 && isfinite(noise)))
        return sc_error_set(SC_ERR_INVALID, "dataset arg 'noise': %g is not a finite "
                            "value >= 0", noise);
    ix->noise = (float)noise;
    SC_TRY(parse_nan_split(args, &ix->nan_split));
    return sc_args_int(args, "nan_sample", -1, &ix->nan_sample);
}

/* Blob centres from N(0, 1), or regression weights from N(0, 1 / features). */
static sc_status make_table(syn_index *ix)
{
    int64_t rows = ix->task == TASK_CLASSIFICATION ? ix->classes : ix->outputs;
    int64_t n = rows * ix->features;
    ix->table = malloc((size_t)n * sizeof *ix->table);
    if (!ix->table)
        return sc_error_set(SC_ERR_NOMEM, "synthetic: out of memory for %lld values",
                            (long long)n);
    float scale = ix->task == TASK_CLASSIFICATION ? 1.0f : 1.0f / sqrtf((float)ix->features);
    sc_rng rng;
    sc_rng_init(&rng, ix->seed, 0); /* samples use streams mixed from (split, index) */
    for (int64_t k = 0; k < n; k++)
        ix->table[k] = scale * sc_rng_normal(&rng);
    return SC_OK;
}

static void syn_index_close(void *index)
{
    syn_index *ix = index;
    if (!ix)
        return;
    free(ix->table);
    free(ix);
}

static sc_status syn_index_open(const char *path, const sc_args *args, void **index)
{
    *index = NULL;
    syn_index *ix = calloc(1, sizeof *ix);
    if (!ix)
        return sc_error_set(SC_ERR_NOMEM, "synthetic: out of memory for the index");
    sc_status st = parse_options(args, ix);
    if (st == SC_OK)
        st = make_table(ix);
    if (st != SC_OK) {
        syn_index_close(ix);
        return st;
    }
    for (int s = 0; s < SC_SPLIT_COUNT; s++) {
        ix->splits[s].index = ix;
        ix->splits[s].split = (sc_split)s;
    }
    *index = ix;
    return SC_OK;
}

static sc_status syn_dataset_open(void *index, sc_split split, void **dataset)
{
    syn_index *ix = index;
    if ((unsigned)split >= SC_SPLIT_COUNT)
        return sc_error_set(SC_ERR_INVALID, "synthetic: no split %d", (int)split);
    *dataset = &ix->splits[split];
    return SC_OK;
}

static void syn_dataset_close(void *dataset)
{
    (void)dataset; /* a view into the index, which owns it */
}

static int64_t syn_dataset_len(void *dataset)
{
    return ((const syn_dataset *)dataset)->len;
}

static void syn_dataset_spec(void *dataset, sc_sample_spec *spec)
{
    const syn_index *ix = ((const syn_dataset *)dataset)->index;
    *spec = (sc_sample_spec){
        .n_inputs = 1,
        .n_targets = 1,
        .inputs = {{SC_F32, 1, {ix->features}}},
        .targets = {ix->task == TASK_CLASSIFICATION ? (sc_tensor_spec){SC_I64, 0, {0}}
                                                    : (sc_tensor_spec){SC_F32, 1, {ix->outputs}}},
        .classes = ix->task == TASK_CLASSIFICATION ? ix->classes : 0,
    };
}

/* x [features] = centre[label] + noise; target [] = label */
static void make_blob_sample(const syn_index *ix, sc_rng *rng, float *x, int64_t *label)
{
    *label = (int64_t)sc_rng_below(rng, (uint64_t)ix->classes);
    const float *centre = ix->table + *label * ix->features;
    for (int64_t f = 0; f < ix->features; f++)
        x[f] = centre[f] + ix->noise * sc_rng_normal(rng);
}

/* x [features] ~ N(0, 1); y [outputs] = W x + noise */
static void make_regression_sample(const syn_index *ix, sc_rng *rng, float *x, float *y)
{
    for (int64_t f = 0; f < ix->features; f++)
        x[f] = sc_rng_normal(rng);
    for (int64_t o = 0; o < ix->outputs; o++) {
        const float *w = ix->table + o * ix->features;
        float dot = 0.0f;
        for (int64_t f = 0; f < ix->features; f++)
            dot += w[f] * x[f];
        y[o] = dot + ix->noise * sc_rng_normal(rng);
    }
}

/* The loader's rng (an epoch-dependent augmentation stream) is not used:
 * the data must not change between epochs. */
static sc_status syn_dataset_getitem(void *dataset, int64_t i, sc_rng *rng,
                                     sc_tensor_list *inputs, sc_tensor_list *targets)
{
    const syn_dataset *ds = dataset;
    const syn_index *ix = ds->index;
    if (i < 0 || i >= ds->len)
        return sc_error_set(SC_ERR_INVALID, "synthetic: sample %lld outside 0..%lld",
                            (long long)i, (long long)ds->len - 1);
    sc_rng own;
    sc_rng_init(&own, ix->seed, sc_rng_mix((uint64_t)ds->split + 1, (uint64_t)i));
    float *x = sc_tensor_f32(inputs->t[0]);
    if (ix->task == TASK_CLASSIFICATION)
        make_blob_sample(ix, &own, x, (int64_t *)targets->t[0]->data);
    else
        make_regression_sample(ix, &own, x, sc_tensor_f32(targets->t[0]));
    if (ds->split == ix->nan_split && i == ix->nan_sample)
        x[0] = NAN;
    return SC_OK;
}

/* A row of features: the input [features]. */
static sc_status syn_index_decode(void *index, const sc_raw_input *raw, sc_tensor_list *inputs)
{
    const syn_index *ix = index;
    return sc_csv_read_row(raw, sc_tensor_f32(inputs->t[0]), ix->features);
}

SC_PLUGIN_EXPORT const sc_dataset_plugin scorch_dataset_plugin = {
    .abi = SC_ABI_HEADER(sc_dataset_plugin),
    .name = "synthetic",
    .description = "Gaussian blobs (classification) or a noisy linear map (regression), "
                   "generated from the dataset args; --dataset-path is ignored",
    .index_open = syn_index_open,
    .index_close = syn_index_close,
    .dataset_open = syn_dataset_open,
    .dataset_close = syn_dataset_close,
    .dataset_len = syn_dataset_len,
    .dataset_spec = syn_dataset_spec,
    .dataset_getitem = syn_dataset_getitem,
    .class_name = NULL,
    .index_decode = syn_index_decode,
};
