/* clpipe check: every op the engine runs, on this device, against the C references of cl/ref,
 * on random inputs of sizes that are no multiple of any tile, with finite-difference checks of
 * the backward passes (what `clpipe check` prints; docs/OPENCL.md).
 *
 * Everything is described once, in ONE table of op entries (cl/check/check_table.c): name,
 * the names of its sizes, its variants (GEMM backends, GELU kinds, attention masks ...), the
 * geometries (CPU / GPU kernel shape) and storage types it runs in, its shapes (each marked
 * whether it belongs to the quick set and whether its backward is checked against finite
 * differences), the tolerance of every quantity per storage type with the reason, the flops and
 * bytes of one call, and the function that makes the inputs, computes the reference, calls the
 * device and compares. The runner expands the table into cases (op x variant x geometry x
 * storage x shape); a case checks several quantities (forward output, statistics, gradients,
 * finite differences) and reports one line per quantity.
 *
 * The tolerances are those of the kernel tests (tests/nn, tests/cl/test_gemm.c, tests/kfac),
 * whose comments derive them; check_table.c says each one's reason in a sentence. */
#ifndef CLP_CL_CHECK_CHECK_H
#define CLP_CL_CHECK_CHECK_H

#include <stddef.h>

#include "cl/base/half.h"
#include "cl/nn.h"
#include "cl/runtime.h"

/* One checked quantity of one case. */
typedef struct clp_check_line {
	const char *op;       /* "layernorm" */
	const char *variant;  /* "packed", "tanh", "causal" ... ("-": none) */
	const char *geom;     /* "cpu", "gpu" (kernel shape forced) or "-" (one shape) */
	char dtype[24];       /* storage: "bf16", or a GEMM's "bf16*fp32->bf16" */
	char sizes[64];       /* "N=7 C=33" */
	char what[32];        /* the quantity: "out", "dinp", "fd dinp", "error" */
	double err, tol;      /* worst element's |got - ref| and its tolerance; for finite
			       * differences the RMS difference and its limit */
	int ok;
	int skipped;          /* the device cannot run this case (CLP_ERR_UNSUPPORTED): ok, not
			       * checked */
	double flops, bytes;  /* of one device call of the case (0: not counted) */
	char message[160];    /* on failure: where (element, got, want) or the library's error */
} clp_check_line;

typedef struct clp_check_opts {
	int quick;            /* the quick set: a few shapes per op, seconds */
	const char *only;     /* comma-separated op names to run (NULL: all) */
	const char *inject;   /* testing the check itself: perturb the device output of this op
			       * (CLPIPE_CHECK_INJECT): every quantity of its cases must fail */
	void (*emit)(const clp_check_line *l, void *ud); /* called once per line */
	void *ud;
} clp_check_opts;

typedef struct clp_check_summary {
	int cases, lines, failed_lines, failed_cases, skipped_cases;
	char failed_ops[256]; /* "attention, gemm" */
} clp_check_summary;

/* CLP_OK when every name of a comma-separated list is an op of the table; CLP_ERR_NOT_FOUND
 * naming the first that is not. */
clp_status clp_check_ops_valid(const char *list);

/* Run the table on ctx. Returns CLP_OK when the run itself worked (a failed comparison is a
 * line with ok = 0, counted in sum, not an error); an error for host memory or an unknown op
 * in opts->only. Leaves the kernel shape AUTO and the GEMM tuning as it found them. */
clp_status clp_check_run(clp_cl_ctx *ctx, const clp_check_opts *opts, clp_check_summary *sum);

/* The op names of the table, in order (for --help and `clpipe bench nn`). */
int clp_check_nops(void);
const char *clp_check_op_name(int i);
const char *clp_check_op_why(int i); /* the reason for its tolerances */

#endif
