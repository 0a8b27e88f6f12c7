/* The interface between the emulator's parts: the runtime (streams, memory,
 * devices, errors) implements it; the kernel executor, the libraries and
 * the NCCL/NVML stand-ins build on it. The runtime's own data structures
 * live in runtime_impl.h. */
#ifndef CUDAEMU_INTERNAL_H
#define CUDAEMU_INTERNAL_H
#include <cuda_runtime.h>

#include <functional>

namespace cudaemu {
/* Queues `run` on stream s, after everything queued on s before it and
 * after every event s waits on has completed. Eager mode (default) runs it
 * at once; lazy mode (CUDAEMU_LAZY=1) runs it at a later synchronising call,
 * streams interleaved in a seeded random order (CUDAEMU_SEED) honouring
 * only stream order and events. On a capturing stream it is recorded into
 * the graph. `done`, if given, is polled (never blocking) after `run` until
 * true: the op completes only then (collectives). `run` and `done` are
 * called with no emulator lock held, never two at once in the process, on
 * whichever host thread makes progress. An error is also recorded as the
 * calling thread's last error (a sticky fault of s's device, a capture
 * rule broken). */
cudaError_t enqueue(cudaStream_t s, const char *what, std::function<void()> run,
                    std::function<bool()> done = nullptr);

/* Reports and returns false unless [p, p + bytes) lies inside one live
 * device allocation (a freed one is named as such). */
bool check_device_range(const char *what, const void *p, size_t bytes);
bool is_device(const void *p);           /* inside a live cudaMalloc block */
bool is_device_or_pinned(const void *p); /* ... or a live cudaHostAlloc block */
int device_of(const void *p);            /* GPU index of the allocation holding p; -1 if none */
int stream_device(cudaStream_t s);       /* the GPU a stream belongs to (legacy stream: current) */
int current_device();                    /* the calling thread's current GPU */
int device_count();                      /* CUDAEMU_DEVICES */
size_t device_bytes_allocated(int d);    /* cudaMalloc bytes live on GPU d */

/* The calling thread's current GPU, its primary context created first if
 * this is the first call that needs one (what cublasCreate, cudnnCreate and
 * launches do on a real GPU); see cudaemu_context_mask. */
int use_device();

/* Reports and returns false when s belongs to another GPU than the current
 * one, for the calls CUDA rejects then (kernel launches, library calls);
 * copies and cudaStreamWaitEvent may cross GPUs. */
bool check_stream_device(const char *what, cudaStream_t s);

/* Records e as the calling thread's last error (cudaGetLastError) and
 * returns it; cudaSuccess is returned and records nothing. */
cudaError_t fail(cudaError_t e);
} // namespace cudaemu
#endif
