/* The K-FAC optimizer of a stage (kfac.h): memory, the cycle, curvature (immediate and kept),
 * inversion, preconditioning and the update. Checkpoints are in kfac_ckpt.c. */
#include "engine/optim/kfac_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/convert.h"
#include "cl/gemm.h"
#include "cl/ops.h"

static const char *const lin_names[CLP_LIN_COUNT] = {"qkv", "att_o", "fc", "proj"};

void clp_kfac_opts_default(clp_kfac_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->damping = 1e-3;
	o->ema = 0;
	o->interval = 10;
	o->base = CLP_KFAC_BASE_SGD;
	o->momentum = 0.9;
	o->kl_clip = 1e-3;
}

const char *clp_kfac_base_name(clp_kfac_base b)
{
	return b == CLP_KFAC_BASE_ADAMW ? "adamw" : "sgd";
}

clp_status kfac_copy(clp_cl_ctx *ctx, clp_buf dst, clp_buf src, size_t n)
{
	cl_int err;

	if (!n)
		return CLP_OK;
	err = clEnqueueCopyBuffer(clp_cl_ctx_queue(ctx), src.mem, dst.mem, src.off * 4,
				  dst.off * 4, n * 4, 0, NULL, NULL);
	return err == CL_SUCCESS ? CLP_OK : clp_cl_fail(ctx, err, "kfac: copying %zu floats", n);
}

/* The factor table of a layer: per linear its A, then its B parts. */
static void build_factors(clp_kfac_opt *k)
{
	k->nf = 0;
	for (int l = 0; l < CLP_LIN_COUNT; l++) {
		clp_stage_linear_info *in = &k->lin[l];

		clp_stage_linear_get(k->st, (clp_stage_linear)l, in);
		k->fbase[l] = k->nf;
		k->flin[k->nf] = l;
		k->fpart[k->nf] = -1;
		k->fdim[k->nf] = in->I;
		snprintf(k->fname[k->nf++], sizeof(k->fname[0]), "%s.A", lin_names[l]);
		for (int p = 0; p < in->nparts; p++) {
			k->flin[k->nf] = l;
			k->fpart[k->nf] = p;
			k->fdim[k->nf] = in->part[p];
			if (in->nparts > 1)
				snprintf(k->fname[k->nf++], sizeof(k->fname[0]), "%s.B%d",
					 lin_names[l], p);
			else
				snprintf(k->fname[k->nf++], sizeof(k->fname[0]), "%s.B",
					 lin_names[l]);
		}
	}
}

static size_t part_off(const clp_stage_linear_info *in, int p)
{
	size_t o = 0;

	for (int i = 0; i < p; i++)
		o += in->part[i];
	return o;
}

