/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Circuit breaking (Sentinel 1.8's DegradeRule) over the answers of the
 * host's own service to a rule's requests. The requests are seen at XDP
 * (breaker_request()), the answers on egress (sluice_egress):
 *  - tcp: a request is a SYN; a SYN-ACK is a success, a RST with seq 0
 *    (the kernel's answer to a SYN that finds no listener) an error, and
 *    so is the SYN sent again (a timeout: see breaker_conns below);
 *  - udp: a request is a datagram; a datagram from the rule's port back
 *    is a success, an ICMP port unreachable quoting one an error;
 *  - slow_request_ratio (tcp): a request is a connection's first request,
 *    its response a success, or an error (slow) after max_rt_ms (see
 *    breaker_segment() below).
 *
 *  closed:    requests pass to admission; the answers of each
 *             stat_interval are counted, and with at least min_requests
 *             of them, errors over the threshold open the breaker;
 *  open:      every new request is failed fast (a SYN answered by a RST
 *             from XDP, or dropped) for open_ms, then the next one makes
 *             it half-open;
 *  half-open: `probes` requests pass, the rest fail fast; one probe
 *             answered by an error opens it again, all answered well
 *             close it; no verdict within open_ms opens it again.
 * Counting races between CPUs (a window that rolls while another CPU
 * counts) may lose an answer or two of a window: the ratio is a hint at
 * that precision, and every transition is made by one CAS.
 */
#ifndef SLUICE_BREAKER_H
#define SLUICE_BREAKER_H

#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include "maps.h"
#include "parse.h"
#include "admit.h"

_Static_assert(sizeof(struct sluice_breaker_cfg) == 48, "breaker_cfg layout");
_Static_assert(SLUICE_BRK_STATES <= SLUICE_BRK_STATE_MASK + 1,
	       "a state fits the state word's low bits");

/* The TTL (hop limit) of the RSTs sent from XDP, as Linux's default. */
#ifndef SLUICE_RST_TTL
#define SLUICE_RST_TTL 64
#endif

/* TCP flags in the header's 14th byte, and IPv4's don't-fragment bit */
#define TCPF_FIN 0x01
#define TCPF_SYN 0x02
#define TCPF_RST 0x04
#define TCPF_ACK 0x10
#define IP_DF	 0x4000

/* A SYN without ACK, from its port-table key (sluice_port_key()). */
static __always_inline bool port_key_is_syn(__u32 key)
{
	if (key >= SLUICE_FAM_SPACE)
		key -= SLUICE_FAM_SPACE;
	return key >> 16 == SLUICE_SLOT_TCP_SYN;
}

/* Move from state word s to state to; only the CPU whose CAS wins. */
static __always_inline bool brk_move(struct sluice_breaker *st, __u64 s,
				     __u32 to, __u64 now)
{
	__u64 next = ((s & ~SLUICE_BRK_STATE_MASK) +
		      (SLUICE_BRK_STATE_MASK + 1)) | to;

	if (__sync_val_compare_and_swap(&st->state, s, next) != s)
		return false;
	WRITE_ONCE(st->since_ns, now);
	__sync_fetch_and_add(&st->to_state[to], 1);
	return true;
}

/* Open -> half-open: the probes are set before the CAS publishes them
 * (nobody reads them while open). */
static __always_inline void brk_half_open(struct sluice_breaker *st, __u64 s,
					  const struct sluice_breaker_cfg *cfg,
					  __u64 now)
{
	WRITE_ONCE(st->probes_left, (__s64)cfg->probes);
	WRITE_ONCE(st->probe_ok, 0);
	brk_move(st, s, SLUICE_BRK_HALF_OPEN, now);
}

/* Half-open -> closed, with a fresh statistic. */
static __always_inline void brk_close(struct sluice_breaker *st, __u64 s,
				      const struct sluice_breaker_cfg *cfg,
				      __u64 now)
{
	WRITE_ONCE(st->win_id, now / cfg->stat_ns);
	WRITE_ONCE(st->answers, 0);
	WRITE_ONCE(st->errors, 0);
	WRITE_ONCE(st->requests, 0);
	brk_move(st, s, SLUICE_BRK_CLOSED, now);
}

/* ---- the RST sent while open ------------------------------------------ */

static __always_inline __u16 csum_fold(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

/* Sum of n 16-bit words (n constant: unrolled). */
static __always_inline __u64 csum_words(const void *p, int n)
{
	const __u16 *w = p;
	__u64 sum = 0;

#pragma unroll
	for (int i = 0; i < n; i++)
		sum += w[i];
	return sum;
}

static __always_inline void swap_macs(struct ethhdr *eth)
{
	__u8 tmp[ETH_ALEN];

	__builtin_memcpy(tmp, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, tmp, ETH_ALEN);
}

/* The RST|ACK that Linux sends for a SYN without a listener (seq 0, ack
 * the SYN's seq + its length); the frame is cut to its headers. */
static __always_inline void rst_tcp(struct tcphdr *out, const struct tcphdr *in,
				    __u32 seg_len)
{
	__builtin_memset(out, 0, sizeof(*out));
	out->source = in->dest;
	out->dest = in->source;
	out->ack_seq = bpf_htonl(bpf_ntohl(in->seq) + seg_len);
	out->doff = 5;
	out->rst = 1;
	out->ack = 1;
}

/* The frame cut to len bytes; data, data_end reloaded by the caller. */
static __always_inline int cut_to(struct xdp_md *ctx, __u32 len)
{
	__s32 extra = (__s32)(ctx->data_end - ctx->data) - (__s32)len;

	if (extra > 0 && bpf_xdp_adjust_tail(ctx, -extra))
		return -1;
	return 0;
}

static __always_inline int rst_v4(struct xdp_md *ctx, __u32 l3)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *iph = data + l3, ip;
	struct tcphdr *th = data + l3 + sizeof(ip), tcp, in;
	__u32 seg, addr;
	__u64 sum;

	if ((void *)(th + 1) > data_end)
		return XDP_DROP;
	/* options would be reflected: such a SYN is dropped, not answered */
	if (iph->ihl != 5 || iph->protocol != IPPROTO_TCP)
		return XDP_DROP;
	__builtin_memcpy(&ip, iph, sizeof(ip));
	__builtin_memcpy(&in, th, sizeof(in));
	seg = bpf_ntohs(ip.tot_len) - sizeof(ip) - in.doff * 4 + 1 + in.fin;
	if (cut_to(ctx, l3 + sizeof(ip) + sizeof(tcp)))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + l3 + sizeof(ip) + sizeof(tcp) > data_end)
		return XDP_DROP;

	addr = ip.saddr;
	ip.saddr = ip.daddr;
	ip.daddr = addr;
	ip.tos = 0;
	ip.tot_len = bpf_htons(sizeof(ip) + sizeof(tcp));
	ip.id = 0;
	ip.frag_off = bpf_htons(IP_DF);
	ip.ttl = SLUICE_RST_TTL;
	ip.check = 0;
	ip.check = csum_fold(csum_words(&ip, sizeof(ip) / 2));

	rst_tcp(&tcp, &in, seg);
	sum = csum_words(&ip.saddr, 4) + bpf_htons(IPPROTO_TCP) +
	      bpf_htons(sizeof(tcp)) + csum_words(&tcp, sizeof(tcp) / 2);
	tcp.check = csum_fold(sum);

	swap_macs(data);
	__builtin_memcpy(data + l3, &ip, sizeof(ip));
	__builtin_memcpy(data + l3 + sizeof(ip), &tcp, sizeof(tcp));
	return XDP_TX;
}

static __always_inline int rst_v6(struct xdp_md *ctx, __u32 l3)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ipv6hdr *ip6h = data + l3, ip6;
	struct tcphdr *th = data + l3 + sizeof(ip6), tcp, in;
	struct in6_addr addr;
	__u32 seg;
	__u64 sum;

	if ((void *)(th + 1) > data_end)
		return XDP_DROP;
	/* extension headers are not walked for a reply: dropped */
	if (ip6h->nexthdr != IPPROTO_TCP)
		return XDP_DROP;
	__builtin_memcpy(&ip6, ip6h, sizeof(ip6));
	__builtin_memcpy(&in, th, sizeof(in));
	seg = bpf_ntohs(ip6.payload_len) - in.doff * 4 + 1 + in.fin;
	if (cut_to(ctx, l3 + sizeof(ip6) + sizeof(tcp)))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + l3 + sizeof(ip6) + sizeof(tcp) > data_end)
		return XDP_DROP;

	addr = ip6.saddr;
	ip6.saddr = ip6.daddr;
	ip6.daddr = addr;
	/* version 6, traffic class and flow label 0 */
	*(__be32 *)&ip6 = bpf_htonl(0x60000000);
	ip6.payload_len = bpf_htons(sizeof(tcp));
	ip6.hop_limit = SLUICE_RST_TTL;

	rst_tcp(&tcp, &in, seg);
	sum = csum_words(&ip6.saddr, 16) + bpf_htons(sizeof(tcp)) +
	      bpf_htons(IPPROTO_TCP) + csum_words(&tcp, sizeof(tcp) / 2);
	tcp.check = csum_fold(sum);

	swap_macs(data);
	__builtin_memcpy(data + l3, &ip6, sizeof(ip6));
	__builtin_memcpy(data + l3 + sizeof(ip6), &tcp, sizeof(tcp));
	return XDP_TX;
}

