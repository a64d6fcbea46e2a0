//! The parser as native code: states are blocks, transitions jumps.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder, Value};

use super::{frame, mem, Catch, Lower};
use crate::ir::{KeyMatch, Target, Transition};

impl Lower<'_, '_, '_> {
    /// The whole parser as one state machine: each state a block, transitions jumps. At the
    /// end the payload starts at the cursor and `parser_error` holds the error, as
    /// `Pipeline::parse` leaves them. False if a `select` key cannot be lowered.
    pub(super) fn parser(&mut self) -> bool {
        let prog = self.c.prog;
        let done = self.b.create_block();
        let states: Vec<Block> = prog.states.iter().map(|_| self.b.create_block()).collect();
        let zero = self.k(0);
        self.b.def_var(self.visited, zero);
        match states.get(prog.start_state as usize) {
            Some(&start) => self.b.ins().jump(start, &[]),
            None => self.b.ins().jump(done, &[]),
        };
        let catch = Catch { end: done, ret: false, exit: false, reject: true };
        self.catch.push(catch);
        for (state, &block) in prog.states.iter().zip(&states) {
            self.b.switch_to_block(block);
            // A parser loop that runs too long ends with ParserTimeout.
            let n = self.b.use_var(self.visited);
            let n = self.b.ins().iadd_imm(n, 1);
            self.b.def_var(self.visited, n);
            let (timeout, body) = (self.b.create_block(), self.b.create_block());
            self.b.set_cold_block(timeout);
            let over = self.b.ins().icmp_imm(
                IntCC::UnsignedGreaterThan,
                n,
                crate::exec::MAX_PARSER_STATES as i64,
            );
            self.b.ins().brif(over, timeout, &[], body, &[]);
            self.b.switch_to_block(timeout);
            self.set_error("ParserTimeout");
            self.b.ins().jump(done, &[]);
            self.b.switch_to_block(body);
            if self.stmts(&state.body) {
                continue;
            }
            let target = |t: &Target| match *t {
                Target::State(i) => states.get(i as usize).copied().unwrap_or(done),
                Target::Accept | Target::Reject => done,
            };
            match &state.transition {
                Transition::Accept | Transition::Reject => {
                    self.b.ins().jump(done, &[]);
                }
                Transition::Goto(i) => {
                    let to = target(&Target::State(*i));
                    self.b.ins().jump(to, &[]);
                }
                // Value sets are looked up by the closures.
                Transition::ValueSet { .. } => {
                    self.catch.pop();
                    return false;
                }
                Transition::Select { keys, cases } => {
                    let mut values = Vec::with_capacity(keys.len());
                    for k in keys {
                        match self.expr(&k.value) {
                            Some(v) => values.push(v),
                            None => {
                                self.catch.pop();
                                return false;
                            }
                        }
                    }
                    for (matches, to) in cases {
                        let mut hit = self.b.ins().iconst(types::I8, 1);
                        for (m, &v) in matches.iter().zip(&values) {
                            let one = self.key_match(m, v);
                            hit = self.b.ins().band(hit, one);
                        }
                        let next = self.b.create_block();
                        self.b.ins().brif(hit, target(to), &[], next, &[]);
                        self.b.switch_to_block(next);
                    }
                    self.set_error("NoMatch");
                    self.b.ins().jump(done, &[]);
                }
            }
        }
        self.catch.pop();
        self.b.switch_to_block(done);
        let cursor = self.b.ins().load(self.ptr, mem(), self.frame, frame::CURSOR);
        self.b.ins().store(mem(), cursor, self.frame, frame::PAYLOAD);
        let error = self.b.ins().load(types::I64, mem(), self.frame, frame::ERROR);
        self.store_slot(self.c.std.parser_error, error);
        true
    }

    /// Whether select key `v` (at most 64 bits) matches `m`, as an `i8` flag.
    pub(super) fn key_match(&mut self, m: &KeyMatch, v: Value) -> Value {
        let never = |l: &mut Self| l.b.ins().iconst(types::I8, 0);
        match *m {
            KeyMatch::Mask { value, mask } => {
                let (value, mask) = (value & mask, mask & u64::MAX as u128);
                if value > u64::MAX as u128 {
                    return never(self);
                }
                let masked = self.b.ins().band_imm(v, mask as u64 as i64);
                self.b.ins().icmp_imm(IntCC::Equal, masked, value as u64 as i64)
            }
            KeyMatch::Prefix { value, .. } if value > u64::MAX as u128 => never(self),
            KeyMatch::Prefix { value, .. } => {
                self.b.ins().icmp_imm(IntCC::Equal, v, value as u64 as i64)
            }
            KeyMatch::Range { lo, .. } if lo > u64::MAX as u128 => never(self),
            KeyMatch::Range { lo, hi } => {
                let hi = hi.min(u64::MAX as u128) as u64;
                let above =
                    self.b.ins().icmp_imm(IntCC::UnsignedGreaterThanOrEqual, v, lo as u64 as i64);
                let below = self.b.ins().icmp_imm(IntCC::UnsignedLessThanOrEqual, v, hi as i64);
                self.b.ins().band(above, below)
            }
        }
    }

    /// `lookahead<bit<width>>()`: the next bits of the packet, or 0 past its end.
    pub(super) fn lookahead(&mut self, width: u32) -> Value {
        let bytes = width.div_ceil(8);
        let cursor = self.b.ins().load(self.ptr, mem(), self.frame, frame::CURSOR);
        let len = self.b.ins().load(self.ptr, mem(), self.frame, frame::PKT_LEN);
        let end = self.b.ins().iadd_imm(cursor, bytes as i64);
        let (read, short, done) =
            (self.b.create_block(), self.b.create_block(), self.b.create_block());
        self.b.append_block_param(done, types::I64);
        let fits = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, end, len);
        self.b.ins().brif(fits, read, &[], short, &[]);
        self.b.switch_to_block(read);
        let pkt = self.b.ins().load(self.ptr, mem(), self.frame, frame::PKT);
        let at = self.b.ins().iadd(pkt, cursor);
        let mut v = self.k(0);
        for i in 0..bytes {
            let byte = self.b.ins().uload8(types::I64, mem(), at, i as i32);
            let shifted = self.b.ins().ishl_imm(v, 8);
            v = self.b.ins().bor(shifted, byte);
        }
        let v = self.b.ins().ushr_imm(v, (bytes * 8 - width) as i64);
        self.b.ins().jump(done, &[v.into()]);
        self.b.switch_to_block(short);
        let zero = self.k(0);
        self.b.ins().jump(done, &[zero.into()]);
        self.b.switch_to_block(done);
        self.b.block_params(done)[0]
    }
}
