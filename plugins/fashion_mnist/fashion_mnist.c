/* fashion_mnist — the Fashion-MNIST dataset plugin.
 *
 * --dataset-path: the folder holding the four gzipped IDX files,
 * {train,t10k}-images-idx3-ubyte.gz and {train,t10k}-labels-idx1-ubyte.gz.
 * Splits: train = the first 60000 - valid_size images of the training
 * file, valid = its last valid_size, test = t10k.
 * Dataset args: valid_size (10000), normalize (true: (x/255 - mean) / std
 * with Fashion-MNIST's training mean and std; false: x/255), and the train
 * split's augmentation: crop_padding (0, off; at most 14: a random 28x28
 * window of the image zero-padded by N pixels on each side) and hflip
 * (false; a horizontal flip with probability 1/2). Augmentation draws from
 * getitem's rng, the sample's stream for the epoch, so a run stays a
 * function of its seed; valid and test are never augmented.
 * A sample: input f32 [1, 28, 28], target i64 [] (class 0..9).
 *
 * Raw inputs (index_decode): a PNG or PGM image of any size and colour
 * (scorch/image.h), made grey (BT.601; transparency over white), resized
 * to 28x28 (area averaging when shrinking, bilinear when enlarging) and
 * scaled as getitem scales the test split, after an optional inversion:
 * Fashion-MNIST draws light clothes on black, a photo usually shows a
 * dark item on a light background. Dataset arg invert: auto (the
 * default: invert when the mean of the 28x28 image's outermost ring of
 * pixels, its background, is above 0.5), true or false. A 28x28 8-bit
 * grey image of a test sample gives getitem's input bit for bit.
 *
 * The index keeps the pixels as u8 (47 MB for the training file, rather
 * than 188 MB as f32); getitem converts an image as it is in vectors, a
 * cropped or mirrored one through a 256-entry table (the same values).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <scorch/image.h>
#include <scorch/plugin.h>

#include "idx.h"

enum { SIDE = 28, PIXELS = SIDE * SIDE, CLASSES = 10, PATH_BYTES = 4096, MAX_PAD = SIDE / 2 };

/* The brightness above which a raw image's border is a light background. */
static const float light_border = 0.5f;

static const char *const class_names[CLASSES] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot",
};

/* Mean and std of the training pixels scaled to [0, 1]. */
static const float pixel_mean = 0.2860f, pixel_std = 0.3530f;

/* One images + labels pair of files. */
typedef struct fm_file_pair {
    int64_t count;
    uint8_t *pixels; /* [count, 28, 28] */
    uint8_t *labels; /* [count], each < CLASSES */
} fm_file_pair;

/* A split: a window on one file pair. A view into the index. */
typedef struct fm_dataset {
    const struct fm_index *index;
    const fm_file_pair *files;
    int64_t first, len;
    bool augment; /* the train split */
} fm_dataset;

/* Whether index_decode inverts an image (dataset arg invert). */
typedef enum fm_invert { INVERT_AUTO, INVERT_ALWAYS, INVERT_NEVER } fm_invert;

/* Dataset args. */
typedef struct fm_options {
    int64_t valid_size;
    bool normalize;
    int64_t crop_padding; /* 0..MAX_PAD */
    bool hflip;
    fm_invert invert;
} fm_options;

typedef struct fm_index {
    fm_file_pair train_files, test_files;
    float pixel_value[256]; /* pixel byte -> input value */
    fm_options options;
    fm_dataset splits[SC_SPLIT_COUNT];
} fm_index;

static sc_status parse_invert(const sc_args *args, fm_invert *invert)
{
    static const char *const names[] = {"auto", "true", "false"};
    const char *v = sc_args_get(args, "invert");
    for (int k = 0; k < 3; k++)
        if (!v || strcmp(v, names[k]) == 0) {
            *invert = (fm_invert)k;
            return SC_OK;
        }
    return sc_error_set(SC_ERR_INVALID, "dataset arg 'invert': '%s' is not auto, true or false",
                        v);
}

