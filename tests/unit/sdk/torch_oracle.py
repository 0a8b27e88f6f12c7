#!/usr/bin/python3
"""scorch's training step against PyTorch's, the numerical oracle.

    torch_oracle.py DUMP cpu|cuda

For the shipped mlp and cnn plugins, DUMP (torch_step_dump) writes scorch's
initial parameters, a batch, the loss and gradients of one step, and the
result of a few SGD, SGD+momentum, SGD+Nesterov, Adam and AdamW updates
from given gradients. This script builds the same network in PyTorch (the
twins of tests/bench/bench_train.py), loads the same values, and checks:

  - the loss, every gradient and batch norm's updated running statistics
    within 1e-5 relative;
  - after the updates, every parameter and every optimizer state buffer
    (momentum, exp_avg, exp_avg_sq) within 1e-6 relative.

"Relative" is per tensor: max |scorch - torch| / max |torch|. Float32 on
the CPU throughout (torch in float32; scorch on DEVICE). Exits 77 (meson's
"skipped") without `import torch` or, for cuda, without a GPU.
Needs SCORCH_BUILD_ROOT and SCORCH_SOURCE_ROOT (meson's test env).
"""
import os
import subprocess
import sys
import tempfile

SKIP = 77
try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"torch_oracle: SKIPPED: import torch failed ({e}); "
          "tools/install-deps installs python3-torch")
    sys.exit(SKIP)

GRAD_TOL = 1e-5
UPDATE_TOL = 1e-6
# scorch's optimizer state names -> torch.optim's
TORCH_STATE = {"momentum": "momentum_buffer", "exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq"}


def read_manifest(path):
    params, optims, batch = [], [], 0
    for line in open(path):
        f = line.split()
        if f[0] == "batch":
            batch = int(f[1])
        elif f[0] == "param":
            ndim = int(f[3])
            params.append({"name": f[1], "trainable": f[2] == "1",
                           "shape": tuple(int(d) for d in f[4:4 + ndim])})
        elif f[0] == "optim":
            n_state = int(f[11])
            optims.append({"name": f[1], "kind": f[2], "lr": float(f[3]),
                           "momentum": float(f[4]), "nesterov": f[5] == "1",
                           "weight_decay": float(f[6]), "betas": (float(f[7]), float(f[8])),
                           "eps": float(f[9]), "steps": int(f[10]),
                           "states": f[12:12 + n_state]})
    return params, optims, batch


class Dump:
    """torch_step_dump's files in one directory."""

    def __init__(self, directory):
        self.dir = directory
        manifest = os.path.join(directory, "manifest.txt")
        self.params, self.optims, self.batch = read_manifest(manifest)
        self.offsets = np.cumsum([0] + [int(np.prod(p["shape"])) for p in self.params])

    def flat(self, name, dtype=np.float32):
        return np.fromfile(os.path.join(self.dir, name), dtype=dtype)

    def split(self, flat):
        """A flat buffer as {name: array of the parameter's shape}."""
        return {p["name"]: flat[self.offsets[i]:self.offsets[i + 1]].reshape(p["shape"])
                for i, p in enumerate(self.params)}


def relative_error(ours, theirs):
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    scale = np.abs(theirs).max()
    return np.abs(ours - theirs).max() / (scale if scale > 0 else 1.0)


class Checker:
    def __init__(self):
        self.failures = 0

    def expect(self, what, ours, theirs, tol):
        err = relative_error(ours, theirs)
        ok = err <= tol
        self.failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}: relative error {err:.3g} (tolerance {tol:g})")


def twin_tensors(net):
    """The twin's parameters and running statistics in state_dict order, which
    is scorch's store order; num_batches_tracked has no scorch counterpart."""
    return [(k, v) for k, v in net.state_dict(keep_vars=True).items()
            if not k.endswith("num_batches_tracked")]


