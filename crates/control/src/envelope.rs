//! The update envelope: the byte format of one update fragment, as carried in the payload of
//! an in-band UDP packet or submitted over the control API. `docs/update-protocol.md` is the
//! specification; this module is its implementation.
//!
//! ```text
//!  0   4  magic        "HPUP"
//!  4   1  version      1
//!  5   1  kind         Kind
//!  6   2  flags        Flags
//!  8   4  key_id       key that authenticates the update; 0 = unauthenticated
//! 12   8  seq          per key_id, strictly increasing from one update to the next
//! 20   4  total_len    payload bytes over all fragments
//! 24   4  frag_offset  where this fragment's bytes go in the payload
//! 28   2  frag_len     payload bytes in this fragment
//! 30   1  target_type  0 position, 1 extern, 2 flow, 3 default flow function
//! 31   1  target_len   T, bytes of the target descriptor
//! 32   2  worker       0xffff all workers, 0xfffe the receiving worker, else a worker index
//! 34   2  reserved     0
//! 36   T  target descriptor
//! 36+T F  fragment bytes
//! end-32 32  MAC: BLAKE3 keyed hash with key[key_id] of every byte before it (zeros if key 0)
//! ```
//! All integers are big-endian. The datagram is exactly `68 + T + F` bytes.

use hotplane_core::{FlowKey, FlowSelector, Position};

pub const MAGIC: [u8; 4] = *b"HPUP";
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 36;
pub const MAC_LEN: usize = 32;
/// Smallest possible fragment: header and MAC.
pub const MIN_LEN: usize = HEADER_LEN + MAC_LEN;
/// Worker field values.
pub const WORKER_ALL: u16 = 0xffff;
pub const WORKER_RECEIVING: u16 = 0xfffe;
/// Length of a flow target descriptor.
pub const FLOW_TARGET_LEN: usize = 43;
/// Longest extern name.
pub const MAX_EXTERN_NAME: usize = 64;

/// What an update carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A native stage described as JSON (`{"stage":"set-field",...}`).
    NativeStage,
    /// Switch the target to the pre-defined program whose id is the 4-byte payload.
    SelectPredefined,
    /// Remove the program at the target (empty payload).
    Remove,
    EbpfBytecode,
    EbpfElf,
    EbpfC,
    Lua,
    Wasp,
    P4,
    /// A kind this node does not know; refused with `UnsupportedKind`.
    Other(u8),
}

impl Kind {
    pub fn code(self) -> u8 {
        match self {
            Kind::NativeStage => 1,
            Kind::SelectPredefined => 2,
            Kind::Remove => 3,
            Kind::EbpfBytecode => 16,
            Kind::EbpfElf => 17,
            Kind::EbpfC => 18,
            Kind::Lua => 32,
            Kind::Wasp => 48,
            Kind::P4 => 64,
            Kind::Other(c) => c,
        }
    }

    pub fn from_code(c: u8) -> Self {
        match c {
            1 => Kind::NativeStage,
            2 => Kind::SelectPredefined,
            3 => Kind::Remove,
            16 => Kind::EbpfBytecode,
            17 => Kind::EbpfElf,
            18 => Kind::EbpfC,
            32 => Kind::Lua,
            48 => Kind::Wasp,
            64 => Kind::P4,
            c => Kind::Other(c),
        }
    }

    pub fn name(self) -> String {
        match self {
            Kind::NativeStage => "native-stage".into(),
            Kind::SelectPredefined => "select-predefined".into(),
            Kind::Remove => "remove".into(),
            Kind::EbpfBytecode => "ebpf-bytecode".into(),
            Kind::EbpfElf => "ebpf-elf".into(),
            Kind::EbpfC => "ebpf-c".into(),
            Kind::Lua => "lua".into(),
            Kind::Wasp => "wasp".into(),
            Kind::P4 => "p4".into(),
            Kind::Other(c) => format!("kind {c}"),
        }
    }
}

/// Option bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Flags(pub u16);

