use super::{checksum, read_u16, write_u16, Error, Result};
use core::net::Ipv4Addr;

/// IP protocol numbers the engine understands.
pub struct IpProtocol;

impl IpProtocol {
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const IPV6_FRAGMENT: u8 = 44;
    pub const ICMPV6: u8 = 58;
}

/// A view of an IPv4 header and its payload.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const TOTAL_LEN: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    pub const MIN_HEADER_LEN: usize = 20;

    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Validates version, header length and total length against the buffer. Trailing bytes
    /// beyond `total_len` (Ethernet padding) are allowed and excluded from `payload()`.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < Self::MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::Malformed);
        }
        let hl = self.header_len();
        if hl < Self::MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        let total = self.total_len() as usize;
        if total < hl {
            return Err(Error::Malformed);
        }
        if len < hl || len < total {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    pub fn header_len(&self) -> usize {
        ((self.buffer.as_ref()[field::VER_IHL] & 0x0f) as usize) * 4
    }

    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }

    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::TOTAL_LEN)
    }

    pub fn ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::IDENT)
    }

    /// True for a non-first fragment: it carries no transport header.
    pub fn is_later_fragment(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLAGS_FRAG) & 0x1fff != 0
    }

    pub fn more_fragments(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLAGS_FRAG) & 0x2000 != 0
    }

    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    pub fn src_addr(&self) -> Ipv4Addr {
        let b = self.buffer.as_ref();
        Ipv4Addr::new(b[field::SRC], b[field::SRC + 1], b[field::SRC + 2], b[field::SRC + 3])
    }

    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = self.buffer.as_ref();
        Ipv4Addr::new(b[field::DST], b[field::DST + 1], b[field::DST + 2], b[field::DST + 3])
    }

    /// Raw address bytes, for flow keys: avoids building `Ipv4Addr` on the fast path.
    pub fn src_bytes(&self) -> [u8; 4] {
        let b = self.buffer.as_ref();
        [b[12], b[13], b[14], b[15]]
    }

    pub fn dst_bytes(&self) -> [u8; 4] {
        let b = self.buffer.as_ref();
        [b[16], b[17], b[18], b[19]]
    }

    pub fn verify_checksum(&self) -> bool {
        checksum::internet_checksum(&self.buffer.as_ref()[..self.header_len()]) == 0
    }

    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[self.header_len()..self.total_len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | ((header_len / 4) as u8 & 0x0f);
    }

    pub fn set_dscp_ecn(&mut self, v: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = v;
    }

    pub fn set_total_len(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::TOTAL_LEN, v);
    }

    pub fn set_ident(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::IDENT, v);
    }

    pub fn set_flags_frag(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::FLAGS_FRAG, v);
    }

    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }

    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = v;
    }

    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC..field::SRC + 4].copy_from_slice(&a.octets());
    }

    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST..field::DST + 4].copy_from_slice(&a.octets());
    }

    /// Recompute the header checksum over the current header bytes.
    pub fn fill_checksum(&mut self) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, 0);
        let hl = self.header_len();
        let c = checksum::internet_checksum(&self.buffer.as_ref()[..hl]);
        write_u16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, total) = (self.header_len(), self.total_len() as usize);
        &mut self.buffer.as_mut()[hl..total]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> [u8; 28] {
        let mut b = [0u8; 28];
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.set_version_and_header_len(20);
        p.set_total_len(28);
        p.set_ttl(64);
        p.set_protocol(IpProtocol::UDP);
        p.set_src_addr(Ipv4Addr::new(10, 0, 0, 1));
        p.set_dst_addr(Ipv4Addr::new(10, 0, 0, 2));
        p.fill_checksum();
        b
    }

    #[test]
    fn round_trip_and_checksum() {
        let b = header();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.payload().len(), 8);
    }

    #[test]
    fn rejects_lies() {
        let mut b = header();
        b[0] = 0x44; // ihl 4 words < 5
        assert_eq!(Ipv4Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        let mut b = header();
        b[2..4].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(Ipv4Packet::new_checked(&b[..]).unwrap_err(), Error::Truncated);
        let mut b = header();
        b[0] = 0x65;
        assert_eq!(Ipv4Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        assert_eq!(Ipv4Packet::new_checked(&b[..19]).unwrap_err(), Error::Truncated);
    }
}
