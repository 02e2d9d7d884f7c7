/* Shampoo in the executor (exec_shampoo.h), an optimizer of the executor's interface
 * (exec_optim.h) on its services (exec_env.h). Its state: per Shampoo matrix of each local
 * stage one device buffer holding L, R, L_inv, R_inv, and one scratch set sized for the largest
 * (the stages run their updates one after another on the rank's queue). Each OPT_STEP updates
 * every local copy of its stage tensor by tensor, in the table's order: Shampoo for the layers'
 * weight matrices, AdamW for the rest, then refreshes the stage's 16-bit value copy. The order
 * and the kernels are those of one device, so a pipeline with the same gradients computes the
 * same bits. With stale roots the schedule's KFAC_INV items refresh the next roots, whole or in
 * phases (clp_shampoo_inv_root_phase: the same kernels interrupted, M kept in the next set and
 * X in a set of its own between phases). */
#include <stdio.h>
#include <stdlib.h>

#include "cl/ops.h"
#include "engine/exec/exec_env.h"
#include "engine/exec/exec_muon.h"
#include "engine/exec/exec_shampoo.h"

#define NSET 4     /* L, R, L_inv, R_inv */
#define NSET_MAX 6 /* and L_next, R_next (opts.stale) */
#define NSET_PH 8  /* and the X of L's and R's roots in phases (a schedule with phases) */

static const char *const set_names[NSET_MAX] = {"L", "R", "L_inv", "R_inv", "L_next", "R_next"};
/* SOAP's sets in the same places: the eigenbases where Shampoo keeps its roots, the stale
 * bases' snapshot in L_next, R_next and the next bases where Shampoo's phases keep X */
static const char *const soap_names[NSET_PH] = {"L",      "R",      "QL",      "QR",
						"L_next", "R_next", "QL_next", "QR_next"};

typedef struct sst {
	clp_exec_shampoo_opts o;
	int soap;         /* the second kind: SOAP (clp_exec_soap), o unused but o.stale = 0 */
	clp_exec_soap_opts so;
	clp_soap_work sw; /* SOAP's scratch (in mem[0..8]) */
	int n;            /* local stages */
	cl_mem **state;   /* [stage][tensor]: L, R, L_inv, R_inv one after another (NULL: AdamW) */
	int *ntensors;
	cl_mem mem[9];    /* scratch: x, u, r[0..5], nrm */
	clp_shampoo_work w;
	float **host;     /* a checkpoint's copies, kept until the next save */
	int nhost;
	int nset;         /* sets a state buffer holds: NSET, NSET_MAX with opts.stale, NSET_PH
			   * with phases */
	/* stale roots (opts.stale): */
	int pf;           /* the schedule holds the refreshes (KFAC_INV items) */
	int K;            /* steps of a cycle */
	long step;        /* this step (0-based) */
	int armed;        /* this cycle's snapshot was taken here (its refreshes are checked) */
	uint8_t **done;   /* [stage][tensor]: bit 1 L_next, bit 2 R_next refreshed this cycle */
	int nph;          /* phases of a root in the schedule (0: whole roots only) */
	int **ph;         /* [stage][2 tensor + side]: the next phase of that root this cycle */
} sst;

/* Offset (floats) of set s in a rows x cols matrix's state buffer: the rows-side sets (L,
 * L_inv, L_next) and the cols-side ones alternate. */
static size_t set_off(size_t rows, size_t cols, int s)
{
	const size_t l = rows * rows, r = cols * cols;

	return (size_t)(s + 1) / 2 * l + (size_t)s / 2 * r;
}

/* SOAP's stale bases: the perm of side `side` (rows then cols cl_uints) after the 8 sets (L,
 * R, QL, QR, L_next, R_next, QL_next, QR_next; Shampoo's X sets' places hold the next bases). */
static size_t perm_off(size_t rows, size_t cols, int side)
{
	return set_off(rows, cols, NSET_PH) + (side ? rows : 0);
}

/* Floats of a rows x cols matrix's state buffer of nset sets. */
static size_t state_floats(const clp_tensor_desc *t, int nset)
{
	return set_off(t->shape[0], t->shape[1], nset);
}

static size_t set_dim(const clp_tensor_desc *t, int s)
{
	return s % 2 == 0 ? t->shape[0] : t->shape[1];
}

double clp_exec_shampoo_layer_work(const clp_model_config *m, size_t tokens, int iters,
				   int interval)
{
	clp_param_table t;
	double work = 0, w = 0;

	if (!tokens || m->n_layer < 1 || interval < 1 ||
	    clp_param_table_build(m, 1, 1, &t) != CLP_OK)
		return 0;
	for (int i = 0; i < t.ntensors; i++) {
		const clp_tensor_desc *d = &t.tensors[i];
		double a = (double)d->shape[0], b = (double)d->shape[1];

		if (d->ndim == 2)
			w += a * b;
		if (!clp_exec_muon_takes(d))
			continue;
		/* L, R += and L_inv x R_inv: 2 a b (a + b) flops each pair */
		work += 4 * a * b * (a + b);
		work += (clp_shampoo_root_flops(d->shape[0], iters) +
			 clp_shampoo_root_flops(d->shape[1], iters)) / interval;
	}
	clp_param_table_free(&t);
	return w > 0 ? work / (6 * w * (double)tokens) : 0;
}

