//! The virtual processor (VPU): runs a validated [`Program`] over one packet's scratchpad, the
//! read-only environment and network-header banks, and the ESS entries of its declared keys
//! (`docs/wasp.md` §3, §4).
//!
//! Bounded by construction: the loop advances the step index on every iteration and jumps only
//! forward (the decoder guarantees it), so a run takes at most `program.len() <= code_len`
//! steps; the store is read at most once per key slot and written at most once per key slot at
//! commit. All state is local to one run; the scratchpad and store writes reach the packet and
//! the store only when the run ends with a fate (or falls off the end), never after a fault.

use std::hash::BuildHasher;

use crate::decode::{Program, Step};
use crate::error::Fault;
use crate::ess::{Admission, BankBytes, Ess, StoreKey, Txn, BANK_LEN};
use crate::isa::{AluOp, Bank, Insn, JumpWhen, Reg, Width};
use crate::wire::{Scope, MAX_KEYS, MAX_SCRATCH};

/// Bytes of the environment bank (nine 64-bit words).
pub const ENV_LEN: usize = 72;
/// Bytes of the network-header bank (the first 64 bytes from the IP header, zero-padded).
pub const NET_LEN: usize = 64;

/// What the node tells a program about itself and the packet (read-only bank `e`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Env {
    pub node_id: u64,
    /// Node address; an IPv4 address is written IPv4-mapped (`::ffff:a.b.c.d`).
    pub node_addr: [u8; 16],
    pub in_port: u64,
    /// `u64::MAX` while the forwarding decision is not known (input filter).
    pub out_port: u64,
    /// Node clock, ns; also the clock of the store.
    pub time_ns: u64,
    pub queue_depth: u64,
    pub packet_len: u64,
    pub in_profile: bool,
}

/// A packet's rights over the store (`docs/wasp.md` §8), decided before its program runs:
/// [`crate::filter::process`] derives them from the shim (scopes, a verified admin trailer) and
/// the IP header (the aggregate). The default is what [`run`] grants: the public scope, no
/// admin rights, no quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Access {
    /// The scope of each key slot. The keys handed to [`run`] for private slots must already
    /// be derived with [`Ess::private_key`] (the filter does it).
    pub scopes: [Scope; MAX_KEYS],
    /// The packet is an authenticated admin packet: it may write protected entries, its own
    /// scratchpad is read-only (the MAC covers it), bit 2 of `e.flags` is set, and its
    /// creations are outside quotas.
    pub admin: bool,
    /// The aggregate the run's creations count against, with its quota (`None`: no quota).
    pub admission: Option<Admission>,
}

impl Access {
    /// The slot's entry is read-only for this packet (protected, not admin).
    pub fn read_only(&self, slot: usize) -> bool {
        !self.admin && self.scopes.get(slot) == Some(&Scope::Protected)
    }
}

impl Env {
    /// The IPv4-mapped form of an IPv4 node address.
    pub fn ipv4_mapped(addr: [u8; 4]) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[10] = 0xff;
        out[11] = 0xff;
        out[12..].copy_from_slice(&addr);
        out
    }

    /// The bank as the program sees it (word layout in `docs/wasp.md` §3).
    pub fn to_bank(&self) -> [u8; ENV_LEN] {
        let mut bank = [0u8; ENV_LEN];
        let words = [
            self.node_id,
            0,
            0,
            self.in_port,
            self.out_port,
            self.time_ns,
            self.queue_depth,
            self.packet_len,
            u64::from(self.in_profile),
        ];
        for (i, word) in words.iter().enumerate() {
            bank[8 * i..8 * i + 8].copy_from_slice(&word.to_be_bytes());
        }
        bank[8..24].copy_from_slice(&self.node_addr);
        bank
    }
}

/// Assembler names of the environment words, by index.
pub const ENV_WORDS: [&str; 9] =
    ["node_id", "addr_hi", "addr_lo", "in_port", "out_port", "time", "queue", "len", "flags"];

/// What the program decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Fwd,
    Drop,
    /// Send back to the source (the stage swaps the addresses and sets RETURNED).
    Return,
}

