#!/usr/bin/python3
"""scorch against PyTorch: training throughput of the same model on the same
data, batch size, optimizer and thread count, measured in one invocation and
printed side by side (medians of several alternating runs, and their ratio).

    tests/bench/bench_train.py --build build [--runs 5] [--steps 300]

Needs Debian's python3-torch (tools/install-deps --bench) and the
dataset-fashion-mnist package.
"""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # the fashion_mnist plugin's normalisation

# name -> scorch model plugin, model args, and the PyTorch twin's layer widths
MODELS = {
    "mlp": {"plugin": "mlp.so", "args": "hidden=256:128", "widths": [784, 256, 128, 10]},
}


def train_flops_per_sample(widths):
    """Forward 2*MACs; backward twice that, minus the input gradient of the
    first layer, which neither framework computes."""
    macs = [a * b for a, b in zip(widths, widths[1:])]
    return 6 * sum(macs) - 2 * macs[0]


def scorch_rate(build, model, args):
    with tempfile.TemporaryDirectory() as run_dir:
        cmd = [f"{build}/host/scorch-train", "--model", f"{build}/plugins/{model['plugin']}",
               "--model-args", model["args"], "--dataset", f"{build}/plugins/fashion_mnist.so",
               "--dataset-path", DATA, "--epochs", "1", "--batch-size", str(args.batch),
               "--optimizer", "adam", "--lr", "1e-3", "--threads", str(args.threads),
               "--workers", str(args.workers), "--max-train-iterations", str(args.steps),
               "--max-valid-iterations", "1", "--max-test-iterations", "1",
               "--run-dir", os.path.join(run_dir, "run"), "--quiet"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(run_dir, "run", "metrics.jsonl")) as f:
            for line in f:
                record = json.loads(line)
                if record.get("phase") == "train":
                    return record["samples_per_s"]
    raise RuntimeError("scorch-train wrote no train record")


def load_idx(torch, name, offset):
    with gzip.open(os.path.join(DATA, name)) as f:
        return torch.frombuffer(bytearray(f.read()[offset:]), dtype=torch.uint8)


def torch_rate(torch, model_spec, args):
    """The same loop a PyTorch user writes: index a shuffled batch, forward,
    cross-entropy, backward, Adam step, batch accuracy."""
    torch.manual_seed(0)
    images = load_idx(torch, "train-images-idx3-ubyte.gz", 16).view(-1, 784)[:50000]
    labels = load_idx(torch, "train-labels-idx1-ubyte.gz", 8).long()[:50000]
    x_all = (images.float() / 255 - MEAN) / STD
    widths = model_spec["widths"]
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    net = torch.nn.Sequential(*layers[:-1])
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    perm = torch.randperm(len(x_all))
    warmup = 20
    for step in range(warmup + args.steps):
        if step == warmup:
            start = time.perf_counter()
        idx = perm[(step * args.batch) % (len(perm) - args.batch):][:args.batch]
        x, y = x_all[idx], labels[idx]
        opt.zero_grad(set_to_none=True)
        out = net(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        (out.argmax(1) == y).sum().item()
    return args.steps * args.batch / (time.perf_counter() - start)


def sgemm_peak(build, threads):
    out = subprocess.run([f"{build}/tests/bench/bench_sgemm", "1024", str(threads)],
                         check=True, capture_output=True, text=True).stdout
    return float(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("bench_train: PyTorch is missing (tools/install-deps --bench)", file=sys.stderr)
        return 77  # meson's "skipped"
    torch.set_num_threads(args.threads)

    peak = sgemm_peak(args.build, args.threads)
    print(f"scorch vs PyTorch {torch.__version__}: training samples/s on Fashion-MNIST, "
          f"batch {args.batch}, Adam, {args.threads} threads, {args.steps} steps, "
          f"median of {args.runs} alternating runs")
    print(f"{'model':8}{'scorch':>10}{'pytorch':>10}{'ratio':>8}"
          f"{'scorch GFLOP/s':>16}{'sgemm peak GFLOP/s':>20}")
    for name, spec in MODELS.items():
        ours, theirs = [], []
        for _ in range(args.runs):
            ours.append(scorch_rate(args.build, spec, args))
            theirs.append(torch_rate(torch, spec, args))
        s, t = statistics.median(ours), statistics.median(theirs)
        gflops = s * train_flops_per_sample(spec["widths"]) / 1e9
        print(f"{name:8}{s:10.0f}{t:10.0f}{s / t:7.2f}x{gflops:16.1f}{peak:20.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
