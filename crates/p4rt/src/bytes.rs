//! P4Runtime byte strings: big-endian values of a declared bit width. Clients send them padded
//! to the full width or in the canonical form (no leading zero bytes, at least one byte);
//! both are accepted as long as the value fits the width, and reads answer canonically.

/// Why a byte string is not a value of its field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BytesError {
    #[error("an empty byte string")]
    Empty,
    #[error("{bytes} bytes do not fit in {width} bits")]
    TooWide { bytes: usize, width: u32 },
    #[error("fields wider than 128 bits are not supported yet ({width} bits)")]
    Unsupported { width: u32 },
}

/// The value of `bytes` as a field of `width` bits.
pub fn value(bytes: &[u8], width: u32) -> Result<u128, BytesError> {
    if width > 128 {
        return Err(BytesError::Unsupported { width });
    }
    if bytes.is_empty() {
        return Err(BytesError::Empty);
    }
    let start = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    let significant = &bytes[start..];
    let too_wide = || BytesError::TooWide { bytes: bytes.len(), width };
    if significant.len() > 16 {
        return Err(too_wide());
    }
    let v = significant.iter().fold(0u128, |v, &b| (v << 8) | b as u128);
    if width < 128 && v >> width != 0 {
        return Err(too_wide());
    }
    Ok(v)
}

/// The canonical byte string of `v`: big-endian, no leading zero bytes, at least one byte.
pub fn canonical(v: u128) -> Vec<u8> {
    let b = v.to_be_bytes();
    let start = b.iter().position(|&x| x != 0).unwrap_or(15);
    b[start..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_and_canonical_forms_are_both_accepted() {
        assert_eq!(value(&[0x01, 0xff], 9), Ok(0x1ff));
        assert_eq!(value(&[0, 0, 0x01, 0xff], 9), Ok(0x1ff));
        assert_eq!(value(&[0], 9), Ok(0));
        assert_eq!(value(&[0x02, 0x00], 9), Err(BytesError::TooWide { bytes: 2, width: 9 }));
        assert_eq!(value(&[], 9), Err(BytesError::Empty));
        assert_eq!(value(&[1; 17], 128), Err(BytesError::TooWide { bytes: 17, width: 128 }));
        assert_eq!(value(&[0xff; 16], 128), Ok(u128::MAX));
    }

    #[test]
    fn canonical_strips_leading_zeros_but_keeps_one_byte() {
        assert_eq!(canonical(0), vec![0]);
        assert_eq!(canonical(0x1ff), vec![1, 0xff]);
    }
}
