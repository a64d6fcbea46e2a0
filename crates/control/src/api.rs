//! The local control API: newline-delimited JSON over a UNIX stream socket. Each request is one
//! JSON object on one line; each response is one JSON object on one line. `docs/control-api.md`
//! documents every operation.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Longest request line a server accepts (programs travel inside requests).
pub const MAX_REQUEST_BYTES: usize = 16 << 20;

/// One table entry as requests and the config file write it. `matches` is the key as text:
/// `10.0.0.1`, `0x0a000001`, `42` (exact), `10.0.0.0/8` (lpm), `VALUE&&&MASK` or `LO..HI`
/// (ternary); `params` are the action's parameter values in order (decimal or 0x hex).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableEntrySpec {
    pub table: String,
    #[serde(rename = "match")]
    pub matches: String,
    pub action: String,
    #[serde(default)]
    pub params: Vec<String>,
    #[serde(default)]
    pub priority: u32,
}

/// A control request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// Counters of ports, workers, slots and updates.
    Stats {},
    /// Every slot on every worker: target, program, version.
    Slots {},
    /// Flow-table entries of one worker (default: worker 0).
    Flows {
        #[serde(default)]
        worker: Option<u16>,
    },
    /// The pre-defined programs that `switch` can select.
    Predefined {},
    /// Prometheus text exposition.
    Metrics {},
    /// Install a native stage at a target: `{"op":"install","target":"pre","stage":{...}}`.
    Install {
        target: String,
        #[serde(default)]
        worker: Option<u16>,
        stage: Value,
    },
    /// Switch a target to a pre-defined program.
    Switch {
        target: String,
        #[serde(default)]
        worker: Option<u16>,
        id: u32,
    },
    /// Remove the program at a target.
    Remove {
        target: String,
        #[serde(default)]
        worker: Option<u16>,
    },
    /// Submit update-envelope datagrams (hex), authenticated exactly as in-band ones.
    Update { fragments: Vec<String> },
    /// eBPF maps: name, kind, shape and entries in use.
    EbpfMaps {},
    /// Every entry of an eBPF map (keys and values in hex).
    EbpfMapDump { map: String },
    /// Write one entry: `key` and `value` as `0x`-prefixed hex bytes, or decimal numbers
    /// (little-endian, as wide as the key or value). Per-CPU maps
    /// take one value for every CPU or one per CPU, concatenated.
    EbpfMapUpdate {
        map: String,
        key: String,
        value: String,
        /// 0 any, 1 only new keys, 2 only existing keys (BPF_ANY, BPF_NOEXIST, BPF_EXIST).
        #[serde(default)]
        flags: u64,
    },
    /// Delete one entry.
    EbpfMapDelete { map: String, key: String },
    /// One entry: its value(s) in hex, `null` when absent.
    EbpfMapLookup { map: String, key: String },
    /// Every running eBPF program: target, version, name, engine, instructions, machine-code
    /// bytes, maps, verification and compile time, packets per XDP action.
    EbpfProgs {},
    /// The program at `target` with its code: `form` `xlated` (instructions) or `jited`
    /// (machine code in hex).
    EbpfProgDump { target: String, form: String },
    /// Time eBPF programs' runs (`enable`: true), stop (false), or only say whether they are
    /// timed (absent): `{timing}`. Timing costs two clock reads per batch and program.
    EbpfProgStats {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        enable: Option<bool>,
    },
    /// Installed Lua functions: target, options, packets, errors, runaways, last error.
    LuaFunctions {},
    /// Match-action tables: name, kind, size, entries, storage, locking.
    TableList {},
    /// Every entry of a table with its counters, and the default action.
    TableDump { table: String },
    /// Add an entry (see [`TableEntrySpec`]).
    TableAdd(TableEntrySpec),
    /// Replace an entry's action and parameters (its counters stay).
    TableModify(TableEntrySpec),
    /// Delete an entry.
    TableDel {
        table: String,
        #[serde(rename = "match")]
        matches: String,
        #[serde(default)]
        priority: u32,
    },
    /// Delete every entry.
    TableClear { table: String },
    /// Set the action run on a miss.
    TableDefault {
        table: String,
        action: String,
        #[serde(default)]
        params: Vec<String>,
    },
    /// Tables of the running P4 program at `target` (default: the only one): keys, actions,
    /// size, entries in use.
    P4Tables {
        #[serde(default)]
        target: Option<String>,
    },
    /// A P4 table's entries and default action as runtime JSON, by (qualified) table name.
    P4Dump {
        #[serde(default)]
        target: Option<String>,
        table: String,
    },
    /// Write a running P4 program's tables by name: a runtime JSON document
    /// (`{"table_entries": [...]}`, each entry optionally `"type": "MODIFY"` or `"DELETE"`).
    P4Entries {
        #[serde(default)]
        target: Option<String>,
        doc: Value,
    },
    /// One line of simple_switch_CLI's command language (`table_add T A K => P`,
    /// `register_read R 0`, `mc_node_create 0 1 2`, ...) against the P4 program at `target`
    /// (default: the only one); the result has a `text` for people and the values for programs.
    P4Cli {
        #[serde(default)]
        target: Option<String>,
        line: String,
    },
    /// One entry of a WASP store (`in:PORT`, `out:PORT` or `node`): its 32-byte bank as four
    /// words, if the key is alive; `scope` is `public` (default) or `protected`.
    WaspGet {
        store: String,
        key: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
    },
    /// Chain specialisation: per position, what its eBPF program is specialised to, the
    /// guard, and how many packets the guard admitted and refused (docs/chain.md).
    ChainStatus {},
    /// Follow the next `count` packets the flow `selector` matches (`proto=udp,dst=10.0.1.4`,
    /// as `--target flow:` takes; default every packet), one in `every`: each position's
    /// verdict, output port, changed header fields and what its stage explains.
    TraceStart {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<String>,
        #[serde(default = "ten")]
        count: u64,
        #[serde(default = "one")]
        every: u64,
    },
    /// The traced packets recorded since the last read (at most `max`), with how many are
    /// still to come and how many were lost to a full queue.
    TraceRead {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<usize>,
    },
    /// Stop following packets.
    TraceStop {},
    /// Copy the next `count` frames (0: until stopped, at most 100 000 000) that pass `point`
    /// (`rx`, `tx`, `drop`, or after a position: `pre`, `flows`, `mid`, `post`), optionally
    /// only those of port `port` (a name or number) and those the flow `selector` matches, cut
    /// to `snaplen` bytes. Answers the capture's `id`; a capture nobody reads for 2 s stops.
    CaptureStart {
        #[serde(default = "rx")]
        point: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<String>,
        #[serde(default)]
        count: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        snaplen: Option<u32>,
    },
    /// The frames copied since the last read (at most `max`; hex, with a wall-clock time in
    /// nanoseconds), with how many are still to come and how many were lost to a full queue.
    CaptureRead {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<usize>,
        /// Refused if another capture replaced this one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<u64>,
    },
    /// Stop copying frames (capture `id`, or whichever runs).
    CaptureStop {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<u64>,
    },
    /// Stop the data plane.
    Shutdown {},
}

