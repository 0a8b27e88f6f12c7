#!/usr/bin/python3
"""scorch against PyTorch: training throughput of the same model on the same
data, batch size, optimizer and thread count, measured in one invocation and
printed side by side (medians of several alternating runs, and their ratio).

    tests/bench/bench_train.py --build build [--runs 3] [--steps N]
        [--batches 32,128,512] [--models mlp,cnn,resnet] [--under-load]
    tests/bench/bench_train.py --build build --device cuda [--precision fp32|tf32|bf16]
        [--cuda-graphs auto|on|off] [--batches 128,512] [--models mlp,cnn,resnet]
    tests/bench/bench_train.py --build build [--device cuda] --time-to-acc 0.93
        [--max-epochs 15]

The references: the current PyTorch from PyPI, in the virtual environment
that tools/install-deps --bench makes ($SCORCH_BENCH_VENV, default
/opt/scorch-bench-venv), and on the CPU also Debian's python3-torch (1.13,
/usr/bin/python3), which sees no GPU; --torch-python PYTHON, once or more,
names other interpreters. The first reference is the one of the ratio and
of --time-to-acc. Each PyTorch runs in child processes of its interpreter
(this script with --torch-job), one per measurement, so that its peak
memory is its own. Needs the dataset-fashion-mnist package; with --device
cuda, a PyTorch that sees a GPU and a scorch built with the CUDA backend.
Exits 77 (meson's "skipped") when a reference's PyTorch or, for --device
cuda, its GPU is missing.

Throughput (the default mode): one table row per model and batch size
(on the CPU 32, 128 and 512, to show how the cost grows with the batch;
on a GPU 128 and 512): samples per second of scorch and of each
PyTorch, "ratio" = scorch / the first PyTorch, and the peak resident
memory (MB) of each process: scorch-train's max_rss_mb in metrics.jsonl,
the PyTorch child's getrusage() maximum, both counting the framework,
the data held in memory and the training. On the CPU every run times
about the same number of samples at every batch size (MODELS'
timed_samples / batch steps, the steps column) unless --steps fixes the
steps; on a GPU --steps defaults to 2000. The PyTorch twin of each model
plugin has the same layers and initialisation, and the parameter counts
of both (scorch's model summary, each twin's parameters and running
statistics) are checked equal before anything is timed. PyTorch trains
from the training set preloaded on the device, indexing a shuffled batch
there, and is timed between torch.cuda.synchronize() calls after warm-up
steps (TORCH_WARMUP_STEPS); scorch's first epoch is a warm-up too (the
step arena's first touch; on a GPU also the CUDA context, cuDNN plans,
graph capture), so its steps are timed in the epochs after it.
Precision: fp32 turns TF32 off in PyTorch, tf32
turns it on for matrix products and cuDNN, bf16 runs forward and loss
under torch.autocast(bfloat16) (scorch: --precision of the same name);
cudnn.benchmark is on, and the header line names the GPU. The 1-minute
load average is printed before and after the table: other processes on
the machine lower every figure, PyTorch's most.

--under-load measures every row twice: idle, then with one competing
CPU-bound process (BUSY_LOOP) that this script starts before the loaded
runs of both frameworks and kills after them, on every way out (an
error, Ctrl-C, SIGTERM, and its own death through PR_SET_PDEATHSIG). The
loaded row's ratio is scorch / PyTorch under that load; the "of idle" row
under it is each framework's loaded samples/s / its idle ones.

GFLOP/s counts the convolutions' and linear layers' multiply-adds (2 FLOPs
each) found by running the PyTorch twin once: training FLOPs per sample =
3 x forward (forward, input gradient, weight gradient) - the first layer's
input gradient, which neither framework computes. Batch norm, pooling,
activations, the loss and the optimizer are left out. On the CPU the
"sgemm peak" column is the sgemm peak of the machine (the best rate of
tests/bench/bench_sgemm measured so far, again beside each row); on a GPU that
column is the share of scorch's training time spent waiting for its
data loader.

--time-to-acc T trains the cnn plugin (its default args) for --max-epochs
with scorch and the first PyTorch: Adam, lr 1e-3, --lr-schedule cosine
over all the epochs, --batch (128), no augmentation unless
--tta-dataset-args asks for the fashion_mnist plugin's
(crop_padding=2,hflip=true; PyTorch does the same on the device). It
reports the first epoch whose test accuracy reaches T and the time to
it: the sum over the epochs up to it of training plus one evaluation of
10,000 images (scorch: the train and valid records of metrics.jsonl;
PyTorch: training plus the test split), next to the wall time of all
the epochs (scorch-train's whole process; PyTorch's loop with loading
the data). scorch-train tests only after its last epoch, so the test
accuracy of each epoch comes from scorch-test on that epoch's
checkpoint, afterwards and untimed. The speed-up printed is PyTorch's
time / scorch's. --models and --batches do not apply; --under-load is
refused.
"""
import argparse
import contextlib
import ctypes
import gzip
import json
import math
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import namedtuple

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # the fashion_mnist plugin's normalisation
TRAIN_SAMPLES = 50000  # the plugin's train split: its default valid_size=10000 takes the rest
# PyTorch steps run before the timed ones: on a GPU also cuDNN's autotuning.
TORCH_WARMUP_STEPS = {"cpu": 5, "cuda": 20}
# scorch-train epochs run before the timed ones, as PyTorch's warm-up steps:
# on the CPU the first step faults in the step arena's pages (the resnet's
# 800 MB at batch 128 cost about two steps' time), on a GPU the CUDA
# context, cuDNN plans and graph capture cost more.
SCORCH_WARMUP_EPOCHS = {"cpu": 1, "cuda": 1}
# the fashion_mnist plugin's dataset args that the PyTorch side can mirror
AUGMENTATION_ARGS = {"crop_padding", "hflip"}
# The references' interpreters: the current PyTorch from PyPI, which
# tools/install-deps --bench installs, and Debian's python3-torch.
BENCH_VENV = os.environ.get("SCORCH_BENCH_VENV", "/opt/scorch-bench-venv")
CURRENT_TORCH_PYTHON = os.path.join(BENCH_VENV, "bin", "python3")
DEBIAN_TORCH_PYTHON = "/usr/bin/python3"
# --under-load's competing process: one CPU-bound loop.
BUSY_LOOP = [sys.executable, "-c", "while True: pass"]


