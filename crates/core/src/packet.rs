//! `Packet`: a frame in a pool buffer, with headroom and per-packet metadata.

use crate::pool::PoolCore;
use core::ptr::NonNull;

/// Sentinel for "no port chosen".
pub const NO_PORT: u16 = u16::MAX;

/// What happens to a packet after the stage that set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Verdict {
    /// Continue through the pipeline; at the end it is sent to `meta.out_port`.
    #[default]
    Pass = 0,
    /// Free the packet; later stages do not see it.
    Drop = 1,
    /// Send to `meta.out_port` now; later stages do not see it (XDP_TX / XDP_REDIRECT).
    Tx = 2,
    /// Hand the packet to the control thread (in-band updates); later stages do not see it.
    Punt = 3,
}

/// Bit flags for the layers the classifier found, in `Meta::layers`.
pub struct Layers;

impl Layers {
    pub const ETHERNET: u8 = 1 << 0;
    pub const VLAN: u8 = 1 << 1;
    pub const IPV4: u8 = 1 << 2;
    pub const IPV6: u8 = 1 << 3;
    pub const TCP: u8 = 1 << 4;
    pub const UDP: u8 = 1 << 5;
    /// An IP fragment: no transport ports in its flow key.
    pub const FRAGMENT: u8 = 1 << 6;
}

/// Per-packet metadata, shared by every kind of program (DESIGN.md principle 4).
/// Offsets are relative to the first byte of the frame; 0 means "layer absent".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meta {
    /// Receive timestamp in nanoseconds of `time::now_ns` (one reading per batch).
    pub rx_ts: u64,
    /// Free for programs (a P4 metadata word, a Lua mark, ...). Zero on receive.
    pub user: u64,
    pub flow_hash: u32,
    pub in_port: u16,
    pub out_port: u16,
    pub l3_off: u16,
    pub l4_off: u16,
    pub payload_off: u16,
    pub layers: u8,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    #[error("not enough headroom: need {need}, have {have}")]
    NoHeadroom { need: usize, have: usize },
    #[error("not enough tailroom: need {need}, have {have}")]
    NoTailroom { need: usize, have: usize },
    #[error("frame would become shorter than zero bytes")]
    Underflow,
}

/// A frame owned exclusively by its holder, living in one buffer of a [`crate::Pool`].
///
/// ```text
/// buffer: [ headroom | data (len bytes) | tailroom ]
///           ^0        ^head             ^head+len   ^capacity
/// ```
/// Dropping a `Packet` returns its buffer to the pool's shared free queue; on the fast path,
/// `PoolCache::free` returns it to the worker's local cache instead.
pub struct Packet {
    base: NonNull<u8>,
    pub(crate) core: NonNull<PoolCore>,
    pub(crate) index: u32,
    head: u16,
    len: u16,
    capacity: u16,
    pub meta: Meta,
}

// SAFETY: a Packet is the only handle to its buffer (buffer indices are unique in the pool's free
// structures and leave them only into one Packet), and `PoolCore` is `Sync`; moving the handle to
// another thread moves that exclusive ownership with it.
unsafe impl Send for Packet {}

impl Packet {
    /// # Safety
    /// `base` must point to a buffer of `capacity` bytes inside `core`'s arena at `index`, owned
    /// by no other `Packet`, and `core` must stay alive until the packet is dropped or freed.
    pub(crate) unsafe fn from_raw(
        base: NonNull<u8>,
        core: NonNull<PoolCore>,
        index: u32,
        capacity: u16,
        headroom: u16,
    ) -> Self {
        Self { base, core, index, head: headroom, len: 0, capacity, meta: Meta::default() }
    }

    /// The frame bytes.
    #[inline(always)]
    pub fn data(&self) -> &[u8] {
        // SAFETY: head + len <= capacity is an invariant of every mutator, and the buffer is
        // exclusively ours for as long as `self` lives.
        unsafe {
            core::slice::from_raw_parts(
                self.base.as_ptr().add(self.head as usize),
                self.len as usize,
            )
        }
    }

