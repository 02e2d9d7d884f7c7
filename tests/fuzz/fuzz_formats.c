/* The formats the harness mutates: each a valid seed (a repository fixture, or made here) and a
 * consumer that takes an input the way clpipe does, including the checks made after parsing
 * (a cost table against a schedule in the simulator, a schedule's validation, SkipPipe's rules,
 * a config's model settings against each other). A consumer returns the status; the message is
 * clp_last_error(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/shard.h"
#include "engine/io/checkpoint.h"
#include "engine/scenario/cluster.h"
#include "engine/io/config.h"
#include "engine/scenario/costs.h"
#include "engine/scenario/layout.h"
#include "engine/io/safetensors.h"
#include "engine/model/model.h"
#include "engine/sched/gen.h"
#include "engine/sched/sched_json.h"
#include "engine/pass/validate.h"
#include "engine/sim/sim.h"
#include "engine/skip/skip.h"
#include "engine/train/train_config.h"
#include "tests/fuzz/fuzz.h"
#include "topology/discover.h"
#include "topology/inventory.h"

#define SRC CLP_SOURCE_DIR "/"

/* The model settings as clpipe train reads them (engine/train/session.c, model_config), then
 * resolved; a failure names where each setting it mentions was set. */
static clp_status eat_config(const char *path)
{
	static clp_train_config c;
	clp_model_config m;
	clp_status st;

	CLP_TRY(clp_cfg_defaults(&clp_train_schema, &c));
	CLP_TRY(clp_cfg_load_file(&clp_train_schema, &c, path));
	memset(&m, 0, sizeof(m));
	st = clp_preset_parse(c.model.preset, &m.preset);
	m.n_layer = (int)c.model.n_layer;
	m.d_model = (int)c.model.d_model;
	m.n_head = (int)c.model.n_head;
	m.n_kv_head = (int)c.model.n_kv_head;
	m.d_ff = (int)c.model.d_ff;
	m.vocab = c.model.vocab ? (int)c.model.vocab : 257;
	m.ctx = (int)c.model.ctx;
	m.rope_theta = (float)c.model.rope_theta;
	m.dropout = (float)c.model.dropout;
	if (st == CLP_OK)
		st = clp_model_config_resolve(&m);
	if (st == CLP_OK && c.train.seq > m.ctx)
		st = clp_error(CLP_ERR_INVALID, "train.seq = %ld is longer than model.ctx = %d",
			       c.train.seq, m.ctx);
	return clp_cfg_name_origins(&clp_train_schema, &c, st);
}

/* Simulate 1F1B on four ranks with what is given (NULL: the seeds). */
static clp_status simulate(const clp_sched *given, const clp_costs *costs,
			   const clp_cluster *cluster, const clp_layout *layout)
{
	clp_gen_opts g;
	clp_sched *s = NULL;
	clp_sim_opts o;
	clp_sim_result r;
	clp_status st = CLP_OK;

	if (!given) {
		clp_gen_opts_default(&g);
		g.kind = CLP_SCHED_1F1B;
		g.depth = 4;
		g.microbatches = 8;
		CLP_TRY(clp_sched_generate(&s, &g));
		given = s;
	}
	clp_sim_opts_default(&o);
	o.costs = costs;
	o.cluster = cluster;
	o.layout = layout;
	o.trace_limit = 0;
	st = clp_sim_run(given, &o, &r);
	if (st == CLP_OK)
		clp_sim_result_free(&r);
	clp_sched_free(s);
	return st;
}

static clp_status eat_costs(const char *path)
{
	clp_costs *c = NULL;
	clp_status st;

	CLP_TRY(clp_costs_load(path, &c));
	st = simulate(NULL, c, NULL, NULL);
	clp_costs_free(c);
	return st;
}

static clp_status eat_cluster(const char *path)
{
	clp_cluster *c = NULL;
	clp_status st;

	CLP_TRY(clp_cluster_load(path, &c));
	st = simulate(NULL, NULL, c, NULL);
	clp_cluster_free(c);
	return st;
}

