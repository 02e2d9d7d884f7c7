/* Muon (cl/muon.h) against PyTorch's torch.optim.Muon on recorded gradients: the fixture
 * fixtures/muon_torch.json, written by tools/check_muon.py from torch itself (shapes, initial
 * values, 3 steps of gradients, a learning-rate schedule, Nesterov on and off), so this runs
 * without torch (tools/check_muon.sh runs it on a fresh one: $CLP_MUON_FIXTURE overrides the
 * path). Two references in it:
 *   torch_fp64  torch's code computing in double (its bf16 cast made a no-op): the fp32 engine
 *               within 5e-7 of it, parameters and momentum (the movement of
 *               3 steps is 1e-2..5e-2 on values of 0.1..0.3; the worst engine error measured
 *               8e-8, about 5 fp32 ulps; docs/OPTIMIZERS.md);
 *   torch       torch as shipped (the iteration in bf16): the engine no farther from it than
 *               twice torch's own bf16 error (|torch - torch_fp64|, largest of each matrix),
 *               plus 1e-6. */
#include <jansson.h>

#include "tests/nn/nn_test.h"

#include "cl/muon.h"

static void get_arr(json_t *a, float *f, double *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double v = json_number_value(json_array_get(a, i));

		if (f)
			f[i] = (float)v;
		if (d)
			d[i] = v;
	}
}

static void test_against_torch(void)
{
	clp_cl_ctx *ctx = th_ctx();
	json_error_t err;
	const char *path = getenv("CLP_MUON_FIXTURE") ? getenv("CLP_MUON_FIXTURE")
						       : CLP_MUON_FIXTURE;
	json_t *fx = json_load_file(path, 0, &err), *shapes, *hpj;
	int steps;

	if (!ctx)
		return;
	CHECK(fx != NULL, "%s: %s (line %d)", path, err.text, err.line);
	if (!fx)
		return;
	shapes = json_object_get(fx, "shapes");
	hpj = json_object_get(fx, "hp");
	steps = (int)json_integer_value(json_object_get(fx, "steps"));
	CHECK(json_array_size(shapes) >= 5 && steps >= 2, "fixture: %zu shapes, %d steps",
	      json_array_size(shapes), steps);
	for (size_t i = 0; i < json_array_size(shapes); i++) {
		size_t rows = (size_t)json_integer_value(json_array_get(json_array_get(shapes, i), 0));
		size_t cols = (size_t)json_integer_value(json_array_get(json_array_get(shapes, i), 1));
		size_t n = rows * cols, s = rows < cols ? rows : cols;
		float *p = malloc(n * 4), *g = malloc(n * 4), *got = malloc(n * 4);
		double *want = malloc(n * 8), *bf = malloc(n * 8), *tol = malloc(n * 8), worst = 0;
		cl_mem mp, mb = tn_buf(NULL, n), mg = tn_buf(NULL, n), m[5];
		clp_muon_work w;
		clp_muon_hp hp = {0, (float)json_number_value(json_object_get(hpj, "weight_decay")),
				  (float)json_number_value(json_object_get(hpj, "momentum")),
				  (int)json_integer_value(json_array_get(json_object_get(fx, "nesterov"), i)),
				  5};
		double lr = json_number_value(json_object_get(hpj, "lr"));
		json_t *t64 = json_object_get(fx, "torch_fp64"), *t32 = json_object_get(fx, "torch");
		char what[96];

		get_arr(json_array_get(json_object_get(fx, "params0"), i), p, NULL, n);
		mp = tn_buf(p, n);
		m[0] = tn_buf(NULL, n), m[1] = tn_buf(NULL, n), m[2] = tn_buf(NULL, s * s);
		m[3] = tn_buf(NULL, s * s), m[4] = tn_buf(NULL, 1);
		w = (clp_muon_work){clp_buf_at(m[0], 0), clp_buf_at(m[1], 0), clp_buf_at(m[2], 0),
				    clp_buf_at(m[3], 0), clp_buf_at(m[4], 0)};
		for (int t = 0; t < steps; t++) {
			get_arr(json_array_get(json_array_get(json_object_get(fx, "grads"), i), t), g,
				NULL, n);
			CHECK_OK(clp_cl_write(ctx, mg, 0, n * 4, g));
			hp.lr = (float)(lr * (t + 1) / steps);
			CHECK_OK(clp_muon_update(ctx, clp_buf_at(mp, 0), clp_buf_at(mb, 0),
						 clp_buf_at(mg, 0), rows, cols, &hp,
						 clp_buf_at(NULL, 0), 1.0f, &w));
		}
		snprintf(what, sizeof(what), "%zux%zu nesterov=%d vs torch fp64: params", rows, cols,
			 hp.nesterov);
		tn_get(mp, 0, got, n);
		get_arr(json_array_get(json_object_get(t64, "params"), i), NULL, want, n);
		th_close(what, got, want, n, 5e-7, 0);
		get_arr(json_array_get(json_object_get(t32, "params"), i), NULL, bf, n);
		for (size_t j = 0; j < n; j++)
			worst = fmax(worst, fabs(bf[j] - want[j]));
		for (size_t j = 0; j < n; j++)
			tol[j] = 2 * worst + 1e-6;
		snprintf(what, sizeof(what), "%zux%zu vs torch as shipped (bf16, its error %.2g)",
			 rows, cols, worst);
		th_close_tol(what, got, bf, tol, n);
		snprintf(what, sizeof(what), "%zux%zu nesterov=%d vs torch fp64: momentum", rows,
			 cols, hp.nesterov);
		tn_get(mb, 0, got, n);
		get_arr(json_array_get(json_object_get(t64, "momentum"), i), NULL, want, n);
		th_close(what, got, want, n, 5e-7, 0);
		for (int k = 0; k < 5; k++)
			clReleaseMemObject(m[k]);
		clReleaseMemObject(mp), clReleaseMemObject(mb), clReleaseMemObject(mg);
		free(p), free(g), free(got), free(want), free(bf), free(tol);
	}
	json_decref(fx);
}

TH_MAIN(TH_TEST(test_against_torch))
