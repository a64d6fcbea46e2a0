//! The P4 budgets come from the node's configuration (`[p4.limits]`) and hold on every path
//! where the node compiles P4: programs named by the config at start and programs arriving in
//! updates. A program over a configured budget is refused with the budget's name and limit;
//! the same program passes under the defaults.
#![cfg(feature = "p4")]

use hotplane::Config;
use hotplane_control::api::Request;
use hotplane_control::{Flags, Kind, Target, UpdateHeader, WorkerScope};
use hotplane_core::Position;

const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

/// A v1model program whose ingress declares and applies `n` tables.
fn program_with_tables(n: usize) -> String {
    let decls: String = (0..n)
        .map(|i| {
            format!(
                "    action set{i}(bit<9> port) {{ sm.egress_spec = port; }}\n    table t{i} {{ \
                 key = {{ hdr.eth.etherType: exact; }} actions = {{ set{i}; NoAction; }} \
                 default_action = NoAction(); }}\n"
            )
        })
        .collect();
    let applies: String = (0..n).map(|i| format!("t{i}.apply(); ")).collect();
    format!(
        r#"#include <core.p4>
#include <v1model.p4>
header eth_t {{ bit<48> dst; bit<48> src; bit<16> etherType; }}
struct headers {{ eth_t eth; }}
struct metadata {{ }}
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {{
    state start {{ pkt.extract(hdr.eth); transition accept; }}
}}
control VC(inout headers hdr, inout metadata meta) {{ apply {{ }} }}
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {{
{decls}    apply {{ {applies}}}
}}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control CC(inout headers hdr, inout metadata meta) {{ apply {{ }} }}
control D(packet_out pkt, in headers hdr) {{ apply {{ pkt.emit(hdr.eth); }} }}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"#
    )
}

fn node_config(extra: &str) -> Config {
    let toml = format!(
        "[[port]]\nname = \"p0\"\nkind = \"mem\"\n[[control.keys]]\nid = 1\nkey = \"{KEY_HEX}\"\n{extra}"
    );
    Config::parse(&toml, "test").unwrap()
}

/// Send `program` as an authenticated P4 update for the `pre` position; the last ack.
fn update(plane: &hotplane::Engine, seq: u64, program: &str) -> serde_json::Value {
    let header = UpdateHeader {
        kind: Kind::P4,
        flags: Flags::default(),
        key_id: 1,
        seq,
        target: Target::Position(Position::Pre),
        worker: WorkerScope::All,
    };
    let key = hotplane_control::parse_key(KEY_HEX).unwrap();
    let frags =
        hotplane_control::envelope::build(&header, program.as_bytes(), Some(&key), 1400).unwrap();
    let r = plane.request(Request::Update { fragments: frags.iter().map(hex::encode).collect() });
    assert!(r.ok, "{:?}", r.error);
    r.result.unwrap().as_array().unwrap().last().unwrap().clone()
}

#[test]
fn a_p4_update_over_a_configured_budget_is_refused_naming_it() {
    let plane = hotplane::start(node_config("[p4.limits]\ntables = 2\n")).unwrap();
    let ack = update(&plane, 1, &program_with_tables(3));
    assert_eq!(ack["status"], "refused", "{ack}");
    let message = ack["message"].as_str().unwrap_or_default();
    assert!(message.contains("over the `tables` budget (limit 2)"), "{message}");
    // At the limit is within it.
    let ack = update(&plane, 2, &program_with_tables(2));
    assert_eq!(ack["status"], "applied", "{ack}");
    assert_eq!(plane.stop().panics, 0);
}

#[test]
fn the_same_p4_update_passes_under_the_default_budgets() {
    let plane = hotplane::start(node_config("")).unwrap();
    let ack = update(&plane, 1, &program_with_tables(3));
    assert_eq!(ack["status"], "applied", "{ack}");
    assert_eq!(plane.stop().panics, 0);
}

#[test]
fn a_configured_p4_program_over_a_configured_budget_stops_start_up() {
    let dir = std::env::temp_dir().join(format!("hotplane-p4-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("three_tables.p4");
    std::fs::write(&file, program_with_tables(3)).unwrap();
    let pre = format!("[pipeline]\npre = {{ stage = \"p4\", program = \"{}\" }}\n", file.display());

    let refused = hotplane::start(node_config(&format!("{pre}[p4.limits]\ntables = 2\n")));
    let error = format!("{:#}", refused.err().expect("a program over the budget started"));
    assert!(error.contains("pipeline.pre"), "{error}");
    assert!(error.contains("over the `tables` budget (limit 2)"), "{error}");

    let plane = hotplane::start(node_config(&pre)).unwrap();
    assert_eq!(plane.stop().panics, 0);
    std::fs::remove_dir_all(&dir).ok();
}

/// `hotplane p4 check --limit KEY=VALUE` checks a program against the budgets a node is
/// configured with (the keys of `[p4.limits]`), before it is sent.
#[test]
fn p4_check_takes_budgets_from_the_command_line() {
    let dir = std::env::temp_dir().join(format!("hotplane-p4-check-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("three_tables.p4");
    std::fs::write(&file, program_with_tables(3)).unwrap();
    let check = |limits: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_hotplane"));
        cmd.args(["p4", "check"]).arg(&file);
        for l in limits {
            cmd.args(["--limit", l]);
        }
        let out = cmd.output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };

    let (ok, stderr) = check(&[]);
    assert!(ok, "{stderr}");
    let (ok, stderr) = check(&["tables=2"]);
    assert!(!ok);
    assert!(stderr.contains("over the `tables` budget (limit 2)"), "{stderr}");
    let (ok, stderr) = check(&["tables=3", "actions=100"]);
    assert!(ok, "{stderr}");
    let (ok, stderr) = check(&["tabels=2"]);
    assert!(!ok);
    assert!(stderr.contains("unknown field `tabels`"), "{stderr}");
    let (ok, stderr) = check(&["tables"]);
    assert!(!ok);
    assert!(stderr.contains("--limit tables"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}
