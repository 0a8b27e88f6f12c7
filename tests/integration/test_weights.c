/* Weights out and in (docs/weights.md), through the real programs:
 * scorch-export's file read back with our reader, scorch-train
 * --init-from a checkpoint or an export reproducing the source's test
 * metrics (scorch-train --epochs 0 tests the starting weights),
 * --init-map, --no-init-strict, --freeze, and every refusal. The real
 * safetensors package and PyTorch check the same files in
 * weights_torch.py. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/safetensors.h"
#include "expect.h"
#include "harness.h"
#include "scorch/serialize.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

enum { PATH = 4096, DIR_LEN = 64, MAX_ARGS = 64 };

/* scorch-train of an mlp on the synthetic blobs. */
static run_result train(const char *run_dir, const char *hidden, const char *epochs,
                        const char *const *extra)
{
    return run_joined(ARGS(built("host/scorch-train"), "--model", built("plugins/mlp.so"),
                           "--model-args", hidden, "--dataset", built("plugins/synthetic.so"),
                           "--dataset-path", "unused", "--batch-size", "64", "--epochs", epochs,
                           "--run-dir", run_dir, "--workers", "0", "--seed", "7", "--lr", "0.01",
                           "--no-tensorboard"),
                      extra);
}

/* scorch-train of a narrow cnn on Fashion-MNIST: a few steps, two test
 * batches. */
static run_result train_cnn(const char *run_dir, const char *epochs, const char *const *extra)
{
    return run_joined(ARGS(built("host/scorch-train"), "--model", built("plugins/cnn.so"),
                           "--model-args", "channels=4:8,hidden=16", "--dataset",
                           built("plugins/fashion_mnist.so"), "--dataset-path", FASHION_DIR,
                           "--batch-size", "64", "--epochs", epochs, "--max-train-iterations",
                           "8", "--max-valid-iterations", "1", "--max-test-iterations", "2",
                           "--run-dir", run_dir, "--workers", "1", "--seed", "3",
                           "--no-tensorboard"),
                      extra);
}

static run_result export_weights(const char *const *args)
{
    return run_joined(ARGS(built("host/scorch-export")), args);
}

static run_result scorch_test(const char *checkpoint, const char *const *extra)
{
    return run_joined(ARGS(built("host/scorch-test"), "--checkpoint", checkpoint, "--workers",
                           "0", "--quiet"),
                      extra);
}

/* A run of `epochs` with the given extra options in DIR/run; its last
 * checkpoint. */
static const char *source_run(char *dir, const char *epochs, const char *const *extra)
{
    temp_dir(dir, DIR_LEN);
    run_result r = train(in_dir(dir, "run"), "hidden=32", epochs, extra);
    expect_status(&r, 0);
    run_result_free(&r);
    return in_dir(dir, "run/checkpoints/last.ckpt");
}

static const char *exported(const char *checkpoint, const char *out, const char *const *extra)
{
    run_result r = run_joined(ARGS(built("host/scorch-export"), "--checkpoint", checkpoint,
                                   "--out", out),
                              extra);
    expect_status(&r, 0);
    expect_in(r.out, "wrote ");
    run_result_free(&r);
    return out;
}

/* Every "param/<name>" of the checkpoint is in the file as <name>, with
 * the bits of "<prefix><name>" (prefix "ema/": parameters only, buffers
 * from param/). */
static void expect_same_tensors(const char *checkpoint, const char *file, const char *prefix)
{
    sc_ckpt *ck;
    host_safetensors *st;
    cr_assert_eq(sc_ckpt_open(checkpoint, &ck), SC_OK, "%s", sc_error_message());
    cr_assert_eq(host_safetensors_open(file, &st), SC_OK, "%s", sc_error_message());
    int params = 0;
    for (int i = 0; i < sc_ckpt_count(ck); i++) {
        const char *name = sc_ckpt_name(ck, i);
        if (strncmp(name, "param/", 6) != 0)
            continue;
        char want[PATH];
        snprintf(want, sizeof want, "%s%s", prefix, name + 6);
        const sc_tensor *t = sc_ckpt_tensor(ck, want) ? sc_ckpt_tensor(ck, want)
                                                      : sc_ckpt_tensor(ck, name);
        const host_safetensors_tensor *s = host_safetensors_find(st, name + 6);
        cr_assert_not_null(s, "%s is not in %s", name + 6, file);
        cr_assert_eq(s->dtype, HOST_SAFETENSORS_F32);
        cr_assert_eq(s->ndim, t->ndim);
        cr_assert_eq(memcmp(s->shape, t->shape, (size_t)t->ndim * sizeof *t->shape), 0);
        cr_assert_eq(memcmp(s->data, t->data, (size_t)t->numel * 4), 0, "%s differs", want);
        params++;
    }
    cr_assert_eq(host_safetensors_count(st), params, "the file holds other tensors too");
    host_safetensors_close(st);
    sc_ckpt_close(ck);
}

