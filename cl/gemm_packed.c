/* Host side of the CPU-shaped packed GEMM (kernels/gemm_packed.cl): B (and a transposed A) are
 * packed into strips, then one work-item per work-group computes an mc x nc tile of C with a
 * register-blocked micro-kernel. Compile-time shape (VW, MR, NV, PK, PS) and run-time blocking
 * (MC, NC, KC, DIRECT_A, KCH, PF) come from the tuning table (cl/tuning/gemm.json). */
#include "cl/gemm_internal.h"

#include <stdio.h>
#include <string.h>

#define PACKED_FILE "gemm_packed.cl"

struct packed {
	clp_cl_ctx *ctx;
	int VW, MR, NV, NR, PK, PS, MC, NC, KC, direct_a, kch, pf;
	int nthreads;
	char defines[256], adefs[288], bdefs[288], cdefs[320];
	cl_kernel pack_a, pack_b, pack_ab, compute;
};

static size_t cdiv(size_t a, size_t b)
{
	return (a + b - 1) / b;
}

static const char *ab_define(clp_dtype t)
{
	return t == CLP_BF16 ? "#define AB_TYPE 1\n" : t == CLP_F16 ? "#define AB_TYPE 2\n" : "";
}

static clp_status setup(clp_cl_ctx *ctx, const clp_gemm_tuning *t, clp_dtype at, clp_dtype bt,
			clp_dtype ct, struct packed *p)
{
	memset(p, 0, sizeof(*p));
	p->ctx = ctx;
	p->VW = (int)clp_gemm_param_get(t, "VW", 8);
	p->MR = (int)clp_gemm_param_get(t, "MR", 6);
	p->NV = (int)clp_gemm_param_get(t, "NV", 2);
	p->PK = (int)clp_gemm_param_get(t, "PK", 256);
	p->PS = (int)clp_gemm_param_get(t, "PS", 8);
	p->MC = (int)clp_gemm_param_get(t, "MC", 96);
	p->NC = (int)clp_gemm_param_get(t, "NC", 192);
	p->KC = (int)clp_gemm_param_get(t, "KC", 768);
	p->direct_a = (int)clp_gemm_param_get(t, "DIRECT_A", 1);
	p->kch = (int)clp_gemm_param_get(t, "KCH", 512);
	p->pf = (int)clp_gemm_param_get(t, "PF", 1);
	p->NR = p->NV * p->VW;
	p->nthreads = (int)clp_cl_ctx_device(ctx)->compute_units;
	if ((p->VW != 4 && p->VW != 8 && p->VW != 16) || p->MR < 1 || p->NV < 1 || p->PK < 1 ||
	    p->PS < 1 || p->MC < 1 || p->NC < 1 || p->KC < 1)
		return clp_error(CLP_ERR_INVALID, "gemm packed (%s): bad parameters VW=%d MR=%d NV=%d "
				 "PK=%d PS=%d MC=%d NC=%d KC=%d", t->source, p->VW, p->MR, p->NV,
				 p->PK, p->PS, p->MC, p->NC, p->KC);
	/* only the register shape is compiled in; blocking stays a run-time argument */
	snprintf(p->defines, sizeof(p->defines), "#define VW %d\n#define MR %d\n#define NV %d\n"
		 "#define PK %d\n#define PS %d\n", p->VW, p->MR, p->NV, p->PK, p->PS);
	/* 16-bit storage: the packing kernels are built for their operand's type, and so is the
	 * compute kernel for A's (its direct path reads A converting on load, so a 16-bit A needs
	 * no pack_a launch and no K chunks, like an fp32 one; packed strips are always fp32) */
	snprintf(p->adefs, sizeof(p->adefs), "%s%s", p->defines, ab_define(at));
	snprintf(p->bdefs, sizeof(p->bdefs), "%s%s", p->defines, ab_define(bt));
	snprintf(p->cdefs, sizeof(p->cdefs), "%s%s", p->adefs, clp_dtype_st_define(ct));
	CLP_TRY(clp_cl_kernel(ctx, PACKED_FILE, p->adefs, "clp_gemm_pack_a", &p->pack_a));
	CLP_TRY(clp_cl_kernel(ctx, PACKED_FILE, p->bdefs, "clp_gemm_pack_b", &p->pack_b));
	if (at == bt) /* A and B packed in one launch needs one storage type */
		CLP_TRY(clp_cl_kernel(ctx, PACKED_FILE, p->adefs, "clp_gemm_pack_ab", &p->pack_ab));
	return clp_cl_kernel(ctx, PACKED_FILE, p->cdefs, "clp_gemm_packed", &p->compute);
}

