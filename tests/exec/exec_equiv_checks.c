/* The pipelined-equivalence test's checks of a run's traces and PipeFisher cycles
 * (exec_equiv_checks.c), apart from test_exec_equiv.c, whose settings they read. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/io/checkpoint.h"
#include "engine/sched/sched_json.h"
#include "tests/exec/exec_equiv.h"
#include "tests/harness.h"

/* The PipeFisher cycle in run `sub`'s latest checkpoint: its KFAC_INV items in phases (op.mb
 * >= 0), and 1 + the largest phase into *nph. */
/* The PipeFisher cycle stored in run `sub`'s latest checkpoint (NULL: none, or unreadable;
 * *had says whether the checkpoint names one); its path into path. */
static clp_sched *load_cycle(const char *sub, char *path, size_t n, int *had)
{
	clp_ckpt *c = NULL;
	clp_sched *cy = NULL;
	const char *text;

	snprintf(path, n, "%s/ck-%s", dir, sub);
	CHECK_OK(clp_ckpt_open_latest(&c, path));
	text = c ? clp_ckpt_meta(c, "pipefisher.cycle") : NULL;
	*had = text != NULL;
	if (text)
		CHECK_OK(clp_sched_from_json(text, path, &cy));
	clp_ckpt_close(c);
	return cy;
}

int cycle_phases(const char *sub, int *nph)
{
	char path[700];
	int n = 0, had;
	clp_sched *cy = load_cycle(sub, path, sizeof(path), &had);

	*nph = 0;
	CHECK(had, "%s: no pipefisher.cycle", path);
	for (int r = 0; cy && r < cy->nranks; r++)
		for (int i = 0; i < cy->ranks[r].nops; i++) {
			const clp_op *o = &cy->ranks[r].ops[i];

			if (o->kind != CLP_OP_KFAC_INV || o->mb < 0)
				continue;
			n++;
			*nph = o->mb + 1 > *nph ? o->mb + 1 : *nph;
		}
	clp_sched_free(cy);
	return n;
}

/* spfph: the cycle of run `sub` without the last phase of one root per rank (the pass's check
 * takes a root whose phases end early for whole: clp_pipefisher_check_work), saved for
 * pipeline.pipefisher_schedule; rank 0 writes it. */
void drop_last_phases(const char *sub, const char *out)
{
	char path[700];
	int nph = 0, had;
	clp_sched *cy = load_cycle(sub, path, sizeof(path), &had);

	cycle_phases(sub, &nph);
	for (int r = 0; cy && r < cy->nranks; r++) {
		clp_rank_prog *p = &cy->ranks[r];
		int last = -1;

		for (int i = 0; i < p->nops; i++)
			if (p->ops[i].kind == CLP_OP_KFAC_INV && p->ops[i].mb == nph - 1)
				last = i;
		CHECK(last >= 0, "rank %d's cycle has a root in phases", r);
		if (last < 0)
			continue;
		memmove(&p->ops[last], &p->ops[last + 1],
			(size_t)(p->nops - last - 1) * sizeof(clp_op));
		p->nops--;
	}
	if (cy)
		CHECK_OK(clp_sched_save(cy, out));
	clp_sched_free(cy);
}

/* spf modes: the pipelined run's cycle holds roots in phases (spfph: 25, one per iteration of
 * shampoo.iters' default) or none (the other spf modes: whole roots fit its bubbles). */
void check_phases(const char *sub)
{
	int nph, n = cycle_phases(sub, &nph);

	printf("%s: %d root phases in the cycle (%d a root)\n", sub, n, nph);
	if (!strcmp(mode, "spfwhole"))
		CHECK(n == 0, "%s: pipeline.pipefisher_phases = false, but the cycle holds %d phase "
		      "items", sub, n);
	if (spfph_mode())
		CHECK(n > 0 && nph == 25, "%s: the cycle holds %d phase items, %d a root (want "
		      "phases, 25 a root)", sub, n, nph);
}

