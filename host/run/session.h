/* session.h — what scorch-train and scorch-test both set up: the model
 * and dataset plugins, the dataset index and its splits, the network with
 * its parameters, the devices and compute context, and the run's hooks and
 * user functions.
 *
 * Every plugin call goes through here, so a failure is reported once, as
 * "<plugin file>: <function>: <plugin's message>".
 */
#ifndef SCORCH_HOST_SESSION_H
#define SCORCH_HOST_SESSION_H

#include "base/config.h"
#include "base/device.h"
#include "control/hook_set.h"
#include "base/plugin_loader.h"
#include "scorch/scorch.h"
#include "control/user_funcs.h"

typedef struct host_session {
    host_model_lib model;
    host_dataset_lib data;
    host_plugin_lib hooks_libs[HOST_MAX_HOOK_PLUGINS]; /* --hooks, cfg->hooks.n of them */
    sc_args *model_args;
    sc_args *dataset_args;
    void *index;
    void *splits[SC_SPLIT_COUNT];
    sc_sample_spec spec; /* of the train split; the others must match */
    sc_params *params;
    void *net;
    sc_ctx *ctx;
    host_hook_set *hooks;
    host_user_funcs *funcs;   /* the plugins' user functions (scorch-ctl call) */
    host_device_set devices;  /* where it computes, and the GPUs it holds */
    const char *main_metric; /* from socket_main_metric */
    sc_metric_mode main_metric_mode;
} host_session;

/* Loads and creates everything from cfg, for the replica or MPI rank
 * `local_rank` on its node (which device it takes, device.h); on error,
 * what was opened is closed again and the message names the part that
 * failed. A job (scorch-run) may have no --model (then no network and no
 * params: model.api NULL), or neither --model nor --dataset (data.api
 * NULL too). */
sc_status host_session_open(host_session *s, const host_config *cfg, int local_rank);

/* The device a run asks for: --device, else the model's preferred_device
 * (the model plugin is opened to read it), else "cpu"; into text, and
 * into source where it came from ("--device" or the model's file). */
sc_status host_session_device_choice(const host_config *cfg, char *text, size_t text_size,
                                   char *source, size_t source_size);
void host_session_close(host_session *s);

/* outputs = network(batch inputs); loss = criterion(outputs, targets) when
 * loss is not NULL. Checks the plugin's results. Host batches are copied
 * to the context's device first. */
sc_status host_session_forward(host_session *s, const sc_tensor_list *inputs,
                             sc_tensor_list *outputs);
sc_status host_session_criterion(host_session *s, const sc_tensor_list *outputs,
                               const sc_tensor_list *targets, sc_tensor **loss);
/* The socket's metrics, given host copies of the outputs (plugins read
 * metric inputs on the host) and the batch's targets. */
sc_status host_session_metrics(host_session *s, const sc_tensor_list *outputs,
                             const sc_tensor_list *targets, sc_metrics *metrics);

/* Batches arrive in host memory; on a GPU the plugin sees copies there,
 * from the step arena (the tensors themselves on the CPU). */
sc_status host_session_upload(host_session *s, const sc_tensor_list *in, sc_tensor_list *out);

/* Host copies of tensors from the step arena (the tensors themselves on
 * the CPU), valid until the step ends. */
sc_status host_session_to_host(host_session *s, const sc_tensor_list *in, sc_tensor_list *out);

int64_t host_session_split_len(const host_session *s, sc_split split);

#endif
