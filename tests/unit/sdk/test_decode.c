/* Raw inputs (ABI 1.4): the shipped datasets' index_decode — fashion_mnist
 * on PNG and PGM images written here from the real test split, bit for
 * bit what getitem gives; synthetic on CSV rows — the CSV reader
 * (scorch/csv.h), the class count in each spec, and the classifiers
 * taking it from there. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../../plugins/fashion_mnist/idx.h"
#include "png_writer.h"
#include "scorch/scorch.h"
#include "scorch_host/plugin.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

enum { SIDE = 28, PIXELS = SIDE * SIDE };

static const void *plugin_symbol(const char *plugin, const char *symbol)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/plugins/%s.so", getenv("SCORCH_BUILD_ROOT"), plugin);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* left open: one process per test */
    cr_assert_not_null(lib, "dlopen %s: %s", path, dlerror());
    const void *sym = dlsym(lib, symbol);
    cr_assert_not_null(sym, "%s exports no %s", path, symbol);
    return sym;
}

static const sc_dataset_plugin *dataset(const char *name)
{
    return plugin_symbol(name, "scorch_dataset_plugin");
}

static void *open_index(const sc_dataset_plugin *p, const char *path, const char *text)
{
    sc_args *args;
    void *index = NULL;
    cr_assert_eq(sc_args_parse(text, "dataset arg", &args), SC_OK, "%s", sc_error_message());
    cr_assert_eq(p->index_open(path, args, &index), SC_OK, "%s", sc_error_message());
    sc_args_free(args);
    return index;
}

static void assert_message_has(const char *part)
{
    cr_assert(strstr(sc_error_message(), part), "message '%s' lacks '%s'", sc_error_message(),
              part);
}

/* ---- fashion_mnist: images in, getitem's input out ---- */

/* The 28x28 image input of fashion_mnist, as getitem and decode fill it. */
typedef struct image_input {
    float x[PIXELS];
    sc_tensor t;
    sc_tensor_list list;
} image_input;

static void image_input_init(image_input *in)
{
    cr_assert_eq(sc_tensor_init(&in->t, SC_F32, 3, (const int64_t[]){1, SIDE, SIDE}), SC_OK);
    in->t.data = in->x;
    in->list = (sc_tensor_list){1, {&in->t}};
}

/* Test sample i as getitem gives it. */
static void getitem_test(const sc_dataset_plugin *p, void *index, int64_t i, image_input *in)
{
    void *test = NULL;
    cr_assert_eq(p->dataset_open(index, SC_SPLIT_TEST, &test), SC_OK);
    int64_t label;
    sc_tensor target;
    sc_tensor_init(&target, SC_I64, 0, NULL);
    target.data = &label;
    sc_tensor_list targets = {1, {&target}};
    sc_rng rng;
    sc_rng_init(&rng, 1, (uint64_t)i);
    image_input_init(in);
    cr_assert_eq(p->dataset_getitem(test, i, &rng, &in->list, &targets), SC_OK, "%s",
                 sc_error_message());
}

/* The test split's pixel bytes, read from the IDX file as the plugin does. */
static uint8_t *test_pixels(void)
{
    int64_t count;
    uint8_t *pixels;
    cr_assert_eq(idx_read_u8(FASHION_DIR "/t10k-images-idx3-ubyte.gz", 3,
                             (const int64_t[]){SIDE, SIDE}, &count, &pixels),
                 SC_OK, "%s", sc_error_message());
    cr_assert_eq(count, 10000);
    return pixels;
}

/* An 8-bit PNG of w x h pixels of `channels` (1 grey, 3 RGB) from rows of
 * bytes. */
static png_bytes png_of(const uint8_t *px, int w, int h, int channels)
{
    return png_write_spec(&(png_spec){w, h, channels == 3 ? PNG_COLOR_TYPE_RGB
                                                          : PNG_COLOR_TYPE_GRAY, 8,
                                      .pixels = px});
}

static sc_status decode(const sc_dataset_plugin *p, void *index, const void *data, size_t size,
                        const char *type, image_input *in)
{
    image_input_init(in);
    sc_raw_input raw = {.bytes = data, .size = size, .media_type = type};
    return p->index_decode(index, &raw, &in->list);
}

static void expect_same(const image_input *a, const image_input *b, float tolerance)
{
    for (int k = 0; k < PIXELS; k++)
        cr_expect_float_eq(a->x[k], b->x[k], tolerance, "pixel %d: %.9g and %.9g", k, a->x[k],
                           b->x[k]);
}

