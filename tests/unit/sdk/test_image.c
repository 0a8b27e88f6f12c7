/* scorch/image.h: PNG files written here with libpng in every colour type
 * and depth, hand-made PGMs, grey conversion, resizing, and truncated,
 * corrupt and hostile files, each refused with its message. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "png_writer.h"
#include "scorch/image.h"

static sc_image must_decode(const void *data, size_t size)
{
    sc_image img = {0};
    cr_assert_eq(sc_image_decode(data, size, &img), SC_OK, "%s", sc_error_message());
    return img;
}

static void assert_refused(const void *data, size_t size, const char *part)
{
    sc_image img = {.width = -7};
    cr_assert_eq(sc_image_decode(data, size, &img), SC_ERR_FORMAT, "decoded: should be refused");
    cr_assert(strstr(sc_error_message(), part), "message '%s' lacks '%s'", sc_error_message(),
              part);
    cr_expect_eq(img.width, -7, "a refusal leaves the output alone");
    cr_expect_null(img.pixels);
}

static void expect_pixels(const sc_image *img, int64_t h, int64_t w, int c, const float *want)
{
    cr_assert_eq(img->height, h);
    cr_assert_eq(img->width, w);
    cr_assert_eq(img->channels, c);
    for (int64_t i = 0; i < h * w * c; i++)
        cr_expect_float_eq(img->pixels[i], want[i], 1e-6f, "sample %lld: %g, want %g",
                           (long long)i, img->pixels[i], want[i]);
}

/* ---- PNG: every colour type ---- */

Test(png, grey_8_bit_reads_as_b_over_255_exactly)
{
    unsigned char px[6] = {0, 1, 127, 128, 254, 255};
    png_bytes b = png_write_spec(&(png_spec){3, 2, PNG_COLOR_TYPE_GRAY, 8, .pixels = px});
    sc_image img = must_decode(b.data, b.size);
    cr_assert_eq(img.height, 2);
    cr_assert_eq(img.width, 3);
    cr_assert_eq(img.channels, 1);
    for (int i = 0; i < 6; i++)
        cr_expect_eq(img.pixels[i], (float)px[i] / 255.0f, "pixel %d", i);
    sc_image_free(&img);
    cr_expect_null(img.pixels);
    free(b.data);
}

Test(png, grey_16_bit_keeps_its_precision)
{
    unsigned char px[4] = {0x12, 0x34, 0xff, 0xff}; /* 0x1234, 65535 */
    png_bytes b = png_write_spec(&(png_spec){2, 1, PNG_COLOR_TYPE_GRAY, 16, .pixels = px});
    sc_image img = must_decode(b.data, b.size);
    expect_pixels(&img, 1, 2, 1, (const float[]){0x1234 / 65535.0f, 1.0f});
    sc_image_free(&img);
    free(b.data);
}

Test(png, low_bit_depths_expand)
{
    unsigned char px[1] = {0xa0}; /* 1-bit: 1 0 1 0 */
    png_bytes b = png_write_spec(&(png_spec){4, 1, PNG_COLOR_TYPE_GRAY, 1, .pixels = px});
    sc_image img = must_decode(b.data, b.size);
    expect_pixels(&img, 1, 4, 1, (const float[]){1, 0, 1, 0});
    sc_image_free(&img);
    free(b.data);
}

Test(png, grey_alpha_rgb_and_rgba)
{
    unsigned char ga[4] = {255, 128, 0, 255};
    png_bytes b = png_write_spec(&(png_spec){2, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8, .pixels = ga});
    sc_image img = must_decode(b.data, b.size);
    expect_pixels(&img, 1, 2, 2, (const float[]){1, 128 / 255.0f, 0, 1});
    sc_image_free(&img);
    free(b.data);

    unsigned char rgb[6] = {255, 0, 0, 10, 20, 30};
    b = png_write_spec(&(png_spec){2, 1, PNG_COLOR_TYPE_RGB, 8, .pixels = rgb});
    img = must_decode(b.data, b.size);
    expect_pixels(&img, 1, 2, 3, (const float[]){1, 0, 0, 10 / 255.0f, 20 / 255.0f,
                                                 30 / 255.0f});
    sc_image_free(&img);
    free(b.data);

    unsigned char rgba16[8] = {0xff, 0xff, 0, 0, 0, 0, 0x80, 0x00};
    b = png_write_spec(&(png_spec){1, 1, PNG_COLOR_TYPE_RGBA, 16, .pixels = rgba16});
    img = must_decode(b.data, b.size);
    expect_pixels(&img, 1, 1, 4, (const float[]){1, 0, 0, 0x8000 / 65535.0f});
    sc_image_free(&img);
    free(b.data);
}

