use super::*;
use crate::v1model::{Output, V1Switch};
use hotplane_core::Qsbr;

struct Switch {
    qsbr: Qsbr,
    p: Arc<Pipeline>,
    sw: V1Switch,
    state: CliState,
    replication: Replication,
}

impl Switch {
    fn new() -> Self {
        let text = include_str!("../../../../tests/p4/cli.p4");
        let ir = crate::compile_source("cli.p4", text, &[]).unwrap_or_else(|e| panic!("{e}"));
        let qsbr = Qsbr::new();
        let p = Arc::new(Pipeline::new(ir, &qsbr).expect("pipeline"));
        let sw = V1Switch::new(Arc::clone(&p));
        Switch { qsbr, p, sw, state: CliState::default(), replication: Replication::default() }
    }

    fn run(&mut self, line: &str) -> Result<Value, CliError> {
        let o = execute(&self.p, &mut self.state, &self.replication, line)?;
        if let Some(r) = o.replication {
            self.replication = r;
        }
        Ok(o.result)
    }

    fn ok(&mut self, line: &str) -> Value {
        self.run(line).unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    fn text(&mut self, line: &str) -> String {
        self.ok(line)["text"].as_str().unwrap_or_default().to_string()
    }

    /// An IPv4 packet from 10.0.0.9 to `dst` arriving on port 0: what leaves.
    fn send(&mut self, dst: [u8; 4], protocol: u8, ttl: u8) -> Vec<Output> {
        let mut frame = vec![0xff; 6];
        frame.extend([0x02, 0, 0, 0, 0, 1, 0x08, 0x00]);
        frame.extend([0x45, 0, 0, 20, 0, 0, 0, 0, ttl, protocol, 0, 0, 10, 0, 0, 9]);
        frame.extend(dst);
        let reader = self.qsbr.register("cli test");
        let guard = reader.guard();
        let mut out = Vec::new();
        self.sw.process(&frame, 0, &self.replication, &guard, 5_000, &mut out);
        out
    }
}

#[test]
fn the_tutorials_table_add_forwards_and_a_handle_deletes_it() {
    let mut s = Switch::new();
    assert!(s.send([10, 0, 1, 5], 17, 64).is_empty(), "the default drops");
    let added = s.ok("table_add routes forward 10.0.1.0/24 => 00:00:00:00:01:01 1");
    let h = added["handle"].as_u64().unwrap();
    assert_eq!(added["text"], format!("Entry has been added with handle {h}"));
    let out = s.send([10, 0, 1, 5], 17, 64);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].port, &out[0].data[..6]), (1, &[0, 0, 0, 0, 1, 1][..]));
    // Short and qualified names, a MAC and the action both ways round.
    let dump = s.text("table_dump MyIngress.routes");
    assert!(dump.contains("hdr.ipv4.dstAddr") && dump.contains("10.0.1.0/24"), "{dump}");
    assert!(dump.contains("dst=00:00:00:00:01:01, port=1"), "{dump}");
    assert!(dump.contains(&format!("Dumping entry {h:#x}")), "{dump}");
    assert_eq!(s.ok("table_num_entries routes")["entries"], 1);
    // Modify by handle keeps the key; the handle stays.
    s.ok(&format!("table_modify routes forward {h} => 00:00:00:00:02:02 2"));
    assert_eq!(s.send([10, 0, 1, 5], 17, 64)[0].port, 2);
    assert_eq!(s.ok(&format!("table_dump_entry routes {h}"))["handle"], h);
    s.ok(&format!("table_delete routes {h}"));
    assert!(s.send([10, 0, 1, 5], 17, 64).is_empty());
    let e = s.run(&format!("table_delete routes {h}")).unwrap_err();
    assert!(matches!(e, CliError::NoHandle { .. }), "{e}");
}

