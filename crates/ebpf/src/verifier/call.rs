//! Calls (helpers and bpf-to-bpf) and exits.

use super::*;

impl Explorer<'_> {
    pub(super) fn exit(&mut self, pc: usize, st: &mut State) -> VResult<Next> {
        let r0 = self.read_reg(pc, st, 0)?;
        if st.frames.len() == 1 {
            if !matches!(r0, Reg::Scalar(_)) {
                return Err(self.err(
                    pc,
                    format!("the program returns {}; it must return a scalar", r0.describe()),
                ));
            }
            return Ok(Next::End);
        }
        // The returning frame's stack dies here: no pointer into it may survive, or a later
        // access would land in whatever the engines put there next (the JIT: the next callee's
        // saved registers).
        let depth = st.frames.len() - 1;
        let into_callee = |r: &Reg| matches!(r, Reg::Ptr(Ptr { kind: PtrKind::Stack { frame }, .. }) if *frame as usize >= depth);
        if into_callee(&r0) {
            return Err(self.err(pc, "a function returns a pointer to its own stack"));
        }
        for (k, fr) in st.frames[..depth].iter().enumerate() {
            if let Some(r) = (6..=9).find(|&r| into_callee(&fr.regs[r])) {
                return Err(self.err(
                    pc,
                    format!("r{r} of frame {k} points into the stack of the returning function"),
                ));
            }
            if let Some((slot, _)) = fr.stack.spills.iter().find(|(_, r)| into_callee(r)) {
                let off = *slot as i64 * 8 - STACK_SIZE as i64;
                return Err(self.err(
                    pc,
                    format!(
                        "stack slot {off} of frame {k} holds a pointer into the stack of the returning function"
                    ),
                ));
            }
        }
        let callee = st.frames.pop().unwrap_or_else(|| unreachable!());
        let f = st.frame_mut();
        f.regs[0] = r0;
        for r in 1..=5 {
            f.regs[r] = Reg::Uninit;
        }
        Ok(Next::Go(callee.ret_pc))
    }

    pub(super) fn call(&mut self, pc: usize, i: Insn, st: &mut State) -> VResult<Next> {
        if i.src == pseudo::CALL && !i.is_src_reg() {
            if st.frames.len() >= MAX_CALL_DEPTH {
                return Err(self.err(pc, format!("local calls nest deeper than {MAX_CALL_DEPTH}")));
            }
            let target = (pc as i64 + 1 + i.imm as i64) as usize;
            let caller = st.frame().regs;
            let mut regs = [Reg::Uninit; 11];
            regs[1..=5].copy_from_slice(&caller[1..=5]);
            regs[10] = Reg::Ptr(Ptr::new(PtrKind::Stack { frame: st.frames.len() as u8 }, 0));
            st.frames.push(Frame { regs, stack: Stack::default(), ret_pc: pc + 1 });
            return Ok(Next::Go(target));
        }
        let id = if i.is_src_reg() {
            match self.read_reg(pc, st, i.dst)? {
                Reg::Scalar(s) => s.as_const().ok_or_else(|| {
                    self.err(pc, format!("r{} does not hold a known helper number", i.dst))
                })?,
                r => {
                    return Err(self.err(
                        pc,
                        format!("r{} holds {}, not a helper number", i.dst, r.describe()),
                    ))
                }
            }
        } else {
            i.imm as u32 as u64
        };
        let h =
            u32::try_from(id).ok().and_then(|id| self.env.helpers.get(id)).copied().ok_or_else(
                || self.err(pc, format!("helper {id} does not exist in this environment")),
            )?;
        self.helpers_used.insert(h.id);
        if i.is_src_reg() {
            // callx with a register the verifier knows: a direct call from now on.
            self.rewrite(
                pc,
                Insn::new(crate::insn::op::CALL, 0, 0, 0, h.id as i32),
                "calls different helpers",
            )?;
        }
        let mut map: Option<u32> = None;
        for (k, arg) in h.args.iter().enumerate() {
            let r = (k + 1) as u8;
            let v = st.reg(r);
            let name = h.name;
            let prog = self.prog;
            let need = |what: &str| {
                reject(
                    prog,
                    pc,
                    format!(
                        "{name} argument {} (r{r}) must be {what}; it is {}",
                        k + 1,
                        v.describe()
                    ),
                )
            };
            match arg {
                Arg::None => {}
                Arg::Anything => {
                    if v == Reg::Uninit {
                        return Err(need("initialised"));
                    }
                }
                Arg::NoPointer => {
                    if matches!(v, Reg::Ptr(_)) {
                        return Err(need("a scalar (a pointer would leak its address)"));
                    }
                }
                Arg::Scalar | Arg::Size => {
                    if !matches!(v, Reg::Scalar(_)) {
                        return Err(need("a scalar"));
                    }
                }
                Arg::Map => match v {
                    Reg::Ptr(Ptr { kind: PtrKind::Map { map: m }, .. }) => {
                        map = Some(m);
                        let e = self.call_maps.entry(pc).or_insert(Some(m));
                        if *e != Some(m) {
                            *e = None;
                        }
                    }
                    _ => return Err(need("a map")),
                },
                Arg::DevMap => match v {
                    Reg::Ptr(Ptr { kind: PtrKind::Map { map: m }, .. })
                        if self.env.maps[m as usize].kind == MapKind::DevMap =>
                    {
                        map = Some(m)
                    }
                    _ => return Err(need("a devmap")),
                },
                Arg::Ctx => {
                    if !matches!(v, Reg::Ptr(p) if p.kind == PtrKind::Ctx && p.fixed() == Some(0)) {
                        return Err(need("the context pointer"));
                    }
                }
                Arg::MapKey | Arg::MapValue => {
                    let m = map.ok_or_else(|| need("preceded by a map argument"))?;
                    let info = self.env.maps[m as usize];
                    let n =
                        if *arg == Arg::MapKey { info.key_size } else { info.value_size } as i64;
                    let depth = check_helper_mem(self.env.maps, st, v, n, false)
                        .map_err(|m| need(&m.to_string()))?;
                    self.stack_depth = self.stack_depth.max(depth);
                }
                Arg::Mem | Arg::UninitMem => {
                    let size = match st.reg(r + 1) {
                        Reg::Scalar(s) if s.umax <= 1 << 16 => s.umax as i64,
                        _ => {
                            return Err(self.err(
                                pc,
                                format!(
                                    "{name} argument {} (r{}) must be a bounded size",
                                    k + 2,
                                    r + 1
                                ),
                            ))
                        }
                    };
                    if let (Arg::UninitMem, Reg::Ptr(p)) = (arg, v) {
                        if let PtrKind::MapValue { map } = p.kind {
                            self.value_stores.insert(map);
                        }
                    }
                    if size > 0 || !matches!(v, Reg::Scalar(s) if s.as_const() == Some(0)) {
                        let depth =
                            check_helper_mem(self.env.maps, st, v, size, *arg == Arg::UninitMem)
                                .map_err(|m| need(&m.to_string()))?;
                        self.stack_depth = self.stack_depth.max(depth);
                    }
                }
            }
        }
        for r in 1..=5 {
            st.set(r, Reg::Uninit);
        }
        st.set(
            0,
            match h.ret {
                Ret::Scalar => Reg::unknown(),
                Ret::MapValueOrNull => {
                    let m = map.ok_or_else(|| {
                        self.err(pc, "a helper returning a map value needs a map argument")
                    })?;
                    Reg::Ptr(Ptr::new(PtrKind::MapValueOrNull { map: m }, self.fresh_id()))
                }
            },
        );
        if h.changes_packet {
            // The packet moved: every packet pointer is stale, and so is a known length.
            st.packet_min = 0;
            st.for_each_reg(|r| {
                if let Reg::Ptr(p) = r {
                    if matches!(p.kind, PtrKind::Packet | PtrKind::PacketEnd | PtrKind::PacketMeta)
                    {
                        *r = Reg::unknown();
                    }
                }
            });
        }
        Ok(Next::Go(pc + 1))
    }
}