static size_t packa_floats(const struct packed *p, size_t M, size_t K)
{
	return cdiv(M, (size_t)p->MR) * (size_t)p->MR * K;
}

static size_t packb_floats(const struct packed *p, size_t N, size_t K)
{
	return cdiv(N, (size_t)p->NR) * (size_t)p->NR * K;
}

/* Strips of S rows x K of X (row stride ld; trans: element (row, k) at X[k ld + row]). */
static clp_status pack(struct packed *p, cl_kernel k, const char *label, int S, int trans,
		       size_t rows, size_t K, cl_mem X, size_t offX, size_t ld, size_t strideX,
		       cl_mem Xp, size_t strideXp, size_t batch)
{
	cl_int r = (cl_int)rows, kk = (cl_int)K, tr = trans, l = (cl_int)ld;
	cl_long o = (cl_long)offX, sx = (cl_long)strideX, sp = (cl_long)strideXp;
	size_t gs[3], ls[3] = {1, 1, 1};

	if (!rows || !K || !batch)
		return CLP_OK;
	CLP_TRY(clp_cl_args(p->ctx, k, 9, CLP_ARG(r), CLP_ARG(kk), CLP_ARG(tr), CLP_ARG(X),
			    CLP_ARG(o), CLP_ARG(l), CLP_ARG(sx), CLP_ARG(Xp), CLP_ARG(sp)));
	gs[0] = cdiv(cdiv(rows, (size_t)S), (size_t)p->PS);
	gs[1] = cdiv(K, (size_t)p->PK);
	gs[2] = batch;
	return clp_cl_run(p->ctx, k, label, 3, gs, ls);
}

/* Where op(B)'s chunk of kk rows from ob goes: kept strips when B's buffer is held (cl/gemm.h
 * "Kept packs"; *need 0 when they already hold it), else scratch Bp (*need 1). */
static clp_status b_strips(struct packed *p, const struct clp_gemm_call *g, size_t ob, size_t kk,
			   cl_mem Bp, size_t sbp, cl_mem *out, int *kept, int *need)
{
	struct clp_gemm_pack_key key = {p->pack_b, g->b.mem, ob, g->ldb, g->sb, g->batch,
					(int)g->tb, g->n, kk};
	cl_mem km;
	int valid;

	CLP_TRY(clp_gemm_cache_find(p->ctx, &key, g->batch * sbp * 4 + 4, &km, &valid));
	*out = km ? km : Bp;
	*kept = km != NULL;
	*need = !(km && valid) && kk > 0 && g->n > 0;
	return CLP_OK;
}

/* Pack op(A)'s chunk (oa, kk) into Ap and op(B)'s (ob) into Bk in one clp_gemm_pack_ab launch:
 * the two packing kernels' work-items side by side, the same strips. */