Test(fashion_decode, a_png_of_a_test_sample_gives_getitems_input_bit_for_bit)
{
    const sc_dataset_plugin *p = dataset("fashion_mnist");
    void *index = open_index(p, FASHION_DIR, "");
    uint8_t *pixels = test_pixels();
    for (int64_t i = 0; i < 10000; i += 1111) {
        image_input want, got;
        getitem_test(p, index, i, &want);
        png_bytes png = png_of(pixels + i * PIXELS, SIDE, SIDE, 1);
        cr_assert_eq(decode(p, index, png.data, png.size, "image/png", &got), SC_OK, "%s",
                     sc_error_message());
        cr_expect_arr_eq(got.x, want.x, sizeof want.x, "test sample %lld differs", (long long)i);
        free(png.data);
    }
    free(pixels);
    p->index_close(index);
}

Test(fashion_decode, pgm_files_rgb_and_larger_images)
{
    const sc_dataset_plugin *p = dataset("fashion_mnist");
    void *index = open_index(p, FASHION_DIR, "normalize=false");
    uint8_t *pixels = test_pixels();
    const uint8_t *px = pixels + 7 * PIXELS;
    image_input want, got;
    getitem_test(p, index, 7, &want);

    /* A binary PGM file, given by its path. */
    char path[] = "/tmp/scorch-decode-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    dprintf(fd, "P5\n28 28\n255\n");
    cr_assert_eq(write(fd, px, PIXELS), PIXELS);
    close(fd);
    image_input_init(&got);
    sc_raw_input raw = {.path = path};
    cr_assert_eq(p->index_decode(index, &raw, &got.list), SC_OK, "%s", sc_error_message());
    cr_expect_arr_eq(got.x, want.x, sizeof want.x);
    unlink(path);

    /* RGB with equal channels is that grey. */
    uint8_t rgb[PIXELS * 3];
    for (int k = 0; k < PIXELS * 3; k++)
        rgb[k] = px[k / 3];
    png_bytes png = png_of(rgb, SIDE, SIDE, 3);
    cr_assert_eq(decode(p, index, png.data, png.size, NULL, &got), SC_OK, "%s",
                 sc_error_message());
    cr_expect_arr_eq(got.x, want.x, sizeof want.x);
    free(png.data);

    /* Twice the size, each pixel a 2x2 block: area averaging gives it back. */
    uint8_t big[4 * PIXELS];
    for (int r = 0; r < 2 * SIDE; r++)
        for (int c = 0; c < 2 * SIDE; c++)
            big[r * 2 * SIDE + c] = px[(r / 2) * SIDE + c / 2];
    png = png_of(big, 2 * SIDE, 2 * SIDE, 1);
    cr_assert_eq(decode(p, index, png.data, png.size, "image/png", &got), SC_OK, "%s",
                 sc_error_message());
    expect_same(&got, &want, 1e-6f);
    free(png.data);
    free(pixels);
    p->index_close(index);
}

/* A dark item on a light background reads as Fashion-MNIST's light item on
 * black with invert=auto (the default) or true, as it is with false. */
Test(fashion_decode, invert)
{
    const sc_dataset_plugin *p = dataset("fashion_mnist");
    uint8_t *pixels = test_pixels();
    uint8_t photo[PIXELS];
    for (int k = 0; k < PIXELS; k++)
        photo[k] = (uint8_t)(255 - pixels[3 * PIXELS + k]);
    png_bytes png = png_of(photo, SIDE, SIDE, 1);
    static const char *const args[] = {"", "invert=auto", "invert=true", "invert=false"};
    for (int a = 0; a < 4; a++) {
        void *index = open_index(p, FASHION_DIR, args[a]);
        image_input want, got;
        getitem_test(p, index, 3, &want);
        cr_assert_eq(decode(p, index, png.data, png.size, "image/png", &got), SC_OK, "%s",
                     sc_error_message());
        if (a < 3) {
            expect_same(&got, &want, 1e-5f);
        } else {
            cr_expect_gt(got.x[0], want.x[0] + 1.0f, "invert=false keeps the light border");
        }
        /* The sample itself (a dark border) is never inverted by auto. */
        png_bytes plain = png_of(pixels + 3 * PIXELS, SIDE, SIDE, 1);
        cr_assert_eq(decode(p, index, plain.data, plain.size, "image/png", &got), SC_OK);
        if (a != 2)
            cr_expect_arr_eq(got.x, want.x, sizeof want.x, "%s", args[a]);
        free(plain.data);
        p->index_close(index);
    }
    free(png.data);
    free(pixels);
}

