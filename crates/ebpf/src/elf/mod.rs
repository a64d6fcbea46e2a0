//! Loading eBPF ELF objects as `clang -O2 -target bpf` writes them.
//!
//! Supported: program sections (`xdp`, `xdp/...`, any executable section; one program per
//! global function), bpf-to-bpf calls into `.text` or within the section, maps defined in
//! `.maps` (BTF) or the legacy `maps` section, and global data (`.data`, `.rodata*`, `.bss`)
//! as single-entry array maps, as libbpf does. Not supported (refused with a message):
//! CO-RE relocations, map-in-map, tail calls, function pointers.

mod btf;
mod error;

pub use btf::BtfError;
pub use error::ElfError;

use crate::insn::{op, pseudo, Insn};
use crate::maps::layout::MapLayout;
use crate::maps::{MapDef, MapKind};
use crate::program::{MapSpec, ProgramSpec};
use object::{
    Object, ObjectSection, ObjectSymbol, RelocationFlags, RelocationTarget, SectionIndex,
    SymbolKind, SymbolSection,
};
use std::collections::BTreeMap;
use std::sync::Arc;

const EM_BPF: u16 = 247;
/// `R_BPF_64_64`: the 64-bit immediate of an `lddw`.
const R_BPF_64_64: u32 = 1;
/// `R_BPF_64_32`: the 32-bit immediate of a call.
const R_BPF_64_32: u32 = 10;

/// Largest object accepted.
pub const MAX_OBJECT_BYTES: usize = 16 << 20;

/// A program found in an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramInfo {
    pub name: String,
    pub section: String,
    pub insns: usize,
}

/// What kind of section a map lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
enum MapSection {
    Legacy,
    /// With the layout of its key and value, when BTF describes them.
    Btf(Option<Arc<MapLayout>>),
    Data {
        read_only: bool,
    },
}

struct Sec<'d> {
    name: String,
    data: &'d [u8],
    executable: bool,
}

/// A parsed object: its sections, maps and programs.
pub struct ElfObject<'d> {
    file: object::File<'d>,
    sections: BTreeMap<usize, Sec<'d>>,
    /// Maps in declaration order, and for each map-holding section, (offset, map index).
    maps: Vec<MapSpec>,
    map_at: BTreeMap<(usize, u64), usize>,
    /// Data sections' map index.
    data_map: BTreeMap<usize, usize>,
    programs: Vec<(ProgramInfo, usize, u64)>,
    license: Option<String>,
}

fn malformed(what: &str, source: object::Error) -> ElfError {
    ElfError::Malformed { what: what.to_string(), source }
}

fn missing(map: &str, what: &'static str) -> ElfError {
    ElfError::MapMissing { map: map.to_string(), what }
}

fn symbol_name(sym: &object::Symbol<'_, '_>) -> String {
    sym.name().unwrap_or("?").to_string()
}

impl<'d> ElfObject<'d> {
    /// Parse an object; `data` must be 8-byte aligned (see [`Aligned`]).
    pub fn parse(data: &'d [u8]) -> Result<Self, ElfError> {
        if data.as_ptr() as usize % 8 != 0 {
            return Err(ElfError::Unaligned);
        }
        if data.len() > MAX_OBJECT_BYTES {
            return Err(ElfError::TooLarge { len: data.len() });
        }
        let file = object::File::parse(data).map_err(ElfError::NotElf)?;
        let object::File::Elf64(elf) = &file else {
            return Err(ElfError::Not64Bit);
        };
        let machine = elf.elf_header().e_machine.get(elf.endian());
        if machine != EM_BPF {
            return Err(ElfError::NotBpf { machine });
        }
        if !file.is_little_endian() {
            return Err(ElfError::BigEndian);
        }
        let mut sections = BTreeMap::new();
        for s in file.sections() {
            let name = s.name().map_err(|e| malformed("section name", e))?.to_string();
            let executable = matches!(s.kind(), object::SectionKind::Text);
            let data = if s.kind() == object::SectionKind::UninitializedData {
                &[][..]
            } else {
                s.data().map_err(|e| malformed(&format!("section {name}"), e))?
            };
            sections.insert(s.index().0, Sec { name, data, executable });
        }
        let mut obj = ElfObject {
            file,
            sections,
            maps: Vec::new(),
            map_at: BTreeMap::new(),
            data_map: BTreeMap::new(),
            programs: Vec::new(),
            license: None,
        };
        obj.find_license();
        obj.find_maps()?;
        obj.find_programs()?;
        Ok(obj)
    }

