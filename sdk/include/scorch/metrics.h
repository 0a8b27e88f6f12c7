/* scorch/metrics.h — metrics accumulated exactly over a whole split.
 *
 * A model's socket reports each metric for a batch as a numerator and a
 * denominator (correct predictions and samples, say). The host sums both
 * over the split (and, later, across ranks) and divides once at the end,
 * so batches of unequal size are weighted correctly.
 */
#ifndef SCORCH_METRICS_H
#define SCORCH_METRICS_H

#include <stdint.h>

#include "scorch/export.h"
#include "scorch/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_metrics sc_metrics;

enum { SC_METRIC_NAME_MAX = 48, SC_METRICS_MAX = 32 };

SC_API sc_metrics *sc_metrics_new(void); /* NULL with a message on failure */
SC_API void sc_metrics_free(sc_metrics *m);
SC_API void sc_metrics_reset(sc_metrics *m); /* zero every sum, keep the names */

/* Adds to the named metric (creating it on first use). Names are
 * [A-Za-z0-9_], at most SC_METRIC_NAME_MAX - 1 characters. */
SC_API sc_status sc_metrics_add(sc_metrics *m, const char *name, double numerator,
                                double denominator);

SC_API int sc_metrics_count(const sc_metrics *m);
SC_API const char *sc_metrics_name(const sc_metrics *m, int i);
SC_API double sc_metrics_numerator(const sc_metrics *m, int i);
SC_API double sc_metrics_denominator(const sc_metrics *m, int i);
SC_API double sc_metrics_value(const sc_metrics *m, int i); /* num/den; NaN if den 0 */
SC_API int sc_metrics_find(const sc_metrics *m, const char *name); /* -1 if absent */

/* Samples of logits [N, C] (f32) whose target class [N] (integer) is in
 * the top 1 or top k: fewer than k other classes have a logit >= the
 * target's (ties and NaN count against the target, so constant logits
 * score 0). A target of class probabilities [N, C] (f32, soft targets as
 * mixup makes) counts against each row's dominant label: its first
 * largest probability, as torch.argmax. -1 with a message on bad input
 * (dtype, shape, k < 1, a target outside 0..C-1). */
SC_API int64_t sc_correct_top1(const sc_tensor *logits, const sc_tensor *target);
SC_API int64_t sc_correct_topk(const sc_tensor *logits, const sc_tensor *target, int k);

/* Adds "accuracy" for a classifier, and "top5_accuracy" when it has more
 * than 5 classes (with fewer, every target is in the top 5). */
SC_API sc_status sc_metrics_add_classification(sc_metrics *m, const sc_tensor *logits,
                                               const sc_tensor *target);

#ifdef __cplusplus
}
#endif
#endif
