/* The device profile: statistics over repeats and the JSON form (see profile.h and
 * docs/DEVICE_PROFILE.md). */
#include "topology/profile.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/json_util.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double quantile(const double *sorted, int n, double q)
{
	double pos = q * (n - 1);
	int i = (int)pos;
	double f = pos - i;

	if (i + 1 >= n)
		return sorted[n - 1];
	return sorted[i] + f * (sorted[i + 1] - sorted[i]);
}

void clp_topo_stat_of(double *samples, int n, clp_topo_stat *out)
{
	memset(out, 0, sizeof(*out));
	if (n <= 0)
		return;
	qsort(samples, (size_t)n, sizeof(*samples), cmp_double);
	out->n = n;
	out->min = samples[0];
	out->max = samples[n - 1];
	out->median = quantile(samples, n, 0.5);
	out->q1 = quantile(samples, n, 0.25);
	out->q3 = quantile(samples, n, 0.75);
}

clp_topo_stat clp_topo_stat_scale(clp_topo_stat s, double k)
{
	clp_topo_stat r = s;

	r.median = s.median * k;
	r.min = (k >= 0 ? s.min : s.max) * k;
	r.max = (k >= 0 ? s.max : s.min) * k;
	r.q1 = (k >= 0 ? s.q1 : s.q3) * k;
	r.q3 = (k >= 0 ? s.q3 : s.q1) * k;
	return r;
}

clp_topo_stat clp_topo_stat_recip(clp_topo_stat s, double num)
{
	clp_topo_stat r = s;

	if (s.n == 0)
		return r;
	/* the median of 1/x is 1/median for an odd count and close to it otherwise */
	r.median = num / s.median;
	r.min = num / s.max;
	r.max = num / s.min;
	r.q1 = num / s.q3;
	r.q3 = num / s.q1;
	return r;
}

void clp_topo_profile_set_clear(clp_topo_profile_set *s)
{
	free(s->profiles);
	free(s->p2p);
	memset(s, 0, sizeof(*s));
}

/* ---- to JSON --------------------------------------------------------------------------- */

json_t *clp_topo_stat_to_json(const clp_topo_stat *s)
{
	if (s->n == 0)
		return json_null();
	return json_pack("{s:f, s:f, s:f, s:f, s:f, s:i}", "median", s->median, "min", s->min,
			 "max", s->max, "q1", s->q1, "q3", s->q3, "n", s->n);
}

static const char *const width_names[CLP_TOPO_NWIDTHS] = {"float", "float2", "float4",
							   "float8", "float16"};

static json_t *widths_json(const clp_topo_stat *w, int best)
{
	json_t *o = json_object();

	for (int i = 0; i < CLP_TOPO_NWIDTHS; i++)
		json_object_set_new(o, width_names[i], clp_topo_stat_to_json(&w[i]));
	json_object_set_new(o, "best_width", json_integer(clp_topo_width(best)));
	return o;
}