    fn find_license(&mut self) {
        self.license = self.sections.values().find(|s| s.name == "license").map(|s| {
            String::from_utf8_lossy(s.data.split(|b| *b == 0).next().unwrap_or(&[])).into_owned()
        });
    }

    pub fn license(&self) -> Option<&str> {
        self.license.as_deref()
    }

    pub fn programs(&self) -> Vec<ProgramInfo> {
        self.programs.iter().map(|(p, _, _)| p.clone()).collect()
    }

    pub fn maps(&self) -> &[MapSpec] {
        &self.maps
    }

    fn section_of(&self, name: &str) -> Option<usize> {
        self.sections.iter().find(|(_, s)| s.name == name).map(|(i, _)| *i)
    }

    fn find_maps(&mut self) -> Result<(), ElfError> {
        let btf = match self.section_of(".BTF") {
            Some(i) => Some(btf::Btf::parse(self.sections[&i].data).map_err(ElfError::BtfSection)?),
            None => None,
        };
        let mut found: Vec<(usize, u64, String, MapDef, MapSection)> = Vec::new();
        // One budget of layout parts for every map of the object.
        let mut layout_budget = crate::maps::layout::MAX_NODES;
        for sym in self.file.symbols() {
            let SymbolSection::Section(si) = sym.section() else { continue };
            let si = si.0;
            let Some(sec) = self.sections.get(&si) else { continue };
            if !matches!(sym.kind(), SymbolKind::Data | SymbolKind::Unknown)
                || sym.name().map_or(true, |n| n.is_empty())
            {
                continue;
            }
            let name = sym.name().map_err(|e| malformed("symbol name", e))?.to_string();
            match sec.name.as_str() {
                "maps" => {
                    // struct bpf_map_def { type, key_size, value_size, max_entries, map_flags }
                    let at = sym.address() as usize;
                    let word = |k: usize| -> Result<u32, ElfError> {
                        sec.data
                            .get(at + 4 * k..at + 4 * k + 4)
                            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                            .ok_or_else(|| ElfError::LegacyMapTruncated(name.clone()))
                    };
                    let kind = MapKind::from_linux(word(0)?)
                        .map_err(|source| ElfError::MapKind { map: name.clone(), source })?;
                    let def = MapDef {
                        kind,
                        key_size: word(1)?,
                        value_size: word(2)?,
                        max_entries: word(3)?,
                    };
                    found.push((si, sym.address(), name, def, MapSection::Legacy));
                }
                ".maps" => {
                    let btf = btf.as_ref().ok_or_else(|| ElfError::MapWithoutBtf(name.clone()))?;
                    let vars = btf.datasec(".maps")?;
                    let (_, ty, _, _) = vars
                        .iter()
                        .find(|(n, _, off, _)| *n == name || *off as u64 == sym.address())
                        .ok_or_else(|| ElfError::MapUndescribed(name.clone()))?;
                    let m = btf
                        .map_members(*ty)
                        .map_err(|source| ElfError::MapBtf { map: name.clone(), source })?;
                    let num = |k: &str| match m.get(k) {
                        Some(btf::Member::Number(n)) => Some(*n),
                        _ => None,
                    };
                    let size = |k: &str, explicit: &str| match (m.get(k), num(explicit)) {
                        (Some(btf::Member::Type { size, .. }), _) => Some(*size),
                        (_, Some(n)) => Some(n),
                        _ => None,
                    };
                    if m.contains_key("values") || m.contains_key("inner_map") {
                        return Err(ElfError::MapOfMaps(name));
                    }
                    let t = num("type").ok_or_else(|| missing(&name, "type"))?;
                    let kind = MapKind::from_linux(t)
                        .map_err(|source| ElfError::MapKind { map: name.clone(), source })?;
                    // Linux lets devmaps omit the key/value types.
                    let (dk, dv) =
                        if kind == MapKind::DevMap { (Some(4), Some(4)) } else { (None, None) };
                    let def = MapDef {
                        kind,
                        key_size: size("key", "key_size")
                            .or(dk)
                            .ok_or_else(|| missing(&name, "key type or size"))?,
                        value_size: size("value", "value_size")
                            .or(dv)
                            .ok_or_else(|| missing(&name, "value type or size"))?,
                        max_entries: num("max_entries")
                            .ok_or_else(|| missing(&name, "max_entries"))?,
                    };
                    // Shown only where BTF's type is the size the map has.
                    let mut layout_of = |k: &str, size: u32| match m.get(k) {
                        Some(btf::Member::Type { id, .. }) => btf
                            .layout(*id, &mut layout_budget)
                            .ok()
                            .filter(|l| l.size() == size as u64),
                        _ => None,
                    };
                    let layout = MapLayout {
                        key: layout_of("key", def.key_size),
                        value: layout_of("value", def.value_size),
                    };
                    let layout =
                        (layout.key.is_some() || layout.value.is_some()).then(|| Arc::new(layout));
                    found.push((si, sym.address(), name, def, MapSection::Btf(layout)));
                }
                _ => {}
            }
        }
        // Global data: one single-entry array per section that has bytes or symbols.
        for (si, sec) in &self.sections {
            let n = sec.name.as_str();
            let read_only = n.starts_with(".rodata");
            if !(read_only
                || n == ".data"
                || n.starts_with(".data.")
                || n == ".bss"
                || n.starts_with(".bss."))
            {
                continue;
            }
            let size = match self.file.section_by_index(SectionIndex(*si)) {
                Ok(s) => s.size(),
                Err(_) => continue,
            };
            if size == 0 {
                continue;
            }
            let size = u32::try_from(size).map_err(|_| ElfError::SectionTooLarge(n.to_string()))?;
            let def =
                MapDef { kind: MapKind::Array, key_size: 4, value_size: size, max_entries: 1 };
            found.push((*si, u64::MAX, n.to_string(), def, MapSection::Data { read_only }));
        }
        found.sort_by_key(|a| (a.0, a.1));
        for (si, off, name, def, kind) in found {
            let idx = self.maps.len();
            let init = match kind {
                MapSection::Data { .. } => {
                    let d = self.sections[&si].data;
                    let mut v = d.to_vec();
                    v.resize(def.value_size as usize, 0);
                    Some(v)
                }
                _ => None,
            };
            let reinit = matches!(kind, MapSection::Data { read_only: true });
            let layout = match kind {
                MapSection::Btf(layout) => layout,
                _ => None,
            };
            self.maps.push(MapSpec { name, def, init, reinit, layout });
            if off == u64::MAX {
                self.data_map.insert(si, idx);
            } else {
                self.map_at.insert((si, off), idx);
            }
        }
        Ok(())
    }

