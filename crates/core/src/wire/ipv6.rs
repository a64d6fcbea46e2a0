use super::{read_u16, write_u16, Error, Result};
use core::net::Ipv6Addr;

/// A view of a fixed IPv6 header and its payload. Extension headers are the payload; the flow
/// classifier walks the ones it needs.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    pub const HEADER_LEN: usize = 40;

    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < Self::HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::Malformed);
        }
        if len < Self::HEADER_LEN + self.payload_len() as usize {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    pub fn traffic_class(&self) -> u8 {
        let b = self.buffer.as_ref();
        (b[0] << 4) | (b[1] >> 4)
    }

    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 4)
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[6]
    }

    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[7]
    }

    pub fn src_bytes(&self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[8..24]);
        a
    }

    pub fn dst_bytes(&self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[24..40]);
        a
    }

    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.src_bytes())
    }

    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.dst_bytes())
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..Self::HEADER_LEN + self.payload_len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    pub fn set_version_class_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let w = (6u32 << 28) | ((traffic_class as u32) << 20) | (flow_label & 0x000f_ffff);
        self.buffer.as_mut()[0..4].copy_from_slice(&w.to_be_bytes());
    }

    pub fn set_payload_len(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), 4, v);
    }

    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[6] = v;
    }

    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[7] = v;
    }

    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[8..24].copy_from_slice(&a.octets());
    }

    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[24..40].copy_from_slice(&a.octets());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = Self::HEADER_LEN + self.payload_len() as usize;
        &mut self.buffer.as_mut()[Self::HEADER_LEN..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks() {
        let mut b = [0u8; 48];
        let mut p = Ipv6Packet::new_unchecked(&mut b[..]);
        p.set_version_class_flow(0, 7);
        p.set_payload_len(8);
        p.set_next_header(17);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload().len(), 8);
        assert_eq!(p.next_header(), 17);
        assert_eq!(Ipv6Packet::new_checked(&b[..47]).unwrap_err(), Error::Truncated);
        b[0] = 0x40;
        assert_eq!(Ipv6Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
    }
}