static clp_status eat_layout(const char *path)
{
	clp_layout *l = NULL;
	clp_cluster *c = NULL;
	clp_costs *k = NULL;
	clp_status st;

	CLP_TRY(clp_layout_load(path, &l));
	st = clp_cluster_load(SRC "tests/sim/data/cluster_2x2.json", &c);
	if (st == CLP_OK)
		st = clp_costs_load(SRC "tests/sim/data/costs_4.json", &k);
	if (st == CLP_OK)
		st = simulate(NULL, k, c, l);
	clp_costs_free(k);
	clp_cluster_free(c);
	clp_layout_free(l);
	return st;
}

static clp_status eat_schedule(const char *path)
{
	clp_sched *s = NULL;
	clp_status st;

	CLP_TRY(clp_sched_load(path, &s));
	st = clp_sched_validate(s, 1);
	if (st == CLP_OK)
		st = simulate(s, NULL, NULL, NULL);
	clp_sched_free(s);
	return st;
}

static clp_status eat_paths(const char *path)
{
	clp_skip_paths *p = NULL;
	clp_skip_rules r;
	clp_status st;

	CLP_TRY(clp_skip_load(path, &p, &r));
	st = clp_skip_validate(&r, p);
	clp_skip_paths_free(p);
	return st;
}

/* The seed checkpoint's tensors, read as a run of that model reads them. */
static const char *const ck_names[] = {"wte.weight", "ln_f.weight"};
static const int64_t ck_shapes[][2] = {{8, 4}, {4, 0}};

static clp_status eat_ckpt(const char *dir)
{
	clp_ckpt *c = NULL;
	float buf[64];
	clp_status st;

	CLP_TRY(clp_ckpt_open(&c, dir));
	st = clp_ckpt_verify(c);
	for (int i = 0; i < 2 && st == CLP_OK; i++)
		st = clp_ckpt_read(c, CLP_CKPT_MODEL, ck_names[i], buf, i ? 1 : 2, ck_shapes[i]);
	if (st == CLP_OK)
		st = clp_ckpt_read(c, CLP_CKPT_OPTIM, "wte.weight.m", buf, 2, ck_shapes[0]);
	clp_ckpt_close(c);
	return st;
}

static clp_status make_ckpt(const char *work, char *dir, size_t n)
{
	clp_ckpt_writer *w = NULL;
	float v[32];
	char root[1024];
	clp_status st;

	for (int i = 0; i < 32; i++)
		v[i] = 0.25f * (float)i - 1.0f;
	snprintf(root, sizeof(root), "%s/seed-ckpt", work);
	CLP_TRY(clp_ckpt_writer_create(&w, root, 1, 0, 1));
	st = clp_ckpt_writer_identity(w, "preset", "gpt2");
	if (st == CLP_OK)
		st = clp_ckpt_writer_meta(w, "data.pos", "epoch=0 index=3");
	for (int i = 0; i < 2 && st == CLP_OK; i++)
		st = clp_ckpt_writer_add(w, CLP_CKPT_MODEL, ck_names[i], v, i ? 1 : 2, ck_shapes[i]);
	if (st == CLP_OK)
		st = clp_ckpt_writer_add(w, CLP_CKPT_OPTIM, "wte.weight.m", v, 2, ck_shapes[0]);
	if (st == CLP_OK)
		st = clp_ckpt_writer_write(w);
	if (st == CLP_OK)
		st = clp_ckpt_writer_commit(w, 0);
	if (st == CLP_OK)
		snprintf(dir, n, "%s", clp_ckpt_writer_dir(w));
	clp_ckpt_writer_free(w);
	return st;
}

