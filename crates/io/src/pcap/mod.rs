//! `pcap` ports: replay a capture file (pcap or pcapng) as the receive side, write transmitted
//! packets to a pcap file. A capture is one queue; with several workers it is spread by the
//! software-RSS wrapper.

pub mod format;

use crate::{OpenCtx, Port, PortCounters, PortError};
use format::{CaptureReader, CaptureWriter};
use hotplane_core::{time, Batch, PoolCache};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::PathBuf;
use std::sync::Arc;

/// Configuration of a `pcap` port.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PcapSpec {
    /// Capture to replay as received traffic.
    pub read: Option<PathBuf>,
    /// File to write transmitted packets to (classic pcap, nanosecond timestamps).
    pub write: Option<PathBuf>,
    /// Replay rate in packets per second; as fast as possible when absent.
    pub rate_pps: Option<f64>,
    /// Times to replay the file; 0 replays forever.
    pub loops: u32,
}

impl Default for PcapSpec {
    fn default() -> Self {
        Self { read: None, write: None, rate_pps: None, loops: 1 }
    }
}

/// The single queue of a `pcap` port.
pub struct PcapPort {
    name: String,
    id: u16,
    spec: PcapSpec,
    reader: Option<CaptureReader<BufReader<File>>>,
    writer: Option<CaptureWriter<BufWriter<File>>>,
    loops_done: u32,
    done: bool,
    record: Vec<u8>,
    /// `record` holds the first packet, read at open to check the capture, not yet delivered.
    first_pending: bool,
    counters: Arc<PortCounters>,
    start_ns: u64,
    replayed: u64,
}

fn open_reader(port: &str, path: &PathBuf) -> Result<CaptureReader<BufReader<File>>, PortError> {
    let f = File::open(path).map_err(|source| PortError::Io {
        port: port.into(),
        path: path.display().to_string(),
        source,
    })?;
    CaptureReader::new(BufReader::new(f)).map_err(|source| PortError::Capture {
        port: port.into(),
        path: path.display().to_string(),
        source,
    })
}

impl PcapPort {
    pub fn open(spec: &PcapSpec, id: u16, name: &str) -> Result<Self, PortError> {
        if let Some(r) = spec.rate_pps {
            if !(r.is_finite() && r > 0.0) {
                return Err(PortError::Config {
                    port: name.into(),
                    msg: format!("rate_pps = {r}: must be a positive number"),
                });
            }
        }
        if spec.read.is_none() && spec.write.is_none() {
            return Err(PortError::Config {
                port: name.into(),
                msg: "a pcap port needs `read`, `write` or both".into(),
            });
        }
        let mut reader = spec.read.as_ref().map(|p| open_reader(name, p)).transpose()?;
        // The first record is read now: a capture damaged from the start is an error at open,
        // not an empty replay, and `loops = 0` over no packets would idle forever.
        let mut record = Vec::with_capacity(2048);
        let mut first_pending = false;
        if let (Some(r), Some(path)) = (reader.as_mut(), spec.read.as_ref()) {
            first_pending = r
                .next_record(&mut record)
                .map_err(|source| PortError::Capture {
                    port: name.into(),
                    path: path.display().to_string(),
                    source,
                })?
                .is_some();
            if !first_pending && spec.loops == 0 {
                return Err(PortError::Config {
                    port: name.into(),
                    msg: format!(
                        "loops = 0 on {}, a capture with no packets: nothing to loop over",
                        path.display()
                    ),
                });
            }
        }
        let writer = match &spec.write {
            None => None,
            Some(path) => {
                let f = File::create(path).map_err(|source| PortError::Io {
                    port: name.into(),
                    path: path.display().to_string(),
                    source,
                })?;
                Some(CaptureWriter::new(BufWriter::with_capacity(1 << 16, f), 65535).map_err(
                    |source| PortError::Io {
                        port: name.into(),
                        path: path.display().to_string(),
                        source,
                    },
                )?)
            }
        };
        Ok(Self {
            name: name.into(),
            id,
            done: reader.is_none(),
            spec: spec.clone(),
            reader,
            writer,
            loops_done: 0,
            record,
            first_pending,
            counters: Arc::new(PortCounters::default()),
            start_ns: 0,
            replayed: 0,
        })
    }

    /// Next record, reopening the file for another loop at its end.
    fn next_record(&mut self) -> Option<()> {
        if std::mem::take(&mut self.first_pending) {
            return Some(());
        }
        loop {
            let reader = self.reader.as_mut()?;
            match reader.next_record(&mut self.record) {
                Ok(Some(_)) => return Some(()),
                Ok(None) => {
                    self.loops_done += 1;
                    if self.spec.loops != 0 && self.loops_done >= self.spec.loops {
                        self.reader = None;
                        return None;
                    }
                    let path = self.spec.read.clone()?;
                    match open_reader(&self.name, &path) {
                        Ok(r) => self.reader = Some(r),
                        Err(e) => {
                            tracing::error!(error = %e, "cannot reopen capture for the next loop");
                            self.counters.errors.add(1);
                            self.counters.link_down.add(1);
                            self.reader = None;
                            return None;
                        }
                    }
                    if self.replayed == 0 {
                        // An empty file would loop forever without yielding anything.
                        self.reader = None;
                        return None;
                    }
                }
                Err(e) => {
                    // The port is down for good (`link_down`, as for an interface that went
                    // away) and `hotplane run` fails; replaying the good part again and again
                    // would hide the damage.
                    tracing::error!(port = %self.name, error = %e, "capture unreadable; stopping replay");
                    self.counters.errors.add(1);
                    self.counters.link_down.add(1);
                    self.reader = None;
                    return None;
                }
            }
        }
    }
}

