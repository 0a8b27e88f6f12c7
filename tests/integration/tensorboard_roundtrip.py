#!/usr/bin/env python3
"""TensorBoard round trip: scorch-train writes event files, the real reader
(the tensorboard package's EventAccumulator) reads them back, and every tag
and value is checked against metrics.jsonl, the last checkpoint and what the
fixture hooks (log_hooks.c) logged.

  1. 4 epochs, --histogram-every 2, the fixture hooks: every scalar, text,
     image and histogram tag, step and value.
  2. A run stopped at step 44 and resumed from its step-40 checkpoint: the
     SessionLog START of the second file drops steps 41..44 of the first, so
     the reader sees each step once, with the uninterrupted run's losses.
  3. --accumulate 4: one train/loss_step per optimizer step, the mean of its
     micro-batches.

Runs under the virtual environment tools/install-deps makes ($SCORCH_TEST_VENV,
default /opt/scorch-test-venv) and re-executes itself there. Exits 77 (meson's
"skipped") only when that environment does not exist; any disagreement is a
failure.
"""
import os
import sys

VENV = os.environ.get("SCORCH_TEST_VENV", "/opt/scorch-test-venv")
EXIT_SKIP = 77


def enter_venv():
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    python = os.path.join(VENV, "bin", "python3")
    if not os.access(python, os.X_OK):
        bar = "!" * 78
        print(f"{bar}\nSKIPPED: the TensorBoard round-trip test needs the virtual "
              f"environment {VENV}\nwith the tensorboard package, and it does not exist. "
              f"Run tools/install-deps\n(as root or with sudo) to create it.\n{bar}",
              file=sys.stderr, flush=True)
        sys.exit(EXIT_SKIP)
    os.execv(python, [python] + sys.argv)


enter_venv()

import glob  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import zlib  # noqa: E402

import numpy as np  # noqa: E402
from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: E402

BUILD = os.environ["SCORCH_BUILD_ROOT"]
LOG_HOOKS = os.environ["SCORCH_LOG_HOOKS"]
STOP_HOOK = os.environ["SCORCH_STOP_HOOK"]
EPOCHS = 4
HISTOGRAM_EVERY = 2
PHASES = ("train", "valid", "test")
PHASE_KEYS = ("loss", "accuracy", "samples_per_s")  # the MLP's metrics (4 classes: no top-5)

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def close(a, b, rel):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def f32(x):
    return float(np.float32(x))


# ---- running scorch-train ----

def train(run_dir, epochs, *extra, env=None):
    argv = [os.path.join(BUILD, "host/scorch-train"),
            "--model", os.path.join(BUILD, "plugins/mlp.so"), "--model-args", "hidden=32",
            "--dataset", os.path.join(BUILD, "plugins/synthetic.so"), "--dataset-path", "unused",
            "--batch-size", "64", "--epochs", str(epochs), "--run-dir", run_dir,
            "--workers", "2", "--seed", "7",
            "--lr-schedule", "step", "--lr-step-epochs", "1", "--lr-gamma", "0.5", *extra]
    r = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       env={**os.environ, **(env or {})}, timeout=300)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(argv)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def read_jsonl(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def load_events(run_dir):
    acc = ea.EventAccumulator(os.path.join(run_dir, "tensorboard"),
                              size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.IMAGES: 0,
                                             ea.TENSORS: 0})
    return acc.Reload()


# ---- reading what the reader cannot: checkpoints and PNGs ----

