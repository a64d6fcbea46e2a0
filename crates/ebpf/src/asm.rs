//! An assembler and a disassembler for the ubpf-style text syntax of the eBPF conformance
//! suite: `mov %r0, 1`, `ldxdw %r1, [%r10-8]`, `lock fetch add [%r10-8], %r1`, `jeq %r1, 3, out`,
//! `call local f`, `call 5`, `call %r2`, `lddw %r0, 0x1122334455667788`, labels `name:`,
//! comments from `#`.

use crate::insn::{alu, atomic, class, jmp, mem, op, pseudo, Insn, SRC_K, SRC_X};
use std::collections::HashMap;

/// An assembly error with its (1-based) line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {msg}")]
pub struct AsmError {
    pub line: usize,
    pub msg: String,
}

/// An operand that does not parse; [`AsmError`] adds the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum OperandError {
    #[error("`{0}` is not a register")]
    NotARegister(String),
    #[error("register r{0} does not exist (r0..r10)")]
    NoSuchRegister(u8),
    #[error("`{0}` is not a number")]
    NotANumber(String),
    #[error("`{0}` does not fit in 32 bits")]
    Over32Bits(String),
    #[error("`{0}` is not a memory operand [%rN+off]")]
    NotMemory(String),
    #[error("offset {0} does not fit in 16 bits")]
    Offset16(i128),
}

fn alu_op(name: &str) -> Option<(u8, i16)> {
    Some(match name {
        "add" => (alu::ADD, 0),
        "sub" => (alu::SUB, 0),
        "mul" => (alu::MUL, 0),
        "div" => (alu::DIV, 0),
        "sdiv" => (alu::DIV, 1),
        "or" => (alu::OR, 0),
        "and" => (alu::AND, 0),
        "lsh" => (alu::LSH, 0),
        "rsh" => (alu::RSH, 0),
        "mod" => (alu::MOD, 0),
        "smod" => (alu::MOD, 1),
        "xor" => (alu::XOR, 0),
        "mov" => (alu::MOV, 0),
        "arsh" => (alu::ARSH, 0),
        _ => return None,
    })
}

fn jmp_op(name: &str) -> Option<u8> {
    Some(match name {
        "jeq" => jmp::JEQ,
        "jgt" => jmp::JGT,
        "jge" => jmp::JGE,
        "jset" => jmp::JSET,
        "jne" => jmp::JNE,
        "jsgt" => jmp::JSGT,
        "jsge" => jmp::JSGE,
        "jlt" => jmp::JLT,
        "jle" => jmp::JLE,
        "jslt" => jmp::JSLT,
        "jsle" => jmp::JSLE,
        _ => return None,
    })
}

fn size_of_suffix(s: &str) -> Option<u8> {
    Some(match s {
        "b" => mem::B,
        "h" => mem::H,
        "w" => mem::W,
        "dw" => mem::DW,
        _ => return None,
    })
}

fn parse_reg(s: &str) -> Result<u8, OperandError> {
    let s = s.trim();
    let n = s
        .strip_prefix("%r")
        .or_else(|| s.strip_prefix('r'))
        .ok_or_else(|| OperandError::NotARegister(s.to_string()))?;
    let r: u8 = n.parse().map_err(|_| OperandError::NotARegister(s.to_string()))?;
    if r > 10 {
        return Err(OperandError::NoSuchRegister(r));
    }
    Ok(r)
}

fn parse_int(s: &str) -> Result<i128, OperandError> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i128::from_str_radix(h, 16)
    } else {
        body.parse::<i128>()
    }
    .map_err(|_| OperandError::NotANumber(s.to_string()))?;
    Ok(if neg { -v } else { v })
}

/// A 32-bit immediate: any value that fits in i32 or u32 (as a bit pattern).
fn parse_imm32(s: &str) -> Result<i32, OperandError> {
    let v = parse_int(s)?;
    if (i32::MIN as i128..=u32::MAX as i128).contains(&v) {
        Ok(v as i64 as u32 as i32)
    } else {
        Err(OperandError::Over32Bits(s.to_string()))
    }
}

