/* THE table of clpipe check (cl/check/check.h): every op the engine runs, described once, and
 * the runner that expands it into cases. Tolerances are those of the kernel tests named in each
 * entry's reason; sizes are chosen to be no multiple of any tile or vector width (1, 7, 33,
 * 127 ...), with a few larger ones where a kernel changes path (several key blocks, K chunks,
 * blocked factorisations). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/check/check_internal.h"

#define Q CK_QUICK
#define FD CK_FD
#define F32 CK_F32ONLY
#define S16 CK_S16ONLY
#define ALLV -1
#define NS(a) ((int)(sizeof(a) / sizeof(a[0])))
#define BF16_ULP 0x1p-7 /* one unit in the last place relative to the value, at most */
#define F16_ULP 0x1p-10

/* a shape: sizes, flags, the variant it runs (ALLV: every one) */
typedef struct ck_row {
	ck_shape s;
	int variant;
} ck_row;

/* ---- flops and bytes of one call (forward and backward together where the case runs both;
 * elementwise ops: an estimate per element as docs/DEVICE_PROFILE.md) ------------------------ */

static double fl_gemm(const size_t *d, int v)
{
	(void)v;
	return 2.0 * (double)d[0] * (double)d[1] * (double)d[2];
}

/* A, B, C each in its storage (d[5]: bits 1, 2, 4 for a 16-bit A, B, C), C read when beta */
static double by_gemm(const size_t *d, int v, clp_dtype dt)
{
	const double s16 = (double)clp_dtype_size(dt), bits = (double)d[5];
	const unsigned b = (unsigned)bits;

	(void)v;
	return (b & 1 ? s16 : 4.0) * d[0] * d[2] + (b & 2 ? s16 : 4.0) * d[2] * d[1] +
	       (b & 4 ? s16 : 4.0) * d[0] * d[1] * (b & 8 ? 2.0 : 1.0);
}

static double fl_rows(const size_t *d, int v)
{
	(void)v;
	return 16.0 * (double)d[0] * (double)d[1];
}

static double by_rows(const size_t *d, int v, clp_dtype dt)
{
	(void)v;
	return (double)d[0] * d[1] * (2.0 * clp_dtype_size(dt) + 12.0);
}

static double fl_elem(const size_t *d, int v)
{
	(void)v;
	return 20.0 * (double)d[0] * (d[1] ? (double)d[1] : 1.0);
}

static double by_elem(const size_t *d, int v, clp_dtype dt)
{
	(void)v;
	return (double)d[0] * (d[1] ? (double)d[1] : 1.0) * (2.0 * clp_dtype_size(dt) + 8.0);
}

/* embeddings (B,T,C,V): an add per element forward and backward; the (B,T,C) activations and
 * gradient, the rows read */
static double fl_embed(const size_t *d, int v)
{
	(void)v;
	return 2.0 * (double)d[0] * d[1] * d[2];
}

static double by_embed(const size_t *d, int v, clp_dtype dt)
{
	(void)v;
	return (double)d[0] * d[1] * d[2] * (3.0 * clp_dtype_size(dt) + 12.0);
}

/* RoPE (B,T,heads,hd) in place, forward and backward: 3 flops per element each */
static double fl_rope(const size_t *d, int v)
{
	(void)v;
	return 6.0 * (double)d[0] * d[1] * d[2] * d[3];
}

static double by_rope(const size_t *d, int v, clp_dtype dt)
{
	(void)v;
	return (double)d[0] * d[1] * d[2] * d[3] * (2.0 * clp_dtype_size(dt) + 8.0);
}

static double fl_attn(const size_t *d, int v)
{
	double pairs = (double)d[0] * d[2] * d[1] * (v == 0 ? (d[1] + 1) / 2.0 : (double)d[1]);

	return 4.0 * pairs * (double)d[4] * 3.5; /* forward 2 products, backward 5 */
}

static double by_attn(const size_t *d, int v, clp_dtype dt)
{
	(void)v;
	return (double)d[0] * d[1] * ((d[2] + 2.0 * d[3]) * d[4] * (clp_dtype_size(dt) + 8.0) +
				      d[2] * d[4] * (clp_dtype_size(dt) + 4.0));
}

static double fl_xent(const size_t *d, int v)
{
	(void)v;
	return 6.0 * (double)d[0] * d[1] * d[2];
}

static double by_xent(const size_t *d, int v, clp_dtype dt)
{
	(void)v;
	return (double)clp_dtype_size(dt) * ((double)d[0] * d[1] + (double)d[2] * d[1]) +
	       4.0 * ((double)d[0] * d[1] + (double)d[2] * d[1]);
}

