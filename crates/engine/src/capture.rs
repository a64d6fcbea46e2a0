//! `hotplane capture`: copy the packets that pass one point of a running pipeline (a port's
//! receive or transmit side, the output of a position, or the packets it drops) to the control
//! side, which writes them to a pcap file, without stopping or slowing the data plane when off.
//!
//! Built like [`crate::trace`]: the control thread arms the [`Capturer`] with a point, a flow
//! selector and a count; a worker tests one relaxed atomic per batch, and only while armed
//! copies the chosen packets (cut to the snap length) into a bounded lock-free queue. A full
//! queue loses frames (counted), never stalls a worker.

use crossbeam_queue::ArrayQueue;
use hotplane_core::flowtable::FlowSelector;
use hotplane_core::{classify, Batch, Packet, Verdict};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Frames kept until the control side reads them.
pub const QUEUE: usize = 4096;
/// Frames one `capture-start` may ask for (0 asks for this many).
pub const MAX_COUNT: u64 = 100_000_000;
/// The largest snap length: more than any frame a port carries.
pub const MAX_SNAPLEN: u32 = 65_535;

/// Where in the pipeline packets are copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapturePoint {
    /// As they arrived, before any position ran.
    Rx,
    /// What a position passed on (`pre`, `flows`, `mid`, `post`).
    After(&'static str),
    /// What the pipeline sends out of a port, replicas (multicast, clones) included.
    Tx,
    /// What the pipeline dropped, as it was when dropped.
    Drop,
}

impl std::str::FromStr for CapturePoint {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "rx" => CapturePoint::Rx,
            "tx" => CapturePoint::Tx,
            "drop" => CapturePoint::Drop,
            "pre" => CapturePoint::After("pre"),
            "flows" => CapturePoint::After("flows"),
            "mid" => CapturePoint::After("mid"),
            "post" => CapturePoint::After("post"),
            o => {
                return Err(format!(
                    "capture point `{o}`: one of rx, tx, drop, pre, flows, mid, post"
                ))
            }
        })
    }
}

/// What one capture copies.
#[derive(Debug, Clone, Copy)]
pub struct CaptureSpec {
    pub point: CapturePoint,
    /// Only packets that came in on (`rx`) or leave by (`tx`) this port; at a position or for
    /// drops, that came in on it.
    pub port: Option<u16>,
    pub selector: FlowSelector,
    /// Bytes kept of each frame.
    pub snaplen: u32,
    /// Ports the data plane has: at `tx`, a frame to a port beyond (the controller's, no
    /// route) is not sent, so not copied.
    pub ports: u16,
}

impl CaptureSpec {
    /// A capture as the control API asks for it: `port` a name of `ports` or an index.
    pub fn from_request(
        point: &str,
        port: Option<&str>,
        selector: Option<&str>,
        snaplen: Option<u32>,
        ports: &[&str],
    ) -> Result<CaptureSpec, String> {
        let point: CapturePoint = point.parse()?;
        let port = match port {
            None => None,
            Some(p) => {
                let index = ports
                    .iter()
                    .position(|n| *n == p)
                    .or_else(|| p.parse::<usize>().ok().filter(|&i| i < ports.len()))
                    .ok_or_else(|| format!("no port `{p}` (ports: {})", ports.join(", ")))?;
                Some(index as u16)
            }
        };
        let selector = match selector {
            Some(s) => s.parse::<FlowSelector>().map_err(|e| e.to_string())?,
            None => FlowSelector::any(),
        };
        let snaplen = snaplen.unwrap_or(MAX_SNAPLEN);
        if snaplen == 0 || snaplen > MAX_SNAPLEN {
            return Err(format!("snaplen {snaplen}: from 1 to {MAX_SNAPLEN} bytes"));
        }
        Ok(CaptureSpec {
            point,
            port,
            selector,
            snaplen,
            ports: ports.len().min(u16::MAX as usize) as u16,
        })
    }
}

