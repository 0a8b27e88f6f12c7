/* scorch-train: trains a model plugin on a dataset plugin. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "trainer.h"

enum { EXIT_USAGE = 2, EXIT_INTERRUPTED = 130 };

/* First SIGINT/SIGTERM: stop after the batch with a checkpoint. A second
 * one falls through to the default action and ends the process at once. */
static void on_stop_signal(int sig)
{
    sc_trainer_stop_signal = 1;
    signal(sig, SIG_DFL);
}

static void install_signal_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void report_failure(const sc_trainer *trainer)
{
    fprintf(stderr, "scorch-train: %s\n", sc_error_message());
    char last[SC_PATH_MAX];
    if (sc_trainer_last_checkpoint(trainer, last, sizeof last))
        fprintf(stderr, "scorch-train: no checkpoint was written after the failure; "
                        "%s is the last good one\n", last);
}

int main(int argc, char **argv)
{
    sc_config cfg;
    bool exit_now = false;
    sc_config_defaults(&cfg);
    if (sc_config_parse(&cfg, SC_PROGRAM_TRAIN, argc, argv, &exit_now) != SC_OK) {
        fprintf(stderr, "scorch-train: %s\n", sc_error_message());
        return EXIT_USAGE;
    }
    if (exit_now)
        return 0;
    install_signal_handlers();
    sc_trainer *trainer;
    bool interrupted = false;
    sc_status st = sc_trainer_new(&cfg, &trainer);
    if (st != SC_OK) {
        fprintf(stderr, "scorch-train: %s\n", sc_error_message());
        return 1;
    }
    st = sc_trainer_run(trainer, &interrupted);
    if (st != SC_OK)
        report_failure(trainer);
    sc_trainer_free(trainer);
    if (st != SC_OK)
        return 1;
    return interrupted ? EXIT_INTERRUPTED : 0;
}
