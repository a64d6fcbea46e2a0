// SPDX-License-Identifier: Apache-2.0
/*
 * xdp_lb: a small L4 load balancer.
 *
 * IPv4 TCP and UDP packets to the virtual service (config[0].vip:port) are spread over
 * config[0].count backends by flow; a flow keeps its backend in the `flows` hash map even
 * when the backend set later changes. The packet's destination MAC and IP become the
 * backend's, the source MAC becomes the old destination (this node), the IPv4 and L4
 * checksums are updated incrementally with bpf_csum_diff, and the packet leaves through the
 * port it came in on (XDP_TX). Other packets pass.
 *
 *   hotplane ebpf map update xdp_lb/config 0 <vip, port, count>
 *   hotplane ebpf map update xdp_lb/backends <i> <ip, mac>
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define MAX_BACKENDS 16

struct lb_config {
	__be32 vip;
	__be16 port;
	__u16 count;
};

struct backend {
	__be32 ip;
	__u8 mac[ETH_ALEN];
	__u16 pad;
};

struct flow_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct lb_stats {
	__u64 packets;
	__u64 new_flows;
	__u64 no_backend;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct lb_config);
	__uint(max_entries, 1);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct backend);
	__uint(max_entries, MAX_BACKENDS);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct flow_key);
	__type(value, __u32);
	__uint(max_entries, 65536);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct lb_stats);
	__uint(max_entries, 1);
} stats SEC(".maps");

static __always_inline __u16 csum_fold(__u32 csum)
{
	csum = (csum & 0xffff) + (csum >> 16);
	csum = (csum & 0xffff) + (csum >> 16);
	return (__u16)~csum;
}

/* Replace 4 bytes covered by a 16-bit ones'-complement checksum. */
static __always_inline __u16 csum_replace4(__u16 check, __be32 from, __be32 to)
{
	__u32 sum = bpf_csum_diff(&from, 4, &to, 4, ~check & 0xffff);
	return csum_fold(sum);
}

static __always_inline __u32 flow_hash(const struct flow_key *k)
{
	__u32 h = k->saddr * 0x9e3779b1u;

	h ^= ((__u32)k->sport << 16 | k->dport) * 0x85ebca6bu;
	h ^= k->proto;
	h ^= h >> 15;
	h *= 0xc2b2ae35u;
	h ^= h >> 13;
	return h;
}

SEC("xdp")
int xdp_lb(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct flow_key key = {};
	struct lb_config *cfg;
	struct lb_stats *st;
	struct backend *be;
	__u32 zero = 0, b, *known;
	__u16 *l4check = 0;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5)
		return XDP_PASS;
	if (ip->protocol == IPPROTO_TCP) {
		struct tcphdr *tcp = (void *)(ip + 1);

		if ((void *)(tcp + 1) > end)
			return XDP_PASS;
		key.sport = tcp->source;
		key.dport = tcp->dest;
		l4check = &tcp->check;
	} else if (ip->protocol == IPPROTO_UDP) {
		struct udphdr *udp = (void *)(ip + 1);

		if ((void *)(udp + 1) > end)
			return XDP_PASS;
		key.sport = udp->source;
		key.dport = udp->dest;
		if (udp->check)
			l4check = &udp->check;
	} else {
		return XDP_PASS;
	}
	cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg || ip->daddr != cfg->vip || key.dport != cfg->port)
		return XDP_PASS;
	st = bpf_map_lookup_elem(&stats, &zero);
	if (st)
		st->packets++;
	key.saddr = ip->saddr;
	key.daddr = ip->daddr;
	key.proto = ip->protocol;

	known = bpf_map_lookup_elem(&flows, &key);
	if (known) {
		b = *known;
	} else {
		if (cfg->count == 0 || cfg->count > MAX_BACKENDS) {
			if (st)
				st->no_backend++;
			return XDP_DROP;
		}
		b = flow_hash(&key) % cfg->count;
		bpf_map_update_elem(&flows, &key, &b, BPF_ANY);
		if (st)
			st->new_flows++;
	}
	be = bpf_map_lookup_elem(&backends, &b);
	if (!be || be->ip == 0) {
		if (st)
			st->no_backend++;
		return XDP_DROP;
	}

	ip->check = csum_replace4(ip->check, ip->daddr, be->ip);
	if (l4check)
		*l4check = csum_replace4(*l4check, ip->daddr, be->ip);
	ip->daddr = be->ip;
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, be->mac, ETH_ALEN);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
