/* Checkpoint writing: per-rank safetensors files and parts, the manifest, pruning
 * (see checkpoint.h and docs/CHECKPOINTS.md). */
#include "engine/io/checkpoint_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cl/base/durable.h"
#include "cl/base/json_util.h"

struct clp_ckpt_writer {
	char *root, *dir;
	long step;
	int rank, nranks;
	clp_st_writer *st[2];
	int count[2];
	json_t *ident, *meta;
	int written;
	clp_ckpt_param *params; /* the model tensors added (names owned), for identity.params */
	int nparams, cap_params;
};

const char *clp_ckpt_kind_name(clp_ckpt_kind kind)
{
	return kind == CLP_CKPT_OPTIM ? "optimizer" : "model";
}

void clp_ckpt_file_name(char *buf, size_t cap, clp_ckpt_kind kind, int rank, int nranks)
{
	if (nranks > 1)
		snprintf(buf, cap, "%s-rank%d.safetensors", clp_ckpt_kind_name(kind), rank);
	else
		snprintf(buf, cap, "%s.safetensors", clp_ckpt_kind_name(kind));
}

char *clp_ckpt_join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 2);

	if (s) {
		memcpy(s, a, la);
		s[la] = '/';
		memcpy(s + la + 1, b, lb + 1);
	}
	return s;
}

static int entry_cmp(const void *a, const void *b)
{
	const clp_ckpt_entry *x = a, *y = b;

	return x->step < y->step ? 1 : x->step > y->step ? -1 : 0;
}

