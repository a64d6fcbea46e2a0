//! Stage specs, and the native stages the engine builds itself.
//!
//! A spec is the JSON/TOML form of a program (`{"stage":"set-field","base":"payload",...}`), as
//! written in the config file, sent to the control API, or carried by an in-band update. The
//! engine builds the native stages (`none`, `forward`, `l2fwd`, `drop`, `count`, `set-field`,
//! `call`, `predefined`); every other `stage` name belongs to a program kind.

use hotplane_core::batch::{Batch, Mask};
use hotplane_core::native::{Count, DropAll, FieldBase, Forward, L2Fwd, SetField};
use hotplane_core::{BuildCx, KindError, Meta, Program, Slot, Stage, StageRef, WorkerCx, NO_PORT};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A program spec: a JSON object whose `stage` names what builds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct StageSpec(Value);

/// A spec that is not an object with a `stage` name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a stage is a table with a `stage` name (`{{ stage = \"drop\" }}`), not `{0}`")]
pub struct NotASpec(String);

impl StageSpec {
    pub fn new(spec: Value) -> Result<Self, NotASpec> {
        match spec.get("stage") {
            Some(Value::String(_)) if spec.is_object() => Ok(StageSpec(spec)),
            _ => Err(NotASpec(spec.to_string())),
        }
    }

    /// A spec with only its stage name: `StageSpec::stage("l2fwd")`.
    pub fn stage(name: &str) -> Self {
        StageSpec(serde_json::json!({ "stage": name }))
    }

    /// The spec with one more field: `StageSpec::stage("forward").with("to", "p1")`.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        if let Value::Object(m) = &mut self.0 {
            m.insert(key.to_string(), value.into());
        }
        self
    }

    /// The stage name (`"ebpf"`, `"set-field"`).
    pub fn kind(&self) -> &str {
        self.0.get("stage").and_then(Value::as_str).unwrap_or_default()
    }

    pub fn json(&self) -> &Value {
        &self.0
    }

    /// `set-field` of `v` into the 16-bit `mark` of the generators' test stamp: how the demo,
    /// the benchmarks and the tests see which function processed a packet.
    pub fn stamp_mark(v: u16) -> StageSpec {
        StageSpec(serde_json::json!({
            "stage": "set-field",
            "base": "payload",
            "offset": hotplane_core::wire::Stamp::<&[u8]>::MARK_OFFSET,
            "value": v,
            "width": 2,
        }))
    }
}

