#!/bin/bash
# clpipe train --init (train.init) from directories transformers wrote (tests/hf/fixtures) and
# from clpipe's own checkpoints: (1) every family with its head (gpt2, llama, bert) and a
# BertModel without one (bert_base): a run with optim.lr = 0 evaluates exactly as `clpipe eval`
# of the directory (the weights are the file's; the head a BertModel lacks is initialised and
# listed in one line, its pooler listed as unused); the directory's vocab.txt is the tokenizer;
# (2) a 2-stage 1F1B pipeline started from --init gives the one-device losses (also with
# LoRA); (3) a run from --init checkpoints, resumes bitwise and exports; a clpipe checkpoint is
# an --init source; (4) train.freeze: frozen tensors bitwise unchanged after training (bf16 on
# one device, fp32 in a 2-stage pipeline), a pattern matching nothing refused; (5) LoRA
# (model.lora_r) from --init: base bitwise unchanged, `export --merge-lora` evaluates as the
# adapter model, resume bitwise; (6) refusals: a flag contradicting config.json (both values
# named), a tensor of another shape (tensor and both shapes named), a directory without weights.
# Usage: test_hf_init.sh CLPIPE
set -euo pipefail
clpipe=$1
here=$(cd "$(dirname "$0")" && pwd)
fx=$here/fixtures
corpus=$here/corpus.txt
work=$(mktemp -d /tmp/clpipe-hfinit-XXXXXX)
trap 'rm -rf "$work"' EXIT
common=(--data "$corpus" --train.batch=2 --eval.every=0 --eval.batches=0)
loss_of() { python3 -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["loss"]))' "$1"; }
val_of() { # the last evaluation of a JSON-lines log
	python3 -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1])]
print(repr([x for x in r if x["event"]=="eval"][-1]["val_loss"]))' "$1"
}

# 1. the weights are the file's: lr 0 keeps them, so the run's evaluation is eval's
for m in gpt2 llama bert bert_base; do
	"$clpipe" eval --ckpt "$fx/$m" "${common[@]}" --json >"$work/$m-eval.json" 2>"$work/$m-eval.err"
	"$clpipe" train --init "$fx/$m" "${common[@]}" --train.steps=1 --optim.lr=0 \
		--log "$work/$m.log" >"$work/$m.out"
	a=$(loss_of "$work/$m-eval.json")
	b=$(val_of "$work/$m.log")
	[ "$a" = "$b" ] || { echo "FAIL: $m: eval $a, train --init (lr 0) $b"; exit 1; }
	grep -q "^init: weights from $fx/$m (optimizer state, step and data position start fresh)" \
		"$work/$m.out"
	echo "$m: train --init evaluates as clpipe eval of the directory: $a"
done
for m in gpt2 llama bert; do # a whole model: nothing missing, nothing unused
	if grep -q "^init: .* tensors\? \(not in the file\|of the file not used\)" "$work/$m.out"; then
		echo "FAIL: $m: a whole model's file reported missing or unused tensors"; exit 1
	fi
done
# BertModel: the masked-LM head initialised and listed in one line, the pooler unused
grep -qx "init: 5 tensors not in the file, initialised: cls.predictions.transform.dense.weight, cls.predictions.transform.dense.bias, cls.predictions.transform.LayerNorm.weight, cls.predictions.transform.LayerNorm.bias, cls.predictions.bias" \
	"$work/bert_base.out"
grep -qx "init: 2 tensors of the file not used: pooler.dense.bias, pooler.dense.weight" \
	"$work/bert_base.out"
grep -q "^init: the loss is that of an untrained head" "$work/bert_base-eval.err"
# the effective config (printed on request) names the directory's vocab.txt as the tokenizer
"$clpipe" train --init "$fx/bert_base" "${common[@]}" --print-config >"$work/bert_base.cfg"
grep -q '^tokenizer = "hf"  # .*bert_base/vocab.txt' "$work/bert_base.cfg"
# it fine-tunes: the loss falls on the corpus
"$clpipe" train --init "$fx/bert_base" --data "$corpus" --train.batch=4 --train.steps=30 \
	--optim.lr=3e-3 --optim.warmup=1 --eval.every=0 --eval.batches=0 --log "$work/ft.log" >/dev/null
python3 - "$work/ft.log" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
s = [x["loss"] for x in r if x["event"] == "step"]
first, last = sum(s[:5]) / 5, sum(s[-5:]) / 5
assert last < first, (first, last)
print(f"bert_base: fine-tuning from --init, mean loss of steps 1-5 {first:.3f}, 26-30 {last:.3f}")
PY

