//! The traffic generator behind a `mem` port's receive side.

use crate::PortCounters;
use crossbeam_queue::ArrayQueue;
use hotplane_core::wire::{udp_checksum, EthernetAddress, Stamp, UdpFrame};
use hotplane_core::{Batch, PoolCache};
use std::net::IpAddr;
use std::sync::Arc;

/// Which field advances from one generated flow to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Vary {
    SrcIp,
    DstIp,
    #[default]
    SrcPort,
    DstPort,
}

/// What a generator sends. Flow `i` is the base 5-tuple with the `vary` field advanced by `i`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GenSpec {
    /// Number of flows.
    pub flows: u32,
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub vary: Vary,
    pub src_mac: EthernetAddress,
    pub dst_mac: EthernetAddress,
    pub vlan: Option<u16>,
    /// Frame size in bytes, without the 4-byte FCS (64 as testpmd's default; 60 is the
    /// Ethernet minimum).
    pub size: u16,
    /// Simple IMIX instead of `size`: 64, 594 and 1518 bytes on the wire (with FCS) in the
    /// ratio 7:4:1.
    pub imix: bool,
    /// Total packets over all flows; unlimited when absent.
    pub count: Option<u64>,
    /// Stop after this many milliseconds (from the first packet), whatever the count.
    pub duration_ms: Option<u64>,
    /// Total packets per second over all flows; as fast as the worker polls when absent.
    pub rate_pps: Option<f64>,
    /// Stamp every packet with flow id, sequence number and transmit time (see `wire::Stamp`).
    pub stamp: bool,
    /// Hand out frames pre-built once in the worker's pool instead of writing each one, as
    /// DPDK's null driver does: measures the data plane, not packet synthesis. Needs
    /// `stamp = false`, a fixed size, and a pool serving only this generator.
    pub prebuilt: bool,
    /// Stamp flow id of the first flow; defaults to 4096 x the port id.
    pub first_flow_id: Option<u16>,
}

impl Default for GenSpec {
    fn default() -> Self {
        Self {
            flows: 1,
            src_ip: IpAddr::from([10, 0, 0, 1]),
            dst_ip: IpAddr::from([10, 1, 0, 1]),
            src_port: 1024,
            dst_port: 5000,
            vary: Vary::SrcPort,
            src_mac: EthernetAddress::local(1),
            dst_mac: EthernetAddress::local(2),
            vlan: None,
            size: 64,
            imix: false,
            count: None,
            duration_ms: None,
            rate_pps: None,
            stamp: true,
            prebuilt: false,
            first_flow_id: None,
        }
    }
}

/// Simple IMIX: 64, 594 and 1518 bytes on the wire in the ratio 7:4:1. Frames here exclude the
/// 4-byte FCS the NIC appends, as `size` does.
const IMIX: [(u16, u32); 3] = [(60, 7), (590, 4), (1514, 1)];

impl GenSpec {
    /// The headers of generated flow `i`.
    pub fn frame(&self, i: u32) -> UdpFrame {
        let bump_ip = |ip: IpAddr| match ip {
            IpAddr::V4(a) => IpAddr::from(u32::from(a).wrapping_add(i).to_be_bytes()),
            IpAddr::V6(a) => IpAddr::from(u128::from(a).wrapping_add(i as u128).to_be_bytes()),
        };
        let bump_port = |p: u16| p.wrapping_add(i as u16);
        let mut f = UdpFrame {
            src_mac: self.src_mac,
            dst_mac: self.dst_mac,
            vlan: self.vlan,
            src_ip: self.src_ip,
            dst_ip: self.dst_ip,
            src_port: self.src_port,
            dst_port: self.dst_port,
        };
        match self.vary {
            Vary::SrcIp => f.src_ip = bump_ip(f.src_ip),
            Vary::DstIp => f.dst_ip = bump_ip(f.dst_ip),
            Vary::SrcPort => f.src_port = bump_port(f.src_port),
            Vary::DstPort => f.dst_port = bump_port(f.dst_port),
        }
        f
    }

