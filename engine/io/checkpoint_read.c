/* Checkpoint reading: finding the latest complete checkpoint, the manifest, foreign safetensors
 * files, identity checks, tensors by name with shape and CRC checks (see checkpoint.h). */
#include "engine/io/checkpoint_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cl/base/durable.h"
#include "cl/base/infile.h"

typedef struct cfile {
	char *path;
	clp_ckpt_kind kind;
	clp_st_file *st;
	uint64_t bytes;
	uint32_t crc;
	int has_crc, verified;
} cfile;

struct clp_ckpt {
	char *path;
	long step;
	cfile *f;
	int nf;
	json_t *ident, *meta; /* objects of strings */
	char *notes;
};

static clp_ckpt *ckpt_new(const char *path)
{
	clp_ckpt *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->step = -1;
	c->path = strdup(path);
	c->ident = json_object();
	c->meta = json_object();
	c->notes = strdup("");
	if (!c->path || !c->ident || !c->meta || !c->notes) {
		clp_ckpt_close(c);
		return NULL;
	}
	return c;
}

void clp_ckpt_close(clp_ckpt *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->nf; i++) {
		clp_st_close(c->f[i].st);
		free(c->f[i].path);
	}
	free(c->f);
	json_decref(c->ident);
	json_decref(c->meta);
	free(c->notes);
	free(c->path);
	free(c);
}

static void add_note(clp_ckpt *c, const char *note)
{
	size_t a = strlen(c->notes), b = strlen(note);
	char *n = realloc(c->notes, a + b + 2);

	if (!n)
		return;
	memcpy(n + a, note, b);
	n[a + b] = '\n';
	n[a + b + 1] = '\0';
	c->notes = n;
}

/* Open one safetensors file of the checkpoint; a name held by an earlier file of the same kind
 * is an error (which copy would win?). */
static clp_status add_file(clp_ckpt *c, const char *path, clp_ckpt_kind kind)
{
	cfile *nf = realloc(c->f, (size_t)(c->nf + 1) * sizeof(*nf));
	cfile *f;
	clp_status s;

	if (!nf)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	c->f = nf;
	f = &c->f[c->nf];
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->path = strdup(path);
	if (!f->path)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	c->nf++;
	s = clp_st_open(&f->st, path);
	if (s != CLP_OK)
		return clp_error_context(s, "checkpoint %s: ", c->path);
	for (int i = 0; i < clp_st_count(f->st); i++) {
		const char *name = clp_st_at(f->st, i)->name;

		for (int j = 0; j < c->nf - 1; j++)
			if (c->f[j].kind == kind && clp_st_find(c->f[j].st, name))
				return clp_error(CLP_ERR_FORMAT, "checkpoint %s: tensor \"%s\" is in "
						 "both %s and %s", c->path, name, c->f[j].path,
						 path);
	}
	return CLP_OK;
}

static clp_status copy_strings(clp_ckpt *c, json_t *dst, json_t *src, const char *what)
{
	const char *key;
	json_t *v;

	if (!src)
		return CLP_OK;
	if (!json_is_object(src))
		return clp_error(CLP_ERR_FORMAT, "checkpoint %s: \"%s\" is not an object", c->path,
				 what);
	json_object_foreach(src, key, v) {
		if (!json_is_string(v))
			return clp_error(CLP_ERR_FORMAT, "checkpoint %s: %s \"%s\" is not a string",
					 c->path, what, key);
		json_object_set(dst, key, v);
	}
	return CLP_OK;
}

