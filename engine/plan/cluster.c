/* A cluster description (engine/scenario/cluster.h) from a topology inventory
 * (topology/inventory.h): the devices a plan may use, their memory, a device kind matching the
 * block table, and links from where the devices sit (NVLink, one socket, two sockets, two
 * hosts). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/plan/plan.h"

void clp_plan_links_default(clp_plan_links *l)
{
	/* PCIe 3.0 x16 through a switch; the socket interconnect on the way; 100 Gb/s between
	 * hosts; NVLink's latency (its bandwidth comes from the inventory) */
	l->pcie = (clp_link_spec){5e-6, 12e9};
	l->cross_socket = (clp_link_spec){8e-6, 8e9};
	l->inter_host = (clp_link_spec){20e-6, 12.5e9};
	l->nvlink_latency_s = 2e-6;
}

static int contains_nocase(const char *hay, const char *needle)
{
	size_t n = strlen(needle);

	if (!n)
		return 0;
	for (; *hay; hay++) {
		size_t i = 0;

		while (i < n && hay[i] && tolower((unsigned char)hay[i]) ==
					      tolower((unsigned char)needle[i]))
			i++;
		if (i == n)
			return 1;
	}
	return 0;
}

/* The block table's kind named in the device's name, else the name itself. */
static void kind_of(const clp_topo_device *d, const clp_costs *blocks, char *out)
{
	if (blocks) {
		if (contains_nocase(d->name, blocks->device_kind)) {
			snprintf(out, CLP_NAME_MAX, "%s", blocks->device_kind);
			return;
		}
		for (int k = 0; k < blocks->nkinds; k++)
			if (contains_nocase(d->name, blocks->kinds[k])) {
				snprintf(out, CLP_NAME_MAX, "%s", blocks->kinds[k]);
				return;
			}
	}
	snprintf(out, CLP_NAME_MAX, "%.*s", CLP_NAME_MAX - 1, d->name);
}

static int is_accel(const clp_topo_device *d)
{
	return !strcmp(d->type, "gpu") || !strcmp(d->type, "accelerator");
}

/* Which of a host's devices the plan may use. */
static int usable(const clp_topo_host *h, int i, int include_cpu)
{
	int accel = 0;

	if (is_accel(&h->devices[i]))
		return 1;
	for (int j = 0; j < h->ndevices; j++)
		accel |= is_accel(&h->devices[j]);
	return include_cpu || !accel;
}

static clp_status add_link(clp_cluster *c, int cap, int a, int b, clp_link_spec sp)
{
	clp_link *l;

	if (c->nlinks >= cap)
		return clp_error(CLP_ERR_STATE, "cluster from inventory: link table full");
	l = &c->links[c->nlinks++];
	l->a_dev = a, l->b_dev = b;
	l->a_host = c->devices[a].host, l->b_host = c->devices[b].host;
	l->directed = 0;
	l->spec = sp;
	return CLP_OK;
}

clp_status clp_plan_cluster_from_inventory(const clp_topo_cluster *inv, const clp_costs *blocks,
					   const clp_plan_links *links, int include_cpu,
					   clp_cluster **out)
{
	clp_plan_links dl;
	clp_cluster *c = calloc(1, sizeof(*c));
	int nd = 0, cap = 0, base = 0, *pos = NULL;
	clp_status st = CLP_OK;

	*out = NULL;
	if (!links) {
		clp_plan_links_default(&dl);
		links = &dl;
	}
	for (int h = 0; h < inv->nhosts; h++) {
		nd += inv->hosts[h].ndevices;
		cap += inv->hosts[h].ndevices * inv->hosts[h].ndevices + inv->hosts[h].nlinks;
	}
	if (c) {
		c->hosts = calloc((size_t)inv->nhosts + 1, sizeof(*c->hosts));
		c->devices = calloc((size_t)nd + 1, sizeof(*c->devices));
		c->links = calloc((size_t)cap + 1, sizeof(*c->links));
		pos = calloc((size_t)nd + 1, sizeof(int));
	}
	if (!c || !c->hosts || !c->devices || !c->links || !pos) {
		clp_cluster_free(c);
		free(pos);
		return clp_error(CLP_ERR_NOMEM, "cluster from inventory: out of host memory");
	}
	c->intra = links->pcie;
	c->inter = links->inter_host;
	c->eager_bytes = 65536;
	c->nhosts = inv->nhosts;
	for (int h = 0; h < inv->nhosts && st == CLP_OK; h++) {
		const clp_topo_host *th = &inv->hosts[h];
		clp_host *ch = &c->hosts[h];

		snprintf(ch->name, CLP_NAME_MAX, "%.*s", CLP_NAME_MAX - 1, th->name);
		ch->first_device = c->ndevices;
		for (int i = 0; i < th->ndevices; i++) {
			clp_device *d = &c->devices[c->ndevices];

			pos[base + i] = -1;
			if (!usable(th, i, include_cpu))
				continue;
			pos[base + i] = c->ndevices;
			snprintf(d->id, CLP_NAME_MAX, "%.*s:%d", CLP_NAME_MAX - 12, ch->name,
				 th->devices[i].index);
			kind_of(&th->devices[i], blocks, d->kind);
			d->host = h;
			d->memory_bytes = (int64_t)th->devices[i].global_mem;
			d->speed = 1;
			c->ndevices++;
			ch->ndevices++;
		}
		/* NVLink where hwloc saw it; across sockets where both ends know their node */
		for (int k = 0; k < th->nlinks && st == CLP_OK; k++) {
			const clp_topo_link *tl = &th->links[k];
			int a = pos[base + tl->a], b = pos[base + tl->b];

			if (a >= 0 && b >= 0 && tl->bandwidth_gbps > 0)
				st = add_link(c, cap, a, b, (clp_link_spec){links->nvlink_latency_s,
									     tl->bandwidth_gbps * 1e9});
		}
		for (int i = 0; i < th->ndevices && st == CLP_OK; i++)
			for (int j = i + 1; j < th->ndevices && st == CLP_OK; j++) {
				int a = pos[base + i], b = pos[base + j];
				int nv = 0;

				if (a < 0 || b < 0 || th->devices[i].numa < 0 ||
				    th->devices[j].numa < 0 || th->devices[i].numa == th->devices[j].numa)
					continue;
				for (int k = 0; k < th->nlinks; k++)
					nv |= (th->links[k].a == i && th->links[k].b == j) ||
					      (th->links[k].a == j && th->links[k].b == i);
				if (!nv)
					st = add_link(c, cap, a, b, links->cross_socket);
			}
		base += th->ndevices;
	}
	free(pos);
	if (st == CLP_OK && c->ndevices == 0)
		st = clp_error(CLP_ERR_NOT_FOUND, "cluster from inventory: no device to place "
			       "stages on");
	if (st == CLP_OK)
		st = clp_cluster_index(c);
	if (st != CLP_OK) {
		clp_cluster_free(c);
		return st;
	}
	*out = c;
	return CLP_OK;
}
