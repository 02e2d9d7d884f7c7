/* Checkpoints: model weights and optimizer state as safetensors, a manifest written last.
 *
 * Layout of one save (docs/CHECKPOINTS.md):
 *   <root>/step-00000100/model.safetensors       weights, one tensor per parameter, under the
 *                                                Hugging Face names the model uses
 *                       optimizer.safetensors   optimizer state (moments, ...)
 *                       part-rank0.json         what rank 0 wrote (sizes, CRC-32)
 *                       manifest.json           written last: the checkpoint is complete
 * With several ranks each writes model-rank<R>.safetensors / optimizer-rank<R>.safetensors and
 * part-rank<R>.json; rank 0 writes the manifest after a barrier. Readers gather tensors by name
 * from whichever file holds them, so a checkpoint loads with any number of ranks.
 *
 * Atomicity: every file goes to a temporary name, is fsynced and renamed; the directory is
 * fsynced; the manifest comes only after all files are durable, and a directory without a
 * manifest is ignored (and reported) when looking for the latest checkpoint. Older checkpoints
 * are deleted only after the new manifest is durable.
 *
 * Typical use (one rank):
 *   clp_ckpt_writer_create(&w, "ckpt", step, 0, 1);
 *   clp_ckpt_writer_identity(w, "preset", "gpt2"); ... (what must match on resume)
 *   clp_ckpt_writer_meta(w, "data.pos", text); ...  (config, RNG counters, data position)
 *   clp_ckpt_writer_add(w, CLP_CKPT_MODEL, "h.0.attn.c_attn.weight", ptr, 2, shape); ...
 *   clp_ckpt_writer_write(w);          every rank
 *   (barrier)
 *   clp_ckpt_writer_commit(w, keep);   rank 0
 *   clp_ckpt_writer_free(w);
 * and to resume:
 *   clp_ckpt_open_latest(&c, "ckpt");  (or clp_ckpt_open on a given path)
 *   clp_ckpt_check_identity(c, expected, n, params_hash);
 *   clp_ckpt_read(c, CLP_CKPT_MODEL, name, dst, ndim, shape); ... clp_ckpt_meta(c, "data.pos");
 *   clp_ckpt_close(c); */
#ifndef CLP_IO_CHECKPOINT_H
#define CLP_IO_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "cl/base/half.h"
#include "cl/base/status.h"
#include "engine/io/safetensors.h"

typedef enum clp_ckpt_kind { CLP_CKPT_MODEL, CLP_CKPT_OPTIM } clp_ckpt_kind;

typedef struct clp_ckpt_kv {
	const char *key, *value;
} clp_ckpt_kv;

/* One parameter's name and shape, for the identity hash. */
typedef struct clp_ckpt_param {
	const char *name;
	int ndim;
	int64_t shape[CLP_ST_MAX_DIM];
} clp_ckpt_param;

/* FNV-1a 64 over the parameters' names and shapes in name order (so any order of the list, and
 * any split over ranks, gives the same hash). Stored in the manifest as identity "params". */
uint64_t clp_ckpt_params_hash(const clp_ckpt_param *p, int n);

/* ---- writing ---- */
typedef struct clp_ckpt_writer clp_ckpt_writer;

/* Begin the checkpoint of `step` under root (created if needed). Removes a manifest left in
 * that step's directory by an earlier run, so the directory never looks complete while it is
 * being overwritten. */
clp_status clp_ckpt_writer_create(clp_ckpt_writer **w, const char *root, long step, int rank,
				  int nranks);
/* Record a tensor of this rank; the data must stay valid until clp_ckpt_writer_write. */
clp_status clp_ckpt_writer_add(clp_ckpt_writer *w, clp_ckpt_kind kind, const char *name,
			       const float *data, int ndim, const int64_t *shape);
/* Identity fields (compared on resume; preset, layer count, ...) and free-form metadata
 * (effective config, RNG counters, data position). Rank 0's go into the manifest; every rank's
 * also go into its files' safetensors metadata. */
clp_status clp_ckpt_writer_identity(clp_ckpt_writer *w, const char *key, const char *value);
clp_status clp_ckpt_writer_meta(clp_ckpt_writer *w, const char *key, const char *value);
/* Write this rank's files and part-rank<R>.json durably. */
clp_status clp_ckpt_writer_write(clp_ckpt_writer *w);
/* Rank 0, after every rank's write: check all parts, write manifest.json, fsync, then delete
 * all but the newest `keep` complete checkpoints (this one is never deleted, even when newer
 * steps of another run are there) (keep <= 0: delete none) and incomplete
 * leftovers older than this step. */
clp_status clp_ckpt_writer_commit(clp_ckpt_writer *w, int keep);
/* The directory of this checkpoint (<root>/step-XXXXXXXX). */
const char *clp_ckpt_writer_dir(const clp_ckpt_writer *w);
void clp_ckpt_writer_free(clp_ckpt_writer *w);

