#!/usr/bin/env python3
"""scorch-predict against PyTorch (issue 14): the twins of mlp and cnn
(tests/bench/bench_train.py) loaded from scorch-export's safetensors file
give the logits scorch-predict --raw prints for the same 100 test images,
written as PNG files, within 1e-5 relative (per image: the largest
difference over the largest logit's magnitude).

The run, the export and the twin's loading are weights_torch.py's, and so
are the virtual environment and the skipping (77) without it, PyTorch,
safetensors or the dataset.
"""
import csv
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import weights_torch  # noqa: E402  (enters the venv or skips; puts tests/bench on the path)

import bench_predict  # noqa: E402  (the PNG writer)
import bench_train  # noqa: E402

torch = weights_torch.torch
IMAGES = 100
RELATIVE_TOLERANCE = 1e-5


def scorch_logits(checkpoint, paths):
    """scorch-predict --raw of the files: their logits [N, 10], in order."""
    cmd = [weights_torch.program("scorch-predict"), "--checkpoint", checkpoint, "--raw",
           "--format", "csv", "--batch-size", str(len(paths)), "--threads",
           str(weights_torch.THREADS), *paths]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"predict_torch: {' '.join(cmd[:8])} ... failed ({r.returncode}):\n{r.stderr}")
    rows = list(csv.DictReader(r.stdout.splitlines()))
    if [row["input"] for row in rows] != paths:
        sys.exit("predict_torch: scorch-predict's rows are not the files in order")
    return torch.tensor([[float(row[f"output0_{j}"]) for j in range(10)] for row in rows],
                        dtype=torch.float64)


def compare(name, spec, tmp, paths):
    checkpoint, exported = weights_torch.train_and_export(name, spec, tmp)
    net = weights_torch.twin_from(exported, name, spec).eval()
    x, _ = weights_torch.test_split()
    with torch.inference_mode():
        theirs = net(x[:IMAGES]).double()
    ours = scorch_logits(checkpoint, paths)
    relative = ((ours - theirs).abs().max(1).values / theirs.abs().max(1).values).max().item()
    print(f"{name}: scorch-predict --raw against the PyTorch twin on {IMAGES} test PNGs: "
          f"largest relative logit difference {relative:.2e} (tolerance "
          f"{RELATIVE_TOLERANCE:g})")
    return relative <= RELATIVE_TOLERANCE


def main():
    if not os.path.isdir(bench_train.DATA):
        weights_torch.skip(f"the Fashion-MNIST data is not in {bench_train.DATA}")
    torch.set_num_threads(weights_torch.THREADS)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        paths = bench_predict.write_test_pngs(tmp, IMAGES)
        for name in ("mlp", "cnn"):
            ok = compare(name, bench_train.MODELS[name], tmp, paths) and ok
    if not ok:
        sys.exit("predict_torch: scorch-predict and PyTorch disagree (lines above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
