/* Durable writes, directory fsync, whole-file reads and CRC-32 (see durable.h). */
#include "cl/base/durable.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cl/base/infile.h"

/* Slicing-by-8 tables for the reflected polynomial 0xEDB88320: about 2 GB/s, so checksumming a
 * checkpoint costs a fraction of reading it. */
static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		crc_tab[0][i] = c;
	}
	for (int t = 1; t < 8; t++)
		for (int i = 0; i < 256; i++)
			crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
}

uint32_t clp_io_crc32(uint32_t crc, const void *data, size_t n)
{
	const uint8_t *p = data;

	pthread_once(&crc_once, crc_init);
	crc = ~crc;
	while (n >= 8) {
		uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				     (uint32_t)p[3] << 24);

		crc = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^
		      crc_tab[5][(lo >> 16) & 0xff] ^ crc_tab[4][lo >> 24] ^ crc_tab[3][p[4]] ^
		      crc_tab[2][p[5]] ^ crc_tab[1][p[6]] ^ crc_tab[0][p[7]];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

clp_status clp_io_crc32_file(const char *path, uint32_t *crc, uint64_t *size)
{
	enum { CHUNK = 1 << 20 };
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	clp_status s = CLP_OK;
	size_t got;

	*crc = 0;
	*size = 0;
	if (!f)
		return clp_error(CLP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
	buf = malloc(CHUNK);
	if (!buf) {
		s = clp_error(CLP_ERR_NOMEM, "%s: out of memory for checksum", path);
		goto close_f;
	}
	while ((got = fread(buf, 1, CHUNK, f)) > 0) {
		*crc = clp_io_crc32(*crc, buf, got);
		*size += got;
	}
	if (ferror(f))
		s = clp_error(CLP_ERR_IO, "%s: read error: %s", path, strerror(errno));
	free(buf);
close_f:
	fclose(f);
	return s;
}

static char *str_cat(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 1);

	if (s) {
		memcpy(s, a, la);
		memcpy(s + la, b, lb + 1);
	}
	return s;
}

clp_status clp_afile_open(clp_afile *a, const char *path)
{
	return clp_afile_open_flags(a, path, 0);
}

clp_status clp_afile_open_flags(clp_afile *a, const char *path, unsigned flags)
{
	char suffix[32] = ".tmp";

	if (flags & CLP_IO_SHARED)
		snprintf(suffix, sizeof(suffix), ".%ld.tmp", (long)getpid());
	memset(a, 0, sizeof(*a));
	a->path = str_cat(path, "");
	a->tmp = str_cat(path, suffix);
	if (!a->path || !a->tmp) {
		clp_afile_abort(a);
		return clp_error(CLP_ERR_NOMEM, "%s: out of memory", path);
	}
	a->f = fopen(a->tmp, "wb");
	if (!a->f) {
		clp_status s = clp_error(CLP_ERR_IO, "%s: cannot create: %s", a->tmp, strerror(errno));

		clp_afile_abort(a);
		return s;
	}
	return CLP_OK;
}

clp_status clp_afile_write(clp_afile *a, const void *data, size_t n)
{
	if (!a->f)
		return clp_error(CLP_ERR_STATE, "%s: write after close", a->tmp ? a->tmp : "(file)");
	if (n && fwrite(data, 1, n, a->f) != n)
		return clp_error(CLP_ERR_IO, "%s: write failed: %s", a->tmp, strerror(errno));
	a->crc = clp_io_crc32(a->crc, data, n);
	a->size += n;
	return CLP_OK;
}

clp_status clp_afile_commit(clp_afile *a)
{
	clp_status s = CLP_OK;

	if (!a->f)
		return clp_error(CLP_ERR_STATE, "%s: commit of a closed file",
				 a->path ? a->path : "(file)");
	if (ferror(a->f) || fflush(a->f) != 0 || fsync(fileno(a->f)) != 0)
		s = clp_error(CLP_ERR_IO, "%s: flush/fsync failed: %s", a->tmp, strerror(errno));
	if (fclose(a->f) != 0 && s == CLP_OK)
		s = clp_error(CLP_ERR_IO, "%s: close failed: %s", a->tmp, strerror(errno));
	a->f = NULL;
	if (s == CLP_OK && rename(a->tmp, a->path) != 0)
		s = clp_error(CLP_ERR_IO, "%s: rename to %s failed: %s", a->tmp, a->path,
			      strerror(errno));
	if (s != CLP_OK)
		unlink(a->tmp);
	free(a->path);
	free(a->tmp);
	a->path = a->tmp = NULL;
	return s;
}

void clp_afile_abort(clp_afile *a)
{
	if (a->f) {
		fclose(a->f);
		a->f = NULL;
	}
	if (a->tmp)
		unlink(a->tmp);
	free(a->path);
	free(a->tmp);
	a->path = a->tmp = NULL;
}

clp_status clp_io_write_file(const char *path, const void *data, size_t n)
{
	return clp_io_write_file_flags(path, data, n, 0);
}

clp_status clp_io_write_text(const char *path, char *text, const char *what)
{
	clp_status st;

	if (!text)
		return clp_error(CLP_ERR_NOMEM, "%s: cannot %s (out of host memory)", path, what);
	st = clp_io_write_file(path, text, strlen(text));
	free(text);
	return st;
}

clp_status clp_io_write_file_flags(const char *path, const void *data, size_t n, unsigned flags)
{
	clp_afile a;
	clp_status s;

	CLP_TRY(clp_afile_open_flags(&a, path, flags));
	s = clp_afile_write(&a, data, n);
	if (s != CLP_OK) {
		clp_afile_abort(&a);
		return s;
	}
	return clp_afile_commit(&a);
}

clp_status clp_io_write_json(const char *path, const json_t *j, size_t jflags, int newline,
			     unsigned flags)
{
	char *txt = json_dumps(j, jflags);
	size_t n;
	clp_status s;

	if (!txt)
		return clp_error(CLP_ERR_NOMEM, "%s: out of host memory", path);
	n = strlen(txt);
	if (newline) {
		char *t = realloc(txt, n + 2);

		if (!t) {
			free(txt);
			return clp_error(CLP_ERR_NOMEM, "%s: out of host memory", path);
		}
		txt = t;
		txt[n++] = '\n';
		txt[n] = '\0';
	}
	s = clp_io_write_file_flags(path, txt, n, flags);
	free(txt);
	return s;
}

clp_status clp_io_read_file(const char *path, char **data, size_t *n)
{
	struct stat st;

	if (stat(path, &st) != 0 && errno == ENOENT) { /* callers tell a missing file apart */
		*data = NULL;
		*n = 0;
		return clp_error(CLP_ERR_NOT_FOUND, "%s: cannot open: %s", path, strerror(ENOENT));
	}
	return clp_infile_read(NULL, path, 0, data, n);
}

clp_status clp_io_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);

	if (fd < 0)
		return clp_error(CLP_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
	if (fsync(fd) != 0) {
		clp_status s = clp_error(CLP_ERR_IO, "%s: fsync failed: %s", dir, strerror(errno));

		close(fd);
		return s;
	}
	close(fd);
	return CLP_OK;
}

