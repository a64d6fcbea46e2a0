//! Built-in native stages: enough to make the engine useful and testable before any program
//! kind is loaded, and the reference point ("native Rust") that program kinds are measured
//! against.

use crate::batch::{Batch, Mask};
use crate::metrics::PerWorker;
use crate::packet::{Meta, Verdict, NO_PORT};
use crate::stage::{Stage, WorkerCx};
use crate::wire::EthernetFrame;
use crate::xdp::action_of;

/// Send packets to a fixed port, or map input ports to output ports. Entries of `NO_PORT` (and
/// ports beyond the map) leave the packet's `out_port` as it was (the port's configured peer).
#[derive(Debug, Clone)]
pub struct Forward {
    map: Vec<u16>,
    all: Option<u16>,
}

impl Forward {
    pub fn to(port: u16) -> Self {
        Self { map: Vec::new(), all: Some(port) }
    }

    /// `map[in_port] = out_port`.
    pub fn with_map(map: Vec<u16>) -> Self {
        Self { map, all: None }
    }

    /// Keep each packet's default output (its input port's peer).
    pub fn peers() -> Self {
        Self { map: Vec::new(), all: None }
    }

    #[inline(always)]
    fn out_for(&self, in_port: u16, current: u16) -> u16 {
        if let Some(p) = self.all {
            return p;
        }
        match self.map.get(in_port as usize) {
            Some(&p) if p != NO_PORT => p,
            _ => current,
        }
    }

    fn describe_map(&self) -> String {
        match self.all {
            Some(p) => format!("to port {p}"),
            None if self.map.is_empty() => "to peers".into(),
            None => format!("map {:?}", self.map),
        }
    }
}

impl Stage for Forward {
    fn name(&self) -> &str {
        "forward"
    }

    fn run(&self, batch: &mut Batch, sel: Mask, _cx: &mut WorkerCx<'_>) {
        let pkts = batch.as_mut_slice();
        for i in sel {
            let m = &mut pkts[i].meta;
            m.out_port = self.out_for(m.in_port, m.out_port);
        }
    }

    fn run_one(&self, _frame: &mut [u8], meta: &mut Meta, _cx: &mut WorkerCx<'_>) -> u64 {
        meta.out_port = self.out_for(meta.in_port, meta.out_port);
        action_of(meta.verdict)
    }

    fn describe(&self) -> String {
        format!("forward {}", self.describe_map())
    }
}

/// Swap source and destination MAC addresses, then forward (testpmd's `macswap`).
/// Frames shorter than an Ethernet header are dropped.
#[derive(Debug, Clone)]
pub struct L2Fwd {
    forward: Forward,
}

impl L2Fwd {
    pub fn new(forward: Forward) -> Self {
        Self { forward }
    }

    #[inline(always)]
    fn one(&self, frame: &mut [u8], meta: &mut Meta) {
        match EthernetFrame::new_checked(frame) {
            Ok(mut eth) => eth.swap_addrs(),
            Err(_) => {
                meta.verdict = Verdict::Drop;
                return;
            }
        }
        meta.out_port = self.forward.out_for(meta.in_port, meta.out_port);
    }
}

impl Stage for L2Fwd {
    fn name(&self) -> &str {
        "l2fwd"
    }

    #[inline]
    fn run(&self, batch: &mut Batch, sel: Mask, _cx: &mut WorkerCx<'_>) {
        // On the packet in place (`frame_mut`): copying its metadata out and back cost 13% of
        // the forwarding rate in `bench pipeline`.
        let pkts = batch.as_mut_slice();
        for i in sel {
            let (frame, meta) = pkts[i].frame_mut();
            self.one(frame, meta);
        }
    }

    fn run_one(&self, frame: &mut [u8], meta: &mut Meta, _cx: &mut WorkerCx<'_>) -> u64 {
        self.one(frame, meta);
        action_of(meta.verdict)
    }

