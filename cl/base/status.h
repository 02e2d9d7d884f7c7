/* Status codes and the last-error message shared by every clpipe library.
 *
 * Library functions return a clp_status; on failure they also leave a message in a thread-local
 * buffer that names the file, field, device or rank at fault (clp_last_error()). The command line
 * prints that message and exits non-zero; libraries never exit or abort. */
#ifndef CLP_BASE_STATUS_H
#define CLP_BASE_STATUS_H

#include <stdarg.h>

typedef enum clp_status {
	CLP_OK = 0,
	CLP_ERR_INVALID,     /* bad argument or configuration value */
	CLP_ERR_IO,          /* a file could not be read or written */
	CLP_ERR_FORMAT,      /* a file exists but its contents are malformed or truncated */
	CLP_ERR_NOMEM,       /* host or device memory exhausted, or over a device limit */
	CLP_ERR_OPENCL,      /* an OpenCL call failed; the message carries the CL error name */
	CLP_ERR_BUILD,       /* a kernel failed to compile; the message carries the build log */
	CLP_ERR_NOT_FOUND,   /* a named thing (device, tensor, kernel, key) does not exist */
	CLP_ERR_UNSUPPORTED, /* the device or build cannot do this */
	CLP_ERR_MPI,         /* an MPI call failed */
	CLP_ERR_TIMEOUT,     /* a deadline expired */
	CLP_ERR_NUMERIC,     /* a non-finite value or failed factorisation */
	CLP_ERR_STATE,       /* call made in the wrong lifecycle state */
	CLP_ERR_PEER_LOST,   /* a peer rank failed (ULFM): the survivors may go on without it */
	CLP_STATUS_COUNT
} clp_status;

/* Short name of a status, e.g. "CLP_ERR_IO". Never NULL. */
const char *clp_status_str(clp_status s);

/* Record a formatted message as the last error of this thread and return s. */
clp_status clp_error(clp_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
clp_status clp_verror(clp_status s, const char *fmt, va_list ap);

/* Prepend context to the current message ("reading ckpt/x: " + old message) and return s. */
clp_status clp_error_context(clp_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The last message recorded on this thread ("" if none). Owned by the library. */
const char *clp_last_error(void);
void clp_error_clear(void);

/* Propagate a failing status: CLP_TRY(expr) returns from the enclosing function. */
#define CLP_TRY(expr)                                                                              \
	do {                                                                                       \
		clp_status clp_try_s_ = (expr);                                                    \
		if (clp_try_s_ != CLP_OK)                                                          \
			return clp_try_s_;                                                         \
	} while (0)

#endif