static clp_status pack_ab(struct packed *p, const struct clp_gemm_call *g, size_t oa, size_t ob,
			  size_t kk, cl_mem Ap, size_t sap, cl_mem Bk, size_t sbp)
{
	cl_int ga = (cl_int)cdiv(cdiv(g->m, (size_t)p->MR), (size_t)p->PS);
	cl_int m = (cl_int)g->m, n = (cl_int)g->n, k = (cl_int)kk, ta = (int)g->ta, tb = (int)g->tb;
	cl_int la = (cl_int)g->lda, lb = (cl_int)g->ldb;
	cl_long o1 = (cl_long)oa, s1 = (cl_long)g->sa, p1 = (cl_long)sap;
	cl_long o2 = (cl_long)ob, s2 = (cl_long)g->sb, p2 = (cl_long)sbp;
	size_t gs[3], ls[3] = {1, 1, 1};

	CLP_TRY(clp_cl_args(p->ctx, p->pack_ab, 18, CLP_ARG(ga), CLP_ARG(m), CLP_ARG(k),
			    CLP_ARG(ta), CLP_ARG(g->a.mem), CLP_ARG(o1), CLP_ARG(la), CLP_ARG(s1),
			    CLP_ARG(Ap), CLP_ARG(p1), CLP_ARG(n), CLP_ARG(tb), CLP_ARG(g->b.mem),
			    CLP_ARG(o2), CLP_ARG(lb), CLP_ARG(s2), CLP_ARG(Bk), CLP_ARG(p2)));
	gs[0] = (size_t)ga + cdiv(cdiv(g->n, (size_t)p->NR), (size_t)p->PS);
	gs[1] = cdiv(kk, (size_t)p->PK);
	gs[2] = g->batch;
	return clp_cl_run(p->ctx, p->pack_ab, "gemm_pack_ab", 3, gs, ls);
}

/* Blocking: kc splits K evenly into blocks <= KC; mc and nc start at MC and NC and shrink until
 * there are enough work-groups (8 per thread) to balance the load. */
static void blocking(const struct packed *p, size_t M, size_t N, size_t K, size_t batch, int *mc,
		     int *nc, int *kc)
{
	size_t nkb = cdiv(K ? K : 1, (size_t)p->KC), want = (size_t)p->nthreads * 8;
	int m = (int)(cdiv((size_t)p->MC, (size_t)p->MR) * (size_t)p->MR);
	int n = (int)(cdiv((size_t)p->NC, (size_t)p->NR) * (size_t)p->NR);

	*kc = (int)cdiv(K ? K : 1, nkb);
	if ((size_t)m > cdiv(M, (size_t)p->MR) * (size_t)p->MR)
		m = (int)(cdiv(M, (size_t)p->MR) * (size_t)p->MR);
	if ((size_t)n > cdiv(N, (size_t)p->NR) * (size_t)p->NR)
		n = (int)(cdiv(N, (size_t)p->NR) * (size_t)p->NR);
	while (cdiv(M, (size_t)m) * cdiv(N, (size_t)n) * batch < want) {
		if (n >= m && n > p->NR)
			n = (int)(cdiv((size_t)n / 2, (size_t)p->NR) * (size_t)p->NR);
		else if (m > p->MR)
			m = (int)(cdiv((size_t)m / 2, (size_t)p->MR) * (size_t)p->MR);
		else if (n > p->NR)
			n = (int)(cdiv((size_t)n / 2, (size_t)p->NR) * (size_t)p->NR);
		else
			break;
	}
	*mc = m;
	*nc = n;
}

/* A region to prefetch while computing: rows x len floats of buf from off, stride ld. */
struct region {
	cl_mem buf;
	size_t off;
	int rows, len, ld;
};

