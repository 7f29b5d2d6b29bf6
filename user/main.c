// SPDX-License-Identifier: GPL-2.0
/* sluice: one binary; user/sluice.c has its commands. */
#include "sluice.h"

int main(int argc, char **argv)
{
	return sl_main(argc - 1, argv + 1);
}
