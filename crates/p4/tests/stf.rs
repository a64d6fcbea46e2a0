//! Every `tests/p4/NAME.stf` runs against `tests/p4/NAME.p4` (or the program its first
//! `# program: FILE` line names) and must pass, on native code and on closures alike; a
//! corrupted expectation must fail.

use hotplane_core::Qsbr;
use hotplane_p4::exec::{Engine, Objects, Pipeline};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/p4")
}

fn program_for(stf: &Path, text: &str) -> PathBuf {
    let named = text.lines().find_map(|l| l.strip_prefix("# program:")).map(str::trim);
    match named {
        Some(p) => stf.with_file_name(p),
        None => stf.with_extension("p4"),
    }
}

fn qsbr() -> &'static Qsbr {
    static Q: std::sync::OnceLock<Qsbr> = std::sync::OnceLock::new();
    Q.get_or_init(Qsbr::new)
}

fn pipeline(p4: &Path) -> Arc<Pipeline> {
    pipeline_on(p4, Engine::Native)
}

fn pipeline_on(p4: &Path, engine: Engine) -> Arc<Pipeline> {
    let ir = hotplane_p4::compile_file(p4, &[], &[]).unwrap_or_else(|e| panic!("{e}"));
    let objects = Objects::new(&ir, qsbr()).unwrap_or_else(|e| panic!("{e}"));
    let p = Pipeline::with_engine(ir, objects, engine)
        .unwrap_or_else(|e| panic!("{}: {e}", p4.display()));
    // A code generator error would silently fall back to closures: fail instead.
    assert_eq!(p.native_error(), None, "{}", p4.display());
    assert_eq!(p.engine(), engine, "{}", p4.display());
    Arc::new(p)
}

