/* The emulated CUDA runtime: each rule it checks fires, and what it
 * emulates behaves as documented: reports and notes, several GPUs and their
 * contexts, memory and copies (pageable and pinned), lazy stream order,
 * collectives' `done` polls, capture, sticky faults. Ops are queued with
 * cudaemu::enqueue, as the kernel executor and the libraries queue theirs.
 * Every test runs in a process of its own: the CUDAEMU_* settings it sets
 * first are read at the emulator's first call. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "internal.h"

static void set(const char *name, const char *value) { setenv(name, value, 1); }

/* The call returns `err` and makes exactly one report. */
#define EXPECT_REPORTED(call, err)                                                                 \
    do {                                                                                           \
        int before_ = cudaemu_report_count();                                                      \
        cr_expect_eq((call), (err), "%s", #call);                                                  \
        cr_expect_eq(cudaemu_report_count(), before_ + 1, "%s: one report", #call);                \
    } while (0)

/* Ends a test that expected reports the way a program ends: the emulator
 * turns the exit status into 3, which .exit_code = 3 checks. (Criterion
 * looks at the status only of a test that exits inside its body.) */
[[noreturn]] static void exit_after_reports() { exit(EXIT_SUCCESS); }

static cudaStream_t new_stream(unsigned flags = cudaStreamNonBlocking)
{
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, flags), cudaSuccess);
    return s;
}