/* Stale roots: side `side` (0 L, 1 R) of local stage k's tensor i, its next set (the
 * statistics of the cycle's first step) replaced by its inverse 4th root (through r[5], which
 * the iteration leaves alone). */
static clp_status refresh_next(clp_exec *e, sst *m, int k, int i, int side)
{
	const clp_tensor_desc *t = &clp_stage_table(clp_exec_stage(e, k, NULL))->tensors[i];
	const size_t r = t->shape[0], c = t->shape[1], d = side ? c : r;
	clp_buf nx = clp_buf_at(m->state[k][i], set_off(r, c, 4 + side));
	clp_cl_ctx *ctx = clp_exec_ctx(e);

	if (m->done[k][i] & (1u << side) || m->ph[k][2 * i + side])
		return clp_error(CLP_ERR_STATE, "rank %d: a second refresh of the %s root of %s in "
				 "one cycle", clp_exec_rank(e), side ? "R" : "L", t->name);
	if (m->soap) { /* the next basis and perm from the snapshot and the active basis */
		cl_mem sm = m->state[k][i];

		CLP_TRY(clp_soap_basis_next(ctx, nx, clp_buf_at(sm, set_off(r, c, 2 + side)), d,
					    clp_buf_at(sm, set_off(r, c, 6 + side)),
					    clp_buf_at(sm, perm_off(r, c, side)), &m->sw));
	} else {
		CLP_TRY(clp_shampoo_inv_root(ctx, nx, d, CLP_SHAMPOO_ROOT, m->o.iters, &m->w,
					     m->w.r[5]));
		CLP_TRY(clp_cl_copy(ctx, nx, m->w.r[5], d * d));
	}
	m->done[k][i] |= (uint8_t)(1u << side);
	return CLP_OK;
}

/* Stale roots in phases: phase `ph` of side `side`'s root of local stage k's tensor i, M in
 * its next set (in place) and X in its X set between phases (clp_shampoo_inv_root_phase: the
 * whole root's kernels in the same order, so the last phase leaves the same bits there). */
static clp_status refresh_phase(clp_exec *e, sst *m, int k, int i, int side, int ph)
{
	const clp_tensor_desc *t = &clp_stage_table(clp_exec_stage(e, k, NULL))->tensors[i];
	const size_t r = t->shape[0], c = t->shape[1], d = side ? c : r;
	int *next = &m->ph[k][2 * i + side];

	if (m->done[k][i] & (1u << side) || ph != *next || ph >= m->nph)
		return clp_error(CLP_ERR_STATE, "rank %d: phase %d of the %s root of %s (in %d "
				 "phases) %s", clp_exec_rank(e), ph, side ? "R" : "L", t->name,
				 m->nph, m->done[k][i] & (1u << side) ? "after its last phase"
					 : "out of order");
	CLP_TRY(clp_shampoo_inv_root_phase(clp_exec_ctx(e),
					   clp_buf_at(m->state[k][i], set_off(r, c, 4 + side)),
					   clp_buf_at(m->state[k][i], set_off(r, c, 6 + side)), d,
					   CLP_SHAMPOO_ROOT, m->o.iters, ph, m->nph, &m->w));
	if (++*next == m->nph) {
		*next = 0;
		m->done[k][i] |= (uint8_t)(1u << side);
	}
	return CLP_OK;
}

/* Stale roots, the cycle's first OPT_STEP: the statistics into the next sets (refreshed there
 * without items). */
static clp_status snapshot(clp_exec *e, sst *m, int k, int i)
{
	const clp_tensor_desc *t = &clp_stage_table(clp_exec_stage(e, k, NULL))->tensors[i];
	const size_t r = t->shape[0], c = t->shape[1];
	clp_cl_ctx *ctx = clp_exec_ctx(e);

	for (int side = 0; side < 2; side++)
		CLP_TRY(clp_cl_copy(ctx, clp_buf_at(m->state[k][i], set_off(r, c, 4 + side)),
				    clp_buf_at(m->state[k][i], set_off(r, c, side)),
				    side ? c * c : r * r));
	m->done[k][i] = 0;
	m->ph[k][2 * i] = m->ph[k][2 * i + 1] = 0;
	m->armed = 1;
	if (!m->pf)
		for (int side = 0; side < 2; side++)
			CLP_TRY(refresh_next(e, m, k, i, side));
	return CLP_OK;
}

/* One SOAP matrix's step (cl/soap.h), its t the optimizer's step count: t = 1 only sets the
 * first eigenbases, the refresh after the update where s = t - 1 is a multiple of frequency. */
static clp_status soap_update(clp_cl_ctx *ctx, const sst *m, const void *settings, clp_buf p,
			      clp_buf mom, clp_buf v, clp_buf g, cl_mem sm, size_t r, size_t c,
			      clp_buf stats, float gscale)
{
	const clp_exec_soap_step *set = settings;
	const long t = set->adamw.step;
	const clp_soap_hp hp = {
		.lr = set->lr,
		.beta1 = m->so.beta1,
		.beta2 = m->so.beta2,
		.shampoo_beta = m->so.shampoo_beta,
		.eps = m->so.eps,
		.weight_decay = set->weight_decay,
		.t = t,
		.correct_bias = m->so.correct_bias,
		/* stale bases: refreshed once a cycle by snapshot() and the items instead */
		.refresh = !m->o.stale && t >= 2 && (t - 1) % m->so.frequency == 0,
		.init_iters = m->so.init_iters,
	};

	return clp_soap_update(ctx, p, mom, v, g, clp_buf_at(sm, set_off(r, c, 0)),
			       clp_buf_at(sm, set_off(r, c, 1)), clp_buf_at(sm, set_off(r, c, 2)),
			       clp_buf_at(sm, set_off(r, c, 3)), r, c, &hp, stats, gscale, &m->sw);
}