/* The offset of the IP header past Ethernet and up to two VLAN tags, and
 * its ethertype; 0 when the frame is cut short. */
static __always_inline __u32 frame_l3(void *data, void *data_end,
				      __be16 *proto)
{
	struct ethhdr *eth = data;
	__u32 l3 = sizeof(*eth);

	if ((void *)(eth + 1) > data_end)
		return 0;
	*proto = eth->h_proto;
#pragma unroll
	for (int i = 0; i < 2; i++) {
		struct vlan_tag *tag = data + l3;

		if (*proto != bpf_htons(ETH_P_8021Q) &&
		    *proto != bpf_htons(ETH_P_8021AD))
			break;
		if ((void *)(tag + 1) > data_end)
			return 0;
		*proto = tag->proto;
		l3 += sizeof(*tag);
	}
	return l3;
}

/* Answer the SYN in ctx by a RST (VLAN tags kept). */
static __always_inline int breaker_rst(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__be16 proto;
	__u32 l3 = frame_l3(data, data_end, &proto);

	if (l3 && proto == bpf_htons(ETH_P_IP))
		return rst_v4(ctx, l3);
	if (l3 && proto == bpf_htons(ETH_P_IPV6))
		return rst_v6(ctx, l3);
	return XDP_DROP;
}

/* ---- connections ------------------------------------------------------ */

