//! Hostile P4 programs (issue 18): whatever a node is sent must end in a result or an error,
//! never a crash, a hang or unbounded memory.
//!
//! Each program is generated here rather than committed (some are megabytes). Programs that
//! crashed or ran away before their fix run in a child process (this test binary, re-run with
//! `HOTPLANE_P4_HOSTILE` naming the case) under CPU-time and address-space limits, on a
//! thread with the control thread's 2 MiB stack; the parent asserts the child exited normally
//! and reported the expected error. A stack overflow, an aborting allocation or a runaway
//! loop kills the child, and the parent reports how.

use std::fmt::Write as _;
use std::process::Command;

const CASE_VAR: &str = "HOTPLANE_P4_HOSTILE";
const STACK_VAR: &str = "HOTPLANE_P4_HOSTILE_STACK";
/// The control thread is spawned with Rust's default stack.
const CONTROL_STACK: usize = 2 << 20;
/// Address space for a child: far below what the 34 GB register asked for.
const CHILD_ADDRESS_SPACE: u64 = 3 << 30;
/// CPU seconds for a child; the cases that hung or took over a minute must fail well within.
const CHILD_CPU_SECONDS: u64 = 30;

/// A v1model program with `decls` in the ingress control and `body` in its apply block,
/// `states` as the parser's states after `start` (which goes to `first`), and `top` before
/// everything (after the includes).
struct Program<'a> {
    top: &'a str,
    first: &'a str,
    states: &'a str,
    decls: &'a str,
    body: &'a str,
}

impl Default for Program<'_> {
    fn default() -> Self {
        Program { top: "", first: "accept", states: "", decls: "", body: "" }
    }
}

impl Program<'_> {
    fn text(&self) -> String {
        format!(
            "#include <core.p4>\n#include <v1model.p4>\n{top}\n\
             header h_t {{ bit<32> a; bit<32> b; bit<8> c; }}\n\
             struct headers {{ h_t h; }}\nstruct meta_t {{ bit<32> m; }}\n\
             parser P(packet_in pkt, out headers hdr, inout meta_t meta, \
             inout standard_metadata_t sm) {{\n\
             state start {{ pkt.extract(hdr.h); transition {first}; }}\n{states}\n}}\n\
             control VC(inout headers hdr, inout meta_t meta) {{ apply {{ }} }}\n\
             control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{\n\
             {decls}\napply {{\n{body}\n}}\n}}\n\
             control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) \
             {{ apply {{ }} }}\n\
             control C(inout headers hdr, inout meta_t meta) {{ apply {{ }} }}\n\
             control D(packet_out pkt, in headers hdr) {{ apply {{ pkt.emit(hdr.h); }} }}\n\
             V1Switch(P(), VC(), I(), E(), C(), D()) main;\n",
            top = self.top,
            first = self.first,
            states = self.states,
            decls = self.decls,
            body = self.body,
        )
    }
}

fn chain(n: usize, term: impl Fn(usize) -> String, sep: &str) -> String {
    (0..n).map(term).collect::<Vec<_>>().join(sep)
}

/// `hdr.h.a = t0 + t1 + ... ;` with `n` terms that do not fold to a constant.
fn sum_of_fields(n: usize) -> String {
    let terms = chain(n, |i| if i % 2 == 0 { "hdr.h.a".into() } else { "hdr.h.b".into() }, " + ");
    Program { body: &format!("hdr.h.a = {terms};"), ..Default::default() }.text()
}

/// `hdr.h.a = 1 + 1 + ... ;` with `n` terms.
fn sum_of_ones(n: usize) -> String {
    Program { body: &format!("hdr.h.a = {};", chain(n, |_| "1".into(), "+")), ..Default::default() }
        .text()
}

/// Actions `a0` .. `a{n-1}`, each calling the one before.
fn action_chain(n: usize) -> String {
    let mut decls = String::from("action a0() { hdr.h.a = hdr.h.a + 1; }\n");
    for i in 1..n {
        writeln!(decls, "action a{i}() {{ a{}(); }}", i - 1).unwrap();
    }
    Program { decls: &decls, body: &format!("a{}();", n - 1), ..Default::default() }.text()
}

