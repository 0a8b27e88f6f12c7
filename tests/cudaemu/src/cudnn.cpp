/* Reference cuDNN: the legacy-API subset scorch calls, written from the
 * cuDNN 9 documentation. Every documented argument rule is checked: a
 * breach is reported (cudaemu_report) and gets the documented status.
 * Descriptors must be live and set and agree with each other; operands
 * must lie in live device memory of the handle's GPU for their full
 * extent, outputs must not overlap inputs, the workspace must be as large
 * as the chosen algorithm needs (what the heuristics and the
 * Get*WorkspaceSize calls report); a handle belongs to the GPU current at
 * cudnnCreate, is used while that GPU is current, and by one thread at a
 * time. Descriptors are read at the call; the work is queued on the
 * handle's stream (cudaemu::enqueue).
 *
 * Results come from direct loops accumulating in double and rounded once,
 * from the inputs as the algorithm sees them: rounded to TF32 where a
 * tensor-op algorithm runs float data under a math type that permits TF32
 * (CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH on the emulated sm_80), to
 * fp16 under CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION. beta = 0 means the
 * output is not read.
 *
 * Determinism: the routines cuDNN documents as not reproducible
 * (cudnnConvolutionBackwardData with ALGO_0, cudnnConvolutionBackwardFilter
 * with ALGO_0 or ALGO_3, cudnnPoolingBackward with CUDNN_POOLING_MAX) add
 * float partial sums into the output in a random order, as their atomics
 * do, so their results vary in the last bits from run to run; the _v7
 * heuristics rank such algorithms first, as real cuDNN may.
 *
 * Algorithms: each has the emulator's own workspace formula (an im2col
 * buffer, FFT buffers, ...) and the shapes it supports; the heuristics
 * list them all, the unsupported ones last with CUDNN_STATUS_NOT_SUPPORTED
 * (time -1: a heuristic measures nothing). */
#include <cudnn.h>

#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "libs.h"

using cudaemu::num;
using cudaemu::rounding;

struct cudnnContext {
    int device; /* current at cudnnCreate */
    cudaStream_t stream = nullptr;
    std::atomic<int> calls{0}; /* calls in progress: at most one at a time */
};
struct cudnnTensorStruct {
    bool set = false;
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    int n = 0, c = 0, h = 0, w = 0;
    size_t sn = 0, sc = 0, sh = 0, sw = 0; /* strides, in elements */
};
struct cudnnFilterStruct {
    bool set = false;
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    int k = 0, c = 0, r = 0, s = 0;
    size_t sk = 0, sc = 0, sr = 0, ss = 0;
};
struct cudnnConvolutionStruct {
    bool set = false;
    int ph = 0, pw = 0, sh = 1, sw = 1, dh = 1, dw = 1;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    int groups = 1;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};
struct cudnnPoolingStruct {
    bool set = false;
    cudnnPoolingMode_t mode = CUDNN_POOLING_MAX;
    cudnnNanPropagation_t nan = CUDNN_NOT_PROPAGATE_NAN;
    int wh = 0, ww = 0, ph = 0, pw = 0, sh = 0, sw = 0;
};

static cudaemu::registry handles, tensors, filters, convolutions, poolings;

#define FAIL(status, ...)                                                      \
    do {                                                                       \
        cudaemu_report(__VA_ARGS__);                                           \
        return status;                                                         \
    } while (0)

/* ---- handle ---- */

extern "C" cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
    if (!h)
        FAIL(CUDNN_STATUS_BAD_PARAM, "cudnnCreate: handle is NULL");
    *h = new cudnnContext();
    (*h)->device = cudaemu::use_device();
    handles.add(*h);
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
    if (!handles.remove(h))
        FAIL(CUDNN_STATUS_BAD_PARAM, "cudnnDestroy: %p is not a live cuDNN handle", (void *)h);
    delete h; /* queued work holds copies of what it needs */
    return CUDNN_STATUS_SUCCESS;
}

/* One call's use of a handle: h live, no other thread inside a call with
 * it (cuDNN's thread-safety rule), and, for calls that run work, its GPU
 * current. */
class handle_use {
  public:
    handle_use(const char *what, cudnnHandle_t h, bool runs_work) : h_(h)
    {
        status_ = enter(what, runs_work);
    }
    ~handle_use()
    {
        if (entered_)
            h_->calls--;
    }
    handle_use(const handle_use &) = delete;
    handle_use &operator=(const handle_use &) = delete;
    cudnnStatus_t status() const { return status_; }

  private:
    cudnnStatus_t enter(const char *what, bool runs_work)
    {
        if (!handles.has(h_))
            FAIL(CUDNN_STATUS_BAD_PARAM,
                 "%s: %p is not a live cuDNN handle (never created, or destroyed)", what,
                 (void *)h_);
        entered_ = true;
        if (h_->calls++ != 0)
            cudaemu_report("%s: another thread is inside a cuDNN call with the same handle "
                           "(threads must not share a handle simultaneously)", what);
        if (runs_work && cudaemu::current_device() != h_->device)
            FAIL(CUDNN_STATUS_EXECUTION_FAILED,
                 "%s: the handle belongs to GPU %d but GPU %d is current", what, h_->device,
                 cudaemu::current_device());
        return CUDNN_STATUS_SUCCESS;
    }
    cudnnHandle_t h_;
    bool entered_ = false;
    cudnnStatus_t status_;
};

