use super::{read_u16, read_u32, write_u16, Error, Result};

/// A view of a TCP header (fields the data plane reads or rewrites) and its payload.
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    pub const MIN_HEADER_LEN: usize = 20;

    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        let len = p.buffer.as_ref().len();
        if len < Self::MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = p.header_len();
        if hl < Self::MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if hl > len {
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

    pub fn seq_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 4)
    }

    pub fn ack_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 8)
    }

    pub fn header_len(&self) -> usize {
        ((self.buffer.as_ref()[12] >> 4) as usize) * 4
    }

    /// The flag bits (FIN = 0x01, SYN = 0x02, RST = 0x04, PSH = 0x08, ACK = 0x10, ...).
    pub fn flags(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 12) & 0x01ff
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    pub fn set_src_port(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), 0, v);
    }

    pub fn set_dst_port(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), 2, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_offset_is_checked() {
        let mut b = [0u8; 24];
        b[12] = 0x60; // 24-byte header
        b[2..4].copy_from_slice(&80u16.to_be_bytes());
        let t = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(t.dst_port(), 80);
        assert_eq!(t.payload().len(), 0);
        assert_eq!(TcpPacket::new_checked(&b[..22]).unwrap_err(), Error::Truncated);
        b[12] = 0x40;
        assert_eq!(TcpPacket::new_checked(&b[..]).unwrap_err(), Error::Malformed);
    }
}
