/* scorch-plot: a PNG of loss and metrics per epoch for every phase of one
 * or more runs (their metrics.jsonl), one panel per quantity, one line per
 * run and phase; or, with --sweep, a sweep's best metric per trial against
 * each swept value. See docs/inspecting.md and docs/sweeps.md. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/jsonl.h"
#include "observe/plot.h"
#include "sweep/plan.h"
#include "sweep/state.h"

enum { EXIT_USAGE = 2, PATH_LEN = 4096, LABEL_LEN = 256, PIXELS_MIN = 200, PIXELS_MAX = 8000 };

/* ---- string lists ---- */

typedef struct name_list {
    const char **v;
    int n;
} name_list;

static int names_find(const name_list *l, const char *s)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0)
            return i;
    return -1;
}

/* Appends s unless the list has it; the list keeps the pointer. */
static sc_status names_add(name_list *l, const char *s)
{
    if (names_find(l, s) >= 0)
        return SC_OK;
    const char **grown = realloc(l->v, (size_t)(l->n + 1) * sizeof *grown);
    if (!grown)
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    l->v = grown;
    l->v[l->n++] = s;
    return SC_OK;
}

/* ---- the command line ---- */

typedef struct plot_args {
    name_list runs;    /* as given */
    name_list metrics; /* --metric, in order; empty: loss and every metric */
    const char *output;
    const char *sweep; /* --sweep DIR */
    int width, height;
} plot_args;

static void usage(FILE *out)
{
    fputs("Usage: scorch-plot RUN_DIR [RUN_DIR...] [-o PNG] [--metric NAME]... [--size WxH]\n"
          "       scorch-plot --sweep DIR [-o PNG] [--size WxH]\n\n"
          "Draws loss and metrics per epoch for every phase (train, valid, test, ...) of\n"
          "each run from its metrics.jsonl: one panel per quantity, one line per run and\n"
          "phase. A RUN_DIR may also be a metrics.jsonl file. With --sweep, draws the best\n"
          "metric of each trial of a scorch-sweep against each swept value, one panel per\n"
          "value (default output: DIR/sweep.png).\n\n"
          "  -o, --output PNG     where to write the PNG (default: RUN_DIR/metrics.png;\n"
          "                       required with several runs)\n"
          "  --metric NAME        a quantity to plot; repeat it or give NAME,NAME,...\n"
          "                       (default: loss and every metric; any numeric field of\n"
          "                       the records works, e.g. samples_per_s, lr, data_wait_s)\n"
          "  --size WxH           the image size in pixels (default: 1200x800)\n"
          "  -h, --help           print this help\n\n"
          "See docs/inspecting.md.\n",
          out);
}

/* Matches argv[*i] against --name VALUE, --name=VALUE or the short form;
 * on a match, *value is the value and *i the last argument used. */
static sc_status option_value(int argc, char **argv, int *i, const char *name,
                              const char *short_name, char **value, bool *matched)
{
    char *arg = argv[*i];
    size_t len = strlen(name);
    *matched = false;
    if (strncmp(arg, name, len) == 0 && arg[len] == '=') {
        *matched = true;
        *value = arg + len + 1;
    } else if (strcmp(arg, name) == 0 || (short_name && strcmp(arg, short_name) == 0)) {
        *matched = true;
        if (*i + 1 >= argc)
            return sc_error_set(SC_ERR_INVALID, "%s needs a value", arg);
        *value = argv[++*i];
    }
    if (*matched && !**value)
        return sc_error_set(SC_ERR_INVALID, "%s needs a value", name);
    return SC_OK;
}

