/* config.c — the option table and everything it drives: the defaults, the
 * command line, INI files, --help and the resolved config.ini.
 *
 * Every option is one row of `options`; nothing else lists options. A
 * value always travels as text in INI notation (flags "true"/"false") and
 * goes through opt_set, whether it comes from the row's default, an INI
 * line or the command line, so all three are validated alike. */
#include "base/config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "base/device.h"
#include "base/duration.h"
#include "base/format.h"
#include "base/name_map.h"
#include "scorch/args.h"
#include "scorch/optim.h"
#include "scorch/plugin.h"


#define ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef enum opt_type {
    OPT_STRING,
    OPT_INT,
    OPT_INT64,
    OPT_UINT64,
    OPT_DOUBLE,
    OPT_FLAG,          /* bool: no value on the command line, true/false in INI */
    OPT_OPTIONAL_PATH, /* --resume [PATH]: a flag that may carry a path */
    OPT_CONFIG,        /* --config FILE: a string, command line only */
    OPT_HELP,          /* actions: command line only, nothing stored */
    OPT_VERSION,
    OPT_LIST,          /* host_path_list: each use appends ("" empties it) */
    OPT_LIST_ARGS,     /* the arguments of the list's last path (--hooks-args) */
} opt_type;

typedef enum opt_bound {
    BOUND_NONE,
    BOUND_NONNEG,
    BOUND_POSITIVE,
    BOUND_ONE,
    BOUND_UNIT,      /* [0, 1) */
    BOUND_OPEN_UNIT, /* (0, 1) */
} opt_bound;

static const char *const bound_text[] = {
    [BOUND_NONE] = "", [BOUND_NONNEG] = ">= 0", [BOUND_POSITIVE] = "> 0",
    [BOUND_ONE] = ">= 1", [BOUND_UNIT] = "in [0, 1)", [BOUND_OPEN_UNIT] = "in (0, 1)",
};

typedef enum opt_group {
    GROUP_PLUGINS,
    GROUP_TRAINING,
    GROUP_OPTIMIZER,
    GROUP_SCHEDULE,
    GROUP_DEVICES,
    GROUP_RUN,
    GROUP_INIT,
    GROUP_TENSORBOARD,
    GROUP_EVAL,
    GROUP_PREDICT,
    GROUP_JOB,
    GROUP_GENERAL,
} opt_group;

static const char *const group_title[] = {
    [GROUP_PLUGINS] = "Plugins and data",
    [GROUP_TRAINING] = "Epochs and batches",
    [GROUP_OPTIMIZER] = "Optimizer",
    [GROUP_SCHEDULE] = "Learning-rate schedule",
    [GROUP_DEVICES] = "Data loading and devices",
    [GROUP_RUN] = "Run directory and checkpoints",
    [GROUP_INIT] = "Starting weights and freezing",
    [GROUP_TENSORBOARD] = "TensorBoard",
    [GROUP_EVAL] = "Evaluation",
    [GROUP_PREDICT] = "Inputs and output",
    [GROUP_JOB] = "The job",
    [GROUP_GENERAL] = "General",
};

/* An option that only one choice of another option reads: set by the
 * user while `option` has a value outside `values`, it is refused rather
 * than silently ignored. */
typedef struct opt_condition {
    const char *option; /* NULL: the option is always used */
    const char *values; /* "a|b" */
} opt_condition;

typedef struct config_option {
    const char *name;       /* --name on the command line, `name =` in INI */
    opt_type type;
    size_t offset, size;    /* the field in host_config */
    size_t flag_offset;     /* OPT_OPTIONAL_PATH: its bool "given" field */
    const char *def;        /* the default, as option text */
    const char *shown_def;  /* what --help shows when `def` is not telling */
    const char *arg;        /* --help's placeholder for the value */
    const char *choices;    /* "a|b|c": the only values accepted */
    opt_bound bound;        /* numbers only */
    sc_status (*check)(const char *value); /* further validation of text */
    opt_condition used_if;  /* the choices that read it (--help prefixes them) */
    /* OPT_INT: the machine's maximum, with why into `why`; checked on the
     * final value, so that the command line can lower an INI file's. */
    int (*limit)(char *why, size_t size);
    unsigned programs;      /* host_program mask: where the option exists */
    unsigned required;      /* host_program mask: where it must be set */
    bool inherited;         /* scorch-test takes it from the checkpoint when unset */
    /* scorch-train --resume accepts another value than the checkpoint's:
     * it cannot change the numbers the run computes (docs/cli.md). */
    bool resume_may_change;
    opt_group group;
    const char *help;
    /* scorch-predict's --help, where the shared text speaks of training:
     * its help and shown default (NULL: the row's own). */
    struct {
        const char *help, *shown_def;
    } predict;
} config_option;

#define TRAIN HOST_PROGRAM_TRAIN
#define TEST HOST_PROGRAM_TEST
#define PREDICT HOST_PROGRAM_PREDICT
#define BOTH (HOST_PROGRAM_TRAIN | HOST_PROGRAM_TEST)
#define EVAL (HOST_PROGRAM_TEST | HOST_PROGRAM_PREDICT) /* a checkpoint's programs */
#define RUN HOST_PROGRAM_RUN
#define ALL (BOTH | PREDICT | RUN)

#define CFG_MEMBER(f) (((host_config *)0)->f)
#define AS(t, f) .type = (t), .offset = offsetof(host_config, f), .size = sizeof CFG_MEMBER(f)
/* The type follows the field, so the table cannot disagree with host_config. */
#define FIELD(f)                                                                     \
    AS(_Generic(CFG_MEMBER(f), char *: OPT_STRING, int: OPT_INT, int64_t: OPT_INT64, \
                uint64_t: OPT_UINT64, double: OPT_DOUBLE, bool: OPT_FLAG,            \
                host_path_list: OPT_LIST),                                           \
       f)

static sc_status check_device(const char *value);
static sc_status check_lr_find_range(const char *value);
static int threads_limit(char *why, size_t size);
static int workers_limit(char *why, size_t size);

