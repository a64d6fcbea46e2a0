//! The packet guard in front of a specialised program (eBPF or P4): the facts of the assumed
//! shape that the specialisation can have relied on, checked natively per packet. A packet that
//! fails the guard runs the original program, so a specialised program is correct for any
//! input, not only for packets that came through the upstream.
//!
//! The checked bytes are merged into 8-byte masked compares placed inside the shortest packet
//! the guard admits, so a packet that passes the length check is checked with a few unaligned
//! loads and no byte loop.

use super::{ByteFact, PacketShape};
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt;

/// One masked compare: `le_u64(pkt[off..off + 8]) & mask == value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GuardWord {
    pub off: u16,
    pub mask: u64,
    pub value: u64,
}

/// What a packet must satisfy to run the specialised program. The fields are private: the
/// specialised program's memory safety rests on the length check, and the fast path on every
/// word lying inside the shortest admitted packet, which the constructors establish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PacketGuard {
    /// Packet length bounds, inclusive (the specialised program is verified for `min_len`).
    min_len: u32,
    max_len: u32,
    words: Vec<GuardWord>,
    /// Every word ends at or before `min_len`: after the length check, no word needs a bounds
    /// check of its own.
    #[serde(skip)]
    inside: bool,
}

impl PacketGuard {
    /// Check `shape`'s length and its facts at the offsets in `bytes` (all of them if `None`).
    pub fn from_shape(shape: &PacketShape, bytes: Option<&BTreeSet<u16>>) -> PacketGuard {
        let facts: Vec<(u16, ByteFact)> = shape
            .bytes
            .iter()
            .filter(|(o, f)| !f.is_unknown() && bytes.is_none_or(|b| b.contains(o)))
            .map(|(o, f)| (*o, *f))
            .collect();
        let (min_len, max_len) = shape.len;
        let mut words: Vec<GuardWord> = Vec::new();
        for (o, f) in facts {
            let covered =
                words.last().is_some_and(|w| (w.off..w.off.saturating_add(8)).contains(&o));
            if !covered {
                // Start the word at this byte, or earlier where that keeps it inside every
                // packet the length check admits (then it is always one load).
                let inside = (min_len >= 8).then(|| (min_len - 8).min(o as u32) as u16);
                let off = inside.filter(|s| o - s < 8).unwrap_or(o);
                words.push(GuardWord { off, mask: 0, value: 0 });
            }
            let w = words.last_mut().expect("a word was pushed");
            let shift = 8 * u32::from(o - w.off);
            let known = !f.mask;
            w.mask |= u64::from(known) << shift;
            w.value |= u64::from(f.value & known) << shift;
        }
        PacketGuard::new(min_len, max_len, words)
    }

    fn new(min_len: u32, max_len: u32, words: Vec<GuardWord>) -> PacketGuard {
        let inside = words.iter().all(|w| u32::from(w.off) + 8 <= min_len);
        PacketGuard { min_len, max_len, words, inside }
    }

    /// The length check alone (trusted mode: the content facts are not checked, memory safety
    /// still is).
    pub fn length_only(&self) -> PacketGuard {
        PacketGuard::new(self.min_len, self.max_len, Vec::new())
    }

    pub fn min_len(&self) -> u32 {
        self.min_len
    }

    pub fn max_len(&self) -> u32 {
        self.max_len
    }

    pub fn words(&self) -> &[GuardWord] {
        &self.words
    }

    /// Whether `pkt` may run the specialised program.
    #[inline]
    pub fn admits(&self, pkt: &[u8]) -> bool {
        let len = pkt.len() as u64;
        if len < self.min_len as u64 || len > self.max_len as u64 {
            return false;
        }
        if self.inside {
            // Every word, differences OR-ed together, one branch at the end: a packet that
            // passes (the common case) costs a load, an AND and an XOR per word.
            let mut differ = 0u64;
            for w in &self.words {
                // SAFETY: `inside` (set by the only constructor, `new`, from these very words
                // and `min_len`, neither of which can change afterwards) says `w.off + 8 <=
                // min_len`, and `pkt.len() >= min_len` was checked above: the 8 bytes are in
                // `pkt`. Unaligned reads are what `read_unaligned` is for.
                let v = unsafe { pkt.as_ptr().add(w.off as usize).cast::<u64>().read_unaligned() };
                differ |= (u64::from_le(v) & w.mask) ^ w.value;
            }
            return differ == 0;
        }
        self.words.iter().all(|w| {
            let off = w.off as usize;
            match pkt.get(off..off + 8) {
                Some(b) => {
                    let b: [u8; 8] = b.try_into().expect("eight bytes");
                    u64::from_le_bytes(b) & w.mask == w.value
                }
                // Past the end of a short packet: a fact about a byte the packet does not
                // have holds (as in `PacketShape::admits`).
                None => (0..8).all(|k| {
                    let m = (w.mask >> (8 * k)) as u8;
                    pkt.get(off + k).is_none_or(|b| b & m == (w.value >> (8 * k)) as u8)
                }),
            }
        })
    }

