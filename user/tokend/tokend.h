/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The token server (docs/cluster.md): one thread on epoll, leases for
 * cluster flows. A library: no signals, no exit; `sluice tokend` wraps it.
 */
#ifndef SLUICE_TOKEND_H
#define SLUICE_TOKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "params.h"
#include "proto.h"
#include "rules.h"
#include "secrets.h"

/* Defaults; each is a field of struct sl_tokend_cfg and a tokend option. */
#ifndef SL_TOKEND_TTL_MS
#define SL_TOKEND_TTL_MS 1000 /* lease TTL */
#endif
#ifndef SL_TOKEND_SYNC_MS
#define SL_TOKEND_SYNC_MS 100 /* sync period advised to clients */
#endif
#ifndef SL_TOKEND_MAX_CONNS
#define SL_TOKEND_MAX_CONNS 4096
#endif
#ifndef SL_TOKEND_NS_RATE
#define SL_TOKEND_NS_RATE 100000 /* SYNC frames/s per namespace */
#endif
#ifndef SL_TOKEND_OUT_MAX
#define SL_TOKEND_OUT_MAX (4 * SL_PROTO_MAX_FRAME) /* per connection */
#endif
#ifndef SL_TOKEND_HANDSHAKE_MS
#define SL_TOKEND_HANDSHAKE_MS 5000 /* HELLO to AUTH_OK, and closing */
#endif
#ifndef SL_TOKEND_REBALANCE_MS
#define SL_TOKEND_REBALANCE_MS 25 /* least time between two water fills */
#endif
#ifndef SL_TOKEND_MAX_NODES
#define SL_TOKEND_MAX_NODES 65536 /* node ids remembered per namespace */
#endif

struct sl_tokend_cfg {
	const char *listen; /* "ADDR:PORT", "[ADDR6]:PORT"; port 0: any */
	uint32_t ttl_ms;
	uint32_t sync_ms;
	uint32_t learn_ms; /* after start: grant no more than clients hold */
	uint32_t max_conns;
	uint32_t ns_rate; /* SYNC frames/s per namespace; 0: no limit */
	uint32_t out_max;
	uint32_t handshake_ms;
	uint32_t rebalance_ms;
	uint32_t max_nodes;
};

/* The defaults above; learn_ms = ttl_ms. */
void sl_tokend_cfg_default(struct sl_tokend_cfg *cfg);

struct sl_tokend_stats {
	uint64_t accepted;
	uint64_t refused_busy;   /* over max_conns */
	uint64_t auth_ok;
	uint64_t auth_failed;
	uint64_t malformed;	 /* connections closed for a bad frame */
	uint64_t dropped_slow;	 /* output buffer full */
	uint64_t syncs;
	uint64_t flow_updates;
	uint64_t keep_replies;	 /* namespace over its request rate */
	uint32_t conns;
};

enum sl_tokend_cmd {
	SL_TOKEND_DRAIN = 'd', /* every lease to TTL 0, keep serving DRAIN */
	SL_TOKEND_STOP = 's',
};

struct sl_tokend;

/*
 * Bind and listen, from the cluster rules of rs (at least one) and the
 * secrets (NULL: no authentication, allowed on loopback only); both must
 * outlive the server. Errors are explained in err.
 */
int sl_tokend_new(const struct sl_tokend_cfg *cfg, const struct sl_ruleset *rs,
		  const struct sl_secrets *secrets, struct sl_tokend **out,
		  char *err, size_t errlen);

/* The bound port (for port 0). */
uint16_t sl_tokend_port(const struct sl_tokend *td);

/* Serve until SL_TOKEND_STOP; 0, or -errno if epoll fails. */
int sl_tokend_run(struct sl_tokend *td);

/* Ask the running server to drain or stop; async-signal-safe. */
void sl_tokend_command(struct sl_tokend *td, enum sl_tokend_cmd cmd);

void sl_tokend_get_stats(const struct sl_tokend *td,
			 struct sl_tokend_stats *st);

void sl_tokend_free(struct sl_tokend *td);

/* `sluice tokend` (user/tokend/main.c). */
extern const struct sl_cmd sl_cmd_tokend;

#endif
