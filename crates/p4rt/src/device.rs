//! What `ForwardingPipelineConfig.p4_device_config` carries to hotplane. The field is opaque to
//! the spec and every client reads a file into it, so hotplane accepts, in this order:
//!
//! 1. PI's `p4.tmp.P4DeviceConfig` wrapper (the p4lang tutorials send one) around any of the
//!    forms below, found by decoding it as PI does;
//! 2. hotplane's device config, the JSON `hotplane p4c` writes:
//!    `{"hotplane": 1, "name": "basic.p4", "source": "..."}`;
//! 3. P4_16 source text as it is (what p4runtime-shell and finsy send when given the `.p4`).
//!
//! A BMv2 JSON file (p4c's output for simple_switch) is refused with what to send instead:
//! hotplane compiles P4 itself.

use crate::proto::p4::tmp::P4DeviceConfig;
use prost::Message;

/// The program a device config carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceProgram {
    /// The program's name in listings (`basic.p4`).
    pub name: String,
    pub source: String,
}

/// Why a device config carries no program hotplane can run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceConfigError {
    #[error("p4_device_config is empty: send the P4 source, or the JSON `hotplane p4c` writes")]
    Empty,
    #[error(
        "p4_device_config is a BMv2 JSON file; hotplane compiles P4 itself: send the P4 \
         source, or the device config `hotplane p4c --p4runtime-files X.p4info.txtpb -o DIR \
         X.p4` writes"
    )]
    Bmv2Json,
    #[error("p4_device_config: a hotplane device config that is not valid: {0}")]
    BadJson(String),
    #[error(
        "p4_device_config is neither P4 source (UTF-8 text) nor a device config hotplane knows"
    )]
    Unknown,
}

/// hotplane's device-config JSON.
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct HotplaneConfig {
    hotplane: u32,
    name: String,
    source: String,
}

/// The JSON device config for `program` (what `hotplane p4c` writes).
pub fn encode(program: &DeviceProgram) -> String {
    let c =
        HotplaneConfig { hotplane: 1, name: program.name.clone(), source: program.source.clone() };
    serde_json::to_string_pretty(&c).unwrap_or_default()
}

/// The program `bytes` carries.
pub fn decode(bytes: &[u8]) -> Result<DeviceProgram, DeviceConfigError> {
    // A serialised wrapper starts with field 1, 2 or 3's tag; P4 source and JSON never do.
    if matches!(bytes.first(), Some(0x08 | 0x12 | 0x1a)) {
        if let Ok(w) = P4DeviceConfig::decode(bytes) {
            return decode_inner(&w.device_data);
        }
    }
    decode_inner(bytes)
}

fn decode_inner(bytes: &[u8]) -> Result<DeviceProgram, DeviceConfigError> {
    let text = std::str::from_utf8(bytes).map_err(|_| DeviceConfigError::Unknown)?;
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err(DeviceConfigError::Empty);
    }
    if trimmed.starts_with('{') {
        let v: serde_json::Value =
            serde_json::from_str(trimmed).map_err(|e| DeviceConfigError::BadJson(e.to_string()))?;
        if v.get("hotplane").is_none() {
            return Err(DeviceConfigError::Bmv2Json);
        }
        let c: HotplaneConfig =
            serde_json::from_value(v).map_err(|e| DeviceConfigError::BadJson(e.to_string()))?;
        if c.hotplane != 1 {
            return Err(DeviceConfigError::BadJson(format!(
                "version {} (this hotplane reads 1)",
                c.hotplane
            )));
        }
        return Ok(DeviceProgram { name: c.name, source: c.source });
    }
    if text.contains('\0') {
        return Err(DeviceConfigError::Unknown);
    }
    Ok(DeviceProgram { name: "p4runtime.p4".into(), source: text.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "#include <core.p4>\n";

    #[test]
    fn source_json_and_the_wrapper_are_understood() {
        assert_eq!(decode(SRC.as_bytes()).unwrap().source, SRC);
        let p = DeviceProgram { name: "x.p4".into(), source: SRC.into() };
        assert_eq!(decode(encode(&p).as_bytes()).unwrap(), p);
        for reassign in [true, false] {
            let w = P4DeviceConfig {
                reassign,
                extras: (!reassign).then(Default::default),
                device_data: encode(&p).into_bytes(),
            };
            assert_eq!(decode(&w.encode_to_vec()).unwrap(), p, "reassign {reassign}");
        }
    }

    #[test]
    fn bmv2_json_and_garbage_are_refused_by_name() {
        assert_eq!(
            decode(br#"{"__meta__": {}, "program": "./basic.p4i"}"#),
            Err(DeviceConfigError::Bmv2Json)
        );
        assert_eq!(decode(b""), Err(DeviceConfigError::Empty));
        assert_eq!(decode(&[0xff, 0xfe, 0]), Err(DeviceConfigError::Unknown));
        assert!(matches!(
            decode(br#"{"hotplane": 2, "name": "a", "source": ""}"#),
            Err(DeviceConfigError::BadJson(_))
        ));
    }
}
