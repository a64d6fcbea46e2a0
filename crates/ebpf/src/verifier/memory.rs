//! Memory accesses: stack, context, packet, map values; and memory arguments of helpers.

use super::*;

impl Explorer<'_> {
    /// Check a memory access through `base` at `off` and update the state.
    pub(super) fn access(
        &mut self,
        pc: usize,
        i: Insn,
        st: &mut State,
        base: Reg,
        off: i64,
        a: Access,
    ) -> VResult<()> {
        let Reg::Ptr(p) = base else {
            let r = if matches!(a, Access::Load { .. }) { i.src } else { i.dst };
            return Err(self
                .err(pc, format!("memory access through r{r}, which holds {}", base.describe())));
        };
        let size = match a {
            Access::Load { size, .. } | Access::Store { size, .. } | Access::Atomic { size } => {
                size as i64
            }
        };
        let write = !matches!(a, Access::Load { .. });
        let start_min = p.off + off + p.var.smin.max(-(1 << 30));
        let start_max = p.off + off + (p.var.umax.min(1 << 30) as i64);
        // The loaded value, for loads from memory other than the stack and context.
        let plain = |a: &Access| match a {
            Access::Load { size: 8, .. } | Access::Load { signed: true, .. } => Reg::unknown(),
            Access::Load { size, .. } => Reg::Scalar(Scalar::urange(0, (1u64 << (8 * size)) - 1)),
            _ => Reg::Uninit,
        };
        if let Access::Store { value: Reg::Ptr(_), .. } = a {
            if !matches!(p.kind, PtrKind::Stack { .. }) {
                return Err(self.err(pc, "storing a pointer outside the stack would leak it"));
            }
        }
        let bounded = |lo: i64, hi: i64, limit: i64| lo >= 0 && hi + size <= limit;
        if let Access::Atomic { .. } = a {
            // Atomics fault when unaligned (in the interpreter, the JIT and the kernel alike),
            // and every base a program can point into is 8-byte aligned: only offsets known to
            // be multiples of the size pass.
            match p.fixed().map(|f| f + off) {
                Some(o) if o.rem_euclid(size) == 0 => {}
                Some(o) => {
                    return Err(self.err(
                        pc,
                        format!("atomic {size}-byte access at offset {o} is not aligned"),
                    ))
                }
                None => return Err(self.err(pc, "atomic access at a variable offset")),
            }
        }
        match p.kind {
            PtrKind::Stack { frame } => {
                let Some(o) = p.fixed().map(|f| f + off) else {
                    return Err(self.err(pc, "stack access at a variable offset"));
                };
                if o < -(STACK_SIZE as i64) || o + size > 0 {
                    return Err(self.err(pc, format!("stack access at {o} (size {size}) is outside the {STACK_SIZE}-byte stack")));
                }
                self.stack_depth = self.stack_depth.max((-o) as usize);
                let idx = (STACK_SIZE as i64 + o) as usize;
                let n = size as usize;
                let Some(fr) = st.frames.get_mut(frame as usize) else {
                    return Err(self.err(pc, "access to the stack of a function that returned"));
                };
                let stack = &mut fr.stack;
                match a {
                    Access::Load { dst, signed, size } => {
                        let v = if size == 8 && idx % 8 == 0 && stack.is_spill(idx) {
                            *stack.spill_at((idx / 8) as u16).unwrap_or(&Reg::unknown())
                        } else if stack.pointer_spills(idx, n).next().is_some() {
                            return Err(self.err(
                                pc,
                                format!("reading part of the pointer spilled at stack {o} would leak it"),
                            ));
                        } else if stack.initialised(idx, n) {
                            plain(&Access::Load { size, signed, dst })
                        } else {
                            return Err(self.err(
                                pc,
                                format!(
                                    "stack bytes at {o}..{} are read before they are written",
                                    o + n as i64
                                ),
                            ));
                        };
                        st.set(dst, v);
                    }
                    Access::Store { value, .. } => {
                        if matches!(value, Reg::Ptr(_)) && !(n == 8 && idx % 8 == 0) {
                            return Err(self.err(
                                pc,
                                "a pointer can only be spilled whole, to an 8-byte aligned stack slot",
                            ));
                        }
                        if stack.pointer_spills(idx, n).any(|(_, whole)| !whole) {
                            return Err(self.err(
                                pc,
                                format!("overwriting part of the pointer spilled at stack {o} would leak the rest"),
                            ));
                        }
                        // Whole registers stored to aligned slots keep their type (pointers,
                        // scalar ranges); anything else is plain data.
                        if n == 8
                            && idx % 8 == 0
                            && (matches!(value, Reg::Ptr(_)) || i.class() == class::STX)
                        {
                            stack.write_spill(idx, value);
                        } else {
                            stack.write_misc(idx, n);
                        }
                    }
                    Access::Atomic { .. } => {
                        if !stack.initialised(idx, n) {
                            return Err(
                                self.err(pc, "atomic operation on uninitialised stack bytes")
                            );
                        }
                        if stack.pointer_spills(idx, n).next().is_some() {
                            return Err(self.err(pc, "atomic operation on a spilled pointer"));
                        }
                        stack.write_misc(idx, n);
                    }
                }
            }
            PtrKind::Mem { size: limit } => {
                if !bounded(start_min, start_max, limit as i64) {
                    return Err(self.err(
                        pc,
                        format!(
                            "access at {start_min}..{} is outside the {limit}-byte memory",
                            start_max + size
                        ),
                    ));
                }
                if let Access::Load { dst, .. } = a {
                    st.set(dst, plain(&a));
                }
            }
            PtrKind::MapValue { map } => {
                if !matches!(a, Access::Load { .. }) {
                    self.value_stores.insert(map);
                }
                let limit = self.env.maps[map as usize].value_size as i64;
                if !bounded(start_min, start_max, limit) {
                    return Err(self.err(
                        pc,
                        format!(
                            "access at {start_min}..{} is outside the {limit}-byte map value",
                            start_max + size
                        ),
                    ));
                }
                if let Access::Load { dst, .. } = a {
                    st.set(dst, plain(&a));
                }
            }
            PtrKind::Packet => {
                if matches!(a, Access::Atomic { .. }) {
                    return Err(self.err(pc, "atomic operations on packet data are not allowed"));
                }
                // `range` bytes from `base + var` are known to be in the packet, nothing
                // before them: a negative offset is refused even when the variable's minimum
                // would keep the address above `data` (the moved pointer itself may be past
                // `data_end`), as in Linux.
                let hi = p.off + off;
                if hi < 0 || p.var.smin < 0 || hi + size > p.range as i64 {
                    return Err(self.err(pc, format!(
                        "packet access at offset {} (size {size}) is beyond the {} bytes checked against data_end; compare the pointer with data_end first",
                        hi, p.range
                    )));
                }
                if let Access::Load { dst, .. } = a {
                    st.set(dst, plain(&a));
                }
            }
            PtrKind::Ctx => {
                if write {
                    return Err(self.err(pc, "the context is read-only"));
                }
                let Access::Load { dst, size, signed } = a else {
                    return Err(self.err(pc, "the context is read-only"));
                };
                // As in Linux, fields are read through the context pointer as the program got
                // it: the rewrite below then maps the instruction's own offset, and no sum of a
                // moved pointer and an offset can wrap the 16-bit field.
                if p.fixed() != Some(0) {
                    return Err(self.err(
                        pc,
                        format!(
                            "context access through a moved context pointer (moved by {}); read fields at an offset from the context pointer itself",
                            p.fixed().map_or_else(|| "a variable".to_string(), |m| m.to_string())
                        ),
                    ));
                }
                let o = off;
                match self.env.ctx {
                    Context::Xdp | Context::XdpMinLen { .. } => {
                        let f = xdp_field(o)
                            .filter(|_| size == 4 && !signed && o < XDP_MD_SIZE)
                            .ok_or_else(|| {
                                self.err(
                                    pc,
                                    format!("no xdp_md field is a {size}-byte load at offset {o}"),
                                )
                            })?;
                        let v = match f.kind {
                            XdpFieldKind::Data => Reg::Ptr(Ptr {
                                range: st.packet_min,
                                ..Ptr::new(PtrKind::Packet, 1)
                            }),
                            XdpFieldKind::DataEnd => Reg::Ptr(Ptr::new(PtrKind::PacketEnd, 0)),
                            XdpFieldKind::DataMeta => Reg::Ptr(Ptr::new(PtrKind::PacketMeta, 0)),
                            XdpFieldKind::Scalar => Reg::Scalar(Scalar::unknown32()),
                        };
                        let size_bits = if f.ctx_size == 8 { mem::DW } else { mem::W };
                        // Computed wide; a runtime offset that does not fit is refused.
                        let runtime_off = f.ctx_offset as i64 + (i.off as i64 - o);
                        let runtime_off = i16::try_from(runtime_off).map_err(|_| {
                            self.err(
                                pc,
                                format!("context offset {runtime_off} does not fit in 16 bits"),
                            )
                        })?;
                        let new = Insn::new(
                            class::LDX | mem::MEM | size_bits,
                            i.dst,
                            i.src,
                            runtime_off,
                            0,
                        );
                        self.rewrite(pc, new, "reads different context fields")?;
                        st.set(dst, v);
                    }
                    Context::Mem { .. } => {
                        return Err(self.err(pc, "no context in this environment"))
                    }
                }
            }
            PtrKind::PacketEnd | PtrKind::PacketMeta => {
                return Err(
                    self.err(pc, "data_end and data_meta can only be compared, not dereferenced")
                );
            }
            PtrKind::MapValueOrNull { .. } => {
                return Err(
                    self.err(pc, "the map value pointer may be null: compare it with 0 first")
                );
            }
            PtrKind::Map { .. } => return Err(self.err(pc, "a map cannot be dereferenced")),
        }
        Ok(())
    }
}

