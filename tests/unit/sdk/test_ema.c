/* The EMA of the weights (scorch/ema.h): timm ModelEmaV3's decay, the
 * lerp against PyTorch's (ema_oracle.py), buffers left alone, the swap,
 * and (suite ema_gpu) the CUDA kernels against the CPU loops. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "scorch_host/ema.h"
#include "scorch/scorch.h"
#include "scorch_host/params.h"

enum { STEPS = 10, PYTHON_SKIP = 77 };

static const sc_device cpu = {SC_DEVICE_CPU, 0}, gpu = {SC_DEVICE_CUDA, 0};

/* weight [3, 2], a buffer [4] between, bias [5]: two parameter ranges */
static sc_params *make_store(sc_device dev)
{
    sc_params *ps = sc_params_new();
    cr_assert_not_null(ps);
    int64_t w[] = {3, 2}, buf = 4, bias = 5;
    cr_assert_not_null(sc_params_add(ps, "fc.weight", 2, w));
    cr_assert_not_null(sc_params_add_buffer(ps, "bn.running_mean", 1, &buf));
    cr_assert_not_null(sc_params_add(ps, "fc.bias", 1, &bias));
    if (dev.kind == SC_DEVICE_CUDA)
        cr_assert_eq(sc_params_to_device(ps, dev), SC_OK, "%s", sc_error_message());
    return ps;
}

/* The weights "after step s": values of both signs and magnitudes. */
static void set_weights(sc_params *ps, int s, float *values)
{
    int64_t n = sc_params_numel(ps);
    for (int64_t i = 0; i < n; i++)
        values[i] = (float)(sin(0.7 * (double)i + 1.3 * s) * pow(10.0, (double)(i % 3) - 1));
    cr_assert_eq(sc_params_write(ps, values), SC_OK, "%s", sc_error_message());
}

static void read_values(const sc_params *ps, float *values)
{
    cr_assert_eq(sc_params_read(ps, values, NULL), SC_OK, "%s", sc_error_message());
}

/* The EMA after STEPS updates on dev, read through a swap into `ema`; the
 * weights of each step (step 0 the initial ones) into `steps`. */
static void run_steps(sc_device dev, double decay, bool warmup, float *steps, float *ema)
{
    sc_params *ps = make_store(dev);
    int64_t n = sc_params_numel(ps);
    set_weights(ps, 0, steps);
    sc_ema *e = sc_ema_new(ps);
    cr_assert_not_null(e, "%s", sc_error_message());
    for (int s = 1; s <= STEPS; s++) {
        set_weights(ps, s, steps + s * n);
        cr_assert_eq(sc_ema_update(e, sc_ema_decay_at(decay, warmup, s)), SC_OK);
    }
    cr_assert_eq(sc_ema_swap(e), SC_OK);
    read_values(ps, ema);
    sc_ema_free(e);
    sc_params_free(ps);
}

Test(ema, decay_is_timm_model_ema_v3)
{
    /* timm ModelEmaV3.get_decay(step): 0 at the first update */
    cr_assert_eq(sc_ema_decay_at(0.999, false, 1), 0.0);
    cr_assert_eq(sc_ema_decay_at(0.999, false, 2), 0.999);
    cr_assert_eq(sc_ema_decay_at(0.999, true, 1), 0.0);
    /* 1 - (1 + (step - 1))^(-2/3), from Python */
    cr_assert_float_eq(sc_ema_decay_at(0.999, true, 2), 0.3700394750525634, 1e-15);
    cr_assert_float_eq(sc_ema_decay_at(0.999, true, 10), 0.7845565309968117, 1e-15);
    cr_assert_float_eq(sc_ema_decay_at(0.9, true, 100), 0.9, 1e-15); /* capped at D */
}

