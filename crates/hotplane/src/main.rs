//! The `hotplane` command line.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use hotplane::cli;
use std::path::PathBuf;

mod process;

#[derive(Parser)]
#[command(
    name = "hotplane",
    version,
    about = "A software data plane whose code is replaced while packets flow"
)]
struct Cli {
    /// The control socket of the running data plane, for every command that talks to one
    /// [default: $HOTPLANE_SOCKET, else where `socket = true` puts it: /run/hotplane/hotplane.sock
    /// as root, $XDG_RUNTIME_DIR/hotplane/hotplane.sock otherwise]. `--json` and
    /// `--key-file FILE` may come here too, for the commands that take them.
    #[arg(long, global = true, value_name = "SOCKET")]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the data plane described by a TOML config.
    #[command(after_help = "Examples:\n  \
        hotplane run --config node.toml --stats-every 1\n  \
        hotplane run --p4 basic.p4 --entries s1-runtime.json -i 1@veth1 -i 2@veth2")]
    Run {
        /// The data plane's TOML config (docs/config.md).
        #[arg(long, short, required_unless_present = "p4", conflicts_with = "p4")]
        config: Option<PathBuf>,
        /// Instead of a config: a switch in one line running this P4 program, its ports
        /// given by `-i PORT@IFACE` (BMv2's numbering).
        #[arg(long, value_name = "PROGRAM.p4")]
        p4: Option<PathBuf>,
        /// Table entries for `--p4` (runtime JSON, the tutorials' sN-runtime.json).
        #[arg(long, requires = "p4")]
        entries: Option<PathBuf>,
        /// `--p4`'s ports: P4 port number @ interface, as simple_switch's `-i 1@veth1`.
        #[arg(short = 'i', long = "interface", value_name = "PORT@IFACE", requires = "p4")]
        interfaces: Vec<String>,
        /// `--p4`'s port kind: afpacket or afxdp.
        #[arg(long, default_value = "afpacket", requires = "p4")]
        port_kind: String,
        /// Print final counters as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// Print a stats line every N seconds (0: never).
        #[arg(long, default_value_t = 0)]
        stats_every: u64,
        /// Keep running after finite inputs are exhausted.
        #[arg(long)]
        keep_running: bool,
        /// Serve P4Runtime on this address (loopback, e.g. 127.0.0.1:9559); `[p4runtime]` in
        /// the config sets the rest (docs/p4runtime.md).
        #[arg(long, value_name = "ADDR")]
        p4runtime: Option<std::net::SocketAddr>,
    },
    /// Two flows, one function each; flow 1's is replaced by an authenticated in-band update.
    Demo {
        /// Directory for the plot.
        #[arg(long, default_value = ".")]
        out: PathBuf,
        /// Total packets per second of the two flows.
        #[arg(long, default_value_t = 100_000.0)]
        rate: f64,
        #[arg(long, default_value_t = 1000)]
        duration_ms: u64,
        #[arg(long)]
        json: bool,
    },
    /// Talk to a running data plane over its control socket.
    Push(Box<hotplane::push_cmd::PushArgs>),
    /// Generate stamped traffic out of an interface (or into a capture) and measure what comes
    /// back: throughput, loss, reordering, latency.
    Gen(Box<hotplane::gen::GenArgs>),
    /// Active packets (WASP): assemble, disassemble, check, run through simulated hops.
    Wasp {
        #[command(subcommand)]
        op: hotplane_wasp::tool::WaspCmd,
    },
    /// eBPF programs: assemble, disassemble, verify, run, conformance, maps, updates.
    Ebpf {
        #[command(subcommand)]
        op: EbpfCmd,
    },
    /// Lua flow functions: check, run, list, send as updates.
    #[cfg(feature = "lua")]
    Lua {
        #[command(subcommand)]
        op: LuaCmd,
    },
    /// A P4Runtime switch with simple_switch_grpc's command line (`-i PORT@IFACE`,
    /// `--device-id`, `--no-p4`, `-- --grpc-server-addr ADDR --cpu-port N`); also what the
    /// binary runs when called `simple_switch_grpc` (docs/p4runtime.md).
    #[cfg(feature = "p4runtime")]
    #[command(disable_help_flag = true)]
    Switch {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Compile with p4c's command line (`--p4runtime-files X.p4info.txtpb -o DIR X.p4`):
    /// writes the P4Info and the device config a controller sends; also what the binary runs
    /// when called `p4c` or `p4c-bm2-ss`.
    #[cfg(feature = "p4runtime")]
    #[command(disable_help_flag = true)]
    P4c {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// P4_16 (v1model) programs: check, run STF tests.
    #[cfg(feature = "p4")]
    P4 {
        #[command(subcommand)]
        op: P4Cmd,
    },
    /// Match-action tables of a running data plane, writable tables and a P4 program's by
    /// their P4 names: list, dump, add, modify, del, clear, default.
    Table {
        #[command(flatten)]
        common: hotplane::tables_cmd::Common,
        #[command(subcommand)]
        op: hotplane::tables_cmd::TableCmd,
    },
    /// simple_switch_CLI's commands against the running P4 program: tables, counters,
    /// registers, meters, multicast groups and mirroring sessions (`help` lists them). One
    /// command from the arguments (quote a line with `=>`: a shell reads its `>`), or one per
    /// line from --file or the standard input.
    #[command(after_help = "Examples:\n  \
        hotplane cli 'table_add ipv4_lpm ipv4_forward 10.0.1.1/32 => 08:00:00:00:01:11 1'\n  \
        hotplane cli register_read MyIngress.last_seen 3\n  \
        hotplane cli --file s1-commands.txt")]
    Cli {
        #[command(flatten)]
        common: hotplane::tables_cmd::Common,
        /// Commands, one per line (`-`: the standard input).
        #[arg(long, short)]
        file: Option<PathBuf>,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, conflicts_with = "file")]
        command: Vec<String>,
    },
    /// Follow packets through the running pipeline: per position the verdict, the output
    /// port, the header fields that changed, and a P4 program's table hits and actions.
    Trace(hotplane::trace_cmd::TraceArgs),
    /// Copy what passes a port or a position of the running data plane to a pcap file (or a
    /// line per frame), without stopping it.
    Capture(hotplane::capture_cmd::CaptureArgs),
    /// Run benchmarks; each prints one JSON object as its last line.
    Bench {
        #[command(subcommand)]
        which: BenchCmd,
    },
    /// Update keys: `hotplane key gen my.key` writes a new one.
    Key {
        #[command(subcommand)]
        op: KeyCmd,
    },
}

