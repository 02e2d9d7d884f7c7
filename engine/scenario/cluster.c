/* Cluster description: JSON reader/writer and link routing (see cluster.h, docs/FORMATS.md). */
#include "engine/scenario/cluster.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/json_util.h"

#define CLUSTER_FORMAT "clpipe-cluster"

void clp_cluster_free(clp_cluster *c)
{
	if (!c)
		return;
	free(c->hosts);
	free(c->devices);
	free(c->links);
	free(c->ix_keys);
	free(c->ix_vals);
	free(c);
}

int clp_cluster_find_device(const clp_cluster *c, const char *id)
{
	for (int i = 0; i < c->ndevices; i++)
		if (!strcmp(c->devices[i].id, id))
			return i;
	return -1;
}

static int find_host(const clp_cluster *c, const char *name)
{
	for (int i = 0; i < c->nhosts; i++)
		if (!strcmp(c->hosts[i].name, name))
			return i;
	return -1;
}

clp_status clp_cluster_ideal(int n, clp_cluster **out)
{
	clp_cluster *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c || !(c->hosts = calloc(1, sizeof(*c->hosts))) ||
	    !(c->devices = calloc((size_t)(n > 0 ? n : 1), sizeof(*c->devices)))) {
		clp_cluster_free(c);
		return clp_error(CLP_ERR_NOMEM, "cluster: out of host memory");
	}
	c->nhosts = 1;
	snprintf(c->hosts[0].name, CLP_NAME_MAX, "local");
	c->hosts[0].ndevices = n;
	c->ndevices = n;
	for (int i = 0; i < n; i++) {
		snprintf(c->devices[i].id, CLP_NAME_MAX, "local:%d", i);
		snprintf(c->devices[i].kind, CLP_NAME_MAX, "default");
		c->devices[i].speed = 1;
	}
	c->intra = c->inter = (clp_link_spec){0, INFINITY};
	*out = c;
	return CLP_OK;
}

/* latency_s and bandwidth_Bps of a link object; bandwidth may be the string "inf". */
static clp_status read_spec(const char *file, const char *at, const json_t *o, clp_link_spec *sp,
			    int required)
{
	json_t *bw = json_object_get(o, "bandwidth_Bps");

	CLP_TRY(clp_json_num(file, at, o, "latency_s", required, 0, 1e6, &sp->latency_s));
	if (json_is_string(bw) && !strcmp(json_string_value(bw), "inf")) {
		sp->bandwidth_Bps = INFINITY;
		return CLP_OK;
	}
	return clp_json_num(file, at, o, "bandwidth_Bps", required, 1, 1e18, &sp->bandwidth_Bps);
}

static clp_status read_hosts(const char *file, const json_t *root, clp_cluster *c)
{
	static const char *const host_keys[] = {"name", "devices", NULL};
	static const char *const dev_keys[] = {"id", "kind", "memory_bytes", "speed", NULL};
	json_t *hosts, *h, *devs, *d;
	size_t i, j;
	int nd = 0;

	CLP_TRY(clp_json_arr(file, "", root, "hosts", 1, &hosts));
	if (json_array_size(hosts) == 0)
		return clp_error(CLP_ERR_FORMAT, "%s: hosts: needs at least one host", file);
	json_array_foreach(hosts, i, h) {
		char at[64];

		snprintf(at, sizeof(at), "hosts[%zu]", i);
		CLP_TRY(clp_json_expect_obj(file, at, h));
		CLP_TRY(clp_json_arr(file, at, h, "devices", 1, &devs));
		nd += (int)json_array_size(devs);
	}
	c->nhosts = (int)json_array_size(hosts);
	c->hosts = calloc((size_t)c->nhosts, sizeof(*c->hosts));
	c->devices = calloc((size_t)(nd > 0 ? nd : 1), sizeof(*c->devices));
	if (!c->hosts || !c->devices)
		return clp_error(CLP_ERR_NOMEM, "%s: out of host memory", file);
	json_array_foreach(hosts, i, h) {
		clp_host *hs = &c->hosts[i];
		char at[64];

		snprintf(at, sizeof(at), "hosts[%zu]", i);
		CLP_TRY(clp_json_check_keys(file, at, h, host_keys));
		CLP_TRY(clp_json_str(file, at, h, "name", 1, hs->name, sizeof(hs->name)));
		if (find_host(c, hs->name) < (int)i)
			return clp_error(CLP_ERR_FORMAT, "%s: %s.name: \"%s\" is used twice", file,
					 at, hs->name);
		CLP_TRY(clp_json_arr(file, at, h, "devices", 1, &devs));
		hs->first_device = c->ndevices;
		json_array_foreach(devs, j, d) {
			clp_device *dv = &c->devices[c->ndevices];
			char dat[96];

			snprintf(dat, sizeof(dat), "%s.devices[%zu]", at, j);
			CLP_TRY(clp_json_expect_obj(file, dat, d));
			CLP_TRY(clp_json_check_keys(file, dat, d, dev_keys));
			snprintf(dv->id, sizeof(dv->id), "%.40s:%zu", hs->name, j);
			snprintf(dv->kind, sizeof(dv->kind), "default");
			dv->speed = 1;
			dv->host = (int)i;
			CLP_TRY(clp_json_str(file, dat, d, "id", 0, dv->id, sizeof(dv->id)));
			CLP_TRY(clp_json_str(file, dat, d, "kind", 0, dv->kind, sizeof(dv->kind)));
			CLP_TRY(clp_json_i64(file, dat, d, "memory_bytes", 0, 0, INT64_MAX,
					     &dv->memory_bytes));
			CLP_TRY(clp_json_num(file, dat, d, "speed", 0, 1e-6, 1e6, &dv->speed));
			if (clp_cluster_find_device(c, dv->id) >= 0)
				return clp_error(CLP_ERR_FORMAT, "%s: %s.id: \"%s\" is used twice",
						 file, dat, dv->id);
			c->ndevices++;
			hs->ndevices++;
		}
	}
	return CLP_OK;
}

