//! `afxdp` ports: AF_XDP sockets, one per queue and worker, fed by a small XDP program that
//! redirects each queue's frames to its socket (`xdp_redirect.bpf.c`, loaded with aya). The
//! program attaches in native (driver) mode when the driver supports it and falls back to
//! generic (SKB) mode; sockets bind zero-copy when the driver supports it and fall back to copy
//! mode. Frames are copied between the socket's UMEM and the worker's pool buffers.
//!
//! Needs CAP_NET_RAW, CAP_BPF and CAP_NET_ADMIN (or root). The program detaches when the port is
//! dropped (normal exit, SIGINT/SIGTERM); a program left attached by another process is removed
//! and replaced.

mod netlink;

use crate::{netns, OpenCtx, Port, PortCounters, PortError};
use aya::maps::XskMap;
use aya::programs::{Xdp, XdpFlags};
use aya::Ebpf;
use hotplane_core::{Batch, PoolCache};
use serde::{Deserialize, Serialize};
use std::num::NonZeroU32;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig, User};

/// The compiled redirect program (see `build-xdp.sh`).
/// (Aligned: the ELF parser reads headers in place.)
static XDP_OBJECT: &[u8] = aya::include_bytes_aligned!("xdp_redirect.bpf.o");
const PROGRAM: &str = "hotplane_redirect";
const XSKMAP: &str = "hotplane_xsks";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// Native if the driver supports it, else generic.
    #[default]
    Auto,
    /// Driver (native) mode only.
    Native,
    /// Generic (SKB) mode: works on every interface, slower.
    Skb,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ZeroCopy {
    /// Zero-copy if the driver supports it, else copy mode.
    #[default]
    Auto,
    On,
    Off,
}

/// Configuration of an `afxdp` port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AfXdpSpec {
    pub interface: String,
    /// Open the sockets inside this network namespace.
    pub netns: Option<String>,
    /// Queues to bind (one socket each); default one per worker. With fewer queues than
    /// workers, queue 0 is shared by software RSS.
    pub queues: Option<u32>,
    pub mode: XdpMode,
    pub zero_copy: ZeroCopy,
    /// UMEM frames per socket (half receive, half transmit).
    pub frames: u32,
    /// UMEM frame size: 2048 or 4096.
    pub frame_size: u32,
    /// Entries of each ring (RX, TX, fill, completion): a power of two.
    pub ring_size: u32,
}

impl Default for AfXdpSpec {
    fn default() -> Self {
        Self {
            interface: String::new(),
            netns: None,
            queues: None,
            mode: XdpMode::Auto,
            zero_copy: ZeroCopy::Auto,
            frames: 4096,
            frame_size: 2048,
            ring_size: 2048,
        }
    }
}

/// The attached program; detached when the last queue is dropped.
struct Attachment {
    _bpf: Mutex<Ebpf>,
}

// SAFETY: Ebpf holds file descriptors and plain data; it is only touched under the mutex (and
// dropped once, by the last Arc).
unsafe impl Send for Attachment {}
// SAFETY: see above.
unsafe impl Sync for Attachment {}

/// An anonymous, page-aligned mapping used as UMEM.
struct Area {
    ptr: NonNull<u8>,
    len: usize,
}

impl Area {
    fn new(len: usize) -> std::io::Result<Self> {
        // SAFETY: anonymous private mapping; the kernel picks a page-aligned address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self { ptr: NonNull::new(p as *mut u8).ok_or_else(std::io::Error::last_os_error)?, len })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: from mmap with this length; the sockets using it are closed before (field order).
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len) };
    }
}

/// One AF_XDP socket (queue) of a port. Field order is drop order: rings and sockets close
/// before their UMEM is unmapped, and the program detaches last.
pub struct AfXdpQueue {
    name: String,
    id: u16,
    interface: String,
    rx: RingRx,
    tx: RingTx,
    device: DeviceQueue,
    _user: User,
    _socket: Socket,
    _umem: Umem,
    area: Area,
    frame_size: u64,
    /// UMEM frames free for transmission.
    free_tx: Vec<u64>,
    /// Received frames not yet given back to the fill ring (it was full).
    refill: Vec<u64>,
    counters: Arc<PortCounters>,
    fd: libc::c_int,
    link: crate::Link,
    /// Set once the socket is registered: keeps the program attached while the queue lives.
    attachment: Option<Arc<Attachment>>,
    /// Kernel drop counts already added to our counters (the socket's are cumulative).
    seen_kernel_drops: u64,
    seen_invalid_tx: u64,
    /// The XDP attach mode and the copy mode taken (`generic (SKB) XDP, copy`).
    mode: String,
}

