/* Device benchmark, the host's own FMA peak (bench.h): for CPU devices, what the cores the
 * OpenCL runtime runs on can do, measured by a plain C loop so that the device's compute figure
 * has a yardstick. One thread per compute unit, each running CHAINS independent FMA chains
 * (x = x * m + b, bounded: the values converge to 1, never denormal) in the widest vector the
 * processor has: AVX-512F, else AVX2 + FMA, chosen at run time with __builtin_cpu_supports and
 * compiled per function with target attributes, so that the binary stays portable; other
 * processors run a scalar fmaf loop (a floor, not a peak: the figure says which). Thread i runs
 * on the i-th processor the process may use (Linux: sched_setaffinity), so that the threads of
 * a 50 ms run do not start out sharing one core as new threads do until the scheduler moves
 * them (measured: an unpinned loop read 0.7x the OpenCL runtime's long-lived workers). */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET: this file only */
#endif
#include "topology/bench.h"

#include <math.h>
#include <pthread.h>
#ifdef __linux__
#include <sched.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "cl/base/clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CLP_FMA_X86 1
#endif

#define CHAINS 16
/* the chains written out, so that they live in registers at any optimisation level */
#define EACH12(op) op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7) op(8) op(9) op(10) op(11)
#define EACH16(op) EACH12(op) op(12) op(13) op(14) op(15)

struct fma_job {
	const char *isa;
	long iters;
	float sink;
	int cpu; /* -1: not pinned */
};

#ifdef CLP_FMA_X86
__attribute__((target("avx512f"))) static float loop_avx512(long iters)
{
	__m512 x[CHAINS], m = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);
	__m512 acc = _mm512_setzero_ps();

	for (int c = 0; c < CHAINS; c++)
		x[c] = _mm512_set1_ps((float)c);
	for (long i = 0; i < iters; i++) {
#define STEP(c) x[c] = _mm512_fmadd_ps(x[c], m, b);
		EACH16(STEP)
#undef STEP
	}
	for (int c = 0; c < CHAINS; c++)
		acc = _mm512_add_ps(acc, x[c]);
	return _mm512_reduce_add_ps(acc);
}

/* 16 ymm registers: 12 chains, m and b */
__attribute__((target("avx2,fma"))) static float loop_avx2(long iters)
{
	__m256 x[12], m = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
	__m256 acc = _mm256_setzero_ps();
	float out[8], s = 0;

	for (int c = 0; c < 12; c++)
		x[c] = _mm256_set1_ps((float)c);
	for (long i = 0; i < iters; i++) {
#define STEP(c) x[c] = _mm256_fmadd_ps(x[c], m, b);
		EACH12(STEP)
#undef STEP
	}
	for (int c = 0; c < 12; c++)
		acc = _mm256_add_ps(acc, x[c]);
	_mm256_storeu_ps(out, acc);
	for (int i = 0; i < 8; i++)
		s += out[i];
	return s;
}
#endif

static float loop_scalar(long iters)
{
	float x[CHAINS], s = 0;

	for (int c = 0; c < CHAINS; c++)
		x[c] = (float)c;
	for (long i = 0; i < iters; i++) {
#define STEP(c) x[c] = fmaf(x[c], 0.999f, 0.001f);
		EACH16(STEP)
#undef STEP
	}
	for (int c = 0; c < CHAINS; c++)
		s += x[c];
	return s;
}

/* The ISA the loop uses here, its lanes and chains. */
static const char *pick(int *lanes, int *chains)
{
#ifdef CLP_FMA_X86
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f")) {
		*lanes = 16, *chains = CHAINS;
		return "avx512f";
	}
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		*lanes = 8, *chains = 12;
		return "avx2+fma";
	}
#endif
	*lanes = 1, *chains = CHAINS;
	return "scalar fmaf";
}

static float run_isa(const char *isa, long iters)
{
#ifdef CLP_FMA_X86
	if (!strcmp(isa, "avx512f"))
		return loop_avx512(iters);
	if (!strcmp(isa, "avx2+fma"))
		return loop_avx2(iters);
#endif
	return loop_scalar(iters);
}

static void *worker(void *arg)
{
	struct fma_job *j = arg;

#ifdef __linux__
	if (j->cpu >= 0) {
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(j->cpu, &one);
		(void)sched_setaffinity(0, sizeof(one), &one); /* best effort */
	}
#endif
	j->sink = run_isa(j->isa, j->iters);
	return NULL;
}

/* One timed run of `threads` threads x iters iterations, from the first thread's start to the
 * last one's end (starting a thread costs microseconds; a run lasts tens of milliseconds). */
static clp_status run_threads(int threads, const char *isa, long iters, double *sec, float *sink)
{
	pthread_t tid[256];
	struct fma_job job[256];
	int cpus[256], ncpu = 0, made = 0;
	double t0;

#ifdef __linux__
	{
		cpu_set_t set;

		if (!sched_getaffinity(0, sizeof(set), &set))
			for (int c = 0; c < CPU_SETSIZE && ncpu < 256; c++)
				if (CPU_ISSET(c, &set))
					cpus[ncpu++] = c;
	}
#endif
	t0 = clp_now();
	for (; made < threads; made++) {
		job[made] = (struct fma_job){isa, iters, 0, ncpu ? cpus[made % ncpu] : -1};
		if (pthread_create(&tid[made], NULL, worker, &job[made]))
			break;
	}
	for (int i = 0; i < made; i++) {
		pthread_join(tid[i], NULL);
		*sink += job[i].sink;
	}
	*sec = clp_now() - t0;
	if (made < threads)
		return clp_error(CLP_ERR_NOMEM, "host FMA loop: pthread_create failed (%d of %d "
				 "threads started)", made, threads);
	return CLP_OK;
}

clp_status clp_topo_host_fma_init(const clp_topo_bench_opts *o, int threads,
				  clp_topo_host_fma *h)
{
	double target = (o->compute_ms > 0 ? o->compute_ms : 50.0) * 1e-3, sec = 0;

	memset(h, 0, sizeof(*h));
	h->isa = pick(&h->lanes, &h->chains);
	h->threads = threads < 1 ? 1 : threads > 256 ? 256 : threads;
	h->iters = 1 << 14;
	for (;;) { /* size one run to about the compute kernels' duration */
		CLP_TRY(run_threads(h->threads, h->isa, h->iters, &sec, &h->sink));
		if (sec >= target / 4 || h->iters > (1L << 40))
			break;
		h->iters *= 4;
	}
	if (sec > 0)
		h->iters = (long)((double)h->iters * target / sec) + 1;
	return CLP_OK;
}

clp_status clp_topo_host_fma_run(clp_topo_host_fma *h, double *gflops)
{
	double sec = 0;

	CLP_TRY(run_threads(h->threads, h->isa, h->iters, &sec, &h->sink));
	if (!isfinite(h->sink))
		return clp_error(CLP_ERR_NUMERIC, "host FMA loop: the chains diverged (%g)",
				 (double)h->sink);
	*gflops = (double)h->threads * h->iters * h->chains * h->lanes * 2.0 / sec * 1e-9;
	return CLP_OK;
}
