/* config.h — every option of scorch-train, scorch-test, scorch-predict
 * and scorch-run.
 *
 * One table drives the command line, the INI file (--config; same names
 * without the dashes, in the [train] section, [test] for scorch-test,
 * [predict] for scorch-predict, [run] for scorch-run), --help, and the resolved config.ini
 * written into the run directory. The
 * command line wins over the INI file, which wins over the defaults.
 * Unknown keys and bad values are errors naming the key (and the file and
 * line for INI).
 */
#ifndef SCORCH_HOST_CONFIG_H
#define SCORCH_HOST_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/param_groups.h"
#include "scorch/status.h"

enum { HOST_PATH_MAX = 4096 };

/* A repeatable path option (--hooks A --hooks B), each path with the
 * arguments given after it (--hooks-args k=v,...; "" for none). */
enum { HOST_MAX_HOOK_PLUGINS = 8 };
typedef struct host_path_list {
    int n;
    char path[HOST_MAX_HOOK_PLUGINS][HOST_PATH_MAX];
    char args[HOST_MAX_HOOK_PLUGINS][1024];
} host_path_list;

/* Bits: the option table marks each option with the programs it has. */
typedef enum host_program {
    HOST_PROGRAM_TRAIN = 1,
    HOST_PROGRAM_TEST = 2,
    HOST_PROGRAM_PREDICT = 4,
    HOST_PROGRAM_RUN = 8,
} host_program;

/* Room for the rows of config.c's option table (it checks that they fit). */
enum { HOST_CONFIG_MAX_OPTIONS = 96 };

/* Where an option got its value (host_config.origin): its default, the
 * command line, or else line N > 0 of the INI file. */
enum { HOST_ORIGIN_DEFAULT = 0, HOST_ORIGIN_COMMAND_LINE = -1 };

