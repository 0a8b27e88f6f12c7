/* The shipped plugins (fashion_mnist, synthetic, mlp), loaded as the host
 * loads them: dlopen(RTLD_NOW | RTLD_LOCAL) of <build>/plugins/<name>.so,
 * then the well-known symbol. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scorch/scorch.h"
#include "scorch_host/context.h"
#include "scorch_host/params.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"
#define TEST_LABELS "t10k-labels-idx1-ubyte.gz"

static const float fashion_mean = 0.2860f, fashion_std = 0.3530f;

/* ---- loading plugins and running datasets ---- */

static const void *plugin_symbol(const char *plugin, const char *symbol)
{
    const char *root = getenv("SCORCH_BUILD_ROOT");
    cr_assert_not_null(root, "SCORCH_BUILD_ROOT is not set");
    char path[4096];
    snprintf(path, sizeof path, "%s/plugins/%s.so", root, plugin);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* left open: one process per test */
    cr_assert_not_null(lib, "dlopen %s: %s", path, dlerror());
    const void *sym = dlsym(lib, symbol);
    cr_assert_not_null(sym, "%s exports no %s", path, symbol);
    return sym;
}

static const sc_dataset_plugin *dataset_plugin(const char *name)
{
    return plugin_symbol(name, "scorch_dataset_plugin");
}

static const sc_model_plugin *model_plugin(void)
{
    return plugin_symbol("mlp", "scorch_model_plugin");
}

/* Opens an index; on failure the message is in sc_error_message(). */
static sc_status open_index(const sc_dataset_plugin *p, const char *path, const char *text,
                            void **index)
{
    sc_args *args;
    cr_assert_eq(sc_args_parse(text, "dataset arg", &args), SC_OK, "%s", sc_error_message());
    sc_status st = p->index_open(path, args, index);
    sc_args_free(args);
    return st;
}

static void *must_open_index(const sc_dataset_plugin *p, const char *path, const char *text)
{
    void *index = NULL;
    cr_assert_eq(open_index(p, path, text, &index), SC_OK, "%s: %s", path, sc_error_message());
    return index;
}

static void *must_open_split(const sc_dataset_plugin *p, void *index, sc_split split)
{
    void *ds = NULL;
    cr_assert_eq(p->dataset_open(index, split, &ds), SC_OK, "%s", sc_error_message());
    return ds;
}

/* One sample's tensors, shaped by a dataset's spec. */
typedef struct sample {
    sc_sample_spec spec;
    sc_tensor_list inputs, targets;
} sample;

static sample sample_new(const sc_dataset_plugin *p, void *ds)
{
    sample s = {0};
    p->dataset_spec(ds, &s.spec);
    s.inputs.n = s.spec.n_inputs;
    s.targets.n = s.spec.n_targets;
    for (int k = 0; k < s.spec.n_inputs; k++)
        s.inputs.t[k] = sc_tensor_alloc(s.spec.inputs[k].dtype, s.spec.inputs[k].ndim,
                                        s.spec.inputs[k].shape);
    for (int k = 0; k < s.spec.n_targets; k++)
        s.targets.t[k] = sc_tensor_alloc(s.spec.targets[k].dtype, s.spec.targets[k].ndim,
                                         s.spec.targets[k].shape);
    return s;
}

static void sample_free(sample *s)
{
    for (int k = 0; k < s->inputs.n; k++)
        sc_tensor_free(s->inputs.t[k]);
    for (int k = 0; k < s->targets.n; k++)
        sc_tensor_free(s->targets.t[k]);
}

static void sample_get(const sc_dataset_plugin *p, void *ds, int64_t i, sample *s)
{
    sc_rng rng;
    sc_rng_init(&rng, 1, (uint64_t)i);
    cr_assert_eq(p->dataset_getitem(ds, i, &rng, &s->inputs, &s->targets), SC_OK,
                 "getitem %lld: %s", (long long)i, sc_error_message());
}

static void assert_message_has(const char *needle)
{
    cr_assert(strstr(sc_error_message(), needle), "message '%s' lacks '%s'",
              sc_error_message(), needle);
}