/* A step directory under a root. */
typedef struct clp_ckpt_entry {
	char *dir; /* <root>/step-... */
	long step;
	int complete; /* has a manifest */
} clp_ckpt_entry;

/* List root's step-<digits> directories, newest step first. A missing root gives n = 0. */
clp_status clp_ckpt_list(const char *root, clp_ckpt_entry **e, int *n);
void clp_ckpt_list_free(clp_ckpt_entry *e, int n);

/* ---- reading ---- */
typedef struct clp_ckpt clp_ckpt;

/* Open a checkpoint. path may be: a checkpoint directory (with manifest.json); a root holding
 * step-* directories (the latest complete one is opened); a .safetensors file; or a Hugging
 * Face model directory (model.safetensors, or model.safetensors.index.json with shards).
 * Sizes and headers of all files are checked here; each file's CRC-32 on the first read from
 * it. A directory without a manifest is refused, naming it. */
clp_status clp_ckpt_open(clp_ckpt **c, const char *path);
/* The latest complete checkpoint under root; CLP_ERR_NOT_FOUND when there is none. Newer
 * incomplete ones are skipped and listed in clp_ckpt_notes(). */
clp_status clp_ckpt_open_latest(clp_ckpt **c, const char *root);
void clp_ckpt_close(clp_ckpt *c);

const char *clp_ckpt_path(const clp_ckpt *c);
long clp_ckpt_step(const clp_ckpt *c); /* -1 when unknown (a bare safetensors file) */
/* Lines about checkpoints that were skipped ("" when none), for the caller to print. */
const char *clp_ckpt_notes(const clp_ckpt *c);
const char *clp_ckpt_identity(const clp_ckpt *c, const char *key); /* NULL when absent */
const char *clp_ckpt_meta(const clp_ckpt *c, const char *key);     /* NULL when absent */

/* Refuse a checkpoint of another model: every expected field must equal the checkpoint's, and
 * params_hash (unless 0) the stored hash. The message names the checkpoint and every field
 * that differs ("preset is llama in the checkpoint, gpt2 in this run"). A checkpoint without
 * identity (a foreign safetensors file) passes; per-tensor shape checks still apply. */
clp_status clp_ckpt_check_identity(const clp_ckpt *c, const clp_ckpt_kv *expected, int n,
				   uint64_t params_hash);

/* Tensors of a kind across all files (for listing and for loading foreign files). */
int clp_ckpt_count(const clp_ckpt *c, clp_ckpt_kind kind);
const clp_st_tensor *clp_ckpt_tensor(const clp_ckpt *c, clp_ckpt_kind kind, int i);
const clp_st_tensor *clp_ckpt_find(const clp_ckpt *c, clp_ckpt_kind kind, const char *name);
/* Read a tensor by name into dst (converted to float). The expected shape is checked; the
 * message names the checkpoint, the tensor and both shapes. */
clp_status clp_ckpt_read(clp_ckpt *c, clp_ckpt_kind kind, const char *name, float *dst,
			 int ndim, const int64_t *shape);
/* Check the CRC-32 of every file now (otherwise done lazily by clp_ckpt_read). */
clp_status clp_ckpt_verify(clp_ckpt *c);

/* ---- export (checkpoint_export.c) ---- */

/* Write the model of the checkpoint at ckpt (any path clp_ckpt_open takes; any number of rank
 * files) into out_dir as a Hugging Face model directory: model.safetensors with every model
 * tensor under its name, in dt (CLP_BF16 / CLP_F16: each fp32 master rounded to nearest even as
 * cl/base/half.h does; CLP_F32: as stored), config.json from beside the checkpoint with "dtype" and
 * "torch_dtype" set ("bfloat16", "float16", "float32"), and the tokenizer files found there
 * (vocab.json, merges.txt, tokenizer*.json, special_tokens_map.json, vocab.txt), else those of
 * the stored config's data.tokenizer_path. The optimizer state is not exported. out_dir is
 * created; a checkpoint directory (with a manifest) or the source's own directory is refused,
 * so nothing saved is overwritten. *ntensors (may be NULL): tensors written. */
clp_status clp_ckpt_export(const char *ckpt, const char *out_dir, clp_dtype dt, int *ntensors);
/* The same; merge_lora: each weight with LoRA adapters is written as W + s B A (s: the
 * checkpoint's "lora.scale" metadata) and the adapters are left out (checkpoint_merge.c), so
 * the directory is the plain model transformers loads. Without merge_lora adapters are copied
 * as they are. */
clp_status clp_ckpt_export_lora(const char *ckpt, const char *out_dir, clp_dtype dt,
				int merge_lora, int *ntensors);
/* checkpoint_merge.c: is name a LoRA adapter ("X.lora_A.weight", "X.lora_B.weight")? Merge the
 * adapters of weight t (host copy w, fp32) into w; *merged says whether it had any. */
int clp_ckpt_lora_adapter(const char *name);
clp_status clp_ckpt_lora_merge(clp_ckpt *c, const clp_st_tensor *t, float *w, double scale,
			       int *merged);

#endif
