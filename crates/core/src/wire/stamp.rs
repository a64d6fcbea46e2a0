use super::{read_u16, read_u32, read_u64, write_u16, write_u32, write_u64, Error, Result};

/// The 18-byte test stamp hotplane's generators put at the start of a UDP payload, so that a
/// sink can attribute each packet to a flow, detect loss, duplication and reordering, measure
/// latency, and see which program touched it. It fits the smallest Ethernet frame: 60 bytes
/// without FCS = 14 + 20 (IPv4) + 8 (UDP) + 18.
///
/// ```text
/// 0      2       4             8                    16     18
/// | magic | flow  | seq (u32)   | tx timestamp (ns)  | mark |
/// ```
/// All fields are big-endian. `mark` is zero when generated and free for programs to write
/// (the demo's per-flow functions write a constant there).
#[derive(Debug, Clone)]
pub struct Stamp<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Stamp<T> {
    pub const LEN: usize = 18;
    /// Not ASCII, so it cannot be mistaken for the start of a text magic such as the update
    /// envelope's "HPUP" or an acknowledgement's "HPAK".
    pub const MAGIC: u16 = 0xa5c3;
    /// Offset of `mark` inside the stamp, for stages that write it by offset.
    pub const MARK_OFFSET: usize = 16;

    /// Accepts the buffer only if it is long enough and starts with the magic.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < Self::LEN {
            return Err(Error::Truncated);
        }
        if read_u16(b, 0) != Self::MAGIC {
            return Err(Error::Malformed);
        }
        Ok(Self { buffer })
    }

    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    pub fn flow(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2)
    }

    pub fn seq(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 4)
    }

    pub fn tx_ts(&self) -> u64 {
        read_u64(self.buffer.as_ref(), 8)
    }

    pub fn mark(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 16)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Stamp<T> {
    /// Write a complete stamp (magic included) into a buffer of at least `LEN` bytes.
    pub fn emit(buffer: T, flow: u16, seq: u32, tx_ts: u64) -> Result<Self> {
        let mut s = Self { buffer };
        if s.buffer.as_ref().len() < Self::LEN {
            return Err(Error::Truncated);
        }
        let b = s.buffer.as_mut();
        write_u16(b, 0, Self::MAGIC);
        write_u16(b, 2, flow);
        write_u32(b, 4, seq);
        write_u64(b, 8, tx_ts);
        write_u16(b, 16, 0);
        Ok(s)
    }

    pub fn set_seq(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), 4, v);
    }

    pub fn set_tx_ts(&mut self, v: u64) {
        write_u64(self.buffer.as_mut(), 8, v);
    }

    pub fn set_mark(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), 16, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_then_read() {
        let mut b = [0u8; 20];
        Stamp::emit(&mut b[..], 7, 42, 123_456).unwrap().set_mark(9);
        let s = Stamp::new_checked(&b[..]).unwrap();
        assert_eq!((s.flow(), s.seq(), s.tx_ts(), s.mark()), (7, 42, 123_456, 9));
        assert_eq!(Stamp::new_checked(&b[..17]).unwrap_err(), Error::Truncated);
        b[0] = 0;
        assert_eq!(Stamp::new_checked(&b[..]).unwrap_err(), Error::Malformed);
    }
}