    /// Every word lies inside the shortest admitted packet (checked with no bounds check of
    /// its own once the length is).
    pub fn words_inside(&self) -> bool {
        self.inside
    }

    /// Bytes with at least one checked bit.
    pub fn checked_bytes(&self) -> usize {
        self.words.iter().map(|w| (0..8).filter(|k| (w.mask >> (8 * k)) & 0xff != 0).count()).sum()
    }
}

impl fmt::Display for PacketGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "len in [{}, {}]", self.min_len, self.max_len)?;
        for w in &self.words {
            let bytes: Vec<String> = (0..8)
                .filter(|k| (w.mask >> (8 * k)) & 0xff != 0)
                .map(|k| {
                    let m = (w.mask >> (8 * k)) as u8;
                    let fact = ByteFact { value: (w.value >> (8 * k)) as u8, mask: !m };
                    format!("{}={fact}", w.off as usize + k)
                })
                .collect();
            write!(f, "; {}", bytes.join(" "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> PacketShape {
        let mut s = PacketShape::with_len(74, 1518);
        s.set_known(12, &[0x86, 0xdd]);
        s.set_known(20, &[0x06]);
        s.set_byte(14, "6?".parse().unwrap());
        s
    }

    #[test]
    fn the_guard_admits_exactly_the_shape_on_its_bytes() {
        let g = PacketGuard::from_shape(&shape(), None);
        assert_eq!(g.words.len(), 2, "{g}");
        assert_eq!(g.checked_bytes(), 4);
        let mut p = vec![0u8; 80];
        p[12] = 0x86;
        p[13] = 0xdd;
        p[14] = 0x6a;
        p[20] = 6;
        assert!(g.admits(&p));
        assert!(shape().admits(&p));
        for (byte, bad) in [(12, 0x08), (13, 0x00), (14, 0x4a), (20, 17)] {
            let mut q = p.clone();
            q[byte] = bad;
            assert!(!g.admits(&q), "byte {byte}");
        }
        p[15] = 0xff; // unknown bits are not checked
        assert!(g.admits(&p));
        assert!(!g.admits(&p[..73]), "shorter than the minimum");
        assert!(!g.admits(&vec![0; 1519]), "longer than the maximum");
    }

    #[test]
    fn only_the_bytes_read_are_checked() {
        let read: BTreeSet<u16> = [12, 13].into();
        let g = PacketGuard::from_shape(&shape(), Some(&read));
        assert_eq!(g.checked_bytes(), 2);
        assert_eq!(g.to_string(), "len in [74, 1518]; 12=86 13=dd");
    }

    #[test]
    fn the_length_only_guard_keeps_the_length_check() {
        let g = PacketGuard::from_shape(&shape(), None).length_only();
        assert!(g.words().is_empty());
        assert!(g.admits(&[0u8; 74]) && !g.admits(&[0u8; 73]) && !g.admits(&vec![0; 1519]));
    }

    #[test]
    fn words_stay_inside_short_packets_and_facts_past_the_end_hold() {
        let mut s = PacketShape::with_len(10, 30);
        s.set_known(9, &[1]);
        s.set_known(20, &[2]);
        let g = PacketGuard::from_shape(&s, None);
        // Byte 9's word starts at 2 so it fits a 10-byte packet; byte 20's cannot (not
        // inside: the careful path).
        assert_eq!(g.words[0].off, 2);
        assert!(!g.inside);
        let mut p = vec![0u8; 12];
        p[9] = 1;
        assert!(g.admits(&p), "byte 20 is past the end");
        let mut p = vec![0u8; 25];
        p[9] = 1;
        assert!(!g.admits(&p));
        p[20] = 2;
        assert!(g.admits(&p));
    }
}
