/* The config reader and writer (see config.h and docs/CONFIG.md). */
#include "engine/io/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/infile.h"

const clp_cfg_field *clp_cfg_find(const clp_cfg_schema *s, const char *key)
{
	for (int i = 0; i < s->nfields; i++)
		if (strcmp(s->fields[i].key, key) == 0)
			return &s->fields[i];
	return NULL;
}

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

static int in_range(const clp_cfg_field *f, double v)
{
	return !(f->min < f->max) || (v >= f->min && v <= f->max);
}

static int choice_ok(const char *choices, const char *v)
{
	size_t vl = strlen(v);

	for (const char *p = choices; p && *p;) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);

		if (len == vl && strncmp(p, v, len) == 0)
			return 1;
		p = bar ? bar + 1 : NULL;
	}
	return 0;
}

/* Parse a quoted string (after the opening quote); returns pointer past the closing quote. */
static const char *parse_quoted(const char *p, char quote, char *out, size_t cap, int *ok)
{
	size_t n = 0;

	*ok = 0;
	while (*p && *p != quote) {
		char c = *p++;

		if (c == '\\' && quote == '"') {
			switch (*p++) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case '\\': c = '\\'; break;
			case '"': c = '"'; break;
			case 'r': c = '\r'; break;
			case 'u': { /* \u00XX, as the writer escapes control characters */
				unsigned v = 0;

				for (int k = 0; k < 4; k++, p++) {
					int d = isxdigit((unsigned char)*p) ? (isdigit((unsigned char)*p)
						? *p - '0' : (tolower((unsigned char)*p) - 'a' + 10)) : -1;

					if (d < 0)
						return p;
					v = v * 16 + (unsigned)d;
				}
				if (v == 0 || v > 0x7f)
					return p;
				c = (char)v;
				break;
			}
			default: return p;
			}
		}
		if (n + 1 >= cap)
			return p;
		out[n++] = c;
	}
	if (*p != quote)
		return p;
	out[n] = '\0';
	*ok = 1;
	return p + 1;
}

static clp_status bad(const clp_cfg_field *f, const char *origin, const char *value,
		      const char *what)
{
	return clp_error(CLP_ERR_INVALID, "%s: %s = %s: %s", origin, f->key, value, what);
}

static int parse_long(const char *s, long *v)
{
	char *e;

	errno = 0;
	*v = strtol(s, &e, 0);
	e = (char *)skip_ws(e);
	return errno == 0 && e != s && *e == '\0';
}

static clp_cfg_origin *origin_slot(const clp_cfg_schema *s, const void *obj,
				    const clp_cfg_field *f)
{
	if (!s->origins || !f)
		return NULL;
	return (clp_cfg_origin *)((char *)obj + s->origins) + (f - s->fields);
}

void clp_cfg_set_origin(const clp_cfg_schema *s, void *obj, const char *key, const char *origin)
{
	clp_cfg_origin *o = origin_slot(s, obj, clp_cfg_find(s, key));

	if (o)
		snprintf(*o, sizeof(*o), "%s", origin);
}

const char *clp_cfg_origin_of(const clp_cfg_schema *s, const void *obj, const char *key)
{
	clp_cfg_origin *o = origin_slot(s, obj, clp_cfg_find(s, key));

	return o ? *o : "";
}

static clp_status parse_value(const clp_cfg_schema *s, const clp_cfg_field *f, void *obj,
			      const char *buf, const char *origin, int raw);

int clp_cfg_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int row[3][130];

	if (la > 128 || lb > 128)
		return 1 << 20;
	/* optimal string alignment: insertions, deletions, substitutions, adjacent swaps */
	for (size_t j = 0; j <= lb; j++)
		row[1][j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		int *cur = row[(i + 1) % 3], *prev = row[i % 3], *pp = row[(i + 2) % 3];

		cur[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int cost = a[i - 1] != b[j - 1], v = prev[j - 1] + cost;

			if (prev[j] + 1 < v)
				v = prev[j] + 1;
			if (cur[j - 1] + 1 < v)
				v = cur[j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    pp[j - 2] + 1 < v)
				v = pp[j - 2] + 1;
			cur[j] = v;
		}
	}
	return row[(la + 1) % 3][lb];
}

