/* fm_png — writes the first N Fashion-MNIST test images as 8-bit grey
 * PNG files, test-0.png ... in OUT_DIR, for the check of the classify
 * sample (samples/check-classify.sh), which compares what it says of them
 * with scorch-test's predictions for the same samples.
 *
 * Usage: fm_png DATASET_DIR OUT_DIR N
 */
#include <png.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../plugins/fashion_mnist/idx.h"

enum { SIDE = 28 };

/* libpng's simplified API writes the whole file. */
static int write_png(const char *dir, int i, const uint8_t *pixels)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/test-%d.png", dir, i);
    png_image image = {.version = PNG_IMAGE_VERSION, .width = SIDE, .height = SIDE,
                       .format = PNG_FORMAT_GRAY};
    if (png_image_write_to_file(&image, path, 0, pixels, SIDE, NULL))
        return 1;
    fprintf(stderr, "fm_png: cannot write %s: %s\n", path, image.message);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: fm_png DATASET_DIR OUT_DIR N\n");
        return 2;
    }
    char images[4096];
    snprintf(images, sizeof images, "%s/t10k-images-idx3-ubyte.gz", argv[1]);
    int64_t count;
    uint8_t *pixels;
    if (idx_read_u8(images, 3, (const int64_t[]){SIDE, SIDE}, &count, &pixels) != SC_OK) {
        fprintf(stderr, "fm_png: %s\n", sc_error_message());
        return 1;
    }
    int n = atoi(argv[3]), ok = n > 0 && n <= count;
    for (int i = 0; ok && i < n; i++)
        ok = write_png(argv[2], i, pixels + (int64_t)i * SIDE * SIDE);
    free(pixels);
    return ok ? 0 : 1;
}
