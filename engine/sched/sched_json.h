/* Schedules as JSON (docs/FORMATS.md, "clpipe-schedule"): users give their own, tests keep
 * golden files, and the executor can be handed exactly what the simulator ran. The writer puts
 * one op per line so that diffs of golden files read as schedule changes. */
#ifndef CLP_SCHED_SCHED_JSON_H
#define CLP_SCHED_SCHED_JSON_H

#include "engine/sched/sched.h"

/* Errors name the file and field ("s.json: programs[1].ops[4].stage: expected an integer").
 * The result is not validated: call clp_sched_validate(). */
clp_status clp_sched_load(const char *path, clp_sched **out);
clp_status clp_sched_save(const clp_sched *s, const char *path);
/* The same JSON as text (malloc()ed; NULL when out of memory), and back (errors name `name`),
 * e.g. a PipeFisher cycle kept in a checkpoint. */
char *clp_sched_to_json(const clp_sched *s);
clp_status clp_sched_from_json(const char *text, const char *name, clp_sched **out);
/* Op-by-op comparison; on a difference returns CLP_ERR_INVALID naming rank, op and both ops. */
clp_status clp_sched_compare(const clp_sched *a, const clp_sched *b);

#endif
