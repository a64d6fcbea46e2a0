//! eBPF programs in a running data plane, in all three modes of the reference work: static
//! (configured at start), pre-defined (installed at start, switched by id), and extensible
//! (new code at runtime: bytecode in-band, an ELF object and C source through the control
//! API), at `pre`, `mid`, `post` and behind an extern. Every update is acknowledged; bad code
//! is refused with the instruction and the reason while the old program keeps running; no
//! packet is lost.

mod common;

use hotplane::inband::{ack_of, UpdateSender};
use hotplane::Config;
use hotplane_control::api::Request;
use hotplane_control::{AckStatus, Flags, Kind, Reason, Target, UpdateHeader, WorkerScope};
use hotplane_core::Position;
use hotplane_ebpf::env::Code;
use hotplane_io::mem::MemReport;
use std::time::{Duration, Instant};

const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/ebpf");

fn key() -> [u8; 32] {
    hotplane_control::parse_key(KEY_HEX).unwrap()
}

/// An XDP program writing `mark` into the generator's stamp (payload offset 16, big-endian).
fn mark_asm(mark: u16) -> String {
    format!(
        "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r4, %r2\nadd %r4, 60\njgt %r4, %r3, out\n\
         mov %r5, {}\nstxh [%r2+58], %r5\nout:\nmov %r0, 2\nexit\n",
        mark.swap_bytes()
    )
}

fn mark_bytecode(mark: u16) -> Vec<u8> {
    Code::Asm(mark_asm(mark)).payload().unwrap()
}

fn plane(extra: &str) -> hotplane::Engine {
    let toml = format!(
        r#"
[dataplane]
workers = 2
[[port]]
name = "p0"
kind = "mem"
gen = {{ flows = 2, rate_pps = 100000 }}
sink = {{ record = 2000000, capture = 64 }}
[control]
max_update_bytes = 65536
[[control.keys]]
id = 1
key = "{KEY_HEX}"
{extra}
"#
    );
    let mut cfg = Config::parse(&toml, "test").unwrap();
    cfg.base_dir = Some(EXAMPLES.into());
    hotplane::start(cfg).unwrap()
}

fn header(kind: Kind, seq: u64, target: Target) -> UpdateHeader {
    UpdateHeader { kind, flags: Flags::default(), key_id: 1, seq, target, worker: WorkerScope::All }
}

/// Submit an update through the control API; returns the final acknowledgement (JSON).
fn api_update(
    plane: &hotplane::Engine,
    kind: Kind,
    seq: u64,
    target: Target,
    payload: &[u8],
) -> serde_json::Value {
    let frags =
        hotplane_control::envelope::build(&header(kind, seq, target), payload, Some(&key()), 1400)
            .unwrap();
    let r = plane.request(Request::Update { fragments: frags.iter().map(hex::encode).collect() });
    assert!(r.ok, "{:?}", r.error);
    r.result.unwrap().as_array().unwrap().last().unwrap().clone()
}