static double fl_square(const size_t *d, int v)
{
	(void)v;
	return (double)d[0] * d[0] * (double)(d[1] ? d[1] : d[0]);
}

static double by_square(const size_t *d, int v, clp_dtype dt)
{
	(void)v;
	return 4.0 * (double)d[0] * d[0] + (double)clp_dtype_size(dt) * d[0] * (d[1] ? d[1] : 1);
}

/* ---- shapes ------------------------------------------------------------------------------- */

/* m, n, k, ta, tb, bits (1 A, 2 B, 4 C in the 16-bit type; 8 alpha -1.5 and beta 0.5;
 * 16 + bias, C dense; 32 with 16: and GELU, tanh (erf with 8)) */
static const ck_row gemm_rows[] = {
	{{{1, 1, 1, 0, 0, 0}, Q | F32}, ALLV},
	{{{7, 33, 127, 0, 1, 8}, Q | F32}, ALLV},
	{{{33, 7, 1, 1, 0, 0}, F32}, ALLV},
	{{{127, 1, 33, 1, 1, 8}, F32}, ALLV},
	{{{1, 127, 7, 0, 0, 8}, F32}, ALLV},
	{{{100, 65, 129, 0, 1, 0}, F32}, ALLV},
	{{{33, 48, 1000, 0, 1, 0}, F32}, ALLV},       /* k over the packed kernel's K chunk */
	{{{7, 33, 127, 0, 1, 7 | 8}, Q | S16}, ALLV}, /* forward S*S->S */
	{{{33, 7, 127, 0, 0, 2}, S16}, ALLV},         /* dX fp32*S->fp32 */
	{{{127, 33, 7, 1, 0, 1}, S16}, ALLV},         /* dW S*fp32->fp32 */
	{{{33, 33, 100, 1, 0, 3}, S16}, ALLV},        /* K-FAC factor S*S->fp32 */
	{{{7, 5, 33, 0, 0, 4 | 8}, S16}, ALLV},
	{{{7, 5, 33, 0, 1, 5}, S16}, ALLV},
	{{{5, 7, 33, 1, 0, 6 | 8}, S16}, ALLV},
	{{{33, 48, 1000, 1, 0, 7 | 8}, S16}, ALLV},
	/* + bias (16): the packed kernel's store adds it after the last K block and chunk */
	{{{7, 33, 127, 0, 1, 16}, Q | F32}, ALLV},
	{{{127, 1, 33, 1, 1, 16 | 8}, F32}, ALLV},
	{{{33, 48, 1000, 1, 0, 16}, F32}, ALLV},
	{{{7, 33, 127, 0, 1, 7 | 16}, S16}, ALLV},
	/* + bias and GELU (16 | 32): the MLP up projection's store (n a multiple of 8) */
	{{{33, 200, 127, 0, 0, 16 | 32}, Q | F32}, ALLV},
	{{{7, 48, 1000, 0, 1, 16 | 32 | 8}, F32}, ALLV},
	{{{7, 33, 33, 0, 0, 16 | 32}, F32}, ALLV},
	{{{33, 96, 127, 0, 0, 7 | 16 | 32}, S16}, ALLV},
};
static const char *const gemm_variants[] = {"packed", "tiled", "clblast", "direct"};

