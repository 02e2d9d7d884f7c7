#!/usr/bin/env bash
# GPT-2's real tokenizer files, checked by hand (not part of the tests: it needs PyPI).
#
# No Debian package ships GPT-2's vocab.json/merges.txt and the machines reach no network but
# PyPI, where the one copy is openai-whisper's whisper/assets/gpt2.tiktoken - the file tiktoken
# downloads as r50k_base (its sha256 is checked below). This script
#   1. downloads that sdist and rebuilds vocab.json and merges.txt from it
#      (tools/tiktoken_to_gpt2.py; exact, see its docstring),
#   2. runs test_data_gpt2_real on them (known ids: "Hello world" -> 15496 995),
#   3. encodes a corpus with `clpipe tokenize --tokenizer gpt2 --eot` and with tiktoken
#      (pip, into .cache/gpt2-venv; r50k_base's pattern on the same ranks), file by file, and
#      compares every token, then decodes the shard back and compares the bytes.
#
#   tools/check_gpt2_real.sh [FILE...]    # default: every file of the fortunes package
# Leaves the files in .cache/gpt2 (CLPIPE_GPT2_DIR=.cache/gpt2 for the ctest test).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
. "$root/tools/env.sh"
cd "$root"
build_tree "$root/build"
clpipe=$root/build/tools/clpipe
dir=.cache/gpt2
want=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930
mkdir -p "$dir"
if [ ! -s "$dir/merges.txt" ]; then
  echo "== downloading openai-whisper's sdist from PyPI for whisper/assets/gpt2.tiktoken"
  rm -rf "$dir/dl" && mkdir -p "$dir/dl"
  pip download -q --no-deps --no-binary :all: -d "$dir/dl" openai-whisper
  tar -xzf "$dir"/dl/openai_whisper-*.tar.gz -C "$dir/dl" --wildcards '*/whisper/assets/gpt2.tiktoken'
  mv "$dir"/dl/*/whisper/assets/gpt2.tiktoken "$dir/gpt2.tiktoken"
  rm -rf "$dir/dl"
  got=$(sha256sum "$dir/gpt2.tiktoken" | cut -d' ' -f1)
  [ "$got" = "$want" ] || { echo "gpt2.tiktoken: sha256 $got, r50k_base's is $want" >&2; exit 1; }
  python3 tools/tiktoken_to_gpt2.py "$dir/gpt2.tiktoken" "$dir"
fi
echo "== test_data_gpt2_real"
CLPIPE_GPT2_DIR=$dir build/tests/data/test_data_gpt2_real
py=.cache/gpt2-venv/bin/python
if ! "$py" -c "import tiktoken" 2>/dev/null; then
  echo "== installing tiktoken from PyPI into .cache/gpt2-venv (once)"
  python3 -m venv .cache/gpt2-venv && .cache/gpt2-venv/bin/pip install -q tiktoken
fi
if [ $# -eq 0 ]; then
  # plus a generated stress text: words of many scripts, digits of other scripts, combining
  # marks, Unicode spaces, contractions, emoji, runs of whitespace
  python3 - "$dir/stress.txt" <<'PY'
import random, sys
r = random.Random(20261129)
pools = ["abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", "éèêàçñöüßøåÉÀ",
         "αβγδεζηθλμπσωΩ", "абвгдежзийклмнопрЖЩЯ", "日本語中文字漢かなカナ한국어", "٠١٢٣٤٥٦٧٨٩०१२३",
         "\u0301\u0308\u0327", "!?.,;:-_()[]{}<>/\\\"#$%&*+=@^`|~", "\u00a0\u2003\u3000\t",
         "😀🚀👍🏽", "ⅠⅡⅢ½¼²³"]
words = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "''", "   ", "\n", "\n\n", " \n "]
out = []
for _ in range(60000):
    if r.random() < 0.15:
        out.append(r.choice(words))
    else:
        pool = r.choice(pools)
        out.append("".join(r.choice(pool) for _ in range(r.randint(1, 8))))
    out.append(r.choice([" ", " ", " ", "", "  ", "\n"]))
open(sys.argv[1], "w", encoding="utf-8").write("".join(out))
PY
  set -- "$dir/stress.txt" $(fortunes_files)
fi
# tiktoken sees decoded text: keep the files that are valid UTF-8 (clpipe takes any bytes)
mapfile -t files < <("$py" -c '
import sys
for p in sys.argv[1:]:
    try: open(p, "rb").read().decode("utf-8"); print(p)
    except UnicodeDecodeError: print("skipped (not UTF-8): " + p, file=sys.stderr)
' "$@")
echo "== clpipe tokenize: ${#files[@]} files"
"$clpipe" tokenize --tokenizer gpt2 --vocab "$dir/vocab.json" --merges "$dir/merges.txt" \
  --eot --out "$dir/check.bin" "${files[@]}" | tail -1
"$clpipe" tokenize --tokenizer gpt2 --vocab "$dir/vocab.json" --merges "$dir/merges.txt" \
  --decode --out "$dir/check.txt" "$dir/check.bin"
echo "== tiktoken, and the comparison"
"$py" - "$dir" "${files[@]}" <<'EOF'
import base64, struct, sys, tiktoken
d, files = sys.argv[1], sys.argv[2:]
ranks = {}
for line in open(d + "/gpt2.tiktoken", "rb"):
    t, r = line.split()
    ranks[base64.b64decode(t)] = int(r)
enc = tiktoken.Encoding("gpt2-local", pat_str=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
                        mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256})
want, text = [], b""
for p in files:
    b = open(p, "rb").read()
    want += [50256] + enc.encode_ordinary(b.decode("utf-8"))
    text += b"<|endoftext|>" + b
raw = open(d + "/check.bin", "rb").read()
magic, version, n = struct.unpack("<3i", raw[:12])
got = list(struct.unpack("<%dH" % n, raw[1024:1024 + 2 * n]))
first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), None)
print("tiktoken %s: %d tokens; clpipe: %d tokens; first difference: %s" %
      (tiktoken.__version__, len(want), len(got), "none" if first is None and len(got) == len(want)
       else first))
back = open(d + "/check.txt", "rb").read()
print("decoded shard equals the input bytes:", back == text)
sys.exit(0 if got == want and back == text else 1)
EOF
