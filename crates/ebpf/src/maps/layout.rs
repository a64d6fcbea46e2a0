//! What a map's keys and values look like, from the object's BTF, so that `map dump` and
//! `map lookup` can show them as bpftool's `formatted` does: integers as numbers, structs as
//! objects by field name, arrays as lists, enums by name, bitfields extracted. Only the
//! control plane reads it; the fast path never formats.

use serde_json::{json, Map as JsonMap, Value};

/// Parts the layouts of one object's maps may have together: hostile BTF cannot make loading
/// expensive.
pub const MAX_NODES: usize = 4096;
/// Elements of one array shown; the rest are summarised.
const MAX_SHOWN: usize = 256;
/// Values one entry is shown with; the rest are summarised (nested arrays multiply).
const MAX_VALUES: usize = 4096;

/// The shape of a key or a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// An integer of `size` bytes (little-endian); `bool` and `char` as BTF marks them.
    Int {
        size: u32,
        signed: bool,
        boolean: bool,
        char: bool,
    },
    /// An enum of `size` bytes, shown by its member's name when the value has one.
    Enum {
        size: u32,
        signed: bool,
        names: Vec<(String, i64)>,
    },
    /// A struct or union: fields at bit offsets (unions: all at 0).
    Struct {
        size: u32,
        fields: Vec<Field>,
    },
    Array {
        elem: Box<Layout>,
        len: u32,
    },
    /// Anything else (pointers, floats, padding): hex bytes.
    Opaque {
        size: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub bit_offset: u32,
    /// Bits of a bitfield; 0 for a whole field.
    pub bits: u32,
    pub layout: Layout,
}

/// A map's key and value layouts (either may be unknown).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MapLayout {
    pub key: Option<Layout>,
    pub value: Option<Layout>,
}

impl Layout {
    /// Bytes it covers.
    pub fn size(&self) -> u64 {
        match self {
            Layout::Int { size, .. } | Layout::Enum { size, .. } => *size as u64,
            Layout::Struct { size, .. } | Layout::Opaque { size } => *size as u64,
            Layout::Array { elem, len } => elem.size().saturating_mul(*len as u64),
        }
    }

    /// `bytes` shown as this layout says; bytes it does not cover are not shown.
    pub fn format(&self, bytes: &[u8]) -> Value {
        let mut left = MAX_VALUES;
        self.format_within(bytes, &mut left)
    }

    /// As [`Layout::format`], making at most `left` values (then `"..."`).
    fn format_within(&self, bytes: &[u8], left: &mut usize) -> Value {
        let Some(rest) = left.checked_sub(1) else { return json!("...") };
        *left = rest;
        let own = |size: u32| &bytes[..(size as usize).min(bytes.len())];
        match self {
            Layout::Int { size, signed, boolean, char: _ } => match int(bytes, *size, *signed) {
                Some(v) if *boolean => json!(v != 0),
                Some(v) => v.to_json(),
                None => hex(own(*size)),
            },
            Layout::Enum { size, signed, names } => match int(bytes, *size, *signed) {
                // Compared as bits: an unsigned 64-bit value above i64::MAX has its name too.
                Some(v) => names
                    .iter()
                    .find(|(_, n)| *n as u64 == v.bits())
                    .map_or_else(|| v.to_json(), |(name, _)| json!(name)),
                None => hex(own(*size)),
            },
            Layout::Struct { fields, .. } => {
                let mut out = JsonMap::new();
                for f in fields {
                    out.insert(f.name.clone(), f.format(bytes, left));
                }
                Value::Object(out)
            }
            Layout::Array { elem, len } => {
                let step = elem.size() as usize;
                if step == 0 {
                    return json!([]);
                }
                let n = (*len as usize).min(bytes.len() / step);
                // A char array is a string, as bpftool shows it.
                if matches!(**elem, Layout::Int { char: true, size: 1, .. }) {
                    let text = &bytes[..n];
                    let end = text.iter().position(|&b| b == 0).unwrap_or(n);
                    return json!(String::from_utf8_lossy(&text[..end]));
                }
                let mut items: Vec<Value> = (0..n.min(MAX_SHOWN))
                    .map(|i| elem.format_within(&bytes[i * step..], left))
                    .collect();
                if n > MAX_SHOWN {
                    items.push(json!(format!("... {} more", n - MAX_SHOWN)));
                }
                Value::Array(items)
            }
            Layout::Opaque { size } => hex(&bytes[..(*size as usize).min(bytes.len())]),
        }
    }
}

impl Field {
    fn format(&self, bytes: &[u8], left: &mut usize) -> Value {
        if self.bits == 0 {
            return match bytes.get((self.bit_offset / 8) as usize..) {
                Some(at) if self.bit_offset % 8 == 0 => self.layout.format_within(at, left),
                _ => Value::Null,
            };
        }
        // A bitfield: up to 64 bits starting anywhere, little-endian.
        let (first, shift) = ((self.bit_offset / 8) as usize, self.bit_offset % 8);
        let mut word = [0u8; 16];
        let avail = bytes.get(first..).unwrap_or_default();
        let n = avail.len().min(16);
        word[..n].copy_from_slice(&avail[..n]);
        let raw = u128::from_le_bytes(word) >> shift;
        let bits = self.bits.min(64);
        let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        json!(raw as u64 & mask)
    }
}