def load_twin(twin, dump):
    net = twin(torch.nn)
    pairs = twin_tensors(net)
    names = [p["name"] for p in dump.params]
    if len(pairs) != len(names):
        sys.exit(f"torch_oracle: scorch has {len(names)} tensors, the twin {len(pairs)}")
    values = dump.split(dump.flat("values.f32"))
    with torch.no_grad():
        for (key, t), p in zip(pairs, dump.params):
            if tuple(t.shape) != p["shape"]:
                sys.exit(f"torch_oracle: {p['name']} {p['shape']} vs the twin's {key} "
                         f"{tuple(t.shape)}")
            t.copy_(torch.from_numpy(values[p["name"]]))
    return net, pairs


def check_step(twin, dump, model, check):
    """Loss, gradients and running statistics of one training step."""
    net, pairs = load_twin(twin, dump)
    net.train()
    x = torch.from_numpy(dump.flat("x.f32").reshape(dump.batch, 1, 28, 28))
    y = torch.from_numpy(dump.flat("y.i64", np.int64))
    loss = torch.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    check.expect(f"{model} loss", dump.flat("loss.f32"), loss.detach().numpy(), GRAD_TOL)
    grads = dump.split(dump.flat("grads.f32"))
    after = dump.split(dump.flat("forward.f32"))
    for (key, t), p in zip(pairs, dump.params):
        if p["trainable"]:
            check.expect(f"{model} gradient of {p['name']}", grads[p["name"]], t.grad.numpy(),
                         GRAD_TOL)
        else:
            check.expect(f"{model} {p['name']} after forward", after[p["name"]],
                         t.detach().numpy(), GRAD_TOL)


def torch_optimizer(spec, params):
    common = {"lr": spec["lr"], "weight_decay": spec["weight_decay"], "foreach": False}
    if spec["kind"] == "sgd":
        return torch.optim.SGD(params, momentum=spec["momentum"], nesterov=spec["nesterov"],
                               **common)
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[spec["kind"]]
    return cls(params, betas=spec["betas"], eps=spec["eps"], **common)


def check_optimizer(spec, dump, model, check):
    """spec's updates from the dump's step gradients, on the trainable parameters."""
    trainable = [p for p in dump.params if p["trainable"]]
    values = dump.split(dump.flat("values.f32"))
    params = [torch.tensor(values[p["name"]], requires_grad=True) for p in trainable]
    opt = torch_optimizer(spec, params)
    step_grads = dump.flat("step_grads.f32").reshape(spec["steps"], -1)
    for k in range(spec["steps"]):
        grads = dump.split(step_grads[k])
        for t, p in zip(params, trainable):
            t.grad = torch.from_numpy(grads[p["name"]].copy())
        opt.step()
    what = f"{model} {spec['name']} x{spec['steps']}"
    ours = dump.split(dump.flat(f"optim_{spec['name']}.f32"))
    for t, p in zip(params, trainable):
        check.expect(f"{what}: {p['name']}", ours[p["name"]], t.detach().numpy(), UPDATE_TOL)
    for state in spec["states"]:
        ours = dump.split(dump.flat(f"optim_{spec['name']}_{state}.f32"))
        for t, p in zip(params, trainable):
            check.expect(f"{what}: {state} of {p['name']}", ours[p["name"]],
                         opt.state[t][TORCH_STATE[state]].numpy(), UPDATE_TOL)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: torch_oracle.py DUMP cpu|cuda")
    dump_exe, device = sys.argv[1:]
    sys.path.insert(0, os.path.join(os.environ["SCORCH_SOURCE_ROOT"], "tests", "bench"))
    from bench_train import MODELS
    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    check = Checker()
    for model in ("mlp", "cnn"):
        spec = MODELS[model]
        with tempfile.TemporaryDirectory() as directory:
            plugin = os.path.join(os.environ["SCORCH_BUILD_ROOT"], "plugins", spec["plugin"])
            rc = subprocess.run([dump_exe, plugin, device, directory]).returncode
            if rc != 0:
                return rc
            dump = Dump(directory)
            check_step(spec["twin"], dump, model, check)
            for optim in dump.optims:
                check_optimizer(optim, dump, model, check)
    print(f"torch_oracle: {check.failures} check(s) failed" if check.failures
          else "torch_oracle: every check passed")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
