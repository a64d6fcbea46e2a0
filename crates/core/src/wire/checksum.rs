//! The Internet checksum (RFC 1071) and the pseudo-header sums UDP and TCP need.

/// A running one's-complement sum; `finish` folds and complements it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Checksum(u64);

impl Checksum {
    pub fn new() -> Self {
        Self(0)
    }

    /// Add bytes as big-endian 16-bit words; an odd trailing byte is padded with zero.
    ///
    /// Summed four bytes at a time: `hi * 2^16 + lo` is `hi + lo` modulo `2^16 - 1`, so a sum
    /// of 32-bit words folds to the same checksum as the sum of their 16-bit halves, in half
    /// the additions (a 64-bit sum of 32-bit words cannot overflow below 2^32 words).
    pub fn add_bytes(&mut self, data: &[u8]) -> &mut Self {
        let mut words = data.chunks_exact(4);
        for w in &mut words {
            self.0 += u32::from_be_bytes([w[0], w[1], w[2], w[3]]) as u64;
        }
        let mut chunks = words.remainder().chunks_exact(2);
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

    /// The 32-bit sum gives the checksum of RFC 1071's 16-bit sum, at every length and split.
    #[test]
    fn word_sums_agree_with_the_16_bit_definition() {
        fn reference(parts: &[&[u8]]) -> u16 {
            let mut sum = 0u64;
            for part in parts {
                for pair in part.chunks(2) {
                    sum += u64::from(pair[0]) << 8 | u64::from(*pair.get(1).unwrap_or(&0));
                }
            }
            while sum >> 16 != 0 {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            !(sum as u16)
        }
        let data: Vec<u8> =
            (0..300u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for len in 0..data.len() {
            let whole = &data[..len];
            assert_eq!(internet_checksum(whole), reference(&[whole]), "length {len}");
            let (a, b) = whole.split_at(len / 3 * 2);
            let split = Checksum::new().add_bytes(a).add_bytes(b).finish();
            assert_eq!(split, reference(&[a, b]), "length {len} split at {}", a.len());
        }
        assert_eq!(internet_checksum(&[0xff; 4096]), reference(&[&[0xff; 4096]]));
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(internet_checksum(&[0xab]), !0xab00);
    }
}
