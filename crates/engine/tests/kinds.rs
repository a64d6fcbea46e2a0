//! The seam between the engine and program kinds, with a toy kind defined here: specs, updates,
//! control operations, config sections, install notices, statistics and watchdogs all reach
//! the kind that claims them, and nothing else does.

use hotplane_control::api::Request;
use hotplane_control::inband::UpdateSender;
use hotplane_control::{Flags, Kind, Target, UpdateHeader, WorkerScope};
use hotplane_core::batch::{Batch, Mask};
use hotplane_core::{
    BuildCx, Built, KindError, KindSetup, Meta, Program, ProgramKind, Stage, UpdateProgram,
    WorkerCx,
};
use hotplane_engine::{Config, Engine, EngineError};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Counts the packets it sees and marks them with `user = value`.
struct Tally {
    value: u64,
    seen: Arc<AtomicU64>,
}

impl Stage for Tally {
    fn name(&self) -> &str {
        "tally"
    }
    fn run(&self, batch: &mut Batch, sel: Mask, _cx: &mut WorkerCx<'_>) {
        for i in sel {
            batch.as_mut_slice()[i].meta.user = self.value;
        }
        self.seen.fetch_add(sel.count() as u64, Ordering::Relaxed);
    }
    fn run_one(&self, _: &mut [u8], meta: &mut Meta, _: &mut WorkerCx<'_>) -> u64 {
        meta.user = self.value;
        hotplane_core::xdp::XDP_PASS
    }
}

#[derive(Default)]
struct TallyKind {
    scale: u64,
    seen: Arc<AtomicU64>,
    installs: Mutex<Vec<(String, bool, u64)>>,
    watchdog_runs: AtomicU64,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    scale: u64,
}

impl ProgramKind for TallyKind {
    fn name(&self) -> &'static str {
        "tally"
    }
    fn sections(&self) -> &'static [&'static str] {
        &["tally"]
    }
    fn stages(&self) -> &'static [&'static str] {
        &["tally"]
    }
    fn build(&self, spec: &Value, _cx: &BuildCx<'_>) -> Result<Program, KindError> {
        let value = spec["value"]
            .as_u64()
            .ok_or_else(|| KindError::Invalid("tally needs a numeric `value`".into()))?;
        Ok(Some(Arc::new(Tally { value: value * self.scale, seen: self.seen.clone() })))
    }
    fn node_files(&self, spec: &Value) -> Option<&'static str> {
        spec.get("file").map(|_| "`file`")
    }
    fn update_kinds(&self) -> &'static [u8] {
        &[48]
    }
    fn build_update(&self, u: &UpdateProgram<'_>, _: &BuildCx<'_>) -> Result<Built, KindError> {
        match u.payload {
            [v] if *v > 0 => Ok(Built {
                program: Some(Arc::new(Tally { value: *v as u64, seen: self.seen.clone() })),
                note: Some(format!("seq {} for {}", u.seq, u.target)),
            }),
            _ => Err(KindError::Rejected("a tally update is one non-zero byte".into())),
        }
    }
    fn installed(&self, target: &str, _workers: &[usize], program: &Program, version: u64) {
        let ours = program.as_ref().is_some_and(|p| p.name() == "tally");
        self.installs.lock().unwrap().push((target.to_string(), ours, version));
    }
    fn ops(&self) -> &'static [&'static str] {
        &["lua-functions"]
    }
    fn request(&self, op: &str, request: &Value) -> Result<Value, KindError> {
        Ok(json!({ "answered": op, "asked": request["op"] }))
    }
    fn stats(&self) -> Option<Value> {
        Some(json!({ "packets": self.seen.load(Ordering::Relaxed) }))
    }
    fn watchdog_period(&self) -> Option<Duration> {
        Some(Duration::from_millis(1))
    }
    fn watchdog(&self, _now: u64) {
        self.watchdog_runs.fetch_add(1, Ordering::Relaxed);
    }
}

static KIND: Mutex<Option<Arc<TallyKind>>> = Mutex::new(None);

fn make(setup: &KindSetup<'_>) -> Result<Arc<dyn ProgramKind>, KindError> {
    let section: Option<Section> = setup.section("tally")?;
    let kind = Arc::new(TallyKind { scale: section.map_or(1, |s| s.scale), ..Default::default() });
    *KIND.lock().unwrap() = Some(kind.clone());
    Ok(kind)
}

