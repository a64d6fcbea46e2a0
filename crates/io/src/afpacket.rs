//! `afpacket` ports: Linux packet sockets with TPACKET_V3 memory-mapped rings. Receive reads
//! whole blocks the kernel retires (full, or after `retire_ms`); transmit writes frames into the
//! TX ring and kicks the kernel once per batch. Several workers share an interface through
//! PACKET_FANOUT (hash), so a flow stays on one worker. Frames are copied between the rings
//! and pool buffers: AF_PACKET is a copying interface either way.
//!
//! Needs CAP_NET_RAW. No hugepages, no NIC binding.

use crate::{netns, OpenCtx, Port, PortCounters, PortError};
use hotplane_core::{Batch, PoolCache};
use libc::{c_int, c_void};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Configuration of an `afpacket` port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AfPacketSpec {
    pub interface: String,
    /// Open the sockets inside this network namespace (`ip netns` name).
    pub netns: Option<String>,
    /// RX block size in bytes: a power of two, at least a page.
    pub block_size: u32,
    /// RX blocks.
    pub blocks: u32,
    /// A block is handed over after this many milliseconds even if not full (latency at low rates).
    pub retire_ms: u32,
    /// TX frame size in bytes (frame header plus the largest frame sent).
    pub tx_frame_size: u32,
    /// TX frames.
    pub tx_frames: u32,
    pub promiscuous: bool,
    /// Transmit without the qdisc layer (PACKET_QDISC_BYPASS).
    pub qdisc_bypass: bool,
}

impl Default for AfPacketSpec {
    fn default() -> Self {
        Self {
            interface: String::new(),
            netns: None,
            // One page per block: at moderate rates a block fills (and reaches us) quickly; larger
            // blocks wait for the retire timer and add up to `retire_ms` of latency.
            block_size: 1 << 12,
            blocks: 512,
            retire_ms: 1,
            tx_frame_size: 1 << 11,
            tx_frames: 1024,
            promiscuous: true,
            qdisc_bypass: true,
        }
    }
}

/// Frame data starts this far into a TX frame: TPACKET_ALIGN(sizeof(struct tpacket3_hdr)).
const TX_DATA_OFFSET: usize = 48;
const ETH_P_ALL: u16 = 0x0003;

fn os_err(port: &str, op: &'static str) -> PortError {
    let e = std::io::Error::last_os_error();
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (needs CAP_NET_RAW: run as root or `setcap cap_net_raw+ep` the binary)"
        }
        _ => "",
    };
    PortError::Config { port: port.into(), msg: format!("{op}: {e}{hint}") }
}

