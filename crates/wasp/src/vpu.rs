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

/// A worker's reusable run buffers: what a run writes before it knows whether it will fault
/// (its scratchpad copy and the banks of its entries) and the environment bank it builds on
/// first use. Kept between packets (a worker's [`crate::cache::DecodeCache`] holds one), so
/// that starting a run initialises a few flags instead of some 400 bytes; nothing in it is
/// read before the run has written it.
pub struct Workspace {
    scratch: [u8; MAX_SCRATCH],
    banks: [BankBytes; MAX_KEYS],
    env: [u8; ENV_LEN],
}

impl Default for Workspace {
    fn default() -> Self {
        Workspace { scratch: [0; MAX_SCRATCH], banks: [[0; BANK_LEN]; MAX_KEYS], env: [0; ENV_LEN] }
    }
}

/// No slot mapped yet.
const UNMAPPED: u8 = u8::MAX;

/// One run's state. `repr(C)` with the registers first: they are the only fields the
/// compiled tier reads or writes directly, at fixed offsets (see [`crate::jit`]).
#[repr(C)]
pub(crate) struct Machine<'e, S: BuildHasher> {
    pub(crate) a: u64,
    pub(crate) b: u64,
    pub(crate) c: bool,
    /// The packet arrived RETURNED (a second RETURN faults); the compiled tier reads it here,
    /// one byte after `c`.
    pub(crate) returned: bool,
    /// A panic in a step the compiled tier handed back to the interpreter, raised again
    /// once the machine code has returned (unwinding through it is not allowed).
    #[cfg(feature = "jit")]
    pub(crate) panic: Option<Box<dyn std::any::Any + Send>>,
    pub(crate) program: &'e Program,
    ws: &'e mut Workspace,
    /// The packet's scratchpad as it arrived: read until the first write, after which
    /// `ws.scratch` holds the run's copy (copy on write: most programs never write their
    /// scratchpad, and a fault must leave the packet's as it was).
    scratch_in: &'e [u8],
    scratch_len: usize,
    scratch_dirty: bool,
    /// `ws.env` holds this run's environment bank (most programs never read it).
    env_built: bool,
    env: &'e Env,
    /// Bits the run adds to `e.flags`: 1 RETURNED on arrival, 2 admin.
    env_flags: u8,
    net: &'e [u8],
    /// Bit per slot: its entry was read into `ws.banks` / exists / was written.
    loaded: u8,
    present: u8,
    dirty: u8,
    /// Slot holding each slot's key first: two slots naming one entry share one copy. Filled
    /// with the transaction, at the first store access.
    canonical: [u8; MAX_KEYS],
    mapped: u8,
    keys: &'e [u64],
    access: &'e Access,
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
    fn bit(slot: usize) -> u8 {
        1 << (slot & (MAX_KEYS - 1))
    }

    /// The run's scratchpad as it stands.
    fn scratch(&self) -> &[u8] {
        if self.scratch_dirty {
            &self.ws.scratch[..self.scratch_len]
        } else {
            self.scratch_in
        }
    }

    fn load(&mut self, bank: Bank, width: Width, index: u64) -> Result<u64, Fault> {
        match bank {
            Bank::Scratch => {
                let bytes = range(index, width, self.scratch_len)?;
                Ok(read_be(&self.scratch()[bytes]))
            }
            Bank::Map => {
                let slot = self.mapped_slot()?;
                Ok(read_be(&self.ws.banks[slot][range(index, width, BANK_LEN)?]))
            }
            Bank::Env => {
                let bytes = range(index, width, ENV_LEN)?;
                if !self.env_built {
                    self.ws.env = self.env.to_bank();
                    self.ws.env[ENV_LEN - 1] |= self.env_flags;
                    self.env_built = true;
                }
                Ok(read_be(&self.ws.env[bytes]))
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

    fn mapped_slot(&self) -> Result<usize, Fault> {
        match self.mapped {
            UNMAPPED => Err(Fault::NotMapped),
            slot => Ok(usize::from(slot) & (MAX_KEYS - 1)),
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
                    self.ws.scratch[..len].copy_from_slice(&self.scratch_in[..len]);
                    self.scratch_dirty = true;
                }
                write_be(&mut self.ws.scratch[bytes], value);
                Ok(())
            }
            Bank::Map => {
                let slot = self.mapped_slot()?;
                let bytes = range(index, width, BANK_LEN)?;
                if self.access.read_only(slot) {
                    return Err(Fault::Protected);
                }
                write_be(&mut self.ws.banks[slot][bytes], value);
                self.dirty |= Self::bit(slot);
                Ok(())
            }
        }
    }

    /// Starts the run's transaction: the packet's keys in their scopes, and which slot holds
    /// each key first.
    fn begin(&mut self) -> &mut Txn<'e, S> {
        let mut keys = [StoreKey::default(); MAX_KEYS];
        let count = self.keys.len().min(MAX_KEYS);
        for (slot, key) in keys.iter_mut().enumerate().take(count) {
            *key = StoreKey { scope: self.access.scopes[slot], key: self.keys[slot] };
        }
        for slot in 0..count {
            let first = keys[..count].iter().position(|k| *k == keys[slot]).unwrap_or(slot);
            self.canonical[slot] = first as u8;
        }
        let (ess, now, admission) = (self.ess, self.now, self.access.admission);
        self.txn.insert(ess.begin_scoped(&keys[..count], now, admission))
    }

    /// The canonical slot of `slot`, its entry read from the store on first use.
    fn touch(&mut self, slot: u8) -> usize {
        if self.txn.is_none() {
            self.begin();
        }
        let slot = usize::from(self.canonical[usize::from(slot) & (MAX_KEYS - 1)]) & (MAX_KEYS - 1);
        let bit = Self::bit(slot);
        if self.loaded & bit == 0 {
            let entry = self.txn.as_mut().and_then(|txn| txn.get(slot));
            self.store_reads += 1;
            self.loaded |= bit;
            match entry {
                Some(bank) => {
                    self.ws.banks[slot] = bank;
                    self.present |= bit;
                }
                None => self.ws.banks[slot] = [0; BANK_LEN],
            }
        }
        slot
    }

    fn word0(&self, slot: usize) -> u64 {
        read_be(&self.ws.banks[slot][..8])
    }

    /// Executes one step; `index` already points at the next step. `Ok(Some(fate))` ends the
    /// run normally, `Err` with a fault.
    pub(crate) fn execute(&mut self, step: Step, index: &mut usize) -> Result<Option<Fate>, Fault> {
        match step.insn {
            Insn::Nop => {}
            Insn::Fwd => return Ok(Some(Fate::Fwd)),
            Insn::Drop => return Ok(Some(Fate::Drop)),
            Insn::Return => {
                if self.returned {
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
                self.c = self.present & Self::bit(slot) != 0;
            }
            Insn::Insert(slot) => {
                if self.access.read_only(usize::from(slot)) {
                    return Err(Fault::Protected);
                }
                let slot = self.touch(slot);
                let value = self.a;
                write_be(&mut self.ws.banks[slot][..8], value);
                // Present from now on, for this run's later `lookup` and `map`.
                self.dirty |= Self::bit(slot);
                self.present |= Self::bit(slot);
            }
            Insn::Map(slot) => {
                let slot = self.touch(slot);
                let bit = Self::bit(slot);
                self.mapped = slot as u8;
                self.c = self.present & bit == 0;
                // A read-only slot is mapped for reading: an absent entry reads as zeros and
                // is not created.
                if self.present & bit == 0 && !self.access.read_only(slot) {
                    self.dirty |= bit;
                    self.present |= bit;
                }
            }
        }
        Ok(None)
    }

    /// Commits the dirty entries; returns (writes, refused).
    fn commit(&mut self) -> (usize, usize) {
        let (mut writes, mut refused) = (0, 0);
        if let Some(txn) = self.txn.as_mut() {
            for slot in 0..MAX_KEYS {
                // Read-only slots are never dirty; the check keeps it so whatever changes.
                if self.dirty & Self::bit(slot) != 0 && !self.access.read_only(slot) {
                    writes += 1;
                    if txn.put(slot, &self.ws.banks[slot]).is_err() {
                        refused += 1;
                    }
                }
            }
        }
        (writes, refused)
    }

    /// Runs the program to its end with the interpreter: the fate and, for a fault, the fault
    /// with the index of its step; and the steps executed.
    fn interpret(&mut self) -> (Result<Fate, (Fault, usize)>, usize) {
        let steps = self.program.steps();
        let mut index = 0;
        let mut executed = 0;
        while index < steps.len() {
            let step = steps[index];
            executed += 1;
            index += 1;
            match self.execute(step, &mut index) {
                Ok(None) => {}
                Ok(Some(fate)) => return (Ok(fate), executed),
                Err(fault) => return (Err((fault, index - 1)), executed),
            }
        }
        (Ok(Fate::Fwd), executed)
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
    let packet = PacketState { keys, scratch, returned, net };
    run_in(&mut Workspace::default(), Tier::Interpreter(program), packet, env, access, ess)
}

/// What one packet brings to a run: its declared keys (private ones derived), its scratchpad
/// (written back only when the run ends without a fault), its RETURNED flag on arrival, and
/// its bytes from the IP header on (the read-only header bank).
pub struct PacketState<'a> {
    pub keys: &'a [u64],
    pub scratch: &'a mut [u8],
    pub returned: bool,
    pub net: &'a [u8],
}

