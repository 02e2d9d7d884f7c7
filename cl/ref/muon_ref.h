/* Plain C reference of Muon (cl/muon.h) in double precision: the same formulas, with the
 * transpose of a tall matrix done as torch does it (a copy), so the fp32 device code is checked
 * against an independent arrangement of the iteration. */
#ifndef CLP_REF_MUON_REF_H
#define CLP_REF_MUON_REF_H

#include <stddef.h>

#include "cl/muon.h"

/* In place on x (rows x cols, row-major): normalise by max(||x||_F, eps), then steps of the
 * quintic Newton-Schulz iteration. */
void clp_ref_muon_orthogonalize(double *x, size_t rows, size_t cols, int steps);
/* One step: p, buf (rows x cols) updated from g times gscale; skip: nothing changes. */
void clp_ref_muon_step(double *p, double *buf, const float *g, size_t rows, size_t cols,
		       const clp_muon_hp *hp, double gscale);
/* One step of the one-step-delayed Muon (clp_muon_delayed_commit): p moves by the
 * orthogonalisation of the pending direction d, then buf takes g times gscale and d := the new
 * (un-normalised) direction; skip (a non-finite step): p and buf unchanged, d := 0. */
void clp_ref_muon_delayed_step(double *p, double *buf, double *d, const float *g, size_t rows,
			       size_t cols, const clp_muon_hp *hp, double gscale, int skip);

#endif
