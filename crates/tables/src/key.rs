//! Table keys as 64-bit words, and the hash every table uses.
//!
//! A key of `n` bytes is stored as `ceil(n / 8)` big-endian-packed words, zero-padded, so that
//! comparing and hashing a key is a handful of word operations whatever its width, and a key
//! read from a packet (network order) compares equal to the same key given by the control plane.

/// Widest key a table accepts, in bytes (a P4 table key of several fields concatenated).
pub const MAX_KEY_BYTES: usize = 128;
/// `MAX_KEY_BYTES` in words.
pub const MAX_KEY_WORDS: usize = MAX_KEY_BYTES / 8;

/// Number of words a key of `bytes` bytes occupies.
#[inline]
pub const fn words_for(bytes: usize) -> usize {
    bytes.div_ceil(8)
}

/// Pack `bytes` into words: byte 0 is the most significant byte of word 0.
#[inline]
pub fn pack(bytes: &[u8], out: &mut [u64]) {
    out.iter_mut().for_each(|w| *w = 0);
    for (i, chunk) in bytes.chunks(8).enumerate() {
        if let Some(w) = out.get_mut(i) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            *w = u64::from_be_bytes(b);
        }
    }
}

/// Unpack `words` into `len` bytes (the inverse of [`pack`]).
pub fn unpack(words: &[u64], len: usize) -> Vec<u8> {
    let mut out: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    out.truncate(len);
    out
}

const SEED: u64 = 0x243f_6a88_85a3_08d3;
const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// Multiply and fold the 128-bit product: the mixing step of foldhash and wyhash.
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = (a as u128) * (b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Hash of a packed key. Not keyed against adversaries choosing keys (tables are bounded and
/// probe sequences are capped); fast for the one- and two-word keys of real tables.
#[inline(always)]
pub fn hash_words(words: &[u64]) -> u64 {
    let mut h = SEED ^ (words.len() as u64);
    for &w in words {
        h = fold_mul(h ^ w, MUL);
    }
    fold_mul(h, 0x2d35_8dcc_aa6c_78a5)
}

/// Ask the CPU to start loading the cache line at `p` (a no-op where there is no such hint).
/// Batches use it to overlap the memory latency of many lookups.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Map a hash onto `0..n` without a division (Lemire's multiply-shift).
#[inline(always)]
pub fn reduce(hash: u64, n: usize) -> usize {
    (((hash as u32) as u64 * n as u64) >> 32) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips_and_pads() {
        let mut w = [0u64; 2];
        pack(&[1, 2, 3, 4, 5, 6, 7, 8, 9], &mut w);
        assert_eq!(w, [0x0102_0304_0506_0708, 0x0900_0000_0000_0000]);
        assert_eq!(unpack(&w, 9), vec![1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn hash_spreads_small_keys() {
        let n = 1 << 12;
        let mut seen = vec![0u32; n];
        for k in 0..(n as u64 * 4) {
            seen[reduce(hash_words(&[k]), n)] += 1;
        }
        // Poisson(4): about 75 of 4096 buckets empty, none above ~15.
        let empty = seen.iter().filter(|&&c| c == 0).count();
        assert!(empty < 150, "{empty} empty buckets");
        assert!(seen.iter().all(|&c| c < 20), "overfull bucket");
    }
}
