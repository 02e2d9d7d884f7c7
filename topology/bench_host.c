/* Device benchmark, host side: transfers, launch latency, GEMM, and the whole-device run (see
 * bench.h). These figures are wall-clock: they include the driver's work, which is what a
 * training step pays. */
#include "topology/bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cl/gemm.h"
#include "cl/base/clock.h"

void clp_topo_bench_defaults(clp_topo_bench_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->parts = CLP_BENCH_ALL;
	o->repeats = 10;
	o->warmup = 2;
	o->ngemm = 2;
	o->gemm[0][0] = 512, o->gemm[0][1] = 768, o->gemm[0][2] = 768;
	o->gemm[1][0] = 512, o->gemm[1][1] = 3072, o->gemm[1][2] = 768;
}

enum xfer_kind { XFER_PAGEABLE, XFER_PINNED, XFER_MAPPED };

/* One transfer of `bytes` in direction h2d (else d2h) by the given method; wall time in ms. */
static clp_status xfer_once(clp_cl_ctx *ctx, enum xfer_kind kind, int h2d, cl_mem dev,
			    void *host, void *pinned, size_t bytes, double *ms)
{
	cl_command_queue q = clp_cl_ctx_queue(ctx);
	double t0 = (clp_now() * 1e3);
	cl_int err;

	if (kind != XFER_MAPPED) {
		void *src = kind == XFER_PINNED ? pinned : host;

		err = h2d ? clEnqueueWriteBuffer(q, dev, CL_TRUE, 0, bytes, src, 0, NULL, NULL)
			  : clEnqueueReadBuffer(q, dev, CL_TRUE, 0, bytes, src, 0, NULL, NULL);
		if (err != CL_SUCCESS)
			return clp_cl_fail(ctx, err, "benchmark transfer: %s of %zu bytes",
					   h2d ? "clEnqueueWriteBuffer" : "clEnqueueReadBuffer",
					   bytes);
	} else {
		void *p = clEnqueueMapBuffer(q, dev, CL_TRUE,
					     h2d ? CL_MAP_WRITE_INVALIDATE_REGION : CL_MAP_READ, 0,
					     bytes, 0, NULL, NULL, &err);

		if (err != CL_SUCCESS)
			return clp_cl_fail(ctx, err, "benchmark transfer: clEnqueueMapBuffer of %zu "
					   "bytes", bytes);
		if (h2d)
			memcpy(p, host, bytes);
		else
			memcpy(host, p, bytes);
		err = clEnqueueUnmapMemObject(q, dev, p, 0, NULL, NULL);
		if (err == CL_SUCCESS)
			err = clFinish(q);
		if (err != CL_SUCCESS)
			return clp_cl_fail(ctx, err, "benchmark transfer: unmap");
	}
	*ms = (clp_now() * 1e3) - t0;
	return CLP_OK;
}

clp_status clp_topo_bench_transfer(clp_cl_ctx *ctx, const clp_topo_bench_opts *o,
				   clp_topo_profile *p)
{
	static const char *const names[3] = {"pageable", "pinned", "mapped"};
	clp_topo_stat *dst[2][3] = {{&p->d2h_pageable, &p->d2h_pinned, &p->d2h_mapped},
				    {&p->h2d_pageable, &p->h2d_pinned, &p->h2d_mapped}};
	size_t bytes = o->xfer_bytes ? o->xfer_bytes : (size_t)64 << 20;
	cl_command_queue q = clp_cl_ctx_queue(ctx);
	double *ms = calloc((size_t)o->repeats, sizeof(*ms));
	cl_mem dev = NULL, pin = NULL;
	void *host = NULL, *pinned = NULL;
	clp_status s = CLP_OK;
	cl_int err;

	if (bytes > clp_cl_ctx_max_alloc(ctx) / 2)
		bytes = (size_t)(clp_cl_ctx_max_alloc(ctx) / 2);
	p->xfer_bytes = bytes;
	host = malloc(bytes);
	if (!ms || !host) {
		s = clp_error(CLP_ERR_NOMEM, "out of host memory for a %zu-byte transfer", bytes);
		goto out;
	}
	memset(host, 1, bytes); /* touch every page: no first-use faults in the timings */
	if ((s = clp_cl_buffer(ctx, bytes, "bench transfer", &dev)) != CLP_OK)
		goto out;
	pin = clCreateBuffer(clp_cl_ctx_context(ctx), CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
			     bytes, NULL, &err);
	if (err == CL_SUCCESS)
		pinned = clEnqueueMapBuffer(q, pin, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0,
					    NULL, NULL, &err);
	if (err != CL_SUCCESS) {
		s = clp_cl_fail(ctx, err, "benchmark transfer: pinned host buffer of %zu bytes",
				bytes);
		goto out;
	}
	memset(pinned, 1, bytes);
	for (int h2d = 1; h2d >= 0 && s == CLP_OK; h2d--)
		for (int kind = 0; kind < 3 && s == CLP_OK; kind++) {
			for (int i = 0; i < o->warmup + o->repeats && s == CLP_OK; i++) {
				double t = 0;

				s = xfer_once(ctx, (enum xfer_kind)kind, h2d, dev, host, pinned,
					      bytes, &t);
				if (s == CLP_OK && i >= o->warmup)
					ms[i - o->warmup] = (double)bytes / (t * 1e-3) / 1e9;
			}
			if (s != CLP_OK)
				break;
			clp_topo_stat_of(ms, o->repeats, dst[h2d][kind]);
			if (o->log)
				fprintf(o->log, "  transfer %s %-8s %8.2f GB/s\n",
					h2d ? "h2d" : "d2h", names[kind],
					dst[h2d][kind]->median);
		}
out:
	if (pinned)
		clEnqueueUnmapMemObject(q, pin, pinned, 0, NULL, NULL);
	clFinish(q);
	if (pin)
		clReleaseMemObject(pin);
	if (dev)
		clReleaseMemObject(dev);
	free(host);
	free(ms);
	return s;
}

