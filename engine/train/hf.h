/* Hugging Face transformers interop (docs/CHECKPOINTS.md).
 *
 * In: a model directory written by save_pretrained (GPT2LMHeadModel, LlamaForCausalLM,
 * BertForMaskedLM, or the Hub's older layouts) has a config.json that gives the preset and
 * every model.* setting, and its tensors under names that depend on the class that saved them
 * ("transformer.wte.weight" or "wte.weight"; "model.layers.0..." or "layers.0..."). Out: every
 * clpipe checkpoint gets a config.json and GPT2LMHeadModel's names, so
 * AutoModelForCausalLM.from_pretrained (or BertForMaskedLM) opens it with no code. */
#ifndef CLP_TRAIN_HF_H
#define CLP_TRAIN_HF_H

#include <stddef.h>

#include "engine/io/checkpoint.h"
#include "engine/model/model.h"
#include "engine/train/train_config.h"

#define CLP_HF_CONFIG "config.json"

/* path: a model directory, a checkpoint directory or a .safetensors file (its directory is
 * used). When that directory holds config.json, set cfg's model.* fields from it, each with the
 * origin "DIR/config.json KEY"; a value given before from anywhere but the defaults that differs
 * is an error naming both (clp_cfg_set_strict). A llama's model.ctx may be set lower than the
 * file's max_position_embeddings (it only bounds the sequence). With vocab.json and merges.txt
 * next to a GPT-2 config, data.tokenizer becomes "gpt2" with those files; else with
 * tokenizer.json or vocab.txt there, data.tokenizer becomes "hf" with data.tokenizer_path the
 * directory (neither when a tokenizer is configured). Settings
 * clpipe cannot run (another activation, attention biases on llama, rope scaling, ...) are
 * refused, naming the file and key. *found is 0 when there is no config.json (not an error). */
clp_status clp_hf_config_apply(const char *path, clp_train_config *cfg, int *found);

/* config.json for a resolved model, as transformers writes it for the preset's class
 * (GPT2LMHeadModel, LlamaForCausalLM, BertForMaskedLM); norm_eps and rope_theta as configured
 * (doubles, so 1e-5 prints as 1e-05, not its float neighbour); eos_id, pad_id < 0: none.
 * malloc()ed text, NULL when out of memory. */
char *clp_hf_config_json(const clp_model_config *m, double norm_eps, double rope_theta,
			 double dropout, int eos_id, int pad_id);

/* A checkpoint of several ranks (model-rank<R>.safetensors): write
 * model.safetensors.index.json, the weight map transformers reads sharded models by, from the
 * model files' headers (durably; the caller fsyncs the directory). */
clp_status clp_hf_write_index(const char *dir);

#define CLP_HF_NAME (CLP_MAX_NAME + 32)
/* The name a checkpoint stores a parameter (clpipe's table name) under: GPT-2's get
 * GPT2LMHeadModel's "transformer." prefix; llama and bert names are already their LM classes'. */
void clp_hf_save_name(clp_preset p, const char *name, char *out, size_t n);
/* The names a file may hold it under, best first (the save name, then the other layouts
 * transformers writes); returns how many (at most max). */
int clp_hf_load_names(clp_preset p, const char *name, char (*out)[CLP_HF_NAME], int max);
/* Read a parameter (name + suffix, e.g. ".exp_avg") under whichever of its names the checkpoint
 * holds; when none is there the error names the table name and the names tried. */
clp_status clp_hf_read(clp_ckpt *c, clp_ckpt_kind kind, clp_preset p, const char *name,
		       const char *suffix, float *dst, int ndim, const int64_t *shape);

#endif
