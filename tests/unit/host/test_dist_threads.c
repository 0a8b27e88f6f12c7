/* The threads transport (host/dist/comm_threads.c), the one replicas use: its
 * collectives on real threads, rounds that reuse buckets, sums that are
 * the same bits on every rank, and the deadline that ends a job whose
 * rank stops answering. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/comm.h"

enum { WORLD = 3, ROUNDS = 4, BUCKETS = 3 };

/* Bucket b has sizes[b] floats: smaller and larger than the world, and
 * over a slice chunk. */
static const int64_t sizes[BUCKETS] = {2, 7, 5000};

typedef struct rank_run {
    host_comm_team *team;
    int rank;
    int max[3];
    char root_text[16];
    int gathered[WORLD];
    float *grads[BUCKETS];
    bool joined, sums_right; /* Criterion asserts on the test's thread only */
} rank_run;

/* Rank r's gradient i of bucket b in round k, and their sum over ranks in
 * rank order. */
static float grad_of(int r, int b, int64_t i, int k)
{
    return (float)(r + 1) * 0.1f + (float)(i % 13) + (float)(b + k);
}

static float sum_of(int b, int64_t i, int k)
{
    float s = grad_of(0, b, i, k);
    for (int r = 1; r < WORLD; r++)
        s += grad_of(r, b, i, k);
    return s;
}

static void *rank_main(void *arg)
{
    rank_run *run = arg;
    host_comm *c;
    host_comm_info info;
    if (host_comm_threads_join(run->team, run->rank, &c, &info) != SC_OK)
        return NULL; /* the other ranks end at the deadline */
    run->joined = info.rank == run->rank && info.world == WORLD && info.nodes == 1;
    const host_comm_ops *ops = &host_comm_threads;

    run->max[0] = run->rank;
    run->max[1] = -run->rank;
    run->max[2] = run->rank == 1 ? 99 : 0;
    ops->max_ints(c, run->max, 3, "max");
    snprintf(run->root_text, sizeof run->root_text, "from %d", run->rank);
    ops->broadcast(c, run->root_text, sizeof run->root_text, 2, "broadcast");
    int mine = 10 * run->rank;
    ops->allgather(c, &mine, sizeof mine, run->gathered, "allgather");

    run->sums_right = ops->buckets(c, BUCKETS) == SC_OK;
    for (int k = 0; k < ROUNDS; k++) {
        for (int b = BUCKETS - 1; b >= 0; b--) { /* as backward: last first */
            for (int64_t i = 0; i < sizes[b]; i++)
                run->grads[b][i] = grad_of(run->rank, b, i, k);
            ops->sum_start(c, b, run->grads[b], sizes[b]);
        }
        for (int b = BUCKETS - 1; b >= 0; b--) {
            ops->sum_wait(c, b, "sum");
            for (int64_t i = 0; i < sizes[b]; i++)
                run->sums_right &= run->grads[b][i] == sum_of(b, i, k);
        }
        int check = 0; /* the data-parallel layer's check between steps */
        ops->max_ints(c, &check, 1, "check");
    }
    ops->close(c);
    return NULL;
}

Test(dist_threads, collectives_and_bucket_sums_agree_on_every_rank)
{
    host_comm_team *team;
    cr_assert_eq(host_comm_team_new(WORLD, 60, &team), SC_OK);
    rank_run runs[WORLD];
    pthread_t threads[WORLD];
    for (int r = 0; r < WORLD; r++) {
        runs[r] = (rank_run){.team = team, .rank = r};
        for (int b = 0; b < BUCKETS; b++)
            runs[r].grads[b] = malloc((size_t)sizes[b] * sizeof(float));
        cr_assert_eq(pthread_create(&threads[r], NULL, rank_main, &runs[r]), 0);
    }
    for (int r = 0; r < WORLD; r++)
        pthread_join(threads[r], NULL);
    for (int r = 0; r < WORLD; r++) {
        cr_expect(runs[r].joined, "rank %d", r);
        cr_expect(runs[r].max[0] == WORLD - 1 && runs[r].max[1] == 0 && runs[r].max[2] == 99,
                  "rank %d: max %d %d %d", r, runs[r].max[0], runs[r].max[1], runs[r].max[2]);
        cr_expect_str_eq(runs[r].root_text, "from 2", "rank %d", r);
        for (int q = 0; q < WORLD; q++)
            cr_expect_eq(runs[r].gathered[q], 10 * q, "rank %d's slot %d", r, q);
        cr_expect(runs[r].sums_right, "rank %d has a wrong sum", r);
        for (int b = 0; b < BUCKETS; b++)
            cr_expect_arr_eq(runs[r].grads[b], runs[0].grads[b],
                             (size_t)sizes[b] * sizeof(float),
                             "bucket %d differs between ranks 0 and %d", b, r);
    }
    for (int r = 0; r < WORLD; r++)
        for (int b = 0; b < BUCKETS; b++)
            free(runs[r].grads[b]);
    host_comm_team_free(team);
}

/* Rank 0 waits at a barrier that rank 1 never reaches: past the deadline
 * the process ends, exit code 1, saying which collective it was. */
Test(dist_threads, a_rank_that_never_comes_ends_the_job_at_the_deadline, .exit_code = 1)
{
    host_comm_team *team;
    cr_assert_eq(host_comm_team_new(2, 0.2, &team), SC_OK);
    host_comm *c;
    host_comm_info info;
    cr_assert_eq(host_comm_threads_join(team, 0, &c, &info), SC_OK);
    int v = 1;
    host_comm_threads.max_ints(c, &v, 1, "the lonely check");
    cr_assert_fail("the collective returned without rank 1");
}