def read_params(path):
    """{name: float32 array} of a checkpoint's param/ entries (docs/checkpoint-format.md)."""
    data = open(path, "rb").read()
    check(data[:8] == b"SCORCHCK", f"{path}: not a checkpoint")
    pos, params = 12, {}
    while True:
        (kind,) = struct.unpack_from("<I", data, pos)
        if kind == 0:
            return params
        name_len, size = struct.unpack_from("<IQ", data, pos + 4)
        pos += 16
        shape = ()
        if kind == 1:
            dtype, rank = struct.unpack_from("<II", data, pos)
            shape = struct.unpack_from(f"<{rank}q", data, pos + 8)
            pos += 8 + 8 * rank
        name = data[pos:pos + name_len].decode()
        pos = (pos + name_len + 63) // 64 * 64
        if kind == 1 and dtype == 0 and name.startswith("param/"):
            params[name[6:]] = np.frombuffer(data, "<f4", size // 4, pos).reshape(shape)
        pos += size


def png_pixels(png):
    """(height, width, channels, rows of bytes) of an 8-bit non-interlaced PNG."""
    check(png[:8] == b"\x89PNG\r\n\x1a\n", "image is not a PNG")
    pos, idat = 8, b""
    while pos < len(png):
        length, kind = struct.unpack_from(">I4s", png, pos)
        body = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack_from(">IIBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    channels = {0: 1, 2: 3}[color]
    check(depth == 8, f"PNG bit depth {depth}")
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytes(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = [0, a, b, (a + b) // 2, a if pa <= pb and pa <= pc else b if pb <= pc else c][kind]
            line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return height, width, channels, rows


# ---- scenario 1: every tag and value ----

def by_step(events):
    return {e.step: e for e in events}


def check_file_name(run_dir):
    names = os.listdir(os.path.join(run_dir, "tensorboard"))
    pattern = r"events\.out\.tfevents\.\d+\." + re.escape(socket.gethostname())
    check(len(names) == 1 and re.fullmatch(pattern, names[0]),
          f"tensorboard/ holds {names}, not one events.out.tfevents.<time>.<host>")


def check_steps(acc, records, epoch_step):
    train = {r["epoch"]: r for r in records if r.get("phase") == "train"}
    total = epoch_step[EPOCHS]
    losses, lrs = acc.Scalars("train/loss_step"), acc.Scalars("train/lr")
    check([e.step for e in losses] == list(range(1, total + 1)),
          f"train/loss_step steps are not 1..{total}: {len(losses)} events")
    check([e.step for e in lrs] == list(range(1, total + 1)), "train/lr steps")
    for epoch in range(1, EPOCHS + 1):
        first, last = epoch_step.get(epoch - 1, 0), epoch_step[epoch]
        mean = sum(e.value for e in losses[first:last]) / (last - first)
        check(close(mean, train[epoch]["loss"], 1e-6),
              f"epoch {epoch}: mean train/loss_step {mean} != metrics.jsonl {train[epoch]['loss']}")
        want = f32(train[epoch]["lr"])
        check(all(e.value == want for e in lrs[first:last]),
              f"epoch {epoch}: train/lr is not {want} at every step")


def check_phases(acc, records):
    for phase in PHASES:
        rows = [r for r in records if r.get("phase") == phase]
        check(rows, f"metrics.jsonl has no {phase} record")
        for key in PHASE_KEYS:
            events = by_step(acc.Scalars(f"{phase}/{key}"))
            check(len(events) == len(rows), f"{phase}/{key}: {len(events)} events, "
                  f"{len(rows)} metrics.jsonl records")
            for r in rows:
                e = events.get(r["step"])
                check(e is not None and close(e.value, r[key], 1e-6),
                      f"{phase}/{key} at step {r['step']}: "
                      f"{e.value if e else None} != metrics.jsonl {r[key]}")


def check_fixture_scalar(acc, records, epoch_step):
    logged = [(r["step"], r["value"]) for r in records if r.get("tag") == "fixture/epoch"]
    events = [(e.step, e.value) for e in acc.Scalars("fixture/epoch")]
    want = [(epoch_step[e], float(e)) for e in range(1, EPOCHS + 1)]
    check(events == want, f"fixture/epoch: {events} != {want}")
    check(logged == want, f"metrics.jsonl fixture/epoch: {logged} != {want}")


def check_text(acc, epoch_step):
    events = acc.Tensors("fixture/note")
    check(acc.SummaryMetadata("fixture/note").plugin_data.plugin_name == "text",
          "fixture/note is not for the text plugin")
    got = [(e.step, e.tensor_proto.dtype, list(e.tensor_proto.string_val)) for e in events]
    want = [(epoch_step[e], 7, [f"epoch {e} of {EPOCHS}".encode()]) for e in range(1, EPOCHS + 1)]
    check(got == want, f"fixture/note: {got} != {want}")


def expected_rgb():
    v = np.arange(60, dtype=np.float32) / np.float32(59)
    u8 = (v * np.float32(255) + np.float32(0.5)).astype(np.uint8).reshape(3, 4, 5)
    return [bytes(u8[:, y, :].T.reshape(-1)) for y in range(4)]  # rows of interleaved RGB


def check_image(acc, tag, epoch_step, shape, rows_of_epoch):
    events = acc.Images(tag)
    check([e.step for e in events] == [epoch_step[e] for e in range(1, EPOCHS + 1)],
          f"{tag}: steps {[e.step for e in events]}")
    for epoch, e in enumerate(events, 1):
        check((e.height, e.width) == shape[:2], f"{tag}: {e.height}x{e.width} != {shape[:2]}")
        pixels = png_pixels(e.encoded_image_string)
        check(pixels == (*shape, rows_of_epoch(epoch)), f"{tag} epoch {epoch}: pixels {pixels}")


def check_images(acc, epoch_step):
    check(set(acc.Tags()["images"]) == {"fixture/rgb", "fixture/grey"},
          f"image tags {acc.Tags()['images']}")
    check_image(acc, "fixture/rgb", epoch_step, (4, 5, 3), lambda e: expected_rgb())
    grey = lambda e: [bytes(40 * (3 * y + x) + e for x in range(3)) for y in range(2)]
    check_image(acc, "fixture/grey", epoch_step, (2, 3, 1), grey)


def check_histogram(tag, h, values, exact):
    check(h.num == values.size and sum(h.bucket) == h.num,
          f"{tag}: num {h.num}, buckets hold {sum(h.bucket)}, the tensor has {values.size}")
    check(len(h.bucket) == len(h.bucket_limit) and list(h.bucket_limit) == sorted(h.bucket_limit)
          and h.bucket_limit[-1] == h.max, f"{tag}: bucket limits {list(h.bucket_limit)}")
    if exact:
        v = values.astype(np.float64)
        check(h.min == v.min() and h.max == v.max(), f"{tag}: min/max {h.min}/{h.max} != "
              f"the checkpoint's {v.min()}/{v.max()}")
        check(close(h.sum, v.sum(), 1e-9) and close(h.sum_squares, (v * v).sum(), 1e-9),
              f"{tag}: sum {h.sum}, sum_squares {h.sum_squares}")
    else:  # a gradient taken before zeroing varies
        check(h.min < h.max, f"{tag}: all {h.min}: captured after zeroing?")


def check_histograms(acc, run_dir, epoch_step):
    params = read_params(os.path.join(run_dir, "checkpoints/last.ckpt"))
    check(params, "no parameters in checkpoints/last.ckpt")
    want_tags = {f"{kind}/{n}" for n in params for kind in ("params", "grads")}
    check(set(acc.Tags()["histograms"]) == want_tags,
          f"histogram tags {sorted(acc.Tags()['histograms'])} != {sorted(want_tags)}")
    steps = [epoch_step[e] for e in range(HISTOGRAM_EVERY, EPOCHS + 1, HISTOGRAM_EVERY)]
    for name, values in params.items():
        sums = {}
        for kind in ("params", "grads"):
            tag = f"{kind}/{name}"
            events = acc.Histograms(tag) if tag in acc.Tags()["histograms"] else []
            check([e.step for e in events] == steps, f"{tag}: steps {[e.step for e in events]}")
            for i, e in enumerate(events):
                last = kind == "params" and i == len(events) - 1  # the checkpoint's values
                check_histogram(tag, e.histogram_value, values, last)
            sums[kind] = [e.histogram_value.sum for e in events]
        check(sums["params"] != sums["grads"], f"grads/{name} repeats params/{name}")


def scenario_every_tag(work):
    run_dir = os.path.join(work, "tags")
    train(run_dir, EPOCHS, "--hooks", LOG_HOOKS, "--histogram-every", str(HISTOGRAM_EVERY))
    records = read_jsonl(run_dir)
    epoch_step = {r["epoch"]: r["step"] for r in records if r.get("phase") == "train"}
    acc = load_events(run_dir)
    check_file_name(run_dir)
    scalar_tags = {"train/loss_step", "train/lr", "fixture/epoch"} | {
        f"{p}/{k}" for p in PHASES for k in PHASE_KEYS}
    check(set(acc.Tags()["scalars"]) == scalar_tags,
          f"scalar tags {sorted(acc.Tags()['scalars'])} != {sorted(scalar_tags)}")
    check_steps(acc, records, epoch_step)
    check_phases(acc, records)
    check_fixture_scalar(acc, records, epoch_step)
    check_text(acc, epoch_step)
    check_images(acc, epoch_step)
    check_histograms(acc, run_dir, epoch_step)
    return [e.value for e in acc.Scalars("train/loss_step")]


# ---- scenario 2: a resumed run purges what its checkpoint does not hold ----

def scenario_resume(work, straight_losses):
    run_dir = os.path.join(work, "resumed")
    train(run_dir, 2, "--hooks", STOP_HOOK, "--checkpoint-every", "8", "--keep-last", "10",
          env={"SCORCH_TEST_STOP_AT_STEP": "44"})
    at_40 = glob.glob(os.path.join(run_dir, "checkpoints/epoch-*-step-*40.ckpt"))
    if not check(len(at_40) == 1, f"no step-40 checkpoint: {os.listdir(run_dir + '/checkpoints')}"):
        return
    train(run_dir, 2, "--resume", at_40[0])
    check(len(os.listdir(os.path.join(run_dir, "tensorboard"))) == 2,
          "a resumed run did not write a second event file")
    losses = load_events(run_dir).Scalars("train/loss_step")
    steps = [e.step for e in losses]
    check(steps == list(range(1, 65)), f"after the resume, train/loss_step steps are {steps}")
    check([e.value for e in losses] == straight_losses[:64],
          "after the resume, train/loss_step differs from the uninterrupted run")


# ---- scenario 3: with gradient accumulation, one record per optimizer step ----

def scenario_accumulate(work):
    run_dir = os.path.join(work, "accumulate")
    train(run_dir, 1, "--accumulate", "4")
    record = next(r for r in read_jsonl(run_dir) if r.get("phase") == "train")
    losses = load_events(run_dir).Scalars("train/loss_step")
    check([e.step for e in losses] == list(range(1, record["step"] + 1)),
          f"--accumulate 4: train/loss_step steps {[e.step for e in losses]}, "
          f"not 1..{record['step']}")
    mean = sum(e.value for e in losses) / max(len(losses), 1)
    check(close(mean, record["loss"], 1e-6),
          f"--accumulate 4: mean train/loss_step {mean} != metrics.jsonl {record['loss']}")


def main():
    with tempfile.TemporaryDirectory(prefix="scorch-tb-") as work:
        straight = scenario_every_tag(work)
        scenario_resume(work, straight)
        scenario_accumulate(work)
    for f in failures:
        print("FAIL:", f)
    print(f"tensorboard round trip: {len(failures)} failed checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