/* An endpoint is a device id or a host name. */
static clp_status endpoint(const char *file, const char *at, const json_t *l, const char *key,
			   const clp_cluster *c, int *host, int *dev)
{
	char name[CLP_NAME_MAX];

	CLP_TRY(clp_json_str(file, at, l, key, 1, name, sizeof(name)));
	if ((*dev = clp_cluster_find_device(c, name)) >= 0) {
		*host = c->devices[*dev].host;
		return CLP_OK;
	}
	if ((*host = find_host(c, name)) >= 0)
		return CLP_OK;
	return clp_error(CLP_ERR_FORMAT, "%s: %s.%s: \"%s\" is neither a device id nor a host name",
			 file, at, key, name);
}

static clp_status read_links(const char *file, const json_t *root, clp_cluster *c)
{
	static const char *const link_keys[] = {"a", "b", "latency_s", "bandwidth_Bps",
						"directed", NULL};
	static const char *const def_keys[] = {"intra_host", "inter_host", "eager_bytes", NULL};
	static const char *const spec_keys[] = {"latency_s", "bandwidth_Bps", NULL};
	json_t *defs, *o, *links, *l;
	size_t i;

	c->intra = (clp_link_spec){5e-6, 50e9};
	c->inter = (clp_link_spec){20e-6, 12.5e9};
	c->eager_bytes = 65536;
	CLP_TRY(clp_json_obj(file, "", root, "defaults", 0, &defs));
	if (defs) {
		CLP_TRY(clp_json_check_keys(file, "defaults", defs, def_keys));
		CLP_TRY(clp_json_obj(file, "defaults", defs, "intra_host", 0, &o));
		if (o) {
			CLP_TRY(clp_json_check_keys(file, "defaults.intra_host", o, spec_keys));
			CLP_TRY(read_spec(file, "defaults.intra_host", o, &c->intra, 0));
		}
		CLP_TRY(clp_json_obj(file, "defaults", defs, "inter_host", 0, &o));
		if (o) {
			CLP_TRY(clp_json_check_keys(file, "defaults.inter_host", o, spec_keys));
			CLP_TRY(read_spec(file, "defaults.inter_host", o, &c->inter, 0));
		}
		CLP_TRY(clp_json_i64(file, "defaults", defs, "eager_bytes", 0, 0, INT64_MAX,
				     &c->eager_bytes));
	}
	CLP_TRY(clp_json_arr(file, "", root, "links", 0, &links));
	if (!links)
		return CLP_OK;
	c->links = calloc(json_array_size(links) + 1, sizeof(*c->links));
	if (!c->links)
		return clp_error(CLP_ERR_NOMEM, "%s: out of host memory", file);
	json_array_foreach(links, i, l) {
		clp_link *lk = &c->links[i];
		char at[64];

		snprintf(at, sizeof(at), "links[%zu]", i);
		CLP_TRY(clp_json_expect_obj(file, at, l));
		CLP_TRY(clp_json_check_keys(file, at, l, link_keys));
		CLP_TRY(endpoint(file, at, l, "a", c, &lk->a_host, &lk->a_dev));
		CLP_TRY(endpoint(file, at, l, "b", c, &lk->b_host, &lk->b_dev));
		if ((lk->a_dev < 0) != (lk->b_dev < 0))
			return clp_error(CLP_ERR_FORMAT, "%s: %s: links join two devices or two "
					 "hosts, not a device and a host", file, at);
		if (lk->a_dev < 0 && lk->a_host == lk->b_host)
			return clp_error(CLP_ERR_FORMAT, "%s: %s: a host link needs two different "
					 "hosts (use defaults.intra_host inside one)", file, at);
		CLP_TRY(read_spec(file, at, l, &lk->spec, 1));
		CLP_TRY(clp_json_bool(file, at, l, "directed", 0, &lk->directed));
		c->nlinks++;
	}
	return CLP_OK;
}

