//! Why an object file cannot be loaded: each message names what to change in the program or
//! in how it was compiled.

use super::btf::BtfError;
use super::EM_BPF;
use super::MAX_OBJECT_BYTES;
use crate::maps::MapError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElfError {
    #[error("object bytes must be 8-byte aligned (copy them with elf::Aligned)")]
    Unaligned,
    #[error("object is {len} bytes; the limit is {MAX_OBJECT_BYTES}")]
    TooLarge { len: usize },
    #[error("not an ELF object: {0}")]
    NotElf(object::Error),
    #[error("not a 64-bit ELF object")]
    Not64Bit,
    #[error("ELF machine is {machine}, not BPF ({EM_BPF}): compile with `clang -target bpf`")]
    NotBpf { machine: u16 },
    #[error("big-endian BPF objects are not supported (use -target bpfel or bpf on x86)")]
    BigEndian,
    /// The object crate could not read a part of the file (`what` says which).
    #[error("{what}: {source}")]
    Malformed { what: String, source: object::Error },
    #[error("{0}")]
    Section(object::Error),
    #[error("section {0} is too large")]
    SectionTooLarge(String),
    #[error("section {0} is not a whole number of instructions")]
    PartialInsn(String),
    #[error("{section}: relocation at {offset:#x} has no symbol")]
    RelocationWithoutSymbol { section: String, offset: u64 },
    #[error("{section}: relocation at {offset:#x} is not on an instruction")]
    RelocationMisaligned { section: String, offset: u64 },
    #[error(".BTF: {0}")]
    BtfSection(BtfError),
    #[error(transparent)]
    Btf(#[from] BtfError),
    #[error("legacy map `{0}` is truncated")]
    LegacyMapTruncated(String),
    #[error("map `{0}` is BTF-defined but the object has no .BTF section (compile with -g)")]
    MapWithoutBtf(String),
    #[error("map `{0}` has no BTF description")]
    MapUndescribed(String),
    #[error("map `{map}`: {source}")]
    MapBtf { map: String, source: BtfError },
    #[error("map `{map}`: {source}")]
    MapKind { map: String, source: MapError },
    #[error("map `{0}`: maps of maps and program arrays are not supported")]
    MapOfMaps(String),
    /// A BTF map definition lacks a member (`what`: "type", "key type or size", ...).
    #[error("map `{map}` has no {what}")]
    MapMissing { map: String, what: &'static str },
    #[error("no program `{name}` in the object (programs: {})", programs.join(", "))]
    NoSuchProgram { name: String, programs: Vec<String> },
    #[error("the object has no program")]
    NoProgram,
    #[error("program `{0}` is empty")]
    EmptyProgram(String),
    #[error("instruction {at}: `lddw` refers to an undefined symbol `{symbol}`")]
    UndefinedLddw { at: usize, symbol: String },
    #[error("instruction {at}: `lddw` refers to `{symbol}` in section {section}, which is neither a map nor global data (function pointers are not supported)")]
    LddwTarget { at: usize, symbol: String, section: String },
    #[error("instruction {at}: call to an undefined function `{symbol}`")]
    UndefinedCall { at: usize, symbol: String },
    #[error("instruction {at}: call into section {section} is not supported")]
    CallIntoSection { at: usize, section: String },
    #[error("instruction {at}: unsupported relocation type {r_type}")]
    RelocationType { at: usize, r_type: u32 },
}