# 2. a pipeline from --init equals one device
for extra in "" "--model.lora_r=2 --optim.lr=3e-2" "--model.lora_r=2 --model.lora_dropout=0.2 --optim.lr=3e-2"; do
pipe=(--init "$fx/gpt2" --data "$corpus" --train.batch=2 --train.micro_batches=2 --train.steps=3
      --eval.every=0 --eval.batches=2 --pipeline.deterministic=true --optim.warmup=1 $extra)
"$clpipe" train "${pipe[@]}" --log "$work/one.log" >/dev/null
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
	POCL_MAX_PTHREAD_COUNT=1 timeout 300 mpirun -np 2 "$clpipe" train "${pipe[@]}" \
	--pipeline.stages=2 --pipeline.schedule=1f1b --log "$work/two.log" >"$work/two.out" 2>&1 ||
	{ cat "$work/two.out"; exit 1; }
python3 - "$work/one.log" "$work/two.log" "$extra" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
la = [x["loss"] for x in a if x["event"] == "step"]
lb = [x["loss"] for x in b if x["event"] == "step"]
assert len(la) == len(lb) == 3, (la, lb)
for x, y in zip(la, lb):
    assert abs(x - y) <= 1e-6 * abs(x), (la, lb)
print(f"gpt2 --init {sys.argv[3]}: 2-stage 1f1b losses {lb} = one device {la} (within 1e-6 "
      "relative)")
PY
done

# 3. checkpoints of an --init run resume bitwise and export; a checkpoint is an --init source
run=(--init "$fx/llama" --data "$corpus" --train.batch=2 --eval.every=0 --eval.batches=1
     --optim.warmup=1)
"$clpipe" train "${run[@]}" --train.steps=4 --log "$work/full.log" >/dev/null
"$clpipe" train "${run[@]}" --train.steps=2 --ckpt.dir="$work/ck" >/dev/null
"$clpipe" train "${run[@]}" --train.steps=4 --ckpt.dir="$work/ck" --resume \
	--log "$work/res.log" >"$work/res.out"
grep -q "resumed from .*step-00000002 at step 2" "$work/res.out"
python3 - "$work/full.log" "$work/res.log" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
la = {x["step"]: x["loss"] for x in a if x["event"] == "step"}
lb = {x["step"]: x["loss"] for x in b if x["event"] == "step"}
assert lb and all(la[k] == v for k, v in lb.items()), (la, lb)
print(f"llama --init: resumed at step 2, steps 3-4 bitwise as the uninterrupted run: {lb}")
PY
"$clpipe" export --dtype fp32 "$work/ck/step-00000004" "$work/exported" >/dev/null
x=$("$clpipe" eval --ckpt "$work/ck/step-00000004" "${common[@]}" --json)
y=$("$clpipe" eval --ckpt "$work/exported" "${common[@]}" --json)
[ "$x" = "$y" ] || { echo "FAIL: checkpoint $x, its export $y"; exit 1; }
"$clpipe" train --init "$work/ck" "${common[@]}" --train.steps=1 --optim.lr=0 \
	--log "$work/again.log" >"$work/again.out"
[ "$(val_of "$work/again.log")" = "$(python3 -c 'import json,sys; print(repr(json.loads(sys.argv[1])["loss"]))' "$x")" ]
"$clpipe" train --init "$work/ck" "${common[@]}" --print-config >"$work/again.cfg"
grep -q '^n_head = 2  # .*(stored config)' "$work/again.cfg"
echo "llama --init: the checkpoint exports, and starts another run with its stored config"

# 4. train.freeze: the frozen tensors are bitwise the file's after training, the others moved
# (one device in bf16; a 2-stage pipeline in fp32 freezing GPT-2's tied embedding on both ends)
"$clpipe" train --init "$fx/bert_base" --data "$corpus" --train.batch=2 --train.steps=3 \
	--eval.every=0 --eval.batches=1 --train.precision=bf16 --ckpt.dir="$work/fz1" \
	--train.freeze="bert.embeddings.*, bert.encoder.layer.0.*" >"$work/fz1.out"