/// `[%rN+off]` -> (reg, off)
fn parse_mem(s: &str) -> Result<(u8, i16), OperandError> {
    let inner = s
        .trim()
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .ok_or_else(|| OperandError::NotMemory(s.to_string()))?;
    let (reg, off) = match inner.find(['+', '-']) {
        Some(i) => (&inner[..i], parse_int(&inner[i..])?),
        None => (inner, 0),
    };
    let off = i16::try_from(off).map_err(|_| OperandError::Offset16(off))?;
    Ok((parse_reg(reg)?, off))
}

fn is_reg(s: &str) -> bool {
    let s = s.trim();
    s.starts_with("%r")
        || (s.starts_with('r') && s[1..].chars().all(|c| c.is_ascii_digit()) && s.len() > 1)
}

struct Line<'a> {
    no: usize,
    mnemonic: String,
    operands: Vec<&'a str>,
}

/// Number of slots an instruction line takes.
fn slots(mnemonic: &str) -> usize {
    if mnemonic == "lddw" {
        2
    } else {
        1
    }
}

/// Assemble text into instructions.
pub fn assemble(text: &str) -> Result<Vec<Insn>, AsmError> {
    let mut labels: HashMap<String, usize> = HashMap::new();
    let mut lines = Vec::new();
    let mut pc = 0usize;
    for (i, raw) in text.lines().enumerate() {
        let no = i + 1;
        let code = raw.split('#').next().unwrap_or("").trim();
        if code.is_empty() {
            continue;
        }
        if let Some(label) = code.strip_suffix(':') {
            let label = label.trim();
            if label.is_empty() || label.contains(char::is_whitespace) {
                return Err(AsmError { line: no, msg: format!("`{code}` is not a label") });
            }
            if labels.insert(label.to_string(), pc).is_some() {
                return Err(AsmError { line: no, msg: format!("label `{label}` defined twice") });
            }
            continue;
        }
        let (mnemonic, rest) = match code.split_once(char::is_whitespace) {
            Some((m, r)) => (m.to_string(), r.trim()),
            None => (code.to_string(), ""),
        };
        // `lock [fetch] op` is one mnemonic.
        let (mnemonic, rest) = if mnemonic == "lock" {
            let mut words = rest.splitn(3, char::is_whitespace);
            let w1 = words.next().unwrap_or("");
            if w1 == "fetch" {
                let w2 = words.next().unwrap_or("");
                (format!("lock fetch {w2}"), words.next().unwrap_or("").trim())
            } else {
                let r = rest[w1.len()..].trim();
                (format!("lock {w1}"), r)
            }
        } else {
            (mnemonic, rest)
        };
        let operands: Vec<&str> =
            if rest.is_empty() { Vec::new() } else { rest.split(',').map(str::trim).collect() };
        pc += slots(&mnemonic);
        lines.push(Line { no, mnemonic, operands });
    }
    // As in ubpf's assembler, `exit` names the program's (last) exit when no label does.
    if !labels.contains_key("exit") {
        let mut at = 0;
        for l in &lines {
            if l.mnemonic == "exit" {
                labels.insert("exit".into(), at);
            }
            at += slots(&l.mnemonic);
        }
    }
    let mut out = Vec::with_capacity(pc);
    for l in &lines {
        let err = |msg: String| AsmError { line: l.no, msg };
        let operand = |e: OperandError| err(e.to_string());
        let here = out.len();
        let target = |s: &str| -> Result<i64, AsmError> {
            let s = s.trim();
            if s.starts_with('+') || s.starts_with('-') || s.chars().all(|c| c.is_ascii_digit()) {
                return parse_int(s).map(|v| v as i64).map_err(operand);
            }
            let t = *labels.get(s).ok_or_else(|| err(format!("no label `{s}`")))?;
            Ok(t as i64 - here as i64 - 1)
        };
        let off16 = |v: i64| {
            i16::try_from(v).map_err(|_| err(format!("jump of {v} does not fit in 16 bits")))
        };
        let n = |want: usize| -> Result<(), AsmError> {
            if l.operands.len() == want {
                Ok(())
            } else {
                Err(err(format!(
                    "`{}` takes {want} operand(s), got {}",
                    l.mnemonic,
                    l.operands.len()
                )))
            }
        };
        let m = l.mnemonic.as_str();
        let ops = &l.operands;
        // ALU
        let (base, is32) = match m.strip_suffix("32") {
            Some(b) if alu_op(b).is_some() || b == "neg" => (b, true),
            _ => (m, false),
        };
        let cls = if is32 { class::ALU } else { class::ALU64 };
        if let Some((aop, aoff)) = alu_op(base) {
            n(2)?;
            let dst = parse_reg(ops[0]).map_err(operand)?;
            if is_reg(ops[1]) {
                let src = parse_reg(ops[1]).map_err(operand)?;
                out.push(Insn::new(cls | aop | SRC_X, dst, src, aoff, 0));
            } else {
                out.push(Insn::new(
                    cls | aop | SRC_K,
                    dst,
                    0,
                    aoff,
                    parse_imm32(ops[1]).map_err(operand)?,
                ));
            }
            continue;
        }
        if base == "neg" {
            n(1)?;
            out.push(Insn::new(cls | alu::NEG, parse_reg(ops[0]).map_err(operand)?, 0, 0, 0));
            continue;
        }
        // movsx<from><to>
        if let Some(w) = m.strip_prefix("movsx") {
            n(2)?;
            let (from, cls) = match w {
                "832" => (8, class::ALU),
                "1632" => (16, class::ALU),
                "864" => (8, class::ALU64),
                "1664" => (16, class::ALU64),
                "3264" => (32, class::ALU64),
                _ => return Err(err(format!("unknown instruction `{m}`"))),
            };
            let (dst, src) =
                (parse_reg(ops[0]).map_err(operand)?, parse_reg(ops[1]).map_err(operand)?);
            out.push(Insn::new(cls | alu::MOV | SRC_X, dst, src, from, 0));
            continue;
        }
        // byte order
        let endian = |prefix: &str| {
            m.strip_prefix(prefix)
                .and_then(|w| w.parse::<i32>().ok())
                .filter(|w| [16, 32, 64].contains(w))
        };
        if let Some(w) = endian("le") {
            n(1)?;
            out.push(Insn::new(
                class::ALU | alu::END | SRC_K,
                parse_reg(ops[0]).map_err(operand)?,
                0,
                0,
                w,
            ));
            continue;
        }
        if let Some(w) = endian("be") {
            n(1)?;
            out.push(Insn::new(
                class::ALU | alu::END | SRC_X,
                parse_reg(ops[0]).map_err(operand)?,
                0,
                0,
                w,
            ));
            continue;
        }
        if let Some(w) = endian("bswap").or_else(|| endian("swap")) {
            n(1)?;
            out.push(Insn::new(
                class::ALU64 | alu::END,
                parse_reg(ops[0]).map_err(operand)?,
                0,
                0,
                w,
            ));
            continue;
        }
        // loads and stores
        if let Some(sz) = m.strip_prefix("ldxs").and_then(size_of_suffix).filter(|_| m != "ldxsdw")
        {
            n(2)?;
            let dst = parse_reg(ops[0]).map_err(operand)?;
            let (src, off) = parse_mem(ops[1]).map_err(operand)?;
            out.push(Insn::new(class::LDX | mem::MEMSX | sz, dst, src, off, 0));
            continue;
        }
        if let Some(sz) = m.strip_prefix("ldx").and_then(size_of_suffix) {
            n(2)?;
            let dst = parse_reg(ops[0]).map_err(operand)?;
            let (src, off) = parse_mem(ops[1]).map_err(operand)?;
            out.push(Insn::new(class::LDX | mem::MEM | sz, dst, src, off, 0));
            continue;
        }
        if let Some(sz) = m.strip_prefix("stx").and_then(size_of_suffix) {
            n(2)?;
            let (dst, off) = parse_mem(ops[0]).map_err(operand)?;
            let src = parse_reg(ops[1]).map_err(operand)?;
            out.push(Insn::new(class::STX | mem::MEM | sz, dst, src, off, 0));
            continue;
        }
        if let Some(sz) = m.strip_prefix("st").and_then(size_of_suffix) {
            n(2)?;
            let (dst, off) = parse_mem(ops[0]).map_err(operand)?;
            out.push(Insn::new(
                class::ST | mem::MEM | sz,
                dst,
                0,
                off,
                parse_imm32(ops[1]).map_err(operand)?,
            ));
            continue;
        }
        if let Some(a) = m.strip_prefix("lock ") {
            n(2)?;
            let (fetch, a) = match a.strip_prefix("fetch ") {
                Some(a) => (atomic::FETCH, a),
                None => (0, a),
            };
            let (a, sz) = match a.strip_suffix("32") {
                Some(a) => (a, mem::W),
                None => (a, mem::DW),
            };
            let imm = match a {
                "add" => atomic::ADD | fetch,
                "or" => atomic::OR | fetch,
                "and" => atomic::AND | fetch,
                "xor" => atomic::XOR | fetch,
                "xchg" => atomic::XCHG,
                "cmpxchg" => atomic::CMPXCHG,
                _ => return Err(err(format!("unknown atomic operation `{a}`"))),
            };
            let (dst, off) = parse_mem(ops[0]).map_err(operand)?;
            let src = parse_reg(ops[1]).map_err(operand)?;
            out.push(Insn::new(class::STX | mem::ATOMIC | sz, dst, src, off, imm));
            continue;
        }
        match m {
            "lddw" => {
                n(2)?;
                let dst = parse_reg(ops[0]).map_err(operand)?;
                // `map N` and `map_value N + OFF`: map references, as the disassembler prints them.
                if let Some(rest) = ops[1].strip_prefix("map_value") {
                    let (m, off) = rest
                        .split_once('+')
                        .ok_or_else(|| err("expected `map_value N + OFF`".into()))?;
                    let (m, off) = (
                        parse_int(m.trim()).map_err(operand)?,
                        parse_int(off.trim()).map_err(operand)?,
                    );
                    out.push(Insn::new(op::LDDW, dst, pseudo::MAP_VALUE, 0, m as i32));
                    out.push(Insn::new(0, 0, 0, 0, off as i32));
                    continue;
                }
                if let Some(m) = ops[1].strip_prefix("map ") {
                    let m = parse_int(m.trim()).map_err(operand)?;
                    out.push(Insn::new(op::LDDW, dst, pseudo::MAP_FD, 0, m as i32));
                    out.push(Insn::new(0, 0, 0, 0, 0));
                    continue;
                }
                let v = parse_int(ops[1]).map_err(operand)?;
                if !(i64::MIN as i128..=u64::MAX as i128).contains(&v) {
                    return Err(err(format!("`{}` does not fit in 64 bits", ops[1])));
                }
                let v = v as i64 as u64;
                out.push(Insn::new(op::LDDW, dst, 0, 0, v as u32 as i32));
                out.push(Insn::new(0, 0, 0, 0, (v >> 32) as u32 as i32));
                continue;
            }
            "exit" => {
                n(0)?;
                out.push(Insn::new(op::EXIT, 0, 0, 0, 0));
                continue;
            }
            "ja" => {
                n(1)?;
                out.push(Insn::new(op::JA, 0, 0, off16(target(ops[0])?)?, 0));
                continue;
            }
            "ja32" => {
                n(1)?;
                let t = target(ops[0])?;
                let t = i32::try_from(t).map_err(|_| err("jump does not fit in 32 bits".into()))?;
                out.push(Insn::new(op::JA32, 0, 0, 0, t));
                continue;
            }
            "call" => {
                if ops.len() == 1 && ops[0].starts_with("local ") {
                    let t = target(&ops[0]["local ".len()..])?;
                    out.push(Insn::new(op::CALL, 0, pseudo::CALL, 0, t as i32));
                } else if ops.len() == 1 && ops[0].starts_with("local") {
                    return Err(err("`call local` needs a label".into()));
                } else {
                    n(1)?;
                    if is_reg(ops[0]) {
                        out.push(Insn::new(
                            op::CALLX,
                            parse_reg(ops[0]).map_err(operand)?,
                            0,
                            0,
                            0,
                        ));
                    } else {
                        out.push(Insn::new(
                            op::CALL,
                            0,
                            0,
                            0,
                            parse_imm32(ops[0]).map_err(operand)?,
                        ));
                    }
                }
                continue;
            }
            _ => {}
        }
        let (jbase, j32) = match m.strip_suffix("32") {
            Some(b) if jmp_op(b).is_some() => (b, true),
            _ => (m, false),
        };
        if let Some(jop) = jmp_op(jbase) {
            n(3)?;
            let cls = if j32 { class::JMP32 } else { class::JMP };
            let dst = parse_reg(ops[0]).map_err(operand)?;
            let off = off16(target(ops[2])?)?;
            if is_reg(ops[1]) {
                out.push(Insn::new(
                    cls | jop | SRC_X,
                    dst,
                    parse_reg(ops[1]).map_err(operand)?,
                    off,
                    0,
                ));
            } else {
                out.push(Insn::new(
                    cls | jop | SRC_K,
                    dst,
                    0,
                    off,
                    parse_imm32(ops[1]).map_err(operand)?,
                ));
            }
            continue;
        }
        return Err(err(format!("unknown instruction `{m}`")));
    }
    Ok(out)
}

