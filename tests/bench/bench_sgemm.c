/* Prints this machine's OpenBLAS sgemm rate (GFLOP/s, median of several
 * runs) for square matrices of the given size, with the given threads:
 * the ceiling a model's achieved GFLOP/s is compared to. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    int threads = argc > 2 ? atoi(argv[2]) : 2;
    enum { RUNS = 7 };
    openblas_set_num_threads(threads);
    float *a = malloc(sizeof(float) * (size_t)n * n), *b = malloc(sizeof(float) * (size_t)n * n),
          *c = malloc(sizeof(float) * (size_t)n * n);
    if (!a || !b || !c)
        return 1;
    for (long i = 0; i < (long)n * n; i++) {
        a[i] = (float)(i % 7) * 0.1f;
        b[i] = (float)(i % 5) * 0.1f;
    }
    double rates[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f,
                    c, n);
        rates[r] = 2.0 * n * n * (double)n / (now() - t0) / 1e9;
    }
    qsort(rates, RUNS, sizeof *rates, compare);
    printf("%.2f\n", rates[RUNS / 2]);
    free(a);
    free(b);
    free(c);
    return 0;
}