static sc_status parse_size(const char *text, plot_args *a)
{
    char x, rest;
    if (sscanf(text, "%d%c%d%c", &a->width, &x, &a->height, &rest) != 3 || x != 'x')
        return sc_error_set(SC_ERR_INVALID, "--size %s: expected WIDTHxHEIGHT, e.g. 1200x800",
                            text);
    if (a->width < PIXELS_MIN || a->width > PIXELS_MAX || a->height < PIXELS_MIN ||
        a->height > PIXELS_MAX)
        return sc_error_set(SC_ERR_INVALID, "--size %s: width and height must be %d..%d", text,
                            PIXELS_MIN, PIXELS_MAX);
    return SC_OK;
}

/* --metric a,b: each name once, in order. Splits `text` in place. */
static sc_status add_metrics(plot_args *a, char *text)
{
    for (char *save = NULL, *name = strtok_r(text, ",", &save); name;
         name = strtok_r(NULL, ",", &save))
        SC_TRY(names_add(&a->metrics, name));
    return SC_OK;
}

/* One argument at argv[*i] (an option with its value, or a run). */
static sc_status parse_arg(int argc, char **argv, int *i, plot_args *a)
{
    char *value = NULL;
    bool matched;
    SC_TRY(option_value(argc, argv, i, "--output", "-o", &value, &matched));
    if (matched) {
        a->output = value;
        return SC_OK;
    }
    SC_TRY(option_value(argc, argv, i, "--metric", NULL, &value, &matched));
    if (matched)
        return add_metrics(a, value);
    SC_TRY(option_value(argc, argv, i, "--size", NULL, &value, &matched));
    if (matched)
        return parse_size(value, a);
    SC_TRY(option_value(argc, argv, i, "--sweep", NULL, &value, &matched));
    if (matched) {
        if (a->sweep)
            return sc_error_set(SC_ERR_INVALID, "--sweep is given twice");
        a->sweep = value;
        return SC_OK;
    }
    if (argv[*i][0] == '-' && argv[*i][1])
        return sc_error_set(SC_ERR_INVALID, "unknown option %s (see scorch-plot --help)",
                            argv[*i]);
    return names_add(&a->runs, argv[*i]);
}

/* Returns SC_OK with *help set for --help. */
static sc_status parse_args(int argc, char **argv, plot_args *a, bool *help)
{
    *a = (plot_args){.width = 1200, .height = 800};
    *help = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            *help = true;
            return SC_OK;
        }
        SC_TRY(parse_arg(argc, argv, &i, a));
    }
    if (a->sweep && (a->runs.n || a->metrics.n))
        return sc_error_set(SC_ERR_INVALID, "--sweep draws one sweep: not with %s",
                            a->runs.n ? "run directories" : "--metric");
    if (a->sweep)
        return SC_OK;
    if (a->runs.n == 0)
        return sc_error_set(SC_ERR_INVALID, "no run directory given (see scorch-plot --help)");
    if (a->runs.n > 1 && !a->output)
        return sc_error_set(SC_ERR_INVALID, "%d runs: name the PNG to write with -o", a->runs.n);
    return SC_OK;
}

/* ---- runs ---- */

typedef struct run {
    char path[PATH_LEN]; /* its metrics.jsonl */
    char name[LABEL_LEN];
    host_jsonl_file file;
} run;

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The directory's last component, without trailing slashes. */
static void base_name(char *out, size_t size, const char *dir)
{
    size_t end = strlen(dir);
    while (end > 1 && dir[end - 1] == '/')
        end--;
    size_t start = end;
    while (start > 0 && dir[start - 1] != '/')
        start--;
    snprintf(out, size, "%.*s", (int)(end - start), dir + start);
}

/* Phase records need a string phase and a numeric epoch; others (a hook's
 * scalars) are not plotted. */
static sc_status check_records(const run *r)
{
    for (int i = 0; i < r->file.count; i++) {
        const host_json_record *rec = &r->file.records[i];
        const host_json_field *phase = host_json_record_get(rec, "phase");
        const host_json_field *epoch = host_json_record_get(rec, "epoch");
        if (phase && (phase->type != HOST_JSON_STRING || !epoch || epoch->type != HOST_JSON_NUMBER))
            return sc_error_set(SC_ERR_FORMAT, "%s:%d: a phase record needs a string \"phase\" "
                                "and a numeric \"epoch\"", r->path, i + 1);
    }
    return SC_OK;
}

