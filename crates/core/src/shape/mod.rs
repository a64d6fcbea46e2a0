//! Packet shapes: what is known about every packet that leaves a program through one kind of
//! exit. A shape is a length interval plus, per byte offset, the bits known there (a "tnum" per
//! byte); a [`Guarantee`] is a disjunction of a few shapes.
//!
//! A byte fact is conditional on the byte existing: a shape with `len` `[14, 1518]` and a fact
//! at offset 60 says "if the packet is longer than 60 bytes, byte 60 is ...". The analysis only
//! produces facts about bytes a bounds check proved present, so in its results the condition
//! always holds; it matters for joins (a fact of one shape survives a join with a shape whose
//! packets are all too short to have that byte) and for shapes written by hand.
//!
//! Shapes are serialised as `{"len":[74,1518],"bytes":{"12":"86","13":"dd","14":"6?"}}`: two
//! hex digits per byte, `?` for an unknown nibble, or eight characters `0`/`1`/`?` (most
//! significant bit first) when a nibble is only partly known. The JSON comes from outside (an
//! operator's file, another node), so parsing returns typed errors and never panics.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Most disjuncts a [`Guarantee`] keeps; beyond that the two closest are joined.
pub const MAX_SHAPES: usize = 8;

/// The bits known about one byte: a bit is known when it is clear in `mask`, and then equals
/// the bit of `value` (bits of `value` under `mask` are zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ByteFact {
    pub value: u8,
    pub mask: u8,
}

impl ByteFact {
    pub const UNKNOWN: ByteFact = ByteFact { value: 0, mask: 0xff };

    /// A byte known exactly.
    pub const fn known(value: u8) -> Self {
        Self { value, mask: 0 }
    }

    /// Known bits `!mask` of `value`.
    pub const fn new(value: u8, mask: u8) -> Self {
        Self { value: value & !mask, mask }
    }

    pub fn is_unknown(self) -> bool {
        self.mask == 0xff
    }

    /// Known bits, as a count (how much a fact says).
    pub fn known_bits(self) -> u32 {
        (!self.mask).count_ones()
    }

    /// Whether the concrete byte `b` is one this fact allows.
    pub fn admits(self, b: u8) -> bool {
        b & !self.mask == self.value
    }

    /// Every byte this fact allows, `other` allows (⊑).
    pub fn implies(self, other: ByteFact) -> bool {
        self.mask & !other.mask == 0 && self.value & !other.mask == other.value
    }

    /// The tightest fact allowing every byte either allows (tnum union).
    pub fn join(self, other: ByteFact) -> ByteFact {
        let mask = self.mask | other.mask | (self.value ^ other.value);
        ByteFact::new(self.value, mask)
    }

    /// The bytes both allow, or `None` when the known bits contradict each other.
    pub fn meet(self, other: ByteFact) -> Option<ByteFact> {
        if (self.value ^ other.value) & !self.mask & !other.mask != 0 {
            return None;
        }
        let mask = self.mask & other.mask;
        Some(ByteFact::new(self.value | other.value, mask))
    }

    /// Only the known bits among `bits`.
    pub fn restrict(self, bits: u8) -> ByteFact {
        ByteFact::new(self.value, self.mask | !bits)
    }
}

impl fmt::Display for ByteFact {
    /// Two characters (hex digit or `?` per nibble) where each nibble is known or unknown
    /// whole, else eight bits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nibble = |shift: u8| match (self.mask >> shift) & 0xf {
            0 => Some(char::from_digit(((self.value >> shift) & 0xf) as u32, 16).unwrap_or('?')),
            0xf => Some('?'),
            _ => None,
        };
        if let (Some(hi), Some(lo)) = (nibble(4), nibble(0)) {
            return write!(f, "{hi}{lo}");
        }
        for bit in (0..8).rev() {
            let c = match (self.mask >> bit & 1, self.value >> bit & 1) {
                (1, _) => '?',
                (_, 1) => '1',
                _ => '0',
            };
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

/// A byte written as text that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a byte: two hex digits or `?` (\"86\", \"6?\"), or eight of 0/1/? (\"0110??01\")"
)]
pub struct ByteTextError(pub String);

impl std::str::FromStr for ByteFact {
    type Err = ByteTextError;

