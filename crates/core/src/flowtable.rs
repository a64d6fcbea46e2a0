//! The flow table: which function each flow runs. Selectors match a flow exactly or through a
//! mask (prefixes, wildcard ports); the most specific selector wins, and flows no selector
//! matches run the default function (or pass untouched when there is none).
//!
//! Workers read an immutable `FlowMap` through a [`Slot`]; the control thread keeps the master
//! copy, builds a new map for every change (copy-on-write: other flows keep the very same
//! function objects) and publishes it. Replacing flow 1's function therefore cannot change what
//! flow 2 runs.

use crate::batch::{Batch, Mask};
use crate::flow::{classify, FlowKey};
use crate::packet::{Layers, Meta};
use crate::qsbr::{GraceError, Qsbr};
use crate::slot::{Retired, Slot, DEFAULT_GRACE_TIMEOUT};
use crate::stage::{StageRef, WorkerCx};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A flow key and a mask: a packet matches when `key & mask == selector.key`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FlowSelector {
    pub key: FlowKey,
    pub mask: FlowKey,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("flow selector field `{0}` is not one of proto, src, dst, sport, dport, vlan")]
    UnknownField(String),
    #[error("flow selector field `{field}`: cannot parse `{value}`")]
    BadValue { field: &'static str, value: String },
    #[error("flow selector mixes IPv4 and IPv6 addresses")]
    MixedVersions,
    #[error("flow selector field `{0}` given twice")]
    Repeated(String),
}

const FULL: FlowKey = FlowKey {
    src: [0xff; 16],
    dst: [0xff; 16],
    src_port: 0xffff,
    dst_port: 0xffff,
    proto: 0xff,
    ip_version: 0xff,
    vlan: 0xffff,
};

impl FlowSelector {
    /// Matches exactly one flow.
    pub fn exact(key: FlowKey) -> Self {
        Self { key, mask: FULL }
    }

    /// Matches every packet.
    pub fn any() -> Self {
        Self::default()
    }

    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        key.masked(&self.mask) == self.key
    }

    /// Number of mask bits: more bits, more specific.
    pub fn specificity(&self) -> u32 {
        let m = &self.mask;
        m.src.iter().chain(m.dst.iter()).map(|b| b.count_ones()).sum::<u32>()
            + m.src_port.count_ones()
            + m.dst_port.count_ones()
            + m.proto.count_ones()
            + m.ip_version.count_ones()
            + m.vlan.count_ones()
    }

    fn set_ip(&mut self, dst: bool, text: &str, field: &'static str) -> Result<(), SelectorError> {
        let bad = || SelectorError::BadValue { field, value: text.to_string() };
        let (addr, plen) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p.parse::<u8>().map_err(|_| bad())?)),
            None => (text, None),
        };
        let ip: IpAddr = addr.parse().map_err(|_| bad())?;
        let (version, bytes, max): (u8, Vec<u8>, u8) = match ip {
            IpAddr::V4(a) => (4, a.octets().to_vec(), 32),
            IpAddr::V6(a) => (6, a.octets().to_vec(), 128),
        };
        let plen = plen.unwrap_or(max);
        if plen > max {
            return Err(bad());
        }
        if self.mask.ip_version != 0 && self.key.ip_version != version {
            return Err(SelectorError::MixedVersions);
        }
        self.key.ip_version = version;
        self.mask.ip_version = 0xff;
        let (k, m) = if dst {
            (&mut self.key.dst, &mut self.mask.dst)
        } else {
            (&mut self.key.src, &mut self.mask.src)
        };
        for i in 0..bytes.len() {
            let bits = (plen as i32 - 8 * i as i32).clamp(0, 8) as u32;
            let mb = if bits == 0 { 0 } else { 0xffu8 << (8 - bits) };
            m[i] = mb;
            k[i] = bytes[i] & mb;
        }
        Ok(())
    }
}

impl core::str::FromStr for FlowSelector {
    type Err = SelectorError;

