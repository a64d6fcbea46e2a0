//! A per-worker cache of decoded programs, keyed by the code bytes and the declared key count.
//!
//! Most packets of an application carry the same code, so decoding (at most 64 instructions)
//! once per distinct program instead of once per packet is the interpreter's first tier. The
//! cache is direct-mapped and small enough to stay in L1/L2; a refusal is cached too, so a
//! sender repeating a malformed program costs a lookup, not a decode. A hit compares the code
//! bytes exactly: a hash collision can cost a decode, never run the wrong program.

#[cfg(feature = "jit")]
use std::sync::Arc;

use crate::decode::{decode, DecodeError, Program};
use crate::error::Reject;
#[cfg(feature = "jit")]
use crate::jit::{CompileQueue, CompiledProgram};
use crate::vpu::{Tier, Workspace};
use crate::wire::MAX_CODE;

/// Entries of a worker's cache (a power of two).
pub const CACHE_ENTRIES: usize = 16;

/// A program ready to run: the tier that runs it and the worker's run buffers.
pub struct Prepared<'a> {
    pub tier: Tier<'a>,
    pub workspace: &'a mut Workspace,
}

impl std::fmt::Debug for Prepared<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tier = match self.tier {
            Tier::Interpreter(_) => "interpreter",
            #[cfg(feature = "jit")]
            Tier::Compiled(..) => "compiled",
        };
        f.debug_struct("Prepared").field("tier", &tier).finish_non_exhaustive()
    }
}

/// Where a decoded program comes from: a [`DecodeCache`], or [`Fresh`] decoding every time.
pub trait Decoder {
    /// The program for `code` with `key_count` declared keys ready to run, or why it is
    /// refused.
    fn prepare(&mut self, code: &[u8], key_count: usize) -> Result<Prepared<'_>, DecodeError>;
}

/// Decodes every packet's program anew and interprets it (tests, tools, the fuzz oracle's
/// reference).
#[derive(Default)]
pub struct Fresh {
    program: Option<Program>,
    workspace: Workspace,
}

impl Decoder for Fresh {
    fn prepare(&mut self, code: &[u8], key_count: usize) -> Result<Prepared<'_>, DecodeError> {
        let program = self.program.insert(decode(code, key_count)?);
        Ok(Prepared { tier: Tier::Interpreter(program), workspace: &mut self.workspace })
    }
}

/// Where an entry's program stands on its way to machine code.
#[cfg(feature = "jit")]
enum Tiering {
    /// Interpreted; hits so far.
    Cold(u32),
    /// Asked for; the control thread answers in the cell.
    Waiting(crate::jit::Published),
    Compiled(Arc<CompiledProgram>),
    /// Compiling failed or the program is refused: interpreted for good.
    Interpreted,
}

#[cfg(feature = "jit")]
impl Tiering {
    /// Counts a hit and moves on when it is time; the machine code once there is some.
    fn hit(
        &mut self,
        program: &Program,
        code: &[u8],
        jit: Option<&(Arc<CompileQueue>, u32)>,
    ) -> Option<&CompiledProgram> {
        match self {
            Tiering::Cold(hits) => {
                *hits = hits.saturating_add(1);
                if let Some((queue, _)) = jit.filter(|(_, after)| *hits >= *after) {
                    if !crate::jit::worth_compiling(program) {
                        *self = Tiering::Interpreted;
                    } else if let Some(published) = queue.request(code, program.key_count()) {
                        *self = Tiering::Waiting(published);
                    } else {
                        // Busy or full: ask again after as many runs, not on every packet.
                        *hits = 0;
                    }
                }
                None
            }
            Tiering::Waiting(published) => {
                match published.get() {
                    Some(Some(compiled)) => *self = Tiering::Compiled(compiled.clone()),
                    Some(None) => *self = Tiering::Interpreted,
                    None => return None,
                }
                self.compiled()
            }
            Tiering::Compiled(compiled) => Some(compiled),
            Tiering::Interpreted => None,
        }
    }

    fn compiled(&self) -> Option<&CompiledProgram> {
        match self {
            Tiering::Compiled(compiled) => Some(compiled),
            _ => None,
        }
    }
}

