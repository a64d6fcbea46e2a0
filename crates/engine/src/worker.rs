//! A worker: one thread per core, polling its queues and running each batch to completion.
//! Per batch it loads each slot once (one atomic load), announces one quiescent state, and
//! never waits for anything.

use crate::capture::CapturePoint;
use crate::config::IdlePolicy;
use crate::registry::WorkerSlots;
use crossbeam_queue::ArrayQueue;
use hotplane_core::metrics::LocalCounter;
use hotplane_core::qsbr::{Guard, Reader};
use hotplane_core::{
    time, Batch, Layers, Packet, PoolCache, Position, Qsbr, Replica, Verdict, WorkerCx, NO_PORT,
};
use hotplane_io::{Port, Wakeup};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Slots whose versions a worker reports: the three positions and the flow table.
pub const TRACKED: [&str; 4] = ["pre", "mid", "post", "flows"];
const FLOWS: usize = 3;

/// What a worker reports; written by the worker only.
#[derive(Debug, Default)]
pub struct WorkerStats {
    pub batches: LocalCounter,
    pub packets: LocalCounter,
    pub dropped: LocalCounter,
    pub punted: LocalCounter,
    /// In-band updates dropped because the control ring was full.
    pub punt_overflow: LocalCounter,
    /// Packets whose output port does not exist.
    pub no_route: LocalCounter,
    pub injected: LocalCounter,
    /// Packets stages made beyond their batches (multicast and clone copies) and sent.
    pub replicated: LocalCounter,
    pub idle_polls: LocalCounter,
    /// Batches abandoned because a program panicked (their packets count as dropped).
    pub panics: LocalCounter,
    /// Version of each tracked slot this worker last ran, and when it first ran it.
    pub seen_version: [LocalCounter; 4],
    pub seen_at_ns: [LocalCounter; 4],
    /// Every port queue of this worker has a finite input that is exhausted.
    pub inputs_done: AtomicBool,
    pub running: AtomicBool,
}

pub(crate) struct Worker {
    pub id: usize,
    pub core: Option<usize>,
    pub ports: Vec<Box<dyn Port>>,
    /// Output port of packets received on each port, unless a program says otherwise.
    pub default_out: Vec<u16>,
    pub cache: PoolCache,
    pub slots: Arc<WorkerSlots>,
    pub punt: Arc<ArrayQueue<Packet>>,
    pub inject: Arc<ArrayQueue<Packet>>,
    /// Kept between batches so that copies do not allocate a vector each time.
    pub replicas: Vec<Replica>,
    /// The CPU port's rings to and from the controller.
    pub cpu: Arc<crate::cpu_port::CpuLink>,
    pub stats: Arc<WorkerStats>,
    /// UDP destination port of in-band updates; 0 = disabled.
    pub update_port: u16,
    /// Only datagrams to one of these (per port) are updates; the rest is traffic.
    pub own_addresses: Arc<crate::addresses::NodeAddresses>,
    pub burst: usize,
    pub stop: Arc<AtomicBool>,
    pub idle: IdlePolicy,
    pub control: Option<std::thread::Thread>,
    pub qsbr: Qsbr,
    /// `hotplane trace` (tested once per batch).
    pub tracer: Arc<crate::trace::Tracer>,
    /// `hotplane capture` (tested once per batch), and this worker's copy of its spec.
    pub capturer: Arc<crate::capture::Capturer>,
    pub capture_cache: std::cell::Cell<Option<crate::capture::ArmedCapture>>,
}

/// How often ports get their slow checks, when the worker is idle.
const HOUSEKEEPING_NS: u64 = 100_000_000;

/// Empty polls before an idle worker yields its CPU (IdlePolicy::Yield) or waits.
const YIELD_AFTER: u32 = 64;

/// Longest sleep of a waiting worker (IdlePolicy::Wait), in milliseconds.
const WAIT_MS: i32 = 1;