    /// The sizes cycled through, in order (IMIX interleaves them evenly).
    fn size_pattern(&self) -> Vec<u16> {
        if !self.imix {
            return vec![self.size];
        }
        let mut out = Vec::new();
        let mut left: Vec<(u16, u32)> = IMIX.to_vec();
        while left.iter().any(|&(_, n)| n > 0) {
            for (s, n) in &mut left {
                if *n > 0 {
                    out.push(*s);
                    *n -= 1;
                }
            }
        }
        out
    }

    /// Mean frame size over the size pattern (for rates given in bits per second).
    pub fn mean_frame_bytes(&self) -> f64 {
        let p = self.size_pattern();
        p.iter().map(|s| *s as f64).sum::<f64>() / p.len().max(1) as f64
    }

    /// Check the spec; the message names the field at fault.
    /// The smallest frame this spec can make: its headers (and stamp), at least the 60-byte
    /// Ethernet minimum.
    pub fn min_size(&self) -> u16 {
        let hdr = self.frame(0).header_len();
        let min = hdr + if self.stamp { Stamp::<&[u8]>::LEN } else { 0 };
        min.max(60) as u16
    }

    pub fn validate(&self, max_frame: usize) -> Result<(), GenSpecError> {
        if self.flows == 0 || self.flows > 65536 {
            return Err(GenSpecError::Flows(self.flows));
        }
        let first = self.first_flow_id.unwrap_or(0) as u32;
        if first + self.flows > 65536 {
            return Err(GenSpecError::FlowIds { first, flows: self.flows });
        }
        if self.src_ip.is_ipv4() != self.dst_ip.is_ipv4() {
            return Err(GenSpecError::MixedFamilies);
        }
        let hdr = self.frame(0).header_len();
        let min = hdr + if self.stamp { Stamp::<&[u8]>::LEN } else { 0 };
        for s in self.size_pattern() {
            if (s as usize) < min.max(60) {
                return Err(GenSpecError::TooSmall {
                    size: s,
                    min: min.max(60),
                    stamp: self.stamp,
                });
            }
            if s as usize > max_frame {
                return Err(GenSpecError::TooLarge { size: s, max_frame });
            }
        }
        if let Some(r) = self.rate_pps {
            if !(r.is_finite() && r > 0.0) {
                return Err(GenSpecError::Rate(r));
            }
        }
        if self.prebuilt && self.stamp {
            return Err(GenSpecError::PrebuiltStamp);
        }
        if self.prebuilt && self.imix {
            return Err(GenSpecError::PrebuiltImix);
        }
        Ok(())
    }
}

/// A generator setting out of range; the message starts with the field at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenSpecError {
    #[error("flows = {0}: must be 1 to 65536")]
    Flows(u32),
    #[error("first_flow_id = {first} with flows = {flows}: flow ids must fit 16 bits")]
    FlowIds { first: u32, flows: u32 },
    #[error("src_ip and dst_ip: must both be IPv4 or both IPv6")]
    MixedFamilies,
    #[error("size = {size}: below {min} bytes (headers{} and the 60-byte Ethernet minimum)", if *stamp { " + 20-byte stamp" } else { "" })]
    TooSmall { size: u16, min: usize, stamp: bool },
    #[error("size = {size}: larger than the {max_frame} bytes a pool buffer holds")]
    TooLarge { size: u16, max_frame: usize },
    #[error("rate_pps = {0}: must be a positive number")]
    Rate(f64),
    #[error("prebuilt = true: pre-built frames carry no stamp; also set stamp = false")]
    PrebuiltStamp,
    #[error("prebuilt = true: needs a fixed size, not imix")]
    PrebuiltImix,
}

/// One generated flow on one queue.
pub(crate) struct GenFlow {
    pub id: u16,
    pub frame: UdpFrame,
    /// One template per size in the pattern.
    templates: Vec<Vec<u8>>,
    pub seq: u32,
    pub sent: u64,
}

impl GenFlow {
    pub fn frame_tuple(&self) -> String {
        let f = &self.frame;
        format!("udp {}:{} -> {}:{}", f.src_ip, f.src_port, f.dst_ip, f.dst_port)
    }
}