static clp_status compute(struct packed *p, size_t M, size_t N, size_t K, float alpha,
			  cl_mem A, size_t offA, size_t lda, int apacked, size_t strideA,
			  cl_mem Bp, size_t strideBp, float beta, cl_mem C, size_t offC, size_t ldc,
			  size_t strideC, size_t batch, const struct region *pf1,
			  const struct region *pf2, clp_buf bias, clp_buf act, int gelu)
{
	static const struct region none = {NULL, 0, 0, 0, 0};
	const struct region *pr[2] = {pf1 ? pf1 : &none, pf2 ? pf2 : &none};
	cl_kernel k = p->compute;
	cl_int m = (cl_int)M, n = (cl_int)N, kk = (cl_int)K, la = (cl_int)lda, ap = apacked;
	cl_int lc = (cl_int)ldc, mc, nc, kc;
	cl_long oa = (cl_long)offA, sa = (cl_long)strideA, sbp = (cl_long)strideBp;
	cl_long oc = (cl_long)offC, sc = (cl_long)strideC, bo = (cl_long)bias.off;
	cl_int hb = bias.mem != NULL, ge = hb && act.mem ? gelu : -1;
	cl_mem bm = hb ? bias.mem : C; /* a buffer the kernel does not read without has_bias */
	cl_mem am = ge >= 0 ? act.mem : C; /* nor act without gelu */
	cl_long ao = (cl_long)act.off;
	size_t gs[3], ls[3] = {1, 1, 1};

	if (!M || !N || !batch)
		return CLP_OK;
	blocking(p, M, N, K, batch, &mc, &nc, &kc);
	CLP_TRY(clp_cl_args(p->ctx, k, 19, CLP_ARG(m), CLP_ARG(n), CLP_ARG(kk), CLP_ARG(alpha),
			    CLP_ARG(beta), CLP_ARG(A), CLP_ARG(oa), CLP_ARG(la), CLP_ARG(ap),
			    CLP_ARG(sa), CLP_ARG(Bp), CLP_ARG(sbp), CLP_ARG(C), CLP_ARG(oc),
			    CLP_ARG(lc), CLP_ARG(sc), CLP_ARG(mc), CLP_ARG(nc), CLP_ARG(kc)));
	for (int r = 0; r < 2; r++) {
		cl_mem b = pr[r]->buf;
		cl_long off = (cl_long)pr[r]->off;
		cl_int rows = b ? pr[r]->rows : 0, len = pr[r]->len, ld = pr[r]->ld;

		const void *bp = b ? (const void *)&b : NULL; /* no region: a NULL buffer */

		CLP_TRY(clp_cl_args_at(p->ctx, k, 19 + 5 * r, 5, sizeof(cl_mem), bp, CLP_ARG(off),
				       CLP_ARG(rows), CLP_ARG(len), CLP_ARG(ld)));
	}
	CLP_TRY(clp_cl_args_at(p->ctx, k, 29, 6, CLP_ARG(bm), CLP_ARG(bo), CLP_ARG(hb), CLP_ARG(am),
			       CLP_ARG(ao), CLP_ARG(ge)));
	gs[0] = cdiv(N, (size_t)nc);
	gs[1] = cdiv(M, (size_t)mc);
	gs[2] = batch;
	return clp_cl_run(p->ctx, k, "gemm_packed", 3, gs, ls);
}

static int uses_pack_a(const struct packed *p, int ta)
{
	return ta || !p->direct_a; /* direct reads need op(A) = A */
}

int clp_gemm_packed_stores_c(const clp_gemm_tuning *t, const struct clp_gemm_call *g)
{
	size_t K = g->alpha == 0.0f ? 0 : g->k;
	long kc = clp_gemm_param_get(t, "KC", 768), kch = clp_gemm_param_get(t, "KCH", 512);
	int direct = clp_gemm_param_get(t, "DIRECT_A", 1) && !g->ta; /* as uses_pack_a */

	if (g->c.dt == CLP_F32)
		return 1;
	/* one K block in one K chunk: each element of C is written once. The block may reach
	 * 2 KC for a 16-bit C: a longer B panel costs less than the fp32 scratch round trip and
	 * the gemm_store_c launch (GPT-2-small's K = 768 forward products with KC = 512 on
	 * AVX-512, clpipe bench gemm: 1.00-1.05x fp32 so, 0.93-1.03x through scratch) */
	return K > 0 && K <= 2 * (size_t)kc && (direct || kch <= 0 || K <= (size_t)kch);
}

int clp_gemm_packed_gelu_ok(const clp_gemm_tuning *t, const struct clp_gemm_call *g)
{
	long nr = clp_gemm_param_get(t, "VW", 8) * clp_gemm_param_get(t, "NV", 2);

	return g->batch == 1 && g->ldc == g->n && g->n % 8 == 0 && nr % 8 == 0 &&
	       g->act.dt == g->c.dt && g->bias.mem;
}