clp_status clp_io_mkdirs(const char *dir)
{
	char buf[4096];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(buf))
		return clp_error(CLP_ERR_INVALID, "directory name '%s' is empty or too long", dir);
	memcpy(buf, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0777) != 0 && errno != EEXIST)
			return clp_error(CLP_ERR_IO, "%s: cannot create directory: %s", buf,
					 strerror(errno));
		buf[i] = i < n ? '/' : '\0';
	}
	return CLP_OK;
}

clp_status clp_io_remove_tree(const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	clp_status s = CLP_OK;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? CLP_OK
				       : clp_error(CLP_ERR_IO, "%s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode)) {
		if (unlink(path) != 0)
			return clp_error(CLP_ERR_IO, "%s: cannot delete: %s", path, strerror(errno));
		return CLP_OK;
	}
	d = opendir(path);
	if (!d)
		return clp_error(CLP_ERR_IO, "%s: cannot list: %s", path, strerror(errno));
	while (s == CLP_OK && (e = readdir(d))) {
		char *child;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		child = malloc(strlen(path) + strlen(e->d_name) + 2);
		if (!child) {
			s = clp_error(CLP_ERR_NOMEM, "%s: out of memory", path);
			break;
		}
		sprintf(child, "%s/%s", path, e->d_name);
		s = clp_io_remove_tree(child);
		free(child);
	}
	closedir(d);
	if (s == CLP_OK && rmdir(path) != 0)
		s = clp_error(CLP_ERR_IO, "%s: cannot delete directory: %s", path, strerror(errno));
	return s;
}