#[test]
fn every_stf_test_passes() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
        .expect("tests/p4")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "stf"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let mut failed = Vec::new();
    // Each file on both engines, through the owned path (`process`) and in place in a pool
    // buffer as the data plane runs packets (`process_batch`).
    let runs = files.iter().flat_map(|f| {
        [Engine::Native, Engine::Closures]
            .into_iter()
            .flat_map(move |e| [(f, e, false), (f, e, true)])
    });
    for (stf, engine, in_place) in runs {
        let text = std::fs::read_to_string(stf).expect("readable");
        let p = pipeline_on(&program_for(stf, &text), engine);
        let how = if in_place { "in place" } else { "owned" };
        match hotplane_p4::stf::run_with(p, qsbr(), &stf.display().to_string(), &text, in_place) {
            Ok(r) if r.passed() => {
                assert!(r.expects + r.checks > 0, "{} checks nothing", stf.display());
                println!(
                    "PASS {} on {engine:?}, {how} ({} packets, {} expects, {} checks)",
                    stf.display(),
                    r.packets_sent,
                    r.expects,
                    r.checks
                );
            }
            Ok(r) => failed.push(format!(
                "{} on {engine:?}, {how}:\n{}",
                stf.display(),
                r.failures.join("\n")
            )),
            Err(e) => failed.push(e.to_string()),
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn a_wrong_expectation_fails_with_a_diff() {
    let stf = dir().join("basic.stf");
    let text = std::fs::read_to_string(&stf).expect("readable");
    // Expect the TTL unchanged (0x40) where the program decrements it (0x3F).
    let bad = text.replacen(
        "0000000001010000000000AA080045000021000100003F11",
        "0000000001010000000000AA080045000021000100004011",
        1,
    );
    assert_ne!(bad, text, "the test's packet is in basic.stf");
    let r = hotplane_p4::stf::run(pipeline(&dir().join("basic.p4")), qsbr(), "bad.stf", &bad)
        .expect("runs");
    assert_eq!(r.failures.len(), 1, "{:?}", r.failures);
    assert!(r.failures[0].contains("differs at byte 22"), "{}", r.failures[0]);
    assert!(r.failures[0].contains("received"), "{}", r.failures[0]);
}

#[test]
fn stf_file_mistakes_are_errors_with_a_line() {
    let p = pipeline(&dir().join("basic.p4"));
    for (text, want) in [
        ("add nosuch x:1 a()\n", "no table `nosuch`"),
        ("add ipv4_lpm hdr.ipv4.srcAddr:1 drop()\n", "no key field `hdr.ipv4.srcAddr`"),
        ("add ipv4_lpm dstAddr:0x1ffffffff/32 drop()\n", "does not fit in bit<32>"),
        ("add ipv4_lpm dstAddr:10.0.0.0/33 drop()\n", "prefix /33 is longer"),
        ("add ipv4_lpm dstAddr:10.0.0.0/8 fly()\n", "has no action `fly`"),
        (
            "add ipv4_lpm dstAddr:10.0.0.0/8 ipv4_forward(port:1)\n",
            "parameter `dstAddr` is missing",
        ),
        (
            "add ipv4_lpm dstAddr:10.0.0.0/8 ipv4_forward(dstAddr:1, port:512)\n",
            "does not fit in bit<9>",
        ),
        ("packet 0 0A0G\n", "not a hex byte"),
        ("\n\nfrobnicate 1\n", "unknown STF command"),
    ] {
        let e = hotplane_p4::stf::run(Arc::clone(&p), qsbr(), "t.stf", text).expect_err(text);
        assert!(e.to_string().contains(want), "{text}: {e}");
    }
    let e =
        hotplane_p4::stf::run(Arc::clone(&p), qsbr(), "t.stf", "\n\nfrobnicate 1\n").unwrap_err();
    assert_eq!(e.line, 3);
}

/// An LPM table's direct counters count the same on both engines (native code adds to the
/// entry's counter words itself), for prefixes at every level of the table.
#[test]
fn lpm_direct_counters_count_on_both_engines() {
    let stf = dir().join("tables.stf");
    let text = std::fs::read_to_string(&stf).expect("readable");
    for engine in [Engine::Native, Engine::Closures] {
        let p = pipeline_on(&dir().join("tables.p4"), engine);
        let r = hotplane_p4::stf::run(Arc::clone(&p), qsbr(), "tables.stf", &text).expect("runs");
        assert!(r.passed(), "{engine:?}: {:?}", r.failures);
        let routes = p.objects.tables.iter().find(|t| t.name.ends_with("routes")).expect("routes");
        let mut counts: Vec<(String, u64, u64)> = routes
            .entries()
            .into_iter()
            .map(|(e, s)| (format!("{:?}", e.keys[1]), s.packets, s.bytes))
            .collect();
        counts.sort();
        // One 26-byte probe per prefix (10.1.2.3/32, /25, /24, /16, /8 in turn).
        assert_eq!(counts.len(), 5, "{engine:?}: {counts:?}");
        for (key, packets, bytes) in &counts {
            assert_eq!((*packets, *bytes), (1, 26), "{engine:?}: {key}");
        }
    }
}

/// As under p4c's BMv2 runner, which attaches only the ports its `packet` and `expect` lines
/// name, a packet sent to any other port is not compared (it is counted); on a named port an
/// unexpected packet fails.
#[test]
fn packets_to_ports_the_test_does_not_name_are_not_compared() {
    let text = std::fs::read_to_string(dir().join("basic.stf")).expect("readable");
    let add = text.lines().nth(2).expect("an add line");
    let packet = text.lines().nth(4).expect("a packet line");
    assert!(add.starts_with("add ") && packet.starts_with("packet 0 "));
    // The packet goes out on port 1, which nothing names.
    let quiet = format!("{add}\n{packet}\n");
    let basic = || pipeline(&dir().join("basic.p4"));
    let r = hotplane_p4::stf::run(basic(), qsbr(), "t.stf", &quiet).expect("runs");
    assert!(r.passed(), "{:?}", r.failures);
    assert_eq!((r.packets_received, r.unattached), (1, 1));
    // Named (by an expectation of another packet on port 1), it must be expected.
    let named = format!("{add}\n{packet}\nexpect 1 00\n{packet}\n");
    let r = hotplane_p4::stf::run(basic(), qsbr(), "t.stf", &named).expect("runs");
    assert_eq!(r.unattached, 0);
    assert_eq!(r.failures.len(), 1, "{:?}", r.failures);
    assert!(r.failures[0].contains("unexpected packet 1 on port 1"), "{}", r.failures[0]);
}

/// A lone last hex digit is a byte of its own, as p4c's BMv2 runner reads packet data.
#[test]
fn an_odd_last_hex_digit_is_a_byte() {
    let text = std::fs::read_to_string(dir().join("basic.stf")).expect("readable");
    let add = text.lines().nth(2).expect("an add line");
    let packet = text.lines().nth(4).expect("a packet line");
    let expect = text.lines().nth(5).expect("an expect line").trim_end_matches('$').trim();
    // The packet's last byte (6F) written as `6F 0`: one byte 00 more, which the IPv4 forward
    // carries as payload.
    let odd = format!("{add}\n{packet} 0\n{expect} 00 $\n");
    let r = hotplane_p4::stf::run(pipeline(&dir().join("basic.p4")), qsbr(), "t.stf", &odd)
        .expect("runs");
    assert!(r.passed(), "{:?}", r.failures);
}