static const config_option options[] = {
    {.name = "model", FIELD(model), .def = "", .arg = "PATH", .programs = ALL,
     .resume_may_change = true,
     .required = TRAIN, .inherited = true, .group = GROUP_PLUGINS, .help = "model plugin (.so)"},
    {.name = "model-args", FIELD(model_args), .def = "", .arg = "K=V,...",
     .programs = BOTH | RUN, .inherited = true, .group = GROUP_PLUGINS,
     .help = "arguments for the model plugin"},
    {.name = "dataset", FIELD(dataset), .def = "", .arg = "PATH", .programs = ALL,
     .resume_may_change = true,
     .required = TRAIN, .inherited = true, .group = GROUP_PLUGINS, .help = "dataset plugin (.so)"},
    {.name = "dataset-path", FIELD(dataset_path), .def = "", .arg = "PATH", .programs = ALL,
     .resume_may_change = true,
     .inherited = true, .group = GROUP_PLUGINS, .help = "where the dataset plugin finds its data"},
    {.name = "dataset-args", FIELD(dataset_args), .def = "", .arg = "K=V,...",
     .programs = BOTH | RUN, .inherited = true, .group = GROUP_PLUGINS,
     .help = "arguments for the dataset plugin"},
    {.name = "hooks", FIELD(hooks), .def = "", .arg = "PATH", .programs = BOTH,
     .resume_may_change = true,
     .group = GROUP_PLUGINS,
     .help = "an extra plugin that exports scorch_hooks or scorch_user_funcs; repeat for "
             "more (up to 8)"},
    {.name = "hooks-args", AS(OPT_LIST_ARGS, hooks), .def = "", .arg = "K=V,...",
     .resume_may_change = true,
     .programs = BOTH, .group = GROUP_PLUGINS,
     .help = "arguments for the --hooks plugin just before it"},

    {.name = "epochs", FIELD(epochs), .def = "10", .arg = "N", .bound = BOUND_NONNEG,
     .resume_may_change = true,
     .programs = TRAIN, .group = GROUP_TRAINING,
     .help = "epochs to train; 0 trains none and only tests the starting weights (as "
             "--init-from gives them)"},
    {.name = "max-train-iterations", FIELD(max_train_iterations), .def = "0", .arg = "N",
     .bound = BOUND_NONNEG, .programs = TRAIN, .group = GROUP_TRAINING,
     .help = "train batches per epoch, 0 for all"},
    {.name = "max-valid-iterations", FIELD(max_valid_iterations), .def = "0", .arg = "N",
     .bound = BOUND_NONNEG, .programs = TRAIN, .group = GROUP_TRAINING,
     .help = "validation batches per epoch, 0 for all"},
    {.name = "max-test-iterations", FIELD(max_test_iterations), .def = "0", .arg = "N",
     .resume_may_change = true,
     .bound = BOUND_NONNEG, .programs = BOTH, .group = GROUP_TRAINING,
     .help = "test batches (scorch-train: after the last epoch), 0 for all"},
    {.name = "validate-on-train", FIELD(validate_on_train), .def = "false", .programs = TRAIN,
     .resume_may_change = true,
     .group = GROUP_TRAINING, .help = "also evaluate the train split after each epoch"},
    {.name = "validate-every-steps", FIELD(validate_every_steps), .def = "0", .arg = "N",
     .bound = BOUND_NONNEG, .programs = TRAIN, .group = GROUP_TRAINING,
     .help = "also validate every N optimizer steps within an epoch (records \"valid_step\"; "
             "a new best writes best.ckpt), 0 for at epoch ends only"},
    {.name = "drop-last", FIELD(drop_last), .def = "true", .programs = TRAIN,
     .group = GROUP_TRAINING,
     .help = "skip the train split's last batch when it is short (--no-drop-last: train "
             "on it)"},
    {.name = "mixup", FIELD(mixup), .def = "0", .arg = "ALPHA", .bound = BOUND_NONNEG,
     .programs = TRAIN, .group = GROUP_TRAINING,
     .help = "Mixup of train batches with lam ~ Beta(ALPHA, ALPHA), as timm (0: off)"},
    {.name = "cutmix", FIELD(cutmix), .def = "0", .arg = "ALPHA", .bound = BOUND_NONNEG,
     .programs = TRAIN, .group = GROUP_TRAINING,
     .help = "CutMix of train batches (images) with lam ~ Beta(ALPHA, ALPHA), as timm "
             "(0: off)"},
    {.name = "mix-prob", FIELD(mix_prob), .def = "1", .arg = "P", .bound = BOUND_NONNEG,
     .programs = TRAIN, .group = GROUP_TRAINING,
     .help = "with --mixup or --cutmix: probability of mixing a batch, in [0, 1]"},
    {.name = "mix-switch-prob", FIELD(mix_switch_prob), .def = "0.5", .arg = "P",
     .bound = BOUND_NONNEG, .programs = TRAIN, .group = GROUP_TRAINING,
     .help = "with --mixup and --cutmix: probability of CutMix for a mixed batch, in [0, 1]"},

    {.name = "optimizer", FIELD(optimizer), .def = "adam", .choices = "sgd|adam|adamw|rmsprop|lamb|lion",
     .programs = TRAIN, .group = GROUP_OPTIMIZER, .help = "optimizer"},
    {.name = "lr", FIELD(lr), .def = "1e-3", .arg = "X", .bound = BOUND_POSITIVE,
     .programs = TRAIN, .group = GROUP_OPTIMIZER, .help = "base learning rate"},
    {.name = "weight-decay", FIELD(weight_decay), .def = "0", .arg = "X",
     .shown_def = "the optimizer's: 0, adamw and lamb 0.01", .bound = BOUND_NONNEG,
     .programs = TRAIN, .group = GROUP_OPTIMIZER,
     .help = "weight decay (decoupled for adamw and lion, in the update for lamb)"},
    {.name = "momentum", FIELD(momentum), .def = "0", .arg = "X", .bound = BOUND_UNIT,
     .used_if = {"optimizer", "sgd|rmsprop"}, .programs = TRAIN, .group = GROUP_OPTIMIZER,
     .help = "momentum"},
    {.name = "nesterov", FIELD(nesterov), .def = "false", .programs = TRAIN,
     .used_if = {"optimizer", "sgd"}, .group = GROUP_OPTIMIZER, .help = "Nesterov momentum"},
    {.name = "beta1", FIELD(beta1), .def = "0.9", .arg = "X", .bound = BOUND_UNIT,
     .used_if = {"optimizer", "adam|adamw|lamb|lion"}, .programs = TRAIN,
     .group = GROUP_OPTIMIZER, .help = "first-moment decay (lion: of the update's average)"},
    {.name = "beta2", FIELD(beta2), .def = "0.999", .arg = "X",
     .shown_def = "the optimizer's: 0.999, lion 0.99", .bound = BOUND_UNIT,
     .used_if = {"optimizer", "adam|adamw|lamb|lion"}, .programs = TRAIN,
     .group = GROUP_OPTIMIZER, .help = "second-moment decay (lion: of the momentum kept)"},
    {.name = "eps", FIELD(eps), .def = "1e-8", .arg = "X",
     .shown_def = "the optimizer's: 1e-8, lamb 1e-6", .bound = BOUND_POSITIVE,
     .used_if = {"optimizer", "adam|adamw|rmsprop|lamb"}, .programs = TRAIN,
     .group = GROUP_OPTIMIZER, .help = "denominator epsilon"},
    {.name = "alpha", FIELD(alpha), .def = "0.99", .arg = "X", .bound = BOUND_UNIT,
     .used_if = {"optimizer", "rmsprop"}, .programs = TRAIN, .group = GROUP_OPTIMIZER,
     .help = "smoothing constant of the squared gradients' average"},
    {.name = "centered", FIELD(centered), .def = "false", .programs = TRAIN,
     .used_if = {"optimizer", "rmsprop"}, .group = GROUP_OPTIMIZER,
     .help = "divide by the gradients' estimated variance, not their mean square"},
    {.name = "ema-decay", FIELD(ema_decay), .def = "0", .arg = "D", .bound = BOUND_UNIT,
     .programs = TRAIN, .group = GROUP_OPTIMIZER,
     .help = "keep an EMA of the weights, ema = D * ema + (1 - D) * w after each step, "
             "validated and tested beside them; best.ckpt by its metric (0: off)"},
    {.name = "ema-warmup", FIELD(ema_warmup), .def = "false", .programs = TRAIN,
     .group = GROUP_OPTIMIZER,
     .help = "with --ema-decay: ramp the decay up as timm's ModelEmaV3 warm-up, "
             "min(D, 1 - (1 + s)^(-2/3)), s the steps before this one"},

    {.name = "clip-grad-norm", FIELD(clip_grad_norm), .def = "0", .arg = "MAX",
     .bound = BOUND_NONNEG, .programs = TRAIN, .group = GROUP_OPTIMIZER,
     .help = "scale the gradients down to a global L2 norm of at most MAX before each "
             "step, as torch.nn.utils.clip_grad_norm_ (0: off)"},
    {.name = "clip-grad-value", FIELD(clip_grad_value), .def = "0", .arg = "V",
     .bound = BOUND_NONNEG, .programs = TRAIN, .group = GROUP_OPTIMIZER,
     .help = "clamp each gradient into [-V, V] before each step, as "
             "torch.nn.utils.clip_grad_value_ (0: off)"},
    {.name = "no-decay", FIELD(no_decay), .def = "", .arg = "WORD,...", .programs = TRAIN,
     .group = GROUP_OPTIMIZER,
     .help = "weight decay 0 for the parameters whose name contains one of the words "
             "(e.g. bias,norm); see [params \"PATTERN\"] sections in docs/cli.md"},

    {.name = "lr-schedule", FIELD(lr_schedule), .def = "constant",
     .choices = "constant|step|cosine|plateau", .programs = TRAIN, .group = GROUP_SCHEDULE,
     .help = "learning-rate schedule"},
    {.name = "warmup-steps", FIELD(warmup_steps), .def = "0", .arg = "N",
     .bound = BOUND_NONNEG, .programs = TRAIN, .group = GROUP_SCHEDULE,
     .help = "linear warm-up from 0 to --lr over N steps"},
    {.name = "lr-step-epochs", FIELD(lr_step_epochs), .def = "30", .arg = "N",
     .bound = BOUND_ONE, .used_if = {"lr-schedule", "step"}, .programs = TRAIN,
     .group = GROUP_SCHEDULE, .help = "multiply the lr by --lr-gamma every N epochs"},
    {.name = "lr-gamma", FIELD(lr_gamma), .def = "0.1", .arg = "X", .bound = BOUND_POSITIVE,
     .used_if = {"lr-schedule", "step"}, .programs = TRAIN, .group = GROUP_SCHEDULE,
     .help = "decay factor"},
    {.name = "lr-min", FIELD(lr_min), .def = "0", .arg = "X", .bound = BOUND_NONNEG,
     .resume_may_change = true,
     .used_if = {"lr-schedule", "cosine"}, .programs = TRAIN, .group = GROUP_SCHEDULE,
     .help = "final learning rate"},
    {.name = "lr-patience", FIELD(lr_patience), .def = "10", .arg = "N",
     .bound = BOUND_NONNEG, .used_if = {"lr-schedule", "plateau"}, .programs = TRAIN,
     .group = GROUP_SCHEDULE, .help = "epochs without improvement before decaying"},
    {.name = "lr-factor", FIELD(lr_factor), .def = "0.1", .arg = "X",
     .bound = BOUND_OPEN_UNIT, .used_if = {"lr-schedule", "plateau"}, .programs = TRAIN,
     .group = GROUP_SCHEDULE, .help = "decay factor"},
    /* The range test runs instead of training: its rows change no run. */
    {.name = "lr-find", FIELD(lr_find), .def = "false", .resume_may_change = true,
     .programs = TRAIN, .group = GROUP_SCHEDULE,
     .help = "run the LR range test instead of training: RUN/lr_find.csv and .png, and the "
             "suggested --lr; the weights are left as they were"},
    {.name = "lr-find-range", FIELD(lr_find_range), .def = "1e-7:10", .arg = "MIN:MAX",
     .check = check_lr_find_range, .resume_may_change = true, .programs = TRAIN,
     .group = GROUP_SCHEDULE, .help = "with --lr-find: the lr ramps exponentially over this range"},
    {.name = "lr-find-steps", FIELD(lr_find_steps), .def = "100", .arg = "N",
     .bound = BOUND_ONE, .resume_may_change = true, .programs = TRAIN,
     .group = GROUP_SCHEDULE, .help = "with --lr-find: steps (batches) of the ramp"},

    {.name = "batch-size", FIELD(batch_size), .def = "128", .arg = "N", .bound = BOUND_ONE,
     .programs = ALL, .group = GROUP_DEVICES, .help = "samples per batch, per rank",
     .predict = {"inputs decoded and run through the network together"}},
    {.name = "seed", FIELD(seed), .def = "42", .arg = "N", .programs = BOTH | RUN,
     .group = GROUP_DEVICES, .help = "seed for initialisation, shuffling and augmentation"},
    {.name = "device", FIELD(device), .def = "", .shown_def = "the model's preference, else cpu",
     .arg = "DEVICE", .check = check_device, .programs = ALL, .group = GROUP_DEVICES,
     .predict = {"cpu, cuda or cuda:N", "cpu"},
     .help = "cpu, cuda, cuda:N, cuda:N,M,..., auto, parallel (or dataparallel) or "
             "distributed_dataparallel"},
    {.name = "replicas", FIELD(replicas), .def = "0", .shown_def = "one per GPU --device names",
     .resume_may_change = true,
     .arg = "N", .bound = BOUND_NONNEG, .programs = TRAIN | RUN, .group = GROUP_DEVICES,
     .help = "data parallel in one process: N replicas, a thread each (--device cpu, "
             "parallel or cuda:N,M,...)"},
    {.name = "precision", FIELD(precision), .def = "fp32", .choices = "fp32|tf32|bf16",
     .programs = BOTH | RUN, .group = GROUP_DEVICES,
     .help = "GPU arithmetic: tf32 or bf16 matrix products and convolutions (fp32 master "
             "weights and loss)"},
    {.name = "cpu-conv", FIELD(cpu_conv), .def = "auto", .choices = "auto|winograd2|gemm",
     .programs = BOTH | RUN, .group = GROUP_DEVICES,
     .help = "3x3 convolutions on the CPU: Winograd F(4x4) where it pays (auto), F(2x2) "
             "only, a quarter of the rounding error (winograd2), or im2col (gemm)"},
    {.name = "cuda-graphs", FIELD(cuda_graphs), .def = "auto", .choices = "auto|on|off",
     .programs = TRAIN, .group = GROUP_DEVICES,
     .help = "replay the train step as a CUDA graph (auto: when the step allows it)"},
    {.name = "threads", FIELD(threads), .def = "0", .arg = "N", .bound = BOUND_NONNEG,
     .limit = threads_limit, .programs = ALL, .group = GROUP_DEVICES,
     .predict = {"compute threads, which also decode a batch's inputs, at most the cores "
                 "this process may use; 0 for all"},
     .help = "compute threads, at most the cores this process may use; 0 for all (under "
             "mpirun: the rank's share)"},
    {.name = "workers", FIELD(workers), .def = "2", .arg = "N", .bound = BOUND_NONNEG,
     .resume_may_change = true,
     .limit = workers_limit, .programs = BOTH | RUN, .group = GROUP_DEVICES,
     .help = "data-loader threads, at most 4 per core and 256; 0 to load on the training "
             "thread"},
    {.name = "prefetch", FIELD(prefetch), .def = "4", .arg = "N", .bound = BOUND_ONE,
     .resume_may_change = true,
     .programs = BOTH | RUN, .group = GROUP_DEVICES, .help = "batches the loader prepares ahead"},
    {.name = "accumulate", FIELD(accumulate), .def = "1", .arg = "N", .bound = BOUND_ONE,
     .programs = TRAIN, .group = GROUP_DEVICES,
     .help = "micro-batches per optimizer step, their gradients averaged (ranks "
             "communicate on the last only)"},
    {.name = "bucket-mb", FIELD(bucket_mb), .def = "25", .arg = "X", .bound = BOUND_POSITIVE,
     .programs = TRAIN, .group = GROUP_DEVICES,
     .help = "data parallel: gradient allreduce bucket size in MiB"},
    {.name = "collective-timeout", FIELD(collective_timeout), .def = "300", .arg = "SECONDS",
     .resume_may_change = true,
     .bound = BOUND_POSITIVE, .programs = TRAIN | RUN, .group = GROUP_DEVICES,
     .help = "data parallel: abort the job when a collective waits longer"},
    {.name = "scale-lr", FIELD(scale_lr), .def = "false", .programs = TRAIN,
     .group = GROUP_DEVICES, .help = "data parallel: multiply --lr by the number of ranks"},

    {.name = "run-dir", FIELD(run_dir), .def = "", .shown_def = "runs/<model>-<timestamp>",
     .resume_may_change = true,
     .arg = "DIR", .programs = TRAIN, .group = GROUP_RUN,
     .help = "where config.ini, metrics.jsonl and checkpoints go"},
    {.name = "resume", AS(OPT_OPTIONAL_PATH, resume_path),
     .resume_may_change = true,
     .flag_offset = offsetof(host_config, resume), .def = "false", .arg = "[PATH]",
     .programs = TRAIN, .group = GROUP_RUN,
     .help = "continue from checkpoint PATH, or from the run directory's last"},
    {.name = "resume-anyway", FIELD(resume_anyway), .def = "false", .programs = TRAIN,
     .resume_may_change = true, .group = GROUP_RUN,
     .help = "with --resume: accept options that differ from the checkpoint's, and say what "
             "exactness each change costs"},
    {.name = "checkpoint-every", FIELD(checkpoint_every), .def = "0", .arg = "N",
     .resume_may_change = true,
     .bound = BOUND_NONNEG, .programs = TRAIN, .group = GROUP_RUN,
     .help = "also checkpoint every N steps, 0 for at epoch ends only"},
    {.name = "keep-last", FIELD(keep_last), .def = "3", .arg = "N", .bound = BOUND_ONE,
     .resume_may_change = true,
     .programs = TRAIN, .group = GROUP_RUN,
     .help = "recent checkpoints kept (the best is kept too)"},
    {.name = "max-time", FIELD(max_time), .def = "0", .arg = "DURATION",
     .check = host_duration_check, .resume_may_change = true, /* it changes no number */
     .programs = TRAIN, .group = GROUP_RUN,
     .help = "stop with a checkpoint once training has run this long in this process "
             "(2h30m, 90m, 45s, or seconds; 0 for no limit); --resume continues"},
    {.name = "init-from", FIELD(init_from), .def = "", .arg = "FILE", .programs = TRAIN,
     .resume_may_change = true, /* --resume ignores it: the checkpoint's weights continue */
     .group = GROUP_INIT,
     .help = "start from the weights in FILE, a .safetensors file or a scorch checkpoint "
             "(at epoch 1, with a new optimizer); see docs/weights.md"},
    {.name = "init-map", FIELD(init_map), .def = "", .arg = "FROM=TO,...",
     .check = host_name_map_check, .resume_may_change = true, .programs = TRAIN,
     .group = GROUP_INIT,
     .help = "with --init-from: load the file's tensor FROM as the model's TO; '*' matches "
             "any characters and carries over (features.*=conv*), an empty TO drops it"},
    {.name = "init-strict", FIELD(init_strict), .def = "true", .resume_may_change = true,
     .programs = TRAIN, .group = GROUP_INIT,
     .help = "with --init-from: refuse a file whose tensors are missing, unexpected or "
             "shaped otherwise (--no-init-strict: load those that fit, list the others)"},
    {.name = "freeze", FIELD(freeze), .def = "", .arg = "GLOB,...",
     .check = host_name_globs_check, .programs = TRAIN, .group = GROUP_INIT,
     .help = "do not train the parameters whose names match a glob (fnmatch: '*' matches "
             "dots too); each glob must match one"},

    {.name = "tensorboard", FIELD(tensorboard), .def = "true", .programs = TRAIN,
     .resume_may_change = true,
     .group = GROUP_TENSORBOARD,
     .help = "write TensorBoard event files into RUN/tensorboard (--no-tensorboard: don't)"},
    {.name = "histogram-every", FIELD(histogram_every), .def = "1", .arg = "N",
     .resume_may_change = true,
     .bound = BOUND_NONNEG, .programs = TRAIN, .group = GROUP_TENSORBOARD,
     .help = "TensorBoard histograms of parameters and gradients every N epochs, 0 for never"},

    {.name = "checkpoint", FIELD(checkpoint), .def = "", .arg = "PATH", .programs = EVAL,
     .required = EVAL, .group = GROUP_EVAL, .help = "checkpoint to evaluate",
     .predict = {"checkpoint to predict with"}},
    {.name = "split", FIELD(split), .def = "test", .choices = "train|valid|test",
     .programs = TEST, .group = GROUP_EVAL, .help = "split to evaluate"},
    {.name = "topk", FIELD(topk), .def = "5", .arg = "K", .bound = BOUND_ONE,
     .programs = EVAL, .group = GROUP_EVAL, .help = "top classes written per sample",
     .predict = {"classes listed per input, at most the classes there are"}},
    {.name = "predictions", FIELD(predictions), .def = "", .arg = "PATH", .programs = TEST,
     .group = GROUP_EVAL, .help = "write per-sample predictions to this CSV file"},
    {.name = "confusion", FIELD(confusion), .def = "", .arg = "PATH", .programs = TEST,
     .group = GROUP_EVAL,
     .help = "write the confusion matrix (rows: true class, columns: predicted) as CSV"},
    {.name = "per-class", FIELD(per_class), .def = "", .arg = "PATH", .programs = TEST,
     .group = GROUP_EVAL, .help = "print per-class accuracy and write it to this CSV file"},
    {.name = "ema", FIELD(ema), .def = "false", .programs = EVAL | RUN, .group = GROUP_EVAL,
     .predict = {"the checkpoint's EMA weights (trained with --ema-decay)"},
     .help = "evaluate the checkpoint's EMA weights (trained with --ema-decay)"},

    {.name = "job", FIELD(job), .def = "", .arg = "PATH", .programs = RUN, .required = RUN,
     .group = GROUP_JOB, .help = "job plugin (.so) to run on every rank"},
    {.name = "job-args", FIELD(job_args), .def = "", .arg = "K=V,...", .programs = RUN,
     .group = GROUP_JOB, .help = "arguments for the job plugin"},
    {.name = "checkpoint", FIELD(checkpoints), .def = "", .arg = "PATH", .programs = RUN,
     .group = GROUP_JOB,
     .help = "a checkpoint for the job, or a run directory (its numbered checkpoints); "
             "repeat for more (up to 8); the first supplies --model and --dataset when "
             "they are not given"},

    {.name = "input-list", FIELD(input_list), .def = "", .arg = "FILE", .programs = PREDICT,
     .group = GROUP_PREDICT,
     .help = "also predict the files FILE names, one path a line ('-': read the paths "
             "from stdin)"},
    {.name = "format", FIELD(format), .def = "auto", .choices = "auto|text|csv|jsonl",
     .programs = PREDICT, .group = GROUP_PREDICT,
     .help = "what each input's line is: text for people, a CSV row (with a header), or a "
             "JSON object; auto: text on a terminal, csv elsewhere"},
    {.name = "raw", FIELD(raw), .def = "false", .programs = PREDICT, .group = GROUP_PREDICT,
     .help = "print the network's outputs as they are (a classifier's logits), not the top "
             "classes"},

    {.name = "config", AS(OPT_CONFIG, config), .def = "", .arg = "FILE", .programs = ALL,
     .group = GROUP_GENERAL, .help = "read options from an INI file first (see below)"},
    {.name = "quiet", FIELD(quiet), .def = "false", .programs = BOTH, .group = GROUP_GENERAL,
     .resume_may_change = true,
     .help = "print errors and the final summary only"},
    {.name = "summary", FIELD(summary), .def = "false", .programs = TRAIN,
     .resume_may_change = true,
     .group = GROUP_GENERAL,
     .help = "print the model's layers, parameters and FLOPs, then exit"},
    {.name = "help", .type = OPT_HELP, .programs = ALL, .group = GROUP_GENERAL,
     .help = "print this help and exit"},
    {.name = "version", .type = OPT_VERSION, .programs = ALL, .group = GROUP_GENERAL,
     .help = "print the version and exit"},
};

