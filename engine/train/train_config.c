/* The schema of clp_train_config: names, types, defaults, ranges and help, declared once; and
 * optim.name parsed as an optimizer kind. */
#include "engine/train/train_config.h"

#include <string.h>

#define F(member, key, type, dflt, help, lo, hi, ch)                                               \
	CLP_CFG_FIELD(clp_train_config, member, key, type, dflt, help, lo, hi, ch)

static const clp_cfg_field fields[] = {
	F(model.preset, "model.preset", CLP_CFG_STRING, "\"gpt2\"", "architecture", 0, 0,
	  "gpt2|llama|bert"),
	F(model.n_layer, "model.n_layer", CLP_CFG_INT, "4", "transformer layers", 1, 10000, NULL),
	F(model.d_model, "model.d_model", CLP_CFG_INT, "128", "model width", 1, 1 << 20, NULL),
	F(model.n_head, "model.n_head", CLP_CFG_INT, "4", "attention heads", 1, 4096, NULL),
	F(model.n_kv_head, "model.n_kv_head", CLP_CFG_INT, "0",
	  "key/value heads (llama GQA; 0: n_head)", 0, 4096, NULL),
	F(model.d_ff, "model.d_ff", CLP_CFG_INT, "0", "MLP width (0: preset default)", 0, 1 << 22,
	  NULL),
	F(model.vocab, "model.vocab", CLP_CFG_INT, "0", "vocabulary (0: the tokenizer's)", 0,
	  1 << 24, NULL),
	F(model.ctx, "model.ctx", CLP_CFG_INT, "128", "context length", 1, 1 << 20, NULL),
	F(model.norm_eps, "model.norm_eps", CLP_CFG_FLOAT, "0",
	  "norm epsilon (0: preset default)", 0, 1, NULL),
	F(model.rope_theta, "model.rope_theta", CLP_CFG_FLOAT, "10000", "llama rotary base", 1,
	  1e9, NULL),
	F(model.dropout, "model.dropout", CLP_CFG_FLOAT, "0", "dropout probability", 0, 0.99, NULL),
	F(model.lora_r, "model.lora_r", CLP_CFG_INT, "0", "LoRA rank of adapters on the target "
	  "linears; the rest of the model is frozen (0: no adapters)", 0, 1 << 16, NULL),
	F(model.lora_alpha, "model.lora_alpha", CLP_CFG_FLOAT, "16",
	  "LoRA: the adapters' output is scaled by lora_alpha / lora_r", 1e-6, 1e6, NULL),
	F(model.lora_dropout, "model.lora_dropout", CLP_CFG_FLOAT, "0",
	  "LoRA: dropout probability on the adapters' input, B A drop(x) (PEFT's lora_dropout; "
	  "0: none)", 0, 0.99, NULL),
	F(model.lora_targets, "model.lora_targets", CLP_CFG_STRING, "\"\"",
	  "LoRA: the linears with adapters, name globs matched against layer 0's weights "
	  "(\"*c_attn*,*q_proj*\"), comma-separated (\"\": qkv, attention output, both MLP)", 0, 0,
	  NULL),
	F(model.tie_embeddings, "model.tie_embeddings", CLP_CFG_BOOL, "false",
	  "llama: the head is the token embedding (no lm_head; gpt2 and bert always tie)", 0, 0,
	  NULL),

	F(data.path, "data.path", CLP_CFG_STRING, "\"\"", "training text file, or shard glob", 0,
	  0, NULL),
	F(data.val_path, "data.val_path", CLP_CFG_STRING, "\"\"",
	  "validation shard glob (\"\": split by data.val_fraction)", 0, 0, NULL),
	F(data.format, "data.format", CLP_CFG_STRING, "\"text\"", "input format", 0, 0,
	  "text|shards"),
	F(data.tokenizer, "data.tokenizer", CLP_CFG_STRING, "\"byte\"", "tokenizer for text", 0,
	  0, "byte|gpt2|hf"),
	F(data.tokenizer_path, "data.tokenizer_path", CLP_CFG_STRING, "\"\"",
	  "hf: model directory or tokenizer.json / vocab.txt / vocab.json (set: hf)", 0, 0, NULL),
	F(data.bpe_vocab, "data.bpe_vocab", CLP_CFG_STRING, "\"\"", "GPT-2 vocab.json", 0, 0, NULL),
	F(data.bpe_merges, "data.bpe_merges", CLP_CFG_STRING, "\"\"", "GPT-2 merges.txt", 0, 0,
	  NULL),
	F(data.val_fraction, "data.val_fraction", CLP_CFG_FLOAT, "0.05",
	  "share of the stream held out for validation", 0, 0.5, NULL),
	F(data.shuffle, "data.shuffle", CLP_CFG_BOOL, "true", "shuffle training sequences", 0, 0,
	  NULL),
	F(data.mask_prob, "data.mask_prob", CLP_CFG_FLOAT, "0.15", "bert: share of masked tokens",
	  0, 1, NULL),

	F(train.batch, "train.batch", CLP_CFG_INT, "8", "sequences per micro-batch", 1, 1 << 20,
	  NULL),
	F(train.seq, "train.seq", CLP_CFG_INT, "0", "tokens per sequence (0: model.ctx)", 0,
	  1 << 20, NULL),
	F(train.micro_batches, "train.micro_batches", CLP_CFG_INT, "1",
	  "micro-batches per step (gradient accumulation)", 1, 1 << 20, NULL),
	F(train.steps, "train.steps", CLP_CFG_INT, "1000", "optimizer steps", 0, 1L << 40, NULL),
	F(train.seed, "train.seed", CLP_CFG_INT, "1337", "seed of every random stream", 0,
	  1L << 62, NULL),
	F(train.device, "train.device", CLP_CFG_STRING, "\"\"",
	  "device selector, or one per local rank: \"0,1\" (\"\": CLPIPE_DEVICE, else by local "
	  "rank)", 0, 0, NULL),
	F(train.init, "train.init", CLP_CFG_STRING, "\"\"",
	  "start from these weights: a Hugging Face model directory, a checkpoint or a "
	  ".safetensors file (its config.json gives the model; optimizer, step and data start "
	  "fresh)", 0, 0, NULL),
	F(train.freeze, "train.freeze", CLP_CFG_STRING, "\"\"",
	  "parameters not trained: name globs, comma-separated, as checkpoints name them "
	  "(\"bert.embeddings.*,bert.encoder.layer.0.*\"); AdamW only", 0, 0, NULL),
	F(train.log, "train.log", CLP_CFG_STRING, "\"\"", "JSON-lines log file", 0, 0, NULL),
	F(train.trace, "train.trace", CLP_CFG_STRING, "\"\"",
	  "write a Chrome trace (and an SVG timeline) of one step of every rank", 0, 0, NULL),
	F(train.recompute, "train.recompute", CLP_CFG_BOOL, "false",
	  "keep only layer inputs; recompute activations in the backward (less memory)", 0, 0,
	  NULL),
	F(train.profile, "train.profile", CLP_CFG_BOOL, "false",
	  "print where the device time went (per kernel, from events) after training", 0, 0,
	  NULL),
	F(train.precision, "train.precision", CLP_CFG_STRING, "\"fp32\"",
	  "storage of activations, pipeline messages and the weights forward and backward read "
	  "(fp32 masters, gradients and optimizer state either way)", 0, 0, "fp32|bf16|fp16"),
	F(train.loss_scale, "train.loss_scale", CLP_CFG_FLOAT, "65536",
	  "fp16: initial dynamic loss scale (halved on overflow, doubled after "
	  "train.loss_scale_window good steps)", 1, 1e30, NULL),
	F(train.loss_scale_window, "train.loss_scale_window", CLP_CFG_INT, "2000",
	  "fp16: good steps in a row before the loss scale doubles", 1, 1L << 40, NULL),
	F(train.trace_step, "train.trace_step", CLP_CFG_INT, "0", "the step traced (0: the last)",
	  0, 1L << 40, NULL),
	F(train.trace_steps, "train.trace_steps", CLP_CFG_INT, "0",
	  "steps traced, ending with train.trace_step (0: one; with PipeFisher a whole cycle)", 0,
	  1 << 16, NULL),

	F(pipeline.schedule, "pipeline.schedule", CLP_CFG_STRING, "\"1f1b\"",
	  "pipeline schedule", 0, 0, "gpipe|1f1b|interleaved|chimera|chimera-fd|zbh1|skippipe"),
	F(pipeline.stages, "pipeline.stages", CLP_CFG_INT, "1",
	  "pipeline ranks per replica (D)", 1, 4096, NULL),
	F(pipeline.replicas, "pipeline.replicas", CLP_CFG_INT, "1",
	  "data-parallel replicas (R); the job has D x R ranks", 1, 65536, NULL),
	F(pipeline.chunks, "pipeline.chunks", CLP_CFG_INT, "1",
	  "model chunks per rank (interleaved schedule)", 1, 64, NULL),
	F(pipeline.layers, "pipeline.layers", CLP_CFG_INTS, "[]",
	  "layers per stage ([]: as even as possible)", 0, 100000, NULL),
	F(pipeline.deterministic, "pipeline.deterministic", CLP_CFG_BOOL, "false",
	  "reduce in rank order (bitwise reproducible replicas)", 0, 0, NULL),
	F(pipeline.deadline, "pipeline.deadline", CLP_CFG_FLOAT, "120",
	  "seconds a wait on another rank may take before the job stops", 0.001, 1e7, NULL),
	F(pipeline.replan, "pipeline.replan", CLP_CFG_BOOL, "true",
	  "ULFM: a lost stage with no other holder is re-planned over the survivors (false: "
	  "the run ends for tools/supervise.sh)", 0, 0, NULL),
	F(pipeline.bind, "pipeline.bind", CLP_CFG_STRING, "\"auto\"",
	  "bind each rank's threads near its device", 0, 0, "auto|none|core"),
	F(pipeline.layout, "pipeline.layout", CLP_CFG_STRING, "\"\"",
	  "rank layout from clpipe plan: each rank's device (\"host:selector\")", 0, 0, NULL),
	F(skip.paths, "skip.paths", CLP_CFG_STRING, "\"\"",
	  "skippipe: path set JSON (\"\": made by the path scheduler from skip.stage_nodes ...)", 0,
	  0, NULL),
	F(skip.stage_nodes, "skip.stage_nodes", CLP_CFG_INTS, "[]",
	  "skippipe: nodes per stage, e.g. [2, 1, 2, 1]; rank i serves the stage it falls in", 0,
	  65536, NULL),
	F(skip.path_len, "skip.path_len", CLP_CFG_INT, "0",
	  "skippipe: P, stages on every path, stage 0 counted once (0: all, no skipping)", 0, 4096,
	  NULL),
	F(skip.max_jump, "skip.max_jump", CLP_CFG_INT, "4",
	  "skippipe: J, most stages a hop goes past the furthest reached", 1, 4096, NULL),
	F(skip.max_swaps, "skip.max_swaps", CLP_CFG_INT, "2",
	  "skippipe: W, swaps of two adjacent stages per path (0: none)", 0, 4096, NULL),
	F(skip.memory, "skip.memory", CLP_CFG_INT, "3",
	  "skippipe: M, micro-batches a node holds at once (0: no cap)", 0, 1 << 20, NULL),
	F(skip.iterations, "skip.iterations", CLP_CFG_INT, "300",
	  "skippipe: path scheduler moves (unit costs, free links)", 0, 1L << 30, NULL),
	F(skip.seed, "skip.seed", CLP_CFG_INT, "1", "skippipe: path scheduler seed", 0, 1L << 62,
	  NULL),
	F(pipeline.pipefisher, "pipeline.pipefisher", CLP_CFG_BOOL, "false",
	  "PipeFisher: put the K-FAC work into the schedule's bubbles (optim.name = kfac; sets "
	  "kfac.interval to the cycle's K)", 0, 0, NULL),
	F(pipeline.pipefisher_mem_cap, "pipeline.pipefisher_mem_cap", CLP_CFG_INT, "-1",
	  "PipeFisher: bytes of inputs and output gradients a rank may keep for deferred factors "
	  "(-1: no cap)", -1, 1L << 50, NULL),
	F(pipeline.pipefisher_split, "pipeline.pipefisher_split", CLP_CFG_BOOL, "false",
	  "PipeFisher: one holder of a stage (Chimera's twin, a replica) inverts each layer and "
	  "sends the inverses to the others; factor all-reduces mid-step where they fit", 0, 0,
	  NULL),
	F(pipeline.pipefisher_phases, "pipeline.pipefisher_phases", CLP_CFG_BOOL, "true",
	  "PipeFisher with Shampoo: an inverse root longer than its rank's shortest bubble runs in "
	  "phases, one per Newton iteration (false: whole roots)", 0, 0, NULL),
	F(pipeline.optim_prep, "pipeline.optim_prep", CLP_CFG_BOOL, "true",
	  "run the optimizer's early part (Muon's momentum and Newton-Schulz) where a stage's "
	  "gradients are final, in the cool-down bubbles, not after the norm; same results", 0, 0,
	  NULL),
	F(pipeline.pipefisher_costs, "pipeline.pipefisher_costs", CLP_CFG_STRING, "\"\"",
	  "PipeFisher: cost table JSON for the pass (\"\": measured on each rank's device at "
	  "start-up)", 0, 0, NULL),
	F(pipeline.pipefisher_schedule, "pipeline.pipefisher_schedule", CLP_CFG_STRING, "\"\"",
	  "PipeFisher: run this saved K-step cycle (JSON) instead of running the pass", 0, 0,
	  NULL),
	F(optim.name, "optim.name", CLP_CFG_STRING, "\"adamw\"", "optimizer", 0, 0,
	  "adamw|kfac|muon|shampoo|soap"),
	F(optim.lr, "optim.lr", CLP_CFG_FLOAT, "1e-3", "peak learning rate", 0, 10, NULL),
	F(optim.min_lr, "optim.min_lr", CLP_CFG_FLOAT, "1e-4", "end of the cosine decay", 0, 10,
	  NULL),
	F(optim.warmup, "optim.warmup", CLP_CFG_INT, "100", "linear warmup steps", 0, 1L << 40,
	  NULL),
	F(optim.beta1, "optim.beta1", CLP_CFG_FLOAT, "0.9", "AdamW beta1", 0, 0.999999, NULL),
	F(optim.beta2, "optim.beta2", CLP_CFG_FLOAT, "0.95", "AdamW beta2", 0, 0.999999, NULL),
	F(optim.eps, "optim.eps", CLP_CFG_FLOAT, "1e-8", "AdamW epsilon", 1e-30, 1, NULL),
	F(optim.weight_decay, "optim.weight_decay", CLP_CFG_FLOAT, "0.1",
	  "decoupled weight decay (matrices and embeddings only)", 0, 10, NULL),
	F(optim.grad_clip, "optim.grad_clip", CLP_CFG_FLOAT, "1.0",
	  "global gradient-norm clip (0: none)", 0, 1e9, NULL),

	F(kfac.damping, "kfac.damping", CLP_CFG_FLOAT, "1e-3",
	  "K-FAC: lambda of the factored Tikhonov (pi) damping", 1e-12, 1e6, NULL),
	F(kfac.interval, "kfac.interval", CLP_CFG_INT, "10",
	  "K-FAC: refresh interval K (factors from each cycle's first step)", 1, 1 << 20, NULL),
	F(kfac.ema, "kfac.ema", CLP_CFG_FLOAT, "0",
	  "K-FAC: moving average of the factors over cycles (0: none)", 0, 0.999999, NULL),
	F(kfac.base, "kfac.base", CLP_CFG_STRING, "\"sgd\"",
	  "K-FAC: optimizer of the preconditioned gradients", 0, 0, "sgd|adamw"),
	F(kfac.lr, "kfac.lr", CLP_CFG_FLOAT, "0",
	  "K-FAC: peak learning rate of the K-FAC layers, same schedule (0: optim.lr)", 0, 100,
	  NULL),
	F(kfac.momentum, "kfac.momentum", CLP_CFG_FLOAT, "0.9", "K-FAC sgd: momentum", 0,
	  0.999999, NULL),
	F(kfac.kl_clip, "kfac.kl_clip", CLP_CFG_FLOAT, "1e-3", "K-FAC sgd: KL clipping (0: none)",
	  0, 1e6, NULL),
	F(muon.lr, "muon.lr", CLP_CFG_FLOAT, "0.02",
	  "Muon: peak learning rate of the layers' weight matrices, same schedule (0: optim.lr)",
	  0, 100, NULL),
	F(muon.momentum, "muon.momentum", CLP_CFG_FLOAT, "0.95", "Muon: momentum", 0, 0.999999,
	  NULL),
	F(muon.nesterov, "muon.nesterov", CLP_CFG_BOOL, "true", "Muon: Nesterov momentum", 0, 0,
	  NULL),
	F(muon.ns_steps, "muon.ns_steps", CLP_CFG_INT, "5", "Muon: Newton-Schulz iterations", 0,
	  99, NULL),
	F(muon.delay, "muon.delay", CLP_CFG_BOOL, "false",
	  "Muon: one-step-delayed update (step t applies the orthogonalised direction of step "
	  "t-1, so its Newton-Schulz can run in any bubble of step t)", 0, 0, NULL),
	F(shampoo.lr, "shampoo.lr", CLP_CFG_FLOAT, "0.1",
	  "Shampoo: peak learning rate of the layers' weight matrices, same schedule (0: optim.lr)",
	  0, 100, NULL),
	F(shampoo.momentum, "shampoo.momentum", CLP_CFG_FLOAT, "0",
	  "Shampoo: momentum (lerp of the gradient toward the previous update)", 0, 0.999999,
	  NULL),
	F(shampoo.eps, "shampoo.eps", CLP_CFG_FLOAT, "1e-6",
	  "Shampoo: the statistics L and R start at eps I", 0, 1e6, NULL),
	F(shampoo.interval, "shampoo.interval", CLP_CFG_INT, "1",
	  "Shampoo: inverse roots refreshed every interval-th step (zero update before the first; "
	  "with pipeline.pipefisher the least K of the pass's cycle)",
	  1, 1 << 20, NULL),
	F(shampoo.iters, "shampoo.iters", CLP_CFG_INT, "25",
	  "Shampoo: coupled Newton iterations per inverse root", 0, 1000, NULL),
	F(shampoo.graft, "shampoo.graft", CLP_CFG_BOOL, "false",
	  "Shampoo: scale each matrix's update to the norm of Adam's (optim.beta2, optim.eps)",
	  0, 0, NULL),
	F(shampoo.warmup, "shampoo.warmup", CLP_CFG_INT, "0",
	  "Shampoo: also refresh the roots at every step up to this one (a start-up phase before "
	  "shampoo.interval applies)", 0, 1 << 20, NULL),
	F(shampoo.beta2, "shampoo.beta2", CLP_CFG_FLOAT, "1",
	  "Shampoo: statistics as moving averages L = beta2 L + (1 - beta2) G G^T (1: sums, the "
	  "package's)", 0.5, 1, NULL),
	F(shampoo.stale, "shampoo.stale", CLP_CFG_BOOL, "false",
	  "Shampoo: PipeFisher's stale roots (what pipeline.pipefisher computes) serially: roots "
	  "of the statistics after the first step of each shampoo.interval-step cycle, active "
	  "from the next cycle", 0, 0, NULL),
	F(soap.lr, "soap.lr", CLP_CFG_FLOAT, "1e-2",
	  "SOAP: peak learning rate of the layers' weight matrices, same schedule (0: optim.lr)",
	  0, 100, NULL),
	F(soap.beta1, "soap.beta1", CLP_CFG_FLOAT, "0.95", "SOAP: Adam's beta1 in the eigenbasis",
	  0, 0.999999, NULL),
	F(soap.beta2, "soap.beta2", CLP_CFG_FLOAT, "0.95", "SOAP: Adam's beta2 in the eigenbasis",
	  0, 0.999999, NULL),
	F(soap.shampoo_beta, "soap.shampoo_beta", CLP_CFG_FLOAT, "-1",
	  "SOAP: the statistics' moving average L = b L + (1 - b) G G^T (-1: soap.beta2)", -1,
	  0.999999, NULL),
	F(soap.eps, "soap.eps", CLP_CFG_FLOAT, "1e-8", "SOAP: Adam's epsilon", 1e-30, 1, NULL),
	F(soap.weight_decay, "soap.weight_decay", CLP_CFG_FLOAT, "-1",
	  "SOAP: decoupled weight decay of its matrices (-1: optim.weight_decay)", -1, 10, NULL),
	F(soap.frequency, "soap.frequency", CLP_CFG_INT, "10",
	  "SOAP: eigenbases refreshed every frequency-th step (precondition_frequency; with "
	  "pipeline.pipefisher the least K of the pass's cycle)", 1,
	  1 << 20, NULL),
	F(soap.init_iters, "soap.init_iters", CLP_CFG_INT, "3",
	  "SOAP: refresh rounds from Q = I for the first eigenbases (the package: eigh)", 1, 100,
	  NULL),
	F(soap.correct_bias, "soap.correct_bias", CLP_CFG_BOOL, "true",
	  "SOAP: Adam's bias correction of the step size", 0, 0, NULL),
	F(soap.stale, "soap.stale", CLP_CFG_BOOL, "false",
	  "SOAP: PipeFisher's stale eigenbases (what pipeline.pipefisher computes) serially: "
	  "bases from the statistics after the first step of each soap.frequency-step cycle, "
	  "active from the next cycle", 0, 0, NULL),

	F(eval.every, "eval.every", CLP_CFG_INT, "100", "steps between evaluations (0: only at the "
	  "end)", 0, 1L << 40, NULL),
	F(eval.batches, "eval.batches", CLP_CFG_INT, "8", "validation micro-batches per evaluation "
	  "(0: the whole validation split)", 0, 1 << 20, NULL),
	F(eval.target_ratio, "eval.target_ratio", CLP_CFG_FLOAT, "0",
	  "stop when validation loss <= this x the unigram baseline (0: never)", 0, 10, NULL),
	F(eval.dump, "eval.dump", CLP_CFG_STRING, "\"\"",
	  "clpipe eval: write the evaluated inputs and targets to this JSON file (to check the "
	  "loss elsewhere)", 0, 0, NULL),

	F(ckpt.dir, "ckpt.dir", CLP_CFG_STRING, "\"\"",
	  "the run's directory of checkpoints (\"\": clpipe train makes runs/<date>-<time>; "
	  "\"none\" or --no-ckpt: no checkpoints)", 0, 0, NULL),
	F(ckpt.every, "ckpt.every", CLP_CFG_INT, "0", "steps between checkpoints (0: by "
	  "ckpt.minutes and at the end)", 0, 1L << 40, NULL),
	F(ckpt.minutes, "ckpt.minutes", CLP_CFG_FLOAT, "10",
	  "also save when this many minutes of training passed since the last checkpoint (0: "
	  "never by the clock)", 0, 1e9, NULL),
	F(ckpt.keep, "ckpt.keep", CLP_CFG_INT, "3", "checkpoints kept (0: all; the newest is never "
	  "deleted)", 0, 1 << 20, NULL),
	F(ckpt.resume, "ckpt.resume", CLP_CFG_BOOL, "false",
	  "continue from the latest checkpoint in ckpt.dir (--resume; --resume=auto starts fresh "
	  "when there is none)", 0, 0, NULL),
	F(ckpt.overwrite, "ckpt.overwrite", CLP_CFG_BOOL, "false",
	  "a fresh run may delete the checkpoints of another run in ckpt.dir (else it is refused)",
	  0, 0, NULL),

	F(sample.prompt, "sample.prompt", CLP_CFG_STRING, "\"\"", "text to continue", 0, 0, NULL),
	F(sample.length, "sample.length", CLP_CFG_INT, "200", "tokens to generate", 0, 1 << 24,
	  NULL),
	F(sample.top_k, "sample.top_k", CLP_CFG_INT, "40", "sample from the k likeliest (0: all)",
	  0, 1 << 24, NULL),
	F(sample.temperature, "sample.temperature", CLP_CFG_FLOAT, "0.8",
	  "softmax temperature (0: greedy)", 0, 100, NULL),
	F(sample.ckpt, "sample.ckpt", CLP_CFG_STRING, "\"\"", "checkpoint for eval and sample", 0,
	  0, NULL),
	F(sample.skip_layers, "sample.skip_layers", CLP_CFG_INTS, "[]",
	  "eval/sample with these layers removed (identity)", 0, 100000, NULL),
	F(sample.skip_stages, "sample.skip_stages", CLP_CFG_INTS, "[]",
	  "eval/sample with these stages removed (their layers, by pipeline.stages and "
	  "pipeline.layers)", 0, 100000, NULL),
};

