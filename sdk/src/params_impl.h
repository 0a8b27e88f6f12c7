/* params_impl.h — the parameter store's internals that other parts of
 * libscorch use. Private to libscorch. */
#ifndef SCORCH_PARAMS_IMPL_H
#define SCORCH_PARAMS_IMPL_H

#include "scorch/params.h"

/* Frees the gradient buffer of a store that will never train (an
 * inference handle, scorch/infer.h), so that it holds the values alone:
 * sc_params_grads() is NULL afterwards and every parameter's grad view
 * points nowhere. Call it once the store is on its device. */
void sc_params_drop_grads(sc_params *ps);

#endif
