//! `hotplane ebpf ...`: assemble, disassemble, verify and run programs offline; run the
//! conformance suite; read and write the maps of a running data plane; send a program as an
//! authenticated update.

use anyhow::{anyhow, bail, Context as _};
use hotplane_control::api::{Client, Request};
use hotplane_control::UpdateHeader;
use hotplane_core::{Pool, PoolConfig};
use hotplane_ebpf::conformance::{find_suite, run_dir};
use hotplane_ebpf::env::Code;
use hotplane_ebpf::insn::encode_bytes;
use hotplane_ebpf::program::{Engine, LoadOptions, Program, ProgramSpec};
use hotplane_ebpf::verifier::Context;
use hotplane_ebpf::{asm, chain, helpers, xdp};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `hotplane ebpf asm FILE -o OUT`.
pub fn assemble(file: &Path, out: Option<&Path>) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file).with_context(|| file.display().to_string())?;
    let insns = asm::assemble(&text).map_err(|e| anyhow!("{}:{e}", file.display()))?;
    let out = out.map_or_else(|| file.with_extension("bin"), Path::to_path_buf);
    std::fs::write(&out, encode_bytes(&insns)).with_context(|| out.display().to_string())?;
    eprintln!("wrote {} ({} instructions)", out.display(), insns.len());
    Ok(())
}

/// `hotplane ebpf disasm FILE`.
pub fn disassemble(file: &Path, program: Option<&str>) -> anyhow::Result<()> {
    let spec = Code::from_file(file).and_then(|c| c.spec(program))?;
    for (i, m) in spec.maps.iter().enumerate() {
        println!(
            "# map {i}: {} {} key {} value {} entries {}",
            m.name,
            m.def.kind.name(),
            m.def.key_size,
            m.def.value_size,
            m.def.max_entries
        );
    }
    print!("{}", asm::disassemble(&spec.insns));
    Ok(())
}

/// The context a program is verified and run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ctx {
    Xdp,
    /// Plain memory of this many bytes (the conformance suite's environment).
    Mem(u64),
}

fn load(spec: &ProgramSpec, ctx: Ctx, engine: Engine) -> anyhow::Result<Program> {
    let (context, helpers) = match ctx {
        Ctx::Xdp => (Context::Xdp, xdp::helpers()),
        Ctx::Mem(len) => (Context::Mem { len }, helpers::conformance()),
    };
    let opts = LoadOptions { engine, ..LoadOptions::default() };
    Program::load(spec, context, &helpers, opts, None).map_err(|e| anyhow!("{e}"))
}

/// `hotplane ebpf verify FILE`.
pub fn verify(
    file: &Path,
    program: Option<&str>,
    ctx: Ctx,
    json_out: bool,
    jit_out: Option<&Path>,
) -> anyhow::Result<()> {
    let t = Instant::now();
    let spec = Code::from_file(file).and_then(|c| c.spec(program))?;
    let parse_ns = t.elapsed().as_nanos() as u64;
    let p = match load(&spec, ctx, Engine::Jit) {
        Ok(p) => p,
        Err(e) => {
            if json_out {
                println!("{}", json!({"ok": false, "program": spec.name, "error": e.to_string()}));
            }
            bail!("{}: rejected: {e}", spec.name);
        }
    };
    if let (Some(out), Some(code)) = (jit_out, p.jit_code()) {
        std::fs::write(out, code.code()).with_context(|| out.display().to_string())?;
        eprintln!(
            "wrote {} bytes of x86-64 code to {} (objdump -D -b binary -mi386:x86-64 {})",
            code.code().len(),
            out.display(),
            out.display()
        );
    }
    let helpers: Vec<u32> = p.verified.helpers_used.iter().copied().collect();
    let out = json!({
        "ok": true,
        "program": p.name,
        "instructions": p.insns().len(),
        "processed": p.stats.processed,
        "stack_bytes": p.verified.stack_depth,
        "helpers": helpers,
        "maps": spec.maps.iter().map(|m| m.name.clone()).collect::<Vec<_>>(),
        "parse_us": parse_ns as f64 / 1e3,
        "verify_us": p.stats.verify_ns as f64 / 1e3,
        "jit_us": p.stats.compile_ns as f64 / 1e3,
        "jit_bytes": p.jit_code().map_or(0, |c| c.code().len()),
    });
    if json_out {
        println!("{out}");
    } else {
        println!(
            "{}: accepted: {} instructions, {} processed, {} bytes of stack, helpers {:?}; verified in {:.1} us, JIT {:.1} us ({} bytes)",
            p.name,
            out["instructions"],
            out["processed"],
            out["stack_bytes"],
            helpers,
            p.stats.verify_ns as f64 / 1e3,
            p.stats.compile_ns as f64 / 1e3,
            out["jit_bytes"]
        );
    }
    Ok(())
}

