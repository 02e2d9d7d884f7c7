/* GEMM tuning support: candidate parameter sets per backend, verification of a candidate against
 * the reference, and reading/writing tuning entries. The search itself (one child process per
 * candidate, with a time limit) is `clpipe tune gemm` in tools/. */
#ifndef CLP_CL_GEMM_TUNE_H
#define CLP_CL_GEMM_TUNE_H

#include <jansson.h>

#include "cl/gemm.h"

/* Up to max candidates for a backend on a device, the backend's defaults first, then valid
 * parameter sets drawn with the given seed. Returns the number written. */
int clp_gemm_candidates(clp_gemm_backend b, const clp_cl_devinfo *dev, unsigned seed,
			clp_gemm_tuning *out, int max);

/* Run the context's current GEMM on odd shapes, all transpose cases, beta 0 (over NaN) and not,
 * and compare with the double reference. CLP_ERR_NUMERIC names the first wrong case. */
clp_status clp_gemm_verify(clp_cl_ctx *ctx);

/* A tuning as a table entry {"label", "backend", "params", "clblast_xgemm", ...} and back. */
json_t *clp_gemm_tuning_to_json(const clp_gemm_tuning *t, const char *label);
clp_status clp_gemm_tuning_from_json(json_t *entry, const char *where, clp_gemm_tuning *out);

/* Save best (measured at gflops) into the device's user tuning file (clp_gemm_tuning_path, its
 * name into path): it replaces the entry of its backend, entries stay sorted best first, the
 * file is written durably (cl/base/durable.h). */
clp_status clp_gemm_tuning_save(const clp_cl_devinfo *dev, const clp_gemm_tuning *best,
				double gflops, char *path, size_t n);

#endif
