/* The Fashion-MNIST plugin's augmentation (dataset args crop_padding and
 * hflip): a function of getitem's rng, on the train split only, with crop
 * offsets over the whole -pad..pad range and flips about half the time.
 * Images are compared unnormalised (normalize=false), where the padding
 * is exactly 0. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scorch/scorch.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

enum { SIDE = 28, PIXELS = SIDE * SIDE, SAMPLE = 3, PAD = 2, DRAWS = 400 };

typedef float image[PIXELS];

static const sc_dataset_plugin *plugin(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/plugins/fashion_mnist.so", getenv("SCORCH_BUILD_ROOT"));
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* left open: one process per test */
    cr_assert_not_null(lib, "dlopen %s: %s", path, dlerror());
    const sc_dataset_plugin *p = dlsym(lib, "scorch_dataset_plugin");
    cr_assert_not_null(p);
    return p;
}

static sc_status open_index(const char *args_text, void **index)
{
    sc_args *args;
    cr_assert_eq(sc_args_parse(args_text, "dataset arg", &args), SC_OK);
    sc_status st = plugin()->index_open(FASHION_DIR, args, index);
    sc_args_free(args);
    return st;
}

static void *index_with(const char *args_text)
{
    void *index = NULL;
    cr_assert_eq(open_index(args_text, &index), SC_OK, "%s: %s", args_text,
                 sc_error_message());
    return index;
}

/* Sample i of a split, drawn with the stream (seed 9, draw). */
static void get(void *index, sc_split split, int64_t i, uint64_t draw, image out)
{
    const sc_dataset_plugin *p = plugin();
    void *ds;
    cr_assert_eq(p->dataset_open(index, split, &ds), SC_OK);
    sc_tensor x = {.dtype = SC_F32, .ndim = 3, .shape = {1, SIDE, SIDE}, .numel = PIXELS,
                   .data = out};
    int64_t label;
    sc_tensor y = {.dtype = SC_I64, .ndim = 0, .numel = 1, .data = &label};
    sc_tensor_list inputs = {1, {&x}}, targets = {1, {&y}};
    sc_rng rng;
    sc_rng_init(&rng, 9, draw);
    cr_assert_eq(p->dataset_getitem(ds, i, &rng, &inputs, &targets), SC_OK, "%s",
                 sc_error_message());
}

/* plain shifted by (dy, dx), then mirrored when flip; 0 outside. */
static void transform(const image plain, int dy, int dx, bool flip, image out)
{
    for (int r = 0; r < SIDE; r++)
        for (int c = 0; c < SIDE; c++) {
            int from_r = r + dy, from_c = (flip ? SIDE - 1 - c : c) + dx;
            bool inside = from_r >= 0 && from_r < SIDE && from_c >= 0 && from_c < SIDE;
            out[r * SIDE + c] = inside ? plain[from_r * SIDE + from_c] : 0.0f;
        }
}

static bool same(const image a, const image b)
{
    return memcmp(a, b, sizeof(image)) == 0;
}

Test(augment, a_function_of_the_rng)
{
    void *index = index_with("normalize=false,crop_padding=3,hflip=true");
    image a, b;
    int differ = 0;
    for (uint64_t draw = 0; draw < 8; draw++) {
        get(index, SC_SPLIT_TRAIN, SAMPLE, draw, a);
        get(index, SC_SPLIT_TRAIN, SAMPLE, draw, b);
        cr_assert(same(a, b), "draw %llu gave two images", (unsigned long long)draw);
        get(index, SC_SPLIT_TRAIN, SAMPLE, draw + 100, b);
        differ += !same(a, b);
    }
    cr_expect_geq(differ, 6, "other streams gave the same image %d times of 8", 8 - differ);
    plugin()->index_close(index);
}

Test(augment, valid_and_test_are_never_augmented)
{
    void *augmented = index_with("normalize=false,crop_padding=4,hflip=true");
    void *plain = index_with("normalize=false");
    image a, b;
    for (int split = SC_SPLIT_VALID; split <= SC_SPLIT_TEST; split++)
        for (uint64_t draw = 0; draw < 16; draw++) {
            get(augmented, (sc_split)split, (int64_t)draw, draw, a);
            get(plain, (sc_split)split, (int64_t)draw, 0, b);
            cr_assert(same(a, b), "%s sample %llu changed", sc_split_name((sc_split)split),
                      (unsigned long long)draw);
        }
    plugin()->index_close(augmented);
    plugin()->index_close(plain);
}