static clp_status shampoo_stage_step(clp_exec *e, void *state, int stage, const void *settings)
{
	sst *m = state;
	const clp_exec_shampoo_step *set = settings;
	clp_cl_ctx *ctx = clp_exec_ctx(e);
	clp_exec_counts c;
	clp_shampoo_hp hp = {set->lr,
			     set->adamw.weight_decay,
			     m->o.momentum,
			     set->adamw.step == 1,
			     m->o.stale ? m->step == 0
					: set->adamw.step % m->o.interval == 0 ||
						  set->adamw.step <= m->o.warmup,
			     m->o.iters,
			     m->o.graft,
			     set->adamw.beta2,
			     set->adamw.eps,
			     set->adamw.step,
			     m->o.stat_beta};

	clp_exec_step_counts(e, &c);
	for (int k = 0; k < clp_exec_nstages(e); k++) {
		clp_stage *st;
		const clp_param_table *tab;
		clp_buf stats;

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
			cl_mem sm = m->state[k][i];
			size_t r = t->shape[0], cc = t->shape[1];

			if (!sm) {
				CLP_TRY(clp_nn_adamw_update(ctx, p, mom,
							    clp_stage_tensor(st, CLP_ST_ADAM_V, i), g,
							    t->numel, &set->adamw, t->decay, stats,
							    1.0f / c.loss_scale));
				continue;
			}
			if (m->soap) {
				CLP_TRY(soap_update(ctx, m, settings, p, mom,
						    clp_stage_tensor(st, CLP_ST_ADAM_V, i), g, sm, r, cc,
						    stats, 1.0f / c.loss_scale));
				if (m->o.stale && m->step % m->K == 0)
					CLP_TRY(snapshot(e, m, k, i));
				continue;
			}
			CLP_TRY(clp_shampoo_update(ctx, p, mom, clp_stage_tensor(st, CLP_ST_ADAM_V, i),
						   g, clp_buf_at(sm, set_off(r, cc, 0)),
						   clp_buf_at(sm, set_off(r, cc, 1)),
						   clp_buf_at(sm, set_off(r, cc, 2)),
						   clp_buf_at(sm, set_off(r, cc, 3)), r, cc, &hp, stats,
						   1.0f / c.loss_scale, &m->w));
			if (m->o.stale && m->step % m->K == 0)
				CLP_TRY(snapshot(e, m, k, i));
		}
		CLP_TRY(clp_stage_refresh_values(st));
	}
	return CLP_OK;
}

/* Stale roots: a cycle's start activates the roots its predecessor refreshed (all of them,
 * where this process ran that cycle's start). */
static clp_status shampoo_step_begin(clp_exec *e, void *state, const clp_exec_data *d)
{
	sst *m = state;
	clp_cl_ctx *ctx = clp_exec_ctx(e);

	m->step = (long)d->step;
	if (!m->o.stale || m->step == 0 || m->step % m->K)
		return CLP_OK;
	for (int k = 0; k < m->n; k++) {
		clp_stage *st = clp_exec_stage(e, k, NULL);
		const clp_param_table *tab = clp_stage_table(st);

		for (int i = 0; i < m->ntensors[k]; i++) {
			const clp_tensor_desc *t = &tab->tensors[i];
			const size_t r = t->shape[0], c = t->shape[1];

			if (!m->state[k][i])
				continue;
			if (m->armed && m->done[k][i] != 3)
				return clp_error(CLP_ERR_STATE, "rank %d: %s's cycle of steps %ld..%ld "
						 "did not refresh the %s %s of %s: the schedule lacks "
						 "its refresh item", clp_exec_rank(e),
						 m->soap ? "SOAP" : "Shampoo", m->step - m->K + 1,
						 m->step, m->done[k][i] & 1 ? "R" : "L",
						 m->soap ? "basis" : "root", t->name);
			/* SOAP: the next bases (sets 6, 7) in, v permuted by each side's perm, L
			 * (axis 0) then R (axis 1), as one device's order */
			for (int side = 0; side < 2; side++) {
				CLP_TRY(clp_cl_copy(ctx, clp_buf_at(m->state[k][i], set_off(r, c, 2 + side)),
						    clp_buf_at(m->state[k][i],
							       set_off(r, c, (m->soap ? 6 : 4) + side)),
						    side ? c * c : r * r));
				if (m->soap) {
					clp_buf v = clp_stage_tensor(st, CLP_ST_ADAM_V, i);

					CLP_TRY(clp_soap_permute(ctx, v, r, c, side,
								 clp_buf_at(m->state[k][i],
									    perm_off(r, c, side)),
								 &m->sw));
				}
			}
		}
	}
	m->armed = 0;
	return CLP_OK;
}

/* A scheduled item: KFAC_INV(stage, layer, factor) refreshes model layer `layer`'s (block
 * layer + 1's) root `factor` (1..:
 * each Shampoo matrix's L then R in table order; 0: all of them) on every local copy of the
 * stage, whole (op.mb -1) or its phase op.mb of the schedule's nph (in order); KFAC_PRECOND
 * is no work of its own (the statistics and preconditioning need the clipped gradient and run
 * in the OPT_STEP after it). */
