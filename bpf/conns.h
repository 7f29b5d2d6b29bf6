/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The conns grade: TCP connections open at once, per rule or per source
 * (docs/rules.md "conns"). A SYN takes a place of count and its
 * connection an entry in conn_table (one for the connection, holding its
 * place in each layer's conns rule); the connection gives them back
 * when a FIN or RST is seen either way (XDP, or the egress program), or
 * when the agent's sweep (sluice_conns_sweep) finds it silent for the
 * rule's idle timeout, or a client that never acknowledged the handshake
 * for SLUICE_CONN_SYN_TIMEOUT_NS.
 *
 * Whoever deletes an entry gives its place back, so it is given back
 * once. Nothing is evicted: a rule holds at most count entries (the rule
 * check keeps a set's total within the table), so a SYN flood can only
 * fill its own rule's places, never push out a counted connection.
 * The counts are written per SYN and per close, never per segment; a
 * connection's idle clock at most every SLUICE_CONN_TOUCH_NS, on the
 * line of the one connection.
 */
#ifndef SLUICE_CONNS_H
#define SLUICE_CONNS_H

_Static_assert((SLUICE_LAYERS & (SLUICE_LAYERS - 1)) == 0,
	       "a layer index is masked by SLUICE_LAYERS - 1");

struct bpf_map;

/* Whether a stamp last is timeout or more before the sweep's clock now.
 * A stamp after now (the walk spans ticks, and a segment may stamp an
 * entry meanwhile) is fresh, not 2^64 ns old. */
static __always_inline bool sweep_stale(__u64 now, __u64 last, __u64 timeout)
{
	return last < now && now - last >= timeout;
}

/* Give a place back; never below 0 (a close that raced the sweep). */
static __always_inline void count_down(__u64 *open)
{
	if (__sync_fetch_and_add(open, -1) == 0)
		__sync_fetch_and_add(open, 1);
}

/* The configuration of the conns rule that counted with epoch in slot,
 * while it is in a rule set; else NULL. */
static __always_inline struct sluice_rule_cfg *conns_rule_live(__u32 slot,
							      __u32 epoch)
{
	struct sluice_rule_cfg *cfg = bpf_map_lookup_elem(&rule_cfg, &slot);
	struct sluice_rule_meta *meta = bpf_map_lookup_elem(&rule_meta, &slot);

	if (!cfg || !meta || !meta->set_mask ||
	    cfg->grade != SLUICE_GRADE_CONNS || cfg->conn_epoch != epoch)
		return NULL;
	return cfg;
}

/*
 * The place of a deleted connection from client (family, address words
 * a01, a23), given back to the rule in slot (and its source, or the
 * overflow's count) while the rule that counted it still holds the
 * slot. A global function of scalars: verified once, not on every path
 * of the callers that loop over a connection's layers.
 */
__noinline int conn_uncount(__u64 a01, __u64 a23, __u32 family, __u32 slot,
			    __u64 epoch_overflow)
{
	__u32 epoch = epoch_overflow, a[4];
	struct sluice_rule_cfg *cfg = conns_rule_live(slot, epoch);
	struct sluice_conn_count *n;
	struct sluice_src_key key;

	if (!cfg)
		return 0;
	/* a per_source rule counts its sources' connections too */
	n = bpf_map_lookup_elem(&conn_rule, &slot);
	if (n)
		count_down(&n->open);
	if (!(cfg->flags & SLUICE_RULE_PER_SOURCE))
		return 0;
	__builtin_memcpy(a, &a01, sizeof(a01));
	__builtin_memcpy(a + 2, &a23, sizeof(a23));
	source_key_of(&key, slot, family, a, cfg);
	if (epoch_overflow >> 32) {
		__builtin_memset(key.addr, 0, sizeof(key.addr));
		key.family = SLUICE_SRC_OVERFLOW_FAMILY;
	}
	n = bpf_map_lookup_elem(&conn_sources, &key);
	if (n && n->epoch == epoch)
		count_down(&n->open);
	return 0;
}

/* conn_uncount() of connection k's place in slot. */
static __always_inline void uncount(const struct sluice_conn_key *k,
				    __u32 slot, __u32 epoch, bool overflow)
{
	__u64 a[2];

	__builtin_memcpy(a, k->client, sizeof(a));
	conn_uncount(a[0], a[1], k->family, slot,
		     epoch | (__u64)overflow << 32);
}

/* Forget connection k and give its places back. */
static __always_inline void conn_close(const struct sluice_conn_key *k)
{
	struct sluice_conn_open *c = bpf_map_lookup_elem(&conn_table, k);
	struct sluice_conn_open held;

	if (!c)
		return;
	/* read before the delete: the element may be reused after it */
	__builtin_memcpy(&held, c, sizeof(held));
	if (bpf_map_delete_elem(&conn_table, k))
		return;
#pragma unroll
	for (int i = 0; i < SLUICE_LAYERS; i++)
		if (held.slot[i])
			uncount(k, held.slot[i] - 1, held.epoch[i],
				held.overflow[i]);
}

/* The entry of key in conn_sources for a rule of epoch, made when
 * missing; *made says so. NULL when it cannot be. */
static __always_inline struct sluice_conn_count *
conn_source_entry(const struct sluice_src_key *key, __u32 epoch, __u64 now,
		  bool *made)
{
	struct sluice_conn_count *n = bpf_map_lookup_elem(&conn_sources, key);
	struct sluice_conn_count fresh = { .epoch = epoch, .last_ns = now };
	long err;

	*made = false;
	if (n && n->epoch == epoch)
		return n;
	/* the slot's previous rule's: not this rule's count */
	if (n)
		bpf_map_delete_elem(&conn_sources, key);
	err = bpf_map_update_elem(&conn_sources, key, &fresh, BPF_NOEXIST);
	*made = !err;
	if (err && err != -EEXIST)
		return NULL;
	n = bpf_map_lookup_elem(&conn_sources, key);
	return n && n->epoch == epoch ? n : NULL;
}

/*
 * The count a new connection of a per_source rule goes to: its
 * source's, which takes an entry while the rule has fewer than
 * max_sources, or else the rule's overflow count that the sources
 * beyond share (as a per_source rate's overflow budget). Fills src.
 */
static __always_inline struct sluice_conn_count *
conn_source(const struct sluice_conn_key *k,
	    const struct sluice_rule_cfg *cfg, __u32 slot,
	    struct sluice_conn_count *rule, struct sluice_src_key *src,
	    __u64 now)
{
	struct sluice_conn_count *n;
	bool made;

	source_key_of(src, slot, k->family, k->client, cfg);
	n = bpf_map_lookup_elem(&conn_sources, src);
	if (!n || n->epoch != cfg->conn_epoch) {
		n = NULL;
		/* a plain read first: a full rule costs no shared write */
		if (READ_ONCE(rule->sources) < cfg->max_sources) {
			if (__sync_fetch_and_add(&rule->sources, 1) <
			    cfg->max_sources) {
				n = conn_source_entry(src, cfg->conn_epoch,
						      now, &made);
				if (!made)
					count_down(&rule->sources);
			} else {
				count_down(&rule->sources);
			}
		}
		if (!n) {
			__builtin_memset(src->addr, 0, sizeof(src->addr));
			src->family = SLUICE_SRC_OVERFLOW_FAMILY;
			n = conn_source_entry(src, cfg->conn_epoch, now,
					      &made);
		}
	}
	/* the sweep keeps a source that opened a connection lately */
	if (n && now - READ_ONCE(n->last_ns) >= SLUICE_CONN_TOUCH_NS)
		WRITE_ONCE(n->last_ns, now);
	return n;
}

/* A place of count for a new connection k of slot: the count it went
 * to (the rule's, or a per_source rule's source's, *overflow when that
 * is the overflow's; *rule the rule's, which counts it too), or NULL. */
static __always_inline struct sluice_conn_count *
conn_take(const struct sluice_conn_key *k, const struct sluice_rule_cfg *cfg,
	  __u32 slot, bool *overflow, __u64 now,
	  struct sluice_conn_count **rule)
{
	__u64 *limit = bpf_map_lookup_elem(&rule_limit, &slot);
	struct sluice_conn_count *n;
	struct sluice_src_key src;

	*overflow = false;
	*rule = bpf_map_lookup_elem(&conn_rule, &slot);
	n = *rule;
	if (!n || !limit)
		return NULL;
	if (cfg->flags & SLUICE_RULE_PER_SOURCE) {
		n = conn_source(k, cfg, slot, *rule, &src, now);
		*overflow = src.family == SLUICE_SRC_OVERFLOW_FAMILY;
	}
	if (!n)
		return NULL;
	/* a plain read first: a SYN flood at a full rule writes nothing */
	if (READ_ONCE(n->open) >= *limit)
		return NULL;
	if (__sync_fetch_and_add(&n->open, 1) >= *limit) {
		count_down(&n->open);
		return NULL;
	}
	if (n != *rule)
		__sync_fetch_and_add(&(*rule)->open, 1);
	return n;
}

/* A new entry for connection k with its place in slot's rule, taken
 * before: 0, or -EEXIST when another CPU's copy of this SYN made it
 * first, or another error (the table full). */
static __always_inline long conn_entry_new(const struct sluice_conn_key *k,
					   __u32 slot, __u32 epoch,
					   bool overflow, __u64 now)
{
	__u32 zero = 0;
	struct sluice_conn_open *c = bpf_map_lookup_elem(&conn_new, &zero);

	if (!c)
		return -ENOMEM;
	__builtin_memset(c, 0, sizeof(*c));
	c->last_ns = now;
	c->slot[0] = slot + 1;
	c->epoch[0] = epoch;
	c->overflow[0] = overflow;
	return bpf_map_update_elem(&conn_table, k, c, BPF_NOEXIST);
}

/* The layer index of slot's place in c, or of a free one (stale places
 * of rules no longer in their slot are free); -1 when none. */
static __always_inline int conn_place(const struct sluice_conn_open *c,
				      __u32 slot, __u32 epoch, bool *held)
{
	int free = -1;

	*held = false;
#pragma unroll
	for (int i = 0; i < SLUICE_LAYERS; i++) {
		if (c->slot[i] == slot + 1 && c->epoch[i] == epoch) {
			*held = true;
			return i;
		}
		if (free < 0 && (!c->slot[i] || c->slot[i] == slot + 1))
			free = i;
	}
	return free;
}

/* judge_conns()'s answer: the segment passes; its connection ends here
 * (a FIN or RST: the caller's conn_close_frame()); it took a new place
 * (a SYN), which a later layer's refusal gives back */
#define CONNS_PASS  0x1
#define CONNS_CLOSE 0x2
#define CONNS_TOOK  0x4

/*
 * A TCP segment of a conns rule in slot: CONNS_PASS to pass it, not for
 * a SYN refused (count reached, or no place to count it). A global
 * function, verified once, of scalar arguments; it parses the frame
 * itself. The close is the caller's, in a frame of its own: 6.1's 512
 * bytes along a call chain have no room for it here.
 */
__noinline int judge_conns(struct xdp_md *ctx, __u32 slot, __u32 port_key)
{
	struct sluice_rule_cfg *cfg = bpf_map_lookup_elem(&rule_cfg, &slot);
	struct sluice_conn_key k = {};
	struct sluice_conn_count *n, *rule;
	struct sluice_conn_open *e;
	bool held, overflow;
	struct tcphdr *th;
	__u64 now;
	__s32 len;
	long err;
	__u8 flags;
	int i;

	if (!cfg)
		return CONNS_PASS;
	th = conn_in((void *)(long)ctx->data, (void *)(long)ctx->data_end, &k,
		     &len);
	if (!th) {
		/* a SYN that would go uncounted must not open a
		 * connection past count */
		if (!port_key_is_syn(port_key))
			return CONNS_PASS;
		host_stat(SLUICE_ST_CONN_UNTRACKED);
		return 0;
	}
	flags = ((__u8 *)th)[13];
	if (flags & (TCPF_FIN | TCPF_RST))
		return CONNS_PASS | CONNS_CLOSE;
	now = sluice_now_coarse();
	e = bpf_map_lookup_elem(&conn_table, &k);
	i = e ? conn_place(e, slot, cfg->conn_epoch, &held) : 0;
	if (e && held) {
		/* a retransmitted SYN, or the connection's next segment */
		if (!(flags & TCPF_SYN) && !e->acked)
			e->acked = 1;
		if (now - READ_ONCE(e->last_ns) >= SLUICE_CONN_TOUCH_NS)
			WRITE_ONCE(e->last_ns, now);
		return CONNS_PASS;
	}
	/* a segment of a connection the rule did not see open */
	if ((flags & (TCPF_SYN | TCPF_ACK)) != TCPF_SYN)
		return CONNS_PASS;
	if (i < 0 || i >= SLUICE_LAYERS)
		return 0;
	n = conn_take(&k, cfg, slot, &overflow, now, &rule);
	if (!n)
		return 0;
	if (e) {
		/* another layer's rule counted this SYN first; the mask
		 * for 6.1's verifier, which loses i's bounds in a spill */
		asm volatile("" : "+r"(i));
		i &= SLUICE_LAYERS - 1;
		e->slot[i] = slot + 1;
		e->epoch[i] = cfg->conn_epoch;
		e->overflow[i] = overflow;
		return CONNS_PASS | CONNS_TOOK;
	}
	err = conn_entry_new(&k, slot, cfg->conn_epoch, overflow, now);
	if (!err)
		return CONNS_PASS | CONNS_TOOK;
	/* the place just taken, back on the counts it came from */
	count_down(&n->open);
	if (n != rule)
		count_down(&rule->open);
	if (err == -EEXIST)
		return CONNS_PASS;
	host_stat(SLUICE_ST_CONN_TABLE_FULL);
	return 0;
}

/* Close the connection of the segment in ctx (judge_conns() says when):
 * a global function, its frame beside judge_conns()'s, not under it. */
__noinline int conn_close_frame(struct xdp_md *ctx)
{
	struct sluice_conn_key k = {};
	__s32 len;

	if (conn_in((void *)(long)ctx->data, (void *)(long)ctx->data_end, &k,
		    &len))
		conn_close(&k);
	return 0;
}

/* A server's segment on egress: a FIN or RST closes its connection,
 * anything else keeps it from idling out. A global function: its frame
 * apart from the breaker's in sluice_egress. */
__noinline int conns_egress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct sluice_conn_key k = {};
	struct sluice_conn_open *e;
	struct tcphdr *th;
	__u32 a[4];
	__u16 port;
	__s32 len;
	__u64 now;

	if (!(needs_l4[set_gen & 1] & SLUICE_NEED_CONNS))
		return 0;
	th = conn_in(data, data_end, &k, &len);
	if (!th)
		return 0;
	/* its destination is the client */
	__builtin_memcpy(a, k.client, sizeof(a));
	__builtin_memcpy(k.client, k.server, sizeof(a));
	__builtin_memcpy(k.server, a, sizeof(a));
	port = k.client_port;
	k.client_port = k.server_port;
	k.server_port = port;
	if (((__u8 *)th)[13] & (TCPF_FIN | TCPF_RST)) {
		conn_close(&k);
		return 0;
	}
	e = bpf_map_lookup_elem(&conn_table, &k);
	now = sluice_now_coarse();
	if (e && now - READ_ONCE(e->last_ns) >= SLUICE_CONN_TOUCH_NS)
		WRITE_ONCE(e->last_ns, now);
	return 0;
}

/* ---- the sweep: run by the agent every second ----------------------- */

struct conns_sweep {
	__u64 now;
};

static long sweep_conn(struct bpf_map *map, struct sluice_conn_key *k,
		       struct sluice_conn_open *c, struct conns_sweep *s)
{
	struct sluice_conn_open held;
	struct sluice_rule_cfg *cfg;
	__u64 timeout = 0, idle;
	bool live = false;

	__builtin_memcpy(&held, c, sizeof(held));
	/* counted by several layers' rules: the longest idle timeout */
#pragma unroll
	for (int i = 0; i < SLUICE_LAYERS; i++) {
		cfg = held.slot[i] ? conns_rule_live(held.slot[i] - 1,
						     held.epoch[i])
				   : NULL;
		if (!cfg)
			continue;
		live = true;
		idle = cfg->conn_idle_s * 1000000000ULL;
		if (idle > timeout)
			timeout = idle;
	}
	if (!held.acked)
		timeout = SLUICE_CONN_SYN_TIMEOUT_NS;
	if (live && !sweep_stale(s->now, READ_ONCE(c->last_ns), timeout))
		return 0;
	if (bpf_map_delete_elem(map, k))
		return 0;
#pragma unroll
	for (int i = 0; i < SLUICE_LAYERS; i++)
		if (held.slot[i])
			uncount(k, held.slot[i] - 1, held.epoch[i],
				held.overflow[i]);
	return 0;
}

/* A source without connections, unheard of for two touches, leaves
 * conn_sources; as does one of a rule no longer in its slot. */
static long sweep_source(struct bpf_map *map, struct sluice_src_key *key,
			 struct sluice_conn_count *n, struct conns_sweep *s)
{
	__u32 slot = key->rule, epoch = n->epoch;
	struct sluice_conn_count *rule = bpf_map_lookup_elem(&conn_rule, &slot);
	bool live = conns_rule_live(slot, epoch);

	if (live && (READ_ONCE(n->open) ||
		     !sweep_stale(s->now, READ_ONCE(n->last_ns),
				  4 * SLUICE_CONN_TOUCH_NS)))
		return 0;
	if (!bpf_map_delete_elem(map, key) && live && rule &&
	    key->family != SLUICE_SRC_OVERFLOW_FAMILY)
		count_down(&rule->sources);
	return 0;
}

static __always_inline void conns_sweep(void)
{
	struct conns_sweep s = { .now = sluice_now_coarse() };

	bpf_for_each_map_elem(&conn_table, sweep_conn, &s, 0);
	bpf_for_each_map_elem(&conn_sources, sweep_source, &s, 0);
}

#endif
