/* config.h — every option of scorch-train and scorch-test.
 *
 * One table drives the command line, the INI file (--config; same names
 * without the dashes, in the [train] section, or [test] for scorch-test),
 * --help, and the resolved config.ini written into the run directory. The
 * command line wins over the INI file, which wins over the defaults.
 * Unknown keys and bad values are errors naming the key (and the file and
 * line for INI).
 */
#ifndef SCORCH_HOST_CONFIG_H
#define SCORCH_HOST_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "param_groups.h"
#include "scorch/status.h"

enum { SC_PATH_MAX = 4096 };

/* A repeatable path option (--hooks A --hooks B), each path with the
 * arguments given after it (--hooks-args k=v,...; "" for none). */
enum { SC_MAX_HOOK_PLUGINS = 8 };
typedef struct sc_path_list {
    int n;
    char path[SC_MAX_HOOK_PLUGINS][SC_PATH_MAX];
    char args[SC_MAX_HOOK_PLUGINS][1024];
} sc_path_list;

typedef enum sc_program { SC_PROGRAM_TRAIN = 1, SC_PROGRAM_TEST = 2 } sc_program;

/* Room for the rows of config.c's option table (it checks that they fit). */
enum { SC_CONFIG_MAX_OPTIONS = 96 };

/* Where an option got its value (sc_config.origin): its default, the
 * command line, or else line N > 0 of the INI file. */
enum { SC_ORIGIN_DEFAULT = 0, SC_ORIGIN_COMMAND_LINE = -1 };

typedef struct sc_config {
    char model[SC_PATH_MAX];        /* --model: model plugin .so */
    char dataset[SC_PATH_MAX];      /* --dataset: dataset plugin .so */
    char dataset_path[SC_PATH_MAX]; /* --dataset-path */
    char model_args[1024];          /* --model-args k=v,... */
    char dataset_args[1024];        /* --dataset-args k=v,... */
    sc_path_list hooks;             /* --hooks: extra hooks plugins .so, repeatable; --hooks-args */
    char config[SC_PATH_MAX];       /* --config: INI file read ("" none) */
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
    sc_param_groups param_groups;   /* INI [params "PATTERN"] sections (param_groups.h) */
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
    char cuda_graphs[8];            /* --cuda-graphs auto|on|off (auto) */
    /* data parallelism (docs/distributed.md) */
    int accumulate;                 /* --accumulate N micro-batches per optimizer step (1) */
    double bucket_mb;               /* --bucket-mb: gradient allreduce bucket, MiB (25) */
    double collective_timeout;      /* --collective-timeout seconds (300) */
    bool scale_lr;                  /* --scale-lr: lr times the number of ranks */
    char run_dir[SC_PATH_MAX];      /* --run-dir (runs/<model>-<time>) */
    bool resume;                    /* --resume given */
    char resume_path[SC_PATH_MAX];  /* --resume PATH ("" = run dir's last) */
    bool resume_anyway;             /* --resume-anyway: accept changed options */
    int64_t checkpoint_every;       /* --checkpoint-every N steps (0 = per epoch only) */
    int keep_last;                  /* --keep-last (3) */
    char max_time[32];              /* --max-time DURATION: stop with a checkpoint (0 = none) */
    bool tensorboard;               /* --tensorboard: RUN/tensorboard event files (true) */
    int histogram_every;            /* --histogram-every N epochs (1; 0 = never) */
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
    char checkpoint[SC_PATH_MAX];   /* --checkpoint PATH */
    char split[16];                 /* --split test|valid|train (test) */
    int topk;                       /* --topk (5) */
    char predictions[SC_PATH_MAX];  /* --predictions CSV path ("" = none) */
    char confusion[SC_PATH_MAX];    /* --confusion CSV path ("" = none) */
    char per_class[SC_PATH_MAX];    /* --per-class CSV path ("" = none) */
    bool ema;                       /* --ema: evaluate the checkpoint's EMA weights */
    /* Per option, in the table's order: SC_ORIGIN_DEFAULT, _COMMAND_LINE
     * or the INI line that set it. Read it with sc_config_user_set. */
    int origin[SC_CONFIG_MAX_OPTIONS];
} sc_config;

void sc_config_defaults(sc_config *cfg);

/* Whether the user set option `name` (as on the command line, without the
 * dashes), on the command line or in an INI file, rather than leaving it
 * to its default. False for a name that is no option. */
bool sc_config_user_set(const sc_config *cfg, const char *name);

/* Parses argv: starts from the defaults, reads --config's INI, then
 * applies the command line over it, then checks the result: the required
 * options, options the user set that the chosen optimizer or schedule does
 * not use, and the machine's limits (--threads, --workers).
 * Returns SC_OK, or an error with a message; sets *exit_now (and prints to
 * stdout) for --help and --version. */
sc_status sc_config_parse(sc_config *cfg, sc_program program, int argc, char **argv,
                          bool *exit_now);

/* Applies an INI file over cfg: `name = value` lines, names as on the
 * command line without the dashes, in section [train] (scorch-train) or
 * [test] (scorch-test); flags take true or false. Each value is checked
 * alone; the checks across options and against the machine are
 * sc_config_parse's, so a configuration saved elsewhere always loads. */
sc_status sc_config_load_ini(sc_config *cfg, sc_program program, const char *path);

/* The same from INI text in memory (a checkpoint's saved config); `name`
 * stands for the file in messages. */
sc_status sc_config_load_ini_text(sc_config *cfg, sc_program program, const char *text,
                                  const char *name);

/* Writes every option of `program` that is in use as a loadable INI file:
 * the options of another optimizer or schedule are left out. */
sc_status sc_config_write_ini(const sc_config *cfg, sc_program program, const char *path);
/* The same text, in memory (caller frees); for comparing ranks' configs. */
sc_status sc_config_ini_text(const sc_config *cfg, sc_program program, char **text);

void sc_config_print_help(FILE *out, sc_program program);

/* An option whose value differs between the config a checkpoint was
 * trained with and the one resuming it. */
typedef struct sc_config_change {
    const char *option; /* its name, as on the command line without dashes */
    const char *was;    /* the checkpoint's value, in INI notation */
    const char *now;
    const char *lost;   /* what the change costs the exact resume */
} sc_config_change;
typedef void (*sc_config_change_fn)(void *user, const sc_config_change *change);

/* Compares the options of scorch-train that may not change on resume
 * (those that may are marked in config.c's table; docs/cli.md lists them):
 * calls fn (when not NULL) for each that differs, in table order, and
 * returns how many do. */
int sc_config_resume_changes(const sc_config *saved, const sc_config *cfg,
                             sc_config_change_fn fn, void *user);

/* scorch-test: copies from `saved` (the config stored in the checkpoint)
 * every option the checkpoint supplies — model, dataset, dataset-path and
 * their args — that cfg leaves empty. */
void sc_config_inherit(sc_config *cfg, const sc_config *saved);

/* The shortest %g text that reads back as v. */
void sc_format_double(double v, char *buf, size_t n);

/* "scorch-train" or "scorch-test". */
const char *sc_program_name(sc_program program);

/* The name in names[0..n) nearest to word by edit distance, when close
 * enough to be a likely typo; else NULL. For "did you mean" hints (options,
 * INI keys, hook points). */
const char *sc_name_suggest(const char *word, const char *const *names, int n);

#endif
