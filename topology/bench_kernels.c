/* Device benchmark, kernel part: peak compute and global memory bandwidth (see bench.h).
 * Geometry follows clpeak so that the figures compare: work-groups of min(256, device limit)
 * work-items; compute kernels are sized to run about opts->compute_ms. */
#include "topology/bench.h"

#include "cl/base/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FETCH_PER_WI 16

static size_t local_size(clp_cl_ctx *ctx, cl_kernel k)
{
	size_t wg = 0, l = 256;
	const clp_cl_devinfo *d = clp_cl_ctx_device(ctx);

	if (d->max_wg_size && d->max_wg_size < l)
		l = d->max_wg_size;
	if (clGetKernelWorkGroupInfo(k, clp_cl_ctx_device_id(ctx), CL_KERNEL_WORK_GROUP_SIZE,
				     sizeof(wg), &wg, NULL) == CL_SUCCESS && wg && wg < l)
		l = wg;
	return l;
}

static clp_status kernel_w(clp_cl_ctx *ctx, const char *name, int vw, int chains, cl_kernel *k)
{
	char defs[64];

	snprintf(defs, sizeof(defs), "#define VW %d\n#define CHAINS %d\n", vw, chains);
	return clp_cl_kernel(ctx, "bench.cl", defs, name, k);
}

/* Run k `warmup` times untimed, then `repeats` times with profiling events; ms[i] gets each
 * timed run's device time (host time of each run alone where event timestamps read zero). */
static clp_status run_timed(clp_cl_ctx *ctx, cl_kernel k, const char *what, size_t global,
			    size_t local, int warmup, int repeats, double *ms)
{
	cl_command_queue q = clp_cl_ctx_queue(ctx);
	cl_event *ev = calloc((size_t)repeats, sizeof(*ev));
	clp_status s = CLP_OK;
	cl_int err = CL_SUCCESS;
	int made = 0;

	if (!ev)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	for (int i = 0; i < warmup && err == CL_SUCCESS; i++)
		err = clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, NULL);
	if (!clp_cl_ctx_caps(ctx)->timestamps) { /* events read zero here: each run on the host */
		if (err == CL_SUCCESS)
			err = clFinish(q);
		for (int i = 0; i < repeats && err == CL_SUCCESS; i++) {
			double t0 = clp_now();

			err = clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, NULL);
			if (err == CL_SUCCESS)
				err = clFinish(q);
			ms[i] = 1e3 * (clp_now() - t0);
		}
		free(ev);
		if (err != CL_SUCCESS)
			return clp_cl_fail(ctx, err, "benchmark %s (host-timed)", what);
		return CLP_OK;
	}
	for (; made < repeats && err == CL_SUCCESS; made++)
		err = clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, &ev[made]);
	if (err != CL_SUCCESS) {
		made--;
		s = clp_cl_fail(ctx, err, "benchmark %s: clEnqueueNDRangeKernel(global %zu, local "
				"%zu)", what, global, local);
	}
	if ((err = clFinish(q)) != CL_SUCCESS && s == CLP_OK)
		s = clp_cl_fail(ctx, err, "benchmark %s: clFinish", what);
	for (int i = 0; i < made; i++) {
		if (s == CLP_OK)
			s = clp_cl_event_ms(ev[i], &ms[i]);
		clReleaseEvent(ev[i]);
	}
	free(ev);
	return s;
}

/* Rates (work / ms -> per second scaled by `unit`) of every sample, summarised. */
static void rates(double *ms, int n, double work, double unit, clp_topo_stat *out)
{
	for (int i = 0; i < n; i++)
		ms[i] = work / (ms[i] * 1e-3) / unit;
	clp_topo_stat_of(ms, n, out);
}

/* Work-groups for a kernel to run about target_ms: grow from a few per compute unit. */
static clp_status size_for(clp_cl_ctx *ctx, cl_kernel k, const char *what, size_t local,
			   double target_ms, size_t max_groups, size_t *groups)
{
	const clp_cl_devinfo *d = clp_cl_ctx_device(ctx);
	size_t g = d->compute_units * 4 > 8 ? d->compute_units * 4 : 8;
	double ms = 0;

	if (g > max_groups)
		g = max_groups;
	for (;;) {
		CLP_TRY(run_timed(ctx, k, what, g * local, local, 1, 1, &ms));
		if (ms >= target_ms / 4 || g >= max_groups)
			break;
		g = g * 4 > max_groups ? max_groups : g * 4;
	}
	if (ms > 0)
		g = (size_t)((double)g * target_ms / ms);
	*groups = g < 1 ? 1 : g > max_groups ? max_groups : g;
	return CLP_OK;
}