const PORTS: &str = "[[port]]\nname = \"p0\"\nkind = \"mem\"\ngen = { flows = 1, count = 1000 }\n[control]\nallow_unauthenticated = true\n";

fn start(extra: &str) -> Result<(Engine, Arc<TallyKind>), EngineError> {
    let cfg = Config::parse(&format!("{PORTS}{extra}"), "test.toml")?;
    let engine = Engine::builder().kind(make).start(cfg)?;
    let kind = KIND.lock().unwrap().take().expect("the kind was made");
    Ok((engine, kind))
}

/// One test: the kind handle travels through a static, so runs must not interleave.
#[test]
fn the_engine_reaches_kinds_only_through_the_seam() {
    // A section nobody owns is refused, naming the ones that exist.
    let Err(e) = start("[talley]\nscale = 2\n") else { panic!("unknown section accepted") };
    let e = e.to_string();
    assert!(e.contains("unknown section `talley`") && e.contains("tally"), "{e}");
    // The kind's own section reaches it, and its errors come back.
    let Err(e) = start("[tally]\nscale = \"x\"\n") else { panic!("bad section accepted") };
    assert!(e.to_string().contains("[tally]"), "{e}");

    let (engine, kind) =
        start("[tally]\nscale = 3\n[pipeline]\npre = { stage = \"tally\", value = 2 }\n").unwrap();
    assert!(engine.wait_drained(Duration::from_secs(20)), "the generator's packets drained");
    assert_eq!(kind.seen.load(Ordering::Relaxed), 1000, "every packet ran the kind's stage");
    let stats = engine.stats().unwrap();
    assert_eq!(stats["tally"]["packets"], 1000, "{stats}");
    let metrics = engine.request(Request::Metrics {}).into_result().unwrap();
    let text = metrics["text"].as_str().unwrap();
    assert!(
        text.contains("\nhotplane_tally_packets 1000\n"),
        "the kind's numbers are metrics:\n{text}"
    );
    assert_eq!(kind.installs.lock().unwrap().as_slice(), [("pre".to_string(), true, 2)]);

    // A spec for an unknown stage names the stages there are.
    let bad = engine.request(Request::Install {
        target: "mid".into(),
        worker: None,
        stage: json!({"stage": "talley"}),
    });
    let msg = bad.error.unwrap_or_default();
    assert!(msg.contains("unknown stage `talley`") && msg.contains("tally"), "{msg}");

    // A native stage replacing the kind's: the kind hears that its program left `pre`.
    engine.install("pre", &serde_json::from_value(json!({"stage": "count"})).unwrap()).unwrap();
    assert_eq!(kind.installs.lock().unwrap().last().unwrap(), &("pre".to_string(), false, 3));

    // Operations the kind claims reach it with the whole request.
    let r = engine.request(Request::LuaFunctions {}).into_result().unwrap();
    assert_eq!(r, json!({"answered": "lua-functions", "asked": "lua-functions"}));
    // Operations nobody claims say so.
    let r = engine.request(Request::EbpfMaps {});
    assert!(r.error.unwrap_or_default().contains("`ebpf-maps` is not available"));

    // Updates of the kind's code reach `build_update`; others are unsupported; specs naming
    // node files are refused before the kind builds anything.
    let sender = UpdateSender::new(0, None, 47474);
    let update = |kind: Kind, seq: u64, payload: &[u8]| {
        let header = UpdateHeader {
            kind,
            flags: Flags::default(),
            key_id: 0,
            seq,
            target: Target::Position(hotplane_core::Position::Mid),
            worker: WorkerScope::All,
        };
        engine.update(&sender.datagrams(&header, payload).unwrap()).unwrap()[0].clone()
    };
    let ack = update(Kind::Wasp, 1, &[5]);
    assert_eq!(ack["status"], "applied", "{ack}");
    assert_eq!(ack["message"], "seq 1 for mid", "the kind's note reaches the ack");
    let ack = update(Kind::Wasp, 2, &[0]);
    assert_eq!(
        (ack["status"].as_str(), ack["reason"].as_str()),
        (Some("refused"), Some("rejected"))
    );
    let ack = update(Kind::Lua, 3, b"return function(pkt) end");
    assert_eq!(ack["reason"], "unsupported_kind", "{ack}");
    let spec = json!({"stage": "tally", "value": 1, "file": "/etc/passwd"}).to_string();
    let ack = update(Kind::NativeStage, 4, spec.as_bytes());
    assert!(ack["message"].as_str().unwrap().contains("names a file of the node"), "{ack}");

    // The watchdog thread runs on its own period: on a busy machine it may not have run yet.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while kind.watchdog_runs.load(Ordering::Relaxed) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(kind.watchdog_runs.load(Ordering::Relaxed) > 0, "the watchdog thread ran");

    // A service next to the data plane reports with it: in `stats` and in Prometheus.
    let obs = engine.observability();
    obs.add_source("svc", Arc::new(|| json!({"dropped": 3, "note": "x"})));
    obs.add_source("workers", Arc::new(|| json!("not in place of the workers")));
    assert_eq!(engine.stats().unwrap()["svc"]["dropped"], 3);
    assert!(engine.stats().unwrap()["workers"].is_array(), "built-in figures stay");
    let text = obs.prometheus();
    assert!(text.contains("hotplane_svc_dropped 3"), "{text}");
    assert!(!text.contains("hotplane_svc_note"), "numbers only");
    obs.remove_source("svc");
    assert!(engine.stats().unwrap().get("svc").is_none());
    let summary = engine.stop();
    assert_eq!(summary.panics, 0);
}

