#!/usr/bin/python3
"""PyTorch's side of bench_ops: forward and backward time of each layer of
the `cnn` model at batch 128, and of the whole forward + backward step, in
the same table (medians of 15 runs, milliseconds).

    tests/bench/bench_ops_torch.py [threads] [--cpu-time]

--cpu-time times with the thread's CPU clock instead of the wall clock
(meaningful on one thread; steadier on a shared machine), as bench_ops
does when built with CLOCK_THREAD_CPUTIME_ID.
"""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

BATCH, WARMUP, RUNS = 128, 3, 15


def main():
    threads = int(next((a for a in sys.argv[1:] if a.isdigit()), 2))
    clock = time.thread_time if "--cpu-time" in sys.argv else time.perf_counter
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    conv1 = torch.nn.Conv2d(1, 32, 3, padding=1, bias=False)
    conv2 = torch.nn.Conv2d(32, 64, 3, padding=1, bias=False)
    bn1, bn2 = torch.nn.BatchNorm2d(32), torch.nn.BatchNorm2d(64)
    fc1, fc2 = torch.nn.Linear(3136, 128), torch.nn.Linear(128, 10)

    def pool(x):
        return F.max_pool2d(x, 2)

    layers = [("conv1 1->32 3x3", conv1, [BATCH, 1, 28, 28], False),
              ("batch_norm 32", bn1, [BATCH, 32, 28, 28], True),
              ("relu 32x28x28", F.relu, [BATCH, 32, 28, 28], True),
              ("max_pool 2", pool, [BATCH, 32, 28, 28], True),
              ("conv2 32->64 3x3", conv2, [BATCH, 32, 14, 14], True),
              ("batch_norm 64", bn2, [BATCH, 64, 14, 14], True),
              ("relu 64x14x14", F.relu, [BATCH, 64, 14, 14], True),
              ("max_pool 2", pool, [BATCH, 64, 14, 14], True),
              ("linear 3136->128", fc1, [BATCH, 3136], True),
              ("linear 128->10", fc2, [BATCH, 128], True)]
    print(f"pytorch {torch.__version__}, cnn layers, batch {BATCH}, {threads} threads, "
          f"median of {RUNS} runs (ms)")
    print(f"{'layer':20} {'forward':>9} {'backward':>9}")
    total_f = total_b = 0.0
    for name, fn, shape, grad in layers:
        x = torch.randn(*shape, requires_grad=grad)
        fwd, bwd = [], []
        for r in range(WARMUP + RUNS):
            t0 = clock()
            y = fn(x)
            t1 = clock()
            g = torch.randn_like(y)
            t2 = clock()
            y.backward(g)
            t3 = clock()
            if r >= WARMUP:
                fwd.append(1e3 * (t1 - t0))
                bwd.append(1e3 * (t3 - t2))
        f, b = statistics.median(fwd), statistics.median(bwd)
        total_f, total_b = total_f + f, total_b + b
        print(f"{name:20} {f:9.3f} {b:9.3f}")
    print(f"{'sum':20} {total_f:9.3f} {total_b:9.3f}")
    net = torch.nn.Sequential(conv1, bn1, torch.nn.ReLU(), torch.nn.MaxPool2d(2), conv2, bn2,
                              torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(), fc1,
                              torch.nn.ReLU(), fc2)
    x, target = torch.randn(BATCH, 1, 28, 28), torch.arange(BATCH) % 10
    steps = []
    for r in range(WARMUP + RUNS):
        t0 = clock()
        F.cross_entropy(net(x), target).backward()
        if r >= WARMUP:
            steps.append(1e3 * (clock() - t0))
    step = statistics.median(steps)
    print(f"forward + backward step: {step:.3f} ms ({BATCH / step * 1e3:.0f} samples/s)")


if __name__ == "__main__":
    main()
