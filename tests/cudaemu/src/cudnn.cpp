/* Reference cuDNN subset (legacy API): descriptors checked against each
 * other, operands checked to lie in device memory, results computed by
 * direct loops in double. Descriptors are copied at call time, as cuDNN
 * reads them then. */
#include <cudnn.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "internal.h"

struct cudnnContext {
    cudaStream_t stream = nullptr;
};
struct cudnnTensorStruct {
    bool set = false;
    cudnnDataType_t type;
    int n, c, h, w;
};
struct cudnnFilterStruct {
    bool set = false;
    cudnnDataType_t type;
    int k, c, r, s;
};
struct cudnnConvolutionStruct {
    bool set = false;
    int ph, pw, sh, sw, dh, dw;
    cudnnConvolutionMode_t mode;
    cudnnDataType_t compute;
    int groups = 1;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};
struct cudnnPoolingStruct {
    bool set = false;
    cudnnPoolingMode_t mode;
    cudnnNanPropagation_t nan;
    int wh, ww, ph, pw, sh, sw;
};

#define BAD(...)                                                               \
    do {                                                                       \
        cudaemu_report(__VA_ARGS__);                                               \
        return CUDNN_STATUS_BAD_PARAM;                                         \
    } while (0)

extern "C" cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
    *h = new cudnnContext();
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
    h->stream = s;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" const char *cudnnGetErrorString(cudnnStatus_t s)
{
    switch (s) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    default: return "CUDNN_STATUS_(emulated)";
    }
}
extern "C" cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d)
{
    *d = new cudnnTensorStruct();
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d)
{
    delete d;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d,
                                                    cudnnTensorFormat_t f, cudnnDataType_t t,
                                                    int n, int c, int h, int w)
{
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
        BAD("cudnnSetTensor4dDescriptor: dims %d %d %d %d (all must be > 0)", n, c, h, w);
    if (f != CUDNN_TENSOR_NCHW)
        return CUDNN_STATUS_NOT_SUPPORTED;
    *d = {true, t, n, c, h, w};
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d)
{
    *d = new cudnnFilterStruct();
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d)
{
    delete d;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t,
                                                    cudnnTensorFormat_t f, int k, int c, int h,
                                                    int w)
{
    if (k <= 0 || c <= 0 || h <= 0 || w <= 0)
        BAD("cudnnSetFilter4dDescriptor: dims %d %d %d %d", k, c, h, w);
    *d = {true, t, k, c, h, w};
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d)
{
    *d = new cudnnConvolutionStruct();
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d)
{
    delete d;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph,
                                                         int pw, int sh, int sw, int dh, int dw,
                                                         cudnnConvolutionMode_t mode,
                                                         cudnnDataType_t compute)
{
    if (ph < 0 || pw < 0 || sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0)
        BAD("cudnnSetConvolution2dDescriptor: pad %d %d stride %d %d dilation %d %d", ph, pw, sh,
            sw, dh, dw);
    d->set = true;
    d->ph = ph, d->pw = pw, d->sh = sh, d->sw = sw, d->dh = dh, d->dw = dw;
    d->mode = mode;
    d->compute = compute;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int g)
{
    if (g < 1)
        BAD("cudnnSetConvolutionGroupCount %d", g);
    d->groups = g;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d,
                                                     cudnnMathType_t m)
{
    d->math = m;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- operands ---- */

static size_t esize(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT ? 4 : 2; }
static size_t numel(const cudnnTensorStruct &t) { return (size_t)t.n * t.c * t.h * t.w; }
static double ld(const void *p, cudnnDataType_t t, size_t i)
{
    return t == CUDNN_DATA_FLOAT ? ((const float *)p)[i] : (float)((const __nv_bfloat16 *)p)[i];
}
static void st(void *p, cudnnDataType_t t, size_t i, double v)
{
    if (t == CUDNN_DATA_FLOAT)
        ((float *)p)[i] = (float)v;
    else
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v);
}
/* out = alpha * v + beta * out (beta 0: out not read, as cuDNN documents). */
static void blend(void *p, cudnnDataType_t t, size_t i, double alpha, double beta, double v)
{
    st(p, t, i, alpha * v + (beta == 0.0 ? 0.0 : beta * ld(p, t, i)));
}
static bool in_device(const char *what, const void *p, size_t bytes)
{
    return cudaemu::check_device_range(what, p, bytes);
}
static bool tensor_ok(const char *what, const cudnnTensorStruct *d, const void *p)
{
    if (!d || !d->set) {
        cudaemu_report("%s: descriptor not set", what);
        return false;
    }
    return in_device(what, p, numel(*d) * esize(d->type));
}