struct Entry {
    code: [u8; MAX_CODE],
    code_len: u8,
    key_count: usize,
    decoded: Result<Program, DecodeError>,
    #[cfg(feature = "jit")]
    tiering: Tiering,
}

impl Entry {
    fn holds(&self, code: &[u8], key_count: usize) -> bool {
        usize::from(self.code_len) == code.len()
            && self.key_count == key_count
            && self.code.get(..code.len()) == Some(code)
    }
}

/// A direct-mapped cache of decoded programs; one per worker (it is not shared).
pub struct DecodeCache {
    entries: Box<[Option<Entry>]>,
    /// Key of [`index_of`], drawn from the operating system's random source.
    seed: u64,
    hits: u64,
    misses: u64,
    workspace: Workspace,
    /// Where hot programs are sent to be compiled, and after how many hits.
    #[cfg(feature = "jit")]
    jit: Option<(Arc<CompileQueue>, u32)>,
}

impl Default for DecodeCache {
    fn default() -> Self {
        Self::new()
    }
}

impl DecodeCache {
    pub fn new() -> Self {
        use std::hash::BuildHasher;
        Self {
            entries: (0..CACHE_ENTRIES).map(|_| None).collect(),
            seed: std::collections::hash_map::RandomState::new().hash_one(0xdec0_u64),
            hits: 0,
            misses: 0,
            workspace: Workspace::default(),
            #[cfg(feature = "jit")]
            jit: None,
        }
    }

    /// Sends programs hit `hot_after` times to `queue` to be compiled, and runs their machine
    /// code once it is published (`None`: interpret everything). Cheap to call per batch: an
    /// unchanged queue is a pointer comparison.
    #[cfg(feature = "jit")]
    pub fn set_jit(&mut self, jit: Option<(&Arc<CompileQueue>, u32)>) {
        let same = match (&self.jit, jit) {
            (Some((ours, after)), Some((theirs, hot_after))) => {
                Arc::ptr_eq(ours, theirs) && *after == hot_after
            }
            (None, None) => true,
            _ => false,
        };
        if !same {
            let other_queue = jit.is_some();
            self.jit = jit.map(|(queue, after)| (queue.clone(), after));
            if other_queue {
                // A request to another data plane's queue may never be answered: ask this one
                // when hot again. Machine code already published stays (it is pure).
                for entry in self.entries.iter_mut().flatten() {
                    if matches!(entry.tiering, Tiering::Waiting(_)) {
                        entry.tiering = Tiering::Cold(0);
                    }
                }
            }
        }
    }

    /// Lookups answered without decoding, and decodes, since the cache was made.
    pub fn hits_and_misses(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }
}

/// The little-endian word of `code` at byte `at`, zero beyond its end. Built from the bytes
/// themselves, not through a padded copy: reading a word over bytes just stored one by one
/// stalls the load (a failed store forward) for longer than the rest of the lookup takes.
#[inline(always)]
fn word_at(code: &[u8], at: usize) -> u64 {
    match code.get(at..at + 8) {
        Some(word) => u64::from_le_bytes(word.try_into().unwrap_or_default()),
        None => code
            .get(at..)
            .unwrap_or_default()
            .iter()
            .rev()
            .fold(0, |acc, &byte| (acc << 8) | u64::from(byte)),
    }
}

