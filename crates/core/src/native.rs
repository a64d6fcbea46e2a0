//! Built-in native stages: enough to make the engine useful and testable before any program
//! kind is loaded, and the reference point ("native Rust") that program kinds are measured
//! against.

use crate::batch::{Batch, Mask};
use crate::metrics::PerWorker;
use crate::packet::{Verdict, NO_PORT};
use crate::stage::{Stage, WorkerCx};
use crate::wire::EthernetFrame;

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
}

impl Stage for L2Fwd {
    fn name(&self) -> &str {
        "l2fwd"
    }

    #[inline]
    fn run(&self, batch: &mut Batch, sel: Mask, _cx: &mut WorkerCx<'_>) {
        let pkts = batch.as_mut_slice();
        for i in sel {
            let p = &mut pkts[i];
            match EthernetFrame::new_checked(p.data_mut()) {
                Ok(mut eth) => eth.swap_addrs(),
                Err(_) => {
                    p.meta.verdict = Verdict::Drop;
                    continue;
                }
            }
            p.meta.out_port = self.forward.out_for(p.meta.in_port, p.meta.out_port);
        }
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

impl Stage for SetField {
    fn name(&self) -> &str {
        "set-field"
    }

    #[inline]
    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        let w = self.width as usize;
        let mut skipped = 0;
        let pkts = batch.as_mut_slice();
        for i in sel {
            let p = &mut pkts[i];
            let base = match self.base {
                FieldBase::Frame => 0,
                FieldBase::L3 => p.meta.l3_off as usize,
                FieldBase::L4 => p.meta.l4_off as usize,
                FieldBase::Payload => p.meta.payload_off as usize,
            };
            let at = base + self.offset as usize;
            let data = p.data_mut();
            if (self.base != FieldBase::Frame && base == 0) || at + w > data.len() {
                skipped += 1;
                continue;
            }
            data[at..at + w].copy_from_slice(&self.value[..w]);
        }
        self.written.add(cx.worker, sel.count() as u64 - skipped);
        if skipped > 0 {
            self.skipped.add(cx.worker, skipped);
        }
    }

    fn describe(&self) -> String {
        let hex: String = self.value().iter().map(|b| format!("{b:02x}")).collect();
        format!("set-field {}+{} = 0x{hex}", self.base.as_str(), self.offset)
    }
}
