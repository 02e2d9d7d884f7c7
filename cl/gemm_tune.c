/* GEMM tuning support: candidate parameter sets per backend and verification of a candidate
 * against the double-precision reference (some CLBlast settings give wrong results on PoCL 3.1,
 * so nothing is timed, let alone saved, before it is checked). */
#include "cl/gemm_tune.h"
#include "cl/gemm_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/durable.h"
#include "cl/base/json_util.h"
#include "cl/ref/ref.h"

static unsigned next_rand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return (*s >> 8) & 0xffffff;
}

#define PICK(s, arr) ((arr)[next_rand(s) % (sizeof(arr) / sizeof((arr)[0]))])

static void set_param(clp_gemm_param *p, int *n, const char *name, long v)
{
	snprintf(p[*n].name, sizeof(p[*n].name), "%s", name);
	p[*n].value = v;
	(*n)++;
}

/* CLBlast's Xgemm kernel 0 (GEMMK = 0) parameter space and its constraints. */
static int clblast_candidate(const clp_cl_devinfo *dev, unsigned *seed, clp_gemm_tuning *t)
{
	static const long mwg[] = {16, 32, 64, 128}, kwg[] = {16, 32}, dim[] = {4, 8, 16, 32};
	static const long vw[] = {1, 2, 4, 8}, bit[] = {0, 1};

	for (int tries = 0; tries < 10000; tries++) {
		long MWG = PICK(seed, mwg), NWG = PICK(seed, mwg), KWG = PICK(seed, kwg);
		long MDIMC = PICK(seed, dim), NDIMC = PICK(seed, dim), MDIMA = PICK(seed, dim);
		long NDIMB = PICK(seed, dim), VWM = PICK(seed, vw), VWN = PICK(seed, vw);
		long SA = PICK(seed, bit), SB = PICK(seed, bit), STRM = PICK(seed, bit);
		long STRN = PICK(seed, bit), KWI = 2;

		if (MWG % (MDIMC * VWM) || NWG % (NDIMC * VWN) || MWG % (MDIMA * VWM) ||
		    NWG % (NDIMB * VWN) || (MDIMC * NDIMC) % MDIMA || (MDIMC * NDIMC) % NDIMB ||
		    KWG % ((MDIMC * NDIMC) / MDIMA) || KWG % ((MDIMC * NDIMC) / NDIMB) || KWG % KWI)
			continue;
		if ((uint64_t)(MDIMC * NDIMC) > dev->max_wg_size ||
		    (uint64_t)((SA * KWG * MWG + SB * KWG * NWG) * 4) > dev->local_mem)
			continue;
		memset(t, 0, sizeof(*t));
		t->backend = CLP_GEMM_CLBLAST;
		set_param(t->clblast, &t->nclblast, "GEMMK", 0);
		set_param(t->clblast, &t->nclblast, "KREG", 1);
		set_param(t->clblast, &t->nclblast, "KWG", KWG);
		set_param(t->clblast, &t->nclblast, "KWI", KWI);
		set_param(t->clblast, &t->nclblast, "MDIMA", MDIMA);
		set_param(t->clblast, &t->nclblast, "MDIMC", MDIMC);
		set_param(t->clblast, &t->nclblast, "MWG", MWG);
		set_param(t->clblast, &t->nclblast, "NDIMB", NDIMB);
		set_param(t->clblast, &t->nclblast, "NDIMC", NDIMC);
		set_param(t->clblast, &t->nclblast, "NWG", NWG);
		set_param(t->clblast, &t->nclblast, "SA", SA);
		set_param(t->clblast, &t->nclblast, "SB", SB);
		set_param(t->clblast, &t->nclblast, "STRM", STRM);
		set_param(t->clblast, &t->nclblast, "STRN", STRN);
		set_param(t->clblast, &t->nclblast, "VWM", VWM);
		set_param(t->clblast, &t->nclblast, "VWN", VWN);
		return 1;
	}
	return 0;
}

