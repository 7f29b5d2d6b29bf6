// SPDX-License-Identifier: GPL-2.0
/*
 * The token server: workers on epoll with non-blocking sockets, and a
 * balancer. Every flow keeps its live lease holders; the sum of their
 * unexpired grants never exceeds count (docs/cluster.md). This file: the
 * worker threads and their commands, the server's start, stats and end
 * (the locks and the other files: tokensrv_int.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "tokensrv_int.h"

void sl_tokend_cfg_default(struct sl_tokend_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->ttl_ms = SL_TOKEND_TTL_MS;
	cfg->sync_ms = SL_TOKEND_SYNC_MS;
	cfg->learn_ms = SL_TOKEND_TTL_MS;
	cfg->max_conns = SL_TOKEND_MAX_CONNS;
	cfg->max_handshakes = SL_TOKEND_MAX_HANDSHAKES;
	cfg->ns_rate = SL_TOKEND_NS_RATE;
	cfg->out_max = SL_TOKEND_OUT_MAX;
	cfg->handshake_ms = SL_TOKEND_HANDSHAKE_MS;
	cfg->rebalance_ms = SL_TOKEND_REBALANCE_MS;
	cfg->max_nodes = SL_TOKEND_MAX_NODES;
	cfg->threads = SL_TOKEND_THREADS;
	cfg->forget_ms = SL_TOKEND_FORGET_MS;
}

void ts_lock_all(struct sl_tokend *td)
{
	for (uint32_t i = 0; i < td->n_w; i++)
		pthread_mutex_lock(&td->w[i].lock);
	pthread_mutex_lock(&td->bal_lock);
}

void ts_unlock_all(struct sl_tokend *td)
{
	pthread_mutex_unlock(&td->bal_lock);
	for (uint32_t i = td->n_w; i--;)
		pthread_mutex_unlock(&td->w[i].lock);
}

/* Every flow's holders and reservations, each under its flow's locks. */
static void forget_flows(struct sl_tokend *td)
{
	for (uint32_t i = 0; i < td->n_ns; i++) {
		for (uint32_t j = 0; j < td->ns[i].n_flows; j++) {
			ts_forget_flow(&td->ns[i].flows[j]);
		}
	}
}

/* The command to every other worker. */
static void tell_workers(struct worker *w, char cmd)
{
	for (uint32_t i = 0; i < w->td->n_w; i++)
		if (&w->td->w[i] != w)
			ts_command_worker(&w->td->w[i], cmd);
}

/* Push TTL 0 to w's clients; later SYNCs get the same. */
static void drain_conns(struct worker *w)
{
	struct view v;
	struct conn *c, *next;

	ts_view_get(w->td, &v);
	for (c = w->conns; c; c = next) {
		next = c->next;
		if (c->state != CONN_READY)
			continue;
		ts_send_or_close(
		    w, c, ts_put_frame_grants(w, &v, c, 0, SL_SRV_DRAIN, 0, 0));
	}
}

/* Every lease ends now (worker 0): SYNCs are answered DRAIN from here. */
static void drain(struct worker *w)
{
	struct sl_tokend *td = w->td;

	pthread_mutex_lock(&td->role_lock);
	if (td->in_force.draining) {
		pthread_mutex_unlock(&td->role_lock);
		return;
	}
	td->in_force.draining = true;
	ts_view_changed(td);
	pthread_mutex_unlock(&td->role_lock);
	pr_info("tokend: draining: every lease ends now");
	drain_conns(w);
	tell_workers(w, 'D');
	forget_flows(td);
}

/* Every READY client of w goes to the leader there is. */
static void redirect_conns(struct worker *w, uint64_t now)
{
	struct conn *c, *next;
	struct view v;

	ts_view_get(w->td, &v);
	for (c = w->conns; c; c = next) {
		next = c->next;
		if (c->state != CONN_READY)
			continue;
		ts_send_or_close(w, c, ts_redirect_conn(w, &v, c, 0, now));
	}
}

/*
 * The role asked for, acted on by worker 0. A new term forgets every
 * holder, as a restarted server knows none, and learns for learn_ms:
 * clients may still hold the last leader's leases; only then are SYNCs
 * answered under it. Deposed, every client goes to the leader there is.
 */