static cudaEvent_t new_event()
{
    cudaEvent_t e;
    cr_assert_eq(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
    return e;
}

static void *device_alloc(size_t bytes)
{
    void *p;
    cr_assert_eq(cudaMalloc(&p, bytes), cudaSuccess);
    return p;
}

static void op(cudaStream_t s, const char *what, std::function<void()> run)
{
    cr_assert_eq(cudaemu::enqueue(s, what, std::move(run)), cudaSuccess, "enqueue %s", what);
}

/* ---- reports and notes ---- */

Test(reports, abort_by_default, .signal = SIGABRT)
{
    int x;
    cudaFree(&x);
}

Test(reports, continue_counts_and_exits_with_3, .exit_code = 3)
{
    set("CUDAEMU_REPORTS", "continue");
    int x;
    EXPECT_REPORTED(cudaFree(&x), cudaErrorInvalidValue);
    cr_expect_eq(cudaemu_report_count(), 1);
    exit_after_reports();
}

Test(reports, notes_print_once_when_verbose, .init = cr_redirect_stderr)
{
    set("CUDAEMU_VERBOSE", "1");
    cudaemu_note("a remark %d", 1);
    cudaemu_note("a remark %d", 2);
    cr_expect_eq(cudaemu_report_count(), 0);
    fflush(stderr);
    cr_expect_stderr_eq_str("cudaemu: note: a remark 1\n");
}

Test(reports, notes_are_silent_by_default, .init = cr_redirect_stderr)
{
    cudaemu_note("a remark");
    cudaStream_t s = new_stream(cudaStreamDefault); /* a blocking stream: a note */
    op(s, "work", [] {});
    cudaStreamDestroy(s);
    fflush(stderr);
    cr_expect_stderr_eq_str("");
}

Test(reports, error_names_and_strings)
{
    const cudaError_t codes[] = {cudaSuccess, cudaErrorInvalidValue, cudaErrorMemoryAllocation,
                                 cudaErrorInvalidMemcpyDirection, cudaErrorInvalidDevice,
                                 cudaErrorInvalidResourceHandle, cudaErrorNotReady,
                                 cudaErrorIllegalAddress, cudaErrorLaunchTimeout,
                                 cudaErrorStreamCaptureUnsupported, cudaErrorStreamCaptureInvalidated,
                                 cudaErrorStreamCaptureUnjoined, cudaErrorStreamCaptureIsolation,
                                 cudaErrorStreamCaptureImplicit, cudaErrorCapturedEvent};
    for (cudaError_t e : codes) {
        cr_expect_str_neq(cudaGetErrorString(e), "unrecognized error code", "%d", (int)e);
        cr_expect_eq(strncmp(cudaGetErrorName(e), "cuda", 4), 0, "%d", (int)e);
    }
    cr_expect_str_eq(cudaGetErrorName(cudaErrorIllegalAddress), "cudaErrorIllegalAddress");
    cr_expect_str_eq(cudaGetErrorString(cudaErrorNotReady), "device not ready");
}

/* ---- several GPUs ---- */

Test(devices, current_device_is_per_thread)
{
    set("CUDAEMU_DEVICES", "3");
    int n, d = -1;
    cr_assert_eq(cudaGetDeviceCount(&n), cudaSuccess);
    cr_expect_eq(n, 3);
    cr_expect_eq(cudaSetDevice(3), cudaErrorInvalidDevice);
    cr_assert_eq(cudaSetDevice(2), cudaSuccess);
    std::thread([&]() { cudaGetDevice(&d); }).join();
    cr_expect_eq(d, 0, "a new thread starts on cuda:0");
    cudaGetDevice(&d);
    cr_expect_eq(d, 2);
}

Test(devices, allocations_streams_and_events_belong_to_the_current_device)
{
    set("CUDAEMU_DEVICES", "2");
    cudaSetDevice(1);
    void *p = device_alloc(64);
    cudaStream_t s = new_stream();
    cudaSetDevice(0);
    cr_expect_eq(cudaemu::device_of(p), 1);
    cr_expect_eq(cudaemu::device_of((char *)p + 63), 1);
    cr_expect_eq(cudaemu::stream_device(s), 1);
    cr_expect_eq(cudaemu::stream_device(nullptr), 0, "the legacy stream is the current device's");
    cr_expect_eq(cudaFree(p), cudaSuccess, "another device's pointer may be freed");
}

Test(devices, memory_limit_and_info_per_device)
{
    set("CUDAEMU_DEVICES", "2");
    set("CUDAEMU_MEM_MB", "64");
    size_t free_b, total_b;
    cudaSetDevice(1);
    void *p = device_alloc(16 << 20);
    cudaMemGetInfo(&free_b, &total_b);
    cr_expect_eq(total_b, (size_t)64 << 20);
    cr_expect_eq(free_b, (size_t)48 << 20);
    cudaSetDevice(0);
    cudaMemGetInfo(&free_b, &total_b);
    cr_expect_eq(free_b, (size_t)64 << 20);
    void *q;
    cr_expect_eq(cudaMalloc(&q, (size_t)65 << 20), cudaErrorMemoryAllocation);
    cr_expect_eq(cudaemu::device_bytes_allocated(1), (size_t)16 << 20);
    cudaFree(p);
    cr_expect_eq(cudaemu::device_bytes_allocated(1), 0);
}

Test(devices, probing_opens_no_context)
{
    set("CUDAEMU_DEVICES", "4");
    int n, v, d;
    cudaDeviceProp prop;
    cudaGetDeviceCount(&n);
    for (int i = 0; i < n; i++) {
        cudaGetDeviceProperties(&prop, i);
        cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, i);
    }
    cudaGetDevice(&d);
    cr_expect_eq(cudaemu_context_mask(), 0u);
    cudaSetDevice(2); /* CUDA 12: makes the primary context */
    cr_expect_eq(cudaemu_context_mask(), 1u << 2);
    size_t free_b, total_b;
    cudaMemGetInfo(&free_b, &total_b);
    cr_expect_eq(cudaemu_context_mask(), 1u << 2);
    std::thread([]() { cudaFree(nullptr); }).join(); /* the classic context opener, on cuda:0 */
    cr_expect_eq(cudaemu_context_mask(), 1u << 2 | 1u);
}

Test(devices, event_record_needs_its_stream_s_device, .exit_code = 3)
{
    set("CUDAEMU_DEVICES", "2");
    set("CUDAEMU_REPORTS", "continue");
    cudaEvent_t e = new_event(); /* cuda:0 */
    cudaSetDevice(1);
    cudaStream_t s = new_stream();
    EXPECT_REPORTED(cudaEventRecord(e, s), cudaErrorInvalidResourceHandle);
    EXPECT_REPORTED(cudaEventRecord(e, nullptr), cudaErrorInvalidResourceHandle);
    cr_expect_eq(cudaStreamWaitEvent(s, e, 0), cudaSuccess, "waiting may cross devices");
    cr_expect_eq(cudaemu_report_count(), 2);
    exit_after_reports();
}