static int tiled_candidate(const clp_cl_devinfo *dev, unsigned *seed, clp_gemm_tuning *t)
{
	static const long ts[] = {16, 32, 64, 128}, tk[] = {8, 16, 32}, wpt[] = {1, 2, 4, 8};

	for (int tries = 0; tries < 10000; tries++) {
		long TS_M = PICK(seed, ts), TS_N = PICK(seed, ts), TS_K = PICK(seed, tk);
		long WPT_M = PICK(seed, wpt), WPT_N = PICK(seed, wpt);
		long threads = (TS_M / WPT_M) * (TS_N / WPT_N);

		if (TS_M % WPT_M || TS_N % WPT_N || threads < 16 || (uint64_t)threads > dev->max_wg_size ||
		    (uint64_t)(TS_K * (TS_M + TS_N + 2) * 4) > dev->local_mem)
			continue;
		memset(t, 0, sizeof(*t));
		t->backend = CLP_GEMM_TILED;
		set_param(t->params, &t->nparams, "TS_M", TS_M);
		set_param(t->params, &t->nparams, "TS_N", TS_N);
		set_param(t->params, &t->nparams, "TS_K", TS_K);
		set_param(t->params, &t->nparams, "WPT_M", WPT_M);
		set_param(t->params, &t->nparams, "WPT_N", WPT_N);
		return 1;
	}
	return 0;
}

int clp_gemm_candidates(clp_gemm_backend b, const clp_cl_devinfo *dev, unsigned seed,
			clp_gemm_tuning *out, int max)
{
	int n = 0;

	if (max <= 0)
		return 0;
	/* first: what the table says today (or the backend's own defaults) */
	if (clp_gemm_tuning_lookup(dev, b, &out[0]) != CLP_OK) {
		memset(&out[0], 0, sizeof(out[0]));
		out[0].backend = b;
	}
	snprintf(out[0].source, sizeof(out[0].source), "current");
	n = 1;
	if (b == CLP_GEMM_PACKED)
		return n + clp_gemm_packed_candidates(dev, seed, out + n, max - n);
	if (b == CLP_GEMM_DIRECT) /* no search of its own yet: the table's WM, WN, LX */
		return n;
	while (n < max) {
		int ok = b == CLP_GEMM_CLBLAST ? clblast_candidate(dev, &seed, &out[n])
					       : tiled_candidate(dev, &seed, &out[n]);
		int dup = 0;

		if (!ok)
			break;
		for (int i = 0; i < n; i++)
			dup |= !memcmp(out[i].clblast, out[n].clblast, sizeof(out[n].clblast)) &&
			       !memcmp(out[i].params, out[n].params, sizeof(out[n].params));
		if (dup) {
			if (++seed % 100000 == 0)
				break;
			continue;
		}
		snprintf(out[n].source, sizeof(out[n].source), "candidate %d", n);
		n++;
	}
	return n;
}

/* ---- verification ---------------------------------------------------------------------------- */

