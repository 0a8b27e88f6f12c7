/* --device: its notation, the choice of GPUs on a pretend machine, and the
 * per-GPU locks that keep two runs off one GPU (within a process and
 * across processes, and released when a holder dies). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/device.h"

/* A machine with three GPUs: 1, 5 and 3 GiB free. */
static const host_gpu_inventory three_gpus = {true, 3, {1LL << 30, 5LL << 30, 3LL << 30}};
static const host_gpu_inventory no_backend = {false, 0, {0}};
static const host_gpu_inventory backend_no_gpu = {true, 0, {0}};

static char lock_dir[64];

static void make_lock_dir(void)
{
    strcpy(lock_dir, "/tmp/scorch-test-device-XXXXXX");
    cr_assert_not_null(mkdtemp(lock_dir));
}

static void remove_lock_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", lock_dir);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(device, .init = make_lock_dir, .fini = remove_lock_dir);

static host_device_env env_of(const host_gpu_inventory *gpus, const char *holder)
{
    return (host_device_env){lock_dir, holder, 0, gpus};
}

static void assert_message_has(const char *part)
{
    cr_assert(strstr(sc_error_message(), part), "message '%s' lacks '%s'", sc_error_message(),
              part);
}

static host_device_set allocate_ok(const char *text, const host_gpu_inventory *gpus)
{
    host_device_env env = env_of(gpus, "runs/first");
    host_device_set set;
    cr_assert_eq(host_device_allocate(text, "--device", &env, &set), SC_OK, "%s: %s", text,
                 sc_error_message());
    return set;
}

static void assert_refused(const char *text, const host_gpu_inventory *gpus, sc_status code,
                           const char *part)
{
    host_device_env env = env_of(gpus, "runs/second");
    host_device_set set;
    cr_assert_eq(host_device_allocate(text, "--device", &env, &set), code, "%s: %s", text,
                 sc_error_message());
    cr_expect_eq(set.n, 0, "a refused allocation holds nothing");
    assert_message_has(part);
}

Test(device, parses_every_form)
{
    host_device_request r;
    cr_assert_eq(host_device_parse("cpu", &r), SC_OK);
    cr_expect_eq(r.mode, HOST_DEVICES_CPU);
    cr_assert_eq(host_device_parse("cuda", &r), SC_OK);
    cr_expect(r.mode == HOST_DEVICES_CUDA && r.n == 1 && r.index[0] == 0);
    cr_assert_eq(host_device_parse("cuda:3,0,12", &r), SC_OK);
    cr_expect(r.n == 3 && r.index[0] == 3 && r.index[1] == 0 && r.index[2] == 12);
    cr_assert_eq(host_device_parse("auto", &r), SC_OK);
    cr_expect_eq(r.mode, HOST_DEVICES_AUTO);
    cr_assert_eq(host_device_parse("parallel", &r), SC_OK);
    cr_expect_eq(r.mode, HOST_DEVICES_PARALLEL);
    cr_assert_eq(host_device_parse("dataparallel", &r), SC_OK); /* the seeds' name */
    cr_expect_eq(r.mode, HOST_DEVICES_PARALLEL);
    cr_assert_eq(host_device_parse("distributed_dataparallel", &r), SC_OK);
    cr_expect_eq(r.mode, HOST_DEVICES_DDP);
}