fn ten() -> u64 {
    10
}

fn rx() -> String {
    "rx".into()
}

fn one() -> u64 {
    1
}

/// A control response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Response {
    pub fn ok(result: Value) -> Self {
        Self { ok: true, result: Some(result), error: None }
    }

    pub fn err(msg: impl Into<String>) -> Self {
        Self { ok: false, result: None, error: Some(msg.into()) }
    }

    /// The result, or the error as [`ClientError::Refused`].
    pub fn into_result(self) -> Result<Value, ClientError> {
        match self {
            Response { ok: true, result, .. } => Ok(result.unwrap_or(Value::Null)),
            Response { error, .. } => Err(ClientError::Refused(error.unwrap_or_default())),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the data plane at {path} (is `hotplane run` running with this socket?)")]
    Connect {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("control connection failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("malformed response from the data plane: {0}")]
    Protocol(String),
    #[error("{0}")]
    Refused(String),
}

/// A blocking client for the control socket.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    pub fn connect(path: &Path) -> Result<Self, ClientError> {
        let s = UnixStream::connect(path)
            .map_err(|source| ClientError::Connect { path: path.display().to_string(), source })?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Self { reader: BufReader::new(s.try_clone()?), writer: s })
    }

    /// Send a request and wait for its response; a refused request becomes `Refused`.
    pub fn call(&mut self, req: &Request) -> Result<Value, ClientError> {
        let mut line = serde_json::to_vec(req).map_err(|e| ClientError::Protocol(e.to_string()))?;
        line.push(b'\n');
        self.writer.write_all(&line)?;
        let mut resp = String::new();
        if self.reader.read_line(&mut resp)? == 0 {
            return Err(ClientError::Protocol("connection closed before a response".into()));
        }
        let r: Response =
            serde_json::from_str(&resp).map_err(|e| ClientError::Protocol(e.to_string()))?;
        if r.ok {
            Ok(r.result.unwrap_or(Value::Null))
        } else {
            Err(ClientError::Refused(r.error.unwrap_or_else(|| "refused without a reason".into())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_have_a_stable_json_form() {
        let r: Request =
            serde_json::from_str(r#"{"op":"install","target":"pre","stage":{"stage":"drop"}}"#)
                .unwrap();
        assert_eq!(
            r,
            Request::Install {
                target: "pre".into(),
                worker: None,
                stage: serde_json::json!({"stage":"drop"})
            }
        );
        assert_eq!(serde_json::to_string(&Request::Stats {}).unwrap(), r#"{"op":"stats"}"#);
        assert!(serde_json::from_str::<Request>(r#"{"op":"stats","extra":1}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"op":"launch-missiles"}"#).is_err());
    }
}
