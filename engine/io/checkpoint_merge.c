/* LoRA merge for export (clpipe export --merge-lora): a weight W whose linear has adapters
 * "X.lora_A.weight" (r, I) and "X.lora_B.weight" (O, r) becomes W + s B A, s the checkpoint's
 * metadata "lora.scale" (alpha / r). X is the weight's own name less ".weight", or the fused
 * unit clpipe names its adapters after: LLaMA's q/k/v_proj -> qkv_proj and gate/up_proj ->
 * gate_up_proj, BERT's query/key/value -> qkv, the parts' rows stacked in that order. GPT-2's
 * Conv1D weights (c_attn, c_proj, c_fc) are stored (I, O). Names only: no model config. */
#include "engine/io/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

int clp_ckpt_lora_adapter(const char *name)
{
	return ends_with(name, ".lora_A.weight") || ends_with(name, ".lora_B.weight");
}

/* A fused unit's parts, in row order: the part suffixes and the unit's. */
static const struct fused {
	const char *unit, *parts[3];
} fused[] = {
	{".qkv_proj", {".q_proj", ".k_proj", ".v_proj"}},
	{".gate_up_proj", {".gate_proj", ".up_proj", NULL}},
	{".attention.self.qkv", {".attention.self.query", ".attention.self.key",
				 ".attention.self.value"}},
};

/* The adapter's base name X for weight P.weight, the part index and the names of the parts
 * before it (their rows come first in B). */
static int adapter_of(const char *name, char *x, size_t n, const struct fused **f, int *part)
{
	size_t len = strlen(name);

	*f = NULL;
	*part = 0;
	if (!ends_with(name, ".weight"))
		return 0;
	len -= 7;
	for (size_t i = 0; i < sizeof(fused) / sizeof(fused[0]); i++)
		for (int p = 0; p < 3 && fused[i].parts[p]; p++) {
			size_t k = strlen(fused[i].parts[p]);

			if (len > k && !strncmp(name + len - k, fused[i].parts[p], k)) {
				snprintf(x, n, "%.*s%s", (int)(len - k), name, fused[i].unit);
				*f = &fused[i];
				*part = p;
				return 1;
			}
		}
	snprintf(x, n, "%.*s", (int)len, name);
	return 1;
}

clp_status clp_ckpt_lora_merge(clp_ckpt *c, const clp_st_tensor *t, float *w, double scale,
			       int *merged)
{
	char x[512], an[560], bn[560];
	const struct fused *f;
	const clp_st_tensor *ta, *tb;
	float *a = NULL, *b = NULL;
	size_t r, I, O, rows, row0 = 0;
	int part, conv;
	clp_status st;

	*merged = 0;
	if (t->ndim != 2 || !adapter_of(t->name, x, sizeof(x), &f, &part))
		return CLP_OK;
	snprintf(an, sizeof(an), "%s.lora_A.weight", x);
	snprintf(bn, sizeof(bn), "%s.lora_B.weight", x);
	ta = clp_ckpt_find(c, CLP_CKPT_MODEL, an);
	tb = clp_ckpt_find(c, CLP_CKPT_MODEL, bn);
	if (!ta && !tb)
		return CLP_OK;
	if (!ta || !tb || ta->ndim != 2 || tb->ndim != 2 || ta->shape[0] != tb->shape[1])
		return clp_error(CLP_ERR_FORMAT, "%s: LoRA adapters %s and %s do not pair (one "
				 "missing, or A (r, I) and B (O, r) of other ranks)",
				 clp_ckpt_path(c), an, bn);
	r = (size_t)ta->shape[0];
	I = (size_t)ta->shape[1];
	O = (size_t)tb->shape[0];
	conv = strstr(t->name, ".c_attn.") || strstr(t->name, ".c_proj.") ||
	       strstr(t->name, ".c_fc.");
	for (int p = 0; f && p < part; p++) { /* rows of the parts before this one */
		char pn[560];
		const clp_st_tensor *pt;
		size_t k = strlen(f->unit);

		snprintf(pn, sizeof(pn), "%.*s%s.weight", (int)(strlen(x) - k), x, f->parts[p]);
		pt = clp_ckpt_find(c, CLP_CKPT_MODEL, pn);
		if (!pt)
			return clp_error(CLP_ERR_FORMAT, "%s: %s has adapters %s but no %s",
					 clp_ckpt_path(c), t->name, an, pn);
		row0 += (size_t)pt->shape[0];
	}
	rows = conv ? (size_t)t->shape[1] : (size_t)t->shape[0];
	if ((size_t)(conv ? t->shape[0] : t->shape[1]) != I || row0 + rows > O)
		return clp_error(CLP_ERR_FORMAT, "%s: %s (%lld x %lld) does not fit its adapters "
				 "%s (%zu x %zu) and %s (%zu x %zu)", clp_ckpt_path(c), t->name,
				 (long long)t->shape[0], (long long)t->shape[1], an, r, I, bn, O, r);
	a = malloc(r * I * sizeof(float));
	b = malloc(O * r * sizeof(float));
	st = a && b ? CLP_OK : clp_error(CLP_ERR_NOMEM, "export: out of host memory");
	if (st == CLP_OK)
		st = clp_ckpt_read(c, CLP_CKPT_MODEL, an, a, 2, ta->shape);
	if (st == CLP_OK)
		st = clp_ckpt_read(c, CLP_CKPT_MODEL, bn, b, 2, tb->shape);
	for (size_t o = 0; st == CLP_OK && o < rows; o++)
		for (size_t i = 0; i < I; i++) {
			double acc = 0;

			for (size_t k = 0; k < r; k++)
				acc += (double)b[(row0 + o) * r + k] * a[k * I + i];
			if (conv)
				w[i * rows + o] = (float)(w[i * rows + o] + scale * acc);
			else
				w[o * I + i] = (float)(w[o * I + i] + scale * acc);
		}
	free(a);
	free(b);
	*merged = st == CLP_OK;
	return st;
}
