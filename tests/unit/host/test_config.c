/* Options: defaults, the command line, INI files, precedence, errors,
 * --help, and the resolved config's round trip. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"
#include "scorch/args.h"

static sc_status parse_argv(host_config *cfg, host_program program, char **argv, bool *exit_now)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    return host_config_parse(cfg, program, argc, argv, exit_now);
}

/* scorch-train with the required options and then the given ones. */
static sc_status train(host_config *cfg, char **extra)
{
    char *argv[128] = {"scorch-train", "--model", "m.so", "--dataset", "d.so"};
    int n = 5;
    for (int i = 0; extra[i]; i++) {
        cr_assert_lt(n, 127, "too many arguments for this helper");
        argv[n++] = extra[i];
    }
    bool exit_now;
    return parse_argv(cfg, HOST_PROGRAM_TRAIN, argv, &exit_now);
}

#define TRAIN(cfg, ...) train(cfg, (char *[]){__VA_ARGS__, NULL})

static void assert_message_has(const char *part)
{
    cr_assert(strstr(sc_error_message(), part), "message '%s' lacks '%s'", sc_error_message(),
              part);
}

/* A file in /tmp holding text; the name is in path (64 bytes). */
static void write_file(char *path, const char *text)
{
    strcpy(path, "/tmp/scorch-test-config-XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    size_t len = strlen(text);
    cr_assert(write(fd, text, len) == (ssize_t)len);
    close(fd);
}

/* Loads INI text as scorch-train over the defaults. */
static sc_status load_text(host_config *cfg, const char *text, char *path)
{
    write_file(path, text);
    host_config_defaults(cfg);
    sc_status st = host_config_load_ini(cfg, HOST_PROGRAM_TRAIN, path);
    unlink(path);
    return st;
}

static char *help_text(host_program program)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    host_config_print_help(f, program);
    fclose(f);
    return text;
}

Test(config, defaults_are_the_documented_ones)
{
    host_config c;
    host_config_defaults(&c);
    cr_expect_eq(c.epochs, 10);
    cr_expect_eq(c.batch_size, 128);
    cr_expect_str_eq(c.optimizer, "adam");
    cr_expect_eq(c.lr, 1e-3);
    cr_expect_eq(c.weight_decay, 0);
    cr_expect_eq(c.momentum, 0);
    cr_expect_not(c.nesterov);
    cr_expect_eq(c.beta1, 0.9);
    cr_expect_eq(c.beta2, 0.999);
    cr_expect_eq(c.eps, 1e-8);
    cr_expect_str_eq(c.lr_schedule, "constant");
    cr_expect_eq(c.warmup_steps, 0);
    cr_expect_eq(c.lr_step_epochs, 30);
    cr_expect_eq(c.lr_gamma, 0.1);
    cr_expect_eq(c.lr_min, 0);
    cr_expect_eq(c.lr_patience, 10);
    cr_expect_eq(c.lr_factor, 0.1);
    cr_expect_eq(c.seed, 42);
    cr_expect_eq(c.workers, 2);
    cr_expect_eq(c.prefetch, 4);
    cr_expect_eq(c.threads, 0);
    cr_expect_str_eq(c.device, ""); /* the model's preference, else cpu */
    cr_expect_eq(c.hooks.n, 0);
    cr_expect_str_eq(c.run_dir, "");
    cr_expect_not(c.resume);
    cr_expect_str_eq(c.resume_path, "");
    cr_expect_eq(c.checkpoint_every, 0);
    cr_expect_eq(c.keep_last, 3);
    cr_expect_eq(c.max_train_iterations, 0);
    cr_expect_not(c.validate_on_train);
    cr_expect_not(c.quiet);
    cr_expect_str_eq(c.split, "test");
    cr_expect_eq(c.topk, 5);
    cr_expect_str_eq(c.model, "");
    cr_expect_str_eq(c.config, "");
}

Test(config, command_line_takes_both_value_forms)
{
    host_config c;
    cr_assert_eq(TRAIN(&c, "--epochs", "3", "--batch-size=64", "--lr", "0.5", "--optimizer=sgd",
                       "--quiet", "--seed", "18446744073709551615", "--model-args=hidden=32:16",
                       "--dataset-path", "/data/x", "--momentum", "0.9", "--nesterov",
                       "--max-train-iterations", "9000000000"),
                 SC_OK, "%s", sc_error_message());
    cr_expect_str_eq(c.model, "m.so");
    cr_expect_str_eq(c.dataset, "d.so");
    cr_expect_eq(c.epochs, 3);
    cr_expect_eq(c.batch_size, 64);
    cr_expect_eq(c.lr, 0.5);
    cr_expect_str_eq(c.optimizer, "sgd");
    cr_expect(c.quiet);
    cr_expect(c.nesterov);
    cr_expect_eq(c.seed, UINT64_MAX);
    cr_expect_str_eq(c.model_args, "hidden=32:16");
    cr_expect_str_eq(c.dataset_path, "/data/x");
    cr_expect_eq(c.max_train_iterations, 9000000000);
}

Test(config, the_last_repeat_wins)
{
    host_config c;
    cr_assert_eq(TRAIN(&c, "--epochs", "3", "--epochs=4"), SC_OK);
    cr_expect_eq(c.epochs, 4);
}

Test(config, hooks_repeat_and_each_source_replaces_the_list)
{
    host_config c;
    cr_assert_eq(TRAIN(&c, "--hooks", "a.so", "--hooks=b.so"), SC_OK, "%s", sc_error_message());
    cr_assert_eq(c.hooks.n, 2);
    cr_expect_str_eq(c.hooks.path[0], "a.so");
    cr_expect_str_eq(c.hooks.path[1], "b.so");

    char path[64];
    write_file(path, "[train]\nhooks = x.so\nhooks = y.so\nhooks = z.so\n");
    cr_assert_eq(TRAIN(&c, "--config", path), SC_OK, "%s", sc_error_message());
    cr_assert_eq(c.hooks.n, 3, "INI lines append");
    cr_expect_str_eq(c.hooks.path[2], "z.so");
    cr_assert_eq(TRAIN(&c, "--config", path, "--hooks", "cli.so"), SC_OK);
    cr_assert_eq(c.hooks.n, 1, "the command line replaces the INI file's list");
    cr_expect_str_eq(c.hooks.path[0], "cli.so");
    unlink(path);

    char *nine[20] = {0};
    for (int i = 0; i < 18; i += 2)
        nine[i] = "--hooks", nine[i + 1] = "h.so";
    cr_assert_eq(train(&c, nine), SC_ERR_INVALID);
    assert_message_has("--hooks: 'h.so' is one more than the 8 --hooks allowed");
}

