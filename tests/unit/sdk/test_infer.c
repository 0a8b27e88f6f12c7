/* The C inference API (scorch/infer.h) on checkpoints written here with
 * the SDK: the network it runs computes what the network made directly
 * from the same weights does, bit for bit (EMA weights too); it decodes a
 * PNG of a Fashion-MNIST test image into getitem's input; four threads
 * running and decoding at once get the serial results; and a bad
 * checkpoint, a missing or broken plugin, weights of another shape or
 * model, and --ema without an EMA are refused with one message naming the
 * file, as the host refuses them (the ABI checks are libscorch's). On a
 * GPU (suite infer_gpu), a handle computes what the CPU's does and holds
 * the weights and one batch's arena, no gradients. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../../plugins/fashion_mnist/idx.h"
#include "png_writer.h"
#include "scorch/infer.h"
#include "scorch/scorch.h"
#include "scorch_host/context.h"
#include "scorch_host/plugin.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

enum { PATH_MAX_LEN = 4096, THREADS = 2, SAMPLES = 12, SIDE = 28, PIXELS = SIDE * SIDE };

static const char *built(const char *folder, const char *name)
{
    static char path[2][PATH_MAX_LEN];
    static int turn;
    char *p = path[turn ^= 1];
    snprintf(p, PATH_MAX_LEN, "%s/%s/%s.so", getenv("SCORCH_BUILD_ROOT"), folder, name);
    return p;
}

static const char *plugin(const char *name) { return built("plugins", name); }
static const char *fixture(const char *name) { return built("tests/fixtures", name); }

static const void *plugin_symbol(const char *path, const char *symbol)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* left open: one process per test */
    cr_assert_not_null(lib, "dlopen %s: %s", path, dlerror());
    const void *sym = dlsym(lib, symbol);
    cr_assert_not_null(sym, "%s exports no %s", path, symbol);
    return sym;
}

static void assert_message_has(const char *part)
{
    cr_assert(strstr(sc_error_message(), part), "message '%s' lacks '%s'", sc_error_message(),
              part);
}

/* ---- a network made here, as a run makes it ---- */

/* What a checkpoint is made from: the plugins, their args, the dataset. */
typedef struct recipe {
    const char *model, *model_args, *dataset, *dataset_args, *dataset_path;
} recipe;

static const recipe synthetic_mlp = {"mlp", "hidden=16", "synthetic",
                                     "features=8,classes=4,train_size=64,test_size=64", ""};
static const recipe fashion_cnn = {"cnn", "channels=4:8,hidden=16", "fashion_mnist", "",
                                   FASHION_DIR};

typedef struct made_net {
    const sc_model_plugin *model;
    const sc_dataset_plugin *data;
    void *index, *test;
    sc_sample_spec spec;
    sc_params *params;
    void *net;
    sc_ctx *ctx;
} made_net;

static void make_net(made_net *m, const recipe *r, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->model = plugin_symbol(plugin(r->model), "scorch_model_plugin");
    m->data = plugin_symbol(plugin(r->dataset), "scorch_dataset_plugin");
    sc_args *model_args, *dataset_args;
    cr_assert_eq(sc_args_parse(r->model_args, "model arg", &model_args), SC_OK);
    cr_assert_eq(sc_args_parse(r->dataset_args, "dataset arg", &dataset_args), SC_OK);
    sc_host_info host = {SC_ABI_HEADER(sc_host_info), "test", SC_DEVICE_CPU};
    const sc_host_info *outer = sc_host_set_info(&host);
    cr_assert_eq(m->data->index_open(r->dataset_path, dataset_args, &m->index), SC_OK, "%s",
                 sc_error_message());
    cr_assert_eq(m->data->dataset_open(m->index, SC_SPLIT_TEST, &m->test), SC_OK);
    m->data->dataset_spec(m->test, &m->spec);
    m->params = sc_params_new();
    sc_rng rng;
    sc_rng_init(&rng, seed, 3);
    cr_assert_eq(m->model->network_create(model_args, &m->spec, m->params, &rng, &m->net), SC_OK,
                 "%s", sc_error_message());
    sc_host_set_info(outer);
    sc_args_free(model_args);
    sc_args_free(dataset_args);
    m->ctx = sc_ctx_new((sc_device){SC_DEVICE_CPU, 0});
    sc_ctx_set_training(m->ctx, false);
    sc_ctx_set_grad_enabled(m->ctx, false);
}

