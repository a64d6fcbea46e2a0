//! The WASP shim (`docs/wasp.md` §2) as a smoltcp-style zero-copy view plus an owned `Repr`.
//!
//! [`WaspPacket::new_checked`] validates every length once, so the accessors never index out of
//! bounds afterwards; it does not verify the checksum (call [`WaspPacket::verify_checksum`], or
//! parse a [`WaspRepr`], which does).

use crate::error::Reject;
use hotplane_core::wire::internet_checksum;

/// IPv4 protocol / IPv6 next header carrying the shim (RFC 3692 experimental).
pub const IP_PROTOCOL: u8 = 253;
/// Default UDP destination port of the UDP carriage (configurable; not IANA-assigned).
pub const DEFAULT_UDP_PORT: u16 = 9277;
/// `next_header` value meaning "nothing identified follows" (IPv6 No Next Header).
pub const NO_NEXT_HEADER: u8 = 59;
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 16;
pub const MAX_KEYS: usize = 4;
pub const MAX_CODE: usize = 64;
pub const MAX_SCRATCH: usize = 128;
/// Bytes of the admin trailer (key id, sequence number, MAC) behind the code of an ADMIN packet.
pub const ADMIN_TRAILER_LEN: usize = 4 + 8 + ADMIN_MAC_LEN;
/// Bytes of the admin MAC (BLAKE3 keyed hash).
pub const ADMIN_MAC_LEN: usize = 32;
/// The longest shim: header, 4 keys, 128-byte scratchpad, 64-byte code, admin trailer.
pub const MAX_SHIM: usize = HEADER_LEN + 8 * MAX_KEYS + MAX_SCRATCH + MAX_CODE + ADMIN_TRAILER_LEN;

/// The access class of a declared key (`docs/wasp.md` §8), two bits per key slot in the
/// header's `scopes` byte. Each scope is its own namespace in the store: the same 64-bit key
/// names three unrelated entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Scope {
    /// Any packet that knows the key reads and writes the entry.
    #[default]
    Public = 0,
    /// Every packet reads the entry; only authenticated admin packets write it.
    Protected = 1,
    /// Reachable only by packets carrying the same code bytes: the store addresses the entry by
    /// a keyed hash of the code and the key.
    Private = 2,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Public, Scope::Protected, Scope::Private];

    /// The scope of a two-bit code (3 is reserved).
    pub fn from_bits(bits: u8) -> Option<Scope> {
        Self::ALL.get(usize::from(bits)).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            Scope::Public => "public",
            Scope::Protected => "protected",
            Scope::Private => "private",
        }
    }

    /// The header's `scopes` byte for these per-slot scopes (slot i in bits 2i..2i+1).
    pub fn pack(scopes: &[Scope; MAX_KEYS]) -> u8 {
        scopes.iter().enumerate().fold(0, |byte, (slot, &scope)| byte | (scope as u8) << (2 * slot))
    }

    /// The per-slot scopes of a `scopes` byte; a reserved code reads as public (`check_len`
    /// refuses such a byte before anything reads it).
    pub fn unpack(byte: u8) -> [Scope; MAX_KEYS] {
        let mut scopes = [Scope::Public; MAX_KEYS];
        for (slot, scope) in scopes.iter_mut().enumerate() {
            *scope = Scope::from_bits((byte >> (2 * slot)) & 3).unwrap_or(Scope::Public);
        }
        scopes
    }
}

/// The admin trailer of an ADMIN packet (`docs/wasp.md` §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AdminTrailer {
    /// Which shared key authenticates the packet (never 0).
    pub key_id: u32,
    /// Per key id, strictly increasing from one admin packet to the next.
    pub seq: u64,
    pub mac: [u8; ADMIN_MAC_LEN],
}

