//! v1model externs: checksums, hashes, registers, counters, meters, random numbers, digests,
//! and the requests (clone, resubmit, recirculate, truncate) the architecture acts on after a
//! control finishes.

use super::bits::{copy_bytes, push_bits, read_bits};
use super::expr::StoreFn;
use super::{Compiler, Ctx, ExprFn, Flow, InstanceRt, StmtFn};
use crate::ir::{Expr, Extern, HashAlgo, HdrRef, HostTarget, ListItem, Place};

// What an empty extern slot or a flow without a function answers: let the packet pass.
use hotplane_core::xdp::XDP_PASS;
use hotplane_tables::objects::{Color, DigestRecord};

/// Part of a field list: a run of header bytes copied as they are, or one value.
enum Segment {
    Bytes {
        from: usize,
        len: usize,
    },
    Value {
        e: ExprFn,
        width: u32,
    },
    /// A varbit field: its bytes up to the length in the slot.
    Varbit {
        sel: super::expr::HdrSel,
        varbits: std::sync::Arc<[Option<crate::ir::Varbit>]>,
    },
}

/// A compiled field list (the data of a hash, checksum or digest): assembled into a bit string
/// with fields back to back, as BMv2 does.
pub(crate) struct FieldList {
    segments: Vec<Segment>,
}

impl FieldList {
    /// The header byte runs of a list made only of them, when every run but the last has an
    /// even length: the Internet checksum can then sum the runs where they lie.
    pub(crate) fn even_byte_runs(&self) -> Option<Vec<(usize, usize)>> {
        let runs: Vec<(usize, usize)> = self
            .segments
            .iter()
            .map(|s| match s {
                Segment::Bytes { from, len } => Some((*from, *len)),
                Segment::Value { .. } | Segment::Varbit { .. } => None,
            })
            .collect::<Option<_>>()?;
        let n = runs.len();
        runs.iter().take(n.saturating_sub(1)).all(|r| r.1 % 2 == 0).then_some(runs)
    }

    /// Assemble into `out` (cleared first); returns the length in bits.
    pub fn assemble(&self, c: &Ctx<'_>, out: &mut Vec<u8>) -> u32 {
        out.clear();
        let mut bits = 0u32;
        for s in &self.segments {
            match s {
                Segment::Bytes { from, len } if bits % 8 == 0 => {
                    out.extend_from_slice(&c.st.hdr[*from..*from + *len]);
                    bits += *len as u32 * 8;
                }
                Segment::Bytes { from, len } => {
                    for &b in &c.st.hdr[*from..*from + *len] {
                        push_bits(out, &mut bits, b as u128, 8);
                    }
                }
                Segment::Value { e, width } => push_bits(out, &mut bits, e(c), *width),
                Segment::Varbit { sel, varbits } => {
                    let Some((id, off)) = sel.resolve(c) else { continue };
                    let Some(v) = varbits[id as usize] else { continue };
                    let n = (c.st.slots[v.len_slot as usize].min(v.max_bits as u128) / 8) as usize;
                    let from = (off + v.byte_off) as usize;
                    for &byte in &c.st.hdr[from..from + n] {
                        push_bits(out, &mut bits, byte as u128, 8);
                    }
                }
            }
        }
        bits
    }
}

/// RFC 1071 ones' complement sum of `data` (an odd last byte is padded with zero), folded.
/// Sums 32-bit words into a 64-bit accumulator (RFC 1071 section 2(B): the sum is independent
/// of the word size) and folds once at the end.
pub fn ones_complement_sum(data: &[u8], sum: u32) -> u32 {
    let mut acc = sum as u64;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u32::from_be_bytes([w[0], w[1], w[2], w[3]]) as u64;
    }
    match *words.remainder() {
        [a, b, c] => acc += u16::from_be_bytes([a, b]) as u64 + ((c as u64) << 8),
        [a, b] => acc += u16::from_be_bytes([a, b]) as u64,
        [a] => acc += (a as u64) << 8,
        _ => {}
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u32
}

