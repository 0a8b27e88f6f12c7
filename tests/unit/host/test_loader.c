/* test_loader.c — the data loader's order, coverage, resume and failures,
 * against a toy dataset whose sample i is input [i, i, u] (u: the first
 * draw of the sample's rng) and target i. */
#define _GNU_SOURCE /* pthread_setattr_default_np, SCHED_BATCH */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "run/loader.h"

enum { TOY_MAX = 256, TOY_FAILS = 4 };

typedef struct toy {
    int64_t len;
    int n_fails;
    int64_t fails[TOY_FAILS]; /* samples whose getitem fails */
    int input_ndim;           /* 1 normally; more to break the spec */
    /* Sample `hold` waits until sample `until` has been tried (-1: off),
     * so a later row can be made to fail first. */
    int64_t hold, until;
    bool until_tried; /* guarded by hold_mu */
    int policies;     /* guarded by hold_mu: 1 << policy of each getitem's thread */
} toy;

static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;

static void toy_order(toy *d, int64_t i)
{
    pthread_mutex_lock(&hold_mu);
    d->policies |= 1 << sched_getscheduler(0);
    if (i == d->until) {
        d->until_tried = true;
        pthread_cond_broadcast(&hold_cv);
    }
    while (i == d->hold && !d->until_tried)
        pthread_cond_wait(&hold_cv, &hold_mu);
    pthread_mutex_unlock(&hold_mu);
}

static int64_t toy_len(void *dataset) { return ((toy *)dataset)->len; }

static void toy_spec(void *dataset, sc_sample_spec *spec)
{
    *spec = (sc_sample_spec){.n_inputs = 1, .n_targets = 1};
    spec->inputs[0] = (sc_tensor_spec){.dtype = SC_F32, .ndim = ((toy *)dataset)->input_ndim,
                                       .shape = {3, 1, 1, 1, 1, 1}};
    spec->targets[0] = (sc_tensor_spec){.dtype = SC_I64, .ndim = 0};
}

static sc_status toy_getitem(void *dataset, int64_t i, sc_rng *rng, sc_tensor_list *inputs,
                             sc_tensor_list *targets)
{
    toy *d = dataset;
    toy_order(d, i);
    for (int f = 0; f < d->n_fails; f++)
        if (d->fails[f] == i)
            return sc_error_set(SC_ERR_IO, "cannot read record %lld", (long long)i);
    const sc_tensor *x = inputs->t[0], *y = targets->t[0];
    if (inputs->n != 1 || targets->n != 1 || x->ndim != 1 || x->shape[0] != 3 ||
        x->numel != 3 || y->ndim != 0 || y->numel != 1)
        return sc_error_set(SC_ERR_INVALID, "sample %lld: slices of the wrong shape",
                            (long long)i);
    float *xs = sc_tensor_f32(x);
    xs[0] = xs[1] = (float)i;
    xs[2] = sc_rng_uniform(rng);
    *(int64_t *)y->data = i;
    return SC_OK;
}

static const sc_dataset_plugin toy_plugin = {
    .abi = SC_ABI_HEADER(sc_dataset_plugin),
    .name = "toy",
    .dataset_len = toy_len,
    .dataset_spec = toy_spec,
    .dataset_getitem = toy_getitem,
};

static toy toy_of(int64_t len)
{
    return (toy){.len = len, .input_ndim = 1, .hold = -1, .until = -1};
}

/* Train-style config: shuffled, drop_last, batch 10. */
static host_loader_config train_config(int workers)
{
    return (host_loader_config){.plugin_file = "plugins/toy.so", .batch_size = 10,
                              .workers = workers, .prefetch = 2,
                              .seed = 42, .shuffle = true, .drop_last = true,
                              .rank = 0, .world = 1};
}

static host_loader_config valid_config(int workers)
{
    host_loader_config c = train_config(workers);
    c.shuffle = c.drop_last = false;
    return c;
}

/* What one epoch produced, in order. */
typedef struct seen {
    int64_t n, n_batches;
    int64_t samples[TOY_MAX];
    float draws[TOY_MAX];
    int64_t sizes[TOY_MAX];
} seen;

