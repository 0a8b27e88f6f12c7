/* CPU kernels for matmul and linear, through cblas_sgemm. */
#include <cblas.h>

#include "cpu.h"

/* c [M, N] = a [M, K] b [K, N] */
static sc_status matmul_forward(sc_node *node)
{
    const sc_tensor *a = node->in[0], *b = node->in[1];
    int m = (int)a->shape[0], k = (int)a->shape[1], n = (int)b->shape[1];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
                sc_tensor_f32(a), k, sc_tensor_f32(b), n, 0.0f,
                sc_tensor_f32(node->out), n);
    return SC_OK;
}

/* ga [M, K] += gc [M, N] b^T;  gb [K, N] += a^T gc */
static sc_status matmul_backward(sc_node *node, const sc_tensor *gc,
                                 sc_tensor *const *gin)
{
    const sc_tensor *a = node->in[0], *b = node->in[1];
    int m = (int)a->shape[0], k = (int)a->shape[1], n = (int)b->shape[1];
    if (gin[0])
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, k, n, 1.0f,
                    sc_tensor_f32(gc), n, sc_tensor_f32(b), n, 1.0f,
                    sc_tensor_f32(gin[0]), k);
    if (gin[1])
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, m, 1.0f,
                    sc_tensor_f32(a), k, sc_tensor_f32(gc), n, 1.0f,
                    sc_tensor_f32(gin[1]), n);
    return SC_OK;
}

/* y [N, OUT] = x [N, IN] w^T + b, with w [OUT, IN], b [OUT] */
static sc_status linear_forward(sc_node *node)
{
    const sc_tensor *x = node->in[0], *w = node->in[1];
    int n = (int)x->shape[0], in = (int)x->shape[1], out = (int)w->shape[0];
    float *y = sc_tensor_f32(node->out);
    float beta = 0.0f;
    if (node->n_inputs > 2) {
        const float *b = sc_tensor_f32(node->in[2]);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < out; j++)
                y[(int64_t)i * out + j] = b[j];
        beta = 1.0f;
    }
    /* One sample (a prediction at batch 1): sgemm would pack all of w on
     * every call, which costs more than the product itself. */
    if (n == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, out, in, 1.0f, sc_tensor_f32(w), in,
                    sc_tensor_f32(x), 1, beta, y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f,
                    sc_tensor_f32(x), in, sc_tensor_f32(w), in, beta, y, out);
    return SC_OK;
}

/* gx [N, IN] += gy [N, OUT] w (= when gx is fresh);  gw [OUT, IN] += gy^T x;
 * gb [OUT] += sum_n gy */
static sc_status linear_backward(sc_node *node, const sc_tensor *gy,
                                 sc_tensor *const *gin)
{
    const sc_tensor *x = node->in[0], *w = node->in[1];
    int n = (int)x->shape[0], in = (int)x->shape[1], out = (int)w->shape[0];
    const float *g = sc_tensor_f32(gy);
    if (gin[0])
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, g, out,
                    sc_tensor_f32(w), in, sc_node_grad_fresh(node, 0) ? 0.0f : 1.0f,
                    sc_tensor_f32(gin[0]), in);
    if (gin[1])
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f,
                    g, out, sc_tensor_f32(x), in, 1.0f, sc_tensor_f32(gin[1]), in);
    if (node->n_inputs > 2 && gin[2]) {
        float *gb = sc_tensor_f32(gin[2]);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < out; j++)
                gb[j] += g[(int64_t)i * out + j];
    }
    return SC_OK;
}

const sc_kernel sc_cpu_kernel_matmul = {.forward = matmul_forward, .backward = matmul_backward};
const sc_kernel sc_cpu_kernel_linear = {.forward = linear_forward, .backward = linear_backward,
                                        .writes_grads = 1u << 0};
