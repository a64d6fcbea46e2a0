//! `hotplane trace`: follow packets of a running data plane through its positions and print,
//! per packet and position, the verdict, the output port, the header fields that changed and
//! what the stage explains (a P4 program's table hits and actions). The data plane pays for
//! it only while a trace runs (`docs/observability.md`).

use anyhow::bail;
use hotplane_control::api::{Client, Request};
use serde_json::Value;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    hotplane trace --match dst=10.0.1.4 --count 1\n  \
    hotplane trace --match proto=udp,dport=5000 --every 1000 --count 5 --json")]
pub struct TraceArgs {
    /// Which packets: a flow selector (`proto=udp,src=10.0.0.0/8,dst=10.0.1.4,dport=5000`);
    /// default every packet.
    #[arg(long = "match", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Packets to follow.
    #[arg(long, short = 'n', default_value_t = 10)]
    pub count: u64,
    /// Follow one matching packet in N (a sample of heavy traffic).
    #[arg(long, default_value_t = 1)]
    pub every: u64,
    /// Stop after this many seconds even if fewer packets came (0: no limit).
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
    /// One JSON object per packet.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &TraceArgs, socket: &std::path::Path) -> anyhow::Result<()> {
    if a.count == 0 {
        bail!("--count: follow at least one packet");
    }
    if !(a.timeout >= 0.0 && a.timeout.is_finite()) {
        bail!("--timeout: a number of seconds, 0 for no limit");
    }
    let mut client = Client::connect(socket)?;
    let following = client.call(&Request::TraceStart {
        selector: a.selector.clone(),
        count: a.count,
        every: a.every,
    })?;
    let want = following["following"].as_u64().unwrap_or(a.count);
    let started = Instant::now();
    let (mut shown, mut lost) = (0u64, 0u64);
    while shown + lost < want {
        let answer = client.call(&Request::TraceRead { max: None })?;
        let ports: Vec<String> = answer["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| p.as_str().unwrap_or("?").to_string())
            .collect();
        lost = answer["lost"].as_u64().unwrap_or(0);
        let records = answer["records"].as_array().cloned().unwrap_or_default();
        for r in &records {
            shown += 1;
            if a.json {
                println!("{r}");
            } else {
                print!("{}", describe(shown, r, &ports));
            }
        }
        if a.timeout > 0.0 && started.elapsed() >= Duration::from_secs_f64(a.timeout) {
            break;
        }
        if records.is_empty() {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    client.call(&Request::TraceStop {})?;
    if lost > 0 {
        eprintln!("hotplane trace: {lost} record(s) lost (read too slowly)");
    }
    if shown < want {
        eprintln!(
            "hotplane trace: {shown} of {want} packet(s) in {:.1} s{}",
            started.elapsed().as_secs_f64(),
            if a.selector.is_some() { " (does --match select the traffic?)" } else { "" }
        );
    }
    Ok(())
}

/// A record for people: the packet, then one line per position with its notes and changes.
pub fn describe(n: u64, r: &Value, ports: &[String]) -> String {
    let port = |v: &Value| match v.as_u64() {
        Some(i) if i == u64::from(hotplane_core::NO_PORT) => "no port".to_string(),
        Some(i) => ports.get(i as usize).cloned().unwrap_or_else(|| format!("#{i}")),
        None => "?".to_string(),
    };
    let mut out = format!(
        "#{n} in {} ({} bytes, worker {}): {}\n",
        port(&r["in_port"]),
        r["bytes"],
        r["worker"],
        r["flow"].as_str().unwrap_or("?")
    );
    for s in r["stages"].as_array().into_iter().flatten() {
        let verdict = s["verdict"].as_str().unwrap_or("?");
        let to = match verdict {
            "pass" | "tx" => format!(" (out port {})", port(&s["out_port"])),
            _ => String::new(),
        };
        out.push_str(&format!(
            "  {:<5} {}: {verdict}{to}\n",
            s["position"].as_str().unwrap_or("?"),
            s["program"].as_str().unwrap_or("?")
        ));
        for line in s["notes"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(s["changed"].as_array().into_iter().flatten())
        {
            out.push_str(&format!("        {}\n", line.as_str().unwrap_or("?")));
        }
    }
    let end = match r["verdict"].as_str().unwrap_or("?") {
        "drop" => "dropped".to_string(),
        "punt" => "handed to the control thread".to_string(),
        _ => format!("sent to {}", port(&r["out_port"])),
    };
    out.push_str(&format!("  => {end}\n"));
    out
}
