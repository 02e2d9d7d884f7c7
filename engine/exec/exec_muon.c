/* Muon in the executor (exec_muon.h), an optimizer of the executor's interface (exec_optim.h)
 * on its services (exec_env.h). Its state is one scratch set sized for the largest Muon matrix
 * of the rank's stages (the stages run their updates one after another on the rank's queue);
 * the momentum lives in the stages' AdamW first moments. Each OPT_STEP updates every local copy
 * of its stage tensor by tensor, in the table's order: Muon for the layers' weight matrices,
 * AdamW for the rest, then refreshes the stage's 16-bit value copy. The order and the kernels
 * are those of one device, so a pipeline with the same gradients computes the same bits.
 *
 * Early placement (docs/OPTIMIZERS.md, "Where Muon's work runs"): an OPT_PREP of the stage
 * (clp_sched_place_prep), where its gradients are final, computes each matrix's orthogonalised
 * update (clp_muon_orthogonalize) into the matrix's AdamW second moment, unused by Muon, and
 * leaves the momentum as it is; the OPT_STEP then writes the momentum and the weights
 * (clp_muon_commit) and zeroes the second moment again. That is clp_muon_update's arithmetic
 * exactly when the clipping factor is 1: with a factor below 1 (known only after the norm)
 * the OPT_STEP throws the early result away and runs clp_muon_update. The session's OPT_PREPs
 * all fill other ranks' cool-down (CLP_OPF_BUBBLE: there a wasted orthogonalisation costs only
 * idle device time, and the recomputation is what the step cost before), so they run after a
 * clipped step too; an unmarked one (a loaded schedule's) waits for an unclipped step
 * (clipping runs in streaks). A non-finite step changes nothing either way (the kernels read
 * the flag).
 *
 * One-step-delayed (muon.delay; docs/OPTIMIZERS.md, "One-step-delayed Muon"): the second moment
 * v of a Muon matrix holds the pending direction P between steps; step t's OPT_STEP applies
 * D = NS(P) (clp_muon_ns_phase, as many phases as are not done yet) and stores step t's
 * direction as the next P (clp_muon_delayed_commit). D depends on nothing of step t, so an
 * OPT_PREP anywhere in the step (clp_sched_place_prep_delayed: before the rank's first wait)
 * or the scheduled items (KFAC_INV of a layer's matrix, one iteration or all) may compute it
 * earlier; phase[k][i] counts the phases done in this step, so none runs twice. */
#include <stdlib.h>

#include "engine/exec/exec_env.h"
#include "engine/exec/exec_muon.h"

#include "cl/ops.h"

typedef struct mst {
	clp_exec_muon_opts o;
	cl_mem mem[5]; /* x, x2, ga, gb, nrm */
	clp_muon_work w;
	unsigned char *early; /* per local stage: its updates wait in the second moments */
	int clipped;          /* the last step's gradients were clipped */
	int nloc;             /* local stages */
	int **phase;          /* delay: per local stage and tensor, NS phases of v done this step */
} mst;

/* Whether a stage's tensor i is orthogonalised early: a trained Muon matrix. */
static int early_takes(clp_stage *st, const clp_tensor_desc *t, int i)
{
	return clp_exec_muon_takes(t) && clp_stage_trained(st, i);
}

/* Phases of tensor i of local stage k's D = NS(P) up to `upto` (clp_muon_phases: all). */
static clp_status delayed_phases(clp_exec *e, mst *m, int k, int i, int upto)
{
	clp_stage *st = clp_exec_stage(e, k, NULL);
	const clp_tensor_desc *t = &clp_stage_table(st)->tensors[i];

	for (; m->phase[k][i] < upto; m->phase[k][i]++)
		CLP_TRY(clp_muon_ns_phase(clp_exec_ctx(e), clp_stage_tensor(st, CLP_ST_ADAM_V, i),
					  t->shape[0], t->shape[1], m->o.ns_steps, m->phase[k][i],
					  &m->w));
	return CLP_OK;
}

/* Delayed Muon's early work of op: an OPT_PREP (every matrix of op->stage, whole) or an item
 * KFAC_INV(stage, layer, factor, mb): model layer op->layer's (block layer + 1's) Muon matrix
 * `factor` (1.. in table order; 0: all of them), Newton-Schulz phase op->mb (0 with the
 * normalisation; -1: every phase left), on every local copy of the stage. A phase runs after
 * the ones before it, once a step. */
