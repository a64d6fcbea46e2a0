//! Software RSS: share a single-queue port among several workers. The worker owning queue 0
//! polls the real port, keeps the packets whose flow hash selects it and passes the others over
//! lock-free rings; the other workers' transmissions travel back over rings and are sent by the
//! owner. Rings never block: a full ring drops the packet and counts it.

use crate::{Port, PortCounters};
use crossbeam_queue::ArrayQueue;
use hotplane_core::{Batch, Packet, PoolCache};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Packets buffered per ring.
const RING: usize = 1024;

struct Link {
    to_follower: ArrayQueue<Packet>,
    from_follower: ArrayQueue<Packet>,
}

/// Split `port` into `queues` queues. With one queue the port is returned unchanged.
pub fn spread(port: Box<dyn Port>, queues: usize, burst: usize) -> Vec<Box<dyn Port>> {
    if queues <= 1 {
        return vec![port];
    }
    let links: Vec<Arc<Link>> = (1..queues)
        .map(|_| {
            Arc::new(Link {
                to_follower: ArrayQueue::new(RING),
                from_follower: ArrayQueue::new(RING),
            })
        })
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    let name = port.name().to_string();
    let mut out: Vec<Box<dyn Port>> = Vec::with_capacity(queues);
    let followers: Vec<Box<dyn Port>> = links
        .iter()
        .map(|l| {
            Box::new(Follower {
                name: name.clone(),
                link: l.clone(),
                done: done.clone(),
                counters: Arc::new(PortCounters::default()),
            }) as Box<dyn Port>
        })
        .collect();
    out.push(Box::new(Owner {
        inner: port,
        links,
        done,
        staging: Batch::new(burst),
        tx: Batch::new(burst),
    }));
    out.extend(followers);
    out
}

struct Owner {
    inner: Box<dyn Port>,
    links: Vec<Arc<Link>>,
    done: Arc<AtomicBool>,
    staging: Batch,
    tx: Batch,
}

impl Owner {
    /// Send what followers queued for transmission.
    fn drain_followers(&mut self, cache: &mut PoolCache, now_ns: u64) {
        for l in &self.links {
            while let Some(p) = l.from_follower.pop() {
                if let Err(p) = self.tx.push(p) {
                    self.inner.send(&mut self.tx, cache, now_ns);
                    let _ = self.tx.push(p);
                }
            }
        }
        if !self.tx.is_empty() {
            self.inner.send(&mut self.tx, cache, now_ns);
        }
    }
}

impl Port for Owner {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn recv(&mut self, batch: &mut Batch, cache: &mut PoolCache, now_ns: u64) -> usize {
        self.drain_followers(cache, now_ns);
        let queues = self.links.len() as u32 + 1;
        self.inner.recv(&mut self.staging, cache, now_ns);
        let mut kept = 0;
        for mut p in self.staging.drain() {
            let q = p.classify().hash32_queue(queues);
            let p = if q == 0 {
                match batch.push(p) {
                    Ok(()) => {
                        kept += 1;
                        continue;
                    }
                    Err(p) => p,
                }
            } else {
                match self.links[q as usize - 1].to_follower.push(p) {
                    Ok(()) => continue,
                    Err(p) => p,
                }
            };
            self.inner.counters().rx_dropped.add(1);
            cache.free(p);
        }
        if self.inner.rx_done() {
            self.done.store(true, Ordering::Release);
        }
        kept
    }

    fn send(&mut self, batch: &mut Batch, cache: &mut PoolCache, now_ns: u64) -> usize {
        self.inner.send(batch, cache, now_ns)
    }

    fn counters(&self) -> Arc<PortCounters> {
        self.inner.counters()
    }

    fn rx_done(&self) -> bool {
        self.inner.rx_done()
    }

    fn flush(&mut self) {
        self.inner.flush();
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        // Followers may have queued packets after our last poll; don't lose them silently.
        let mut left = 0;
        for l in &self.links {
            while l.from_follower.pop().is_some() {
                left += 1;
            }
        }
        if left > 0 {
            self.inner.counters().tx_dropped.add(left);
        }
    }
}

struct Follower {
    name: String,
    link: Arc<Link>,
    done: Arc<AtomicBool>,
    counters: Arc<PortCounters>,
}

impl Port for Follower {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(&mut self, batch: &mut Batch, _cache: &mut PoolCache, now_ns: u64) -> usize {
        let mut n = 0;
        let mut bytes = 0;
        while batch.room() > 0 {
            let Some(mut p) = self.link.to_follower.pop() else { break };
            p.meta.rx_ts = now_ns;
            bytes += p.len() as u64;
            let _ = batch.push(p);
            n += 1;
        }
        self.counters.rx_packets.add(n as u64);
        self.counters.rx_bytes.add(bytes);
        n
    }

    fn send(&mut self, batch: &mut Batch, cache: &mut PoolCache, _now_ns: u64) -> usize {
        let mut sent = 0;
        for p in batch.drain() {
            let len = p.len() as u64;
            match self.link.from_follower.push(p) {
                Ok(()) => {
                    sent += 1;
                    self.counters.tx_bytes.add(len);
                }
                Err(p) => {
                    self.counters.tx_dropped.add(1);
                    cache.free(p);
                }
            }
        }
        self.counters.tx_packets.add(sent);
        sent as usize
    }

    fn counters(&self) -> Arc<PortCounters> {
        self.counters.clone()
    }

    fn rx_done(&self) -> bool {
        self.done.load(Ordering::Acquire) && self.link.to_follower.is_empty()
    }
}

trait QueueOf {
    fn hash32_queue(&self, queues: u32) -> u32;
}

impl QueueOf for hotplane_core::FlowKey {
    /// Queue for a flow: multiply-shift on the 32-bit hash (uniform without a division).
    fn hash32_queue(&self, queues: u32) -> u32 {
        ((self.hash32() as u64 * queues as u64) >> 32) as u32
    }
}