    fn from_str(s: &str) -> Result<Self, ByteTextError> {
        let bad = || ByteTextError(s.chars().take(16).collect());
        let chars: Vec<char> = s.chars().take(9).collect();
        let (mut value, mut mask) = (0u8, 0u8);
        match chars.len() {
            2 => {
                for c in chars {
                    value <<= 4;
                    mask <<= 4;
                    match c {
                        '?' => mask |= 0xf,
                        c => value |= c.to_digit(16).ok_or_else(bad)? as u8,
                    }
                }
            }
            8 => {
                for c in chars {
                    value <<= 1;
                    mask <<= 1;
                    match c {
                        '0' => {}
                        '1' => value |= 1,
                        '?' => mask |= 1,
                        _ => return Err(bad()),
                    }
                }
            }
            _ => return Err(bad()),
        }
        Ok(ByteFact::new(value, mask))
    }
}

/// What is known about a packet: its length (`data_end - data`, an inclusive interval) and
/// known bits at byte offsets from `data` (absent: nothing known).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawShape")]
pub struct PacketShape {
    pub len: (u32, u32),
    pub bytes: BTreeMap<u16, ByteFact>,
}

/// Which facts of a shape a consumer relied on (see [`PacketShape::restrict`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsedFacts {
    /// The length interval was used.
    pub len: bool,
    /// Bits used per byte offset.
    pub bits: BTreeMap<u16, u8>,
}

impl PacketShape {
    /// Nothing known.
    pub const fn top() -> Self {
        Self { len: (0, u32::MAX), bytes: BTreeMap::new() }
    }

    /// Any content, length in `[min, max]` (swapped if given the wrong way round).
    pub fn with_len(min: u32, max: u32) -> Self {
        Self { len: (min.min(max), max.max(min)), bytes: BTreeMap::new() }
    }

    pub fn is_top(&self) -> bool {
        self.len == (0, u32::MAX) && self.bytes.is_empty()
    }

    /// The fact at `offset` (unknown when absent).
    pub fn byte(&self, offset: u16) -> ByteFact {
        self.bytes.get(&offset).copied().unwrap_or(ByteFact::UNKNOWN)
    }

    /// Set the fact at `offset`; an unknown fact removes the entry.
    pub fn set_byte(&mut self, offset: u16, fact: ByteFact) {
        if fact.is_unknown() {
            self.bytes.remove(&offset);
        } else {
            self.bytes.insert(offset, fact);
        }
    }

    /// Set bytes from `offset` on to `values`, all known (offsets past 65535 are dropped).
    pub fn set_known(&mut self, offset: u16, values: &[u8]) {
        for (k, v) in values.iter().enumerate() {
            if let Some(o) = offset.checked_add(k as u16) {
                self.set_byte(o, ByteFact::known(*v));
            }
        }
    }

    /// Drop facts that say nothing: unknown ones, and those about bytes no packet of the
    /// shape has.
    pub fn normalise(&mut self) {
        let max = self.len.1;
        self.bytes.retain(|o, f| !f.is_unknown() && (*o as u32) < max);
    }

    /// Known bits in all (how much the shape says about content).
    pub fn known_bits(&self) -> u32 {
        self.bytes.values().map(|f| f.known_bits()).sum()
    }

    /// Whether the concrete packet `p` is one this shape describes.
    pub fn admits(&self, p: &[u8]) -> bool {
        let len = u32::try_from(p.len()).unwrap_or(u32::MAX);
        (self.len.0..=self.len.1).contains(&len)
            && self.bytes.iter().all(|(o, f)| p.get(*o as usize).is_none_or(|b| f.admits(*b)))
    }

    /// Every packet this shape describes, `other` describes (⊑).
    pub fn implies(&self, other: &PacketShape) -> bool {
        other.len.0 <= self.len.0
            && self.len.1 <= other.len.1
            && other
                .bytes
                .iter()
                .all(|(o, f)| (*o as u32) >= self.len.1 || self.byte(*o).implies(*f))
    }

    /// The tightest shape describing every packet either describes.
    pub fn join(&self, other: &PacketShape) -> PacketShape {
        let mut out =
            PacketShape::with_len(self.len.0.min(other.len.0), self.len.1.max(other.len.1));
        for &o in self.bytes.keys().chain(other.bytes.keys()) {
            // A shape whose packets never reach byte `o` constrains nothing there.
            let reaches = |s: &PacketShape| (o as u32) < s.len.1;
            let fact = match (reaches(self), reaches(other)) {
                (true, true) => self.byte(o).join(other.byte(o)),
                (true, false) => self.byte(o),
                (false, true) => other.byte(o),
                (false, false) => ByteFact::UNKNOWN,
            };
            out.set_byte(o, fact);
        }
        out.normalise();
        out
    }

    /// Only the facts in `used`: a weaker shape (`self` implies it) that a consumer's guard
    /// needs to check.
    pub fn restrict(&self, used: &UsedFacts) -> PacketShape {
        let mut out =
            PacketShape { len: if used.len { self.len } else { (0, u32::MAX) }, ..Self::top() };
        for (o, bits) in &used.bits {
            out.set_byte(*o, self.byte(*o).restrict(*bits));
        }
        out.normalise();
        out
    }