    /// `proto=udp,src=10.0.0.1,dst=10.0.0.0/24,sport=1000,dport=2000,vlan=7`; omitted fields
    /// are wildcards; `*` or `any` matches everything.
    fn from_str(s: &str) -> Result<Self, SelectorError> {
        let s = s.trim();
        let mut sel = FlowSelector::any();
        if s.is_empty() || s == "*" || s == "any" {
            return Ok(sel);
        }
        let mut seen = Vec::new();
        for part in s.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| SelectorError::UnknownField(part.trim().into()))?;
            let (k, v) = (k.trim(), v.trim());
            if seen.contains(&k) {
                return Err(SelectorError::Repeated(k.into()));
            }
            seen.push(k);
            let port = |field: &'static str| {
                v.parse::<u16>().map_err(|_| SelectorError::BadValue { field, value: v.into() })
            };
            match k {
                "proto" => {
                    sel.key.proto = match v {
                        "udp" => 17,
                        "tcp" => 6,
                        "icmp" => 1,
                        "icmpv6" => 58,
                        n => n.parse().map_err(|_| SelectorError::BadValue {
                            field: "proto",
                            value: v.into(),
                        })?,
                    };
                    sel.mask.proto = 0xff;
                }
                "src" => sel.set_ip(false, v, "src")?,
                "dst" => sel.set_ip(true, v, "dst")?,
                "sport" => {
                    sel.key.src_port = port("sport")?;
                    sel.mask.src_port = 0xffff;
                }
                "dport" => {
                    sel.key.dst_port = port("dport")?;
                    sel.mask.dst_port = 0xffff;
                }
                "vlan" => {
                    sel.key.vlan = port("vlan")? & 0x0fff;
                    sel.mask.vlan = 0xffff;
                }
                other => return Err(SelectorError::UnknownField(other.into())),
            }
        }
        Ok(sel)
    }
}

impl core::fmt::Display for FlowSelector {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (k, m) = (&self.key, &self.mask);
        let mut parts = Vec::new();
        if m.proto != 0 {
            parts.push(match k.proto {
                17 => "proto=udp".to_string(),
                6 => "proto=tcp".to_string(),
                p => format!("proto={p}"),
            });
        }
        for (name, addr, mask) in [("src", &k.src, &m.src), ("dst", &k.dst, &m.dst)] {
            let bits: u32 = mask.iter().map(|b| b.count_ones()).sum();
            if bits == 0 {
                continue;
            }
            let ip = if k.ip_version == 4 {
                IpAddr::from([addr[0], addr[1], addr[2], addr[3]])
            } else {
                IpAddr::from(*addr)
            };
            let full = if k.ip_version == 4 { 32 } else { 128 };
            if bits == full {
                parts.push(format!("{name}={ip}"));
            } else {
                parts.push(format!("{name}={ip}/{bits}"));
            }
        }
        if m.src_port != 0 {
            parts.push(format!("sport={}", k.src_port));
        }
        if m.dst_port != 0 {
            parts.push(format!("dport={}", k.dst_port));
        }
        if m.vlan != 0 {
            parts.push(format!("vlan={}", k.vlan));
        }
        if parts.is_empty() {
            f.write_str("*")
        } else {
            f.write_str(&parts.join(","))
        }
    }
}

impl core::fmt::Debug for FlowSelector {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(self, f)
    }
}

/// A function installed for a flow, and the flow-table version it was installed at.
#[derive(Clone)]
pub struct FlowFunction {
    pub stage: StageRef,
    pub version: u64,
    /// Packets it ran on, since it was installed (this worker's table only: one writer, so a
    /// load and a store, no locked instruction).
    pub packets: Arc<AtomicU64>,
}

impl FlowFunction {
    fn new(stage: StageRef, version: u64) -> Self {
        FlowFunction { stage, version, packets: Arc::default() }
    }

    #[inline]
    fn count(&self, mask: Mask) {
        self.record(mask.0.count_ones() as u64);
    }

    /// Count `n` packets it ran on; only on the worker that owns this table.
    #[inline]
    pub fn record(&self, n: u64) {
        self.packets.store(self.packets.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }
}

#[derive(PartialEq, Eq)]
struct HashedKey {
    hash: u64,
    key: FlowKey,
}

impl Hash for HashedKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Passes a precomputed hash through: keys are hashed once, by `FlowKey::hash64`.
#[derive(Default)]
struct PrehashedHasher(u64);

impl Hasher for PrehashedHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type PrehashedMap<V> = HashMap<HashedKey, V, BuildHasherDefault<PrehashedHasher>>;

/// One tuple-space group: every selector with the same mask, in one hash table.
struct MaskGroup {
    mask: FlowKey,
    map: PrehashedMap<FlowFunction>,
}

/// The immutable table the fast path reads.
pub struct FlowMap {
    groups: Vec<MaskGroup>,
    default: Option<FlowFunction>,
    len: usize,
}

/// Most distinct functions one batch is split into before dispatching early.
const DISPATCH_GROUPS: usize = 8;

impl FlowMap {
    fn empty() -> Self {
        Self { groups: Vec::new(), default: None, len: 0 }
    }