const char *clp_cfg_nearest(const clp_cfg_schema *s, const char *key)
{
	const char *best = NULL, *dot = strchr(key, '.');
	int bd = (int)strlen(key) / 4 + 1; /* close: about one edit in four letters */

	if (bd > 3)
		bd = 3;
	for (int i = 0; i < s->nfields; i++) {
		const char *k = s->fields[i].key, *kd = strchr(k, '.');
		int d = clp_cfg_distance(key, k);

		/* "batch" for "train.batch": the key without its section */
		if (!dot && kd && !strcmp(kd + 1, key))
			d = 0;
		if (d <= bd && (!best || d < clp_cfg_distance(key, best) ||
				(!dot && kd && !strcmp(kd + 1, key)))) {
			best = k;
			bd = d;
		}
	}
	return best;
}

/* raw: a command-line value, whose string is taken as it is unless quoted as a whole */
static clp_status set_field(const clp_cfg_schema *s, void *obj, const char *key,
			    const char *value, const char *origin, int raw)
{
	const clp_cfg_field *f = clp_cfg_find(s, key);
	char buf[4096];
	size_t len = strlen(value);

	if (!f) {
		const char *near = clp_cfg_nearest(s, key);

		if (near)
			return clp_error(CLP_ERR_INVALID, "%s: unknown %s setting '%s': did you mean "
					 "'%s'?", origin, s->name, key, near);
		return clp_error(CLP_ERR_INVALID, "%s: unknown %s setting '%s' (see --help for the "
				 "list)", origin, s->name, key);
	}
	if (len >= sizeof(buf))
		return clp_error(CLP_ERR_INVALID, "%s: %s: the value is longer than %zu characters",
				 origin, f->key, sizeof(buf) - 1);
	if (raw && f->type == CLP_CFG_STRING &&
	    !(len >= 2 && (value[0] == '"' || value[0] == '\'') && value[len - 1] == value[0])) {
		memcpy(buf, value, len + 1);
	} else {
		value = skip_ws(value);
		snprintf(buf, sizeof(buf), "%s", value);
		for (size_t n = strlen(buf); n && isspace((unsigned char)buf[n - 1]);)
			buf[--n] = '\0';
		raw = 0;
	}
	CLP_TRY(parse_value(s, f, obj, buf, origin, raw));
	clp_cfg_set_origin(s, obj, key, origin);
	return CLP_OK;
}

clp_status clp_cfg_set(const clp_cfg_schema *s, void *obj, const char *key, const char *value,
		       const char *origin)
{
	return set_field(s, obj, key, value, origin, 0);
}

clp_status clp_cfg_set_arg(const clp_cfg_schema *s, void *obj, const char *key,
			   const char *value, const char *origin)
{
	return set_field(s, obj, key, value, origin, 1);
}

static clp_status parse_value(const clp_cfg_schema *s, const clp_cfg_field *f, void *obj,
			      const char *buf, const char *origin, int raw)
{
	char *dst = (char *)obj + f->offset;

	switch (f->type) {
	case CLP_CFG_INT: {
		long v;

		if (!parse_long(buf, &v))
			return bad(f, origin, buf, "expected an integer");
		if (!in_range(f, (double)v))
			return clp_error(CLP_ERR_INVALID, "%s: %s = %ld is out of range [%g, %g]",
					 origin, f->key, v, f->min, f->max);
		*(long *)dst = v;
		return CLP_OK;
	}
	case CLP_CFG_FLOAT: {
		char *e;
		double v;

		errno = 0;
		v = strtod(buf, &e);
		if (errno || e == buf || *skip_ws(e) || !isfinite(v))
			return bad(f, origin, buf, "expected a finite number");
		if (!in_range(f, v))
			return clp_error(CLP_ERR_INVALID, "%s: %s = %g is out of range [%g, %g]",
					 origin, f->key, v, f->min, f->max);
		*(double *)dst = v;
		return CLP_OK;
	}
	case CLP_CFG_BOOL:
		if (!strcmp(buf, "true") || !strcmp(buf, "1") || !strcmp(buf, "yes"))
			*(int *)dst = 1;
		else if (!strcmp(buf, "false") || !strcmp(buf, "0") || !strcmp(buf, "no"))
			*(int *)dst = 0;
		else
			return bad(f, origin, buf, "expected true or false");
		return CLP_OK;
	case CLP_CFG_STRING: {
		char tmp[4096];
		const char *src = buf;
		int ok = 1;

		if (!raw && (buf[0] == '"' || buf[0] == '\'')) {
			const char *end = parse_quoted(buf + 1, buf[0], tmp, sizeof(tmp), &ok);

			if (!ok || *skip_ws(end))
				return bad(f, origin, buf, "unterminated or malformed string");
			src = tmp;
		}
		if (strlen(src) >= f->size)
			return clp_error(CLP_ERR_INVALID, "%s: %s is longer than %zu characters",
					 origin, f->key, f->size - 1);
		if (f->choices && !choice_ok(f->choices, src))
			return clp_error(CLP_ERR_INVALID, "%s: %s = \"%s\": expected one of %s",
					 origin, f->key, src, f->choices);
		memcpy(dst, src, strlen(src) + 1);
		return CLP_OK;
	}
	case CLP_CFG_INTS: {
		clp_cfg_ints v = {0};
		const char *p = buf;

		if (*p == '[')
			p++;
		for (;;) {
			char *e;
			long x;

			p = skip_ws(p);
			if (*p == ']' || *p == '\0')
				break;
			errno = 0;
			x = strtol(p, &e, 0);
			if (e == p || errno)
				return bad(f, origin, buf, "expected a list of integers like [1, 2]");
			if (v.n == CLP_CFG_MAX_INTS)
				return bad(f, origin, buf, "too many values");
			if (!in_range(f, (double)x))
				return clp_error(CLP_ERR_INVALID, "%s: %s: value %ld is out of range "
						 "[%g, %g]", origin, f->key, x, f->min, f->max);
			v.v[v.n++] = x;
			p = skip_ws(e);
			if (*p == ',')
				p++;
		}
		if (buf[0] == '[' && *p != ']')
			return bad(f, origin, buf, "missing ']'");
		*(clp_cfg_ints *)dst = v;
		return CLP_OK;
	}
	}
	(void)s;
	return clp_error(CLP_ERR_INVALID, "%s: field %s has an unknown type", origin, f->key);
}

