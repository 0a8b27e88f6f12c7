/* scorch-sweep: runs the trials of a sweep file as scorch-train processes
 * in parallel slots, resumably. See docs/sweeps.md. */
#include <errno.h>
#include <libgen.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"
#include "base/crash.h"
#include "scorch/args.h"
#include "sweep/sweep.h"

static void usage(FILE *out)
{
    fputs("Usage: scorch-sweep --sweep FILE --out DIR [options]\n\n"
          "Runs the trials of a sweep file (a scorch-train configuration under [train] and\n"
          "the swept options under [space]) as scorch-train runs in OUT/trial-NNNN, several\n"
          "at a time. Run the same command again to go on after an interruption.\n\n"
          "  --sweep FILE            the sweep file (required)\n"
          "  --out DIR               where the trials, state and results go (required)\n"
          "  --parallel N            trials at a time (default: 1 on the cpu, one per GPU)\n"
          "  --trials N              random search: N draws of the space's random\n"
          "                          dimensions (times its grid)\n"
          "  --seed S                seed of the draws (default 42)\n"
          "  --device D              cpu (default), or GPUs: cuda, cuda:0,1 (one per slot)\n"
          "  --threads N             compute threads of each trial (default: the cores\n"
          "                          divided among the slots)\n"
          "  --launcher WORDS        put before each scorch-train, e.g. \"mpirun -np 2\"\n"
          "  --metric NAME           what ranks the trials (default: accuracy, else loss)\n"
          "  --mode max|min          whether a higher metric is better (needed for a\n"
          "                          metric other than accuracy and loss)\n"
          "  --early-stop RULE       none (default), median or asha\n"
          "  --grace-epochs N        no trial stops before epoch N (default 1)\n"
          "  --min-finished N        median: completed trials it needs (default 3)\n"
          "  --eta N                 asha: the top 1/N of a rung go on (default 3)\n"
          "  -h, --help              print this help\n\n"
          "Exit status: 0 every trial ended (failed ones are listed); 1 every trial failed,\n"
          "or the sweep could not go on; 2 a refused command; 130 interrupted (resumable).\n"
          "See docs/sweeps.md.\n",
          out);
}

enum { EXIT_USAGE = 2 };

/* How an option's value is kept: the argument itself, a copy into a
 * char array, an int (int64_t for --trials), the seed, the rule. */
typedef enum arg_kind { ARG_TEXT, ARG_WORD, ARG_INT, ARG_INT64, ARG_SEED, ARG_RULE } arg_kind;

typedef struct arg_option {
    const char *name;
    arg_kind kind;
    size_t offset; /* into host_sweep_options */
    int min;       /* ARG_INT, ARG_INT64: the least value */
    size_t size;   /* ARG_WORD: the array's */
} arg_option;

#define AT(field) offsetof(host_sweep_options, field)
#define WORD(field) AT(field), 0, sizeof ((host_sweep_options *)0)->field
static const arg_option options[] = {
    {"--sweep", ARG_TEXT, AT(sweep), 0, 0},
    {"--out", ARG_TEXT, AT(out), 0, 0},
    {"--parallel", ARG_INT, AT(parallel), 1, 0},
    {"--trials", ARG_INT64, AT(settings.samples), 1, 0},
    {"--seed", ARG_SEED, AT(settings.seed), 0, 0},
    {"--device", ARG_TEXT, AT(device), 0, 0},
    {"--threads", ARG_INT, AT(threads), 1, 0},
    {"--launcher", ARG_TEXT, AT(launcher), 0, 0},
    {"--metric", ARG_WORD, WORD(settings.metric)},
    {"--mode", ARG_WORD, WORD(settings.mode)},
    {"--early-stop", ARG_RULE, AT(settings.stop.rule), 0, 0},
    {"--grace-epochs", ARG_INT, AT(settings.stop.grace_epochs), 1, 0},
    {"--min-finished", ARG_INT, AT(settings.stop.min_finished), 1, 0},
    {"--eta", ARG_INT, AT(settings.stop.eta), 2, 0},
};
enum { OPTION_COUNT = sizeof options / sizeof options[0] };

typedef struct sweep_args {
    host_sweep_options o;
    bool seen[OPTION_COUNT]; /* per option of the table above */
} sweep_args;

static sc_status set_int(const arg_option *opt, const char *text, void *field)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < opt->min || v > 1000000000)
        return sc_error_set(SC_ERR_INVALID, "%s: '%s' is not an integer from %d to 1000000000",
                            opt->name, text, opt->min);
    if (opt->kind == ARG_INT64)
        *(int64_t *)field = v;
    else
        *(int *)field = (int)v;
    return SC_OK;
}