/// `hotplane ebpf shape FILE`: the guarantee per exit action, as a table or JSON.
pub fn shape(file: &Path, section: Option<&str>, json_out: bool) -> anyhow::Result<()> {
    let spec = Code::from_file(file).and_then(|c| c.spec(section))?;
    let report = chain::shape_report(&spec, &chain::default_input())?;
    if json_out {
        println!("{}", report.to_json());
    } else {
        print!("{report}");
    }
    Ok(())
}

/// `hotplane ebpf chain UP DOWN`: specialise DOWN to what UP passes (or to `--assume`), check
/// it, and report. Exits non-zero when no specialisation came out or the check found a
/// difference (the original would stay in place).
pub fn chain(
    up: Option<&Path>,
    down: &Path,
    assume: Option<&Path>,
    opts: &chain::ChainOptions,
    out: Option<&Path>,
    json_out: bool,
) -> anyhow::Result<()> {
    let up = up.map(|f| Code::from_file(f).and_then(|c| c.spec(None))).transpose()?;
    let down = Code::from_file(down).and_then(|c| c.spec(None))?;
    let assumed = assume
        .map(|f| {
            let text = std::fs::read_to_string(f).with_context(|| f.display().to_string())?;
            hotplane_ebpf::kind::assumed_shape(&text)
                .with_context(|| format!("{}: not a shape", f.display()))
        })
        .transpose()?;
    if up.is_none() && assumed.is_none() {
        bail!("give an upstream program or --assume SHAPE.json");
    }
    let report = chain::chain_report(up.as_ref(), assumed, &down, opts);
    if json_out {
        println!("{}", report.to_json());
    } else {
        print!("{report}");
    }
    if !report.accepted() {
        bail!("{}: no specialised program may replace the original", down.name);
    }
    if let (Some(out), Ok(s)) = (out, &report.result) {
        std::fs::write(out, encode_bytes(&s.spec.insns))
            .with_context(|| out.display().to_string())?;
        eprintln!(
            "wrote {} ({} instructions; its maps are the original's)",
            out.display(),
            s.slots()
        );
    }
    Ok(())
}

/// A 64-byte IPv4/UDP frame to 10.0.0.2:5000 (`hotplane ebpf run` without `--packet`).
pub fn default_frame() -> Vec<u8> {
    let f = hotplane_core::wire::UdpFrame {
        src_mac: hotplane_core::wire::EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: hotplane_core::wire::EthernetAddress([2, 0, 0, 0, 0, 2]),
        vlan: None,
        src_ip: [10, 0, 0, 1].into(),
        dst_ip: [10, 0, 0, 2].into(),
        src_port: 1024,
        dst_port: 5000,
    };
    let payload = [0u8; 18];
    let mut buf = vec![0u8; f.header_len() + payload.len()];
    let n = f.emit(&payload, &mut buf).unwrap_or(buf.len());
    buf.truncate(n);
    buf
}

