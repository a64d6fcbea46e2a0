//! The Simple Test Framework of p4c: a text file of table operations, packets sent, packets
//! expected and state checks, run against a [`V1Switch`].
//!
//! Supported commands: `add TABLE [PRIORITY] KEY:VALUE ... ACTION(ARG:VALUE, ...)`,
//! `setdefault TABLE ACTION(...)`, `packet PORT HEX`, `expect PORT HEX` (`*` matches any
//! nibble; the expected bytes are a prefix of the packet unless the line ends in `$`; no data
//! means any packets), `check_counter NAME(INDEX) [packets|bytes] [OP VALUE]`,
//! `register_write NAME INDEX VALUE`, `register_read NAME INDEX [OP] VALUE`,
//! `mirroring_add SESSION PORT`, `mc_mgrp_create GROUP`, `mc_node_create RID PORT...`,
//! `mc_node_associate GROUP NODE`, and `wait` (packets are processed as they are read, so it
//! does nothing). Priorities: the higher number wins.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use crate::exec::{EntryError, InstanceRt, P4Entry, Pipeline};
use crate::ir::{KeyMatch, MatchKind};
use crate::types::mask;
use crate::v1model::{Output, Replication, V1Switch};
use hotplane_core::Qsbr;

/// A mistake in the STF file itself (not a failed expectation).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct StfError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

/// A number or a key match that cannot be read (STF files, runtime JSON, the control API).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("`{text}` is not a number")]
    NotANumber { text: String },
    #[error("`{text}`: wildcards are not allowed here")]
    Wildcards { text: String },
    /// `what` is the part of the match: value, mask, range start or end.
    #[error("{what} `{text}` does not fit in bit<{width}>")]
    DoesNotFit { what: &'static str, text: String, width: u32 },
    #[error("`{text}` is not a prefix length")]
    NotAPrefixLength { text: String },
    #[error("prefix /{len} is longer than the key (bit<{width}>)")]
    PrefixTooLong { len: u32, width: u32 },
    #[error("`{text}`: wildcards of an lpm key must be trailing")]
    LpmWildcards { text: String },
    /// A JSON number that is negative, fractional or too large.
    #[error("{number} is not a non-negative integer")]
    NotNonNegative { number: String },
    /// A JSON value that is neither a number nor a string.
    #[error("{value} is not a value")]
    NotAValue { value: String },
    /// A runtime JSON match that is not a two-element array; `second` names its second element.
    #[error("a {kind} match is [value, {second}]")]
    NotAPair { kind: &'static str, second: &'static str },
}

