#!/usr/bin/env python3
"""The PyTorch half of tools/bench_train.sh: a GPT-2-shaped model (the same as clpipe's gpt2
preset: learned positions, pre-LayerNorm, tanh GELU, fused QKV, tied head) trained with AdamW on
random tokens, on the CPU with a given number of threads, in fp32 or (--autocast bf16) under
torch.autocast's bf16 with fp32 master weights. Prints one JSON line:
{"tok_s": median tokens/s, "steps": n, "act_bytes": ..., "version": ..., "threads": ...,
"blas": ...}. act_bytes: the bytes autograd saves for the backward in one forward (every saved
tensor's storage once, parameters and autocast's copies of them left out), measured on an
untimed step after the timed ones."""
import argparse
import json
import math
import re
import statistics
import time

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    C, L, H, T, V, B = a.d_model, a.layers, a.heads, a.ctx, a.vocab, a.batch
    p = {"wte": torch.randn(V, C) * 0.02, "wpe": torch.randn(T, C) * 0.01}
    for i in range(L):
        p[f"{i}.ln1w"], p[f"{i}.ln1b"] = torch.ones(C), torch.zeros(C)
        p[f"{i}.qkvw"], p[f"{i}.qkvb"] = torch.randn(C, 3 * C) * 0.02, torch.zeros(3 * C)
        p[f"{i}.ow"], p[f"{i}.ob"] = torch.randn(C, C) * 0.02, torch.zeros(C)
        p[f"{i}.ln2w"], p[f"{i}.ln2b"] = torch.ones(C), torch.zeros(C)
        p[f"{i}.fcw"], p[f"{i}.fcb"] = torch.randn(C, 4 * C) * 0.02, torch.zeros(4 * C)
        p[f"{i}.pw"], p[f"{i}.pb"] = torch.randn(4 * C, C) * 0.02, torch.zeros(C)
    p["lnfw"], p["lnfb"] = torch.ones(C), torch.zeros(C)
    for t in p.values():
        t.requires_grad_(True)

    def forward(tok):
        x = p["wte"][tok] + p["wpe"][:T]
        for i in range(L):
            h = F.layer_norm(x, (C,), p[f"{i}.ln1w"], p[f"{i}.ln1b"])
            q, k, v = (h @ p[f"{i}.qkvw"] + p[f"{i}.qkvb"]).split(C, -1)
            q, k, v = [z.view(B, T, H, C // H).transpose(1, 2) for z in (q, k, v)]
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + y.transpose(1, 2).reshape(B, T, C) @ p[f"{i}.ow"] + p[f"{i}.ob"]
            h = F.layer_norm(x, (C,), p[f"{i}.ln2w"], p[f"{i}.ln2b"])
            h = F.gelu(h @ p[f"{i}.fcw"] + p[f"{i}.fcb"], approximate="tanh")
            x = x + h @ p[f"{i}.pw"] + p[f"{i}.pb"]
        x = F.layer_norm(x, (C,), p["lnfw"], p["lnfb"])
        return x @ p["wte"].t()

    decay = [t for t in p.values() if t.dim() >= 2]
    nodecay = [t for t in p.values() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": nodecay, "weight_decay": 0.0}], lr=1e-4,
                            betas=(0.9, 0.95), eps=1e-8)
    def loss_of(tok, tg):
        if a.autocast == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                lg = forward(tok)
            return F.cross_entropy(lg.float().view(-1, V), tg.view(-1))
        return F.cross_entropy(forward(tok).view(-1, V), tg.view(-1))

    times = []
    for step in range(a.steps + 1):
        tok = torch.randint(0, V, (B, T))
        tg = torch.randint(0, V, (B, T))
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_of(tok, tg)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        if step > 0:  # the first step warms up allocators and threads
            times.append(dt)
    # activation memory: what autograd keeps for the backward of one step
    pshapes = {tuple(t.shape) for t in p.values()} | {tuple(t.t().shape) for t in decay}
    seen, act = set(), 0

    def pack(x):
        nonlocal act
        key = (x.untyped_storage().data_ptr(), x.untyped_storage().nbytes())
        if tuple(x.shape) not in pshapes and key not in seen:
            seen.add(key)
            act += key[1]
        return x

    opt.zero_grad(set_to_none=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        loss = loss_of(torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T)))
    loss.backward()
    cfg = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", cfg)
    print(json.dumps({"tok_s": B * T / statistics.median(times), "steps": len(times),
                      "spread_tok_s": [B * T / max(times), B * T / min(times)],
                      "version": torch.__version__, "threads": torch.get_num_threads(),
                      "blas": blas.group(1) if blas else "?",
                      "params": sum(t.numel() for t in p.values()),
                      "act_bytes": act, "autocast": a.autocast,
                      "loss": float(loss.detach())}))


if __name__ == "__main__":
    main()
