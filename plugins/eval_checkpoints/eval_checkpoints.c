/* eval_checkpoints — a job plugin (scorch/job.h): evaluates every
 * checkpoint it is given (a run directory gives its numbered ones) on one
 * split, the checkpoints split over the ranks, and writes one table.
 *
 *   scorch-run --job eval_checkpoints.so --checkpoint runs/mlp
 *              [--job-args split=test,out=eval.csv]
 *   mpirun -np 4 scorch-run --job eval_checkpoints.so --checkpoint runs/mlp ...
 *
 * Rank r evaluates checkpoints r, r + world, ... (scorch-test's pass over
 * the whole split, each alone); the ranks gather one row per checkpoint
 * round by round, and rank 0 prints the table in checkpoint order, marks
 * the best by the model's main metric, and writes it as CSV (out=).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <scorch/scorch.h>

/* One checkpoint's result, as the ranks exchange it (plain bytes). */
typedef struct row {
    int32_t filled; /* 0: the rank had no checkpoint this round */
    int32_t epoch;
    int64_t step;
    double loss;
    int32_t n_metrics;
    char names[SC_METRICS_MAX][SC_METRIC_NAME_MAX];
    double values[SC_METRICS_MAX];
} row;

typedef struct table {
    sc_split split;
    int n;      /* checkpoints */
    row *rows;  /* [n], filled on every rank */
    row *round; /* [world]: one round's rows */
} table;

static sc_status evaluate_one(sc_job *job, sc_split split, const char *path, row *out)
{
    sc_metrics *metrics = sc_metrics_new();
    if (!metrics)
        return sc_error_code();
    int epoch = 0;
    sc_status st = sc_job_load(job, path, &epoch, &out->step);
    if (st == SC_OK)
        st = sc_job_evaluate(job, split, metrics, &out->loss);
    out->filled = 1;
    out->epoch = epoch;
    out->n_metrics = sc_metrics_count(metrics);
    for (int i = 0; st == SC_OK && i < out->n_metrics; i++) {
        snprintf(out->names[i], sizeof out->names[i], "%s", sc_metrics_name(metrics, i));
        out->values[i] = sc_metrics_value(metrics, i);
    }
    sc_metrics_free(metrics);
    return st;
}

/* Round r: this rank's checkpoint r * world + rank, when there is one,
 * then every rank's row into the table. */
static sc_status round_of(table *t, sc_job *job, int r)
{
    int world = sc_dist_world_size(), first = r * world, i = first + sc_dist_rank();
    row mine = {0};
    if (i < t->n)
        SC_TRY(evaluate_one(job, t->split, sc_job_checkpoint(job, i), &mine));
    SC_TRY(sc_dist_allgather(&mine, sizeof mine, t->round));
    for (int q = 0; q < world && first + q < t->n; q++)
        t->rows[first + q] = t->round[q];
    return SC_OK;
}

static sc_status evaluate_all(table *t, sc_job *job)
{
    int world = sc_dist_world_size();
    t->rows = calloc((size_t)t->n, sizeof *t->rows);
    t->round = calloc((size_t)world, sizeof *t->round);
    if (!t->rows || !t->round)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for %d checkpoints' results", t->n);
    for (int r = 0; r * world < t->n; r++)
        SC_TRY(round_of(t, job, r));
    return SC_OK;
}

/* ---- the table (rank 0) ---- */

/* The row with the best main metric (the first of equals), or -1. */
static int best_row(const table *t, sc_job *job)
{
    sc_metric_mode mode = SC_METRIC_MAX;
    const char *main_metric = sc_job_main_metric(job, &mode);
    int best = -1;
    double best_value = 0;
    for (int i = 0; main_metric && i < t->n; i++)
        for (int m = 0; m < t->rows[i].n_metrics; m++) {
            double v = t->rows[i].values[m];
            if (strcmp(t->rows[i].names[m], main_metric) != 0)
                continue;
            if (best < 0 || (mode == SC_METRIC_MAX ? v > best_value : v < best_value)) {
                best = i;
                best_value = v;
            }
        }
    return best;
}