impl Worker {
    /// Run until told to stop; returns the ports (dropping them publishes their reports).
    pub fn run(mut self) -> Vec<Box<dyn Port>> {
        if let Some(core) = self.core {
            pin_to_core(core);
        }
        let mut reader = self.qsbr.register(format!("worker {}", self.id));
        self.stats.running.store(true, Ordering::Release);
        let mut batch = Batch::new(self.burst);
        let mut tx: Vec<Batch> = self.ports.iter().map(|_| Batch::new(self.burst)).collect();
        let mut seen = [0u64; 4];
        let mut empty_polls = 0u32;
        let mut next_housekeeping = time::now_ns() + HOUSEKEEPING_NS;
        let mut inputs_done = false;
        while !self.stop.load(Ordering::Relaxed) {
            let mut got = self.send_injected(&mut tx);
            if let Some(p) = self.cpu.down(self.id) {
                // Packets from the controller: a batch of their own, as if received.
                let _ = batch.push(p);
                while batch.len() < self.burst {
                    let Some(p) = self.cpu.down(self.id) else { break };
                    let _ = batch.push(p);
                }
                got += batch.len();
                self.run_batch(&mut batch, &mut tx, &mut reader, time::now_ns(), &mut seen);
            }
            for q in 0..self.ports.len() {
                let now = time::now_ns();
                if self.ports[q].recv(&mut batch, &mut self.cache, now) == 0 {
                    continue;
                }
                got += batch.len();
                self.run_batch(&mut batch, &mut tx, &mut reader, now, &mut seen);
            }
            reader.quiescent();
            if got > 0 {
                empty_polls = 0;
                continue;
            }
            let now = time::now_ns();
            if now >= next_housekeeping {
                next_housekeeping = now + HOUSEKEEPING_NS;
                for p in &mut self.ports {
                    p.housekeeping();
                }
            }
            empty_polls = empty_polls.saturating_add(1);
            self.stats.idle_polls.add(1);
            if empty_polls == 1 {
                for p in &mut self.ports {
                    p.flush();
                }
            }
            // Asked on every empty poll until it holds: a paced input finds its end on a poll
            // that returns nothing, after the first empty one.
            if empty_polls == 1 || !inputs_done {
                inputs_done = self.ports.iter().all(|p| p.rx_done());
                self.stats.inputs_done.store(inputs_done, Ordering::Release);
            }
            match self.idle {
                IdlePolicy::Yield if empty_polls > YIELD_AFTER => std::thread::yield_now(),
                IdlePolicy::Wait if empty_polls > YIELD_AFTER => self.wait_for_packets(),
                _ => std::hint::spin_loop(),
            }
        }
        drop(reader);
        for p in &mut self.ports {
            p.flush();
        }
        self.stats.running.store(false, Ordering::Release);
        std::mem::take(&mut self.ports)
    }

    /// Idle (`IdlePolicy::Wait`): sleep until a port has packets, at most `WAIT_MS`, so that
    /// the controller's packets, injected ones and a stop are seen within that. A port that can
    /// only be polled makes it a plain nap of the same length.
    #[cold]
    fn wait_for_packets(&mut self) {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(self.ports.len());
        for p in &self.ports {
            match p.wakeup() {
                Wakeup::Fd(fd) => fds.push(libc::pollfd { fd, events: libc::POLLIN, revents: 0 }),
                Wakeup::Quiet => {}
                Wakeup::Poll => {
                    std::thread::sleep(std::time::Duration::from_millis(WAIT_MS as u64));
                    return;
                }
            }
        }
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs that lives across the
        // call (an empty one is a plain timed sleep); poll only writes their `revents`. The
        // descriptors belong to our ports, open as long as they live; a closed one is reported
        // in `revents`, not a fault.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, WAIT_MS) };
        // A descriptor in error (an interface gone down) stays "ready" without packets: nap
        // instead of spinning on it until housekeeping notices.
        let broken = libc::POLLERR | libc::POLLHUP | libc::POLLNVAL;
        if ready > 0 && fds.iter().any(|f| f.revents & broken != 0) {
            std::thread::sleep(std::time::Duration::from_millis(WAIT_MS as u64));
        }
    }

