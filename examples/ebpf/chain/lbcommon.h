/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lbcommon.h: the parsing and checksum code the chain experiment's downstream load balancers
 * share (lb6.c, quiclb6.c), written after cilium's bpf/lib (eth.h, ipv6.h ipv6_hdrlen(),
 * csum.h). Every parse step returns PARSE_OK or the XDP action the program should return.
 */
#ifndef LBCOMMON_H
#define LBCOMMON_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

/* Extension headers walked before giving up, as cilium's IPV6_MAX_HEADERS. */
#define IPV6_MAX_HEADERS 4

#define PARSE_OK (-1)

/* One 802.1Q tag (linux/if_vlan.h has it only in the kernel's headers). */
struct vlan_hdr {
	__be16 tci;
	__be16 encapsulated_proto;
};

/*
 * Ethernet with at most one 802.1Q tag: `*l3_off` becomes the offset of the network header
 * (14 or 18) and `*proto` its ethertype.
 */
static __always_inline int parse_eth(void *data, void *end, __u32 *l3_off, __be16 *proto)
{
	struct ethhdr *eth = data;
	struct vlan_hdr *vlan = (void *)(eth + 1);

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	*proto = eth->h_proto;
	*l3_off = sizeof(struct ethhdr);
	if (eth->h_proto == bpf_htons(ETH_P_8021Q)) {
		if ((void *)(vlan + 1) > end)
			return XDP_PASS;
		*proto = vlan->encapsulated_proto;
		*l3_off += sizeof(struct vlan_hdr);
	}
	return PARSE_OK;
}

/*
 * Skip IPv6 extension headers like cilium's ipv6_hdrlen(): `*off` is the offset just past the
 * fixed IPv6 header and `*nexthdr` its next header on entry, the upper-layer header's on
 * success. Hop-by-Hop, Routing and Destination Options are (hdrlen + 1) * 8 bytes long, the
 * Authentication Header (hdrlen + 2) * 4. A fragment is passed to the stack (the LB cannot
 * see the ports of later fragments); "no next header" and a truncated header are dropped, as
 * cilium drops them (DROP_INVALID_EXTHDR). The loop looks at IPV6_MAX_HEADERS next-header
 * values, so, as in cilium, at most IPV6_MAX_HEADERS - 1 extension headers are accepted and
 * longer chains are dropped too. The loop is unrolled: hotplane's verifier, like older Linux
 * ones, wants straight-line code here.
 */
static __always_inline int ipv6_skip_exthdrs(void *data, void *end, __u32 *off, __u8 *nexthdr)
{
	__u32 o = *off;
	__u8 nh = *nexthdr;

#pragma unroll
	for (int i = 0; i < IPV6_MAX_HEADERS; i++) {
		struct ipv6_opt_hdr *opt = data + o;

		switch (nh) {
		case IPPROTO_NONE:
			return XDP_DROP;
		case IPPROTO_FRAGMENT:
			return XDP_PASS;
		case IPPROTO_HOPOPTS:
		case IPPROTO_ROUTING:
		case IPPROTO_AH:
		case IPPROTO_DSTOPTS:
			if ((void *)(opt + 1) > end)
				return XDP_DROP;
			if (nh == IPPROTO_AH)
				o += ((__u32)opt->hdrlen + 2) << 2;
			else
				o += ((__u32)opt->hdrlen + 1) << 3;
			nh = opt->nexthdr;
			break;
		default:
			*off = o;
			*nexthdr = nh;
			return PARSE_OK;
		}
	}
	return XDP_DROP;
}

static __always_inline __u16 csum_fold(__u32 csum)
{
	csum = (csum & 0xffff) + (csum >> 16);
	csum = (csum & 0xffff) + (csum >> 16);
	return (__u16)~csum;
}

/*
 * A 16-bit ones'-complement checksum after the `size` bytes at `from` (covered by it) became
 * those at `to` (RFC 1624 incremental update; size a multiple of 4).
 */
static __always_inline __u16 csum_replace(__u16 check, void *from, void *to, __u32 size)
{
	return csum_fold(bpf_csum_diff(from, size, to, size, ~check & 0xffff));
}

/* A UDP checksum of 0 means "none"; a computed 0 is sent as 0xffff (RFC 768). */
static __always_inline __u16 udp_csum_mangle(__u16 check)
{
	return check ? check : 0xffff;
}

#endif