/// `hotplane ebpf run FILE`: with `--mem`, r1/r2 = memory/length and r0 is printed; else the
/// program runs as XDP on `--packet` (or a 64-byte UDP frame).
pub fn run(
    file: &Path,
    program: Option<&str>,
    mem: Option<&str>,
    packet: Option<&str>,
    engine: Engine,
    json_out: bool,
) -> anyhow::Result<()> {
    let spec = Code::from_file(file).and_then(|c| c.spec(program))?;
    if let Some(m) = mem {
        let mut bytes = hex::decode(m.trim().trim_start_matches("0x").replace([' ', ':'], ""))
            .map_err(|e| anyhow!("--mem: {e}"))?;
        let p = load(&spec, Ctx::Mem(bytes.len() as u64), engine)?;
        let r0 = p.run_mem(&mut bytes).map_err(|e| anyhow!("{e}"))?;
        if json_out {
            println!("{}", json!({"r0": r0, "mem": hex::encode(&bytes)}));
        } else {
            println!("r0 = {r0:#x} ({r0})");
        }
        return Ok(());
    }
    let frame = match packet {
        Some(h) => hex::decode(h.trim().trim_start_matches("0x").replace([' ', ':'], ""))
            .map_err(|e| anyhow!("--packet: {e}"))?,
        None => default_frame(),
    };
    let p = load(&spec, Ctx::Xdp, engine)?;
    let pool = Pool::new(PoolConfig { buffers: 4, ..PoolConfig::default() })?;
    let mut pkt = pool.alloc().ok_or_else(|| anyhow!("no packet buffer"))?;
    pkt.set_frame(&frame).map_err(|e| anyhow!("--packet: {e}"))?;
    xdp::take_redirect();
    let action = p.run_xdp(&mut pkt, 0);
    let name = hotplane_core::xdp::action_name(action).unwrap_or("invalid");
    let redirect = xdp::take_redirect();
    if json_out {
        println!(
            "{}",
            json!({"action": action, "name": name, "redirect_port": redirect, "packet": hex::encode(pkt.data())})
        );
    } else {
        println!(
            "{name} ({action}){}",
            redirect.map(|p| format!(" to port {p}")).unwrap_or_default()
        );
        println!("packet: {}", hex::encode(pkt.data()));
    }
    Ok(())
}

/// `hotplane ebpf conformance [DIR] --engine interp|jit`.
pub fn conformance(dir: Option<&Path>, engine: Engine, json_out: bool) -> anyhow::Result<()> {
    let dir: PathBuf = match dir {
        Some(d) => d.to_path_buf(),
        None => find_suite(&std::env::current_dir()?).ok_or_else(|| {
            anyhow!(
                "no conformance suite found next to the checkout: give its directory \
                 (shared/conformance/ebpf/tests), or set HOTPLANE_SHARED to the directory \
                 holding conformance/"
            )
        })?,
    };
    let s = run_dir(&dir, |t, prog| {
        let spec = ProgramSpec::bytecode(&t.name, prog.to_vec());
        let p = load(&spec, Ctx::Mem(t.mem.len() as u64), engine).map_err(|e| e.to_string())?;
        let mut mem = t.mem.clone();
        p.run_mem(&mut mem).map_err(|e| e.to_string())
    })?;
    let failures: Vec<_> = s.failures.iter().map(|(t, e)| json!({"test": t, "error": e})).collect();
    if json_out {
        println!(
            "{}",
            json!({"engine": engine.as_str(), "passed": s.passed, "failed": s.failed, "skipped": s.skipped, "failures": failures})
        );
    } else {
        for (t, e) in &s.failures {
            println!("FAIL {t}: {e}");
        }
        println!(
            "{}: {} passed, {} failed, {} skipped",
            engine.as_str(),
            s.passed,
            s.failed,
            s.skipped
        );
    }
    if s.failed > 0 {
        bail!("{} conformance test(s) failed", s.failed);
    }
    Ok(())
}

/// Map operations against a running data plane.
pub enum MapOp {
    List,
    Dump { map: String },
    Update { map: String, key: String, value: String, flags: u64 },
    Delete { map: String, key: String },
    Lookup { map: String, key: String },
}

