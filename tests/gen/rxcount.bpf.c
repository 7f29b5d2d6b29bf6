// SPDX-License-Identifier: GPL-2.0
/* tc ingress counter behind XDP: counts the packets (and bytes) that
 * reach the stack, optionally only those matching protocol, destination
 * port and destination address, and optionally remembers their sources.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "rxcount.h"

/* 0 means "any" for every filter. */
const volatile __u8 filter_proto;
const volatile __u16 filter_dport;
const volatile __u8 filter_family; /* 4 or 6 with filter_dst */
const volatile struct rx_addr filter_dst;
const volatile __u8 drop;
const volatile __u8 distinct_src;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rx_count);
} counts SEC(".maps");

/* Packets per millisecond since start_ns, stamped at arrival, so the
 * 1 s windows reported do not depend on when user space samples. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RXCOUNT_MAX_MS);
	__type(key, __u32);
	__type(value, __u64);
} ms_bins SEC(".maps");

volatile __u64 start_ns;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, RXCOUNT_MAX_SOURCES);
	__type(key, struct rx_addr);
	__type(value, __u8);
} sources SEC(".maps");

struct pkt {
	__u8 family;
	__u8 proto;
	__u16 dport; /* host order; 0 without ports */
	struct rx_addr src;
	struct rx_addr dst;
};

static __always_inline void v4_mapped(struct rx_addr *a, __be32 v4)
{
	__builtin_memset(a, 0, sizeof(*a));
	a->b[10] = 0xff;
	a->b[11] = 0xff;
	__builtin_memcpy(&a->b[12], &v4, 4);
}

/* The stack has already moved an outer VLAN tag into skb metadata; a
 * second (QinQ inner) tag is still in the data.
 */
static __always_inline int parse(struct __sk_buff *skb, struct pkt *p)
{
	void *data = (void *) (long) skb->data;
	void *end = (void *) (long) skb->data_end;
	struct ethhdr *eth = data;
	__u16 proto, *ports;
	void *l3 = eth + 1;
	int i;

	if (l3 > end)
		return -1;
	proto = eth->h_proto;
#pragma unroll
	for (i = 0; i < 2; i++) {
		if (proto != bpf_htons(ETH_P_8021Q) &&
		    proto != bpf_htons(ETH_P_8021AD))
			break;
		if (l3 + 4 > end)
			return -1;
		proto = *(__u16 *) (l3 + 2);
		l3 += 4;
	}
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;

		if ((void *) (ip + 1) > end)
			return -1;
		p->family = 4;
		p->proto = ip->protocol;
		v4_mapped(&p->src, ip->saddr);
		v4_mapped(&p->dst, ip->daddr);
		ports = l3 + ip->ihl * 4;
		if (ip->frag_off & bpf_htons(0x1fff))
			ports = NULL; /* no L4 header in a later fragment */
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;

		if ((void *) (ip6 + 1) > end)
			return -1;
		p->family = 6;
		p->proto = ip6->nexthdr; /* extension headers not followed */
		__builtin_memcpy(&p->src, &ip6->saddr, 16);
		__builtin_memcpy(&p->dst, &ip6->daddr, 16);
		ports = (void *) (ip6 + 1);
	} else {
		return -1;
	}
	p->dport = 0;
	if (ports && (p->proto == IPPROTO_UDP || p->proto == IPPROTO_TCP) &&
	    (void *) (ports + 2) <= end)
		p->dport = bpf_ntohs(ports[1]);
	return 0;
}

static __always_inline int matches(const struct pkt *p)
{
	int i;

	if (filter_proto && p->proto != filter_proto)
		return 0;
	if (filter_dport && p->dport != filter_dport)
		return 0;
	if (filter_family) {
		if (p->family != filter_family)
			return 0;
#pragma unroll
		for (i = 0; i < 16; i++)
			if (p->dst.b[i] != filter_dst.b[i])
				return 0;
	}
	return 1;
}

SEC("tc")
int rxcount(struct __sk_buff *skb)
{
	int need_parse =
	    filter_proto || filter_dport || filter_family || distinct_src;
	struct rx_count *c;
	struct pkt p;
	__u32 key = 0;
	__u8 one = 1;

	/* TC_ACT_UNSPEC: other tc filters on the device still see it */
	if (need_parse && (parse(skb, &p) || !matches(&p)))
		return TC_ACT_UNSPEC;
	c = bpf_map_lookup_elem(&counts, &key);
	if (c) {
		/* a GRO-merged skb stands for gso_segs packets */
		__u32 n = skb->gso_segs ? skb->gso_segs : 1;
		__u64 now = bpf_ktime_get_ns(), *bin;
		__u32 ms;

		c->packets += n;
		c->bytes += skb->len + (skb->vlan_present ? 4 : 0);
		if (now >= start_ns) {
			ms = (now - start_ns) / 1000000;
			bin = bpf_map_lookup_elem(&ms_bins, &ms);
			if (bin)
				__sync_fetch_and_add(bin, n);
		}
	}
	if (distinct_src)
		bpf_map_update_elem(&sources, &p.src, &one, BPF_ANY);
	return drop ? TC_ACT_SHOT : TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "GPL";
