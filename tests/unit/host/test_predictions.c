/* scorch-test's predictions.csv (host/run/predictions.h): every row has
 * the header's columns, --topk clamped to the class count with a note. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/predictions.h"

static int count_char(const char *s, char c)
{
    int n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

/* A dataset that names no classes: only the loader's struct is read. */
static const sc_dataset_plugin unnamed = {.name = "unnamed"};
static const host_dataset_lib unnamed_lib = {.lib = {.path = "unnamed.so"}, .api = &unnamed};

/* Predictions of --topk `topk` for two samples of `classes` logits each,
 * into a temporary CSV whose lines come back in lines[]. */
static int predict(int topk, int64_t classes, char lines[][512], int max_lines)
{
    char path[] = "/tmp/scorch-predictions-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    host_predictions p;
    cr_assert_eq(host_predictions_open(&p, path, topk, &unnamed_lib, NULL), SC_OK, "%s",
                 sc_error_message());
    float logits[2 * 16];
    for (int i = 0; i < 2 * classes; i++)
        logits[i] = (float)(i % classes);
    int64_t lshape[] = {2, classes}, tshape[] = {2}, targets[] = {0, 1}, samples[] = {10, 11};
    sc_tensor out, tgt;
    sc_tensor_init(&out, SC_F32, 2, lshape);
    sc_tensor_init(&tgt, SC_I64, 1, tshape);
    out.data = logits;
    tgt.data = targets;
    host_batch batch = {.size = 2, .samples = samples, .targets = {1, {&tgt}}};
    sc_tensor_list outputs = {1, {&out}};
    cr_assert_eq(host_predictions_add(&p, &batch, &outputs), SC_OK, "%s", sc_error_message());
    cr_assert_eq(host_predictions_close(&p), SC_OK);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (n < max_lines && fgets(lines[n], 512, f))
        n++;
    fclose(f);
    unlink(path);
    return n;
}

Test(predictions, topk_beyond_the_classes_is_clamped_with_a_note, .init = cr_redirect_stderr)
{
    char lines[4][512];
    cr_assert_eq(predict(5, 3, lines, 4), 3, "a header and two rows");
    cr_expect(strstr(lines[0], "pred_3,score_3"), "%s", lines[0]);
    cr_expect_null(strstr(lines[0], "pred_4"), "%s", lines[0]);
    for (int i = 1; i < 3; i++)
        cr_expect_eq(count_char(lines[i], ','), count_char(lines[0], ','),
                     "row %d has other columns than the header:\n%s%s", i, lines[0], lines[i]);
    fflush(stderr);
    cr_expect_stderr_eq_str("note: --topk 5 is more than the 3 classes: the predictions list "
                            "the top 3\n");
}

Test(predictions, topk_within_the_classes_is_kept_silently, .init = cr_redirect_stderr)
{
    char lines[4][512];
    cr_assert_eq(predict(2, 3, lines, 4), 3);
    cr_expect(strstr(lines[0], "pred_2,score_2\n"), "%s", lines[0]);
    cr_expect_eq(count_char(lines[1], ','), count_char(lines[0], ','));
    fflush(stderr);
    cr_expect_stderr_eq_str("");
}
