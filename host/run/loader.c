/* loader.c — worker threads fill a ring of batch slots, in order.
 *
 * Work is handed out in chunks of rows: a claim cursor (claim_batch,
 * claim_j) walks the epoch's batches row by row; a worker takes the next
 * chunk of the batch under the cursor once that batch's slot is free,
 * fills it with the lock released, and counts it done. A slot becomes
 * READY when its last row is written; the consumer takes slots strictly in
 * batch order and gives them back with host_loader_release. Every wait is on
 * a condition variable: workers wait on work_cv for a free slot or a new
 * epoch, the consumer on done_cv for its batch or for workers to park.
 *
 * Everything below the "state" comment of host_loader is guarded by mu.
 */
#define _GNU_SOURCE /* SCHED_BATCH */
#include "run/loader.h"

#include "base/crash.h"
#include "scorch_host/device.h"
#include "scorch_host/dist.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum host_slot_state {
    HOST_SLOT_FREE,    /* no batch, or one the consumer released */
    HOST_SLOT_FILLING, /* claimed; rows still being written */
    HOST_SLOT_READY,   /* every row written (or its batch failed) */
    HOST_SLOT_OUT,     /* handed to the consumer */
} host_slot_state;

typedef struct host_slot {
    host_batch batch; /* tensors are [batch_size, ...]; shape[0] = batch.size */
    host_slot_state state;
    int64_t remaining; /* rows not yet written */
} host_slot;

/* Rows [begin, end) of one slot's batch, claimed by one thread. */
typedef struct host_chunk {
    host_slot *slot;
    int64_t begin, end;
} host_chunk;

enum { HOST_LOADER_MESSAGE_MAX = 1024 };

struct host_loader {
    const sc_dataset_plugin *plugin;
    const char *plugin_file; /* for messages and crash reports */
    void *dataset;
    const sc_host_dist *dist; /* the consumer's rank, which workers answer for */
    sc_split split;
    host_loader_config config;
    sc_sample_spec spec;
    int64_t len;       /* dataset length */
    int64_t n_samples; /* this rank's samples per epoch */
    int64_t n_batches;
    int64_t chunk;     /* rows per claim */
    /* Written by the consumer only while workers are parked (between
     * host_loader_stop_epoch and the start of the next epoch): */
    uint64_t epoch;
    int64_t *perm;  /* scratch: the whole epoch order [len] */
    int64_t *order; /* this rank's dataset indices [n_samples] */
    int n_slots;
    host_slot *slots;
    int n_threads; /* started (and to be joined) */
    pthread_t *threads;

    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* workers: work may be available, or quit */
    pthread_cond_t done_cv; /* consumer: a slot is ready, or workers parked */

    /* state */
    bool started;  /* an epoch was started and not stopped */
    bool running;  /* workers may claim */
    bool quit;     /* workers exit */
    int busy;      /* chunks claimed and not yet completed */
    int64_t next_out;    /* next batch for the consumer */
    int64_t claim_batch; /* claim cursor: batch ... */
    int64_t claim_j;     /* ... and row */
    int64_t fail_batch;  /* lowest failed (batch, row); INT64_MAX: none */
    int64_t fail_j;
    char fail_message[HOST_LOADER_MESSAGE_MAX];
};

static host_slot *host_loader_slot(host_loader *loader, int64_t batch)
{
    return &loader->slots[batch % loader->n_slots];
}

/* ---- setup --------------------------------------------------------- */

static sc_status host_loader_config_check(const host_loader_config *c)
{
    if (c->batch_size < 1)
        return sc_error_set(SC_ERR_INVALID, "loader: batch size must be >= 1, not %lld",
                            (long long)c->batch_size);
    if (c->workers < 0 || c->prefetch < 1)
        return sc_error_set(SC_ERR_INVALID,
                            "loader: need workers >= 0 and prefetch >= 1, not %d and %d",
                            c->workers, c->prefetch);
    if (c->world < 1 || c->rank < 0 || c->rank >= c->world)
        return sc_error_set(SC_ERR_INVALID, "loader: rank %d outside world of %d",
                            c->rank, c->world);
    return SC_OK;
}

/* The split's batches, the last of them maybe short; rounded up without
 * len + b - 1, which --batch-size near 2^63 overflows. */
static int64_t batches_of(int64_t len, int64_t batch_size)
{
    return len / batch_size + (len % batch_size != 0);
}

/* With whole_batches: batches rank, rank + world, ... of the split; only
 * the split's last batch, when it is this rank's, may be short. */
