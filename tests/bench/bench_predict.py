#!/usr/bin/python3
"""scorch-predict against PyTorch eager inference: images per second and the
time per image of the same model on the same PNG files, at batch 1 and 64,
on the CPU, printed side by side (medians of several alternating runs).

    tests/bench/bench_predict.py --build build [--runs 5] [--images 1000]
        [--scorch-inputs 10000] [--models mlp,cnn] [--batches 1,64] [--threads 2]

Needs Debian's python3-torch (tools/install-deps) and the
dataset-fashion-mnist package; exits 77 (meson's "skipped") without PyTorch.

End to end, both sides do what a user's program does with N PNG files of
Fashion-MNIST test images (28x28, 8-bit grey): read each file, decode it,
scale it to (x / 255 - mean) / std, run the network on a batch, softmax,
pick the top 5 classes and write a CSV line per image.
  scorch: one scorch-predict process, --input-list naming the N files
    over and over, --scorch-inputs in all (a process's startup varies by
    more than N images take), --batch-size B, --threads T, --format csv
    into a file; its checkpoint is a scorch-train run of one step (the time
    does not depend on the weights). "startup" is the same process given
    one image: loading the plugins, the checkpoint and the dataset's index.
    img/s counts the inputs over the process's wall time less that
    startup: the rate of a long-running use; "whole" counts them over the
    whole wall time, startup in.
  PyTorch: the twin of the model from tests/bench/bench_train.py (the same
    layers), model.eval() under torch.inference_mode(),
    torch.set_num_threads(T); each PNG decoded with zlib and numpy (these
    files are one IDAT of filter-0 rows, so a decode needs no image library
    and does no more than inflate), a batch stacked into one tensor, softmax and
    topk(5), the lines formatted into memory. Python's start, the imports
    and building the model are not timed; the loop over the N files is,
    after one warm-up batch.
Forward only: the network alone on a batch already in memory, in
microseconds per image: scorch's sc_infer_run (tests/bench/bench_infer.c),
PyTorch's net(x). The ratios are PyTorch's time over scorch's.
"""
import argparse
import gzip
import io
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_train  # noqa: E402  (the twins, the data and its normalisation)

SIDE = 28
TOP = 5


# ---- PNG files ----

def png_bytes(pixels, width, height):
    """An 8-bit greyscale PNG of rows of `pixels` (bytes), each row filter 0."""
    rows = b"".join(b"\0" + pixels[r * width:(r + 1) * width] for r in range(height))

    def chunk(kind, data):
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


def test_images(n):
    """The first n test images of Fashion-MNIST, SIDE * SIDE bytes each."""
    with gzip.open(os.path.join(bench_train.DATA, "t10k-images-idx3-ubyte.gz")) as f:
        data = f.read()[16:]
    return [data[i * SIDE * SIDE:(i + 1) * SIDE * SIDE] for i in range(n)]


def write_test_pngs(folder, n):
    """PNGs of the first n test images, folder/img-I.png; their paths."""
    paths = []
    for i, pixels in enumerate(test_images(n)):
        path = os.path.join(folder, f"img-{i}.png")
        with open(path, "wb") as f:
            f.write(png_bytes(pixels, SIDE, SIDE))
        paths.append(path)
    return paths


# ---- scorch ----

def scorch_checkpoint(build, spec, folder, threads):
    """A checkpoint of `spec` after one training step."""
    run_dir = os.path.join(folder, spec["plugin"])
    subprocess.run([f"{build}/host/scorch-train", "--model", f"{build}/plugins/{spec['plugin']}",
                    "--model-args", spec["args"], "--dataset",
                    f"{build}/plugins/fashion_mnist.so", "--dataset-path", bench_train.DATA,
                    "--epochs", "1", "--max-train-iterations", "1", "--max-valid-iterations",
                    "1", "--max-test-iterations", "1", "--threads", str(threads), "--run-dir",
                    run_dir, "--quiet", "--no-tensorboard"],
                   check=True, stdout=subprocess.DEVNULL)
    return os.path.join(run_dir, "checkpoints", "last.ckpt")


def scorch_seconds(args, checkpoint, input_list, batch, folder):
    """Wall seconds of one scorch-predict over the files of input_list."""
    out = os.path.join(folder, "predictions.csv")
    cmd = [f"{args.build}/host/scorch-predict", "--checkpoint", checkpoint, "--input-list",
           input_list, "--batch-size", str(batch), "--threads", str(args.threads), "--topk",
           str(TOP), "--format", "csv"]
    with open(out, "w") as f:
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=f)
        seconds = time.perf_counter() - start
    with open(out) as f:
        rows = sum(1 for _ in f) - 1
    if rows != count_lines(input_list):
        raise RuntimeError(f"scorch-predict wrote {rows} rows for {count_lines(input_list)} "
                           "images")
    return seconds


def count_lines(path):
    with open(path) as f:
        return sum(1 for _ in f)


def write_list(folder, name, paths):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.writelines(p + "\n" for p in paths)
    return path


# ---- PyTorch ----

def decode_png(torch, np, data):
    """A [1, SIDE, SIDE] float tensor, scaled as the fashion_mnist plugin
    scales, from the bytes of one of write_test_pngs' files."""
    start = data.index(b"IDAT") + 4
    length = struct.unpack(">I", data[start - 8:start - 4])[0]
    rows = np.frombuffer(zlib.decompress(data[start:start + length]), np.uint8)
    pixels = torch.from_numpy(rows.reshape(SIDE, SIDE + 1)[:, 1:].astype(np.float32))
    return ((pixels / 255 - bench_train.MEAN) / bench_train.STD).unsqueeze(0)


