/* Options: defaults, the command line, INI files, precedence, errors,
 * --help, and the resolved config's round trip. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

static sc_status parse_argv(sc_config *cfg, sc_program program, char **argv, bool *exit_now)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    return sc_config_parse(cfg, program, argc, argv, exit_now);
}

/* scorch-train with the required options and then the given ones. */
static sc_status train(sc_config *cfg, char **extra)
{
    char *argv[128] = {"scorch-train", "--model", "m.so", "--dataset", "d.so"};
    int n = 5;
    for (int i = 0; extra[i]; i++) {
        cr_assert_lt(n, 127, "too many arguments for this helper");
        argv[n++] = extra[i];
    }
    bool exit_now;
    return parse_argv(cfg, SC_PROGRAM_TRAIN, argv, &exit_now);
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
static sc_status load_text(sc_config *cfg, const char *text, char *path)
{
    write_file(path, text);
    sc_config_defaults(cfg);
    sc_status st = sc_config_load_ini(cfg, SC_PROGRAM_TRAIN, path);
    unlink(path);
    return st;
}

static char *help_text(sc_program program)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    sc_config_print_help(f, program);
    fclose(f);
    return text;
}

Test(config, defaults_are_the_documented_ones)
{
    sc_config c;
    sc_config_defaults(&c);
    cr_expect_eq(c.epochs, 10);
    cr_expect_eq(c.batch_size, 128);
    cr_expect_str_eq(c.optimizer, "adam");
    cr_expect_eq(c.lr, 1e-3);
    cr_expect_eq(c.weight_decay, 0);
    cr_expect_eq(c.momentum, 0.9);
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
    sc_config c;
    cr_assert_eq(TRAIN(&c, "--epochs", "3", "--batch-size=64", "--lr", "0.5", "--optimizer=sgd",
                       "--quiet", "--seed", "18446744073709551615", "--model-args=hidden=32:16",
                       "--dataset-path", "/data/x", "--nesterov", "--max-train-iterations",
                       "9000000000"),
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
    sc_config c;
    cr_assert_eq(TRAIN(&c, "--epochs", "3", "--epochs=4"), SC_OK);
    cr_expect_eq(c.epochs, 4);
}

Test(config, hooks_repeat_and_each_source_replaces_the_list)
{
    sc_config c;
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
    sc_config c;
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
    sc_config c;
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
        {"epochs", "0"},          {"epochs", "three"},       {"epochs", "99999999999"},
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
        sc_config c;
        cr_assert_eq(TRAIN(&c, arg), SC_ERR_INVALID, "%s was accepted", arg);
        char name[64], value[64];
        snprintf(name, sizeof name, "--%s:", bad[i][0]);
        snprintf(value, sizeof value, "'%s'", bad[i][1]);
        assert_message_has(name);
        assert_message_has(value);
    }
    sc_config c;
    bool exit_now;
    char *argv[] = {"scorch-test", "--checkpoint", "c", "--split", "validation", NULL};
    cr_assert_eq(parse_argv(&c, SC_PROGRAM_TEST, argv, &exit_now), SC_ERR_INVALID);
    assert_message_has("--split: 'validation' is not one of train|valid|test");
}

Test(config, devices_are_accepted_by_syntax)
{
    const char *ok[] = {"cpu",  "cuda",     "cuda:0",  "cuda:12", "cuda:0,2",
                        "auto", "parallel", "distributed_dataparallel"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        sc_config c;
        cr_assert_eq(TRAIN(&c, "--device", (char *)ok[i]), SC_OK, "%s", sc_error_message());
        cr_expect_str_eq(c.device, ok[i]);
    }
    const char *bad[] = {"gpu", "cuda:", "cuda:x", "cuda:0,0", "cuda:1,", "CPU"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sc_config c;
        cr_expect_eq(TRAIN(&c, "--device", (char *)bad[i]), SC_ERR_INVALID, "%s", bad[i]);
        assert_message_has("--device: '");
    }
}