fn setsockopt<T>(fd: c_int, level: c_int, name: c_int, v: &T) -> std::io::Result<()> {
    // SAFETY: `v` points to a live T of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            v as *const T as *const c_void,
            std::mem::size_of::<T>() as u32,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The mmap of both rings of one socket.
struct Rings {
    fd: c_int,
    map: *mut u8,
    map_len: usize,
    rx_block_size: usize,
    rx_blocks: usize,
    tx_base: *mut u8,
    tx_frame_size: usize,
    tx_frames: usize,
}

impl Drop for Rings {
    fn drop(&mut self) {
        // SAFETY: map/map_len come from a successful mmap; fd from socket(); both owned here.
        unsafe {
            libc::munmap(self.map as *mut c_void, self.map_len);
            libc::close(self.fd);
        }
    }
}

/// One queue (socket) of an `afpacket` port.
pub struct AfPacketQueue {
    name: String,
    id: u16,
    interface: String,
    rings: Rings,
    /// Next RX block to look at, and the cursor inside the block being read.
    rx_block: usize,
    rx_left: u32,
    rx_offset: usize,
    tx_next: usize,
    counters: Arc<PortCounters>,
    link: crate::Link,
    /// Largest frame the interface takes (MTU + Ethernet and one VLAN header).
    max_frame: usize,
}

// SAFETY: the mapping and fd are owned by this queue and used by one worker at a time.
unsafe impl Send for AfPacketQueue {}

impl AfPacketQueue {
    fn open(
        spec: &AfPacketSpec,
        id: u16,
        name: &str,
        fanout_group: Option<u16>,
    ) -> Result<Self, PortError> {
        let cfg = |msg: String| PortError::Config { port: name.into(), msg };
        let bs = spec.block_size as usize;
        if !bs.is_power_of_two() || bs < 4096 {
            return Err(cfg(format!("block_size = {bs}: must be a power of two of at least 4096")));
        }
        let fs = spec.tx_frame_size as usize;
        if !fs.is_power_of_two() || !(128..=1 << 20).contains(&fs) {
            return Err(cfg(format!(
                "tx_frame_size = {fs}: must be a power of two from 128 to 1 MiB"
            )));
        }
        if spec.blocks == 0 || spec.tx_frames == 0 {
            return Err(cfg("blocks and tx_frames must be at least 1".into()));
        }
        let ifindex = netns::ifindex(&spec.interface).ok_or_else(|| {
            cfg(format!(
                "interface `{}` does not exist{}",
                spec.interface,
                spec.netns
                    .as_ref()
                    .map(|n| format!(" in network namespace `{n}`"))
                    .unwrap_or_default()
            ))
        })?;
        // SAFETY: plain socket creation.
        let fd =
            unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, ETH_P_ALL.to_be() as c_int) };
        if fd < 0 {
            return Err(os_err(name, "opening a packet socket"));
        }
        let fail = |op: &'static str| {
            let e = os_err(name, op);
            // SAFETY: fd is ours and not yet owned by anything else.
            unsafe { libc::close(fd) };
            e
        };
        let sol = libc::SOL_PACKET;
        if setsockopt(fd, sol, libc::PACKET_VERSION, &(libc::tpacket_versions::TPACKET_V3 as c_int))
            .is_err()
        {
            return Err(fail("setting TPACKET_V3"));
        }
        // Our own transmissions would otherwise come back as received packets.
        let _ = setsockopt(fd, sol, libc::PACKET_IGNORE_OUTGOING, &(1 as c_int));
        // Without PACKET_LOSS the kernel stops sending the TX ring at the first frame it refuses.
        if setsockopt(fd, sol, libc::PACKET_LOSS, &(1 as c_int)).is_err() {
            return Err(fail("setting PACKET_LOSS"));
        }
        if spec.qdisc_bypass
            && setsockopt(fd, sol, libc::PACKET_QDISC_BYPASS, &(1 as c_int)).is_err()
        {
            return Err(fail("setting PACKET_QDISC_BYPASS"));
        }
        // TX blocks hold whole frames: at least a page, at least one frame.
        let tx_bs = bs.max(fs);
        let tx_blocks = (spec.tx_frames as usize * fs).div_ceil(tx_bs);
        let tx_frames = tx_blocks * (tx_bs / fs);
        // SAFETY: tpacket_req3 is plain data; zero is a valid value for every field.
        let mut rx_req: libc::tpacket_req3 = unsafe { std::mem::zeroed() };
        rx_req.tp_block_size = bs as u32;
        rx_req.tp_block_nr = spec.blocks;
        rx_req.tp_frame_size = 2048;
        rx_req.tp_frame_nr = (bs / 2048) as u32 * spec.blocks;
        rx_req.tp_retire_blk_tov = spec.retire_ms.max(1);
        if setsockopt(fd, sol, libc::PACKET_RX_RING, &rx_req).is_err() {
            return Err(fail("creating the RX ring"));
        }
        // SAFETY: as above.
        let mut tx_req: libc::tpacket_req3 = unsafe { std::mem::zeroed() };
        tx_req.tp_block_size = tx_bs as u32;
        tx_req.tp_block_nr = tx_blocks as u32;
        tx_req.tp_frame_size = fs as u32;
        tx_req.tp_frame_nr = tx_frames as u32;
        if setsockopt(fd, sol, libc::PACKET_TX_RING, &tx_req).is_err() {
            return Err(fail("creating the TX ring"));
        }
        let rx_len = bs * spec.blocks as usize;
        let map_len = rx_len + tx_blocks * tx_bs;
        // SAFETY: mapping the socket's rings (RX then TX, as the kernel lays them out).
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(fail("mapping the rings"));
        }
        let rings = Rings {
            fd,
            map: map as *mut u8,
            map_len,
            rx_block_size: bs,
            rx_blocks: spec.blocks as usize,
            // SAFETY: rx_len < map_len.
            tx_base: unsafe { (map as *mut u8).add(rx_len) },
            tx_frame_size: fs,
            tx_frames,
        };
        // From here `rings` owns fd and the mapping.
        // SAFETY: sockaddr_ll is plain data.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex as c_int;
        // SAFETY: binding with a valid sockaddr_ll of the size passed.
        let rc = unsafe {
            libc::bind(
                fd,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc != 0 {
            return Err(os_err(name, "binding to the interface"));
        }
        if spec.promiscuous {
            // SAFETY: packet_mreq is plain data.
            let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
            mr.mr_ifindex = ifindex as c_int;
            mr.mr_type = libc::PACKET_MR_PROMISC as u16;
            if setsockopt(fd, sol, libc::PACKET_ADD_MEMBERSHIP, &mr).is_err() {
                return Err(os_err(name, "enabling promiscuous mode"));
            }
        }
        if let Some(group) = fanout_group {
            let arg: c_int = group as c_int | ((libc::PACKET_FANOUT_HASH as c_int) << 16);
            if setsockopt(fd, sol, libc::PACKET_FANOUT, &arg).is_err() {
                return Err(os_err(name, "joining the fanout group"));
            }
        }
        Ok(Self {
            name: name.into(),
            id,
            interface: spec.interface.clone(),
            rings,
            rx_block: 0,
            rx_left: 0,
            rx_offset: 0,
            tx_next: 0,
            counters: Arc::new(PortCounters::default()),
            link: crate::Link::default(),
            max_frame: mtu(fd, &spec.interface).map_or(usize::MAX, |m| m + 18),
        })
    }

    fn block(&self, i: usize) -> *mut u8 {
        // SAFETY: i < rx_blocks, so the block lies inside the RX part of the mapping.
        unsafe { self.rings.map.add(i * self.rings.rx_block_size) }
    }

    /// The block's status word, shared with the kernel.
    fn block_status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: tpacket_block_desc starts with version (u32), offset_to_priv (u32), then
        // tpacket_hdr_v1 whose first field is block_status (u32): offset 8, 4-byte aligned, in
        // the mapping for as long as `self` lives.
        unsafe { &*(self.block(i).add(8) as *const AtomicU32) }
    }

    fn tx_status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: frame i lies inside the TX part of the mapping; tp_status is the u32 at
        // offset 20 of tpacket3_hdr, 4-byte aligned.
        unsafe { &*(self.rings.tx_base.add(i * self.rings.tx_frame_size + 20) as *const AtomicU32) }
    }
}