static clp_status alloc_state(clp_kfac_opt *k)
{
	int nv = 3 * k->nl * k->nf;
	const char **names = calloc((size_t)nv + 1, sizeof(*names));
	size_t *bytes = calloc((size_t)nv + 1, sizeof(*bytes)), maxd = 1, maxw = 1, maxo = 1;
	const char *mnames[MV_COUNT] = {"kfac stats", "kfac info", "kfac scalars",
					"kfac workspace", "kfac matrix", "kfac precondition",
					"kfac temporary", "kfac bias"};
	size_t mbytes[MV_COUNT];
	clp_status s = CLP_OK;

	k->F = calloc((size_t)k->nl * (size_t)k->nf + 1, sizeof(clp_buf));
	k->inv[0] = calloc((size_t)k->nl * (size_t)k->nf + 1, sizeof(clp_buf));
	k->inv[1] = calloc((size_t)k->nl * (size_t)k->nf + 1, sizeof(clp_buf));
	if (!names || !bytes || !k->F || !k->inv[0] || !k->inv[1]) {
		s = clp_error(CLP_ERR_NOMEM, "kfac: out of host memory");
		goto out;
	}
	for (int f = 0; f < k->nf; f++)
		maxd = k->fdim[f] > maxd ? k->fdim[f] : maxd;
	for (int l = 0; l < CLP_LIN_COUNT; l++) {
		maxw = k->lin[l].I * k->lin[l].O > maxw ? k->lin[l].I * k->lin[l].O : maxw;
		maxo = k->lin[l].O > maxo ? k->lin[l].O : maxo;
	}
	for (int set = 0; set < 3; set++)
		for (int i = 0; i < k->nl * k->nf; i++) {
			names[set * k->nl * k->nf + i] = set ? "kfac inverse" : "kfac factor";
			bytes[set * k->nl * k->nf + i] = k->fdim[i % k->nf] * k->fdim[i % k->nf] * 4;
		}
	if (nv)
		s = clp_cl_block_create(k->ctx, "kfac factors", nv, names, bytes, &k->blk);
	for (int i = 0; s == CLP_OK && i < k->nl * k->nf; i++) {
		k->F[i] = clp_buf_view(clp_cl_block_view(k->blk, i));
		k->inv[0][i] = clp_buf_view(clp_cl_block_view(k->blk, k->nl * k->nf + i));
		k->inv[1][i] = clp_buf_view(clp_cl_block_view(k->blk, 2 * k->nl * k->nf + i));
	}
	mbytes[MV_STATS] = ((size_t)k->nl * CLP_LIN_COUNT * CLP_KFAC_NSTATS + 1) * 4;
	mbytes[MV_INFO] = ((size_t)k->nl * (size_t)k->nf + 1) * 4;
	mbytes[MV_SCAL] = 4 * 4;
	mbytes[MV_WS] = clp_kfac_workspace(k->ctx, maxd) * 4;
	mbytes[MV_W] = maxd * maxd * 4;
	mbytes[MV_P] = maxw * 4;
	mbytes[MV_T] = maxw * 4;
	mbytes[MV_PB] = maxo * 4;
	if (s == CLP_OK)
		s = clp_cl_block_create(k->ctx, "kfac work", MV_COUNT, mnames, mbytes, &k->misc);
	for (int i = 0; s == CLP_OK && i < MV_COUNT; i++)
		k->mv[i] = clp_buf_view(clp_cl_block_view(k->misc, i));
out:
	free(names);
	free(bytes);
	return s;
}

/* Which stage tensors K-FAC preconditions: the weights and biases of the layers' linears. */
static clp_status mark_tensors(clp_kfac_opt *k)
{
	const clp_param_table *t = clp_stage_table(k->st);

	k->is_kfac = calloc((size_t)t->ntensors + 1, sizeof(int));
	if (!k->is_kfac)
		return clp_error(CLP_ERR_NOMEM, "kfac: out of host memory");
	for (int i = 0; i < t->ntensors; i++) {
		const clp_tensor_desc *d = &t->tensors[i];

		if (d->block < 1 || d->block > k->n_layer)
			continue;
		for (int l = 0; l < CLP_LIN_COUNT; l++)
			if (d->role == k->lin[l].weight || d->role == k->lin[l].bias)
				k->is_kfac[i] = 1;
	}
	return CLP_OK;
}

clp_status clp_kfac_opt_create(clp_kfac_opt **out, clp_stage *st, const clp_kfac_opts *o)
{
	clp_kfac_opt *k;
	clp_status s;

	*out = NULL;
	if (!(o->damping > 0) || o->interval < 1 || !(o->ema >= 0 && o->ema < 1) ||
	    !(o->momentum >= 0 && o->momentum < 1) || !(o->kl_clip >= 0) || o->max_kept < 0)
		return clp_error(CLP_ERR_INVALID, "kfac: damping %g (> 0), interval %d (>= 1), ema "
				 "%g and momentum %g (in [0, 1)), kl_clip %g (>= 0), max_kept %d",
				 o->damping, o->interval, o->ema, o->momentum, o->kl_clip,
				 o->max_kept);
	k = calloc(1, sizeof(*k));
	if (!k)
		return clp_error(CLP_ERR_NOMEM, "kfac: out of host memory");
	k->st = st;
	k->ctx = clp_stage_ctx(st);
	k->o = *o;
	k->l0 = clp_stage_first_layer(st);
	k->nl = clp_stage_nlayers(st);
	k->N = clp_stage_rows(st);
	k->n_layer = clp_stage_model_layers(st);
	k->ema_owner = 1;
	build_factors(k);
	s = alloc_state(k);
	if (s == CLP_OK)
		s = mark_tensors(k);
	if (s == CLP_OK)
		s = clp_cl_fill(k->ctx, k->mv[MV_INFO], 0.0f, (size_t)k->nl * (size_t)k->nf + 1);
	if (s != CLP_OK) {
		clp_kfac_opt_free(k);
		return s;
	}
	clp_stage_set_tap(st, clp_kfac_opt_tap, k);
	*out = k;
	return CLP_OK;
}