/// A kind that claims what belongs to the engine or to another kind.
struct Greedy {
    name: &'static str,
    ops: &'static [&'static str],
    updates: &'static [u8],
    sections: &'static [&'static str],
    stages: &'static [&'static str],
}

impl ProgramKind for Greedy {
    fn name(&self) -> &'static str {
        self.name
    }
    fn ops(&self) -> &'static [&'static str] {
        self.ops
    }
    fn update_kinds(&self) -> &'static [u8] {
        self.updates
    }
    fn sections(&self) -> &'static [&'static str] {
        self.sections
    }
    fn stages(&self) -> &'static [&'static str] {
        self.stages
    }
    fn node_files(&self, _: &Value) -> Option<&'static str> {
        None
    }
}

macro_rules! greedy {
    ($name:ident, $kind:expr) => {
        fn $name(_: &KindSetup<'_>) -> Result<Arc<dyn ProgramKind>, KindError> {
            Ok(Arc::new($kind))
        }
    };
}

const NOTHING: Greedy =
    Greedy { name: "greedy", ops: &[], updates: &[], sections: &[], stages: &[] };
greedy!(takes_stats, Greedy { ops: &["stats"], ..NOTHING });
greedy!(takes_removal, Greedy { updates: &[3], ..NOTHING });
greedy!(takes_control, Greedy { sections: &["control"], ..NOTHING });
greedy!(takes_drop, Greedy { stages: &["drop"], ..NOTHING });
greedy!(takes_tally, Greedy { name: "other", sections: &["tally"], ..NOTHING });
greedy!(takes_tally_too, Greedy { name: "another", sections: &["tally"], ..NOTHING });
greedy!(named_workers, Greedy { name: "workers", ..NOTHING });
greedy!(plain, NOTHING);

/// What the engine answers itself, and what one kind claims, no other kind can take: the
/// engine refuses to start and names both.
#[test]
fn claims_on_the_engine_or_another_kind_stop_the_start() {
    let cfg = || Config::parse(PORTS, "test.toml").unwrap();
    let refused = |kinds: &[hotplane_core::KindMaker]| match Engine::start(cfg(), kinds) {
        Ok(e) => {
            e.stop();
            String::new()
        }
        Err(e) => e.to_string(),
    };
    for (kinds, want) in [
        (
            &[takes_stats as hotplane_core::KindMaker][..],
            "engine and greedy kinds both claim operation `stats`",
        ),
        (&[takes_removal], "claim update kind 3"),
        (&[takes_control], "claim section `control`"),
        (&[takes_drop], "claim stage `drop`"),
        (&[named_workers], "the name `workers`"),
        (&[takes_tally, takes_tally_too], "other and another kinds both claim section `tally`"),
        (&[plain, plain], "greedy and greedy kinds both claim the name `greedy`"),
    ] {
        let e = refused(kinds);
        assert!(e.contains(want), "want `{want}`, got `{e}`");
    }
    assert_eq!(refused(&[plain]), "", "a kind claiming nothing starts");
}
