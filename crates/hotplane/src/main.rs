//! The `hotplane` command line.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "hotplane",
    version,
    about = "A software data plane whose code is replaced while packets flow"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run benchmarks; each prints one JSON object as its last line.
    Bench {
        #[command(subcommand)]
        which: BenchCmd,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
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
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HOTPLANE_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Bench { which } => match which {
            BenchCmd::Pipeline { json, packets, batch, core, no_testpmd } => {
                hotplane::bench::pipeline::run(&hotplane::bench::pipeline::Opts {
                    packets,
                    batch,
                    core,
                    testpmd: !no_testpmd,
                    json,
                })
            }
            BenchCmd::Swap { json, swaps, workers } => {
                hotplane::bench::swap::run(&hotplane::bench::swap::Opts { swaps, workers, json })
            }
        },
    }
}