static sc_status load_run(run *r, const char *arg)
{
    if (is_dir(arg)) {
        snprintf(r->path, sizeof r->path, "%s/metrics.jsonl", arg);
        base_name(r->name, sizeof r->name, arg);
    } else {
        snprintf(r->path, sizeof r->path, "%s", arg);
        snprintf(r->name, sizeof r->name, "%s", arg);
    }
    SC_TRY(host_jsonl_read(r->path, &r->file));
    return check_records(r);
}

/* Runs with the same directory name are told apart by the path given. */
static void disambiguate(run *runs, const name_list *args)
{
    for (int i = 0; i < args->n; i++)
        for (int j = 0; j < args->n; j++)
            if (i != j && strcmp(runs[i].name, runs[j].name) == 0) {
                snprintf(runs[i].name, sizeof runs[i].name, "%s", args->v[i]);
                break;
            }
}

static const char *phase_of(const host_json_record *rec)
{
    const host_json_field *f = host_json_record_get(rec, "phase");
    return f ? f->string : NULL;
}

/* ---- what to plot ---- */

/* Record fields that describe the run rather than the model's quality;
 * plotted only when asked for with --metric. */
static bool is_bookkeeping(const char *key)
{
    static const char *const keys[] = {
        "epoch",       "phase",      "step",          "samples",     "samples_per_s",
        "time_s",      "data_wait_s", "compute_s",    "comm_s",      "max_rss_mb",
        "arena_peak_mb", "gpu_mem_mb", "gpu_peak_mb", "lr",
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(key, keys[i]) == 0)
            return true;
    return false;
}

/* Every numeric (or null) field of the phase records, in order of first
 * appearance; `quality_only` leaves out the bookkeeping ones. */
static sc_status collect_fields(const run *runs, int nruns, bool quality_only, name_list *out)
{
    if (quality_only)
        SC_TRY(names_add(out, "loss"));
    for (int r = 0; r < nruns; r++)
        for (int i = 0; i < runs[r].file.count; i++) {
            const host_json_record *rec = &runs[r].file.records[i];
            for (int k = 0; phase_of(rec) && k < rec->count; k++) {
                const host_json_field *f = &rec->fields[k];
                if (f->type != HOST_JSON_STRING && !(quality_only && is_bookkeeping(f->key)))
                    SC_TRY(names_add(out, f->key));
            }
        }
    return SC_OK;
}

/* The --metric names must each be in some run. */
static sc_status check_metrics(const run *runs, int nruns, const name_list *wanted)
{
    name_list all = {0};
    sc_status st = collect_fields(runs, nruns, false, &all);
    for (int i = 0; st == SC_OK && i < wanted->n; i++) {
        if (names_find(&all, wanted->v[i]) >= 0)
            continue;
        char have[1024] = "";
        for (int k = 0; k < all.n; k++) {
            size_t used = strlen(have);
            snprintf(have + used, sizeof have - used, "%s%s", k ? ", " : "", all.v[k]);
        }
        st = sc_error_set(SC_ERR_INVALID, "--metric %s: no run has it (they have: %s)",
                          wanted->v[i], have);
    }
    free(all.v);
    return st;
}

/* ---- the figure ---- */

/* The phases scorch writes, each with its own dash pattern and (in a
 * figure of one run) colour; other phases follow them. */
static const char *const known_phases[] = {"train", "valid", "train_eval", "test"};
enum { KNOWN_PHASES = sizeof known_phases / sizeof known_phases[0] };

static int phase_slot(const char *phase)
{
    for (int i = 0; i < KNOWN_PHASES; i++)
        if (strcmp(phase, known_phases[i]) == 0)
            return i;
    return KNOWN_PHASES;
}

