//! Lua as a program kind of the engine: the `[lua]` section, `{"stage": "lua"}` specs, Lua
//! updates (kind code 32), the `lua-functions` operation, the counters, and the watchdog.

use crate::compile::FunctionOpts;
use crate::report::{functions_json, stats_json};
use crate::runtime::{LuaConfig, LuaRuntime};
use hotplane_core::kind::read_local_file;
use hotplane_core::{
    BuildCx, Built, KindError, KindSetup, Program, ProgramKind, UpdateProgram, Verdict,
};
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The update envelope's kind code for Lua source (`hotplane_control::Kind::Lua`).
pub const UPDATE_KIND_LUA: u8 = 32;

/// How often the watchdog looks at the workers: a call stuck in Lua ends within
/// `watchdog_ms` plus this.
pub const WATCHDOG_PERIOD: Duration = Duration::from_millis(2);

/// Lua settings (`[lua]`): limits for flow functions.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LuaSection {
    /// Memory each worker's Lua state may allocate, in MiB.
    pub memory_mb: usize,
    /// Steps (loop iterations plus function calls) a function may take for one packet.
    pub max_steps: u32,
    /// A call into Lua running longer than this many milliseconds is interrupted (interpreted
    /// code; compiled code is bounded by `max_steps`).
    pub watchdog_ms: u64,
    /// Verdict for a packet whose function failed: "drop" (default) or "pass".
    pub on_error: String,
}

impl Default for LuaSection {
    fn default() -> Self {
        let d = LuaConfig::default();
        Self {
            memory_mb: d.memory_limit >> 20,
            max_steps: d.max_steps,
            watchdog_ms: d.watchdog_ms,
            on_error: "drop".into(),
        }
    }
}

/// A `[lua]` key with a value out of range; shown as `lua.KEY: why`, as config errors are.
fn invalid(key: &str, msg: impl std::fmt::Display) -> KindError {
    KindError::Invalid(format!("lua.{key}: {msg}"))
}

impl LuaSection {
    /// The runtime settings, checked.
    pub fn lua_config(&self) -> Result<LuaConfig, KindError> {
        let on_error = match self.on_error.as_str() {
            "drop" => Verdict::Drop,
            "pass" => Verdict::Pass,
            other => return Err(invalid("on_error", format!("`{other}` is not drop or pass"))),
        };
        if !(1..=4096).contains(&self.memory_mb) {
            return Err(invalid("memory_mb", format!("{} is not 1..4096", self.memory_mb)));
        }
        if self.max_steps == 0 || self.max_steps > i32::MAX as u32 {
            return Err(invalid("max_steps", format!("{} is not 1..2^31-1", self.max_steps)));
        }
        if self.watchdog_ms == 0 {
            return Err(invalid("watchdog_ms", "must be at least 1"));
        }
        Ok(LuaConfig {
            memory_limit: self.memory_mb << 20,
            max_steps: self.max_steps,
            watchdog_ms: self.watchdog_ms,
            on_error,
        })
    }
}

/// `{"stage": "lua", ...}`: a Lua function (`file` or inline `source`) that returns
/// `function(pkt)`; see docs/lua.md. `jit = false` runs it in the interpreter; `opt` is
/// LuaJIT's optimisation level 0..3. An enum of one variant so that serde reads (and refuses)
/// the `stage` tag and unknown fields exactly as the engine's other specs do.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "stage", rename_all = "kebab-case", deny_unknown_fields)]
enum LuaSpec {
    Lua {
        #[serde(default)]
        file: Option<String>,
        #[serde(default)]
        source: Option<String>,
        #[serde(default)]
        jit: Option<bool>,
        #[serde(default)]
        opt: Option<u8>,
    },
}

/// The control operations Lua answers (`hotplane_control::api::Request`'s shapes).
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
enum LuaRequest {
    /// Installed Lua functions: target, options, packets, errors, runaways, last error.
    LuaFunctions {},
}

/// Lua for one data plane: its runtime (one Lua state per worker, the compiler, the counters).
pub struct LuaKind {
    rt: Arc<LuaRuntime>,
}

/// Make the Lua kind from the `[lua]` section (defaults when the config has none).
pub fn make(setup: &KindSetup<'_>) -> Result<Arc<dyn ProgramKind>, KindError> {
    Ok(Arc::new(LuaKind::new(setup)?))
}