/* N, C */
static const ck_row norm_rows[] = {
	{{{1, 1}, 0}, ALLV},   {{{7, 33}, Q | FD}, ALLV}, {{{33, 7}, FD}, ALLV},
	{{{127, 45}, 0}, ALLV}, {{{3, 768}, 0}, ALLV},
	{{{32001, 65}, F32}, ALLV}, /* 1001 row blocks in the dw/db column sums */
};
/* n */
static const ck_row gelu_rows[] = {
	{{{1}, 0}, ALLV}, {{{7}, Q | FD}, ALLV}, {{{33}, FD}, ALLV}, {{{127}, 0}, ALLV},
	{{{20000}, 0}, ALLV},
};
static const char *const gelu_variants[] = {"tanh", "erf"};
/* N, F */
static const ck_row swiglu_rows[] = {
	{{{1, 1}, 0}, ALLV}, {{{7, 33}, Q | FD}, ALLV}, {{{33, 100}, 0}, ALLV},
};
/* N, F: one row, rows of 7 (an 8-vector across rows), odd, several EW chunks of a CPU device */
static const ck_row bias_gelu_rows[] = {
	{{{1, 1}, 0}, ALLV}, {{{7, 33}, Q}, ALLV}, {{{33, 7}, 0}, ALLV}, {{{127, 127}, 0}, ALLV},
	{{{20, 1001}, 0}, ALLV},
};
static const ck_row bias_rows[] = {
	{{{1, 1}, 0}, ALLV}, {{{7, 33}, Q}, ALLV}, {{{127, 45}, 0}, ALLV},
	{{{32001, 65}, F32}, ALLV}, /* 1001 row blocks in the column sum (llvmpipe, issue 30) */
	{{{70000, 33}, F32}, ALLV}, /* over llvmpipe's 65535 loop iterations a work-item */
};
/* B, T, C, V */
static const ck_row embed_rows[] = {
	{{{1, 1, 1, 2}, 0}, 0},       {{{2, 7, 33, 11}, Q | FD}, 0}, {{{3, 5, 70, 9}, 0}, 1},
	{{{2, 7, 33, 11}, FD}, 1},    {{{4, 33, 64, 1000}, 0}, 0},
};
static const char *const embed_variants[] = {"tokens+positions", "tokens"};
/* B, T, heads, hd */
static const ck_row rope_rows[] = {
	{{{1, 1, 1, 2}, 0}, ALLV}, {{{2, 7, 3, 8}, Q | FD}, ALLV}, {{{1, 33, 2, 12}, 0}, ALLV},
	{{{2, 5, 4, 64}, 0}, ALLV},
};
/* B, T, H, KVH, hd, bits (1 GPT-2's fused QKV rows, 2 key padding) */
static const ck_row attn_rows[] = {
	{{{1, 1, 1, 1, 8, 0}, 0}, 0},
	{{{2, 7, 2, 2, 5, 0}, Q | FD}, 0},   /* causal, odd hd */
	{{{2, 7, 4, 2, 8, 3}, Q | FD}, 1},   /* bidirectional, GQA, fused rows, padding */
	{{{1, 33, 4, 2, 12, 0}, 0}, 0},      /* GQA, hd not a multiple of 8 */
	{{{2, 33, 3, 1, 16, 3}, 0}, 1},      /* multi-query, fused, padding */
	{{{1, 127, 2, 1, 16, 0}, 0}, 0},     /* several key blocks and tiles */
	{{{2, 127, 2, 2, 13, 2}, 0}, 1},     /* bidirectional, padding, hd 13 */
	{{{2, 17, 2, 2, 8, 1}, F32}, 0},     /* GPT-2 fused QKV rows */
	{{{1, 100, 2, 1, 64, 0}, F32}, 0},   /* hd 64 */
	{{{1, 1, 1, 1, 1, 0}, F32}, 0},      /* hd 1 */
	{{{2, 20, 3, 1, 16, 3}, F32 | FD}, 1}, /* BERT-like: multi-query, fused rows, padding */
	{{{2, 9, 2, 1, 5, 0}, F32 | FD}, 1}, /* bidirectional, odd hd */
	/* llvmpipe ends a work-item's loops after 65535 iterations: hd 64 keys x hd from T = 512 */
	{{{1, 512, 1, 1, 64, 0}, F32}, 0},
	{{{1, 1024, 1, 1, 64, 0}, F32}, 1},
	/* and the CPU shape's key blocks times its head-dim loops from T = 2048 at hd 128 (the
	 * GPU shape there only on GPU-shaped devices: CK_GPUGEOM_ON_GPU) */
	{{{1, 2048, 1, 1, 128, 0}, F32 | CK_GPUGEOM_ON_GPU}, 0},
};
static const char *const attn_variants[] = {"causal", "bidirectional"};
/* N, C, V, vchunk (0: chosen) */
static const ck_row xent_rows[] = {
	{{{1, 1, 1, 0}, 0}, 0},        {{{5, 4, 11, 4}, Q | FD}, ALLV}, {{{7, 33, 1000, 64}, 0}, 1},
	{{{33, 17, 127, 0}, 0}, 0},    {{{4, 8, 300, 1000}, 0}, 1},
	/* a chunk of all 300000 columns: llvmpipe's 65535 loop iterations a work-item */
	{{{3, 8, 300000, 0}, F32}, 0},
};
static const char *const xent_variants[] = {"plain", "bias"};
static const ck_row adamw_rows[] = {
	{{{1}, 0}, ALLV}, {{{7}, Q}, ALLV}, {{{1000}, 0}, ALLV}, {{{20001}, 0}, ALLV},
};
static const char *const adamw_variants[] = {"decay", "no-decay"};
/* d, rows */
static const ck_row factor_rows[] = {
	{{{1, 33}, 0}, ALLV}, {{{7, 100}, Q}, ALLV}, {{{33, 127}, 0}, ALLV}, {{{100, 1}, 0}, ALLV},
	{{{127, 7}, 0}, ALLV},
};
/* n */
static const ck_row inverse_rows[] = {
	{{{1}, 0}, ALLV}, {{{7}, Q}, ALLV}, {{{33}, 0}, ALLV}, {{{65}, 0}, ALLV}, {{{130}, 0}, ALLV},
};
/* O, I */
static const ck_row precond_rows[] = {
	{{{1, 7}, 0}, ALLV}, {{{7, 33}, Q}, ALLV}, {{{33, 7}, 0}, ALLV}, {{{100, 127}, 0}, ALLV},
};
static const char *const precond_variants[] = {"out,in", "in,out"};
static const ck_row blas1_rows[] = {
	{{{1}, 0}, ALLV}, {{{7}, Q}, ALLV}, {{{33}, 0}, ALLV}, {{{127}, 0}, ALLV},
	{{{65537}, 0}, ALLV},
};
static const char *const blas1_variants[] = {"fill", "add", "mul", "axpy+scale", "copy"};
static const ck_row reduce_rows[] = {
	{{{1}, 0}, ALLV}, {{{7}, Q}, ALLV}, {{{127}, 0}, ALLV}, {{{65537}, 0}, ALLV},
	{{{1000000}, 0}, ALLV},
};
static const char *const reduce_variants[] = {"sum", "sumsq", "nrm2"};
static const ck_row residual_rows[] = {
	{{{1}, 0}, ALLV}, {{{7}, Q}, ALLV}, {{{33}, 0}, ALLV}, {{{127}, 0}, ALLV},
	{{{20000}, 0}, ALLV},
};
static const ck_row dropout_rows[] = {
	{{{1}, 0}, ALLV}, {{{7}, Q}, ALLV}, {{{127}, 0}, ALLV}, {{{20000}, 0}, ALLV},
};
static const char *const dropout_variants[] = {"p=0.5", "p=0.1"};
static const ck_row rng_rows[] = {
	{{{1}, 0}, ALLV}, {{{7}, Q}, ALLV}, {{{1000}, 0}, ALLV}, {{{20001}, 0}, ALLV},
};
static const char *const rng_variants[] = {"normal", "uniform", "u32"};
static const ck_row convert_rows[] = {
	{{{1}, 0}, ALLV}, {{{33}, Q}, ALLV}, {{{1000}, 0}, ALLV},
};
static const ck_row gstats_rows[] = {
	{{{1}, 0}, ALLV}, {{{7}, Q}, ALLV}, {{{40000}, 0}, ALLV},
};
static const char *const gstats_variants[] = {"clip", "no-clip", "nan"};
/* dA, dB (two blocks), dB (third block) */
static const ck_row damping_rows[] = {
	{{{1, 1, 1}, 0}, ALLV}, {{{33, 7, 20}, Q}, ALLV},
};
static const char *const damping_variants[] = {"lambda=0.03", "lambda=1e-20"};
static const ck_row sgd_rows[] = {
	{{{1}, 0}, ALLV}, {{{7}, Q}, ALLV}, {{{8193}, 0}, ALLV}, {{{20001}, 0}, ALLV},
};

