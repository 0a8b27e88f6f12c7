/* Integration tests of the GPU train step's pipeline (host/run/step_pipe.h):
 * a step that never waits for the GPU trains exactly as one that waits,
 * whatever order the GPU runs its streams' work in, reports a non-finite
 * loss as the CPU does, before any checkpoint after it, and keeps ahead of
 * the GPU.
 *
 * On the emulated GPU (gpu_emulator build) CUDAEMU_LAZY=1 queues all work
 * and runs it only at synchronising calls, the streams interleaved in an
 * order drawn from CUDAEMU_SEED that honours only stream order and events:
 * a missing event between the copy and compute streams, or a pinned buffer
 * reused before its copy ran, changes the losses there. Skipped without a
 * GPU; on a real one the lazy runs are ordinary runs. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "in_process.h"
#include "base/jsonl.h"
#include "scorch/device.h"
#include "run/trainer_impl.h"

#ifndef GPU_EMULATED
#define GPU_EMULATED 0 /* 1 in the gpu_emulator build */
#endif

enum { PATH = 4096, DIR_SIZE = 64, MAX_ARGS = 48, TEXT = 1 << 16 };

static void skip_without_gpu(void)
{
    if (sc_cuda_device_count() == 0)
        cr_skip_test("no GPU (%s)", sc_cuda_built() ? "none visible" : "no CUDA backend");
}

/* One emulated GPU; its lock in a directory of the test's own. */
static void use_one_gpu(void)
{
    setenv("CUDAEMU_DEVICES", "1", 1);
    use_own_gpu_locks();
}

/* scorch-train's arguments for the MLP on the synthetic blobs into
 * run_dir on `device`, plus `extra` (NULL-terminated), into argv; the
 * count. */
static int train_args(const char **argv, const char *device, const char *run_dir, int epochs,
                      const char *const *extra)
{
    static char train[PATH], mlp[PATH], synthetic[PATH], epochs_arg[16];
    build_path(train, PATH, "host/scorch-train");
    build_path(mlp, PATH, "plugins/mlp.so");
    build_path(synthetic, PATH, "plugins/synthetic.so");
    snprintf(epochs_arg, sizeof epochs_arg, "%d", epochs);
    const char *base[] = {train, "--model", mlp, "--model-args", "hidden=32", "--dataset",
                          synthetic, "--dataset-path", "unused", "--batch-size", "64",
                          "--epochs", epochs_arg, "--run-dir", run_dir, "--workers", "2",
                          "--seed", "7", "--device", device, NULL};
    int n = 0;
    for (; base[n]; n++)
        argv[n] = base[n];
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return n;
}

static run_result train(const char *device, const char *run_dir, int epochs,
                        const char *const *extra, const char *env)
{
    const char *argv[MAX_ARGS];
    train_args(argv, device, run_dir, epochs, extra);
    return run_program(argv, env);
}