Test(config, resume_takes_an_optional_path)
{
    host_config c;
    cr_assert_eq(TRAIN(&c, "--resume"), SC_OK);
    cr_expect(c.resume);
    cr_expect_str_eq(c.resume_path, "");

    cr_assert_eq(TRAIN(&c, "--resume", "--epochs", "2"), SC_OK);
    cr_expect(c.resume);
    cr_expect_str_eq(c.resume_path, "");
    cr_expect_eq(c.epochs, 2);

    cr_assert_eq(TRAIN(&c, "--resume", "runs/a/last.ckpt", "--epochs", "2"), SC_OK);
    cr_expect(c.resume);
    cr_expect_str_eq(c.resume_path, "runs/a/last.ckpt");

    cr_assert_eq(TRAIN(&c, "--resume=b.ckpt"), SC_OK);
    cr_expect_str_eq(c.resume_path, "b.ckpt");

    cr_assert_eq(TRAIN(&c, "--quiet"), SC_OK);
    cr_expect_not(c.resume);

    cr_assert_eq(TRAIN(&c, "--resume="), SC_ERR_INVALID);
    assert_message_has("--resume");
}

Test(config, command_line_syntax_errors_name_the_argument)
{
    host_config c;
    cr_assert_eq(TRAIN(&c, "stray"), SC_ERR_INVALID);
    assert_message_has("'stray'");

    cr_assert_eq(TRAIN(&c, "--batchsize", "3"), SC_ERR_INVALID);
    assert_message_has("unknown option --batchsize");
    assert_message_has("did you mean --batch-size?");

    cr_assert_eq(TRAIN(&c, "--zzzzzz"), SC_ERR_INVALID);
    assert_message_has("--zzzzzz");
    assert_message_has("--help");

    cr_assert_eq(TRAIN(&c, "--epochs"), SC_ERR_INVALID);
    assert_message_has("--epochs needs a value");

    cr_assert_eq(TRAIN(&c, "--run-dir", "--quiet"), SC_ERR_INVALID);
    assert_message_has("--run-dir needs a value");

    cr_assert_eq(TRAIN(&c, "--quiet=yes"), SC_ERR_INVALID);
    assert_message_has("--quiet takes no value");

    cr_assert_eq(TRAIN(&c, "--checkpoint", "x.ckpt"), SC_ERR_INVALID);
    assert_message_has("--checkpoint is an option of scorch-test");
}

