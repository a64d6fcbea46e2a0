//! `hotplane wasp asm|disasm|check|run`: the command line of active packets, here so that the
//! binary only wires the subcommand in (feature `cli`).
//!
//! `run` sends one packet through a chain of simulated nodes, each with its own store, and
//! prints what every hop saw and did: the way to try a program before any router runs it.

use crate::asm::{assemble, disassemble, Assembled};
use crate::decode::decode;
use crate::error::Fault;
use crate::ess::{Ess, EssConfig};
use crate::filter::{process, FilterConfig, OnFault};
use crate::vpu::{Env, Fate};
use crate::wire::{WaspPacket, WaspRepr, MAX_KEYS, NO_NEXT_HEADER};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Subcommand)]
pub enum WaspCmd {
    /// Assemble a program: a listing (offsets, bytes, instructions), or `--hex`, or raw code
    /// bytes to a file with `-o`.
    Asm {
        file: PathBuf,
        /// Print the code as one line of hex only.
        #[arg(long)]
        hex: bool,
        /// Write the raw code bytes here.
        #[arg(short, long)]
        out: Option<PathBuf>,
    },
    /// Disassemble code bytes (a file of raw code, or `--hex`) into text `asm` accepts.
    Disasm {
        file: Option<PathBuf>,
        #[arg(long, conflicts_with = "file")]
        hex: Option<String>,
    },
    /// Assemble and validate as a node would (jumps, key references), with its bounds.
    Check {
        file: PathBuf,
        /// Keys the packet will declare (default: as many as the code uses).
        #[arg(long)]
        keys: Option<usize>,
        #[arg(long)]
        json: bool,
    },
    /// Run one packet through `--hops` nodes (each with its own store) and show each hop.
    Run {
        file: PathBuf,
        /// Declared keys, in slot order (`--key 7 --key 0x10`).
        #[arg(long = "key", value_parser = parse_u64)]
        keys: Vec<u64>,
        /// Scratchpad words, comma-separated (`--scratch 0,0,5`).
        #[arg(long, value_delimiter = ',', value_parser = parse_u64)]
        scratch: Vec<u64>,
        /// Nodes on the path; node i has id i+1 and address 10.0.0.(i+1), and sees the packet
        /// with TTL 64 - i (an IPv4 header is the run's header bank).
        #[arg(long, default_value_t = 1)]
        hops: usize,
        /// Times to send the packet (the stores keep what earlier copies wrote).
        #[arg(long, default_value_t = 1)]
        repeat: usize,
        /// Queue depth every node exports as `e.queue`.
        #[arg(long, default_value_t = 0)]
        queue: u64,
        /// Forward faulted packets flagged instead of dropping them.
        #[arg(long)]
        forward_flagged: bool,
        #[arg(long)]
        json: bool,
    },
}

/// A number in decimal or `0x` hex.
fn parse_u64(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|e| format!("`{text}`: {e}"))
}

/// Why a command failed: the message the user sees.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(String);

fn fail(message: impl Into<String>) -> ToolError {
    ToolError(message.into())
}

fn read_source(path: &Path) -> Result<String, ToolError> {
    std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read {}: {e}", path.display())))
}