    /// The frame bytes, writable.
    #[inline(always)]
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`; `&mut self` guarantees no other borrow of the buffer.
        unsafe {
            core::slice::from_raw_parts_mut(
                self.base.as_ptr().add(self.head as usize),
                self.len as usize,
            )
        }
    }

    /// The frame bytes and the metadata, both writable at once: per-packet code shared with
    /// [`crate::Stage::run_one`] (which gets the two apart) works on a packet in place, without
    /// copying the metadata out and back.
    #[inline(always)]
    pub fn frame_mut(&mut self) -> (&mut [u8], &mut Meta) {
        // SAFETY: as in `data_mut`; the buffer and the `meta` field do not overlap.
        let data = unsafe {
            core::slice::from_raw_parts_mut(
                self.base.as_ptr().add(self.head as usize),
                self.len as usize,
            )
        };
        (data, &mut self.meta)
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The frame's first byte as a raw pointer that also reaches the headroom in front of
    /// it, and the headroom's length: for code that writes new headers in front of the
    /// payload before moving the start with [`Packet::adjust_head`] (hotplane-p4's native
    /// deparser). The pointer is valid until `self` is next used.
    #[inline(always)]
    pub fn head_ptr(&mut self) -> (*mut u8, usize) {
        // SAFETY: head <= capacity is an invariant; the result keeps the provenance of the
        // whole buffer, which `&mut self` makes ours alone.
        (unsafe { self.base.as_ptr().add(self.head as usize) }, self.head as usize)
    }

    /// Bytes free in front of the frame.
    pub fn headroom(&self) -> usize {
        self.head as usize
    }

    /// Bytes free after the frame.
    pub fn tailroom(&self) -> usize {
        (self.capacity - self.head - self.len) as usize
    }

    /// Longest frame that fits from the current start.
    pub fn max_len(&self) -> usize {
        (self.capacity - self.head) as usize
    }

    /// Buffer index inside its pool (stable identity for zero-copy ports).
    pub fn buffer_index(&self) -> u32 {
        self.index
    }

    /// Parse the frame: fill `meta`'s layers, offsets and flow hash; return the flow key.
    #[inline]
    pub fn classify(&mut self) -> crate::flow::FlowKey {
        // SAFETY: as in `data`; the frame bytes and `self.meta` are disjoint, so borrowing the
        // bytes while `meta` is written is sound.
        let data = unsafe {
            core::slice::from_raw_parts(
                self.base.as_ptr().add(self.head as usize),
                self.len as usize,
            )
        };
        crate::flow::classify(data, &mut self.meta)
    }

    /// Set the frame length, keeping its start. Bytes newly exposed are whatever the buffer held.
    pub fn set_len(&mut self, len: usize) -> Result<(), PacketError> {
        if len > self.max_len() {
            return Err(PacketError::NoTailroom { need: len, have: self.max_len() });
        }
        self.len = len as u16;
        Ok(())
    }

    /// Replace the frame with a copy of `bytes`, starting at the current head.
    pub fn set_frame(&mut self, bytes: &[u8]) -> Result<(), PacketError> {
        self.set_len(bytes.len())?;
        self.data_mut().copy_from_slice(bytes);
        Ok(())
    }

    /// Move the frame start: negative `delta` prepends bytes (uses headroom), positive strips
    /// them, like `bpf_xdp_adjust_head`.
    pub fn adjust_head(&mut self, delta: isize) -> Result<(), PacketError> {
        if delta < 0 {
            let need = delta.unsigned_abs();
            if need > self.head as usize {
                return Err(PacketError::NoHeadroom { need, have: self.head as usize });
            }
            self.head -= need as u16;
            self.len += need as u16;
        } else {
            let cut = delta as usize;
            if cut > self.len as usize {
                return Err(PacketError::Underflow);
            }
            self.head += cut as u16;
            self.len -= cut as u16;
        }
        Ok(())
    }

    /// Grow (positive) or shrink (negative) the frame at its end, like `bpf_xdp_adjust_tail`.
    pub fn adjust_tail(&mut self, delta: isize) -> Result<(), PacketError> {
        if delta >= 0 {
            let need = delta as usize;
            if need > self.tailroom() {
                return Err(PacketError::NoTailroom { need, have: self.tailroom() });
            }
            self.len += need as u16;
        } else {
            let cut = delta.unsigned_abs();
            if cut > self.len as usize {
                return Err(PacketError::Underflow);
            }
            self.len -= cut as u16;
        }
        Ok(())
    }
}

impl Drop for Packet {
    fn drop(&mut self) {
        // SAFETY: `core` outlives every packet (PoolOwner leaks it rather than free it while
        // packets are outstanding).
        unsafe { self.core.as_ref() }.release(self.index);
    }
}

impl core::fmt::Debug for Packet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Packet")
            .field("index", &self.index)
            .field("len", &self.len)
            .field("headroom", &self.head)
            .field("meta", &self.meta)
            .finish()
    }
}