/* Checks a batch's rows against its sample list and appends them. */
static void seen_add(seen *s, const host_batch *b, int64_t expect_index)
{
    const sc_tensor *x = b->inputs.t[0], *y = b->targets.t[0];
    cr_assert_eq(b->index, expect_index);
    cr_assert_eq(x->ndim, 2);
    cr_assert_eq(x->shape[0], b->size);
    cr_assert_eq(x->numel, b->size * 3);
    cr_assert_eq(y->ndim, 1);
    cr_assert_eq(y->shape[0], b->size);
    for (int64_t j = 0; j < b->size; j++) {
        const float *row = sc_tensor_f32(x) + 3 * j;
        cr_assert_eq(row[0], (float)b->samples[j]);
        cr_assert_eq(row[1], (float)b->samples[j]);
        cr_assert_eq(((const int64_t *)y->data)[j], b->samples[j]);
        cr_assert_lt(s->n, TOY_MAX);
        s->samples[s->n] = b->samples[j];
        s->draws[s->n++] = row[2];
    }
    s->sizes[s->n_batches++] = b->size;
}

/* Runs epoch `epoch` from batch `first` to the end. */
static void run_epoch(host_loader *loader, int epoch, int64_t first, seen *s)
{
    memset(s, 0, sizeof *s);
    cr_assert_eq(host_loader_start_epoch(loader, epoch, first), SC_OK, "%s",
                 sc_error_message());
    for (int64_t i = first;; i++) {
        host_batch *b;
        cr_assert_eq(host_loader_next(loader, &b), SC_OK, "%s", sc_error_message());
        if (!b)
            break;
        seen_add(s, b, i);
        host_loader_release(loader, b);
    }
}

static host_loader *loader_new(toy *d, sc_split split, const host_loader_config *c)
{
    host_loader *loader;
    cr_assert_eq(host_loader_new(&toy_plugin, d, split, c, &loader), SC_OK, "%s",
                 sc_error_message());
    return loader;
}

/* One epoch with a fresh loader. */
static void run_once(toy *d, sc_split split, const host_loader_config *c, int epoch, seen *s)
{
    host_loader *loader = loader_new(d, split, c);
    run_epoch(loader, epoch, 0, s);
    host_loader_free(loader);
}

static void assert_distinct_below(const seen *s, int64_t len)
{
    bool hit[TOY_MAX] = {false};
    for (int64_t k = 0; k < s->n; k++) {
        cr_assert(s->samples[k] >= 0 && s->samples[k] < len);
        cr_assert_not(hit[s->samples[k]], "sample %lld twice", (long long)s->samples[k]);
        hit[s->samples[k]] = true;
    }
}

static bool seen_equal(const seen *a, const seen *b)
{
    return a->n == b->n && a->n_batches == b->n_batches &&
           !memcmp(a->samples, b->samples, sizeof a->samples) &&
           !memcmp(a->draws, b->draws, sizeof a->draws);
}

/* Sample i's draw in epoch e, by the header's rule. */
static float expected_draw(uint64_t seed, int epoch, int64_t i)
{
    sc_rng rng;
    sc_rng_init(&rng, seed, sc_rng_mix((uint64_t)epoch, (uint64_t)i));
    return sc_rng_uniform(&rng);
}

TestSuite(loader, .timeout = 60);

