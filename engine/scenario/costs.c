/* Cost table: construction, JSON reader/writer, lookup and calibration (see costs.h). */
#include "engine/scenario/costs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/json_util.h"
#include "engine/scenario/trace.h"
#include "engine/sched/sched.h"

#define COSTS_FORMAT "clpipe-costs"

/* NULL-ended, so that it also serves as the list of keys a device-kind entry may have. */
static const char *const time_names[CLP_COST_NTIMES + 1] = {
	"fwd_s", "bwd_s", "bwd_b_s", "bwd_w_s", "opt_s", "kfac_curv_a_s", "kfac_curv_b_s",
	"kfac_inv_s", "kfac_precond_s", NULL,
};

const char *clp_cost_time_name(int t)
{
	return t >= 0 && t < CLP_COST_NTIMES ? time_names[t] : "?";
}

void clp_costs_free(clp_costs *c)
{
	if (!c)
		return;
	free(c->stages);
	free(c->kinds);
	free(c->kind_t);
	free(c);
}

clp_status clp_costs_create(int nstages, clp_costs **out)
{
	clp_costs *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (nstages < 1)
		return clp_error(CLP_ERR_INVALID, "cost table: needs at least one stage");
	if (!c || !(c->stages = calloc((size_t)nstages, sizeof(*c->stages)))) {
		clp_costs_free(c);
		return clp_error(CLP_ERR_NOMEM, "cost table: out of host memory");
	}
	c->nstages = nstages;
	snprintf(c->device_kind, sizeof(c->device_kind), "default");
	for (int s = 0; s < nstages; s++)
		c->stages[s].nlayers = 1;
	*out = c;
	return CLP_OK;
}

clp_status clp_costs_uniform(int nstages, double tf, double tb, double tw, clp_costs **out)
{
	CLP_TRY(clp_costs_create(nstages, out));
	if (tw < 0)
		tw = tb / 2;
	for (int s = 0; s < nstages; s++) {
		double *t = (*out)->stages[s].t;

		t[CLP_COST_FWD] = tf;
		t[CLP_COST_BWD] = tb;
		t[CLP_COST_BWD_B] = tb - tw;
		t[CLP_COST_BWD_W] = tw;
	}
	snprintf((*out)->source, sizeof((*out)->source), "uniform: F %g s, B %g s, W %g s", tf, tb,
		 tw);
	return CLP_OK;
}

static int dtype_of(const char *name)
{
	for (int t = 0; t < CLP_DTYPE_COUNT; t++)
		if (!strcmp(name, clp_dtype_name((clp_dtype)t)))
			return t;
	return -1;
}

clp_status clp_costs_precision_parse(const char *name, const char *origin, clp_dtype *out)
{
	int t = dtype_of(name);

	if (t < 0)
		return clp_error(CLP_ERR_INVALID, "%s: \"%s\" is not a precision (fp32, bf16 or "
				 "fp16)", origin, name);
	*out = (clp_dtype)t;
	return CLP_OK;
}

/* n x size(to) / size(from), exact for sizes made of whole elements */
static int64_t convert_bytes(int64_t n, clp_dtype from, clp_dtype to)
{
	int64_t a = (int64_t)clp_dtype_size(from), b = (int64_t)clp_dtype_size(to);

	return n / a * b + n % a * b / a;
}

void clp_costs_set_precision(clp_costs *c, clp_dtype p)
{
	for (int s = 0; s < c->nstages; s++) {
		clp_stage_cost *x = &c->stages[s];

		x->out_bytes = convert_bytes(x->out_bytes, c->precision, p);
		x->act_bytes = convert_bytes(x->act_bytes, c->precision, p);
		x->act_w_bytes = convert_bytes(x->act_w_bytes, c->precision, p);
	}
	c->precision = p;
}

