// SPDX-License-Identifier: Apache-2.0
/* dummy: return a verdict and nothing else (the reference work's baseline). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_dummy(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