static clp_status delayed_work(clp_exec *e, mst *m, const clp_op *op)
{
	const int total = clp_muon_phases(m->o.ns_steps), item = op->kind != CLP_OP_OPT_PREP;
	char what[160];
	int found = 0;

	clp_op_describe(op, what, sizeof(what));
	if (item && op->mb >= total)
		return clp_error(CLP_ERR_INVALID, "rank %d: %s: Muon has %d Newton-Schulz phases "
				 "(muon.ns_steps %d)", clp_exec_rank(e), what, total, m->o.ns_steps);
	for (int k = 0; k < m->nloc; k++) {
		clp_stage *st;
		const clp_param_table *tab;
		int n = 0;

		if (clp_exec_stage_id(e, k) != op->stage)
			continue;
		st = clp_exec_stage(e, k, NULL);
		tab = clp_stage_table(st);
		for (int i = 0; i < tab->ntensors; i++) {
			if (!early_takes(st, &tab->tensors[i], i) ||
			    (item && tab->tensors[i].block - 1 != op->layer))
				continue;
			n++;
			if (item && op->factor && op->factor != n)
				continue;
			found++;
			if (!item || op->mb < 0) {
				CLP_TRY(delayed_phases(e, m, k, i, total));
				continue;
			}
			if (m->phase[k][i] != op->mb)
				return clp_error(CLP_ERR_STATE, "rank %d: %s: %s's phase %d runs after "
						 "phases 0..%d and once a step (%d done)",
						 clp_exec_rank(e), what, tab->tensors[i].name, op->mb,
						 op->mb - 1, m->phase[k][i]);
			CLP_TRY(delayed_phases(e, m, k, i, op->mb + 1));
		}
	}
	if (item && !found)
		return clp_error(CLP_ERR_INVALID, "rank %d: %s: no Muon matrix %d of layer %d on the "
				 "rank's copies of stage %d", clp_exec_rank(e), what, op->factor,
				 op->layer, op->stage);
	return CLP_OK;
}

/* A scheduled item (the PipeFisher pass's CLP_PF_WORK_MUON_DELAY): KFAC_INV as delayed_work
 * reads it; KFAC_PRECOND is no work of Muon's. Only with muon.delay. */
static clp_status muon_item(clp_exec *e, void *state, const clp_op *op)
{
	mst *m = state;
	char what[160];

	if (op->kind == CLP_OP_KFAC_PRECOND)
		return CLP_OK;
	clp_op_describe(op, what, sizeof(what));
	if (!m->o.delay || op->kind != CLP_OP_KFAC_INV)
		return clp_error(CLP_ERR_INVALID, "rank %d: %s: Muon's scheduled items are the "
				 "one-step-delayed Newton-Schulz (KFAC_INV with muon.delay = true)%s",
				 clp_exec_rank(e), what, m->o.delay ? "" : "; muon.delay is false");
	return delayed_work(e, m, op);
}

static clp_status muon_prep(clp_exec *e, void *state, const clp_op *op, const void *settings)
{
	mst *m = state;
	clp_cl_ctx *ctx = clp_exec_ctx(e);
	const clp_muon_hp hp = {0, 0, m->o.momentum, m->o.nesterov, m->o.ns_steps};
	clp_exec_counts c;

	(void)settings;
	if (m->o.delay)
		return delayed_work(e, m, op);
	clp_exec_step_counts(e, &c);
	/* with clipping on, the early result is wasted in a clipped step: run it where it costs
	 * only idle time (a bubble), elsewhere only when the last step was not clipped */
	if (c.max_norm > 0 && m->clipped && !(op->flags & CLP_OPF_BUBBLE))
		return CLP_OK;
	for (int k = 0; k < clp_exec_nstages(e); k++) {
		clp_stage *st;
		const clp_param_table *tab;

		if (clp_exec_stage_id(e, k) != op->stage)
			continue;
		st = clp_exec_stage(e, k, NULL);
		tab = clp_stage_table(st);
		for (int i = 0; i < tab->ntensors; i++)
			if (early_takes(st, &tab->tensors[i], i))
				CLP_TRY(clp_muon_orthogonalize(
					ctx, clp_stage_tensor(st, CLP_ST_ADAM_M, i),
					clp_stage_tensor(st, CLP_ST_GRAD, i),
					clp_stage_tensor(st, CLP_ST_ADAM_V, i), tab->tensors[i].shape[0],
					tab->tensors[i].shape[1], &hp, 1.0f / c.loss_scale, &m->w));
		m->early[k] = 1;
	}
	return CLP_OK;
}