int64_t clp_costs_wcopy_bytes(const clp_costs *c, int s)
{
	if (c->precision == CLP_F32 || s < 0 || s >= c->nstages)
		return 0;
	return c->stages[s].param_bytes / 4 * (int64_t)clp_dtype_size(c->precision);
}

int clp_costs_kind_index(const clp_costs *c, const char *kind)
{
	for (int k = 0; k < c->nkinds; k++)
		if (!strcmp(c->kinds[k], kind))
			return k;
	return -1;
}

double clp_costs_time(const clp_costs *c, int s, int t, int kind_index, double speed)
{
	if (kind_index >= 0) {
		double v = c->kind_t[((size_t)kind_index * (size_t)c->nstages + (size_t)s) *
					     CLP_COST_NTIMES + (size_t)t];

		if (!isnan(v))
			return v;
	}
	return c->stages[s].t[t] / (speed > 0 ? speed : 1);
}

/* Times of one object (a stage, or a stage's entry for a device kind); absent ones stay NAN. */
static clp_status read_times(const char *file, const char *at, const json_t *o, double *t)
{
	for (int i = 0; i < CLP_COST_NTIMES; i++) {
		t[i] = NAN;
		CLP_TRY(clp_json_num(file, at, o, time_names[i], 0, 0, 1e9, &t[i]));
	}
	return CLP_OK;
}

/* Complete the backward: bwd_s = B + W, or B = W = bwd_s / 2, or the missing half. */
static clp_status fill_backward(const char *file, const char *at, double *t, int required)
{
	double *b = &t[CLP_COST_BWD], *bb = &t[CLP_COST_BWD_B], *bw = &t[CLP_COST_BWD_W];

	if (isnan(*b) && !isnan(*bb) && !isnan(*bw))
		*b = *bb + *bw;
	if (isnan(*b)) {
		if (!required)
			return CLP_OK;
		return clp_error(CLP_ERR_FORMAT, "%s: %s.bwd_s: missing (required, or give bwd_b_s "
				 "and bwd_w_s)", file, at);
	}
	if (isnan(*bb) && isnan(*bw))
		*bb = *bw = *b / 2;
	else if (isnan(*bb))
		*bb = *b - *bw;
	else if (isnan(*bw))
		*bw = *b - *bb;
	if (*bb < 0 || *bw < 0 || fabs(*bb + *bw - *b) > 1e-9 * (*b + 1e-30) + 1e-15)
		return clp_error(CLP_ERR_FORMAT, "%s: %s: bwd_b_s + bwd_w_s (%g + %g) must equal "
				 "bwd_s (%g)", file, at, *bb, *bw, *b);
	return CLP_OK;
}

static clp_status read_kinds(const char *file, const char *at, const json_t *devs, clp_costs *c,
			     int s)
{
	const char *kind;
	json_t *o;

	json_object_foreach((json_t *)devs, kind, o) {
		char kat[160];
		int k = clp_costs_kind_index(c, kind);
		double *t;

		snprintf(kat, sizeof(kat), "%s.devices.%s", at, kind);
		CLP_TRY(clp_json_expect_obj(file, kat, o));
		CLP_TRY(clp_json_check_keys(file, kat, o, time_names));
		if (strlen(kind) >= CLP_NAME_MAX)
			return clp_error(CLP_ERR_FORMAT, "%s: %s: device kind name too long", file,
					 kat);
		if (k < 0) {
			void *kinds = realloc(c->kinds, (size_t)(c->nkinds + 1) * sizeof(*c->kinds));
			size_t per = (size_t)c->nstages * CLP_COST_NTIMES;
			double *kt;

			if (!kinds)
				return clp_error(CLP_ERR_NOMEM, "%s: out of host memory", file);
			c->kinds = kinds;
			kt = realloc(c->kind_t, (size_t)(c->nkinds + 1) * per * sizeof(double));
			if (!kt)
				return clp_error(CLP_ERR_NOMEM, "%s: out of host memory", file);
			c->kind_t = kt;
			for (size_t i = 0; i < per; i++)
				kt[(size_t)c->nkinds * per + i] = NAN;
			snprintf(c->kinds[c->nkinds], CLP_NAME_MAX, "%s", kind);
			k = c->nkinds++;
		}
		t = &c->kind_t[((size_t)k * (size_t)c->nstages + (size_t)s) * CLP_COST_NTIMES];
		CLP_TRY(read_times(file, kat, o, t));
		CLP_TRY(fill_backward(file, kat, t, 0));
	}
	return CLP_OK;
}

