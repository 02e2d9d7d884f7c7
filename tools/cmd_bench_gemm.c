/* clpipe bench gemm: the engine's GEMM (each backend) against CLBlast's defaults and OpenBLAS on
 * the host, on the products a transformer trains with. Medians of >= 7 runs, engine and OpenBLAS
 * alternating, with the spread. */
#include <cblas.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl/convert.h"
#include "cl/base/durable.h"
#include "cl/gemm.h"
#include "tools/cli.h"
#include "tools/stats.h"

struct bshape {
	int ta, tb;
	size_t m, n, k;
	const char *what;
	int st;     /* with --precision: which operands are 16-bit (1 A, 2 B, 4 C; 0: A and B) */
	float beta; /* 1: accumulate into C, as the backward's gradients do */
};

/* Linear layers of a d_model 768 transformer, 4096 tokens: Y = X W^T (NT), dX = dY W (NN),
 * dW = dY^T X (TN); then square NN products. */
#define LAYER(in, out, name)                                                                       \
	{0, 1, 4096, out, in, name " fwd Y=XW^T", 0, 0.0f},                                       \
	{0, 0, 4096, in, out, name " bwd dX=dYW", 0, 0.0f},                                       \
	{1, 0, out, in, 4096, name " bwd dW=dY^TX", 0, 0.0f}
static const struct bshape default_shapes[] = {
	LAYER(768, 2304, "qkv"), LAYER(768, 768, "attn-out"), LAYER(768, 3072, "mlp-up"),
	LAYER(3072, 768, "mlp-down"),
	{0, 0, 512, 512, 512, "square", 0, 0.0f}, {0, 0, 1024, 1024, 1024, "square", 0, 0.0f},
	{0, 0, 2048, 2048, 2048, "square", 0, 0.0f},
};
/* With --precision: the three GEMMs of each linear layer of a training step, as the engine
 * calls them for GPT-2 small (Conv1D weights W (in, out), N = 2048 rows): forward Y = X W with X,
 * W and Y 16-bit (S*S->S), dX += dY W^T with the 16-bit W (fp32*S->fp32), dW += X^T dY with the
 * saved 16-bit X (S*fp32->fp32). */
#define TRAIN_ROWS 2048
#define TRAIN(in, out, name)                                                                       \
	{0, 0, TRAIN_ROWS, out, in, name " fwd Y=XW", 7, 0.0f},                                   \
	{0, 1, TRAIN_ROWS, in, out, name " dX+=dYW'", 2, 1.0f},                                   \
	{1, 0, in, out, TRAIN_ROWS, name " dW+=X'dY", 1, 1.0f}
static const struct bshape train_shapes[] = {
	TRAIN(768, 2304, "qkv"), TRAIN(768, 768, "attn-out"), TRAIN(768, 3072, "mlp-up"),
	TRAIN(3072, 768, "mlp-down"),
};
static const struct bshape quick_shapes[] = {
	{0, 1, 1024, 768, 768, "quick fwd", 7, 0.0f}, {0, 0, 1024, 768, 768, "quick bwd dX", 2, 1.0f},
	{1, 0, 768, 768, 1024, "quick bwd dW", 2, 1.0f},
};

#define MAX_BACKENDS 4
struct bench_backend {
	char name[32];
	clp_gemm_tuning tuning;
};