impl Default for CaptureSpec {
    fn default() -> Self {
        CaptureSpec {
            point: CapturePoint::Rx,
            port: None,
            selector: FlowSelector::any(),
            snaplen: MAX_SNAPLEN,
            ports: 0,
        }
    }
}

/// One copied frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedFrame {
    /// CLOCK_MONOTONIC nanoseconds when the worker copied it.
    pub mono_ns: u64,
    pub in_port: u16,
    /// The port it leaves by (`tx`), or the one the pipeline had chosen.
    pub out_port: u16,
    /// The frame's length on the wire (FCS not counted); `data` may be shorter.
    pub len: u32,
    pub data: Vec<u8>,
    /// The capture it was copied for (a frame of an earlier one is not reported).
    generation: u64,
}

/// A capture nobody has read for this long stops: a reader that went away (killed, a closed
/// pipe) must not leave the workers copying.
pub const LEASE_NS: u64 = 2_000_000_000;

/// Why a read or stop was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaptureError {
    #[error("capture {ours} was replaced by capture {now} (another `hotplane capture` started)")]
    Replaced { ours: u64, now: u64 },
}

/// What a capture copies, shared by the control thread and the workers.
pub struct Capturer {
    /// Frames still to copy; 0: off (what workers test).
    remaining: AtomicU64,
    /// The spec and which capture it belongs to, changed together under the lock; workers
    /// only `try_lock` it, once per capture (they keep a copy).
    spec: Mutex<(CaptureSpec, u64)>,
    frames: ArrayQueue<CapturedFrame>,
    /// Frames lost to a full queue.
    lost: AtomicU64,
    /// Which capture this is (its id).
    generation: AtomicU64,
    /// When the reader last read (CLOCK_MONOTONIC ns), for [`LEASE_NS`].
    last_read_ns: AtomicU64,
    /// The running capture was stopped because nobody read it.
    expired: std::sync::atomic::AtomicBool,
}

