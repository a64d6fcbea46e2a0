//! Keys, matches and action parameters as text, the form the control API, the CLI, the TOML
//! config and STF/runtime files use: `10.0.0.1`, `0x0a000001`, `42` (exact), `10.0.0.0/8`
//! (lpm), `VALUE&&&MASK` or `LO..HI` (ternary). Outside input: never panics (fuzzed).

use crate::config::MatchKind;
use crate::set::{MatchSpec, Table};
use std::net::IpAddr;

/// Text that is not a key, match or parameter of the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    #[error("`{0}` is not hex")]
    NotHex(String),
    #[error("`{0}` is not a number, address or 0x hex")]
    NotANumber(String),
    #[error("`{text}` does not fit in {width} bytes")]
    TooWide { text: String, width: usize },
    #[error("`{0}` is not a prefix length")]
    PrefixLength(String),
    #[error("`{action}` is not an action of table `{table}`")]
    NoSuchAction { action: String, table: String },
    #[error("action `{action}` takes {} parameter(s) ({}), got {got}", params.len(), params.join(", "))]
    ParamCount { action: String, params: Vec<String>, got: usize },
    #[error("parameter `{param}`: {source}")]
    Param { param: String, source: Box<TextError> },
    #[error("parameter `{param}`: `{text}` is wider than {bits} bits")]
    ParamBits { param: String, text: String, bits: u32 },
}

/// A number or address as big-endian bytes of exactly `width` bytes.
pub fn value_bytes(text: &str, width: usize) -> Result<Vec<u8>, TextError> {
    let t = text.trim();
    let bytes = if let Ok(ip) = t.parse::<IpAddr>() {
        match ip {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        }
    } else if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        let h = if h.len() % 2 == 1 { format!("0{h}") } else { h.to_string() };
        hex::decode(&h).map_err(|_| TextError::NotHex(t.to_string()))?
    } else {
        let v: u128 = t.parse().map_err(|_| TextError::NotANumber(t.to_string()))?;
        let b = v.to_be_bytes();
        let first = b.iter().position(|&x| x != 0).unwrap_or(15);
        b[first..].to_vec()
    };
    if bytes.len() > width {
        let spare = bytes.len() - width;
        if bytes[..spare].iter().any(|&b| b != 0) {
            return Err(TextError::TooWide { text: t.to_string(), width });
        }
        return Ok(bytes[spare..].to_vec());
    }
    let mut out = vec![0u8; width - bytes.len()];
    out.extend_from_slice(&bytes);
    Ok(out)
}

/// Parse a match key for `table` (see `Request::TableAdd`).
pub fn parse_match(table: &Table, text: &str) -> Result<MatchSpec, TextError> {
    let cfg = table.config();
    let w = cfg.key_bytes();
    let t = text.trim();
    if let Some((v, m)) = t.split_once("&&&") {
        return Ok(MatchSpec::Ternary { value: value_bytes(v, w)?, mask: value_bytes(m, w)? });
    }
    if let Some((lo, hi)) = t.split_once("..") {
        let n = |s: &str| -> Result<u64, TextError> {
            let b = value_bytes(s, 8)?;
            Ok(u64::from_be_bytes(b.try_into().unwrap_or([0; 8])))
        };
        return Ok(MatchSpec::Range { lo: n(lo)?, hi: n(hi)? });
    }
    if let Some((v, len)) = t.rsplit_once('/') {
        let len: u32 = len.trim().parse().map_err(|_| TextError::PrefixLength(len.to_string()))?;
        return Ok(MatchSpec::Lpm { prefix: value_bytes(v, w)?, len });
    }
    let v = value_bytes(t, w)?;
    Ok(match cfg.kind {
        MatchKind::Lpm => MatchSpec::Lpm { prefix: v, len: w as u32 * 8 },
        _ => MatchSpec::Exact(v),
    })
}

/// Action parameters (decimal or 0x hex, one per parameter) as data words.
pub fn parse_params(table: &Table, action: &str, params: &[String]) -> Result<Vec<u64>, TextError> {
    let spec = table.config().actions.iter().find(|a| a.name == action).ok_or_else(|| {
        TextError::NoSuchAction { action: action.to_string(), table: table.name().to_string() }
    })?;
    if params.len() != spec.params.len() {
        return Err(TextError::ParamCount {
            action: action.to_string(),
            params: spec.params.iter().map(|p| p.name.clone()).collect(),
            got: params.len(),
        });
    }
    let mut words = vec![];
    for (p, text) in spec.params.iter().zip(params) {
        let b = value_bytes(text, p.words() * 8)
            .map_err(|e| TextError::Param { param: p.name.clone(), source: Box::new(e) })?;
        if p.bits < 64
            && u64::from_be_bytes(b[b.len() - 8..].try_into().unwrap_or([0; 8])) >> p.bits != 0
        {
            return Err(TextError::ParamBits {
                param: p.name.clone(),
                text: text.clone(),
                bits: p.bits,
            });
        }
        words.extend(b.chunks(8).map(|c| u64::from_be_bytes(c.try_into().unwrap_or([0; 8]))));
    }
    Ok(words)
}

fn hex_of(b: &[u8]) -> String {
    format!("0x{}", hex::encode(b))
}

/// A match key as text (the form `parse_match` reads).
pub fn match_text(m: &MatchSpec) -> String {
    let addr = |b: &[u8]| match b.len() {
        4 => IpAddr::from(<[u8; 4]>::try_from(b).unwrap_or_default()).to_string(),
        16 => IpAddr::from(<[u8; 16]>::try_from(b).unwrap_or_default()).to_string(),
        _ => hex_of(b),
    };
    match m {
        MatchSpec::Exact(v) => hex_of(v),
        MatchSpec::Lpm { prefix, len } => format!("{}/{len}", addr(prefix)),
        MatchSpec::Ternary { value, mask } => format!("{}&&&{}", hex_of(value), hex_of(mask)),
        MatchSpec::Range { lo, hi } => format!("{lo}..{hi}"),
    }
}
