use super::*;
use hotplane_core::wire::{EthernetAddress, UdpFrame};
use hotplane_core::{ExternSlots, Meta, Qsbr, WorkerCx};
use serde_json::json;
use std::collections::BTreeMap;

fn qsbr() -> &'static Qsbr {
    static Q: std::sync::OnceLock<Qsbr> = std::sync::OnceLock::new();
    Q.get_or_init(Qsbr::new)
}

fn make_with(sections: Value) -> Result<Arc<dyn ProgramKind>, KindError> {
    let sections: BTreeMap<String, Value> = serde_json::from_value(sections).unwrap();
    make(&KindSetup { workers: 1, qsbr: qsbr(), base_dir: None, sections: &sections })
}

/// `[[table]] ports`: exact on the UDP destination port, `forward(port)` or `drop`; and one
/// entry sending port 5000 to port 1.
fn ports_config() -> Value {
    json!({
        "table": [{
            "name": "ports",
            "kind": "exact",
            "key_bits": 16,
            "size": 64,
            "actions": [
                {"name": "forward", "params": [{"name": "port", "bits": 16}]},
                {"name": "drop"}
            ],
            "default_action": "drop"
        }],
        "table_entry": [
            {"table": "ports", "match": "5000", "action": "forward", "params": ["1"]}
        ]
    })
}

fn build(kind: &dyn ProgramKind, spec: Value) -> Result<Program, KindError> {
    let ports = vec!["p0".to_string(), "p1".to_string()];
    let externs = ExternSlots::new();
    let cx = BuildCx {
        workers: 1,
        port_names: &ports,
        externs: &externs,
        flows: &[],
        qsbr: qsbr(),
        base_dir: None,
    };
    kind.build(&spec, &cx)
}

