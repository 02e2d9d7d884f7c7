#!/usr/bin/python3
"""Golden fixtures for the model tests: tiny GPT-2, LLaMA (with GQA) and BERT written in plain
PyTorch, following Hugging Face's definitions (names, layouts, numerics), with fixed weights and
batch. For each model this writes tests/golden/<preset>.safetensors holding

  input.tokens, input.targets (I32; BERT adds input.types), the weights under their HF names,
  out.logits, out.loss, grad.<name> for every weight, and adamw.loss (the loss before each of
  10 AdamW steps on the same batch: lr 1e-3, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on
  tensors of 2+ dimensions only, global gradient-norm clipping at 1.0),

with the model config as JSON in the metadata. Run by hand (Debian's python3-torch):
    /usr/bin/python3 tests/golden/make_golden.py
The fixtures are committed; the C test (tests/model) compares loss, logits and every gradient.
Only the standard library and torch are used (the safetensors writer is below)."""
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)  # the reference runs in double; fixtures store fp32
HERE = os.path.dirname(os.path.abspath(__file__))


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata}
    blobs, off = [], 0
    for name, (dtype, t) in tensors.items():
        arr = t.detach().contiguous()
        if dtype == "F32":
            data = arr.to(torch.float32).numpy().tobytes()
        else:
            data = arr.to(torch.int32).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def init(shape, std=0.02):
    return (torch.randn(*shape) * std).requires_grad_(True)


def ones(n):
    return (1.0 + 0.1 * torch.randn(n)).requires_grad_(True)


def zeros(n):
    return (0.02 * torch.randn(n)).requires_grad_(True)


def layernorm(x, w, b, eps):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def attention(q, k, v, causal):
    # q (B,H,T,hd), k v (B,H,T,hd)
    hd = q.shape[-1]
    att = q @ k.transpose(-1, -2) / math.sqrt(hd)
    if causal:
        T = q.shape[2]
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf"))
    return torch.softmax(att, -1) @ v


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


# ---- GPT-2 ---------------------------------------------------------------------------------------
def gpt2_params(cfg):
    C, V, T, L = cfg["d_model"], cfg["vocab"], cfg["ctx"], cfg["n_layer"]
    p = {"wte.weight": init((V, C)), "wpe.weight": init((T, C), 0.01)}
    for i in range(L):
        h = f"h.{i}."
        p[h + "ln_1.weight"], p[h + "ln_1.bias"] = ones(C), zeros(C)
        p[h + "attn.c_attn.weight"], p[h + "attn.c_attn.bias"] = init((C, 3 * C)), zeros(3 * C)
        p[h + "attn.c_proj.weight"], p[h + "attn.c_proj.bias"] = init((C, C)), zeros(C)
        p[h + "ln_2.weight"], p[h + "ln_2.bias"] = ones(C), zeros(C)
        p[h + "mlp.c_fc.weight"], p[h + "mlp.c_fc.bias"] = init((C, cfg["d_ff"])), zeros(cfg["d_ff"])
        p[h + "mlp.c_proj.weight"], p[h + "mlp.c_proj.bias"] = init((cfg["d_ff"], C)), zeros(C)
    p["ln_f.weight"], p["ln_f.bias"] = ones(C), zeros(C)
    return p


