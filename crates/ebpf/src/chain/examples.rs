//! What the chain examples (`examples/ebpf/chain/`) need in their maps for the generated
//! traffic ([`super::difftest::traffic`]) to take their interesting paths: the load
//! balancers' services and backends. Used by the tests, the benchmark and anyone checking a
//! specialisation of these programs with their service paths running.

use super::difftest::{traffic_v6, TRAFFIC_HOSTS, TRAFFIC_PORTS};
use crate::maps::MapError;
use crate::program::MapRegistry;

/// `lb6`: a service on every generated destination (IPv6 and IPv4) and port, for TCP and UDP,
/// over four backends (`2001:db8::b0..b3`, `10.0.1.0..3`); `quiclb6`: QUIC server ids 0..3
/// (`2001:db8::c0..c3`). Maps the registry does not have are left alone.
pub fn fill_services(maps: &MapRegistry) -> Result<(), MapError> {
    if let (Some(svc), Some(be)) = (maps.get("lb6/services"), maps.get("lb6/backends")) {
        for host in 1..=TRAFFIC_HOSTS {
            let mut v4 = [0u8; 16];
            v4[..4].copy_from_slice(&[10, 0, 0, host]);
            for port in TRAFFIC_PORTS {
                for proto in [6u8, 17] {
                    for (family, addr) in [(6u8, traffic_v6(host)), (4, v4)] {
                        let mut k = addr.to_vec();
                        k.extend_from_slice(&port.to_be_bytes());
                        k.extend_from_slice(&[proto, family]);
                        // Four backends from index 0.
                        let v = [4u32.to_ne_bytes(), 0u32.to_ne_bytes()].concat();
                        svc.update_copy(&k, &v, 0)?;
                    }
                }
            }
        }
        for i in 0..4u8 {
            let mut v = traffic_v6(0xb0 + i).to_vec();
            v.extend_from_slice(&[10, 0, 1, i, 2, 0, 0, 0, 0x0b, i, 0, 0]);
            be.update_copy(&u32::from(i).to_ne_bytes(), &v, 0)?;
        }
    }
    if let Some(q) = maps.get("quiclb6/quic_servers") {
        let size = q.def.value_size as usize;
        for i in 0..4u8 {
            let mut v = traffic_v6(0xc0 + i).to_vec();
            v.extend_from_slice(&[2, 0, 0, 0, 0x5e, i, 1]); // MAC, valid
            v.resize(size, 0);
            q.update_copy(&u32::from(i).to_ne_bytes(), &v, 0)?;
        }
    }
    Ok(())
}

/// `lb6`'s service key for `2001:db8::<host>` port `port` over TCP.
pub fn lb6_tcp6_key(host: u8, port: u16) -> Vec<u8> {
    let mut k = traffic_v6(host).to_vec();
    k.extend_from_slice(&port.to_be_bytes());
    k.extend_from_slice(&[6, 6]);
    k
}

/// [`fill_services`], then only the IPv6/TCP services of hosts 1 to `hosts` on port 80 kept
/// (at most [`TRAFFIC_HOSTS`]): a small, rarely written service map, the case map-content
/// specialisation (`super::mapconst`) is for.
pub fn fill_few_services(maps: &MapRegistry, hosts: u8) -> Result<(), MapError> {
    fill_services(maps)?;
    let Some(svc) = maps.get("lb6/services") else { return Ok(()) };
    let keep: Vec<Vec<u8>> = (1..=hosts.min(TRAFFIC_HOSTS)).map(|h| lb6_tcp6_key(h, 80)).collect();
    for e in svc.entries() {
        if !keep.contains(&e.key) {
            svc.delete_copy(&e.key)?;
        }
    }
    Ok(())
}