/*
 * breaker_conns remembers the TCP connections of breaker rules from the
 * SYN that passed the breaker to its answer (slow_request_ratio: to the
 * response, below): SLUICE_BRK_CONNS entries (16384 of a 40-byte key
 * and a 24-byte value: 2.0 MiB as the kernel counts it, allocated at
 * load whether or not a rule has a breaker). An answered SYN's entry is
 * deleted, so the map holds the SYNs still waiting. A SYN sent again
 * with the same sequence number (a client's retransmission, about 1 s
 * after the first, when no SYN-ACK came: the accept queue was full, or
 * the host lost the SYN) counts as an answer, `timeout`, once per SYN,
 * if its first copy passed in the breaker's present state. When more
 * SYNs wait at once than the map holds, the LRU forgets the least
 * recently touched and their retransmissions count as new SYNs:
 * timeouts are under-counted, never invented.
 */

/* A TCP segment's connection at XDP (client: its source): the key, the
 * bytes of data it carries and the TCP header, or NULL when it is no
 * TCP over IPv4 or over IPv6 without extension headers. */
static __always_inline struct tcphdr *conn_in(void *data, void *data_end,
					      struct sluice_conn_key *k,
					      __s32 *len)
{
	struct tcphdr *th;
	__be16 proto;
	__u32 l3 = frame_l3(data, data_end, &proto);

	if (l3 && proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = data + l3;

		if ((void *)(iph + 1) > data_end ||
		    iph->protocol != IPPROTO_TCP ||
		    iph->frag_off & bpf_htons(IP_OFFSET))
			return NULL;
		th = (void *)iph + iph->ihl * 4;
		*len = bpf_ntohs(iph->tot_len) - iph->ihl * 4;
		k->family = 4;
		k->client[0] = iph->saddr;
		k->server[0] = iph->daddr;
	} else if (l3 && proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = data + l3;

		if ((void *)(ip6h + 1) > data_end ||
		    ip6h->nexthdr != IPPROTO_TCP)
			return NULL;
		th = (void *)(ip6h + 1);
		*len = bpf_ntohs(ip6h->payload_len);
		k->family = 6;
		__builtin_memcpy(k->client, &ip6h->saddr, 16);
		__builtin_memcpy(k->server, &ip6h->daddr, 16);
	} else {
		return NULL;
	}
	if ((void *)(th + 1) > data_end)
		return NULL;
	*len -= th->doff * 4;
	k->client_port = th->source;
	k->server_port = th->dest;
	return th;
}

enum syn_seen { SYN_NEW, SYN_AGAIN, SYN_OTHER };

/*
 * A SYN of slot in the breaker's state word s: SYN_AGAIN when it is the
 * retransmission of one that passed in s and got no answer yet (marked
 * then, so that it counts once), SYN_NEW when it is to be remembered (k
 * and *isn filled), SYN_OTHER for one not tracked (IPv6 extension
 * headers) or a retransmission counted before.
 */
static __always_inline enum syn_seen syn_seen(struct xdp_md *ctx, __u32 slot,
					      __u64 s,
					      struct sluice_conn_key *k,
					      __u32 *isn)
{
	struct sluice_conn *c;
	struct tcphdr *th;
	__s32 len;

	th = conn_in((void *)(long)ctx->data, (void *)(long)ctx->data_end, k,
		     &len);
	if (!th)
		return SYN_OTHER;
	*isn = th->seq;
	c = bpf_map_lookup_elem(&breaker_conns, k);
	if (!c || c->slot != slot || c->isn != *isn || c->epoch != (__u32)s)
		return SYN_NEW;
	/* counted before, or answered (its SYN-ACK lost on the way) */
	if (c->flags & (SLUICE_CONN_TIMED_OUT | SLUICE_CONN_SYN_ACKED))
		return SYN_OTHER;
	c->flags |= SLUICE_CONN_TIMED_OUT;
	return SYN_AGAIN;
}