static clp_status read_stage(const char *file, const json_t *o, clp_costs *c, int s)
{
	static const char *const keys[] = {
		"fwd_s", "bwd_s", "bwd_b_s", "bwd_w_s", "opt_s", "kfac_curv_a_s", "kfac_curv_b_s",
		"kfac_inv_s", "kfac_precond_s", "act_bytes", "act_w_bytes", "out_bytes",
		"param_bytes", "frozen_bytes", "opt_bytes", "kfac_bytes", "work_bytes", "layers", "devices", "blocks",
		"prep_s", NULL};
	clp_stage_cost *sc = &c->stages[s];
	char at[64];
	json_t *devs, *blocks;

	snprintf(at, sizeof(at), "stages[%d]", s);
	CLP_TRY(clp_json_expect_obj(file, at, o));
	CLP_TRY(clp_json_check_keys(file, at, o, keys));
	CLP_TRY(read_times(file, at, o, sc->t));
	if (isnan(sc->t[CLP_COST_FWD]))
		return clp_error(CLP_ERR_FORMAT, "%s: %s.fwd_s: missing (required)", file, at);
	CLP_TRY(fill_backward(file, at, sc->t, 1));
	for (int i = 0; i < CLP_COST_NTIMES; i++)
		if (isnan(sc->t[i]))
			sc->t[i] = 0;
	sc->opt_bytes = -1;
	sc->act_w_bytes = -1;
	CLP_TRY(clp_json_i64(file, at, o, "act_bytes", 0, 0, CLP_COST_MAX_BYTES,
				  &sc->act_bytes));
	CLP_TRY(clp_json_i64(file, at, o, "act_w_bytes", 0, 0, CLP_COST_MAX_BYTES,
				  &sc->act_w_bytes));
	CLP_TRY(clp_json_i64(file, at, o, "out_bytes", 0, 0, CLP_COST_MAX_BYTES,
				  &sc->out_bytes));
	CLP_TRY(clp_json_i64(file, at, o, "param_bytes", 0, 0, CLP_COST_MAX_BYTES,
				  &sc->param_bytes));
	CLP_TRY(clp_json_i64(file, at, o, "frozen_bytes", 0, 0, CLP_COST_MAX_BYTES,
				  &sc->frozen_bytes));
	CLP_TRY(clp_json_i64(file, at, o, "opt_bytes", 0, 0, CLP_COST_MAX_BYTES,
				  &sc->opt_bytes));
	CLP_TRY(clp_json_i64(file, at, o, "kfac_bytes", 0, 0, CLP_COST_MAX_BYTES,
				  &sc->kfac_bytes));
	CLP_TRY(clp_json_i64(file, at, o, "work_bytes", 0, 0, CLP_COST_MAX_BYTES,
				  &sc->work_bytes));
	CLP_TRY(clp_json_int(file, at, o, "layers", 0, 1, 1 << 20, &sc->nlayers));
	CLP_TRY(clp_json_num(file, at, o, "prep_s", 0, 0, 1e9, &sc->prep_s));
	if (sc->prep_s > sc->t[CLP_COST_OPT])
		return clp_error(CLP_ERR_FORMAT, "%s: %s.prep_s (%g) exceeds opt_s (%g): it is the "
				 "part of the optimizer step an OPT_PREP runs early", file, at,
				 sc->prep_s, sc->t[CLP_COST_OPT]);
	/* free-form: kept (truncated) when it is a string, accepted whatever it is */
	blocks = json_object_get(o, "blocks");
	if (json_is_string(blocks))
		snprintf(sc->blocks, sizeof(sc->blocks), "%s", json_string_value(blocks));
	if (sc->frozen_bytes > sc->param_bytes)
		return clp_error(CLP_ERR_FORMAT, "%s: %s.frozen_bytes (%lld) exceeds param_bytes "
				 "(%lld)", file, at, (long long)sc->frozen_bytes,
				 (long long)sc->param_bytes);
	if (sc->opt_bytes < 0)
		sc->opt_bytes = 2 * clp_cost_grad_bytes(sc);
	if (sc->act_w_bytes < 0)
		sc->act_w_bytes = sc->act_bytes;
	if (sc->act_w_bytes > sc->act_bytes)
		return clp_error(CLP_ERR_FORMAT, "%s: %s.act_w_bytes (%lld) exceeds act_bytes (%lld)",
				 file, at, (long long)sc->act_w_bytes, (long long)sc->act_bytes);
	CLP_TRY(clp_json_obj(file, at, o, "devices", 0, &devs));
	if (devs)
		CLP_TRY(read_kinds(file, at, devs, c, s));
	return CLP_OK;
}

