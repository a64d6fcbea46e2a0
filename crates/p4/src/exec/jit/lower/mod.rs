//! IR statements to Cranelift IR: control flow, header and output moves, checksums, table
//! applies ([`value`] has expressions, [`parser`] the parser). Anything that needs a value of
//! more than 64 bits, or that this code does not know, makes its statement a fallback (the
//! closure, called through [`super::run_fallback`]).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, Block, InstBuilder, MemFlags, SigRef, Signature, Type, Value,
};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_frontend::{FunctionBuilder, Variable};

use super::{code, frame, run_fallback, Body, Kept};
use crate::exec::{Compiler, StmtFn, DROP_PORT};
use crate::ir::{Extern, HashAlgo, HdrRef, Place, Stmt};

mod apply;
mod granule;
mod parser;
mod value;

/// Header copies longer than this stay closures (they would unroll into long code).
const MAX_INLINE_COPY: u32 = 128;

/// Generate a function's body into `b`; false if some part cannot be lowered (the function
/// is then not to be defined). `actions` holds the native entry of each action (by program
/// index) for applies to call; what the code points at goes to `kept`.
pub(super) fn function(
    mut b: FunctionBuilder<'_>,
    cfg: TargetFrontendConfig,
    c: &Compiler<'_>,
    body: Body<'_>,
    actions: &[Option<usize>],
    kept: &mut Vec<Kept>,
) -> bool {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let frame = b.block_params(entry)[0];
    let ptr = cfg.pointer_type();
    let sig = |params: &[Type], ret: Option<Type>| {
        let mut s = Signature::new(cfg.default_call_conv);
        s.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        s.returns.extend(ret.map(AbiParam::new));
        s
    };
    let fallback_sig = b.import_signature(sig(&[ptr, ptr, ptr], Some(types::I64)));
    let apply_sig = b.import_signature(sig(&[ptr, ptr], Some(types::I64)));
    let block_sig = b.import_signature(sig(&[ptr], Some(types::I64)));
    let vars = [Variable::from_u32(0), Variable::from_u32(1), Variable::from_u32(2)];
    for v in vars {
        b.declare_var(v, ptr);
    }
    let visited = Variable::from_u32(3);
    b.declare_var(visited, types::I64);
    let mut l = Lower {
        b,
        ptr,
        c,
        frame,
        fallbacks: Box::default(),
        catch: Vec::new(),
        visited,
        fallback_sig,
        apply_sig,
        block_sig,
        vars,
        actions,
        kept,
    };
    l.reload_bases();
    let ends = match body {
        Body::Block(stmts) => l.stmts(stmts),
        Body::Front(controls) => {
            if !l.parser() {
                return false;
            }
            l.controls(controls, false)
        }
        Body::Back(controls) => l.controls(controls, true),
        Body::Whole { front, checksum, deparser } => {
            l.enter();
            if !l.parser() {
                return false;
            }
            l.controls(front, false);
            l.stop_unless_unicast();
            l.controls(&[checksum], false);
            l.deparse_in_place(deparser);
            l.controls(&[deparser], true)
        }
    };
    if !ends {
        l.ret(code::NEXT);
    }
    l.b.seal_all_blocks();
    l.b.finalize();
    l.kept.push(Kept::Fallbacks(l.fallbacks));
    true
}

/// Where a flow other than "next" goes: the end of the innermost construct that catches it.
#[derive(Clone, Copy)]
struct Catch {
    end: Block,
    /// A scope (an action or function body) and a control catch `return`.
    ret: bool,
    /// A control run to its end catches `exit`.
    exit: bool,
    /// The parser catches a reject.
    reject: bool,
}

/// Loads and stores of packet state: unaligned, never trapping (all addresses are in bounds).
fn mem() -> MemFlags {
    MemFlags::new().with_notrap()
}

