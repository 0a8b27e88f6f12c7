/* nvml.c — a GPU's memory as the driver's management library (NVML)
 * reports it, read without a CUDA context (cuda_impl.h).
 *
 * cudaMemGetInfo answers only for the current device, and making a device
 * current makes a context on it: memory that stays taken on that GPU for
 * as long as the process lives, on GPUs other runs hold too. NVML answers
 * for any GPU without one.
 *
 * NVML is loaded on first use, with dlopen: libnvidia-ml ships with the
 * driver, not with the toolkit, so the backend neither links it nor needs
 * its header, and where it is missing only free memory is unknown. The
 * declarations below follow nvml.h (a C ABI NVIDIA keeps stable: new
 * behaviour comes under new names, such as the _v2 entry points). A CUDA
 * device index is not an NVML one (CUDA orders
 * devices its own way and applies CUDA_VISIBLE_DEVICES): the GPU's UUID
 * names it to both. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda_impl.h"

/* The emulated GPU's build names its own library. */
#ifndef SC_NVML_LIBRARY
#define SC_NVML_LIBRARY "libnvidia-ml.so.1"
#endif

typedef int nvml_return;                    /* nvmlReturn_t */
enum { NVML_SUCCESS = 0, NVML_ERROR_NOT_FOUND = 6 };
typedef struct nvml_device_st *nvml_device; /* nvmlDevice_t */
typedef struct nvml_memory {                /* nvmlMemory_t, in bytes */
    unsigned long long total, free, used;
} nvml_memory;

static struct {
    nvml_return (*init)(void);                           /* nvmlInit_v2 */
    nvml_return (*count)(unsigned *);                    /* nvmlDeviceGetCount_v2 */
    nvml_return (*by_index)(unsigned, nvml_device *);    /* nvmlDeviceGetHandleByIndex_v2 */
    nvml_return (*uuid)(nvml_device, char *, unsigned);  /* nvmlDeviceGetUUID */
    nvml_return (*memory)(nvml_device, nvml_memory *);   /* nvmlDeviceGetMemoryInfo */
    const char *(*error_string)(nvml_return);            /* nvmlErrorString */
    bool ready;
} nvml;
static char why_not[512];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* Resolves name into *fn; false, saying why, when it is missing. */
static bool resolve(void *lib, const char *name, void **fn)
{
    *fn = dlsym(lib, name);
    if (!*fn)
        snprintf(why_not, sizeof why_not, "%s lacks %s", SC_NVML_LIBRARY, name);
    return *fn != NULL;
}

static void load(void)
{
    void *lib = dlopen(SC_NVML_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why_not, sizeof why_not, "NVML could not be loaded: %s", dlerror());
        return;
    }
    if (!resolve(lib, "nvmlInit_v2", (void **)&nvml.init) ||
        !resolve(lib, "nvmlDeviceGetCount_v2", (void **)&nvml.count) ||
        !resolve(lib, "nvmlDeviceGetHandleByIndex_v2", (void **)&nvml.by_index) ||
        !resolve(lib, "nvmlDeviceGetUUID", (void **)&nvml.uuid) ||
        !resolve(lib, "nvmlDeviceGetMemoryInfo", (void **)&nvml.memory) ||
        !resolve(lib, "nvmlErrorString", (void **)&nvml.error_string))
        return;
    nvml_return r = nvml.init(); /* kept until the process ends */
    if (r != NVML_SUCCESS)
        snprintf(why_not, sizeof why_not, "nvmlInit_v2: %s", nvml.error_string(r));
    nvml.ready = r == NVML_SUCCESS;
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx": NVML's text of a UUID. */
static void uuid_text(const cudaUUID_t *uuid, char *buf, size_t size)
{
    const unsigned char *b = (const unsigned char *)uuid->bytes;
    snprintf(buf, size,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

/* The NVML device whose UUID is `uuid`; devices NVML will not describe
 * (no permission) are passed over. */
static nvml_return find_device(const char *uuid, nvml_device *out)
{
    unsigned count = 0;
    nvml_return r = nvml.count(&count);
    for (unsigned i = 0; r == NVML_SUCCESS && i < count; i++) {
        char its[96];
        if (nvml.by_index(i, out) == NVML_SUCCESS &&
            nvml.uuid(*out, its, sizeof its) == NVML_SUCCESS && strcmp(its, uuid) == 0)
            return NVML_SUCCESS;
    }
    return r == NVML_SUCCESS ? NVML_ERROR_NOT_FOUND : r;
}

sc_status sc_nvml_memory(int index, const cudaUUID_t *uuid, size_t *free_bytes,
                         size_t *total_bytes)
{
    pthread_once(&load_once, load);
    if (!nvml.ready)
        return sc_error_set(SC_ERR_UNSUPPORTED, "cuda:%d: free memory unknown: %s", index,
                            why_not);
    char text[64];
    uuid_text(uuid, text, sizeof text);
    nvml_device device;
    nvml_memory memory;
    nvml_return r = find_device(text, &device);
    if (r == NVML_SUCCESS)
        r = nvml.memory(device, &memory);
    if (r != NVML_SUCCESS)
        return sc_error_set(SC_ERR_UNSUPPORTED, "cuda:%d (%s): NVML: %s", index, text,
                            nvml.error_string(r));
    *free_bytes = (size_t)memory.free;
    *total_bytes = (size_t)memory.total;
    return SC_OK;
}
