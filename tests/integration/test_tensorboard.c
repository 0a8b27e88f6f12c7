/* Integration tests of TensorBoard output that need no Python: the event
 * file's place, name and framing, turning it off, and refusals. The values
 * are checked by the real reader in tensorboard_roundtrip.py. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "expect.h"
#include "harness.h"
#include "observe/tfrecord.h"

enum { PATH = 4096, DIR_LEN = 64, MAX_ARGS = 32 };

/* One epoch of the synthetic blobs with a small MLP, plus `extra`. */
static run_result train(const char *run_dir, const char *const *extra)
{
    char train[PATH], mlp[PATH], synthetic[PATH];
    build_path(train, PATH, "host/scorch-train");
    build_path(mlp, PATH, "plugins/mlp.so");
    build_path(synthetic, PATH, "plugins/synthetic.so");
    const char *argv[MAX_ARGS] = {train, "--model", mlp, "--model-args", "hidden=16",
                                  "--dataset", synthetic, "--dataset-path", "unused",
                                  "--batch-size", "64", "--epochs", "1", "--run-dir", run_dir,
                                  "--seed", "7"};
    int n = 17;
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return run_program(argv, NULL);
}

/* The names in RUN/tensorboard; returns how many (-1: no directory). */
static int event_files(const char *run_dir, char names[][256], int max)
{
    char dir[PATH];
    snprintf(dir, sizeof dir, "%s/tensorboard", run_dir);
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.' && n < max)
            snprintf(names[n++], 256, "%s", e->d_name);
    closedir(d);
    return n;
}

static bool contains(const unsigned char *data, size_t size, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= size; i++)
        if (memcmp(data + i, s, n) == 0)
            return true;
    return false;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Walks the file's TFRecords, checking both CRCs of each; returns the
 * number of records, or -1 at the first bad one. */
static int count_records(const unsigned char *data, size_t size)
{
    int n = 0;
    for (size_t pos = 0; pos < size; n++) {
        if (size - pos < HOST_TFRECORD_HEADER + HOST_TFRECORD_FOOTER)
            return -1;
        uint64_t len = le32(data + pos) | (uint64_t)le32(data + pos + 4) << 32;
        if (le32(data + pos + 8) != host_crc32c_mask(host_crc32c_compute(data + pos, 8)) ||
            len > size - pos - HOST_TFRECORD_HEADER - HOST_TFRECORD_FOOTER)
            return -1;
        const unsigned char *body = data + pos + HOST_TFRECORD_HEADER;
        if (le32(body + len) != host_crc32c_mask(host_crc32c_compute(body, len)))
            return -1;
        pos += HOST_TFRECORD_HEADER + len + HOST_TFRECORD_FOOTER;
    }
    return n;
}

Test(tensorboard, a_run_writes_one_framed_event_file)
{
    char dir[DIR_LEN], names[4][256], path[PATH];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    cr_assert_eq(event_files(dir, names, 4), 1);
    cr_assert(strncmp(names[0], "events.out.tfevents.", 20) == 0, "%s", names[0]);
    snprintf(path, sizeof path, "%s/tensorboard/%s", dir, names[0]);
    size_t size;
    unsigned char *data = (unsigned char *)read_file(path, &size);
    cr_assert(data);
    cr_expect(contains(data, size, "brain.Event:2"), "no file_version record");
    /* file_version, SessionLog, 2 per step (32 steps), 4 per eval phase (3 phases). */
    int records = count_records(data, size);
    cr_expect_geq(records, 2 + 2 * 32 + 4 * 3, "%d records (or a bad CRC)", records);
    free(data);
}

Test(tensorboard, the_flag_and_the_ini_file_turn_it_off)
{
    char dir[DIR_LEN], names[4][256], ini[PATH];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, (const char *[]){"--no-tensorboard", NULL});
    expect_status(&r, 0);
    run_result_free(&r);
    cr_expect_eq(event_files(dir, names, 4), -1, "--no-tensorboard wrote RUN/tensorboard");

    temp_dir(dir, sizeof dir);
    snprintf(ini, sizeof ini, "%s.ini", dir);
    FILE *f = fopen(ini, "w");
    cr_assert(f);
    fputs("[train]\ntensorboard = false\n", f);
    fclose(f);
    r = train(dir, (const char *[]){"--config", ini, NULL});
    expect_status(&r, 0);
    run_result_free(&r);
    remove(ini);
    cr_expect_eq(event_files(dir, names, 4), -1, "tensorboard = false wrote RUN/tensorboard");
}

Test(tensorboard, a_bad_image_from_a_hook_stops_the_run_naming_tag_and_hook)
{
    const char *hooks = getenv("SCORCH_LOG_HOOKS_BAD");
    const char *with[] = {"--hooks", hooks, NULL};
    const char *without[] = {"--hooks", hooks, "--no-tensorboard", NULL};
    const char *const *variants[] = {with, without}; /* checked even when off */
    for (int i = 0; i < 2; i++) {
        char dir[DIR_LEN];
        temp_dir(dir, sizeof dir);
        run_result r = train(dir, variants[i]);
        expect_status(&r, 1);
        cr_expect(strstr(r.err, "fixture/bad") && strstr(r.err, "log_bad_image") &&
                      strstr(r.err, "i32"),
                  "variant %d: %s", i, r.err);
        run_result_free(&r);
    }
}

Test(tensorboard, a_blocked_directory_is_an_error_naming_it)
{
    char dir[DIR_LEN], blocker[PATH];
    temp_dir(dir, sizeof dir);
    snprintf(blocker, sizeof blocker, "%s/tensorboard", dir);
    FILE *f = fopen(blocker, "w"); /* a file where the directory goes */
    cr_assert(f);
    fclose(f);
    run_result r = train(dir, NULL);
    expect_status(&r, 1);
    cr_expect(strstr(r.err, blocker) && strstr(r.err, "--no-tensorboard"), "%s", r.err);
    run_result_free(&r);
}
