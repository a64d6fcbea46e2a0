//! The traffic generator behind a `mem` port's receive side.

use crate::PortCounters;
use crossbeam_queue::ArrayQueue;
use hotplane_core::wire::{EthernetAddress, Stamp, UdpFrame, L4};
use hotplane_core::{Batch, PoolCache};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The transport a generator sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    #[default]
    Udp,
    /// TCP segments with `tcp_flags`; the stamp is the segment's payload.
    Tcp,
    /// ICMP (ICMPv6) echo requests, identifier = the source port; the stamp is the payload.
    Icmp,
}

/// The slowest and fastest rates a generator paces (packets per second).
pub const MIN_RATE: f64 = 1e-3;
pub const MAX_RATE: f64 = 1e10;

/// A rate the pacer can hold: finite, from [`MIN_RATE`] to [`MAX_RATE`].
pub fn check_rate(pps: f64) -> Result<f64, GenSpecError> {
    if (MIN_RATE..=MAX_RATE).contains(&pps) {
        Ok(pps)
    } else {
        Err(GenSpecError::Rate(pps))
    }
}

/// TCP flags written as tcpdump shows them: `S` (SYN), `A` (ACK), `F`, `R`, `P`, `U`, or `.`
/// for none; `SA` is SYN+ACK.
pub fn parse_tcp_flags(text: &str) -> Result<u8, GenSpecError> {
    let mut flags = 0u8;
    for c in text.chars() {
        flags |= match c.to_ascii_uppercase() {
            'F' => 0x01,
            'S' => 0x02,
            'R' => 0x04,
            'P' => 0x08,
            'A' => 0x10,
            'U' => 0x20,
            '.' => 0,
            _ => return Err(GenSpecError::TcpFlags(text.to_string())),
        };
    }
    Ok(flags)
}

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
    /// UDP (default), TCP or ICMP echo requests.
    pub proto: Proto,
    /// TCP flags (`proto = "tcp"`), as tcpdump writes them: `S` by default.
    pub tcp_flags: String,
    /// Send the frames of this capture (pcap or pcapng) as they are, in order, cycling; each
    /// frame counts as a flow. Without `count` or `duration_ms`, one pass through the file.
    /// Addresses, sizes, `proto` and the stamp do not apply.
    pub pcap: Option<PathBuf>,
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
            proto: Proto::Udp,
            tcp_flags: "S".into(),
            pcap: None,
        }
    }
}

/// Simple IMIX: 64, 594 and 1518 bytes on the wire in the ratio 7:4:1. Frames here exclude the
/// 4-byte FCS the NIC appends, as `size` does.
const IMIX: [(u16, u32); 3] = [(60, 7), (590, 4), (1514, 1)];

impl GenSpec {
    /// The transport header of generated frames.
    pub fn l4(&self) -> L4 {
        match self.proto {
            Proto::Udp => L4::Udp,
            Proto::Tcp => L4::Tcp { flags: parse_tcp_flags(&self.tcp_flags).unwrap_or(0x02) },
            Proto::Icmp => L4::IcmpEcho,
        }
    }

    /// The addresses and ports of generated flow `i`.
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
        let hdr = self.frame(0).header_len_with(self.l4());
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
        parse_tcp_flags(&self.tcp_flags)?;
        if let Some(r) = self.rate_pps {
            check_rate(r)?;
        }
        if self.pcap.is_some() {
            // The file's frames are checked when the port opens.
            return if self.prebuilt { Err(GenSpecError::PrebuiltPcap) } else { Ok(()) };
        }
        let hdr = self.frame(0).header_len_with(self.l4());
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
    #[error("rate_pps = {0}: from {MIN_RATE} to {MAX_RATE:e} packets per second")]
    Rate(f64),
    #[error("prebuilt = true: pre-built frames carry no stamp; also set stamp = false")]
    PrebuiltStamp,
    #[error("prebuilt = true: needs a fixed size, not imix")]
    PrebuiltImix,
    #[error("prebuilt = true: not with pcap (its frames differ)")]
    PrebuiltPcap,
    #[error("tcp_flags = \"{0}\": letters of FSRPAU (tcpdump's), or `.` for none")]
    TcpFlags(String),
}

/// One generated flow on one queue.
pub(crate) struct GenFlow {
    pub id: u16,
    pub frame: UdpFrame,
    /// What reports call it (`tcp 10.0.0.1:1024 -> 10.1.0.1:5000`, `pcap frame 3`).
    label: String,
    /// One template per size in the pattern.
    templates: Vec<Vec<u8>>,
    pub seq: u32,
    pub sent: u64,
}

impl GenFlow {
    pub fn frame_tuple(&self) -> String {
        self.label.clone()
    }
}