enum { N_OPTIONS = ARRAY_LEN(options) };
_Static_assert((int)N_OPTIONS <= (int)HOST_CONFIG_MAX_OPTIONS,
               "raise HOST_CONFIG_MAX_OPTIONS in config.h");

/* ---- names ------------------------------------------------------------ */

const char *host_program_name(host_program program)
{
    return program == HOST_PROGRAM_TEST      ? "scorch-test"
           : program == HOST_PROGRAM_PREDICT ? "scorch-predict"
           : program == HOST_PROGRAM_RUN     ? "scorch-run"
                                             : "scorch-train";
}

static const char *program_section(host_program program)
{
    return host_program_name(program) + strlen("scorch-");
}

/* The programs of a mask, for messages: "scorch-test, scorch-predict or
 * scorch-run". */
static void programs_text(unsigned programs, char *buf, size_t size)
{
    static const host_program each[] = {HOST_PROGRAM_TRAIN, HOST_PROGRAM_TEST,
                                        HOST_PROGRAM_PREDICT, HOST_PROGRAM_RUN};
    int left = __builtin_popcount(programs);
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < ARRAY_LEN(each) && len < size; i++)
        if (programs & each[i]) {
            left--;
            len += (size_t)snprintf(buf + len, size - len, "%s%s", host_program_name(each[i]),
                                    left > 1 ? ", " : left == 1 ? " or " : "");
        }
}

