//! One packet through a WASP filter: shim bytes in, fate out (`docs/wasp.md` §2, §5).
//!
//! Order: check the shim (lengths, version, reserved bits, scopes), verify its checksum,
//! authenticate an admin packet (key id, MAC, sequence number), decode and validate the
//! program, derive the store keys of private slots and the packet's aggregate, run it, then
//! rewrite the shim only if something changed (scratchpad, RETURNED, FAULT) and refill its
//! checksum. Bytes after the shim are never touched.

use std::hash::BuildHasher;
use std::sync::Arc;

use crate::admin::AdminKeys;
use crate::cache::{Decoder, Fresh};
use crate::error::Reject;
use crate::ess::{Admission, Ess, PrivateSlot, Quota};
use crate::vpu::{run_in, Access, Env, Fate, Outcome, PacketState};
use crate::wire::{flags, Scope, WaspPacket};

/// What a node does with a packet whose program faulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFault {
    /// Drop it (default), as a full queue would.
    #[default]
    Drop,
    /// Forward it unchanged but for FAULT, `fault_pc`, `fault_code` and the checksum, so that
    /// the end-host can see where its program failed.
    ForwardFlagged,
}

#[derive(Debug, Clone, Default)]
pub struct FilterConfig {
    pub on_fault: OnFault,
    /// The admin verifier (keys and replay state) of the store this filter runs against;
    /// `None`: ADMIN packets are refused as `reserved-bits`.
    pub admin: Option<Arc<AdminKeys>>,
    /// Per-aggregate quota on creations when the store fills up.
    pub quota: Quota,
    /// What an aggregate is (source address prefixes).
    pub aggregate: AggregateBy,
}

impl PartialEq for FilterConfig {
    /// Admin verifiers compare by identity: two rings with the same keys keep separate replay
    /// state.
    fn eq(&self, other: &Self) -> bool {
        let same_admin = match (&self.admin, &other.admin) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        same_admin
            && self.on_fault == other.on_fault
            && self.quota == other.quota
            && self.aggregate == other.aggregate
    }
}

impl Eq for FilterConfig {}

/// The aggregate a packet's store creations count against: its IP source address cut to a
/// prefix (the seed's §5.2 aggregates). A header that is neither IPv4 nor IPv6 has none (the
/// stage always hands the IP header; only direct callers pass other bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AggregateBy {
    /// IPv4 source prefix length (<= 32).
    pub ipv4_prefix: u8,
    /// IPv6 source prefix length (<= 64: the high 64 bits of the address).
    pub ipv6_prefix: u8,
}

impl Default for AggregateBy {
    fn default() -> Self {
        AggregateBy { ipv4_prefix: 24, ipv6_prefix: 48 }
    }
}

impl AggregateBy {
    /// The aggregate id of the packet whose IP header starts `net`. IPv4 aggregates are
    /// `0xffff_ffff` above the 32-bit prefix, which no IPv6 source prefix can equal (that is
    /// multicast space), so the two families never share an aggregate.
    pub fn of(&self, net: &[u8]) -> Option<u64> {
        fn keep_high(value: u64, bits: u8, width: u32) -> u64 {
            let bits = u32::from(bits).min(width);
            if bits == 0 {
                0
            } else {
                value & (u64::MAX << (width - bits)) & (u64::MAX >> (64 - width))
            }
        }
        match net.first()? >> 4 {
            4 => {
                let src = net.get(12..16)?;
                let addr = u64::from(u32::from_be_bytes([src[0], src[1], src[2], src[3]]));
                Some(0xffff_ffff_0000_0000 | keep_high(addr, self.ipv4_prefix, 32))
            }
            6 => {
                let src = net.get(8..16)?;
                let mut high = [0u8; 8];
                high.copy_from_slice(src);
                Some(keep_high(u64::from_be_bytes(high), self.ipv6_prefix, 64))
            }
            _ => None,
        }
    }
}

/// What happened to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Processed {
    /// The packet's fate at this node.
    pub fate: Fate,
    /// The run, or `None` when the packet arrived flagged FAULT (then it is forwarded as is:
    /// the first fault's report must reach the end-host).
    pub outcome: Option<Outcome>,
    /// The shim was rewritten (and its checksum refilled).
    pub rewritten: bool,
    /// The program ran as machine code (the compiled tier), not on the interpreter.
    pub compiled: bool,
}

/// Runs the WASP packet whose shim starts at `shim[0]`. `net` is the packet from its IP header
/// on (the read-only header bank). A refused packet is to be dropped and counted by reason.
pub fn process<S: BuildHasher>(
    shim: &mut [u8],
    env: &Env,
    net: &[u8],
    ess: &Ess<S>,
    config: &FilterConfig,
) -> Result<Processed, Reject> {
    process_with(shim, env, net, ess, config, &mut Fresh::default())
}

