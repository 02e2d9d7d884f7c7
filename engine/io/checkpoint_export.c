/* A checkpoint's model as a 16-bit Hugging Face model directory (clp_ckpt_export, see
 * checkpoint.h): every model tensor, from however many rank files, rounded from the fp32
 * masters to bf16 or fp16 (cl/base/half.h, the rounding the devices use) into one
 * model.safetensors; config.json copied from beside the checkpoint with its dtype set; the
 * tokenizer's files copied when present. */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cl/base/durable.h"
#include "cl/base/half.h"
#include "cl/base/json_util.h"
#include "engine/io/checkpoint.h"
#include "engine/io/safetensors.h"

/* The directory a checkpoint path names (a .safetensors file: its directory). */
static void ckpt_dir(const char *path, char *out, size_t n)
{
	struct stat sb;
	const char *slash;

	if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		snprintf(out, n, "%s", path);
		return;
	}
	slash = strrchr(path, '/');
	if (!slash)
		snprintf(out, n, ".");
	else
		snprintf(out, n, "%.*s", (int)(slash != path ? slash - path : 1), path);
}

static const char *torch_name(clp_dtype dt)
{
	return dt == CLP_BF16 ? "bfloat16" : dt == CLP_F16 ? "float16" : "float32";
}

/* config.json of src_dir into out_dir with dtype (transformers 5) and torch_dtype (4) set. */
static clp_status export_config(const char *src_dir, const char *out_dir, clp_dtype dt)
{
	char src[PATH_MAX + 32], dst[PATH_MAX + 32];
	json_t *j;
	clp_status st;

	snprintf(src, sizeof(src), "%s/config.json", src_dir);
	snprintf(dst, sizeof(dst), "%s/config.json", out_dir);
	CLP_TRY(clp_json_load(src, &j));
	if (!json_is_object(j)) {
		json_decref(j);
		return clp_error(CLP_ERR_FORMAT, "%s: expected a JSON object at the top", src);
	}
	json_object_set_new(j, "dtype", json_string(torch_name(dt)));
	json_object_set_new(j, "torch_dtype", json_string(torch_name(dt)));
	st = clp_io_write_json(dst, j, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
			       JSON_REAL_PRECISION(15), 1, 0);
	json_decref(j);
	return st;
}

/* The tokenizer files transformers and clpipe read beside a model, when present. */
static clp_status copy_tokenizer(const char *src_dir, const char *out_dir)
{
	static const char *const names[] = {"vocab.json", "merges.txt", "tokenizer.json",
					    "tokenizer_config.json", "special_tokens_map.json",
					    "vocab.txt"};
	int found = 0;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char src[PATH_MAX + 32], dst[PATH_MAX + 32], *data = NULL;
		size_t n = 0;
		clp_status st;

		snprintf(src, sizeof(src), "%s/%s", src_dir, names[i]);
		snprintf(dst, sizeof(dst), "%s/%s", out_dir, names[i]);
		if (access(src, F_OK) != 0)
			continue;
		CLP_TRY(clp_io_read_file(src, &data, &n));
		st = clp_io_write_file(dst, data, n);
		free(data);
		CLP_TRY(st);
		found = 1;
	}
	return found ? CLP_OK : CLP_ERR_NOT_FOUND;
}

/* The tokenizer a run read from data.tokenizer_path (a directory, or a file whose directory
 * holds its companions), named in the checkpoint's stored config: "" when none (or a path
 * with TOML escapes, left alone). */