/* muonnoclip: the pipelined run's trace (its last step) has one OPT_PREP of the last stage, on
 * the rank holding it, and at most one of any other (the training schedule got them where they
 * fill a bubble; no times are compared). */
void check_prep_trace(void)
{
	char path[600];
	json_error_t err;
	json_t *root, *ev;
	int seen[64] = {0};
	size_t i;
	json_t *e;

	snprintf(path, sizeof(path), "%s/trace.json", dir);
	root = json_load_file(path, 0, &err);
	ev = root ? json_object_get(root, "traceEvents") : NULL;
	CHECK(ev != NULL, "%s: %s", path, err.text);
	json_array_foreach(ev, i, e) {
		json_t *a = json_object_get(e, "args");
		const char *k = json_string_value(json_object_get(a, "kind"));
		int st = (int)json_integer_value(json_object_get(a, "stage"));
		int pid = (int)json_integer_value(json_object_get(e, "pid"));

		if (!k || strcmp(k, "OPT_PREP") || st < 0 || st >= 64)
			continue;
		seen[st]++;
		CHECK(pid == st, "OPT_PREP of stage %d on rank %d", st, pid);
	}
	for (int s = 0; s < D && s < 64; s++)
		CHECK(seen[s] == (s == D - 1) || (s < D - 1 && seen[s] == 1),
		      "stage %d: %d OPT_PREPs in the traced step", s, seen[s]);
	json_decref(root);
}

/* muondelay*: the pipelined run's traced step has one OPT_PREP of every stage copy (Chimera:
 * two of each, one per pipe), and each rank's first one starts before the rank's first
 * backward (clp_sched_place_prep_delayed puts a rank's first OPT_PREP before its first wait:
 * the last stage's first forward, the others' first backward); with pipeline.optim_prep =
 * false there is none. Times of one rank only are compared (one clock). */
void check_delay_trace(void)
{
	const int chimera = !strcmp(schedule, "chimera");
	char path[600];
	json_error_t err;
	json_t *root, *ev;
	int seen[64] = {0}, has[64] = {0};
	double prep[64], bwd[64];
	size_t i;
	json_t *e;

	for (int r = 0; r < 64; r++)
		prep[r] = bwd[r] = 1e300;
	snprintf(path, sizeof(path), "%s/trace.json", dir);
	root = json_load_file(path, 0, &err);
	ev = root ? json_object_get(root, "traceEvents") : NULL;
	CHECK(ev != NULL, "%s: %s", path, err.text);
	json_array_foreach(ev, i, e) {
		json_t *a = json_object_get(e, "args");
		const char *k = json_string_value(json_object_get(a, "kind"));
		int st = (int)json_integer_value(json_object_get(a, "stage"));
		int pid = (int)json_integer_value(json_object_get(e, "pid"));
		double ts = json_number_value(json_object_get(e, "ts"));

		if (!k || pid < 0 || pid >= 64)
			continue;
		if ((!strcmp(k, "BWD") || !strcmp(k, "BWD_B")) && ts < bwd[pid])
			bwd[pid] = ts;
		if (strcmp(k, "OPT_PREP") || st < 0 || st >= 64)
			continue;
		seen[st]++;
		has[pid] = 1;
		if (ts < prep[pid])
			prep[pid] = ts;
		CHECK(chimera || pid == st, "OPT_PREP of stage %d on rank %d", st, pid);
	}
	for (int s = 0; s < D && s < 64; s++) {
		CHECK(seen[s] == (chimera ? 2 : 1), "stage %d: %d OPT_PREPs in the traced step (%d "
		      "wanted)", s, seen[s], chimera ? 2 : 1);
		CHECK(has[s] && prep[s] < bwd[s], "rank %d: its first OPT_PREP (at %g us) does not "
		      "start before the rank's first backward (at %g us)", s, prep[s], bwd[s]);
	}
	json_decref(root);
}

