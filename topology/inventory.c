/* The cluster inventory as plain data, and its JSON form (see inventory.h). */
#include "topology/inventory.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/json_util.h"

static const char *const loc_names[CLP_TOPO_LOC_COUNT] = {"pci", "cpu_device", "no_pci_id",
							   "pci_unmatched"};
static const char *const loc_texts[CLP_TOPO_LOC_COUNT] = {
	"located by its PCI address",
	"CPU device: runs on the host's own cores, local to the whole host",
	"reports no PCI address: treated as local to the whole host",
	"its PCI address matches no PCI object in the topology: treated as local to the whole host",
};

const char *clp_topo_loc_name(clp_topo_loc l)
{
	return (unsigned)l < CLP_TOPO_LOC_COUNT ? loc_names[l] : "?";
}

const char *clp_topo_loc_text(clp_topo_loc l)
{
	return (unsigned)l < CLP_TOPO_LOC_COUNT ? loc_texts[l] : "?";
}

void clp_topo_host_clear(clp_topo_host *h)
{
	if (!h)
		return;
	free(h->devices);
	free(h->links);
	memset(h, 0, sizeof(*h));
}

void clp_topo_cluster_clear(clp_topo_cluster *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->nhosts; i++)
		clp_topo_host_clear(&c->hosts[i]);
	free(c->hosts);
	free(c->ranks);
	memset(c, 0, sizeof(*c));
}

clp_status clp_topo_host_copy(clp_topo_host *dst, const clp_topo_host *src)
{
	*dst = *src;
	dst->devices = NULL;
	dst->links = NULL;
	if (src->ndevices) {
		dst->devices = malloc((size_t)src->ndevices * sizeof(*dst->devices));
		if (!dst->devices)
			goto nomem;
		memcpy(dst->devices, src->devices, (size_t)src->ndevices * sizeof(*dst->devices));
	}
	if (src->nlinks) {
		dst->links = malloc((size_t)src->nlinks * sizeof(*dst->links));
		if (!dst->links)
			goto nomem;
		memcpy(dst->links, src->links, (size_t)src->nlinks * sizeof(*dst->links));
	}
	return CLP_OK;
nomem:
	clp_topo_host_clear(dst);
	return clp_error(CLP_ERR_NOMEM, "out of host memory copying host '%s'", src->name);
}

clp_status clp_topo_cluster_single(clp_topo_cluster *c, clp_topo_host *h)
{
	memset(c, 0, sizeof(*c));
	c->hosts = calloc(1, sizeof(*c->hosts));
	c->ranks = calloc(1, sizeof(*c->ranks));
	if (!c->hosts || !c->ranks) {
		free(c->hosts);
		free(c->ranks);
		memset(c, 0, sizeof(*c));
		return clp_error(CLP_ERR_NOMEM, "out of host memory building a cluster");
	}
	c->hosts[0] = *h;
	memset(h, 0, sizeof(*h));
	c->nhosts = 1;
	c->nranks = 1;
	return CLP_OK;
}

/* ---- to JSON --------------------------------------------------------------------------- */

static json_t *device_to_json(const clp_topo_device *d)
{
	return json_pack("{s:i, s:s, s:s, s:s, s:I, s:i, s:i, s:s, s:i, s:s, s:i, s:b, s:s}",
			 "index", d->index, "name", d->name, "vendor", d->vendor, "type", d->type,
			 "global_mem", (json_int_t)d->global_mem, "compute_units",
			 (int)d->compute_units, "max_subdevices", (int)d->max_subdevices, "pci",
			 d->pci, "numa", d->numa, "cpuset", d->cpuset, "cores", d->cores,
			 "local_to_host", d->local_to_host, "locality", clp_topo_loc_name(d->loc));
}

json_t *clp_topo_host_to_json(const clp_topo_host *h)
{
	json_t *devs = json_array(), *links = json_array();

	for (int i = 0; i < h->ndevices; i++)
		json_array_append_new(devs, device_to_json(&h->devices[i]));
	for (int i = 0; i < h->nlinks; i++)
		json_array_append_new(links, json_pack("{s:i, s:i, s:s, s:f}", "a", h->links[i].a,
						       "b", h->links[i].b, "kind",
						       h->links[i].kind, "bandwidth_gbps",
						       h->links[i].bandwidth_gbps));
	return json_pack("{s:s, s:i, s:i, s:i, s:s, s:o, s:o}", "name", h->name, "cores", h->cores,
			 "pus", h->pus, "numa_nodes", h->numa_nodes, "cpuset", h->cpuset,
			 "devices", devs, "links", links);
}