impl Flags {
    /// Do not acknowledge.
    pub const NO_ACK: u16 = 1 << 0;
    /// Run the program without JIT compilation (program kinds that have one).
    pub const NO_JIT: u16 = 1 << 1;
    /// Bits 4-5 hold an optimisation level (0-3), valid when this bit is set.
    pub const OPT_LEVEL_SET: u16 = 1 << 6;

    pub fn no_ack(self) -> bool {
        self.0 & Self::NO_ACK != 0
    }

    pub fn no_jit(self) -> bool {
        self.0 & Self::NO_JIT != 0
    }

    pub fn opt_level(self) -> Option<u8> {
        (self.0 & Self::OPT_LEVEL_SET != 0).then_some(((self.0 >> 4) & 3) as u8)
    }

    pub fn with_opt_level(self, level: u8) -> Self {
        Self((self.0 & !(3 << 4)) | ((level as u16 & 3) << 4) | Self::OPT_LEVEL_SET)
    }
}

/// Where an update applies.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    Position(Position),
    Extern(String),
    Flow(FlowSelector),
    FlowDefault,
}

impl Target {
    fn type_code(&self) -> u8 {
        match self {
            Target::Position(_) => 0,
            Target::Extern(_) => 1,
            Target::Flow(_) => 2,
            Target::FlowDefault => 3,
        }
    }

    fn encode(&self) -> Result<Vec<u8>, EnvelopeError> {
        Ok(match self {
            Target::Position(p) => vec![p.index() as u8],
            Target::Extern(name) => {
                if name.is_empty() || name.len() > MAX_EXTERN_NAME {
                    return Err(EnvelopeError::Target("extern name must be 1 to 64 bytes"));
                }
                name.as_bytes().to_vec()
            }
            Target::Flow(sel) => encode_flow(sel)?.to_vec(),
            Target::FlowDefault => Vec::new(),
        })
    }

    fn decode(code: u8, d: &[u8]) -> Result<Self, EnvelopeError> {
        match code {
            0 => match d {
                [p] => Position::from_index(*p)
                    .map(Target::Position)
                    .ok_or(EnvelopeError::Target("unknown position")),
                _ => Err(EnvelopeError::Target("position descriptor must be 1 byte")),
            },
            1 => {
                if d.is_empty() || d.len() > MAX_EXTERN_NAME {
                    return Err(EnvelopeError::Target("extern name must be 1 to 64 bytes"));
                }
                let s = std::str::from_utf8(d)
                    .map_err(|_| EnvelopeError::Target("extern name is not UTF-8"))?;
                Ok(Target::Extern(s.to_string()))
            }
            2 => decode_flow(d).map(Target::Flow),
            3 if d.is_empty() => Ok(Target::FlowDefault),
            3 => Err(EnvelopeError::Target("default-flow target takes no descriptor")),
            _ => Err(EnvelopeError::Target("unknown target type")),
        }
    }
}

impl core::fmt::Display for Target {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Target::Position(p) => write!(f, "{p}"),
            Target::Extern(n) => write!(f, "extern:{n}"),
            Target::Flow(s) => write!(f, "flow:{s}"),
            Target::FlowDefault => write!(f, "flow:default"),
        }
    }
}

/// Text that does not name a [`Target`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetParseError {
    #[error("extern name must be 1 to 64 bytes")]
    ExternName,
    #[error("{0}")]
    Flow(hotplane_core::flowtable::SelectorError),
    #[error("`{0}` is not a target (pre, mid, post, extern:NAME, flow:SELECTOR, flow:default)")]
    Unknown(String),
}

impl core::str::FromStr for Target {
    type Err = TargetParseError;

    /// `pre`, `mid`, `post`, `extern:NAME`, `flow:SELECTOR` or `flow:default`.
    fn from_str(s: &str) -> Result<Self, TargetParseError> {
        if let Some(name) = s.strip_prefix("extern:") {
            if name.is_empty() || name.len() > MAX_EXTERN_NAME {
                return Err(TargetParseError::ExternName);
            }
            return Ok(Target::Extern(name.into()));
        }
        if let Some(sel) = s.strip_prefix("flow:") {
            if sel == "default" {
                return Ok(Target::FlowDefault);
            }
            return sel.parse().map(Target::Flow).map_err(TargetParseError::Flow);
        }
        s.parse().map(Target::Position).map_err(|_| TargetParseError::Unknown(s.to_string()))
    }
}