static clp_status read_shares(const char *path, const json_t *a, clp_costs *c)
{
	double sum = 0;

	if (json_array_size(a) > CLP_COST_MAX_FACTORS)
		return clp_error(CLP_ERR_FORMAT, "%s: kfac_factor_shares: at most %d factors", path,
				 CLP_COST_MAX_FACTORS);
	for (size_t i = 0; i < json_array_size(a); i++) {
		const json_t *v = json_array_get(a, i);

		if (!json_is_number(v) || !(json_number_value(v) >= 0))
			return clp_error(CLP_ERR_FORMAT, "%s: kfac_factor_shares[%zu]: expected a "
					 "number >= 0", path, i);
		c->kfac_share[i] = json_number_value(v);
		sum += c->kfac_share[i];
	}
	if (json_array_size(a) && fabs(sum - 1) > 1e-6)
		return clp_error(CLP_ERR_FORMAT, "%s: kfac_factor_shares sum to %g, not 1", path, sum);
	c->kfac_nfactors = (int)json_array_size(a);
	return CLP_OK;
}

clp_status clp_costs_set_kfac_factors(clp_costs *c, const int *dims, int n)
{
	double sum = 0;

	if (n < 0 || n > CLP_COST_MAX_FACTORS)
		return clp_error(CLP_ERR_INVALID, "cost table: %d K-FAC factors per layer (at most "
				 "%d)", n, CLP_COST_MAX_FACTORS);
	for (int i = 0; i < n; i++) {
		if (dims[i] < 1)
			return clp_error(CLP_ERR_INVALID, "cost table: K-FAC factor %d has dimension %d",
					 i, dims[i]);
		sum += (double)dims[i] * dims[i] * dims[i];
	}
	for (int i = 0; i < n; i++)
		c->kfac_share[i] = (double)dims[i] * dims[i] * dims[i] / sum;
	c->kfac_nfactors = n;
	return CLP_OK;
}