    fn find_programs(&mut self) -> Result<(), ElfError> {
        for sym in self.file.symbols() {
            let SymbolSection::Section(si) = sym.section() else { continue };
            let si = si.0;
            let Some(sec) = self.sections.get(&si) else { continue };
            if sym.kind() != SymbolKind::Text
                || !sec.executable
                || sec.name == ".text"
                || !sym.is_global()
            {
                continue;
            }
            let name = sym.name().map_err(|e| malformed("symbol name", e))?.to_string();
            let size = if sym.size() > 0 {
                sym.size()
            } else {
                sec.data.len() as u64 - sym.address().min(sec.data.len() as u64)
            };
            self.programs.push((
                ProgramInfo { name, section: sec.name.clone(), insns: (size / 8) as usize },
                si,
                sym.address(),
            ));
        }
        // A section without symbols (hand-written objects) is one program.
        for (si, sec) in &self.sections {
            if sec.executable
                && sec.name != ".text"
                && !self.programs.iter().any(|(_, s, _)| s == si)
                && !sec.data.is_empty()
            {
                self.programs.push((
                    ProgramInfo {
                        name: sec.name.replace('/', "_"),
                        section: sec.name.clone(),
                        insns: sec.data.len() / 8,
                    },
                    *si,
                    0,
                ));
            }
        }
        if self.programs.is_empty()
            && self.section_of(".text").is_some_and(|t| !self.sections[&t].data.is_empty())
        {
            let t = self.section_of(".text").unwrap_or(0);
            let name = self
                .file
                .symbols()
                .find(|s| {
                    s.section() == SymbolSection::Section(SectionIndex(t))
                        && s.kind() == SymbolKind::Text
                        && s.address() == 0
                        && s.is_global()
                })
                .and_then(|s| s.name().ok().map(str::to_string))
                .unwrap_or_else(|| "text".into());
            self.programs.push((
                ProgramInfo {
                    name,
                    section: ".text".into(),
                    insns: self.sections[&t].data.len() / 8,
                },
                t,
                0,
            ));
        }
        Ok(())
    }