/* A cluster file's root into c. */
static clp_status read_cluster(const char *path, json_t *root, clp_cluster *c)
{
	static const char *const keys[] = {"format", "version", "name", "hosts", "links",
					   "defaults", NULL};

	CLP_TRY(clp_json_check_format(path, root, CLUSTER_FORMAT, 1));
	CLP_TRY(clp_json_check_keys(path, "", root, keys));
	CLP_TRY(read_hosts(path, root, c));
	return read_links(path, root, c);
}

clp_status clp_cluster_load(const char *path, clp_cluster **out)
{
	json_t *root;
	clp_cluster *c;
	clp_status st;

	*out = NULL;
	CLP_TRY(clp_json_load(path, &root));
	c = calloc(1, sizeof(*c));
	if (!c) {
		json_decref(root);
		return clp_error(CLP_ERR_NOMEM, "%s: out of host memory", path);
	}
	st = read_cluster(path, root, c);
	json_decref(root);
	if (st == CLP_OK)
		st = clp_cluster_index(c);
	if (st != CLP_OK) {
		clp_cluster_free(c);
		return st;
	}
	snprintf(c->file, sizeof(c->file), "%s", path);
	*out = c;
	return CLP_OK;
}

static json_t *spec_json(const clp_link_spec *sp)
{
	return json_pack("{s:f, s:o}", "latency_s", sp->latency_s, "bandwidth_Bps",
			 isinf(sp->bandwidth_Bps) ? json_string("inf") : json_real(sp->bandwidth_Bps));
}

clp_status clp_cluster_save(const clp_cluster *c, const char *path)
{
	json_t *root = json_object(), *hosts = json_array(), *links = json_array();
	clp_status st;

	json_object_set_new(root, "format", json_string(CLUSTER_FORMAT));
	json_object_set_new(root, "version", json_integer(1));
	json_object_set_new(root, "defaults", json_pack("{s:o, s:o, s:I}", "intra_host",
							spec_json(&c->intra), "inter_host",
							spec_json(&c->inter), "eager_bytes",
							(json_int_t)c->eager_bytes));
	for (int h = 0; h < c->nhosts; h++) {
		json_t *devs = json_array();

		for (int i = 0; i < c->hosts[h].ndevices; i++) {
			const clp_device *d = &c->devices[c->hosts[h].first_device + i];

			json_array_append_new(devs, json_pack("{s:s, s:s, s:I, s:f}", "id", d->id,
							      "kind", d->kind, "memory_bytes",
							      (json_int_t)d->memory_bytes, "speed",
							      d->speed));
		}
		json_array_append_new(hosts, json_pack("{s:s, s:o}", "name", c->hosts[h].name,
						       "devices", devs));
	}
	for (int i = 0; i < c->nlinks; i++) {
		const clp_link *l = &c->links[i];
		json_t *o = spec_json(&l->spec);

		json_object_set_new(o, "a", json_string(l->a_dev >= 0 ? c->devices[l->a_dev].id
								      : c->hosts[l->a_host].name));
		json_object_set_new(o, "b", json_string(l->b_dev >= 0 ? c->devices[l->b_dev].id
								      : c->hosts[l->b_host].name));
		if (l->directed)
			json_object_set_new(o, "directed", json_true());
		json_array_append_new(links, o);
	}
	json_object_set_new(root, "hosts", hosts);
	json_object_set_new(root, "links", links);
	st = clp_json_save(path, root);
	json_decref(root);
	return st;
}