    fn build(master: &Master) -> Self {
        let mut by_mask: BTreeMap<FlowKey, PrehashedMap<FlowFunction>> = BTreeMap::new();
        for (sel, f) in &master.entries {
            let key = HashedKey { hash: sel.key.hash64(), key: sel.key };
            by_mask.entry(sel.mask).or_default().insert(key, f.clone());
        }
        let mut groups: Vec<MaskGroup> =
            by_mask.into_iter().map(|(mask, map)| MaskGroup { mask, map }).collect();
        // Most specific mask first: the first hit is the best match.
        groups.sort_by_key(|g| {
            std::cmp::Reverse(FlowSelector { key: g.mask, mask: g.mask }.specificity())
        });
        Self { groups, default: master.default.clone(), len: master.entries.len() }
    }

    /// True when no selector and no default are installed: the flow step can be skipped.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0 && self.default.is_none()
    }

    /// The function for a flow: one hash probe per distinct mask (one for exact selectors).
    #[inline]
    pub fn lookup(&self, key: &FlowKey) -> Option<&FlowFunction> {
        for g in &self.groups {
            let k = key.masked(&g.mask);
            if let Some(f) = g.map.get(&HashedKey { hash: k.hash64(), key: k }) {
                return Some(f);
            }
        }
        self.default.as_ref()
    }

    /// Run each selected packet through its flow's function, calling each function once for
    /// all of its packets in the batch. Packets in `cx.flows_done` (a P4 program already ran
    /// their function) are skipped.
    pub fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        let sel = sel.without(cx.flows_done);
        let mut groups: [(Option<&FlowFunction>, Mask); DISPATCH_GROUPS] =
            [(None, Mask::EMPTY); DISPATCH_GROUPS];
        let mut used = 0;
        for i in sel {
            let p = &batch.as_slice()[i];
            let key = key_of(p.data(), &p.meta);
            let Some(f) = self.lookup(&key) else { continue };
            match groups[..used].iter_mut().find(|(g, _)| {
                g.is_some_and(|g| {
                    std::ptr::addr_eq(StageRef::as_ptr(&g.stage), StageRef::as_ptr(&f.stage))
                })
            }) {
                Some((_, m)) => m.insert(i),
                None if used < DISPATCH_GROUPS => {
                    groups[used] = (Some(f), Mask::single(i));
                    used += 1;
                }
                None => {
                    f.count(Mask::single(i));
                    f.stage.run(batch, Mask::single(i), cx)
                }
            }
        }
        for (f, m) in &groups[..used] {
            if let Some(f) = f {
                f.count(*m);
                f.stage.run(batch, *m, cx);
            }
        }
    }
}

/// The flow key of a classified packet, rebuilt from the offsets in its metadata (cheaper than
/// parsing again). Non-IP frames are re-classified.
#[inline]
pub fn key_of(frame: &[u8], meta: &Meta) -> FlowKey {
    let l3 = meta.l3_off as usize;
    let mut k = FlowKey::default();
    if meta.layers & Layers::IPV4 != 0 && l3 + 20 <= frame.len() {
        k.ip_version = 4;
        k.proto = frame[l3 + 9];
        k.src[..4].copy_from_slice(&frame[l3 + 12..l3 + 16]);
        k.dst[..4].copy_from_slice(&frame[l3 + 16..l3 + 20]);
    } else if meta.layers & Layers::IPV6 != 0 && l3 + 40 <= frame.len() {
        // The transport protocol may sit behind extension headers: classify knows.
        let mut scratch = *meta;
        return classify(frame, &mut scratch);
    } else {
        let mut scratch = *meta;
        return classify(frame, &mut scratch);
    }
    if meta.layers & Layers::VLAN != 0 && frame.len() >= 16 {
        k.vlan = u16::from_be_bytes([frame[14], frame[15]]) & 0x0fff;
    }
    let l4 = meta.l4_off as usize;
    if meta.layers & (Layers::UDP | Layers::TCP) != 0 && l4 + 4 <= frame.len() {
        k.src_port = u16::from_be_bytes([frame[l4], frame[l4 + 1]]);
        k.dst_port = u16::from_be_bytes([frame[l4 + 2], frame[l4 + 3]]);
    }
    k
}

#[derive(Default)]
struct Master {
    entries: BTreeMap<FlowSelector, FlowFunction>,
    default: Option<FlowFunction>,
}

/// A change to a flow table.
#[derive(Clone)]
pub enum FlowChange {
    Set(FlowSelector, StageRef),
    Remove(FlowSelector),
    SetDefault(Option<StageRef>),
    Clear,
}

