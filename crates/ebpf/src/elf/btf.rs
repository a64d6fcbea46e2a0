//! Just enough BTF to read BTF-defined maps: the `.maps` data section's variables, their
//! struct types, and the `__uint(name, N)` (pointer to an array of N) and `__type(name, T)`
//! (pointer to T) members libbpf's macros produce; and the layout of a key or value type, to
//! show entries as bpftool's `formatted` does. Every read is bounds-checked: the input is
//! untrusted.

use crate::maps::layout::{Field, Layout, MAX_NODES};
use std::collections::HashMap;

const MAGIC: u16 = 0xeb9f;

const INT: u32 = 1;
const PTR: u32 = 2;
const ARRAY: u32 = 3;
const STRUCT: u32 = 4;
const UNION: u32 = 5;
const ENUM: u32 = 6;
const FWD: u32 = 7;
const TYPEDEF: u32 = 8;
const VOLATILE: u32 = 9;
const CONST: u32 = 10;
const RESTRICT: u32 = 11;
const FUNC: u32 = 12;
const FUNC_PROTO: u32 = 13;
const VAR: u32 = 14;
const DATASEC: u32 = 15;
const FLOAT: u32 = 16;
const DECL_TAG: u32 = 17;
const TYPE_TAG: u32 = 18;
const ENUM64: u32 = 19;

/// Longest chain of modifiers/typedefs followed before giving up (hostile input may loop).
const MAX_DEPTH: usize = 32;
/// Longest field or enum name a layout keeps.
const MAX_LAYOUT_NAME: usize = 256;

#[derive(Debug, Clone)]
struct Type {
    name_off: u32,
    kind: u32,
    vlen: u32,
    /// Struct members carry bitfield sizes; enums are signed.
    kind_flag: bool,
    /// `size` or `type`, by kind.
    size_or_type: u32,
    /// Offset of the kind-specific data in the type section.
    extra: usize,
}

pub struct Btf<'a> {
    types: Vec<Type>,
    type_data: &'a [u8],
    strings: &'a [u8],
}

/// A map member of a `.maps` struct: either a number (`__uint`) or a type (`__type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member {
    Number(u32),
    Type { id: u32, size: u32 },
}

/// What is wrong with a `.BTF` section.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BtfError {
    #[error("BTF is empty")]
    Empty,
    #[error("BTF is truncated at byte {at}")]
    Truncated { at: usize },
    #[error("BTF magic is {magic:#06x}, not {MAGIC:#06x} (big-endian objects are not supported)")]
    Magic { magic: u16 },
    #[error("BTF offsets overflow")]
    OffsetsOverflow,
    #[error("BTF section lies outside the data")]
    SectionOutside,
    #[error("BTF type {id} has unknown kind {kind}")]
    UnknownKind { id: usize, kind: u32 },
    #[error("BTF type section is truncated")]
    TypesTruncated,
    #[error("BTF type {id} does not exist")]
    NoType { id: u32 },
    #[error("BTF string offset out of range")]
    StringOutOfRange,
    #[error("BTF string is not terminated")]
    StringUnterminated,
    #[error("BTF string is not UTF-8")]
    StringNotUtf8,
    #[error("BTF type chain is too deep")]
    TooDeep,
    #[error("BTF array size overflows")]
    ArraySizeOverflows,
    #[error("BTF type {id} (kind {kind}) has no size")]
    NoSize { id: u32, kind: u32 },
    #[error("BTF {section} entry {entry} is not a variable")]
    NotAVariable { section: String, entry: usize },
    #[error("a .maps variable must be a struct")]
    MapNotStruct,
    #[error("BTF type has more than {MAX_NODES} parts")]
    TooLarge,
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, BtfError> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or(BtfError::Truncated { at })
}

