#!/usr/bin/env python3
"""SOAP against Shampoo (and AdamW) with pytorch-optimizer's reference implementations, on a
model, corpus and batch equal in shape to tools/optim_convergence.sh's (docs/OPTIMIZERS.md,
"SOAP against Shampoo (PyTorch references)").

GPT-2 (transformers GPT2LMHeadModel: 4 layers, width 64, 4 heads, context 64, no dropout, tied
head) on the fortunes corpus, byte-level tokens (vocabulary 257: the 256 bytes and GPT-2's
<|endoftext|>, as clpipe's byte tokenizer for the gpt2 preset; the special never occurs in the
text), the last 5 % of the stream held out (data.val_fraction), 16 sequences x 64 tokens a step,
warm-up 20 then cosine to min_lr 3e-4 (engine/train/session_train.c's lr_at), gradient norm
clipped to 1.0, validation every 10 steps on the first 32 held-out sequences (8 batches of 4).
Same seed, initialisation and data order for every run (torch's generator, not clpipe's
Philox: the absolute losses are of this setup, not clpipe's).

Optimizers: AdamW (betas 0.9, 0.95, eps 1e-8, weight decay 0.1 on matrices and embeddings, none
on norms and biases: clpipe's defaults) on everything; Shampoo (pytorch_optimizer.Shampoo,
weight_decay 0.1, weight_decouple, momentum 0, roots every step, matrix_eps 1e-6: clpipe's
settings) or SOAP (pytorch_optimizer.SOAP with its defaults: betas (0.95, 0.95), weight decay
0.01, precondition_frequency 10, eps 1e-8) on the layers' 2-D matrices (c_attn, attn c_proj,
c_fc, mlp c_proj: clpipe's Shampoo/Muon tensors), AdamW at 3e-3 for the rest; "soapall" gives
SOAP every parameter instead (as its reference does: embeddings and the tied head too, 1-D
tensors Adam-like). Each optimizer's lr follows the schedule
scaled by lr(step) / optim.lr, as clpipe's muon.lr and shampoo.lr do.

Usage: python tools/soap_vs_shampoo.py [--corpus F] [--steps 120] [--target 3.0]
       [--runs adamw:1e-3,adamw:3e-3,shampoo:0.03,shampoo:0.1,shampoo:0.3,soap:1e-3,soap:3e-3,
               soap:1e-2,soap:3e-2,soapall:3e-3,soapall:1e-2,soapall:3e-2,soapall:0.1]
       (the default; ~7 minutes on 2 cores, most of it Shampoo's SVDs)
Prints one JSON line per run and a Markdown table.
"""
import argparse
import json
import math
import time

import torch
import transformers
import pytorch_optimizer
from importlib.metadata import version

T, BATCH, MICRO, WARM, MIN_LR, BASE_LR, SEED = 64, 4, 4, 20, 3e-4, 3e-3, 1337
VAL_FRAC, EVAL_EVERY, EVAL_BATCHES = 0.05, 10, 8


def load(path):
    data = open(path, "rb").read()
    tok = torch.tensor(list(data), dtype=torch.long)
    n = tok.numel()
    nval = max(math.ceil(VAL_FRAC * n), T + 1)
    train, val = tok[: n - nval], tok[n - nval:]
    return train, val


def seqs(split, idx):
    """Sequences idx (tensor of indices) of a split: inputs and targets, (len(idx), T)."""
    off = idx[:, None] * T + torch.arange(T + 1)[None, :]
    s = split[off]
    return s[:, :-1], s[:, 1:]


def lr_at(step, steps, lr):
    if step < WARM:
        return lr * (step + 1) / WARM
    p = min(1.0, (step - WARM) / (steps - WARM - 1))
    return MIN_LR + 0.5 * (lr - MIN_LR) * (1 + math.cos(math.pi * p))


def model():
    torch.manual_seed(SEED)
    cfg = transformers.GPT2Config(vocab_size=257, n_positions=T, n_embd=64, n_layer=4, n_head=4,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                  bos_token_id=256, eos_token_id=256)
    return transformers.GPT2LMHeadModel(cfg)


def is_layer_matrix(name, p):
    return p.dim() == 2 and ".h." in name and name.endswith(".weight")