/// A generator's rate, changed while it runs (`MemHandle::set_rate`).
#[derive(Debug, Default)]
pub(crate) struct RateControl {
    /// Packets per second over all queues (f64 bits); 0: as fast as possible.
    pps_bits: AtomicU64,
    /// Bumped by each change; generators compare it once per poll.
    changes: AtomicU64,
}

impl RateControl {
    pub fn set(&self, pps: Option<f64>) {
        self.store(pps.unwrap_or(0.0));
    }

    /// Send nothing until the next `set`.
    pub fn pause(&self) {
        self.store(-1.0);
    }

    fn store(&self, pps: f64) {
        self.pps_bits.store(pps.to_bits(), Ordering::Relaxed);
        self.changes.fetch_add(1, Ordering::Release);
    }

    /// The rate, `None` for as fast as possible; `Err` while paused.
    fn get(&self) -> Result<Option<f64>, ()> {
        match f64::from_bits(self.pps_bits.load(Ordering::Relaxed)) {
            r if r < 0.0 => Err(()),
            r => Ok(Some(r).filter(|r| *r > 0.0)),
        }
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
    /// This queue's share of the flows (of a rate given for all).
    share: f64,
    rate: Arc<RateControl>,
    rate_seen: u64,
    duration_ns: Option<u64>,
    start_ns: u64,
    /// Pacing restarts when the rate changes: packets made since `pace_start_ns`.
    pace_start_ns: u64,
    paced: u64,
    paused: bool,
    stamp: bool,
    prebuilt: bool,
    l4: L4,
    /// Checksums cover the stamp: recomputed for each packet (all but UDP over IPv4).
    checksum_each: bool,
    pub inject: Arc<ArrayQueue<Vec<u8>>>,
}

impl Generator {
    /// The generator for queue `q` of `queues`: flows `i` with `i % queues == q`. `captured`
    /// holds the frames of `spec.pcap`, each a flow of its own, sent as they are.
    pub fn new(
        spec: &GenSpec,
        port: u16,
        (q, queues): (usize, usize),
        captured: Option<&[Vec<u8>]>,
        rate: Arc<RateControl>,
        inject: Arc<ArrayQueue<Vec<u8>>>,
    ) -> Self {
        let first = spec.first_flow_id.unwrap_or(port.wrapping_mul(4096)) as u32;
        let l4 = spec.l4();
        let nflows = captured.map_or(spec.flows, |c| c.len() as u32).max(1);
        let mine = |i: &u32| *i as usize % queues == q;
        let (sizes, flows): (Vec<u16>, Vec<GenFlow>) = match captured {
            Some(frames) => {
                let flows = (0..frames.len() as u32)
                    .filter(mine)
                    .map(|i| GenFlow {
                        id: (first + i) as u16,
                        frame: spec.frame(0),
                        label: format!("pcap frame {i}"),
                        templates: vec![frames[i as usize].clone()],
                        seq: 0,
                        sent: 0,
                    })
                    .collect();
                (vec![0], flows)
            }
            None => {
                let sizes = spec.size_pattern();
                let max = *sizes.iter().max().unwrap_or(&spec.size) as usize;
                let flows = (0..spec.flows)
                    .filter(mine)
                    .map(|i| {
                        let frame = spec.frame(i);
                        let templates =
                            sizes.iter().map(|&s| template(&frame, l4, s, max)).collect();
                        let name = match spec.proto {
                            Proto::Udp => "udp",
                            Proto::Tcp => "tcp",
                            Proto::Icmp => "icmp",
                        };
                        let f = &frame;
                        let label = match spec.proto {
                            Proto::Icmp => {
                                format!("{name} {} -> {} id {}", f.src_ip, f.dst_ip, f.src_port)
                            }
                            _ => format!(
                                "{name} {}:{} -> {}:{}",
                                f.src_ip, f.src_port, f.dst_ip, f.dst_port
                            ),
                        };
                        GenFlow { id: (first + i) as u16, frame, label, templates, seq: 0, sent: 0 }
                    })
                    .collect();
                (sizes, flows)
            }
        };
        let share = flows.len() as f64 / nflows as f64;
        // A capture without a count or a duration is sent once through.
        let count = match (spec.count, captured) {
            (None, Some(frames)) if spec.duration_ms.is_none() => Some(frames.len() as u64),
            (count, _) => count,
        };
        let remaining = count.map(|c| {
            // Split the count the way flows are split, remainder to the lowest queues.
            let per_flow = c / nflows as u64;
            let extra = c % nflows as u64;
            (0..nflows as u64)
                .filter(|i| *i as usize % queues == q)
                .map(|i| per_flow + u64::from(i < extra))
                .sum()
        });
        let payload_off = spec.frame(0).header_len_with(l4);
        let stamp = spec.stamp && captured.is_none();
        let rate_seen = rate.changes.load(Ordering::Acquire);
        Self {
            port,
            flows,
            next_flow: 0,
            sizes,
            next_size: 0,
            payload_off,
            remaining,
            ns_per_packet: spec.rate_pps.map(|r| 1e9 / (r * share)).filter(|x| x.is_finite()),
            share,
            rate,
            rate_seen,
            duration_ns: spec.duration_ms.map(|ms| ms * 1_000_000),
            start_ns: 0,
            pace_start_ns: 0,
            paced: 0,
            paused: false,
            stamp,
            prebuilt: spec.prebuilt,
            l4,
            checksum_each: stamp && (l4 != L4::Udp || spec.src_ip.is_ipv6()),
            inject,
        }
    }

