/* The cost table (docs/FORMATS.md): per stage, the duration of each operation kind per
 * micro-batch (or per step), activation, parameter and optimizer-state sizes; optionally
 * measured times per device kind. The device benchmark and calibration from traces write it; the
 * simulator, placement, PipeFisher and SkipPipe read it (and extend it rather than invent their
 * own). Profiles published with PipeFisher import into it (clp_costs_from_profile). */
#ifndef CLP_IO_COSTS_H
#define CLP_IO_COSTS_H

#include <stdint.h>

#include "cl/base/half.h"
#include "cl/base/status.h"
#include "engine/scenario/cluster.h"

typedef enum clp_cost_time {
	CLP_COST_FWD,          /* fwd_s: forward of one micro-batch through the stage */
	CLP_COST_BWD,          /* bwd_s: full backward */
	CLP_COST_BWD_B,        /* bwd_b_s: input-gradient half (zero-bubble B) */
	CLP_COST_BWD_W,        /* bwd_w_s: weight-gradient half (zero-bubble W) */
	CLP_COST_OPT,          /* opt_s: optimizer step of the stage */
	CLP_COST_KFAC_CURV_A,  /* kfac_curv_a_s: factors A of the stage's layers, one micro-batch */
	CLP_COST_KFAC_CURV_B,  /* kfac_curv_b_s: factors B, one micro-batch */
	CLP_COST_KFAC_INV,     /* kfac_inv_s: inverting all the stage's factors */
	CLP_COST_KFAC_PRECOND, /* kfac_precond_s: preconditioning the stage's gradients */
	CLP_COST_NTIMES
} clp_cost_time;

typedef struct clp_stage_cost {
	double t[CLP_COST_NTIMES]; /* seconds, on a device of the table's device_kind */
	int64_t act_bytes;   /* activations kept per micro-batch from F until B */
	int64_t act_w_bytes; /* of those, kept from B until W when the backward is split */
	int64_t out_bytes;   /* output activation per micro-batch: the message to the next stage
			      * (and the size of the gradient coming back) */
	int64_t param_bytes;
	int64_t frozen_bytes; /* of param_bytes, the frozen tensors' (train.freeze, a LoRA
			       * base): no gradient, no all-reduce (default 0) */
	int64_t opt_bytes;   /* optimizer state (AdamW: 2 x the trained param_bytes, the
			      * default) */
	int64_t kfac_bytes;  /* K-FAC factors and their inverses */
	int64_t work_bytes;  /* held all step besides parameters: backward temporaries, the
			      * recomputation buffer (the planner's tables; 0 elsewhere) */
	int nlayers;         /* K-FAC per-layer items take stage totals / nlayers */
	double prep_s;       /* of opt_s, the part an OPT_PREP runs early (clp_sched_place_prep:
			      * Muon's momentum and Newton-Schulz), on the table's device kind; the
			      * simulator charges an OPT_PREP prep_s / opt_s of the rank's
			      * optimizer-step time and its stage's OPT_STEP of that step the rest
			      * (0, the default: an OPT_PREP is free, the OPT_STEP whole) */
	char blocks[128];    /* free-form description of the stage's blocks ("" if none); the
			      * planner's block tables name theirs "embedding", "layer", "head" */
} clp_stage_cost;

/* A byte field of a cost table is at most 2^50 (1 PiB, more than any device holds), so the sums
 * and small multiples the simulator and planner make of them stay far from overflowing; totals
 * over many stages or micro-batches add with clp_bytes_add, which saturates. */
#define CLP_COST_MAX_BYTES ((int64_t)1 << 50)

/* Bytes of stage sc's gradients: its parameters less the frozen ones. */
static inline int64_t clp_cost_grad_bytes(const clp_stage_cost *sc)
{
	return sc->param_bytes - sc->frozen_bytes;
}

