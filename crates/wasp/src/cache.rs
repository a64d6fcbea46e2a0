//! A per-worker cache of decoded programs, keyed by the code bytes and the declared key count.
//!
//! Most packets of an application carry the same code, so decoding (at most 64 instructions)
//! once per distinct program instead of once per packet is the interpreter's first tier. The
//! cache is direct-mapped and small enough to stay in L1/L2; a refusal is cached too, so a
//! sender repeating a malformed program costs a lookup, not a decode. A hit compares the code
//! bytes exactly: a hash collision can cost a decode, never run the wrong program.

use crate::decode::{decode, DecodeError, Program};
use crate::error::Reject;
use crate::wire::MAX_CODE;

/// Entries of a worker's cache (a power of two).
pub const CACHE_ENTRIES: usize = 16;

/// Where a decoded program comes from: a [`DecodeCache`], or [`Fresh`] decoding every time.
pub trait Decoder {
    /// The program for `code` with `key_count` declared keys, or why it is refused.
    fn program(&mut self, code: &[u8], key_count: usize) -> Result<&Program, DecodeError>;
}

/// Decodes every packet's program anew (tests, tools, the fuzz oracle's reference).
#[derive(Default)]
pub struct Fresh(Option<Program>);

impl Decoder for Fresh {
    fn program(&mut self, code: &[u8], key_count: usize) -> Result<&Program, DecodeError> {
        Ok(self.0.insert(decode(code, key_count)?))
    }
}

struct Entry {
    code: [u8; MAX_CODE],
    code_len: u8,
    key_count: usize,
    decoded: Result<Program, DecodeError>,
}

impl Entry {
    /// `padded` is the code zero-padded to 64 bytes: one fixed-size comparison, no call.
    fn holds(&self, padded: &[u8; MAX_CODE], code_len: usize, key_count: usize) -> bool {
        usize::from(self.code_len) == code_len
            && self.key_count == key_count
            && self.code == *padded
    }
}

/// A direct-mapped cache of decoded programs; one per worker (it is not shared).
pub struct DecodeCache {
    entries: Box<[Option<Entry>]>,
    hits: u64,
    misses: u64,
}

impl Default for DecodeCache {
    fn default() -> Self {
        Self::new()
    }
}

impl DecodeCache {
    pub fn new() -> Self {
        Self { entries: (0..CACHE_ENTRIES).map(|_| None).collect(), hits: 0, misses: 0 }
    }

    /// Lookups answered without decoding, and decodes, since the cache was made.
    pub fn hits_and_misses(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }
}

/// A cheap hash of the (zero-padded) code: its first two words and the word holding its last
/// byte, multiplied independently (no chain of dependent multiplies). A collision costs a
/// decode, never a wrong program (a hit compares all 64 bytes).
fn index_of(padded: &[u8; MAX_CODE], code_len: usize, key_count: usize) -> usize {
    let word = |i: usize| {
        let at = 8 * i.min(MAX_CODE / 8 - 1);
        u64::from_le_bytes(padded[at..at + 8].try_into().unwrap_or_default())
    };
    let last = code_len.saturating_sub(1) / 8;
    let h = word(0).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ word(1).wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
        ^ word(last).wrapping_mul(0x1656_67b1_9e37_79f9)
        ^ ((code_len as u64) << 8 | key_count as u64).wrapping_mul(0x27d4_eb2f_1656_67c5);
    (h >> 40) as usize & (CACHE_ENTRIES - 1)
}

impl Decoder for DecodeCache {
    fn program(&mut self, code: &[u8], key_count: usize) -> Result<&Program, DecodeError> {
        if code.len() > MAX_CODE {
            // As the decoder says; such code is never kept (its prefix could match).
            return Err(DecodeError { reason: Reject::CodeTooLong, at: MAX_CODE });
        }
        let mut padded = [0u8; MAX_CODE];
        padded[..code.len()].copy_from_slice(code);
        let slot = &mut self.entries[index_of(&padded, code.len(), key_count)];
        if slot.as_ref().is_some_and(|entry| entry.holds(&padded, code.len(), key_count)) {
            self.hits += 1;
        } else {
            self.misses += 1;
            *slot = Some(Entry {
                code: padded,
                code_len: code.len() as u8,
                key_count,
                decoded: decode(code, key_count),
            });
        }
        let Some(entry) = slot else {
            // Filled just above; answer as the decoder would rather than panic.
            return Err(DecodeError { reason: Reject::CodeTooLong, at: 0 });
        };
        entry.decoded.as_ref().map_err(|e| *e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::assemble;

    #[test]
    fn a_hit_returns_the_same_program_as_a_fresh_decode() {
        let mut cache = DecodeCache::new();
        let mut fresh = Fresh::default();
        let count = assemble(include_str!("../../../examples/wasp/count.s")).unwrap().code;
        let collect = assemble(include_str!("../../../examples/wasp/collect.s")).unwrap().code;
        for _ in 0..3 {
            for code in [&count, &collect] {
                let want = fresh.program(code, 1).unwrap().clone();
                assert_eq!(cache.program(code, 1).unwrap(), &want);
            }
        }
        assert_eq!(cache.hits_and_misses(), (4, 2));
    }

    #[test]
    fn the_key_count_is_part_of_the_key() {
        let mut cache = DecodeCache::new();
        let code = assemble("lookup k0\nfwd").unwrap().code;
        assert!(cache.program(&code, 1).is_ok());
        let refused = cache.program(&code, 0).unwrap_err();
        assert_eq!(refused.reason, Reject::UndeclaredKey);
        // The refusal is cached as a refusal, the program as a program.
        assert_eq!(cache.program(&code, 0).unwrap_err(), refused);
        assert!(cache.program(&code, 1).is_ok());
    }

    #[test]
    fn colliding_codes_never_run_each_other() {
        // Fill far more programs than entries: every answer must still be the program's own.
        let mut cache = DecodeCache::new();
        for round in 0..2 {
            for n in 0..200u16 {
                let code = assemble(&format!("imm a, {}\nst s.64[0], a", n + 300)).unwrap().code;
                let program = cache.program(&code, 0).unwrap();
                assert_eq!(program.code_len(), code.len(), "round {round}, n {n}");
                assert_eq!(program, &decode(&code, 0).unwrap());
            }
        }
    }

    #[test]
    fn over_long_code_is_refused_and_not_kept() {
        let mut cache = DecodeCache::new();
        let code = [0u8; MAX_CODE + 1];
        assert_eq!(cache.program(&code, 0).unwrap_err().reason, Reject::CodeTooLong);
        // Its first 64 bytes are a valid program of their own, which must decode as such.
        assert!(cache.program(&code[..MAX_CODE], 0).is_ok());
    }
}