extern "C" cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
    handle_use use("cudnnSetStream", h, false);
    if (use.status())
        return use.status();
    if (s && s != cudaStreamLegacy && cudaemu::stream_device(s) != h->device)
        FAIL(CUDNN_STATUS_MAPPING_ERROR,
             "cudnnSetStream: the stream belongs to GPU %d, the handle to GPU %d",
             cudaemu::stream_device(s), h->device);
    h->stream = s;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnGetStream(cudnnHandle_t h, cudaStream_t *s)
{
    handle_use use("cudnnGetStream", h, false);
    if (use.status())
        return use.status();
    if (!s)
        FAIL(CUDNN_STATUS_BAD_PARAM, "cudnnGetStream: streamId is NULL");
    *s = h->stream;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" const char *cudnnGetErrorString(cudnnStatus_t s)
{
#define NAME(status)                                                           \
    case status:                                                               \
        return #status;
    switch (s) {
        NAME(CUDNN_STATUS_SUCCESS)
        NAME(CUDNN_STATUS_NOT_INITIALIZED)
        NAME(CUDNN_STATUS_BAD_PARAM)
        NAME(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
        NAME(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
        NAME(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
        NAME(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
        NAME(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
        NAME(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
        NAME(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
        NAME(CUDNN_STATUS_INVALID_VALUE)
        NAME(CUDNN_STATUS_NOT_SUPPORTED)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH)
        NAME(CUDNN_STATUS_INTERNAL_ERROR)
        NAME(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
        NAME(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
        NAME(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED)
        NAME(CUDNN_STATUS_EXECUTION_FAILED)
    }
#undef NAME
    return "CUDNN_STATUS_UNKNOWN";
}

/* ---- descriptors ---- */

template <class T> static cudnnStatus_t create(cudaemu::registry &live, T **d, const char *what)
{
    if (!d)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: descriptor pointer is NULL", what);
    *d = new T();
    live.add(*d);
    return CUDNN_STATUS_SUCCESS;
}
template <class T> static cudnnStatus_t destroy(cudaemu::registry &live, T *d, const char *what)
{
    if (!d) /* documented: destroying NULL does nothing */
        return CUDNN_STATUS_SUCCESS;
    if (!live.remove(d))
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: %p is not a live descriptor (destroyed twice?)", what,
             (void *)d);
    delete d;
    return CUDNN_STATUS_SUCCESS;
}
/* d was created, not destroyed, and set. */
static bool usable(cudaemu::registry &live, const void *d, bool set, const char *what,
                   const char *name)
{
    if (!d || !live.has(d)) {
        cudaemu_report("%s: %s %p is not a live descriptor", what, name, d);
        return false;
    }
    if (!set) {
        cudaemu_report("%s: %s was never set", what, name);
        return false;
    }
    return true;
}
static bool usable(const char *what, const char *name, cudnnTensorDescriptor_t d)
{
    return usable(tensors, d, d && tensors.has(d) && d->set, what, name);
}
static bool usable(const char *what, const char *name, cudnnFilterDescriptor_t d)
{
    return usable(filters, d, d && filters.has(d) && d->set, what, name);
}
static bool usable(const char *what, const char *name, cudnnConvolutionDescriptor_t d)
{
    return usable(convolutions, d, d && convolutions.has(d) && d->set, what, name);
}
static bool usable(const char *what, const char *name, cudnnPoolingDescriptor_t d)
{
    return usable(poolings, d, d && poolings.has(d) && d->set, what, name);
}

static bool type_valid(cudnnDataType_t t)
{
    return t >= CUDNN_DATA_FLOAT && t <= CUDNN_DATA_FAST_FLOAT_FOR_FP8;
}
/* The data types this emulator computes with. */
static bool num_of(cudnnDataType_t t, num *out)
{
    switch (t) {
    case CUDNN_DATA_FLOAT: *out = num::f32; return true;
    case CUDNN_DATA_DOUBLE: *out = num::f64; return true;
    case CUDNN_DATA_HALF: *out = num::f16; return true;
    case CUDNN_DATA_BFLOAT16: *out = num::bf16; return true;
    default: return false;
    }
}
static size_t esize(cudnnDataType_t t)
{
    num n = num::f32;
    num_of(t, &n);
    return cudaemu::num_size(n);
}
/* Checks the format and dimensions Set*4dDescriptor take. */
static cudnnStatus_t dims_ok(const char *what, cudnnTensorFormat_t f, cudnnDataType_t t,
                             const int dims[4])
{
    if (f != CUDNN_TENSOR_NCHW && f != CUDNN_TENSOR_NHWC && f != CUDNN_TENSOR_NCHW_VECT_C)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: format %d", what, (int)f);
    if (!type_valid(t))
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: data type %d", what, (int)t);
    if (dims[0] <= 0 || dims[1] <= 0 || dims[2] <= 0 || dims[3] <= 0)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: dimensions %d %d %d %d (each must be > 0)", what,
             dims[0], dims[1], dims[2], dims[3]);
    if ((double)dims[0] * dims[1] * dims[2] * dims[3] > 2147483647.0)
        FAIL(CUDNN_STATUS_NOT_SUPPORTED, "%s: more than 2 Giga-elements", what);
    if (f == CUDNN_TENSOR_NCHW_VECT_C)
        FAIL(CUDNN_STATUS_NOT_SUPPORTED, "%s: CUDNN_TENSOR_NCHW_VECT_C is not emulated", what);
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d)
{
    return create(tensors, d, "cudnnCreateTensorDescriptor");
}
extern "C" cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d)
{
    return destroy(tensors, d, "cudnnDestroyTensorDescriptor");
}
extern "C" cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d,
                                                    cudnnTensorFormat_t f, cudnnDataType_t t,
                                                    int n, int c, int h, int w)
{
    const char *what = "cudnnSetTensor4dDescriptor";
    if (!d || !tensors.has(d))
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: %p is not a live descriptor", what, (void *)d);
    const int dims[4] = {n, c, h, w};
    if (cudnnStatus_t s = dims_ok(what, f, t, dims))
        return s;
    d->set = true, d->type = t;
    d->n = n, d->c = c, d->h = h, d->w = w;
    if (f == CUDNN_TENSOR_NCHW)
        d->sw = 1, d->sh = w, d->sc = (size_t)h * w, d->sn = (size_t)c * h * w;
    else
        d->sc = 1, d->sw = c, d->sh = (size_t)w * c, d->sn = (size_t)h * w * c;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d)
{
    return create(filters, d, "cudnnCreateFilterDescriptor");
}
extern "C" cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d)
{
    return destroy(filters, d, "cudnnDestroyFilterDescriptor");
}
extern "C" cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t,
                                                    cudnnTensorFormat_t f, int k, int c, int h,
                                                    int w)
{
    const char *what = "cudnnSetFilter4dDescriptor";
    if (!d || !filters.has(d))
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: %p is not a live descriptor", what, (void *)d);
    const int dims[4] = {k, c, h, w};
    if (cudnnStatus_t s = dims_ok(what, f, t, dims))
        return s;
    d->set = true, d->type = t;
    d->k = k, d->c = c, d->r = h, d->s = w;
    if (f == CUDNN_TENSOR_NCHW) /* KCRS */
        d->ss = 1, d->sr = w, d->sc = (size_t)h * w, d->sk = (size_t)c * h * w;
    else /* KRSC */
        d->sc = 1, d->ss = c, d->sr = (size_t)w * c, d->sk = (size_t)h * w * c;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d)
{
    return create(convolutions, d, "cudnnCreateConvolutionDescriptor");
}
extern "C" cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d)
{
    return destroy(convolutions, d, "cudnnDestroyConvolutionDescriptor");
}
extern "C" cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph,
                                                         int pw, int sh, int sw, int dh, int dw,
                                                         cudnnConvolutionMode_t mode,
                                                         cudnnDataType_t compute)
{
    const char *what = "cudnnSetConvolution2dDescriptor";
    if (!d || !convolutions.has(d))
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: %p is not a live descriptor", what, (void *)d);
    if (ph < 0 || pw < 0 || sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: padding %d %d, stride %d %d, dilation %d %d", what, ph,
             pw, sh, sw, dh, dw);
    if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: mode %d", what, (int)mode);
    if (!type_valid(compute))
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: compute type %d", what, (int)compute);
    d->set = true;
    d->ph = ph, d->pw = pw, d->sh = sh, d->sw = sw, d->dh = dh, d->dw = dw;
    d->mode = mode;
    d->compute = compute;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int g)
{
    if (!d || !convolutions.has(d))
        FAIL(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionGroupCount: %p is not a live descriptor",
             (void *)d);
    if (g < 1)
        FAIL(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionGroupCount: %d groups", g);
    d->groups = g;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d,
                                                     cudnnMathType_t m)
{
    if (!d || !convolutions.has(d))
        FAIL(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionMathType: %p is not a live descriptor",
             (void *)d);
    if (m != CUDNN_DEFAULT_MATH && m != CUDNN_TENSOR_OP_MATH &&
        m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && m != CUDNN_FMA_MATH)
        FAIL(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionMathType: math type %d", (int)m);
    d->math = m;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- operands and scaling factors ---- */

static size_t numel(const cudnnTensorStruct &t) { return (size_t)t.n * t.c * t.h * t.w; }
static size_t tensor_bytes(const cudnnTensorStruct &t) { return numel(t) * esize(t.type); }
static size_t filter_bytes(const cudnnFilterStruct &f)
{
    return (size_t)f.k * f.c * f.r * f.s * esize(f.type);
}
static size_t at(const cudnnTensorStruct &t, int n, int c, int h, int w)
{
    return n * t.sn + c * t.sc + h * t.sh + w * t.sw;
}

struct operand {
    const char *name;
    const void *p;
    size_t bytes; /* 0: absent */
    bool written;
};
/* Each operand lies in live device memory of GPU `device`, and (overlap)
 * no written one overlaps another. */
static bool operands_ok(const char *what, int device, std::initializer_list<operand> ops,
                        bool overlap = true)
{
    for (const operand &o : ops)
        if (!cudaemu::operand_on((std::string(what) + " " + o.name).c_str(), o.p, o.bytes, device))
            return false;
    for (const operand &a : ops)
        for (const operand &b : ops)
            if (overlap && a.written && &a != &b &&
                !cudaemu::disjoint((std::string(what) + ": " + a.name + " and " + b.name).c_str(),
                                   a.p, a.bytes, b.p, b.bytes))
                return false;
    return true;
}

/* alpha or beta: a host pointer to a float (a double for double data). */
static bool scale_of(const char *what, const char *name, const void *p, num t, double *out)
{
    if (!p) {
        cudaemu_report("%s: %s is NULL", what, name);
        return false;
    }
    if (cudaemu::is_device(p)) {
        cudaemu_report("%s: %s %p is device memory; cuDNN reads scaling factors from host memory",
                       what, name, p);
        return false;
    }
    *out = t == num::f64 ? *(const double *)p : *(const float *)p;
    return true;
}

/* out[i] = alpha * v + beta * out[i]; beta 0: out[i] not read. */
static void blend(void *out, num t, size_t i, double alpha, double beta, double v)
{
    cudaemu::store(out, t, i, alpha * v + (beta == 0 ? 0 : beta * cudaemu::load(out, t, i)));
}

/* ---- convolution: geometry ---- */

struct conv_geom {
    cudnnTensorStruct x, y;
    cudnnFilterStruct w;
    cudnnConvolutionStruct c;
    num t;
};

/* The output size along one dimension, or -1 when the dilated filter is
 * larger than the padded input. */
static int conv_out(int in, int pad, int filter, int dilation, int stride)
{
    int span = (filter - 1) * dilation + 1;
    return in + 2 * pad < span ? -1 : (in + 2 * pad - span) / stride + 1;
}

/* The documented supported configurations: data type and compute type. */
static bool conv_config(cudnnDataType_t data, cudnnDataType_t compute)
{
    switch (data) {
    case CUDNN_DATA_FLOAT: return compute == CUDNN_DATA_FLOAT;
    case CUDNN_DATA_DOUBLE: return compute == CUDNN_DATA_DOUBLE;
    case CUDNN_DATA_HALF: return compute == CUDNN_DATA_HALF || compute == CUDNN_DATA_FLOAT;
    case CUDNN_DATA_BFLOAT16: return compute == CUDNN_DATA_FLOAT;
    default: return false; /* the integer configurations are not emulated */
    }
}

/* x, w and c agree (channels, groups, sizes); the output dims into o. */
static cudnnStatus_t conv_input_ok(const char *what, const cudnnTensorStruct &x,
                                   const cudnnFilterStruct &w, const cudnnConvolutionStruct &c,
                                   int o[4])
{
    if (w.k % c.groups)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: %d output channels in %d groups", what, w.k, c.groups);
    if (x.c != w.c * c.groups)
        FAIL(CUDNN_STATUS_BAD_PARAM,
             "%s: x has %d channels, the filter %d per group, %d groups", what, x.c, w.c,
             c.groups);
    o[0] = x.n, o[1] = w.k;
    o[2] = conv_out(x.h, c.ph, w.r, c.dh, c.sh);
    o[3] = conv_out(x.w, c.pw, w.s, c.dw, c.sw);
    if (o[2] < 0 || o[3] < 0)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: the filter (%dx%d, dilation %d %d) is larger than the "
             "padded input (%dx%d)", what, w.r, w.s, c.dh, c.dw, x.h + 2 * c.ph, x.w + 2 * c.pw);
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(cudnnConvolutionDescriptor_t cd,
                                                               cudnnTensorDescriptor_t xd,
                                                               cudnnFilterDescriptor_t wd,
                                                               int *n, int *c, int *h, int *w)
{
    const char *what = "cudnnGetConvolution2dForwardOutputDim";
    if (!usable(what, "convDesc", cd) || !usable(what, "inputTensorDesc", xd) ||
        !usable(what, "filterDesc", wd))
        return CUDNN_STATUS_BAD_PARAM;
    if (!n || !c || !h || !w)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: an output pointer is NULL", what);
    int o[4];
    if (cudnnStatus_t s = conv_input_ok(what, *xd, *wd, *cd, o))
        return s;
    *n = o[0], *c = o[1], *h = o[2], *w = o[3];
    return CUDNN_STATUS_SUCCESS;
}

/* The convolution of x by w under c giving y, as the forward direction
 * sees it (backward data: x is dx, y is dy); copies into g. */
static cudnnStatus_t conv_check(const char *what, cudnnTensorDescriptor_t x,
                                cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c,
                                cudnnTensorDescriptor_t y, conv_geom *g)
{
    if (!usable(what, "x", x) || !usable(what, "w", w) || !usable(what, "convDesc", c) ||
        !usable(what, "y", y))
        return CUDNN_STATUS_BAD_PARAM;
    if (x->type != w->type || x->type != y->type)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: data types differ (x %d, w %d, y %d)", what, x->type,
             w->type, y->type);
    if (!conv_config(x->type, c->compute))
        FAIL(CUDNN_STATUS_NOT_SUPPORTED, "%s: data type %d with compute type %d is not a "
             "supported (emulated) configuration", what, x->type, c->compute);
    int o[4];
    if (cudnnStatus_t s = conv_input_ok(what, *x, *w, *c, o))
        return s;
    if (y->n != o[0] || y->c != o[1])
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: y is [%d, %d, ...], the convolution gives [%d, %d, ...]",
             what, y->n, y->c, o[0], o[1]);
    if (y->h != o[2] || y->w != o[3])
        FAIL(CUDNN_STATUS_NOT_SUPPORTED, "%s: y is %dx%d, cudnnGetConvolution2dForwardOutputDim "
             "gives %dx%d", what, y->h, y->w, o[2], o[3]);
    *g = {*x, *y, *w, *c, num::f32};
    num_of(x->type, &g->t);
    return CUDNN_STATUS_SUCCESS;
}

/* ---- convolution: algorithms ---- */

enum conv_dir { FWD, BWD_DATA, BWD_FILTER, CONV_DIRS };

struct algo_spec {
    int algo;
    bool deterministic;
    bool tensor_ops; /* has tensor-core kernels */
    bool (*fits)(const conv_geom &);
    size_t (*workspace)(const conv_geom &);
};

static bool fits_any(const conv_geom &) { return true; }
static bool fits_never(const conv_geom &) { return false; }
static bool fits_unit_stride(const conv_geom &g) /* the FFT algorithms */
{
    return g.c.sh == 1 && g.c.sw == 1 && g.c.dh == 1 && g.c.dw == 1 && g.c.groups == 1;
}
static bool fits_3x3(const conv_geom &g) /* Winograd F(4x4, 3x3) */
{
    return fits_unit_stride(g) && g.w.r == 3 && g.w.s == 3;
}

static size_t ws_none(const conv_geom &) { return 0; }
static size_t ws_index_table(const conv_geom &g) /* an offset per filter tap */
{
    return (size_t)g.w.c * g.w.r * g.w.s * 8;
}
static size_t ws_im2col(const conv_geom &g) /* one image's column matrix */
{
    return (size_t)g.x.c * g.w.r * g.w.s * g.y.h * g.y.w * cudaemu::num_size(g.t);
}
static size_t ws_filter_copy(const conv_geom &g) /* a float copy of the filter */
{
    return (size_t)g.w.k * g.w.c * g.w.r * g.w.s * 4;
}
static size_t pow2_at_least(size_t v)
{
    size_t p = 1;
    while (p < v)
        p *= 2;
    return p;
}
static size_t fft_planes(const conv_geom &g) /* x, w and y planes, transformed */
{
    return (size_t)g.x.n * g.x.c + (size_t)g.w.k * g.w.c + (size_t)g.y.n * g.y.c;
}
static size_t ws_fft(const conv_geom &g) /* complex float planes of the padded size */
{
    size_t fh = pow2_at_least(g.x.h + 2 * g.c.ph), fw = pow2_at_least(g.x.w + 2 * g.c.pw);
    return fft_planes(g) * fh * (fw / 2 + 1) * 8;
}
static size_t ws_fft_tiling(const conv_geom &g) /* 32x32 tiles of each plane */
{
    size_t tiles = (size_t)((g.y.h + 31) / 32) * ((g.y.w + 31) / 32);
    return fft_planes(g) * tiles * 32 * 17 * 8;
}
static size_t ws_winograd(const conv_geom &g) /* 6x6 transforms of 4x4 output tiles */
{
    size_t tiles = (size_t)((g.y.h + 3) / 4) * ((g.y.w + 3) / 4);
    return fft_planes(g) * tiles * 36 * 4;
}

/* Each direction's algorithms in the order the heuristics rank them. */
static const algo_spec fwd_algos[] = {
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, true, true, fits_any, ws_index_table},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, true, true, fits_3x3, ws_winograd},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, true, false, fits_unit_stride, ws_fft_tiling},
    {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, true, true, fits_any, ws_im2col},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, true, false, fits_any, ws_none},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT, true, false, fits_unit_stride, ws_fft},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, true, false, fits_3x3, ws_none},
    /* not implemented in cuDNN */
    {CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, true, false, fits_never, ws_none},
};
static const algo_spec bwd_data_algos[] = {
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, false, false, fits_any, ws_none},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, true, true, fits_any, ws_none},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, true, true, fits_3x3, ws_winograd},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, true, false, fits_unit_stride, ws_fft_tiling},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, true, false, fits_unit_stride, ws_fft},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, true, false, fits_3x3, ws_none},
};
static const algo_spec bwd_filter_algos[] = {
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, false, false, fits_any, ws_none},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, false, false, fits_any, ws_filter_copy},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, true, true, fits_any, ws_filter_copy},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, true, false, fits_unit_stride, ws_fft_tiling},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, true, true, fits_3x3, ws_winograd},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, true, false, fits_unit_stride, ws_fft},
    /* not implemented in cuDNN */
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD, true, false, fits_never, ws_none},
};
struct algo_table {
    const algo_spec *specs;
    int count;
};
static const algo_table algo_tables[CONV_DIRS] = {
    {fwd_algos, CUDNN_CONVOLUTION_FWD_ALGO_COUNT},
    {bwd_data_algos, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT},
    {bwd_filter_algos, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT},
};

