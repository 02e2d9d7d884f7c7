/* What test_exec_equiv.c shares with its checks (exec_equiv_checks.c): the command line's
 * settings, the work directory and the trace and cycle checks of a run (a run `sub` is a
 * directory under dir). */
#ifndef CLP_TESTS_EXEC_EQUIV_H
#define CLP_TESTS_EXEC_EQUIV_H

#include "topology/comm/comm.h"

extern char preset[16], schedule[16], mode[16], precision[8];
extern int D, R, N, V;
extern clp_comm *world;
extern char dir[512];
extern int pfK;    /* the K of the pipelined PipeFisher run */
extern int nsteps;
extern int delay_set; /* muon.delay for the next runs (-1: the mode's) */

int pf_mode(void);
int spf_mode(void);
int spfph_mode(void);
int losses(const char *sub, double *out, int max);

int cycle_phases(const char *sub, int *nph);
void drop_last_phases(const char *sub, const char *out);
void check_phases(const char *sub);
void check_prep_trace(void);
void check_delay_trace(void);
void write_phases(void);
void check_items_trace(void);
void check_skipped(void);

#endif