/// Bits of the `flags` byte.
pub mod flags {
    /// The packet was returned to its source (RETURN may happen once over the whole path).
    pub const RETURNED: u8 = 0x01;
    /// A node faulted running the program and forwarded the packet flagged.
    pub const FAULT: u8 = 0x02;
    /// Admin packet: an admin trailer follows the code, and a node that holds its key and
    /// verifies its MAC and sequence number lets it write protected entries. A node without
    /// admin keys refuses it as `reserved-bits`.
    pub const ADMIN: u8 = 0x04;
    /// Bits a packet may carry.
    pub const KNOWN: u8 = RETURNED | FAULT | ADMIN;
}

mod field {
    pub const VERSION: usize = 0;
    pub const FLAGS: usize = 1;
    pub const NEXT_HEADER: usize = 2;
    pub const NKEYS: usize = 3;
    pub const CODE_LEN: usize = 4;
    pub const SCRATCH_LEN: usize = 5;
    pub const FAULT_PC: usize = 6;
    pub const FAULT_CODE: usize = 7;
    pub const CID: usize = 8;
    pub const CHECKSUM: usize = 12;
    pub const SCOPES: usize = 14;
    pub const RESERVED: usize = 15;
}

/// A read (and, over `AsMut`, write) view of a WASP shim at the start of `buffer`.
#[derive(Debug, Clone)]
pub struct WaspPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> WaspPacket<T> {
    /// Wraps without checking; accessors may panic on a buffer `check_len` would refuse.
    pub const fn new_unchecked(buffer: T) -> Self {
        WaspPacket { buffer }
    }