static void on_role(struct worker *w, uint64_t now)
{
	struct sl_tokend *td = w->td;
	struct sl_tokend_role r;
	bool elected, deposed;

	pthread_mutex_lock(&td->role_lock);
	r = td->role;
	pthread_mutex_unlock(&td->role_lock);
	elected = r.leader && (!td->acted.leader || r.term != td->acted.term);
	deposed = !r.leader && td->acted.leader;
	if (elected) {
		forget_flows(td);
		td->terms++;
		pr_info("tokend: leader, term %llu: learning for %u ms",
			(unsigned long long)r.term, td->cfg.learn_ms);
	}
	pthread_mutex_lock(&td->role_lock);
	td->in_force.role = r;
	if (elected)
		td->in_force.start = now;
	ts_view_changed(td);
	pthread_mutex_unlock(&td->role_lock);
	if (deposed) {
		pr_info("tokend: no longer the leader (term %llu): "
			"redirecting clients to '%s'",
			(unsigned long long)td->acted.term, r.leader_addr);
		redirect_conns(w, now);
		tell_workers(w, 'X');
	}
	td->acted = r;
}

/* w's sessions whose node id a newer session took: told and closed. */
static void close_replaced(struct worker *w, uint64_t now)
{
	struct conn *c, *next;

	for (c = w->conns; c; c = next) {
		next = c->next;
		if (LOAD(c->replaced) && c->state != CONN_CLOSING)
			ts_send_or_close(
			    w, c, ts_fail_conn(w, c, 0, SL_ERR_REPLACED, now));
	}
}

static void on_ctl(struct worker *w, uint64_t now)
{
	char cmd[64];
	ssize_t n = read(w->ctl[0], cmd, sizeof(cmd));
	bool first = w == w->td->w;

	for (ssize_t i = 0; i < n; i++) {
		switch (cmd[i]) {
		case SL_TOKEND_DRAIN:
			if (first)
				drain(w);
			break;
		case SL_TOKEND_STOP:
			w->stopping = true;
			break;
		case SL_TOKEND_ROLE:
			if (first)
				on_role(w, now);
			break;
		case 'D': /* worker 0 drained: this one's clients */
			drain_conns(w);
			break;
		case 'X': /* worker 0 was deposed: this one's clients */
			redirect_conns(w, now);
			break;
		case 'a':
			ts_adopt(w, now);
			break;
		case 'p':
			close_replaced(w, now);
			break;
		}
	}
}

/* Deadlines of w's connections, a few times per TTL. */
static void sweep(struct worker *w, uint64_t now)
{
	struct conn *c, *next;

	for (c = w->conns; c; c = next) {
		next = c->next;
		if (!c->deadline || now < c->deadline)
			continue;
		w->st.timed_out++;
		if (c->state == CONN_CLOSING)
			ts_conn_close(w, c);
		else
			ts_send_or_close(
			    w, c, ts_fail_conn(w, c, 0, SL_ERR_TIMEOUT, now));
	}
	w->last_sweep = now;
}

/* Serve until stopped; then tell connected clients, best effort. */
static int worker_loop(struct worker *w)
{
	struct sl_tokend *td = w->td;
	struct epoll_event ev[EVENTS];
	int ret = 0;

	while (!w->stopping) {
		uint64_t now;
		int n, i;

		n = epoll_wait(w->epfd, ev, EVENTS, td->tick);
		if (n < 0 && errno != EINTR) {
			ret = -errno;
			break;
		}
		pthread_mutex_lock(&w->lock);
		now = sl_now_ms();
		for (i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;

			if (p == &td->lfd)
				ts_on_accept(w, now);
			else if (p == &w->ctl)
				on_ctl(w, now);
			else
				ts_on_conn_event(w, p, ev[i].events, now);
		}
		if (td->accept_paused_until && w == td->w &&
		    now >= td->accept_paused_until)
			ts_accept_resume(w);
		if (now - w->last_sweep >= (uint64_t)td->tick)
			sweep(w, now);
		ts_reap(w);
		pthread_mutex_unlock(&w->lock);
	}
	pthread_mutex_lock(&w->lock);
	ts_adopt(w, sl_now_ms()); /* handed over at the last moment */
	while (w->conns) {
		struct conn *c = w->conns;

		if (c->state == CONN_READY &&
		    !ts_fail_conn(w, c, 0, SL_ERR_SHUTDOWN, sl_now_ms()))
			ts_flush(c);
		ts_conn_close(w, c);
	}
	ts_reap(w);
	pthread_mutex_unlock(&w->lock);
	return ret;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int ret = worker_loop(w);

	if (ret)
		pr_err("tokend: worker: epoll: %s", strerror(-ret));
	return NULL;
}