const ALU_NAMES: [(u8, &str); 13] = [
    (alu::ADD, "add"),
    (alu::SUB, "sub"),
    (alu::MUL, "mul"),
    (alu::DIV, "div"),
    (alu::OR, "or"),
    (alu::AND, "and"),
    (alu::LSH, "lsh"),
    (alu::RSH, "rsh"),
    (alu::MOD, "mod"),
    (alu::XOR, "xor"),
    (alu::MOV, "mov"),
    (alu::ARSH, "arsh"),
    (alu::NEG, "neg"),
];

const JMP_NAMES: [(u8, &str); 11] = [
    (jmp::JEQ, "jeq"),
    (jmp::JGT, "jgt"),
    (jmp::JGE, "jge"),
    (jmp::JSET, "jset"),
    (jmp::JNE, "jne"),
    (jmp::JSGT, "jsgt"),
    (jmp::JSGE, "jsge"),
    (jmp::JLT, "jlt"),
    (jmp::JLE, "jle"),
    (jmp::JSLT, "jslt"),
    (jmp::JSLE, "jsle"),
];

fn size_name(i: Insn) -> &'static str {
    match i.code & 0x18 {
        mem::W => "w",
        mem::H => "h",
        mem::B => "b",
        _ => "dw",
    }
}

fn memop(r: u8, off: i16) -> String {
    match off {
        0 => format!("[%r{r}]"),
        o if o > 0 => format!("[%r{r}+{o}]"),
        o => format!("[%r{r}{o}]"),
    }
}