Test(weights, export_holds_every_parameter_and_the_provenance)
{
    char dir[DIR_LEN];
    const char *ckpt = source_run(dir, "2", ARGS("--ema-decay", "0.9"));
    const char *file = exported(ckpt, in_dir(dir, "w.safetensors"), NULL);
    expect_same_tensors(ckpt, file, "param/");
    const char *ema = exported(ckpt, in_dir(dir, "ema.safetensors"), ARGS("--ema"));
    expect_same_tensors(ckpt, ema, "ema/");

    host_safetensors *st;
    cr_assert_eq(host_safetensors_open(file, &st), SC_OK, "%s", sc_error_message());
    cr_assert_str_eq(host_safetensors_metadata(st, "scorch_model"), "mlp");
    cr_assert_str_eq(host_safetensors_metadata(st, "scorch_model_args"), "hidden=32");
    cr_assert_str_eq(host_safetensors_metadata(st, "scorch_model_plugin"),
                     built("plugins/mlp.so"));
    cr_assert_str_eq(host_safetensors_metadata(st, "scorch_dataset_plugin"),
                     built("plugins/synthetic.so"));
    cr_assert_str_eq(host_safetensors_metadata(st, "scorch_weights"), "trained");
    cr_assert_str_eq(host_safetensors_metadata(st, "format"), "pt");
    cr_assert_not_null(host_safetensors_metadata(st, "scorch_version"));
    cr_assert(strstr(host_safetensors_metadata(st, "scorch_checkpoint"), "last.ckpt"));
    host_safetensors_close(st);

    /* a moved run: the plugins recorded are the ones given */
    exported(ckpt, file, ARGS("--model", "/new/mlp.so", "--dataset", "/new/data.so"));
    cr_assert_eq(host_safetensors_open(file, &st), SC_OK, "%s", sc_error_message());
    cr_assert_str_eq(host_safetensors_metadata(st, "scorch_model_plugin"), "/new/mlp.so");
    cr_assert_str_eq(host_safetensors_metadata(st, "scorch_dataset_plugin"), "/new/data.so");
    host_safetensors_close(st);
}

/* "accuracy 0.9727" of a scorch-test result line, and the loss. */
static void result_of(const char *out, char *accuracy, char *loss)
{
    const char *a = strstr(out, "accuracy "), *l = strstr(out, "loss ");
    cr_assert(a && l, "no result line in:\n%s", out);
    sscanf(a + 9, "%15s", accuracy);
    sscanf(l + 5, "%15s", loss);
}

/* scorch-train --init-from FILE --epochs 0 tests the starting weights:
 * its test record, to scorch-test's 4 decimals. */