    /// The shape as JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parse a shape from JSON text.
    pub fn from_json(text: &str) -> Result<Self, ShapeError> {
        let raw: RawShape = serde_json::from_str(text)?;
        PacketShape::try_from(raw)
    }
}

impl fmt::Display for PacketShape {
    /// `len [74, 1518]` and a table of known bytes, consecutive offsets on one row (at most 16).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "len [{}, {}]", self.len.0, self.len.1)?;
        if self.bytes.is_empty() {
            return write!(f, ", no byte known");
        }
        let mut row: Option<(u16, u16)> = None;
        for (&o, fact) in &self.bytes {
            match row {
                Some((start, last)) if last.checked_add(1) == Some(o) && o - start < 16 => {
                    row = Some((start, o));
                }
                _ => {
                    write!(f, "\n  {o:>5}:")?;
                    row = Some((o, o));
                }
            }
            write!(f, " {fact}")?;
        }
        Ok(())
    }
}

/// A shape or guarantee from outside that is not one.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    #[error("not a shape: {0}")]
    Json(#[from] serde_json::Error),
    #[error("`{0}` is not a byte offset (0..=65535)")]
    Offset(String),
    #[error("byte {offset}: {source}")]
    Byte { offset: u16, source: ByteTextError },
    #[error("the length interval [{min}, {max}] is empty")]
    EmptyLen { min: u32, max: u32 },
    #[error("shape {index}: {source}")]
    InShape { index: usize, source: Box<ShapeError> },
    #[error("no packet is {min} bytes long (at most {MAX_PACKET_LEN})")]
    TooLong { min: u32 },
    #[error("{count} known bytes: a shape names at most {MAX_FACTS}")]
    TooManyFacts { count: usize },
}

/// The longest packet a shape from outside may require (an IPv4 datagram's limit).
pub const MAX_PACKET_LEN: u32 = 65_535;
/// Known bytes a shape from outside may name: far more than any parser reads, few enough that
/// the analysis, which carries them on every path, stays fast.
pub const MAX_FACTS: usize = 1024;

/// A shape as its JSON spells it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShape {
    len: (u32, u32),
    #[serde(default)]
    bytes: BTreeMap<String, String>,
}

impl Serialize for PacketShape {
    /// Offsets in numeric order (a map keyed by strings would put "130" before "14").
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeStruct};
        struct Bytes<'a>(&'a BTreeMap<u16, ByteFact>);
        impl Serialize for Bytes<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(self.0.len()))?;
                for (o, f) in self.0 {
                    m.serialize_entry(&o.to_string(), &f.to_string())?;
                }
                m.end()
            }
        }
        let mut st = s.serialize_struct("PacketShape", 2)?;
        st.serialize_field("len", &[self.len.0, self.len.1])?;
        st.serialize_field("bytes", &Bytes(&self.bytes))?;
        st.end()
    }
}

impl TryFrom<RawShape> for PacketShape {
    type Error = ShapeError;

    fn try_from(raw: RawShape) -> Result<Self, ShapeError> {
        let (min, max) = raw.len;
        if min > max {
            return Err(ShapeError::EmptyLen { min, max });
        }
        if min > MAX_PACKET_LEN {
            return Err(ShapeError::TooLong { min });
        }
        if raw.bytes.len() > MAX_FACTS {
            return Err(ShapeError::TooManyFacts { count: raw.bytes.len() });
        }
        let mut shape = PacketShape::with_len(min, max);
        for (key, text) in raw.bytes {
            let offset: u16 =
                key.parse().map_err(|_| ShapeError::Offset(key.chars().take(16).collect()))?;
            let fact = text.parse().map_err(|source| ShapeError::Byte { offset, source })?;
            shape.set_byte(offset, fact);
        }
        shape.normalise();
        Ok(shape)
    }
}

/// A disjunction of shapes: every packet through the exits it describes matches one of them.
/// No shapes: no packet leaves that way (⊥). Kept small: no shape implies another, at most
/// [`MAX_SHAPES`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Guarantee {
    pub shapes: Vec<PacketShape>,
}

impl Guarantee {
    /// No packet.
    pub fn bottom() -> Self {
        Self::default()
    }

    /// Any packet.
    pub fn top() -> Self {
        Self::of(PacketShape::top())
    }

    pub fn of(shape: PacketShape) -> Self {
        let mut g = Self::bottom();
        g.add(shape);
        g
    }

