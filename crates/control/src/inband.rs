//! The client's side of in-band updates: update packets (the envelope inside
//! Ethernet/IP/UDP) and the acknowledgement packets a node sends back. Used by `hotplane push`,
//! the demo and the tests; which packets a node takes as updates is the engine's business.

use crate::envelope::{self, EnvelopeError};
use crate::{Ack, UpdateHeader};
use hotplane_core::wire::{EthernetAddress, UdpFrame};
use hotplane_core::{classify, Layers, Meta};
use std::net::IpAddr;

/// The address `control.update_addresses` defaults to: the one `UpdateSender`, the Python SDK
/// and the docs send updates to.
pub const DEFAULT_NODE_ADDRESS: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 254));

/// Payload bytes per fragment so that a fragment fits a 1500-byte IPv6 packet with room to
/// spare (1500 - 40 IPv6 - 8 UDP - 68 envelope - 43 largest target).
pub const DEFAULT_FRAGMENT: usize = 1300;

/// Payload bytes per fragment of updates submitted over the control socket, which has no MTU:
/// one fragment for anything up to 60 KB (a fragment's length field is 16 bits), so one MAC
/// check and no reassembly.
pub const API_FRAGMENT: usize = 60_000;

/// Who sends updates, to whom, with which key.
#[derive(Debug, Clone)]
pub struct UpdateSender {
    pub key_id: u32,
    pub key: Option<[u8; 32]>,
    pub frame: UdpFrame,
    pub max_fragment: usize,
}

impl UpdateSender {
    /// A sender at 10.9.9.9:40000 talking to a node's update port at 10.0.0.254
    /// (`DEFAULT_NODE_ADDRESS`).
    pub fn new(key_id: u32, key: Option<[u8; 32]>, update_port: u16) -> Self {
        Self {
            key_id,
            key,
            frame: UdpFrame {
                src_mac: EthernetAddress::local(0x0909),
                dst_mac: EthernetAddress::local(0x00fe),
                vlan: None,
                src_ip: IpAddr::from([10, 9, 9, 9]),
                dst_ip: DEFAULT_NODE_ADDRESS,
                src_port: 40000,
                dst_port: update_port,
            },
            max_fragment: DEFAULT_FRAGMENT,
        }
    }

    /// The envelope datagrams of an update (UDP payloads).
    pub fn datagrams(
        &self,
        header: &UpdateHeader,
        payload: &[u8],
    ) -> Result<Vec<Vec<u8>>, EnvelopeError> {
        envelope::build(header, payload, self.key.as_ref(), self.max_fragment)
    }

    /// Whole Ethernet frames carrying the update.
    pub fn frames(
        &self,
        header: &UpdateHeader,
        payload: &[u8],
    ) -> Result<Vec<Vec<u8>>, EnvelopeError> {
        Ok(self.datagrams(header, payload)?.iter().map(|d| self.wrap(d)).collect())
    }

    /// Put any bytes in a UDP frame to the node's update port (for hostile-input tests too).
    pub fn wrap(&self, datagram: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; self.frame.header_len() + datagram.len()];
        let n = self.frame.emit(datagram, &mut buf).unwrap_or(0);
        buf.truncate(n);
        buf
    }
}

/// The acknowledgement inside a frame, if the frame is one (UDP whose payload starts "HPAK").
pub fn ack_of(frame: &[u8], key: Option<&[u8; 32]>) -> Option<Result<Ack, crate::ack::AckError>> {
    let mut m = Meta::default();
    classify(frame, &mut m);
    if m.layers & Layers::UDP == 0 {
        return None;
    }
    let l4 = m.l4_off as usize;
    let len = u16::from_be_bytes([frame[l4 + 4], frame[l4 + 5]]) as usize;
    let payload = frame.get(m.payload_off as usize..l4 + len)?;
    if !payload.starts_with(&crate::ack::ACK_MAGIC) {
        return None;
    }
    Some(Ack::decode(payload, key))
}