    /// The program named `name` (a function or section name), or the only / first XDP
    /// program when `None`.
    pub fn program(&self, name: Option<&str>) -> Result<ProgramSpec, ElfError> {
        let pick = match name {
            Some(n) => self.programs.iter().find(|(p, _, _)| p.name == n || p.section == n),
            None => self
                .programs
                .iter()
                .find(|(p, _, _)| p.section == "xdp" || p.section.starts_with("xdp"))
                .or(self.programs.first()),
        };
        let Some((info, si, start)) = pick else {
            let programs: Vec<String> = self
                .programs
                .iter()
                .map(|(p, _, _)| format!("{} ({})", p.name, p.section))
                .collect();
            return Err(match name {
                Some(n) => ElfError::NoSuchProgram { name: n.to_string(), programs },
                None => ElfError::NoProgram,
            });
        };
        self.assemble(info, *si, *start)
    }

    fn insns_of(&self, si: usize) -> Result<Vec<Insn>, ElfError> {
        let d = self.sections[&si].data;
        if d.len() % 8 != 0 {
            return Err(ElfError::PartialInsn(self.sections[&si].name.clone()));
        }
        Ok(d.chunks_exact(8)
            .map(|c| Insn::from_u64(u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))))
            .collect())
    }

    /// Relocations of section `si` as (instruction index, r_type, symbol).
    fn relocations(
        &self,
        si: usize,
    ) -> Result<Vec<(usize, u32, object::Symbol<'d, '_>)>, ElfError> {
        let sec = self.file.section_by_index(SectionIndex(si)).map_err(ElfError::Section)?;
        let mut out = Vec::new();
        for (off, r) in sec.relocations() {
            let RelocationFlags::Elf { r_type } = r.flags() else { continue };
            let RelocationTarget::Symbol(sym) = r.target() else {
                return Err(ElfError::RelocationWithoutSymbol {
                    section: self.sections[&si].name.clone(),
                    offset: off,
                });
            };
            let sym =
                self.file.symbol_by_index(sym).map_err(|e| malformed("relocation symbol", e))?;
            if off % 8 != 0 {
                return Err(ElfError::RelocationMisaligned {
                    section: self.sections[&si].name.clone(),
                    offset: off,
                });
            }
            out.push(((off / 8) as usize, r_type, sym));
        }
        Ok(out)
    }

    fn assemble(&self, info: &ProgramInfo, si: usize, start: u64) -> Result<ProgramSpec, ElfError> {
        let section = self.insns_of(si)?;
        let first = (start / 8) as usize;
        let last = (first + info.insns).min(section.len());
        if first >= last {
            return Err(ElfError::EmptyProgram(info.name.clone()));
        }
        let mut insns: Vec<Insn> = section[first..last].to_vec();
        let text = self.section_of(".text").filter(|t| *t != si);
        let mut text_base: Option<usize> = None;
        // Relocate the program's own range, then `.text` if it is pulled in.
        let mut pending = vec![(si, first, 0usize, last - first)];
        while let Some((sec, sec_first, base, len)) = pending.pop() {
            for (idx, r_type, sym) in self.relocations(sec)? {
                if idx < sec_first || idx >= sec_first + len {
                    continue;
                }
                let at = base + idx - sec_first;
                let i = insns[at];
                match r_type {
                    R_BPF_64_64 if i.is_lddw() => {
                        let SymbolSection::Section(SectionIndex(ts)) = sym.section() else {
                            return Err(ElfError::UndefinedLddw { at, symbol: symbol_name(&sym) });
                        };
                        if let Some(&m) = self.map_at.get(&(ts, sym.address())) {
                            insns[at] = Insn::new(op::LDDW, i.dst, pseudo::MAP_FD, 0, m as i32);
                            insns[at + 1] = Insn::new(0, 0, 0, 0, 0);
                        } else if let Some(&m) = self.data_map.get(&ts) {
                            let off = sym.address() as i64 + i.imm as i64;
                            insns[at] = Insn::new(op::LDDW, i.dst, pseudo::MAP_VALUE, 0, m as i32);
                            insns[at + 1] = Insn::new(0, 0, 0, 0, off as i32);
                        } else {
                            let what = self.sections.get(&ts).map_or("?", |s| s.name.as_str());
                            return Err(ElfError::LddwTarget {
                                at,
                                symbol: symbol_name(&sym),
                                section: what.to_string(),
                            });
                        }
                    }
                    R_BPF_64_32 | R_BPF_64_64 if i.code == op::CALL && i.src == pseudo::CALL => {
                        let SymbolSection::Section(SectionIndex(ts)) = sym.section() else {
                            return Err(ElfError::UndefinedCall { at, symbol: symbol_name(&sym) });
                        };
                        let target_in_sec = (sym.address() / 8) as i64 + i.imm as i64 + 1;
                        let target = if ts == sec && sec == si {
                            target_in_sec - first as i64
                        } else if Some(ts) == text {
                            let b = match text_base {
                                Some(b) => b,
                                None => {
                                    let t = self.insns_of(ts)?;
                                    let b = insns.len();
                                    let n = t.len();
                                    insns.extend(t);
                                    text_base = Some(b);
                                    pending.push((ts, 0, b, n));
                                    b
                                }
                            };
                            b as i64 + target_in_sec
                        } else if ts == sec {
                            base as i64 + target_in_sec
                        } else {
                            return Err(ElfError::CallIntoSection {
                                at,
                                section: self
                                    .sections
                                    .get(&ts)
                                    .map_or("?", |s| s.name.as_str())
                                    .to_string(),
                            });
                        };
                        insns[at].imm = (target - at as i64 - 1) as i32;
                    }
                    // Debug-info and BTF relocations do not touch code.
                    _ if !(i.is_lddw() || i.code == op::CALL && i.src == pseudo::CALL) => {}
                    t => return Err(ElfError::RelocationType { at, r_type: t }),
                }
            }
        }
        // Calls within the program that need no relocation may still point into `.text`
        // when the program itself is in `.text`; anything outside is caught by the verifier.
        let mut maps = self.maps.clone();
        for m in &mut maps {
            m.name = format!("{}/{}", info.name, m.name);
        }
        Ok(ProgramSpec { name: info.name.clone(), insns, maps })
    }
}

/// Object bytes copied to 8-byte aligned memory, as the ELF reader needs (bytes from a
/// network buffer or `include_bytes!` need not be aligned).
pub struct Aligned {
    words: Vec<u64>,
    len: usize,
}

impl Aligned {
    pub fn copy(data: &[u8]) -> Self {
        let mut words = vec![0u64; data.len().div_ceil(8)];
        // SAFETY: `words` holds at least data.len() bytes; u64 has no invalid bit patterns.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), words.as_mut_ptr() as *mut u8, data.len())
        };
        Self { words, len: data.len() }
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the first `len` bytes of `words` were initialised by `copy`.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr() as *const u8, self.len) }
    }
}

/// Load program `name` (or the first XDP program) from object bytes.
pub fn load(data: &[u8], name: Option<&str>) -> Result<ProgramSpec, ElfError> {
    if data.len() > MAX_OBJECT_BYTES {
        return Err(ElfError::TooLarge { len: data.len() });
    }
    let a = Aligned::copy(data);
    ElfObject::parse(a.bytes())?.program(name)
}
