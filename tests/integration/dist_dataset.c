/* A dataset plugin that uses the distributed helpers (scorch/dist.h), for
 * test_dist.c: the example of docs/distributed.md grown into a test.
 *
 * index_open: rank 0 alone computes the features' normalisation (mean and
 * standard deviation over the train split) and broadcasts it; the other
 * ranks start from NaN, so a broadcast that did not arrive shows (and
 * would make the loss NaN). Then an allreduce of each type and operation
 * and an allgather of the ranks, and one line on stderr per rank:
 *
 *   dist_dataset: rank 1 of 2 (local 1, main no): norm 5.000000 3.162278;
 *   sum 3 max 1 min 10 fsum 1.5; gather 0,1
 *
 * Samples: 4 features x_f = ((7 i + 3 f) mod 11) + f, normalised; the
 * label is whether the first raw feature exceeds 5.
 *
 * Dataset args: fault=getitem (getitem calls sc_dist_barrier: refused on
 * a loader thread) or fault=mismatch (rank 1 broadcasts fewer bytes than
 * rank 0: the ranks' calls do not match). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <scorch/scorch.h>

enum { FEATURES = 4 };

static const int64_t split_len[SC_SPLIT_COUNT] = {256, 64, 64};

/* A split: a view into the index. */
typedef struct dd_split {
    const struct dd_index *index;
    sc_split split;
} dd_split;

typedef struct dd_index {
    double mean[FEATURES], std[FEATURES];
    bool barrier_in_getitem;
    dd_split splits[SC_SPLIT_COUNT];
} dd_index;

static float raw_feature(int64_t i, int f) { return (float)((7 * i + 3 * f) % 11 + f); }

/* What rank 0 alone computes: mean and std of each feature over train. */
static void compute_norm(dd_index *ix)
{
    for (int f = 0; f < FEATURES; f++) {
        double sum = 0, sq = 0;
        int64_t n = split_len[SC_SPLIT_TRAIN];
        for (int64_t i = 0; i < n; i++) {
            sum += raw_feature(i, f);
            sq += (double)raw_feature(i, f) * raw_feature(i, f);
        }
        ix->mean[f] = sum / (double)n;
        ix->std[f] = sqrt(sq / (double)n - ix->mean[f] * ix->mean[f]);
    }
}

/* Rank 0's normalisation to every rank. */
static sc_status share_norm(dd_index *ix, bool mismatch)
{
    double stats[2 * FEATURES];
    for (int k = 0; k < 2 * FEATURES; k++)
        stats[k] = NAN;
    if (sc_dist_is_main()) {
        compute_norm(ix);
        memcpy(stats, ix->mean, sizeof ix->mean);
        memcpy(stats + FEATURES, ix->std, sizeof ix->std);
    }
    size_t bytes = mismatch && sc_dist_rank() == 1 ? sizeof stats / 2 : sizeof stats;
    SC_TRY(sc_dist_broadcast(stats, bytes, 0));
    memcpy(ix->mean, stats, sizeof ix->mean);
    memcpy(ix->std, stats + FEATURES, sizeof ix->std);
    return SC_OK;
}