/// A mistake on one line of an STF file; [`run`] reports it as an [`StfError`] at that line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StfLineError {
    #[error(transparent)]
    Entry(#[from] crate::exec::EntryError),
    #[error(transparent)]
    Value(#[from] ValueError),
    /// A command with the wrong shape; the text gives its usage.
    #[error("{0}")]
    Syntax(&'static str),
    #[error("unknown STF command `{0}`")]
    UnknownCommand(String),
    #[error("port {0} is out of range (0..=511)")]
    PortOutOfRange(u128),
    #[error("`{0}` is not a hex byte")]
    NotAHexByte(String),
    #[error("`{0}` in an expected packet")]
    BadPatternChar(char),
    #[error("bad priority `{0}`")]
    BadPriority(String),
    #[error("`{0}`: expected KEY:VALUE")]
    NotKeyValue(String),
    #[error("action {action} takes {count} argument(s)")]
    TooManyArgs { action: String, count: usize },
    #[error("register {name} has {cells} cells; index {index}")]
    RegisterIndex { name: String, cells: usize, index: usize },
    #[error("`{0}` is not a register")]
    NotARegister(String),
    #[error("no register `{0}`")]
    NoRegister(String),
    #[error("unknown comparison `{0}`")]
    UnknownComparison(String),
    #[error("`{0}` is not an indirect counter")]
    NotACounter(String),
    #[error("no counter `{0}`")]
    NoCounter(String),
    #[error("counter {name} has {cells} cells; index {index}")]
    CounterIndex { name: String, cells: usize, index: usize },
    #[error("`{0}`: expected packets or bytes")]
    NotACounterField(String),
    #[error("no multicast node {0} (create it first)")]
    NoMulticastNode(u32),
    #[error("no multicast group {0} (mc_mgrp_create it)")]
    NoMulticastGroup(u32),
}

/// What running a test found.
#[derive(Debug, Default)]
pub struct StfReport {
    pub packets_sent: usize,
    pub packets_received: usize,
    pub expects: usize,
    pub checks: usize,
    /// Packets sent to ports that no `packet` or `expect` line names: as under p4c's BMv2 test
    /// runner, which attaches only those ports, they leave the switch unseen and are not
    /// compared.
    pub unattached: usize,
    /// Failed expectations and checks, each with its line.
    pub failures: Vec<String>,
}

impl StfReport {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

struct Expect {
    line: usize,
    /// Nibbles; `None` is a wildcard.
    nibbles: Vec<Option<u8>>,
    exact: bool,
}

/// Run an STF file against `pipeline`, whose tables live in `qsbr`. Errors in the file stop
/// the run with [`StfError`]; failed expectations are collected in the report.
pub fn run(
    pipeline: Arc<Pipeline>,
    qsbr: &Qsbr,
    file: &str,
    text: &str,
) -> Result<StfReport, StfError> {
    run_with(pipeline, qsbr, file, text, false)
}

/// [`run`], with `in_place` sending each packet through [`V1Switch::process_batch`] in a
/// pool buffer (as the data plane does) instead of [`V1Switch::process`].
pub fn run_with(
    pipeline: Arc<Pipeline>,
    qsbr: &Qsbr,
    file: &str,
    text: &str,
    in_place: bool,
) -> Result<StfReport, StfError> {
    let pool =
        hotplane_core::Pool::new(hotplane_core::PoolConfig { buffers: 2, ..Default::default() })
            .map_err(|e| StfError { file: file.to_string(), line: 0, message: e.to_string() })?;
    // Online only while a packet runs: table changes wait for grace periods, which a thread
    // that is itself an online reader cannot do.
    let mut offline = Some(qsbr.register("stf").offline());
    let mut sw = V1Switch::new(Arc::clone(&pipeline));
    let mut pre = Replication::default();
    let mut nodes: BTreeMap<u32, (u32, Vec<u32>)> = BTreeMap::new();
    let mut report = StfReport::default();
    let mut received: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
    let mut expected: BTreeMap<u32, Vec<Expect>> = BTreeMap::new();
    let mut any_port: Vec<u32> = Vec::new();
    let mut attached: std::collections::BTreeSet<u32> = std::collections::BTreeSet::new();
    let mut now_ns = 1_000_000u64;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err =
            |e: StfLineError| StfError { file: file.to_string(), line, message: e.to_string() };
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let (cmd, rest) = split_word(content);
        match cmd {
            "add" => {
                let (table, entry) = parse_add(&pipeline, rest).map_err(err)?;
                table.insert(&entry).map_err(|e| err(e.into()))?;
            }
            "setdefault" => {
                let (tname, rest) = split_word(rest);
                let table = pipeline.objects.table(tname).map_err(|e| err(e.into()))?;
                let (action, args) = parse_action(table, rest).map_err(err)?;
                table.set_default(&action, &args).map_err(|e| err(e.into()))?;
            }
            "packet" => {
                let (port, hex) = split_word(rest);
                let port = parse_port(port).map_err(err)?;
                attached.insert(port);
                let data = parse_hex(hex).map_err(err)?;
                let mut out: Vec<Output> = Vec::new();
                now_ns += 1000;
                if let Some(r) = offline.take() {
                    let mut reader = r.online();
                    {
                        let guard = reader.guard();
                        // A frame too big for a pool buffer takes the owned path.
                        let buffer = pool.alloc().filter(|_| in_place);
                        match buffer.and_then(|mut p| p.set_frame(&data).is_ok().then_some(p)) {
                            Some(mut pkt) => {
                                pkt.meta.in_port = port as u16;
                                let mut batch = hotplane_core::Batch::new(1);
                                let _ = batch.push(pkt);
                                let one = hotplane_core::Mask::single(0);
                                let mut copied = false;
                                sw.process_batch(
                                    &mut batch,
                                    one,
                                    &pre,
                                    &guard,
                                    now_ns,
                                    &mut out,
                                    |_, _, _| copied = true,
                                );
                                // Copies are in `out` already; a packet sent is the batch's.
                                if let Some(p) = batch.get(0).filter(|p| {
                                    !copied && p.meta.verdict == hotplane_core::Verdict::Pass
                                }) {
                                    let port = p.meta.out_port as u32;
                                    out.push(Output { port, data: p.data().to_vec() });
                                }
                            }
                            None => sw.process(&data, port, &pre, &guard, now_ns, &mut out),
                        }
                    }
                    reader.quiescent();
                    offline = Some(reader.offline());
                }
                report.packets_sent += 1;
                for o in out {
                    report.packets_received += 1;
                    received.entry(o.port).or_default().push(o.data);
                }
            }
            "expect" => {
                let (port, pattern) = split_word(rest);
                let port = parse_port(port).map_err(err)?;
                attached.insert(port);
                let pattern = pattern.trim();
                if pattern.is_empty() {
                    any_port.push(port);
                    continue;
                }
                let (pattern, exact) = match pattern.strip_suffix('$') {
                    Some(p) => (p, true),
                    None => (pattern, false),
                };
                let nibbles = parse_pattern(pattern).map_err(err)?;
                report.expects += 1;
                expected.entry(port).or_default().push(Expect { line, nibbles, exact });
            }
            "check_counter" => {
                report.checks += 1;
                if let Some(f) = check_counter(&pipeline, rest).map_err(err)? {
                    report.failures.push(format!("line {line}: {f}"));
                }
            }
            "register_write" => {
                let words: Vec<&str> = rest.split_whitespace().collect();
                let [name, index, value] = words[..] else {
                    return Err(err(StfLineError::Syntax(
                        "usage: register_write NAME INDEX VALUE",
                    )));
                };
                let (r, index) = register_cell(&pipeline, name, index).map_err(err)?;
                r.write(index, parse_number(value).map_err(|e| err(e.into()))? as u64);
            }
            "register_read" => {
                report.checks += 1;
                let words: Vec<&str> = rest.split_whitespace().collect();
                let (name, index, op, value) = match words[..] {
                    [n, i, v] => (n, i, "==", v),
                    [n, i, op, v] => (n, i, op, v),
                    _ => {
                        return Err(err(StfLineError::Syntax(
                            "usage: register_read NAME INDEX [OP] VALUE",
                        )))
                    }
                };
                let (r, index) = register_cell(&pipeline, name, index).map_err(err)?;
                let want = parse_number(value).map_err(|e| err(e.into()))?;
                let got = r.read(index) as u128;
                if !compare(got, op, want).map_err(err)? {
                    report.failures.push(format!(
                        "line {line}: register {name}[{index}] is {got} ({got:#x}); expected {op} {want}"
                    ));
                }
            }
            "mirroring_add" => {
                let words: Vec<&str> = rest.split_whitespace().collect();
                let [session, port] = words[..] else {
                    return Err(err(StfLineError::Syntax("usage: mirroring_add SESSION PORT")));
                };
                let session = parse_number(session).map_err(|e| err(e.into()))? as u32;
                pre.mirror.insert(session, parse_port(port).map_err(err)?);
            }
            "mc_mgrp_create" => {
                let group = parse_number(rest.trim()).map_err(|e| err(e.into()))? as u32;
                pre.groups.entry(group).or_default();
            }
            "mc_node_create" => {
                let mut words = rest.split_whitespace();
                let rid =
                    parse_number(words.next().unwrap_or("")).map_err(|e| err(e.into()))? as u32;
                let ports = words.map(parse_port).collect::<Result<Vec<_>, _>>().map_err(err)?;
                // Node handles count from 0 in creation order, as BMv2's CLI returns them.
                let handle = nodes.len() as u32;
                nodes.insert(handle, (rid, ports));
            }
            "mc_node_associate" => {
                let words: Vec<&str> = rest.split_whitespace().collect();
                let [group, node] = words[..] else {
                    return Err(err(StfLineError::Syntax("usage: mc_node_associate GROUP NODE")));
                };
                let group = parse_number(group).map_err(|e| err(e.into()))? as u32;
                let node = parse_number(node).map_err(|e| err(e.into()))? as u32;
                let (rid, ports) = nodes
                    .get(&node)
                    .ok_or_else(|| err(StfLineError::NoMulticastNode(node)))?
                    .clone();
                let copies = pre
                    .groups
                    .get_mut(&group)
                    .ok_or_else(|| err(StfLineError::NoMulticastGroup(group)))?;
                copies.extend(ports.into_iter().map(|p| (rid, p)));
            }
            "act_prof_create_member"
            | "act_prof_modify_member"
            | "act_prof_create_group"
            | "act_prof_add_member_to_group" => {
                profile_command(&pipeline, cmd, rest).map_err(err)?;
            }
            "wait" => {}
            other => return Err(err(StfLineError::UnknownCommand(other.to_string()))),
        }
    }
    // Compare, port by port, in order.
    let ports: std::collections::BTreeSet<u32> =
        received.keys().chain(expected.keys()).copied().collect();
    for port in ports {
        if any_port.contains(&port) && !expected.contains_key(&port) {
            continue;
        }
        if !attached.contains(&port) {
            report.unattached += received.get(&port).map_or(0, Vec::len);
            continue;
        }
        let got = received.get(&port).map(|v| &v[..]).unwrap_or(&[]);
        let want = expected.get(&port).map(|v| &v[..]).unwrap_or(&[]);
        for k in 0..got.len().max(want.len()) {
            match (want.get(k), got.get(k)) {
                (Some(w), Some(g)) => {
                    if let Some(diff) = mismatch(w, g) {
                        report.failures.push(format!(
                            "line {}: packet {k} on port {port} differs at {diff}\n  expected {}\n  received {}",
                            w.line,
                            show_pattern(&w.nibbles, w.exact),
                            hex(g)
                        ));
                    }
                }
                (Some(w), None) => report.failures.push(format!(
                    "line {}: expected packet {k} on port {port} was not received\n  expected {}",
                    w.line,
                    show_pattern(&w.nibbles, w.exact)
                )),
                (None, Some(g)) => report
                    .failures
                    .push(format!("unexpected packet {k} on port {port}\n  received {}", hex(g))),
                (None, None) => {}
            }
        }
    }
    Ok(report)
}

/// Where a received packet departs from the expectation, if it does.
fn mismatch(w: &Expect, g: &[u8]) -> Option<String> {
    let got: Vec<u8> = g.iter().flat_map(|b| [b >> 4, b & 15]).collect();
    for (i, n) in w.nibbles.iter().enumerate() {
        match (n, got.get(i)) {
            (_, None) => {
                return Some(format!(
                    "byte {}: the packet is {} bytes, {} expected",
                    i / 2,
                    g.len(),
                    w.nibbles.len().div_ceil(2)
                ))
            }
            (Some(e), Some(r)) if e != r => return Some(format!("byte {}", i / 2)),
            _ => {}
        }
    }
    if w.exact && got.len() > w.nibbles.len() {
        return Some(format!(
            "the end: {} bytes received, {} expected ($)",
            g.len(),
            w.nibbles.len() / 2
        ));
    }
    None
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect::<Vec<_>>().join(" ")
}

fn show_pattern(n: &[Option<u8>], exact: bool) -> String {
    let mut s = String::new();
    for (i, x) in n.iter().enumerate() {
        if i > 0 && i % 2 == 0 {
            s.push(' ');
        }
        match x {
            Some(v) => {
                let _ = write!(s, "{v:X}");
            }
            None => s.push('*'),
        }
    }
    if exact {
        s.push_str(" $");
    }
    s
}

fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim();
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], s[i..].trim()),
        None => (s, ""),
    }
}