/* ---- values ----------------------------------------------------------- */

enum { QUOTE_MAX = 64 }; /* characters of the user's text a message shows */

/* The user's text as a message shows it: bytes outside printable ASCII as
 * \xNN, so that a binary file sends no control codes to the terminal, and
 * cut after QUOTE_MAX characters. A struct, so that quote(x).text lives
 * until the end of the call it is an argument of. */
typedef struct quoted {
    char text[4 * QUOTE_MAX + sizeof "..."];
} quoted;

static quoted quote(const char *text)
{
    quoted q;
    size_t out = 0;
    for (size_t i = 0; text[i]; i++) {
        unsigned char c = (unsigned char)text[i];
        if (i == QUOTE_MAX) {
            out += (size_t)snprintf(q.text + out, sizeof q.text - out, "...");
            break;
        }
        if (c >= 0x20 && c < 0x7f)
            q.text[out++] = (char)c;
        else
            out += (size_t)snprintf(q.text + out, sizeof q.text - out, "\\x%02x", c);
    }
    q.text[out] = '\0';
    return q;
}

/* Text options may hold no control characters: paths and plugin arguments
 * reach many messages later on, which would print them raw. */
static sc_status check_printable(const char *text)
{
    for (const char *p = text; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return sc_error_set(SC_ERR_INVALID, "'%s' holds a control character",
                                quote(text).text);
    return SC_OK;
}

static bool opt_cli_only(const config_option *opt)
{
    return opt->type == OPT_CONFIG || opt->type == OPT_HELP || opt->type == OPT_VERSION;
}

static bool opt_takes_value(const config_option *opt)
{
    return opt->type != OPT_FLAG && opt->type != OPT_HELP && opt->type != OPT_VERSION &&
           opt->type != OPT_OPTIONAL_PATH;
}

static bool bound_holds(opt_bound bound, double v)
{
    switch (bound) {
    case BOUND_NONE: return true;
    case BOUND_NONNEG: return v >= 0;
    case BOUND_POSITIVE: return v > 0;
    case BOUND_ONE: return v >= 1;
    case BOUND_UNIT: return v >= 0 && v < 1;
    case BOUND_OPEN_UNIT: return v > 0 && v < 1;
    }
    return false;
}

static sc_status check_bound(const config_option *opt, const char *text, double v)
{
    if (bound_holds(opt->bound, v))
        return SC_OK;
    return sc_error_set(SC_ERR_INVALID, "'%s' is out of range (must be %s)", quote(text).text,
                        bound_text[opt->bound]);
}

static sc_status parse_int64(const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || isspace((unsigned char)*text))
        return sc_error_set(SC_ERR_INVALID, "'%s' is not an integer", quote(text).text);
    if (errno == ERANGE)
        return sc_error_set(SC_ERR_INVALID, "'%s' is out of range", quote(text).text);
    *out = v;
    return SC_OK;
}

static sc_status set_int(const config_option *opt, void *field, const char *text)
{
    int64_t v;
    SC_TRY(parse_int64(text, &v));
    if (v < INT_MIN || v > INT_MAX)
        return sc_error_set(SC_ERR_INVALID, "'%s' is out of range", quote(text).text);
    SC_TRY(check_bound(opt, text, (double)v));
    *(int *)field = (int)v;
    return SC_OK;
}

static sc_status set_int64(const config_option *opt, void *field, const char *text)
{
    int64_t v;
    SC_TRY(parse_int64(text, &v));
    SC_TRY(check_bound(opt, text, (double)v));
    *(int64_t *)field = v;
    return SC_OK;
}

static sc_status set_uint64(void *field, const char *text)
{
    char *end;
    errno = 0;
    /* strtoull would take "-1" as 2^64 - 1. */
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || *end || !isdigit((unsigned char)*text))
        return sc_error_set(SC_ERR_INVALID, "'%s' is not a non-negative integer",
                            quote(text).text);
    if (errno == ERANGE)
        return sc_error_set(SC_ERR_INVALID, "'%s' is out of range", quote(text).text);
    *(uint64_t *)field = v;
    return SC_OK;
}

static sc_status set_double(const config_option *opt, void *field, const char *text)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || isspace((unsigned char)*text))
        return sc_error_set(SC_ERR_INVALID, "'%s' is not a number", quote(text).text);
    if (!isfinite(v))
        return sc_error_set(SC_ERR_INVALID, "'%s' is not a finite number", quote(text).text);
    SC_TRY(check_bound(opt, text, v));
    *(double *)field = v;
    return SC_OK;
}

static bool is_bool_text(const char *text)
{
    return strcmp(text, "true") == 0 || strcmp(text, "false") == 0;
}

static sc_status set_bool(bool *field, const char *text)
{
    if (!is_bool_text(text))
        return sc_error_set(SC_ERR_INVALID, "'%s' is not true or false", quote(text).text);
    *field = text[0] == 't';
    return SC_OK;
}

static bool in_choices(const char *choices, const char *text)
{
    size_t len = strlen(text);
    for (const char *c = choices; *c;) {
        size_t n = strcspn(c, "|");
        if (n == len && strncmp(c, text, n) == 0)
            return true;
        c += n + (c[n] == '|');
    }
    return false;
}

/* The notation only (device.h); "" leaves the choice to the model. The
 * session reports a device this build or machine lacks. */
sc_status host_config_lr_find_range(const char *text, double *min_lr, double *max_lr)
{
    char *end;
    errno = 0;
    double lo = strtod(text, &end), hi = 0;
    bool ok = end != text && *end == ':';
    if (ok) {
        const char *second = end + 1;
        hi = strtod(second, &end);
        ok = end != second && *end == '\0' && errno == 0;
    }
    if (!ok || !(lo > 0) || !(hi > lo) || !isfinite(hi))
        return sc_error_set(SC_ERR_INVALID,
                            "'%.64s' is no lr range: give MIN:MAX with 0 < MIN < MAX, e.g. "
                            "1e-7:10", text);
    *min_lr = lo;
    *max_lr = hi;
    return SC_OK;
}

static sc_status check_lr_find_range(const char *value)
{
    double lo, hi;
    return host_config_lr_find_range(value, &lo, &hi);
}

static sc_status check_device(const char *value)
{
    host_device_request req;
    return value[0] ? host_device_parse(value, &req) : SC_OK;
}

static sc_status set_string(const config_option *opt, char *field, const char *text)
{
    size_t len = strlen(text);
    if (len >= opt->size)
        return sc_error_set(SC_ERR_INVALID, "value of %zu characters is too long (at most %zu)",
                            len, opt->size - 1);
    if (opt->choices && !in_choices(opt->choices, text))
        return sc_error_set(SC_ERR_INVALID, "'%s' is not one of %s", quote(text).text,
                            opt->choices);
    SC_TRY(check_printable(text));
    if (opt->check)
        SC_TRY(opt->check(text));
    /* strncpy zero-fills the rest, so equal configs are equal bytes. */
    strncpy(field, text, opt->size);
    return SC_OK;
}

