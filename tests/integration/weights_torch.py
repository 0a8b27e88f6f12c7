#!/usr/bin/env python3
"""Weights between scorch and PyTorch through the real safetensors package
(docs/weights.md), with the PyTorch twins of the mlp and cnn plugins that
tests/bench/bench_train.py defines:

  1. scorch-train trains each model a few steps on Fashion-MNIST and
     scorch-export writes its checkpoint; safetensors.torch.load_file reads
     the file and the twin loads it (PyTorch's names mapped back). On the
     test split the twin's accuracy equals scorch-test's to 4 decimals, and
     its softmax probabilities equal those of scorch-test --predictions
     (printed to 6 decimals) within 1e-5, for every image and class.
  2. The reverse: the twin trains a few Adam steps in PyTorch,
     safetensors.torch.save_file writes its state_dict, and scorch-train
     --init-from it (--init-map for PyTorch's names; --epochs 0 tests the
     starting weights) reports the test accuracy PyTorch computed, to 4
     decimals.

Runs under the virtual environment tools/install-deps makes
($SCORCH_TORCH_VENV, default /opt/scorch-torch-venv: Debian's python3-torch
through --system-site-packages, plus the safetensors package) and
re-executes itself there. Exits 77 (meson's "skipped") when that
environment, PyTorch, safetensors or the dataset is missing; any
disagreement is a failure.
"""
import os
import sys

VENV = os.environ.get("SCORCH_TORCH_VENV", "/opt/scorch-torch-venv")
EXIT_SKIP = 77


def skip(why):
    bar = "!" * 78
    print(f"{bar}\nSKIPPED: the safetensors tests with PyTorch: {why}\n{bar}", file=sys.stderr,
          flush=True)
    sys.exit(EXIT_SKIP)


def enter_venv():
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    python = os.path.join(VENV, "bin", "python3")
    if not os.access(python, os.X_OK):
        skip(f"they need the virtual environment {VENV}, which does not exist.\n"
             "Run tools/install-deps (as root or with sudo) to create it.")
    os.execv(python, [python] + sys.argv)


enter_venv()

import csv  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402

try:
    import torch  # noqa: E402
    from safetensors.torch import load_file, save_file  # noqa: E402
except ImportError as e:
    skip(f"{VENV} lacks a package ({e}); run tools/install-deps")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import bench_train  # noqa: E402  (the twins, the data and its normalisation)

BUILD = os.environ["SCORCH_BUILD_ROOT"]
THREADS = 2
TRAIN_STEPS = 30
BATCH = 64
PROBABILITY_TOLERANCE = 1e-5

# The twins' state_dict names as scorch's, in --init-map's syntax: PyTorch's
# nn.Sequential numbers its layers; batch norm's step counter has no twin.
TORCH_NAMES = {
    "mlp": "1.*=fc1.*,3.*=fc2.*,5.*=fc3.*",
    "cnn": "*.num_batches_tracked=,0.weight=conv1.conv.weight,1.*=conv1.bn.*,"
           "4.weight=conv2.conv.weight,5.*=conv2.bn.*,9.*=fc1.*,11.*=fc2.*",
}


def glob_regex(glob):
    return "^" + "(.*?)".join(re.escape(part) for part in glob.split("*")) + "$"


def to_torch_name(name, rules):
    """scorch's name of a tensor as the twin's: --init-map's rules backwards."""
    for rule in rules.split(","):
        frm, to = rule.split("=")
        if not to:
            continue
        m = re.match(glob_regex(to), name)
        if m:
            parts = frm.split("*")
            return parts[0] + "".join(g + p for g, p in zip(m.groups(), parts[1:]))
    return name


def program(name):
    return os.path.join(BUILD, "host", name)


def model_options(spec):
    return ["--model", os.path.join(BUILD, "plugins", spec["plugin"]), "--model-args",
            spec["args"], "--dataset", os.path.join(BUILD, "plugins", "fashion_mnist.so"),
            "--dataset-path", bench_train.DATA, "--threads", str(THREADS), "--workers", "1"]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"weights_torch: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def test_split():
    x, y = bench_train.fashion_mnist(torch, "test", "cpu")
    return x, y


def torch_eval(net, x):
    """Softmax probabilities of the twin in eval mode, [N, 10]."""
    net.eval()
    with torch.no_grad():
        return torch.cat([net(x[i:i + 1000]).softmax(1) for i in range(0, len(x), 1000)])