/// Wait until every worker's `target` slot runs a program whose description contains
/// `needle`, then let traffic flow through it for a while.
fn wait_slot(plane: &hotplane::Engine, target: &str, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let slots = plane.request(Request::Slots {}).result.unwrap();
        let all = slots
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["target"] == target)
            .all(|s| s["program"].as_str().unwrap().contains(needle));
        if all {
            std::thread::sleep(Duration::from_millis(100));
            return;
        }
        assert!(Instant::now() < deadline, "{target} never ran `{needle}`: {slots}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The marks flow 0 carried, in order, each run of equal marks once.
fn mark_runs(r: &MemReport) -> Vec<u16> {
    let mut runs: Vec<u16> = Vec::new();
    for s in r.samples.iter().filter(|s| s.flow == 0) {
        if runs.last() != Some(&s.mark) {
            runs.push(s.mark);
        }
    }
    runs
}

/// Whether `want` appears in `runs` in order (other runs may come between).
fn in_order(runs: &[u16], want: &[u16]) -> bool {
    let mut it = runs.iter();
    want.iter().all(|w| it.any(|r| r == w))
}

/// `xdp_count.o` at `pre`, counting for 300 ms.
fn counting_plane() -> hotplane::Engine {
    let plane = plane(
        r#"
[pipeline]
pre = { stage = "ebpf", file = "xdp_count.o" }
"#,
    );
    std::thread::sleep(Duration::from_millis(300));
    plane
}

#[test]
fn static_program_counts_and_maps_are_readable_through_the_api() {
    let plane = counting_plane();
    let maps = plane.request(Request::EbpfMaps {}).result.unwrap();
    assert_eq!(maps[0]["name"], "xdp_count/proto_count");
    assert_eq!(maps[0]["kind"], "percpu_array");
    let dump =
        plane.request(Request::EbpfMapDump { map: "xdp_count/proto_count".into() }).result.unwrap();
    // Key 5 is UDP: per-worker values summed.
    let udp: u64 = dump["entries"][5]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            u64::from_le_bytes(hex::decode(v.as_str().unwrap()).unwrap()[..8].try_into().unwrap())
        })
        .sum();
    assert!(udp > 1000, "udp count {udp}");
    // Writable too; and errors say what is wrong.
    let r = plane.request(Request::EbpfMapUpdate {
        map: "xdp_count/proto_count".into(),
        key: "0".into(),
        value: "42".into(),
        flags: 0,
    });
    assert!(r.ok, "{:?}", r.error);
    let r = plane.request(Request::EbpfMapDump { map: "nope".into() });
    assert!(r.error.unwrap().contains("no map named `nope`"));
    let r = plane.request(Request::EbpfMapUpdate {
        map: "xdp_count/proto_count".into(),
        key: "99".into(),
        value: "1".into(),
        flags: 0,
    });
    assert!(!r.ok);
    let stats = plane.request(Request::Stats {}).result.unwrap();
    assert_eq!(stats["ebpf"]["programs_loaded"], 1);
    let slots = plane.request(Request::Slots {}).result.unwrap();
    assert!(slots.to_string().contains("ebpf xdp_count (xdp_count.o"), "{slots}");
    let handles = plane.mem_handles();
    plane.stop();
    assert_eq!(MemReport::merge(&handles).lost(), 0);
}

/// bpftool's habits: the running programs with their place, size, maps and packet counts; their
/// code as loaded and as compiled; one map entry looked up; a removed program is gone.
#[test]
fn running_programs_are_listed_and_dumped_as_bpftool_does() {
    let plane = counting_plane();
    let progs = plane.request(Request::EbpfProgs {}).into_result().unwrap();
    let p = &progs[0];
    assert_eq!(
        (&p["target"], &p["engine"], &p["workers"]),
        (&"pre".into(), &"jit".into(), &2.into())
    );
    assert_eq!(p["maps"], serde_json::json!(["xdp_count/proto_count"]));
    assert!(p["origin"].as_str().unwrap().contains("xdp_count.o"), "{p}");
    let (insns, jited) = (p["insns"].as_u64().unwrap(), p["jited_bytes"].as_u64().unwrap());
    assert!(insns > 5 && jited > insns, "{p}");
    let runs = p["runs"].as_u64().unwrap();
    assert!(runs > 1000 && p["actions"]["pass"].as_u64() == Some(runs), "{p}");
    let dump = |form: &str, target: &str| {
        plane.request(Request::EbpfProgDump { target: target.into(), form: form.into() })
    };
    let xlated = dump("xlated", "pre").into_result().unwrap();
    let text = xlated["xlated"].as_str().unwrap();
    // One line per instruction (labels apart); a 64-bit load (lddw) is two slots and one line.
    let lines = text.lines().filter(|l| !l.ends_with(':')).count() as u64;
    assert_eq!(lines + text.matches("lddw").count() as u64, insns, "{text}");
    assert!(text.contains("exit"), "{text}");
    let jited = dump("jited", "pre").into_result().unwrap();
    // `offset: 16 bytes` lines.
    let lines = jited["jited"].as_str().unwrap().lines();
    let bytes: usize = lines.map(|l| l.split_once(": ").unwrap().1.split(' ').count()).sum();
    assert_eq!(bytes as u64, jited_bytes_of(&jited));
    let e = dump("xlated", "mid").into_result().unwrap_err().to_string();
    assert!(e.contains("no eBPF program at mid; eBPF programs run at: pre"), "{e}");
    let e = dump("source", "pre").into_result().unwrap_err().to_string();
    assert!(e.contains("xlated") && e.contains("jited"), "{e}");
    // One entry: key 5 (UDP) of a per-CPU array, one value per worker.
    let map = "xdp_count/proto_count".to_string();
    let hit = plane.request(Request::EbpfMapLookup { map: map.clone(), key: "5".into() });
    let hit = hit.into_result().unwrap();
    assert_eq!(hit["values"].as_array().map(Vec::len), Some(2), "{hit}");
    let absent = plane.request(Request::EbpfMapLookup { map: map.clone(), key: "9999".into() });
    assert_eq!(absent.into_result().unwrap()["value"], serde_json::Value::Null);
    let bad = plane.request(Request::EbpfMapLookup { map, key: "0x0102030405".into() });
    let e = bad.into_result().unwrap_err().to_string();
    assert!(e.contains("key") && e.contains('4') && e.contains('5'), "5 bytes for 4: {e}");
    // Removed: no longer listed.
    assert!(plane.request(Request::Remove { target: "pre".into(), worker: None }).ok);
    let progs = plane.request(Request::EbpfProgs {}).into_result().unwrap();
    assert_eq!(progs, serde_json::json!([]));
    plane.stop();
}

