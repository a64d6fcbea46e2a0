//! Acknowledgements: the node's answer to every update (and every fragment), carried back to
//! the sender in a UDP packet or returned by the control API.
//!
//! ```text
//!  0   4  magic    "HPAK"
//!  4   1  version  1
//!  5   1  status   0 applied, 1 fragment stored (more needed), 2 refused
//!  6   2  reason   0, or the refusal reason code
//!  8   4  key_id
//! 12   8  seq
//! 20   8  version  slot version after the update (0 if not applied)
//! 28   4  received payload bytes so far
//! 32   2  M, message length
//! 34   M  message (UTF-8)
//! 34+M 32 MAC: BLAKE3 keyed hash of the bytes before it with the update's key; zeros when
//!          the update was not authenticated
//! ```

use crate::envelope::{mac, MAC_LEN};
use crate::receiver::Reason;

pub const ACK_MAGIC: [u8; 4] = *b"HPAK";
const ACK_HEADER: usize = 34;
/// Longest message carried (longer ones are cut at a character boundary).
pub const MAX_MESSAGE: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum AckStatus {
    Applied = 0,
    Partial = 1,
    Refused = 2,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub status: AckStatus,
    pub reason: Option<Reason>,
    pub key_id: u32,
    pub seq: u64,
    pub version: u64,
    pub received: u32,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    #[error("not an acknowledgement")]
    NotAnAck,
    #[error("acknowledgement is truncated")]
    Truncated,
    #[error("acknowledgement MAC does not verify")]
    BadMac,
    #[error("acknowledgement has an unknown status or reason")]
    Malformed,
}

fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl Ack {
    pub fn encode(&self, key: Option<&[u8; 32]>) -> Vec<u8> {
        let msg = cut(&self.message, MAX_MESSAGE);
        let mut d = Vec::with_capacity(ACK_HEADER + msg.len() + MAC_LEN);
        d.extend_from_slice(&ACK_MAGIC);
        d.push(1);
        d.push(self.status as u8);
        d.extend_from_slice(&self.reason.map_or(0, |r| r.code()).to_be_bytes());
        d.extend_from_slice(&self.key_id.to_be_bytes());
        d.extend_from_slice(&self.seq.to_be_bytes());
        d.extend_from_slice(&self.version.to_be_bytes());
        d.extend_from_slice(&self.received.to_be_bytes());
        d.extend_from_slice(&(msg.len() as u16).to_be_bytes());
        d.extend_from_slice(msg.as_bytes());
        let m = key.map_or([0; MAC_LEN], |k| mac(k, &d));
        d.extend_from_slice(&m);
        d
    }

    /// Parse an acknowledgement; with `key`, its MAC must verify.
    pub fn decode(d: &[u8], key: Option<&[u8; 32]>) -> Result<Ack, AckError> {
        if d.len() < 5 || d[0..4] != ACK_MAGIC || d[4] != 1 {
            return Err(AckError::NotAnAck);
        }
        if d.len() < ACK_HEADER + MAC_LEN {
            return Err(AckError::Truncated);
        }
        let m = u16::from_be_bytes([d[32], d[33]]) as usize;
        if d.len() != ACK_HEADER + m + MAC_LEN {
            return Err(AckError::Truncated);
        }
        let (body, tag) = d.split_at(ACK_HEADER + m);
        if let Some(k) = key {
            let tag: [u8; MAC_LEN] = tag.try_into().map_err(|_| AckError::Truncated)?;
            if !crate::envelope::mac_ok(k, body, &tag) {
                return Err(AckError::BadMac);
            }
        }
        let status = match d[5] {
            0 => AckStatus::Applied,
            1 => AckStatus::Partial,
            2 => AckStatus::Refused,
            _ => return Err(AckError::Malformed),
        };
        let code = u16::from_be_bytes([d[6], d[7]]);
        let reason = match code {
            0 => None,
            c => Some(Reason::from_code(c).ok_or(AckError::Malformed)?),
        };
        let be64 = |at: usize| u64::from_be_bytes(d[at..at + 8].try_into().unwrap_or([0; 8]));
        Ok(Ack {
            status,
            reason,
            key_id: u32::from_be_bytes([d[8], d[9], d[10], d[11]]),
            seq: be64(12),
            version: be64(20),
            received: u32::from_be_bytes([d[28], d[29], d[30], d[31]]),
            message: String::from_utf8_lossy(&body[ACK_HEADER..]).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_and_without_key() {
        let a = Ack {
            status: AckStatus::Refused,
            reason: Some(Reason::Replay),
            key_id: 1,
            seq: 99,
            version: 0,
            received: 0,
            message: "sequence 99 is not above 100".into(),
        };
        let k = [5u8; 32];
        let d = a.encode(Some(&k));
        assert_eq!(Ack::decode(&d, Some(&k)).unwrap(), a);
        assert_eq!(Ack::decode(&d, Some(&[6u8; 32])).unwrap_err(), AckError::BadMac);
        assert_eq!(Ack::decode(&a.encode(None), None).unwrap(), a);
        assert_eq!(Ack::decode(&d[..d.len() - 1], None).unwrap_err(), AckError::Truncated);
        assert_eq!(Ack::decode(b"HPUP.", None).unwrap_err(), AckError::NotAnAck);
    }

    #[test]
    fn long_messages_are_cut_on_char_boundaries() {
        let a = Ack {
            status: AckStatus::Refused,
            reason: Some(Reason::ApplyFailed),
            key_id: 0,
            seq: 1,
            version: 0,
            received: 0,
            message: "é".repeat(MAX_MESSAGE),
        };
        let back = Ack::decode(&a.encode(None), None).unwrap();
        assert!(back.message.len() <= MAX_MESSAGE);
        assert!(back.message.chars().all(|c| c == 'é'));
    }
}