typedef struct host_config {
    char model[HOST_PATH_MAX];        /* --model: model plugin .so */
    char dataset[HOST_PATH_MAX];      /* --dataset: dataset plugin .so */
    char dataset_path[HOST_PATH_MAX]; /* --dataset-path */
    char model_args[1024];          /* --model-args k=v,... */
    char dataset_args[1024];        /* --dataset-args k=v,... */
    host_path_list hooks;             /* --hooks: extra hooks plugins .so, repeatable; --hooks-args */
    char config[HOST_PATH_MAX];       /* --config: INI file read ("" none) */
    int epochs;                     /* --epochs (10) */
    int64_t batch_size;             /* --batch-size (128) */
    char optimizer[16];             /* --optimizer sgd|adam|adamw (adam) */
    double lr;                      /* --lr (1e-3) */
    double weight_decay;            /* --weight-decay (the optimizer's: adamw 0.01, else 0) */
    double momentum;                /* --momentum (0; SGD and RMSprop) */
    bool nesterov;                  /* --nesterov (false) */
    double alpha;                   /* --alpha (0.99, RMSprop only) */
    bool centered;                  /* --centered (false, RMSprop only) */
    double beta1, beta2, eps;       /* --beta1 0.9 --beta2 0.999 --eps 1e-8 */
    double ema_decay;               /* --ema-decay D: EMA of the weights (0 = off) */
    bool ema_warmup;                /* --ema-warmup: timm's ModelEmaV3 warm-up of the decay */
    double clip_grad_norm;          /* --clip-grad-norm MAX (0 = off) */
    double clip_grad_value;         /* --clip-grad-value V (0 = off) */
    char no_decay[256];             /* --no-decay WORD,...: weight decay 0 ("" = none) */
    host_param_groups param_groups;   /* INI [params "PATTERN"] sections (param_groups.h) */
    char lr_schedule[16];           /* --lr-schedule constant|step|cosine|plateau */
    int64_t warmup_steps;           /* --warmup-steps (0) */
    int lr_step_epochs;             /* --lr-step-epochs (30) */
    double lr_gamma;                /* --lr-gamma (0.1) */
    double lr_min;                  /* --lr-min (0, cosine) */
    int lr_patience;                /* --lr-patience (10, plateau) */
    double lr_factor;               /* --lr-factor (0.1, plateau) */
    uint64_t seed;                  /* --seed (42) */
    int workers;                    /* --workers (2) */
    int prefetch;                   /* --prefetch (4) */
    int threads;                    /* --threads (0 = all cores) for compute */
    char device[32];                /* --device ("": the model's preference, else cpu) */
    int replicas;                   /* --replicas (0 = one per GPU --device names, else 1) */
    char precision[8];              /* --precision fp32|tf32|bf16 (fp32) */
    char cpu_conv[12];              /* --cpu-conv auto|winograd2|gemm (auto) */
    char cuda_graphs[8];            /* --cuda-graphs auto|on|off (auto) */
    /* data parallelism (docs/distributed.md) */
    int accumulate;                 /* --accumulate N micro-batches per optimizer step (1) */
    double bucket_mb;               /* --bucket-mb: gradient allreduce bucket, MiB (25) */
    double collective_timeout;      /* --collective-timeout seconds (300) */
    bool scale_lr;                  /* --scale-lr: lr times the number of ranks */
    char run_dir[HOST_PATH_MAX];      /* --run-dir (runs/<model>-<time>) */
    bool resume;                    /* --resume given */
    char resume_path[HOST_PATH_MAX];  /* --resume PATH ("" = run dir's last) */
    bool resume_anyway;             /* --resume-anyway: accept changed options */
    int64_t checkpoint_every;       /* --checkpoint-every N steps (0 = per epoch only) */
    int keep_last;                  /* --keep-last (3) */
    char max_time[32];              /* --max-time DURATION: stop with a checkpoint (0 = none) */
    bool tensorboard;               /* --tensorboard: RUN/tensorboard event files (true) */
    int histogram_every;            /* --histogram-every N epochs (1; 0 = never) */
    /* starting weights (docs/weights.md) */
    char init_from[HOST_PATH_MAX];    /* --init-from FILE: .safetensors or checkpoint ("" none) */
    char init_map[1024];            /* --init-map FROM=TO,...: renames of the file's tensors */
    bool init_strict;               /* --init-strict: all tensors present, same shapes (true) */
    char freeze[1024];              /* --freeze GLOB,...: parameters that do not train */
    int64_t max_train_iterations;   /* --max-train-iterations per epoch (0 = all) */
    int64_t max_valid_iterations;   /* --max-valid-iterations (0 = all) */
    int64_t max_test_iterations;    /* --max-test-iterations (0 = all) */
    bool validate_on_train;         /* --validate-on-train: also eval the train split */
    int64_t validate_every_steps;   /* --validate-every-steps N (0 = at epoch ends only) */
    bool drop_last;                 /* --drop-last: skip a short last train batch (true) */
    double mixup, cutmix;           /* --mixup A, --cutmix A: Beta(A, A) mixing (0 = off) */
    double mix_prob;                /* --mix-prob P of mixing a batch (1) */
    double mix_switch_prob;         /* --mix-switch-prob P of CutMix when both are on (0.5) */
    bool quiet;                     /* --quiet: errors and the final summary only */
    bool summary;                   /* --summary: print the model summary and exit */
    bool lr_find;                   /* --lr-find: the LR range test instead of training */
    char lr_find_range[64];         /* --lr-find-range MIN:MAX (1e-7:10) */
    int lr_find_steps;              /* --lr-find-steps N (100) */
    /* scorch-test */
    char checkpoint[HOST_PATH_MAX];   /* --checkpoint PATH */
    char split[16];                 /* --split test|valid|train (test) */
    int topk;                       /* --topk (5) */
    char predictions[HOST_PATH_MAX];  /* --predictions CSV path ("" = none) */
    char confusion[HOST_PATH_MAX];    /* --confusion CSV path ("" = none) */
    char per_class[HOST_PATH_MAX];    /* --per-class CSV path ("" = none) */
    bool ema;                       /* --ema: evaluate the checkpoint's EMA weights */
    /* scorch-predict */
    char input_list[HOST_PATH_MAX];   /* --input-list FILE: a path a line ("-" stdin; "" none) */
    char format[8];                 /* --format auto|text|csv|jsonl (auto) */
    bool raw;                       /* --raw: the outputs, not the top classes */
    char **inputs;                  /* the arguments that are no options, in order (argv's) */
    int n_inputs;
    /* scorch-run */
    char job[HOST_PATH_MAX];          /* --job: job plugin .so */
    char job_args[1024];            /* --job-args k=v,... */
    host_path_list checkpoints;       /* --checkpoint, repeatable: files or run directories */
    /* Per option, in the table's order: HOST_ORIGIN_DEFAULT, _COMMAND_LINE
     * or the INI line that set it. Read it with host_config_user_set. */
    int origin[HOST_CONFIG_MAX_OPTIONS];
} host_config;