int clp_exec_muon_takes(const clp_tensor_desc *t)
{
	if (t->ndim != 2)
		return 0;
	switch (t->role) {
	case CLP_R_QKV_W:
	case CLP_R_ATT_O_W:
	case CLP_R_FC_W:
	case CLP_R_PROJ_W:
		return 1;
	default:
		return 0;
	}
}

double clp_exec_muon_layer_work(const clp_model_config *m, size_t tokens, int ns_steps)
{
	clp_param_table t;
	double ns = 0, w = 0;

	if (!tokens || m->n_layer < 1 || clp_param_table_build(m, 1, 1, &t) != CLP_OK)
		return 0;
	for (int i = 0; i < t.ntensors; i++) {
		const clp_tensor_desc *d = &t.tensors[i];
		double a = (double)d->shape[0], b = (double)d->shape[1];
		double lo = a < b ? a : b, hi = a < b ? b : a;

		if (d->ndim == 2)
			w += a * b;
		if (clp_exec_muon_takes(d))
			ns += ns_steps * (4 * lo * lo * hi + 2 * lo * lo * lo);
	}
	clp_param_table_free(&t);
	return w > 0 ? ns / (6 * w * (double)tokens) : 0;
}

static clp_status muon_stage_step(clp_exec *e, void *state, int stage, const void *settings)
{
	mst *m = state;
	const clp_exec_muon_step *set = settings;
	clp_cl_ctx *ctx = clp_exec_ctx(e);
	clp_exec_counts c;
	float clip = 1;
	int nonfinite = 0, fits;

	clp_exec_step_counts(e, &c);
	clp_exec_step_clip(e, &clip, &nonfinite);
	/* the early directions are the step's when nothing was clipped (a non-finite step changes
	 * nothing either way) */
	fits = nonfinite || clip == 1.0f;
	m->clipped = !nonfinite && clip != 1.0f;
	for (int k = 0; k < clp_exec_nstages(e); k++) {
		clp_stage *st;
		const clp_param_table *tab;
		clp_buf stats;
		clp_muon_hp hp = {set->lr, set->adamw.weight_decay, m->o.momentum, m->o.nesterov,
				  m->o.ns_steps};

		if (clp_exec_stage_id(e, k) != stage)
			continue;
		st = clp_exec_stage(e, k, NULL);
		tab = clp_stage_table(st);
		stats = clp_stage_stats(st);
		for (int i = 0; i < tab->ntensors; i++) {
			const clp_tensor_desc *t = &tab->tensors[i];
			clp_buf p = clp_stage_tensor(st, CLP_ST_PARAM, i);
			clp_buf mom = clp_stage_tensor(st, CLP_ST_ADAM_M, i);
			clp_buf g = clp_stage_tensor(st, CLP_ST_GRAD, i);
			clp_buf v = clp_stage_tensor(st, CLP_ST_ADAM_V, i);
			int early = m->early[k] && early_takes(st, t, i);

			if (!clp_exec_muon_takes(t)) {
				CLP_TRY(clp_nn_adamw_update(ctx, p, mom, v, g, t->numel, &set->adamw,
							    t->decay, stats, 1.0f / c.loss_scale));
				continue;
			}
			if (m->o.delay) { /* D = NS(P) (what is left of it), then the next P */
				if (!clp_stage_trained(st, i))
					continue;
				CLP_TRY(delayed_phases(e, m, k, i, clp_muon_phases(m->o.ns_steps)));
				CLP_TRY(clp_muon_delayed_commit(ctx, p, mom, g, v, t->shape[0],
								t->shape[1], &hp, stats,
								1.0f / c.loss_scale, nonfinite));
				m->phase[k][i] = 0;
				continue;
			}
			if (early && fits)
				CLP_TRY(clp_muon_commit(ctx, p, mom, g, v, t->shape[0], t->shape[1], &hp,
							stats, 1.0f / c.loss_scale, &m->w));
			else
				CLP_TRY(clp_muon_update(ctx, p, mom, g, t->shape[0], t->shape[1], &hp,
							stats, 1.0f / c.loss_scale, &m->w));
			if (early) /* Muon's second moment stays zero (checkpoints) */
				CLP_TRY(clp_cl_fill(ctx, v, 0.0f, t->numel));
		}
		m->early[k] = 0;
		CLP_TRY(clp_stage_refresh_values(st));
	}
	return CLP_OK;
}

