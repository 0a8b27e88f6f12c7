/* bench_infer — the time of sc_infer_run alone (scorch/infer.h), for
 * bench_predict.py's forward-only column: a batch of zeros run REPEATS
 * times after 3 warm-up runs; prints microseconds per sample.
 *
 *   bench_infer CHECKPOINT BATCH THREADS REPEATS
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "scorch/infer.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A zeroed buffer for `batch` samples of spec. */
static void *batch_of(const sc_tensor_spec *spec, int64_t batch)
{
    size_t bytes = sc_dtype_size(spec->dtype) * (size_t)batch;
    for (int d = 0; d < spec->ndim; d++)
        bytes *= (size_t)spec->shape[d];
    return calloc(1, bytes);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_infer CHECKPOINT BATCH THREADS REPEATS\n");
        return 2;
    }
    int64_t batch = atoll(argv[2]);
    int repeats = atoi(argv[4]);
    sc_infer_options options = {.threads = atoi(argv[3]), .max_batch = batch};
    sc_infer *h;
    if (sc_infer_open(argv[1], &options, &h) != SC_OK) {
        fprintf(stderr, "bench_infer: %s\n", sc_error_message());
        return 1;
    }
    const sc_sample_spec *spec = sc_infer_input_spec(h);
    void *in[SC_MAX_IO] = {0}, *out[SC_MAX_IO] = {0};
    for (int k = 0; k < spec->n_inputs; k++)
        in[k] = batch_of(&spec->inputs[k], batch);
    for (int k = 0; k < sc_infer_output_count(h); k++)
        out[k] = batch_of(sc_infer_output_spec(h, k), batch);
    double start = 0;
    for (int r = -3; r < repeats; r++) {
        if (r == 0)
            start = now();
        if (sc_infer_run(h, batch, (const void *const *)in, out) != SC_OK) {
            fprintf(stderr, "bench_infer: %s\n", sc_error_message());
            return 1;
        }
    }
    printf("%.3f\n", (now() - start) * 1e6 / ((double)repeats * (double)batch));
    for (int k = 0; k < SC_MAX_IO; k++) {
        free(in[k]);
        free(out[k]);
    }
    sc_infer_close(h);
    return 0;
}
