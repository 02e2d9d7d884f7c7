/* Chrome trace-event JSON for traces (see trace.h): written with stdio so that 10^6-event traces
 * stay cheap, read back with jansson. One process per rank, one thread per queue. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cl/base/durable.h"
#include "cl/base/json_util.h"
#include "engine/scenario/trace.h"
#include "engine/sched/sched.h"

static const char *const queue_names[CLP_TQ_COUNT] = {"compute", "comm"};

static void json_escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	}
}

clp_status clp_trace_write_chrome(const clp_trace *t, const char *path)
{
	clp_afile a;
	FILE *f;

	CLP_TRY(clp_afile_open(&a, path));
	f = a.f;
	fprintf(f, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"title\": \"");
	json_escape(f, t->title);
	fprintf(f, "\", \"events\": %zu, \"dropped\": %zu},\n\"traceEvents\": [\n", t->n, t->dropped);
	for (int r = 0; r < t->nranks; r++) {
		fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": "
			   "{\"name\": \"rank %d\"}},\n", r, r);
		fprintf(f, "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, \"args\": "
			   "{\"sort_index\": %d}},\n", r, r);
		for (int q = 0; q < CLP_TQ_COUNT; q++)
			fprintf(f, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
				   "\"args\": {\"name\": \"%s\"}}%s\n", r, q, queue_names[q],
				r + 1 < t->nranks || q + 1 < CLP_TQ_COUNT || t->n ? "," : "");
	}
	for (size_t i = 0; i < t->n; i++) {
		const clp_trace_event *e = &t->ev[i];
		char label[32];

		int kfac = clp_op_is_kfac(e->kind);
		int inv = e->kind == CLP_OP_KFAC_INV;

		clp_trace_event_label(e, label, sizeof(label));
		fprintf(f, "{\"name\": \"%s s%d\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, "
			   "\"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"kind\": \"%s\", "
			   "\"stage\": %d, \"mb\": %d, \"pipe\": %d, \"peer\": %d, \"what\": \"%s\"",
			label, e->stage, clp_op_kind_name(e->kind), e->rank, e->queue, e->t0 * 1e6,
			(e->t1 - e->t0) * 1e6, clp_op_kind_name(e->kind), e->stage, e->mb, e->pipe,
			e->peer, clp_red_what_name(inv ? 0 : e->what));
		if (kfac)
			fprintf(f, ", \"layer\": %d", e->layer);
		if (inv)
			fprintf(f, ", \"factor\": %d", e->what);
		fprintf(f, "}}%s\n", i + 1 < t->n ? "," : "");
	}
	fprintf(f, "]}\n");
	return clp_afile_commit(&a);
}

static clp_status read_event(const char *path, size_t i, json_t *o, clp_trace *t)
{
	clp_trace_event e = {0};
	json_t *args;
	char at[64], kind[32] = "", what[16] = "NONE";
	double ts = 0, dur = 0;
	int pid = 0, tid = 0;

	snprintf(at, sizeof(at), "traceEvents[%zu]", i);
	CLP_TRY(clp_json_int(path, at, o, "pid", 1, 0, 1 << 30, &pid));
	CLP_TRY(clp_json_int(path, at, o, "tid", 1, 0, CLP_TQ_COUNT - 1, &tid));
	CLP_TRY(clp_json_num(path, at, o, "ts", 1, -1e18, 1e18, &ts));
	CLP_TRY(clp_json_num(path, at, o, "dur", 1, 0, 1e18, &dur));
	CLP_TRY(clp_json_obj(path, at, o, "args", 1, &args));
	snprintf(at, sizeof(at), "traceEvents[%zu].args", i);
	CLP_TRY(clp_json_str(path, at, args, "kind", 1, kind, sizeof(kind)));
	CLP_TRY(clp_json_str(path, at, args, "what", 0, what, sizeof(what)));
	e.stage = e.mb = e.peer = -1;
	CLP_TRY(clp_json_int(path, at, args, "stage", 0, -1, 1 << 30, &e.stage));
	CLP_TRY(clp_json_int(path, at, args, "mb", 0, -1, 1 << 30, &e.mb));
	CLP_TRY(clp_json_int(path, at, args, "peer", 0, -1, 1 << 30, &e.peer));
	e.layer = -1;
	CLP_TRY(clp_json_int(path, at, args, "layer", 0, -1, 1 << 30, &e.layer));
	{
		int pipe = 0, k = clp_op_kind_parse(kind), w = clp_red_what_parse(what), fac = -1;

		CLP_TRY(clp_json_int(path, at, args, "pipe", 0, 0, 255, &pipe));
		CLP_TRY(clp_json_int(path, at, args, "factor", 0, -1, 255, &fac));
		if (fac >= 0)
			w = fac;
		if (k < 0)
			return clp_error(CLP_ERR_FORMAT, "%s: %s.kind: unknown op kind \"%s\"", path,
					 at, kind);
		e.kind = (uint8_t)k;
		e.what = (uint8_t)(w < 0 ? 0 : w);
		e.pipe = (uint8_t)pipe;
	}
	e.rank = pid;
	e.queue = (uint8_t)tid;
	e.t0 = ts * 1e-6;
	e.t1 = (ts + dur) * 1e-6;
	return clp_trace_push(t, &e);
}

clp_status clp_trace_read_chrome(const char *path, clp_trace *t)
{
	json_t *root, *evs, *o, *other;
	clp_status st;
	size_t i;

	clp_trace_init(t, 0, 0);
	CLP_TRY(clp_json_load(path, &root));
	other = json_object_get(root, "otherData");
	if (json_is_string(json_object_get(other, "title")))
		snprintf(t->title, sizeof(t->title), "%s",
			 json_string_value(json_object_get(other, "title")));
	st = clp_json_arr(path, "", root, "traceEvents", 1, &evs);
	json_array_foreach(evs, i, o) {
		const char *ph;

		if (st != CLP_OK)
			break;
		ph = json_string_value(json_object_get(o, "ph"));
		if (!json_is_object(o))
			st = clp_error(CLP_ERR_FORMAT, "%s: traceEvents[%zu]: expected an object",
				       path, i);
		else if (ph && !strcmp(ph, "X"))
			st = read_event(path, i, o, t);
	}
	json_decref(root);
	if (st != CLP_OK)
		clp_trace_free(t);
	return st;
}
