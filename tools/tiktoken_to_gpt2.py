#!/usr/bin/env python3
"""Rebuild GPT-2's vocab.json and merges.txt from a tiktoken ranks file (gpt2.tiktoken /
r50k_base: one "base64(token bytes) rank" per line).

Why: the build machines have no network but can reach PyPI, and the one GPT-2 vocabulary on
PyPI is openai-whisper's whisper/assets/gpt2.tiktoken (sha256 306cd27f...dd930, the same file
tiktoken fetches as r50k_base). tiktoken itself made those ranks from the released files: ranks
0..255 are the single bytes in GPT-2's byte-to-unicode order, and rank 256 + i is the result of
merge i. So the conversion is exact: a token's merge is the last pair byte-level BPE joins when
it encodes the token's own bytes with the ranks below it.

usage: tiktoken_to_gpt2.py gpt2.tiktoken OUTDIR
"""
import base64
import json
import os
import sys


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character table (encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def last_merge(ranks, token, rank):
    """The pair byte-level BPE merges last when encoding token with the ranks below rank."""
    parts = [bytes([b]) for b in token]
    while True:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < rank and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    if len(parts) != 2:
        raise ValueError("token of rank %d is not one merge of two lower ranks" % rank)
    return parts


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ranks = {}
    with open(sys.argv[1], "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    order = sorted(ranks.items(), key=lambda kv: kv[1])
    if [r for _, r in order] != list(range(len(order))):
        sys.exit("%s: ranks are not 0..%d" % (sys.argv[1], len(order) - 1))
    b2u = bytes_to_unicode()
    for i, (tok, _) in enumerate(order[:256]):
        if len(tok) != 1 or b2u[tok[0]] != list(b2u.values())[i]:
            sys.exit("%s: ranks 0..255 are not the bytes in GPT-2's order" % sys.argv[1])
    text = lambda b: "".join(b2u[x] for x in b)
    vocab = {text(tok): r for tok, r in order}
    vocab["<|endoftext|>"] = len(order)
    os.makedirs(sys.argv[2], exist_ok=True)
    with open(os.path.join(sys.argv[2], "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(sys.argv[2], "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for tok, r in order[256:]:
            a, b = last_merge(ranks, tok, r)
            f.write("%s %s\n" % (text(a), text(b)))
    print("%s: %d tokens + <|endoftext|>, %d merges" % (sys.argv[2], len(order),
                                                         len(order) - 256))


if __name__ == "__main__":
    main()
