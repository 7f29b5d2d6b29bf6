// SPDX-License-Identifier: GPL-2.0
/*
 * A token server replica in an etcd election (docs/cluster.md, "Replicas").
 * Every third of the etcd lease TTL: renew the lease, read who leads, and
 * tell the server. A leader's role ends one TTL (less a tenth) after the
 * last renewal it sent: etcd counts the TTL from when it received that
 * renewal, so the server stops granting before etcd can elect another.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "election.h"
#include "etcd.h"
#include "log.h"
#include "util.h"

struct sl_election {
	struct sl_tokend *td;
	struct sl_etcd etcd;
	char advertise[SL_PROTO_ADDR_MAX + 1];
	unsigned int ttl_s;
	int64_t lease;	 /* 0: none */
	bool standing;	 /* our candidate key exists under the lease */
	uint64_t renewed; /* sl_now_ms() when the last renewal was sent */
	struct sl_tokend_role role; /* as last told */
	char last_err[256];
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
};

/* Log an etcd error once, not every round it repeats. */
static void etcd_failed(struct sl_election *el, const char *what,
			const char *err)
{
	char msg[sizeof(el->last_err)];

	snprintf(msg, sizeof(msg), "%s: %s", what, err);
	if (strcmp(msg, el->last_err))
		pr_warn("tokend: election: %s", msg);
	snprintf(el->last_err, sizeof(el->last_err), "%s", msg);
}

static void tell(struct sl_election *el, const struct sl_tokend_role *r)
{
	const struct sl_tokend_role *was = &el->role;

	if (r->leader == was->leader && r->term == was->term &&
	    r->until_ms == was->until_ms &&
	    !strcmp(r->leader_addr, was->leader_addr))
		return;
	if (r->leader && (!was->leader || r->term != was->term))
		pr_info("tokend: election: leader, term %llu",
			(unsigned long long)r->term);
	else if (!r->leader && (was->leader || r->term != was->term ||
				strcmp(r->leader_addr, was->leader_addr)))
		pr_info("tokend: election: follower, the leader is %s "
			"(term %llu)", *r->leader_addr ? r->leader_addr : "unknown",
			(unsigned long long)r->term);
	el->role = *r;
	sl_tokend_set_role(el->td, r);
}

/* A new lease and our candidate key under it; false on an etcd error. */
static bool stand(struct sl_election *el, uint64_t now)
{
	char err[256];
	unsigned int ttl = el->ttl_s;
	int64_t rev;

	if (!el->lease) {
		if (sl_etcd_lease_grant(&el->etcd, &ttl, &el->lease, err,
					sizeof(err))) {
			etcd_failed(el, "lease grant", err);
			return false;
		}
		el->ttl_s = ttl;
		el->renewed = now;
		el->standing = false;
	}
	if (!el->standing) {
		if (sl_etcd_campaign(&el->etcd, el->lease, el->advertise, &rev,
				     err, sizeof(err))) {
			etcd_failed(el, "campaign", err);
			return false;
		}
		el->standing = true;
	}
	return true;
}

/* Renew the lease; a lease that ran out makes us a candidate anew. */
static void renew(struct sl_election *el, uint64_t now)
{
	char err[256];
	int ret;

	ret = sl_etcd_lease_keepalive(&el->etcd, el->lease, err, sizeof(err));
	if (!ret) {
		el->renewed = now;
		return;
	}
	etcd_failed(el, "lease keepalive", err);
	if (ret == -ENOENT) {
		el->lease = 0;
		el->standing = false;
		el->renewed = 0;
	}
}

