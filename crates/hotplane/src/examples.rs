//! An example for every command's `--help`, in one place, so that none is forgotten: a test
//! walks the command line and fails on a command without one. Commands that declare their own
//! (`after_help` at the definition, where the example explains a flag) keep theirs.

/// Command path (without `hotplane`) and the lines shown under "Examples:".
const EXAMPLES: &[(&str, &[&str])] = &[
    ("", &["hotplane demo", "hotplane run --config examples/config/p4.toml --stats-every 1"]),
    ("demo", &["hotplane demo", "hotplane demo --rate 500000 --duration-ms 3000 --out demo-out"]),
    ("push", &["hotplane push slots", "hotplane push --p4 basic.p4 --entries s1-runtime.json --key-file examples/config/demo-key.hex"]),
    ("push stats", &["hotplane push stats", "hotplane push stats --json"]),
    ("push slots", &["hotplane push slots"]),
    ("push flows", &["hotplane push flows", "hotplane push flows --worker 1 --json"]),
    ("push predefined", &["hotplane push predefined"]),
    ("push metrics", &["hotplane push metrics | grep hotplane_port"]),
    ("push install", &["hotplane push install --target pre --stage '{\"stage\":\"count\"}'"]),
    ("push switch", &["hotplane push switch --target pre --id 1"]),
    ("push remove", &["hotplane push remove --target mid"]),
    ("push update", &["hotplane push update --target pre --stage '{\"stage\":\"drop\"}' --key-file examples/config/demo-key.hex --key-id 1"]),
    ("push p4-tables", &["hotplane push p4-tables"]),
    ("push p4-dump", &["hotplane push p4-dump MyIngress.ipv4_lpm"]),
    ("push p4-entries", &["hotplane push p4-entries s1-runtime.json"]),
    ("push wasp-get", &["hotplane push wasp-get wasp 42"]),
    ("push chain-status", &["hotplane push chain-status"]),
    ("push shutdown", &["hotplane push shutdown"]),
    ("wasp", &["hotplane wasp asm examples/wasp/count.s --hex"]),
    ("wasp asm", &["hotplane wasp asm examples/wasp/count.s --hex", "hotplane wasp asm examples/wasp/count.s --out count.bin"]),
    ("wasp disasm", &["hotplane wasp asm examples/wasp/count.s --out count.bin", "hotplane wasp disasm count.bin"]),
    ("wasp check", &["hotplane wasp check examples/wasp/count.s"]),
    ("wasp run", &["hotplane wasp run examples/wasp/count.s --key 7 --scratch 3 --repeat 5 --hops 3"]),
    ("ebpf", &["hotplane ebpf verify examples/ebpf/xdp_count.o", "hotplane ebpf prog list"]),
    ("ebpf asm", &["hotplane ebpf disasm examples/ebpf/xdp_count.o > count.s", "hotplane ebpf asm count.s -o count.bin"]),
    ("ebpf disasm", &["hotplane ebpf disasm examples/ebpf/xdp_count.o"]),
    ("ebpf verify", &["hotplane ebpf verify examples/ebpf/xdp_lb.o"]),
    ("ebpf run", &["hotplane ebpf run examples/ebpf/xdp_count.o --engine interp"]),
    ("ebpf shape", &["hotplane ebpf shape examples/ebpf/chain/fw6.o --json > fw6.shape.json"]),
    ("ebpf chain", &["hotplane ebpf chain examples/ebpf/chain/fw6.o examples/ebpf/chain/lb6.o --check 1000"]),
    ("ebpf conformance", &["HOTPLANE_SHARED=../shared hotplane ebpf conformance --engine jit"]),
    ("ebpf prog list", &["hotplane ebpf prog list", "hotplane ebpf prog list --json"]),
    ("ebpf prog show", &["hotplane ebpf prog show pre"]),
    ("ebpf prog dump", &["hotplane ebpf prog dump xlated pre", "hotplane ebpf prog dump jited extern:lb"]),
    ("ebpf prog stats", &["hotplane ebpf prog stats on", "hotplane ebpf prog list", "hotplane ebpf prog stats off"]),
    ("ebpf map", &["hotplane ebpf map list", "hotplane ebpf map dump xdp_lb/backends"]),
    ("ebpf map list", &["hotplane ebpf map list"]),
    ("ebpf map dump", &["hotplane ebpf map dump xdp_count/proto_count"]),
    ("ebpf map update", &["hotplane ebpf map update xdp_count/proto_count 5 0", "hotplane ebpf map update xdp_lb/backends 0 0x0a0000640200000000020000"]),
    ("ebpf map delete", &["hotplane ebpf map delete xdp_lb/flows 0x0a0000010a0100010400138811000000"]),
    ("ebpf map lookup", &["hotplane ebpf map lookup xdp_lb/backends 0"]),
    ("ebpf update", &["hotplane ebpf update examples/ebpf/xdp_count.o --target pre --key-file examples/config/demo-key.hex"]),
    ("lua", &["hotplane lua check examples/lua/ttl.lua", "hotplane lua list"]),
    ("lua check", &["hotplane lua check examples/lua/ttl.lua"]),
    ("lua run", &["hotplane lua run examples/lua/ttl.lua", "hotplane lua run examples/lua/nat.lua --no-jit"]),
    ("lua list", &["hotplane lua list", "hotplane lua list --json"]),
    ("lua update", &["hotplane lua update examples/lua/ttl.lua --target 'flow:proto=udp,dport=5000' --key-file examples/config/demo-key.hex"]),
    ("p4", &["hotplane p4 check tests/p4/basic.p4", "hotplane p4 stf tests/p4/basic.p4 tests/p4/basic.stf"]),
    ("p4 check", &["hotplane p4 check tests/p4/basic.p4", "hotplane p4 check prog.p4 -I include/"]),
    ("p4 info", &["hotplane p4 info tests/p4/basic.p4 --out basic.p4info.txt"]),
    ("p4 stf", &["hotplane p4 stf tests/p4/basic.p4 tests/p4/basic.stf"]),
    ("table", &["hotplane table list", "hotplane table dump MyIngress.ipv4_lpm"]),
    ("table list", &["hotplane table list", "hotplane table list --json"]),
    ("table clear", &["hotplane table clear MyIngress.ipv4_lpm"]),
    ("bench", &["hotplane bench pipeline", "hotplane bench p4 --program tests/p4/basic.p4 --entries tests/p4/basic.json --json"]),
    ("bench lua-dyn", &["hotplane bench lua-dyn --rate 100000"]),
    ("bench p4", &["hotplane bench p4 --program tests/p4/basic.p4 --entries tests/p4/basic.json"]),
    ("bench p4runtime", &["hotplane bench p4runtime --singles 1000 --batched 10000"]),
    ("bench tables", &["hotplane bench tables --packets 1000000"]),
    ("bench wasp", &["hotplane bench wasp --packets 1000000 --repeat 3"]),
    ("bench chain", &["hotplane bench chain --packets 200000 --check 20000"]),
    ("bench wasp-net", &["sudo hotplane bench wasp-net --out wasp-net"]),
    ("bench lua", &["hotplane bench lua --packets 1000000"]),
    ("bench ebpf", &["hotplane bench ebpf", "hotplane bench ebpf --json"]),
    ("bench pipeline", &["hotplane bench pipeline", "hotplane bench pipeline --json"]),
    ("bench swap", &["hotplane bench swap --swaps 1000 --workers 2"]),
    ("bench veth", &["sudo hotplane bench veth --port afxdp --trial-ms 2000"]),
    ("key", &["hotplane key gen node.key"]),
    ("key gen", &["hotplane key gen node.key", "hotplane key gen node.key --id 7 --force"]),
];

