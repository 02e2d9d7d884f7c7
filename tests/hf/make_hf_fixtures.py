#!/usr/bin/env python3
"""Fixtures for tests/hf: tiny random models written by Hugging Face transformers itself, one
directory per family and layout, each with what transformers computes on them.

    tests/hf/fixtures/<name>/config.json, model.safetensors (or shards + index), expect.json

expect.json holds the versions used, a batch (inputs, targets; -1 = no target), transformers'
mean cross-entropy on it, a greedy continuation of a prompt (argmax, as generate() without
sampling), and with --clpipe, `clpipe eval`'s evaluated batch of tests/hf/corpus.txt (from its
eval.dump) with transformers' loss on it, so the CLI is checked end to end without torch.

The models (vocabulary 264: the byte tokenizer's 256 bytes and specials fit; width 8):
  gpt2           GPT2LMHeadModel.save_pretrained: "transformer." names, F32
  gpt2_hub       the Hub's older GPT-2 layout: unprefixed names, F16, no n_inner
  gpt2_bpe       GPT2LMHeadModel with a tiny byte-level BPE (vocab.json, merges.txt: 256
                 bytes, 8 merges, <|endoftext|>), which clpipe then uses as its tokenizer
  llama          LlamaForCausalLM, GQA (2 heads, 1 key/value head), untied lm_head,
                 rms_norm_eps 1e-5 and rope_theta 500000 (not the defaults), F32
  llama_tied     tie_word_embeddings = true (no lm_head.weight in the file), F32
  llama_sharded  BF16, sharded (model-0000x-of-0000y.safetensors + index json)
  bert           BertForMaskedLM: "bert." and "cls." names, F32

Made with (run by hand, then commit the fixtures):
    python3 -m venv .cache/hf-venv && .cache/hf-venv/bin/pip install torch transformers
    .cache/hf-venv/bin/python tests/hf/make_hf_fixtures.py --clpipe build/tools/clpipe
Written with transformers 5.24.0, torch 2.15.0, safetensors 0.8.0 (recorded in expect.json)."""
import argparse
import json
import os
import shutil
import subprocess
import sys

import safetensors
import torch
import transformers
from safetensors.torch import save_file
from transformers import (BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel,
                          GPT2TokenizerFast, LlamaConfig, LlamaForCausalLM)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")
V, T, B = 264, 16, 2
MASK = 259  # any id: the batch is given, clpipe does not mask it


def gpt2(seed):
    torch.manual_seed(seed)
    c = GPT2Config(vocab_size=V, n_positions=T, n_embd=8, n_layer=2, n_head=2,
                   initializer_range=0.3, bos_token_id=None, eos_token_id=None)
    return GPT2LMHeadModel(c)