static clp_status open_manifest(clp_ckpt *c, const char *dir)
{
	char *mpath = clp_ckpt_join(dir, CLP_CKPT_MANIFEST), *text = NULL;
	size_t n = 0;
	json_error_t je;
	json_t *m, *files, *fe;
	const char *fmt;
	size_t i;
	clp_status s = CLP_OK;

	if (!mpath)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	/* a regular file of bounded size: a FIFO named manifest.json must not block the open */
	s = clp_infile_read("checkpoint manifest", mpath, CLP_INFILE_JSON_MAX, &text, &n);
	if (s != CLP_OK) {
		free(mpath);
		return s;
	}
	m = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
	free(text);
	if (!m) {
		s = clp_error(CLP_ERR_FORMAT, "checkpoint %s: %s is malformed (line %d: %s)", dir,
			      CLP_CKPT_MANIFEST, je.line, je.text);
		free(mpath);
		return s;
	}
	free(mpath);
	files = json_object_get(m, "files");
	fmt = json_string_value(json_object_get(m, "format"));
	if (!json_is_object(m) || !fmt || strcmp(fmt, CLP_CKPT_FORMAT) ||
	    !json_is_integer(json_object_get(m, "step")) || !json_is_array(files)) {
		s = clp_error(CLP_ERR_FORMAT, "checkpoint %s: %s is not a clpipe manifest (needs "
			      "format, step, files)", dir, CLP_CKPT_MANIFEST);
		goto done;
	}
	if (json_integer_value(json_object_get(m, "version")) != CLP_CKPT_VERSION) {
		s = clp_error(CLP_ERR_UNSUPPORTED, "checkpoint %s: manifest version %lld; this "
			      "clpipe reads version %d", dir,
			      (long long)json_integer_value(json_object_get(m, "version")),
			      CLP_CKPT_VERSION);
		goto done;
	}
	c->step = (long)json_integer_value(json_object_get(m, "step"));
	s = copy_strings(c, c->ident, json_object_get(m, "identity"), "identity");
	if (s == CLP_OK)
		s = copy_strings(c, c->meta, json_object_get(m, "metadata"), "metadata");
	json_array_foreach(files, i, fe) {
		const char *file = json_string_value(json_object_get(fe, "file"));
		const char *kind = json_string_value(json_object_get(fe, "kind"));
		const char *crc = json_string_value(json_object_get(fe, "crc32"));
		json_t *bytes = json_object_get(fe, "bytes");
		char *path;
		struct stat st;

		if (s != CLP_OK)
			break;
		if (!file || strchr(file, '/') || !kind || !json_is_integer(bytes) || !crc ||
		    (strcmp(kind, "model") && strcmp(kind, "optimizer"))) {
			s = clp_error(CLP_ERR_FORMAT, "checkpoint %s: file entry %zu of the manifest "
				      "is malformed", dir, i);
			break;
		}
		path = clp_ckpt_join(dir, file);
		if (!path) {
			s = clp_error(CLP_ERR_NOMEM, "out of memory");
			break;
		}
		if (stat(path, &st) != 0)
			s = clp_error(CLP_ERR_FORMAT, "checkpoint %s is damaged: %s is missing",
				      dir, file);
		else if ((uint64_t)st.st_size != (uint64_t)json_integer_value(bytes))
			s = clp_error(CLP_ERR_FORMAT, "checkpoint %s is damaged: %s is %lld bytes, "
				      "the manifest says %lld (truncated?)", dir, file,
				      (long long)st.st_size, (long long)json_integer_value(bytes));
		else
			s = add_file(c, path, strcmp(kind, "model") ? CLP_CKPT_OPTIM
								  : CLP_CKPT_MODEL);
		free(path);
		if (s == CLP_OK) {
			cfile *f = &c->f[c->nf - 1];

			f->bytes = (uint64_t)json_integer_value(bytes);
			f->crc = (uint32_t)strtoul(crc, NULL, 16);
			f->has_crc = 1;
		}
	}
done:
	json_decref(m);
	return s;
}

