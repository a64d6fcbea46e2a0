//! Why a packet was refused before running (`Reject`) or stopped while running (`Fault`).
//! Both are dense `repr(u8)` enums so that a stage can keep one counter per reason in an array
//! indexed by [`Reject::index`] / [`Fault::index`].

/// A malformed WASP shim or program: the packet is dropped before anything runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[repr(u8)]
pub enum Reject {
    #[error("truncated: the shim is longer than the bytes given")]
    Truncated,
    #[error("bad version")]
    BadVersion,
    #[error("reserved bits set")]
    ReservedBits,
    #[error("more than 4 keys")]
    TooManyKeys,
    #[error("code longer than 64 bytes")]
    CodeTooLong,
    #[error("scratchpad longer than 128 bytes")]
    ScratchTooLong,
    #[error("scratchpad length not a multiple of 8")]
    ScratchNotWords,
    #[error("bad checksum")]
    BadChecksum,
    #[error("unknown opcode")]
    UnknownOpcode,
    #[error("instruction runs past the end of the code")]
    TruncatedInstruction,
    #[error("bad operand")]
    BadOperand,
    #[error("backward jump")]
    BackwardJump,
    #[error("jump beyond the end of the code")]
    JumpOutOfRange,
    #[error("jump into the middle of an instruction")]
    JumpIntoInstruction,
    #[error("reference to an undeclared key")]
    UndeclaredKey,
    #[error("admin packet under a key id this node does not hold")]
    UnknownKey,
    #[error("admin packet whose MAC does not verify")]
    BadMac,
    #[error("admin packet whose sequence number is not above the last accepted for its key")]
    Replayed,
}

impl Reject {
    /// Every reason, in counter-index order.
    pub const ALL: [Reject; 18] = [
        Reject::Truncated,
        Reject::BadVersion,
        Reject::ReservedBits,
        Reject::TooManyKeys,
        Reject::CodeTooLong,
        Reject::ScratchTooLong,
        Reject::ScratchNotWords,
        Reject::BadChecksum,
        Reject::UnknownOpcode,
        Reject::TruncatedInstruction,
        Reject::BadOperand,
        Reject::BackwardJump,
        Reject::JumpOutOfRange,
        Reject::JumpIntoInstruction,
        Reject::UndeclaredKey,
        Reject::UnknownKey,
        Reject::BadMac,
        Reject::Replayed,
    ];
    pub const COUNT: usize = Self::ALL.len();

    /// Index into a per-reason counter array (`0..COUNT`).
    pub fn index(self) -> usize {
        self as usize
    }

    /// Stable kebab-case name for metrics.
    pub fn name(self) -> &'static str {
        match self {
            Reject::Truncated => "truncated",
            Reject::BadVersion => "bad-version",
            Reject::ReservedBits => "reserved-bits",
            Reject::TooManyKeys => "too-many-keys",
            Reject::CodeTooLong => "code-too-long",
            Reject::ScratchTooLong => "scratch-too-long",
            Reject::ScratchNotWords => "scratch-not-words",
            Reject::BadChecksum => "bad-checksum",
            Reject::UnknownOpcode => "unknown-opcode",
            Reject::TruncatedInstruction => "truncated-instruction",
            Reject::BadOperand => "bad-operand",
            Reject::BackwardJump => "backward-jump",
            Reject::JumpOutOfRange => "jump-out-of-range",
            Reject::JumpIntoInstruction => "jump-into-instruction",
            Reject::UndeclaredKey => "undeclared-key",
            Reject::UnknownKey => "unknown-key",
            Reject::BadMac => "bad-mac",
            Reject::Replayed => "replayed",
        }
    }
}

/// A run-time fault: the run's store writes and scratchpad changes are discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[repr(u8)]
pub enum Fault {
    #[error("write to a read-only bank")]
    ReadOnly,
    #[error("bank access out of bounds")]
    OutOfBounds,
    #[error("access to bank m before a map")]
    NotMapped,
    #[error("second return")]
    SecondReturn,
    #[error("write to a protected entry by a packet that is not an authenticated admin packet")]
    Protected,
}

impl Fault {
    pub const ALL: [Fault; 5] = [
        Fault::ReadOnly,
        Fault::OutOfBounds,
        Fault::NotMapped,
        Fault::SecondReturn,
        Fault::Protected,
    ];
    pub const COUNT: usize = Self::ALL.len();

    pub fn index(self) -> usize {
        self as usize
    }

    /// The value of the shim's `fault_code` field (0 means no fault).
    pub fn wire_code(self) -> u8 {
        self as u8 + 1
    }

    pub fn from_wire_code(code: u8) -> Option<Fault> {
        Self::ALL.get(usize::from(code).checked_sub(1)?).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            Fault::ReadOnly => "read-only",
            Fault::OutOfBounds => "out-of-bounds",
            Fault::NotMapped => "not-mapped",
            Fault::SecondReturn => "second-return",
            Fault::Protected => "protected",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_are_dense_and_in_order() {
        for (i, r) in Reject::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        for (i, f) in Fault::ALL.iter().enumerate() {
            assert_eq!(f.index(), i);
            assert_eq!(Fault::from_wire_code(f.wire_code()), Some(*f));
        }
        assert_eq!(Fault::from_wire_code(0), None);
        assert_eq!(Fault::from_wire_code(200), None);
    }
}
