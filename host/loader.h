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
 * Thread rule: one consumer thread calls everything here; the loader owns
 * its workers.
 */
#ifndef SCORCH_HOST_LOADER_H
#define SCORCH_HOST_LOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/plugin.h"

typedef struct sc_loader_config {
    int64_t batch_size; /* per rank */
    int workers;        /* 0: getitem on the consumer thread */
    int prefetch;       /* batches prepared ahead (>= 1) */
    uint64_t seed;
    bool shuffle;       /* train: true */
    bool drop_last;     /* train: true */
    int rank, world;
} sc_loader_config;

/* A batch of samples, collated: inputs.t[k] is [size, ...spec shape]. */
typedef struct sc_batch {
    int64_t index;           /* 0-based batch number in the epoch */
    int64_t size;            /* samples in this batch (<= batch_size) */
    const int64_t *samples;  /* dataset indices of its samples [size] */
    sc_tensor_list inputs;
    sc_tensor_list targets;
} sc_batch;

typedef struct sc_loader sc_loader;

/* A loader over an open dataset (not owned). */
sc_status sc_loader_new(const sc_dataset_plugin *plugin, void *dataset, sc_split split,
                        const sc_loader_config *config, sc_loader **out);
void sc_loader_free(sc_loader *loader);

/* Batches per epoch for this rank, and samples this rank sees per epoch. */
int64_t sc_loader_batches(const sc_loader *loader);
int64_t sc_loader_samples(const sc_loader *loader);

/* The sample spec of the dataset, as read at sc_loader_new. */
const sc_sample_spec *sc_loader_spec(const sc_loader *loader);

/* Starts epoch `epoch` (1-based) at batch `first_batch` (0 normally, more
 * when resuming mid-epoch); workers begin filling batches. */
sc_status sc_loader_start_epoch(sc_loader *loader, int epoch, int64_t first_batch);

/* The next batch in order, waiting for it if needed; *out = NULL after the
 * last one. A failed getitem is an error naming the split and the sample.
 * The batch stays valid until sc_loader_release(). */
sc_status sc_loader_next(sc_loader *loader, sc_batch **out);
void sc_loader_release(sc_loader *loader, sc_batch *batch);

/* Stops the epoch early (workers drain and park); safe at any point. */
void sc_loader_stop_epoch(sc_loader *loader);

#endif