/* A foreign or self-describing safetensors file: identity and metadata from its own header. */
static clp_status take_file_meta(clp_ckpt *c, const clp_st_file *st)
{
	for (int i = 0; i < clp_st_meta_count(st); i++) {
		const char *k, *v;

		clp_st_meta_at(st, i, &k, &v);
		if (!strcmp(k, "clpipe.step"))
			c->step = strtol(v, NULL, 10);
		else if (!strncmp(k, "identity.", 9))
			json_object_set_new(c->ident, k + 9, json_string(v));
		else if (strcmp(k, "format") && strncmp(k, "clpipe.", 7))
			json_object_set_new(c->meta, k, json_string(v));
	}
	return CLP_OK;
}

/* Hugging Face's sharded layout: model.safetensors.index.json maps names to files. */
static clp_status open_hf_index(clp_ckpt *c, const char *dir, const char *index)
{
	json_error_t je;
	json_t *m = NULL, *wm, *v;
	const char *key;
	char *text = NULL;
	size_t n = 0;
	clp_status s = clp_infile_read("safetensors index", index, CLP_INFILE_JSON_MAX, &text, &n);

	if (s != CLP_OK)
		return s;
	m = json_loadb(text, n, 0, &je);
	free(text);
	if (!m)
		return clp_error(CLP_ERR_FORMAT, "%s:%d: malformed JSON: %s", index, je.line,
				 je.text);
	wm = json_object_get(m, "weight_map");
	if (!json_is_object(wm)) {
		json_decref(m);
		return clp_error(CLP_ERR_FORMAT, "%s: no \"weight_map\" object", index);
	}
	json_object_foreach(wm, key, v) {
		const char *file = json_string_value(v);
		char *path;
		int seen = 0;

		if (!file || strchr(file, '/')) {
			s = clp_error(CLP_ERR_FORMAT, "%s: the file of \"%s\" is not a plain name",
				      index, key);
			break;
		}
		path = clp_ckpt_join(dir, file);
		if (!path) {
			s = clp_error(CLP_ERR_NOMEM, "out of memory");
			break;
		}
		for (int i = 0; i < c->nf; i++)
			seen |= !strcmp(c->f[i].path, path);
		if (!seen)
			s = add_file(c, path, CLP_CKPT_MODEL);
		free(path);
		if (s != CLP_OK)
			break;
	}
	json_decref(m);
	return s;
}

static int is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static clp_status open_dir(clp_ckpt *c, const char *dir)
{
	char *p;
	clp_status s;

	if ((p = clp_ckpt_join(dir, CLP_CKPT_MANIFEST)) && is_file(p)) {
		free(p);
		return open_manifest(c, dir);
	}
	free(p);
	if ((p = clp_ckpt_join(dir, "model.safetensors.index.json")) && is_file(p)) {
		s = open_hf_index(c, dir, p);
		free(p);
		return s;
	}
	free(p);
	if ((p = clp_ckpt_join(dir, "part-rank0.json")) && is_file(p)) {
		free(p);
		return clp_error(CLP_ERR_FORMAT, "checkpoint %s is incomplete: no %s (the write was "
				 "interrupted); use an earlier checkpoint", dir,
				 CLP_CKPT_MANIFEST);
	}
	free(p);
	if ((p = clp_ckpt_join(dir, "model.safetensors")) && is_file(p)) {
		s = add_file(c, p, CLP_CKPT_MODEL);
		if (s == CLP_OK)
			s = take_file_meta(c, c->f[0].st);
		free(p);
		return s;
	}
	free(p);
	return clp_error(CLP_ERR_NOT_FOUND, "%s: not a checkpoint (no %s, step-* directories, "
			 "model.safetensors or model.safetensors.index.json)", dir,
			 CLP_CKPT_MANIFEST);
}

