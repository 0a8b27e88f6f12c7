/* image.c — PNG (libpng) and PGM decoding, grey conversion and resizing
 * for dataset plugins (scorch/image.h). */
#include "scorch/image.h"

#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "whole_file.h"

/* A file larger than this is refused before it is read: no PNG or PGM of
 * SC_IMAGE_MAX_PIXELS pixels needs more (16-bit RGBA, uncompressed, is
 * 512 MiB). */
#define MAX_FILE_BYTES ((size_t)1 << 30)

/* ---- sizes ---- */

static sc_status check_size(int64_t height, int64_t width)
{
    if (height < 1 || width < 1)
        return sc_error_set(SC_ERR_FORMAT, "an image of %lldx%lld pixels is empty",
                            (long long)width, (long long)height);
    if (height > SC_IMAGE_MAX_PIXELS || width > SC_IMAGE_MAX_PIXELS / height)
        return sc_error_set(SC_ERR_FORMAT, "absurd size %lldx%lld: more than 2^26 (%lld) pixels",
                            (long long)width, (long long)height,
                            (long long)SC_IMAGE_MAX_PIXELS);
    return SC_OK;
}

/* Pixels of height x width x channels floats, or NULL with the message set. */
static float *alloc_pixels(int64_t height, int64_t width, int channels)
{
    float *p = malloc((size_t)(height * width * channels) * sizeof *p);
    if (!p)
        sc_error_set(SC_ERR_NOMEM, "out of memory for a %lldx%lld image", (long long)width,
                     (long long)height);
    return p;
}

/* ---- PNG ---- */

static const unsigned char png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

/* One decode: the bytes, and what must be freed should libpng longjmp. */
typedef struct png_reader {
    const unsigned char *bytes;
    size_t size, at;
    bool truncated;
    char message[256]; /* libpng's error */
    png_structp png;
    png_infop info;
    unsigned char *rows; /* the decoded bytes, height * rowbytes */
    png_bytep *row_pointers;
    float *pixels;
} png_reader;

static void png_on_error(png_structp png, png_const_charp message)
{
    png_reader *r = png_get_error_ptr(png);
    snprintf(r->message, sizeof r->message, "%s", message);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp message)
{
    (void)png;
    (void)message; /* a warning leaves a readable image: nothing to report */
}

static void png_read_bytes(png_structp png, png_bytep out, size_t n)
{
    png_reader *r = png_get_io_ptr(png);
    if (n > r->size - r->at) {
        r->truncated = true;
        png_error(png, "the data ends early");
    }
    memcpy(out, r->bytes + r->at, n);
    r->at += n;
}

/* Asks libpng for 8- or 16-bit samples of 1 to 4 channels, whatever the
 * file stores: palettes and low bit depths expanded, transparency as alpha. */
static void png_normalise(png_structp png, png_infop info)
{
    int color = png_get_color_type(png, info);
    if (color == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS))
        png_set_tRNS_to_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
}

/* The decoded rows as floats: 8-bit b -> b / 255, 16-bit big-endian v ->
 * v / 65535. */
static void png_to_floats(const unsigned char *rows, size_t count, bool sixteen, float *out)
{
    for (size_t i = 0; i < count; i++)
        out[i] = sixteen ? (float)(rows[2 * i] << 8 | rows[2 * i + 1]) / 65535.0f
                         : (float)rows[i] / 255.0f;
}

/* Everything libpng may longjmp out of; what it allocates is in r. */
static sc_status png_decode_guarded(png_reader *r, sc_image *out)
{
    if (setjmp(png_jmpbuf(r->png)))
        return sc_error_set(SC_ERR_FORMAT, r->truncated ? "truncated PNG: %s" : "corrupt PNG: %s",
                            r->message);
    png_set_read_fn(r->png, r, png_read_bytes);
    png_read_info(r->png, r->info);
    int64_t width = png_get_image_width(r->png, r->info);
    int64_t height = png_get_image_height(r->png, r->info);
    SC_TRY(check_size(height, width));
    png_normalise(r->png, r->info);
    int channels = png_get_channels(r->png, r->info);
    bool sixteen = png_get_bit_depth(r->png, r->info) == 16;
    size_t rowbytes = png_get_rowbytes(r->png, r->info);
    if (channels < 1 || channels > 4 || rowbytes != (size_t)width * channels * (sixteen ? 2 : 1))
        return sc_error_set(SC_ERR_FORMAT, "corrupt PNG: %d channels of %zu bytes a row",
                            channels, rowbytes);
    r->rows = malloc((size_t)height * rowbytes);
    r->row_pointers = malloc((size_t)height * sizeof *r->row_pointers);
    r->pixels = r->rows && r->row_pointers ? alloc_pixels(height, width, channels) : NULL;
    if (!r->pixels)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for a %lldx%lld PNG", (long long)width,
                            (long long)height);
    for (int64_t y = 0; y < height; y++)
        r->row_pointers[y] = r->rows + (size_t)y * rowbytes;
    png_read_image(r->png, r->row_pointers);
    png_read_end(r->png, NULL);
    png_to_floats(r->rows, (size_t)(height * width * channels), sixteen, r->pixels);
    *out = (sc_image){height, width, channels, r->pixels};
    r->pixels = NULL; /* now the caller's */
    return SC_OK;
}