grep -q "^freeze: 21 of 42 tensors frozen (3144 of 4368 parameters); 1224 trained" "$work/fz1.out"
# its export brings the run's tokenizer (vocab.txt from the --init directory) and evaluates alike
"$clpipe" export --dtype fp32 "$work/fz1" "$work/fz1-exp" >/dev/null
cmp -s "$fx/bert_base/vocab.txt" "$work/fz1-exp/vocab.txt"
# (fp32 for both: eval of a checkpoint takes its run's precision, bf16 here, the export has none)
[ "$("$clpipe" eval --ckpt "$work/fz1" "${common[@]}" --train.precision=fp32 --json)" = \
  "$("$clpipe" eval --ckpt "$work/fz1-exp" "${common[@]}" --train.precision=fp32 --json)" ] ||
	{ echo "FAIL: the export with its tokenizer evaluates otherwise"; exit 1; }
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
	POCL_MAX_PTHREAD_COUNT=1 timeout 300 mpirun -np 2 "$clpipe" train --init "$fx/gpt2" \
	--data "$corpus" --train.batch=2 --train.micro_batches=2 --train.steps=3 --eval.every=0 \
	--eval.batches=1 --pipeline.stages=2 --pipeline.schedule=1f1b --ckpt.dir="$work/fz2" \
	--train.freeze="wte.weight,h.1.*" >"$work/fz2.out" 2>&1 || { cat "$work/fz2.out"; exit 1; }
