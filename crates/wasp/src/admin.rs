//! Authenticated admin packets (`docs/wasp.md` §8): the only packets that may write protected
//! store entries.
//!
//! The construction is the update envelope's (`crates/control/src/envelope.rs`): 32-byte shared
//! keys named by a 32-bit key id, a BLAKE3 keyed hash as the MAC, and per key id a sequence
//! number that must rise from one accepted packet to the next, so a captured admin packet
//! cannot be replayed. The MAC covers every byte of the shim up to the MAC itself with the
//! checksum field as zero (the checksum is refilled by nodes; everything else a node may change
//! makes the packet unverifiable on purpose, see the spec).
//!
//! [`AdminKeys`] is the verifier: the keys (immutable) and the last accepted sequence number per
//! key id behind a mutex. Admin packets are rare, and the lock is held for one map lookup and
//! one store, never while a MAC is computed, so workers sharing it never wait long. Its map is
//! filled at construction with every configured key id and never grows: a packet under an
//! unknown key id is refused before it could add anything.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::error::Reject;
use crate::wire::{WaspPacket, ADMIN_MAC_LEN};

/// A 32-byte shared admin key (the envelope's key format).
pub type AdminKey = [u8; 32];

/// Byte offset of the checksum inside the shim (zero in the MAC's input).
const CHECKSUM_AT: usize = 12;

/// Why an admin key ring could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminKeysError {
    #[error("admin key id 0 is reserved (it means unauthenticated in the update envelope)")]
    ZeroKeyId,
    #[error("admin key id {0} is given twice")]
    Duplicate(u32),
}

/// The keys a node accepts admin packets under, and the replay state. One per store: a packet
/// is accepted once by every store (every node, and each of a node's stages) it crosses.
pub struct AdminKeys {
    keys: HashMap<u32, AdminKey>,
    last_seq: Mutex<HashMap<u32, u64>>,
}

impl std::fmt::Debug for AdminKeys {
    /// Key ids only: the keys are secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ids: Vec<u32> = self.keys.keys().copied().collect();
        ids.sort_unstable();
        f.debug_struct("AdminKeys").field("key_ids", &ids).finish_non_exhaustive()
    }
}

impl AdminKeys {
    /// A verifier for `keys` (key id, key); no sequence number seen yet.
    pub fn new(keys: impl IntoIterator<Item = (u32, AdminKey)>) -> Result<Self, AdminKeysError> {
        let mut map = HashMap::new();
        for (id, key) in keys {
            if id == 0 {
                return Err(AdminKeysError::ZeroKeyId);
            }
            if map.insert(id, key).is_some() {
                return Err(AdminKeysError::Duplicate(id));
            }
        }
        let last_seq = map.keys().map(|&id| (id, 0)).collect();
        Ok(AdminKeys { keys: map, last_seq: Mutex::new(last_seq) })
    }

    /// Checks an ADMIN packet's key id, MAC and sequence number, in that order, and on success
    /// records the sequence number, so the same packet is refused as `replayed` afterwards.
    /// A packet without ADMIN is refused as `reserved-bits` (nothing to verify).
    pub fn verify<T: AsRef<[u8]>>(&self, packet: &WaspPacket<T>) -> Result<(), Reject> {
        let trailer = packet.admin_trailer().ok_or(Reject::ReservedBits)?;
        let key = self.keys.get(&trailer.key_id).ok_or(Reject::UnknownKey)?;
        // `blake3::Hash` equality is constant-time.
        if blake3::Hash::from_bytes(mac(key, packet.shim()))
            != blake3::Hash::from_bytes(trailer.mac)
        {
            return Err(Reject::BadMac);
        }
        let mut last_seq = self.lock();
        let last = last_seq.get_mut(&trailer.key_id).ok_or(Reject::UnknownKey)?;
        if trailer.seq <= *last {
            return Err(Reject::Replayed);
        }
        *last = trailer.seq;
        Ok(())
    }

