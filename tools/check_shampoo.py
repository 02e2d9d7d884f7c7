#!/usr/bin/env python3
"""Shampoo's reference fixture from pytorch-optimizer's own Shampoo (pytorch_optimizer 4.1.0,
optimizer/shampoo.py: `Shampoo`, not ScalableShampoo), for tests/nn/test_shampoo_torch.c
(which CI runs without torch) and tools/check_shampoo.sh.

  check_shampoo.py OUT.json          write the fixture
  check_shampoo.py --compare A B     1 if two fixtures' expected values differ by more than 1e-6

The fixture: matrices of odd shapes (wide, tall, square, 1 x n), their initial values and the
gradients of 4 steps (fp32), each matrix's settings (momentum, matrix_eps, and
preconditioning_compute_steps 1 or 2: the roots every step, or every second with zero updates
before the first), decoupled weight decay 0.1 (weight_decouple=True), the learning rate
changing per step (a schedule, as the engine's), and after the 4 steps the parameters, the
momentum buffers and the statistics (pre_cond_0 = L, pre_cond_1 = R) as the package computes
them two ways:
  "ref":      as shipped, fp32 parameters (an fp32 SVD for the roots)
  "ref_fp64": float64 parameters (the package's compute_power_svd then runs in float64): the
              exact answer the fp32 engine is measured against.
One optimizer per matrix (its own settings); the package's step count is its own, 1-based.
"""
import json
import sys

import torch
from importlib.metadata import version
from pytorch_optimizer import Shampoo

VERSION = "4.1.0"
# rows, cols, momentum, matrix_eps, preconditioning_compute_steps
MATS = [(1, 7, 0.0, 1e-6, 1), (7, 1, 0.5, 1e-6, 1), (7, 7, 0.0, 1e-3, 1),
        (7, 33, 0.9, 1e-3, 1), (33, 7, 0.0, 1e-3, 2), (16, 24, 0.5, 1e-2, 2),
        (24, 16, 0.0, 1e-6, 1)]
STEPS = 4
LR, WD = 0.05, 0.1


def run(params0, grads, dtype):
    out = dict(params=[], momentum=[], L=[], R=[])
    for (r, c, mom, eps, k), p0, gs in zip(MATS, params0, grads):
        p = torch.nn.Parameter(torch.tensor(p0, dtype=dtype).reshape(r, c))
        opt = Shampoo([p], lr=LR, momentum=mom, weight_decay=WD, weight_decouple=True,
                      preconditioning_compute_steps=k, matrix_eps=eps)
        for t in range(STEPS):
            opt.param_groups[0]["lr"] = LR * (t + 1) / STEPS
            p.grad = torch.tensor(gs[t], dtype=dtype).reshape(r, c)
            opt.step()
        st = opt.state[p]
        out["params"].append(p.detach().double().flatten().tolist())
        out["momentum"].append(st["momentum_buffer"].double().flatten().tolist()
                               if "momentum_buffer" in st else [])
        out["L"].append(st["pre_cond_0"].double().flatten().tolist())
        out["R"].append(st["pre_cond_1"].double().flatten().tolist())
    return out


def r9(xs):
    """9 significant digits: exact for the fp32 inputs, 1e-9 relative for the results"""
    return [[float(f"{v:.9g}") for v in x] for x in xs]


def make(out):
    if version("pytorch-optimizer") != VERSION:
        sys.exit(f"pytorch_optimizer {version('pytorch-optimizer')}, the fixture is of "
                 f"{VERSION}: pip install pytorch-optimizer=={VERSION}")
    gen = torch.Generator().manual_seed(29)
    params0, grads = [], []
    for r, c, *_ in MATS:
        params0.append((torch.randn(r, c, generator=gen) * 0.1).flatten().tolist())
        grads.append([torch.randn(r, c, generator=gen).flatten().tolist()
                      for _ in range(STEPS)])
    fix = dict(package=f"pytorch_optimizer {VERSION}", torch_version=torch.__version__,
               steps=STEPS, lr=LR, weight_decay=WD,
               lr_schedule="lr * (t + 1) / steps, t = 0..steps-1",
               mats=[dict(rows=r, cols=c, momentum=m, eps=e, interval=k)
                     for r, c, m, e, k in MATS],
               params0=r9(params0), grads=[r9(g) for g in grads])
    for name, dtype in (("ref", torch.float32), ("ref_fp64", torch.float64)):
        res = run(params0, grads, dtype)
        fix[name] = {k: r9(v) for k, v in res.items()}
    with open(out, "w") as f:
        json.dump(fix, f, separators=(",", ":"))
        f.write("\n")


def compare(a, b):
    fa, fb = (json.load(open(x)) for x in (a, b))
    worst = 0.0
    for k in ("ref", "ref_fp64"):
        for what in ("params", "momentum", "L", "R"):
            for xa, xb in zip(fa[k][what], fb[k][what]):
                worst = max([worst] + [abs(u - v) for u, v in zip(xa, xb)])
    print(f"largest difference between the fixtures: {worst:.3g} "
          f"({fa['package']}, torch {fa['torch_version']} vs {fb['package']}, torch "
          f"{fb['torch_version']})")
    return 0 if worst <= 1e-6 else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    make(sys.argv[1])
