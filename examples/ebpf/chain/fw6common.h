/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fw6common.h: what the inserting variants of the chain experiment's firewall share
 * (fw6ah.c, fw6opt.c): fw6.c's filter and the insertion of a fixed-size gap between the IPv6
 * header and TCP.
 */
#ifndef FW6COMMON_H
#define FW6COMMON_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct in6_addr);
	__type(value, __u8);
	__uint(max_entries, 1024);
} blocked SEC(".maps");

/* Ethernet and IPv6, as copied to the stack while the headroom grows. Frames start 2-byte
 * aligned (as in Linux), so the copy may use 16-bit loads and stores. */
struct eth_ip6 {
	struct ethhdr eth;
	struct ipv6hdr ip6;
} __attribute__((packed, aligned(2)));

/* fw6's filter: XDP_PASS for IPv6/TCP frames (long enough for Ethernet, IPv6 and a minimal
 * TCP header) whose source is not in `blocked`, else XDP_DROP. */
static __always_inline int fw6_filter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct tcphdr *tcp = (void *)(ip6 + 1);
	struct in6_addr src;

	if ((void *)(tcp + 1) > end)
		return XDP_DROP;
	if (eth->h_proto != bpf_htons(ETH_P_IPV6) || ip6->nexthdr != IPPROTO_TCP)
		return XDP_DROP;
	__builtin_memcpy(&src, &ip6->saddr, sizeof(src));
	if (bpf_map_lookup_elem(&blocked, &src))
		return XDP_DROP;
	return XDP_PASS;
}

/*
 * Open a gap of `len` bytes between the IPv6 header and TCP: Ethernet and IPv6 move `len`
 * bytes towards the head, the IPv6 next header becomes `first` and its payload length grows
 * by `len`. Returns the gap (with the gap and a minimal TCP header behind it proven inside the
 * packet), or NULL when the headroom cannot grow (the packet is then unchanged).
 */
static __always_inline void *fw6_open_gap(struct xdp_md *ctx, __u8 first, int len)
{
	struct eth_ip6 hdrs;
	struct eth_ip6 *out;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	if (data + sizeof(hdrs) > end)
		return 0;
	hdrs = *(struct eth_ip6 *)data;
	if (bpf_xdp_adjust_head(ctx, -len))
		return 0;
	/* adjust_head invalidates every packet pointer: derive them again and re-check. */
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	out = data;
	if (data + sizeof(hdrs) + len + sizeof(struct tcphdr) > end)
		return 0;
	hdrs.ip6.nexthdr = first;
	hdrs.ip6.payload_len = bpf_htons(bpf_ntohs(hdrs.ip6.payload_len) + len);
	*out = hdrs;
	return out + 1;
}

#endif
