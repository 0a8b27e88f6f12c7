#include "scorch_host/params.h"

#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "host_only.h"
#include "params_impl.h"

/* Parameters and their gradient views; both point into the flat buffers. */
typedef struct param_slot {
    sc_tensor value;
    sc_tensor grad;
    int64_t offset;
} param_slot;

struct sc_params {
    param_slot **slots; /* slots stay put; the flat buffers move */
    int count, capacity;
    float *values, *grads; /* on device; host memory while the store grows */
    int64_t numel;
    sc_device device;
};

sc_params *sc_params_new(void)
{
    sc_params *ps = calloc(1, sizeof *ps);
    if (!ps)
        sc_error_set(SC_ERR_NOMEM, "out of memory for a parameter store");
    return ps;
}

void sc_params_free(sc_params *ps)
{
    if (!ps)
        return;
    for (int i = 0; i < ps->count; i++) {
        free((char *)ps->slots[i]->value.name);
        free(ps->slots[i]);
    }
    free(ps->slots);
    if (ps->device.kind == SC_DEVICE_CPU) {
        free(ps->values);
        free(ps->grads);
    } else {
        size_t bytes = (size_t)ps->numel * sizeof(float);
        sc_device_free(ps->device, ps->values, bytes);
        sc_device_free(ps->device, ps->grads, bytes);
    }
    free(ps);
}

static void repoint(sc_params *ps)
{
    for (int i = 0; i < ps->count; i++) {
        param_slot *s = ps->slots[i];
        s->value.data = ps->values + s->offset;
        s->grad.data = ps->grads ? ps->grads + s->offset : NULL; /* NULL: dropped */
        s->value.device = s->grad.device = ps->device;
    }
}

static sc_status grow_flat(sc_params *ps, int64_t numel)
{
    size_t bytes = (size_t)(ps->numel + numel) * sizeof(float);
    float *v = realloc(ps->values, bytes ? bytes : sizeof(float));
    if (!v)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for %zu bytes of parameters", bytes);
    ps->values = v;
    float *g = realloc(ps->grads, bytes ? bytes : sizeof(float));
    if (!g)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for %zu bytes of gradients", bytes);
    ps->grads = g;
    memset(ps->values + ps->numel, 0, (size_t)numel * sizeof(float));
    memset(ps->grads + ps->numel, 0, (size_t)numel * sizeof(float));
    return SC_OK;
}

static sc_status add_slot(sc_params *ps, param_slot *s)
{
    if (ps->count == ps->capacity) {
        int cap = ps->capacity ? 2 * ps->capacity : 16;
        param_slot **slots = realloc(ps->slots, (size_t)cap * sizeof *slots);
        if (!slots)
            return sc_error_set(SC_ERR_NOMEM, "out of memory for parameter slots");
        ps->slots = slots;
        ps->capacity = cap;
    }
    ps->slots[ps->count++] = s;
    return SC_OK;
}

static sc_tensor *add_tensor(sc_params *ps, const char *name, int ndim,
                             const int64_t *shape, uint32_t flags)
{
    if (!name || !*name) {
        sc_error_set(SC_ERR_INVALID, "a parameter needs a name");
        return NULL;
    }
    if (ps->device.kind != SC_DEVICE_CPU) {
        sc_error_set(SC_ERR_STATE, "parameter '%s': the store was moved to a GPU; "
                     "add parameters before sc_params_to_device", name);
        return NULL;
    }
    if (sc_params_find(ps, name)) {
        sc_error_set(SC_ERR_INVALID, "parameter '%s' is defined twice", name);
        return NULL;
    }
    param_slot *s = calloc(1, sizeof *s);
    char *copy = strdup(name);
    if (!s || !copy || sc_tensor_init(&s->value, SC_F32, ndim, shape) != SC_OK ||
        grow_flat(ps, s->value.numel) != SC_OK || add_slot(ps, s) != SC_OK) {
        if (!s || !copy)
            sc_error_set(SC_ERR_NOMEM, "out of memory for parameter '%s'", name);
        free(s);
        free(copy);
        return NULL;
    }
    s->grad = s->value;
    s->offset = ps->numel;
    ps->numel += s->value.numel;
    s->value.name = copy;
    s->value.flags = flags;
    s->value.grad = &s->grad;
    repoint(ps);
    return &s->value;
}

sc_tensor *sc_params_add(sc_params *ps, const char *name, int ndim,
                         const int64_t *shape)
{
    return add_tensor(ps, name, ndim, shape, SC_TENSOR_PARAM | SC_TENSOR_REQUIRES_GRAD);
}

sc_tensor *sc_params_add_buffer(sc_params *ps, const char *name, int ndim,
                                const int64_t *shape)
{
    return add_tensor(ps, name, ndim, shape, SC_TENSOR_PARAM | SC_TENSOR_BUFFER);
}

int sc_params_count(const sc_params *ps) { return ps->count; }

sc_tensor *sc_params_at(const sc_params *ps, int i) { return &ps->slots[i]->value; }