def bytes_to_unicode():
    """GPT-2's byte -> printable character map (vocab.json and merges.txt spell bytes so)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
          + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


MERGES = [("\u0120", "t"), ("h", "e"), ("\u0120t", "he"), ("i", "n"), ("\u0120", "a"), ("o", "f"),
          ("\u0120", "o"), ("\u0120o", "f")]


def bpe_vocab():
    m = bytes_to_unicode()
    vocab = {m[b]: b for b in range(256)}
    for a, b in MERGES:
        vocab[a + b] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return vocab


def write_bpe(d):
    with open(os.path.join(d, "vocab.json"), "w") as f:
        json.dump(bpe_vocab(), f)
    with open(os.path.join(d, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in MERGES))


def token_bytes(ids, vocab=None):
    """What clpipe sample prints for ids: their bytes (nothing for ids past the vocabulary)."""
    if vocab is None:
        return b"".join(bytes([i]) for i in ids if i < 256)
    inv, u2b = {v: k for k, v in vocab.items()}, {c: b for b, c in bytes_to_unicode().items()}
    return b"".join(bytes(u2b[c] for c in inv[i]) for i in ids if i in inv and inv[i] != "<|endoftext|>")


def gpt2_bpe(seed):
    torch.manual_seed(seed)
    v = len(bpe_vocab())
    c = GPT2Config(vocab_size=v, n_positions=T, n_embd=8, n_layer=2, n_head=2,
                   initializer_range=0.3, bos_token_id=v - 1, eos_token_id=v - 1)
    return GPT2LMHeadModel(c)


def llama(seed, tied, **kw):
    torch.manual_seed(seed)
    c = LlamaConfig(vocab_size=V, hidden_size=8, intermediate_size=24, num_hidden_layers=2,
                    num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=T,
                    initializer_range=0.3, tie_word_embeddings=tied, bos_token_id=None,
                    eos_token_id=None, **kw)
    return LlamaForCausalLM(c)


def bert(seed):
    torch.manual_seed(seed)
    c = BertConfig(vocab_size=V, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=32, max_position_embeddings=T, initializer_range=0.3)
    return BertForMaskedLM(c)


def randomize_norms(m):
    """LayerNorm/RMSNorm weights and biases start at 1 and 0: make them matter."""
    with torch.no_grad():
        for n, p in m.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))


def save(name, m, dtype=None, shard=None, hub=False, bpe=False):
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    if dtype is not None:
        m = m.to(dtype)
    if hub:  # GPT-2 as the Hub has it: GPT2Model's names, n_inner absent
        os.makedirs(d)
        sd = {k[len("transformer."):]: v.contiguous() for k, v in m.state_dict().items()
              if k.startswith("transformer.") and not k.endswith(".attn.bias")
              and not k.endswith(".attn.masked_bias")}
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        cfg = m.config.to_dict()
        cfg.pop("n_inner", None)
        cfg["architectures"] = ["GPT2LMHeadModel"]
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
    else:
        kw = {"max_shard_size": shard} if shard else {}
        m.save_pretrained(d, **kw)
    if bpe:
        write_bpe(d)
    for extra in ("generation_config.json",):
        p = os.path.join(d, extra)
        if os.path.exists(p):
            os.remove(p)
    return d


def reference(d, cls):
    """The model as transformers loads it from the directory, in float32."""
    m = cls.from_pretrained(d, dtype=torch.float32)
    return m.eval()


def ce(logits, targets):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                                             targets.reshape(-1), ignore_index=-1).item()


def greedy(m, prompt, n):
    ids = torch.tensor([prompt])
    gaps = []
    for _ in range(n):
        with torch.no_grad():
            lg = m(ids).logits[0, -1]
        top = torch.topk(lg, 2).values
        gaps.append((top[0] - top[1]).item())
        ids = torch.cat([ids, lg.argmax().view(1, 1)], 1)
    return ids[0, len(prompt):].tolist(), min(gaps)


def batch(causal, seed):
    g = torch.Generator().manual_seed(seed)
    if causal:
        x = torch.randint(0, V, (B, T + 1), generator=g)
        return x[:, :T], x[:, 1:].clone()
    x = torch.randint(5, V, (B, T), generator=g)
    chosen = torch.rand(B, T, generator=g) < 0.3
    tg = torch.where(chosen, x, torch.full_like(x, -1))
    return torch.where(chosen, torch.full_like(x, MASK), x), tg


def clpipe_eval(clpipe, d, dump):
    corpus = os.path.join(HERE, "corpus.txt")
    subprocess.run([clpipe, "eval", "--ckpt", d, "--data", corpus, "--eval.batches=0",
                    "--train.batch=2", "--eval.dump=" + dump, "--json"], check=True,
                   stdout=subprocess.PIPE)
    with open(dump) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clpipe", help="a built clpipe: record its eval batch of corpus.txt")
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    models = [
        ("gpt2", lambda: gpt2(1), {}, GPT2LMHeadModel, True),
        ("gpt2_hub", lambda: gpt2(2), {"dtype": torch.float16, "hub": True}, GPT2LMHeadModel,
         True),
        ("gpt2_bpe", lambda: gpt2_bpe(7), {"bpe": True}, GPT2LMHeadModel, True),
        ("llama", lambda: llama(3, False, rms_norm_eps=1e-5, rope_theta=500000.0), {},
         LlamaForCausalLM, True),
        ("llama_tied", lambda: llama(4, True), {}, LlamaForCausalLM, True),
        ("llama_sharded", lambda: llama(5, False), {"dtype": torch.bfloat16, "shard": "4KB"},
         LlamaForCausalLM, True),
        ("bert", lambda: bert(6), {}, BertForMaskedLM, False),
    ]
    for i, (name, make, how, cls, causal) in enumerate(models):
        m = make()
        randomize_norms(m)
        d = save(name, m, **how)
        ref = reference(d, cls)
        vocab = bpe_vocab() if how.get("bpe") else None
        x, y = batch(causal, 100 + i)
        if vocab:
            x, y = x % len(vocab), y % len(vocab)
        with torch.no_grad():
            loss = ce(ref(x).logits, y)
        e = {"versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                          "safetensors": safetensors.__version__},
             "class": cls.__name__, "inputs": x.tolist(), "targets": y.tolist(), "loss": loss}
        if causal:
            prompt = [84, 104, 101, 32]  # "The " in bytes
            if vocab:
                prompt = GPT2TokenizerFast(vocab=vocab, merges=MERGES).encode("The ")
            toks, gap = greedy(ref, prompt, 8)
            if gap < 1e-3:
                sys.exit(f"{name}: greedy tokens nearly tie (gap {gap:.2e}): change the seed")
            e["greedy"] = {"prompt": prompt, "tokens": toks, "min_gap": gap,
                           "text_hex": (b"The " + token_bytes(toks, vocab)).hex()}
        if a.clpipe:
            dump = clpipe_eval(a.clpipe, d, os.path.join(OUT, name + ".dump.json"))
            os.remove(os.path.join(OUT, name + ".dump.json"))
            xi, yt = torch.tensor(dump["inputs"]), torch.tensor(dump["targets"])
            if vocab:  # clpipe tokenized the corpus with the directory's BPE, as transformers
                tok = GPT2TokenizerFast(vocab=vocab, merges=MERGES)
                text = open(os.path.join(HERE, "corpus.txt")).read()
                rows = [tok.decode(r) for r in dump["inputs"]]
                assert all(r in text for r in rows), rows
                assert len(dump["inputs"][0]) == T and max(max(r) for r in dump["inputs"]) >= 256
            with torch.no_grad():
                e["eval"] = {"corpus": "corpus.txt", "batch": 2, "tokens": int((yt >= 0).sum()),
                             "loss": ce(ref(xi).logits, yt), "clpipe_loss": dump["loss"]}
        with open(os.path.join(d, "expect.json"), "w") as f:
            json.dump(e, f)
            f.write("\n")
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        print(f"{name:14s} {cls.__name__:17s} loss {loss:.6f} {size} bytes "
              f"{sorted(os.listdir(d))}")


if __name__ == "__main__":
    main()