static sc_status decode_png(const unsigned char *bytes, size_t size, sc_image *out)
{
    png_reader r = {.bytes = bytes, .size = size};
    r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, png_on_error, png_on_warning);
    r.info = r.png ? png_create_info_struct(r.png) : NULL;
    sc_status st = r.info ? png_decode_guarded(&r, out)
                          : sc_error_set(SC_ERR_NOMEM, "out of memory starting libpng");
    png_destroy_read_struct(&r.png, &r.info, NULL);
    free(r.rows);
    free(r.row_pointers);
    free(r.pixels);
    return st;
}

/* ---- PGM ---- */

/* A PGM being parsed: bytes and position. */
typedef struct pgm_reader {
    const unsigned char *bytes;
    size_t size, at;
} pgm_reader;

static bool pgm_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Skips whitespace and '#' comments (to the end of their line). */
static void pgm_skip(pgm_reader *r)
{
    while (r->at < r->size) {
        if (r->bytes[r->at] == '#')
            while (r->at < r->size && r->bytes[r->at] != '\n')
                r->at++;
        else if (pgm_space(r->bytes[r->at]))
            r->at++;
        else
            return;
    }
}

/* A decimal number of at most max after whitespace and comments; `what`
 * names it in messages. */
static sc_status pgm_number(pgm_reader *r, const char *what, int64_t max, int64_t *value)
{
    pgm_skip(r);
    if (r->at >= r->size)
        return sc_error_set(SC_ERR_FORMAT, "truncated PGM: it ends before its %s", what);
    if (r->bytes[r->at] < '0' || r->bytes[r->at] > '9')
        return sc_error_set(SC_ERR_FORMAT, "corrupt PGM: its %s is not a number", what);
    *value = 0;
    for (; r->at < r->size && r->bytes[r->at] >= '0' && r->bytes[r->at] <= '9'; r->at++) {
        *value = *value * 10 + (r->bytes[r->at] - '0');
        if (*value > max)
            return sc_error_set(SC_ERR_FORMAT, "corrupt PGM: its %s is above %lld", what,
                                (long long)max);
    }
    return SC_OK;
}

/* Binary samples (P5): one byte each, two (big-endian) when maxval > 255. */
static sc_status pgm_binary(pgm_reader *r, int64_t count, int64_t maxval, float *out)
{
    int bytes = maxval > 255 ? 2 : 1;
    r->at++; /* the one whitespace character after maxval */
    if ((r->size - r->at) / bytes < (size_t)count)
        return sc_error_set(SC_ERR_FORMAT, "truncated PGM: %lld samples need %lld bytes, it "
                            "has %zu", (long long)count, (long long)(count * bytes),
                            r->size - r->at);
    const unsigned char *p = r->bytes + r->at;
    for (int64_t i = 0; i < count; i++) {
        int64_t v = bytes == 2 ? p[2 * i] << 8 | p[2 * i + 1] : p[i];
        if (v > maxval)
            return sc_error_set(SC_ERR_FORMAT, "corrupt PGM: sample %lld is %lld, above its "
                                "maxval %lld", (long long)i, (long long)v, (long long)maxval);
        out[i] = (float)v / (float)maxval;
    }
    return SC_OK;
}

/* ASCII samples (P2): decimal numbers. */
static sc_status pgm_ascii(pgm_reader *r, int64_t count, int64_t maxval, float *out)
{
    for (int64_t i = 0; i < count; i++) {
        int64_t v;
        char what[48];
        snprintf(what, sizeof what, "sample %lld", (long long)i);
        SC_TRY(pgm_number(r, what, maxval, &v));
        out[i] = (float)v / (float)maxval;
    }
    return SC_OK;
}