static int64_t rank_whole_batch_samples(int64_t len, const host_loader_config *c)
{
    int64_t total = batches_of(len, c->batch_size);
    int64_t mine = total > c->rank ? (total - c->rank + c->world - 1) / c->world : 0;
    int64_t short_by = total * c->batch_size - len;
    return mine * c->batch_size - ((total - 1) % c->world == c->rank ? short_by : 0);
}

/* The per-rank sample count; see the header for the rule. */
static int64_t host_loader_rank_samples(int64_t len, const host_loader_config *c)
{
    if (c->whole_batches)
        return rank_whole_batch_samples(len, c);
    if (c->drop_last) {
        int64_t n = len / c->world;
        return n - n % c->batch_size;
    }
    return len > c->rank ? (len - c->rank + c->world - 1) / c->world : 0;
}

/* Allocates [batch_size, ...spec] tensors for one side (inputs or
 * targets) of one slot. */
static sc_status host_loader_alloc_list(const sc_tensor_spec *specs, int n, int64_t batch_size,
                                      bool pinned, sc_tensor_list *list)
{
    list->n = n;
    for (int k = 0; k < n; k++) {
        int64_t shape[SC_MAX_DIMS] = {batch_size};
        memcpy(shape + 1, specs[k].shape, (size_t)specs[k].ndim * sizeof shape[0]);
        list->t[k] = pinned ? sc_tensor_alloc_pinned(specs[k].dtype, specs[k].ndim + 1, shape)
                            : sc_tensor_alloc(specs[k].dtype, specs[k].ndim + 1, shape);
        if (!list->t[k])
            return sc_error_wrap(sc_error_code(), "--batch-size %lld: the loader's batch "
                                 "buffers", (long long)batch_size);
    }
    return SC_OK;
}

/* One side of the spec: a count the batch lists can hold, and tensors
 * that fit one more (batch) dimension. */
static sc_status host_loader_side_check(const sc_tensor_spec *specs, int n, const char *side,
                                      const char *dataset)
{
    if (n < 0 || n > SC_MAX_IO)
        return sc_error_set(SC_ERR_PLUGIN, "dataset %s: %d %s, at most %d", dataset, n, side,
                            SC_MAX_IO);
    for (int k = 0; k < n; k++) {
        const sc_tensor_spec *t = &specs[k];
        bool dims_ok = t->ndim >= 0 && t->ndim < SC_MAX_DIMS;
        for (int d = 0; dims_ok && d < t->ndim; d++)
            dims_ok = t->shape[d] >= 0;
        if (!dims_ok || sc_dtype_size(t->dtype) == 0)
            return sc_error_set(SC_ERR_PLUGIN,
                                "dataset %s: %s %d: bad dtype %d or shape of %d dimensions "
                                "(at most %d)",
                                dataset, side, k, (int)t->dtype, t->ndim, SC_MAX_DIMS - 1);
    }
    return SC_OK;
}

static sc_status host_loader_alloc(host_loader *loader)
{
    const host_loader_config *c = &loader->config;
    loader->slots = calloc((size_t)c->prefetch + 1, sizeof *loader->slots);
    loader->perm = malloc((size_t)(loader->len ? loader->len : 1) * sizeof *loader->perm);
    loader->order =
        malloc((size_t)(loader->n_samples ? loader->n_samples : 1) * sizeof *loader->order);
    loader->threads = calloc((size_t)(c->workers ? c->workers : 1), sizeof *loader->threads);
    if (!loader->slots || !loader->perm || !loader->order || !loader->threads)
        return sc_error_set(SC_ERR_NOMEM, "loader: out of memory");
    loader->n_slots = c->prefetch + 1;
    bool fences = c->pinned && c->gpu.kind == SC_DEVICE_CUDA;
    for (int s = 0; s < loader->n_slots; s++) {
        host_batch *b = &loader->slots[s].batch;
        SC_TRY(host_loader_alloc_list(loader->spec.inputs, loader->spec.n_inputs,
                                    c->batch_size, c->pinned, &b->inputs));
        SC_TRY(host_loader_alloc_list(loader->spec.targets, loader->spec.n_targets,
                                    c->batch_size, c->pinned, &b->targets));
        if (fences && !(b->uploaded = sc_fence_new(c->gpu)))
            return sc_error_wrap(sc_error_code(), "loader: upload fence");
    }
    return SC_OK;
}

static void *host_loader_worker(void *arg);