/* Known phases first, in their order; the others as they came. */
static void sort_phases(name_list *phases)
{
    for (int i = 1; i < phases->n; i++)
        for (int j = i; j > 0 && phase_slot(phases->v[j]) < phase_slot(phases->v[j - 1]); j--) {
            const char *t = phases->v[j];
            phases->v[j] = phases->v[j - 1];
            phases->v[j - 1] = t;
        }
}

/* One line's style: (run, phase). */
typedef struct line_key {
    int run, phase;
} line_key;

typedef struct figure_data {
    host_plot_figure fig;
    host_plot_style *styles;
    line_key *keys; /* [style] */
    char (*labels)[LABEL_LEN];
    host_plot_panel *panels;
    host_plot_series *series;
    double *values; /* every series' x and y */
    char title[1024];
} figure_data;

static void figure_free(figure_data *d)
{
    free(d->styles);
    free(d->keys);
    free(d->labels);
    free(d->panels);
    free(d->series);
    free(d->values);
}

/* The legend: a style per (run, phase) that has records. Phases keep a
 * dash pattern each; colours tell runs apart (or phases, in one run). */
static void make_styles(figure_data *d, const run *runs, int nruns, const name_list *phases)
{
    int n = 0;
    for (int r = 0; r < nruns; r++)
        for (int p = 0; p < phases->n; p++) {
            bool present = false;
            for (int i = 0; i < runs[r].file.count && !present; i++) {
                const char *ph = phase_of(&runs[r].file.records[i]);
                present = ph && strcmp(ph, phases->v[p]) == 0;
            }
            if (!present)
                continue;
            if (nruns > 1)
                snprintf(d->labels[n], LABEL_LEN, "%.*s %s", LABEL_LEN / 2, runs[r].name,
                         phases->v[p]);
            else
                snprintf(d->labels[n], LABEL_LEN, "%s", phases->v[p]);
            d->keys[n] = (line_key){r, p};
            int slot = phase_slot(phases->v[p]);
            slot = slot < KNOWN_PHASES ? slot : KNOWN_PHASES + p;
            d->styles[n] = (host_plot_style){d->labels[n], nruns > 1 ? r : slot,
                                           (host_plot_dash)(slot % HOST_PLOT_DASH_COUNT)};
            n++;
        }
    d->fig.style_count = n;
}

/* The (epoch, metric) points of one run's phase into x, y; returns n. */
static int gather(const run *r, const char *phase, const char *metric, double *x, double *y)
{
    int n = 0;
    for (int i = 0; i < r->file.count; i++) {
        const host_json_record *rec = &r->file.records[i];
        const host_json_field *f = host_json_record_get(rec, metric);
        const char *rec_phase = phase_of(rec);
        if (!f || !rec_phase || strcmp(rec_phase, phase) != 0)
            continue;
        x[n] = host_json_record_get(rec, "epoch")->number;
        y[n++] = f->type == HOST_JSON_NUMBER ? f->number : NAN;
    }
    return n;
}

static void make_panels(figure_data *d, const run *runs, const name_list *phases,
                        const name_list *metrics, int max_points)
{
    int s = 0;
    double *values = d->values;
    for (int m = 0; m < metrics->n; m++) {
        host_plot_panel *panel = &d->panels[m];
        *panel = (host_plot_panel){metrics->v[m], "epoch", &d->series[s], 0};
        for (int k = 0; k < d->fig.style_count; k++) {
            const run *r = &runs[d->keys[k].run];
            double *x = values, *y = values + max_points;
            int n = gather(r, phases->v[d->keys[k].phase], metrics->v[m], x, y);
            if (n == 0)
                continue;
            d->series[s++] = (host_plot_series){k, x, y, n};
            panel->count++;
            values += 2 * max_points;
        }
    }
    d->fig.panel_count = metrics->n;
}

