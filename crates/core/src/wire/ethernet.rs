use super::{read_u16, write_u16, Error, Result};
use core::fmt;

/// A 48-bit Ethernet MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    pub const BROADCAST: Self = Self([0xff; 6]);

    pub fn from_bytes(b: &[u8]) -> Self {
        let mut a = [0u8; 6];
        a.copy_from_slice(&b[..6]);
        Self(a)
    }

    /// A locally administered unicast address; handy for generated traffic.
    pub const fn local(n: u32) -> Self {
        let b = n.to_be_bytes();
        Self([0x02, 0x00, b[0], b[1], b[2], b[3]])
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

impl fmt::Debug for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl core::str::FromStr for EthernetAddress {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in &mut out {
            let p = parts.next().ok_or(Error::Malformed)?;
            if p.len() != 2 {
                return Err(Error::Malformed);
            }
            *byte = u8::from_str_radix(p, 16).map_err(|_| Error::Malformed)?;
        }
        if parts.next().is_some() {
            return Err(Error::Malformed);
        }
        Ok(Self(out))
    }
}

impl serde::Serialize for EthernetAddress {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for EthernetAddress {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> core::result::Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(|_| {
            serde::de::Error::custom(format!("`{s}` is not a MAC address (aa:bb:cc:dd:ee:ff)"))
        })
    }
}

/// EtherType values the engine understands.
pub struct EtherType;

impl EtherType {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const IPV6: u16 = 0x86dd;
}

/// A view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    pub const HEADER_LEN: usize = 14;

    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < Self::HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn dst_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[0..6])
    }

    pub fn src_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[6..12])
    }

    pub fn ethertype(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 12)
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[0..6].copy_from_slice(&a.0);
    }

    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[6..12].copy_from_slice(&a.0);
    }

    pub fn set_ethertype(&mut self, t: u16) {
        write_u16(self.buffer.as_mut(), 12, t);
    }

    /// Exchange source and destination MAC addresses in place (the `l2fwd` / macswap operation).
    #[inline]
    pub fn swap_addrs(&mut self) {
        let b = self.buffer.as_mut();
        let (dst, src) = b[0..12].split_at_mut(6);
        dst.swap_with_slice(src);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[Self::HEADER_LEN..]
    }
}

/// A view of one 802.1Q / 802.1ad tag: TCI then the inner EtherType.
#[derive(Debug, Clone)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    pub const LEN: usize = 4;

    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < Self::LEN {
            return Err(Error::Truncated);
        }
        Ok(Self { buffer })
    }

    pub fn vlan_id(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 0) & 0x0fff
    }

    pub fn priority(&self) -> u8 {
        (self.buffer.as_ref()[0] >> 5) & 0x7
    }

    pub fn inner_ethertype(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_swap() {
        let mut bytes = [0u8; 20];
        bytes[0..6].copy_from_slice(&[1, 2, 3, 4, 5, 6]);
        bytes[6..12].copy_from_slice(&[7, 8, 9, 10, 11, 12]);
        bytes[12..14].copy_from_slice(&[0x08, 0x00]);
        let mut f = EthernetFrame::new_checked(&mut bytes[..]).unwrap();
        assert_eq!(f.ethertype(), EtherType::IPV4);
        f.swap_addrs();
        assert_eq!(f.dst_addr().0, [7, 8, 9, 10, 11, 12]);
        assert_eq!(f.src_addr().0, [1, 2, 3, 4, 5, 6]);
        assert_eq!(EthernetFrame::new_checked(&bytes[..13]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn mac_text_round_trip() {
        let a: EthernetAddress = "02:00:0a:0b:0c:0d".parse().unwrap();
        assert_eq!(a.to_string(), "02:00:0a:0b:0c:0d");
        assert!("02:00:0a:0b:0c".parse::<EthernetAddress>().is_err());
        assert!("02:00:0a:0b:0c:0d:0e".parse::<EthernetAddress>().is_err());
        assert!("zz:00:0a:0b:0c:0d".parse::<EthernetAddress>().is_err());
    }
}