static __always_inline void syn_remember(const struct sluice_conn_key *k,
					 __u32 isn, __u32 slot, __u64 s)
{
	struct sluice_conn c = { .epoch = s, .slot = slot, .isn = isn };

	bpf_map_update_elem(&breaker_conns, k, &c, BPF_ANY);
}

/* ---- the window and the verdict ------------------------------------- */

/* Zero the window's counters once now is past it (the CPU whose CAS
 * wins does). */
static __always_inline void brk_roll(struct sluice_breaker *st,
				     const struct sluice_breaker_cfg *cfg,
				     __u64 now)
{
	__u64 win = now / cfg->stat_ns, old = READ_ONCE(st->win_id);

	if (old != win &&
	    __sync_val_compare_and_swap(&st->win_id, old, win) == old) {
		WRITE_ONCE(st->answers, 0);
		WRITE_ONCE(st->errors, 0);
		WRITE_ONCE(st->requests, 0);
	}
}

/*
 * A udp breaker's requests are counted per CPU, in the rule's rule_cpu
 * element (a line only this CPU writes), and added to rule_breaker's
 * shared count once per SLUICE_BRK_BATCH requests or per tick of the
 * jiffy clock, whichever comes first: so a datagram writes no shared
 * line, and the shared count lags by at most that per CPU. Where the
 * count decides (it caps the answers, brk_over()), the CPUs' unsettled
 * requests are added to it.
 */
static __always_inline void brk_request(struct sluice_breaker *st,
					const struct sluice_breaker_cfg *cfg,
					__u32 slot)
{
	__u32 cpu_slot = sluice_cpu_slot(bpf_get_smp_processor_id(), slot,
					 rule_cpu_shift);
	struct sluice_rule_cpu *rc = bpf_map_lookup_elem(&rule_cpu, &cpu_slot);
	__u16 tick = sluice_tick();
	__u64 n = 1;

	if (rc) {
		if (rc->brk_tick == tick &&
		    rc->brk_requests < SLUICE_BRK_BATCH) {
			rc->brk_requests++;
			return;
		}
		n += rc->brk_requests;
		rc->brk_requests = 0;
		rc->brk_tick = tick;
	}
	brk_roll(st, cfg, sluice_now());
	__sync_fetch_and_add(&st->requests, n);
}

/* The requests of slot that the CPUs have not added yet. */
static __always_inline __u64 brk_unsettled(__u32 slot)
{
	__u64 n = 0;

	for (__u32 cpu = 0; cpu < SLUICE_BRK_SUM_CPUS && cpu < nr_cpus;
	     cpu++) {
		__u32 k = sluice_cpu_slot(cpu, slot, rule_cpu_shift);
		struct sluice_rule_cpu *rc = bpf_map_lookup_elem(&rule_cpu, &k);

		if (rc)
			n += READ_ONCE(rc->brk_requests);
	}
	return n;
}

/* Errors over the threshold, with enough answers (Sentinel: more than
 * the threshold; a ratio of 1 opens when every answer is an error). A
 * udp window counts replies as successes up to its requests: a service
 * may send several datagrams for one. may_udp: a constant, false where
 * only a tcp breaker's answers are counted (at XDP: its stack is full). */
static __always_inline bool brk_over(const struct sluice_breaker_cfg *cfg,
				     const struct sluice_breaker *st,
				     __u32 slot, bool may_udp, __u64 answers,
				     __u64 errors)
{
	if (may_udp && cfg->udp) {
		__u64 requests = READ_ONCE(st->requests);

		/* only when they would cap: the CPUs' requests not yet
		 * added */
		if (answers > requests)
			requests += brk_unsettled(slot);
		if (answers > requests)
			answers = requests;
		if (errors > answers)
			errors = answers;
	}
	if (answers < cfg->min_requests)
		return false;
	if (cfg->strategy == SLUICE_BRK_ERROR_COUNT)
		return errors > cfg->threshold;
	if (cfg->threshold >= SLUICE_BRK_RATIO_ONE)
		return errors >= answers;
	return errors * SLUICE_BRK_RATIO_ONE > cfg->threshold * answers;
}

/*
 * Count an answer (enum sluice_breaker_answer) to a request of a
 * breaker. epoch, when known, is the breaker's state word when the
 * request passed (its low 32 bits): in half-open only a probe's answer
 * decides.
 */