clp_status clp_topo_bench_launch(clp_cl_ctx *ctx, const clp_topo_bench_opts *o,
				 clp_topo_profile *p)
{
	int batch = o->launch_batch > 0 ? o->launch_batch : 100;
	int nrt = o->repeats * 10; /* round trips are short: take more of them */
	cl_command_queue q = clp_cl_ctx_queue(ctx);
	size_t one = 1;
	double *queued = calloc((size_t)o->repeats, sizeof(double));
	double *rt = calloc((size_t)nrt, sizeof(double)), *q2e = calloc((size_t)nrt, sizeof(double));
	cl_mem out = NULL;
	cl_kernel k;
	clp_status s;
	cl_int err = CL_SUCCESS;

	if (!queued || !rt || !q2e) {
		s = clp_error(CLP_ERR_NOMEM, "out of host memory");
		goto out;
	}
	if ((s = clp_cl_buffer(ctx, sizeof(float), "bench launch", &out)) != CLP_OK ||
	    (s = clp_cl_kernel(ctx, "bench.cl", "#define VW 1\n#define CHAINS 1\n", "bench_noop",
			       &k)) != CLP_OK ||
	    (s = clp_cl_args(ctx, k, 1, CLP_ARG(out))) != CLP_OK)
		goto out;
	/* queued: a batch of kernels behind one clFinish, per kernel */
	for (int i = 0; i < o->warmup + o->repeats && err == CL_SUCCESS; i++) {
		double t0 = (clp_now() * 1e3);

		for (int j = 0; j < batch && err == CL_SUCCESS; j++)
			err = clEnqueueNDRangeKernel(q, k, 1, NULL, &one, &one, 0, NULL, NULL);
		if (err == CL_SUCCESS)
			err = clFinish(q);
		if (i >= o->warmup)
			queued[i - o->warmup] = ((clp_now() * 1e3) - t0) * 1e3 / batch;
	}
	/* round trip: one kernel and its clFinish; and its profiling queued -> end */
	for (int i = 0; i < o->warmup + nrt && err == CL_SUCCESS; i++) {
		cl_event ev = NULL;
		cl_ulong tq = 0, te = 0;
		double t0 = (clp_now() * 1e3);

		err = clEnqueueNDRangeKernel(q, k, 1, NULL, &one, &one, 0, NULL, &ev);
		if (err == CL_SUCCESS)
			err = clFinish(q);
		if (err == CL_SUCCESS && i >= o->warmup) {
			rt[i - o->warmup] = ((clp_now() * 1e3) - t0) * 1e3;
			clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_QUEUED, sizeof(tq), &tq,
						NULL);
			clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof(te), &te, NULL);
			q2e[i - o->warmup] = te > tq ? (double)(te - tq) * 1e-3 : 0.0;
		}
		if (ev)
			clReleaseEvent(ev);
	}
	if (err != CL_SUCCESS) {
		s = clp_cl_fail(ctx, err, "benchmark launch latency");
		goto out;
	}
	clp_topo_stat_of(queued, o->repeats, &p->launch_queued);
	clp_topo_stat_of(rt, nrt, &p->launch_roundtrip);
	clp_topo_stat_of(q2e, nrt, &p->launch_q2e);
	if (o->log)
		fprintf(o->log, "  launch   queued %.1f us, round trip %.1f us, queued->end %.1f us\n",
			p->launch_queued.median, p->launch_roundtrip.median, p->launch_q2e.median);