/* ---- fashion_mnist on the real files ---- */

Test(fashion_mnist, default_splits_and_spec)
{
    const sc_dataset_plugin *p = dataset_plugin("fashion_mnist");
    void *index = must_open_index(p, FASHION_DIR, "");
    static const int64_t lengths[SC_SPLIT_COUNT] = {50000, 10000, 10000};
    for (int s = 0; s < SC_SPLIT_COUNT; s++)
        cr_expect_eq(p->dataset_len(must_open_split(p, index, (sc_split)s)), lengths[s],
                     "split %s", sc_split_name((sc_split)s));
    sc_sample_spec spec;
    p->dataset_spec(must_open_split(p, index, SC_SPLIT_TRAIN), &spec);
    cr_expect_eq(spec.n_inputs, 1);
    cr_expect_eq(spec.inputs[0].dtype, SC_F32);
    cr_expect_eq(spec.inputs[0].ndim, 3);
    cr_expect_arr_eq(spec.inputs[0].shape, ((int64_t[]){1, 28, 28}), 3 * sizeof(int64_t));
    cr_expect_eq(spec.n_targets, 1);
    cr_expect_eq(spec.targets[0].dtype, SC_I64);
    cr_expect_eq(spec.targets[0].ndim, 0);
    p->index_close(index);
}

Test(fashion_mnist, first_test_sample_is_a_normalized_ankle_boot)
{
    const sc_dataset_plugin *p = dataset_plugin("fashion_mnist");
    void *index = must_open_index(p, FASHION_DIR, "");
    void *test = must_open_split(p, index, SC_SPLIT_TEST);
    sample s = sample_new(p, test);
    sample_get(p, test, 0, &s);
    int64_t label = sc_tensor_get_int(s.targets.t[0], 0);
    cr_expect_eq(label, 9);
    cr_expect_str_eq(p->class_name(index, label), "Ankle boot");
    cr_expect_str_eq(p->class_name(index, 0), "T-shirt/top");
    cr_expect_null(p->class_name(index, 10));
    float lo = (0.0f - fashion_mean) / fashion_std, hi = (1.0f - fashion_mean) / fashion_std;
    const float *x = sc_tensor_f32(s.inputs.t[0]);
    float min = INFINITY, max = -INFINITY;
    for (int k = 0; k < 28 * 28; k++) {
        min = fminf(min, x[k]);
        max = fmaxf(max, x[k]);
    }
    cr_expect_float_eq(min, lo, 1e-5, "the background is black");
    cr_expect_leq(max, hi + 1e-5f);
    cr_expect_gt(max, 0.0f, "the boot is brighter than the mean");
    sample_free(&s);
    p->index_close(index);
}

Test(fashion_mnist, valid_is_the_tail_of_the_training_file)
{
    const sc_dataset_plugin *p = dataset_plugin("fashion_mnist");
    void *split = must_open_index(p, FASHION_DIR, "");
    void *whole = must_open_index(p, FASHION_DIR, "valid_size=0,normalize=false");
    void *train = must_open_split(p, whole, SC_SPLIT_TRAIN);
    void *valid = must_open_split(p, split, SC_SPLIT_VALID);
    cr_assert_eq(p->dataset_len(train), 60000);
    cr_assert_eq(p->dataset_len(must_open_split(p, whole, SC_SPLIT_VALID)), 0);
    sample raw = sample_new(p, train), norm = sample_new(p, valid);
    for (int64_t i = 0; i < 10000; i += 2500) {
        sample_get(p, train, 50000 + i, &raw);
        sample_get(p, valid, i, &norm);
        cr_expect_eq(sc_tensor_get_int(raw.targets.t[0], 0),
                     sc_tensor_get_int(norm.targets.t[0], 0), "valid %lld", (long long)i);
        const float *a = sc_tensor_f32(raw.inputs.t[0]), *b = sc_tensor_f32(norm.inputs.t[0]);
        for (int k = 0; k < 28 * 28; k++) {
            cr_assert(a[k] >= 0.0f && a[k] <= 1.0f, "raw pixel %g", a[k]);
            cr_assert_float_eq(b[k], (a[k] - fashion_mean) / fashion_std, 1e-5);
        }
    }
    sample_free(&raw);
    sample_free(&norm);
    p->index_close(split);
    p->index_close(whole);
}