json_t *clp_topo_profile_to_json(const clp_topo_profile *p)
{
	json_t *gemm = json_array();

	for (int i = 0; i < p->ngemm; i++) {
		const clp_topo_gemm_result *g = &p->gemm[i];

		json_array_append_new(gemm, json_pack("{s:I, s:I, s:I, s:s, s:o, s:o}", "m",
						      (json_int_t)g->m, "n", (json_int_t)g->n, "k",
						      (json_int_t)g->k, "backend", g->backend,
						      "gflops", clp_topo_stat_to_json(&g->gflops),
						      "ms", clp_topo_stat_to_json(&g->ms)));
	}
	json_t *host = p->host_fma.n == 0 ? json_null()
			: json_pack("{s:s, s:i, s:i, s:o, s:o}", "isa", p->host_fma_isa, "threads",
				    p->host_fma_threads, "chains", p->host_fma_chains, "gflops",
				    clp_topo_stat_to_json(&p->host_fma), "device_ratio",
				    clp_topo_stat_to_json(&p->host_fma_ratio));

	return json_pack(
		"{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:I,"
		" s:{s:s, s:o, s:{s:i, s:i, s:i, s:i, s:o}, s:o},"
		" s:{s:s, s:I, s:o, s:o, s:o},"
		" s:{s:s, s:I, s:{s:o, s:o, s:o}, s:{s:o, s:o, s:o}},"
		" s:{s:s, s:o, s:o, s:o}, s:o}",
		"rank", p->rank, "host", p->host, "selector", p->selector, "name", p->name, "vendor",
		p->vendor, "type", p->type, "driver", p->driver, "compute_units",
		(int)p->compute_units, "global_mem", (json_int_t)p->global_mem,
		"compute", "unit", "GFLOP/s", "dependent_mad", widths_json(p->mad, p->mad_best),
		"independent_mad", "width", p->indep_width, "chains", p->indep_chains, "local",
		p->indep_local, "tried", p->indep_tried, "gflops", clp_topo_stat_to_json(&p->mad_indep),
		"host_fma", host,
		"bandwidth", "unit", "GB/s", "bytes", (json_int_t)p->bw_bytes, "read",
		widths_json(p->read, p->read_best), "write", widths_json(p->write, p->write_best),
		"copy", widths_json(p->copy, p->copy_best),
		"transfer", "unit", "GB/s", "bytes", (json_int_t)p->xfer_bytes, "h2d", "pageable",
		clp_topo_stat_to_json(&p->h2d_pageable), "pinned",
		clp_topo_stat_to_json(&p->h2d_pinned), "mapped",
		clp_topo_stat_to_json(&p->h2d_mapped), "d2h", "pageable",
		clp_topo_stat_to_json(&p->d2h_pageable), "pinned",
		clp_topo_stat_to_json(&p->d2h_pinned), "mapped",
		clp_topo_stat_to_json(&p->d2h_mapped),
		"launch", "unit", "us", "queued", clp_topo_stat_to_json(&p->launch_queued),
		"roundtrip", clp_topo_stat_to_json(&p->launch_roundtrip), "queued_to_end",
		clp_topo_stat_to_json(&p->launch_q2e), "gemm", gemm);
}

json_t *clp_topo_p2p_to_json(const clp_topo_p2p *l)
{
	return json_pack("{s:i, s:i, s:s, s:s, s:I, s:I, s:o, s:o}", "a", l->a, "b", l->b,
			 "host_a", l->host_a, "host_b", l->host_b, "small_bytes",
			 (json_int_t)l->small_bytes, "large_bytes", (json_int_t)l->large_bytes,
			 "latency_us", clp_topo_stat_to_json(&l->latency_us), "bandwidth_gbps",
			 clp_topo_stat_to_json(&l->bandwidth_gbps));
}

json_t *clp_topo_profile_set_to_json(const clp_topo_profile_set *s)
{
	json_t *devs = json_array(), *links = json_array();

	for (int i = 0; i < s->nprofiles; i++)
		json_array_append_new(devs, clp_topo_profile_to_json(&s->profiles[i]));
	for (int i = 0; i < s->np2p; i++)
		json_array_append_new(links, clp_topo_p2p_to_json(&s->p2p[i]));
	return json_pack("{s:s, s:i, s:o, s:o}", "format", "clpipe-device-profile", "version", 1,
			 "devices", devs, "links", links);
}

/* ---- from JSON ------------------------------------------------------------------------- */