static void free_net(made_net *m)
{
    sc_ctx_free(m->ctx);
    m->model->network_destroy(m->net);
    sc_params_free(m->params);
    m->data->dataset_close(m->test);
    m->data->index_close(m->index);
}

static int64_t input_numel(const made_net *m)
{
    int64_t n = 1;
    for (int d = 0; d < m->spec.inputs[0].ndim; d++)
        n *= m->spec.inputs[0].shape[d];
    return n;
}

/* Test samples 0..n-1 as getitem gives them: [n, ...input]. */
static float *test_inputs(const made_net *m, int64_t n)
{
    int64_t each = input_numel(m);
    float *x = malloc((size_t)(n * each) * sizeof *x);
    for (int64_t i = 0; i < n; i++) {
        sc_tensor in, target;
        int64_t label;
        sc_tensor_init(&in, SC_F32, m->spec.inputs[0].ndim, m->spec.inputs[0].shape);
        in.data = x + i * each;
        sc_tensor_init(&target, SC_I64, 0, NULL);
        target.data = &label;
        sc_tensor_list ins = {1, {&in}}, targets = {1, {&target}};
        sc_rng rng;
        sc_rng_init(&rng, 1, (uint64_t)i);
        cr_assert_eq(m->data->dataset_getitem(m->test, i, &rng, &ins, &targets), SC_OK);
    }
    return x;
}

/* The network's first output for n samples, computed here in eval mode
 * on THREADS threads: [n, classes] into out. */
static void direct_forward(made_net *m, int64_t n, const float *x, float *out, int64_t classes)
{
    int64_t shape[SC_MAX_DIMS] = {n};
    memcpy(shape + 1, m->spec.inputs[0].shape, (size_t)m->spec.inputs[0].ndim * sizeof *shape);
    sc_tensor in;
    sc_tensor_init(&in, SC_F32, m->spec.inputs[0].ndim + 1, shape);
    in.data = (void *)x;
    sc_tensor_list ins = {1, {&in}}, outs = {0};
    sc_cpu_set_threads(THREADS);
    cr_assert_eq(m->model->network_forward(m->net, m->ctx, &ins, &outs), SC_OK, "%s",
                 sc_error_message());
    cr_assert_eq(outs.t[0]->numel, n * classes);
    memcpy(out, outs.t[0]->data, (size_t)(n * classes) * sizeof *out);
    sc_ctx_reset(m->ctx);
}

/* ---- checkpoints written here ---- */

typedef struct tmp_dir {
    char path[64];
} tmp_dir;

static tmp_dir make_tmp(void)
{
    tmp_dir d;
    snprintf(d.path, sizeof d.path, "/tmp/scorch-infer-XXXXXX");
    cr_assert_not_null(mkdtemp(d.path));
    return d;
}

static void remove_tmp(const tmp_dir *d)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->path);
    cr_expect_eq(system(cmd), 0);
}

static const char *in_tmp(const tmp_dir *d, const char *name)
{
    static char path[2][PATH_MAX_LEN];
    static int turn;
    char *p = path[turn ^= 1];
    snprintf(p, PATH_MAX_LEN, "%s/%s", d->path, name);
    return p;
}

/* The resolved config as host/base/config.c writes it, with a [params]
 * section after [train] whose keys are not the run's. */
static char *config_text(const recipe *r, const char *model_path)
{
    char *text = malloc(2 * PATH_MAX_LEN + 1024);
    sprintf(text,
            "; scorch-train configuration, resolved from defaults, --config and the command "
            "line\n[train]\n\n; Plugins and data\nmodel = %s\nmodel-args =%s%s\n"
            "dataset = %s\ndataset-path =%s%s\ndataset-args =%s%s\nhooks =\nhooks-args =\n\n"
            "; Epochs and batches\nepochs = 1\n\n[params \"fc*\"]\nlr = 0.5\n",
            model_path, r->model_args[0] ? " " : "", r->model_args, plugin(r->dataset),
            r->dataset_path[0] ? " " : "", r->dataset_path, r->dataset_args[0] ? " " : "",
            r->dataset_args);
    return text;
}

/* What goes into a checkpoint besides the parameters. */
typedef struct ckpt_parts {
    const char *config;  /* NULL: the recipe's */
    const char *model;   /* the model entry; NULL: the plugin's name */
    float ema_scale;     /* 0: no ema/ entries; else each parameter times it */
    bool no_config;
    const char *skip;    /* a param/ entry left out */
    const char *reshape; /* a param/ entry written as [1] */
} ckpt_parts;

