/* SPDX-License-Identifier: GPL-2.0 */
/* `sluice tokend`: the token server (user/tokensrv/) as a process. */
#ifndef SLUICE_TOKEND_H
#define SLUICE_TOKEND_H

#include "params.h"

extern const struct sl_cmd sl_cmd_tokend;

#endif
