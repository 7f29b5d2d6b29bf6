// SPDX-License-Identifier: GPL-2.0
/*
 * Cluster sync (cluster.h): one thread, one non-blocking TCP session per
 * namespace, HELLO/CHALLENGE/AUTH then one SYNC per sync period for all
 * the namespace's flows. Every threshold change, and every renewal of a
 * lease (its expiry), is one sl_dp_set_limit(). This file: the
 * configuration, the flows and the thread (the others: cluster_int.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cluster_int.h"
#include "log.h"
#include "sluice_abi.h"
#include "stats.h"
#include "util.h"

/* Buckets of the sync round trip, in seconds: a LAN's 100 us up to the
 * 300 ms after which three missed syncs end a session. */
static const double sync_rtt_bounds[] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
	0.01,	0.025,	 0.05,	 0.1,	0.25,	0.5,
};

void sl_cluster_cfg_default(struct sl_cluster_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->sync_ms = SL_CLUSTER_SYNC_MS;
	cfg->miss_limit = SL_LEASE_MISS_LIMIT;
	cfg->good_needed = SL_LEASE_GOOD_NEEDED;
	cfg->resolve_ms = SL_CLUSTER_RESOLVE_MS;
	cfg->connect_ms = SL_CLUSTER_CONNECT_MS;
	cfg->handshake_ms = SL_CLUSTER_HANDSHAKE_MS;
	cfg->backoff_min_ms = SL_CLUSTER_BACKOFF_MIN_MS;
	cfg->backoff_max_ms = SL_CLUSTER_BACKOFF_MAX_MS;
	cfg->max_ttl_ms = SL_CLUSTER_MAX_TTL_MS;
}

const char *const sl_cluster_refusal_names[SL_REFUSALS] = {
	[SL_REFUSED_OVER_COUNT] = "over_count",
	[SL_REFUSED_TTL] = "ttl",
	[SL_REFUSED_SERVER_AUTH] = "server_auth",
	[SL_REFUSED_MAC] = "mac",
	[SL_REFUSED_SEQUENCE] = "sequence",
	[SL_REFUSED_UNSEALED] = "unsealed",
	[SL_REFUSED_TERM] = "term",
	[SL_REFUSED_MALFORMED] = "malformed",
};

int sl_cluster_parse_servers(const char *list, struct sl_cluster_server *out,
			     size_t max, size_t *n, char *err, size_t errlen)
{
	const char *cur = list, *it;
	struct sl_hostport hp;
	size_t len;

	*n = 0;
	if (!list || !*list) {
		snprintf(err, errlen, "no token server given");
		return -EINVAL;
	}
	while (sl_list_next(&cur, &it, &len)) {
		if (*n == max) {
			snprintf(err, errlen, "more than %zu token servers",
				 max);
			return -EINVAL;
		}
		if (sl_parse_hostport(it, len, &hp) || !hp.port) {
			snprintf(err, errlen,
				 "'%.*s' is not HOST:PORT ([ADDR6]:PORT for "
				 "IPv6, port 1-65535)", (int)len, it);
			return -EINVAL;
		}
		snprintf(out[*n].host, sizeof(out[*n].host), "%s", hp.host);
		snprintf(out[*n].port, sizeof(out[*n].port), "%u", hp.port);
		(*n)++;
	}
	return 0;
}

/* sv's address when its host is numeric (freeaddrinfo it); NULL for a
 * name, which only a resolver answers. */
struct addrinfo *cluster_numeric_addr(const struct sl_cluster_server *sv)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai;

	return getaddrinfo(sv->host, sv->port, &hints, &ai) ? NULL : ai;
}

/*
 * Without secrets the token protocol has no key: a peer is trusted only
 * on loopback, as tokend listens only there then. A name other than
 * localhost is checked again once resolved.
 */
static int check_unkeyed(const struct sl_cluster_server *sv, char *err,
			 size_t errlen)
{
	struct addrinfo *ai = cluster_numeric_addr(sv);
	bool loopback = ai && sl_sockaddr_is_loopback(ai->ai_addr);

	if (ai)
		freeaddrinfo(ai);
	if (loopback || !strcmp(sv->host, "localhost"))
		return 0;
	snprintf(err, errlen, "token server %s:%s is not a loopback address: "
		 "a session with it needs --secrets", sv->host, sv->port);
	return -EINVAL;
}

uint32_t cluster_next_rand(struct sl_cluster_sync *c)
{
	return sl_xorshift32(&c->rnd);
}

static struct flow *find_flow(struct sl_cluster_sync *c,
			      const struct sl_rule *r)
{
	for (size_t i = 0; i < c->n_flows; i++)
		if (c->flows[i].r.cluster.flow_id == r->cluster.flow_id &&
		    !strcmp(c->flows[i].r.cluster.ns, r->cluster.ns) &&
		    !strcmp(c->flows[i].rule, r->name))
			return &c->flows[i];
	return NULL;
}

