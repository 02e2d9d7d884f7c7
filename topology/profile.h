/* The device profile: what `clpipe bench` measured on each device and between ranks, as plain
 * data and as JSON (docs/DEVICE_PROFILE.md). Every figure is a distribution over repeats: its
 * median with min, max and quartiles. Later parts (the cost model, placement) read it. */
#ifndef CLP_TOPO_PROFILE_H
#define CLP_TOPO_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cl/base/status.h"

/* A figure over repeats. n == 0: not measured. */
typedef struct clp_topo_stat {
	int n;
	double median, min, max, q1, q3;
} clp_topo_stat;

/* Order the n samples in place and summarise them (quartiles by linear interpolation). */
void clp_topo_stat_of(double *samples, int n, clp_topo_stat *out);
/* The same figure in other units: every field times k (k < 0 swaps min and max, q1 and q3). */
clp_topo_stat clp_topo_stat_scale(clp_topo_stat s, double k);
/* 1 / x of every field (a time into a rate); min and max swap. */
clp_topo_stat clp_topo_stat_recip(clp_topo_stat s, double numerator);

#define CLP_TOPO_NWIDTHS 5 /* vector widths 1, 2, 4, 8, 16 */
#define CLP_TOPO_MAX_GEMM 8

static inline int clp_topo_width(int i)
{
	return 1 << i;
}

typedef struct clp_topo_gemm_result {
	size_t m, n, k;
	char backend[16];
	clp_topo_stat gflops;
	clp_topo_stat ms;
} clp_topo_gemm_result;

typedef struct clp_topo_profile {
	int rank;
	char host[256];
	char selector[32];
	char name[256];
	char vendor[128];
	char type[16];
	char driver[64];
	uint32_t compute_units;
	uint64_t global_mem;

	/* compute, GFLOP/s */
	clp_topo_stat mad[CLP_TOPO_NWIDTHS]; /* dependent chains (clpeak's method), per width */
	int mad_best;                        /* index of the best width */
	clp_topo_stat mad_indep;             /* the best of the independent-chain formulations: */
	int indep_width, indep_chains;       /* its vector width, chains per work-item */
	int indep_local, indep_tried;        /* and work-group size; formulations tried */
	clp_topo_stat host_fma;              /* CPU devices: a C FMA loop on the host (n = 0: none) */
	char host_fma_isa[16];               /* "avx512f", "avx2+fma", "scalar fmaf" */
	int host_fma_threads, host_fma_chains;
	clp_topo_stat host_fma_ratio;        /* mad_indep / host_fma, run in turn, pair by pair */

	/* global memory bandwidth, GB/s (1e9 bytes/s) */
	size_t bw_bytes;                      /* buffer size */
	clp_topo_stat read[CLP_TOPO_NWIDTHS]; /* best of local- and global-stride, per width */
	clp_topo_stat write[CLP_TOPO_NWIDTHS];
	clp_topo_stat copy[CLP_TOPO_NWIDTHS]; /* counts bytes read plus bytes written */
	int read_best, write_best, copy_best;

	/* host <-> device, GB/s */
	size_t xfer_bytes;
	clp_topo_stat h2d_pageable, h2d_pinned, h2d_mapped;
	clp_topo_stat d2h_pageable, d2h_pinned, d2h_mapped;

	/* kernel launch, microseconds */
	clp_topo_stat launch_queued;    /* per kernel, many enqueued, one finish */
	clp_topo_stat launch_roundtrip; /* enqueue + finish, one kernel */
	clp_topo_stat launch_q2e;       /* profiling queued -> end of that kernel (clpeak's) */

	int ngemm;
	clp_topo_gemm_result gemm[CLP_TOPO_MAX_GEMM];
} clp_topo_profile;

/* Point to point between two ranks (ping-pong). */
typedef struct clp_topo_p2p {
	int a, b;
	char host_a[256], host_b[256];
	size_t small_bytes, large_bytes;
	clp_topo_stat latency_us;     /* half a round trip of small_bytes */
	clp_topo_stat bandwidth_gbps; /* large_bytes / half a round trip */
} clp_topo_p2p;

/* A whole run: the devices (one per rank under MPI) and the links between ranks. */
typedef struct clp_topo_profile_set {
	int nprofiles;
	clp_topo_profile *profiles;
	int np2p;
	clp_topo_p2p *p2p;
} clp_topo_profile_set;

void clp_topo_profile_set_clear(clp_topo_profile_set *s);

json_t *clp_topo_stat_to_json(const clp_topo_stat *s);
json_t *clp_topo_profile_to_json(const clp_topo_profile *p);
clp_status clp_topo_profile_from_json(const json_t *j, const char *origin, clp_topo_profile *p);
json_t *clp_topo_p2p_to_json(const clp_topo_p2p *l);

/* {"format": "clpipe-device-profile", "version": 1, "devices": [...], "links": [...]} */
json_t *clp_topo_profile_set_to_json(const clp_topo_profile_set *s);
clp_status clp_topo_profile_set_from_json(const json_t *j, const char *origin,
					  clp_topo_profile_set *out);
clp_status clp_topo_profile_set_write(const clp_topo_profile_set *s, const char *path);
clp_status clp_topo_profile_set_read(const char *path, clp_topo_profile_set *out);

#endif