fn jited_bytes_of(v: &serde_json::Value) -> u64 {
    v["jited_bytes"].as_u64().unwrap()
}

#[test]
fn predefined_programs_switch_by_id() {
    std::fs::write(std::env::temp_dir().join("hp-mark3.s"), mark_asm(3)).unwrap();
    std::fs::write(std::env::temp_dir().join("hp-mark4.s"), mark_asm(4)).unwrap();
    let tmp = std::env::temp_dir();
    let plane = plane(&format!(
        r#"
[[predefined]]
id = 3
stage = {{ stage = "ebpf", file = "{0}/hp-mark3.s" }}
[[predefined]]
id = 4
stage = {{ stage = "ebpf", file = "{0}/hp-mark4.s", engine = "interp" }}
[pipeline]
mid = {{ stage = "predefined", id = 3 }}
"#,
        tmp.display()
    ));
    wait_slot(&plane, "mid", "hp-mark3.s");
    let r = plane.request(Request::Switch { target: "mid".into(), worker: None, id: 4 });
    assert!(r.ok, "{:?}", r.error);
    wait_slot(&plane, "mid", "hp-mark4.s");
    // Switch back by an authenticated update (select-predefined), acknowledged.
    let ack = api_update(
        &plane,
        Kind::SelectPredefined,
        100,
        Target::Position(Position::Mid),
        &3u32.to_be_bytes(),
    );
    assert_eq!(ack["status"], "applied");
    wait_slot(&plane, "mid", "hp-mark3.s");
    let handles = plane.mem_handles();
    plane.stop();
    let r = MemReport::merge(&handles);
    assert_eq!(r.lost(), 0);
    let runs = mark_runs(&r);
    assert!(in_order(&runs, &[3, 4, 3]) && runs.last() == Some(&3), "marks {runs:?}");
}

