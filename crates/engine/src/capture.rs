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
use hotplane_core::{Batch, Packet, Verdict};
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
        Ok(CaptureSpec { point, port, selector, snaplen })
    }
}

impl Default for CaptureSpec {
    fn default() -> Self {
        CaptureSpec {
            point: CapturePoint::Rx,
            port: None,
            selector: FlowSelector::any(),
            snaplen: MAX_SNAPLEN,
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
}

/// What a capture copies, shared by the control thread and the workers.
pub struct Capturer {
    /// Frames still to copy; 0: off (what workers test).
    remaining: AtomicU64,
    /// Workers only `try_lock` it, and only while armed.
    spec: Mutex<CaptureSpec>,
    frames: ArrayQueue<CapturedFrame>,
    /// Frames lost to a full queue.
    lost: AtomicU64,
    /// Which capture this is: frames copied under an earlier one are not reported into it.
    generation: AtomicU64,
}

impl Default for Capturer {
    fn default() -> Self {
        Capturer {
            remaining: AtomicU64::new(0),
            spec: Mutex::new(CaptureSpec::default()),
            frames: ArrayQueue::new(QUEUE),
            lost: AtomicU64::new(0),
            generation: AtomicU64::new(0),
        }
    }
}

/// A worker's view of an armed capture for one batch.
#[derive(Debug, Clone, Copy)]
pub struct ArmedCapture {
    spec: CaptureSpec,
    generation: u64,
}

impl Capturer {
    /// Copy the next `count` frames (0: up to [`MAX_COUNT`]) `spec` describes (control thread).
    /// Frames not yet read are dropped.
    pub fn start(&self, mut spec: CaptureSpec, count: u64) -> u64 {
        self.remaining.store(0, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
        spec.snaplen = spec.snaplen.clamp(1, MAX_SNAPLEN);
        *self.spec.lock().unwrap_or_else(|e| e.into_inner()) = spec;
        while self.frames.pop().is_some() {}
        self.lost.store(0, Ordering::Relaxed);
        let count = if count == 0 { MAX_COUNT } else { count.min(MAX_COUNT) };
        self.remaining.store(count, Ordering::Release);
        count
    }

    pub fn stop(&self) {
        self.remaining.store(0, Ordering::Release);
    }

    /// Frames so far (at most `max`), frames still to copy, frames lost.
    pub fn read(&self, max: usize) -> (Vec<CapturedFrame>, u64, u64) {
        let frames = std::iter::from_fn(|| self.frames.pop()).take(max).collect();
        (frames, self.remaining.load(Ordering::Acquire), self.lost.load(Ordering::Relaxed))
    }

    /// The capture a worker applies to its next batch, if one is running (one relaxed load
    /// when off).
    #[inline(always)]
    pub fn armed(&self) -> Option<ArmedCapture> {
        if self.remaining.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.arm()
    }

    #[cold]
    fn arm(&self) -> Option<ArmedCapture> {
        let spec = *self.spec.try_lock().ok()?;
        Some(ArmedCapture { spec, generation: self.generation.load(Ordering::Acquire) })
    }

    /// Copy the packets of `batch` that `point` sees.
    #[cold]
    pub fn offer(&self, armed: &ArmedCapture, point: CapturePoint, batch: &mut Batch) {
        if armed.spec.point != point {
            return;
        }
        for p in batch.iter_mut() {
            let seen = match point {
                CapturePoint::Rx => true,
                CapturePoint::After(_) => p.meta.verdict == Verdict::Pass,
                CapturePoint::Tx => matches!(p.meta.verdict, Verdict::Pass | Verdict::Tx),
                CapturePoint::Drop => p.meta.verdict == Verdict::Drop,
            };
            if seen && !self.copy(armed, p) {
                return;
            }
        }
    }

    /// Copy a replica leaving by `port` (`tx` only).
    #[cold]
    pub fn offer_replica(&self, armed: &ArmedCapture, p: &mut Packet) {
        if armed.spec.point == CapturePoint::Tx {
            self.copy(armed, p);
        }
    }

    /// Copy `p` if it matches; false once the count is reached.
    fn copy(&self, armed: &ArmedCapture, p: &mut Packet) -> bool {
        let spec = &armed.spec;
        let port = if spec.point == CapturePoint::Tx { p.meta.out_port } else { p.meta.in_port };
        if spec.port.is_some_and(|want| want != port) || !spec.selector.matches(&p.classify()) {
            return true;
        }
        if self.generation.load(Ordering::Acquire) != armed.generation {
            return false; // a new capture started meanwhile
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
        assert!(c.armed().is_none());
        assert_eq!(c.start(CaptureSpec { snaplen: 0, ..Default::default() }, 0), MAX_COUNT);
        let armed = c.armed().expect("armed");
        assert_eq!(armed.spec.snaplen, 1);
        c.stop();
        assert!(c.armed().is_none());
    }
}
