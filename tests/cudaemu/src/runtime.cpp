/* The emulated CUDA runtime: settings, reports and notes, errors (sticky
 * faults included), devices and their primary contexts. Memory, streams
 * and graphs are in memory.cpp, stream.cpp and graph.cpp. */
#include <cuda_runtime.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <unistd.h>

#include "runtime_impl.h"

namespace cudaemu {

/* ---- settings ---- */

static double env_number(const char *name, double fallback)
{
    const char *e = getenv(name);
    return e && *e ? strtod(e, nullptr) : fallback;
}

static bool env_is(const char *name, const char *value)
{
    const char *e = getenv(name);
    return e && !strcmp(e, value);
}

static settings_t read_settings()
{
    settings_t s;
    s.devices = (int)env_number("CUDAEMU_DEVICES", 1);
    s.mem_bytes = (size_t)(env_number("CUDAEMU_MEM_MB", 8192) * (1 << 20));
    s.lazy = env_is("CUDAEMU_LAZY", "1");
    s.seed = (unsigned long long)env_number("CUDAEMU_SEED", 0);
    s.hang_s = env_number("CUDAEMU_HANG_S", 120);
    s.verbose = env_is("CUDAEMU_VERBOSE", "1");
    s.reports_continue = env_is("CUDAEMU_REPORTS", "continue");
    s.fault_nth = 1;
    if (const char *f = getenv("CUDAEMU_FAULT")) {
        s.fault_what = f;
        size_t colon = s.fault_what.rfind(':');
        if (colon != std::string::npos) {
            s.fault_nth = strtoul(f + colon + 1, nullptr, 10);
            s.fault_what.resize(colon);
        }
    }
    return s;
}

const settings_t &settings()
{
    static const settings_t s = read_settings();
    return s;
}

/* ---- errors ---- */

static thread_local cudaError_t last_error = cudaSuccess;

cudaError_t fail(cudaError_t e)
{
    if (e != cudaSuccess)
        last_error = e;
    return e;
}

/* ---- devices ---- */

enum fault_state { NO_FAULT, FAULT_UNSEEN, FAULT_SEEN };
static const int MAX_DEVICES = 32; /* the bits of cudaemu_context_mask */
static std::atomic<unsigned> contexts;
static std::atomic<int> faults[MAX_DEVICES];
static thread_local int current = 0;

int device_count()
{
    int n = settings().devices;
    return n < 0 ? 0 : n > MAX_DEVICES ? MAX_DEVICES : n;
}
bool valid_device(int d) { return d >= 0 && d < device_count(); }
int current_device() { return current; }

cudaError_t sticky(int d)
{
    return valid_device(d) && faults[d] == FAULT_SEEN ? fail(cudaErrorIllegalAddress) : cudaSuccess;
}

int use_device()
{
    contexts |= 1u << current;
    return current;
}

cudaError_t enter()
{
    if (!valid_device(current))
        return fail(cudaErrorNoDevice);
    use_device();
    poll();
    return sticky(current);
}

void fault_device(int d)
{
    int expected = NO_FAULT;
    if (faults[d].compare_exchange_strong(expected, FAULT_UNSEEN))
        cudaemu_note("cuda:%d: injected fault (CUDAEMU_FAULT); the error surfaces at the next "
                     "synchronising call", d);
}

cudaError_t fault_seen(int d)
{
    int expected = FAULT_UNSEEN;
    faults[d].compare_exchange_strong(expected, FAULT_SEEN);
    return sticky(d);
}

bool device_faulted(int d) { return faults[d] != NO_FAULT; }

/* ---- reports and notes ---- */

static std::mutex report_mu;
static int reports;

/* In continue mode a run that made reports still fails, at exit. */
static void exit_with_reports()
{
    if (reports) {
        fprintf(stderr, "cudaemu: %d report%s (CUDAEMU_REPORTS=continue): exit status 3\n", reports,
                reports == 1 ? "" : "s");
        fflush(nullptr);
        _exit(3);
    }
}

static void vprint(const char *prefix, const char *fmt, va_list ap)
{
    fprintf(stderr, "cudaemu: %s", prefix);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
}
} // namespace cudaemu

using namespace cudaemu;

extern "C" void cudaemu_report(const char *fmt, ...)
{
    std::lock_guard<std::mutex> lock(report_mu);
    va_list ap;
    va_start(ap, fmt);
    vprint("", fmt, ap);
    va_end(ap);
    if (!settings().reports_continue)
        abort();
    if (reports++ == 0)
        atexit(exit_with_reports);
}

extern "C" int cudaemu_report_count(void)
{
    std::lock_guard<std::mutex> lock(report_mu);
    return reports;
}