    /// Take up a rate changed while running: pacing starts again from `now`.
    #[cold]
    fn retime(&mut self, now: u64) {
        self.rate_seen = self.rate.changes.load(Ordering::Acquire);
        let share = self.share;
        let rate = self.rate.get();
        self.paused = rate.is_err();
        self.ns_per_packet =
            rate.ok().flatten().map(|r| 1e9 / (r * share)).filter(|x| x.is_finite());
        self.pace_start_ns = now;
        self.paced = 0;
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
            self.pace_start_ns = now;
        }
        if self.expired(now) {
            return added;
        }
        if self.rate.changes.load(Ordering::Relaxed) != self.rate_seen {
            self.retime(now);
        }
        if self.paused {
            return added;
        }
        let mut want = batch.room() as u64;
        if let Some(r) = self.remaining {
            want = want.min(r);
        }
        if let Some(ns) = self.ns_per_packet {
            let due = (((now - self.pace_start_ns) as f64 / ns) as u64).saturating_add(1);
            want = want.min(due.saturating_sub(self.paced));
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
                        Some(ns) => self.pace_start_ns + (self.paced as f64 * ns) as u64,
                        None => now,
                    };
                    let data = p.data_mut();
                    let _ = Stamp::emit(&mut data[self.payload_off..], flow.id, flow.seq, ts);
                    if self.checksum_each {
                        let at = self.payload_off - self.l4.header_len();
                        self.l4.fill_checksum(
                            flow.frame.src_ip,
                            flow.frame.dst_ip,
                            &mut data[at..],
                        );
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
            self.paced += 1;
        }
        if let Some(r) = &mut self.remaining {
            *r -= made;
        }
        c.rx_packets.add(made);
        c.rx_bytes.add(bytes);
        added + made as usize
    }
}