static void help(void)
{
	printf("usage: clpipe bench gemm [--device SPEC] [--backends LIST] [--shapes LIST] [--reps N]\n"
	       "                         [--precision bf16|fp16] [--quick] [--json FILE]\n\n"
	       "Times C = op(A) op(B) on the device for each GEMM backend and, on the same shapes,\n"
	       "OpenBLAS cblas_sgemm on the host, alternating; prints GFLOP/s (median of N >= 7\n"
	       "runs, with min..max) and the ratio to OpenBLAS.\n\n"
	       "  --backends LIST  comma list of packed, tiled, clblast (as tuned), clblast-default\n"
	       "                   (CLBlast's own parameters), direct (llvmpipe's: no local\n"
	       "                   memory). Default: the tuned backend and\n"
	       "                   clblast-default; on CPU devices also packed (tiled is GPU-shaped\n"
	       "                   and very slow on a CPU: ask for it explicitly).\n"
	       "  --shapes LIST    comma list of MxNxK[:TT[:XYZ]] (TT = NN, NT, TN, TT; XYZ: S or F\n"
	       "                   per A, B, C: which are 16-bit with --precision, default SSF);\n"
	       "                   default: the three training products of each linear layer\n"
	       "                   of a d_model 768 transformer with 4096 tokens, plus square\n"
	       "                   512/1024/2048 NN\n"
	       "  --quick          three small shapes, 7 runs (a smoke run)\n"
	       "  --reps N         runs per figure (default 7, minimum 7)\n"
	       "  --precision P    also time each backend with operands stored in P (bf16 or fp16;\n"
	       "                   sums in fp32), alternating with its fp32 run; the 16-bit row\n"
	       "                   adds its speed as a multiple of fp32's and which operands are\n"
	       "                   16-bit. Default shapes then: the engine's three training GEMMs\n"
	       "                   of each GPT-2-small linear layer (2048 rows), forward S*S->S,\n"
	       "                   dX fp32*S->fp32 and dW S*fp32->fp32, the two gradients\n"
	       "                   accumulating (beta 1); with --shapes, A and B in P, C fp32\n"
	       "  --json FILE      one record per (backend, m, n, k, transposes) with gflops and\n"
	       "                   ratio_to_openblas (and precision, ratio_to_fp32 with --precision)\n");
}

static int parse_shapes(const char *list, struct bshape **out, int *n)
{
	int cap = 1;

	for (const char *p = list; *p; p++)
		cap += *p == ',';
	*out = calloc((size_t)cap, sizeof(**out));
	*n = 0;
	for (const char *p = list; p && *p;) {
		struct bshape s = {0, 0, 0, 0, 0, "user", 3, 0.0f};
		char t[3] = "NN";
		int used = 0;

		if (sscanf(p, "%zux%zux%zu%n", &s.m, &s.n, &s.k, &used) != 3 || !s.m || !s.n)
			return -1;
		p += used;
		if (*p == ':') {
			if (sscanf(p + 1, "%2[NTnt]", t) != 1 || strlen(t) != 2)
				return -1;
			p += 3;
		}
		if (*p == ':') { /* storage with --precision: S (16-bit) or F (fp32) for A, B, C */
			char q[4] = "";

			if (sscanf(p + 1, "%3[SFsf]", q) != 1 || strlen(q) != 3)
				return -1;
			s.st = 0;
			for (int i = 0; i < 3; i++)
				s.st |= (q[i] == 'S' || q[i] == 's') << i;
			if (!s.st)
				return -1;
			p += 4;
		}
		s.ta = t[0] == 'T' || t[0] == 't';
		s.tb = t[1] == 'T' || t[1] == 't';
		(*out)[(*n)++] = s;
		if (*p == ',')
			p++;
		else if (*p)
			return -1;
	}
	return 0;
}