impl<'a> Btf<'a> {
    pub fn parse(data: &'a [u8]) -> Result<Self, BtfError> {
        let magic =
            data.get(0..2).map(|b| u16::from_le_bytes([b[0], b[1]])).ok_or(BtfError::Empty)?;
        if magic != MAGIC {
            return Err(BtfError::Magic { magic });
        }
        let hdr_len = u32_at(data, 4)? as usize;
        let (type_off, type_len) = (u32_at(data, 8)? as usize, u32_at(data, 12)? as usize);
        let (str_off, str_len) = (u32_at(data, 16)? as usize, u32_at(data, 20)? as usize);
        let section = |off: usize, len: usize| -> Result<&'a [u8], BtfError> {
            let start = hdr_len.checked_add(off).ok_or(BtfError::OffsetsOverflow)?;
            let end = start.checked_add(len).ok_or(BtfError::OffsetsOverflow)?;
            data.get(start..end).ok_or(BtfError::SectionOutside)
        };
        let type_data = section(type_off, type_len)?;
        let strings = section(str_off, str_len)?;
        let void =
            Type { name_off: 0, kind: 0, vlen: 0, kind_flag: false, size_or_type: 0, extra: 0 };
        let mut types = vec![void];
        let mut at = 0;
        while at < type_data.len() {
            let name_off = u32_at(type_data, at)?;
            let info = u32_at(type_data, at + 4)?;
            let size_or_type = u32_at(type_data, at + 8)?;
            let kind = (info >> 24) & 0x1f;
            let vlen = info & 0xffff;
            let extra = at + 12;
            let extra_len = match kind {
                INT | VAR | DECL_TAG => 4,
                PTR | FWD | TYPEDEF | VOLATILE | CONST | RESTRICT | FUNC | FLOAT | TYPE_TAG => 0,
                ARRAY => 12,
                STRUCT | UNION | DATASEC | ENUM64 => 12 * vlen as usize,
                ENUM | FUNC_PROTO => 8 * vlen as usize,
                k => return Err(BtfError::UnknownKind { id: types.len(), kind: k }),
            };
            let kind_flag = info >> 31 != 0;
            types.push(Type { name_off, kind, vlen, kind_flag, size_or_type, extra });
            at = extra + extra_len;
        }
        if at > type_data.len() {
            return Err(BtfError::TypesTruncated);
        }
        Ok(Self { types, type_data, strings })
    }

    fn ty(&self, id: u32) -> Result<&Type, BtfError> {
        self.types.get(id as usize).ok_or(BtfError::NoType { id })
    }

    /// A name of at most [`MAX_LAYOUT_NAME`] bytes (a layout's field and enum names): a hostile
    /// string section cannot make every node scan or copy megabytes.
    fn short_name(&self, off: u32) -> Result<&'a str, BtfError> {
        let s = self.strings.get(off as usize..).ok_or(BtfError::StringOutOfRange)?;
        let s = &s[..s.len().min(MAX_LAYOUT_NAME + 1)];
        let end = s.iter().position(|b| *b == 0).ok_or(BtfError::TooLarge)?;
        std::str::from_utf8(&s[..end]).map_err(|_| BtfError::StringNotUtf8)
    }

    pub fn name(&self, off: u32) -> Result<&'a str, BtfError> {
        let s = self.strings.get(off as usize..).ok_or(BtfError::StringOutOfRange)?;
        let end = s.iter().position(|b| *b == 0).ok_or(BtfError::StringUnterminated)?;
        std::str::from_utf8(&s[..end]).map_err(|_| BtfError::StringNotUtf8)
    }

    /// Follow typedefs and qualifiers.
    fn resolve(&self, mut id: u32) -> Result<u32, BtfError> {
        for _ in 0..MAX_DEPTH {
            let t = self.ty(id)?;
            match t.kind {
                TYPEDEF | VOLATILE | CONST | RESTRICT | TYPE_TAG => id = t.size_or_type,
                _ => return Ok(id),
            }
        }
        Err(BtfError::TooDeep)
    }

    /// Size in bytes of type `id`.
    pub fn size_of(&self, id: u32) -> Result<u32, BtfError> {
        self.size_depth(id, 0)
    }

    fn size_depth(&self, id: u32, depth: usize) -> Result<u32, BtfError> {
        if depth > MAX_DEPTH {
            return Err(BtfError::TooDeep);
        }
        let id = self.resolve(id)?;
        let t = self.ty(id)?;
        match t.kind {
            INT | STRUCT | UNION | ENUM | ENUM64 | FLOAT | DATASEC => Ok(t.size_or_type),
            PTR => Ok(8),
            ARRAY => {
                let elem = u32_at(self.type_data, t.extra)?;
                let n = u32_at(self.type_data, t.extra + 8)?;
                self.size_depth(elem, depth + 1)?.checked_mul(n).ok_or(BtfError::ArraySizeOverflows)
            }
            k => Err(BtfError::NoSize { id, kind: k }),
        }
    }

    /// The variables of data section `name`: (variable name, type id, offset, size).
    pub fn datasec(&self, name: &str) -> Result<Vec<(String, u32, u32, u32)>, BtfError> {
        for t in &self.types {
            if t.kind == DATASEC && self.name(t.name_off)? == name {
                let mut out = Vec::new();
                for k in 0..t.vlen as usize {
                    let at = t.extra + 12 * k;
                    let var = u32_at(self.type_data, at)?;
                    let (off, size) =
                        (u32_at(self.type_data, at + 4)?, u32_at(self.type_data, at + 8)?);
                    let v = self.ty(var)?;
                    if v.kind != VAR {
                        return Err(BtfError::NotAVariable { section: name.to_string(), entry: k });
                    }
                    out.push((self.name(v.name_off)?.to_string(), v.size_or_type, off, size));
                }
                return Ok(out);
            }
        }
        Ok(Vec::new())
    }

    /// The members of a map definition struct, by name.
    pub fn map_members(&self, ty: u32) -> Result<HashMap<String, Member>, BtfError> {
        let id = self.resolve(ty)?;
        let t = self.ty(id)?;
        if t.kind != STRUCT {
            return Err(BtfError::MapNotStruct);
        }
        let mut out = HashMap::new();
        for k in 0..t.vlen as usize {
            let at = t.extra + 12 * k;
            let name = self.name(u32_at(self.type_data, at)?)?.to_string();
            let mty = self.resolve(u32_at(self.type_data, at + 4)?)?;
            let m = self.ty(mty)?;
            let member = match m.kind {
                PTR => {
                    let pointee = self.resolve(m.size_or_type)?;
                    let p = self.ty(pointee)?;
                    if p.kind == ARRAY
                        && matches!(
                            name.as_str(),
                            "type"
                                | "max_entries"
                                | "key_size"
                                | "value_size"
                                | "map_flags"
                                | "pinning"
                                | "numa_node"
                        )
                    {
                        Member::Number(u32_at(self.type_data, p.extra + 8)?)
                    } else {
                        Member::Type { id: pointee, size: self.size_of(pointee)? }
                    }
                }
                _ => continue,
            };
            out.insert(name, member);
        }
        Ok(out)
    }

    /// The layout of type `id` (a map's key or value), for showing entries; `nodes` is what
    /// is left of the object's budget of parts ([`MAX_NODES`] for all its maps together).
    pub fn layout(&self, id: u32, nodes: &mut usize) -> Result<Layout, BtfError> {
        self.layout_depth(id, 0, nodes)
    }

    fn layout_depth(&self, id: u32, depth: usize, nodes: &mut usize) -> Result<Layout, BtfError> {
        if depth > MAX_DEPTH {
            return Err(BtfError::TooDeep);
        }
        *nodes = nodes.checked_sub(1).ok_or(BtfError::TooLarge)?;
        let id = self.resolve(id)?;
        let t = self.ty(id)?.clone();
        let size = t.size_or_type;
        Ok(match t.kind {
            INT => {
                let enc = u32_at(self.type_data, t.extra)?;
                let (encoding, offset, bits) = ((enc >> 24) & 0xf, (enc >> 16) & 0xff, enc & 0xff);
                if offset != 0 || u64::from(bits) != 8 * u64::from(size) {
                    Layout::Opaque { size }
                } else {
                    // clang marks no `char` with BTF_INT_CHAR: the name says it, `char` alone
                    // (as bpftool reads it; `unsigned char`, `__u8`, are numbers).
                    let char = encoding & 2 != 0
                        || (size == 1 && self.short_name(t.name_off).is_ok_and(|n| n == "char"));
                    let (signed, boolean) = (encoding & 1 != 0, encoding & 4 != 0);
                    Layout::Int { size, signed, boolean, char }
                }
            }
            ENUM | ENUM64 => {
                let wide = t.kind == ENUM64;
                let step = if wide { 12 } else { 8 };
                let mut names = Vec::with_capacity((t.vlen as usize).min(*nodes));
                for k in 0..t.vlen as usize {
                    *nodes = nodes.checked_sub(1).ok_or(BtfError::TooLarge)?;
                    let at = t.extra + step * k;
                    let name = self.short_name(u32_at(self.type_data, at)?)?.to_string();
                    let lo = u32_at(self.type_data, at + 4)?;
                    let value = match (wide, t.kind_flag) {
                        (true, _) => {
                            ((u32_at(self.type_data, at + 8)? as u64) << 32 | lo as u64) as i64
                        }
                        (false, true) => lo as i32 as i64,
                        (false, false) => lo as i64,
                    };
                    names.push((name, value));
                }
                Layout::Enum { size, signed: t.kind_flag, names }
            }
            STRUCT | UNION => {
                let mut fields = Vec::with_capacity((t.vlen as usize).min(*nodes));
                for k in 0..t.vlen as usize {
                    let at = t.extra + 12 * k;
                    let name = self.short_name(u32_at(self.type_data, at)?)?.to_string();
                    let member = u32_at(self.type_data, at + 4)?;
                    let offset = u32_at(self.type_data, at + 8)?;
                    let (bit_offset, bits) =
                        if t.kind_flag { (offset & 0xff_ffff, offset >> 24) } else { (offset, 0) };
                    let layout = self.layout_depth(member, depth + 1, nodes)?;
                    // A member must lie inside its struct: else the sizes lie, and showing
                    // it could multiply work level by level.
                    let end = u64::from(bit_offset) / 8 + if bits == 0 { layout.size() } else { 0 };
                    if end > u64::from(size) {
                        return Err(BtfError::TooLarge);
                    }
                    let name = if name.is_empty() { format!("(anon {k})") } else { name };
                    fields.push(Field { name, bit_offset, bits, layout });
                }
                Layout::Struct { size, fields }
            }
            ARRAY => {
                let elem = u32_at(self.type_data, t.extra)?;
                let len = u32_at(self.type_data, t.extra + 8)?;
                Layout::Array { elem: Box::new(self.layout_depth(elem, depth + 1, nodes)?), len }
            }
            _ => Layout::Opaque { size: self.size_of(id).unwrap_or(0) },
        })
    }
}
