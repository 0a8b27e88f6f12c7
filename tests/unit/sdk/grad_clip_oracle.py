#!/usr/bin/python3
"""scorch's gradient clipping against torch.nn.utils.clip_grad_norm_ and
clip_grad_value_.

    grad_clip_oracle.py DUMP

DUMP (tests/unit/sdk/test_grad_clip.c): int32 tensors, mode (0: norm, 1:
value); f64 the max norm or the value; then per tensor int32 numel and
trainable; then f32 gradients of every tensor before clipping, the same
after scorch clipped them, and f32 scorch's norm before clipping. This
clips the trainable ones with PyTorch (float32) and checks the norm and
every gradient within 1e-6 relative (frozen ones must be untouched).
Exits 77 (skipped) without `import torch`.
"""
import struct
import sys

try:
    import torch
except ImportError as e:
    print(f"grad_clip_oracle: SKIPPED: import torch failed ({e})")
    sys.exit(77)

TOL = 1e-6


def main(path):
    data = open(path, "rb").read()
    count, mode = struct.unpack_from("<ii", data, 0)
    (limit,) = struct.unpack_from("<d", data, 8)
    off = 16
    shapes = []
    for _ in range(count):
        shapes.append(struct.unpack_from("<ii", data, off))
        off += 8
    total = sum(n for n, _ in shapes)
    floats = torch.frombuffer(bytearray(data[off:]), dtype=torch.float32)
    before, after, norm = floats[:total], floats[total:2 * total], floats[2 * total].item()
    params, start = [], 0
    for n, trainable in shapes:
        p = torch.zeros(n, requires_grad=bool(trainable))
        p.grad = before[start:start + n].clone()
        params.append((p, start, n, trainable))
        start += n
    trained = [p for p, _, _, t in params if t]
    want_norm = torch.nn.utils.clip_grad_norm_(trained, float("inf")).item()
    for p, s, n, _ in params:  # clip_grad_norm_ with inf changed nothing
        p.grad = before[s:s + n].clone()
    if mode == 0:
        torch.nn.utils.clip_grad_norm_(trained, limit)
    else:
        torch.nn.utils.clip_grad_value_(trained, limit)
    bad = 0
    if abs(norm - want_norm) > TOL * want_norm:
        print(f"norm: scorch {norm!r}, torch {want_norm!r}")
        bad += 1
    for i, (p, s, n, trainable) in enumerate(params):
        got = after[s:s + n]
        want = p.grad if trainable else before[s:s + n]
        scale = want.abs().max().item() or 1.0
        diff = (got - want).abs().max().item()
        if diff > TOL * scale:
            print(f"tensor {i}: largest difference {diff} (largest magnitude {scale})")
            bad += 1
    print(f"grad_clip_oracle: mode {mode} limit {limit}: norm {norm} (torch {want_norm}); "
          f"{'FAILED' if bad else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