static int add_backend(clp_cl_ctx *ctx, struct bench_backend *bk, int *nb, const char *name)
{
	const clp_cl_devinfo *dev = clp_cl_ctx_device(ctx);
	struct bench_backend *b = &bk[*nb];
	clp_gemm_backend be;
	int dflt = !strcmp(name, "clblast-default");

	if (*nb == MAX_BACKENDS)
		return 0;
	if (clp_gemm_backend_parse(dflt ? "clblast" : name, &be) != CLP_OK || be == CLP_GEMM_AUTO)
		return -1;
	memset(b, 0, sizeof(*b));
	snprintf(b->name, sizeof(b->name), "%s", name);
	if (!dflt) {
		clp_status s = clp_gemm_tuning_lookup(dev, be, &b->tuning);

		if (s != CLP_OK && s != CLP_ERR_NOT_FOUND) /* a broken table is an error */
			return cli_fail("bench gemm", s);
		dflt = s == CLP_ERR_NOT_FOUND;
	}
	if (dflt) {
		memset(&b->tuning, 0, sizeof(b->tuning));
		b->tuning.backend = be;
		snprintf(b->tuning.source, sizeof(b->tuning.source), "%s defaults",
			 clp_gemm_backend_name(be));
	}
	for (int i = 0; i < *nb; i++) /* the same thing twice is measured once */
		if (!memcmp(&bk[i].tuning.backend, &b->tuning.backend, sizeof(b->tuning.backend)) &&
		    bk[i].tuning.nparams == b->tuning.nparams &&
		    bk[i].tuning.nclblast == b->tuning.nclblast &&
		    !memcmp(bk[i].tuning.params, b->tuning.params, sizeof(b->tuning.params)) &&
		    !memcmp(bk[i].tuning.clblast, b->tuning.clblast, sizeof(b->tuning.clblast)))
			return 0;
	(*nb)++;
	return 0;
}

/* The storage of the operands of a shape's 16-bit variant: bit 0 A, 1 B, 2 C. */
static int storage_mask(const struct bshape *s)
{
	return s->st ? s->st : 3;
}

/* "S*S->fp32" for a mask */
static void storage_name(int st, char *buf, size_t n)
{
	snprintf(buf, n, "%s*%s->%s", st & 1 ? "S" : "fp32", st & 2 ? "S" : "fp32",
		 st & 4 ? "S" : "fp32");
}

/* One timed product: operands a[v], b[v], c[v] where the variant's mask says 16-bit (t). */
static clp_status run_engine(clp_cl_ctx *ctx, const struct bshape *s, int st, clp_dtype t,
			     cl_mem *a, cl_mem *b, cl_mem *c, double *secs)
{
	size_t lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
	clp_buf ba = st & 1 ? clp_buf_typed(a[1], 0, t) : clp_buf_at(a[0], 0);
	clp_buf bb = st & 2 ? clp_buf_typed(b[1], 0, t) : clp_buf_at(b[0], 0);
	clp_buf bc = st & 4 ? clp_buf_typed(c[1], 0, t) : clp_buf_at(c[0], 0);
	double t0 = clp_comm_now();

	CLP_TRY(clp_cl_gemm(ctx, (clp_trans)s->ta, (clp_trans)s->tb, s->m, s->n, s->k, 1.0f, ba,
			    lda, bb, ldb, s->beta, bc, s->n));
	CLP_TRY(clp_cl_finish(ctx));
	*secs = clp_comm_now() - t0;
	return CLP_OK;
}

static double run_openblas(const struct bshape *s, const float *a, const float *b, float *c)
{
	size_t lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
	double t0 = clp_comm_now();

	cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
		    s->tb ? CblasTrans : CblasNoTrans, (int)s->m, (int)s->n, (int)s->k, 1.0f, a,
		    (int)lda, b, (int)ldb, s->beta, c, (int)s->n);
	return clp_comm_now() - t0;
}

/* One timed product of variant v (0: fp32, 1: the shape's operands in t) of backend b. */
static clp_status run_variant(clp_cl_ctx *ctx, const struct bench_backend *bk, int v, clp_dtype t,
			      const struct bshape *s, cl_mem *a, cl_mem *b, cl_mem *c, double *tm)
{
	CLP_TRY(clp_cl_gemm_set_tuning(ctx, &bk->tuning));
	return run_engine(ctx, s, v ? storage_mask(s) : 0, t, a, b, c, tm);
}

