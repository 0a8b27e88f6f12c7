/* Stand-in NVML over the emulated GPUs, from NVML's documented contracts:
 * the device count follows CUDAEMU_DEVICES, memory use follows the
 * emulated allocations of each GPU, and no call opens a CUDA context (what
 * makes NVML the way to probe GPUs). */
#include <nvml.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "internal.h"

struct nvmlDevice_st {
    int index;
};

namespace {

constexpr int max_devices = 32;
nvmlDevice_st devices[max_devices] = {};

std::mutex mu;
int inits; /* nvmlInit_v2 calls not yet matched by nvmlShutdown */

bool initialised(const char *call)
{
    std::lock_guard<std::mutex> lock(mu);
    if (inits)
        return true;
    cudaemu_report("%s before nvmlInit_v2 (or after the matching nvmlShutdown)", call);
    return false;
}

/* The GPU a handle names, or -1 (reported) when it is not one of ours. */
int device_index(nvmlDevice_t d, const char *call)
{
    uintptr_t a = (uintptr_t)d, first = (uintptr_t)devices;
    if (a >= first && (a - first) % sizeof *devices == 0 &&
        (a - first) / sizeof *devices < (size_t)cudaemu::device_count())
        return d->index;
    cudaemu_report("%s: %p is not a handle from nvmlDeviceGetHandleByIndex_v2", call, (void *)d);
    return -1;
}

/* The checks every device query makes: NVML initialised, a valid handle,
 * the out-pointers not null. On success the GPU's index is *i. */
nvmlReturn_t query(nvmlDevice_t d, const void *out, const char *call, int *i)
{
    if (!initialised(call))
        return NVML_ERROR_UNINITIALIZED;
    *i = device_index(d, call);
    if (*i < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (out)
        return NVML_SUCCESS;
    cudaemu_report("%s: a null pointer for the result", call);
    return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t copy_string(const char *s, char *out, unsigned length)
{
    if (strlen(s) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

/* The emulated GPU's description: the runtime's, read without a context. */
cudaDeviceProp properties(int i)
{
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, i);
    return p;
}

} // namespace

extern "C" nvmlReturn_t nvmlInit_v2(void)
{
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < max_devices; i++)
        devices[i].index = i;
    inits++;
    return NVML_SUCCESS;
}

extern "C" nvmlReturn_t nvmlShutdown(void)
{
    std::lock_guard<std::mutex> lock(mu);
    if (!inits) {
        cudaemu_report("nvmlShutdown without a matching nvmlInit_v2");
        return NVML_ERROR_UNINITIALIZED;
    }
    inits--;
    return NVML_SUCCESS;
}

extern "C" const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    default: return "Unknown Error";
    }
}

extern "C" nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!initialised("nvmlDeviceGetCount_v2"))
        return NVML_ERROR_UNINITIALIZED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned)cudaemu::device_count();
    return NVML_SUCCESS;
}

extern "C" nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!initialised("nvmlDeviceGetHandleByIndex_v2"))
        return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= (unsigned)cudaemu::device_count())
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

extern "C" nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    int i;
    if (nvmlReturn_t r = query(device, name, "nvmlDeviceGetName", &i))
        return r;
    return copy_string(properties(i).name, name, length);
}

extern "C" nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    int i;
    if (nvmlReturn_t r = query(device, memory, "nvmlDeviceGetMemoryInfo", &i))
        return r;
    memory->total = properties(i).totalGlobalMem;
    memory->used = cudaemu::device_bytes_allocated(i);
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

extern "C" nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major,
                                                           int *minor)
{
    int i;
    if (nvmlReturn_t r = query(device, major && minor ? major : nullptr,
                               "nvmlDeviceGetCudaComputeCapability", &i))
        return r;
    cudaDeviceProp p = properties(i);
    *major = p.major;
    *minor = p.minor;
    return NVML_SUCCESS;
}

extern "C" nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    int i;
    if (nvmlReturn_t r = query(device, uuid, "nvmlDeviceGetUUID", &i))
        return r;
    /* The runtime's UUID of the GPU, in NVML's text: what names a GPU to both. */
    cudaDeviceProp p = properties(i);
    const unsigned char *b = (const unsigned char *)p.uuid.bytes;
    char s[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    snprintf(s, sizeof s,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
    return copy_string(s, uuid, length);
}