def optimizers(m, kind, lr):
    """[(optimizer, peak lr of each group)] and the schedule's optim.lr."""
    soap_all = kind == "soapall"
    kind = "soap" if soap_all else kind
    named = list(m.named_parameters())
    if kind == "adamw" or (kind == "soap" and soap_all):
        if kind == "soap":
            opt = pytorch_optimizer.SOAP([p for _, p in named], lr=lr)
            return [(opt, [lr])], lr
        decay = [p for n, p in named if p.dim() >= 2]
        rest = [p for n, p in named if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": rest, "weight_decay": 0.0}],
                                lr=lr, betas=(0.9, 0.95), eps=1e-8)
        return [(opt, [lr, lr])], lr
    mats = [p for n, p in named if is_layer_matrix(n, p)]
    others = [(n, p) for n, p in named if not is_layer_matrix(n, p)]
    decay = [p for n, p in others if p.dim() >= 2]
    rest = [p for n, p in others if p.dim() < 2]
    adam = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": rest, "weight_decay": 0.0}],
                             lr=BASE_LR, betas=(0.9, 0.95), eps=1e-8)
    if kind == "shampoo":
        pre = pytorch_optimizer.Shampoo(mats, lr=lr, momentum=0.0, weight_decay=0.1,
                                        weight_decouple=True, preconditioning_compute_steps=1,
                                        matrix_eps=1e-6)
    elif kind == "soap":
        pre = pytorch_optimizer.SOAP(mats, lr=lr)
    else:
        raise SystemExit(f"unknown optimizer {kind!r}: expected adamw, shampoo or soap")
    return [(adam, [BASE_LR, BASE_LR]), (pre, [lr])], BASE_LR


@torch.no_grad()
def evaluate(m, val):
    m.eval()
    idx = torch.arange(EVAL_BATCHES * BATCH)
    x, y = seqs(val, idx)
    tot = 0.0
    for b in range(EVAL_BATCHES):
        sl = slice(b * BATCH, (b + 1) * BATCH)
        logits = m(input_ids=x[sl]).logits
        tot += torch.nn.functional.cross_entropy(logits.reshape(-1, 257), y[sl].reshape(-1)).item()
    m.train()
    return tot / EVAL_BATCHES


def run(kind, lr, train, val, steps):
    m = model()
    opts, sched_lr = optimizers(m, kind, lr)
    g = torch.Generator().manual_seed(SEED)
    nseq = (train.numel() - 1) // T
    order = torch.randperm(nseq, generator=g)
    pos = 0
    evals, step_s = [], 0.0
    for step in range(steps):
        t0 = time.perf_counter()
        f = lr_at(step, steps, sched_lr) / sched_lr
        for opt, peaks in opts:
            for grp, peak in zip(opt.param_groups, peaks):
                grp["lr"] = peak * f
        for o, _ in opts:
            o.zero_grad(set_to_none=True)
        for _ in range(MICRO):
            if pos + BATCH > nseq:
                order, pos = torch.randperm(nseq, generator=g), 0
            x, y = seqs(train, order[pos:pos + BATCH])
            pos += BATCH
            logits = m(input_ids=x).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 257), y.reshape(-1))
            (loss / MICRO).backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        for o, _ in opts:
            o.step()
        step_s += time.perf_counter() - t0
        if (step + 1) % EVAL_EVERY == 0 or step + 1 == steps:
            evals.append((step + 1, evaluate(m, val)))
    return {"opt": kind, "lr": lr, "evals": evals,
            "step_seconds": round(step_s, 2)}


def first_at(evals, target):
    return next((s for s, v in evals if v <= target), None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=".cache/fortunes.txt")
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--target", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", default="adamw:1e-3,adamw:3e-3,shampoo:0.03,shampoo:0.1,"
                                      "shampoo:0.3,soap:1e-3,soap:3e-3,soap:1e-2,soap:3e-2,"
                                      "soapall:3e-3,soapall:1e-2,soapall:3e-2,soapall:0.1")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    train, val = load(a.corpus)
    print(f"# torch {torch.__version__}, transformers {transformers.__version__}, "
          f"pytorch-optimizer {version('pytorch-optimizer')}; corpus {a.corpus}: "
          f"{train.numel()} train / {val.numel()} val bytes; {a.threads} threads", flush=True)
    # warm-up (torch's first passes are slow): a few untimed steps, then the runs
    run("adamw", 1e-3, train, val, 3)
    results = []
    for spec in a.runs.split(","):
        kind, lr = spec.split(":")
        r = run(kind, float(lr), train, val, a.steps)
        print(json.dumps(r), flush=True)
        results.append(r)
    # the AdamW reference: the best AdamW's val at 100 steps (its step to 3.0 in clpipe)
    ref = None
    adams = [r for r in results if r["opt"] == "adamw"]
    if adams:
        best = min(adams, key=lambda r: r["evals"][-1][1])
        ref = dict(best["evals"]).get(100)
    second = (f"steps to val <= {ref:.4f} (best AdamW's at 100)" if ref is not None
              else "(no AdamW run of 100 steps)")
    print(f"\n| optimizer, lr | steps to val <= {a.target} | {second} | final val ({a.steps}) |"
          " seconds (loaded) |")
    print("|---|---|---|---|---|")
    names = {"adamw": "AdamW", "shampoo": "Shampoo", "soap": "SOAP",
             "soapall": "SOAP (all parameters)"}
    for r in results:
        s1 = first_at(r["evals"], a.target)
        s2 = first_at(r["evals"], ref) if ref is not None else None
        print(f"| {names[r['opt']]} {r['lr']:g} | {s1 or 'not reached'} | "
              f"{s2 or 'not reached'} | {r['evals'][-1][1]:.4f} | {r['step_seconds']:.1f} |")


if __name__ == "__main__":
    main()