/// The hash algorithms of v1model, with BMv2's parameters: `crc32` is CRC-32 (IEEE 802.3),
/// `crc16` is CRC-16/ARC, `csum16` the Internet checksum, `xor16` the XOR of 16-bit words,
/// `identity` the data itself (its last 64 bits).
pub fn hash(algo: HashAlgo, data: &[u8]) -> u64 {
    match algo {
        HashAlgo::Crc32 => {
            let mut crc = 0xffff_ffffu32;
            for &b in data {
                crc ^= b as u32;
                for _ in 0..8 {
                    crc = if crc & 1 != 0 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
                }
            }
            (!crc) as u64
        }
        HashAlgo::Crc16 => {
            let mut crc = 0u16;
            for &b in data {
                crc ^= b as u16;
                for _ in 0..8 {
                    crc = if crc & 1 != 0 { (crc >> 1) ^ 0xa001 } else { crc >> 1 };
                }
            }
            crc as u64
        }
        HashAlgo::Csum16 => (!ones_complement_sum(data, 0) & 0xffff) as u64,
        HashAlgo::Xor16 => {
            let mut x = 0u16;
            for w in data.chunks(2) {
                x ^= u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]);
            }
            x as u64
        }
        HashAlgo::Identity => data.iter().fold(0u64, |acc, &b| (acc << 8) | b as u64),
        // `random` as a hash algorithm is resolved by the caller.
        HashAlgo::Random => 0,
    }
}