/* true/false, or a path (which implies true). */
static sc_status set_optional_path(const config_option *opt, host_config *cfg, const char *text)
{
    bool *given = (bool *)((char *)cfg + opt->flag_offset);
    char *path = (char *)cfg + opt->offset;
    if (is_bool_text(text)) {
        *given = text[0] == 't';
        return set_string(opt, path, "");
    }
    SC_TRY(set_string(opt, path, text));
    *given = true;
    return SC_OK;
}

static sc_status list_add(const config_option *opt, host_path_list *list, const char *text)
{
    if (!text[0]) {
        memset(list, 0, sizeof *list);
        return SC_OK;
    }
    if (list->n == HOST_MAX_HOOK_PLUGINS)
        return sc_error_set(SC_ERR_INVALID, "'%s' is one more than the %d --%s allowed",
                            quote(text).text, HOST_MAX_HOOK_PLUGINS, opt->name);
    if (strlen(text) >= HOST_PATH_MAX)
        return sc_error_set(SC_ERR_INVALID, "a path of %zu characters is too long", strlen(text));
    SC_TRY(check_printable(text));
    strncpy(list->path[list->n++], text, HOST_PATH_MAX);
    return SC_OK;
}

/* The arguments of the list's last path, given once ("" gives none). */
static sc_status list_set_args(host_path_list *list, const char *text)
{
    if (!text[0])
        return SC_OK;
    if (!list->n)
        return sc_error_set(SC_ERR_INVALID, "'%s' goes with no plugin", quote(text).text);
    char *args = list->args[list->n - 1];
    if (args[0])
        return sc_error_set(SC_ERR_INVALID, "'%s' is the second for %s (the first: '%s')",
                            quote(text).text, list->path[list->n - 1], args);
    if (strlen(text) >= sizeof list->args[0])
        return sc_error_set(SC_ERR_INVALID, "value of %zu characters is too long (at most %zu)",
                            strlen(text), sizeof list->args[0] - 1);
    SC_TRY(check_printable(text));
    strncpy(args, text, sizeof list->args[0]);
    return SC_OK;
}

/* Sets the option from text in INI notation; the message, on an error,
 * is about the value only (callers add where it came from). */
static sc_status opt_set(const config_option *opt, host_config *cfg, const char *text)
{
    void *field = (char *)cfg + opt->offset;
    switch (opt->type) {
    case OPT_STRING:
    case OPT_CONFIG: return set_string(opt, field, text);
    case OPT_INT: return set_int(opt, field, text);
    case OPT_INT64: return set_int64(opt, field, text);
    case OPT_UINT64: return set_uint64(field, text);
    case OPT_DOUBLE: return set_double(opt, field, text);
    case OPT_FLAG: return set_bool(field, text);
    case OPT_OPTIONAL_PATH: return set_optional_path(opt, cfg, text);
    case OPT_LIST: return list_add(opt, field, text);
    case OPT_LIST_ARGS: return list_set_args(field, text);
    case OPT_HELP:
    case OPT_VERSION: break;
    }
    return SC_OK;
}

/* The option's value in INI notation, as opt_set reads it back. */
static void opt_format(const config_option *opt, const host_config *cfg, char *buf, size_t n)
{
    const void *field = (const char *)cfg + opt->offset;
    switch (opt->type) {
    case OPT_STRING:
    case OPT_CONFIG: snprintf(buf, n, "%s", (const char *)field); break;
    case OPT_INT: snprintf(buf, n, "%d", *(const int *)field); break;
    case OPT_INT64: snprintf(buf, n, "%" PRId64, *(const int64_t *)field); break;
    case OPT_UINT64: snprintf(buf, n, "%" PRIu64, *(const uint64_t *)field); break;
    case OPT_DOUBLE: host_format_double(*(const double *)field, buf, n); break;
    case OPT_FLAG: snprintf(buf, n, "%s", *(const bool *)field ? "true" : "false"); break;
    case OPT_OPTIONAL_PATH: {
        bool given = *(const bool *)((const char *)cfg + opt->flag_offset);
        const char *path = field;
        snprintf(buf, n, "%s", !given ? "false" : path[0] ? path : "true");
        break;
    }
    case OPT_LIST: /* one line per path: ini_write_option */
    case OPT_LIST_ARGS:
    case OPT_HELP:
    case OPT_VERSION: buf[0] = '\0'; break;
    }
}

void host_config_defaults(host_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < N_OPTIONS; i++)
        if (options[i].def)
            opt_set(&options[i], cfg, options[i].def); /* the unit tests check these */
}

static const config_option *opt_find(const char *name)
{
    for (int i = 0; i < N_OPTIONS; i++)
        if (strcmp(options[i].name, name) == 0)
            return &options[i];
    return NULL;
}

bool host_config_user_set(const host_config *cfg, const char *name)
{
    const config_option *opt = opt_find(name);
    return opt && cfg->origin[opt - options] != HOST_ORIGIN_DEFAULT;
}

void host_config_inherit(host_config *cfg, const host_config *saved)
{
    for (int i = 0; i < N_OPTIONS; i++) {
        const config_option *opt = &options[i];
        char *field = (char *)cfg + opt->offset;
        if (opt->inherited && !field[0]) /* inherited options are strings */
            memcpy(field, (const char *)saved + opt->offset, opt->size);
    }
}

/* ---- lookup ----------------------------------------------------------- */

/* Finds the option `name` (len characters) of program (a name may have a
 * row per program: --checkpoint); an unknown name, or one of another
 * program only, is an error. `dashes` is "--" on the command
 * line and "" in INI files, for the message. */
static sc_status opt_lookup(host_program program, const char *name, size_t len,
                            const char *dashes, const config_option **out)
{
    const char *names[N_OPTIONS];
    unsigned owners = 0; /* the programs of the rows of that name */
    int n = 0;
    for (int i = 0; i < N_OPTIONS; i++) {
        const config_option *opt = &options[i];
        bool named = strlen(opt->name) == len && strncmp(opt->name, name, len) == 0;
        if (named && (opt->programs & program)) {
            *out = opt;
            return SC_OK;
        }
        if (named)
            owners |= opt->programs;
        if (opt->programs & program)
            names[n++] = opt->name;
    }
    if (owners) {
        char text[128];
        programs_text(owners, text, sizeof text);
        return sc_error_set(SC_ERR_INVALID, "%s%.*s is an option of %s, not of %s", dashes,
                            (int)len, name, text, host_program_name(program));
    }
    char word[QUOTE_MAX + 2]; /* one more than quote shows, so that it shows the cut */
    snprintf(word, sizeof word, "%.*s", (int)len, name);
    const char *near = sc_args_suggest(word, names, n);
    if (near)
        return sc_error_set(SC_ERR_INVALID, "unknown option %s%s (did you mean %s%s?)", dashes,
                            quote(word).text, dashes, near);
    return sc_error_set(SC_ERR_INVALID, "unknown option %s%s (see %s --help)", dashes,
                        quote(word).text, host_program_name(program));
}

/* ---- command line ----------------------------------------------------- */

static bool is_option(const char *arg) { return strncmp(arg, "--", 2) == 0; }

/* scorch-predict takes inputs: the arguments that are no options. */
static bool takes_inputs(host_program program) { return program == HOST_PROGRAM_PREDICT; }

/* --no-NAME turns the flag NAME off: sets *negated and finds NAME. */
static sc_status cli_lookup(host_program program, const char *name, size_t len,
                            const config_option **opt, bool *negated)
{
    const config_option *flag = NULL;
    *negated = len > 3 && strncmp(name, "no-", 3) == 0 &&
               opt_lookup(program, name + 3, len - 3, "--", &flag) == SC_OK &&
               flag->type == OPT_FLAG;
    if (*negated) {
        *opt = flag;
        return SC_OK;
    }
    return opt_lookup(program, name, len, "--", opt);
}

/* Reads the option at argv[*i] and its value (which may be the next
 * argument), advancing *i past what it used. Flags get "true" ("false" as
 * --no-NAME), and a bare --resume gets "true": the value is always INI
 * notation. An input of a program that takes them is *opt NULL and the
 * input as *value. */
static sc_status cli_next(host_program program, int argc, char **argv, int *i,
                          const config_option **opt, const char **value)
{
    const char *arg = argv[(*i)++];
    if (takes_inputs(program) && !is_option(arg)) {
        *opt = NULL;
        *value = arg;
        return SC_OK;
    }
    if (!is_option(arg) || !arg[2])
        return sc_error_set(SC_ERR_INVALID, "unexpected argument '%s' (see %s --help)",
                            quote(arg).text, host_program_name(program));
    const char *eq = strchr(arg + 2, '=');
    size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
    bool negated;
    SC_TRY(cli_lookup(program, arg + 2, len, opt, &negated));
    const char *next = *i < argc && !is_option(argv[*i]) ? argv[*i] : NULL;
    if (opt_takes_value(*opt)) {
        if (!eq && !next)
            return sc_error_set(SC_ERR_INVALID, "--%s needs a value", (*opt)->name);
        *value = eq ? eq + 1 : argv[(*i)++];
    } else if ((*opt)->type == OPT_OPTIONAL_PATH) {
        if (eq && !eq[1])
            return sc_error_set(SC_ERR_INVALID, "--%s= needs a path", (*opt)->name);
        *value = eq ? eq + 1 : next ? argv[(*i)++] : "true";
    } else if ((*opt)->type == OPT_FLAG) {
        if (next && takes_inputs(program) && !is_bool_text(next))
            next = NULL; /* "--raw a.png": an input */
        if (eq || next) /* "--drop-last false": no argument follows a flag */
            return sc_error_set(SC_ERR_INVALID, "--%.*s takes no value (got '%s'): write --%s "
                                "to turn it on, --no-%s to turn it off", (int)len, arg + 2,
                                quote(eq ? eq + 1 : next).text, (*opt)->name, (*opt)->name);
        *value = negated ? "false" : "true";
    } else { /* --help, --version */
        if (eq)
            return sc_error_set(SC_ERR_INVALID, "--%.*s takes no value", (int)len, arg + 2);
        *value = "true";
    }
    return SC_OK;
}