static __always_inline void brk_count(const struct sluice_breaker_cfg *cfg,
				      struct sluice_breaker *st, __u32 slot,
				      bool may_udp, __u32 kind,
				      const __u32 *epoch, __u64 now)
{
	__u64 s, answers, errors;

	/* the compiler knows the callers' kinds and would drop the bound
	 * check that the verifier needs for the index */
	asm volatile("" : "+r"(kind));
	if (kind >= SLUICE_BRK_ANSWERS)
		return;
	__sync_fetch_and_add(&st->answered[kind], 1);
	s = READ_ONCE(st->state);
	switch (s & SLUICE_BRK_STATE_MASK) {
	case SLUICE_BRK_CLOSED:
		/* a slow ratio is over responses; a refused or unanswered
		 * SYN only fails a probe */
		if (cfg->strategy == SLUICE_BRK_SLOW_RATIO &&
		    kind != SLUICE_ANS_OK && kind != SLUICE_ANS_SLOW)
			return;
		brk_roll(st, cfg, now);
		answers = __sync_fetch_and_add(&st->answers, 1) + 1;
		if (kind == SLUICE_ANS_OK)
			return;
		errors = __sync_fetch_and_add(&st->errors, 1) + 1;
		if (brk_over(cfg, st, slot, may_udp, answers, errors))
			brk_move(st, s, SLUICE_BRK_OPEN, now);
		return;
	case SLUICE_BRK_HALF_OPEN:
		if (epoch && *epoch != (__u32)s)
			return;
		if (kind != SLUICE_ANS_OK) {
			__sync_fetch_and_add(&st->probe_failure, 1);
			brk_move(st, s, SLUICE_BRK_OPEN, now);
			return;
		}
		__sync_fetch_and_add(&st->probe_success, 1);
		if (__sync_fetch_and_add(&st->probe_ok, 1) + 1 >= cfg->probes)
			brk_close(st, s, cfg, now);
		return;
	default:
		/* answers to requests admitted before it opened */
		return;
	}
}

/* ---- slow_request_ratio: the response times ----------------------------- */

/*
 * A connection's response time runs from its first request byte (the
 * client's first data after the handshake, at XDP) to its first response
 * byte (the server's first data, on egress), both in its breaker_conns
 * entry. Its SYN's entry stays past the SYN-ACK for this, until the
 * response, or the connection's end: a response after max_rt_ms is
 * slow, and so is a request whose client gives up (a FIN or RST) later
 * than max_rt_ms without one; a request the client abandons sooner, or
 * the server closes without a response, counts as nothing. A connection
 * whose client waits silently for ever stays until the LRU evicts it,
 * uncounted. Only the connection's first request is timed. With more
 * connections waiting for their response than the map holds, the least
 * recently active are forgotten and their responses not counted: the
 * oldest waiting, so slow ones sooner than fast ones, and the ratio errs
 * low (the breaker stays closed) rather than high.
 */

/* A client's segment to a watched port (SLUICE_REF_WATCH: classify()
 * says so), at XDP, from sluice_xdp(); 0. A global function, as
 * breaker_request(). */
__noinline int breaker_segment(struct xdp_md *ctx)
{
	const struct sluice_breaker_cfg *cfg;
	struct sluice_conn_key k = {};
	struct sluice_breaker *st;
	struct sluice_conn *c;
	struct tcphdr *th;
	__u64 now, req;
	__u32 slot, epoch;
	__s32 len;
	__u8 end;

	th = conn_in((void *)(long)ctx->data, (void *)(long)ctx->data_end,
		     &k, &len);
	if (!th)
		return 0;
	end = ((const __u8 *)th)[13] & (TCPF_FIN | TCPF_RST);
	/* a bare ACK: no lookup */
	if (len <= 0 && !end)
		return 0;
	c = bpf_map_lookup_elem(&breaker_conns, &k);
	if (!c)
		return 0;
	now = sluice_now();
	req = c->req_ns;
	if (len > 0 && !req) {
		c->req_ns = now;
		return 0;
	}
	if (!end)
		return 0;
	slot = c->slot;
	epoch = c->epoch;
	cfg = bpf_map_lookup_elem(&breaker_cfg, &slot);
	st = bpf_map_lookup_elem(&rule_breaker, &slot);
	/* a FIN after the request: the client may wait for the response */
	if (req && now - req <= (cfg ? cfg->max_rt_ns : 0) &&
	    !(end & TCPF_RST))
		return 0;
	bpf_map_delete_elem(&breaker_conns, &k);
	if (req && cfg && st && cfg->strategy == SLUICE_BRK_SLOW_RATIO &&
	    cfg->stat_ns && now - req > cfg->max_rt_ns)
		brk_count(cfg, st, slot, false, SLUICE_ANS_SLOW, &epoch, now);
	return 0;
}

/* A server's segment from a watched port, on egress: its first data is
 * the response (data), a FIN or RST the connection's end. */
