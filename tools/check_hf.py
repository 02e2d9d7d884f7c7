"""Live comparison of clpipe with the installed Hugging Face transformers, both ways (run by
tools/check_hf.sh, which names the python and clpipe).

In: fresh random models of every family and layout, written by save_pretrained, evaluated by
`clpipe eval --ckpt DIR --json` with no --model flags; transformers' loss on the very batch clpipe
evaluated (its eval.dump) must agree within 1e-5 relative, and `clpipe sample --temperature 0`
must print the tokens of transformers' greedy generate().
Out: clpipe trains each family a few steps; transformers' from_pretrained(step directory) must
load every weight (no missing or unexpected keys) and give clpipe eval's loss and greedy tokens.
Export: `clpipe export --dtype bf16` (and fp16 for GPT-2) of each of those checkpoints must load
with from_pretrained in that dtype, every weight equal to torch's rounding of the fp32 one.
Prints one line per check and a summary; exits 1 on any mismatch."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
import transformers
from transformers import (AutoModelForCausalLM, BertConfig, BertForMaskedLM, GPT2Config,
                          GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM)

CLPIPE = sys.argv[1]
CORPUS = sys.argv[2]
TOL = 1e-5
failures = []


def run(args, prefix=()):
    r = subprocess.run(list(prefix) + [CLPIPE] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if r.returncode:
        sys.exit(f"clpipe {' '.join(args)} failed:\n{r.stderr.decode()}")
    return r.stdout


def hf_loss(m, dump):
    x, y = torch.tensor(dump["inputs"]), torch.tensor(dump["targets"])
    with torch.no_grad():
        lg = m(x).logits
    return torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]).double(), y.reshape(-1),
                                             ignore_index=-1).item()


def compare(label, d, m, work, causal, seq):
    dump_path = os.path.join(work, "dump.json")
    got = json.loads(run(["eval", "--ckpt", d, "--data", CORPUS, "--eval.batches=0",
                          "--train.batch=4", f"--train.seq={seq}", "--json",
                          "--eval.dump=" + dump_path]))
    with open(dump_path) as f:
        dump = json.load(f)
    want = hf_loss(m, dump)
    rel = abs(got["loss"] - want) / want
    ok = rel <= TOL
    print(f"{'ok  ' if ok else 'FAIL'} {label:34s} loss clpipe {got['loss']:.8f} transformers "
          f"{want:.8f} rel {rel:.1e} ({got['tokens']} tokens)")
    if not ok:
        failures.append(label)
    if not causal:
        return
    prompt = b"The "
    n = 12
    text = run(["sample", "--ckpt", d, "--prompt", prompt.decode(), "--temperature", "0",
                "--length", str(n)])
    ids = torch.tensor([list(prompt)])
    with torch.no_grad():
        out = m.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                         min_new_tokens=n, do_sample=False, pad_token_id=0)
    toks = out[0, len(prompt):].tolist()
    if 256 in toks:
        print(f"skip {label:34s} greedy: <|endoftext|> among {toks}")
        return
    # ids past the byte tokenizer's 257 print nothing: compare the bytes that are printed
    ok = text == prompt + bytes(t for t in toks if t < 256) + b"\n"
    print(f"{'ok  ' if ok else 'FAIL'} {label:34s} greedy sample = generate(): {toks}")
    if not ok:
        failures.append(label + " greedy")


def randomize(m):
    torch.manual_seed(0)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    return m


def hf_to_clpipe(work):
    V, T = 300, 64
    cases = [
        ("GPT2LMHeadModel", lambda: GPT2LMHeadModel(GPT2Config(
            vocab_size=V, n_positions=T, n_embd=32, n_layer=2, n_head=4, initializer_range=0.2,
            bos_token_id=None, eos_token_id=None)), {}, True),
        ("GPT2LMHeadModel f16", lambda: GPT2LMHeadModel(GPT2Config(
            vocab_size=V, n_positions=T, n_embd=32, n_layer=2, n_head=4, initializer_range=0.2,
            bos_token_id=None, eos_token_id=None)), {"dtype": torch.float16}, True),
        ("LlamaForCausalLM GQA eps1e-5 th5e5", lambda: LlamaForCausalLM(LlamaConfig(
            vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=T,
            rms_norm_eps=1e-5, rope_theta=500000.0, initializer_range=0.2,
            bos_token_id=None, eos_token_id=None)), {}, True),
        ("LlamaForCausalLM tied", lambda: LlamaForCausalLM(LlamaConfig(
            vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=T,
            tie_word_embeddings=True, initializer_range=0.2, bos_token_id=None,
            eos_token_id=None)), {}, True),
        ("LlamaForCausalLM bf16 sharded", lambda: LlamaForCausalLM(LlamaConfig(
            vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=T,
            initializer_range=0.2, bos_token_id=None, eos_token_id=None)),
         {"dtype": torch.bfloat16, "max_shard_size": "20KB"}, True),
        ("BertForMaskedLM", lambda: BertForMaskedLM(BertConfig(
            vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=T, initializer_range=0.2)), {}, False),
    ]
    for i, (label, make, how, causal) in enumerate(cases):
        torch.manual_seed(i)
        m = randomize(make())
        d = os.path.join(work, f"hf{i}")
        if "dtype" in how:
            m = m.to(how["dtype"])
        m.save_pretrained(d, **({"max_shard_size": how["max_shard_size"]}
                                if "max_shard_size" in how else {}))
        ref = type(m).from_pretrained(d, dtype=torch.float32).eval()
        compare("in:  " + label, d, ref, work, causal, T)


def clpipe_to_hf(work):
    common = ["--data", CORPUS, "--model.n_layer=2", "--model.d_model=32", "--model.n_head=4",
              "--model.ctx=64", "--train.batch=4", "--train.steps=5", "--eval.every=0",
              "--eval.batches=1", "--optim.warmup=0", "--optim.lr=3e-3"]
    cases = [("gpt2", ["--model.preset=gpt2"], True),
             ("llama GQA", ["--model.preset=llama", "--model.n_kv_head=2",
                            "--model.norm_eps=1e-5", "--model.rope_theta=500000"], True),
             ("llama tied", ["--model.preset=llama", "--model.tie_embeddings=true"], True),
             ("bert", ["--model.preset=bert"], False)]
    mpirun = shutil.which("mpirun")
    if mpirun:  # two pipeline stages: two model files and the weight map
        cases.append(("gpt2 2 stages (mpirun)", ["--model.preset=gpt2", "--pipeline.stages=2"],
                      True))
    for i, (label, args, causal) in enumerate(cases):
        ck = os.path.join(work, f"ck{i}")
        prefix = ([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2"]
                  if "mpirun" in label else [])
        run(["train"] + common + args + ["--ckpt.dir=" + ck], prefix)
        step = os.path.join(ck, "step-00000005")
        cls = AutoModelForCausalLM if causal else BertForMaskedLM
        m, info = cls.from_pretrained(step, output_loading_info=True)
        missing = [k for k in info["missing_keys"]]
        unexpected = [k for k in info["unexpected_keys"]]
        ok = not missing and not unexpected and not info.get("mismatched_keys")
        print(f"{'ok  ' if ok else 'FAIL'} out: {label:29s} {cls.__name__}.from_pretrained: "
              f"{type(m).__name__}, missing {missing}, unexpected {unexpected}")
        if not ok:
            failures.append("out: " + label + " load")
        compare("out: " + label, step, m.eval(), work, causal, 64)
        for dt in ["bf16", "fp16"] if label == "gpt2" else ["bf16"]:
            check_export(label, step, m, cls, dt, os.path.join(work, f"ex{i}{dt}"))


def check_export(label, step, m32, cls, dt, out):
    """clpipe export: a 16-bit model directory transformers loads in that dtype, every weight
    torch's rounding (to nearest even, as cl/base/half.h) of the fp32 checkpoint's."""
    want = {"bf16": torch.bfloat16, "fp16": torch.float16}[dt]
    run(["export", "--dtype", dt, step, out])
    m, info = cls.from_pretrained(out, output_loading_info=True)
    p16, p32 = dict(m.named_parameters()), dict(m32.named_parameters())
    bad = [k for k, v in p32.items()
           if k not in p16 or p16[k].dtype != want or not torch.equal(v.detach().to(want),
                                                                       p16[k].detach())]
    ok = (not bad and not info["missing_keys"] and not info["unexpected_keys"]
          and m.dtype == want)
    print(f"{'ok  ' if ok else 'FAIL'} export: {label:26s} {dt}: {cls.__name__} in {m.dtype}, "
          f"{len(p16)} weights, differing from torch's rounding: {bad}")
    if not ok:
        failures.append(f"export: {label} {dt}")


def main():
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory(prefix="clpipe-check-hf-") as work:
        hf_to_clpipe(work)
        clpipe_to_hf(work)
    print("check_hf: " + ("all agree" if not failures else "MISMATCH: " + ", ".join(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