static inline int64_t clp_bytes_add(int64_t a, int64_t b)
{
	int64_t r;

	return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

/* At most this many K-FAC factors per layer have their own share of the inversion time. */
#define CLP_COST_MAX_FACTORS 16

typedef struct clp_costs {
	int nstages;
	clp_stage_cost *stages;
	char device_kind[CLP_NAME_MAX]; /* the kind the stage times were measured on */
	char source[256];               /* where the numbers came from */
	char file[256];                 /* the file it was read from ("" if made in memory) */
	int micro_batch_size;           /* samples per micro-batch (0: unknown) */
	/* The storage precision the table was measured (or computed) in: activations and the
	 * messages between stages (out_bytes) are elements x 4 (fp32) or x 2 (bf16, fp16);
	 * param_bytes, opt_bytes stay the fp32 masters, gradients and optimizer state, and a
	 * 16-bit run also holds a 16-bit copy of the weights (clp_costs_wcopy_bytes). A file
	 * without the field is fp32. */
	clp_dtype precision;
	/* K-FAC: a layer's factors (in the optimizer's order) and each one's share of the layer's
	 * inversion time (they sum to 1), for per-factor KFAC_INV items; 0 factors: unknown, a
	 * per-factor item then costs the whole layer's inversion. */
	int kfac_nfactors;
	double kfac_share[CLP_COST_MAX_FACTORS];
	/* Phases a KFAC_INV item with op.mb >= 0 is one of (0: 3, K-FAC's three; Shampoo's
	 * roots: one per Newton iteration). In memory only (clp_pf_work_costs sets it). */
	int inv_phases;
	/* Delayed Muon: bytes of one layer's delayed directions (fp32), the payload of a split
	 * stage's KFAC_INV_SYNC (0: kfac_bytes / layers). In memory only (clp_pf_work_costs sets
	 * it; the directions live in the AdamW second moments, opt_bytes, so no kfac_bytes). */
	int64_t delay_layer_bytes;
	/* Times measured on other device kinds: kind_t[(k * nstages + s) * NTIMES + t], NAN
	 * where not given (then the stage time divided by the device's speed applies). */
	int nkinds;
	char (*kinds)[CLP_NAME_MAX];
	double *kind_t;
} clp_costs;

/* JSON field name of a time ("fwd_s"). */
const char *clp_cost_time_name(int t);

/* nstages stages with all times and sizes zero. */
clp_status clp_costs_create(int nstages, clp_costs **out);
/* Equal stages: forward tf, backward tb split as tb - tw (B) and tw (W); tw < 0 means tb / 2. */
clp_status clp_costs_uniform(int nstages, double tf, double tb, double tw, clp_costs **out);
clp_status clp_costs_load(const char *path, clp_costs **out);
clp_status clp_costs_save(const clp_costs *c, const char *path);
void clp_costs_free(clp_costs *c);

/* "fp32", "bf16" or "fp16" into *out; anything else is CLP_ERR_INVALID naming `origin` (a flag
 * or a config field). */
clp_status clp_costs_precision_parse(const char *name, const char *origin, clp_dtype *out);
/* Convert the table's sizes to another storage precision: out_bytes (the messages between
 * stages, the SkipPipe paths' messages) exactly by size(p) / size(table's), act_bytes and
 * act_w_bytes by the same ratio (an approximation: a 16-bit run keeps its few statistics,
 * norms' means and attention's log-sum-exps, in fp32); parameters, gradients and optimizer
 * state stay fp32. Times are left as measured (a table measured in fp32 keeps its compute
 * times). The table's precision becomes p. */
void clp_costs_set_precision(clp_costs *c, clp_dtype p);
/* Bytes of stage s's 16-bit weight copy: param_bytes / 2 in a 16-bit table, 0 in fp32. */
int64_t clp_costs_wcopy_bytes(const clp_costs *c, int s);

/* Index of a device kind among the overrides, -1 if none. */
int clp_costs_kind_index(const clp_costs *c, const char *kind);
/* Duration of time t of stage s on a device: its kind's measurement, else the table's time
 * divided by speed (the device's speed relative to the table's device_kind). */
double clp_costs_time(const clp_costs *c, int s, int t, int kind_index, double speed);

/* Import a PipeFisher per-layer profile (the CSV files in ../shared/profiles/pipefisher): layers split
 * evenly over nstages (earlier stages get the remainder). nlayers, seq and hidden of 0 take the
 * model's values from the file name (bert-base, bert-large, t5-*, opt-*); batch is the row
 * (micro-batch size) to use. */
typedef struct clp_profile_opts {
	int nstages, nlayers, batch, seq, hidden;
} clp_profile_opts;
clp_status clp_costs_from_profile(const char *csv_path, const clp_profile_opts *o, clp_costs **out);
/* The published shape of a profile's model from its file name (1; 0: not one of them). */
int clp_profile_shape(const char *csv_path, int *layers, int *seq, int *hidden);
/* Set the K-FAC factor shares from the factors' dimensions: inversion time grows as d^3. */
clp_status clp_costs_set_kfac_factors(clp_costs *c, const int *dims, int n);

struct clp_trace;
/* Set each stage's compute times to the mean duration of its events in a trace (calibration);
 * kinds without events keep their values. K-FAC items, which are per layer (factors) and per
 * layer and factor (inversions), add up over the stage's layers and factors (each item's mean),
 * and set the factor shares when every factor was seen. An OPT_PREP's time (Muon's early
 * part) adds to its stage's optimizer step: the step's cost stays the whole update's. Returns
 * how many times were set. */
clp_status clp_costs_calibrate(clp_costs *c, const struct clp_trace *t, int *nset);

#endif
