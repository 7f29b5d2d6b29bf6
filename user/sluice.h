/* SPDX-License-Identifier: GPL-2.0 */
/* The sluice binary: one command table over every program. */
#ifndef SLUICE_SLUICE_H
#define SLUICE_SLUICE_H

#include "params.h"

extern const struct sl_cmd *const sl_commands[];

/* The command line after the program's name; the exit status. */
int sl_main(int argc, char **argv);

#endif