static void round_once(struct sl_election *el, uint64_t now)
{
	struct sl_tokend_role r = el->role;
	uint64_t ttl_ms = el->ttl_s * 1000ULL;
	struct sl_etcd_leader l;
	char err[256];

	if (el->lease && el->standing)
		renew(el, now);
	if (!el->lease || !el->standing)
		stand(el, now);
	if (sl_etcd_leader(&el->etcd, &l, err, sizeof(err))) {
		/* who leads is unknown: a leader runs out its lease, no more */
		etcd_failed(el, "leader", err);
		if (r.leader)
			r.until_ms = el->lease ? el->renewed + ttl_ms - ttl_ms / 10
					       : 1;
		tell(el, &r);
		return;
	}
	if (el->last_err[0])
		pr_info("tokend: election: etcd answers again");
	el->last_err[0] = '\0';
	memset(&r, 0, sizeof(r));
	if (l.exists && el->lease && l.lease == el->lease && el->standing) {
		r.leader = true;
		r.term = l.rev;
		r.until_ms = el->renewed + ttl_ms - ttl_ms / 10;
	} else if (l.exists) {
		r.term = l.rev;
		if (sl_proto_addr_valid(l.value, l.len))
			snprintf(r.leader_addr, sizeof(r.leader_addr), "%s",
				 l.value);
		else
			pr_warn("tokend: election: the leader's address is "
				"not HOST:PORT; clients are not redirected");
	}
	sl_etcd_leader_free(&l);
	tell(el, &r);
}

static void *run(void *arg)
{
	struct sl_election *el = arg;

	pthread_mutex_lock(&el->lock);
	while (!el->stop) {
		uint64_t now = sl_now_ms(), period = el->ttl_s * 1000ULL / 3;
		struct timespec ts;
		uint64_t end;

		pthread_mutex_unlock(&el->lock);
		round_once(el, now);
		/* a lost lease: stand again at once */
		if (!el->lease)
			period = 0;
		end = sl_now_ms();
		sl_deadline_ts(CLOCK_MONOTONIC,
			       now + period > end ? now + period - end : 0, &ts);
		pthread_mutex_lock(&el->lock);
		while (!el->stop &&
		       pthread_cond_timedwait(&el->cond, &el->lock, &ts) !=
			       ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&el->lock);
	return NULL;
}

int sl_election_start(struct sl_tokend *td, const struct sl_election_cfg *cfg,
		      struct sl_election **out, char *err, size_t errlen)
{
	struct sl_election *el;
	struct sl_hostport hp;
	pthread_condattr_t ca;
	int ret;

	if (!cfg->advertise ||
	    !sl_proto_addr_valid(cfg->advertise, strlen(cfg->advertise)) ||
	    sl_parse_hostport(cfg->advertise, strlen(cfg->advertise), &hp) ||
	    !hp.port) {
		snprintf(err, errlen, "--advertise '%s': not HOST:PORT "
			 "([ADDR6]:PORT for IPv6, port 1-65535)",
			 cfg->advertise ? cfg->advertise : "");
		return -EINVAL;
	}
	if (!cfg->name || !*cfg->name || strchr(cfg->name, '\0')[-1] == '/') {
		snprintf(err, errlen, "--election '%s': a key, not empty and "
			 "not ending in /", cfg->name ? cfg->name : "");
		return -EINVAL;
	}
	el = calloc(1, sizeof(*el));
	if (!el)
		return -ENOMEM;
	ret = sl_etcd_init(&el->etcd, cfg->endpoints, &cfg->auth, cfg->name, err,
			   errlen);
	if (ret) {
		free(el);
		return ret;
	}
	el->td = td;
	snprintf(el->advertise, sizeof(el->advertise), "%s", cfg->advertise);
	el->ttl_s = (cfg->ttl_ms + 999) / 1000;
	/* a round must end well within a third of the TTL */
	el->etcd.timeout_ms = el->ttl_s * 1000 / 6;
	pthread_mutex_init(&el->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&el->cond, &ca);
	pthread_condattr_destroy(&ca);
	ret = -pthread_create(&el->thread, NULL, run, el);
	if (ret) {
		snprintf(err, errlen, "election thread: %s", strerror(-ret));
		sl_etcd_free(&el->etcd);
		free(el);
		return ret;
	}
	*out = el;
	return 0;
}

void sl_election_stop(struct sl_election *el)
{
	char err[256];

	if (!el)
		return;
	pthread_mutex_lock(&el->lock);
	el->stop = true;
	pthread_cond_signal(&el->cond);
	pthread_mutex_unlock(&el->lock);
	pthread_join(el->thread, NULL);
	if (el->lease &&
	    sl_etcd_lease_revoke(&el->etcd, el->lease, err, sizeof(err)))
		pr_warn("tokend: election: lease revoke: %s (the next leader "
			"waits for it to run out)", err);
	sl_etcd_free(&el->etcd);
	pthread_cond_destroy(&el->cond);
	pthread_mutex_destroy(&el->lock);
	free(el);
}