static void stored_tokenizer_dir(const clp_ckpt *c, char *out, size_t n)
{
	const char *cfg = clp_ckpt_meta(c, "config"), *p, *q;
	static const char key[] = "\ntokenizer_path = \"";

	out[0] = '\0';
	if (!cfg || !(p = strstr(cfg, key)))
		return;
	p += sizeof(key) - 1;
	q = strchr(p, '"');
	if (!q || q == p || memchr(p, '\\', (size_t)(q - p)) || (size_t)(q - p) >= n)
		return;
	snprintf(out, n, "%.*s", (int)(q - p), p);
	if (access(out, F_OK) != 0) {
		out[0] = '\0';
		return;
	}
	{
		struct stat sb;

		if (stat(out, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
			char *slash = strrchr(out, '/');

			if (slash)
				*slash = '\0';
			else
				snprintf(out, n, ".");
		}
	}
}

/* Refuse to write into a checkpoint (its manifest would no longer describe its files) or into
 * the directory being read. */
static clp_status check_out(const char *src_dir, const char *out_dir)
{
	char a[PATH_MAX], b[PATH_MAX], m[PATH_MAX + 32];
	clp_ckpt *c = NULL;

	snprintf(m, sizeof(m), "%s/manifest.json", out_dir);
	if (access(m, F_OK) == 0)
		return clp_error(CLP_ERR_INVALID, "%s holds a checkpoint (manifest.json): export "
				 "into another directory", out_dir);
	if (clp_ckpt_open_latest(&c, out_dir) == CLP_OK) { /* a run's directory of them */
		clp_ckpt_close(c);
		return clp_error(CLP_ERR_INVALID, "%s is a run's directory of checkpoints (it holds "
				 "step-* checkpoints): export into another directory", out_dir);
	}
	clp_error_clear();
	if (realpath(src_dir, a) && realpath(out_dir, b) && !strcmp(a, b))
		return clp_error(CLP_ERR_INVALID, "%s is the checkpoint's own directory: export "
				 "into another one", out_dir);
	return CLP_OK;
}

/* Model tensor i of c in dt, added to w; its buffer goes to bufs[(*nb)++] (freed by the
 * caller once w is written). scale > 0: LoRA adapters merged into it (*merged: 1 if it had
 * some). */
static clp_status export_tensor(clp_ckpt *c, clp_st_writer *w, clp_dtype dt, int i, double scale,
				int merge_lora, int *merged, void **bufs, int *nb)
{
	const clp_st_tensor *t = clp_ckpt_tensor(c, CLP_CKPT_MODEL, i);
	size_t numel = (size_t)t->numel;
	float *f = malloc((numel ? numel : 1) * sizeof(float));
	uint16_t *h;
	clp_status st;

	*merged = 0;
	if (!f)
		return clp_error(CLP_ERR_NOMEM, "export: out of host memory for \"%s\" (%zu "
				 "elements)", t->name, numel);
	st = clp_ckpt_read(c, CLP_CKPT_MODEL, t->name, f, t->ndim, t->shape);
	if (st == CLP_OK && merge_lora)
		st = clp_ckpt_lora_merge(c, t, f, scale, merged);
	if (st != CLP_OK) {
		free(f);
		return st;
	}
	if (dt == CLP_F32) {
		bufs[(*nb)++] = f;
		return clp_st_writer_add(w, t->name, f, t->ndim, t->shape);
	}
	h = malloc((numel ? numel : 1) * sizeof(uint16_t));
	if (!h) {
		free(f);
		return clp_error(CLP_ERR_NOMEM, "export: out of host memory for \"%s\"", t->name);
	}
	clp_dtype_pack(dt, h, f, numel);
	free(f);
	bufs[(*nb)++] = h;
	return clp_st_writer_add16(w, t->name, dt == CLP_BF16 ? CLP_ST_BF16 : CLP_ST_F16, h,
				   t->ndim, t->shape);
}

/* --merge-lora: the adapters' scale from c's metadata (a checkpoint with adapters has it). */
static clp_status lora_scale(clp_ckpt *c, int n, double *scale)
{
	const char *v = clp_ckpt_meta(c, "lora.scale");

	*scale = v ? atof(v) : 0;
	for (int i = 0; !v && i < n; i++)
		if (clp_ckpt_lora_adapter(clp_ckpt_tensor(c, CLP_CKPT_MODEL, i)->name))
			return clp_error(CLP_ERR_FORMAT, "%s: LoRA adapters but no lora.scale in "
					 "its metadata", clp_ckpt_path(c));
	return CLP_OK;
}

/* The tokenizer files beside the checkpoint, else those of the run's data.tokenizer_path;
 * none: fine (the byte tokenizer needs no file). */
static clp_status export_tokenizer(clp_ckpt *c, const char *dir, const char *out_dir)
{
	char tok[PATH_MAX];
	clp_status st = copy_tokenizer(dir, out_dir);

	stored_tokenizer_dir(c, tok, sizeof(tok));
	if (st == CLP_ERR_NOT_FOUND && tok[0]) /* none beside it: the run's own */
		st = copy_tokenizer(tok, out_dir);
	return st == CLP_ERR_NOT_FOUND ? CLP_OK : st;
}

/* The steps of clp_ckpt_export from the checkpoint c in dir: *w, *bufs (nb of them) are the
 * caller's to free; *nout the tensors exported (merge_lora: adapters merged and left out). */
static clp_status export_steps(clp_ckpt *c, const char *dir, const char *out_dir, clp_dtype dt,
			       int merge_lora, clp_st_writer **w, void ***bufs, int *nb, int *nout)
{
	char path[PATH_MAX + 32], note[PATH_MAX + 64];
	double scale = 0;
	int n, nmerged = 0;

	CLP_TRY(clp_io_mkdirs(out_dir));
	CLP_TRY(check_out(dir, out_dir));
	snprintf(path, sizeof(path), "%s/config.json", dir);
	if (access(path, F_OK) != 0) /* before anything is written */
		return clp_error(CLP_ERR_NOT_FOUND, "%s: not found (transformers needs the model's "
				 "config.json beside its weights; a clpipe checkpoint has one from "
				 "rank 0)", path);
	snprintf(path, sizeof(path), "%s/model.safetensors", out_dir);
	CLP_TRY(clp_st_writer_create(w, path));
	n = clp_ckpt_count(c, CLP_CKPT_MODEL);
	if (n == 0)
		return clp_error(CLP_ERR_FORMAT, "%s: no model tensors to export", clp_ckpt_path(c));
	if (!(*bufs = calloc((size_t)n, sizeof(**bufs))))
		return clp_error(CLP_ERR_NOMEM, "export: out of host memory");
	if (merge_lora)
		CLP_TRY(lora_scale(c, n, &scale));
	for (int i = 0; i < n; i++) {
		int merged;

		if (merge_lora && clp_ckpt_lora_adapter(clp_ckpt_tensor(c, CLP_CKPT_MODEL, i)->name))
			continue;
		CLP_TRY(export_tensor(c, *w, dt, i, scale, merge_lora, &merged, *bufs, nb));
		nmerged += merged;
		(*nout)++;
	}
	if (merge_lora && nmerged == 0)
		return clp_error(CLP_ERR_INVALID, "export --merge-lora: %s has no LoRA adapters",
				 clp_ckpt_path(c));
	snprintf(note, sizeof(note), "%s of %s%s", clp_dtype_name(dt), clp_ckpt_path(c),
		 merge_lora ? ", LoRA merged" : "");
	CLP_TRY(clp_st_writer_meta(*w, "format", "pt"));
	CLP_TRY(clp_st_writer_meta(*w, "clpipe.export", note));
	CLP_TRY(clp_st_writer_finish(*w, NULL, NULL));
	CLP_TRY(export_config(dir, out_dir, dt));
	CLP_TRY(export_tokenizer(c, dir, out_dir));
	return clp_io_fsync_dir(out_dir);
}

clp_status clp_ckpt_export(const char *ckpt, const char *out_dir, clp_dtype dt, int *ntensors)
{
	return clp_ckpt_export_lora(ckpt, out_dir, dt, 0, ntensors);
}

clp_status clp_ckpt_export_lora(const char *ckpt, const char *out_dir, clp_dtype dt,
				int merge_lora, int *ntensors)
{
	clp_ckpt *c = NULL;
	clp_st_writer *w = NULL;
	void **bufs = NULL;
	char dir[PATH_MAX];
	int nb = 0, nout = 0;
	clp_status st;

	if (ntensors)
		*ntensors = 0;
	if (dt != CLP_F32 && dt != CLP_BF16 && dt != CLP_F16)
		return clp_error(CLP_ERR_INVALID, "export: unknown dtype %d", (int)dt);
	CLP_TRY(clp_ckpt_open(&c, ckpt));
	ckpt_dir(clp_ckpt_path(c), dir, sizeof(dir));
	st = export_steps(c, dir, out_dir, dt, merge_lora, &w, &bufs, &nb, &nout);
	if (st == CLP_OK && ntensors)
		*ntensors = nout;
	for (int i = 0; i < nb; i++)
		free(bufs[i]);
	free(bufs);
	clp_st_writer_free(w);
	clp_ckpt_close(c);
	return st;
}