/// Which tier runs a program: the interpreter over its decoded steps, or its machine code.
#[derive(Clone, Copy)]
pub enum Tier<'a> {
    Interpreter(&'a Program),
    #[cfg(feature = "jit")]
    Compiled(&'a Program, &'a crate::jit::CompiledProgram),
}

impl<'a> Tier<'a> {
    pub fn is_compiled(&self) -> bool {
        !matches!(self, Tier::Interpreter(_))
    }

    pub fn program(&self) -> &'a Program {
        match *self {
            Tier::Interpreter(program) => program,
            #[cfg(feature = "jit")]
            Tier::Compiled(program, _) => program,
        }
    }
}

/// The run every other entry point comes to: `tier` over `packet` with the worker's buffers
/// `ws`. The result is the same whichever tier and whatever `ws` held before.
///
/// Inlined into its caller, which builds `packet` just before: read back through a pointer,
/// the freshly stored fields stall the load (a failed store forward) for some 10 ns.
#[inline(always)]
pub fn run_in<S: BuildHasher>(
    ws: &mut Workspace,
    tier: Tier<'_>,
    packet: PacketState<'_>,
    env: &Env,
    access: &Access,
    ess: &Ess<S>,
) -> Outcome {
    let program = tier.program();
    let PacketState { keys, scratch, returned, net } = packet;
    let keys = &keys[..keys.len().min(MAX_KEYS).min(program.key_count())];
    let scratch_len = scratch.len().min(MAX_SCRATCH);
    let (result, executed, store, scratch_dirty, store_reads) = {
        let mut m = Machine {
            a: 0,
            b: 0,
            c: false,
            returned,
            #[cfg(feature = "jit")]
            panic: None,
            program,
            ws: &mut *ws,
            scratch_in: &scratch[..scratch_len],
            scratch_len,
            scratch_dirty: false,
            env_built: false,
            env,
            // A program sees whether its packet is on its way back (bit 1 of `e.flags`), so it
            // can forward it rather than fault on a second RETURN; an authenticated admin
            // packet sees bit 2.
            env_flags: u8::from(returned) << 1 | u8::from(access.admin) << 2,
            net,
            loaded: 0,
            present: 0,
            dirty: 0,
            canonical: [0, 1, 2, 3],
            mapped: UNMAPPED,
            keys,
            access,
            ess,
            txn: None,
            now: env.time_ns,
            store_reads: 0,
        };
        let (result, executed) = match tier {
            Tier::Interpreter(_) => m.interpret(),
            #[cfg(feature = "jit")]
            Tier::Compiled(_, code) => code.run(&mut m),
        };
        let store = if result.is_ok() { m.commit() } else { (0, 0) };
        (result, executed, store, m.scratch_dirty, m.store_reads)
    };
    let fault = result.err().map(|(fault, index)| {
        let at = program.steps().get(index).map_or(0, |step| step.at);
        (fault, at)
    });
    if scratch_dirty && fault.is_none() {
        // The run's copy goes back to the packet only when it was written and did not fault.
        scratch[..scratch_len].copy_from_slice(&ws.scratch[..scratch_len]);
    }
    Outcome {
        fate: result.unwrap_or(Fate::Fwd),
        fault,
        steps: executed,
        scratch_dirty,
        store_reads,
        store_writes: store.0,
        store_refused: store.1,
    }
}

#[cfg(test)]
#[path = "vpu_tests.rs"]
mod tests;
