#!/usr/bin/env bash
# clpipe tokenize: text files -> an llm.c shard and back; errors name the file and keep an
# existing shard. Usage: test_tokenize.sh CLPIPE
set -u
clpipe=$1
work=$(mktemp -d /tmp/clpipe-tok-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }

printf 'Hello, world!\nsecond line\n' > "$work/a.txt"
printf 'caf\xc3\xa9 \xff\x00 binary\n' > "$work/b.txt"          # UTF-8, an invalid byte, a NUL
"$clpipe" tokenize --eot --out "$work/s.bin" "$work/a.txt" "$work/b.txt" > "$work/out" 2>&1
rc=$?
cat "$work/out"
n=$(( $(wc -c < "$work/a.txt") + $(wc -c < "$work/b.txt") + 2 ))
check "[ $rc -eq 0 ]" "tokenize exits 0"
check "grep -q \"$n tokens (byte tokeniser, vocabulary 257, version 1)\" '$work/out'" \
  "byte tokeniser: one token a byte plus one <|endoftext|> a file ($n)"
check "[ $(wc -c < "$work/s.bin") -eq $((1024 + 2 * n)) ]" "a version 1 shard: 1024-byte header + uint16 tokens"
check "[ \"\$(od -An -tu4 -N12 '$work/s.bin' | tr -s ' ')\" = ' 20240520 1 $n' ]" "llm.c's header (magic, version, count)"
"$clpipe" tokenize --decode --out "$work/back.txt" "$work/s.bin" > /dev/null 2>&1
{ printf '<|endoftext|>'; cat "$work/a.txt"; printf '<|endoftext|>'; cat "$work/b.txt"; } > "$work/want.txt"
check "cmp -s '$work/back.txt' '$work/want.txt'" "decoding the shard gives the bytes back"
"$clpipe" tokenize --version 7 --out "$work/s7.bin" "$work/a.txt" > /dev/null 2>&1
check "[ $(wc -c < "$work/s7.bin") -eq $((1024 + 4 * $(wc -c < "$work/a.txt"))) ]" "--version 7 writes uint32 tokens"
"$clpipe" tokenize --eot --shard-tokens 20 --out "$work/sh.bin" "$work/a.txt" "$work/b.txt" > "$work/out" 2>&1
check "[ \"\$(ls '$work'/sh_*.bin | xargs -n1 basename | tr '\n' ' ')\" = 'sh_000000.bin sh_000001.bin sh_000002.bin ' ]" \
  "--shard-tokens 20: $n tokens in three numbered shards"
check "[ $(wc -c < "$work/sh_000002.bin") -eq $((1024 + 2 * (n - 40))) ]" "the last shard holds the rest"
for k in 0 1 2; do "$clpipe" tokenize --decode --out "$work/part$k.txt" "$work/sh_00000$k.bin" > /dev/null 2>&1; done
check "cat '$work'/part0.txt '$work'/part1.txt '$work'/part2.txt | cmp -s - '$work/want.txt'" "the shards decode to the input in order"
"$clpipe" tokenize --shard-tokens 1 --out "$work/sh1.bin" "$work/a.txt" > "$work/err" 2>&1
check "[ $? -eq 2 ]" "--shard-tokens 1 is refused (a shard of one token holds no sequence)"

# errors: a missing input names it and leaves the existing shard as it was
cp "$work/s.bin" "$work/keep.bin"
"$clpipe" tokenize --out "$work/s.bin" "$work/a.txt" "$work/missing.txt" > "$work/err" 2>&1
rc=$?
check "[ $rc -ne 0 ] && grep -q 'missing.txt' '$work/err'" "a missing file is named: $(grep -m1 error "$work/err")"
check "cmp -s '$work/s.bin' '$work/keep.bin'" "the existing shard is untouched"
head -c 1030 "$work/s.bin" > "$work/trunc.bin"
"$clpipe" tokenize --decode --out "$work/t.txt" "$work/trunc.bin" > "$work/err" 2>&1
rc=$?
check "[ $rc -ne 0 ] && grep -q 'trunc.bin' '$work/err'" "a truncated shard is named: $(tail -1 "$work/err")"
"$clpipe" tokenize --tokenizer gpt2 --out "$work/x.bin" "$work/a.txt" > "$work/err" 2>&1
rc=$?
check "[ $rc -eq 2 ] && grep -q 'needs --vocab' '$work/err'" "gpt2 without its files is a usage error"
echo '{"a": 0}' > "$work/vocab.json"; printf '#version: 0.2\n' > "$work/merges.txt"
"$clpipe" tokenize --tokenizer gpt2 --vocab "$work/vocab.json" --merges "$work/merges.txt" \
  --out "$work/x.bin" "$work/a.txt" > "$work/err" 2>&1
rc=$?
check "[ $rc -ne 0 ] && grep -q 'vocab.json' '$work/err'" "a byte the vocabulary lacks names the file: $(tail -1 "$work/err")"

# Hugging Face tokenizers by directory or file: the ids tokenizers made (fixtures/tok/golden.txt)
fix=$(cd "$(dirname "$0")" && pwd)/fixtures/tok
want_n=$(grep '^minilm ' "$fix/golden.txt" | wc -w); want_n=$((want_n - 1))
"$clpipe" tokenize --tokenizer "$fix/minilm" --out "$work/m.bin" "$fix/corpus.txt" > "$work/out" 2>&1
check "grep -q \"$want_n tokens (wordpiece tokeniser, vocabulary 30522, version 1)\" '$work/out'" \
  "--tokenizer DIR reads MiniLM's tokenizer.json: $(tail -1 "$work/out")"
got=$(od -An -tu2 -j1024 -v "$work/m.bin" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')
check "[ \"minilm $got\" = \"\$(grep '^minilm ' '$fix/golden.txt')\" ]" "the shard holds tokenizers' ids"
"$clpipe" tokenize --tokenizer "$fix/bpe_llama3/tokenizer.json" --eot --out "$work/l.bin" "$fix/corpus.txt" > /dev/null 2>&1
"$clpipe" tokenize --tokenizer "$fix/bpe_llama3" --decode --out "$work/l.txt" "$work/l.bin" > /dev/null 2>&1
{ printf '<|endoftext|>'; cat "$fix/corpus.txt"; } > "$work/lwant.txt"
check "cmp -s '$work/l.txt' '$work/lwant.txt'" "byte-level BPE from tokenizer.json: --eot puts <|endoftext|> and decoding gives the text back"
mkdir -p "$work/notok"
"$clpipe" tokenize --tokenizer "$work/notok" --out "$work/x.bin" "$work/a.txt" > "$work/err" 2>&1
rc=$?
check "[ $rc -ne 0 ] && grep -q 'notok: no tokenizer here' '$work/err'" "a directory without a tokenizer is named: $(tail -1 "$work/err")"

# train takes the same: a tokenizer larger than the model is refused with both figures; a path
# and "gpt2" together are refused (both before any device is opened)
"$clpipe" train --model.preset=bert --model.vocab=1000 --data.tokenizer_path="$fix/minilm" \
  --data.path="$fix/corpus.txt" > "$work/err" 2>&1
check "grep -q 'model.vocab = 1000 is smaller than the tokenizer.s 30522 symbols' '$work/err'" \
  "a vocabulary larger than the model's is refused: $(tail -1 "$work/err")"
"$clpipe" train --data.tokenizer=gpt2 --data.tokenizer_path="$fix/minilm" --data.path="$fix/corpus.txt" > "$work/err" 2>&1
check "grep -q 'give one tokenizer' '$work/err'" "gpt2 and a tokenizer path together are refused"
exit $fail