# ---- the PyTorch twins ----

def mlp_twin(nn):
    """mlp hidden=256:128: linear-relu, linear-relu, linear."""
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                         nn.ReLU(), nn.Linear(128, 10))


def cnn_twin(nn):
    """cnn's defaults: conv3x3 (no bias) - batch norm - relu - max pool 2, twice;
    linear 3136->128, relu; linear 128->10. PyTorch's default init, as scorch's."""
    def stage(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(*stage(1, 32), *stage(32, 64), nn.Flatten(), nn.Linear(3136, 128),
                         nn.ReLU(), nn.Linear(128, 10))


def conv_bn(nn, cin, cout, kernel, stride=1, relu=True):
    """sc_nn_conv_bn: conv kxk (padding k / 2, no bias) - batch norm (- relu)."""
    layers = [nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, bias=False),
              nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, *([nn.ReLU()] if relu else []))


def squeeze_excitation(nn, channels, reduction):
    """sc_nn_se: global average pool, linear C -> max(C / r, 1), relu, linear
    back to C, sigmoid; the input scaled channel by channel."""
    class SqueezeExcitation(nn.Module):
        def __init__(self):
            super().__init__()
            hidden = max(channels // reduction, 1)
            self.reduce, self.expand = nn.Linear(channels, hidden), nn.Linear(hidden, channels)

        def forward(self, x):
            s = self.expand(self.reduce(x.mean((2, 3))).relu()).sigmoid()  # [N, C]
            return x * s[:, :, None, None]
    return SqueezeExcitation()


def residual(nn, cin, cout, stride, se_reduction):
    """sc_nn_residual: relu(F(x) + S(x)) with F = conv3x3-bn-relu (stride),
    conv3x3-bn, SE when se_reduction > 0; S = a 1x1 conv-bn projection where
    the stride or the width changes, else the identity."""
    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = conv_bn(nn, cin, cout, 3, stride)
            self.conv2 = conv_bn(nn, cout, cout, 3, relu=False)
            self.se = squeeze_excitation(nn, cout, se_reduction) if se_reduction else nn.Identity()
            self.shortcut = (conv_bn(nn, cin, cout, 1, stride, relu=False)
                             if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x):
            return (self.se(self.conv2(self.conv1(x))) + self.shortcut(x)).relu()
    return Residual()


def resnet_twin(nn, stem=32, channels=(32, 64, 128), blocks=2, se_reduction=0):
    """resnet's defaults: stem conv3x3-bn-relu 1->32 at 28x28; stages of 32,
    64 and 128 channels with 2 residual blocks each, the first block of every
    stage after the first striding 2 (28 -> 14 -> 7) with a projection
    shortcut; global average pool; linear 128->10. se_reduction=r is the
    plugin's se=true,reduction=r."""
    layers, width = [conv_bn(nn, 1, stem, 3)], stem
    for s, out in enumerate(channels):
        for b in range(blocks):
            layers.append(residual(nn, width, out, 2 if s > 0 and b == 0 else 1, se_reduction))
            width = out
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 10))


# name -> scorch model plugin and args, the PyTorch twin with the same
# layers, and the samples a CPU run times (a few seconds of scorch on 2 cores).
MODELS = {
    "mlp": {"plugin": "mlp.so", "args": "hidden=256:128", "twin": mlp_twin,
            "timed_samples": 38400},
    "cnn": {"plugin": "cnn.so", "args": "channels=32:64,hidden=128", "twin": cnn_twin,
            "timed_samples": 19200},
    "resnet": {"plugin": "resnet.so", "args": "stem=32,channels=32:64:128,blocks=2",
               "twin": resnet_twin, "timed_samples": 3840},
}


