/* Gradient clipping (scorch/optim.h, sc_grad_clip_*): the norm and the
 * clipped gradients against torch.nn.utils.clip_grad_norm_ and
 * clip_grad_value_ (grad_clip_oracle.py), frozen gradients untouched, the
 * refusals, and (suite grad_clip_gpu) the CUDA kernels against the CPU. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scorch/scorch.h"
#include "scorch_host/optim.h"
#include "scorch_host/params.h"

enum { N_TENSORS = 4, PYTHON_SKIP = 77, MODE_NORM = 0, MODE_VALUE = 1 };

static const sc_device cpu = {SC_DEVICE_CPU, 0}, gpu = {SC_DEVICE_CUDA, 0};

/* weight [300, 700] (more than one chunk of the CPU's sum), a frozen
 * [5] between trainable ones, bias [300], head [7]; the gradients set to
 * values of both signs and several magnitudes (frozen: zeros, as backward
 * leaves them). */
static sc_params *make_store(sc_device dev, float scale)
{
    sc_params *ps = sc_params_new();
    cr_assert_not_null(ps);
    int64_t w[] = {300, 700}, frozen = 5, bias = 300, head = 7;
    cr_assert_not_null(sc_params_add(ps, "fc.weight", 2, w));
    sc_params_set_trainable(sc_params_add(ps, "stem.weight", 1, &frozen), false);
    cr_assert_not_null(sc_params_add(ps, "fc.bias", 1, &bias));
    cr_assert_not_null(sc_params_add(ps, "head.weight", 1, &head));
    int64_t n = sc_params_numel(ps);
    float *g = calloc((size_t)n, sizeof *g);
    for (int i = 0; i < sc_params_count(ps); i++) {
        const sc_tensor *p = sc_params_at(ps, i);
        int64_t off = sc_params_offset(ps, i);
        for (int64_t k = 0; p->flags & SC_TENSOR_REQUIRES_GRAD && k < p->numel; k++)
            g[off + k] = scale * (float)(sin(0.37 * (double)(off + k)) *
                                         pow(10.0, (double)((off + k) % 4) - 2));
    }
    if (dev.kind == SC_DEVICE_CUDA)
        cr_assert_eq(sc_params_to_device(ps, dev), SC_OK, "%s", sc_error_message());
    sc_tensor host, flat;
    sc_tensor_init(&host, SC_F32, 1, &n);
    host.data = g;
    flat = host;
    flat.data = sc_params_grads(ps);
    flat.device = dev;
    cr_assert_eq(sc_tensor_copy(&flat, &host), SC_OK, "%s", sc_error_message());
    free(g);
    return ps;
}

/* Clips ps's gradients; the norm before into *norm, the gradients before
 * and after into host arrays. */
static void clip(sc_params *ps, int mode, double limit, float *before, float *after,
                 float *norm)
{
    cr_assert_eq(sc_params_read(ps, NULL, before), SC_OK);
    sc_grad_clip *c = sc_grad_clip_new(ps);
    cr_assert_not_null(c, "%s", sc_error_message());
    sc_status st = mode == MODE_NORM ? sc_grad_clip_norm(c, limit) : sc_grad_clip_value(c, limit);
    cr_assert_eq(st, SC_OK, "%s", sc_error_message());
    cr_assert_eq(sc_params_read(ps, NULL, after), SC_OK);
    sc_tensor host;
    sc_tensor_init(&host, SC_F32, 0, NULL);
    host.data = norm;
    cr_assert_eq(sc_tensor_copy(&host, sc_grad_clip_last_norm(c)), SC_OK);
    sc_grad_clip_free(c);
}

/* The dump grad_clip_oracle.py reads (run by its #! line: Debian's python3, with python3-torch). */
static void write_dump(const char *path, const sc_params *ps, int mode, double limit,
                       const float *before, const float *after, float norm)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    int64_t n = sc_params_numel(ps);
    int32_t head[2] = {sc_params_count(ps), mode};
    fwrite(head, sizeof head, 1, f);
    fwrite(&limit, sizeof limit, 1, f);
    for (int i = 0; i < sc_params_count(ps); i++) {
        const sc_tensor *p = sc_params_at(ps, i);
        int32_t shape[2] = {(int32_t)p->numel, (p->flags & SC_TENSOR_REQUIRES_GRAD) != 0};
        fwrite(shape, sizeof shape, 1, f);
    }
    fwrite(before, sizeof *before, (size_t)n, f);
    fwrite(after, sizeof *after, (size_t)n, f);
    fwrite(&norm, sizeof norm, 1, f);
    cr_assert_eq(fclose(f), 0);
}