// SAFETY: every ring, socket and mapping is owned by this queue and used by one worker at a time.
unsafe impl Send for AfXdpQueue {}

fn errno(e: xdpilone::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.get_raw())
}

fn privilege_hint(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (needs CAP_NET_RAW, CAP_BPF and CAP_NET_ADMIN: run as root)"
        }
        _ => "",
    }
}

impl AfXdpQueue {
    /// Drain completions into the free list.
    fn reap(&mut self) {
        let mut c = self.device.complete(self.free_tx.capacity() as u32);
        while let Some(addr) = c.read() {
            self.free_tx.push(addr & !(self.frame_size - 1));
        }
        c.release();
    }

    fn give_back(&mut self) {
        if self.refill.is_empty() {
            return;
        }
        let mut n = 0;
        while n < self.refill.len() {
            let mut f = self.device.fill((self.refill.len() - n) as u32);
            let k = f.insert(self.refill[n..].iter().copied()) as usize;
            f.commit();
            if k == 0 {
                break;
            }
            n += k;
        }
        self.refill.drain(..n);
        if self.device.needs_wakeup() {
            self.device.wake();
        }
    }

    /// In copy mode the kernel transmits only when asked, at most 32 frames per request, and
    /// stops early when the device is busy: ask again while descriptors are pending.
    #[inline]
    fn kick_tx(&mut self) {
        if self.tx.pending() > 0 || self.tx.needs_wakeup() && !self.free_tx_full() {
            self.tx.wake();
        }
    }

    fn free_tx_full(&self) -> bool {
        self.free_tx.len() == self.free_tx.capacity()
    }
}

impl Port for AfXdpQueue {
    fn name(&self) -> &str {
        &self.name
    }

    fn wakeup(&self) -> crate::Wakeup {
        crate::Wakeup::Fd(self.fd)
    }

    fn recv(&mut self, batch: &mut Batch, cache: &mut PoolCache, now_ns: u64) -> usize {
        let before = batch.len();
        let room = batch.room() as u32;
        if room > 0 {
            let (base, len) = (self.area.ptr.as_ptr(), self.area.len as u64);
            let mut rx = self.rx.receive(room);
            while let Some(d) = rx.read() {
                let end = d.addr.saturating_add(d.len as u64);
                if end <= len {
                    // SAFETY: [addr, addr + len) lies inside the UMEM (checked); the kernel
                    // handed this frame to us until we put it back in the fill ring.
                    let frame = unsafe {
                        std::slice::from_raw_parts(base.add(d.addr as usize), d.len as usize)
                    };
                    crate::deliver(frame, self.id, now_ns, batch, cache, &self.counters);
                } else {
                    self.counters.errors.add(1);
                }
                self.refill.push(d.addr & !(self.frame_size - 1));
            }
            rx.release();
        }
        self.give_back();
        self.kick_tx();
        batch.len() - before
    }

    fn send(&mut self, batch: &mut Batch, cache: &mut PoolCache, _now_ns: u64) -> usize {
        self.reap();
        let fs = self.frame_size as usize;
        let base = self.area.ptr.as_ptr();
        let mut descs: [XdpDesc; hotplane_core::MAX_BATCH] =
            [XdpDesc { addr: 0, len: 0, options: 0 }; hotplane_core::MAX_BATCH];
        let mut n = 0;
        for p in batch.drain() {
            if self.link.is_down() || p.len() > fs {
                if !self.link.is_down() {
                    self.counters.errors.add(1);
                }
                self.counters.tx_dropped.add(1);
                cache.free(p);
                continue;
            }
            let Some(frame) = self.free_tx.pop() else {
                self.counters.tx_dropped.add(1);
                cache.free(p);
                continue;
            };
            // SAFETY: `frame` is a free TX frame of our UMEM (nobody else writes it until we
            // post it); the data fits a frame (checked above).
            unsafe {
                std::ptr::copy_nonoverlapping(p.data().as_ptr(), base.add(frame as usize), p.len())
            };
            descs[n] = XdpDesc { addr: frame, len: p.len() as u32, options: 0 };
            n += 1;
            cache.free(p);
        }
        if n == 0 {
            return 0;
        }
        // A reservation covers what the ring's cached view shows free; a short one means "look
        // again", which refreshes the view. Stop only when a fresh look finds nothing.
        let mut posted = 0;
        while posted < n {
            let mut w = self.tx.transmit((n - posted) as u32);
            let k = w.insert(descs[posted..n].iter().copied()) as usize;
            w.commit();
            if k == 0 {
                break;
            }
            posted += k;
        }
        // What the ring could not take goes back to the free list, counted as dropped.
        for d in &descs[posted..n] {
            self.free_tx.push(d.addr);
        }
        self.counters.tx_dropped.add((n - posted) as u64);
        let bytes: u64 = descs[..posted].iter().map(|d| d.len as u64).sum();
        self.kick_tx();
        self.counters.tx_packets.add(posted as u64);
        self.counters.tx_bytes.add(bytes);
        posted
    }