def train_flops_per_sample(torch, net):
    """3 x the forward multiply-adds of every conv and linear layer of a fresh
    `net`, less the first layer's input gradient, x 2 FLOPs (module docstring)."""
    macs = []

    def count(module, inputs, output):
        # one weight row (in / groups x kernel) per output element of the sample
        macs.append(output[0].numel() * module.weight[0].numel())

    for m in net.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            m.register_forward_hook(count)
    with torch.no_grad():
        net.eval()(torch.zeros(1, 1, 28, 28))
    return 2 * (3 * sum(macs) - macs[0])


# ---- parameter counts ----

def scorch_param_counts(build, spec):
    """(trainable parameters, buffers) from scorch-train --summary's total line."""
    cmd = [f"{build}/host/scorch-train", "--model", f"{build}/plugins/{spec['plugin']}",
           "--model-args", spec["args"], "--dataset", f"{build}/plugins/fashion_mnist.so",
           "--dataset-path", DATA, "--summary"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"total: ([\d,]+) parameters and buffers, ([\d,]+) trainable", out)
    if not m:
        raise RuntimeError(f"no total line in scorch-train --summary:\n{out}")
    total, trainable = (int(g.replace(",", "")) for g in m.groups())
    return trainable, total - trainable


def twin_param_counts(torch, spec):
    """(trainable parameters, running statistics) of the twin; PyTorch's
    num_batches_tracked counters have no scorch counterpart."""
    net = spec["twin"](torch.nn)
    stats = sum(b.numel() for name, b in net.named_buffers()
                if not name.endswith("num_batches_tracked"))
    return sum(p.numel() for p in net.parameters()), stats


def check_param_counts(build, names, references):
    """Prints scorch's counts and each reference twin's per model; exits 1 on
    a mismatch."""
    ok = True
    for name in names:
        ours = scorch_param_counts(build, MODELS[name])
        twins = [(ref.label, tuple(ref.counts[name][:2])) for ref in references]
        print(f"{name}: parameters + running statistics: scorch {ours[0]:,} + {ours[1]:,}, "
              + ", ".join(f"PyTorch {label} twin {twin[0]:,} + {twin[1]:,}"
                          for label, twin in twins)
              + (": equal" if all(twin == ours for _, twin in twins) else ": DIFFERENT"))
        ok = ok and all(twin == ours for _, twin in twins)
    if not ok:
        sys.exit("bench_train: a PyTorch twin does not match its scorch model")


# ---- scorch ----

def device_options(args, train=True):
    """scorch-train's (train) or scorch-test's device options."""
    if args.device == "cpu":
        return []
    opts = ["--device", "cuda", "--precision", args.precision]
    return opts + ["--cuda-graphs", args.cuda_graphs] if train else opts


def scorch_train_command(args, spec, batch, run_dir, *extra):
    """A quiet scorch-train of `spec` with Adam, lr 1e-3, on args.device."""
    b = args.build
    return [f"{b}/host/scorch-train", "--model", f"{b}/plugins/{spec['plugin']}",
            "--model-args", spec["args"], "--dataset", f"{b}/plugins/fashion_mnist.so",
            "--dataset-path", DATA, "--batch-size", str(batch), "--optimizer", "adam",
            "--lr", "1e-3", "--threads", str(args.threads), "--workers", str(args.workers),
            "--run-dir", run_dir, "--quiet", "--no-tensorboard", *device_options(args), *extra]


