//! The Internet checksum (RFC 1071) and the pseudo-header sums UDP and TCP need.

/// A running one's-complement sum; `finish` folds and complements it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Checksum(u64);

impl Checksum {
    pub fn new() -> Self {
        Self(0)
    }

    /// Add bytes as big-endian 16-bit words; an odd trailing byte is padded with zero.
    pub fn add_bytes(&mut self, data: &[u8]) -> &mut Self {
        let mut chunks = data.chunks_exact(2);
        for c in &mut chunks {
            self.0 += u16::from_be_bytes([c[0], c[1]]) as u64;
        }
        if let [last] = chunks.remainder() {
            self.0 += (*last as u64) << 8;
        }
        self
    }

    pub fn add_u16(&mut self, v: u16) -> &mut Self {
        self.0 += v as u64;
        self
    }

    pub fn add_u32(&mut self, v: u32) -> &mut Self {
        self.0 += (v >> 16) as u64 + (v & 0xffff) as u64;
        self
    }

    pub fn finish(&self) -> u16 {
        let mut s = self.0;
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }
}

/// The checksum of `data` alone: zero when `data` already contains a correct checksum.
pub fn internet_checksum(data: &[u8]) -> u16 {
    Checksum::new().add_bytes(data).finish()
}

/// Start a UDP/TCP checksum with the pseudo header (addresses of 4 or 16 bytes each).
pub fn pseudo_header_sum(src: &[u8], dst: &[u8], protocol: u8, l4_len: u32) -> Checksum {
    let mut c = Checksum::new();
    c.add_bytes(src).add_bytes(dst).add_u16(protocol as u16).add_u32(l4_len);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // The example from RFC 1071 section 3: sum 0x2ddf0 -> folded 0xddf2 -> complement 0x220d.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(internet_checksum(&data), 0x220d);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(internet_checksum(&[0xab]), !0xab00);
    }
}