Test(fashion_mnist, refuses_bad_dataset_args)
{
    const sc_dataset_plugin *p = dataset_plugin("fashion_mnist");
    void *index = NULL;
    cr_expect_eq(open_index(p, FASHION_DIR, "valid_sise=5", &index), SC_ERR_INVALID);
    assert_message_has("valid_sise");
    cr_expect_eq(open_index(p, FASHION_DIR, "normalize=maybe", &index), SC_ERR_INVALID);
    assert_message_has("normalize");
    cr_expect_eq(open_index(p, FASHION_DIR, "valid_size=60000", &index), SC_ERR_INVALID);
    assert_message_has("leaves no training images");
    cr_expect_null(index);
}

/* ---- fashion_mnist refusals, on a copy of the folder ---- */

static const char *const fashion_files[] = {
    "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz", TEST_LABELS,
};
static char fixture[64];

/* A temporary folder linking to the real files, but for `replaced`, which
 * the test writes (or leaves missing). */
static void make_fixture(const char *replaced)
{
    strcpy(fixture, "/tmp/scorch-fashion-XXXXXX");
    cr_assert_not_null(mkdtemp(fixture));
    for (size_t k = 0; k < 4; k++) {
        if (strcmp(fashion_files[k], replaced) == 0)
            continue;
        char from[256], to[256];
        snprintf(from, sizeof from, "%s/%s", FASHION_DIR, fashion_files[k]);
        snprintf(to, sizeof to, "%s/%s", fixture, fashion_files[k]);
        cr_assert_eq(symlink(from, to), 0, "symlink %s", to);
    }
}

static void remove_fixture(void)
{
    for (size_t k = 0; k < 4 && fixture[0]; k++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", fixture, fashion_files[k]);
        unlink(path);
    }
    rmdir(fixture);
}

/* Writes `bytes` gzip-compressed to the fixture's test-labels file. */
static void write_test_labels_gz(const void *bytes, size_t n)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "gzip -c > %s/%s", fixture, TEST_LABELS);
    FILE *gz = popen(cmd, "w");
    cr_assert_not_null(gz);
    cr_assert_eq(fwrite(bytes, 1, n, gz), n);
    cr_assert_eq(pclose(gz), 0, "%s failed", cmd);
}

/* An IDX labels file: magic, count, then `present` zero labels. */
static void write_labels(uint32_t magic, uint32_t count, uint32_t present)
{
    uint8_t *file = calloc(1, 8 + present);
    for (int b = 0; b < 4; b++) {
        file[b] = (uint8_t)(magic >> (24 - 8 * b));
        file[4 + b] = (uint8_t)(count >> (24 - 8 * b));
    }
    write_test_labels_gz(file, 8 + present);
    free(file);
}

static void assert_refused(sc_status expected)
{
    const sc_dataset_plugin *p = dataset_plugin("fashion_mnist");
    void *index = NULL;
    cr_assert_eq(open_index(p, fixture, "", &index), expected, "status for: %s",
                 sc_error_message());
    cr_assert_null(index);
    assert_message_has(fixture);
    assert_message_has(TEST_LABELS);
}

TestSuite(fashion_refusals, .fini = remove_fixture);

Test(fashion_refusals, missing_folder)
{
    const sc_dataset_plugin *p = dataset_plugin("fashion_mnist");
    void *index = NULL;
    cr_expect_eq(open_index(p, "/nonexistent/fashion", "", &index), SC_ERR_IO);
    assert_message_has("/nonexistent/fashion");
    assert_message_has("No such file");
}

Test(fashion_refusals, missing_file)
{
    make_fixture(TEST_LABELS);
    assert_refused(SC_ERR_IO);
    assert_message_has("cannot open");
}

Test(fashion_refusals, truncated_data)
{
    make_fixture(TEST_LABELS);
    write_labels(2049, 10000, 100);
    assert_refused(SC_ERR_FORMAT);
    assert_message_has("truncated: expected 10008 bytes, got 108");
}

