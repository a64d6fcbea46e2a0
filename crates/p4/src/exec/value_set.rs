//! A parser's value set at run time: members the control plane replaces as a whole and
//! workers read without waiting (one atomic load of a QSBR-protected slot per lookup).

use std::sync::Mutex;

use crate::ir::ValueSetField;
use crate::types::mask;
use hotplane_core::{Guard, Qsbr, Slot};

/// One member: a value and a mask per field of the set's type.
pub type Member = Vec<(u128, u128)>;

/// A refused value set write. The set is unchanged after any of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueSetError {
    #[error("value set {set} holds at most {size} members, {given} given")]
    TooMany { set: String, size: usize, given: usize },
    #[error("value set {set}: a member has {given} fields, the set's type {expected}")]
    FieldCount { set: String, expected: usize, given: usize },
    #[error(
        "value set {set} field `{field}`: {value:#x} &&& {mask:#x} does not fit in bit<{width}>"
    )]
    TooWide { set: String, field: String, value: u128, mask: u128, width: u32 },
    #[error("value set {set} field `{field}` matches exactly: its mask must be all ones")]
    NotExact { set: String, field: String },
}

pub struct ValueSetRt {
    pub name: String,
    pub size: usize,
    pub fields: Vec<ValueSetField>,
    /// (value, mask) over the fields concatenated, the first field most significant.
    members: Slot<Vec<(u128, u128)>>,
    /// The members as written, for reads (control plane only).
    written: Mutex<Vec<Member>>,
}

impl ValueSetRt {
    pub fn new(qsbr: &Qsbr, name: &str, size: u32, fields: &[ValueSetField]) -> Self {
        ValueSetRt {
            name: name.to_string(),
            size: size as usize,
            fields: fields.to_vec(),
            members: Slot::new(qsbr, Vec::new()),
            written: Mutex::new(Vec::new()),
        }
    }

    /// Whether `key` (the select's keys concatenated) matches a member.
    #[inline]
    pub fn contains(&self, key: u128, guard: &Guard<'_>) -> bool {
        self.members.load(guard).value.iter().any(|&(value, mask)| key & mask == value)
    }

    /// Replace every member (control plane). Values are kept under their masks.
    pub fn set(&self, members: Vec<Member>) -> Result<(), ValueSetError> {
        if members.len() > self.size {
            return Err(ValueSetError::TooMany {
                set: self.name.clone(),
                size: self.size,
                given: members.len(),
            });
        }
        let mut packed = Vec::with_capacity(members.len());
        for m in &members {
            if m.len() != self.fields.len() {
                return Err(ValueSetError::FieldCount {
                    set: self.name.clone(),
                    expected: self.fields.len(),
                    given: m.len(),
                });
            }
            let (mut value, mut mask_all) = (0u128, 0u128);
            for (f, &(v, mk)) in self.fields.iter().zip(m) {
                let full = mask(f.width);
                if v & !full != 0 || mk & !full != 0 {
                    return Err(ValueSetError::TooWide {
                        set: self.name.clone(),
                        field: f.name.clone(),
                        value: v,
                        mask: mk,
                        width: f.width,
                    });
                }
                if !f.ternary && mk != full {
                    return Err(ValueSetError::NotExact {
                        set: self.name.clone(),
                        field: f.name.clone(),
                    });
                }
                value = value.checked_shl(f.width).unwrap_or(0) | (v & mk);
                mask_all = mask_all.checked_shl(f.width).unwrap_or(0) | mk;
            }
            packed.push((value, mask_all));
        }
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        // A grace period that times out still leaves the new members published (the old ones
        // are freed later): the write itself has happened.
        let _ = self.members.replace(packed);
        *written = members;
        Ok(())
    }

    /// The members as written.
    pub fn members(&self) -> Vec<Member> {
        self.written.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