clp_status clp_cfg_name_origins(const clp_cfg_schema *s, const void *obj, clp_status st)
{
	char msg[2048], add[1024] = "";
	size_t n = 0;

	if (st == CLP_OK)
		return st;
	snprintf(msg, sizeof(msg), "%s", clp_last_error());
	for (int i = 0; i < s->nfields && n + 1 < sizeof(add); i++) {
		const char *k = s->fields[i].key, *hit = strstr(msg, k), *w;
		size_t kl = strlen(k);

		/* the key as a whole word: "model.n_head" is not in "model.n_head_x" */
		while (hit && (isalnum((unsigned char)hit[kl]) || hit[kl] == '_'))
			hit = strstr(hit + 1, k);
		if (!hit)
			continue;
		w = clp_cfg_origin_of(s, obj, k);
		if (!w[0] || !strcmp(w, "default"))
			w = NULL;
		n += (size_t)snprintf(add + n, sizeof(add) - n, "%s%s %s%s", n ? "; " : "", k,
				      w ? "from " : "", w ? w : "is the default");
	}
	if (!n)
		return st;
	return clp_error(st, "%s (%s)", msg, add);
}

clp_status clp_cfg_defaults(const clp_cfg_schema *s, void *obj)
{
	for (int i = 0; i < s->nfields; i++)
		CLP_TRY(clp_cfg_set(s, obj, s->fields[i].key, s->fields[i].dflt, "default"));
	return CLP_OK;
}

/* Strip a trailing comment that is not inside a string. */
static void strip_comment(char *line)
{
	char q = 0;

	for (char *p = line; *p; p++) {
		if (q) {
			if (*p == '\\' && q == '"' && p[1])
				p++;
			else if (*p == q)
				q = 0;
		} else if (*p == '"' || *p == '\'') {
			q = *p;
		} else if (*p == '#') {
			*p = '\0';
			return;
		}
	}
}

clp_status clp_cfg_load_string(const clp_cfg_schema *s, void *obj, const char *text,
			       const char *origin)
{
	char section[128] = "";
	int lineno = 0;

	while (*text) {
		char line[4096], where[512], key[256];
		const char *nl = strchr(text, '\n');
		size_t len = nl ? (size_t)(nl - text) : strlen(text);
		char *p, *eq, *end;

		lineno++;
		snprintf(where, sizeof(where), "%s:%d", origin, lineno);
		if (len >= sizeof(line))
			return clp_error(CLP_ERR_FORMAT, "%s: line too long", where);
		memcpy(line, text, len);
		line[len] = '\0';
		text += len + (nl ? 1 : 0);
		strip_comment(line);
		p = (char *)skip_ws(line);
		end = p + strlen(p);
		while (end > p && isspace((unsigned char)end[-1]))
			*--end = '\0';
		if (*p == '\0')
			continue;
		if (*p == '[') {
			if (end[-1] != ']' || end - p < 3 || end - p > (long)sizeof(section))
				return clp_error(CLP_ERR_FORMAT, "%s: malformed section header '%s'",
						 where, p);
			end[-1] = '\0';
			snprintf(section, sizeof(section), "%s", skip_ws(p + 1));
			for (char *q = section + strlen(section); q > section && q[-1] == ' ';)
				*--q = '\0';
			continue;
		}
		eq = strchr(p, '=');
		if (!eq)
			return clp_error(CLP_ERR_FORMAT, "%s: expected 'key = value', got '%s'", where,
					 p);
		*eq = '\0';
		for (char *q = eq; q > p && isspace((unsigned char)q[-1]);)
			*--q = '\0';
		if (section[0])
			snprintf(key, sizeof(key), "%s.%s", section, p);
		else
			snprintf(key, sizeof(key), "%s", p);
		CLP_TRY(clp_cfg_set(s, obj, key, eq + 1, where));
	}
	return CLP_OK;
}