/// Generated flow `frame`'s frame of `size` bytes with `l4`, in a buffer of at least `max`.
fn template(frame: &UdpFrame, l4: L4, size: u16, max: usize) -> Vec<u8> {
    let hdr = frame.header_len_with(l4);
    let mut buf = vec![0u8; max.max(hdr)];
    let payload = vec![0u8; (size as usize).saturating_sub(hdr)];
    let n = frame.emit_with(l4, &payload, &mut buf).unwrap_or(0);
    buf.truncate(n);
    if l4 == L4::Udp && frame.src_ip.is_ipv4() && n >= hdr {
        // Zero = "no checksum" for UDP over IPv4: stays valid when the stamp changes.
        buf[hdr - 2..hdr].copy_from_slice(&[0, 0]);
    }
    buf
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

    use hotplane_core::wire::{internet_checksum, pseudo_header_sum};
    use hotplane_core::{classify, Layers, Meta, Pool, PoolConfig};

    /// Frames the generator for `spec` makes in one poll at time `now`.
    fn poll(g: &mut Generator, cache: &mut PoolCache, now: u64) -> Vec<Vec<u8>> {
        let mut batch = Batch::new(32);
        g.recv(&mut batch, cache, now, &PortCounters::default());
        let frames = batch.iter().map(|p| p.data().to_vec()).collect();
        batch.free_all(cache);
        frames
    }

    fn generator(spec: &GenSpec, captured: Option<&[Vec<u8>]>) -> (Generator, Arc<RateControl>) {
        let rate = Arc::new(RateControl::default());
        rate.set(spec.rate_pps);
        let inject = Arc::new(ArrayQueue::new(4));
        (Generator::new(spec, 1, (0, 1), captured, rate.clone(), inject), rate)
    }

    #[test]
    fn tcp_and_icmp_frames_carry_the_stamp_where_the_sink_reads_it() {
        let pool = Pool::new(PoolConfig { buffers: 256, ..Default::default() }).unwrap();
        let mut cache = pool.cache(32);
        for (proto, v6) in
            [(Proto::Tcp, false), (Proto::Icmp, false), (Proto::Tcp, true), (Proto::Icmp, true)]
        {
            let mut spec =
                GenSpec { proto, tcp_flags: "SA".into(), count: Some(2), ..Default::default() };
            if v6 {
                (spec.src_ip, spec.dst_ip) =
                    ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
            }
            spec.size = spec.min_size();
            assert!(spec.validate(1920).is_ok());
            let (mut g, _) = generator(&spec, None);
            let frames = poll(&mut g, &mut cache, 1_000);
            assert_eq!(frames.len(), 2, "{proto:?}");
            for (seq, f) in frames.iter().enumerate() {
                let mut m = Meta::default();
                let key = classify(f, &mut m);
                assert_eq!(key.proto, spec.l4().protocol(v6), "{proto:?}");
                let at = m.l4_off as usize;
                let payload = match proto {
                    Proto::Tcp => {
                        assert!(m.layers & Layers::TCP != 0);
                        assert_eq!(f[at + 13], 0x12, "SYN+ACK");
                        m.payload_off as usize
                    }
                    _ => at + 8,
                };
                let stamp = Stamp::new_checked(&f[payload..]).expect("a stamp");
                assert_eq!((stamp.flow(), stamp.seq()), (4096, seq as u32));
                // A receiver's check over the stamped segment: the sum (with the pseudo
                // header, but for ICMPv4) is zero.
                let seg = &f[at..];
                let sum = if proto == Proto::Icmp && !v6 {
                    internet_checksum(seg)
                } else {
                    let (s, d) =
                        if v6 { (&f[22..38], &f[38..54]) } else { (&f[26..30], &f[30..34]) };
                    pseudo_header_sum(s, d, key.proto, seg.len() as u32).add_bytes(seg).finish()
                };
                assert_eq!(sum, 0, "{proto:?} v6={v6}");
            }
        }
        let e = GenSpec { proto: Proto::Tcp, tcp_flags: "SX".into(), ..Default::default() };
        assert!(e.validate(1920).unwrap_err().to_string().starts_with("tcp_flags = \"SX\""));
    }

    #[test]
    fn a_capture_is_sent_as_it_is_once_through_by_default() {
        let pool = Pool::new(PoolConfig { buffers: 256, ..Default::default() }).unwrap();
        let mut cache = pool.cache(32);
        let frames: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 60 + i as usize]).collect();
        let spec = GenSpec { pcap: Some("t.pcap".into()), ..Default::default() };
        let (mut g, _) = generator(&spec, Some(&frames));
        assert_eq!(poll(&mut g, &mut cache, 1_000), frames, "in order, unstamped, once");
        assert!(g.done());
        let looped = GenSpec { count: Some(7), ..spec };
        let (mut g, _) = generator(&looped, Some(&frames));
        let sent = poll(&mut g, &mut cache, 1_000);
        assert_eq!(sent.len(), 7);
        assert_eq!(sent[6], frames[0], "cycling");
    }

    #[test]
    fn a_rate_changed_while_running_paces_from_then_on() {
        let pool = Pool::new(PoolConfig { buffers: 256, ..Default::default() }).unwrap();
        let mut cache = pool.cache(32);
        let spec = GenSpec { rate_pps: Some(1000.0), stamp: false, ..Default::default() };
        let (mut g, rate) = generator(&spec, None);
        let ms = 1_000_000;
        assert_eq!(poll(&mut g, &mut cache, ms).len(), 1, "the first packet at once");
        assert_eq!(poll(&mut g, &mut cache, 11 * ms).len(), 10, "1000 pps: 10 in 10 ms");
        rate.set(Some(100_000.0));
        assert_eq!(poll(&mut g, &mut cache, 12 * ms).len(), 1, "taken up at the next poll");
        assert_eq!(poll(&mut g, &mut cache, 12 * ms + 100_000).len(), 10, "100 kpps: 10 in 100 us");
        rate.set(None);
        assert_eq!(poll(&mut g, &mut cache, 13 * ms).len(), 32, "unpaced: a full batch");
        rate.pause();
        assert_eq!(poll(&mut g, &mut cache, 14 * ms).len(), 0, "paused");
        assert!(!g.done(), "a pause is not the end");
    }

    #[test]
    fn flows_vary_the_chosen_field() {
        let s = GenSpec { vary: Vary::DstIp, ..Default::default() };
        assert_eq!(s.frame(3).dst_ip, "10.1.0.4".parse::<IpAddr>().unwrap());
        let s = GenSpec { vary: Vary::SrcPort, ..Default::default() };
        assert_eq!(s.frame(3).src_port, 1027);
    }
}