static void expect_init_tests_as(const char *accuracy, const char *loss,
                                 run_result (*trainer)(const char *, const char *,
                                                       const char *const *),
                                 const char *dir, const char *file, const char *const *extra)
{
    char got_accuracy[16], got_loss[16];
    const char *run = in_dir(dir, "init");
    const char *argv[MAX_ARGS] = {"--init-from", file};
    int n = 2;
    for (; extra && *extra; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    run_result r = trainer(run, "0", argv);
    expect_status(&r, 0);
    expect_in(r.out, "initialised ");
    run_result_free(&r);
    snprintf(got_accuracy, sizeof got_accuracy, "%.4f", metric_of(run, 1, "test", "accuracy"));
    snprintf(got_loss, sizeof got_loss, "%.4f", metric_of(run, 1, "test", "loss"));
    cr_assert_str_eq(got_accuracy, accuracy, "--init-from %s", file);
    cr_assert_str_eq(got_loss, loss, "--init-from %s", file);
    char cmd[PATH];
    snprintf(cmd, sizeof cmd, "rm -rf %s", run);
    cr_assert_eq(system(cmd), 0);
}

static run_result train_mlp32(const char *run_dir, const char *epochs, const char *const *extra)
{
    return train(run_dir, "hidden=32", epochs, extra);
}

Test(weights, init_from_a_checkpoint_or_its_export_tests_as_the_source)
{
    char dir[DIR_LEN], accuracy[16], loss[16];
    const char *ckpt = source_run(dir, "2", NULL);
    run_result r = scorch_test(ckpt, NULL);
    expect_status(&r, 0);
    result_of(r.out, accuracy, loss);
    run_result_free(&r);
    const char *file = exported(ckpt, in_dir(dir, "w.safetensors"), NULL);
    expect_init_tests_as(accuracy, loss, train_mlp32, dir, ckpt, NULL);
    expect_init_tests_as(accuracy, loss, train_mlp32, dir, file, NULL);
}

/* Batch norm's running statistics travel too, and --ema exports the EMA
 * of the parameters with the buffers as trained: what scorch-test --ema
 * evaluates. */
Test(weights, cnn_buffers_and_ema_round_trip)
{
    char dir[DIR_LEN], accuracy[16], loss[16];
    temp_dir(dir, DIR_LEN);
    run_result r = train_cnn(in_dir(dir, "run"), "1", ARGS("--ema-decay", "0.5"));
    expect_status(&r, 0);
    run_result_free(&r);
    const char *ckpt = in_dir(dir, "run/checkpoints/last.ckpt");
    const char *file = exported(ckpt, in_dir(dir, "ema.safetensors"), ARGS("--ema"));
    expect_same_tensors(ckpt, file, "ema/");
    host_safetensors *st;
    cr_assert_eq(host_safetensors_open(file, &st), SC_OK, "%s", sc_error_message());
    cr_assert_not_null(host_safetensors_find(st, "conv1.bn.running_var"));
    cr_assert_str_eq(host_safetensors_metadata(st, "scorch_weights"), "ema");
    host_safetensors_close(st);

    r = scorch_test(ckpt, ARGS("--ema", "--max-test-iterations", "2", "--batch-size", "64"));
    expect_status(&r, 0);
    result_of(r.out, accuracy, loss);
    run_result_free(&r);
    expect_init_tests_as(accuracy, loss, train_cnn, dir, file, NULL);
}

/* The export under PyTorch-like names, plus a tensor the model lacks. */
static const char *renamed_copy(const char *checkpoint, const char *out)
{
    static const char *const from[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
    static const char *const to[] = {"net.0.weight", "net.0.bias", "net.2.weight",
                                     "net.2.bias"};
    sc_ckpt *ck;
    cr_assert_eq(sc_ckpt_open(checkpoint, &ck), SC_OK, "%s", sc_error_message());
    host_safetensors_entry e[5];
    char name[PATH];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "param/%s", from[i]);
        e[i] = (host_safetensors_entry){to[i], sc_ckpt_tensor(ck, name)};
        cr_assert_not_null(e[i].tensor, "%s", name);
    }
    e[4] = (host_safetensors_entry){"net.2.num_batches_tracked", e[3].tensor};
    cr_assert_eq(host_safetensors_write(out, e, 5, NULL, 0), SC_OK, "%s", sc_error_message());
    sc_ckpt_close(ck);
    return out;
}

Test(weights, init_map_renames_and_drops)
{
    char dir[DIR_LEN], accuracy[16], loss[16];
    const char *ckpt = source_run(dir, "2", NULL);
    run_result r = scorch_test(ckpt, NULL);
    result_of(r.out, accuracy, loss);
    run_result_free(&r);
    const char *file = renamed_copy(ckpt, in_dir(dir, "torch.safetensors"));

    r = train(in_dir(dir, "strict"), "hidden=32", "0", ARGS("--init-from", file));
    expect_status(&r, 1);
    expect_in(r.err, "does not fit the model (rename with --init-map, or load what fits with "
                     "--no-init-strict); not in the file (4): fc1.weight, fc1.bias, fc2.weight, "
                     "fc2.bias; not in the model (5): ");
    cr_assert_neq(access(in_dir(dir, "strict"), F_OK), 0, "a refused start leaves no run");
    run_result_free(&r);

    expect_init_tests_as(accuracy, loss, train_mlp32, dir, file,
                         ARGS("--init-map", "net.0.*=fc1.*, net.2.num_*=, net.2.*=fc2.*"));
}

/* A model that shares only its first layer with the file: without
 * --init-strict it takes fc1 and says what it skipped; frozen, fc1 then
 * stays the file's bit for bit through training while the rest learns. */
