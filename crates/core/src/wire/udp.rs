use super::{read_u16, write_u16, Error, Result};

/// A view of a UDP header and its payload.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    pub const HEADER_LEN: usize = 8;

    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Validates that the buffer holds the header and the length the header claims.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        let len = p.buffer.as_ref().len();
        if len < Self::HEADER_LEN {
            return Err(Error::Truncated);
        }
        let claimed = p.len() as usize;
        if claimed < Self::HEADER_LEN {
            return Err(Error::Malformed);
        }
        if claimed > len {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 0)
    }

    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2)
    }

    /// The UDP length field: header plus payload.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 4)
    }

    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 6)
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..self.len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    pub fn set_src_port(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), 0, v);
    }

    pub fn set_dst_port(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), 2, v);
    }

    pub fn set_len(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), 4, v);
    }

    pub fn set_checksum(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), 6, v);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.len() as usize;
        &mut self.buffer.as_mut()[Self::HEADER_LEN..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_field_is_checked() {
        let mut b = [0u8; 12];
        let mut u = UdpPacket::new_unchecked(&mut b[..]);
        u.set_len(12);
        u.set_dst_port(53);
        let u = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(u.payload().len(), 4);
        assert_eq!(u.dst_port(), 53);
        b[4..6].copy_from_slice(&13u16.to_be_bytes());
        assert_eq!(UdpPacket::new_checked(&b[..]).unwrap_err(), Error::Truncated);
        b[4..6].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(UdpPacket::new_checked(&b[..]).unwrap_err(), Error::Malformed);
    }
}