/* dp's hook for a fresh slot: called inside sl_dp_apply (dp_lock held). */
static uint64_t first_limit(const struct sl_rule *r, void *arg)
{
	struct sl_cluster_sync *c = arg;
	struct sl_lease l;
	struct flow *f;
	uint64_t v;

	if (!r->cluster.enabled)
		return r->count;
	pthread_mutex_lock(&c->lock);
	f = find_flow(c, r);
	if (f) {
		l = f->l;
		sl_lease_refresh(&l, r, c->node);
		v = l.limit;
	} else {
		v = sl_lease_fallback(r, c->node, 0, NULL);
	}
	pthread_mutex_unlock(&c->lock);
	return v;
}

int sl_cluster_new(const struct sl_cluster_cfg *cfg, struct sl_dataplane *dp,
		   pthread_mutex_t *dp_lock, struct sl_cluster_sync **out,
		   char *err, size_t errlen)
{
	struct sl_cluster_sync *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return -ENOMEM;
	c->cfg = *cfg;
	c->dp = dp;
	c->dp_lock = dp_lock;
	c->wake_fd = -1;
	ret = sl_cluster_parse_servers(cfg->servers, c->servers,
				       SL_CLUSTER_MAX_SERVERS, &c->n_servers,
				       err, errlen);
	if (ret)
		goto fail;
	if (cfg->node_id)
		snprintf(c->node, sizeof(c->node), "%s", cfg->node_id);
	else if (gethostname(c->node, sizeof(c->node) - 1))
		c->node[0] = 0;
	if (!sl_proto_name_valid(c->node, strlen(c->node))) {
		snprintf(err, errlen,
			 "node id '%s' is not 1-63 of [A-Za-z0-9_.:-]%s",
			 c->node,
			 cfg->node_id ? "" : " (the host name; give --node-id)");
		ret = -EINVAL;
		goto fail;
	}
	for (size_t i = 0; i < c->n_servers && !cfg->secrets; i++) {
		ret = check_unkeyed(&c->servers[i], err, errlen);
		if (ret)
			goto fail;
	}
	if (!cfg->sync_ms || !cfg->miss_limit || !cfg->good_needed ||
	    !cfg->backoff_min_ms || cfg->backoff_max_ms < cfg->backoff_min_ms) {
		snprintf(err, errlen, "sync period, N, K and the backoff "
				      "must be positive");
		ret = -EINVAL;
		goto fail;
	}
	c->reports = calloc(SL_PROTO_MAX_REPORTS, sizeof(*c->reports));
	c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!c->reports || c->wake_fd < 0) {
		ret = -ENOMEM;
		goto fail;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->rnd = (uint32_t)sl_now_ns() ^ (uint32_t)getpid() << 8;
	if (!c->rnd)
		c->rnd = 1;
	dp->first_limit = first_limit;
	dp->first_limit_arg = c;
	*out = c;
	return 0;
fail:
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	free(c->reports);
	free(c);
	return ret;
}

/* ---- the flows ---- */

static void log_state(struct flow *f)
{
	if (f->logged == f->l.state)
		return;
	pr_info("cluster: %s: %s -> %s, threshold %llu", f->rule,
		sl_lease_state_str(f->logged), sl_lease_state_str(f->l.state),
		(unsigned long long)f->l.limit);
	f->logged = f->l.state;
}

/*
 * The threshold of each flow whose limit changed, and under a lease its
 * expiry whenever a renewal moved it, with the fallback beside it: the
 * data plane switches to that by itself at the expiry, the moment
 * sl_lease_tick() would, should this agent be gone by then. (Under a
 * lease good is 0, so sl_lease_fallback() is what tick writes.)
 */
static void write_limits(struct sl_cluster_sync *c, uint64_t now)
{
	for (size_t i = 0; i < c->n_flows; i++) {
		struct flow *f = &c->flows[i];
		struct sl_lease_cfg lc = {
			.sync_ms = c->sess[f->sess].sync_ms,
			.miss_limit = c->cfg.miss_limit,
		};
		struct sluice_lease dl = {
			.expires_ns = sl_lease_expiry(&f->l, &lc),
		};
		int err;

		log_state(f);
		if (!f->l.dirty && dl.expires_ns == f->dp_expires)
			continue;
		if (dl.expires_ns)
			dl.fallback = sl_lease_fallback(&f->r, c->node,
							f->l.holders, &f->l);
		err = sl_dp_set_limit(c->dp, f->rule, f->l.limit,
				      dl.expires_ns ? &dl : NULL);
		if (err) {
			pr_warn("cluster: %s: cannot write threshold %llu: %s",
				f->rule, (unsigned long long)f->l.limit,
				strerror(-err));
			continue;
		}
		f->dp_expires = dl.expires_ns;
		sl_lease_written(&f->l, now);
		log_state(f);
	}
}