static clp_status shampoo_item(clp_exec *e, void *state, const clp_op *op)
{
	sst *m = state;
	char what[160];
	int found = 0;

	if (op->kind == CLP_OP_KFAC_PRECOND)
		return CLP_OK;
	clp_op_describe(op, what, sizeof(what));
	if (op->kind != CLP_OP_KFAC_INV)
		return clp_error(CLP_ERR_UNSUPPORTED, "rank %d: %s: Shampoo's items are root "
				 "refreshes (KFAC_INV, whole or in phases) and KFAC_PRECOND; this "
				 "schedule was made for K-FAC", clp_exec_rank(e), what);
	if (!m->armed)
		return clp_error(CLP_ERR_STATE, "rank %d: %s before the statistics' snapshot (the "
				 "OPT_STEP of the cycle's first step)", clp_exec_rank(e), what);
	for (int k = 0; k < m->n; k++) {
		const clp_param_table *tab = clp_stage_table(clp_exec_stage(e, k, NULL));
		int n = 0;

		if (clp_exec_stage_id(e, k) != op->stage)
			continue;
		for (int i = 0; i < tab->ntensors; i++) {
			if (!m->state[k][i] || tab->tensors[i].block - 1 != op->layer)
				continue;
			for (int side = 0; side < 2; side++, n++)
				if (!op->factor || op->factor - 1 == n) {
					CLP_TRY(op->mb >= 0 ? refresh_phase(e, m, k, i, side, op->mb)
							    : refresh_next(e, m, k, i, side));
					found++;
				}
		}
	}
	if (!found)
		return clp_error(CLP_ERR_INVALID, "rank %d: %s: no Shampoo root %d of layer %d on the "
				 "rank's copies of stage %d", clp_exec_rank(e), what, op->factor,
				 op->layer, op->stage);
	return CLP_OK;
}

/* A set's checkpoint name: shampoo.<tensor>.<set> or soap.<tensor>.<set> (so that neither kind
 * loads the other's state). */
static void set_name(const sst *m, const clp_tensor_desc *t, int s, char *name, size_t n)
{
	snprintf(name, n, "%s.%s.%s", m->soap ? "soap" : "shampoo", t->name,
		 m->soap ? soap_names[s] : set_names[s]);
}

static void free_host(sst *m)
{
	for (int i = 0; i < m->nhost; i++)
		free(m->host[i]);
	free(m->host);
	m->host = NULL;
	m->nhost = 0;
}

/* The sets a checkpoint holds: not the X of roots in phases (PipeFisher checkpoints are at
 * cycle ends, where every root is whole in its next set; clp_exec_shampoo_phase_bytes). */
static int saved_sets(const sst *m)
{
	if (m->soap) /* stale bases: the next bases too (and the perms, save_perm) */
		return m->nset;
	return m->nset < NSET_MAX ? m->nset : NSET_MAX;
}

/* SOAP's stale bases: both sides' perms (rows + cols cl_uints, kept as a 1 x (rows + cols)
 * tensor of their bits) as soap.<tensor>.perm, so that a run resumed at a cycle's end swaps
 * the same bases in. load: read them back instead. */
static clp_status soap_perm_io(clp_exec *e, sst *m, int k, int i, clp_ckpt_writer *w,
			       clp_ckpt *c)
{
	const clp_tensor_desc *t = &clp_stage_table(clp_exec_stage(e, k, NULL))->tensors[i];
	const size_t n = t->shape[0] + t->shape[1];
	int64_t shape[2] = {1, (int64_t)n};
	float *h = malloc(n * sizeof(float) + 1);
	char name[CLP_MAX_NAME + 32];
	const size_t off = perm_off(t->shape[0], t->shape[1], 0) * 4;
	clp_status st;

	if (!h)
		return clp_error(CLP_ERR_NOMEM, "soap: out of host memory (a checkpoint)");
	snprintf(name, sizeof(name), "soap.%s.perm", t->name);
	if (w) {
		m->host[m->nhost++] = h;
		CLP_TRY(clp_cl_read(clp_exec_ctx(e), m->state[k][i], off, n * 4, h));
		return clp_ckpt_writer_add(w, CLP_CKPT_OPTIM, name, h, 2, shape);
	}
	if (!clp_ckpt_find(c, CLP_CKPT_OPTIM, name))
		st = clp_error(CLP_ERR_NOT_FOUND, "%s: no %s; the checkpoint was not written by a "
			       "SOAP run with stale bases (PipeFisher, soap.stale)",
			       clp_ckpt_path(c), name);
	else
		st = clp_ckpt_read(c, CLP_CKPT_OPTIM, name, h, 2, shape);
	if (st == CLP_OK)
		st = clp_cl_write(clp_exec_ctx(e), m->state[k][i], off, n * 4, h);
	free(h);
	return st;
}

