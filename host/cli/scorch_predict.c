/* scorch-predict: runs a checkpoint's network on raw inputs (files, stdin's
 * lines) and prints the top classes or the outputs of each
 * (run/predict.h, docs/predict.md). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"
#include "base/crash.h"
#include "run/predict.h"

/* 0: every input predicted; 1: nothing could be (the checkpoint, its
 * plugins, a failed write); 2: the command line; 3: some inputs failed. */
enum { EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_INPUTS_FAILED = 3 };

static host_predict_format parse_format(const char *name)
{
    if (strcmp(name, "auto") == 0)
        return isatty(STDOUT_FILENO) ? HOST_PREDICT_TEXT : HOST_PREDICT_CSV;
    return strcmp(name, "text") == 0  ? HOST_PREDICT_TEXT
           : strcmp(name, "csv") == 0 ? HOST_PREDICT_CSV
                                      : HOST_PREDICT_JSONL;
}

/* "" in the config: the checkpoint's own, NULL for the inference API. */
static const char *or_null(const char *text) { return text[0] ? text : NULL; }

static host_predict_request request_of(const host_config *cfg)
{
    return (host_predict_request){
        .checkpoint = cfg->checkpoint,
        .infer = {.model = or_null(cfg->model), .dataset = or_null(cfg->dataset),
                  .dataset_path = or_null(cfg->dataset_path), .device = or_null(cfg->device),
                  .threads = cfg->threads, .max_batch = cfg->batch_size, .ema = cfg->ema},
        .inputs = cfg->inputs,
        .n_inputs = cfg->n_inputs,
        .input_list = cfg->input_list,
        .topk = cfg->topk,
        .raw = cfg->raw,
        .format = parse_format(cfg->format),
        .out = stdout,
        .err = stderr,
    };
}

int main(int argc, char **argv)
{
    host_config cfg;
    bool exit_now = false;
    host_crash_install("scorch-predict");
    if (host_config_parse(&cfg, HOST_PROGRAM_PREDICT, argc, argv, &exit_now) != SC_OK) {
        fprintf(stderr, "scorch-predict: %s\n", sc_error_message());
        return EXIT_USAGE;
    }
    if (exit_now)
        return 0;
    host_predict_request request = request_of(&cfg);
    if (host_predict_check(&request) != SC_OK) {
        fprintf(stderr, "scorch-predict: %s\n", sc_error_message());
        return EXIT_USAGE;
    }
    host_predict_result result;
    if (host_predict(&request, &result) != SC_OK) {
        fprintf(stderr, "scorch-predict: %s\n", sc_error_message());
        return EXIT_FAILED;
    }
    return result.failed ? EXIT_INPUTS_FAILED : 0;
}