/* Which shift (dy, dx) of plain out is, numbered (dy + PAD) (2 PAD + 1) +
 * dx + PAD; -1 if none. */
static int find_shift(const image plain, const image out)
{
    image shifted;
    for (int dy = -PAD; dy <= PAD; dy++)
        for (int dx = -PAD; dx <= PAD; dx++) {
            transform(plain, dy, dx, false, shifted);
            if (same(shifted, out))
                return (dy + PAD) * (2 * PAD + 1) + dx + PAD;
        }
    return -1;
}

Test(augment, crop_offsets_cover_the_range)
{
    void *cropping = index_with("normalize=false,crop_padding=2"); /* PAD */
    void *plain_index = index_with("normalize=false");
    image plain, out;
    get(plain_index, SC_SPLIT_TRAIN, SAMPLE, 0, plain);
    int seen[(2 * PAD + 1) * (2 * PAD + 1)] = {0};
    for (uint64_t draw = 0; draw < DRAWS; draw++) {
        get(cropping, SC_SPLIT_TRAIN, SAMPLE, draw, out);
        int shift = find_shift(plain, out);
        cr_assert_geq(shift, 0, "draw %llu is no shift within %d", (unsigned long long)draw,
                      PAD);
        seen[shift]++;
    }
    for (int k = 0; k < (2 * PAD + 1) * (2 * PAD + 1); k++)
        cr_expect_gt(seen[k], 0, "shift (%d, %d) never drawn in %d", k / (2 * PAD + 1) - PAD,
                     k % (2 * PAD + 1) - PAD, DRAWS);
    plugin()->index_close(cropping);
    plugin()->index_close(plain_index);
}

Test(augment, hflip_mirrors_about_half_the_samples)
{
    void *flipping = index_with("normalize=false,hflip=true");
    void *plain_index = index_with("normalize=false");
    image plain, mirrored, out;
    get(plain_index, SC_SPLIT_TRAIN, SAMPLE, 0, plain);
    transform(plain, 0, 0, true, mirrored);
    cr_assert(!same(plain, mirrored), "sample %d is symmetric; pick another", SAMPLE);
    int flips = 0;
    for (uint64_t draw = 0; draw < DRAWS; draw++) {
        get(flipping, SC_SPLIT_TRAIN, SAMPLE, draw, out);
        cr_assert(same(out, plain) || same(out, mirrored), "draw %llu",
                  (unsigned long long)draw);
        flips += same(out, mirrored);
    }
    cr_expect(flips > DRAWS / 2 - 60 && flips < DRAWS / 2 + 60, "%d flips in %d", flips,
              DRAWS);
    plugin()->index_close(flipping);
    plugin()->index_close(plain_index);
}

/* The plain image's values come from a vector path, a mirrored image's
 * from the table (fashion_mnist.c, write_view): the same bits, with
 * normalisation too, over the first samples' grey levels. */
Test(augment, plain_and_mirrored_images_scale_alike)
{
    void *flipping = index_with("hflip=true");
    void *plain_index = index_with("");
    image plain, mirrored, out;
    for (int64_t i = 0; i < 10; i++) {
        get(plain_index, SC_SPLIT_TRAIN, i, 0, plain);
        transform(plain, 0, 0, true, mirrored);
        bool flipped = false;
        for (uint64_t draw = 0; draw < 16; draw++) {
            get(flipping, SC_SPLIT_TRAIN, i, draw, out);
            cr_assert(same(out, plain) || same(out, mirrored), "sample %lld, draw %llu",
                      (long long)i, (unsigned long long)draw);
            flipped |= same(out, mirrored) && !same(out, plain);
        }
        cr_assert(flipped, "sample %lld never mirrored in 16 draws", (long long)i);
    }
    plugin()->index_close(flipping);
    plugin()->index_close(plain_index);
}

Test(augment, bad_args_are_refused)
{
    static const char *const bad[] = {"crop_padding=-1", "crop_padding=15", "hflip=maybe"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        void *index = NULL;
        cr_expect_eq(open_index(bad[k], &index), SC_ERR_INVALID, "%s accepted", bad[k]);
        cr_expect(strstr(sc_error_message(), bad[k][0] == 'c' ? "crop_padding" : "hflip"),
                  "%s: %s", bad[k], sc_error_message());
    }
}
