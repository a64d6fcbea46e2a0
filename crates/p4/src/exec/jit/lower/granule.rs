//! Header bytes moved in the pieces their fields are written in.
//!
//! A load that spans two earlier stores, or only part of one, cannot take its bytes from the
//! store buffer and waits until the stores reach the cache (a store-forwarding stall, about
//! 4 ns). Header bytes are written by `extract` and by field assignments and read right after
//! by checksums and `emit`, so every one of those splits a header the same way: into its
//! *granules*. A whole-byte field is a granule (in pieces of 8, 4, 2 and 1 bytes, the pieces
//! field stores use); fields that share bytes form one granule over those bytes. A load of a
//! granule then always matches a store of it, or lies inside a bigger store from `extract`.

use cranelift_codegen::ir::{types, InstBuilder, Type, Value};

use super::{mem, Lower};
use crate::ir::HeaderInst;

/// The pieces (offset, bytes) a run of `n` bytes at `at` is moved in: 8-byte pieces, then 4,
/// 2 and 1.
pub(super) fn split(at: u32, n: u32, out: &mut Vec<(u32, u32)>) {
    let mut off = 0;
    while off + 8 <= n {
        out.push((at + off, 8));
        off += 8;
    }
    for size in [4, 2, 1] {
        if off + size <= n {
            out.push((at + off, size));
            off += size;
        }
    }
}

/// A header's granules as (offset from the header's start, bytes), in order, covering all
/// of its bytes.
pub(super) fn granules(h: &HeaderInst) -> Vec<(u32, u32)> {
    let mut fields: Vec<(u32, u32)> = h.fields.iter().copied().filter(|f| f.1 > 0).collect();
    fields.sort_unstable();
    // Byte ranges, merged where fields share a byte.
    let mut ranges: Vec<(u32, u32, bool)> = Vec::new();
    for (bit, width) in fields {
        let (start, end) = (bit / 8, (bit + width).div_ceil(8).min(h.bytes));
        let whole = bit % 8 == 0 && width % 8 == 0;
        match ranges.last_mut() {
            Some(last) if start < last.1 => last.1 = last.1.max(end),
            _ => ranges.push((start, end, whole)),
        }
    }
    let mut out = Vec::new();
    let mut at = 0;
    for (start, end, _) in ranges {
        if start > at {
            split(at, start - at, &mut out); // bytes no field covers
        }
        if end > start.max(at) {
            split(start.max(at), end - start.max(at), &mut out);
        }
        at = at.max(end);
    }
    if at < h.bytes {
        split(at, h.bytes - at, &mut out);
    }
    out
}

fn ty(bytes: u32) -> Type {
    match bytes {
        1 => types::I8,
        2 => types::I16,
        4 => types::I32,
        _ => types::I64,
    }
}

impl Lower<'_, '_, '_> {
    /// Copy header `id`'s bytes between `src + src_off` and `dst + dst_off`, granule by
    /// granule. All loads come first, so the stores cannot alias them.
    pub(super) fn copy_header(
        &mut self,
        id: u32,
        dst: Value,
        dst_off: i32,
        src: Value,
        src_off: i32,
    ) {
        let pieces = granules(&self.c.prog.headers[id as usize]);
        let values: Vec<Value> = pieces
            .iter()
            .map(|&(at, n)| self.b.ins().load(ty(n), mem(), src, src_off + at as i32))
            .collect();
        for (&(at, _), v) in pieces.iter().zip(values) {
            self.b.ins().store(mem(), v, dst, dst_off + at as i32);
        }
    }

    /// Header area bytes `from..from + len` as (offset, bytes) pieces that follow the
    /// granules of the headers they lie in (bytes outside any header: plain pieces).
    pub(super) fn pieces_of(&self, from: u32, len: u32) -> Vec<(u32, u32)> {
        let end = from + len;
        let mut out = Vec::new();
        let mut at = from;
        while at < end {
            let h =
                self.c.prog.headers.iter().find(|h| h.byte_off <= at && at < h.byte_off + h.bytes);
            let Some(h) = h else {
                let next = self
                    .c
                    .prog
                    .headers
                    .iter()
                    .map(|h| h.byte_off)
                    .filter(|&o| o > at)
                    .min()
                    .unwrap_or(end)
                    .min(end);
                split(at, next - at, &mut out);
                at = next;
                continue;
            };
            for (off, n) in granules(h) {
                let (g0, g1) = (h.byte_off + off, h.byte_off + off + n);
                let (lo, hi) = (g0.max(at), g1.min(end));
                if lo >= hi {
                    continue;
                }
                if (lo, hi) == (g0, g1) {
                    out.push((lo, n));
                } else {
                    split(lo, hi - lo, &mut out);
                }
            }
            at = (h.byte_off + h.bytes).min(end);
        }
        out
    }

    /// The big-endian number in `bytes` (1, 2, 4 or 8) bytes at `base + at`, zero-extended.
    pub(super) fn load_piece(&mut self, base: Value, at: u32, bytes: u32) -> Value {
        if bytes == 1 {
            return self.b.ins().uload8(types::I64, mem(), base, at as i32);
        }
        let v = self.b.ins().load(ty(bytes), mem(), base, at as i32);
        let v = self.b.ins().bswap(v);
        if bytes == 8 {
            v
        } else {
            self.b.ins().uextend(types::I64, v)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(bytes: u32, fields: &[(u32, u32)]) -> HeaderInst {
        HeaderInst {
            name: "h".into(),
            ty: 0,
            byte_off: 0,
            bytes,
            fields: fields.to_vec(),
            varbit: None,
        }
    }

    #[test]
    fn ipv4_splits_at_fields_and_shared_bytes() {
        let widths = [4, 4, 8, 16, 16, 3, 13, 8, 8, 16, 32, 32];
        let mut bit = 0;
        let fields: Vec<(u32, u32)> = widths
            .iter()
            .map(|&w| {
                bit += w;
                (bit - w, w)
            })
            .collect();
        let g = granules(&header(20, &fields));
        assert_eq!(
            g,
            [(0, 1), (1, 1), (2, 2), (4, 2), (6, 2), (8, 1), (9, 1), (10, 2), (12, 4), (16, 4)]
        );
    }

    #[test]
    fn wide_fields_split_in_pieces_and_gaps_are_covered() {
        // A 48-bit MAC, a 128-bit address, 3 bytes no field names.
        let g = granules(&header(25, &[(0, 48), (48, 128)]));
        assert_eq!(g, [(0, 4), (4, 2), (6, 8), (14, 8), (22, 2), (24, 1)]);
        let covered: u32 = g.iter().map(|p| p.1).sum();
        assert_eq!(covered, 25);
    }
}