static void make_title(figure_data *d, const run *runs, int nruns)
{
    size_t used = 0;
    for (int r = 0; r < nruns && used < sizeof d->title; r++)
        used += (size_t)snprintf(d->title + used, sizeof d->title - used, "%s%s",
                                 r ? ", " : "", runs[r].name);
    d->fig.title = d->title;
}

/* Every phase of the runs, known ones first. */
static sc_status collect_phases(const run *runs, int nruns, name_list *phases)
{
    for (int r = 0; r < nruns; r++)
        for (int i = 0; i < runs[r].file.count; i++)
            if (phase_of(&runs[r].file.records[i]))
                SC_TRY(names_add(phases, phase_of(&runs[r].file.records[i])));
    sort_phases(phases);
    return SC_OK;
}

static sc_status build_figure(figure_data *d, const run *runs, int nruns,
                              const name_list *metrics, const plot_args *a)
{
    name_list phases = {0};
    int max_points = 0;
    for (int r = 0; r < nruns; r++)
        max_points = runs[r].file.count > max_points ? runs[r].file.count : max_points;
    sc_status st = collect_phases(runs, nruns, &phases);
    size_t lines = (size_t)nruns * (size_t)(phases.n ? phases.n : 1);
    size_t series = lines * (size_t)metrics->n;
    d->styles = calloc(lines, sizeof *d->styles);
    d->keys = calloc(lines, sizeof *d->keys);
    d->labels = calloc(lines, sizeof *d->labels);
    d->panels = calloc((size_t)metrics->n, sizeof *d->panels);
    d->series = calloc(series ? series : 1, sizeof *d->series);
    d->values = calloc(series * 2 * (size_t)(max_points ? max_points : 1), sizeof *d->values);
    if (st == SC_OK &&
        (!d->styles || !d->keys || !d->labels || !d->panels || !d->series || !d->values))
        st = sc_error_set(SC_ERR_NOMEM, "out of memory for the figure");
    if (st == SC_OK) {
        make_styles(d, runs, nruns, &phases);
        make_panels(d, runs, &phases, metrics, max_points);
        make_title(d, runs, nruns);
        d->fig.styles = d->styles;
        d->fig.panels = d->panels;
        d->fig.width = a->width;
        d->fig.height = a->height;
    }
    free(phases.v);
    return st;
}

/* ---- --sweep ---- */

/* A trial's x in a dimension's panel: its number (log10 on a log scale),
 * or, for words, the word's place among the dimension's values. */
static double sweep_x(const host_space_dim *dim, bool numeric, const char *value)
{
    if (numeric) {
        double v = strtod(value, NULL);
        return host_space_dim_is_log(dim) ? log10(v) : v;
    }
    for (int i = 0; i < dim->count; i++)
        if (strcmp(dim->values[i], value) == 0)
            return i;
    return NAN;
}

static bool is_number(const char *text)
{
    char *end;
    double v = strtod(text, &end);
    return end != text && !*end && isfinite(v);
}

/* "lr (log10)", or for words "optimizer: 0 adam, 1 sgd". */
static void sweep_xlabel(const host_space_dim *dim, bool numeric, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "%s%s", dim->name,
                                   numeric && host_space_dim_is_log(dim) ? " (log10)"
                                   : numeric                             ? ""
                                                                         : ":");
    for (int i = 0; !numeric && i < dim->count && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s %d %s", i ? "," : "", i,
                                 dim->values[i]);
}

/* The trials drawn, by how they ended. */
static const host_trial_status sweep_groups[] = {HOST_TRIAL_DONE, HOST_TRIAL_STOPPED,
                                                 HOST_TRIAL_RUNNING};
enum { SWEEP_GROUPS = sizeof sweep_groups / sizeof sweep_groups[0] };

typedef struct sweep_figure {
    host_plot_style styles[SWEEP_GROUPS]; /* of the groups that have trials */
    int style_of[SWEEP_GROUPS];
    int style_count;
    host_plot_panel *panels;
    host_plot_series *series;
    double *values;
    char (*xlabels)[LABEL_LEN];
    char title[PATH_LEN + 64], ytitle[LABEL_LEN];
} sweep_figure;