/* algo's spec in dir, or NULL when algo is no algorithm of dir. */
static const algo_spec *find_algo(conv_dir dir, int algo)
{
    const algo_table &t = algo_tables[dir];
    for (int i = 0; i < t.count; i++)
        if (t.specs[i].algo == algo)
            return &t.specs[i];
    return nullptr;
}

/* Whether a tensor-op kernel of a runs g (data that tensor cores take, a
 * math type that permits them). */
static bool uses_tensor_ops(const algo_spec &a, const conv_geom &g)
{
    return a.tensor_ops && g.t != num::f64 && g.c.math != CUDNN_FMA_MATH;
}
/* The math type a heuristic entry for a reports. */
static cudnnMathType_t entry_math(const algo_spec &a, const conv_geom &g)
{
    if (uses_tensor_ops(a, g))
        return g.c.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && g.t == num::f32
                   ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                   : CUDNN_TENSOR_OP_MATH;
    return g.c.math == CUDNN_FMA_MATH ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}
/* What a rounds float inputs to under g's math type: TF32 on tensor cores
 * (unless NVIDIA_TF32_OVERRIDE=0), fp16 when down-conversion is allowed. */
static rounding conv_rounding(const algo_spec &a, const conv_geom &g)
{
    if (g.t != num::f32 || !uses_tensor_ops(a, g))
        return rounding::none;
    if (g.c.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
        return rounding::half;
    const char *tf32 = getenv("NVIDIA_TF32_OVERRIDE");
    return tf32 && atoi(tf32) == 0 ? rounding::none : rounding::tf32;
}

/* The _v7 heuristics: every algorithm of dir, those that fit g first in
 * rank order, then the others with CUDNN_STATUS_NOT_SUPPORTED. */
template <class Perf, class Algo>
static cudnnStatus_t heuristics(const char *what, conv_dir dir, const conv_geom &g,
                                int requested, int *returned, Perf *perf)
{
    if (requested <= 0 || !returned || !perf)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: requestedAlgoCount %d, returnedAlgoCount %p, "
             "perfResults %p", what, requested, (void *)returned, (void *)perf);
    std::vector<Perf> all;
    for (int pass = 0; pass < 2; pass++) {
        const algo_table &t = algo_tables[dir];
        for (int i = 0; i < t.count; i++) {
            const algo_spec &a = t.specs[i];
            bool fits = a.fits(g);
            if (fits != (pass == 0))
                continue;
            Perf p = {};
            p.algo = (Algo)a.algo;
            p.status = fits ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
            p.time = -1.0f;
            p.memory = fits ? a.workspace(g) : 0;
            p.determinism = a.deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
            p.mathType = entry_math(a, g);
            all.push_back(p);
        }
    }
    int n = requested < (int)all.size() ? requested : (int)all.size();
    for (int i = 0; i < n; i++)
        perf[i] = all[i];
    *returned = n;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
    cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, int requested, int *returned,
    cudnnConvolutionFwdAlgoPerf_t *perf)
{
    const char *what = "cudnnGetConvolutionForwardAlgorithm_v7";
    handle_use use(what, h, false);
    if (use.status())
        return use.status();
    conv_geom g;
    if (cudnnStatus_t s = conv_check(what, x, w, c, y, &g))
        return s;
    return heuristics<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
        what, FWD, g, requested, returned, perf);
}
extern "C" cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t h, cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t dy,
    cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t dx, int requested, int *returned,
    cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
    const char *what = "cudnnGetConvolutionBackwardDataAlgorithm_v7";
    handle_use use(what, h, false);
    if (use.status())
        return use.status();
    conv_geom g;
    if (cudnnStatus_t s = conv_check(what, dx, w, c, dy, &g))
        return s;
    return heuristics<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
        what, BWD_DATA, g, requested, returned, perf);
}
extern "C" cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t dy,
    cudnnConvolutionDescriptor_t c, cudnnFilterDescriptor_t dw, int requested, int *returned,
    cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
    const char *what = "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
    handle_use use(what, h, false);
    if (use.status())
        return use.status();
    conv_geom g;
    if (cudnnStatus_t s = conv_check(what, x, dw, c, dy, &g))
        return s;
    return heuristics<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
        what, BWD_FILTER, g, requested, returned, perf);
}

