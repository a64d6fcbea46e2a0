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
/// The longest shim: header, 4 keys, 128-byte scratchpad, 64-byte code.
pub const MAX_SHIM: usize = HEADER_LEN + 8 * MAX_KEYS + MAX_SCRATCH + MAX_CODE;

/// Bits of the `flags` byte.
pub mod flags {
    /// The packet was returned to its source (RETURN may happen once over the whole path).
    pub const RETURNED: u8 = 0x01;
    /// A node faulted running the program and forwarded the packet flagged.
    pub const FAULT: u8 = 0x02;
    /// Admin packet (protected scope). Reserved: refused as `reserved-bits` until that scope
    /// exists, so no node ever treats an unauthenticated packet as admin.
    pub const ADMIN: u8 = 0x04;
    /// Bits a packet may carry today.
    pub const KNOWN: u8 = RETURNED | FAULT;
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
    pub const RESERVED: usize = 14;
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
        if b[field::FLAGS] & !flags::KNOWN != 0 || b[field::RESERVED..field::RESERVED + 2] != [0, 0]
        {
            return Err(Reject::ReservedBits);
        }
        if usize::from(b[field::NKEYS]) > MAX_KEYS {
            return Err(Reject::TooManyKeys);
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

    fn keys_off(&self) -> usize {
        HEADER_LEN
    }
    fn scratch_off(&self) -> usize {
        HEADER_LEN + 8 * self.key_count()
    }
    fn code_off(&self) -> usize {
        self.scratch_off() + self.scratch_len()
    }

    /// Length of the whole shim (header, keys, scratchpad, code).
    pub fn total_len(&self) -> usize {
        self.code_off() + self.code_len()
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
        &self.buffer.as_ref()[self.code_off()..self.total_len()]
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
    pub scratch: Vec<u8>,
    pub code: Vec<u8>,
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
            scratch: packet.scratch().to_vec(),
            code: packet.code().to_vec(),
        })
    }

    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + 8 * self.keys.len() + self.scratch.len() + self.code.len()
    }

    /// Checks the limits `new_checked` enforces, so that an emitted shim parses back.
    pub fn validate(&self) -> Result<(), Reject> {
        if self.flags & !flags::KNOWN != 0 {
            return Err(Reject::ReservedBits);
        }
        if self.keys.len() > MAX_KEYS {
            return Err(Reject::TooManyKeys);
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
        b[field::FLAGS] = self.flags;
        b[field::NEXT_HEADER] = self.next_header;
        // The lengths fit in a byte: validate() bounded them.
        b[field::NKEYS] = self.keys.len() as u8;
        b[field::CODE_LEN] = self.code.len() as u8;
        b[field::SCRATCH_LEN] = self.scratch.len() as u8;
        b[field::FAULT_PC] = self.fault_pc;
        b[field::FAULT_CODE] = self.fault_code;
        b[field::CID..field::CID + 4].copy_from_slice(&self.cid.to_be_bytes());
        b[field::CHECKSUM..field::RESERVED + 2].fill(0);
        let mut at = HEADER_LEN;
        for key in &self.keys {
            b[at..at + 8].copy_from_slice(&key.to_be_bytes());
            at += 8;
        }
        b[at..at + self.scratch.len()].copy_from_slice(&self.scratch);
        at += self.scratch.len();
        b[at..at + self.code.len()].copy_from_slice(&self.code);
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
            scratch: vec![1, 2, 3, 4, 5, 6, 7, 8],
            code: vec![0x90, 0x18, 0x01],
        }
    }

    #[test]
    fn repr_round_trips_and_lays_out_fields_as_specified() {
        let repr = sample();
        let mut bytes = repr.to_bytes().unwrap();
        assert_eq!(bytes.len(), 16 + 16 + 8 + 3);
        assert_eq!(&bytes[..6], &[1, 0, 17, 2, 3, 8]);
        assert_eq!(&bytes[8..12], &[0xde, 0xad, 0xbe, 0xef]);
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
        assert_eq!(with(1, flags::ADMIN), Some(Reject::ReservedBits));
        assert_eq!(with(15, 1), Some(Reject::ReservedBits));
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