static clp_status latest(clp_ckpt **out, const char *root, int *found)
{
	clp_ckpt_entry *e;
	int n;
	clp_ckpt *c = ckpt_new(root);
	clp_status s = CLP_OK;

	*found = 0;
	if (!c)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	s = clp_ckpt_list(root, &e, &n);
	for (int i = 0; s == CLP_OK && i < n; i++) {
		char note[1024];

		if (!e[i].complete) {
			snprintf(note, sizeof(note), "skipped %s: no %s (incomplete: the write was "
				 "interrupted)", e[i].dir, CLP_CKPT_MANIFEST);
			add_note(c, note);
			continue;
		}
		*found = 1;
		free(c->path);
		c->path = strdup(e[i].dir);
		s = c->path ? open_manifest(c, e[i].dir) : clp_error(CLP_ERR_NOMEM, "out of memory");
		break;
	}
	clp_ckpt_list_free(e, n);
	if (s == CLP_OK && !*found)
		s = clp_error(CLP_ERR_NOT_FOUND, "no complete checkpoint under %s%s%s", root,
			      c->notes[0] ? "; " : "", c->notes);
	if (s != CLP_OK) {
		clp_ckpt_close(c);
		return s;
	}
	*out = c;
	return CLP_OK;
}

clp_status clp_ckpt_open_latest(clp_ckpt **out, const char *root)
{
	int found;

	*out = NULL;
	return latest(out, root, &found);
}

clp_status clp_ckpt_open(clp_ckpt **out, const char *path)
{
	struct stat st;
	clp_ckpt_entry *e;
	int n;
	clp_ckpt *c;
	clp_status s;

	*out = NULL;
	if (stat(path, &st) != 0)
		return clp_error(CLP_ERR_NOT_FOUND, "%s: no such checkpoint: %s", path,
				 strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		char *man = clp_ckpt_join(path, CLP_CKPT_MANIFEST);
		int has_man = man && is_file(man);

		free(man);
		CLP_TRY(clp_ckpt_list(path, &e, &n));
		clp_ckpt_list_free(e, n);
		if (n > 0 && !has_man)
			return clp_ckpt_open_latest(out, path);
	}
	c = ckpt_new(path);
	if (!c)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	if (S_ISDIR(st.st_mode)) {
		s = open_dir(c, path);
	} else {
		s = add_file(c, path, CLP_CKPT_MODEL);
		if (s == CLP_OK)
			s = take_file_meta(c, c->f[0].st);
	}
	if (s != CLP_OK) {
		clp_ckpt_close(c);
		return s;
	}
	*out = c;
	return CLP_OK;
}

const char *clp_ckpt_path(const clp_ckpt *c)
{
	return c->path;
}

long clp_ckpt_step(const clp_ckpt *c)
{
	return c->step;
}

const char *clp_ckpt_notes(const clp_ckpt *c)
{
	return c->notes;
}

const char *clp_ckpt_identity(const clp_ckpt *c, const char *key)
{
	return json_string_value(json_object_get(c->ident, key));
}

const char *clp_ckpt_meta(const clp_ckpt *c, const char *key)
{
	return json_string_value(json_object_get(c->meta, key));
}

clp_status clp_ckpt_check_identity(const clp_ckpt *c, const clp_ckpt_kv *expected, int n,
				   uint64_t params_hash)
{
	char msg[2048];
	size_t len = 0;
	int bad = 0;

	if (json_object_size(c->ident) == 0)
		return CLP_OK;
	for (int i = 0; i < n; i++) {
		const char *have = clp_ckpt_identity(c, expected[i].key);

		if (have && !strcmp(have, expected[i].value))
			continue;
		if (len < sizeof(msg))
			len += (size_t)snprintf(msg + len, sizeof(msg) - len, "%s%s is %s in the "
						"checkpoint, %s in this run", bad ? "; " : "",
						expected[i].key, have ? have : "(missing)",
						expected[i].value);
		bad++;
	}
	if (params_hash) {
		const char *have = clp_ckpt_identity(c, "params");
		char want[32];

		snprintf(want, sizeof(want), "%016" PRIx64, params_hash);
		if (!have || strcmp(have, want)) {
			if (len < sizeof(msg))
				len += (size_t)snprintf(msg + len, sizeof(msg) - len, "%sthe parameter "
							"names and shapes differ (hash %s in the "
							"checkpoint, %s in this run)",
							bad ? "; " : "", have ? have : "(missing)",
							want);
			bad++;
		}
	}
	if (bad)
		return clp_error(CLP_ERR_INVALID, "checkpoint %s belongs to another model: %s",
				 c->path, msg);
	return CLP_OK;
}

