#!/usr/bin/env python3
"""Seeds known bugs into a copy of the CUDA backend, one at a time, and
shows that the emulated GPU's tests catch each (docs/cuda-emulation.md).

    tests/cudaemu/mutations.py [--keep DIR] [NAME ...]

The working tree (tracked and untracked files) is copied to a scratch
directory and built once with -Dgpu_emulator=true; then each mutation is
applied, the targets it touches rebuilt, its check run, and the file
restored. A mutation is caught when its check fails; the first emulator
report or test failure it printed is listed beside it. Exit status 0 when
every mutation was caught."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPS = "tests/unit/sdk/test_cuda_ops"
FENCES = "tests/unit/sdk/test_fences"
BACKEND = "tests/unit/sdk/test_cuda_backend"


@dataclass
class Mutation:
    name: str
    path: str  # relative to the source root
    find: str  # must occur exactly once
    replace: str
    check: list  # command, relative to the build directory
    env: dict = field(default_factory=dict)


def ops(filter_):
    return [OPS, "--filter", f"cuda_gpu/{filter_}"]


MUTATIONS = [
    Mutation("wrong leading dimension (cuBLAS ldb of matmul)", "sdk/src/cuda/linear.cu",
             "pb, n, pa, k, 0.0f,", "pb, n, pa, k - 1, 0.0f,", ops("matmul")),
    Mutation("barrier removed in norm.cu block_sum", "sdk/src/cuda/norm.cu",
             "    __syncthreads(); /* a previous call may still be reading warps */\n", "",
             ops("batch_norm")),
    Mutation("barrier removed in eltwise.cu block_sum", "sdk/src/cuda/eltwise.cu",
             "        part[threadIdx.x / 32] = v;\n    __syncthreads();\n",
             "        part[threadIdx.x / 32] = v;\n", ops("add")),
    Mutation("first barrier removed in loss.cu block_reduce", "sdk/src/cuda/loss.cu",
             "    __syncthreads(); /* a previous call's readers are done with part */\n", "",
             ops("cross_entropy")),
    Mutation("second barrier removed in loss.cu block_reduce", "sdk/src/cuda/loss.cu",
             "        part[threadIdx.x / 32] = v;\n    __syncthreads();\n    v = part[0];",
             "        part[threadIdx.x / 32] = v;\n    v = part[0];", ops("softmax")),
    Mutation("early return before a barrier (layer norm partials)", "sdk/src/cuda/norm.cu",
             "    sums[1][threadIdx.y][threadIdx.x] = sum_g;\n    __syncthreads();",
             "    sums[1][threadIdx.y][threadIdx.x] = sum_g;\n    if (j >= d)\n        return;\n"
             "    __syncthreads();", ops("layer_norm")),
    Mutation("wrong memcpy kind (device-to-host copies as host-to-device)",
             "sdk/src/cuda/runtime.c", "cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, d->compute)",
             "cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, d->compute)", ops("relu")),
    Mutation("off-by-one in a grid-stride bound (eltwise.cu)", "sdk/src/cuda/eltwise.cu",
             "i < (n); \\", "i + 1 < (n); \\", ops("relu")),
    Mutation("missing event wait: kernels do not wait for the batch upload",
             "sdk/src/cuda/runtime.c",
             "    SC_CUDA_TRY(cudaEventRecord(done, d->copy));\n"
             "    SC_CUDA_TRY(cudaStreamWaitEvent(d->compute, done, 0));\n",
             "    SC_CUDA_TRY(cudaEventRecord(done, d->copy));\n",
             [FENCES, "--filter", "fences/kernels_after_an_upload_see_its_data"],
             {"CUDAEMU_LAZY": "1", "CUDAEMU_SEED": "1"}),
    Mutation("wrong device in a GPU-to-GPU copy (waits for its own GPU, not the source's)",
             "sdk/src/cuda/runtime.c", "        SC_TRY(wait_for_gpu(d, src_dev.index));",
             "        SC_TRY(wait_for_gpu(d, d->index));",
             [BACKEND, "--filter", "cuda_backend/a_copy_between_gpus_follows_the_kernels_of_its_source"],
             {"CUDAEMU_DEVICES": "2", "CUDAEMU_LAZY": "1", "CUDAEMU_SEED": "1"}),
]


def run(cmd, cwd, env=None, quiet=True):
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(cmd, cwd=cwd, env=full_env, text=True,
                          stdout=subprocess.PIPE if quiet else None,
                          stderr=subprocess.STDOUT if quiet else None)


def copy_tree(dst):
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = os.path.join(ROOT, rel)
        if os.path.isfile(src):
            os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(dst, rel))


def evidence(output):
    """The line that shows how the bug was caught."""
    lines = output.splitlines()
    for marker in ("cudaemu:", "Assertion Failed", "FAIL", "Crashing"):
        for i, line in enumerate(lines):
            if marker in line:
                text = line if marker != "Assertion Failed" else " ".join(lines[i:i + 3])
                return " ".join(text.replace("[----]", "").split())[:160]
    return lines[-1][:160] if lines else "(no output)"


def check_env(build_dir, extra):
    """As the test suite runs: the first emulator report aborts the test."""
    return {"SCORCH_BUILD_ROOT": build_dir, "OMP_NUM_THREADS": "2", **extra}


def build(build_dir):
    r = run(["ninja", "-C", build_dir, "sdk/libscorch_cuda.so", OPS, FENCES, BACKEND], ROOT)
    return r.returncode == 0, r.stdout


def try_mutation(m, src, build_dir):
    path = os.path.join(src, m.path)
    text = open(path).read()
    if text.count(m.find) != 1:
        return "NOT APPLIED", f"the text to mutate occurs {text.count(m.find)} times in {m.path}"
    open(path, "w").write(text.replace(m.find, m.replace))
    try:
        ok, log = build(build_dir)
        if not ok:
            return "caught", "by the compiler: " + evidence(log)
        r = run(m.check, build_dir, check_env(build_dir, m.env))
        return ("caught" if r.returncode != 0 else "MISSED"), evidence(r.stdout)
    finally:
        open(path, "w").write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="run only mutations whose name contains these")
    ap.add_argument("--keep", help="scratch directory to use and keep")
    args = ap.parse_args()
    chosen = [m for m in MUTATIONS if not args.names or any(n in m.name for n in args.names)]
    scratch = args.keep or tempfile.mkdtemp(prefix="scorch-mutations-")
    src, build_dir = os.path.join(scratch, "src"), os.path.join(scratch, "build")
    if not os.path.isdir(src):
        copy_tree(src)
    if not os.path.isdir(build_dir):
        r = run(["meson", "setup", build_dir, "-Dgpu_emulator=true", "-Dbuildtype=debugoptimized"],
                src)
        if r.returncode:
            sys.exit(r.stdout)
    ok, log = build(build_dir)
    if not ok:
        sys.exit("the unmutated copy does not build:\n" + log)
    for check, env in {(tuple(m.check), tuple(m.env.items())) for m in chosen}:
        clean = run(list(check), build_dir, check_env(build_dir, dict(env)))
        if clean.returncode:
            sys.exit(f"the unmutated copy fails {' '.join(check)}:\n" + clean.stdout)
    caught = 0
    print(f"| mutation | result | evidence |\n|---|---|---|")
    for m in chosen:
        result, how = try_mutation(m, src, build_dir)
        caught += result == "caught"
        print(f"| {m.name} | {result} | {how.replace('|', '/')} |", flush=True)
    build(build_dir)
    print(f"\n{caught} of {len(chosen)} mutations caught")
    if not args.keep:
        shutil.rmtree(scratch)
    sys.exit(0 if caught == len(chosen) else 1)


if __name__ == "__main__":
    main()
