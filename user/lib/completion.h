/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shell completion made from the command table (params.h): `sluice
 * completion bash|zsh` prints a script that offers every command, each
 * command's options (hidden ones aside) and, after an option, its values
 * where the table knows them (choices, interfaces, files, directories).
 * The scripts are built from the table, so they cannot drift from it.
 */
#ifndef SLUICE_COMPLETION_H
#define SLUICE_COMPLETION_H

#include <stdio.h>

#include "params.h"

/* The script for shell over cmds into f: 0, or -EINVAL for another shell. */
int sl_completion_print(const struct sl_cmd *const *cmds, const char *shell,
			FILE *f);

#endif
