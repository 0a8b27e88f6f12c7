/* gpu_main.c — main() of the test programs whose tests need a GPU (a real
 * one, or the emulated one of the gpu_emulator build). meson runs them with
 * SCORCH_NEEDS_GPU set: without a GPU such a program reports itself
 * skipped (exit 77) instead of passing; otherwise it is Criterion's. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "scorch/device.h"

int main(int argc, char *argv[])
{
    if (getenv("SCORCH_NEEDS_GPU") && sc_cuda_device_count() == 0) {
        printf("skipped: no GPU (%s)\n",
               sc_cuda_built() ? "the CUDA backend is built but sees none"
                               : "libscorch was built without the CUDA backend");
        return 77;
    }
    struct criterion_test_set *tests = criterion_initialize();
    int failed = 0;
    if (criterion_handle_args(argc, argv, true))
        failed = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    return failed;
}