/* algo is an algorithm of dir that supports g. */
static cudnnStatus_t algo_ok(const char *what, conv_dir dir, int algo, const conv_geom &g,
                             const algo_spec **spec)
{
    *spec = find_algo(dir, algo);
    if (!*spec)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: algorithm %d is no algorithm of this direction", what,
             algo);
    if (!(*spec)->fits(g))
        FAIL(CUDNN_STATUS_NOT_SUPPORTED, "%s: algorithm %d does not support this convolution "
             "(the heuristics list it as CUDNN_STATUS_NOT_SUPPORTED)", what, algo);
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t workspace_size(const char *what, cudnnHandle_t h, conv_dir dir, int algo,
                                    cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                    cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y,
                                    size_t *bytes)
{
    handle_use use(what, h, false);
    if (use.status())
        return use.status();
    conv_geom g;
    if (cudnnStatus_t s = conv_check(what, x, w, c, y, &g))
        return s;
    const algo_spec *spec;
    if (cudnnStatus_t s = algo_ok(what, dir, algo, g, &spec))
        return s;
    if (!bytes)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: sizeInBytes is NULL", what);
    *bytes = spec->workspace(g);
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
    cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t algo,
    size_t *bytes)
{
    return workspace_size("cudnnGetConvolutionForwardWorkspaceSize", h, FWD, algo, x, w, c, y,
                          bytes);
}
extern "C" cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t h, cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t dy,
    cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t dx,
    cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes)
{
    return workspace_size("cudnnGetConvolutionBackwardDataWorkspaceSize", h, BWD_DATA, algo, dx,
                          w, c, dy, bytes);
}
extern "C" cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t dy,
    cudnnConvolutionDescriptor_t c, cudnnFilterDescriptor_t dw,
    cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes)
{
    return workspace_size("cudnnGetConvolutionBackwardFilterWorkspaceSize", h, BWD_FILTER, algo,
                          x, dw, c, dy, bytes);
}

/* ---- convolution: the reference loops ---- */

/* Which outputs (n, k, oh) a pass over the taps covers. */
struct tap_range {
    int n0, n1, k0, k1, oh0, oh1;
};

/* Calls f(x offset, w offset, y offset) for every tap of the outputs in r
 * that falls inside x (not in the padding). */
template <class F> static void each_tap(const conv_geom &g, tap_range r, F f)
{
    const cudnnConvolutionStruct &cv = g.c;
    int cg = g.w.c, kg = g.w.k / cv.groups;
    for (int n = r.n0; n < r.n1; n++)
        for (int k = r.k0; k < r.k1; k++)
            for (int oh = r.oh0; oh < r.oh1; oh++)
                for (int ow = 0; ow < g.y.w; ow++) {
                    size_t yi = at(g.y, n, k, oh, ow);
                    for (int c = 0; c < cg; c++)
                        for (int i = 0; i < g.w.r; i++)
                            for (int j = 0; j < g.w.s; j++) {
                                int fi = cv.mode == CUDNN_CONVOLUTION ? g.w.r - 1 - i : i;
                                int fj = cv.mode == CUDNN_CONVOLUTION ? g.w.s - 1 - j : j;
                                int ih = oh * cv.sh - cv.ph + fi * cv.dh;
                                int iw = ow * cv.sw - cv.pw + fj * cv.dw;
                                if (ih < 0 || ih >= g.x.h || iw < 0 || iw >= g.x.w)
                                    continue;
                                f(at(g.x, n, k / kg * cg + c, ih, iw),
                                  k * g.w.sk + c * g.w.sc + i * g.w.sr + j * g.w.ss, yi);
                            }
                }
}

/* One convolution call as queued. Forward: out y from a = x, b = w;
 * backward data: out dx from a = dy, b = w; backward filter: out dw from
 * a = x, b = dy. */
struct conv_job {
    conv_geom g;
    conv_dir dir;
    const void *a, *b;
    void *out;
    double alpha, beta;
    rounding round;
    bool deterministic;

    double in(const void *p, size_t i) const
    {
        double v = cudaemu::load(p, g.t, i);
        return round == rounding::none ? v : cudaemu::rounded((float)v, round);
    }
    size_t out_size() const
    {
        return dir == BWD_FILTER ? (size_t)g.w.k * g.w.c * g.w.r * g.w.s
                                 : numel(dir == FWD ? g.y : g.x);
    }
    /* f(output offset, product) for each tap in r. */
    template <class F> void products(tap_range r, F f) const
    {
        each_tap(g, r, [&](size_t xi, size_t wi, size_t yi) {
            switch (dir) {
            case FWD: f(yi, in(a, xi) * in(b, wi)); break;
            case BWD_DATA: f(xi, in(a, yi) * in(b, wi)); break;
            default: f(wi, in(a, xi) * in(b, yi)); break;
            }
        });
    }
    void run() const { deterministic ? run_in_order() : run_atomically(); }

