/* Datasets: token segments, the train/validation split, shuffled batches, positions
 * (see dataset.h and docs/DATA.md). */
#include "engine/data/dataset.h"
#include "engine/data/sniff.h"

#include <glob.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/rand.h"
#include "engine/data/shard.h"

/* A run of tokens: a memory-mapped shard or an owned array. */
typedef struct seg {
	clp_shard shard; /* map != NULL when this is a shard */
	int32_t *owned;
	uint64_t start, n; /* global offset and length */
} seg;

struct clp_dataset {
	char origin[512];
	clp_data_opts o;
	seg *segs;
	int nsegs;
	uint64_t lo[2], hi[2]; /* split token ranges in global offsets */
	uint64_t nseq[2];
	clp_data_pos pos;
	clp_data_perm perm; /* of the current epoch */
	uint64_t perm_epoch;
};

static clp_status check_opts(const clp_data_opts *o, const char *origin)
{
	if (o->seq_len < 1)
		return clp_error(CLP_ERR_INVALID, "%s: seq_len %d must be at least 1", origin,
				 o->seq_len);
	if (!(o->val_frac >= 0 && o->val_frac <= 0.5))
		return clp_error(CLP_ERR_INVALID, "%s: val_frac %g must be in [0, 0.5]", origin,
				 o->val_frac);
	return CLP_OK;
}

static uint64_t seqs_in(uint64_t ntok, int T)
{
	return ntok > (uint64_t)T ? (ntok - 1) / (uint64_t)T : 0;
}

static void set_perm(clp_dataset *ds, uint64_t epoch)
{
	clp_data_perm_init(&ds->perm, ds->nseq[CLP_SPLIT_TRAIN], ds->o.seed,
			   CLP_DATA_PURPOSE_SHUFFLE, epoch);
	ds->perm_epoch = epoch;
}

/* Fix the split ranges: a fraction of the stream, or the given boundary (val_start > 0). */
static clp_status finish(clp_dataset *ds, uint64_t val_start)
{
	uint64_t total = ds->nsegs ? ds->segs[ds->nsegs - 1].start + ds->segs[ds->nsegs - 1].n : 0;
	uint64_t T = (uint64_t)ds->o.seq_len, cut = total;
	int with_val = val_start > 0 || ds->o.val_frac > 0;

	if (val_start > 0) {
		cut = val_start;
	} else if (ds->o.val_frac > 0) {
		uint64_t v = (uint64_t)ceil(ds->o.val_frac * (double)total);

		if (v < T + 1)
			v = T + 1;
		cut = v < total ? total - v : 0;
	}
	ds->lo[CLP_SPLIT_TRAIN] = 0;
	ds->hi[CLP_SPLIT_TRAIN] = cut;
	ds->lo[CLP_SPLIT_VAL] = cut;
	ds->hi[CLP_SPLIT_VAL] = total;
	for (int s = 0; s < 2; s++)
		ds->nseq[s] = seqs_in(ds->hi[s] - ds->lo[s], ds->o.seq_len);
	if (ds->nseq[CLP_SPLIT_TRAIN] == 0 || (with_val && ds->nseq[CLP_SPLIT_VAL] == 0))
		return clp_error(CLP_ERR_FORMAT, "%s: %" PRIu64 " tokens are too few: the training "
				 "split has %" PRIu64 " and the validation split %" PRIu64 " tokens, "
				 "and each needs at least seq_len + 1 = %d", ds->origin, total,
				 cut, total - cut, ds->o.seq_len + 1);
	set_perm(ds, 0);
	return CLP_OK;
}

static clp_status new_ds(clp_dataset **out, const clp_data_opts *o, const char *origin)
{
	clp_dataset *ds;

	*out = NULL;
	CLP_TRY(check_opts(o, origin));
	ds = calloc(1, sizeof(*ds));
	if (!ds)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	snprintf(ds->origin, sizeof(ds->origin), "%s", origin);
	ds->o = *o;
	*out = ds;
	return CLP_OK;
}