/// Actions `a0` .. `a{n-1}`, each calling the one before twice: `2^n` copies once inlined.
fn action_doubling(n: usize) -> String {
    let mut decls = String::from("action a0() { hdr.h.a = hdr.h.a + 1; }\n");
    for i in 1..n {
        writeln!(decls, "action a{i}() {{ a{0}(); a{0}(); }}", i - 1).unwrap();
    }
    Program { decls: &decls, body: &format!("a{}();", n - 1), ..Default::default() }.text()
}

/// Sub-parsers `s0` .. `s{n-1}`, each applying the one before twice: each apply splices in a
/// copy of its states, so the top one has 2^n copies of `s0`'s.
fn subparser_doubling(n: usize) -> String {
    let mut top = String::from(
        "parser s0(packet_in pkt, inout bit<32> x) { state start { x = x + 1; transition accept; } }\n",
    );
    for i in 1..n {
        writeln!(
            top,
            "parser s{i}(packet_in pkt, inout bit<32> x) {{ s{0}() t; \
             state start {{ t.apply(pkt, x); t.apply(pkt, x); transition accept; }} }}",
            i - 1
        )
        .unwrap();
    }
    // The instance goes in the main parser's body, with the state that applies it.
    let states =
        format!("s{}() sub;\nstate go {{ sub.apply(pkt, hdr.h.a); transition accept; }}", n - 1);
    Program { top: &top, first: "go", states: &states, ..Default::default() }.text()
}

/// `if` statements nested `n` deep in each of a chain of `calls` actions, each action calling
/// the one before from its innermost statement, which also assigns an expression `height`
/// deep: statements, inlined calls and expressions nesting together.
fn deep_everything(n: usize, calls: usize, height: usize) -> String {
    let sum = chain(height, |_| "hdr.h.a".into(), " + ");
    let mut decls = String::new();
    for i in 0..calls {
        let call = if i == 0 { String::new() } else { format!("a{}();", i - 1) };
        writeln!(
            decls,
            "action a{i}() {{ {}hdr.h.b = {sum}; {call}{} }}",
            "if (hdr.h.c == 1) { ".repeat(n),
            " }".repeat(n)
        )
        .unwrap();
    }
    let body = format!("{}a{}();{}", "if (hdr.h.c == 1) { ".repeat(n), calls - 1, " }".repeat(n));
    Program { decls: &decls, body: &body, ..Default::default() }.text()
}

/// `#if ((((1))))` with `n` parentheses, or `#if !!!!1` with `n` negations.
fn deep_if_expression(n: usize, parens: bool) -> String {
    let cond = if parens {
        format!("{}1{}", "(".repeat(n), ")".repeat(n))
    } else {
        format!("{}1", "!".repeat(n))
    };
    format!("#if {cond}\n#endif\n{}", Program::default().text())
}

/// `#if 1` nested `n` deep around an empty line.
fn nested_if_directives(n: usize) -> String {
    let mut src = "#if 1\n".repeat(n);
    src.push_str(&"#endif\n".repeat(n));
    src.push_str(&Program::default().text());
    src
}

/// `if (..) { if (..) { ... } }` nested `n` deep.
fn nested_ifs(n: usize) -> String {
    let body = format!("{}hdr.h.a = 1;{}", "if (hdr.h.c == 1) { ".repeat(n), " }".repeat(n));
    Program { body: &body, ..Default::default() }.text()
}

/// `if (..) {} else if (..) {} ...` `n` times.
fn else_if_chain(n: usize) -> String {
    let body = chain(n, |i| format!("if (hdr.h.c == {}) {{ hdr.h.a = {i}; }}", i % 256), " else ");
    Program { body: &body, ..Default::default() }.text()
}