Test(fashion_refusals, cut_gzip_stream)
{
    make_fixture(TEST_LABELS);
    FILE *real = fopen(FASHION_DIR "/" TEST_LABELS, "rb");
    cr_assert_not_null(real);
    char head[2000], path[256];
    cr_assert_eq(fread(head, 1, sizeof head, real), sizeof head);
    fclose(real);
    snprintf(path, sizeof path, "%s/%s", fixture, TEST_LABELS);
    FILE *cut = fopen(path, "wb");
    cr_assert_not_null(cut);
    cr_assert_eq(fwrite(head, 1, sizeof head, cut), sizeof head);
    fclose(cut);
    assert_refused(SC_ERR_FORMAT);
    assert_message_has("truncated: expected 10008 bytes, got");
}

Test(fashion_refusals, bad_magic)
{
    make_fixture(TEST_LABELS);
    write_labels(2051, 10000, 10000);
    assert_refused(SC_ERR_FORMAT);
    assert_message_has("bad magic 2051, expected 2049");
}

Test(fashion_refusals, fewer_labels_than_images)
{
    make_fixture(TEST_LABELS);
    write_labels(2049, 9999, 9999);
    assert_refused(SC_ERR_FORMAT);
    assert_message_has("has 9999 labels but");
}

/* ---- synthetic ---- */

Test(synthetic, default_lengths_and_spec)
{
    const sc_dataset_plugin *p = dataset_plugin("synthetic");
    void *index = must_open_index(p, "ignored", "");
    static const int64_t lengths[SC_SPLIT_COUNT] = {2048, 512, 512};
    for (int s = 0; s < SC_SPLIT_COUNT; s++)
        cr_expect_eq(p->dataset_len(must_open_split(p, index, (sc_split)s)), lengths[s]);
    sc_sample_spec spec;
    p->dataset_spec(must_open_split(p, index, SC_SPLIT_TRAIN), &spec);
    cr_expect_eq(spec.inputs[0].dtype, SC_F32);
    cr_expect_eq(spec.inputs[0].ndim, 1);
    cr_expect_eq(spec.inputs[0].shape[0], 16);
    cr_expect_eq(spec.targets[0].dtype, SC_I64);
    cr_expect_eq(spec.targets[0].ndim, 0);
    p->index_close(index);
}

/* Samples 0..19 of every split, bytes of inputs then targets. */
static void fingerprint(const char *args, uint8_t *out, size_t size)
{
    const sc_dataset_plugin *p = dataset_plugin("synthetic");
    void *index = must_open_index(p, NULL, args);
    size_t used = 0;
    for (int s = 0; s < SC_SPLIT_COUNT; s++) {
        void *ds = must_open_split(p, index, (sc_split)s);
        sample x = sample_new(p, ds);
        for (int64_t i = 0; i < 20; i++) {
            sample_get(p, ds, i, &x);
            size_t a = sc_tensor_nbytes(x.inputs.t[0]), b = sc_tensor_nbytes(x.targets.t[0]);
            cr_assert_leq(used + a + b, size);
            memcpy(out + used, x.inputs.t[0]->data, a);
            memcpy(out + used + a, x.targets.t[0]->data, b);
            used += a + b;
        }
        sample_free(&x);
    }
    p->index_close(index);
}

Test(synthetic, data_is_a_function_of_the_args)
{
    enum { BYTES = 3 * 20 * (8 * 4 + 3 * 4) };
    static uint8_t a[BYTES], b[BYTES], c[BYTES];
    fingerprint("task=regression,features=8,outputs=3,seed=7", a, BYTES);
    fingerprint("task=regression,features=8,outputs=3,seed=7,train_size=99", b, BYTES);
    fingerprint("task=regression,features=8,outputs=3,seed=8", c, BYTES);
    cr_expect_arr_eq(a, b, BYTES, "same seed, same samples (whatever the split sizes)");
    cr_expect_arr_neq(a, c, BYTES, "another seed, other samples");
}