static clp_status add_owned(clp_dataset *ds, int32_t *tokens, uint64_t n)
{
	ds->segs = calloc(1, sizeof(*ds->segs));
	if (!ds->segs) {
		free(tokens);
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	}
	ds->nsegs = 1;
	ds->segs[0].owned = tokens;
	ds->segs[0].n = n;
	if (ds->o.vocab_size > 0)
		for (uint64_t i = 0; i < n; i++)
			if (tokens[i] < 0 || tokens[i] >= ds->o.vocab_size)
				return clp_error(CLP_ERR_FORMAT, "%s: token %d at position %" PRIu64
						 " is outside the vocabulary [0, %d)", ds->origin,
						 (int)tokens[i], i, ds->o.vocab_size);
	return CLP_OK;
}

clp_status clp_dataset_from_tokens(clp_dataset **out, const int32_t *tokens, size_t n,
				   const clp_data_opts *o, const char *origin)
{
	clp_dataset *ds;
	int32_t *copy;
	clp_status s;

	CLP_TRY(new_ds(&ds, o, origin ? origin : "token array"));
	copy = malloc((n ? n : 1) * sizeof(*copy));
	if (!copy) {
		clp_dataset_free(ds);
		return clp_error(CLP_ERR_NOMEM, "%s: out of memory for %zu tokens", origin, n);
	}
	if (n)
		memcpy(copy, tokens, n * sizeof(*copy));
	s = add_owned(ds, copy, n);
	if (s == CLP_OK)
		s = finish(ds, 0);
	if (s != CLP_OK) {
		clp_dataset_free(ds);
		return s;
	}
	*out = ds;
	return CLP_OK;
}

clp_status clp_dataset_open_text(clp_dataset **out, const char *path, clp_tok *tok,
				 const clp_data_opts *o)
{
	clp_dataset *ds;
	clp_ids ids = {0};
	clp_data_opts oo = *o;
	clp_status s;

	if (oo.vocab_size <= 0)
		oo.vocab_size = clp_tok_vocab_size(tok);
	CLP_TRY(clp_data_sniff_text(path)); /* a shard or a model given as text: say what it is */
	CLP_TRY(new_ds(&ds, &oo, path));
	s = clp_tok_encode_file(tok, path, &ids);
	if (s == CLP_OK)
		s = add_owned(ds, ids.v, ids.n);
	else
		clp_ids_free(&ids);
	if (s == CLP_OK)
		s = finish(ds, 0);
	if (s != CLP_OK) {
		clp_dataset_free(ds);
		return s;
	}
	*out = ds;
	return CLP_OK;
}

/* Append the shards matching pattern (sorted). */
static clp_status add_shards(clp_dataset *ds, const char *pattern, const char *what)
{
	glob_t g;
	char *one[2] = {(char *)pattern, NULL};
	int rc;
	clp_status s = CLP_OK;

	if (!pattern || !pattern[0])
		return clp_error(CLP_ERR_INVALID, "no %s shard pattern given", what);
	if (!strpbrk(pattern, "*?[")) {
		g.gl_pathc = 1;
		g.gl_pathv = one;
		rc = 0;
	} else {
		rc = glob(pattern, 0, NULL, &g);
		if (rc == GLOB_NOMATCH)
			return clp_error(CLP_ERR_IO, "%s: no %s shard matches this pattern", pattern,
					 what);
		if (rc != 0)
			return clp_error(CLP_ERR_IO, "%s: cannot list the %s shards", pattern, what);
	}
	for (size_t i = 0; s == CLP_OK && i < g.gl_pathc; i++) {
		seg *ns = realloc(ds->segs, (size_t)(ds->nsegs + 1) * sizeof(*ns));
		seg *sg;

		if (!ns) {
			s = clp_error(CLP_ERR_NOMEM, "out of memory");
			break;
		}
		ds->segs = ns;
		sg = &ds->segs[ds->nsegs++];
		memset(sg, 0, sizeof(*sg));
		s = clp_shard_open(&sg->shard, g.gl_pathv[i], ds->o.vocab_size);
		if (s != CLP_OK)
			break;
		sg->n = sg->shard.ntok;
		sg->start = ds->nsegs > 1 ? sg[-1].start + sg[-1].n : 0;
	}
	if (strpbrk(pattern, "*?["))
		globfree(&g);
	return s;
}

