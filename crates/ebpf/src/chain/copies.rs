//! Narrow copies merged into wide ones. clang writes a small `memcpy` between pointers it
//! cannot prove aligned (a MAC address from a map value into the packet) as one byte load and
//! one byte store per byte, and a 16-byte address as four 32-bit pairs; a run of such pairs of
//! one width over consecutive bytes becomes the fewest loads and stores of 8, 4, 2 and 1 bytes
//! (six bytes: two pairs instead of six), which matters where stores are the bottleneck. Only where the copy's source and destination
//! cannot overlap (so the order of the bytes cannot matter): the same pointer with ranges
//! apart, or pointers into different kinds of region on every path ([`Base`]: the packet, a
//! map value, a stack frame; two map values never count as apart, since two of a program's
//! map slots may be one map). The copy register ends
//! holding the last byte, as before (a final byte load, which the liveness pass removes when
//! nothing reads it).

use super::analysis::{Base, Coverage};
use crate::insn::{class, mem, Insn};

/// What the pairs of a run share: copy register, source base, destination base, destination
/// offset minus source offset, and the width in bytes (1, 2 or 4).
type RunKey = (u8, u8, u8, i64, i64);

/// The copy pair `ldx rT, [rS + src]; stx [rD + src + delta], rT` (both of one width below 8
/// bytes) at `pc`, if there is one: its run key and `src`.
fn pair_at(prog: &[Insn], pc: usize) -> Option<(RunKey, i64)> {
    let (l, s) = (*prog.get(pc)?, *prog.get(pc + 1)?);
    let width = match l.code {
        c if c == class::LDX | mem::MEM | mem::B => 1,
        c if c == class::LDX | mem::MEM | mem::H => 2,
        c if c == class::LDX | mem::MEM | mem::W => 4,
        _ => return None,
    };
    let store = s.code == class::STX | mem::MEM | (l.code & 0x18);
    if !(store && s.src == l.dst && l.dst != l.src && s.dst != l.dst) {
        return None;
    }
    let delta = i64::from(s.off) - i64::from(l.off);
    Some(((l.dst, l.src, s.dst, delta, width), i64::from(l.off)))
}

/// Whether `n` bytes at `src` (base `a`, register `ra`) and at `src + delta` (base `b`,
/// register `rb`) are apart on every path.
fn apart(a: Base, b: Base, ra: u8, rb: u8, src: i64, delta: i64, n: i64) -> bool {
    if ra == rb {
        return delta.abs() >= n;
    }
    match (a, b) {
        (Base::Packet(Some(pa)), Base::Packet(Some(pb))) => {
            let (s, d) = (pa + src, pb + src + delta);
            s + n <= d || d + n <= s
        }
        (Base::Packet(_), Base::Stack(_) | Base::MapValue(_))
        | (Base::Stack(_), Base::Packet(_) | Base::MapValue(_))
        | (Base::MapValue(_), Base::Packet(_) | Base::Stack(_)) => true,
        (Base::Stack(f), Base::Stack(g)) => f != g,
        // Two map slots may name one map (a registry hands out maps by name).
        _ => false,
    }
}