static clp_status stat_from(const json_t *o, const char *key, clp_topo_stat *s,
			    const char *origin, const char *where)
{
	const json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;
	char w[160];

	memset(s, 0, sizeof(*s));
	if (!v || json_is_null(v))
		return CLP_OK; /* not measured */
	snprintf(w, sizeof(w), "%s.%s", where, key);
	CLP_TRY(clp_json_num(origin, w, v, "median", 1, -HUGE_VAL, HUGE_VAL, &s->median));
	CLP_TRY(clp_json_num(origin, w, v, "min", 1, -HUGE_VAL, HUGE_VAL, &s->min));
	CLP_TRY(clp_json_num(origin, w, v, "max", 1, -HUGE_VAL, HUGE_VAL, &s->max));
	CLP_TRY(clp_json_num(origin, w, v, "q1", 0, -HUGE_VAL, HUGE_VAL, &s->q1));
	CLP_TRY(clp_json_num(origin, w, v, "q3", 0, -HUGE_VAL, HUGE_VAL, &s->q3));
	CLP_TRY(clp_json_int(origin, w, v, "n", 1, 1, 1 << 30, &s->n));
	if (!(s->min <= s->median && s->median <= s->max))
		return clp_error(CLP_ERR_FORMAT, "%s: %s: median %g is not within [min %g, max %g]",
				 origin, w, s->median, s->min, s->max);
	return CLP_OK;
}

static const json_t *section(const json_t *o, const char *key)
{
	const json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;

	return json_is_object(v) ? v : NULL;
}

static clp_status widths_from(const json_t *o, const char *key, clp_topo_stat *w, int *best,
			      const char *origin, const char *where)
{
	const json_t *sec = section(o, key);
	char sw[128];
	int bw = 1;

	*best = 0;
	snprintf(sw, sizeof(sw), "%s.%s", where, key);
	for (int i = 0; i < CLP_TOPO_NWIDTHS; i++)
		CLP_TRY(stat_from(sec, width_names[i], &w[i], origin, sw));
	CLP_TRY(clp_json_int(origin, sw, sec, "best_width", 0, 1, 16, &bw));
	for (int i = 0; i < CLP_TOPO_NWIDTHS; i++)
		if (clp_topo_width(i) == bw)
			*best = i;
	return CLP_OK;
}

