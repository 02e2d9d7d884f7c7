/* What this rank holds, in words, for messages about a rank that is lost or stopped. */
#include <stdio.h>
#include <stdlib.h>

#include "engine/train/session_internal.h"

void clp_session_role(const clp_session *s, char *buf, size_t n)
{
	int r = sess_rank(s), k, used = 0;
	clp_exec_stage_need st[8];

	buf[0] = '\0';
	if (!s->sched || r >= s->sched->nranks) {
		snprintf(buf, n, "the whole model");
		return;
	}
	k = clp_exec_rank_stages(s->sched, r, st, 8);
	for (int i = 0; i < k && (size_t)used < n; i++) {
		const clp_stage_info *si = &s->sched->stages[st[i].stage];

		used += snprintf(buf + used, n - (size_t)used, "%sstage %d (layers %d..%d%s%s)",
				 i ? ", " : "", st[i].stage, si->first_layer,
				 si->first_layer + si->nlayers - 1, si->embed ? ", embedding" : "",
				 si->head ? ", head" : "");
	}
	if (!k)
		snprintf(buf, n, "no stage");
}

long clp_session_steps_done(const clp_session *s)
{
	return s->step;
}