void clp_kfac_opt_free(clp_kfac_opt *k)
{
	if (!k)
		return;
	clp_cl_finish(k->ctx);
	clp_stage_set_tap(k->st, NULL, NULL);
	for (int i = 0; i < k->nkept; i++) {
		clp_cl_block_free(k->kept[i].mem);
		free(k->kept[i].a);
	}
	free(k->kept);
	clp_cl_block_free(k->blk);
	clp_cl_block_free(k->misc);
	free(k->F);
	free(k->inv[0]);
	free(k->inv[1]);
	free(k->is_kfac);
	kfac_free_host(k);
	free(k);
}

int clp_kfac_opt_nfactors(const clp_kfac_opt *k)
{
	return k->nf;
}

size_t clp_kfac_opt_factor_dim(const clp_kfac_opt *k, int f)
{
	return f >= 0 && f < k->nf ? k->fdim[f] : 0;
}

const char *clp_kfac_opt_factor_name(const clp_kfac_opt *k, int f)
{
	return f >= 0 && f < k->nf ? k->fname[f] : "?";
}

clp_buf clp_kfac_opt_factor(const clp_kfac_opt *k, int layer, int f)
{
	clp_buf none = CLP_BUF_NONE;
	int li = layer - k->l0;

	if (li < 0 || li >= k->nl || f < 0 || f >= k->nf)
		return none;
	return k->F[li * k->nf + f];
}

clp_buf clp_kfac_opt_inverse(const clp_kfac_opt *k, int layer, int f, int next)
{
	clp_buf none = CLP_BUF_NONE;
	int li = layer - k->l0;

	if (li < 0 || li >= k->nl || f < 0 || f >= k->nf)
		return none;
	return k->inv[k->active ^ (next != 0)][li * k->nf + f];
}

void clp_kfac_opt_set_ema_owner(clp_kfac_opt *k, int owner)
{
	k->ema_owner = owner != 0;
}

clp_status clp_kfac_opt_step_begin(clp_kfac_opt *k, long step, double count, double rows,
				   int *collect)
{
	long K = k->o.interval;

	if (collect)
		*collect = 0;
	if (step < 0 || !(rows > 0) || !(count >= 0))
		return clp_error(CLP_ERR_INVALID, "kfac: step %ld with %g rows and %g targets", step,
				 rows, count);
	if (step > 0 && step % K == 0)
		k->active ^= 1; /* the inverses of the previous cycle take over together */
	k->collecting = step % K == 0;
	if (!k->collecting)
		return CLP_OK;
	{
		double keep = k->has_hist && k->ema_owner ? k->o.ema : 0.0;
		double w = (k->has_hist ? 1.0 - k->o.ema : 1.0) / rows;

		for (int i = 0; i < k->nl * k->nf; i++) {
			size_t n = k->fdim[i % k->nf] * k->fdim[i % k->nf];

			CLP_TRY(keep > 0 ? clp_cl_scale(k->ctx, k->F[i], (float)keep, n)
					 : clp_cl_fill(k->ctx, k->F[i], 0.0f, n));
		}
		k->wa = (float)w;
		/* B over per-token gradients: the backward's are those of the mean, 1 / count */
		k->wb = (float)(w * count * count);
		k->has_hist = 1;
	}
	if (collect)
		*collect = 1;
	return CLP_OK;
}

static clp_status acc_a(clp_kfac_opt *k, int li, int lin, clp_buf x)
{
	size_t I = k->lin[lin].I;

	return clp_kfac_factor(k->ctx, k->F[li * k->nf + k->fbase[lin]], x, I, k->N, I, k->wa,
			       1.0f);
}