/// A number read from `bytes`: `None` when they are too few or it is wider than 8 bytes.
#[derive(Clone, Copy)]
enum Number {
    Unsigned(u64),
    Signed(i64),
}

impl Number {
    fn to_json(self) -> Value {
        match self {
            Number::Unsigned(v) => json!(v),
            Number::Signed(v) => json!(v),
        }
    }

    /// The 64 bits it stands for (a signed one sign-extended).
    fn bits(self) -> u64 {
        match self {
            Number::Unsigned(v) => v,
            Number::Signed(v) => v as u64,
        }
    }
}

impl PartialEq<u64> for Number {
    fn eq(&self, other: &u64) -> bool {
        match self {
            Number::Unsigned(v) => v == other,
            Number::Signed(v) => u64::try_from(*v).is_ok_and(|v| v == *other),
        }
    }
}

fn int(bytes: &[u8], size: u32, signed: bool) -> Option<Number> {
    let size = size as usize;
    if !matches!(size, 1 | 2 | 4 | 8) || bytes.len() < size {
        return None;
    }
    let mut word = [0u8; 8];
    word[..size].copy_from_slice(&bytes[..size]);
    let raw = u64::from_le_bytes(word);
    Some(if signed {
        let shift = 64 - 8 * size as u32;
        Number::Signed(((raw << shift) as i64) >> shift)
    } else {
        Number::Unsigned(raw)
    })
}

fn hex(bytes: &[u8]) -> Value {
    json!(format!("0x{}", hex::encode(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(size: u32) -> Layout {
        Layout::Int { size, signed: false, boolean: false, char: false }
    }

    #[test]
    fn a_struct_with_an_array_an_enum_a_bitfield_and_a_string() {
        let layout = Layout::Struct {
            size: 16,
            fields: vec![
                Field { name: "ip".into(), bit_offset: 0, bits: 0, layout: u(4) },
                Field {
                    name: "mac".into(),
                    bit_offset: 32,
                    bits: 0,
                    layout: Layout::Array { elem: Box::new(u(1)), len: 6 },
                },
                Field {
                    name: "state".into(),
                    bit_offset: 80,
                    bits: 0,
                    layout: Layout::Enum {
                        size: 1,
                        signed: false,
                        names: vec![("UP".into(), 1), ("DOWN".into(), 2)],
                    },
                },
                Field { name: "flag".into(), bit_offset: 89, bits: 3, layout: u(1) },
                Field {
                    name: "tag".into(),
                    bit_offset: 96,
                    bits: 0,
                    layout: Layout::Array {
                        elem: Box::new(Layout::Int {
                            size: 1,
                            signed: true,
                            boolean: false,
                            char: true,
                        }),
                        len: 4,
                    },
                },
            ],
        };
        let bytes = [10, 0, 0, 100, 2, 0, 0, 0, 0, 2, 1, 0b1010, b'l', b'b', 0, 0];
        assert_eq!(
            layout.format(&bytes),
            json!({"ip": 1677721610u32, "mac": [2, 0, 0, 0, 0, 2], "state": "UP", "flag": 5, "tag": "lb"})
        );
    }

    #[test]
    fn short_bytes_and_odd_widths_fall_back_to_hex_or_null() {
        assert_eq!(u(4).format(&[1, 2]), json!("0x0102"));
        assert_eq!(u(3).format(&[1, 2, 3, 4, 5]), json!("0x010203"), "its own bytes only");
        let wide = Layout::Enum { size: 8, signed: false, names: vec![("TOP".into(), -1)] };
        assert_eq!(wide.format(&[0xff; 8]), json!("TOP"), "a u64 enum value above i64::MAX");
        assert_eq!(u(16).format(&[0xff; 16]), json!(format!("0x{}", "ff".repeat(16))));
        let signed = Layout::Int { size: 2, signed: true, boolean: false, char: false };
        assert_eq!(signed.format(&[0xfe, 0xff]), json!(-2));
        let s = Layout::Struct {
            size: 8,
            fields: vec![Field { name: "far".into(), bit_offset: 800, bits: 0, layout: u(4) }],
        };
        assert_eq!(s.format(&[0; 8]), json!({"far": null}));
        let big = Layout::Array { elem: Box::new(u(1)), len: 1000 };
        let shown = big.format(&[7; 1000]);
        assert_eq!(shown.as_array().unwrap().len(), MAX_SHOWN + 1);
        // Structs that claim one byte but hold arrays of 256 of themselves, 8 deep, would be
        // 256^8 values: the budget ends it.
        let mut deep = u(1);
        for _ in 0..8 {
            let field = Field { name: "a".into(), bit_offset: 0, bits: 0, layout: deep };
            let liar = Layout::Struct { size: 1, fields: vec![field] };
            deep = Layout::Array { elem: Box::new(liar), len: 256 };
        }
        let text = deep.format(&[0; 4096]).to_string();
        assert!(text.contains("\"...\"") && text.len() < 64 * MAX_VALUES, "{}", text.len());
    }
}