static sc_status decode_pgm(const unsigned char *bytes, size_t size, sc_image *out)
{
    pgm_reader r = {bytes, size, 2};
    bool binary = bytes[1] == '5';
    int64_t width, height, maxval;
    if (size < 3 || !pgm_space(bytes[2]))
        return sc_error_set(SC_ERR_FORMAT, "not an image: 'P%c' is not followed by whitespace",
                            bytes[1]);
    /* Any size up to 2^40 parses, so that check_size names an absurd one. */
    SC_TRY(pgm_number(&r, "width", (int64_t)1 << 40, &width));
    SC_TRY(pgm_number(&r, "height", (int64_t)1 << 40, &height));
    SC_TRY(check_size(height, width));
    SC_TRY(pgm_number(&r, "maxval", 65535, &maxval));
    if (maxval < 1)
        return sc_error_set(SC_ERR_FORMAT, "corrupt PGM: maxval 0");
    if (r.at >= size || !pgm_space(bytes[r.at]))
        return sc_error_set(SC_ERR_FORMAT, "truncated PGM: no whitespace after maxval");
    float *pixels = alloc_pixels(height, width, 1);
    if (!pixels)
        return SC_ERR_NOMEM;
    sc_status st = binary ? pgm_binary(&r, height * width, maxval, pixels)
                          : pgm_ascii(&r, height * width, maxval, pixels);
    if (st != SC_OK) {
        free(pixels);
        return st;
    }
    *out = (sc_image){height, width, 1, pixels};
    return SC_OK;
}

/* ---- reading ---- */

sc_status sc_image_decode(const void *bytes, size_t size, sc_image *out)
{
    const unsigned char *b = bytes;
    if (!b || size == 0)
        return sc_error_set(SC_ERR_FORMAT, "not an image: no bytes");
    if (size >= sizeof png_signature && memcmp(b, png_signature, sizeof png_signature) == 0)
        return decode_png(b, size, out);
    if (size >= 2 && b[0] == 'P' && (b[1] == '2' || b[1] == '5'))
        return decode_pgm(b, size, out);
    return sc_error_set(SC_ERR_FORMAT, "not an image: neither PNG nor PGM (P2, P5)");
}

sc_status sc_image_read(const char *path, sc_image *out)
{
    char *bytes = NULL;
    size_t size = 0;
    sc_status st = sc_whole_file_read(path, MAX_FILE_BYTES, "an image of 2^26 pixels takes",
                                      &bytes, &size);
    if (st == SC_OK) {
        st = sc_image_decode(bytes, size, out);
        free(bytes);
    }
    return st == SC_OK ? SC_OK : sc_error_wrap(st, "%s", path);
}

sc_status sc_image_read_raw(const sc_raw_input *raw, sc_image *out)
{
    const char *type = raw->media_type;
    if (type && strncmp(type, "image/", 6) != 0)
        return sc_error_set(SC_ERR_INVALID, "%s%smedia type '%s' is not an image",
                            raw->path ? raw->path : "", raw->path ? ": " : "", type);
    return raw->path ? sc_image_read(raw->path, out) : sc_image_decode(raw->bytes, raw->size, out);
}

void sc_image_free(sc_image *img)
{
    free(img->pixels);
    *img = (sc_image){0};
}

/* ---- grey ---- */

/* BT.601 luma; a pixel with equal channels keeps that value exactly. */
static float luma(float r, float g, float b)
{
    if (r == g && g == b)
        return r;
    return 0.299f * r + 0.587f * g + 0.114f * b;
}

static float grey_of(const float *px, int channels, float background)
{
    float y = channels >= 3 ? luma(px[0], px[1], px[2]) : px[0];
    bool alpha = channels == 2 || channels == 4;
    if (!alpha)
        return y;
    float a = px[channels - 1];
    return y * a + background * (1.0f - a);
}

sc_status sc_image_to_grey(sc_image *img, float background)
{
    if (!img->pixels || img->channels < 1 || img->channels > 4)
        return sc_error_set(SC_ERR_INVALID, "sc_image_to_grey: not an image of 1 to 4 channels");
    if (img->channels == 1)
        return SC_OK;
    int64_t n = img->height * img->width;
    /* In place: pixel i is written after it was read, at i <= i * channels. */
    for (int64_t i = 0; i < n; i++)
        img->pixels[i] = grey_of(img->pixels + i * img->channels, img->channels, background);
    float *smaller = realloc(img->pixels, (size_t)n * sizeof *smaller);
    if (smaller) /* else the larger block still holds the grey pixels */
        img->pixels = smaller;
    img->channels = 1;
    return SC_OK;
}

/* ---- resizing ---- */

/* Which source pixels make output pixel i along one axis, and how much
 * each weighs: taps[i * max_taps + k] from source index first[i] + k. */
typedef struct axis_taps {
    int64_t *first;
    double *weight;
    int max_taps;
} axis_taps;

/* Area averaging: output i covers [i * scale, (i + 1) * scale) of the
 * source, scale = src / dst > 1. */
