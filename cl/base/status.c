/* Status names and the thread-local last-error buffer. */
#include "cl/base/status.h"

#include <stdio.h>
#include <string.h>

#define CLP_ERRBUF 8192

static _Thread_local char errbuf[CLP_ERRBUF];

static const char *const names[CLP_STATUS_COUNT] = {
	[CLP_OK] = "CLP_OK",
	[CLP_ERR_INVALID] = "CLP_ERR_INVALID",
	[CLP_ERR_IO] = "CLP_ERR_IO",
	[CLP_ERR_FORMAT] = "CLP_ERR_FORMAT",
	[CLP_ERR_NOMEM] = "CLP_ERR_NOMEM",
	[CLP_ERR_OPENCL] = "CLP_ERR_OPENCL",
	[CLP_ERR_BUILD] = "CLP_ERR_BUILD",
	[CLP_ERR_NOT_FOUND] = "CLP_ERR_NOT_FOUND",
	[CLP_ERR_UNSUPPORTED] = "CLP_ERR_UNSUPPORTED",
	[CLP_ERR_MPI] = "CLP_ERR_MPI",
	[CLP_ERR_TIMEOUT] = "CLP_ERR_TIMEOUT",
	[CLP_ERR_NUMERIC] = "CLP_ERR_NUMERIC",
	[CLP_ERR_STATE] = "CLP_ERR_STATE",
	[CLP_ERR_PEER_LOST] = "CLP_ERR_PEER_LOST",
};

const char *clp_status_str(clp_status s)
{
	if ((unsigned)s >= CLP_STATUS_COUNT)
		return "CLP_ERR_UNKNOWN";
	return names[s];
}

clp_status clp_verror(clp_status s, const char *fmt, va_list ap)
{
	vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	return s;
}

clp_status clp_error(clp_status s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	clp_verror(s, fmt, ap);
	va_end(ap);
	return s;
}

clp_status clp_error_context(clp_status s, const char *fmt, ...)
{
	char old[CLP_ERRBUF];
	char ctx[1024];
	va_list ap;

	memcpy(old, errbuf, sizeof(old));
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);
	{
		size_t cl = strlen(ctx);

		if (cl >= sizeof(errbuf))
			cl = sizeof(errbuf) - 1;
		memcpy(errbuf, ctx, cl);
		memcpy(errbuf + cl, old, sizeof(errbuf) - cl - 1);
		errbuf[sizeof(errbuf) - 1] = '\0';
	}
	return s;
}

const char *clp_last_error(void)
{
	return errbuf;
}

void clp_error_clear(void)
{
	errbuf[0] = '\0';
}