/* Every validated option refuses a bad value with its name and the value. */
Test(config, bad_values_name_option_and_value)
{
    static const char *const bad[][2] = {
        {"epochs", "-1"},         {"epochs", "three"},       {"epochs", "99999999999"},
        {"batch-size", "0"},      {"lr", "0"},               {"lr", "-0.1"},
        {"lr", "nan"},            {"lr", "1e-3x"},           {"workers", "-1"},
        {"keep-last", "0"},       {"optimizer", "sgdd"},     {"lr-schedule", "linear"},
        {"device", "gpu"},        {"device", "cuda:x"},      {"device", "cuda:"},
        {"seed", "-1"},           {"beta1", "1"},            {"lr-factor", "0"},
        {"prefetch", "0"},        {"max-valid-iterations", "-5"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char arg[64];
        snprintf(arg, sizeof arg, "--%s=%s", bad[i][0], bad[i][1]);
        host_config c;
        cr_assert_eq(TRAIN(&c, arg), SC_ERR_INVALID, "%s was accepted", arg);
        char name[64], value[64];
        snprintf(name, sizeof name, "--%s:", bad[i][0]);
        snprintf(value, sizeof value, "'%s'", bad[i][1]);
        assert_message_has(name);
        assert_message_has(value);
    }
    host_config c;
    bool exit_now;
    char *argv[] = {"scorch-test", "--checkpoint", "c", "--split", "validation", NULL};
    cr_assert_eq(parse_argv(&c, HOST_PROGRAM_TEST, argv, &exit_now), SC_ERR_INVALID);
    assert_message_has("--split: 'validation' is not one of train|valid|test");
}

Test(config, devices_are_accepted_by_syntax)
{
    const char *ok[] = {"cpu",  "cuda",     "cuda:0",  "cuda:12", "cuda:0,2",
                        "auto", "parallel", "distributed_dataparallel"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        host_config c;
        cr_assert_eq(TRAIN(&c, "--device", (char *)ok[i]), SC_OK, "%s", sc_error_message());
        cr_expect_str_eq(c.device, ok[i]);
    }
    const char *bad[] = {"gpu", "cuda:", "cuda:x", "cuda:0,0", "cuda:1,", "CPU"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        host_config c;
        cr_expect_eq(TRAIN(&c, "--device", (char *)bad[i]), SC_ERR_INVALID, "%s", bad[i]);
        assert_message_has("--device: '");
    }
}

Test(config, missing_required_options_are_named)
{
    host_config c;
    bool exit_now;
    char *none[] = {"scorch-train", "--epochs", "2", NULL};
    cr_assert_eq(parse_argv(&c, HOST_PROGRAM_TRAIN, none, &exit_now), SC_ERR_INVALID);
    assert_message_has("missing --model, --dataset");
    assert_message_has("scorch-train --help");

    char *no_dataset[] = {"scorch-train", "--model", "m.so", NULL};
    cr_assert_eq(parse_argv(&c, HOST_PROGRAM_TRAIN, no_dataset, &exit_now), SC_ERR_INVALID);
    assert_message_has("missing --dataset (required");

    /* scorch-test takes model and dataset from the checkpoint. */
    char *test_none[] = {"scorch-test", NULL};
    cr_assert_eq(parse_argv(&c, HOST_PROGRAM_TEST, test_none, &exit_now), SC_ERR_INVALID);
    assert_message_has("missing --checkpoint");
    char *test_ok[] = {"scorch-test", "--checkpoint", "c.ckpt", NULL};
    cr_assert_eq(parse_argv(&c, HOST_PROGRAM_TEST, test_ok, &exit_now), SC_OK);
    cr_expect_str_eq(c.checkpoint, "c.ckpt");
}

Test(config, help_and_version_exit_without_required_options, .init = cr_redirect_stdout)
{
    host_config c;
    bool exit_now = false;
    char *help[] = {"scorch-train", "--help", "--bogus", NULL};
    cr_assert_eq(parse_argv(&c, HOST_PROGRAM_TRAIN, help, &exit_now), SC_OK);
    cr_expect(exit_now);
    exit_now = false;
    char *version[] = {"scorch-test", "--version", NULL};
    cr_assert_eq(parse_argv(&c, HOST_PROGRAM_TEST, version, &exit_now), SC_OK);
    cr_expect(exit_now);
    fflush(stdout);
    cr_expect_stdout_neq_str("");
}

Test(config, help_lists_options_with_defaults)
{
    char *train_help = help_text(HOST_PROGRAM_TRAIN);
    static const char *const want[] = {
        "--model PATH", "--dataset PATH", "--dataset-path PATH", "--model-args K=V,...",
        "--dataset-args K=V,...", "--config FILE", "--epochs N", "(default: 10)",
        "--batch-size N", "(default: 128)", "--optimizer sgd|adam|adamw", "(default: adam)",
        "--lr X", "(default: 1e-3)", "--weight-decay X", "--momentum X", "--lr-schedule",
        "--seed N", "(default: 42)", "--workers N", "--device DEVICE", "--run-dir DIR",
        "(default: runs/<model>-<timestamp>)", "--resume [PATH]", "--checkpoint-every N",
        "--keep-last N", "--max-train-iterations N", "--max-valid-iterations N",
        "--max-test-iterations N", "--validate-on-train", "--quiet", "--help", "--version",
        "Optimizer:", "[train]", "--hooks PATH", "(default: the model's",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(strstr(train_help, want[i]), "train help lacks '%s'", want[i]);
    cr_expect_not(strstr(train_help, "--checkpoint PATH"), "a scorch-test option in train help");
    free(train_help);

    char *test_help = help_text(HOST_PROGRAM_TEST);
    cr_expect(strstr(test_help, "--checkpoint PATH"));
    cr_expect(strstr(test_help, "(required)"));
    cr_expect(strstr(test_help, "--split train|valid|test"));
    cr_expect(strstr(test_help, "(default: the checkpoint's)"));
    cr_expect(strstr(test_help, "[test]"));
    cr_expect_not(strstr(test_help, "--epochs"), "a scorch-train option in test help");
    free(test_help);
}

Test(config, command_line_wins_over_the_ini_file)
{
    char path[64];
    write_file(path, "# run settings\n"
                     "[train]\n"
                     "epochs = 5\n"
                     "lr = 0.01   ; inline comment\n"
                     "optimizer = sgd\n"
                     "quiet = true\n"
                     "model = from-ini.so\n");
    for (int order = 0; order < 2; order++) {
        host_config c;
        char *argv[] = {"scorch-train", "--dataset", "d.so", "--epochs", "7",
                        "--config", path, NULL};
        if (order) { /* --config first: the command line still wins */
            argv[3] = "--config", argv[4] = path, argv[5] = "--epochs", argv[6] = "7";
        }
        bool exit_now;
        cr_assert_eq(parse_argv(&c, HOST_PROGRAM_TRAIN, argv, &exit_now), SC_OK, "%s",
                     sc_error_message());
        cr_expect_eq(c.epochs, 7);
        cr_expect_eq(c.lr, 0.01);
        cr_expect_str_eq(c.optimizer, "sgd");
        cr_expect(c.quiet);
        cr_expect_str_eq(c.model, "from-ini.so");
        cr_expect_eq(c.batch_size, 128);
        cr_expect_str_eq(c.config, path);
    }
    unlink(path);
}

Test(config, config_given_twice_is_an_error)
{
    host_config c;
    cr_assert_eq(TRAIN(&c, "--config", "a.ini", "--config=b.ini"), SC_ERR_INVALID);
    assert_message_has("--config is given twice");
}

Test(config, ini_errors_name_file_line_and_key)
{
    static const struct {
        const char *text, *parts[3];
    } cases[] = {
        {"[train]\nepochs = 2\nbatchsize = 3\n", {":3: ", "unknown option batchsize", "did you mean batch-size?"}},
        {"[train]\nepochs = zero\n", {":2: ", "epochs: 'zero' is not an integer", NULL}},
        {"[train]\n\nlr = 0\n", {":3: ", "lr: '0' is out of range (must be > 0)", NULL}},
        {"[train]\nquiet = yes\n", {":2: ", "quiet: 'yes' is not true or false", NULL}},
        {"[training]\nepochs = 2\n", {":2: ", "section [training]", "reads [train]"}},
        {"[test]\nsplit = valid\n", {":2: ", "section [test]", NULL}},
        {"epochs = 2\n", {":1: ", "epochs is outside a section", NULL}},
        {"[train]\ncheckpoint = c.ckpt\n", {":2: ", "checkpoint is an option of scorch-test", NULL}},
        {"[train]\nepochs = 2\nepochs = 3\n", {":3: ", "epochs is set twice (first on line 2)", NULL}},
        {"[train]\nconfig = other.ini\n", {":2: ", "config can only be given on the command line", NULL}},
        {"[train]\nepochs = 2\n\njust words\n", {":4: ", "expected 'name = value'", NULL}},
        /* a syntax error before a bad key is the one reported */
        {"[train]\noops\nbogus = 1\n", {":2: ", "expected 'name = value'", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        host_config c;
        char path[64];
        cr_assert_neq(load_text(&c, cases[i].text, path), SC_OK, "case %zu loaded", i);
        assert_message_has(path);
        for (int k = 0; k < 3 && cases[i].parts[k]; k++)
            assert_message_has(cases[i].parts[k]);
    }
}

Test(config, ini_of_the_other_program_is_read_by_it)
{
    char path[64];
    write_file(path, "[test]\nsplit = valid\ntopk = 3\nbatch-size = 256\n");
    host_config c;
    host_config_defaults(&c);
    cr_assert_eq(host_config_load_ini(&c, HOST_PROGRAM_TEST, path), SC_OK, "%s",
                 sc_error_message());
    unlink(path);
    cr_expect_str_eq(c.split, "valid");
    cr_expect_eq(c.topk, 3);
    cr_expect_eq(c.batch_size, 256);
}

Test(config, missing_ini_file_is_an_io_error)
{
    host_config c;
    host_config_defaults(&c);
    cr_assert_eq(host_config_load_ini(&c, HOST_PROGRAM_TRAIN, "/nonexistent/run.ini"), SC_ERR_IO);
    assert_message_has("/nonexistent/run.ini");
}

Test(config, long_ini_lines_load_or_are_refused_whole)
{
    static char text[8192];
    char path[64];
    host_config c;
    /* longer than inih's default 200-character line */
    char dir[1001];
    memset(dir, 'd', 1000);
    dir[1000] = '\0';
    snprintf(text, sizeof text, "[train]\ndataset-path = /%s\n", dir);
    cr_assert_eq(load_text(&c, text, path), SC_OK, "%s", sc_error_message());
    cr_expect_eq(strlen(c.dataset_path), 1001);

    char huge[6001];
    memset(huge, 'x', 6000);
    huge[6000] = '\0';
    snprintf(text, sizeof text, "[train]\nepochs = 2\nmodel-args = %s\n", huge);
    cr_assert_eq(load_text(&c, text, path), SC_ERR_FORMAT);
    assert_message_has(":3: line longer than");
}

/* Every option, set away from its default, survives write and load (where
 * each came from does not: loaded, it comes from a line of the file). */
static void assert_round_trip(const host_config *c, host_program program)
{
    char path[64];
    write_file(path, "");
    cr_assert_eq(host_config_write_ini(c, program, path), SC_OK, "%s", sc_error_message());
    host_config back;
    host_config_defaults(&back);
    cr_assert_eq(host_config_load_ini(&back, program, path), SC_OK, "%s", sc_error_message());
    unlink(path);
    host_config expect;
    memcpy(&expect, c, sizeof expect); /* with its padding, for memcmp */
    memset(expect.config, 0, sizeof expect.config); /* the one option not written */
    memcpy(expect.origin, back.origin, sizeof expect.origin);
    cr_assert_eq(memcmp(&back, &expect, sizeof back), 0, "the config changed in a round trip");
}

Test(config, written_config_loads_back_identically)
{
    host_config c;
    cr_assert_eq(TRAIN(&c, "--model-args", "hidden=256:128,dropout=0.1", "--dataset-path",
                       "/data/fashion mnist", "--dataset-args=valid_size=5000", "--hooks",
                       "h.so", "--epochs", "7", "--batch-size", "100000000000", "--optimizer",
                       "sgd", "--hooks", "h2.so", "--lr", "0.1", "--weight-decay", "3e-4",
                       "--momentum", "0.95", "--nesterov", "--lr-schedule", "step",
                       "--warmup-steps", "100", "--lr-step-epochs", "2", "--lr-gamma",
                       "0.3333333333333333", "--seed", "18446744073709551615", "--workers",
                       "0", "--prefetch", "8", "--threads", "1", "--device", "cuda:1",
                       "--run-dir", "runs/x", "--resume", "runs/x/last.ckpt",
                       "--checkpoint-every", "500", "--keep-last", "5",
                       "--max-train-iterations", "10", "--max-valid-iterations", "11",
                       "--max-test-iterations", "12", "--validate-on-train", "--quiet",
                       "--config", "/dev/null"),
                 SC_OK, "%s", sc_error_message());
    assert_round_trip(&c, HOST_PROGRAM_TRAIN);
    /* the other optimizers' and schedules' options */
    cr_assert_eq(TRAIN(&c, "--optimizer", "adamw", "--beta1", "0.85", "--beta2", "0.9999",
                       "--eps", "1e-7", "--lr-schedule", "plateau", "--lr-patience", "4",
                       "--lr-factor", "0.5"),
                 SC_OK, "%s", sc_error_message());
    assert_round_trip(&c, HOST_PROGRAM_TRAIN);
    cr_assert_eq(TRAIN(&c, "--lr-schedule", "cosine", "--lr-min", "1e-6"), SC_OK, "%s",
                 sc_error_message());
    assert_round_trip(&c, HOST_PROGRAM_TRAIN);

    cr_assert_eq(TRAIN(&c, "--resume"), SC_OK);
    assert_round_trip(&c, HOST_PROGRAM_TRAIN);

    bool exit_now;
    char *argv[] = {"scorch-test", "--checkpoint", "runs/x/best.ckpt", "--split", "valid",
                    "--topk", "3", "--predictions", "p.csv", "--batch-size", "512", NULL};
    cr_assert_eq(parse_argv(&c, HOST_PROGRAM_TEST, argv, &exit_now), SC_OK);
    assert_round_trip(&c, HOST_PROGRAM_TEST);
}

Test(config, values_ini_cannot_hold_are_refused_on_write)
{
    host_config c;
    host_config_defaults(&c);
    strcpy(c.model_args, "a=1 ;b=2");
    char path[64];
    write_file(path, "");
    unlink(path);
    cr_assert_eq(host_config_write_ini(&c, HOST_PROGRAM_TRAIN, path), SC_ERR_INVALID);
    assert_message_has("model-args");
    cr_expect_neq(access(path, F_OK), 0, "a partial file was left");
}

/* The option names --help lists for program, one per line in names. */
static int help_options(host_program program, char names[][64], int max)
{
    char *text = help_text(program);
    int n = 0;
    for (char *line = strtok(text, "\n"); line && n < max; line = strtok(NULL, "\n"))
        if (strncmp(line, "  --", 4) == 0)
            sscanf(line + 4, "%63[a-z0-9-]", names[n++]);
    free(text);
    return n;
}

/* The config.ini written for c, appended to text. */
static void append_written(const host_config *c, host_program program, char *text, size_t size)
{
    char path[64];
    write_file(path, "");
    cr_assert_eq(host_config_write_ini(c, program, path), SC_OK, "%s", sc_error_message());
    FILE *f = fopen(path, "r");
    size_t len = strlen(text);
    text[len + fread(text + len, 1, size - 1 - len, f)] = '\0';
    fclose(f);
    unlink(path);
}

/* Every option is written where it is in use: over the optimizers and
 * schedules, each shows up. */
Test(config, written_config_has_every_option_of_the_program)
{
    static const char *const choices[][2] = {
        {"sgd", "step"}, {"adam", "cosine"}, {"adamw", "plateau"}, {"adam", "constant"},
        {"rmsprop", "constant"}};
    for (host_program program = HOST_PROGRAM_TRAIN; program <= HOST_PROGRAM_TEST; program++) {
        static char text[65536];
        text[0] = '\0';
        for (size_t k = 0; k < sizeof choices / sizeof choices[0]; k++) {
            host_config c;
            host_config_defaults(&c);
            strcpy(c.optimizer, choices[k][0]);
            strcpy(c.lr_schedule, choices[k][1]);
            append_written(&c, program, text, sizeof text);
        }
        char names[64][64];
        int n = help_options(program, names, 64);
        cr_assert_gt(n, 5);
        for (int i = 0; i < n; i++) {
            bool cli_only = !strcmp(names[i], "config") || !strcmp(names[i], "help") ||
                            !strcmp(names[i], "version");
            char key[80];
            snprintf(key, sizeof key, "\n%.63s =", names[i]);
            cr_expect_eq(strstr(text, key) != NULL, !cli_only, "config.ini: '%s' %s", names[i],
                         cli_only ? "written" : "missing");
        }
    }
}

Test(config, cli_reference_documents_every_option)
{
    char doc_path[4096];
    snprintf(doc_path, sizeof doc_path, "%s/docs/cli.md", getenv("SCORCH_SOURCE_ROOT"));
    FILE *f = fopen(doc_path, "r");
    cr_assert(f, "cannot open %s", doc_path);
    static char doc[1 << 17];
    size_t len = fread(doc, 1, sizeof doc - 1, f);
    doc[len] = '\0';
    cr_assert(feof(f), "docs/cli.md is longer than this test reads");
    fclose(f);
    static const host_program programs[] = {HOST_PROGRAM_TRAIN, HOST_PROGRAM_TEST,
                                            HOST_PROGRAM_PREDICT};
    for (size_t k = 0; k < sizeof programs / sizeof programs[0]; k++) {
        host_program program = programs[k];
        char names[64][64];
        int n = help_options(program, names, 64);
        for (int i = 0; i < n; i++) {
            char opt[80];
            snprintf(opt, sizeof opt, "`--%.63s", names[i]);
            cr_expect(strstr(doc, opt), "docs/cli.md does not document --%s", names[i]);
        }
    }
}

Test(config, scorch_test_inherits_plugin_options_from_the_checkpoint)
{
    host_config saved, c;
    host_config_defaults(&saved);
    host_config_defaults(&c);
    strcpy(saved.model, "saved-model.so");
    strcpy(saved.dataset, "saved-data.so");
    strcpy(saved.model_args, "hidden=8");
    saved.epochs = 99;
    strcpy(c.dataset, "mine.so");
    host_config_inherit(&c, &saved);
    cr_expect_str_eq(c.model, "saved-model.so");
    cr_expect_str_eq(c.dataset, "mine.so");
    cr_expect_str_eq(c.model_args, "hidden=8");
    cr_expect_eq(c.epochs, 10);
}

Test(config, suggestions_catch_typos_only)
{
    const char *names[] = {"epoch_begin", "epoch_end", "batch_end"};
    cr_expect_str_eq(sc_args_suggest("epoch_ned", names, 3), "epoch_end");
    cr_expect_str_eq(sc_args_suggest("batchend", names, 3), "batch_end");
    cr_expect_null(sc_args_suggest("train_begin", names, 3));
    cr_expect_null(sc_args_suggest("xyz", names, 3));
}

/* ---- options the run would ignore, the machine's limits, binary files ---- */

Test(config, options_the_chosen_optimizer_or_schedule_does_not_use_are_refused)
{
    static const struct {
        const char *args[5], *message;
    } refused[] = {
        {{"--momentum", "0.5"},
         "--momentum is for --optimizer sgd or rmsprop, not adam (the default): remove it, or "
         "choose --optimizer sgd or rmsprop"},
        {{"--optimizer", "adamw", "--nesterov"}, "--nesterov is for --optimizer sgd, not adamw"},
        {{"--optimizer", "sgd", "--beta2", "0.99"},
         "--beta2 is for --optimizer adam, adamw, lamb or lion, not sgd"},
        {{"--eps", "1e-6", "--optimizer=sgd"}, "--eps is for --optimizer adam, adamw, rmsprop or lamb, not sgd"},
        {{"--lr-min", "0.1"}, "--lr-min is for --lr-schedule cosine, not constant (the default)"},
        {{"--lr-schedule", "step", "--lr-patience", "3"},
         "--lr-patience is for --lr-schedule plateau, not step"},
        {{"--lr-gamma", "0.5", "--lr-schedule", "cosine"},
         "--lr-gamma is for --lr-schedule step, not cosine"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char *extra[6] = {0};
        memcpy(extra, refused[i].args, sizeof refused[i].args);
        host_config c;
        cr_assert_eq(train(&c, extra), SC_ERR_INVALID, "case %zu was accepted", i);
        assert_message_has(refused[i].message);
    }
    host_config c;
    cr_expect_eq(TRAIN(&c, "--optimizer", "sgd", "--momentum", "0.5", "--nesterov"), SC_OK,
                 "%s", sc_error_message());
    cr_expect_eq(TRAIN(&c, "--beta1", "0.8", "--beta2", "0.99", "--eps", "1e-6"), SC_OK, "%s",
                 sc_error_message());
    cr_expect_eq(TRAIN(&c, "--lr-schedule", "plateau", "--lr-patience", "2", "--lr-factor",
                       "0.5"),
                 SC_OK, "%s", sc_error_message());
    cr_expect_eq(TRAIN(&c, "--optimizer", "sgd"), SC_OK, "defaults are never refused: %s",
                 sc_error_message());
}

Test(config, an_ini_files_unused_option_is_refused_by_line_unless_the_command_line_uses_it)
{
    char path[64];
    write_file(path, "[train]\noptimizer = adam\nmomentum = 0.8\n");
    host_config c;
    cr_assert_eq(TRAIN(&c, "--config", path), SC_ERR_INVALID);
    assert_message_has(path);
    assert_message_has(":3: momentum is for --optimizer sgd or rmsprop, not adam: remove it");
    cr_assert_eq(TRAIN(&c, "--config", path, "--optimizer", "sgd"), SC_OK, "%s",
                 sc_error_message());
    cr_expect_eq(c.momentum, 0.8);
    unlink(path);
}

Test(config, user_set_tells_given_values_from_defaults)
{
    char path[64];
    write_file(path, "[train]\nbeta2 = 0.999\n");
    host_config c;
    cr_assert_eq(TRAIN(&c, "--config", path, "--epochs", "10", "--no-quiet"), SC_OK, "%s",
                 sc_error_message());
    unlink(path);
    cr_expect(host_config_user_set(&c, "beta2"), "set in the INI file, to its default");
    cr_expect(host_config_user_set(&c, "epochs"), "set on the command line, to its default");
    cr_expect(host_config_user_set(&c, "quiet"), "--no-quiet sets quiet");
    cr_expect(host_config_user_set(&c, "model"));
    cr_expect_not(host_config_user_set(&c, "beta1"));
    cr_expect_not(host_config_user_set(&c, "momentum"));
    cr_expect_not(host_config_user_set(&c, "no-such-option"));
    host_config_defaults(&c);
    cr_expect_not(host_config_user_set(&c, "model"));
}

/* The written config.ini leaves out what the run does not use, so that
 * --config loads it back without a refusal. */
Test(config, written_config_leaves_out_unused_options_and_loads_back)
{
    static const struct {
        const char *args[4], *written, *left_out;
    } runs[] = {
        {{"--optimizer", "sgd", "--momentum=0.9", "--nesterov"}, "\nmomentum = 0.9\n",
         "\nbeta1 ="},
        {{"--lr-schedule", "cosine", "--lr-min", "0.01"}, "\nlr-min = 0.01\n", "\nmomentum ="},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char *extra[5] = {0};
        memcpy(extra, runs[i].args, sizeof runs[i].args);
        host_config c;
        cr_assert_eq(train(&c, extra), SC_OK, "%s", sc_error_message());
        char written[64];
        write_file(written, "");
        cr_assert_eq(host_config_write_ini(&c, HOST_PROGRAM_TRAIN, written), SC_OK);
        static char text[16384];
        FILE *f = fopen(written, "r");
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
        cr_expect(strstr(text, runs[i].written), "case %zu lacks '%s'", i, runs[i].written);
        cr_expect_not(strstr(text, runs[i].left_out), "case %zu has '%s'", i,
                      runs[i].left_out);
        cr_expect(strstr(text, "\nlr-patience") == NULL, "a plateau option without plateau");
        host_config back;
        cr_expect_eq(TRAIN(&back, "--config", written), SC_OK, "%s", sc_error_message());
        unlink(written);
    }
}

Test(config, threads_and_workers_are_bounded_by_the_machine)
{
    host_config c;
    cr_assert_eq(TRAIN(&c, "--threads", "100000"), SC_ERR_INVALID);
    assert_message_has("--threads: 100000 is more than ");
    assert_message_has("(the cores this process may run on)");
    cr_assert_eq(TRAIN(&c, "--workers", "100000"), SC_ERR_INVALID);
    assert_message_has("--workers: 100000 is more than ");
    assert_message_has("4 per core for the ");
    assert_message_has("256 at most");
    cr_expect_eq(TRAIN(&c, "--threads", "1", "--workers", "4"), SC_OK, "%s",
                 sc_error_message());

    bool exit_now;
    char *test[] = {"scorch-test", "--checkpoint", "c.ckpt", "--workers=257", NULL};
    cr_assert_eq(parse_argv(&c, HOST_PROGRAM_TEST, test, &exit_now), SC_ERR_INVALID);
    assert_message_has("--workers: 257 is more than ");

    /* An INI file's value is checked as the final one: the command line
     * may lower it (a config.ini from a bigger machine). */
    char path[64];
    write_file(path, "[train]\nthreads = 100000\n");
    cr_assert_eq(TRAIN(&c, "--config", path), SC_ERR_INVALID);
    assert_message_has(path);
    assert_message_has(":2: threads: 100000 is more than ");
    cr_expect_eq(TRAIN(&c, "--config", path, "--threads", "0"), SC_OK, "%s",
                 sc_error_message());
    unlink(path);
}

/* The message of the last error shows no byte outside printable ASCII and
 * stays short. */
static void assert_message_printable(void)
{
    const char *m = sc_error_message();
    for (const char *p = m; *p; p++)
        cr_assert((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f,
                  "byte 0x%02x at %zu of the message", (unsigned char)*p, (size_t)(p - m));
    cr_expect_lt(strlen(m), 400, "a message of %zu characters", strlen(m));
}

Test(config, ini_messages_escape_what_a_binary_file_holds)
{
    static const struct {
        const char *text, *part;
    } cases[] = {
        {"[train]\nepochs = \x1b]0;owned\x07\x01\n",
         "epochs: '\\x1b]0;owned\\x07\\x01' is not an integer"},
        {"[train]\n\x1b[2J\x01 = 1\n", "unknown option \\x1b[2J\\x01"},
        {"[tr\x1b" "ain]\nepochs = 1\n", "section [tr\\x1bain]"},
        {"[train]\nmodel = a\x1b[31mb.so\n", "model: 'a\\x1b[31mb.so' holds a control character"},
        {"[train]\nhooks = h\x7f.so\n", "hooks: 'h\\x7f.so' holds a control character"},
        {"[train]\nlr = \xff\xfe\x80\n", "lr: '\\xff\\xfe\\x80' is not a number"},
    };
    host_config c;
    char path[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_neq(load_text(&c, cases[i].text, path), SC_OK, "case %zu loaded", i);
        assert_message_printable();
        assert_message_has(cases[i].part);
    }
    /* a long value is cut */
    static char text[4096];
    int n = snprintf(text, sizeof text, "[train]\ndataset-path = ");
    memset(text + n, '\x01', 3000);
    text[n + 3000] = '\0';
    cr_assert_neq(load_text(&c, text, path), SC_OK);
    assert_message_printable();
    assert_message_has("...' holds a control character");
    /* and any binary file */
    for (uint32_t seed = 1; seed <= 20; seed++) {
        uint32_t x = seed;
        n = snprintf(text, sizeof text, "[train]\n");
        for (int k = n; k < 3000; k++) {
            x = x * 1103515245u + 12345u;
            text[k] = (char)((x >> 16) % 255 + 1); /* no NUL: the file is text to fgets */
        }
        text[3000] = '\0';
        if (load_text(&c, text, path) != SC_OK)
            assert_message_printable();
    }
}

/* ---- --hooks-args ---- */

Test(config, hooks_args_go_with_the_hooks_before_them)
{
    host_config c;
    cr_assert_eq(TRAIN(&c, "--hooks", "a.so", "--hooks-args", "patience=2", "--hooks", "b.so",
                       "--hooks", "c.so", "--hooks-args=x=1,y=2"),
                 SC_OK, "%s", sc_error_message());
    cr_assert_eq(c.hooks.n, 3);
    cr_expect_str_eq(c.hooks.args[0], "patience=2");
    cr_expect_str_eq(c.hooks.args[1], "");
    cr_expect_str_eq(c.hooks.args[2], "x=1,y=2");

    cr_assert_eq(TRAIN(&c, "--hooks-args", "k=1", "--hooks", "a.so"), SC_ERR_INVALID);
    assert_message_has("--hooks-args must follow the --hooks it is for");
    cr_assert_eq(TRAIN(&c, "--hooks", "a.so", "--hooks-args", "k=1", "--hooks-args", "k=2"),
                 SC_ERR_INVALID);
    assert_message_has("--hooks-args: 'k=2' is the second for a.so (the first: 'k=1')");
}

Test(config, hooks_args_in_ini_files_and_the_written_config)
{
    host_config c;
    char path[64];
    cr_assert_eq(load_text(&c, "[train]\nhooks = a.so\nhooks-args = patience=2\nhooks = b.so\n",
                           path),
                 SC_OK, "%s", sc_error_message());
    cr_assert_eq(c.hooks.n, 2);
    cr_expect_str_eq(c.hooks.args[0], "patience=2");
    cr_expect_str_eq(c.hooks.args[1], "");
    cr_expect_eq(load_text(&c, "[train]\nhooks-args = patience=2\n", path), SC_ERR_INVALID);
    assert_message_has(":2: hooks-args must follow the hooks it is for");

    /* The command line's --hooks-args never goes with the INI file's hooks. */
    write_file(path, "[train]\nhooks = a.so\n");
    cr_expect_eq(TRAIN(&c, "--config", path, "--hooks-args", "k=1"), SC_ERR_INVALID);
    assert_message_has("--hooks-args must follow the --hooks it is for");
    unlink(path);

    /* Written after each path, and read back the same. */
    cr_assert_eq(TRAIN(&c, "--hooks", "a.so", "--hooks-args", "k=1", "--hooks", "b.so"), SC_OK);
    char *text;
    cr_assert_eq(host_config_ini_text(&c, HOST_PROGRAM_TRAIN, &text), SC_OK, "%s",
                 sc_error_message());
    cr_expect(strstr(text, "\nhooks = a.so\nhooks-args = k=1\nhooks = b.so\nhooks-args =\n"),
              "%s", text);
    host_config back;
    write_file(path, text);
    free(text);
    cr_assert_eq(TRAIN(&back, "--config", path), SC_OK, "%s", sc_error_message());
    unlink(path);
    cr_expect_eq(memcmp(&back.hooks, &c.hooks, sizeof c.hooks), 0, "the list did not read back");
}

/* ---- resume: the options that may change, and the others listed ---- */

typedef struct changes_seen {
    int n;
    char text[2048]; /* "option: was -> now (lost)" lines */
} changes_seen;

static void collect_change(void *user, const host_config_change *c)
{
    changes_seen *seen = user;
    size_t used = strlen(seen->text);
    snprintf(seen->text + used, sizeof seen->text - used, "%s: %s -> %s (%s)\n", c->option,
             c->was, c->now, c->lost);
    seen->n++;
}

static changes_seen resume_changes(const host_config *saved, const host_config *now)
{
    changes_seen seen = {0};
    int n = host_config_resume_changes(saved, now, collect_change, &seen);
    cr_assert_eq(n, seen.n, "the count and the calls disagree");
    return seen;
}

Test(config, resume_lists_every_option_that_changes_the_run)
{
    host_config saved, now;
    cr_assert_eq(TRAIN(&saved, "--batch-size", "64", "--seed", "7"), SC_OK);
    cr_assert_eq(TRAIN(&now, "--batch-size", "32", "--seed", "8", "--model-args", "hidden=16",
                       "--lr", "0.01", "--threads", "1"),
                 SC_OK, "%s", sc_error_message());
    changes_seen seen = resume_changes(&saved, &now);
    cr_assert_eq(seen.n, 5, "%s", seen.text);
    const char *want[] = {"model-args:  -> hidden=16 (the model or the data",
                          "lr: 0.001 -> 0.01 (the optimizer's updates",
                          "batch-size: 64 -> 32 (the batches", "seed: 7 -> 8 (", "threads: 0 -> 1 ("};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        cr_assert(strstr(seen.text, want[i]), "'%s' not in:\n%s", want[i], seen.text);
    cr_assert_eq(host_config_resume_changes(&saved, &saved, NULL, NULL), 0);
}

Test(config, resume_accepts_the_options_that_may_change)
{
    host_config saved, now;
    cr_assert_eq(TRAIN(&saved, "--lr-schedule", "cosine"), SC_OK, "%s", sc_error_message());
    cr_assert_eq(TRAIN(&now, "--lr-schedule", "cosine", "--lr-min", "1e-5", "--epochs", "20",
                       "--workers", "0", "--prefetch", "9", "--checkpoint-every", "5",
                       "--keep-last", "1", "--no-tensorboard", "--histogram-every", "0",
                       "--run-dir", "elsewhere", "--resume", "--resume-anyway", "--quiet",
                       "--hooks", "h.so", "--hooks-args", "k=v", "--max-test-iterations", "3",
                       "--validate-on-train", "--collective-timeout", "5", "--dataset-path",
                       "/moved", "--model", "moved/m.so", "--dataset", "moved/d.so"),
                 SC_OK, "%s", sc_error_message());
    changes_seen seen = resume_changes(&saved, &now);
    cr_assert_eq(seen.n, 0, "%s", seen.text);
}

Test(config, resume_compares_the_choice_not_the_options_it_leaves_unused)
{
    host_config saved, now;
    cr_assert_eq(TRAIN(&saved, "--optimizer", "sgd", "--momentum", "0.5"), SC_OK, "%s",
                 sc_error_message());
    cr_assert_eq(TRAIN(&now, "--optimizer", "adam"), SC_OK, "%s", sc_error_message());
    changes_seen seen = resume_changes(&saved, &now);
    cr_assert_eq(seen.n, 1, "%s", seen.text);
    cr_assert(strstr(seen.text, "optimizer: sgd -> adam"), "%s", seen.text);
}

Test(config, ini_text_loads_like_a_file_and_its_errors_carry_its_name)
{
    host_config cfg;
    host_config_defaults(&cfg);
    cr_assert_eq(host_config_load_ini_text(&cfg, HOST_PROGRAM_TRAIN, "[train]\nepochs = 4\n", "blob"),
                 SC_OK, "%s", sc_error_message());
    cr_assert_eq(cfg.epochs, 4);
    cr_assert_eq(host_config_load_ini_text(&cfg, HOST_PROGRAM_TRAIN, "", "blob"), SC_OK);
    cr_assert_eq(host_config_load_ini_text(&cfg, HOST_PROGRAM_TRAIN, "[train]\n\nepochs = x\n",
                                         "a.ckpt (its saved config)"),
                 SC_ERR_INVALID);
    assert_message_has("a.ckpt (its saved config):3: epochs");
}

/* "--drop-last false" reads as INI notation but a flag takes no value:
 * the message shows the two spellings rather than "unexpected argument". */
Test(config, a_value_given_to_a_flag_shows_its_two_forms)
{
    host_config c;
    cr_assert_eq(TRAIN(&c, "--drop-last", "false"), SC_ERR_INVALID);
    assert_message_has("--drop-last takes no value (got 'false'): write --drop-last to turn it "
                       "on, --no-drop-last to turn it off");
    cr_assert_eq(TRAIN(&c, "--tensorboard", "false", "--epochs", "2"), SC_ERR_INVALID);
    assert_message_has("--tensorboard takes no value (got 'false'): write --tensorboard");
    cr_assert_eq(TRAIN(&c, "--no-drop-last=true"), SC_ERR_INVALID);
    assert_message_has("--no-drop-last takes no value (got 'true'): write --drop-last to turn it "
                       "on, --no-drop-last");
    cr_assert_eq(TRAIN(&c, "--no-drop-last", "--tensorboard"), SC_OK, "%s", sc_error_message());
    cr_assert(!c.drop_last && c.tensorboard);
}

/* ---- optimizer defaults: PyTorch's, per optimizer ---- */

/* The resolved config.ini of c, into a static buffer. */
static const char *ini_text(const host_config *c)
{
    static char text[16384];
    char *written = NULL;
    cr_assert_eq(host_config_ini_text(c, HOST_PROGRAM_TRAIN, &written), SC_OK, "%s",
                 sc_error_message());
    snprintf(text, sizeof text, "%s", written);
    free(written);
    return text;
}

Test(config, each_optimizer_defaults_to_pytorchs_values)
{
    static const struct {
        const char *optimizer;
        double weight_decay;
        const char *written;
    } cases[] = {
        {"adamw", 0.01, "\nweight-decay = 0.01\n"}, /* torch.optim.AdamW */
        {"adam", 0.0, "\nweight-decay = 0\n"},
        {"sgd", 0.0, "\nmomentum = 0\n"}, /* torch.optim.SGD: momentum 0 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        host_config c;
        cr_assert_eq(TRAIN(&c, "--optimizer", (char *)cases[i].optimizer), SC_OK, "%s",
                     sc_error_message());
        cr_expect_eq(c.weight_decay, cases[i].weight_decay, "%s", cases[i].optimizer);
        cr_expect_eq(c.momentum, 0.0, "%s", cases[i].optimizer);
        cr_expect_not(host_config_user_set(&c, "weight-decay"));
        cr_expect(strstr(ini_text(&c), cases[i].written), "%s: config.ini lacks '%s'",
                  cases[i].optimizer, cases[i].written);
    }
}

Test(config, a_weight_decay_the_user_sets_overrides_adamws_default)
{
    host_config c;
    cr_assert_eq(TRAIN(&c, "--optimizer", "adamw", "--weight-decay", "0"), SC_OK, "%s",
                 sc_error_message());
    cr_expect_eq(c.weight_decay, 0.0, "--weight-decay 0 is the user's, not the default");
    cr_expect(strstr(ini_text(&c), "\nweight-decay = 0\n"));
    char path[64];
    write_file(path, "[train]\noptimizer = adamw\nweight-decay = 0\n");
    cr_assert_eq(TRAIN(&c, "--config", path), SC_OK, "%s", sc_error_message());
    unlink(path);
    cr_expect_eq(c.weight_decay, 0.0, "weight-decay = 0 in an INI file is the user's too");
}

Test(config, the_written_config_of_a_default_adamw_resumes_unchanged)
{
    host_config c, back;
    cr_assert_eq(TRAIN(&c, "--optimizer", "adamw"), SC_OK, "%s", sc_error_message());
    char path[64];
    write_file(path, ini_text(&c));
    cr_assert_eq(TRAIN(&back, "--config", path), SC_OK, "%s", sc_error_message());
    unlink(path);
    cr_expect_eq(back.weight_decay, 0.01);
    cr_expect_eq(host_config_resume_changes(&c, &back, NULL, NULL), 0);
}

Test(config, nesterov_without_momentum_is_refused_naming_both)
{
    host_config c;
    cr_expect_eq(TRAIN(&c, "--optimizer", "sgd", "--nesterov"), SC_ERR_INVALID);
    assert_message_has("--nesterov needs --momentum > 0 (sgd's default is 0, as PyTorch's)");
    cr_expect_eq(TRAIN(&c, "--optimizer", "sgd", "--nesterov", "--momentum", "0.9"), SC_OK, "%s",
                 sc_error_message());
}