Test(devices, launches_and_memsets_need_the_current_device, .exit_code = 3)
{
    set("CUDAEMU_DEVICES", "2");
    set("CUDAEMU_REPORTS", "continue");
    void *p = device_alloc(64);
    cudaStream_t s = new_stream();
    cudaSetDevice(1);
    cr_expect(cudaemu::check_stream_device("a kernel", nullptr));
    int before = cudaemu_report_count();
    cr_expect_not(cudaemu::check_stream_device("a kernel", s));
    cr_expect_eq(cudaemu_report_count(), before + 1);
    EXPECT_REPORTED(cudaMemsetAsync(p, 0, 64, s), cudaErrorInvalidResourceHandle);
    float x = 1;
    int before_copy = cudaemu_report_count();
    cr_expect_eq(cudaMemcpyAsync(p, &x, sizeof x, cudaMemcpyHostToDevice, s), cudaSuccess,
                 "a copy may use another device's stream");
    cr_expect_eq(cudaemu_report_count(), before_copy);
    exit_after_reports();
}

Test(devices, copies_between_gpus_and_events_across_them)
{
    set("CUDAEMU_DEVICES", "2");
    set("CUDAEMU_LAZY", "1");
    float in[4] = {1, 2, 3, 4}, out[4] = {0};
    float *a = (float *)device_alloc(sizeof in);
    cudaStream_t s0 = new_stream();
    cudaEvent_t written = new_event();
    cudaMemcpyAsync(a, in, sizeof in, cudaMemcpyHostToDevice, s0);
    cudaEventRecord(written, s0);
    cudaSetDevice(1);
    float *b = (float *)device_alloc(sizeof in), *c = (float *)device_alloc(sizeof in);
    cudaStream_t s1 = new_stream();
    cudaStreamWaitEvent(s1, written, 0);
    cr_expect_eq(cudaMemcpyAsync(b, a, sizeof in, cudaMemcpyDefault, s1), cudaSuccess);
    cr_expect_eq(cudaMemcpyPeerAsync(c, 1, a, 0, sizeof in, s1), cudaSuccess);
    cr_assert_eq(cudaMemcpyAsync(out, c, sizeof out, cudaMemcpyDeviceToHost, s1), cudaSuccess);
    cr_expect_eq(memcmp(in, out, sizeof in), 0);
    cudaMemcpy(out, b, sizeof out, cudaMemcpyDeviceToHost);
    cr_expect_eq(memcmp(in, out, sizeof in), 0);
}

/* ---- memory and copies ---- */

