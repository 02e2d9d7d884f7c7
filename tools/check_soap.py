#!/usr/bin/env python3
"""SOAP's reference fixture from pytorch-optimizer's own SOAP (pytorch_optimizer 4.1.0,
optimizer/soap.py), for tests/nn/test_soap_torch.c (which CI runs without torch) and
tools/check_soap.sh.

  check_soap.py OUT.json          write the fixture
  check_soap.py --compare A B     1 if two fixtures' expected values differ by more than 1e-6

The fixture: matrices of odd shapes (wide, tall, square, 1 x n), their initial values and the
gradients of STEPS steps (fp32), each matrix's settings (betas, shampoo_beta, eps,
correct_bias and precondition_frequency), decoupled weight decay, the learning rate changing per
step (a schedule, as the engine's), the package's state after its first step ("state1"), and
after the last step the parameters, both moments, the statistics GG and the eigenbases Q.

The first step: the package's first call only initialises (GG from the first gradient, Q by
torch.linalg.eigh of GG; no update). Where GG is rank-deficient (a 7 x 33 gradient's 33 x 33
GG has rank 7) eigh's basis of the null space is whatever LAPACK returns, and Adam in the
rotated space is not invariant to it, so no other code can be expected to reproduce it; the
engine starts from its own subspace iteration instead (soap.init_iters). So the fixture
records state1 = the float64 run's GG and Q after the first call, rounded to fp32, and every
run below continues from state1 (written into the package's state, the same values in each
precision), so the steps 2..STEPS compared are the package's code from a state all sides share.
Each matrix's frequency is chosen so that GG has full rank at every refresh (at step s the
statistics hold s + 1 gradients: min(rows, cols) (s + 1) >= max(rows, cols)), where the
refresh's QR is determined by GG alone.

Two results:
  "ref":      the package as shipped, fp32 parameters (its QR in fp32);
  "ref_fp64": float64 parameters, with the one float32 cast the package applies before its QR
              (`power_iter.to(torch.float32)` in get_orthogonal_matrix_qr) removed from the
              method's source at run time (the text must occur exactly once): the exact answer
              the fp32 engine and the double reference are measured against.
One optimizer per matrix (its own settings); the package's step count is its own, 1-based.
"""
import inspect
import json
import sys
import textwrap

import torch
from importlib.metadata import version
import pytorch_optimizer.optimizer.soap as soap_mod
from pytorch_optimizer import SOAP

VERSION = "4.1.0"
# rows, cols, beta1, beta2, shampoo_beta (None: beta2), precondition_frequency, correct_bias, eps;
# the betas, the learning rate and the weight decay are dyadic (exact in fp32), so that the
# engine's fp32 hyperparameters are the package's and the double reference can be held to 1e-8
MATS = [(1, 7, 0.9375, 0.96875, None, 6, True, 1e-8),
        (7, 1, 0.875, 0.984375, None, 6, True, 1e-8),
        (7, 7, 0.9375, 0.9375, 0.875, 2, True, 1e-8),
        (7, 33, 0.875, 0.9375, None, 4, False, 1e-8),
        (33, 7, 0.9375, 0.96875, 0.984375, 5, True, 1e-6),
        (16, 24, 0.9375, 0.9375, None, 3, True, 1e-8),
        (24, 16, 0.75, 0.875, None, 1, True, 1e-8)]
STEPS = 9
LR, WD, LR_DIV = 2.0**-7, 0.125, 8  # the lr of the package's call t (1-based): LR * t / LR_DIV
CAST = "power_iter.to(torch.float32)"


def soap64():
    """SOAP with the QR's float32 cast removed (the only change)"""
    src = textwrap.dedent(inspect.getsource(SOAP.get_orthogonal_matrix_qr))
    if src.count(CAST) != 1:
        sys.exit(f"SOAP.get_orthogonal_matrix_qr: '{CAST}' occurs {src.count(CAST)} times, "
                 f"not once: the package is not {VERSION}'s")
    ns = {}
    exec(src.replace(CAST, "power_iter"), vars(soap_mod), ns)
    return type("SOAP64", (SOAP,), {"get_orthogonal_matrix_qr": ns["get_orthogonal_matrix_qr"]})


