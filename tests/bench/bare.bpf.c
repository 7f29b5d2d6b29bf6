// SPDX-License-Identifier: GPL-2.0
/*
 * The baselines of the benchmarks: sluice's header parsing (bpf/parse.h,
 * included, not copied) and nothing else. bare_pass passes every frame,
 * bare_drop drops it; bench_xdp divides sluice's cost by theirs.
 * drop_only drops without reading the frame: bench_veth's baseline.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "sluice_abi.h"
#include "parse.h"

/* The parse results are stored here so that the compiler keeps every read
 * that sluice's classification depends on; one store, under 1 ns. */
volatile __u32 bare_sink;

static __always_inline void bare_parse(struct xdp_md *ctx)
{
	void *data = (void *) (long) ctx->data;
	void *data_end = (void *) (long) ctx->data_end;
	struct sluice_pkt p;
	enum parse_rc rc;

	rc = parse_packet(&p, data, data_end, false);
	if (rc == PARSE_OK || rc == PARSE_LATER_FRAGMENT)
		bare_sink = p.len ^ p.family ^ p.port_key;
	else
		bare_sink = rc;
}

SEC("xdp")
int bare_pass(struct xdp_md *ctx)
{
	bare_parse(ctx);
	return XDP_PASS;
}

SEC("xdp")
int bare_drop(struct xdp_md *ctx)
{
	bare_parse(ctx);
	return XDP_DROP;
}

SEC("xdp")
int drop_only(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
