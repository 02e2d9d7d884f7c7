#!/usr/bin/env python3
"""Cross-check clpipe's tokenizers against Hugging Face `tokenizers` on random text and on
docs/*.md: the fixtures of tests/data/fixtures/tok (MiniLM's WordPiece by tokenizer.json and by
vocab.txt, byte-level BPE with GPT-2's, LLaMA-3's and Qwen2's pre-tokenisers, the last with
NFC) and a copy of the Qwen2 one without NFC and with ignore_merges. A developer tool, not part of ctest (it needs `tokenizers`). Usage, after building:
    /work/cache/tok-venv/bin/python tests/data/check_tok_hf.py [build-dir] [texts]
Each text is encoded by `clpipe tokenize --version 7` and by `tokenizers` (no special tokens
added, none matched); prints the first mismatch of each failing text (at most 10) and the
totals, and exits non-zero when any text differs. Byte-level BPE decodes are checked too."""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

from tokenizers import Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "data", "fixtures", "tok")
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
COUNT = int(sys.argv[2]) if len(sys.argv) > 2 else 300
CLPIPE = os.path.join(BUILD, "tools", "clpipe")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
         r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " " * 8 + "\n\t\r",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "'s 't 're 've 'm 'll 'd 'S 'T 'ſ",
    "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿÀÉÎÕÜßſİıŁł", "\u0300\u0301\u0302\u0308\u0327\u0331\u20dd",
    "中文字符日本語の漢字", "한국어테스트", "😀🎉👍🏽🥰🧑‍🚀❤️🇫🇷", "ΣΟΦΙΑσοφίαςΑΒΓ", "ПриветМир",
    "مرحبا", "नमस्ते", "สวัสดี", "\x00\x01\x07\x1b\x7f\u200b\u00ad\ufeff\u2028\u00a0\u3000",
    "①②½²Ⅻﬁǅ", "¹₂³⁴⅛",
]


def rand_text(rng):
    out = []
    for _ in range(rng.randint(1, 400)):
        if rng.random() < 0.05:
            cp = rng.randint(0x20, 0x2FFFF)
            if 0xD800 <= cp <= 0xDFFF:
                cp = 0x41
            out.append(chr(cp))
        else:
            pool = rng.choice(POOLS)
            out.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 12))))
    return "".join(out)


def clp_ids(tok_path, text, work):
    src = os.path.join(work, "in.txt")
    with open(src, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    shard = os.path.join(work, "out.bin")
    r = subprocess.run([CLPIPE, "tokenize", "--tokenizer", tok_path, "--version", "7",
                        "--out", shard, src], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stdout + r.stderr
    data = open(shard, "rb").read()
    n = struct.unpack("<3i", data[:12])[2]
    return list(struct.unpack(f"<{n}I", data[1024:1024 + 4 * n])), ""


def main():
    work = tempfile.mkdtemp(prefix="clp-tokhf-")
    j = json.load(open(os.path.join(FIX, "bpe_llama3", "tokenizer.json"), encoding="utf-8"))
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = QWEN2
    os.makedirs(os.path.join(work, "qwen2"))
    qpath = os.path.join(work, "qwen2", "tokenizer.json")
    json.dump(j, open(qpath, "w", encoding="utf-8"), ensure_ascii=False)
    toks = [("minilm", os.path.join(FIX, "minilm"),
             Tokenizer.from_file(os.path.join(FIX, "minilm", "tokenizer.json"))),
            ("minilm_vocab_txt", os.path.join(FIX, "minilm", "vocab.txt"),
             BertWordPieceTokenizer(os.path.join(FIX, "minilm", "vocab.txt"))._tokenizer),
            ("bpe_gpt2", os.path.join(FIX, "bpe_gpt2"),
             Tokenizer.from_file(os.path.join(FIX, "bpe_gpt2", "tokenizer.json"))),
            ("bpe_llama3", os.path.join(FIX, "bpe_llama3"),
             Tokenizer.from_file(os.path.join(FIX, "bpe_llama3", "tokenizer.json"))),
            ("bpe_qwen2_nfc", os.path.join(FIX, "bpe_qwen2"),
             Tokenizer.from_file(os.path.join(FIX, "bpe_qwen2", "tokenizer.json"))),
            ("bpe_qwen2_plain", qpath, Tokenizer.from_file(qpath))]
    for _, _, t in toks:
        t.encode_special_tokens = True
        t.no_truncation()
        t.no_padding()
    rng = random.Random(1)
    docs = "".join(open(os.path.join(ROOT, "docs", f), encoding="utf-8").read()
                   for f in sorted(os.listdir(os.path.join(ROOT, "docs"))) if f.endswith(".md"))
    texts = [docs] + [rand_text(rng) for _ in range(COUNT)]
    bad = 0
    ntok = 0
    for name, path, t in toks:
        fails = 0
        for k, text in enumerate(texts):
            want = t.encode(text, add_special_tokens=False).ids
            got, err = clp_ids(path, text, work)
            if got is None and not text:
                continue
            ntok += len(want)
            if got != want:
                fails += 1
                if fails <= 10:
                    if got is None:
                        print(f"{name} text {k}: clpipe failed: {err.strip()}")
                    else:
                        i = next((i for i in range(min(len(got), len(want)))
                                  if got[i] != want[i]), min(len(got), len(want)))
                        print(f"{name} text {k}: id {i}: clpipe {got[i:i + 5]} tokenizers "
                              f"{want[i:i + 5]} near {t.decode(want[max(0, i - 3):i + 3])!r}")
            elif name.startswith("bpe") and "nfc" not in name and t.decode(want, skip_special_tokens=False) != text:
                fails += 1
                print(f"{name} text {k}: tokenizers' decode is not the text")
        print(f"{name}: {len(texts) - fails} of {len(texts)} texts equal")
        bad += fails
    print(f"{ntok} tokens compared, {bad} texts differ")
    sys.exit(1 if bad else 0)


main()