/// Commands that print another tool's usage (`switch` is simple_switch_grpc's command line,
/// `p4c` is p4c's) and clap's own `help`: no examples of ours.
const OWN_USAGE: &[&str] = &["switch", "p4c", "help"];

/// `cli` with every command's examples in its `--help`.
pub fn with_examples(cli: clap::Command) -> clap::Command {
    add(cli, "")
}

fn add(mut cmd: clap::Command, path: &str) -> clap::Command {
    if cmd.get_after_help().is_none() {
        if let Some((_, lines)) = EXAMPLES.iter().find(|(p, _)| *p == path) {
            cmd = cmd.after_help(format!("Examples:\n  {}", lines.join("\n  ")));
        }
    }
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
    for name in names {
        let sub_path = if path.is_empty() { name.clone() } else { format!("{path} {name}") };
        cmd = cmd.mut_subcommand(&name, |sub| add(sub, &sub_path));
    }
    cmd
}

/// The commands under `cmd` (by path) whose `--help` has no example.
pub fn without_examples(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
    let exempt = OWN_USAGE.contains(&cmd.get_name()) && !path.is_empty();
    let has = cmd.get_after_help().is_some_and(|h| h.to_string().contains("Examples:"));
    if !exempt && !has {
        out.push(if path.is_empty() { "(hotplane)".into() } else { path.to_string() });
    }
    if exempt {
        return;
    }
    for sub in cmd.get_subcommands() {
        let sub_path = if path.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{path} {}", sub.get_name())
        };
        without_examples(sub, &sub_path, out);
    }
}