fn assemble_file(path: &Path) -> Result<Assembled, ToolError> {
    assemble(&read_source(path)?).map_err(|e| fail(format!("{}:{e}", path.display())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Runs one subcommand, printing to stdout.
pub fn run(cmd: WaspCmd) -> Result<(), ToolError> {
    match cmd {
        WaspCmd::Asm { file, hex: as_hex, out } => {
            let assembled = assemble_file(&file)?;
            if let Some(out) = out {
                std::fs::write(&out, &assembled.code)
                    .map_err(|e| fail(format!("cannot write {}: {e}", out.display())))?;
            }
            if as_hex {
                println!("{}", hex(&assembled.code));
            } else {
                print!("{}", listing(&assembled));
            }
            Ok(())
        }
        WaspCmd::Disasm { file, hex: text } => {
            let code = match (file, text) {
                (Some(file), None) => {
                    hotplane_core::kind::read_local_file(&file).map_err(|e| fail(e.to_string()))?
                }
                (None, Some(text)) => parse_hex(&text)?,
                _ => return Err(fail("give a file of code bytes or --hex")),
            };
            print!("{}", disassemble(&code));
            Ok(())
        }
        WaspCmd::Check { file, keys, json } => {
            let report = check(&file, keys)?;
            if json {
                println!("{report}");
            } else {
                println!(
                    "{}: ok: {} bytes, {} instructions (at most {} steps), {} key(s) used",
                    file.display(),
                    report["code_bytes"],
                    report["instructions"],
                    report["max_steps"],
                    report["keys_used"]
                );
            }
            Ok(())
        }
        WaspCmd::Run { file, keys, scratch, hops, repeat, queue, forward_flagged, json } => {
            let on_fault = if forward_flagged { OnFault::ForwardFlagged } else { OnFault::Drop };
            let trip = Trip { keys, scratch, hops, repeat, queue, on_fault };
            let report = trip.run(&assemble_file(&file)?)?;
            if json {
                println!("{report}");
            } else {
                print!("{}", render(&report));
            }
            Ok(())
        }
    }
}

fn parse_hex(text: &str) -> Result<Vec<u8>, ToolError> {
    let digits: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    if let Some(bad) = digits.chars().find(|c| !c.is_ascii_hexdigit()) {
        return Err(fail(format!("--hex: `{bad}` is not a hex digit")));
    }
    if digits.len() % 2 != 0 {
        return Err(fail("--hex: an odd number of hex digits"));
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&digits[i..i + 2], 16)
                .map_err(|_| fail(format!("--hex: `{}` is not hex", &digits[i..i + 2])))
        })
        .collect()
}

/// Offsets, bytes and instructions (the disassembly, labels and all), then the totals.
fn listing(assembled: &Assembled) -> String {
    let code = &assembled.code;
    // The disassembler writes one line per instruction (or undecodable byte), in order, with
    // label lines between: walk the code the same way to put offsets and bytes beside them.
    let mut spans = Vec::new();
    let mut at = 0;
    while at < code.len() {
        let len = crate::isa::decode_one(&code[at..]).map_or(1, |(_, len)| len);
        spans.push((at, len));
        at += len;
    }
    let mut spans = spans.into_iter();
    let mut out = String::new();
    for line in disassemble(code).lines() {
        if line.ends_with(':') {
            let _ = writeln!(out, "{line}");
        } else if let Some((at, len)) = spans.next() {
            let _ = writeln!(out, "{at:3}  {:<8} {}", hex(&code[at..at + len]), line.trim());
        }
    }
    let _ = writeln!(
        out,
        "{} bytes, {} key(s) used\ncode: {}",
        code.len(),
        assembled.keys_used,
        hex(code)
    );
    out
}

fn check(file: &Path, keys: Option<usize>) -> Result<Value, ToolError> {
    let assembled = assemble_file(file)?;
    let keys = keys.unwrap_or(assembled.keys_used);
    if keys > MAX_KEYS {
        return Err(fail(format!("--keys {keys}: a packet declares at most {MAX_KEYS}")));
    }
    let program = decode(&assembled.code, keys).map_err(|e| {
        fail(format!("{}: a node would drop it: {e} (declared keys: {keys})", file.display()))
    })?;
    Ok(json!({
        "code_bytes": assembled.code.len(),
        "instructions": program.len(),
        "max_steps": program.len(),
        "keys_used": assembled.keys_used,
        "uses_store": program.uses_store(),
        "code_hex": hex(&assembled.code),
    }))
}

/// One packet's trip through simulated nodes.
struct Trip {
    keys: Vec<u64>,
    scratch: Vec<u64>,
    hops: usize,
    repeat: usize,
    queue: u64,
    on_fault: OnFault,
}

/// Largest simulated path (a path scan records 30 hops).
const MAX_HOPS: usize = 64;
/// Most copies one `run` sends (its report holds every hop of every copy).
const MAX_REPEAT: usize = 10_000;

impl Trip {
    fn run(&self, assembled: &Assembled) -> Result<Value, ToolError> {
        if self.hops == 0 || self.hops > MAX_HOPS {
            return Err(fail(format!("--hops {}: 1 to {MAX_HOPS}", self.hops)));
        }
        if self.repeat > MAX_REPEAT {
            return Err(fail(format!("--repeat {}: at most {MAX_REPEAT}", self.repeat)));
        }
        if self.keys.len() < assembled.keys_used {
            return Err(fail(format!(
                "the code uses {} key slot(s); give as many --key",
                assembled.keys_used
            )));
        }
        let repr = WaspRepr {
            next_header: NO_NEXT_HEADER,
            keys: self.keys.clone(),
            scratch: self.scratch.iter().flat_map(|w| w.to_be_bytes()).collect(),
            code: assembled.code.clone(),
            ..WaspRepr::default()
        };
        let sent = repr.to_bytes().map_err(|e| fail(format!("the packet: {e}")))?;
        let config = EssConfig { capacity: 1024, ..EssConfig::default() };
        let stores: Vec<Ess> = (0..self.hops)
            .map(|_| Ess::new(&config))
            .collect::<Result<_, _>>()
            .map_err(|e| fail(e.to_string()))?;
        let filter = FilterConfig { on_fault: self.on_fault, ..FilterConfig::default() };
        let mut sends = Vec::new();
        for copy in 0..self.repeat.max(1) {
            let mut packet = sent.clone();
            let mut hops = Vec::new();
            for (i, store) in stores.iter().enumerate() {
                let node = i as u64 + 1;
                let env = Env {
                    node_id: node,
                    node_addr: Env::ipv4_mapped([10, 0, 0, node as u8]),
                    in_port: 0,
                    out_port: u64::MAX,
                    time_ns: clock(copy, node),
                    queue_depth: self.queue,
                    packet_len: packet.len() as u64 + 28,
                    in_profile: true,
                };
                let header = ipv4_header(64 - i.min(63) as u8, packet.len());
                let hop = match process(&mut packet, &env, &header, store, &filter) {
                    Err(reason) => json!({"node": node, "refused": reason.name()}),
                    Ok(done) => {
                        let view = WaspPacket::new_checked(&packet[..]).ok();
                        let words: Vec<u64> = view
                            .map(|v| v.scratch().chunks(8).map(word).collect())
                            .unwrap_or_default();
                        let outcome = done.outcome;
                        json!({
                            "node": node,
                            "fate": fate_name(done.fate),
                            "steps": outcome.map_or(0, |o| o.steps),
                            "fault": outcome.and_then(|o| o.fault).map(|(f, pc)| fault_text(f, pc)),
                            "scratch": words,
                        })
                    }
                };
                let stop = hop.get("refused").is_some() || hop["fate"] != "fwd";
                hops.push(hop);
                if stop {
                    break;
                }
            }
            sends.push(json!({"copy": copy + 1, "hops": hops}));
        }
        let stored: Vec<Value> = stores
            .iter()
            .enumerate()
            .map(|(i, store)| {
                let entries: Vec<Value> = self
                    .keys
                    .iter()
                    .filter_map(|&k| store.get(k, clock(self.repeat, 0)).map(|b| (k, b)))
                    .map(|(k, bank)| json!({"key": k, "words": bank.chunks(8).map(word).collect::<Vec<_>>()}))
                    .collect();
                json!({"node": i + 1, "entries": entries})
            })
            .collect();
        Ok(json!({"code_bytes": assembled.code.len(), "sends": sends, "stores": stored}))
    }
}

/// The IPv4 header a node sees in front of the shim (protocol 253, 10.0.0.100 -> 10.0.0.200):
/// the header bank of the run, its TTL one lower at every hop, as routers leave it.
fn ipv4_header(ttl: u8, shim_len: usize) -> [u8; 20] {
    let total = (20 + shim_len).min(usize::from(u16::MAX)) as u16;
    let mut header = [0x45, 0, 0, 0, 0, 0, 0x40, 0, ttl, 253, 0, 0, 10, 0, 0, 100, 10, 0, 0, 200];
    header[2..4].copy_from_slice(&total.to_be_bytes());
    let sum = hotplane_core::wire::internet_checksum(&header);
    header[10..12].copy_from_slice(&sum.to_be_bytes());
    header
}

/// The simulated clock: copy `copy` reaches node `node` at this time (1 ms between copies).
fn clock(copy: usize, node: u64) -> u64 {
    1_000_000 * copy as u64 + node
}

fn word(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0, |w, &b| w << 8 | u64::from(b))
}

