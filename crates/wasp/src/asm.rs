//! WASP assembler and disassembler (syntax in `docs/wasp.md` §4 and `examples/wasp/*.s`).
//!
//! One instruction per line, `label:` before it if wanted, `;` or `#` starts a comment.
//! Operands: registers `a`, `b`; key slots `k0..k3`; numbers in decimal or `0x` hex; banks as
//! `s.64[3]` (bank letter `s m e h`, width `8 16 32 64`, index in units of the width), indexed
//! `s.32[b+3]` for `ldx`/`stx`, environment words by name (`e.time`); jumps to labels, forward
//! only. `.byte n, ...` emits raw bytes. Errors carry `line:col`.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::isa::{decode_one, AluOp, Bank, Cond, Insn, JumpWhen, Mem, Reg, Width, MAX_INSN_LEN};
use crate::vpu::ENV_WORDS;
use crate::wire::{MAX_CODE, MAX_KEYS};

/// Where and why the text did not assemble.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {kind}")]
pub struct AsmError {
    pub line: usize,
    pub col: usize,
    pub kind: AsmErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AsmErrorKind {
    #[error("unknown instruction '{0}'")]
    UnknownMnemonic(String),
    #[error("expected {expected}, found '{found}'")]
    BadOperand { expected: &'static str, found: String },
    #[error("missing operand: expected {0}")]
    MissingOperand(&'static str),
    #[error("unexpected '{0}' after the operands")]
    TrailingOperand(String),
    #[error("number {0} out of range")]
    OutOfRange(String),
    #[error("label '{0}' defined twice")]
    DuplicateLabel(String),
    #[error("unknown label '{0}'")]
    UnknownLabel(String),
    #[error("jump back to '{0}': jumps go forward only")]
    BackwardJump(String),
    #[error("code is {0} bytes, more than 64")]
    CodeTooLong(usize),
}

/// Assembled code and the number of key slots it needs declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assembled {
    pub code: Vec<u8>,
    pub keys_used: usize,
}

#[derive(Clone)]
struct Token<'a> {
    text: &'a str,
    col: usize,
}

enum Item<'a> {
    Insn(Insn),
    Bytes(Vec<u8>),
    Jump { when: JumpWhen, label: Token<'a> },
}

struct Line<'a> {
    line: usize,
    item: Item<'a>,
    at: usize,
}

fn err(line: usize, col: usize, kind: AsmErrorKind) -> AsmError {
    AsmError { line, col, kind }
}