static clp_status acc_b(clp_kfac_opt *k, int li, int lin, clp_buf dy)
{
	const clp_stage_linear_info *in = &k->lin[lin];

	for (int p = 0; p < in->nparts; p++)
		CLP_TRY(clp_kfac_factor(k->ctx, k->F[li * k->nf + k->fbase[lin] + 1 + p],
					clp_buf_at(dy.mem, dy.off + part_off(in, p)), in->O, k->N,
					in->part[p], k->wb, 1.0f));
	return CLP_OK;
}

static clp_status kept_entry(clp_kfac_opt *k, int mb, int create, struct kfac_kept **out);
static void kept_done(clp_kfac_opt *k, struct kfac_kept *e, int li, int b);

static clp_status check_layer(const clp_kfac_opt *k, int li, const char *what)
{
	if (li < -1 || li >= k->nl)
		return clp_error(CLP_ERR_INVALID, "kfac %s: stage layer %d out of range (the stage "
				 "holds %d)", what, li, k->nl);
	return CLP_OK;
}

clp_status clp_kfac_opt_curv_a(clp_kfac_opt *k, int li, int slot, int mb)
{
	struct kfac_kept *e = NULL;

	CLP_TRY(check_layer(k, li, "factor A"));
	if (!k->collecting)
		return CLP_OK;
	if (!k->defer)
		return clp_error(CLP_ERR_STATE, "kfac: factor A comes from the backward's tap unless "
				 "deferral is on (clp_kfac_opt_defer)");
	if (clp_stage_recomputes(k->st))
		return clp_error(CLP_ERR_STATE, "kfac: the stage recomputes its layers: their inputs "
				 "exist only during the backward, so factor A is kept there");
	CLP_TRY(kept_entry(k, mb, 1, &e));
	for (int l = li < 0 ? 0 : li; l < (li < 0 ? k->nl : li + 1); l++) {
		if (e->done & (1ull << (2 * l)))
			return clp_error(CLP_ERR_STATE, "kfac: factor A of layer %d from micro-batch %d "
					 "is already accumulated", k->l0 + l, mb);
		for (int lin = 0; lin < CLP_LIN_COUNT; lin++)
			CLP_TRY(acc_a(k, l, lin,
				      clp_stage_linear_input(k->st, slot, l, (clp_stage_linear)lin)));
		kept_done(k, e, l, 0);
	}
	return CLP_OK;
}

/* ---- kept inputs and output gradients (deferred factors) --------------------------------- */

static clp_status kept_entry(clp_kfac_opt *k, int mb, int create, struct kfac_kept **out)
{
	struct kfac_kept *e = NULL;

	*out = NULL;
	for (int i = 0; i < k->nkept; i++)
		if (k->kept[i].mb == mb)
			*out = &k->kept[i];
	if (*out || !create)
		return CLP_OK;
	for (int i = 0; i < k->nkept && !e; i++)
		if (k->kept[i].mb < 0)
			e = &k->kept[i];
	if (!e) {
		int nv = k->nl * CLP_LIN_COUNT * 2;
		const char **names;
		size_t *bytes;
		struct kfac_kept *nk;
		clp_status s;

		if (k->o.max_kept > 0 && k->nkept >= k->o.max_kept)
			return clp_error(CLP_ERR_NOMEM, "kfac: keeping micro-batch %d would exceed "
					 "max_kept = %d micro-batches", mb, k->o.max_kept);
		nk = realloc(k->kept, ((size_t)k->nkept + 1) * sizeof(*nk));
		if (!nk)
			return clp_error(CLP_ERR_NOMEM, "kfac: out of host memory");
		k->kept = nk;
		e = &k->kept[k->nkept];
		memset(e, 0, sizeof(*e));
		names = calloc((size_t)nv, sizeof(*names));
		bytes = calloc((size_t)nv, sizeof(*bytes));
		e->a = calloc((size_t)nv, sizeof(clp_buf));
		if (!names || !bytes || !e->a) {
			free(names);
			free(bytes);
			free(e->a);
			return clp_error(CLP_ERR_NOMEM, "kfac: out of host memory");
		}
		for (int i = 0; i < nv; i++) {
			const clp_stage_linear_info *in = &k->lin[(i / 2) % CLP_LIN_COUNT];

			names[i] = i % 2 ? "kept output gradient" : "kept input";
			bytes[i] = k->N * (i % 2 ? in->O : in->I) * 4;
		}
		s = clp_cl_block_create(k->ctx, "kfac kept micro-batch", nv, names, bytes, &e->mem);
		for (int i = 0; s == CLP_OK && i < nv; i++)
			e->a[i] = clp_buf_view(clp_cl_block_view(e->mem, i));
		free(names);
		free(bytes);
		if (s != CLP_OK) {
			free(e->a);
			return s;
		}
		k->nkept++;
	}
	e->mb = mb;
	e->done = 0;
	*out = e;
	return CLP_OK;
}

