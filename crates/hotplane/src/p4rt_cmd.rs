//! `hotplane run` as a P4Runtime target: the `[p4runtime]` section (or `--p4runtime ADDR`)
//! starts hotplane-p4rt's server next to the control socket.

use crate::Config;
use anyhow::Context;
use hotplane_engine::Engine;
use hotplane_p4rt::{EngineDataplane, Server, ServerConfig};
use std::net::SocketAddr;
use std::sync::Arc;

/// Take the `[p4runtime]` section out of `cfg` (the engine does not know it), with `listen`
/// from the command line over the section's.
pub fn take_section(
    cfg: &mut Config,
    listen: Option<SocketAddr>,
) -> anyhow::Result<Option<ServerConfig>> {
    let section = cfg.sections.remove("p4runtime");
    let mut server = match section {
        Some(v) => Some(serde_json::from_value::<ServerConfig>(v).context("[p4runtime]")?),
        None => listen.map(|_| ServerConfig::default()),
    };
    if let (Some(s), Some(addr)) = (server.as_mut(), listen) {
        s.listen = addr;
    }
    Ok(server)
}

/// Start the P4Runtime server on `plane`.
pub fn serve(plane: &Engine, c: &ServerConfig) -> anyhow::Result<Server> {
    let mut dp = EngineDataplane::new(plane, &c.target)
        .context("p4runtime: this data plane has no P4 kind")?;
    if c.cpu_port != 0 {
        dp = dp.with_cpu_port(plane, c.cpu_port).context("p4runtime: cpu_port")?;
    }
    let server = Server::spawn(c, Arc::new(dp))?;
    // Its counters (packet-ins and packet-outs dropped, refused updates) in `push stats` and
    // Prometheus, under `p4runtime`.
    let stats = server.stats_handle();
    plane.observability().add_source("p4runtime", Arc::new(move || stats.json()));
    let cpu = match c.cpu_port {
        0 => "no CPU port".to_string(),
        p => format!("CPU port {p}"),
    };
    let tls = c.tls_label();
    eprintln!(
        "hotplane: P4Runtime on {} (device id {}, pipeline at {}, {cpu}{tls})",
        server.addr(),
        c.device_id,
        c.target
    );
    Ok(server)
}