/// The result of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The fate chosen (`Fwd` when the code ran off its end, or faulted).
    pub fate: Fate,
    /// The fault that stopped the run and the code byte of the faulting instruction.
    pub fault: Option<(Fault, u8)>,
    /// Instructions executed (never above the code length).
    pub steps: usize,
    /// The scratchpad was written (and, without a fault, copied back to the packet).
    pub scratch_dirty: bool,
    /// Entries read from / written to the store (each at most once per key slot).
    pub store_reads: usize,
    pub store_writes: usize,
    /// Writes the store refused at commit (full or probe limit).
    pub store_refused: usize,
}

#[derive(Clone, Copy)]
struct KeySlot {
    bank: BankBytes,
    loaded: bool,
    present: bool,
    dirty: bool,
}

struct Machine<'e, S: BuildHasher> {
    a: u64,
    b: u64,
    c: bool,
    /// The packet's scratchpad as it arrived: read until the first write.
    scratch_in: &'e [u8],
    /// The run's copy, made at the first write (copy on write: most programs never write
    /// their scratchpad, and a fault must leave the packet's as it was).
    scratch: [u8; MAX_SCRATCH],
    scratch_len: usize,
    scratch_dirty: bool,
    /// The environment bank, built on first use (most programs never read it).
    env_bank: Option<[u8; ENV_LEN]>,
    env: &'e Env,
    /// Bits the run adds to `e.flags`: 1 RETURNED on arrival, 2 admin.
    env_flags: u8,
    net: &'e [u8],
    slots: [KeySlot; MAX_KEYS],
    /// Slot holding each slot's key first: two slots naming one entry share one copy.
    canonical: [usize; MAX_KEYS],
    mapped: Option<usize>,
    keys: [StoreKey; MAX_KEYS],
    key_count: usize,
    access: Access,
    ess: &'e Ess<S>,
    txn: Option<Txn<'e, S>>,
    now: u64,
    store_reads: usize,
}

/// A big-endian value of 1, 2, 4 or 8 bytes (the access widths), with a fixed-size load.
#[inline(always)]
fn read_be(bytes: &[u8]) -> u64 {
    match *bytes {
        [a] => u64::from(a),
        [a, b] => u64::from(u16::from_be_bytes([a, b])),
        [a, b, c, d] => u64::from(u32::from_be_bytes([a, b, c, d])),
        [a, b, c, d, e, f, g, h] => u64::from_be_bytes([a, b, c, d, e, f, g, h]),
        _ => bytes.iter().fold(0u64, |acc, &byte| (acc << 8) | u64::from(byte)),
    }
}

#[inline(always)]
fn write_be(bytes: &mut [u8], value: u64) {
    match bytes.len() {
        1 => bytes[0] = value as u8,
        2 => bytes.copy_from_slice(&(value as u16).to_be_bytes()),
        4 => bytes.copy_from_slice(&(value as u32).to_be_bytes()),
        8 => bytes.copy_from_slice(&value.to_be_bytes()),
        len => {
            for (i, byte) in bytes.iter_mut().enumerate() {
                *byte = (value >> (8 * (len - 1 - i))) as u8;
            }
        }
    }
}

/// Byte range of `index` (in units of `width`) inside a bank of `bank_len` bytes.
fn range(index: u64, width: Width, bank_len: usize) -> Result<std::ops::Range<usize>, Fault> {
    let size = width.bytes() as u64;
    let start = index.checked_mul(size).ok_or(Fault::OutOfBounds)?;
    let end = start.checked_add(size).ok_or(Fault::OutOfBounds)?;
    if end > bank_len as u64 {
        return Err(Fault::OutOfBounds);
    }
    Ok(start as usize..end as usize)
}