/* ---- convolution ---- */

struct conv_geom {
    cudnnTensorStruct x, y;
    cudnnFilterStruct w;
    cudnnConvolutionStruct c;
};

static cudnnStatus_t conv_check(const char *what, cudnnTensorDescriptor_t x,
                                cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c,
                                cudnnTensorDescriptor_t y, conv_geom *g)
{
    if (!x->set || !w->set || !c->set || !y->set)
        BAD("%s: a descriptor is not set", what);
    if (x->type != w->type || x->type != y->type)
        BAD("%s: data types differ (x %d, w %d, y %d)", what, x->type, w->type, y->type);
    if (c->compute != CUDNN_DATA_FLOAT)
        BAD("%s: compute type %d with data type %d", what, c->compute, x->type);
    int G = c->groups;
    if (x->c != w->c * G || w->k % G)
        BAD("%s: x has %d channels, filter [%d, %d, ...], %d groups", what, x->c, w->k, w->c, G);
    int oh = (x->h + 2 * c->ph - ((w->r - 1) * c->dh + 1)) / c->sh + 1;
    int ow = (x->w + 2 * c->pw - ((w->s - 1) * c->dw + 1)) / c->sw + 1;
    if (y->n != x->n || y->c != w->k || y->h != oh || y->w != ow)
        BAD("%s: output descriptor [%d, %d, %d, %d], the convolution gives [%d, %d, %d, %d]", what,
            y->n, y->c, y->h, y->w, x->n, w->k, oh, ow);
    *g = {*x, *y, *w, *c};
    return CUDNN_STATUS_SUCCESS;
}

/* Offered algorithms: one needing too much workspace, one that down-
 * converts, a tensor-op one, and algo 0 (1 MiB of workspace). */
static const size_t ALGO0_WS = (size_t)1 << 20;
template <class Perf, class Algo>
static void offer(const cudnnConvolutionStruct *c, int requested, int *returned, Perf *perf)
{
    Perf all[4] = {};
    all[0] = {(Algo)1, CUDNN_STATUS_SUCCESS, 1.0f, (size_t)1 << 30, CUDNN_DETERMINISTIC, c->math};
    all[1] = {(Algo)2, CUDNN_STATUS_SUCCESS, 1.0f, 0, CUDNN_DETERMINISTIC,
              CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION};
    all[2] = {(Algo)3, CUDNN_STATUS_SUCCESS, 1.0f, 0, CUDNN_NON_DETERMINISTIC, CUDNN_TENSOR_OP_MATH};
    all[3] = {(Algo)0, CUDNN_STATUS_SUCCESS, 2.0f, ALGO0_WS, CUDNN_DETERMINISTIC,
              c->math == CUDNN_FMA_MATH ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH};
    if (c->math == CUDNN_FMA_MATH) /* FMA-only search: no tensor-op entries */
        all[1].status = all[2].status = CUDNN_STATUS_NOT_SUPPORTED;
    int n = requested < 4 ? requested : 4;
    for (int i = 0; i < n; i++)
        perf[i] = all[i];
    *returned = n;
}

