//! `hotplane gen`'s command line: one stream from the flags, more from `--stream`, a pcap to
//! replay, and a rate sweep, made into [`GenOpts`].

use super::{GenOpts, IfKind, Iface};
use crate::cli;
use anyhow::{anyhow, bail};
use hotplane_io::mem::{check_rate, parse_tcp_flags, GenSpec, Proto, Vary, MAX_RATE, MIN_RATE};
use std::net::IpAddr;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    hotplane gen --interface veth0 --rx veth0 --rate 100000 --duration 5\n  \
    hotplane gen --interface veth0 --proto tcp --tcp-flags S --dst-port 80 --flows 16 --count 1000\n  \
    hotplane gen --interface veth0 --pcap trace.pcap --rate 1000\n  \
    hotplane gen --interface veth0 --rx veth1 --rates 10000,50000,100000 --step 2\n  \
    hotplane gen --interface veth0 --rate 1000 --stream proto=icmp,dst=10.0.2.2,rate=100\n  \
    hotplane gen --write out.pcap --count 100 --proto tcp")]
pub struct GenArgs {
    /// Send out of this interface.
    #[arg(long)]
    pub interface: Option<String>,
    /// Network namespace of --interface.
    #[arg(long)]
    pub netns: Option<String>,
    /// Port kind for the interfaces: afpacket or afxdp.
    #[arg(long, default_value = "afpacket")]
    pub port: IfKind,
    /// Receive returning packets on this interface (may equal --interface).
    #[arg(long)]
    pub rx: Option<String>,
    /// Network namespace of --rx (default: --netns).
    #[arg(long)]
    pub rx_netns: Option<String>,
    /// Write the packets to this pcap file instead of an interface.
    #[arg(long)]
    pub write: Option<PathBuf>,
    /// Only measure this capture: per-flow counts, missing packets, duplicates, reordering.
    #[arg(long)]
    pub read: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub flows: u32,
    /// Packets in all.
    #[arg(long)]
    pub count: Option<u64>,
    /// Seconds to send for.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Packets per second in all (software pacer); as fast as possible when absent.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Rate in Mbit/s of Ethernet frames (FCS included, preamble and gap not).
    #[arg(long, conflicts_with = "rate")]
    pub rate_mbps: Option<f64>,
    /// A rate sweep: packets per second, each held for --step seconds; prints what was sent
    /// and received at each.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["rate", "rate_mbps", "duration"])]
    pub rates: Vec<f64>,
    /// Seconds each rate of --rates is held.
    #[arg(long, default_value_t = 1.0, requires = "rates")]
    pub step: f64,
    /// Frame bytes (FCS not counted): 64 by default, or the smallest stamped frame the
    /// addresses and transport allow when larger (80 for UDP over IPv6).
    #[arg(long)]
    pub size: Option<u16>,
    /// Simple IMIX (64/594/1518 bytes, 7:4:1) instead of --size.
    #[arg(long)]
    pub imix: bool,
    /// Transport: udp, tcp or icmp (echo requests); the stamp is the payload of each.
    #[arg(long, default_value = "udp", value_parser = parse_proto)]
    pub proto: Proto,
    /// TCP flags as tcpdump writes them (S, SA, PA, F, R, . for none).
    #[arg(long, default_value = "S")]
    pub tcp_flags: String,
    /// Send the frames of this capture (pcap or pcapng; built with scapy's wrpcap, say) as they
    /// are, in order: once through, or cycling for --count/--duration. Not stamped: loss is
    /// counted, latency is not measured.
    #[arg(long, conflicts_with_all = ["imix", "size", "stream"])]
    pub pcap: Option<PathBuf>,
    #[arg(long, default_value = "10.0.0.1", value_parser = cli::parse_ip)]
    pub src_ip: IpAddr,
    #[arg(long, default_value = "10.1.0.1", value_parser = cli::parse_ip)]
    pub dst_ip: IpAddr,
    /// Source port (the identifier of ICMP echo requests).
    #[arg(long, default_value_t = 1024)]
    pub src_port: u16,
    #[arg(long, default_value_t = 5000)]
    pub dst_port: u16,
    /// Field that advances from flow to flow.
    #[arg(long, default_value = "src-port", value_parser = cli::parse_vary)]
    pub vary: Vary,
    #[arg(long)]
    pub vlan: Option<u16>,
    /// Another stream with its own rate, sent alongside the one the flags describe: the flags'
    /// values with these changed (`proto=tcp,dst=10.0.2.2,dport=80,flows=4,rate=1000`; keys
    /// proto, flags, src, dst, sport, dport, flows, vary, size, rate, mbps, vlan). Repeatable.
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub stream: Vec<String>,
    /// Milliseconds to wait for packets still in flight after the last one was sent.
    #[arg(long, default_value_t = 200)]
    pub drain_ms: u64,
    /// Pin the generator to this core.
    #[arg(long)]
    pub core: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

fn parse_proto(s: &str) -> Result<Proto, String> {
    match s {
        "udp" => Ok(Proto::Udp),
        "tcp" => Ok(Proto::Tcp),
        "icmp" => Ok(Proto::Icmp),
        o => Err(format!("`{o}`: one of udp, tcp, icmp")),
    }
}

impl GenArgs {
    /// The generator's options; errors name the flag at fault.
    pub fn opts(self) -> anyhow::Result<GenOpts> {
        parse_tcp_flags(&self.tcp_flags).map_err(|_| {
            anyhow!(
                "--tcp-flags {}: letters of FSRPAU (tcpdump's), or `.` for none",
                self.tcp_flags
            )
        })?;
        let mut first = GenSpec {
            flows: self.flows,
            count: self.count,
            duration_ms: self.duration.map(|s| (s * 1000.0) as u64),
            imix: self.imix,
            src_ip: self.src_ip,
            dst_ip: self.dst_ip,
            src_port: self.src_port,
            dst_port: self.dst_port,
            vary: self.vary,
            vlan: self.vlan,
            proto: self.proto,
            tcp_flags: self.tcp_flags.clone(),
            pcap: self.pcap.clone(),
            ..Default::default()
        };
        if self.pcap.is_some() && self.rate_mbps.is_some() {
            bail!("--rate-mbps: not with --pcap (its frames' sizes vary); give --rate in packets per second");
        }
        if let Some(first_rate) = self.rates.first() {
            if let Some(bad) = self.rates.iter().find(|r| check_rate(**r).is_err()) {
                bail!("--rates: {bad} is not a rate the pacer holds ({MIN_RATE} to {MAX_RATE:e} packets per second)");
            }
            if !(self.step.is_finite() && self.step > 0.0) {
                bail!("--step: a positive number of seconds");
            }
            if !self.stream.is_empty() {
                bail!("--rates sweeps one stream: not with --stream");
            }
            // The sweep's clock, not a duration, ends it (each step once, then a pause).
            first.rate_pps = Some(*first_rate);
        }
        set_size(&mut first, self.size, "--size")?;
        if self.rates.is_empty() {
            first.rate_pps = rate(self.rate, self.rate_mbps, &first);
        }
        let mut streams = vec![first];
        for text in &self.stream {
            let s = stream(&streams[0], text, self.size)
                .map_err(|e| anyhow!("--stream {text}: {e}"))?;
            streams.push(s);
        }
        let tx = self.interface.map(|i| Iface {
            kind: self.port,
            interface: i,
            netns: self.netns.clone(),
        });
        let rx = self.rx.map(|i| Iface {
            kind: self.port,
            interface: i,
            netns: self.rx_netns.or(self.netns),
        });
        let mut streams = streams.into_iter();
        Ok(GenOpts {
            spec: streams.next().expect("the flags' stream"),
            more: streams.collect(),
            steps: self.rates,
            step_secs: self.step,
            tx,
            write: self.write,
            rx,
            read: self.read,
            drain_ms: self.drain_ms,
            core: self.core,
            json: self.json,
        })
    }
}

/// The packets per second of `--rate` or `--rate-mbps` for `spec`'s frames.
fn rate(pps: Option<f64>, mbps: Option<f64>, spec: &GenSpec) -> Option<f64> {
    pps.or_else(|| mbps.map(|m| m * 1e6 / (spec.mean_frame_bytes() + 4.0) / 8.0))
}

/// Set `spec.size` from `size` (the flag `flag`), or the smallest stamped frame, at least 64.
fn set_size(spec: &mut GenSpec, size: Option<u16>, flag: &str) -> anyhow::Result<()> {
    let min = spec.min_size();
    spec.size = match size {
        Some(s) if s < min => bail!(
            "{flag} {s}: below {min} bytes, the smallest frame with these addresses' and the \
             transport's headers, a stamp and Ethernet's 60-byte minimum"
        ),
        Some(s) => s,
        None => min.max(64),
    };
    Ok(())
}

/// A `--stream` spec: `base` with the keys of `text` changed.
fn stream(base: &GenSpec, text: &str, size: Option<u16>) -> Result<GenSpec, String> {
    let mut s = GenSpec { first_flow_id: None, ..base.clone() };
    let (mut size, mut pps, mut mbps) = (size, None, None);
    for pair in text.split(',').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(|| format!("`{pair}`: KEY=VALUE"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{key}={value}: {e}");
        let number = |v: &str| v.parse::<f64>().map_err(|e| bad(&e));
        match key {
            "proto" => s.proto = parse_proto(value)?,
            "flags" => {
                parse_tcp_flags(value).map_err(|e| bad(&e))?;
                s.tcp_flags = value.to_string();
            }
            "src" => s.src_ip = cli::parse_ip(value)?,
            "dst" => s.dst_ip = cli::parse_ip(value)?,
            "sport" => s.src_port = value.parse().map_err(|e| bad(&e))?,
            "dport" => s.dst_port = value.parse().map_err(|e| bad(&e))?,
            "flows" => s.flows = value.parse().map_err(|e| bad(&e))?,
            "vary" => s.vary = cli::parse_vary(value)?,
            "size" => size = Some(value.parse().map_err(|e| bad(&e))?),
            "rate" => pps = Some(number(value)?),
            "mbps" => mbps = Some(number(value)?),
            "vlan" => s.vlan = Some(value.parse().map_err(|e| bad(&e))?),
            other => {
                return Err(format!(
                    "unknown key `{other}`: proto, flags, src, dst, sport, dport, flows, vary, \
                     size, rate, mbps, vlan"
                ))
            }
        }
    }
    set_size(&mut s, size, "size").map_err(|e| e.to_string())?;
    if pps.is_some() || mbps.is_some() {
        s.rate_pps = rate(pps, mbps, &s);
    }
    s.validate(usize::MAX).map_err(|e| e.to_string())?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_changes_only_its_keys_and_names_what_it_refuses() {
        let base = GenSpec { rate_pps: Some(1000.0), ..Default::default() };
        let s = stream(&base, "proto=tcp,flags=SA,dst=10.0.2.2,dport=80,flows=4,rate=50", None)
            .unwrap();
        assert_eq!((s.proto, s.tcp_flags.as_str(), s.dst_port, s.flows), (Proto::Tcp, "SA", 80, 4));
        assert_eq!(
            (s.dst_ip, s.src_ip, s.rate_pps),
            ("10.0.2.2".parse().unwrap(), base.src_ip, Some(50.0))
        );
        assert_eq!(s.size, 72, "TCP's header makes the smallest stamped frame 72 bytes");
        let s = stream(&base, "proto=icmp", None).unwrap();
        assert_eq!((s.rate_pps, s.size), (Some(1000.0), 64), "the flags' rate when none is given");
        for (text, says) in [
            ("speed=3", "unknown key `speed`"),
            ("dport=x", "dport=x"),
            ("proto=sctp", "one of udp, tcp, icmp"),
            ("flags=Q", "flags=Q"),
            ("size=40", "size 40: below"),
            ("dst=fd00::1", "src_ip and dst_ip"),
            ("rate", "`rate`: KEY=VALUE"),
        ] {
            let e = stream(&base, text, None).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