static void muon_free(clp_exec *e, void *state)
{
	mst *m = state;

	(void)e;
	if (!m)
		return;
	for (int i = 0; i < 5; i++)
		if (m->mem[i])
			clReleaseMemObject(m->mem[i]);
	for (int k = 0; m->phase && k < m->nloc; k++)
		free(m->phase[k]);
	free(m->phase);
	free(m->early);
	free(m);
}

static const clp_exec_optim exec_muon_optim = {
	.name = "Muon",
	.dataflow = 1,
	.stage_step = muon_stage_step,
	.prep = muon_prep,
	.item = muon_item,
	.free = muon_free,
};

/* The scratch's sizes in floats for a rank's tables: n[0..4] (x, x2, gram, poly, norm). */
static void scratch_sizes(const clp_param_table *const *tabs, int nt, size_t n[5])
{
	size_t big = 1, gram = 1;

	for (int k = 0; k < nt; k++)
		for (int i = 0; i < tabs[k]->ntensors; i++) {
			const clp_tensor_desc *t = &tabs[k]->tensors[i];
			size_t s = t->shape[0] < t->shape[1] ? t->shape[0] : t->shape[1];

			if (!clp_exec_muon_takes(t))
				continue;
			if (t->numel > big)
				big = t->numel;
			if (s * s > gram)
				gram = s * s;
		}
	n[0] = n[1] = big, n[2] = n[3] = gram, n[4] = 1;
}

int64_t clp_exec_muon_bytes(const clp_param_table *const *tabs, int nt)
{
	size_t n[5];
	int64_t b = 0;

	scratch_sizes(tabs, nt, n);
	for (int i = 0; i < 5; i++)
		b += (int64_t)(n[i] * sizeof(float));
	return b;
}

int64_t clp_exec_muon_device_bytes(const clp_exec *e)
{
	const mst *m = clp_exec_optim_state(e);
	int64_t b = 0;

	if (clp_exec_optim_ops(e) != &exec_muon_optim || !m)
		return 0;
	for (int i = 0; i < 5; i++) {
		int64_t sz = clp_cl_buffer_bytes(m->mem[i]);

		if (sz < 0)
			return 0;
		b += sz;
	}
	return b;
}

clp_status clp_exec_muon(clp_exec *e, const clp_exec_muon_opts *o)
{
	static const char *const names[5] = {"muon x", "muon x2", "muon gram", "muon poly",
					     "muon norm"};
	clp_cl_ctx *ctx = clp_exec_ctx(e);
	const int ns = clp_exec_nstages(e);
	const clp_param_table **tabs;
	size_t n[5];
	mst *m;

	if (!(o->momentum >= 0.0f && o->momentum < 1.0f) || o->ns_steps < 0 || o->ns_steps >= 100)
		return clp_error(CLP_ERR_INVALID, "muon: momentum %g must be in [0, 1) and "
				 "ns_steps %d in 0..99", o->momentum, o->ns_steps);
	if (!(tabs = calloc((size_t)ns + 1, sizeof(*tabs))))
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	for (int k = 0; k < ns; k++)
		tabs[k] = clp_stage_table(clp_exec_stage(e, k, NULL));
	scratch_sizes(tabs, ns, n);
	free(tabs);
	if (!(m = calloc(1, sizeof(*m))))
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	m->o = *o;
	m->nloc = ns;
	if (!(m->early = calloc((size_t)ns + 1, 1)) ||
	    !(m->phase = calloc((size_t)ns + 1, sizeof(*m->phase)))) {
		muon_free(e, m);
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	}
	for (int k = 0; k < ns; k++) {
		const clp_param_table *t = clp_stage_table(clp_exec_stage(e, k, NULL));

		if (!(m->phase[k] = calloc((size_t)t->ntensors + 1, sizeof(int)))) {
			muon_free(e, m);
			return clp_error(CLP_ERR_NOMEM, "out of host memory");
		}
	}
	for (int i = 0; i < 5; i++) {
		clp_status s = clp_cl_buffer(ctx, n[i] * sizeof(float), names[i], &m->mem[i]);

		if (s != CLP_OK) {
			muon_free(e, m);
			return s;
		}
	}
	m->w = (clp_muon_work){clp_buf_at(m->mem[0], 0), clp_buf_at(m->mem[1], 0),
			       clp_buf_at(m->mem[2], 0), clp_buf_at(m->mem[3], 0),
			       clp_buf_at(m->mem[4], 0)};
	return clp_exec_set_optim(e, &exec_muon_optim, m);
}