def read_records(run_dir):
    """metrics.jsonl's phase records."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if "phase" in r]


def scorch_rate(args, spec, batch, steps):
    """(samples/s, data-wait share, peak RSS MB) of `steps` training steps after
    the warm-up epochs; every epoch stops at `steps` batches or the split's end."""
    per_epoch = min(steps, TRAIN_SAMPLES // batch)
    warmup = SCORCH_WARMUP_EPOCHS[args.device]
    epochs = warmup + math.ceil(steps / per_epoch)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        subprocess.run(scorch_train_command(args, spec, batch, run_dir, "--epochs", str(epochs),
                                            "--max-train-iterations", str(per_epoch),
                                            "--max-valid-iterations", "1",
                                            "--max-test-iterations", "1"),
                       check=True, stdout=subprocess.DEVNULL)
        records = read_records(run_dir)
    timed = [r for r in records if r["phase"] == "train" and r["epoch"] > warmup]
    if not timed:
        raise RuntimeError("scorch-train wrote no train record")
    seconds = sum(r["time_s"] for r in timed)
    samples, wait = (sum(r[key] for r in timed) for key in ("samples", "data_wait_s"))
    return samples / seconds, wait / seconds, max(r["max_rss_mb"] for r in records)


def scorch_test_accuracy(args, checkpoint):
    """Test-split accuracy of a checkpoint, from scorch-test's result line."""
    out = subprocess.run([f"{args.build}/host/scorch-test", "--checkpoint", checkpoint,
                          "--split", "test", "--batch-size", str(args.batch), "--threads",
                          str(args.threads), "--workers", str(args.workers), "--quiet",
                          *device_options(args, train=False)],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"\baccuracy ([0-9.]+)", out)
    if not m:
        raise RuntimeError(f"no accuracy in scorch-test's output:\n{out}")
    return float(m.group(1))


def epoch_checkpoints(run_dir):
    """The per-epoch checkpoints in step order, that is epoch 1, 2, ..."""
    folder = os.path.join(run_dir, "checkpoints")
    found = [(int(m.group(1)), name) for name in os.listdir(folder)
             if (m := re.fullmatch(r"epoch-\d+-step-(\d+)\.ckpt", name))]
    return [os.path.join(folder, name) for _, name in sorted(found)]


def scorch_time_to_acc(args):
    """One scorch-train of the cnn for --max-epochs: (test accuracy per epoch,
    train + valid seconds per epoch, process wall seconds)."""
    extra = ["--epochs", str(args.max_epochs), "--lr-schedule", "cosine",
             "--keep-last", str(args.max_epochs)]
    if args.tta_dataset_args:
        extra += ["--dataset-args", args.tta_dataset_args]
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        start = time.perf_counter()
        subprocess.run(scorch_train_command(args, MODELS["cnn"], args.batch, run_dir, *extra),
                       check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        seconds = [0.0] * args.max_epochs
        for r in read_records(run_dir):
            if r["phase"] in ("train", "valid"):
                seconds[r["epoch"] - 1] += r["time_s"]
        accuracy = [scorch_test_accuracy(args, c) for c in epoch_checkpoints(run_dir)]
    return accuracy, seconds, wall


# ---- PyTorch, in the child processes ----

def load_idx(torch, name, offset):
    with gzip.open(os.path.join(DATA, name)) as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8, offset=offset)


def fashion_mnist(torch, split, device):
    """(normalised images [N, 1, 28, 28], labels [N]) on `device`: the plugin's
    train split (the first 50,000 training images) or its test split. In
    place, so that the peak memory holds one float copy of the images."""
    prefix = "train" if split == "train" else "t10k"
    images = load_idx(torch, f"{prefix}-images-idx3-ubyte.gz", 16).view(-1, 1, 28, 28)
    labels = load_idx(torch, f"{prefix}-labels-idx1-ubyte.gz", 8).long()
    if split == "train":
        images, labels = images[:TRAIN_SAMPLES], labels[:TRAIN_SAMPLES]
    return images.float().div_(255).sub_(MEAN).div_(STD).to(device), labels.to(device)


def configure_torch(torch, args):
    """Threads, and on a GPU the fast user's settings: TF32 as --precision
    asks, cudnn.benchmark on."""
    torch.set_num_threads(args.threads)
    if args.device == "cuda":
        tf32 = args.precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = True


def synchronize(torch, args):
    """Waits for the GPU's queued work, so that a clock reading covers it."""
    if args.device == "cuda":
        torch.cuda.synchronize()


def autocast(torch, args):
    """bf16: forward and loss under autocast; otherwise a no-op context."""
    return torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.precision == "bf16")


def train_step(torch, net, opt, x, y, args):
    """Forward, cross-entropy, backward, Adam step; returns the logits."""
    opt.zero_grad(set_to_none=True)
    with autocast(torch, args):
        out = net(x)
        loss = torch.nn.functional.cross_entropy(out, y)
    loss.backward()
    opt.step()
    return out


def new_twin(torch, spec, args):
    """A fresh twin on args.device (seed 0) and its Adam, lr 1e-3."""
    torch.manual_seed(0)
    net = spec["twin"](torch.nn).to(args.device)
    return net, torch.optim.Adam(net.parameters(), lr=1e-3)


def torch_rate(torch, spec, args, batch, steps):
    """The loop a PyTorch user writes: index a shuffled batch of the data held
    on the device, train_step, batch accuracy summed on the device and read
    once at the end. Samples/s of `steps` steps after the warm-up ones."""
    x_all, labels = fashion_mnist(torch, "train", args.device)
    net, opt = new_twin(torch, spec, args)
    perm = torch.randperm(len(x_all), device=args.device)
    correct = torch.zeros((), dtype=torch.long, device=args.device)
    warmup = TORCH_WARMUP_STEPS[args.device]
    for step in range(warmup + steps):
        if step == warmup:
            synchronize(torch, args)
            start = time.perf_counter()
        idx = perm[(step * batch) % (len(perm) - batch):][:batch]
        x, y = x_all[idx], labels[idx]
        correct += (train_step(torch, net, opt, x, y, args).argmax(1) == y).sum()
    correct.item()
    synchronize(torch, args)
    return steps * batch / (time.perf_counter() - start)


