// SPDX-License-Identifier: Apache-2.0
/* filter: drop IPv4 UDP packets to 10.0.0.2 port 5000, pass the rest (the reference work's
 * one-port-one-address filter). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define FILTER_IP 0x0a000002 /* 10.0.0.2 */
#define FILTER_PORT 5000

SEC("xdp")
int xdp_filter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	if (ip->protocol != IPPROTO_UDP || ip->daddr != bpf_htonl(FILTER_IP))
		return XDP_PASS;
	udp = (void *)ip + ip->ihl * 4;
	if ((void *)(udp + 1) > end)
		return XDP_PASS;
	if (udp->dest == bpf_htons(FILTER_PORT))
		return XDP_DROP;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