/* A CPU device's best formulation and the host's C FMA loop on the same cores, run in turn
 * (device, host, device, host ...) so that a machine whose load drifts moves both alike; the
 * ratio is taken pair by pair. A 20 ms pause after each kernel keeps the runtime's idle workers
 * (Intel's TBB spins for milliseconds) from taking cores from the host loop. */
static clp_status with_host_loop(clp_cl_ctx *ctx, const clp_topo_bench_opts *o, cl_kernel k,
				 size_t global, size_t local, double work, double *ms,
				 clp_topo_profile *p)
{
	int n = o->repeats;
	double *hf = calloc((size_t)n * 2, sizeof(*hf)), dummy;
	clp_topo_host_fma h;
	clp_status s;

	if (!hf)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	if ((s = clp_topo_host_fma_init(o, (int)clp_cl_ctx_device(ctx)->compute_units, &h)) !=
	    CLP_OK)
		goto out;
	for (int i = 0; i < o->warmup + n && s == CLP_OK; i++) {
		int t = i - o->warmup;

		s = run_timed(ctx, k, "compute, best formulation", global, local, 0, 1,
			      t >= 0 ? &ms[t] : &dummy);
		if (s == CLP_OK) { /* let the runtime's workers stop spinning (TBB spins for ms) */
			nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
			s = clp_topo_host_fma_run(&h, t >= 0 ? &hf[t] : &dummy);
		}
		if (s == CLP_OK && t >= 0) {
			ms[t] = work / (ms[t] * 1e-3) / 1e9;
			hf[n + t] = ms[t] / hf[t];
		}
	}
	if (s != CLP_OK)
		goto out;
	clp_topo_stat_of(ms, n, &p->mad_indep);
	clp_topo_stat_of(hf, n, &p->host_fma);
	clp_topo_stat_of(hf + n, n, &p->host_fma_ratio);
	snprintf(p->host_fma_isa, sizeof(p->host_fma_isa), "%s", h.isa);
	p->host_fma_threads = h.threads;
	p->host_fma_chains = h.chains;
out:
	free(hf);
	return s;
}