int clp_ckpt_count(const clp_ckpt *c, clp_ckpt_kind kind)
{
	int n = 0;

	for (int i = 0; i < c->nf; i++)
		if (c->f[i].kind == kind)
			n += clp_st_count(c->f[i].st);
	return n;
}

const clp_st_tensor *clp_ckpt_tensor(const clp_ckpt *c, clp_ckpt_kind kind, int i)
{
	for (int j = 0; j < c->nf; j++) {
		if (c->f[j].kind != kind)
			continue;
		if (i < clp_st_count(c->f[j].st))
			return clp_st_at(c->f[j].st, i);
		i -= clp_st_count(c->f[j].st);
	}
	return NULL;
}

static cfile *find(const clp_ckpt *c, clp_ckpt_kind kind, const char *name,
		   const clp_st_tensor **t)
{
	for (int j = 0; j < c->nf; j++)
		if (c->f[j].kind == kind && (*t = clp_st_find(c->f[j].st, name)))
			return &c->f[j];
	return NULL;
}

const clp_st_tensor *clp_ckpt_find(const clp_ckpt *c, clp_ckpt_kind kind, const char *name)
{
	const clp_st_tensor *t = NULL;

	return find(c, kind, name, &t) ? t : NULL;
}

static clp_status verify_file(const clp_ckpt *c, cfile *f)
{
	uint32_t crc;
	uint64_t size;

	if (!f->has_crc || f->verified)
		return CLP_OK;
	CLP_TRY(clp_io_crc32_file(f->path, &crc, &size));
	if (size != f->bytes || crc != f->crc)
		return clp_error(CLP_ERR_FORMAT, "checkpoint %s is damaged: %s has CRC-32 %08" PRIx32
				 " (%llu bytes), the manifest says %08" PRIx32 " (%llu bytes)",
				 c->path, f->path, crc, (unsigned long long)size, f->crc,
				 (unsigned long long)f->bytes);
	f->verified = 1;
	return CLP_OK;
}

clp_status clp_ckpt_verify(clp_ckpt *c)
{
	for (int i = 0; i < c->nf; i++)
		CLP_TRY(verify_file(c, &c->f[i]));
	return CLP_OK;
}

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape)
{
	size_t len = (size_t)snprintf(buf, cap, "[");

	for (int d = 0; d < ndim && len < cap; d++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, d ? ", " : "", shape[d]);
	if (len < cap)
		snprintf(buf + len, cap - len, "]");
}

clp_status clp_ckpt_read(clp_ckpt *c, clp_ckpt_kind kind, const char *name, float *dst,
			 int ndim, const int64_t *shape)
{
	const clp_st_tensor *t = NULL;
	cfile *f = find(c, kind, name, &t);
	int same;

	if (!f)
		return clp_error(CLP_ERR_NOT_FOUND, "checkpoint %s has no %s tensor \"%s\"", c->path,
				 clp_ckpt_kind_name(kind), name);
	same = t->ndim == ndim;
	for (int d = 0; same && d < ndim; d++)
		same = t->shape[d] == shape[d];
	if (!same) {
		char a[256], b[256];

		shape_str(a, sizeof(a), t->ndim, t->shape);
		shape_str(b, sizeof(b), ndim, shape);
		return clp_error(CLP_ERR_INVALID, "checkpoint %s: tensor \"%s\" has shape %s there, "
				 "%s in this run", c->path, name, a, b);
	}
	CLP_TRY(verify_file(c, f));
	return clp_st_read_f32(f->st, t, dst);
}