static void print_version(FILE *out, host_program program)
{
    fprintf(out, "%s %s (plugin ABI %d.%d)\n", host_program_name(program), SCORCH_VERSION,
            SC_ABI_MAJOR, SC_ABI_MINOR);
}

/* First pass: syntax, --help / --version, and which --config to read. */
static sc_status cli_prescan(host_program program, int argc, char **argv, const char **config,
                             bool *exit_now)
{
    for (int i = 1; i < argc;) {
        const config_option *opt = NULL;
        const char *value = NULL;
        SC_TRY(cli_next(program, argc, argv, &i, &opt, &value));
        if (!opt) /* an input */
            continue;
        if (opt->type == OPT_HELP || opt->type == OPT_VERSION) {
            if (opt->type == OPT_HELP)
                host_config_print_help(stdout, program);
            else
                print_version(stdout, program);
            *exit_now = true;
            return SC_OK;
        }
        if (opt->type == OPT_CONFIG) {
            if (*config)
                return sc_error_set(SC_ERR_INVALID, "--config is given twice");
            *config = value;
        }
    }
    return SC_OK;
}

/* A source (the command line, an INI file) that names a list replaces the
 * list it had: its first use empties it. */
static void list_restart(const config_option *opt, host_config *cfg, bool first)
{
    if (opt->type == OPT_LIST && first)
        opt_set(opt, cfg, "");
}

/* The row of `type` that shares opt's field (a list and its arguments), or
 * opt itself when there is none. */
static const config_option *partner(const config_option *opt, opt_type type)
{
    for (int i = 0; i < N_OPTIONS; i++)
        if (options[i].type == type && options[i].offset == opt->offset)
            return &options[i];
    return opt;
}

/* A source gives a list's arguments after a path of its own, never to a
 * path another source named. `path_named`: whether this source named one. */
static sc_status args_follow_path(const config_option *opt, bool path_named,
                                  const char *dashes)
{
    if (opt->type != OPT_LIST_ARGS || path_named)
        return SC_OK;
    return sc_error_set(SC_ERR_INVALID, "%s%s must follow the %s%s it is for", dashes,
                        opt->name, dashes, partner(opt, OPT_LIST)->name);
}

static void reverse_args(char **argv, int from, int to)
{
    for (to--; from < to; from++, to--) {
        char *swap = argv[from];
        argv[from] = argv[to];
        argv[to] = swap;
    }
}

/* Moves the option argv[start, end) (with its value) before the inputs
 * seen so far, argv[*first_input, start), keeping both in order. */
static void move_before_inputs(char **argv, int *first_input, int start, int end)
{
    if (*first_input < start) {
        reverse_args(argv, *first_input, start);
        reverse_args(argv, start, end);
        reverse_args(argv, *first_input, end);
    }
    *first_input += end - start;
}

static sc_status cli_apply(host_config *cfg, host_program program, int argc, char **argv)
{
    bool seen[N_OPTIONS] = {0};
    int first_input = 1; /* argv[first_input, i): the inputs read so far */
    for (int i = 1; i < argc;) {
        const config_option *opt = NULL;
        const char *value = NULL;
        int start = i;
        SC_TRY(cli_next(program, argc, argv, &i, &opt, &value));
        if (!opt) /* an input: it stays at the end of the block */
            continue;
        move_before_inputs(argv, &first_input, start, i);
        SC_TRY(args_follow_path(opt, seen[partner(opt, OPT_LIST) - options], "--"));
        list_restart(opt, cfg, !seen[opt - options]);
        seen[opt - options] = true;
        sc_status st = opt_set(opt, cfg, value);
        if (st != SC_OK)
            return sc_error_wrap(st, "--%s", opt->name);
        cfg->origin[opt - options] = HOST_ORIGIN_COMMAND_LINE;
    }
    if (takes_inputs(program)) {
        cfg->inputs = argv + first_input;
        cfg->n_inputs = argc > first_input ? argc - first_input : 0;
    }
    return SC_OK;
}

/* Required options are all strings: set means non-empty. */
static sc_status check_required(const host_config *cfg, host_program program)
{
    char missing[256] = "";
    for (int i = 0; i < N_OPTIONS; i++) {
        const config_option *opt = &options[i];
        if ((opt->required & program) && !((const char *)cfg + opt->offset)[0]) {
            size_t used = strlen(missing);
            snprintf(missing + used, sizeof missing - used, "%s--%s", used ? ", " : "",
                     opt->name);
        }
    }
    if (!missing[0])
        return SC_OK;
    return sc_error_set(SC_ERR_INVALID, "missing %s (required; see %s --help)", missing,
                        host_program_name(program));
}

/* ---- checks of the final values ------------------------------------ */

/* Where opt's value came from, to start a message: "--name", or
 * "FILE:LINE: name" for a line of the --config file. */
static void opt_where(const host_config *cfg, const config_option *opt, char *buf, size_t size)
{
    int line = cfg->origin[opt - options];
    if (line > 0)
        snprintf(buf, size, "%s:%d: %s", cfg->config, line, opt->name);
    else
        snprintf(buf, size, "--%s", opt->name);
}

/* Whether the choice opt belongs to (its used_if) is made: then the run
 * reads it. The deciding option is a string with choices. */
static bool opt_in_use(const config_option *opt, const host_config *cfg)
{
    if (!opt->used_if.option)
        return true;
    const config_option *chooser = opt_find(opt->used_if.option);
    return in_choices(opt->used_if.values, (const char *)cfg + chooser->offset);
}

/* "a|b|c" as "a, b or c". */
static void choices_text(const char *choices, char *out, size_t size)
{
    size_t len = 0;
    const char *last = strrchr(choices, '|');
    for (const char *p = choices; *p && len + 4 < size; p++)
        if (*p != '|')
            out[len++] = *p;
        else
            len += (size_t)snprintf(out + len, size - len, p == last ? " or " : ", ");
    out[len < size ? len : size - 1] = '\0';
}

/* An option the user set for another choice (--momentum with adam) would
 * be silently ignored: refused instead. Defaults are never refused. */
static sc_status check_in_use(const host_config *cfg, host_program program)
{
    for (int i = 0; i < N_OPTIONS; i++) {
        const config_option *opt = &options[i];
        if (!(opt->programs & program) || cfg->origin[i] == HOST_ORIGIN_DEFAULT ||
            opt_in_use(opt, cfg))
            continue;
        const config_option *chooser = opt_find(opt->used_if.option);
        const char *chosen = (const char *)cfg + chooser->offset;
        bool by_default = cfg->origin[chooser - options] == HOST_ORIGIN_DEFAULT;
        char where[HOST_PATH_MAX + 64], values[128];
        opt_where(cfg, opt, where, sizeof where);
        choices_text(opt->used_if.values, values, sizeof values);
        return sc_error_set(SC_ERR_INVALID,
                            "%s is for --%s %s, not %s%s: remove it, or choose --%s %s", where,
                            chooser->name, values, chosen, by_default ? " (the default)" : "",
                            chooser->name, values);
    }
    return SC_OK;
}

/* The machine's limits, on the final values: a config.ini written on a
 * bigger machine loads, and the command line can lower what it asks. */
static sc_status check_limits(const host_config *cfg, host_program program)
{
    for (int i = 0; i < N_OPTIONS; i++) {
        const config_option *opt = &options[i];
        if (!(opt->programs & program) || !opt->limit)
            continue;
        char why[256], where[HOST_PATH_MAX + 64];
        int max = opt->limit(why, sizeof why);
        int value = *(const int *)((const char *)cfg + opt->offset);
        if (value <= max)
            continue;
        opt_where(cfg, opt, where, sizeof where);
        return sc_error_set(SC_ERR_INVALID, "%s: %d is more than %d %s", where, value, max, why);
    }
    return SC_OK;
}

/* Compute threads beyond the cores only take turns on them. */
static int threads_limit(char *why, size_t size)
{
    snprintf(why, size, "(the cores this process may run on): more compute threads would only "
                        "take turns on them; 0 uses every core");
    return host_cpu_cores();
}

enum { WORKERS_PER_CORE = 4, WORKERS_MAX = 256 };

/* Loader threads wait on getitem's reads, so a few per core keep the cores
 * busy; many more only wait for each other (and ~32,000 exhausted the
 * machine's threads before the loader failed). */
static int workers_limit(char *why, size_t size)
{
    int cores = host_cpu_cores();
    snprintf(why, size, "(%d per core for the %d core%s this process may run on, %d at most): "
                        "more loader threads would only wait for each other",
             WORKERS_PER_CORE, cores, cores == 1 ? "" : "s", WORKERS_MAX);
    return cores < WORKERS_MAX / WORKERS_PER_CORE ? WORKERS_PER_CORE * cores : WORKERS_MAX;
}

/* Optimizer options whose default is the chosen optimizer's own, PyTorch's
 * (sc_optim_defaults): --weight-decay is 0.01 under adamw, 0 otherwise. A
 * value the user set stays, even one equal to the table's default. */
static const struct {
    const char *option;
    size_t optim_field; /* a double of sc_optim_config */
} optimizer_defaults[] = {
    {"weight-decay", offsetof(sc_optim_config, weight_decay)},
    {"momentum", offsetof(sc_optim_config, momentum)},
    {"beta1", offsetof(sc_optim_config, beta1)},
    {"beta2", offsetof(sc_optim_config, beta2)},
    {"eps", offsetof(sc_optim_config, eps)},
    {"alpha", offsetof(sc_optim_config, alpha)},
};

