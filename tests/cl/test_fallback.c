/* Builds that degrade instead of failing: a program made to fail in the real compiler
 * (CLPIPE_FAIL_BUILD adds an #error line) is named with its device, driver and compiler log; the
 * GEMM falls back packed -> tiled (also with bf16 operands) and attention GPU shape -> CPU shape
 * with one warning line, and the results still match the references; the failure is remembered
 * for the next context, and a build that ended its process twice is recorded instead of retried. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl/gemm.h"
#include "cl/nn.h"
#include "cl/ref/nn_ref.h"
#include "cl/ref/ref.h"
#include "tests/harness.h"

static clp_cl_ctx *new_ctx(void)
{
	clp_cl_ctx *ctx = NULL;

	CHECK_OK(clp_cl_ctx_create(&ctx, getenv("CLPIPE_TEST_DEVICE")));
	return ctx;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static cl_mem upload(clp_cl_ctx *ctx, const float *x, size_t n)
{
	cl_mem m = NULL;

	CHECK_OK(clp_cl_buffer(ctx, n * 4 + 4, "test", &m));
	if (m && x)
		CHECK_OK(clp_cl_write(ctx, m, 0, n * 4, x));
	return m;
}

/* The packed GEMM fails: the call still gives the right product, through the tiled one. */
static void test_gemm_fallback(void)
{
	clp_cl_ctx *ctx = new_ctx();
	const size_t M = 7, N = 33, K = 127;
	th_rng r = th_rng_seed(7);
	float *a = malloc(M * K * 4), *b = malloc(K * N * 4), *c = malloc(M * N * 4);
	double *ref = malloc(M * N * 8);
	float *cref = malloc(M * N * 4);
	const clp_gemm_tuning *t;
	clp_gemm_tuning packed;
	cl_mem da, db, dc;

	if (!ctx)
		return;
	memset(&packed, 0, sizeof(packed));
	packed.backend = CLP_GEMM_PACKED; /* the packed defaults, whatever the table says */
	CHECK_OK(clp_cl_gemm_set_tuning(ctx, &packed));
	th_fill_uniform(&r, a, M * K, -1, 1);
	th_fill_uniform(&r, b, K * N, -1, 1);
	th_poison(c, M * N);
	da = upload(ctx, a, M * K), db = upload(ctx, b, K * N), dc = upload(ctx, c, M * N);
	for (int rep = 0; rep < 2; rep++)
		CHECK_OK(clp_cl_gemm(ctx, CLP_N, CLP_N, M, N, K, 1.0f, clp_buf_at(da, 0), K,
				     clp_buf_at(db, 0), N, 0.0f, clp_buf_at(dc, 0), N));
	CHECK_OK(clp_cl_read(ctx, dc, 0, M * N * 4, c));
	memset(cref, 0, M * N * 4);
	clp_ref_gemm(0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, cref, N);
	for (size_t i = 0; i < M * N; i++)
		ref[i] = cref[i];
	th_close("gemm after falling back", c, ref, M * N, 1e-5, 1e-5);
	CHECK_OK(clp_cl_gemm_tuning(ctx, &t));
	CHECK(t->backend == CLP_GEMM_TILED, "fell back to %s, not tiled",
	      clp_gemm_backend_name(t->backend));
	CHECK(count_lines(clp_cl_ctx_warnings(ctx)) == 1, "want one warning line, got:\n%s",
	      clp_cl_ctx_warnings(ctx));
	CHECK(strstr(clp_cl_ctx_warnings(ctx), "packed GEMM does not build") &&
		      strstr(clp_cl_ctx_warnings(ctx), "falling back to the tiled GEMM") &&
		      strstr(clp_cl_ctx_warnings(ctx), clp_cl_ctx_device(ctx)->name),
	      "warning: %s", clp_cl_ctx_warnings(ctx));
	/* the failure is reported with program, device, driver and the compiler's own log */
	for (int i = 0, found = 0; i < clp_cl_ctx_nbuilds(ctx) || !found; i++) {
		const clp_cl_build_info *bi = clp_cl_ctx_build(ctx, i);

		if (!bi) {
			CHECK(0, "no failed build of gemm_packed.cl recorded");
			break;
		}
		if (strcmp(bi->program, "gemm_packed.cl") || bi->ok)
			continue;
		found = 1;
		CHECK(bi->message && strstr(bi->message, clp_cl_ctx_device(ctx)->name) &&
			      strstr(bi->message, clp_cl_ctx_device(ctx)->driver) &&
			      strstr(bi->message, "compiler log") &&
			      strstr(bi->message, "injected by CLPIPE_FAIL_BUILD"),
		      "build failure message: %s", bi->message ? bi->message : "(none)");
	}
	clReleaseMemObject(da), clReleaseMemObject(db), clReleaseMemObject(dc);
	clp_cl_ctx_free(ctx);

	/* a new context (the next run) does not retry: the failure is remembered on disk */
	ctx = new_ctx();
	if (ctx) {
		cl_kernel k;

		CHECK_ERR(clp_cl_kernel(ctx, "gemm_packed.cl",
					"#define VW 8\n#define MR 6\n#define NV 2\n#define PK 256\n"
					"#define PS 8\n", "clp_gemm_packed", &k),
			  CLP_ERR_BUILD, "gemm_packed.cl", "injected by CLPIPE_FAIL_BUILD");
		CHECK_ERR(clp_cl_kernel(ctx, "gemm_packed.cl",
					"#define VW 8\n#define MR 6\n#define NV 2\n#define PK 256\n"
					"#define PS 8\n", "clp_gemm_packed", &k),
			  CLP_ERR_BUILD, "remembered");
		CHECK(clp_cl_ctx_nbuilds(ctx) == 1 && clp_cl_ctx_build(ctx, 0)->remembered,
		      "the second context rebuilt a failed program");
		clp_cl_ctx_free(ctx);
	}
	free(a), free(b), free(c), free(ref), free(cref);
}