def parse_plugin_args(text):
    """"k=v,k=v" -> {k: v}."""
    return dict(item.split("=", 1) for item in text.split(",") if item)


def augmenter(torch, dataset_args):
    """The fashion_mnist plugin's train augmentation (AUGMENTATION_ARGS) as a
    function of a normalised batch, done on its device: a 28x28 window of the
    image padded with black by p pixels, then a mirror with probability 1/2."""
    opts = parse_plugin_args(dataset_args)
    pad = int(opts.get("crop_padding", "0"))
    flip = opts.get("hflip", "false").lower() in ("true", "1", "yes", "on")

    def augment(x):  # [N, 1, S, S]
        n, side = len(x), x.shape[-1]
        ar = torch.arange(side, device=x.device)
        padded = torch.nn.functional.pad(x, (pad,) * 4, value=-MEAN / STD)  # pixel 0
        rows = torch.randint(0, 2 * pad + 1, (n, 1), device=x.device) + ar  # [N, S]
        cols = ar.expand(n, side)
        if flip:
            cols = torch.where(torch.rand(n, 1, device=x.device) < 0.5, side - 1 - ar, ar)
        cols = torch.randint(0, 2 * pad + 1, (n, 1), device=x.device) + cols  # [N, S]
        batch = torch.arange(n, device=x.device)[:, None, None]
        return padded[batch, 0, rows[:, :, None], cols[:, None, :]].unsqueeze(1)

    return augment if pad or flip else (lambda x: x)


def torch_accuracy(torch, net, x_all, labels, args):
    """Accuracy of `net` in eval mode over the whole split, --batch at a time."""
    net.eval()
    correct = torch.zeros((), dtype=torch.long, device=args.device)
    with torch.no_grad(), autocast(torch, args):
        for i in range(0, len(x_all), args.batch):
            correct += (net(x_all[i:i + args.batch]).argmax(1) == labels[i:i + args.batch]).sum()
    net.train()
    return correct.item() / len(x_all)


def torch_time_to_acc(torch, args):
    """scorch_time_to_acc's run with the cnn twin: shuffled batches without the
    partial last one, the cosine schedule per step as scorch's, the test split
    evaluated after every epoch. The wall time covers loading the data."""
    start = time.perf_counter()
    x_train, y_train = fashion_mnist(torch, "train", args.device)
    x_test, y_test = fashion_mnist(torch, "test", args.device)
    net, opt = new_twin(torch, MODELS["cnn"], args)
    steps = len(x_train) // args.batch
    total = steps * args.max_epochs
    schedule = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: 0.5 * (1 + math.cos(math.pi * min(step, total) / total)))
    augment = augmenter(torch, args.tta_dataset_args)
    accuracy, seconds = [], []
    for _ in range(args.max_epochs):
        synchronize(torch, args)
        epoch_start = time.perf_counter()
        perm = torch.randperm(len(x_train), device=args.device)
        for i in range(steps):
            idx = perm[i * args.batch:(i + 1) * args.batch]
            train_step(torch, net, opt, augment(x_train[idx]), y_train[idx], args)
            schedule.step()
        accuracy.append(torch_accuracy(torch, net, x_test, y_test, args))
        seconds.append(time.perf_counter() - epoch_start)
    return accuracy, seconds, time.perf_counter() - start


