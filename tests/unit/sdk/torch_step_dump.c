/* torch_step_dump — one training step of a shipped model plugin, and a few
 * optimizer updates, written to files for torch_oracle.py to redo in
 * PyTorch and compare.
 *
 *   torch_step_dump PLUGIN.so cpu|cuda OUT_DIR
 *
 * The plugin's network with its default args for Fashion-MNIST samples
 * ([1, 28, 28] f32, an i64 class), initialised from seed 42, runs forward,
 * the criterion and backward on a fixed random batch. Then, from the same
 * initial values, each optimizer of `optimizers` below takes STEPS updates
 * from the same gradients (the batch's, then random ones). OUT_DIR gets:
 *
 *   manifest.txt       "param NAME TRAINABLE NDIM DIMS...", in store order;
 *                      "batch N"; "optim NAME KIND LR MOMENTUM NESTEROV
 *                      WEIGHT_DECAY BETA1 BETA2 EPS STEPS N_STATE STATES..."
 *   values.f32         the initial flat values (sc_params layout)
 *   x.f32, y.i64       the batch
 *   loss.f32           the loss
 *   grads.f32          the flat gradients after backward
 *   forward.f32        the flat values after forward (running statistics)
 *   step_grads.f32     [STEPS, numel]: the gradient of each update
 *   optim_NAME.f32     the flat values after the updates
 *   optim_NAME_STATE.f32  each state buffer after them
 *
 * Exits 77 (skipped) for cuda without a GPU, 1 with a message on failure. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scorch/scorch.h"
#include "scorch_host/context.h"
#include "scorch_host/params.h"

enum { BATCH = 8, CLASSES = 10, STEPS = 3, EXIT_SKIP = 77 };

/* One optimizer run of the comparison; lr and weight decay large enough
 * that every term of the update shows. The L2 weight decay is a power of
 * two: wd * p is then exact, so that PyTorch's fused multiply-add in
 * g + wd * p rounds as scorch's two operations do. Otherwise, where g and
 * wd * p nearly cancel (some of 200K elements do), Adam's g / (|g| + eps)
 * magnifies that last-bit difference far beyond 1e-6. */
typedef struct optimizer_case {
    const char *name;
    sc_optim_kind kind;
    double lr, momentum, weight_decay;
    bool nesterov;
} optimizer_case;

static const optimizer_case optimizers[] = {
    {"sgd", SC_OPTIM_SGD, 0.1, 0.0, 0x1p-7, false},
    {"sgd_momentum", SC_OPTIM_SGD, 0.1, 0.9, 0x1p-7, false},
    {"sgd_nesterov", SC_OPTIM_SGD, 0.1, 0.9, 0x1p-7, true},
    {"adam", SC_OPTIM_ADAM, 1e-2, 0.0, 0x1p-7, false},
    {"adamw", SC_OPTIM_ADAMW, 1e-2, 0.0, 0.1, false},
};

static const char *out_dir;

static void fail(const char *what)
{
    fprintf(stderr, "torch_step_dump: %s: %s\n", what, sc_error_message());
    exit(1);
}

static void check(sc_status st, const char *what)
{
    if (st != SC_OK)
        fail(what);
}

static void *must(void *p, const char *what)
{
    if (!p)
        fail(what);
    return p;
}

static FILE *open_out(const char *name, const char *mode)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    FILE *f = fopen(path, mode);
    if (!f) {
        perror(path);
        exit(1);
    }
    return f;
}

static void write_raw(const char *name, const void *data, size_t bytes)
{
    FILE *f = open_out(name, "wb");
    if (fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0) {
        perror(name);
        exit(1);
    }
}

/* The flat buffers, from whatever device they live on. */
static void write_params(const char *name, const sc_params *ps, bool grads)
{
    size_t n = (size_t)sc_params_numel(ps);
    float *host = must(malloc(n * sizeof *host), "out of memory");
    check(sc_params_read(ps, grads ? NULL : host, grads ? host : NULL), name);
    write_raw(name, host, n * sizeof *host);
    free(host);
}