sc_tensor *sc_params_find(const sc_params *ps, const char *name)
{
    for (int i = 0; i < ps->count; i++)
        if (strcmp(ps->slots[i]->value.name, name) == 0)
            return &ps->slots[i]->value;
    return NULL;
}

int64_t sc_params_offset(const sc_params *ps, int i) { return ps->slots[i]->offset; }

int64_t sc_params_numel(const sc_params *ps) { return ps->numel; }

float *sc_params_values(const sc_params *ps) { return ps->values; }

float *sc_params_grads(const sc_params *ps) { return ps->grads; }

void sc_params_set_trainable(sc_tensor *param, bool trainable)
{
    if (sc_host_only(__func__) != SC_OK || (param->flags & SC_TENSOR_BUFFER))
        return;
    if (trainable)
        param->flags |= SC_TENSOR_REQUIRES_GRAD;
    else
        param->flags &= ~(uint32_t)SC_TENSOR_REQUIRES_GRAD;
}

int64_t sc_params_trainable_numel(const sc_params *ps)
{
    int64_t n = 0;
    for (int i = 0; i < ps->count; i++)
        if (ps->slots[i]->value.flags & SC_TENSOR_REQUIRES_GRAD)
            n += ps->slots[i]->value.numel;
    return n;
}

sc_device sc_params_device(const sc_params *ps) { return ps->device; }

/* A 1-D f32 view of n floats at data on dev. */
static sc_tensor flat_view(float *data, int64_t n, sc_device dev)
{
    return (sc_tensor){.dtype = SC_F32, .ndim = 1, .shape = {n}, .numel = n, .data = data,
                       .device = dev};
}

sc_status sc_params_read(const sc_params *ps, float *values, float *grads)
{
    const sc_device host = {SC_DEVICE_CPU, 0};
    sc_tensor v = flat_view(values, ps->numel, host), g = flat_view(grads, ps->numel, host);
    sc_tensor pv = flat_view(ps->values, ps->numel, ps->device);
    sc_tensor pg = flat_view(ps->grads, ps->numel, ps->device);
    if (values)
        SC_TRY(sc_tensor_copy(&v, &pv));
    return grads ? sc_tensor_copy(&g, &pg) : SC_OK;
}

sc_status sc_params_write(sc_params *ps, const float *values)
{
    SC_TRY(sc_host_only(__func__));
    sc_tensor v = flat_view((float *)values, ps->numel, (sc_device){SC_DEVICE_CPU, 0});
    sc_tensor pv = flat_view(ps->values, ps->numel, ps->device);
    return sc_tensor_copy(&pv, &v);
}

sc_status sc_params_to_device(sc_params *ps, sc_device device)
{
    SC_TRY(sc_host_only(__func__));
    if (device.kind == ps->device.kind && device.index == ps->device.index)
        return SC_OK;
    if (ps->device.kind != SC_DEVICE_CPU || device.kind == SC_DEVICE_CPU)
        return sc_error_set(SC_ERR_UNSUPPORTED, "parameters move from the host to a GPU "
                            "once; copy them with sc_tensor_copy otherwise");
    size_t bytes = (size_t)ps->numel * sizeof(float);
    float *values = sc_device_alloc(device, bytes);
    float *grads = values ? sc_device_alloc(device, bytes) : NULL;
    sc_tensor host = flat_view(ps->values, ps->numel, ps->device);
    sc_tensor dev = flat_view(values, ps->numel, device);
    if (!grads || sc_tensor_copy(&dev, &host) != SC_OK ||
        sc_device_zero(device, grads, bytes) != SC_OK) {
        sc_device_free(device, values, bytes);
        sc_device_free(device, grads, bytes);
        return sc_error_wrap(sc_error_code(), "moving %lld parameters to the GPU",
                             (long long)ps->numel);
    }
    free(ps->values);
    free(ps->grads);
    ps->values = values;
    ps->grads = grads;
    ps->device = device;
    repoint(ps);
    return SC_OK;
}

void sc_params_drop_grads(sc_params *ps)
{
    sc_device_free(ps->device, ps->grads, (size_t)ps->numel * sizeof(float));
    ps->grads = NULL;
    repoint(ps);
}

sc_status sc_params_scale_grads(sc_params *ps, int64_t offset, int64_t n, float factor)
{
    SC_TRY(sc_host_only(__func__));
    if (offset < 0 || n < 0 || offset + n > ps->numel)
        return sc_error_set(SC_ERR_INVALID, "scale_grads: [%lld, %lld) outside %lld gradients",
                            (long long)offset, (long long)(offset + n), (long long)ps->numel);
    return sc_device_scale_f32(ps->device, ps->grads + offset, factor, n);
}

void sc_params_zero_grad(sc_params *ps)
{
    if (sc_host_only(__func__) != SC_OK)
        return;
    /* Queued on a GPU; cannot fail for memory that is the store's own. */
    sc_device_zero(ps->device, ps->grads, (size_t)ps->numel * sizeof(float));
}