/// `hdr.h.a = ((((..1..))))` with `n` parentheses.
fn nested_parens(n: usize) -> String {
    let body = format!("hdr.h.a = {}1{};", "(".repeat(n), ")".repeat(n));
    Program { body: &body, ..Default::default() }.text()
}

/// `hdr.h.a = - - - ... 1`: unary operators `n` deep.
fn nested_negations(n: usize) -> String {
    let body = format!("hdr.h.a = {}hdr.h.b;", "~".repeat(n));
    Program { body: &body, ..Default::default() }.text()
}

/// Structs `s0` .. `s{n-1}`, each holding the one before, and a metadata field of the last.
fn nested_structs(n: usize) -> String {
    let mut top = String::from("struct s0 { bit<8> f; }\n");
    for i in 1..n {
        writeln!(top, "struct s{i} {{ s{} f; }}", i - 1).unwrap();
    }
    let decls = format!("s{} deep;", n - 1);
    Program { top: &top, decls: &decls, ..Default::default() }.text()
}

/// A struct that holds itself (`how`: directly, in a stack or in a tuple), below the nesting
/// budget, and a metadata variable of it.
fn recursive_struct(how: usize) -> String {
    let field = match how {
        0 => "r f;",
        1 => "r[2] f;",
        _ => "tuple<bit<8>, r> f;",
    };
    let top = format!("struct r {{ bit<8> a; {field} }}");
    Program { top: &top, decls: "r x;", body: "hdr.h.a = 1;", ..Default::default() }.text()
}

/// Type declarations that double at each of `n` levels: structs of two of the level below
/// (`how` 0), tuples of two (1), a generic pair of two (2); or a generic struct whose field
/// instantiates it with a bigger argument, without end (3).
fn doubling_types(how: usize, n: usize) -> String {
    let mut top = String::new();
    match how {
        0 => {
            top.push_str("struct s0 { bit<8> a; }\n");
            for i in 1..=n {
                writeln!(top, "struct s{i} {{ s{p} a; s{p} b; }}", p = i - 1).unwrap();
            }
        }
        1 | 2 => {
            top.push_str("struct Pair<A, B> { A a; B b; }\ntypedef bit<8> s0;\n");
            for i in 1..=n {
                let p = i - 1;
                let pair = if how == 1 {
                    format!("tuple<s{p}, s{p}>")
                } else {
                    format!("Pair<s{p}, s{p}>")
                };
                writeln!(top, "typedef {pair} s{i};").unwrap();
            }
        }
        _ => top.push_str("struct S<T> { T v; S<S<T>> deeper; }\ntypedef S<bit<8>> s0;\n"),
    }
    let last = if how == 3 { 0 } else { n };
    let decls = format!("s{last} x;");
    Program { top: &top, decls: &decls, body: "hdr.h.a = 1;", ..Default::default() }.text()
}

/// Structs three levels deep, each with `n` fields of the level below, and a metadata
/// variable of the top one: `n^3` slots.
fn struct_fanout(n: usize) -> String {
    let mut top = format!("struct s0 {{ {} }}\n", chain(n, |i| format!("bit<8> f{i};"), " "));
    for level in 1..3 {
        let fields = chain(n, |i| format!("s{} f{i};", level - 1), " ");
        writeln!(top, "struct s{level} {{ {fields} }}").unwrap();
    }
    Program { top: &top, decls: "s2 wide;", body: "hdr.h.a = 1;", ..Default::default() }.text()
}

/// A header stack of `n` headers of `fields` 128-bit fields in a struct, `copies` times.
fn header_stacks(copies: usize) -> String {
    let top = format!(
        "header wide_t {{ {} }}\nstruct stacks_t {{ {} }}",
        chain(64, |i| format!("bit<128> f{i};"), " "),
        chain(copies, |i| format!("wide_t[4096] s{i};"), " ")
    );
    Program { top: &top, decls: "stacks_t st;", body: "hdr.h.a = 1;", ..Default::default() }.text()
}