python3 - "$fx" "$work" <<'PY'
import fnmatch, glob, json, struct, sys
fx, work = sys.argv[1:3]
def tensors(paths):
    out = {}
    for p in paths:
        with open(p, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            h = json.loads(f.read(n))
            d = f.read()
        h.pop("__metadata__", None)
        out.update({k: d[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in h.items()})
    return out
for src, ck, strip, pats in (("bert_base", "fz1", "bert.", ["bert.embeddings.*", "bert.encoder.layer.0.*"]),
                             ("gpt2", "fz2", "", ["transformer.wte.weight", "transformer.h.1.*"])):
    a = tensors([f"{fx}/{src}/model.safetensors"])
    b = tensors(glob.glob(sorted(glob.glob(f"{work}/{ck}/step-*"))[-1] + "/model*.safetensors"))
    frozen = [k for k in b if any(fnmatch.fnmatch(k, p) for p in pats)]
    assert frozen, b.keys()
    for k in b:
        same = a.get(k[len(strip):] if strip and k.startswith(strip) else k) == b[k]
        assert same == (k in frozen), (src, k, same)
    print(f"{src}: {len(frozen)} frozen tensors bitwise the file's, the other {len(b) - len(frozen)} trained")
PY
if "$clpipe" train --init "$fx/gpt2" --data "$corpus" --train.freeze="h.9.*" >/dev/null 2>"$work/err"; then
	echo "FAIL: a freeze pattern matching nothing was accepted"; exit 1
fi
grep -q 'train.freeze: "h.9.\*" matches no parameter of the model' "$work/err" || { cat "$work/err"; exit 1; }

# 5. LoRA from --init: the base stays bitwise the file's, the merged export evaluates as the
# adapter model (within 1e-5 relative), an adapter run resumes bitwise
for m in gpt2 llama bert; do
	lora=(--init "$fx/$m" --data "$corpus" --train.batch=2 --eval.every=0 --eval.batches=1
	      --model.lora_r=2 --model.lora_alpha=4 --optim.lr=3e-2 --optim.warmup=1)
	"$clpipe" train "${lora[@]}" --train.steps=4 --ckpt.dir="$work/lo-$m" --log "$work/lo-$m.log" \
		>"$work/lo-$m.out"
	grep -q "^freeze: [0-9]* of .* trained (the LoRA adapters" "$work/lo-$m.out"
	"$clpipe" export --merge-lora --dtype fp32 "$work/lo-$m" "$work/lo-$m-merged" >/dev/null
	a=$("$clpipe" eval --ckpt "$work/lo-$m" "${common[@]}" --json)
	b=$("$clpipe" eval --ckpt "$work/lo-$m-merged" "${common[@]}" --json 2>/dev/null)
	python3 - "$a" "$b" "$fx/$m" "$work/lo-$m/step-00000004" "$work/lo-$m-merged" "$m" <<'PY'
import json, struct, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
def names(p):
    with open(p + "/model.safetensors", "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        d = f.read()
    h.pop("__metadata__", None)
    return {k: d[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in h.items()}
src, ck, mg = names(sys.argv[3]), names(sys.argv[4]), names(sys.argv[5])
lora = [k for k in ck if ".lora_" in k]
assert len(lora) == 16 and not any(".lora_" in k for k in mg), (lora, mg.keys())
for k, v in ck.items():  # the base tensors are the file's, bit for bit
    if ".lora_" not in k:
        assert src.get(k, src.get(k.replace("transformer.", "", 1))) == v, k
rel = abs(a["loss"] - b["loss"]) / a["loss"]
assert rel <= 1e-5, (a, b)
print(f"{sys.argv[6]} LoRA r=2: base bitwise the file's, 16 adapters; merged export loss "
      f"{b['loss']:.8f} = adapter model {a['loss']:.8f} (rel {rel:.1e})")
PY
done
"$clpipe" train "${lora[@]}" --train.steps=2 --ckpt.dir="$work/lo-res" >/dev/null
"$clpipe" train "${lora[@]}" --train.steps=4 --ckpt.dir="$work/lo-res" --resume \
	--log "$work/lo-res.log" >/dev/null
python3 - "$work/lo-bert.log" "$work/lo-res.log" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
la = {x["step"]: x["loss"] for x in a if x["event"] == "step"}
lb = {x["step"]: x["loss"] for x in b if x["event"] == "step"}
assert lb and all(la[k] == v for k, v in lb.items()), (la, lb)
print(f"bert LoRA: resumed at step 2, steps 3-4 bitwise as the uninterrupted run: {lb}")
PY
# LoRA dropout (model.lora_dropout): a resumed run draws the masks the uninterrupted one does;
# the masks move the loss; eval (no dropout) of the checkpoint equals its merged export's
lora+=(--model.lora_dropout=0.3)
"$clpipe" train "${lora[@]}" --train.steps=4 --log "$work/ld.log" --ckpt.dir="$work/ld" >/dev/null
"$clpipe" train "${lora[@]}" --train.steps=2 --ckpt.dir="$work/ld-res" >/dev/null
"$clpipe" train "${lora[@]}" --train.steps=4 --ckpt.dir="$work/ld-res" --resume \
	--log "$work/ld-res.log" >/dev/null
"$clpipe" export --merge-lora --dtype fp32 "$work/ld" "$work/ld-merged" >/dev/null
a=$("$clpipe" eval --ckpt "$work/ld" "${common[@]}" --json)
b=$("$clpipe" eval --ckpt "$work/ld-merged" "${common[@]}" --json 2>/dev/null)
python3 - "$work/lo-bert.log" "$work/ld.log" "$work/ld-res.log" "$a" "$b" <<'PY'
import json, sys
a, d, r = ([json.loads(l) for l in open(p)] for p in sys.argv[1:4])
la, ld, lr = ({x["step"]: x["loss"] for x in y if x["event"] == "step"} for y in (a, d, r))
assert lr and all(ld[k] == v for k, v in lr.items()), (ld, lr)
# step 1 is alike (B starts at 0: the branch adds nothing yet); step 2 has moved adapters
assert ld[1] == la[1] and ld[2] != la[2], (la, ld)
e, m = json.loads(sys.argv[4]), json.loads(sys.argv[5])
assert abs(e["loss"] - m["loss"]) <= 1e-5 * e["loss"], (e, m)
print(f"bert LoRA dropout 0.3: step 2 loss {ld[2]:.6f} (no dropout {la[2]:.6f}); resumed steps "
      f"3-4 bitwise: {lr}; eval {e['loss']:.6f} = merged export {m['loss']:.6f}")
PY

# 6. refusals, by name
if "$clpipe" train --init "$fx/gpt2" --data "$corpus" --model.n_head=4 >/dev/null 2>"$work/err"; then
	echo "FAIL: --model.n_head=4 against a 2-head config.json was accepted"; exit 1
fi
grep -q "model.n_head = 4 (command line --model.n_head) contradicts model.n_head = 2 (.*config.json n_head)" \
	"$work/err" || { cat "$work/err"; exit 1; }
mkdir "$work/wide"
python3 - "$fx/gpt2" "$work/wide" <<'PY'
import json, shutil, struct, sys
src, dst = sys.argv[1:3]
shutil.copy(src + "/config.json", dst)
with open(src + "/model.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
    data = f.read()
t = h["transformer.wpe.weight"]  # (16, 8) stored as (8, 16)
t["shape"] = [t["shape"][1], t["shape"][0]]
b = json.dumps(h).encode()
b += b" " * (-len(b) % 8)
open(dst + "/model.safetensors", "wb").write(struct.pack("<Q", len(b)) + b + data)
PY
if "$clpipe" train --init "$work/wide" --data "$corpus" --train.steps=1 >/dev/null 2>"$work/err"; then
	echo "FAIL: a tensor of another shape was accepted"; exit 1
fi
grep -q 'tensor "transformer.wpe.weight" has shape \[8, 16\] there.*\[16, 8\]' "$work/err" ||
	{ cat "$work/err"; exit 1; }
mkdir "$work/empty"
cp "$fx/gpt2/config.json" "$work/empty/"
if "$clpipe" train --init "$work/empty" --data "$corpus" --train.steps=1 >/dev/null 2>"$work/err"; then
	echo "FAIL: a directory without weights was accepted"; exit 1
fi
grep -q "$work/empty" "$work/err" || { cat "$work/err"; exit 1; }
echo "init refusals: a contradicting flag, a tensor of another shape, no weights: each named"
echo "hf init: ok"
