/* Warm the kernel caches: build and run every kernel of the OpenCL layer once. */
#ifndef CLP_CL_WARMUP_H
#define CLP_CL_WARMUP_H

#include <stdio.h>

#include "cl/runtime.h"

/* Progress lines go to log when not NULL. */
clp_status clp_cl_warmup(clp_cl_ctx *ctx, FILE *log);

#endif