/* The sets of every Shampoo matrix this rank saves (clp_exec_owns), under shampoo.<name>.<set>. */
static clp_status shampoo_save(clp_exec *e, void *state, clp_ckpt_writer *w)
{
	sst *m = state;
	clp_cl_ctx *ctx = clp_exec_ctx(e);
	int n = 0;

	free_host(m);
	for (int k = 0; k < m->n; k++)
		n += (saved_sets(m) + 1) * m->ntensors[k]; /* + 1: SOAP's perms */
	if (!(m->host = calloc((size_t)n + 1, sizeof(float *))))
		return clp_error(CLP_ERR_NOMEM, "%s: out of host memory saving a checkpoint",
				 m->soap ? "soap" : "shampoo");
	for (int k = 0; k < m->n; k++) {
		const clp_param_table *tab = clp_stage_table(clp_exec_stage(e, k, NULL));

		for (int i = 0; i < tab->ntensors; i++) {
			const clp_tensor_desc *t = &tab->tensors[i];

			if (!m->state[k][i] || !clp_exec_owns(e, k, i))
				continue;
			for (int s = 0; s < saved_sets(m); s++) {
				size_t d = set_dim(t, s);
				int64_t shape[2] = {(int64_t)d, (int64_t)d};
				float *h = malloc(d * d * sizeof(float) + 1);
				char name[CLP_MAX_NAME + 32];

				if (!h)
					return clp_error(CLP_ERR_NOMEM, "shampoo: out of host memory "
							 "saving a checkpoint");
				m->host[m->nhost++] = h;
				set_name(m, t, s, name, sizeof(name));
				CLP_TRY(clp_cl_read(ctx, m->state[k][i],
						    set_off(t->shape[0], t->shape[1], s) * 4, d * d * 4,
						    h));
				CLP_TRY(clp_ckpt_writer_add(w, CLP_CKPT_OPTIM, name, h, 2, shape));
			}
			if (m->soap && m->o.stale)
				CLP_TRY(soap_perm_io(e, m, k, i, w, NULL));
		}
	}
	return CLP_OK;
}

static clp_status shampoo_load(clp_exec *e, void *state, clp_ckpt *c)
{
	sst *m = state;
	clp_cl_ctx *ctx = clp_exec_ctx(e);

	for (int k = 0; k < m->n; k++) {
		const clp_param_table *tab = clp_stage_table(clp_exec_stage(e, k, NULL));

		for (int i = 0; i < tab->ntensors; i++) {
			const clp_tensor_desc *t = &tab->tensors[i];

			if (!m->state[k][i])
				continue;
			for (int s = 0; s < saved_sets(m); s++) {
				size_t d = set_dim(t, s);
				int64_t shape[2] = {(int64_t)d, (int64_t)d};
				float *h = malloc(d * d * sizeof(float) + 1);
				char name[CLP_MAX_NAME + 32];
				clp_status st;

				if (!h)
					return clp_error(CLP_ERR_NOMEM, "shampoo: out of host memory "
							 "loading a checkpoint");
				set_name(m, t, s, name, sizeof(name));
				if (!clp_ckpt_find(c, CLP_CKPT_OPTIM, name)) {
					free(h);
					return clp_error(CLP_ERR_NOT_FOUND, "%s: no %s; the checkpoint "
							 "was not written by a%s run%s (this run has "
							 "optim.name = \"%s\")", clp_ckpt_path(c), name,
							 m->soap ? " SOAP" : " Shampoo",
							 s < NSET ? ""
							 : m->soap ? " with stale bases (PipeFisher, "
								     "soap.stale)"
								   : " with stale roots (PipeFisher, "
								     "shampoo.stale)",
							 m->soap ? "soap" : "shampoo");
				}
				st = clp_ckpt_read(c, CLP_CKPT_OPTIM, name, h, 2, shape);
				if (st == CLP_OK)
					st = clp_cl_write(ctx, m->state[k][i],
							  set_off(t->shape[0], t->shape[1], s) * 4,
							  d * d * 4, h);
				free(h);
				CLP_TRY(st);
			}
			if (m->soap && m->o.stale)
				CLP_TRY(soap_perm_io(e, m, k, i, NULL, c));
		}
	}
	return CLP_OK;
}

static void shampoo_free(clp_exec *e, void *state)
{
	sst *m = state;

	(void)e;
	if (!m)
		return;
	free_host(m);
	for (int k = 0; m->state && k < m->n; k++) {
		for (int i = 0; m->state[k] && i < m->ntensors[k]; i++)
			if (m->state[k][i])
				clReleaseMemObject(m->state[k][i]);
		free(m->state[k]);
		if (m->done)
			free(m->done[k]);
		if (m->ph)
			free(m->ph[k]);
	}
	free(m->done);
	free(m->ph);
	free(m->state);
	free(m->ntensors);
	for (int i = 0; i < 9; i++)
		if (m->mem[i])
			clReleaseMemObject(m->mem[i]);
	free(m);
}

/* Both kinds' hooks: SOAP's stage_step, save and load branch on sst.soap; step_begin and item
 * are the stale roots' ones (SOAP's stale bases: a whole refresh per item, the swap permutes v),
 * which do nothing without o.stale. */
#define HOOKS                                                                                      \
	.dataflow = 1, .step_begin = shampoo_step_begin, .item = shampoo_item,                     \
	.stage_step = shampoo_stage_step, .save = shampoo_save, .load = shampoo_load,              \
	.free = shampoo_free

static const clp_exec_optim exec_shampoo_optim = {.name = "Shampoo", HOOKS};
static const clp_exec_optim exec_soap_optim = {.name = "SOAP", HOOKS};

/* The state buffer of a rows x cols matrix: L = R = eps I, the roots 0 (pytorch-optimizer's
 * start: before the first refresh the update is zero). SOAP: eps 0, everything 0 (its first
 * step sets the bases). */