/* Data of (stage layer li, linear lin) in a kept entry: input (b = 0) or output gradient. */
static clp_buf kept_buf(const struct kfac_kept *e, int li, int lin, int b)
{
	return e->a[(li * CLP_LIN_COUNT + lin) * 2 + b];
}

/* A layer's A (bit 2 li) and B (bit 2 li + 1) are done; the entry is free once all are. */
static void kept_done(clp_kfac_opt *k, struct kfac_kept *e, int li, int b)
{
	e->done |= 1ull << (2 * li + b);
	if (e->done == (k->nl >= 32 ? ~0ull : (1ull << (2 * k->nl)) - 1))
		e->mb = -1;
}

void clp_kfac_opt_defer(clp_kfac_opt *k, int on)
{
	k->defer = on != 0;
}

static clp_status curv_kept(clp_kfac_opt *k, int li, int mb, int b)
{
	struct kfac_kept *e;

	CLP_TRY(check_layer(k, li, b ? "factor B" : "factor A"));
	/* kept data exists only from a collecting step; it may be used in any later step */
	CLP_TRY(kept_entry(k, mb, 0, &e));
	if (!e)
		return clp_error(CLP_ERR_STATE, "kfac: no kept %s for micro-batch %d",
				 b ? "output gradients" : "inputs", mb);
	for (int l = li < 0 ? 0 : li; l < (li < 0 ? k->nl : li + 1); l++) {
		if (e->done & (1ull << (2 * l + b)))
			return clp_error(CLP_ERR_STATE, "kfac: factor %s of layer %d from micro-batch "
					 "%d is already accumulated", b ? "B" : "A", k->l0 + l, mb);
		for (int lin = 0; lin < CLP_LIN_COUNT; lin++)
			CLP_TRY(b ? acc_b(k, l, lin, kept_buf(e, l, lin, 1))
				  : acc_a(k, l, lin, kept_buf(e, l, lin, 0)));
		kept_done(k, e, l, b);
	}
	return CLP_OK;
}

clp_status clp_kfac_opt_curv_a_kept(clp_kfac_opt *k, int li, int mb)
{
	return curv_kept(k, li, mb, 0);
}

clp_status clp_kfac_opt_curv_b_kept(clp_kfac_opt *k, int li, int mb)
{
	return curv_kept(k, li, mb, 1);
}

clp_status clp_kfac_opt_tap(void *user, const clp_stage_mb *mb, int li, clp_stage_linear lin,
			    clp_buf dy)
{
	clp_kfac_opt *k = user;
	struct kfac_kept *e;

	clp_buf x;

	if (!k->collecting)
		return CLP_OK;
	/* the layer's input is in the slot now, recomputed or saved */
	x = clp_stage_linear_input(k->st, mb->slot, li, lin);
	if (!k->defer) {
		CLP_TRY(acc_a(k, li, lin, x));
		return acc_b(k, li, lin, dy);
	}
	CLP_TRY(kept_entry(k, (int)mb->micro_batch, 1, &e));
	/* kept in fp32: a 16-bit input (mixed precision) widens exactly, so the deferred factor
	 * equals the immediate one */
	if (!(e->done & (1ull << (2 * li))))
		CLP_TRY(x.dt == CLP_F32
				? kfac_copy(k->ctx, kept_buf(e, li, lin, 0), x, k->N * k->lin[lin].I)
				: clp_cl_convert(k->ctx, kept_buf(e, li, lin, 0), CLP_F32, x, x.dt,
						 k->N * k->lin[lin].I));
	return kfac_copy(k->ctx, kept_buf(e, li, lin, 1), dy, k->N * k->lin[lin].O);
}