    fn describe(&self) -> String {
        format!("l2fwd {}", self.forward.describe_map())
    }
}

/// Drop everything it sees.
#[derive(Debug, Clone, Default)]
pub struct DropAll;

impl Stage for DropAll {
    fn name(&self) -> &str {
        "drop"
    }

    fn run(&self, batch: &mut Batch, sel: Mask, _cx: &mut WorkerCx<'_>) {
        let pkts = batch.as_mut_slice();
        for i in sel {
            pkts[i].meta.verdict = Verdict::Drop;
        }
    }

    fn run_one(&self, _frame: &mut [u8], meta: &mut Meta, _cx: &mut WorkerCx<'_>) -> u64 {
        meta.verdict = Verdict::Drop;
        crate::xdp::XDP_DROP
    }
}

/// Count packets and bytes, per worker, and pass them on.
#[derive(Debug, Default)]
pub struct Count {
    pub packets: PerWorker,
    pub bytes: PerWorker,
}

impl Count {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Stage for Count {
    fn name(&self) -> &str {
        "count"
    }

    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        let pkts = batch.as_slice();
        let bytes: u64 = sel.iter().map(|i| pkts[i].len() as u64).sum();
        self.packets.add(cx.worker, sel.count() as u64);
        self.bytes.add(cx.worker, bytes);
    }

    fn run_one(&self, frame: &mut [u8], meta: &mut Meta, cx: &mut WorkerCx<'_>) -> u64 {
        self.packets.add(cx.worker, 1);
        self.bytes.add(cx.worker, frame.len() as u64);
        action_of(meta.verdict)
    }

    fn describe(&self) -> String {
        format!("count packets={} bytes={}", self.packets.sum(), self.bytes.sum())
    }
}

/// Where a `SetField` offset counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldBase {
    /// The first byte of the frame.
    #[default]
    Frame,
    /// The IP header.
    L3,
    /// The TCP/UDP header.
    L4,
    /// The TCP/UDP payload.
    Payload,
}

impl FieldBase {
    pub fn as_str(self) -> &'static str {
        match self {
            FieldBase::Frame => "frame",
            FieldBase::L3 => "l3",
            FieldBase::L4 => "l4",
            FieldBase::Payload => "payload",
        }
    }
}

/// Write a constant (1 to 16 bytes) at an offset. Packets too short for the write, or without
/// the layer the offset is based on, pass unchanged and are counted in `skipped`.
#[derive(Debug)]
pub struct SetField {
    base: FieldBase,
    offset: u16,
    value: [u8; 16],
    width: u8,
    pub written: PerWorker,
    pub skipped: PerWorker,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetFieldError {
    #[error("value must be 1 to 16 bytes, got {0}")]
    Width(usize),
}

impl SetField {
    pub fn new(base: FieldBase, offset: u16, value: &[u8]) -> Result<Self, SetFieldError> {
        if value.is_empty() || value.len() > 16 {
            return Err(SetFieldError::Width(value.len()));
        }
        let mut v = [0u8; 16];
        v[..value.len()].copy_from_slice(value);
        Ok(Self {
            base,
            offset,
            value: v,
            width: value.len() as u8,
            written: PerWorker::new(),
            skipped: PerWorker::new(),
        })
    }

    pub fn value(&self) -> &[u8] {
        &self.value[..self.width as usize]
    }
}

impl SetField {
    /// Where the field starts in a frame with metadata `meta`; `None` if the frame lacks the
    /// layer the offset is based on.
    #[inline(always)]
    fn at(&self, meta: &Meta) -> Option<usize> {
        let base = match self.base {
            FieldBase::Frame => return Some(self.offset as usize),
            FieldBase::L3 => meta.l3_off,
            FieldBase::L4 => meta.l4_off,
            FieldBase::Payload => meta.payload_off,
        };
        (base != 0).then(|| base as usize + self.offset as usize)
    }