/* The fields of a cost table's root into *cp (created here, freed by the caller). */
static clp_status read_costs(const char *path, json_t *root, clp_costs **cp)
{
	static const char *const keys[] = {"format", "version", "source", "device_kind",
					   "micro_batch_size", "precision", "kfac_factor_shares",
					   "stages", NULL};
	json_t *stages, *shares = NULL;
	char prec[16] = "fp32";
	clp_costs *c;

	CLP_TRY(clp_json_check_format(path, root, COSTS_FORMAT, 1));
	CLP_TRY(clp_json_check_keys(path, "", root, keys));
	CLP_TRY(clp_json_arr(path, "", root, "stages", 1, &stages));
	if (json_array_size(stages) == 0)
		return clp_error(CLP_ERR_FORMAT, "%s: stages: needs at least one stage", path);
	CLP_TRY(clp_costs_create((int)json_array_size(stages), cp));
	c = *cp;
	CLP_TRY(clp_json_str(path, "", root, "source", 0, c->source, sizeof(c->source)));
	CLP_TRY(clp_json_str(path, "", root, "device_kind", 0, c->device_kind,
			     sizeof(c->device_kind)));
	CLP_TRY(clp_json_int(path, "", root, "micro_batch_size", 0, 0, 1 << 30,
			     &c->micro_batch_size));
	CLP_TRY(clp_json_str(path, "", root, "precision", 0, prec, sizeof(prec)));
	if (dtype_of(prec) < 0)
		return clp_error(CLP_ERR_FORMAT, "%s: precision: \"%s\" is not a precision (fp32, "
				 "bf16 or fp16)", path, prec);
	c->precision = (clp_dtype)dtype_of(prec);
	for (int s = 0; s < c->nstages; s++)
		CLP_TRY(read_stage(path, json_array_get(stages, (size_t)s), c, s));
	CLP_TRY(clp_json_arr(path, "", root, "kfac_factor_shares", 0, &shares));
	if (shares)
		CLP_TRY(read_shares(path, shares, c));
	return CLP_OK;
}

clp_status clp_costs_load(const char *path, clp_costs **out)
{
	json_t *root;
	clp_costs *c = NULL;
	clp_status st;

	*out = NULL;
	CLP_TRY(clp_json_load(path, &root));
	st = read_costs(path, root, &c);
	json_decref(root);
	if (st != CLP_OK) {
		clp_costs_free(c);
		return st;
	}
	snprintf(c->file, sizeof(c->file), "%s", path);
	*out = c;
	return CLP_OK;
}

static void put_times(json_t *o, const double *t, int skip_zero)
{
	for (int i = 0; i < CLP_COST_NTIMES; i++)
		if (!isnan(t[i]) && !(skip_zero && t[i] == 0 && i != CLP_COST_FWD &&
				      i != CLP_COST_BWD))
			json_object_set_new(o, time_names[i], json_real(t[i]));
}

clp_status clp_costs_save(const clp_costs *c, const char *path)
{
	json_t *root = json_object(), *stages = json_array();
	clp_status st;

	json_object_set_new(root, "format", json_string(COSTS_FORMAT));
	json_object_set_new(root, "version", json_integer(1));
	json_object_set_new(root, "source", json_string(c->source));
	json_object_set_new(root, "device_kind", json_string(c->device_kind));
	if (c->micro_batch_size)
		json_object_set_new(root, "micro_batch_size", json_integer(c->micro_batch_size));
	json_object_set_new(root, "precision", json_string(clp_dtype_name(c->precision)));
	if (c->kfac_nfactors) {
		json_t *a = json_array();

		for (int i = 0; i < c->kfac_nfactors; i++)
			json_array_append_new(a, json_real(c->kfac_share[i]));
		json_object_set_new(root, "kfac_factor_shares", a);
	}
	for (int s = 0; s < c->nstages; s++) {
		const clp_stage_cost *sc = &c->stages[s];
		json_t *o = json_object();

		put_times(o, sc->t, 1);
		json_object_set_new(o, "act_bytes", json_integer(sc->act_bytes));
		json_object_set_new(o, "act_w_bytes", json_integer(sc->act_w_bytes));
		json_object_set_new(o, "out_bytes", json_integer(sc->out_bytes));
		json_object_set_new(o, "param_bytes", json_integer(sc->param_bytes));
		if (sc->frozen_bytes)
			json_object_set_new(o, "frozen_bytes", json_integer(sc->frozen_bytes));
		json_object_set_new(o, "opt_bytes", json_integer(sc->opt_bytes));
		if (sc->kfac_bytes)
			json_object_set_new(o, "kfac_bytes", json_integer(sc->kfac_bytes));
		if (sc->work_bytes)
			json_object_set_new(o, "work_bytes", json_integer(sc->work_bytes));
		json_object_set_new(o, "layers", json_integer(sc->nlayers));
		if (sc->prep_s > 0)
			json_object_set_new(o, "prep_s", json_real(sc->prep_s));
		if (sc->blocks[0])
			json_object_set_new(o, "blocks", json_string(sc->blocks));
		if (c->nkinds) {
			json_t *devs = json_object();

			for (int k = 0; k < c->nkinds; k++) {
				json_t *d = json_object();

				put_times(d, &c->kind_t[((size_t)k * (size_t)c->nstages +
							 (size_t)s) * CLP_COST_NTIMES], 0);
				if (json_object_size(d))
					json_object_set_new(devs, c->kinds[k], d);
				else
					json_decref(d);
			}
			json_object_set_new(o, "devices", devs);
		}
		json_array_append_new(stages, o);
	}
	json_object_set_new(root, "stages", stages);
	st = clp_json_save(path, root);
	json_decref(root);
	return st;
}