static clp_status eat_safetensors(const char *path)
{
	clp_st_file *f = NULL;
	clp_status st = CLP_OK;

	CLP_TRY(clp_st_open(&f, path));
	for (int i = 0; i < clp_st_count(f) && st == CLP_OK; i++) {
		const clp_st_tensor *t = clp_st_at(f, i);
		size_t numel = 1;
		float *dst;

		for (int d = 0; d < t->ndim; d++)
			numel *= (size_t)t->shape[d];
		if (t->dtype == CLP_ST_I64 || t->dtype == CLP_ST_I32)
			continue;
		/* the reader checked the data lies inside the file, so numel is bounded */
		dst = malloc((numel ? numel : 1) * sizeof(float));
		if (!dst)
			st = clp_error(CLP_ERR_NOMEM, "harness: out of memory");
		else
			st = clp_st_read_f32(f, t, dst);
		free(dst);
	}
	clp_st_close(f);
	return st;
}

static clp_status eat_shard(const char *path)
{
	clp_shard s;
	clp_status st = clp_shard_open(&s, path, 50257);

	if (st == CLP_OK) {
		int32_t *all = malloc((s.ntok ? s.ntok : 1) * sizeof(int32_t));

		if (all)
			clp_shard_copy(&s, 0, s.ntok, all);
		free(all);
	}
	clp_shard_close(&s);
	return st;
}

static clp_status make_shard(const char *work, char *path, size_t n)
{
	int32_t tok[1000];

	for (int i = 0; i < 1000; i++)
		tok[i] = (i * 7919) % 50257;
	snprintf(path, n, "%s/seed.bin", work);
	return clp_shard_write(path, tok, 1000, 1);
}

static clp_status eat_hwloc(const char *path)
{
	clp_topo_host h;

	CLP_TRY(clp_topo_discover(path, NULL, 0, &h));
	clp_topo_host_clear(&h);
	return CLP_OK;
}

static clp_status eat_devices(const char *path)
{
	clp_topo_cldev *d = NULL;
	int n = 0;

	CLP_TRY(clp_topo_cldevs_read(path, &d, &n));
	free(d);
	return CLP_OK;
}

static clp_status eat_profile(const char *path)
{
	clp_profile_opts o = {4, 12, 8, 128, 768};
	clp_costs *c = NULL;
	clp_status st;

	CLP_TRY(clp_costs_from_profile(path, &o, &c));
	st = simulate(NULL, c, NULL, NULL);
	clp_costs_free(c);
	return st;
}

int fz_formats(const char *work, const fz_format **out)
{
	static char ck_dir[1024], shard[1024];
	static fz_format f[] = {
		{"config", ".toml", SRC "tools/quickstart.toml", NULL, eat_config},
		{"cluster", ".json", SRC "tests/sim/data/cluster_2x2.json", NULL, eat_cluster},
		{"costs", ".json", SRC "tests/sim/data/costs_4.json", NULL, eat_costs},
		{"profile", ".csv", SRC "tests/sim/data/bert-base_time_memory_p100.csv", NULL,
		 eat_profile},
		{"layout", ".json", SRC "tests/sim/data/layout_4.json", NULL, eat_layout},
		{"schedule", ".json", SRC "tests/sched/data/golden_1f1b_d4.json", NULL, eat_schedule},
		{"skip_paths", ".json", SRC "tests/skip/data/tiny_paths.json", NULL, eat_paths},
		{"ckpt_manifest", "", "manifest.json", ck_dir, eat_ckpt},
		{"ckpt_model", "", "model.safetensors", ck_dir, eat_ckpt},
		{"safetensors", ".safetensors", SRC "tests/data/fixtures/small.safetensors", NULL,
		 eat_safetensors},
		{"shard", ".bin", shard, NULL, eat_shard},
		{"hwloc_xml", ".xml", SRC "tests/topology/data/32em64t-2n8c2t-pci-normalio.xml", NULL,
		 eat_hwloc},
		{"devices", ".json", SRC "tests/topology/data/mixed.devices.json", NULL, eat_devices},
	};

	if (make_ckpt(work, ck_dir, sizeof(ck_dir)) != CLP_OK ||
	    make_shard(work, shard, sizeof(shard)) != CLP_OK) {
		fprintf(stderr, "fuzz: cannot make the seeds under %s: %s\n", work,
			clp_last_error());
		return -1;
	}
	*out = f;
	return (int)(sizeof(f) / sizeof(f[0]));
}
