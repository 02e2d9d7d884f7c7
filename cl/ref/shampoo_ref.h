/* Plain C reference of Shampoo (cl/shampoo.h) in double precision. The inverse roots come from
 * a cyclic Jacobi eigendecomposition (what the reference's SVD computes for a symmetric matrix),
 * not from the device's Newton iteration, so the iteration is checked against an independent
 * method. */
#ifndef CLP_REF_SHAMPOO_REF_H
#define CLP_REF_SHAMPOO_REF_H

#include <stddef.h>

#include "cl/shampoo.h"

/* out = (a + ridge ||a||_F I)^(-1/p) (n x n, symmetric positive semidefinite); 0 on success,
 * -1 out of memory. The engine's ridge is CLP_SHAMPOO_RIDGE; pytorch-optimizer's 0. */
int clp_ref_shampoo_inv_root(const double *a, size_t n, int p, double ridge, double *out);
/* One step: p, buf, v (the graft's moment; only with hp->graft) (rows x cols), l, r
 * (statistics), li, ri (their roots) updated from g times
 * gscale, as clp_shampoo_update (hp->iters is ignored: exact roots of l + ridge ||l||_F I and
 * r + ridge ||r||_F I; the engine's ridge is CLP_SHAMPOO_RIDGE, pytorch-optimizer's 0).
 * 0, or -1 out of memory. */
int clp_ref_shampoo_step(double *p, double *buf, double *v, double *l, double *r, double *li,
			 double *ri,
			 const float *g, size_t rows, size_t cols, const clp_shampoo_hp *hp,
			 double gscale, double ridge);

#endif