clp_status clp_topo_profile_from_json(const json_t *j, const char *origin, clp_topo_profile *p)
{
	const json_t *comp, *bw, *xf, *la;
	json_t *gemm;
	char where[300];

	memset(p, 0, sizeof(*p));
	if (!json_is_object(j))
		return clp_error(CLP_ERR_FORMAT, "%s: a device profile must be an object", origin);
	CLP_TRY(clp_json_str(origin, "device", j, "name", 1, p->name, sizeof(p->name)));
	snprintf(where, sizeof(where), "device '%.200s'", p->name);
	CLP_TRY(clp_json_int(origin, where, j, "rank", 0, 0, 1 << 24, &p->rank));
	CLP_TRY(clp_json_str(origin, where, j, "host", 0, p->host, sizeof(p->host)));
	CLP_TRY(clp_json_str(origin, where, j, "selector", 0, p->selector, sizeof(p->selector)));
	CLP_TRY(clp_json_str(origin, where, j, "vendor", 0, p->vendor, sizeof(p->vendor)));
	CLP_TRY(clp_json_str(origin, where, j, "type", 0, p->type, sizeof(p->type)));
	CLP_TRY(clp_json_str(origin, where, j, "driver", 0, p->driver, sizeof(p->driver)));
	CLP_TRY(clp_json_u32(origin, where, j, "compute_units", 0, INT32_MAX, &p->compute_units));
	CLP_TRY(clp_json_u64(origin, where, j, "global_mem", 0, INT64_MAX, &p->global_mem));
	comp = section(j, "compute");
	bw = section(j, "bandwidth");
	xf = section(j, "transfer");
	la = section(j, "launch");
	CLP_TRY(widths_from(comp, "dependent_mad", p->mad, &p->mad_best, origin, where));
	CLP_TRY(clp_json_int(origin, where, section(comp, "independent_mad"), "width", 0, 0, 16,
			     &p->indep_width));
	CLP_TRY(clp_json_int(origin, where, section(comp, "independent_mad"), "chains", 0, 0, 64,
			     &p->indep_chains));
	CLP_TRY(clp_json_int(origin, where, section(comp, "independent_mad"), "local", 0, 0,
			     1 << 20, &p->indep_local));
	CLP_TRY(clp_json_int(origin, where, section(comp, "independent_mad"), "tried", 0, 0,
			     1 << 20, &p->indep_tried));
	CLP_TRY(stat_from(section(comp, "independent_mad"), "gflops", &p->mad_indep, origin,
			  where));
	CLP_TRY(clp_json_str(origin, where, section(comp, "host_fma"), "isa", 0, p->host_fma_isa,
			     sizeof(p->host_fma_isa)));
	CLP_TRY(clp_json_int(origin, where, section(comp, "host_fma"), "threads", 0, 0, 1 << 20,
			     &p->host_fma_threads));
	CLP_TRY(clp_json_int(origin, where, section(comp, "host_fma"), "chains", 0, 0, 1024,
			     &p->host_fma_chains));
	CLP_TRY(stat_from(section(comp, "host_fma"), "gflops", &p->host_fma, origin, where));
	CLP_TRY(stat_from(section(comp, "host_fma"), "device_ratio", &p->host_fma_ratio, origin,
			  where));
	{
		uint64_t b = 0;

		CLP_TRY(clp_json_u64(origin, where, bw, "bytes", 0, INT64_MAX, &b));
		p->bw_bytes = (size_t)b;
		b = 0;
		CLP_TRY(clp_json_u64(origin, where, xf, "bytes", 0, INT64_MAX, &b));
		p->xfer_bytes = (size_t)b;
	}
	CLP_TRY(widths_from(bw, "read", p->read, &p->read_best, origin, where));
	CLP_TRY(widths_from(bw, "write", p->write, &p->write_best, origin, where));
	CLP_TRY(widths_from(bw, "copy", p->copy, &p->copy_best, origin, where));
	CLP_TRY(stat_from(section(xf, "h2d"), "pageable", &p->h2d_pageable, origin, where));
	CLP_TRY(stat_from(section(xf, "h2d"), "pinned", &p->h2d_pinned, origin, where));
	CLP_TRY(stat_from(section(xf, "h2d"), "mapped", &p->h2d_mapped, origin, where));
	CLP_TRY(stat_from(section(xf, "d2h"), "pageable", &p->d2h_pageable, origin, where));
	CLP_TRY(stat_from(section(xf, "d2h"), "pinned", &p->d2h_pinned, origin, where));
	CLP_TRY(stat_from(section(xf, "d2h"), "mapped", &p->d2h_mapped, origin, where));
	CLP_TRY(stat_from(la, "queued", &p->launch_queued, origin, where));
	CLP_TRY(stat_from(la, "roundtrip", &p->launch_roundtrip, origin, where));
	CLP_TRY(stat_from(la, "queued_to_end", &p->launch_q2e, origin, where));
	CLP_TRY(clp_json_arr(origin, where, j, "gemm", 0, &gemm));
	for (size_t i = 0; gemm && i < json_array_size(gemm) && i < CLP_TOPO_MAX_GEMM; i++) {
		const json_t *g = json_array_get(gemm, i);
		clp_topo_gemm_result *r = &p->gemm[p->ngemm];
		uint64_t m = 0, n = 0, k = 0;
		char gw[340];

		snprintf(gw, sizeof(gw), "%s.gemm[%zu]", where, i);
		CLP_TRY(clp_json_u64(origin, gw, g, "m", 1, INT64_MAX, &m));
		CLP_TRY(clp_json_u64(origin, gw, g, "n", 1, INT64_MAX, &n));
		CLP_TRY(clp_json_u64(origin, gw, g, "k", 1, INT64_MAX, &k));
		CLP_TRY(clp_json_str(origin, gw, g, "backend", 0, r->backend, sizeof(r->backend)));
		CLP_TRY(stat_from(g, "gflops", &r->gflops, origin, gw));
		CLP_TRY(stat_from(g, "ms", &r->ms, origin, gw));
		r->m = (size_t)m;
		r->n = (size_t)n;
		r->k = (size_t)k;
		p->ngemm++;
	}
	return CLP_OK;
}

