//! Decoder and validator: code bytes -> a [`Program`] the VPU can run without further checks
//! on control flow or key references.
//!
//! What is checked here, once per program (`docs/wasp.md` §4, §5): every opcode known and
//! complete, shift amounts < 64, every key slot below the declared key count, every jump
//! forward, inside the code (or exactly at its end) and onto an instruction boundary. Bank
//! bounds are the VPU's business at run time (see the spec for why).

use crate::error::Reject;
use crate::isa::{decode_one, Insn};
use crate::wire::{MAX_CODE, MAX_KEYS};

/// A decoded instruction with its byte offset and, for jumps, the index of the target step
/// (`== len` means the end of the code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub insn: Insn,
    pub at: u8,
    pub target: u8,
}

const EMPTY_STEP: Step = Step { insn: Insn::Nop, at: 0, target: 0 };

/// A validated program: at most one step per code byte, jumps resolved to step indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    steps: [Step; MAX_CODE],
    len: u8,
    code_len: u8,
    key_count: u8,
    uses_store: bool,
}

impl Program {
    pub fn steps(&self) -> &[Step] {
        &self.steps[..usize::from(self.len)]
    }
    /// Number of instructions (always <= `code_len`).
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn code_len(&self) -> usize {
        usize::from(self.code_len)
    }
    pub fn key_count(&self) -> usize {
        usize::from(self.key_count)
    }
    /// True when some instruction reaches the store (the VPU then locks the keys' shards).
    pub fn uses_store(&self) -> bool {
        self.uses_store
    }
}

/// A refused program: the reason (a counter index) and the code byte it was found at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{reason} at code byte {at}")]
pub struct DecodeError {
    pub reason: Reject,
    pub at: usize,
}

/// Decodes and validates `code` for a packet that declared `key_count` keys.
pub fn decode(code: &[u8], key_count: usize) -> Result<Program, DecodeError> {
    let fail = |reason, at| Err(DecodeError { reason, at });
    if code.len() > MAX_CODE {
        return fail(Reject::CodeTooLong, MAX_CODE);
    }
    if key_count > MAX_KEYS {
        return fail(Reject::TooManyKeys, 0);
    }
    let mut program = Program {
        steps: [EMPTY_STEP; MAX_CODE],
        len: 0,
        code_len: code.len() as u8,
        key_count: key_count as u8,
        uses_store: false,
    };
    // step_at[byte] = index of the step starting there, or NOT_A_START; step_at[code.len()] is
    // the end of the code.
    const NOT_A_START: u8 = u8::MAX;
    let mut step_at = [NOT_A_START; MAX_CODE + 1];
    let mut at = 0;
    while at < code.len() {
        let (insn, len) = decode_one(&code[at..]).map_err(|reason| DecodeError { reason, at })?;
        if let Some(slot) = insn.key_slot() {
            if usize::from(slot) >= key_count {
                return fail(Reject::UndeclaredKey, at);
            }
            program.uses_store = true;
        }
        let index = usize::from(program.len);
        step_at[at] = program.len;
        program.steps[index] = Step { insn, at: at as u8, target: 0 };
        program.len += 1;
        at += len;
    }
    step_at[code.len()] = program.len;
    for step in &mut program.steps[..usize::from(program.len)] {
        if let Insn::Jump { offset, .. } = step.insn {
            let at = usize::from(step.at);
            if offset < 0 {
                return fail(Reject::BackwardJump, at);
            }
            let target = at + 2 + offset as usize;
            if target > code.len() {
                return fail(Reject::JumpOutOfRange, at);
            }
            if step_at[target] == NOT_A_START {
                return fail(Reject::JumpIntoInstruction, at);
            }
            step.target = step_at[target];
        }
    }
    Ok(program)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(code: &[u8], keys: usize) -> Option<(Reject, usize)> {
        decode(code, keys).err().map(|e| (e.reason, e.at))
    }

    #[test]
    fn resolves_forward_jumps_to_steps() {
        // cgt; jf +1; drop; fwd
        let program = decode(&[0x34, 0x3a, 0x01, 0x02, 0x01], 0).unwrap();
        assert_eq!(program.len(), 4);
        assert_eq!(program.steps()[1].target, 3);
        assert_eq!(program.steps()[3].at, 4);
        // A jump to exactly the end of the code is allowed.
        let program = decode(&[0x38, 0x01, 0x02], 0).unwrap();
        assert_eq!(program.steps()[0].target, 2);
        assert!(decode(&[], 0).unwrap().is_empty());
    }

    #[test]
    fn each_malformation_has_its_reason_and_offset() {
        assert_eq!(reason(&[0x01, 0xee], 0), Some((Reject::UnknownOpcode, 1)));
        assert_eq!(reason(&[0x01, 0x24, 0x00], 0), Some((Reject::TruncatedInstruction, 1)));
        assert_eq!(reason(&[0x20, 70], 0), Some((Reject::BadOperand, 0)));
        assert_eq!(reason(&[0x01, 0x38, 0xfe], 0), Some((Reject::BackwardJump, 1)));
        assert_eq!(reason(&[0x38, 0x02, 0x01], 0), Some((Reject::JumpOutOfRange, 0)));
        assert_eq!(reason(&[0x38, 0x01, 0x22, 0x05], 0), Some((Reject::JumpIntoInstruction, 0)));
        assert_eq!(reason(&[0x90, 0x95], 1), Some((Reject::UndeclaredKey, 1)));
        assert_eq!(reason(&[0x01; 65], 0), Some((Reject::CodeTooLong, 64)));
        assert_eq!(reason(&[0x01], 5), Some((Reject::TooManyKeys, 0)));
        assert!(decode(&[0x90, 0x95], 2).unwrap().uses_store());
    }

    proptest::proptest! {
        /// Steps never exceed the code length and every jump target lies ahead.
        #[test]
        fn decoded_programs_are_bounded(code in proptest::collection::vec(proptest::num::u8::ANY, 0..=64), keys in 0usize..=4) {
            if let Ok(program) = decode(&code, keys) {
                proptest::prop_assert!(program.len() <= code.len());
                for (i, step) in program.steps().iter().enumerate() {
                    if let Insn::Jump { .. } = step.insn {
                        proptest::prop_assert!(usize::from(step.target) > i);
                        proptest::prop_assert!(usize::from(step.target) <= program.len());
                    }
                }
            }
        }
    }
}
