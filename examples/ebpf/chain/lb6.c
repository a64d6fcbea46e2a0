// SPDX-License-Identifier: Apache-2.0
/*
 * lb6: the downstream of the chain experiment (../shared/briefs/chain.md §4), an XDP L4 load
 * balancer shaped like cilium's: Ethernet with at most one 802.1Q tag, then IPv4 or IPv6; for
 * IPv6 up to IPV6_MAX_HEADERS extension headers are walked (lbcommon.h); then TCP or UDP. The
 * service key (destination address, destination port, protocol, family) is looked up in the
 * `services` hash map; a miss passes the packet on. A hit counts the packet in the per-CPU
 * `lb_stats` array, picks one of the service's `count` backends (from index `base` in the
 * `backends` array) by a hash of source address and ports, and DNATs to it: destination
 * address rewritten, L4 checksum (and for IPv4 the header checksum) updated with
 * bpf_csum_diff, destination MAC set to the backend's and source MAC to the old destination
 * (this node). It returns XDP_TX. A service without backends, or whose backend index is out
 * of range, drops; so do what cilium drops (a bad IP version, IPv6 "no next header", a
 * truncated extension header, more than IPV6_MAX_HEADERS - 1 = 3 of them). Fragments,
 * truncated IP/TCP/UDP headers and anything not TCP/UDP over IPv4/IPv6 pass.
 *
 * What it guarantees downstream (XDP_TX): the same headers at the same offsets as it
 * received; addresses, MACs and checksums come from map values, so they are unknown.
 * What it spends its time on when placed behind fw6ah/fw6opt: parsing what the firewall
 * already fixed (ethertype, no VLAN, next-header chain, TCP at offset 78).
 *
 *   hotplane ebpf map update lb6/services <addr 16, dport 2 (BE), proto 1, family 1 (4|6)> <count 4, base 4>
 *   hotplane ebpf map update lb6/backends <i> <addr6 16, addr4 4, mac 6, pad 2>
 *
 * Build with -DLB_SELFTEST to have a service miss create the service (2 backends at 0 and 1)
 * and fill those backends, so that `hotplane ebpf run` (which starts with empty maps) takes
 * the XDP_TX path; never for real use.
 */
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include "lbcommon.h"

#define MAX_BACKENDS 256

struct svc_key {
	__u8 addr[16]; /* IPv6 destination, or IPv4 in the first 4 bytes and zeros */
	__be16 dport;
	__u8 proto;  /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 family; /* 4 or 6 */
};

struct svc_value {
	__u32 count; /* backends, at base .. base + count - 1 */
	__u32 base;
};

struct backend {
	__u8 addr6[16];
	__be32 addr4;
	__u8 mac[ETH_ALEN];
	__u16 pad;
};

struct lb_counters {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct svc_key);
	__type(value, struct svc_value);
	__uint(max_entries, 1024);
} services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct backend);
	__uint(max_entries, MAX_BACKENDS);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct lb_counters);
	__uint(max_entries, 1);
} lb_stats SEC(".maps");

#define rol32(x, k) (((x) << (k)) | ((x) >> (32 - (k))))

/* jhash's final mix (lookup3.c final()) of three words. */
static __always_inline __u32 jhash_final(__u32 a, __u32 b, __u32 c)
{
	c ^= b; c -= rol32(b, 14);
	a ^= c; a -= rol32(c, 11);
	b ^= a; b -= rol32(a, 25);
	c ^= b; c -= rol32(b, 16);
	a ^= c; a -= rol32(c, 4);
	b ^= a; b -= rol32(a, 14);
	c ^= b; c -= rol32(b, 24);
	return c;
}

/* The flow's hash: source address (folded to two words) and both ports. */
static __always_inline __u32 flow_hash(__u32 s0, __u32 s1, __be16 sport, __be16 dport)
{
	return jhash_final(s0 + 0xdeadbeef, s1 + 0xdeadbeef, ((__u32)sport << 16 | dport) + 0xdeadbeef);
}

#ifdef LB_SELFTEST
static __always_inline void selftest_backend(__u32 i)
{
	struct backend be = {
		.addr6 = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b, i },
		.addr4 = bpf_htonl(0x0a000100 + i),
		.mac = { 0x02, 0, 0, 0, 0x0b, i },
	};

	bpf_map_update_elem(&backends, &i, &be, BPF_ANY);
}

/* Backends i = 0, 1: 2001:db8::b0i, 10.0.1.i, 02:00:00:00:0b:0i. */
static __always_inline struct svc_value *selftest_fill(struct svc_key *key)
{
	struct svc_value sv = { .count = 2, .base = 0 };

	selftest_backend(0);
	selftest_backend(1);
	bpf_map_update_elem(&services, key, &sv, BPF_ANY);
	return bpf_map_lookup_elem(&services, key);
}
#endif