def gpt2_forward(p, cfg, tok):
    B, T = tok.shape
    C, H, L, eps = cfg["d_model"], cfg["n_head"], cfg["n_layer"], cfg["norm_eps"]
    hd = C // H
    x = p["wte.weight"][tok] + p["wpe.weight"][:T]
    for i in range(L):
        h = f"h.{i}."
        a = layernorm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps)
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]  # Conv1D: (in, out)
        q, k, v = qkv.split(C, -1)
        q, k, v = [t.view(B, T, H, hd).transpose(1, 2) for t in (q, k, v)]
        y = attention(q, k, v, True).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        m = layernorm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps)
        m = gelu_tanh(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"])
        x = x + m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
    x = layernorm(x, p["ln_f.weight"], p["ln_f.bias"], eps)
    return x @ p["wte.weight"].t()  # tied head


# ---- LLaMA ---------------------------------------------------------------------------------------
def llama_params(cfg):
    C, V, L, H, KVH, Fd = cfg["d_model"], cfg["vocab"], cfg["n_layer"], cfg["n_head"], cfg["n_kv_head"], cfg["d_ff"]
    hd = C // H
    p = {"model.embed_tokens.weight": init((V, C))}
    for i in range(L):
        h = f"model.layers.{i}."
        p[h + "input_layernorm.weight"] = ones(C)
        p[h + "self_attn.q_proj.weight"] = init((H * hd, C))
        p[h + "self_attn.k_proj.weight"] = init((KVH * hd, C))
        p[h + "self_attn.v_proj.weight"] = init((KVH * hd, C))
        p[h + "self_attn.o_proj.weight"] = init((C, H * hd))
        p[h + "post_attention_layernorm.weight"] = ones(C)
        p[h + "mlp.gate_proj.weight"] = init((Fd, C))
        p[h + "mlp.up_proj.weight"] = init((Fd, C))
        p[h + "mlp.down_proj.weight"] = init((C, Fd))
    p["model.norm.weight"] = ones(C)
    p["lm_head.weight"] = init((V, C))
    return p


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


def llama_forward(p, cfg, tok):
    B, T = tok.shape
    C, H, KVH, L, eps = cfg["d_model"], cfg["n_head"], cfg["n_kv_head"], cfg["n_layer"], cfg["norm_eps"]
    hd = C // H
    # as Hugging Face computes it: inv_freq in fp32, angles, cos/sin
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    freqs = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq.to(torch.float32)[None, :]
    emb = torch.cat((freqs, freqs), -1)
    cos, sin = emb.cos().to(torch.float64), emb.sin().to(torch.float64)
    x = p["model.embed_tokens.weight"][tok]
    for i in range(L):
        h = f"model.layers.{i}."
        a = rmsnorm(x, p[h + "input_layernorm.weight"], eps)
        q = (a @ p[h + "self_attn.q_proj.weight"].t()).view(B, T, H, hd).transpose(1, 2)
        k = (a @ p[h + "self_attn.k_proj.weight"].t()).view(B, T, KVH, hd).transpose(1, 2)
        v = (a @ p[h + "self_attn.v_proj.weight"].t()).view(B, T, KVH, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KVH, 1)
        v = v.repeat_interleave(H // KVH, 1)
        y = attention(q, k, v, True).transpose(1, 2).reshape(B, T, H * hd)
        x = x + y @ p[h + "self_attn.o_proj.weight"].t()
        m = rmsnorm(x, p[h + "post_attention_layernorm.weight"], eps)
        g = F.silu(m @ p[h + "mlp.gate_proj.weight"].t()) * (m @ p[h + "mlp.up_proj.weight"].t())
        x = x + g @ p[h + "mlp.down_proj.weight"].t()
    x = rmsnorm(x, p["model.norm.weight"], eps)
    return x @ p["lm_head.weight"].t()


# ---- BERT ----------------------------------------------------------------------------------------
def bert_params(cfg):
    C, V, T, L, Fd = cfg["d_model"], cfg["vocab"], cfg["ctx"], cfg["n_layer"], cfg["d_ff"]
    e = "bert.embeddings."
    p = {e + "word_embeddings.weight": init((V, C)), e + "position_embeddings.weight": init((T, C)),
         e + "token_type_embeddings.weight": init((cfg["n_types"], C)),
         e + "LayerNorm.weight": ones(C), e + "LayerNorm.bias": zeros(C)}
    for i in range(L):
        h = f"bert.encoder.layer.{i}."
        for n in ("query", "key", "value"):
            p[h + f"attention.self.{n}.weight"], p[h + f"attention.self.{n}.bias"] = init((C, C)), zeros(C)
        p[h + "attention.output.dense.weight"], p[h + "attention.output.dense.bias"] = init((C, C)), zeros(C)
        p[h + "attention.output.LayerNorm.weight"], p[h + "attention.output.LayerNorm.bias"] = ones(C), zeros(C)
        p[h + "intermediate.dense.weight"], p[h + "intermediate.dense.bias"] = init((Fd, C)), zeros(Fd)
        p[h + "output.dense.weight"], p[h + "output.dense.bias"] = init((C, Fd)), zeros(C)
        p[h + "output.LayerNorm.weight"], p[h + "output.LayerNorm.bias"] = ones(C), zeros(C)
    t = "cls.predictions."
    p[t + "transform.dense.weight"], p[t + "transform.dense.bias"] = init((C, C)), zeros(C)
    p[t + "transform.LayerNorm.weight"], p[t + "transform.LayerNorm.bias"] = ones(C), zeros(C)
    p[t + "bias"] = zeros(V)  # the decoder's weight is tied to the word embeddings
    return p


def bert_forward(p, cfg, tok, types):
    B, T = tok.shape
    C, H, L, eps = cfg["d_model"], cfg["n_head"], cfg["n_layer"], cfg["norm_eps"]
    hd = C // H
    e = "bert.embeddings."
    x = p[e + "word_embeddings.weight"][tok] + p[e + "position_embeddings.weight"][:T] + \
        p[e + "token_type_embeddings.weight"][types]
    x = layernorm(x, p[e + "LayerNorm.weight"], p[e + "LayerNorm.bias"], eps)
    lin = lambda a, n: a @ p[n + ".weight"].t() + p[n + ".bias"]
    for i in range(L):
        h = f"bert.encoder.layer.{i}."
        q, k, v = [lin(x, h + f"attention.self.{n}").view(B, T, H, hd).transpose(1, 2) for n in ("query", "key", "value")]
        y = attention(q, k, v, False).transpose(1, 2).reshape(B, T, C)
        x = layernorm(x + lin(y, h + "attention.output.dense"), p[h + "attention.output.LayerNorm.weight"],
                      p[h + "attention.output.LayerNorm.bias"], eps)
        m = F.gelu(lin(x, h + "intermediate.dense"))  # exact (erf) GELU
        x = layernorm(x + lin(m, h + "output.dense"), p[h + "output.LayerNorm.weight"], p[h + "output.LayerNorm.bias"], eps)
    t = "cls.predictions."
    z = F.gelu(lin(x, t + "transform.dense"))
    z = layernorm(z, p[t + "transform.LayerNorm.weight"], p[t + "transform.LayerNorm.bias"], eps)
    return z @ p[e + "word_embeddings.weight"].t() + p[t + "bias"]


def loss_of(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)


def adamw_losses(params, fwd, targets, steps=10):
    opt_params = {n: t.detach().clone().requires_grad_(True) for n, t in params.items()}
    decay = [t for n, t in opt_params.items() if t.dim() >= 2]
    nodecay = [t for n, t in opt_params.items() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_of(fwd(opt_params), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(opt_params.values()), 1.0)
        opt.step()
        losses.append(loss.item())
    return torch.tensor(losses)


def make(preset, cfg):
    B, T, V = cfg["batch"], cfg["ctx"], cfg["vocab"]
    g = torch.Generator().manual_seed(1234)
    tok = torch.randint(0, V, (B, T), generator=g)
    extra = {}
    if preset == "bert":
        types = torch.randint(0, cfg["n_types"], (B, T), generator=g)
        targets = torch.full((B, T), -1, dtype=torch.int64)
        pick = torch.rand(B, T, generator=g) < 0.3
        targets[pick] = torch.randint(0, V, (int(pick.sum()),), generator=g)
        params = bert_params(cfg)
        fwd = lambda p: bert_forward(p, cfg, tok, types)
        extra["input.types"] = ("I32", types)
    else:
        targets = torch.randint(0, V, (B, T), generator=g)
        params = gpt2_params(cfg) if preset == "gpt2" else llama_params(cfg)
        fwd = (lambda p: gpt2_forward(p, cfg, tok)) if preset == "gpt2" else (lambda p: llama_forward(p, cfg, tok))
    # weights rounded to fp32 first, so C (fp32) and this reference start from the same numbers
    with torch.no_grad():
        for t in params.values():
            t.copy_(t.to(torch.float32).to(torch.float64))
    logits = fwd(params)
    loss = loss_of(logits, targets)
    loss.backward()
    out = {"input.tokens": ("I32", tok), "input.targets": ("I32", targets), **extra}
    for n, t in params.items():
        out[n] = ("F32", t)
    out["out.logits"] = ("F32", logits)
    out["out.loss"] = ("F32", loss.reshape(1))
    for n, t in params.items():
        out["grad." + n] = ("F32", t.grad)
    out["adamw.loss"] = ("F32", adamw_losses(params, fwd, targets))
    meta = {"config": json.dumps(cfg), "preset": preset, "torch": torch.__version__,
            "made_by": "tests/golden/make_golden.py"}
    path = os.path.join(HERE, preset + ".safetensors")
    write_safetensors(path, out, meta)
    print(f"{path}: loss {loss.item():.6f}, {len(params)} tensors")


CONFIGS = {
    "gpt2": dict(preset="gpt2", n_layer=2, d_model=32, n_head=4, n_kv_head=4, d_ff=128, vocab=67,
                 ctx=9, batch=2, norm_eps=1e-5),
    "llama": dict(preset="llama", n_layer=2, d_model=32, n_head=4, n_kv_head=2, d_ff=88, vocab=71,
                  ctx=9, batch=2, norm_eps=1e-6, rope_theta=10000.0),
    "bert": dict(preset="bert", n_layer=2, d_model=32, n_head=4, n_kv_head=4, d_ff=96, vocab=61,
                 ctx=9, batch=2, norm_eps=1e-12, n_types=2),
}

if __name__ == "__main__":
    for name in (sys.argv[1:] or CONFIGS):
        make(name, CONFIGS[name])