/* ---- the table ---------------------------------------------------------------------------- */

typedef struct ck_entry {
	ck_op op;
	const ck_row *rows;
	int nrows;
} ck_entry;

#define T0 {0, 0, 0}
#define ROWS(r) r, NS(r)
#define VARS(v) v, NS(v)
/* the fp32 kernel tests' bound, then for a 16-bit output one unit in the last place more:
 * float error first, then both sides round to nearest (tests/nn/nn_st.h ts_check) */
#define OUT16(a, r) {{a, r, 0}, {a, r, 1}, {a, r, 1}}
/* tests/nn/nn_st.h ts_fd_check: the fp32 gradient's error (~1e-6 relative), its accumulation
 * onto a start value, the O(h^2) error of the differences of a double forward */
#define FDTS {{1e-4, 2e-6}, {1e-4, 2e-6}, {1e-4, 2e-6}}

static const ck_entry table[] = {
	{{"gemm", "m,n,k", VARS(gemm_variants), 0, CK_DT_ALL, {T0, T0, T0}, T0, T0,
	  {{0, 0}, {0, 0}, {0, 0}},
	  "elementwise (4 sqrt(k) + 8) fp32 units of |alpha| sum |a||b| + |beta c| (fp32 "
	  "accumulation); 16-bit A, B are read exactly and their products are exact in fp32; a "
	  "16-bit C adds its one rounding, u (|ref| + bound) (tests/cl/test_gemm.c)",
	  ck_run_gemm, fl_gemm, by_gemm}, ROWS(gemm_rows)},
	{{"blas1", "n", VARS(blas1_variants), 0, CK_DT_F32, {T0, T0, T0}, {1e-6, 1e-6, 0}, T0,
	  {{0, 0}, {0, 0}, {0, 0}}, "fill, copy, add, mul bitwise (one correctly rounded "
	  "float operation); axpy then scale 1e-6 + 1e-6|x| (tests/cl/test_ops.c)", ck_run_blas1, fl_elem,
	  by_elem}, ROWS(blas1_rows)},
	{{"reduce", "n", VARS(reduce_variants), 0, CK_DT_F32, {{0, 1e-6, 0}, T0, T0}, T0, T0,
	  {{0, 0}, {0, 0}, {0, 0}}, "relative 1e-6 on positive values of mixed magnitude: "
	  "compensated sums (tests/cl/test_ops.c)", ck_run_reduce, fl_elem, by_elem},
	 ROWS(reduce_rows)},
	{{"convert", "n", NULL, 0, 0, CK_DT_16, {T0, T0, T0}, T0, T0, {{0, 0}, {0, 0}, {0, 0}},
	  "bitwise: fp32 -> 16-bit rounds to nearest even as cl/half.h does, 16-bit -> fp32 is "
	  "exact (tests/cl/test_convert.c)", ck_run_convert, fl_elem, by_elem},
	 ROWS(convert_rows)},
	{{"rng", "n", VARS(rng_variants), 0, CK_DT_F32, {T0, T0, T0}, T0, T0,
	  {{0, 0}, {0, 0}, {0, 0}}, "bitwise: the device draws cl/rng.h's numbers "
	  "(tests/nn/test_nn_rng.c)", ck_run_rng, fl_elem, by_elem}, ROWS(rng_rows)},
	{{"layernorm", "N,C", NULL, 0, 0, CK_DT_ALL, OUT16(1e-5, 1e-5), {1e-6, 1e-5, 0},
	  {1e-4, 1e-4, 0}, FDTS,
	  "out 1e-5 + 1e-5|x| (+1 ulp of the 16-bit type), mean/rstd 1e-6 + 1e-5|x|, gradients "
	  "1e-4 + 1e-4|x|: fp32 row sums of C terms (tests/nn/test_nn_norm*.c)",
	  ck_run_norm, fl_rows, by_rows}, ROWS(norm_rows)},
	{{"rmsnorm", "N,C", NULL, 0, 0, CK_DT_ALL, OUT16(1e-5, 1e-5), {1e-6, 1e-5, 0},
	  {1e-4, 1e-4, 0}, FDTS, "as layernorm (tests/nn/test_nn_norm*.c)",
	  ck_run_norm, fl_rows, by_rows}, ROWS(norm_rows)},
	{{"gelu", "n", VARS(gelu_variants), 0, CK_DT_ALL, OUT16(1e-6, 1e-5),
	  T0, {1e-6, 1e-5, 0}, FDTS,
	  "out and dinp 1e-6 + 1e-5|x|: a few fp32 operations per element, tanh/erf to a few ulps "
	  "(tests/nn/test_nn_act*.c)", ck_run_gelu, fl_elem, by_elem}, ROWS(gelu_rows)},
	{{"bias_gelu", "N,F", VARS(gelu_variants), 0, CK_DT_ALL, OUT16(1e-6, 1e-5), T0,
	  {1e-6, 1e-5, 0}, FDTS,
	  "fused bias + GELU (issue 30): fc one rounded addition, act and the overwriting dfc as "
	  "gelu (tests/nn/test_nn_fused.c)", ck_run_bias_gelu, fl_elem, by_elem},
	 ROWS(bias_gelu_rows)},
	{{"residual_layernorm", "N,C", NULL, 0, 0, CK_DT_ALL, OUT16(1e-5, 1e-5), {1e-6, 1e-5, 0},
	  T0, FDTS, "fused residual add + LayerNorm (issue 30): xs one rounded addition, out, "
	  "mean, rstd as layernorm (tests/nn/test_nn_fused.c)", ck_run_residual_layernorm,
	  fl_rows, by_rows}, ROWS(norm_rows)},
	{{"swiglu", "N,F", NULL, 0, 0, CK_DT_ALL, OUT16(1e-6, 1e-5), T0,
	  {1e-5, 1e-5, 0}, FDTS, "out 1e-6 + 1e-5|x|, gradients 1e-5 + 1e-5|x| (tests/nn/"
	  "test_nn_act*.c)", ck_run_swiglu, fl_elem, by_elem}, ROWS(swiglu_rows)},
	{{"bias", "N,C", NULL, 0, 0, CK_DT_ALL, {{1e-6, 1e-6, 0}, T0, T0}, T0,
	  {1e-5, 1e-5, 0}, FDTS, "out: one correctly rounded float addition, 16-bit bitwise; "
	  "dbias 1e-5 + 1e-5|x| (fixed-order column sums) (tests/nn/test_nn_norm*.c)",
	  ck_run_bias, fl_elem, by_elem}, ROWS(bias_rows)},
	{{"residual", "n", NULL, 0, 0, CK_DT_ALL, {{1e-6, 1e-6, 0}, T0, T0}, T0, {1e-6, 1e-6, 0},
	  FDTS, "out: one correctly rounded float addition, 16-bit bitwise; gradients 1e-6 + "
	  "1e-6|x| (tests/nn/test_nn_act*.c)", ck_run_residual, fl_elem, by_elem},
	 ROWS(residual_rows)},
	{{"dropout", "n", VARS(dropout_variants), 0, CK_DT_ALL,
	  {{1e-6, 1e-6, 0}, {0, 1e-6, 1}, {0, 1e-6, 1}}, T0, {1e-6, 1e-6, 0}, FDTS,
	  "p = 0.5 scales by 2: 16-bit bitwise; p = 0.1: the float 1/(1-p) against the double "
	  "one, 1e-6|x| plus one unit; dinp 1e-6 + 1e-6|x| (tests/nn/test_nn_act*.c)",
	  ck_run_dropout, fl_elem, by_elem}, ROWS(dropout_rows)},
	{{"embed", "B,T,C,V", VARS(embed_variants), 0, CK_DT_ALL,
	  {{1e-6, 1e-6, 0}, T0, T0}, T0, {1e-5, 1e-5, 0}, FDTS,
	  "out: a gathered row plus a position row, one float addition, 16-bit bitwise; "
	  "gradients 1e-5 + 1e-5|x| (tests/nn/test_nn_embed*.c)",
	  ck_run_embed, fl_embed, by_embed}, ROWS(embed_rows)},
	{{"rope", "B,T,heads,hd", NULL, 0, 0, CK_DT_ALL, OUT16(1e-6, 1e-6), T0,
	  {1e-6, 1e-6, 0}, FDTS, "1e-6 + 1e-6|x|: two products and a sum per element "
	  "(tests/nn/test_nn_embed*.c)", ck_run_rope, fl_rope, by_rope}, ROWS(rope_rows)},
	{{"attention", "B,T,H,KVH,hd", VARS(attn_variants), CK_GEOM_BOTH, CK_DT_ALL,
	  {{2e-6, 1e-5, 0}, {2e-6, 1e-5 + BF16_ULP, 0}, {2e-6, 1e-5 + F16_ULP, 0}},
	  {2e-6, 1e-5, 0}, {1e-5, 1e-4, 0},
	  {{1.1e-4, 0}, {1e-5 + BF16_ULP / 2, 0}, {1e-5 + F16_ULP / 2, 0}},
	  "out 2e-6 + 1e-5|x| (+1 ulp relative for 16-bit), lse 2e-6 + 1e-5|x|, gradients "
	  "1e-5 + 1e-4|x|; finite differences: fp32 the gradients' 1e-4 plus the differences' "
	  "1e-5, 16-bit the rounding u of out in D = rowsum(dout out) (tests/nn/"
	  "cl/check/check_attn.c)", ck_run_attention, fl_attn, by_attn}, ROWS(attn_rows)},
	{{"xent", "N,C,V,vchunk", VARS(xent_variants), 0, CK_DT_ALL, {T0, T0, T0},
	  {1e-5, 1e-5, 0}, {1e-5, 1e-4, 0}, {{1.1e-4, 2e-6}, {1.1e-4, 2e-6}, {1.1e-4, 2e-6}},
	  "losses, lse, mean 1e-5 + 1e-5|x|, gradients 1e-5 + 1e-4|x|: fp32 logits from the "
	  "exact (rounded) inputs; finite differences the gradients' 1e-4 plus the differences' "
	  "1e-5 (tests/nn/test_nn_xent.c)", ck_run_xent, fl_xent, by_xent}, ROWS(xent_rows)},
	{{"adamw", "n", VARS(adamw_variants), 0, CK_DT_F32, {{1e-6, 1e-5, 0}, T0, T0},
	  {1e-9, 1e-5, 0}, T0, {{0, 0}, {0, 0}, {0, 0}},
	  "param 1e-6 + 1e-5|x|, v 1e-9 + 1e-5|x| after three fp32 steps against PyTorch's "
	  "formulas in double (tests/nn/test_nn_optim.c)", ck_run_adamw, fl_elem, by_elem},
	 ROWS(adamw_rows)},
	{{"grad_stats", "n", VARS(gstats_variants), 0, CK_DT_F32, {{1e-7, 1e-6, 0}, T0, T0}, T0,
	  T0, {{0, 0}, {0, 0}, {0, 0}}, "1e-7 + 1e-6|x|: a compensated sum of squares over three "
	  "tensors (tests/nn/test_nn_optim.c)", ck_run_grad_stats, fl_elem, by_elem},
	 ROWS(gstats_rows)},
	{{"kfac_factor", "d,rows", NULL, 0, 0, CK_DT_ALL,
	  {{1e-5, 1e-5, 0}, {1e-5, 1e-5, 0}, {1e-5, 1e-5, 0}}, T0, T0, {{0, 0}, {0, 0}, {0, 0}},
	  "1e-5 + 1e-5|x| in every input type: 16-bit inputs are read exactly, products exact in "
	  "fp32 (tests/kfac/test_kfac_kernels.c)", ck_run_kfac_factor, fl_square, by_square},
	 ROWS(factor_rows)},
	{{"kfac_inverse", "n", NULL, 0, CK_GEOM_BOTH, CK_DT_F32,
	  {{0, 1e-4, 0}, T0, T0}, {0, 2e-5, 0}, T0, {{0, 0}, {0, 0}, {0, 0}},
	  "normalised error: Cholesky and triangular inverse 2e-5, SPD inverse 1e-4 on matrices "
	  "of condition ~100 (tests/kfac/test_kfac_kernels.c)", ck_run_kfac_inverse, fl_square,
	  by_square}, ROWS(inverse_rows)},
	{{"kfac_damping", "dA,dB,dB3", VARS(damping_variants), 0, CK_DT_F32,
	  {{1e-6, 1e-6, 0}, T0, T0}, {1e-12, 1e-5, 0}, T0, {{0, 0}, {0, 0}, {0, 0}},
	  "damping and pi 1e-12 + 1e-5|x| (traces of float sums), the damped copy 1e-6 + 1e-6|x| "
	  "(tests/kfac/test_kfac_kernels.c)", ck_run_kfac_damping, fl_square, by_square},
	 ROWS(damping_rows)},
	{{"kfac_sgd", "n", NULL, 0, 0, CK_DT_F32, {{1e-6, 1e-6, 0}, T0, T0}, {1e-7, 1e-6, 0}, T0,
	  {{0, 0}, {0, 0}, {0, 0}}, "dot, param, momentum 1e-6 + 1e-6|x|, KL-clip factor 1e-7 + "
	  "1e-6|x| (tests/kfac/test_kfac_kernels.c)", ck_run_kfac_sgd, fl_elem, by_elem},
	 ROWS(sgd_rows)},
	{{"kfac_precondition", "O,I", VARS(precond_variants), 0, CK_DT_F32,
	  {{1e-4, 1e-4, 0}, T0, T0}, T0, T0, {{0, 0}, {0, 0}, {0, 0}},
	  "1e-4 + 1e-4|x|: two fp32 GEMMs with SPD inverses (tests/kfac/test_kfac_kernels.c)",
	  ck_run_kfac_precondition, fl_square, by_square}, ROWS(precond_rows)},
};
#define NOPS NS(table)