impl Port for AfPacketQueue {
    fn name(&self) -> &str {
        &self.name
    }

    fn wakeup(&self) -> crate::Wakeup {
        // Readable when TPACKET_V3 retires a block (full, or after `retire_ms`).
        crate::Wakeup::Fd(self.rings.fd)
    }

    fn recv(&mut self, batch: &mut Batch, cache: &mut PoolCache, now_ns: u64) -> usize {
        let before = batch.len();
        let bs = self.rings.rx_block_size;
        while batch.room() > 0 {
            if self.rx_left == 0 {
                let st = self.block_status(self.rx_block).load(Ordering::Acquire);
                if st & libc::TP_STATUS_USER == 0 {
                    break;
                }
                let b = self.block(self.rx_block);
                // SAFETY: the block is ours until we hand it back; num_pkts is the u32 at
                // offset 12 and offset_to_first_pkt at offset 16 of the block descriptor.
                let (num, first) = unsafe {
                    (
                        std::ptr::read_volatile(b.add(12) as *const u32),
                        std::ptr::read_volatile(b.add(16) as *const u32),
                    )
                };
                if num == 0 || first as usize >= bs {
                    self.release_block();
                    continue;
                }
                self.rx_left = num;
                self.rx_offset = first as usize;
            }
            let b = self.block(self.rx_block);
            // SAFETY: rx_offset < block size (checked when set); tpacket3_hdr fields read at
            // their ABI offsets: next_offset 0, snaplen 12, mac 24.
            let (next, snaplen, mac) = unsafe {
                let h = b.add(self.rx_offset);
                (
                    std::ptr::read_volatile(h as *const u32) as usize,
                    std::ptr::read_volatile(h.add(12) as *const u32) as usize,
                    std::ptr::read_volatile(h.add(24) as *const u16) as usize,
                )
            };
            let start = self.rx_offset + mac;
            if self.rx_offset + 48 > bs || start + snaplen > bs {
                // The kernel never writes this; if it ever did, drop the block, not the worker.
                self.counters.errors.add(1);
                self.release_block();
                continue;
            }
            // SAFETY: [start, start + snaplen) lies inside the block (checked above).
            let frame = unsafe { std::slice::from_raw_parts(b.add(start), snaplen) };
            let ok = crate::deliver(frame, self.id, now_ns, batch, cache, &self.counters);
            self.rx_left -= 1;
            self.rx_offset += next;
            if self.rx_left == 0 || next == 0 || self.rx_offset >= bs {
                self.rx_left = 0;
                self.release_block();
            }
            if !ok {
                break;
            }
        }
        batch.len() - before
    }