/* The GPU-shaped attention fails: the CPU shape runs instead and matches the reference. */
static void test_attention_fallback(void)
{
	clp_cl_ctx *ctx = new_ctx();
	clp_nn_attn at = {2, 7, 3, 3, 5, 15, 15, 15, 15, 1, 0.0f, CLP_BUF_NONE};
	const size_t n = 2 * 7 * 15;
	th_rng r = th_rng_seed(11);
	float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *o = malloc(n * 4);
	double *ref = malloc(n * 8), *lse = malloc(2 * 3 * 7 * 8);
	cl_mem mq, mk, mv, mo, ml;

	if (!ctx)
		return;
	th_fill_uniform(&r, q, n, -1, 1);
	th_fill_uniform(&r, k, n, -1, 1);
	th_fill_uniform(&r, v, n, -1, 1);
	th_poison(o, n);
	mq = upload(ctx, q, n), mk = upload(ctx, k, n), mv = upload(ctx, v, n);
	mo = upload(ctx, o, n), ml = upload(ctx, NULL, 2 * 3 * 7);
	clp_nn_set_shape(CLP_NN_SHAPE_GPU);
	CHECK_OK(clp_nn_attention_forward(ctx, clp_buf_at(mo, 0), clp_buf_at(ml, 0),
					  clp_buf_at(mq, 0), clp_buf_at(mk, 0), clp_buf_at(mv, 0),
					  &at));
	clp_nn_set_shape(CLP_NN_SHAPE_AUTO);
	CHECK_OK(clp_cl_read(ctx, mo, 0, n * 4, o));
	clp_ref_attention_forward(ref, lse, q, k, v, &at, NULL);
	th_close("attention after falling back", o, ref, n, 2e-6, 1e-5);
	CHECK(clp_cl_fell_back(ctx, "attention") &&
		      strstr(clp_cl_ctx_warnings(ctx), "GPU shape (nn_attn_gpu.cl) does not build") &&
		      strstr(clp_cl_ctx_warnings(ctx), "falling back to the CPU shape"),
	      "warning: %s", clp_cl_ctx_warnings(ctx));
	clReleaseMemObject(mq), clReleaseMemObject(mk), clReleaseMemObject(mv);
	clReleaseMemObject(mo), clReleaseMemObject(ml);
	clp_cl_ctx_free(ctx);
	free(q), free(k), free(v), free(o), free(ref), free(lse);
}

/* A compiler that ends the process: a marker left by two dead builders makes the next run
 * record the failure instead of dying a third time; one dead builder is retried. */
