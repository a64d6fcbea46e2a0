//! A worker without a data plane: packets from bytes, one batch through a stage.
#![allow(dead_code)]

use hotplane_core::wire::{EthernetAddress, UdpFrame};
use hotplane_core::{Batch, Packet, Pool, PoolConfig, Qsbr, Stage, Verdict, WorkerCx};
use std::net::IpAddr;

pub struct Out {
    pub verdict: Verdict,
    pub out_port: u16,
    pub user: u64,
    pub bytes: Vec<u8>,
}

pub struct Worker {
    pub pool: Pool,
    pub qsbr: Qsbr,
}

impl Worker {
    pub fn new() -> Self {
        Self {
            pool: Pool::new(PoolConfig { buffers: 256, ..PoolConfig::default() }).unwrap(),
            qsbr: Qsbr::new(),
        }
    }

    pub fn packet(&self, bytes: &[u8]) -> Packet {
        let mut p = self.pool.alloc().unwrap();
        p.set_frame(bytes).unwrap();
        p.classify();
        p
    }

    /// Run `stage` over `frames` as one batch on worker `worker`.
    pub fn run(&self, stage: &dyn Stage, frames: &[Vec<u8>], worker: usize) -> Vec<Out> {
        let mut batch = Batch::new(64);
        for f in frames {
            assert!(batch.push(self.packet(f)).is_ok());
        }
        let reader = self.qsbr.register("test");
        let guard = reader.guard();
        let mut cx = WorkerCx::new(worker, hotplane_core::time::now_ns(), &guard);
        let all = batch.all();
        stage.run(&mut batch, all, &mut cx);
        batch
            .iter()
            .map(|p| Out {
                verdict: p.meta.verdict,
                out_port: p.meta.out_port,
                user: p.meta.user,
                bytes: p.data().to_vec(),
            })
            .collect()
    }
}

/// A UDP frame from `src:sport` to `dst:dport` with `payload`.
pub fn udp(src: &str, dst: &str, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let f = UdpFrame {
        src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
        vlan: None,
        src_ip: src.parse::<IpAddr>().unwrap(),
        dst_ip: dst.parse::<IpAddr>().unwrap(),
        src_port: sport,
        dst_port: dport,
    };
    let mut buf = vec![0u8; 2048];
    let n = f.emit(payload, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

pub fn payload_of(frame: &[u8]) -> &[u8] {
    &frame[42..]
}