SEC("xdp")
int lb6(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct svc_key key = {};
	struct svc_value *svc;
	struct lb_counters *st;
	struct backend *be;
	struct ipv6hdr *ip6 = 0;
	struct iphdr *ip4 = 0;
	__u16 *l4check;
	__be16 proto, sport;
	__u32 off, idx, zero = 0, s0, s1;
	__u8 nexthdr;
	int ret;

	ret = parse_eth(data, end, &off, &proto);
	if (ret != PARSE_OK)
		return ret;

	if (proto == bpf_htons(ETH_P_IPV6)) {
		ip6 = data + off;
		if ((void *)(ip6 + 1) > end)
			return XDP_PASS;
		if (ip6->version != 6)
			return XDP_DROP;
		off += sizeof(*ip6);
		nexthdr = ip6->nexthdr;
		ret = ipv6_skip_exthdrs(data, end, &off, &nexthdr);
		if (ret != PARSE_OK)
			return ret;
		__builtin_memcpy(key.addr, &ip6->daddr, 16);
		key.family = 6;
		s0 = ip6->saddr.s6_addr32[0] ^ ip6->saddr.s6_addr32[2];
		s1 = ip6->saddr.s6_addr32[1] ^ ip6->saddr.s6_addr32[3];
	} else if (proto == bpf_htons(ETH_P_IP)) {
		ip4 = data + off;
		if ((void *)(ip4 + 1) > end)
			return XDP_PASS;
		if (ip4->version != 4 || ip4->ihl < 5)
			return XDP_DROP;
		/* Later fragments have no ports; first fragments are passed too, for symmetry. */
		if (ip4->frag_off & bpf_htons(0x3fff))
			return XDP_PASS;
		off += (__u32)ip4->ihl * 4;
		nexthdr = ip4->protocol;
		__builtin_memcpy(key.addr, &ip4->daddr, 4);
		key.family = 4;
		s0 = ip4->saddr;
		s1 = 0;
	} else {
		return XDP_PASS;
	}

	if (nexthdr == IPPROTO_TCP) {
		struct tcphdr *tcp = data + off;

		if ((void *)(tcp + 1) > end)
			return XDP_PASS;
		sport = tcp->source;
		key.dport = tcp->dest;
		l4check = &tcp->check;
	} else if (nexthdr == IPPROTO_UDP) {
		struct udphdr *udp = data + off;

		if ((void *)(udp + 1) > end)
			return XDP_PASS;
		sport = udp->source;
		key.dport = udp->dest;
		l4check = &udp->check;
	} else {
		return XDP_PASS;
	}
	key.proto = nexthdr;
#ifdef PARSE_ONLY
	/* The parse alone (lb6_parse.o, the seed's "parse part"): everything it extracted decides
	 * the result, so nothing of it is dead code. */
	return ((key.addr[15] ^ key.dport ^ key.proto ^ key.family ^ sport ^ s0 ^ s1) & 1) ? XDP_TX
											    : XDP_PASS;
#endif

	svc = bpf_map_lookup_elem(&services, &key);
#ifdef LB_SELFTEST
	if (!svc)
		svc = selftest_fill(&key);
#endif
	if (!svc)
		return XDP_PASS;

	st = bpf_map_lookup_elem(&lb_stats, &zero);
	if (st) {
		st->packets++;
		st->bytes += end - data;
	}

	if (svc->count == 0)
		return XDP_DROP;
	idx = svc->base + flow_hash(s0, s1, sport, key.dport) % svc->count;
	be = bpf_map_lookup_elem(&backends, &idx);
	if (!be)
		return XDP_DROP;

	/* DNAT. The L4 checksum covers the destination address through the pseudo-header. */
	if (ip6) {
		if (nexthdr == IPPROTO_TCP)
			*l4check = csum_replace(*l4check, key.addr, be->addr6, 16);
		else if (*l4check)
			*l4check = udp_csum_mangle(csum_replace(*l4check, key.addr, be->addr6, 16));
		__builtin_memcpy(&ip6->daddr, be->addr6, 16);
	} else if (ip4) {
		__be32 old = ip4->daddr, new = be->addr4;

		if (nexthdr == IPPROTO_TCP)
			*l4check = csum_replace(*l4check, &old, &new, 4);
		else if (*l4check)
			*l4check = udp_csum_mangle(csum_replace(*l4check, &old, &new, 4));
		ip4->check = csum_replace(ip4->check, &old, &new, 4);
		ip4->daddr = new;
	}
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, be->mac, ETH_ALEN);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
