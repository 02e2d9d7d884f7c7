/* Processor sharing among ranks on one machine's cores (clp_sim_opts.shared_cores).
 *
 * The event loop gives every compute op a fixed length when it starts. Under processor sharing
 * an op's length depends on how many others run beside it until it ends, so the simulation is
 * solved as a fixed point instead: run with a factor per compute op (1 at first), measure the
 * work each op received over its simulated interval (clp_shared_cores_work: the integral of
 * min(1, cores / running)), and set its factor to its length over that work, i.e. to the slow
 * down it met; repeat (halfway, which damps the back-and-forth between ops that trade places)
 * until no factor moves by more than 1e-6 relative, at most SHARED_ROUNDS rounds. At the fixed
 * point each op's simulated interval holds exactly its solo time of work, which is the
 * definition of its end under processor sharing. The last run, with the trace asked for, is
 * the result; deterministic like every run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/scenario/shared_cores.h"
#include "engine/sim/sim_internal.h"

#define SHARED_ROUNDS 200
#define SHARED_TOL 1e-6

clp_status sim_shared_run(const clp_sched *s, const clp_sim_opts *o, clp_sim_result *res)
{
	int64_t n = 0, g = 0;
	double *scale, *t0, *t1, *work;
	uint8_t *compute;
	clp_sim_opts oo = *o;
	clp_status st = CLP_OK;

	memset(res, 0, sizeof(*res));
	for (int r = 0; r < s->nranks; r++)
		n += s->ranks[r].nops;
	scale = malloc((size_t)(n + 1) * sizeof(*scale));
	t0 = malloc((size_t)(n + 1) * sizeof(*t0));
	t1 = malloc((size_t)(n + 1) * sizeof(*t1));
	work = malloc((size_t)(n + 1) * sizeof(*work));
	compute = malloc((size_t)(n + 1));
	if (!scale || !t0 || !t1 || !work || !compute) {
		st = clp_error(CLP_ERR_NOMEM, "simulator: out of host memory (shared cores, %lld ops)",
			       (long long)n);
		goto out;
	}
	for (int r = 0; r < s->nranks; r++)
		for (int i = 0; i < s->ranks[r].nops; i++, g++) {
			scale[g] = 1;
			compute[g] = (uint8_t)clp_op_is_compute(s->ranks[r].ops[i].kind);
		}
	oo.op_t0 = t0;
	oo.op_t1 = t1;
	oo.trace_limit = 0; /* the rounds keep summaries; the last run keeps what was asked */
	for (int round = 0; round < SHARED_ROUNDS; round++) {
		double moved = 0;

		st = sim_run_scaled(s, &oo, scale, res);
		clp_sim_result_free(res);
		if (st != CLP_OK)
			goto out;
		for (g = 0; g < n; g++)
			if (!compute[g])
				t0[g] = t1[g] = -1; /* transfers and collectives use no core */
		st = clp_shared_cores_work((size_t)n, t0, t1, o->shared_cores, work);
		if (st != CLP_OK)
			goto out;
		for (g = 0; g < n; g++) {
			double want, m;

			if (!compute[g] || !(t1[g] > t0[g]) || !(work[g] > 0))
				continue;
			want = (t1[g] - t0[g]) / work[g];
			want = 0.5 * (scale[g] + want);
			m = fabs(want - scale[g]) / scale[g];
			if (m > moved)
				moved = m;
			scale[g] = want;
		}
		if (moved < SHARED_TOL)
			break;
	}
	st = sim_run_scaled(s, o, scale, res);
out:
	free(scale);
	free(t0);
	free(t1);
	free(work);
	free(compute);
	return st;
}