clp_status clp_topo_bench_compute(clp_cl_ctx *ctx, const clp_topo_bench_opts *o,
				  clp_topo_profile *p)
{
	const clp_cl_devinfo *d = clp_cl_ctx_device(ctx);
	double target = o->compute_ms > 0 ? o->compute_ms : 50.0;
	size_t max_items = (size_t)(clp_cl_ctx_max_alloc(ctx) / sizeof(float));
	double *ms = calloc((size_t)o->repeats, sizeof(*ms));
	const int chains = 8, iters = 256; /* chains: unused by bench_mad */
	cl_mem out = NULL;
	clp_status s;

	if (!ms)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	if (max_items > ((size_t)1 << 24))
		max_items = (size_t)1 << 24; /* 64 MiB of output is plenty */
	if ((s = clp_cl_buffer(ctx, max_items * sizeof(float), "bench compute output", &out)) !=
	    CLP_OK)
		goto out;
	for (int w = 0; w < CLP_TOPO_NWIDTHS; w++) {
		int vw = clp_topo_width(w);
		float a = 1.3f;
		cl_kernel k;
		size_t local, groups;
		char what[48];

		snprintf(what, sizeof(what), "compute float%d", vw);
		if ((s = kernel_w(ctx, "bench_mad", vw, chains, &k)) != CLP_OK ||
		    (s = clp_cl_args(ctx, k, 2, CLP_ARG(out), CLP_ARG(a))) != CLP_OK)
			goto out;
		local = local_size(ctx, k);
		if ((s = size_for(ctx, k, what, local, target, max_items / local, &groups)) !=
			    CLP_OK ||
		    (s = run_timed(ctx, k, what, groups * local, local, o->warmup, o->repeats,
				   ms)) != CLP_OK)
			goto out;
		rates(ms, o->repeats, (double)groups * local * 4096.0, 1e9, &p->mad[w]);
		if (p->mad[w].median > p->mad[p->mad_best].median)
			p->mad_best = w;
		if (o->log)
			fprintf(o->log, "  compute  float%-2d dependent   %8.2f GFLOP/s\n", vw,
				p->mad[w].median);
	}
	/* Independent chains: every formulation briefly (3 runs), the best one fully. */
	{
		static const int vws[] = {1, 2, 4, 8, 16}, nch[] = {8, 16};
		int best_vw = 0, best_ch = 0, it = iters;
		size_t best_local = 0, best_groups = 0;
		double best = 0, few[3];
		float m = 0.999f, b = 0.001f;
		cl_kernel k;
		char what[64];

		for (size_t v = 0; v < sizeof(vws) / sizeof(vws[0]); v++)
			for (size_t c = 0; c < sizeof(nch) / sizeof(nch[0]); c++) {
				size_t locals[2], groups;

				if ((s = kernel_w(ctx, "bench_mad_indep", vws[v], nch[c], &k)) !=
					    CLP_OK ||
				    (s = clp_cl_args(ctx, k, 4, CLP_ARG(out), CLP_ARG(m), CLP_ARG(b),
						     CLP_ARG(it))) != CLP_OK)
					goto out;
				locals[0] = local_size(ctx, k);
				locals[1] = locals[0] > 32 ? 32 : locals[0];
				for (int l = 0; l < (locals[1] < locals[0] ? 2 : 1); l++) {
					clp_topo_stat st;

					snprintf(what, sizeof(what), "compute float%d x%d chains, local "
						 "%zu", vws[v], nch[c], locals[l]);
					if ((s = size_for(ctx, k, what, locals[l], target,
							  max_items / locals[l], &groups)) != CLP_OK ||
					    (s = run_timed(ctx, k, what, groups * locals[l], locals[l],
							   1, 3, few)) != CLP_OK)
						goto out;
					rates(few, 3, (double)groups * locals[l] * iters * nch[c] *
						      2.0 * vws[v], 1e9, &st);
					p->indep_tried++;
					if (o->log)
						fprintf(o->log, "  compute  float%-2d x%-2d chains local "
							"%-4zu %8.2f GFLOP/s\n", vws[v], nch[c],
							locals[l], st.median);
					if (st.median > best) {
						best = st.median, best_vw = vws[v], best_ch = nch[c];
						best_local = locals[l], best_groups = groups;
					}
				}
			}
		if (best_vw) {
			double work = (double)best_groups * best_local * iters * best_ch * 2.0 *
				      best_vw;

			if ((s = kernel_w(ctx, "bench_mad_indep", best_vw, best_ch, &k)) != CLP_OK ||
			    (s = clp_cl_args(ctx, k, 4, CLP_ARG(out), CLP_ARG(m), CLP_ARG(b),
					     CLP_ARG(it))) != CLP_OK)
				goto out;
			if (!strcmp(d->type, "cpu"))
				s = with_host_loop(ctx, o, k, best_groups * best_local, best_local,
						   work, ms, p);
			else if ((s = run_timed(ctx, k, "compute, best formulation",
						best_groups * best_local, best_local, o->warmup,
						o->repeats, ms)) == CLP_OK)
				rates(ms, o->repeats, work, 1e9, &p->mad_indep);
			if (s != CLP_OK)
				goto out;
			p->indep_width = best_vw, p->indep_chains = best_ch;
			p->indep_local = (int)best_local;
		}
	}
out:
	if (out)
		clReleaseMemObject(out);
	free(ms);
	return s;
}

/* Read-only: both strides, keep the faster (clpeak does the same). */
static clp_status bench_read(clp_cl_ctx *ctx, const clp_topo_bench_opts *o, cl_mem a,
			     cl_mem out, size_t n, int w, double *ms, clp_topo_stat *st)
{
	int vw = clp_topo_width(w);
	cl_kernel k;
	size_t local, global;
	char what[48];

	memset(st, 0, sizeof(*st));
	CLP_TRY(kernel_w(ctx, "bench_read", vw, 1, &k));
	local = local_size(ctx, k);
	global = n / (size_t)vw / FETCH_PER_WI / local * local;
	for (int gs = 0; gs < 2; gs++) {
		clp_topo_stat one;

		snprintf(what, sizeof(what), "read float%d (%s stride)", vw, gs ? "global" : "local");
		CLP_TRY(clp_cl_args(ctx, k, 3, CLP_ARG(a), CLP_ARG(out), CLP_ARG(gs)));
		CLP_TRY(run_timed(ctx, k, what, global, local, o->warmup, o->repeats, ms));
		rates(ms, o->repeats, (double)global * vw * FETCH_PER_WI * sizeof(float), 1e9,
		      &one);
		if (one.median > st->median)
			*st = one;
	}
	return CLP_OK;
}

