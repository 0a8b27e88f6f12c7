#!/usr/bin/python3
"""scorch's soft-target cross-entropy against PyTorch's, and its Mixup and
CutMix against timm's formulas (timm/data/mixup.py, batch mode).

    mix_oracle.py ce DUMP    cross-entropy: loss and both gradients
    mix_oracle.py mix DUMP   mixed inputs and soft targets
    mix_oracle.py box DUMP   CutMix boxes and their corrected lam

DUMP is text written by tests/unit/host/test_mix.c (whitespace-separated
numbers, floats with 9 significant digits: exact for f32). Exits 0 when
everything agrees, 1 with what differs, 77 (skipped) without torch.
"""
import math
import sys

try:
    import torch
except ImportError as e:
    print(f"mix_oracle: SKIPPED: import torch failed ({e})")
    sys.exit(77)


def numbers(path):
    with open(path) as f:
        return [float(v) for v in f.read().split()]


class Reader:
    def __init__(self, path):
        self.v = numbers(path)
        self.i = 0

    def take(self, n):
        out = self.v[self.i:self.i + n]
        self.i += n
        return out

    def int(self):
        return int(self.take(1)[0])


def close(name, got, want, rtol, atol):
    got = torch.tensor(got, dtype=torch.float64).flatten()
    want = want.detach().double().flatten()
    err = (got - want).abs() - (atol + rtol * want.abs())
    if got.numel() != want.numel() or (err > 0).any():
        i = int(err.argmax())
        print(f"mix_oracle: {name}: element {i}: scorch {got[i].item():.9g}, "
              f"reference {want[i].item():.9g}")
        return False
    return True


def check_ce(r):
    """torch.nn.functional.cross_entropy with probability targets."""
    ok = True
    while r.i < len(r.v):
        n, c = r.int(), r.int()
        s = r.take(1)[0]
        z = torch.tensor(r.take(n * c), dtype=torch.float32).view(n, c).requires_grad_()
        q = torch.tensor(r.take(n * c), dtype=torch.float32).view(n, c).requires_grad_()
        loss = torch.nn.functional.cross_entropy(z, q, label_smoothing=s)
        loss.backward()
        what = f"[{n}, {c}] smoothing {s:g}"
        ok &= close(f"{what} loss", r.take(1), loss, 1e-6, 0)
        ok &= close(f"{what} logits' gradient", r.take(n * c), z.grad, 1e-5, 1e-7)
        ok &= close(f"{what} targets' gradient", r.take(n * c), q.grad, 1e-5, 1e-7)
    return ok


def one_hot(x, num_classes, on_value=1., off_value=0.):
    """timm.data.mixup.one_hot"""
    x = x.long().view(-1, 1)
    return torch.full((x.size()[0], num_classes), off_value).scatter_(1, x, on_value)


def mixup_target(target, num_classes, lam=1., smoothing=0.0):
    """timm.data.mixup.mixup_target (scorch smooths in its cross-entropy)"""
    off_value = smoothing / num_classes
    on_value = 1. - smoothing + off_value
    y1 = one_hot(target, num_classes, on_value=on_value, off_value=off_value)
    y2 = one_hot(target.flip(0), num_classes, on_value=on_value, off_value=off_value)
    return y1 * lam + y2 * (1. - lam)


def mix_batch(x, lam, box):
    """timm.data.mixup.Mixup._mix_batch given its lam and box"""
    if lam == 1.:
        return x
    if box is not None:
        yl, yh, xl, xh = box
        x[:, :, yl:yh, xl:xh] = x.flip(0)[:, :, yl:yh, xl:xh]
    else:
        x_flipped = x.flip(0).mul_(1. - lam)
        x.mul_(lam).add_(x_flipped)
    return x


def check_mix(r):
    ok = True
    while r.i < len(r.v):
        n, ch, h, w, classes = (r.int() for _ in range(5))
        lam = r.take(1)[0]
        cutmix = r.int()
        box = [r.int() for _ in range(4)]
        x = torch.tensor(r.take(n * ch * h * w), dtype=torch.float32).view(n, ch, h, w)
        labels = torch.tensor([int(v) for v in r.take(n)])
        want_x = mix_batch(x.clone(), lam, box if cutmix else None)
        want_q = mixup_target(labels, classes, lam)
        what = f"{'cutmix' if cutmix else 'mixup'} N={n} lam {lam:.9g}"
        ok &= close(f"{what} inputs", r.take(n * ch * h * w), want_x, 0, 1e-6)
        ok &= close(f"{what} targets", r.take(n * classes), want_q, 0, 1e-6)
    return ok


def rand_bbox(img_shape, lam, cy, cx):
    """timm.data.mixup.rand_bbox, margin 0, with the centre given"""
    ratio = math.sqrt(1 - lam)
    img_h, img_w = img_shape[-2:]
    cut_h, cut_w = int(img_h * ratio), int(img_w * ratio)
    clip = lambda v, hi: min(max(v, 0), hi)
    yl = clip(cy - cut_h // 2, img_h)
    yh = clip(cy + cut_h // 2, img_h)
    xl = clip(cx - cut_w // 2, img_w)
    xh = clip(cx + cut_w // 2, img_w)
    return yl, yh, xl, xh


def check_box(r):
    ok = True
    while r.i < len(r.v):
        h, w = r.int(), r.int()
        lam = r.take(1)[0]
        cy, cx = r.int(), r.int()
        got = [r.int() for _ in range(4)]
        got_lam = r.take(1)[0]
        box = rand_bbox((h, w), lam, cy, cx)
        want_lam = 1. - (box[1] - box[0]) * (box[3] - box[2]) / float(h * w)
        if list(box) != got or abs(got_lam - want_lam) > 1e-12:
            print(f"mix_oracle: box {h}x{w} lam {lam:.17g} centre ({cy}, {cx}): scorch "
                  f"{got} lam {got_lam:.17g}, timm {list(box)} lam {want_lam:.17g}")
            ok = False
    return ok


if __name__ == "__main__":
    check = {"ce": check_ce, "mix": check_mix, "box": check_box}[sys.argv[1]]
    sys.exit(0 if check(Reader(sys.argv[2])) else 1)