/* A failure names the option that asks for the threads: the system's limit
 * (memory for their stacks, ulimit -u, a container's pids.max) is below the
 * --workers bound, which knows only the cores. */
static sc_status host_loader_start_threads(host_loader *loader)
{
    int workers = loader->config.workers;
    for (int w = 0; w < workers; w++) {
        int err = pthread_create(&loader->threads[w], NULL, host_loader_worker, loader);
        if (err)
            return sc_error_set(SC_ERR_NOMEM, "--workers %d: cannot start data-loader thread "
                                "%d: %s (%d started; lower --workers)", workers, w + 1,
                                strerror(err), w);
        loader->n_threads++;
    }
    return SC_OK;
}

/* Reads the dataset's shape, checks it, allocates and starts workers.
 * Thread rule: consumer thread, inside host_loader_new. */
static sc_status host_loader_init(host_loader *loader)
{
    const sc_dataset_plugin *plugin = loader->plugin;
    const host_loader_config *c = &loader->config;
    HOST_PLUGIN_CALL(loader->plugin_file, "dataset_len",
                   loader->len = plugin->dataset_len(loader->dataset));
    if (loader->len < 0)
        return sc_error_set(SC_ERR_PLUGIN, "dataset %s: %s split has negative length %lld",
                            plugin->name, sc_split_name(loader->split), (long long)loader->len);
    HOST_PLUGIN_CALL(loader->plugin_file, "dataset_spec",
                   plugin->dataset_spec(loader->dataset, &loader->spec));
    SC_TRY(host_loader_side_check(loader->spec.inputs, loader->spec.n_inputs, "inputs",
                                plugin->name));
    SC_TRY(host_loader_side_check(loader->spec.targets, loader->spec.n_targets, "targets",
                                plugin->name));
    loader->n_samples = host_loader_rank_samples(loader->len, c);
    loader->n_batches = batches_of(loader->n_samples, c->batch_size);
    /* About two claims per worker per batch: balanced, yet few lock trips. */
    int64_t pieces = 2 * (int64_t)(c->workers ? c->workers : 1);
    loader->chunk = c->batch_size / pieces + (c->batch_size % pieces != 0);
    SC_TRY(host_loader_alloc(loader));
    return host_loader_start_threads(loader);
}

/* Thread rule: consumer thread. */
sc_status host_loader_new(const sc_dataset_plugin *plugin, void *dataset, sc_split split,
                        const host_loader_config *config, host_loader **out)
{
    *out = NULL;
    SC_TRY(host_loader_config_check(config));
    host_loader *loader = calloc(1, sizeof *loader);
    if (!loader)
        return sc_error_set(SC_ERR_NOMEM, "loader: out of memory");
    /* Default attributes: on POSIX these inits cannot fail. */
    pthread_mutex_init(&loader->mu, NULL);
    pthread_cond_init(&loader->work_cv, NULL);
    pthread_cond_init(&loader->done_cv, NULL);
    loader->plugin = plugin;
    loader->plugin_file = config->plugin_file ? config->plugin_file : plugin->name;
    loader->dataset = dataset;
    loader->dist = sc_host_dist_current();
    loader->split = split;
    loader->config = *config;
    loader->fail_batch = INT64_MAX;
    sc_status status = host_loader_init(loader);
    if (status != SC_OK) {
        host_loader_free(loader);
        return status;
    }
    *out = loader;
    return SC_OK;
}

/* Also frees a loader that host_loader_new left half built. Thread rule:
 * consumer thread. */
void host_loader_free(host_loader *loader)
{
    if (!loader)
        return;
    host_loader_stop_epoch(loader);
    pthread_mutex_lock(&loader->mu);
    loader->quit = true;
    pthread_cond_broadcast(&loader->work_cv);
    pthread_mutex_unlock(&loader->mu);
    for (int w = 0; w < loader->n_threads; w++)
        pthread_join(loader->threads[w], NULL);
    for (int s = 0; s < loader->n_slots; s++) {
        host_batch *b = &loader->slots[s].batch;
        if (b->uploaded) /* an upload may still read the buffers */
            sc_fence_wait(b->uploaded);
        sc_fence_free(b->uploaded);
        for (int k = 0; k < b->inputs.n; k++)
            sc_tensor_free(b->inputs.t[k]);
        for (int k = 0; k < b->targets.n; k++)
            sc_tensor_free(b->targets.t[k]);
    }
    pthread_cond_destroy(&loader->done_cv);
    pthread_cond_destroy(&loader->work_cv);
    pthread_mutex_destroy(&loader->mu);
    free(loader->threads);
    free(loader->slots);
    free(loader->order);
    free(loader->perm);
    free(loader);
}

