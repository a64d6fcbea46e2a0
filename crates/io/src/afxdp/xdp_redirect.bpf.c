// SPDX-License-Identifier: (GPL-2.0 OR Apache-2.0)
//
// hotplane's AF_XDP redirect program: every frame received on a queue that has an AF_XDP socket
// in `hotplane_xsks` goes to that socket; frames on other queues continue to the kernel stack.
//
// The object next to this file (xdp_redirect.bpf.o) is checked in, so building hotplane does not
// need clang. Regenerate it with ./build-xdp.sh after editing this file.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} hotplane_xsks SEC(".maps");

SEC("xdp")
int hotplane_redirect(struct xdp_md *ctx)
{
	return bpf_redirect_map(&hotplane_xsks, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "Dual BSD/GPL";