#[test]
fn the_smallest_priority_wins_as_in_bmv2() {
    let mut s = Switch::new();
    s.ok("table_add routes forward 10.0.0.0/8 => 0x000000000101 1");
    s.ok("table_add acl drop 6&&&0xff 0->255 => 20");
    assert!(s.send([10, 1, 1, 1], 6, 64).is_empty(), "TCP dropped");
    s.ok("table_add acl allow 0x06&&&0xff 64->64 => 10");
    assert_eq!(s.send([10, 1, 1, 1], 6, 64).len(), 1, "priority 10 beats 20");
    assert!(s.send([10, 1, 1, 1], 6, 63).is_empty(), "outside the range");
    let entry = s.ok("table_dump_entry_from_key acl 6&&&0xff 64->64 10");
    assert_eq!((entry["priority"].as_u64(), &entry["counters"]["packets"]), (Some(10), &json!(1)));
    // The acl's direct counter, read by entry handle.
    let h = entry["handle"].as_u64().unwrap();
    let read = s.ok(&format!("counter_read acl_hits {h}"));
    assert_eq!((&read["packets"], &read["bytes"]), (&json!(1), &json!(34)));
    // Deleted by key, and then the lower-priority drop is what is left.
    s.ok("table_delete_match acl 6&&&0xff 64->64 10");
    assert!(s.send([10, 1, 1, 1], 6, 64).is_empty());
    assert_eq!(s.ok("table_clear acl")["deleted"], 1);
    assert_eq!(s.send([10, 1, 1, 1], 6, 64).len(), 1);
}

#[test]
fn default_actions_are_set_and_reset() {
    let mut s = Switch::new();
    s.ok("table_set_default routes forward 00:00:00:00:00:07 7");
    assert_eq!(s.send([192, 0, 2, 1], 17, 64)[0].port, 7);
    assert!(s.text("table_dump routes").contains("Action entry: MyIngress.forward - dst="));
    s.ok("table_reset_default routes");
    assert!(s.send([192, 0, 2, 1], 17, 64).is_empty());
}

#[test]
fn counters_registers_and_meters_are_read_and_written() {
    let mut s = Switch::new();
    s.ok("table_add routes forward 10.0.3.0/24 => 00:00:00:00:03:03 3");
    s.send([10, 0, 3, 1], 17, 64);
    s.send([10, 0, 3, 2], 17, 64);
    let c = s.ok("counter_read per_port 3");
    assert_eq!((&c["packets"], &c["bytes"]), (&json!(2), &json!(68)));
    assert_eq!(c["text"], "MyIngress.per_port[3] = 2 packets, 68 bytes");
    s.ok("counter_write per_port 3 5 500");
    assert_eq!(s.ok("counter_read per_port 3")["packets"], 5);
    s.ok("counter_reset per_port");
    assert_eq!(s.ok("counter_read per_port 3")["packets"], 0);
    // The register holds the last source (10.0.0.9) per port.
    assert_eq!(s.ok("register_read last_src 3")["value"], 0x0a00_0009);
    s.ok("register_write last_src 2 0xffffffff");
    assert_eq!(s.ok("register_read last_src")["values"][2], 0xffff_ffffu64);
    let e = s.run("register_write last_src 2 0x1ffffffff").unwrap_err();
    assert!(e.to_string().contains("bit<32>"), "{e}");
    s.ok("register_reset last_src");
    assert_eq!(s.ok("register_read last_src 3")["value"], 0);
    // Meters: BMv2's rates per microsecond; the cells hold them per second.
    assert_eq!(s.ok("meter_get_rates limits 1")["configured"], false);
    s.ok("meter_set_rates limits 1 0.5:10 1:20");
    let r = s.ok("meter_get_rates limits 1");
    assert_eq!(
        (&r["cir"], &r["cbs"], &r["pir"], &r["pbs"]),
        (&json!(500_000), &json!(10), &json!(1_000_000), &json!(20))
    );
    assert!(s.run("meter_set_rates limits 1 2:10 1:20").is_err(), "PIR below CIR");
    s.ok("meter_array_set_rates limits 0.001:1 0.002:1");
    assert_eq!(s.ok("meter_get_rates limits 3")["cir"], 1000);
}