/// What a control listing shows of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowEntryInfo {
    /// The selector text, or `default`.
    pub selector: String,
    pub function: String,
    pub version: u64,
    /// Packets the function ran on (this worker), since it was installed.
    pub packets: u64,
}

/// A flow table for one worker. See the module docs.
pub struct FlowTable {
    slot: Slot<FlowMap>,
    master: Mutex<Master>,
}

impl FlowTable {
    pub fn new(qsbr: &Qsbr) -> Self {
        Self { slot: Slot::new(qsbr, FlowMap::empty()), master: Mutex::new(Master::default()) }
    }

    /// The map for this batch.
    #[inline(always)]
    pub fn slot(&self) -> &Slot<FlowMap> {
        &self.slot
    }

    pub fn version(&self) -> u64 {
        self.slot.version()
    }

    /// Apply a change and publish it as `version` without waiting for the grace period.
    /// Removing a selector that is not installed is an error (`Err(false)`) and publishes
    /// nothing.
    pub fn publish(
        &self,
        change: FlowChange,
        version: u64,
    ) -> Result<Retired<FlowMap>, FlowTableError> {
        let mut m = self.master.lock().unwrap_or_else(|e| e.into_inner());
        match change {
            FlowChange::Set(sel, stage) => {
                m.entries.insert(sel, FlowFunction::new(stage, version));
            }
            FlowChange::Remove(sel) => {
                if m.entries.remove(&sel).is_none() {
                    return Err(FlowTableError::NoSuchFlow(sel.to_string()));
                }
            }
            FlowChange::SetDefault(stage) => {
                m.default = stage.map(|stage| FlowFunction::new(stage, version));
            }
            FlowChange::Clear => {
                m.entries.clear();
                m.default = None;
            }
        }
        let map = FlowMap::build(&m);
        Ok(self.slot.publish_as(map, version))
    }

    /// Apply a change as the next version and wait until no worker runs the old map.
    pub fn apply(&self, change: FlowChange) -> Result<u64, FlowTableError> {
        let v = self.slot.version() + 1;
        self.publish(change, v)?.wait(DEFAULT_GRACE_TIMEOUT)?;
        Ok(v)
    }

    /// Entries as the control plane sees them, most specific first, then the default.
    pub fn entries(&self) -> Vec<FlowEntryInfo> {
        let m = self.master.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = m.entries.iter().collect();
        v.sort_by_key(|(s, _)| std::cmp::Reverse(s.specificity()));
        let mut out: Vec<FlowEntryInfo> = v
            .into_iter()
            .map(|(s, f)| FlowEntryInfo {
                selector: s.to_string(),
                function: f.stage.describe(),
                version: f.version,
                packets: f.packets.load(Ordering::Relaxed),
            })
            .collect();
        if let Some(d) = &m.default {
            out.push(FlowEntryInfo {
                selector: "default".into(),
                function: d.stage.describe(),
                version: d.version,
                packets: d.packets.load(Ordering::Relaxed),
            });
        }
        out
    }