Test(fashion_decode, bad_inputs_and_args_are_refused)
{
    const sc_dataset_plugin *p = dataset("fashion_mnist");
    void *index = open_index(p, FASHION_DIR, "");
    image_input got;
    cr_expect_eq(decode(p, index, "1,2,3", 5, "text/csv", &got), SC_ERR_INVALID);
    assert_message_has("media type 'text/csv' is not an image");
    cr_expect_eq(decode(p, index, "1,2,3", 5, NULL, &got), SC_ERR_FORMAT);
    assert_message_has("not an image: neither PNG nor PGM");
    uint8_t px[PIXELS] = {0};
    png_bytes png = png_of(px, SIDE, SIDE, 1);
    cr_expect_eq(decode(p, index, png.data, png.size / 2, "image/png", &got), SC_ERR_FORMAT);
    assert_message_has("truncated PNG");
    free(png.data);
    sc_raw_input raw = {.path = "/nonexistent/shoe.png"};
    cr_expect_eq(p->index_decode(index, &raw, &got.list), SC_ERR_IO);
    assert_message_has("/nonexistent/shoe.png: unreadable: No such file or directory");
    p->index_close(index);

    sc_args *args;
    void *none = NULL;
    cr_assert_eq(sc_args_parse("invert=maybe", "dataset arg", &args), SC_OK);
    cr_expect_eq(p->index_open(FASHION_DIR, args, &none), SC_ERR_INVALID);
    assert_message_has("dataset arg 'invert': 'maybe' is not auto, true or false");
    sc_args_free(args);
}

/* ---- the class count in the spec ---- */

static sc_sample_spec spec_of(const sc_dataset_plugin *p, void *index)
{
    void *ds = NULL;
    cr_assert_eq(p->dataset_open(index, SC_SPLIT_TRAIN, &ds), SC_OK);
    sc_sample_spec spec = {0};
    p->dataset_spec(ds, &spec);
    return spec;
}

Test(spec_classes, each_shipped_dataset_gives_its_class_count)
{
    const sc_dataset_plugin *fm = dataset("fashion_mnist");
    void *index = open_index(fm, FASHION_DIR, "");
    cr_expect_eq(spec_of(fm, index).classes, 10);
    fm->index_close(index);
    const sc_dataset_plugin *syn = dataset("synthetic");
    index = open_index(syn, "", "");
    cr_expect_eq(spec_of(syn, index).classes, 4);
    syn->index_close(index);
    index = open_index(syn, "", "classes=7");
    cr_expect_eq(spec_of(syn, index).classes, 7);
    syn->index_close(index);
    index = open_index(syn, "", "task=regression");
    cr_expect_eq(spec_of(syn, index).classes, 0, "a regression's targets are no classes");
    syn->index_close(index);
}

/* The logits a shipped classifier makes for a spec of `classes` classes,
 * created as a host speaking 1.`minor` does, with model args `text`;
 * -1 when network_create refuses. */
static int64_t logits_of(const char *model, const char *text, int64_t classes, unsigned minor,
                         const char *output)
{
    const sc_model_plugin *m = plugin_symbol(model, "scorch_model_plugin");
    sc_sample_spec spec = {.n_inputs = 1, .n_targets = 1, .inputs = {{SC_F32, 3, {1, 8, 8}}},
                           .targets = {{SC_I64, 0, {0}}}, .classes = classes};
    sc_host_info host = {.abi = SC_ABI_HEADER(sc_host_info), .version = "test",
                         .device_kind = SC_DEVICE_CPU};
    host.abi.minor = (uint16_t)minor;
    sc_args *args;
    cr_assert_eq(sc_args_parse(text, "model arg", &args), SC_OK);
    sc_params *params = sc_params_new();
    sc_rng rng;
    sc_rng_init(&rng, 1, 0);
    void *net = NULL;
    const sc_host_info *outer = sc_host_set_info(&host);
    sc_status st = m->network_create(args, &spec, params, &rng, &net);
    sc_host_set_info(outer);
    int64_t logits = -1;
    for (int i = 0; st == SC_OK && i < sc_params_count(params); i++)
        if (strcmp(sc_params_at(params, i)->name, output) == 0)
            logits = sc_params_at(params, i)->shape[0];
    if (st == SC_OK)
        m->network_destroy(net);
    sc_params_free(params);
    sc_args_free(args);
    return logits;
}

