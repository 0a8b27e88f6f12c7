/* scorch/image.h — images for dataset plugins that take raw inputs
 * (index_decode, scorch/plugin.h): PNG and PGM from a file or from bytes,
 * conversion to grey, resizing.
 *
 * An image holds float samples in [0, 1], interleaved by pixel, rows top
 * to bottom: a stored value v of a format with maximum M (255 for 8 bits,
 * 65535 for 16, a PGM's maxval) becomes (float)v / (float)M, so an 8-bit
 * pixel b reads as b / 255.0f exactly. Values are taken as stored: no
 * gamma or colour-profile correction.
 *
 * Formats, told from the content (the file name and media type play no
 * part):
 *   PNG  (libpng): bit depths 1 to 16; grey, grey + alpha, RGB, RGBA and
 *        palette (expanded to RGB, or RGBA when it has transparency);
 *        interlaced or not. 16-bit samples keep their precision.
 *   PGM  binary (P5) and ASCII (P2), maxval 1 to 65535, '#' comments in
 *        the header.
 *
 * Every failure returns a status with a message, and leaves the output
 * untouched: not an image (neither format), truncated (the data ends
 * early), corrupt (a bad chunk, a bad CRC, a sample above maxval), an
 * absurd size (zero, or more than SC_IMAGE_MAX_PIXELS pixels: refused
 * before anything that size is allocated), unreadable (a missing file, a
 * folder). sc_image_read's messages start with the path.
 */
#ifndef SCORCH_IMAGE_H
#define SCORCH_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "scorch/export.h"
#include "scorch/plugin.h"
#include "scorch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most pixels an image may have: 2^26 (an 8192 x 8192 photo). */
#define SC_IMAGE_MAX_PIXELS ((int64_t)1 << 26)

typedef struct sc_image {
    int64_t height, width;
    int channels;  /* 1 grey, 2 grey + alpha, 3 RGB, 4 RGBA */
    float *pixels; /* [height][width][channels], each in [0, 1]; the SDK's:
                      free with sc_image_free */
} sc_image;

/* Decodes the PNG or PGM file at path into *out. */
SC_API sc_status sc_image_read(const char *path, sc_image *out);

/* Decodes a PNG or PGM held in memory (size bytes) into *out. */
SC_API sc_status sc_image_decode(const void *bytes, size_t size, sc_image *out);

/* Decodes index_decode's raw input: its file (sc_image_read) or its bytes
 * (sc_image_decode). A media type that is not "image/..." is refused
 * before anything is read; NULL lets the content decide. */
SC_API sc_status sc_image_read_raw(const sc_raw_input *raw, sc_image *out);

/* Converts img to one grey channel in place. Colour weighs its channels
 * by ITU-R BT.601's luma, Y = 0.299 R + 0.587 G + 0.114 B (a pixel with
 * R = G = B keeps that value exactly); alpha composites the pixel over
 * `background` (0 black .. 1 white): Y a + background (1 - a). A grey
 * image stays as it is. */
SC_API sc_status sc_image_to_grey(sc_image *img, float background);

/* Resizes img to height x width in place (each 1..SC_IMAGE_MAX_PIXELS in
 * product), each axis on its own:
 *   shrinking: area averaging — an output pixel is the mean of the source
 *     area it covers, partly covered source pixels weighted by the part
 *     covered (as OpenCV's INTER_AREA, Pillow's BOX). Every source pixel
 *     counts, so a large photo shrinks without the aliasing of a filter
 *     that samples a few source pixels per output pixel.
 *   enlarging: bilinear between the two nearest source pixels, pixel
 *     centres aligned (x_src = (x + 0.5) * src / dst - 0.5, clamped at the
 *     edges; PyTorch's align_corners=False): smooth, without the blocks
 *     of nearest-neighbour.
 *   the same size: the pixels are left exactly as they are.
 * The width is resized first (each row), then the height. */
SC_API sc_status sc_image_resize(sc_image *img, int64_t height, int64_t width);

/* Frees the pixels and zeroes img; a zeroed image is fine. */
SC_API void sc_image_free(sc_image *img);

#ifdef __cplusplus
}
#endif
#endif
