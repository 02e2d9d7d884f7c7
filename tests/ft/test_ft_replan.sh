#!/usr/bin/env bash
# A stage with no other holder under ULFM (mpirun --with-ft ulfm): a plain 1F1B pipeline of
# D stages (no replicas) loses rank K to SIGKILL after step 3 (CLPIPE_FAULT=die:K:3), with a
# checkpoint every 2 steps. The survivors must re-plan over themselves (D - 1 stages, the lost
# stage's layers merged into a neighbour) in the same processes, take the layers they held
# from memory (step 3) and the lost stage's from the checkpoint of step 2, end with exit 0 at
# step 8, log the event on every survivor, count it in the summary, and leave a checkpoint
# that loads. Reference: the same state built by hand, without a failure: a D-stage run to
# step 3 checkpointing every step, a checkpoint made of its step-3 files for the surviving
# ranks and its step-2 files for rank K, resumed over the new layout to step 8. The new
# session computes what that resumed run computes (the same fp32 tensors, moments, step
# counts, data position and layout, pipeline.deterministic), so the printed losses and
# gradient norms must be equal (a tolerance of the printing's rounding: 5e-5 nats, 5e-4 in
# the norm). And they must differ from a resume of the step-3 checkpoint of every stage
# (the lost stage really came from the checkpoint: what it cost is visible).
# With FAULT = diesave and STEP = 4: rank K dies while the checkpoint of step 4 is being
# written (its files written, the manifest not: CLPIPE_FAULT=diesave:K:4). That checkpoint
# must never look complete, the survivors agree on step 4 (they had applied it) and take the
# lost stage from the previous one (step 2); the reference then trains to step 4.
# With FAULT = dierec and K = "K1,K2": K1 dies after step 3 and K2 inside the recovery, once
# the survivors' shrink has counted it (CLPIPE_FAULT=die:K1:3,dierec:K2:1): the survivors'
# agreement fails, they recover again without it, and both lost stages come from step 2.
# With train arguments after STEP (an optimizer with its own state, --optim.name=shampoo or
# kfac): its tensors follow the same rule (the survivor's from memory, the lost stage's from
# the checkpoint), logged as "the optimizer's own state: ..."; the reference's hand-built
# checkpoint then carries rank K's step-2 optimizer tensors.
# Usage: test_ft_replan.sh CLPIPE MPIRUN WORKDIR D K NEWLAYERS [FAULT STEP [train args...]]
#        (NEWLAYERS e.g. "[2]"; FAULT die (default, STEP 3), diesave or dierec)
set -u
clpipe=$1
mpirun=$2
D=$4
K=$5
newlayers=$6
fault=${7:-die}
A=${8:-3}     # the step the survivors agree on
N=$((A + 1))  # the next one
root=$3
shift $(($# < 8 ? $# : 8))
extra=("$@")
IFS=, read -r -a ks <<<"$K"
tag=""
[ ${#extra[@]} -gt 0 ] && tag=-$(printf '%s' "${extra[0]#--optim.name=}" | tr -c 'a-z0-9' '_')
work=$root/replan-$D-${K/,/-}-$fault$tag
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }

for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > "$work/corpus.txt"
common=(--data "$work/corpus.txt" --model.n_layer="$D" --model.d_model=32 --model.n_head=4
        --model.ctx=16 --train.batch=2 --train.micro_batches=2 --eval.every=0
        --eval.batches=1 --pipeline.schedule=1f1b --pipeline.deadline=60
        --pipeline.deterministic=true "${extra[@]}")
mpi=("$mpirun" --with-ft ulfm --oversubscribe)
S=$((D - ${#ks[@]}))
spec=$fault:$K:$A
[ "$fault" = dierec ] && spec=die:${ks[0]}:$A,dierec:${ks[1]}:1

# the run with a failure
CLPIPE_FAULT=$spec timeout 300 "${mpi[@]}" -np "$D" "$clpipe" train "${common[@]}" \
	--pipeline.stages="$D" --steps 8 --ckpt.every=2 --ckpt.dir="$work/ck" >"$work/ft.out" 2>&1
rc=$?
check "[ $rc -eq 0 ]" "the run with rank $K of $D stages killed ($fault) at step $A ends with exit 0 (got $rc)"
check "grep -aq '^step 8/8 ' '$work/ft.out'" "it reaches its planned step count"
lostk=$(for k in "${ks[@]}"; do printf 'rank %s \\(host [^)]*\\), ' "$k"; done)
holders=$(for k in "${ks[@]}"; do printf '%s (layers %s-%s), ' "$k" "$k" "$k"; done)
events() { grep -a '^ft: rank [0-9] (host ' "$work/ft.out" | grep -E "lost ${lostk%, } during" |
	grep -F "agreed on step $A, step $N is " | grep -F "; new layout $S stage" |
	grep -F "layers $newlayers; no other holder of stage" | grep -F " ${holders%, }: re-planned" |
	grep -E "\(step 2: $((A - 2)) step$([ $A -eq 3 ] || echo s) of theirs lost\)$optnote; recovered in" | wc -l; }
optnote=""
[ ${#extra[@]} -gt 0 ] && optnote="; the optimizer's own state: [1-9][0-9]* tensors from memory, [1-9][0-9]* from the checkpoint, 0 initialised"
check "[ \$(events) -eq $S ]" \
	"every survivor logs the lost rank, its host, the agreed step, the new layout, where the lost stage came from and the seconds"
check "grep -aq '^failures survived: 1' '$work/ft.out' && grep -aq 'went on as $S stage' '$work/ft.out'" \
	"the summary counts the failure"
check "[ -f '$work/ck/step-00000008/manifest.json' ]" "the checkpoint of step 8 is complete"
"$clpipe" eval --ckpt "$work/ck" --eval.batches=1 >"$work/eval.out" 2>&1
check "[ $? -eq 0 ] && grep -aq 'val loss' '$work/eval.out'" "the checkpoint loads and evaluates"

# the reference: D stages to step 3 with every checkpoint, then the survivors' state by hand
timeout 300 "${mpi[@]}" -np "$D" "$clpipe" train "${common[@]}" --pipeline.stages="$D" \
	--steps "$A" --ckpt.every=1 --ckpt.keep=0 --ckpt.dir="$work/ref" >"$work/ref1.out" 2>&1
check "[ $? -eq 0 ]" "the reference's first part runs"
ckA=step-0000000$A
for d in mix pure; do mkdir -p "$work/$d" && cp -r "$work/ref/$ckA" "$work/$d/"; done
for k in "${ks[@]}"; do
	cp "$work/ref/step-00000002/"{model-rank$k.safetensors,optimizer-rank$k.safetensors,part-rank$k.json} \
		"$work/mix/$ckA/"
done
# K = 0 with the head surviving: the head's copy of the tied embedding survives at step A
# while a checkpoint stores stage 0's only: rank 0's step-2 files get the step-A embedding
# (and its moments), byte for byte, and the manifest their new CRCs
python3 - "$work/mix/$ckA" "$work/ref/step-00000002" "$K" "$work/ref/$ckA" "$D" <<'EOF'
import json, struct, sys, zlib
d, old2, ks, src, nranks = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
ks = [int(x) for x in ks.split(",")]
m = json.load(open(d + "/manifest.json"))
m["files"] = [f for f in m["files"] if f["rank"] not in ks]
for k in ks:
    m["files"] += json.load(open("%s/part-rank%d.json" % (old2, k)))["files"]
k = ks[0] if len(ks) == 1 else -1
def tensors(b):
    n = struct.unpack("<Q", b[:8])[0]
    return 8 + n, json.loads(b[8:8 + n])
if k == 0 and nranks > 1:
    for f in m["files"]:
        if f["rank"] != 0:
            continue
        old = bytearray(open(d + "/" + f["file"], "rb").read())
        new = open(src + "/" + f["file"], "rb").read()
        (bo, ho), (bn, hn) = tensors(bytes(old)), tensors(new)
        for name, e in ho.items():
            if name.startswith("transformer.wte.weight"):
                a, z = e["data_offsets"]
                a2, z2 = hn[name]["data_offsets"]
                old[bo + a:bo + z] = new[bn + a2:bn + z2]
        open(d + "/" + f["file"], "wb").write(old)
        f["crc32"] = "%08x" % (zlib.crc32(bytes(old)) & 0xffffffff)
        f["bytes"] = len(old)
json.dump(m, open(d + "/manifest.json", "w"), indent=1, sort_keys=True)
EOF
for d in mix pure; do
	timeout 300 "${mpi[@]}" -np "$S" "$clpipe" train "${common[@]}" --pipeline.stages="$S" \
		--pipeline.layers="$newlayers" --steps 8 --ckpt.every=2 --ckpt.dir="$work/$d" \
		--resume >"$work/$d.out" 2>&1
	check "[ $? -eq 0 ] && grep -aq 'resumed from .*$ckA at step $A' '$work/$d.out'" \
		"the reference resumed from the $d checkpoint over the survivors' layout runs"
done
losses() { grep -ahE '^step [0-9]+/[0-9]+ \|' "$@" | sed -E 's/^step ([0-9]+)\/[0-9]+ /step \1 /; s/ \| [0-9]+ tok\/s.*//'; }
losses "$work/ft.out" >"$work/ft.loss"
losses "$work/ref1.out" "$work/mix.out" >"$work/ref.loss"
losses "$work/ref1.out" "$work/pure.out" >"$work/pure.loss"
check "[ \$(wc -l <'$work/ft.loss') -eq 8 ] && diff '$work/ft.loss' '$work/ref.loss'" \
	"losses and gradient norms of steps 1-8 equal the reference (survivors at step $A, the lost stage at step 2)"
check "! diff -q '$work/ft.loss' '$work/pure.loss' >/dev/null" \
	"and differ from a resume with every stage at step $A (the lost stage's steps are lost)"
if [ "$fault" = diesave ]; then
	check "grep -aq 'CLPIPE_FAULT: rank $K dies while saving the checkpoint of step $A' '$work/ft.out' && grep -aq 'barrier .checkpoint files written.: rank $K .* lost' '$work/ft.out'" \
		"rank $K died inside the checkpoint write of step $A, the survivors' barrier saw it"
	check "[ ! -f '$work/ck/$ckA/manifest.json' ]" "the checkpoint of step $A never looked complete"
fi
if [ "$fault" = dierec ]; then
	check "grep -aq 'CLPIPE_FAULT: rank ${ks[1]} dies in recovery 1, after the shrink' '$work/ft.out' && grep -aq '^ft: rank [0-9]: another rank was lost during the recovery .*recovering again' '$work/ft.out'" \
		"rank ${ks[1]} died inside the recovery, and the survivors recovered again"
fi
[ $fail -ne 0 ] && { echo "--- ft.out"; cat "$work/ft.out"; echo "--- mix.out"; cat "$work/mix.out"; }
exit $fail