/// Typedefs `t0` .. `t{n-1}`, each naming the one before.
fn typedef_chain(n: usize) -> String {
    let mut top = String::from("typedef bit<8> t0;\n");
    for i in 1..n {
        writeln!(top, "typedef t{} t{i};", i - 1).unwrap();
    }
    let decls = format!("t{} x;", n - 1);
    Program { top: &top, decls: &decls, body: "x = 1; hdr.h.c = x;", ..Default::default() }.text()
}

/// Parser states `s0` .. `s{n-1}`, each going to the next.
fn parser_state_chain(n: usize) -> String {
    let states = chain(
        n,
        |i| {
            format!(
                "state s{i} {{ transition {}; }}",
                if i + 1 < n { format!("s{}", i + 1) } else { "accept".into() }
            )
        },
        "\n",
    );
    Program { first: "s0", states: &states, ..Default::default() }.text()
}

/// One select with `n` cases.
fn select_cases(n: usize) -> String {
    let cases = chain(n, |i| format!("{i}: accept;"), "\n");
    let states =
        format!("state s0 {{ transition select(hdr.h.a) {{ {cases} default: reject; }} }}");
    Program { first: "s0", states: &states, ..Default::default() }.text()
}

/// `n` tables, all applied.
fn tables(n: usize) -> String {
    let decls = chain(
        n,
        |i| {
            format!("action set{i}(bit<32> v) {{ hdr.h.a = v; }}\ntable t{i} {{ key = {{ hdr.h.b: exact; }} actions = {{ set{i}; NoAction; }} default_action = NoAction(); }}")
        },
        "\n",
    );
    let body = chain(n, |i| format!("t{i}.apply();"), "\n");
    Program { decls: &decls, body: &body, ..Default::default() }.text()
}

/// `#define A0` as one identifier of `bytes` bytes, then `A{i+1}` as `A{i} A{i}` `levels`
/// times and `A{levels};` in the apply block: few tokens, but `2^levels` copies of the long
/// identifier once expanded.
fn long_token_macro_bomb(levels: usize, bytes: usize) -> String {
    let mut top = format!("#define A0 {}\n", "x".repeat(bytes));
    for i in 0..levels {
        writeln!(top, "#define A{} A{i} A{i}", i + 1).unwrap();
    }
    Program { top: &top, body: &format!("A{levels};"), ..Default::default() }.text()
}

/// A ternary table with `n` const entries, each under a different mask (a tuple of its own).
fn const_ternary_entries(n: usize) -> String {
    let entries = chain(
        n,
        |i| format!("{i} &&& 0x{:08x} : set({i});", (i as u32).wrapping_mul(0x9e37_79b1)),
        "\n",
    );
    let decls = format!(
        "action set(bit<32> v) {{ hdr.h.b = v; }}\n\
         table t {{ key = {{ hdr.h.a : ternary; }} actions = {{ set; }} \
         const entries = {{\n{entries}\n}} }}"
    );
    Program { decls: &decls, body: "t.apply();", ..Default::default() }.text()
}

fn with_decl(decl: &str) -> String {
    Program { decls: decl, body: "hdr.h.a = 1;", ..Default::default() }.text()
}