static int64_t map_limit(struct sl_cluster_sync *c, size_t idx)
{
	uint64_t v;

	if (sl_dp_get_limit(c->dp, idx, &v))
		return -1;
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static struct session *find_sess(struct session *s, size_t n, const char *ns)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s[i].ns, ns))
			return &s[i];
	return NULL;
}

void cluster_resolve_free(struct resolve *r)
{
	if (r->cb.ar_result)
		freeaddrinfo(r->cb.ar_result);
	free(r);
}

/* Lookups given up that glibc has finished with since. */
static void reap_abandoned(struct sl_cluster_sync *c)
{
	struct resolve **p = &c->abandoned;

	while (*p) {
		struct resolve *r = *p;

		if (gai_error(&r->cb) == EAI_INPROGRESS) {
			p = &r->next;
			continue;
		}
		*p = r->next;
		cluster_resolve_free(r);
	}
}

void cluster_sess_close(struct sl_cluster_sync *c, struct session *s)
{
	struct resolve *r = s->res;

	if (r && gai_error(&r->cb) == EAI_INPROGRESS &&
	    gai_cancel(&r->cb) == EAI_NOTCANCELED) {
		r->next = c->abandoned;
		c->abandoned = r;
	} else if (r) {
		cluster_resolve_free(r);
	}
	s->res = NULL;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->in_len = s->out_len = 0;
	s->waiting = 0;
	sl_proto_session_clear(&s->keys);
}

static void sess_free(struct session *s)
{
	free(s->in);
	free(s->out);
	free(s->sent);
}

static int sess_init(struct sl_cluster_sync *c, struct session *s,
		     const char *ns)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->ns, sizeof(s->ns), "%s", ns);
	s->fd = -1;
	s->sync_ms = c->cfg.sync_ms;
	sl_histogram_init(&s->sync_rtt, sync_rtt_bounds,
			  ARRAY_SIZE(sync_rtt_bounds));
	s->in = malloc(SL_PROTO_MAX_FRAME);
	s->out = malloc(SL_PROTO_MAX_FRAME);
	s->sent = calloc(SL_PROTO_MAX_REPORTS, sizeof(*s->sent));
	if (!s->in || !s->out || !s->sent) {
		sess_free(s);
		return -ENOMEM;
	}
	return 0;
}

void sl_cluster_rules_changed(struct sl_cluster_sync *c)
{
	const struct sl_ruleset *rs = &c->dp->rules;
	struct flow *flows = calloc(rs->n + 1, sizeof(*flows));
	struct session *sess = calloc(rs->n + 1, sizeof(*sess));
	uint64_t now = sl_now_ns();
	size_t nf = 0, ns = 0;

	if (!flows || !sess) {
		pr_err("cluster: out of memory: the flows keep their old list");
		free(flows);
		free(sess);
		return;
	}
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < rs->n; i++) {
		const struct sl_rule *r = &rs->rules[i];
		struct flow *f = &flows[nf], *old;
		struct session *s;

		if (!r->cluster.enabled)
			continue;
		old = find_flow(c, r);
		if (old) {
			*f = *old;
		} else {
			snprintf(f->rule, sizeof(f->rule), "%s", r->name);
			sl_lease_boot(&f->l, r, c->node, map_limit(c, i), now);
		}
		if (sl_rule_copy(&f->r, r)) {
			pr_err("cluster: out of memory: rule '%s' is not "
			       "synced", r->name);
			sl_rule_release(&f->r);
			continue;
		}
		f->idx = i;
		sl_lease_refresh(&f->l, r, c->node);
		f->l.dirty = true;
		s = find_sess(sess, ns, r->cluster.ns);
		if (!s) {
			struct session *o = find_sess(c->sess, c->n_sess,
						      r->cluster.ns);

			s = &sess[ns++];
			if (o) {
				*s = *o;
				o->alive = true;
			} else if (sess_init(c, s, r->cluster.ns)) {
				ns--;
				sl_rule_release(&f->r);
				continue;
			}
		}
		f->sess = s - sess;
		nf++;
	}
	for (size_t i = 0; i < c->n_sess; i++) {
		if (c->sess[i].alive)
			continue;
		cluster_sess_close(c, &c->sess[i]);
		sess_free(&c->sess[i]);
	}
	for (size_t i = 0; i < ns; i++)
		sess[i].alive = false;
	for (size_t i = 0; i < c->n_flows; i++)
		sl_rule_release(&c->flows[i].r);
	free(c->flows);
	free(c->sess);
	c->flows = flows;
	c->n_flows = nf;
	c->sess = sess;
	c->n_sess = ns;
	c->gen++;
	write_limits(c, now);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Demand and use per second over the rule's sliding window, the time
 * scale on which the data plane holds the grant. A sync period's own rate
 * follows every burst and stall of the sender, and a grant that follows
 * it dips under the traffic every other sync (docs/cluster.md).
 */