/// How a memory access behaves, per pointer kind.
pub(super) enum Access {
    Load { size: usize, signed: bool, dst: u8 },
    Store { size: usize, value: Reg },
    Atomic { size: usize },
}

/// What a helper's memory argument must be and is not (the verifier says "argument N must
/// be ..." followed by this).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum HelperMemNeed {
    #[error("a pointer")]
    Pointer,
    #[error("a stack pointer at a fixed offset")]
    FixedStackOffset,
    #[error("{n} bytes of stack from offset {o}")]
    StackRange { n: i64, o: i64 },
    #[error("a pointer into a live stack frame")]
    LiveFrame,
    #[error("{n} bytes of stack from {o} that do not cut a spilled pointer in part")]
    WholeSpills { n: i64, o: i64 },
    #[error("{n} bytes of data (stack {o}..{} holds a spilled pointer, which must not leak)", o + n)]
    NoSpill { n: i64, o: i64 },
    #[error("{n} initialised bytes (stack {o}..{} is not all written)", o + n)]
    Initialised { n: i64, o: i64 },
    #[error("{n} bytes inside the {limit}-byte map value")]
    MapValue { n: i64, limit: i64 },
    #[error("{n} bytes of packet checked against data_end")]
    Packet { n: i64 },
    #[error("{n} bytes inside the {size}-byte memory")]
    Memory { n: i64, size: u64 },
    #[error("a pointer to {n} readable bytes")]
    Readable { n: i64 },
}

