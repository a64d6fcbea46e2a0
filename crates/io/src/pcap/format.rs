//! Capture files: a reader for classic pcap (both byte orders, micro- and nanosecond) and
//! pcapng (section, interface, enhanced/simple/obsolete packet blocks), and a classic pcap
//! writer (nanosecond resolution). Outside input: every length is checked, nothing panics.

use std::io::{self, Read, Write};

/// Largest record accepted; real captures stay far below (jumbo frames are 9 KiB).
pub const MAX_RECORD: usize = 256 * 1024;
/// Largest pcapng block accepted.
const MAX_BLOCK: usize = MAX_RECORD + 4096;
const LINKTYPE_ETHERNET: u32 = 1;

/// Why a capture cannot be read. Errors about the content name the byte offset of the record
/// or block at fault, so a damaged file can be inspected (`xxd -s OFFSET`).
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("read failed: {0}")]
    Io(#[from] io::Error),
    #[error("empty file, no pcap header")]
    Empty,
    #[error("not a pcap or pcapng file (magic {0:#010x})")]
    BadMagic(u32),
    #[error("link type {0} is not supported (only Ethernet, 1)")]
    Linktype(u32),
    #[error("record at byte {offset}: {len} bytes exceeds the {MAX_RECORD}-byte limit")]
    TooLarge { len: usize, offset: u64 },
    #[error("file ends in the middle of the record or header at byte {offset}")]
    Truncated { offset: u64 },
    #[error("malformed capture at byte {offset}: {what}")]
    Malformed { what: &'static str, offset: u64 },
}

impl CaptureError {
    /// Byte offset of the record, block or header at fault, when the error is about content.
    pub fn offset(&self) -> Option<u64> {
        match self {
            CaptureError::TooLarge { offset, .. }
            | CaptureError::Truncated { offset }
            | CaptureError::Malformed { offset, .. } => Some(*offset),
            CaptureError::Empty | CaptureError::BadMagic(_) => Some(0),
            CaptureError::Io(_) | CaptureError::Linktype(_) => None,
        }
    }
}

/// The input with a count of the bytes consumed, so errors can say where they are.
struct Counting<R> {
    inner: R,
    pos: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endian {
    Little,
    Big,
}

impl Endian {
    fn u16(self, b: &[u8]) -> u16 {
        let a = [b[0], b[1]];
        match self {
            Endian::Little => u16::from_le_bytes(a),
            Endian::Big => u16::from_be_bytes(a),
        }
    }
    fn u32(self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        match self {
            Endian::Little => u32::from_le_bytes(a),
            Endian::Big => u32::from_be_bytes(a),
        }
    }
}

enum Format {
    Pcap { endian: Endian, nanos: bool },
    PcapNg { endian: Endian, interfaces: Vec<Iface> },
}

#[derive(Clone, Copy)]
struct Iface {
    linktype: u16,
    snaplen: u32,
    /// Timestamp units per second.
    units: u64,
}

/// One record's metadata; its bytes are in the buffer passed to `next_record`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordInfo {
    /// Capture time in nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Length on the wire (may exceed the captured bytes).
    pub orig_len: u32,
}

/// Reads packets from a pcap or pcapng stream.
pub struct CaptureReader<R: Read> {
    inner: Counting<R>,
    format: Format,
    block: Vec<u8>,
}

/// Fill `buf` completely, or report how the stream ended: `Ok(false)` for a clean end before
/// the first byte, `Truncated` (naming `start`, where the unit being read begins) for an end
/// in the middle.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8], start: u64) -> Result<bool, CaptureError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => {
                return if got == 0 {
                    Ok(false)
                } else {
                    Err(CaptureError::Truncated { offset: start })
                }
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}

