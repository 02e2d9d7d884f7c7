/* The cost of an optimizer's periodic work as the PipeFisher pass's items (clp_pf_work_costs,
 * pipefisher.h): Shampoo's statistics, preconditioning and inverse roots, Muon's Newton-Schulz
 * iterations, from the shapes of a transformer block's matrices and each stage's GEMM rate.
 * docs/OPTIMIZERS.md ("An optimizer's work in the bubbles") defines the counts. */
#include <math.h>

#include "engine/pass/pipefisher.h"

/* A transformer block's Shampoo / Muon matrices (clp_exec_muon_takes's roles): q, k, v and the
 * attention output d x d, the MLP's in ff x d and out d x ff. */
#define WORK_NMAT 6

static void block_mats(int d, int ff, double rows[WORK_NMAT], double cols[WORK_NMAT])
{
	for (int i = 0; i < 4; i++)
		rows[i] = cols[i] = d;
	rows[4] = ff, cols[4] = d;
	rows[5] = d, cols[5] = ff;
}

/* Flops of Shampoo's statistics and preconditioning of one a x b matrix in a step: L += x x^T
 * (2 a^2 b), R += x^T x (2 a b^2), u = L_inv x R_inv (2 a^2 b + 2 a b^2). */
static double shampoo_step_flops(double a, double b)
{
	return 4 * a * b * (a + b);
}

/* One inverse 4th root of a d x d statistic: iters coupled Newton iterations of 4 GEMMs (X T,
 * T T, (T T)^2, T^4 M) of 2 d^3 flops (clp_shampoo_root_flops). */
static double root_flops(double d, int iters)
{
	return (double)iters * 4 * 2 * d * d * d;
}

/* SOAP (cl/soap.h, the same counts as clp_soap_step_flops and clp_soap_refresh_flops, which
 * the pass does not link): a step's three two-sided projections and two statistics, and one
 * side's refresh (a q, then the QR's geqr2 and org2r of 4/3 d^3 each). */
static double soap_step_flops(double a, double b)
{
	return 8 * a * b * (a + b);
}

static double soap_refresh_flops(double d)
{
	return 2 * d * d * d + 8.0 / 3.0 * d * d * d;
}

/* One side's refresh of `work`'s (Shampoo's root or SOAP's basis). */
static double side_flops(int work, double d, int iters)
{
	return work == CLP_PF_WORK_SOAP ? soap_refresh_flops(d) : root_flops(d, iters);
}

/* Muon's Newton-Schulz on an a x b matrix, m = min, n = max: ns_steps iterations of A = X X^T
 * (2 m^2 n), B = b A + c A A (2 m^3), X = a X + B X (2 m^2 n). */
static double ns_flops(double a, double b, int ns_steps)
{
	double m = a < b ? a : b, n = a < b ? b : a;

	return (double)ns_steps * (4 * m * m * n + 2 * m * m * m);
}

/* One stage's (or one kind's entry of it) K-FAC times t as the work's, nl layers of wt matrix
 * elements x tokens: seconds a flop at its rate, as one layer's F + B of a micro-batch does
 * 6 wt matrix flops. A kind's entry without F or B times gets none (NAN: the stage's apply). */
static void set_work(double *t, int nl, int delay, double step, double refresh, double wt)
{
	double per = (t[CLP_COST_FWD] + t[CLP_COST_BWD]) / nl / (6 * wt);

	if (isnan(per)) {
		t[CLP_COST_KFAC_CURV_A] = t[CLP_COST_KFAC_CURV_B] = NAN;
		t[CLP_COST_KFAC_PRECOND] = t[CLP_COST_KFAC_INV] = NAN;
		return;
	}
	t[CLP_COST_KFAC_CURV_A] = t[CLP_COST_KFAC_CURV_B] = 0;
	t[CLP_COST_KFAC_PRECOND] = delay ? 0 : nl * step * per;
	t[CLP_COST_KFAC_INV] = delay ? nl * step * per : nl * refresh * per;
}

clp_status clp_pf_work_costs(clp_costs *c, int work, int d, int ff, double tokens, int iters,
			     int ns_steps, int phases)
{
	double rows[WORK_NMAT], cols[WORK_NMAT], w = 0, step = 0, refresh = 0;
	int delay = work == CLP_PF_WORK_MUON_DELAY;
	/* SOAP's refreshes are Shampoo's items with other flops */
	int sides = work == CLP_PF_WORK_SHAMPOO || work == CLP_PF_WORK_SOAP;

	if (!sides && work != CLP_PF_WORK_MUON && !delay)
		return clp_error(CLP_ERR_INVALID, "pipefisher work costs: %d is not Shampoo's (1), "
				 "Muon's (2), delayed Muon's (3) or SOAP's (4)", work);
	if (d < 1 || ff < 1 || !(tokens >= 1) || iters < 0 || iters > 1000 || ns_steps < 0 ||
	    ns_steps > 100 || phases < 0 || phases > 1000)
		return clp_error(CLP_ERR_INVALID, "pipefisher work costs: width %d, MLP width %d, "
				 "%g tokens, %d root iterations, %d Newton-Schulz steps or %d phases "
				 "out of range", d, ff, tokens, iters, ns_steps, phases);
	block_mats(d, ff, rows, cols);
	for (int i = 0; i < WORK_NMAT; i++) {
		w += rows[i] * cols[i];
		if (sides) {
			step += work == CLP_PF_WORK_SOAP ? soap_step_flops(rows[i], cols[i])
							 : shampoo_step_flops(rows[i], cols[i]);
			refresh += side_flops(work, rows[i], iters) + side_flops(work, cols[i], iters);
		} else {
			step += ns_flops(rows[i], cols[i], ns_steps);
		}
	}
	for (int s = 0; s < c->nstages; s++) {
		clp_stage_cost *sc = &c->stages[s];
		int nl = sc->nlayers > 0 ? sc->nlayers : 1;

		set_work(sc->t, nl, delay, step, refresh, w * tokens);
		/* a kind's measured times: at that kind's rate (else the stage's over its speed) */
		for (int k = 0; k < c->nkinds; k++)
			set_work(&c->kind_t[((size_t)k * (size_t)c->nstages + (size_t)s) *
					    CLP_COST_NTIMES],
				 nl, delay, step, refresh, w * tokens);
		if (delay) /* the directions live in the AdamW second moments (opt_bytes) */
			sc->kfac_bytes = 0;
	}
	/* the delayed directions of a layer, fp32: what the exchange of a split sends */
	c->delay_layer_bytes = delay ? (int64_t)(w * 4) : 0;
	c->inv_phases = work == CLP_PF_WORK_SOAP      ? 0 /* a refresh has no phases */
			: work == CLP_PF_WORK_SHAMPOO ? phases
			: delay				? (phases > 0 ? phases : ns_steps)
							: 0;
	c->kfac_nfactors = 0;
	if (delay && step > 0) {
		c->kfac_nfactors = WORK_NMAT; /* each matrix's NS, in block order */
		for (int i = 0; i < WORK_NMAT; i++)
			c->kfac_share[i] = ns_flops(rows[i], cols[i], ns_steps) / step;
	}
	if (sides && refresh > 0) {
		c->kfac_nfactors = 2 * WORK_NMAT; /* each matrix's L then R side, in block order */
		for (int i = 0; i < WORK_NMAT; i++) {
			c->kfac_share[2 * i] = side_flops(work, rows[i], iters) / refresh;
			c->kfac_share[2 * i + 1] = side_flops(work, cols[i], iters) / refresh;
		}
	}
	return CLP_OK;
}