json_t *clp_topo_cluster_to_json(const clp_topo_cluster *c)
{
	json_t *hosts = json_array(), *ranks = json_array();

	for (int i = 0; i < c->nhosts; i++)
		json_array_append_new(hosts, clp_topo_host_to_json(&c->hosts[i]));
	for (int i = 0; i < c->nranks; i++)
		json_array_append_new(ranks, json_pack("{s:i, s:i, s:i}", "rank", c->ranks[i].rank,
						       "host", c->ranks[i].host, "local_rank",
						       c->ranks[i].local_rank));
	return json_pack("{s:o, s:o}", "hosts", hosts, "ranks", ranks);
}

/* ---- from JSON ------------------------------------------------------------------------- */

static clp_status device_from_json(const json_t *j, const char *origin, const char *where,
				   clp_topo_device *d)
{
	char loc[32] = "pci";

	memset(d, 0, sizeof(*d));
	d->numa = -1;
	if (!json_is_object(j))
		return clp_error(CLP_ERR_FORMAT, "%s: %s: expected an object", origin, where);
	CLP_TRY(clp_json_int(origin, where, j, "index", 1, 0, 1 << 20, &d->index));
	CLP_TRY(clp_json_str(origin, where, j, "name", 1, d->name, sizeof(d->name)));
	CLP_TRY(clp_json_str(origin, where, j, "vendor", 0, d->vendor, sizeof(d->vendor)));
	CLP_TRY(clp_json_str(origin, where, j, "type", 1, d->type, sizeof(d->type)));
	CLP_TRY(clp_json_u64(origin, where, j, "global_mem", 0, INT64_MAX, &d->global_mem));
	CLP_TRY(clp_json_u32(origin, where, j, "compute_units", 0, INT32_MAX, &d->compute_units));
	CLP_TRY(clp_json_u32(origin, where, j, "max_subdevices", 0, INT32_MAX, &d->max_subdevices));
	CLP_TRY(clp_json_str(origin, where, j, "pci", 0, d->pci, sizeof(d->pci)));
	CLP_TRY(clp_json_int(origin, where, j, "numa", 0, -1, 1 << 20, &d->numa));
	CLP_TRY(clp_json_str(origin, where, j, "cpuset", 0, d->cpuset, sizeof(d->cpuset)));
	CLP_TRY(clp_json_int(origin, where, j, "cores", 0, 0, 1 << 24, &d->cores));
	CLP_TRY(clp_json_bool(origin, where, j, "local_to_host", 0, &d->local_to_host));
	CLP_TRY(clp_json_str(origin, where, j, "locality", 0, loc, sizeof(loc)));
	for (int l = 0; l <= CLP_TOPO_LOC_COUNT; l++) {
		if (l == CLP_TOPO_LOC_COUNT)
			return clp_error(CLP_ERR_FORMAT,
					 "%s: %s.locality: '%s' is not one of pci, cpu_device, "
					 "no_pci_id, pci_unmatched", origin, where, loc);
		if (!strcmp(loc, loc_names[l])) {
			d->loc = (clp_topo_loc)l;
			break;
		}
	}
	return CLP_OK;
}

clp_status clp_topo_host_from_json(const json_t *j, const char *origin, clp_topo_host *h)
{
	json_t *devs, *links;
	char where[96];
	clp_status s;

	memset(h, 0, sizeof(*h));
	if (!json_is_object(j))
		return clp_error(CLP_ERR_FORMAT, "%s: a host must be a JSON object", origin);
	if ((s = clp_json_str(origin, "host", j, "name", 1, h->name, sizeof(h->name))) != CLP_OK)
		return s;
	snprintf(where, sizeof(where), "host '%.64s'", h->name);
	if ((s = clp_json_int(origin, where, j, "cores", 0, 0, 1 << 24, &h->cores)) != CLP_OK ||
	    (s = clp_json_int(origin, where, j, "pus", 0, 0, 1 << 24, &h->pus)) != CLP_OK ||
	    (s = clp_json_int(origin, where, j, "numa_nodes", 0, 0, 1 << 20, &h->numa_nodes)) !=
		    CLP_OK ||
	    (s = clp_json_str(origin, where, j, "cpuset", 0, h->cpuset, sizeof(h->cpuset))) !=
		    CLP_OK ||
	    (s = clp_json_arr(origin, where, j, "devices", 1, &devs)) != CLP_OK ||
	    (s = clp_json_arr(origin, where, j, "links", 0, &links)) != CLP_OK)
		return s;
	h->ndevices = (int)json_array_size(devs);
	if (h->ndevices) {
		h->devices = calloc((size_t)h->ndevices, sizeof(*h->devices));
		if (!h->devices)
			return clp_error(CLP_ERR_NOMEM, "out of host memory reading %s", origin);
	}
	for (int i = 0; i < h->ndevices; i++) {
		char dw[128];

		snprintf(dw, sizeof(dw), "%s.devices[%d]", where, i);
		if ((s = device_from_json(json_array_get(devs, (size_t)i), origin, dw,
					  &h->devices[i])) != CLP_OK)
			goto fail;
	}
	h->nlinks = links ? (int)json_array_size(links) : 0;
	if (h->nlinks) {
		h->links = calloc((size_t)h->nlinks, sizeof(*h->links));
		if (!h->links) {
			s = clp_error(CLP_ERR_NOMEM, "out of host memory reading %s", origin);
			goto fail;
		}
	}
	for (int i = 0; i < h->nlinks; i++) {
		const json_t *l = json_array_get(links, (size_t)i);
		clp_topo_link *k = &h->links[i];
		char lw[128];

		snprintf(lw, sizeof(lw), "%s.links[%d]", where, i);
		if ((s = clp_json_int(origin, lw, l, "a", 1, 0, h->ndevices - 1, &k->a)) !=
			    CLP_OK ||
		    (s = clp_json_int(origin, lw, l, "b", 1, 0, h->ndevices - 1, &k->b)) !=
			    CLP_OK ||
		    (s = clp_json_str(origin, lw, l, "kind", 0, k->kind, sizeof(k->kind))) !=
			    CLP_OK ||
		    (s = clp_json_num(origin, lw, l, "bandwidth_gbps", 1, -HUGE_VAL, HUGE_VAL,
				      &k->bandwidth_gbps)) != CLP_OK)
			goto fail;
	}
	return CLP_OK;
fail:
	clp_topo_host_clear(h);
	return s;
}