    void run_in_order() const
    {
        std::vector<double> acc(out_size(), 0.0);
        products({0, g.y.n, 0, g.y.c, 0, g.y.h}, [&](size_t o, double v) { acc[o] += v; });
        for (size_t i = 0; i < acc.size(); i++)
            blend(out, g.t, i, alpha, beta, acc[i]);
    }
    /* As atomics do: float partial sums, one per chunk of the work (an
     * output channel for dx, an output row of an image for dw), added into
     * the output in a random order. */
    void run_atomically() const
    {
        size_t size = out_size();
        std::vector<float> total(size), part(size);
        for (size_t i = 0; i < size; i++)
            total[i] = beta == 0 ? 0.0f : (float)(beta * cudaemu::load(out, g.t, i));
        int chunks = dir == BWD_DATA ? g.y.c : g.y.n * g.y.h;
        for (int chunk : cudaemu::atomic_order(chunks)) {
            std::fill(part.begin(), part.end(), 0.0f);
            tap_range r = dir == BWD_DATA
                              ? tap_range{0, g.y.n, chunk, chunk + 1, 0, g.y.h}
                              : tap_range{chunk / g.y.h, chunk / g.y.h + 1, 0, g.y.c,
                                          chunk % g.y.h, chunk % g.y.h + 1};
            products(r, [&](size_t o, double v) { part[o] += (float)v; });
            for (size_t i = 0; i < size; i++)
                total[i] += (float)(alpha * part[i]);
        }
        for (size_t i = 0; i < size; i++)
            cudaemu::store(out, g.t, i, total[i]);
    }
};

/* Checks what a convolution call passes beyond its descriptors and queues
 * it. names: the operands a, b and out as the call names them. */
static cudnnStatus_t conv_run(const char *what, cudnnHandle_t h, conv_dir dir,
                              const conv_geom &g, int algo, void *ws, size_t ws_bytes,
                              const void *alpha, const void *beta, const void *a, const void *b,
                              void *out, const char *const names[3])
{
    const algo_spec *spec;
    if (cudnnStatus_t s = algo_ok(what, dir, algo, g, &spec))
        return s;
    conv_job job;
    if (!scale_of(what, "alpha", alpha, g.t, &job.alpha) ||
        !scale_of(what, "beta", beta, g.t, &job.beta))
        return CUDNN_STATUS_BAD_PARAM;
    size_t need = spec->workspace(g);
    if (ws_bytes < need)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: algorithm %d needs %zu bytes of workspace, %zu given",
             what, algo, need, ws_bytes);
    size_t xb = tensor_bytes(g.x), yb = tensor_bytes(g.y), wb = filter_bytes(g.w);
    size_t bytes[CONV_DIRS][3] = {{xb, wb, yb}, {yb, wb, xb}, {xb, yb, wb}};
    if (!operands_ok(what, h->device,
                     {{names[0], a, bytes[dir][0], false},
                      {names[1], b, bytes[dir][1], false},
                      {names[2], out, bytes[dir][2], true},
                      {"workSpace", ws, ws_bytes, true}}))
        return CUDNN_STATUS_BAD_PARAM;
    job.g = g, job.dir = dir;
    job.a = a, job.b = b, job.out = out;
    job.round = conv_rounding(*spec, g);
    job.deterministic = spec->deterministic;
    if (cudaemu::enqueue(h->stream, what, [job]() { job.run(); }) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha,
                                                 cudnnTensorDescriptor_t xd, const void *x,
                                                 cudnnFilterDescriptor_t wd, const void *w,
                                                 cudnnConvolutionDescriptor_t cd,
                                                 cudnnConvolutionFwdAlgo_t algo, void *ws,
                                                 size_t ws_bytes, const void *beta,
                                                 cudnnTensorDescriptor_t yd, void *y)
{
    const char *what = "cudnnConvolutionForward";
    handle_use use(what, h, true);
    if (use.status())
        return use.status();
    conv_geom g;
    if (cudnnStatus_t s = conv_check(what, xd, wd, cd, yd, &g))
        return s;
    static const char *const names[3] = {"x", "w", "y"};
    return conv_run(what, h, FWD, g, algo, ws, ws_bytes, alpha, beta, x, w, y, names);
}
extern "C" cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha,
                                                      cudnnFilterDescriptor_t wd, const void *w,
                                                      cudnnTensorDescriptor_t dyd, const void *dy,
                                                      cudnnConvolutionDescriptor_t cd,
                                                      cudnnConvolutionBwdDataAlgo_t algo, void *ws,
                                                      size_t ws_bytes, const void *beta,
                                                      cudnnTensorDescriptor_t dxd, void *dx)
{
    const char *what = "cudnnConvolutionBackwardData";
    handle_use use(what, h, true);
    if (use.status())
        return use.status();
    conv_geom g;
    if (cudnnStatus_t s = conv_check(what, dxd, wd, cd, dyd, &g))
        return s;
    static const char *const names[3] = {"dy", "w", "dx"};
    return conv_run(what, h, BWD_DATA, g, algo, ws, ws_bytes, alpha, beta, dy, w, dx, names);
}
extern "C" cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha,
                                                        cudnnTensorDescriptor_t xd, const void *x,
                                                        cudnnTensorDescriptor_t dyd, const void *dy,
                                                        cudnnConvolutionDescriptor_t cd,
                                                        cudnnConvolutionBwdFilterAlgo_t algo,
                                                        void *ws, size_t ws_bytes,
                                                        const void *beta,
                                                        cudnnFilterDescriptor_t dwd, void *dw)
{
    const char *what = "cudnnConvolutionBackwardFilter";
    handle_use use(what, h, true);
    if (use.status())
        return use.status();
    conv_geom g;
    if (cudnnStatus_t s = conv_check(what, xd, dwd, cd, dyd, &g))
        return s;
    static const char *const names[3] = {"x", "dy", "dw"};
    return conv_run(what, h, BWD_FILTER, g, algo, ws, ws_bytes, alpha, beta, x, dy, dw, names);
}

/* db [1, C, 1, 1] = alpha * the sums of dy [N, C, H, W] over N, H, W + beta db */
extern "C" cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t h, const void *alpha,
                                                      cudnnTensorDescriptor_t dyd, const void *dy,
                                                      const void *beta,
                                                      cudnnTensorDescriptor_t dbd, void *db)
{
    const char *what = "cudnnConvolutionBackwardBias";
    handle_use use(what, h, true);
    if (use.status())
        return use.status();
    if (!usable(what, "dyDesc", dyd) || !usable(what, "dbDesc", dbd))
        return CUDNN_STATUS_BAD_PARAM;
    if (dbd->n != 1 || dbd->h != 1 || dbd->w != 1 || dbd->c != dyd->c)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: db is [%d, %d, %d, %d] for dy with %d channels", what,
             dbd->n, dbd->c, dbd->h, dbd->w, dyd->c);
    if (dbd->type != dyd->type)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: data types differ (dy %d, db %d)", what, dyd->type,
             dbd->type);
    num t;
    if (!num_of(dyd->type, &t))
        FAIL(CUDNN_STATUS_NOT_SUPPORTED, "%s: data type %d is not emulated", what, dyd->type);
    double al, be;
    if (!scale_of(what, "alpha", alpha, t, &al) || !scale_of(what, "beta", beta, t, &be))
        return CUDNN_STATUS_BAD_PARAM;
    if (!operands_ok(what, h->device,
                     {{"dy", dy, tensor_bytes(*dyd), false}, {"db", db, tensor_bytes(*dbd), true}}))
        return CUDNN_STATUS_BAD_PARAM;
    cudnnTensorStruct y = *dyd, b = *dbd;
    auto run = [=]() {
        for (int c = 0; c < y.c; c++) {
            double acc = 0;
            for (int n = 0; n < y.n; n++)
                for (int i = 0; i < y.h; i++)
                    for (int j = 0; j < y.w; j++)
                        acc += cudaemu::load(dy, t, at(y, n, c, i, j));
            blend(db, t, at(b, 0, c, 0, 0), al, be, acc);
        }
    };
    if (cudaemu::enqueue(h->stream, what, run) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- pooling ---- */

extern "C" cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t *d)
{
    return create(poolings, d, "cudnnCreatePoolingDescriptor");
}
extern "C" cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t d)
{
    return destroy(poolings, d, "cudnnDestroyPoolingDescriptor");
}
extern "C" cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d,
                                                     cudnnPoolingMode_t mode,
                                                     cudnnNanPropagation_t nan, int wh, int ww,
                                                     int ph, int pw, int sh, int sw)
{
    const char *what = "cudnnSetPooling2dDescriptor";
    if (!d || !poolings.has(d))
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: %p is not a live descriptor", what, (void *)d);
    if (mode < CUDNN_POOLING_MAX || mode > CUDNN_POOLING_MAX_DETERMINISTIC ||
        (nan != CUDNN_NOT_PROPAGATE_NAN && nan != CUDNN_PROPAGATE_NAN))
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: mode %d, NaN option %d", what, (int)mode, (int)nan);
    if (wh <= 0 || ww <= 0 || ph < 0 || pw < 0 || sh <= 0 || sw <= 0)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: window %dx%d, padding %d %d, stride %d %d", what, wh,
             ww, ph, pw, sh, sw);
    d->set = true;
    d->mode = mode, d->nan = nan;
    d->wh = wh, d->ww = ww, d->ph = ph, d->pw = pw, d->sh = sh, d->sw = sw;
    return CUDNN_STATUS_SUCCESS;
}

