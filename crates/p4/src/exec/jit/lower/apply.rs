//! `t.apply()` in native code.
//!
//! Where the table allows it ([`ApplySite::native`]: keyless or LPM over at most 8 key bytes),
//! the whole apply is generated code: the key is built in a register, the LPM levels are walked
//! with plain loads, the entry is read by the seqlock protocol of `hotplane_tables::raw`, the
//! hit is counted, the parameters are bound into their slots, and the action's native code is
//! called with this frame. Whatever that path cannot settle (an entry held by a worker's write,
//! a read that raced one, an action id the program does not know) and every other table go
//! through [`apply_bind`] in Rust, which does the same from scratch and may spin.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AtomicRmwOp, Block, InstBuilder, MemFlags, Value};

use super::{code, mem, Kept, Lower};
use crate::exec::jit::apply_bind;
use crate::exec::table::{ApplySite, NativeLookup, NativeSite};
use hotplane_tables::raw::{
    ACTION_MASK, CTL_CURRENT, CTL_LOCKED, LEVEL_GROUP, LEVEL_INDEX_MASK, LEVEL_VALID,
};

/// Table memory: aligned words, always mapped while the table lives.
fn table_mem() -> MemFlags {
    MemFlags::trusted()
}

impl Lower<'_, '_, '_> {
    /// `t.apply()` of a table whose actions do not write its entries.
    pub(super) fn apply(&mut self, table: u32, site: ApplySite) -> bool {
        let native = site.native();
        let mut actions: Vec<u32> = site.action_indices().to_vec();
        actions.sort_unstable();
        actions.dedup();
        let site = Box::new(site);
        let site_at = &*site as *const ApplySite as i64;
        self.kept.push(Kept::Apply(site));
        // One block per action that has code, entered with the frame's bases current.
        let runs: Vec<(u32, Block, usize)> = actions
            .iter()
            .filter_map(|&a| match self.actions.get(a as usize) {
                Some(&Some(entry)) => Some((a, self.b.create_block(), entry)),
                _ => None,
            })
            .collect();
        let (slow, end) = (self.b.create_block(), self.b.create_block());
        match native.as_ref().and_then(|n| self.entry_of(table, n).map(|e| (n, e))) {
            Some((n, (body, hit))) => {
                // Rust is then only for the rare cases.
                self.b.set_cold_block(slow);
                self.read_entry(n, body, hit, &runs, slow, end);
            }
            None => {
                self.b.ins().jump(slow, &[]);
            }
        }

        // Rust: look up, bind, and say which action to run.
        self.b.switch_to_block(slow);
        let callee = self.b.ins().iconst(self.ptr, apply_bind as *const () as i64);
        let site = self.b.ins().iconst(self.ptr, site_at);
        let call = self.b.ins().call_indirect(self.apply_sig, callee, &[self.frame, site]);
        let chosen = self.b.inst_results(call)[0];
        self.reload_bases();
        let (panicked, go) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(panicked);
        let failed = self.b.ins().icmp_imm(IntCC::Equal, chosen, -2);
        self.b.ins().brif(failed, panicked, &[], go, &[]);
        self.b.switch_to_block(panicked);
        self.ret(code::PANICKED);
        self.b.switch_to_block(go);
        for &(a, run, _) in &runs {
            let next = self.b.create_block();
            let is = self.b.ins().icmp_imm(IntCC::Equal, chosen, a as i64);
            self.b.ins().brif(is, run, &[], next, &[]);
            self.b.switch_to_block(next);
        }
        self.b.ins().jump(end, &[]);

        for &(_, run, entry) in &runs {
            self.b.switch_to_block(run);
            let callee = self.b.ins().iconst(self.ptr, entry as i64);
            let call = self.b.ins().call_indirect(self.block_sig, callee, &[self.frame]);
            let r = self.b.inst_results(call)[0];
            self.reload_bases();
            // `exit` in the action ends the control; a panic goes up; the rest carry on.
            let leave = self.b.create_block();
            self.b.set_cold_block(leave);
            let stop = self.b.ins().icmp_imm(IntCC::UnsignedGreaterThanOrEqual, r, code::EXIT);
            self.b.ins().brif(stop, leave, &[], end, &[]);
            self.b.switch_to_block(leave);
            self.leave_dynamic(r);
        }
        self.b.switch_to_block(end);
        false
    }

    /// The packed key as a big-endian number of `key_bytes` bytes, if every key field can be
    /// evaluated natively.
    fn key(&mut self, table: u32, n: &NativeSite) -> Option<Value> {
        let exprs = &self.c.prog.tables.get(table as usize)?.keys;
        if exprs.len() != n.keys.len() || n.key_bytes > 8 {
            return None;
        }
        let mut key = self.k(0);
        for (k, &(at, bytes, width)) in exprs.iter().zip(&n.keys) {
            if width > 64 || at + bytes > n.key_bytes {
                return None;
            }
            let v = self.expr(&k.value)?;
            let v = self.trunc(v, width);
            // Left-aligned in its bytes, which sit `at` bytes from the key's start.
            let shift = (bytes * 8) as u32 - width + ((n.key_bytes - at - bytes) * 8) as u32;
            let v = if shift > 0 { self.b.ins().ishl_imm(v, shift as i64) } else { v };
            key = self.b.ins().bor(key, v);
        }
        Some(key)
    }

    /// The address of the entry body the packet selects and whether it was a hit (1) or the
    /// default entry (0); `None` if the key cannot be built natively (nothing is emitted that
    /// has an effect).
    fn entry_of(&mut self, table: u32, n: &NativeSite) -> Option<(Value, Value)> {
        let default = self.b.ins().iconst(self.ptr, n.default.body_at as i64);
        let lpm = match &n.lookup {
            NativeLookup::Keyless => return Some((default, self.k(0))),
            NativeLookup::Lpm(lpm) => *lpm,
        };
        let key = self.key(table, n)?;
        let key_bits = (lpm.key_bytes * 8) as i64;
        let first_bytes = lpm.first_bits as usize / 8;
        let index = self.b.ins().ushr_imm(key, key_bits - lpm.first_bits as i64);
        let first = self.b.ins().iconst(self.ptr, lpm.first as i64);
        let at = self.b.ins().ishl_imm(index, 2);
        let at = self.b.ins().iadd(first, at);
        let mut level = self.b.ins().uload32(table_mem(), at, 0);
        // Each further key byte is a level, taken while the entry points at a group.
        for byte in first_bytes..lpm.key_bytes {
            let (deeper, done) = (self.b.create_block(), self.b.create_block());
            self.b.append_block_param(done, types::I64);
            let is_group = self.b.ins().band_imm(level, LEVEL_GROUP as i64);
            self.b.ins().brif(is_group, deeper, &[], done, &[level.into()]);
            self.b.switch_to_block(deeper);
            let group = self.b.ins().band_imm(level, LEVEL_INDEX_MASK as i64);
            let group = self.b.ins().ishl_imm(group, 8);
            let next = self.b.ins().ushr_imm(key, ((lpm.key_bytes - 1 - byte) * 8) as i64);
            let next = self.b.ins().band_imm(next, 0xff);
            let index = self.b.ins().bor(group, next);
            let groups = self.b.ins().iconst(self.ptr, lpm.groups as i64);
            let at = self.b.ins().ishl_imm(index, 2);
            let at = self.b.ins().iadd(groups, at);
            let deeper_level = self.b.ins().uload32(table_mem(), at, 0);
            self.b.ins().jump(done, &[deeper_level.into()]);
            self.b.switch_to_block(done);
            level = self.b.block_params(done)[0];
        }
        let kind = self.b.ins().band_imm(level, (LEVEL_VALID | LEVEL_GROUP) as i64);
        let valid = self.k(LEVEL_VALID as u64);
        let hit = self.bool(IntCC::Equal, kind, valid);
        let index = self.b.ins().band_imm(level, LEVEL_INDEX_MASK as i64);
        let offset = self.b.ins().imul_imm(index, (lpm.stride * 8) as i64);
        let entries = self.b.ins().iconst(self.ptr, lpm.entries as i64);
        let found = self.b.ins().iadd(entries, offset);
        Some((self.b.ins().select(hit, found, default), hit))
    }

    /// Read the entry at `body` and run its action; on anything unusual, go to `slow`.
    fn read_entry(
        &mut self,
        n: &NativeSite,
        body: Value,
        hit: Value,
        runs: &[(u32, Block, usize)],
        slow: Block,
        end: Block,
    ) {
        let ctl = self.b.ins().atomic_load(types::I64, table_mem(), body);
        let locked = self.b.ins().band_imm(ctl, CTL_LOCKED as i64);
        let read = self.b.create_block();
        self.b.ins().brif(locked, slow, &[], read, &[]);
        self.b.switch_to_block(read);
        let copy = self.b.ins().band_imm(ctl, CTL_CURRENT as i64);
        let copy = self.b.ins().ushr_imm(copy, CTL_CURRENT.trailing_zeros() as i64);
        let copy_bytes = (n.default.body.copy_at(1) - n.default.body.copy_at(0)) * 8;
        let copy_off = self.b.ins().imul_imm(copy, copy_bytes as i64);
        let header = self.b.ins().iadd_imm(body, (n.default.body.copy_at(0) * 8) as i64);
        let header = self.b.ins().iadd(header, copy_off);
        let word = self.b.ins().load(types::I64, table_mem(), header, 0);
        let action_id = self.b.ins().band_imm(word, ACTION_MASK as i64);
        for (id, (action, params)) in n.actions.iter().enumerate() {
            let (this, next) = (self.b.create_block(), self.b.create_block());
            let is = self.b.ins().icmp_imm(IntCC::Equal, action_id, id as i64);
            self.b.ins().brif(is, this, &[], next, &[]);
            self.b.switch_to_block(this);
            for &(slot, w, words) in params {
                let lo = self.b.ins().load(types::I64, table_mem(), header, (8 + w * 8) as i32);
                let hi = if words > 1 {
                    self.b.ins().load(types::I64, table_mem(), header, (16 + w * 8) as i32)
                } else {
                    self.k(0)
                };
                let base = self.slots();
                self.b.ins().store(mem(), lo, base, (slot * 16) as i32);
                self.b.ins().store(mem(), hi, base, (slot * 16 + 8) as i32);
            }
            // The data words are the current copy's only if `ctl` did not change meanwhile
            // (x86 keeps loads in order; elsewhere the fence does).
            if !cfg!(target_arch = "x86_64") {
                self.b.ins().fence();
            }
            let again = self.b.ins().atomic_load(types::I64, table_mem(), body);
            let same = self.b.ins().icmp(IntCC::Equal, again, ctl);
            let settled = self.b.create_block();
            self.b.ins().brif(same, settled, &[], slow, &[]);
            self.b.switch_to_block(settled);
            if let Some(at) = n.counters_at {
                let one = self.k(1);
                let packets = self.b.ins().iadd_imm(body, (at * 8) as i64);
                self.b.ins().atomic_rmw(types::I64, table_mem(), AtomicRmwOp::Add, packets, one);
                let len = self.b.ins().load(self.ptr, mem(), self.frame, super::frame::PKT_LEN);
                let bytes = self.b.ins().iadd_imm(body, (at * 8 + 8) as i64);
                self.b.ins().atomic_rmw(types::I64, table_mem(), AtomicRmwOp::Add, bytes, len);
            }
            if let Some(s) = n.hit_slot {
                self.store_slot(s, hit);
            }
            if let Some(s) = n.action_slot {
                let a = self.k(*action as u64);
                self.store_slot(s, a);
            }
            match runs.iter().find(|(a, _, _)| a == action) {
                Some(&(_, run, _)) => self.b.ins().jump(run, &[]),
                None => self.b.ins().jump(end, &[]),
            };
            self.b.switch_to_block(next);
        }
        // An action id the program does not know: Rust decides what that means.
        self.b.ins().jump(slow, &[]);
    }
}