int clp_check_nops(void)
{
	return NOPS;
}

const char *clp_check_op_name(int i)
{
	return i >= 0 && i < NOPS ? table[i].op.name : NULL;
}

const char *clp_check_op_why(int i)
{
	return i >= 0 && i < NOPS ? table[i].op.why : NULL;
}

/* ---- the runner --------------------------------------------------------------------------- */

static int listed(const char *list, const char *name)
{
	size_t len;

	if (!list)
		return 1;
	for (const char *p = list; *p;) {
		p += strspn(p, " "); /* the summary's list is ", "-separated */
		len = strcspn(p, ",");
		if (len == strlen(name) && !strncmp(p, name, len))
			return 1;
		p += len + (p[len] == ',');
	}
	return 0;
}

static void add_failed(clp_check_summary *sum, const char *name)
{
	size_t used = strlen(sum->failed_ops);

	if (sum->failed_ops[0] && listed(sum->failed_ops, name))
		return;
	snprintf(sum->failed_ops + used, sizeof(sum->failed_ops) - used, "%s%s", used ? ", " : "",
		 name);
}

static void release(ck_env *e)
{
	for (int i = 0; i < e->nmem; i++)
		clReleaseMemObject(e->mem[i]);
	for (int i = 0; i < e->nhost; i++)
		free(e->host[i]);
	e->nmem = e->nhost = 0;
}

