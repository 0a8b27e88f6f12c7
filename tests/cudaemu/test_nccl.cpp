/* The emulator's NCCL and NVML: ranks as threads (each on its own emulated
 * GPU) and as processes, exact results, non-blocking init, each fault of
 * CUDAEMU_NCCL_FAULT, abort, contract breaches; NVML's view of the GPUs. */
#include <criterion/criterion.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <nvml.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <pthread.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

static const size_t N = 1000;

/* Every test runs in a process of its own: settings are read at first use. */
static void gpus(const char *fault = nullptr, bool reports_continue = false)
{
    setenv("CUDAEMU_DEVICES", "3", 1);
    if (fault)
        setenv("CUDAEMU_NCCL_FAULT", fault, 1);
    if (reports_continue)
        setenv("CUDAEMU_REPORTS", "continue", 1);
}

/* Runs body(rank) on one thread per rank, rank r on cuda:r. */
static void on_ranks(int n, const std::function<void(int)> &body)
{
    std::vector<std::thread> threads;
    for (int r = 0; r < n; r++)
        threads.emplace_back([&body, r]() {
            cudaSetDevice(r);
            body(r);
        });
    for (auto &t : threads)
        t.join();
}

/* Where the ranks of a test wait for each other between phases. */
struct barrier {
    pthread_barrier_t b;
    explicit barrier(int n) { pthread_barrier_init(&b, nullptr, n); }
    ~barrier() { pthread_barrier_destroy(&b); }
    void wait() { pthread_barrier_wait(&b); }
};

static ncclUniqueId new_id()
{
    int version;
    cr_assert_eq(ncclGetVersion(&version), ncclSuccess);
    cr_assert_eq(version, NCCL_VERSION(2, 28, 9));
    ncclUniqueId id;
    cr_assert_eq(ncclGetUniqueId(&id), ncclSuccess);
    return id;
}

static float input(int rank, size_t i) { return 0.1f * (float)(i + 1) / (float)(rank + 3); }

/* What NCCL's documented ops give, folded in rank order. */
static float expected(ncclRedOp_t op, int n, size_t i)
{
    float inv = (float)(1.0 / n), a = op == ncclAvg ? input(0, i) * inv : input(0, i);
    for (int r = 1; r < n; r++) {
        float b = input(r, i);
        switch (op) {
        case ncclSum: a = a + b; break;
        case ncclProd: a = a * b; break;
        case ncclMax: a = a < b ? b : a; break;
        case ncclMin: a = b < a ? b : a; break;
        default: a = a + b * inv; break;
        }
    }
    return a;
}

/* A rank's GPU side: its stream and a buffer of N floats holding its input. */
struct rank_gpu {
    cudaStream_t s;
    float *buf;
    explicit rank_gpu(int rank)
    {
        std::vector<float> in(N);
        for (size_t i = 0; i < N; i++)
            in[i] = input(rank, i);
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        cudaMalloc((void **)&buf, N * sizeof(float));
        cudaMemcpy(buf, in.data(), N * sizeof(float), cudaMemcpyHostToDevice);
    }
    std::vector<float> read() const
    {
        std::vector<float> out(N);
        cudaMemcpy(out.data(), buf, N * sizeof(float), cudaMemcpyDeviceToHost);
        return out;
    }
    ~rank_gpu()
    {
        cudaFree(buf);
        cudaStreamDestroy(s);
    }
};

static void check_allreduce(int n, ncclRedOp_t op)
{
    ncclUniqueId id = new_id();
    std::vector<std::vector<float>> out(n);
    std::vector<ncclResult_t> r(n * 3);
    on_ranks(n, [&](int rank) {
        rank_gpu g(rank);
        ncclComm_t c;
        r[rank * 3] = ncclCommInitRank(&c, n, id, rank);
        r[rank * 3 + 1] = ncclAllReduce(g.buf, g.buf, N, ncclFloat, op, c, g.s);
        cudaStreamSynchronize(g.s);
        out[rank] = g.read();
        r[rank * 3 + 2] = ncclCommDestroy(c);
    });
    for (ncclResult_t e : r)
        cr_assert_eq(e, ncclSuccess, "%s", ncclGetErrorString(e));
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(out[0][i], expected(op, n, i), "op %d, %d ranks, [%zu]: %.9g, not %.9g", op,
                     n, i, out[0][i], expected(op, n, i));
    for (int rank = 1; rank < n; rank++)
        cr_assert(!memcmp(out[rank].data(), out[0].data(), N * sizeof(float)),
                  "rank %d's result differs from rank 0's", rank);
}