/* One allreduce of each type and operation, one allgather, and the line. */
static sc_status report(const dd_index *ix)
{
    int rank = sc_dist_rank(), world = sc_dist_world_size();
    int64_t sum = rank + 1;
    double max = rank;
    int32_t min = rank + 10;
    float fsum = 0.5f * (float)(rank + 1);
    SC_TRY(sc_dist_allreduce(&sum, 1, SC_DIST_I64, SC_DIST_SUM));
    SC_TRY(sc_dist_allreduce(&max, 1, SC_DIST_F64, SC_DIST_MAX));
    SC_TRY(sc_dist_allreduce(&min, 1, SC_DIST_I32, SC_DIST_MIN));
    SC_TRY(sc_dist_allreduce(&fsum, 1, SC_DIST_F32, SC_DIST_SUM));
    int32_t *ranks = calloc((size_t)world, sizeof *ranks);
    if (!ranks)
        return sc_error_set(SC_ERR_NOMEM, "dist_dataset: out of memory");
    int32_t mine = rank;
    sc_status st = sc_dist_allgather(&mine, sizeof mine, ranks);
    if (st == SC_OK)
        st = sc_dist_barrier();
    if (st == SC_OK) {
        char gather[256] = "";
        for (int r = 0; r < world && strlen(gather) < sizeof gather - 16; r++)
            snprintf(gather + strlen(gather), sizeof gather - strlen(gather), "%s%d",
                     r ? "," : "", (int)ranks[r]);
        fprintf(stderr, "dist_dataset: rank %d of %d (local %d, main %s): norm %f %f; sum %lld "
                "max %g min %d fsum %g; gather %s\n", rank, world, sc_dist_local_rank(),
                sc_dist_is_main() ? "yes" : "no", ix->mean[0], ix->std[0], (long long)sum, max,
                (int)min, (double)fsum, gather);
    }
    free(ranks);
    return st;
}

static sc_status dd_index_open(const char *path, const sc_args *args, void **index)
{
    (void)path;
    *index = NULL;
    static const char *const known[] = {"fault", NULL};
    SC_TRY(sc_args_check_known(args, known));
    const char *fault = sc_args_get(args, "fault");
    dd_index *ix = calloc(1, sizeof *ix);
    if (!ix)
        return sc_error_set(SC_ERR_NOMEM, "dist_dataset: out of memory");
    ix->barrier_in_getitem = fault && strcmp(fault, "getitem") == 0;
    for (int s = 0; s < SC_SPLIT_COUNT; s++)
        ix->splits[s] = (dd_split){ix, (sc_split)s};
    sc_status st = share_norm(ix, fault && strcmp(fault, "mismatch") == 0);
    if (st == SC_OK)
        st = report(ix);
    if (st != SC_OK) {
        free(ix);
        return st;
    }
    *index = ix;
    return SC_OK;
}

static void dd_index_close(void *index) { free(index); }

static sc_status dd_dataset_open(void *index, sc_split split, void **dataset)
{
    *dataset = &((dd_index *)index)->splits[split];
    return SC_OK;
}

static void dd_dataset_close(void *dataset) { (void)dataset; }

static int64_t dd_dataset_len(void *dataset) { return split_len[((dd_split *)dataset)->split]; }

static void dd_dataset_spec(void *dataset, sc_sample_spec *spec)
{
    (void)dataset;
    *spec = (sc_sample_spec){.n_inputs = 1, .n_targets = 1,
                             .inputs = {{SC_F32, 1, {FEATURES}}},
                             .targets = {{SC_I64, 0, {0}}}, .classes = 2};
}

static sc_status dd_dataset_getitem(void *dataset, int64_t i, sc_rng *rng,
                                    sc_tensor_list *inputs, sc_tensor_list *targets)
{
    (void)rng;
    const dd_index *ix = ((const dd_split *)dataset)->index;
    if (ix->barrier_in_getitem)
        SC_TRY(sc_dist_barrier());
    float *x = sc_tensor_f32(inputs->t[0]);
    for (int f = 0; f < FEATURES; f++)
        x[f] = (float)((raw_feature(i, f) - ix->mean[f]) / ix->std[f]);
    *(int64_t *)targets->t[0]->data = raw_feature(i, 0) > 5;
    return SC_OK;
}

SC_PLUGIN_EXPORT const sc_dataset_plugin scorch_dataset_plugin = {
    .abi = SC_ABI_HEADER(sc_dataset_plugin),
    .name = "dist_dataset",
    .description = "normalisation shared by rank 0, for the distributed helpers' tests",
    .index_open = dd_index_open,
    .index_close = dd_index_close,
    .dataset_open = dd_dataset_open,
    .dataset_close = dd_dataset_close,
    .dataset_len = dd_dataset_len,
    .dataset_spec = dd_dataset_spec,
    .dataset_getitem = dd_dataset_getitem,
};