def peak_rss_mb():
    """This process's peak resident memory, as scorch's max_rss_mb."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB


def setup_line(torch, args):
    """The device part of the header lines."""
    if args.device == "cpu":
        return f"cpu, {args.threads} threads"
    return (f"cuda ({torch.cuda.get_device_name()}), precision {args.precision}, "
            f"--cuda-graphs {args.cuda_graphs}, PyTorch eager with "
            f"cudnn.benchmark={torch.backends.cudnn.benchmark}, "
            f"allow_tf32={torch.backends.cuda.matmul.allow_tf32}, {args.threads} threads")


def probe_job(torch, args, job):
    """The version, whether a GPU is seen, the setup line, and per model of
    job["models"] the twin's (parameters, running statistics, training FLOPs
    per sample)."""
    gpu = torch.cuda.is_available()
    models = {name: [*twin_param_counts(torch, MODELS[name]),
                     train_flops_per_sample(torch, MODELS[name]["twin"](torch.nn))]
              for name in job["models"]}
    return {"version": torch.__version__, "gpu": gpu, "models": models,
            "setup": setup_line(torch, args) if gpu or args.device == "cpu" else None}


def rate_job(torch, args, job):
    """torch_rate of job's model, batch and steps, and the process's peak RSS."""
    rate = torch_rate(torch, MODELS[job["model"]], args, job["batch"], job["steps"])
    return {"rate": rate, "rss_mb": peak_rss_mb()}


TORCH_JOBS = {"probe": probe_job, "rate": rate_job,
              "time_to_acc": lambda torch, args, job: torch_time_to_acc(torch, args)}


def torch_job(job):
    """The child's side of run_torch_job: runs `job` (its "kind", the parent's
    options as "args") and prints its result as JSON; 77 without PyTorch."""
    try:
        import torch
    except ImportError as e:
        print(f"bench_train: {sys.executable} has no PyTorch ({e})", file=sys.stderr)
        return 77
    args = argparse.Namespace(**job["args"])
    configure_torch(torch, args)
    print(json.dumps(TORCH_JOBS[job["kind"]](torch, args, job)))
    return 0


# ---- the PyTorch processes, from the parent ----

class Skipped(Exception):
    """A reference PyTorch, or the GPU it should see, is missing."""


# A reference PyTorch: its interpreter, version (label: without the local
# "+cu132" part), the setup line, and per model the twin's [parameters,
# running statistics, training FLOPs per sample].
Reference = namedtuple("Reference", "python version label setup counts")


def run_torch_job(python, job):
    """Runs `job` in a child process of `python` (torch_job); its result."""
    try:
        child = subprocess.run([python, os.path.abspath(__file__), "--torch-job"],
                               input=json.dumps(job), stdout=subprocess.PIPE, text=True)
    except FileNotFoundError:
        raise Skipped(f"no {python}: tools/install-deps --bench installs the current PyTorch "
                      "there (SCORCH_BENCH_VENV chooses the folder)") from None
    if child.returncode == 77:
        raise Skipped(f"the PyTorch of {python} does not import (tools/install-deps --bench)")
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode,
                                            f"{python} --torch-job ({job['kind']})")
    return json.loads(child.stdout.splitlines()[-1])


def probe(args, python, names):
    """The Reference of the PyTorch in `python`, with `names`' twins."""
    found = run_torch_job(python, {"kind": "probe", "args": vars(args), "models": names})
    if args.device == "cuda" and not found["gpu"]:
        raise Skipped(f"--device cuda: PyTorch {found['version']} ({python}) sees no CUDA GPU "
                      "(torch.cuda.is_available() is False)")
    return Reference(python, found["version"], found["version"].split("+")[0], found["setup"],
                     found["models"])


def torch_rate_of(ref, args, name, batch, steps):
    """(samples/s, peak RSS MB) of one torch_rate run in a child of `ref`."""
    found = run_torch_job(ref.python, {"kind": "rate", "args": vars(args), "model": name,
                                       "batch": batch, "steps": steps})
    return found["rate"], found["rss_mb"]