impl Port for PcapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(&mut self, batch: &mut Batch, cache: &mut PoolCache, now_ns: u64) -> usize {
        if self.done {
            return 0;
        }
        let mut want = batch.room();
        if let Some(rate) = self.spec.rate_pps {
            if self.start_ns == 0 {
                self.start_ns = now_ns;
            }
            let due = ((now_ns - self.start_ns) as f64 * rate / 1e9) as u64 + 1;
            want = want.min(due.saturating_sub(self.replayed) as usize);
        }
        let before = batch.len();
        for _ in 0..want {
            if self.next_record().is_none() {
                self.done = true;
                break;
            }
            self.replayed += 1;
            // A record larger than a buffer (a jumbo frame into a standard pool) is counted and
            // skipped; without a free buffer the record is counted as dropped and reading pauses.
            if !crate::deliver(&self.record, self.id, now_ns, batch, cache, &self.counters) {
                break;
            }
        }
        batch.len() - before
    }

    fn send(&mut self, batch: &mut Batch, cache: &mut PoolCache, _now_ns: u64) -> usize {
        let n = batch.len();
        let Some(w) = self.writer.as_mut() else {
            self.counters.tx_dropped.add(n as u64);
            batch.free_all(cache);
            return 0;
        };
        let ts = time::unix_micros() * 1000;
        let mut sent = 0;
        for p in batch.drain() {
            match w.write(ts, p.data()) {
                Ok(()) => {
                    sent += 1;
                    self.counters.tx_bytes.add(p.len() as u64);
                }
                Err(_) => {
                    self.counters.tx_dropped.add(1);
                    self.counters.errors.add(1);
                }
            }
            cache.free(p);
        }
        self.counters.tx_packets.add(sent as u64);
        sent
    }

    fn counters(&self) -> Arc<PortCounters> {
        self.counters.clone()
    }

    fn rx_done(&self) -> bool {
        self.done
    }

    fn flush(&mut self) {
        if let Some(w) = self.writer.as_mut() {
            if let Err(e) = w.flush() {
                tracing::error!(port = %self.name, error = %e, "capture write failed");
                self.counters.errors.add(1);
            }
        }
    }
}

impl Drop for PcapPort {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Open a `pcap` port: one queue, spread over `cx.pools.len()` workers by software RSS.
pub fn open(spec: &PcapSpec, cx: &OpenCtx<'_>) -> Result<Vec<Box<dyn Port>>, PortError> {
    let port = PcapPort::open(spec, cx.id, cx.name)?;
    Ok(crate::rss::spread(Box::new(port), cx.pools.len().max(1), cx.burst))
}

#[cfg(test)]
mod tests {
    use super::*;
    use format::CaptureWriter;

    struct TempFile(PathBuf);
    impl TempFile {
        fn new(name: &str, bytes: &[u8]) -> Self {
            let p = std::env::temp_dir()
                .join(format!("hotplane-io-pcap-{name}-{}", std::process::id()));
            std::fs::write(&p, bytes).unwrap();
            TempFile(p)
        }
    }
    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn classic(frames: &[&[u8]]) -> Vec<u8> {
        let mut w = CaptureWriter::new(Vec::new(), 65535).unwrap();
        for f in frames {
            w.write(1, f).unwrap();
        }
        w.into_inner()
    }

    fn spec(path: &TempFile, loops: u32) -> PcapSpec {
        PcapSpec { read: Some(path.0.clone()), loops, ..Default::default() }
    }

    #[test]
    fn loops_forever_over_no_packets_is_refused_at_open() {
        let header_only = TempFile::new("header-only", &classic(&[]));
        let e = PcapPort::open(&spec(&header_only, 0), 0, "p").err().expect("refused");
        assert!(e.to_string().contains("no packets"), "{e}");
        // Replayed a finite number of times, an empty capture is simply over.
        assert!(PcapPort::open(&spec(&header_only, 1), 0, "p").is_ok());
    }

    #[test]
    fn empty_or_corrupt_capture_is_refused_at_open() {
        let empty = TempFile::new("empty", b"");
        let e = PcapPort::open(&spec(&empty, 0), 0, "p").err().expect("refused");
        assert!(e.to_string().contains("empty file, no pcap header"), "{e}");
        let mut bytes = classic(&[b"abcd"]);
        bytes[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        let corrupt = TempFile::new("corrupt-first", &bytes);
        for loops in [0, 1] {
            let e = PcapPort::open(&spec(&corrupt, loops), 0, "p").err().expect("refused");
            assert!(e.to_string().contains("at byte 24"), "{e}");
        }
    }
}
