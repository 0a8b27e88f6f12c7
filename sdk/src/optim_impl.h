/* optim_impl.h — one optimizer update as the backends see it: the flat
 * buffers, the trainable ranges and the step's scalars. Private to
 * libscorch; the CPU loops live in optim.c, the CUDA kernels in
 * cuda/optim.cu. */
#ifndef SCORCH_OPTIM_IMPL_H
#define SCORCH_OPTIM_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/optim.h"

/* The scalars of one step, derived once from the config, lr and step count. */
typedef struct sc_optim_scalars {
    float lr, weight_decay, momentum;
    bool nesterov;
    bool centered;       /* RMSprop */
    bool adapt;          /* LAMB: the trust ratio applies (weight decay != 0) */
    float beta1, beta2, eps;
    float one_minus_beta1, one_minus_beta2; /* Adam, LAMB, Lion: in double, rounded once */
    float alpha, one_minus_alpha;           /* RMSprop */
    float step_size;     /* Adam: lr / (1 - beta1^t) */
    float bc1;           /* LAMB: 1 - beta1^t */
    float bc2_sqrt;      /* Adam, LAMB: sqrt(1 - beta2^t) */
    float decay;         /* AdamW, Lion: 1 - lr * weight_decay; 1 otherwise */
    float l2;            /* Adam, RMSprop: weight decay added to the gradient */
} sc_optim_scalars;

/* A run of trainable parameters in the flat buffers, in floats, with the
 * same options (sc_optim_set_param), hence the same scalars. LAMB's are
 * one parameter each: its trust ratio is per parameter. */
typedef struct sc_optim_range {
    int64_t offset, numel;
    sc_optim_scalars s;
} sc_optim_range;

/* LAMB on a GPU: the blocks that sum a parameter's squared norms, each
 * writing its two partial sums to sc_optim_update.partials. */
enum { SC_OPTIM_LAMB_BLOCKS = 32 };

typedef enum sc_optim_rule {
    SC_OPTIM_RULE_SGD,          /* p -= lr * (g + wd * p) */
    SC_OPTIM_RULE_SGD_MOMENTUM, /* state[0]: momentum buffer */
    SC_OPTIM_RULE_ADAM,         /* state[0], state[1]: first and second moments; AdamW too */
    SC_OPTIM_RULE_RMSPROP,      /* state[0] square_avg; state[1] momentum, state[2] grad_avg
                                   or NULL (no momentum, not centered) */
    SC_OPTIM_RULE_LAMB,         /* state[0], state[1]: first and second moments */
    SC_OPTIM_RULE_LION,         /* state[0]: exp_avg */
    SC_OPTIM_RULE_GUARD,        /* no update: the guard's check (sc_optim_guard), on a GPU */
} sc_optim_rule;

typedef struct sc_optim_update {
    sc_optim_rule rule;
    float *values;       /* [numel] flat parameters */
    const float *grads;  /* [numel] flat gradients */
    float *state[3];     /* [numel] each, as the rule says */
    const sc_optim_range *ranges;
    int n_ranges;
    /* LAMB on a GPU: scratch for 2 * SC_OPTIM_LAMB_BLOCKS partial sums,
     * on the device, reused range after range (one stream orders them). */
    float *partials;
    /* On a GPU, the guard's flag (one int32 on the device): the guard sets
     * it when *loss or a gradient of the ranges is not finite, and an
     * update leaves values and state as they are while it is set. NULL on
     * the CPU. */
    int32_t *nonfinite;
    const float *loss; /* the guard's only */
} sc_optim_update;

#endif