/// Per-queue generator state.
pub(crate) struct Generator {
    port: u16,
    pub flows: Vec<GenFlow>,
    next_flow: usize,
    sizes: Vec<u16>,
    next_size: usize,
    payload_off: usize,
    remaining: Option<u64>,
    ns_per_packet: Option<f64>,
    duration_ns: Option<u64>,
    start_ns: u64,
    generated: u64,
    stamp: bool,
    prebuilt: bool,
    v6: bool,
    pub inject: Arc<ArrayQueue<Vec<u8>>>,
}

impl Generator {
    /// The generator for queue `q` of `queues`: flows `i` with `i % queues == q`.
    pub fn new(
        spec: &GenSpec,
        port: u16,
        q: usize,
        queues: usize,
        inject: Arc<ArrayQueue<Vec<u8>>>,
    ) -> Self {
        let first = spec.first_flow_id.unwrap_or(port.wrapping_mul(4096)) as u32;
        let sizes = spec.size_pattern();
        let max = *sizes.iter().max().unwrap_or(&spec.size) as usize;
        let flows: Vec<GenFlow> = (0..spec.flows)
            .filter(|i| *i as usize % queues == q)
            .map(|i| {
                let frame = spec.frame(i);
                let hdr = frame.header_len();
                let templates = sizes
                    .iter()
                    .map(|&s| {
                        let mut buf = vec![0u8; max.max(hdr)];
                        let n = frame.emit(&vec![0u8; s as usize - hdr], &mut buf).unwrap_or(0);
                        buf.truncate(n);
                        if frame.src_ip.is_ipv4() && n >= hdr {
                            // Zero = "no checksum" for IPv4: stays valid when the stamp changes.
                            buf[hdr - 2..hdr].copy_from_slice(&[0, 0]);
                        }
                        buf
                    })
                    .collect();
                GenFlow { id: (first + i) as u16, frame, templates, seq: 0, sent: 0 }
            })
            .collect();
        let share = flows.len() as f64 / spec.flows as f64;
        let remaining = spec.count.map(|c| {
            // Split the count the way flows are split, remainder to the lowest queues.
            let per_flow = c / spec.flows as u64;
            let extra = c % spec.flows as u64;
            (0..spec.flows as u64)
                .filter(|i| *i as usize % queues == q)
                .map(|i| per_flow + u64::from(i < extra))
                .sum()
        });
        let payload_off = spec.frame(0).header_len();
        Self {
            port,
            flows,
            next_flow: 0,
            sizes,
            next_size: 0,
            payload_off,
            remaining,
            ns_per_packet: spec.rate_pps.map(|r| 1e9 / (r * share)).filter(|x| x.is_finite()),
            duration_ns: spec.duration_ms.map(|ms| ms * 1_000_000),
            start_ns: 0,
            generated: 0,
            stamp: spec.stamp,
            prebuilt: spec.prebuilt,
            v6: spec.src_ip.is_ipv6(),
            inject,
        }
    }

    /// Frame length and bytes every pool buffer should hold for `prebuilt` mode.
    pub fn prebuilt_frame(&self, buffer_index: u32) -> Option<&[u8]> {
        if self.flows.is_empty() {
            return None;
        }
        let f = &self.flows[buffer_index as usize % self.flows.len()];
        Some(&f.templates[0])
    }

    pub fn done(&self) -> bool {
        self.flows.is_empty() || self.remaining == Some(0)
    }

    /// Whether the configured duration has run out at `now`.
    fn expired(&mut self, now: u64) -> bool {
        if let Some(d) = self.duration_ns {
            if self.start_ns != 0 && now.saturating_sub(self.start_ns) >= d {
                self.remaining = Some(0);
                return true;
            }
        }
        false
    }