static void run_case(ck_env *e, const ck_case *c)
{
	clp_status s;

	e->c = c;
	e->rng = c->seed;
	e->case_failed = 0;
	e->extra[0] = '\0';
	snprintf(e->dtype, sizeof(e->dtype), "%s", clp_dtype_name(c->dt));
	clp_nn_set_shape(c->geom);
	s = c->op->run(e, c);
	if (s == CLP_OK)
		s = clp_cl_finish(e->ctx);
	clp_nn_set_shape(CLP_NN_SHAPE_AUTO);
	if (s != CLP_OK)
		ck_error_line(e, s);
	release(e);
	e->sum->cases++;
	if (e->case_failed) {
		e->sum->failed_cases++;
		add_failed(e->sum, c->op->name);
	}
}

clp_status clp_check_ops_valid(const char *list)
{
	for (const char *p = list; p && *p;) {
		size_t len = strcspn(p, ",");
		int found = 0;

		for (int i = 0; i < NOPS; i++)
			found |= len == strlen(table[i].op.name) && !strncmp(p, table[i].op.name, len);
		if (!found)
			return clp_error(CLP_ERR_NOT_FOUND, "check: no op '%.*s' (clpipe check --list "
					 "names them)", (int)len, p);
		p += len + (p[len] == ',');
	}
	return CLP_OK;
}