static sc_status parse_options(const sc_args *args, fm_options *o)
{
    static const char *const known[] = {"valid_size", "normalize", "crop_padding", "hflip",
                                        "invert", NULL};
    SC_TRY(sc_args_check_known(args, known));
    SC_TRY(parse_invert(args, &o->invert));
    SC_TRY(sc_args_int(args, "valid_size", 10000, &o->valid_size));
    SC_TRY(sc_args_bool(args, "normalize", true, &o->normalize));
    SC_TRY(sc_args_int(args, "crop_padding", 0, &o->crop_padding));
    SC_TRY(sc_args_bool(args, "hflip", false, &o->hflip));
    if (o->valid_size < 0)
        return sc_error_set(SC_ERR_INVALID, "dataset arg 'valid_size': %lld is negative",
                            (long long)o->valid_size);
    if (o->crop_padding < 0 || o->crop_padding > MAX_PAD)
        return sc_error_set(SC_ERR_INVALID, "dataset arg 'crop_padding': %lld is outside "
                            "0..%d", (long long)o->crop_padding, MAX_PAD);
    return SC_OK;
}

static sc_status check_dir(const char *path)
{
    struct stat st;
    if (!path || !*path)
        return sc_error_set(SC_ERR_INVALID, "no dataset path: pass --dataset-path, the "
                            "folder holding train-images-idx3-ubyte.gz and the rest");
    if (stat(path, &st) != 0)
        return sc_error_set(SC_ERR_IO, "dataset path %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return sc_error_set(SC_ERR_INVALID, "dataset path %s is not a folder", path);
    return SC_OK;
}

static void free_file_pair(fm_file_pair *p)
{
    free(p->pixels);
    free(p->labels);
    *p = (fm_file_pair){0};
}

static sc_status check_labels(const fm_file_pair *p, const char *path)
{
    for (int64_t i = 0; i < p->count; i++)
        if (p->labels[i] >= CLASSES)
            return sc_error_set(SC_ERR_FORMAT, "%s: label %d of item %lld is outside 0..%d",
                                path, p->labels[i], (long long)i, CLASSES - 1);
    return SC_OK;
}

/* Reads <dir>/<prefix>-images-idx3-ubyte.gz and the matching labels. */
static sc_status read_file_pair(fm_file_pair *p, const char *dir, const char *prefix)
{
    char images[PATH_BYTES], labels[PATH_BYTES];
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    int64_t n_labels;
    SC_TRY(idx_read_u8(images, 3, (const int64_t[]){SIDE, SIDE}, &p->count, &p->pixels));
    sc_status st = idx_read_u8(labels, 1, NULL, &n_labels, &p->labels);
    if (st == SC_OK && n_labels != p->count)
        st = sc_error_set(SC_ERR_FORMAT, "%s has %lld labels but %s has %lld images", labels,
                          (long long)n_labels, images, (long long)p->count);
    if (st == SC_OK)
        st = check_labels(p, labels);
    if (st != SC_OK)
        free_file_pair(p);
    return st;
}

/* The input value of a pixel x in [0, 1]: getitem's and index_decode's
 * one scaling. */
static float scaled(float x, bool normalize)
{
    return normalize ? (x - pixel_mean) / pixel_std : x;
}

static void fill_pixel_values(fm_index *ix, bool normalize)
{
    for (int b = 0; b < 256; b++)
        ix->pixel_value[b] = scaled((float)b / 255.0f, normalize);
}

static sc_status make_splits(fm_index *ix, int64_t valid_size)
{
    int64_t n = ix->train_files.count;
    if (valid_size >= n)
        return sc_error_set(SC_ERR_INVALID, "dataset arg 'valid_size': %lld leaves no "
                            "training images (the training file has %lld)",
                            (long long)valid_size, (long long)n);
    ix->splits[SC_SPLIT_TRAIN] = (fm_dataset){ix, &ix->train_files, 0, n - valid_size, true};
    ix->splits[SC_SPLIT_VALID] =
        (fm_dataset){ix, &ix->train_files, n - valid_size, valid_size, false};
    ix->splits[SC_SPLIT_TEST] = (fm_dataset){ix, &ix->test_files, 0, ix->test_files.count, false};
    return SC_OK;
}

static void fm_index_close(void *index)
{
    fm_index *ix = index;
    if (!ix)
        return;
    free_file_pair(&ix->train_files);
    free_file_pair(&ix->test_files);
    free(ix);
}

static sc_status fm_index_open(const char *path, const sc_args *args, void **index)
{
    *index = NULL;
    fm_options o;
    SC_TRY(parse_options(args, &o));
    SC_TRY(check_dir(path));
    fm_index *ix = calloc(1, sizeof *ix);
    if (!ix)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the Fashion-MNIST index");
    ix->options = o;
    sc_status st = read_file_pair(&ix->train_files, path, "train");
    if (st == SC_OK)
        st = read_file_pair(&ix->test_files, path, "t10k");
    if (st == SC_OK)
        st = make_splits(ix, o.valid_size);
    if (st != SC_OK) {
        fm_index_close(ix);
        return st;
    }
    fill_pixel_values(ix, o.normalize);
    *index = ix;
    return SC_OK;
}

static sc_status fm_dataset_open(void *index, sc_split split, void **dataset)
{
    fm_index *ix = index;
    if ((unsigned)split >= SC_SPLIT_COUNT)
        return sc_error_set(SC_ERR_INVALID, "fashion_mnist: no split %d", (int)split);
    *dataset = &ix->splits[split];
    return SC_OK;
}

static void fm_dataset_close(void *dataset)
{
    (void)dataset; /* a view into the index, which owns it */
}

static int64_t fm_dataset_len(void *dataset)
{
    return ((const fm_dataset *)dataset)->len;
}

static void fm_dataset_spec(void *dataset, sc_sample_spec *spec)
{
    *spec = (sc_sample_spec){
        .n_inputs = 1,
        .n_targets = 1,
        .inputs = {{SC_F32, 3, {1, SIDE, SIDE}}},
        .targets = {{SC_I64, 0, {0}}},
        .classes = CLASSES,
    };
}

/* Where output pixel (r, c) reads from: image pixel (r + dy, c' + dx),
 * with c' = 27 - c when flipped, else c. */
typedef struct fm_view {
    int dy, dx;
    bool flip;
} fm_view;

/* A random crop of the image padded by p is a shift by -p..p; the flip
 * comes after the crop, as in torchvision's RandomCrop then
 * RandomHorizontalFlip. Draws nothing when augmentation is off. */
static fm_view draw_view(const fm_options *o, sc_rng *rng)
{
    fm_view v = {0, 0, false};
    int pad = (int)o->crop_padding;
    if (pad > 0) {
        v.dy = (int)sc_rng_below(rng, (uint64_t)(2 * pad + 1)) - pad;
        v.dx = (int)sc_rng_below(rng, (uint64_t)(2 * pad + 1)) - pad;
    }
    if (o->hflip)
        v.flip = sc_rng_below(rng, 2) == 1;
    return v;
}

/* An image as it is: x [784] = the table's value of each byte, computed
 * in vectors by fill_pixel_values' expression (the same bits) rather than
 * looked up one pixel at a time. Its stores go 8 or 16 floats at a time,
 * which keeps the loader's store queue from filling while the source bytes
 * come from memory: the loader's share of the mlp's CPU time 5.3% -> 3.8%
 * (perf). */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void scale_image(const uint8_t *restrict src, float *restrict x, bool normalize)
{
    for (int k = 0; k < PIXELS; k++)
        x[k] = scaled((float)src[k] / 255.0f, normalize);
}

/* Pixels outside the image are black (byte 0), the padding's colour
 * before normalisation. */
static void write_view(const fm_index *ix, const uint8_t *src, fm_view v, float *x)
{
    const float *value = ix->pixel_value;
    if (v.dy == 0 && v.dx == 0 && !v.flip) {
        scale_image(src, x, ix->options.normalize);
        return;
    }
    for (int r = 0; r < SIDE; r++, x += SIDE) {
        int from_r = r + v.dy;
        if (from_r < 0 || from_r >= SIDE) {
            for (int c = 0; c < SIDE; c++)
                x[c] = value[0];
            continue;
        }
        const uint8_t *row = src + from_r * SIDE;
        if (!v.flip && v.dx == 0) { /* the common case: the row as it is */
            for (int c = 0; c < SIDE; c++)
                x[c] = value[row[c]];
        } else {
            for (int c = 0; c < SIDE; c++) {
                int from_c = (v.flip ? SIDE - 1 - c : c) + v.dx;
                x[c] = value[from_c >= 0 && from_c < SIDE ? row[from_c] : 0];
            }
        }
    }
}

static sc_status fm_dataset_getitem(void *dataset, int64_t i, sc_rng *rng,
                                    sc_tensor_list *inputs, sc_tensor_list *targets)
{
    const fm_dataset *ds = dataset;
    if (i < 0 || i >= ds->len)
        return sc_error_set(SC_ERR_INVALID, "fashion_mnist: sample %lld outside 0..%lld",
                            (long long)i, (long long)ds->len - 1);
    int64_t item = ds->first + i;
    const uint8_t *src = ds->files->pixels + item * PIXELS;
    fm_view view = ds->augment ? draw_view(&ds->index->options, rng) : (fm_view){0, 0, false};
    write_view(ds->index, src, view, sc_tensor_f32(inputs->t[0])); /* [1, 28, 28] */
    *(int64_t *)targets->t[0]->data = ds->files->labels[item]; /* [] */
    return SC_OK;
}

static const char *fm_class_name(void *index, int64_t label)
{
    return label >= 0 && label < CLASSES ? class_names[label] : NULL;
}

/* The mean of the outermost ring of a SIDE x SIDE image. */
static float border_mean(const float *px)
{
    double sum = 0;
    int n = 0;
    for (int r = 0; r < SIDE; r++)
        for (int c = 0; c < SIDE; c++)
            if (r == 0 || r == SIDE - 1 || c == 0 || c == SIDE - 1) {
                sum += px[r * SIDE + c];
                n++;
            }
    return (float)(sum / n);
}

static bool inverts(fm_invert invert, const float *px)
{
    return invert == INVERT_ALWAYS || (invert == INVERT_AUTO && border_mean(px) > light_border);
}

/* A grey SIDE x SIDE image into the input [1, 28, 28]. */
static void write_decoded(const fm_options *o, const float *px, float *x)
{
    bool invert = inverts(o->invert, px);
    for (int k = 0; k < PIXELS; k++)
        x[k] = scaled(invert ? 1.0f - px[k] : px[k], o->normalize);
}

static sc_status fm_index_decode(void *index, const sc_raw_input *raw, sc_tensor_list *inputs)
{
    const fm_index *ix = index;
    sc_image img = {0};
    sc_status st = sc_image_read_raw(raw, &img);
    if (st == SC_OK)
        st = sc_image_to_grey(&img, 1.0f); /* transparency reads as a white background */
    if (st == SC_OK)
        st = sc_image_resize(&img, SIDE, SIDE);
    if (st == SC_OK)
        write_decoded(&ix->options, img.pixels, sc_tensor_f32(inputs->t[0]));
    sc_image_free(&img);
    return st;
}

SC_PLUGIN_EXPORT const sc_dataset_plugin scorch_dataset_plugin = {
    .abi = SC_ABI_HEADER(sc_dataset_plugin),
    .name = "fashion_mnist",
    .description = "Fashion-MNIST from its gzipped IDX files: 28x28 grey images, 10 classes",
    .index_open = fm_index_open,
    .index_close = fm_index_close,
    .dataset_open = fm_dataset_open,
    .dataset_close = fm_dataset_close,
    .dataset_len = fm_dataset_len,
    .dataset_spec = fm_dataset_spec,
    .dataset_getitem = fm_dataset_getitem,
    .class_name = fm_class_name,
    .index_decode = fm_index_decode,
};