/* Thread rule for the three accessors: any thread; the values are fixed
 * at host_loader_new. */
int64_t host_loader_batches(const host_loader *loader) { return loader->n_batches; }

int64_t host_loader_samples(const host_loader *loader) { return loader->n_samples; }

const sc_sample_spec *host_loader_spec(const host_loader *loader) { return &loader->spec; }

/* ---- filling ------------------------------------------------------- */

/* Sets up the slot for batch `index` and marks it FILLING. Thread rule:
 * mu held. */
static void host_loader_issue(host_loader *loader, host_slot *slot, int64_t index)
{
    int64_t bs = loader->config.batch_size;
    host_batch *b = &slot->batch;
    b->index = index;
    b->size = loader->n_samples - index * bs < bs ? loader->n_samples - index * bs : bs;
    b->samples = loader->order + index * bs;
    sc_tensor_list *lists[2] = {&b->inputs, &b->targets};
    for (int side = 0; side < 2; side++)
        for (int k = 0; k < lists[side]->n; k++) {
            sc_tensor *t = lists[side]->t[k];
            t->numel = t->numel / t->shape[0] * b->size;
            t->shape[0] = b->size;
        }
    slot->remaining = b->size;
    slot->state = HOST_SLOT_FILLING;
}

/* Takes the next chunk of rows under the claim cursor, if its slot is
 * free (or already being filled). Thread rule: mu held. */
static bool host_loader_claim(host_loader *loader, host_chunk *chunk)
{
    int64_t b = loader->claim_batch;
    if (!loader->running || b >= loader->n_batches || b > loader->fail_batch)
        return false;
    host_slot *slot = host_loader_slot(loader, b);
    if (loader->claim_j == 0) {
        if (slot->state != HOST_SLOT_FREE)
            return false;
        host_loader_issue(loader, slot, b);
    }
    chunk->slot = slot;
    chunk->begin = loader->claim_j;
    chunk->end = chunk->begin + loader->chunk < slot->batch.size
                     ? chunk->begin + loader->chunk
                     : slot->batch.size;
    loader->claim_j = chunk->end;
    if (loader->claim_j == slot->batch.size) {
        loader->claim_batch++;
        loader->claim_j = 0;
    }
    loader->busy++;
    return true;
}

/* A header for row j of a batch tensor: the same storage, one dim less. */
static void host_loader_row(const sc_tensor *batch, int64_t j, sc_tensor *row)
{
    *row = (sc_tensor){.dtype = batch->dtype, .ndim = batch->ndim - 1, .device = batch->device};
    memcpy(row->shape, batch->shape + 1, (size_t)row->ndim * sizeof row->shape[0]);
    row->numel = batch->numel / batch->shape[0];
    row->data = (char *)batch->data + j * row->numel * (int64_t)sc_dtype_size(batch->dtype);
}

static void host_loader_rows(const sc_tensor_list *batch, int64_t j, sc_tensor *rows,
                           sc_tensor_list *list)
{
    list->n = batch->n;
    for (int k = 0; k < batch->n; k++) {
        host_loader_row(batch->t[k], j, &rows[k]);
        list->t[k] = &rows[k];
    }
}

/* Calls getitem for each row of the chunk, under one plugin-call marker
 * that names each sample, stopping at the first failure: its row in
 * *failed_j, the message naming the plugin file and the sample. The
 * thread is marked as a loader's meanwhile (a worker, or the consumer
 * with --workers 0), which refuses getitem the collectives of
 * scorch/dist.h. Thread rule: mu NOT held; the chunk's rows are this
 * thread's alone. */