static __always_inline void breaker_response(const struct sluice_conn_key *k,
					     bool data)
{
	const struct sluice_breaker_cfg *cfg;
	struct sluice_breaker *st;
	struct sluice_conn *c;
	__u32 slot, epoch;
	__u64 now, req;

	c = bpf_map_lookup_elem(&breaker_conns, k);
	if (!c)
		return;
	req = c->req_ns;
	/* data before any request: a greeting, not the response */
	if (!req && data)
		return;
	slot = c->slot;
	epoch = c->epoch;
	bpf_map_delete_elem(&breaker_conns, k);
	if (!req || !data)
		return;
	cfg = bpf_map_lookup_elem(&breaker_cfg, &slot);
	st = bpf_map_lookup_elem(&rule_breaker, &slot);
	if (!cfg || !st || cfg->strategy != SLUICE_BRK_SLOW_RATIO ||
	    !cfg->stat_ns)
		return;
	now = sluice_now();
	brk_count(cfg, st, slot, false,
		  now - req > cfg->max_rt_ns ? SLUICE_ANS_SLOW : SLUICE_ANS_OK,
		  &epoch, now);
}

/* ---- XDP: a request of a rule with a breaker ---------------------------- */

/* Does a packet of a rule whose rule_cpu.has_breaker is `on` ask it? A
 * later fragment (UDP port 0: no L4 header) does not: its datagram asked
 * with its first fragment. */
static __always_inline bool breaker_asked(__u8 on, __u32 port_key)
{
	if (on == SLUICE_BRK_ON_UDP)
		return port_key != sluice_port_key(4, SLUICE_SLOT_UDP, 0) &&
		       port_key != sluice_port_key(6, SLUICE_SLOT_UDP, 0);
	return port_key_is_syn(port_key);
}

/*
 * The verdict for a request that the breaker fails fast (XDP_TX: the
 * caller answers it with breaker_rst()), or -1 when it goes on to
 * admission (closed, or a half-open probe). A global function, so that
 * the verifier checks it once rather than on every path of sluice_xdp
 * that follows it; it must then leave the packet as it is, since its
 * caller keeps pointers into it.
 */
__noinline int breaker_request(struct xdp_md *ctx, __u32 slot)
{
	const struct sluice_breaker_cfg *cfg;
	const struct sluice_rule_cfg *rule;
	struct sluice_conn_key k = {};
	struct sluice_breaker *st;
	enum syn_seen seen = SYN_OTHER;
	__u32 isn = 0, epoch;
	__u64 s, now;

	cfg = bpf_map_lookup_elem(&breaker_cfg, &slot);
	st = bpf_map_lookup_elem(&rule_breaker, &slot);
	if (!cfg || !st || !cfg->open_ns || !cfg->stat_ns)
		return -1;
	s = READ_ONCE(st->state);
	if ((s & SLUICE_BRK_STATE_MASK) == SLUICE_BRK_CLOSED && cfg->udp) {
		brk_request(st, cfg, slot);
		return -1;
	}
	now = sluice_now();
	if ((s & SLUICE_BRK_STATE_MASK) == SLUICE_BRK_CLOSED) {
		seen = syn_seen(ctx, slot, s, &k, &isn);
		epoch = s;
		if (seen == SYN_AGAIN)
			brk_count(cfg, st, slot, false,
				  SLUICE_ANS_TIMEOUT, &epoch, now);
		else if (seen == SYN_NEW)
			syn_remember(&k, isn, slot, s);
		return -1;
	}
	if ((s & SLUICE_BRK_STATE_MASK) == SLUICE_BRK_OPEN) {
		if (now - READ_ONCE(st->since_ns) < cfg->open_ns)
			goto fail;
		brk_half_open(st, s, cfg, now);
	} else if (now - READ_ONCE(st->since_ns) >= cfg->open_ns) {
		/* half-open with no verdict for open_ms: open again */
		brk_move(st, s, SLUICE_BRK_OPEN, now);
		goto fail;
	}
	s = READ_ONCE(st->state);
	if ((s & SLUICE_BRK_STATE_MASK) == SLUICE_BRK_CLOSED)
		return -1;
	if ((s & SLUICE_BRK_STATE_MASK) != SLUICE_BRK_HALF_OPEN)
		goto fail;
	if (!cfg->udp) {
		seen = syn_seen(ctx, slot, s, &k, &isn);
		/* a probe's retransmission: its first copy got no answer */
		if (seen == SYN_AGAIN) {
			epoch = s;
			brk_count(cfg, st, slot, false,
				  SLUICE_ANS_TIMEOUT, &epoch, now);
			goto fail;
		}
	}
	if (__sync_fetch_and_add(&st->probes_left, -1) > 0) {
		__sync_fetch_and_add(&st->probes_passed, 1);
		if (seen == SYN_NEW)
			syn_remember(&k, isn, slot, s);
		return -1;
	}
fail:
	__sync_fetch_and_add(&st->failed_fast, 1);
	/* a shadow rule's breaker only counts what it would fail */
	rule = bpf_map_lookup_elem(&rule_cfg, &slot);
	if (!rule || rule->flags & SLUICE_RULE_SHADOW)
		return -1;
	/* a udp rule's open_action is always drop (the parser's rule) */
	if (cfg->open_drop)
		return XDP_DROP;
	return XDP_TX;
}

