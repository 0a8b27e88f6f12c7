#!/usr/bin/python3
"""Two or more builds of scorch against each other, in the same hour: is a
change faster, and does it compute the same bits?

    tests/bench/compare_builds.py [--rounds 7] [--models cnn] [--load]
        before=/tmp/build-before after=build [name=BUILD:VAR=VALUE ...]
    tests/bench/compare_builds.py --same-bits before=/tmp/build-before after=build

A build is a build directory (its host/scorch-train and plugins/), after
a name and optionally followed by environment settings for its runs
(after=build:OMP_WAIT_POLICY=passive) or scorch-train options, which
override the runs' own (after=build:--threads=1). Keep the "before"
build by copying the build directory (its rpaths are relative) before
changing the code.

Throughput (the default): each round runs scorch-train once per build in
turn (Fashion-MNIST, 2 threads, 1 loader worker, batch 128, Adam; mlp 300
steps, cnn 100, resnet 30) and reads the training samples/s from its
metrics.jsonl; each build's median over the rounds is printed. Builds
alternate because this machine's speed moves by tens of percent within
minutes: only figures taken side by side compare. A run waits until the
other processes use under 0.1 cores, and is run again when they used
more during it. --load runs a competing busy loop throughout (issue 18's
"under load").

--same-bits: each build trains each model for 20 steps (seed 3, batch 64)
and exports its weights (scorch-export); the tensors must match byte for
byte. A change meant to keep the numbers (a faster loop, a fusion) must
pass it; one that changes the order of a sum does not, and says by how
much its numbers moved instead.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_train import MODELS  # the models' arguments, as bench_train runs them

STEPS = {"mlp": 300, "cnn": 100, "resnet": 30}
QUIET_CORES = 0.1
HZ = os.sysconf("SC_CLK_TCK")


def parse_build(spec):
    name, _, rest = spec.partition("=")
    if not rest:
        sys.exit(f"{spec}: expected NAME=BUILD[:VAR=VALUE...]")
    build, *settings = rest.split(":")
    if not os.access(f"{build}/host/scorch-train", os.X_OK):
        sys.exit(f"{spec}: no {build}/host/scorch-train")
    env = dict(s.split("=", 1) for s in settings if not s.startswith("--"))
    options = [part for s in settings if s.startswith("--") for part in s.split("=", 1)]
    return name, build, (env, options)


def busy_ticks():
    """Ticks of the whole machine not idle, from /proc/stat."""
    with open("/proc/stat") as f:
        ticks = list(map(int, f.readline().split()[1:]))
    return sum(ticks) - ticks[3] - ticks[4]  # idle, iowait


def process_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


class Others:
    """The cores used by processes other than ours (and the busy loop)."""

    def __init__(self, busy_pid):
        self.busy_pid = busy_pid

    def start(self):
        self.t0, self.s0 = time.time(), busy_ticks()
        self.b0 = process_ticks(self.busy_pid) if self.busy_pid else 0

    def cores(self, own_ticks=0):
        b1 = process_ticks(self.busy_pid) if self.busy_pid else 0
        ticks = busy_ticks() - self.s0 - own_ticks - (b1 - self.b0)
        return ticks / HZ / (time.time() - self.t0)

    def wait_quiet(self):
        while True:
            self.start()
            time.sleep(2)
            if self.cores() < QUIET_CORES:
                return


def train_cmd(build, options, model, run_dir, steps, batch, seed):
    return [f"{build}/host/scorch-train", "--model", f"{build}/plugins/{model}.so",
            "--model-args", MODELS[model]["args"], "--dataset", f"{build}/plugins/fashion_mnist.so",
            "--dataset-path", "/usr/share/datasets/fashion-mnist", "--epochs", "1",
            "--max-train-iterations", str(steps), "--max-valid-iterations", "1",
            "--max-test-iterations", "1", "--threads", "2", "--workers", "1",
            "--batch-size", str(batch), "--optimizer", "adam", "--lr", "1e-3", "--seed", str(seed),
            "--quiet", "--no-tensorboard", "--run-dir", run_dir, *options]


def timed_run(build, run, model, others):
    """Training samples/s of one run, and the cores others used meanwhile."""
    env, options = run
    with tempfile.TemporaryDirectory() as tmp:
        cmd = train_cmd(build, options, model, tmp + "/run", STEPS[model], 128, 1)
        others.start()
        child = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        used = others.cores((usage.ru_utime + usage.ru_stime) * HZ)
        if status:
            sys.exit(f"failed ({status}): {' '.join(cmd)}")
        with open(tmp + "/run/metrics.jsonl") as f:
            train = [r for r in map(json.loads, f) if r.get("phase") == "train"]
        return sum(r["samples"] for r in train) / sum(r["time_s"] for r in train), used


def throughput(args, builds):
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.load else None
    others = Others(busy and busy.pid)
    try:
        for model in args.models:
            rates = {name: [] for name, _, _ in builds}
            for r in range(args.rounds):
                for name, build, run in builds:
                    while True:
                        others.wait_quiet()
                        rate, used = timed_run(build, run, model, others)
                        if used < QUIET_CORES:
                            break
                        print(f"  ({name}: others used {used:.2f} cores; again)", flush=True)
                    rates[name].append(rate)
                    print(f"  {model} round {r + 1} {name}: {rate:,.0f} samples/s", flush=True)
            first = statistics.median(rates[builds[0][0]])
            for name, _, _ in builds:
                med = statistics.median(rates[name])
                print(f"{model} {'under load' if args.load else 'idle'} {name}: median "
                      f"{med:,.0f} samples/s (min {min(rates[name]):,.0f}, max "
                      f"{max(rates[name]):,.0f}), {med / first:.3f}x {builds[0][0]}", flush=True)
    finally:
        if busy:
            busy.kill()


def run_or_exit(cmd, env):
    status = subprocess.run(cmd, env={**os.environ, **env}, stdout=subprocess.DEVNULL).returncode
    if status:
        sys.exit(f"failed ({status}): {' '.join(cmd)}")


def exported_tensors(build, run, model, tmp):
    """The tensors of a short run's weights: the safetensors file without
    its metadata, which names the run's files."""
    env, options = run
    run_dir, out = f"{tmp}/run-{model}", f"{tmp}/{model}.safetensors"
    run_or_exit(train_cmd(build, options, model, run_dir, 20, 64, 3), env)
    run_or_exit([f"{build}/host/scorch-export", "--checkpoint",
                 f"{run_dir}/checkpoints/last.ckpt", "--out", out], env)
    with open(out, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    return header, blob[8 + n:]


def same_bits(args, builds):
    failed = False
    for model in args.models:
        results = []
        for name, build, run in builds:
            with tempfile.TemporaryDirectory() as tmp:
                results.append((name, *exported_tensors(build, run, model, tmp)))
        first, header, data = results[0]
        for name, other_header, other_data in results[1:]:
            if other_header != header:
                print(f"{model}: {name}'s tensors are not {first}'s (names, shapes or offsets)")
                failed = True
                continue
            differ = [t for t, info in header.items()
                      if data[slice(*info["data_offsets"])] != other_data[slice(*info["data_offsets"])]]
            print(f"{model}: {name} against {first}: "
                  + (f"{len(differ)} of {len(header)} tensors differ: {', '.join(differ)}"
                     if differ else f"the same bits ({len(header)} tensors, {len(data):,} bytes)"))
            failed = failed or bool(differ)
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("builds", nargs="+", metavar="NAME=BUILD[:VAR=VALUE...]")
    p.add_argument("--models", default=None,
                   help="comma-separated, of mlp, cnn, resnet (default: cnn; with "
                   "--same-bits all three)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--load", action="store_true", help="beside a competing busy loop")
    p.add_argument("--same-bits", action="store_true",
                   help="compare the weights after 20 steps instead of the speed")
    args = p.parse_args()
    builds = [parse_build(s) for s in args.builds]
    if len(builds) < 2:
        sys.exit("name two builds or more")
    models = args.models or ("mlp,cnn,resnet" if args.same_bits else "cnn")
    args.models = models.split(",")
    for m in args.models:
        if m not in MODELS:
            sys.exit(f"--models: unknown model {m!r} (mlp, cnn or resnet)")
    if args.same_bits:
        return same_bits(args, builds)
    throughput(args, builds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