static void write_tensor(const char *name, const sc_tensor *t)
{
    sc_tensor *host = must(sc_tensor_alloc(t->dtype, t->ndim, t->shape), name);
    check(sc_tensor_copy(host, t), name);
    write_raw(name, host->data, sc_tensor_nbytes(host));
    sc_tensor_free(host);
}

static void write_manifest_params(FILE *f, const sc_params *ps)
{
    for (int i = 0; i < sc_params_count(ps); i++) {
        const sc_tensor *t = sc_params_at(ps, i);
        fprintf(f, "param %s %d %d", t->name, (t->flags & SC_TENSOR_REQUIRES_GRAD) != 0,
                t->ndim);
        for (int d = 0; d < t->ndim; d++)
            fprintf(f, " %lld", (long long)t->shape[d]);
        fputc('\n', f);
    }
}

static const sc_model_plugin *load_model(const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* left open: the process is short */
    if (!lib) {
        fprintf(stderr, "torch_step_dump: dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    const sc_model_plugin *api = dlsym(lib, "scorch_model_plugin");
    if (!api) {
        fprintf(stderr, "torch_step_dump: %s exports no scorch_model_plugin\n", path);
        exit(1);
    }
    return api;
}

static void *create_network(const sc_model_plugin *api, sc_params *ps)
{
    static const sc_sample_spec fashion_spec = {
        .n_inputs = 1,
        .n_targets = 1,
        .inputs = {{SC_F32, 3, {1, 28, 28}}},
        .targets = {{SC_I64, 0, {0}}},
    };
    sc_args *args;
    check(sc_args_parse("", "model arg", &args), "model args");
    sc_rng rng;
    sc_rng_init(&rng, 42, 0);
    void *net = NULL;
    check(api->network_create(args, &fashion_spec, ps, &rng, &net), "network_create");
    sc_args_free(args);
    return net;
}

/* Forward, criterion and backward on a fixed random batch. */
static void training_step(const sc_model_plugin *api, void *net, sc_ctx *ctx, sc_params *ps)
{
    sc_tensor *x = must(sc_tensor_alloc(SC_F32, 4, (int64_t[]){BATCH, 1, 28, 28}), "batch");
    sc_tensor *y = must(sc_tensor_alloc(SC_I64, 1, (int64_t[]){BATCH}), "batch");
    sc_rng rng;
    sc_rng_init(&rng, 7, 0);
    sc_init_normal(x, 0.0f, 1.0f, &rng);
    for (int64_t i = 0; i < BATCH; i++)
        ((int64_t *)y->data)[i] = (3 * i + 1) % CLASSES;
    write_raw("x.f32", x->data, sc_tensor_nbytes(x));
    write_raw("y.i64", y->data, sc_tensor_nbytes(y));

    sc_tensor_list inputs = {1, {must(sc_tensor_to_device(ctx, x), "x")}};
    sc_tensor_list targets = {1, {must(sc_tensor_to_device(ctx, y), "y")}};
    sc_tensor_list outputs = {0};
    sc_tensor *loss = NULL;
    check(api->network_forward(net, ctx, &inputs, &outputs), "forward");
    check(api->socket_criterion(net, ctx, &outputs, &targets, &loss), "criterion");
    check(sc_backward(ctx, loss, NULL, NULL), "backward");
    write_tensor("loss.f32", loss);
    write_params("grads.f32", ps, true);
    write_params("forward.f32", ps, false);
    check(sc_ctx_synchronize(ctx), "synchronize");
    sc_ctx_reset(ctx);
    sc_tensor_free(x);
    sc_tensor_free(y);
}

/* [STEPS, numel]: the batch's gradient, then random ones of a like scale. */
static float *make_step_grads(const sc_params *ps)
{
    int64_t n = sc_params_numel(ps);
    float *g = must(malloc((size_t)(STEPS * n) * sizeof *g), "out of memory");
    check(sc_params_read(ps, NULL, g), "gradients");
    sc_rng rng;
    sc_rng_init(&rng, 11, 0);
    for (int64_t i = n; i < STEPS * n; i++)
        g[i] = 0.01f * sc_rng_normal(&rng);
    write_raw("step_grads.f32", g, (size_t)(STEPS * n) * sizeof *g);
    return g;
}

/* Sets the store's flat gradients, on its device, from a host array. */
static void set_grads(sc_params *ps, const float *grads)
{
    int64_t n = sc_params_numel(ps);
    sc_tensor host, flat;
    check(sc_tensor_init(&host, SC_F32, 1, &n), "gradients");
    check(sc_tensor_init(&flat, SC_F32, 1, &n), "gradients");
    host.data = (float *)grads;
    flat.data = sc_params_grads(ps);
    flat.device = sc_params_device(ps);
    check(sc_tensor_copy(&flat, &host), "gradients");
}

static void run_optimizer(const optimizer_case *c, sc_params *ps, const float *initial,
                          const float *step_grads, FILE *manifest)
{
    sc_optim_config config = sc_optim_defaults(c->kind);
    config.momentum = c->momentum;
    config.nesterov = c->nesterov;
    config.weight_decay = c->weight_decay;
    check(sc_params_write(ps, initial), c->name);
    sc_optim *opt = must(sc_optim_new(ps, &config), c->name);
    for (int k = 0; k < STEPS; k++) {
        set_grads(ps, step_grads + k * sc_params_numel(ps));
        check(sc_optim_step(opt, c->lr), c->name);
    }
    char name[256];
    snprintf(name, sizeof name, "optim_%s.f32", c->name);
    write_params(name, ps, false);
    fprintf(manifest, "optim %s %s %.17g %.17g %d %.17g %.17g %.17g %.17g %d %d", c->name,
            sc_optim_kind_name(c->kind), c->lr, config.momentum, config.nesterov,
            config.weight_decay, config.beta1, config.beta2, config.eps, STEPS,
            sc_optim_state_count(opt));
    for (int i = 0; i < sc_optim_state_count(opt); i++) {
        sc_tensor *state = sc_optim_state_at(opt, i);
        fprintf(manifest, " %s", state->name);
        snprintf(name, sizeof name, "optim_%s_%s.f32", c->name, state->name);
        write_tensor(name, state);
    }
    fputc('\n', manifest);
    sc_optim_free(opt);
}

static sc_device parse_device(const char *name)
{
    if (strcmp(name, "cpu") == 0)
        return (sc_device){SC_DEVICE_CPU, 0};
    if (strcmp(name, "cuda") != 0) {
        fprintf(stderr, "torch_step_dump: device '%s' is not cpu or cuda\n", name);
        exit(1);
    }
    if (sc_cuda_device_count() == 0) {
        fprintf(stderr, "torch_step_dump: no GPU: skipped\n");
        exit(EXIT_SKIP);
    }
    return (sc_device){SC_DEVICE_CUDA, 0};
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: torch_step_dump PLUGIN.so cpu|cuda OUT_DIR\n");
        return 1;
    }
    sc_device device = parse_device(argv[2]);
    out_dir = argv[3];
    const sc_model_plugin *api = load_model(argv[1]);
    sc_params *ps = must(sc_params_new(), "parameters");
    void *net = create_network(api, ps);
    int64_t n = sc_params_numel(ps);
    float *initial = must(malloc((size_t)n * sizeof *initial), "out of memory");
    memcpy(initial, sc_params_values(ps), (size_t)n * sizeof *initial);
    write_raw("values.f32", initial, (size_t)n * sizeof *initial);
    FILE *manifest = open_out("manifest.txt", "w");
    write_manifest_params(manifest, ps);
    fprintf(manifest, "batch %d\n", BATCH);

    check(sc_params_to_device(ps, device), "to device");
    sc_ctx *ctx = must(sc_ctx_new(device), "context");
    sc_ctx_set_precision(ctx, SC_PRECISION_FP32);
    training_step(api, net, ctx, ps);
    float *step_grads = make_step_grads(ps);
    for (size_t k = 0; k < sizeof optimizers / sizeof *optimizers; k++)
        run_optimizer(&optimizers[k], ps, initial, step_grads, manifest);

    if (fclose(manifest) != 0) {
        perror("manifest.txt");
        return 1;
    }
    free(step_grads);
    free(initial);
    sc_ctx_free(ctx);
    api->network_destroy(net);
    sc_params_free(ps);
    return 0;
}