out:
	if (out)
		clReleaseMemObject(out);
	free(queued);
	free(rt);
	free(q2e);
	return s;
}

clp_status clp_topo_bench_gemm(clp_cl_ctx *ctx, const clp_topo_bench_opts *o,
			       clp_topo_profile *p)
{
	const clp_gemm_tuning *t = NULL;
	double *ms = calloc((size_t)o->repeats, sizeof(*ms));
	clp_status s = CLP_OK;

	if (!ms)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	p->ngemm = 0;
	for (int g = 0; g < o->ngemm && g < CLP_TOPO_MAX_GEMM && s == CLP_OK; g++) {
		size_t m = o->gemm[g][0], n = o->gemm[g][1], k = o->gemm[g][2];
		clp_topo_gemm_result *r = &p->gemm[p->ngemm];
		cl_mem a = NULL, b = NULL, c = NULL;

		if ((s = clp_cl_buffer(ctx, m * k * sizeof(float), "bench gemm A", &a)) == CLP_OK &&
		    (s = clp_cl_buffer(ctx, k * n * sizeof(float), "bench gemm B", &b)) == CLP_OK &&
		    (s = clp_cl_buffer(ctx, m * n * sizeof(float), "bench gemm C", &c)) == CLP_OK) {
			for (int i = 0; i < o->warmup + o->repeats && s == CLP_OK; i++) {
				double t0 = (clp_now() * 1e3);

				s = clp_cl_gemm(ctx, CLP_N, CLP_N, m, n, k, 1.0f, clp_buf_at(a, 0),
						k, clp_buf_at(b, 0), n, 0.0f, clp_buf_at(c, 0), n);
				if (s == CLP_OK)
					s = clp_cl_finish(ctx);
				if (i >= o->warmup)
					ms[i - o->warmup] = (clp_now() * 1e3) - t0;
			}
		}
		if (a)
			clReleaseMemObject(a);
		if (b)
			clReleaseMemObject(b);
		if (c)
			clReleaseMemObject(c);
		if (s != CLP_OK) {
			s = clp_error_context(s, "benchmark gemm %zux%zux%zu: ", m, n, k);
			break;
		}
		r->m = m;
		r->n = n;
		r->k = k;
		clp_topo_stat_of(ms, o->repeats, &r->ms);
		for (int i = 0; i < o->repeats; i++)
			ms[i] = 2.0 * (double)m * n * k / (ms[i] * 1e-3) / 1e9;
		clp_topo_stat_of(ms, o->repeats, &r->gflops);
		if (clp_cl_gemm_tuning(ctx, &t) == CLP_OK)
			snprintf(r->backend, sizeof(r->backend), "%s",
				 clp_gemm_backend_name(t->backend));
		p->ngemm++;
		if (o->log)
			fprintf(o->log, "  gemm     %zux%zux%zu %8.2f GFLOP/s (%s)\n", m, n, k,
				r->gflops.median, r->backend);
	}
	free(ms);
	return s;
}

clp_status clp_topo_bench_device(clp_cl_ctx *ctx, const clp_topo_bench_opts *o,
				 clp_topo_profile *p)
{
	const clp_cl_devinfo *d = clp_cl_ctx_device(ctx);
	clp_status s = CLP_OK;

	memset(p, 0, sizeof(*p));
	if (o->repeats < 1 || o->warmup < 0)
		return clp_error(CLP_ERR_INVALID, "benchmark: repeats must be >= 1 (got %d) and "
				 "warm-up runs >= 0 (got %d)", o->repeats, o->warmup);
	snprintf(p->name, sizeof(p->name), "%s", d->name);
	snprintf(p->vendor, sizeof(p->vendor), "%s", d->vendor);
	snprintf(p->type, sizeof(p->type), "%s", d->type);
	snprintf(p->driver, sizeof(p->driver), "%s", d->driver);
	p->compute_units = d->compute_units;
	p->global_mem = d->global_mem;
	if (s == CLP_OK && (o->parts & CLP_BENCH_COMPUTE))
		s = clp_topo_bench_compute(ctx, o, p);
	if (s == CLP_OK && (o->parts & CLP_BENCH_BANDWIDTH))
		s = clp_topo_bench_bandwidth(ctx, o, p);
	if (s == CLP_OK && (o->parts & CLP_BENCH_TRANSFER))
		s = clp_topo_bench_transfer(ctx, o, p);
	if (s == CLP_OK && (o->parts & CLP_BENCH_LAUNCH))
		s = clp_topo_bench_launch(ctx, o, p);
	if (s == CLP_OK && (o->parts & CLP_BENCH_GEMM))
		s = clp_topo_bench_gemm(ctx, o, p);
	if (s != CLP_OK)
		clp_cl_finish(ctx);
	return s;
}
