/* SPDX-License-Identifier: GPL-2.0 */
/* `sluice agent`: the daemon that owns the rules of one host. */
#ifndef SLUICE_AGENT_H
#define SLUICE_AGENT_H

#include "params.h"

extern const struct sl_cmd sl_cmd_agent;

#endif