/* The pooled size along one dimension, or -1 when the window is larger
 * than the padded input. */
static int pool_out(int in, int pad, int window, int stride)
{
    return in + 2 * pad < window ? -1 : (in + 2 * pad - window) / stride + 1;
}

extern "C" cudnnStatus_t cudnnGetPooling2dForwardOutputDim(cudnnPoolingDescriptor_t pd,
                                                           cudnnTensorDescriptor_t xd, int *n,
                                                           int *c, int *h, int *w)
{
    const char *what = "cudnnGetPooling2dForwardOutputDim";
    if (!usable(what, "poolingDesc", pd) || !usable(what, "inputTensorDesc", xd))
        return CUDNN_STATUS_BAD_PARAM;
    if (!n || !c || !h || !w)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: an output pointer is NULL", what);
    int oh = pool_out(xd->h, pd->ph, pd->wh, pd->sh), ow = pool_out(xd->w, pd->pw, pd->ww, pd->sw);
    if (oh < 0 || ow < 0)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: the window is larger than the padded input", what);
    *n = xd->n, *c = xd->c, *h = oh, *w = ow;
    return CUDNN_STATUS_SUCCESS;
}

struct pool_geom {
    cudnnPoolingStruct p;
    cudnnTensorStruct x, y;
    num t;
};

static cudnnStatus_t pool_check(const char *what, cudnnPoolingDescriptor_t pd,
                                cudnnTensorDescriptor_t xd, cudnnTensorDescriptor_t yd,
                                pool_geom *g)
{
    if (!usable(what, "poolingDesc", pd) || !usable(what, "xDesc", xd) ||
        !usable(what, "yDesc", yd))
        return CUDNN_STATUS_BAD_PARAM;
    if (xd->n != yd->n || xd->c != yd->c)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: x is [%d, %d, ...], y [%d, %d, ...]", what, xd->n,
             xd->c, yd->n, yd->c);
    if (xd->type != yd->type)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: data types differ (x %d, y %d)", what, xd->type,
             yd->type);
    if (xd->sw != 1 || yd->sw != 1)
        FAIL(CUDNN_STATUS_NOT_SUPPORTED, "%s: the w stride of x or y is not 1", what);
    int oh = pool_out(xd->h, pd->ph, pd->wh, pd->sh), ow = pool_out(xd->w, pd->pw, pd->ww, pd->sw);
    if (yd->h != oh || yd->w != ow)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: y is %dx%d, cudnnGetPooling2dForwardOutputDim gives "
             "%dx%d", what, yd->h, yd->w, oh, ow);
    *g = {*pd, *xd, *yd, num::f32};
    if (!num_of(xd->type, &g->t))
        FAIL(CUDNN_STATUS_NOT_SUPPORTED, "%s: data type %d is not emulated", what, xd->type);
    return CUDNN_STATUS_SUCCESS;
}

static bool is_max(cudnnPoolingMode_t m)
{
    return m == CUDNN_POOLING_MAX || m == CUDNN_POOLING_MAX_DETERMINISTIC;
}

/* Calls f(x offset) for the taps of window (n, c, oy, ox) inside x;
 * returns how many taps the average divides by. */
template <class F>
static int window(const pool_geom &g, int n, int c, int oy, int ox, F f)
{
    const cudnnPoolingStruct &p = g.p;
    int inside = 0;
    for (int i = 0; i < p.wh; i++)
        for (int j = 0; j < p.ww; j++) {
            int iy = oy * p.sh - p.ph + i, ix = ox * p.sw - p.pw + j;
            if (iy >= 0 && iy < g.x.h && ix >= 0 && ix < g.x.w) {
                f(at(g.x, n, c, iy, ix));
                inside++;
            }
        }
    return p.mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? p.wh * p.ww : inside;
}
/* Calls f(n, c, oy, ox, y offset) for every output of g. */
template <class F> static void each_output(const pool_geom &g, F f)
{
    for (int n = 0; n < g.y.n; n++)
        for (int c = 0; c < g.y.c; c++)
            for (int oy = 0; oy < g.y.h; oy++)
                for (int ox = 0; ox < g.y.w; ox++)
                    f(n, c, oy, ox, at(g.y, n, c, oy, ox));
}

static double pool_value(const pool_geom &g, const void *x, int n, int c, int oy, int ox)
{
    if (!is_max(g.p.mode)) {
        double sum = 0;
        int count = window(g, n, c, oy, ox, [&](size_t i) { sum += cudaemu::load(x, g.t, i); });
        return sum / count;
    }
    double m = -INFINITY;
    bool nan = false;
    window(g, n, c, oy, ox, [&](size_t i) {
        double v = cudaemu::load(x, g.t, i);
        nan |= std::isnan(v);
        m = v > m ? v : m;
    });
    return nan && g.p.nan == CUDNN_PROPAGATE_NAN ? NAN : m;
}