static clp_status bench_write_copy(clp_cl_ctx *ctx, const clp_topo_bench_opts *o, int copy,
				   cl_mem a, cl_mem b, size_t n, int w, double *ms,
				   clp_topo_stat *st)
{
	int vw = clp_topo_width(w);
	float v = 1.0f;
	cl_kernel k;
	size_t local, global;
	char what[48];

	snprintf(what, sizeof(what), "%s float%d", copy ? "copy" : "write", vw);
	CLP_TRY(kernel_w(ctx, copy ? "bench_copy" : "bench_write", vw, 1, &k));
	if (copy)
		CLP_TRY(clp_cl_args(ctx, k, 2, CLP_ARG(a), CLP_ARG(b)));
	else
		CLP_TRY(clp_cl_args(ctx, k, 2, CLP_ARG(b), CLP_ARG(v)));
	local = local_size(ctx, k);
	global = n / (size_t)vw / FETCH_PER_WI / local * local;
	CLP_TRY(run_timed(ctx, k, what, global, local, o->warmup, o->repeats, ms));
	rates(ms, o->repeats,
	      (double)global * vw * FETCH_PER_WI * sizeof(float) * (copy ? 2.0 : 1.0), 1e9, st);
	return CLP_OK;
}

clp_status clp_topo_bench_bandwidth(clp_cl_ctx *ctx, const clp_topo_bench_opts *o,
				    clp_topo_profile *p)
{
	uint64_t max_alloc = clp_cl_ctx_max_alloc(ctx);
	size_t bytes = o->bw_bytes ? o->bw_bytes : (size_t)256 << 20;
	size_t quantum = 256 * FETCH_PER_WI * 16 * sizeof(float); /* every width and group */
	double *ms = calloc((size_t)o->repeats, sizeof(*ms));
	cl_mem a = NULL, b = NULL, out = NULL;
	clp_status s;

	if (!ms)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	if (bytes > max_alloc / 2)
		bytes = (size_t)(max_alloc / 2);
	if (bytes > ((size_t)1 << 33) - quantum) /* the kernels index with int, as clpeak does */
		bytes = ((size_t)1 << 33) - quantum;
	bytes = bytes / quantum * quantum;
	if (bytes == 0)
		bytes = quantum;
	p->bw_bytes = bytes;
	if ((s = clp_cl_buffer(ctx, bytes, "bench bandwidth A", &a)) != CLP_OK ||
	    (s = clp_cl_buffer(ctx, bytes, "bench bandwidth B", &b)) != CLP_OK ||
	    (s = clp_cl_buffer(ctx, bytes / FETCH_PER_WI, "bench bandwidth sums", &out)) != CLP_OK)
		goto out;
	for (int w = 0; w < CLP_TOPO_NWIDTHS && s == CLP_OK; w++) {
		size_t n = bytes / sizeof(float);

		if ((s = bench_read(ctx, o, a, out, n, w, ms, &p->read[w])) != CLP_OK ||
		    (s = bench_write_copy(ctx, o, 0, a, b, n, w, ms, &p->write[w])) != CLP_OK ||
		    (s = bench_write_copy(ctx, o, 1, a, b, n, w, ms, &p->copy[w])) != CLP_OK)
			break;
		if (p->read[w].median > p->read[p->read_best].median)
			p->read_best = w;
		if (p->write[w].median > p->write[p->write_best].median)
			p->write_best = w;
		if (p->copy[w].median > p->copy[p->copy_best].median)
			p->copy_best = w;
		if (o->log)
			fprintf(o->log, "  memory   float%-2d read %7.2f  write %7.2f  copy %7.2f "
				"GB/s\n", clp_topo_width(w), p->read[w].median,
				p->write[w].median, p->copy[w].median);
	}
out:
	if (a)
		clReleaseMemObject(a);
	if (b)
		clReleaseMemObject(b);
	if (out)
		clReleaseMemObject(out);
	free(ms);
	return s;
}