Test(weights, non_strict_and_freeze)
{
    char dir[DIR_LEN];
    const char *ckpt = source_run(dir, "2", NULL);
    const char *file = exported(ckpt, in_dir(dir, "w.safetensors"), NULL);
    const char *run = in_dir(dir, "tuned");
    run_result r = train(run, "hidden=32:24", "2",
                         ARGS("--init-from", file, "--no-init-strict", "--freeze", "fc1.*"));
    expect_status(&r, 0);
    expect_in(r.out, "initialised 2 of the model's 6 parameters and buffers from");
    /* "model mlp (...): N parameters, M trainable" */
    const char *counts = strstr(r.out, " parameters, "), *total = counts;
    cr_assert_not_null(counts, "%s", r.out);
    while (total > r.out && total[-1] >= '0' && total[-1] <= '9')
        total--;
    long long untrained = atoll(total) - atoll(counts + strlen(" parameters, "));
    cr_assert_eq(untrained, 32 * 16 + 32, "fc1 is not all that is frozen:\n%s", r.out);
    expect_in(r.err, "note: --no-init-strict: 2 parameters not in");
    expect_in(r.err, "keep the model's own initialisation: fc3.weight, fc3.bias");
    expect_in(r.err, "shaped otherwise than the model's, skipped: fc2.weight (file F32 [");
    expect_in(r.err, ", 32], model [24, 32]), fc2.bias (file F32 [");
    run_result_free(&r);

    sc_ckpt *a, *b;
    cr_assert_eq(sc_ckpt_open(ckpt, &a), SC_OK);
    cr_assert_eq(sc_ckpt_open(in_dir(run, "checkpoints/last.ckpt"), &b), SC_OK);
    static const char *const frozen[] = {"param/fc1.weight", "param/fc1.bias"};
    for (int i = 0; i < 2; i++) {
        const sc_tensor *x = sc_ckpt_tensor(a, frozen[i]), *y = sc_ckpt_tensor(b, frozen[i]);
        cr_assert(x && y && x->numel == y->numel);
        cr_assert_eq(memcmp(x->data, y->data, (size_t)x->numel * 4), 0, "%s moved", frozen[i]);
    }
    cr_assert(isfinite(metric_of(run, 2, "train", "loss")), "epoch 2 did not train");
    sc_ckpt_close(a);
    sc_ckpt_close(b);
}

/* A resumed run continues its checkpoint, whatever --init-from says:
 * `--config RUN/config.ini --resume` works on a run that began from a
 * file. */
Test(weights, resume_does_not_load_init_from_again)
{
    char dir[DIR_LEN];
    const char *ckpt = source_run(dir, "1", NULL);
    const char *file = exported(ckpt, in_dir(dir, "w.safetensors"), NULL);
    const char *run = in_dir(dir, "tuned");
    run_result r = train(run, "hidden=32", "1", ARGS("--init-from", file));
    expect_status(&r, 0);
    run_result_free(&r);
    r = run_joined(ARGS(built("host/scorch-train"), "--config", in_dir(run, "config.ini"),
                        "--epochs", "2", "--resume"),
                   NULL);
    expect_status(&r, 0);
    expect_in(r.err, "note: --init-from ");
    expect_in(r.err, "is not loaded: --resume continues the checkpoint's weights");
    run_result_free(&r);
    cr_assert(!isnan(metric_of(run, 2, "valid", "accuracy")), "epoch 2 did not run");
}

typedef struct refusal {
    const char *what;
    const char *args[8];
    int status;
    const char *message;
} refusal;