extern "C" cudnnStatus_t cudnnPoolingForward(cudnnHandle_t h, cudnnPoolingDescriptor_t pd,
                                             const void *alpha, cudnnTensorDescriptor_t xd,
                                             const void *x, const void *beta,
                                             cudnnTensorDescriptor_t yd, void *y)
{
    const char *what = "cudnnPoolingForward";
    handle_use use(what, h, true);
    if (use.status())
        return use.status();
    pool_geom g;
    if (cudnnStatus_t s = pool_check(what, pd, xd, yd, &g))
        return s;
    double al, be;
    if (!scale_of(what, "alpha", alpha, g.t, &al) || !scale_of(what, "beta", beta, g.t, &be))
        return CUDNN_STATUS_BAD_PARAM;
    if (!operands_ok(what, h->device,
                     {{"x", x, tensor_bytes(g.x), false}, {"y", y, tensor_bytes(g.y), true}}))
        return CUDNN_STATUS_BAD_PARAM;
    auto run = [=]() {
        each_output(g, [&](int n, int c, int oy, int ox, size_t o) {
            blend(y, g.t, o, al, be, pool_value(g, x, n, c, oy, ox));
        });
    };
    if (cudaemu::enqueue(h->stream, what, run) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

/* One pooling backward as queued. */
struct pool_back_job {
    pool_geom g;
    const void *y, *dy, *x;
    void *dx;
    double alpha, beta;

    /* The x offset window (n, c, oy, ox) passes its gradient to: its first
     * tap equal to y there (max), or SIZE_MAX with a report when none is. */
    size_t argmax(int n, int c, int oy, int ox, size_t o) const
    {
        double v = cudaemu::load(y, g.t, o);
        size_t found = SIZE_MAX;
        window(g, n, c, oy, ox, [&](size_t i) {
            double xv = cudaemu::load(x, g.t, i);
            if (found == SIZE_MAX && (xv == v || (std::isnan(v) && std::isnan(xv))))
                found = i;
        });
        if (found == SIZE_MAX && std::isfinite(v))
            cudaemu_report("cudnnPoolingBackward: no x in window (%d, %d, %d, %d) equals y: y is "
                           "not the max pooling of this x", n, c, oy, ox);
        return found;
    }
    /* f(x offset, its share of dy at output o = (n, c, oy, ox)). */
    template <class F> void spread(int n, int c, int oy, int ox, size_t o, F f) const
    {
        double grad = cudaemu::load(dy, g.t, o);
        if (is_max(g.p.mode)) {
            size_t i = argmax(n, c, oy, ox, o);
            if (i != SIZE_MAX)
                f(i, grad);
            return;
        }
        int count = window(g, n, c, oy, ox, [](size_t) {});
        window(g, n, c, oy, ox, [&](size_t i) { f(i, grad / count); });
    }
    void run() const { g.p.mode == CUDNN_POOLING_MAX ? run_atomically() : run_in_order(); }

    void run_in_order() const
    {
        std::vector<double> acc(numel(g.x), 0.0);
        each_output(g, [&](int n, int c, int oy, int ox, size_t o) {
            spread(n, c, oy, ox, o, [&](size_t i, double v) { acc[i] += v; });
        });
        for (size_t i = 0; i < acc.size(); i++)
            blend(dx, g.t, i, alpha, beta, acc[i]);
    }
    /* CUDNN_POOLING_MAX: the windows' gradients land by atomics, in float,
     * in a random order. */
    void run_atomically() const
    {
        std::vector<float> total(numel(g.x));
        for (size_t i = 0; i < total.size(); i++)
            total[i] = beta == 0 ? 0.0f : (float)(beta * cudaemu::load(dx, g.t, i));
        int per_image = g.y.c * g.y.h * g.y.w;
        for (int k : cudaemu::atomic_order(g.y.n * per_image)) {
            int n = k / per_image, c = k / (g.y.h * g.y.w) % g.y.c;
            int oy = k / g.y.w % g.y.h, ox = k % g.y.w;
            spread(n, c, oy, ox, at(g.y, n, c, oy, ox),
                   [&](size_t i, double v) { total[i] += (float)(alpha * v); });
        }
        for (size_t i = 0; i < total.size(); i++)
            cudaemu::store(dx, g.t, i, total[i]);
    }
};

static bool same_layout(const cudnnTensorStruct &a, const cudnnTensorStruct &b)
{
    return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w && a.sn == b.sn &&
           a.sc == b.sc && a.sh == b.sh && a.sw == b.sw;
}

extern "C" cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t h, cudnnPoolingDescriptor_t pd,
                                              const void *alpha, cudnnTensorDescriptor_t yd,
                                              const void *y, cudnnTensorDescriptor_t dyd,
                                              const void *dy, cudnnTensorDescriptor_t xd,
                                              const void *x, const void *beta,
                                              cudnnTensorDescriptor_t dxd, void *dx)
{
    const char *what = "cudnnPoolingBackward";
    handle_use use(what, h, true);
    if (use.status())
        return use.status();
    pool_geom g;
    if (!usable(what, "dyDesc", dyd) || !usable(what, "dxDesc", dxd))
        return CUDNN_STATUS_BAD_PARAM;
    if (cudnnStatus_t s = pool_check(what, pd, xd, yd, &g))
        return s;
    if (!same_layout(*yd, *dyd) || !same_layout(*xd, *dxd))
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: dy's dimensions or strides differ from y's, or dx's "
             "from x's", what);
    if (dyd->type != yd->type || dxd->type != xd->type)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: the four tensors' data types differ", what);
    pool_back_job job;
    if (!scale_of(what, "alpha", alpha, g.t, &job.alpha) ||
        !scale_of(what, "beta", beta, g.t, &job.beta))
        return CUDNN_STATUS_BAD_PARAM;
    size_t xb = tensor_bytes(g.x), yb = tensor_bytes(g.y);
    if (!operands_ok(what, h->device,
                     {{"y", y, yb, false}, {"dy", dy, yb, false}, {"x", x, xb, false},
                      {"dx", dx, xb, true}}))
        return CUDNN_STATUS_BAD_PARAM;
    job.g = g, job.y = y, job.dy = dy, job.x = x, job.dx = dx;
    if (cudaemu::enqueue(h->stream, what, [job]() { job.run(); }) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- batch normalization ---- */

static bool bn_mode_valid(cudnnBatchNormMode_t m)
{
    return m == CUDNN_BATCHNORM_PER_ACTIVATION || m == CUDNN_BATCHNORM_SPATIAL ||
           m == CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
}
/* The parameters' data type for data of type t (cudnnDeriveBNTensorDescriptor). */
static cudnnDataType_t bn_param_type(cudnnDataType_t t)
{
    return t == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

extern "C" cudnnStatus_t cudnnDeriveBNTensorDescriptor(cudnnTensorDescriptor_t bn,
                                                       cudnnTensorDescriptor_t x,
                                                       cudnnBatchNormMode_t mode)
{
    const char *what = "cudnnDeriveBNTensorDescriptor";
    if (!bn || !tensors.has(bn))
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: derivedBnDesc %p is not a live descriptor", what,
             (void *)bn);
    if (!usable(what, "xDesc", x))
        return CUDNN_STATUS_BAD_PARAM;
    if (!bn_mode_valid(mode))
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: mode %d", what, (int)mode);
    bool spatial = mode != CUDNN_BATCHNORM_PER_ACTIVATION;
    return cudnnSetTensor4dDescriptor(bn, CUDNN_TENSOR_NCHW, bn_param_type(x->type), 1, x->c,
                                      spatial ? 1 : x->h, spatial ? 1 : x->w);
}

/* Batch norm's shapes: x and the tensors that must match it, and the
 * parameters' descriptor. Statistics are per channel over (n, h, w) in
 * the spatial modes, per (c, h, w) over n per activation. */
struct bn_geom {
    cudnnTensorStruct x, y, bn; /* y: y, or dx in backward */
    bool spatial;
    num t, pt; /* data, parameters */

    int groups() const { return spatial ? x.c : x.c * x.h * x.w; }
    int members() const { return spatial ? x.n * x.h * x.w : x.n; }
    /* The offset in t (x's shape) of member m of group grp. */
    size_t off(const cudnnTensorStruct &t, int grp, int m) const
    {
        if (spatial)
            return at(t, m / (x.h * x.w), grp, m / x.w % x.h, m % x.w);
        return at(t, m, grp / (x.h * x.w), grp / x.w % x.h, grp % x.w);
    }
    size_t param(int grp) const
    {
        return spatial ? at(bn, 0, grp, 0, 0)
                       : at(bn, 0, grp / (x.h * x.w), grp / x.w % x.h, grp % x.w);
    }
};

static cudnnStatus_t bn_check(const char *what, cudnnBatchNormMode_t mode,
                              cudnnTensorDescriptor_t xd,
                              std::initializer_list<cudnnTensorDescriptor_t> same,
                              cudnnTensorDescriptor_t bnd, double eps, bn_geom *g)
{
    if (!bn_mode_valid(mode))
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: mode %d", what, (int)mode);
    if (!usable(what, "xDesc", xd) || !usable(what, "bnScaleBiasMeanVarDesc", bnd))
        return CUDNN_STATUS_BAD_PARAM;
    for (cudnnTensorDescriptor_t d : same) {
        if (!usable(what, "a y/dy/dx descriptor", d))
            return CUDNN_STATUS_BAD_PARAM;
        if (d->n != xd->n || d->c != xd->c || d->h != xd->h || d->w != xd->w || d->type != xd->type)
            FAIL(CUDNN_STATUS_BAD_PARAM, "%s: dimensions or data types differ from x's", what);
    }
    bool spatial = mode != CUDNN_BATCHNORM_PER_ACTIVATION;
    int ph = spatial ? 1 : xd->h, pw = spatial ? 1 : xd->w;
    if (bnd->n != 1 || bnd->c != xd->c || bnd->h != ph || bnd->w != pw)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: bnScaleBiasMeanVarDesc is [%d, %d, %d, %d], mode %d "
             "needs [1, %d, %d, %d]", what, bnd->n, bnd->c, bnd->h, bnd->w, (int)mode, xd->c, ph,
             pw);
    if (bnd->type != bn_param_type(xd->type))
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: parameters of data type %d for data of type %d", what,
             bnd->type, xd->type);
    if (eps < CUDNN_BN_MIN_EPSILON)
        FAIL(CUDNN_STATUS_BAD_PARAM, "%s: epsilon %g < CUDNN_BN_MIN_EPSILON", what, eps);
    *g = {*xd, *(same.size() ? *same.begin() : xd), *bnd, spatial, num::f32, num::f32};
    if (!num_of(xd->type, &g->t))
        FAIL(CUDNN_STATUS_NOT_SUPPORTED, "%s: data type %d is not emulated", what, xd->type);
    num_of(bnd->type, &g->pt);
    return CUDNN_STATUS_SUCCESS;
}

/* Mean and biased variance of group grp of x. */
static void bn_stats(const bn_geom &g, const void *x, int grp, double *mean, double *var)
{
    int m = g.members();
    double sum = 0, sq = 0;
    for (int i = 0; i < m; i++)
        sum += cudaemu::load(x, g.t, g.off(g.x, grp, i));
    *mean = sum / m;
    for (int i = 0; i < m; i++) {
        double d = cudaemu::load(x, g.t, g.off(g.x, grp, i)) - *mean;
        sq += d * d;
    }
    *var = sq / m;
}