Test(ema, starts_as_a_copy_and_leaves_buffers_alone)
{
    sc_params *ps = make_store(cpu);
    int64_t n = sc_params_numel(ps);
    float *w0 = malloc((size_t)n * sizeof *w0), *w1 = malloc((size_t)n * sizeof *w1);
    set_weights(ps, 0, w0);
    sc_ema *e = sc_ema_new(ps);
    cr_assert_not_null(e);
    set_weights(ps, 1, w1);
    cr_assert_eq(sc_ema_update(e, 0.5), SC_OK);
    cr_assert_null(sc_ema_at(e, 1), "a buffer has no EMA");
    const sc_tensor *bias = sc_ema_at(e, 2);
    cr_assert_str_eq(bias->name, "fc.bias");
    int64_t off = sc_params_offset(ps, 2);
    for (int64_t i = 0; i < bias->numel; i++)
        cr_assert_float_eq(sc_tensor_f32(bias)[i], 0.5f * (w0[off + i] + w1[off + i]), 1e-6);
    cr_assert_eq(sc_ema_swap(e), SC_OK);
    const float *v = sc_params_values(ps);
    int64_t boff = sc_params_offset(ps, 1);
    for (int64_t i = 0; i < 4; i++)
        cr_assert_eq(v[boff + i], w1[boff + i], "the buffer keeps its live value");
    for (int64_t i = 0; i < bias->numel; i++)
        cr_assert_float_eq(v[off + i], 0.5f * (w0[off + i] + w1[off + i]), 1e-6,
                           "the network computes with the EMA");
    cr_assert_eq(sc_ema_swap(e), SC_OK);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(v[i], w1[i], "two swaps restore the weights");
    cr_assert_neq(sc_ema_update(e, 1.5), SC_OK, "a decay outside [0, 1] is refused");
    sc_ema_free(e);
    sc_params_free(ps);
    free(w0);
    free(w1);
}

/* The weights of every step and scorch's EMA for ema_oracle.py:
 * int32 steps, numel, warmup; f64 decay; f32 [steps + 1][numel] weights;
 * f32 [numel] EMA; the parameters only (no buffer). */
static void write_dump(const char *path, const sc_params *ps, double decay, bool warmup,
                       const float *steps, const float *ema)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    int64_t n = sc_params_numel(ps);
    int32_t count = 0;
    for (int i = 0; i < sc_params_count(ps); i++)
        if (!(sc_params_at(ps, i)->flags & SC_TENSOR_BUFFER))
            count += (int32_t)sc_params_at(ps, i)->numel;
    int32_t head[3] = {STEPS, count, warmup};
    fwrite(head, sizeof head, 1, f);
    fwrite(&decay, sizeof decay, 1, f);
    for (int s = 0; s <= STEPS + 1; s++) { /* the last row: the EMA */
        const float *row = s <= STEPS ? steps + s * n : ema;
        for (int i = 0; i < sc_params_count(ps); i++) {
            const sc_tensor *p = sc_params_at(ps, i);
            if (!(p->flags & SC_TENSOR_BUFFER))
                fwrite(row + sc_params_offset(ps, i), sizeof(float), (size_t)p->numel, f);
        }
    }
    cr_assert_eq(fclose(f), 0);
}

static void check_against_torch(double decay, bool warmup)
{
    sc_params *ps = make_store(cpu);
    int64_t n = sc_params_numel(ps);
    float *steps = malloc((size_t)(n * (STEPS + 1)) * sizeof *steps);
    float *ema = malloc((size_t)n * sizeof *ema);
    run_steps(cpu, decay, warmup, steps, ema);
    char dump[] = "/tmp/scorch-ema-XXXXXX";
    int fd = mkstemp(dump);
    cr_assert_geq(fd, 0);
    write_dump(dump, ps, decay, warmup, steps, ema);
    char cmd[1024];
    /* Through its #! line: Debian's python3, which python3-torch serves. */
    snprintf(cmd, sizeof cmd, "%s/tests/unit/sdk/ema_oracle.py %s",
             getenv("SCORCH_SOURCE_ROOT"), dump);
    int status = system(cmd);
    remove(dump);
    free(steps);
    free(ema);
    sc_params_free(ps);
    cr_assert(WIFEXITED(status));
    if (WEXITSTATUS(status) == PYTHON_SKIP)
        cr_skip_test("ema_oracle.py: no torch");
    cr_assert_eq(WEXITSTATUS(status), 0, "the EMA differs from PyTorch's (see its output)");
}

Test(ema, lerp_matches_torch)
{
    check_against_torch(0.9, false);
}

Test(ema, warmup_matches_timm_and_torch)
{
    check_against_torch(0.999, true);
}

/* The CUDA kernels against the CPU loops (nvcc may fuse e + w * (p - e)
 * into one rounding: 1e-6 relative). */
Test(ema_gpu, matches_the_cpu)
{
    sc_params *ps = make_store(cpu);
    int64_t n = sc_params_numel(ps);
    sc_params_free(ps);
    float *steps = malloc((size_t)(n * (STEPS + 1)) * sizeof *steps);
    float *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    run_steps(cpu, 0.9, true, steps, want);
    run_steps(gpu, 0.9, true, steps, got);
    for (int64_t i = 0; i < n; i++)
        cr_assert_float_eq(got[i], want[i], 1e-6 * (fabsf(want[i]) + 1e-3f),
                           "element %lld: %g, not %g", (long long)i, got[i], want[i]);
    free(steps);
    free(want);
    free(got);
}