extern "C" void cudaemu_note(const char *fmt, ...)
{
    static auto &said = *new std::set<std::string>; /* never destroyed, as notes may come late */
    if (!settings().verbose)
        return;
    std::lock_guard<std::mutex> lock(report_mu);
    if (!said.insert(fmt).second)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprint("note: ", fmt, ap);
    va_end(ap);
}

extern "C" unsigned cudaemu_context_mask(void) { return contexts; }

extern "C" cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    cudaError_t s = sticky(current);
    return s != cudaSuccess ? s : e;
}

extern "C" cudaError_t cudaPeekAtLastError(void)
{
    cudaError_t s = sticky(current);
    return s != cudaSuccess ? s : last_error;
}

#define CUDAEMU_ERRORS(X)                                                                          \
    X(cudaSuccess, "no error")                                                                     \
    X(cudaErrorInvalidValue, "invalid argument")                                                   \
    X(cudaErrorMemoryAllocation, "out of memory")                                                  \
    X(cudaErrorInvalidConfiguration, "invalid configuration argument")                             \
    X(cudaErrorInvalidDevicePointer, "invalid device pointer")                                     \
    X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                        \
    X(cudaErrorNoDevice, "no CUDA-capable device is detected")                                     \
    X(cudaErrorInvalidDevice, "invalid device ordinal")                                            \
    X(cudaErrorInvalidResourceHandle, "invalid resource handle")                                   \
    X(cudaErrorIllegalState, "the operation cannot be performed in the present state")              \
    X(cudaErrorNotReady, "device not ready")                                                       \
    X(cudaErrorIllegalAddress, "an illegal memory access was encountered")                         \
    X(cudaErrorLaunchTimeout, "the launch timed out and was terminated")                           \
    X(cudaErrorLaunchFailure, "unspecified launch failure")                                        \
    X(cudaErrorNotPermitted, "operation not permitted")                                            \
    X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing")       \
    X(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture") \
    X(cudaErrorStreamCaptureUnjoined,                                                              \
      "capture sequence contains a fork that was not joined to the primary stream")                \
    X(cudaErrorStreamCaptureIsolation, "dependency created on uncaptured work in another stream")  \
    X(cudaErrorStreamCaptureImplicit,                                                              \
      "operation would make the legacy stream depend on a capturing blocking stream")              \
    X(cudaErrorCapturedEvent, "operation not permitted on an event last recorded in a capturing "  \
                              "stream")                                                            \
    X(cudaErrorStreamCaptureWrongThread,                                                           \
      "attempt to terminate a thread-local capture sequence from another thread")

extern "C" const char *cudaGetErrorString(cudaError_t e)
{
#define CUDAEMU_ERROR_STRING(code, text)                                                           \
    case code: return text;
    switch (e) {
    CUDAEMU_ERRORS(CUDAEMU_ERROR_STRING)
    }
    return "unrecognized error code";
}

extern "C" const char *cudaGetErrorName(cudaError_t e)
{
#define CUDAEMU_ERROR_NAME(code, text)                                                             \
    case code: return #code;
    switch (e) {
    CUDAEMU_ERRORS(CUDAEMU_ERROR_NAME)
    }
    return "unrecognized error code";
}

/* ---- devices ---- */

extern "C" cudaError_t cudaGetDeviceCount(int *n)
{
    *n = device_count();
    return *n ? cudaSuccess : fail(cudaErrorNoDevice);
}

extern "C" cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
    if (!valid_device(d))
        return fail(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "emulated GPU %d", d);
    /* GPU-c0daee00-0000-4000-8000-<index as 12 hex digits>, as nvml.cpp says */
    static const unsigned char uuid_head[10] = {0xc0, 0xda, 0xee, 0, 0, 0, 0x40, 0, 0x80, 0};
    memcpy(p->uuid.bytes, uuid_head, sizeof uuid_head);
    for (int i = 0; i < 6; i++)
        p->uuid.bytes[10 + i] = (char)((unsigned long long)d >> (8 * (5 - i)));
    p->major = 8;
    p->minor = 0;
    p->totalGlobalMem = settings().mem_bytes;
    p->sharedMemPerBlock = 48 << 10;
    p->warpSize = 32;
    p->multiProcessorCount = 2;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->unifiedAddressing = 1;
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int d)
{
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess)
        return cudaErrorInvalidDevice;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrUnifiedAddressing: *value = p.unifiedAddressing; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    default: return fail(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

/* CUDA 12 and later: cudaSetDevice initialises the device's primary
 * context, so a probe that sets each GPU in turn opens a context on each. */
extern "C" cudaError_t cudaSetDevice(int d)
{
    if (!valid_device(d))
        return fail(cudaErrorInvalidDevice);
    current = d;
    return enter();
}

extern "C" cudaError_t cudaGetDevice(int *d)
{
    *d = current;
    return cudaSuccess;
}