# ---- load ----

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent():
    """In a child before exec: SIGKILL it when its parent dies."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@contextlib.contextmanager
def competing_process():
    """BUSY_LOOP runs while the block does; killed on every way out of it."""
    busy = subprocess.Popen(BUSY_LOOP, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
    try:
        yield
    finally:
        busy.kill()
        busy.wait()


# ---- reports ----

def sgemm_peak(build, threads):
    out = subprocess.run([f"{build}/tests/bench/bench_sgemm", "1024", str(threads)],
                         check=True, capture_output=True, text=True).stdout
    return float(out)


def last_column(args):
    """(title, formatter of a row's data-wait share): the sgemm peak on the
    CPU, scorch's data-wait share on a GPU. The peak is measured again as
    each row is printed (the best of three) and the best so far is shown:
    other processes only ever lower it, and one measured on a busy minute
    at the start had stood for the whole table (109 GFLOP/s, under the
    rows' own 103)."""
    if args.device == "cpu":
        best = 0.0

        def peak(_wait):
            nonlocal best
            best = max([best] + [sgemm_peak(args.build, args.threads) for _ in range(3)])
            return f"{best:20.1f}"
        return f"{'sgemm peak GFLOP/s':>20}", peak
    return f"{'scorch data wait':>18}", lambda wait: f"{wait:18.1%}"


# One table row's figures, per framework (scorch, then each reference): the
# medians of samples/s and of peak RSS MB; and scorch's data-wait share.
Measured = namedtuple("Measured", "rates rss wait")


def measure(args, references, name, batch, steps):
    """The Measured of --runs alternating runs of scorch and each reference."""
    runs, waits = [], []
    for _ in range(args.runs):
        rate, wait, rss = scorch_rate(args, MODELS[name], batch, steps)
        waits.append(wait)
        runs.append([(rate, rss)] + [torch_rate_of(ref, args, name, batch, steps)
                                     for ref in references])
    per_framework = list(zip(*runs))
    return Measured([statistics.median(rate for rate, _ in f) for f in per_framework],
                    [statistics.median(rss for _, rss in f) for f in per_framework],
                    statistics.median(waits))


def print_header(args, references, last_title):
    """The lines above the table: what runs, what the columns mean."""
    warmup = SCORCH_WARMUP_EPOCHS[args.device]
    print("scorch vs " + " and ".join(f"PyTorch {r.version} ({r.python})" for r in references)
          + f": training on Fashion-MNIST, {references[0].setup}, Adam, "
          + (f"{args.steps} steps" if args.steps else "the steps column's steps")
          + f" after {TORCH_WARMUP_STEPS[args.device]} warm-up steps (PyTorch)"
          + (f" and {warmup} warm-up epoch (scorch)" if warmup else "")
          + f", median of {args.runs} alternating runs; load average {os.getloadavg()[0]:.2f}")
    print(f"samples/s; ratio: scorch / PyTorch {references[0].label}; GFLOP/s: scorch's; "
          "MB: each process's peak resident memory"
          + (f"; loaded: with one competing process ({' '.join(BUSY_LOOP)!r}), "
             "of idle: loaded / idle samples/s" if args.under_load else ""))
    frameworks = ["scorch"] + [f"pt {r.label}" for r in references]
    print(f"{'model':8}{'batch':>6}{'steps':>6}" + (f"{'load':>8}" if args.under_load else "")
          + "".join(f"{f:>13}" for f in frameworks) + f"{'ratio':>8}{'GFLOP/s':>9}{last_title}"
          + "".join(f"{'MB ' + f:>15}" for f in frameworks))


def throughput_rows(args, references, name, batch, last):
    """The row of `name` at `batch`; under load, the loaded and "of idle" rows too."""
    steps = args.steps or math.ceil(MODELS[name]["timed_samples"] / batch)
    flops = references[0].counts[name][2]

    def row(load, m):
        return (f"{name:8}{batch:6}{steps:6}" + (f"{load:>8}" if args.under_load else "")
                + "".join(f"{rate:13.0f}" for rate in m.rates)
                + f"{m.rates[0] / m.rates[1]:7.2f}x{m.rates[0] * flops / 1e9:9.1f}{last(m.wait)}"
                + "".join(f"{rss:15.0f}" for rss in m.rss))

    idle = measure(args, references, name, batch, steps)
    print(row("idle", idle), flush=True)
    if args.under_load:
        with competing_process():
            loaded = measure(args, references, name, batch, steps)
        print(row("loaded", loaded))
        print(f"{name:8}{batch:6}{steps:6}{'of idle':>8}"
              + "".join(f"{b / a:12.2f}x" for a, b in zip(idle.rates, loaded.rates)), flush=True)


def throughput(args, references):
    """The samples/s table: rows per model and batch size (module docstring)."""
    names = args.models.split(",")
    check_param_counts(args.build, names, references)
    title, last = last_column(args)
    print_header(args, references, title)
    for name in names:
        for batch in args.batches:
            throughput_rows(args, references, name, batch, last)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


# One time-to-accuracy run: the first epoch at the target (None: never) and
# the seconds to its end, the best accuracy and its epoch, the wall time.
Outcome = namedtuple("Outcome", "epoch seconds best best_epoch wall")


def outcome(run, target):
    """The Outcome of one run's (accuracy per epoch, seconds per epoch, wall)."""
    accuracy, seconds, wall = run
    best = max(range(len(accuracy)), key=accuracy.__getitem__)
    hit = next((e for e, a in enumerate(accuracy) if a >= target), None)
    if hit is None:
        return Outcome(None, None, accuracy[best], best + 1, wall)
    return Outcome(hit + 1, sum(seconds[:hit + 1]), accuracy[best], best + 1, wall)


def tta_row(name, runs, target):
    """A framework's row: medians over the runs that reached the target (and
    how many did, when not all), the median wall time, the best accuracy of
    all runs. Returns the row and the median time to target (None: never
    reached)."""
    outcomes = [outcome(r, target) for r in runs]
    reached = [o for o in outcomes if o.epoch is not None]
    best = max(outcomes, key=lambda o: o.best)
    wall = f"{statistics.median(o.wall for o in outcomes):16.1f} s"
    best_text = f"{best.best:.4f} (epoch {best.best_epoch})"
    if not reached:
        return f"{name:9}{'-':>14}{'not reached':>16}{wall}{best_text:>22}", None
    epoch = f"{statistics.median(o.epoch for o in reached):g}"
    if len(reached) < len(runs):
        epoch += f" ({len(reached)}/{len(runs)} runs)"
    seconds = statistics.median(o.seconds for o in reached)
    return f"{name:9}{epoch:>14}{seconds:14.1f} s{wall}{best_text:>22}", seconds


def time_to_accuracy(args, reference):
    """The time-to-accuracy report of the cnn plugin (module docstring)."""
    check_param_counts(args.build, ["cnn"], [reference])
    augmentation = args.tta_dataset_args or "none"
    print(f"scorch vs PyTorch {reference.version} ({reference.python}): time to "
          f"{args.time_to_acc} test accuracy, "
          f"cnn ({MODELS['cnn']['args']}) on Fashion-MNIST, {reference.setup}, "
          f"batch {args.batch}, Adam lr 1e-3, cosine schedule over {args.max_epochs} epochs, "
          f"augmentation {augmentation}, median of {args.runs} alternating runs")
    print(f"{'':9}{'epoch':>14}{'time to target':>16}{f'wall, {args.max_epochs} epochs':>18}"
          f"{'best test accuracy':>22}")
    ours, theirs = [], []
    for _ in range(args.runs):
        ours.append(scorch_time_to_acc(args))
        theirs.append(run_torch_job(reference.python, {"kind": "time_to_acc", "args": vars(args)}))
    row, s = tta_row("scorch", ours, args.time_to_acc)
    print(row)
    row, t = tta_row("pytorch", theirs, args.time_to_acc)
    print(row)
    if s is None or t is None:
        missed = " and ".join(n for n, v in (("scorch", s), ("pytorch", t)) if v is None)
        print(f"no speed-up: {missed} did not reach {args.time_to_acc} in "
              f"{args.max_epochs} epochs")
    else:
        print(f"scorch speed-up to {args.time_to_acc} (pytorch time / scorch time): {t / s:.2f}x")


# ---- command line ----

def parse_args():
    """The options; the defaults that depend on --device filled in."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32",
                        help="GPU arithmetic of both frameworks (cuda only)")
    parser.add_argument("--cuda-graphs", choices=("auto", "on", "off"), default="auto",
                        help="scorch-train --cuda-graphs (cuda only)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, help="timed steps (default: cpu about the same "
                        "samples at every batch size, the model's timed_samples / batch; "
                        "cuda 2000)")
    parser.add_argument("--batch", type=int, default=128, help="the batch size of --time-to-acc")
    parser.add_argument("--batches", help="comma-separated batch sizes (default: cpu "
                        "32,128,512, cuda 128,512)")
    parser.add_argument("--torch-python", action="append", metavar="PYTHON",
                        help="an interpreter whose PyTorch is a reference, once or more; the "
                        f"first is the ratio's (default: cpu {CURRENT_TORCH_PYTHON} and "
                        f"{DEBIAN_TORCH_PYTHON}, cuda the first)")
    parser.add_argument("--under-load", action="store_true",
                        help="every row also with one competing CPU-bound process")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workers", type=int, help="scorch's data-loader threads "
                        "(default: cpu 1, cuda 4)")
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated subset of " + ", ".join(MODELS))
    parser.add_argument("--time-to-acc", type=float, metavar="ACCURACY",
                        help="instead of throughput: time for the cnn to reach this test accuracy")
    parser.add_argument("--max-epochs", type=int, default=15,
                        help="epochs of --time-to-acc (default: 15)")
    parser.add_argument("--tta-dataset-args", default="",
                        help="fashion_mnist augmentation of --time-to-acc, done by both "
                        "frameworks, such as crop_padding=2,hflip=true (default: none)")
    args = parser.parse_args()
    gpu = args.device == "cuda"
    if not gpu and args.precision != "fp32":
        parser.error(f"--precision {args.precision} needs --device cuda")
    unknown = set(args.models.split(",")) - set(MODELS)
    if unknown:
        parser.error(f"--models: unknown {', '.join(sorted(unknown))} "
                     f"(known: {', '.join(MODELS)})")
    unknown = set(parse_plugin_args(args.tta_dataset_args)) - AUGMENTATION_ARGS
    if unknown:
        parser.error(f"--tta-dataset-args: the PyTorch side does not do "
                     f"{', '.join(sorted(unknown))} (only {', '.join(sorted(AUGMENTATION_ARGS))})")
    if args.under_load and args.time_to_acc is not None:
        parser.error("--under-load applies to the throughput table, not --time-to-acc")
    args.steps = args.steps or (2000 if gpu else None)
    args.workers = args.workers if args.workers is not None else (4 if gpu else 1)
    args.torch_python = args.torch_python or (
        [CURRENT_TORCH_PYTHON] if gpu else [CURRENT_TORCH_PYTHON, DEBIAN_TORCH_PYTHON])
    batches = args.batches or ("128,512" if gpu else "32,128,512")
    args.batches = [int(b) for b in batches.split(",")]
    return args


def main():
    if sys.argv[1:] == ["--torch-job"]:
        return torch_job(json.load(sys.stdin))
    args = parse_args()
    # SIGTERM (meson's timeout) unwinds like Ctrl-C: the competing process
    # and the temporary run folders go too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    tta = args.time_to_acc is not None
    try:
        references = [probe(args, python, ["cnn"] if tta else args.models.split(","))
                      for python in args.torch_python[:1 if tta else None]]
    except Skipped as e:
        print(f"bench_train: {e}; skipped", file=sys.stderr)
        return 77  # meson's "skipped"
    if tta:
        time_to_accuracy(args, references[0])
    else:
        throughput(args, references)
    return 0


if __name__ == "__main__":
    sys.exit(main())
