//! One packet through a WASP filter: shim bytes in, fate out (`docs/wasp.md` §2, §5).
//!
//! Order: check the shim (lengths, version, reserved bits), verify its checksum, decode and
//! validate the program, run it, then rewrite the shim only if something changed (scratchpad,
//! RETURNED, FAULT) and refill its checksum. Bytes after the shim are never touched.

use std::hash::BuildHasher;

use crate::decode::decode;
use crate::error::Reject;
use crate::ess::Ess;
use crate::vpu::{run, Env, Fate, Outcome};
use crate::wire::{flags, WaspPacket};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FilterConfig {
    pub on_fault: OnFault,
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
    let mut packet = WaspPacket::new_checked(shim)?;
    if !packet.verify_checksum() {
        return Err(Reject::BadChecksum);
    }
    if packet.faulted() {
        return Ok(Processed { fate: Fate::Fwd, outcome: None, rewritten: false });
    }
    let program = decode(packet.code(), packet.key_count()).map_err(|error| error.reason)?;
    let (keys, key_count) = packet.keys();
    let returned = packet.returned();
    let outcome = run(&program, &keys[..key_count], packet.scratch_mut(), returned, env, net, ess);

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
    Ok(Processed { fate, outcome: Some(outcome), rewritten })
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
        let dropped =
            process(&mut bytes, &env, &[], &ess, &FilterConfig { on_fault: OnFault::Drop })
                .unwrap();
        assert_eq!(dropped.fate, Fate::Drop);
        assert!(!dropped.rewritten);

        let original = bytes.clone();
        let config = FilterConfig { on_fault: OnFault::ForwardFlagged };
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
        let config = FilterConfig { on_fault: OnFault::ForwardFlagged };
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