/// Merge the runs of byte-copy pairs in `prog` (whose coverage is `cov`) that `code` still
/// holds unchanged, writing the merged copies into `code` (the run's other slots become
/// `None`). `targeted[pc]`: some jump lands on `pc`. Returns the slots saved.
pub(super) fn merge_copies(
    prog: &[Insn],
    cov: &Coverage,
    targeted: &[bool],
    code: &mut [Option<Insn>],
) -> usize {
    let mut saved = 0;
    let mut pc = 0;
    while pc + 1 < prog.len() {
        let Some((key, first)) = pair_at(prog, pc) else {
            pc += 1;
            continue;
        };
        // The run: pairs of the same registers and distance, one block, untouched so far.
        let mut pairs = vec![first];
        let mut end = pc + 2;
        while let Some((k, p)) = pair_at(prog, end) {
            if k != key || targeted[end] || targeted[end + 1] {
                break;
            }
            pairs.push(p);
            end += 2;
        }
        let (copy, sreg, dreg, delta, width) = key;
        let lo = pairs.iter().copied().min().unwrap_or(0);
        // Bytes copied.
        let n = pairs.len() as i64 * width;
        let mut offsets: Vec<i64> = pairs.clone();
        offsets.sort_unstable();
        offsets.dedup();
        let contiguous = offsets.len() == pairs.len()
            && offsets.iter().enumerate().all(|(k, o)| *o == lo + k as i64 * width);
        let bases = |p: usize| (cov.bases[p], cov.bases[p + 1]);
        let (a, b) = bases(pc);
        let same_bases = (pc..end).step_by(2).all(|p| bases(p) == (a, b));
        let ok = pairs.len() >= 2
            && contiguous
            && same_bases
            && (pc + 1..end).all(|p| !targeted[p])
            && (pc..end).all(|p| code[p] == Some(prog[p]) && cov.visited[p])
            && apart(a, b, sreg, dreg, lo, delta, n);
        if !ok {
            pc += 1;
            continue;
        }
        let mut merged = Vec::new();
        let mut k = 0i64;
        while k < n {
            let (size, width) = [(8, mem::DW), (4, mem::W), (2, mem::H), (1, mem::B)]
                .into_iter()
                .find(|(s, _)| k + s <= n)
                .unwrap_or((1, mem::B));
            let at = lo + k;
            let (Ok(s), Ok(d)) = (i16::try_from(at), i16::try_from(at + delta)) else { break };
            merged.push(Insn::new(class::LDX | mem::MEM | width, copy, sreg, s, 0));
            merged.push(Insn::new(class::STX | mem::MEM | width, dreg, copy, d, 0));
            k += size;
        }
        let last = pairs.last().copied().unwrap_or(lo);
        let restore = i16::try_from(last).ok();
        if k < n || restore.is_none() || merged.len() + 1 >= (end - pc) {
            pc += 1;
            continue;
        }
        // The copy register as the last pair left it (its load's width).
        let last_load = prog[end - 2];
        merged.push(Insn::new(last_load.code, copy, sreg, restore.unwrap_or(0), 0));
        saved += (end - pc) - merged.len();
        let merged = merged.into_iter().map(Some).chain(std::iter::repeat(None));
        for (slot, i) in code[pc..end].iter_mut().zip(merged) {
            *slot = i;
        }
        pc = end;
    }
    saved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::assemble;

    fn coverage(prog: &[Insn], bases: &[(usize, Base)]) -> Coverage {
        let mut cov = Coverage::new(prog.len());
        cov.visited = vec![true; prog.len()];
        for &(pc, b) in bases.iter().filter(|(pc, _)| *pc < prog.len()) {
            cov.bases[pc] = b;
        }
        cov
    }

    fn run(text: &str, bases: &[(usize, Base)]) -> (usize, Vec<Insn>) {
        let prog = assemble(text).unwrap();
        let cov = coverage(&prog, bases);
        let mut code: Vec<Option<Insn>> = prog.iter().copied().map(Some).collect();
        let saved = merge_copies(&prog, &cov, &vec![false; prog.len() + 1], &mut code);
        (saved, code.into_iter().flatten().collect())
    }

    const MAC_SWAP: &str = "ldxb r1, [r8+5]\nstxb [r8+11], r1\nldxb r1, [r8+4]\nstxb [r8+10], r1
ldxb r1, [r8+3]\nstxb [r8+9], r1\nldxb r1, [r8+2]\nstxb [r8+8], r1
ldxb r1, [r8+1]\nstxb [r8+7], r1\nldxb r1, [r8]\nstxb [r8+6], r1\nexit";

    #[test]
    fn six_byte_copies_in_one_region_become_two_and_the_last_byte_stays() {
        let (saved, out) = run(MAC_SWAP, &[]);
        assert_eq!(saved, 7);
        let want = assemble(
            "ldxw r1, [r8]\nstxw [r8+6], r1\nldxh r1, [r8+4]\nstxh [r8+10], r1\nldxb r1, [r8]\nexit",
        )
        .unwrap();
        assert_eq!(out, want);
    }

    #[test]
    fn four_word_copies_become_two_double_words() {
        let map = Base::MapValue(2);
        let packet = Base::Packet(Some(0));
        let text = "ldxw r1, [r9+12]\nstxw [r2+36], r1\nldxw r1, [r9+8]\nstxw [r2+32], r1
ldxw r1, [r9+4]\nstxw [r2+28], r1\nldxw r1, [r9]\nstxw [r2+24], r1\nexit";
        let bases: Vec<(usize, Base)> =
            (0..8).map(|pc| (pc, if pc % 2 == 0 { map } else { packet })).collect();
        let (saved, out) = run(text, &bases);
        assert_eq!(saved, 3);
        let want = "ldxdw r1, [r9]\nstxdw [r2+24], r1\nldxdw r1, [r9+8]\nstxdw [r2+32], r1
ldxw r1, [r9]\nexit";
        assert_eq!(out, assemble(want).unwrap());
        // Words with a gap are not one run.
        let gap = "ldxw r1, [r9]\nstxw [r2], r1\nldxw r1, [r9+8]\nstxw [r2+8], r1\nexit";
        assert_eq!(run(gap, &bases).0, 0);
    }

    #[test]
    fn overlapping_or_possibly_aliasing_copies_are_left_alone() {
        // Destination a byte on: each byte copied is the next one's source, the order matters.
        let text = "ldxb r1, [r8]\nstxb [r8+1], r1\nldxb r1, [r8+1]\nstxb [r8+2], r1
ldxb r1, [r8+2]\nstxb [r8+3], r1\nexit";
        assert_eq!(run(text, &[]).0, 0);
        // Destination 2 bytes on, 4 bytes copied: not as one, but the last two pairs (bytes 2
        // and 3 to 4 and 5, after the first two pairs wrote 2 and 3) are apart.
        let text = "ldxb r1, [r8]\nstxb [r8+2], r1\nldxb r1, [r8+1]\nstxb [r8+3], r1
ldxb r1, [r8+2]\nstxb [r8+4], r1\nldxb r1, [r8+3]\nstxb [r8+5], r1\nexit";
        let (saved, out) = run(text, &[]);
        assert_eq!(saved, 1);
        assert_eq!(out[..4], assemble(text).unwrap()[..4]);
        // Two registers into the packet at unknown offsets: they might overlap.
        let two = "ldxb r1, [r9]\nstxb [r8], r1\nldxb r1, [r9+1]\nstxb [r8+1], r1\nexit";
        let packet = Base::Packet(None);
        let bases = [(0, packet), (1, packet), (2, packet), (3, packet)];
        assert_eq!(run(two, &bases).0, 0);
        // A map value into the packet: apart.
        let map = Base::MapValue(2);
        let bases = [(0, map), (1, packet), (2, map), (3, packet)];
        let (saved, out) = run(two, &bases);
        assert_eq!(saved, 1);
        let want = "ldxh r1, [r9]\nstxh [r8], r1\nldxb r1, [r9+1]\nexit";
        assert_eq!(out, assemble(want).unwrap());
        // Values of two map slots: they may be one map's one value.
        let bases = [(0, Base::MapValue(1)), (1, map), (2, Base::MapValue(1)), (3, map)];
        assert_eq!(run(two, &bases).0, 0);
    }
}