fn parse_port(s: &str) -> Result<u32, StfLineError> {
    let p = parse_number(s)?;
    if p > 511 {
        return Err(StfLineError::PortOutOfRange(p));
    }
    Ok(p as u32)
}

fn parse_hex(s: &str) -> Result<Vec<u8>, StfLineError> {
    let digits: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    // Checked first: slicing by byte pairs below needs ASCII (a non-ASCII letter panicked).
    if let Some(bad) = digits.chars().find(|c| !c.is_ascii_hexdigit()) {
        return Err(StfLineError::NotAHexByte(bad.to_string()));
    }
    // Two digits to a byte; a lone last digit is a byte of its own (`..20 0` sends 20 00), as
    // p4c's BMv2 runner reads them and as some of p4c's tests are written.
    (0..digits.len())
        .step_by(2)
        .map(|i| {
            let pair = &digits[i..(i + 2).min(digits.len())];
            u8::from_str_radix(pair, 16).map_err(|_| StfLineError::NotAHexByte(pair.to_string()))
        })
        .collect()
}

fn parse_pattern(s: &str) -> Result<Vec<Option<u8>>, StfLineError> {
    s.chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| match c {
            '*' => Ok(None),
            c => c.to_digit(16).map(|d| Some(d as u8)).ok_or(StfLineError::BadPatternChar(c)),
        })
        .collect()
}