impl Compiler<'_> {
    pub(crate) fn field_list(&self, items: &[ListItem]) -> FieldList {
        // Fields of a fixed header that follow one another merge into bit runs; runs that
        // start and end on byte boundaries are copied as bytes (`version, ihl` is one byte).
        enum Piece<'e> {
            Run { start: u32, bits: u32, items: Vec<&'e ListItem> },
            Value(&'e ListItem),
        }
        let mut pieces: Vec<Piece<'_>> = Vec::new();
        for item in items {
            if let Expr::Read(Place::Field { hdr: HdrRef::Static(id), bit_off, width }) =
                &item.value
            {
                if *width == item.width {
                    let start = self.prog.headers[*id as usize].byte_off * 8 + bit_off;
                    if let Some(Piece::Run { start: s, bits, items }) = pieces.last_mut() {
                        if *s + *bits == start {
                            *bits += width;
                            items.push(item);
                            continue;
                        }
                    }
                    pieces.push(Piece::Run { start, bits: *width, items: vec![item] });
                    continue;
                }
            }
            pieces.push(Piece::Value(item));
        }
        let varbits = self.varbits();
        let value =
            |item: &ListItem| Segment::Value { e: self.expr(&item.value), width: item.width };
        let mut segments = Vec::new();
        for p in pieces {
            match p {
                Piece::Run { start, bits, .. } if start % 8 == 0 && bits % 8 == 0 => segments
                    .push(Segment::Bytes { from: (start / 8) as usize, len: (bits / 8) as usize }),
                Piece::Run { items, .. } => segments.extend(items.into_iter().map(value)),
                Piece::Value(ListItem { value: Expr::VarbitField(h), .. }) => {
                    segments.push(Segment::Varbit { sel: self.hdr(h), varbits: varbits.clone() })
                }
                Piece::Value(item) => segments.push(value(item)),
            }
        }
        FieldList { segments }
    }

    pub(crate) fn extern_call(&self, x: &Extern) -> StmtFn {
        let std = self.std;
        match x {
            Extern::Extract { hdr, varbit_bits: Some(bits) } => {
                let sel = self.hdr(hdr);
                let varbits = self.varbits();
                let bits = self.expr(bits);
                let next = match hdr {
                    HdrRef::Next(s) => Some(s.next_slot as usize),
                    _ => None,
                };
                let (too_short, out_of_bounds, header_too_short, invalid_argument) = (
                    self.error_code("PacketTooShort"),
                    self.error_code("StackOutOfBounds"),
                    self.error_code("HeaderTooShort"),
                    self.error_code("ParserInvalidArgument"),
                );
                Box::new(move |c| {
                    let Some((id, off)) = sel.resolve(c) else {
                        return c.reject(out_of_bounds);
                    };
                    let Some(v) = varbits[id as usize] else { return c.reject(out_of_bounds) };
                    // As BMv2: longer than the field is HeaderTooShort, not whole bytes is
                    // ParserInvalidArgument.
                    let n = bits(c);
                    if n > v.max_bits as u128 {
                        return c.reject(header_too_short);
                    }
                    if n % 8 != 0 {
                        return c.reject(invalid_argument);
                    }
                    let (fixed, max) = (v.byte_off as usize, (v.max_bits / 8) as usize);
                    let bytes = fixed + (n / 8) as usize;
                    let Some(src) = c.pkt.get(c.cursor..c.cursor + bytes) else {
                        return c.reject(too_short);
                    };
                    let off = off as usize;
                    copy_bytes(&mut c.st.hdr[off..off + bytes], src);
                    // The rest of the field is zero, so copies and re-extracts never show
                    // an older packet's bytes.
                    c.st.hdr[off + bytes..off + fixed + max].fill(0);
                    c.st.slots[v.len_slot as usize] = n;
                    c.st.valid[id as usize] = true;
                    c.cursor += bytes;
                    if let Some(n) = next {
                        c.st.slots[n] += 1;
                    }
                    Flow::Next
                })
            }
            Extern::Extract { hdr, .. } => {
                let sel = self.hdr(hdr);
                let bytes = self.hdr_bytes(hdr);
                let next = match hdr {
                    HdrRef::Next(s) => Some(s.next_slot as usize),
                    _ => None,
                };
                let (too_short, out_of_bounds) =
                    (self.error_code("PacketTooShort"), self.error_code("StackOutOfBounds"));
                Box::new(move |c| {
                    let Some((id, off)) = sel.resolve(c) else {
                        return c.reject(out_of_bounds);
                    };
                    let Some(src) = c.pkt.get(c.cursor..c.cursor + bytes) else {
                        return c.reject(too_short);
                    };
                    let off = off as usize;
                    copy_bytes(&mut c.st.hdr[off..off + bytes], src);
                    c.st.valid[id as usize] = true;
                    c.cursor += bytes;
                    if let Some(n) = next {
                        c.st.slots[n] += 1;
                    }
                    Flow::Next
                })
            }
            &Extern::Need(bits) => {
                let too_short = self.error_code("PacketTooShort");
                let bytes = bits.div_ceil(8) as usize;
                Box::new(move |c| {
                    if c.cursor + bytes > c.pkt.len() {
                        return c.reject(too_short);
                    }
                    Flow::Next
                })
            }
            Extern::Advance(bits) => {
                let bits = self.expr(bits);
                let too_short = self.error_code("PacketTooShort");
                Box::new(move |c| {
                    let bytes = (bits(c) / 8) as usize;
                    if c.cursor + bytes > c.pkt.len() {
                        return c.reject(too_short);
                    }
                    c.cursor += bytes;
                    Flow::Next
                })
            }
            Extern::Verify { cond, error } => {
                let (cond, error) = (self.expr(cond), self.expr(error));
                Box::new(move |c| {
                    if cond(c) != 0 {
                        Flow::Next
                    } else {
                        let e = error(c);
                        c.reject(e)
                    }
                })
            }
            Extern::Emit(h) if self.hdr_varbit(h) => {
                let (sel, varbits) = (self.hdr(h), self.varbits());
                Box::new(move |c| {
                    if let Some((id, off)) = sel.resolve(c) {
                        if let (true, Some(v)) = (c.st.valid[id as usize], varbits[id as usize]) {
                            let len = c.st.slots[v.len_slot as usize].min(v.max_bits as u128);
                            let bytes = v.byte_off as usize + (len / 8) as usize;
                            let st = &mut *c.st;
                            let off = off as usize;
                            st.out.extend_from_slice(&st.hdr[off..off + bytes]);
                        }
                    }
                    Flow::Next
                })
            }
            Extern::Emit(h) => {
                let sel = self.hdr(h);
                let bytes = self.hdr_bytes(h);
                Box::new(move |c| {
                    if let Some((id, off)) = sel.resolve(c) {
                        if c.st.valid[id as usize] {
                            let off = off as usize;
                            let st = &mut *c.st;
                            let src = &st.hdr[off..off + bytes];
                            if bytes <= 32 {
                                // A fixed 32-byte copy the compiler inlines, then trimmed:
                                // cheaper than a memcpy call for a header's few bytes.
                                let mut tmp = [0u8; 32];
                                copy_bytes(&mut tmp[..bytes], src);
                                let at = st.out.len();
                                st.out.extend_from_slice(&tmp);
                                st.out.truncate(at + bytes);
                            } else {
                                st.out.extend_from_slice(src);
                            }
                        }
                    }
                    Flow::Next
                })
            }
            Extern::MarkToDrop => Box::new(move |c| {
                c.st.slots[std.egress_spec] = super::DROP_PORT as u128;
                c.st.slots[std.mcast_grp] = 0;
                Flow::Next
            }),
            Extern::RegisterRead { reg, dst, index } => {
                let (store, index) = (self.store(dst), self.expr(index));
                let InstanceRt::Register(r) = self.objects.instance(*reg) else {
                    return self.broken("register");
                };
                Box::new(move |c| {
                    let i = index(c) as usize;
                    let v = if i < r.len() { r.read(i) } else { 0 };
                    store(c, v as u128);
                    Flow::Next
                })
            }
            Extern::RegisterWrite { reg, index, value } => {
                let (index, value) = (self.expr(index), self.expr(value));
                let InstanceRt::Register(r) = self.objects.instance(*reg) else {
                    return self.broken("register");
                };
                Box::new(move |c| {
                    let i = index(c) as usize;
                    if i < r.len() {
                        r.write(i, value(c) as u64);
                    }
                    Flow::Next
                })
            }
            Extern::CounterCount { counter, index } => {
                let index = self.expr(index);
                let InstanceRt::Counter(k) = self.objects.instance(*counter) else {
                    return self.broken("counter");
                };
                Box::new(move |c| {
                    let i = index(c) as usize;
                    if i < k.len() {
                        k.count(i, c.pkt.len() as u32);
                    }
                    Flow::Next
                })
            }
            Extern::MeterExecute { meter, index, dst } => {
                let (index, store) = (self.expr(index), self.store(dst));
                let InstanceRt::Meter { meter: m, bytes } = self.objects.instance(*meter) else {
                    return self.broken("meter");
                };
                Box::new(move |c| {
                    let i = index(c) as usize;
                    let colour = if i < m.len() {
                        let units = if bytes { c.pkt.len() as u64 } else { 1 };
                        m.execute(i, units, c.now_ns, None)
                    } else {
                        Color::Green
                    };
                    store(c, colour as u128);
                    Flow::Next
                })
            }
            Extern::Hash { dst, algo, base, data, max } => {
                let (store, base, max) = (self.store(dst), self.expr(base), self.expr(max));
                let (list, algo, width) = (self.field_list(data), *algo, dst.width());
                Box::new(move |c| {
                    let h = if algo == HashAlgo::Random {
                        c.st.random() as u128
                    } else {
                        let mut buf = std::mem::take(&mut c.st.scratch);
                        list.assemble(c, &mut buf);
                        let h = hash(algo, &buf);
                        c.st.scratch = buf;
                        h as u128
                    };
                    let (b, m) = (base(c), max(c));
                    let v = if m == 0 { b } else { b.wrapping_add(h % m) };
                    store(c, v & crate::types::mask(width));
                    Flow::Next
                })
            }
            Extern::Checksum { verify, cond, data, sum, algo, with_payload } => {
                let (cond, list, algo) = (self.expr(cond), self.field_list(data), *algo);
                let (load, store, width) = (self.load(sum), self.store(sum), sum.width());
                let (verify, with_payload) = (*verify, *with_payload);
                let runs = list.even_byte_runs();
                if let (Some(runs), HashAlgo::Csum16, false) = (runs, algo, with_payload) {
                    // The IPv4 header checksum and its like: no copy, one pass.
                    return Box::new(move |c| {
                        if cond(c) == 0 {
                            return Flow::Next;
                        }
                        let sum = runs.iter().fold(0u32, |acc, &(from, len)| {
                            ones_complement_sum(&c.st.hdr[from..from + len], acc)
                        });
                        let v = (!sum & 0xffff) as u128;
                        if !verify {
                            store(c, v);
                        } else if load(c) != v {
                            c.st.slots[std.checksum_error] = 1;
                        }
                        Flow::Next
                    });
                }
                Box::new(move |c| {
                    if cond(c) == 0 {
                        return Flow::Next;
                    }
                    let mut buf = std::mem::take(&mut c.st.scratch);
                    list.assemble(c, &mut buf);
                    if with_payload {
                        buf.extend_from_slice(c.pkt.get(c.payload..).unwrap_or(&[]));
                    }
                    let v = hash(algo, &buf) as u128 & crate::types::mask(width);
                    c.st.scratch = buf;
                    if verify {
                        if load(c) != v {
                            c.st.slots[std.checksum_error] = 1;
                        }
                    } else {
                        store(c, v);
                    }
                    Flow::Next
                })
            }
            Extern::HostCall { target, data, dst } => {
                let store = self.store(dst);
                let fields: Option<Vec<(ExprFn, StoreFn, u32)>> = data.as_ref().map(|ps| {
                    ps.iter().map(|p| (self.load(p), self.store(p), p.width())).collect()
                });
                let (target, in_port) = (target.clone(), self.std.ingress_port);
                Box::new(move |c| {
                    let mut buf = std::mem::take(&mut c.st.scratch);
                    buf.clear();
                    match &fields {
                        None => buf.extend_from_slice(c.pkt),
                        Some(fs) => {
                            let mut bits = 0;
                            for (load, _, w) in fs {
                                push_bits(&mut buf, &mut bits, load(c), *w);
                            }
                        }
                    }
                    let r = match target {
                        HostTarget::Slot(i) => c.host.call_slot(i, &mut buf, c.guard, c.now_ns),
                        HostTarget::FlowFunction => {
                            let port = c.st.slots[in_port] as u32;
                            c.host.call_flow(&mut buf, port, c.guard, c.now_ns)
                        }
                    };
                    if let (Some(fs), Some(_)) = (&fields, r) {
                        let mut at = 0;
                        for (_, put, w) in fs {
                            put(c, read_bits(&buf, at, *w));
                            at += w;
                        }
                    }
                    c.st.scratch = buf;
                    store(c, r.unwrap_or(XDP_PASS) as u128);
                    Flow::Next
                })
            }
            Extern::LoadFromPacket => Box::new(|c| {
                c.st.fx.punt = true;
                Flow::Next
            }),
            Extern::Random { dst, lo, hi } => {
                let (store, lo, hi) = (self.store(dst), self.expr(lo), self.expr(hi));
                Box::new(move |c| {
                    let (l, h) = (lo(c), hi(c));
                    let r = c.st.random() as u128;
                    let v = if h <= l { l } else { l + r % (h - l + 1) };
                    store(c, v);
                    Flow::Next
                })
            }
            Extern::Digest { receiver, ty, data } => {
                let (receiver, list) = (self.expr(receiver), self.field_list(data));
                let ring = self.objects.digests.clone();
                // Records name their digest by its P4Info id, which depends on its name only:
                // records queued before a pipeline swap still mean the same digest after it.
                let ids = crate::p4info::digest_ids(self.prog);
                let id = ids.iter().find(|(d, _)| d.name == ty.name).map_or(0, |(_, id)| *id);
                Box::new(move |c| {
                    // Evaluated for its side effects only; BMv2 ignores the receiver too.
                    let _ = receiver(c);
                    let mut buf = std::mem::take(&mut c.st.scratch);
                    list.assemble(c, &mut buf);
                    let mut words = [0u64; 4];
                    for (i, w) in words.iter_mut().enumerate() {
                        let mut b = [0u8; 8];
                        let part = buf.get(i * 8..).unwrap_or(&[]);
                        let n = part.len().min(8);
                        b[..n].copy_from_slice(&part[..n]);
                        *w = u64::from_be_bytes(b);
                    }
                    c.st.scratch = buf;
                    ring.send(DigestRecord { id, ts_ns: c.now_ns, words });
                    Flow::Next
                })
            }
            Extern::Clone { kind, session, keep } => {
                let (kind, session, keep) = (*kind, self.expr(session), *keep);
                Box::new(move |c| {
                    let s = session(c) as u32;
                    c.st.fx.clone = Some((kind, s, keep));
                    Flow::Next
                })
            }
            &Extern::Resubmit { keep } => Box::new(move |c| {
                c.st.fx.resubmit = Some(keep);
                Flow::Next
            }),
            &Extern::Recirculate { keep } => Box::new(move |c| {
                c.st.fx.recirculate = Some(keep);
                Flow::Next
            }),
            Extern::Truncate(len) => {
                let len = self.expr(len);
                Box::new(move |c| {
                    c.st.fx.truncate = Some(len(c) as u32);
                    Flow::Next
                })
            }
            Extern::Assert(cond) => {
                let cond = self.expr(cond);
                Box::new(move |c| {
                    if cond(c) == 0 {
                        c.st.fx.assert_failed = true;
                    }
                    Flow::Next
                })
            }
            Extern::Log { .. } => Box::new(|_| Flow::Next),
        }
    }

    /// A statement for an extern whose instance does not have the expected kind; lowering
    /// makes this unreachable, and it must not panic if it is not.
    fn broken(&self, what: &'static str) -> StmtFn {
        debug_assert!(false, "{what} instance of the wrong kind");
        Box::new(move |c| {
            c.st.fx.assert_failed = true;
            Flow::Next
        })
    }
}

#[cfg(test)]
mod tests {
    use super::ones_complement_sum;

    /// The textbook form: 16-bit words, folded as it goes.
    fn reference(data: &[u8], mut sum: u32) -> u32 {
        for w in data.chunks(2) {
            sum += u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]) as u32;
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum
    }

    #[test]
    fn ones_complement_sum_matches_rfc_1071() {
        // RFC 1071, section 3: the example's sum is ddf2.
        assert_eq!(
            ones_complement_sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7], 0),
            0xddf2
        );
        let data: Vec<u8> = (0..200u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        for len in 0..data.len() {
            for start in [0, 0xffff, 0x1234] {
                assert_eq!(
                    ones_complement_sum(&data[..len], start),
                    reference(&data[..len], start),
                    "length {len}, start {start:#x}"
                );
            }
        }
    }
}