clp_status clp_cfg_load_file(const clp_cfg_schema *s, void *obj, const char *path)
{
	char *buf;
	size_t n;
	clp_status st;

	CLP_TRY(clp_infile_read("config", path, CLP_INFILE_TEXT_MAX, &buf, &n));
	if (memchr(buf, '\0', (size_t)n)) {
		free(buf);
		return clp_error(CLP_ERR_FORMAT, "config %s: contains NUL bytes (not a text file)",
				 path);
	}
	st = clp_cfg_load_string(s, obj, buf, path);
	free(buf);
	return st;
}

clp_status clp_cfg_args(const clp_cfg_schema *s, void *obj, int *argc, char **argv)
{
	int out = 1;

	/* --config first, so command-line values override the file wherever they appear. */
	for (int i = 1; i < *argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--config") || !strncmp(a, "--config=", 9)) {
			const char *path = a[8] == '=' ? a + 9 : (i + 1 < *argc ? argv[i + 1] : NULL);

			if (!path)
				return clp_error(CLP_ERR_INVALID, "--config needs a file name");
			CLP_TRY(clp_cfg_load_file(s, obj, path));
		}
	}
	for (int i = 1; i < *argc; i++) {
		char key[256];
		const char *a = argv[i], *eq, *val;
		char origin[300];

		if (!strcmp(a, "--config")) {
			i++;
			continue;
		}
		if (!strncmp(a, "--config=", 9))
			continue;
		if (strncmp(a, "--", 2) != 0 || !strchr(a, '.')) {
			argv[out++] = argv[i];
			continue;
		}
		eq = strchr(a, '=');
		snprintf(key, sizeof(key), "%.*s", (int)(eq ? eq - a - 2 : (long)strlen(a) - 2), a + 2);
		if (!clp_cfg_find(s, key)) {
			argv[out++] = argv[i];
			continue;
		}
		if (eq) {
			val = eq + 1;
		} else {
			if (i + 1 >= *argc)
				return clp_error(CLP_ERR_INVALID, "--%s needs a value", key);
			val = argv[++i];
		}
		snprintf(origin, sizeof(origin), "command line --%s", key);
		CLP_TRY(clp_cfg_set_arg(s, obj, key, val, origin));
	}
	argv[out] = NULL;
	*argc = out;
	return CLP_OK;
}

static void write_value(const clp_cfg_field *f, const void *obj, FILE *out)
{
	const char *src = (const char *)obj + f->offset;

	switch (f->type) {
	case CLP_CFG_INT:
		fprintf(out, "%ld", *(const long *)src);
		break;
	case CLP_CFG_FLOAT: {
		double v = *(const double *)src;

		/* shortest text that reads back to the same double */
		for (int prec = 6; prec <= 17; prec++) {
			char b[64];

			snprintf(b, sizeof(b), "%.*g", prec, v);
			if (strtod(b, NULL) == v || prec == 17) {
				fputs(b, out);
				if (!strpbrk(b, ".eEn"))
					fputs(".0", out);
				break;
			}
		}
		break;
	}
	case CLP_CFG_BOOL:
		fputs(*(const int *)src ? "true" : "false", out);
		break;
	case CLP_CFG_STRING:
		fputc('"', out);
		for (const char *p = src; *p; p++) {
			if (*p == '"' || *p == '\\')
				fputc('\\', out);
			if (*p == '\n')
				fputs("\\n", out);
			else if (*p == '\t')
				fputs("\\t", out);
			else if ((unsigned char)*p < 0x20 || *p == 0x7f) /* TOML: no raw controls */
				fprintf(out, "\\u%04x", (unsigned)(unsigned char)*p);
			else
				fputc(*p, out);
		}
		fputc('"', out);
		break;
	case CLP_CFG_INTS: {
		const clp_cfg_ints *v = (const clp_cfg_ints *)src;

		fputc('[', out);
		for (int i = 0; i < v->n; i++)
			fprintf(out, "%s%ld", i ? ", " : "", v->v[i]);
		fputc(']', out);
		break;
	}
	}
}

