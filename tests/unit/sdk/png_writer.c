#include "png_writer.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static void append(png_structp png, png_bytep data, size_t n)
{
    png_bytes *b = png_get_io_ptr(png);
    if (b->size + n > b->cap) {
        b->cap = 2 * (b->size + n);
        b->data = realloc(b->data, b->cap);
        cr_assert_not_null(b->data);
    }
    memcpy(b->data + b->size, data, n);
    b->size += n;
}

static void flush(png_structp png) { (void)png; }

png_bytes png_write_spec(const png_spec *s)
{
    png_bytes b = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    cr_assert(png && info);
    cr_assert_eq(setjmp(png_jmpbuf(png)), 0, "libpng failed writing the test image");
    png_set_write_fn(png, &b, append, flush);
    png_set_IHDR(png, info, (png_uint_32)s->w, (png_uint_32)s->h, s->depth, s->color,
                 s->interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (s->palette)
        png_set_PLTE(png, info, s->palette, s->n_palette);
    if (s->trns)
        png_set_tRNS(png, info, s->trns, s->n_palette, NULL);
    png_write_info(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    png_bytep *rows = malloc((size_t)s->h * sizeof *rows);
    cr_assert_not_null(rows);
    for (int y = 0; y < s->h; y++)
        rows[y] = (png_bytep)s->pixels + (size_t)y * rowbytes;
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    return b;
}
