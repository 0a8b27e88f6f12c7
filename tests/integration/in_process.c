#include "in_process.h"

#include <criterion/criterion.h>

sc_trainer *trainer_for_args(int argc, const char **argv)
{
    sc_config cfg;
    bool exit_now = false;
    sc_config_defaults(&cfg);
    cr_assert_eq(sc_config_parse(&cfg, SC_PROGRAM_TRAIN, argc, (char **)argv, &exit_now), SC_OK,
                 "%s", sc_error_message());
    sc_trainer *t;
    cr_assert_eq(sc_trainer_new(&cfg, NULL, &t), SC_OK, "%s", sc_error_message());
    return t;
}