static void area_taps(int64_t src, int64_t dst, axis_taps *t)
{
    double scale = (double)src / (double)dst;
    for (int64_t i = 0; i < dst; i++) {
        double lo = (double)i * scale, hi = (double)(i + 1) * scale;
        int64_t j = (int64_t)floor(lo);
        t->first[i] = j;
        for (int k = 0; k < t->max_taps; k++, j++) {
            double cover = fmin(hi, (double)(j + 1)) - fmax(lo, (double)j);
            t->weight[i * t->max_taps + k] = j < src && cover > 0 ? cover / scale : 0;
        }
    }
}

/* Bilinear, pixel centres aligned, clamped at the edges. */
static void bilinear_taps(int64_t src, int64_t dst, axis_taps *t)
{
    for (int64_t i = 0; i < dst; i++) {
        double x = ((double)i + 0.5) * (double)src / (double)dst - 0.5;
        x = fmin(fmax(x, 0.0), (double)(src - 1));
        int64_t j = (int64_t)floor(x);
        double right = j + 1 < src ? x - (double)j : 0;
        t->first[i] = j;
        t->weight[i * 2] = 1 - right;
        t->weight[i * 2 + 1] = right;
    }
}

static void free_taps(axis_taps *t)
{
    free(t->first);
    free(t->weight);
}

static sc_status make_taps(int64_t src, int64_t dst, axis_taps *t)
{
    t->max_taps = dst < src ? (int)ceil((double)src / (double)dst) + 1 : 2;
    t->first = malloc((size_t)dst * sizeof *t->first);
    t->weight = malloc((size_t)dst * (size_t)t->max_taps * sizeof *t->weight);
    if (!t->first || !t->weight) {
        free_taps(t);
        return sc_error_set(SC_ERR_NOMEM, "out of memory resizing an image");
    }
    if (dst < src)
        area_taps(src, dst, t);
    else
        bilinear_taps(src, dst, t);
    return SC_OK;
}

/* One axis of `lines` lines, each of src samples `stride` floats apart
 * (and lines `line_step` apart), into dst samples per line in out, laid
 * out the same way. */
typedef struct axis_pass {
    int64_t lines, src, dst;
    int64_t in_stride, in_line, out_stride, out_line;
} axis_pass;

static void resample(const float *in, float *out, const axis_pass *p, const axis_taps *t,
                     int channels)
{
    for (int64_t l = 0; l < p->lines; l++)
        for (int64_t i = 0; i < p->dst; i++)
            for (int c = 0; c < channels; c++) {
                double sum = 0;
                for (int k = 0; k < t->max_taps; k++) {
                    double w = t->weight[i * t->max_taps + k];
                    if (w != 0)
                        sum += w * in[l * p->in_line + (t->first[i] + k) * p->in_stride + c];
                }
                out[l * p->out_line + i * p->out_stride + c] = (float)sum;
            }
}

/* Resizes one axis of in (height x width x channels) into *out, a new
 * image; the same size is a copy. */
static sc_status resize_axis(const sc_image *in, bool along_width, int64_t dst, sc_image *out)
{
    int64_t src = along_width ? in->width : in->height, ch = in->channels;
    int64_t out_w = along_width ? dst : in->width, out_h = along_width ? in->height : dst;
    float *pixels = alloc_pixels(out_h, out_w, in->channels);
    if (!pixels)
        return SC_ERR_NOMEM;
    *out = (sc_image){out_h, out_w, in->channels, pixels};
    if (src == dst) {
        memcpy(pixels, in->pixels, (size_t)(out_h * out_w * ch) * sizeof *pixels);
        return SC_OK;
    }
    axis_taps taps;
    if (make_taps(src, dst, &taps) != SC_OK) {
        sc_image_free(out);
        return SC_ERR_NOMEM;
    }
    axis_pass pass = along_width
        ? (axis_pass){in->height, src, dst, ch, in->width * ch, ch, out_w * ch}
        : (axis_pass){in->width, src, dst, in->width * ch, ch, out_w * ch, ch};
    resample(in->pixels, pixels, &pass, &taps, in->channels);
    free_taps(&taps);
    return SC_OK;
}

sc_status sc_image_resize(sc_image *img, int64_t height, int64_t width)
{
    if (!img->pixels || img->channels < 1 || img->channels > 4)
        return sc_error_set(SC_ERR_INVALID, "sc_image_resize: not an image of 1 to 4 channels");
    SC_TRY(check_size(height, width));
    if (height == img->height && width == img->width)
        return SC_OK;
    sc_image rows, done;
    SC_TRY(resize_axis(img, true, width, &rows));
    sc_status st = resize_axis(&rows, false, height, &done);
    sc_image_free(&rows);
    if (st != SC_OK)
        return st;
    sc_image_free(img);
    *img = done;
    return SC_OK;
}