def scorch_predictions(checkpoint, tmp):
    """scorch-test's accuracy line and its probabilities [N, 10] (--topk 10)."""
    csv_path = os.path.join(tmp, "predictions.csv")
    out = run([program("scorch-test"), "--checkpoint", checkpoint, "--predictions", csv_path,
               "--topk", "10", "--batch-size", "500", "--threads", str(THREADS), "--quiet"])
    accuracy = re.search(r"\baccuracy ([0-9.]+)", out).group(1)
    rows = list(csv.DictReader(open(csv_path)))
    probs = torch.zeros(len(rows), 10, dtype=torch.float64)
    for row in rows:
        for k in range(1, 11):
            probs[int(row["sample"]), int(row[f"pred_{k}"])] = float(row[f"score_{k}"])
    return accuracy, probs


def train_and_export(name, spec, tmp):
    """scorch-train of the model TRAIN_STEPS steps, scorch-export of its
    checkpoint: (the checkpoint, the safetensors file)."""
    run_dir = os.path.join(tmp, f"{name}-run")
    run([program("scorch-train"), *model_options(spec), "--epochs", "1", "--batch-size",
         str(BATCH), "--max-train-iterations", str(TRAIN_STEPS), "--max-valid-iterations", "1",
         "--max-test-iterations", "1", "--run-dir", run_dir, "--quiet", "--no-tensorboard"])
    checkpoint = os.path.join(run_dir, "checkpoints", "last.ckpt")
    exported = os.path.join(tmp, f"{name}.safetensors")
    run([program("scorch-export"), "--checkpoint", checkpoint, "--out", exported])
    return checkpoint, exported


def twin_from(exported, name, spec):
    """The twin holding the weights of scorch-export's file (safetensors'
    own reader; PyTorch's names mapped back)."""
    weights = load_file(exported)
    net = spec["twin"](torch.nn)
    state = {to_torch_name(k, TORCH_NAMES[name]): v for k, v in weights.items()}
    missing, unexpected = net.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        sys.exit(f"weights_torch: {name}: the twin misses {missing}, does not have {unexpected}")
    return net


def scorch_to_torch(name, spec, tmp):
    """1: scorch trains, exports; the twin loads the export."""
    checkpoint, exported = train_and_export(name, spec, tmp)
    net = twin_from(exported, name, spec)
    x, labels = test_split()
    probs = torch_eval(net, x)
    accuracy = f"{(probs.argmax(1) == labels).double().mean().item():.4f}"
    scorch_accuracy, scorch_probs = scorch_predictions(checkpoint, tmp)
    worst = (probs.double() - scorch_probs).abs().max().item()
    print(f"{name}: scorch -> PyTorch: test accuracy scorch-test {scorch_accuracy}, "
          f"twin {accuracy}; largest probability difference {worst:.2e} over {len(x)} images")
    ok = accuracy == scorch_accuracy and worst <= PROBABILITY_TOLERANCE
    return ok


def torch_to_scorch(name, spec, tmp):
    """2: the twin trains in PyTorch and saves; scorch starts from the file."""
    torch.manual_seed(0)
    net = spec["twin"](torch.nn)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x, labels = bench_train.fashion_mnist(torch, "train", "cpu")
    net.train()
    for step in range(TRAIN_STEPS):
        idx = torch.randint(0, len(x), (BATCH,))
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x[idx]), labels[idx]).backward()
        opt.step()
    x_test, y_test = test_split()
    accuracy = f"{(torch_eval(net, x_test).argmax(1) == y_test).double().mean().item():.4f}"
    saved = os.path.join(tmp, f"{name}-torch.safetensors")
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, saved)

    run_dir = os.path.join(tmp, f"{name}-init")
    run([program("scorch-train"), *model_options(spec), "--init-from", saved, "--init-map",
         TORCH_NAMES[name], "--epochs", "0", "--batch-size", "500", "--run-dir", run_dir,
         "--quiet", "--no-tensorboard"])
    records = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    test = [r for r in records if r.get("phase") == "test"]
    scorch_accuracy = f"{test[-1]['accuracy']:.4f}"
    print(f"{name}: PyTorch -> scorch: test accuracy PyTorch {accuracy}, scorch-train "
          f"--init-from --epochs 0 {scorch_accuracy}")
    return accuracy == scorch_accuracy


def main():
    if not os.path.isdir(bench_train.DATA):
        skip(f"the Fashion-MNIST data is not in {bench_train.DATA}")
    torch.set_num_threads(THREADS)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("mlp", "cnn"):
            spec = bench_train.MODELS[name]
            ok = scorch_to_torch(name, spec, tmp) and ok
            ok = torch_to_scorch(name, spec, tmp) and ok
    if not ok:
        sys.exit("weights_torch: scorch and PyTorch disagree (lines above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
