// SPDX-License-Identifier: Apache-2.0
/* change: rewrite a header field. Sets the IPv4 TTL to 64 and patches the header checksum
 * incrementally (RFC 1624: HC' = ~(~HC + ~m + m')), as a router normalising TTLs would. The
 * rewrite is idempotent, so a benchmark that runs it repeatedly on one packet (as
 * BPF_PROG_TEST_RUN does) does the same work every time. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define NEW_TTL 64

SEC("xdp")
int xdp_change(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	__u16 *word, old, new;
	__u32 sum;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	/* TTL shares a 16-bit checksum word with the protocol. */
	word = (__u16 *)&ip->ttl;
	old = *word;
	ip->ttl = NEW_TTL;
	new = *word;
	sum = (__u16)~ip->check + (__u16)~old + new;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	ip->check = (__u16)~sum;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