clp_status clp_gemm_packed_run(clp_cl_ctx *ctx, const clp_gemm_tuning *t,
			       const struct clp_gemm_call *g)
{
	clp_buf nob = CLP_BUF_NONE;
	struct packed p;
	size_t K = g->alpha == 0.0f ? 0 : g->k; /* BLAS: alpha = 0 reads neither A nor B */
	size_t kch;
	cl_mem Ap = NULL, Bp = NULL, Bk = NULL;

	if (!clp_gemm_packed_stores_c(t, g))
		return clp_error(CLP_ERR_INVALID, "gemm packed: a 16-bit C needs one K block here "
				 "(cl/gemm.c rounds the others from fp32 scratch)");
	if (g->bias.mem && (K == 0 || g->bias.dt != g->c.dt))
		return clp_error(CLP_ERR_INVALID, "gemm packed: a bias in the store needs K > 0 "
				 "and C's storage type (cl/gemm.c adds the others apart)");
	if (g->bias.mem && g->act.mem && g->gelu >= 0 &&
	    !clp_gemm_packed_gelu_ok(t, g))
		return clp_error(CLP_ERR_INVALID, "gemm packed: GELU in the store needs batch 1, "
				 "a dense C and act of C's type, N and the strip width multiples of 8");
	CLP_TRY(setup(ctx, t, g->a.dt, g->b.dt, g->c.dt, &p));
	if (g->c.dt != CLP_F32)
		p.KC = (int)K; /* one K block (clp_gemm_packed_stores_c) */
	/* K goes in chunks when A is packed, so the packed chunks stay in the last-level cache
	 * between packing and computing */
	kch = (p.kch > 0 && uses_pack_a(&p, g->ta)) ? (size_t)p.kch : K;
	if (kch == 0)
		kch = 1;
	CLP_TRY(clp_cl_scratch(ctx, CLP_SCRATCH_GEMM_B, g->batch * packb_floats(&p, g->n, kch) * 4 + 4,
			       &Bp));
	if (uses_pack_a(&p, g->ta))
		CLP_TRY(clp_cl_scratch(ctx, CLP_SCRATCH_GEMM_A,
				       g->batch * packa_floats(&p, g->m, kch) * 4 + 4, &Ap));
	for (size_t k0 = 0; k0 < K || k0 == 0; k0 += kch) {
		size_t kk = K - k0 < kch ? K - k0 : kch, kn;
		size_t oa = g->a.off + k0 * (g->ta ? g->lda : 1);
		size_t ob = g->b.off + k0 * (g->tb ? 1 : g->ldb);
		size_t sbp = packb_floats(&p, g->n, kk), sap = packa_floats(&p, g->m, kk);
		struct region pa = {NULL, 0, 0, 0, 0}, pb = {NULL, 0, 0, 0, 0};
		int kept, need, pa_too = uses_pack_a(&p, g->ta) && g->m > 0 && kk > 0;
		clp_buf bias = k0 + kk >= K ? g->bias : nob; /* the last chunk adds the bias */
		clp_status s;

		CLP_TRY(b_strips(&p, g, ob, kk, Bp, sbp, &Bk, &kept, &need));
		if (need && pa_too && p.pack_ab && g->batch > 0) {
			s = pack_ab(&p, g, oa, ob, kk, Ap, sap, Bk, sbp);
			pa_too = 0;
		} else if (need) {
			s = pack(&p, p.pack_b, "gemm_pack_b", p.NR, (int)g->tb, g->n, kk, g->b.mem,
				 ob, g->ldb, g->sb, Bk, sbp, g->batch);
		} else {
			s = CLP_OK;
		}
		if (s != CLP_OK && kept)
			clp_cl_gemm_stale(p.ctx, g->b.mem);
		CLP_TRY(s);
		if (!uses_pack_a(&p, g->ta)) /* one chunk: kch == K */
			return compute(&p, g->m, g->n, kk, g->alpha, g->a.mem, oa, g->lda, 0, g->sa,
				       Bk, sbp, g->beta, g->c.mem, g->c.off, g->ldc, g->sc, g->batch,
				       NULL, NULL, bias, g->act, g->gelu);
		if (pa_too)
			CLP_TRY(pack(&p, p.pack_a, "gemm_pack_a", p.MR, (int)g->ta, g->m, kk,
				     g->a.mem, oa, g->lda, g->sa, Ap, sap, g->batch));
		/* while computing this chunk, pull the next chunk of A and B towards the cache
		 * (regions count floats: a 16-bit operand is not prefetched) */
		kn = K - k0 - kk < kch ? K - k0 - kk : kch;
		if (p.pf && kn > 0 && g->batch == 1 && g->a.dt == CLP_F32)
			pa = (struct region){g->a.mem, oa + kk * (g->ta ? g->lda : 1),
					     (int)(g->ta ? kn : g->m), (int)(g->ta ? g->m : kn),
					     (int)g->lda};
		if (p.pf && kn > 0 && g->batch == 1 && g->b.dt == CLP_F32)
			pb = (struct region){g->b.mem, ob + kk * (g->tb ? 1 : g->ldb),
					     (int)(g->tb ? g->n : kn), (int)(g->tb ? kn : g->n),
					     (int)g->ldb};
		CLP_TRY(compute(&p, g->m, g->n, kk, g->alpha, Ap, 0, 0, 1, sap, Bk, sbp,
				k0 == 0 ? g->beta : 1.0f, g->c.mem, g->c.off, g->ldc, g->sc, g->batch,
				&pa, &pb, bias, g->act, g->gelu));
		if (K == 0)
			break;
	}
	return CLP_OK;
}