fn tokens(text: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, ch) in text.char_indices() {
        let separator = ch.is_whitespace() || ch == ',';
        match (start, separator) {
            (None, false) => start = Some(i),
            (Some(s), true) => {
                out.push(Token { text: &text[s..i], col: s + 1 });
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push(Token { text: &text[s..], col: s + 1 });
    }
    out
}

fn parse_number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

struct Operands<'t, 'a> {
    line: usize,
    end_col: usize,
    rest: std::slice::Iter<'t, Token<'a>>,
}

impl<'a> Operands<'_, 'a> {
    fn next(&mut self, expected: &'static str) -> Result<Token<'a>, AsmError> {
        self.rest
            .next()
            .cloned()
            .ok_or_else(|| err(self.line, self.end_col, AsmErrorKind::MissingOperand(expected)))
    }

    fn bad(&self, token: &Token<'_>, expected: &'static str) -> AsmError {
        err(
            self.line,
            token.col,
            AsmErrorKind::BadOperand { expected, found: token.text.to_string() },
        )
    }

    fn number(&mut self, expected: &'static str, max: u64) -> Result<u64, AsmError> {
        let token = self.next(expected)?;
        let value = parse_number(token.text).ok_or_else(|| self.bad(&token, expected))?;
        if value > max {
            return Err(err(
                self.line,
                token.col,
                AsmErrorKind::OutOfRange(token.text.to_string()),
            ));
        }
        Ok(value)
    }

    fn reg(&mut self) -> Result<Reg, AsmError> {
        let token = self.next("a register (a or b)")?;
        match token.text {
            "a" => Ok(Reg::A),
            "b" => Ok(Reg::B),
            _ => Err(self.bad(&token, "a register (a or b)")),
        }
    }

    fn expect_a(&mut self) -> Result<(), AsmError> {
        let token = self.next("register a")?;
        if token.text == "a" {
            Ok(())
        } else {
            Err(self.bad(&token, "register a"))
        }
    }

    fn key(&mut self) -> Result<u8, AsmError> {
        const EXPECTED: &str = "a key slot (k0..k3)";
        let token = self.next(EXPECTED)?;
        match token.text.strip_prefix('k').and_then(|n| n.parse::<u8>().ok()) {
            Some(slot) if usize::from(slot) < MAX_KEYS => Ok(slot),
            _ => Err(self.bad(&token, EXPECTED)),
        }
    }

    /// `s.64[3]`, `e.time`, or with `indexed`, `s.32[b+3]`.
    fn mem(&mut self, indexed: bool) -> Result<Mem, AsmError> {
        let expected = if indexed {
            "a bank operand like s.32[b+1]"
        } else {
            "a bank operand like s.64[0] or e.time"
        };
        let token = self.next(expected)?;
        let bad = || {
            err(
                self.line,
                token.col,
                AsmErrorKind::BadOperand { expected, found: token.text.to_string() },
            )
        };
        let (bank, rest) = token.text.split_once('.').ok_or_else(bad)?;
        let bank = match bank {
            "s" => Bank::Scratch,
            "m" => Bank::Map,
            "e" => Bank::Env,
            "h" => Bank::Net,
            _ => return Err(bad()),
        };
        if bank == Bank::Env && !indexed {
            if let Some(index) = ENV_WORDS.iter().position(|name| *name == rest) {
                return Ok(Mem { bank, width: Width::W64, index: index as u8 });
            }
        }
        let (width, index) = rest.split_once('[').ok_or_else(bad)?;
        let width = match width {
            "8" => Width::W8,
            "16" => Width::W16,
            "32" => Width::W32,
            "64" => Width::W64,
            _ => return Err(bad()),
        };
        let index = index.strip_suffix(']').ok_or_else(bad)?;
        let index = if indexed {
            match index.strip_prefix('b') {
                Some("") => "0",
                Some(offset) => offset.strip_prefix('+').ok_or_else(bad)?,
                None => return Err(bad()),
            }
        } else {
            index
        };
        let index = parse_number(index).ok_or_else(bad)?;
        let index = u8::try_from(index).map_err(|_| {
            err(self.line, token.col, AsmErrorKind::OutOfRange(token.text.to_string()))
        })?;
        Ok(Mem { bank, width, index })
    }

    fn finish(mut self) -> Result<(), AsmError> {
        match self.rest.next() {
            Some(token) => Err(err(
                self.line,
                token.col,
                AsmErrorKind::TrailingOperand(token.text.to_string()),
            )),
            None => Ok(()),
        }
    }
}

fn parse_item<'a>(mnemonic: &Token<'a>, ops: &mut Operands<'_, 'a>) -> Result<Item<'a>, AsmError> {
    let simple = |insn| -> Result<Item<'a>, AsmError> { Ok(Item::Insn(insn)) };
    let alu = AluOp::ALL.iter().find(|op| op.mnemonic() == mnemonic.text);
    if let Some(&op) = alu {
        return simple(Insn::Alu(op));
    }
    if let Some(&cond) = Cond::ALL.iter().find(|c| c.mnemonic() == mnemonic.text) {
        return simple(Insn::Cmp(cond));
    }
    match mnemonic.text {
        "nop" => simple(Insn::Nop),
        "fwd" => simple(Insn::Fwd),
        "drop" => simple(Insn::Drop),
        "return" => simple(Insn::Return),
        "mov" => match (ops.reg()?, ops.reg()?) {
            (Reg::A, Reg::B) => simple(Insn::Alu(AluOp::MovAB)),
            (Reg::B, Reg::A) => simple(Insn::Alu(AluOp::MovBA)),
            _ => Err(err(
                ops.line,
                mnemonic.col,
                AsmErrorKind::BadOperand {
                    expected: "a, b or b, a",
                    found: "the same register twice".into(),
                },
            )),
        },
        "shl" => simple(Insn::Shl(ops.number("a shift (0..63)", 63)? as u8)),
        "shr" => simple(Insn::Shr(ops.number("a shift (0..63)", 63)? as u8)),
        "imm" => {
            let reg = ops.reg()?;
            let value = ops.number("a number (0..65535)", 0xffff)? as u16;
            simple(Insn::Imm { reg, value })
        }
        "addi" => simple(Insn::AddI(ops.number("a number (0..255)", 0xff)? as u8)),
        "subi" => simple(Insn::SubI(ops.number("a number (0..255)", 0xff)? as u8)),
        "jmp" | "jt" | "jf" => {
            let when = match mnemonic.text {
                "jmp" => JumpWhen::Always,
                "jt" => JumpWhen::IfTrue,
                _ => JumpWhen::IfFalse,
            };
            Ok(Item::Jump { when, label: ops.next("a label")? })
        }
        "ld" => {
            let reg = ops.reg()?;
            simple(Insn::Ld { reg, mem: ops.mem(false)? })
        }
        "st" => {
            let mem = ops.mem(false)?;
            ops.expect_a()?;
            simple(Insn::St { mem })
        }
        "ldx" => {
            ops.expect_a()?;
            simple(Insn::Ldx { mem: ops.mem(true)? })
        }
        "stx" => {
            let mem = ops.mem(true)?;
            ops.expect_a()?;
            simple(Insn::Stx { mem })
        }
        "lookup" => simple(Insn::Lookup(ops.key()?)),
        "insert" => simple(Insn::Insert(ops.key()?)),
        "map" => simple(Insn::Map(ops.key()?)),
        ".byte" => {
            let mut bytes = vec![ops.number("a byte", 0xff)? as u8];
            while !ops.rest.as_slice().is_empty() {
                bytes.push(ops.number("a byte", 0xff)? as u8);
            }
            Ok(Item::Bytes(bytes))
        }
        other => Err(err(ops.line, mnemonic.col, AsmErrorKind::UnknownMnemonic(other.to_string()))),
    }
}