_Static_assert(sizeof(fields) / sizeof(fields[0]) <=
		       sizeof(((clp_train_config *)0)->origin) / sizeof(clp_cfg_origin),
	       "clp_train_config.origin needs a slot per field");

const clp_cfg_schema clp_train_schema = {"training", fields, sizeof(fields) / sizeof(fields[0]),
					 offsetof(clp_train_config, origin)};

/* optim.name of each kind, as optim.name's choices above list them. */
static const char *const optim_names[CLP_OPTIM_NKINDS] = {
	[CLP_OPTIM_ADAMW] = "adamw",
	[CLP_OPTIM_KFAC] = "kfac",
	[CLP_OPTIM_MUON] = "muon",
	[CLP_OPTIM_SHAMPOO] = "shampoo",
	[CLP_OPTIM_SOAP] = "soap",
};

clp_status clp_train_optim_kind(const clp_train_config *c, clp_optim_kind *out)
{
	for (int k = 0; k < CLP_OPTIM_NKINDS; k++)
		if (!strcmp(c->optim.name, optim_names[k])) {
			*out = (clp_optim_kind)k;
			return CLP_OK;
		}
	return clp_error(CLP_ERR_INVALID, "optim.name = \"%s\" is not an optimizer "
			 "(adamw|kfac|muon|shampoo|soap)",
			 c->optim.name);
}