/* K-FAC items in a trace are finer than the table: factors per layer and micro-batch, the
 * inversion per layer and factor (op.factor in the event's `what`; 0: the whole layer). A
 * stage's time is the sum over its layers (and factors) of each item's mean duration, so
 * several cycles, holders or replicas in the trace change nothing. Events without a layer
 * (older traces) count as the mean layer. The three phases of an inversion (a split cycle's
 * KFAC_INV with mb 0, 1, 2) add up to one. The inversion shares of the factors follow too when
 * the trace has every factor. */
#define CAL_F (CLP_COST_MAX_FACTORS + 1)
static clp_status calibrate_kfac(clp_costs *c, const clp_trace *t, int *nset)
{
	static const int kinds[3] = {CLP_OP_KFAC_CURV_A, CLP_OP_KFAC_CURV_B, CLP_OP_KFAC_INV};
	static const int times[3] = {CLP_COST_KFAC_CURV_A, CLP_COST_KFAC_CURV_B, CLP_COST_KFAC_INV};
	int L = 0, maxf = 0;
	size_t n;
	double *sum, *share, all = 0;
	int64_t *cnt;

	for (size_t i = 0; i < t->n; i++)
		if (t->ev[i].kind >= CLP_OP_KFAC_CURV_A && t->ev[i].kind <= CLP_OP_KFAC_INV &&
		    t->ev[i].layer + 1 > L)
			L = t->ev[i].layer + 1;
	L++; /* the last slot: events without a layer */
	n = (size_t)c->nstages * 3 * (size_t)L * CAL_F;
	sum = calloc(n, sizeof(double));
	cnt = calloc(n, sizeof(int64_t));
	share = calloc(CAL_F, sizeof(double));
	if (!sum || !cnt || !share) {
		free(sum);
		free(cnt);
		free(share);
		return clp_error(CLP_ERR_NOMEM, "calibration: out of host memory");
	}
	for (size_t i = 0; i < t->n; i++) {
		const clp_trace_event *e = &t->ev[i];
		int w = e->kind == kinds[0] ? 0 : e->kind == kinds[1] ? 1 : e->kind == kinds[2] ? 2 : -1;
		int l = e->layer >= 0 ? e->layer : L - 1, f = w == 2 && e->what < CAL_F ? e->what : 0;
		size_t at;

		if (w < 0 || e->queue != CLP_TQ_COMPUTE || e->stage < 0 || e->stage >= c->nstages)
			continue;
		at = (((size_t)e->stage * 3 + (size_t)w) * (size_t)L + (size_t)l) * CAL_F + (size_t)f;
		sum[at] += e->t1 - e->t0;
		cnt[at] += !(w == 2 && e->mb > 0); /* an inversion in phases counts once */
		maxf = f > maxf ? f : maxf;
	}
	for (int st = 0; st < c->nstages; st++)
		for (int w = 0; w < 3; w++) {
			double known = 0, unknown = 0;
			int any = 0, anyu = 0;

			for (int l = 0; l < L; l++)
				for (int f = 0; f < CAL_F; f++) {
					size_t at = (((size_t)st * 3 + (size_t)w) * (size_t)L + (size_t)l) *
						    CAL_F + (size_t)f;
					double m;

					if (!cnt[at])
						continue;
					m = sum[at] / (double)cnt[at];
					if (l < L - 1) {
						known += m;
						any = 1;
					} else {
						unknown += m;
						anyu = 1;
					}
					if (w == 2 && f > 0) {
						share[f] += m;
						all += m;
					}
				}
			if (!any && !anyu)
				continue;
			c->stages[st].t[times[w]] = any ? known : unknown * c->stages[st].nlayers;
			(*nset)++;
		}
	for (int f = 1; f <= maxf && all > 0; f++)
		if (!(share[f] > 0))
			all = 0; /* a factor missing: keep the table's shares */
	if (all > 0) {
		c->kfac_nfactors = maxf;
		for (int f = 1; f <= maxf; f++)
			c->kfac_share[f - 1] = share[f] / all;
	}
	free(sum);
	free(cnt);
	free(share);
	return CLP_OK;
}