static void write_param(sc_ckpt_writer *w, const char *prefix, const sc_tensor *p, float scale,
                        bool reshape)
{
    char name[512];
    snprintf(name, sizeof name, "%s/%s", prefix, p->name);
    sc_tensor t = *p;
    float *copy = malloc((size_t)p->numel * sizeof *copy);
    for (int64_t k = 0; k < p->numel; k++)
        copy[k] = sc_tensor_f32(p)[k] * scale;
    if (reshape)
        sc_tensor_init(&t, SC_F32, 1, (const int64_t[]){1});
    t.data = copy;
    cr_assert_eq(sc_ckpt_write_tensor(w, name, &t), SC_OK, "%s", sc_error_message());
    free(copy);
}

static void write_ckpt(const char *path, const made_net *m, const recipe *r,
                       const ckpt_parts *parts)
{
    sc_ckpt_writer *w;
    cr_assert_eq(sc_ckpt_writer_open(path, &w), SC_OK, "%s", sc_error_message());
    for (int i = 0; i < sc_params_count(m->params); i++) {
        const sc_tensor *p = sc_params_at(m->params, i);
        if (parts->skip && strcmp(p->name, parts->skip) == 0)
            continue;
        write_param(w, "param", p, 1.0f, parts->reshape && strcmp(p->name, parts->reshape) == 0);
        if (parts->ema_scale != 0 && !(p->flags & SC_TENSOR_BUFFER))
            write_param(w, "ema", p, parts->ema_scale, false);
    }
    /* What inference must not read: an optimizer state and the trainer. */
    sc_tensor moments;
    sc_tensor_init(&moments, SC_F32, 1, (const int64_t[]){3});
    moments.data = (float[]){1, 2, 3};
    cr_assert_eq(sc_ckpt_write_tensor(w, "optim/exp_avg", &moments), SC_OK);
    cr_assert_eq(sc_ckpt_write_blob(w, "trainer", "epoch 2\n", 8), SC_OK);
    char *config = config_text(r, plugin(r->model));
    const char *text = parts->config ? parts->config : config;
    if (!parts->no_config)
        cr_assert_eq(sc_ckpt_write_blob(w, "config", text, strlen(text)), SC_OK);
    free(config);
    const char *model = parts->model ? parts->model : m->model->name;
    cr_assert_eq(sc_ckpt_write_blob(w, "model", model, strlen(model)), SC_OK);
    cr_assert_eq(sc_ckpt_writer_commit(w), SC_OK, "%s", sc_error_message());
}

static sc_infer *open_ok(const char *path, const sc_infer_options *o)
{
    sc_infer *h = NULL;
    cr_assert_eq(sc_infer_open(path, o, &h), SC_OK, "%s", sc_error_message());
    cr_assert_not_null(h);
    return h;
}

static const sc_infer_options two_threads = {.threads = THREADS};

/* ---- what it computes ---- */

/* The handle's outputs for n samples at x, equal bit for bit to the
 * direct forward's. */
static void expect_same_outputs(sc_infer *h, made_net *m, int64_t n, const float *x)
{
    int64_t classes = sc_infer_output_spec(h, 0)->shape[0];
    float *want = malloc((size_t)(n * classes) * sizeof *want);
    float *got = malloc((size_t)(n * classes) * sizeof *got);
    direct_forward(m, n, x, want, classes);
    cr_assert_eq(sc_infer_run(h, n, (const void *const[]){x}, (void *const[]){got}), SC_OK,
                 "%s", sc_error_message());
    cr_expect_arr_eq(got, want, (size_t)(n * classes) * sizeof *got);
    free(want);
    free(got);
}

Test(infer, runs_what_the_network_computes_from_the_checkpoints_weights)
{
    made_net m;
    make_net(&m, &synthetic_mlp, 7); /* not the seed sc_infer_open creates with */
    tmp_dir d = make_tmp();
    write_ckpt(in_tmp(&d, "a.ckpt"), &m, &synthetic_mlp, &(ckpt_parts){0});
    sc_infer *h = open_ok(in_tmp(&d, "a.ckpt"), &two_threads);

    const sc_sample_spec *spec = sc_infer_input_spec(h);
    cr_expect_eq(spec->n_inputs, 1);
    cr_expect_eq(spec->inputs[0].ndim, 1);
    cr_expect_eq(spec->inputs[0].shape[0], 8);
    cr_expect_eq(spec->classes, 4);
    cr_assert_eq(sc_infer_output_count(h), 1);
    const sc_tensor_spec *out = sc_infer_output_spec(h, 0);
    cr_expect_eq(out->dtype, SC_F32);
    cr_expect_eq(out->ndim, 1);
    cr_expect_eq(out->shape[0], 4);
    cr_expect_null(sc_infer_output_spec(h, 1));
    cr_expect_str_eq(sc_infer_model_name(h), "mlp");
    cr_expect(sc_infer_decodes(h));
    cr_expect_null(sc_infer_class_name(h, 0), "synthetic names no classes");

    float *x = test_inputs(&m, SAMPLES);
    expect_same_outputs(h, &m, SAMPLES, x);
    expect_same_outputs(h, &m, 1, x + 8 * 5);
    free(x);
    sc_infer_close(h);
    free_net(&m);
    remove_tmp(&d);
}