    /// Run one received batch to completion, then announce a quiescent state.
    #[inline]
    fn run_batch(
        &mut self,
        batch: &mut Batch,
        tx: &mut [Batch],
        reader: &mut Reader,
        now: u64,
        seen: &mut [u64; 4],
    ) {
        let ran = {
            let guard = reader.guard();
            // A program that panics (a bug) costs this batch, never the worker.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let kept = std::mem::take(&mut self.replicas);
                let replicas = self.process(batch, &guard, now, seen, kept);
                // A second clock read per batch: sinks measure latency at transmit time.
                let now = time::now_ns();
                self.transmit(batch, tx, now);
                if replicas.is_empty() {
                    self.replicas = replicas;
                } else {
                    self.send_replicas(replicas, tx, now);
                }
            }))
        };
        if ran.is_err() {
            self.stats.panics.add(1);
            self.stats.dropped.add(batch.len() as u64);
            batch.free_all(&mut self.cache);
        }
        reader.quiescent();
    }

    /// Parse, punt in-band updates, run the pipeline positions and flow functions.
    /// Returns the packets stages made (in `replicas`, a recycled, empty vector).
    #[inline]
    fn process(
        &self,
        batch: &mut Batch,
        guard: &Guard<'_>,
        now: u64,
        seen: &mut [u64; 4],
        replicas: Vec<Replica>,
    ) -> Vec<Replica> {
        let nports = self.default_out.len();
        for p in batch.iter_mut() {
            let key = p.classify();
            let in_port = p.meta.in_port as usize;
            p.meta.out_port = if in_port < nports { self.default_out[in_port] } else { NO_PORT };
            // Update packets bypass every program, so a broken program can always be replaced.
            // Only those addressed to the node: transit traffic to the same port is forwarded.
            if self.update_port != 0
                && key.dst_port == self.update_port
                && p.meta.layers & Layers::UDP != 0
                && self.own_addresses.is_own(in_port, &key)
            {
                p.meta.verdict = Verdict::Punt;
            }
        }
        self.stats.batches.add(1);
        self.stats.packets.add(batch.len() as u64);
        let mut cx = WorkerCx::new(self.id, now, guard);
        cx.replicas = replicas;
        let capture = self.capturer.armed(&self.capture_cache);
        if let Some(c) = &capture {
            self.capturer.offer(c, CapturePoint::Rx, batch);
        }
        let mut traced = if self.tracer.armed() { self.tracer.pick(self.id, batch) } else { None };
        if let Some(t) = &traced {
            cx.trace = t.mask;
        }
        let slots = &*self.slots;
        let mut live = batch.live();
        let track = |i: usize, v: u64, seen: &mut [u64; 4]| {
            if seen[i] != v {
                seen[i] = v;
                self.stats.seen_version[i].set(v);
                // The moment of the load, not the batch's start (rare: one clock read per
                // version change).
                self.stats.seen_at_ns[i].set(time::now_ns());
            }
        };
        let pre = slots.position(Position::Pre).load(guard);
        track(0, pre.version, seen);
        if let (Some(stage), false) = (&pre.value, live.is_empty()) {
            stage.run(batch, live, &mut cx);
            live = batch.live();
            if let Some(t) = traced.as_mut() {
                t.after("pre", stage.describe(), batch, &mut cx.notes);
            }
            if let Some(c) = &capture {
                self.capturer.offer(c, CapturePoint::After("pre"), batch);
            }
        }
        let flows = slots.flows.slot().load(guard);
        track(FLOWS, flows.version, seen);
        if !flows.value.is_empty() && !live.is_empty() {
            flows.value.run(batch, live, &mut cx);
            live = batch.live();
            if let Some(t) = traced.as_mut() {
                t.after("flows", "flow functions".into(), batch, &mut cx.notes);
            }
            if let Some(c) = &capture {
                self.capturer.offer(c, CapturePoint::After("flows"), batch);
            }
        }
        for (i, pos, name) in [(1, Position::Mid, "mid"), (2, Position::Post, "post")] {
            let s = slots.position(pos).load(guard);
            track(i, s.version, seen);
            if let (Some(stage), false) = (&s.value, live.is_empty()) {
                stage.run(batch, live, &mut cx);
                live = batch.live();
                if let Some(t) = traced.as_mut() {
                    t.after(name, stage.describe(), batch, &mut cx.notes);
                }
                if let Some(c) = &capture {
                    self.capturer.offer(c, CapturePoint::After(name), batch);
                }
            }
        }
        if let Some(t) = traced {
            self.tracer.finish(t, batch);
        }
        if let Some(c) = &capture {
            // What leaves and what is dropped, as the pipeline left it.
            self.capturer.offer(c, CapturePoint::Tx, batch);
            self.capturer.offer(c, CapturePoint::Drop, batch);
        }
        cx.replicas
    }

    /// Send the packets stages made; `replicas` is kept (emptied) for the next batch.
    #[cold]
    fn send_replicas(&mut self, mut replicas: Vec<Replica>, tx: &mut [Batch], now: u64) {
        let capture = self.capturer.armed(&self.capture_cache);
        for r in replicas.drain(..) {
            let Some(mut p) = self.cache.alloc() else {
                self.stats.dropped.add(1);
                continue;
            };
            if p.set_frame(&r.data).is_err() {
                self.stats.dropped.add(1);
                self.cache.free(p);
                continue;
            }
            p.meta.out_port = r.port;
            if let Some(c) = &capture {
                self.capturer.offer_replica(c, &p);
            }
            self.stats.replicated.add(1);
            self.queue_tx(tx, p, now);
        }
        self.flush_tx(tx, now);
        self.replicas = replicas;
    }

    /// Send each packet where its verdict says; the batch is empty afterwards.
    #[inline]
    fn transmit(&mut self, batch: &mut Batch, tx: &mut [Batch], now: u64) {
        // One look at the batch: can every packet be sent (unicast to a port that exists),
        // and do they all leave by the same port?
        let ntx = tx.len();
        let first_out = batch.get(0).map_or(NO_PORT, |p| p.meta.out_port);
        let (mut sendable, mut one_port) = (true, true);
        for p in batch.iter() {
            sendable &= (p.meta.out_port as usize) < ntx
                && matches!(p.meta.verdict, Verdict::Pass | Verdict::Tx);
            one_port &= p.meta.out_port == first_out;
        }
        if sendable && !batch.is_empty() {
            if one_port {
                // Common case: hand the batch over as it is.
                self.ports[first_out as usize].send(batch, &mut self.cache, now);
            } else {
                // Several ports (a router's common case): move the packets straight into the
                // per-port batches.
                let (ports, cache) = (&mut self.ports, &mut self.cache);
                batch.scatter(
                    tx,
                    |p| p.meta.out_port as usize,
                    |k, out| {
                        ports[k].send(out, cache, now);
                    },
                );
                self.flush_tx(tx, now);
            }
            return;
        }
        let mut punted = false;
        for p in batch.drain() {
            match p.meta.verdict {
                Verdict::Drop => {
                    self.stats.dropped.add(1);
                    self.cache.free(p);
                }
                Verdict::Punt => match self.punt.push(p) {
                    Ok(()) => {
                        self.stats.punted.add(1);
                        punted = true;
                    }
                    Err(p) => {
                        self.stats.punt_overflow.add(1);
                        self.cache.free(p);
                    }
                },
                Verdict::Pass | Verdict::Tx => self.queue_tx(tx, p, now),
            }
        }
        self.flush_tx(tx, now);
        if punted {
            if let Some(t) = &self.control {
                t.unpark();
            }
        }
    }

    /// Transmit packets the control thread queued (acknowledgements).
    fn send_injected(&mut self, tx: &mut [Batch]) -> usize {
        let mut n = 0;
        let now = time::now_ns();
        while let Some(p) = self.inject.pop() {
            self.queue_tx(tx, p, now);
            n += 1;
        }
        if n > 0 {
            self.flush_tx(tx, now);
            self.stats.injected.add(n as u64);
        }
        n
    }

    /// Queue a packet for its output port, sending that port's batch first if it is full.
    #[inline]
    fn queue_tx(&mut self, tx: &mut [Batch], p: Packet, now: u64) {
        let out = p.meta.out_port as usize;
        if out >= tx.len() {
            if self.cpu.port() == Some(out as u16) {
                self.send_to_controller(p);
                return;
            }
            self.stats.no_route.add(1);
            self.cache.free(p);
            return;
        }
        if let Err(p) = tx[out].push(p) {
            self.ports[out].send(&mut tx[out], &mut self.cache, now);
            let _ = tx[out].push(p);
        }
    }

    /// A packet a program sent to the CPU port: to the controller, or dropped and counted when
    /// its ring is full (the worker never waits for the controller).
    #[cold]
    fn send_to_controller(&mut self, p: Packet) {
        if let Err(p) = self.cpu.up(self.id, p) {
            self.cpu.counters.to_controller_dropped.fetch_add(1, Ordering::Relaxed);
            self.stats.dropped.add(1);
            self.cache.free(p);
        }
    }

    /// Send every non-empty per-port batch.
    #[inline]
    fn flush_tx(&mut self, tx: &mut [Batch], now: u64) {
        for (out, b) in tx.iter_mut().enumerate() {
            if !b.is_empty() {
                self.ports[out].send(b, &mut self.cache, now);
            }
        }
    }
}

/// Pin the calling thread to one core. Failure (a restricted cpuset) is logged, not fatal.
pub fn pin_to_core(core: usize) {
    pin_to_cores(&[core]);
}

/// Restrict the calling thread to `cores`. Failure is logged, not fatal.
pub fn pin_to_cores(cores: &[usize]) {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write within it; sched_setaffinity
    // reads `size_of::<cpu_set_t>()` bytes of it for the calling thread (pid 0).
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for c in cores {
            libc::CPU_SET(*c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        tracing::warn!(?cores, error = %std::io::Error::last_os_error(), "cannot pin thread to cores");
    }
}

/// Cores online, whatever the calling thread's affinity (`available_parallelism` reports the
/// affinity of the caller, which a benchmark may have pinned).
pub fn online_cores() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// The cores no worker is pinned to, when workers are pinned and some core is left: where
/// the control thread (and anything else slow) should run, so that it never waits behind a
/// busy-polling worker for a scheduler slice.
pub fn spare_cores(worker_cores: Option<&[usize]>) -> Option<Vec<usize>> {
    let n = online_cores();
    let used = worker_cores?;
    let spare: Vec<usize> = (0..n).filter(|c| !used.contains(c)).collect();
    (!spare.is_empty()).then_some(spare)
}