static clp_status state_buffer(clp_cl_ctx *ctx, const clp_tensor_desc *t, float eps, int nset,
			       size_t extra, cl_mem *out)
{
	const size_t r = t->shape[0], c = t->shape[1], n = state_floats(t, nset) + extra;
	float *h = calloc(n, sizeof(float));
	clp_status st;

	if (!h)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	for (size_t i = 0; i < r; i++)
		h[i * r + i] = eps;
	for (size_t i = 0; i < c; i++)
		h[set_off(r, c, 1) + i * c + i] = eps;
	st = clp_cl_buffer(ctx, n * sizeof(float), "shampoo state", out);
	if (st == CLP_OK)
		st = clp_cl_write(ctx, *out, 0, n * sizeof(float), h);
	free(h);
	return st;
}

/* The scratch's sizes in floats for a rank's tables: n[0..8] (x, u, r0..r5, norm). */
static void scratch_sizes(const clp_param_table *const *tabs, int nt, size_t n[9])
{
	size_t big = 1, dd = 1;

	for (int k = 0; k < nt; k++)
		for (int i = 0; i < tabs[k]->ntensors; i++) {
			const clp_tensor_desc *t = &tabs[k]->tensors[i];
			size_t d = t->shape[0] > t->shape[1] ? t->shape[0] : t->shape[1];

			if (!clp_exec_muon_takes(t))
				continue;
			big = t->numel > big ? t->numel : big;
			dd = d * d > dd ? d * d : dd;
		}
	n[0] = n[1] = big, n[8] = 2;
	for (int i = 2; i < 8; i++)
		n[i] = dd;
}

/* SOAP's scratch (clp_soap_work_sizes) for the largest matrix and the largest side. */
static void soap_scratch_sizes(const clp_param_table *const *tabs, int nt, size_t n[9])
{
	size_t big = 1, d = 1;

	for (int k = 0; k < nt; k++)
		for (int i = 0; i < tabs[k]->ntensors; i++) {
			const clp_tensor_desc *t = &tabs[k]->tensors[i];

			if (!clp_exec_muon_takes(t))
				continue;
			big = t->numel > big ? t->numel : big;
			d = t->shape[0] > d ? t->shape[0] : d;
			d = t->shape[1] > d ? t->shape[1] : d;
		}
	clp_soap_work_sizes(d, d, n);
	n[0] = n[1] = n[2] = big;
}

/* The scratch (sizes(): Shampoo's or SOAP's) and every matrix's four sets. */
static int64_t own_bytes(const clp_param_table *const *tabs, int nt,
			 void (*sizes)(const clp_param_table *const *, int, size_t[9]))
{
	size_t n[9];
	int64_t b = 0;

	sizes(tabs, nt, n);
	for (int i = 0; i < 9; i++)
		b += (int64_t)(n[i] * sizeof(float));
	for (int k = 0; k < nt; k++)
		for (int i = 0; i < tabs[k]->ntensors; i++)
			if (clp_exec_muon_takes(&tabs[k]->tensors[i]))
				b += (int64_t)(state_floats(&tabs[k]->tensors[i], NSET) *
					       sizeof(float));
	return b;
}

int64_t clp_exec_soap_bytes(const clp_param_table *const *tabs, int nt)
{
	return own_bytes(tabs, nt, soap_scratch_sizes);
}

int64_t clp_exec_shampoo_bytes(const clp_param_table *const *tabs, int nt)
{
	return own_bytes(tabs, nt, scratch_sizes);
}

int64_t clp_exec_shampoo_next_bytes(const clp_param_table *const *tabs, int nt)
{
	int64_t b = 0;

	for (int k = 0; k < nt; k++)
		for (int i = 0; i < tabs[k]->ntensors; i++)
			if (clp_exec_muon_takes(&tabs[k]->tensors[i]))
				b += (int64_t)((state_floats(&tabs[k]->tensors[i], NSET_MAX) -
						state_floats(&tabs[k]->tensors[i], NSET)) *
					       sizeof(float));
	return b;
}

int64_t clp_exec_soap_next_bytes(const clp_param_table *const *tabs, int nt)
{
	int64_t b = 0;

	for (int k = 0; k < nt; k++)
		for (int i = 0; i < tabs[k]->ntensors; i++) {
			const clp_tensor_desc *t = &tabs[k]->tensors[i];

			if (clp_exec_muon_takes(t))
				b += (int64_t)((state_floats(t, NSET_PH) - state_floats(t, NSET) +
						t->shape[0] + t->shape[1]) * sizeof(float));
		}
	return b;
}

int64_t clp_exec_shampoo_phase_bytes(const clp_param_table *const *tabs, int nt)
{
	int64_t b = 0;

	for (int k = 0; k < nt; k++)
		for (int i = 0; i < tabs[k]->ntensors; i++)
			if (clp_exec_muon_takes(&tabs[k]->tensors[i]))
				b += (int64_t)((state_floats(&tabs[k]->tensors[i], NSET_PH) -
						state_floats(&tabs[k]->tensors[i], NSET_MAX)) *
					       sizeof(float));
	return b;
}

int clp_exec_shampoo_sched_phases(const clp_sched *s)
{
	int n = 0;

	for (int r = 0; s && r < s->nranks; r++)
		for (int i = 0; i < s->ranks[r].nops; i++) {
			const clp_op *op = &s->ranks[r].ops[i];

			if (op->kind == CLP_OP_KFAC_INV && op->mb + 1 > n)
				n = op->mb + 1;
		}
	return n;
}

