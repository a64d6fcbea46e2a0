//! `hotplane capture`: copy what passes one point of a running data plane (a port's receive or
//! transmit side, the output of a position, or what the pipeline drops) into a pcap file, or
//! print a line per frame as tcpdump does, without stopping the data plane. The data plane
//! pays for it only while a capture runs (`docs/observability.md`).

use anyhow::Context;
use hotplane_control::api::{Client, Request};
use hotplane_core::{classify, Meta};
use hotplane_io::pcap::format::CaptureWriter;
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    hotplane capture --port p0 --count 100 -w p0.pcap\n  \
    hotplane capture --point drop --count 5\n  \
    hotplane capture --point tx --port 2 --match proto=udp,dport=5000 -w - | tshark -r -")]
pub struct CaptureArgs {
    /// Where: `rx` (as packets arrive), `tx` (as they leave, replicas included), `drop` (what
    /// the pipeline drops), or what a position passes on: `pre`, `flows`, `mid`, `post`.
    #[arg(long, default_value = "rx")]
    pub point: String,
    /// Only this port (a name from the config, or its number): the one packets arrive on, or
    /// leave by at `tx`.
    #[arg(long, short = 'i')]
    pub port: Option<String>,
    /// Only packets this flow selector matches (`proto=udp,dst=10.0.1.4,dport=5000`).
    #[arg(long = "match", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Frames to copy, then stop (0: until Ctrl-C or --duration).
    #[arg(long, short = 'c', default_value_t = 0)]
    pub count: u64,
    /// Stop after this many seconds (0: no limit).
    #[arg(long, default_value_t = 0.0)]
    pub duration: f64,
    /// Bytes kept of each frame.
    #[arg(long, short = 's', default_value_t = 65535)]
    pub snaplen: u32,
    /// Write a pcap file (nanosecond timestamps); `-` writes it to stdout.
    #[arg(long, short = 'w', value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// Without --write: one JSON object per frame instead of a line.
    #[arg(long)]
    pub json: bool,
}

/// Where captured frames go.
enum Sink {
    Pcap(CaptureWriter<Box<dyn Write>>),
    Lines { json: bool, first_ns: Option<u64>, point: String },
}

pub fn run(a: &CaptureArgs, socket: &std::path::Path) -> anyhow::Result<()> {
    let limit = match a.duration {
        0.0 => None,
        d => Some(
            Duration::try_from_secs_f64(d)
                .map_err(|_| anyhow::anyhow!("--duration: a number of seconds, 0 for no limit"))?,
        ),
    };
    let mut client = Client::connect(socket)?;
    let started = client.call(&Request::CaptureStart {
        point: a.point.clone(),
        port: a.port.clone(),
        selector: a.selector.clone(),
        count: a.count,
        snaplen: Some(a.snaplen),
    })?;
    let id = started["id"].as_u64();
    // Whatever happens from here, the capture is stopped (the node also stops one nobody
    // reads for 2 s).
    let copied = copy_frames(a, &mut client, id, limit);
    let stopped = client.call(&Request::CaptureStop { id });
    let (copied, lost, mut sink) = copied?;
    stopped?;
    sink.flush()?;
    let to_stdout = matches!(&a.write, Some(p) if p.as_os_str() == "-");
    if !to_stdout {
        let file = a.write.as_ref().map(|p| format!(" to {}", p.display())).unwrap_or_default();
        eprintln!("hotplane capture: {copied} frame(s) copied{file}");
    }
    if lost > 0 {
        eprintln!(
            "hotplane capture: {lost} frame(s) lost: the data plane copied faster than this \
             reader took them (narrow it with --match or --port)"
        );
    }
    Ok(())
}