static void test_dead_builder(void)
{
	clp_cl_ctx *ctx = new_ctx();
	char src[256], path[4400];
	const clp_cl_build_info *bi;
	cl_program p;
	FILE *f;

	if (!ctx)
		return;
	snprintf(src, sizeof(src), "__kernel void marker_%ld(__global float *x) { x[0] = 1.0f; }\n",
		 (long)getpid());
	CHECK_OK(clp_cl_program_source(ctx, "marker.cl", src, NULL, &p));
	bi = clp_cl_ctx_build(ctx, clp_cl_ctx_nbuilds(ctx) - 1);
	if (!bi || !bi->cache_file) {
		CHECK(0, "no build record");
		clp_cl_ctx_free(ctx);
		return;
	}
	snprintf(path, sizeof(path), "%s", bi->cache_file);
	clp_cl_ctx_free(ctx);
	for (int deaths = 1; deaths <= 2; deaths++) {
		char marker[4420];

		remove(path);
		snprintf(marker, sizeof(marker), "%s.building", path);
		f = fopen(marker, "w");
		CHECK(f != NULL, "cannot write %s", marker);
		if (!f)
			return;
		fprintf(f, "999999999 %d\n", deaths); /* no such process */
		fclose(f);
		ctx = new_ctx();
		if (!ctx)
			return;
		if (deaths == 1)
			CHECK_OK(clp_cl_program_source(ctx, "marker.cl", src, NULL, &p));
		else
			CHECK_ERR(clp_cl_program_source(ctx, "marker.cl", src, NULL, &p),
				  CLP_ERR_BUILD, "marker.cl", "ended the process", "2 runs");
		clp_cl_ctx_free(ctx);
	}
	snprintf(path + strlen(path), sizeof(path) - strlen(path), ".failed");
	CHECK(remove(path) == 0, "the failure was not remembered in %s", path);
}

/* A PoCL binary whose program.bc entry is empty (two processes built the same program into
 * one PoCL cache at once; PoCL's loader asserts on it and aborts) is deleted from the engine
 * cache and rebuilt, not loaded, and a sane one is cached again. Binaries of other
 * implementations are not PoCL's format: there the test only checks the build. */
static void test_pocl_empty_entry(void)
{
	const size_t entry = 8 + 8 + 4 + 4 + 8 + 4 + 41; /* cl/program.c's pocl_binary_sane */
	clp_cl_ctx *ctx = new_ctx();
	char src[256], path[4400];
	const clp_cl_build_info *bi;
	unsigned char *bin = NULL;
	long n = 0;
	cl_program p;
	FILE *f;

	if (!ctx)
		return;
	snprintf(src, sizeof(src), "__kernel void entry_%ld(__global float *x) { x[0] = 2.0f; }\n",
		 (long)getpid());
	CHECK_OK(clp_cl_program_source(ctx, "entry.cl", src, NULL, &p));
	bi = clp_cl_ctx_build(ctx, clp_cl_ctx_nbuilds(ctx) - 1);
	CHECK(bi && bi->cache_file, "no build record");
	if (bi && bi->cache_file)
		snprintf(path, sizeof(path), "%s", bi->cache_file);
	clp_cl_ctx_free(ctx);
	if (!bi || !(f = fopen(path, "rb")))
		return;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > (long)(entry + 8) &&
	    fseek(f, 0, SEEK_SET) == 0 && (bin = malloc((size_t)n)))
		CHECK(fread(bin, 1, (size_t)n, f) == (size_t)n, "reading %s", path);
	fclose(f);
	if (!bin || memcmp(bin, "poclbin", 8) != 0 || bin[16] != 9) {
		printf("  %s: not a PoCL binary of format 9: nothing to corrupt\n", path);
		free(bin);
		return;
	}
	CHECK(bin[entry] | bin[entry + 1] | bin[entry + 2], "%s: program.bc's entry is already "
	      "empty", path);
	memset(bin + entry, 0, 8);
	f = fopen(path, "wb");
	CHECK(f && fwrite(bin, 1, (size_t)n, f) == (size_t)n, "writing %s", path);
	if (f)
		fclose(f);
	ctx = new_ctx();
	if (!ctx) {
		free(bin);
		return;
	}
	CHECK_OK(clp_cl_program_source(ctx, "entry.cl", src, NULL, &p));
	bi = clp_cl_ctx_build(ctx, clp_cl_ctx_nbuilds(ctx) - 1);
	CHECK(bi && !bi->cached, "the corrupt binary was loaded from %s", path);
	clp_cl_ctx_free(ctx);
	f = fopen(path, "rb");
	CHECK(f && fread(bin, 1, (size_t)n < entry + 8 ? (size_t)n : entry + 8, f) > 0 &&
		      (bin[entry] | bin[entry + 1] | bin[entry + 2]),
	      "%s: not cached again with program.bc", path);
	if (f)
		fclose(f);
	free(bin);
}

