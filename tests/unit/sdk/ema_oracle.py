#!/usr/bin/python3
"""scorch's EMA of the weights against timm's ModelEmaV3 and PyTorch's lerp.

    ema_oracle.py DUMP

DUMP (tests/unit/sdk/test_ema.c) holds the weights after each of STEPS steps
and scorch's EMA after them. This replays timm's ModelEmaV3 (its get_decay,
update_after_step 0, warmup_gamma 1, warmup_power 2/3; its update is
torch._foreach_lerp_(ema, model, 1 - decay)) in float32, and checks the EMA
within 1e-6 relative. Exits 77 (skipped) without `import torch`.
"""
import struct
import sys

try:
    import torch
except ImportError as e:
    print(f"ema_oracle: SKIPPED: import torch failed ({e})")
    sys.exit(77)

TOL = 1e-6


def get_decay(decay, warmup, step):
    """timm.utils.model_ema.ModelEmaV3.get_decay, with its defaults."""
    step = max(0, step - 0 - 1)
    if step <= 0:
        return 0.0
    if warmup:
        value = 1 - (1 + step / 1.0) ** -(2 / 3)
        return max(min(value, decay), 0.0)
    return decay


def lerp_(ema, model, weight):
    if hasattr(torch, "_foreach_lerp_"):
        torch._foreach_lerp_([ema], [model], weight)
    else:  # older torch: the same kernel, one tensor
        ema.lerp_(model, weight)


def main(path):
    with open(path, "rb") as f:
        data = f.read()
    steps, numel, warmup = struct.unpack_from("<3i", data, 0)
    (decay,) = struct.unpack_from("<d", data, 12)
    rows = torch.frombuffer(bytearray(data[20:]), dtype=torch.float32).reshape(steps + 2, numel)
    ema = rows[0].clone()
    for step in range(1, steps + 1):
        lerp_(ema, rows[step], 1.0 - get_decay(decay, bool(warmup), step))
    rel = ((rows[steps + 1] - ema).abs().max() / ema.abs().max()).item()
    print(f"ema_oracle: decay {decay} warmup {bool(warmup)}: max relative difference {rel:.3g}")
    return 0 if rel <= TOL else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