void host_config_defaults(host_config *cfg);

/* Whether the user set option `name` (as on the command line, without the
 * dashes), on the command line or in an INI file, rather than leaving it
 * to its default. False for a name that is no option. */
bool host_config_user_set(const host_config *cfg, const char *name);

/* --lr-find-range: "MIN:MAX" with 0 < MIN < MAX. */
sc_status host_config_lr_find_range(const char *text, double *min_lr, double *max_lr);

/* Parses argv: starts from the defaults, reads --config's INI, then
 * applies the command line over it, then checks the result: the required
 * options, options the user set that the chosen optimizer or schedule does
 * not use, and the machine's limits (--threads, --workers).
 * Returns SC_OK, or an error with a message; sets *exit_now (and prints to
 * stdout) for --help and --version. scorch-predict's inputs (the arguments
 * that are no options, anywhere on the line) are moved to the end of argv,
 * in order, as GNU getopt moves them, and cfg->inputs points at them; a
 * flag never takes the argument after it (unless it is true or false,
 * which is refused as for every flag). */
sc_status host_config_parse(host_config *cfg, host_program program, int argc, char **argv,
                          bool *exit_now);

/* Applies an INI file over cfg: `name = value` lines, names as on the
 * command line without the dashes, in the program's section ([train],
 * [test] or [predict]); flags take true or false. Each value is checked
 * alone; the checks across options and against the machine are
 * host_config_parse's, so a configuration saved elsewhere always loads. */
sc_status host_config_load_ini(host_config *cfg, host_program program, const char *path);

/* The same from INI text in memory (a checkpoint's saved config); `name`
 * stands for the file in messages. */
sc_status host_config_load_ini_text(host_config *cfg, host_program program, const char *text,
                                  const char *name);

/* Writes every option of `program` that is in use as a loadable INI file:
 * the options of another optimizer or schedule are left out. */
sc_status host_config_write_ini(const host_config *cfg, host_program program, const char *path);
/* The same text, in memory (caller frees); for comparing ranks' configs. */
sc_status host_config_ini_text(const host_config *cfg, host_program program, char **text);

void host_config_print_help(FILE *out, host_program program);

/* An option whose value differs between the config a checkpoint was
 * trained with and the one resuming it. */
typedef struct host_config_change {
    const char *option; /* its name, as on the command line without dashes */
    const char *was;    /* the checkpoint's value, in INI notation */
    const char *now;
    const char *lost;   /* what the change costs the exact resume */
} host_config_change;
typedef void (*host_config_change_fn)(void *user, const host_config_change *change);

/* Compares the options of scorch-train that may not change on resume
 * (those that may are marked in config.c's table; docs/cli.md lists them):
 * calls fn (when not NULL) for each that differs, in table order, and
 * returns how many do. */
int host_config_resume_changes(const host_config *saved, const host_config *cfg,
                             host_config_change_fn fn, void *user);

/* scorch-test, scorch-predict, scorch-run: copies from `saved` (the
 * config stored in the checkpoint) every option the checkpoint supplies
 * (model, dataset, dataset-path and their args) that cfg leaves empty. */
void host_config_inherit(host_config *cfg, const host_config *saved);

/* "scorch-train", "scorch-test" or "scorch-predict". */
const char *host_program_name(host_program program);

#endif