/// Read frames into the sink until the count is reached, the time is up or a signal came;
/// returns the frames copied, those lost, and the sink.
fn copy_frames(
    a: &CaptureArgs,
    client: &mut Client,
    id: Option<u64>,
    limit: Option<Duration>,
) -> anyhow::Result<(u64, u64, Sink)> {
    // The file is made only once the node took the capture: a refused one leaves it alone.
    let mut sink = match &a.write {
        Some(path) => {
            let out: Box<dyn Write> = if path.as_os_str() == "-" {
                Box::new(std::io::BufWriter::new(std::io::stdout()))
            } else {
                let file = std::fs::File::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?;
                Box::new(std::io::BufWriter::new(file))
            };
            Sink::Pcap(CaptureWriter::new(out, a.snaplen)?)
        }
        None => Sink::Lines { json: a.json, first_ns: None, point: a.point.clone() },
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    if !matches!(&a.write, Some(p) if p.as_os_str() == "-") {
        let what = if a.count == 0 { "frames".to_string() } else { format!("{} frames", a.count) };
        eprintln!(
            "hotplane capture: copying {what} at {}{} (Ctrl-C stops)",
            a.point,
            a.port.as_ref().map(|p| format!(" of port {p}")).unwrap_or_default()
        );
    }
    let begun = Instant::now();
    let (mut copied, mut lost) = (0u64, 0u64);
    let mut ports: Vec<String> = Vec::new();
    let mut last_round = false;
    loop {
        let answer = client.call(&Request::CaptureRead { max: None, id })?;
        lost = answer["lost"].as_u64().unwrap_or(lost);
        if let Some(names) = answer["ports"].as_array() {
            ports = names.iter().map(|p| p.as_str().unwrap_or("?").to_string()).collect();
        }
        let frames = answer["frames"].as_array().cloned().unwrap_or_default();
        for f in &frames {
            copied += 1;
            sink.frame(f, &ports)?;
        }
        if last_round {
            break;
        }
        // Over: the count reached and every frame read; or the time, or a signal (then one
        // more read for frames copied meanwhile).
        if answer["expired"] == true {
            anyhow::bail!(
                "the capture stopped: this reader fell more than 2 s behind (the data plane \
                 stops a capture nobody reads; {copied} frame(s) were copied)"
            );
        }
        let over = answer["remaining"].as_u64() == Some(0) && frames.is_empty();
        let out_of_time = limit.is_some_and(|l| begun.elapsed() >= l);
        if over {
            break;
        }
        last_round = out_of_time || stop.load(Ordering::Relaxed);
        if frames.is_empty() && !last_round {
            sink.flush()?;
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok((copied, lost, sink))
}

impl Sink {
    fn frame(&mut self, f: &Value, ports: &[String]) -> anyhow::Result<()> {
        let data = hex::decode(f["data"].as_str().unwrap_or_default())
            .context("the data plane sent a frame that is not hex")?;
        let time_ns = f["time_ns"].as_u64().unwrap_or(0);
        let len = f["len"].as_u64().unwrap_or(data.len() as u64) as u32;
        match self {
            Sink::Pcap(w) => w.write_cut(time_ns, &data, len)?,
            Sink::Lines { json: true, .. } => println!("{f}"),
            Sink::Lines { json: false, first_ns, point } => {
                let first = *first_ns.get_or_insert(time_ns);
                let port = |key: &str| {
                    // Not a port (the controller's): a dash.
                    let i = f[key].as_u64().unwrap_or(u64::MAX) as usize;
                    ports.get(i).cloned().unwrap_or_else(|| "-".into())
                };
                // Where it goes is decided only once a position ran.
                let way = match point.as_str() {
                    "rx" => format!("{} in", port("in_port")),
                    "drop" => format!("{} -> drop", port("in_port")),
                    _ => format!("{} -> {}", port("in_port"), port("out_port")),
                };
                let flow = classify(&data, &mut Meta::default());
                println!(
                    "{:12.6}  {way}  {flow}  len {len}",
                    time_ns.saturating_sub(first) as f64 / 1e9,
                );
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Pcap(w) => w.flush(),
            Sink::Lines { .. } => std::io::stdout().flush(),
        }
    }
}