/* A split cycle preconditions layer by layer (KFAC_PRECOND with a layer, each on its owner): a
 * stage's time is the sum of its layers' means (scaled up to the stage's layer count when the
 * trace has only some of them); stages preconditioned whole keep their mean. */
static clp_status calibrate_precond_layers(clp_costs *c, const clp_trace *t, int *nset)
{
	int L = 0;
	double *sum;
	int64_t *cnt, *whole;

	for (size_t i = 0; i < t->n; i++)
		if (t->ev[i].kind == CLP_OP_KFAC_PRECOND && t->ev[i].layer + 1 > L)
			L = t->ev[i].layer + 1;
	sum = calloc((size_t)c->nstages * (size_t)L + 1, sizeof(double));
	cnt = calloc((size_t)c->nstages * (size_t)L + 1, sizeof(int64_t));
	whole = calloc((size_t)c->nstages + 1, sizeof(int64_t));
	if (!sum || !cnt || !whole) {
		free(sum);
		free(cnt);
		free(whole);
		return clp_error(CLP_ERR_NOMEM, "calibration: out of host memory");
	}
	for (size_t i = 0; i < t->n; i++) {
		const clp_trace_event *e = &t->ev[i];

		if (e->kind != CLP_OP_KFAC_PRECOND || e->queue != CLP_TQ_COMPUTE || e->stage < 0 ||
		    e->stage >= c->nstages)
			continue;
		if (e->layer < 0) {
			whole[e->stage]++;
			continue;
		}
		sum[(size_t)e->stage * (size_t)L + (size_t)e->layer] += e->t1 - e->t0;
		cnt[(size_t)e->stage * (size_t)L + (size_t)e->layer]++;
	}
	for (int s = 0; s < c->nstages; s++) {
		double tot = 0;
		int seen = 0;

		for (int l = 0; l < L; l++)
			if (cnt[(size_t)s * (size_t)L + (size_t)l]) {
				tot += sum[(size_t)s * (size_t)L + (size_t)l] /
				       (double)cnt[(size_t)s * (size_t)L + (size_t)l];
				seen++;
			}
		if (whole[s] || !seen)
			continue;
		if (c->stages[s].nlayers > seen)
			tot *= (double)c->stages[s].nlayers / seen;
		c->stages[s].t[CLP_COST_KFAC_PRECOND] = tot;
		(*nset)++;
	}
	free(sum);
	free(cnt);
	free(whole);
	return CLP_OK;
}