int sl_tokend_run(struct sl_tokend *td)
{
	uint32_t started = 1;
	bool balancer;
	int ret = 0;
	char b = 's';

	balancer = !pthread_create(&td->bal_thread, NULL, ts_balancer_main, td);
	if (balancer)
		pthread_setname_np(td->bal_thread, "tokend-balance");
	for (; balancer && started < td->n_w; started++) {
		char name[16];

		if (pthread_create(&td->w[started].thread, NULL, worker_main,
				   &td->w[started]))
			break;
		/* top -H and the benchmarks tell the threads apart */
		snprintf(name, sizeof(name), "tokend-w%u",
			 started % SL_TOKEND_MAX_THREADS);
		pthread_setname_np(td->w[started].thread, name);
	}
	if (!balancer || started < td->n_w) {
		pr_err("tokend: cannot start %u threads", td->n_w + 1);
		ret = -EAGAIN;
		td->w[0].stopping = true;
	}
	if (!ret)
		ret = worker_loop(&td->w[0]);
	for (uint32_t i = 1; i < started; i++) {
		ts_command_worker(&td->w[i], SL_TOKEND_STOP);
		pthread_join(td->w[i].thread, NULL);
	}
	if (balancer) {
		if (write(td->bal_ctl[1], &b, 1) < 0)
			pr_debug("tokend: balancer: %s", strerror(errno));
		pthread_join(td->bal_thread, NULL);
	}
	return ret;
}

void ts_command_worker(struct worker *w, char cmd)
{
	ssize_t n = write(w->ctl[1], &cmd, 1);

	(void)n; /* a full pipe already holds a command to act on */
}

void sl_tokend_command(struct sl_tokend *td, enum sl_tokend_cmd cmd)
{
	ts_command_worker(&td->w[0], cmd);
}

/* ---- setup ---- */

static int parse_listen(const char *s, struct sockaddr_storage *ss,
			socklen_t *sl, char *err, size_t errlen)
{
	if (!s || sl_parse_sockaddr(s, ss, sl)) {
		snprintf(err, errlen,
			 "listen address '%s': expected ADDR:PORT with a "
			 "numeric address ([ADDR6]:PORT for IPv6, port "
			 "0-65535)", s ? s : "");
		return -EINVAL;
	}
	return 0;
}
/* Worker i's epoll, control pipe and buffers; -errno. */
static int worker_init(struct sl_tokend *td, uint32_t i)
{
	struct worker *w = &td->w[i];
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &w->ctl};

	w->td = td;
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->inbox_lock, NULL);
	w->last_sweep = sl_now_ms();
	w->grants = calloc(SL_PROTO_MAX_REPORTS, sizeof(*w->grants));
	if (!w->grants)
		return -ENOMEM;
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0 || pipe2(w->ctl, O_NONBLOCK | O_CLOEXEC) ||
	    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->ctl[0], &ev))
		return -errno;
	return 0;
}

static void worker_free(struct worker *w)
{
	while (w->conns)
		ts_conn_close(w, w->conns);
	while (w->inbox) {
		struct conn *c = w->inbox;

		w->inbox = c->next;
		ts_conn_link(w, c);
		ts_conn_close(w, c);
	}
	ts_reap(w);
	free(w->scratch);
	free(w->needs);
	free(w->grants);
	if (w->epfd >= 0)
		close(w->epfd);
	if (w->ctl[0] >= 0)
		close(w->ctl[0]);
	if (w->ctl[1] >= 0)
		close(w->ctl[1]);
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->inbox_lock);
}