/// A number: decimal, `0x`, `0b`, `0o`, dotted IPv4, or colon-separated MAC.
pub fn parse_number(s: &str) -> Result<u128, ValueError> {
    parse_masked(s).and_then(|(v, m, bits)| {
        if m != mask(bits) && bits > 0 {
            Err(ValueError::Wildcards { text: s.to_string() })
        } else {
            Ok(v)
        }
    })
}

/// A number that may contain `*` wildcard digits: (value, mask over the digits, digit bits).
/// `bits` is 0 for numbers without wildcards (decimal, or no `*`), whose mask is all ones.
fn parse_masked(s: &str) -> Result<(u128, u128, u32), ValueError> {
    let s = s.trim();
    let bad = || ValueError::NotANumber { text: s.to_string() };
    if s.contains('.') && !s.contains("..") {
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() == 4 {
            let mut v = 0u128;
            for p in parts {
                v = (v << 8) | p.parse::<u8>().map_err(|_| bad())? as u128;
            }
            return Ok((v, u128::MAX, 0));
        }
        return Err(bad());
    }
    if s.contains("::") || s.split(':').count() == 8 {
        // IPv6 (a MAC address has six groups and never `::`).
        let v6: std::net::Ipv6Addr = s.parse().map_err(|_| bad())?;
        return Ok((u128::from(v6), u128::MAX, 0));
    }
    if s.contains(':') {
        let mut v = 0u128;
        for p in s.split(':') {
            v = (v << 8) | u8::from_str_radix(p, 16).map_err(|_| bad())? as u128;
        }
        return Ok((v, u128::MAX, 0));
    }
    let (digits, radix_bits) =
        if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            (h, 4)
        } else if let Some(b) = s.strip_prefix("0b") {
            (b, 1)
        } else if let Some(o) = s.strip_prefix("0o") {
            (o, 3)
        } else {
            let v = s.replace('_', "").parse::<u128>().map_err(|_| bad())?;
            return Ok((v, u128::MAX, 0));
        };
    let digits = digits.replace('_', "");
    if digits.is_empty() || digits.len() as u32 * radix_bits > 128 + radix_bits {
        return Err(bad());
    }
    let (mut v, mut m) = (0u128, 0u128);
    let wild = digits.contains('*');
    for c in digits.chars() {
        let (d, dm) = if c == '*' {
            (0, 0)
        } else {
            let d = c.to_digit(1 << radix_bits).ok_or_else(bad)? as u128;
            (d, mask(radix_bits))
        };
        v = (v << radix_bits) | d;
        m = (m << radix_bits) | dm;
    }
    if wild {
        Ok((v, m, digits.len() as u32 * radix_bits))
    } else {
        Ok((v, u128::MAX, 0))
    }
}