/* mpfphases: the K = 1 cycle the "pipe0" run kept in its checkpoint, with each whole
 * KFAC_INV item (op.mb -1) replaced by its 5 Newton-Schulz phases (op.mb 0..4, in order, at
 * the item's place), saved as phases.json. */
void write_phases(void)
{
	char path[700];
	clp_ckpt *ck = NULL;
	clp_sched *cy = NULL;
	const char *text;

	snprintf(path, sizeof(path), "%s/ck-pipe0", dir);
	CHECK_OK(clp_ckpt_open_latest(&ck, path));
	text = ck ? clp_ckpt_meta(ck, "pipefisher.cycle") : NULL;
	CHECK(text != NULL, "%s: no pipefisher.cycle", path);
	if (text)
		CHECK_OK(clp_sched_from_json(text, path, &cy));
	for (int r = 0; cy && r < cy->nranks; r++) {
		clp_rank_prog *p = &cy->ranks[r];
		clp_op *ops = malloc(((size_t)p->nops * 5 + 1) * sizeof(*ops));
		int n = 0;

		for (int i = 0; ops && i < p->nops; i++)
			for (int ph = 0; ph < (p->ops[i].kind == CLP_OP_KFAC_INV ? 5 : 1); ph++) {
				ops[n] = p->ops[i];
				if (p->ops[i].kind == CLP_OP_KFAC_INV)
					ops[n].mb = ph;
				n++;
			}
		free(p->ops);
		p->ops = ops;
		p->nops = p->cap = n;
	}
	snprintf(path, sizeof(path), "%s/phases.json", dir);
	if (cy)
		CHECK_OK(clp_sched_save(cy, path));
	clp_sched_free(cy);
	clp_ckpt_close(ck);
}

/* mpf*: every rank's traced step ran KFAC_INV items (the delayed Muon's Newton-Schulz) and no
 * OPT_PREP. */
void check_items_trace(void)
{
	char path[600];
	json_error_t err;
	json_t *root, *ev, *e;
	int items[64] = {0}, preps = 0;
	size_t i;

	snprintf(path, sizeof(path), "%s/trace.json", dir);
	root = json_load_file(path, 0, &err);
	ev = root ? json_object_get(root, "traceEvents") : NULL;
	CHECK(ev != NULL, "%s: %s", path, err.text);
	json_array_foreach(ev, i, e) {
		const char *k = json_string_value(json_object_get(json_object_get(e, "args"), "kind"));
		int pid = (int)json_integer_value(json_object_get(e, "pid"));

		int mb = (int)json_integer_value(json_object_get(json_object_get(e, "args"), "mb"));

		if (k && pid >= 0 && pid < 64) /* mpfphases: phases only */
			items[pid] += !strcmp(k, "KFAC_INV") && (strcmp(mode, "mpfphases") || mb >= 0);
		preps += k && !strcmp(k, "OPT_PREP");
	}
	for (int r = 0; r < D * R && r < 64; r++)
		CHECK(items[r] > 0, "rank %d ran no KFAC_INV item in the traced step", r);
	CHECK(preps == 0, "%d OPT_PREPs beside the pass's items", preps);
	json_decref(root);
}

/* muondelayovf: the pipelined run skipped (non-finite) and took steps. */
void check_skipped(void)
{
	char path[700], line[4096];
	FILE *f;
	int skipped = 0, taken = 0;

	snprintf(path, sizeof(path), "%s/log-pipe.jsonl", dir);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		json_t *j = json_loads(line, 0, NULL);

		if (j && !strcmp(json_string_value(json_object_get(j, "event")), "step")) {
			skipped += json_is_true(json_object_get(j, "skipped"));
			taken += json_is_false(json_object_get(j, "skipped"));
		}
		json_decref(j);
	}
	if (f)
		fclose(f);
	CHECK(skipped >= 2 && taken >= 2, "%s: %d skipped and %d taken steps (2 of each wanted)",
	      path, skipped, taken);
}