fn item_len(item: &Item<'_>) -> usize {
    match item {
        Item::Insn(insn) => insn.byte_len(),
        Item::Bytes(bytes) => bytes.len(),
        Item::Jump { .. } => 2,
    }
}

/// Assembles `source` into code bytes.
pub fn assemble(source: &str) -> Result<Assembled, AsmError> {
    let mut labels: HashMap<&str, usize> = HashMap::new();
    let mut lines = Vec::new();
    let mut at = 0;
    let mut keys_used = 0;
    for (number, text) in source.lines().enumerate() {
        let line = number + 1;
        let text = match text.find([';', '#']) {
            Some(comment) => &text[..comment],
            None => text,
        };
        let all = tokens(text);
        let mut rest = all.as_slice();
        if let Some(first) = rest.first() {
            if let Some(name) = first.text.strip_suffix(':') {
                let valid =
                    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !valid {
                    return Err(err(
                        line,
                        first.col,
                        AsmErrorKind::BadOperand {
                            expected: "a label name",
                            found: first.text.to_string(),
                        },
                    ));
                }
                if labels.insert(name, at).is_some() {
                    return Err(err(
                        line,
                        first.col,
                        AsmErrorKind::DuplicateLabel(name.to_string()),
                    ));
                }
                rest = &rest[1..];
            }
        }
        let Some((mnemonic, operands)) = rest.split_first() else { continue };
        let end_col = text.trim_end().len() + 1;
        let mut ops = Operands { line, end_col, rest: operands.iter() };
        let item = parse_item(mnemonic, &mut ops)?;
        ops.finish()?;
        if let Item::Insn(insn) = &item {
            if let Some(slot) = insn.key_slot() {
                keys_used = keys_used.max(usize::from(slot) + 1);
            }
        }
        let len = item_len(&item);
        lines.push(Line { line, item, at });
        at += len;
        if at > MAX_CODE {
            return Err(err(line, mnemonic.col, AsmErrorKind::CodeTooLong(at)));
        }
    }
    let mut code = Vec::with_capacity(at);
    for line in &lines {
        match &line.item {
            Item::Insn(insn) => {
                let mut buf = [0u8; MAX_INSN_LEN];
                let len = insn.encode(&mut buf);
                code.extend_from_slice(&buf[..len]);
            }
            Item::Bytes(bytes) => code.extend_from_slice(bytes),
            Item::Jump { when, label } => {
                let target = *labels.get(label.text).ok_or_else(|| {
                    err(line.line, label.col, AsmErrorKind::UnknownLabel(label.text.to_string()))
                })?;
                let next = line.at + 2;
                if target < next {
                    return Err(err(
                        line.line,
                        label.col,
                        AsmErrorKind::BackwardJump(label.text.to_string()),
                    ));
                }
                // Code is at most 64 bytes, so a forward offset always fits in an i8.
                let offset = i8::try_from(target - next).map_err(|_| {
                    err(line.line, label.col, AsmErrorKind::OutOfRange(label.text.to_string()))
                })?;
                let mut buf = [0u8; MAX_INSN_LEN];
                let len = Insn::Jump { when: *when, offset }.encode(&mut buf);
                code.extend_from_slice(&buf[..len]);
            }
        }
    }
    Ok(Assembled { code, keys_used })
}