#[test]
fn multicast_nodes_and_mirroring_sessions_make_the_replication_engine() {
    let mut s = Switch::new();
    s.ok("mc_mgrp_create 1");
    let a = s.ok("mc_node_create 0 1 2")["handle"].as_u64().unwrap();
    let b = s.ok("mc_node_create 5 3")["handle"].as_u64().unwrap();
    s.ok(&format!("mc_node_associate 1 {a}"));
    s.ok(&format!("mc_node_associate 1 {b}"));
    assert_eq!(s.replication.groups[&1], vec![(0, 1), (0, 2), (5, 3)]);
    assert!(s.run(&format!("mc_node_associate 1 {a}")).is_err(), "twice");
    assert!(s.run(&format!("mc_node_associate 9 {a}")).is_err(), "no group 9");
    s.ok(&format!("mc_node_update {a} 4"));
    assert_eq!(s.replication.groups[&1], vec![(5, 3), (0, 4)]);
    s.ok(&format!("mc_node_dissociate 1 {b}"));
    assert_eq!(s.replication.groups[&1], vec![(0, 4)]);
    s.ok("mirroring_add 7 4");
    assert_eq!(s.replication.mirror[&7], 4);
    assert_eq!(s.ok("mirroring_get 7")["port"], 4);
    let dump = s.text("mc_dump");
    assert!(dump.contains("mgrp(1)") && dump.contains("(rid 0) port 4"), "{dump}");
    s.ok("mirroring_delete 7");
    assert!(s.run("mirroring_get 7").is_err());
    s.ok("mc_mgrp_destroy 1");
    assert!(s.replication.groups.is_empty());
}

#[test]
fn mistakes_are_errors_that_say_what_is_wrong_and_change_nothing() {
    let mut s = Switch::new();
    let refused = |s: &mut Switch, line: &str, says: &str| {
        let e = s.run(line).expect_err(line).to_string();
        assert!(e.contains(says), "{line}: `{e}` does not say `{says}`");
    };
    refused(&mut s, "table_ad routes", "unknown command `table_ad`");
    refused(&mut s, "table_add routes forward 10.0.1.0/24 00:00:00:00:01:01 1", "missing `=>`");
    refused(&mut s, "table_add routes forward => 1 2", "1 key field(s) (hdr.ipv4.dstAddr), got 0");
    refused(&mut s, "table_add routes forward 10.0.1.0/33 => 1 2", "prefix /33");
    refused(&mut s, "table_add routes forward 10.0.1.0 => 1 2", "VALUE/LENGTH");
    refused(
        &mut s,
        "table_add routes forward 10.0.1.0/24 => 1",
        "takes 2 parameter(s) (dst, port)",
    );
    refused(&mut s, "table_add routes nope 10.0.1.0/24 => 1", "nope");
    refused(&mut s, "table_add nope forward 10.0.1.0/24 => 1 2", "routes");
    refused(&mut s, "table_add acl drop 6&&&0x1ff 0->1 => 1", "does not fit in bit<8>");
    refused(&mut s, "table_add acl drop 6 0->1 => 1", "VALUE&&&MASK");
    refused(&mut s, "table_add acl drop 6&&&0xff 0->1 => 99999999", "priority");
    refused(&mut s, "counter_read per_port 8", "8 cells; index 8");
    refused(&mut s, "counter_read nope 1", "there are: MyIngress.per_port");
    refused(&mut s, "register_read per_port 1", "no register called `per_port`");
    refused(&mut s, "meter_set_rates limits 0 fast 1:1", "is not <rate per microsecond>:<burst>");
    refused(&mut s, "meter_set_rates limits 0 inf:1 1:1", "is not <rate per microsecond>:<burst>");
    refused(&mut s, "mc_node_associate 1 0", "no multicast node 0");
    refused(&mut s, &"x".repeat(MAX_LINE + 1), "longer than");
    assert_eq!(s.ok("table_num_entries routes")["entries"], 0);
    assert_eq!(s.ok("table_num_entries acl")["entries"], 0);
    // Comments and blank lines do nothing; help lists every command.
    assert_eq!(s.ok("   # a comment"), json!({"text": ""}));
    assert_eq!(s.ok("help")["commands"].as_array().map(Vec::len), Some(COMMANDS.len()));
}

#[test]
fn handles_are_the_same_however_the_entry_was_written() {
    let mut s = Switch::new();
    let doc = json!({"table_entries": [{"table": "MyIngress.routes",
        "match": {"hdr.ipv4.dstAddr": ["10.0.9.0", 24]},
        "action_name": "MyIngress.forward", "action_params": {"dst": 1, "port": 9}}]});
    crate::runtime::load(&s.p, &doc.to_string()).expect("runtime JSON");
    let via_json = s.ok("table_dump routes")["entries"][0]["handle"].as_u64().unwrap();
    s.ok(&format!("table_delete routes {via_json}"));
    let via_cli = s.ok("table_add routes forward 10.0.9.0/24 => 1 9")["handle"].as_u64();
    assert_eq!(via_cli, Some(via_json));
    // A different prefix length or priority is a different handle.
    let other = s.ok("table_add routes forward 10.0.9.0/25 => 1 9")["handle"].as_u64();
    assert_ne!(other, via_cli);
}

