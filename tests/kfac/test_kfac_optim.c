/* The K-FAC optimizer on one device: one step of gpt2, llama and bert against a host reference
 * built from the recorded layer inputs, output gradients and raw gradients (factors, damping,
 * inverses in double, preconditioning, KL clip, SGD; AdamW for the other parameters); the cycle
 * rule (which inverse preconditions when); deferred factors equal immediate ones bitwise and
 * their copies are recycled within max_kept; bad options. */
#include <math.h>

#include "cl/ref/kfac_ref.h"
#include "cl/ref/nn_ref.h"
#include "tests/kfac/kfac_rig.h"

static int kfac_role(clp_role r)
{
	return r == CLP_R_QKV_W || r == CLP_R_QKV_B || r == CLP_R_ATT_O_W || r == CLP_R_ATT_O_B ||
	       r == CLP_R_FC_W || r == CLP_R_FC_B || r == CLP_R_PROJ_W || r == CLP_R_PROJ_B;
}

/* A (I,I) or B part p from the recorded rows, as the cycle's first step defines them. */
static void ref_factor(const rig *r, int li, int lin, int part, double *F)
{
	clp_stage_linear_info in;
	double rows = (double)(r->N * RIG_M), w;
	size_t o0 = 0, d;

	clp_stage_linear_get(r->st, (clp_stage_linear)lin, &in);
	for (int p = 0; p < part; p++)
		o0 += in.part[p];
	d = part < 0 ? in.I : in.part[part];
	w = part < 0 ? 1.0 / rows : (double)r->count * (double)r->count / rows;
	for (int m = 0; m < RIG_M; m++) {
		if (part < 0)
			clp_ref_kfac_factor(F, r->in[m][li][lin], in.I, r->N, d, w, m ? 1.0 : 0.0);
		else
			clp_ref_kfac_factor(F, r->dy[m][li][lin] + o0, in.O, r->N, d, w,
					    m ? 1.0 : 0.0);
	}
}

/* The damped inverse of a factor F (d,d) with damping damp (or identity when flagged). */
static void ref_inverse(double *inv, double *F, size_t d, double damp, int flag)
{
	for (size_t i = 0; i < d; i++)
		F[i * d + i] += damp;
	if (flag) {
		memset(inv, 0, d * d * sizeof(double));
		for (size_t i = 0; i < d; i++)
			inv[i * d + i] = 1;
		return;
	}
	CHECK(clp_ref_spd_inverse(inv, F, d) == 0, "reference inverse failed");
}

