/* Durable files: write to a temporary name, fsync, rename; fsync the directory; CRC-32.
 *
 * Every file clpipe writes for a later run (checkpoints, shards, manifests, schedules, the
 * kernel cache, inventories and profiles, tuning tables) goes through clp_afile, so a crash
 * leaves either the old file or the complete new one, never a torn one: the data goes to
 * "<path>.tmp", is fsynced, then renamed over <path>. The rename itself is made
 * durable by clp_io_fsync_dir() on the containing directory (callers that write several files
 * into one directory fsync it once at the end).
 *
 * The checksum is CRC-32 (IEEE 802.3, the one of zlib, gzip, PNG and Python's zlib.crc32), so a
 * checkpoint file can be checked with standard tools. */
#ifndef CLP_BASE_DURABLE_H
#define CLP_BASE_DURABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "cl/base/status.h"

/* CRC-32 of n bytes continuing from crc (start with 0). */
uint32_t clp_io_crc32(uint32_t crc, const void *data, size_t n);
/* CRC-32 and size of a whole file. */
clp_status clp_io_crc32_file(const char *path, uint32_t *crc, uint64_t *size);

/* A file being written durably. Fields are read-only for callers. */
typedef struct clp_afile {
	FILE *f;    /* may be written with stdio directly (size and crc then count only
		     * clp_afile_write); commit checks the stream's error flag */
	char *path; /* final name */
	char *tmp;  /* path + ".tmp" */
	uint64_t size;
	uint32_t crc;
} clp_afile;

/* Flags of the writers. CLP_IO_SHARED: other processes may write the same path at once (the
 * kernel cache, device inventories): the temporary name carries the process id
 * ("<path>.<pid>.tmp"), so each writes its own and the last rename wins. */
enum { CLP_IO_SHARED = 1 };

/* Open "<path>.tmp" for writing (truncating a leftover). */
clp_status clp_afile_open(clp_afile *a, const char *path);
clp_status clp_afile_open_flags(clp_afile *a, const char *path, unsigned flags);
/* Append n bytes; keeps size and CRC up to date. */
clp_status clp_afile_write(clp_afile *a, const void *data, size_t n);
/* Flush, fsync, close and rename to the final name. Frees the names; a is closed either way. */
clp_status clp_afile_commit(clp_afile *a);
/* Close and delete the temporary file (after an error). Safe on a closed or zeroed clp_afile. */
void clp_afile_abort(clp_afile *a);

/* Write a whole file durably (temporary name, fsync, rename; not the directory). */
clp_status clp_io_write_file(const char *path, const void *data, size_t n);
clp_status clp_io_write_file_flags(const char *path, const void *data, size_t n, unsigned flags);
/* A formatted document (a malloc()ed string, or NULL when formatting ran out of memory) written
 * as clp_io_write_file does, then freed; what ("draw the loss curve") names the formatting in the
 * out-of-memory message. */
clp_status clp_io_write_text(const char *path, char *text, const char *what);
/* j as jansson writes it with jflags (and a newline after it when newline), durably. */
clp_status clp_io_write_json(const char *path, const json_t *j, size_t jflags, int newline,
			     unsigned flags);
/* Read a whole file into a NUL-terminated malloc()ed buffer; *n excludes the NUL. An empty file
 * is not an error here (callers decide). */
clp_status clp_io_read_file(const char *path, char **data, size_t *n);
/* fsync a directory so that renames and creations inside it survive a crash. */
clp_status clp_io_fsync_dir(const char *dir);
/* mkdir -p. */
clp_status clp_io_mkdirs(const char *dir);
/* Remove a directory tree (files and subdirectories); a missing path is not an error. */
clp_status clp_io_remove_tree(const char *path);

#endif
