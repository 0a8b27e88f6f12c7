/* harness.h — running the real scorch binaries from Criterion tests. */
#ifndef SCORCH_TESTS_HARNESS_H
#define SCORCH_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct run_result {
    int status; /* exit code, or 128 + signal */
    int signal; /* the signal that ended it; 0 when it exited */
    char *out;  /* everything written to stdout */
    char *err;  /* everything written to stderr */
} run_result;

/* Runs argv (NULL-terminated; argv[0] a path) to completion, capturing
 * its output; `env` is NULL or "NAME=value" added to the environment. */
run_result run_program(const char *const *argv, const char *env);

/* The same in two halves, for a test that acts while the program runs:
 * run_start starts it (argv need not outlive the call); run_wait waits for
 * it to end, ending it by SIGKILL after timeout_s seconds when > 0. */
typedef struct run_handle {
    pid_t pid;
    char program[4096];              /* argv[0] */
    char out_path[32], err_path[32]; /* where its output goes meanwhile */
} run_handle;

run_handle run_start(const char *const *argv, const char *env);
run_result run_wait(run_handle *h, double timeout_s);
void run_result_free(run_result *r);

/* SCORCH_BUILD_ROOT/rel; a static buffer per call site is the caller's. */
void build_path(char *buf, size_t size, const char *rel);

/* SCORCH_BUILD_ROOT/rel, and DIR/NAME (dir may be an earlier result), each
 * in one of 8 static buffers used in turn: for building an argv inline. */
const char *built(const char *rel);
const char *in_dir(const char *dir, const char *name);

/* run_program of argv = head (NULL-terminated) then extra (NULL-terminated,
 * or NULL), at most 127 arguments. */
run_result run_joined(const char *const *head, const char *const *extra);

/* argv[n..] = more (NULL-terminated, or NULL) and a NULL after it, at
 * most max entries in all; the new n. */
int argv_append(const char **argv, int n, int max, const char *const *more);

/* The program `name` on PATH into buf, "" when it is not there; returns
 * buf. */
char *find_on_path(const char *name, char *buf, size_t size);

/* argv = `mpirun` for np ranks on a small machine, as root or not, with
 * no binding, the shared-memory transport and OMP_NUM_THREADS=1, `env`
 * NAME=value pairs (NULL-terminated, or NULL) exported to every rank; n,
 * where the program and its arguments go (argv_append). */
int mpirun_argv(const char **argv, int max, const char *mpirun, const char *np,
                const char *const *env);

/* A fresh empty directory under /tmp; returns buf. */
char *temp_dir(char *buf, size_t size);

/* Gives the scorch runs this process starts a GPU lock directory of their
 * own (SCORCH_DEVICE_LOCK_DIR, a fresh one per process): emulated GPUs are
 * private to each process, and test programs run side by side. */
void use_own_gpu_locks(void);

/* A file's bytes plus a NUL, and its size; NULL if unreadable; caller frees. */
char *read_file(const char *path, size_t *size);
char *read_text(const char *path);

/* The numeric field `key` of the metrics.jsonl record for (epoch, phase);
 * NaN when absent. */
double metric_of(const char *run_dir, int epoch, const char *phase, const char *key);

/* Whether two checkpoints hold bit-identical parameters. */
bool same_params(const char *ckpt_a, const char *ckpt_b);

/* The largest difference between the two checkpoints' parameters, per
 * tensor relative to the second's largest magnitude; INFINITY when they
 * hold different tensors. */
double params_rel_diff(const char *ckpt_a, const char *ckpt_b);

#endif