impl<R: Read> CaptureReader<R> {
    pub fn new(inner: R) -> Result<Self, CaptureError> {
        let mut inner = Counting { inner, pos: 0 };
        let mut magic = [0u8; 4];
        if !read_full(&mut inner, &mut magic, 0)? {
            return Err(CaptureError::Empty);
        }
        let le = u32::from_le_bytes(magic);
        let format = match le {
            0xa1b2_c3d4 | 0xa1b2_3c4d | 0xd4c3_b2a1 | 0x4d3c_b2a1 => {
                let endian = if le == 0xa1b2_c3d4 || le == 0xa1b2_3c4d {
                    Endian::Little
                } else {
                    Endian::Big
                };
                let nanos = le == 0xa1b2_3c4d || le == 0x4d3c_b2a1;
                let mut rest = [0u8; 20];
                if !read_full(&mut inner, &mut rest, 0)? {
                    return Err(CaptureError::Truncated { offset: 0 });
                }
                let linktype = endian.u32(&rest[16..20]) & 0x0fff_ffff;
                if linktype != LINKTYPE_ETHERNET {
                    return Err(CaptureError::Linktype(linktype));
                }
                Format::Pcap { endian, nanos }
            }
            0x0a0d_0d0a => {
                let mut len = [0u8; 4];
                if !read_full(&mut inner, &mut len, 0)? {
                    return Err(CaptureError::Truncated { offset: 0 });
                }
                let endian = section_header(&mut inner, len, 0)?;
                Format::PcapNg { endian, interfaces: Vec::new() }
            }
            other => return Err(CaptureError::BadMagic(other)),
        };
        Ok(Self { inner, format, block: Vec::new() })
    }

    /// Read the next packet into `buf` (replacing its contents). `Ok(None)` at the end.
    pub fn next_record(&mut self, buf: &mut Vec<u8>) -> Result<Option<RecordInfo>, CaptureError> {
        match self.format {
            Format::Pcap { endian, nanos } => {
                let start = self.inner.pos;
                let mut h = [0u8; 16];
                if !read_full(&mut self.inner, &mut h, start)? {
                    return Ok(None);
                }
                let (sec, frac) = (endian.u32(&h[0..4]) as u64, endian.u32(&h[4..8]) as u64);
                let incl = endian.u32(&h[8..12]) as usize;
                let orig = endian.u32(&h[12..16]);
                if incl > MAX_RECORD {
                    return Err(CaptureError::TooLarge { len: incl, offset: start });
                }
                buf.resize(incl, 0);
                if incl > 0 && !read_full(&mut self.inner, buf, start)? {
                    return Err(CaptureError::Truncated { offset: start });
                }
                let ts_ns = sec.saturating_mul(1_000_000_000).saturating_add(if nanos {
                    frac
                } else {
                    frac.saturating_mul(1000)
                });
                Ok(Some(RecordInfo { ts_ns, orig_len: orig }))
            }
            Format::PcapNg { .. } => self.next_ng(buf),
        }
    }