    /// Wraps after checking the version, reserved bits and every length.
    pub fn new_checked(buffer: T) -> Result<Self, Reject> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks what `new_checked` checks.
    pub fn check_len(&self) -> Result<(), Reject> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Reject::Truncated);
        }
        if b[field::VERSION] != VERSION {
            return Err(Reject::BadVersion);
        }
        if b[field::FLAGS] & !flags::KNOWN != 0 || b[field::RESERVED] != 0 {
            return Err(Reject::ReservedBits);
        }
        let nkeys = usize::from(b[field::NKEYS]);
        if nkeys > MAX_KEYS {
            return Err(Reject::TooManyKeys);
        }
        // Every declared slot names a scope (code 3 is reserved), undeclared slots are 0.
        let scopes = b[field::SCOPES];
        let declared_bits = if nkeys == MAX_KEYS { 0xff } else { (1u8 << (2 * nkeys)) - 1 };
        if scopes & !declared_bits != 0 || (0..nkeys).any(|slot| (scopes >> (2 * slot)) & 3 == 3) {
            return Err(Reject::ReservedBits);
        }
        if usize::from(b[field::CODE_LEN]) > MAX_CODE {
            return Err(Reject::CodeTooLong);
        }
        let scratch = usize::from(b[field::SCRATCH_LEN]);
        if scratch > MAX_SCRATCH {
            return Err(Reject::ScratchTooLong);
        }
        if scratch % 8 != 0 {
            return Err(Reject::ScratchNotWords);
        }
        if b.len() < self.total_len() {
            return Err(Reject::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    pub fn returned(&self) -> bool {
        self.flags() & flags::RETURNED != 0
    }
    pub fn faulted(&self) -> bool {
        self.flags() & flags::FAULT != 0
    }
    /// The packet claims to be an admin packet (a trailer follows the code); whether it is
    /// authentic is [`crate::admin::AdminKeys::verify`]'s business.
    pub fn admin(&self) -> bool {
        self.flags() & flags::ADMIN != 0
    }
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }
    pub fn key_count(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::NKEYS])
    }
    pub fn code_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::CODE_LEN])
    }
    pub fn scratch_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::SCRATCH_LEN])
    }
    pub fn fault_pc(&self) -> u8 {
        self.buffer.as_ref()[field::FAULT_PC]
    }
    pub fn fault_code(&self) -> u8 {
        self.buffer.as_ref()[field::FAULT_CODE]
    }
    pub fn cid(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[field::CID], b[field::CID + 1], b[field::CID + 2], b[field::CID + 3]])
    }
    pub fn checksum(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::CHECKSUM], b[field::CHECKSUM + 1]])
    }
    /// The raw `scopes` byte.
    pub fn scopes_byte(&self) -> u8 {
        self.buffer.as_ref()[field::SCOPES]
    }
    /// The scope of each key slot (undeclared slots public).
    pub fn scopes(&self) -> [Scope; MAX_KEYS] {
        Scope::unpack(self.scopes_byte())
    }

    fn keys_off(&self) -> usize {
        HEADER_LEN
    }
    fn scratch_off(&self) -> usize {
        HEADER_LEN + 8 * self.key_count()
    }
    fn code_off(&self) -> usize {
        self.scratch_off() + self.scratch_len()
    }

    fn trailer_off(&self) -> usize {
        self.code_off() + self.code_len()
    }

    /// Length of the whole shim (header, keys, scratchpad, code, admin trailer if ADMIN).
    pub fn total_len(&self) -> usize {
        self.trailer_off() + if self.admin() { ADMIN_TRAILER_LEN } else { 0 }
    }

    /// The shim's own bytes (what the checksum and, for an admin packet, the MAC cover).
    pub fn shim(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.total_len()]
    }

    /// The admin trailer, or `None` when ADMIN is clear.
    pub fn admin_trailer(&self) -> Option<AdminTrailer> {
        if !self.admin() {
            return None;
        }
        let t = &self.buffer.as_ref()[self.trailer_off()..self.total_len()];
        let mut key_id = [0u8; 4];
        let mut seq = [0u8; 8];
        let mut mac = [0u8; ADMIN_MAC_LEN];
        key_id.copy_from_slice(&t[..4]);
        seq.copy_from_slice(&t[4..12]);
        mac.copy_from_slice(&t[12..]);
        Some(AdminTrailer { key_id: u32::from_be_bytes(key_id), seq: u64::from_be_bytes(seq), mac })
    }

    /// Declared key `slot`, or `None` beyond `key_count`.
    pub fn key(&self, slot: usize) -> Option<u64> {
        if slot >= self.key_count() {
            return None;
        }
        let at = self.keys_off() + 8 * slot;
        let mut word = [0u8; 8];
        word.copy_from_slice(&self.buffer.as_ref()[at..at + 8]);
        Some(u64::from_be_bytes(word))
    }

    /// The declared keys, copied into a fixed array (unused slots 0).
    pub fn keys(&self) -> ([u64; MAX_KEYS], usize) {
        let mut keys = [0u64; MAX_KEYS];
        let n = self.key_count().min(MAX_KEYS);
        for (slot, key) in keys.iter_mut().enumerate().take(n) {
            *key = self.key(slot).unwrap_or(0);
        }
        (keys, n)
    }

    pub fn scratch(&self) -> &[u8] {
        &self.buffer.as_ref()[self.scratch_off()..self.code_off()]
    }
    pub fn code(&self) -> &[u8] {
        &self.buffer.as_ref()[self.code_off()..self.trailer_off()]
    }
    /// The bytes after the shim (transport header and payload), never touched by WASP.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.total_len()..]
    }

    /// True when the Internet checksum over the shim is right.
    pub fn verify_checksum(&self) -> bool {
        internet_checksum(&self.buffer.as_ref()[..self.total_len()]) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> WaspPacket<T> {
    pub fn set_flags(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value;
    }
    pub fn set_next_header(&mut self, value: u8) {
        self.buffer.as_mut()[field::NEXT_HEADER] = value;
    }
    pub fn set_fault(&mut self, pc: u8, code: u8) {
        let b = self.buffer.as_mut();
        b[field::FAULT_PC] = pc;
        b[field::FAULT_CODE] = code;
    }
    pub fn set_cid(&mut self, value: u32) {
        self.buffer.as_mut()[field::CID..field::CID + 4].copy_from_slice(&value.to_be_bytes());
    }
    pub fn set_checksum(&mut self, value: u16) {
        self.buffer.as_mut()[field::CHECKSUM..field::CHECKSUM + 2]
            .copy_from_slice(&value.to_be_bytes());
    }
    pub fn scratch_mut(&mut self) -> &mut [u8] {
        let (from, to) = (self.scratch_off(), self.code_off());
        &mut self.buffer.as_mut()[from..to]
    }
    /// Writes the admin trailer's MAC (ADMIN set; otherwise nothing to write).
    pub fn set_admin_mac(&mut self, mac: &[u8; ADMIN_MAC_LEN]) {
        if self.admin() {
            let end = self.total_len();
            self.buffer.as_mut()[end - ADMIN_MAC_LEN..end].copy_from_slice(mac);
        }
    }
    /// Recomputes the checksum over the shim.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = internet_checksum(&self.buffer.as_ref()[..self.total_len()]);
        self.set_checksum(sum);
    }
}

