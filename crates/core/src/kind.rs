//! The seam every program kind plugs into.
//!
//! A kind (eBPF, Lua, P4, tables, WASP, ...) lives in its own crate and implements
//! [`ProgramKind`]: it turns a spec from the config file or the local control socket, or the
//! payload of an authenticated update, into a [`Stage`](crate::Stage) (parse, verify, compile:
//! all off the fast path, on the control thread), answers its own control operations, and
//! reports its counters. The engine keeps a registry of kinds and never names a concrete one:
//! adding a kind is its crate plus one registration line in the binary (plus, for a kind with
//! a control operation or an update kind that does not exist yet, its variant in the typed
//! control API of `hotplane-control`).
//!
//! Kinds never see each other. A program of one kind calling a program of another (a P4 extern
//! running the eBPF program in an extern slot, P4 asking the packet's flow function) goes
//! through [`Stage::run_one`](crate::Stage::run_one), the one calling convention.

use crate::flowtable::FlowTable;
use crate::qsbr::Qsbr;
use crate::slot::Slot;
use crate::stage::StageRef;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What a slot holds: a program, or nothing (packets pass the position untouched).
pub type Program = Option<StageRef>;

/// Extern slots by name, one slot per worker.
pub type ExternSlots = BTreeMap<String, Vec<Arc<Slot<Program>>>>;

/// Largest program, entries or source file the local config may name.
pub const MAX_LOCAL_FILE_BYTES: u64 = 16 << 20;

/// Why a kind could not do what it was asked. The engine turns these into control API errors
/// and update refusals (`Rejected` is the update's `rejected` reason, `Invalid` its
/// `apply-failed`, `BadTarget` its `bad-target`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KindError {
    /// The program itself was refused: the verifier, the compiler, the sandbox said no.
    #[error("{0}")]
    Rejected(String),
    /// The spec, payload or request is malformed or names something that does not exist.
    #[error("{0}")]
    Invalid(String),
    /// The program cannot go where it was sent.
    #[error("{0}")]
    BadTarget(String),
}

impl KindError {
    /// The message, whatever the class.
    pub fn message(&self) -> &str {
        match self {
            KindError::Rejected(m) | KindError::Invalid(m) | KindError::BadTarget(m) => m,
        }
    }
}

/// Prefix an error's message with where it happened (`pipeline.pre: ...`), keeping its class.
pub fn context(e: KindError, at: impl std::fmt::Display) -> KindError {
    match e {
        KindError::Rejected(m) => KindError::Rejected(format!("{at}: {m}")),
        KindError::Invalid(m) => KindError::Invalid(format!("{at}: {m}")),
        KindError::BadTarget(m) => KindError::BadTarget(format!("{at}: {m}")),
    }
}

/// What a kind is made from when a data plane starts.
pub struct KindSetup<'a> {
    /// Number of workers (per-worker state is sized by it).
    pub workers: usize,
    /// The data plane's grace-period domain (tables and slots a kind creates live in it).
    pub qsbr: &'a Qsbr,
    /// The config file's directory: relative file names in sections resolve against it.
    pub base_dir: Option<&'a Path>,
    /// The config file's top-level sections, as parsed (`[ebpf]`, `[[table]]`, ...). A kind
    /// reads the ones it names in [`ProgramKind::sections`].
    pub sections: &'a BTreeMap<String, Value>,
}

impl KindSetup<'_> {
    /// A file a section names, found as [`BuildCx::resolve`] finds program files.
    pub fn resolve(&self, file: &str) -> PathBuf {
        resolve_in(self.base_dir, file)
    }

    /// One section, deserialised; `None` when the config does not have it.
    pub fn section<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<T>, KindError> {
        self.sections
            .get(name)
            .map(|v| T::deserialize(v).map_err(|e| KindError::Invalid(format!("[{name}]: {e}"))))
            .transpose()
    }
}