    fn counters(&self) -> Arc<PortCounters> {
        self.counters.clone()
    }

    fn mode(&self) -> String {
        self.mode.clone()
    }

    fn housekeeping(&mut self) {
        self.reap();
        self.give_back();
        if self.link.is_down() {
            return;
        }
        // Frames the kernel dropped before they reached us (larger than a UMEM frame, ring
        // full) are only in the socket's statistics.
        if let Ok(st) = self.device.statistics_v2() {
            let drops = st.rx_dropped + st.rx_ring_full;
            self.counters.rx_dropped.add(drops.saturating_sub(self.seen_kernel_drops));
            self.counters.errors.add(st.tx_invalid_descs.saturating_sub(self.seen_invalid_tx));
            self.seen_kernel_drops = drops;
            self.seen_invalid_tx = st.tx_invalid_descs;
        }
        self.link.check(self.fd, &self.counters, &self.name, &self.interface);
    }
}

/// Load the redirect program and attach it to `ifindex` in the requested mode; returns it with
/// the mode it took (`native`, `generic (SKB)`).
fn attach(
    port: &str,
    ifname: &str,
    ifindex: u32,
    mode: XdpMode,
) -> Result<(Ebpf, &'static str), PortError> {
    let cfg = |msg: String| PortError::Config { port: port.into(), msg };
    let mut bpf = Ebpf::load(XDP_OBJECT).map_err(|e| {
        let hint = match &e {
            aya::EbpfError::MapError(_) | aya::EbpfError::ProgramError(_) => {
                " (loading BPF needs CAP_BPF and CAP_NET_ADMIN: run as root)"
            }
            _ => "",
        };
        cfg(format!("loading the XDP program: {}{hint}", chain(&e)))
    })?;
    let prog: &mut Xdp = bpf
        .program_mut(PROGRAM)
        .ok_or_else(|| cfg("the XDP object has no program `hotplane_redirect`".into()))?
        .try_into()
        .map_err(|e| cfg(format!("XDP program: {e}")))?;
    prog.load().map_err(|e| {
        cfg(format!("loading the XDP program: {e} (needs CAP_BPF and CAP_NET_ADMIN: run as root)"))
    })?;
    let tries: &[(XdpFlags, &'static str)] = match mode {
        XdpMode::Auto => &[(XdpFlags::DRV_MODE, "native"), (XdpFlags::SKB_MODE, "generic (SKB)")],
        XdpMode::Native => &[(XdpFlags::DRV_MODE, "native")],
        XdpMode::Skb => &[(XdpFlags::SKB_MODE, "generic (SKB)")],
    };
    let mut last = String::new();
    for (i, (flags, label)) in tries.iter().enumerate() {
        let mut r = prog.attach_to_if_index(ifindex, *flags);
        if let Err(e) = &r {
            if is_busy(e) {
                // Another program sits on the interface (a crashed run, `ip link ... xdp`): replace it.
                tracing::warn!(
                    port,
                    interface = ifname,
                    "an XDP program is already attached; replacing it"
                );
                for f in [XdpFlags::DRV_MODE.bits(), XdpFlags::SKB_MODE.bits(), 0] {
                    let _ = netlink::detach(ifindex, f);
                }
                r = prog.attach_to_if_index(ifindex, *flags);
            }
        }
        match r {
            Ok(_) => {
                if i > 0 {
                    tracing::warn!(
                        port,
                        interface = ifname,
                        "native XDP unavailable ({last}); using {label} mode"
                    );
                }
                return Ok((bpf, label));
            }
            Err(e) => last = chain(&e),
        }
    }
    let hint = if mode == XdpMode::Native {
        "; set mode = \"auto\" to fall back to generic (SKB) mode"
    } else {
        ""
    };
    Err(cfg(format!("attaching XDP to `{ifname}` in {mode:?} mode failed: {last}{hint}")))
}

/// An error with its sources: aya keeps the OS error one level down.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

fn is_busy(e: &aya::programs::ProgramError) -> bool {
    let text = format!("{e:?}");
    text.contains("EBUSY")
        || text.contains("Device or resource busy")
        || text.contains("File exists")
}

/// One socket on queue `queue` with its own UMEM.
fn socket(
    spec: &AfXdpSpec,
    cx: &OpenCtx<'_>,
    ifindex: u32,
    queue: u32,
    zero_copy: bool,
) -> Result<AfXdpQueue, std::io::Error> {
    let fs = spec.frame_size as usize;
    let area = Area::new(spec.frames as usize * fs)?;
    let cfg = UmemConfig {
        fill_size: spec.ring_size,
        complete_size: spec.ring_size,
        frame_size: spec.frame_size,
        headroom: 0,
        flags: 0,
    };
    let slice = NonNull::slice_from_raw_parts(area.ptr, area.len);
    // SAFETY: the area is page aligned (mmap), `frames * frame_size` bytes long, and outlives the
    // UMEM (field order of AfXdpQueue).
    let umem = unsafe { Umem::new(cfg, slice) }.map_err(errno)?;
    let mut info = IfInfo::invalid();
    info.from_ifindex(ifindex).map_err(errno)?;
    info.set_queue(queue);
    let sock = Socket::with_shared(&info, &umem).map_err(errno)?;
    let mut device = umem.fq_cq(&sock).map_err(errno)?;
    let copy_flag =
        if zero_copy { SocketConfig::XDP_BIND_ZEROCOPY } else { SocketConfig::XDP_BIND_COPY };
    let ring = NonZeroU32::new(spec.ring_size);
    let user = umem
        .rx_tx(
            &sock,
            &SocketConfig {
                rx_size: ring,
                tx_size: ring,
                bind_flags: copy_flag | SocketConfig::XDP_BIND_NEED_WAKEUP,
            },
        )
        .map_err(errno)?;
    let rx = user.map_rx().map_err(errno)?;
    let tx = user.map_tx().map_err(errno)?;
    umem.bind(&user).map_err(errno)?;
    // Half the frames wait in the fill ring for received packets, half are for transmission.
    let half = spec.frames / 2;
    {
        let mut f = device.fill(half);
        f.insert((0..half as u64).map(|i| i * fs as u64));
        f.commit();
    }
    let free_tx: Vec<u64> = (half as u64..spec.frames as u64).map(|i| i * fs as u64).collect();
    let fd = rx.as_raw_fd();
    Ok(AfXdpQueue {
        name: cx.name.into(),
        id: cx.id,
        interface: spec.interface.clone(),
        rx,
        tx,
        device,
        _user: user,
        _socket: sock,
        _umem: umem,
        area,
        frame_size: fs as u64,
        free_tx,
        refill: Vec::with_capacity(spec.ring_size as usize),
        counters: Arc::new(PortCounters::default()),
        fd,
        link: crate::Link::default(),
        attachment: None,
        seen_kernel_drops: 0,
        seen_invalid_tx: 0,
        mode: if zero_copy { "zero-copy" } else { "copy" }.into(),
    })
}

/// Make a socket on `queue`, zero-copy if asked and possible.
fn socket_with_fallback(
    spec: &AfXdpSpec,
    cx: &OpenCtx<'_>,
    ifindex: u32,
    queue: u32,
) -> Result<AfXdpQueue, std::io::Error> {
    match spec.zero_copy {
        ZeroCopy::On => socket(spec, cx, ifindex, queue, true),
        ZeroCopy::Off => socket_when_free(spec, cx, ifindex, queue, false),
        ZeroCopy::Auto => socket(spec, cx, ifindex, queue, true).or_else(|e| {
            if queue == 0 {
                // Said at info: a veth never has it. The mode taken is in the start line and
                // the statistics (`Port::mode`).
                tracing::info!(port = cx.name, interface = %spec.interface, error = %e,
                    "zero-copy unavailable; using copy mode");
            }
            socket_when_free(spec, cx, ifindex, queue, false)
        }),
    }
}

/// [`socket`], waiting a little while the queue is busy: the kernel releases a closed socket's
/// hold on a queue asynchronously, so right after the zero-copy attempt failed (or a process
/// that used the interface exited) binding can fail with EBUSY for a few milliseconds. Only
/// when a port opens, never on the fast path.
fn socket_when_free(
    spec: &AfXdpSpec,
    cx: &OpenCtx<'_>,
    ifindex: u32,
    queue: u32,
    zero_copy: bool,
) -> Result<AfXdpQueue, std::io::Error> {
    const TRIES: u32 = 50;
    let mut tries = 0;
    loop {
        match socket(spec, cx, ifindex, queue, zero_copy) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < TRIES => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

fn validate(spec: &AfXdpSpec, workers: usize, port: &str) -> Result<(), PortError> {
    let cfg = |msg: String| Err(PortError::Config { port: port.into(), msg });
    if spec.interface.is_empty() {
        return cfg("interface: an afxdp port needs an interface".into());
    }
    if spec.frame_size != 2048 && spec.frame_size != 4096 {
        return cfg(format!("frame_size = {}: must be 2048 or 4096", spec.frame_size));
    }
    if !spec.ring_size.is_power_of_two() || spec.ring_size < 64 {
        return cfg(format!(
            "ring_size = {}: must be a power of two of at least 64",
            spec.ring_size
        ));
    }
    if spec.frames < 2 * spec.ring_size {
        return cfg(format!(
            "frames = {}: needs at least 2 x ring_size ({})",
            spec.frames,
            2 * spec.ring_size
        ));
    }
    if let Some(q) = spec.queues {
        if q != 1 && q as usize != workers {
            return cfg(format!("queues = {q}: must be 1 (shared by software RSS) or the number of workers ({workers})"));
        }
    }
    Ok(())
}

/// Open an `afxdp` port: attach the redirect program, one socket per queue and worker.
pub fn open(spec: &AfXdpSpec, cx: &OpenCtx<'_>) -> Result<Vec<Box<dyn Port>>, PortError> {
    let workers = cx.pools.len().max(1);
    validate(spec, workers, cx.name)?;
    let want = spec.queues.unwrap_or(workers as u32).max(1);
    let cfg = |msg: String| PortError::Config { port: cx.name.into(), msg };
    let opened = netns::run_in(spec.netns.as_deref(), || {
        // aya unwraps in a few places (kernel version parsing); a panic there must not take the
        // process down with it.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| open_here(spec, cx, want)))
            .unwrap_or_else(|_| Err(cfg("setting up AF_XDP panicked (see the log)".into())))
    })
    .map_err(|e| cfg(e.to_string()))??;
    Ok(if opened.len() == workers {
        opened
    } else {
        let one = opened.into_iter().next().ok_or_else(|| cfg("no socket opened".into()))?;
        crate::rss::spread(one, workers, cx.burst)
    })
}

fn open_here(
    spec: &AfXdpSpec,
    cx: &OpenCtx<'_>,
    want: u32,
) -> Result<Vec<Box<dyn Port>>, PortError> {
    let cfg = |msg: String| PortError::Config { port: cx.name.into(), msg };
    let ifindex = netns::ifindex(&spec.interface).ok_or_else(|| {
        cfg(format!(
            "interface `{}` does not exist{}",
            spec.interface,
            spec.netns.as_ref().map(|n| format!(" in network namespace `{n}`")).unwrap_or_default()
        ))
    })?;
    let (mut bpf, xdp_mode) = attach(cx.name, &spec.interface, ifindex, spec.mode)?;
    let mut queues = Vec::with_capacity(want as usize);
    for q in 0..want {
        match socket_with_fallback(spec, cx, ifindex, q) {
            Ok(s) => queues.push(s),
            Err(e) if q > 0 => {
                tracing::warn!(port = cx.name, interface = %spec.interface, error = %e,
                    "cannot bind queue {q}; using queue 0 only, shared by software RSS");
                queues.truncate(1);
                break;
            }
            Err(e) => {
                return Err(cfg(format!(
                    "AF_XDP socket on `{}` queue 0: {e}{}",
                    spec.interface,
                    privilege_hint(&e)
                )))
            }
        }
    }
    {
        let map = bpf.map_mut(XSKMAP).ok_or_else(|| cfg("the XDP object has no XSKMAP".into()))?;
        let mut xsks = XskMap::try_from(map).map_err(|e| cfg(format!("XSKMAP: {e}")))?;
        for (q, s) in queues.iter().enumerate() {
            // SAFETY: the fd belongs to a socket that lives in `queues` for this whole block.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(s.fd) };
            xsks.set(q as u32, fd, 0)
                .map_err(|e| cfg(format!("registering the socket of queue {q}: {e}")))?;
        }
    }
    let attachment = Arc::new(Attachment { _bpf: Mutex::new(bpf) });
    Ok(queues
        .into_iter()
        .map(|mut q| {
            q.attachment = Some(attachment.clone());
            q.mode = format!("{xdp_mode} XDP, {}", q.mode);
            Box::new(q) as Box<dyn Port>
        })
        .collect())
}