def make_opt(cls, p, mat):
    r, c, b1, b2, sb, freq, cb, eps = mat
    return cls([p], lr=LR, betas=(b1, b2), shampoo_beta=sb, weight_decay=WD,
               precondition_frequency=freq, correct_bias=cb, eps=eps)


def state1(params0, grads):
    """per matrix the float64 package's GG and Q after the first call, rounded to fp32"""
    out = []
    for mat, p0, gs in zip(MATS, params0, grads):
        r, c = mat[:2]
        p = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float64).reshape(r, c))
        opt = make_opt(SOAP, p, mat)
        p.grad = torch.tensor(gs[0], dtype=torch.float64).reshape(r, c)
        opt.step()
        st = opt.state[p]
        out.append({f"{k}{i}": st[k][i].float().double().flatten().tolist()
                    for k in ("GG", "Q") for i in range(2)})
    return out


def run(cls, params0, grads, s1, dtype):
    out = dict(params=[], exp_avg=[], exp_avg_sq=[], GG0=[], GG1=[], Q0=[], Q1=[])
    for mat, p0, gs, st1 in zip(MATS, params0, grads, s1):
        r, c = mat[:2]
        p = torch.nn.Parameter(torch.tensor(p0, dtype=dtype).reshape(r, c))
        opt = make_opt(cls, p, mat)
        for t in range(STEPS):
            opt.param_groups[0]["lr"] = LR * (t + 1) / LR_DIV
            p.grad = torch.tensor(gs[t], dtype=dtype).reshape(r, c)
            opt.step()
            if t == 0:  # continue from state1 (the first call changed only GG and Q)
                st = opt.state[p]
                for k, (n, m) in enumerate(((r, r), (c, c))):
                    st["GG"][k].copy_(torch.tensor(st1[f"GG{k}"], dtype=dtype).reshape(n, m))
                    st["Q"][k].copy_(torch.tensor(st1[f"Q{k}"], dtype=dtype).reshape(n, m))
        st = opt.state[p]
        out["params"].append(p.detach().double().flatten().tolist())
        for k in ("exp_avg", "exp_avg_sq"):
            out[k].append(st[k].double().flatten().tolist())
        for k in range(2):
            out[f"GG{k}"].append(st["GG"][k].double().flatten().tolist())
            out[f"Q{k}"].append(st["Q"][k].double().flatten().tolist())
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
    params0, grads = r9(params0), [r9(g) for g in grads]
    s1 = state1(params0, grads)
    fix = dict(package=f"pytorch_optimizer {VERSION}", torch_version=torch.__version__,
               steps=STEPS, lr=LR, weight_decay=WD, lr_div=LR_DIV,
               lr_schedule="lr * t / lr_div at the package's call t = 1..steps",
               mats=[dict(rows=r, cols=c, beta1=b1, beta2=b2,
                          shampoo_beta=b2 if sb is None else sb, frequency=f,
                          correct_bias=cb, eps=e)
                     for r, c, b1, b2, sb, f, cb, e in MATS],
               params0=params0, grads=grads,
               state1=[{k: [float(f"{v:.9g}") for v in x] for k, x in s.items()} for s in s1])
    for name, cls, dtype in (("ref", SOAP, torch.float32), ("ref_fp64", soap64(), torch.float64)):
        res = run(cls, params0, grads, s1, dtype)
        fix[name] = {k: r9(v) for k, v in res.items()}
    with open(out, "w") as f:
        json.dump(fix, f, separators=(",", ":"))
        f.write("\n")


def compare(a, b):
    fa, fb = (json.load(open(x)) for x in (a, b))
    worst = 0.0
    for k in ("ref", "ref_fp64"):
        for what in fa[k]:
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