fn prefix_len(mask: &[u8]) -> Option<u8> {
    let bits: u32 = mask.iter().map(|b| b.count_ones()).sum();
    // A prefix mask has its set bits first.
    let mut expect = bits as i32;
    for &b in mask {
        let want = if expect >= 8 {
            0xff
        } else if expect <= 0 {
            0
        } else {
            0xffu8 << (8 - expect)
        };
        if b != want {
            return None;
        }
        expect -= 8;
    }
    Some(bits as u8)
}

fn encode_flow(sel: &FlowSelector) -> Result<[u8; FLOW_TARGET_LEN], EnvelopeError> {
    let (k, m) = (&sel.key, &sel.mask);
    let mut d = [0u8; FLOW_TARGET_LEN];
    let mut present = 0u8;
    let partial = |v: u64, all: u64| v != 0 && v != all;
    if partial(m.proto as u64, 0xff)
        || partial(m.src_port as u64, 0xffff)
        || partial(m.dst_port as u64, 0xffff)
    {
        return Err(EnvelopeError::Target("flow selector masks must be whole fields or prefixes"));
    }
    if m.proto != 0 {
        present |= 1;
    }
    let width = if k.ip_version == 4 { 4 } else { 16 };
    let src_plen =
        prefix_len(&m.src[..width]).ok_or(EnvelopeError::Target("source mask is not a prefix"))?;
    let dst_plen = prefix_len(&m.dst[..width])
        .ok_or(EnvelopeError::Target("destination mask is not a prefix"))?;
    if src_plen > 0 {
        present |= 2;
    }
    if dst_plen > 0 {
        present |= 4;
    }
    if m.src_port != 0 {
        present |= 8;
    }
    if m.dst_port != 0 {
        present |= 16;
    }
    if m.vlan != 0 {
        present |= 32;
    }
    d[0] = present;
    d[1] = if m.ip_version != 0 { k.ip_version } else { 0 };
    d[2] = k.proto;
    d[3] = src_plen;
    d[4] = dst_plen;
    d[5..21].copy_from_slice(&k.src);
    d[21..37].copy_from_slice(&k.dst);
    d[37..39].copy_from_slice(&k.src_port.to_be_bytes());
    d[39..41].copy_from_slice(&k.dst_port.to_be_bytes());
    d[41..43].copy_from_slice(&k.vlan.to_be_bytes());
    Ok(d)
}

fn decode_flow(d: &[u8]) -> Result<FlowSelector, EnvelopeError> {
    if d.len() != FLOW_TARGET_LEN {
        return Err(EnvelopeError::Target("flow descriptor must be 43 bytes"));
    }
    let present = d[0];
    if present & !0x3f != 0 {
        return Err(EnvelopeError::Target("flow descriptor has unknown field bits"));
    }
    let version = d[1];
    let has_ip = present & 6 != 0;
    if has_ip != (version != 0) || !(version == 0 || version == 4 || version == 6) {
        return Err(EnvelopeError::Target(
            "flow descriptor IP version does not match its addresses",
        ));
    }
    let width = if version == 4 { 4 } else { 16 };
    let mut key = FlowKey::default();
    let mut mask = FlowKey::default();
    if present & 1 != 0 {
        key.proto = d[2];
        mask.proto = 0xff;
    }
    if has_ip {
        key.ip_version = version;
        mask.ip_version = 0xff;
    }
    for (bit, plen, src, (k, m)) in [
        (2u8, d[3], &d[5..21], (&mut key.src, &mut mask.src)),
        (4u8, d[4], &d[21..37], (&mut key.dst, &mut mask.dst)),
    ] {
        if present & bit == 0 {
            continue;
        }
        if plen == 0 || plen as usize > width * 8 {
            return Err(EnvelopeError::Target("flow descriptor prefix length out of range"));
        }
        for i in 0..width {
            let bits = (plen as i32 - 8 * i as i32).clamp(0, 8) as u32;
            let mb = if bits == 0 { 0 } else { 0xffu8 << (8 - bits) };
            m[i] = mb;
            k[i] = src[i] & mb;
        }
    }
    if present & 8 != 0 {
        key.src_port = u16::from_be_bytes([d[37], d[38]]);
        mask.src_port = 0xffff;
    }
    if present & 16 != 0 {
        key.dst_port = u16::from_be_bytes([d[39], d[40]]);
        mask.dst_port = 0xffff;
    }
    if present & 32 != 0 {
        key.vlan = u16::from_be_bytes([d[41], d[42]]) & 0x0fff;
        mask.vlan = 0xffff;
    }
    Ok(FlowSelector { key, mask })
}

