/* SPDX-License-Identifier: GPL-2.0 */
/* The data plane's samples of dropped packets (`sluice drops`), read from
 * the drop_samples ring without waiting. */
#ifndef SLUICE_DROP_RING_H
#define SLUICE_DROP_RING_H

#include "dataplane.h"

struct sl_drop_reader;

typedef void (*sl_drop_fn)(void *ctx, const struct sluice_drop_sample *s);

/* A reader of dp's ring calling fn for each sample; NULL with errno set. */
struct sl_drop_reader *sl_drop_reader_new(const struct sl_dataplane *dp,
					  sl_drop_fn fn, void *ctx);
/* Every sample waiting, without blocking; their number or -errno. */
int sl_drop_reader_consume(struct sl_drop_reader *r);
void sl_drop_reader_free(struct sl_drop_reader *r);

#endif
