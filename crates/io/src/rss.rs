//! Software RSS: share a single-queue port among several workers. The worker owning queue 0
//! polls the real port, keeps the packets whose flow hash selects it and passes the others over
//! lock-free rings; the other workers' transmissions travel back over rings and are sent by the
//! owner. Nothing ever blocks: when a ring to another worker is full, the owner stops reading
//! the port (backpressure: the source's own queue fills, where a NIC counts its drops) instead of
//! dropping packets it already holds. The way back works the same: a follower whose ring to the
//! owner is full keeps what it could not hand over and takes no new packets until it has
//! (so its inbound ring fills and the owner stops reading); only past a bound of held packets
//! does it drop and count.

use crate::{Port, PortCounters};
use crossbeam_queue::ArrayQueue;
use hotplane_core::{Batch, Packet, PoolCache};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Packets buffered per ring.
const RING: usize = 1024;
/// Transmissions a follower holds while its ring to the owner is full, in bursts.
const HELD_BURSTS: usize = 4;

struct Link {
    to_follower: ArrayQueue<Packet>,
    from_follower: ArrayQueue<Packet>,
}

/// Split `port` into `queues` queues. With one queue the port is returned unchanged.
pub fn spread(port: Box<dyn Port>, queues: usize, burst: usize) -> Vec<Box<dyn Port>> {
    if queues <= 1 {
        return vec![port];
    }
    let (owner, followers) = split(port, queues, burst);
    let mut out: Vec<Box<dyn Port>> = Vec::with_capacity(queues);
    out.push(Box::new(owner));
    out.extend(followers.into_iter().map(|f| Box::new(f) as Box<dyn Port>));
    out
}

fn split(port: Box<dyn Port>, queues: usize, burst: usize) -> (Owner, Vec<Follower>) {
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
    let followers = links
        .iter()
        .map(|l| Follower {
            name: name.clone(),
            link: l.clone(),
            done: done.clone(),
            counters: Arc::new(PortCounters::default()),
            held: VecDeque::with_capacity(burst),
            held_max: burst.max(1) * HELD_BURSTS,
        })
        .collect();
    let owner = Owner {
        inner: port,
        links,
        done,
        staging: Batch::new(burst),
        tx: Batch::new(burst),
        backlog: VecDeque::with_capacity(burst),
    };
    (owner, followers)
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

    fn wakeup(&self) -> crate::Wakeup {
        self.inner.wakeup()
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
    /// Transmissions the ring to the owner had no room for, oldest first.
    held: VecDeque<Packet>,
    held_max: usize,
}

impl Follower {
    /// Hand held transmissions to the owner; true when none are left.
    fn release_held(&mut self) -> bool {
        while let Some(p) = self.held.pop_front() {
            if let Err(p) = self.link.from_follower.push(p) {
                self.held.push_front(p);
                return false;
            }
        }
        true
    }
}

impl Port for Follower {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(&mut self, batch: &mut Batch, _cache: &mut PoolCache, now_ns: u64) -> usize {
        // Backpressure: nothing new while the owner has not taken what we hold.
        if !self.release_held() {
            return 0;
        }
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
        let mut open = self.release_held();
        for p in batch.drain() {
            let p = if open {
                match self.link.from_follower.push(p) {
                    Ok(()) => {
                        sent += 1;
                        continue;
                    }
                    Err(p) => {
                        open = false;
                        p
                    }
                }
            } else {
                p
            };
            if self.held.len() < self.held_max {
                self.held.push_back(p);
                sent += 1;
            } else {
                self.counters.tx_dropped.add(1);
                cache.free(p);
            }
        }
        sent
    }

    fn counters(&self) -> Arc<PortCounters> {
        self.counters.clone()
    }

    fn rx_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
            && self.link.to_follower.is_empty()
            && self.held.is_empty()
    }

    fn flush(&mut self) {
        self.release_held();
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        if !self.held.is_empty() {
            self.counters.tx_dropped.add(self.held.len() as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotplane_core::{Pool, PoolConfig};

    /// A port that receives nothing and counts what it is asked to send.
    struct Counting {
        sent: Arc<std::sync::atomic::AtomicUsize>,
        counters: Arc<PortCounters>,
    }

    impl Port for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        fn recv(&mut self, _: &mut Batch, _: &mut PoolCache, _: u64) -> usize {
            0
        }
        fn send(&mut self, batch: &mut Batch, cache: &mut PoolCache, _: u64) -> usize {
            let n = batch.len();
            self.sent.fetch_add(n, Ordering::Relaxed);
            batch.free_all(cache);
            n
        }
        fn counters(&self) -> Arc<PortCounters> {
            self.counters.clone()
        }
    }

    #[test]
    fn a_follower_whose_owner_stalls_holds_its_transmissions_and_stops_receiving() {
        const BURST: usize = 32;
        let pool = Pool::new(PoolConfig { buffers: 8192, ..Default::default() }).unwrap();
        let mut cache = pool.cache(256);
        let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let inner =
            Box::new(Counting { sent: sent.clone(), counters: Arc::new(PortCounters::default()) });
        let (mut owner, mut followers) = split(inner, 2, BURST);
        let mut follower = followers.pop().unwrap();
        // The follower transmits far more than its ring to the owner holds while the owner
        // never polls (a worker descheduled under load).
        let mut handed = 0;
        for _ in 0..(RING / BURST + HELD_BURSTS) {
            let mut b = Batch::new(BURST);
            for _ in 0..BURST {
                b.push(cache.alloc().unwrap()).unwrap();
            }
            handed += follower.send(&mut b, &mut cache, 0);
        }
        assert_eq!(handed, RING + HELD_BURSTS * BURST, "every packet taken, none dropped");
        assert_eq!(follower.counters().tx_dropped.get(), 0);
        // Backpressure: the follower takes no new input while it holds packets...
        let mut rx = Batch::new(BURST);
        owner.links[0].to_follower.push(cache.alloc().unwrap()).unwrap();
        assert_eq!(follower.recv(&mut rx, &mut cache, 0), 0);
        assert!(!follower.rx_done(), "held packets keep the queue from counting as done");
        // ...and past its bound it drops and counts.
        let mut b = Batch::new(BURST);
        b.push(cache.alloc().unwrap()).unwrap();
        assert_eq!(follower.send(&mut b, &mut cache, 0), 0);
        assert_eq!(follower.counters().tx_dropped.get(), 1);
        // The owner polls: the ring drains, the follower releases what it held, nothing is lost.
        let mut got = Batch::new(BURST);
        while sent.load(Ordering::Relaxed) < handed {
            owner.recv(&mut got, &mut cache, 0);
            follower.flush();
        }
        assert_eq!(sent.load(Ordering::Relaxed), handed);
        assert_eq!(follower.recv(&mut rx, &mut cache, 0), 1, "input resumes once released");
        rx.free_all(&mut cache);
    }
}
