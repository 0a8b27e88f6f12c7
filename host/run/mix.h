/* mix.h — Mixup and CutMix of train batches (--mixup, --cutmix,
 * --mix-prob, --mix-switch-prob), with timm's Mixup semantics in batch
 * mode.
 *
 * Per train batch, from a stream of its own, (seed, epoch, batch index,
 * rank), so that resume is exact and --workers changes nothing:
 *   - with probability --mix-prob the batch is mixed, else lam = 1;
 *   - with both alphas > 0, CutMix with probability --mix-switch-prob,
 *     else Mixup; with one, that one;
 *   - lam ~ Beta(alpha, alpha) of the one chosen;
 *   - Mixup: x = x lam + flip(x) (1 - lam), flip reversing the batch
 *     (sample i pairs with N-1-i);
 *   - CutMix (inputs [N, C, H, W]): timm's rand_bbox, cut = int(H or W *
 *     sqrt(1 - lam)), centre uniform over the image, the box clipped to
 *     it; flip(x)'s box replaces x's, and lam = 1 - box area / (H W);
 *   - targets: f32 [N, C] = onehot(t) lam + onehot(flip(t)) (1 - lam),
 *     the classes counted from the model's output (one probe forward of a
 *     zero sample at set-up); the model's label smoothing applies on top,
 *     in its cross-entropy.
 * Arithmetic in f32 with lam and 1 - lam rounded from double, as timm's
 * tensors with Python floats. The inputs are mixed in place in the
 * loader's batch buffers (on the host, before a GPU's upload); the soft
 * targets go into buffers of the mixer's own.
 */
#ifndef SCORCH_HOST_MIX_H
#define SCORCH_HOST_MIX_H

#include <stdbool.h>
#include <stdint.h>

#include "run/loader.h"
#include "run/session.h"

/* What one batch gets: lam = 1 leaves it as it is (soft targets one-hot). */
typedef struct host_mix_draw {
    double lam;     /* the targets' weight of the batch itself */
    bool cutmix;
    int64_t y0, y1, x0, x1; /* CutMix: the box, rows [y0, y1) x columns [x0, x1) */
} host_mix_draw;

typedef struct host_mix_settings {
    double mixup_alpha, cutmix_alpha; /* 0: off */
    double prob, switch_prob;
} host_mix_settings;

/* Beta(a, a), a > 0, from rng. */
double host_mix_beta(sc_rng *rng, double a);

/* timm's rand_bbox for d->lam and the centre (cy, cx) of an image h x w:
 * cut = int(h or w * sqrt(1 - lam)), the box centre -+ cut / 2 clipped to
 * the image; then d->lam = 1 - box area / (h w) (correct_lam). */
void host_mix_cut_box(host_mix_draw *d, int64_t cy, int64_t cx, int64_t h, int64_t w);

/* The draw of one batch of images h x w (h = w = 0 when not images: then
 * CutMix must be off). */
host_mix_draw host_mix_draw_batch(const host_mix_settings *set, sc_rng *rng, int64_t h, int64_t w);

/* Mixes f32 inputs x [N, ...] in place by d (CutMix: x is [N, C, H, W]). */
void host_mix_inputs(sc_tensor *x, const host_mix_draw *d);

/* soft [N, C] = onehot(labels) lam + onehot(flip(labels)) (1 - lam);
 * labels [N] integer. An error names the label outside 0..C-1 and its
 * dataset index (samples [N], may be NULL). */
sc_status host_mix_targets(const sc_tensor *labels, const int64_t *samples, double lam,
                         sc_tensor *soft);

typedef struct host_mix host_mix;

/* The run's mixer for cfg's options, or *out = NULL when both alphas are
 * 0. Refuses --mix-prob or --mix-switch-prob off their defaults that
 * nothing reads, a dataset whose sample is not one f32 input with one
 * integer class index (CutMix: an input [C, H, W]), and a model whose
 * first output is not [N, C] logits. rank: this process's rank of the
 * job. */
sc_status host_mix_new(const host_config *cfg, host_session *s, int rank, host_mix **out);
void host_mix_free(host_mix *m); /* NULL is a no-op */

/* The batch the step trains on: *out = *b with b's inputs mixed in place
 * and soft targets in the mixer's buffers, which go in turn (unchanged
 * for the next three calls); a NULL m gives b as it is. On a GPU, call it
 * once the step before has been queued: a buffer is refilled only after
 * the step that read it. */
sc_status host_mix_batch(host_mix *m, int epoch, const host_batch *b, host_batch *out);

#endif
