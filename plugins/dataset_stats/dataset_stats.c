/* dataset_stats — a job plugin (scorch/job.h): the per-channel mean,
 * standard deviation, minimum and maximum of a dataset's inputs, and the
 * histogram of its class labels, over one split, in parallel over ranks.
 *
 *   scorch-run --job dataset_stats.so --dataset D.so --dataset-path P
 *              [--job-args split=train,out=stats.json]
 *   mpirun -np 4 scorch-run --job dataset_stats.so ...
 *
 * Each rank takes whole batches in turn (sc_job_batches_open with shard).
 * A batch's moments are computed alone (two passes, in double); the
 * ranks' batches are gathered round by round and combined in batch order
 * (Chan et al.'s pairwise update), so the figures have the same bits
 * whatever the number of ranks. Channels are an input's first dimension
 * (C of an image's [C, H, W]; each feature of a vector [D]); a scalar
 * input is one channel. std is the population standard deviation (numpy's
 * default; torch.std(unbiased=False)). The histogram counts target 0 when
 * it is one integer class index per sample.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <scorch/scorch.h>

#include "common/spec.h"

/* One channel's figures over some samples: the count, mean and sum of
 * squared deviations from it, and the extremes. */
typedef struct moments {
    double n, mean, m2, min, max;
} moments;

typedef struct stats {
    sc_split split;
    const sc_sample_spec *spec;
    int channels[SC_MAX_IO]; /* per input */
    int total_channels;
    moments *sum;            /* [total_channels]: the split's */
    moments *batch;          /* [total_channels]: this rank's batch of the round */
    moments *gathered;       /* [world][total_channels] */
    int64_t *labels;         /* the histogram, of n_labels classes */
    int64_t n_labels;
    bool has_labels;
    int64_t samples;
} stats;

/* ---- moments ---- */

/* acc = the moments of acc's samples and b's together; b empty changes
 * nothing (exactly: the ranks without a batch in the last round). */
static void moments_merge(moments *acc, const moments *b)
{
    if (b->n == 0)
        return;
    if (acc->n == 0) {
        *acc = *b;
        return;
    }
    double n = acc->n + b->n, delta = b->mean - acc->mean;
    acc->mean += delta * (b->n / n);
    acc->m2 += b->m2 + delta * delta * (acc->n * (b->n / n));
    acc->n = n;
    acc->min = fmin(acc->min, b->min);
    acc->max = fmax(acc->max, b->max);
}

static double value_at(const sc_tensor *t, int64_t i)
{
    return t->dtype == SC_F32 ? (double)sc_tensor_f32(t)[i] : (double)sc_tensor_get_int(t, i);
}

/* The moments of channel c of a batch t [size, C, ...], each sample's
 * channel `per` consecutive elements: the mean first, then the squared
 * deviations from it. */
static moments channel_moments(const sc_tensor *t, int64_t c, int64_t per)
{
    int64_t size = t->shape[0], stride = t->numel / (size ? size : 1);
    moments m = {.n = (double)(size * per), .min = INFINITY, .max = -INFINITY};
    double sum = 0;
    for (int64_t j = 0; j < size; j++)
        for (int64_t e = 0, at = j * stride + c * per; e < per; e++, at++) {
            double x = value_at(t, at);
            sum += x;
            m.min = fmin(m.min, x);
            m.max = fmax(m.max, x);
        }
    m.mean = m.n ? sum / m.n : 0;
    for (int64_t j = 0; j < size; j++)
        for (int64_t e = 0, at = j * stride + c * per; e < per; e++, at++) {
            double d = value_at(t, at) - m.mean;
            m.m2 += d * d;
        }
    return m;
}

static void batch_moments(stats *s, const sc_job_batch *b)
{
    moments *out = s->batch;
    for (int k = 0; k < s->spec->n_inputs; k++) {
        const sc_tensor *t = b->inputs.t[k];
        int64_t per = b->size ? t->numel / b->size / s->channels[k] : 0;
        for (int c = 0; c < s->channels[k]; c++)
            *out++ = channel_moments(t, c, per);
    }
}

/* ---- labels ---- */

static bool is_class_index(const sc_tensor_spec *t)
{
    int64_t per = 1;
    for (int d = 0; d < t->ndim; d++)
        per *= t->shape[d];
    return t->dtype != SC_F32 && per == 1;
}