impl LuaKind {
    pub fn new(setup: &KindSetup<'_>) -> Result<Self, KindError> {
        let section: LuaSection = setup.section("lua")?.unwrap_or_default();
        Ok(Self { rt: LuaRuntime::new(setup.workers, section.lua_config()?) })
    }

    /// A kind over a runtime made elsewhere (tests, benchmarks).
    pub fn with_runtime(rt: Arc<LuaRuntime>) -> Self {
        Self { rt }
    }

    pub fn runtime(&self) -> &Arc<LuaRuntime> {
        &self.rt
    }
}

impl ProgramKind for LuaKind {
    fn name(&self) -> &'static str {
        "lua"
    }

    fn sections(&self) -> &'static [&'static str] {
        &["lua"]
    }

    fn stages(&self) -> &'static [&'static str] {
        &["lua"]
    }

    fn build(&self, spec: &Value, cx: &BuildCx<'_>) -> Result<Program, KindError> {
        let LuaSpec::Lua { file, source, jit, opt } = LuaSpec::deserialize(spec)
            .map_err(|e| KindError::Invalid(format!("stage spec: {e}")))?;
        let (text, name) = match (file, source) {
            (Some(f), None) => {
                let path = cx.resolve(&f);
                let text = read_local_file(&path)?;
                let name = path
                    .file_name()
                    .map_or_else(|| f.clone(), |n| n.to_string_lossy().into_owned());
                (text, name)
            }
            (None, Some(s)) => (s.into_bytes(), "inline".to_string()),
            _ => return Err(KindError::Invalid("give `file` or `source` (one of them)".into())),
        };
        let opts = FunctionOpts { jit: jit.unwrap_or(true), opt_level: opt.unwrap_or(3) };
        // `Invalid`, not `Rejected`: a spec that fails to build is refused as `apply-failed`
        // whatever the reason, as it always was (an inline source in a native-stage update).
        let def = self
            .rt
            .compile(&text, &name, opts, None)
            .map_err(|e| KindError::Invalid(e.to_string()))?;
        Ok(Some(self.rt.stage(def)))
    }

    fn node_files(&self, spec: &Value) -> Option<&'static str> {
        // An inline `source` is content and may arrive in an update; a `file` names the node's.
        // Only a string `file` counts: any other value fails to parse before a file is opened.
        spec.get("file").is_some_and(Value::is_string).then_some("`file`")
    }

    fn update_kinds(&self) -> &'static [u8] {
        &[UPDATE_KIND_LUA]
    }

    fn build_update(
        &self,
        update: &UpdateProgram<'_>,
        _cx: &BuildCx<'_>,
    ) -> Result<Built, KindError> {
        let opts = FunctionOpts { jit: !update.no_jit, opt_level: update.opt_level.unwrap_or(3) };
        // Named after the sender's file when the source says so (`lua update`), else after
        // the update.
        let name = match crate::naming::source_name(update.payload) {
            Some(file) => file.to_string(),
            None => format!("lua-seq{}", update.seq),
        };
        let def = self
            .rt
            .compile(update.payload, &name, opts, Some(update.target))
            .map_err(|e| KindError::Rejected(e.to_string()))?;
        Ok(Built { program: Some(self.rt.stage(def)), note: None })
    }

    fn installed(&self, target: &str, _workers: &[usize], program: &Program, version: u64) {
        self.rt.published(target, program.as_ref(), version);
    }

    fn ops(&self) -> &'static [&'static str] {
        &["lua-functions"]
    }

    fn request(&self, _op: &str, request: &Value) -> Result<Value, KindError> {
        match LuaRequest::deserialize(request).map_err(|e| KindError::Invalid(e.to_string()))? {
            LuaRequest::LuaFunctions {} => Ok(functions_json(&self.rt)),
        }
    }

    fn stats(&self) -> Option<Value> {
        Some(stats_json(&self.rt))
    }

    fn housekeeping(&self) {
        self.rt.housekeeping();
    }

    fn watchdog_period(&self) -> Option<Duration> {
        Some(WATCHDOG_PERIOD)
    }

    fn watchdog(&self, now_ns: u64) {
        self.rt.watchdog(now_ns);
    }
}

#[cfg(test)]
#[path = "kind_tests.rs"]
mod tests;