static double ddot(const double *a, const float *b, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* Reference preconditioned gradient of one linear: P (unit layout) and pb; returns p . g. */
static double ref_linear(rig *r, int li, int lin, const float *G, const float *gb, double *P,
			 double *pb, double lambda)
{
	clp_stage_linear_info in;
	double *A, *Ai, *Bf[3], *Bi[3], damp[3], vg;
	const double *Bc[3];
	size_t o0 = 0;
	int flag;

	clp_stage_linear_get(r->st, (clp_stage_linear)lin, &in);
	A = malloc(in.I * in.I * 8);
	Ai = malloc(in.I * in.I * 8);
	ref_factor(r, li, lin, -1, A);
	for (int p = 0; p < in.nparts; p++) {
		Bf[p] = malloc(in.part[p] * in.part[p] * 8);
		Bi[p] = malloc(in.part[p] * in.part[p] * 8);
		ref_factor(r, li, lin, p, Bf[p]);
		Bc[p] = Bf[p];
	}
	flag = clp_ref_kfac_damping(damp, A, in.I, Bc, in.part, in.nparts, lambda);
	ref_inverse(Ai, A, in.I, damp[0], flag);
	for (int p = 0; p < in.nparts; p++) {
		size_t op = in.part[p], at = in.in_out ? o0 : o0 * in.I;
		size_t ld = in.in_out ? in.O : in.I;
		double *Gd = malloc(in.O * in.I * 8), *Pp = malloc(op * in.I * 8);

		ref_inverse(Bi[p], Bf[p], op, damp[1], flag);
		for (size_t i = 0; i < in.O * in.I; i++)
			Gd[i] = G[i];
		clp_ref_kfac_precondition(Pp, Gd + at, ld, Bi[p], Ai, op, in.I, in.in_out);
		/* scatter the part's dense result into the unit layout */
		for (size_t a = 0; a < (in.in_out ? in.I : op); a++)
			for (size_t b = 0; b < (in.in_out ? op : in.I); b++)
				P[at + a * ld + b] = Pp[a * (in.in_out ? op : in.I) + b];
		for (size_t i = 0; gb && i < op; i++) {
			double s = 0;

			for (size_t j = 0; j < op; j++)
				s += Bi[p][i * op + j] * gb[o0 + j];
			pb[o0 + i] = s;
		}
		o0 += op;
		free(Gd);
		free(Pp);
		free(Bf[p]);
		free(Bi[p]);
	}
	vg = ddot(P, G, in.O * in.I) + (gb ? ddot(pb, gb, in.O) : 0);
	free(A);
	free(Ai);
	return vg;
}

static void one_step(clp_preset preset)
{
	const double lambda = 0.05, kl = 1e-6, mom = 0.9;
	const float lr = 0.05f, max_norm = 0.5f;
	clp_nn_adamw_hp hp = {2e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};
	clp_kfac_opts o;
	const clp_param_table *t;
	float **before, **grad, stats[4], **after;
	double *P[RIG_LAYERS][CLP_LIN_COUNT], *pb[RIG_LAYERS][CLP_LIN_COUNT], vg = 0, nu, s;
	int collect = 0;
	rig r;

	if (!rig_open(&r, preset, 3))
		return;
	clp_kfac_opts_default(&o);
	o.damping = lambda;
	o.interval = 1;
	o.momentum = mom;
	o.kl_clip = kl;
	CHECK_OK(clp_kfac_opt_create(&r.k, r.st, &o));
	if (!r.k)
		goto out;
	clp_stage_set_tap(r.st, rig_tap, &r);
	CHECK_OK(clp_stage_zero_grads(r.st));
	CHECK_OK(clp_kfac_opt_step_begin(r.k, 0, (double)r.count, (double)(r.N * RIG_M), &collect));
	CHECK(collect, "step 0 must collect factors");
	for (int m = 0; m < RIG_M; m++)
		rig_fwd_bwd(&r, 0, m);
	CHECK_OK(clp_stage_grad_stats(r.st, clp_stage_stats(r.st), max_norm));
	t = clp_stage_table(r.st);
	before = calloc((size_t)t->ntensors, sizeof(float *));
	after = calloc((size_t)t->ntensors, sizeof(float *));
	grad = calloc((size_t)t->ntensors, sizeof(float *));
	for (int i = 0; i < t->ntensors; i++) {
		before[i] = rig_read(clp_stage_tensor(r.st, CLP_ST_PARAM, i), t->tensors[i].numel);
		grad[i] = rig_read(clp_stage_tensor(r.st, CLP_ST_GRAD, i), t->tensors[i].numel);
	}
	{
		float *sv = rig_read(clp_stage_stats(r.st), 4);

		memcpy(stats, sv, sizeof(stats));
		free(sv);
	}
	s = stats[CLP_NN_GSTAT_SCALE];
	CHECK(s < 1 && s > 0, "the test wants gradient clipping active (factor %g)", s);
	/* reference preconditioned gradients per linear, from the raw unit gradients */
	for (int li = 0; li < RIG_LAYERS; li++)
		for (int lin = 0; lin < CLP_LIN_COUNT; lin++) {
			clp_stage_linear_info in;
			clp_buf gw, gbb;
			float *G, *gb = NULL;

			clp_stage_linear_get(r.st, (clp_stage_linear)lin, &in);
			gw = clp_stage_linear_tensor(r.st, CLP_ST_GRAD, li, (clp_stage_linear)lin, 0);
			gbb = clp_stage_linear_tensor(r.st, CLP_ST_GRAD, li, (clp_stage_linear)lin, 1);
			G = rig_read(gw, in.O * in.I);
			if (gbb.mem)
				gb = rig_read(gbb, in.O);
			P[li][lin] = malloc(in.O * in.I * 8);
			pb[li][lin] = gb ? malloc(in.O * 8) : NULL;
			vg += ref_linear(&r, li, lin, G, gb, P[li][lin], pb[li][lin], lambda);
			free(G);
			free(gb);
		}
	nu = fmin(1.0, sqrt(kl / (fabs(vg) * lr * lr * s * s)));
	CHECK(nu < 1, "the test wants KL clipping active (nu %g)", nu);
	/* the device step */
	CHECK_OK(clp_kfac_opt_invert(r.k, -1, -1));
	CHECK_OK(clp_kfac_opt_activate(r.k));
	CHECK_OK(clp_kfac_opt_precondition(r.k));
	CHECK_OK(clp_kfac_opt_update(r.k, &hp, lr, clp_stage_stats(r.st)));
	CHECK_OK(clp_kfac_opt_check(r.k));
	for (int i = 0; i < t->ntensors; i++)
		after[i] = rig_read(clp_stage_tensor(r.st, CLP_ST_PARAM, i), t->tensors[i].numel);
	/* K-FAC layers: SGD from zero momentum, p' = p (1 - lr wd) - lr s nu P */
	for (int li = 0; li < RIG_LAYERS; li++)
		for (int lin = 0; lin < CLP_LIN_COUNT; lin++)
			for (int bias = 0; bias < 2; bias++) {
				clp_stage_linear_info in;
				clp_buf pw = clp_stage_linear_tensor(r.st, CLP_ST_PARAM, li,
								     (clp_stage_linear)lin, bias);
				size_t n;
				float *now, *was;
				double *want;
				const double *src = bias ? pb[li][lin] : P[li][lin];
				char what[64];

				if (!pw.mem)
					continue;
				clp_stage_linear_get(r.st, (clp_stage_linear)lin, &in);
				n = bias ? in.O : in.O * in.I;
				now = rig_read(pw, n);
				/* the unit's values before, gathered from its tensors */
				was = malloc(n * 4);
				for (int i = 0; i < t->ntensors; i++) {
					clp_buf b = clp_stage_tensor(r.st, CLP_ST_PARAM, i);

					if (b.mem == pw.mem && b.off >= pw.off && b.off < pw.off + n)
						memcpy(was + (b.off - pw.off), before[i],
						       t->tensors[i].numel * 4);
				}
				want = malloc(n * 8);
				for (size_t i = 0; i < n; i++)
					want[i] = (double)was[i] * (1 - (bias ? 0.0 : (double)lr * hp.weight_decay)) -
						  lr * s * nu * src[i];
				snprintf(what, sizeof(what), "%s layer %d linear %d %s",
					 clp_preset_name(preset), li, lin, bias ? "bias" : "weight");
				th_close(what, now, want, n, 2e-6, 2e-4);
				free(now);
				free(was);
				free(want);
			}
	/* every other parameter: AdamW with the clip factor */
	for (int i = 0; i < t->ntensors; i++) {
		const clp_tensor_desc *d = &t->tensors[i];
		float *m, *v;
		double *want;

		if (d->block >= 1 && d->block <= RIG_LAYERS && kfac_role(d->role))
			continue;
		m = calloc(d->numel, 4);
		v = calloc(d->numel, 4);
		want = malloc(d->numel * 8);
		clp_ref_adamw(before[i], m, v, grad[i], d->numel, &hp, d->decay, (float)s);
		for (size_t j = 0; j < d->numel; j++)
			want[j] = before[i][j];
		th_close(d->name, after[i], want, d->numel, 1e-6, 1e-5);
		free(m);
		free(v);
		free(want);
	}
	for (int i = 0; i < t->ntensors; i++) {
		free(before[i]);
		free(after[i]);
		free(grad[i]);
	}
	free(before);
	free(after);
	free(grad);
	for (int li = 0; li < RIG_LAYERS; li++)
		for (int lin = 0; lin < CLP_LIN_COUNT; lin++) {
			free(P[li][lin]);
			free(pb[li][lin]);
		}
out:
	rig_close(&r);
}

static void test_step_gpt2(void)
{
	one_step(CLP_PRESET_GPT2);
}

static void test_step_llama(void)
{
	one_step(CLP_PRESET_LLAMA);
}

static void test_step_bert(void)
{
	one_step(CLP_PRESET_BERT);
}

/* Host copy of a device matrix of the optimizer. */
static float *mat(clp_buf b, size_t d)
{
	return rig_read(b, d * d);
}

/* K = 3: step 0 inverts at once (active = next = inv(F0)); steps 1, 2 change nothing; step 3
 * makes inv(F0) (computed in cycle 0) active and computes inv(F3) as next, which becomes active
 * at step 6. Compared bitwise: the same kernels on the same inputs. */
static void test_cycle_rule(void)
{
	clp_kfac_opts o;
	rig r;
	float *inv0 = NULL, *inv3 = NULL, *f0 = NULL, *x;
	size_t d;
	const int layer = 1, f = 1; /* qkv.B of layer 1 */

	if (!rig_open(&r, CLP_PRESET_GPT2, 5))
		return;
	clp_kfac_opts_default(&o);
	o.interval = 3;
	o.damping = 0.05;
	CHECK_OK(clp_kfac_opt_create(&r.k, r.st, &o));
	if (!r.k)
		goto out;
	d = clp_kfac_opt_factor_dim(r.k, f);
	CHECK(!strcmp(clp_kfac_opt_factor_name(r.k, f), "qkv.B") && d == 36, "factor %d is %s (%zu)",
	      f, clp_kfac_opt_factor_name(r.k, f), d);
	for (long step = 0; step <= 6; step++) {
		int collect = 0;

		CHECK_OK(clp_stage_zero_grads(r.st));
		CHECK_OK(clp_kfac_opt_step_begin(r.k, step, (double)r.count,
						 (double)(r.N * RIG_M), &collect));
		CHECK(collect == (step % 3 == 0), "step %ld collect %d", step, collect);
		for (int m = 0; m < RIG_M; m++) {
			r.tok[m][0] = (int32_t)((step * 7 + m) % 23); /* each step a different batch */
			rig_fwd_bwd(&r, (uint32_t)step, m);
		}
		if (collect) {
			CHECK_OK(clp_kfac_opt_invert(r.k, -1, -1));
			if (step == 0)
				CHECK_OK(clp_kfac_opt_activate(r.k));
		}
		x = mat(clp_kfac_opt_inverse(r.k, layer, f, 0), d);
		if (step == 0) {
			inv0 = x;
			f0 = mat(clp_kfac_opt_factor(r.k, layer, f), d);
			continue;
		}
		if (step < 6)
			CHECK(!memcmp(x, inv0, d * d * 4), "step %ld: the active inverse is not the "
			      "one of step 0's factors", step);
		else
			CHECK(!memcmp(x, inv3, d * d * 4), "step 6: the active inverse is not the one "
			      "computed in cycle 1");
		free(x);
		if (step == 2) { /* no collection: the factors stay */
			x = mat(clp_kfac_opt_factor(r.k, layer, f), d);
			CHECK(!memcmp(x, f0, d * d * 4), "a step that does not collect changed a "
			      "factor");
			free(x);
		}
		if (step == 3) {
			int nf = clp_kfac_opt_nfactors(r.k);
			float *whole[16] = {0};

			inv3 = mat(clp_kfac_opt_inverse(r.k, layer, f, 1), d);
			CHECK(memcmp(inv3, inv0, d * d * 4), "cycle 1's inverse equals cycle 0's");
			/* the three phases, interleaved over the layer's factors, equal the whole
			 * inversion bitwise */
			for (int ff = 0; ff < nf && ff < 16; ff++)
				whole[ff] = mat(clp_kfac_opt_inverse(r.k, layer, ff, 1),
						clp_kfac_opt_factor_dim(r.k, ff));
			for (int ph = 0; ph < 3; ph++)
				for (int ff = 0; ff < nf && ff < 16; ff++)
					CHECK_OK(clp_kfac_opt_invert_phase(r.k, layer, ff, ph));
			for (int ff = 0; ff < nf && ff < 16; ff++) {
				size_t df = clp_kfac_opt_factor_dim(r.k, ff);

				x = mat(clp_kfac_opt_inverse(r.k, layer, ff, 1), df);
				CHECK(x && whole[ff] && !memcmp(x, whole[ff], df * df * 4),
				      "factor %d: the inversion in phases differs from the whole", ff);
				free(x);
				free(whole[ff]);
			}
		}
	}
	free(inv0);
	free(inv3);
	free(f0);
out:
	rig_close(&r);
}

/* Deferred factors (the tap keeps inputs and output gradients; A of layer 0 straight from the
 * slot before the backward; the rest accumulated later in micro-batch order) equal the
 * factors the tap accumulates at once, bitwise; copies are recycled; max_kept holds. */
static void deferred(clp_preset preset)
{
	clp_kfac_opts o;
	rig a, b;
	int nf;

	if (!rig_open(&a, preset, 9) || !rig_open(&b, preset, 9)) {
		rig_close(&a);
		return;
	}
	clp_kfac_opts_default(&o);
	o.max_kept = 2;
	o.interval = 1;
	CHECK_OK(clp_kfac_opt_create(&a.k, a.st, &o));
	CHECK_OK(clp_kfac_opt_create(&b.k, b.st, &o));
	if (!a.k || !b.k)
		goto out;
	nf = clp_kfac_opt_nfactors(a.k);
	for (long step = 0; step < 2; step++) { /* the second cycle reuses the freed copies */
		CHECK_OK(clp_kfac_opt_step_begin(a.k, step, (double)a.count, (double)(a.N * RIG_M),
						 NULL));
		CHECK_OK(clp_kfac_opt_step_begin(b.k, step, (double)b.count, (double)(b.N * RIG_M),
						 NULL));
		clp_kfac_opt_defer(b.k, 1);
		CHECK_ERR(clp_kfac_opt_curv_a(a.k, 0, 0, 0), CLP_ERR_STATE, "tap", NULL);
		for (int m = 0; m < RIG_M; m++) {
			clp_stage_mb mb = {0, (uint32_t)step, (uint32_t)m, 7, b.tok[m], b.types[m],
					   b.tg[m], 0};

			rig_fwd_bwd(&a, (uint32_t)step, m);
			CHECK_OK(clp_stage_forward(b.st, &mb, 1.0f / (float)b.count));
			CHECK_OK(clp_kfac_opt_curv_a(b.k, 0, 0, m));
			CHECK_OK(clp_stage_backward(b.st, &mb, 1.0f / (float)b.count));
		}
		for (int li = 0; li < RIG_LAYERS; li++)
			for (int m = 0; m < RIG_M; m++) {
				CHECK_OK(clp_kfac_opt_curv_b_kept(b.k, li, m));
				if (li > 0)
					CHECK_OK(clp_kfac_opt_curv_a_kept(b.k, li, m));
			}
		CHECK_ERR(clp_kfac_opt_curv_a_kept(b.k, 0, 0), CLP_ERR_STATE, "micro-batch 0", NULL);
		for (int l = 0; l < RIG_LAYERS; l++)
			for (int f = 0; f < nf; f++) {
				size_t d = clp_kfac_opt_factor_dim(a.k, f);
				float *fa = mat(clp_kfac_opt_factor(a.k, l, f), d);
				float *fb = mat(clp_kfac_opt_factor(b.k, l, f), d);

				CHECK(!memcmp(fa, fb, d * d * 4), "%s step %ld layer %d factor %s: "
				      "deferred differs from immediate", clp_preset_name(preset), step,
				      l, clp_kfac_opt_factor_name(a.k, f));
				free(fa);
				free(fb);
			}
	}
	/* three micro-batches kept at once is one too many */
	CHECK_OK(clp_kfac_opt_step_begin(b.k, 2, (double)b.count, (double)(b.N * RIG_M), NULL));
	for (int m = 0; m < 3; m++) {
		clp_stage_mb mb = {0, 2, (uint32_t)m, 7, b.tok[m % RIG_M], b.types[m % RIG_M],
				   b.tg[m % RIG_M], 0};

		CHECK_OK(clp_stage_forward(b.st, &mb, 1.0f / (float)b.count));
		if (m < 2)
			CHECK_OK(clp_stage_backward(b.st, &mb, 1.0f / (float)b.count));
		else
			CHECK_ERR(clp_stage_backward(b.st, &mb, 1.0f / (float)b.count), CLP_ERR_NOMEM,
				  "max_kept = 2", NULL);
	}
out:
	rig_close(&a);
	rig_close(&b);
}

static void test_deferred(void)
{
	deferred(CLP_PRESET_GPT2);
	deferred(CLP_PRESET_LLAMA);
}

static void test_bad_options(void)
{
	clp_kfac_opts o;
	rig r;
	clp_kfac_opt *k = NULL;

	if (!rig_open(&r, CLP_PRESET_GPT2, 1))
		return;
	clp_kfac_opts_default(&o);
	o.damping = 0;
	CHECK_ERR(clp_kfac_opt_create(&k, r.st, &o), CLP_ERR_INVALID, "damping 0", NULL);
	clp_kfac_opts_default(&o);
	o.interval = 0;
	CHECK_ERR(clp_kfac_opt_create(&k, r.st, &o), CLP_ERR_INVALID, "interval 0", NULL);
	clp_kfac_opts_default(&o);
	CHECK_OK(clp_kfac_opt_create(&r.k, r.st, &o));
	if (r.k) {
		CHECK_ERR(clp_kfac_opt_invert(r.k, 5, -1), CLP_ERR_INVALID, "layer 5", NULL);
		CHECK_ERR(clp_kfac_opt_invert(r.k, 0, 99), CLP_ERR_INVALID, "factor 99", NULL);
		CHECK_ERR(clp_kfac_opt_invert_phase(r.k, 0, 0, 3), CLP_ERR_INVALID, "phase 3", NULL);
		CHECK_ERR(clp_kfac_opt_invert_phase(r.k, 5, 0, 0), CLP_ERR_INVALID, "layer 5", NULL);
		CHECK_ERR(clp_kfac_opt_step_begin(r.k, 0, 1, 0, NULL), CLP_ERR_INVALID, "0 rows",
			  NULL);
		CHECK_ERR(clp_kfac_opt_curv_a(r.k, 7, 0, 0), CLP_ERR_INVALID, "stage layer 7", NULL);
	}
	rig_close(&r);
}

TH_MAIN(TH_TEST(test_step_gpt2), TH_TEST(test_step_llama), TH_TEST(test_step_bert),
	TH_TEST(test_cycle_rule), TH_TEST(test_deferred), TH_TEST(test_bad_options))