Test(device, refuses_bad_notation_saying_what_is_wrong)
{
    static const struct {
        const char *text, *part;
    } bad[] = {
        {"gpu", "'gpu' is not a device (cpu, cuda"}, {"cuda:", "expected a GPU number at ''"},
        {"cuda:-1", "expected a GPU number"},         {"cuda:1,", "expected a GPU number"},
        {"cuda:0;1", "expected ',' at ';1'"},         {"cuda:2,2", "lists GPU 2 twice"},
        {"cuda:99999", "expected a GPU number"},      {"", "'' is not a device"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        host_device_request r;
        cr_expect_eq(host_device_parse(bad[i].text, &r), SC_ERR_INVALID, "%s", bad[i].text);
        assert_message_has(bad[i].part);
    }
}

Test(device, the_cpu_is_never_locked)
{
    host_device_set a = allocate_ok("cpu", &three_gpus), b = allocate_ok("cpu", &three_gpus);
    cr_expect_eq(a.device.kind, SC_DEVICE_CPU);
    cr_expect_eq(a.n + b.n, 0);
    cr_expect_str_eq(a.note, "");
}

Test(device, a_held_gpu_refuses_a_second_run_naming_the_holder)
{
    host_device_set first = allocate_ok("cuda:1", &three_gpus);
    cr_expect_eq(first.device.kind, SC_DEVICE_CUDA);
    cr_expect_eq(first.device.index, 1);
    cr_expect_eq(first.n, 1);
    char pid[64];
    snprintf(pid, sizeof pid, "PID %ld, run dir runs/first", (long)getpid());
    assert_refused("cuda:1", &three_gpus, SC_ERR_STATE,
                   "--device cuda:1: cuda:1 is held by another run");
    assert_message_has(pid);
    host_device_set other = allocate_ok("cuda:2", &three_gpus); /* other GPUs are free */
    host_device_release(&other);
    host_device_set_holder(&first, "runs/renamed");
    assert_refused("cuda:1,0", &three_gpus, SC_ERR_STATE, "run dir runs/renamed");
    host_device_release(&first);
    host_device_set again = allocate_ok("cuda:1", &three_gpus);
    host_device_release(&again);
}

Test(device, auto_takes_the_free_gpu_with_most_memory)
{
    host_device_set a = allocate_ok("auto", &three_gpus);
    cr_expect_eq(a.device.index, 1, "5 GiB free");
    host_device_set b = allocate_ok("auto", &three_gpus);
    cr_expect_eq(b.device.index, 2, "3 GiB free; GPU 1 is held");
    host_device_set c = allocate_ok("auto", &three_gpus);
    cr_expect_eq(c.device.index, 0);
    assert_refused("auto", &three_gpus, SC_ERR_STATE, "--device auto: no free GPU: cuda:");
    host_device_release(&b);
    host_device_set d = allocate_ok("auto", &three_gpus);
    cr_expect_eq(d.device.index, 2);
    host_device_release(&a);
    host_device_release(&c);
    host_device_release(&d);
}

static host_device_set allocate_replica(const char *text, int replica)
{
    host_device_env env = env_of(&three_gpus, "runs/replicas");
    env.local_rank = replica;
    host_device_set set;
    cr_assert_eq(host_device_allocate(text, "--device", &env, &set), SC_OK, "%s, replica %d: %s",
                 text, replica, sc_error_message());
    cr_assert_eq(set.n, 1);
    return set;
}

Test(device, each_replica_of_a_list_or_of_parallel_holds_its_own_gpu)
{
    host_device_set a = allocate_replica("cuda:2,0", 0), b = allocate_replica("cuda:2,0", 1);
    cr_expect_eq(a.device.index, 2);
    cr_expect_eq(b.device.index, 0);
    /* parallel's replica 1 takes cuda:1, free; its replica 0 finds cuda:0 held */
    host_device_set c = allocate_replica("parallel", 1);
    cr_expect_eq(c.device.index, 1);
    assert_refused("parallel", &three_gpus, SC_ERR_STATE, "cuda:0 is held");
    host_device_release(&a);
    host_device_release(&b);
    host_device_release(&c);
}

static int replicas_of(const char *text, int requested, const host_gpu_inventory *gpus)
{
    int n = -1;
    cr_assert_eq(host_device_replicas(text, "--device", requested, gpus, &n), SC_OK, "%s: %s",
                 text, sc_error_message());
    return n;
}

static void assert_replicas_refused(const char *text, int requested,
                                    const host_gpu_inventory *gpus, const char *part)
{
    int n;
    cr_assert_neq(host_device_replicas(text, "--device", requested, gpus, &n), SC_OK, "%s", text);
    assert_message_has(part);
}

Test(device, replicas_default_to_one_per_gpu_named)
{
    cr_expect_eq(replicas_of("cpu", 0, &no_backend), 1);
    cr_expect_eq(replicas_of("cpu", 4, &no_backend), 4);
    cr_expect_eq(replicas_of("parallel", 0, &three_gpus), 3);
    cr_expect_eq(replicas_of("parallel", 2, &three_gpus), 2);
    cr_expect_eq(replicas_of("cuda:2,0", 0, &three_gpus), 2);
    cr_expect_eq(replicas_of("cuda:1", 0, &three_gpus), 1);
    cr_expect_eq(replicas_of("auto", 1, &three_gpus), 1);
    cr_expect_eq(replicas_of("distributed_dataparallel", 0, &three_gpus), 1);
}

Test(device, replicas_a_device_cannot_have_are_refused_saying_why)
{
    assert_replicas_refused("parallel", 4, &three_gpus,
                            "--replicas 4 with --device parallel: this machine has 3 GPUs");
    assert_replicas_refused("parallel", 0, &backend_no_gpu,
                            "--device parallel: no GPU found; for replicas on the cpu use "
                            "--device cpu --replicas N");
    assert_replicas_refused("cuda:0,1", 3, &three_gpus, "2 GPUs are listed");
    assert_replicas_refused("cuda:1", 2, &three_gpus, "1 GPU is listed");
    assert_replicas_refused("auto", 2, &three_gpus, "that is one device");
    assert_replicas_refused("distributed_dataparallel", 2, &three_gpus,
                            "more ranks: mpirun with distributed_dataparallel");
}

Test(device, gpus_the_machine_lacks_are_named)
{
    assert_refused("cuda:5", &three_gpus, SC_ERR_INVALID,
                   "--device cuda:5: this machine has 3 GPUs (cuda:0 to cuda:2)");
    assert_refused("cuda", &backend_no_gpu, SC_ERR_UNSUPPORTED, "--device cuda: no GPU found");
}

Test(device, a_build_without_cuda_says_so_and_auto_falls_back_to_the_cpu)
{
    assert_refused("cuda:0", &no_backend, SC_ERR_UNSUPPORTED,
                   "--device cuda:0: this build has no CUDA backend; use --device cpu");
    assert_refused("parallel", &no_backend, SC_ERR_UNSUPPORTED, "no CUDA backend");
    host_device_set a = allocate_ok("auto", &no_backend);
    cr_expect_eq(a.device.kind, SC_DEVICE_CPU);
    cr_expect(strstr(a.note, "--device auto: this build has no CUDA backend; computing on the "
                             "cpu"), "%s", a.note);
    host_device_set ddp = allocate_ok("distributed_dataparallel", &no_backend);
    cr_expect_eq(ddp.device.kind, SC_DEVICE_CPU, "CPU ranks");
    host_device_env env = env_of(&no_backend, "runs/x");
    host_device_set set;
    cr_assert_eq(host_device_allocate("cuda", "m.so's preferred_device", &env, &set),
                 SC_ERR_UNSUPPORTED);
    assert_message_has("m.so's preferred_device cuda: this build has no CUDA backend");
}

Test(device, a_lock_is_held_across_processes_and_dropped_when_its_holder_dies)
{
    int ready[2], go[2];
    cr_assert_eq(pipe(ready), 0);
    cr_assert_eq(pipe(go), 0);
    pid_t child = fork();
    if (child == 0) {
        int fd;
        char byte = host_device_lock(lock_dir, 0, "runs/child", &fd) == SC_OK ? 'y' : 'n';
        if (write(ready[1], &byte, 1) != 1 || read(go[0], &byte, 1) != 1)
            _exit(2);
        _exit(0); /* dies holding the lock */
    }
    char byte = 0;
    cr_assert_eq(read(ready[0], &byte, 1), 1);
    cr_assert_eq(byte, 'y');
    int fd;
    cr_assert_eq(host_device_lock(lock_dir, 0, "runs/parent", &fd), SC_ERR_STATE);
    char who[64];
    snprintf(who, sizeof who, "(PID %ld, run dir runs/child)", (long)child);
    assert_message_has(who);
    cr_assert_eq(write(go[1], "x", 1), 1);
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert_eq(host_device_lock(lock_dir, 0, "runs/parent", &fd), SC_OK, "%s",
                 sc_error_message());
    close(fd);
}