    /// Write the value at `at` (from [`SetField::at`]); false if the frame is too short.
    #[inline(always)]
    fn write(&self, data: &mut [u8], at: Option<usize>) -> bool {
        let w = self.width as usize;
        match at {
            Some(at) if at + w <= data.len() => {
                data[at..at + w].copy_from_slice(&self.value[..w]);
                true
            }
            _ => false,
        }
    }
}

impl Stage for SetField {
    fn name(&self) -> &str {
        "set-field"
    }

    #[inline]
    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        let mut skipped = 0;
        let pkts = batch.as_mut_slice();
        for i in sel {
            let (frame, meta) = pkts[i].frame_mut();
            skipped += u64::from(!self.write(frame, self.at(meta)));
        }
        self.written.add(cx.worker, sel.count() as u64 - skipped);
        if skipped > 0 {
            self.skipped.add(cx.worker, skipped);
        }
    }

    fn run_one(&self, frame: &mut [u8], meta: &mut Meta, cx: &mut WorkerCx<'_>) -> u64 {
        match self.write(frame, self.at(meta)) {
            true => self.written.add(cx.worker, 1),
            false => self.skipped.add(cx.worker, 1),
        }
        action_of(meta.verdict)
    }

    fn describe(&self) -> String {
        let hex: String = self.value().iter().map(|b| format!("{b:02x}")).collect();
        format!("set-field {}+{} = 0x{hex}", self.base.as_str(), self.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::Stage;
    use crate::wire::{EthernetAddress, UdpFrame};
    use crate::{Pool, PoolConfig, Qsbr};

    fn frame() -> Vec<u8> {
        let f = UdpFrame {
            src_mac: EthernetAddress::local(1),
            dst_mac: EthernetAddress::local(2),
            vlan: None,
            src_ip: "10.0.0.1".parse().unwrap(),
            dst_ip: "10.0.0.2".parse().unwrap(),
            src_port: 1000,
            dst_port: 2000,
        };
        let mut buf = vec![0u8; f.header_len() + 20];
        let n = f.emit(&[7; 20], &mut buf).unwrap();
        buf.truncate(n);
        buf
    }

    /// A native stage called by another kind (`run_one`, on the caller's bytes) does to the
    /// frame and its metadata exactly what it does in a batch, and answers its verdict as an
    /// XDP action.
    #[test]
    fn run_one_does_what_run_does() {
        let stages: Vec<Box<dyn Stage>> = vec![
            Box::new(Forward::to(3)),
            Box::new(L2Fwd::new(Forward::with_map(vec![5]))),
            Box::new(DropAll),
            Box::new(Count::new()),
            Box::new(SetField::new(FieldBase::Payload, 2, &[0xbe, 0xef]).unwrap()),
            Box::new(SetField::new(FieldBase::Payload, 19, &[1, 2]).unwrap()),
        ];
        let pool = Pool::new(PoolConfig { buffers: 4, ..Default::default() }).unwrap();
        let qsbr = Qsbr::new();
        let reader = qsbr.register("test");
        let guard = reader.guard();
        let mut cx = WorkerCx::new(0, 0, &guard);
        for stage in &stages {
            let mut batch = Batch::new(1);
            let mut p = pool.alloc().unwrap();
            p.set_frame(&frame()).unwrap();
            p.classify();
            p.meta.out_port = 9;
            let mut meta = p.meta;
            assert!(batch.push(p).is_ok());
            stage.run(&mut batch, Mask::single(0), &mut cx);
            let by_batch = batch.get(0).unwrap();
            let mut bytes = frame();
            let answer = stage.run_one(&mut bytes, &mut meta, &mut cx);
            assert_eq!(bytes, by_batch.data(), "{}", stage.describe());
            assert_eq!(meta, by_batch.meta, "{}", stage.describe());
            assert_eq!(answer, action_of(by_batch.meta.verdict), "{}", stage.describe());
        }
    }
}