static sc_status host_loader_fill(const host_loader *loader, const host_chunk *chunk,
                                int64_t *failed_j)
{
    const host_batch *b = &chunk->slot->batch;
    sc_tensor in_rows[SC_MAX_IO], tgt_rows[SC_MAX_IO];
    sc_tensor_list inputs, targets;
    /* The slot's last batch may still be on its way to the GPU. A failed
     * wait means the GPU failed, which the step reports. */
    if (b->uploaded)
        sc_fence_wait(b->uploaded);
    host_plugin_call call = {.plugin = loader->plugin_file, .function = "dataset_getitem",
                           .split = sc_split_name(loader->split)};
    bool was_loader = sc_host_set_loader_thread(true);
    const host_plugin_call *outer = host_plugin_call_enter(&call);
    sc_status status = SC_OK;
    for (int64_t j = chunk->begin; j < chunk->end; j++) {
        int64_t i = b->samples[j];
        sc_rng rng;
        sc_rng_init(&rng, loader->config.seed, sc_rng_mix(loader->epoch, (uint64_t)i));
        host_loader_rows(&b->inputs, j, in_rows, &inputs);
        host_loader_rows(&b->targets, j, tgt_rows, &targets);
        call.sample = i;
        status = loader->plugin->dataset_getitem(loader->dataset, i, &rng, &inputs, &targets);
        if (status != SC_OK) {
            *failed_j = j;
            break;
        }
    }
    host_plugin_call_leave(outer);
    sc_host_set_loader_thread(was_loader);
    if (status == SC_OK)
        return SC_OK;
    sc_error_wrap(status, "%s sample %lld", call.split, (long long)call.sample);
    return host_plugin_failed(status, call.plugin, call.function);
}

/* Counts a filled chunk; keeps the first failure in batch order, with its
 * message taken from this thread's error slot. Thread rule: mu held, by
 * the thread that filled the chunk. */
static void host_loader_complete(host_loader *loader, const host_chunk *chunk, sc_status status,
                               int64_t failed_j)
{
    host_slot *slot = chunk->slot;
    int64_t b = slot->batch.index;
    if (status != SC_OK &&
        (b < loader->fail_batch || (b == loader->fail_batch && failed_j < loader->fail_j))) {
        loader->fail_batch = b;
        loader->fail_j = failed_j;
        snprintf(loader->fail_message, sizeof loader->fail_message, "%s", sc_error_message());
    }
    slot->remaining -= chunk->end - chunk->begin;
    if (slot->remaining == 0)
        slot->state = HOST_SLOT_READY;
    loader->busy--;
    if (slot->remaining == 0 || (loader->busy == 0 && !loader->running))
        pthread_cond_signal(&loader->done_cv);
}

/* Claims, fills and completes one chunk; false when there is nothing to
 * claim. Thread rule: mu held on entry and on return, released while
 * getitem runs. */
static bool host_loader_work(host_loader *loader)
{
    host_chunk chunk;
    if (!host_loader_claim(loader, &chunk))
        return false;
    pthread_mutex_unlock(&loader->mu);
    int64_t failed_j = 0;
    sc_status status = host_loader_fill(loader, &chunk, &failed_j);
    pthread_mutex_lock(&loader->mu);
    host_loader_complete(loader, &chunk, status, failed_j);
    return true;
}

/* A worker wakes at every step, when the consumer frees a slot. Under the
 * default policy the kernel may hand it the core of a compute thread at
 * once, in the middle of a parallel region, whose other threads then wait
 * for that one. SCHED_BATCH ("CPU-intensive, non-interactive", sched(7))
 * keeps its share of the CPU but takes no core by waking: it runs in the
 * compute threads' gaps or when the running thread's slice ends. The mlp
 * (--threads 2, batch 128) beside one busy loop on 2 cores: 44,000 ->
 * 78,000 samples/s; idle, no change. SCHED_IDLE, which would also wait for
 * idle cores, starves the worker while other work fills them. A kernel
 * that refuses the policy leaves the default, which only costs speed. */
static void host_loader_yield_cores(void)
{
    struct sched_param param = {.sched_priority = 0};
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
}

/* Thread rule: a worker thread, until quit. It has an alternate signal
 * stack of its own, so that a getitem that overflows its stack is still
 * reported (crash.h), and answers for its consumer's rank (scorch/dist.h). */
static void *host_loader_worker(void *arg)
{
    host_loader *loader = arg;
    host_crash_thread_begin();
    sc_host_set_dist(loader->dist);
    host_loader_yield_cores();
    pthread_mutex_lock(&loader->mu);
    while (!loader->quit)
        if (!host_loader_work(loader))
            pthread_cond_wait(&loader->work_cv, &loader->mu);
    pthread_mutex_unlock(&loader->mu);
    host_crash_thread_end();
    return NULL;
}

/* ---- epochs -------------------------------------------------------- */

/* This rank's dataset indices for the epoch, by the header's rule.
 * Thread rule: consumer thread, workers parked. */
