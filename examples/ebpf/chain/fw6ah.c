// SPDX-License-Identifier: Apache-2.0
/*
 * fw6ah: the seed's firewall (docs/chain.md, ../shared/briefs/chain.md §1): fw6's filter
 * (IPv6/TCP only, sources in the `blocked` hash map dropped), then a 24-byte IPv6
 * Authentication Header (RFC 4302) inserted between the IPv6 header and TCP: next header TCP,
 * length 4 (in 32-bit words, minus 2), SPI 0x00000100, a sequence number from the per-CPU
 * counter `ah_seq` and an all-zero 12-byte ICV. The AH is a fixed-size option, which is what
 * makes the downstream's parse redundant.
 *
 * What a downstream program may rely on for every packet this passes:
 *   - length >= 98 (74 + 24), bytes 12..13 = 86 dd (IPv6), byte 20 (next header) = 33 (AH);
 *   - the AH at 54: byte 54 = 06 (TCP), 55 = 04, 56..57 = 00 00, 58..61 = 00 00 01 00 (SPI),
 *     66..77 = 0 (ICV); TCP at the fixed offset 78.
 * The sequence number (62..65) and payload length (18..19) vary; the IPv6 version nibble is
 * not checked, so nothing is known about it. Frames that are not IPv6/TCP, blocked sources
 * and frames whose headroom cannot grow are dropped.
 *
 *   hotplane ebpf map update fw6ah/blocked <16-byte IPv6 source> 1
 */
#include "fw6common.h"

#define AH_SPI 0x00000100
#define AH_LEN 24 /* 12-byte fixed part + 12-byte ICV (HMAC-SHA1-96 sized) */

struct ah_hdr {
	__u8 nexthdr;
	__u8 hdrlen; /* 32-bit words minus 2: (24 / 4) - 2 = 4 */
	__be16 reserved;
	__be32 spi;
	__be32 seq;
	__u8 icv[12];
};

_Static_assert(sizeof(struct ah_hdr) == AH_LEN, "AH is 24 bytes");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} ah_seq SEC(".maps");

SEC("xdp")
int fw6ah(struct xdp_md *ctx)
{
	struct ah_hdr *ah;
	__u32 zero = 0, seq = 0, *counter;

	if (fw6_filter(ctx) != XDP_PASS)
		return XDP_DROP;
	/* Per CPU, so no atomic is needed; RFC 4302 numbers from 1. */
	counter = bpf_map_lookup_elem(&ah_seq, &zero);
	if (counter)
		seq = ++*counter;
	ah = fw6_open_gap(ctx, IPPROTO_AH, AH_LEN);
	if (!ah)
		return XDP_DROP;
	ah->nexthdr = IPPROTO_TCP;
	ah->hdrlen = AH_LEN / 4 - 2;
	ah->reserved = 0;
	ah->spi = bpf_htonl(AH_SPI);
	ah->seq = bpf_htonl(seq);
	__builtin_memset(ah->icv, 0, sizeof(ah->icv));
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