/// What the child runs: the node's path for a program in an update (compile the source, then
/// build its state and code), or `p4 check`'s for files (`file:` names a program on disk).
fn child_compile(program: &str) -> Result<String, String> {
    if let Some(path) = program.strip_prefix("bundle:") {
        // `hotplane push --p4` inlines a program's includes on the operator's machine.
        let text = hotplane_p4::preprocess::bundle(std::path::Path::new(path), &[])
            .map_err(|e| e.to_string())?;
        return Ok(format!("bundled: {} bytes", text.len()));
    }
    let ir = match program.strip_prefix("file:") {
        Some(path) => hotplane_p4::compile_file(std::path::Path::new(path), &[], &[]),
        None => hotplane_p4::compile_source("hostile.p4", program, &[]),
    }
    .map_err(|e| e.to_string())?;
    use hotplane_p4::exec::{Engine, Objects, Pipeline};
    let qsbr = hotplane_core::Qsbr::new();
    // The closures too (a worker runs them, recursing on the program's nesting), not only
    // the engine the program gets by default.
    let closures = Objects::new(&ir, &qsbr)
        .and_then(|objects| Pipeline::with_engine(ir.clone(), objects, Engine::Closures))
        .map_err(|e| e.to_string())?;
    let p = Pipeline::new(ir, &qsbr).map_err(|e| e.to_string())?;
    let engine = p.native_error().map_or("native".into(), |e| format!("closures ({e})"));
    let (tables, states) = (p.program.tables.len(), p.program.states.len());
    // One packet through each, on this thread (a worker's stack is as small as this one).
    let reader = qsbr.register("hostile");
    // `hdr.h.c` (byte 8) is 1, the value the nested `if`s of the cases test for.
    let mut packet = vec![0u8; 64];
    packet[8] = 1;
    for pipeline in [p, closures] {
        let mut switch = hotplane_p4::v1model::V1Switch::new(std::sync::Arc::new(pipeline));
        let pre = hotplane_p4::v1model::Replication::default();
        switch.process(&packet, 1, &pre, &reader.guard(), 1, &mut Vec::new());
    }
    Ok(format!("compiled: {tables} tables, {states} states, engine {engine}"))
}

/// The child's side: run the named case on a thread with the control thread's stack.
/// Ignored in a normal run: the other tests run it, in a child, with `--ignored`.
#[test]
#[ignore = "the hostile tests run it in a child process"]
fn hostile_child() {
    let Ok(case) = std::env::var(CASE_VAR) else { return };
    let program = program_for(&case);
    let stack = std::env::var(STACK_VAR).ok().and_then(|s| s.parse().ok()).unwrap_or(CONTROL_STACK);
    let outcome = std::thread::Builder::new()
        .stack_size(stack)
        .spawn(move || child_compile(&program))
        .expect("spawn the compile thread")
        .join()
        .expect("the compile thread does not panic");
    match outcome {
        Ok(s) => println!("OUTCOME ok {s}"),
        // The first line is the diagnostic; the rest quotes the (possibly huge) source line.
        Err(e) => println!("OUTCOME err {}", e.lines().next().unwrap_or("")),
    }
}

fn program_for(case: &str) -> String {
    let (name, n_text) = case.split_once(':').unwrap_or((case, "0"));
    let n: usize = n_text.parse().unwrap_or(0);
    match name {
        "sum_of_fields" => sum_of_fields(n),
        "sum_of_ones" => sum_of_ones(n),
        "action_chain" => action_chain(n),
        "action_doubling" => action_doubling(n),
        "subparser_doubling" => subparser_doubling(n),
        "deep_everything" => deep_everything(n, 8, 120),
        "if_parens" => deep_if_expression(n, true),
        "if_negations" => deep_if_expression(n, false),
        "nested_if_directives" => nested_if_directives(n),
        "nested_ifs" => nested_ifs(n),
        "else_if_chain" => else_if_chain(n),
        "nested_parens" => nested_parens(n),
        "nested_negations" => nested_negations(n),
        "nested_structs" => nested_structs(n),
        "typedef_chain" => typedef_chain(n),
        "struct_fanout" => struct_fanout(n),
        "recursive_struct" => recursive_struct(n),
        "doubling_structs" => doubling_types(0, n),
        "doubling_tuples" => doubling_types(1, n),
        "doubling_generics" => doubling_types(2, n),
        "growing_generic" => doubling_types(3, n),
        "header_stacks" => header_stacks(n),
        "parser_state_chain" => parser_state_chain(n),
        "select_cases" => select_cases(n),
        "tables" => tables(n),
        "register" => with_decl(&format!("register<bit<32>>(32w{n}) r;")),
        "counter" => with_decl(&format!("counter(32w{n}, CounterType.packets_and_bytes) c;")),
        "meter" => with_decl(&format!("meter(32w{n}, MeterType.bytes) m;")),
        "many_profiles" => with_decl(&chain(
            n,
            |i| format!("action_selector(HashAlgorithm.crc16, 32w1048576, 32w16) p{i};"),
            "\n",
        )),
        "many_registers" => {
            with_decl(&chain(n, |i| format!("register<bit<64>>(32w1000000) r{i};"), "\n"))
        }
        "include_bomb" => include_bomb(n),
        "long_token_macro_bomb" => long_token_macro_bomb(n, 1 << 20),
        "const_ternary_entries" => const_ternary_entries(n),
        "bundle_bomb" => format!("bundle:{}", include_bomb(n).trim_start_matches("file:")),
        "seed" => std::fs::read_to_string(n_text).expect("read seed"),
        other => panic!("unknown hostile case {other}"),
    }
}

