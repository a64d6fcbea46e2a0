// SPDX-License-Identifier: Apache-2.0
/*
 * xdp_count: a parser that counts packets per protocol.
 *
 * Walks Ethernet, up to two VLAN tags, IPv4 or IPv6, and the transport protocol, and counts
 * each layer it recognises in a per-CPU array (no atomics needed: each CPU, or hotplane
 * worker, has its own copy). Every packet passes on unchanged.
 *
 *   hotplane ebpf map dump xdp_count/proto_count
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

enum proto {
	P_OTHER_L2,
	P_ARP,
	P_IPV4,
	P_IPV6,
	P_TCP,
	P_UDP,
	P_ICMP,
	P_ICMPV6,
	P_OTHER_L4,
	P_FRAGMENT,
	P_TRUNCATED,
	P_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, P_MAX);
} proto_count SEC(".maps");

struct vlan_hdr {
	__be16 tci;
	__be16 proto;
};

static __always_inline void bump(__u32 key)
{
	__u64 *v = bpf_map_lookup_elem(&proto_count, &key);
	if (v)
		*v += 1;
}

SEC("xdp")
int xdp_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	void *l3;
	__u16 proto;
	__u8 l4;

	if ((void *)(eth + 1) > end) {
		bump(P_TRUNCATED);
		return XDP_PASS;
	}
	proto = eth->h_proto;
	l3 = eth + 1;
#pragma unroll
	for (int i = 0; i < 2; i++) {
		struct vlan_hdr *vh = l3;

		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		if ((void *)(vh + 1) > end) {
			bump(P_TRUNCATED);
			return XDP_PASS;
		}
		proto = vh->proto;
		l3 = vh + 1;
	}

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;

		if ((void *)(ip + 1) > end) {
			bump(P_TRUNCATED);
			return XDP_PASS;
		}
		bump(P_IPV4);
		if (ip->frag_off & bpf_htons(0x1fff)) {
			bump(P_FRAGMENT);
			return XDP_PASS;
		}
		l4 = ip->protocol;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;

		if ((void *)(ip6 + 1) > end) {
			bump(P_TRUNCATED);
			return XDP_PASS;
		}
		bump(P_IPV6);
		l4 = ip6->nexthdr;
	} else if (proto == bpf_htons(ETH_P_ARP)) {
		bump(P_ARP);
		return XDP_PASS;
	} else {
		bump(P_OTHER_L2);
		return XDP_PASS;
	}

	switch (l4) {
	case IPPROTO_TCP:
		bump(P_TCP);
		break;
	case IPPROTO_UDP:
		bump(P_UDP);
		break;
	case IPPROTO_ICMP:
		bump(P_ICMP);
		break;
	case IPPROTO_ICMPV6:
		bump(P_ICMPV6);
		break;
	default:
		bump(P_OTHER_L4);
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
