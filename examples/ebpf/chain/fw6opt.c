// SPDX-License-Identifier: Apache-2.0
/*
 * fw6opt: a variant of the chain experiment's firewall that lengthens the downstream's
 * extension-header loop. fw6's filter (IPv6/TCP only, sources in the `blocked` hash map
 * dropped), then three stacked 8-byte IPv6 extension headers (24 bytes) inserted between the
 * IPv6 header and TCP, all of kinds cilium's ipv6_hdrlen() walks:
 *   Hop-by-Hop Options (PadN) -> Destination Options (PadN) -> Routing (type 0,
 *   segments left 0, so every node skips it, RFC 5095) -> TCP.
 *
 * What a downstream program may rely on for every packet this passes:
 *   - length >= 98 (74 + 24), bytes 12..13 = 86 dd (IPv6), byte 20 (next header) = 00 (HOP);
 *   - 54..61 = 3c 00 01 04 00 00 00 00 (HOP: next DEST, length 0, PadN of 4 zero bytes);
 *   - 62..69 = 2b 00 01 04 00 00 00 00 (DEST: next ROUTING, PadN);
 *   - 70..77 = 06 00 00 00 00 00 00 00 (ROUTING: next TCP, type 0, segments left 0);
 *   - TCP at the fixed offset 78.
 * The payload length (18..19) varies and the IPv6 version nibble is not checked. Frames that
 * are not IPv6/TCP, blocked sources and frames whose headroom cannot grow are dropped.
 *
 *   hotplane ebpf map update fw6opt/blocked <16-byte IPv6 source> 1
 */
#include "fw6common.h"

#define OPT_LEN 8 /* each header: (hdrlen 0 + 1) * 8 bytes */

/* Hop-by-Hop or Destination Options header carrying one PadN option that fills it. */
struct opt8_hdr {
	__u8 nexthdr;
	__u8 hdrlen;
	__u8 padn_type; /* 1: PadN */
	__u8 padn_len;  /* 4 zero bytes follow */
	__u8 padn[4];
};

/* Routing header, type 0 with no segments left: no addresses, 4 reserved bytes. */
struct rt8_hdr {
	__u8 nexthdr;
	__u8 hdrlen;
	__u8 type;
	__u8 segments_left;
	__u8 reserved[4];
};

struct opt_stack {
	struct opt8_hdr hop;
	struct opt8_hdr dest;
	struct rt8_hdr rt;
};

_Static_assert(sizeof(struct opt_stack) == 3 * OPT_LEN, "three 8-byte headers");

static __always_inline void write_padn(struct opt8_hdr *h, __u8 next)
{
	h->nexthdr = next;
	h->hdrlen = 0;
	h->padn_type = 1;
	h->padn_len = 4;
	__builtin_memset(h->padn, 0, sizeof(h->padn));
}

SEC("xdp")
int fw6opt(struct xdp_md *ctx)
{
	struct opt_stack *opts;

	if (fw6_filter(ctx) != XDP_PASS)
		return XDP_DROP;
	opts = fw6_open_gap(ctx, IPPROTO_HOPOPTS, sizeof(*opts));
	if (!opts)
		return XDP_DROP;
	write_padn(&opts->hop, IPPROTO_DSTOPTS);
	write_padn(&opts->dest, IPPROTO_ROUTING);
	opts->rt.nexthdr = IPPROTO_TCP;
	opts->rt.hdrlen = 0;
	opts->rt.type = 0;
	opts->rt.segments_left = 0;
	__builtin_memset(opts->rt.reserved, 0, sizeof(opts->rt.reserved));
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
