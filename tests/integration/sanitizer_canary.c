/* sanitizer_canary — one defect of each kind tools/sanitized must catch,
 * for check_sanitized.sh (sanitizer builds only). Every mode exits 0 when
 * it gets that far: only the sanitizers can fail it.
 *
 *   clean          nothing wrong
 *   leak           a block never freed
 *   overflow       a write past a heap block (the program keeps running
 *                  only without ASan)
 *   undefined      a signed integer overflow
 *   run-MODE       runs MODE the way the integration tests run the scorch
 *                  programs (harness.c, output captured), and ignores how
 *                  it ended, as a test expecting a failure may */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* volatile: the compiler may not see through the defects. */
static int leak(void)
{
    char *volatile block = malloc(64);
    block = NULL;
    return block != NULL;
}

static int overflow(void)
{
    char *volatile block = malloc(16);
    block[16] = 1;
    free(block);
    return 0;
}

static int undefined(void)
{
    volatile int big = INT_MAX;
    big = big + 1;
    return big == 0;
}

static int run_mode(const char *self, const char *mode)
{
    const char *argv[] = {self, mode, NULL};
    run_result r = run_program(argv, NULL);
    run_result_free(&r);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc == 2 ? argv[1] : "";
    if (strncmp(mode, "run-", 4) == 0)
        return run_mode(argv[0], mode + 4);
    if (strcmp(mode, "clean") == 0)
        return 0;
    if (strcmp(mode, "leak") == 0)
        return leak();
    if (strcmp(mode, "overflow") == 0)
        return overflow();
    if (strcmp(mode, "undefined") == 0)
        return undefined();
    fprintf(stderr, "usage: sanitizer_canary [run-]clean|leak|overflow|undefined\n");
    return 2;
}