    fn next_ng(&mut self, buf: &mut Vec<u8>) -> Result<Option<RecordInfo>, CaptureError> {
        loop {
            let Format::PcapNg { endian, .. } = self.format else { unreachable!() };
            let start = self.inner.pos;
            let malformed = |what| CaptureError::Malformed { what, offset: start };
            let mut h = [0u8; 8];
            if !read_full(&mut self.inner, &mut h, start)? {
                return Ok(None);
            }
            let btype = endian.u32(&h[0..4]);
            if btype == 0x0a0d_0d0a {
                // A new section: its byte order may differ from the last one's.
                let endian = section_header(&mut self.inner, [h[4], h[5], h[6], h[7]], start)?;
                self.format = Format::PcapNg { endian, interfaces: Vec::new() };
                continue;
            }
            let total = endian.u32(&h[4..8]) as usize;
            if !(12..=MAX_BLOCK).contains(&total) || total % 4 != 0 {
                return Err(malformed("pcapng block length"));
            }
            self.block.resize(total - 8, 0);
            if !read_full(&mut self.inner, &mut self.block, start)? {
                return Err(CaptureError::Truncated { offset: start });
            }
            let body = &self.block[..total - 12];
            let Format::PcapNg { interfaces, .. } = &mut self.format else { unreachable!() };
            match btype {
                1 => {
                    if body.len() < 8 {
                        return Err(malformed("interface description block"));
                    }
                    let linktype = endian.u16(&body[0..2]);
                    let snaplen = endian.u32(&body[4..8]);
                    let units = if_tsresol(endian, &body[8..]);
                    interfaces.push(Iface { linktype, snaplen, units });
                }
                6 | 2 => {
                    // Enhanced (6) and obsolete (2) packet blocks share the layout that matters.
                    if body.len() < 20 {
                        return Err(malformed("packet block"));
                    }
                    let iface = if btype == 6 {
                        endian.u32(&body[0..4]) as usize
                    } else {
                        endian.u16(&body[0..2]) as usize
                    };
                    let ts =
                        ((endian.u32(&body[4..8]) as u64) << 32) | endian.u32(&body[8..12]) as u64;
                    let cap = endian.u32(&body[12..16]) as usize;
                    let orig = endian.u32(&body[16..20]);
                    if cap > body.len() - 20 {
                        return Err(malformed("packet block captured length"));
                    }
                    let Some(ifc) = interfaces.get(iface).copied() else {
                        return Err(malformed("packet block names an undeclared interface"));
                    };
                    if ifc.linktype as u32 != LINKTYPE_ETHERNET {
                        return Err(CaptureError::Linktype(ifc.linktype as u32));
                    }
                    buf.clear();
                    buf.extend_from_slice(&body[20..20 + cap]);
                    return Ok(Some(RecordInfo { ts_ns: to_ns(ts, ifc.units), orig_len: orig }));
                }
                3 => {
                    if body.len() < 4 {
                        return Err(malformed("simple packet block"));
                    }
                    let Some(ifc) = interfaces.first().copied() else {
                        return Err(malformed("simple packet block before any interface"));
                    };
                    if ifc.linktype as u32 != LINKTYPE_ETHERNET {
                        return Err(CaptureError::Linktype(ifc.linktype as u32));
                    }
                    let orig = endian.u32(&body[0..4]);
                    let mut cap = (orig as usize).min(body.len() - 4);
                    if ifc.snaplen != 0 {
                        cap = cap.min(ifc.snaplen as usize);
                    }
                    buf.clear();
                    buf.extend_from_slice(&body[4..4 + cap]);
                    return Ok(Some(RecordInfo { ts_ns: 0, orig_len: orig }));
                }
                _ => {} // statistics, name resolution, custom blocks: not needed
            }
        }
    }
}

/// The rest of a section header block, after its type word and its length bytes `len`: the
/// byte-order magic decides how to read the length, then the body is skipped.
fn section_header<R: Read>(r: &mut R, len: [u8; 4], start: u64) -> Result<Endian, CaptureError> {
    let malformed = |what| CaptureError::Malformed { what, offset: start };
    let mut bom = [0u8; 4];
    if !read_full(r, &mut bom, start)? {
        return Err(CaptureError::Truncated { offset: start });
    }
    let endian = match u32::from_le_bytes(bom) {
        0x1a2b_3c4d => Endian::Little,
        0x4d3c_2b1a => Endian::Big,
        _ => return Err(malformed("pcapng byte-order magic")),
    };
    let total = endian.u32(&len) as usize;
    if !(28..=MAX_BLOCK).contains(&total) || total % 4 != 0 {
        return Err(malformed("pcapng section header length"));
    }
    let mut rest = vec![0u8; total - 12];
    if !read_full(r, &mut rest, start)? {
        return Err(CaptureError::Truncated { offset: start });
    }
    Ok(endian)
}

/// Timestamp resolution from an interface block's options (code 9), default microseconds.
fn if_tsresol(endian: Endian, mut opts: &[u8]) -> u64 {
    while opts.len() >= 4 {
        let code = endian.u16(&opts[0..2]);
        let len = endian.u16(&opts[2..4]) as usize;
        let padded = len.div_ceil(4) * 4;
        if code == 0 || opts.len() < 4 + padded {
            break;
        }
        if code == 9 && len >= 1 {
            let v = opts[4];
            let exp = (v & 0x7f) as u32;
            return if v & 0x80 == 0 {
                10u64.checked_pow(exp).unwrap_or(1_000_000)
            } else {
                1u64.checked_shl(exp).unwrap_or(1_000_000)
            };
        }
        opts = &opts[4 + padded..];
    }
    1_000_000
}