impl<'e, S: BuildHasher> Machine<'e, S> {
    fn load(&mut self, bank: Bank, width: Width, index: u64) -> Result<u64, Fault> {
        match bank {
            Bank::Scratch => {
                let bytes = range(index, width, self.scratch_len)?;
                let scratch = if self.scratch_dirty { &self.scratch[..] } else { self.scratch_in };
                Ok(read_be(&scratch[bytes]))
            }
            Bank::Map => {
                let slot = self.mapped.ok_or(Fault::NotMapped)?;
                Ok(read_be(&self.slots[slot].bank[range(index, width, BANK_LEN)?]))
            }
            Bank::Env => {
                let bytes = range(index, width, ENV_LEN)?;
                let (env, flags) = (self.env, self.env_flags);
                let bank = self.env_bank.get_or_insert_with(|| {
                    let mut bank = env.to_bank();
                    bank[ENV_LEN - 1] |= flags;
                    bank
                });
                Ok(read_be(&bank[bytes]))
            }
            Bank::Net => {
                let bytes = range(index, width, NET_LEN)?;
                // Bytes beyond the actual header read as zero.
                Ok(bytes.fold(0u64, |acc, at| {
                    (acc << 8) | u64::from(self.net.get(at).copied().unwrap_or(0))
                }))
            }
        }
    }

    fn store(&mut self, bank: Bank, width: Width, index: u64, value: u64) -> Result<(), Fault> {
        match bank {
            Bank::Env | Bank::Net => Err(Fault::ReadOnly),
            Bank::Scratch => {
                if self.access.admin {
                    return Err(Fault::ReadOnly);
                }
                let bytes = range(index, width, self.scratch_len)?;
                if !self.scratch_dirty {
                    let len = self.scratch_len;
                    self.scratch[..len].copy_from_slice(&self.scratch_in[..len]);
                    self.scratch_dirty = true;
                }
                write_be(&mut self.scratch[bytes], value);
                Ok(())
            }
            Bank::Map => {
                let slot = self.mapped.ok_or(Fault::NotMapped)?;
                let bytes = range(index, width, BANK_LEN)?;
                if self.access.read_only(slot) {
                    return Err(Fault::Protected);
                }
                let entry = &mut self.slots[slot];
                write_be(&mut entry.bank[bytes], value);
                entry.dirty = true;
                Ok(())
            }
        }
    }

    /// The canonical slot of `slot`, its entry read from the store on first use.
    fn touch(&mut self, slot: u8) -> usize {
        let slot = self.canonical[usize::from(slot) & (MAX_KEYS - 1)];
        if !self.slots[slot].loaded {
            let (ess, keys, now) = (self.ess, self.keys, self.now);
            let (count, admission) = (self.key_count, self.access.admission);
            let txn =
                self.txn.get_or_insert_with(|| ess.begin_scoped(&keys[..count], now, admission));
            let entry = txn.get(slot);
            self.store_reads += 1;
            self.slots[slot] = KeySlot {
                bank: entry.unwrap_or([0; BANK_LEN]),
                loaded: true,
                present: entry.is_some(),
                dirty: false,
            };
        }
        slot
    }

    fn word0(&self, slot: usize) -> u64 {
        read_be(&self.slots[slot].bank[..8])
    }

