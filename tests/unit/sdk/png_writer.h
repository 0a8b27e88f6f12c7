/* png_writer.h — PNG files made in memory with libpng, for the tests of
 * the image readers (test_image.c, test_decode.c). */
#ifndef SCORCH_TESTS_PNG_WRITER_H
#define SCORCH_TESTS_PNG_WRITER_H

#include <png.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct png_bytes {
    unsigned char *data; /* malloc'd: the caller frees it */
    size_t size, cap;
} png_bytes;

/* A PNG of w x h pixels of `color` type (PNG_COLOR_TYPE_*) and `depth`
 * bits, from rows packed as PNG stores them (16-bit samples big-endian);
 * a palette image has n_palette RGB entries and, with trns, as many
 * alpha values. */
typedef struct png_spec {
    int w, h, color, depth;
    bool interlace;
    const unsigned char *pixels;
    const png_color *palette;
    int n_palette;
    const unsigned char *trns;
} png_spec;

png_bytes png_write_spec(const png_spec *s);

#endif