fn to_ns(ts: u64, units: u64) -> u64 {
    if units == 0 {
        return 0;
    }
    let secs = ts / units;
    let frac = ts % units;
    secs.saturating_mul(1_000_000_000)
        .saturating_add((frac as u128 * 1_000_000_000 / units as u128) as u64)
}

/// Writes a classic pcap file with nanosecond timestamps.
pub struct CaptureWriter<W: Write> {
    inner: W,
}

impl<W: Write> CaptureWriter<W> {
    pub fn new(mut inner: W, snaplen: u32) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&snaplen.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        inner.write_all(&h)?;
        Ok(Self { inner })
    }

    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> io::Result<()> {
        self.write_cut(ts_ns, frame, frame.len() as u32)
    }

    /// Write the first bytes of a frame that was `wire_len` bytes long (a snap length cut it).
    pub fn write_cut(&mut self, ts_ns: u64, frame: &[u8], wire_len: u32) -> io::Result<()> {
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&wire_len.max(frame.len() as u32).to_le_bytes());
        self.inner.write_all(&h)?;
        self.inner.write_all(frame)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    pub fn into_inner(self) -> W {
        self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classic(frames: &[&[u8]]) -> Vec<u8> {
        let mut w = CaptureWriter::new(Vec::new(), 65535).unwrap();
        for (i, f) in frames.iter().enumerate() {
            w.write(1_000_000_000 + i as u64, f).unwrap();
        }
        w.into_inner()
    }

    #[test]
    fn classic_round_trip() {
        let file = classic(&[b"abc", b"", b"0123456789"]);
        let mut r = CaptureReader::new(&file[..]).unwrap();
        let mut buf = Vec::new();
        let mut got = Vec::new();
        while let Some(info) = r.next_record(&mut buf).unwrap() {
            got.push((info.ts_ns, buf.clone()));
        }
        assert_eq!(got.len(), 3);
        assert_eq!(got[2], (1_000_000_002, b"0123456789".to_vec()));
    }

    #[test]
    fn big_endian_microsecond_pcap() {
        let mut f = Vec::new();
        f.extend_from_slice(&0xa1b2c3d4u32.to_be_bytes());
        f.extend_from_slice(&[0, 2, 0, 4]);
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&65535u32.to_be_bytes());
        f.extend_from_slice(&1u32.to_be_bytes());
        f.extend_from_slice(&5u32.to_be_bytes());
        f.extend_from_slice(&7u32.to_be_bytes());
        f.extend_from_slice(&2u32.to_be_bytes());
        f.extend_from_slice(&2u32.to_be_bytes());
        f.extend_from_slice(&[0xaa, 0xbb]);
        let mut r = CaptureReader::new(&f[..]).unwrap();
        let mut buf = Vec::new();
        let info = r.next_record(&mut buf).unwrap().unwrap();
        assert_eq!(info.ts_ns, 5_000_007_000);
        assert_eq!(buf, vec![0xaa, 0xbb]);
        assert!(r.next_record(&mut buf).unwrap().is_none());
    }

    fn ng_block(t: u32, body: &[u8]) -> Vec<u8> {
        let mut b = body.to_vec();
        while b.len() % 4 != 0 {
            b.push(0);
        }
        let total = (b.len() + 12) as u32;
        let mut out = Vec::new();
        out.extend_from_slice(&t.to_le_bytes());
        out.extend_from_slice(&total.to_le_bytes());
        out.extend_from_slice(&b);
        out.extend_from_slice(&total.to_le_bytes());
        out
    }

    #[test]
    fn pcapng_with_nanosecond_interface() {
        let mut f = ng_block(
            0x0a0d0d0a,
            &[0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        );
        let mut idb = vec![1, 0, 0, 0, 0, 0, 1, 0];
        idb.extend_from_slice(&[9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
        f.extend(ng_block(1, &idb));
        f.extend(ng_block(5, &[1, 2, 3, 4])); // statistics: skipped
        let mut epb = Vec::new();
        epb.extend_from_slice(&0u32.to_le_bytes());
        let ts: u64 = 3_000_000_005;
        epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(ts as u32).to_le_bytes());
        epb.extend_from_slice(&3u32.to_le_bytes());
        epb.extend_from_slice(&60u32.to_le_bytes());
        epb.extend_from_slice(b"xyz");
        f.extend(ng_block(6, &epb));
        let mut r = CaptureReader::new(&f[..]).unwrap();
        let mut buf = Vec::new();
        let info = r.next_record(&mut buf).unwrap().unwrap();
        assert_eq!((info.ts_ns, info.orig_len), (3_000_000_005, 60));
        assert_eq!(buf, b"xyz");
        assert!(r.next_record(&mut buf).unwrap().is_none());
    }

    #[test]
    fn errors_are_reported_not_panicked() {
        assert!(matches!(
            CaptureReader::new(&b"nope-not-a-capture"[..]),
            Err(CaptureError::BadMagic(_))
        ));
        assert!(matches!(
            CaptureReader::new(&b"\xd4\xc3"[..]),
            Err(CaptureError::Truncated { offset: 0 })
        ));
        let mut file = classic(&[b"abcdef"]);
        file.truncate(file.len() - 2);
        let mut r = CaptureReader::new(&file[..]).unwrap();
        assert!(matches!(
            r.next_record(&mut Vec::new()),
            Err(CaptureError::Truncated { offset: 24 })
        ));
        let mut file = classic(&[b"a"]);
        file[20] = 105; // linktype 105 (802.11)
        assert!(matches!(CaptureReader::new(&file[..]), Err(CaptureError::Linktype(105))));
        let mut file = classic(&[b"a"]);
        file[32..36].copy_from_slice(&(MAX_RECORD as u32 + 1).to_le_bytes());
        let mut r = CaptureReader::new(&file[..]).unwrap();
        assert!(matches!(
            r.next_record(&mut Vec::new()),
            Err(CaptureError::TooLarge { offset: 24, .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn reader_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            for prefix in [&b"\xd4\xc3\xb2\xa1"[..], &b"\x0a\x0d\x0d\x0a"[..], &b""[..]] {
                let mut f = prefix.to_vec();
                f.extend_from_slice(&bytes);
                if let Ok(mut r) = CaptureReader::new(&f[..]) {
                    let mut buf = Vec::new();
                    for _ in 0..64 {
                        match r.next_record(&mut buf) {
                            Ok(Some(_)) => {}
                            _ => break,
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod hostile_tests {
    use super::*;

    fn classic(frames: &[&[u8]]) -> Vec<u8> {
        let mut w = CaptureWriter::new(Vec::new(), 65535).unwrap();
        for f in frames {
            w.write(1, f).unwrap();
        }
        w.into_inner()
    }

    #[test]
    fn empty_file_is_not_a_truncated_record() {
        let e = CaptureReader::new(&b""[..]).err().expect("an empty file is refused");
        assert!(matches!(e, CaptureError::Empty), "{e:?}");
        assert_eq!(e.to_string(), "empty file, no pcap header");
    }

    #[test]
    fn corrupt_record_error_names_its_offset() {
        // Second record declares more bytes than any record may have: the error points at it.
        let mut file = classic(&[b"abcd", b"efgh"]);
        let second = 24 + 16 + 4;
        file[second + 8..second + 12].copy_from_slice(&(MAX_RECORD as u32 + 1).to_le_bytes());
        let mut r = CaptureReader::new(&file[..]).unwrap();
        let mut buf = Vec::new();
        assert!(r.next_record(&mut buf).unwrap().is_some());
        let e = r.next_record(&mut buf).unwrap_err();
        assert_eq!(e.offset(), Some(second as u64), "{e}");
        assert!(e.to_string().contains(&format!("at byte {second}")), "{e}");
        // A record cut short names where the cut record starts.
        let mut file = classic(&[b"abcd", b"efgh"]);
        file.truncate(file.len() - 1);
        let mut r = CaptureReader::new(&file[..]).unwrap();
        r.next_record(&mut buf).unwrap();
        let e = r.next_record(&mut buf).unwrap_err();
        assert_eq!(e.offset(), Some(second as u64), "{e}");
    }
}