extern "C" cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
    cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, int requested, int *returned,
    cudnnConvolutionFwdAlgoPerf_t *perf)
{
    conv_geom g;
    if (cudnnStatus_t s = conv_check("cudnnGetConvolutionForwardAlgorithm_v7", x, w, c, y, &g))
        return s;
    offer<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(c, requested, returned, perf);
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t h, cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t dy,
    cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t dx, int requested, int *returned,
    cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
    conv_geom g;
    if (cudnnStatus_t s = conv_check("cudnnGetConvolutionBackwardDataAlgorithm_v7", dx, w, c, dy, &g))
        return s;
    offer<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(c, requested, returned, perf);
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t dy,
    cudnnConvolutionDescriptor_t c, cudnnFilterDescriptor_t dw, int requested, int *returned,
    cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
    conv_geom g;
    if (cudnnStatus_t s = conv_check("cudnnGetConvolutionBackwardFilterAlgorithm_v7", x, dw, c, dy, &g))
        return s;
    offer<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(c, requested, returned, perf);
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t algo_ok(const char *what, int algo, const cudnnConvolutionStruct &c,
                             void *ws, size_t ws_bytes)
{
    if (algo == 1)
        BAD("%s: algorithm 1 needs 1 GiB of workspace, %zu given", what, ws_bytes);
    if (algo == 2)
        BAD("%s: algorithm 2 down-converts (ALLOW_CONVERSION) under math type %d", what, c.math);
    if (algo == 3 && c.math != CUDNN_TENSOR_OP_MATH)
        BAD("%s: tensor-op algorithm 3 under math type %d", what, c.math);
    if (algo == 0) {
        if (ws_bytes < ALGO0_WS)
            BAD("%s: algorithm 0 needs %zu bytes of workspace, %zu given", what, ALGO0_WS, ws_bytes);
        if (!in_device(what, ws, ws_bytes))
            return CUDNN_STATUS_BAD_PARAM;
    }
    if (algo < 0 || algo > 3)
        BAD("%s: algorithm %d was never offered", what, algo);
    return CUDNN_STATUS_SUCCESS;
}

/* x index of output (n, k, oh, ow) tap (c, r, s), or -1 in the padding. */
static long x_at(const conv_geom &g, int n, int k, int oh, int ow, int c, int r, int s)
{
    const cudnnConvolutionStruct &cv = g.c;
    int cg = g.w.c, kg = g.w.k / cv.groups, grp = k / kg;
    if (cv.mode == CUDNN_CONVOLUTION)
        r = g.w.r - 1 - r, s = g.w.s - 1 - s;
    int ih = oh * cv.sh - cv.ph + r * cv.dh, iw = ow * cv.sw - cv.pw + s * cv.dw;
    if (ih < 0 || ih >= g.x.h || iw < 0 || iw >= g.x.w)
        return -1;
    return (((long)n * g.x.c + grp * cg + c) * g.x.h + ih) * g.x.w + iw;
}
static long w_at(const conv_geom &g, int k, int c, int r, int s)
{
    return (((long)k * g.w.c + c) * g.w.r + r) * g.w.s + s;
}
static long y_at(const conv_geom &g, int n, int k, int oh, int ow)
{
    return (((long)n * g.y.c + k) * g.y.h + oh) * g.y.w + ow;
}
template <class F> static void each_tap(const conv_geom &g, F f)
{
    for (int n = 0; n < g.y.n; n++)
        for (int k = 0; k < g.y.c; k++)
            for (int oh = 0; oh < g.y.h; oh++)
                for (int ow = 0; ow < g.y.w; ow++)
                    for (int c = 0; c < g.w.c; c++)
                        for (int r = 0; r < g.w.r; r++)
                            for (int s = 0; s < g.w.s; s++) {
                                long xi = x_at(g, n, k, oh, ow, c, r, s);
                                if (xi >= 0)
                                    f(xi, w_at(g, k, c, r, s), y_at(g, n, k, oh, ow));
                            }
}

extern "C" cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha,
                                                 cudnnTensorDescriptor_t xd, const void *x,
                                                 cudnnFilterDescriptor_t wd, const void *w,
                                                 cudnnConvolutionDescriptor_t cd,
                                                 cudnnConvolutionFwdAlgo_t algo, void *ws,
                                                 size_t ws_bytes, const void *beta,
                                                 cudnnTensorDescriptor_t yd, void *y)
{
    conv_geom g;
    const char *what = "cudnnConvolutionForward";
    if (cudnnStatus_t s = conv_check(what, xd, wd, cd, yd, &g))
        return s;
    if (cudnnStatus_t s = algo_ok(what, algo, g.c, ws, ws_bytes))
        return s;
    if (!tensor_ok("cudnnConvolutionForward x", xd, x) || !tensor_ok("cudnnConvolutionForward y", yd, y) ||
        !in_device("cudnnConvolutionForward w", w, (size_t)g.w.k * g.w.c * g.w.r * g.w.s * esize(g.w.type)))
        return CUDNN_STATUS_BAD_PARAM;
    double al = *(const float *)alpha, be = *(const float *)beta;
    cudaemu::enqueue(h->stream, what, [=]() {
        std::vector<double> acc(numel(g.y), 0.0);
        each_tap(g, [&](long xi, long wi, long yi) { acc[yi] += ld(x, g.x.type, xi) * ld(w, g.w.type, wi); });
        for (size_t i = 0; i < acc.size(); i++)
            blend(y, g.y.type, i, al, be, acc[i]);
    });
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha,
                                                      cudnnFilterDescriptor_t wd, const void *w,
                                                      cudnnTensorDescriptor_t dyd, const void *dy,
                                                      cudnnConvolutionDescriptor_t cd,
                                                      cudnnConvolutionBwdDataAlgo_t algo, void *ws,
                                                      size_t ws_bytes, const void *beta,
                                                      cudnnTensorDescriptor_t dxd, void *dx)
{
    conv_geom g;
    const char *what = "cudnnConvolutionBackwardData";
    if (cudnnStatus_t s = conv_check(what, dxd, wd, cd, dyd, &g))
        return s;
    if (cudnnStatus_t s = algo_ok(what, algo, g.c, ws, ws_bytes))
        return s;
    if (!tensor_ok("cudnnConvolutionBackwardData dx", dxd, dx) || !tensor_ok("cudnnConvolutionBackwardData dy", dyd, dy) ||
        !in_device("cudnnConvolutionBackwardData w", w, (size_t)g.w.k * g.w.c * g.w.r * g.w.s * esize(g.w.type)))
        return CUDNN_STATUS_BAD_PARAM;
    double al = *(const float *)alpha, be = *(const float *)beta;
    cudaemu::enqueue(h->stream, what, [=]() {
        std::vector<double> acc(numel(g.x), 0.0);
        each_tap(g, [&](long xi, long wi, long yi) { acc[xi] += ld(dy, g.y.type, yi) * ld(w, g.w.type, wi); });
        for (size_t i = 0; i < acc.size(); i++)
            blend(dx, g.x.type, i, al, be, acc[i]);
    });
    return CUDNN_STATUS_SUCCESS;
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
    conv_geom g;
    const char *what = "cudnnConvolutionBackwardFilter";
    if (cudnnStatus_t s = conv_check(what, xd, dwd, cd, dyd, &g))
        return s;
    if (cudnnStatus_t s = algo_ok(what, algo, g.c, ws, ws_bytes))
        return s;
    size_t wn = (size_t)g.w.k * g.w.c * g.w.r * g.w.s;
    if (!tensor_ok("cudnnConvolutionBackwardFilter x", xd, x) || !tensor_ok("cudnnConvolutionBackwardFilter dy", dyd, dy) ||
        !in_device("cudnnConvolutionBackwardFilter dw", dw, wn * esize(g.w.type)))
        return CUDNN_STATUS_BAD_PARAM;
    double al = *(const float *)alpha, be = *(const float *)beta;
    cudaemu::enqueue(h->stream, what, [=]() {
        std::vector<double> acc(wn, 0.0);
        each_tap(g, [&](long xi, long wi, long yi) { acc[wi] += ld(x, g.x.type, xi) * ld(dy, g.y.type, yi); });
        for (size_t i = 0; i < wn; i++)
            blend(dw, g.w.type, i, al, be, acc[i]);
    });
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t h, const void *alpha,
                                                      cudnnTensorDescriptor_t dyd, const void *dy,
                                                      const void *beta,
                                                      cudnnTensorDescriptor_t dbd, void *db)
{
    const char *what = "cudnnConvolutionBackwardBias";
    if (!dyd->set || !dbd->set)
        BAD("%s: descriptor not set", what);
    if (dbd->n != 1 || dbd->c != dyd->c || dbd->h != 1 || dbd->w != 1)
        BAD("%s: bias descriptor [%d, %d, %d, %d] for dy with %d channels", what, dbd->n, dbd->c,
            dbd->h, dbd->w, dyd->c);
    if (!tensor_ok("cudnnConvolutionBackwardBias dy", dyd, dy) || !tensor_ok("cudnnConvolutionBackwardBias db", dbd, db))
        return CUDNN_STATUS_BAD_PARAM;
    double al = *(const float *)alpha, be = *(const float *)beta;
    cudnnTensorStruct y = *dyd, b = *dbd;
    cudaemu::enqueue(h->stream, what, [=]() {
        for (int c = 0; c < y.c; c++) {
            double acc = 0;
            for (int n = 0; n < y.n; n++)
                for (int i = 0; i < y.h * y.w; i++)
                    acc += ld(dy, y.type, ((size_t)n * y.c + c) * y.h * y.w + i);
            blend(db, b.type, c, al, be, acc);
        }
    });
    return CUDNN_STATUS_SUCCESS;
}

