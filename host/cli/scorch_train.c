/* scorch-train: trains a model plugin on a dataset plugin. */
#include <stdio.h>

#include "base/config.h"
#include "base/crash.h"
#include "control/signals.h"
#include "dist/dist.h"
#include "dist/launch.h"
#include "run/dist_start.h"
#include "run/lr_find.h"
#include "run/model_summary.h"
#include "run/trainer.h"

enum { EXIT_USAGE = 2 };

static void report_failure(const host_trainer *trainer)
{
    host_dist_print_error("scorch-train");
    char last[HOST_PATH_MAX];
    if (host_trainer_last_checkpoint(trainer, last, sizeof last))
        fprintf(stderr, "%sscorch-train: no checkpoint was written after the failure; "
                        "%s is the last good one\n", host_log_prefix(), last);
}

/* --summary: the model's table, and no training. */
static int print_summary(const host_config *cfg)
{
    if (host_model_summary_run(cfg) == SC_OK)
        return 0;
    fprintf(stderr, "scorch-train: %s\n", sc_error_message());
    return 1;
}

/* --lr-find: the LR range test, and no training. */
static int find_lr(const host_config *cfg, int replicas)
{
    if (replicas > 1)
        sc_error_set(SC_ERR_INVALID, "--lr-find runs one replica: not with %d (--replicas, "
                     "--device)", replicas);
    else if (host_lr_find_run(cfg) == SC_OK)
        return 0;
    fprintf(stderr, "scorch-train: %s\n", sc_error_message());
    return 1;
}

/* Trains as a process (seat NULL) or as one replica of several; the
 * exit code. */
static int train(const host_config *cfg, const host_dist_seat *seat)
{
    host_trainer *trainer;
    bool interrupted = false;
    sc_status st = host_trainer_new(cfg, seat, &trainer);
    if (st != SC_OK) {
        host_dist_print_error("scorch-train"); /* with the rank, when there are several */
        return 1;
    }
    st = host_trainer_run(trainer, &interrupted);
    if (st != SC_OK)
        report_failure(trainer);
    host_trainer_free(trainer);
    if (st != SC_OK)
        return 1;
    return interrupted ? HOST_EXIT_INTERRUPTED : 0;
}

static int train_replica(const host_dist_seat *seat, void *cfg) { return train(cfg, seat); }

int main(int argc, char **argv)
{
    host_config cfg;
    bool exit_now = false;
    host_config_defaults(&cfg);
    if (host_config_parse(&cfg, HOST_PROGRAM_TRAIN, argc, argv, &exit_now) != SC_OK) {
        host_dist_print_error("scorch-train");
        return EXIT_USAGE;
    }
    if (exit_now)
        return 0;
    if (host_lr_find_check_config(&cfg) != SC_OK) {
        fprintf(stderr, "scorch-train: %s\n", sc_error_message());
        return EXIT_USAGE;
    }
    char program[64]; /* a rank's crash report says which rank it is */
    snprintf(program, sizeof program, "%sscorch-train", host_log_prefix());
    host_crash_install(program);
    if (cfg.summary)
        return print_summary(&cfg);
    int replicas;
    if (host_dist_start_replicas(&cfg, &replicas) != SC_OK) {
        host_dist_print_error("scorch-train");
        return 1;
    }
    host_signals_install();
    if (cfg.lr_find)
        return find_lr(&cfg, replicas);
    if (replicas == 1)
        return train(&cfg, NULL);
    return host_dist_run_replicas(replicas, cfg.collective_timeout, train_replica, &cfg);
}
