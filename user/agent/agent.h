/* SPDX-License-Identifier: GPL-2.0 */
/* `sluice agent`: the daemon that owns the rules of one host. */
#ifndef SLUICE_AGENT_H
#define SLUICE_AGENT_H

int sl_agent_main(int argc, char **argv);

#endif