/// Which workers an update applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkerScope {
    All,
    /// The worker that received the in-band packet (the API treats it as `All`).
    Receiving,
    One(u16),
}

impl WorkerScope {
    pub fn code(self) -> u16 {
        match self {
            WorkerScope::All => WORKER_ALL,
            WorkerScope::Receiving => WORKER_RECEIVING,
            WorkerScope::One(w) => w,
        }
    }

    pub fn from_code(c: u16) -> Self {
        match c {
            WORKER_ALL => WorkerScope::All,
            WORKER_RECEIVING => WorkerScope::Receiving,
            w => WorkerScope::One(w),
        }
    }
}

/// Everything about an update except its payload bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpdateHeader {
    pub kind: Kind,
    pub flags: Flags,
    pub key_id: u32,
    pub seq: u64,
    pub target: Target,
    pub worker: WorkerScope,
}

/// One parsed fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment<'a> {
    pub header: UpdateHeader,
    pub total_len: u32,
    pub offset: u32,
    pub data: &'a [u8],
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("datagram of {0} bytes is shorter than the 68-byte minimum")]
    Truncated(usize),
    #[error("not an update (bad magic)")]
    BadMagic,
    #[error("envelope version {0} is not supported (expected 1)")]
    BadVersion(u8),
    #[error("length mismatch: header describes {described} bytes, datagram has {actual}")]
    LengthMismatch { described: usize, actual: usize },
    #[error("fragment [{offset}, +{len}) lies outside the {total}-byte update")]
    FragmentOutOfRange { offset: u32, len: u16, total: u32 },
    #[error("bad target: {0}")]
    Target(&'static str),
    #[error("reserved field is not zero")]
    Reserved,
    #[error("payload of {0} bytes does not fit the 32-bit length field")]
    TooLong(usize),
}

/// The key id and MAC-covered bytes of a datagram, found without parsing anything else: the MAC
/// is checked before any field is interpreted.
pub fn split_mac(datagram: &[u8]) -> Result<(u32, &[u8], &[u8; MAC_LEN]), EnvelopeError> {
    if datagram.len() < MIN_LEN {
        return Err(EnvelopeError::Truncated(datagram.len()));
    }
    if datagram[0..4] != MAGIC {
        return Err(EnvelopeError::BadMagic);
    }
    if datagram[4] != VERSION {
        return Err(EnvelopeError::BadVersion(datagram[4]));
    }
    let key_id = u32::from_be_bytes([datagram[8], datagram[9], datagram[10], datagram[11]]);
    let (body, mac) = datagram.split_at(datagram.len() - MAC_LEN);
    let mac: &[u8; MAC_LEN] =
        mac.try_into().map_err(|_| EnvelopeError::Truncated(datagram.len()))?;
    Ok((key_id, body, mac))
}

/// Compute the MAC of `body` under `key`.
pub fn mac(key: &[u8; 32], body: &[u8]) -> [u8; MAC_LEN] {
    *blake3::keyed_hash(key, body).as_bytes()
}