fn imm(v: i32) -> String {
    if (-4096..=4096).contains(&v) {
        v.to_string()
    } else {
        format!("{:#x}", v as u32)
    }
}

/// One instruction as text (the second slot of `lddw` is part of the first). Jumps print their
/// PC-relative offset (`+3`); `disassemble` turns them into labels.
pub fn disasm_insn(i: Insn, next: Option<Insn>) -> String {
    let cls = i.class();
    let x = i.is_src_reg();
    match cls {
        class::ALU | class::ALU64 => {
            let sfx = if cls == class::ALU { "32" } else { "" };
            let op = i.op();
            if op == alu::END {
                let name = match (cls, x) {
                    (class::ALU64, _) => "bswap",
                    (_, false) => "le",
                    (_, true) => "be",
                };
                return format!("{name}{} %r{}", i.imm, i.dst);
            }
            if op == alu::MOV && x && i.off != 0 {
                return format!(
                    "movsx{}{} %r{}, %r{}",
                    i.off,
                    if cls == class::ALU { 32 } else { 64 },
                    i.dst,
                    i.src
                );
            }
            let mut name =
                ALU_NAMES.iter().find(|(o, _)| *o == op).map_or("?alu", |(_, n)| n).to_string();
            if (op == alu::DIV || op == alu::MOD) && i.off == 1 {
                name = format!("s{name}");
            }
            if op == alu::NEG {
                return format!("neg{sfx} %r{}", i.dst);
            }
            if x {
                format!("{name}{sfx} %r{}, %r{}", i.dst, i.src)
            } else {
                format!("{name}{sfx} %r{}, {}", i.dst, imm(i.imm))
            }
        }
        class::LDX => {
            let s = if i.mem_mode() == mem::MEMSX { "s" } else { "" };
            format!("ldx{s}{} %r{}, {}", size_name(i), i.dst, memop(i.src, i.off))
        }
        class::ST => format!("st{} {}, {}", size_name(i), memop(i.dst, i.off), imm(i.imm)),
        class::STX if i.mem_mode() == mem::ATOMIC => {
            let w = if i.code & 0x18 == mem::W { "32" } else { "" };
            let name = match i.imm {
                atomic::XCHG => "xchg".to_string(),
                atomic::CMPXCHG => "cmpxchg".to_string(),
                v => {
                    let base = match v & !atomic::FETCH {
                        atomic::ADD => "add",
                        atomic::OR => "or",
                        atomic::AND => "and",
                        atomic::XOR => "xor",
                        _ => "?",
                    };
                    if v & atomic::FETCH != 0 {
                        format!("fetch {base}")
                    } else {
                        base.to_string()
                    }
                }
            };
            format!("lock {name}{w} {}, %r{}", memop(i.dst, i.off), i.src)
        }
        class::STX => format!("stx{} {}, %r{}", size_name(i), memop(i.dst, i.off), i.src),
        class::LD if i.is_lddw() => {
            let hi = next.map_or(0, |n| n.imm as u32 as u64);
            let v = (hi << 32) | i.imm as u32 as u64;
            match i.src {
                pseudo::MAP_FD => format!("lddw %r{}, map {}", i.dst, i.imm),
                pseudo::MAP_VALUE => format!("lddw %r{}, map_value {} + {}", i.dst, i.imm, hi),
                pseudo::MAP_ENTRY => format!("lddw %r{}, map_entry {} slot {}", i.dst, i.imm, hi),
                _ => format!("lddw %r{}, {v:#x}", i.dst),
            }
        }
        class::JMP | class::JMP32 => {
            let op = i.op();
            let sfx = if cls == class::JMP32 { "32" } else { "" };
            let rel = |o: i64| if o >= 0 { format!("+{o}") } else { o.to_string() };
            match op {
                jmp::JA if cls == class::JMP32 => format!("ja32 {}", rel(i.imm as i64)),
                jmp::JA => format!("ja {}", rel(i.off as i64)),
                jmp::EXIT => "exit".into(),
                jmp::CALL if x => format!("call %r{}", i.dst),
                jmp::CALL if i.src == pseudo::CALL => format!("call local {}", rel(i.imm as i64)),
                jmp::CALL => format!("call {}", i.imm),
                _ => {
                    let name = JMP_NAMES.iter().find(|(o, _)| *o == op).map_or("?jmp", |(_, n)| n);
                    if x {
                        format!("{name}{sfx} %r{}, %r{}, {}", i.dst, i.src, rel(i.off as i64))
                    } else {
                        format!("{name}{sfx} %r{}, {}, {}", i.dst, imm(i.imm), rel(i.off as i64))
                    }
                }
            }
        }
        _ => format!(".quad {:#018x}", i.to_u64()),
    }
}

