/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The agent's answer to "who is being dropped?" (`sluice drops`, top):
 * the data plane's drop samples (user/dp/drops.h) read every turn of the
 * main loop into the heaviest sources per rule (user/lib/droptop.h).
 */
#ifndef SLUICE_AGENT_DROPS_H
#define SLUICE_AGENT_DROPS_H

#include <pthread.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "loader.h"

struct sl_agent_drops;

/* NULL with errno set when the ring cannot be read. */
struct sl_agent_drops *sl_agent_drops_new(const struct sl_dataplane *dp);
/* Take the samples waiting; forget rules that left the set (dp read
 * under lock). */
void sl_agent_drops_poll(struct sl_agent_drops *d,
			 const struct sl_dataplane *dp, pthread_mutex_t *lock);
/*
 * Add to answer "half_life_s" and "rules": the rules in force with drops
 * (or only the rule called rule), most dropped first, each with its top
 * sources (at most top). -ENOENT: no rule of that name (err says so).
 */
int sl_agent_drops_answer(struct sl_agent_drops *d,
			  const struct sl_dataplane *dp, const char *rule,
			  size_t top, cJSON *answer, char *err, size_t errlen);
void sl_agent_drops_free(struct sl_agent_drops *d);

#endif