/// A helper reads (or writes, when `uninit_ok`) `n` bytes through `v`; returns the stack depth
/// the access reaches (0 off the stack).
pub(super) fn check_helper_mem(
    maps: &[MapInfo],
    st: &mut State,
    v: Reg,
    n: i64,
    uninit_ok: bool,
) -> Result<usize, HelperMemNeed> {
    let Reg::Ptr(p) = v else { return Err(HelperMemNeed::Pointer) };
    match p.kind {
        PtrKind::Stack { frame } => {
            let o = p.fixed().ok_or(HelperMemNeed::FixedStackOffset)?;
            if o < -(STACK_SIZE as i64) || o + n > 0 {
                return Err(HelperMemNeed::StackRange { n, o });
            }
            let idx = (STACK_SIZE as i64 + o) as usize;
            let stack =
                &mut st.frames.get_mut(frame as usize).ok_or(HelperMemNeed::LiveFrame)?.stack;
            let spills: Vec<(u16, bool)> = stack.pointer_spills(idx, n as usize).collect();
            if uninit_ok {
                if spills.iter().any(|(_, whole)| !whole) {
                    return Err(HelperMemNeed::WholeSpills { n, o });
                }
                stack.write_misc(idx, n as usize);
            } else if !spills.is_empty() {
                return Err(HelperMemNeed::NoSpill { n, o });
            } else if !stack.initialised(idx, n as usize) {
                return Err(HelperMemNeed::Initialised { n, o });
            }
            Ok((-o) as usize)
        }
        PtrKind::MapValue { map } => {
            let limit = maps[map as usize].value_size as i64;
            let lo = p.off + p.var.smin.max(0);
            let hi = p.off + p.var.umax.min(1 << 30) as i64;
            if lo < 0 || hi + n > limit {
                return Err(HelperMemNeed::MapValue { n, limit });
            }
            Ok(0)
        }
        PtrKind::Packet => {
            if p.off < 0 || p.off + n > p.range as i64 || p.var.umax != 0 {
                return Err(HelperMemNeed::Packet { n });
            }
            Ok(0)
        }
        PtrKind::Mem { size } => {
            if p.off < 0 || p.off + n > size as i64 || p.var.umax != 0 {
                return Err(HelperMemNeed::Memory { n, size });
            }
            Ok(0)
        }
        _ => Err(HelperMemNeed::Readable { n }),
    }
}