/* ---- pooling ---- */

extern "C" cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t *d)
{
    *d = new cudnnPoolingStruct();
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t d)
{
    delete d;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d,
                                                     cudnnPoolingMode_t mode,
                                                     cudnnNanPropagation_t nan, int wh, int ww,
                                                     int ph, int pw, int sh, int sw)
{
    if (wh <= 0 || ww <= 0 || ph < 0 || pw < 0 || sh <= 0 || sw <= 0)
        BAD("cudnnSetPooling2dDescriptor: window %dx%d pad %dx%d stride %dx%d", wh, ww, ph, pw, sh, sw);
    *d = {true, mode, nan, wh, ww, ph, pw, sh, sw};
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t pool_check(const char *what, const cudnnPoolingStruct *p,
                                const cudnnTensorStruct *x, const cudnnTensorStruct *y)
{
    if (!p->set || !x->set || !y->set)
        BAD("%s: descriptor not set", what);
    int oh = (x->h + 2 * p->ph - p->wh) / p->sh + 1, ow = (x->w + 2 * p->pw - p->ww) / p->sw + 1;
    if (y->n != x->n || y->c != x->c || y->h != oh || y->w != ow)
        BAD("%s: y [%d, %d, %d, %d], pooling gives [%d, %d, %d, %d]", what, y->n, y->c, y->h, y->w,
            x->n, x->c, oh, ow);
    if (x->type != CUDNN_DATA_FLOAT || y->type != CUDNN_DATA_FLOAT)
        BAD("%s: emulated for float only", what);
    return CUDNN_STATUS_SUCCESS;
}

/* Visits window (plane, oy, ox)'s in-bounds taps: f(x index); returns the
 * window's full size (padding included). */
template <class F>
static void window(const cudnnPoolingStruct &p, const cudnnTensorStruct &x, size_t plane, int oy,
                   int ox, F f)
{
    for (int r = 0; r < p.wh; r++)
        for (int s = 0; s < p.ww; s++) {
            int iy = oy * p.sh - p.ph + r, ix = ox * p.sw - p.pw + s;
            if (iy >= 0 && iy < x.h && ix >= 0 && ix < x.w)
                f((plane * x.h + iy) * x.w + ix);
        }
}
static bool is_max(cudnnPoolingMode_t m)
{
    return m == CUDNN_POOLING_MAX || m == CUDNN_POOLING_MAX_DETERMINISTIC;
}

extern "C" cudnnStatus_t cudnnPoolingForward(cudnnHandle_t h, cudnnPoolingDescriptor_t pd,
                                             const void *alpha, cudnnTensorDescriptor_t xd,
                                             const void *x, const void *beta,
                                             cudnnTensorDescriptor_t yd, void *y)
{
    if (cudnnStatus_t s = pool_check("cudnnPoolingForward", pd, xd, yd))
        return s;
    if (!tensor_ok("cudnnPoolingForward x", xd, x) || !tensor_ok("cudnnPoolingForward y", yd, y))
        return CUDNN_STATUS_BAD_PARAM;
    double al = *(const float *)alpha, be = *(const float *)beta;
    cudnnPoolingStruct p = *pd;
    cudnnTensorStruct X = *xd, Y = *yd;
    cudaemu::enqueue(h->stream, "cudnnPoolingForward", [=]() {
        const float *xf = (const float *)x;
        for (size_t pl = 0; pl < (size_t)X.n * X.c; pl++)
            for (int oy = 0; oy < Y.h; oy++)
                for (int ox = 0; ox < Y.w; ox++) {
                    double v;
                    if (is_max(p.mode)) {
                        float m = -INFINITY;
                        bool nan = false;
                        window(p, X, pl, oy, ox, [&](size_t i) {
                            nan |= std::isnan(xf[i]);
                            m = xf[i] > m ? xf[i] : m;
                        });
                        v = nan && p.nan == CUDNN_PROPAGATE_NAN ? NAN : m;
                    } else {
                        double sum = 0;
                        int count = 0;
                        window(p, X, pl, oy, ox, [&](size_t i) { sum += xf[i]; count++; });
                        v = sum / (p.mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? p.wh * p.ww : count);
                    }
                    blend(y, CUDNN_DATA_FLOAT, (pl * Y.h + oy) * Y.w + ox, al, be, v);
                }
    });
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t h, cudnnPoolingDescriptor_t pd,
                                              const void *alpha, cudnnTensorDescriptor_t yd,
                                              const void *y, cudnnTensorDescriptor_t dyd,
                                              const void *dy, cudnnTensorDescriptor_t xd,
                                              const void *x, const void *beta,
                                              cudnnTensorDescriptor_t dxd, void *dx)
{
    if (cudnnStatus_t s = pool_check("cudnnPoolingBackward", pd, xd, yd))
        return s;
    if (dyd->n != yd->n || dyd->c != yd->c || dyd->h != yd->h || dyd->w != yd->w ||
        dxd->n != xd->n || dxd->c != xd->c || dxd->h != xd->h || dxd->w != xd->w)
        BAD("cudnnPoolingBackward: dy/dx descriptors differ from y/x");
    if (!tensor_ok("cudnnPoolingBackward y", yd, y) || !tensor_ok("cudnnPoolingBackward dy", dyd, dy) ||
        !tensor_ok("cudnnPoolingBackward x", xd, x) || !tensor_ok("cudnnPoolingBackward dx", dxd, dx))
        return CUDNN_STATUS_BAD_PARAM;
    double al = *(const float *)alpha, be = *(const float *)beta;
    cudnnPoolingStruct p = *pd;
    cudnnTensorStruct X = *xd, Y = *yd;
    cudaemu::enqueue(h->stream, "cudnnPoolingBackward", [=]() {
        const float *xf = (const float *)x, *yf = (const float *)y, *g = (const float *)dy;
        std::vector<double> acc(numel(X), 0.0);
        for (size_t pl = 0; pl < (size_t)X.n * X.c; pl++)
            for (int oy = 0; oy < Y.h; oy++)
                for (int ox = 0; ox < Y.w; ox++) {
                    size_t o = (pl * Y.h + oy) * Y.w + ox;
                    if (is_max(p.mode)) {
                        bool taken = false; /* the first tap equal to y (or NaN when y is) */
                        window(p, X, pl, oy, ox, [&](size_t i) {
                            if (!taken && (xf[i] == yf[o] || (std::isnan(yf[o]) && std::isnan(xf[i])))) {
                                acc[i] += g[o];
                                taken = true;
                            }
                        });
                    } else {
                        int count = 0;
                        window(p, X, pl, oy, ox, [&](size_t) { count++; });
                        double k = p.mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? p.wh * p.ww : count;
                        window(p, X, pl, oy, ox, [&](size_t i) { acc[i] += g[o] / k; });
                    }
                }
        for (size_t i = 0; i < acc.size(); i++)
            blend(dx, CUDNN_DATA_FLOAT, i, al, be, acc[i]);
    });
    return CUDNN_STATUS_SUCCESS;
}

/* ---- batch norm (spatial) ---- */

static cudnnStatus_t bn_check(const char *what, cudnnBatchNormMode_t mode,
                              const cudnnTensorStruct *x, const cudnnTensorStruct *bn, double eps)
{
    if (mode != CUDNN_BATCHNORM_SPATIAL)
        BAD("%s: emulated for SPATIAL only", what);
    if (!x->set || !bn->set)
        BAD("%s: descriptor not set", what);
    if (bn->n != 1 || bn->c != x->c || bn->h != 1 || bn->w != 1 || bn->type != CUDNN_DATA_FLOAT)
        BAD("%s: scale/bias/mean/var descriptor [%d, %d, %d, %d] for x with %d channels", what,
            bn->n, bn->c, bn->h, bn->w, x->c);
    if (eps < CUDNN_BN_MIN_EPSILON)
        BAD("%s: epsilon %g below CUDNN_BN_MIN_EPSILON", what, eps);
    return CUDNN_STATUS_SUCCESS;
}
static size_t at(const cudnnTensorStruct &x, int n, int c, size_t i)
{
    return ((size_t)n * x.c + c) * x.h * x.w + i;
}

extern "C" cudnnStatus_t cudnnBatchNormalizationForwardTraining(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    cudnnTensorDescriptor_t xd, const void *x, cudnnTensorDescriptor_t yd, void *y,
    cudnnTensorDescriptor_t bnd, const void *scale, const void *bias, double factor,
    void *rmean, void *rvar, double eps, void *smean, void *sinv)
{
    const char *what = "cudnnBatchNormalizationForwardTraining";
    if (cudnnStatus_t s = bn_check(what, mode, xd, bnd, eps))
        return s;
    if (!!rmean != !!rvar || !!smean != !!sinv)
        BAD("%s: running (or saved) mean and variance must be both NULL or both set", what);
    size_t cb = (size_t)xd->c * 4;
    if (!tensor_ok("BN fwd x", xd, x) || !tensor_ok("BN fwd y", yd, y) || !in_device("BN fwd scale", scale, cb) ||
        !in_device("BN fwd bias", bias, cb) || (rmean && (!in_device("BN running mean", rmean, cb) || !in_device("BN running var", rvar, cb))) ||
        (smean && (!in_device("BN saved mean", smean, cb) || !in_device("BN saved inv var", sinv, cb))))
        return CUDNN_STATUS_BAD_PARAM;
    double al = *(const float *)alpha, be = *(const float *)beta;
    cudnnTensorStruct X = *xd;
    cudaemu::enqueue(h->stream, what, [=]() {
        const float *xf = (const float *)x, *sc = (const float *)scale, *bi = (const float *)bias;
        size_t hw = (size_t)X.h * X.w, M = X.n * hw;
        for (int c = 0; c < X.c; c++) {
            double sum = 0, sq = 0;
            for (int n = 0; n < X.n; n++)
                for (size_t i = 0; i < hw; i++)
                    sum += xf[at(X, n, c, i)];
            double mean = sum / M;
            for (int n = 0; n < X.n; n++)
                for (size_t i = 0; i < hw; i++)
                    sq += (xf[at(X, n, c, i)] - mean) * (xf[at(X, n, c, i)] - mean);
            double var = sq / M, inv = 1.0 / sqrt(var + eps);
            for (int n = 0; n < X.n; n++)
                for (size_t i = 0; i < hw; i++) {
                    size_t j = at(X, n, c, i);
                    blend(y, CUDNN_DATA_FLOAT, j, al, be, (xf[j] - mean) * inv * sc[c] + bi[c]);
                }
            if (rmean) {
                float *rm = (float *)rmean, *rv = (float *)rvar;
                rm[c] = (float)((1 - factor) * rm[c] + factor * mean);
                rv[c] = (float)((1 - factor) * rv[c] + factor * var * M / (M - 1.0));
            }
            if (smean) {
                ((float *)smean)[c] = (float)mean;
                ((float *)sinv)[c] = (float)inv;
            }
        }
    });
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    cudnnTensorDescriptor_t xd, const void *x, cudnnTensorDescriptor_t yd, void *y,
    cudnnTensorDescriptor_t bnd, const void *scale, const void *bias, const void *mean,
    const void *var, double eps)
{
    const char *what = "cudnnBatchNormalizationForwardInference";
    if (cudnnStatus_t s = bn_check(what, mode, xd, bnd, eps))
        return s;
    size_t cb = (size_t)xd->c * 4;
    if (!tensor_ok("BN inf x", xd, x) || !tensor_ok("BN inf y", yd, y) || !in_device("BN inf scale", scale, cb) ||
        !in_device("BN inf bias", bias, cb) || !in_device("BN inf mean", mean, cb) || !in_device("BN inf var", var, cb))
        return CUDNN_STATUS_BAD_PARAM;
    double al = *(const float *)alpha, be = *(const float *)beta;
    cudnnTensorStruct X = *xd;
    cudaemu::enqueue(h->stream, what, [=]() {
        const float *xf = (const float *)x, *sc = (const float *)scale, *bi = (const float *)bias,
                    *m = (const float *)mean, *v = (const float *)var;
        size_t hw = (size_t)X.h * X.w;
        for (int c = 0; c < X.c; c++)
            for (int n = 0; n < X.n; n++)
                for (size_t i = 0; i < hw; i++) {
                    size_t j = at(X, n, c, i);
                    blend(y, CUDNN_DATA_FLOAT, j, al, be, (xf[j] - m[c]) / sqrt((double)v[c] + eps) * sc[c] + bi[c]);
                }
    });
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
    if (cudnnStatus_t s = bn_check(what, mode, xd, bnd, eps))
        return s;
    if (!!smean != !!sinv)
        BAD("%s: saved mean and inverse variance must be both NULL or both set", what);
    size_t cb = (size_t)xd->c * 4;
    if (!tensor_ok("BN bwd x", xd, x) || !tensor_ok("BN bwd dy", dyd, dy) || !tensor_ok("BN bwd dx", dxd, dx) ||
        !in_device("BN bwd scale", scale, cb) || !in_device("BN bwd dscale", dscale, cb) ||
        !in_device("BN bwd dbias", dbias, cb) ||
        (smean && (!in_device("BN bwd saved mean", smean, cb) || !in_device("BN bwd saved inv var", sinv, cb))))
        return CUDNN_STATUS_BAD_PARAM;
    double ad = *(const float *)alpha_d, bd = *(const float *)beta_d, ap = *(const float *)alpha_p,
           bp = *(const float *)beta_p;
    cudnnTensorStruct X = *xd;
    cudaemu::enqueue(h->stream, what, [=]() {
        const float *xf = (const float *)x, *g = (const float *)dy, *sc = (const float *)scale;
        size_t hw = (size_t)X.h * X.w, M = X.n * hw;
        for (int c = 0; c < X.c; c++) {
            double mean, inv;
            if (smean) {
                mean = ((const float *)smean)[c];
                inv = ((const float *)sinv)[c];
            } else {
                double sum = 0, sq = 0;
                for (int n = 0; n < X.n; n++)
                    for (size_t i = 0; i < hw; i++)
                        sum += xf[at(X, n, c, i)];
                mean = sum / M;
                for (int n = 0; n < X.n; n++)
                    for (size_t i = 0; i < hw; i++)
                        sq += (xf[at(X, n, c, i)] - mean) * (xf[at(X, n, c, i)] - mean);
                inv = 1.0 / sqrt(sq / M + eps);
            }
            double sg = 0, sgx = 0;
            for (int n = 0; n < X.n; n++)
                for (size_t i = 0; i < hw; i++) {
                    size_t j = at(X, n, c, i);
                    sg += g[j];
                    sgx += g[j] * (xf[j] - mean) * inv;
                }
            for (int n = 0; n < X.n; n++)
                for (size_t i = 0; i < hw; i++) {
                    size_t j = at(X, n, c, i);
                    double xh = (xf[j] - mean) * inv;
                    blend(dx, CUDNN_DATA_FLOAT, j, ad, bd, sc[c] * inv * (g[j] - sg / M - xh * sgx / M));
                }
            blend(dscale, CUDNN_DATA_FLOAT, c, ap, bp, sgx);
            blend(dbias, CUDNN_DATA_FLOAT, c, ap, bp, sg);
        }
    });
    return CUDNN_STATUS_SUCCESS;
}
