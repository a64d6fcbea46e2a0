//! Software RSS: share a single-queue port among several workers. The worker owning queue 0
//! polls the real port, keeps the packets whose flow hash selects it and passes the others over
//! lock-free rings; the other workers' transmissions travel back over rings and are sent by the
//! owner. Nothing ever blocks: when a ring to another worker is full, the owner stops reading
//! the port (backpressure: the source's own queue fills, where a NIC counts its drops) instead of
//! dropping packets it already holds; a full ring on the way back drops and counts.

use crate::{Port, PortCounters};
use crossbeam_queue::ArrayQueue;
use hotplane_core::{Batch, Packet, PoolCache};
use std::collections::VecDeque;
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
    let mut out: Vec<Box<dyn Port>> = Vec::with_capacity(queues);
    out.push(Box::new(Owner {
        inner: port,
        links,
        done,
        staging: Batch::new(burst),
        tx: Batch::new(burst),
        backlog: VecDeque::with_capacity(burst),
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
    /// Packets read but not yet placed (their queue was full); nothing more is read until empty.
    backlog: VecDeque<(usize, Packet)>,
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

/// Hand a packet to queue `q` (0 = the owner's own batch); gives it back if that queue is full.
/// `Ok(true)` means it went into the owner's batch.
fn place(links: &[Arc<Link>], q: usize, p: Packet, batch: &mut Batch) -> Result<bool, Packet> {
    if q == 0 {
        batch.push(p).map(|()| true)
    } else {
        links[q - 1].to_follower.push(p).map(|()| false)
    }
}

impl Port for Owner {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn recv(&mut self, batch: &mut Batch, cache: &mut PoolCache, now_ns: u64) -> usize {
        self.drain_followers(cache, now_ns);
        let mut kept = 0;
        while let Some((q, p)) = self.backlog.pop_front() {
            match place(&self.links, q, p, batch) {
                Ok(mine) => kept += mine as usize,
                Err(p) => {
                    self.backlog.push_front((q, p));
                    return kept;
                }
            }
        }
        if batch.room() == 0 {
            return kept;
        }
        let queues = self.links.len() as u64 + 1;
        self.inner.recv(&mut self.staging, cache, now_ns);
        for mut p in self.staging.drain() {
            // Multiply-shift maps the 32-bit flow hash uniformly onto the queues.
            let q = ((p.classify().hash32() as u64 * queues) >> 32) as usize;
            if !self.backlog.is_empty() {
                self.backlog.push_back((q, p));
                continue;
            }
            match place(&self.links, q, p, batch) {
                Ok(mine) => kept += mine as usize,
                Err(p) => self.backlog.push_back((q, p)),
            }
        }
        if self.inner.rx_done() && self.backlog.is_empty() {
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
        self.inner.rx_done() && self.backlog.is_empty()
    }

    fn flush(&mut self) {
        self.inner.flush();
    }

    fn housekeeping(&mut self) {
        self.inner.housekeeping();
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        // Followers may have queued packets after our last poll; don't lose them silently.
        let mut left = self.backlog.len() as u64;
        self.backlog.clear();
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

/// A queue of another worker. Received and transmitted packets are counted once, by the owner's
/// port; a follower counts only what it drops.
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
        while batch.room() > 0 {
            let Some(mut p) = self.link.to_follower.pop() else { break };
            p.meta.rx_ts = now_ns;
            let _ = batch.push(p);
            n += 1;
        }
        n
    }

    fn send(&mut self, batch: &mut Batch, cache: &mut PoolCache, _now_ns: u64) -> usize {
        let mut sent = 0;
        for p in batch.drain() {
            match self.link.from_follower.push(p) {
                Ok(()) => sent += 1,
                Err(p) => {
                    self.counters.tx_dropped.add(1);
                    cache.free(p);
                }
            }
        }
        sent
    }

    fn counters(&self) -> Arc<PortCounters> {
        self.counters.clone()
    }

    fn rx_done(&self) -> bool {
        self.done.load(Ordering::Acquire) && self.link.to_follower.is_empty()
    }
}