static sc_status set_value(const arg_option *opt, const char *text, host_sweep_options *o)
{
    void *field = (char *)o + opt->offset;
    char *end;
    switch (opt->kind) {
    case ARG_TEXT:
        *(const char **)field = text;
        return SC_OK;
    case ARG_WORD:
        if (strlen(text) >= opt->size)
            return sc_error_set(SC_ERR_INVALID, "%s: '%s' is too long", opt->name, text);
        snprintf(field, opt->size, "%s", text);
        return SC_OK;
    case ARG_INT:
    case ARG_INT64:
        return set_int(opt, text, field);
    case ARG_SEED:
        errno = 0;
        *(uint64_t *)field = strtoull(text, &end, 10);
        if (errno || end == text || *end || text[0] == '-')
            return sc_error_set(SC_ERR_INVALID, "--seed: '%s' is not 0 to 2^64-1", text);
        return SC_OK;
    case ARG_RULE:
        if (!host_stop_rule_parse(text, field))
            return sc_error_set(SC_ERR_INVALID, "--early-stop: '%s' is not none, median or "
                                "asha", text);
        return SC_OK;
    }
    return SC_OK;
}

static sc_status unknown_option(const char *arg)
{
    const char *names[OPTION_COUNT + 1];
    for (int i = 0; i < OPTION_COUNT; i++)
        names[i] = options[i].name;
    names[OPTION_COUNT] = "--help";
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(arg, "="), arg);
    const char *near = sc_args_suggest(name, names, OPTION_COUNT + 1);
    if (near)
        return sc_error_set(SC_ERR_INVALID, "unknown option %s (did you mean %s?)", name, near);
    return sc_error_set(SC_ERR_INVALID, "unknown %s %s (see scorch-sweep --help)",
                        arg[0] == '-' ? "option" : "argument", name);
}

/* One option at argv[*i], with its value as the next argument or after '='. */
static sc_status parse_one(int argc, char **argv, int *i, sweep_args *a)
{
    const char *arg = argv[*i];
    for (int k = 0; k < OPTION_COUNT; k++) {
        size_t len = strlen(options[k].name);
        if (strncmp(arg, options[k].name, len) != 0 || (arg[len] && arg[len] != '='))
            continue;
        const char *value = arg[len] == '=' ? arg + len + 1 : *i + 1 < argc ? argv[++*i] : NULL;
        if (!value || !value[0])
            return sc_error_set(SC_ERR_INVALID, "%s needs a value", options[k].name);
        if (a->seen[k])
            return sc_error_set(SC_ERR_INVALID, "%s is given twice", options[k].name);
        a->seen[k] = true;
        return set_value(&options[k], value, &a->o);
    }
    return unknown_option(arg);
}

static bool given(const sweep_args *a, const char *name)
{
    for (int k = 0; k < OPTION_COUNT; k++)
        if (strcmp(options[k].name, name) == 0)
            return a->seen[k];
    return false;
}

/* The knobs of one rule, given with another, would be ignored. */
static sc_status check_rule_knobs(const sweep_args *a)
{
    host_stop_rule rule = a->o.settings.stop.rule;
    if (given(a, "--min-finished") && rule != HOST_STOP_MEDIAN)
        return sc_error_set(SC_ERR_INVALID, "--min-finished is for --early-stop median");
    if (given(a, "--eta") && rule != HOST_STOP_ASHA)
        return sc_error_set(SC_ERR_INVALID, "--eta is for --early-stop asha");
    if (given(a, "--grace-epochs") && rule == HOST_STOP_NONE)
        return sc_error_set(SC_ERR_INVALID, "--grace-epochs is for --early-stop median or asha");
    return SC_OK;
}

static sc_status parse_args(int argc, char **argv, sweep_args *a, bool *help)
{
    *help = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            *help = true;
            return SC_OK;
        }
        SC_TRY(parse_one(argc, argv, &i, a));
    }
    if (!a->o.sweep || !a->o.out)
        return sc_error_set(SC_ERR_INVALID, "missing %s (required; see scorch-sweep --help)",
                            !a->o.sweep ? (!a->o.out ? "--sweep, --out" : "--sweep") : "--out");
    bool maximize;
    if (a->o.settings.metric[0])
        SC_TRY(host_sweep_metric_mode(a->o.settings.metric, a->o.settings.mode, &maximize));
    else
        SC_TRY(host_sweep_metric_mode("accuracy", a->o.settings.mode, &maximize));
    return check_rule_knobs(a);
}

/* scorch-train beside this program's own file. */
static sc_status find_train(char *buf, size_t size)
{
    char self[HOST_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return sc_error_set(SC_ERR_IO, "cannot find this program's file: %s", strerror(errno));
    self[n] = '\0';
    snprintf(buf, size, "%s/scorch-train", dirname(self));
    if (access(buf, X_OK) != 0)
        return sc_error_set(SC_ERR_IO, "cannot run %s, which scorch-sweep runs beside itself: %s",
                            buf, strerror(errno));
    return SC_OK;
}

int main(int argc, char **argv)
{
    static char train[HOST_PATH_MAX];
    sweep_args a = {.o = {.device = "cpu", .launcher = "", .train = train,
                          .settings = {.seed = 42,
                                       .stop = {.grace_epochs = 1, .min_finished = 3, .eta = 3}}}};
    bool help;
    if (parse_args(argc, argv, &a, &help) != SC_OK || (!help && find_train(train, sizeof train) != SC_OK)) {
        fprintf(stderr, "scorch-sweep: %s\n", sc_error_message());
        return EXIT_USAGE;
    }
    if (help) {
        usage(stdout);
        return 0;
    }
    host_crash_install("scorch-sweep");
    a.o.progress = isatty(STDOUT_FILENO);
    return host_sweep_run(&a.o);
}
