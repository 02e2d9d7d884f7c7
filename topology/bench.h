/* The device benchmark behind `clpipe bench`: peak compute, global memory bandwidth, host <->
 * device transfers, kernel launch latency, the engine's GEMM at given shapes, and point-to-point
 * latency and bandwidth between ranks. Results are device profiles (topology/profile.h).
 *
 * Methods (docs/DEVICE_PROFILE.md has the details):
 *   compute    clpeak's kernel of dependent multiply-add chains at vector widths 1..16 (kept
 *              as its own figure, to compare with clpeak), and the best of several
 *              formulations with independent chains (vector widths 1..16, 8 or 16 chains, two
 *              work-group sizes): what the FMA units can do when fed; on CPU devices also a C
 *              FMA loop on the host's cores (bench_fma.c), the yardstick of both
 *   bandwidth  read-only (clpeak's kernel: 16 loads per work-item summed into one float),
 *              write-only and copy, over buffers of bw_bytes, far larger than caches
 *   transfers  blocking write/read from pageable memory; from pinned memory (a buffer made
 *              with CL_MEM_ALLOC_HOST_PTR and mapped); and through a mapping of the device
 *              buffer (map, memcpy, unmap)
 *   launch     many kernels queued behind one clFinish (per kernel); one kernel with its
 *              clFinish (round trip); and profiling-queued to end of that kernel (clpeak's)
 * Kernel times come from profiling events; transfers and launches from the wall clock. Each
 * figure is the distribution over `repeats` runs after `warmup` runs. */
#ifndef CLP_TOPO_BENCH_H
#define CLP_TOPO_BENCH_H

#include <stdio.h>

#include "cl/runtime.h"
#include "topology/comm/comm.h"
#include "topology/profile.h"

enum clp_topo_bench_part {
	CLP_BENCH_COMPUTE = 1 << 0,
	CLP_BENCH_BANDWIDTH = 1 << 1,
	CLP_BENCH_TRANSFER = 1 << 2,
	CLP_BENCH_LAUNCH = 1 << 3,
	CLP_BENCH_GEMM = 1 << 4,
	CLP_BENCH_P2P = 1 << 5,
	CLP_BENCH_ALL = 0x3f
};

typedef struct clp_topo_bench_opts {
	unsigned parts;      /* CLP_BENCH_* bits */
	int repeats;         /* timed runs per figure (>= 1) */
	int warmup;          /* untimed runs first */
	size_t bw_bytes;     /* bandwidth buffer; 0: min(max_alloc / 2, 256 MiB) */
	size_t xfer_bytes;   /* transfer size; 0: min(max_alloc / 2, 64 MiB) */
	double compute_ms;   /* target duration of one compute kernel (sizes it); 0: 50 ms */
	int launch_batch;    /* kernels per queued-latency sample; 0: 100 */
	int ngemm;
	size_t gemm[CLP_TOPO_MAX_GEMM][3]; /* M, N, K */
	size_t p2p_small, p2p_large;       /* message sizes; 0: 8 bytes, 4 MiB */
	FILE *log;           /* progress lines, or NULL */
} clp_topo_bench_opts;

/* Defaults: every part, 10 repeats, 2 warm-up runs, two transformer-shaped GEMMs
 * (512x768x768 and 512x3072x768). */
void clp_topo_bench_defaults(clp_topo_bench_opts *o);

/* Measure the context's device into *p (identity fields filled from the context). */
clp_status clp_topo_bench_device(clp_cl_ctx *ctx, const clp_topo_bench_opts *o,
				 clp_topo_profile *p);

/* Ping-pong between every pair of ranks, one pair at a time (the others wait at a barrier).
 * Every rank gets the full list: *out malloc()ed, *n = size * (size - 1) / 2. */
clp_status clp_topo_bench_p2p(clp_comm *c, const clp_topo_bench_opts *o, clp_topo_p2p **out,
			      int *n);

/* Parts of the benchmark as split below (internal to the benchmark, shared by its files). */
clp_status clp_topo_bench_compute(clp_cl_ctx *ctx, const clp_topo_bench_opts *o,
				  clp_topo_profile *p);
/* The host's FMA peak by a C loop on `threads` threads (bench_fma.c): init picks the ISA and
 * sizes one run to about opts->compute_ms; each run gives one figure. */
typedef struct clp_topo_host_fma {
	const char *isa; /* "avx512f", "avx2+fma", "scalar fmaf" */
	int threads, lanes, chains;
	long iters;
	float sink;
} clp_topo_host_fma;
clp_status clp_topo_host_fma_init(const clp_topo_bench_opts *o, int threads,
				  clp_topo_host_fma *h);
clp_status clp_topo_host_fma_run(clp_topo_host_fma *h, double *gflops);
clp_status clp_topo_bench_bandwidth(clp_cl_ctx *ctx, const clp_topo_bench_opts *o,
				    clp_topo_profile *p);
clp_status clp_topo_bench_transfer(clp_cl_ctx *ctx, const clp_topo_bench_opts *o,
				   clp_topo_profile *p);
clp_status clp_topo_bench_launch(clp_cl_ctx *ctx, const clp_topo_bench_opts *o,
				 clp_topo_profile *p);
clp_status clp_topo_bench_gemm(clp_cl_ctx *ctx, const clp_topo_bench_opts *o,
			       clp_topo_profile *p);

#endif