/* Panel d: one series per group, of the trials with a best value. */
static void sweep_panel(sweep_figure *f, int d, const host_space_dim *dim,
                        const host_trial *trials, int64_t count)
{
    bool numeric = true;
    for (int64_t t = 0; t < count; t++)
        numeric = numeric && is_number(trials[t].values[d]);
    sweep_xlabel(dim, numeric, f->xlabels[d], LABEL_LEN);
    host_plot_series *series = &f->series[d * SWEEP_GROUPS];
    f->panels[d] = (host_plot_panel){f->ytitle, f->xlabels[d], series, 0};
    for (int g = 0; g < SWEEP_GROUPS; g++) {
        double *x = f->values + ((size_t)d * SWEEP_GROUPS + (size_t)g) * 2 * (size_t)count;
        double *y = x + count;
        int n = 0;
        for (int64_t t = 0; t < count; t++)
            if (trials[t].status == sweep_groups[g] && isfinite(trials[t].best)) {
                x[n] = sweep_x(dim, numeric, trials[t].values[d]);
                y[n++] = trials[t].best;
            }
        if (n)
            series[f->panels[d].count++] = (host_plot_series){f->style_of[g], x, y, n};
    }
}

static sc_status draw_sweep(const plot_args *a, const host_sweep_plan *plan,
                            const host_sweep_settings *settings, const host_trial *trials,
                            int64_t count, const char *output)
{
    static const host_plot_style group_styles[SWEEP_GROUPS] = {
        {"done", 0, HOST_PLOT_POINTS},
        {"stopped early", 1, HOST_PLOT_POINTS},
        {"interrupted", 7, HOST_PLOT_POINTS},
    };
    int dims = plan->space.count;
    sweep_figure f = {
        .panels = calloc((size_t)dims, sizeof *f.panels),
        .series = calloc((size_t)dims * SWEEP_GROUPS, sizeof *f.series),
        .values = calloc((size_t)dims * SWEEP_GROUPS * 2 * (size_t)(count ? count : 1),
                         sizeof *f.values),
        .xlabels = calloc((size_t)dims, sizeof *f.xlabels),
    };
    sc_status st = f.panels && f.series && f.values && f.xlabels
                       ? SC_OK
                       : sc_error_set(SC_ERR_NOMEM, "out of memory for the figure");
    for (int g = 0; g < SWEEP_GROUPS; g++) {
        bool present = false;
        for (int64_t t = 0; t < count; t++)
            present = present || (trials[t].status == sweep_groups[g] && isfinite(trials[t].best));
        f.style_of[g] = f.style_count;
        if (present)
            f.styles[f.style_count++] = group_styles[g];
    }
    const char *metric = settings->ranked_by[0] ? settings->ranked_by : "metric";
    snprintf(f.ytitle, sizeof f.ytitle, "best %s", metric);
    snprintf(f.title, sizeof f.title, "%s: best %s of %lld trials (%s is better)", a->sweep,
             metric, (long long)count, settings->stop.maximize ? "higher" : "lower");
    for (int d = 0; st == SC_OK && d < dims; d++)
        sweep_panel(&f, d, &plan->space.dims[d], trials, count);
    host_plot_figure fig = {f.title, f.styles, f.style_count, f.panels, dims, a->width,
                            a->height};
    if (st == SC_OK)
        st = host_plot_write_png(&fig, output);
    if (st == SC_OK)
        printf("scorch-plot: wrote %s (%dx%d, %d panel%s, %lld trials)\n", output, a->width,
               a->height, dims, dims == 1 ? "" : "s", (long long)count);
    free(f.panels);
    free(f.series);
    free(f.values);
    free(f.xlabels);
    return st;
}