Test(config, missing_required_options_are_named)
{
    sc_config c;
    bool exit_now;
    char *none[] = {"scorch-train", "--epochs", "2", NULL};
    cr_assert_eq(parse_argv(&c, SC_PROGRAM_TRAIN, none, &exit_now), SC_ERR_INVALID);
    assert_message_has("missing --model, --dataset");
    assert_message_has("scorch-train --help");

    char *no_dataset[] = {"scorch-train", "--model", "m.so", NULL};
    cr_assert_eq(parse_argv(&c, SC_PROGRAM_TRAIN, no_dataset, &exit_now), SC_ERR_INVALID);
    assert_message_has("missing --dataset (required");

    /* scorch-test takes model and dataset from the checkpoint. */
    char *test_none[] = {"scorch-test", NULL};
    cr_assert_eq(parse_argv(&c, SC_PROGRAM_TEST, test_none, &exit_now), SC_ERR_INVALID);
    assert_message_has("missing --checkpoint");
    char *test_ok[] = {"scorch-test", "--checkpoint", "c.ckpt", NULL};
    cr_assert_eq(parse_argv(&c, SC_PROGRAM_TEST, test_ok, &exit_now), SC_OK);
    cr_expect_str_eq(c.checkpoint, "c.ckpt");
}

Test(config, help_and_version_exit_without_required_options, .init = cr_redirect_stdout)
{
    sc_config c;
    bool exit_now = false;
    char *help[] = {"scorch-train", "--help", "--bogus", NULL};
    cr_assert_eq(parse_argv(&c, SC_PROGRAM_TRAIN, help, &exit_now), SC_OK);
    cr_expect(exit_now);
    exit_now = false;
    char *version[] = {"scorch-test", "--version", NULL};
    cr_assert_eq(parse_argv(&c, SC_PROGRAM_TEST, version, &exit_now), SC_OK);
    cr_expect(exit_now);
    fflush(stdout);
    cr_expect_stdout_neq_str("");
}