    /// Executes one step; `index` already points at the next step. `Ok(Some(fate))` ends the
    /// run normally, `Err` with a fault.
    fn execute(
        &mut self,
        step: Step,
        index: &mut usize,
        returned: bool,
    ) -> Result<Option<Fate>, Fault> {
        match step.insn {
            Insn::Nop => {}
            Insn::Fwd => return Ok(Some(Fate::Fwd)),
            Insn::Drop => return Ok(Some(Fate::Drop)),
            Insn::Return => {
                if returned {
                    return Err(Fault::SecondReturn);
                }
                return Ok(Some(Fate::Return));
            }
            Insn::Alu(op) => match op {
                AluOp::Add => self.a = self.a.wrapping_add(self.b),
                AluOp::Sub => self.a = self.a.wrapping_sub(self.b),
                AluOp::And => self.a &= self.b,
                AluOp::Or => self.a |= self.b,
                AluOp::Xor => self.a ^= self.b,
                AluOp::Min => self.a = self.a.min(self.b),
                AluOp::Max => self.a = self.a.max(self.b),
                AluOp::Not => self.a = !self.a,
                AluOp::Inc => self.a = self.a.wrapping_add(1),
                AluOp::Dec => self.a = self.a.wrapping_sub(1),
                AluOp::Swap => std::mem::swap(&mut self.a, &mut self.b),
                AluOp::MovAB => self.a = self.b,
                AluOp::MovBA => self.b = self.a,
                AluOp::Clr => self.a = 0,
            },
            Insn::Shl(n) => self.a = self.a.checked_shl(u32::from(n)).unwrap_or(0),
            Insn::Shr(n) => self.a = self.a.checked_shr(u32::from(n)).unwrap_or(0),
            Insn::Imm { reg: Reg::A, value } => self.a = u64::from(value),
            Insn::Imm { reg: Reg::B, value } => self.b = u64::from(value),
            Insn::AddI(n) => self.a = self.a.wrapping_add(u64::from(n)),
            Insn::SubI(n) => self.a = self.a.wrapping_sub(u64::from(n)),
            Insn::Cmp(cond) => self.c = cond.holds(self.a, self.b),
            Insn::Jump { when, .. } => {
                let taken = match when {
                    JumpWhen::Always => true,
                    JumpWhen::IfTrue => self.c,
                    JumpWhen::IfFalse => !self.c,
                };
                // The decoder resolved the target to a later step (or the end); `max` keeps
                // the run forward-only whatever the program holds.
                if taken {
                    *index = (*index).max(usize::from(step.target));
                }
            }
            Insn::Ld { reg, mem } => {
                let value = self.load(mem.bank, mem.width, u64::from(mem.index))?;
                match reg {
                    Reg::A => self.a = value,
                    Reg::B => self.b = value,
                }
            }
            Insn::St { mem } => self.store(mem.bank, mem.width, u64::from(mem.index), self.a)?,
            Insn::Ldx { mem } => {
                let at = self.b.checked_add(u64::from(mem.index)).ok_or(Fault::OutOfBounds)?;
                self.a = self.load(mem.bank, mem.width, at)?;
            }
            Insn::Stx { mem } => {
                let at = self.b.checked_add(u64::from(mem.index)).ok_or(Fault::OutOfBounds)?;
                self.store(mem.bank, mem.width, at, self.a)?;
            }
            Insn::Lookup(slot) => {
                let slot = self.touch(slot);
                self.a = self.word0(slot);
                self.c = self.slots[slot].present;
            }
            Insn::Insert(slot) => {
                if self.access.read_only(usize::from(slot)) {
                    return Err(Fault::Protected);
                }
                let slot = self.touch(slot);
                let value = self.a;
                write_be(&mut self.slots[slot].bank[..8], value);
                self.slots[slot].dirty = true;
                // Present from now on, for this run's later `lookup` and `map`.
                self.slots[slot].present = true;
            }
            Insn::Map(slot) => {
                let slot = self.touch(slot);
                self.mapped = Some(slot);
                self.c = !self.slots[slot].present;
                // A read-only slot is mapped for reading: an absent entry reads as zeros and
                // is not created.
                if !self.slots[slot].present && !self.access.read_only(slot) {
                    self.slots[slot].dirty = true;
                    self.slots[slot].present = true;
                }
            }
        }
        Ok(None)
    }

    /// Commits the dirty entries; returns (writes, refused).
    fn commit(&mut self) -> (usize, usize) {
        let (mut writes, mut refused) = (0, 0);
        if let Some(txn) = self.txn.as_mut() {
            for (slot, entry) in self.slots.iter().enumerate() {
                // Read-only slots are never dirty; the check keeps it so whatever changes.
                if entry.dirty && !self.access.read_only(slot) {
                    writes += 1;
                    if txn.put(slot, &entry.bank).is_err() {
                        refused += 1;
                    }
                }
            }
        }
        (writes, refused)
    }
}

/// Runs `program` for one packet. `keys` are the packet's declared keys (private ones derived,
/// see [`Access::scopes`]), `scratch` its scratchpad (written back only when the run ends
/// without a fault), `returned` its RETURNED flag on arrival, `net` the bytes from its IP
/// header on; the store's clock is `env.time_ns`, the packet's rights `env.access`.
pub fn run<S: BuildHasher>(
    program: &Program,
    keys: &[u64],
    scratch: &mut [u8],
    returned: bool,
    env: &Env,
    net: &[u8],
    ess: &Ess<S>,
) -> Outcome {
    run_with_access(program, keys, scratch, returned, env, &Access::default(), net, ess)
}