    /// The configured key ids.
    pub fn key_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.keys.keys().copied()
    }

    /// Every key id's sequence must be above `floor`. A node starts its rings at its clock
    /// (microseconds since the Unix epoch, the senders' rule) less a window, so that packets
    /// captured before a restart replay only within that window.
    pub fn with_floor(self, floor: u64) -> Self {
        self.lock().values_mut().for_each(|last| *last = (*last).max(floor));
        self
    }

    /// The last accepted sequence number per key id (to persist replay protection across
    /// restarts, as the update receiver does).
    pub fn last_sequences(&self) -> BTreeMap<u32, u64> {
        self.lock().iter().map(|(&id, &seq)| (id, seq)).collect()
    }

    /// Restores persisted sequence numbers; never lowers one, never adds an unknown key id.
    pub fn restore_sequences(&self, sequences: &BTreeMap<u32, u64>) {
        let mut last_seq = self.lock();
        for (id, &seq) in sequences {
            if let Some(last) = last_seq.get_mut(id) {
                *last = (*last).max(seq);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, u64>> {
        // The map holds plain integers, consistent after any panic elsewhere.
        self.last_seq.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The MAC of an admin shim under `key`: BLAKE3 keyed hash of `shim` without its last 32 bytes
/// (the MAC field), with the checksum field (bytes 12..14) as zero. `shim` is the whole shim
/// ([`WaspPacket::shim`]); a slice shorter than header and MAC hashes as it is (such a packet
/// never passed `new_checked`).
pub fn mac(key: &AdminKey, shim: &[u8]) -> [u8; ADMIN_MAC_LEN] {
    let covered = &shim[..shim.len().saturating_sub(ADMIN_MAC_LEN)];
    let mut hasher = blake3::Hasher::new_keyed(key);
    match (covered.get(..CHECKSUM_AT), covered.get(CHECKSUM_AT + 2..)) {
        (Some(head), Some(tail)) => {
            hasher.update(head);
            hasher.update(&[0, 0]);
            hasher.update(tail);
        }
        _ => {
            hasher.update(covered);
        }
    }
    *hasher.finalize().as_bytes()
}

/// Signs an emitted ADMIN shim at the start of `bytes` in place: writes its MAC under `key`
/// (for the key id and sequence number already in its trailer), then refills the checksum.
/// Refuses a buffer that is not a well-formed ADMIN shim.
pub fn seal(bytes: &mut [u8], key: &AdminKey) -> Result<(), Reject> {
    let mut packet = WaspPacket::new_checked(bytes)?;
    if !packet.admin() {
        return Err(Reject::ReservedBits);
    }
    let mac = mac(key, packet.shim());
    packet.set_admin_mac(&mac);
    packet.fill_checksum();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{AdminTrailer, WaspRepr};

    const KEY: AdminKey = [7; 32];

    fn signed(key_id: u32, seq: u64, key: &AdminKey) -> Vec<u8> {
        let repr = WaspRepr {
            keys: vec![1],
            scratch: vec![0; 8],
            code: vec![0x01],
            admin: Some(AdminTrailer { key_id, seq, mac: [0; 32] }),
            ..WaspRepr::default()
        };
        let mut bytes = repr.to_bytes().unwrap();
        seal(&mut bytes, key).unwrap();
        bytes
    }

    fn verify(keys: &AdminKeys, bytes: &[u8]) -> Result<(), Reject> {
        let packet = WaspPacket::new_checked(bytes).unwrap();
        assert!(packet.verify_checksum());
        keys.verify(&packet)
    }

    #[test]
    fn a_sealed_packet_verifies_once_then_is_a_replay() {
        let keys = AdminKeys::new([(1, KEY)]).unwrap();
        assert_eq!(verify(&keys, &signed(1, 10, &KEY)), Ok(()));
        assert_eq!(verify(&keys, &signed(1, 10, &KEY)), Err(Reject::Replayed));
        assert_eq!(verify(&keys, &signed(1, 9, &KEY)), Err(Reject::Replayed));
        assert_eq!(verify(&keys, &signed(1, 11, &KEY)), Ok(()));
        assert_eq!(keys.last_sequences()[&1], 11);
    }

    #[test]
    fn every_covered_bit_is_covered() {
        let keys = AdminKeys::new([(1, KEY)]).unwrap();
        let good = signed(1, 5, &KEY);
        for at in 0..good.len() {
            if (12..14).contains(&at) {
                continue; // the checksum, refilled below anyway
            }
            let mut bytes = good.clone();
            bytes[at] ^= 0x01;
            let Ok(mut packet) = WaspPacket::new_checked(&mut bytes[..]) else { continue };
            packet.fill_checksum();
            let result = keys.verify(&packet);
            assert!(result.is_err(), "a flip at byte {at} went unnoticed");
        }
        assert_eq!(keys.last_sequences()[&1], 0, "no tampered packet consumed a sequence number");
        assert_eq!(verify(&keys, &good), Ok(()));
    }

    #[test]
    fn unknown_key_ids_and_wrong_keys_are_refused() {
        let keys = AdminKeys::new([(1, KEY), (2, [8; 32])]).unwrap();
        assert_eq!(verify(&keys, &signed(3, 1, &KEY)), Err(Reject::UnknownKey));
        assert_eq!(verify(&keys, &signed(2, 1, &KEY)), Err(Reject::BadMac), "key 1 under id 2");
        assert_eq!(verify(&keys, &signed(2, 1, &[8; 32])), Ok(()));
        assert_eq!(keys.last_sequences(), BTreeMap::from([(1, 0), (2, 1)]));
    }

    #[test]
    fn restored_sequences_only_rise_and_never_add_ids() {
        let keys = AdminKeys::new([(1, KEY)]).unwrap();
        keys.restore_sequences(&BTreeMap::from([(1, 50), (9, 3)]));
        keys.restore_sequences(&BTreeMap::from([(1, 20)]));
        assert_eq!(keys.last_sequences(), BTreeMap::from([(1, 50)]));
        assert_eq!(verify(&keys, &signed(1, 50, &KEY)), Err(Reject::Replayed));
    }

    #[test]
    fn bad_key_rings_are_refused() {
        assert_eq!(AdminKeys::new([(0, KEY)]).err(), Some(AdminKeysError::ZeroKeyId));
        assert_eq!(AdminKeys::new([(4, KEY), (4, KEY)]).err(), Some(AdminKeysError::Duplicate(4)));
        let debug = format!("{:?}", AdminKeys::new([(4, KEY)]).unwrap());
        assert!(debug.contains("[4]") && !debug.contains("7, 7"), "{debug}");
    }
}