Test(png, palettes_expand_to_rgb_or_rgba)
{
    const png_color palette[2] = {{255, 0, 0}, {0, 0, 255}};
    unsigned char px[2] = {1, 0};
    png_bytes b = png_write_spec(&(png_spec){2, 1, PNG_COLOR_TYPE_PALETTE, 8, .pixels = px,
                                             .palette = palette, .n_palette = 2});
    sc_image img = must_decode(b.data, b.size);
    expect_pixels(&img, 1, 2, 3, (const float[]){0, 0, 1, 1, 0, 0});
    sc_image_free(&img);
    free(b.data);

    const unsigned char trns[2] = {255, 0};
    b = png_write_spec(&(png_spec){2, 1, PNG_COLOR_TYPE_PALETTE, 8, .pixels = px,
                                   .palette = palette, .n_palette = 2, .trns = trns});
    img = must_decode(b.data, b.size);
    expect_pixels(&img, 1, 2, 4, (const float[]){0, 0, 1, 0, 1, 0, 0, 1});
    sc_image_free(&img);
    free(b.data);
}

Test(png, interlaced_reads_as_plain)
{
    unsigned char px[64];
    for (int i = 0; i < 64; i++)
        px[i] = (unsigned char)(i * 4);
    png_bytes plain = png_write_spec(&(png_spec){8, 8, PNG_COLOR_TYPE_GRAY, 8, .pixels = px});
    png_bytes adam7 = png_write_spec(&(png_spec){8, 8, PNG_COLOR_TYPE_GRAY, 8, true, .pixels = px});
    cr_assert(plain.size != adam7.size || memcmp(plain.data, adam7.data, plain.size) != 0);
    sc_image a = must_decode(plain.data, plain.size), b = must_decode(adam7.data, adam7.size);
    cr_expect_arr_eq(a.pixels, b.pixels, 64 * sizeof(float));
    sc_image_free(&a);
    sc_image_free(&b);
    free(plain.data);
    free(adam7.data);
}

/* ---- PNG: broken and hostile files ---- */

static png_bytes small_grey_png(void)
{
    static unsigned char px[16 * 16];
    for (int i = 0; i < 16 * 16; i++)
        px[i] = (unsigned char)(i * 7);
    return png_write_spec(&(png_spec){16, 16, PNG_COLOR_TYPE_GRAY, 8, .pixels = px});
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Sets the IHDR's width and height (the chunk right after the signature)
 * and recomputes its CRC, so that only the size is wrong. */
static void set_png_size(png_bytes *b, uint32_t w, uint32_t h)
{
    unsigned char *ihdr = b->data + 8; /* length, "IHDR", 13 bytes, CRC */
    cr_assert(memcmp(ihdr + 4, "IHDR", 4) == 0);
    put_be32(ihdr + 8, w);
    put_be32(ihdr + 12, h);
    put_be32(ihdr + 8 + 13, (uint32_t)crc32(0, ihdr + 4, 4 + 13));
}

Test(png_refusals, truncated_anywhere)
{
    png_bytes b = small_grey_png();
    /* The signature, the header, and inside the image data. */
    size_t cuts[] = {12, 30, b.size / 2, b.size - 12};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++)
        assert_refused(b.data, cuts[i], "truncated PNG");
    free(b.data);
}

Test(png_refusals, a_bad_crc_is_corrupt)
{
    png_bytes b = small_grey_png();
    b.data[8 + 8 + 5] ^= 0x01; /* a byte of IHDR's data: its CRC no longer fits */
    assert_refused(b.data, b.size, "corrupt PNG");
    free(b.data);
}

Test(png_refusals, corrupt_image_data)
{
    png_bytes b = small_grey_png();
    /* The IDAT chunk's zlib stream, garbled, with its CRC made right again:
     * only the stream is wrong. */
    unsigned char *idat = b.data + 8 + 25;
    cr_assert(memcmp(idat + 4, "IDAT", 4) == 0);
    uint32_t len = be32(idat);
    memset(idat + 8, 0xff, len);
    put_be32(idat + 8 + len, (uint32_t)crc32(0, idat + 4, 4 + len));
    assert_refused(b.data, b.size, "corrupt PNG");
    free(b.data);
}

Test(png_refusals, absurd_and_empty_sizes)
{
    png_bytes b = small_grey_png();
    set_png_size(&b, 100000, 100000); /* 10^10 pixels: refused before allocating */
    assert_refused(b.data, b.size, "absurd size 100000x100000: more than 2^26");
    set_png_size(&b, 8193, 8192); /* one column past 2^26 */
    assert_refused(b.data, b.size, "absurd size 8193x8192");
    set_png_size(&b, 0, 16);
    assert_refused(b.data, b.size, "corrupt PNG"); /* libpng refuses a zero width */
    free(b.data);
}

