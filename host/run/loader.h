/* loader.h — the data loader: worker threads call the dataset's getitem
 * straight into batch buffers, several batches ahead of the step.
 *
 * Order is a pure function of (seed, epoch, rank, world): the train split
 * is shuffled by one permutation per epoch shared by all ranks, each rank
 * taking every world-th sample from its rank (DistributedSampler), the
 * ragged tail dropped so every rank runs the same steps; valid and test go
 * in order, their last batch may be short, and every sample is seen once.
 * Each sample's augmentation stream is (seed, epoch, sample index), so the
 * number of workers never changes the data.
 *
 * Exactly, for epoch e (1-based), dataset length n, rank r of world w:
 *   - order: 0, 1, ..., n-1; with shuffle, permuted by Fisher-Yates
 *     (for i = n-1 down to 1: swap order[i] with order[sc_rng_below(i+1)])
 *     drawing from sc_rng_init(seed, sc_rng_mix(e, HOST_LOADER_SAMPLER_STREAM));
 *   - rank r takes positions r, r+w, r+2w, ... of that order; with
 *     drop_last it takes floor(n / w) of them, rounded down to whole
 *     batches; without, every position < n (ranks may then differ by one
 *     sample, and the last batch may be short);
 *   - with whole_batches (a job's batches, scorch/job.h), rank r takes
 *     instead whole batches of that order: batches r, r+w, r+2w, ..., batch
 *     b being positions b*batch_size .. (b+1)*batch_size-1 (the split's
 *     last batch may be short); drop_last does not apply;
 *   - sample i is written by getitem with rng sc_rng_init(seed,
 *     sc_rng_mix(e, i)).
 *
 * Buffers: prefetch + 1 batch slots of sc_tensor_alloc'd [batch_size, ...]
 * tensors, allocated once; getitem writes row j of a slot through a
 * header-only slice, so there is no copy and no allocation per sample.
 * Workers fill up to `prefetch` batches beyond the ones the consumer holds;
 * batches come out strictly in order whatever order workers finish in.
 * For a GPU the buffers are pinned and each slot has a fence: the upload
 * that copies a batch to the GPU asynchronously sets it, and a released
 * slot is refilled only once it has passed.
 *
 * Thread rule: one consumer thread calls everything here; the loader owns
 * its workers.
 */
#ifndef SCORCH_HOST_LOADER_H
#define SCORCH_HOST_LOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch_host/device.h"
#include "scorch/plugin.h"

/* The sampler's stream id; its high bit keeps it apart from every sample
 * index, so the permutation never shares a stream with a sample. */
#define HOST_LOADER_SAMPLER_STREAM 0x8000000000005a4dULL

typedef struct host_loader_config {
    const char *plugin_file; /* the dataset plugin's file, for messages; NULL: its name */
    int64_t batch_size; /* per rank */
    int workers;        /* 0: getitem on the consumer thread */
    int prefetch;       /* batches prepared ahead (>= 1) */
    uint64_t seed;
    bool shuffle;       /* train: true */
    bool drop_last;     /* train: true */
    bool whole_batches; /* ranks take whole batches in turn (the header's rule) */
    int rank, world;
    bool pinned;        /* page-locked batch buffers: a GPU run's faster uploads */
    sc_device gpu;      /* with pinned, the GPU they are uploaded to: slots get fences */
} host_loader_config;

/* A batch of samples, collated: inputs.t[k] is [size, ...spec shape]. */
typedef struct host_batch {
    int64_t index;           /* 0-based batch number in the epoch */
    int64_t size;            /* samples in this batch (<= batch_size) */
    const int64_t *samples;  /* dataset indices of its samples [size] */
    sc_tensor_list inputs;
    sc_tensor_list targets;
    /* For an asynchronous upload's `done` (sc_tensor_upload_async): the
     * loader refills the buffers only after it has passed. NULL unless
     * the config names a GPU. */
    sc_fence *uploaded;
} host_batch;

typedef struct host_loader host_loader;

/* A loader over an open dataset (not owned): reads its length and spec,
 * allocates the batch slots and starts `workers` threads, which park until
 * an epoch starts. SC_ERR_INVALID for a bad config, SC_ERR_PLUGIN for a
 * spec that does not fit (too many tensors, too many dimensions). */
sc_status host_loader_new(const sc_dataset_plugin *plugin, void *dataset, sc_split split,
                        const host_loader_config *config, host_loader **out);
/* Stops any epoch, joins every worker and frees everything; NULL is a
 * no-op. */
void host_loader_free(host_loader *loader);

/* Batches per epoch for this rank, and samples this rank sees per epoch. */
int64_t host_loader_batches(const host_loader *loader);
int64_t host_loader_samples(const host_loader *loader);

/* The sample spec of the dataset, as read at host_loader_new. */
const sc_sample_spec *host_loader_spec(const host_loader *loader);

/* Starts epoch `epoch` (1-based) at batch `first_batch` (0 normally, more
 * when resuming mid-epoch; 0..host_loader_batches()); workers begin filling
 * batches. An epoch still running is stopped first. */
sc_status host_loader_start_epoch(host_loader *loader, int epoch, int64_t first_batch);

/* The next batch in order, waiting for it if needed; *out = NULL after the
 * last one. A failed getitem is SC_ERR_PLUGIN, "<plugin file>:
 * dataset_getitem: <split> sample <i>: <plugin's message>", returned when
 * the consumer reaches that batch (the batches before it come out
 * normally; within it, the lowest failing row is named) and again on every
 * later call until the epoch is stopped or restarted. SC_ERR_STATE when
 * no epoch is started, or when the consumer already holds prefetch + 1
 * batches.
 * The batch stays valid until host_loader_release(), or until the epoch is
 * stopped or restarted, which voids every batch still held (do not release
 * those). */
sc_status host_loader_next(host_loader *loader, host_batch **out);
void host_loader_release(host_loader *loader, host_batch *batch);

/* Stops the epoch early: waits for the samples in progress (getitem is
 * not interrupted), then workers park. Safe at any point, also when no
 * epoch runs. Until it (or start_epoch, or free) returns, workers may
 * still be running getitem on later batches, even after the last batch or
 * a failure came out: change the dataset only after it. */
void host_loader_stop_epoch(host_loader *loader);

#endif
