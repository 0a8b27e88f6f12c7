/* sums.c — a phase's loss, sample count and metric sums over ranks
 * (dist.h), added in rank order so that every rank gets the same bits. */
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "dist/dist_impl.h"

/* One rank's sums, as the ranks exchange them. */
typedef struct sums_record {
    double loss_sum, samples;
    int32_t n;
    struct {
        char name[SC_METRIC_NAME_MAX];
        double numerator, denominator;
    } metric[SC_METRICS_MAX];
} sums_record;

static void pack_sums(sums_record *r, double loss_sum, int64_t samples, const sc_metrics *m)
{
    r->loss_sum = loss_sum;
    r->samples = (double)samples;
    r->n = sc_metrics_count(m);
    for (int i = 0; i < r->n; i++) {
        snprintf(r->metric[i].name, sizeof r->metric[i].name, "%s", sc_metrics_name(m, i));
        r->metric[i].numerator = sc_metrics_numerator(m, i);
        r->metric[i].denominator = sc_metrics_denominator(m, i);
    }
}

/* Sums in rank order: every rank adds the same numbers in the same order. */
static sc_status merge_sums(const sums_record *all, int world, double *loss_sum,
                            int64_t *samples, sc_metrics *m)
{
    double loss = 0, n = 0;
    sc_metrics_reset(m);
    for (int r = 0; r < world; r++) {
        loss += all[r].loss_sum;
        n += all[r].samples;
        for (int i = 0; i < all[r].n; i++)
            SC_TRY(sc_metrics_add(m, all[r].metric[i].name, all[r].metric[i].numerator,
                                  all[r].metric[i].denominator));
    }
    *loss_sum = loss;
    *samples = (int64_t)n;
    return SC_OK;
}

static sc_status reduce_sums(host_dist *d, double *loss_sum, int64_t *samples, sc_metrics *m,
                             bool to_root)
{
    int v[HOST_V_COUNT] = {0};
    if (!d->ops)
        return host_dist_exchange(d, SC_OK, v);
    sums_record *all = calloc((size_t)d->world + 1, sizeof *all); /* + this rank's */
    sc_status st = all ? SC_OK : sc_error_set(SC_ERR_NOMEM, "out of memory for metric sums");
    st = host_dist_exchange(d, st, v);
    double t0 = host_now();
    if (st == SC_OK) {
        pack_sums(&all[d->world], *loss_sum, *samples, m);
        d->ops->allgather(d->comm, &all[d->world], sizeof *all, all, "the metric reduction");
        if (to_root && d->rank != 0) {
            *loss_sum = 0;
            *samples = 0;
            sc_metrics_reset(m);
        } else {
            st = merge_sums(all, d->world, loss_sum, samples, m);
        }
    }
    free(all);
    d->comm_s += host_now() - t0;
    return st;
}

sc_status host_dist_sum_all(host_dist *d, double *loss_sum, int64_t *samples, sc_metrics *metrics)
{
    return reduce_sums(d, loss_sum, samples, metrics, false);
}

sc_status host_dist_before_checkpoint(host_dist *d, double *loss_sum, int64_t *samples,
                                      sc_metrics *metrics)
{
    SC_TRY(host_dist_sync_buffers(d));
    return reduce_sums(d, loss_sum, samples, metrics, true);
}

double host_dist_take_comm_s(host_dist *d)
{
    double s = d->comm_s;
    d->comm_s = 0;
    return s;
}