/* ---- egress: the answers ---------------------------------------------- */

/* parse_answer()'s kinds past the answers: a server's segment from a
 * watched port, with data, or a FIN or RST */
enum { SEG_DATA = SLUICE_BRK_ANSWERS, SEG_END };

/* Does a slow_request_ratio breaker time the connections to port? */
static __always_inline bool port_watched(__u32 family, __u32 port)
{
	__u64 idx;

	/* as answer_key(): 6.1's verifier does not bound a byte swap */
	asm volatile("" : "+r"(port));
	idx = sluice_port_key(family, SLUICE_SLOT_TCP, port);
	if (set_gen & 1)
		idx += SLUICE_SET_SPACE;
	if (idx >= SLUICE_NUM_SETS * SLUICE_SET_SPACE)
		return false;
	return port_table[idx] & SLUICE_REF_WATCH;
}

/* The port key of the request an answer from port answers; the port is
 * hidden from the compiler's range analysis so that classify() keeps
 * its bound check: 6.1's verifier does not bound a byte swap. */
static __always_inline __u32 answer_key(__u32 family, __u32 slot, __u32 port)
{
	asm volatile("" : "+r"(port));
	return sluice_port_key(family, slot, port);
}

/* An ICMP port unreachable's quote: the datagram it refuses, if UDP. */
static __always_inline int parse_quote(struct sluice_pkt *p, void *pos,
				       void *data_end)
{
	struct udphdr *uh;

	if (p->family == 4) {
		struct iphdr *iph = pos;

		if ((void *)(iph + 1) > data_end ||
		    iph->protocol != IPPROTO_UDP)
			return -1;
		uh = pos + iph->ihl * 4;
		p->saddr = (const __u8 *)&iph->saddr;
		p->daddr = (const __u8 *)&iph->daddr;
	} else {
		struct ipv6hdr *ip6h = pos;

		if ((void *)(ip6h + 1) > data_end ||
		    ip6h->nexthdr != IPPROTO_UDP)
			return -1;
		uh = (void *)(ip6h + 1);
		p->saddr = ip6h->saddr.in6_u.u6_addr8;
		p->daddr = ip6h->daddr.in6_u.u6_addr8;
	}
	/* the quote holds 8 bytes of it: the ports are there */
	if ((void *)(uh + 1) > data_end)
		return -1;
	p->port_key = answer_key(p->family, SLUICE_SLOT_UDP,
				 bpf_ntohs(uh->dest));
	return SLUICE_ANS_ICMP_UNREACH;
}

/*
 * An answer at l4 (protocol proto, len bytes with its header) of an
 * egress frame of family: p as the request it answers would have been
 * classified (for a SYN-ACK, RST or reply: addresses swapped, the source
 * port as dport; for an ICMP error: its quote). Returns its enum
 * sluice_breaker_answer, SEG_DATA or SEG_END, or -1 when the frame is
 * none of them.
 */
static __always_inline int parse_answer(struct sluice_pkt *p, void *l4,
					__u8 proto, __s32 len, void *data_end,
					struct sluice_conn_key *k)
{
	__u8 flags;

	if (proto == IPPROTO_TCP) {
		struct tcphdr *th = l4;

		if ((void *)(th + 1) > data_end)
			return -1;
		k->client_port = th->dest;
		k->server_port = th->source;
		p->port_key = answer_key(p->family, SLUICE_SLOT_TCP_SYN,
					 bpf_ntohs(th->source));
		flags = ((const __u8 *)th)[13] &
			(TCPF_FIN | TCPF_SYN | TCPF_ACK | TCPF_RST);
		if (flags == (TCPF_SYN | TCPF_ACK))
			return SLUICE_ANS_OK;
		if (flags == (TCPF_RST | TCPF_ACK) && !th->seq)
			return SLUICE_ANS_RST;
		len -= th->doff * 4;
		if ((len <= 0 && !(flags & (TCPF_FIN | TCPF_RST))) ||
		    !port_watched(p->family, bpf_ntohs(th->source)))
			return -1;
		return len > 0 ? SEG_DATA : SEG_END;
	}
	if (proto == IPPROTO_UDP) {
		struct udphdr *uh = l4;

		if ((void *)(uh + 1) > data_end)
			return -1;
		p->port_key = answer_key(p->family, SLUICE_SLOT_UDP,
					 bpf_ntohs(uh->source));
		return SLUICE_ANS_OK;
	}
	/* destination unreachable, port unreachable: ICMP 3/3, ICMPv6 1/4 */
	if (l4 + 8 > data_end)
		return -1;
	if (p->family == 4 && proto == IPPROTO_ICMP &&
	    ((const __u8 *)l4)[0] == 3 && ((const __u8 *)l4)[1] == 3)
		return parse_quote(p, l4 + 8, data_end);
	if (p->family == 6 && proto == IPPROTO_ICMPV6 &&
	    ((const __u8 *)l4)[0] == 1 && ((const __u8 *)l4)[1] == 4)
		return parse_quote(p, l4 + 8, data_end);
	return -1;
}

