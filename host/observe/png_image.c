#include "observe/png_image.h"

#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds what one summary may hold: TensorBoard reads whole events into memory. */
enum { PNG_MAX_PIXEL_BYTES = 1 << 28 };

static sc_status bad_image(const sc_tensor *image, const char *problem)
{
    char shape[96];
    sc_shape_str(image->ndim, image->shape, shape, sizeof shape);
    return sc_error_set(SC_ERR_INVALID,
                        "image must be u8 (0..255) or f32 (0..1) of shape [H, W] or [C, H, W] "
                        "with C = 1 or 3 on the CPU; %s: got %s %s on %s",
                        problem, sc_dtype_name(image->dtype), shape,
                        image->device.kind == SC_DEVICE_CPU ? "the CPU" : "a GPU");
}

sc_status host_png_check(const sc_tensor *image, int *channels, int *height, int *width)
{
    if (!image || !image->data)
        return sc_error_set(SC_ERR_INVALID, "image is NULL or has no data");
    if (image->dtype != SC_U8 && image->dtype != SC_F32)
        return bad_image(image, "wrong dtype");
    if (image->device.kind != SC_DEVICE_CPU)
        return bad_image(image, "not on the CPU");
    if (image->ndim != 2 && image->ndim != 3)
        return bad_image(image, "wrong number of dimensions");
    int64_t c = image->ndim == 3 ? image->shape[0] : 1;
    int64_t h = image->shape[image->ndim - 2], w = image->shape[image->ndim - 1];
    if (c != 1 && c != 3)
        return bad_image(image, "wrong number of channels");
    if (h < 1 || w < 1)
        return bad_image(image, "no pixels");
    if (h > PNG_MAX_PIXEL_BYTES / w / c)
        return bad_image(image, "too large");
    *channels = (int)c;
    *height = (int)h;
    *width = (int)w;
    return SC_OK;
}

static uint8_t f32_to_u8(float v)
{
    if (!(v > 0)) /* NaN too */
        return 0;
    return v >= 1 ? 255 : (uint8_t)(v * 255.0f + 0.5f);
}

/* [C, H, W] planes to [H, W, C] interleaved bytes, as PNG stores them. */
static void interleave(const sc_tensor *image, int c, size_t plane, uint8_t *out)
{
    for (int k = 0; k < c; k++) {
        for (size_t i = 0; i < plane; i++) {
            size_t src = (size_t)k * plane + i;
            out[i * (size_t)c + (size_t)k] = image->dtype == SC_U8
                                                 ? ((const uint8_t *)image->data)[src]
                                                 : f32_to_u8(((const float *)image->data)[src]);
        }
    }
}

typedef struct png_errors {
    char message[160];
} png_errors;

static void on_png_error(png_structp p, png_const_charp msg)
{
    png_errors *e = png_get_error_ptr(p);
    snprintf(e->message, sizeof e->message, "%s", msg);
    png_longjmp(p, 1);
}

static void on_png_warning(png_structp p, png_const_charp msg)
{
    (void)p;
    (void)msg; /* nothing a warning could change in what we write */
}

static void on_png_write(png_structp p, png_bytep data, size_t n)
{
    host_png *out = png_get_io_ptr(p);
    if (out->len + n > out->cap) {
        size_t cap = out->cap ? out->cap : 4096;
        while (cap < out->len + n)
            cap *= 2;
        uint8_t *grown = realloc(out->data, cap);
        if (!grown)
            png_error(p, "out of memory");
        out->data = grown;
        out->cap = cap;
    }
    memcpy(out->data + out->len, data, n);
    out->len += n;
}

static void on_png_flush(png_structp p)
{
    (void)p;
}

/* libpng reports errors by longjmp; nothing here changes after setjmp. */
static sc_status write_png(const uint8_t *pixels, host_png *out, png_errors *errors)
{
    png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, errors, on_png_error,
                                            on_png_warning);
    png_infop info = p ? png_create_info_struct(p) : NULL;
    if (!info) {
        png_destroy_write_struct(&p, NULL);
        return sc_error_set(SC_ERR_NOMEM, "out of memory for a PNG encoder");
    }
    if (setjmp(png_jmpbuf(p))) {
        png_destroy_write_struct(&p, &info);
        return sc_error_set(SC_ERR_INVALID, "PNG encoding failed: %s", errors->message);
    }
    png_set_write_fn(p, out, on_png_write, on_png_flush);
    png_set_IHDR(p, info, (png_uint_32)out->width, (png_uint_32)out->height, 8,
                 out->channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(p, info);
    size_t row = (size_t)out->width * (size_t)out->channels;
    for (int y = 0; y < out->height; y++)
        png_write_row(p, pixels + (size_t)y * row);
    png_write_end(p, NULL);
    png_destroy_write_struct(&p, &info);
    return SC_OK;
}

sc_status host_png_encode(const sc_tensor *image, host_png *out)
{
    SC_TRY(host_png_check(image, &out->channels, &out->height, &out->width));
    size_t plane = (size_t)out->height * (size_t)out->width;
    uint8_t *pixels = malloc(plane * (size_t)out->channels);
    if (!pixels)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for a %dx%d image", out->height,
                            out->width);
    interleave(image, out->channels, plane, pixels);
    png_errors errors = {""};
    sc_status st = write_png(pixels, out, &errors);
    free(pixels);
    if (st != SC_OK)
        host_png_free(out);
    return st;
}

void host_png_free(host_png *png)
{
    free(png->data);
    png->data = NULL;
    png->len = png->cap = 0;
}