Test(png_refusals, not_an_image)
{
    assert_refused("GIF89a....", 10, "not an image: neither PNG nor PGM");
    assert_refused("", 0, "not an image: no bytes");
    assert_refused("\x89PNG", 4, "not an image");
}

/* ---- PGM ---- */

Test(pgm, binary_8_and_16_bit_and_comments)
{
    static const char p5[] = "P5\n# a comment\n3 1\n255\n\x00\x80\xff";
    sc_image img = must_decode(p5, sizeof p5 - 1);
    expect_pixels(&img, 1, 3, 1, (const float[]){0, 128 / 255.0f, 1});
    cr_expect_eq(img.pixels[1], 128.0f / 255.0f, "exactly b / 255");
    sc_image_free(&img);

    static const char p5_16[] = "P5 2 1 1000 \x01\xf4\x03\xe8"; /* 500, 1000 */
    img = must_decode(p5_16, sizeof p5_16 - 1);
    expect_pixels(&img, 1, 2, 1, (const float[]){0.5f, 1});
    sc_image_free(&img);
}

Test(pgm, ascii)
{
    static const char p2[] = "P2\n2 2 # width height\n15\n0 5\n10   15\n";
    sc_image img = must_decode(p2, sizeof p2 - 1);
    expect_pixels(&img, 2, 2, 1, (const float[]){0, 5 / 15.0f, 10 / 15.0f, 1});
    sc_image_free(&img);
}

Test(pgm_refusals, truncated_corrupt_and_hostile)
{
    assert_refused("P5 4 4 255\n\x01\x02", 13, "truncated PGM: 16 samples need 16 bytes, it has 2");
    assert_refused("P5 4 4", 6, "truncated PGM: it ends before its maxval");
    assert_refused("P2 2 1 255\n1", 12, "truncated PGM: it ends before its sample 1");
    assert_refused("P2 2 1 9\n1 10\n", 14, "sample 1 is above 9");
    assert_refused("P5 1 1 7\n\x08", 10, "sample 0 is 8, above its maxval 7");
    assert_refused("P5 1 1 0\n\x00", 10, "maxval 0");
    assert_refused("P5 1 1 70000\n", 13, "maxval is above 65535");
    assert_refused("P5 x 1 255\n", 11, "width is not a number");
    assert_refused("P5 0 5 255\n", 11, "empty");
    assert_refused("P5 100000 100000 255\n", 21, "absurd size 100000x100000");
    assert_refused("P5 99999999999999999999 1 255\n", 30, "width is above");
    assert_refused("P6 1 1 255\n\x00\x00\x00", 14, "not an image");
    assert_refused("P5x", 3, "not followed by whitespace");
}

/* ---- files ---- */

Test(files, read_a_file_or_name_it_in_the_refusal)
{
    char path[] = "/tmp/scorch-image-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    static const char p2[] = "P2 1 1 255 51\n";
    cr_assert_eq(write(fd, p2, sizeof p2 - 1), (ssize_t)(sizeof p2 - 1));
    close(fd);
    sc_image img;
    cr_assert_eq(sc_image_read(path, &img), SC_OK, "%s", sc_error_message());
    cr_expect_eq(img.pixels[0], 51.0f / 255.0f);
    sc_image_free(&img);

    FILE *f = fopen(path, "w");
    fputs("P5 2 2 255\n", f);
    fclose(f);
    cr_assert_eq(sc_image_read(path, &img), SC_ERR_FORMAT);
    char want[128];
    snprintf(want, sizeof want, "%s: truncated PGM", path);
    cr_expect(strstr(sc_error_message(), want), "%s", sc_error_message());
    unlink(path);

    cr_assert_eq(sc_image_read(path, &img), SC_ERR_IO);
    snprintf(want, sizeof want, "%s: unreadable: No such file or directory", path);
    cr_expect(strstr(sc_error_message(), want), "%s", sc_error_message());
    cr_assert_eq(sc_image_read("/tmp", &img), SC_ERR_IO);
    cr_expect(strstr(sc_error_message(), "/tmp: unreadable: not a file"), "%s",
              sc_error_message());
}

/* ---- grey ---- */

static sc_image image_of(int64_t h, int64_t w, int c, const float *px)
{
    size_t n = (size_t)(h * w * c);
    sc_image img = {h, w, c, malloc(n * sizeof(float))};
    cr_assert_not_null(img.pixels);
    memcpy(img.pixels, px, n * sizeof(float));
    return img;
}