def torch_predict(torch, np, net, classes, paths, batch):
    """The user's loop: each batch's files read, decoded, stacked, run,
    softmax and top-5, a CSV line per image. Returns the lines."""
    out = io.StringIO()
    for i in range(0, len(paths), batch):
        names = paths[i:i + batch]
        images = []
        for path in names:
            with open(path, "rb") as f:
                images.append(decode_png(torch, np, f.read()))
        probs = net(torch.stack(images)).softmax(1)
        top_p, top_c = probs.topk(TOP, 1)
        for name, ps, cs in zip(names, top_p.tolist(), top_c.tolist()):
            out.write(name + "".join(f",{c},{p:.6f},{classes[c]}" for c, p in zip(cs, ps))
                      + "\n")
    return out.getvalue()


def torch_seconds(torch, np, net, paths, batch):
    """Seconds of torch_predict over paths, after a warm-up batch."""
    classes = [str(c) for c in range(10)]
    with torch.inference_mode():
        torch_predict(torch, np, net, classes, paths[:batch], batch)
        start = time.perf_counter()
        lines = torch_predict(torch, np, net, classes, paths, batch)
        seconds = time.perf_counter() - start
    if lines.count("\n") != len(paths):
        raise RuntimeError("the PyTorch loop lost images")
    return seconds


def torch_forward_seconds(torch, net, batch, repeats):
    """Seconds per image of net(x) alone on a preloaded batch."""
    x = torch.randn(batch, 1, SIDE, SIDE)
    with torch.inference_mode():
        for _ in range(3):
            net(x)
        start = time.perf_counter()
        for _ in range(repeats):
            net(x)
        return (time.perf_counter() - start) / (repeats * batch)


# ---- the table ----

def scorch_forward_us(args, checkpoint, batch):
    """Microseconds per image of sc_infer_run alone (bench_infer)."""
    repeats = str(max(1, 4000 // batch))
    out = subprocess.run([f"{args.build}/tests/bench/bench_infer", checkpoint, str(batch),
                          str(args.threads), repeats],
                         check=True, capture_output=True, text=True).stdout
    return float(out)


HEADER = (f"{'model':6}{'batch':>6}{'scorch img/s':>14}{'torch img/s':>13}{'ratio':>8}"
          f"{'scorch us':>11}{'torch us':>10}{'fwd scorch us':>15}{'fwd torch us':>14}"
          f"{'fwd ratio':>11}{'whole img/s':>13}{'startup s':>11}")


def bench_model(torch, np, args, name, folder, paths):
    """The model's rows, one per batch size."""
    spec = bench_train.MODELS[name]
    checkpoint = scorch_checkpoint(args.build, spec, folder, args.threads)
    torch.manual_seed(0)
    net = spec["twin"](torch.nn).eval()
    many = [paths[i % len(paths)] for i in range(max(args.scorch_inputs, len(paths)))]
    many_list = write_list(folder, "many.txt", many)
    one_list = write_list(folder, "one.txt", paths[:1])
    n = len(many)
    for batch in args.batches:
        startup, whole, theirs, fwd_ours, fwd_theirs = [], [], [], [], []
        for _ in range(args.runs):
            startup.append(scorch_seconds(args, checkpoint, one_list, batch, folder))
            whole.append(scorch_seconds(args, checkpoint, many_list, batch, folder))
            theirs.append(torch_seconds(torch, np, net, paths, batch))
            fwd_ours.append(scorch_forward_us(args, checkpoint, batch))
            fwd_theirs.append(1e6 * torch_forward_seconds(torch, net, batch,
                                                          max(1, 4000 // batch)))
        s0, sw, t, fo, ft = (statistics.median(v)
                             for v in (startup, whole, theirs, fwd_ours, fwd_theirs))
        ours = (n - 1) / max(sw - s0, 1e-9)  # the startup run predicted one image
        rate = len(paths) / t
        print(f"{name:6}{batch:6}{ours:14.0f}{rate:13.0f}{ours / rate:7.2f}x"
              f"{1e6 / ours:11.1f}{1e6 / rate:10.1f}{fo:15.1f}{ft:14.1f}{ft / fo:10.2f}x"
              f"{n / sw:13.0f}{s0:11.3f}")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--images", type=int, default=1000,
                        help="PNG files, each side's inputs")
    parser.add_argument("--scorch-inputs", type=int, default=10000,
                        help="inputs of a timed scorch-predict: the files over and over")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batches", default="1,64")
    parser.add_argument("--models", default="mlp,cnn")
    args = parser.parse_args()
    args.batches = [int(b) for b in args.batches.split(",")]
    unknown = set(args.models.split(",")) - set(bench_train.MODELS)
    if unknown:
        parser.error(f"--models: unknown {', '.join(sorted(unknown))}")
    return args


def main():
    args = parse_args()
    try:
        import numpy as np
        import torch
    except ImportError:
        print("bench_predict: PyTorch is missing (tools/install-deps)", file=sys.stderr)
        return 77  # meson's "skipped"
    torch.set_num_threads(args.threads)
    print(f"scorch-predict vs PyTorch {torch.__version__} eager (eval, inference_mode): "
          f"{args.images} Fashion-MNIST PNGs (scorch: {args.scorch_inputs} inputs of them), "
          f"read, decode, normalise, forward, softmax, top-{TOP}, CSV; cpu, {args.threads} "
          f"threads; median of {args.runs} alternating runs")
    print(HEADER)
    with tempfile.TemporaryDirectory() as folder:
        paths = write_test_pngs(folder, args.images)
        for name in args.models.split(","):
            bench_model(torch, np, args, name, folder, paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
