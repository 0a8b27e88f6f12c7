/* classify — what is in these images? A classifier trained with
 * scorch-train, inside a program of your own (scorch/infer.h):
 *
 *     ./classify runs/x/checkpoints/best.ckpt shoe.png shirt.png
 *
 * prints, per image, the most likely class and its probability. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <scorch/infer.h>

int main(int argc, char **argv)
{
    sc_infer *h;
    if (argc < 3) {
        fprintf(stderr, "usage: %s CHECKPOINT IMAGE...\n", argv[0]);
        return 2;
    }
    if (sc_infer_open(argv[1], NULL, &h) != SC_OK) {
        fprintf(stderr, "classify: %s\n", sc_error_message());
        return 1;
    }
    const sc_tensor_spec *in = &sc_infer_input_spec(h)->inputs[0];
    int64_t pixels = 1, classes = sc_infer_output_spec(h, 0)->shape[0];
    for (int d = 0; d < in->ndim; d++)
        pixels *= in->shape[d];
    float *x = malloc(pixels * sizeof *x), *scores = malloc(classes * sizeof *scores);
    int failed = 0;
    for (int i = 2; i < argc; i++) {
        sc_raw_input image = {.path = argv[i]};
        if (sc_infer_decode(h, &image, (void *[]){x}) != SC_OK ||
            sc_infer_run(h, 1, (const void *[]){x}, (void *[]){scores}) != SC_OK) {
            fprintf(stderr, "classify: %s\n", sc_error_message());
            failed = 1;
            continue;
        }
        int64_t best = 0;
        double sum = 0; /* of the softmax's terms, scaled by the best one's */
        for (int64_t c = 1; c < classes; c++)
            best = scores[c] > scores[best] ? c : best;
        for (int64_t c = 0; c < classes; c++)
            sum += exp((double)scores[c] - scores[best]);
        const char *name = sc_infer_class_name(h, best);
        printf("%s: %s (%.4f)\n", argv[i], name ? name : "?", 1 / sum);
    }
    free(x);
    free(scores);
    sc_infer_close(h);
    return failed;
}