clp_status clp_ckpt_list(const char *root, clp_ckpt_entry **out, int *n)
{
	DIR *d = opendir(root);
	struct dirent *de;
	clp_ckpt_entry *e = NULL;
	int cap = 0;

	*out = NULL;
	*n = 0;
	if (!d)
		return errno == ENOENT ? CLP_OK
				       : clp_error(CLP_ERR_IO, "%s: cannot list: %s", root,
						   strerror(errno));
	while ((de = readdir(d))) {
		const char *p = de->d_name;
		char *man;
		struct stat st;

		if (strncmp(p, "step-", 5) != 0 || !p[5])
			continue;
		for (p += 5; isdigit((unsigned char)*p); p++)
			;
		if (*p)
			continue;
		if (*n == cap) {
			clp_ckpt_entry *ne = realloc(e, (size_t)(cap = cap ? 2 * cap : 16) * sizeof(*e));

			if (!ne)
				goto nomem;
			e = ne;
		}
		e[*n].dir = clp_ckpt_join(root, de->d_name);
		if (!e[*n].dir)
			goto nomem;
		e[*n].step = strtol(de->d_name + 5, NULL, 10);
		if (stat(e[*n].dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
			free(e[*n].dir);
			continue;
		}
		man = clp_ckpt_join(e[*n].dir, CLP_CKPT_MANIFEST);
		if (!man) {
			(*n)++;
			goto nomem;
		}
		e[*n].complete = stat(man, &st) == 0 && S_ISREG(st.st_mode);
		free(man);
		(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(e, (size_t)*n, sizeof(*e), entry_cmp);
	*out = e;
	return CLP_OK;
nomem:
	closedir(d);
	clp_ckpt_list_free(e, *n);
	*n = 0;
	return clp_error(CLP_ERR_NOMEM, "out of memory");
}

void clp_ckpt_list_free(clp_ckpt_entry *e, int n)
{
	for (int i = 0; i < n; i++)
		free(e[i].dir);
	free(e);
}

static int param_cmp(const void *a, const void *b)
{
	const clp_ckpt_param *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

uint64_t clp_ckpt_params_hash(const clp_ckpt_param *p, int n)
{
	const clp_ckpt_param **order = malloc((size_t)(n > 0 ? n : 1) * sizeof(*order));
	uint64_t h = 0xcbf29ce484222325ULL;

	if (!order)
		return 0;
	for (int i = 0; i < n; i++)
		order[i] = &p[i];
	qsort(order, (size_t)n, sizeof(*order), param_cmp);
	for (int i = 0; i < n; i++) {
		char buf[64];
		const char *s = order[i]->name;

		/* name NUL dims: unambiguous since names hold no NUL */
		for (size_t k = 0; k <= strlen(s); k++)
			h = (h ^ (unsigned char)s[k]) * 0x100000001b3ULL;
		for (int d = 0; d < order[i]->ndim; d++) {
			int l = snprintf(buf, sizeof(buf), "%" PRId64 ",", order[i]->shape[d]);

			for (int k = 0; k < l; k++)
				h = (h ^ (unsigned char)buf[k]) * 0x100000001b3ULL;
		}
		h = (h ^ ';') * 0x100000001b3ULL;
	}
	free(order);
	return h;
}

clp_status clp_ckpt_writer_create(clp_ckpt_writer **out, const char *root, long step, int rank,
				  int nranks)
{
	clp_ckpt_writer *w;
	char name[64], *man = NULL;
	clp_status s;

	*out = NULL;
	if (!root || !root[0] || step < 0 || nranks < 1 || rank < 0 || rank >= nranks)
		return clp_error(CLP_ERR_INVALID, "checkpoint: bad arguments (root \"%s\", step %ld, "
				 "rank %d of %d)", root ? root : "", step, rank, nranks);
	w = calloc(1, sizeof(*w));
	if (!w)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	w->step = step;
	w->rank = rank;
	w->nranks = nranks;
	snprintf(name, sizeof(name), "step-%08ld", step);
	w->root = strdup(root);
	w->dir = clp_ckpt_join(root, name);
	w->ident = json_object();
	w->meta = json_object();
	if (!w->root || !w->dir || !w->ident || !w->meta) {
		s = clp_error(CLP_ERR_NOMEM, "out of memory");
		goto fail;
	}
	s = clp_io_mkdirs(w->dir);
	if (s != CLP_OK)
		goto fail;
	man = clp_ckpt_join(w->dir, CLP_CKPT_MANIFEST);
	if (!man) {
		s = clp_error(CLP_ERR_NOMEM, "out of memory");
		goto fail;
	}
	if (unlink(man) == 0) {
		s = clp_io_fsync_dir(w->dir);
	} else if (errno != ENOENT) {
		s = clp_error(CLP_ERR_IO, "%s: cannot remove the old manifest: %s", man,
			      strerror(errno));
	}
	free(man);
	if (s != CLP_OK)
		goto fail;
	for (int k = 0; k < 2; k++) {
		char *path;

		clp_ckpt_file_name(name, sizeof(name), (clp_ckpt_kind)k, rank, nranks);
		path = clp_ckpt_join(w->dir, name);
		if (!path) {
			s = clp_error(CLP_ERR_NOMEM, "out of memory");
			goto fail;
		}
		s = clp_st_writer_create(&w->st[k], path);
		free(path);
		if (s != CLP_OK)
			goto fail;
	}
	*out = w;
	return CLP_OK;
fail:
	clp_ckpt_writer_free(w);
	return s;
}

void clp_ckpt_writer_free(clp_ckpt_writer *w)
{
	if (!w)
		return;
	for (int k = 0; k < 2; k++)
		clp_st_writer_free(w->st[k]);
	json_decref(w->ident);
	json_decref(w->meta);
	for (int i = 0; i < w->nparams; i++)
		free((char *)w->params[i].name);
	free(w->params);
	free(w->root);
	free(w->dir);
	free(w);
}

const char *clp_ckpt_writer_dir(const clp_ckpt_writer *w)
{
	return w->dir;
}

clp_status clp_ckpt_writer_add(clp_ckpt_writer *w, clp_ckpt_kind kind, const char *name,
			       const float *data, int ndim, const int64_t *shape)
{
	if (kind != CLP_CKPT_MODEL && kind != CLP_CKPT_OPTIM)
		return clp_error(CLP_ERR_INVALID, "checkpoint %s: bad tensor kind %d", w->dir,
				 (int)kind);
	CLP_TRY(clp_st_writer_add(w->st[kind], name, data, ndim, shape));
	w->count[kind]++;
	if (kind == CLP_CKPT_MODEL) {
		clp_ckpt_param *p;

		if (w->nparams == w->cap_params) {
			int cap = w->cap_params ? 2 * w->cap_params : 64;

			if (!(p = realloc(w->params, (size_t)cap * sizeof(*p))))
				return clp_error(CLP_ERR_NOMEM, "out of memory");
			w->params = p;
			w->cap_params = cap;
		}
		p = &w->params[w->nparams];
		memset(p, 0, sizeof(*p));
		if (!(p->name = strdup(name)))
			return clp_error(CLP_ERR_NOMEM, "out of memory");
		p->ndim = ndim;
		for (int d = 0; d < ndim && d < CLP_ST_MAX_DIM; d++)
			p->shape[d] = shape[d];
		w->nparams++;
	}
	return CLP_OK;
}

static clp_status set_kv(clp_ckpt_writer *w, json_t *obj, const char *what, const char *key,
			 const char *value)
{
	if (!key || !key[0] || !value || json_object_set_new(obj, key, json_string(value)) != 0)
		return clp_error(CLP_ERR_INVALID, "checkpoint %s: %s \"%s\" is not a valid "
				 "(UTF-8) key and value", w->dir, what, key ? key : "(null)");
	return CLP_OK;
}

clp_status clp_ckpt_writer_identity(clp_ckpt_writer *w, const char *key, const char *value)
{
	return set_kv(w, w->ident, "identity field", key, value);
}

clp_status clp_ckpt_writer_meta(clp_ckpt_writer *w, const char *key, const char *value)
{
	if (key && (!strcmp(key, "format") || !strncmp(key, "clpipe.", 7) ||
		    !strncmp(key, "identity.", 9)))
		return clp_error(CLP_ERR_INVALID, "checkpoint %s: metadata key \"%s\" is reserved",
				 w->dir, key);
	return set_kv(w, w->meta, "metadata", key, value);
}

/* The safetensors metadata of one file: Hugging Face's "format", our step/kind/rank, the
 * identity as "identity.<key>" and the metadata as given, so one file describes itself. */
static clp_status file_meta(clp_ckpt_writer *w, clp_ckpt_kind kind)
{
	clp_st_writer *st = w->st[kind];
	const char *key;
	json_t *v;
	char buf[64];

	CLP_TRY(clp_st_writer_meta(st, "format", "pt"));
	snprintf(buf, sizeof(buf), "%ld", w->step);
	CLP_TRY(clp_st_writer_meta(st, "clpipe.step", buf));
	CLP_TRY(clp_st_writer_meta(st, "clpipe.kind", clp_ckpt_kind_name(kind)));
	snprintf(buf, sizeof(buf), "%d/%d", w->rank, w->nranks);
	CLP_TRY(clp_st_writer_meta(st, "clpipe.rank", buf));
	json_object_foreach(w->ident, key, v) {
		char *k = malloc(strlen(key) + 10);
		clp_status s;

		if (!k)
			return clp_error(CLP_ERR_NOMEM, "out of memory");
		sprintf(k, "identity.%s", key);
		s = clp_st_writer_meta(st, k, json_string_value(v));
		free(k);
		CLP_TRY(s);
	}
	/* one rank's file holds the whole model: with the hash of its parameters (the manifest's
	 * identity.params) a bare copy of it opens as a checkpoint of this model */
	if (w->nranks == 1 && !json_object_get(w->ident, "params")) {
		snprintf(buf, sizeof(buf), "%016" PRIx64,
			 clp_ckpt_params_hash(w->params, w->nparams));
		CLP_TRY(clp_st_writer_meta(st, "identity.params", buf));
	}
	json_object_foreach(w->meta, key, v)
		CLP_TRY(clp_st_writer_meta(st, key, json_string_value(v)));
	return CLP_OK;
}

clp_status clp_ckpt_writer_write(clp_ckpt_writer *w)
{
	json_t *part = NULL, *files;
	char name[64], *text = NULL, *path = NULL;
	clp_status s = CLP_OK;

	if (w->written)
		return clp_error(CLP_ERR_STATE, "checkpoint %s: rank %d already wrote its files",
				 w->dir, w->rank);
	part = json_pack("{s:I, s:i, s:i, s:[]}", "step", (json_int_t)w->step, "rank", w->rank,
			 "nranks", w->nranks, "files");
	if (!part)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	files = json_object_get(part, "files");
	for (int k = 0; k < 2 && s == CLP_OK; k++) {
		uint64_t size;
		uint32_t crc;
		char crcs[16];

		if (w->count[k] == 0)
			continue;
		s = file_meta(w, (clp_ckpt_kind)k);
		if (s == CLP_OK)
			s = clp_st_writer_finish(w->st[k], &size, &crc);
		if (s != CLP_OK)
			break;
		clp_ckpt_file_name(name, sizeof(name), (clp_ckpt_kind)k, w->rank, w->nranks);
		snprintf(crcs, sizeof(crcs), "%08" PRIx32, crc);
		json_array_append_new(files, json_pack("{s:s, s:s, s:i, s:I, s:s}", "file", name,
						       "kind", clp_ckpt_kind_name((clp_ckpt_kind)k),
						       "rank", w->rank, "bytes", (json_int_t)size,
						       "crc32", crcs));
	}
	if (s == CLP_OK) {
		snprintf(name, sizeof(name), "part-rank%d.json", w->rank);
		text = json_dumps(part, JSON_INDENT(1));
		path = clp_ckpt_join(w->dir, name);
		if (!text || !path)
			s = clp_error(CLP_ERR_NOMEM, "out of memory");
		else
			s = clp_io_write_file(path, text, strlen(text));
	}
	if (s == CLP_OK)
		s = clp_io_fsync_dir(w->dir);
	if (s == CLP_OK)
		w->written = 1;
	free(text);
	free(path);
	json_decref(part);
	return s;
}

/* Delete one checkpoint: its manifest first (durably), so a crash halfway leaves an incomplete
 * directory that readers skip, never a complete-looking damaged one. */
static clp_status remove_ckpt(const char *dir)
{
	char *man = clp_ckpt_join(dir, CLP_CKPT_MANIFEST);
	clp_status s = CLP_OK;

	if (!man)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	if (unlink(man) == 0)
		s = clp_io_fsync_dir(dir);
	else if (errno != ENOENT)
		s = clp_error(CLP_ERR_IO, "%s: cannot delete: %s", man, strerror(errno));
	free(man);
	if (s == CLP_OK)
		s = clp_io_remove_tree(dir);
	return s;
}

static clp_status prune(const char *root, int keep, long step)
{
	clp_ckpt_entry *e;
	int n, kept = 0;
	clp_status s = CLP_OK;

	CLP_TRY(clp_ckpt_list(root, &e, &n));
	for (int i = 0; i < n && s == CLP_OK; i++) {
		if (e[i].step == step) { /* the one just written: never (another run's may be newer) */
			kept += e[i].complete;
			continue;
		}
		if (e[i].complete && (keep <= 0 || ++kept <= keep))
			continue;
		if (!e[i].complete && e[i].step >= step)
			continue;
		s = remove_ckpt(e[i].dir);
	}
	clp_ckpt_list_free(e, n);
	if (s == CLP_OK)
		s = clp_io_fsync_dir(root);
	return s;
}

/* Check one file entry of a part against the disk; collect model parameter shapes. */
static clp_status check_entry(clp_ckpt_writer *w, json_t *f, int r, clp_ckpt_param **params,
			      int *np)
{
	const char *file = json_string_value(json_object_get(f, "file"));
	const char *kind = json_string_value(json_object_get(f, "kind"));
	json_t *bytes = json_object_get(f, "bytes");
	char *path;
	struct stat st;
	clp_st_file *sf = NULL;
	clp_status s = CLP_OK;

	if (!file || !kind || !json_is_integer(bytes) || strchr(file, '/'))
		return clp_error(CLP_ERR_FORMAT, "checkpoint %s: part-rank%d.json has a malformed "
				 "file entry", w->dir, r);
	path = clp_ckpt_join(w->dir, file);
	if (!path)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	if (stat(path, &st) != 0) {
		s = clp_error(CLP_ERR_IO, "checkpoint %s: %s (from rank %d) is missing: %s", w->dir,
			      file, r, strerror(errno));
	} else if ((uint64_t)st.st_size != (uint64_t)json_integer_value(bytes)) {
		s = clp_error(CLP_ERR_FORMAT, "checkpoint %s: %s is %lld bytes, rank %d wrote %lld",
			      w->dir, file, (long long)st.st_size, r,
			      (long long)json_integer_value(bytes));
	} else if (!strcmp(kind, "model")) {
		s = clp_st_open(&sf, path);
		for (int i = 0; s == CLP_OK && i < clp_st_count(sf); i++) {
			const clp_st_tensor *t = clp_st_at(sf, i);
			clp_ckpt_param *np2 = realloc(*params, (size_t)(*np + 1) * sizeof(**params));

			if (!np2) {
				s = clp_error(CLP_ERR_NOMEM, "out of memory");
				break;
			}
			*params = np2;
			np2[*np].name = strdup(t->name);
			np2[*np].ndim = t->ndim;
			memcpy(np2[*np].shape, t->shape, sizeof(t->shape));
			if (!np2[*np].name)
				s = clp_error(CLP_ERR_NOMEM, "out of memory");
			else
				(*np)++;
		}
		clp_st_close(sf);
	}
	free(path);
	return s;
}

static clp_status gather_parts(clp_ckpt_writer *w, json_t *files, clp_ckpt_param **params,
			       int *np)
{
	for (int r = 0; r < w->nranks; r++) {
		char name[64], why[512], *path;
		json_t *part, *f;
		size_t i;
		clp_status s;

		snprintf(name, sizeof(name), "part-rank%d.json", r);
		path = clp_ckpt_join(w->dir, name);
		if (!path)
			return clp_error(CLP_ERR_NOMEM, "out of memory");
		s = clp_json_load(path, &part);
		free(path);
		if (s != CLP_OK) {
			snprintf(why, sizeof(why), "%s", clp_last_error());
			return clp_error(CLP_ERR_STATE, "checkpoint %s: rank %d has not written %s "
					 "(%s); every rank must finish clp_ckpt_writer_write before "
					 "rank 0 commits", w->dir, r, name, why);
		}
		if (json_integer_value(json_object_get(part, "step")) != w->step ||
		    json_integer_value(json_object_get(part, "nranks")) != w->nranks ||
		    !json_is_array(json_object_get(part, "files")))
			s = clp_error(CLP_ERR_FORMAT, "checkpoint %s: %s is for another save (step or "
				      "number of ranks differ)", w->dir, name);
		json_array_foreach(json_object_get(part, "files"), i, f) {
			if (s != CLP_OK)
				break;
			s = check_entry(w, f, r, params, np);
			if (s == CLP_OK)
				json_array_append(files, f);
		}
		json_decref(part);
		CLP_TRY(s);
	}
	return CLP_OK;
}

clp_status clp_ckpt_writer_commit(clp_ckpt_writer *w, int keep)
{
	json_t *files = json_array(), *man = NULL, *ident = NULL;
	clp_ckpt_param *params = NULL;
	int np = 0;
	char hash[32], *text = NULL, *path = NULL;
	clp_status s;

	if (w->rank != 0 || !w->written) {
		json_decref(files);
		return clp_error(CLP_ERR_STATE, "checkpoint %s: commit is for rank 0 after its write "
				 "(this is rank %d, %s)", w->dir, w->rank,
				 w->written ? "written" : "not written");
	}
	if (!files)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	s = gather_parts(w, files, &params, &np);
	if (s != CLP_OK)
		goto done;
	snprintf(hash, sizeof(hash), "%016" PRIx64, clp_ckpt_params_hash(params, np));
	ident = json_deep_copy(w->ident);
	if (!ident || json_object_set_new(ident, "params", json_string(hash)) != 0) {
		s = clp_error(CLP_ERR_NOMEM, "out of memory");
		goto done;
	}
	man = json_pack("{s:s, s:i, s:I, s:i, s:O, s:O, s:O}", "format", CLP_CKPT_FORMAT,
			"version", CLP_CKPT_VERSION, "step", (json_int_t)w->step, "nranks",
			w->nranks, "identity", ident, "metadata", w->meta, "files", files);
	text = man ? json_dumps(man, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
	path = clp_ckpt_join(w->dir, CLP_CKPT_MANIFEST);
	if (!text || !path) {
		s = clp_error(CLP_ERR_NOMEM, "out of memory");
		goto done;
	}
	s = clp_io_write_file(path, text, strlen(text));
	if (s == CLP_OK)
		s = clp_io_fsync_dir(w->dir);
	if (s == CLP_OK)
		s = clp_io_fsync_dir(w->root);
	if (s == CLP_OK) {
		s = prune(w->root, keep, w->step);
		if (s != CLP_OK)
			s = clp_error_context(s, "checkpoint %s is complete, but deleting older ones "
					      "failed: ", w->dir);
	}
done:
	for (int i = 0; i < np; i++)
		free((char *)params[i].name);
	free(params);
	free(text);
	free(path);
	json_decref(man);
	json_decref(ident);
	json_decref(files);
	return s;
}
