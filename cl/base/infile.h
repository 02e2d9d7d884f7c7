/* Opening files that come from users (configs, JSON descriptions, topologies) as untrusted input.
 *
 * A reader must not block for ever on a FIFO, read a device that never ends (/dev/zero), take a
 * directory for an empty file, or allocate whatever size a file claims: clp_infile_open opens
 * without blocking, refuses anything that is not a regular file before reading a byte, and
 * refuses a file over the caller's cap. Shared by topology/ and engine/ (hence here, beside
 * status.h, the one thing every library already uses). */
#ifndef CLP_BASE_INFILE_H
#define CLP_BASE_INFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cl/base/status.h"

/* Caps on what readers load whole into memory. */
#define CLP_INFILE_TEXT_MAX ((uint64_t)64 << 20) /* configs, CSV tables */
#define CLP_INFILE_JSON_MAX ((uint64_t)1 << 30)  /* JSON descriptions (schedules can be large) */

/* Open path for reading. what ("config", "topology"; NULL for none) prefixes the messages, which
 * name the path. Refuses a missing or unreadable file (CLP_ERR_IO), a
 * directory, FIFO, socket or device (CLP_ERR_IO: "not a regular file (a FIFO)") and a file over
 * max bytes (CLP_ERR_FORMAT; 0: no cap). On success *f is open at the start and *size is the
 * file's size (size may be NULL). */
clp_status clp_infile_open(const char *what, const char *path, uint64_t max, FILE **f,
			   uint64_t *size);

/* Read a whole file opened as above into a NUL-terminated malloc()ed buffer; *n excludes the NUL.
 * An empty file is not an error here (callers decide). */
clp_status clp_infile_read(const char *what, const char *path, uint64_t max, char **data,
			   size_t *n);

#endif
