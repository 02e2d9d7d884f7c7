#!/usr/bin/env python3
"""Fixture for `clpipe train --init` and eval of a base model (tests/hf/test_hf_init.sh):

    tests/hf/fixtures/bert_base/config.json, model.safetensors, vocab.txt

A BertModel directory as BertModel.save_pretrained writes it, made from the BertForMaskedLM
fixture (tests/hf/fixtures/bert, written by transformers 5.24.0): the encoder's tensors without
the "bert." prefix, no masked-LM head ("cls.*"), plus the pooler (pooler.dense.weight, .bias,
which clpipe does not use) and "architectures": ["BertModel"]. vocab.txt is a WordPiece
vocabulary of exactly the model's 264 entries ([PAD] [UNK] [CLS] [SEP] [MASK], characters,
"##" continuations, a few words), so the directory brings its own tokenizer.

Pure Python (no torch): run by hand, then commit the fixture.
    python3 tests/hf/make_init_fixtures.py
With transformers installed, --check loads the directory with BertModel.from_pretrained and
asserts that no tensor is missing or unexpected (the layout is BertModel's)."""
import json
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "fixtures", "bert")
OUT = os.path.join(HERE, "fixtures", "bert_base")


def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        data = f.read()
    h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in h.items()}


def write_st(path, tensors):
    h, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for k in sorted(tensors):
        dt, shape, b = tensors[k]
        h[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    t = json.dumps(h, separators=(",", ":")).encode()
    t += b" " * (-len(t) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(t)) + t + b"".join(blobs))


def vocab(n):
    v = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("0123456789")
    chars += list(".,;:!?'\"()-&$%*/")
    v += chars + ["##" + c for c in chars[:36]]
    words = ["the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for",
             "on", "are", "as", "with", "his", "they", "at", "be", "this", "have", "from",
             "or", "one", "had", "by", "but", "not", "what", "all", "were", "we", "when",
             "your", "can", "said", "there", "use", "an", "each", "which", "she", "do", "how",
             "their", "if", "will", "up", "other", "about", "out", "many", "then", "them",
             "these", "so", "some", "her", "would", "make", "like", "him", "into", "time",
             "has", "look", "two", "more", "go", "see", "no", "way", "could", "my", "than",
             "first", "been", "who", "its", "now", "people", "me", "man", "life", "love",
             "never", "good", "world", "day", "only", "us", "any", "know", "work", "may",
             "##s", "##ed", "##ing", "##er", "##ly", "##es", "##en", "##al", "##ion", "##th",
             "##re", "##in", "##on", "##an", "##or", "##ar", "##le", "##st", "##nd", "##te",
             "##ou", "##it", "##is", "##at", "##ve", "##ne", "##ll", "##ic", "##ri", "##ce"]
    v += [w for w in words if w not in v]
    assert len(v) == len(set(v)) and len(v) <= n, len(v)
    rng = random.Random(0)
    while len(v) < n:  # fill with unused pieces up to the model's vocabulary
        w = "##" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3))
        if w not in v:
            v.append(w)
    return v


def main():
    cfg = json.load(open(os.path.join(SRC, "config.json")))
    cfg["architectures"] = ["BertModel"]
    src = read_st(os.path.join(SRC, "model.safetensors"))
    out = {k[len("bert."):]: v for k, v in src.items() if k.startswith("bert.")}
    C = cfg["hidden_size"]
    rng = random.Random(1)
    w = struct.pack(f"<{C * C}f", *[rng.gauss(0, 0.3) for _ in range(C * C)])
    out["pooler.dense.weight"] = ("F32", [C, C], w)
    out["pooler.dense.bias"] = ("F32", [C], struct.pack(f"<{C}f", *[0.0] * C))
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    write_st(os.path.join(OUT, "model.safetensors"), out)
    with open(os.path.join(OUT, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab(cfg["vocab_size"])) + "\n")
    print(f"{OUT}: {len(out)} tensors")
    if "--check" in sys.argv:
        from transformers import BertModel
        _, info = BertModel.from_pretrained(OUT, output_loading_info=True)
        assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
        print("BertModel.from_pretrained: no missing, unexpected or mismatched tensors")


if __name__ == "__main__":
    main()
