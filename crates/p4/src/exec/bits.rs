//! Big-endian bit fields in byte buffers: header fields live in wire format, so reads and
//! writes are bit-addressed loads and stores. Byte-aligned fields take a direct path.

use crate::types::mask;

/// Read `width` (1..=128) bits starting `bit_off` bits into `bytes`, most significant first.
#[inline]
pub fn read_bits(bytes: &[u8], bit_off: u32, width: u32) -> u128 {
    if bit_off % 8 == 0 && width % 8 == 0 {
        let start = (bit_off / 8) as usize;
        return read_be(&bytes[start..start + (width / 8) as usize]);
    }
    if width > 64 {
        // A window of up to 17 bytes does not fit a u128: read in two halves.
        let lo = read_bits(bytes, bit_off + width - 64, 64);
        return (read_bits(bytes, bit_off, width - 64) << 64) | lo;
    }
    let first = (bit_off / 8) as usize;
    let last = ((bit_off + width - 1) / 8) as usize;
    let span = &bytes[first..=last];
    let mut acc: u128 = 0;
    let mut acc_bits = 0u32;
    let lead = bit_off % 8;
    for (i, &b) in span.iter().enumerate() {
        let mut byte = b as u128;
        let mut bits = 8;
        if i == 0 {
            byte &= mask(8 - lead);
            bits = 8 - lead;
        }
        acc = (acc << bits) | byte;
        acc_bits += bits;
    }
    let trail = acc_bits - width;
    (acc >> trail) & mask(width)
}

/// Write the low `width` bits of `v` at `bit_off`, leaving the other bits as they were.
#[inline]
pub fn write_bits(bytes: &mut [u8], bit_off: u32, width: u32, v: u128) {
    if bit_off % 8 == 0 && width % 8 == 0 {
        let start = (bit_off / 8) as usize;
        write_be(&mut bytes[start..start + (width / 8) as usize], v);
        return;
    }
    // Bit by bit over whole bytes: fields that are not byte-aligned are short in practice.
    let mut remaining = width;
    let mut pos = bit_off;
    while remaining > 0 {
        let byte = (pos / 8) as usize;
        let in_byte = pos % 8;
        let take = (8 - in_byte).min(remaining);
        let shift = 8 - in_byte - take;
        let chunk = ((v >> (remaining - take)) & mask(take)) as u8;
        let m = (mask(take) as u8) << shift;
        bytes[byte] = (bytes[byte] & !m) | (chunk << shift);
        remaining -= take;
        pos += take;
    }
}

/// A big-endian number of up to 16 bytes.
#[inline(always)]
pub fn read_be(b: &[u8]) -> u128 {
    match b.len() {
        1 => b[0] as u128,
        2 => u16::from_be_bytes([b[0], b[1]]) as u128,
        4 => u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u128,
        n if n <= 8 => {
            let mut w = [0u8; 8];
            w[8 - n..].copy_from_slice(b);
            u64::from_be_bytes(w) as u128
        }
        n => {
            let n = n.min(16);
            let mut w = [0u8; 16];
            w[16 - n..].copy_from_slice(&b[b.len() - n..]);
            u128::from_be_bytes(w)
        }
    }
}

/// Store the low `b.len()` (up to 16) bytes of `v` big-endian.
#[inline(always)]
pub fn write_be(b: &mut [u8], v: u128) {
    match b.len() {
        1 => b[0] = v as u8,
        2 => b.copy_from_slice(&(v as u16).to_be_bytes()),
        4 => b.copy_from_slice(&(v as u32).to_be_bytes()),
        n if n <= 8 => b.copy_from_slice(&(v as u64).to_be_bytes()[8 - n..]),
        n if n <= 16 => b.copy_from_slice(&v.to_be_bytes()[16 - n..]),
        n => {
            // Wider than a value can be: the leading bytes are zero.
            b[..n - 16].fill(0);
            b[n - 16..].copy_from_slice(&v.to_be_bytes());
        }
    }
}

/// Append `width` bits of `v` to a bit string kept as bytes plus a bit count (field lists for
/// hashes and checksums are concatenated this way, as BMv2 does).
pub fn push_bits(out: &mut Vec<u8>, out_bits: &mut u32, v: u128, width: u32) {
    let need = (*out_bits + width).div_ceil(8) as usize;
    out.resize(need, 0);
    write_bits(out, *out_bits, width, v);
    *out_bits += width;
}

/// Copy `src` into `dst` (same length). Header-sized copies (8 to 64 bytes) are two
/// fixed-size, possibly overlapping moves the compiler inlines, instead of a call to memcpy.
#[inline(always)]
pub fn copy_bytes(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n != dst.len() {
        dst.copy_from_slice(src); // panics with the lengths; never taken by our callers
        return;
    }
    if (32..=64).contains(&n) {
        dst[..32].copy_from_slice(&src[..32]);
        dst[n - 32..].copy_from_slice(&src[n - 32..]);
    } else if (16..32).contains(&n) {
        dst[..16].copy_from_slice(&src[..16]);
        dst[n - 16..].copy_from_slice(&src[n - 16..]);
    } else if (8..16).contains(&n) {
        dst[..8].copy_from_slice(&src[..8]);
        dst[n - 8..].copy_from_slice(&src[n - 8..]);
    } else {
        dst.copy_from_slice(src);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unaligned_fields_round_trip() {
        let mut buf = [0u8; 20];
        for (off, w) in [(0, 4), (4, 4), (3, 9), (7, 1), (13, 19), (1, 127), (5, 64), (0, 128)] {
            let v = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210u128 & mask(w);
            buf.fill(0xa5);
            let before = buf;
            write_bits(&mut buf, off, w, v);
            assert_eq!(read_bits(&buf, off, w), v, "off {off} width {w}");
            // Bits outside the field are untouched.
            for bit in (0..160).filter(|b| *b < off || *b >= off + w) {
                let (i, s) = ((bit / 8) as usize, 7 - bit % 8);
                assert_eq!((buf[i] >> s) & 1, (before[i] >> s) & 1, "bit {bit}");
            }
        }
    }

    #[test]
    fn aligned_reads_are_big_endian() {
        let b = [0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc];
        assert_eq!(read_bits(&b, 0, 48), 0x1234_5678_9abc);
        assert_eq!(read_bits(&b, 8, 16), 0x3456);
        assert_eq!(read_bits(&b, 4, 8), 0x23);
    }

    #[test]
    fn bit_strings_concatenate() {
        let (mut v, mut n) = (Vec::new(), 0);
        push_bits(&mut v, &mut n, 0b101, 3);
        push_bits(&mut v, &mut n, 0x1f, 5);
        push_bits(&mut v, &mut n, 0xabcd, 16);
        assert_eq!((v, n), (vec![0b1011_1111, 0xab, 0xcd], 24));
    }

    #[test]
    fn copy_bytes_copies_every_length() {
        for n in 0..80 {
            let src: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
            let mut dst = vec![0u8; n];
            copy_bytes(&mut dst, &src);
            assert_eq!(dst, src, "length {n}");
        }
    }
}