impl Default for Capturer {
    fn default() -> Self {
        Capturer {
            remaining: AtomicU64::new(0),
            spec: Mutex::new((CaptureSpec::default(), 0)),
            frames: ArrayQueue::new(QUEUE),
            lost: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            last_read_ns: AtomicU64::new(0),
            expired: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

/// A worker's copy of the running capture's spec (taken once per capture).
#[derive(Debug, Clone, Copy)]
pub struct ArmedCapture {
    spec: CaptureSpec,
    generation: u64,
}

/// What a read found.
#[derive(Debug, Default)]
pub struct CaptureRead {
    pub frames: Vec<CapturedFrame>,
    /// Frames still to copy (0: the capture is over).
    pub remaining: u64,
    pub lost: u64,
    /// It stopped because nobody read it for [`LEASE_NS`].
    pub expired: bool,
}

impl Capturer {
    /// Copy the next `count` frames (0: up to [`MAX_COUNT`]) `spec` describes (control thread).
    /// Frames not yet read are dropped. Returns the capture's id and its count.
    pub fn start(&self, mut spec: CaptureSpec, count: u64) -> (u64, u64) {
        self.remaining.store(0, Ordering::Release);
        spec.snaplen = spec.snaplen.clamp(1, MAX_SNAPLEN);
        let id = {
            let mut held = self.spec.lock().unwrap_or_else(|e| e.into_inner());
            // Bumped under the lock: a worker that reads the spec reads its generation too.
            let id = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
            *held = (spec, id);
            id
        };
        while self.frames.pop().is_some() {}
        self.lost.store(0, Ordering::Relaxed);
        self.expired.store(false, Ordering::Relaxed);
        self.last_read_ns.store(hotplane_core::time::now_ns(), Ordering::Relaxed);
        let count = if count == 0 { MAX_COUNT } else { count.min(MAX_COUNT) };
        self.remaining.store(count, Ordering::Release);
        (id, count)
    }

    /// Whether `id` (if given) is the running capture.
    fn owns(&self, id: Option<u64>) -> Result<(), CaptureError> {
        let now = self.generation.load(Ordering::Acquire);
        match id {
            Some(ours) if ours != now => Err(CaptureError::Replaced { ours, now }),
            _ => Ok(()),
        }
    }

    /// Stop capture `id` (or whichever runs).
    pub fn stop(&self, id: Option<u64>) -> Result<(), CaptureError> {
        self.owns(id)?;
        self.remaining.store(0, Ordering::Release);
        Ok(())
    }

    /// Frames so far (at most `max`) of capture `id` (or whichever runs), renewing its lease.
    pub fn read(&self, id: Option<u64>, max: usize) -> Result<CaptureRead, CaptureError> {
        self.owns(id)?;
        self.last_read_ns.store(hotplane_core::time::now_ns(), Ordering::Relaxed);
        let current = self.generation.load(Ordering::Acquire);
        let frames = std::iter::from_fn(|| self.frames.pop())
            .filter(|f| f.generation == current)
            .take(max)
            .collect();
        Ok(CaptureRead {
            frames,
            remaining: self.remaining.load(Ordering::Acquire),
            lost: self.lost.load(Ordering::Relaxed),
            expired: self.expired.load(Ordering::Relaxed),
        })
    }

    /// Stop a capture nobody read for [`LEASE_NS`] (control thread, now and then); true if
    /// it did.
    pub fn expire(&self, now_ns: u64) -> bool {
        let idle = now_ns.saturating_sub(self.last_read_ns.load(Ordering::Relaxed));
        if self.remaining.load(Ordering::Relaxed) != 0 && idle > LEASE_NS {
            self.remaining.store(0, Ordering::Release);
            self.expired.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// The capture a worker applies to its next batch, if one runs: one relaxed load when
    /// off; `cache` keeps the worker's copy of the spec between batches.
    #[inline(always)]
    pub fn armed(&self, cache: &Cell<Option<ArmedCapture>>) -> Option<ArmedCapture> {
        if self.remaining.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.arm(cache)
    }

    #[cold]
    fn arm(&self, cache: &Cell<Option<ArmedCapture>>) -> Option<ArmedCapture> {
        let generation = self.generation.load(Ordering::Acquire);
        if let Some(c) = cache.get().filter(|c| c.generation == generation) {
            return Some(c);
        }
        // Once per capture and worker; a worker that finds the lock held (a start in
        // progress) takes it at its next batch.
        let (spec, generation) = *self.spec.try_lock().ok()?;
        let armed = ArmedCapture { spec, generation };
        cache.set(Some(armed));
        Some(armed)
    }

    /// Copy the packets of `batch` that `point` sees.
    #[cold]
    pub fn offer(&self, armed: &ArmedCapture, point: CapturePoint, batch: &Batch) {
        if armed.spec.point != point {
            return;
        }
        for p in batch.iter() {
            let seen = match point {
                CapturePoint::Rx => true,
                CapturePoint::After(_) => p.meta.verdict == Verdict::Pass,
                // What is sent: to a port that exists (not the controller's, not no route).
                CapturePoint::Tx => {
                    matches!(p.meta.verdict, Verdict::Pass | Verdict::Tx)
                        && p.meta.out_port < armed.spec.ports
                }
                CapturePoint::Drop => p.meta.verdict == Verdict::Drop,
            };
            if seen && !self.copy(armed, p) {
                return;
            }
        }
    }

    /// Copy a replica leaving by its port (`tx` only).
    #[cold]
    pub fn offer_replica(&self, armed: &ArmedCapture, p: &Packet) {
        if armed.spec.point == CapturePoint::Tx && p.meta.out_port < armed.spec.ports {
            self.copy(armed, p);
        }
    }

    /// Copy `p` if it matches; false once the count is reached or the capture changed.
    fn copy(&self, armed: &ArmedCapture, p: &Packet) -> bool {
        let spec = &armed.spec;
        let port = if spec.point == CapturePoint::Tx { p.meta.out_port } else { p.meta.in_port };
        if spec.port.is_some_and(|want| want != port) {
            return true;
        }
        // Classified on a copy of its metadata: capturing never changes what stages see.
        let mut meta = p.meta;
        if !spec.selector.matches(&classify(p.data(), &mut meta)) {
            return true;
        }
        if self.frames.is_full() {
            // The reader is behind: counted, not copied, and the count is not used up.
            self.lost.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        if self.generation.load(Ordering::Acquire) != armed.generation {
            return false; // a new capture started: its count is not this spec's to use
        }
        // Claim one of the remaining frames; another worker may take the last one first.
        let claim = |n: u64| n.checked_sub(1);
        if self.remaining.fetch_update(Ordering::AcqRel, Ordering::Relaxed, claim).is_err() {
            return false;
        }
        let data = p.data();
        let frame = CapturedFrame {
            mono_ns: hotplane_core::time::now_ns(),
            in_port: p.meta.in_port,
            out_port: p.meta.out_port,
            len: data.len() as u32,
            data: data[..data.len().min(spec.snaplen as usize)].to_vec(),
            generation: armed.generation,
        };
        if self.frames.push(frame).is_err() {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_parse_and_unknown_ones_are_named() {
        assert_eq!("rx".parse(), Ok(CapturePoint::Rx));
        assert_eq!("mid".parse(), Ok(CapturePoint::After("mid")));
        let e = "ingress".parse::<CapturePoint>().unwrap_err();
        assert!(e.contains("`ingress`") && e.contains("drop"), "{e}");
    }

    #[test]
    fn requests_name_what_they_refuse() {
        let ports = ["p0", "p1"];
        let spec = CaptureSpec::from_request("tx", Some("p1"), Some("dport=53"), None, &ports);
        let spec = spec.unwrap();
        assert_eq!((spec.point, spec.port, spec.snaplen), (CapturePoint::Tx, Some(1), MAX_SNAPLEN));
        assert_eq!(
            CaptureSpec::from_request("rx", Some("0"), None, Some(9), &ports).unwrap().port,
            Some(0)
        );
        let refused =
            |port, sel, snap| CaptureSpec::from_request("rx", port, sel, snap, &ports).unwrap_err();
        assert_eq!(refused(Some("2"), None, None), "no port `2` (ports: p0, p1)");
        assert!(refused(None, Some("dport=x"), None).contains("dport"));
        assert!(refused(None, None, Some(0)).contains("from 1 to 65535"));
        assert!(refused(None, None, Some(70_000)).contains("snaplen 70000"));
    }

    #[test]
    fn an_idle_capturer_is_not_armed_and_start_clamps() {
        let c = Capturer::default();
        let cache = Cell::new(None);
        assert!(c.armed(&cache).is_none());
        let (id, count) = c.start(CaptureSpec { snaplen: 0, ..Default::default() }, 0);
        assert_eq!(count, MAX_COUNT);
        let armed = c.armed(&cache).expect("armed");
        assert_eq!((armed.spec.snaplen, armed.generation), (1, id));
        c.stop(Some(id)).unwrap();
        assert!(c.armed(&cache).is_none());
    }

    #[test]
    fn a_capture_replaced_or_left_unread_stops_reporting() {
        let c = Capturer::default();
        let (first, _) = c.start(CaptureSpec::default(), 5);
        let (second, _) = c.start(CaptureSpec::default(), 5);
        assert_eq!(
            c.read(Some(first), 10).unwrap_err(),
            CaptureError::Replaced { ours: first, now: second }
        );
        assert!(c.stop(Some(first)).is_err(), "one reader cannot stop another's capture");
        assert_eq!(c.read(Some(second), 10).unwrap().remaining, 5);
        let now = hotplane_core::time::now_ns();
        assert!(!c.expire(now), "just read");
        assert!(c.expire(now + LEASE_NS + 1), "nobody read it for the lease");
        assert!(c.armed(&Cell::new(None)).is_none());
        assert!(c.read(Some(second), 1).unwrap().expired, "a reader learns why it stopped");
    }
}
