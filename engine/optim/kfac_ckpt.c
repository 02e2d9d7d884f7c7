/* K-FAC state in checkpoints: per layer and factor the factor, the active inverse and the next
 * one (computed this cycle, active from the next), and whether a factor history exists, so a
 * resumed run continues the cycle rule exactly. Stored with the optimizer state. */
#include "engine/optim/kfac_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const set_names[3] = {"factor", "inv", "inv_next"};

void kfac_free_host(clp_kfac_opt *k)
{
	for (int i = 0; i < k->nhost; i++)
		free(k->host[i]);
	free(k->host);
	k->host = NULL;
	k->nhost = 0;
}

/* Device buffer of set s (0 factor, 1 active inverse, 2 next) for (li, f). */
static clp_buf set_buf(const clp_kfac_opt *k, int s, int li, int f)
{
	int i = li * k->nf + f;

	return s == 0 ? k->F[i] : k->inv[s == 1 ? k->active : k->active ^ 1][i];
}

static void tensor_name(const clp_kfac_opt *k, int s, int li, int f, char *buf, size_t n)
{
	snprintf(buf, n, "kfac.layers.%d.%s.%s", k->l0 + li, k->fname[f], set_names[s]);
}

clp_status clp_kfac_opt_save(clp_kfac_opt *k, clp_ckpt_writer *w)
{
	int n = 3 * k->nl * k->nf;
	clp_status st;

	kfac_free_host(k);
	k->host = calloc((size_t)n + 1, sizeof(float *));
	if (!k->host)
		return clp_error(CLP_ERR_NOMEM, "kfac: out of host memory saving a checkpoint");
	k->nhost = n;
	st = clp_ckpt_writer_meta(w, "kfac.has_history", k->has_hist ? "1" : "0");
	for (int s = 0; st == CLP_OK && s < 3; s++)
		for (int li = 0; st == CLP_OK && li < k->nl; li++)
			for (int f = 0; st == CLP_OK && f < k->nf; f++) {
				size_t d = k->fdim[f];
				int64_t shape[2] = {(int64_t)d, (int64_t)d};
				float **h = &k->host[(s * k->nl + li) * k->nf + f];
				clp_buf b = set_buf(k, s, li, f);
				char name[128];

				*h = malloc(d * d * sizeof(float) + 1);
				if (!*h) {
					st = clp_error(CLP_ERR_NOMEM, "kfac: out of host memory saving "
						       "a checkpoint");
					break;
				}
				tensor_name(k, s, li, f, name, sizeof(name));
				st = clp_cl_read(k->ctx, b.mem, b.off * 4, d * d * 4, *h);
				if (st == CLP_OK)
					st = clp_ckpt_writer_add(w, CLP_CKPT_OPTIM, name, *h, 2, shape);
			}
	return st;
}

clp_status clp_kfac_opt_load(clp_kfac_opt *k, clp_ckpt *c)
{
	const char *hist = clp_ckpt_meta(c, "kfac.has_history");
	size_t maxd = 1;
	float *buf;
	clp_status st = CLP_OK;

	if (!hist)
		return clp_error(CLP_ERR_NOT_FOUND, "%s: no K-FAC state (kfac.has_history); it was "
				 "not written by a K-FAC run", clp_ckpt_path(c));
	for (int f = 0; f < k->nf; f++)
		maxd = k->fdim[f] > maxd ? k->fdim[f] : maxd;
	buf = malloc(maxd * maxd * sizeof(float));
	if (!buf)
		return clp_error(CLP_ERR_NOMEM, "kfac: out of host memory loading a checkpoint");
	for (int s = 0; st == CLP_OK && s < 3; s++)
		for (int li = 0; st == CLP_OK && li < k->nl; li++)
			for (int f = 0; st == CLP_OK && f < k->nf; f++) {
				size_t d = k->fdim[f];
				int64_t shape[2] = {(int64_t)d, (int64_t)d};
				clp_buf b = set_buf(k, s, li, f);
				char name[128];

				tensor_name(k, s, li, f, name, sizeof(name));
				st = clp_ckpt_read(c, CLP_CKPT_OPTIM, name, buf, 2, shape);
				if (st == CLP_OK)
					st = clp_cl_write(k->ctx, b.mem, b.off * 4, d * d * 4, buf);
			}
	free(buf);
	if (st == CLP_OK)
		k->has_hist = hist[0] == '1';
	return st;
}