static void write_csv(FILE *f, const table *t, sc_job *job, int best)
{
    const row *first = &t->rows[0];
    fprintf(f, "checkpoint,epoch,step,loss");
    for (int m = 0; m < first->n_metrics; m++)
        fprintf(f, ",%s", first->names[m]);
    fprintf(f, ",best\n");
    for (int i = 0; i < t->n; i++) {
        const row *r = &t->rows[i];
        sc_csv_write_field(f, sc_job_checkpoint(job, i));
        fprintf(f, ",%d,%lld,%.6f", r->epoch, (long long)r->step, r->loss);
        for (int m = 0; m < r->n_metrics; m++)
            fprintf(f, ",%.6f", r->values[m]);
        fprintf(f, ",%s\n", i == best ? "yes" : "");
    }
}

static void print_table(const table *t, sc_job *job, int best)
{
    const row *first = &t->rows[0];
    printf("%-6s %-10s %10s", "epoch", "step", "loss");
    for (int m = 0; m < first->n_metrics; m++)
        printf(" %14s", first->names[m]);
    printf("  checkpoint (%s split)\n", sc_split_name(t->split));
    for (int i = 0; i < t->n; i++) {
        const row *r = &t->rows[i];
        printf("%-6d %-10lld %10.4f", r->epoch, (long long)r->step, r->loss);
        for (int m = 0; m < r->n_metrics; m++)
            printf(" %14.4f", r->values[m]);
        printf("  %s%s\n", sc_job_checkpoint(job, i), i == best ? "  <- best" : "");
    }
}

static sc_status report(const table *t, sc_job *job, const char *out)
{
    int best = best_row(t, job);
    print_table(t, job, best);
    if (!out)
        return SC_OK;
    FILE *f = fopen(out, "w");
    if (!f)
        return sc_error_set(SC_ERR_IO, "out=%s: cannot write it", out);
    write_csv(f, t, job, best);
    return fclose(f) == 0 ? SC_OK : sc_error_set(SC_ERR_IO, "out=%s: cannot write it", out);
}

/* ---- the job ---- */

static sc_status parse_args(const sc_args *args, table *t)
{
    static const char *const known[] = {"split", "out", NULL};
    SC_TRY(sc_args_check_known(args, known));
    const char *split = sc_args_get(args, "split");
    t->split = SC_SPLIT_TEST;
    if (split && sc_split_parse(split, &t->split) != SC_OK)
        return sc_error_wrap(SC_ERR_INVALID, "split=%s", split);
    return SC_OK;
}

static sc_status eval_checkpoints_run(sc_job *job, const sc_args *args)
{
    table t = {0};
    SC_TRY(parse_args(args, &t));
    if ((t.n = sc_job_checkpoint_count(job)) == 0)
        return sc_error_set(SC_ERR_INVALID, "eval_checkpoints needs checkpoints: give "
                            "scorch-run --checkpoint FILE or --checkpoint RUN_DIR");
    if (!sc_job_has_model(job))
        return sc_error_set(SC_ERR_INVALID, "eval_checkpoints needs the model: give "
                            "scorch-run --model and --dataset");
    sc_status st = evaluate_all(&t, job);
    if (st == SC_OK && sc_dist_is_main())
        st = report(&t, job, sc_args_get(args, "out"));
    free(t.rows);
    free(t.round);
    return st;
}

SC_PLUGIN_EXPORT const sc_job_plugin scorch_job_plugin = {
    .abi = SC_ABI_HEADER(sc_job_plugin),
    .name = "eval_checkpoints",
    .description = "evaluates every checkpoint of a run on one split, split over the ranks, "
                   "into one table",
    .job_run = eval_checkpoints_run,
};
