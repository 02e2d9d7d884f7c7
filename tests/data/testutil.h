/* Helpers for the data and checkpoint tests: a private temporary directory and small files. */
#ifndef CLP_TESTS_DATA_TESTUTIL_H
#define CLP_TESTS_DATA_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl/base/durable.h"
#include "tests/harness.h"

/* A fresh directory under $TMPDIR (or /tmp), removed at exit. */
static char tu_dir[512];

static inline void tu_remove_at_exit(void)
{
	if (tu_dir[0] && strcmp(tu_dir, "/tmp") != 0)
		clp_io_remove_tree(tu_dir);
}

static inline const char *tu_tmpdir(void)
{
	const char *base = getenv("TMPDIR");

	if (tu_dir[0])
		return tu_dir;
	snprintf(tu_dir, sizeof(tu_dir), "%s/clp-test-XXXXXX", base && base[0] ? base : "/tmp");
	if (!mkdtemp(tu_dir)) {
		th_fail(__FILE__, __LINE__, "mkdtemp %s failed", tu_dir);
		snprintf(tu_dir, sizeof(tu_dir), "/tmp");
	}
	atexit(tu_remove_at_exit);
	return tu_dir;
}

/* tu_path("a/b") -> "<tmpdir>/a/b" in one of a few rotating static buffers. */
static inline const char *tu_path(const char *rel)
{
	static char buf[8][1024];
	static int k;
	char *p = buf[k++ % 8];

	snprintf(p, 1024, "%s/%s", tu_tmpdir(), rel);
	return p;
}

static inline void tu_write(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");

	CHECK(f != NULL, "cannot create %s", path);
	if (!f)
		return;
	CHECK(fwrite(data, 1, n, f) == n, "short write to %s", path);
	fclose(f);
}

static inline void tu_write_str(const char *path, const char *text)
{
	tu_write(path, text, strlen(text));
}

static inline void tu_truncate(const char *path, long drop)
{
	FILE *f = fopen(path, "rb");
	long n;

	CHECK(f != NULL, "cannot open %s", path);
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fclose(f);
	CHECK(truncate(path, n - drop) == 0, "truncate %s", path);
}

#endif
