#!/usr/bin/env python3
"""The PyTorch numbers tests/unit/sdk/test_optim.c hard-codes for RMSprop and
for per-parameter options (param groups): run it (python3 with torch, e.g.
Debian's python3-torch) and paste its output there. float32, lr 0.1, the
test's 4-element parameter and 3 steps of gradients."""
import torch

P0 = [0.5, -1.0, 2.0, -0.25]
GRADS = [[0.1, -0.2, 0.3, 0.4], [-0.5, 0.25, 0.0, 1.0], [0.3, 0.3, -0.7, -0.1]]
LR = 0.1


def c_array(values):
    return "{" + ", ".join("%.9gf" % v for v in values) + "}"


def run(make, params, steps=3):
    opt = make(params)
    after = []
    for s in range(steps):
        for p in [p for g in opt.param_groups for p in g["params"]]:
            p.grad = torch.tensor(GRADS[s], dtype=torch.float32)
        opt.step()
        after.append([p.detach().clone() for g in opt.param_groups for p in g["params"]])
    return opt, after


def rmsprop_case(name, **kw):
    p = torch.tensor(P0, dtype=torch.float32, requires_grad=True)
    opt, after = run(lambda ps: torch.optim.RMSprop(ps, lr=LR, **kw), [p])
    print("/* %s: torch.optim.RMSprop(lr=0.1, %s) */" % (name, kw))
    print("want[STEPS][N] = {%s};" % ", ".join(c_array(a[0].tolist()) for a in after))
    for key, value in opt.state[p].items():
        if torch.is_tensor(value) and value.numel() == 4:
            print("%s[N] = %s;" % (key, c_array(value.tolist())))


def groups_case(name, make):
    """a and c: lr * 0.5, no weight decay; b: the optimizer's own."""
    a, b, c = (torch.tensor(P0, dtype=torch.float32, requires_grad=True) for _ in range(3))
    opt, after = run(make, [{"params": [a, c], "lr": LR * 0.5, "weight_decay": 0.0},
                            {"params": [b]}])
    print("/* groups %s */" % name)
    last = after[-1]
    print("want_a[N] = %s;\nwant_b[N] = %s;\nwant_c[N] = %s;"
          % (c_array(last[0].tolist()), c_array(last[2].tolist()), c_array(last[1].tolist())))


rmsprop_case("rmsprop")
rmsprop_case("rmsprop_momentum_weight_decay", momentum=0.9, weight_decay=0.1)
rmsprop_case("rmsprop_centered_momentum", momentum=0.5, centered=True, alpha=0.9)
rmsprop_case("rmsprop_centered", centered=True)
groups_case("sgd", lambda g: torch.optim.SGD(g, lr=LR, momentum=0.9, weight_decay=0.1))
groups_case("adam", lambda g: torch.optim.Adam(g, lr=LR, weight_decay=0.1))
groups_case("adamw", lambda g: torch.optim.AdamW(g, lr=LR, weight_decay=0.1))
groups_case("rmsprop", lambda g: torch.optim.RMSprop(g, lr=LR, momentum=0.5, weight_decay=0.1))