clp_status clp_check_run(clp_cl_ctx *ctx, const clp_check_opts *opts, clp_check_summary *sum)
{
	ck_env *e;
	clp_status s = CLP_OK;

	memset(sum, 0, sizeof(*sum));
	CLP_TRY(clp_check_ops_valid(opts->only));
	e = calloc(1, sizeof(*e));
	if (!e)
		return clp_error(CLP_ERR_NOMEM, "check: out of host memory");
	e->ctx = ctx, e->opts = opts, e->sum = sum;
	for (int oi = 0; oi < NOPS; oi++) {
		const ck_entry *t = &table[oi];
		int nv = t->op.variants ? t->op.nvariants : 1;
		int ng = t->op.geoms & CK_GEOM_BOTH ? 2 : 1;

		if (!listed(opts->only, t->op.name))
			continue;
		for (int ri = 0; ri < t->nrows; ri++) {
			const ck_row *r = &t->rows[ri];

			if (opts->quick && !(r->s.flags & CK_QUICK))
				continue;
			for (int dt = CLP_F32; dt <= CLP_F16; dt++) {
				if (!(t->op.dtypes & (1u << dt)) ||
				    (dt == CLP_F32 && (r->s.flags & CK_S16ONLY)) ||
				    (dt != CLP_F32 && (r->s.flags & CK_F32ONLY)))
					continue;
				for (int v = 0; v < nv; v++) {
					if (r->variant != ALLV && r->variant != v)
						continue;
					for (int g = 0; g < ng; g++) {
						if (g && (r->s.flags & CK_GPUGEOM_ON_GPU) &&
						    !clp_cl_ctx_gpu_shape(ctx))
							continue;
						ck_case c = {&t->op, v,
							     ng == 1 ? CLP_NN_SHAPE_AUTO
							     : g ? CLP_NN_SHAPE_GPU : CLP_NN_SHAPE_CPU,
							     (clp_dtype)dt, r->s.d, r->s.flags,
							     0x5eed0000ull + (uint64_t)oi * 1000003u +
								     (uint64_t)ri * 7919u +
								     (uint64_t)dt * 131u +
								     (uint64_t)v * 17u + (uint64_t)g};

						run_case(e, &c);
					}
				}
			}
		}
	}
	s = ck_gemm_restore(e);
	free(e);
	return s;
}