/* Resource ids: explicit links 2 * i + direction; then default inter-host links per ordered
 * host pair; then default intra-host links per ordered device pair. */
int64_t clp_cluster_nres(const clp_cluster *c)
{
	return 2 * (int64_t)c->nlinks + (int64_t)c->nhosts * c->nhosts +
	       (int64_t)c->ndevices * c->ndevices;
}

/* Index keys: an ordered device pair (2k) or host pair (2k + 1); values 2 * link + reversed. */
static int64_t ix_key(const clp_cluster *c, int dev, int x, int y)
{
	return dev ? 2 * ((int64_t)x * c->ndevices + y) : 2 * ((int64_t)x * c->nhosts + y) + 1;
}

static uint64_t ix_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* The slot of key: where it is, or the empty slot where it goes. */
static size_t ix_slot(const clp_cluster *c, int64_t key)
{
	size_t h = ix_mix((uint64_t)key) & (c->ix_cap - 1);

	while (c->ix_vals[h] >= 0 && c->ix_keys[h] != key)
		h = (h + 1) & (c->ix_cap - 1);
	return h;
}

/* The first link (in list order) joining the pair, as the scan in clp_cluster_route finds it. */
static void ix_put(clp_cluster *c, int64_t key, int64_t val)
{
	size_t h = ix_slot(c, key);

	if (c->ix_vals[h] < 0) {
		c->ix_keys[h] = key;
		c->ix_vals[h] = val;
	}
}

clp_status clp_cluster_index(clp_cluster *c)
{
	size_t cap = 16;

	while (cap < 4 * (size_t)c->nlinks + 16)
		cap *= 2;
	free(c->ix_keys);
	free(c->ix_vals);
	c->ix_cap = 0;
	c->ix_keys = malloc(cap * sizeof(int64_t));
	c->ix_vals = malloc(cap * sizeof(int64_t));
	if (!c->ix_keys || !c->ix_vals) {
		free(c->ix_keys);
		free(c->ix_vals);
		c->ix_keys = c->ix_vals = NULL;
		return clp_error(CLP_ERR_NOMEM, "cluster: out of host memory (link index)");
	}
	c->ix_cap = cap;
	for (size_t i = 0; i < cap; i++)
		c->ix_vals[i] = -1;
	for (int i = 0; i < c->nlinks; i++) {
		const clp_link *l = &c->links[i];
		int dev = l->a_dev >= 0;
		int x = dev ? l->a_dev : l->a_host, y = dev ? l->b_dev : l->b_host;

		ix_put(c, ix_key(c, dev, x, y), 2 * (int64_t)i);
		if (!l->directed)
			ix_put(c, ix_key(c, dev, y, x), 2 * (int64_t)i + 1);
	}
	return CLP_OK;
}

clp_route clp_cluster_route(const clp_cluster *c, int a, int b)
{
	int ha = c->devices[a].host, hb = c->devices[b].host;
	int64_t base = 2 * (int64_t)c->nlinks;

	if (a == b)
		return (clp_route){{0, INFINITY}, -1};
	for (int pass = 0; c->ix_cap && pass < 2; pass++) {
		int64_t v;

		if (pass == 1 && ha == hb)
			break;
		v = c->ix_vals[ix_slot(c, pass ? ix_key(c, 0, ha, hb) : ix_key(c, 1, a, b))];
		if (v >= 0)
			return (clp_route){c->links[v / 2].spec, v};
	}
	for (int pass = 0; !c->ix_cap && pass < 2; pass++)
		for (int i = 0; i < c->nlinks; i++) {
			const clp_link *l = &c->links[i];
			int fwd, rev;

			if (pass == 0) {
				if (l->a_dev < 0)
					continue;
				fwd = l->a_dev == a && l->b_dev == b;
				rev = l->a_dev == b && l->b_dev == a;
			} else {
				if (l->a_dev >= 0 || ha == hb)
					continue;
				fwd = l->a_host == ha && l->b_host == hb;
				rev = l->a_host == hb && l->b_host == ha;
			}
			if (fwd || (rev && !l->directed))
				return (clp_route){l->spec, 2 * (int64_t)i + !fwd};
		}
	if (ha != hb)
		return (clp_route){c->inter, base + (int64_t)ha * c->nhosts + hb};
	return (clp_route){c->intra,
			   base + (int64_t)c->nhosts * c->nhosts + (int64_t)a * c->ndevices + b};
}