static int64_t device_bytes(const clp_exec *e, const clp_exec_optim *ops)
{
	const sst *m = clp_exec_optim_state(e);
	int64_t b = 0, x;

	if (clp_exec_optim_ops(e) != ops || !m)
		return 0;
	for (int i = 0; i < 9; i++) {
		if ((x = clp_cl_buffer_bytes(m->mem[i])) < 0)
			return 0;
		b += x;
	}
	for (int k = 0; k < m->n; k++)
		for (int i = 0; i < m->ntensors[k]; i++) {
			if (!m->state[k][i])
				continue;
			if ((x = clp_cl_buffer_bytes(m->state[k][i])) < 0)
				return 0;
			b += x;
		}
	return b;
}

int64_t clp_exec_shampoo_device_bytes(const clp_exec *e)
{
	return device_bytes(e, &exec_shampoo_optim);
}

int64_t clp_exec_soap_device_bytes(const clp_exec *e)
{
	return device_bytes(e, &exec_soap_optim);
}

static clp_status shampoo_alloc(clp_exec *e, sst *m)
{
	static const char *const names[9] = {"shampoo x", "shampoo u", "shampoo r0",
					     "shampoo r1", "shampoo r2", "shampoo r3",
					     "shampoo r4", "shampoo r5", "shampoo norm"};
	clp_cl_ctx *ctx = clp_exec_ctx(e);
	const clp_param_table **tabs;
	size_t n[9];

	m->n = clp_exec_nstages(e);
	m->state = calloc((size_t)m->n + 1, sizeof(*m->state));
	m->ntensors = calloc((size_t)m->n + 1, sizeof(int));
	m->done = calloc((size_t)m->n + 1, sizeof(*m->done));
	m->ph = calloc((size_t)m->n + 1, sizeof(*m->ph));
	if (!m->state || !m->ntensors || !m->done || !m->ph)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	for (int k = 0; k < m->n; k++) {
		const clp_param_table *tab = clp_stage_table(clp_exec_stage(e, k, NULL));

		m->ntensors[k] = tab->ntensors;
		if (!(m->state[k] = calloc((size_t)tab->ntensors + 1, sizeof(cl_mem))) ||
		    !(m->done[k] = calloc((size_t)tab->ntensors + 1, 1)) ||
		    !(m->ph[k] = calloc(2 * (size_t)tab->ntensors + 1, sizeof(int))))
			return clp_error(CLP_ERR_NOMEM, "out of host memory");
		for (int i = 0; i < tab->ntensors; i++)
			if (clp_exec_muon_takes(&tab->tensors[i]))
				CLP_TRY(state_buffer(ctx, &tab->tensors[i], m->soap ? 0 : m->o.eps, m->nset,
						     m->soap && m->o.stale /* the perms */
							     ? tab->tensors[i].shape[0] +
								       tab->tensors[i].shape[1]
							     : 0,
						     &m->state[k][i]));
	}
	if (!(tabs = calloc((size_t)m->n + 1, sizeof(*tabs))))
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	for (int k = 0; k < m->n; k++)
		tabs[k] = clp_stage_table(clp_exec_stage(e, k, NULL));
	if (m->soap)
		soap_scratch_sizes(tabs, m->n, n);
	else
		scratch_sizes(tabs, m->n, n);
	free(tabs);
	for (int i = 0; i < 9; i++)
		CLP_TRY(clp_cl_buffer(ctx, n[i] * sizeof(float), m->soap ? "soap work" : names[i],
				      &m->mem[i]));
	if (m->soap) {
		clp_buf *b[9] = {&m->sw.x, &m->sw.a, &m->sw.b, &m->sw.r[0], &m->sw.r[1],
				 &m->sw.r[2], &m->sw.est, &m->sw.perm, &m->sw.qr};

		for (int i = 0; i < 9; i++)
			*b[i] = clp_buf_at(m->mem[i], 0);
		return CLP_OK;
	}
	m->w.x = clp_buf_at(m->mem[0], 0), m->w.u = clp_buf_at(m->mem[1], 0);
	for (int i = 0; i < 6; i++)
		m->w.r[i] = clp_buf_at(m->mem[2 + i], 0);
	m->w.nrm = clp_buf_at(m->mem[8], 0);
	return CLP_OK;
}

/* A schedule with Shampoo's items (KFAC_INV; the pass's CLP_PF_WORK_SHAMPOO) runs the stale
 * roots with K = its cycle; K-FAC's own items are refused. */
