// SPDX-License-Identifier: Apache-2.0
/*
 * fw6: the upstream firewall of the chain experiment (docs/chain.md). Passes IPv6/TCP only:
 * the frame must hold Ethernet, a fixed IPv6 header and a minimal TCP header, the ethertype
 * must be 0x86dd and the IPv6 next header TCP (6), and the source address must not be in the
 * `blocked` hash map. Everything else is dropped.
 *
 * What a downstream program may rely on for every packet this passes (the guarantee
 * `hotplane ebpf shape fw6.o` computes): length >= 74, bytes 12..13 = 86 dd, byte 20 = 06.
 *
 *   hotplane ebpf map update fw6/blocked <16-byte IPv6 source> 1
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
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

SEC("xdp")
int fw6(struct xdp_md *ctx)
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

char _license[] SEC("license") = "GPL";
