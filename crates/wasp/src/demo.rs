//! The active packet of `hotplane demo`: `examples/wasp/count.s` sent once, carried in UDP to
//! WASP's port, through a data plane whose flow for that port runs `stage = "wasp"`. The
//! program leaves a counter under its key in the store of the port it came in by, reads its
//! threshold from its scratchpad, finds the counter not above it and lets the packet go on.
//! The demo asks the store (`wasp-get`), counts the fates the stage saw and looks for the
//! packet among the frames that left; [`DemoPacket::outcome`] says whether all three agree.
//! Here rather than in the binary so that its demo stays short.

use crate::asm::{assemble, disassemble, AsmError};
use crate::carriage::locate;
use crate::frame::{active_frame, FrameError, Hosts, Send};
use crate::wire::{WaspPacket, WaspRepr, DEFAULT_UDP_PORT, NO_NEXT_HEADER};
use serde_json::{json, Value};

/// The program the packet carries.
pub const PROGRAM: &str = include_str!("../../../examples/wasp/count.s");
/// Its name, for people.
pub const PROGRAM_NAME: &str = "examples/wasp/count.s";
/// The counter's key: "WASPdemo" in ASCII (any 64-bit value would do).
pub const KEY: u64 = u64::from_be_bytes(*b"WASPdemo");
/// `count.s` drops its packet once the counter is above this: the first packet, counted 1,
/// goes on.
const THRESHOLD: u64 = 1;
/// The store the packet runs against: its in-port's, `p0` in the demo.
pub const STORE: &str = "in:p0";

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("{PROGRAM_NAME}: {0}")]
    Asm(#[from] AsmError),
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// The flow selector that sends the demo's active packets (and only them) to the wasp stage.
pub fn selector() -> String {
    format!("proto=udp,dport={DEFAULT_UDP_PORT}")
}

/// The stage for that flow.
pub fn stage() -> Value {
    json!({ "stage": "wasp" })
}

/// The packet, as its sender builds it.
pub struct DemoPacket {
    repr: WaspRepr,
    /// The whole Ethernet frame to feed into the data plane.
    pub frame: Vec<u8>,
}

/// What the packet did, as the demo found it.
pub struct DemoOutcome {
    /// Everything agrees: counted once in the store, forwarded by the stage, seen leaving
    /// intact.
    pub ok: bool,
    /// One line for people.
    pub text: String,
    /// The same for `--json`.
    pub json: Value,
}

impl DemoPacket {
    pub fn new() -> Result<Self, DemoError> {
        let repr = WaspRepr {
            next_header: NO_NEXT_HEADER,
            keys: vec![KEY],
            scratch: THRESHOLD.to_be_bytes().to_vec(),
            code: assemble(PROGRAM)?.code,
            ..WaspRepr::default()
        };
        let frame = active_frame(&Hosts::default(), Send::default(), &repr, b"")?;
        Ok(Self { repr, frame })
    }

    /// The program in one line: `lookup k0; inc; ...`.
    pub fn listing(&self) -> String {
        let text = disassemble(&self.repr.code);
        let lines: Vec<&str> = text
            .lines()
            .map(|line| line.split(';').next().unwrap_or("").trim())
            .filter(|line| !line.is_empty())
            .collect();
        lines.join("; ")
    }

    /// The packet for people: `count.s (8 bytes: lookup k0; ...), key ...`.
    pub fn describe(&self) -> String {
        let key = KEY.to_be_bytes();
        let (code, key) = (self.repr.code.len(), String::from_utf8_lossy(&key));
        let port = DEFAULT_UDP_PORT;
        format!(
            "{PROGRAM_NAME} ({code} bytes: {}), key \"{key}\", in UDP to {port}",
            self.listing()
        )
    }

    /// True if `frame` is this packet, shim unchanged and its checksum valid.
    pub fn is_this(&self, frame: &[u8]) -> bool {
        let Some(ip) = frame.get(14..) else { return false };
        let Some(found) = locate(ip, Some(DEFAULT_UDP_PORT)) else { return false };
        let shim = &ip[found.shim_offset..found.end];
        WaspPacket::new_checked(shim)
            .and_then(|packet| WaspRepr::parse(&packet))
            .is_ok_and(|repr| repr == self.repr)
    }

    /// Judges the run from the `wasp-get` answer for [`KEY`] in [`STORE`] (`None` if the
    /// request failed), the kind's statistics (`stats["wasp"]`) and the frames that left.
    pub fn outcome(&self, entry: Option<&Value>, stats: &Value, left: &[Vec<u8>]) -> DemoOutcome {
        let counter = entry.and_then(|e| e["words"][0].as_u64());
        let count = |name: &str| stats[name].as_u64().unwrap_or(0);
        let fate = match (count("forwarded"), count("dropped"), count("returned")) {
            (1, 0, 0) => "forwarded",
            (0, 1, 0) => "dropped",
            (0, 0, 1) => "returned",
            _ if count("rejected") > 0 => "refused",
            _ => "not seen by the wasp stage",
        };
        let seen_leaving = left.iter().filter(|f| self.is_this(f)).count();
        let ok =
            counter == Some(1) && fate == "forwarded" && count("packets") == 1 && seen_leaving == 1;
        let text = format!(
            "{PROGRAM_NAME}: counter in store {STORE} = {}, {fate} in {} steps, {}",
            counter.map_or_else(|| "absent".into(), |c| c.to_string()),
            count("steps"),
            match seen_leaving {
                0 => "not seen leaving".into(),
                1 => "left p0 unchanged".into(),
                n => format!("left {n} times"),
            }
        );
        let json = json!({
            "program": PROGRAM_NAME,
            "code_bytes": self.repr.code.len(),
            "code_hex": self.repr.code.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "code": self.listing(),
            "key": KEY,
            "store": STORE,
            "counter": counter,
            "fate": fate,
            "steps": count("steps"),
            "seen_leaving": seen_leaving,
            "ok": ok,
        });
        DemoOutcome { ok, text, json }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forwarded_once() -> Value {
        json!({"packets": 1, "forwarded": 1, "dropped": 0, "returned": 0, "steps": 6})
    }

    #[test]
    fn the_packet_counted_forwarded_and_seen_leaving_is_ok() {
        let packet = DemoPacket::new().unwrap();
        let entry = json!({"present": true, "words": [1, 0, 0, 0]});
        let out =
            packet.outcome(Some(&entry), &forwarded_once(), std::slice::from_ref(&packet.frame));
        assert!(out.ok, "{}", out.text);
        assert_eq!(out.json["counter"], 1);
        assert_eq!(out.json["fate"], "forwarded");
        assert!(out.json["code"].as_str().unwrap().starts_with("lookup k0; inc; insert k0"));
        assert!(out.text.contains("= 1, forwarded in 6 steps, left p0 unchanged"), "{}", out.text);
    }

    #[test]
    fn a_missing_counter_a_lost_or_altered_packet_is_not_ok() {
        let packet = DemoPacket::new().unwrap();
        let entry = json!({"present": true, "words": [1, 0, 0, 0]});
        let stats = forwarded_once();
        assert!(!packet.outcome(None, &stats, std::slice::from_ref(&packet.frame)).ok);
        assert!(!packet.outcome(Some(&entry), &stats, &[]).ok);
        let mut altered = packet.frame.clone();
        let last = altered.len() - 1;
        altered[last] ^= 1; // the last code byte: the shim checksum no longer holds
        assert!(!packet.is_this(&altered));
        assert!(!packet.outcome(Some(&entry), &stats, &[altered]).ok);
        let dropped = json!({"packets": 1, "forwarded": 0, "dropped": 1, "returned": 0});
        let out = packet.outcome(Some(&entry), &dropped, std::slice::from_ref(&packet.frame));
        assert!(!out.ok);
        assert_eq!(out.json["fate"], "dropped");
    }

    #[test]
    fn the_flow_selector_matches_the_packet_port() {
        let packet = DemoPacket::new().unwrap();
        let dport = u16::from_be_bytes([packet.frame[36], packet.frame[37]]);
        assert_eq!(selector(), format!("proto=udp,dport={dport}"));
    }
}
