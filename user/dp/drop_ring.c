// SPDX-License-Identifier: GPL-2.0
/* The data plane's samples of dropped packets (drop_ring.h), with libbpf's
 * ring buffer reader. */
#include <errno.h>
#include <stdlib.h>

#include <bpf/libbpf.h>

#include "drop_ring.h"
#include "sluice.skel.h"

struct sl_drop_reader {
	struct ring_buffer *rb;
	sl_drop_fn fn;
	void *ctx;
};

static int on_sample(void *arg, void *data, size_t len)
{
	struct sl_drop_reader *r = arg;

	/* the ring holds samples of this build's layout only */
	if (len >= sizeof(struct sluice_drop_sample))
		r->fn(r->ctx, data);
	return 0;
}

struct sl_drop_reader *sl_drop_reader_new(const struct sl_dataplane *dp,
					  sl_drop_fn fn, void *ctx)
{
	struct sl_drop_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->fn = fn;
	r->ctx = ctx;
	r->rb = ring_buffer__new(bpf_map__fd(dp->skel->maps.drop_samples),
				 on_sample, r, NULL);
	if (!r->rb) {
		free(r);
		return NULL;
	}
	return r;
}

int sl_drop_reader_consume(struct sl_drop_reader *r)
{
	return ring_buffer__consume(r->rb);
}

void sl_drop_reader_free(struct sl_drop_reader *r)
{
	if (r) {
		ring_buffer__free(r->rb);
		free(r);
	}
}
