/* spec.h — how the shipped model plugins name a dataset's tensor in their
 * messages ("the dataset gives f32 [1, 28, 28]"). Header only: each plugin
 * compiles it in (hidden visibility), nothing is exported.
 */
#ifndef SCORCH_PLUGINS_SPEC_H
#define SCORCH_PLUGINS_SPEC_H

#include <stddef.h>
#include <stdio.h>

#include <scorch/plugin.h>

/* "<dtype> <shape>" of s into buf (cut to size), e.g. "i64 []"; returns buf. */
static inline const char *spec_str(const sc_tensor_spec *s, char *buf, size_t size)
{
    char shape[96];
    snprintf(buf, size, "%s %s", sc_dtype_name(s->dtype),
             sc_shape_str(s->ndim, s->shape, shape, sizeof shape));
    return buf;
}

#endif
