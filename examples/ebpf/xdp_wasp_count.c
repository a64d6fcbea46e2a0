// SPDX-License-Identifier: Apache-2.0
/*
 * xdp_wasp_count: WASP's `count` (examples/wasp/count.s) written as an XDP program with a BPF
 * hash map, the anchor `hotplane bench wasp` measures the active-packet `count` against.
 *
 * For an IPv4/UDP packet to port 9277 carrying a WASP shim with at least one key and one
 * scratchpad word: counter[key 0] += 1 (created at 1), and the packet is dropped once the
 * counter is above the threshold in scratchpad word 0. Everything else passes. The shim's
 * checksum is not verified (the active packet's filter does verify it: the anchor is kinder).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define WASP_PORT 9277

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u64);
	__type(value, __u64);
	__uint(max_entries, 65536);
} counters SEC(".maps");

struct shim {
	__u8 version, flags, next_header, nkeys, code_len, scratch_len, fault_pc, fault_code;
	__be32 cid;
	__be16 checksum, reserved;
	__be64 key0;
};

SEC("xdp")
int xdp_wasp_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	struct shim *shim = (void *)(udp + 1);
	__be64 *threshold = (void *)(shim + 1);

	if ((void *)(threshold + 1) > end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	if (udp->dest != bpf_htons(WASP_PORT) || shim->nkeys != 1 || shim->scratch_len < 8)
		return XDP_PASS;

	__u64 key = shim->key0;
	__u64 *counter = bpf_map_lookup_elem(&counters, &key);
	__u64 now = 1;
	if (counter) {
		now = *counter + 1;
		*counter = now;
	} else {
		bpf_map_update_elem(&counters, &key, &now, BPF_ANY);
	}
	return now > bpf_be64_to_cpu(*threshold) ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