Test(config, help_lists_options_with_defaults)
{
    char *train_help = help_text(SC_PROGRAM_TRAIN);
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

    char *test_help = help_text(SC_PROGRAM_TEST);
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
        sc_config c;
        char *argv[] = {"scorch-train", "--dataset", "d.so", "--epochs", "7",
                        "--config", path, NULL};
        if (order) { /* --config first: the command line still wins */
            argv[3] = "--config", argv[4] = path, argv[5] = "--epochs", argv[6] = "7";
        }
        bool exit_now;
        cr_assert_eq(parse_argv(&c, SC_PROGRAM_TRAIN, argv, &exit_now), SC_OK, "%s",
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
    sc_config c;
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
        sc_config c;
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
    sc_config c;
    sc_config_defaults(&c);
    cr_assert_eq(sc_config_load_ini(&c, SC_PROGRAM_TEST, path), SC_OK, "%s",
                 sc_error_message());
    unlink(path);
    cr_expect_str_eq(c.split, "valid");
    cr_expect_eq(c.topk, 3);
    cr_expect_eq(c.batch_size, 256);
}

Test(config, missing_ini_file_is_an_io_error)
{
    sc_config c;
    sc_config_defaults(&c);
    cr_assert_eq(sc_config_load_ini(&c, SC_PROGRAM_TRAIN, "/nonexistent/run.ini"), SC_ERR_IO);
    assert_message_has("/nonexistent/run.ini");
}

Test(config, long_ini_lines_load_or_are_refused_whole)
{
    static char text[8192];
    char path[64];
    sc_config c;
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

/* Every option, set away from its default, survives write and load. */
static void assert_round_trip(const sc_config *c, sc_program program)
{
    char path[64];
    write_file(path, "");
    cr_assert_eq(sc_config_write_ini(c, program, path), SC_OK, "%s", sc_error_message());
    sc_config back;
    sc_config_defaults(&back);
    cr_assert_eq(sc_config_load_ini(&back, program, path), SC_OK, "%s", sc_error_message());
    unlink(path);
    sc_config expect;
    memcpy(&expect, c, sizeof expect); /* with its padding, for memcmp */
    memset(expect.config, 0, sizeof expect.config); /* the one option not written */
    cr_assert_eq(memcmp(&back, &expect, sizeof back), 0, "the config changed in a round trip");
}

Test(config, written_config_loads_back_identically)
{
    sc_config c;
    cr_assert_eq(TRAIN(&c, "--model-args", "hidden=256:128,dropout=0.1", "--dataset-path",
                       "/data/fashion mnist", "--dataset-args=valid_size=5000", "--hooks",
                       "h.so", "--epochs", "7", "--batch-size", "100000000000", "--optimizer",
                       "sgd", "--hooks", "h2.so", "--lr", "0.1", "--weight-decay", "3e-4",
                       "--momentum", "0.95",
                       "--nesterov", "--beta1", "0.85", "--beta2", "0.9999", "--eps", "1e-7",
                       "--lr-schedule", "step", "--warmup-steps", "100", "--lr-step-epochs", "2",
                       "--lr-gamma", "0.3333333333333333", "--lr-min", "1e-6", "--lr-patience",
                       "4", "--lr-factor", "0.5", "--seed", "18446744073709551615", "--workers",
                       "0", "--prefetch", "8", "--threads", "2", "--device", "cuda:1",
                       "--run-dir", "runs/x", "--resume", "runs/x/last.ckpt",
                       "--checkpoint-every", "500", "--keep-last", "5",
                       "--max-train-iterations", "10", "--max-valid-iterations", "11",
                       "--max-test-iterations", "12", "--validate-on-train", "--quiet",
                       "--config", "/dev/null"),
                 SC_OK, "%s", sc_error_message());
    assert_round_trip(&c, SC_PROGRAM_TRAIN);

    cr_assert_eq(TRAIN(&c, "--resume"), SC_OK);
    assert_round_trip(&c, SC_PROGRAM_TRAIN);

    bool exit_now;
    char *argv[] = {"scorch-test", "--checkpoint", "runs/x/best.ckpt", "--split", "valid",
                    "--topk", "3", "--predictions", "p.csv", "--batch-size", "512", NULL};
    cr_assert_eq(parse_argv(&c, SC_PROGRAM_TEST, argv, &exit_now), SC_OK);
    assert_round_trip(&c, SC_PROGRAM_TEST);
}

Test(config, values_ini_cannot_hold_are_refused_on_write)
{
    sc_config c;
    sc_config_defaults(&c);
    strcpy(c.model_args, "a=1 ;b=2");
    char path[64];
    write_file(path, "");
    unlink(path);
    cr_assert_eq(sc_config_write_ini(&c, SC_PROGRAM_TRAIN, path), SC_ERR_INVALID);
    assert_message_has("model-args");
    cr_expect_neq(access(path, F_OK), 0, "a partial file was left");
}

/* The option names --help lists for program, one per line in names. */
static int help_options(sc_program program, char names[][64], int max)
{
    char *text = help_text(program);
    int n = 0;
    for (char *line = strtok(text, "\n"); line && n < max; line = strtok(NULL, "\n"))
        if (strncmp(line, "  --", 4) == 0)
            sscanf(line + 4, "%63[a-z0-9-]", names[n++]);
    free(text);
    return n;
}

Test(config, written_config_has_every_option_of_the_program)
{
    for (sc_program program = SC_PROGRAM_TRAIN; program <= SC_PROGRAM_TEST; program++) {
        sc_config c;
        sc_config_defaults(&c);
        char path[64];
        write_file(path, "");
        cr_assert_eq(sc_config_write_ini(&c, program, path), SC_OK);
        FILE *f = fopen(path, "r");
        static char text[16384];
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
        unlink(path);
        char names[64][64];
        int n = help_options(program, names, 64);
        cr_assert_gt(n, 5);
        for (int i = 0; i < n; i++) {
            bool cli_only = !strcmp(names[i], "config") || !strcmp(names[i], "help") ||
                            !strcmp(names[i], "version");
            char key[80];
            snprintf(key, sizeof key, "\n%.63s =", names[i]);
            cr_expect_eq(strstr(text, key) != NULL, !cli_only, "%s: '%s' %s", path, names[i],
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
    static char doc[65536];
    doc[fread(doc, 1, sizeof doc - 1, f)] = '\0';
    fclose(f);
    for (sc_program program = SC_PROGRAM_TRAIN; program <= SC_PROGRAM_TEST; program++) {
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
    sc_config saved, c;
    sc_config_defaults(&saved);
    sc_config_defaults(&c);
    strcpy(saved.model, "saved-model.so");
    strcpy(saved.dataset, "saved-data.so");
    strcpy(saved.model_args, "hidden=8");
    saved.epochs = 99;
    strcpy(c.dataset, "mine.so");
    sc_config_inherit(&c, &saved);
    cr_expect_str_eq(c.model, "saved-model.so");
    cr_expect_str_eq(c.dataset, "mine.so");
    cr_expect_str_eq(c.model_args, "hidden=8");
    cr_expect_eq(c.epochs, 10);
}

Test(config, suggestions_catch_typos_only)
{
    const char *names[] = {"epoch_begin", "epoch_end", "batch_end"};
    cr_expect_str_eq(sc_name_suggest("epoch_ned", names, 3), "epoch_end");
    cr_expect_str_eq(sc_name_suggest("batchend", names, 3), "batch_end");
    cr_expect_null(sc_name_suggest("train_begin", names, 3));
    cr_expect_null(sc_name_suggest("xyz", names, 3));
}