int sl_tokend_new(const struct sl_tokend_cfg *cfg, const struct sl_ruleset *rs,
		  const struct sl_secrets *secrets, struct sl_tokend **out,
		  char *err, size_t errlen)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct sockaddr_storage ss;
	struct sl_tokend *td;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	socklen_t sl;
	int one = 1, ret;

	if (!cfg->ttl_ms || !cfg->sync_ms || cfg->sync_ms >= cfg->ttl_ms ||
	    !cfg->max_conns || !cfg->max_handshakes ||
	    cfg->out_max < 2 * SL_PROTO_MAX_FRAME ||
	    !cfg->handshake_ms || !cfg->max_nodes ||
	    cfg->threads > SL_TOKEND_MAX_THREADS) {
		snprintf(err, errlen,
			 "bad settings: need 0 < sync period < lease TTL, "
			 "max sessions, handshakes and nodes > 0, output "
			 "bound >= %u, threads <= %u",
			 2 * SL_PROTO_MAX_FRAME, SL_TOKEND_MAX_THREADS);
		return -EINVAL;
	}
	ret = parse_listen(cfg->listen, &ss, &sl, err, errlen);
	if (ret)
		return ret;
	if (!secrets && !sl_sockaddr_is_loopback((struct sockaddr *)&ss)) {
		snprintf(err, errlen,
			 "without --secrets clients are not authenticated: "
			 "listen on a loopback address only");
		return -EPERM;
	}
	td = calloc(1, sizeof(*td));
	if (!td)
		return -ENOMEM;
	td->cfg = *cfg;
	if (!td->cfg.threads)
		td->cfg.threads = cpus < 1 ? 1
				  : cpus > SL_TOKEND_MAX_THREADS
					  ? SL_TOKEND_MAX_THREADS
					  : cpus;
	td->tick = cfg->ttl_ms / 4;
	if (td->tick < 10)
		td->tick = 10;
	if (td->tick > 250)
		td->tick = 250;
	pthread_mutex_init(&td->bal_lock, NULL);
	pthread_mutex_init(&td->role_lock, NULL);
	td->auth = secrets != NULL;
	td->lfd = td->spare_fd = td->bal_ctl[0] = td->bal_ctl[1] = -1;
	td->w = aligned_alloc(_Alignof(struct worker),
			      td->cfg.threads * sizeof(*td->w));
	if (!td->w) {
		ret = -ENOMEM;
		goto fail;
	}
	memset(td->w, 0, td->cfg.threads * sizeof(*td->w));
	for (; td->n_w < td->cfg.threads; td->n_w++) {
		td->w[td->n_w].epfd = -1;
		td->w[td->n_w].ctl[0] = td->w[td->n_w].ctl[1] = -1;
		ret = worker_init(td, td->n_w);
		if (ret) {
			td->n_w++;
			snprintf(err, errlen, "epoll: %s", strerror(-ret));
			goto fail;
		}
	}
	if (pipe2(td->bal_ctl, O_NONBLOCK | O_CLOEXEC)) {
		ret = -errno;
		snprintf(err, errlen, "pipe: %s", strerror(-ret));
		goto fail;
	}
	ret = sl_proto_nonce(td->dummy_secret);
	if (ret) {
		snprintf(err, errlen, "no random bytes for the dummy secret");
		goto fail;
	}
	td->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (td->spare_fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "/dev/null: %s", strerror(-ret));
		goto fail;
	}
	td->secrets = secrets;
	ret = ts_build_flows(td, rs, &td->ns, &td->n_ns, err, errlen);
	if (ret)
		goto fail;
	if (!td->n_ns) {
		snprintf(err, errlen,
			 "no rule has a cluster object: nothing to serve");
		ret = -EINVAL;
		goto fail;
	}
	td->lfd = socket(ss.ss_family,
			 SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (td->lfd < 0 ||
	    setsockopt(td->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(td->lfd, (struct sockaddr *)&ss, sl) ||
	    listen(td->lfd, 4096) ||
	    getsockname(td->lfd, (struct sockaddr *)&ss, &sl)) {
		ret = -errno;
		snprintf(err, errlen, "listen on %s: %s", cfg->listen,
			 strerror(-ret));
		goto fail;
	}
	td->port = ntohs(ss.ss_family == AF_INET
				 ? ((struct sockaddr_in *)&ss)->sin_port
				 : ((struct sockaddr_in6 *)&ss)->sin6_port);
	/* worker 0 accepts and authenticates */
	ev.data.ptr = &td->lfd;
	if (epoll_ctl(td->w[0].epfd, EPOLL_CTL_ADD, td->lfd, &ev)) {
		ret = -errno;
		goto fail;
	}
	td->last_expire = td->last_gc = td->in_force.start = sl_now_ms();
	td->role.leader = td->acted.leader = td->in_force.role.leader =
		!cfg->elected;
	td->view_gen = 1; /* each worker copies it at its first SYNC */
	*out = td;
	return 0;
fail:
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	sl_tokend_free(td);
	return ret;
}

void sl_tokend_set_role(struct sl_tokend *td, const struct sl_tokend_role *r)
{
	struct sl_tokend_role *f = &td->in_force.role;

	pthread_mutex_lock(&td->role_lock);
	td->role = *r;
	/* a renewal (or a new leader's address) is in force at once; a
	 * change of term or leadership once worker 0 acted on it */
	if (r->leader == f->leader && r->term == f->term) {
		*f = *r;
		ts_view_changed(td);
	}
	pthread_mutex_unlock(&td->role_lock);
	sl_tokend_command(td, SL_TOKEND_ROLE);
}

uint16_t sl_tokend_port(const struct sl_tokend *td)
{
	return td->port;
}

int sl_tokend_set_secrets(struct sl_tokend *td,
			  const struct sl_secrets *secrets)
{
	if (!td->auth || !secrets)
		return -EINVAL;
	ts_lock_all(td);
	td->secrets = secrets;
	for (size_t i = 0; i < td->n_ns; i++) {
		struct ns *ns = &td->ns[i];

		ns->secret = sl_secrets_find(secrets, ns->name);
		if (!ns->secret)
			pr_warn("tokend: no secret for namespace '%s': its "
				"new clients will be refused", ns->name);
	}
	ts_unlock_all(td);
	return 0;
}

/* Every worker's counters, summed: under every lock. */
static void stats_sum(const struct sl_tokend *td, struct sl_tokend_stats *st)
{
	/* the counters before conns are uint64_t, summed as an array */
	const size_t n64 = offsetof(struct sl_tokend_stats, conns) /
			   sizeof(uint64_t);
	_Static_assert(offsetof(struct sl_tokend_stats, conns) %
				       sizeof(uint64_t) == 0,
		       "the stats' uint64_t counters come first");

	memset(st, 0, sizeof(*st));
	for (uint32_t i = 0; i < td->n_w; i++) {
		const uint64_t *src = (const uint64_t *)&td->w[i].st;

		for (size_t k = 0; k < n64; k++)
			((uint64_t *)st)[k] += src[k];
		st->conns += td->w[i].st.conns;
		st->handshakes += td->w[i].st.handshakes;
	}
	st->terms = td->terms;
	st->nodes_freed = td->nodes_freed;
}

int sl_tokend_get_info(struct sl_tokend *td, struct sl_tokend_info *out)
{
	uint64_t now = sl_now_ms();
	size_t n = 0;
	struct view v;

	memset(out, 0, sizeof(*out));
	/* under every lock: a rule change replaces namespaces and flows */
	ts_lock_all(td);
	for (uint32_t i = 0; i < td->n_ns; i++)
		n += td->ns[i].n_flows;
	out->flows = calloc(n ? n : 1, sizeof(*out->flows));
	out->ns = calloc(td->n_ns ? td->n_ns : 1, sizeof(*out->ns));
	if (!out->flows || !out->ns) {
		ts_unlock_all(td);
		sl_tokend_info_free(out);
		return -ENOMEM;
	}
	stats_sum(td, &out->st);
	ts_view_get(td, &v);
	out->serving = ts_serving(&v, now);
	out->learning = out->serving && now < v.start + td->cfg.learn_ms;
	out->draining = v.draining;
	out->term = v.role.term;
	for (uint32_t i = 0; i < td->n_ns; i++) {
		const struct ns *ns = &td->ns[i];

		strcpy(out->ns[i].name, ns->name);
		out->ns[i].nodes = ns->n_nodes;
		for (uint32_t j = 0; j < ns->n_flows; j++) {
			const struct flow *f = &ns->flows[j];
			struct sl_tokend_flow_info *o =
				&out->flows[out->n_flows++];

			strcpy(o->ns, ns->name);
			strcpy(o->rule, f->rule->name);
			o->flow_id = f->id;
			o->count = f->count;
			o->granted = ts_flow_granted(f);
			o->holders = f->n_live;
			o->vanished = f->n_gone;
			o->reserved = f->reserved;
		}
	}
	out->n_ns = td->n_ns;
	ts_unlock_all(td);
	return 0;
}

void sl_tokend_info_free(struct sl_tokend_info *info)
{
	free(info->flows);
	free(info->ns);
	info->flows = NULL;
	info->ns = NULL;
}

void sl_tokend_free(struct sl_tokend *td)
{
	if (!td)
		return;
	for (uint32_t i = 0; i < td->n_w; i++)
		worker_free(&td->w[i]);
	free(td->w);
	ts_free_flows(td->ns, td->n_ns);
	ts_free_nodes(td->ns, td->n_ns);
	free(td->ns);
	free(td->bal_scratch);
	free(td->bal_needs);
	if (td->lfd >= 0)
		close(td->lfd);
	if (td->spare_fd >= 0)
		close(td->spare_fd);
	for (int i = 0; i < 2; i++)
		if (td->bal_ctl[i] >= 0)
			close(td->bal_ctl[i]);
	pthread_mutex_destroy(&td->bal_lock);
	pthread_mutex_destroy(&td->role_lock);
	free(td);
}