/* The same fallback in a mixed-precision forward (A, B and C in bf16): the packed backend's
 * 16-bit packing program fails, the product goes to the tiled kernel, which rounds C itself. */
static void test_gemm_fallback_16bit(void)
{
	clp_cl_ctx *ctx = new_ctx();
	const size_t M = 7, N = 33, K = 127;
	th_rng r = th_rng_seed(8);
	float *a = malloc(M * K * 4), *b = malloc(K * N * 4), *c = malloc(M * N * 4);
	float *cref = malloc(M * N * 4);
	uint16_t *w = malloc(M * K * 2 + K * N * 2 + M * N * 2);
	double *ref = malloc(M * N * 8);
	const clp_gemm_tuning *t;
	clp_gemm_tuning packed;
	cl_mem da = NULL, db = NULL, dc = NULL;

	if (!ctx)
		return;
	memset(&packed, 0, sizeof(packed));
	packed.backend = CLP_GEMM_PACKED;
	CHECK_OK(clp_cl_gemm_set_tuning(ctx, &packed));
	th_fill_uniform(&r, a, M * K, -1, 1);
	th_fill_uniform(&r, b, K * N, -1, 1);
	for (size_t i = 0; i < M * K; i++)
		a[i] = clp_dtype_round(CLP_BF16, a[i]);
	for (size_t i = 0; i < K * N; i++)
		b[i] = clp_dtype_round(CLP_BF16, b[i]);
	clp_dtype_pack(CLP_BF16, w, a, M * K);
	clp_dtype_pack(CLP_BF16, w + M * K, b, K * N);
	CHECK_OK(clp_cl_buffer(ctx, M * K * 2, "A", &da));
	CHECK_OK(clp_cl_buffer(ctx, K * N * 2, "B", &db));
	CHECK_OK(clp_cl_buffer(ctx, M * N * 2, "C", &dc));
	CHECK_OK(clp_cl_write(ctx, da, 0, M * K * 2, w));
	CHECK_OK(clp_cl_write(ctx, db, 0, K * N * 2, w + M * K));
	CHECK_OK(clp_cl_gemm(ctx, CLP_N, CLP_N, M, N, K, 1.0f, clp_buf_typed(da, 0, CLP_BF16), K,
			     clp_buf_typed(db, 0, CLP_BF16), N, 0.0f,
			     clp_buf_typed(dc, 0, CLP_BF16), N));
	CHECK_OK(clp_cl_read(ctx, dc, 0, M * N * 2, w));
	clp_dtype_unpack(CLP_BF16, c, w, M * N);
	memset(cref, 0, M * N * 4);
	clp_ref_gemm(0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, cref, N);
	for (size_t i = 0; i < M * N; i++)
		ref[i] = cref[i];
	/* one bf16 rounding (2^-8 relative) over the fp32 result */
	th_close("bf16 gemm after falling back", c, ref, M * N, 1e-4, 1.0 / 256);
	CHECK_OK(clp_cl_gemm_tuning(ctx, &t));
	CHECK(t->backend == CLP_GEMM_TILED, "fell back to %s, not tiled",
	      clp_gemm_backend_name(t->backend));
	CHECK(strstr(clp_cl_ctx_warnings(ctx), "packed GEMM does not build") != NULL, "warning: %s",
	      clp_cl_ctx_warnings(ctx));
	if (da)
		clReleaseMemObject(da);
	if (db)
		clReleaseMemObject(db);
	if (dc)
		clReleaseMemObject(dc);
	clp_cl_ctx_free(ctx);
	free(a), free(b), free(c), free(cref), free(w), free(ref);
}

int main(int argc, char **argv)
{
	static const struct th_test tests[] = {TH_TEST(test_gemm_fallback),
					       TH_TEST(test_gemm_fallback_16bit),
					       TH_TEST(test_attention_fallback),
					       TH_TEST(test_dead_builder),
					       TH_TEST(test_pocl_empty_entry)};

	char cache[] = "/tmp/clpipe-fallback-XXXXXX", cmd[64];
	int rc;

	/* before any context: builds read it. A private engine cache, so that the failures this
	 * test plants stay out of the shared one (and other tests' file counts) */
	setenv("CLPIPE_FAIL_BUILD", "gemm_packed.cl,nn_attn_gpu.cl", 1);
	if (!mkdtemp(cache)) {
		perror("mkdtemp");
		return 1;
	}
	setenv("CLPIPE_CACHE_DIR", cache, 1);
	rc = th_main(argc, argv, tests, 5);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cache);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", cache);
	return rc;
}
