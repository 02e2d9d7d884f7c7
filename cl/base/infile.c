/* Untrusted input files: regular files only, opened without blocking, size capped (infile.h). */
#include "cl/base/infile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	return "not a plain file";
}

clp_status clp_infile_open(const char *what, const char *path, uint64_t max, FILE **f,
			   uint64_t *size)
{
	const char *sp = what ? " " : "";
	struct stat st;
	int fd, fl;

	*f = NULL;
	if (size)
		*size = 0;
	if (!what)
		what = "";
	/* O_NONBLOCK: opening a FIFO with no writer would otherwise wait for one */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return clp_error(CLP_ERR_IO, "%s%s%s: cannot open: %s", what, sp, path,
				 strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		const char *k = kind_of(st.st_mode);

		close(fd);
		return clp_error(CLP_ERR_IO, "%s%s%s: not a regular file (%s)", what, sp, path, k);
	}
	if (max && (uint64_t)st.st_size > max) {
		close(fd);
		return clp_error(CLP_ERR_FORMAT, "%s%s%s: %lld bytes, over the %llu MiB this reader "
				 "accepts", what, sp, path, (long long)st.st_size,
				 (unsigned long long)(max >> 20));
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 || !(*f = fdopen(fd, "rb"))) {
		int e = errno;

		close(fd);
		return clp_error(CLP_ERR_IO, "%s%s%s: cannot open: %s", what, sp, path, strerror(e));
	}
	if (size)
		*size = (uint64_t)st.st_size;
	return CLP_OK;
}

clp_status clp_infile_read(const char *what, const char *path, uint64_t max, char **data,
			   size_t *n)
{
	const char *sp = what ? " " : "";
	uint64_t size;
	char *buf;
	FILE *f;

	*data = NULL;
	*n = 0;
	CLP_TRY(clp_infile_open(what, path, max, &f, &size));
	if (!what)
		what = "";
	if (size >= SIZE_MAX || !(buf = malloc((size_t)size + 1))) {
		fclose(f);
		return clp_error(CLP_ERR_NOMEM, "%s%s%s: out of memory for %llu bytes", what, sp,
				 path, (unsigned long long)size);
	}
	if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
		free(buf);
		fclose(f);
		return clp_error(CLP_ERR_IO, "%s%s%s: short read (the file changed?)", what, sp,
				 path);
	}
	fclose(f);
	buf[size] = '\0';
	*data = buf;
	*n = (size_t)size;
	return CLP_OK;
}
