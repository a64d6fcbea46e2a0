//! The basic tutorial's table work done from the terminal alone, as a simple_switch_CLI user
//! would: `hotplane table add/dump/del/default` on P4 names, `hotplane cli` with a commands
//! file, and a refused line that names its line and fails the command.
#![cfg(feature = "p4")]

mod common;

use std::process::Command;

/// `hotplane SUBCOMMAND --socket SOCK ARGS...`: success, stdout, stderr.
fn hotplane(sock: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_hotplane"))
        .arg(args[0])
        .arg("--socket")
        .arg(sock)
        .args(&args[1..])
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
    (o.status.success(), text(&o.stdout), text(&o.stderr))
}

/// `hotplane run` with the tutorials' basic.p4 on mem ports p0 (`p0_extra`: its generator)
/// and p1, with `spec_extra` in its stage spec; killed when the test ends.
fn basic_switch(
    dir: &std::path::Path,
    p0_extra: &str,
    spec_extra: &str,
) -> (common::Running, std::path::PathBuf) {
    let program = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/p4/basic.p4");
    let sock = dir.join("s.sock");
    let cfg = dir.join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[port]]\nname = \"p0\"\nkind = \"mem\"\n{p0_extra}\
             [[port]]\nname = \"p1\"\nkind = \"mem\"\n\
             [control]\nsocket = \"{}\"\n\
             [pipeline]\npre = {{ stage = \"p4\", program = \"{program}\"{spec_extra} }}\n",
            sock.display()
        ),
    )
    .unwrap();
    (common::Running(common::run_until_socket(&cfg, &sock)), sock)
}

#[test]
fn the_basic_tutorials_table_work_from_hotplane_table_and_cli() {
    let dir = common::TmpDir::new("p4-cli", "basic");
    let (mut child, sock) = basic_switch(&dir, "", "");

    // s1's entries as simple_switch_CLI lines (the tutorial's s1-runtime.json), one refused.
    let commands = dir.join("s1-commands.txt");
    std::fs::write(
        &commands,
        "table_set_default ipv4_lpm drop\n\
         # hosts\n\
         table_add ipv4_lpm ipv4_forward 10.0.1.1/32 => 08:00:00:00:01:11 1\n\
         table_add ipv4_lpm ipv4_forward 10.0.2.2/32 => 08:00:00:00:02:22 2\n\
         table_add ipv4_lpm ipv4_forward 10.0.3.3/32 => 08:00:00:00:03:00 3 4 5\n\
         table_add ipv4_lpm ipv4_forward 10.0.3.3/32 => 08:00:00:00:03:00 3\n",
    )
    .unwrap();
    let (ok, out, err) = hotplane(&sock, &["cli", "--file", commands.to_str().unwrap()]);
    assert!(!ok, "a refused line fails the run: {out}{err}");
    assert!(err.contains("s1-commands.txt:5: ") && err.contains("takes 2 parameter(s)"), "{err}");
    assert_eq!(out.matches("Entry has been added with handle").count(), 3, "{out}");

    // hotplane table on the P4 names: list, dump with handles, add, delete by handle and key.
    let (ok, out, err) = hotplane(&sock, &["table", "list"]);
    assert!(
        ok && out.contains("MyIngress.ipv4_lpm") && out.contains("hdr.ipv4.dstAddr:lpm"),
        "{out}{err}"
    );
    let (ok, out, _) = hotplane(
        &sock,
        &[
            "table",
            "add",
            "ipv4_lpm",
            "ipv4_forward",
            "10.0.4.0/24",
            "=>",
            "08:00:00:00:04:44",
            "4",
        ],
    );
    assert!(ok, "{out}");
    let handle = out.trim().rsplit(' ').next().unwrap().to_string();
    let (ok, out, _) = hotplane(&sock, &["table", "dump", "MyIngress.ipv4_lpm"]);
    assert!(ok && out.contains("MyIngress.ipv4_lpm: 4 entries"), "{out}");
    assert!(
        out.contains("10.0.4.0/24") && out.contains("dstAddr=08:00:00:00:04:44, port=4"),
        "{out}"
    );
    assert!(out.contains("Action entry: MyIngress.drop"), "the default: {out}");
    let (ok, out, err) = hotplane(&sock, &["table", "del", "ipv4_lpm", &handle]);
    assert!(ok && out.contains("deleted"), "{out}{err}");
    let (ok, _, _) = hotplane(&sock, &["table", "del", "ipv4_lpm", "--key", "10.0.1.1/32"]);
    assert!(ok);
    let (_, json, _) = hotplane(&sock, &["cli", "--json", "table_num_entries", "ipv4_lpm"]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["entries"], 2, "{json}");
    // A P4 table in hotplane's own order is refused with the order it wants.
    // Without `=>` (a shell would take its `>`): the key fields' worth of words are matches.
    let (ok, out, err) = hotplane(
        &sock,
        &["table", "add", "ipv4_lpm", "ipv4_forward", "10.0.5.0/24", "08:00:00:00:05:55", "5"],
    );
    assert!(ok && out.contains("Entry has been added"), "{out}{err}");
    // hotplane's order for writable tables is not simple_switch_CLI's: the action is refused.
    let (ok, _, err) = hotplane(&sock, &["table", "add", "ipv4_lpm", "10.0.9.0/24", "drop"]);
    assert!(!ok && err.contains("10.0.9.0/24"), "{err}");
    let (ok, _, err) = hotplane(&sock, &["table", "del", "ipv4_lpm", "12345"]);
    assert!(!ok && err.contains("no entry with handle 12345"), "{err}");

    let (ok, _, _) = hotplane(&sock, &["push", "shutdown"]);
    assert!(ok);
    assert!(child.0.wait().unwrap().success());
}

/// `hotplane trace` at the terminal, on traffic a generator keeps sending: the dropped packet
/// is explained; a selector that matches nothing says so when it gives up.
#[test]
fn hotplane_trace_explains_a_drop_at_the_terminal() {
    let dir = common::TmpDir::new("p4-cli", "trace");
    let gen = "gen = { flows = 1, dst_ip = \"10.0.9.9\", rate_pps = 200, duration_ms = 60000, stamp = false }\n";
    let entries = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/p4/basic.json");
    let (mut child, sock) = basic_switch(&dir, gen, &format!(", entries = \"{entries}\""));
    let (ok, out, err) = hotplane(&sock, &["trace", "--match", "dst=10.0.9.9", "--count", "2"]);
    assert!(ok, "{err}");
    assert_eq!(out.matches("=> dropped").count(), 2, "{out}");
    assert!(out.contains("in p0") && out.contains("-> 10.0.9.9:"), "{out}");
    assert!(
        out.contains("table MyIngress.ipv4_lpm: miss (default action) -> MyIngress.drop"),
        "{out}"
    );
    let (ok, out, err) =
        hotplane(&sock, &["trace", "--match", "dst=192.0.2.1", "--count", "1", "--timeout", "0.3"]);
    assert!(ok && out.is_empty(), "{out}");
    assert!(err.contains("0 of 1 packet(s)") && err.contains("--match"), "{err}");
    let (ok, _, _) = hotplane(&sock, &["push", "shutdown"]);
    assert!(ok);
    assert!(child.0.wait().unwrap().success());
}