Test(synthetic, blobs_are_separable_by_class_means)
{
    const sc_dataset_plugin *p = dataset_plugin("synthetic");
    void *index = must_open_index(p, NULL, "");
    void *train = must_open_split(p, index, SC_SPLIT_TRAIN);
    void *valid = must_open_split(p, index, SC_SPLIT_VALID);
    sample s = sample_new(p, train);
    double mean[4][16] = {{0}}, count[4] = {0};
    for (int64_t i = 0; i < p->dataset_len(train); i++) {
        sample_get(p, train, i, &s);
        int64_t y = sc_tensor_get_int(s.targets.t[0], 0);
        cr_assert(y >= 0 && y < 4);
        count[y]++;
        for (int f = 0; f < 16; f++)
            mean[y][f] += sc_tensor_f32(s.inputs.t[0])[f];
    }
    int64_t correct = 0;
    for (int64_t i = 0; i < p->dataset_len(valid); i++) {
        sample_get(p, valid, i, &s);
        int best = 0;
        double best_d = INFINITY;
        for (int c = 0; c < 4; c++) {
            double d = 0;
            for (int f = 0; f < 16; f++)
                d += pow(sc_tensor_f32(s.inputs.t[0])[f] - mean[c][f] / count[c], 2);
            if (d < best_d) {
                best_d = d;
                best = c;
            }
        }
        correct += best == sc_tensor_get_int(s.targets.t[0], 0);
    }
    cr_expect_gt(correct, 0.9 * 512, "nearest class mean: %lld of 512", (long long)correct);
    sample_free(&s);
    p->index_close(index);
}

Test(synthetic, regression_spec_and_refusals)
{
    const sc_dataset_plugin *p = dataset_plugin("synthetic");
    void *index = must_open_index(p, NULL, "task=regression,outputs=3,features=5");
    sc_sample_spec spec;
    p->dataset_spec(must_open_split(p, index, SC_SPLIT_TEST), &spec);
    cr_expect_eq(spec.inputs[0].shape[0], 5);
    cr_expect_eq(spec.targets[0].dtype, SC_F32);
    cr_expect_eq(spec.targets[0].ndim, 1);
    cr_expect_eq(spec.targets[0].shape[0], 3);
    p->index_close(index);
    index = NULL;
    cr_expect_eq(open_index(p, NULL, "task=regression,classes=3", &index), SC_ERR_INVALID);
    assert_message_has("'classes'");
    cr_expect_eq(open_index(p, NULL, "task=ranking", &index), SC_ERR_INVALID);
    assert_message_has("ranking");
    cr_expect_eq(open_index(p, NULL, "featurs=3", &index), SC_ERR_INVALID);
    assert_message_has("featurs");
    cr_expect_null(index);
}

/* ---- mlp ---- */

static const sc_sample_spec fashion_spec = {
    .n_inputs = 1,
    .n_targets = 1,
    .inputs = {{SC_F32, 3, {1, 28, 28}}},
    .targets = {{SC_I64, 0, {0}}},
};

/* A network with its parameter store. */
typedef struct model {
    const sc_model_plugin *api;
    sc_params *params;
    void *net;
} model;

static sc_status model_create(const char *text, const sc_sample_spec *spec, model *m)
{
    m->api = model_plugin();
    m->params = sc_params_new();
    m->net = NULL;
    sc_args *args;
    cr_assert_eq(sc_args_parse(text, "model arg", &args), SC_OK, "%s", sc_error_message());
    sc_rng rng;
    sc_rng_init(&rng, 42, 0);
    sc_status st = m->api->network_create(args, spec, m->params, &rng, &m->net);
    sc_args_free(args);
    return st;
}

static model must_create(const char *text, const sc_sample_spec *spec)
{
    model m;
    cr_assert_eq(model_create(text, spec, &m), SC_OK, "%s: %s", text, sc_error_message());
    return m;
}

static void model_free(model *m)
{
    m->api->network_destroy(m->net);
    sc_params_free(m->params);
}