static void check_against_torch(int mode, double limit)
{
    sc_params *ps = make_store(cpu, 1.0f);
    int64_t n = sc_params_numel(ps);
    float *before = malloc((size_t)n * sizeof *before), *after = malloc((size_t)n * sizeof *after);
    float norm;
    clip(ps, mode, limit, before, after, &norm);
    char dump[] = "/tmp/scorch-clip-XXXXXX";
    int fd = mkstemp(dump);
    cr_assert_geq(fd, 0);
    close(fd);
    write_dump(dump, ps, mode, limit, before, after, norm);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/tests/unit/sdk/grad_clip_oracle.py %s",
             getenv("SCORCH_SOURCE_ROOT"), dump);
    int status = system(cmd);
    remove(dump);
    free(before);
    free(after);
    sc_params_free(ps);
    cr_assert(WIFEXITED(status));
    if (WEXITSTATUS(status) == PYTHON_SKIP)
        cr_skip_test("grad_clip_oracle.py: no torch");
    cr_assert_eq(WEXITSTATUS(status), 0, "clipping differs from PyTorch's (see its output)");
}

Test(grad_clip, norm_clipping_matches_torch) { check_against_torch(MODE_NORM, 0.5); }
Test(grad_clip, norm_below_the_limit_changes_nothing_as_torch)
{
    check_against_torch(MODE_NORM, 1e6);
}
Test(grad_clip, value_clipping_matches_torch) { check_against_torch(MODE_VALUE, 0.05); }

/* Independently of PyTorch: after clipping, the norm is the limit; the
 * frozen gradients stay zeros. */
Test(grad_clip, clipped_norm_is_the_limit)
{
    sc_params *ps = make_store(cpu, 1.0f);
    int64_t n = sc_params_numel(ps);
    float *before = malloc((size_t)n * sizeof *before), *after = malloc((size_t)n * sizeof *after);
    float norm;
    clip(ps, MODE_NORM, 0.5, before, after, &norm);
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)after[i] * after[i];
    cr_assert_gt(norm, 1.0f, "the test's gradients must be clipped");
    cr_assert_float_eq(sqrt(sum), 0.5, 1e-5);
    int64_t frozen = sc_params_offset(ps, 1);
    for (int64_t k = 0; k < 5; k++)
        cr_assert_eq(after[frozen + k], 0.0f, "a frozen gradient changed");
    free(before);
    free(after);
    sc_params_free(ps);
}

Test(grad_clip, refuses_limits_that_are_not_positive_and_finite)
{
    sc_params *ps = make_store(cpu, 1.0f);
    sc_grad_clip *c = sc_grad_clip_new(ps);
    cr_assert_eq(sc_grad_clip_norm(c, 0), SC_ERR_INVALID);
    cr_assert_eq(sc_grad_clip_norm(c, INFINITY), SC_ERR_INVALID);
    cr_assert_eq(sc_grad_clip_value(c, -1), SC_ERR_INVALID);
    cr_assert_eq(sc_grad_clip_value(c, NAN), SC_ERR_INVALID);
    sc_grad_clip_free(c);
    sc_params_free(ps);
}

/* The CUDA kernels against the CPU loops: the same norm (both sum in
 * double) and gradients. */
static void expect_gpu_as_cpu(int mode, double limit)
{
    sc_params *a = make_store(cpu, 1.0f), *b = make_store(gpu, 1.0f);
    int64_t n = sc_params_numel(a);
    float *before = malloc((size_t)n * sizeof *before);
    float *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    float want_norm, got_norm;
    clip(a, mode, limit, before, want, &want_norm);
    clip(b, mode, limit, before, got, &got_norm);
    cr_assert_float_eq(got_norm, want_norm, 1e-6 * want_norm);
    for (int64_t i = 0; i < n; i++)
        cr_assert_float_eq(got[i], want[i], 1e-6 * (fabsf(want[i]) + 1e-12f), "element %lld",
                           (long long)i);
    free(before);
    free(want);
    free(got);
    sc_params_free(a);
    sc_params_free(b);
}

Test(grad_clip_gpu, norm_matches_the_cpu) { expect_gpu_as_cpu(MODE_NORM, 0.5); }
Test(grad_clip_gpu, value_matches_the_cpu) { expect_gpu_as_cpu(MODE_VALUE, 0.05); }
