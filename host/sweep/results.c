#include "sweep/results.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scorch/csv.h"

/* ---- results.csv ---- */

/* sep, then s as a CSV field. */
static void csv_field(FILE *f, const char *s, const char *sep)
{
    fputs(sep, f);
    sc_csv_write_field(f, s);
}

static void csv_number(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, ",%.9g", v);
    else
        fputs(",", f);
}

static const char *note_of(const host_trial *t) { return t->message[0] ? t->message : t->stop; }

static void csv_row(FILE *f, const host_sweep_report *r, const host_trial *t)
{
    fprintf(f, "%lld,%s", (long long)t->number, host_trial_status_name(t->status));
    for (int d = 0; d < r->space->count; d++)
        csv_field(f, t->values[d], ",");
    csv_number(f, t->best);
    fprintf(f, ",%d", t->best_epoch);
    csv_number(f, t->last);
    fprintf(f, ",%d,%d,%.3f,%d,%d", t->epoch, t->epochs, t->time_s, t->starts, t->resumes);
    csv_field(f, t->device, ",");
    csv_field(f, note_of(t), ",");
    fputc('\n', f);
}

sc_status host_sweep_results_write(const host_sweep_report *r, const char *path)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    fputs("trial,status", f);
    for (int d = 0; d < r->space->count; d++)
        csv_field(f, r->space->dims[d].name, ",");
    fprintf(f, ",best_%s,best_epoch,last_%s,epoch,epochs,time_s,starts,resumes,device,note\n",
            r->metric, r->metric);
    for (int64_t t = 0; t < r->count; t++)
        csv_row(f, r, &r->trials[t]);
    sc_status st = fclose(f) == 0 ? host_sweep_file_replace(path, text, len)
                                  : sc_error_set(SC_ERR_NOMEM, "out of memory");
    free(text);
    return st;
}

/* ---- ranking ---- */

/* qsort has no context argument: the report being sorted. */
static _Thread_local const host_sweep_report *ranked;

static int compare_trials(const void *a, const void *b)
{
    const host_trial *x = &ranked->trials[*(const int64_t *)a];
    const host_trial *y = &ranked->trials[*(const int64_t *)b];
    if (host_metric_better(x->best, y->best, ranked->maximize))
        return -1;
    if (host_metric_better(y->best, x->best, ranked->maximize))
        return 1;
    return (x->number > y->number) - (x->number < y->number);
}

int64_t *host_sweep_ranking(const host_sweep_report *r)
{
    int64_t *order = malloc((size_t)(r->count ? r->count : 1) * sizeof *order);
    if (!order)
        return NULL;
    for (int64_t t = 0; t < r->count; t++)
        order[t] = t;
    ranked = r;
    qsort(order, (size_t)r->count, sizeof *order, compare_trials);
    ranked = NULL;
    return order;
}

/* ---- the summary ---- */

/* A table cell: '|' and line breaks would break the table. */
static void md_cell(FILE *f, const char *s)
{
    fputc(' ', f);
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else
            fputc(*s == '\n' ? ' ' : *s, f);
    }
    fputs(" |", f);
}

static void md_number(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, " %.4f |", v);
    else
        fputs("  |", f);
}

static void md_row(FILE *f, const host_sweep_report *r, const host_trial *t, int64_t rank)
{
    fprintf(f, "| %lld | trial-%04lld |", (long long)rank, (long long)t->number);
    for (int d = 0; d < r->space->count; d++)
        md_cell(f, t->values[d]);
    md_number(f, t->best);
    fprintf(f, " %d | %d/%d | %.1f s | %s |\n", t->best_epoch, t->epoch, t->epochs, t->time_s,
            host_trial_status_name(t->status));
}

sc_status host_sweep_summary_write(const host_sweep_report *r, FILE *out)
{
    int64_t *order = host_sweep_ranking(r);
    if (!order)
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    fputs("| rank | trial |", out);
    for (int d = 0; d < r->space->count; d++)
        md_cell(out, r->space->dims[d].name);
    fprintf(out, " best %s (%s) | at epoch | epochs | time | status |\n|---|---|", r->metric,
            r->maximize ? "higher is better" : "lower is better");
    for (int d = 0; d < r->space->count; d++)
        fputs("---|", out);
    fputs("---|---|---|---|---|\n", out);
    for (int64_t i = 0; i < r->count; i++)
        md_row(out, r, &r->trials[order[i]], i + 1);
    bool first = true;
    for (int64_t i = 0; i < r->count; i++) {
        const host_trial *t = &r->trials[order[i]];
        if (!note_of(t)[0])
            continue;
        fprintf(out, "%s- trial-%04lld %s: %s\n", first ? "\n" : "", (long long)t->number,
                host_trial_status_name(t->status), note_of(t));
        first = false;
    }
    free(order);
    return ferror(out) ? sc_error_set(SC_ERR_IO, "cannot write the summary") : SC_OK;
}