/// One key field's match from its STF text.
pub fn parse_key_match(kind: MatchKind, width: u32, text: &str) -> Result<KeyMatch, ValueError> {
    let full = mask(width);
    let fit = |v: u128, what: &'static str| -> Result<u128, ValueError> {
        if v & !full != 0 {
            Err(ValueError::DoesNotFit { what, text: text.to_string(), width })
        } else {
            Ok(v)
        }
    };
    if let Some((v, m)) = text.split_once("&&&") {
        let v = fit(parse_number(v)?, "value")?;
        let m = fit(parse_number(m)?, "mask")?;
        return Ok(KeyMatch::Mask { value: v & m, mask: m });
    }
    if let Some((v, len)) = text.split_once('/') {
        let v = fit(parse_number(v)?, "value")?;
        let len: u32 = len
            .trim()
            .parse()
            .map_err(|_| ValueError::NotAPrefixLength { text: len.to_string() })?;
        if len > width {
            return Err(ValueError::PrefixTooLong { len, width });
        }
        return Ok(KeyMatch::Prefix { value: v, len });
    }
    if let Some((lo, hi)) = text.split_once("..") {
        let lo = fit(parse_number(lo)?, "range start")?;
        let hi = fit(parse_number(hi)?, "range end")?;
        return Ok(KeyMatch::Range { lo, hi });
    }
    let (v, m, bits) = parse_masked(text)?;
    let v = fit(v, "value")?;
    if bits == 0 {
        return Ok(match kind {
            MatchKind::Lpm => KeyMatch::Prefix { value: v, len: width },
            MatchKind::Range => KeyMatch::Range { lo: v, hi: v },
            _ => KeyMatch::Mask { value: v, mask: full },
        });
    }
    // Wildcard digits: the number's digits cover its low `bits` bits.
    let m = (m | (full & !mask(bits))) & full;
    Ok(match kind {
        MatchKind::Lpm => {
            let len = m.count_ones();
            if m != full ^ mask(width - len) {
                return Err(ValueError::LpmWildcards { text: text.to_string() });
            }
            KeyMatch::Prefix { value: v & m, len }
        }
        _ => KeyMatch::Mask { value: v & m, mask: m },
    })
}

