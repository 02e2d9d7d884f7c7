/* The cluster description (docs/FORMATS.md): hosts, their devices (kind, memory, speed factor)
 * and links with latency and bandwidth. Discovery writes it; the simulator, the placement and
 * the SkipPipe path scheduler read it.
 *
 * A link between two devices is, in order of preference: an explicit device-to-device link, an
 * explicit host-to-host link (devices on different hosts), the default intra-host link (same
 * host), the default inter-host link. Each direction of a link is one first-come-first-served
 * resource; a default inter-host link is shared by all devices of the two hosts (their NICs). */
#ifndef CLP_IO_CLUSTER_H
#define CLP_IO_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "cl/base/status.h"

#define CLP_NAME_MAX 64

typedef struct clp_link_spec {
	double latency_s;
	double bandwidth_Bps; /* INFINITY: free */
} clp_link_spec;

typedef struct clp_device {
	char id[CLP_NAME_MAX];   /* unique; "host:index" unless given */
	char kind[CLP_NAME_MAX]; /* matches the device kinds of a cost table ("V100") */
	int host;
	int64_t memory_bytes;    /* 0: unknown (no memory check) */
	double speed;            /* relative speed; cost tables scale by the ratio to their kind's */
} clp_device;

typedef struct clp_host {
	char name[CLP_NAME_MAX];
	int first_device, ndevices;
} clp_host;

typedef struct clp_link {
	int a_host, a_dev, b_host, b_dev; /* device links have a_dev/b_dev >= 0, host links -1 */
	int directed;                     /* only a -> b */
	clp_link_spec spec;
} clp_link;

typedef struct clp_cluster {
	char file[256]; /* the file it was read from ("" if made in memory): messages name it */
	clp_host *hosts;
	int nhosts;
	clp_device *devices;
	int ndevices;
	clp_link *links;
	int nlinks;
	clp_link_spec intra, inter; /* defaults */
	int64_t eager_bytes;        /* sends below this size complete without a posted receive */
	/* Optional index of the explicit links (clp_cluster_index): a route is then a hash lookup,
	 * not a scan of every link (a 1,000-node network lists 500,000 pairs). */
	int64_t *ix_keys, *ix_vals;
	size_t ix_cap;
} clp_cluster;

/* A resolved route: the spec and the FCFS resource it occupies (an id < clp_cluster_nres()). */
typedef struct clp_route {
	clp_link_spec spec;
	int64_t resource; /* -1: same device, no resource */
} clp_route;

clp_status clp_cluster_load(const char *path, clp_cluster **out);
clp_status clp_cluster_save(const clp_cluster *c, const char *path);
/* n devices of one kind, one per host ("local"), free links, unknown memory: the ideal machine. */
clp_status clp_cluster_ideal(int n, clp_cluster **out);
void clp_cluster_free(clp_cluster *c);

int clp_cluster_find_device(const clp_cluster *c, const char *id); /* -1 if absent */
/* Index the explicit links (clp_cluster_load does; call it again after changing links by hand).
 * Routes are the same with or without it. */
clp_status clp_cluster_index(clp_cluster *c);
/* Route from device a to device b (a != b), and the number of resource ids routes may use. */
clp_route clp_cluster_route(const clp_cluster *c, int a, int b);
int64_t clp_cluster_nres(const clp_cluster *c);

#endif