static sc_status apply_optimizer_defaults(host_config *cfg)
{
    sc_optim_kind kind;
    SC_TRY(sc_optim_kind_parse(cfg->optimizer, &kind));
    const sc_optim_config defaults = sc_optim_defaults(kind);
    for (int i = 0; i < ARRAY_LEN(optimizer_defaults); i++) {
        const config_option *opt = opt_find(optimizer_defaults[i].option);
        if (!host_config_user_set(cfg, opt->name))
            *(double *)((char *)cfg + opt->offset) =
                *(const double *)((const char *)&defaults + optimizer_defaults[i].optim_field);
    }
    return SC_OK;
}

/* PyTorch's SGD, and so scorch's, has no momentum unless asked: Nesterov
 * needs some. Said here, naming the options, rather than by the optimizer. */
static sc_status check_nesterov(const host_config *cfg)
{
    if (cfg->nesterov && cfg->momentum == 0.0 && strcmp(cfg->optimizer, "sgd") == 0)
        return sc_error_set(SC_ERR_INVALID, "--nesterov needs --momentum > 0 (sgd's default "
                            "is 0, as PyTorch's): add --momentum 0.9, say");
    return SC_OK;
}

sc_status host_config_parse(host_config *cfg, host_program program, int argc, char **argv,
                          bool *exit_now)
{
    const char *config = NULL;
    *exit_now = false;
    host_config_defaults(cfg);
    SC_TRY(cli_prescan(program, argc, argv, &config, exit_now));
    if (*exit_now)
        return SC_OK;
    if (config)
        SC_TRY(host_config_load_ini(cfg, program, config));
    SC_TRY(cli_apply(cfg, program, argc, argv));
    SC_TRY(apply_optimizer_defaults(cfg));
    SC_TRY(check_nesterov(cfg));
    SC_TRY(check_required(cfg, program));
    SC_TRY(check_in_use(cfg, program));
    return check_limits(cfg, program);
}

/* ---- INI files -------------------------------------------------------- */

/* Debian's libinih makes its line limit a run-time variable: raise it there
 * so that long paths fit. Where the library lacks it (upstream builds) the
 * weak reference is NULL and the compile-time INI_MAX_LINE holds. A longer
 * line is an error either way, never silently cut. */
extern int ini_max_line;
#pragma weak ini_max_line

enum { INI_LINE_WANTED = HOST_PATH_MAX + 64 };

/* The longest line, newline included, that one read gives inih. */
static int ini_line_capacity(void)
{
    return (&ini_max_line ? INI_LINE_WANTED : INI_MAX_LINE) - 1;
}

typedef struct ini_state {
    host_config *cfg;
    host_program program;
    const char *path;
    FILE *file;
    int line;            /* of the last line read */
    int error_line;      /* 0 until a line fails */
    sc_status status;
    int seen[N_OPTIONS]; /* line where each option was set, to refuse repeats */
} ini_state;

/* inih's fgets: counts lines (so the handler knows its line), refuses
 * over-long ones, and stops the parse at the first error. */
static char *ini_read_line(char *buf, int size, void *user)
{
    ini_state *st = user;
    if (st->error_line || !fgets(buf, size, st->file))
        return NULL;
    st->line++;
    size_t len = strlen(buf);
    if (len == (size_t)size - 1 && buf[len - 1] != '\n') {
        int c = getc(st->file);
        if (c != EOF) {
            st->error_line = st->line;
            st->status = sc_error_set(SC_ERR_FORMAT, "%s:%d: line longer than %d characters",
                                      st->path, st->line, size - 2);
            return NULL;
        }
    }
    return buf;
}

static sc_status ini_apply(ini_state *st, const char *section, const char *name,
                           const char *value)
{
    const char *want = program_section(st->program);
    if (st->program == HOST_PROGRAM_TRAIN && host_param_groups_is_section(section))
        return host_param_groups_set(&st->cfg->param_groups, section, name, value);
    if (strcmp(section, want) != 0) {
        if (!section[0])
            return sc_error_set(SC_ERR_INVALID, "%s is outside a section; put it under [%s]",
                                quote(name).text, want);
        return sc_error_set(SC_ERR_INVALID, "section [%s] is not read by %s, which reads [%s]",
                            quote(section).text, host_program_name(st->program), want);
    }
    const config_option *opt;
    SC_TRY(opt_lookup(st->program, name, strlen(name), "", &opt));
    if (opt_cli_only(opt))
        return sc_error_set(SC_ERR_INVALID, "%s can only be given on the command line", name);
    int k = (int)(opt - options);
    SC_TRY(args_follow_path(opt, st->seen[partner(opt, OPT_LIST) - options], ""));
    if (st->seen[k] && opt->type != OPT_LIST && opt->type != OPT_LIST_ARGS)
        return sc_error_set(SC_ERR_INVALID, "%s is set twice (first on line %d)", name,
                            st->seen[k]);
    list_restart(opt, st->cfg, !st->seen[k]);
    st->seen[k] = st->line;
    sc_status s = opt_set(opt, st->cfg, value);
    if (s != SC_OK)
        return sc_error_wrap(s, "%s", name);
    st->cfg->origin[k] = st->line;
    return SC_OK;
}

static int ini_handle(void *user, const char *section, const char *name, const char *value)
{
    ini_state *st = user;
    sc_status s = ini_apply(st, section, name, value);
    if (s == SC_OK)
        return 1;
    st->error_line = st->line;
    st->status = sc_error_wrap(s, "%s:%d", st->path, st->line);
    return 0;
}

static int ini_parse_raised(ini_state *st)
{
    int saved = &ini_max_line ? ini_max_line : 0;
    if (&ini_max_line)
        ini_max_line = INI_LINE_WANTED;
    int rc = ini_parse_stream(ini_read_line, st, ini_handle, st);
    if (&ini_max_line)
        ini_max_line = saved;
    return rc;
}

/* Parses st->file, named st->path in messages. */
static sc_status ini_load(ini_state *st)
{
    int rc = ini_parse_raised(st);
    /* inih returns the first bad line; a syntax error may precede ours. */
    if (rc > 0 && (!st->error_line || rc < st->error_line))
        return sc_error_set(SC_ERR_FORMAT, "%s:%d: expected 'name = value' or '[section]'",
                            st->path, rc);
    if (st->error_line)
        return st->status;
    if (ferror(st->file) || rc < 0)
        return sc_error_set(SC_ERR_IO, "cannot read config file %s", st->path);
    return SC_OK;
}

sc_status host_config_load_ini(host_config *cfg, host_program program, const char *path)
{
    ini_state st = {.cfg = cfg, .program = program, .path = path};
    st.file = fopen(path, "r");
    if (!st.file)
        return sc_error_set(SC_ERR_IO, "cannot read config file %s: %s", path, strerror(errno));
    sc_status s = ini_load(&st);
    fclose(st.file);
    return s;
}

sc_status host_config_load_ini_text(host_config *cfg, host_program program, const char *text,
                                  const char *name)
{
    if (!text[0]) /* fmemopen refuses an empty buffer */
        return SC_OK;
    ini_state st = {.cfg = cfg, .program = program, .path = name};
    st.file = fmemopen((void *)text, strlen(text), "r");
    if (!st.file)
        return sc_error_set(SC_ERR_NOMEM, "cannot read %s: %s", name, strerror(errno));
    sc_status s = ini_load(&st);
    fclose(st.file);
    return s;
}

/* Whether `name = value` reads back as value: inih trims whitespace, cuts
 * at " ;" (an inline comment) and has a line limit. */
static bool ini_representable(const char *name, const char *value)
{
    size_t len = strlen(value);
    if (len && (isspace((unsigned char)value[0]) || isspace((unsigned char)value[len - 1])))
        return false;
    if (strpbrk(value, "\r\n") || value[0] == ';')
        return false;
    for (const char *p = strchr(value, ';'); p; p = strchr(p + 1, ';'))
        if (isspace((unsigned char)p[-1]))
            return false;
    return strlen(name) + 3 + len + 1 <= (size_t)ini_line_capacity();
}

static sc_status ini_write_line(FILE *out, const char *name, const char *value)
{
    if (!ini_representable(name, value))
        return sc_error_set(SC_ERR_INVALID, "%s: '%s' cannot be written to an INI file "
                            "(spaces at its ends, a newline, ' ;' or too long)",
                            name, quote(value).text);
    fprintf(out, "%s =%s%s\n", name, value[0] ? " " : "", value);
    return SC_OK;
}

/* A list is a line per path, or one empty line when it is empty, each
 * followed by a line of its arguments (empty when it has none). */
static sc_status ini_write_option(FILE *out, const config_option *opt, const host_config *cfg)
{
    char value[HOST_PATH_MAX];
    if (opt->type == OPT_LIST_ARGS) /* written with its list's paths */
        return SC_OK;
    if (opt->type != OPT_LIST) {
        opt_format(opt, cfg, value, sizeof value);
        return ini_write_line(out, opt->name, value);
    }
    const host_path_list *list = (const void *)((const char *)cfg + opt->offset);
    const char *args_name = partner(opt, OPT_LIST_ARGS)->name;
    for (int i = 0; i < list->n; i++) {
        SC_TRY(ini_write_line(out, opt->name, list->path[i]));
        SC_TRY(ini_write_line(out, args_name, list->args[i]));
    }
    if (list->n)
        return SC_OK;
    SC_TRY(ini_write_line(out, opt->name, ""));
    return ini_write_line(out, args_name, "");
}