static void host_loader_plan(host_loader *loader)
{
    const host_loader_config *c = &loader->config;
    for (int64_t i = 0; i < loader->len; i++)
        loader->perm[i] = i;
    if (c->shuffle) {
        sc_rng rng;
        sc_rng_init(&rng, c->seed, sc_rng_mix(loader->epoch, HOST_LOADER_SAMPLER_STREAM));
        for (int64_t i = loader->len - 1; i > 0; i--) {
            int64_t j = (int64_t)sc_rng_below(&rng, (uint64_t)i + 1);
            int64_t t = loader->perm[i];
            loader->perm[i] = loader->perm[j];
            loader->perm[j] = t;
        }
    }
    if (c->whole_batches) /* local batch b is the split's batch rank + b * world */
        for (int64_t k = 0; k < loader->n_samples; k++)
            loader->order[k] = loader->perm[(c->rank + k / c->batch_size * c->world) *
                                                c->batch_size + k % c->batch_size];
    else
        for (int64_t k = 0; k < loader->n_samples; k++)
            loader->order[k] = loader->perm[c->rank + k * c->world];
}

/* Thread rule: consumer thread. */
sc_status host_loader_start_epoch(host_loader *loader, int epoch, int64_t first_batch)
{
    if (epoch < 1 || first_batch < 0 || first_batch > loader->n_batches)
        return sc_error_set(SC_ERR_INVALID,
                            "loader: cannot start epoch %d at batch %lld of %lld", epoch,
                            (long long)first_batch, (long long)loader->n_batches);
    host_loader_stop_epoch(loader);
    loader->epoch = (uint64_t)epoch;
    host_loader_plan(loader);
    pthread_mutex_lock(&loader->mu);
    loader->next_out = first_batch;
    loader->claim_batch = first_batch;
    loader->claim_j = 0;
    loader->started = true;
    loader->running = true;
    pthread_cond_broadcast(&loader->work_cv);
    pthread_mutex_unlock(&loader->mu);
    return SC_OK;
}

/* Thread rule: consumer thread, mu held. */
static sc_status host_loader_next_locked(host_loader *loader, host_batch **out)
{
    *out = NULL;
    if (!loader->started)
        return sc_error_set(SC_ERR_STATE, "loader: no epoch started");
    int64_t b = loader->next_out;
    if (b > loader->fail_batch)
        return sc_error_set(SC_ERR_PLUGIN, "%s", loader->fail_message);
    if (b >= loader->n_batches)
        return SC_OK;
    host_slot *slot = host_loader_slot(loader, b);
    if (slot->state == HOST_SLOT_OUT)
        return sc_error_set(SC_ERR_STATE, "loader: all %d batches are held; release one first",
                            loader->n_slots);
    /* With workers, they fill it; without, this thread does, chunk by chunk
     * (the slot is free or filling, so a claim always succeeds). */
    while (slot->state != HOST_SLOT_READY) {
        if (loader->n_threads > 0)
            pthread_cond_wait(&loader->done_cv, &loader->mu);
        else
            host_loader_work(loader);
    }
    if (b == loader->fail_batch) {
        loader->next_out++; /* past the failure: later calls repeat it */
        return sc_error_set(SC_ERR_PLUGIN, "%s", loader->fail_message);
    }
    slot->state = HOST_SLOT_OUT;
    loader->next_out++;
    *out = &slot->batch;
    return SC_OK;
}

/* Thread rule: consumer thread. */
sc_status host_loader_next(host_loader *loader, host_batch **out)
{
    pthread_mutex_lock(&loader->mu);
    sc_status status = host_loader_next_locked(loader, out);
    pthread_mutex_unlock(&loader->mu);
    return status;
}

/* Thread rule: consumer thread. */
void host_loader_release(host_loader *loader, host_batch *batch)
{
    host_slot *slot = host_loader_slot(loader, batch->index);
    pthread_mutex_lock(&loader->mu);
    if (&slot->batch == batch && slot->state == HOST_SLOT_OUT) {
        slot->state = HOST_SLOT_FREE;
        pthread_cond_broadcast(&loader->work_cv);
    }
    pthread_mutex_unlock(&loader->mu);
}

/* Thread rule: consumer thread. */
void host_loader_stop_epoch(host_loader *loader)
{
    pthread_mutex_lock(&loader->mu);
    loader->running = false;
    while (loader->busy > 0)
        pthread_cond_wait(&loader->done_cv, &loader->mu);
    for (int s = 0; s < loader->n_slots; s++)
        loader->slots[s].state = HOST_SLOT_FREE;
    loader->started = false;
    loader->fail_batch = INT64_MAX;
    loader->fail_j = 0;
    pthread_mutex_unlock(&loader->mu);
}