/// Makes a kind for one data plane; what the binary registers.
pub type KindMaker = fn(&KindSetup<'_>) -> Result<Arc<dyn ProgramKind>, KindError>;

/// What building a program can refer to. The engine lends it to the kind for one build.
pub struct BuildCx<'a> {
    pub workers: usize,
    /// Port names by index (a port's index is its `out_port` number).
    pub port_names: &'a [String],
    /// Extern slots (`[pipeline.externs]`) a program may call.
    pub externs: &'a ExternSlots,
    /// Each worker's flow table (P4's `hotplane_flow_function()` looks flows up in it).
    pub flows: &'a [Arc<FlowTable>],
    /// The data plane's grace-period domain.
    pub qsbr: &'a Qsbr,
    /// Relative program files resolve against this directory first (the config file's).
    pub base_dir: Option<&'a Path>,
}

/// A file the config names: relative to the config file's directory if it is there, else as
/// given.
fn resolve_in(base_dir: Option<&Path>, file: &str) -> PathBuf {
    let path = Path::new(file);
    match base_dir.map(|d| d.join(path)) {
        Some(p) if path.is_relative() && p.exists() => p,
        _ => path.to_path_buf(),
    }
}

impl BuildCx<'_> {
    /// A program file: relative to the config file's directory if it is there, else as given.
    pub fn resolve(&self, file: &str) -> PathBuf {
        resolve_in(self.base_dir, file)
    }

    /// The index of the port named `name`.
    pub fn port(&self, name: &str) -> Result<u16, KindError> {
        self.port_names.iter().position(|p| p == name).map(|i| i as u16).ok_or_else(|| {
            KindError::Invalid(format!(
                "no port named `{name}` (ports: {})",
                self.port_names.join(", ")
            ))
        })
    }

    /// The extern slots named `name`, or an error listing the ones that exist.
    pub fn extern_slots(&self, name: &str) -> Result<&Vec<Arc<Slot<Program>>>, KindError> {
        self.externs.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.externs.keys().map(String::as_str).collect();
            KindError::Invalid(format!(
                "no extern named `{name}` (externs: {})",
                if known.is_empty() { "none".into() } else { known.join(", ") }
            ))
        })
    }
}

/// Read a file the local config names (never one an update names: those are refused before
/// any kind sees them). Only a regular file of at most [`MAX_LOCAL_FILE_BYTES`]: the open does
/// not wait (a FIFO would block the control thread for good) and the read stops at the limit
/// (`/dev/zero` never ends).
pub fn read_local_file(path: &Path) -> Result<Vec<u8>, KindError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |why: String| KindError::Invalid(format!("cannot read {}: {why}", path.display()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| fail(e.to_string()))?;
    let meta = file.metadata().map_err(|e| fail(e.to_string()))?;
    if !meta.is_file() {
        return Err(fail("not a regular file".into()));
    }
    let too_big = || fail(format!("larger than {MAX_LOCAL_FILE_BYTES} bytes"));
    if meta.len() > MAX_LOCAL_FILE_BYTES {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_LOCAL_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| fail(e.to_string()))?;
    if bytes.len() as u64 > MAX_LOCAL_FILE_BYTES {
        return Err(too_big());
    }
    Ok(bytes)
}

/// An authenticated, reassembled update's program, as the engine hands it to the kind that
/// claims its update kind.
#[derive(Debug, Clone, Copy)]
pub struct UpdateProgram<'a> {
    /// The envelope's kind code (one of the kind's [`ProgramKind::update_kinds`]).
    pub kind: u8,
    pub payload: &'a [u8],
    /// Sequence number (names the program in listings: `lua-seq7`).
    pub seq: u64,
    /// The target as text (`pre`, `extern:fw`, `flow:dport=5000`).
    pub target: &'a str,
    /// The workers it will be installed on.
    pub workers: &'a [usize],
    /// The envelope's NO_JIT flag: run in the interpreter.
    pub no_jit: bool,
    /// The envelope's optimisation level, if it gives one.
    pub opt_level: Option<u8>,
}