static clp_status p2p_from_json(const json_t *j, const char *origin, int i, clp_topo_p2p *l)
{
	char w[32];
	uint64_t sb = 0, lb = 0;

	memset(l, 0, sizeof(*l));
	snprintf(w, sizeof(w), "links[%d]", i);
	CLP_TRY(clp_json_int(origin, w, j, "a", 1, 0, 1 << 24, &l->a));
	CLP_TRY(clp_json_int(origin, w, j, "b", 1, 0, 1 << 24, &l->b));
	CLP_TRY(clp_json_str(origin, w, j, "host_a", 0, l->host_a, sizeof(l->host_a)));
	CLP_TRY(clp_json_str(origin, w, j, "host_b", 0, l->host_b, sizeof(l->host_b)));
	CLP_TRY(clp_json_u64(origin, w, j, "small_bytes", 0, INT64_MAX, &sb));
	CLP_TRY(clp_json_u64(origin, w, j, "large_bytes", 0, INT64_MAX, &lb));
	l->small_bytes = (size_t)sb;
	l->large_bytes = (size_t)lb;
	CLP_TRY(stat_from(j, "latency_us", &l->latency_us, origin, w));
	return stat_from(j, "bandwidth_gbps", &l->bandwidth_gbps, origin, w);
}

clp_status clp_topo_profile_set_from_json(const json_t *j, const char *origin,
					  clp_topo_profile_set *out)
{
	json_t *devs, *links;
	char fmt[64] = "";
	int version = 0;
	clp_status s;

	memset(out, 0, sizeof(*out));
	CLP_TRY(clp_json_str(origin, "profile", j, "format", 1, fmt, sizeof(fmt)));
	if (strcmp(fmt, "clpipe-device-profile"))
		return clp_error(CLP_ERR_FORMAT, "%s: format is '%s', not 'clpipe-device-profile'",
				 origin, fmt);
	CLP_TRY(clp_json_int(origin, "profile", j, "version", 1, 1, 1, &version));
	CLP_TRY(clp_json_arr(origin, "profile", j, "devices", 1, &devs));
	CLP_TRY(clp_json_arr(origin, "profile", j, "links", 0, &links));
	out->profiles = calloc(json_array_size(devs) + 1, sizeof(*out->profiles));
	out->p2p = calloc((links ? json_array_size(links) : 0) + 1, sizeof(*out->p2p));
	if (!out->profiles || !out->p2p) {
		clp_topo_profile_set_clear(out);
		return clp_error(CLP_ERR_NOMEM, "out of host memory reading %s", origin);
	}
	for (size_t i = 0; i < json_array_size(devs); i++, out->nprofiles++)
		if ((s = clp_topo_profile_from_json(json_array_get(devs, i), origin,
						    &out->profiles[i])) != CLP_OK)
			goto fail;
	for (size_t i = 0; links && i < json_array_size(links); i++, out->np2p++)
		if ((s = p2p_from_json(json_array_get(links, i), origin, (int)i, &out->p2p[i])) !=
		    CLP_OK)
			goto fail;
	return CLP_OK;
fail:
	clp_topo_profile_set_clear(out);
	return s;
}

clp_status clp_topo_profile_set_write(const clp_topo_profile_set *s, const char *path)
{
	json_t *j = clp_topo_profile_set_to_json(s);
	clp_status st;

	if (!j)
		return clp_error(CLP_ERR_NOMEM, "out of host memory writing %s", path);
	st = clp_json_save_shared(path, j);
	json_decref(j);
	return st;
}

clp_status clp_topo_profile_set_read(const char *path, clp_topo_profile_set *out)
{
	json_t *j;
	clp_status s;

	memset(out, 0, sizeof(*out));
	CLP_TRY(clp_json_load(path, &j));
	s = clp_topo_profile_set_from_json(j, path, out);
	json_decref(j);
	return s;
}