static sc_status ini_write_options(FILE *out, const host_config *cfg, host_program program)
{
    int group = -1;
    for (int i = 0; i < N_OPTIONS; i++) {
        const config_option *opt = &options[i];
        if (!(opt->programs & program) || opt_cli_only(opt) || !opt_in_use(opt, cfg))
            continue;
        if ((int)opt->group != group)
            fprintf(out, "\n; %s\n", group_title[group = (int)opt->group]);
        SC_TRY(ini_write_option(out, opt, cfg));
    }
    return SC_OK;
}

sc_status host_config_ini_text(const host_config *cfg, host_program program, char **text)
{
    size_t len = 0;
    *text = NULL;
    FILE *mem = open_memstream(text, &len);
    if (!mem)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the resolved config");
    fprintf(mem, "; %s configuration, resolved from defaults, --config and the command line\n"
                 "[%s]\n", host_program_name(program), program_section(program));
    sc_status st = ini_write_options(mem, cfg, program);
    if (program == HOST_PROGRAM_TRAIN)
        host_param_groups_write(&cfg->param_groups, mem);
    fclose(mem);
    if (st != SC_OK) {
        free(*text);
        *text = NULL;
    }
    return st;
}

sc_status host_config_write_ini(const host_config *cfg, host_program program, const char *path)
{
    /* Composed in memory first, so a refused value leaves no partial file. */
    char *text = NULL;
    sc_status st = host_config_ini_text(cfg, program, &text);
    size_t len = text ? strlen(text) : 0;
    FILE *out = st == SC_OK ? fopen(path, "w") : NULL;
    if (st == SC_OK && !out)
        st = sc_error_set(SC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (out) {
        bool ok = fwrite(text, 1, len, out) == len;
        if (fclose(out) != 0 || !ok)
            st = sc_error_set(SC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    }
    free(text);
    return st;
}

/* ---- resuming --------------------------------------------------------- */

/* What changing an option of each group (other than those that may
 * change) costs a resumed run. */
static const char *const group_resume_loss[] = {
    [GROUP_PLUGINS] = "the model or the data differ from those the checkpoint was trained with",
    [GROUP_TRAINING] = "the epochs hold other batches, or validation (which picks the best "
                       "checkpoint) sees other samples",
    [GROUP_OPTIMIZER] = "the optimizer's updates differ from here on",
    [GROUP_SCHEDULE] = "the learning rate differs from here on",
    [GROUP_DEVICES] = "the batches, the sample order or the arithmetic differ, so the weights "
                      "drift from those of the uninterrupted run",
    [GROUP_RUN] = "the run differs", [GROUP_TENSORBOARD] = "the run differs",
    [GROUP_INIT] = "other parameters train, so the weights drift from those of the "
                   "uninterrupted run",
    [GROUP_EVAL] = "the run differs", [GROUP_PREDICT] = "the run differs",
    [GROUP_GENERAL] = "the run differs",
};

/* The [params "PATTERN"] sections, compared as a whole: 1 when they differ. */
static int param_groups_change(const host_config *saved, const host_config *cfg,
                               host_config_change_fn fn, void *user)
{
    char was[1024], now[1024];
    host_param_groups_describe(&saved->param_groups, was, sizeof was);
    host_param_groups_describe(&cfg->param_groups, now, sizeof now);
    if (strcmp(was, now) == 0)
        return 0;
    if (fn)
        fn(user, &(host_config_change){"[params] sections", was, now,
                                     group_resume_loss[GROUP_OPTIMIZER]});
    return 1;
}

/* Options that either side's choices leave unused (--momentum under adam)
 * are not compared: the choice itself is. */
int host_config_resume_changes(const host_config *saved, const host_config *cfg,
                             host_config_change_fn fn, void *user)
{
    int changed = 0;
    for (int i = 0; i < N_OPTIONS; i++) {
        const config_option *opt = &options[i];
        if (!(opt->programs & HOST_PROGRAM_TRAIN) || opt->resume_may_change ||
            opt_cli_only(opt) || !opt_in_use(opt, saved) || !opt_in_use(opt, cfg))
            continue;
        char was[HOST_PATH_MAX], now[HOST_PATH_MAX];
        opt_format(opt, saved, was, sizeof was);
        opt_format(opt, cfg, now, sizeof now);
        if (strcmp(was, now) == 0)
            continue;
        changed++;
        host_config_change change = {opt->name, was, now, group_resume_loss[opt->group]};
        if (fn)
            fn(user, &change);
    }
    return changed + param_groups_change(saved, cfg, fn, user);
}

/* ---- help ------------------------------------------------------------- */

/* Prints text from column col, wrapped at 80 columns; continuation lines
 * start at column indent. */
static void print_wrapped(FILE *out, const char *text, int col, int indent)
{
    enum { WIDTH = 80 };
    while (*text) {
        int len = (int)strlen(text), cut = len;
        if (col + len > WIDTH) {
            cut = WIDTH - col;
            while (cut > 0 && text[cut] != ' ')
                cut--;
            if (cut == 0) /* one word wider than the room */
                cut = (int)strcspn(text, " ");
        }
        fprintf(out, "%.*s\n", cut, text);
        text += cut + strspn(text + cut, " ");
        if (*text)
            fprintf(out, "%*s", col = indent, "");
    }
}

/* The default --help shows for opt, or NULL (actions, required options). */
static const char *shown_default(const config_option *opt, host_program program)
{
    if (!opt->def || (opt->required & program))
        return NULL;
    if (opt->inherited && program != HOST_PROGRAM_TRAIN)
        return "the checkpoint's";
    if (program == HOST_PROGRAM_PREDICT && opt->predict.shown_def)
        return opt->predict.shown_def;
    if (opt->shown_def)
        return opt->shown_def;
    return opt->def[0] ? opt->def : "none";
}

/* "adam, adamw: " into buf for an option only those choices read; its
 * length. */
static int condition_prefix(const opt_condition *cond, char *buf, size_t size)
{
    int n = 0;
    buf[0] = '\0';
    for (const char *c = cond->values; c && *c;) {
        size_t len = strcspn(c, "|");
        n += snprintf(buf + n, size - (size_t)n, "%.*s%s", (int)len, c, c[len] ? ", " : ": ");
        c += len + (c[len] == '|');
    }
    return n;
}

static void print_option_help(FILE *out, const config_option *opt, host_program program)
{
    enum { COLUMN = 31 }; /* where the help text starts */
    char left[96], right[512];
    const char *arg = opt->arg ? opt->arg : opt->choices;
    snprintf(left, sizeof left, "--%s%s%s", opt->name, arg ? " " : "", arg ? arg : "");
    const char *def = shown_default(opt, program);
    int n = condition_prefix(&opt->used_if, right, sizeof right);
    bool own = program == HOST_PROGRAM_PREDICT && opt->predict.help;
    n += snprintf(right + n, sizeof right - (size_t)n, "%s", own ? opt->predict.help : opt->help);
    if (opt->required & program)
        snprintf(right + n, sizeof right - (size_t)n, " (required)");
    else if (def)
        snprintf(right + n, sizeof right - (size_t)n, " (default: %s)", def);
    if (strlen(left) + 3 > COLUMN)
        fprintf(out, "  %s\n%*s", left, COLUMN, "");
    else
        fprintf(out, "  %-*s", COLUMN - 2, left);
    print_wrapped(out, right, COLUMN, COLUMN);
}

/* --help's usage line after the program's name, and what it does. */
static void print_usage(FILE *out, host_program program)
{
    static const char *const usage[][2] = {
        [HOST_PROGRAM_TRAIN] = {
            "--model PATH --dataset PATH [options]",
            "Trains a model plugin on a dataset plugin: validates after each epoch, tests after\n"
            "the last, and keeps config, metrics and checkpoints in the run directory."},
        [HOST_PROGRAM_TEST] = {
            "--checkpoint PATH [options]",
            "Evaluates a checkpoint on one split of a dataset; for a classifier, writes\n"
            "per-sample predictions with their top classes, a confusion matrix and\n"
            "per-class accuracy."},
        [HOST_PROGRAM_PREDICT] = {
            "--checkpoint PATH [options] INPUT...",
            "Runs a checkpoint's network on raw inputs, decoded by its dataset plugin as the\n"
            "test split is: files (an image, a text row), or '-' for stdin, one input a line\n"
            "(CSV rows). Prints, per input, the top classes with their probabilities, or the\n"
            "network's outputs for what is no classifier (or with --raw). An input that\n"
            "fails is one line on stderr and the others are still predicted; the exit\n"
            "status is then 3. See docs/predict.md."},
        [HOST_PROGRAM_RUN] = {
            "--job PATH [--checkpoint PATH ...] [options]",
            "Runs a job plugin on every rank: non-training work (evaluating checkpoints,\n"
            "dataset statistics, ...) on the devices and ranks scorch allocates, with the\n"
            "model and dataset plugins when given (else the first checkpoint's). Under\n"
            "mpirun or srun each process is a rank; --replicas N runs N ranks as threads.\n"
            "See docs/jobs.md."},
    };
    fprintf(out, "Usage: %s %s\n\n%s\n", host_program_name(program), usage[program][0],
            usage[program][1]);
}

void host_config_print_help(FILE *out, host_program program)
{
    print_usage(out, program);
    int group = -1;
    for (int i = 0; i < N_OPTIONS; i++) {
        const config_option *opt = &options[i];
        if (!(opt->programs & program))
            continue;
        if ((int)opt->group != group)
            fprintf(out, "\n%s:\n", group_title[group = (int)opt->group]);
        print_option_help(out, opt, program);
    }
    fprintf(out, "\nAn INI file given with --config sets the same options as 'name = value'\n"
                 "lines (the names above without the dashes) under [%s]; flags take true or\n"
                 "false. The command line wins over the file. See docs/cli.md.\n",
            program_section(program));
}