void clp_gemm_pack_shape(const clp_gemm_tuning *t, int *nr, int *kch, int *direct_a)
{
	int packed = t->backend == CLP_GEMM_PACKED;

	*nr = packed ? (int)(clp_gemm_param_get(t, "VW", 8) * clp_gemm_param_get(t, "NV", 2)) : 0;
	*kch = (int)clp_gemm_param_get(t, "KCH", 512);
	*direct_a = (int)clp_gemm_param_get(t, "DIRECT_A", 1);
}

/* Candidate shapes and blockings for `clpipe tune gemm`: register tiles that fit the vector
 * register file (16 registers below AVX-512, 32 with it), blockings around the defaults. */
int clp_gemm_packed_candidates(const clp_cl_devinfo *dev, unsigned seed, clp_gemm_tuning *out,
			       int max)
{
	static const int mr[] = {4, 6, 8}, nv[] = {1, 2, 3}, mc[] = {48, 96, 192},
			 nc[] = {96, 192, 384}, kc[] = {256, 512, 768}, da[] = {0, 1},
			 kch[] = {0, 512};
	clp_gemm_tuning base;
	int n = 0, regs, vw;

	if (clp_gemm_tuning_lookup(dev, CLP_GEMM_PACKED, &base) != CLP_OK)
		memset(&base, 0, sizeof(base));
	vw = (int)clp_gemm_param_get(&base, "VW", 8);
	regs = vw == 16 ? 32 : 16;
	for (int tries = 0; n < max && tries < 100000; tries++) {
		clp_gemm_tuning *t = &out[n];
		int MR, NV;
		long v[9];
		static const char *const names[9] = {"VW", "MR", "NV", "PK", "PS", "MC",
						     "NC", "KC", "DIRECT_A"};

		seed = seed * 1103515245u + 12345u;
		MR = mr[(seed >> 8) % 3];
		NV = nv[(seed >> 12) % 3];
		if (MR * NV + NV + 1 > regs) /* accumulators, B vectors and one broadcast */
			continue;
		v[0] = vw;
		v[1] = MR;
		v[2] = NV;
		v[3] = 256;
		v[4] = 8;
		v[5] = mc[(seed >> 16) % 3];
		v[6] = nc[(seed >> 18) % 3];
		v[7] = kc[(seed >> 20) % 3];
		v[8] = da[(seed >> 22) % 2];
		memset(t, 0, sizeof(*t));
		t->backend = CLP_GEMM_PACKED;
		for (int i = 0; i < 9; i++) {
			snprintf(t->params[i].name, sizeof(t->params[i].name), "%s", names[i]);
			t->params[i].value = v[i];
		}
		snprintf(t->params[9].name, sizeof(t->params[9].name), "KCH");
		t->params[9].value = kch[(seed >> 24) % 2];
		snprintf(t->params[10].name, sizeof(t->params[10].name), "PF");
		t->params[10].value = 1;
		t->nparams = 11;
		snprintf(t->source, sizeof(t->source), "candidate %d", n);
		n++;
	}
	return n;
}