Test(memory, new_allocations_hold_nan)
{
    float *d = (float *)device_alloc(8 * sizeof(float)), h[8];
    cr_assert_eq(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
    for (float x : h)
        cr_expect(std::isnan(x));
}

Test(memory, frees_are_checked, .exit_code = 3)
{
    set("CUDAEMU_REPORTS", "continue");
    char *d = (char *)device_alloc(64);
    void *pinned, *host = malloc(16);
    cr_assert_eq(cudaHostAlloc(&pinned, 64, cudaHostAllocDefault), cudaSuccess);
    EXPECT_REPORTED(cudaFree(d + 8), cudaErrorInvalidValue);
    EXPECT_REPORTED(cudaFree(pinned), cudaErrorInvalidValue);
    EXPECT_REPORTED(cudaFree(host), cudaErrorInvalidValue);
    EXPECT_REPORTED(cudaFreeHost(d), cudaErrorInvalidValue);
    cr_expect_eq(cudaFree(d), cudaSuccess);
    EXPECT_REPORTED(cudaFree(d), cudaErrorInvalidValue); /* double free */
    cr_expect_eq(cudaFreeHost(pinned), cudaSuccess);
    EXPECT_REPORTED(cudaFreeHost(pinned), cudaErrorInvalidValue);
    free(host);
    exit_after_reports();
}

Test(memory, use_after_free_shows, .exit_code = 3)
{
    set("CUDAEMU_REPORTS", "continue");
    float h[4];
    float *d = (float *)device_alloc(sizeof h);
    cr_expect(cudaemu::check_device_range("a read", d, sizeof h));
    cudaFree(d);
    int before = cudaemu_report_count();
    cr_expect_not(cudaemu::check_device_range("a read", d, sizeof h));
    cr_expect_not(cudaemu::is_device(d));
    cr_expect_eq(cudaemu_report_count(), before + 1);
    EXPECT_REPORTED(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    exit_after_reports();
}

Test(memory, copy_kinds_and_bounds_are_checked, .exit_code = 3)
{
    set("CUDAEMU_REPORTS", "continue");
    float h[4] = {1, 2, 3, 4}, back[4];
    float *d = (float *)device_alloc(sizeof h), *e = (float *)device_alloc(sizeof h);
    EXPECT_REPORTED(cudaMemcpy(d, e, sizeof h, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_REPORTED(cudaMemcpy(h, back, sizeof h, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    EXPECT_REPORTED(cudaMemcpy(back, d, sizeof h, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
    EXPECT_REPORTED(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToHost), cudaErrorInvalidValue);
    EXPECT_REPORTED(cudaMemcpy(d + 1, h, sizeof h, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    int before = cudaemu_report_count();
    cr_expect_eq(cudaMemcpy(d, h, sizeof h, (cudaMemcpyKind)7), cudaErrorInvalidMemcpyDirection);
    cr_expect_eq(cudaMemcpy(d, h, sizeof h, cudaMemcpyDefault), cudaSuccess);
    cr_expect_eq(cudaMemcpy(e, d, sizeof h, cudaMemcpyDefault), cudaSuccess);
    cr_expect_eq(cudaMemcpy(back, e, sizeof h, cudaMemcpyDefault), cudaSuccess);
    cr_expect_eq(memcmp(h, back, sizeof h), 0);
    cr_expect_eq(cudaemu_report_count(), before);
    exit_after_reports();
}

/* Lazy mode: work waits for a synchronising call, so what a copy reads
 * from host memory, and when, shows. */
Test(memory, an_async_upload_from_pageable_memory_reads_it_at_the_call)
{
    set("CUDAEMU_LAZY", "1");
    cudaStream_t s = new_stream();
    float *d = (float *)device_alloc(sizeof(float)), host = 1, back = 0;
    cudaMemcpyAsync(d, &host, sizeof host, cudaMemcpyHostToDevice, s);
    host = 2; /* the buffer reused before the upload ran */
    cudaStreamSynchronize(s);
    cudaMemcpy(&back, d, sizeof back, cudaMemcpyDeviceToHost);
    cr_expect_eq(back, 1.0f);
}

Test(memory, an_async_upload_from_pinned_memory_reads_it_when_it_runs)
{
    set("CUDAEMU_LAZY", "1");
    cudaStream_t s = new_stream();
    float *pinned, back = 0, *d = (float *)device_alloc(sizeof(float));
    cudaHostAlloc((void **)&pinned, sizeof(float), cudaHostAllocPortable);
    *pinned = 1;
    cudaMemcpyAsync(d, pinned, sizeof(float), cudaMemcpyHostToDevice, s);
    *pinned = 2; /* the buffer reused before the upload ran: the upload sees 2 */
    cudaStreamSynchronize(s);
    cudaMemcpy(&back, d, sizeof back, cudaMemcpyDeviceToHost);
    cr_expect_eq(back, 2.0f);
}

Test(memory, an_async_download_to_pageable_memory_is_synchronous)
{
    set("CUDAEMU_LAZY", "1");
    cudaStream_t s = new_stream();
    float five = 5, back = 0, *pinned, *d = (float *)device_alloc(sizeof(float));
    cudaMemcpyAsync(d, &five, sizeof five, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(&back, d, sizeof back, cudaMemcpyDeviceToHost, s);
    cr_expect_eq(back, 5.0f, "written before the call returned");
    cudaHostAlloc((void **)&pinned, sizeof(float), cudaHostAllocDefault);
    *pinned = 0;
    cudaMemcpyAsync(pinned, d, sizeof(float), cudaMemcpyDeviceToHost, s);
    cr_expect_eq(*pinned, 0.0f, "pinned: not yet written");
    cudaStreamSynchronize(s);
    cr_expect_eq(*pinned, 5.0f);
}

Test(memory, cudaFree_synchronises_the_device)
{
    set("CUDAEMU_LAZY", "1");
    cudaStream_t s = new_stream();
    void *p = device_alloc(16);
    bool ran = false;
    op(s, "kernel using p", [&]() { ran = true; });
    cr_expect_not(ran);
    cudaFree(p);
    cr_expect(ran);
}

/* ---- streams, events, lazy order ---- */

Test(streams, lazy_work_runs_at_synchronising_calls)
{
    set("CUDAEMU_LAZY", "1");
    cudaStream_t s = new_stream();
    cudaEvent_t e = new_event();
    int ran = 0;
    op(s, "first", [&]() { ran++; });
    cudaEventRecord(e, s);
    op(s, "second", [&]() { ran++; });
    cr_expect_eq(ran, 0);
    int polls = 0;
    cudaError_t r;
    while ((r = cudaEventQuery(e)) == cudaErrorNotReady) {
        cr_assert_eq(ran, 0);
        cr_assert_lt(++polls, 100);
    }
    cr_expect_eq(r, cudaSuccess);
    cr_expect_geq(ran, 1, "the event's work ran before it read as done");
    cr_expect_eq(cudaGetLastError(), cudaSuccess, "NotReady is not an error");
    cudaStreamSynchronize(s);
    cr_expect_eq(ran, 2);
}

/* A write on one stream, a read on another, no event between: lazy mode
 * runs them in either order. */
static int stale_reads(bool with_event)
{
    set("CUDAEMU_LAZY", "1");
    set("CUDAEMU_SEED", "7");
    cudaStream_t writer = new_stream(), reader = new_stream();
    cudaEvent_t written = new_event();
    int stale = 0;
    for (int i = 0; i < 64; i++) {
        int value = 0, seen = -1;
        op(writer, "write", [&]() { value = 1; });
        if (with_event) {
            cudaEventRecord(written, writer);
            cudaStreamWaitEvent(reader, written, 0);
        }
        op(reader, "read", [&]() { seen = value; });
        cudaDeviceSynchronize();
        stale += seen == 0;
    }
    return stale;
}

Test(streams, lazy_mode_reorders_streams_without_an_event)
{
    int stale = stale_reads(false);
    cr_expect(stale > 0 && stale < 64, "%d of 64 reads ran first", stale);
}

Test(streams, an_event_orders_two_streams) { cr_expect_eq(stale_reads(true), 0); }

Test(streams, the_legacy_stream_waits_for_blocking_streams)
{
    set("CUDAEMU_LAZY", "1");
    cudaStream_t blocking = new_stream(cudaStreamDefault), other = new_stream();
    for (int i = 0; i < 32; i++) {
        std::vector<int> order;
        op(blocking, "blocking", [&]() { order.push_back(1); });
        op(nullptr, "legacy", [&]() { order.push_back(2); });
        op(blocking, "blocking again", [&]() { order.push_back(3); });
        op(other, "non-blocking", [&]() { order.push_back(0); });
        cudaDeviceSynchronize();
        order.erase(std::find(order.begin(), order.end(), 0));
        cr_assert(order == std::vector<int>({1, 2, 3}));
    }
}

Test(streams, a_destroyed_stream_finishes_its_work, .exit_code = 3)
{
    set("CUDAEMU_LAZY", "1");
    set("CUDAEMU_REPORTS", "continue");
    cudaStream_t s = new_stream();
    bool ran = false;
    op(s, "queued", [&]() { ran = true; });
    cr_expect_eq(cudaStreamDestroy(s), cudaSuccess);
    cudaDeviceSynchronize();
    cr_expect(ran);
    EXPECT_REPORTED(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
    EXPECT_REPORTED(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
    exit_after_reports();
}

/* ---- ops with a `done` poll (collectives) ---- */

Test(collectives, work_behind_an_unfinished_op_waits_and_moves_at_later_calls)
{
    cudaStream_t s = new_stream();
    std::atomic<bool> go{false};
    int after = 0;
    cr_assert_eq(cudaemu::enqueue(s, "collective", [] {}, [&]() { return go.load(); }), cudaSuccess);
    op(s, "after", [&]() { after = 1; });
    cr_expect_eq(after, 0);
    cr_expect_eq(cudaStreamQuery(s), cudaErrorNotReady);
    go = true;
    size_t free_b, total_b;
    cudaMemGetInfo(&free_b, &total_b); /* any later call */
    cr_expect_eq(after, 1);
}

/* Two threads, each driving its GPU, each enqueueing its part of a
 * collective that completes only once both parts ran. */
static void two_ranks()
{
    set("CUDAEMU_DEVICES", "2");
    std::atomic<int> arrived{0};
    int seen[2] = {0, 0};
    auto rank = [&](int r) {
        cudaSetDevice(r);
        cudaStream_t s = new_stream();
        if (r == 1)
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
        cudaemu::enqueue(s, "allreduce", [&]() { arrived++; }, [&]() { return arrived == 2; });
        op(s, "after", [&, r]() { seen[r] = arrived; });
        cr_expect_eq(cudaStreamSynchronize(s), cudaSuccess);
    };
    std::thread t0(rank, 0), t1(rank, 1);
    t0.join();
    t1.join();
    cr_expect_eq(seen[0], 2);
    cr_expect_eq(seen[1], 2);
}

Test(collectives, a_wait_lets_the_other_thread_enqueue_its_part) { two_ranks(); }

Test(collectives, the_same_in_lazy_mode)
{
    set("CUDAEMU_LAZY", "1");
    two_ranks();
}

Test(collectives, a_wait_that_never_ends_is_reported, .exit_code = 3)
{
    set("CUDAEMU_REPORTS", "continue");
    set("CUDAEMU_HANG_S", "0.2");
    cudaStream_t s = new_stream();
    cudaemu::enqueue(s, "lonely allreduce", [] {}, [] { return false; });
    EXPECT_REPORTED(cudaStreamSynchronize(s), cudaErrorLaunchTimeout);
    exit_after_reports();
}

/* ---- sticky faults ---- */

Test(faults, an_injected_fault_surfaces_at_the_next_sync_and_sticks)
{
    set("CUDAEMU_FAULT", "boom:2");
    set("CUDAEMU_DEVICES", "2");
    cudaStream_t s = new_stream();
    int runs = 0;
    for (int i = 0; i < 3; i++)
        op(s, "boom", [&]() { runs++; });
    cr_expect_eq(runs, 1, "the faulting op and what follows never run");
    cr_expect_eq(cudaGetLastError(), cudaSuccess, "not seen at the launch");
    cr_expect_eq(cudaStreamSynchronize(s), cudaErrorIllegalAddress);
    cr_expect_eq(cudaGetLastError(), cudaErrorIllegalAddress);
    cr_expect_eq(cudaGetLastError(), cudaErrorIllegalAddress, "sticky");
    void *p;
    cr_expect_eq(cudaMalloc(&p, 16), cudaErrorIllegalAddress);
    cr_expect_eq(cudaemu::enqueue(s, "more", [] {}), cudaErrorIllegalAddress);
    cr_expect_eq(cudaSetDevice(1), cudaSuccess, "another GPU's context is intact");
    cr_expect_eq(cudaMalloc(&p, 16), cudaSuccess);
}

Test(faults, lazy_mode_faults_when_the_op_runs)
{
    set("CUDAEMU_FAULT", "boom");
    set("CUDAEMU_LAZY", "1");
    cudaStream_t s = new_stream();
    cudaEvent_t e = new_event();
    op(s, "boom", [] {});
    cudaEventRecord(e, s);
    cr_expect_eq(cudaEventSynchronize(e), cudaErrorIllegalAddress);
    cr_expect_eq(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
}

/* ---- capture and graphs ---- */

Test(capture, a_fork_joined_back_makes_a_graph)
{
    set("CUDAEMU_LAZY", "1");
    cudaStream_t origin = new_stream(), side = new_stream();
    cudaEvent_t fork = new_event(), join = new_event();
    std::vector<int> order;
    cr_assert_eq(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    op(origin, "a", [&]() { order.push_back(1); });
    cudaEventRecord(fork, origin);
    cudaStreamWaitEvent(side, fork, 0);
    op(side, "b", [&]() { order.push_back(2); });
    op(origin, "c", [&]() { order.push_back(3); });
    cudaEventRecord(join, side);
    cudaStreamWaitEvent(origin, join, 0);
    op(origin, "d", [&]() { order.push_back(4); });
    cudaGraph_t g;
    cr_assert_eq(cudaStreamEndCapture(origin, &g), cudaSuccess);
    cr_expect(order.empty(), "capture runs nothing");
    cudaGraphExec_t exec;
    cr_assert_eq(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    for (int launch = 0; launch < 8; launch++) {
        order.clear();
        cr_assert_eq(cudaGraphLaunch(exec, origin), cudaSuccess);
        cudaStreamSynchronize(origin);
        cr_assert_eq(order.size(), 4u);
        cr_expect(order.front() == 1 && order.back() == 4);
    }
    enum cudaStreamCaptureStatus status;
    cudaStreamIsCapturing(side, &status);
    cr_expect_eq(status, cudaStreamCaptureStatusNone);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
}

Test(capture, a_fork_never_joined_back, .exit_code = 3)
{
    set("CUDAEMU_REPORTS", "continue");
    cudaStream_t origin = new_stream(), side = new_stream();
    cudaEvent_t fork = new_event();
    cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal);
    cudaEventRecord(fork, origin);
    cudaStreamWaitEvent(side, fork, 0);
    op(side, "left behind", [] {});
    cudaGraph_t g;
    EXPECT_REPORTED(cudaStreamEndCapture(origin, &g), cudaErrorStreamCaptureUnjoined);
    cr_expect_null(g);
    exit_after_reports();
}

Test(capture, unsafe_calls_invalidate_it, .exit_code = 3)
{
    set("CUDAEMU_REPORTS", "continue");
    cudaStream_t s = new_stream();
    cudaEvent_t e = new_event();
    cudaGraph_t g;
    void *p;
    const std::function<cudaError_t()> unsafe[] = {
        [&]() { return cudaMalloc(&p, 16); },
        [&]() { return cudaFree(nullptr); },
        [&]() { return cudaHostAlloc(&p, 16, 0); },
        [&]() { return cudaDeviceSynchronize(); },
        [&]() { return cudaStreamSynchronize(s); },
        [&]() { return cudaStreamQuery(s); },
        [&]() { float x = 0, y; return cudaMemcpy(&y, &x, 4, cudaMemcpyHostToHost); },
        [&]() { return cudaemu::enqueue(nullptr, "legacy work", [] {}); },
    };
    for (auto &call : unsafe) {
        cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
        int before = cudaemu_report_count();
        cr_expect_neq(call(), cudaSuccess);
        cr_expect_eq(cudaemu_report_count(), before + 1);
        cr_expect_eq(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
        cr_expect_null(g);
    }
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    cudaEventRecord(e, s);
    EXPECT_REPORTED(cudaEventQuery(e), cudaErrorCapturedEvent);
    EXPECT_REPORTED(cudaEventSynchronize(e), cudaErrorCapturedEvent);
    cr_expect_eq(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    exit_after_reports();
}

Test(capture, global_mode_forbids_other_threads_thread_local_does_not, .exit_code = 3)
{
    set("CUDAEMU_REPORTS", "continue");
    cudaStream_t s = new_stream();
    cudaGraph_t g;
    cudaError_t other;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    std::thread([&]() { void *p; other = cudaMalloc(&p, 16); }).join();
    cr_expect_eq(other, cudaSuccess);
    cr_expect_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
    cr_expect_eq(cudaemu_report_count(), 0);
    cudaGraphDestroy(g);

    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    std::thread([&]() { void *p; other = cudaMalloc(&p, 16); }).join();
    cr_expect_eq(other, cudaErrorStreamCaptureUnsupported);
    cr_expect_eq(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    cr_expect_eq(cudaemu_report_count(), 1);
    exit_after_reports();
}

Test(capture, relaxed_mode_allows_unsafe_calls)
{
    cudaStream_t s = new_stream();
    cudaGraph_t g;
    void *p;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
    cr_expect_eq(cudaMalloc(&p, 16), cudaSuccess);
    cr_expect_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
    cudaGraphDestroy(g);
}

Test(capture, a_graph_holds_collectives)
{
    set("CUDAEMU_DEVICES", "2");
    std::atomic<int> arrived{0};
    int after[2] = {0, 0};
    auto rank = [&](int r) {
        cudaSetDevice(r);
        cudaStream_t s = new_stream();
        cudaGraph_t g;
        cudaGraphExec_t exec;
        cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
        cudaemu::enqueue(s, "allreduce", [&]() { arrived++; }, [&]() { return arrived == 2; });
        op(s, "after", [&, r]() { after[r] = arrived; });
        cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
        cudaGraphInstantiate(&exec, g, 0);
        cudaGraphLaunch(exec, s);
        cr_expect_eq(cudaStreamSynchronize(s), cudaSuccess);
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(g);
    };
    std::thread t0(rank, 0), t1(rank, 1);
    t0.join();
    t1.join();
    cr_expect(after[0] == 2 && after[1] == 2);
}