/// The parsed, owned form of a shim, for building and inspecting packets off the fast path.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WaspRepr {
    pub flags: u8,
    pub next_header: u8,
    pub cid: u32,
    pub fault_pc: u8,
    pub fault_code: u8,
    pub keys: Vec<u64>,
    /// The scope of each key slot; slots beyond `keys` must stay public.
    pub scopes: [Scope; MAX_KEYS],
    pub scratch: Vec<u8>,
    pub code: Vec<u8>,
    /// The admin trailer; `Some` exactly when `flags` has ADMIN (emit sets the bit).
    pub admin: Option<AdminTrailer>,
}

impl WaspRepr {
    /// Parses a checked view, verifying the checksum.
    pub fn parse<T: AsRef<[u8]>>(packet: &WaspPacket<T>) -> Result<WaspRepr, Reject> {
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(Reject::BadChecksum);
        }
        let (keys, n) = packet.keys();
        Ok(WaspRepr {
            flags: packet.flags(),
            next_header: packet.next_header(),
            cid: packet.cid(),
            fault_pc: packet.fault_pc(),
            fault_code: packet.fault_code(),
            keys: keys[..n].to_vec(),
            scopes: packet.scopes(),
            scratch: packet.scratch().to_vec(),
            code: packet.code().to_vec(),
            admin: packet.admin_trailer(),
        })
    }

    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + 8 * self.keys.len()
            + self.scratch.len()
            + self.code.len()
            + if self.admin.is_some() { ADMIN_TRAILER_LEN } else { 0 }
    }

    /// The `flags` byte `emit` writes: ADMIN follows `admin`.
    fn wire_flags(&self) -> u8 {
        if self.admin.is_some() {
            self.flags | flags::ADMIN
        } else {
            self.flags
        }
    }

    /// Checks the limits `new_checked` enforces, so that an emitted shim parses back.
    pub fn validate(&self) -> Result<(), Reject> {
        if self.flags & !flags::KNOWN != 0
            || (self.flags & flags::ADMIN != 0 && self.admin.is_none())
        {
            return Err(Reject::ReservedBits);
        }
        if self.keys.len() > MAX_KEYS {
            return Err(Reject::TooManyKeys);
        }
        if self.scopes[self.keys.len()..].iter().any(|&scope| scope != Scope::Public) {
            return Err(Reject::ReservedBits);
        }
        if self.code.len() > MAX_CODE {
            return Err(Reject::CodeTooLong);
        }
        if self.scratch.len() > MAX_SCRATCH {
            return Err(Reject::ScratchTooLong);
        }
        if self.scratch.len() % 8 != 0 {
            return Err(Reject::ScratchNotWords);
        }
        Ok(())
    }

    /// Writes the shim at the start of `buffer` with its checksum.
    pub fn emit(&self, buffer: &mut [u8]) -> Result<(), Reject> {
        self.validate()?;
        let len = self.buffer_len();
        let b = buffer.get_mut(..len).ok_or(Reject::Truncated)?;
        b[field::VERSION] = VERSION;
        b[field::FLAGS] = self.wire_flags();
        b[field::NEXT_HEADER] = self.next_header;
        // The lengths fit in a byte: validate() bounded them.
        b[field::NKEYS] = self.keys.len() as u8;
        b[field::CODE_LEN] = self.code.len() as u8;
        b[field::SCRATCH_LEN] = self.scratch.len() as u8;
        b[field::FAULT_PC] = self.fault_pc;
        b[field::FAULT_CODE] = self.fault_code;
        b[field::CID..field::CID + 4].copy_from_slice(&self.cid.to_be_bytes());
        b[field::CHECKSUM..field::CHECKSUM + 2].fill(0);
        b[field::SCOPES] = Scope::pack(&self.scopes);
        b[field::RESERVED] = 0;
        let mut at = HEADER_LEN;
        for key in &self.keys {
            b[at..at + 8].copy_from_slice(&key.to_be_bytes());
            at += 8;
        }
        b[at..at + self.scratch.len()].copy_from_slice(&self.scratch);
        at += self.scratch.len();
        b[at..at + self.code.len()].copy_from_slice(&self.code);
        at += self.code.len();
        if let Some(trailer) = &self.admin {
            b[at..at + 4].copy_from_slice(&trailer.key_id.to_be_bytes());
            b[at + 4..at + 12].copy_from_slice(&trailer.seq.to_be_bytes());
            b[at + 12..at + ADMIN_TRAILER_LEN].copy_from_slice(&trailer.mac);
        }
        WaspPacket::new_unchecked(b).fill_checksum();
        Ok(())
    }

    /// Emits into a new vector (tools and tests).
    pub fn to_bytes(&self) -> Result<Vec<u8>, Reject> {
        let mut bytes = vec![0u8; self.buffer_len()];
        self.emit(&mut bytes)?;
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> WaspRepr {
        WaspRepr {
            flags: 0,
            next_header: 17,
            cid: 0xdead_beef,
            fault_pc: 0,
            fault_code: 0,
            keys: vec![0x0102_0304_0506_0708, 42],
            scopes: [Scope::Protected, Scope::Private, Scope::Public, Scope::Public],
            scratch: vec![1, 2, 3, 4, 5, 6, 7, 8],
            code: vec![0x90, 0x18, 0x01],
            admin: None,
        }
    }

    #[test]
    fn repr_round_trips_and_lays_out_fields_as_specified() {
        let repr = sample();
        let mut bytes = repr.to_bytes().unwrap();
        assert_eq!(bytes.len(), 16 + 16 + 8 + 3);
        assert_eq!(&bytes[..6], &[1, 0, 17, 2, 3, 8]);
        assert_eq!(&bytes[8..12], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(&bytes[14..16], &[0b0000_1001, 0], "slot 0 protected, slot 1 private");
        assert_eq!(&bytes[16..24], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&bytes[40..43], &[0x90, 0x18, 0x01]);
        bytes.extend_from_slice(b"payload");
        let view = WaspPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(view.payload(), b"payload");
        assert_eq!(view.key(1), Some(42));
        assert_eq!(view.key(2), None);
        assert_eq!(WaspRepr::parse(&view).unwrap(), repr);
    }

    #[test]
    fn the_admin_trailer_follows_the_code_and_sets_the_flag() {
        let repr = WaspRepr {
            admin: Some(AdminTrailer { key_id: 0x0a0b_0c0d, seq: 7, mac: [0x5a; ADMIN_MAC_LEN] }),
            ..sample()
        };
        let bytes = repr.to_bytes().unwrap();
        assert_eq!(bytes.len(), 16 + 16 + 8 + 3 + 44);
        assert_eq!(bytes[1], flags::ADMIN);
        assert_eq!(&bytes[43..47], &[0x0a, 0x0b, 0x0c, 0x0d]);
        assert_eq!(&bytes[47..55], &7u64.to_be_bytes());
        assert_eq!(&bytes[55..], &[0x5a; 32]);
        let view = WaspPacket::new_checked(&bytes[..]).unwrap();
        assert!(view.verify_checksum(), "the checksum covers the trailer");
        assert_eq!(view.code(), &[0x90, 0x18, 0x01]);
        let parsed = WaspRepr::parse(&view).unwrap();
        assert_eq!(parsed.flags, flags::ADMIN);
        assert_eq!(WaspRepr { flags: 0, ..parsed }, repr);
        // ADMIN without a trailer would not parse back.
        let flag_only = WaspRepr { flags: flags::ADMIN, ..sample() };
        assert_eq!(flag_only.to_bytes(), Err(Reject::ReservedBits));
        let scoped_beyond_keys = WaspRepr { scopes: [Scope::Protected; MAX_KEYS], ..sample() };
        assert_eq!(scoped_beyond_keys.to_bytes(), Err(Reject::ReservedBits));
    }

    #[test]
    fn checksum_detects_a_flipped_bit_and_refills() {
        let mut bytes = sample().to_bytes().unwrap();
        bytes[20] ^= 0x10;
        let view = WaspPacket::new_checked(&bytes[..]).unwrap();
        assert!(!view.verify_checksum());
        assert_eq!(WaspRepr::parse(&view), Err(Reject::BadChecksum));
        let mut view = WaspPacket::new_checked(&mut bytes[..]).unwrap();
        view.fill_checksum();
        assert!(view.verify_checksum());
    }

    #[test]
    fn new_checked_names_each_malformation() {
        let good = sample().to_bytes().unwrap();
        let with = |at: usize, value: u8| {
            let mut b = good.clone();
            b[at] = value;
            WaspPacket::new_checked(b).err()
        };
        assert_eq!(WaspPacket::new_checked(&good[..10]).err(), Some(Reject::Truncated));
        assert_eq!(WaspPacket::new_checked(&good[..good.len() - 1]).err(), Some(Reject::Truncated));
        assert_eq!(with(0, 2), Some(Reject::BadVersion));
        assert_eq!(with(1, 0x80), Some(Reject::ReservedBits));
        assert_eq!(with(1, flags::ADMIN), Some(Reject::Truncated), "no room for the trailer");
        assert_eq!(with(1, 0x08), Some(Reject::ReservedBits));
        assert_eq!(with(15, 1), Some(Reject::ReservedBits));
        assert_eq!(with(14, 0b0000_0011), Some(Reject::ReservedBits), "scope code 3");
        assert_eq!(with(14, 0b0001_0000), Some(Reject::ReservedBits), "scope of slot 2 of 2");
        assert_eq!(with(14, 0b0000_1010), None, "two private slots");
        assert_eq!(with(3, 5), Some(Reject::TooManyKeys));
        assert_eq!(with(4, 65), Some(Reject::CodeTooLong));
        assert_eq!(with(5, 136), Some(Reject::ScratchTooLong));
        assert_eq!(with(5, 9), Some(Reject::ScratchNotWords));
        assert_eq!(with(4, 64), Some(Reject::Truncated));
    }

    #[test]
    fn emit_refuses_what_would_not_parse() {
        let mut repr = sample();
        repr.keys = vec![0; 5];
        assert_eq!(repr.to_bytes(), Err(Reject::TooManyKeys));
        let mut repr = sample();
        repr.scratch = vec![0; 7];
        assert_eq!(repr.to_bytes(), Err(Reject::ScratchNotWords));
        let mut small = [0u8; 8];
        assert_eq!(sample().emit(&mut small), Err(Reject::Truncated));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            if let Ok(view) = WaspPacket::new_checked(&bytes[..]) {
                let _ = WaspRepr::parse(&view);
                let _ = (view.code(), view.scratch(), view.payload(), view.keys());
            }
        }
    }
}