/// A program a kind built from an update, with what it carried over from the one before it.
pub struct Built {
    pub program: Program,
    /// Shown in the acknowledgement (a P4 replacement names the tables it kept).
    pub note: Option<String>,
}

/// A program kind: everything the engine needs from it, nothing more. No method runs on a
/// worker: they run on the control thread (or the thread starting the data plane, or one
/// standing in for the control thread, such as a benchmark publishing directly), except
/// `prometheus` and `stats` (also the metrics endpoint's thread) and `watchdog` (its own
/// thread).
pub trait ProgramKind: Send + Sync + 'static {
    /// The kind's name in listings and statistics (`ebpf`, `lua`, `p4`, `tables`).
    fn name(&self) -> &'static str;

    /// The config file's top-level sections this kind reads (`ebpf`, `table`, ...).
    fn sections(&self) -> &'static [&'static str] {
        &[]
    }

    /// The `stage = "..."` names of the specs this kind builds.
    fn stages(&self) -> &'static [&'static str] {
        &[]
    }

    /// Build a program from a spec (`{"stage": "...", ...}`, the whole table). Only the local
    /// config file and the local control socket give specs that name files.
    fn build(&self, spec: &Value, cx: &BuildCx<'_>) -> Result<Program, KindError> {
        let _ = cx;
        Err(KindError::Invalid(format!("the {} kind builds no `{}` stage", self.name(), spec)))
    }

    /// The fields of `spec` that name files of the node, if it has any. A spec that arrives
    /// in an update is remote input: the engine refuses it before the kind opens anything.
    /// No default on purpose: every kind says whether its specs read files.
    fn node_files(&self, spec: &Value) -> Option<&'static str>;

    /// The update envelope kind codes this kind builds programs from.
    fn update_kinds(&self) -> &'static [u8] {
        &[]
    }

    /// Build a program from an update's payload.
    fn build_update(
        &self,
        update: &UpdateProgram<'_>,
        cx: &BuildCx<'_>,
    ) -> Result<Built, KindError> {
        let _ = cx;
        Err(KindError::Invalid(format!(
            "the {} kind takes no update kind {}",
            self.name(),
            update.kind
        )))
    }

    /// A program was published at `target` on `workers` (`None`: the target was emptied).
    /// Kinds that keep per-target state (a Lua function's error reports name its target; a
    /// P4 program's tables are found by target) recognise their own stages by identity.
    fn installed(&self, target: &str, workers: &[usize], program: &Program, version: u64) {
        let _ = (target, workers, program, version);
    }

    /// The control API operations (`op` names) this kind answers.
    fn ops(&self) -> &'static [&'static str] {
        &[]
    }

    /// Answer one control operation; `request` is the whole request object, `op` included.
    fn request(&self, op: &str, request: &Value) -> Result<Value, KindError> {
        let _ = request;
        Err(KindError::Invalid(format!("the {} kind has no operation `{op}`", self.name())))
    }

    /// Counters for the `stats` response, under the kind's name.
    fn stats(&self) -> Option<Value> {
        None
    }

    /// Prometheus text families of the kind's own counters, appended to the engine's.
    fn prometheus(&self, out: &mut String) {
        let _ = out;
    }

    /// Slow upkeep, on the control thread between requests (every pass, at most a few ms
    /// apart; the engine calls it at least every 50 ms).
    fn housekeeping(&self) {}

    /// How often [`ProgramKind::watchdog`] must run, for kinds whose programs can run away (a
    /// Lua function stuck in a loop). The engine runs every watchdog on one thread of its own,
    /// so a slow request on the control thread never delays it.
    fn watchdog_period(&self) -> Option<Duration> {
        None
    }

    /// The kind itself, for an embedding program that drives one kind through its own typed
    /// API (the P4Runtime server reaches the P4 kind's tables this way). `None`: the kind
    /// offers nothing beyond this trait.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// Look at the workers and stop what has run too long.
    fn watchdog(&self, now_ns: u64) {
        let _ = now_ns;
    }
}