fn udp_to(dport: u16) -> Vec<u8> {
    let f = UdpFrame {
        src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
        vlan: None,
        src_ip: "10.0.0.1".parse().unwrap(),
        dst_ip: "10.0.0.2".parse().unwrap(),
        src_port: 1234,
        dst_port: dport,
    };
    let mut buf = vec![0u8; 256];
    let n = f.emit(&[0u8; 16], &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// Run `program` on one UDP frame to `dport`: the XDP action and the output port.
fn run(program: &Program, dport: u16) -> (u64, u16) {
    let stage = program.as_ref().unwrap();
    let mut frame = udp_to(dport);
    let mut meta = Meta::default();
    hotplane_core::classify(&frame, &mut meta);
    let reader = qsbr().register("test");
    let guard = reader.guard();
    let mut cx = WorkerCx::new(0, 1, &guard);
    let action = stage.run_one(&mut frame, &mut meta, &mut cx);
    (action, meta.out_port)
}

#[test]
fn sections_make_tables_and_entries_that_table_stages_run() {
    let k = make_with(ports_config()).unwrap();
    assert_eq!(k.name(), "tables");
    assert_eq!(k.sections(), &["table", "table_entry"]);
    assert_eq!(k.stages(), &["table"]);
    let p = build(&*k, json!({"stage": "table", "table": "ports", "key": "l4.dport"})).unwrap();
    let d = p.as_ref().unwrap().describe();
    assert!(d.starts_with("table ports (Exact, 1 entries of 64"), "{d}");
    assert_eq!(run(&p, 5000), (hotplane_core::xdp::XDP_PASS, 1));
    assert_eq!(run(&p, 5001).0, hotplane_core::xdp::XDP_DROP);
    // A control request changes what the running stage does.
    let add = json!({"op": "table-add", "table": "ports", "match": "5001", "action": "forward", "params": ["0"]});
    assert_eq!(k.request("table-add", &add).unwrap(), json!("added"));
    assert_eq!(run(&p, 5001), (hotplane_core::xdp::XDP_PASS, 0));
    let list = k.request("table-list", &json!({"op": "table-list"})).unwrap();
    assert_eq!(list[0]["entries"], 2);
    k.housekeeping();
}

#[test]
fn no_sections_no_tables() {
    let k = make_with(json!({})).unwrap();
    assert_eq!(k.request("table-list", &json!({"op": "table-list"})).unwrap(), json!([]));
}

#[test]
fn section_errors_name_the_entry_at_fault() {
    let mut c = ports_config();
    let dup = c["table"][0].clone();
    c["table"].as_array_mut().unwrap().push(dup);
    let e = make_with(c).err().unwrap().to_string();
    assert_eq!(e, "table[1]: table `ports`: a table of that name exists");

    let mut c = ports_config();
    c["table_entry"][0]["table"] = json!("nope");
    let e = make_with(c).err().unwrap().to_string();
    assert_eq!(e, "table_entry[0]: no table named `nope`");

    let mut c = ports_config();
    let again = c["table_entry"][0].clone();
    c["table_entry"].as_array_mut().unwrap().push(again);
    let e = make_with(c).err().unwrap().to_string();
    assert_eq!(e, "table_entry[1]: table `ports`, 0x1388: the entry already exists");

    let mut c = ports_config();
    c["table"][0]["colour"] = json!("red");
    let e = make_with(c).err().unwrap().to_string();
    assert!(e.starts_with("[table]: unknown field `colour`"), "{e}");

    let mut c = ports_config();
    c["table_entry"][0]["matches"] = json!("1");
    assert!(make_with(c).is_err());
}

#[test]
fn bad_table_specs_say_what_is_wrong() {
    let k = make_with(ports_config()).unwrap();
    let e = |spec: Value| build(&*k, spec).err().unwrap().to_string();
    assert_eq!(
        e(json!({"stage": "table", "table": "nope", "key": "l4.dport"})),
        "no table named `nope`"
    );
    assert_eq!(
        e(json!({"stage": "table", "table": "ports", "key": "ipv4.src"})),
        "key of 4 bytes; table `ports` has 2-byte keys"
    );
    assert_eq!(
        e(json!({"stage": "table", "table": "ports", "key": "ipv4.tos"})),
        "key `ipv4.tos`: one of ipv4.src, ipv4.dst, l4.sport, l4.dport, payload:OFFSET:LEN"
    );
    assert_eq!(
        e(json!({"stage": "table", "table": "ports", "key": "payload:x:2"})),
        "bad offset in `payload:x:2`"
    );
    assert_eq!(
        e(json!({"stage": "table", "table": "ports", "key": "payload:0:y"})),
        "bad length in `payload:0:y`"
    );
    assert!(e(json!({"stage": "table", "table": "ports"})).contains("missing field `key`"));
    assert!(e(json!({"stage": "table", "table": "ports", "key": "l4.dport", "extra": 1}))
        .contains("extra"));
    assert_eq!(k.node_files(&json!({"stage": "table", "table": "ports", "key": "l4.dport"})), None);
}

#[test]
fn table_stages_take_native_actions_only() {
    let mut c = ports_config();
    c["table"][0]["actions"] = json!([{"name": "teleport"}]);
    c["table"][0]["default_action"] = json!("teleport");
    c["table_entry"] = json!([]);
    let k = make_with(c).unwrap();
    let e = build(&*k, json!({"stage": "table", "table": "ports", "key": "l4.dport"}));
    assert_eq!(
        e.err().unwrap().to_string(),
        "table `ports`: action `teleport` is not a native action (NoAction, drop, forward, mark, swap, count)"
    );
    let mut c = ports_config();
    c["table"][0]["actions"] =
        json!([{"name": "swap", "params": [{"name": "v", "bits": 64, "writable": true}]}]);
    c["table"][0]["default_action"] = json!("swap");
    c["table_entry"] = json!([]);
    let k = make_with(c).unwrap();
    let spec = json!({"stage": "table", "table": "ports", "key": "l4.dport"});
    assert_eq!(
        build(&*k, spec).err().unwrap().to_string(),
        "a table with a `swap` action needs `value_at` (payload offset)"
    );
    let spec = json!({"stage": "table", "table": "ports", "key": "l4.dport", "value_at": 0});
    assert!(build(&*k, spec).unwrap().is_some());
}

#[test]
fn requests_answer_every_table_op_and_refuse_other_shapes() {
    let k = make_with(ports_config()).unwrap();
    assert_eq!(k.ops(), TABLE_OPS);
    let dump = k.request("table-dump", &json!({"op": "table-dump", "table": "ports"})).unwrap();
    assert_eq!(dump["entries"][0]["match"], "0x1388");
    assert_eq!(dump["default"]["action"], "drop");
    let e = k.request("table-dump", &json!({"op": "table-dump", "table": "nope"})).unwrap_err();
    assert_eq!(e, KindError::Invalid("no table named `nope`".into()));
    let e = k.request("table-clear", &json!({"op": "table-clear"})).unwrap_err();
    assert!(e.to_string().contains("missing field `table`"), "{e}");
}