static size_t section_len(const char *key)
{
	const char *dot = strrchr(key, '.');

	return dot ? (size_t)(dot - key) : 0;
}

/* Each section once (TOML forbids a table twice), in the order sections first appear. */
void clp_cfg_write(const clp_cfg_schema *s, const void *obj, FILE *out, int flags)
{
	int nsec = 0;

	for (int i = 0; i < s->nfields; i++) {
		const char *key = s->fields[i].key;
		size_t sl = section_len(key);
		int seen = 0;

		for (int j = 0; j < i && !seen; j++)
			seen = section_len(s->fields[j].key) == sl &&
			       !strncmp(s->fields[j].key, key, sl);
		if (seen)
			continue;
		if (sl)
			fprintf(out, "%s[%.*s]\n", nsec ? "\n" : "", (int)sl, key);
		nsec++;
		for (int j = i; j < s->nfields; j++) {
			const clp_cfg_field *f = &s->fields[j];
			const clp_cfg_origin *o = origin_slot(s, obj, f);

			if (section_len(f->key) != sl || strncmp(f->key, key, sl))
				continue;
			if ((flags & CLP_CFG_HELP) && f->help)
				fprintf(out, "# %s\n", f->help);
			fprintf(out, "%s = ", f->key + (sl ? sl + 1 : 0));
			write_value(f, obj, out);
			if ((flags & CLP_CFG_ORIGINS) && o && (*o)[0] && strcmp(*o, "default"))
				fprintf(out, "  # %s", *o);
			fputc('\n', out);
		}
	}
}

void clp_cfg_get(const clp_cfg_schema *s, const void *obj, const char *key, char *buf, size_t n)
{
	const clp_cfg_field *f = clp_cfg_find(s, key);
	FILE *m;

	if (n)
		buf[0] = '\0';
	if (!f || n < 2 || !(m = fmemopen(buf, n, "w")))
		return;
	setvbuf(m, NULL, _IONBF, 0);
	write_value(f, obj, m);
	fclose(m);
	buf[n - 1] = '\0';
}

clp_status clp_cfg_set_strict(const clp_cfg_schema *s, void *obj, const char *key,
			      const char *value, const char *origin)
{
	const clp_cfg_field *f = clp_cfg_find(s, key);
	clp_cfg_origin *o = origin_slot(s, obj, f);
	clp_cfg_origin was = "";
	char old[4096], before[256], after[256];
	clp_status st;

	if (!f || f->size > sizeof(old) || !o || !(*o)[0] || !strcmp(*o, "default"))
		return clp_cfg_set(s, obj, key, value, origin);
	memcpy(old, (char *)obj + f->offset, f->size);
	memcpy(was, *o, sizeof(was));
	st = clp_cfg_set(s, obj, key, value, origin);
	if (st != CLP_OK || !memcmp(old, (char *)obj + f->offset, f->size))
		return st;
	clp_cfg_get(s, obj, key, after, sizeof(after));
	memcpy((char *)obj + f->offset, old, f->size);
	memcpy(*o, was, sizeof(was));
	clp_cfg_get(s, obj, key, before, sizeof(before));
	return clp_error(CLP_ERR_INVALID, "%s = %s (%s) contradicts %s = %s (%s); drop one of them",
			 key, before, was, key, after, origin);
}

char *clp_cfg_to_string(const clp_cfg_schema *s, const void *obj)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	clp_cfg_write(s, obj, f, 0);
	fclose(f);
	return buf;
}

void clp_cfg_help(const clp_cfg_schema *s, FILE *out)
{
	static const char *const tn[] = {"int", "float", "bool", "string", "ints"};

	for (int i = 0; i < s->nfields; i++) {
		const clp_cfg_field *f = &s->fields[i];

		fprintf(out, "  --%-28s %-6s %s (default %s", f->key, tn[f->type],
			f->help ? f->help : "", f->dflt);
		if (f->choices)
			fprintf(out, "; one of %s", f->choices);
		fprintf(out, ")\n");
	}
}
