/* Internals of the K-FAC optimizer shared by kfac.c (state, cycle, curvature, inverses, update)
 * and kfac_ckpt.c (checkpoints). */
#ifndef CLP_OPTIM_KFAC_INTERNAL_H
#define CLP_OPTIM_KFAC_INTERNAL_H

#include "cl/kfac.h"
#include "engine/optim/kfac.h"

#define KFAC_MAX_FACTORS 16

/* Views of the work block. */
enum { MV_STATS, MV_INFO, MV_SCAL, MV_WS, MV_W, MV_P, MV_T, MV_PB, MV_COUNT };

/* Inputs (even views) and output gradients (odd) of one micro-batch kept for deferred factors:
 * view (li * CLP_LIN_COUNT + lin) * 2 + b. */
struct kfac_kept {
	int mb;                /* -1: free */
	unsigned long long done; /* bit 2 li: A of layer li accumulated; 2 li + 1: B */
	clp_cl_block *mem;
	clp_buf *a;
};

struct clp_kfac_opt {
	clp_stage *st;
	clp_cl_ctx *ctx;
	clp_kfac_opts o;
	int l0, nl, n_layer;
	size_t N;
	clp_stage_linear_info lin[CLP_LIN_COUNT];
	/* the factors of one layer: per linear its A, then its B parts */
	int nf, fbase[CLP_LIN_COUNT], flin[KFAC_MAX_FACTORS], fpart[KFAC_MAX_FACTORS];
	size_t fdim[KFAC_MAX_FACTORS];
	char fname[KFAC_MAX_FACTORS][16];
	clp_cl_block *blk;  /* factors, then the two inverse sets */
	clp_buf *F, *inv[2]; /* [li * nf + f] */
	int active;         /* which inverse set preconditions */
	clp_cl_block *misc;
	clp_buf mv[MV_COUNT];
	int collecting, has_hist, ema_owner, defer;
	float wa, wb;       /* weights of this cycle's A and B contributions */
	struct kfac_kept *kept;
	int nkept;
	int *is_kfac;       /* per stage tensor: preconditioned */
	float **host;       /* checkpoint copies */
	int nhost;
};

static inline clp_buf kfac_off(clp_buf b, size_t off)
{
	return clp_buf_at(b.mem, b.off + off);
}

/* The CLP_KFAC_NSTATS statistics of (stage layer li, linear lin). */
static inline clp_buf kfac_stats(const clp_kfac_opt *k, int li, int lin)
{
	return kfac_off(k->mv[MV_STATS], ((size_t)li * CLP_LIN_COUNT + (size_t)lin) * CLP_KFAC_NSTATS);
}

clp_status kfac_copy(clp_cl_ctx *ctx, clp_buf dst, clp_buf src, size_t n);
void kfac_free_host(clp_kfac_opt *k);

#endif