/// Constant-time MAC check (`blake3::Hash` equality is constant-time).
pub fn mac_ok(key: &[u8; 32], body: &[u8], mac: &[u8; MAC_LEN]) -> bool {
    blake3::keyed_hash(key, body) == blake3::Hash::from_bytes(*mac)
}

/// Parse a datagram's fields. Call only after the MAC has been checked (or authentication was
/// explicitly waived); this does not look at the MAC.
pub fn parse(datagram: &[u8]) -> Result<Fragment<'_>, EnvelopeError> {
    let (_, body, _) = split_mac(datagram)?;
    let be16 = |at: usize| u16::from_be_bytes([body[at], body[at + 1]]);
    let be32 = |at: usize| u32::from_be_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
    let kind = Kind::from_code(body[5]);
    let flags = Flags(be16(6));
    let key_id = be32(8);
    let seq = u64::from_be_bytes(
        body[12..20].try_into().map_err(|_| EnvelopeError::Truncated(datagram.len()))?,
    );
    let total_len = be32(20);
    let offset = be32(24);
    let frag_len = be16(28);
    let target_type = body[30];
    let target_len = body[31] as usize;
    let worker = WorkerScope::from_code(be16(32));
    if be16(34) != 0 {
        return Err(EnvelopeError::Reserved);
    }
    let described = HEADER_LEN + target_len + frag_len as usize;
    if described != body.len() {
        return Err(EnvelopeError::LengthMismatch {
            described: described + MAC_LEN,
            actual: datagram.len(),
        });
    }
    if offset as u64 + frag_len as u64 > total_len as u64 {
        return Err(EnvelopeError::FragmentOutOfRange { offset, len: frag_len, total: total_len });
    }
    let target = Target::decode(target_type, &body[HEADER_LEN..HEADER_LEN + target_len])?;
    Ok(Fragment {
        header: UpdateHeader { kind, flags, key_id, seq, target, worker },
        total_len,
        offset,
        data: &body[HEADER_LEN + target_len..],
    })
}

