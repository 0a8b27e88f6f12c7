/* A hooks plugin that logs through every logging action at epoch_end, as
 * the TensorBoard round trip (tensorboard_roundtrip.py) expects:
 *   fixture/epoch  scalar: the epoch
 *   fixture/note   text: "epoch E of N"
 *   fixture/rgb    image: f32 [3, 4, 5], pixel (c, y, x) = (20c + 5y + x) / 59
 *   fixture/grey   image: u8 [2, 3], pixel (y, x) = 40 (3y + x) + E
 * Built with -DFIXTURE_BAD_IMAGE it logs an i32 tensor instead, which the
 * host must refuse with a message naming the tag. */
#include <stdint.h>
#include <stdio.h>

#include "scorch/hooks.h"

#ifndef FIXTURE_BAD_IMAGE

enum { C = 3, H = 4, W = 5, GREY_H = 2, GREY_W = 3 };

static sc_status log_images(const sc_hook_context *ctx, const sc_hook_actions *a)
{
    float rgb[C * H * W];
    for (int i = 0; i < C * H * W; i++)
        rgb[i] = (float)i / (float)(C * H * W - 1);
    sc_tensor image;
    SC_TRY(sc_tensor_init(&image, SC_F32, 3, (const int64_t[]){C, H, W}));
    image.data = rgb;
    SC_TRY(a->log_image(a->host, "fixture/rgb", &image));
    uint8_t grey[GREY_H * GREY_W];
    for (int i = 0; i < GREY_H * GREY_W; i++)
        grey[i] = (uint8_t)(40 * i + ctx->epoch);
    SC_TRY(sc_tensor_init(&image, SC_U8, 2, (const int64_t[]){GREY_H, GREY_W}));
    image.data = grey;
    return a->log_image(a->host, "fixture/grey", &image);
}

static sc_status log_all(const sc_hook_context *ctx, const sc_hook_actions *a)
{
    a->log_scalar(a->host, "fixture/epoch", ctx->epoch);
    char note[64];
    snprintf(note, sizeof note, "epoch %d of %d", ctx->epoch, ctx->epochs);
    SC_TRY(a->log_text(a->host, "fixture/note", note));
    return log_images(ctx, a);
}

#define HOOK {"epoch_end", "log_all", log_all, 0}

#else

static sc_status log_bad_image(const sc_hook_context *ctx, const sc_hook_actions *a)
{
    int32_t pixels[4] = {0};
    sc_tensor image;
    SC_TRY(sc_tensor_init(&image, SC_I32, 2, (const int64_t[]){2, 2}));
    image.data = pixels;
    return a->log_image(a->host, "fixture/bad", &image);
}

#define HOOK {"epoch_end", "log_bad_image", log_bad_image, 0}

#endif

SC_PLUGIN_EXPORT const sc_hook_table scorch_hooks = {
    SC_ABI_HEADER(sc_hook_table), 1, (const sc_hook[]){HOOK}};