Test(infer, runs_the_ema_weights_with_the_buffers)
{
    made_net m;
    make_net(&m, &fashion_cnn, 7);
    /* Running statistics that are not the initial ones, for the buffers. */
    for (int i = 0; i < sc_params_count(m.params); i++) {
        sc_tensor *p = sc_params_at(m.params, i);
        for (int64_t k = 0; (p->flags & SC_TENSOR_BUFFER) && k < p->numel; k++)
            sc_tensor_f32(p)[k] += 0.25f;
    }
    tmp_dir d = make_tmp();
    write_ckpt(in_tmp(&d, "ema.ckpt"), &m, &fashion_cnn, &(ckpt_parts){.ema_scale = 0.5f});
    sc_infer *raw = open_ok(in_tmp(&d, "ema.ckpt"), &two_threads);
    sc_infer *ema = open_ok(in_tmp(&d, "ema.ckpt"), &(sc_infer_options){.threads = THREADS,
                                                                       .ema = true});
    float *x = test_inputs(&m, 4);
    expect_same_outputs(raw, &m, 4, x);
    for (int i = 0; i < sc_params_count(m.params); i++) {
        sc_tensor *p = sc_params_at(m.params, i);
        for (int64_t k = 0; !(p->flags & SC_TENSOR_BUFFER) && k < p->numel; k++)
            sc_tensor_f32(p)[k] *= 0.5f;
    }
    expect_same_outputs(ema, &m, 4, x);
    cr_expect_str_eq(sc_infer_class_name(ema, 9), "Ankle boot");
    cr_expect_null(sc_infer_class_name(ema, 10));
    free(x);
    sc_infer_close(raw);
    sc_infer_close(ema);
    free_net(&m);
    remove_tmp(&d);
}

/* ---- raw inputs ---- */

Test(infer, decodes_a_png_of_a_test_image_into_getitems_input)
{
    made_net m;
    make_net(&m, &fashion_cnn, 7);
    tmp_dir d = make_tmp();
    write_ckpt(in_tmp(&d, "f.ckpt"), &m, &fashion_cnn, &(ckpt_parts){0});
    sc_infer *h = open_ok(in_tmp(&d, "f.ckpt"), &two_threads);
    int64_t count;
    uint8_t *pixels;
    cr_assert_eq(idx_read_u8(FASHION_DIR "/t10k-images-idx3-ubyte.gz", 3,
                             (const int64_t[]){SIDE, SIDE}, &count, &pixels), SC_OK);
    float *want = test_inputs(&m, 3);
    for (int i = 0; i < 3; i++) {
        png_bytes png = png_write_spec(&(png_spec){SIDE, SIDE, PNG_COLOR_TYPE_GRAY, 8,
                                                   .pixels = pixels + i * PIXELS});
        FILE *f = fopen(in_tmp(&d, "x.png"), "wb");
        cr_assert_eq(fwrite(png.data, 1, png.size, f), png.size);
        fclose(f);
        float got[PIXELS], from_bytes[PIXELS];
        sc_raw_input file = {.path = in_tmp(&d, "x.png")};
        cr_assert_eq(sc_infer_decode(h, &file, (void *const[]){got}), SC_OK, "%s",
                     sc_error_message());
        cr_expect_arr_eq(got, want + i * PIXELS, sizeof got, "test image %d", i);
        sc_raw_input bytes = {.bytes = png.data, .size = png.size, .media_type = "image/png"};
        cr_assert_eq(sc_infer_decode(h, &bytes, (void *const[]){from_bytes}), SC_OK);
        cr_expect_arr_eq(from_bytes, got, sizeof got);
        free(png.data);
    }
    expect_same_outputs(h, &m, 3, want);

    float x[PIXELS];
    sc_raw_input text = {.bytes = "not an image", .size = 12};
    cr_expect_neq(sc_infer_decode(h, &text, (void *const[]){x}), SC_OK);
    assert_message_has("fashion_mnist.so: index_decode: ");
    sc_raw_input missing = {.path = in_tmp(&d, "missing.png")};
    cr_expect_eq(sc_infer_decode(h, &missing, (void *const[]){x}), SC_ERR_IO);
    assert_message_has("missing.png");
    free(want);
    free(pixels);
    sc_infer_close(h);
    free_net(&m);
    remove_tmp(&d);
}

