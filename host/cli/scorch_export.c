/* scorch-export: writes a checkpoint's weights as a safetensors file,
 * which PyTorch, JAX and Hugging Face tools read (run/export.h). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/crash.h"
#include "run/export.h"
#include "scorch/args.h"

enum { EXIT_USAGE = 2 };

static void usage(FILE *out)
{
    fputs("Usage: scorch-export --checkpoint PATH --out FILE.safetensors [--ema]\n\n"
          "Writes the parameters and buffers (batch norm's running statistics) of a scorch\n"
          "checkpoint as a safetensors file, under the model's parameter names, with the\n"
          "plugins, their arguments, the scorch version and the checkpoint as metadata.\n"
          "No plugin is loaded.\n\n"
          "Options:\n"
          "  --checkpoint PATH    the checkpoint to export (required)\n"
          "  --out FILE           where to write the safetensors file (required)\n"
          "  --ema                the EMA of the weights (a run trained with --ema-decay);\n"
          "                       buffers as trained\n"
          "  --model PATH         the model plugin to record, when the run's has moved\n"
          "  --dataset PATH       the dataset plugin to record, likewise\n"
          "  --help               print this help and exit\n\n"
          "See docs/weights.md.\n",
          out);
}

typedef struct export_args {
    host_export_request request;
    bool help;
} export_args;

/* The option at argv[*i] with a value (--name VALUE or --name=VALUE). */
static sc_status take_value(int argc, char **argv, int *i, const char *eq, const char **value)
{
    if (eq)
        *value = eq + 1;
    else if (*i + 1 < argc)
        *value = argv[++*i];
    else
        *value = "";
    if (!**value)
        return sc_error_set(SC_ERR_INVALID, "%.*s needs a value", (int)strcspn(argv[*i], "="),
                            argv[*i]);
    return SC_OK;
}

static sc_status unknown_option(const char *arg)
{
    static const char *const names[] = {"--checkpoint", "--out", "--ema", "--model",
                                        "--dataset", "--help"};
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)strcspn(arg, "="), arg);
    const char *near = sc_args_suggest(word, names, (int)(sizeof names / sizeof names[0]));
    if (near)
        return sc_error_set(SC_ERR_INVALID, "unknown option %s (did you mean %s?)", word, near);
    return sc_error_set(SC_ERR_INVALID, "unknown option %s (see scorch-export --help)", word);
}

static sc_status parse_arg(int argc, char **argv, int *i, export_args *a)
{
    static const char *const valued[] = {"--checkpoint", "--out", "--model", "--dataset"};
    host_export_request *r = &a->request;
    const char **fields[] = {&r->checkpoint, &r->out, &r->model, &r->dataset};
    const char *arg = argv[*i], *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    for (int k = 0; k < 4; k++)
        if (strlen(valued[k]) == len && strncmp(arg, valued[k], len) == 0)
            return take_value(argc, argv, i, eq, fields[k]);
    if (strcmp(arg, "--ema") == 0)
        r->ema = true;
    else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
        a->help = true;
    else if (arg[0] == '-')
        return unknown_option(arg);
    else
        return sc_error_set(SC_ERR_INVALID, "unexpected argument '%s' (see scorch-export "
                            "--help)", arg);
    return SC_OK;
}

static sc_status parse_args(int argc, char **argv, export_args *a)
{
    for (int i = 1; i < argc && !a->help; i++)
        SC_TRY(parse_arg(argc, argv, &i, a));
    if (a->help)
        return SC_OK;
    if (!a->request.checkpoint || !a->request.out)
        return sc_error_set(SC_ERR_INVALID, "missing %s (required; see scorch-export --help)",
                            !a->request.checkpoint ? "--checkpoint" : "--out");
    return SC_OK;
}

int main(int argc, char **argv)
{
    export_args a = {.help = false};
    host_crash_install("scorch-export");
    if (parse_args(argc, argv, &a) != SC_OK) {
        fprintf(stderr, "scorch-export: %s\n", sc_error_message());
        return EXIT_USAGE;
    }
    if (a.help) {
        usage(stdout);
        return 0;
    }
    host_export_result result;
    if (host_export_weights(&a.request, &result) != SC_OK) {
        fprintf(stderr, "scorch-export: %s\n", sc_error_message());
        return 1;
    }
    printf("wrote %s: %d tensors, %lld values, the %s weights of %s\n", a.request.out,
           result.tensors, (long long)result.values, a.request.ema ? "EMA" : "trained",
           a.request.checkpoint);
    return 0;
}
