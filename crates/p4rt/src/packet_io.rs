//! Packet-in and packet-out: the frames that cross the CPU port and the P4Runtime messages
//! they are. A packet-out's metadata becomes the program's `@controller_header("packet_out")`
//! header in front of its payload; a frame the program sends to the CPU port starts with its
//! `@controller_header("packet_in")` header, which becomes the packet-in's metadata. A program
//! without such a header exchanges bare frames, as BMv2 does.

use crate::bytes;
use crate::proto::p4::v1::{PacketIn, PacketMetadata};
use hotplane_p4::ir;
use hotplane_p4::p4info::{controller_headers, ControllerHeader, P4InfoError};

/// Why a packet could not cross the CPU port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacketIoError {
    #[error("metadata id {0} is not a field of the packet_out header")]
    UnknownMetadata(u32),
    #[error("metadata id {0} is given twice")]
    DuplicateMetadata(u32),
    #[error("metadata {name} (id {id}): {source}")]
    BadValue {
        id: u32,
        name: String,
        #[source]
        source: bytes::BytesError,
    },
    #[error("the {name} header ({bits} bits) is not whole bytes of bit<W> fields (W at most 128)")]
    NotWholeBytes { name: String, bits: u32 },
    #[error("the frame is {len} bytes, shorter than its {need}-byte packet_in header")]
    Short { len: usize, need: usize },
}

/// The controller headers of a pipeline.
#[derive(Debug, Clone, Default)]
pub struct PacketIo {
    pub packet_in: Option<ControllerHeader>,
    pub packet_out: Option<ControllerHeader>,
}

impl PacketIo {
    pub fn of(program: &ir::Program) -> Result<PacketIo, P4InfoError> {
        let mut io = PacketIo::default();
        for h in controller_headers(program)? {
            match h.name.as_str() {
                "packet_in" => io.packet_in = Some(h),
                "packet_out" => io.packet_out = Some(h),
                _ => {}
            }
        }
        Ok(io)
    }

    /// The frame a packet-out becomes: the `packet_out` header made of its metadata (fields
    /// it leaves out are 0), then the payload.
    pub fn packet_out_frame(
        &self,
        metadata: &[PacketMetadata],
        payload: &[u8],
    ) -> Result<Vec<u8>, PacketIoError> {
        let Some(h) = &self.packet_out else {
            return Ok(payload.to_vec());
        };
        let mut values = vec![None; h.fields.len()];
        for m in metadata {
            let i =
                h.field_of(m.metadata_id).ok_or(PacketIoError::UnknownMetadata(m.metadata_id))?;
            let (name, width) = &h.fields[i];
            let v = bytes::value(&m.value, *width).map_err(|source| PacketIoError::BadValue {
                id: m.metadata_id,
                name: name.clone(),
                source,
            })?;
            if values[i].replace(v).is_some() {
                return Err(PacketIoError::DuplicateMetadata(m.metadata_id));
            }
        }
        let len = header_bytes(h)?;
        let mut frame = vec![0u8; len + payload.len()];
        let mut at = 0;
        for ((_, width), v) in h.fields.iter().zip(values) {
            put_bits(&mut frame[..len], at, *width, v.unwrap_or(0));
            at += *width as usize;
        }
        frame[len..].copy_from_slice(payload);
        Ok(frame)
    }

    /// The packet-in a frame from the CPU port is: its `packet_in` header as metadata (in the
    /// canonical form the spec asks servers to send) and the rest as payload.
    pub fn packet_in(&self, frame: &[u8]) -> Result<PacketIn, PacketIoError> {
        let Some(h) = &self.packet_in else {
            return Ok(PacketIn { payload: frame.to_vec(), metadata: Vec::new() });
        };
        let len = header_bytes(h)?;
        if frame.len() < len {
            return Err(PacketIoError::Short { len: frame.len(), need: len });
        }
        let mut at = 0;
        let metadata = h
            .fields
            .iter()
            .zip(&h.ids)
            .map(|((_, width), &id)| {
                let v = get_bits(&frame[..len], at, *width);
                at += *width as usize;
                PacketMetadata { metadata_id: id, value: bytes::canonical(v) }
            })
            .collect();
        Ok(PacketIn { payload: frame[len..].to_vec(), metadata })
    }
}

/// A controller header's length in bytes; fields wider than 128 bits are refused with it.
fn header_bytes(h: &ControllerHeader) -> Result<usize, PacketIoError> {
    let bits = h.bits();
    // A field of no scalar width (a struct, say) has width 0 here: refused, since it would
    // shift every field after it.
    if !bits.is_multiple_of(8) || h.fields.iter().any(|f| f.1 == 0 || f.1 > 128) {
        return Err(PacketIoError::NotWholeBytes { name: h.name.clone(), bits });
    }
    Ok(bits as usize / 8)
}

/// `width` bits of `data` from bit `at` (most significant first), as a number.
fn get_bits(data: &[u8], at: usize, width: u32) -> u128 {
    (at..at + width as usize)
        .fold(0u128, |v, bit| (v << 1) | ((data[bit / 8] >> (7 - bit % 8)) & 1) as u128)
}

/// Write the low `width` bits of `v` into `data` from bit `at` (most significant first).
fn put_bits(data: &mut [u8], at: usize, width: u32, v: u128) {
    for i in 0..width as usize {
        let bit = at + i;
        let one = (v >> (width as usize - 1 - i)) & 1 == 1;
        let mask = 1u8 << (7 - bit % 8);
        if one {
            data[bit / 8] |= mask;
        } else {
            data[bit / 8] &= !mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io() -> PacketIo {
        let h = |name: &str, f: &str| ControllerHeader {
            name: name.into(),
            header: format!("{name}_t"),
            fields: vec![(f.into(), 9), ("_pad".into(), 7)],
            ids: vec![1, 2],
        };
        PacketIo {
            packet_in: Some(h("packet_in", "ingress_port")),
            packet_out: Some(h("packet_out", "egress_port")),
        }
    }

    #[test]
    fn packet_out_metadata_becomes_the_header_in_front_of_the_payload() {
        let md = |id, value: &[u8]| PacketMetadata { metadata_id: id, value: value.to_vec() };
        let frame = io().packet_out_frame(&[md(1, &[1, 0x03])], b"xy").unwrap();
        // 9 bits of 0x103 then 7 zero bits: 1000 0001 | 1000 0000.
        assert_eq!(frame, vec![0x81, 0x80, b'x', b'y']);
        assert_eq!(
            io().packet_out_frame(&[md(3, &[1])], b""),
            Err(PacketIoError::UnknownMetadata(3))
        );
        assert_eq!(
            io().packet_out_frame(&[md(1, &[1]), md(1, &[2])], b""),
            Err(PacketIoError::DuplicateMetadata(1))
        );
        assert!(matches!(
            io().packet_out_frame(&[md(1, &[4, 0])], b""),
            Err(PacketIoError::BadValue { id: 1, .. })
        ));
    }

    #[test]
    fn a_packet_in_header_becomes_canonical_metadata() {
        let p = io().packet_in(&[0x81, 0x80, 9]).unwrap();
        assert_eq!(p.payload, vec![9]);
        assert_eq!(p.metadata[0].value, vec![1, 0x03]);
        assert_eq!(p.metadata[1].value, vec![0]);
        assert_eq!(io().packet_in(&[1]), Err(PacketIoError::Short { len: 1, need: 2 }));
        assert_eq!(PacketIo::default().packet_in(&[1, 2]).unwrap().payload, vec![1, 2]);
    }
}
