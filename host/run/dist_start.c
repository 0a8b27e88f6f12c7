/* dist_start.c — what the ranks agree on and share at start-up that
 * needs the run's types (dist_start.h). */
#include "run/dist_start.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/launch.h"
#include "scorch_host/optim.h"

sc_status host_dist_start_replicas(const host_config *cfg, int *replicas)
{
    char device[HOST_PATH_MAX], source[HOST_PATH_MAX + 32];
    SC_TRY(host_session_device_choice(cfg, device, sizeof device, source, sizeof source));
    return host_dist_replicas(cfg, device, source, replicas);
}

/* ---- the start-up comparison ---- */

/* The name of an INI line's option ("name = value"), into buf. */
static void option_name(const char *line, size_t len, char *buf, size_t size)
{
    size_t n = 0;
    while (n < len && n + 1 < size && line[n] != ' ' && line[n] != '=')
        n++;
    memcpy(buf, line, n);
    buf[n] = '\0';
}

/* Options that may rightly differ between ranks or nodes. */
static bool option_per_node(const char *name)
{
    static const char *const names[] = {"model", "dataset", "dataset-path", "hooks",
                                        "run-dir", "resume", "threads", "workers",
                                        "prefetch", "quiet", "collective-timeout",
                                        "job", "checkpoint"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

static sc_status describe_options(FILE *f, const host_config *cfg)
{
    char *ini = NULL;
    /* scorch-run's ranks compare its options, scorch-train's its own. */
    host_program program = cfg->job[0] ? HOST_PROGRAM_RUN : HOST_PROGRAM_TRAIN;
    SC_TRY(host_config_ini_text(cfg, program, &ini));
    for (const char *line = ini; *line;) {
        size_t len = strcspn(line, "\n");
        char name[64];
        option_name(line, len, name, sizeof name);
        if (len && line[0] != ';' && line[0] != '[' && !option_per_node(name))
            fprintf(f, "option %.*s\n", (int)len, line);
        line += len + (line[len] == '\n');
    }
    free(ini);
    return SC_OK;
}

static void describe_params(FILE *f, const sc_params *ps)
{
    fprintf(f, "parameters %d\n", sc_params_count(ps));
    for (int i = 0; i < sc_params_count(ps); i++) {
        const sc_tensor *p = sc_params_at(ps, i);
        fprintf(f, "param %s %s [", p->name, sc_dtype_name(p->dtype));
        for (int k = 0; k < p->ndim; k++)
            fprintf(f, "%s%lld", k ? "," : "", (long long)p->shape[k]);
        fprintf(f, "] %s\n", p->flags & SC_TENSOR_BUFFER          ? "buffer"
                             : p->flags & SC_TENSOR_REQUIRES_GRAD ? "trains"
                                                                  : "frozen");
    }
}

static void describe_plugin(FILE *f, const char *kind, const char *name,
                            const sc_abi_header *abi)
{
    fprintf(f, "%s plugin %s ABI %d.%d size %u\n", kind, name, abi->major, abi->minor,
            abi->size);
}

/* What every rank must have alike, one fact per line. */
static sc_status describe_run(const host_session *s, const host_config *cfg, char **text)
{
    size_t len;
    FILE *f = open_memstream(text, &len);
    if (!f)
        return sc_error_set(SC_ERR_NOMEM, "out of memory describing the run");
    fprintf(f, "host plugin ABI %d.%d\n", SC_ABI_MAJOR, SC_ABI_MINOR);
    if (s->model.api) /* a job may have no model, or no dataset either */
        describe_plugin(f, "model", s->model.api->name, &s->model.api->abi);
    if (s->data.api) {
        describe_plugin(f, "dataset", s->data.api->name, &s->data.api->abi);
        for (int k = 0; k < SC_SPLIT_COUNT; k++)
            fprintf(f, "split %s has %lld samples\n", sc_split_name((sc_split)k),
                    (long long)host_session_split_len(s, (sc_split)k));
    }
    sc_status st = describe_options(f, cfg);
    if (s->params)
        describe_params(f, s->params);
    if (fclose(f) != 0 && st == SC_OK)
        st = sc_error_set(SC_ERR_NOMEM, "out of memory describing the run");
    return st;
}

/* The first line where this rank's description differs from rank 0's. */
static sc_status compare_runs(const host_dist *d, const char *mine, const char *root)
{
    while (*mine || *root) {
        size_t a = strcspn(mine, "\n"), b = strcspn(root, "\n");
        if (a != b || memcmp(mine, root, a) != 0)
            return sc_error_set(SC_ERR_INVALID,
                                "the ranks disagree: rank %d has '%.*s', rank 0 has '%.*s' "
                                "(every rank must run the same plugins, data and options)",
                                host_dist_rank(d), (int)(a ? a : 7), a ? mine : "nothing",
                                (int)(b ? b : 7), b ? root : "nothing");
        mine += a + (mine[a] == '\n');
        root += b + (root[b] == '\n');
    }
    return SC_OK;
}

sc_status host_dist_start_verify(host_dist *d, const host_session *s, const host_config *cfg)
{
    if (host_dist_world(d) == 1) /* nothing to compare with */
        return SC_OK;
    char *mine = NULL, *root = NULL;
    size_t size = 0;
    sc_status st = describe_run(s, cfg, &mine);
    st = host_dist_share_bytes(d, st, mine, mine ? strlen(mine) : 0, &root, &size,
                               "the start-up comparison");
    if (st == SC_OK)
        st = compare_runs(d, mine, root);
    free(mine);
    free(root);
    return host_dist_check(d, st);
}

/* ---- rank 0's state ---- */

sc_status host_dist_start_state(host_dist *d, sc_ctx *ctx, sc_params *params, sc_optim *opt,
                                host_train_state *state)
{
    SC_TRY(host_dist_start(d, ctx, params, opt));
    SC_TRY(host_dist_share(d, state, sizeof *state, "the broadcast of rank 0's position"));
    if (host_dist_is_root(d))
        return SC_OK;
    if (opt)
        sc_optim_set_steps(opt, state->step);
    state->loss_sum = 0;
    state->samples = 0;
    return SC_OK;
}

/* ---- the hooks' blobs ---- */

/* The hooks' blobs as rank 0 sends them: per blob, the hook's name and its
 * NUL, the size (a size_t), the bytes. */
static sc_status pack_blobs(const host_hook_blobs *blobs, char **text, size_t *len)
{
    FILE *f = open_memstream(text, len);
    for (int i = 0; f && i < blobs->n; i++) {
        const host_hook_blob *b = &blobs->items[i];
        fwrite(b->hook, 1, strlen(b->hook) + 1, f);
        fwrite(&b->size, sizeof b->size, 1, f);
        fwrite(b->data, 1, b->size, f);
    }
    if (!f || fclose(f) != 0)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the hooks' state");
    return SC_OK;
}

static sc_status unpack_blobs(const char *p, size_t len, host_hook_blobs *blobs)
{
    host_hook_blobs_clear(blobs);
    for (const char *end = p + len; p < end;) {
        const char *name = p;
        size_t size;
        p += strlen(name) + 1;
        memcpy(&size, p, sizeof size);
        p += sizeof size;
        SC_TRY(host_hook_blobs_put(blobs, name, p, size));
        p += size;
    }
    return SC_OK;
}

sc_status host_dist_start_blobs(host_dist *d, host_hook_blobs *blobs)
{
    if (host_dist_world(d) == 1) /* rank 0's are here */
        return SC_OK;
    char *mine = NULL, *root = NULL;
    size_t len = 0, size = 0;
    bool root_rank = host_dist_is_root(d);
    sc_status st = root_rank ? pack_blobs(blobs, &mine, &len) : SC_OK;
    st = host_dist_share_bytes(d, st, mine, len, &root, &size,
                               "the broadcast of the hooks' state");
    if (st == SC_OK && !root_rank)
        st = unpack_blobs(root, size, blobs);
    free(mine);
    free(root);
    return st;
}

/* ---- resuming ---- */

void host_dist_start_position(const host_dist *d, const host_config *cfg,
                              host_train_state *saved, int64_t batches, const char *path)
{
    int was = saved->world, now = host_dist_world(d);
    saved->world = now;
    if (was == now)
        return;
    if (saved->next_batch == 0) {
        fprintf(stderr, "%sscorch-train: note: %s was saved by %d rank%s, resuming with %d: "
                "the global batch is now %lld\n", host_log_prefix(), path, was,
                was == 1 ? "" : "s", now, (long long)(cfg->batch_size * now));
        return;
    }
    /* The ranks of `was` trained the first next_batch * was batches of the
     * epoch's order; this world goes on from the first step that none of
     * them reached. */
    int64_t done, whole = batches * now; /* the epoch, in this world's batches */
    if (!sc_mul_i64(saved->next_batch, was, &done) || done > whole)
        done = whole; /* past this world's epoch: its end, like the clamp below */
    int64_t next = (done + now - 1) / now;
    next += (cfg->accumulate - next % cfg->accumulate) % cfg->accumulate;
    if (next > batches)
        next = batches;
    int64_t skipped = next * now - done;
    fprintf(stderr, "%sscorch-train: note: %s was saved by %d rank%s at batch %lld of epoch "
            "%d, resuming with %d rank%s at batch %lld (%lld samples skipped)\n",
            host_log_prefix(), path, was, was == 1 ? "" : "s", (long long)saved->next_batch,
            saved->epoch, now, now == 1 ? "" : "s", (long long)next,
            (long long)(skipped > 0 ? skipped * cfg->batch_size : 0));
    saved->next_batch = next;
}

void host_dist_start_describe(const host_dist *d, const host_config *cfg, host_run_log *log)
{
    char line[HOST_DIST_LINE_MAX];
    if (host_dist_describe(d, cfg, line, sizeof line))
        host_run_log_info(log, "%s", line);
}