/// Longest program name kept from an update's source (`hotplane-lua`'s and `hotplane-p4`'s
/// `naming`).
pub const MAX_PROGRAM_NAME: usize = 64;

/// Whether `name` may name a program sent in an update: a plain file name (letters, digits,
/// `.`, `_`, `-`), not empty, at most [`MAX_PROGRAM_NAME`] bytes. Names come from senders and
/// are shown to operators: nothing else.
pub fn is_plain_program_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_PROGRAM_NAME
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// How a language writes a block comment: `("/*", "*/")`, `("--[[", "]]")`.
pub type CommentMarks = (&'static str, &'static str);

/// An update carries only source, so its sender names the program in it: a block comment at
/// the very end, `{open}hotplane:file=NAME{close}`, with no newline of its own, so every line
/// keeps its number, end-of-file diagnostics included. (After a last line that is a `#`
/// directive it goes on a line of its own, where it cannot change the directive.) `source`
/// with it, if `name` is plain ([`is_plain_program_name`]).
pub fn with_name_comment(mut source: Vec<u8>, name: &str, (open, close): CommentMarks) -> Vec<u8> {
    if is_plain_program_name(name) {
        let last = source.rsplit(|&b| b == b'\n').next().unwrap_or_default();
        if last.trim_ascii_start().starts_with(b"#") {
            source.push(b'\n');
        }
        source.extend_from_slice(format!("{open}hotplane:file={name}{close}").as_bytes());
    }
    source
}

/// The name a source gives itself with [`with_name_comment`], if it does and the name is
/// plain.
pub fn name_in_comment(source: &[u8], (open, close): CommentMarks) -> Option<&str> {
    // Bytes, not text: what comes before the comment need not be UTF-8 (Lua's need not).
    let last = source.rsplit(|&b| b == b'\n').next()?.strip_suffix(close.as_bytes())?;
    let marker = format!("{open}hotplane:file=");
    let at = last.windows(marker.len()).rposition(|w| w == marker.as_bytes())?;
    let name = std::str::from_utf8(&last[at + marker.len()..]).ok()?;
    is_plain_program_name(name).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_keeps_the_class() {
        let e = context(KindError::Rejected("verifier: r1 invalid".into()), "pipeline.pre");
        assert_eq!(e, KindError::Rejected("pipeline.pre: verifier: r1 invalid".into()));
        assert_eq!(e.message(), "pipeline.pre: verifier: r1 invalid");
    }

    /// A FIFO would block the control thread for good (the open does not wait) and an endless
    /// or huge file would grow memory without end (the read stops at the limit).
    #[test]
    fn fifos_and_oversized_files_are_refused() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = std::env::temp_dir().join(format!("hotplane-core-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `name` is a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        // Should the open block on the FIFO (the bug), open it for writing so the test ends
        // with a wrong message instead of hanging.
        let done = Arc::new(AtomicBool::new(false));
        let unblocker = {
            let (done, fifo) = (done.clone(), fifo.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(200));
                    use std::os::unix::fs::OpenOptionsExt;
                    let _ = std::fs::OpenOptions::new()
                        .write(true)
                        .custom_flags(libc::O_NONBLOCK)
                        .open(&fifo);
                }
            })
        };
        let e = read_local_file(&fifo).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let big = dir.join("big");
        std::fs::File::create(&big).unwrap().set_len(MAX_LOCAL_FILE_BYTES + 1).unwrap();
        let e = read_local_file(&big).unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        done.store(true, Ordering::Relaxed);
        unblocker.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn local_files_must_exist_and_be_regular() {
        let e = read_local_file(Path::new("/nonexistent/hotplane-prog.o")).unwrap_err();
        assert!(e.to_string().contains("cannot read /nonexistent/hotplane-prog.o"), "{e}");
        let e = read_local_file(Path::new("/")).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
}