/// Disassemble a program, one instruction per line, jump targets as labels.
pub fn disassemble(p: &[Insn]) -> String {
    // Targets of jumps and local calls get labels.
    let mut targets = std::collections::BTreeMap::new();
    let mut pc = 0;
    while pc < p.len() {
        let i = p[pc];
        let t = match (i.class(), i.op()) {
            (class::JMP, jmp::CALL) if i.src == pseudo::CALL && !i.is_src_reg() => {
                Some((pc as i64 + 1 + i.imm as i64, "fn"))
            }
            (class::JMP32, jmp::JA) => Some((pc as i64 + 1 + i.imm as i64, "L")),
            (class::JMP | class::JMP32, op) if op != jmp::CALL && op != jmp::EXIT => {
                Some((pc as i64 + 1 + i.off as i64, "L"))
            }
            _ => None,
        };
        if let Some((t, kind)) = t {
            targets.entry(t).or_insert(kind);
        }
        pc += if i.is_lddw() { 2 } else { 1 };
    }
    let mut out = String::new();
    let mut pc = 0;
    while pc < p.len() {
        if let Some(kind) = targets.get(&(pc as i64)) {
            out.push_str(&format!("{kind}{pc}:\n"));
        }
        let i = p[pc];
        let mut text = disasm_insn(i, p.get(pc + 1).copied());
        // Replace the relative target with its label when it lands on an instruction.
        if let Some(pos) =
            text.rfind(['+', '-']).filter(|_| matches!(i.class(), class::JMP | class::JMP32))
        {
            if let Ok(rel) = text[pos..].parse::<i64>() {
                let t = pc as i64 + 1 + rel;
                if let Some(kind) = targets.get(&t) {
                    text = format!("{}{kind}{t}", &text[..pos]);
                }
            }
        }
        out.push_str(&text);
        out.push('\n');
        pc += if i.is_lddw() { 2 } else { 1 };
    }
    if let Some(kind) = targets.get(&(p.len() as i64)) {
        out.push_str(&format!("{kind}{}:\n", p.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembles_the_suite_syntax() {
        let p = assemble(
            "mov %r0, 1 # comment\nlddw %r1, 0x1122334455667788\nldxdw %r2, [%r10-8]\n\
             lock fetch add32 [%r10-4], %r1\njeq %r1, 0x80000000, out\ncall local f\ncall 5\ncall %r2\n\
             out:\nexit\nf:\nmovsx1664 %r8, %r7\nswap16 %r0\nsdiv32 %r1, -3\nexit",
        )
        .unwrap();
        assert_eq!(p.len(), 14);
        assert_eq!(p[0], Insn::new(0xb7, 0, 0, 0, 1));
        assert_eq!((p[1].imm as u32, p[2].imm as u32), (0x55667788, 0x11223344));
        assert_eq!(p[3], Insn::new(0x79, 2, 10, -8, 0));
        assert_eq!(p[4], Insn::new(0xc3, 10, 1, -4, 1));
        assert_eq!(p[5], Insn::new(0x15, 1, 0, 3, 0x80000000u32 as i32));
        assert_eq!(p[6], Insn::new(0x85, 0, 1, 0, 3));
        assert_eq!(p[8], Insn::new(0x8d, 2, 0, 0, 0));
        assert_eq!(p[10], Insn::new(0xbf, 8, 7, 16, 0));
        assert_eq!(p[11], Insn::new(0xd7, 0, 0, 0, 16));
        assert_eq!(p[12], Insn::new(0x34, 1, 0, 1, -3));
    }

    #[test]
    fn disassembly_round_trips() {
        let src = "mov %r0, 0\nja L3\nmov %r1, 1\nL3:\nlock cmpxchg32 [%r10-8], %r1\nldxsh %r0, [%r1+2]\nbe16 %r0\nexit\n";
        let p = assemble(src).unwrap();
        let text = disassemble(&p);
        assert_eq!(assemble(&text).unwrap(), p, "{text}");
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(assemble("mov %r0, 1\nfrob %r1").unwrap_err().line, 2);
        assert!(assemble("ja nowhere").unwrap_err().msg.contains("no label"));
        assert!(assemble("mov %r11, 1").unwrap_err().msg.contains("r11"));
        assert!(assemble("mov %r1, 0x100000000").unwrap_err().msg.contains("32 bits"));
    }
}
