/* Plain C reference of SOAP (cl/soap.h) in double precision: its own Householder QR (the same
 * convention as LAPACK's geqrf/orgqr and the device's: beta = -sign(alpha) ||x||, tau = 0 for a
 * zero column below the diagonal), the refresh and the whole step. */
#ifndef CLP_REF_SOAP_REF_H
#define CLP_REF_SOAP_REF_H

#include <stddef.h>

#include "cl/soap.h"

/* q (d x d) = the Q factor of a Householder QR of a (d x d); 0, or -1 out of memory */
int clp_ref_soap_qr(const double *a, size_t d, double *q);
/* perm (d) = argsort(e, descending), ties by index, NaN last */
void clp_ref_soap_argsort(const double *e, size_t d, unsigned *perm);
/* v (rows x cols) = v.index_select(axis, perm); 0, or -1 out of memory */
int clp_ref_soap_permute(double *v, size_t rows, size_t cols, int axis, const unsigned *perm);
/* q_next = QR(a q[:, perm]).Q with perm = argsort(diag(q^T a q)); 0, or -1 */
int clp_ref_soap_basis_next(const double *a, const double *q, size_t d, double *q_next,
			    unsigned *perm);
/* One step as clp_soap_update: p, m, v (rows x cols), l, r, ql, qr updated from g times gscale
 * (a set skip: x = 0, p, m, v kept). 0, or -1 out of memory. */
int clp_ref_soap_step(double *p, double *m, double *v, double *l, double *r, double *ql,
		      double *qr, const float *g, size_t rows, size_t cols,
		      const clp_soap_hp *hp, double gscale, int skip);

#endif
