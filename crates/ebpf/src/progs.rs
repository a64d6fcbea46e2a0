//! The programs a data plane runs, as bpftool shows the kernel's: where each is installed
//! (target, version, workers), what it is (name, origin, engine, instructions, machine code,
//! maps, verification and compile cost) and what it did (packets per XDP action), and its code
//! as loaded (`xlated`: the linked instructions) or as compiled (`jited`: the machine code).

use crate::stage::XdpStage;
use hotplane_core::StageRef;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

/// The kind's stages and where the engine installed them.
#[derive(Default)]
pub struct Placements {
    /// Stages the kind built that may still be alive: how it recognises its own.
    built: Vec<Weak<XdpStage>>,
    /// By target (`pre`, `mid`, `post`, `extern:NAME`, `flow:...`).
    placed: BTreeMap<String, Placed>,
}

struct Placed {
    stage: Weak<XdpStage>,
    version: u64,
    workers: usize,
}

/// Why a dump was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgError {
    #[error("no eBPF program at {target}; eBPF programs run at: {running}")]
    NoProgram { target: String, running: String },
    #[error("dump `{0}`: give `xlated` (the instructions) or `jited` (the machine code)")]
    Form(String),
    #[error("the program at {0} runs on the interpreter: it has no machine code")]
    NotJited(String),
}

/// The address an `Arc` points at, without its vtable.
fn address<T: ?Sized>(p: *const T) -> *const () {
    p as *const ()
}

impl Placements {
    pub fn built(&mut self, stage: &Arc<XdpStage>) {
        self.built.retain(|w| w.strong_count() > 0);
        self.built.push(Arc::downgrade(stage));
    }

    /// The engine installed `program` at `target` on `workers` workers (`None`: removed it).
    pub fn installed(
        &mut self,
        target: &str,
        workers: usize,
        program: Option<&StageRef>,
        version: u64,
    ) {
        let ours = program.and_then(|p| {
            let at = address(Arc::as_ptr(p));
            self.built.iter().find(|w| address(Weak::as_ptr(w)) == at).cloned()
        });
        match ours {
            Some(stage) => {
                self.placed.insert(target.to_string(), Placed { stage, version, workers });
            }
            None => {
                self.placed.remove(target);
            }
        }
    }

    fn running(&self) -> Vec<(&str, &Placed, Arc<XdpStage>)> {
        self.placed.iter().filter_map(|(t, p)| Some((t.as_str(), p, p.stage.upgrade()?))).collect()
    }

    /// Every running program, as `hotplane ebpf prog list` shows them.
    pub fn list(&self) -> Value {
        Value::Array(self.running().into_iter().map(|(t, p, s)| describe(t, p, &s)).collect())
    }

    /// The program at `target`, its code as `form` (`xlated` or `jited`).
    pub fn dump(&self, target: &str, form: &str) -> Result<Value, ProgError> {
        let running = self.running();
        let Some((t, placed, stage)) = running.iter().find(|(t, _, _)| *t == target) else {
            let names: Vec<&str> = running.iter().map(|(t, _, _)| *t).collect();
            return Err(ProgError::NoProgram {
                target: target.to_string(),
                running: if names.is_empty() { "none".into() } else { names.join(", ") },
            });
        };
        let mut v = describe(t, placed, stage);
        match form {
            "xlated" => v["xlated"] = crate::asm::disassemble(stage.program.insns()).into(),
            "jited" => {
                let code = stage
                    .program
                    .jit_code()
                    .ok_or_else(|| ProgError::NotJited(target.to_string()))?;
                v["jited"] = hex_lines(code.code()).into();
            }
            other => return Err(ProgError::Form(other.to_string())),
        }
        Ok(v)
    }
}

fn describe(target: &str, placed: &Placed, s: &XdpStage) -> Value {
    let p = &s.program;
    let c = &s.counters;
    // Each counter read once, so that `runs` is their sum while packets flow.
    let counts = [c.pass(), c.drop(), c.tx(), c.redirect(), c.aborted(), c.invalid()];
    let [pass, drop, tx, redirect, aborted, invalid] = counts;
    let actions = json!({
        "pass": pass, "drop": drop, "tx": tx, "redirect": redirect,
        "aborted": aborted, "invalid": invalid,
    });
    let runs: u64 = counts.iter().sum();
    let (run_time_ns, run_cnt) = (c.run_time_ns(), c.run_cnt());
    json!({
        "target": target,
        "version": placed.version,
        "workers": placed.workers,
        "name": p.name,
        "origin": s.origin,
        "engine": format!("{:?}", p.engine).to_lowercase(),
        "insns": p.insns().len(),
        "jited_bytes": p.jit_code().map_or(0, |j| j.code().len()),
        "maps": p.maps.iter().map(|m| m.name.clone()).collect::<Vec<_>>(),
        "verified_insns": p.stats.processed,
        "verify_us": p.stats.verify_ns / 1000,
        "compile_us": p.stats.compile_ns / 1000,
        "runs": runs,
        "actions": actions,
        "run_time_ns": run_time_ns,
        "run_cnt": run_cnt,
        // Per packet, over the packets timed (`hotplane ebpf prog stats on`).
        "ns_per_packet": (run_cnt > 0).then(|| ((run_time_ns as f64 / run_cnt as f64) * 10.0).round() / 10.0),
    })
}

/// Machine code as `offset: 16 bytes` lines.
fn hex_lines(code: &[u8]) -> String {
    code.chunks(16)
        .enumerate()
        .map(|(i, chunk)| {
            let bytes: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
            format!("{:5x}: {}", i * 16, bytes.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}
