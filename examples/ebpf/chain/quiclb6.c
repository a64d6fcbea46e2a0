// SPDX-License-Identifier: Apache-2.0
/*
 * quiclb6: the chain experiment's second downstream, a QUIC load balancer routing by
 * connection ID in the style of QUIC-LB (draft-ietf-quic-load-balancers) and of the
 * "xdp-quic-lb-ipv6-options" example of Krude et al. (CoNEXT '21): the same IPv6 option loop
 * in front of the real work. Ethernet with at most one 802.1Q tag, IPv6 with its extension
 * headers walked as lb6 walks them (lbcommon.h), UDP to port 443, then the QUIC header's
 * destination connection ID (RFC 9000 §17):
 *   - long header (first byte's top bit set): version (4 bytes), DCID length (1 byte, 2..20
 *     accepted here), DCID;
 *   - short header: the DCID right after the first byte, a fixed 8 bytes in this deployment.
 * The DCID's first two bytes (big-endian) are the server ID, an index into the array map
 * `quic_servers`; an entry marked valid gives the server's IPv6 address and MAC. The packet's
 * destination address becomes the server's, the UDP checksum is updated with bpf_csum_diff,
 * the destination MAC becomes the server's and the source MAC the old destination (this
 * node), and it returns XDP_TX. Everything else passes (to the stack, which hashes packets
 * whose DCID the clients chose, e.g. Initials, as a real QUIC-LB does); what lb6 drops for a
 * malformed IPv6 chain, this drops too.
 *
 * What it guarantees downstream (XDP_TX): the same headers at the same offsets as it
 * received; the destination address, MACs and UDP checksum come from map values.
 *
 *   hotplane ebpf map update quiclb6/quic_servers <server id> <addr6 16, mac 6, valid 1, pad 1>
 *
 * Build with -DLB_SELFTEST to have a server ID without an entry create one (2001:db8::5e:ID,
 * 02:00:00:00:5e:ID low byte), so that `hotplane ebpf run` takes the XDP_TX path; never for
 * real use.
 */
#include <linux/udp.h>
#include "lbcommon.h"

#define QUIC_PORT 443
#define QUIC_SERVERS 1024
#define QUIC_LONG_HEADER 0x80
#define QUIC_SHORT_DCID_LEN 8
#define QUIC_MIN_DCID_LEN 2 /* holds the server ID */
#define QUIC_MAX_DCID_LEN 20

struct quic_server {
	__u8 addr6[16];
	__u8 mac[ETH_ALEN];
	__u8 valid;
	__u8 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct quic_server);
	__uint(max_entries, QUIC_SERVERS);
} quic_servers SEC(".maps");

/* Long header up to the first two DCID bytes. */
struct quic_long_hdr {
	__u8 flags;
	__u8 version[4];
	__u8 dcid_len;
	__u8 dcid[QUIC_MIN_DCID_LEN];
};

/* Short header up to the end of the fixed-length DCID. */
struct quic_short_hdr {
	__u8 flags;
	__u8 dcid[QUIC_SHORT_DCID_LEN];
};

#ifdef LB_SELFTEST
static __always_inline struct quic_server *selftest_fill(__u32 sid)
{
	struct quic_server s = {
		.addr6 = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x5e, sid >> 8, sid },
		.mac = { 0x02, 0, 0, 0, 0x5e, sid },
		.valid = 1,
	};

	bpf_map_update_elem(&quic_servers, &sid, &s, BPF_ANY);
	return bpf_map_lookup_elem(&quic_servers, &sid);
}
#endif

SEC("xdp")
int quiclb6(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6;
	struct udphdr *udp;
	struct quic_server *srv;
	__u8 old_daddr[16];
	__u8 *quic, nexthdr;
	__be16 proto;
	__u32 off, sid;
	int ret;

	ret = parse_eth(data, end, &off, &proto);
	if (ret != PARSE_OK)
		return ret;
	if (proto != bpf_htons(ETH_P_IPV6))
		return XDP_PASS;
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
	if (nexthdr != IPPROTO_UDP)
		return XDP_PASS;
	udp = data + off;
	if ((void *)(udp + 1) > end)
		return XDP_PASS;
	if (udp->dest != bpf_htons(QUIC_PORT))
		return XDP_PASS;

	quic = (void *)(udp + 1);
	if ((void *)(quic + 1) > end)
		return XDP_PASS;
	if (*quic & QUIC_LONG_HEADER) {
		struct quic_long_hdr *lh = (void *)quic;
		__u32 dcid_len;

		if ((void *)(lh + 1) > end)
			return XDP_PASS;
		dcid_len = lh->dcid_len;
		if (dcid_len < QUIC_MIN_DCID_LEN || dcid_len > QUIC_MAX_DCID_LEN)
			return XDP_PASS;
		/* The whole DCID must be there: a variable-offset check. */
		if ((void *)lh->dcid + dcid_len > end)
			return XDP_PASS;
		sid = (__u32)lh->dcid[0] << 8 | lh->dcid[1];
	} else {
		struct quic_short_hdr *sh = (void *)quic;

		if ((void *)(sh + 1) > end)
			return XDP_PASS;
		sid = (__u32)sh->dcid[0] << 8 | sh->dcid[1];
	}

	srv = bpf_map_lookup_elem(&quic_servers, &sid);
#ifdef LB_SELFTEST
	if (srv && !srv->valid)
		srv = selftest_fill(sid);
#endif
	if (!srv || !srv->valid)
		return XDP_PASS;

	/* The UDP checksum covers the destination address through the pseudo-header; over
	 * IPv6 it is mandatory, so a zero one (invalid) is left as it is. */
	__builtin_memcpy(old_daddr, &ip6->daddr, sizeof(old_daddr));
	if (udp->check)
		udp->check = udp_csum_mangle(csum_replace(udp->check, old_daddr, srv->addr6, 16));
	__builtin_memcpy(&ip6->daddr, srv->addr6, 16);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, srv->mac, ETH_ALEN);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
