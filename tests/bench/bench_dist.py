#!/usr/bin/python3
"""Data parallelism: the time per step spent waiting on communication, as a
fraction of the step — on the CPU under mpirun -np 2 and as 2 replicas in
one process (--replicas 2), with one process on the same cores alongside;
on a GPU (--device cuda) under mpirun -np 1 with
--device distributed_dataparallel, which keeps the machinery (NCCL) for
one rank, beside the plain single process (medians of several runs).

    tests/bench/bench_dist.py --build build [--runs 5] [--steps 190] [--device cuda]

Trains the MLP (784-256-128-10, 235k parameters, 0.9 MiB of gradients per
step) on Fashion-MNIST with Adam. "comm" is metrics.jsonl's comm_s: time
blocked in collectives (the per-step status checks and whatever of the
gradient allreduce backward did not hide), over the train phase's time_s.
Each rank or replica gets cores/2 compute threads; one process gets them
all. Needs
Open MPI's mpirun and the dataset-fashion-mnist package.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

DATA = "/usr/share/datasets/fashion-mnist"
MPIRUN = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
          "--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none"]


def train_record(build, args, launch, ranks, batch, bucket_mb):
    """The train phase's metrics.jsonl record of one run. launch: "alone",
    "mpirun" (ranks under mpirun), "replicas" (ranks as threads of one
    process) or "ddp1" (one rank under mpirun with the data-parallel
    machinery)."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        device = "distributed_dataparallel" if launch == "ddp1" else args.device
        cmd = [f"{build}/host/scorch-train", "--model", f"{build}/plugins/mlp.so",
               "--model-args", "hidden=256:128", "--dataset", f"{build}/plugins/fashion_mnist.so",
               "--dataset-path", DATA, "--epochs", "1", "--batch-size", str(batch),
               "--max-train-iterations", str(args.steps), "--max-valid-iterations", "1",
               "--max-test-iterations", "1", "--workers", "1", "--bucket-mb", str(bucket_mb),
               "--run-dir", run_dir, "--quiet", "--device", device]
        if launch in ("mpirun", "ddp1"):
            threads = max(1, os.cpu_count() // ranks)
            cmd = [args.mpirun, *MPIRUN, "-x", f"OMP_NUM_THREADS={threads}",
                   "-np", str(ranks), *cmd]
        elif launch == "replicas":  # each takes its share of the cores
            cmd += ["--replicas", str(ranks)]
        env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            for line in f:
                record = json.loads(line)
                if record.get("phase") == "train":
                    return record
    raise RuntimeError("scorch-train wrote no train record")


def summary(records):
    """Medians of ms per step, ms of it in communication, that share, and
    samples/s;
    "step" counts the steps taken (fewer than --steps in a shorter epoch)."""
    step_ms = statistics.median(1e3 * r["time_s"] / r["step"] for r in records)
    comm_ms = statistics.median(1e3 * r["comm_s"] / r["step"] for r in records)
    share = statistics.median(r["comm_s"] / r["time_s"] for r in records)
    rate = statistics.median(r["samples_per_s"] for r in records)
    return step_ms, comm_ms, share, rate


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=190)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    args.mpirun = shutil.which("mpirun")
    if not args.mpirun:
        print("bench_dist: mpirun is missing (openmpi-bin)", file=sys.stderr)
        return 77  # meson's "skipped"
    where = "one GPU" if args.device == "cuda" else f"{os.cpu_count()} cores"
    print(f"data parallel on {where}: MLP 784-256-128-10, Fashion-MNIST, "
          f"Adam, {args.steps} steps, median of {args.runs} alternating runs")
    print(f"{'setup':31}{'ms/step':>9}{'comm ms':>9}{'comm %':>8}{'samples/s':>11}")
    # --bucket-mb 25 makes one bucket of all 0.9 MiB, which can only start
    # once backward is done; 0.25 makes two (fc1.weight, and the rest), the
    # second sent while backward computes fc1's gradient.
    setups = []
    for batch in (128, 256):
        half = batch // 2
        setups += [(f"1 process, batch {batch}", "alone", 1, batch, 25),
                   (f"2 ranks x {half}, 1 bucket", "mpirun", 2, half, 25),
                   (f"2 ranks x {half}, 2 buckets", "mpirun", 2, half, 0.25),
                   (f"2 replicas x {half}, 1 bucket", "replicas", 2, half, 25),
                   (f"2 replicas x {half}, 2 buckets", "replicas", 2, half, 0.25)]
    if args.device == "cuda":  # one GPU: NCCL over one rank against none
        setups = [(f"{name}, batch {batch}", launch, 1, batch, bucket_mb)
                  for batch in (128, 512)
                  for name, launch, bucket_mb in (("1 process", "alone", 25),
                                                  ("NCCL -np 1, 1 bucket", "ddp1", 25),
                                                  ("NCCL -np 1, 2 buckets", "ddp1", 0.25))]
    # Alternating runs, so that a busy spell of the machine hits every setup.
    records = {name: [] for name, *_ in setups}
    for _ in range(args.runs):
        for name, launch, ranks, batch, bucket_mb in setups:
            records[name].append(train_record(args.build, args, launch, ranks, batch,
                                              bucket_mb))
    for name, *_ in setups:
        step_ms, comm_ms, share, rate = summary(records[name])
        print(f"{name:31}{step_ms:9.3f}{comm_ms:9.3f}{100 * share:7.1f}%"
              f"{rate:11.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
