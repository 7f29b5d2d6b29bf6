/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One replica of a token service in an etcd election (docs/cluster.md,
 * "Replicas"): a thread that holds an etcd lease, stands under the
 * election key, and tells the server its role after every renewal.
 */
#ifndef SLUICE_ELECTION_H
#define SLUICE_ELECTION_H

#include <stddef.h>
#include <stdint.h>

#include "etcd.h"
#include "tokensrv.h"

#define SL_ELECTION_TTL_MS 2000 /* etcd's smallest lease with its defaults */

struct sl_election_cfg {
	const char *endpoints; /* URL[,URL...] */
	struct sl_etcd_auth auth; /* TLS and user for etcd */
	const char *name;      /* the election key */
	const char *advertise; /* HOST:PORT clients reach this server at */
	uint32_t ttl_ms;       /* of the etcd lease, whole seconds */
};

struct sl_election;

/* Checks the configuration and starts the thread; the server must be
 * created with cfg.elected, so that it grants nothing until elected. */
int sl_election_start(struct sl_tokend *td, const struct sl_election_cfg *cfg,
		      struct sl_election **out, char *err, size_t errlen);

/* Stop the thread and revoke the lease, so that a successor need not
 * wait for it to run out. Call after the server stopped granting. */
void sl_election_stop(struct sl_election *el);

#endif