/// A cheap hash of the code, keyed by the cache's random `seed`: its first two words and the
/// word holding its last byte, each mixed with the seed and multiplied independently (no chain
/// of dependent multiplies). Keyed, so that nobody can compute off-line a program that takes
/// a popular program's entry on every packet. A collision costs a decode, never a wrong
/// program (a hit compares every byte).
fn index_of(code: &[u8], key_count: usize, seed: u64) -> usize {
    let last = 8 * (code.len().saturating_sub(1) / 8);
    let h = (word_at(code, 0) ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ (word_at(code, 8) ^ seed.rotate_left(21)).wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
        ^ (word_at(code, last) ^ seed.rotate_left(42)).wrapping_mul(0x1656_67b1_9e37_79f9)
        ^ ((code.len() as u64) << 8 | key_count as u64 ^ seed).wrapping_mul(0x27d4_eb2f_1656_67c5);
    (h >> 40) as usize & (CACHE_ENTRIES - 1)
}

impl Decoder for DecodeCache {
    fn prepare(&mut self, code: &[u8], key_count: usize) -> Result<Prepared<'_>, DecodeError> {
        if code.len() > MAX_CODE {
            // As the decoder says; such code is never kept (its prefix could match).
            return Err(DecodeError { reason: Reject::CodeTooLong, at: MAX_CODE });
        }
        let slot = &mut self.entries[index_of(code, key_count, self.seed)];
        let hit = slot.as_ref().is_some_and(|entry| entry.holds(code, key_count));
        if hit {
            self.hits += 1;
        } else {
            self.misses += 1;
            let mut padded = [0u8; MAX_CODE];
            padded[..code.len()].copy_from_slice(code);
            *slot = Some(Entry {
                code: padded,
                code_len: code.len() as u8,
                key_count,
                decoded: decode(code, key_count),
                #[cfg(feature = "jit")]
                tiering: Tiering::Cold(0),
            });
        }
        let Some(entry) = slot else {
            // Filled just above; answer as the decoder would rather than panic.
            return Err(DecodeError { reason: Reject::CodeTooLong, at: 0 });
        };
        let program = entry.decoded.as_ref().map_err(|e| *e)?;
        // Without a queue (`jit = false`) everything is interpreted; the tiering state waits.
        #[cfg(feature = "jit")]
        if let Some(compiled) = self
            .jit
            .is_some()
            .then(|| entry.tiering.hit(program, code, self.jit.as_ref()))
            .flatten()
        {
            return Ok(Prepared {
                tier: Tier::Compiled(program, compiled),
                workspace: &mut self.workspace,
            });
        }
        Ok(Prepared { tier: Tier::Interpreter(program), workspace: &mut self.workspace })
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
        // The index is keyed at random: a key under which the two do not share an entry.
        cache.seed =
            (0..).find(|&seed| index_of(&count, 1, seed) != index_of(&collect, 1, seed)).unwrap();
        for _ in 0..3 {
            for code in [&count, &collect] {
                let want = fresh.prepare(code, 1).unwrap().tier.program().clone();
                assert_eq!(cache.prepare(code, 1).unwrap().tier.program(), &want);
            }
        }
        assert_eq!(cache.hits_and_misses(), (4, 2));
    }

    #[test]
    fn the_key_count_is_part_of_the_key() {
        let mut cache = DecodeCache::new();
        let code = assemble("lookup k0\nfwd").unwrap().code;
        assert!(cache.prepare(&code, 1).is_ok());
        let refused = cache.prepare(&code, 0).unwrap_err();
        assert_eq!(refused.reason, Reject::UndeclaredKey);
        // The refusal is cached as a refusal, the program as a program.
        assert_eq!(cache.prepare(&code, 0).unwrap_err(), refused);
        assert!(cache.prepare(&code, 1).is_ok());
    }

    #[test]
    fn colliding_codes_never_run_each_other() {
        // Fill far more programs than entries: every answer must still be the program's own.
        let mut cache = DecodeCache::new();
        for round in 0..2 {
            for n in 0..200u16 {
                let code = assemble(&format!("imm a, {}\nst s.64[0], a", n + 300)).unwrap().code;
                let program = cache.prepare(&code, 0).unwrap().tier.program();
                assert_eq!(program.code_len(), code.len(), "round {round}, n {n}");
                assert_eq!(program, &decode(&code, 0).unwrap());
            }
        }
    }

    #[test]
    fn over_long_code_is_refused_and_not_kept() {
        let mut cache = DecodeCache::new();
        let code = [0u8; MAX_CODE + 1];
        assert_eq!(cache.prepare(&code, 0).unwrap_err().reason, Reject::CodeTooLong);
        // Its first 64 bytes are a valid program of their own, which must decode as such.
        assert!(cache.prepare(&code[..MAX_CODE], 0).is_ok());
    }
}