static sc_status count_label(stats *s, int64_t label, int64_t sample)
{
    if (label < 0 || label > (int64_t)1 << 30)
        return sc_error_set(SC_ERR_INVALID, "sample %lld has label %lld: no class index",
                            (long long)sample, (long long)label);
    if (label >= s->n_labels) {
        int64_t *grown = realloc(s->labels, (size_t)(label + 1) * sizeof *grown);
        if (!grown)
            return sc_error_set(SC_ERR_NOMEM, "out of memory for the label histogram");
        memset(grown + s->n_labels, 0, (size_t)(label + 1 - s->n_labels) * sizeof *grown);
        s->labels = grown;
        s->n_labels = label + 1;
    }
    s->labels[label]++;
    return SC_OK;
}

static sc_status batch_labels(stats *s, const sc_job_batch *b)
{
    for (int64_t j = 0; s->has_labels && j < b->size; j++)
        SC_TRY(count_label(s, sc_tensor_get_int(b->targets.t[0], j), b->samples[j]));
    return SC_OK;
}

/* Every rank's histogram, summed: first to the same length. */
static sc_status reduce_labels(stats *s)
{
    int64_t n = s->n_labels;
    SC_TRY(sc_dist_allreduce(&n, 1, SC_DIST_I64, SC_DIST_MAX));
    if (n > s->n_labels) {
        int64_t *grown = realloc(s->labels, (size_t)n * sizeof *grown);
        if (!grown)
            return sc_error_set(SC_ERR_NOMEM, "out of memory for the label histogram");
        memset(grown + s->n_labels, 0, (size_t)(n - s->n_labels) * sizeof *grown);
        s->labels = grown;
        s->n_labels = n;
    }
    return sc_dist_allreduce(s->labels, n, SC_DIST_I64, SC_DIST_SUM);
}

/* ---- the pass ---- */

/* One round: this rank's next batch (if it has one left) into s->batch,
 * then every rank's, merged in rank order, which is batch order. */
static sc_status round_of(stats *s, sc_job_batches *it, bool mine)
{
    size_t bytes = (size_t)s->total_channels * sizeof(moments);
    memset(s->batch, 0, bytes);
    const sc_job_batch *b = NULL;
    if (mine)
        SC_TRY(sc_job_batches_next(it, &b));
    if (b) {
        batch_moments(s, b);
        SC_TRY(batch_labels(s, b));
    }
    SC_TRY(sc_dist_allgather(s->batch, bytes, s->gathered));
    for (int r = 0; r < sc_dist_world_size(); r++)
        for (int c = 0; c < s->total_channels; c++)
            moments_merge(&s->sum[c], &s->gathered[(size_t)r * (size_t)s->total_channels + c]);
    return SC_OK;
}

static sc_status pass(stats *s, sc_job *job)
{
    sc_job_batches *it;
    SC_TRY(sc_job_batches_open(job, s->split, true, &it));
    int64_t world = sc_dist_world_size(), mine = sc_job_batches_count(it);
    int64_t rounds = (sc_job_batches_total(it) + world - 1) / world;
    sc_status st = SC_OK;
    for (int64_t r = 0; st == SC_OK && r < rounds; r++)
        st = round_of(s, it, r < mine);
    sc_job_batches_close(it);
    if (st == SC_OK && s->has_labels)
        st = reduce_labels(s);
    return st;
}

/* ---- set-up ---- */

static int channels_of(const sc_tensor_spec *t)
{
    return t->ndim == 0 ? 1 : (int)t->shape[0];
}

static sc_status stats_init(stats *s, sc_job *job, const sc_args *args)
{
    static const char *const known[] = {"split", "out", NULL};
    SC_TRY(sc_args_check_known(args, known));
    const char *split = sc_args_get(args, "split");
    s->split = SC_SPLIT_TRAIN;
    if (split && sc_split_parse(split, &s->split) != SC_OK)
        return sc_error_wrap(SC_ERR_INVALID, "split=%s", split);
    if (!(s->spec = sc_job_sample_spec(job)))
        return sc_error_set(SC_ERR_INVALID, "dataset_stats needs a dataset: give scorch-run "
                            "--dataset and --dataset-path");
    for (int k = 0; k < s->spec->n_inputs; k++)
        s->total_channels += s->channels[k] = channels_of(&s->spec->inputs[k]);
    s->has_labels = s->spec->n_targets > 0 && is_class_index(&s->spec->targets[0]);
    s->samples = sc_job_split_len(job, s->split);
    size_t n = (size_t)s->total_channels;
    s->sum = calloc(n, sizeof *s->sum);
    s->batch = calloc(n, sizeof *s->batch);
    s->gathered = calloc(n * (size_t)sc_dist_world_size(), sizeof *s->gathered);
    if (!s->sum || !s->batch || !s->gathered)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for %d channels' figures",
                            s->total_channels);
    return SC_OK;
}

static void stats_free(stats *s)
{
    free(s->sum);
    free(s->batch);
    free(s->gathered);
    free(s->labels);
}