Test(loader, train_order_and_draws_follow_the_documented_rule)
{
    toy d = toy_of(103);
    host_loader_config c = train_config(2);
    c.batch_size = 1;
    seen s;
    run_once(&d, SC_SPLIT_TRAIN, &c, 7, &s);
    int64_t order[103];
    for (int64_t i = 0; i < 103; i++)
        order[i] = i;
    sc_rng rng;
    sc_rng_init(&rng, c.seed, sc_rng_mix(7, HOST_LOADER_SAMPLER_STREAM));
    for (int64_t i = 102; i > 0; i--) {
        int64_t j = (int64_t)sc_rng_below(&rng, (uint64_t)i + 1);
        int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    cr_assert_eq(s.n, 103);
    cr_assert_arr_eq(s.samples, order, sizeof order);
    for (int64_t k = 0; k < s.n; k++)
        cr_assert_eq(s.draws[k], expected_draw(c.seed, 7, s.samples[k]));
}

Test(loader, train_epoch_is_a_permutation_with_drop_last)
{
    toy d = toy_of(103);
    host_loader_config c = train_config(2);
    host_loader *loader = loader_new(&d, SC_SPLIT_TRAIN, &c);
    cr_assert_eq(host_loader_batches(loader), 10);
    cr_assert_eq(host_loader_samples(loader), 100);
    cr_assert_eq(host_loader_spec(loader)->inputs[0].shape[0], 3);
    seen s;
    run_epoch(loader, 1, 0, &s);
    host_loader_free(loader);
    cr_assert_eq(s.n, 100);
    cr_assert_eq(s.n_batches, 10);
    for (int64_t b = 0; b < s.n_batches; b++)
        cr_assert_eq(s.sizes[b], 10);
    assert_distinct_below(&s, 103);
}

Test(loader, order_and_draws_do_not_depend_on_workers)
{
    toy d = toy_of(103);
    int workers[] = {0, 1, 4, 7};
    for (int64_t bs = 1; bs <= 10; bs += 9) {
        for (int epoch = 1; epoch <= 2; epoch++) {
            host_loader_config c = train_config(0);
            c.batch_size = bs;
            seen ref, s;
            run_once(&d, SC_SPLIT_TRAIN, &c, epoch, &ref);
            for (size_t w = 1; w < sizeof workers / sizeof workers[0]; w++) {
                c.workers = workers[w];
                c.prefetch = workers[w];
                run_once(&d, SC_SPLIT_TRAIN, &c, epoch, &s);
                cr_assert(seen_equal(&ref, &s), "workers %d, batch %lld, epoch %d differ",
                          workers[w], (long long)bs, epoch);
            }
        }
    }
}

/* Workers take no core from the compute threads by waking (loader.c,
 * host_loader_yield_cores); the consumer's own policy stays. */
Test(loader, workers_run_as_batch_threads_and_the_consumer_as_before)
{
    int consumer = sched_getscheduler(0);
    for (int workers = 0; workers <= 2; workers += 2) {
        toy d = toy_of(40);
        host_loader_config c = train_config(workers);
        seen s;
        run_once(&d, SC_SPLIT_TRAIN, &c, 1, &s);
        cr_assert_eq(s.n, 40);
        cr_assert_eq(d.policies, 1 << (workers ? SCHED_BATCH : consumer), "workers %d: %#x",
                     workers, (unsigned)d.policies);
    }
    cr_assert_eq(sched_getscheduler(0), consumer);
}

Test(loader, order_differs_between_epochs_and_seeds)
{
    toy d = toy_of(103);
    host_loader_config c = train_config(2);
    seen e1, e2, other_seed;
    host_loader *loader = loader_new(&d, SC_SPLIT_TRAIN, &c);
    run_epoch(loader, 1, 0, &e1);
    run_epoch(loader, 2, 0, &e2);
    host_loader_free(loader);
    c.seed = 43;
    run_once(&d, SC_SPLIT_TRAIN, &c, 1, &other_seed);
    cr_assert(memcmp(e1.samples, e2.samples, sizeof e1.samples));
    cr_assert(memcmp(e1.samples, other_seed.samples, sizeof e1.samples));
    /* Same sample, different epoch: a different augmentation draw. */
    int64_t k = 0;
    while (e2.samples[k] != e1.samples[0])
        k++;
    cr_assert_neq(e1.draws[0], e2.draws[k]);
}

Test(loader, valid_covers_every_sample_once_with_a_short_last_batch)
{
    toy d = toy_of(103);
    host_loader_config c = valid_config(3);
    host_loader *loader = loader_new(&d, SC_SPLIT_VALID, &c);
    cr_assert_eq(host_loader_batches(loader), 11);
    cr_assert_eq(host_loader_samples(loader), 103);
    /* Twice: the slot that held the short batch is full-size again. */
    for (int epoch = 1; epoch <= 2; epoch++) {
        seen s;
        run_epoch(loader, epoch, 0, &s);
        cr_assert_eq(s.n, 103);
        cr_assert_eq(s.n_batches, 11);
        cr_assert_eq(s.sizes[10], 3);
        for (int64_t k = 0; k < s.n; k++)
            cr_assert_eq(s.samples[k], k);
    }
    host_loader_free(loader);
}

Test(loader, two_ranks_are_disjoint_and_stride_one_permutation)
{
    toy d = toy_of(103);
    /* The whole epoch order: world 1, batches of one, nothing dropped. */
    host_loader_config c = train_config(1);
    c.batch_size = 1;
    seen all;
    run_once(&d, SC_SPLIT_TRAIN, &c, 5, &all);
    cr_assert_eq(all.n, 103);

    c = train_config(2);
    c.world = 2;
    bool hit[TOY_MAX] = {false};
    for (c.rank = 0; c.rank < 2; c.rank++) {
        seen s;
        run_once(&d, SC_SPLIT_TRAIN, &c, 5, &s);
        cr_assert_eq(s.n, 50); /* floor(103 / 2) = 51, down to whole batches */
        for (int64_t k = 0; k < s.n; k++) {
            cr_assert_eq(s.samples[k], all.samples[c.rank + 2 * k]);
            cr_assert_not(hit[s.samples[k]]);
            hit[s.samples[k]] = true;
        }
    }
}

Test(loader, ranks_without_drop_last_cover_every_sample_once)
{
    toy d = toy_of(103);
    host_loader_config c = valid_config(2);
    c.world = 2;
    int64_t counts[2] = {52, 51};
    bool hit[TOY_MAX] = {false};
    for (c.rank = 0; c.rank < 2; c.rank++) {
        seen s;
        run_once(&d, SC_SPLIT_VALID, &c, 1, &s);
        cr_assert_eq(s.n, counts[c.rank]);
        for (int64_t k = 0; k < s.n; k++) {
            cr_assert_not(hit[s.samples[k]]);
            hit[s.samples[k]] = true;
        }
    }
    for (int64_t i = 0; i < 103; i++)
        cr_assert(hit[i], "sample %lld never seen", (long long)i);
}

/* A job's sharding: 3 ranks take whole batches of 10 in turn from 103
 * samples in order (11 batches, the last of 3), each rank's batch k being
 * the split's batch rank + 3k. */
Test(loader, whole_batches_go_to_the_ranks_in_turn)
{
    toy d = toy_of(103);
    host_loader_config c = valid_config(2);
    c.whole_batches = true;
    c.world = 3;
    int64_t counts[3] = {40, 33, 30}; /* batches 0 3 6 9, 1 4 7 10 (short), 2 5 8 */
    for (c.rank = 0; c.rank < 3; c.rank++) {
        seen s;
        run_once(&d, SC_SPLIT_VALID, &c, 1, &s);
        cr_assert_eq(s.n, counts[c.rank], "rank %d: %lld samples", c.rank, (long long)s.n);
        for (int64_t k = 0; k < s.n; k++) {
            int64_t batch = c.rank + k / 10 * 3;
            cr_assert_eq(s.samples[k], batch * 10 + k % 10, "rank %d, sample %lld", c.rank,
                         (long long)k);
        }
    }
}

Test(loader, start_at_batch_k_resumes_the_same_epoch)
{
    toy d = toy_of(103);
    for (int workers = 0; workers <= 3; workers += 3) {
        host_loader_config c = train_config(workers);
        host_loader *loader = loader_new(&d, SC_SPLIT_TRAIN, &c);
        seen full, tail;
        run_epoch(loader, 3, 0, &full);
        run_epoch(loader, 3, 4, &tail);
        cr_assert_eq(tail.n, full.n - 40);
        cr_assert_arr_eq(tail.samples, full.samples + 40, (size_t)tail.n * sizeof(int64_t));
        cr_assert_arr_eq(tail.draws, full.draws + 40, (size_t)tail.n * sizeof(float));
        run_epoch(loader, 3, host_loader_batches(loader), &tail);
        cr_assert_eq(tail.n, 0);
        cr_assert_eq(host_loader_start_epoch(loader, 3, host_loader_batches(loader) + 1),
                     SC_ERR_INVALID);
        host_loader_free(loader);
    }
}

/* Reads valid batches until the failure; returns how many came out. */
static int64_t batches_before_failure(host_loader *loader, const char *expect)
{
    cr_assert_eq(host_loader_start_epoch(loader, 1, 0), SC_OK);
    for (int64_t n = 0;; n++) {
        host_batch *b;
        sc_status status = host_loader_next(loader, &b);
        if (status != SC_OK) {
            cr_assert_eq(status, SC_ERR_PLUGIN);
            cr_assert_str_eq(sc_error_message(), expect);
            return n;
        }
        cr_assert_not_null(b, "epoch ended without the failure");
        host_loader_release(loader, b);
    }
}

Test(loader, getitem_failure_names_the_first_failing_sample)
{
    /* Rows 5 and 8 of batch 3 fail, and a row of batch 7; with workers,
     * row 8 fails before row 5 does. The consumer hears of sample 35, and
     * of the plugin file, as of any failed plugin call. */
    toy d = {.len = 103, .n_fails = 3, .fails = {72, 38, 35}, .input_ndim = 1};
    const char *expect =
        "plugins/toy.so: dataset_getitem: valid sample 35: cannot read record 35";
    for (int workers = 0; workers <= 4; workers += 2) {
        d.hold = workers ? 35 : -1; /* on one thread, 35 comes first */
        d.until = 38;
        d.until_tried = false;
        host_loader_config c = valid_config(workers);
        c.prefetch = 8;
        host_loader *loader = loader_new(&d, SC_SPLIT_VALID, &c);
        cr_assert_eq(batches_before_failure(loader, expect), 3);
        host_batch *b;
        cr_assert_eq(host_loader_next(loader, &b), SC_ERR_PLUGIN, "the failure repeats");
        cr_assert_null(b);
        cr_assert_str_eq(sc_error_message(), expect);
        host_loader_stop_epoch(loader);
        /* A fixed dataset runs clean on the same loader. */
        d.n_fails = 0;
        seen s;
        run_epoch(loader, 1, 0, &s);
        cr_assert_eq(s.n, 103);
        d.n_fails = 3;
        host_loader_free(loader);
    }
}

Test(loader, getitem_failure_in_a_shuffled_epoch_then_free)
{
    toy d = toy_of(103);
    host_loader_config c = train_config(3);
    seen ref;
    run_once(&d, SC_SPLIT_TRAIN, &c, 1, &ref);
    d.n_fails = 1;
    d.fails[0] = ref.samples[57]; /* batch 5 */
    char expect[128];
    snprintf(expect, sizeof expect, "plugins/toy.so: dataset_getitem: train sample %lld: "
             "cannot read record %lld", (long long)d.fails[0], (long long)d.fails[0]);
    host_loader *loader = loader_new(&d, SC_SPLIT_TRAIN, &c);
    cr_assert_eq(batches_before_failure(loader, expect), 5);
    host_loader_free(loader); /* no stop_epoch first: free must still join */
}

Test(loader, early_stop_and_free_do_not_hang)
{
    toy d = toy_of(103);
    host_loader_config c = train_config(2);
    c.batch_size = 1;
    c.prefetch = 4;
    host_loader *loader = loader_new(&d, SC_SPLIT_TRAIN, &c);
    host_batch *b;
    cr_assert_eq(host_loader_start_epoch(loader, 1, 0), SC_OK);
    cr_assert_eq(host_loader_next(loader, &b), SC_OK);
    host_loader_stop_epoch(loader);
    host_loader_stop_epoch(loader); /* twice is fine */
    cr_assert_eq(host_loader_next(loader, &b), SC_ERR_STATE);
    /* Restart over a running epoch, then free with a batch held. */
    cr_assert_eq(host_loader_start_epoch(loader, 2, 0), SC_OK);
    cr_assert_eq(host_loader_next(loader, &b), SC_OK);
    seen s;
    run_epoch(loader, 1, 0, &s);
    cr_assert_eq(s.n, 103);
    cr_assert_eq(host_loader_start_epoch(loader, 2, 0), SC_OK);
    cr_assert_eq(host_loader_next(loader, &b), SC_OK);
    host_loader_free(loader);
}

Test(loader, holding_every_slot_is_an_error_not_a_hang)
{
    toy d = toy_of(103);
    for (int workers = 0; workers <= 2; workers += 2) {
        host_loader_config c = valid_config(workers);
        c.prefetch = 1; /* two slots */
        host_loader *loader = loader_new(&d, SC_SPLIT_VALID, &c);
        host_batch *b0, *b1, *b2;
        cr_assert_eq(host_loader_start_epoch(loader, 1, 0), SC_OK);
        cr_assert_eq(host_loader_next(loader, &b0), SC_OK);
        cr_assert_eq(host_loader_next(loader, &b1), SC_OK);
        cr_assert_eq(host_loader_next(loader, &b2), SC_ERR_STATE);
        host_loader_release(loader, b0);
        cr_assert_eq(host_loader_next(loader, &b2), SC_OK);
        cr_assert_eq(b1->samples[0], 10);
        cr_assert_eq(b2->samples[0], 20);
        host_loader_free(loader);
    }
}

Test(loader, bad_configs_and_specs_are_refused)
{
    toy d = toy_of(10);
    host_loader_config bad[4] = {train_config(1), train_config(1), train_config(1),
                               train_config(-1)};
    bad[0].batch_size = 0;
    bad[1].prefetch = 0;
    bad[2].rank = bad[2].world = 2;
    for (int k = 0; k < 4; k++) {
        host_loader *loader = (host_loader *)&d;
        cr_assert_eq(host_loader_new(&toy_plugin, &d, SC_SPLIT_TRAIN, &bad[k], &loader),
                     SC_ERR_INVALID, "config %d", k);
        cr_assert_null(loader);
    }
    d.input_ndim = SC_MAX_DIMS; /* no room for the batch dimension */
    host_loader *loader;
    host_loader_config c = train_config(2);
    cr_assert_eq(host_loader_new(&toy_plugin, &d, SC_SPLIT_TRAIN, &c, &loader), SC_ERR_PLUGIN);
    cr_assert(strstr(sc_error_message(), "toy"), "%s", sc_error_message());
}

/* A worker the system cannot start (here: its stack, of a default size
 * too big to map) is refused naming --workers and the reason. */
Test(loader, a_worker_that_cannot_start_names_the_option)
{
    pthread_attr_t usual, huge;
    cr_assert_eq(pthread_getattr_default_np(&usual), 0);
    pthread_attr_init(&huge);
    pthread_attr_setstacksize(&huge, (size_t)1 << 44); /* 16 TiB */
    cr_assert_eq(pthread_setattr_default_np(&huge), 0);
    toy d = toy_of(10);
    host_loader_config c = train_config(4);
    host_loader *loader;
    sc_status st = host_loader_new(&toy_plugin, &d, SC_SPLIT_TRAIN, &c, &loader);
    pthread_setattr_default_np(&usual);
    pthread_attr_destroy(&huge);
    pthread_attr_destroy(&usual);
    char expect[256];
    snprintf(expect, sizeof expect, "--workers 4: cannot start data-loader thread 1: %s (0 "
             "started; lower --workers)", strerror(EAGAIN));
    cr_assert_eq(st, SC_ERR_NOMEM, "%s", sc_error_message());
    cr_assert_str_eq(sc_error_message(), expect);
    cr_assert_null(loader);
}

Test(loader, an_empty_rank_ends_at_once)
{
    toy d = toy_of(5); /* fewer than one batch: drop_last leaves nothing */
    host_loader_config c = train_config(2);
    seen s;
    run_once(&d, SC_SPLIT_TRAIN, &c, 1, &s);
    cr_assert_eq(s.n, 0);
}

/* The batch counts scorch-train's steps per epoch come from: with
 * drop_last, whole batches only; without, one more for a short remainder. */
Test(loader, batch_counts_with_and_without_drop_last)
{
    static const struct {
        int64_t len, batch;
        bool drop_last;
        int64_t batches, samples;
    } cases[] = {
        {103, 10, true, 10, 100}, {103, 10, false, 11, 103}, {100, 10, true, 10, 100},
        {100, 10, false, 10, 100}, {9, 10, true, 0, 0},      {9, 10, false, 1, 9},
        {0, 10, false, 0, 0},     {1, 1, true, 1, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        toy d = toy_of(cases[k].len);
        host_loader_config c = train_config(1);
        c.batch_size = cases[k].batch;
        c.drop_last = cases[k].drop_last;
        host_loader *loader = loader_new(&d, SC_SPLIT_TRAIN, &c);
        cr_assert_eq(host_loader_batches(loader), cases[k].batches, "case %zu", k);
        cr_assert_eq(host_loader_samples(loader), cases[k].samples, "case %zu", k);
        host_loader_free(loader);
    }
}

/* --no-drop-last: the shuffled epoch covers every sample once, its short
 * batch last, and a resume at that batch gives the same samples and draws. */
Test(loader, shuffled_epoch_without_drop_last_ends_with_the_short_batch)
{
    toy d = toy_of(103);
    host_loader_config c = train_config(2);
    c.drop_last = false;
    host_loader *loader = loader_new(&d, SC_SPLIT_TRAIN, &c);
    seen full, tail;
    run_epoch(loader, 2, 0, &full);
    cr_assert_eq(full.n, 103);
    cr_assert_eq(full.n_batches, 11);
    cr_assert_eq(full.sizes[10], 3);
    assert_distinct_below(&full, 103);
    run_epoch(loader, 2, 10, &tail);
    host_loader_free(loader);
    cr_assert_eq(tail.n, 3);
    cr_assert_arr_eq(tail.samples, full.samples + 100, 3 * sizeof(int64_t));
    cr_assert_arr_eq(tail.draws, full.draws + 100, 3 * sizeof(float));
}