void cluster_measure(struct sl_cluster_sync *c, struct flow *f)
{
	struct sl_rule_stats st;
	bool bytes = f->r.grade == SL_GRADE_BPS;

	if (sl_dp_rule_stats(c->dp, f->idx, &st))
		return;
	f->used = bytes ? st.passed_Bps : st.passed_pps;
	f->demand = f->used + (bytes ? st.blocked_Bps : st.blocked_pps);
}

static void *run(void *arg)
{
	struct sl_cluster_sync *c = arg;
	struct pollfd *pfd = NULL;
	size_t cap = 0;

	while (!c->stop) {
		struct sl_lease_cfg lc = { .miss_limit = c->cfg.miss_limit,
					   .good_needed = c->cfg.good_needed };
		uint64_t now, next;
		size_t n = 0;
		int timeout;

		pthread_mutex_lock(c->dp_lock);
		pthread_mutex_lock(&c->lock);
		now = sl_now_ns();
		next = now + 50 * NSEC_PER_MSEC;
		reap_abandoned(c);
		if (cap < c->n_sess + 1) {
			free(pfd);
			cap = c->n_sess + 1;
			pfd = calloc(cap, sizeof(*pfd));
			if (!pfd)
				cap = 0;
		}
		for (size_t i = 0; i < c->n_sess && cap; i++) {
			struct session *s = &c->sess[i];
			uint64_t t = cluster_sess_drive(c, s, now);

			if (s->fd >= 0 && s->out_len && cluster_sess_flush(s))
				cluster_sess_fail(c, s, now, false, "send: %s",
						  strerror(errno));
			if (t < next)
				next = t;
			if (s->fd < 0)
				continue;
			pfd[n].fd = s->fd;
			pfd[n].events = POLLIN;
			if (s->st == SESS_CONNECTING || s->out_len)
				pfd[n].events |= POLLOUT;
			n++;
		}
		for (size_t i = 0; i < c->n_flows; i++) {
			lc.sync_ms = c->sess[c->flows[i].sess].sync_ms;
			sl_lease_tick(&c->flows[i].l, &c->flows[i].r, c->node,
				      &lc, now);
		}
		write_limits(c, now);
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(c->dp_lock);

		if (!cap) {
			usleep(10000);
			continue;
		}
		pfd[n].fd = c->wake_fd;
		pfd[n].events = POLLIN;
		now = sl_now_ns();
		timeout = next > now ? (next - now + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC
				     : 0;
		if (poll(pfd, n + 1, timeout) <= 0)
			continue;

		pthread_mutex_lock(c->dp_lock);
		pthread_mutex_lock(&c->lock);
		now = sl_now_ns();
		for (size_t i = 0; i < n; i++) {
			struct session *s = NULL;

			for (size_t j = 0; j < c->n_sess; j++)
				if (c->sess[j].fd == pfd[i].fd)
					s = &c->sess[j];
			if (!s || !pfd[i].revents)
				continue;
			if (s->st == SESS_CONNECTING &&
			    (pfd[i].revents & (POLLOUT | POLLERR | POLLHUP)))
				cluster_sess_hello(c, s, now);
			if (s->st != SESS_IDLE &&
			    (pfd[i].revents & (POLLIN | POLLERR | POLLHUP)))
				cluster_sess_read(c, s, now);
		}
		write_limits(c, now);
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(c->dp_lock);
		if (pfd[n].revents) {
			uint64_t v;

			if (read(c->wake_fd, &v, sizeof(v)) < 0)
				continue;
		}
	}
	free(pfd);
	return NULL;
}

int sl_cluster_start(struct sl_cluster_sync *c)
{
	int err = pthread_create(&c->thread, NULL, run, c);

	if (err)
		return -err;
	c->running = true;
	return 0;
}

void sl_cluster_free(struct sl_cluster_sync *c)
{
	uint64_t one = 1;

	if (!c)
		return;
	if (c->running) {
		c->stop = true;
		if (write(c->wake_fd, &one, sizeof(one)) < 0)
			pr_warn("cluster: cannot wake the sync thread");
		pthread_join(c->thread, NULL);
	}
	c->dp->first_limit = NULL;
	for (size_t i = 0; i < c->n_sess; i++) {
		cluster_sess_close(c, &c->sess[i]);
		sess_free(&c->sess[i]);
	}
	free(c->sess);
	/* a lookup glibc still runs is left to the exit */
	reap_abandoned(c);
	for (size_t i = 0; i < c->n_flows; i++)
		sl_rule_release(&c->flows[i].r);
	free(c->flows);
	free(c->reports);
	close(c->wake_fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}