/* ---- inverses ---------------------------------------------------------------------------- */

static clp_status damping(clp_kfac_opt *k, int li, int lin)
{
	const clp_stage_linear_info *in = &k->lin[lin];
	int fa = li * k->nf + k->fbase[lin];
	clp_buf B[3];

	for (int p = 0; p < in->nparts; p++)
		B[p] = k->F[fa + 1 + p];
	return clp_kfac_damping(k->ctx, kfac_stats(k, li, lin), k->F[fa], in->I, B, in->part,
				in->nparts, (float)k->o.damping);
}

clp_status clp_kfac_opt_invert(clp_kfac_opt *k, int layer, int f)
{
	int lo = layer < 0 ? 0 : layer - k->l0, hi = layer < 0 ? k->nl : lo + 1, next = k->active ^ 1;

	if (layer >= 0 && (lo < 0 || lo >= k->nl))
		return clp_error(CLP_ERR_INVALID, "kfac invert: layer %d is not on this stage "
				 "(layers %d..%d)", layer, k->l0, k->l0 + k->nl - 1);
	if (f < -1 || f >= k->nf)
		return clp_error(CLP_ERR_INVALID, "kfac invert: factor %d out of range (%d per "
				 "layer)", f, k->nf);
	for (int li = lo; li < hi; li++)
		for (int i = f < 0 ? 0 : f; i < (f < 0 ? k->nf : f + 1); i++) {
			int lin = k->flin[i];
			size_t d = k->fdim[i];

			CLP_TRY(damping(k, li, lin));
			CLP_TRY(clp_kfac_damped_copy(k->ctx, k->mv[MV_W], k->F[li * k->nf + i], d,
						     kfac_stats(k, li, lin), k->fpart[i] >= 0));
			CLP_TRY(clp_kfac_spd_inverse(k->ctx, k->inv[next][li * k->nf + i],
						     k->mv[MV_W], d, k->mv[MV_WS],
						     clp_buf_at(k->mv[MV_INFO].mem,
								k->mv[MV_INFO].off +
									(size_t)(li * k->nf + i))));
		}
	return CLP_OK;
}

clp_status clp_kfac_opt_invert_phase(clp_kfac_opt *k, int layer, int f, int phase)
{
	int li = layer - k->l0, next = k->active ^ 1;

	if (li < 0 || li >= k->nl)
		return clp_error(CLP_ERR_INVALID, "kfac invert: layer %d is not on this stage "
				 "(layers %d..%d)", layer, k->l0, k->l0 + k->nl - 1);
	if (f < -1 || f >= k->nf || phase < 0 || phase > 2)
		return clp_error(CLP_ERR_INVALID, "kfac invert: factor %d (of %d) or phase %d out of "
				 "range", f, k->nf, phase);
	for (int i = f < 0 ? 0 : f; i < (f < 0 ? k->nf : f + 1); i++) {
		int lin = k->flin[i];
		size_t d = k->fdim[i];
		clp_buf X = k->inv[next][li * k->nf + i];

		if (!d)
			continue;
		if (phase == 0) { /* the damped factor's Cholesky factor, kept in the next inverse */
			CLP_TRY(damping(k, li, lin));
			CLP_TRY(clp_kfac_damped_copy(k->ctx, X, k->F[li * k->nf + i], d,
						     kfac_stats(k, li, lin), k->fpart[i] >= 0));
			CLP_TRY(clp_kfac_cholesky(k->ctx, X, d, k->mv[MV_WS],
						  clp_buf_at(k->mv[MV_INFO].mem,
							     k->mv[MV_INFO].off +
								     (size_t)(li * k->nf + i))));
		} else if (phase == 1) {
			CLP_TRY(clp_kfac_trtri(k->ctx, X, d, k->mv[MV_WS]));
		} else { /* X^T X, X staged where the whole inversion keeps it */
			CLP_TRY(kfac_copy(k->ctx, k->mv[MV_W], X, d * d));
			CLP_TRY(clp_cl_gemm(k->ctx, CLP_T, CLP_N, d, d, d, 1.0f, k->mv[MV_W], d,
					    k->mv[MV_W], d, 0.0f, X, d));
		}
	}
	return CLP_OK;
}