    /// The function installed for exactly this selector (control side).
    pub fn function(&self, sel: &FlowSelector) -> Option<FlowFunction> {
        self.master.lock().unwrap_or_else(|e| e.into_inner()).entries.get(sel).cloned()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowTableError {
    #[error("no function is installed for flow `{0}`")]
    NoSuchFlow(String),
    #[error(transparent)]
    Grace(#[from] GraceError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::DropAll;
    use std::sync::Arc;

    fn key(src: &str, dst: &str, sport: u16, dport: u16) -> FlowKey {
        FlowKey::from_ips(src.parse().unwrap(), dst.parse().unwrap(), 17, sport, dport)
    }

    #[test]
    fn selector_text_round_trips() {
        for s in
            ["*", "proto=udp,src=10.0.0.1,dport=2000", "dst=10.1.0.0/16", "src=fd00::/8,vlan=3"]
        {
            let sel: FlowSelector = s.parse().unwrap();
            assert_eq!(sel.to_string(), s);
        }
        assert!(matches!("foo=1".parse::<FlowSelector>(), Err(SelectorError::UnknownField(_))));
        assert!(matches!(
            "src=10.0.0.1/33".parse::<FlowSelector>(),
            Err(SelectorError::BadValue { .. })
        ));
        assert_eq!(
            "src=10.0.0.1,dst=fd00::1".parse::<FlowSelector>(),
            Err(SelectorError::MixedVersions)
        );
        assert_eq!(
            "sport=1,sport=2".parse::<FlowSelector>(),
            Err(SelectorError::Repeated("sport".into()))
        );
    }

    #[test]
    fn masked_selectors_match() {
        let sel: FlowSelector = "proto=udp,dst=10.1.0.0/16".parse().unwrap();
        assert!(sel.matches(&key("1.2.3.4", "10.1.200.3", 5, 6)));
        assert!(!sel.matches(&key("1.2.3.4", "10.2.0.3", 5, 6)));
        let exact = FlowSelector::exact(key("1.2.3.4", "10.1.200.3", 5, 6));
        assert!(exact.specificity() > sel.specificity());
    }

    #[test]
    fn most_specific_wins_and_default_catches_rest() {
        let q = Qsbr::new();
        let t = FlowTable::new(&q);
        let wide: StageRef = Arc::new(DropAll);
        let narrow: StageRef = Arc::new(crate::native::Count::new());
        let dflt: StageRef = Arc::new(crate::native::Forward::to(3));
        t.apply(FlowChange::Set("dst=10.1.0.0/16".parse().unwrap(), wide.clone())).unwrap();
        t.apply(FlowChange::Set("dst=10.1.2.3,dport=80".parse().unwrap(), narrow.clone())).unwrap();
        let v = t.apply(FlowChange::SetDefault(Some(dflt.clone()))).unwrap();
        assert_eq!(v, 4);
        let r = q.register("t");
        let g = r.guard();
        let map = &t.slot().load(&g).value;
        let name = |k: FlowKey| map.lookup(&k).map(|f| f.stage.name().to_string());
        assert_eq!(name(key("9.9.9.9", "10.1.2.3", 1, 80)).as_deref(), Some("count"));
        assert_eq!(name(key("9.9.9.9", "10.1.2.3", 1, 81)).as_deref(), Some("drop"));
        assert_eq!(name(key("9.9.9.9", "10.2.2.3", 1, 81)).as_deref(), Some("forward"));
        let _ = map;
        drop(r);
        let e = t.entries();
        assert_eq!(e[0].selector, "dst=10.1.2.3,dport=80");
        assert_eq!(e.last().unwrap().selector, "default");
        assert!(matches!(
            t.apply(FlowChange::Remove("dport=1".parse().unwrap())),
            Err(FlowTableError::NoSuchFlow(_))
        ));
    }

    /// The documented tie-break (docs/config.md, "Flow selectors"): between equally specific
    /// selectors the one that leaves more of the first differing field (src, dst, sport,
    /// dport, proto, vlan) open wins, whichever was installed first; a less specific one loses.
    #[test]
    fn equally_specific_selectors_break_ties_as_documented() {
        for order in [false, true] {
            let q = Qsbr::new();
            let t = FlowTable::new(&q);
            let by_sport: StageRef = Arc::new(DropAll);
            let by_dport: StageRef = Arc::new(crate::native::Count::new());
            let by_port_only: StageRef = Arc::new(crate::native::Forward::to(3));
            let mut sets = vec![
                ("proto=udp,sport=1024", by_sport.clone()),
                ("proto=udp,dport=5000", by_dport.clone()),
                ("dport=5000", by_port_only.clone()),
            ];
            if order {
                sets.reverse();
            }
            for (sel, stage) in sets {
                t.apply(FlowChange::Set(sel.parse().unwrap(), stage)).unwrap();
            }
            let r = q.register("t");
            let g = r.guard();
            let map = &t.slot().load(&g).value;
            let name = |k: FlowKey| map.lookup(&k).map(|f| f.stage.name().to_string());
            // Both udp selectors match; they are equally specific; the first field where
            // their masks differ is sport, which `proto=udp,dport=5000` leaves open: it wins.
            assert_eq!(name(key("10.0.0.1", "10.1.0.1", 1024, 5000)).as_deref(), Some("count"));
            assert_eq!(name(key("10.0.0.1", "10.1.0.1", 1025, 5000)).as_deref(), Some("count"));
            // Only the sport selector matches.
            assert_eq!(name(key("10.0.0.1", "10.1.0.1", 1024, 53)).as_deref(), Some("drop"));
            // TCP: only the less specific `dport=5000` matches.
            let tcp = FlowKey::from_ips(
                "10.0.0.1".parse().unwrap(),
                "10.1.0.1".parse().unwrap(),
                6,
                1024,
                5000,
            );
            assert_eq!(name(tcp).as_deref(), Some("forward"));
            drop(r);
        }
    }
}