clp_status clp_costs_calibrate(clp_costs *c, const clp_trace *t, int *nset)
{
	static const struct {
		int kind, time;
	} map[] = {{CLP_OP_FWD, CLP_COST_FWD},       {CLP_OP_BWD, CLP_COST_BWD},
		   {CLP_OP_BWD_B, CLP_COST_BWD_B},   {CLP_OP_BWD_W, CLP_COST_BWD_W},
		   {CLP_OP_OPT_STEP, CLP_COST_OPT},  {CLP_OP_KFAC_PRECOND, CLP_COST_KFAC_PRECOND}};
	size_t n = (size_t)c->nstages * CLP_COST_NTIMES;
	double *sum = calloc(n, sizeof(double));
	double *prep = calloc((size_t)c->nstages + 1, sizeof(double));
	int64_t *cnt = calloc(n, sizeof(int64_t));
	int pl = 0;

	*nset = 0;
	if (!sum || !cnt || !prep) {
		free(sum);
		free(cnt);
		free(prep);
		return clp_error(CLP_ERR_NOMEM, "calibration: out of host memory");
	}
	for (size_t i = 0; i < t->n; i++) {
		const clp_trace_event *e = &t->ev[i];

		if (e->queue != CLP_TQ_COMPUTE || e->stage < 0 || e->stage >= c->nstages)
			continue;
		if (e->kind == CLP_OP_KFAC_PRECOND && e->layer >= 0) {
			pl = 1; /* a split cycle's: per layer, below */
			continue;
		}
		if (e->kind == CLP_OP_OPT_PREP) { /* the early part of the stage's optimizer step
						   * (Muon): its time joins the step's, one count */
			sum[(size_t)e->stage * CLP_COST_NTIMES + CLP_COST_OPT] += e->t1 - e->t0;
			prep[e->stage] += e->t1 - e->t0;
			continue;
		}
		for (size_t k = 0; k < sizeof(map) / sizeof(map[0]); k++)
			if (map[k].kind == e->kind) {
				size_t at = (size_t)e->stage * CLP_COST_NTIMES + (size_t)map[k].time;

				sum[at] += e->t1 - e->t0;
				cnt[at]++;
			}
	}
	for (int s = 0; s < c->nstages; s++) {
		const int64_t *nb = &cnt[(size_t)s * CLP_COST_NTIMES];
		double *tt = c->stages[s].t;

		for (int k = 0; k < CLP_COST_NTIMES; k++) {
			size_t at = (size_t)s * CLP_COST_NTIMES + (size_t)k;

			if (cnt[at]) {
				tt[k] = sum[at] / (double)cnt[at];
				(*nset)++;
			}
		}
		/* Keep bwd_s = bwd_b_s + bwd_w_s whichever form the trace measured. */
		if (!nb[CLP_COST_BWD] && nb[CLP_COST_BWD_B] && nb[CLP_COST_BWD_W])
			tt[CLP_COST_BWD] = tt[CLP_COST_BWD_B] + tt[CLP_COST_BWD_W];
		else if (nb[CLP_COST_BWD] && !nb[CLP_COST_BWD_B] && !nb[CLP_COST_BWD_W])
			tt[CLP_COST_BWD_B] = tt[CLP_COST_BWD_W] = tt[CLP_COST_BWD] / 2;
		/* the OPT_PREPs' share of the step, per step as opt_s (prep_s, not counted in
		 * nset: it splits opt_s) */
		if (nb[CLP_COST_OPT])
			c->stages[s].prep_s = prep[s] / (double)nb[CLP_COST_OPT];
	}
	free(sum);
	free(cnt);
	free(prep);
	if (pl)
		CLP_TRY(calibrate_precond_layers(c, t, nset));
	CLP_TRY(calibrate_kfac(c, t, nset));
	snprintf(c->source, sizeof(c->source), "calibrated from a trace (%d times)", *nset);
	return CLP_OK;
}
