/* spirals — a dataset plugin: points on interleaved spiral arms in 2-D,
 * one arm per class, generated in code (no files: --dataset-path is not
 * read).
 *
 * Sample i of a split is drawn from its own random stream (seed, split, i),
 * so the data never changes between epochs or with the number of loader
 * threads. Dataset args: classes (3), turns (0.75: how far each arm winds),
 * noise (0.2: std of the angle jitter, in radians), train_size (3000),
 * valid_size (600), test_size (600), seed (1).
 * A sample: input f32 [2] (x, y in [-1, 1]), target i64 [] (its arm).
 * Raw inputs, for predictions: a CSV row "x,y".
 */
#include <math.h>
#include <stdlib.h>

#include <scorch/scorch.h>

static const double two_pi = 6.283185307179586;

/* A split is a view into the index; the index owns it. */
typedef struct spirals_split {
    const struct spirals_index *index;
    sc_split split;
    int64_t len;
} spirals_split;

/* The DataSetIndex: opened once, shared read-only by every split and by
 * the loader's threads. */
typedef struct spirals_index {
    int64_t classes;
    double turns, noise;
    uint64_t seed;
    spirals_split splits[SC_SPLIT_COUNT];
} spirals_index;

static sc_status read_args(const sc_args *args, spirals_index *ix)
{
    /* A key the plugin does not know is an error, never ignored. */
    static const char *const known[] = {"classes", "turns", "noise", "train_size",
                                        "valid_size", "test_size", "seed", NULL};
    static const char *const size_keys[SC_SPLIT_COUNT] = {"train_size", "valid_size",
                                                          "test_size"};
    static const int64_t size_defaults[SC_SPLIT_COUNT] = {3000, 600, 600};
    SC_TRY(sc_args_check_known(args, known));
    SC_TRY(sc_args_int(args, "classes", 3, &ix->classes));
    SC_TRY(sc_args_float(args, "turns", 0.75, &ix->turns));
    SC_TRY(sc_args_float(args, "noise", 0.2, &ix->noise));
    int64_t seed;
    SC_TRY(sc_args_int(args, "seed", 1, &seed));
    ix->seed = (uint64_t)seed;
    if (ix->classes < 2)
        return sc_error_set(SC_ERR_INVALID, "dataset arg 'classes': %lld is below 2",
                            (long long)ix->classes);
    for (int s = 0; s < SC_SPLIT_COUNT; s++) {
        SC_TRY(sc_args_int(args, size_keys[s], size_defaults[s], &ix->splits[s].len));
        if (ix->splits[s].len < 0)
            return sc_error_set(SC_ERR_INVALID, "dataset arg '%s' is negative", size_keys[s]);
    }
    return SC_OK;
}

static sc_status spirals_index_open(const char *path, const sc_args *args, void **index)
{
    *index = NULL;
    spirals_index *ix = calloc(1, sizeof *ix);
    if (!ix)
        return sc_error_set(SC_ERR_NOMEM, "spirals: out of memory");
    sc_status st = read_args(args, ix);
    if (st != SC_OK) {
        free(ix); /* args are only valid during this call: nothing kept */
        return st;
    }
    for (int s = 0; s < SC_SPLIT_COUNT; s++) {
        ix->splits[s].index = ix;
        ix->splits[s].split = (sc_split)s;
    }
    *index = ix;
    return SC_OK;
}

static void spirals_index_close(void *index)
{
    free(index);
}

static sc_status spirals_dataset_open(void *index, sc_split split, void **dataset)
{
    spirals_index *ix = index;
    if ((unsigned)split >= SC_SPLIT_COUNT)
        return sc_error_set(SC_ERR_INVALID, "spirals: no split %d", (int)split);
    *dataset = &ix->splits[split];
    return SC_OK;
}

static void spirals_dataset_close(void *dataset)
{
    (void)dataset; /* the index owns the splits */
}

static int64_t spirals_dataset_len(void *dataset)
{
    return ((const spirals_split *)dataset)->len;
}

static void spirals_dataset_spec(void *dataset, sc_sample_spec *spec)
{
    const spirals_index *ix = ((const spirals_split *)dataset)->index;
    *spec = (sc_sample_spec){
        .n_inputs = 1,
        .n_targets = 1,
        .inputs = {{SC_F32, 1, {2}}},   /* a point (x, y) */
        .targets = {{SC_I64, 0, {0}}},  /* a class index */
        .classes = ix->classes,         /* so the model needs no classes= */
    };
}

/* Called from several loader threads at once: reads the index, writes only
 * into the tensors it is given (already shaped by the spec). */
static sc_status spirals_dataset_getitem(void *dataset, int64_t i, sc_rng *rng,
                                         sc_tensor_list *inputs, sc_tensor_list *targets)
{
    const spirals_split *sp = dataset;
    const spirals_index *ix = sp->index;
    if (i < 0 || i >= sp->len)
        return sc_error_set(SC_ERR_INVALID, "spirals: sample %lld outside 0..%lld",
                            (long long)i, (long long)sp->len - 1);
    /* Not the host's `rng`, which changes with the epoch (it is meant for
     * augmentation): the sample's own stream keeps the data fixed. */
    sc_rng own;
    sc_rng_init(&own, ix->seed, sc_rng_mix((uint64_t)sp->split + 1, (uint64_t)i));
    int64_t arm = (int64_t)sc_rng_below(&own, (uint64_t)ix->classes);
    double r = sc_rng_uniform(&own); /* distance from the centre, 0..1 */
    double angle = two_pi * ((double)arm / (double)ix->classes + ix->turns * r) +
                   ix->noise * sc_rng_normal(&own);
    float *xy = sc_tensor_f32(inputs->t[0]); /* [2] */
    xy[0] = (float)(r * cos(angle));
    xy[1] = (float)(r * sin(angle));
    *(int64_t *)targets->t[0]->data = arm; /* [] */
    return SC_OK;
}

/* A raw input, for predictions: the point as a CSV row "x,y" (a file
 * holding that row, or the bytes of it). Any thread may call it, several
 * at once: it reads nothing shared. */
static sc_status spirals_index_decode(void *index, const sc_raw_input *raw,
                                      sc_tensor_list *inputs)
{
    return sc_csv_read_row(raw, sc_tensor_f32(inputs->t[0]), 2); /* [2] */
}

/* The one exported symbol. Unset optional fields (class_name) stay NULL. */
SC_PLUGIN_EXPORT const sc_dataset_plugin scorch_dataset_plugin = {
    .abi = SC_ABI_HEADER(sc_dataset_plugin),
    .name = "spirals",
    .description = "points on interleaved spiral arms, one arm per class",
    .index_open = spirals_index_open,
    .index_close = spirals_index_close,
    .dataset_open = spirals_dataset_open,
    .dataset_close = spirals_dataset_close,
    .dataset_len = spirals_dataset_len,
    .dataset_spec = spirals_dataset_spec,
    .dataset_getitem = spirals_dataset_getitem,
    .index_decode = spirals_index_decode,
};