#[derive(Subcommand)]
enum KeyCmd {
    /// Write a new random key (64 hex digits, owner-only) and print how to use it, e.g.
    /// `hotplane key gen my.key --id 2`.
    Gen {
        file: PathBuf,
        /// The key id updates name it by (update headers carry it; 0 is unauthenticated).
        #[arg(long, default_value_t = 1)]
        id: u32,
        /// Replace an existing file.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Subcommand)]
enum EbpfCmd {
    /// Assemble ubpf-style text (the conformance suite's syntax) into bytecode.
    Asm {
        file: PathBuf,
        /// Output file (default: FILE with extension .bin).
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
    /// Print a program (bytecode, ELF object, C source or assembly) as text.
    Disasm {
        file: PathBuf,
        /// Program of an object (default: the first XDP program).
        #[arg(long)]
        program: Option<String>,
    },
    /// Verify a program as XDP (or, with --mem-len, on plain memory) without running it.
    Verify {
        /// ELF object (.o), C source (.c), assembly (.s) or raw bytecode.
        file: PathBuf,
        /// Program of an object (default: the first XDP program).
        #[arg(long)]
        program: Option<String>,
        /// Verify for r1 = N bytes of memory, r2 = N, instead of an XDP context.
        #[arg(long)]
        mem_len: Option<u64>,
        /// Print the verdict and load statistics as JSON.
        #[arg(long)]
        json: bool,
        /// Write the JIT's machine code to this file.
        #[arg(long)]
        jit_out: Option<PathBuf>,
    },
    /// Run a program once: on --mem (r1 = memory, r2 = length; prints r0), or as XDP on
    /// --packet (hex frame; default a 64-byte UDP frame; prints the action and the frame).
    Run {
        /// ELF object (.o), C source (.c), assembly (.s) or raw bytecode.
        file: PathBuf,
        /// Program of an object (default: the first XDP program).
        #[arg(long)]
        program: Option<String>,
        /// Memory as hex bytes (the conformance suite's environment).
        #[arg(long, conflicts_with = "packet")]
        mem: Option<String>,
        /// An Ethernet frame as hex bytes.
        #[arg(long)]
        packet: Option<String>,
        /// `jit` or `interp`.
        #[arg(long, default_value = "jit")]
        engine: hotplane_ebpf::program::Engine,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// What a program guarantees about the packets leaving each exit (docs/chain.md).
    Shape {
        file: PathBuf,
        #[arg(long)]
        section: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Specialise a downstream program to what an upstream passes, check it against the
    /// original, and print what was removed, the guard and the time (docs/chain.md).
    Chain {
        /// `UP DOWN`: the upstream (its pass exit's guarantee is assumed) and the downstream to
        /// specialise; or `DOWN` alone with `--assume`.
        #[arg(num_args = 1..=2, required = true)]
        programs: Vec<PathBuf>,
        /// A shape to assume instead of (or when no) upstream: `hotplane ebpf shape --json`
        /// output or one shape's JSON.
        #[arg(long)]
        assume: Option<PathBuf>,
        /// `guarded` (every fact used is checked per packet) or `trusted` (only the length).
        #[arg(long, default_value = "guarded")]
        mode: hotplane_ebpf::chain::Mode,
        /// Packets per set for the differential check (0: no check).
        #[arg(long, default_value_t = 3000)]
        check: usize,
        /// Write the specialised bytecode here (if it passed the check).
        #[arg(long, short = 'o')]
        out: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Run the eBPF conformance suite (default: ../shared/conformance/ebpf/tests).
    Conformance {
        /// Directory of `.data` tests.
        dir: Option<PathBuf>,
        /// `jit` or `interp`.
        #[arg(long, default_value = "jit")]
        engine: hotplane_ebpf::program::Engine,
        /// Print {"passed","failed","skipped","failures"} as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The eBPF programs of a running data plane, as bpftool lists the kernel's: list, show,
    /// dump xlated|jited.
    #[command(after_help = "Examples:\n  \
        hotplane ebpf prog list\n  \
        hotplane ebpf prog dump xlated pre")]
    Prog {
        /// Print the data plane's answer as JSON.
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        op: hotplane::ebpf_cmd::ProgCmd,
    },
    /// Read and write the maps of a running data plane.
    Map {
        /// The data plane's answer as JSON, as it gave it (hex bytes beside `formatted`),
        /// instead of tables and lines for people.
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        op: MapCmd,
    },
    /// Install a program file as an authenticated update (ELF: kind ebpf-elf, C: ebpf-c,
    /// assembly or bytecode: ebpf-bytecode).
    Update {
        file: PathBuf,
        /// pre, mid, post, extern:NAME, flow:SELECTOR, flow:default.
        #[arg(long)]
        target: String,
        /// all or a worker index.
        #[arg(long, default_value = "all")]
        worker: String,
        #[arg(long, default_value_t = 1)]
        key_id: u32,
        /// File holding the 64-hex-digit key.
        #[arg(long)]
        key_file: PathBuf,
        /// The acknowledgements as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// JIT switch and optimisation level of a Lua function.
#[cfg(feature = "lua")]
#[derive(clap::Args)]
struct LuaOpts {
    /// Run in LuaJIT's interpreter only.
    #[arg(long)]
    no_jit: bool,
    /// LuaJIT optimisation level, 0..3.
    #[arg(long, default_value_t = 3)]
    opt: u8,
}

#[cfg(feature = "lua")]
impl LuaOpts {
    fn get(&self) -> hotplane_lua::FunctionOpts {
        hotplane_lua::FunctionOpts { jit: !self.no_jit, opt_level: self.opt }
    }
}

#[cfg(feature = "p4")]
#[derive(Subcommand)]
enum P4Cmd {
    /// Compile a program; list its tables and externs.
    Check {
        program: PathBuf,
        /// Further directories to search for #include files.
        #[arg(long = "include", short = 'I')]
        include: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
        /// A budget other than its default, as a node's `[p4.limits]` sets it (`tables=64`);
        /// repeatable.
        #[arg(long = "limit", value_name = "KEY=VALUE")]
        limits: Vec<String>,
    },
    /// Write the program's P4Info (protobuf text format, p4c's ids) to stdout or --out.
    Info {
        program: PathBuf,
        #[arg(long = "include", short = 'I')]
        include: Vec<PathBuf>,
        /// Write here instead of stdout (e.g. basic.p4info.txt).
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
    /// Run a p4c Simple Test Framework file against a program; exit 0 when it passes.
    Stf {
        program: PathBuf,
        stf: PathBuf,
        #[arg(long = "include", short = 'I')]
        include: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

#[cfg(feature = "lua")]
#[derive(Subcommand)]
enum LuaCmd {
    /// Compile a function file as the data plane would; report errors, sizes and compile time.
    Check {
        file: PathBuf,
        #[command(flatten)]
        opts: LuaOpts,
        #[arg(long)]
        json: bool,
    },
    /// Run a function once on --packet (hex frame; default a 64-byte UDP frame).
    Run {
        file: PathBuf,
        #[command(flatten)]
        opts: LuaOpts,
        #[arg(long)]
        packet: Option<String>,
        /// The result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The functions installed in a running data plane, with packets, errors and runaways.
    List {
        /// The data plane's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Send a function file as an authenticated update (kind lua).
    Update {
        file: PathBuf,
        /// flow:SELECTOR, flow:default, pre, mid, post or extern:NAME.
        #[arg(long)]
        target: String,
        /// all or a worker index.
        #[arg(long, default_value = "all")]
        worker: String,
        #[command(flatten)]
        opts: LuaOpts,
        #[arg(long, default_value_t = 1)]
        key_id: u32,
        /// File holding the 64-hex-digit key.
        #[arg(long)]
        key_file: PathBuf,
        /// The acknowledgements as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum MapCmd {
    /// Every map with its kind, shape and entries in use.
    List,
    /// Every entry of a map (program/map, e.g. xdp_count/proto_count).
    Dump { map: String },
    /// Write one entry: KEY and VALUE as 0x-prefixed hex bytes (0x0a000064) or a decimal number
    /// (little-endian, the key or value size wide).
    Update {
        map: String,
        key: String,
        value: String,
        /// 0 any, 1 only new keys, 2 only existing keys.
        #[arg(long, default_value_t = 0)]
        flags: u64,
    },
    /// Delete one entry.
    Delete { map: String, key: String },
    /// One entry's value (KEY as for update).
    Lookup { map: String, key: String },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Lua dynamic update (libmoon's experiment): two flows, batch 1; after --before packets an
    /// in-band update replaces flow 1's function; 1 and 2 workers, JIT on and off. Writes
    /// lua-dyn.csv and lua-dyn.png to --out.
    #[cfg(feature = "lua")]
    LuaDyn {
        #[arg(long)]
        json: bool,
        #[arg(long, default_value_t = 50_000)]
        before: u64,
        #[arg(long, default_value_t = 200_000)]
        after: u64,
        /// Total packets per second of the two flows.
        #[arg(long, default_value_t = 500_000.0)]
        rate: f64,
        /// Directory for the CSV and the plot.
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
    /// A P4 program as the `pre` stage on mem ports (pre-built 64-byte frames), next to l2fwd
    /// on the same ports in the same run.
    #[cfg(feature = "p4")]
    P4(hotplane::bench::p4::Opts),
    /// Table writes through the P4Runtime server (batches of 1, 100, 1000), the latency until
    /// the data plane uses a written entry, and a read of every entry, while packets flow;
    /// next to the control API in the same run.
    #[cfg(feature = "p4runtime")]
    P4runtime(hotplane::bench::p4runtime::Opts),
    /// Writable tables: in-place read-modify-write (swap action) over table sizes, static and
    /// dynamic storage, locked and unlocked, 1 and 2 workers; digest / change / pointer update
    /// methods; LPM and ternary lookup times. Writes tables.csv and tables.png to --out.
    Tables(hotplane::bench::tables::Opts),
    /// Active packets (WASP): every application per packet next to native Rust and an eBPF
    /// `count`; the store at scale; colliding keys; time against code length; added latency.
    Wasp(hotplane::bench::wasp::Opts),
    /// Chain optimisation: the seed's firewall -> load balancer, sizes, optimisation time, and
    /// per packet original / guarded / trusted in the JIT and the interpreter (docs/chain.md).
    Chain(hotplane::bench::chain::Opts),
    /// Active packets across namespaces (root): 4 hotplane routers and a Linux one, every
    /// application checked; a table, a picture of the topology with the results, JSON.
    WaspNet(hotplane::bench::wasp_net::Opts),
    /// Lua: per-packet time of a flow function writing a payload field, batch mode, next to
    /// the same function in native Rust and plain LuaJIT on raw pointers.
    #[cfg(feature = "lua")]
    Lua {
        #[arg(long)]
        json: bool,
        #[arg(long, default_value_t = 20_000_000)]
        packets: u64,
        #[arg(long, default_value_t = 32)]
        batch: usize,
        /// Measurements per runner; the median is reported.
        #[arg(long, default_value_t = 3)]
        repeat: u32,
        /// Core to pin to.
        #[arg(long, default_value_t = 1)]
        core: usize,
    },
    /// eBPF: per-packet time of five clang-built XDP programs on the interpreter and the JIT,
    /// next to the kernel (BPF_PROG_TEST_RUN) and rbpf's JIT; update latency at each position.
    Ebpf {
        #[arg(long)]
        json: bool,
        /// Packets per runner and measurement (the kernel's repeat count).
        #[arg(long, default_value_t = 2_000_000)]
        packets: u64,
        /// Measurements per runner; the median is reported.
        #[arg(long, default_value_t = 3)]
        repeat: u32,
        /// Updates per position and form (bytecode, ELF).
        #[arg(long, default_value_t = 200)]
        updates: u32,
        /// Core for the execution measurements.
        #[arg(long, default_value_t = 1)]
        core: usize,
        /// Skip the kernel anchor (it needs root).
        #[arg(long)]
        no_kernel: bool,
        /// Skip the rbpf anchor.
        #[arg(long)]
        no_rbpf: bool,
    },
    /// l2fwd on mem ports, one worker, next to DPDK testpmd macswap on null ports.
    Pipeline {
        #[arg(long)]
        json: bool,
        /// Packets to forward in the measured interval.
        #[arg(long, default_value_t = 50_000_000)]
        packets: u64,
        #[arg(long, default_value_t = 32)]
        batch: usize,
        /// Core to pin the worker (and testpmd's forwarding lcore) to.
        #[arg(long, default_value_t = 1)]
        core: usize,
        /// Skip the testpmd anchor.
        #[arg(long)]
        no_testpmd: bool,
    },
    /// Replace flow 1's function and the `pre` program 1000 times each under full load.
    Swap {
        #[arg(long)]
        json: bool,
        /// Replacements of each of the two targets.
        #[arg(long, default_value_t = 1000)]
        swaps: u32,
        #[arg(long, default_value_t = 2)]
        workers: usize,
    },
    /// Zero-loss forwarding rate between veths in network namespaces (needs root), next to a
    /// kernel bridge between the same veths.
    Veth {
        #[arg(long)]
        json: bool,
        /// Port kind of the data plane: afxdp or afpacket.
        #[arg(long, default_value = "afxdp")]
        port: hotplane::gen::IfKind,
        /// Port kind of the generator and receiver.
        #[arg(long, default_value = "afxdp")]
        gen_port: hotplane::gen::IfKind,
        /// Milliseconds per trial.
        #[arg(long, default_value_t = 1000)]
        trial_ms: u64,
        /// Bisection steps of the zero-loss search.
        #[arg(long, default_value_t = 7)]
        steps: u32,
        /// Searches per side; the median is reported (this machine class is noisy).
        #[arg(long, default_value_t = 1)]
        repeat: u32,
        /// Skip the kernel-bridge anchor.
        #[arg(long)]
        no_kernel: bool,
    },
}

fn main() {
    // `hotplane p4 info x.p4 | head` should end quietly when the reader goes away, as other
    // command-line tools do, rather than panic on the failed write.
    // SAFETY: called before any thread starts; SIG_DFL is a valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            // HOTPLANE_LOG, else the RUST_LOG Rust users reach for, else warnings only.
            tracing_subscriber::EnvFilter::try_from_env("HOTPLANE_LOG")
                .or_else(|_| tracing_subscriber::EnvFilter::try_from_env("RUST_LOG"))
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    process::quiet_panics();
    // Called by another tool's name (a link: `simple_switch_grpc`, `p4c`), it is that tool.
    #[cfg(feature = "p4runtime")]
    if let Some(tool) = as_other_tool() {
        if let Err(e) = tool {
            eprintln!("hotplane: error: {e:#}");
            std::process::exit(1);
        }
        return;
    }
    let command = hotplane::examples::with_examples(Cli::command());
    let args = cli::hoist_shared_options(std::env::args_os(), &command);
    let parsed = command
        .try_get_matches_from(args)
        .and_then(|m| Cli::from_arg_matches(&m))
        .unwrap_or_else(|e| e.exit());
    if let Err(e) = dispatch(parsed) {
        eprintln!("hotplane: error: {e:#}");
        std::process::exit(1);
    }
}

/// Run as the tool the binary was called as, if it was called by another tool's name:
/// `simple_switch_grpc` (or any name containing `grpc`, as the Mininet glue asks, but not
/// `hotplane...`), `p4c` or `p4c-...`.
#[cfg(feature = "p4runtime")]
fn as_other_tool() -> Option<anyhow::Result<()>> {
    let argv0 = std::env::args_os().next()?;
    let name = std::path::Path::new(&argv0).file_name()?.to_str()?.to_string();
    let switch = name.starts_with("simple_switch")
        || (name.contains("grpc") && !name.starts_with("hotplane"));
    let p4c = name == "p4c" || name.starts_with("p4c-");
    if !switch && !p4c {
        return None;
    }
    let rest: Result<Vec<String>, _> =
        std::env::args_os().skip(1).map(|a| a.into_string()).collect();
    let Ok(rest) = rest else {
        return Some(Err(anyhow::anyhow!("{name}: an argument is not valid UTF-8")));
    };
    Some(if switch {
        process::exit_guard().and_then(|()| hotplane::switch_cmd::main(&rest))
    } else {
        hotplane::p4c_cmd::main(&rest)
    })
}

fn dispatch(cli: Cli) -> anyhow::Result<()> {
    if cli.socket.is_some() && matches!(cli.cmd, Cmd::Run { .. } | Cmd::Demo { .. }) {
        anyhow::bail!("--socket names the socket of a running data plane; `hotplane run` takes its own from [control] socket in the config");
    }
    let socket = cli.socket.unwrap_or_else(cli::default_socket);
    match cli.cmd {
        #[cfg(feature = "p4runtime")]
        Cmd::Switch { args } => {
            process::exit_guard()?;
            hotplane::switch_cmd::main(&args)
        }
        #[cfg(feature = "p4runtime")]
        Cmd::P4c { args } => hotplane::p4c_cmd::main(&args),
        Cmd::Run {
            config,
            p4,
            entries,
            interfaces,
            port_kind,
            json,
            stats_every,
            keep_running,
            p4runtime,
        } => {
            process::exit_guard()?;
            match (config, p4) {
                (Some(config), _) => cli::run(&config, json, stats_every, keep_running, p4runtime),
                (None, Some(p4)) => {
                    let one = cli::OneLine { p4, entries, interfaces, port_kind };
                    let cfg = cli::one_line_config(&one)?;
                    cli::run_config(cfg, json, stats_every, true, p4runtime)
                }
                (None, None) => anyhow::bail!("give --config FILE or --p4 PROGRAM"),
            }
        }
        Cmd::Demo { out, rate, duration_ms, json } => {
            hotplane::demo::run(&hotplane::demo::Opts { out, rate_pps: rate, duration_ms, json })
                .map(drop)
        }
        Cmd::Push(mut args) => {
            args.socket = socket;
            hotplane::push_cmd::run(*args)
        }
        Cmd::Gen(a) => {
            let json = a.json;
            let out = hotplane::gen::run(&a.opts()?)?;
            if json {
                println!("{out}");
            }
            Ok(())
        }
        Cmd::Ebpf { op } => ebpf(op, socket),
        Cmd::Wasp { op } => Ok(hotplane_wasp::tool::run(op)?),
        #[cfg(feature = "lua")]
        Cmd::Lua { op } => lua(op, socket),
        #[cfg(feature = "p4")]
        Cmd::P4 { op } => match op {
            P4Cmd::Check { program, include, json, limits } => {
                let limits = hotplane::p4_cmd::limits(&limits)?;
                hotplane::p4_cmd::check(&program, &include, json, &limits)
            }
            P4Cmd::Info { program, include, out } => {
                hotplane::p4_cmd::info(&program, &include, out.as_deref())
            }
            P4Cmd::Stf { program, stf, include, json } => {
                hotplane::p4_cmd::stf(&program, &stf, &include, json)
            }
        },
        Cmd::Key { op: KeyCmd::Gen { file, id, force } } => {
            hotplane::key_cmd::gen(&file, id, force)
        }
        Cmd::Table { mut common, op } => {
            common.socket = socket;
            hotplane::tables_cmd::table(&common, op)
        }
        Cmd::Trace(a) => hotplane::trace_cmd::run(&a, &socket),
        Cmd::Capture(a) => hotplane::capture_cmd::run(&a, &socket),
        Cmd::Cli { mut common, file, command } => {
            common.socket = socket;
            hotplane::tables_cmd::cli(&common, &command, file.as_deref())
        }
        Cmd::Bench { which } => match which {
            #[cfg(feature = "lua")]
            BenchCmd::LuaDyn { json, before, after, rate, out } => {
                hotplane::bench::lua_dyn::run(&hotplane::bench::lua_dyn::Opts {
                    before,
                    after,
                    rate_pps: rate,
                    out,
                    json,
                })
            }
            #[cfg(feature = "p4")]
            BenchCmd::P4(o) => hotplane::bench::p4::run(&o),
            #[cfg(feature = "p4runtime")]
            BenchCmd::P4runtime(o) => hotplane::bench::p4runtime::run(&o),
            BenchCmd::Tables(o) => hotplane::bench::tables::run(&o),
            BenchCmd::Wasp(o) => hotplane::bench::wasp::run(&o),
            BenchCmd::Chain(o) => hotplane::bench::chain::run(&o),
            BenchCmd::WaspNet(o) => hotplane::bench::wasp_net::run(&o),
            #[cfg(feature = "lua")]
            BenchCmd::Lua { json, packets, batch, repeat, core } => {
                hotplane::bench::lua::run(&hotplane::bench::lua::Opts {
                    packets,
                    batch,
                    repeat,
                    core,
                    json,
                })
            }
            BenchCmd::Pipeline { json, packets, batch, core, no_testpmd } => {
                hotplane::bench::pipeline::run(&hotplane::bench::pipeline::Opts {
                    packets,
                    batch,
                    core,
                    testpmd: !no_testpmd,
                    json,
                })
            }
            BenchCmd::Ebpf { json, packets, repeat, updates, core, no_kernel, no_rbpf } => {
                hotplane::bench::ebpf::run(&hotplane::bench::ebpf::Opts {
                    packets,
                    repeat: repeat.max(1),
                    updates,
                    core,
                    kernel: !no_kernel,
                    rbpf: !no_rbpf,
                    json,
                })
            }
            BenchCmd::Swap { json, swaps, workers } => {
                hotplane::bench::swap::run(&hotplane::bench::swap::Opts { swaps, workers, json })
            }
            BenchCmd::Veth { json, port, gen_port, trial_ms, steps, repeat, no_kernel } => {
                hotplane::bench::veth::run(&hotplane::bench::veth::Opts {
                    port,
                    repeat,
                    gen_port,
                    trial_ms,
                    steps,
                    kernel: !no_kernel,
                    json,
                })
            }
        },
    }
}

fn ebpf(op: EbpfCmd, socket: PathBuf) -> anyhow::Result<()> {
    use hotplane::ebpf_cmd::{self as e, Ctx, MapOp};
    match op {
        EbpfCmd::Asm { file, out } => e::assemble(&file, out.as_deref()),
        EbpfCmd::Disasm { file, program } => e::disassemble(&file, program.as_deref()),
        EbpfCmd::Verify { file, program, mem_len, json, jit_out } => {
            let ctx = mem_len.map_or(Ctx::Xdp, Ctx::Mem);
            e::verify(&file, program.as_deref(), ctx, json, jit_out.as_deref())
        }
        EbpfCmd::Run { file, program, mem, packet, engine, json } => {
            e::run(&file, program.as_deref(), mem.as_deref(), packet.as_deref(), engine, json)
        }
        EbpfCmd::Shape { file, section, json } => e::shape(&file, section.as_deref(), json),
        EbpfCmd::Chain { programs, assume, mode, check, out, json } => {
            let (up, down) = match programs.as_slice() {
                [up, down] => (Some(up.clone()), down.clone()),
                [down] => (None, down.clone()),
                _ => anyhow::bail!("give UP.o DOWN.o, or DOWN.o --assume SHAPE.json"),
            };
            let opts = hotplane_ebpf::chain::ChainOptions {
                mode,
                check_packets: check,
                ..Default::default()
            };
            e::chain(up.as_deref(), &down, assume.as_deref(), &opts, out.as_deref(), json)
        }
        EbpfCmd::Conformance { dir, engine, json } => e::conformance(dir.as_deref(), engine, json),
        EbpfCmd::Map { op, json } => e::map(
            &socket,
            json,
            match op {
                MapCmd::List => MapOp::List,
                MapCmd::Dump { map } => MapOp::Dump { map },
                MapCmd::Update { map, key, value, flags } => {
                    MapOp::Update { map, key, value, flags }
                }
                MapCmd::Delete { map, key } => MapOp::Delete { map, key },
                MapCmd::Lookup { map, key } => MapOp::Lookup { map, key },
            },
        ),
        EbpfCmd::Prog { json, op, .. } => e::prog(&socket, json, op),
        EbpfCmd::Update { file, target, worker, key_id, key_file, json } => {
            let text = std::fs::read_to_string(&key_file)
                .map_err(|err| anyhow::anyhow!("--key-file {}: {err}", key_file.display()))?;
            let key = hotplane_control::parse_key(&text).map_err(anyhow::Error::msg)?;
            e::update(&e::UpdateOpts { file, target, worker, key_id, key, socket, json })
        }
    }
}

#[cfg(feature = "lua")]
fn lua(op: LuaCmd, socket: PathBuf) -> anyhow::Result<()> {
    use hotplane::lua_cmd as l;
    match op {
        LuaCmd::Check { file, opts, json } => l::check(&file, opts.get(), json),
        LuaCmd::Run { file, opts, packet, json } => {
            l::run(&file, opts.get(), packet.as_deref(), json)
        }
        LuaCmd::List { json } => l::list(&socket, json),
        LuaCmd::Update { file, target, worker, opts, key_id, key_file, json } => {
            let text = std::fs::read_to_string(&key_file)
                .map_err(|err| anyhow::anyhow!("--key-file {}: {err}", key_file.display()))?;
            let key = hotplane_control::parse_key(&text).map_err(anyhow::Error::msg)?;
            l::update(&l::UpdateOpts {
                file,
                target,
                worker,
                opts: opts.get(),
                key_id,
                key,
                socket,
                json,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every command's `--help` ends with an example (`hotplane::examples`).
    #[test]
    fn every_command_has_an_example_in_its_help() {
        let cli = hotplane::examples::with_examples(Cli::command());
        let mut missing = Vec::new();
        hotplane::examples::without_examples(&cli, "", &mut missing);
        assert!(missing.is_empty(), "commands without an example: {missing:?}");
    }
}
