/* The distributed helpers (scorch/dist.h) without a host: rank 0 of 1,
 * collectives that are local copies, bad arguments refused with a
 * message; and what libscorch hands the host's table (scorch_host/dist.h):
 * the rank it sets, per thread, each call with this rank's status, and
 * the refusal on a data-loader thread. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "scorch/dist.h"
#include "scorch_host/dist.h"

Test(dist, alone_a_thread_is_rank_0_of_1)
{
    cr_expect_eq(sc_dist_rank(), 0);
    cr_expect_eq(sc_dist_world_size(), 1);
    cr_expect_eq(sc_dist_local_rank(), 0);
    cr_expect(sc_dist_is_main());
}

Test(dist, alone_the_collectives_are_local_copies)
{
    double v[3] = {1.5, -2, 4};
    cr_assert_eq(sc_dist_barrier(), SC_OK);
    cr_assert_eq(sc_dist_broadcast(v, sizeof v, 0), SC_OK);
    cr_assert_eq(sc_dist_allreduce(v, 3, SC_DIST_F64, SC_DIST_SUM), SC_OK);
    cr_expect(v[0] == 1.5 && v[1] == -2 && v[2] == 4);
    int64_t mine[2] = {7, 8}, all[2] = {0};
    cr_assert_eq(sc_dist_allgather(mine, sizeof mine, all), SC_OK);
    cr_expect(all[0] == 7 && all[1] == 8);
    cr_expect_eq(sc_dist_allreduce(NULL, 0, SC_DIST_I32, SC_DIST_MIN), SC_OK); /* nothing */
}

static void expect_refused(sc_status st, sc_status code, const char *part)
{
    cr_expect_eq(st, code, "%s", sc_error_message());
    cr_expect(strstr(sc_error_message(), part), "'%s' lacks '%s'", sc_error_message(), part);
}

Test(dist, bad_arguments_are_refused_naming_the_call)
{
    float f[2] = {0};
    expect_refused(sc_dist_broadcast(f, sizeof f, 1), SC_ERR_INVALID,
                   "sc_dist_broadcast: root 1 is not a rank (the world has 1)");
    expect_refused(sc_dist_allreduce(f, -1, SC_DIST_F32, SC_DIST_SUM), SC_ERR_INVALID,
                   "sc_dist_allreduce: count -1 is negative");
    expect_refused(sc_dist_allreduce(f, 2, (sc_dist_dtype)9, SC_DIST_SUM), SC_ERR_INVALID,
                   "9 is no sc_dist_dtype");
    expect_refused(sc_dist_allreduce(f, 2, SC_DIST_F32, (sc_dist_op)5), SC_ERR_INVALID,
                   "5 is no sc_dist_op");
    expect_refused(sc_dist_allgather(NULL, 4, f), SC_ERR_INVALID,
                   "sc_dist_allgather: NULL buffer for 4 bytes");
    cr_expect_eq(sc_dist_dtype_size(SC_DIST_F32), 4);
    cr_expect_eq(sc_dist_dtype_size(SC_DIST_I64), 8);
}

/* A host's table that records the calls it is handed. */
static sc_dist_call last_call;
static sc_status last_local;

static sc_status record(void *self, const sc_dist_call *call, sc_status local)
{
    (void)self;
    last_call = *call;
    last_local = local;
    return local;
}

static const sc_host_dist rank_1_of_3 = {.rank = 1, .world = 3, .local_rank = 1,
                                         .collective = record};

static void *ranks_of_another_thread(void *arg)
{
    int *out = arg;
    out[0] = sc_dist_rank();
    out[1] = sc_dist_world_size();
    return NULL;
}

Test(dist, the_hosts_table_gives_the_rank_on_its_thread_only)
{
    cr_assert_null(sc_host_set_dist(&rank_1_of_3));
    cr_expect(sc_dist_rank() == 1 && sc_dist_world_size() == 3 && !sc_dist_is_main());
    cr_expect_eq(sc_host_dist_current(), &rank_1_of_3);
    int other[2] = {-1, -1};
    pthread_t t;
    pthread_create(&t, NULL, ranks_of_another_thread, other);
    pthread_join(t, NULL);
    cr_expect(other[0] == 0 && other[1] == 1, "another thread: rank %d of %d", other[0],
              other[1]);
    cr_expect_eq(sc_host_set_dist(NULL), &rank_1_of_3);
    cr_expect_eq(sc_dist_world_size(), 1);
}

Test(dist, calls_reach_the_host_with_this_ranks_status)
{
    sc_host_set_dist(&rank_1_of_3);
    double v[4];
    cr_expect_eq(sc_dist_allreduce(v, 4, SC_DIST_F64, SC_DIST_MAX), SC_OK);
    cr_expect(last_call.kind == SC_DIST_ALLREDUCE && last_call.buf == v &&
              last_call.bytes == sizeof v && last_call.count == 4 &&
              last_call.dtype == SC_DIST_F64 && last_call.op == SC_DIST_MAX);
    cr_expect_eq(last_local, SC_OK);
    /* A bad root still reaches the host, which fails the call on every rank. */
    expect_refused(sc_dist_broadcast(v, sizeof v, 3), SC_ERR_INVALID,
                   "root 3 is not a rank (the world has 3)");
    cr_expect(last_call.kind == SC_DIST_BROADCAST && last_local == SC_ERR_INVALID);
    sc_host_set_dist(NULL);
}

Test(dist, a_loader_thread_may_ask_its_rank_but_not_call_collectives)
{
    sc_host_set_dist(&rank_1_of_3);
    cr_expect_not(sc_host_set_loader_thread(true));
    last_call = (sc_dist_call){.name = "none"};
    expect_refused(sc_dist_barrier(), SC_ERR_STATE,
                   "sc_dist_barrier: called from a data-loader thread");
    cr_expect_str_eq(last_call.name, "none", "the host was called");
    cr_expect_eq(sc_dist_rank(), 1);
    cr_expect(sc_host_set_loader_thread(false));
    cr_expect_eq(sc_dist_barrier(), SC_OK);
    sc_host_set_dist(NULL);
}