Test(weights, scorch_export_refusals)
{
    char dir[DIR_LEN];
    const char *ckpt = source_run(dir, "1", NULL);
    char ck[PATH], out[PATH], junk[PATH];
    snprintf(ck, sizeof ck, "%s", ckpt);
    snprintf(out, sizeof out, "%s", in_dir(dir, "w.safetensors"));
    snprintf(junk, sizeof junk, "%s", in_dir(dir, "junk.ckpt"));
    FILE *f = fopen(junk, "w");
    fputs("SCORCHCK but not really", f);
    fclose(f);
    const refusal cases[] = {
        {"no --out", {"--checkpoint", ck}, 2, "missing --out (required"},
        {"no --checkpoint", {"--out", out}, 2, "missing --checkpoint (required"},
        {"a typo", {"--checkpiont", ck}, 2, "unknown option --checkpiont (did you mean "
                                            "--checkpoint?)"},
        {"a stray word", {"model.ckpt"}, 2, "unexpected argument 'model.ckpt'"},
        {"no value", {"--out"}, 2, "--out needs a value"},
        {"no EMA", {"--checkpoint", ck, "--out", out, "--ema"}, 1,
         "--ema: it holds no EMA weights (no ema/ entries): it was trained without "
         "--ema-decay"},
        {"over itself", {"--checkpoint", ck, "--out", ck}, 1, "is the checkpoint itself"},
        {"absent", {"--checkpoint", in_dir(dir, "none.ckpt"), "--out", out}, 1, "none.ckpt"},
        {"damaged", {"--checkpoint", junk, "--out", out}, 1, "junk.ckpt"},
        {"unwritable", {"--checkpoint", ck, "--out", "/nonexistent/w.safetensors"}, 1,
         "cannot write /nonexistent/w.safetensors"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_result r = export_weights(cases[i].args);
        cr_expect_eq(r.status, cases[i].status, "%s: exit %d\n%s", cases[i].what, r.status,
                     r.err);
        cr_expect(strstr(r.err, "scorch-export: ") && strstr(r.err, cases[i].message),
                  "%s: '%s' not in:\n%s", cases[i].what, cases[i].message, r.err);
        cr_expect_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "%s: one line: %s",
                     cases[i].what, r.err);
        run_result_free(&r);
    }
    cr_assert_neq(access(out, F_OK), 0, "a refused export left %s", out);
    run_result r = export_weights(ARGS("--help"));
    expect_status(&r, 0);
    expect_in(r.out, "Usage: scorch-export --checkpoint PATH --out FILE.safetensors");
    run_result_free(&r);
}

Test(weights, scorch_train_refusals)
{
    char dir[DIR_LEN];
    const char *ckpt = source_run(dir, "1", NULL);
    char file[PATH], hostile[PATH];
    snprintf(file, sizeof file, "%s", exported(ckpt, in_dir(dir, "w.safetensors"), NULL));
    snprintf(hostile, sizeof hostile, "%s", in_dir(dir, "hostile.safetensors"));
    FILE *f = fopen(hostile, "wb");
    fwrite("\x00\x10\x00\x00\x00\x00\x00\x00{}", 1, 10, f); /* a header of 4096 bytes */
    fclose(f);
    const char *run = in_dir(dir, "refused");
    const refusal cases[] = {
        {"absent file", {"--init-from", in_dir(dir, "none.safetensors")}, 1,
         "--init-from: cannot read "},
        {"hostile file", {"--init-from", hostile}, 1,
         "hostile.safetensors: its header length 4096 runs past the end of the file (10 "
         "bytes)"},
        {"another model", {"--init-from", file, "--model-args", "hidden=16"}, 1,
         "shaped otherwise (3): fc1.weight (file F32 [32, 16], model [16, 16])"},
        {"a rule for nothing", {"--init-from", file, "--init-map", "conv*=fc*"}, 1,
         "--init-map rule 'conv*=fc*' matches no tensor of"},
        {"two into one", {"--init-from", file, "--init-map", "fc1.bias=fc2.bias"}, 1,
         "would both load as 'fc2.bias'"},
        {"a bad rule", {"--init-from", file, "--init-map", "fc*=x"}, 2,
         "--init-map: rule 'fc*=x': FROM has 1 '*' and TO 0"},
        {"a map alone", {"--init-map", "a=b"}, 1, "--init-map needs --init-from FILE"},
        {"non-strict alone", {"--no-init-strict"}, 1, "--no-init-strict needs --init-from"},
        {"a flag's value", {"--init-strict=false"}, 2, "--init-strict takes no value"},
        {"freeze nothing", {"--freeze", "fc1.*,conv*"}, 1,
         "--freeze 'conv*' matches no parameter of the model (it has fc1.weight, fc1.bias, "
         "fc2.weight, fc2.bias)"},
        {"an empty glob", {"--freeze", "fc1.*,,"}, 2, "--freeze: an empty pattern"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_result r = train(run, "hidden=32", "1", cases[i].args);
        cr_expect_eq(r.status, cases[i].status, "%s: exit %d\n%s", cases[i].what, r.status,
                     r.err);
        cr_expect(strstr(r.err, "scorch-train: ") && strstr(r.err, cases[i].message),
                  "%s: '%s' not in:\n%s", cases[i].what, cases[i].message, r.err);
        cr_expect_neq(access(run, F_OK), 0, "%s: a refused start left %s", cases[i].what, run);
        run_result_free(&r);
    }
}
