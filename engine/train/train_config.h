/* The configuration of `clpipe train`, `eval` and `sample`: one struct, one schema (config.h),
 * so every field is settable in a file and on the command line and printed as the effective
 * config. */
#ifndef CLP_TRAIN_CONFIG_H
#define CLP_TRAIN_CONFIG_H

#include "engine/io/config.h"

typedef struct clp_train_config {
	struct {
		char preset[16];
		long n_layer, d_model, n_head, n_kv_head, d_ff, vocab, ctx;
		double norm_eps, rope_theta, dropout;
		int tie_embeddings;  /* llama: no lm_head, the head is the token embedding */
		long lora_r;         /* LoRA rank (0: no adapters) */
		double lora_alpha;   /* LoRA: adapters scaled by lora_alpha / lora_r */
		double lora_dropout; /* LoRA: dropout on the adapters' input */
		char lora_targets[256]; /* LoRA: linears by name glob ("": all four of a layer) */
	} model;
	struct {
		char path[1024];     /* text file, or shard glob (format = "shards") */
		char val_path[1024]; /* shards: validation glob; "" splits by val_fraction */
		char format[16];     /* text | shards */
		char tokenizer[16];  /* byte | gpt2 | hf */
		char tokenizer_path[1024]; /* hf: a model directory or tokenizer file */
		char bpe_vocab[1024], bpe_merges[1024];
		double val_fraction;
		int shuffle;
		double mask_prob;    /* bert */
	} data;
	struct {
		long batch;          /* sequences per micro-batch */
		long seq;            /* tokens per sequence (0: model.ctx) */
		long micro_batches;  /* per step (gradient accumulation) */
		long steps;
		long seed;
		char init[1024];     /* weights to start from: an HF model directory, a checkpoint,
				      * a .safetensors file ("": random) */
		char freeze[1024];   /* parameter-name globs, comma-separated: not trained */
		char device[256];
		char log[1024];      /* JSON lines, one per step and evaluation */
		char trace[1024];    /* Chrome trace of one step (+ an SVG next to it) */
		long trace_step;     /* the step traced (0: the last) */
		long trace_steps;    /* steps traced, ending at trace_step (0: 1, PipeFisher: K) */
		int recompute;       /* recompute each layer's activations in the backward */
		int profile;         /* print the device time per kernel at the end */
		char precision[8];   /* fp32 | bf16 | fp16: storage of activations, messages and
				      * the parameters' working copy (docs/TRAINING.md) */
		double loss_scale;   /* fp16: the initial dynamic loss scale */
		long loss_scale_window; /* fp16: good steps before the scale doubles */
	} train;
	struct {
		char schedule[16];   /* gpipe | 1f1b | interleaved | chimera | chimera-fd | zbh1 |
				      * skippipe (the [skip] section below) */
		long stages;         /* D: pipeline ranks per replica */
		long replicas;       /* R: data-parallel replicas (ranks = D * R) */
		long chunks;         /* v: model chunks per rank (interleaved) */
		clp_cfg_ints layers; /* layers per stage ([]: as even as possible) */
		int deterministic;   /* reductions in rank order: bitwise reproducible */
		double deadline;     /* seconds any wait on another rank may take */
		int replan;          /* ULFM: re-plan a lost stage with no other holder */
		char bind[16];       /* auto | none | core */
		char layout[1024];   /* rank layout (clpipe plan): rank -> device "host:selector" */
		int pipefisher;      /* K-FAC work in the bubbles (optim.name = "kfac"; KFAC.md) */
		long pipefisher_mem_cap;        /* kept bytes per rank for deferred factors (-1: any) */
		int pipefisher_split;           /* split inversions between a stage's holders */
		int pipefisher_phases;          /* Shampoo: long roots in phases (default on) */
		int optim_prep;      /* the optimizer's early part where the gradients are final
				      * (Muon; OPT_PREP, docs/OPTIMIZERS.md) */
		char pipefisher_costs[1024];    /* cost table for the pass ("": measured at start) */
		char pipefisher_schedule[1024]; /* a saved K-step cycle to run ("": the pass's) */
	} pipeline;
	struct {
		char name[16];       /* adamw | kfac | muon | shampoo | soap (clp_train_optim_kind) */
		double lr, min_lr;
		long warmup;
		double beta1, beta2, eps, weight_decay, grad_clip;
	} optim;
	struct {                     /* pipeline.schedule = "skippipe" (docs/SKIPPIPE.md) */
		char paths[1024];    /* path set JSON (clpipe skip schedule --paths-out); "": made
				      * by the path scheduler from the settings below */
		clp_cfg_ints stage_nodes; /* nodes per stage: rank i serves the stage it falls in */
		long path_len;       /* P: stages on every path, stage 0 counted once (0: S) */
		long max_jump, max_swaps, memory; /* J, W, M */
		long iterations;     /* path scheduler: local-search moves */
		long seed;
	} skip;
	struct {                     /* optim.name = "kfac" (docs/KFAC.md) */
		double damping;      /* lambda of the pi damping */
		long interval;       /* K: steps per factor refresh cycle */
		double ema;          /* moving average of factors over cycles (0: none) */
		char base[16];       /* sgd | adamw: the optimizer of the preconditioned gradients */
		double lr;           /* peak learning rate of the K-FAC layers (0: optim.lr) */
		double momentum;     /* sgd */
		double kl_clip;      /* sgd: KL clipping bound (0: none) */
	} kfac;
	struct {                     /* optim.name = "muon" (docs/OPTIMIZERS.md) */
		double lr;           /* peak learning rate of the Muon matrices (0: optim.lr) */
		double momentum;
		int nesterov;
		long ns_steps;       /* Newton-Schulz iterations */
		int delay;           /* one-step-delayed update (P in AdamW's v between steps) */
	} muon;
	struct {                     /* optim.name = "shampoo" (docs/OPTIMIZERS.md) */
		double lr;           /* peak learning rate of the Shampoo matrices (0: optim.lr) */
		double momentum;
		double eps;          /* the statistics start at eps I */
		long interval;       /* roots refreshed every interval-th step */
		long iters;          /* coupled Newton iterations per root */
		int graft;           /* scale each update to Adam's norm (not the package's) */
		long warmup;         /* roots also at every step <= warmup (not the package's) */
		double beta2;        /* statistics as moving averages (< 1; 1: sums, the package's) */
		int stale;           /* PipeFisher's stale roots on one device (docs/OPTIMIZERS.md) */
	} shampoo;
	struct {                     /* optim.name = "soap" (docs/OPTIMIZERS.md, "SOAP") */
		double lr;           /* peak learning rate of the SOAP matrices (0: optim.lr) */
		double beta1, beta2; /* Adam's in the eigenbasis */
		double shampoo_beta; /* the statistics' moving average (< 0: beta2) */
		double eps;
		double weight_decay; /* decoupled (< 0: optim.weight_decay) */
		long frequency;      /* eigenbases refreshed every frequency-th step */
		long init_iters;     /* refresh rounds from Q = I for the first bases */
		int correct_bias;
		int stale;           /* PipeFisher's stale eigenbases on one device */
	} soap;
	struct {
		long every, batches;
		double target_ratio; /* stop early when val loss <= ratio x unigram baseline (0: never) */
		char dump[1024];     /* clpipe eval: the evaluated batches as JSON ("": none) */
	} eval;
	struct {
		char dir[1024];      /* "": none (clpipe train makes runs/<date>-<time>); "none" */
		long every, keep;
		double minutes;      /* also save when this many minutes passed since the last */
		int resume;
		int overwrite;       /* a fresh run may replace another run's checkpoints in dir */
	} ckpt;
	struct {
		char prompt[1024];
		long length, top_k;
		double temperature;
		char ckpt[1024];
		clp_cfg_ints skip_layers; /* eval/sample: layers run as identity */
		clp_cfg_ints skip_stages; /* eval/sample: stages (of pipeline.stages) skipped */
	} sample;
	clp_cfg_origin origin[160]; /* where each field's value came from, by schema index */
} clp_train_config;

extern const clp_cfg_schema clp_train_schema;

/* optim.name (the key a user writes) as a kind, parsed once by each user of a config (the
 * session at opening, the planner); what each kind provides is engine/train/optim_kind.h. A new
 * kind is a value here, its name in train_config.c (the names and optim.name's choices), and
 * an entry of that table. */
typedef enum clp_optim_kind {
	CLP_OPTIM_ADAMW,
	CLP_OPTIM_KFAC,
	CLP_OPTIM_MUON,
	CLP_OPTIM_SHAMPOO,
	CLP_OPTIM_SOAP,
	CLP_OPTIM_NKINDS
} clp_optim_kind;
/* The kind of c->optim.name; CLP_ERR_INVALID naming the value and the kinds otherwise. */
clp_status clp_train_optim_kind(const clp_train_config *c, clp_optim_kind *out);

#endif
