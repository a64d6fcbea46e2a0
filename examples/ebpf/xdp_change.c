// SPDX-License-Identifier: Apache-2.0
/* change: rewrite a header field. Decrements the IPv4 TTL and patches the header checksum
 * incrementally (RFC 1624), as a router does; drops packets whose TTL runs out. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_change(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	__u32 check;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	if (ip->ttl <= 1)
		return XDP_DROP;
	/* TTL is the high byte of its 16-bit word: the sum drops by 0x0100. */
	check = ip->check;
	check += bpf_htons(0x0100);
	ip->check = (__u16)(check + (check >= 0xffff));
	ip->ttl--;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