/// `n` files in a fresh directory, each including the next twice (no include guards); the
/// result is `file:` and the first one's path.
fn include_bomb(n: usize) -> String {
    let dir = std::env::temp_dir().join(format!("hotplane-p4-include-bomb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for i in 0..n {
        let text = if i + 1 < n {
            format!("#include \"f{0}.p4\"\n#include \"f{0}.p4\"\n", i + 1)
        } else {
            "const bit<8> LEAF = 1;\n".into()
        };
        std::fs::write(dir.join(format!("f{i}.p4")), text).expect("write include");
    }
    let main = dir.join("main.p4");
    let text = format!("#include \"f0.p4\"\n{}", Program::default().text());
    std::fs::write(&main, text).expect("write main");
    format!("file:{}", main.display())
}

/// Run `case` in a child under rlimits. Returns `Ok(outcome line)` if the child exited
/// normally, else how it died.
fn run_child(case: &str, stack: usize) -> Result<String, String> {
    use std::os::unix::process::CommandExt as _;
    let exe = std::env::current_exe().expect("current exe");
    let mut cmd = Command::new(exe);
    cmd.args(["hostile_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CASE_VAR, case)
        .env(STACK_VAR, stack.to_string());
    // SAFETY: between fork and exec the closure only calls setrlimit, which is
    // async-signal-safe, on values computed before the fork.
    unsafe {
        cmd.pre_exec(|| {
            let limit = |resource, value: u64| {
                let lim = libc::rlimit { rlim_cur: value, rlim_max: value };
                if libc::setrlimit(resource, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            };
            limit(libc::RLIMIT_AS, CHILD_ADDRESS_SPACE)?;
            limit(libc::RLIMIT_CPU, CHILD_CPU_SECONDS)?;
            // A crash should not leave a core file behind.
            limit(libc::RLIMIT_CORE, 0)
        });
    }
    let out = cmd.output().expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let outcome = stdout.lines().find_map(|l| l.split_once("OUTCOME ")).map(|(_, o)| o.to_string());
    match (out.status.success(), outcome) {
        (true, Some(o)) => Ok(o),
        _ => {
            use std::os::unix::process::ExitStatusExt as _;
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
            Err(format!(
                "case {case}: child died (status {:?}, signal {:?}): {}",
                out.status.code(),
                out.status.signal(),
                tail.join(" | ")
            ))
        }
    }
}

/// The case ends in an error whose message contains `expected`.
fn refused(case: &str, expected: &str) {
    match run_child(case, CONTROL_STACK) {
        Ok(o) => assert!(
            o.starts_with("err ") && o.contains(expected),
            "case {case}: expected an error containing {expected:?}, got {o}"
        ),
        Err(e) => panic!("{e}"),
    }
}

/// The case compiles, on half the control thread's stack: the budgets leave that much room.
/// Returns what the child said (engine included).
fn accepted(case: &str) -> String {
    match run_child(case, CONTROL_STACK / 2) {
        Ok(o) => {
            assert!(o.starts_with("ok "), "case {case}: expected to compile, got {o}");
            o
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn long_sums_are_refused_not_a_stack_overflow() {
    refused("sum_of_fields:1500", "nests deeper than");
    refused("sum_of_ones:1500", "nests deeper than");
    refused("sum_of_ones:10000", "nests deeper than");
    refused("sum_of_fields:100000", "nests deeper than");
}

/// What the budgets allow compiles on the control thread's stack: each kind of nesting just
/// under its limit (the default `nesting_depth` is 128, `call_depth` 32).
#[test]
fn programs_within_the_budgets_compile_on_the_control_stack() {
    accepted("sum_of_fields:125");
    accepted("nested_parens:100");
    accepted("nested_negations:100");
    accepted("nested_ifs:60");
    accepted("action_chain:31");
    accepted("nested_structs:127");
    accepted("deep_everything:6");
    accepted("typedef_chain:10000");
    accepted("parser_state_chain:1000");
    accepted("select_cases:16000");
    // Too large for one native function: runs on closures rather than taking minutes.
    let huge = accepted("action_doubling:14");
    assert!(huge.contains("engine closures (one function would hold"), "{huge}");
    accepted("tables:1024");
}

#[test]
fn deep_unary_and_parentheses_are_refused() {
    refused("nested_parens:100000", "nest");
    refused("nested_negations:100000", "nest");
}

#[test]
fn long_chains_of_action_calls_are_refused() {
    refused("action_chain:10000", "calls nest deeper than");
    refused("action_chain:40", "over the `call_depth` budget (limit 32)");
}

/// Each apply of a sub-parser copies its states: doubling at every level is stopped by the
/// `parser_states` budget (or the call depth), never by running out of memory.
#[test]
fn sub_parsers_that_multiply_states_are_refused() {
    accepted("subparser_doubling:6");
    refused("subparser_doubling:20", "over the `parser_states` budget");
    refused("subparser_doubling:40", "calls nest deeper than");
}

#[test]
fn calls_that_multiply_code_when_inlined_are_refused() {
    refused("action_doubling:30", "over the `code_size` budget");
}

#[test]
fn deeply_nested_if_directives_are_refused() {
    refused("nested_if_directives:100000", "nest deeper than");
    refused("if_parens:100000", "nests deeper than");
    refused("if_negations:100000", "nests deeper than");
}

#[test]
fn deeply_nested_statements_are_refused() {
    refused("nested_ifs:100000", "nest");
    refused("else_if_chain:20000", "nest");
    refused("deep_everything:40", "nest deeper than");
}

#[test]
fn deeply_nested_types_are_refused() {
    refused("nested_structs:10000", "nest deeper than");
    refused("nested_structs:129", "over the `nesting_depth` budget (limit 128)");
}

/// A struct naming itself once made lowering allocate it forever (a stack overflow the
/// `p4_source` fuzzer found in CI; the crashing input is a seed).
#[test]
fn recursive_types_are_refused() {
    for how in 0..3 {
        refused(
            &format!("recursive_struct:{how}"),
            "`r` is a recursive type: field `f` contains it",
        );
    }
}

/// Types that double at each level (their checks, names and slots) and a generic that grows
/// without end are refused by budget, quickly, instead of hanging or exhausting memory.
#[test]
fn doubling_and_growing_types_are_refused() {
    for case in ["doubling_structs:40", "doubling_tuples:40", "doubling_generics:40"] {
        refused(case, "budget");
    }
    refused("growing_generic:0", "over the `nesting_depth` budget");
}

#[test]
fn huge_registers_counters_and_meters_are_refused() {
    refused("register:4294967295", "over the `instance_entries` budget (limit 16777216)");
    refused("counter:4294967295", "instance_entries");
    refused("meter:4294967295", "instance_entries");
    refused("many_registers:1000", "over the `state_bytes` budget (limit 1073741824)");
    // Each member is budgeted (the profile's size), whether or not it is ever created.
    refused("many_profiles:16", "over the `state_bytes` budget");
}

#[test]
fn wide_per_packet_state_is_refused() {
    refused("struct_fanout:1000", "over the `packet_state_bytes` budget");
    refused("header_stacks:100", "over the `packet_state_bytes` budget");
}

#[test]
fn include_bombs_are_refused() {
    refused("include_bomb:30", "over the `includes` budget");
    refused("bundle_bomb:30", "more includes than the `includes` budget allows");
}

/// The red team's long-token bomb: a 1 MiB identifier doubled 12 times is 4 GiB of token
/// text from a 1 MiB program, which the token count alone let through.
#[test]
fn long_token_macro_bombs_are_refused_by_the_byte_budget() {
    refused("long_token_macro_bomb:12", "over the `expanded_bytes` budget (limit 16777216)");
    // 16 copies of the identifier are the whole budget: one doubling fewer still compiles
    // the expansion (the long name is then an unknown identifier, not a budget error).
    let under =
        run_child("long_token_macro_bomb:3", CONTROL_STACK).unwrap_or_else(|e| panic!("{e}"));
    assert!(!under.contains("expanded_bytes"), "{under}");
}

/// Const entries of a ternary table, each under a mask of its own, are built in one batch:
/// one entry at a time rebuilt the index per entry (minutes for 20,000 in a debug build).
#[test]
fn many_const_ternary_entries_compile_and_too_many_are_refused() {
    accepted("const_ternary_entries:20000");
    refused("const_ternary_entries:65537", "over the `const_entries` budget (limit 65536)");
}

#[test]
fn huge_parsers_are_refused() {
    refused("parser_state_chain:100000", "over the `parser_states` budget");
    refused("select_cases:100000", "over the `select_cases` budget");
}

#[test]
fn huge_table_counts_are_refused() {
    refused("tables:100000", "over the `source_bytes` budget");
    refused("tables:1025", "over the `tables` budget (limit 1024)");
}

#[test]
fn constant_division_by_zero_is_refused_at_the_operator() {
    for (op, what) in [("/", "division by zero"), ("%", "remainder by zero")] {
        let src =
            Program { body: &format!("hdr.h.a = hdr.h.b {op} 0;"), ..Default::default() }.text();
        let err = hotplane_p4::compile_source("div.p4", &src, &[]).unwrap_err().to_string();
        assert!(err.contains(what), "{op}: {err}");
        let line = src.lines().position(|l| l.contains(&format!("{op} 0"))).unwrap() + 1;
        let col = src.lines().nth(line - 1).unwrap().find(op).unwrap() + 1;
        assert!(err.starts_with(&format!("div.p4:{line}:{col}:")), "{op}: {err}");
        let folded =
            Program { body: &format!("hdr.h.a = 32w7 {op} (32w1 - 32w1);"), ..Default::default() }
                .text();
        let err = hotplane_p4::compile_source("div.p4", &folded, &[]).unwrap_err().to_string();
        assert!(err.contains(what), "{op} folded: {err}");
    }
}

/// The fuzz target's seeds, at and over each budget, each end in a result or an error.
#[test]
fn fuzz_seeds_end_in_a_result_or_an_error() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/p4_source");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("seed directory") {
        let path = entry.expect("seed").path();
        if let Err(e) = run_child(&format!("seed:{}", path.display()), CONTROL_STACK) {
            panic!("{e}");
        }
        seen += 1;
    }
    assert!(seen >= 10, "only {seen} seeds in {}", dir.display());
}

/// The `const_entries` budget on both sides of a small limit, in this process.
#[test]
fn const_entries_budget_refuses_one_entry_over_its_limit() {
    let limits = hotplane_p4::budget::Limits { const_entries: 10, ..Default::default() };
    let compile =
        |n| hotplane_p4::compile_source_with("c.p4", &const_ternary_entries(n), &[], &limits);
    assert!(compile(10).is_ok());
    let err = compile(11).unwrap_err().to_string();
    assert!(err.contains("over the `const_entries` budget (limit 10)"), "{err}");
}