/// [`process`] taking its decoded program from `decoder` (a worker's [`DecodeCache`]
/// (crate::cache::DecodeCache) on the fast path). The result is the same whichever decoder.
pub fn process_with<S: BuildHasher, D: Decoder>(
    shim: &mut [u8],
    env: &Env,
    net: &[u8],
    ess: &Ess<S>,
    config: &FilterConfig,
    decoder: &mut D,
) -> Result<Processed, Reject> {
    let mut packet = WaspPacket::new_checked(shim)?;
    if !packet.verify_checksum() {
        return Err(Reject::BadChecksum);
    }
    if packet.faulted() {
        return Ok(Processed { fate: Fate::Fwd, outcome: None, rewritten: false, compiled: false });
    }
    // An admin packet is authenticated before anything else of it is interpreted.
    let admin = packet.admin();
    if admin {
        let keys = config.admin.as_deref().ok_or(Reject::ReservedBits)?;
        keys.verify(&packet)?;
    }
    let prepared =
        decoder.prepare(packet.code(), packet.key_count()).map_err(|error| error.reason)?;
    let (mut keys, key_count) = packet.keys();
    let scopes = packet.scopes();
    let scopes_byte = packet.scopes_byte();
    for (slot, (key, _)) in keys
        .iter_mut()
        .zip(scopes)
        .take(key_count)
        .enumerate()
        .filter(|(_, (_, s))| *s == Scope::Private)
    {
        // Slot and key count are below MAX_KEYS (checked with the shim).
        let at = PrivateSlot { slot: slot as u8, key_count: key_count as u8, scopes: scopes_byte };
        *key = ess.private_key(packet.code(), at, *key);
    }
    let access = Access {
        scopes,
        admin,
        // The operator's packets are outside quotas.
        admission: if admin {
            None
        } else {
            config.aggregate.of(net).map(|aggregate| Admission { aggregate, quota: config.quota })
        },
    };
    let returned = packet.returned();
    let state =
        PacketState { keys: &keys[..key_count], scratch: packet.scratch_mut(), returned, net };
    let compiled = prepared.tier.is_compiled();
    let outcome = run_in(prepared.workspace, prepared.tier, state, env, &access, ess);

    let mut rewritten = outcome.scratch_dirty && outcome.fault.is_none();
    let fate = match outcome.fault {
        Some((_, _)) if config.on_fault == OnFault::Drop => Fate::Drop,
        Some((fault, pc)) => {
            packet.set_flags(packet.flags() | flags::FAULT);
            packet.set_fault(pc, fault.wire_code());
            rewritten = true;
            Fate::Fwd
        }
        None => {
            if outcome.fate == Fate::Return {
                packet.set_flags(packet.flags() | flags::RETURNED);
                rewritten = true;
            }
            outcome.fate
        }
    };
    if rewritten {
        packet.fill_checksum();
    }
    Ok(Processed { fate, outcome: Some(outcome), rewritten, compiled })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::assemble;
    use crate::error::Fault;
    use crate::ess::EssConfig;
    use crate::wire::WaspRepr;

    const PAYLOAD: &[u8] = b"transport header and payload";

    fn packet(source: &str, keys: Vec<u64>, scratch_words: usize, flags: u8) -> Vec<u8> {
        let repr = WaspRepr {
            flags,
            next_header: 17,
            keys,
            scratch: vec![0x11; 8 * scratch_words],
            code: assemble(source).unwrap().code,
            ..WaspRepr::default()
        };
        let mut bytes = repr.to_bytes().unwrap();
        bytes.extend_from_slice(PAYLOAD);
        bytes
    }

    fn store() -> Ess {
        Ess::new(&EssConfig::default()).unwrap()
    }

    fn parsed(bytes: &[u8]) -> WaspRepr {
        WaspRepr::parse(&WaspPacket::new_checked(bytes).unwrap()).unwrap()
    }

    #[test]
    fn aggregates_are_source_prefixes_per_family() {
        let by = AggregateBy::default();
        let mut v4 = [0u8; 20];
        v4[0] = 0x45;
        v4[12..16].copy_from_slice(&[10, 1, 2, 3]);
        assert_eq!(by.of(&v4), Some(0xffff_ffff_0a01_0200));
        v4[15] = 200;
        assert_eq!(by.of(&v4), Some(0xffff_ffff_0a01_0200), "same /24");
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[8..16].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0x00, 0x07, 0xff, 0xff]);
        assert_eq!(by.of(&v6), Some(0x2001_0db8_0007_0000));
        let host = AggregateBy { ipv4_prefix: 32, ipv6_prefix: 64 };
        assert_eq!(host.of(&v4), Some(0xffff_ffff_0a01_02c8));
        assert_eq!(host.of(&v6), Some(0x2001_0db8_0007_ffff));
        let everyone = AggregateBy { ipv4_prefix: 0, ipv6_prefix: 0 };
        assert_eq!(everyone.of(&v4), Some(0xffff_ffff_0000_0000));
        assert_eq!(by.of(&v4[..15]), None, "too short for a source address");
        assert_eq!(by.of(&[]), None);
        assert_eq!(by.of(&[0x20; 40]), None, "neither IPv4 nor IPv6");
    }

    #[test]
    fn malformed_packets_are_refused_by_reason() {
        let ess = store();
        let env = Env::default();
        let config = FilterConfig::default();
        let mut bytes = packet("fwd", vec![], 0, 0);
        bytes[8] ^= 1;
        assert_eq!(process(&mut bytes, &env, &[], &ess, &config), Err(Reject::BadChecksum));
        let mut bytes = packet("lookup k1", vec![1], 0, 0);
        assert_eq!(process(&mut bytes, &env, &[], &ess, &config), Err(Reject::UndeclaredKey));
        let mut bytes = packet(".byte 0xff", vec![], 0, 0);
        assert_eq!(process(&mut bytes, &env, &[], &ess, &config), Err(Reject::UnknownOpcode));
        assert_eq!(process(&mut [1, 0, 0], &env, &[], &ess, &config), Err(Reject::Truncated));
    }

    #[test]
    fn a_fault_drops_or_forwards_flagged_with_the_store_untouched() {
        let ess = store();
        let env = Env::default();
        let source = "lookup k0\ninc\ninsert k0\nst s.64[0], a\nst e.64[0], a";
        let mut bytes = packet(source, vec![3], 1, 0);
        let config = FilterConfig { on_fault: OnFault::Drop, ..FilterConfig::default() };
        let dropped = process(&mut bytes, &env, &[], &ess, &config).unwrap();
        assert_eq!(dropped.fate, Fate::Drop);
        assert!(!dropped.rewritten);

        let original = bytes.clone();
        let config = FilterConfig { on_fault: OnFault::ForwardFlagged, ..FilterConfig::default() };
        let flagged = process(&mut bytes, &env, &[], &ess, &config).unwrap();
        assert_eq!((flagged.fate, flagged.rewritten), (Fate::Fwd, true));
        let after = parsed(&bytes);
        assert_eq!(after.flags, flags::FAULT);
        assert_eq!(
            (after.fault_pc, Fault::from_wire_code(after.fault_code)),
            (4, Some(Fault::ReadOnly))
        );
        assert_eq!(after.scratch, parsed(&original).scratch, "scratchpad as it arrived");
        assert!(bytes.ends_with(PAYLOAD));
        assert_eq!(ess.stats().inserts, 0);

        // The next node forwards the flagged packet without running it.
        let next = process(&mut bytes, &env, &[], &ess, &config).unwrap();
        assert_eq!((next.fate, next.outcome, next.rewritten), (Fate::Fwd, None, false));
    }

    #[test]
    fn return_marks_the_packet_and_cannot_happen_twice() {
        let ess = store();
        let env = Env::default();
        let config = FilterConfig { on_fault: OnFault::ForwardFlagged, ..FilterConfig::default() };
        let mut bytes = packet("return", vec![], 0, 0);
        let first = process(&mut bytes, &env, &[], &ess, &config).unwrap();
        assert_eq!(first.fate, Fate::Return);
        assert_eq!(parsed(&bytes).flags, flags::RETURNED);
        let second = process(&mut bytes, &env, &[], &ess, &config).unwrap();
        assert_eq!(second.fate, Fate::Fwd);
        assert_eq!(second.outcome.and_then(|o| o.fault), Some((Fault::SecondReturn, 0)));
        assert_eq!(parsed(&bytes).flags, flags::RETURNED | flags::FAULT);
    }

    #[test]
    fn only_the_scratchpad_changes_and_the_checksum_follows() {
        let ess = store();
        let env = Env { node_id: 0x0102, ..Env::default() };
        let mut bytes = packet("ld a, e.node_id\nst s.64[1], a", vec![], 2, 0);
        let before = parsed(&bytes);
        let out = process(&mut bytes, &env, &[], &ess, &FilterConfig::default()).unwrap();
        assert!(out.rewritten);
        let after = parsed(&bytes);
        assert_eq!(&after.scratch[8..], &0x0102u64.to_be_bytes());
        assert_eq!(WaspRepr { scratch: before.scratch.clone(), ..after }, before);
        assert!(bytes.ends_with(PAYLOAD));
    }
}