    pub fn recv(
        &mut self,
        batch: &mut Batch,
        cache: &mut PoolCache,
        now: u64,
        c: &PortCounters,
    ) -> usize {
        let added = super::receive_injected(&self.inject, self.port, now, batch, cache, c);
        if self.flows.is_empty() {
            return added;
        }
        if self.start_ns == 0 {
            self.start_ns = now;
        }
        if self.expired(now) {
            return added;
        }
        let mut want = batch.room() as u64;
        if let Some(r) = self.remaining {
            want = want.min(r);
        }
        if let Some(ns) = self.ns_per_packet {
            let due = ((now - self.start_ns) as f64 / ns) as u64 + 1;
            want = want.min(due.saturating_sub(self.generated));
        }
        let mut bytes = 0u64;
        let mut made = 0u64;
        while made < want {
            let Some(mut p) = cache.alloc() else {
                c.rx_dropped.add(1);
                break;
            };
            let fi = self.next_flow;
            self.next_flow = if fi + 1 == self.flows.len() { 0 } else { fi + 1 };
            let flow = &mut self.flows[fi];
            let tpl = &flow.templates[self.next_size];
            if self.sizes.len() > 1 {
                self.next_size = (self.next_size + 1) % self.sizes.len();
            }
            if self.prebuilt {
                let _ = p.set_len(tpl.len());
            } else {
                let _ = p.set_frame(tpl);
                if self.stamp {
                    // Paced traffic is stamped with its scheduled time, so time spent waiting
                    // for the worker to poll counts as latency, as it would on a real queue.
                    let ts = match self.ns_per_packet {
                        Some(ns) => self.start_ns + (self.generated as f64 * ns) as u64,
                        None => now,
                    };
                    let data = p.data_mut();
                    let _ = Stamp::emit(&mut data[self.payload_off..], flow.id, flow.seq, ts);
                    if self.v6 {
                        let l4 = self.payload_off - 8;
                        data[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]);
                        let sum = udp_checksum(flow.frame.src_ip, flow.frame.dst_ip, &data[l4..]);
                        data[l4 + 6..l4 + 8].copy_from_slice(&sum.to_be_bytes());
                    }
                }
            }
            flow.seq = flow.seq.wrapping_add(1);
            flow.sent += 1;
            p.meta.in_port = self.port;
            p.meta.rx_ts = now;
            bytes += p.len() as u64;
            let _ = batch.push(p);
            made += 1;
            self.generated += 1;
        }
        if let Some(r) = &mut self.remaining {
            *r -= made;
        }
        c.rx_packets.add(made);
        c.rx_bytes.add(bytes);
        added + made as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_field() {
        let ok = GenSpec::default();
        assert!(ok.validate(1920).is_ok());
        let e = GenSpec { size: 50, ..ok.clone() }.validate(1920).unwrap_err().to_string();
        assert!(e.starts_with("size = 50"), "{e}");
        let e = GenSpec { prebuilt: true, ..ok.clone() }.validate(1920).unwrap_err().to_string();
        assert!(e.contains("stamp = false"), "{e}");
        let e = GenSpec { dst_ip: "fd00::1".parse().unwrap(), ..ok.clone() }
            .validate(1920)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("src_ip and dst_ip"), "{e}");
        let e = GenSpec { size: 3000, ..ok.clone() }.validate(1920).unwrap_err().to_string();
        assert!(e.contains("pool buffer"), "{e}");
        let e = GenSpec { rate_pps: Some(-1.0), ..ok }.validate(1920).unwrap_err().to_string();
        assert!(e.starts_with("rate_pps"), "{e}");
    }

    #[test]
    fn imix_pattern_is_7_4_1() {
        let p = GenSpec { imix: true, ..Default::default() }.size_pattern();
        assert_eq!(p.len(), 12);
        assert_eq!(p.iter().filter(|&&s| s == 60).count(), 7);
        assert_eq!(p.iter().filter(|&&s| s == 590).count(), 4);
        assert_eq!(p.iter().filter(|&&s| s == 1514).count(), 1);
    }

    #[test]
    fn flows_vary_the_chosen_field() {
        let s = GenSpec { vary: Vary::DstIp, ..Default::default() };
        assert_eq!(s.frame(3).dst_ip, "10.1.0.4".parse::<IpAddr>().unwrap());
        let s = GenSpec { vary: Vary::SrcPort, ..Default::default() };
        assert_eq!(s.frame(3).src_port, 1027);
    }
}