struct Lower<'f, 'c, 'p> {
    b: FunctionBuilder<'f>,
    ptr: Type,
    c: &'c Compiler<'p>,
    frame: Value,
    /// The closures this function calls, by index. Boxed: the code holds the address of the
    /// vector while it still grows.
    #[allow(clippy::box_collection)]
    fallbacks: Box<Vec<StmtFn>>,
    /// What encloses the code being generated, innermost last.
    catch: Vec<Catch>,
    /// Parser states entered (for `ParserTimeout`).
    visited: Variable,
    fallback_sig: SigRef,
    apply_sig: SigRef,
    /// A block's own signature, for calling actions.
    block_sig: SigRef,
    /// Base pointers of the slots, header bytes and validity flags.
    vars: [Variable; 3],
    actions: &'c [Option<usize>],
    kept: &'c mut Vec<Kept>,
}

impl Lower<'_, '_, '_> {
    fn reload_bases(&mut self) {
        for (var, off) in self.vars.into_iter().zip([frame::SLOTS, frame::HDR, frame::VALID]) {
            let v = self.b.ins().load(self.ptr, mem(), self.frame, off);
            self.b.def_var(var, v);
        }
    }

    fn slots(&mut self) -> Value {
        self.b.use_var(self.vars[0])
    }
    fn hdr(&mut self) -> Value {
        self.b.use_var(self.vars[1])
    }
    fn valid(&mut self) -> Value {
        self.b.use_var(self.vars[2])
    }

    fn ret(&mut self, flow: i64) {
        let v = self.b.ins().iconst(types::I64, flow);
        self.b.ins().return_(&[v]);
    }

    fn k(&mut self, v: u64) -> Value {
        self.b.ins().iconst(types::I64, v as i64)
    }

    /// A sequence of statements; true if it always ends the block (the rest is unreachable).
    fn stmts(&mut self, stmts: &[Stmt]) -> bool {
        stmts.iter().any(|s| self.stmt(s))
    }

    fn stmt(&mut self, s: &Stmt) -> bool {
        match s {
            Stmt::Assign(place, e) => {
                if !self.place_ok(place) {
                    return self.fallback(s);
                }
                match self.expr(e) {
                    Some(v) => {
                        self.store(place, v);
                        false
                    }
                    None => self.fallback(s),
                }
            }
            &Stmt::SetValid(HdrRef::Static(id), valid) => {
                let (base, v) = (self.valid(), self.b.ins().iconst(types::I8, valid as i64));
                self.b.ins().store(mem(), v, base, id as i32);
                false
            }
            &Stmt::CopyHeader { dst: HdrRef::Static(d), src: HdrRef::Static(s) }
                if self.c.prog.headers[s as usize].bytes <= MAX_INLINE_COPY
                    && self.c.prog.headers[s as usize].varbit.is_none() =>
            {
                let headers = &self.c.prog.headers;
                let (from, to) =
                    (headers[s as usize].byte_off as i32, headers[d as usize].byte_off as i32);
                let hdr = self.hdr();
                self.copy_header(s, hdr, to, hdr, from);
                let valid = self.valid();
                let v = self.b.ins().load(types::I8, mem(), valid, s as i32);
                self.b.ins().store(mem(), v, valid, d as i32);
                false
            }
            Stmt::If(cond, then, els) => {
                let Some(cond) = self.expr(cond) else { return self.fallback(s) };
                let (t, e, end) =
                    (self.b.create_block(), self.b.create_block(), self.b.create_block());
                self.b.ins().brif(cond, t, &[], e, &[]);
                self.b.switch_to_block(t);
                let t_ends = self.stmts(then);
                if !t_ends {
                    self.b.ins().jump(end, &[]);
                }
                self.b.switch_to_block(e);
                let e_ends = self.stmts(els);
                if !e_ends {
                    self.b.ins().jump(end, &[]);
                }
                self.b.switch_to_block(end);
                t_ends && e_ends
            }
            Stmt::Block(body) => self.stmts(body),
            Stmt::Scope(body) => {
                let end = self.b.create_block();
                let catch = Catch { end, ret: true, exit: false, reject: false };
                self.enclosed(catch, |l| l.stmts(body));
                false
            }
            Stmt::Call { body, copy_out } => {
                // An exit from the body runs the copy-out (a second copy of it) and goes on
                // exiting; any other end of the body runs it and continues.
                let (exiting, end) = (self.b.create_block(), self.b.create_block());
                self.catch.push(Catch { end: exiting, ret: false, exit: true, reject: false });
                let body_ends = self.stmts(body);
                self.catch.pop();
                if !body_ends {
                    self.b.ins().jump(end, &[]);
                }
                self.b.switch_to_block(exiting);
                if !self.stmts(copy_out) {
                    self.leave(code::EXIT);
                }
                self.b.switch_to_block(end);
                self.stmts(copy_out)
            }
            Stmt::Exit => {
                self.leave(code::EXIT);
                true
            }
            Stmt::Return => {
                self.leave(code::RETURN);
                true
            }
            Stmt::Switch { on, cases, default } => {
                let Some(v) = self.expr(on) else { return self.fallback(s) };
                let end = self.b.create_block();
                let mut all_end = true;
                for (labels, body) in cases {
                    let mut hit = self.b.ins().iconst(types::I8, 0);
                    for &label in labels.iter().filter(|&&l| l <= u64::MAX as u128) {
                        let eq = self.b.ins().icmp_imm(IntCC::Equal, v, label as u64 as i64);
                        hit = self.b.ins().bor(hit, eq);
                    }
                    let (then, next) = (self.b.create_block(), self.b.create_block());
                    self.b.ins().brif(hit, then, &[], next, &[]);
                    self.b.switch_to_block(then);
                    if !self.stmts(body) {
                        all_end = false;
                        self.b.ins().jump(end, &[]);
                    }
                    self.b.switch_to_block(next);
                }
                if !self.stmts(default) {
                    all_end = false;
                    self.b.ins().jump(end, &[]);
                }
                self.b.switch_to_block(end);
                all_end
            }
            Stmt::Extern(Extern::Extract { hdr: HdrRef::Static(id), varbit_bits: None })
                if self.c.prog.headers[*id as usize].bytes <= MAX_INLINE_COPY =>
            {
                self.extract(*id);
                false
            }
            &Stmt::Extern(Extern::Need(bits)) => {
                self.need(bits.div_ceil(8));
                false
            }
            &Stmt::Apply { table, hit_slot, action_slot } => {
                match self.c.apply_site(table, hit_slot, action_slot) {
                    Some(site) if !site.writes_entries() => self.apply(table, site),
                    Some(_) => self.fallback(s),
                    None => false,
                }
            }
            Stmt::Extern(Extern::Emit(HdrRef::Static(id)))
                if self.c.prog.headers[*id as usize].bytes <= MAX_INLINE_COPY
                    && self.c.prog.headers[*id as usize].varbit.is_none() =>
            {
                self.emit(*id, s);
                false
            }
            Stmt::Extern(Extern::Checksum {
                verify,
                cond,
                data,
                sum,
                algo: HashAlgo::Csum16,
                with_payload: false,
            }) if self.place_ok(sum) && sum.width() <= 64 => {
                // Verification compares with the field as it is: read it first.
                let old = if *verify { self.load(sum).map(Some) } else { Some(None) };
                match (self.c.field_list(data).even_byte_runs(), self.expr(cond), old) {
                    (Some(runs), Some(cond), Some(old)) => {
                        self.csum16(old, cond, &runs, sum);
                        false
                    }
                    _ => self.fallback(s),
                }
            }
            Stmt::Extern(Extern::MarkToDrop) => {
                let std = self.c.std;
                let drop = self.k(DROP_PORT as u64);
                self.store_slot(std.egress_spec, drop);
                let zero = self.k(0);
                self.store_slot(std.mcast_grp, zero);
                false
            }
            _ => self.fallback(s),
        }
    }

    /// Call the statement's closure; a flow other than "next" leaves (or, for `return`
    /// inside a scope, jumps to the scope's end).
    fn fallback(&mut self, s: &Stmt) -> bool {
        let index = self.fallbacks.len();
        self.fallbacks.push(self.c.stmt(s));
        let callee = self.b.ins().iconst(self.ptr, run_fallback as *const () as i64);
        let list = self.b.ins().iconst(self.ptr, &*self.fallbacks as *const Vec<StmtFn> as i64);
        let index = self.b.ins().iconst(self.ptr, index as i64);
        let call =
            self.b.ins().call_indirect(self.fallback_sig, callee, &[self.frame, list, index]);
        let r = self.b.inst_results(call)[0];
        self.reload_bases();
        let (cont, leave) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(leave);
        self.b.ins().brif(r, leave, &[], cont, &[]);
        self.b.switch_to_block(leave);
        self.leave_dynamic(r);
        self.b.switch_to_block(cont);
        false
    }

    /// Generate `body` inside `catch`, then continue at its end.
    fn enclosed(&mut self, catch: Catch, body: impl FnOnce(&mut Self) -> bool) {
        self.catch.push(catch);
        let ends = body(self);
        self.catch.pop();
        if !ends {
            self.b.ins().jump(catch.end, &[]);
        }
        self.b.switch_to_block(catch.end);
    }

    /// Where flow `code` goes from here: the end of what catches it, else out of the function.
    fn catcher(&self, flow: i64) -> Option<Block> {
        let catches = |c: &Catch| match flow {
            code::RETURN => c.ret,
            code::EXIT => c.exit,
            code::REJECT => c.reject,
            _ => false,
        };
        self.catch.iter().rev().find(|c| catches(c)).map(|c| c.end)
    }

    /// Leave with a flow known here.
    fn leave(&mut self, flow: i64) {
        match self.catcher(flow) {
            Some(end) => {
                self.b.ins().jump(end, &[]);
            }
            None => self.ret(flow),
        }
    }

    /// Leave with a flow computed at run time (not "next").
    fn leave_dynamic(&mut self, r: Value) {
        for flow in [code::RETURN, code::EXIT, code::REJECT] {
            if let Some(end) = self.catcher(flow) {
                let other = self.b.create_block();
                let is = self.b.ins().icmp_imm(IntCC::Equal, r, flow);
                self.b.ins().brif(is, end, &[], other, &[]);
                self.b.switch_to_block(other);
            }
        }
        self.b.ins().return_(&[r]);
    }

    /// After ingress: return [`code::AFTER_INGRESS`] for a packet to be multicast or dropped
    /// (Rust's v1model does those), else set up the context as Rust's deparse does.
    fn stop_unless_unicast(&mut self) {
        let std = self.c.std;
        let slots = self.slots();
        let group = self.b.ins().load(types::I64, mem(), slots, (std.mcast_grp * 16) as i32);
        let spec = self.b.ins().uload32(mem(), slots, (std.egress_spec * 16) as i32);
        let dropped = self.b.ins().icmp_imm(IntCC::Equal, spec, DROP_PORT as i64);
        let grouped = self.b.ins().icmp_imm(IntCC::NotEqual, group, 0);
        let stop = self.b.ins().bor(dropped, grouped);
        let (leave, go) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(stop, leave, &[], go, &[]);
        self.b.switch_to_block(leave);
        self.ret(code::AFTER_INGRESS);
        self.b.switch_to_block(go);
        let payload = self.b.ins().load(self.ptr, mem(), self.frame, frame::PAYLOAD);
        self.b.ins().store(mem(), payload, self.frame, frame::CURSOR);
        let zero = self.k(0);
        self.b.ins().store(mem(), zero, self.frame, frame::ERROR);
    }

    /// A whole packet starts from nothing, as `Pipeline::reset` and `ingress_ctx` leave it:
    /// metadata zero, every header invalid, no output, the cursor at the start; then the
    /// standard metadata of an arriving packet, from the frame.
    fn enter(&mut self) {
        let (prog, std) = (self.c.prog, self.c.std);
        let slots = self.slots();
        let zero = self.k(0);
        // One 16-byte store per slot: inline stores of a size known here cost less than a
        // call to `memset` with the size in a register.
        let zeros = self.b.ins().splat(types::I64X2, zero);
        for slot in 0..prog.reset_slots {
            self.b.ins().store(mem(), zeros, slots, (slot * 16) as i32);
        }
        let valid = self.valid();
        let flags = prog.headers.len();
        let mut at = 0;
        while at < flags {
            let ty = match flags - at {
                8.. => types::I64,
                4..=7 => types::I32,
                2 | 3 => types::I16,
                _ => types::I8,
            };
            let z = self.b.ins().iconst(ty, 0);
            self.b.ins().store(mem(), z, valid, at as i32);
            at += ty.bytes() as usize;
        }
        for (field, slot) in [
            (frame::IN_PORT, std.ingress_port),
            (frame::INSTANCE_TYPE, std.instance_type),
            (frame::PKT_LEN, std.packet_length),
            (frame::TIMESTAMP, std.ingress_global_timestamp),
        ] {
            let v = self.b.ins().load(types::I64, mem(), self.frame, field);
            self.store_slot(slot, v);
        }
        for field in [frame::CURSOR, frame::PAYLOAD, frame::ERROR, frame::OUT_LEN] {
            self.b.ins().store(mem(), zero, self.frame, field);
        }
    }

    /// Set the parser error to the program's code for `name`.
    fn set_error(&mut self, name: &str) {
        let error = self.k(self.c.error_code(name) as u64);
        self.b.ins().store(mem(), error, self.frame, frame::ERROR);
    }

    /// Controls in turn, each run to its end (`exit` and `return` end only it); with `clear`,
    /// the deparser's output is emptied before the last.
    fn controls(&mut self, controls: &[&[Stmt]], clear: bool) -> bool {
        for (i, body) in controls.iter().enumerate() {
            if clear && i + 1 == controls.len() {
                let zero = self.k(0);
                self.b.ins().store(mem(), zero, self.frame, frame::OUT_LEN);
            }
            let end = self.b.create_block();
            self.enclosed(Catch { end, ret: true, exit: true, reject: false }, |l| l.stmts(body));
        }
        false
    }

    /// A deparser that only emits fixed headers writes them straight into the packet, in
    /// front of the payload, when the frame allows it ([`frame::DST`]) and there is room:
    /// the function returns [`code::PLACED`] with their length in [`frame::PLACED`].
    /// Otherwise (and for any other deparser) the code after this builds `st.out` as usual.
    fn deparse_in_place(&mut self, deparser: &[Stmt]) {
        let mut emits = Vec::new();
        if !only_emits(deparser, &mut emits)
            || emits.iter().any(|&id| {
                let h = &self.c.prog.headers[id as usize];
                h.bytes > MAX_INLINE_COPY || h.varbit.is_some()
            })
        {
            return;
        }
        let (check, place, usual) =
            (self.b.create_block(), self.b.create_block(), self.b.create_block());
        let dst = self.b.ins().load(self.ptr, mem(), self.frame, frame::DST);
        self.b.ins().brif(dst, check, &[], usual, &[]);
        self.b.switch_to_block(check);
        let valid = self.valid();
        let mut total = self.k(0);
        for &id in &emits {
            let v = self.b.ins().uload8(types::I64, mem(), valid, id as i32);
            let n = self.b.ins().imul_imm(v, self.c.prog.headers[id as usize].bytes as i64);
            total = self.b.ins().iadd(total, n);
        }
        let payload = self.b.ins().load(self.ptr, mem(), self.frame, frame::PAYLOAD);
        let headroom = self.b.ins().load(self.ptr, mem(), self.frame, frame::HEADROOM);
        let room = self.b.ins().iadd(payload, headroom);
        let fits = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, total, room);
        self.b.ins().brif(fits, place, &[], usual, &[]);
        self.b.switch_to_block(place);
        let start = self.b.ins().isub(payload, total);
        let mut at = self.b.ins().iadd(dst, start);
        for &id in &emits {
            let h = &self.c.prog.headers[id as usize];
            let (off, n) = (h.byte_off as i32, h.bytes);
            let (copy, next) = (self.b.create_block(), self.b.create_block());
            self.b.append_block_param(next, self.ptr);
            let is_valid = self.b.ins().uload8(types::I64, mem(), valid, id as i32);
            self.b.ins().brif(is_valid, copy, &[], next, &[at.into()]);
            self.b.switch_to_block(copy);
            let hdr = self.hdr();
            self.copy_header(id, at, 0, hdr, off);
            let after = self.b.ins().iadd_imm(at, n as i64);
            self.b.ins().jump(next, &[after.into()]);
            self.b.switch_to_block(next);
            at = self.b.block_params(next)[0];
        }
        self.b.ins().store(mem(), total, self.frame, frame::PLACED);
        self.ret(code::PLACED);
        self.b.switch_to_block(usual);
    }

    /// `emit` of a fixed header: appended if valid and there is room, else the closure
    /// (which grows the output).
    fn emit(&mut self, id: u32, s: &Stmt) {
        let h = &self.c.prog.headers[id as usize];
        let (off, n) = (h.byte_off as i32, h.bytes);
        let valid = self.valid();
        let is_valid = self.b.ins().uload8(types::I64, mem(), valid, id as i32);
        let (room, full, end) =
            (self.b.create_block(), self.b.create_block(), self.b.create_block());
        let check = self.b.create_block();
        self.b.ins().brif(is_valid, check, &[], end, &[]);
        self.b.switch_to_block(check);
        let len = self.b.ins().load(self.ptr, mem(), self.frame, frame::OUT_LEN);
        let cap = self.b.ins().load(self.ptr, mem(), self.frame, frame::OUT_CAP);
        let new_len = self.b.ins().iadd_imm(len, n as i64);
        let fits = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, new_len, cap);
        self.b.set_cold_block(full);
        self.b.ins().brif(fits, room, &[], full, &[]);
        self.b.switch_to_block(room);
        let out = self.b.ins().load(self.ptr, mem(), self.frame, frame::OUT);
        let dst = self.b.ins().iadd(out, len);
        let hdr = self.hdr();
        self.copy_header(id, dst, 0, hdr, off);
        self.b.ins().store(mem(), new_len, self.frame, frame::OUT_LEN);
        self.b.ins().jump(end, &[]);
        self.b.switch_to_block(full);
        self.fallback(s);
        self.b.ins().jump(end, &[]);
        self.b.switch_to_block(end);
    }

    /// The Internet checksum of header byte runs (every run but the last of even length),
    /// summed piece by piece and folded; the same value `ones_complement_sum` computes.
    /// With `verify` (the field's current value), a mismatch sets `checksum_error`; without,
    /// the sum is stored in `sum`.
    fn csum16(&mut self, verify: Option<Value>, cond: Value, runs: &[(usize, usize)], sum: &Place) {
        let (go, end) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(cond, go, &[], end, &[]);
        self.b.switch_to_block(go);
        let hdr = self.hdr();
        let mut acc = self.k(0);
        // Modulo 0xffff, 2^16 is 1: a big-endian piece adds as its value when it ends at an
        // even distance from the run's start (its last byte is a word's low byte), else as
        // its value times 2^8. Pieces follow the header's granules (see `granule`).
        for &(from, len) in runs {
            for (at, n) in self.pieces_of(from as u32, len as u32) {
                let mut v = self.load_piece(hdr, at, n);
                if n == 8 {
                    let (hi, lo) =
                        (self.b.ins().ushr_imm(v, 32), self.b.ins().band_imm(v, 0xffff_ffff));
                    v = self.b.ins().iadd(hi, lo);
                }
                if (at - from as u32 + n) % 2 == 1 {
                    v = self.b.ins().ishl_imm(v, 8);
                }
                acc = self.b.ins().iadd(acc, v);
            }
        }
        // Fewer than 2^16 pieces of under 2^41: four folds bring the sum under 2^16.
        for _ in 0..4 {
            let lo = self.b.ins().band_imm(acc, 0xffff);
            let hi = self.b.ins().ushr_imm(acc, 16);
            acc = self.b.ins().iadd(lo, hi);
        }
        let v = self.b.ins().bnot(acc);
        let v = self.b.ins().band_imm(v, 0xffff);
        if let Some(old) = verify {
            let (bad, next) = (self.b.create_block(), self.b.create_block());
            let differs = self.b.ins().icmp(IntCC::NotEqual, old, v);
            self.b.ins().brif(differs, bad, &[], next, &[]);
            self.b.switch_to_block(bad);
            let one = self.k(1);
            self.store_slot(self.c.std.checksum_error, one);
            self.b.ins().jump(next, &[]);
            self.b.switch_to_block(next);
        } else {
            let v = self.trunc(v, sum.width());
            self.store(sum, v);
        }
        self.b.ins().jump(end, &[]);
        self.b.switch_to_block(end);
    }

    /// Leave with `PacketTooShort` unless `n` more bytes are left; returns the cursor and the
    /// cursor `n` bytes on.
    fn need(&mut self, n: u32) -> (Value, Value) {
        let cursor = self.b.ins().load(self.ptr, mem(), self.frame, frame::CURSOR);
        let end = self.b.ins().iadd_imm(cursor, n as i64);
        let len = self.b.ins().load(self.ptr, mem(), self.frame, frame::PKT_LEN);
        let short = self.b.ins().icmp(IntCC::UnsignedGreaterThan, end, len);
        let (fail, ok) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(fail);
        self.b.ins().brif(short, fail, &[], ok, &[]);
        self.b.switch_to_block(fail);
        self.set_error("PacketTooShort");
        self.leave(code::REJECT);
        self.b.switch_to_block(ok);
        (cursor, end)
    }

    /// `extract` of a fixed header: bounds check, copy, valid, advance.
    fn extract(&mut self, id: u32) {
        let h = &self.c.prog.headers[id as usize];
        let (off, n) = (h.byte_off as i32, h.bytes);
        let (cursor, end) = self.need(n);
        let pkt = self.b.ins().load(self.ptr, mem(), self.frame, frame::PKT);
        let src = self.b.ins().iadd(pkt, cursor);
        let hdr = self.hdr();
        self.copy_header(id, hdr, off, src, 0);
        let (valid, one) = (self.valid(), self.b.ins().iconst(types::I8, 1));
        self.b.ins().store(mem(), one, valid, id as i32);
        self.b.ins().store(mem(), end, self.frame, frame::CURSOR);
    }

    fn store_slot(&mut self, slot: usize, v: Value) {
        let (base, zero) = (self.slots(), self.k(0));
        let off = (slot * 16) as i32;
        self.b.ins().store(mem(), v, base, off);
        self.b.ins().store(mem(), zero, base, off + 8);
    }
}

/// Whether `stmts` only emit fixed headers (in nested blocks too); their ids go to `out`.
fn only_emits(stmts: &[Stmt], out: &mut Vec<u32>) -> bool {
    stmts.iter().all(|s| match s {
        Stmt::Extern(Extern::Emit(HdrRef::Static(id))) => {
            out.push(*id);
            true
        }
        Stmt::Block(b) | Stmt::Scope(b) => only_emits(b, out),
        Stmt::Call { body, copy_out } => only_emits(body, out) && only_emits(copy_out, out),
        _ => false,
    })
}