clp_status clp_dataset_open_shards(clp_dataset **out, const char *train_pattern,
				   const char *val_pattern, const clp_data_opts *o)
{
	clp_dataset *ds;
	clp_status s;
	uint64_t val_start = 0;

	CLP_TRY(new_ds(&ds, o, train_pattern ? train_pattern : "(shards)"));
	s = add_shards(ds, train_pattern, "training");
	if (s == CLP_OK && val_pattern && val_pattern[0]) {
		val_start = ds->segs[ds->nsegs - 1].start + ds->segs[ds->nsegs - 1].n;
		s = add_shards(ds, val_pattern, "validation");
	}
	if (s == CLP_OK)
		s = finish(ds, val_start);
	if (s != CLP_OK) {
		clp_dataset_free(ds);
		return s;
	}
	*out = ds;
	return CLP_OK;
}

void clp_dataset_free(clp_dataset *ds)
{
	if (!ds)
		return;
	for (int i = 0; i < ds->nsegs; i++) {
		clp_shard_close(&ds->segs[i].shard);
		free(ds->segs[i].owned);
	}
	free(ds->segs);
	free(ds);
}

int clp_dataset_seq_len(const clp_dataset *ds)
{
	return ds->o.seq_len;
}

uint64_t clp_dataset_nseq(const clp_dataset *ds, clp_split split)
{
	return ds->nseq[split == CLP_SPLIT_VAL];
}

uint64_t clp_dataset_ntok(const clp_dataset *ds, clp_split split)
{
	int s = split == CLP_SPLIT_VAL;

	return ds->hi[s] - ds->lo[s];
}

/* Copy global tokens [at, at + n) (inside the stream) across segment boundaries. */
static void copy_tokens(const clp_dataset *ds, uint64_t at, uint64_t n, int32_t *out)
{
	int lo = 0, hi = ds->nsegs - 1;

	while (lo < hi) { /* last segment starting at or before `at` */
		int mid = (lo + hi + 1) / 2;

		if (ds->segs[mid].start <= at)
			lo = mid;
		else
			hi = mid - 1;
	}
	for (int i = lo; n > 0; i++) {
		const seg *sg = &ds->segs[i];
		uint64_t off = at - sg->start, m = sg->n - off < n ? sg->n - off : n;

		if (sg->owned)
			memcpy(out, sg->owned + off, m * sizeof(*out));
		else
			clp_shard_copy(&sg->shard, off, m, out);
		out += m;
		at += m;
		n -= m;
	}
}

clp_status clp_dataset_seq(const clp_dataset *ds, clp_split split, uint64_t i, int32_t *out)
{
	int s = split == CLP_SPLIT_VAL;

	if (i >= ds->nseq[s])
		return clp_error(CLP_ERR_INVALID, "%s: sequence %" PRIu64 " is beyond the %" PRIu64
				 " %s sequences", ds->origin, i, ds->nseq[s],
				 s ? "validation" : "training");
	copy_tokens(ds, ds->lo[s] + i * (uint64_t)ds->o.seq_len, (uint64_t)ds->o.seq_len + 1,
		    out);
	return CLP_OK;
}

/* Copy a T + 1 window into one row of inputs and targets. */
static void split_row(const int32_t *win, int T, int32_t *in, int32_t *tg)
{
	memcpy(in, win, (size_t)T * sizeof(*in));
	memcpy(tg, win + 1, (size_t)T * sizeof(*tg));
}

clp_status clp_dataset_next(clp_dataset *ds, int batch, int first, int count, int32_t *inputs,
			    int32_t *targets)
{
	int T = ds->o.seq_len;
	int32_t *win;
	uint64_t n = ds->nseq[CLP_SPLIT_TRAIN];

	if (batch < 1 || first < 0 || count < 0 || first + count > batch)
		return clp_error(CLP_ERR_INVALID, "%s: slice [%d, %d) of a batch of %d is invalid",
				 ds->origin, first, first + count, batch);
	win = malloc(((size_t)T + 1) * sizeof(*win));
	if (!win)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	for (int b = 0; b < batch; b++) {
		if (b >= first && b < first + count) {
			uint64_t idx = ds->pos.index, seq;

			if (ds->perm_epoch != ds->pos.epoch)
				set_perm(ds, ds->pos.epoch);
			seq = ds->o.shuffle ? clp_data_perm_at(&ds->perm, idx) : idx;
			copy_tokens(ds, ds->lo[CLP_SPLIT_TRAIN] + seq * (uint64_t)T, (uint64_t)T + 1,
				    win);
			split_row(win, T, inputs + (size_t)(b - first) * (size_t)T,
				  targets + (size_t)(b - first) * (size_t)T);
		}
		if (++ds->pos.index == n) {
			ds->pos.index = 0;
			ds->pos.epoch++;
		}
	}
	free(win);
	return CLP_OK;
}