Test(nccl, allreduce_2_threads)
{
    gpus();
    check_allreduce(2, ncclSum);
}

Test(nccl, allreduce_3_threads_every_op)
{
    gpus();
    for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg})
        check_allreduce(3, op);
}

Test(nccl, allreduce_int_wraps_and_out_of_place)
{
    gpus();
    ncclUniqueId id = new_id();
    int32_t got[2][2];
    on_ranks(2, [&](int rank) {
        int32_t in[2] = {INT32_MAX, -7 * (rank + 1)}, *send, *recv;
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        cudaMalloc((void **)&send, sizeof in);
        cudaMalloc((void **)&recv, sizeof in);
        cudaMemcpy(send, in, sizeof in, cudaMemcpyHostToDevice);
        ncclComm_t c;
        ncclCommInitRank(&c, 2, id, rank);
        ncclAllReduce(send, recv, 2, ncclInt32, ncclSum, c, s);
        cudaStreamSynchronize(s);
        cudaMemcpy(got[rank], recv, sizeof in, cudaMemcpyDeviceToHost);
        ncclCommDestroy(c);
    });
    for (int rank = 0; rank < 2; rank++) {
        cr_assert_eq(got[rank][0], (int32_t)((uint32_t)INT32_MAX * 2u));
        cr_assert_eq(got[rank][1], -21);
    }
}

/* bf16 rounds after each addition, in rank order: (1 + 2^-8) + 2^-8 is 1
 * (ties to even twice), where the exact sum would round up. */
Test(nccl, allreduce_bf16_rounds_each_step)
{
    gpus();
    ncclUniqueId id = new_id();
    float got[3];
    on_ranks(3, [&](int rank) {
        __nv_bfloat16 x = __float2bfloat16_rn(rank ? 1.0f / 256 : 1.0f), *d;
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        cudaMalloc((void **)&d, sizeof x);
        cudaMemcpy(d, &x, sizeof x, cudaMemcpyHostToDevice);
        ncclComm_t c;
        ncclCommInitRank(&c, 3, id, rank);
        ncclAllReduce(d, d, 1, ncclBfloat16, ncclSum, c, s);
        cudaStreamSynchronize(s);
        cudaMemcpy(&x, d, sizeof x, cudaMemcpyDeviceToHost);
        got[rank] = x;
        ncclCommDestroy(c);
    });
    for (int rank = 0; rank < 3; rank++)
        cr_assert_eq(got[rank], 1.0f, "rank %d: %.9g", rank, got[rank]);
}

static void check_broadcast(int n, int root)
{
    ncclUniqueId id = new_id();
    std::vector<std::vector<float>> out(n);
    on_ranks(n, [&](int rank) {
        rank_gpu g(rank);
        ncclComm_t c;
        ncclCommInitRank(&c, n, id, rank);
        ncclBroadcast(g.buf, g.buf, N, ncclFloat, root, c, g.s);
        cudaStreamSynchronize(g.s);
        out[rank] = g.read();
        ncclCommDestroy(c);
    });
    for (int rank = 0; rank < n; rank++)
        for (size_t i = 0; i < N; i++)
            cr_assert_eq(out[rank][i], input(root, i), "rank %d [%zu]", rank, i);
}

Test(nccl, broadcast_2_and_3_threads)
{
    gpus();
    check_broadcast(2, 0);
    check_broadcast(3, 2);
}