static int bench(clp_cl_ctx *ctx, struct bench_backend *bk, int nb, const struct bshape *shapes,
		 int nshapes, int reps, clp_dtype ab, json_t *records)
{
	const int nv = ab == CLP_F32 ? 1 : 2; /* variants per backend: fp32, then ab */

	printf("%-22s %-4s %5s %5s %5s %-16s %9s %19s %7s\n", "shape", "op", "m", "n", "k",
	       "backend", "GFLOP/s", "(min..max)", "ratio");
	for (int si = 0; si < nshapes; si++) {
		const struct bshape *s = &shapes[si];
		size_t na = s->m * s->k, nbb = s->k * s->n, nc = s->m * s->n;
		float *ha = malloc(na * 4), *hb = malloc(nbb * 4), *hc = calloc(nc, 4);
		double *tob = calloc((size_t)reps, sizeof(double));
		double *te = calloc((size_t)reps * nb * nv, sizeof(double));
		double flop = 2.0 * (double)s->m * (double)s->n * (double)s->k;
		cl_mem da[2] = {NULL, NULL}, db[2] = {NULL, NULL}, dc[2] = {NULL, NULL};
		char sname[32];
		clp_stats ob;
		clp_status st = CLP_OK;

		if (!ha || !hb || !hc || !tob || !te) {
			fprintf(stderr, "clpipe bench gemm: out of host memory\n");
			return 1;
		}
		for (size_t i = 0; i < na; i++)
			ha[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
		for (size_t i = 0; i < nbb; i++)
			hb[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
		if ((st = clp_cl_buffer(ctx, na * 4, "A", &da[0])) == CLP_OK &&
		    (st = clp_cl_buffer(ctx, nbb * 4, "B", &db[0])) == CLP_OK &&
		    (st = clp_cl_buffer(ctx, nc * 4, "C", &dc[0])) == CLP_OK &&
		    (st = clp_cl_write(ctx, da[0], 0, na * 4, ha)) == CLP_OK &&
		    (st = clp_cl_write(ctx, dc[0], 0, nc * 4, hc)) == CLP_OK)
			st = clp_cl_write(ctx, db[0], 0, nbb * 4, hb);
		if (nv == 2 && st == CLP_OK && /* the 16-bit copies, converted on the device */
		    (st = clp_cl_buffer(ctx, na * 2, "A16", &da[1])) == CLP_OK &&
		    (st = clp_cl_buffer(ctx, nbb * 2, "B16", &db[1])) == CLP_OK &&
		    (st = clp_cl_buffer(ctx, nc * 2, "C16", &dc[1])) == CLP_OK &&
		    (st = clp_cl_convert(ctx, clp_buf_at(da[1], 0), ab, clp_buf_at(da[0], 0), CLP_F32,
					 na)) == CLP_OK &&
		    (st = clp_cl_convert(ctx, clp_buf_at(dc[1], 0), ab, clp_buf_at(dc[0], 0), CLP_F32,
					 nc)) == CLP_OK)
			st = clp_cl_convert(ctx, clp_buf_at(db[1], 0), ab, clp_buf_at(db[0], 0),
					    CLP_F32, nbb);
		storage_name(storage_mask(s), sname, sizeof(sname));
		/* warm-up: build kernels, fault in pages, start OpenBLAS threads */
		run_openblas(s, ha, hb, hc);
		for (int b = 0; b < nb * nv && st == CLP_OK; b++) {
			double t;

			st = run_variant(ctx, &bk[b / nv], b % nv, ab, s, da, db, dc, &t);
		}
		for (int r = 0; r < reps && st == CLP_OK; r++) {
			tob[r] = run_openblas(s, ha, hb, hc);
			for (int b = 0; b < nb * nv && st == CLP_OK; b++)
				st = run_variant(ctx, &bk[b / nv], b % nv, ab, s, da, db, dc,
						 &te[b * reps + r]);
		}
		if (st != CLP_OK)
			return cli_fail("bench gemm", st);
		ob = clp_stats_of(tob, reps);
		for (int b = -1; b < nb * nv; b++) {
			clp_stats e = b < 0 ? ob : clp_stats_of(te + b * reps, reps);
			double gf = flop / e.median * 1e-9, ratio = ob.median / e.median;
			int v = b < 0 ? 0 : b % nv;
			char name[48];
			json_t *rec;

			snprintf(name, sizeof(name), "%s%s%s", b < 0 ? "openblas" : bk[b / nv].name,
				 v ? " " : "", v ? clp_dtype_name(ab) : "");
			printf("%-22s %c%c   %5zu %5zu %5zu %-16s %9.1f  (%7.1f..%7.1f) %6.0f%%",
			       b < 0 ? s->what : "", s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->m, s->n,
			       s->k, name, gf, flop / e.max * 1e-9, flop / e.min * 1e-9, 100 * ratio);
			rec = json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:f, s:f, s:f, s:f, s:f, "
					"s:i}", "backend", b < 0 ? "openblas" : bk[b / nv].name,
					"shape", s->what, "m", (json_int_t)s->m, "n",
					(json_int_t)s->n, "k", (json_int_t)s->k, "ta",
					s->ta ? "T" : "N", "tb", s->tb ? "T" : "N", "gflops", gf,
					"gflops_min", flop / e.max * 1e-9, "gflops_max",
					flop / e.min * 1e-9, "ratio_to_openblas", ratio,
					"openblas_gflops", flop / ob.median * 1e-9, "reps", reps);
			if (nv == 2 && b >= 0)
				json_object_set_new(rec, "precision",
						    json_string(clp_dtype_name(v ? ab : CLP_F32)));
			if (v) { /* against the same backend's fp32 run, alternated with it */
				clp_stats f = clp_stats_of(te + (b - 1) * reps, reps);

				printf("  %5.2fx fp32  [%s]", f.median / e.median, sname);
				json_object_set_new(rec, "ratio_to_fp32", json_real(f.median / e.median));
				json_object_set_new(rec, "storage", json_string(sname));
			}
			printf("\n");
			json_array_append_new(records, rec);
		}
		fflush(stdout);
		for (int v = 0; v < nv; v++) {
			clReleaseMemObject(da[v]);
			clReleaseMemObject(db[v]);
			clReleaseMemObject(dc[v]);
		}
		free(ha);
		free(hb);
		free(hc);
		free(tob);
		free(te);
	}
	return 0;
}

int cmd_bench_gemm(int argc, char **argv)
{
	const char *device = NULL, *json_path = NULL, *backends = NULL, *shapes_arg = NULL;
	const char *reps_arg = NULL, *prec_arg = NULL;
	clp_dtype ab = CLP_F32;
	const struct bshape *shapes = default_shapes;
	struct bshape *user = NULL;
	int nshapes = sizeof(default_shapes) / sizeof(default_shapes[0]), reps = 7, quick = 0;
	struct bench_backend bk[MAX_BACKENDS];
	int nb = 0, rc;
	clp_cl_ctx *ctx;
	clp_status s;
	json_t *root, *records;
	const clp_gemm_tuning *t;

	/* OpenBLAS's idle workers spin ~0.1 s after each call, stealing a core from the device
	 * runs that alternate with it; the timeout (read when the library loads) stops that */
	if (!getenv("OPENBLAS_THREAD_TIMEOUT")) {
		setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
		execv("/proc/self/exe", argv - 2); /* main's argv: clpipe bench gemm ... */
	}
	for (int i = 1; i < argc; i++) {
		int r = 0;

		if (cli_is_help(argv[i])) {
			help();
			return 0;
		}
		if (!strcmp(argv[i], "--quick")) {
			quick = 1;
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--device", &device)) ||
		    (r = cli_value(argc, argv, &i, "--json", &json_path)) ||
		    (r = cli_value(argc, argv, &i, "--backends", &backends)) ||
		    (r = cli_value(argc, argv, &i, "--shapes", &shapes_arg)) ||
		    (r = cli_value(argc, argv, &i, "--reps", &reps_arg)) ||
		    (r = cli_value(argc, argv, &i, "--precision", &prec_arg))) {
			if (r < 0)
				return cli_usage_error("bench gemm", "%s needs a value", argv[i]);
			continue;
		}
		return cli_usage_error("bench gemm", "unknown option '%s'", argv[i]);
	}
	if (reps_arg && ((reps = atoi(reps_arg)) < 7))
		return cli_usage_error("bench gemm", "--reps must be at least 7");
	if (prec_arg) {
		if (!strcmp(prec_arg, "bf16"))
			ab = CLP_BF16;
		else if (!strcmp(prec_arg, "fp16"))
			ab = CLP_F16;
		else if (strcmp(prec_arg, "fp32"))
			return cli_usage_error("bench gemm", "--precision must be bf16, fp16 or fp32, "
					       "not '%s'", prec_arg);
	}
	if (ab != CLP_F32) {
		shapes = train_shapes;
		nshapes = sizeof(train_shapes) / sizeof(train_shapes[0]);
	}
	if (quick) {
		shapes = quick_shapes;
		nshapes = sizeof(quick_shapes) / sizeof(quick_shapes[0]);
	}
	if (shapes_arg) {
		if (parse_shapes(shapes_arg, &user, &nshapes) != 0)
			return cli_usage_error("bench gemm", "bad --shapes '%s' (want "
					       "MxNxK[:NT[:SSF]],...)",
					       shapes_arg);
		shapes = user;
	}
	s = clp_cl_ctx_create(&ctx, device);
	if (s != CLP_OK)
		return cli_fail("bench gemm", s);
	if (backends) {
		char list[256];

		snprintf(list, sizeof(list), "%s", backends);
		for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ","))
			if ((rc = add_backend(ctx, bk, &nb, tok)) != 0) {
				clp_cl_ctx_free(ctx);
				return rc < 0 ? cli_usage_error("bench gemm", "unknown backend '%s'", tok)
					      : rc;
			}
	} else {
		/* clblast-default first: measuring it after a tuned override would not be defaults */
		add_backend(ctx, bk, &nb, "clblast-default");
		if ((s = clp_cl_gemm_tuning(ctx, &t)) != CLP_OK) {
			clp_cl_ctx_free(ctx);
			return cli_fail("bench gemm", s);
		}
		if ((rc = add_backend(ctx, bk, &nb, clp_gemm_backend_name(t->backend))) == 0 &&
		    !strcmp(clp_cl_ctx_device(ctx)->type, "cpu"))
			rc = add_backend(ctx, bk, &nb, "packed");
		if (rc != 0) {
			clp_cl_ctx_free(ctx);
			return rc;
		}
	}
	printf("device: %s (%s)\nOpenBLAS: %s, %d threads\nbackends:", clp_cl_ctx_device(ctx)->name,
	       clp_cl_ctx_device(ctx)->platform, openblas_get_config(), openblas_get_num_threads());
	for (int b = 0; b < nb; b++)
		printf(" %s [%s]", bk[b].name, bk[b].tuning.source);
	printf("\nfigures: median of %d runs (host wall clock around enqueue + finish, packing "
	       "included), min..max in brackets\n\n", reps);
	records = json_array();
	if (ab != CLP_F32)
		printf("precision: each backend in fp32, then with the operands marked S in %s "
		       "(converted on the device beforehand; sums fp32), alternating\n\n",
		       clp_dtype_name(ab));
	rc = bench(ctx, bk, nb, shapes, nshapes, reps, ab, records);
	if (rc == 0 && json_path) {
		root = json_pack("{s:s, s:s, s:s, s:i, s:o}", "device", clp_cl_ctx_device(ctx)->name,
				 "platform", clp_cl_ctx_device(ctx)->platform, "openblas",
				 openblas_get_config(), "openblas_threads",
				 openblas_get_num_threads(), "records", records);
		if (clp_io_write_json(json_path, root, JSON_INDENT(1), 0, 0) != CLP_OK) {
			fprintf(stderr, "clpipe bench gemm: cannot write %s: %s\n", json_path,
				clp_last_error());
			rc = 1;
		}
		json_decref(root);
	} else {
		json_decref(records);
	}
	free(user);
	clp_cl_ctx_free(ctx);
	return rc;
}