fn mem_text(mem: Mem, indexed: bool) -> String {
    if mem.bank == Bank::Env && mem.width == Width::W64 && !indexed {
        if let Some(name) = ENV_WORDS.get(usize::from(mem.index)) {
            return format!("e.{name}");
        }
    }
    let index = if indexed { format!("b+{}", mem.index) } else { mem.index.to_string() };
    format!("{}.{}[{}]", mem.bank.letter(), mem.width.bits(), index)
}

fn insn_text(insn: &Insn) -> String {
    match *insn {
        Insn::Nop => "nop".into(),
        Insn::Fwd => "fwd".into(),
        Insn::Drop => "drop".into(),
        Insn::Return => "return".into(),
        Insn::Alu(op) => op.mnemonic().into(),
        Insn::Shl(n) => format!("shl {n}"),
        Insn::Shr(n) => format!("shr {n}"),
        Insn::Imm { reg, value } => {
            format!("imm {}, {value}", if reg == Reg::A { 'a' } else { 'b' })
        }
        Insn::AddI(n) => format!("addi {n}"),
        Insn::SubI(n) => format!("subi {n}"),
        Insn::Cmp(cond) => cond.mnemonic().into(),
        Insn::Jump { when, offset } => format!("{} .{offset:+}", when.mnemonic()),
        Insn::Ld { reg, mem } => {
            format!("ld {}, {}", if reg == Reg::A { 'a' } else { 'b' }, mem_text(mem, false))
        }
        Insn::St { mem } => format!("st {}, a", mem_text(mem, false)),
        Insn::Ldx { mem } => format!("ldx a, {}", mem_text(mem, true)),
        Insn::Stx { mem } => format!("stx {}, a", mem_text(mem, true)),
        Insn::Lookup(slot) => format!("lookup k{slot}"),
        Insn::Insert(slot) => format!("insert k{slot}"),
        Insn::Map(slot) => format!("map k{slot}"),
    }
}

/// Disassembles `code` into text `assemble` accepts: valid forward jumps get labels `L<byte>`,
/// bytes that do not decode (or jumps that would not validate) become `.byte` lines.
pub fn disassemble(code: &[u8]) -> String {
    let mut decoded = Vec::new();
    let mut at = 0;
    while at < code.len() {
        match decode_one(&code[at..]) {
            Ok((insn, len)) => {
                decoded.push((at, Some(insn), len));
                at += len;
            }
            Err(_) => {
                decoded.push((at, None, 1));
                at += 1;
            }
        }
    }
    let starts: Vec<usize> = decoded.iter().map(|(at, _, _)| *at).collect();
    let jump_target = |at: usize, insn: &Insn| -> Option<usize> {
        let Insn::Jump { offset, .. } = insn else { return None };
        let target = at + 2 + usize::try_from(*offset).ok()?;
        (target == code.len() || starts.contains(&target)).then_some(target)
    };
    let mut labels: Vec<usize> = decoded
        .iter()
        .filter_map(|(at, insn, _)| insn.as_ref().and_then(|insn| jump_target(*at, insn)))
        .collect();
    labels.sort_unstable();
    labels.dedup();
    let mut out = String::new();
    for (at, insn, len) in &decoded {
        if labels.contains(at) {
            let _ = writeln!(out, "L{at}:");
        }
        let bytes = &code[*at..*at + *len];
        let text = match insn {
            Some(insn @ Insn::Jump { when, .. }) => match jump_target(*at, insn) {
                Some(target) => format!("{} L{target}", when.mnemonic()),
                None => raw_bytes(bytes),
            },
            Some(insn) => insn_text(insn),
            None => raw_bytes(bytes),
        };
        let _ = writeln!(out, "        {text}");
    }
    if labels.contains(&code.len()) {
        let _ = writeln!(out, "L{}:", code.len());
    }
    out
}