clp_status clp_topo_cluster_from_json(const json_t *j, const char *origin, clp_topo_cluster *c)
{
	json_t *hosts, *ranks;
	clp_status s;

	memset(c, 0, sizeof(*c));
	if (!json_is_object(j))
		return clp_error(CLP_ERR_FORMAT, "%s: a cluster must be a JSON object", origin);
	if ((s = clp_json_arr(origin, "cluster", j, "hosts", 1, &hosts)) != CLP_OK ||
	    (s = clp_json_arr(origin, "cluster", j, "ranks", 0, &ranks)) != CLP_OK)
		return s;
	c->hosts = calloc(json_array_size(hosts) + 1, sizeof(*c->hosts));
	c->ranks = calloc((ranks ? json_array_size(ranks) : 0) + 1, sizeof(*c->ranks));
	if (!c->hosts || !c->ranks) {
		s = clp_error(CLP_ERR_NOMEM, "out of host memory reading %s", origin);
		goto fail;
	}
	for (size_t i = 0; i < json_array_size(hosts); i++) {
		if ((s = clp_topo_host_from_json(json_array_get(hosts, i), origin,
						 &c->hosts[i])) != CLP_OK)
			goto fail;
		c->nhosts++;
		for (size_t k = 0; k < i; k++)
			if (!strcmp(c->hosts[k].name, c->hosts[i].name)) {
				s = clp_error(CLP_ERR_FORMAT, "%s: hosts[%zu] and hosts[%zu] are both "
					      "named '%s'", origin, k, i, c->hosts[i].name);
				goto fail;
			}
	}
	for (size_t i = 0; ranks && i < json_array_size(ranks); i++) {
		const json_t *r = json_array_get(ranks, i);
		clp_topo_rank *k = &c->ranks[i];
		char w[32];

		snprintf(w, sizeof(w), "ranks[%zu]", i);
		if ((s = clp_json_int(origin, w, r, "rank", 1, 0, 1 << 24, &k->rank)) != CLP_OK ||
		    (s = clp_json_int(origin, w, r, "host", 1, 0, c->nhosts - 1, &k->host)) !=
			    CLP_OK ||
		    (s = clp_json_int(origin, w, r, "local_rank", 1, 0, 1 << 24, &k->local_rank)) !=
			    CLP_OK)
			goto fail;
		if (k->rank != (int)i) {
			s = clp_error(CLP_ERR_FORMAT, "%s: %s.rank is %d; ranks must be listed in "
				      "order 0, 1, ...", origin, w, k->rank);
			goto fail;
		}
		c->nranks++;
	}
	return CLP_OK;
fail:
	clp_topo_cluster_clear(c);
	return s;
}

clp_status clp_topo_cluster_write(const clp_topo_cluster *c, const char *path)
{
	json_t *j = clp_topo_cluster_to_json(c);
	clp_status s;

	if (!j)
		return clp_error(CLP_ERR_NOMEM, "out of host memory writing %s", path);
	s = clp_json_save_shared(path, j);
	json_decref(j);
	return s;
}

clp_status clp_topo_cluster_read(const char *path, clp_topo_cluster *out)
{
	json_t *j;
	clp_status s;

	memset(out, 0, sizeof(*out));
	CLP_TRY(clp_json_load(path, &j));
	s = clp_topo_cluster_from_json(j, path, out);
	json_decref(j);
	return s;
}
