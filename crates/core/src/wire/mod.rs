//! Typed zero-copy views over packet bytes, in the style of smoltcp's `wire` module.
//!
//! Every view wraps a buffer (`T: AsRef<[u8]>`, mutable when `T: AsMut<[u8]>`) and reads or writes
//! header fields in place. `new_checked` validates lengths once so that the field accessors can
//! index without further checks; `new_unchecked` skips that and is only for buffers the caller
//! has already validated (the accessors then panic on a short buffer, as smoltcp's do).
//! The `*Repr` types are the owned, parsed form used to *build* headers off the fast path.

mod build;
mod checksum;
mod ethernet;
mod ipv4;
mod ipv6;
mod stamp;
mod tcp;
mod udp;

pub use build::{udp_checksum, UdpFrame, UdpFrameError, L4};
pub use checksum::{internet_checksum, pseudo_header_sum, Checksum};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, VlanTag};
pub use ipv4::{IpProtocol, Ipv4Packet};
pub use ipv6::Ipv6Packet;
pub use stamp::Stamp;
pub use tcp::TcpPacket;
pub use udp::UdpPacket;

/// Why a view refused a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The buffer is shorter than the header (or the length the header claims).
    #[error("truncated header")]
    Truncated,
    /// A field holds a value the format does not allow (bad version, length below minimum, ...).
    #[error("malformed header")]
    Malformed,
}

pub type Result<T> = core::result::Result<T, Error>;

#[inline(always)]
pub(crate) fn read_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
pub(crate) fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline(always)]
pub(crate) fn read_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(w)
}

#[inline(always)]
pub(crate) fn write_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
pub(crate) fn write_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
pub(crate) fn write_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}
