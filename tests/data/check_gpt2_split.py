#!/usr/bin/env python3
"""Cross-check clpipe's hand-written GPT-2 pre-tokeniser against the real regex (Python's
`regex` module, which GPT-2's encoder.py uses) on random strings. A developer tool, not part of
ctest (it needs the `regex` package). Usage, after building:
    python3 tests/data/check_gpt2_split.py [build-dir] [count]
Prints the mismatches (at most 10) and exits non-zero when there are any."""
import os
import random
import struct
import subprocess
import sys
import tempfile

import regex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
COUNT = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
DRIVER = r"""
#include <stdio.h>
#include "engine/data/tokenizer.h"
int main(void) {
	unsigned len;
	static char buf[1 << 16];
	while (fread(&len, 4, 1, stdin) == 1 && fread(buf, 1, len, stdin) == len) {
		for (size_t i = 0; i < len;) {
			size_t e = clp_tok_gpt2_split(buf, len, i);
			printf("%zu ", e);
			i = e;
		}
		printf("\n");
	}
	return 0;
}
"""
ALPHABET = list("aZ09 '\t\n\r.,!?-_sStTrRevdml") + [
    "é", "ß", "日", "本", "٣", "\u0301", "\u00a0", "\u2003", "Ω", "²", "½", "\u3000",
    "\u0085", "👍", "ǅ", "ー", "\u200b", "\u2028"]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "drv.c"), os.path.join(tmp, "drv")
        with open(src, "w") as f:
            f.write(DRIVER)
        subprocess.run(["cc", "-I", ROOT, src, os.path.join(BUILD, "engine/libclp_engine.a"),
                        os.path.join(BUILD, "cl/libclp_cl.a"), "-ljansson", "-lm",
                        "-lpthread", "-o", exe], check=True)
        random.seed(1)
        strs = ["".join(random.choice(ALPHABET) for _ in range(random.randint(1, 25)))
                for _ in range(COUNT)]
        data = b"".join(struct.pack("<I", len(s.encode())) + s.encode() for s in strs)
        out = subprocess.run([exe], input=data, capture_output=True, check=True)
    bad = 0
    for s, line in zip(strs, out.stdout.decode().splitlines()):
        want, pos = [], 0
        for m in PATTERN.findall(s):
            pos += len(m.encode())
            want.append(pos)
        got = [int(x) for x in line.split()]
        if got != want:
            bad += 1
            if bad <= 10:
                print(repr(s), "clpipe", got, "regex", want)
    print(f"{bad} mismatches in {len(strs)} strings")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