/* ---- the report (rank 0) ---- */

static double std_of(const moments *m) { return m->n ? sqrt(m->m2 / m->n) : 0; }

static void print_report(const stats *s, sc_job *job)
{
    printf("%s split: %lld samples\n", sc_split_name(s->split), (long long)s->samples);
    const moments *m = s->sum;
    for (int k = 0; k < s->spec->n_inputs; k++) {
        char what[128];
        printf("input %d (%s), per channel:\n  %-8s %12s %12s %12s %12s\n", k,
               spec_str(&s->spec->inputs[k], what, sizeof what), "channel", "mean", "std",
               "min", "max");
        for (int c = 0; c < s->channels[k]; c++, m++)
            printf("  %-8d %12.6f %12.6f %12.6f %12.6f\n", c, m->mean, std_of(m), m->min,
                   m->max);
    }
    if (!s->has_labels)
        return;
    printf("labels (target 0), %lld classes:\n  %-6s %-20s %10s %8s\n", (long long)s->n_labels,
           "class", "name", "count", "share");
    for (int64_t c = 0; c < s->n_labels; c++) {
        const char *name = sc_job_class_name(job, c);
        double share = s->samples ? 100.0 * (double)s->labels[c] / (double)s->samples : 0;
        printf("  %-6lld %-20s %10lld %7.2f%%\n", (long long)c, name ? name : "",
               (long long)s->labels[c], share);
    }
}

/* text as a JSON string. */
static void json_string(FILE *f, const char *text)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    fputc('"', f);
}

/* One figure of every channel of input k, as a JSON array. */
static void json_channels(FILE *f, const moments *m, int channels,
                          double (*figure)(const moments *))
{
    fputc('[', f);
    for (int c = 0; c < channels; c++)
        fprintf(f, "%s%.17g", c ? ", " : "", figure(&m[c]));
    fputc(']', f);
}

static double mean_of(const moments *m) { return m->mean; }
static double min_of(const moments *m) { return m->min; }
static double max_of(const moments *m) { return m->max; }

static void json_labels(FILE *f, const stats *s, sc_job *job)
{
    fprintf(f, ",\n \"labels\": {\"counts\": [");
    for (int64_t c = 0; c < s->n_labels; c++)
        fprintf(f, "%s%lld", c ? ", " : "", (long long)s->labels[c]);
    fprintf(f, "], \"names\": [");
    for (int64_t c = 0; c < s->n_labels; c++) {
        const char *name = sc_job_class_name(job, c);
        fprintf(f, "%s", c ? ", " : "");
        json_string(f, name ? name : "");
    }
    fprintf(f, "]}");
}

static sc_status write_json(const stats *s, sc_job *job, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return sc_error_set(SC_ERR_IO, "out=%s: cannot write it", path);
    fprintf(f, "{\"split\": \"%s\", \"samples\": %lld,\n \"inputs\": [", sc_split_name(s->split),
            (long long)s->samples);
    const moments *m = s->sum;
    for (int k = 0; k < s->spec->n_inputs; m += s->channels[k], k++) {
        fprintf(f, "%s\n  {\"mean\": ", k ? "," : "");
        json_channels(f, m, s->channels[k], mean_of);
        fprintf(f, ", \"std\": ");
        json_channels(f, m, s->channels[k], std_of);
        fprintf(f, ", \"min\": ");
        json_channels(f, m, s->channels[k], min_of);
        fprintf(f, ", \"max\": ");
        json_channels(f, m, s->channels[k], max_of);
        fprintf(f, "}");
    }
    fprintf(f, "]");
    if (s->has_labels)
        json_labels(f, s, job);
    fprintf(f, "}\n");
    return fclose(f) == 0 ? SC_OK : sc_error_set(SC_ERR_IO, "out=%s: cannot write it", path);
}

static sc_status dataset_stats_run(sc_job *job, const sc_args *args)
{
    stats s = {0};
    sc_status st = stats_init(&s, job, args);
    if (st == SC_OK)
        st = pass(&s, job);
    const char *out = sc_args_get(args, "out");
    if (st == SC_OK && sc_dist_is_main()) {
        print_report(&s, job);
        if (out)
            st = write_json(&s, job, out);
    }
    stats_free(&s);
    return st;
}

SC_PLUGIN_EXPORT const sc_job_plugin scorch_job_plugin = {
    .abi = SC_ABI_HEADER(sc_job_plugin),
    .name = "dataset_stats",
    .description = "per-channel mean, std, min and max of a split's inputs and its label "
                   "histogram, over all ranks",
    .job_run = dataset_stats_run,
};