Test(spec_classes, the_classifiers_take_it_unless_told)
{
    static const struct {
        const char *model, *args, *output;
    } models[] = {{"mlp", "hidden=4", "fc2.bias"},
                  {"cnn", "channels=2,hidden=", "fc1.bias"},
                  {"resnet", "stem=2,channels=2,blocks=1", "fc.bias"}};
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        const char *model = models[k].model, *out = models[k].output;
        char args[96];
        cr_expect_eq(logits_of(model, models[k].args, 7, 4, out), 7, "%s", model);
        cr_expect_eq(logits_of(model, models[k].args, 7, 3, out), 10,
                     "%s: a 1.3 host's spec has no class count", model);
        cr_expect_eq(logits_of(model, models[k].args, 0, 4, out), 10, "%s", model);
        snprintf(args, sizeof args, "%s,classes=7", models[k].args);
        cr_expect_eq(logits_of(model, args, 7, 4, out), 7, "%s", model);
        snprintf(args, sizeof args, "%s,classes=3", models[k].args);
        cr_expect_eq(logits_of(model, args, 0, 4, out), 3, "%s", model);
        cr_expect_eq(logits_of(model, args, 7, 4, out), -1, "%s", model);
        char part[96];
        snprintf(part, sizeof part, "%s: model arg classes=3, but the dataset's targets have 7 "
                 "classes", model);
        assert_message_has(part);
    }
}

/* ---- CSV rows: synthetic, and the reader ---- */

Test(synthetic_decode, a_row_of_features_is_the_input)
{
    const sc_dataset_plugin *p = dataset("synthetic");
    void *index = open_index(p, "", "features=3");
    float x[3] = {0};
    sc_tensor t;
    sc_tensor_init(&t, SC_F32, 1, (const int64_t[]){3});
    t.data = x;
    sc_tensor_list in = {1, {&t}};
    sc_raw_input raw = {.bytes = "1.5, -2,3e-1\n", .size = 13, .media_type = "text/csv"};
    cr_assert_eq(p->index_decode(index, &raw, &in), SC_OK, "%s", sc_error_message());
    cr_expect_arr_eq(x, ((float[]){1.5f, -2.0f, 0.3f}), sizeof x);
    raw = (sc_raw_input){.bytes = "1,2", .size = 3};
    cr_expect_eq(p->index_decode(index, &raw, &in), SC_ERR_FORMAT);
    assert_message_has("expected 3 comma-separated numbers, got 2 fields");
    raw.media_type = "image/png";
    cr_expect_eq(p->index_decode(index, &raw, &in), SC_ERR_INVALID);
    assert_message_has("media type 'image/png' is not text/csv");
    p->index_close(index);
}

static sc_status read_row(const char *text, float *values, int64_t n)
{
    sc_raw_input raw = {.bytes = text, .size = strlen(text)};
    return sc_csv_read_row(&raw, values, n);
}

Test(csv, rows_and_their_refusals)
{
    float v[2] = {-9, -9};
    cr_expect_eq(read_row(" 1 ,\t2.25\r\n", v, 2), SC_OK, "%s", sc_error_message());
    cr_expect_arr_eq(v, ((float[]){1, 2.25f}), sizeof v);
    static const struct {
        const char *text, *message;
    } bad[] = {
        {"x,y", "field 1, 'x', is not a finite number"},
        {"1,", "field 2, '', is not a finite number"},
        {"1,2 3", "field 2, '2 3', is not a finite number"},
        {"1,nan", "field 2, 'nan', is not a finite number"},
        {"1,1e999", "field 2, '1e999', is not a finite number"},
        {"1,2\n3,4\n", "holds more than one row"},
        {"1,2,3", "expected 2 comma-separated numbers, got 3 fields"},
        {"", "expected 2 comma-separated numbers, got 1 field"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        v[0] = v[1] = -9;
        cr_expect_eq(read_row(bad[i].text, v, 2), SC_ERR_FORMAT, "'%s' read", bad[i].text);
        assert_message_has(bad[i].message);
        cr_expect_eq(v[0], -9.0f, "a refusal leaves the values alone");
    }
    sc_raw_input raw = {.bytes = "1,\0002", .size = 4};
    cr_expect_eq(sc_csv_read_row(&raw, v, 2), SC_ERR_FORMAT);
    assert_message_has("NUL byte");
}

Test(csv, a_file_holds_one_row)
{
    char path[] = "/tmp/scorch-row-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    dprintf(fd, "0.5,4\n");
    close(fd);
    float v[2];
    sc_raw_input raw = {.path = path, .media_type = "text/csv"};
    cr_assert_eq(sc_csv_read_row(&raw, v, 2), SC_OK, "%s", sc_error_message());
    cr_expect_arr_eq(v, ((float[]){0.5f, 4}), sizeof v);
    cr_expect_eq(sc_csv_read_row(&raw, v, 3), SC_ERR_FORMAT);
    char part[96];
    snprintf(part, sizeof part, "%s: expected 3 comma-separated numbers", path);
    assert_message_has(part);
    unlink(path);
    cr_expect_eq(sc_csv_read_row(&raw, v, 2), SC_ERR_IO);
    snprintf(part, sizeof part, "%s: unreadable", path);
    assert_message_has(part);
}
