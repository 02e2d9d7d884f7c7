/* The rank layout (docs/FORMATS.md): for every rank, the stages it holds (stage, pipeline,
 * chunk), its data-parallel replica and its device (an id from the cluster file). Placement
 * writes it; the simulator and the executor read it. */
#ifndef CLP_IO_LAYOUT_H
#define CLP_IO_LAYOUT_H

#include "cl/base/status.h"
#include "engine/scenario/cluster.h"

struct clp_sched;

typedef struct clp_layout_stage {
	int stage, pipe, chunk;
} clp_layout_stage;

typedef struct clp_layout_rank {
	char device_id[CLP_NAME_MAX];
	int device; /* index into the cluster's devices after clp_layout_resolve; -1 before */
	int replica;
	int nstages;
	clp_layout_stage *stages;
} clp_layout_rank;

typedef struct clp_layout {
	int nranks;
	char file[256]; /* the file it was read from ("" if made in memory): messages name it */
	clp_layout_rank *ranks;
} clp_layout;

clp_status clp_layout_load(const char *path, clp_layout **out);
clp_status clp_layout_save(const clp_layout *l, const char *path);
void clp_layout_free(clp_layout *l);

/* The layout a schedule implies, rank r on the cluster's device r (device ids "dev<r>" without
 * a cluster). Fails if the cluster has fewer devices than the schedule has ranks. */
clp_status clp_layout_from_sched(const struct clp_sched *s, const clp_cluster *c,
				 clp_layout **out);
/* Look the device ids up in the cluster; errors name the file and rank. */
clp_status clp_layout_resolve(clp_layout *l, const clp_cluster *c, const char *file);
/* The schedule runs each rank's stages exactly where the layout puts them. */
clp_status clp_layout_check(const clp_layout *l, const struct clp_sched *s, const char *file);

#endif
