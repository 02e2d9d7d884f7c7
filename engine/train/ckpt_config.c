/* What clpipe eval and sample take from the config stored in a checkpoint, so that they score
 * and sample the way the run did: the tokenizer, the data and its split, the batch, sequence
 * length, precision and evaluation size, unless given here. Paths the run stored (absolute since
 * issue 26; relative before) that are not there are found again from the checkpoint's directory
 * and its parents. */
#include "engine/train/session_internal.h"

#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The settings an eval or sample inherits when they were not given (data.* as a group: a
 * --data of one's own brings its own split). */
static const char *const run_keys[] = {"train.batch", "train.seq", "train.precision",
				       "train.seed", "eval.batches"};
static const char *const data_keys[] = {"data.path", "data.format", "data.val_path",
					"data.val_fraction", "data.shuffle", "data.mask_prob"};

static int given(const clp_train_config *c, const char *key)
{
	return strcmp(clp_cfg_origin_of(&clp_train_schema, c, key), "default") != 0;
}

static int exists(const char *pattern)
{
	glob_t g;
	int ok = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0;

	globfree(&g);
	return ok;
}

/* A stored path that is not there from here (relative to where the run ran, or absolute on a
 * tree since moved): the same path, or its last components (longest first), from the
 * checkpoint's directory or the nearest parent that has it. *found: 0 when none has. */
static void resolve(char *path, size_t n, const char *ckpt, int *found)
{
	char dir[PATH_MAX], cand[PATH_MAX + 1100];
	const char *tail = path;

	*found = 1;
	if (!path[0] || exists(path))
		return;
	*found = 0;
	if (!realpath(ckpt, dir))
		return;
	for (int hops = 0; tail && *tail && hops < 16; hops++) {
		char up[PATH_MAX];

		while (*tail == '/')
			tail++;
		snprintf(up, sizeof(up), "%s", dir);
		for (char *slash; *tail && (slash = strrchr(up, '/')) != NULL;) {
			snprintf(cand, sizeof(cand), "%s/%s", slash == up ? "" : up, tail);
			if (exists(cand) && strlen(cand) < n) {
				snprintf(path, n, "%s", cand);
				*found = 1;
				return;
			}
			if (slash == up)
				break;
			*slash = '\0';
		}
		tail = strchr(tail, '/'); /* drop the first component */
	}
}

static clp_status copy_key(clp_train_config *c, const clp_train_config *base, const char *key,
			   const char *origin)
{
	char v[1100];

	clp_cfg_get(&clp_train_schema, base, key, v, sizeof(v));
	CLP_TRY(clp_cfg_set(&clp_train_schema, c, key, v, origin));
	return CLP_OK;
}

clp_status sess_inherit_run(clp_session *s, const clp_train_config *base, const char *ckpt,
			    const char *origin)
{
	clp_train_config *c = &s->cfg;
	int found;

	memcpy(c->data.tokenizer, base->data.tokenizer, sizeof(base->data.tokenizer));
	if (!c->data.tokenizer_path[0])
		memcpy(c->data.tokenizer_path, base->data.tokenizer_path,
		       sizeof(base->data.tokenizer_path));
	if (!c->data.bpe_vocab[0])
		memcpy(c->data.bpe_vocab, base->data.bpe_vocab, sizeof(base->data.bpe_vocab));
	if (!c->data.bpe_merges[0])
		memcpy(c->data.bpe_merges, base->data.bpe_merges, sizeof(base->data.bpe_merges));
	for (int k = 0; k < 3; k++) { /* every path field has data.path's size */
		static const char *const keys[3] = {"data.tokenizer_path", "data.bpe_vocab",
						    "data.bpe_merges"};
		char *p = k == 0 ? c->data.tokenizer_path : k == 1 ? c->data.bpe_vocab
								     : c->data.bpe_merges;

		resolve(p, sizeof(c->data.path), ckpt, &found);
		if (!found)
			return clp_error(CLP_ERR_NOT_FOUND, "the checkpoint's tokenizer %s = \"%s\" "
					 "(its stored config) is not there, from here or from %s and "
					 "its parents: give it with --%s PATH", keys[k], p, ckpt,
					 keys[k]);
	}
	for (size_t i = 0; i < sizeof(run_keys) / sizeof(run_keys[0]); i++)
		if (!given(c, run_keys[i]))
			CLP_TRY(copy_key(c, base, run_keys[i], origin));
	if (c->train.seq > c->model.ctx) /* a --model.ctx of one's own */
		c->train.seq = 0;
	if (c->data.path[0] || s->mode == CLP_SESSION_SAMPLE)
		return CLP_OK;
	for (size_t i = 0; i < sizeof(data_keys) / sizeof(data_keys[0]); i++)
		CLP_TRY(copy_key(c, base, data_keys[i], origin));
	for (int k = 0; k < 2; k++) {
		char *p = k ? c->data.val_path : c->data.path;

		resolve(p, sizeof(c->data.path), ckpt, &found);
		if (!found)
			return clp_error(CLP_ERR_NOT_FOUND, "the data the checkpoint's run trained on, "
					 "%s = \"%s\" (its stored config), is not there, from here "
					 "or from %s and its parents: give the data with --data FILE",
					 k ? "data.val_path" : "data.path", p, ckpt);
	}
	return CLP_OK;
}