fn raw_bytes(bytes: &[u8]) -> String {
    let list: Vec<String> = bytes.iter().map(|b| format!("{b:#04x}")).collect();
    format!(".byte {}", list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::decode;

    #[test]
    fn assembles_every_form_and_disassembles_back() {
        let source = "\
start:  lookup k1          ; comment
        inc
        insert k1
        imm a, 300
        imm b, 7
        shl 3
        shr 0x3f
        addi 255
        subi 1
        mov a, b
        mov b, a
        ld a, e.time
        ld b, h.32[3]
        st s.16[5], a
        ldx a, s.32[b+2]
        stx m.8[b], a
        map k0
        ld a, m.64[3]
        ceq
        jt end
        return
end:    fwd
";
        let out = assemble(source).unwrap();
        assert_eq!(out.keys_used, 2);
        let program = decode(&out.code, 2).unwrap();
        let text = disassemble(&out.code);
        let again = assemble(&text).unwrap();
        assert_eq!(again.code, out.code, "disassembly reassembles to the same bytes:\n{text}");
        assert_eq!(decode(&again.code, 2).unwrap(), program);
        assert!(text.contains("ld a, e.time"), "{text}");
    }

    fn error_of(source: &str) -> (usize, usize, AsmErrorKind) {
        let e = assemble(source).unwrap_err();
        (e.line, e.col, e.kind)
    }

    #[test]
    fn errors_say_where_and_why() {
        assert_eq!(
            error_of("  fwd\n  frob a"),
            (2, 3, AsmErrorKind::UnknownMnemonic("frob".into()))
        );
        assert_eq!(error_of("x: fwd\n   jmp x"), (2, 8, AsmErrorKind::BackwardJump("x".into())));
        assert_eq!(error_of("jmp nowhere"), (1, 5, AsmErrorKind::UnknownLabel("nowhere".into())));
        assert_eq!(error_of("x:\nx: fwd"), (2, 1, AsmErrorKind::DuplicateLabel("x".into())));
        assert_eq!(error_of("shl 64"), (1, 5, AsmErrorKind::OutOfRange("64".into())));
        assert_eq!(
            error_of("lookup k4").2,
            AsmErrorKind::BadOperand { expected: "a key slot (k0..k3)", found: "k4".into() }
        );
        assert_eq!(error_of("ld a, q.64[0]").1, 7);
        assert_eq!(error_of("st s.64[0], b").1, 13);
        assert_eq!(error_of("fwd a").2, AsmErrorKind::TrailingOperand("a".into()));
        assert_eq!(error_of("imm a").2, AsmErrorKind::MissingOperand("a number (0..65535)"));
        let long = "imm a, 1000\n".repeat(22);
        assert_eq!(error_of(&long), (22, 1, AsmErrorKind::CodeTooLong(66)));
        let message = assemble("  fwd\n  frob").unwrap_err().to_string();
        assert_eq!(message, "2:3: unknown instruction 'frob'");
    }

    #[test]
    fn disassembly_marks_undecodable_bytes() {
        let text = disassemble(&[0x01, 0xee, 0x38, 0xfe, 0x24]);
        assert!(text.contains(".byte 0xee"), "{text}");
        assert!(text.contains(".byte 0x38, 0xfe"), "backward jump kept raw: {text}");
        assert!(text.contains(".byte 0x24"), "truncated instruction kept raw: {text}");
        assert_eq!(assemble(&text).unwrap().code, vec![0x01, 0xee, 0x38, 0xfe, 0x24]);
    }
}