#[test]
fn values_are_read_as_people_write_them() {
    assert_eq!(value("10.0.0.1", "v"), Ok(0x0a00_0001));
    assert_eq!(value("00:00:00:00:01:00", "v"), Ok(0x100));
    assert_eq!(value("0x1f", "v"), Ok(31));
    assert_eq!(value("fe80::1", "v"), Ok(0xfe80_0000_0000_0000_0000_0000_0000_0001));
    assert!(value("10.0.0.256", "v").is_err());
    assert_eq!(format_value(0x0a00_0001, 32), "10.0.0.1");
    assert_eq!(format_value(0x0102_0304_0506, 48), "01:02:03:04:05:06");
    assert_eq!(format_value(9, 9), "9");
}

#[test]
fn the_replication_engine_stays_within_its_limits() {
    let mut s = Switch::new();
    s.ok("mc_mgrp_create 1");
    let ports: Vec<String> = (0..512).map(|p| p.to_string()).collect();
    for _ in 0..3 {
        s.ok(&format!("mc_node_create 0 {}", ports.join(" ")));
    }
    s.ok("mc_node_associate 1 0");
    s.ok("mc_node_associate 1 1");
    let e = s.run("mc_node_associate 1 2").unwrap_err();
    assert!(e.to_string().contains("more than 1024 copies"), "{e}");
    assert_eq!(s.replication.groups[&1].len(), 1024);
    assert!(s.run("mc_node_dissociate 1 2").is_err(), "the refused node is not a member");
    let e = s.run(&format!("mc_node_create 0 {} 1", ports.join(" "))).unwrap_err();
    assert!(e.to_string().contains("give 1 to 512 ports"), "{e}");
}

#[test]
fn handles_name_entries_as_the_table_stores_them() {
    let mut s = Switch::new();
    // Host bits of a prefix are cleared by the table: the handle is the stored entry's.
    let h = s.ok("table_add routes forward 10.0.1.77/24 => 1 1")["handle"].as_u64().unwrap();
    assert_eq!(s.ok("table_dump routes")["entries"][0]["handle"], h);
    s.ok(&format!("table_delete routes {h}"));
    // A range stored as several pieces: each piece's handle, and a delete by key takes all.
    let added = s.ok("table_add acl allow 6&&&0xff 1->10 => 5");
    let pieces = added["handles"].as_array().unwrap().len();
    assert!(pieces > 1 && added["text"].as_str().unwrap().contains("pieces"), "{added}");
    assert_eq!(s.ok("table_num_entries acl")["entries"], pieces);
    s.ok("table_delete_match acl 6&&&0xff 1->10");
    assert_eq!(s.ok("table_num_entries acl")["entries"], 0);
    // BMv2's table_modify: no `=>` (taken all the same).
    let h = s.ok("table_add routes forward 10.0.2.0/24 => 1 1")["handle"].as_u64().unwrap();
    s.ok(&format!("table_modify routes forward {h} 2 2"));
    s.ok(&format!("table_modify routes forward {h} => 3 3"));
    assert_eq!(s.send([10, 0, 2, 1], 17, 64)[0].port, 3);
}

#[test]
fn words_beyond_what_a_table_takes_are_refused() {
    let mut s = Switch::new();
    let e = s.run("table_add routes forward 10.0.0.0/8 => 1 2 3").unwrap_err().to_string();
    assert!(e.contains("takes 2 parameter(s)"), "an lpm table has no priority: {e}");
    let e = s.run("table_dump_entry_from_key routes 10.0.0.0/8 3").unwrap_err().to_string();
    assert!(e.contains("1 key field(s)"), "{e}");
    for (line, says) in [
        ("mirroring_add 5 512", "0 to 511"),
        ("mirroring_add 0 1", "0 means none"),
        ("mc_mgrp_create 0", "0 means none"),
        ("mc_node_create 65536 1", "16 bits"),
        ("mc_node_create 1 600", "0 to 511"),
    ] {
        let e = s.run(line).expect_err(line).to_string();
        assert!(e.contains(says), "{line}: {e}");
    }
    assert!(s.replication.mirror.is_empty() && s.replication.groups.is_empty());
}