static void expect_ok(run_result *r)
{
    cr_assert_eq(r->status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
}

/* Fields of metrics.jsonl that measure time or memory, not training. */
static bool measured(const char *key)
{
    static const char *const keys[] = {"samples_per_s", "time_s", "data_wait_s", "compute_s",
                                       "comm_s", "max_rss_mb", "arena_peak_mb", "gpu_mem_mb",
                                       "gpu_peak_mb"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(key, keys[i]) == 0)
            return true;
    return false;
}

/* What a run's metrics.jsonl says about training, one line per record,
 * into text: losses, metrics, steps, samples, learning rates, hook
 * scalars. */
static void results_of(const char *run_dir, char *text)
{
    char path[PATH];
    snprintf(path, PATH, "%s/metrics.jsonl", run_dir);
    host_jsonl_file file;
    cr_assert_eq(host_jsonl_read(path, &file), SC_OK, "%s", sc_error_message());
    size_t n = 0;
    text[0] = '\0';
    for (int r = 0; r < file.count; r++) {
        for (int f = 0; f < file.records[r].count && n < TEXT - 256; f++) {
            const host_json_field *field = &file.records[r].fields[f];
            if (measured(field->key))
                continue;
            n += field->type == HOST_JSON_STRING
                     ? (size_t)snprintf(text + n, TEXT - n, "%s=%s ", field->key, field->string)
                     : (size_t)snprintf(text + n, TEXT - n, "%s=%.17g ", field->key,
                                        field->number);
        }
        n += (size_t)snprintf(text + n, TEXT - n, "\n");
    }
    host_jsonl_free(&file);
}

static void checkpoint_of(const char *run_dir, char *path)
{
    snprintf(path, PATH, "%s/checkpoints/last.ckpt", run_dir);
}

/* Trains `epochs` epochs on the GPU into a fresh directory; its results
 * into text and its directory into dir. */
static void train_gpu(char *dir, int epochs, const char *const *extra, const char *env,
                      char *text)
{
    temp_dir(dir, DIR_SIZE);
    run_result r = train("cuda", dir, epochs, extra, env);
    expect_ok(&r);
    run_result_free(&r);
    results_of(dir, text);
}

/* Trains as `reference` did, under CUDAEMU_LAZY=1 with `seed`, and
 * expects the same results and bit-identical parameters. */
static void expect_same_when_lazy(const char *reference_dir, const char *reference,
                                  const char *seed, const char *const *extra)
{
    char dir[DIR_SIZE], seed_env[32], a[PATH], b[PATH];
    static char text[TEXT];
    setenv("CUDAEMU_LAZY", "1", 1);
    snprintf(seed_env, sizeof seed_env, "CUDAEMU_SEED=%s", seed);
    train_gpu(dir, 2, extra, seed_env, text);
    unsetenv("CUDAEMU_LAZY");
    cr_expect_str_eq(text, reference, "seed %s changed the results", seed);
    checkpoint_of(reference_dir, a);
    checkpoint_of(dir, b);
    cr_expect(same_params(a, b), "seed %s changed the parameters", seed);
}

static void expect_lazy_seeds_agree(const char *const *extra)
{
    char dir[DIR_SIZE];
    static char reference[TEXT];
    train_gpu(dir, 2, extra, NULL, reference);
    cr_assert(strstr(reference, "phase=test"), "%s", reference);
    for (int seed = 1; seed <= 3; seed++) {
        char s[8];
        snprintf(s, sizeof s, "%d", seed);
        expect_same_when_lazy(dir, reference, s, extra);
    }
}

TestSuite(gpu_pipeline, .init = use_one_gpu, .timeout = 600);

/* The replayed graph reads its batch from the uploads. */
Test(gpu_pipeline, graphs_train_the_same_in_any_stream_order)
{
    skip_without_gpu();
    expect_lazy_seeds_agree((const char *[]){"--cuda-graphs", "on", NULL});
}

/* Eager steps read the upload buffers themselves; --accumulate 2 folds
 * two micro-batches per optimizer step. */
Test(gpu_pipeline, eager_steps_train_the_same_in_any_stream_order)
{
    skip_without_gpu();
    expect_lazy_seeds_agree((const char *[]){"--accumulate", "2", NULL});
}

Test(gpu_pipeline, graphs_on_and_off_train_the_same)
{
    skip_without_gpu();
    char on_dir[DIR_SIZE], off_dir[DIR_SIZE], a[PATH], b[PATH];
    static char on[TEXT], off[TEXT];
    train_gpu(on_dir, 2, (const char *[]){"--cuda-graphs", "on", NULL}, NULL, on);
    train_gpu(off_dir, 2, (const char *[]){"--cuda-graphs", "off", NULL}, NULL, off);
    cr_expect_str_eq(on, off);
    checkpoint_of(on_dir, a);
    checkpoint_of(off_dir, b);
    cr_expect(same_params(a, b));
}

/* Hooks that read each batch's loss see the step's own: batch_end, which
 * the pipeline feeds, agrees with after_backward, read from the step. */
Test(gpu_pipeline, batch_end_hooks_see_each_steps_loss)
{
    skip_without_gpu();
    char dir[DIR_SIZE], hooks[PATH], metrics[PATH], line[1024];
    build_path(hooks, PATH, "tests/integration/pipe_hooks.so");
    static char text[TEXT];
    setenv("CUDAEMU_LAZY", "1", 1);
    train_gpu(dir, 1, (const char *[]){"--hooks", hooks, NULL}, "CUDAEMU_SEED=5", text);
    snprintf(metrics, PATH, "%s/metrics.jsonl", dir);
    FILE *f = fopen(metrics, "r");
    cr_assert(f);
    char after_backward[64] = "";
    int pairs = 0;
    while (fgets(line, sizeof line, f)) {
        const char *value = strstr(line, "\"value\":");
        if (strstr(line, "fixture/after_backward"))
            snprintf(after_backward, sizeof after_backward, "%s", value);
        else if (strstr(line, "fixture/batch_end")) {
            cr_expect_str_eq(value, after_backward, "batch %d", pairs);
            pairs++;
        }
    }
    fclose(f);
    cr_expect_eq(pairs, 32, "32 batches, not %d", pairs);
}

/* The names of the checkpoints in run_dir, sorted, into text. */
static void checkpoints_in(const char *run_dir, char *text, size_t size)
{
    char path[PATH];
    snprintf(path, PATH, "%s/checkpoints", run_dir);
    struct dirent **names;
    int n = scandir(path, &names, NULL, alphasort);
    cr_assert_geq(n, 0, "%s", path);
    size_t used = 0;
    text[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.' && used < size)
            used += (size_t)snprintf(text + used, size - used, "%s\n", names[i]->d_name);
        free(names[i]);
    }
    free(names);
}

/* Where the message on stderr places the NaN loss: "at epoch E, batch
 * B" (the CPU and the GPU may give the NaN different signs). */
static void loss_line(const char *err, char *where, size_t size)
{
    const char *loss = strstr(err, "train loss is "), *nan = loss ? strstr(loss, "nan") : NULL;
    const char *at = loss ? strstr(loss, " at epoch ") : NULL;
    cr_assert(nan && at && nan < at, "%s", err);
    size_t n = strcspn(at, "\n");
    snprintf(where, size, "%.*s", (int)(n < size ? n : size - 1), at);
}

static void train_into_nan(const char *device, char *dir, char *message, char *checkpoints)
{
    temp_dir(dir, DIR_SIZE);
    run_result r = train(device, dir, 2,
                         (const char *[]){"--dataset-args", "nan_sample=1500",
                                          "--checkpoint-every", "1", "--keep-last", "1000",
                                          NULL},
                         NULL);
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    loss_line(r.err, message, 256);
    cr_expect(strstr(r.err, "last good one"), "%s", r.err);
    run_result_free(&r);
    checkpoints_in(dir, checkpoints, TEXT);
}

/* A NaN loss ends the run with the CPU's message, naming its batch, and
 * no checkpoint follows the step that made it: the pipeline reads every
 * step in flight before it writes one. */
Test(gpu_pipeline, nan_loss_is_named_and_never_checkpointed)
{
    skip_without_gpu();
    char cpu_dir[DIR_SIZE], gpu_dir[DIR_SIZE], cpu_message[256], gpu_message[256];
    static char cpu_ckpts[TEXT], gpu_ckpts[TEXT];
    train_into_nan("cpu", cpu_dir, cpu_message, cpu_ckpts);
    setenv("CUDAEMU_LAZY", "1", 1);
    train_into_nan("cuda", gpu_dir, gpu_message, gpu_ckpts);
    cr_expect_str_eq(gpu_message, cpu_message);
    cr_expect_str_eq(gpu_ckpts, cpu_ckpts);
}

/* In process, to read the pipeline's own counts: with all GPU work
 * deferred to synchronising calls, a host that waited for each step would
 * find every step done at the next; one that never does fills its slots
 * and, from then on, waits at almost every step for the oldest, a few
 * steps back. The loader fills batches on the training thread (workers
 * 0), so that its waits for earlier uploads come at known points. */
Test(gpu_pipeline, host_runs_ahead_of_the_gpu)
{
    if (!GPU_EMULATED)
        cr_skip_test("needs the emulated GPU's lazy streams");
    setenv("CUDAEMU_LAZY", "1", 1); /* before the emulator starts */
    setenv("CUDAEMU_SEED", "9", 1);
    skip_without_gpu();
    char dir[DIR_SIZE];
    const char *argv[MAX_ARGS];
    int argc = train_args(argv, "cuda", temp_dir(dir, sizeof dir), 1,
                          (const char *[]){"--quiet", "--workers", "0", NULL});
    host_trainer *t = trainer_for_args(argc, argv);
    bool interrupted = false;
    cr_assert_eq(host_trainer_run(t, &interrupted), SC_OK, "%s", sc_error_message());
    host_step_pipe_stats stats = host_step_pipe_stats_of(t->pipe);
    host_trainer_free(t);
    cr_expect_eq(stats.steps, 32);
    /* 25 of them here; 0 with a wait for the GPU anywhere in the step */
    cr_expect_geq(stats.full_waits, stats.steps / 2,
                  "the host waited for the oldest step at %lld of %lld steps: something else "
                  "waits for the GPU", (long long)stats.full_waits, (long long)stats.steps);
    cr_expect_leq(stats.drains, 2, "%lld drains: for the histograms and the phase's end, no more",
                  (long long)stats.drains);
}