/// Build the datagrams of an update, splitting `payload` into fragments of at most
/// `max_fragment` bytes. `key` is required unless `header.key_id` is 0.
pub fn build(
    header: &UpdateHeader,
    payload: &[u8],
    key: Option<&[u8; 32]>,
    max_fragment: usize,
) -> Result<Vec<Vec<u8>>, EnvelopeError> {
    let target = header.target.encode()?;
    let total: u32 = payload.len().try_into().map_err(|_| EnvelopeError::TooLong(payload.len()))?;
    let max_fragment = max_fragment.clamp(1, u16::MAX as usize);
    let chunks: Vec<&[u8]> =
        if payload.is_empty() { vec![&[][..]] } else { payload.chunks(max_fragment).collect() };
    let mut out = Vec::with_capacity(chunks.len());
    let mut offset = 0u32;
    for chunk in chunks {
        let mut d = Vec::with_capacity(MIN_LEN + target.len() + chunk.len());
        d.extend_from_slice(&MAGIC);
        d.push(VERSION);
        d.push(header.kind.code());
        d.extend_from_slice(&header.flags.0.to_be_bytes());
        d.extend_from_slice(&header.key_id.to_be_bytes());
        d.extend_from_slice(&header.seq.to_be_bytes());
        d.extend_from_slice(&total.to_be_bytes());
        d.extend_from_slice(&offset.to_be_bytes());
        d.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
        d.push(header.target.type_code());
        d.push(target.len() as u8);
        d.extend_from_slice(&header.worker.code().to_be_bytes());
        d.extend_from_slice(&[0, 0]);
        d.extend_from_slice(&target);
        d.extend_from_slice(chunk);
        let m = match (header.key_id, key) {
            (0, _) => [0u8; MAC_LEN],
            (_, Some(k)) => mac(k, &d),
            (_, None) => return Err(EnvelopeError::Target("a key is required for key_id != 0")),
        };
        d.extend_from_slice(&m);
        offset += chunk.len() as u32;
        out.push(d);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = [7; 32];

    fn header(target: Target) -> UpdateHeader {
        UpdateHeader {
            kind: Kind::NativeStage,
            flags: Flags::default().with_opt_level(2),
            key_id: 1,
            seq: 42,
            target,
            worker: WorkerScope::All,
        }
    }

    #[test]
    fn build_parse_round_trip_for_every_target() {
        for t in [
            Target::Position(Position::Mid),
            Target::Extern("checksum".into()),
            Target::Flow("proto=udp,src=10.0.0.0/8,dport=53".parse().unwrap()),
            Target::Flow("dst=fd00::1/64,vlan=9".parse().unwrap()),
            Target::FlowDefault,
        ] {
            let h = header(t.clone());
            let d = build(&h, b"{\"stage\":\"drop\"}", Some(&KEY), 1400).unwrap();
            assert_eq!(d.len(), 1);
            let (key_id, body, m) = split_mac(&d[0]).unwrap();
            assert_eq!(key_id, 1);
            assert!(mac_ok(&KEY, body, m));
            let f = parse(&d[0]).unwrap();
            assert_eq!(f.header, h, "{t}");
            assert_eq!(f.data, b"{\"stage\":\"drop\"}");
            assert_eq!(f.header.flags.opt_level(), Some(2));
        }
    }

    #[test]
    fn fragments_cover_the_payload() {
        let payload: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let d = build(&header(Target::FlowDefault), &payload, Some(&KEY), 300).unwrap();
        assert_eq!(d.len(), 4);
        let mut rebuilt = vec![0u8; 1000];
        for frag in &d {
            let f = parse(frag).unwrap();
            assert_eq!(f.total_len, 1000);
            rebuilt[f.offset as usize..f.offset as usize + f.data.len()].copy_from_slice(f.data);
        }
        assert_eq!(rebuilt, payload);
    }

    #[test]
    fn tampering_breaks_the_mac() {
        let d = build(&header(Target::Position(Position::Pre)), b"x", Some(&KEY), 1400)
            .unwrap()
            .remove(0);
        for i in 0..d.len() {
            let mut t = d.clone();
            t[i] ^= 0x01;
            match split_mac(&t) {
                Ok((_, body, m)) => {
                    assert!(!mac_ok(&KEY, body, m), "flip at byte {i} not detected")
                }
                Err(_) => assert!(i < 5, "only magic/version flips fail before the MAC"),
            }
        }
    }

    #[test]
    fn structural_errors() {
        let d = build(&header(Target::Position(Position::Pre)), b"xy", Some(&KEY), 1400)
            .unwrap()
            .remove(0);
        assert_eq!(split_mac(&d[..67]).unwrap_err(), EnvelopeError::Truncated(67));
        let mut bad = d.clone();
        bad[4] = 9;
        assert_eq!(split_mac(&bad).unwrap_err(), EnvelopeError::BadVersion(9));
        let mut bad = d.clone();
        bad.insert(40, 0);
        assert!(matches!(parse(&bad).unwrap_err(), EnvelopeError::LengthMismatch { .. }));
        let mut bad = d.clone();
        bad[36] = 7; // position 7
        assert_eq!(parse(&bad).unwrap_err(), EnvelopeError::Target("unknown position"));
        let mut bad = d.clone();
        bad[20..24].copy_from_slice(&1u32.to_be_bytes()); // total 1 < frag_len 2
        assert!(matches!(parse(&bad).unwrap_err(), EnvelopeError::FragmentOutOfRange { .. }));
    }

    #[test]
    fn target_text_forms() {
        for s in ["pre", "mid", "post", "extern:lb", "flow:default", "flow:proto=udp,dport=53"] {
            assert_eq!(s.parse::<Target>().unwrap().to_string(), s);
        }
        assert!("nowhere".parse::<Target>().is_err());
        assert!("flow:bogus=1".parse::<Target>().is_err());
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            let mut d = b"HPUP\x01".to_vec();
            d.extend_from_slice(&bytes);
            let _ = parse(&d);
            let _ = parse(&bytes);
        }
    }
}
