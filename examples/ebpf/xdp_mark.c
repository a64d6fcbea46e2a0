// SPDX-License-Identifier: Apache-2.0
/*
 * xdp_mark: tag packets. Writes a 16-bit mark (big-endian) 16 bytes into the UDP payload,
 * where hotplane's traffic generator keeps its stamp's mark, so that the receiver can tell
 * which function handled each packet. `hotplane demo` installs it as flow 2's function with
 * an in-band update carrying this object.
 *
 * The mark is a read-only global (.rodata): rebuild with another value, or patch it, to get
 * another tag.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define MARK_OFFSET 16

const volatile __u16 mark = 0xbb;

SEC("xdp")
int xdp_mark(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp;
	__u8 *payload;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	udp = (void *)ip + ip->ihl * 4;
	payload = (void *)(udp + 1);
	if ((void *)(payload + MARK_OFFSET + 2) > end)
		return XDP_PASS;
	payload[MARK_OFFSET] = mark >> 8;
	payload[MARK_OFFSET + 1] = mark & 0xff;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