    fn send(&mut self, batch: &mut Batch, cache: &mut PoolCache, _now_ns: u64) -> usize {
        let fs = self.rings.tx_frame_size;
        let mut queued = 0;
        let mut bytes = 0u64;
        for p in batch.drain() {
            let len = p.len();
            if self.link.is_down() || len + TX_DATA_OFFSET > fs || len > self.max_frame {
                if !self.link.is_down() {
                    self.counters.errors.add(1);
                }
                self.counters.tx_dropped.add(1);
                cache.free(p);
                continue;
            }
            let i = self.tx_next;
            let st = self.tx_status(i).load(Ordering::Acquire);
            if st == libc::TP_STATUS_WRONG_FORMAT {
                // The kernel refused what we put here last time; count it, reuse the frame.
                self.counters.errors.add(1);
            } else if st != libc::TP_STATUS_AVAILABLE {
                self.counters.tx_dropped.add(1);
                cache.free(p);
                continue;
            }
            // SAFETY: frame i is ours (status AVAILABLE or WRONG_FORMAT); the data fits
            // (checked above); tp_len is the u32 at 16, tp_snaplen at 12, next_offset at 0.
            unsafe {
                let f = self.rings.tx_base.add(i * fs);
                std::ptr::copy_nonoverlapping(p.data().as_ptr(), f.add(TX_DATA_OFFSET), len);
                std::ptr::write_volatile(f as *mut u32, 0);
                std::ptr::write_volatile(f.add(12) as *mut u32, len as u32);
                std::ptr::write_volatile(f.add(16) as *mut u32, len as u32);
            }
            self.tx_status(i).store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.tx_next = (i + 1) % self.rings.tx_frames;
            queued += 1;
            bytes += len as u64;
            cache.free(p);
        }
        if queued > 0 {
            // SAFETY: a zero-length sendto on our socket asks the kernel to send the ring.
            let rc = unsafe {
                libc::sendto(
                    self.rings.fd,
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                if !matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::ENOBUFS | libc::EINTR)) {
                    self.link.error(&e, &self.counters, &self.name, &self.interface);
                }
            }
            self.counters.tx_packets.add(queued);
            self.counters.tx_bytes.add(bytes);
        }
        queued as usize
    }

    fn counters(&self) -> Arc<PortCounters> {
        self.counters.clone()
    }

    fn housekeeping(&mut self) {
        if self.link.is_down() {
            return;
        }
        // Packets the kernel dropped (ring full, frame larger than a block) never reach us:
        // PACKET_STATISTICS reports them (and resets), so they are counted too.
        // SAFETY: tpacket_stats_v3 is plain data.
        let mut st: libc::tpacket_stats_v3 = unsafe { std::mem::zeroed() };
        let mut st_len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: reading PACKET_STATISTICS into a struct of the size given.
        let rc = unsafe {
            libc::getsockopt(
                self.rings.fd,
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                &mut st as *mut _ as *mut c_void,
                &mut st_len,
            )
        };
        if rc == 0 && st.tp_drops > 0 {
            self.counters.rx_dropped.add(st.tp_drops as u64);
        }
        self.link.check(self.rings.fd, &self.counters, &self.name, &self.interface);
    }
}

impl AfPacketQueue {
    fn release_block(&mut self) {
        self.block_status(self.rx_block).store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.rx_block = (self.rx_block + 1) % self.rings.rx_blocks;
        self.rx_left = 0;
    }
}

/// The interface's MTU (SIOCGIFMTU).
fn mtu(fd: c_int, ifname: &str) -> Option<usize> {
    // SAFETY: ifreq is plain data; the name is copied in NUL-terminated (at most IFNAMSIZ - 1).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(ifname.bytes().take(libc::IFNAMSIZ - 1)) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFMTU reads the name and writes ifru_mtu of a valid ifreq.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFMTU, &mut req) };
    if rc != 0 {
        return None;
    }
    // SAFETY: on success the kernel wrote the mtu member of the union.
    Some(unsafe { req.ifr_ifru.ifru_mtu } as usize)
}

/// Open an `afpacket` port: one socket per worker, sharing the interface by fanout.
pub fn open(spec: &AfPacketSpec, cx: &OpenCtx<'_>) -> Result<Vec<Box<dyn Port>>, PortError> {
    let queues = cx.pools.len().max(1);
    // A fanout group id unique to this port in this process.
    let group = (std::process::id() as u16).wrapping_mul(31).wrapping_add(cx.id);
    netns::run_in(spec.netns.as_deref(), || {
        (0..queues)
            .map(|_| {
                AfPacketQueue::open(spec, cx.id, cx.name, (queues > 1).then_some(group))
                    .map(|q| Box::new(q) as Box<dyn Port>)
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .map_err(|e| PortError::Config { port: cx.name.into(), msg: e.to_string() })?
}