/* Both of a pair set or both NULL (a documented rule). */
static bool paired(const char *what, const char *names, const void *a, const void *b)
{
    if (!a == !b)
        return true;
    cudaemu_report("%s: exactly one of %s is NULL", what, names);
    return false;
}

extern "C" cudnnStatus_t cudnnBatchNormalizationForwardTraining(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    cudnnTensorDescriptor_t xd, const void *x, cudnnTensorDescriptor_t yd, void *y,
    cudnnTensorDescriptor_t bnd, const void *scale, const void *bias, double factor,
    void *rmean, void *rvar, double eps, void *smean, void *sinv)
{
    const char *what = "cudnnBatchNormalizationForwardTraining";
    handle_use use(what, h, true);
    if (use.status())
        return use.status();
    bn_geom g;
    if (cudnnStatus_t s = bn_check(what, mode, xd, {yd}, bnd, eps, &g))
        return s;
    if (!paired(what, "resultRunningMean, resultRunningVariance", rmean, rvar) ||
        !paired(what, "resultSaveMean, resultSaveInvVariance", smean, sinv))
        return CUDNN_STATUS_BAD_PARAM;
    double al, be;
    if (!scale_of(what, "alpha", alpha, g.t, &al) || !scale_of(what, "beta", beta, g.t, &be))
        return CUDNN_STATUS_BAD_PARAM;
    size_t xb = tensor_bytes(g.x), pb = tensor_bytes(g.bn);
    if (!operands_ok(what, h->device,
                     {{"x", x, xb, false}, {"y", y, xb, true}, {"bnScale", scale, pb, false},
                      {"bnBias", bias, pb, false},
                      {"resultRunningMean", rmean, rmean ? pb : 0, true},
                      {"resultRunningVariance", rvar, rvar ? pb : 0, true},
                      {"resultSaveMean", smean, smean ? pb : 0, true},
                      {"resultSaveInvVariance", sinv, sinv ? pb : 0, true}},
                     false))
        return CUDNN_STATUS_BAD_PARAM;
    auto run = [=]() {
        int m = g.members();
        for (int grp = 0; grp < g.groups(); grp++) {
            double mean, var;
            bn_stats(g, x, grp, &mean, &var);
            double inv = 1.0 / sqrt(var + eps);
            size_t p = g.param(grp);
            double sc = cudaemu::load(scale, g.pt, p), bi = cudaemu::load(bias, g.pt, p);
            for (int i = 0; i < m; i++) {
                double xv = cudaemu::load(x, g.t, g.off(g.x, grp, i));
                blend(y, g.t, g.off(g.y, grp, i), al, be, (xv - mean) * inv * sc + bi);
            }
            if (rmean) { /* the running variance is unbiased */
                double old_mean = cudaemu::load(rmean, g.pt, p);
                double old_var = cudaemu::load(rvar, g.pt, p);
                double unbiased = var * m / (m - 1.0);
                cudaemu::store(rmean, g.pt, p, (1 - factor) * old_mean + factor * mean);
                cudaemu::store(rvar, g.pt, p, (1 - factor) * old_var + factor * unbiased);
            }
            if (smean) {
                cudaemu::store(smean, g.pt, p, mean);
                cudaemu::store(sinv, g.pt, p, inv);
            }
        }
    };
    if (cudaemu::enqueue(h->stream, what, run) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    cudnnTensorDescriptor_t xd, const void *x, cudnnTensorDescriptor_t yd, void *y,
    cudnnTensorDescriptor_t bnd, const void *scale, const void *bias, const void *mean,
    const void *var, double eps)
{
    const char *what = "cudnnBatchNormalizationForwardInference";
    handle_use use(what, h, true);
    if (use.status())
        return use.status();
    bn_geom g;
    if (cudnnStatus_t s = bn_check(what, mode, xd, {yd}, bnd, eps, &g))
        return s;
    double al, be;
    if (!scale_of(what, "alpha", alpha, g.t, &al) || !scale_of(what, "beta", beta, g.t, &be))
        return CUDNN_STATUS_BAD_PARAM;
    size_t xb = tensor_bytes(g.x), pb = tensor_bytes(g.bn);
    if (!operands_ok(what, h->device,
                     {{"x", x, xb, false}, {"y", y, xb, true}, {"bnScale", scale, pb, false},
                      {"bnBias", bias, pb, false}, {"estimatedMean", mean, pb, false},
                      {"estimatedVariance", var, pb, false}},
                     false))
        return CUDNN_STATUS_BAD_PARAM;
    auto run = [=]() {
        for (int grp = 0; grp < g.groups(); grp++) {
            size_t p = g.param(grp);
            double inv = 1.0 / sqrt(cudaemu::load(var, g.pt, p) + eps);
            double mu = cudaemu::load(mean, g.pt, p), sc = cudaemu::load(scale, g.pt, p),
                   bi = cudaemu::load(bias, g.pt, p);
            for (int i = 0; i < g.members(); i++) {
                double xv = cudaemu::load(x, g.t, g.off(g.x, grp, i));
                blend(y, g.t, g.off(g.y, grp, i), al, be, (xv - mu) * inv * sc + bi);
            }
        }
    };
    if (cudaemu::enqueue(h->stream, what, run) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnBatchNormalizationBackward(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha_d, const void *beta_d,
    const void *alpha_p, const void *beta_p, cudnnTensorDescriptor_t xd, const void *x,
    cudnnTensorDescriptor_t dyd, const void *dy, cudnnTensorDescriptor_t dxd, void *dx,
    cudnnTensorDescriptor_t bnd, const void *scale, void *dscale, void *dbias, double eps,
    const void *smean, const void *sinv)
{
    const char *what = "cudnnBatchNormalizationBackward";
    handle_use use(what, h, true);
    if (use.status())
        return use.status();
    bn_geom g;
    if (cudnnStatus_t s = bn_check(what, mode, xd, {dxd, dyd}, bnd, eps, &g))
        return s;
    if (!paired(what, "savedMean, savedInvVariance", smean, sinv))
        return CUDNN_STATUS_BAD_PARAM;
    double ad, bd, ap, bp;
    if (!scale_of(what, "alphaDataDiff", alpha_d, g.t, &ad) ||
        !scale_of(what, "betaDataDiff", beta_d, g.t, &bd) ||
        !scale_of(what, "alphaParamDiff", alpha_p, g.t, &ap) ||
        !scale_of(what, "betaParamDiff", beta_p, g.t, &bp))
        return CUDNN_STATUS_BAD_PARAM;
    size_t xb = tensor_bytes(g.x), pb = tensor_bytes(g.bn);
    if (!operands_ok(what, h->device,
                     {{"x", x, xb, false}, {"dy", dy, xb, false}, {"dx", dx, xb, true},
                      {"bnScale", scale, pb, false}, {"resultBnScaleDiff", dscale, pb, true},
                      {"resultBnBiasDiff", dbias, pb, true},
                      {"savedMean", smean, smean ? pb : 0, false},
                      {"savedInvVariance", sinv, sinv ? pb : 0, false}},
                     false))
        return CUDNN_STATUS_BAD_PARAM;
    cudnnTensorStruct dyt = *dyd;
    auto run = [=]() {
        int m = g.members();
        for (int grp = 0; grp < g.groups(); grp++) {
            size_t p = g.param(grp);
            double mean, inv;
            if (smean) {
                mean = cudaemu::load(smean, g.pt, p);
                inv = cudaemu::load(sinv, g.pt, p);
            } else {
                double var;
                bn_stats(g, x, grp, &mean, &var);
                inv = 1.0 / sqrt(var + eps);
            }
            double sg = 0, sgx = 0;
            for (int i = 0; i < m; i++) {
                double gv = cudaemu::load(dy, g.t, g.off(dyt, grp, i));
                sg += gv;
                sgx += gv * (cudaemu::load(x, g.t, g.off(g.x, grp, i)) - mean) * inv;
            }
            double sc = cudaemu::load(scale, g.pt, p);
            for (int i = 0; i < m; i++) {
                double gv = cudaemu::load(dy, g.t, g.off(dyt, grp, i));
                double xh = (cudaemu::load(x, g.t, g.off(g.x, grp, i)) - mean) * inv;
                blend(dx, g.t, g.off(g.y, grp, i), ad, bd, sc * inv * (gv - sg / m - xh * sgx / m));
            }
            blend(dscale, g.pt, p, ap, bp, sgx);
            blend(dbias, g.pt, p, ap, bp, sg);
        }
    };
    if (cudaemu::enqueue(h->stream, what, run) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}