/* Several collectives in a row, alternating kinds: the slots are reused. */
Test(nccl, many_collectives_in_order)
{
    gpus();
    ncclUniqueId id = new_id();
    std::vector<std::vector<float>> out(3);
    on_ranks(3, [&](int rank) {
        rank_gpu g(rank);
        ncclComm_t c;
        ncclCommInitRank(&c, 3, id, rank);
        for (int k = 0; k < 5; k++) {
            ncclAllReduce(g.buf, g.buf, N, ncclFloat, ncclMax, c, g.s);
            ncclBroadcast(g.buf, g.buf, N / 2, ncclFloat, k % 3, c, g.s);
        }
        cudaStreamSynchronize(g.s);
        out[rank] = g.read();
        ncclCommDestroy(c);
    });
    for (int rank = 0; rank < 3; rank++)
        for (size_t i = 0; i < N; i++)
            cr_assert_eq(out[rank][i], input(0, i));
}

Test(nccl, nonblocking_init)
{
    gpus();
    ncclUniqueId id = new_id();
    std::vector<ncclResult_t> first(2), last(2), finalized(2);
    std::vector<std::vector<float>> out(2);
    on_ranks(2, [&](int rank) {
        rank_gpu g(rank);
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclComm_t c;
        first[rank] = ncclCommInitRankConfig(&c, 2, id, rank, &config);
        ncclResult_t state;
        do
            ncclCommGetAsyncError(c, &state);
        while (state == ncclInProgress);
        last[rank] = state;
        ncclAllReduce(g.buf, g.buf, N, ncclFloat, ncclSum, c, g.s);
        cudaStreamSynchronize(g.s);
        out[rank] = g.read();
        finalized[rank] = ncclCommFinalize(c);
        ncclCommDestroy(c);
    });
    for (int rank = 0; rank < 2; rank++) {
        cr_assert_eq(first[rank], ncclInProgress);
        cr_assert_eq(finalized[rank], ncclSuccess);
        cr_assert_eq(last[rank], ncclSuccess);
        cr_assert_eq(out[rank][7], expected(ncclSum, 2, 7));
    }
}

/* One thread drives both GPUs: inits and collectives in groups. */
Test(nccl, one_thread_two_gpus_in_groups)
{
    gpus();
    ncclUniqueId id = new_id();
    ncclComm_t c[2];
    cr_assert_eq(ncclGroupStart(), ncclSuccess);
    for (int rank = 0; rank < 2; rank++) {
        cudaSetDevice(rank);
        cr_assert_eq(ncclCommInitRank(&c[rank], 2, id, rank), ncclSuccess);
    }
    cr_assert_eq(ncclGroupEnd(), ncclSuccess);
    std::vector<rank_gpu *> g;
    for (int rank = 0; rank < 2; rank++) {
        cudaSetDevice(rank);
        g.push_back(new rank_gpu(rank));
    }
    cr_assert_eq(ncclGroupStart(), ncclSuccess);
    for (int rank = 0; rank < 2; rank++)
        cr_assert_eq(ncclAllReduce(g[rank]->buf, g[rank]->buf, N, ncclFloat, ncclSum, c[rank],
                                   g[rank]->s),
                     ncclSuccess);
    cr_assert_eq(ncclGroupEnd(), ncclSuccess);
    for (int rank = 0; rank < 2; rank++) {
        cudaSetDevice(rank);
        cudaStreamSynchronize(g[rank]->s);
        cr_assert_eq(g[rank]->read()[9], expected(ncclSum, 2, 9));
        delete g[rank];
        cr_assert_eq(ncclCommDestroy(c[rank]), ncclSuccess);
    }
}

/* A collective captured into a CUDA graph runs at each launch, as the
 * next collective of its communicator. */
Test(nccl, captured_allreduce_runs_per_launch)
{
    gpus();
    ncclUniqueId id = new_id();
    std::vector<std::vector<float>> out(2);
    on_ranks(2, [&](int rank) {
        rank_gpu g(rank);
        ncclComm_t c;
        ncclCommInitRank(&c, 2, id, rank);
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        cudaStreamBeginCapture(g.s, cudaStreamCaptureModeThreadLocal);
        ncclAllReduce(g.buf, g.buf, N, ncclFloat, ncclSum, c, g.s);
        cudaStreamEndCapture(g.s, &graph);
        cudaGraphInstantiate(&exec, graph, 0);
        for (int launch = 0; launch < 3; launch++)
            cudaGraphLaunch(exec, g.s);
        ncclBroadcast(g.buf, g.buf, N, ncclFloat, 1, c, g.s);
        cudaStreamSynchronize(g.s);
        out[rank] = g.read();
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        ncclCommDestroy(c);
    });
    for (int rank = 0; rank < 2; rank++) /* x0 + x1, then doubled twice */
        cr_assert_eq(out[rank][3], 4 * expected(ncclSum, 2, 3), "rank %d", rank);
}