#[test]
fn extensible_updates_in_band_and_by_api_at_every_position() {
    let plane = plane(
        r#"
[pipeline]
pre = { stage = "call", extern = "ext" }
[pipeline.externs]
ext = { stage = "none" }
"#,
    );
    let p0 = plane.mem("p0").unwrap().clone();
    let sender = UpdateSender::new(1, Some(key()), 47474);
    std::thread::sleep(Duration::from_millis(50));

    // 1. Bytecode, in-band, into the extern slot the `pre` call stage runs.
    for f in sender
        .frames(&header(Kind::EbpfBytecode, 10, Target::Extern("ext".into())), &mark_bytecode(5))
        .unwrap()
    {
        p0.inject(f).unwrap();
    }
    wait_slot(&plane, "extern:ext", "bytecode update seq 10");
    // 2. A program the verifier refuses (packet read without a bounds check), in-band: the
    //    extern keeps running mark 5.
    let bad = Code::Asm("ldxw %r2, [%r1+0]\nldxb %r0, [%r2+58]\nexit\n".into()).payload().unwrap();
    for f in
        sender.frames(&header(Kind::EbpfBytecode, 11, Target::Extern("ext".into())), &bad).unwrap()
    {
        p0.inject(f).unwrap();
    }
    // Sequence numbers are per key: let the in-band refusal land before the API updates
    // with higher numbers (otherwise it would be refused as a replay).
    let u = plane.observability().updates.clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    while u.refused(Reason::Rejected) < 1 {
        assert!(Instant::now() < deadline, "refusals: {:?}", u.refused_by_reason());
        std::thread::sleep(Duration::from_millis(2));
    }
    // 3. An ELF object through the API at `mid` (the protocol counter passes everything).
    let elf = std::fs::read(format!("{EXAMPLES}/xdp_count.o")).unwrap();
    let ack = api_update(&plane, Kind::EbpfElf, 12, Target::Position(Position::Mid), &elf);
    assert_eq!(ack["status"], "applied", "{ack}");
    // 4. C source through the API at `post`: compiled here by clang.
    let c = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
SEC("xdp") int mark6(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    if (data + 60 > end) return XDP_PASS;
    *(__u16 *)(data + 58) = __builtin_bswap16(6);
    return XDP_PASS;
}
char _license[] SEC("license") = "GPL";
"#;
    let ack = api_update(&plane, Kind::EbpfC, 13, Target::Position(Position::Post), c.as_bytes());
    assert_eq!(ack["status"], "applied", "{ack}");
    wait_slot(&plane, "post", "c update seq 13");
    // 5. Broken C: refused with clang's message.
    let ack = api_update(&plane, Kind::EbpfC, 14, Target::Position(Position::Post), b"int x(");
    assert_eq!(
        (ack["status"].as_str(), ack["reason"].as_str()),
        (Some("refused"), Some("rejected"))
    );
    assert!(ack["message"].as_str().unwrap().contains("clang failed"), "{ack}");
    // 6. Remove post: the extern's mark shows again.
    let ack = api_update(&plane, Kind::Remove, 15, Target::Position(Position::Post), b"");
    assert_eq!(ack["status"], "applied");
    wait_slot(&plane, "post", "none");

    assert_eq!(u.refused(Reason::Rejected), 2, "{:?}", u.refused_by_reason());
    let slots = plane.request(Request::Slots {}).result.unwrap().to_string();
    assert!(slots.contains("ebpf bytecode (bytecode update seq 10"), "{slots}");
    let handles = plane.mem_handles();
    plane.stop();
    let r = MemReport::merge(&handles);
    assert_eq!(r.lost(), 0, "traffic was disturbed");
    let runs = mark_runs(&r);
    assert!(in_order(&runs, &[5, 6, 5]) && runs.last() == Some(&5), "marks {runs:?}");
    let acks: Vec<_> =
        r.captured.iter().filter_map(|f| ack_of(f, Some(&key()))).map(|a| a.unwrap()).collect();
    let by_seq = |s: u64| {
        acks.iter().find(|a| a.seq == s).unwrap_or_else(|| panic!("no ack for {s}: {acks:?}"))
    };
    assert_eq!(by_seq(10).status, AckStatus::Applied);
    let refused = by_seq(11);
    assert_eq!((refused.status, refused.reason), (AckStatus::Refused, Some(Reason::Rejected)));
    assert!(
        refused.message.contains("instruction 1") && refused.message.contains("data_end"),
        "{}",
        refused.message
    );
}