fn parse_add<'p>(
    p: &'p Pipeline,
    text: &str,
) -> Result<(&'p crate::exec::P4Table, P4Entry), StfLineError> {
    let (tname, mut rest) = split_word(text);
    let table = p.objects.table(tname)?;
    let mut priority = None;
    let (first, after) = split_word(rest);
    if !first.is_empty() && first.chars().all(|c| c.is_ascii_digit()) {
        priority =
            Some(first.parse::<u32>().map_err(|_| StfLineError::BadPriority(first.to_string()))?);
        rest = after;
    }
    let mut keys = table.unset_keys();
    let Some(open) = rest.find('(') else {
        return Err(StfLineError::Syntax("expected ACTION(ARGS) after the key"));
    };
    let head = &rest[..open];
    let mut words: Vec<&str> = head.split_whitespace().collect();
    let action_name = words.pop().ok_or(StfLineError::Syntax("expected an action name"))?;
    for w in words {
        let (k, v) = w.split_once(':').ok_or_else(|| StfLineError::NotKeyValue(w.to_string()))?;
        let k = k.replace('$', "");
        let i = table
            .keys
            .iter()
            .position(|f| f.name == k)
            .or_else(|| table.keys.iter().position(|f| f.name.ends_with(&format!(".{k}"))))
            .ok_or_else(|| EntryError::NoKeyField {
                table: table.name.clone(),
                field: k.clone(),
                fields: table.keys.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", "),
            })?;
        let f = &table.keys[i];
        keys[i] = parse_key_match(f.kind, f.width, v)
            .map_err(|source| EntryError::KeyValue { field: f.name.clone(), source })?;
    }
    let (action, args) = parse_action(table, &format!("{action_name}{}", &rest[open..]))?;
    Ok((table, P4Entry { keys, priority, action, args }))
}