static clp_status stale_setup(clp_exec *e, sst *m)
{
	const clp_sched *s = clp_exec_sched(e);
	char what[160];

	for (int r = 0; r < s->nranks; r++)
		for (int i = 0; i < s->ranks[r].nops; i++) {
			const clp_op *op = &s->ranks[r].ops[i];

			if (!clp_op_is_kfac(op->kind))
				continue;
			clp_op_describe(op, what, sizeof(what));
			if (op->kind != CLP_OP_KFAC_INV && op->kind != CLP_OP_KFAC_PRECOND)
				return clp_error(CLP_ERR_UNSUPPORTED, "shampoo: the schedule's rank %d "
						 "op %d (%s) is K-FAC's; Shampoo's PipeFisher cycle has "
						 "root refreshes (KFAC_INV) only (the pass's Shampoo "
						 "work)", r, i, what);
			m->pf |= op->kind == CLP_OP_KFAC_INV;
		}
	m->nph = clp_exec_shampoo_sched_phases(s);
	if (m->soap && m->nph)
		return clp_error(CLP_ERR_UNSUPPORTED, "soap: the schedule refreshes the eigenbases in "
				 "%d phases; a SOAP refresh (one product and a Householder QR) has "
				 "no phases: whole items only", m->nph);
	if (m->soap && m->pf && !m->o.stale)
		return clp_error(CLP_ERR_INVALID, "soap: the schedule refreshes the eigenbases in "
				 "its bubbles (PipeFisher), which computes the stale bases: turn "
				 "soap.stale on");
	if (m->soap && m->pf && m->K != s->nsteps)
		return clp_error(CLP_ERR_INVALID, "soap.frequency = %d, but the PipeFisher "
				 "schedule's cycle has K = %d steps (they must agree)", m->K,
				 s->nsteps);
	if (m->pf && !m->o.stale)
		return clp_error(CLP_ERR_INVALID, "shampoo: the schedule refreshes the roots in its "
				 "bubbles (PipeFisher), which computes the stale roots: turn "
				 "shampoo.stale on");
	if (m->pf && m->K != s->nsteps)
		return clp_error(CLP_ERR_INVALID, "shampoo.interval = %d, but the PipeFisher "
				 "schedule's cycle has K = %d steps (they must agree)", m->K,
				 s->nsteps);
	if (m->o.stale && m->o.warmup)
		return clp_error(CLP_ERR_INVALID, "shampoo: stale roots (PipeFisher, shampoo.stale) "
				 "refresh once a cycle; shampoo.warmup = %d would refresh serially "
				 "too: leave it 0", m->o.warmup);
	return CLP_OK;
}

clp_status clp_exec_shampoo(clp_exec *e, const clp_exec_shampoo_opts *o)
{
	sst *m;
	clp_status s;

	if (!(o->momentum >= 0.0f && o->momentum < 1.0f) || !(o->eps >= 0.0f) ||
	    o->interval < 1 || o->iters < 0 || o->iters > 1000 || o->warmup < 0 ||
	    !(o->stat_beta >= 0.0f && o->stat_beta <= 1.0f))
		return clp_error(CLP_ERR_INVALID, "shampoo: momentum %g must be in [0, 1), eps %g "
				 ">= 0, interval %d >= 1, iters %d in 0..1000, warmup %d >= 0 and "
				 "beta2 %g in [0, 1]", o->momentum, o->eps, o->interval, o->iters,
				 o->warmup, o->stat_beta);
	if (!(m = calloc(1, sizeof(*m))))
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	m->o = *o;
	m->nset = o->stale ? NSET_MAX : NSET;
	m->K = o->interval;
	if ((s = stale_setup(e, m)) == CLP_OK) {
		m->nset = o->stale && m->nph ? NSET_PH : m->nset; /* the roots' X between phases */
		s = shampoo_alloc(e, m);
	}
	if (s != CLP_OK) {
		shampoo_free(e, m);
		return s;
	}
	return clp_exec_set_optim(e, &exec_shampoo_optim, m);
}

double clp_exec_soap_layer_work(const clp_model_config *m, size_t tokens, int frequency)
{
	clp_param_table t;
	double work = 0, w = 0;

	if (!tokens || m->n_layer < 1 || frequency < 1 ||
	    clp_param_table_build(m, 1, 1, &t) != CLP_OK)
		return 0;
	for (int i = 0; i < t.ntensors; i++) {
		const clp_tensor_desc *d = &t.tensors[i];

		if (d->ndim == 2)
			w += (double)d->shape[0] * (double)d->shape[1];
		if (!clp_exec_muon_takes(d))
			continue;
		work += clp_soap_step_flops(d->shape[0], d->shape[1]);
		work += (clp_soap_refresh_flops(d->shape[0]) + clp_soap_refresh_flops(d->shape[1])) /
			frequency;
	}
	clp_param_table_free(&t);
	return w > 0 ? work / (6 * w * (double)tokens) : 0;
}

clp_status clp_exec_soap(clp_exec *e, const clp_exec_soap_opts *o)
{
	sst *m;
	clp_status s;

	if (!(o->beta1 >= 0.0f && o->beta1 < 1.0f) || !(o->beta2 >= 0.0f && o->beta2 < 1.0f) ||
	    !(o->shampoo_beta >= 0.0f && o->shampoo_beta < 1.0f) || !(o->eps > 0.0f) ||
	    o->frequency < 1 || o->init_iters < 0)
		return clp_error(CLP_ERR_INVALID, "soap: beta1 %g, beta2 %g and shampoo_beta %g must "
				 "be in [0, 1), eps %g > 0, frequency %d >= 1, init_iters %d >= 0",
				 o->beta1, o->beta2, o->shampoo_beta, o->eps, o->frequency,
				 o->init_iters);
	if (!(m = calloc(1, sizeof(*m))))
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	m->soap = 1;
	m->so = *o;
	m->o.stale = o->stale; /* the stale roots' machinery, K = frequency */
	m->nset = o->stale ? NSET_PH : NSET; /* and the next bases in the X sets' places */
	m->K = o->frequency;
	s = stale_setup(e, m);
	if (s == CLP_OK)
		s = shampoo_alloc(e, m);
	if (s != CLP_OK) {
		shampoo_free(e, m);
		return s;
	}
	return clp_exec_set_optim(e, &exec_soap_optim, m);
}