clp_status clp_kfac_opt_activate(clp_kfac_opt *k)
{
	for (int i = 0; i < k->nl * k->nf; i++)
		CLP_TRY(kfac_copy(k->ctx, k->inv[k->active][i], k->inv[k->active ^ 1][i],
				  k->fdim[i % k->nf] * k->fdim[i % k->nf]));
	return CLP_OK;
}

clp_status clp_kfac_opt_check(clp_kfac_opt *k)
{
	size_t n = (size_t)k->nl * (size_t)k->nf;
	int32_t *info = calloc(n + 1, sizeof(int32_t));
	clp_status s;

	if (!info)
		return clp_error(CLP_ERR_NOMEM, "kfac: out of host memory");
	s = clp_cl_read(k->ctx, k->mv[MV_INFO].mem, k->mv[MV_INFO].off * 4, n * 4, info);
	for (size_t i = 0; s == CLP_OK && i < n; i++)
		if (info[i]) {
			s = clp_error(CLP_ERR_NUMERIC, "kfac: the damped factor %s of layer %d is not "
				      "positive definite (pivot %d of %zu); raise the damping "
				      "(kfac.damping = %g)", k->fname[i % (size_t)k->nf],
				      k->l0 + (int)(i / (size_t)k->nf), info[i] - 1,
				      k->fdim[i % (size_t)k->nf], k->o.damping);
			clp_cl_fill(k->ctx, k->mv[MV_INFO], 0.0f, n);
		}
	free(info);
	return s;
}

/* ---- preconditioning and the update ------------------------------------------------------ */

static clp_status precondition_linear(clp_kfac_opt *k, int li, int lin)
{
	const clp_stage_linear_info *in = &k->lin[lin];
	clp_buf G = clp_stage_linear_tensor(k->st, CLP_ST_GRAD, li, (clp_stage_linear)lin, 0);
	clp_buf gb = clp_stage_linear_tensor(k->st, CLP_ST_GRAD, li, (clp_stage_linear)lin, 1);
	clp_buf *inv = k->inv[k->active], P = k->mv[MV_P], Pb = k->mv[MV_PB], vg = k->mv[MV_SCAL];
	int fa = li * k->nf + k->fbase[lin];
	size_t ld = in->in_out ? in->O : in->I;

	for (int p = 0; p < in->nparts; p++) {
		size_t o0 = part_off(in, p), op = in->part[p], at = in->in_out ? o0 : o0 * in->I;

		CLP_TRY(clp_kfac_precondition(k->ctx, kfac_off(P, at), ld, kfac_off(G, at), ld,
					      inv[fa + 1 + p], inv[fa], op, in->I, in->in_out,
					      k->mv[MV_T]));
		if (gb.mem)
			CLP_TRY(clp_cl_gemm(k->ctx, CLP_N, CLP_N, op, 1, op, 1.0f, inv[fa + 1 + p],
					    op, kfac_off(gb, o0), 1, 0.0f, kfac_off(Pb, o0), 1));
	}
	CLP_TRY(clp_kfac_dot(k->ctx, vg, P, G, in->O * in->I));
	CLP_TRY(kfac_copy(k->ctx, G, P, in->O * in->I));
	if (!gb.mem)
		return CLP_OK;
	CLP_TRY(clp_kfac_dot(k->ctx, vg, Pb, gb, in->O));
	return kfac_copy(k->ctx, gb, Pb, in->O);
}

clp_buf clp_kfac_opt_kl_sum(const clp_kfac_opt *k)
{
	return k->mv[MV_SCAL];
}