/* DIR/sweep.ini's space, DIR/state.jsonl's trials. */
static sc_status plot_sweep(const plot_args *a)
{
    char path[PATH_LEN + 32], output[PATH_LEN + 32];
    host_sweep_plan plan;
    host_sweep_settings settings = {0};
    host_trial *trials = NULL;
    int64_t count = 0;
    snprintf(path, sizeof path, "%s/sweep.ini", a->sweep);
    snprintf(output, sizeof output, "%s", a->output ? a->output : "");
    if (!a->output)
        snprintf(output, sizeof output, "%s/sweep.png", a->sweep);
    sc_status st = host_sweep_plan_load(path, &plan);
    snprintf(path, sizeof path, "%s/state.jsonl", a->sweep);
    if (st == SC_OK)
        st = host_sweep_state_read(path, &plan.space, &settings, &trials, &count);
    if (st == SC_OK && count == 0)
        st = sc_error_set(SC_ERR_INVALID, "--sweep %s: no %s (is it a scorch-sweep --out?)",
                          a->sweep, path);
    if (st == SC_OK)
        st = draw_sweep(a, &plan, &settings, trials, count, output);
    host_trials_free(trials, count, plan.space.count);
    host_sweep_plan_free(&plan);
    return st;
}

/* ---- main ---- */

/* RUN_DIR/metrics.png, or beside the metrics file given. */
static void default_output(char *out, size_t size, const char *arg)
{
    if (is_dir(arg)) {
        snprintf(out, size, "%s/metrics.png", arg);
        return;
    }
    const char *slash = strrchr(arg, '/');
    snprintf(out, size, "%.*smetrics.png", slash ? (int)(slash - arg + 1) : 0, arg);
}

static sc_status plot(const plot_args *a, run *runs)
{
    for (int r = 0; r < a->runs.n; r++)
        SC_TRY(load_run(&runs[r], a->runs.v[r]));
    disambiguate(runs, &a->runs);
    name_list found = {0};
    const name_list *metrics = &a->metrics;
    sc_status st;
    if (a->metrics.n) {
        st = check_metrics(runs, a->runs.n, &a->metrics);
    } else {
        st = collect_fields(runs, a->runs.n, true, &found);
        metrics = &found;
    }
    char output[PATH_LEN];
    if (a->output)
        snprintf(output, sizeof output, "%s", a->output);
    else
        default_output(output, sizeof output, a->runs.v[0]);
    figure_data d = {0};
    if (st == SC_OK)
        st = build_figure(&d, runs, a->runs.n, metrics, a);
    if (st == SC_OK)
        st = host_plot_write_png(&d.fig, output);
    if (st == SC_OK)
        printf("scorch-plot: wrote %s (%dx%d, %d panel%s, %d run%s)\n", output, a->width,
               a->height, metrics->n, metrics->n == 1 ? "" : "s", a->runs.n,
               a->runs.n == 1 ? "" : "s");
    figure_free(&d);
    free(found.v);
    return st;
}

static sc_status plot_runs(const plot_args *a)
{
    run *runs = calloc((size_t)a->runs.n, sizeof *runs);
    sc_status st = runs ? plot(a, runs) : sc_error_set(SC_ERR_NOMEM, "out of memory");
    for (int r = 0; runs && r < a->runs.n; r++)
        host_jsonl_free(&runs[r].file);
    free(runs);
    return st;
}

int main(int argc, char **argv)
{
    plot_args a;
    bool help;
    int code = 0;
    if (parse_args(argc, argv, &a, &help) != SC_OK) {
        fprintf(stderr, "scorch-plot: %s\n", sc_error_message());
        code = EXIT_USAGE;
    } else if (help) {
        usage(stdout);
    } else if ((a.sweep ? plot_sweep(&a) : plot_runs(&a)) != SC_OK) {
        fprintf(stderr, "scorch-plot: %s\n", sc_error_message());
        code = 1;
    }
    free(a.runs.v);
    free(a.metrics.v);
    return code;
}
