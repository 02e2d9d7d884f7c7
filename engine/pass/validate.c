/* The schedule validator (see validate.h). One record per (step, pipeline, stage, micro-batch)
 * holds the op index of its FWD, backward halves and messages, so every rule is a pass over the
 * lists plus lookups: linear in the number of ops. */
#include "engine/pass/validate.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sched/index.h"
#include "engine/sim/sim.h"

/* Record slots are the op kinds FWD .. RECV_GRAD (0 .. 7). */
enum { R_FWD, R_BWD, R_BWD_B, R_BWD_W, R_SEND_ACT, R_RECV_ACT, R_SEND_GRAD, R_RECV_GRAD, R_N };

typedef struct rec {
	int32_t rank;
	int32_t idx[R_N];
} rec;

typedef struct vctx {
	const clp_sched *s;
	clp_sched_index ix;
	rec *recs;
} vctx;

static clp_status vfail(const vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static clp_status vfail(const vctx *v, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return clp_error(CLP_ERR_INVALID, "schedule %s%s%s%s: %s", v->s->file,
			 v->s->file[0] ? " (" : "", v->s->name, v->s->file[0] ? ")" : "", msg);
}

/* "rank 1 op 7 (FWD stage 1 mb 3)" */
static const char *where(const vctx *v, int r, int i, char *buf, size_t n)
{
	char d[200];

	clp_op_describe(&v->s->ranks[r].ops[i], d, sizeof(d));
	snprintf(buf, n, "rank %d op %d (%s)", r, i, d);
	return buf;
}

/* Records are indexed by (replica, step, pipeline, stage, micro-batch). */
static size_t rec_index(const clp_sched *s, int rep, int step, int pipe, int stage, int mb)
{
	return ((((size_t)rep * (size_t)s->nsteps + (size_t)step) * (size_t)s->npipes +
		 (size_t)pipe) * (size_t)s->nstages + (size_t)stage) * (size_t)s->nmb + (size_t)mb;
}

static rec *rec_of(const vctx *v, int r, const clp_op *op)
{
	return &v->recs[rec_index(v->s, v->s->ranks[r].replica, op->step, op->pipe, op->stage,
				  op->mb)];
}

/* A failure at rank r op i: "rank 1 op 7 (FWD stage 1 mb 3): <message>". */
static clp_status op_fail(const vctx *v, int r, int i, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static clp_status op_fail(const vctx *v, int r, int i, const char *fmt, ...)
{
	char w[256], msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return vfail(v, "%s: %s", where(v, r, i, w, sizeof(w)), msg);
}

static clp_status check_fields(const vctx *v, int r, int i)
{
	const clp_sched *s = v->s;
	const clp_op *op = &s->ranks[r].ops[i];
	int k = op->kind;

	if (k >= CLP_OP_KIND_COUNT)
		return vfail(v, "rank %d op %d: unknown op kind %d", r, i, k);
	if (op->step >= s->nsteps)
		return op_fail(v, r, i, "step out of range [0, %d)", s->nsteps);
	if (k <= CLP_OP_RECV_GRAD || k == CLP_OP_OPT_STEP || k == CLP_OP_KFAC_PRECOND ||
	    k == CLP_OP_KFAC_CURV_A || k == CLP_OP_KFAC_CURV_B) {
		if (op->stage < 0 || op->stage >= s->nstages)
			return op_fail(v, r, i, "stage out of range [0, %d)", s->nstages);
		if (op->pipe >= s->npipes)
			return op_fail(v, r, i, "pipeline out of range [0, %d)", s->npipes);
	}
	if ((k <= CLP_OP_RECV_GRAD || k == CLP_OP_KFAC_CURV_A || k == CLP_OP_KFAC_CURV_B) &&
	    (op->mb < 0 || op->mb >= s->nmb))
		return op_fail(v, r, i, "micro-batch out of range [0, %d)", s->nmb);
	if (clp_op_is_p2p(k)) {
		if (op->peer < 0 || op->peer >= s->nranks || op->peer == r)
			return op_fail(v, r, i, "peer must be another rank in [0, %d)", s->nranks);
		if (op->tag < 0 || op->tag >= CLP_TAG_LIMIT)
			return op_fail(v, r, i, "tag out of range [0, %d)", CLP_TAG_LIMIT);
	}
	if (clp_op_is_collective(k)) {
		const clp_group *g;
		int member = 0, root = k != CLP_OP_REDUCE;

		if (op->group < 0 || op->group >= s->ngroups)
			return op_fail(v, r, i, "group out of range [0, %d)", s->ngroups);
		g = &s->groups[op->group];
		for (int j = 0; j < g->n; j++) {
			member |= g->ranks[j] == r;
			root |= g->ranks[j] == op->peer;
		}
		if (!member || !root)
			return op_fail(v, r, i, "%s is not in group %d", member ? "the root" : "the rank",
				       op->group);
	}
	if (((k >= CLP_OP_KFAC_CURV_A && k <= CLP_OP_KFAC_INV) || k == CLP_OP_KFAC_INV_SYNC) &&
	    (op->layer < 0 || op->layer >= s->nlayers))
		return op_fail(v, r, i, "layer out of range [0, %d)", s->nlayers);
	if (k == CLP_OP_KFAC_INV && (op->mb < -1 || op->mb > 999)) /* K-FAC: 0..2; Shampoo: one
								       * a Newton iteration */
		return op_fail(v, r, i, "inversion phase (mb) %d out of [-1, 999]", op->mb);
	if (k == CLP_OP_KFAC_PREC_SYNC && (op->stage < 0 || op->stage >= s->nstages))
		return op_fail(v, r, i, "stage out of range [0, %d)", s->nstages);
	if (k == CLP_OP_KFAC_PRECOND && op->layer >= 0 &&
	    (op->layer < s->stages[op->stage].first_layer ||
	     op->layer >= s->stages[op->stage].first_layer + s->stages[op->stage].nlayers))
		return op_fail(v, r, i, "layer %d is not in stage %d", op->layer, op->stage);
	return CLP_OK;
}

/* Put every F/B/W/message into its record; one of each kind per record, all on one rank. */
static clp_status fill_records(const vctx *v)
{
	const clp_sched *s = v->s;
	char w[256], w2[256];

	for (int r = 0; r < s->nranks; r++) {
		if (s->ranks[r].replica < 0 || s->ranks[r].replica >= s->nreplicas)
			return vfail(v, "rank %d: replica %d out of range [0, %d)", r,
				     s->ranks[r].replica, s->nreplicas);
		for (int i = 0; i < s->ranks[r].nops; i++) {
			const clp_op *op = &s->ranks[r].ops[i];
			rec *rc;

			CLP_TRY(check_fields(v, r, i));
			if (op->kind > CLP_OP_RECV_GRAD)
				continue;
			rc = rec_of(v, r, op);
			if (rc->rank >= 0 && rc->rank != r) {
				int j = 0;

				while (rc->idx[j] < 0)
					j++;
				return vfail(v, "%s: stage %d mb %d is already handled on %s",
					     where(v, r, i, w, sizeof(w)), op->stage, op->mb,
					     where(v, rc->rank, rc->idx[j], w2, sizeof(w2)));
			}
			if (rc->idx[op->kind] >= 0)
				return vfail(v, "%s: duplicate of op %d", where(v, r, i, w, sizeof(w)),
					     rc->idx[op->kind]);
			rc->rank = r;
			rc->idx[op->kind] = i;
		}
	}
	return CLP_OK;
}

static int is_act(int kind)
{
	return kind == CLP_OP_SEND_ACT || kind == CLP_OP_RECV_ACT;
}

static clp_status check_matching(const vctx *v)
{
	const clp_sched *s = v->s;
	char w[256], w2[256];

	for (int r = 0; r < s->nranks; r++)
		for (int i = 0; i < s->ranks[r].nops; i++) {
			const clp_op *op = &s->ranks[r].ops[i], *mo;
			int64_t m = v->ix.match[v->ix.off[r] + i];
			int q;

			if (!clp_op_is_p2p(op->kind))
				continue;
			if (m < 0)
				return vfail(v, "%s: %s", where(v, r, i, w, sizeof(w)),
					     clp_op_is_send(op->kind) ? "no matching receive on the peer"
								      : "the peer sends no matching message");
			q = op->peer;
			mo = &s->ranks[q].ops[m - v->ix.off[q]];
			if (is_act(op->kind) != is_act(mo->kind) || op->mb != mo->mb || op->pipe != mo->pipe || op->step != mo->step ||
			    s->ranks[r].replica != s->ranks[q].replica ||
			    (op->bytes && mo->bytes && op->bytes != mo->bytes))
				return vfail(v, "%s is matched with %s, which differs in kind, "
					     "micro-batch, pipeline, step, replica or bytes",
					     where(v, r, i, w, sizeof(w)),
					     where(v, q, (int)(m - v->ix.off[q]), w2, sizeof(w2)));
		}
	return CLP_OK;
}

/* One FWD and one backward per record, F before B before W on ordered ranks. */
static clp_status check_record(const vctx *v, const rec *rc)
{
	const int *x = rc->idx;
	int any = -1, r = rc->rank;

	for (int j = 0; j < R_N && any < 0; j++)
		any = x[j];
	if (x[R_FWD] < 0)
		return op_fail(v, r, any, "no FWD of this stage and micro-batch on the rank");
	if (x[R_BWD] >= 0 && (x[R_BWD_B] >= 0 || x[R_BWD_W] >= 0))
		return op_fail(v, r, x[R_FWD], "both BWD and a split backward (BWD_B/BWD_W)");
	if (x[R_BWD] < 0 && (x[R_BWD_B] < 0 || x[R_BWD_W] < 0))
		return op_fail(v, r, x[R_FWD], "no backward (BWD, or BWD_B and BWD_W)");
	if (v->s->ranks[r].mode != CLP_RANK_ORDERED)
		return CLP_OK;
	if ((x[R_BWD] >= 0 ? x[R_BWD] : x[R_BWD_B]) < x[R_FWD])
		return op_fail(v, r, x[R_FWD], "the backward (op %d) comes before the forward",
			       x[R_BWD] >= 0 ? x[R_BWD] : x[R_BWD_B]);
	if (x[R_BWD_W] >= 0 && x[R_BWD_W] < x[R_BWD_B])
		return op_fail(v, r, x[R_BWD_W], "BWD_W comes before its BWD_B (op %d)", x[R_BWD_B]);
	return CLP_OK;
}

/* The message from record a (op kind sk, after op `after`) to record b (kind rk, before op
 * `before`), or no message at all if both stages are on one rank. */
static clp_status check_edge(const vctx *v, const rec *a, const rec *b, int sk, int rk,
			     int after, int before, int mb)
{
	const clp_sched *s = v->s;
	int si = a->idx[sk], ri = b->idx[rk];
	char w[256];

	if (a->rank == b->rank) {
		if (si >= 0 || ri >= 0)
			return vfail(v, "%s: both stages run on rank %d, no message is needed",
				     where(v, si >= 0 ? a->rank : b->rank, si >= 0 ? si : ri, w,
					   sizeof(w)), a->rank);
		if (s->ranks[a->rank].mode == CLP_RANK_ORDERED && after > before)
			return vfail(v, "%s comes after op %d, which needs its result (mb %d)",
				     where(v, a->rank, after, w, sizeof(w)), before, mb);
		return CLP_OK;
	}
	if (si < 0)
		return vfail(v, "%s: no %s to rank %d follows it", where(v, a->rank, after, w, sizeof(w)),
			     clp_op_kind_name(sk), b->rank);
	if (ri < 0)
		return vfail(v, "%s: no %s from rank %d precedes it",
			     where(v, b->rank, before, w, sizeof(w)), clp_op_kind_name(rk), a->rank);
	if (s->ranks[a->rank].mode == CLP_RANK_ORDERED && si < after)
		return vfail(v, "%s comes before op %d, which computes what it sends",
			     where(v, a->rank, si, w, sizeof(w)), after);
	if (s->ranks[b->rank].mode == CLP_RANK_ORDERED && ri > before)
		return vfail(v, "%s comes after op %d, which needs it",
			     where(v, b->rank, ri, w, sizeof(w)), before);
	if (v->ix.match[v->ix.off[a->rank] + si] != v->ix.off[b->rank] + ri)
		return vfail(v, "%s is not matched with rank %d op %d, the %s of stage %d mb %d "
			     "(check the tags and the order of messages)",
			     where(v, a->rank, si, w, sizeof(w)), b->rank, ri, clp_op_kind_name(rk),
			     s->ranks[b->rank].ops[ri].stage, mb);
	return CLP_OK;
}

static int bwd_of(const rec *rc)
{
	return rc->idx[R_BWD] >= 0 ? rc->idx[R_BWD] : rc->idx[R_BWD_B];
}

/* Every micro-batch runs exactly the stages of its path, on one pipeline, with the messages
 * between consecutive stages. */
static clp_status check_mb(const vctx *v, int rep, int step, int mb)
{
	const clp_sched *s = v->s;
	const int *path;
	int n = clp_sched_path(s, mb, &path), pipe = -1, visited = 0;

	for (int p = 0; p < s->npipes; p++)
		for (int st = 0; st < s->nstages; st++) {
			const rec *rc = &v->recs[rec_index(s, rep, step, p, st, mb)];

			if (rc->rank < 0)
				continue;
			if (pipe >= 0 && pipe != p)
				return vfail(v, "replica %d mb %d step %d runs on pipelines %d and %d",
					     rep, mb, step, pipe, p);
			pipe = p;
			visited++;
			CLP_TRY(check_record(v, rc));
		}
	if (pipe < 0)
		return vfail(v, "replica %d mb %d step %d is never run", rep, mb, step);
	for (int i = 0; i < n; i++) {
		int st = path ? path[i] : i, nx = i + 1 < n ? (path ? path[i + 1] : i + 1) : -1;
		const rec *a = &v->recs[rec_index(s, rep, step, pipe, st, mb)], *b;

		if (a->rank < 0)
			return vfail(v, "replica %d mb %d step %d never runs stage %d of its path",
				     rep, mb, step, st);
		if (i == 0 && (a->idx[R_RECV_ACT] >= 0 || a->idx[R_SEND_GRAD] >= 0))
			return vfail(v, "mb %d: stage %d starts its path but receives an activation "
				     "or sends a gradient (rank %d)", mb, st, a->rank);
		if (i == 0 && !s->stages[st].embed)
			return vfail(v, "mb %d: its path starts at stage %d, which does not hold the "
				     "embedding", mb, st);
		if (nx < 0) {
			if (a->idx[R_SEND_ACT] >= 0 || a->idx[R_RECV_GRAD] >= 0)
				return vfail(v, "mb %d: stage %d ends its path but sends an activation "
					     "or receives a gradient (rank %d)", mb, st, a->rank);
			if (!s->stages[st].head)
				return vfail(v, "mb %d: its path ends at stage %d, which does not hold "
					     "the head", mb, st);
			continue;
		}
		b = &v->recs[rec_index(s, rep, step, pipe, nx, mb)];
		if (b->rank < 0)
			return vfail(v, "replica %d mb %d step %d never runs stage %d of its path",
				     rep, mb, step, nx);
		CLP_TRY(check_edge(v, a, b, R_SEND_ACT, R_RECV_ACT, a->idx[R_FWD], b->idx[R_FWD], mb));
		CLP_TRY(check_edge(v, b, a, R_SEND_GRAD, R_RECV_GRAD, bwd_of(b), bwd_of(a), mb));
	}
	if (visited != n)
		return vfail(v, "replica %d mb %d step %d runs %d stages, its path has %d", rep, mb,
			     step, visited, n);
	return CLP_OK;
}

static clp_status check_paths(const vctx *v)
{
	for (int rep = 0; rep < v->s->nreplicas; rep++)
		for (int step = 0; step < v->s->nsteps; step++)
			for (int mb = 0; mb < v->s->nmb; mb++)
				CLP_TRY(check_mb(v, rep, step, mb));
	return CLP_OK;
}

static int same_collective(const clp_op *a, const clp_op *b)
{
	return a->kind == b->kind && a->what == b->what && a->stage == b->stage &&
	       a->layer == b->layer && a->bytes == b->bytes && a->peer == b->peer;
}

/* Each member issues its group's collectives in the order of the group's first member (ref[],
 * the op indices of the first member's collectives, group by group from base[g]). */
static clp_status check_collectives(const vctx *v)
{
	const clp_sched *s = v->s;
	int64_t *base = calloc((size_t)s->ngroups + 1, sizeof(*base));
	int64_t *seen = calloc((size_t)s->ngroups + 1, sizeof(*seen));
	int *ref = NULL;
	clp_status st = CLP_OK;
	char w[256], w2[256];

	if (!base || !seen)
		goto out_nomem;
	for (int g = 0; g < s->ngroups; g++) {
		const clp_rank_prog *p = &s->ranks[s->groups[g].ranks[0]];

		base[g + 1] = base[g];
		for (int i = 0; i < p->nops; i++)
			base[g + 1] += clp_op_is_collective(p->ops[i].kind) && p->ops[i].group == g;
	}
	ref = malloc((size_t)base[s->ngroups] * sizeof(int) + 1);
	if (!ref)
		goto out_nomem;
	for (int g = 0; g < s->ngroups; g++) {
		const clp_rank_prog *p = &s->ranks[s->groups[g].ranks[0]];

		for (int i = 0, k = 0; i < p->nops; i++)
			if (clp_op_is_collective(p->ops[i].kind) && p->ops[i].group == g)
				ref[base[g] + k++] = i;
	}
	for (int r = 0; r < s->nranks && st == CLP_OK; r++) {
		memset(seen, 0, (size_t)s->ngroups * sizeof(*seen));
		for (int i = 0; i < s->ranks[r].nops && st == CLP_OK; i++) {
			const clp_op *op = &s->ranks[r].ops[i];
			int g = op->group, r0;
			int64_t k;

			if (!clp_op_is_collective(op->kind))
				continue;
			r0 = s->groups[g].ranks[0];
			k = seen[g]++;
			if (base[g] + k >= base[g + 1])
				st = vfail(v, "%s: collective #%lld of group %d, but rank %d issues only "
					   "%lld", where(v, r, i, w, sizeof(w)), (long long)k, g, r0,
					   (long long)(base[g + 1] - base[g]));
			else if (!same_collective(op, &s->ranks[r0].ops[ref[base[g] + k]]))
				st = vfail(v, "group %d: collective #%lld is %s but %s (the order differs "
					   "between members)", g, (long long)k,
					   where(v, r0, ref[base[g] + k], w, sizeof(w)),
					   where(v, r, i, w2, sizeof(w2)));
		}
		for (int g = 0; g < s->ngroups && st == CLP_OK; g++) {
			int member = 0;

			for (int j = 0; j < s->groups[g].n; j++)
				member |= s->groups[g].ranks[j] == r;
			if (member && seen[g] != base[g + 1] - base[g])
				st = vfail(v, "rank %d issues %lld collectives of group %d, rank %d "
					   "issues %lld", r, (long long)seen[g], g, s->groups[g].ranks[0],
					   (long long)(base[g + 1] - base[g]));
		}
	}
	goto out_free;
out_nomem:
	st = clp_error(CLP_ERR_NOMEM, "validator: out of host memory");
out_free:
	free(ref);
	free(base);
	free(seen);
	return st;
}

static clp_status dry_run(const vctx *v)
{
	clp_sim_opts o;
	clp_sim_result res;
	clp_status st;

	clp_sim_opts_default(&o);
	o.eager_bytes = 0;
	o.trace_limit = 0;
	st = clp_sim_run(v->s, &o, &res);
	if (st == CLP_OK) {
		clp_sim_result_free(&res);
		return CLP_OK;
	}
	if (st == CLP_ERR_STATE)
		return clp_error_context(CLP_ERR_INVALID, "schedule %s%s%s%s: dry run with "
					 "rendezvous sends: ", v->s->file, v->s->file[0] ? " (" : "",
					 v->s->name, v->s->file[0] ? ")" : "");
	return st;
}

/* Split K-FAC work (engine/pass/pipefisher.h, opts.split): in every step, a stage whose layers
 * are preconditioned one by one has each of its layers preconditioned by exactly one rank,
 * after which every such rank exchanges the stage's results (KFAC_PREC_SYNC) before its
 * OPT_STEP of the stage; a layer whose inverses are exchanged (KFAC_INV_SYNC) is inverted by
 * exactly one member of the exchange's group in the cycle, before the exchange in its list;
 * the phases of an inversion (KFAC_INV op.mb 0, 1, 2) come in order on one rank. */
static clp_status check_kfac_split(const vctx *v)
{
	const clp_sched *s = v->s;

	for (int r = 0; r < s->nranks; r++) {
		const clp_rank_prog *p = &s->ranks[r];

		for (int i = 0; i < p->nops; i++) {
			const clp_op *o = &p->ops[i];
			int seen = 0, owners = 0;

			if (o->kind == CLP_OP_KFAC_PRECOND && o->layer >= 0) {
				int q = i + 1; /* this step's exchange of the stage, then its OPT_STEP */

				while (q < p->nops && !(p->ops[q].kind == CLP_OP_KFAC_PREC_SYNC &&
							p->ops[q].stage == o->stage && p->ops[q].step == o->step))
					q++;
				for (int u = q; u < p->nops && !seen; u++)
					seen = p->ops[u].kind == CLP_OP_OPT_STEP &&
					       p->ops[u].stage == o->stage && p->ops[u].step == o->step;
				if (!seen)
					return op_fail(v, r, i, "no KFAC_PREC_SYNC of stage %d between it "
						       "and the stage's OPT_STEP of step %d", o->stage,
						       o->step);
				for (int r2 = 0; r2 < s->nranks; r2++)
					for (int u = 0; u < s->ranks[r2].nops; u++) {
						const clp_op *x = &s->ranks[r2].ops[u];

						owners += x->kind == CLP_OP_KFAC_PRECOND && x->layer == o->layer &&
							  x->step == o->step;
					}
				if (owners != 1)
					return op_fail(v, r, i, "layer %d is preconditioned %d times in "
						       "step %d (once: by its owner)", o->layer, owners, o->step);
			}
			for (int u = 0; o->kind == CLP_OP_KFAC_INV && o->mb > 0 && u < i && !seen; u++)
				seen = p->ops[u].kind == CLP_OP_KFAC_INV && p->ops[u].layer == o->layer &&
				       p->ops[u].factor == o->factor && p->ops[u].mb == o->mb - 1;
			if (o->kind == CLP_OP_KFAC_INV && o->mb > 0 && !seen)
				return op_fail(v, r, i, "phase %d of an inversion does not follow phase %d "
					       "of the same factor on this rank", o->mb, o->mb - 1);
			seen = 0;
			if (o->kind == CLP_OP_KFAC_INV_SYNC) {
				const clp_group *g = &s->groups[o->group];

				for (int m = 0; m < g->n; m++) {
					const clp_rank_prog *pm = &s->ranks[g->ranks[m]];
					int has = 0;

					for (int u = 0; u < pm->nops && !has; u++)
						has = pm->ops[u].kind == CLP_OP_KFAC_INV &&
						      pm->ops[u].layer == o->layer &&
						      (g->ranks[m] != r || u < i);
					owners += has;
				}
				if (owners != 1)
					return op_fail(v, r, i, "%d members of group %d invert layer %d before "
						       "its exchange (one owner must)", owners, o->group,
						       o->layer);
			}
		}
	}
	return CLP_OK;
}

/* The checks in turn, returning at the first failure (v->ix is the caller's to free). */
static clp_status validate_steps(vctx *v, int dry)
{
	CLP_TRY(clp_sched_index_build(v->s, &v->ix));
	CLP_TRY(fill_records(v));
	CLP_TRY(check_matching(v));
	CLP_TRY(check_paths(v));
	CLP_TRY(check_collectives(v));
	CLP_TRY(check_kfac_split(v));
	return dry ? dry_run(v) : CLP_OK;
}

clp_status clp_sched_validate(const clp_sched *s, int dry)
{
	size_t nrec = (size_t)s->nreplicas * (size_t)s->nsteps * (size_t)s->npipes *
		      (size_t)s->nstages * (size_t)s->nmb;
	vctx v = {s, {0}, NULL};
	clp_status st;

	if (nrec > ((size_t)1 << 28))
		return clp_error(CLP_ERR_INVALID, "schedule %s%s%s%s: %zu (replica, step, pipeline, "
				 "stage, micro-batch) records is past the validator's limit", s->file,
				 s->file[0] ? " (" : "", s->name, s->file[0] ? ")" : "", nrec);
	v.recs = malloc(nrec * sizeof(*v.recs));
	if (!v.recs)
		return clp_error(CLP_ERR_NOMEM, "validator: out of host memory");
	memset(v.recs, 0xff, nrec * sizeof(*v.recs)); /* rank and every index -1 */
	st = validate_steps(&v, dry);
	clp_sched_index_free(&v.ix);
	free(v.recs);
	return st;
}