clp_status clp_dataset_val(const clp_dataset *ds, uint64_t first, int count, int32_t *inputs,
			   int32_t *targets)
{
	int T = ds->o.seq_len;
	uint64_t n = ds->nseq[CLP_SPLIT_VAL];
	int32_t *win;

	if (n == 0)
		return clp_error(CLP_ERR_INVALID, "%s: there is no validation split (val_frac is 0 "
				 "and no validation shards were given)", ds->origin);
	win = malloc(((size_t)T + 1) * sizeof(*win));
	if (!win)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	for (int b = 0; b < count; b++) {
		copy_tokens(ds, ds->lo[CLP_SPLIT_VAL] + ((first + (uint64_t)b) % n) * (uint64_t)T,
			    (uint64_t)T + 1, win);
		split_row(win, T, inputs + (size_t)b * (size_t)T, targets + (size_t)b * (size_t)T);
	}
	free(win);
	return CLP_OK;
}

clp_data_pos clp_dataset_pos(const clp_dataset *ds)
{
	return ds->pos;
}

clp_status clp_dataset_set_pos(clp_dataset *ds, clp_data_pos pos)
{
	if (pos.index >= ds->nseq[CLP_SPLIT_TRAIN])
		return clp_error(CLP_ERR_INVALID, "%s: data position index %" PRIu64 " is beyond "
				 "the %" PRIu64 " training sequences", ds->origin, pos.index,
				 ds->nseq[CLP_SPLIT_TRAIN]);
	ds->pos = pos;
	return CLP_OK;
}

void clp_dataset_pos_str(const clp_dataset *ds, char *buf, size_t cap)
{
	snprintf(buf, cap, "epoch=%" PRIu64 " index=%" PRIu64 " nseq=%" PRIu64 " seed=%" PRIu64
		 " shuffle=%d", ds->pos.epoch, ds->pos.index, ds->nseq[CLP_SPLIT_TRAIN], ds->o.seed,
		 ds->o.shuffle ? 1 : 0);
}

clp_status clp_dataset_restore(clp_dataset *ds, const char *text)
{
	uint64_t epoch, index, nseq, seed;
	int shuffle, used = 0;

	if (sscanf(text, "epoch=%" SCNu64 " index=%" SCNu64 " nseq=%" SCNu64 " seed=%" SCNu64
		   " shuffle=%d%n", &epoch, &index, &nseq, &seed, &shuffle, &used) != 5 ||
	    text[used] != '\0')
		return clp_error(CLP_ERR_FORMAT, "data position \"%s\" is not of the form "
				 "\"epoch=E index=I nseq=N seed=S shuffle=B\"", text);
	if (nseq != ds->nseq[CLP_SPLIT_TRAIN])
		return clp_error(CLP_ERR_INVALID, "data position \"%s\" is for a dataset of %" PRIu64
				 " training sequences; %s has %" PRIu64 " (other data or seq_len?)",
				 text, nseq, ds->origin, ds->nseq[CLP_SPLIT_TRAIN]);
	if (seed != ds->o.seed)
		return clp_error(CLP_ERR_INVALID, "data position \"%s\" was drawn with seed %" PRIu64
				 ", this run uses seed %" PRIu64, text, seed, ds->o.seed);
	if (shuffle != (ds->o.shuffle ? 1 : 0))
		return clp_error(CLP_ERR_INVALID, "data position \"%s\" has shuffle=%d, this run "
				 "has shuffle=%d", text, shuffle, ds->o.shuffle ? 1 : 0);
	return clp_dataset_set_pos(ds, (clp_data_pos){epoch, index});
}