/* ---- threads ---- */

typedef struct worker {
    sc_infer *h;
    const char (*rows)[256]; /* [SAMPLES] CSV rows */
    const float *want;       /* [SAMPLES, 2, 4] the serial outputs of each run */
    int first;
    int failures;
} worker;

/* The run starting at sample i takes it alone, or with the next one. */
static int batch_at(int i) { return i + 1 < SAMPLES && i % 3 == 0 ? 2 : 1; }

/* Decodes and runs the batch at sample i into out [batch_at(i), 4]. */
static bool decode_and_run(sc_infer *h, const char (*rows)[256], int i, float *out)
{
    float x[2][8];
    int n = batch_at(i);
    for (int k = 0; k < n; k++) {
        sc_raw_input raw = {.bytes = rows[i + k], .size = strlen(rows[i + k]),
                            .media_type = "text/csv"};
        if (sc_infer_decode(h, &raw, (void *const[]){x[k]}) != SC_OK)
            return false;
    }
    return sc_infer_run(h, n, (const void *const[]){x}, (void *const[]){out}) == SC_OK;
}

static void *work(void *arg)
{
    worker *w = arg;
    for (int round = 0; round < 20; round++)
        for (int j = 0; j < SAMPLES; j++) {
            int i = (w->first + j) % SAMPLES;
            float out[2][4];
            if (!decode_and_run(w->h, w->rows, i, out[0]) ||
                memcmp(out, w->want + 8 * i, (size_t)batch_at(i) * sizeof out[0]) != 0)
                w->failures++;
        }
    return NULL;
}