static ncclComm_t init_nonblocking(const ncclUniqueId &id, int n, int rank)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t c;
    ncclCommInitRankConfig(&c, n, id, rank, &config);
    return c;
}

static ncclResult_t state_of(ncclComm_t c)
{
    ncclResult_t state;
    cr_assert_eq(ncclCommGetAsyncError(c, &state), ncclSuccess);
    return state;
}

Test(nccl, fault_hang_init_then_abort)
{
    gpus("hang_init:1");
    ncclUniqueId id = new_id();
    ncclComm_t c[2];
    on_ranks(2, [&](int rank) { c[rank] = init_nonblocking(id, 2, rank); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int rank = 0; rank < 2; rank++)
        cr_assert_eq(state_of(c[rank]), ncclInProgress, "rank %d", rank);
    for (int rank = 0; rank < 2; rank++)
        cr_assert_eq(ncclCommAbort(c[rank]), ncclSuccess);
}

/* Rank 1 never posts; rank 0's synchronisation waits until its
 * communicator is aborted from another thread. */
Test(nccl, fault_hang_and_abort_unblocks)
{
    gpus("hang:1");
    ncclUniqueId id = new_id();
    ncclComm_t c[2];
    on_ranks(2, [&](int rank) { ncclCommInitRank(&c[rank], 2, id, rank); });
    bool returned = false;
    std::thread rank0([&]() {
        cudaSetDevice(0);
        rank_gpu g(0);
        ncclAllReduce(g.buf, g.buf, N, ncclFloat, ncclSum, c[0], g.s);
        cudaStreamSynchronize(g.s);
        returned = true;
    });
    std::thread rank1([&]() {
        cudaSetDevice(1);
        rank_gpu g(1);
        ncclAllReduce(g.buf, g.buf, N, ncclFloat, ncclSum, c[1], g.s);
        cudaStreamSynchronize(g.s); /* its own op hangs until the abort */
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cr_assert(!returned, "the allreduce completed without rank 1");
    cr_assert_eq(ncclCommAbort(c[0]), ncclSuccess);
    rank0.join();
    cr_assert(returned);
    cr_assert_eq(ncclCommAbort(c[1]), ncclSuccess);
    rank1.join();
}

/* A non-blocking finalize returns at once and completes in the background:
 * here never, rank 1 hanging, so a deadline can end it with an abort. */
Test(nccl, nonblocking_finalize_is_polled)
{
    gpus("hang:1");
    ncclUniqueId id = new_id();
    ncclComm_t c[2];
    std::vector<rank_gpu *> g(2);
    on_ranks(2, [&](int rank) {
        c[rank] = init_nonblocking(id, 2, rank);
        while (state_of(c[rank]) == ncclInProgress)
            ;
        g[rank] = new rank_gpu(rank);
        ncclAllReduce(g[rank]->buf, g[rank]->buf, N, ncclFloat, ncclSum, c[rank], g[rank]->s);
    });
    cudaSetDevice(0);
    cr_assert_eq(ncclCommFinalize(c[0]), ncclInProgress);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    cr_assert_eq(state_of(c[0]), ncclInProgress);
    for (int rank = 0; rank < 2; rank++) {
        cr_assert_eq(ncclCommAbort(c[rank]), ncclSuccess);
        cudaSetDevice(rank);
        delete g[rank];
    }
}

Test(nccl, fault_error_fails_every_rank)
{
    gpus("error:1:1"); /* rank 1's second collective */
    ncclUniqueId id = new_id();
    std::vector<ncclResult_t> after_first(2), after_second(2);
    barrier first_checked(2);
    on_ranks(2, [&](int rank) {
        rank_gpu g(rank);
        ncclComm_t c;
        ncclCommInitRank(&c, 2, id, rank);
        ncclAllReduce(g.buf, g.buf, N, ncclFloat, ncclSum, c, g.s);
        cudaStreamSynchronize(g.s);
        ncclCommGetAsyncError(c, &after_first[rank]);
        first_checked.wait();
        ncclAllReduce(g.buf, g.buf, N, ncclFloat, ncclSum, c, g.s);
        cudaStreamSynchronize(g.s);
        ncclCommGetAsyncError(c, &after_second[rank]);
        ncclCommAbort(c);
    });
    for (int rank = 0; rank < 2; rank++) {
        cr_assert_eq(after_first[rank], ncclSuccess, "rank %d", rank);
        cr_assert_eq(after_second[rank], ncclRemoteError, "rank %d", rank);
    }
}

/* Ends a test that expected reports the way a program ends: the emulator
 * turns the exit status into 3, which .exit_code = 3 checks (Criterion
 * looks at the status only of a test that exits inside its body). */
[[noreturn]] static void exit_after_reports() { exit(EXIT_SUCCESS); }

Test(nccl, mismatched_collectives_reported, .exit_code = 3)
{
    gpus(nullptr, true);
    ncclUniqueId id = new_id();
    std::vector<ncclResult_t> state(2);
    barrier checked(2); /* an abort would fail the other rank's collective */
    on_ranks(2, [&](int rank) {
        rank_gpu g(rank);
        ncclComm_t c;
        ncclCommInitRank(&c, 2, id, rank);
        ncclAllReduce(g.buf, g.buf, rank ? N / 2 : N, ncclFloat, ncclSum, c, g.s);
        cudaStreamSynchronize(g.s);
        ncclCommGetAsyncError(c, &state[rank]);
        checked.wait();
        ncclCommAbort(c);
    });
    cr_expect_eq(cudaemu_report_count(), 1);
    cr_expect_eq(state[0], ncclInvalidUsage);
    cr_expect_eq(state[1], ncclInvalidUsage);
    exit_after_reports();
}

Test(nccl, bad_arguments_reported, .exit_code = 3)
{
    gpus(nullptr, true);
    ncclUniqueId id = new_id();
    ncclComm_t c;
    cudaSetDevice(0);
    cr_assert_eq(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
    float *other, *mine, *host = (float *)malloc(N * sizeof(float));
    cudaStream_t theirs;
    cudaSetDevice(1);
    cudaMalloc((void **)&other, N * sizeof(float));
    cudaStreamCreateWithFlags(&theirs, cudaStreamNonBlocking);
    cudaSetDevice(0);
    cudaMalloc((void **)&mine, N * sizeof(float));
    cr_expect_eq(ncclAllReduce(host, host, N, ncclFloat, ncclSum, c, nullptr), ncclInvalidArgument);
    cr_expect_eq(ncclAllReduce(other, other, N, ncclFloat, ncclSum, c, nullptr),
                 ncclInvalidArgument);
    cr_expect_eq(ncclAllReduce(mine, mine, N, ncclFloat, ncclSum, c, theirs), ncclInvalidArgument);
    cr_expect_eq(ncclAllReduce(mine, mine, N, ncclFloat16, ncclSum, c, nullptr),
                 ncclInvalidArgument);
    cr_expect_eq(ncclBroadcast(mine, mine, N + 1, ncclFloat, 0, c, nullptr), ncclInvalidArgument);
    cr_expect_eq(ncclCommDestroy(c), ncclSuccess);
    cr_expect_eq(ncclBroadcast(mine, mine, N, ncclFloat, 0, c, nullptr), ncclInvalidArgument);
    cr_expect_eq(cudaemu_report_count(), 6);
    free(host);
    exit_after_reports();
}

/* Two processes meet through the id alone. */
Test(nccl, two_processes_allreduce)
{
    gpus();
    ncclUniqueId id = new_id();
    pid_t child = fork();
    int rank = child == 0 ? 1 : 0;
    cudaSetDevice(rank);
    std::vector<float> out;
    {
        rank_gpu g(rank);
        ncclComm_t c;
        ncclCommInitRank(&c, 2, id, rank);
        ncclAllReduce(g.buf, g.buf, N, ncclFloat, ncclAvg, c, g.s);
        cudaStreamSynchronize(g.s);
        out = g.read();
        ncclCommDestroy(c);
    }
    bool right = true;
    for (size_t i = 0; i < N; i++)
        right &= out[i] == expected(ncclAvg, 2, i);
    if (child == 0)
        _exit(right ? 0 : 1);
    int status;
    waitpid(child, &status, 0);
    cr_assert(right, "rank 0's result");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank 1's result (status %#x)",
              status);
}

/* A peer process that exits without calling the collective: NCCL's
 * remote error, not a hang. */
Test(nccl, peer_process_exit_is_remote_error)
{
    gpus();
    ncclUniqueId id = new_id();
    pid_t child = fork();
    int rank = child == 0 ? 1 : 0;
    cudaSetDevice(rank);
    ncclComm_t c;
    ncclCommInitRank(&c, 2, id, rank);
    if (child == 0)
        _exit(0);
    waitpid(child, nullptr, 0);
    rank_gpu g(0);
    cr_assert_eq(ncclAllReduce(g.buf, g.buf, N, ncclFloat, ncclSum, c, g.s), ncclSuccess);
    cudaStreamSynchronize(g.s);
    cr_assert_eq(state_of(c), ncclRemoteError);
    cr_assert_eq(ncclCommAbort(c), ncclSuccess);
}

Test(nvml, probes_without_contexts)
{
    gpus();
    cr_assert_eq(nvmlInit_v2(), NVML_SUCCESS);
    unsigned n;
    cr_assert_eq(nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    cr_assert_eq(n, 3);
    nvmlDevice_t dev[3];
    for (unsigned i = 0; i < n; i++) {
        cr_assert_eq(nvmlDeviceGetHandleByIndex_v2(i, &dev[i]), NVML_SUCCESS);
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        int major, minor;
        nvmlMemory_t m;
        cr_assert_eq(nvmlDeviceGetName(dev[i], name, sizeof name), NVML_SUCCESS);
        std::string cuda_name = "emulated GPU " + std::to_string(i);
        cr_assert_str_eq(name, cuda_name.c_str());
        cr_assert_eq(nvmlDeviceGetUUID(dev[i], uuid, sizeof uuid), NVML_SUCCESS);
        cudaDeviceProp p;
        cudaGetDeviceProperties(&p, (int)i);
        const unsigned char *b = (const unsigned char *)p.uuid.bytes;
        char cuda_uuid[64]; /* the runtime's UUID names the same GPU */
        snprintf(cuda_uuid, sizeof cuda_uuid,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                 b[14], b[15]);
        cr_assert_str_eq(uuid, cuda_uuid);
        cr_assert_eq(nvmlDeviceGetCudaComputeCapability(dev[i], &major, &minor), NVML_SUCCESS);
        cr_assert_eq(nvmlDeviceGetMemoryInfo(dev[i], &m), NVML_SUCCESS);
        cr_assert_eq(m.used, 0);
        cr_assert_eq(m.free, m.total);
    }
    cr_assert_eq(nvmlDeviceGetHandleByIndex_v2(3, &dev[0]), NVML_ERROR_INVALID_ARGUMENT);
    char tiny[4];
    cr_assert_eq(nvmlDeviceGetName(dev[1], tiny, sizeof tiny), NVML_ERROR_INSUFFICIENT_SIZE);
    cr_assert_eq(cudaemu_context_mask(), 0u, "NVML opened a CUDA context");
    cr_assert_eq(nvmlShutdown(), NVML_SUCCESS);
}

Test(nvml, memory_follows_allocations)
{
    gpus();
    nvmlInit_v2();
    nvmlDevice_t d1, d2;
    nvmlDeviceGetHandleByIndex_v2(1, &d1);
    nvmlDeviceGetHandleByIndex_v2(2, &d2);
    void *p;
    cudaSetDevice(1);
    cudaMalloc(&p, 3 << 20);
    nvmlMemory_t m1, m2;
    nvmlDeviceGetMemoryInfo(d1, &m1);
    nvmlDeviceGetMemoryInfo(d2, &m2);
    cr_assert_geq(m1.used, 3u << 20);
    cr_assert_eq(m1.free, m1.total - m1.used);
    cr_assert_eq(m2.used, 0);
    cudaFree(p);
    nvmlDeviceGetMemoryInfo(d1, &m1);
    cr_assert_eq(m1.used, 0);
    nvmlShutdown();
}
