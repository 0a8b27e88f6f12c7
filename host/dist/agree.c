/* agree.c — what keeps the ranks in step (dist.h): the check every
 * collective begins with, a failure every rank learns of, agreement on
 * stop requests and request bits, and the digest that catches ranks whose
 * parameters have diverged. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "dist/dist_impl.h"
#include "dist/launch.h"

/* Per thread, as a rank is a process or a replica's thread: whether
 * another rank reports this rank's failure, for host_dist_print_error,
 * which main (or the replica's thread) calls after the host_dist is gone. */
static _Thread_local bool silent;

void host_dist_print_error(const char *program)
{
    if (!silent)
        fprintf(stderr, "%s%s: %s\n", host_log_prefix(), program, sc_error_message());
}

typedef struct failure_note {
    int status;
    char message[HOST_DIST_MESSAGE_MAX];
} failure_note;

static sc_status agreed_failure(const host_dist *d)
{
    return sc_error_set(d->failed_status, "%s", d->failed_message);
}

/* Every rank learns rank `who`'s failure; this rank's own failure, if any,
 * stays its message. Rank 0 reports the job's failure; another failed rank
 * adds its own only when it says something else. */
static sc_status settle_failure(host_dist *d, sc_status local, int who)
{
    failure_note note = {0};
    if (d->rank == who) {
        note.status = local;
        snprintf(note.message, sizeof note.message, "%s", sc_error_message());
    }
    d->ops->broadcast(d->comm, &note, sizeof note, who, "the broadcast of a rank's failure");
    d->failed = true;
    if (local != SC_OK) {
        d->failed_status = local;
        snprintf(d->failed_message, sizeof d->failed_message, "%s", sc_error_message());
        silent = d->rank != 0 && strcmp(note.message, d->failed_message) == 0;
    } else {
        d->failed_status = (sc_status)note.status;
        snprintf(d->failed_message, sizeof d->failed_message, "rank %d failed: %s", who,
                 note.message);
        silent = d->rank != 0;
    }
    return agreed_failure(d);
}

/* The ranks met in different collectives: one in a plugin's call (or in
 * one with other arguments), another elsewhere. Every rank of the check
 * sees it; each names its own call. */
static sc_status calls_differ(host_dist *d)
{
    d->failed = true;
    d->failed_status = SC_ERR_STATE;
    snprintf(d->failed_message, sizeof d->failed_message,
             "the ranks' collectives do not match: rank %d is in %s and another rank in "
             "%s (a plugin must make the same sc_dist_* calls, with the same sizes, on "
             "every rank and in the same order)",
             d->rank, d->call_what ? d->call_what : "one of scorch's own",
             d->call_what ? "a different call, or in the same one with other sizes"
                          : "a plugin's sc_dist_* call");
    silent = d->rank != 0;
    return agreed_failure(d);
}

sc_status host_dist_exchange(host_dist *d, sc_status local, int v[HOST_V_COUNT])
{
    if (d->failed)
        return agreed_failure(d);
    if (!d->ops)
        return local;
    host_dist_finish_round(d);
    double t0 = host_now();
    v[HOST_V_FAILED] = local != SC_OK ? d->world - d->rank : 0;
    v[HOST_V_CALL] = d->call_digest;
    v[HOST_V_CALL_LOW] = INT_MAX - d->call_digest;
    d->ops->max_ints(d->comm, v, HOST_V_COUNT, d->call_what ? d->call_what : "the status check");
    sc_status st = v[HOST_V_FAILED] ? settle_failure(d, local, d->world - v[HOST_V_FAILED])
                   : v[HOST_V_CALL] != INT_MAX - v[HOST_V_CALL_LOW] ? calls_differ(d)
                                                                    : SC_OK;
    d->comm_s += host_now() - t0;
    return st;
}

sc_status host_dist_check(host_dist *d, sc_status local)
{
    int v[HOST_V_COUNT] = {0};
    return d ? host_dist_exchange(d, local, v) : local;
}

/* 31 bits of FNV-1a over the values of every tensor but the buffers,
 * which ranks update on their own batches between syncs; -1 when the
 * values cannot be read (no rank's digest matches it then). */
static int params_digest(host_dist *d)
{
    const float *values = host_dist_pull_values(d);
    if (!values)
        return -1;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < d->n_params; i++) {
        const sc_tensor *p = sc_params_at(d->params, i);
        uint32_t w;
        const float *v = values + sc_params_offset(d->params, i);
        for (int64_t k = 0; !(p->flags & SC_TENSOR_BUFFER) && k < p->numel; k++) {
            memcpy(&w, v + k, sizeof w);
            h = (h ^ w) * 0x100000001b3ULL;
        }
    }
    return (int)(h >> 33);
}

/* The digests differ: names the lowest rank whose differ from rank 0's. */
static sc_status diverged(host_dist *d, int digest)
{
    int root_digest = digest;
    d->ops->broadcast(d->comm, &root_digest, sizeof root_digest, 0, "the parameter check");
    int v = digest != root_digest ? d->world - d->rank : 0;
    d->ops->max_ints(d->comm, &v, 1, "the parameter check");
    d->failed = true;
    d->failed_status = SC_ERR_STATE;
    snprintf(d->failed_message, sizeof d->failed_message,
             "the ranks' parameters have diverged: rank %d's differ from rank 0's (did a "
             "hook change the lr, or a plugin the parameters, on some ranks only?)",
             d->world - v);
    silent = d->rank != 0;
    return agreed_failure(d);
}

sc_status host_dist_agree_flags(host_dist *d, bool *stop, bool *interrupted,
                                int v[HOST_V_COUNT])
{
    v[HOST_V_STOP] = *stop;
    v[HOST_V_INTERRUPTED] = *interrupted;
    SC_TRY(host_dist_exchange(d, SC_OK, v));
    *stop = v[HOST_V_STOP] != 0;
    *interrupted = v[HOST_V_INTERRUPTED] != 0;
    return SC_OK;
}

sc_status host_dist_agree(host_dist *d, bool *stop, bool *interrupted)
{
    int v[HOST_V_COUNT] = {0};
    int digest = d->ops && d->params ? params_digest(d) : 0;
    v[HOST_V_DIGEST] = digest;
    v[HOST_V_DIGEST_LOW] = INT_MAX - digest;
    SC_TRY(host_dist_agree_flags(d, stop, interrupted, v));
    if (d->ops && v[HOST_V_DIGEST] != INT_MAX - v[HOST_V_DIGEST_LOW])
        return diverged(d, digest);
    return SC_OK;
}

sc_status host_dist_agree_bits(host_dist *d, unsigned *bits)
{
    int v[HOST_V_COUNT] = {0};
    for (int i = 0; i < HOST_V_COUNT - HOST_V_BITS; i++)
        v[HOST_V_BITS + i] = (*bits >> i) & 1u;
    SC_TRY(host_dist_exchange(d, SC_OK, v));
    for (int i = 0; i < HOST_V_COUNT - HOST_V_BITS; i++)
        *bits |= (unsigned)v[HOST_V_BITS + i] << i;
    return SC_OK;
}