/// `hotplane ebpf chain UP DOWN` as documented: text and JSON, the specialised bytecode
/// written with `-o` (and it verifies and runs), `--assume` with `ebpf shape --json` output,
/// and a refusal that exits non-zero.
#[test]
fn ebpf_chain_command_specialises_checks_and_writes_the_program() {
    use std::process::Command;
    let bin = env!("CARGO_BIN_EXE_hotplane");
    let ex = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ebpf/chain");
    let dir = std::env::temp_dir().join(format!("hotplane-chain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_bin = dir.join("lb6.spec.bin");
    let run = |args: &[&std::ffi::OsStr]| Command::new(bin).args(args).output().unwrap();
    let o = run(&[
        "ebpf".as_ref(),
        "chain".as_ref(),
        ex.join("fw6ah.o").as_os_str(),
        ex.join("lb6.o").as_os_str(),
        "--check".as_ref(),
        "300".as_ref(),
        "-o".as_ref(),
        out_bin.as_os_str(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.starts_with("fw6ah -> lb6: 530 -> "), "{text}");
    assert!(text.contains("guard: len in [98, 1542]; 12=86 13=dd; 20=33; 54=06 55=04"), "{text}");
    assert!(text.contains("no difference from the original"), "{text}");
    // The written program is plain bytecode that the verifier accepts only with the guard's
    // length as a precondition.
    let v = run(&["ebpf".as_ref(), "verify".as_ref(), out_bin.as_os_str()]);
    assert!(!v.status.success(), "verified without the length precondition");
    // The guarantee as JSON, then assumed by another invocation (as across nodes).
    let shape = run(&[
        "ebpf".as_ref(),
        "shape".as_ref(),
        ex.join("fw6ah.o").as_os_str(),
        "--json".as_ref(),
    ]);
    assert!(shape.status.success());
    let shape_file = dir.join("fw6ah.shape.json");
    std::fs::write(&shape_file, &shape.stdout).unwrap();
    let o = run(&[
        "ebpf".as_ref(),
        "chain".as_ref(),
        ex.join("lb6.o").as_os_str(),
        "--assume".as_ref(),
        shape_file.as_os_str(),
        "--check".as_ref(),
        "200".as_ref(),
        "--json".as_ref(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line = String::from_utf8_lossy(&o.stdout);
    let j: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(j["slots_before"], 530);
    assert!(j["slots_after"].as_u64().unwrap() < 265, "{j}");
    assert_eq!(j["check"]["mismatches"], 0);
    assert_eq!(j["accepted"], true);
    // A shape that contradicts itself cannot be assumed: a clear error, exit 1.
    std::fs::write(&shape_file, r#"{"len":[10,5]}"#).unwrap();
    let o = run(&[
        "ebpf".as_ref(),
        "chain".as_ref(),
        ex.join("lb6.o").as_os_str(),
        "--assume".as_ref(),
        shape_file.as_os_str(),
    ]);
    assert!(!o.status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// An upstream that passes only IPv4/UDP frames of at least 42 bytes.
const UDP_ONLY: &str =
    "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 1\nmov %r4, %r2\nadd %r4, 42\n\
    jgt %r4, %r3, out\nldxh %r5, [%r2+12]\njne %r5, 8, out\nldxb %r5, [%r2+23]\n\
    jne %r5, 17, out\nmov %r0, 2\nout:\nexit\n";

fn chain_status(plane: &hotplane::Engine) -> serde_json::Value {
    let r = plane.request(Request::ChainStatus {});
    assert!(r.ok, "{:?}", r.error);
    r.result.unwrap()
}

/// Wait until `mid`'s chain status satisfies `ok`.
fn wait_chain(
    plane: &hotplane::Engine,
    ok: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = chain_status(plane);
        let mid = status["positions"].as_array().unwrap().iter().find(|p| p["position"] == "mid");
        if let Some(mid) = mid.filter(|m| ok(m)) {
            return mid.clone();
        }
        assert!(Instant::now() < deadline, "mid never got there: {status}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Chain specialisation in a running plane: `mid` (xdp_count) is specialised to what `pre`
/// passes while packets flow, its guard admits them, the counts it keeps are those of the
/// original; replacing `pre` re-specialises `mid`, and nothing is lost.
#[test]
fn mid_is_specialised_to_pre_while_packets_flow_and_follows_a_new_pre() {
    let dir = std::env::temp_dir().join(format!("hp-chain-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let up = dir.join("udp_only.s");
    std::fs::write(&up, UDP_ONLY).unwrap();
    let plane = plane(&format!(
        r#"
[pipeline]
pre = {{ stage = "ebpf", file = "{}" }}
mid = {{ stage = "ebpf", file = "xdp_count.o" }}
"#,
        up.display()
    ));
    let mid = wait_chain(&plane, |m| m["specialised"] == true);
    assert_eq!(mid["upstream"], "asm");
    let (before, after) =
        (mid["slots_before"].as_u64().unwrap(), mid["slots_after"].as_u64().unwrap());
    assert!(after < before, "{mid}");
    assert_eq!(mid["guard"], "len in [42, 1518]; 12=08 13=00; 23=11", "{mid}");
    // Packets flow through the specialised program.
    let mid = wait_chain(&plane, |m| m["guard_hits"].as_u64().unwrap() > 1000);
    assert_eq!(mid["guard_misses"], 0, "the generator sends IPv4/UDP only: {mid}");
    let slots = plane.request(Request::Slots {}).result.unwrap().to_string();
    assert!(slots.contains("chain: specialised to asm"), "{slots}");
    // A pass-everything `pre`: nothing is known any more, the variant goes (or is made for
    // any frame); the guard never sends a packet the old facts do not cover to a program that
    // relied on them.
    let pass_all = Code::Asm("mov %r0, 2\nexit\n".into()).payload().unwrap();
    let ack = api_update(&plane, Kind::EbpfBytecode, 1, Target::Position(Position::Pre), &pass_all);
    assert_eq!(ack["status"], "applied", "{ack}");
    let mid = wait_chain(&plane, |m| m["upstream"] == "bytecode");
    let guard = mid["guard"].as_str().unwrap_or("");
    assert!(!guard.contains("23=11"), "a variant still assumes UDP: {mid}");
    std::thread::sleep(Duration::from_millis(200));
    let metrics = plane.request(Request::Metrics {}).result.unwrap().to_string();
    assert!(metrics.contains("hotplane_chain_guard_hits_total{position=\\\"mid\\\"}"), "{metrics}");
    // The specialised program counted what the original would have: every packet is UDP.
    // The map is read twice while packets flow. Each packet bumps IPv4 before UDP, and a dump
    // reads a worker's IPv4 count before its UDP count, so the first UDP count lies between
    // the first IPv4 count less the packets in flight (one per worker) and the second one.
    let dump = || -> serde_json::Value {
        plane.request(Request::EbpfMapDump { map: "xdp_count/proto_count".into() }).result.unwrap()
    };
    let count = |dump: &serde_json::Value, k: usize| -> u64 {
        dump["entries"][k]["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                u64::from_le_bytes(
                    hex::decode(v.as_str().unwrap()).unwrap()[..8].try_into().unwrap(),
                )
            })
            .sum()
    };
    let (first, second) = (dump(), dump());
    let handles = plane.mem_handles();
    plane.stop();
    let report = MemReport::merge(&handles);
    assert_eq!(report.lost(), 0);
    let (ipv4, udp, ipv4_later) = (count(&first, 2), count(&first, 5), count(&second, 2));
    assert!(
        udp > 1000 && udp + 2 >= ipv4 && udp <= ipv4_later,
        "ipv4 {ipv4} udp {udp} later {ipv4_later}"
    );
    for d in [&first, &second] {
        assert_eq!((0..11).filter(|k| ![2, 5].contains(k)).map(|k| count(d, k)).sum::<u64>(), 0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `[chain] assume`: what another node guarantees about the packets reaching `pre`, taken as
/// the shape `pre`'s program is specialised to (guarded: the guard checks it per packet).
#[test]
fn pre_is_specialised_to_an_assumed_shape() {
    let dir = std::env::temp_dir().join(format!("hp-chain-assume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shape = dir.join("udp.shape.json");
    std::fs::write(&shape, r#"{"len":[42,1518],"bytes":{"12":"08","13":"00","23":"11"}}"#).unwrap();
    let plane = plane(&format!(
        r#"
[chain]
assume = "{}"
[pipeline]
pre = {{ stage = "ebpf", file = "xdp_count.o" }}
"#,
        shape.display()
    ));
    let deadline = Instant::now() + Duration::from_secs(20);
    let pre = loop {
        let status = chain_status(&plane);
        let pre = status["positions"][0].clone();
        if pre["guard_hits"].as_u64().unwrap_or(0) > 500 {
            break pre;
        }
        assert!(Instant::now() < deadline, "pre never ran specialised: {status}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(
        (pre["position"].as_str(), pre["upstream"].as_str()),
        (Some("pre"), Some("[chain] assume"))
    );
    assert!(pre["slots_after"].as_u64() < pre["slots_before"].as_u64(), "{pre}");
    let handles = plane.mem_handles();
    plane.stop();
    assert_eq!(MemReport::merge(&handles).lost(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Map-content specialisation in a running plane: lb6 behind fw6ah has its (empty, small)
/// service map folded in; a control-plane write breaks the variant's pin, and the chain
/// manager specialises lb6 again to the new contents.
#[test]
fn a_map_write_respecialises_to_the_new_contents() {
    let plane = plane(
        r#"
[pipeline]
pre = { stage = "ebpf", file = "chain/fw6ah.o" }
mid = { stage = "ebpf", file = "chain/lb6.o" }
"#,
    );
    let mid = wait_chain(&plane, |m| m["specialised"] == true);
    assert_eq!(mid["inlined_lookups"], 1, "{mid}");
    let first = mid["guard"].as_str().unwrap().to_string();
    assert!(first.contains("map lb6/services unwritten since write 0"), "{first}");
    // A service for 2001:db8::1 port 80 over TCP: 4 backends from 0.
    let key = format!("0x20010db8{}01{}", "00".repeat(11), "00500606");
    let r = plane.request(Request::EbpfMapUpdate {
        map: "lb6/services".into(),
        key,
        value: "0x0400000000000000".into(),
        flags: 0,
    });
    assert!(r.ok, "{:?}", r.error);
    let mid = wait_chain(&plane, |m| {
        m["specialised"] == true && m["guard"].as_str().is_some_and(|g| g.contains("since write 1"))
    });
    assert_eq!(mid["inlined_lookups"], 1, "{mid}");
    // (The generator's IPv4/UDP frames are all dropped by fw6ah: nothing to count here.)
    assert_eq!(plane.stop().panics, 0);
}

/// At the terminal, as bpftool users expect: `ebpf map list` and `ebpf prog list` are tables,
/// `--json` gives the data plane's answer.
#[test]
fn ebpf_map_and_prog_lists_are_tables_at_the_terminal() {
    let dir = common::TmpDir::new("ebpf", "lists");
    let sock = dir.join("s.sock");
    let cfg = dir.join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[port]]\nname = \"p0\"\nkind = \"mem\"\ngen = {{ flows = 2, rate_pps = 1000 }}\n\
             [control]\nsocket = \"{}\"\n\
             [pipeline]\npre = {{ stage = \"ebpf\", file = \"{EXAMPLES}/xdp_count.o\" }}\n",
            sock.display()
        ),
    )
    .unwrap();
    let mut child = common::Running(common::run_until_socket(&cfg, &sock));
    let hotplane = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_hotplane"))
            .arg("--socket")
            .arg(&sock)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let maps = hotplane(&["ebpf", "map", "list"]);
    let line = maps.lines().find(|l| l.starts_with("xdp_count/proto_count ")).unwrap_or_default();
    assert_eq!(line.split_whitespace().nth(1), Some("percpu_array"), "{maps}");
    let json: serde_json::Value =
        serde_json::from_str(&hotplane(&["ebpf", "map", "list", "--json"])).unwrap();
    assert_eq!(json[0]["name"], "xdp_count/proto_count");
    let progs = hotplane(&["ebpf", "prog", "list"]);
    assert!(progs.lines().any(|l| l.starts_with("pre ") && l.contains("xdp_count")), "{progs}");

    // Run time per packet, as bpftool shows it with kernel.bpf_stats_enabled: off by default,
    // counted once switched on, kept (not counted further) once off.
    let show = |what: &str| -> serde_json::Value {
        serde_json::from_str(&hotplane(&["ebpf", "prog", "show", what, "--json"])).unwrap()
    };
    assert!(hotplane(&["ebpf", "prog", "stats"]).contains("timing eBPF runs: off"));
    assert_eq!(show("pre")["run_cnt"], 0);
    assert!(show("pre")["ns_per_packet"].is_null());
    assert!(hotplane(&["ebpf", "prog", "stats", "on"]).contains("on"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while show("pre")["run_cnt"].as_u64() < Some(10) {
        assert!(std::time::Instant::now() < deadline, "no run timed: {}", show("pre"));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let timed = show("pre");
    assert!(timed["run_time_ns"].as_u64() > Some(0) && timed["ns_per_packet"].as_f64() > Some(0.0));
    assert!(hotplane(&["ebpf", "prog", "show", "pre"]).contains("ns per packet"));
    hotplane(&["ebpf", "prog", "stats", "off"]);
    let kept = show("pre")["run_cnt"].clone();
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(show("pre")["run_cnt"], kept, "not counted while off");
    hotplane(&["push", "shutdown"]);
    assert!(child.0.wait().unwrap().success());
}