static clp_status verify_one(clp_cl_ctx *ctx, int ta, int tb, size_t m, size_t n, size_t k,
			     float beta, unsigned *seed)
{
	size_t lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 3;
	size_t na = (ta ? k : m) * lda, nb = (tb ? n : k) * ldb, nc = m * ldc;
	float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4), *got = malloc(nc * 4);
	cl_mem da = NULL, db = NULL, dc = NULL;
	clp_status s = CLP_OK;
	const double u = 1.0 / 16777216.0;

	if (!a || !b || !c || !got) {
		s = clp_error(CLP_ERR_NOMEM, "out of host memory verifying gemm");
		goto out;
	}
	for (size_t i = 0; i < na; i++)
		a[i] = (float)(next_rand(seed) % 2001) / 1000.0f - 1.0f;
	for (size_t i = 0; i < nb; i++)
		b[i] = (float)(next_rand(seed) % 2001) / 1000.0f - 1.0f;
	for (size_t i = 0; i < nc; i++)
		c[i] = beta == 0.0f ? NAN : (float)(next_rand(seed) % 2001) / 1000.0f - 1.0f;
	if ((s = clp_cl_buffer(ctx, na * 4, "A", &da)) != CLP_OK ||
	    (s = clp_cl_buffer(ctx, nb * 4, "B", &db)) != CLP_OK ||
	    (s = clp_cl_buffer(ctx, nc * 4, "C", &dc)) != CLP_OK ||
	    (s = clp_cl_write(ctx, da, 0, na * 4, a)) != CLP_OK ||
	    (s = clp_cl_write(ctx, db, 0, nb * 4, b)) != CLP_OK ||
	    (s = clp_cl_write(ctx, dc, 0, nc * 4, c)) != CLP_OK ||
	    (s = clp_cl_gemm(ctx, (clp_trans)ta, (clp_trans)tb, m, n, k, 1.0f, clp_buf_at(da, 0), lda,
			     clp_buf_at(db, 0), ldb, beta, clp_buf_at(dc, 0), ldc)) != CLP_OK ||
	    (s = clp_cl_read(ctx, dc, 0, nc * 4, got)) != CLP_OK)
		goto out;
	if (beta == 0.0f)
		for (size_t i = 0; i < nc; i++)
			c[i] = 0.0f;
	clp_ref_gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
	for (size_t i = 0; i < m && s == CLP_OK; i++)
		for (size_t j = 0; j < n; j++) {
			double want = c[i * ldc + j], g = got[i * ldc + j];
			double tol = (4 * sqrt((double)k) + 8) * u * ((double)k + 1) + 1e-30;

			if (!(fabs(g - want) <= tol)) {
				s = clp_error(CLP_ERR_NUMERIC, "gemm %c%c m=%zu n=%zu k=%zu beta=%g: "
					      "C[%zu][%zu] = %g, reference %g", ta ? 'T' : 'N',
					      tb ? 'T' : 'N', m, n, k, beta, i, j, g, want);
				break;
			}
		}
out:
	if (da)
		clReleaseMemObject(da);
	if (db)
		clReleaseMemObject(db);
	if (dc)
		clReleaseMemObject(dc);
	free(a);
	free(b);
	free(c);
	free(got);
	return s;
}

clp_status clp_gemm_verify(clp_cl_ctx *ctx)
{
	static const size_t shapes[][3] = {{1, 1, 1}, {7, 33, 127}, {127, 7, 33}, {33, 200, 65},
					    {130, 67, 300}};
	unsigned seed = 12345;

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		for (int ta = 0; ta < 2; ta++)
			for (int tb = 0; tb < 2; tb++)
				for (int z = 0; z < 2; z++)
					CLP_TRY(verify_one(ctx, ta, tb, shapes[i][0], shapes[i][1],
							   shapes[i][2], z ? 0.5f : 0.0f, &seed));
	return CLP_OK;
}

clp_status clp_gemm_tuning_save(const clp_cl_devinfo *dev, const clp_gemm_tuning *best,
				double gflops, char *path, size_t n)
{
	char label[128];
	json_t *root, *entries, *e;
	size_t pos = 0;
	clp_status st;

	clp_gemm_tuning_path(dev, path, n);
	if (clp_json_load(path, &root) != CLP_OK)
		clp_error_clear(); /* none yet (or unreadable): a new file */
	if (!root || !json_is_array(json_object_get(root, "entries"))) {
		json_decref(root);
		root = json_pack("{s:s, s:[]}", "about", "written by clpipe tune gemm", "entries");
	}
	entries = json_object_get(root, "entries");
	/* one entry per backend: replace this backend's, keep the best-scoring first */
	for (size_t i = 0; i < json_array_size(entries);) {
		const char *b = json_string_value(json_object_get(json_array_get(entries, i),
								  "backend"));

		if (b && !strcmp(b, clp_gemm_backend_name(best->backend)))
			json_array_remove(entries, i);
		else
			i++;
	}
	snprintf(label, sizeof(label), "tuned %s", clp_gemm_backend_name(best->backend));
	e = clp_gemm_tuning_to_json(best, label);
	json_object_set_new(e, "match", json_pack("{s:s, s:s}", "name", dev->name, "driver",
						   dev->driver));
	json_object_set_new(e, "measured_gflops", json_real(gflops));
	while (pos < json_array_size(entries) &&
	       json_real_value(json_object_get(json_array_get(entries, pos), "measured_gflops")) >=
		       gflops)
		pos++;
	json_array_insert_new(entries, pos, e);
	st = clp_io_write_json(path, root, JSON_INDENT(2), 0, CLP_IO_SHARED);
	json_decref(root);
	return st;
}