Test(mlp, default_parameters_for_fashion_mnist)
{
    model m = must_create("", &fashion_spec);
    static const struct {
        const char *name;
        int ndim;
        int64_t shape[2];
    } want[] = {
        {"fc1.weight", 2, {256, 784}}, {"fc1.bias", 1, {256}},
        {"fc2.weight", 2, {128, 256}}, {"fc2.bias", 1, {128}},
        {"fc3.weight", 2, {10, 128}},  {"fc3.bias", 1, {10}},
    };
    cr_assert_eq(sc_params_count(m.params), 6);
    for (int i = 0; i < 6; i++) {
        const sc_tensor *t = sc_params_at(m.params, i);
        cr_expect_str_eq(t->name, want[i].name);
        cr_expect_eq(t->ndim, want[i].ndim, "%s", want[i].name);
        cr_expect_arr_eq(t->shape, want[i].shape, (size_t)want[i].ndim * sizeof(int64_t),
                         "%s", want[i].name);
    }
    sc_metric_mode mode = SC_METRIC_MIN;
    cr_expect_str_eq(m.api->socket_main_metric(m.net, &mode), "accuracy");
    cr_expect_eq(mode, SC_METRIC_MAX);
    model_free(&m);
}

Test(mlp, bad_model_args_are_errors)
{
    static const struct {
        const char *args, *needle;
    } bad[] = {
        {"hiden=64", "hiden"},
        {"hidden=64:0", "'hidden'"},
        {"hidden=64:x", "'hidden'"},
        {"activation=swish", "swish"},
        {"dropout=1", "'dropout'"},
        {"label_smoothing=-0.1", "'label_smoothing'"},
        {"classes=1", "'classes'"},
        {"task=ranking", "ranking"},
        {"task=regression,classes=3", "'classes'"},
        {"task=regression", "f32 target"}, /* the spec's target is a class index */
        {"freeze=fc9", "'fc9'"},
        {"freeze=fc1::fc2", "empty"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        model m;
        cr_expect_eq(model_create(bad[k].args, &fashion_spec, &m), SC_ERR_INVALID, "%s",
                     bad[k].args);
        cr_expect_null(m.net, "%s", bad[k].args);
        cr_expect(strstr(sc_error_message(), bad[k].needle), "%s: message '%s' lacks '%s'",
                  bad[k].args, sc_error_message(), bad[k].needle);
        sc_params_free(m.params);
    }
}

Test(mlp, freeze_stops_parameters_by_name_prefix)
{
    model m = must_create("hidden=8:8,freeze=fc1:fc3.bias", &fashion_spec);
    bool (*trains)(void *, const char *) = m.api->socket_param_trains;
    cr_expect_not(trains(m.net, "fc1.weight"));
    cr_expect_not(trains(m.net, "fc1.bias"));
    cr_expect(trains(m.net, "fc2.weight"));
    cr_expect(trains(m.net, "fc3.weight"));
    cr_expect_not(trains(m.net, "fc3.bias"));
    cr_expect(trains(m.net, "fc10.weight"), "a prefix ends at a dot");
    model_free(&m);
    m = must_create("", &fashion_spec);
    cr_expect(trains(m.net, "fc1.weight"), "nothing is frozen by default");
    model_free(&m);
}

/* A CPU context in training mode. */
static sc_ctx *cpu_ctx(void)
{
    sc_ctx *ctx = sc_ctx_new((sc_device){SC_DEVICE_CPU, 0});
    cr_assert_not_null(ctx, "%s", sc_error_message());
    return ctx;
}

static sc_tensor *forward(model *m, sc_ctx *ctx, sc_tensor *x)
{
    sc_tensor_list in = {1, {x}}, out = {0};
    cr_assert_eq(m->api->network_forward(m->net, ctx, &in, &out), SC_OK, "%s",
                 sc_error_message());
    cr_assert_eq(out.n, 1);
    return out.t[0];
}

static void fill_normal(sc_tensor *t, uint64_t seed)
{
    sc_rng rng;
    sc_rng_init(&rng, seed, 0);
    sc_init_normal(t, 0.0f, 1.0f, &rng);
}

Test(mlp, classifier_forward_loss_and_metrics)
{
    model m = must_create("dropout=0.2,label_smoothing=0.1,activation=gelu", &fashion_spec);
    sc_ctx *ctx = cpu_ctx();
    sc_tensor *x = sc_tensor_alloc(SC_F32, 4, (int64_t[]){5, 1, 28, 28});
    sc_tensor *y = sc_tensor_alloc(SC_I64, 1, (int64_t[]){5});
    fill_normal(x, 3);
    for (int i = 0; i < 5; i++)
        ((int64_t *)y->data)[i] = 2 * i;
    sc_tensor *logits = forward(&m, ctx, x);
    cr_expect_eq(logits->ndim, 2);
    cr_expect_eq(logits->shape[0], 5);
    cr_expect_eq(logits->shape[1], 10);
    sc_tensor_list outs = {1, {logits}}, targets = {1, {y}};
    sc_tensor *loss = NULL;
    cr_assert_eq(m.api->socket_criterion(m.net, ctx, &outs, &targets, &loss), SC_OK, "%s",
                 sc_error_message());
    cr_expect_eq(loss->ndim, 0);
    cr_expect(isfinite(sc_tensor_f32(loss)[0]) && sc_tensor_f32(loss)[0] > 0.0f);
    sc_metrics *metrics = sc_metrics_new();
    cr_assert_eq(m.api->socket_metrics(m.net, &outs, &targets, metrics), SC_OK, "%s",
                 sc_error_message());
    int acc = sc_metrics_find(metrics, "accuracy");
    int top5 = sc_metrics_find(metrics, "top5_accuracy");
    cr_assert(acc >= 0 && top5 >= 0);
    cr_expect_float_eq(sc_metrics_denominator(metrics, acc), 5.0, 1e-12);
    cr_expect_float_eq(sc_metrics_denominator(metrics, top5), 5.0, 1e-12);
    sc_metrics_free(metrics);
    sc_tensor_free(x);
    sc_tensor_free(y);
    sc_ctx_free(ctx);
    model_free(&m);
}

Test(mlp, regression_outputs_take_the_target_shape)
{
    static const sc_sample_spec spec = {
        .n_inputs = 1,
        .n_targets = 1,
        .inputs = {{SC_F32, 1, {5}}},
        .targets = {{SC_F32, 1, {3}}},
    };
    model m = must_create("task=regression,hidden=8,activation=tanh", &spec);
    cr_expect_eq(sc_params_find(m.params, "fc2.weight")->shape[0], 3);
    sc_ctx *ctx = cpu_ctx();
    sc_tensor *x = sc_tensor_alloc(SC_F32, 2, (int64_t[]){4, 5});
    sc_tensor *y = sc_tensor_alloc(SC_F32, 2, (int64_t[]){4, 3});
    fill_normal(x, 5);
    sc_tensor *pred = forward(&m, ctx, x);
    cr_expect_eq(pred->ndim, 2);
    cr_expect_eq(pred->shape[0], 4);
    cr_expect_eq(pred->shape[1], 3);
    sc_tensor_list outs = {1, {pred}}, targets = {1, {y}};
    sc_tensor *loss = NULL;
    cr_assert_eq(m.api->socket_criterion(m.net, ctx, &outs, &targets, &loss), SC_OK, "%s",
                 sc_error_message());
    double sse = 0;
    for (int k = 0; k < 12; k++)
        sse += pow(sc_tensor_f32(pred)[k], 2); /* targets are zero */
    cr_expect_float_eq(sc_tensor_f32(loss)[0], sse / 12, 1e-5);
    sc_metrics *metrics = sc_metrics_new();
    cr_assert_eq(m.api->socket_metrics(m.net, &outs, &targets, metrics), SC_OK, "%s",
                 sc_error_message());
    int mse = sc_metrics_find(metrics, "mse");
    cr_assert_geq(mse, 0);
    cr_expect_float_eq(sc_metrics_numerator(metrics, mse), sse, 1e-4);
    cr_expect_float_eq(sc_metrics_denominator(metrics, mse), 12.0, 1e-12);
    sc_metrics_free(metrics);
    sc_tensor_free(x);
    sc_tensor_free(y);
    sc_ctx_free(ctx);
    model_free(&m);
}

/* A batch of samples first..first+n-1 of a synthetic classification split,
 * written by getitem through row views, as the host's loader does. */
static void load_batch(const sc_dataset_plugin *p, void *ds, int64_t first, int64_t n,
                       sc_tensor *x, sc_tensor *y)
{
    for (int64_t j = 0; j < n; j++) {
        sc_tensor row, label;
        sc_tensor_init(&row, SC_F32, 1, &x->shape[1]);
        sc_tensor_init(&label, SC_I64, 0, NULL);
        row.data = sc_tensor_f32(x) + j * x->shape[1];
        label.data = (int64_t *)y->data + j;
        sc_tensor_list in = {1, {&row}}, tg = {1, {&label}};
        sc_rng rng;
        sc_rng_init(&rng, 0, (uint64_t)j);
        cr_assert_eq(p->dataset_getitem(ds, first + j, &rng, &in, &tg), SC_OK);
    }
}

/* Full-batch evaluation of the valid split: the accuracy. */
static double valid_accuracy(model *m, sc_ctx *ctx, const sc_dataset_plugin *p, void *valid)
{
    int64_t n = p->dataset_len(valid);
    sc_tensor *x = sc_tensor_alloc(SC_F32, 2, (int64_t[]){n, 16});
    sc_tensor *y = sc_tensor_alloc(SC_I64, 1, (int64_t[]){n});
    load_batch(p, valid, 0, n, x, y);
    sc_ctx_set_training(ctx, false);
    bool grad = sc_ctx_set_grad_enabled(ctx, false);
    double acc = (double)sc_correct_top1(forward(m, ctx, x), y) / (double)n;
    sc_ctx_set_grad_enabled(ctx, grad);
    sc_ctx_set_training(ctx, true);
    sc_ctx_reset(ctx);
    sc_tensor_free(x);
    sc_tensor_free(y);
    return acc;
}

Test(mlp, learns_the_synthetic_blobs_with_plain_sgd)
{
    enum { BATCH = 64, EPOCHS = 3 };
    const sc_dataset_plugin *p = dataset_plugin("synthetic");
    void *index = must_open_index(p, NULL, "");
    void *train = must_open_split(p, index, SC_SPLIT_TRAIN);
    sc_sample_spec spec;
    p->dataset_spec(train, &spec);
    model m = must_create("hidden=32,classes=4", &spec);
    sc_ctx *ctx = cpu_ctx();
    sc_tensor *x = sc_tensor_alloc(SC_F32, 2, (int64_t[]){BATCH, 16});
    sc_tensor *y = sc_tensor_alloc(SC_I64, 1, (int64_t[]){BATCH});
    sc_tensor_list targets = {1, {y}};
    double before = valid_accuracy(&m, ctx, p, must_open_split(p, index, SC_SPLIT_VALID));
    for (int64_t step = 0; step < EPOCHS * 2048 / BATCH; step++) {
        load_batch(p, train, step * BATCH % 2048, BATCH, x, y);
        sc_tensor_list outs = {1, {forward(&m, ctx, x)}};
        sc_tensor *loss = NULL;
        cr_assert_eq(m.api->socket_criterion(m.net, ctx, &outs, &targets, &loss), SC_OK);
        cr_assert_eq(sc_backward(ctx, loss, NULL, NULL), SC_OK, "%s", sc_error_message());
        float *w = sc_params_values(m.params), *g = sc_params_grads(m.params);
        for (int64_t k = 0; k < sc_params_numel(m.params); k++)
            w[k] -= 0.1f * g[k];
        sc_params_zero_grad(m.params);
        sc_ctx_reset(ctx);
    }
    double after = valid_accuracy(&m, ctx, p, must_open_split(p, index, SC_SPLIT_VALID));
    cr_expect_gt(after, 0.9, "valid accuracy %.3f after %d epochs (%.3f before)", after,
                 EPOCHS, before);
    sc_tensor_free(x);
    sc_tensor_free(y);
    sc_ctx_free(ctx);
    model_free(&m);
    p->index_close(index);
}
