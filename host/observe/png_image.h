/* png_image.h — an image tensor as PNG bytes (libpng), for TensorBoard's
 * image summaries.
 *
 * An image is a CPU tensor of shape [H, W] (grey) or [C, H, W] with C = 1
 * (grey) or 3 (RGB), of dtype u8 (0..255) or f32 (0..1; values outside
 * are clamped, NaN becomes 0).
 *
 * Thread rule: any thread; nothing is shared.
 */
#ifndef SCORCH_HOST_PNG_IMAGE_H
#define SCORCH_HOST_PNG_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "scorch/tensor.h"

typedef struct host_png {
    uint8_t *data; /* the PNG file's bytes */
    size_t len, cap;
    int height, width, channels; /* channels: 1 grey, 3 RGB */
} host_png;

/* Whether `image` is an image as above: SC_ERR_INVALID with a message
 * saying what is wrong ("image must be ... ; got i32 [2, 3]") if not.
 * Sets *channels, *height, *width. */
sc_status host_png_check(const sc_tensor *image, int *channels, int *height, int *width);

/* Encodes `image` into *out (zero it first); free with host_png_free. */
sc_status host_png_encode(const sc_tensor *image, host_png *out);
void host_png_free(host_png *png);

#endif
