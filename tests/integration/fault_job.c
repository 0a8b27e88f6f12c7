/* A job plugin for the job tests (test_jobs.c). Its --job-args:
 *   fault=fail,rank=R          rank R fails after a barrier, the others go on
 *                              to a second barrier
 *   fault=sleep,rank=R,seconds=S  rank R sleeps S seconds before a barrier
 *   fault=crash,rank=R         rank R stores into the first page (SIGSEGV)
 *   fault=report (default)     every rank prints what scorch/job.h tells it,
 *                              and what it refuses without a dataset or model
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "scorch/scorch.h"

static void report(sc_job *job)
{
    char device[32];
    sc_job_batches *it = NULL;
    sc_status no_data = sc_job_batches_open(job, SC_SPLIT_TRAIN, true, &it);
    printf("fault_job: rank %d of %d on %s, %d checkpoints, batch %lld, dataset %s, model %s\n",
           sc_dist_rank(), sc_dist_world_size(),
           sc_device_str(sc_job_device(job), device, sizeof device),
           sc_job_checkpoint_count(job), (long long)sc_job_batch_size(job),
           sc_job_sample_spec(job) ? "yes" : "no", sc_job_has_model(job) ? "yes" : "no");
    if (no_data != SC_OK)
        printf("fault_job: batches refused: %s\n", sc_error_message());
    sc_job_batches_close(it);
    if (sc_job_load(job, "nothing.ckpt", NULL, NULL) != SC_OK)
        printf("fault_job: load refused: %s\n", sc_error_message());
    fflush(stdout);
}

static sc_status fault_job_run(sc_job *job, const sc_args *args)
{
    static const char *const known[] = {"fault", "rank", "seconds", NULL};
    SC_TRY(sc_args_check_known(args, known));
    const char *fault = sc_args_get(args, "fault");
    int64_t rank, seconds;
    SC_TRY(sc_args_int(args, "rank", 1, &rank));
    SC_TRY(sc_args_int(args, "seconds", 0, &seconds));
    bool chosen = sc_dist_rank() == rank;
    if (!fault || strcmp(fault, "report") == 0) {
        report(job);
        return SC_OK;
    }
    if (strcmp(fault, "crash") == 0 && chosen) {
        /* The never-mapped first page: a real store, not NULL, which UBSan stops. */
        volatile int *volatile first_page = (volatile int *)(uintptr_t)64;
        *first_page = 1;
    }
    if (strcmp(fault, "sleep") == 0 && chosen)
        sleep((unsigned)seconds);
    SC_TRY(sc_dist_barrier());
    if (strcmp(fault, "fail") == 0 && chosen)
        return sc_error_set(SC_ERR_PLUGIN, "injected failure on rank %d", sc_dist_rank());
    return sc_dist_barrier();
}

SC_PLUGIN_EXPORT const sc_job_plugin scorch_job_plugin = {
    SC_ABI_HEADER(sc_job_plugin), "fault_job", "fails, sleeps or crashes on a rank",
    fault_job_run,
};