pub fn map(socket: &Path, json: bool, op: MapOp) -> anyhow::Result<()> {
    let list = matches!(op, MapOp::List);
    let req = match op {
        MapOp::List => Request::EbpfMaps {},
        MapOp::Dump { map } => Request::EbpfMapDump { map },
        MapOp::Update { map, key, value, flags } => {
            Request::EbpfMapUpdate { map, key, value, flags }
        }
        MapOp::Delete { map, key } => Request::EbpfMapDelete { map, key },
        MapOp::Lookup { map, key } => Request::EbpfMapLookup { map, key },
    };
    let v = Client::connect(socket)?.call(&req)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if let Some(entries) = v["entries"].as_array() {
        // As bpftool map dump: a line per entry, then the count.
        entries.iter().for_each(print_entry);
        println!("Found {} element(s)", entries.len());
        return Ok(());
    }
    if v.get("key").is_some() {
        match v.get("value").is_some_and(|x| x.is_null()) {
            true => println!("key {}: not found", v["key"].as_str().unwrap_or("?")),
            false => print_entry(&v),
        }
        return Ok(());
    }
    if let Some(text) = v.as_str() {
        println!("{text}");
        return Ok(());
    }
    if !list {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    // As bpftool map list: one line per map.
    println!(
        "{:<32} {:<14} {:>5} {:>6} {:>10} {:>10}",
        "map", "kind", "key", "value", "max", "entries"
    );
    for m in v.as_array().into_iter().flatten() {
        let n = |k: &str| m[k].as_u64().unwrap_or(0);
        println!(
            "{:<32} {:<14} {:>5} {:>6} {:>10} {:>10}",
            m["name"].as_str().unwrap_or("?"),
            m["kind"].as_str().unwrap_or("?"),
            n("key_size"),
            n("value_size"),
            n("max_entries"),
            n("entries")
        );
    }
    Ok(())
}

/// One map entry for people: the key and value(s) as the object's BTF shows them, else as
/// bytes (`key: 01 00 00 00  value: 07 00 00 00`).
fn print_entry(e: &serde_json::Value) {
    let bytes = |v: &serde_json::Value| {
        let h = v.as_str().unwrap_or_default();
        let pairs: Vec<&str> = (0..h.len() / 2).filter_map(|i| h.get(2 * i..2 * i + 2)).collect();
        pairs.join(" ")
    };
    let f = &e["formatted"];
    let shown = |formatted: &serde_json::Value, raw: &serde_json::Value| match formatted {
        serde_json::Value::Null => bytes(raw),
        v => v.to_string(),
    };
    let key = shown(&f["key"], &e["key"]);
    match e["values"].as_array() {
        Some(values) => {
            println!("key: {key}");
            for (cpu, raw) in values.iter().enumerate() {
                println!("  worker {cpu}: {}", shown(&f["values"][cpu], raw));
            }
        }
        None => println!("key: {key}  value: {}", shown(&f["value"], &e["value"])),
    }
}

#[derive(clap::Subcommand)]
pub enum ProgCmd {
    /// Every running program: target, version, name, engine, size, packets.
    List,
    /// One program in full: maps, verification and compile cost, packets per XDP action.
    Show { target: String },
    /// A program's code: `xlated` (its instructions, maps linked) or `jited` (machine code).
    Dump {
        #[arg(value_parser = ["xlated", "jited"])]
        form: String,
        target: String,
    },
    /// Time the programs' runs from now on (`on`), stop (`off`), or say whether they are
    /// timed: `run_time_ns`, `run_cnt` and ns per packet in list and show, as bpftool shows
    /// them with `kernel.bpf_stats_enabled`. Costs two clock reads per batch and program.
    Stats {
        #[arg(value_parser = ["on", "off"])]
        state: Option<String>,
    },
}

/// `hotplane ebpf prog list|show|dump`.
pub fn prog(socket: &Path, json: bool, op: ProgCmd) -> anyhow::Result<()> {
    let mut client = Client::connect(socket)?;
    if let ProgCmd::Stats { state } = &op {
        let enable = state.as_deref().map(|s| s == "on");
        let v = client.call(&Request::EbpfProgStats { enable })?;
        match json {
            true => println!("{v}"),
            false if v["timing"] == true => println!("timing eBPF runs: on"),
            false => println!("timing eBPF runs: off"),
        }
        return Ok(());
    }
    let (v, form) = match &op {
        ProgCmd::Stats { .. } => unreachable!("answered above"),
        ProgCmd::List | ProgCmd::Show { .. } => (client.call(&Request::EbpfProgs {})?, None),
        ProgCmd::Dump { form, target } => {
            let req = Request::EbpfProgDump { target: target.clone(), form: form.clone() };
            (client.call(&req)?, Some(form.as_str()))
        }
    };
    let progs: Vec<serde_json::Value> = match &op {
        ProgCmd::List => v.as_array().cloned().unwrap_or_default(),
        ProgCmd::Show { target } => {
            let all = v.as_array().cloned().unwrap_or_default();
            let running: Vec<&str> = all.iter().filter_map(|p| p["target"].as_str()).collect();
            match all.iter().find(|p| p["target"] == target.as_str()) {
                Some(p) => vec![p.clone()],
                None => anyhow::bail!(
                    "no eBPF program at {target}; eBPF programs run at: {}",
                    if running.is_empty() { "none".to_string() } else { running.join(", ") }
                ),
            }
        }
        ProgCmd::Dump { .. } | ProgCmd::Stats { .. } => vec![v],
    };
    if json {
        let out = if matches!(op, ProgCmd::List) {
            serde_json::Value::from(progs)
        } else {
            progs[0].clone()
        };
        println!("{out}");
        return Ok(());
    }
    if matches!(op, ProgCmd::List) {
        println!(
            "{:<12} {:>7} {:<16} {:<6} {:>6} {:>8} {:>12} {:>8}  origin",
            "target", "version", "name", "engine", "insns", "jited", "packets", "ns/pkt"
        );
        for p in &progs {
            println!(
                "{:<12} {:>7} {:<16} {:<6} {:>6} {:>8} {:>12} {:>8}  {}",
                p["target"].as_str().unwrap_or("?"),
                p["version"].as_u64().unwrap_or(0),
                p["name"].as_str().unwrap_or("?"),
                p["engine"].as_str().unwrap_or("?"),
                p["insns"].as_u64().unwrap_or(0),
                p["jited_bytes"].as_u64().unwrap_or(0),
                p["runs"].as_u64().unwrap_or(0),
                per_packet(p),
                p["origin"].as_str().unwrap_or("?"),
            );
        }
        if progs.is_empty() {
            println!("(no eBPF program is installed)");
        }
        return Ok(());
    }
    let p = &progs[0];
    let maps: Vec<&str> =
        p["maps"].as_array().into_iter().flatten().filter_map(|m| m.as_str()).collect();
    let a = &p["actions"];
    let text = |k: &str| p[k].as_str().unwrap_or("?").to_string();
    let num = |k: &str| p[k].as_u64().unwrap_or(0);
    println!(
        "{}: xdp `{}` from {}, version {} on {} worker(s)",
        text("target"),
        text("name"),
        text("origin"),
        num("version"),
        num("workers")
    );
    println!(
        "  engine {}: {} insns ({} verified in {} us), {} bytes of machine code compiled in {} us",
        text("engine"),
        num("insns"),
        num("verified_insns"),
        num("verify_us"),
        num("jited_bytes"),
        num("compile_us")
    );
    println!("  maps: {}", if maps.is_empty() { "none".to_string() } else { maps.join(", ") });
    let count = |k: &str| a[k].as_u64().unwrap_or(0);
    println!(
        "  packets: {} (pass {}, drop {}, tx {}, redirect {}, aborted {}, invalid {})",
        num("runs"),
        count("pass"),
        count("drop"),
        count("tx"),
        count("redirect"),
        count("aborted"),
        count("invalid")
    );
    match p["ns_per_packet"].as_f64() {
        Some(ns) => println!(
            "  run time: {ns} ns per packet ({} ns over {} packets timed)",
            num("run_time_ns"),
            num("run_cnt")
        ),
        None => println!("  run time: not timed (`hotplane ebpf prog stats on`)"),
    }
    if let Some(form) = form {
        println!("{}", p[form].as_str().unwrap_or_default());
    }
    Ok(())
}

/// A program's run time per packet for the list, `-` until runs are timed.
fn per_packet(p: &serde_json::Value) -> String {
    p["ns_per_packet"].as_f64().map_or_else(|| "-".into(), |ns| format!("{ns:.1}"))
}

/// `hotplane ebpf update FILE --target T`: the file as an authenticated update (kind chosen
/// by the file's form), through the control socket.
pub struct UpdateOpts {
    pub file: PathBuf,
    pub target: String,
    pub worker: String,
    pub key_id: u32,
    pub key: [u8; 32],
    pub socket: PathBuf,
    /// The acknowledgements as JSON.
    pub json: bool,
}

pub fn update(o: &UpdateOpts) -> anyhow::Result<()> {
    let code = Code::from_file(&o.file)?;
    let payload = code.payload()?;
    let header = UpdateHeader {
        kind: hotplane_control::Kind::from_code(code.update_kind()),
        flags: Default::default(),
        key_id: o.key_id,
        seq: hotplane_core::time::unix_micros(),
        target: o.target.parse()?,
        worker: crate::cli::worker_scope(&o.worker)?,
    };
    crate::cli::submit_update(&o.socket, &header, &payload, &o.key, o.json)
}