impl<'de> Deserialize<'de> for StageSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        StageSpec::new(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl TryFrom<Value> for StageSpec {
    type Error = NotASpec;
    fn try_from(v: Value) -> Result<Self, NotASpec> {
        StageSpec::new(v)
    }
}

/// The stage names the engine builds itself.
pub const NATIVE_STAGES: [&str; 8] =
    ["none", "forward", "l2fwd", "drop", "count", "set-field", "call", "predefined"];

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "stage", rename_all = "kebab-case", deny_unknown_fields)]
enum NativeSpec {
    /// No program.
    None {},
    /// Set the output port: `to` for every packet, or `map` from input to output port names.
    Forward {
        #[serde(default)]
        to: Option<String>,
        #[serde(default)]
        map: BTreeMap<String, String>,
    },
    /// Swap MAC addresses, then forward like `forward` (default: to the input port's peer).
    L2fwd {
        #[serde(default)]
        to: Option<String>,
        #[serde(default)]
        map: BTreeMap<String, String>,
    },
    Drop {},
    Count {},
    /// Write `value` at `offset` bytes from `base` (frame, l3, l4 or payload). `value` is a hex
    /// string (`"0x00ff"`: its digits give the width) or a number with a `width` in bytes.
    SetField {
        #[serde(default)]
        base: BaseSpec,
        offset: u16,
        value: FieldValue,
        #[serde(default)]
        width: Option<u8>,
    },
    /// Run the program in the named extern slot of the same worker.
    Call {
        #[serde(rename = "extern")]
        name: String,
    },
    /// The pre-defined program with this id (shared, not copied).
    Predefined {
        id: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
enum BaseSpec {
    #[default]
    Frame,
    L3,
    L4,
    Payload,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
enum FieldValue {
    Number(u64),
    Text(String),
}

impl FieldValue {
    fn bytes(&self, width: Option<u8>) -> Result<Vec<u8>, KindError> {
        let invalid = KindError::Invalid;
        match self {
            FieldValue::Number(n) => {
                let w = width.unwrap_or(4) as usize;
                if !(1..=8).contains(&w) {
                    return Err(invalid(format!(
                        "width = {w}: a numeric value is 1 to 8 bytes wide"
                    )));
                }
                if w < 8 && *n >> (8 * w) != 0 {
                    return Err(invalid(format!("value {n} does not fit in {w} bytes")));
                }
                Ok(n.to_be_bytes()[8 - w..].to_vec())
            }
            FieldValue::Text(t) => {
                let hex_digits =
                    t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).ok_or_else(|| {
                        invalid(format!("value `{t}`: write hex as \"0x...\" or give a number"))
                    })?;
                let bytes =
                    hex::decode(hex_digits).map_err(|e| invalid(format!("value `{t}`: {e}")))?;
                if let Some(w) = width {
                    if w as usize != bytes.len() {
                        return Err(invalid(format!(
                            "value `{t}` is {} bytes but width = {w}",
                            bytes.len()
                        )));
                    }
                }
                Ok(bytes)
            }
        }
    }
}

/// Build a native stage (`spec.kind()` is one of [`NATIVE_STAGES`]).
pub(crate) fn build(
    spec: &StageSpec,
    cx: &BuildCx<'_>,
    predefined: &BTreeMap<u32, (String, StageRef)>,
) -> Result<Program, KindError> {
    let spec = NativeSpec::deserialize(spec.json())
        .map_err(|e| KindError::Invalid(format!("stage spec: {e}")))?;
    let forward = |to: &Option<String>, map: &BTreeMap<String, String>| {
        if to.is_some() && !map.is_empty() {
            return Err(KindError::Invalid("give `to` or `map`, not both".into()));
        }
        if let Some(t) = to {
            return Ok(Forward::to(cx.port(t)?));
        }
        if map.is_empty() {
            return Ok(Forward::peers());
        }
        let mut m = vec![NO_PORT; cx.port_names.len()];
        for (from, to) in map {
            m[cx.port(from)? as usize] = cx.port(to)?;
        }
        Ok(Forward::with_map(m))
    };
    let stage: StageRef = match &spec {
        NativeSpec::None {} => return Ok(None),
        NativeSpec::Forward { to, map } => Arc::new(forward(to, map)?),
        NativeSpec::L2fwd { to, map } => Arc::new(L2Fwd::new(forward(to, map)?)),
        NativeSpec::Drop {} => Arc::new(DropAll),
        NativeSpec::Count {} => Arc::new(Count::new()),
        NativeSpec::SetField { base, offset, value, width } => {
            let base = match base {
                BaseSpec::Frame => FieldBase::Frame,
                BaseSpec::L3 => FieldBase::L3,
                BaseSpec::L4 => FieldBase::L4,
                BaseSpec::Payload => FieldBase::Payload,
            };
            let bytes = value.bytes(*width)?;
            Arc::new(
                SetField::new(base, *offset, &bytes)
                    .map_err(|e| KindError::Invalid(e.to_string()))?,
            )
        }
        NativeSpec::Call { name } => {
            Arc::new(CallExtern { name: name.clone(), slots: cx.extern_slots(name)?.clone() })
        }
        NativeSpec::Predefined { id } => {
            let (_, s) = predefined.get(id).ok_or_else(|| {
                KindError::Invalid(format!("no pre-defined program with id {id}"))
            })?;
            s.clone()
        }
    };
    Ok(Some(stage))
}

/// Runs whatever program the named extern slot of the running worker holds.
pub struct CallExtern {
    name: String,
    slots: Vec<Arc<Slot<Program>>>,
}

impl CallExtern {
    /// Call stages are refused in extern slots: an extern calling an extern could recurse.
    pub fn is_call(stage: &StageRef) -> bool {
        stage.name() == "call"
    }
}

impl Stage for CallExtern {
    fn name(&self) -> &str {
        "call"
    }

    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        let Some(slot) = self.slots.get(cx.worker) else { return };
        let guard = cx.guard;
        if let Some(stage) = &slot.load(guard).value {
            stage.run(batch, sel, cx);
        }
    }

    fn run_one(&self, frame: &mut [u8], meta: &mut Meta, cx: &mut WorkerCx<'_>) -> u64 {
        let Some(slot) = self.slots.get(cx.worker) else { return hotplane_core::xdp::XDP_PASS };
        let guard = cx.guard;
        match &slot.load(guard).value {
            Some(stage) => stage.run_one(frame, meta, cx),
            None => hotplane_core::xdp::XDP_PASS,
        }
    }

    fn describe(&self) -> String {
        format!("call extern:{}", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build_json(j: &str, ports: &[String]) -> Result<Program, String> {
        let externs = BTreeMap::new();
        let qsbr = hotplane_core::Qsbr::new();
        let cx = BuildCx {
            workers: 1,
            port_names: ports,
            externs: &externs,
            flows: &[],
            qsbr: &qsbr,
            base_dir: None,
        };
        let spec: StageSpec = serde_json::from_str(j).map_err(|e| e.to_string())?;
        build(&spec, &cx, &BTreeMap::new()).map_err(|e| e.to_string())
    }

    #[test]
    fn specs_parse_and_build() {
        let ports = vec!["p0".to_string(), "p1".to_string()];
        let describe = |j: &str| build_json(j, &ports).unwrap().unwrap().describe();
        assert_eq!(
            describe(r#"{"stage":"set-field","base":"payload","offset":16,"value":"0x0000aaaa"}"#),
            "set-field payload+16 = 0x0000aaaa"
        );
        assert_eq!(
            describe(r#"{"stage":"set-field","offset":0,"value":258,"width":2}"#),
            "set-field frame+0 = 0x0102"
        );
        assert_eq!(
            describe(r#"{"stage":"l2fwd","map":{"p0":"p1","p1":"p0"}}"#),
            "l2fwd map [1, 0]"
        );
        let spec: StageSpec = toml::from_str("stage = \"forward\"\nto = \"p1\"").unwrap();
        assert_eq!(spec.kind(), "forward");
        assert_eq!(describe(&serde_json::to_string(&spec).unwrap()), "forward to port 1");
        assert!(build_json(r#"{"stage":"none"}"#, &ports).unwrap().is_none());
        assert_eq!(
            describe(&serde_json::to_string(&StageSpec::stamp_mark(0x0102)).unwrap()),
            format!(
                "set-field payload+{} = 0x0102",
                hotplane_core::wire::Stamp::<&[u8]>::MARK_OFFSET
            )
        );
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let ports = vec!["p0".to_string()];
        let build = |j: &str| build_json(j, &ports).map(|_| ());
        assert!(build(r#"{"stage":"forward","to":"p9"}"#)
            .unwrap_err()
            .contains("no port named `p9`"));
        assert!(build(r#"{"stage":"set-field","offset":1,"value":"zz"}"#)
            .unwrap_err()
            .contains("0x"));
        assert!(build(r#"{"stage":"set-field","offset":1,"value":300,"width":1}"#)
            .unwrap_err()
            .contains("does not fit"));
        assert!(build(r#"{"stage":"set-field","offset":1,"value":"0x0102","width":4}"#)
            .unwrap_err()
            .contains("width = 4"));
        assert!(build(r#"{"stage":"call","extern":"nope"}"#)
            .unwrap_err()
            .contains("no extern named `nope`"));
        assert!(build(r#"{"stage":"predefined","id":3}"#).unwrap_err().contains("id 3"));
        assert!(build(r#"{"stage":"drop","extra":1}"#).unwrap_err().contains("extra"));
        assert!(build(r#"{"extra":1}"#).unwrap_err().contains("`stage`"));
        assert!(build(r#"{"stage":7}"#).unwrap_err().contains("`stage`"));
    }
}
