#!/usr/bin/env python3
"""Muon's reference fixture from PyTorch's own torch.optim.Muon (torch 2.9+), for
tests/nn/test_muon_torch.c (which CI runs without torch) and tools/check_muon.sh.

  check_muon.py OUT.json          write the fixture
  check_muon.py --compare A B     1 if two fixtures' expected values differ by more than 1e-6

The fixture: matrices of odd shapes (wide, tall, square, 1 x n), their initial values and the
gradients of 3 steps (fp32), the hyperparameters, and the parameters and momentum buffers after
the 3 steps as torch.optim.Muon computes them two ways:
  "torch":      as shipped, fp32 parameters (the Newton-Schulz iteration cast to bf16)
  "torch_fp64": float64 parameters with torch's bf16 cast made a copy in the tensor's own type
                (Tensor.bfloat16 and Tensor.to(dtype=bfloat16) patched during step(), and
                counted: one cast per matrix and step, else the script fails), so the
                same code of torch computes in double: the reference the fp32 engine must meet
                tightly.
The lr changes per step (a schedule, as the engine's), nesterov True for all but one matrix.
"""
import json
import sys

import torch

SHAPES = [(1, 7), (7, 1), (7, 7), (7, 33), (33, 7), (16, 24), (24, 16)]
STEPS = 3
HP = dict(lr=0.02, weight_decay=0.1, momentum=0.95)


def run(params0, grads, dtype, patch):
    ps = [torch.nn.Parameter(torch.tensor(p, dtype=dtype)) for p in params0]
    groups = [dict(params=ps[:-1], nesterov=True), dict(params=ps[-1:], nesterov=False)]
    opt = torch.optim.Muon(groups, **HP)  # ns coefficients, steps, eps, adjust_lr: defaults
    hits = [0]
    orig_bf16, orig_to = torch.Tensor.bfloat16, torch.Tensor.to

    def no_bf16(self, *a, **k):  # the cast to bf16 becomes a copy in the tensor's own type
        if (a and a[0] is torch.bfloat16) or k.get("dtype") is torch.bfloat16:
            hits[0] += 1
            return self.clone()
        return orig_to(self, *a, **k)

    for t in range(STEPS):
        for g in opt.param_groups:
            g["lr"] = HP["lr"] * (t + 1) / STEPS
        for p, gs in zip(ps, grads):
            p.grad = torch.tensor(gs[t], dtype=dtype)
        if patch:
            torch.Tensor.bfloat16 = lambda self, *a, **k: (hits.__setitem__(0, hits[0] + 1),
                                                           self.clone())[1]
            torch.Tensor.to = no_bf16
        try:
            opt.step()
        finally:
            torch.Tensor.bfloat16, torch.Tensor.to = orig_bf16, orig_to
    if patch and hits[0] != STEPS * len(ps):
        sys.exit(f"torch's Muon cast to bf16 {hits[0]} times in {STEPS} steps of {len(ps)} "
                 "matrices: its code changed, look at torch/optim/_muon.py")
    return ([p.detach().double().flatten().tolist() for p in ps],
            [opt.state[p]["momentum_buffer"].double().flatten().tolist() for p in ps])


def r9(xs):
    """9 significant digits: exact for the fp32 inputs, 1e-9 relative for the results"""
    return [[float(f"{v:.9g}") for v in x] for x in xs]


def make(out):
    gen = torch.Generator().manual_seed(29)
    params0, grads = [], []
    for r, c in SHAPES:
        params0.append((torch.randn(r, c, generator=gen) * 0.1).tolist())
        grads.append([(torch.randn(r, c, generator=gen)).tolist() for _ in range(STEPS)])
    fix = dict(torch_version=torch.__version__, steps=STEPS, hp=HP,
               lr_schedule="lr * (t + 1) / steps, t = 0..steps-1",
               nesterov=[1] * (len(SHAPES) - 1) + [0],
               shapes=SHAPES,
               params0=r9([sum(p, []) for p in params0]),
               grads=[r9([sum(g, []) for g in gs]) for gs in grads])
    for name, dtype, patch in (("torch", torch.float32, False),
                               ("torch_fp64", torch.float64, True)):
        p, b = run(params0, grads, dtype, patch)
        fix[name] = dict(params=r9(p), momentum=r9(b))
    with open(out, "w") as f:
        json.dump(fix, f, separators=(",", ":"))
        f.write("\n")


def compare(a, b):
    fa, fb = (json.load(open(x)) for x in (a, b))
    worst = 0.0
    for k in ("torch", "torch_fp64"):
        for what in ("params", "momentum"):
            for xa, xb in zip(fa[k][what], fb[k][what]):
                worst = max([worst] + [abs(u - v) for u, v in zip(xa, xb)])
    print(f"largest difference between the fixtures: {worst:.3g} "
          f"(torch {fa['torch_version']} vs {fb['torch_version']})")
    return 0 if worst <= 1e-6 else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    make(sys.argv[1])