/// [`run`] with the packet's rights over the store: the scope of each key slot, admin rights
/// (bit 2 of `e.flags`), the aggregate its creations count against.
#[allow(clippy::too_many_arguments)]
pub fn run_with_access<S: BuildHasher>(
    program: &Program,
    keys: &[u64],
    scratch: &mut [u8],
    returned: bool,
    env: &Env,
    access: &Access,
    net: &[u8],
    ess: &Ess<S>,
) -> Outcome {
    let keys = &keys[..keys.len().min(MAX_KEYS).min(program.key_count())];
    let scratch_len = scratch.len().min(MAX_SCRATCH);
    // The machine lives in this block and is dropped where it stands (an explicit `drop(m)`
    // moved all of it, some 850 bytes, once per packet).
    let (fate, fault, executed, store_writes, store_refused, scratch_dirty, store_reads, written) = {
        let mut m = Machine {
            a: 0,
            b: 0,
            c: false,
            scratch_in: &scratch[..scratch_len],
            scratch: [0; MAX_SCRATCH],
            scratch_len,
            scratch_dirty: false,
            env_bank: None,
            env,
            // A program sees whether its packet is on its way back (bit 1 of `e.flags`), so it can
            // forward it rather than fault on a second RETURN; an authenticated admin packet sees
            // bit 2.
            env_flags: u8::from(returned) << 1 | u8::from(access.admin) << 2,
            net,
            slots: [KeySlot { bank: [0; BANK_LEN], loaded: false, present: false, dirty: false };
                MAX_KEYS],
            canonical: [0, 1, 2, 3],
            mapped: None,
            keys: [StoreKey::default(); MAX_KEYS],
            key_count: keys.len(),
            access: *access,
            ess,
            txn: None,
            now: env.time_ns,
            store_reads: 0,
        };
        for (slot, &key) in keys.iter().enumerate() {
            m.keys[slot] = StoreKey { scope: access.scopes[slot], key };
        }
        for slot in 0..m.key_count {
            let key = m.keys[slot];
            m.canonical[slot] =
                m.keys[..m.key_count].iter().position(|k| *k == key).unwrap_or(slot);
        }

        let steps = program.steps();
        let mut index = 0;
        let mut executed = 0;
        let mut fate = Fate::Fwd;
        let mut fault = None;
        while index < steps.len() {
            let step = steps[index];
            executed += 1;
            index += 1;
            let result = m.execute(step, &mut index, returned);
            match result {
                Ok(None) => {}
                Ok(Some(chosen)) => {
                    fate = chosen;
                    break;
                }
                Err(reason) => {
                    fault = Some((reason, step.at));
                    break;
                }
            }
        }

        let (store_writes, store_refused) = if fault.is_none() { m.commit() } else { (0, 0) };
        // The run's scratchpad copy only when it was written (and the run may write it back).
        let written = (m.scratch_dirty && fault.is_none()).then_some(m.scratch);
        (
            fate,
            fault,
            executed,
            store_writes,
            store_refused,
            m.scratch_dirty,
            m.store_reads,
            written,
        )
    };
    if let Some(written) = written {
        scratch[..scratch_len].copy_from_slice(&written[..scratch_len]);
    }
    Outcome {
        fate,
        fault,
        steps: executed,
        scratch_dirty,
        store_reads,
        store_writes,
        store_refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::assemble;
    use crate::decode::decode;
    use crate::ess::EssConfig;

    fn program(source: &str, keys: usize) -> Program {
        decode(&assemble(source).unwrap().code, keys).unwrap()
    }

    fn store() -> Ess {
        Ess::new(&EssConfig::default()).unwrap()
    }

    fn word(bank: &[u8], index: usize) -> u64 {
        read_be(&bank[8 * index..8 * index + 8])
    }

    const COUNT: &str = include_str!("../../../examples/wasp/count.s");

    #[test]
    fn count_drops_above_threshold_and_drop_commits() {
        let ess = store();
        let count = program(COUNT, 1);
        let env = Env::default();
        let mut fates = Vec::new();
        for _ in 0..4 {
            let mut scratch = 2u64.to_be_bytes();
            let out = run(&count, &[77], &mut scratch, false, &env, &[], &ess);
            assert_eq!(out.fault, None);
            assert!(!out.scratch_dirty, "count never writes its packet");
            assert!(out.steps <= count.code_len());
            fates.push(out.fate);
        }
        assert_eq!(fates, [Fate::Fwd, Fate::Fwd, Fate::Drop, Fate::Drop]);
        assert_eq!(ess.get(77, 0).map(|b| word(&b, 0)), Some(4), "every run committed, drops too");
    }

    #[test]
    fn a_fault_discards_store_and_scratchpad_writes() {
        let ess = store();
        let env = Env::default();
        let cases = [
            ("lookup k0\ninc\ninsert k0\nst s.64[0], a\nst e.64[0], a", Fault::ReadOnly, 4),
            ("lookup k0\ninc\ninsert k0\nst s.64[0], a\nst h.8[0], a", Fault::ReadOnly, 4),
            ("lookup k0\ninc\ninsert k0\nst s.64[0], a\nst s.64[1], a", Fault::OutOfBounds, 4),
            ("insert k0\nst s.64[0], a\nimm b, 0xffff\nstx s.8[b+255], a", Fault::OutOfBounds, 5),
            ("insert k0\nst s.64[0], a\nld a, m.64[0]", Fault::NotMapped, 2),
            ("map k0\nst s.64[0], a\nld a, m.32[8]", Fault::OutOfBounds, 2),
            ("insert k0\nst s.64[0], a\nld a, e.64[9]", Fault::OutOfBounds, 2),
        ];
        for (source, fault, pc) in cases {
            let p = program(source, 1);
            let mut scratch = [0xaa; 8];
            let out = run(&p, &[9], &mut scratch, false, &env, &[], &ess);
            assert_eq!(out.fault, Some((fault, pc)), "{source}");
            assert_eq!(out.store_writes, 0, "{source}");
            assert_eq!(scratch, [0xaa; 8], "{source}: scratchpad restored");
            assert_eq!(ess.get(9, 0), None, "{source}: store untouched");
        }
    }

    #[test]
    fn return_happens_once_per_packet() {
        let ess = store();
        let p = program("return", 0);
        let out = run(&p, &[], &mut [], false, &Env::default(), &[], &ess);
        assert_eq!((out.fate, out.fault), (Fate::Return, None));
        let out = run(&p, &[], &mut [], true, &Env::default(), &[], &ess);
        assert_eq!(out.fault, Some((Fault::SecondReturn, 0)));
    }

    /// A packet on its way back sees bit 1 of `e.flags` and can forward itself instead of
    /// faulting on a second `return` (the path scan's reverse path).
    #[test]
    fn a_returned_packet_sees_its_flag_and_forwards() {
        let ess = store();
        let p = program("ld a, e.flags\nimm b, 2\nand\ncnz\njt back\nreturn\nback:\nfwd", 0);
        let out = run(&p, &[], &mut [], false, &Env::default(), &[], &ess);
        assert_eq!((out.fate, out.fault), (Fate::Return, None));
        let out = run(&p, &[], &mut [], true, &Env::default(), &[], &ess);
        assert_eq!((out.fate, out.fault), (Fate::Fwd, None), "forwarded on the way back");
    }

    /// `lookup` and `map` see what this run's own `insert` or `map` created.
    #[test]
    fn a_run_sees_the_entries_it_created() {
        let ess = store();
        let p = program("imm a, 9\ninsert k0\nlookup k0\nst s.64[0], a\nclr\njf no\ninc\nno:\nst s.64[1], a\nmap k1\nmap k1\nclr\njt yes\ninc\nyes:\nst s.64[2], a", 2);
        let mut scratch = [0u8; 24];
        let out = run(&p, &[1, 2], &mut scratch, false, &Env::default(), &[], &ess);
        assert_eq!(out.fault, None);
        let words: Vec<u64> = (0..3).map(|i| word(&scratch, i)).collect();
        assert_eq!(words, [9, 1, 1], "lookup after insert: present; second map: not created");
    }

    #[test]
    fn environment_and_header_banks_are_readable() {
        let ess = store();
        let env = Env {
            node_id: 7,
            node_addr: Env::ipv4_mapped([10, 0, 0, 1]),
            in_port: 3,
            time_ns: 123,
            in_profile: true,
            ..Env::default()
        };
        let p = program(
            "ld a, e.node_id\nst s.64[0], a\nld a, e.32[5]\nst s.64[1], a\nld a, e.in_port\nst s.64[2], a\n\
             ld a, e.flags\nst s.64[3], a\nld a, h.8[9]\nst s.64[4], a\nld a, h.16[31]\nst s.64[5], a",
            0,
        );
        let header = [0x45, 0, 0, 40, 0, 0, 0, 0, 64, 253];
        let mut scratch = [0u8; 48];
        let out = run(&p, &[], &mut scratch, false, &env, &header, &ess);
        assert_eq!(out.fault, None);
        let words: Vec<u64> = (0..6).map(|i| word(&scratch, i)).collect();
        assert_eq!(words, [7, 0x0a00_0001, 3, 1, 253, 0], "bytes past the header read as zero");
    }

    #[test]
    fn two_slots_naming_one_key_share_one_entry() {
        let ess = store();
        let p = program("lookup k0\ninc\ninsert k0\nlookup k1\ninc\ninsert k1", 2);
        let out = run(&p, &[5, 5], &mut [], false, &Env::default(), &[], &ess);
        assert_eq!(out.store_reads, 1);
        assert_eq!(ess.get(5, 0).map(|b| word(&b, 0)), Some(2));
    }

    #[test]
    fn indexed_stores_walk_the_scratchpad() {
        let ess = store();
        // Path-scan style: the hop counter in s.32[0], the hop's address appended after it.
        let p = program(
            "ld b, s.32[0]\nld a, e.32[5]\nstx s.32[b+1], a\nmov a, b\ninc\nst s.32[0], a",
            0,
        );
        let mut scratch = [0u8; 16];
        for hop in 1..=3u8 {
            let env = Env { node_addr: Env::ipv4_mapped([10, 0, 0, hop]), ..Env::default() };
            let out = run(&p, &[], &mut scratch, false, &env, &[], &ess);
            assert_eq!(out.fault, None);
        }
        assert_eq!(scratch, [0, 0, 0, 3, 10, 0, 0, 1, 10, 0, 0, 2, 10, 0, 0, 3]);
        // A fourth hop runs out of room: a fault, the scratchpad as it was.
        let out = run(&p, &[], &mut scratch, false, &Env::default(), &[], &ess);
        assert_eq!(out.fault, Some((Fault::OutOfBounds, 4)));
        assert_eq!(&scratch[..4], &[0, 0, 0, 3]);
    }

    fn protected_slot0() -> Access {
        Access {
            scopes: [Scope::Protected, Scope::Public, Scope::Public, Scope::Public],
            ..Access::default()
        }
    }

    fn run_as(
        source: &str,
        keys: &[u64],
        scratch: &mut [u8],
        access: &Access,
        ess: &Ess,
    ) -> Outcome {
        let p = program(source, keys.len());
        run_with_access(&p, keys, scratch, false, &Env::default(), access, &[], ess)
    }

    /// A packet without admin rights reads a protected entry but every way of writing it
    /// faults `protected`, and the run's other writes are discarded with it.
    #[test]
    fn protected_slots_are_read_only_without_admin_rights() {
        let ess = store();
        ess.put_scoped(StoreKey::protected(4), &[7; BANK_LEN], 0).unwrap();
        let access = protected_slot0();
        let mut scratch = [0u8; 8];
        let out = run_as("lookup k0\nst s.64[0], a", &[4], &mut scratch, &access, &ess);
        assert_eq!(out.fault, None);
        assert_eq!(scratch, [7; 8], "readable");
        for (source, pc) in [
            ("imm a, 1\ninsert k1\ninsert k0", 3),
            ("imm a, 1\ninsert k1\nmap k0\nst m.64[0], a", 4),
            ("imm a, 1\ninsert k1\nmap k0\nimm b, 1\nstx m.8[b+0], a", 6),
        ] {
            let out = run_as(source, &[4, 5], &mut [], &access, &ess);
            assert_eq!(out.fault, Some((Fault::Protected, pc)), "{source}");
            assert_eq!(ess.get_scoped(StoreKey::protected(4), 0), Some([7; BANK_LEN]));
            assert_eq!(ess.get(5, 0), None, "{source}: the public write went with the fault");
        }
        // Mapping an absent protected entry reads zeros and creates nothing.
        let mut scratch = [0xffu8; 16];
        let out = run_as(
            "map k0\nld a, m.64[0]\nst s.64[0], a\nclr\njf was\ninc\nwas:\nst s.64[1], a",
            &[9],
            &mut scratch,
            &access,
            &ess,
        );
        assert_eq!((out.fault, out.store_writes), (None, 0));
        assert_eq!(scratch[..8], [0; 8]);
        assert_eq!(scratch[15], 1, "C says absent");
        assert_eq!(ess.get_scoped(StoreKey::protected(9), 0), None);
    }

    #[test]
    fn admin_rights_write_protected_entries_but_not_the_scratchpad() {
        let ess = store();
        let admin = Access { admin: true, ..protected_slot0() };
        let out = run_as("ld a, e.flags\ninsert k0", &[4], &mut [], &admin, &ess);
        assert_eq!(out.fault, None);
        assert_eq!(
            ess.get_scoped(StoreKey::protected(4), 0).map(|b| word(&b, 0)),
            Some(4),
            "e.flags bit 2"
        );
        assert_eq!(ess.get(4, 0), None, "the public key 4 is another entry");
        let mut scratch = [0u8; 8];
        let out = run_as("imm a, 9\ninsert k0\nst s.64[0], a", &[4], &mut scratch, &admin, &ess);
        assert_eq!(out.fault, Some((Fault::ReadOnly, 3)), "the MAC covers the scratchpad");
        assert_eq!(ess.get_scoped(StoreKey::protected(4), 0).map(|b| word(&b, 0)), Some(4));
    }

    /// Two slots share one entry only when scope and key both match.
    #[test]
    fn slots_naming_one_key_in_two_scopes_are_two_entries() {
        let ess = store();
        let access = Access {
            scopes: [Scope::Public, Scope::Private, Scope::Public, Scope::Public],
            ..Access::default()
        };
        let out = run_as(
            "imm a, 1\ninsert k0\nimm a, 2\ninsert k1\nlookup k0\nst s.64[0], a",
            &[6, 6],
            &mut [0; 8],
            &access,
            &ess,
        );
        assert_eq!((out.fault, out.store_writes, out.store_reads), (None, 2, 2));
        assert_eq!(ess.get(6, 0).map(|b| word(&b, 0)), Some(1));
        let private = StoreKey { scope: Scope::Private, key: 6 };
        assert_eq!(ess.get_scoped(private, 0).map(|b| word(&b, 0)), Some(2));
    }

    proptest::proptest! {
        /// Any decodable program: steps <= code length, the store is touched at most once per
        /// key slot each way, and a faulting run changes nothing.
        #[test]
        fn random_programs_are_bounded_and_contained(
            code in proptest::collection::vec(proptest::num::u8::ANY, 0..=64),
            words in 0usize..=4,
            returned in proptest::bool::ANY,
        ) {
            let scratch = vec![0x5au8; 8 * words];
            let ess = Ess::new(&EssConfig { capacity: 64, shards: 4, ..EssConfig::default() }).unwrap();
            let Ok(p) = decode(&code, 2) else { return Ok(()) };
            let mut packet_scratch = scratch.clone();
            let out = run(&p, &[1, 2], &mut packet_scratch, returned, &Env::default(), &[0x45; 20], &ess);
            proptest::prop_assert!(out.steps <= code.len());
            proptest::prop_assert!(out.store_reads <= 2 && out.store_writes <= 2);
            if out.fault.is_some() {
                proptest::prop_assert_eq!(&packet_scratch, &scratch);
                proptest::prop_assert_eq!(ess.stats().inserts, 0);
            }
            if out.fate == Fate::Return {
                proptest::prop_assert!(!returned);
            }
        }
    }
}
