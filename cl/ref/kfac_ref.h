/* Plain C references of the K-FAC kernels (cl/kfac.h) in double precision: float inputs where
 * the kernels take them, double results, row-major matrices. The tests compare the device with
 * these, and these with LAPACK (dpotrf, dtrtri). */
#ifndef CLP_REF_KFAC_REF_H
#define CLP_REF_KFAC_REF_H

#include <stddef.h>

/* F (d,d) = beta F + alpha x^T x over rows of x (rows, d), row stride ldx. */
void clp_ref_kfac_factor(double *F, const float *x, size_t ldx, size_t rows, size_t d,
			 double alpha, double beta);
/* The damping of a layer (A of dim dA; nb blocks of B): out[0] damping of A, out[1] of B,
 * out[2] pi; returns 0, or 1 when a factor's trace is zero (2 not finite): then no damping and
 * the layer's inverses are identities. */
int clp_ref_kfac_damping(double out[3], const double *A, size_t dA, const double *const *B,
			 const size_t *dB, int nb, double lambda);
/* In place: the lower Cholesky factor of the SPD W (n,n), zeros above. Returns 0, or j + 1 for
 * the first pivot j that is not positive. */
int clp_ref_cholesky(double *W, size_t n);
/* In place: inverse of a lower-triangular W (n,n) with zeros above. */
void clp_ref_trtri(double *W, size_t n);
/* inv = W^-1 for SPD W (W is left unchanged). Returns as clp_ref_cholesky. */
int clp_ref_spd_inverse(double *inv, const double *W, size_t n);
/* P = Binv G Ainv: G (O,I) row stride ldg, or (in_out) G^T stored (I,O); P dense in G's layout. */
void clp_ref_kfac_precondition(double *P, const double *G, size_t ldg, const double *Binv,
			       const double *Ainv, size_t O, size_t I, int in_out);

#endif