    pub fn is_bottom(&self) -> bool {
        self.shapes.is_empty()
    }

    /// Whether nothing is known: some disjunct is the top shape.
    pub fn is_top(&self) -> bool {
        self.shapes.iter().any(PacketShape::is_top)
    }

    /// Add a disjunct: dropped when a shape already there covers it; shapes it covers go;
    /// past [`MAX_SHAPES`] the closest pair is joined.
    pub fn add(&mut self, mut shape: PacketShape) {
        shape.normalise();
        if self.shapes.iter().any(|s| shape.implies(s)) {
            return;
        }
        self.shapes.retain(|s| !s.implies(&shape));
        // Same bytes, touching lengths: one shape describes exactly both.
        while let Some(k) = self.shapes.iter().position(|s| {
            s.bytes == shape.bytes
                && s.len.0 <= shape.len.1.saturating_add(1)
                && shape.len.0 <= s.len.1.saturating_add(1)
        }) {
            let s = self.shapes.swap_remove(k);
            shape.len = (s.len.0.min(shape.len.0), s.len.1.max(shape.len.1));
            self.shapes.retain(|s| !s.implies(&shape));
        }
        self.shapes.push(shape);
        while self.shapes.len() > MAX_SHAPES {
            self.merge_closest();
        }
    }

    /// Join the two shapes whose join keeps the most known bits (ties: the narrower length).
    fn merge_closest(&mut self) {
        let mut best: Option<(usize, usize, PacketShape)> = None;
        let score = |s: &PacketShape| (s.known_bits(), u32::MAX - s.len.1.abs_diff(s.len.0));
        for i in 0..self.shapes.len() {
            for j in i + 1..self.shapes.len() {
                let joined = self.shapes[i].join(&self.shapes[j]);
                if best.as_ref().is_none_or(|(_, _, b)| score(&joined) > score(b)) {
                    best = Some((i, j, joined));
                }
            }
        }
        if let Some((i, j, joined)) = best {
            self.shapes.remove(j);
            self.shapes.remove(i);
            self.add(joined);
        }
    }

    /// Every packet either describes.
    pub fn join(&self, other: &Guarantee) -> Guarantee {
        let mut g = self.clone();
        for s in &other.shapes {
            g.add(s.clone());
        }
        g
    }

    /// One shape describing every packet this describes (`None` for ⊥).
    pub fn hull(&self) -> Option<PacketShape> {
        let mut it = self.shapes.iter();
        let first = it.next()?.clone();
        Some(it.fold(first, |acc, s| acc.join(s)))
    }

    /// Every packet this describes, `other` describes: checked disjunct by disjunct (each
    /// shape here implies one there), which is sufficient, not necessary.
    pub fn implies(&self, other: &Guarantee) -> bool {
        self.shapes.iter().all(|s| other.shapes.iter().any(|o| s.implies(o)))
    }

    /// Only the facts in `used`, per disjunct.
    pub fn restrict(&self, used: &UsedFacts) -> Guarantee {
        let mut g = Guarantee::bottom();
        for s in &self.shapes {
            g.add(s.restrict(used));
        }
        g
    }

    pub fn admits(&self, p: &[u8]) -> bool {
        self.shapes.iter().any(|s| s.admits(p))
    }

    /// `{"shapes":[...]}`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parse `{"shapes":[...]}`, or a single shape object. More than [`MAX_SHAPES`] shapes
    /// are accepted and joined down.
    pub fn from_json(text: &str) -> Result<Self, ShapeError> {
        let value: serde_json::Value = serde_json::from_str(text)?;
        Self::from_value(value)
    }

    pub fn from_value(value: serde_json::Value) -> Result<Self, ShapeError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct RawGuarantee {
            shapes: Vec<RawShape>,
        }
        let raws = if value.get("shapes").is_some() {
            serde_json::from_value::<RawGuarantee>(value)?.shapes
        } else {
            vec![serde_json::from_value::<RawShape>(value)?]
        };
        let mut g = Guarantee::bottom();
        for (index, raw) in raws.into_iter().enumerate() {
            let shape = PacketShape::try_from(raw)
                .map_err(|e| ShapeError::InShape { index, source: Box::new(e) })?;
            g.add(shape);
        }
        Ok(g)
    }
}

impl fmt::Display for Guarantee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.shapes.as_slice() {
            [] => write!(f, "no packet"),
            [one] => write!(f, "{one}"),
            many => {
                for (k, s) in many.iter().enumerate() {
                    if k > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "or {s}")?;
                }
                Ok(())
            }
        }
    }
}

pub mod guard;

pub use guard::{GuardWord, PacketGuard};

#[cfg(test)]
mod tests;
