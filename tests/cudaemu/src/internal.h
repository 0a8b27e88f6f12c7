#ifndef CUDAEMU_INTERNAL_H
#define CUDAEMU_INTERNAL_H
#include <cuda_runtime.h>
#include <functional>
#include <string>
#include <vector>

struct CUgraph_st;
struct CUstream_st {
    unsigned flags = 0;
    int device = 0;
    CUgraph_st *graph = nullptr; /* capturing into */
    cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    bool origin = false, joined = false, invalidated = false;
    bool pending = false; /* captured work no event has handed back yet */
};
struct CUevent_st {
    CUgraph_st *graph = nullptr; /* recorded inside this capture */
    CUstream_st *stream = nullptr;
    bool covers_all = false;
};
struct emu_node {
    std::string what;
    std::function<void()> fn;
};
struct CUgraph_st {
    std::vector<emu_node> nodes;
    std::vector<CUstream_st *> joined;
};
struct CUgraphExec_st {
    std::vector<emu_node> nodes;
};

namespace cudaemu {
/* Runs fn now, or records it when s is capturing. */
cudaError_t enqueue(cudaStream_t s, const char *what, std::function<void()> fn);
/* Reports and returns false unless [p, p + bytes) is inside one device allocation. */
bool check_device_range(const char *what, const void *p, size_t bytes);
bool is_device(const void *p);
bool is_device_or_pinned(const void *p); /* device or cudaHostAlloc memory */
} // namespace cudaemu
#endif
