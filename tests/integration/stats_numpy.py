#!/usr/bin/env python3
"""dataset_stats (plugins/dataset_stats) against numpy: the per-channel
mean, population std, minimum and maximum and the label histogram that
scorch-run writes for Fashion-MNIST equal numpy's over the same pixels,
read from the dataset's own files: the test split as x / 255, and the train
split (the first 50,000 images) normalised as the fashion_mnist plugin does
it, in float32, ((x / 255) - 0.2860) / 0.3530. Relative tolerance 1e-10
(both sum in double, in other orders; the JSON holds 17 digits). Runs
under Debian's python3 when the one on PATH lacks numpy; exits 77
(skipped) without numpy or the dataset.
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, with python3-numpy (python3-torch needs it)

try:
    import numpy as np
except ImportError:
    if os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON):
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv)  # a python3 of its own on PATH
    print("stats_numpy: SKIPPED: numpy is not installed (python3-numpy)")
    sys.exit(77)

DATA = "/usr/share/datasets/fashion-mnist"
BUILD = os.environ["SCORCH_BUILD_ROOT"]
TOLERANCE = 1e-10


def idx(name, offset):
    with gzip.open(os.path.join(DATA, name)) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def scorch_stats(split, dataset_args, out):
    cmd = [os.path.join(BUILD, "host/scorch-run"), "--job",
           os.path.join(BUILD, "plugins/dataset_stats.so"), "--dataset",
           os.path.join(BUILD, "plugins/fashion_mnist.so"), "--dataset-path", DATA,
           "--dataset-args", dataset_args, "--job-args", f"split={split},out={out}",
           "--threads", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"stats_numpy: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
    with open(out) as f:
        return json.load(f)


def expect_close(what, ours, theirs):
    if abs(ours - theirs) > TOLERANCE * max(abs(theirs), 1e-12):
        sys.exit(f"stats_numpy: {what}: scorch {ours!r}, numpy {theirs!r}")


def compare(split, dataset_args, pixels, labels, tmp):
    stats = scorch_stats(split, dataset_args, os.path.join(tmp, f"{split}.json"))
    x = pixels.astype(np.float64)
    figures = {"mean": x.mean(), "std": x.std(), "min": x.min(), "max": x.max()}
    for name, theirs in figures.items():
        expect_close(f"{split} {name}", stats["inputs"][0][name][0], float(theirs))
    counts = np.bincount(labels, minlength=10).tolist()
    if stats["samples"] != len(labels) or stats["labels"]["counts"] != counts:
        sys.exit(f"stats_numpy: {split}: scorch counts {stats['labels']['counts']} of "
                 f"{stats['samples']}, numpy {counts} of {len(labels)}")
    print(f"stats_numpy: {split}: mean {figures['mean']:.6f} std {figures['std']:.6f}, "
          f"{len(labels)} labels: equal")


def main():
    if not os.path.isdir(DATA):
        print(f"stats_numpy: SKIPPED: {DATA} is missing (dataset-fashion-mnist)")
        sys.exit(77)
    test = idx("t10k-images-idx3-ubyte.gz", 16).astype(np.float32) / np.float32(255)
    train = idx("train-images-idx3-ubyte.gz", 16).reshape(60000, -1)[:50000]
    train = ((train.astype(np.float32) / np.float32(255)) - np.float32(0.2860)) / np.float32(0.3530)
    with tempfile.TemporaryDirectory() as tmp:
        compare("test", "normalize=false", test, idx("t10k-labels-idx1-ubyte.gz", 8), tmp)
        compare("train", "normalize=true", train, idx("train-labels-idx1-ubyte.gz", 8)[:50000],
                tmp)


if __name__ == "__main__":
    main()
