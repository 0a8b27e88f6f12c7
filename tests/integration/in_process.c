#include "in_process.h"

#include <criterion/criterion.h>

host_trainer *trainer_for_args(int argc, const char **argv)
{
    host_config cfg;
    bool exit_now = false;
    host_config_defaults(&cfg);
    cr_assert_eq(host_config_parse(&cfg, HOST_PROGRAM_TRAIN, argc, (char **)argv, &exit_now), SC_OK,
                 "%s", sc_error_message());
    host_trainer *t;
    cr_assert_eq(host_trainer_new(&cfg, NULL, &t), SC_OK, "%s", sc_error_message());
    return t;
}