Test(infer, four_threads_running_and_decoding_get_the_serial_results)
{
    made_net m;
    make_net(&m, &synthetic_mlp, 7);
    tmp_dir d = make_tmp();
    write_ckpt(in_tmp(&d, "t.ckpt"), &m, &synthetic_mlp, &(ckpt_parts){0});
    sc_infer *h = open_ok(in_tmp(&d, "t.ckpt"), &two_threads);
    float *x = test_inputs(&m, SAMPLES);
    static char rows[SAMPLES][256];
    for (int i = 0; i < SAMPLES; i++) {
        int n = 0;
        for (int f = 0; f < 8; f++)
            n += snprintf(rows[i] + n, sizeof rows[i] - (size_t)n, "%s%.9g", f ? "," : "",
                          x[i * 8 + f]);
    }
    float want[SAMPLES][2][4];
    for (int i = 0; i < SAMPLES; i++)
        cr_assert(decode_and_run(h, rows, i, want[i][0]), "%s", sc_error_message());
    worker workers[4];
    pthread_t threads[4];
    for (int t = 0; t < 4; t++) {
        workers[t] = (worker){h, rows, want[0][0], 3 * t, 0};
        cr_assert_eq(pthread_create(&threads[t], NULL, work, &workers[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(threads[t], NULL);
        cr_expect_eq(workers[t].failures, 0, "thread %d: %d results differ from serial", t,
                     workers[t].failures);
    }
    free(x);
    sc_infer_close(h);
    free_net(&m);
    remove_tmp(&d);
}

/* ---- refusals ---- */

/* sc_infer_open(path, o) fails with code and a message holding each of
 * the parts (NULL-terminated), leaving *out NULL. */
static void assert_refused(const char *path, const sc_infer_options *o, sc_status code, ...)
{
    sc_infer *h = (sc_infer *)&h;
    sc_status st = sc_infer_open(path, o, &h);
    cr_assert_eq(st, code, "%s: %s (%s)", path, sc_status_name(st), sc_error_message());
    cr_expect_null(h);
    va_list ap;
    va_start(ap, code);
    for (const char *part; (part = va_arg(ap, const char *));)
        assert_message_has(part);
    va_end(ap);
}

Test(infer, refuses_what_is_no_checkpoint)
{
    tmp_dir d = make_tmp();
    assert_refused(in_tmp(&d, "none.ckpt"), NULL, SC_ERR_IO, "none.ckpt",
                   "No such file or directory", NULL);
    FILE *f = fopen(in_tmp(&d, "junk.ckpt"), "w");
    fputs("this is no checkpoint, but long enough to be read as one\n", f);
    fclose(f);
    assert_refused(in_tmp(&d, "junk.ckpt"), NULL, SC_ERR_FORMAT, "junk.ckpt",
                   "not a scorch checkpoint", NULL);
    made_net m;
    make_net(&m, &synthetic_mlp, 7);
    write_ckpt(in_tmp(&d, "noconfig.ckpt"), &m, &synthetic_mlp, &(ckpt_parts){.no_config = true});
    assert_refused(in_tmp(&d, "noconfig.ckpt"), NULL, SC_ERR_FORMAT, "noconfig.ckpt",
                   "no resolved config", NULL);
    write_ckpt(in_tmp(&d, "nomodel.ckpt"), &m, &synthetic_mlp,
               &(ckpt_parts){.config = "[train]\ndataset = x.so\n"});
    assert_refused(in_tmp(&d, "nomodel.ckpt"), NULL, SC_ERR_FORMAT, "nomodel.ckpt",
                   "its saved config names no model plugin", NULL);
    write_ckpt(in_tmp(&d, "other.ckpt"), &m, &synthetic_mlp, &(ckpt_parts){.model = "cnn"});
    assert_refused(in_tmp(&d, "other.ckpt"), NULL, SC_ERR_INVALID, "other.ckpt",
                   "written by model 'cnn', not 'mlp'", NULL);
    free_net(&m);
    remove_tmp(&d);
}

Test(infer, refuses_weights_the_network_does_not_have)
{
    made_net m;
    make_net(&m, &synthetic_mlp, 7);
    tmp_dir d = make_tmp();
    write_ckpt(in_tmp(&d, "short.ckpt"), &m, &synthetic_mlp, &(ckpt_parts){.skip = "fc2.bias"});
    assert_refused(in_tmp(&d, "short.ckpt"), NULL, SC_ERR_INVALID, "short.ckpt",
                   "has no tensor 'param/fc2.bias'", NULL);
    write_ckpt(in_tmp(&d, "shape.ckpt"), &m, &synthetic_mlp,
               &(ckpt_parts){.reshape = "fc1.weight"});
    assert_refused(in_tmp(&d, "shape.ckpt"), NULL, SC_ERR_INVALID, "shape.ckpt",
                   "'param/fc1.weight'", "[1]", "[16, 8]", NULL);
    /* Model args that make another network than the weights'. */
    recipe wider = synthetic_mlp;
    wider.model_args = "hidden=32";
    char *config = config_text(&wider, plugin("mlp"));
    write_ckpt(in_tmp(&d, "args.ckpt"), &m, &synthetic_mlp, &(ckpt_parts){.config = config});
    free(config);
    assert_refused(in_tmp(&d, "args.ckpt"), NULL, SC_ERR_INVALID, "args.ckpt", "[32, 8]", NULL);
    free_net(&m);
    remove_tmp(&d);
}

Test(infer, refuses_ema_weights_a_run_without_ema_does_not_have)
{
    made_net m;
    make_net(&m, &synthetic_mlp, 7);
    tmp_dir d = make_tmp();
    write_ckpt(in_tmp(&d, "plain.ckpt"), &m, &synthetic_mlp, &(ckpt_parts){0});
    assert_refused(in_tmp(&d, "plain.ckpt"), &(sc_infer_options){.ema = true}, SC_ERR_INVALID,
                   "plain.ckpt", "holds no EMA weights (no 'ema/fc1.weight')",
                   "trained without --ema-decay", NULL);
    free_net(&m);
    remove_tmp(&d);
}

Test(infer, refuses_a_missing_plugin_naming_the_checkpoint_and_the_file)
{
    made_net m;
    make_net(&m, &synthetic_mlp, 7);
    tmp_dir d = make_tmp();
    char *config = config_text(&synthetic_mlp, "/moved/away/mlp.so");
    write_ckpt(in_tmp(&d, "moved.ckpt"), &m, &synthetic_mlp, &(ckpt_parts){.config = config});
    free(config);
    assert_refused(in_tmp(&d, "moved.ckpt"), NULL, SC_ERR_IO, "moved.ckpt",
                   "/moved/away/mlp.so: No such file or directory", NULL);
    /* The run moved: the options say where its plugin is now. */
    sc_infer *h = open_ok(in_tmp(&d, "moved.ckpt"),
                          &(sc_infer_options){.model = plugin("mlp"), .threads = THREADS});
    sc_infer_close(h);
    assert_refused(in_tmp(&d, "moved.ckpt"),
                   &(sc_infer_options){.model = plugin("mlp"), .dataset = plugin("mlp")},
                   SC_ERR_PLUGIN, "moved.ckpt", "mlp.so: exports no scorch_dataset_plugin",
                   NULL);
    free_net(&m);
    remove_tmp(&d);
}

/* The plugin checks are the host's own (sc_model_plugin_check): the same
 * messages, naming the checkpoint and the plugin file. */
Test(infer, checks_plugins_as_the_host_does)
{
    made_net m;
    make_net(&m, &synthetic_mlp, 7);
    tmp_dir d = make_tmp();
    write_ckpt(in_tmp(&d, "a.ckpt"), &m, &synthetic_mlp, &(ckpt_parts){0});
    char built_for[64];
    snprintf(built_for, sizeof built_for, "model plugin built for plugin ABI 2.%d, this scorch "
             "speaks 1.%d", SC_ABI_MINOR, SC_ABI_MINOR);
    assert_refused(in_tmp(&d, "a.ckpt"), &(sc_infer_options){.model = fixture("abi_major2")},
                   SC_ERR_PLUGIN, "a.ckpt", fixture("abi_major2"), built_for, NULL);
    assert_refused(in_tmp(&d, "a.ckpt"), &(sc_infer_options){.model = fixture("no_forward")},
                   SC_ERR_PLUGIN, fixture("no_forward"),
                   "model plugin 'fixture_model' leaves network_forward NULL (required)", NULL);
    assert_refused(in_tmp(&d, "a.ckpt"), &(sc_infer_options){.dataset = fixture("no_getitem")},
                   SC_ERR_PLUGIN, fixture("no_getitem"),
                   "dataset plugin 'fixture_dataset' leaves dataset_getitem NULL", NULL);
    char short_one[128];
    snprintf(short_one, sizeof short_one, "dataset plugin declares %zu bytes, plugin ABI 1.%d "
             "needs at least %zu", offsetof(sc_dataset_plugin, class_name), SC_ABI_MINOR,
             sc_abi_size(SC_ABI_DATASET, SC_ABI_MINOR));
    assert_refused(in_tmp(&d, "a.ckpt"), &(sc_infer_options){.dataset = fixture("dataset_short")},
                   SC_ERR_PLUGIN, short_one, NULL);
    /* A dataset whose spec has no inputs is refused as the host refuses it. */
    assert_refused(in_tmp(&d, "a.ckpt"), &(sc_infer_options){.dataset = fixture("good_dataset")},
                   SC_ERR_PLUGIN, "dataset_spec gives 0 inputs", NULL);
    free_net(&m);
    remove_tmp(&d);
}

Test(infer, refuses_bad_options_and_batches)
{
    made_net m;
    make_net(&m, &synthetic_mlp, 7);
    tmp_dir d = make_tmp();
    write_ckpt(in_tmp(&d, "a.ckpt"), &m, &synthetic_mlp, &(ckpt_parts){0});
    assert_refused(in_tmp(&d, "a.ckpt"), &(sc_infer_options){.device = "gpu"}, SC_ERR_INVALID,
                   "device 'gpu': expected cpu, cuda or cuda:N", NULL);
    assert_refused(in_tmp(&d, "a.ckpt"), &(sc_infer_options){.max_batch = -1}, SC_ERR_INVALID,
                   "max_batch -1 is negative", NULL);
    sc_infer *h = open_ok(in_tmp(&d, "a.ckpt"), &(sc_infer_options){.max_batch = 4});
    float x[5][8] = {{0}}, y[5][4];
    cr_expect_eq(sc_infer_run(h, 5, (const void *const[]){x}, (void *const[]){y}),
                 SC_ERR_INVALID);
    assert_message_has("5 samples; this handle takes 1 to 4 (max_batch)");
    cr_expect_eq(sc_infer_run(h, 0, (const void *const[]){x}, (void *const[]){y}),
                 SC_ERR_INVALID);
    cr_expect_eq(sc_infer_run(h, 4, (const void *const[]){NULL}, (void *const[]){y}),
                 SC_ERR_INVALID);
    assert_message_has("sc_infer_run: inputs 0 of 1 is NULL");
    cr_expect_eq(sc_infer_run(h, 4, (const void *const[]){x}, (void *const[]){y}), SC_OK, "%s",
                 sc_error_message());
    sc_raw_input row = {.bytes = "1,2,3", .size = 5, .media_type = "text/csv"};
    cr_expect_neq(sc_infer_decode(h, &row, (void *const[]){x[0]}), SC_OK);
    assert_message_has("synthetic.so: index_decode: ");
    sc_infer_close(h);
    sc_infer_close(NULL);
    free_net(&m);
    remove_tmp(&d);
}

/* ---- on a GPU (suite infer_gpu: skipped without one) ---- */

/* Runs n samples at x through a handle on the CPU and one on the GPU of
 * the same checkpoint, whose outputs agree to float rounding. */
static void expect_gpu_agrees(const char *path, bool ema, int64_t n, const float *x)
{
    sc_infer *cpu = open_ok(path, &(sc_infer_options){.threads = THREADS, .ema = ema});
    sc_infer *gpu = open_ok(path, &(sc_infer_options){.device = "cuda:0", .ema = ema});
    cr_assert_eq(sc_infer_output_count(gpu), 1);
    int64_t classes = sc_infer_output_spec(gpu, 0)->shape[0];
    cr_assert_eq(classes, sc_infer_output_spec(cpu, 0)->shape[0]);
    float *want = malloc((size_t)(n * classes) * sizeof *want);
    float *got = malloc((size_t)(n * classes) * sizeof *got);
    cr_assert_eq(sc_infer_run(cpu, n, (const void *const[]){x}, (void *const[]){want}), SC_OK);
    cr_assert_eq(sc_infer_run(gpu, n, (const void *const[]){x}, (void *const[]){got}), SC_OK,
                 "%s", sc_error_message());
    for (int64_t k = 0; k < n * classes; k++)
        cr_expect_float_eq(got[k], want[k], 1e-4f * (1 + fabsf(want[k])), "%s: output %lld",
                           path, (long long)k);
    free(want);
    free(got);
    sc_infer_close(cpu);
    sc_infer_close(gpu);
}

Test(infer_gpu, computes_on_the_gpu_what_the_cpu_computes)
{
    tmp_dir d = make_tmp();
    made_net m;
    make_net(&m, &synthetic_mlp, 7);
    write_ckpt(in_tmp(&d, "mlp.ckpt"), &m, &synthetic_mlp, &(ckpt_parts){0});
    float *x = test_inputs(&m, SAMPLES);
    expect_gpu_agrees(in_tmp(&d, "mlp.ckpt"), false, SAMPLES, x);
    free(x);
    free_net(&m);
    make_net(&m, &fashion_cnn, 7);
    write_ckpt(in_tmp(&d, "cnn.ckpt"), &m, &fashion_cnn, &(ckpt_parts){.ema_scale = 0.5f});
    x = test_inputs(&m, 5);
    expect_gpu_agrees(in_tmp(&d, "cnn.ckpt"), false, 5, x);
    expect_gpu_agrees(in_tmp(&d, "cnn.ckpt"), true, 5, x);
    free(x);
    free_net(&m);
    remove_tmp(&d);
}

/* What a handle holds on the GPU: the weights (no gradients) and one
 * batch's arena, all of it given back by close. */
Test(infer_gpu, holds_the_weights_and_one_batchs_arena)
{
    recipe big = synthetic_mlp;
    big.model_args = "hidden=2048:2048";
    made_net m;
    make_net(&m, &big, 7);
    tmp_dir d = make_tmp();
    write_ckpt(in_tmp(&d, "big.ckpt"), &m, &big, &(ckpt_parts){0});
    const sc_device gpu0 = {SC_DEVICE_CUDA, 0};
    sc_infer_close(open_ok(in_tmp(&d, "big.ckpt"), &(sc_infer_options){.device = "cuda"}));
    size_t before = sc_device_memory_used(gpu0).allocated;
    size_t weights = 0;
    for (int i = 0; i < sc_params_count(m.params); i++)
        weights += sc_tensor_nbytes(sc_params_at(m.params, i));
    sc_infer *h = open_ok(in_tmp(&d, "big.ckpt"), &(sc_infer_options){.device = "cuda"});
    float x[64][8] = {{0}}, y[64][4];
    cr_assert_eq(sc_infer_run(h, 64, (const void *const[]){x}, (void *const[]){y}), SC_OK, "%s",
                 sc_error_message());
    size_t held = sc_device_memory_used(gpu0).allocated - before;
    cr_expect_geq(held, weights);
    cr_expect_lt(held, weights + (8u << 20), "%zu bytes held for %zu bytes of weights", held,
                 weights);
    sc_infer_close(h);
    cr_expect_eq(sc_device_memory_used(gpu0).allocated, before);
    free_net(&m);
    remove_tmp(&d);
}