clp_status clp_kfac_opt_precondition_mine(clp_kfac_opt *k, const uint8_t *mine)
{
	CLP_TRY(clp_cl_fill(k->ctx, k->mv[MV_SCAL], 0.0f, 2));
	for (int li = 0; li < k->nl; li++)
		for (int lin = 0; lin < CLP_LIN_COUNT; lin++) {
			const clp_stage_linear_info *in = &k->lin[lin];
			clp_buf G = clp_stage_linear_tensor(k->st, CLP_ST_GRAD, li,
							    (clp_stage_linear)lin, 0);
			clp_buf gb = clp_stage_linear_tensor(k->st, CLP_ST_GRAD, li,
							     (clp_stage_linear)lin, 1);

			if (mine[li]) {
				CLP_TRY(precondition_linear(k, li, lin));
				continue;
			}
			CLP_TRY(clp_cl_fill(k->ctx, G, 0.0f, in->O * in->I));
			if (gb.mem)
				CLP_TRY(clp_cl_fill(k->ctx, gb, 0.0f, in->O));
		}
	return CLP_OK;
}

int clp_kfac_opt_layer_grads(const clp_kfac_opt *k, int layer, clp_buf *b, size_t *n, int max)
{
	int li = layer - k->l0, m = 0;

	if (li < 0 || li >= k->nl)
		return 0;
	for (int lin = 0; lin < CLP_LIN_COUNT; lin++)
		for (int bias = 0; bias < 2 && m < max; bias++) {
			clp_buf g = clp_stage_linear_tensor(k->st, CLP_ST_GRAD, li, (clp_stage_linear)lin,
							    bias);

			if (!g.mem)
				continue;
			b[m] = g;
			n[m++] = bias ? k->lin[lin].O : k->lin[lin].O * k->lin[lin].I;
		}
	return m;
}

clp_status clp_kfac_opt_precondition(clp_kfac_opt *k)
{
	CLP_TRY(clp_cl_fill(k->ctx, k->mv[MV_SCAL], 0.0f, 2));
	for (int li = 0; li < k->nl; li++)
		for (int lin = 0; lin < CLP_LIN_COUNT; lin++)
			CLP_TRY(precondition_linear(k, li, lin));
	return CLP_OK;
}

clp_status clp_kfac_opt_update(clp_kfac_opt *k, const clp_nn_adamw_hp *hp, float kfac_lr,
			       clp_buf gstats)
{
	const clp_param_table *t = clp_stage_table(k->st);
	clp_buf vg = k->mv[MV_SCAL], nu = kfac_off(k->mv[MV_SCAL], 1);
	clp_nn_adamw_hp kh = *hp;
	int sgd = k->o.base == CLP_KFAC_BASE_SGD;

	kh.lr = kfac_lr;
	if (sgd)
		CLP_TRY(clp_kfac_kl_clip(k->ctx, nu, vg, gstats, kfac_lr, (float)k->o.kl_clip));
	for (int i = 0; i < t->ntensors; i++) {
		clp_buf p = clp_stage_tensor(k->st, CLP_ST_PARAM, i);
		clp_buf m = clp_stage_tensor(k->st, CLP_ST_ADAM_M, i);
		clp_buf v = clp_stage_tensor(k->st, CLP_ST_ADAM_V, i);
		clp_buf g = clp_stage_tensor(k->st, CLP_ST_GRAD, i);
		size_t n = t->tensors[i].numel;
		int decay = t->tensors[i].decay;

		if (k->is_kfac[i] && sgd)
			CLP_TRY(clp_kfac_sgd(k->ctx, p, m, g, n, kfac_lr, (float)k->o.momentum,
					     decay ? hp->weight_decay : 0.0f, gstats, nu));
		else
			CLP_TRY(clp_nn_adamw_update(k->ctx, p, m, v, g, n, k->is_kfac[i] ? &kh : hp,
						    decay, gstats, 1.0f));
	}
	/* the masters moved: the 16-bit copy forward and backward read follows (mixed precision) */
	return clp_stage_refresh_values(k->st);
}