Test(grey, bt601_weights_and_alpha_over_the_background)
{
    sc_image rgb = image_of(1, 3, 3, (const float[]){1, 0, 0, 0, 1, 0, 0.2f, 0.2f, 0.2f});
    cr_assert_eq(sc_image_to_grey(&rgb, 0), SC_OK);
    expect_pixels(&rgb, 1, 3, 1, (const float[]){0.299f, 0.587f, 0.2f});
    cr_expect_eq(rgb.pixels[2], 0.2f, "equal channels keep their value exactly");
    sc_image_free(&rgb);

    /* Half-transparent white over black, and opaque grey over white. */
    sc_image ga = image_of(1, 2, 2, (const float[]){1, 0.5f, 0.25f, 1});
    cr_assert_eq(sc_image_to_grey(&ga, 0), SC_OK);
    expect_pixels(&ga, 1, 2, 1, (const float[]){0.5f, 0.25f});
    sc_image_free(&ga);
    sc_image rgba = image_of(1, 1, 4, (const float[]){0, 0, 1, 0});
    cr_assert_eq(sc_image_to_grey(&rgba, 1), SC_OK);
    expect_pixels(&rgba, 1, 1, 1, (const float[]){1}); /* transparent: the background */
    sc_image_free(&rgba);

    sc_image grey = image_of(1, 2, 1, (const float[]){0.1f, 0.9f});
    cr_assert_eq(sc_image_to_grey(&grey, 1), SC_OK);
    cr_expect_eq(grey.pixels[0], 0.1f);
    cr_expect_eq(grey.pixels[1], 0.9f);
    sc_image_free(&grey);
}

/* ---- resizing ---- */

Test(resize, the_same_size_is_exact)
{
    float px[6] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 1.0f / 3};
    sc_image img = image_of(2, 3, 1, px);
    cr_assert_eq(sc_image_resize(&img, 2, 3), SC_OK);
    cr_expect_arr_eq(img.pixels, px, sizeof px);
    sc_image_free(&img);
}

Test(resize, shrinking_averages_the_area_covered)
{
    /* 4x4 -> 2x2: each output the mean of a 2x2 block. */
    sc_image img = image_of(4, 4, 1, (const float[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                      12, 13, 14, 15});
    cr_assert_eq(sc_image_resize(&img, 2, 2), SC_OK);
    expect_pixels(&img, 2, 2, 1, (const float[]){2.5f, 4.5f, 10.5f, 12.5f});
    sc_image_free(&img);
    /* 3 -> 2 wide: output 0 covers [0, 1.5): source 0 whole, source 1 half. */
    img = image_of(1, 3, 1, (const float[]){0, 3, 6});
    cr_assert_eq(sc_image_resize(&img, 1, 2), SC_OK);
    expect_pixels(&img, 1, 2, 1, (const float[]){(0 + 1.5f) / 1.5f, (1.5f + 6) / 1.5f});
    sc_image_free(&img);
}

Test(resize, enlarging_is_bilinear_with_centres_aligned)
{
    sc_image img = image_of(1, 2, 2, (const float[]){0, 1, 1, 0}); /* two channels */
    cr_assert_eq(sc_image_resize(&img, 1, 4), SC_OK);
    expect_pixels(&img, 1, 4, 2, (const float[]){0, 1, 0.25f, 0.75f, 0.75f, 0.25f, 1, 0});
    sc_image_free(&img);
    img = image_of(2, 1, 1, (const float[]){0, 1}); /* along the height */
    cr_assert_eq(sc_image_resize(&img, 4, 3), SC_OK);
    expect_pixels(&img, 4, 3, 1, (const float[]){0, 0, 0, 0.25f, 0.25f, 0.25f, 0.75f, 0.75f,
                                                 0.75f, 1, 1, 1});
    sc_image_free(&img);
}

Test(resize, a_constant_image_stays_constant)
{
    float px[7 * 5];
    for (int i = 0; i < 35; i++)
        px[i] = 0.625f;
    sc_image img = image_of(7, 5, 1, px);
    cr_assert_eq(sc_image_resize(&img, 3, 11), SC_OK);
    for (int i = 0; i < 33; i++)
        cr_expect_float_eq(img.pixels[i], 0.625f, 1e-6f, "pixel %d", i);
    cr_assert_eq(sc_image_resize(&img, 28, 2), SC_OK);
    for (int i = 0; i < 56; i++)
        cr_expect_float_eq(img.pixels[i], 0.625f, 1e-6f, "pixel %d", i);
    sc_image_free(&img);
}

Test(resize, refuses_an_absurd_size_and_leaves_the_image)
{
    sc_image img = image_of(1, 1, 1, (const float[]){0.5f});
    float *before = img.pixels;
    cr_expect_eq(sc_image_resize(&img, 0, 4), SC_ERR_FORMAT);
    cr_expect_eq(sc_image_resize(&img, 1 << 14, 1 << 14), SC_ERR_FORMAT);
    cr_expect(strstr(sc_error_message(), "absurd size"), "%s", sc_error_message());
    cr_expect_eq(img.pixels, before);
    cr_expect_eq(img.width, 1);
    sc_image_free(&img);
}