/// `name(arg:value, ...)` or `name(value, ...)`, with values in parameter order.
fn parse_action(
    table: &crate::exec::P4Table,
    text: &str,
) -> Result<(String, Vec<u128>), StfLineError> {
    parse_action_of(&table.name, &table.action_names, &table.params, text)
}

/// [`parse_action`] against the actions `names` (with their `params`) of `owner`.
fn parse_action_of(
    owner: &str,
    names: &[String],
    params: &[Vec<(String, u32, bool)>],
    text: &str,
) -> Result<(String, Vec<u128>), StfLineError> {
    let text = text.trim();
    let text = text.split('=').next().unwrap_or(text).trim();
    let (name, args) = match text.find('(') {
        Some(i) => {
            let inner = text[i + 1..]
                .trim_end()
                .strip_suffix(')')
                .ok_or(StfLineError::Syntax("missing `)`"))?;
            (text[..i].trim(), inner)
        }
        None => (text, ""),
    };
    let a = crate::exec::table::find_action(owner, names, name)?;
    let params = &params[a];
    let mut values = vec![None; params.len()];
    for (pos, arg) in args.split(',').map(str::trim).filter(|s| !s.is_empty()).enumerate() {
        let (slot, v) = match arg.split_once(':') {
            Some((n, v)) if !n.trim().starts_with("0x") && n.trim().parse::<u128>().is_err() => {
                let n = n.trim();
                let k = params.iter().position(|p| p.0 == n).ok_or_else(|| {
                    EntryError::NoParam { action: name.to_string(), param: n.to_string() }
                })?;
                (k, v)
            }
            _ => (pos, arg),
        };
        if slot >= values.len() {
            return Err(StfLineError::TooManyArgs {
                action: name.to_string(),
                count: params.len(),
            });
        }
        values[slot] = Some(parse_number(v)?);
    }
    let args = values
        .into_iter()
        .zip(params)
        .map(|(v, p)| {
            v.ok_or_else(|| EntryError::MissingParam {
                action: name.to_string(),
                param: p.0.clone(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((names[a].clone(), args))
}

/// The action profile commands, after BMv2's CLI but with ids the test chooses:
/// `act_prof_create_member PROFILE ID ACTION(ARGS)`, `act_prof_modify_member` (same form),
/// `act_prof_create_group PROFILE ID [MEMBER...]`, `act_prof_add_member_to_group PROFILE
/// MEMBER GROUP`. Entries then name `$member(ID)` or `$group(ID)` as their action.
fn profile_command(p: &Pipeline, cmd: &str, rest: &str) -> Result<(), StfLineError> {
    let (name, rest) = split_word(rest);
    let profile = p.objects.profile(name)?;
    let parse_id = |text: &str| -> Result<u32, StfLineError> {
        u32::try_from(parse_number(text)?).map_err(|_| StfLineError::Syntax("ids are 32-bit"))
    };
    let (id, rest) = split_word(rest);
    let id = parse_id(id)?;
    let profile_err = |e: crate::exec::ProfileError| StfLineError::Entry(e.into());
    match cmd {
        "act_prof_create_member" | "act_prof_modify_member" => {
            let names = &profile.actions;
            let (action, args) = parse_action_of(&profile.name, &names.names, &names.params, rest)?;
            let member = crate::exec::Member { action, args };
            profile.write_member(id, member, cmd == "act_prof_modify_member").map_err(profile_err)
        }
        "act_prof_create_group" => {
            let members = rest
                .split_whitespace()
                .map(|m| Ok((parse_id(m)?, 1)))
                .collect::<Result<Vec<_>, StfLineError>>()?;
            let group = crate::exec::Group { members, max_size: 0 };
            profile.write_group(id, group, false).map_err(profile_err)
        }
        _ => {
            // act_prof_add_member_to_group PROFILE MEMBER GROUP
            let group = parse_id(rest.trim())?;
            let mut written =
                profile.groups().into_iter().find(|g| g.0 == group).map(|g| g.1).ok_or_else(
                    || {
                        profile_err(crate::exec::ProfileError::NoGroup {
                            profile: profile.name.clone(),
                            id: group,
                        })
                    },
                )?;
            written.members.push((id, 1));
            profile.write_group(group, written, true).map_err(profile_err)
        }
    }
}

/// A register and a checked index into it.
fn register_cell(
    p: &Pipeline,
    name: &str,
    index: &str,
) -> Result<(Arc<hotplane_tables::objects::RegisterArray>, usize), StfLineError> {
    let r = find_register(p, name)?;
    let index = parse_number(index)? as usize;
    if index >= r.len() {
        return Err(StfLineError::RegisterIndex { name: name.to_string(), cells: r.len(), index });
    }
    Ok((r, index))
}

fn find_register(
    p: &Pipeline,
    name: &str,
) -> Result<Arc<hotplane_tables::objects::RegisterArray>, StfLineError> {
    match p.objects.instance_index(&p.program, name).map(|i| &p.objects.instances[i]) {
        Some(InstanceRt::Register(r)) => Ok(Arc::clone(r)),
        Some(_) => Err(StfLineError::NotARegister(name.to_string())),
        None => Err(StfLineError::NoRegister(name.to_string())),
    }
}

fn compare(got: u128, op: &str, want: u128) -> Result<bool, StfLineError> {
    Ok(match op {
        "==" => got == want,
        "!=" => got != want,
        "<" => got < want,
        "<=" => got <= want,
        ">" => got > want,
        ">=" => got >= want,
        _ => return Err(StfLineError::UnknownComparison(op.to_string())),
    })
}

/// `NAME(INDEX) [packets|bytes] [OP VALUE]`: `None` when the check holds.
fn check_counter(p: &Pipeline, text: &str) -> Result<Option<String>, StfLineError> {
    const USAGE: &str = "usage: check_counter NAME(INDEX) [packets|bytes] [OP VALUE]";
    let (head, rest) = text.split_once(')').ok_or(StfLineError::Syntax(USAGE))?;
    let (name, index) =
        head.split_once('(').ok_or(StfLineError::Syntax("usage: check_counter NAME(INDEX) ..."))?;
    let (name, index) = (name.trim(), parse_number(index)? as usize);
    let words: Vec<&str> = rest.split_whitespace().collect();
    let (what, op, value) = match words[..] {
        [] => ("packets", ">", "0"),
        [w] if w == "packets" || w == "bytes" => (w, ">", "0"),
        [op, v] => ("packets", op, v),
        [w, op, v] => (w, op, v),
        _ => return Err(StfLineError::Syntax(USAGE)),
    };
    let counter = match p.objects.instance_index(&p.program, name).map(|i| &p.objects.instances[i])
    {
        Some(InstanceRt::Counter(c)) => Arc::clone(c),
        Some(_) => return Err(StfLineError::NotACounter(name.to_string())),
        None => return Err(StfLineError::NoCounter(name.to_string())),
    };
    if index >= counter.len() {
        return Err(StfLineError::CounterIndex {
            name: name.to_string(),
            cells: counter.len(),
            index,
        });
    }
    let (packets, bytes) = counter.read(index);
    let got = match what {
        "packets" => packets,
        "bytes" => bytes,
        other => return Err(StfLineError::NotACounterField(other.to_string())),
    } as u128;
    let want = parse_number(value)?;
    Ok((!compare(got, op, want)?)
        .then(|| format!("counter {name}({index}) {what} is {got}; expected {op} {want}")))
}

#[cfg(test)]
mod hex_tests {
    use super::*;

    /// The fuzzer's crash: a non-ASCII letter among hex digits was sliced through.
    #[test]
    fn non_ascii_hex_is_refused_not_sliced() {
        assert_eq!(parse_hex("0вE"), Err(StfLineError::NotAHexByte("в".into())));
        assert_eq!(parse_hex("+f"), Err(StfLineError::NotAHexByte("+".into())));
        assert_eq!(parse_hex("0a 0b"), Ok(vec![0x0a, 0x0b]));
    }
}