fn fate_name(fate: Fate) -> &'static str {
    match fate {
        Fate::Fwd => "fwd",
        Fate::Drop => "drop",
        Fate::Return => "return",
    }
}

fn fault_text(fault: Fault, pc: u8) -> String {
    format!("{} at byte {pc}", fault.name())
}

/// A number of the report (Value's own Display ignores widths).
fn number(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// The run report as a table per copy, then the stores.
fn render(report: &Value) -> String {
    let mut out = String::new();
    for send in report["sends"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "copy {}:", send["copy"]);
        for hop in send["hops"].as_array().into_iter().flatten() {
            if let Some(reason) = hop["refused"].as_str() {
                let _ = writeln!(out, "  node {:>2}  refused: {reason}", number(&hop["node"]));
                continue;
            }
            let fault = hop["fault"].as_str().map(|f| format!("  fault {f}")).unwrap_or_default();
            let scratch: Vec<String> =
                hop["scratch"].as_array().into_iter().flatten().map(|w| w.to_string()).collect();
            let _ = writeln!(
                out,
                "  node {:>2}  {:<6} {:>2} steps  scratch [{}]{fault}",
                number(&hop["node"]),
                hop["fate"].as_str().unwrap_or("?"),
                number(&hop["steps"]),
                scratch.join(", ")
            );
        }
    }
    for store in report["stores"].as_array().into_iter().flatten() {
        for entry in store["entries"].as_array().into_iter().flatten() {
            let node = number(&store["node"]);
            let _ =
                writeln!(out, "node {node:>2} store: key {} = {}", entry["key"], entry["words"]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(text: &str) -> (scratch_dir::Dir, PathBuf) {
        let dir = scratch_dir::Dir::new();
        let path = dir.0.join("p.s");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    /// A directory removed on drop (no tempfile dependency for two tests).
    mod scratch_dir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let dir = std::env::temp_dir().join(format!(
                    "hotplane-wasp-tool-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&dir).unwrap();
                Dir(dir)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn count_over_three_hops_twice_counts_two_at_every_node() {
        let (_dir, path) = source(include_str!("../../../examples/wasp/count.s"));
        let trip = Trip {
            keys: vec![7],
            scratch: vec![100],
            hops: 3,
            repeat: 2,
            queue: 0,
            on_fault: OnFault::Drop,
        };
        let report = trip.run(&assemble_file(&path).unwrap()).unwrap();
        for store in report["stores"].as_array().unwrap() {
            assert_eq!(store["entries"][0]["words"][0], 2, "{report}");
        }
        assert_eq!(report["sends"][1]["hops"][2]["fate"], "fwd");
        assert!(
            render(&report).contains("node  3 store: key 7 = [2,0,0,0]"),
            "{}",
            render(&report)
        );
    }

    #[test]
    fn check_says_why_a_node_would_drop_it() {
        let (_dir, path) = source("lookup k1\nfwd\n");
        let e = check(&path, Some(1)).unwrap_err().to_string();
        assert!(e.ends_with("a node would drop it: reference to an undeclared key at code byte 0 (declared keys: 1)"), "{e}");
        assert_eq!(check(&path, None).unwrap()["keys_used"], 2);
        let (_dir, bad) = source("fwd\nfoo a\n");
        let e = check(&bad, None).unwrap_err().to_string();
        assert!(e.ends_with("p.s:2:1: unknown instruction 'foo'"), "{e}");
    }

    #[test]
    fn a_drop_stops_the_trip_and_a_fault_says_where() {
        let (_dir, path) = source("ld a, e.node_id\nimm b, 2\nceq\njf ok\nst e.64[0], a\nok:\n");
        let trip = Trip {
            keys: vec![],
            scratch: vec![],
            hops: 4,
            repeat: 1,
            queue: 0,
            on_fault: OnFault::Drop,
        };
        let report = trip.run(&assemble_file(&path).unwrap()).unwrap();
        let hops = report["sends"][0]["hops"].as_array().unwrap();
        assert_eq!(hops.len(), 2, "{report}");
        assert_eq!(hops[1]["fate"], "drop");
        assert_eq!(hops[1]["fault"], "read-only at byte 7");
    }

    #[test]
    fn hex_and_numbers_parse_or_say_why() {
        assert_eq!(parse_hex("90 18").unwrap(), [0x90, 0x18]);
        assert!(parse_hex("901").unwrap_err().to_string().contains("odd"));
        assert!(parse_hex("aé0").unwrap_err().to_string().contains("`é` is not a hex digit"));
        assert!(parse_hex("+f").unwrap_err().to_string().contains("`+` is not a hex digit"));
        assert_eq!(parse_u64("0x10").unwrap(), 16);
        assert!(parse_u64("ten").is_err());
    }
}