/*
 * The rule slot + 1 of the request an egress frame answers (0: none),
 * the answer's kind and, for a SYN's, its connection in k (k->family 0
 * otherwise). family is a constant at each call, so that the verifier
 * sees each family's addresses with their own bounds.
 */
static __always_inline __u32 answer_ref(void *l3, void *data_end,
					__u32 family, int *kind,
					struct sluice_conn_key *k)
{
	struct sluice_pkt p = { .family = family };
	void *l4;
	__s32 len;
	__u8 proto;

	if (family == 4) {
		struct iphdr *iph = l3;

		if ((void *)(iph + 1) > data_end ||
		    iph->frag_off & bpf_htons(IP_OFFSET))
			return SLUICE_REF_NONE;
		l4 = l3 + iph->ihl * 4;
		len = bpf_ntohs(iph->tot_len) - iph->ihl * 4;
		proto = iph->protocol;
		p.saddr = (const __u8 *)&iph->daddr;
		p.daddr = (const __u8 *)&iph->saddr;
		k->client[0] = iph->daddr;
		k->server[0] = iph->saddr;
	} else {
		struct ipv6hdr *ip6h = l3;

		if ((void *)(ip6h + 1) > data_end)
			return SLUICE_REF_NONE;
		l4 = ip6h + 1;
		len = bpf_ntohs(ip6h->payload_len);
		proto = ip6h->nexthdr;
		p.saddr = ip6h->daddr.in6_u.u6_addr8;
		p.daddr = ip6h->saddr.in6_u.u6_addr8;
		__builtin_memcpy(k->client, &ip6h->daddr, 16);
		__builtin_memcpy(k->server, &ip6h->saddr, 16);
	}
	*kind = parse_answer(&p, l4, proto, len, data_end, k);
	if (*kind < 0)
		return SLUICE_REF_NONE;
	if (proto == IPPROTO_TCP)
		k->family = family;
	if (*kind >= SEG_DATA)
		return SLUICE_REF_NONE;
	return classify(&p, NULL);
}

/* The rule of an answer's ref whose breaker hears it: the rule, or in a
 * chain the one layer's rule with a breaker (the compiler allows one). */
static __always_inline __u32 breaker_ref(__u32 ref)
{
	struct sluice_chain *chain;

	if (!(ref & SLUICE_REF_CHAIN))
		return ref;
	chain = chain_of(ref);
	if (!chain)
		return SLUICE_REF_NONE;
#pragma unroll
	for (int i = 0; i < SLUICE_LAYERS; i++) {
		__u32 slot = chain->ref[i] - 1;
		struct sluice_breaker_cfg *cfg =
		    bpf_map_lookup_elem(&breaker_cfg, &slot);

		if (chain->ref[i] != SLUICE_REF_NONE && cfg && cfg->open_ns)
			return chain->ref[i];
	}
	return SLUICE_REF_NONE;
}

/* An answer seen on egress to a request of slot; k: a SYN's connection
 * (k->family 0 for a datagram). */
static __always_inline void breaker_answer(__u32 slot, __u32 kind,
					   const struct sluice_conn_key *k)
{
	const struct sluice_breaker_cfg *cfg;
	struct sluice_breaker *st;
	struct sluice_conn *c;
	bool known = false, timed_out;
	__u32 epoch;

	cfg = bpf_map_lookup_elem(&breaker_cfg, &slot);
	st = bpf_map_lookup_elem(&rule_breaker, &slot);
	if (!cfg || !st || !cfg->open_ns || !cfg->stat_ns)
		return;
	if (k->family) {
		c = bpf_map_lookup_elem(&breaker_conns, k);
		if (c && c->slot == slot) {
			epoch = c->epoch;
			known = true;
			/* a slow ratio times the response: the entry stays */
			if (cfg->strategy == SLUICE_BRK_SLOW_RATIO &&
			    kind == SLUICE_ANS_OK) {
				c->flags |= SLUICE_CONN_SYN_ACKED;
				return;
			}
			timed_out = c->flags & SLUICE_CONN_TIMED_OUT;
			bpf_map_delete_elem(&breaker_conns, k);
			/* its retransmission was the answer: counted */
			if (timed_out)
				return;
		}
	}
	/* a SYN-ACK is no answer to a slow ratio */
	if (cfg->strategy == SLUICE_BRK_SLOW_RATIO && kind == SLUICE_ANS_OK)
		return;
	brk_count(cfg, st, slot, true, kind, known ? &epoch : NULL,
		  sluice_now());
}

#endif
